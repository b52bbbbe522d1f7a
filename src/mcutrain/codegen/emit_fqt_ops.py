"""The C of each FQT schedule op: one emitter per op in `FQT_KERNEL_EMITTERS` (used by `emit_fqt`).

Each emitter turns one kernel of the planner's FQT schedule into C statements over the arena
macros (`A_<tensor>`) and the library's state variables (`act_<t>`, `err_<t>`, `<layer>_s_w`, ...).
Precision int8 calls the `_s8` kernels of `mt_fqt.h`, uint8 (seed A) the `_u8` ones.
"""

from __future__ import annotations

from collections.abc import Callable

from mcutrain.codegen.cfloat import c_float
from mcutrain.codegen.emit_base import call
from mcutrain.codegen.emit_fqt_base import FqtEmitter
from mcutrain.graph import Node, Op
from mcutrain.plan.schedule import Kernel

ACT_CODE = {"none": 0, "relu": 1, "relu6": 2}
UPDATE_KERNEL = {"float": "mt_fqt_upd_s8", "integer": "mt_fqt_upd_s8_int"}
"""The int8 update's kernel per `FQTConfig.update` (docs/integer-semantics.md 13.7 / 13.9)."""


# ---------------------------------------------------------------- forward


def fwd(e: FqtEmitter, k: Kernel, conv_fn: str = "mt_conv2d_fwd_s8_range") -> list[str]:
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
            return [*head, *call("mt_maxpool_fwd_u8_argmax", ["&p", "&in_d", x, "&out_d", y,
                                                                f"(uint8_t *)(void *){e.t(arg[0])}" if arg
                                                                else "NULL"])]
        if arg:
            return [*head, *call("mt_maxpool_fwd_s8_argmax", ["&p", "&in_d", x, "&out_d", y,
                                                                f"(uint8_t *)(void *){e.t(arg[0])}"])]
        return [*head, *call("mt_maxpool_fwd_s8", ["&p", "&in_d", x, "&out_d", y])]
    lid, o = e.lid(n.name), n.params["weight"].shape[0]
    xa, ya = e.act(n.inputs[0]), e.act(n.name)
    act = ACT_CODE[n.act]
    if e.u8:
        return _fwd_u8(e, n, x, y)
    lines = [f"const mt_per_channel_quant q = {{{lid}_mult, {lid}_shift}};"]
    if n.op == Op.LINEAR:
        lines.append(f"mt_linear_params p = {{{xa}_zp, {ya}_zp, -128, 127}};")
        calls = call("mt_linear_fwd_s8_range", ["&p", "&q", "1", x, str(n.params["weight"].shape[1]),
                                                f"{lid}_weight", f"{lid}_bias", str(o), y, "fqt_amin",
                                                "fqt_amax"])
    else:
        lines += e.conv_head(n)
        sc = [w for w in k.writes if w.endswith(".scratch")]
        ctx = f"{{(void *){e.t(sc[0])}, {e.s.tensors[sc[0]].nbytes}}}" if sc else "{NULL, 0}"
        lines.append(f"const mt_context ctx = {ctx};")
        calls = call(conv_fn, ["&ctx", "&p", "&q", "&in_d", x, "&f_d", f"{lid}_weight",
                               f"{lid}_bias", "&out_d", y, "fqt_amin", "fqt_amax"])
    lines += [f"mt_fqt_act_range_s8({ya}_scale, {ya}_zp, {act}, &p.act_min, &p.act_max);",
              f"fqt_reset_extremes({o});", *calls]
    if e.m.dynamic[n.name]:
        lines += ["if (record) {",
                  f"    mt_fqt_acc_range_f32({o}, fqt_amin, fqt_amax, {xa}_scale, {lid}_s_w, {act}, &{ya});",
                  "}"]
    return lines


def _fwd_u8(e: FqtEmitter, n: Node, x: str, y: str) -> list[str]:
    lid, o = e.lid(n.name), n.params["weight"].shape[0]
    xa, ya = e.act(n.inputs[0]), e.act(n.name)
    act = ACT_CODE[n.act]
    if n.op == Op.LINEAR:
        lines = [f"mt_linear_params p = {{{xa}_zp, {ya}_zp, 0, 255}};"]
        calls = call("mt_linear_fwd_u8_range", ["&p", f"{lid}_w_zp", f"{lid}_m", "1", x,
                                                str(n.params["weight"].shape[1]), f"{lid}_weight",
                                                f"{lid}_bias", str(o), y, "fqt_amin", "fqt_amax"])
    else:
        lines = e.conv_head(n)
        calls = call("mt_conv2d_fwd_u8_range", ["&p", f"{lid}_w_zp", f"{lid}_m", "&in_d", x, "&f_d",
                                                f"{lid}_weight", f"{lid}_bias", "&out_d", y, "fqt_amin",
                                                "fqt_amax"])
    lines += [f"mt_fqt_act_range_u8({ya}_scale, {ya}_zp, {act}, &p.act_min, &p.act_max);",
              "fqt_reset_extremes(1);", *calls]
    if e.m.dynamic[n.name]:
        lines += ["if (record) {",
                  f"    mt_fqt_acc_range_f32(1, fqt_amin, fqt_amax, {xa}_scale, {lid}_s_w, {act}, &{ya});",
                  "}"]
    return lines


# ---------------------------------------------------------------- loss and backward


def _loss(e: FqtEmitter, k: Kernel) -> list[str]:
    kk = e.g.num_classes
    logits, loss, err = e.t(k.reads[0]), e.t(k.writes[0]), e.t(k.writes[1])
    ya, er = e.act(e.g.output), e.err(e.g.output)
    lg = logits
    lines = []
    if e.u8:       # the zero point cancels in softmax: uint8 logits shifted by -128 are int8
        lg = "lg8"
        lines = [f"int8_t lg8[{kk}];", "int32_t k;", f"for (k = 0; k < {kk}; ++k) {{",
                 f"    lg8[k] = (int8_t)((int32_t){logits}[k] - 128);", "}"]
    lines += call("mt_softmax_ce_s8", ["1", str(kk), lg, f"{ya}_scale", "labels + b", loss, "fqt_errq"])
    if e.u8:
        err = f"(uint8_t *)(void *){err}"
    if e.seed_pass:    # a batch's first step: only the logits' error range (and each layer's k)
        return [*lines, *keep_counts(e, loss),
                *call(f"mt_fqt_logit_error_{e.q}", [str(kk), "fqt_errq", "0", f"&{er}", err]),
                f"if (!{er}.initialized) {{", "    continue;", "}"]
    return [*lines, "if (logits != NULL) {", f"    memcpy(logits + b * {kk}, {logits}, {kk});", "}",
            f"losses[b] = {loss}[0];",
            f"if ({loss}[0] > fqt_loss_max) {{", f"    fqt_loss_max = {loss}[0];", "}",
            *keep_counts(e, loss),
            *call(f"mt_fqt_logit_error_{e.q}", [str(kk), "fqt_errq", str(int(e.s.batch == 1)), f"&{er}",
                                                 err])]


def keep_counts(e: FqtEmitter, loss: str) -> list[str]:
    """Partial updates: each layer's k from this sample's loss, and each layer's place in the stream
    of the update's draws (the kept rows of the earlier layers in graph order)."""
    if not e.partial:
        return []
    lines, off = [], []
    for n in e.g.parametric():
        if n.name not in e.trained:
            continue
        lid, w = e.lid(n.name), n.params["weight"]
        per = w.size // w.shape[0]
        policy = e.s.decisions.partial_policy(n.name)
        if policy is not None:
            lines.append(f"fqt_k_{lid} = mt_fqt_keep_count({loss}[0], fqt_loss_max, "
                         f"{c_float(policy.lambda_min)}, {c_float(policy.lambda_max)}, {w.shape[0]});")
        if e.s.batch > 1:
            continue        # a batch's offsets follow its update masks (emit_fqt_partial_batch)
        lines.append(f"fqt_off_{lid} = {' + '.join(off) or '0'};")
        off.append(f"fqt_k_{lid} * {per}" if n.name in e.partial else str(w.size))
    return [*lines, f"fqt_draws = {' + '.join(off)};"] if off else lines


def _topk(e: FqtEmitter, k: Kernel) -> list[str]:
    n = e.g.node(k.node)
    if n.name not in e.partial:
        return ["/* this layer trains fully (the output layer, unless partial_output) */"]
    lid, o = e.lid(n.name), n.params["weight"].shape[0]
    rows = e.s.tensors[k.reads[0]].elements // o
    return call("mt_fqt_topk_s8", [str(rows), str(o), f"fqt_k_{lid}", e.t(k.reads[0]), f"{lid}_keep",
                                    e.sample_mask(lid), f"&fqt_n_{lid}"])


def _zero(e: FqtEmitter, k: Kernel) -> list[str]:
    return [f"memset({e.t(w)}, 0, {e.s.tensors[w].nbytes});" for w in k.writes]


def _copy(e: FqtEmitter, k: Kernel) -> list[str]:
    """A partial layer's own copy of an error another branch reads unmasked (any precision)."""
    return [f"memcpy({e.t(k.writes[0])}, {e.t(k.reads[0])}, {e.s.tensors[k.writes[0]].nbytes});"]


def bwd_in(e: FqtEmitter, k: Kernel) -> list[str]:
    if e.u8:
        return _bwd_in_u8(e, k)
    n = e.g.node(k.node)
    lid, o = e.lid(n.name), n.params["weight"].shape[0]
    ein = e.t(k.reads[0])
    dst = next(w for w in k.writes if w.startswith("err:"))
    pre = e.t(next(w for w in k.writes if w.endswith(".prescale")))
    rows = e.s.tensors[k.reads[0]].elements // o
    de = e.err(n.inputs[0])
    keep = [f"{lid}_keep", f"fqt_n_{lid}"] if n.name in e.kept_only else []   # mt_fqt_keep.h: kept only
    sfx = "_keep" if keep else ""
    if n.op == Op.LINEAR:
        i = n.params["weight"].shape[1]
        head = []

        def kern(out: str, mult: str, shift: str) -> list[str]:
            lead = keep if keep else ["1", "NULL", "0", str(o)]
            return call(f"mt_linear_bwd_in_s8_s16{sfx}", [*lead, f"(const int16_t *)(void *){pre}",
                                                           f"{lid}_weight", str(i), mult, shift, out, "&amin",
                                                           "&amax"])
    else:
        head = e.conv_head(n)

        def kern(out: str, mult: str, shift: str) -> list[str]:
            return call(f"mt_conv2d_bwd_in_s8_s16{sfx}", ["&p", *(keep or ["NULL", "0"]), "&out_d",
                                                           f"(const int16_t *)(void *){pre}",
                                                           "&f_d", f"{lid}_weight", "&in_d", mult, shift, out,
                                                           "&amin", "&amax"])
    return [*head, "float smax;", "float s_acc;", "int32_t mult;", "int32_t shift;",
            "int32_t amin = INT32_MAX;", "int32_t amax = INT32_MIN;",
            *call(f"mt_fqt_prescale_s16{sfx}", [str(rows), str(o), *keep, ein, f"{lid}_s_w",
                                                 f"(int16_t *)(void *){pre}", "&smax"]),
            f"s_acc = (smax * mt_fqt_err_scale(&{e.err(n.name)})) * 0x1p-8f; /* (s_max * s_e) * 2^-8 */",
            *first_range(e, de, kern("NULL", "0", "0")),
            *call("mt_fqt_quantize_multiplier", [f"(double)s_acc / (double)mt_fqt_err_scale(&{de})", "&mult",
                                                  "&shift"]),
            *kern(e.t(dst), "mult", "shift"),
            f"mt_fqt_range_see_acc(&{de}, amin, amax, s_acc);"]


def _bwd_in_u8(e: FqtEmitter, k: Kernel) -> list[str]:
    n = e.g.node(k.node)
    lid, o = e.lid(n.name), n.params["weight"].shape[0]
    ein = e.t(k.reads[0])
    dst = e.t(next(w for w in k.writes if w.startswith("err:")))
    de = e.err(n.inputs[0])
    keep = [f"{lid}_keep", f"fqt_n_{lid}"] if n.name in e.kept_only else []   # mt_fqt_keep.h: kept only
    sfx = "_keep" if keep else ""
    if n.op == Op.LINEAR:
        i = n.params["weight"].shape[1]
        head = []

        def kern(out: str, mult: str, zp: str) -> list[str]:
            if keep:
                return call("mt_linear_bwd_in_u8_keep", [*keep, "z_e", f"{lid}_w_zp", ein, f"{lid}_weight",
                                                          str(i), mult, zp, out, "&amin", "&amax"])
            return call("mt_linear_bwd_in_u8", ["1", "z_e", f"{lid}_w_zp", str(o), ein, f"{lid}_weight",
                                                 str(i), mult, zp, out, "&amin", "&amax"])
    else:
        head = e.conv_head(n)

        def kern(out: str, mult: str, zp: str) -> list[str]:
            return call(f"mt_conv2d_bwd_in_u8{sfx}", ["&p", *keep, "z_e", f"{lid}_w_zp", "&out_d", ein,
                                                       "&f_d", f"{lid}_weight", "&in_d", mult, zp, out,
                                                       "&amin", "&amax"])
    return [*head, *e.err_qp(n.name, "s_e", "z_e"), "float s_acc;", "float s_x;", "int32_t z_x;",
            "int32_t amin = INT32_MAX;", "int32_t amax = INT32_MIN;",
            f"s_acc = {lid}_s_w[0] * s_e; /* float32(s_w * s_e) */",
            *first_range(e, de, kern("NULL", "0.0f", "0")),
            f"mt_fqt_qparams_u8({de}.lo, {de}.hi, &s_x, &z_x);",
            *kern(f"(uint8_t *)(void *){dst}", "s_acc / s_x", "z_x"),
            f"mt_fqt_range_see_acc(&{de}, amin, amax, s_acc);"]


def first_range(e: FqtEmitter, de: str, range_only: list[str]) -> list[str]:
    """An error tensor without a range yet: batch 1 seeds it from this sample; a batch's seeding
    pass records this sample's range and stops the sample's backward there."""
    if e.s.batch > 1 and not e.seed_pass:
        return []      # the seeding pass gave every error tensor its range
    last = "    continue;" if e.seed_pass else f"    mt_fqt_range_seed(&{de});"
    return [f"if (!{de}.initialized) {{ /* first step: this tensor's range seeds its EMA */",
            *("    " + x for x in range_only), f"    mt_fqt_range_see_acc(&{de}, amin, amax, s_acc);", last,
            "}"]


def bwd_w(e: FqtEmitter, k: Kernel) -> list[str]:
    if e.u8:
        return _bwd_w_u8(e, k)
    n = e.g.node(k.node)
    ein, x = e.t(k.reads[0]), e.t(k.reads[1])
    gw = e.t(next(w for w in k.writes if w.endswith(".weight")))
    gb = e.t(next(w for w in k.writes if w.endswith(".bias")))
    w = n.params["weight"]
    if n.name in e.kept_only:     # mt_fqt_keep.h: the kept rows only, overwritten (batch 1)
        keep = [f"{e.lid(n.name)}_keep", f"fqt_n_{e.lid(n.name)}"]
        if n.op == Op.LINEAR:
            return call("mt_linear_bwd_w_s8_s8_keep", [f"{e.act(n.inputs[0])}_zp", *keep, x, str(w.shape[1]),
                                                        ein, gw, gb])
        return [*e.conv_head(n), *call("mt_conv2d_bwd_w_s8_s8_keep", ["&p", *keep, "&in_d", x, "&out_d", ein,
                                                                        "&f_d", gw, gb])]
    zero = [] if e.s.batch > 1 else [f"memset({gw}, 0, {4 * w.size});", f"memset({gb}, 0, {4 * w.shape[0]});"]
    if n.op == Op.LINEAR:
        return [*zero, *call("mt_linear_bwd_w_s8_s8", [f"{e.act(n.inputs[0])}_zp", "1", x, str(w.shape[1]),
                                                         ein, str(w.shape[0]), gw, gb])]
    return [*e.conv_head(n), *zero,
            *call("mt_conv2d_bwd_w_s8_s8", ["&p", "&in_d", x, "&out_d", ein, "&f_d", gw, gb])]


def _bwd_w_u8(e: FqtEmitter, k: Kernel) -> list[str]:
    """Seed A's per-sample uint8 gradient: its range (a pass of its own on the first step) and EMA."""
    n = e.g.node(k.node)
    lid = e.lid(n.name)
    ein, x = e.t(k.reads[0]), e.t(k.reads[1])
    gw = e.t(next(w for w in k.writes if w.endswith(".weight")))
    gb = e.t(next(w for w in k.writes if w.endswith(".bias")))
    w = n.params["weight"]
    xa = e.act(n.inputs[0])
    keep = [f"{lid}_keep", f"fqt_n_{lid}"] if n.name in e.kept_only else []   # mt_fqt_keep.h: kept rows only
    sfx = "_keep" if keep else ""
    if n.op == Op.LINEAR:
        head = []

        def kern(out: str, mult: str, zp: str) -> list[str]:
            return call(f"mt_linear_bwd_w_u8{sfx}", [*keep, f"{xa}_zp", "z_e", x, str(w.shape[1]), ein,
                                                      str(w.shape[0]), mult, zp, out, gb, "&gmin", "&gmax"])
    else:
        head = e.conv_head(n)

        def kern(out: str, mult: str, zp: str) -> list[str]:
            return call(f"mt_conv2d_bwd_w_u8{sfx}", ["&p", *keep, "z_e", "&in_d", x, "&out_d", ein, "&f_d",
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


def _update_u8(e: FqtEmitter, k: Kernel) -> list[str]:
    n = e.g.node(k.node)
    lid = e.lid(n.name)
    w = n.params["weight"]
    c = e.m.cfg
    gw, gb = e.t(k.reads[0]), e.t(k.reads[1])
    gr = f"grad_{lid}"
    return [*e.err_qp(n.name, "s_e", "z_e"), "float s_q;", "int32_t z_q;", "(void)z_e;",
            f"mt_fqt_qparams_u8({gr}.lo, {gr}.hi, &s_q, &z_q);",
            f"const mt_fqt_upd_params up = {{lr, {c_float(c.alpha_norm)}, {c_float(c.alpha_w)}, s_q, s_e}};",
            *call("mt_fqt_upd_u8", ["&up", str(w.shape[0]), str(w.size // w.shape[0]),
                                     f"(const uint8_t *)(void *){gw}", "z_q", gb, f"{lid}_norm_mu",
                                     f"{lid}_norm_sd", f"{lid}_norm_init", f"{lid}_weight", f"{lid}_s_w",
                                     f"&{lid}_w_zp", f"{lid}_w_lo", f"{lid}_w_hi", f"{lid}_bias_step"])]


def _update(e: FqtEmitter, k: Kernel) -> list[str]:
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
            *call(UPDATE_KERNEL[c.update], ["&up", str(o), str(per), gw, gb, upd, f"{lid}_norm_mu",
                                     f"{lid}_norm_sd", f"{lid}_norm_init", f"{lid}_weight", f"{lid}_s_w",
                                     f"{lid}_w_lo", f"{lid}_w_hi", f"{lid}_bias_step", "&r"])]


def _relu_bwd(e: FqtEmitter, k: Kernel) -> list[str]:
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
                *call("mt_relu_bwd_u8", [str(size), "lo", hi, e.t(k.reads[1]), "z_e", e.t(k.reads[0]),
                                          e.t(k.writes[0])])]
    return [*head, *call("mt_relu_bwd_s8", [str(size), "lo", hi, e.t(k.reads[1]), e.t(k.reads[0]),
                                             e.t(k.writes[0])])]


def _pool_bwd(e: FqtEmitter, k: Kernel) -> list[str]:
    n = e.g.node(k.node)
    (kh, kw), (sh, sw) = n.attrs["kernel"], n.attrs["stride"]
    return [f"static const mt_pool_params p = {{{kh}, {kw}, {sh}, {sw}}};",
            f"static const mt_dims in_d = {e.dims(e.g.shape(n.inputs[0]))};",
            f"static const mt_dims out_d = {e.dims(e.g.shape(n.name))};",
            *(call("mt_maxpool_bwd_s8", ["&p", "&in_d", "&out_d",
                                          f"(const uint8_t *)(void *){e.t(k.reads[1])}", e.t(k.reads[0]),
                                          e.t(k.writes[0])]) if not e.u8 else
              [*e.err_qp(n.name, "s_e", "z_e"), "(void)s_e;",
               *call("mt_maxpool_bwd_u8", ["&p", "z_e", "&in_d", "&out_d",
                                            f"(const uint8_t *)(void *){e.t(k.reads[1])}", e.t(k.reads[0]),
                                            e.t(k.writes[0])])])]


def _alias(e: FqtEmitter, k: Kernel) -> list[str]:
    return ["/* the error of a flatten is its output's error: same storage */"]


def _ema_update(e: FqtEmitter, k: Kernel) -> list[str]:
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
            lines += call("mt_fqt_bias_rescale_u8_upd" if part else "mt_fqt_bias_rescale_u8",
                           [str(w.shape[0]), str(w.size // w.shape[0]), f"{lid}_weight", f"{lid}_w_zp",
                            f"{e.act(n.inputs[0])}_scale", f"{lid}_s_w[0]", step,
                            *([f"{lid}_upd"] if part else []), f"{lid}_bias_scale", f"{lid}_bias"])
            continue
        lines += call("mt_fqt_bias_rescale_s32", [str(w.shape[0]), str(w.size // w.shape[0]),
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


FQT_KERNEL_EMITTERS: dict[str, Callable[[FqtEmitter, Kernel], list[str]]] = {
    "conv2d_fwd": fwd, "linear_fwd": fwd, "maxpool_fwd": fwd, "flatten_fwd": fwd,
    "softmax_ce": _loss, "linear_bwd_in": bwd_in, "conv2d_bwd_in": bwd_in,
    "linear_bwd_w": bwd_w, "conv2d_bwd_w": bwd_w, "fqt_update": _update,
    "relu_bwd": _relu_bwd, "relu6_bwd": _relu_bwd, "maxpool_bwd": _pool_bwd, "reshape": _alias,
    "ema_update": _ema_update, "zero": _zero, "error_copy": _copy, "partial_topk": _topk,
}
"""FQT schedule op -> emitter of its C code (int8 precision)."""


# ---------------------------------------------------------------- state
