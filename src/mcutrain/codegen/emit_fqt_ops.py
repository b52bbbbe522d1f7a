"""The C of each FQT schedule op: one emitter per op in `FQT_KERNEL_EMITTERS` (used by `emit_fqt`).

Each emitter turns one kernel of the planner's FQT schedule into C statements over the arena
macros (`A_<tensor>`) and the library's state variables (`act_<t>`, `err_<t>`, `<layer>_s_w`, ...).
Precision int8 calls the `_s8` kernels of `mt_fqt.h`, uint8 (seed A) the `_u8` ones.
"""

from __future__ import annotations

from collections.abc import Callable

from mcutrain.codegen.cformat import unique_idents
from mcutrain.codegen.emit import ExportError
from mcutrain.codegen.emit_train import c_float
from mcutrain.graph import INPUT, PARAMETRIC, Node, Op
from mcutrain.plan.schedule import Kernel, Schedule
from mcutrain.plan.training import TrainingPlan

ACT_CODE = {"none": 0, "relu": 1, "relu6": 2}


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
        self.u8 = method.prec.acts == "u8"      # uint8 weights and activations: uint8 and mixed
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
            for src in n.inputs:   # a tensor read by several ops sums their errors into its own range
                own = n.op in PARAMETRIC or self.m.n_consumers[src] > 1
                keys[src] = src if own else keys[n.name]
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


def _fwd(e: _FqtEmitter, k: Kernel, conv_fn: str = "mt_conv2d_fwd_s8_range") -> list[str]:
    """A forward kernel; `conv_fn` names the int8 conv call (depthwise convs pass their own)."""
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
        sc = [w for w in k.writes if w.endswith(".scratch")]
        ctx = f"{{(void *){e.t(sc[0])}, {e.s.tensors[sc[0]].nbytes}}}" if sc else "{NULL, 0}"
        lines.append(f"const mt_context ctx = {ctx};")
        call = _call(conv_fn, ["&ctx", "&p", "&q", "&in_d", x, "&f_d", f"{lid}_weight",
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
    keep = [f"{lid}_keep", f"fqt_n_{lid}"] if n.name in e.partial else []   # mt_fqt_keep.h: kept only
    sfx = "_keep" if keep else ""
    if n.op == Op.LINEAR:
        i = n.params["weight"].shape[1]
        head = []

        def kern(out: str, mult: str, shift: str) -> list[str]:
            lead = keep if keep else ["1", "NULL", "0", str(o)]
            return _call(f"mt_linear_bwd_in_s8_s16{sfx}", [*lead, f"(const int16_t *)(void *){pre}",
                                                           f"{lid}_weight", str(i), mult, shift, out, "&amin",
                                                           "&amax"])
    else:
        head = e.conv_head(n)

        def kern(out: str, mult: str, shift: str) -> list[str]:
            return _call(f"mt_conv2d_bwd_in_s8_s16{sfx}", ["&p", *(keep or ["NULL", "0"]), "&out_d",
                                                           f"(const int16_t *)(void *){pre}",
                                                           "&f_d", f"{lid}_weight", "&in_d", mult, shift, out,
                                                           "&amin", "&amax"])
    return [*head, "float smax;", "float s_acc;", "int32_t mult;", "int32_t shift;",
            "int32_t amin = INT32_MAX;", "int32_t amax = INT32_MIN;",
            *_call(f"mt_fqt_prescale_s16{sfx}", [str(rows), str(o), *keep, ein, f"{lid}_s_w",
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
    keep = [f"{lid}_keep", f"fqt_n_{lid}"] if n.name in e.partial else []   # mt_fqt_keep.h: kept only
    sfx = "_keep" if keep else ""
    if n.op == Op.LINEAR:
        i = n.params["weight"].shape[1]
        head = []

        def kern(out: str, mult: str, zp: str) -> list[str]:
            if keep:
                return _call("mt_linear_bwd_in_u8_keep", [*keep, "z_e", f"{lid}_w_zp", ein, f"{lid}_weight",
                                                          str(i), mult, zp, out, "&amin", "&amax"])
            return _call("mt_linear_bwd_in_u8", ["1", "z_e", f"{lid}_w_zp", str(o), ein, f"{lid}_weight",
                                                 str(i), mult, zp, out, "&amin", "&amax"])
    else:
        head = e.conv_head(n)

        def kern(out: str, mult: str, zp: str) -> list[str]:
            return _call(f"mt_conv2d_bwd_in_u8{sfx}", ["&p", *keep, "z_e", f"{lid}_w_zp", "&out_d", ein,
                                                       "&f_d", f"{lid}_weight", "&in_d", mult, zp, out,
                                                       "&amin", "&amax"])
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
    if n.name in e.partial:     # mt_fqt_keep.h: the kept rows only, overwritten (batch 1)
        keep = [f"{e.lid(n.name)}_keep", f"fqt_n_{e.lid(n.name)}"]
        if n.op == Op.LINEAR:
            return _call("mt_linear_bwd_w_s8_s8_keep", [f"{e.act(n.inputs[0])}_zp", *keep, x, str(w.shape[1]),
                                                        ein, gw, gb])
        return [*e.conv_head(n), *_call("mt_conv2d_bwd_w_s8_s8_keep", ["&p", *keep, "&in_d", x, "&out_d", ein,
                                                                        "&f_d", gw, gb])]
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
    keep = [f"{lid}_keep", f"fqt_n_{lid}"] if n.name in e.partial else []   # mt_fqt_keep.h: kept rows only
    sfx = "_keep" if keep else ""
    if n.op == Op.LINEAR:
        head = []

        def kern(out: str, mult: str, zp: str) -> list[str]:
            return _call(f"mt_linear_bwd_w_u8{sfx}", [*keep, f"{xa}_zp", "z_e", x, str(w.shape[1]), ein,
                                                      str(w.shape[0]), mult, zp, out, gb, "&gmin", "&gmax"])
    else:
        head = e.conv_head(n)

        def kern(out: str, mult: str, zp: str) -> list[str]:
            return _call(f"mt_conv2d_bwd_w_u8{sfx}", ["&p", *keep, "z_e", "&in_d", x, "&out_d", ein, "&f_d",
                                                      mult, zp, out, gb, "&gmin", "&gmax"])
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
    act = n.op.value if n.op in (Op.RELU, Op.RELU6) else n.act
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
    if m.prec.quantize_sample_grads:
        lines += [f"mt_fqt_range_update(&grad_{e.lid(t)}, {c_float(c.alpha_e)});" for t in e.trained]
    for n in e.g.parametric():
        if not m.dynamic[n.name]:
            continue
        lid, w = e.lid(n.name), n.params["weight"]
        step = f"{lid}_bias_step" if n.name in e.trained else "NULL"
        if e.u8:
            part = n.name in e.partial      # partial updates: channels not updated may keep their bias
            lines += _call("mt_fqt_bias_rescale_u8_upd" if part else "mt_fqt_bias_rescale_u8",
                           [str(w.shape[0]), str(w.size // w.shape[0]), f"{lid}_weight", f"{lid}_w_zp",
                            f"{e.act(n.inputs[0])}_scale", f"{lid}_s_w[0]", step,
                            *([f"{lid}_upd"] if part else []), f"{lid}_bias_scale", f"{lid}_bias"])
            continue
        lines += _call("mt_fqt_bias_rescale_s32", [str(w.shape[0]), str(w.size // w.shape[0]),
                                                   f"{lid}_weight", f"{e.act(n.inputs[0])}_scale",
                                                   f"{lid}_s_w", step,
                                                   f"{lid}_upd" if n.name in e.partial else "NULL",
                                                   f"{lid}_bias_scale",
                                                   f"{lid}_bias"])
    if e.partial and e.total_draws:
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
