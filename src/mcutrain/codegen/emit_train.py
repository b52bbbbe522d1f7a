"""Emit `model.h` / `model.c` with on-device training: `model_train_step` follows the method's schedule.

The step is not re-derived here: `plan.schedule_for(method)` gives the ordered kernels and the
tensors each reads and writes, `plan.plan_training` their arena offsets, and this module turns
each kernel into C calls over exactly those offsets (so the planner's arena bytes are the C
arena's bytes). A kernel op maps to one emitter function in `KERNEL_EMITTERS`; a method the
generator supports is one whose ops all have an emitter (FQT plugs in by adding its ops).
Loops of the schedule (ZO queries) become `for` loops around their kernels.

Trainable weights and biases are RAM arrays initialised from the model (their initial values
sit in Flash as the load image); frozen ones, requantization constants and the float32 scales
of the QAS update stay `const`. Floats are written as C99 hexadecimal literals (exact).
`model_predict` runs the int8 forward pass with the current weights in the same arena.

Example:
    >>> from mcutrain import zoo
    >>> from mcutrain.engines import ptq
    >>> from mcutrain.methods.zo import ZOConfig, ZOMethod
    >>> x = np.random.default_rng(0).random((8, 8, 8, 1), dtype=np.float32)
    >>> m = ZOMethod(ptq.quantize_model(zoo.build("digits-cnn"), x), ZOConfig(queries=2))
    >>> src = emit_training(m, batch=2, kernels="ref")
    >>> "mt_status model_train_step(const int8_t *inputs," in src.header
    True
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from mcutrain.codegen.cformat import c_array, c_comment, c_comment_lines, c_ident, c_string, unique_idents
from mcutrain.codegen.emit import ExportError, _call, _dims, _Emitter, _qparams_comment
from mcutrain.graph import INPUT, Node, Op
from mcutrain.plan import plan_inference_arena
from mcutrain.plan.schedule import Kernel, Role, Schedule
from mcutrain.plan.schedules import schedule_for
from mcutrain.plan.training import TrainingPlan, plan_training

CTYPE = {"s8": "int8_t", "u8": "uint8_t", "s16": "int16_t", "s32": "int32_t", "s64": "int64_t",
         "f32": "float"}
STATE_MAGIC = 0x5453544D
"""'MTST' little-endian: the first word of a saved training state."""
TRAIN_METHODS = ("zo", "bp-qas", "fqt")
"""Methods whose schedules the generator can emit (fqt: `emit_fqt`, precision int8)."""


def c_float(v: float) -> str:
    """An exact C99 float literal of a float32 value (hexadecimal, 'f' suffix)."""
    f = float(np.float32(v))
    if not np.isfinite(f):
        raise ExportError(f"cannot emit the non-finite float {f}")
    return f"{f.hex()}f" if f != 0 else ("-0.0f" if np.signbit(f) else "0.0f")


def c_float_array(name: str, values: np.ndarray, comment: str = "", const: bool = True) -> str:
    """`static const float name[N]` of exact float literals; `const=False` for a RAM array.
    `comment` goes through `c_comment`."""
    flat = np.asarray(values, np.float32).reshape(-1)
    lines = [f"/* {c_comment(comment)} */"] if comment else []
    lines.append(f"static {'const ' if const else ''}float {name}[{max(len(flat), 1)}] = {{")
    items = [c_float(v) for v in flat.tolist()] or ["0.0f"]
    for i in range(0, len(items), 6):
        lines.append("    " + ", ".join(items[i:i + 6]) + ",")
    lines.append("};")
    return "\n".join(lines)


def _ram_array(ctype: str, name: str, values: np.ndarray, per_line: int, comment: str) -> str:
    """A writable (non-const) initialised array: a trainable tensor in RAM."""
    return c_array(ctype, name, values, per_line=per_line, comment=comment, const=False)


@dataclass
class StateEntry:
    """One tensor of the saved training state, in blob order."""

    name: str
    dtype: str
    shape: tuple[int, ...]

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * np.dtype(_NP[self.dtype]).itemsize


_NP = {"s8": "<i1", "u8": "<u1", "s32": "<i4", "f32": "<f4"}
STATE_HEADER_WORDS = 4
"""magic, layout fingerprint, step counter, RNG state (uint32 each)."""


@dataclass
class TrainSource:
    """The generated files and what callers (export, run, tests) need to know about them."""

    header: str
    source: str
    plan: TrainingPlan
    inference_arena_bytes: int
    arena_bytes: int
    const_bytes: int
    ram_weight_bytes: int
    state: list[StateEntry]
    fingerprint: int
    batch: int
    method: str
    options: dict = field(default_factory=dict)

    @property
    def state_bytes(self) -> int:
        return 4 * STATE_HEADER_WORDS + sum(e.nbytes for e in self.state)

    def parse_state(self, blob: bytes) -> dict[str, np.ndarray | int]:
        """A saved state as arrays by name, plus 'steps' and 'rng' (checks magic and fingerprint)."""
        if len(blob) != self.state_bytes:
            raise ValueError(f"state blob has {len(blob)} bytes, expected {self.state_bytes}")
        magic, fp, steps, rng = np.frombuffer(blob[:16], "<u4").tolist()
        if magic != STATE_MAGIC or fp != self.fingerprint:
            raise ValueError("state blob is not from this model (magic or layout fingerprint differ)")
        out: dict[str, np.ndarray | int] = {"steps": steps, "rng": rng}
        off = 16
        for e in self.state:
            out[e.name] = np.frombuffer(blob[off:off + e.nbytes], _NP[e.dtype]).reshape(e.shape).copy()
            off += e.nbytes
        return out


# ---------------------------------------------------------------- the step emitter


class _StepEmitter:
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
        from mcutrain.methods import qas
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
        d = _dims(tuple(shape))
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


def _try(call_lines: list[str]) -> list[str]:
    """Wrap a `st = f(...);` call so a failing kernel returns its status."""
    return [*call_lines, "if (st != MT_OK) {", "    return st;", "}"]


def _fwd(e: _StepEmitter, k: Kernel) -> list[str]:
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
                    *_try(_call("mt_linear_fwd_s8",
                                ["&ctx", "&p", "&q", str(e.B), ins[0], str(kk), w, b, str(o), y]))]
        head = [e.conv_params(n), q, f"static const mt_dims in_d = {e.dims(e.g.shape(n.inputs[0]))};",
                e.filter_dims(n), f"static const mt_dims out_d = {e.dims(e.g.shape(n.name))};"]
        if k.op == "depthwise_conv2d_fwd":
            return [*head, *_try(_call("mt_depthwise_conv2d_fwd_s8",
                                       ["&p", "&q", "&in_d", ins[0], "&f_d", w, b, "&out_d", y]))]
        return [*head, f"const mt_context ctx = {e.scratch(k)};",
                *_try(_call("mt_conv2d_fwd_s8",
                            ["&ctx", "&p", "&q", "&in_d", ins[0], "&f_d", w, b, "&out_d", y]))]
    if n.op in (Op.MAXPOOL, Op.AVGPOOL):
        (kh, kw), (sh, sw) = n.attrs["kernel"], n.attrs["stride"]
        fn = "mt_maxpool_fwd_s8" if n.op == Op.MAXPOOL else "mt_avgpool_fwd_s8"
        return [f"static const mt_pool_params p = {{{kh}, {kw}, {sh}, {sw}}};",
                f"static const mt_dims in_d = {e.dims(e.g.shape(n.inputs[0]))};",
                f"static const mt_dims out_d = {e.dims(e.g.shape(n.name))};",
                *_try(_call(fn, ["&p", "&in_d", ins[0], "&out_d", y]))]
    if n.op == Op.GLOBAL_AVGPOOL:
        return [f"static const mt_dims in_d = {e.dims(e.g.shape(n.inputs[0]))};",
                *_try(_call("mt_global_avgpool_fwd_s8", ["&in_d", ins[0], y]))]
    if n.op in (Op.RELU, Op.RELU6):
        lo, hi = e.qm.act_range(n)
        size = e.s.tensors[out].elements
        return _try(_call("mt_relu_fwd_s8", [str(lo), str(hi), str(size), ins[0], y]))
    if n.op == Op.ADD:
        ma, mb, sh = e.qm.add_params(n)
        lo, hi = e.qm.act_range(n)
        za, zb = e.qm.zero_point(n.inputs[0]), e.qm.zero_point(n.inputs[1])
        return [f"static const mt_add_params p = {{{za}, {zb}, {ma}, {mb}, {sh}, {e.qm.zero_point(n.name)}, "
                f"{lo}, {hi}}};",
                *_try(_call("mt_add_fwd_s8", ["&p", str(e.s.tensors[out].elements), ins[0], ins[1], y]))]
    raise ExportError(f"node '{n.name}': op {n.op.value} has no C kernel")  # pragma: no cover


def _logit_scale(e: _StepEmitter) -> str:
    return c_float(e.qm.scale(e.g.output))


def _loss(e: _StepEmitter, k: Kernel) -> list[str]:
    K = e.g.num_classes
    logits = e.t(k.reads[0])
    loss = e.t(k.writes[0])
    lines = []
    if len(k.writes) > 1:   # bp-qas: the Q24 error, then the float32 logit error in the same storage
        err = e.t(k.writes[1])
        lines += _try(_call("mt_softmax_ce_s8", [str(e.B), str(K), logits, _logit_scale(e), "labels", loss,
                                                 f"(int32_t *)(void *){err}"]))
        lines += _try(_call("mt_softmax_ce_bwd_s32_f32", [str(e.B), str(K), f"(const int32_t *)(void *){err}",
                                                           _logit_scale(e), err]))
    else:
        lines += _try(_call("mt_softmax_ce_s8", [str(e.B), str(K), logits, _logit_scale(e), "labels", loss,
                                                 "NULL"]))
    if k.phase == "loss":
        lines += ["if (logits != NULL) {",
                  f"    memcpy(logits, {logits}, {e.B * K});",
                  "}",
                  f"memcpy(losses, {loss}, {4 * e.B});"]
    return lines


def _zero(e: _StepEmitter, k: Kernel) -> list[str]:
    return [f"memset({e.t(k.writes[0])}, 0, {e.s.tensors[k.writes[0]].nbytes});"]


def _zo_cfg(e: _StepEmitter):
    return e.m.cfg


def _perturb_wp(e: _StepEmitter, k: Kernel) -> list[str]:
    c = _zo_cfg(e)
    n = e.g.node(k.node)
    w = e.qm.weights[n.name]
    pw, pb = k.writes[0], k.writes[1]
    return ["replay = model_state.rng; /* the accumulation replays this query's draws */",
            *_try(_call("mt_zo_perturb_wp_s8",
                        ["&model_state.rng", str(c.sigma_w), str(c.sigma_b), str(w.size), e.weight(n),
                         str(w.shape[0]), e.bias(n), e.t(pw), e.t(pb)]))]


def _perturb_np(e: _StepEmitter, k: Kernel) -> list[str]:
    c = _zo_cfg(e)
    n = e.g.node(k.node)
    lo, hi = e.qm.act_range(n)
    y = k.reads[0]
    e.unit_y[k.loop or ""] = y
    return ["replay = model_state.rng; /* the accumulation replays this query's draws */",
            *_try(_call("mt_zo_perturb_np_s8", ["&model_state.rng", str(c.sigma_node), str(lo), str(hi),
                                                str(e.s.tensors[y].elements), e.t(y), e.t(k.writes[0])]))]


def _accumulate_wp(e: _StepEmitter, k: Kernel) -> list[str]:
    lq, l0, acc = (e.t(r) for r in k.reads[:3])
    return ["{",
            "    int64_t dl = 0;",
            "    int32_t b;",
            f"    for (b = 0; b < {e.B}; ++b) {{",
            f"        dl += (int64_t){lq}[b] - {l0}[b]; /* batch loss difference, |dl| < B * 2^24 */",
            "    }",
            *("    " + s for s in _try(_call("mt_zo_accumulate_wp_s64",
                                              ["&replay", "dl", str(e.s.tensors[k.reads[2]].elements), acc],
                                              indent=12))),
            "}"]


def _accumulate_np(e: _StepEmitter, k: Kernel) -> list[str]:
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
            *_try(_call("mt_zo_accumulate_np_s32",
                        ["&replay", str(e.B), str(d_out), lq, y, str(lo), str(hi), acc]))]


def _qas_k(e: _StepEmitter, n: Node, coef: str, scale: str, out: str) -> list[str]:
    """k = (lr * coef) / (s[c] * s[c]) of one channel c (QAS; without QAS: lr * coef)."""
    use = f"&{scale}[c]" if e.m.cfg.qas else "NULL"
    return _try(_call("mt_qas_factor_f32", ["lr", "1", f"&{coef}", use, f"&{out}"]))


def _qas_update_wp(e: _StepEmitter, k: Kernel) -> list[str]:
    c = _zo_cfg(e)
    n = e.g.node(k.node)
    w = e.qm.weights[n.name]
    o, per = w.shape[0], w.size // w.shape[0]
    acc = e.t(k.reads[0])
    sw, sb = e.s_w(n), e.s_b(n)
    body = [*_qas_k(e, n, "cw", sw, "kw"), *_qas_k(e, n, "cb", sb, "kb"),
            *_try(_call("mt_qas_upd_s8_s64",
                        ["1", str(per), f"{acc} + c * {per}", "&kw", f"{e.weight(n)} + c * {per}"],
                        indent=12)),
            *_try(_call("mt_qas_upd_s32_s64",
                        ["1", f"{acc} + {w.size} + c", "&kb", f"{e.bias(n)} + c"], indent=12))]
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


def _bwd_w_update_np(e: _StepEmitter, k: Kernel) -> list[str]:
    c = _zo_cfg(e)
    n = e.g.node(k.node)
    w = e.qm.weights[n.name]
    o = w.shape[0]
    gy, x = e.t(k.reads[0]), e.t(k.reads[1])
    d_out = int(np.prod(e.g.shape(n.name)))
    sw, sb, slope = e.s_w(n), e.s_b(n), e.slope(n)
    if n.op == Op.LINEAR:
        call = _call("mt_linear_bwd_w_qas_upd_s8_s32",
                     [str(e.qm.zero_point(n.inputs[0])), str(e.B), x, str(w.shape[1]), gy, str(o), "c",
                      "kw", "kb", e.weight(n), e.bias(n)], indent=12)
        head = []
    else:
        call = _call("mt_conv2d_bwd_w_qas_upd_s8_s32",
                     ["&p", "&in_d", x, "&out_d", gy, "&f_d", "c", "kw", "kb", e.weight(n), e.bias(n)],
                     indent=12)
        head = [e.conv_params(n), f"static const mt_dims in_d = {e.dims(e.g.shape(n.inputs[0]))};",
                e.filter_dims(n), f"static const mt_dims out_d = {e.dims(e.g.shape(n.name))};"]
    body = [f"const float coef = c0 * {slope}[c]; /* c0 * M_c, as mt_zo_np_coef_f32 */",
            *_qas_k(e, n, "coef", sw, "kw"), *_qas_k(e, n, "coef", sb, "kb"), *_try(call)]
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


def _requant_bwd(e: _StepEmitter, k: Kernel) -> list[str]:
    n = e.g.node(k.node)
    lo, hi = e.qm.act_range(n)
    o = e.qm.weights[n.name].shape[0]
    rows = e.s.tensors[k.writes[0]].elements // o
    return _try(_call("mt_requant_bwd_s8_f32", [str(rows), str(o), e.t(k.reads[0]), e.t(k.reads[1]),
                                                e.slope(n), str(lo), str(hi), e.t(k.writes[0])]))


def _conv_head(e: _StepEmitter, n: Node) -> list[str]:
    """The constant parameter structs a conv kernel call takes (batch B dims)."""
    return [e.conv_params(n), f"static const mt_dims in_d = {e.dims(e.g.shape(n.inputs[0]))};",
            e.filter_dims(n), f"static const mt_dims out_d = {e.dims(e.g.shape(n.name))};"]


def _bwd_in(e: _StepEmitter, k: Kernel) -> list[str]:
    n = e.g.node(k.node)
    ea, ex = e.t(k.reads[0]), e.t(k.writes[0])
    if n.op == Op.LINEAR:
        o, kk = e.qm.weights[n.name].shape
        return _try(_call("mt_linear_bwd_in_s8_f32", [str(e.B), str(o), ea, e.weight(n), str(kk), ex]))
    return [*_conv_head(e, n),
            *_try(_call("mt_conv2d_bwd_in_s8_f32", ["&p", "&out_d", ea, "&f_d", e.weight(n), "&in_d", ex]))]


def _bwd_w_update_bp(e: _StepEmitter, k: Kernel) -> list[str]:
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
    body += _try(_call("mt_bias_bwd_f32", [str(rows), str(o), ea, grad_b]))
    gb = grad_b
    if vel:
        voff = w.size if train_w else 0
        body += _try(_call("mt_sgd_momentum_f32", [str(o), c_float(mu), grad_b, f"{vel} + {voff}"]))
        gb = f"{vel} + {voff}"
    body += [f"for (c = 0; c < {o}; ++c) {{",
             "    float kb;",
             *("    " + s for s in _qas_k(e, n, "one", sb, "kb")),
             *("    " + s for s in _try(_call("mt_qas_upd_s32_f32",
                                              ["1", f"{gb} + c", "&kb", f"{e.bias(n)} + c"], indent=12))),
             "}"]
    if train_w:
        row = e.t(next(t for t in k.writes if t.endswith(".row")))
        x = e.t(k.reads[1])
        if n.op == Op.LINEAR:
            grad = _call("mt_linear_bwd_w_row_s8_f32",
                         [str(e.qm.zero_point(n.inputs[0])), str(e.B), x, str(per), ea, str(o), "c", row],
                         indent=12)
        else:
            grad = _call("mt_conv2d_bwd_w_row_s8_f32", ["&p", "&in_d", x, "&out_d", ea, "&f_d", "c", row],
                         indent=12)
        g = row
        inner = _try(grad)
        if vel:
            inner += _try(_call("mt_sgd_momentum_f32", [str(per), c_float(mu), row, f"{vel} + c * {per}"],
                                indent=12))
            g = f"{vel} + c * {per}"
        inner += _qas_k(e, n, "one", e.s_w(n), "kw")
        inner += _try(_call("mt_qas_upd_s8_f32", ["1", str(per), g, "&kw", f"{e.weight(n)} + c * {per}"],
                            indent=12))
        body += [f"for (c = 0; c < {o}; ++c) {{ /* one row of weight gradient, applied at once */",
                 "    float kw;", *("    " + s for s in inner), "}"]
    lines += ["    " + s for s in body]
    lines.append("}")
    return lines


def _pool_bwd(e: _StepEmitter, k: Kernel) -> list[str]:
    n = e.g.node(k.node)
    ey, ex = e.t(k.reads[0]), e.t(k.writes[0])
    in_d = f"static const mt_dims in_d = {e.dims(e.g.shape(n.inputs[0]))};"
    out_d = f"static const mt_dims out_d = {e.dims(e.g.shape(n.name))};"
    if n.op == Op.GLOBAL_AVGPOOL:
        return [in_d, *_try(_call("mt_global_avgpool_bwd_f32", ["&in_d", ey, ex]))]
    (kh, kw), (sh, sw) = n.attrs["kernel"], n.attrs["stride"]
    pp = f"static const mt_pool_params p = {{{kh}, {kw}, {sh}, {sw}}};"
    if n.op == Op.MAXPOOL:
        x, y = e.t(k.reads[1]), e.t(k.reads[2])
        return [pp, in_d, out_d,
                *_try(_call("mt_maxpool_bwd_s8_f32", ["&p", "&in_d", x, "&out_d", y, ey, ex]))]
    return [pp, in_d, out_d, *_try(_call("mt_avgpool_bwd_f32", ["&p", "&in_d", "&out_d", ey, ex]))]


def _relu_bwd(e: _StepEmitter, k: Kernel) -> list[str]:
    n = e.g.node(k.node)
    lo, hi = e.qm.act_range(n)
    return _try(_call("mt_relu_bwd_s8_f32", [str(lo), str(hi), str(e.s.tensors[k.writes[0]].elements),
                                             e.t(k.reads[1]), e.t(k.reads[0]), e.t(k.writes[0])]))


def _alias(e: _StepEmitter, k: Kernel) -> list[str]:
    return ["/* the error of a flatten is its output's error: same storage */"]


KERNEL_EMITTERS: dict[str, Callable[[_StepEmitter, Kernel], list[str]]] = {
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


def _method_op(method: str, op: str):
    if op.endswith("_bwd_w_qas_update"):
        return _bwd_w_update_np if method == "zo" else _bwd_w_update_bp
    return KERNEL_EMITTERS.get(op)


# ---------------------------------------------------------------- checks


def check_trainable(method) -> None:
    """Refuse method settings the generated step does not implement, saying what to use instead."""
    name = getattr(method, "name", "")
    if name not in TRAIN_METHODS:
        raise ExportError(f"not implemented yet for C (method {name}); "
                          f"use one of: none, {', '.join(TRAIN_METHODS)}")
    if name == "zo":
        c = method.cfg
        if c.mask != "none":
            raise ExportError(f"zo perturbation mask '{c.mask}' has no C kernels yet; "
                              "export with --sparse none")
        if any(len(u.layers) > 1 for u in method.units):
            raise ExportError("zo 'model-wp' (several layers in one perturbation) has no C step yet; "
                              "use --perturb wp, np or mix")
        if c.queries > 127 and any(u.kind == "np" for u in method.units):
            raise ExportError(f"{c.queries} queries: node perturbation in C keeps int32 sums, exact for "
                              "at most 127 queries; use --queries 127 or fewer")
    else:
        if method.cfg.channel_ratio < 1:
            raise ExportError("bp-qas --channel-ratio below 1 has no C step yet; "
                              "export with --channel-ratio 1")
    if any(n.op == Op.ADD for n in method.qm.graph.nodes):
        raise ExportError("residual adds have no backward/perturbation step in the generated C yet; "
                          "train a sequential model (no add nodes)")


def _fingerprint(entries: list[StateEntry], method: str, batch: int) -> int:
    import zlib
    text = f"{method};{batch};" + ";".join(f"{e.name}:{e.dtype}:{e.shape}" for e in entries)
    return zlib.crc32(text.encode()) & 0xFFFFFFFF


# ---------------------------------------------------------------- the files


class _PredictEmitter(_Emitter):
    """The inference emitter, but trainable tensors are RAM arrays emitted by the training side."""

    def __init__(self, qm, plan, ram: set[str]):
        super().__init__(qm, plan)
        self.ram = ram

    def const(self, ctype: str, name: str, values: np.ndarray, comment: str = "") -> str:
        if name in self.ram:
            return name
        return super().const(ctype, name, values, comment)


def emit_training(method, batch: int = 1, kernels: str = "dsp", provenance: str = "") -> TrainSource:
    """model.h / model.c for training `method` (ZOMethod, BPQASMethod or FQT) on batches of `batch`."""
    from mcutrain.codegen.emit import _check_supported

    if getattr(method, "name", "") == "fqt":   # FQT's own kernels and state: emit_fqt
        from mcutrain.codegen.emit_fqt import emit_fqt_training
        return emit_fqt_training(method, batch, kernels, provenance)

    check_trainable(method)
    qm = method.qm
    _check_supported(qm)
    g = qm.graph
    s = schedule_for(method, batch=batch, kernels=kernels)
    plan = plan_training(s)
    if any(s.tensors[t].dtype == "s64" and off % 8 for t, off in plan.offsets.items()):
        plan = plan_training(s, kernels_alignment=8)   # int64 sums need 8-byte alignment on the host
    inf = plan_inference_arena(g, kernels=kernels)
    ids = unique_idents([INPUT] + [n.name for n in g.nodes])
    trained_w = [n.name for n in g.parametric() if f"{n.name}.weight" in s.tensors]
    trained_b = [n.name for n in g.parametric() if f"{n.name}.bias" in s.tensors]
    ram = {f"{ids[n]}_weight" for n in trained_w} | {f"{ids[n]}_bias" for n in trained_b}
    pe = _PredictEmitter(qm, inf, ram)
    arena = max(plan.arena_bytes, inf.arena_bytes)

    # predict(): the inference emitter's blocks with batch 1 at the inference plan's offsets
    blocks = []
    for i, n in enumerate(g.nodes):
        body = pe.node(i, n)
        lines = [f"    {{ /* [{i}] {c_comment(n.name)}: {n.op.value} -> {list(g.shape(n.name))} */"]
        lines += [f"        {x}" for x in body]
        if n.op != Op.FLATTEN:
            lines += ["        if (st != MT_OK) {", "            return st;", "        }"]
        lines += ["        if (model_layer_hook_fn) {",
                  f"            model_layer_hook_fn({i}, {c_string(n.name)}, {pe.tensor(n.name)}, "
                  f"{pe.size(n.name)});",
                  "        }", "    }"]
        blocks.append("\n".join(lines))

    # RAM copies of the trainable tensors and the state layout
    ram_arrays, entries = [], []
    ram_bytes = 0
    for n in g.parametric():
        nid = ids[n.name]
        if n.name in trained_w:
            w = qm.weights[n.name]
            ram_arrays.append(_ram_array("int8_t", f"{nid}_weight", w, 16, f"{n.name}: trainable weight "
                                                                             f"{list(w.shape)} int8 (RAM)"))
            entries.append(StateEntry(f"{n.name}.weight", "s8", tuple(w.shape)))
            ram_bytes += w.size
        if n.name in trained_b:
            b = qm.biases[n.name]
            ram_arrays.append(_ram_array("int32_t", f"{nid}_bias", b, 8,
                                         f"{n.name}: trainable bias int32 (RAM)"))
            entries.append(StateEntry(f"{n.name}.bias", "s32", tuple(b.shape)))
            ram_bytes += 4 * b.size
    for name, t in s.tensors.items():
        if name.startswith("state:") and name.endswith(".velocity"):
            layer = name[6:-9]
            ram_arrays.append(f"/* {c_comment(layer)}: SGD momentum velocity (weight then bias), float32 */\n"
                              f"static float {ids[layer]}_velocity[{t.elements}];")
            entries.append(StateEntry(name[6:], "f32", (t.elements,)))
    fp = _fingerprint(entries, method.name, batch)

    # the step
    se = _StepEmitter(method, s, plan, ids)
    step_lines: list[str] = []
    open_loop: str | None = None
    for k in s.kernels:
        if k.loop != open_loop:
            if open_loop is not None:
                step_lines.append("    }")
            if k.loop is not None:
                loop_note = c_comment(k.loop)
                step_lines += [f"    for (query = 0; query < {k.repeat}; ++query) {{ /* {loop_note} */"]
            open_loop = k.loop
        ind = "        " if open_loop else "    "
        fn = _method_op(method.name, k.op)
        if fn is None:
            raise ExportError(f"kernel '{k.name}' (op {k.op}) has no C code in the generated step yet")
        body = fn(se, k)
        step_lines.append(f"{ind}{{ /* {c_comment(f'{k.name} ({k.phase})')} */")
        step_lines += [f"{ind}    {x}" if x else "" for x in body]
        step_lines.append(f"{ind}}}")
    if open_loop is not None:
        step_lines.append("    }")
    uses_q = any(k.loop for k in s.kernels)

    macros = []
    for t in sorted(plan.offsets, key=lambda t: (plan.offsets[t], t)):
        tt = s.tensors[t]
        note = c_comment(f"{t}: {tt.dtype} {list(tt.shape)}, {tt.role.value}")
        macros.append(f"#define A_{se.tids[t]} (({CTYPE[tt.dtype]} *)(void *)(model_arena.bytes + "
                      f"{plan.offsets[t]})) /* {note} */")
    in_name = INPUT
    rng0 = int(method.rng.state) if hasattr(method, "rng") else 0
    steps0 = int(getattr(method, "steps", 0))
    opts = {"method": method.name, **{k: v for k, v in s.options.items() if k != "units"}}
    if method.name == "zo":
        c = method.cfg
        opts.update({"sigma_w": c.sigma_w, "sigma_b": c.sigma_b, "sigma_node": c.sigma_node, "gns": c.gns,
                     "qas": c.qas, "units": s.options.get("units")})
    else:
        opts.update({"qas": method.cfg.qas, "weights": list(method.weight_layers),
                     "biases": list(method.bias_layers)})
    ishape = g.input_shape if len(g.input_shape) == 3 else (1, 1, *g.input_shape)
    in_size = int(np.prod(g.input_shape))
    state_bytes = 4 * STATE_HEADER_WORDS + sum(e.nbytes for e in entries)
    save_lines, load_lines = [], []
    for e in entries:
        layer, kind = e.name.rsplit(".", 1)
        arr = f"{ids[layer]}_{kind}"
        save_lines.append(f"    memcpy(blob + off, {arr}, {e.nbytes});\n    off += {e.nbytes};")
        load_lines.append(f"    memcpy({arr}, blob + off, {e.nbytes});\n    off += {e.nbytes};")
    header = _HEADER.format(
        provenance=c_comment(provenance or "(not recorded)"), method=method.name, kernels=kernels,
        batch=batch,
        options=c_comment(", ".join(f"{k} {v}" for k, v in opts.items() if k != "method")),
        input_kind="int8", h=ishape[0], w=ishape[1], c=ishape[2], in_size=in_size, out_size=g.num_classes,
        in_zp=qm.zero_point(INPUT), in_q=c_comment(_qparams_comment(qm, INPUT)),
        out_zp=qm.zero_point(g.output),
        out_q=c_comment(_qparams_comment(qm, g.output)), arena=arena, train_arena=plan.arena_bytes,
        infer_arena=inf.arena_bytes, state_bytes=state_bytes, layers=len(g.nodes))
    source = (_SOURCE + STATE_IO_SOURCE).format(
        method=method.name, kernels=kernels, arena=arena, train_arena=plan.arena_bytes,
        infer_arena=inf.arena_bytes,
        graph=c_comment_lines(g.summary()), consts="\n\n".join(pe.consts),
        ram="\n\n".join(ram_arrays) or "/* nothing trainable */",
        fconsts="\n\n".join(se.extra_consts.values()) or "/* no float constants */",
        macros="\n".join(macros), rng0=rng0, steps0=steps0, magic=STATE_MAGIC, fp=fp,
        in_ptr=pe.tensor(INPUT), out_ptr=pe.tensor(g.output), blocks="\n".join(blocks),
        train_in=se.t(in_name), batch_in=batch * in_size,
        qdecl="    int32_t query;\n    uint32_t replay;\n" if uses_q else "",
        step="\n".join(step_lines), save="\n".join(save_lines) or "    /* nothing trainable */",
        load="\n".join(load_lines) or "    /* nothing trainable */",
        checks=_scratch_checks(s, plan, qm, se))
    return TrainSource(header, source, plan, inf.arena_bytes, arena, pe.const_bytes, ram_bytes, entries, fp,
                       batch, method.name, opts)


def _scratch_checks(s: Schedule, plan: TrainingPlan, qm, se: _StepEmitter) -> str:
    """model_init(): every forward scratch block against the kernels compiled in (as emit.py does)."""
    out, seen = [], set()
    for k in s.kernels:
        for w in k.writes:
            if not w.endswith(".scratch") or k.node in seen:
                continue
            seen.add(k.node)
            n = qm.graph.node(k.node)
            size, note = s.tensors[w].nbytes, c_comment(n.name)
            if n.op == Op.LINEAR:
                call = f"mt_linear_fwd_s8_get_buffer_size({qm.weights[n.name].shape[1]})"
                out += [f"    if ({call} > {size}) {{ /* {note} */", "        return MT_ERR_BUFFER;",
                        "    }"]
            else:
                fid = f"f_{c_ident(n.name)}"
                shape = ", ".join(map(str, qm.weights[n.name].shape))
                out += [f"    static const mt_dims {fid} = {{{shape}}};",
                        f"    if (mt_conv2d_fwd_s8_get_buffer_size(&{fid}) > {size}) {{ /* {note} */",
                        "        return MT_ERR_BUFFER;", "    }"]
    return "\n".join(out) or "    /* no kernel needs scratch memory */"


_HEADER = """\
/*
 * model.h: int8 inference and on-device training ({method}) of one model with the mcutrain C runtime.
 *
 * Provenance: {provenance}
 * Kernels planned for: {kernels}. Training: {method}, batch {batch}; {options}.
 *
 * Usage:
 *     if (model_init() != MT_OK) ...;                       (once: checks the arena against the kernels)
 *     model_train_step(inputs, labels, lr, losses, NULL);   (per batch of MODEL_TRAIN_BATCH samples)
 *         returns MT_ERR_ARG, changing nothing, for NULL pointers or an lr that is not finite and > 0
 *     model_predict(input, logits);                         (any time, with the current weights)
 *     model_save_state(blob, MODEL_STATE_BYTES);            (weights, biases, RNG, step counter)
 * Input: {input_kind} [{h}, {w}, {c}] NHWC, {in_q}.
 * Output: int8 logits [{out_size}], {out_q}.
 * No malloc; all working memory is the static arena of MODEL_ARENA_BYTES (training step
 * {train_arena} bytes as planned, inference {infer_arena}); the trainable tensors are RAM arrays.
 */
#ifndef MODEL_H
#define MODEL_H

#include <stdint.h>

#include "mt_types.h"

#ifdef __cplusplus
extern "C" {{
#endif

#define MODEL_INPUT_H {h}
#define MODEL_INPUT_W {w}
#define MODEL_INPUT_C {c}
#define MODEL_INPUT_SIZE {in_size}
#define MODEL_INPUT_ZERO_POINT ({in_zp})
#define MODEL_OUTPUT_SIZE {out_size}
#define MODEL_OUTPUT_ZERO_POINT ({out_zp})
#define MODEL_ARENA_BYTES {arena}
#define MODEL_TRAIN_ARENA_BYTES {train_arena}
#define MODEL_NUM_LAYERS {layers}
#define MODEL_TRAIN_BATCH {batch}
#define MODEL_STATE_BYTES {state_bytes}

/* Check the arena's scratch blocks against the kernels compiled in: MT_OK, or MT_ERR_BUFFER when
   the library was exported for reference kernels but built with DSP kernels (re-export with
   --kernels dsp, or build with -DMT_KERNELS_REF). */
mt_status model_init(void);

/* Run one sample with the current weights. input: int8 [MODEL_INPUT_SIZE]; logits: int8
   [MODEL_OUTPUT_SIZE] (out). Returns MT_OK or a kernel's error code. */
mt_status model_predict(const int8_t *input, int8_t *logits);

/* The input tensor of model_predict inside the arena: write a sample here to skip the copy. */
int8_t *model_input_buffer(void);

/* Debugging: called after every layer of model_predict with the layer's index, name and output. */
typedef void (*model_layer_hook)(int32_t layer, const char *name, const int8_t *data, int32_t size);

/* Install (or, with NULL, remove) the layer hook. */
void model_set_layer_hook(model_layer_hook hook);

/* One training step on MODEL_TRAIN_BATCH samples (one sample when exported with --batch 1).
   inputs: int8 [MODEL_TRAIN_BATCH * MODEL_INPUT_SIZE] (may be model_train_input_buffer());
   labels: int32 [MODEL_TRAIN_BATCH] class ids; lr: the learning rate;
   losses: int32 [MODEL_TRAIN_BATCH] (out) per-sample Q16 losses before the update (real loss =
   losses[b] / 65536); logits: int8 [MODEL_TRAIN_BATCH * MODEL_OUTPUT_SIZE] (out) before the
   update, or NULL. Updates the trainable weights and biases in place; counts the step. */
mt_status model_train_step(const int8_t *inputs, const int32_t *labels, float lr, int32_t *losses,
                           int8_t *logits);

/* Where model_train_step reads its inputs inside the arena (write a batch here to skip a copy). */
int8_t *model_train_input_buffer(void);

/* Training steps taken since initialisation (or the loaded state). */
uint32_t model_train_steps(void);

/* Save the training state (trainable weights and biases, optimizer state, RNG state, step
   counter) into blob[MODEL_STATE_BYTES], e.g. to write it to flash. MT_ERR_ARG if size is short. */
mt_status model_save_state(uint8_t *blob, int32_t size);

/* Restore a state saved by this model's library; MT_ERR_ARG if the blob is from another model
   or layout (magic and layout fingerprint are checked) or too short. */
mt_status model_load_state(const uint8_t *blob, int32_t size);

#ifdef __cplusplus
}}
#endif

#endif /* MODEL_H */
"""

_SOURCE = """\
/*
 * model.c: constants, trainable tensors, arena, forward pass and training step (see model.h).
 * Method {method}; kernels planned for: {kernels}; arena {arena} bytes
 * (max of the training step's {train_arena} and inference's {infer_arena}, which share it).
 *
{graph}
 */
#include <stddef.h>
#include <string.h>

#include "model.h"
#include "mt_nn.h"
#include "mt_train.h"

{consts}

{ram}

{fconsts}

/* The working memory of predict and train_step (never both at once). */
static union {{
    int64_t align; /* 8-byte alignment for word and doubleword accesses */
    int8_t bytes[MODEL_ARENA_BYTES];
}} model_arena;

/* The training step's tensors at the planner's offsets. */
{macros}

static struct {{
    uint32_t rng;   /* the method's xorshift32 state */
    uint32_t steps; /* steps taken */
}} model_state = {{{rng0}u, {steps0}u}};

#define MODEL_STATE_MAGIC {magic}u
#define MODEL_STATE_FINGERPRINT {fp}u

mt_status model_init(void)
{{
{checks}
    return MT_OK;
}}

static model_layer_hook model_layer_hook_fn = NULL;

void model_set_layer_hook(model_layer_hook hook)
{{
    model_layer_hook_fn = hook;
}}

int8_t *model_input_buffer(void)
{{
    return {in_ptr};
}}

mt_status model_predict(const int8_t *input, int8_t *logits)
{{
    mt_status st = MT_OK;
    if (!input || !logits) {{
        return MT_ERR_ARG;
    }}
    if (input != {in_ptr}) {{
        memcpy({in_ptr}, input, MODEL_INPUT_SIZE);
    }}
{blocks}
    memcpy(logits, {out_ptr}, MODEL_OUTPUT_SIZE);
    return st;
}}

int8_t *model_train_input_buffer(void)
{{
    return {train_in};
}}

uint32_t model_train_steps(void)
{{
    return model_state.steps;
}}

mt_status model_train_step(const int8_t *inputs, const int32_t *labels, float lr, int32_t *losses,
                           int8_t *logits)
{{
    mt_status st = MT_OK;
{qdecl}    if (!inputs || !labels || !losses) {{
        return MT_ERR_ARG;
    }}
    if (!MT_LR_VALID(lr)) {{ /* NaN, +-inf, 0 or negative: refused before any state changes */
        return MT_ERR_ARG;
    }}
    if (inputs != {train_in}) {{
        memcpy({train_in}, inputs, {batch_in});
    }}
{step}
    model_state.steps++;
    return st;
}}

"""

STATE_IO_SOURCE = """\
mt_status model_save_state(uint8_t *blob, int32_t size)
{{
    const uint32_t head[4] = {{MODEL_STATE_MAGIC, MODEL_STATE_FINGERPRINT, 0u, 0u}};
    size_t off = sizeof(head);
    if (!blob || size < MODEL_STATE_BYTES) {{
        return MT_ERR_ARG;
    }}
    memcpy(blob, head, sizeof(head));
    memcpy(blob + 8, &model_state.steps, 4);
    memcpy(blob + 12, &model_state.rng, 4);
{save}
    return MT_OK;
}}

mt_status model_load_state(const uint8_t *blob, int32_t size)
{{
    uint32_t head[4];
    size_t off = sizeof(head);
    if (!blob || size < MODEL_STATE_BYTES) {{
        return MT_ERR_ARG;
    }}
    memcpy(head, blob, sizeof(head));
    if (head[0] != MODEL_STATE_MAGIC || head[1] != MODEL_STATE_FINGERPRINT) {{
        return MT_ERR_ARG;
    }}
    model_state.steps = head[2];
    model_state.rng = head[3];
{load}
    return MT_OK;
}}
"""
"""model_save_state / model_load_state of every training library (the blob: magic, layout
fingerprint, step counter, RNG state, then the `{save}` / `{load}` entries); a format template."""
