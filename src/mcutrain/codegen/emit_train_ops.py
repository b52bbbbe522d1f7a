"""The C of each ZO and BP-QAS schedule op: one emitter per op in `KERNEL_EMITTERS` (used by `emit_train`).

`StepEmitter` names the tensors of one schedule (arena macros, RAM arrays, state) and collects
the float constants the kernels need; each emitter turns one kernel into C calls over them.
Ops whose C depends on the method are resolved by `method_op`.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from mcutrain.codegen.cfloat import c_float, c_float_array
from mcutrain.codegen.cformat import c_comment, unique_idents
from mcutrain.codegen.emit import ExportError, dims_init, wrapped_call
from mcutrain.codegen.emit_base import checked
from mcutrain.codegen.rounding_c import tflite_add, tflite_mean
from mcutrain.graph import Node, Op
from mcutrain.methods import qas
from mcutrain.methods.step_limit import c_max_step
from mcutrain.plan.schedule import Kernel, Role, Schedule
from mcutrain.plan.training import TrainingPlan


class StepEmitter:
    """Turns the kernels of one schedule into the body of `model_train_step`."""

    def __init__(self, method, s: Schedule, plan: TrainingPlan, ids: dict[str, str]):
        self.m, self.s, self.plan, self.ids = method, s, plan, ids
        self.qm = method.qm
        self.g = self.qm.graph
        self.B = s.batch
        self.tids = unique_idents(sorted(plan.offsets))
        self.extra_consts: dict[str, str] = {}
        self.unit_y: dict[str, str] = {}      # NP unit tag -> its base output tensor

    # -- names
    def t(self, name: str) -> str:
        """The C expression of a schedule tensor (arena macro, RAM array or state)."""
        t = self.s.tensors[name]
        if name == "state:counters":
            return "&model_state.rng"
        if t.role == Role.WEIGHT:
            layer, kind = name.rsplit(".", 1)
            return f"{self.ids[layer]}_{kind}"
        if name.startswith("state:") and name.endswith(".velocity"):
            return f"{self.ids[name[6:-9]]}_velocity"
        if name not in self.plan.offsets:
            raise ExportError(f"tensor '{name}' has no arena offset")
        return f"A_{self.tids[name]}"

    def weight(self, n: Node) -> str:
        return f"{self.ids[n.name]}_weight"

    def round_state(self, n: Node) -> str:
        """The `round_state` argument of layer `n`'s int8 update: NULL (round to nearest) or the
        xorshift32 state its stochastic rounding draws from (bp-qas: the method's stream, in update
        order; zo: the state its unit saved before that unit's query draws, `_zero`)."""
        if self.m.cfg.update_rounding != "stochastic":
            return "NULL"
        if self.m.name == "bp-qas":
            return "&model_state.rng"
        unit = next(u for u in self.m.units if n.name in u.layers)
        return f"&{self.ids[unit.layers[0]]}_round_rng"

    def bias(self, n: Node) -> str:
        return f"{self.ids[n.name]}_bias"

    def fconst(self, name: str, values: np.ndarray, comment: str) -> str:
        if name not in self.extra_consts:
            self.extra_consts[name] = c_float_array(name, values, comment)
        return name

    def s_w(self, n: Node) -> str:
        o = self.qm.weights[n.name].shape[0]
        v = np.broadcast_to(self.qm.weight_qparams[n.name].scale, (o,)).astype(np.float32)
        return self.fconst(f"{self.ids[n.name]}_s_w", v, f"{n.name}: weight scales s_w (QAS)")

    def s_b(self, n: Node) -> str:
        o = self.qm.weights[n.name].shape[0]
        s_w = np.broadcast_to(self.qm.weight_qparams[n.name].scale, (o,)).astype(np.float32)
        v = qas.bias_scale(self.qm.scale(n.inputs[0]), s_w)
        return self.fconst(f"{self.ids[n.name]}_s_b", v, f"{n.name}: bias scales s_x * s_w (QAS)")

    def slope(self, n: Node) -> str:
        o = self.qm.weights[n.name].shape[0]
        s_w = np.broadcast_to(self.qm.weight_qparams[n.name].scale, (o,)).astype(np.float32)
        s_x, s_y = np.float32(self.qm.scale(n.inputs[0])), np.float32(self.qm.scale(n.name))
        v = ((s_x * s_w) / s_y).astype(np.float32)
        return self.fconst(f"{self.ids[n.name]}_slope", v,
                           f"{n.name}: requantization slope M_c = s_x * s_w / s_y")

    # -- shared pieces
    def dims(self, shape: tuple[int, ...]) -> str:
        d = dims_init(tuple(shape))
        return "{" + str(self.B) + d[2:]

    def conv_params(self, n: Node) -> str:
        a = n.attrs
        (sh, sw), (pt, _, pl, _) = a["stride"], a["padding"]
        lo, hi = self.qm.act_range(n)
        zx, zy = self.qm.zero_point(n.inputs[0]), self.qm.zero_point(n.name)
        return (f"static const mt_conv_params p = {{{zx}, {zy}, {sh}, {sw}, {pt}, {pl}, {a['groups']}, "
                f"{lo}, {hi}}};")

    def filter_dims(self, n: Node) -> str:
        return f"static const mt_dims f_d = {{{', '.join(map(str, self.qm.weights[n.name].shape))}}};"

    def scratch(self, k: Kernel) -> str:
        sc = [w for w in k.writes if w.endswith(".scratch")]
        if not sc:
            return "{NULL, 0}"
        return f"{{(void *){self.t(sc[0])}, {self.s.tensors[sc[0]].nbytes}}}"



def _kernel(fn: str, args: list[str], indent: int = 8) -> list[str]:
    """A runtime kernel call, wrapped as `emit` wraps them, returning its status on failure."""
    return checked(wrapped_call(fn, args, indent=indent))

def _fwd(e: StepEmitter, k: Kernel) -> list[str]:
    n = e.g.node(k.node)
    out = k.writes[0]
    ins = [e.t(r) for r in k.reads[:len(n.inputs)]]
    y = e.t(out)
    if n.op == Op.FLATTEN:
        if k.alias:
            return ["/* flatten: NHWC order is the flat order, the output is the input's storage */"]
        return [f"memcpy({y}, {ins[0]}, {e.s.tensors[out].nbytes});"]
    pw = [r for r in k.reads if r.startswith("pw:")]
    w = e.t(pw[0]) if pw else e.weight(n)
    b = e.t(pw[1]) if pw else e.bias(n)
    if n.op in (Op.CONV2D, Op.LINEAR):
        nid = e.ids[n.name]
        q = f"static const mt_per_channel_quant q = {{{nid}_multiplier, {nid}_shift}};"
        if n.op == Op.LINEAR:
            o, kk = e.qm.weights[n.name].shape
            lo, hi = e.qm.act_range(n)
            zx, zy = e.qm.zero_point(n.inputs[0]), e.qm.zero_point(n.name)
            return [f"static const mt_linear_params p = {{{zx}, {zy}, {lo}, {hi}}};", q,
                    f"const mt_context ctx = {e.scratch(k)};",
                    *_kernel("mt_linear_fwd_s8",
                                ["&ctx", "&p", "&q", str(e.B), ins[0], str(kk), w, b, str(o), y])]
        head = [e.conv_params(n), q, f"static const mt_dims in_d = {e.dims(e.g.shape(n.inputs[0]))};",
                e.filter_dims(n), f"static const mt_dims out_d = {e.dims(e.g.shape(n.name))};"]
        if k.op == "depthwise_conv2d_fwd":
            return [*head, *_kernel("mt_depthwise_conv2d_fwd_s8",
                                       ["&p", "&q", "&in_d", ins[0], "&f_d", w, b, "&out_d", y])]
        return [*head, f"const mt_context ctx = {e.scratch(k)};",
                *_kernel("mt_conv2d_fwd_s8",
                            ["&ctx", "&p", "&q", "&in_d", ins[0], "&f_d", w, b, "&out_d", y])]
    if n.op in (Op.MAXPOOL, Op.AVGPOOL):
        (kh, kw), (sh, sw) = n.attrs["kernel"], n.attrs["stride"]
        fn = "mt_maxpool_fwd_s8" if n.op == Op.MAXPOOL else "mt_avgpool_fwd_s8"
        return [f"static const mt_pool_params p = {{{kh}, {kw}, {sh}, {sw}}};",
                f"static const mt_dims in_d = {e.dims(e.g.shape(n.inputs[0]))};",
                f"static const mt_dims out_d = {e.dims(e.g.shape(n.name))};",
                *_kernel(fn, ["&p", "&in_d", ins[0], "&out_d", y])]
    if n.op == Op.GLOBAL_AVGPOOL:
        in_d = f"static const mt_dims in_d = {e.dims(e.g.shape(n.inputs[0]))};"
        if e.qm.rounding == "tflite":
            params, fn = tflite_mean(e.qm, n)
            return [params, in_d, *_kernel(fn, ["&p", "&in_d", ins[0], y])]
        return [in_d, *_kernel("mt_global_avgpool_fwd_s8", ["&in_d", ins[0], y])]
    if n.op in (Op.RELU, Op.RELU6):
        lo, hi = e.qm.act_range(n)
        size = e.s.tensors[out].elements
        return _kernel("mt_relu_fwd_s8", [str(lo), str(hi), str(size), ins[0], y])
    if n.op == Op.ADD and e.qm.rounding == "tflite":
        params, fn = tflite_add(e.qm, n)
        return [params, *_kernel(fn, ["&p", str(e.s.tensors[out].elements), ins[0], ins[1], y])]
    if n.op == Op.ADD:
        ma, mb, sh = e.qm.add_params(n)
        lo, hi = e.qm.act_range(n)
        za, zb = e.qm.zero_point(n.inputs[0]), e.qm.zero_point(n.inputs[1])
        return [f"static const mt_add_params p = {{{za}, {zb}, {ma}, {mb}, {sh}, {e.qm.zero_point(n.name)}, "
                f"{lo}, {hi}}};",
                *_kernel("mt_add_fwd_s8", ["&p", str(e.s.tensors[out].elements), ins[0], ins[1], y])]
    raise ExportError(f"node '{n.name}': op {n.op.value} has no C kernel")  # pragma: no cover


def _logit_scale(e: StepEmitter) -> str:
    return c_float(e.qm.scale(e.g.output))


def _loss(e: StepEmitter, k: Kernel) -> list[str]:
    K = e.g.num_classes
    logits = e.t(k.reads[0])
    loss = e.t(k.writes[0])
    lines = []
    if len(k.writes) > 1:   # bp-qas: the Q24 error, then the float32 logit error in the same storage
        err = e.t(k.writes[1])
        lines += _kernel("mt_softmax_ce_s8", [str(e.B), str(K), logits, _logit_scale(e), "labels", loss,
                                                 f"(int32_t *)(void *){err}"])
        lines += _kernel("mt_softmax_ce_bwd_s32_f32", [str(e.B), str(K), f"(const int32_t *)(void *){err}",
                                                           _logit_scale(e), err])
    else:
        lines += _kernel("mt_softmax_ce_s8", [str(e.B), str(K), logits, _logit_scale(e), "labels", loss,
                                                 "NULL"])
    if k.phase == "loss":
        lines += ["if (logits != NULL) {",
                  f"    memcpy(logits, {logits}, {e.B * K});",
                  "}",
                  f"memcpy(losses, {loss}, {4 * e.B});"]
    return lines


def _zero(e: StepEmitter, k: Kernel) -> list[str]:
    lines = [f"memset({e.t(k.writes[0])}, 0, {e.s.tensors[k.writes[0]].nbytes});"]
    if e.m.name != "zo" or e.m.cfg.update_rounding != "stochastic":
        return lines
    unit = next((u for u in e.m.units if k.name == f"{u.kind}:{u.layers[0]}.zero"), None)
    if unit is None:
        return lines
    # the unit's rounding draws are the stream's next D draws, before its mask and query draws
    # (ZOConfig.update_rounding): keep the state there, step the stream past them
    d = sum(e.qm.weights[m].size for m in unit.layers)
    var = f"{e.ids[unit.layers[0]]}_round_rng"
    e.extra_consts[var] = (f"/* {c_comment(unit.layers[0])}: state of its unit's stochastic update rounding "
                           f"({d} draws per step) */\nstatic uint32_t {var};")
    return [*lines, f"{var} = model_state.rng;", "{", "    int32_t i;",
            f"    for (i = 0; i < {d}; ++i) {{", "        (void)mt_xorshift32_next(&model_state.rng);",
            "    }", "}"]


def _zo_cfg(e: StepEmitter):
    return e.m.cfg


def _perturb_wp(e: StepEmitter, k: Kernel) -> list[str]:
    c = _zo_cfg(e)
    n = e.g.node(k.node)
    w = e.qm.weights[n.name]
    pw, pb = k.writes[0], k.writes[1]
    return ["replay = model_state.rng; /* the accumulation replays this query's draws */",
            *_kernel("mt_zo_perturb_wp_s8",
                        ["&model_state.rng", str(c.sigma_w), str(c.sigma_b), str(w.size), e.weight(n),
                         str(w.shape[0]), e.bias(n), e.t(pw), e.t(pb)])]


def _perturb_np(e: StepEmitter, k: Kernel) -> list[str]:
    c = _zo_cfg(e)
    n = e.g.node(k.node)
    lo, hi = e.qm.act_range(n)
    y = k.reads[0]
    e.unit_y[k.loop or ""] = y
    return ["replay = model_state.rng; /* the accumulation replays this query's draws */",
            *_kernel("mt_zo_perturb_np_s8", ["&model_state.rng", str(c.sigma_node), str(lo), str(hi),
                                                str(e.s.tensors[y].elements), e.t(y), e.t(k.writes[0])])]


def _accumulate_wp(e: StepEmitter, k: Kernel) -> list[str]:
    lq, l0, acc = (e.t(r) for r in k.reads[:3])
    return ["{",
            "    int64_t dl = 0;",
            "    int32_t b;",
            f"    for (b = 0; b < {e.B}; ++b) {{",
            f"        dl += (int64_t){lq}[b] - {l0}[b]; /* batch loss difference, |dl| < B * 2^24 */",
            "    }",
            *("    " + s for s in _kernel("mt_zo_accumulate_wp_s64",
                                              ["&replay", "dl", str(e.s.tensors[k.reads[2]].elements), acc],
                                              indent=12)),
            "}"]


def _accumulate_np(e: StepEmitter, k: Kernel) -> list[str]:
    n = e.g.node(k.node)
    lo, hi = e.qm.act_range(n)
    lq, l0, acc = (e.t(r) for r in k.reads[:3])
    d_out = int(np.prod(e.g.shape(n.name)))
    y = e.t(e.unit_y[k.loop or ""])
    return ["{",
            "    int32_t b;",
            f"    for (b = 0; b < {e.B}; ++b) {{",
            f"        {lq}[b] -= {l0}[b]; /* per-sample loss difference, in place */",
            "    }",
            "}",
            *_kernel("mt_zo_accumulate_np_s32",
                        ["&replay", str(e.B), str(d_out), lq, y, str(lo), str(hi), acc])]


def _qas_k(e: StepEmitter, n: Node, coef: str, scale: str, out: str) -> list[str]:
    """k = (lr * coef) / (s[c] * s[c]) of one channel c (QAS; without QAS: lr * coef)."""
    use = f"&{scale}[c]" if e.m.cfg.qas else "NULL"
    return _kernel("mt_qas_factor_f32", ["lr", "1", f"&{coef}", use, f"&{out}"])


def _qas_update_wp(e: StepEmitter, k: Kernel) -> list[str]:
    c = _zo_cfg(e)
    n = e.g.node(k.node)
    w = e.qm.weights[n.name]
    o, per = w.shape[0], w.size // w.shape[0]
    acc = e.t(k.reads[0])
    sw, sb = e.s_w(n), e.s_b(n)
    body = [*_qas_k(e, n, "cw", sw, "kw"), *_qas_k(e, n, "cb", sb, "kb"),
            *_kernel("mt_qas_upd_s8_s64",
                        ["1", str(per), f"{acc} + c * {per}", "&kw", e.round_state(n),
                         str(c_max_step(c.max_step)), f"{e.weight(n)} + c * {per}"],
                        indent=12),
            *_kernel("mt_qas_upd_s32_s64",
                        ["1", f"{acc} + {w.size} + c", "&kb", f"{e.bias(n)} + c"], indent=12)]
    return ["{",
            f"    const float gamma = mt_zo_gns_gamma_f32({c.queries}, {w.size + o - 1}, {int(c.gns)});",
            f"    const float cw = mt_zo_coef_f32(gamma, {c.queries}, {c.sigma_w}, {e.B});",
            f"    const float cb = mt_zo_coef_f32(gamma, {c.queries}, {c.sigma_b}, {e.B});",
            "    int32_t c;",
            f"    for (c = 0; c < {o}; ++c) {{ /* per channel: k[c], then that channel's weights and bias */",
            "        float kw;",
            "        float kb;",
            *("        " + s for s in body),
            "    }",
            "}"]


def _bwd_w_update_np(e: StepEmitter, k: Kernel) -> list[str]:
    c = _zo_cfg(e)
    n = e.g.node(k.node)
    w = e.qm.weights[n.name]
    o = w.shape[0]
    gy, x = e.t(k.reads[0]), e.t(k.reads[1])
    d_out = int(np.prod(e.g.shape(n.name)))
    sw, sb, slope = e.s_w(n), e.s_b(n), e.slope(n)
    if n.op == Op.LINEAR:
        call = wrapped_call("mt_linear_bwd_w_qas_upd_s8_s32",
                     [str(e.qm.zero_point(n.inputs[0])), str(e.B), x, str(w.shape[1]), gy, str(o), "c",
                      "kw", "kb", e.round_state(n), str(c_max_step(c.max_step)),
                      e.weight(n), e.bias(n)], indent=12)
        head = []
    else:
        call = wrapped_call("mt_conv2d_bwd_w_qas_upd_s8_s32",
                     ["&p", "&in_d", x, "&out_d", gy, "&f_d", "c", "kw", "kb", e.round_state(n),
                      str(c_max_step(c.max_step)), e.weight(n), e.bias(n)],
                     indent=12)
        head = [e.conv_params(n), f"static const mt_dims in_d = {e.dims(e.g.shape(n.inputs[0]))};",
                e.filter_dims(n), f"static const mt_dims out_d = {e.dims(e.g.shape(n.name))};"]
    body = [f"const float coef = c0 * {slope}[c]; /* c0 * M_c, as mt_zo_np_coef_f32 */",
            *_qas_k(e, n, "coef", sw, "kw"), *_qas_k(e, n, "coef", sb, "kb"), *checked(call)]
    return ["{",
            *("    " + h for h in head),
            f"    const float gamma = mt_zo_gns_gamma_f32({e.B * c.queries}, {d_out - 1}, {int(c.gns)});",
            f"    const float c0 = mt_zo_coef_f32(gamma, {c.queries}, {c.sigma_node}, {e.B});",
            "    int32_t c;",
            f"    for (c = 0; c < {o}; ++c) {{ /* local weight gradient and QAS update per channel */",
            "        float kw;",
            "        float kb;",
            *("        " + s for s in body),
            "    }",
            "}"]


# -- bp-qas


def _requant_bwd(e: StepEmitter, k: Kernel) -> list[str]:
    n = e.g.node(k.node)
    lo, hi = e.qm.act_range(n)
    o = e.qm.weights[n.name].shape[0]
    rows = e.s.tensors[k.writes[0]].elements // o
    return _kernel("mt_requant_bwd_s8_f32", [str(rows), str(o), e.t(k.reads[0]), e.t(k.reads[1]),
                                                e.slope(n), str(lo), str(hi), e.t(k.writes[0])])


def _conv_head(e: StepEmitter, n: Node) -> list[str]:
    """The constant parameter structs a conv kernel call takes (batch B dims)."""
    return [e.conv_params(n), f"static const mt_dims in_d = {e.dims(e.g.shape(n.inputs[0]))};",
            e.filter_dims(n), f"static const mt_dims out_d = {e.dims(e.g.shape(n.name))};"]


def _bwd_in(e: StepEmitter, k: Kernel) -> list[str]:
    n = e.g.node(k.node)
    ea, ex = e.t(k.reads[0]), e.t(k.writes[0])
    if n.op == Op.LINEAR:
        o, kk = e.qm.weights[n.name].shape
        return _kernel("mt_linear_bwd_in_s8_f32", [str(e.B), str(o), ea, e.weight(n), str(kk), ex])
    return [*_conv_head(e, n),
            *_kernel("mt_conv2d_bwd_in_s8_f32", ["&p", "&out_d", ea, "&f_d", e.weight(n), "&in_d", ex])]


def _bwd_w_update_bp(e: StepEmitter, k: Kernel) -> list[str]:
    n = e.g.node(k.node)
    m = e.m
    w = e.qm.weights[n.name]
    o, per = w.shape[0], w.size // w.shape[0]
    train_w = n.name in m.weight_layers
    ea = e.t(k.reads[0])
    mu = float(m.cfg.momentum)
    vel = f"{e.ids[n.name]}_velocity" if mu else None
    grad_b = e.t(next(t for t in k.writes if t.endswith(".bias") and t.startswith("grad:")))
    rows = e.s.tensors[k.reads[0]].elements // o
    sb = e.s_b(n)
    lines = ["{"]
    if train_w and n.op != Op.LINEAR:
        lines += ["    " + s for s in _conv_head(e, n)]
    lines += ["    static const float one = 1.0f;", "    int32_t c;"]
    body: list[str] = []
    body += _kernel("mt_bias_bwd_f32", [str(rows), str(o), ea, grad_b])
    gb = grad_b
    if vel:
        voff = w.size if train_w else 0
        body += _kernel("mt_sgd_momentum_f32", [str(o), c_float(mu), grad_b, f"{vel} + {voff}"])
        gb = f"{vel} + {voff}"
    body += [f"for (c = 0; c < {o}; ++c) {{",
             "    float kb;",
             *("    " + s for s in _qas_k(e, n, "one", sb, "kb")),
             *("    " + s for s in _kernel("mt_qas_upd_s32_f32",
                                              ["1", f"{gb} + c", "&kb", f"{e.bias(n)} + c"], indent=12)),
             "}"]
    if train_w:
        row = e.t(next(t for t in k.writes if t.endswith(".row")))
        x = e.t(k.reads[1])
        if n.op == Op.LINEAR:
            grad = wrapped_call("mt_linear_bwd_w_row_s8_f32",
                         [str(e.qm.zero_point(n.inputs[0])), str(e.B), x, str(per), ea, str(o), "c", row],
                         indent=12)
        else:
            grad = wrapped_call("mt_conv2d_bwd_w_row_s8_f32",
                                ["&p", "&in_d", x, "&out_d", ea, "&f_d", "c", row], indent=12)
        g = row
        inner = checked(grad)
        if vel:
            inner += _kernel("mt_sgd_momentum_f32", [str(per), c_float(mu), row, f"{vel} + c * {per}"],
                                indent=12)
            g = f"{vel} + c * {per}"
        inner += _qas_k(e, n, "one", e.s_w(n), "kw")
        inner += _kernel("mt_qas_upd_s8_f32", ["1", str(per), g, "&kw", e.round_state(n),
                                               f"{e.weight(n)} + c * {per}"], indent=12)
        body += [f"for (c = 0; c < {o}; ++c) {{ /* one row of weight gradient, applied at once */",
                 "    float kw;", *("    " + s for s in inner), "}"]
    lines += ["    " + s for s in body]
    lines.append("}")
    return lines


def _pool_bwd(e: StepEmitter, k: Kernel) -> list[str]:
    n = e.g.node(k.node)
    ey, ex = e.t(k.reads[0]), e.t(k.writes[0])
    in_d = f"static const mt_dims in_d = {e.dims(e.g.shape(n.inputs[0]))};"
    out_d = f"static const mt_dims out_d = {e.dims(e.g.shape(n.name))};"
    if n.op == Op.GLOBAL_AVGPOOL:
        return [in_d, *_kernel("mt_global_avgpool_bwd_f32", ["&in_d", ey, ex])]
    (kh, kw), (sh, sw) = n.attrs["kernel"], n.attrs["stride"]
    pp = f"static const mt_pool_params p = {{{kh}, {kw}, {sh}, {sw}}};"
    if n.op == Op.MAXPOOL:
        x, y = e.t(k.reads[1]), e.t(k.reads[2])
        return [pp, in_d, out_d,
                *_kernel("mt_maxpool_bwd_s8_f32", ["&p", "&in_d", x, "&out_d", y, ey, ex])]
    return [pp, in_d, out_d, *_kernel("mt_avgpool_bwd_f32", ["&p", "&in_d", "&out_d", ey, ex])]


def _relu_bwd(e: StepEmitter, k: Kernel) -> list[str]:
    n = e.g.node(k.node)
    lo, hi = e.qm.act_range(n)
    return _kernel("mt_relu_bwd_s8_f32", [str(lo), str(hi), str(e.s.tensors[k.writes[0]].elements),
                                             e.t(k.reads[1]), e.t(k.reads[0]), e.t(k.writes[0])])


def _alias(e: StepEmitter, k: Kernel) -> list[str]:
    return ["/* the error of a flatten is its output's error: same storage */"]


KERNEL_EMITTERS: dict[str, Callable[[StepEmitter, Kernel], list[str]]] = {
    **{f"{op}_fwd": _fwd for op in ("conv2d", "depthwise_conv2d", "linear", "maxpool", "avgpool",
                                    "global_avgpool", "flatten", "relu", "relu6", "add")},
    "softmax_ce": _loss, "zero": _zero,
    "zo_perturb_wp": _perturb_wp, "zo_perturb_np": _perturb_np,
    "zo_accumulate_wp": _accumulate_wp, "zo_accumulate_np": _accumulate_np,
    "qas_update": _qas_update_wp,
    "requant_bwd": _requant_bwd, "linear_bwd_in": _bwd_in, "conv2d_bwd_in": _bwd_in,
    "depthwise_conv2d_bwd_in": _bwd_in, "reshape": _alias,
    "maxpool_bwd": _pool_bwd, "avgpool_bwd": _pool_bwd, "global_avgpool_bwd": _pool_bwd,
    "relu_bwd": _relu_bwd, "relu6_bwd": _relu_bwd,
}
"""Schedule op -> emitter of its C code. Ops whose C depends on the method are resolved in
`_method_op` (e.g. `conv2d_bwd_w_qas_update` is the NP recovery in zo, a float row in bp-qas)."""


def method_op(method: str, op: str):
    if op.endswith("_bwd_w_qas_update"):
        return _bwd_w_update_np if method == "zo" else _bwd_w_update_bp
    return KERNEL_EMITTERS.get(op)
