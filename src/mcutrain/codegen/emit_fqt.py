"""Emit `model.h` / `model.c` for FQT int8 training: the planner's FQT schedule as C calls.

The step follows `plan.schedule_for(method)` kernel by kernel over `plan.plan_training` offsets,
like `emit_train` does for ZO and BP-QAS; each schedule op maps to one emitter in
`FQT_KERNEL_EMITTERS`. What FQT adds is state that moves every step: the EMA ranges of
activations and errors, the per-channel weight scales and their ranges, the standardization
statistics and the accumulator scale of every bias. It lives in static C variables (not the
arena) and is saved with the weights, so the state blob resumes training bit-exactly.

Order against the simulator (`methods.fqt.FQT.step`), batch 1:
- the requantization multipliers of every layer are recomputed on the device at the start of
  a step from the current scales (float64, as `output_multiplier`);
- a layer is updated right after its backward (the schedule's order): its weights are not read
  again in the step, so this equals the simulator's update after the whole backward. The
  simulator draws the stochastic-rounding stream for all layers in graph order; C jumps to each
  layer's place in that stream with a GF(2) jump matrix computed here;
- the activation and error EMAs move at the end (`ema_update`), then every bias follows its new
  accumulator scale (`_rescale_bias` needs the new activation scales).

Example:
    >>> from mcutrain import zoo
    >>> from mcutrain.methods.fqt import FQT
    >>> from mcutrain.methods.fqt_state import FQTConfig
    >>> x = np.random.default_rng(0).random((8, 8, 8, 1), dtype=np.float32)
    >>> src = emit_fqt_training(FQT(zoo.build("digits-cnn"), FQTConfig(precision="int8"), x), kernels="ref")
    >>> "mt_fqt_upd_s8(" in src.source
    True
"""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace

import numpy as np

from mcutrain.codegen.cformat import c_array, unique_idents
from mcutrain.codegen.emit import ExportError
from mcutrain.codegen.emit_train import (
    _HEADER,
    CTYPE,
    STATE_HEADER_WORDS,
    STATE_MAGIC,
    StateEntry,
    TrainSource,
    _fingerprint,
    c_float,
)
from mcutrain.graph import INPUT, PARAMETRIC, Node, Op
from mcutrain.plan.schedule import Kernel, Schedule
from mcutrain.plan.schedules import schedule_for
from mcutrain.plan.training import TrainingPlan, plan_training
from mcutrain.quant.rng import XorShift32

ACT_CODE = {"none": 0, "relu": 1, "relu6": 2}
PRESCALED_MAX = 32512
"""|e16| <= round_half_away(127 * 2^15 / 2^7): the bound of a prescaled error."""
BWD_IN_TERMS = (2**31 - 1) // (PRESCALED_MAX * 127)
"""Most products an int32 error-propagation accumulator can sum safely (520)."""


def jump_columns(n: int) -> np.ndarray:
    """Columns of the xorshift32 jump matrix T^n: the state reached from each unit bit after n steps."""
    cols = []
    for b in range(32):
        g = XorShift32(1 << b)
        g.advance(n)
        cols.append(g.state)
    return np.array(cols, np.uint32)


def check_fqt(method, batch: int) -> None:
    """Refuse FQT settings the generated C does not implement yet, saying what to use instead."""
    p = method.prec
    if p.name not in ("int8", "uint8"):
        raise ExportError(f"fqt --precision {p.name} has no C step yet; use --precision int8 or uint8")
    if p.name == "uint8" and batch != 1:
        raise ExportError(f"fqt --precision uint8 in C runs batch 1 so far (got --batch {batch}); "
                          "use --batch 1")
    if p.name == "uint8" and (p.weight_rounding != "nearest" or p.relative_update):
        raise ExportError("fqt uint8 in C rounds weights to nearest with absolute steps; "
                          "drop the weight_rounding / relative_update overrides")
    if method.partial.active and (p.name != "int8" or batch != 1):
        raise ExportError("fqt partial updates (lambda_min < 1) run in C with --precision int8 and --batch 1 "
                          "so far")
    if p.name == "int8" and (p.weight_rounding != "stochastic" or p.relative_update):
        raise ExportError("fqt int8 in C rounds weights stochastically with absolute steps; "
                          "drop the weight_rounding / relative_update overrides")
    g = method.graph
    for n in g.nodes:
        if n.op not in (Op.CONV2D, Op.LINEAR, Op.MAXPOOL, Op.FLATTEN):
            raise ExportError(f"node '{n.name}': op {n.op.value} has no fqt C step yet; sequential graphs "
                              "of conv2d, linear, maxpool, flatten (relu/relu6 fused) are supported")
        if n.op == Op.CONV2D and n.attrs["groups"] != 1 and method.needs[n.name]:
            raise ExportError(f"node '{n.name}': grouped/depthwise convs have no fqt backward in C yet")
        tiled = n.op != Op.MAXPOOL or tuple(n.attrs["kernel"]) == tuple(n.attrs["stride"])
        if not tiled and method.needs[n.name]:
            raise ExportError(f"node '{n.name}': overlapping max-pool windows sum errors beyond int8; "
                              "the fqt C step needs stride == kernel")
        if n.op in PARAMETRIC and method.needs[n.inputs[0]]:
            w = n.params["weight"]
            terms = w.shape[0] * (w.shape[1] * w.shape[2] if n.op == Op.CONV2D else 1)
            if terms > BWD_IN_TERMS:
                raise ExportError(f"node '{n.name}': error propagation sums {terms} products per element, "
                                  f"more than the int32 accumulator of the C kernel holds exactly "
                                  f"({BWD_IN_TERMS}); train fewer layers (--trainable last:N)")
        if len(g.consumers(n.name)) > 1:
            raise ExportError(f"node '{n.name}' feeds several layers; the fqt C step needs a sequential "
                              "graph")


class _FqtEmitter:
    """Names and C snippets of one FQT library (state variables, tensors, parameters)."""

    def __init__(self, method, s: Schedule, plan: TrainingPlan):
        self.m, self.s, self.plan = method, s, plan
        self.g = method.graph
        self.ids = unique_idents([INPUT] + [n.name for n in self.g.nodes])
        self.tids = unique_idents(sorted(plan.offsets))
        self.trained = [n.name for n in self.g.parametric() if n.name in method.trainable]
        self.err_key = self._error_keys()
        self.seed_pass = False
        self.u8 = method.prec.name == "uint8"
        self.partial = [n for n in self.trained if method.partial.active
                        and (n != self.g.output or method.cfg.partial_output)]
        self.q = "u8" if self.u8 else "s8"

    def err_qp(self, node: str, scale: str, zp: str) -> list[str]:
        """Declarations of `scale` (and for uint8 `zp`) of the error EMA of `node`'s output."""
        r = self.err(node)
        if not self.u8:
            return [f"const float {scale} = mt_fqt_err_scale(&{r});"]
        return [f"float {scale};", f"int32_t {zp};", f"mt_fqt_qparams_u8({r}.lo, {r}.hi, &{scale}, &{zp});"]

    def _error_keys(self) -> dict[str, str]:
        """Node -> the tensor whose error EMA gives the scale of that node's output error."""
        g, keys = self.g, {}
        keys[g.output] = g.output
        for n in reversed(g.nodes):
            if n.name not in keys or not self.m.needs[n.name]:
                continue
            src = n.inputs[0]
            keys[src] = src if n.op in PARAMETRIC else keys[n.name]
        return keys

    # -- names
    def t(self, name: str) -> str:
        if name not in self.plan.offsets:
            raise ExportError(f"tensor '{name}' has no arena offset")
        return f"A_{self.tids[name]}"

    def lid(self, layer: str) -> str:
        return self.ids[layer]

    def act(self, tensor: str) -> str:
        """C name prefix of the activation qparams owning `tensor`."""
        return f"act_{self.ids[self.m.owner[tensor]]}"

    def err(self, node: str) -> str:
        return f"err_{self.ids[self.err_key[node]]}"

    @staticmethod
    def node_of(tensor: str) -> str:
        return tensor.split(":", 1)[1] if ":" in tensor else tensor

    def dims(self, shape: tuple[int, ...]) -> str:
        shape = tuple(shape)
        d = (1,) * (3 - len(shape)) + shape
        return f"{{1, {d[0]}, {d[1]}, {d[2]}}}"

    def conv_head(self, n: Node) -> list[str]:
        a = n.attrs
        (sh, sw), (pt, _, pl, _) = a["stride"], a["padding"]
        x, y = self.act(n.inputs[0]), self.act(n.name)
        return [f"mt_conv_params p = {{{x}_zp, {y}_zp, {sh}, {sw}, {pt}, {pl}, {a['groups']}, -128, 127}};",
                f"static const mt_dims in_d = {self.dims(self.g.shape(n.inputs[0]))};",
                f"static const mt_dims f_d = {{{', '.join(map(str, n.params['weight'].shape))}}};",
                f"static const mt_dims out_d = {self.dims(self.g.shape(n.name))};"]


def _try(lines: list[str]) -> list[str]:
    return [*lines, "if (st != MT_OK) {", "    return st;", "}"]


def _call(fn: str, args: list[str]) -> list[str]:
    return _try([f"st = {fn}({', '.join(args)});"])


# ---------------------------------------------------------------- forward


def _fwd(e: _FqtEmitter, k: Kernel) -> list[str]:
    n = e.g.node(k.node)
    x, y = e.t(k.reads[0]), e.t(k.writes[0])
    if n.op == Op.FLATTEN:
        if k.alias:
            return ["/* flatten: NHWC order is the flat order, the output is the input's storage */"]
        return [f"memcpy({y}, {x}, {e.s.tensors[k.writes[0]].nbytes});"]
    if n.op == Op.MAXPOOL:
        (kh, kw), (sh, sw) = n.attrs["kernel"], n.attrs["stride"]
        head = [f"static const mt_pool_params p = {{{kh}, {kw}, {sh}, {sw}}};",
                f"static const mt_dims in_d = {e.dims(e.g.shape(n.inputs[0]))};",
                f"static const mt_dims out_d = {e.dims(e.g.shape(n.name))};"]
        arg = [w for w in k.writes if w.endswith(".argmax")]
        if e.u8:
            return [*head, *_call("mt_maxpool_fwd_u8_argmax", ["&p", "&in_d", x, "&out_d", y,
                                                                f"(uint8_t *)(void *){e.t(arg[0])}" if arg
                                                                else "NULL"])]
        if arg:
            return [*head, *_call("mt_maxpool_fwd_s8_argmax", ["&p", "&in_d", x, "&out_d", y,
                                                                f"(uint8_t *)(void *){e.t(arg[0])}"])]
        return [*head, *_call("mt_maxpool_fwd_s8", ["&p", "&in_d", x, "&out_d", y])]
    lid, o = e.lid(n.name), n.params["weight"].shape[0]
    xa, ya = e.act(n.inputs[0]), e.act(n.name)
    act = ACT_CODE[n.act]
    if e.u8:
        return _fwd_u8(e, n, x, y)
    lines = [f"const mt_per_channel_quant q = {{{lid}_mult, {lid}_shift}};"]
    if n.op == Op.LINEAR:
        lines.append(f"mt_linear_params p = {{{xa}_zp, {ya}_zp, -128, 127}};")
        call = _call("mt_linear_fwd_s8_range", ["&p", "&q", "1", x, str(n.params["weight"].shape[1]),
                                                f"{lid}_weight", f"{lid}_bias", str(o), y, "fqt_amin",
                                                "fqt_amax"])
    else:
        lines += e.conv_head(n)
        call = _call("mt_conv2d_fwd_s8_range", ["&p", "&q", "&in_d", x, "&f_d", f"{lid}_weight",
                                                f"{lid}_bias", "&out_d", y, "fqt_amin", "fqt_amax"])
    lines += [f"mt_fqt_act_range_s8({ya}_scale, {ya}_zp, {act}, &p.act_min, &p.act_max);",
              f"fqt_reset_extremes({o});", *call]
    if e.m.dynamic[n.name]:
        lines += ["if (record) {",
                  f"    mt_fqt_acc_range_f32({o}, fqt_amin, fqt_amax, {xa}_scale, {lid}_s_w, {act}, &{ya});",
                  "}"]
    return lines


def _fwd_u8(e: _FqtEmitter, n: Node, x: str, y: str) -> list[str]:
    lid, o = e.lid(n.name), n.params["weight"].shape[0]
    xa, ya = e.act(n.inputs[0]), e.act(n.name)
    act = ACT_CODE[n.act]
    if n.op == Op.LINEAR:
        lines = [f"mt_linear_params p = {{{xa}_zp, {ya}_zp, 0, 255}};"]
        call = _call("mt_linear_fwd_u8_range", ["&p", f"{lid}_w_zp", f"{lid}_m", "1", x,
                                                str(n.params["weight"].shape[1]), f"{lid}_weight",
                                                f"{lid}_bias", str(o), y, "fqt_amin", "fqt_amax"])
    else:
        lines = e.conv_head(n)
        call = _call("mt_conv2d_fwd_u8_range", ["&p", f"{lid}_w_zp", f"{lid}_m", "&in_d", x, "&f_d",
                                                f"{lid}_weight", f"{lid}_bias", "&out_d", y, "fqt_amin",
                                                "fqt_amax"])
    lines += [f"mt_fqt_act_range_u8({ya}_scale, {ya}_zp, {act}, &p.act_min, &p.act_max);",
              "fqt_reset_extremes(1);", *call]
    if e.m.dynamic[n.name]:
        lines += ["if (record) {",
                  f"    mt_fqt_acc_range_f32(1, fqt_amin, fqt_amax, {xa}_scale, {lid}_s_w, {act}, &{ya});",
                  "}"]
    return lines


# ---------------------------------------------------------------- loss and backward


def _loss(e: _FqtEmitter, k: Kernel) -> list[str]:
    kk = e.g.num_classes
    logits, loss, err = e.t(k.reads[0]), e.t(k.writes[0]), e.t(k.writes[1])
    ya, er = e.act(e.g.output), e.err(e.g.output)
    lg = logits
    lines = []
    if e.u8:       # the zero point cancels in softmax: uint8 logits shifted by -128 are int8
        lg = "lg8"
        lines = [f"int8_t lg8[{kk}];", "int32_t k;", f"for (k = 0; k < {kk}; ++k) {{",
                 f"    lg8[k] = (int8_t)((int32_t){logits}[k] - 128);", "}"]
    lines += _call("mt_softmax_ce_s8", ["1", str(kk), lg, f"{ya}_scale", "labels + b", loss, "fqt_errq"])
    if e.u8:
        err = f"(uint8_t *)(void *){err}"
    if e.seed_pass:    # a batch's first step: only the logits' error range
        return [*lines, *_call(f"mt_fqt_logit_error_{e.q}", [str(kk), "fqt_errq", "0", f"&{er}", err]),
                f"if (!{er}.initialized) {{", "    continue;", "}"]
    return [*lines, "if (logits != NULL) {", f"    memcpy(logits + b * {kk}, {logits}, {kk});", "}",
            f"losses[b] = {loss}[0];",
            f"if ({loss}[0] > fqt_loss_max) {{", f"    fqt_loss_max = {loss}[0];", "}",
            *_keep_counts(e, loss),
            *_call(f"mt_fqt_logit_error_{e.q}", [str(kk), "fqt_errq", str(int(e.s.batch == 1)), f"&{er}",
                                                 err])]


def _keep_counts(e: _FqtEmitter, loss: str) -> list[str]:
    """Partial updates: each layer's k from this sample's loss, and each layer's place in the stream
    of the update's draws (the kept rows of the earlier layers in graph order)."""
    if not e.partial:
        return []
    c = e.m.cfg
    lines, off = [], []
    for n in e.g.parametric():
        if n.name not in e.trained:
            continue
        lid, w = e.lid(n.name), n.params["weight"]
        per = w.size // w.shape[0]
        if n.name in e.partial:
            lines.append(f"fqt_k_{lid} = mt_fqt_keep_count({loss}[0], fqt_loss_max, {c_float(c.lambda_min)}, "
                         f"{c_float(c.lambda_max)}, {w.shape[0]});")
        lines.append(f"fqt_off_{lid} = {' + '.join(off) or '0'};")
        off.append(f"fqt_k_{lid} * {per}" if n.name in e.partial else str(w.size))
    return [*lines, f"fqt_draws = {' + '.join(off)};"]


def _topk(e: _FqtEmitter, k: Kernel) -> list[str]:
    n = e.g.node(k.node)
    if n.name not in e.partial:
        return ["/* this layer trains fully (the output layer, unless partial_output) */"]
    lid, o = e.lid(n.name), n.params["weight"].shape[0]
    rows = e.s.tensors[k.reads[0]].elements // o
    return _call("mt_fqt_topk_s8", [str(rows), str(o), f"fqt_k_{lid}", e.t(k.reads[0]), f"{lid}_keep",
                                    f"{lid}_upd", f"&fqt_n_{lid}"])


def _zero(e: _FqtEmitter, k: Kernel) -> list[str]:
    return [f"memset({e.t(w)}, 0, {e.s.tensors[w].nbytes});" for w in k.writes]


def _bwd_in(e: _FqtEmitter, k: Kernel) -> list[str]:
    if e.u8:
        return _bwd_in_u8(e, k)
    n = e.g.node(k.node)
    lid, o = e.lid(n.name), n.params["weight"].shape[0]
    ein = e.t(k.reads[0])
    dst = next(w for w in k.writes if w.startswith("err:"))
    pre = e.t(next(w for w in k.writes if w.endswith(".prescale")))
    rows = e.s.tensors[k.reads[0]].elements // o
    de = e.err(n.inputs[0])
    chans = [f"{lid}_keep", f"fqt_n_{lid}"] if n.name in e.partial else ["NULL", "0"]
    if n.op == Op.LINEAR:
        i = n.params["weight"].shape[1]
        head = []

        def kern(out: str, mult: str, shift: str) -> list[str]:
            return _call("mt_linear_bwd_in_s8_s16", ["1", *chans, str(o), f"(const int16_t *)(void *){pre}",
                                                     f"{lid}_weight", str(i), mult, shift, out, "&amin",
                                                     "&amax"])
    else:
        head = e.conv_head(n)

        def kern(out: str, mult: str, shift: str) -> list[str]:
            return _call("mt_conv2d_bwd_in_s8_s16", ["&p", *chans, "&out_d",
                                                     f"(const int16_t *)(void *){pre}",
                                                     "&f_d", f"{lid}_weight", "&in_d", mult, shift, out,
                                                     "&amin", "&amax"])
    return [*head, "float smax;", "float s_acc;", "int32_t mult;", "int32_t shift;",
            "int32_t amin = INT32_MAX;", "int32_t amax = INT32_MIN;",
            *_call("mt_fqt_prescale_s16", [str(rows), str(o), ein, f"{lid}_s_w",
                                           f"(int16_t *)(void *){pre}", "&smax"]),
            f"s_acc = (smax * mt_fqt_err_scale(&{e.err(n.name)})) * 0x1p-8f; /* (s_max * s_e) * 2^-8 */",
            *_first_range(e, de, kern("NULL", "0", "0")),
            *_call("mt_fqt_quantize_multiplier", [f"(double)s_acc / (double)mt_fqt_err_scale(&{de})", "&mult",
                                                  "&shift"]),
            *kern(e.t(dst), "mult", "shift"),
            f"mt_fqt_range_see_acc(&{de}, amin, amax, s_acc);"]


def _bwd_in_u8(e: _FqtEmitter, k: Kernel) -> list[str]:
    n = e.g.node(k.node)
    lid, o = e.lid(n.name), n.params["weight"].shape[0]
    ein = e.t(k.reads[0])
    dst = e.t(next(w for w in k.writes if w.startswith("err:")))
    de = e.err(n.inputs[0])
    if n.op == Op.LINEAR:
        i = n.params["weight"].shape[1]
        head = []

        def kern(out: str, mult: str, zp: str) -> list[str]:
            return _call("mt_linear_bwd_in_u8", ["1", "z_e", f"{lid}_w_zp", str(o), ein, f"{lid}_weight",
                                                 str(i), mult, zp, out, "&amin", "&amax"])
    else:
        head = e.conv_head(n)

        def kern(out: str, mult: str, zp: str) -> list[str]:
            return _call("mt_conv2d_bwd_in_u8", ["&p", "z_e", f"{lid}_w_zp", "&out_d", ein, "&f_d",
                                                 f"{lid}_weight", "&in_d", mult, zp, out, "&amin", "&amax"])
    return [*head, *e.err_qp(n.name, "s_e", "z_e"), "float s_acc;", "float s_x;", "int32_t z_x;",
            "int32_t amin = INT32_MAX;", "int32_t amax = INT32_MIN;",
            f"s_acc = {lid}_s_w[0] * s_e; /* float32(s_w * s_e) */",
            *_first_range(e, de, kern("NULL", "0.0f", "0")),
            f"mt_fqt_qparams_u8({de}.lo, {de}.hi, &s_x, &z_x);",
            *kern(f"(uint8_t *)(void *){dst}", "s_acc / s_x", "z_x"),
            f"mt_fqt_range_see_acc(&{de}, amin, amax, s_acc);"]


def _first_range(e: _FqtEmitter, de: str, range_only: list[str]) -> list[str]:
    """An error tensor without a range yet: batch 1 seeds it from this sample; a batch's seeding
    pass records this sample's range and stops the sample's backward there."""
    if e.s.batch > 1 and not e.seed_pass:
        return []      # the seeding pass gave every error tensor its range
    last = "    continue;" if e.seed_pass else f"    mt_fqt_range_seed(&{de});"
    return [f"if (!{de}.initialized) {{ /* first step: this tensor's range seeds its EMA */",
            *("    " + x for x in range_only), f"    mt_fqt_range_see_acc(&{de}, amin, amax, s_acc);", last,
            "}"]


def _bwd_w(e: _FqtEmitter, k: Kernel) -> list[str]:
    if e.u8:
        return _bwd_w_u8(e, k)
    n = e.g.node(k.node)
    ein, x = e.t(k.reads[0]), e.t(k.reads[1])
    gw = e.t(next(w for w in k.writes if w.endswith(".weight")))
    gb = e.t(next(w for w in k.writes if w.endswith(".bias")))
    w = n.params["weight"]
    zero = [] if e.s.batch > 1 else [f"memset({gw}, 0, {4 * w.size});", f"memset({gb}, 0, {4 * w.shape[0]});"]
    if n.op == Op.LINEAR:
        return [*zero, *_call("mt_linear_bwd_w_s8_s8", [f"{e.act(n.inputs[0])}_zp", "1", x, str(w.shape[1]),
                                                         ein, str(w.shape[0]), gw, gb])]
    return [*e.conv_head(n), *zero,
            *_call("mt_conv2d_bwd_w_s8_s8", ["&p", "&in_d", x, "&out_d", ein, "&f_d", gw, gb])]


def _bwd_w_u8(e: _FqtEmitter, k: Kernel) -> list[str]:
    """Seed A's per-sample uint8 gradient: its range (a pass of its own on the first step) and EMA."""
    n = e.g.node(k.node)
    lid = e.lid(n.name)
    ein, x = e.t(k.reads[0]), e.t(k.reads[1])
    gw = e.t(next(w for w in k.writes if w.endswith(".weight")))
    gb = e.t(next(w for w in k.writes if w.endswith(".bias")))
    w = n.params["weight"]
    xa = e.act(n.inputs[0])
    if n.op == Op.LINEAR:
        head = []

        def kern(out: str, mult: str, zp: str) -> list[str]:
            return _call("mt_linear_bwd_w_u8", [f"{xa}_zp", "z_e", x, str(w.shape[1]), ein, str(w.shape[0]),
                                                mult, zp, out, gb, "&gmin", "&gmax"])
    else:
        head = e.conv_head(n)

        def kern(out: str, mult: str, zp: str) -> list[str]:
            return _call("mt_conv2d_bwd_w_u8", ["&p", "z_e", "&in_d", x, "&out_d", ein, "&f_d", mult, zp, out,
                                                gb, "&gmin", "&gmax"])
    gr = f"grad_{lid}"
    return [*head, *e.err_qp(n.name, "s_e", "z_e"), "float s_g;", "float s_q;", "int32_t z_q;",
            "int32_t gmin = INT32_MAX;", "int32_t gmax = INT32_MIN;",
            f"s_g = {xa}_scale * s_e; /* float32(s_x * s_e) */",
            f"memset({gb}, 0, {4 * w.shape[0]});",
            f"if (!{gr}.initialized) {{ /* first step: this gradient's range seeds its EMA */",
            *("    " + y for y in kern("NULL", "0.0f", "0")),
            f"    mt_fqt_range_see_acc(&{gr}, gmin, gmax, s_g);", f"    mt_fqt_range_seed(&{gr});", "}",
            f"mt_fqt_qparams_u8({gr}.lo, {gr}.hi, &s_q, &z_q);",
            *kern(f"(uint8_t *)(void *){gw}", "s_g / s_q", "z_q"),
            f"mt_fqt_range_see_acc(&{gr}, gmin, gmax, s_g);"]


def _update_u8(e: _FqtEmitter, k: Kernel) -> list[str]:
    n = e.g.node(k.node)
    lid = e.lid(n.name)
    w = n.params["weight"]
    c = e.m.cfg
    gw, gb = e.t(k.reads[0]), e.t(k.reads[1])
    gr = f"grad_{lid}"
    return [*e.err_qp(n.name, "s_e", "z_e"), "float s_q;", "int32_t z_q;", "(void)z_e;",
            f"mt_fqt_qparams_u8({gr}.lo, {gr}.hi, &s_q, &z_q);",
            f"const mt_fqt_upd_params up = {{lr, {c_float(c.alpha_norm)}, {c_float(c.alpha_w)}, s_q, s_e}};",
            *_call("mt_fqt_upd_u8", ["&up", str(w.shape[0]), str(w.size // w.shape[0]),
                                     f"(const uint8_t *)(void *){gw}", "z_q", gb, f"{lid}_norm_mu",
                                     f"{lid}_norm_sd", f"{lid}_norm_init", f"{lid}_weight", f"{lid}_s_w",
                                     f"&{lid}_w_zp", f"{lid}_w_lo", f"{lid}_w_hi", f"{lid}_bias_step"])]


def _update(e: _FqtEmitter, k: Kernel) -> list[str]:
    if e.u8:
        return _update_u8(e, k)
    n = e.g.node(k.node)
    lid = e.lid(n.name)
    w = n.params["weight"]
    o, per = w.shape[0], w.size // w.shape[0]
    c = e.m.cfg
    gw, gb = e.t(k.reads[0]), e.t(k.reads[1])
    jump = [f"mt_xorshift32_jump(&r, {lid}_jump); /* to this layer's place in the step's stream */"] \
        if f"{lid}_jump" in e.jumps else []
    if e.partial:
        jump = [f"mt_xorshift32_jump_n(&r, (uint32_t)fqt_off_{lid}, &fqt_jump_pow[0][0], {e.jump_bits});"]
    upd = f"{lid}_upd" if n.name in e.partial else "NULL"
    s_e = f"mt_fqt_err_scale(&{e.err(n.name)})"
    return ["uint32_t r = rng0;", *jump,
            f"const float s_e = {s_e};",
            f"const mt_fqt_upd_params up = {{lr, {c_float(c.alpha_norm)}, {c_float(c.alpha_w)}, "
            f"{e.act(n.inputs[0])}_scale * s_e, s_e}};",
            *_call("mt_fqt_upd_s8", ["&up", str(o), str(per), gw, gb, upd, f"{lid}_norm_mu",
                                     f"{lid}_norm_sd", f"{lid}_norm_init", f"{lid}_weight", f"{lid}_s_w",
                                     f"{lid}_w_lo", f"{lid}_w_hi", f"{lid}_bias_step", "&r"])]


def _relu_bwd(e: _FqtEmitter, k: Kernel) -> list[str]:
    n = e.g.node(k.node)
    ya = e.act(n.name)
    act = n.act if n.op in PARAMETRIC else n.op.value
    size = e.s.tensors[k.writes[0]].elements
    hi = "hi" if act == "relu6" else ("256" if e.u8 else "128")
    head = ["int32_t lo;", "int32_t hi;",
            f"mt_fqt_act_range_{e.q}({ya}_scale, {ya}_zp, {ACT_CODE[act]}, &lo, &hi);",
            *(["(void)hi;"] if act != "relu6" else [])]
    if e.u8:
        return [*head, *e.err_qp(n.name, "s_e", "z_e"), "(void)s_e;",
                *_call("mt_relu_bwd_u8", [str(size), "lo", hi, e.t(k.reads[1]), "z_e", e.t(k.reads[0]),
                                          e.t(k.writes[0])])]
    return [*head, *_call("mt_relu_bwd_s8", [str(size), "lo", hi, e.t(k.reads[1]), e.t(k.reads[0]),
                                             e.t(k.writes[0])])]


def _pool_bwd(e: _FqtEmitter, k: Kernel) -> list[str]:
    n = e.g.node(k.node)
    (kh, kw), (sh, sw) = n.attrs["kernel"], n.attrs["stride"]
    return [f"static const mt_pool_params p = {{{kh}, {kw}, {sh}, {sw}}};",
            f"static const mt_dims in_d = {e.dims(e.g.shape(n.inputs[0]))};",
            f"static const mt_dims out_d = {e.dims(e.g.shape(n.name))};",
            *(_call("mt_maxpool_bwd_s8", ["&p", "&in_d", "&out_d",
                                          f"(const uint8_t *)(void *){e.t(k.reads[1])}", e.t(k.reads[0]),
                                          e.t(k.writes[0])]) if not e.u8 else
              [*e.err_qp(n.name, "s_e", "z_e"), "(void)s_e;",
               *_call("mt_maxpool_bwd_u8", ["&p", "z_e", "&in_d", "&out_d",
                                            f"(const uint8_t *)(void *){e.t(k.reads[1])}", e.t(k.reads[0]),
                                            e.t(k.writes[0])])])]


def _alias(e: _FqtEmitter, k: Kernel) -> list[str]:
    return ["/* the error of a flatten is its output's error: same storage */"]


def _ema_update(e: _FqtEmitter, k: Kernel) -> list[str]:
    c, m = e.m.cfg, e.m
    lines = []
    for t in e.act_owners:
        if m.dynamic.get(t, False):
            a = f"act_{e.ids[t]}"
            lines += [f"mt_fqt_range_update(&{a}, {c_float(c.alpha_a)});",
                      f"mt_fqt_qparams_{e.q}({a}.lo, {a}.hi, &{a}_scale, &{a}_zp);"]
    for key in e.err_keys:
        lines.append(f"mt_fqt_range_update(&err_{e.ids[key]}, {c_float(c.alpha_e)});")
    if e.u8:
        lines += [f"mt_fqt_range_update(&grad_{e.lid(t)}, {c_float(c.alpha_e)});" for t in e.trained]
    for n in e.g.parametric():
        if not m.dynamic[n.name]:
            continue
        lid, w = e.lid(n.name), n.params["weight"]
        step = f"{lid}_bias_step" if n.name in e.trained else "NULL"
        if e.u8:
            lines += _call("mt_fqt_bias_rescale_u8", [str(w.shape[0]), str(w.size // w.shape[0]),
                                                      f"{lid}_weight", f"{lid}_w_zp",
                                                      f"{e.act(n.inputs[0])}_scale", f"{lid}_s_w[0]", step,
                                                      f"{lid}_bias_scale", f"{lid}_bias"])
            continue
        lines += _call("mt_fqt_bias_rescale_s32", [str(w.shape[0]), str(w.size // w.shape[0]),
                                                   f"{lid}_weight", f"{e.act(n.inputs[0])}_scale",
                                                   f"{lid}_s_w", step,
                                                   f"{lid}_upd" if n.name in e.partial else "NULL",
                                                   f"{lid}_bias_scale",
                                                   f"{lid}_bias"])
    if e.partial:
        lines += ["model_state.rng = rng0;",
                  f"mt_xorshift32_jump_n(&model_state.rng, (uint32_t)fqt_draws, &fqt_jump_pow[0][0], "
                  f"{e.jump_bits});"]
    elif e.total_draws:
        lines += ["model_state.rng = rng0;",
                  "mt_xorshift32_jump(&model_state.rng, fqt_jump_total); /* past every draw of the step */"]
    return lines


FQT_KERNEL_EMITTERS: dict[str, Callable[[_FqtEmitter, Kernel], list[str]]] = {
    "conv2d_fwd": _fwd, "linear_fwd": _fwd, "maxpool_fwd": _fwd, "flatten_fwd": _fwd,
    "softmax_ce": _loss, "linear_bwd_in": _bwd_in, "conv2d_bwd_in": _bwd_in,
    "linear_bwd_w": _bwd_w, "conv2d_bwd_w": _bwd_w, "fqt_update": _update,
    "relu_bwd": _relu_bwd, "relu6_bwd": _relu_bwd, "maxpool_bwd": _pool_bwd, "reshape": _alias,
    "ema_update": _ema_update, "zero": _zero, "partial_topk": _topk,
}
"""FQT schedule op -> emitter of its C code (int8 precision)."""


# ---------------------------------------------------------------- state


def _f32(v) -> np.ndarray:
    return np.asarray(v, np.float32).reshape(-1)


def _state(e: _FqtEmitter) -> tuple[list[str], list[StateEntry], list[tuple[str, str]]]:
    """C definitions of the FQT state, its blob entries and (save, load) code per entry."""
    m, g = e.m, e.g
    defs: list[str] = []
    entries: list[StateEntry] = []
    io: list[tuple[str, str]] = []

    def arr(ctype: str, name: str, values: np.ndarray, dtype: str, entry: str | None, comment: str,
            const: bool = False) -> None:
        v = np.asarray(values)
        if ctype == "float":
            items = ", ".join(c_float(x) for x in _f32(v).tolist())
            defs.append(f"/* {comment} */\nstatic float {name}[{v.size}] = {{{items}}};")
        else:
            text = c_array(ctype, name, v, per_line=16, comment=comment)
            defs.append(text if const else text.replace("static const ", "static ", 1))
        if entry is not None:
            entries.append(StateEntry(entry, dtype, tuple(v.shape)))
            nb = entries[-1].nbytes
            io.append((f"memcpy(blob + off, {name}, {nb});", f"memcpy({name}, blob + off, {nb});"))

    def rng_struct(name: str, ema, entry: str, comment: str) -> None:
        init = ema is not None and ema.initialized
        lo, hi = (float(ema.lo), float(ema.hi)) if init else (0.0, 0.0)
        defs.append(f"/* {comment} */\nstatic mt_fqt_range {name} = {{{c_float(lo)}, {c_float(hi)}, "
                    f"0.0f, 0.0f, {int(init)}, 0, 0}};")
        entries.append(StateEntry(entry, "f32", (2,)))
        io.append((f"memcpy(blob + off, &{name}.lo, 4);\n    memcpy(blob + off + 4, &{name}.hi, 4);",
                   f"memcpy(&{name}.lo, blob + off, 4);\n    memcpy(&{name}.hi, blob + off + 4, 4);"))

    for t in e.act_owners:
        a = f"act_{e.ids[t]}"
        qp = m.act_qparams(t)
        rng_struct(a, m.act_ema[t], f"act.{t}.range", f"{t}: activation range (EMA)")
        defs.append(f"static float {a}_scale = {c_float(qp.scale)};\n"
                    f"static int32_t {a}_zp = {int(qp.zero_point)};")
        entries += [StateEntry(f"act.{t}.scale", "f32", (1,)), StateEntry(f"act.{t}.zero_point", "s32", (1,))]
        io += [(f"memcpy(blob + off, &{a}_scale, 4);", f"memcpy(&{a}_scale, blob + off, 4);"),
               (f"memcpy(blob + off, &{a}_zp, 4);", f"memcpy(&{a}_zp, blob + off, 4);")]
    for key in e.err_keys:
        name = f"err_{e.ids[key]}"
        ema = m.err_ema.get(key)
        rng_struct(name, ema, f"err.{key}.range", f"{key}: error range (EMA)")
        entries.append(StateEntry(f"err.{key}.init", "s32", (1,)))
        io.append((f"memcpy(blob + off, &{name}.initialized, 4);",
                   f"memcpy(&{name}.initialized, blob + off, 4);"))
    for n in g.parametric():
        lid, name = e.lid(n.name), n.name
        w = m.w[name]
        o = w.shape[0]
        qp = m.wqp[name]
        trained = name in e.trained
        nw = 1 if e.u8 else o            # uint8: one scale, zero point and range per tensor
        wt = "uint8_t" if e.u8 else "int8_t"
        arr(wt, f"{lid}_weight", w, "s8", f"{name}.weight" if trained else None,
            f"{name}: weight {list(w.shape)} {wt[:-2]}" + (" (RAM, trained)" if trained else " (frozen)"),
            const=not trained)
        arr("int32_t", f"{lid}_bias", m.b[name], "s32", f"{name}.bias", f"{name}: bias int32 (RAM)")
        arr("float", f"{lid}_s_w", np.broadcast_to(qp.scale, (nw,)), "f32", f"{name}.w_scale",
            f"{name}: weight scale(s) s_w")
        arr("float", f"{lid}_bias_scale", m.b_acc_scale[name], "f32", f"{name}.bias_scale",
            f"{name}: accumulator scales s_x * s_w of the bias")
        if e.u8:
            defs.append(f"static int32_t {lid}_w_zp = {int(qp.zero_point)};\n"
                        f"static float {lid}_m; /* forward multiplier float32(s_x * s_w) / s_y */")
            entries.append(StateEntry(f"{name}.w_zero_point", "s32", (1,)))
            io.append((f"memcpy(blob + off, &{lid}_w_zp, 4);", f"memcpy(&{lid}_w_zp, blob + off, 4);"))
        else:
            defs.append(f"static int32_t {lid}_mult[{o}];\nstatic int32_t {lid}_shift[{o}];")
        if trained:
            ema = m.w_ema[name]
            arr("float", f"{lid}_w_lo", np.broadcast_to(ema.lo, (nw,)), "f32", f"{name}.w_lo",
                f"{name}: weight range minimum (EMA)")
            arr("float", f"{lid}_w_hi", np.broadcast_to(ema.hi, (nw,)), "f32", f"{name}.w_hi",
                f"{name}: weight range maximum (EMA)")
            if e.u8:
                rng_struct(f"grad_{lid}", m.grad_ema.get(name), f"grad.{name}.range",
                           f"{name}: per-sample gradient range (EMA)")
                entries.append(StateEntry(f"grad.{name}.init", "s32", (1,)))
                io.append((f"memcpy(blob + off, &grad_{lid}.initialized, 4);",
                           f"memcpy(&grad_{lid}.initialized, blob + off, 4);"))
            st = m.norm.get(name, {"mu": np.zeros(o), "sd": np.zeros(o), "init": np.zeros(o, bool)})
            arr("float", f"{lid}_norm_mu", st["mu"], "f32", f"{name}.norm_mu", f"{name}: gradient mean (EMA)")
            arr("float", f"{lid}_norm_sd", st["sd"], "f32", f"{name}.norm_sd", f"{name}: gradient sd (EMA)")
            arr("int8_t", f"{lid}_norm_init", st["init"].astype(np.int8), "s8", f"{name}.norm_init",
                f"{name}: statistics initialized")
            defs.append(f"static float {lid}_bias_step[{o}];")
    defs.append(f"static int32_t fqt_loss_max = {int(m.loss_max)};")
    entries.append(StateEntry("loss_max", "s32", (1,)))
    io.append(("memcpy(blob + off, &fqt_loss_max, 4);", "memcpy(&fqt_loss_max, blob + off, 4);"))
    return defs, entries, io


def _block(body: list[str], k: Kernel, ind: str) -> list[str]:
    return [f"{ind}{{ /* {k.name} ({k.phase}) */", *(f"{ind}    {x}" if x else "" for x in body), f"{ind}}}"]


def _step(e: _FqtEmitter, s: Schedule, in_size: int) -> list[str]:
    """The body of model_train_step after the forward helpers: the schedule, its sample loop opened."""
    lines: list[str] = []
    open_loop, fwd_done = None, False
    for k in s.kernels:
        if k.loop != open_loop:
            if open_loop is not None:
                lines.append("    }")
            if k.loop is not None:
                lines += [f"    for (b = 0; b < {k.repeat}; ++b) {{ /* one sample at a time */",
                          f"        memcpy({e.t(INPUT)}, fqt_batch_in + b * {in_size}, {in_size});"]
            open_loop, fwd_done = k.loop, False
        ind = "        " if open_loop else "    "
        if k.phase == "forward":
            if not fwd_done:
                lines += _try([f"st = fqt_forward(1); /* {k.name} ... */"]) if not open_loop else \
                    [f"{ind}{x}" for x in _try(["st = fqt_forward(1);"])]
                fwd_done = True
            continue
        lines += _block(FQT_KERNEL_EMITTERS[k.op](e, k), k, ind)
    if open_loop is not None:
        lines.append("    }")
    return [x if x.startswith(" ") or not x else "    " + x for x in lines]


def _seed_function(e: _FqtEmitter, s: Schedule, in_size: int) -> str:
    """fqt_seed(): a batch's first step gives each error tensor the range of the whole batch.

    One pass over the batch per error tensor that has no range yet (in backward order): forward,
    then backward until that tensor, whose range it records; the ranges seed their EMAs (fresh,
    as the simulator's `_err_qparams`). Later steps find every range set and skip it.
    """
    e.seed_pass = True
    body: list[str] = []
    for k in s.kernels:
        if k.loop is None or k.phase == "forward" or k.op in ("linear_bwd_w", "conv2d_bwd_w", "zero"):
            continue
        body += _block(FQT_KERNEL_EMITTERS[k.op](e, k), k, "            ")
    e.seed_pass = False
    unset = " || ".join(f"!err_{e.ids[key]}.initialized" for key in e.err_keys)
    seeds = "\n".join(f"        mt_fqt_range_seed(&err_{e.ids[key]});" for key in e.err_keys)
    return f"""
/* A batch's first step: every error tensor gets the range of the whole batch (see emit_fqt). */
static mt_status fqt_seed(const int32_t *labels)
{{
    mt_status st = MT_OK;
    int32_t round;
    int32_t b;
    for (round = 0; round < {len(e.err_keys)} && ({unset}); ++round) {{
        for (b = 0; b < {s.batch}; ++b) {{
            memcpy({e.t(INPUT)}, fqt_batch_in + b * {in_size}, {in_size});
            st = fqt_forward(0);
            if (st != MT_OK) {{
                return st;
            }}
{chr(10).join(body)}
        }}
{seeds}
    }}
    return st;
}}
"""


def _jump_array(name: str, n: int, comment: str) -> str:
    cols = [f"0x{int(v):08X}u" for v in jump_columns(n)]
    rows = [", ".join(cols[i:i + 6]) for i in range(0, 32, 6)]
    body = ",\n".join(f"    {r}" for r in rows)
    return f"/* {comment} */\nstatic const uint32_t {name}[32] = {{\n{body}\n}};"


def _draws(e: _FqtEmitter) -> tuple[list[str], int]:
    """Jump matrices to each trained layer's place in the step's stochastic-rounding stream."""
    out, off = [], 0
    e.jumps = set()
    if e.m.prec.weight_rounding != "stochastic":
        return out, 0
    if e.partial:
        full = sum(e.m.w[n].size for n in e.trained)
        e.jump_bits = max(int(full).bit_length(), 1)
        rows = []
        for i in range(e.jump_bits):
            cols = ", ".join(f"0x{int(v):08X}u" for v in jump_columns(1 << i))
            rows.append(f"    {{{cols}}}")
        decl = [f"static int32_t fqt_k_{e.lid(n)};\nstatic int32_t fqt_n_{e.lid(n)};\n"
                f"static int32_t {e.lid(n)}_keep[{e.m.w[n].shape[0]}];\n"
                f"static uint8_t {e.lid(n)}_upd[{e.m.w[n].shape[0]}];" for n in e.partial]
        decl += [f"static int32_t fqt_off_{e.lid(n)};" for n in e.trained]
        out.append("/* Partial updates: k, kept channels and update mask per layer; draw offsets. */\n"
                   + "\n".join(decl) + "\nstatic int32_t fqt_draws;\n"
                   f"/* columns of the xorshift32 jumps by 2^i draws */\n"
                   f"static const uint32_t fqt_jump_pow[{e.jump_bits}][32] = {{\n" + ",\n".join(rows)
                   + "\n};")
        return out, full
    for n in e.g.parametric():
        if n.name not in e.trained:
            continue
        if off:
            e.jumps.add(f"{e.lid(n.name)}_jump")
            out.append(_jump_array(f"{e.lid(n.name)}_jump", off,
                                   f"{n.name}: xorshift32 jump by {off} draws (earlier layers' weights)"))
        off += n.params["weight"].size
    if off:
        out.append(_jump_array("fqt_jump_total", off, f"xorshift32 jump by the step's {off} draws"))
    return out, off


def emit_fqt_training(method, batch: int = 1, kernels: str = "ref", provenance: str = "") -> TrainSource:
    """model.h / model.c training `method` (an `FQT` of precision int8) one sample per step."""
    check_fqt(method, batch)
    s = schedule_for(method, batch=batch, kernels=kernels)
    plan = plan_training(s)
    e = _FqtEmitter(method, s, plan)
    g = method.graph
    e.act_owners = list(dict.fromkeys(method.owner[t] for t in [INPUT, *(n.name for n in g.nodes)]))
    e.err_keys = list(dict.fromkeys(e.err_key[n.name] for n in reversed(g.nodes) if n.name in e.err_key
                                    and method.needs[n.name]))
    jumps, total = _draws(e)
    e.total_draws = total
    defs, entries, io = _state(e)
    fp = _fingerprint(entries, "fqt", batch)
    unknown = sorted({k.op for k in s.kernels} - set(FQT_KERNEL_EMITTERS))
    if unknown:
        raise ExportError(f"fqt schedule ops without C code yet: {', '.join(unknown)}")

    fwd_lines = []
    for k in s.kernels:
        if k.phase == "forward":
            fwd_lines += _block(FQT_KERNEL_EMITTERS[k.op](e, k), k, "    ")
    step_lines = _step(e, s, in_size := int(np.prod(g.input_shape)))
    seed_fn = _seed_function(e, s, in_size) if batch > 1 and e.err_keys else ""
    macros = []
    for t in sorted(plan.offsets, key=lambda t: (plan.offsets[t], t)):
        tt = s.tensors[t]
        macros.append(f"#define A_{e.tids[t]} (({CTYPE[tt.dtype]} *)(void *)(model_arena.bytes + "
                      f"{plan.offsets[t]})) /* {t}: {tt.dtype} {list(tt.shape)}, {tt.role.value} */")
    max_o = max(n.params["weight"].shape[0] for n in g.parametric())
    prepare = []
    for n in g.parametric():
        lid = e.lid(n.name)
        if e.u8:
            prepare.append(f"{lid}_m = ({e.act(n.inputs[0])}_scale * {lid}_s_w[0]) / {e.act(n.name)}_scale;")
            continue
        prepare += _call("mt_fqt_output_multipliers", [f"{e.act(n.inputs[0])}_scale", f"{lid}_s_w",
                                                      f"{e.act(n.name)}_scale",
                                                      str(n.params["weight"].shape[0]), f"{lid}_mult",
                                                      f"{lid}_shift"])
    state_bytes = 4 * STATE_HEADER_WORDS + sum(x.nbytes for x in entries)
    ishape = g.input_shape if len(g.input_shape) == 3 else (1, 1, *g.input_shape)
    qin = method.act_qparams(INPUT)
    c = method.cfg
    opts = {"method": "fqt", "precision": c.precision, "alpha_a": c.alpha_a, "alpha_e": c.alpha_e,
            "alpha_w": c.alpha_w, "alpha_norm": c.alpha_norm, "trainable": list(e.trained)}
    header = _HEADER.format(
        provenance=provenance or "(not recorded)", method="fqt", kernels=kernels, batch=batch,
        options=f"precision {c.precision}, alpha_a {c.alpha_a}, alpha_e {c.alpha_e}, alpha_w {c.alpha_w}, "
                f"alpha_norm {c.alpha_norm}",
        h=ishape[0], w=ishape[1], c=ishape[2], in_size=in_size, out_size=g.num_classes,
        in_zp=int(qin.zero_point), in_q=f"scale {float(qin.scale)!r}, zero point {int(qin.zero_point)}",
        out_zp=int(method.act_qparams(g.output).zero_point),
        out_q="qparams dynamic (the EMA range moves every step; the zero point macro is the initial one)",
        arena=plan.arena_bytes, train_arena=plan.arena_bytes, infer_arena=plan.arena_bytes,
        state_bytes=state_bytes, layers=len(g.nodes))
    save = "\n".join(f"    {sv}\n    off += {x.nbytes};" for (sv, _), x in zip(io, entries))
    load = "\n".join(f"    {ld}\n    off += {x.nbytes};" for (_, ld), x in zip(io, entries))
    source = _SOURCE.format(
        arena=plan.arena_bytes, graph=g.summary().replace("*/", "* /"), state="\n\n".join(defs),
        jumps="\n\n".join(jumps) or "/* no stochastic draws */", macros="\n".join(macros),
        rng0=int(method.rng.state), steps0=int(method.steps), magic=STATE_MAGIC, fp=fp, max_o=max_o,
        k=g.num_classes, prepare="\n".join(f"    {x}" for x in prepare), fwd="\n".join(fwd_lines),
        step="\n".join(step_lines), train_in=e.t(INPUT) if batch == 1 else "fqt_batch_in",
        sample_in=e.t(INPUT), logits=e.t(g.output), batch_in=in_size * batch, seed_fn=seed_fn,
        batch_buf=(f"static int8_t fqt_batch_in[{batch * in_size}]; /* the caller's batch */\n"
                   if batch > 1 else ""),
        seed_call=("    st = fqt_seed(labels);\n    if (st != MT_OK) {\n        return st;\n    }\n"
                   if seed_fn else ""),
        save=save, load=load)
    ram = sum(method.w[n].size + 4 * method.b[n].size for n in e.trained)
    const = sum(method.w[n.name].size for n in g.parametric() if n.name not in e.trained)
    return TrainSource(header, source, plan, plan.arena_bytes, plan.arena_bytes, const, ram, entries, fp,
                       batch, "fqt", opts)


_SOURCE = """\
/*
 * model.c: FQT int8 training (see model.h): the state that moves every step, the arena, the
 * forward pass and the training step of the planner's schedule. Arena {arena} bytes.
 *
{graph}
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "model.h"
#include "mt_fqt.h"
#include "mt_nn.h"
#include "mt_train.h"

{state}

{jumps}

/* Per-channel accumulator extremes of the layer running now, and the logits' Q24 error. */
static int32_t fqt_amin[{max_o}];
static int32_t fqt_amax[{max_o}];
static int32_t fqt_errq[{k}];

/* The working memory of predict and train_step (never both at once). */
static union {{
    int64_t align; /* 8-byte alignment for word and doubleword accesses */
    int8_t bytes[MODEL_ARENA_BYTES];
}} model_arena;

/* The training step's tensors at the planner's offsets. */
{macros}

{batch_buf}
static struct {{
    uint32_t rng;   /* the method's xorshift32 state */
    uint32_t steps; /* steps taken */
}} model_state = {{{rng0}u, {steps0}u}};

#define MODEL_STATE_MAGIC {magic}u
#define MODEL_STATE_FINGERPRINT {fp}u

static void fqt_reset_extremes(int32_t channels)
{{
    int32_t c;
    for (c = 0; c < channels; ++c) {{
        fqt_amin[c] = INT32_MAX;
        fqt_amax[c] = INT32_MIN;
    }}
}}

/* Requantization multipliers from the current scales (they move with the ranges and weights). */
static mt_status fqt_prepare(void)
{{
    mt_status st = MT_OK;
{prepare}
    return st;
}}

/* The forward pass on the sample in the input tensor; `record`: note the output ranges. */
static mt_status fqt_forward(int32_t record)
{{
    mt_status st = MT_OK;
    (void)record;
{fwd}
    return st;
}}

{seed_fn}
mt_status model_init(void)
{{
    return MT_OK;
}}

static model_layer_hook model_layer_hook_fn = NULL;

void model_set_layer_hook(model_layer_hook hook)
{{
    model_layer_hook_fn = hook; /* FQT libraries do not call it (no per-layer inference blocks) */
}}

int8_t *model_input_buffer(void)
{{
    return (int8_t *)(void *){sample_in};
}}

mt_status model_predict(const int8_t *input, int8_t *logits)
{{
    mt_status st;
    if (!input || !logits) {{
        return MT_ERR_ARG;
    }}
    if ((const void *)input != (const void *){sample_in}) {{
        memcpy({sample_in}, input, MODEL_INPUT_SIZE);
    }}
    st = fqt_prepare();
    if (st == MT_OK) {{
        st = fqt_forward(0);
    }}
    memcpy(logits, {logits}, MODEL_OUTPUT_SIZE);
    return st;
}}

int8_t *model_train_input_buffer(void)
{{
    return (int8_t *)(void *){train_in};
}}

uint32_t model_train_steps(void)
{{
    return model_state.steps;
}}

mt_status model_train_step(const int8_t *inputs, const int32_t *labels, float lr, int32_t *losses,
                           int8_t *logits)
{{
    mt_status st = MT_OK;
    const uint32_t rng0 = model_state.rng;
    int32_t b = 0;
    if (!inputs || !labels || !losses) {{
        return MT_ERR_ARG;
    }}
    if ((const void *)inputs != (const void *){train_in}) {{
        memcpy({train_in}, inputs, {batch_in});
    }}
    (void)rng0;
    (void)lr;
    (void)b;
    st = fqt_prepare();
    if (st != MT_OK) {{
        return st;
    }}
{seed_call}{step}
    model_state.steps++;
    return st;
}}

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



def for_export(method) -> SimpleNamespace:
    """`method` as `library.export_training_library` reads it (the graph under `qm.graph`)."""
    return SimpleNamespace(name="fqt", method=method, qm=SimpleNamespace(graph=method.graph))


def _layer_field(method, layer: str, field: str) -> np.ndarray:
    o = method.w[layer].shape[0]
    if field in ("weight", "bias"):
        return (method.w if field == "weight" else method.b)[layer]
    if field == "w_scale":
        return np.asarray(method.wqp[layer].scale).reshape(-1)
    if field == "w_zero_point":
        return np.asarray(method.wqp[layer].zero_point).reshape(-1)
    if field == "bias_scale":
        return method.b_acc_scale[layer]
    if field in ("w_lo", "w_hi"):
        ema = method.w_ema[layer]
        return np.asarray(ema.lo if field == "w_lo" else ema.hi).reshape(-1)
    st = method.norm.get(layer, {"mu": np.zeros(o), "sd": np.zeros(o), "init": np.zeros(o, bool)})
    return st[field[5:]]


def state_arrays(method, src: TrainSource) -> dict[str, np.ndarray]:
    """The simulator's values of every entry of the C state blob (`src.state`), by entry name."""
    out: dict[str, np.ndarray] = {}
    for ent in src.state:
        name = ent.name
        if name == "loss_max":
            v = np.array([method.loss_max])
        elif name.startswith(("act.", "err.", "grad.")):
            kind, rest = name.split(".", 1)
            t, field = rest.rsplit(".", 1)
            ema = {"act": method.act_ema, "err": method.err_ema, "grad": method.grad_ema}[kind].get(t)
            if field == "range":
                v = np.array([ema.lo, ema.hi]) if ema is not None and ema.initialized else np.zeros(2)
            elif field == "init":
                v = np.array([int(ema is not None and ema.initialized)])
            elif field == "scale":
                v = np.array([method.act_qparams(t).scale])
            else:
                v = np.array([method.act_qparams(t).zero_point])
        else:
            layer, field = name.rsplit(".", 1)
            v = _layer_field(method, layer, field)
        dt = {"s8": np.int8, "s32": np.int32, "f32": np.float32}[ent.dtype]
        v = np.asarray(v)
        v = v.view(np.int8) if v.dtype == np.uint8 else v      # uint8 weights travel as their bytes
        out[name] = v.astype(dt).reshape(ent.shape)
    return out


def quantize_input(method, x: np.ndarray) -> np.ndarray:
    """Float samples as the library takes them: the simulator's input quantization (uint8: floor)."""
    qp = method.act_qparams(INPUT)
    q = qp.quantize(np.asarray(x, np.float32), "floor" if method.prec.acts == "u8" else "nearest")
    return q.view(np.int8) if q.dtype == np.uint8 else q
