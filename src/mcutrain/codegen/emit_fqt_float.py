"""The C of the FQT schedule ops that depend on the precision beyond int8 and seed A's batch-1 uint8.

`emitters(e)` is the table `emit_fqt` uses: `emit_fqt_ops.FQT_KERNEL_EMITTERS` with these ops
replaced where the precision needs them:
- float32 errors (`mixed`, `float32`): logit error, ReLU masks, max-pool routing, error
  propagation, weight gradients, top-k and update on float32 tensors, in the sequential order
  of `FQTConfig(exact_float_order=True)` (docs/integer-semantics.md 13.8); no error ranges;
- float32 activations (`float32`): the forward pass and the loss on int8-quantized logits;
- `uint8` with a batch (per-sample uint8 gradients summed in int16) or with partial updates
  (top-k on uint8 errors, the update of `mt_fqt_upd_u8_any` with a mask).

Example:
    >>> from mcutrain import zoo
    >>> from mcutrain.methods.fqt import FQT
    >>> from mcutrain.methods.fqt_state import FQTConfig
    >>> from mcutrain.codegen.emit_fqt import emit_fqt_training
    >>> x = np.random.default_rng(0).random((8, 8, 8, 1), dtype=np.float32)
    >>> m = FQT(zoo.build("digits-cnn"), FQTConfig(precision="mixed", exact_float_order=True), x)
    >>> "mt_fqt_upd_u8_any(" in emit_fqt_training(m, kernels="ref").source
    True
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np  # noqa: F401  (the doctest's namespace)

from mcutrain.codegen.cfloat import c_float
from mcutrain.codegen.emit import ExportError
from mcutrain.codegen.emit_base import call
from mcutrain.codegen.emit_fqt_base import FqtEmitter
from mcutrain.codegen.emit_fqt_ops import ACT_CODE, FQT_KERNEL_EMITTERS, fwd, keep_counts
from mcutrain.graph import PARAMETRIC, Node, Op
from mcutrain.plan.schedule import Kernel

Emitter = Callable[[FqtEmitter, Kernel], list[str]]


def _f(ptr: str) -> str:
    return f"(float *)(void *){ptr}"


def _head_f32(e: FqtEmitter, n: Node, input_zp: str = "0") -> list[str]:
    """Conv parameters and dims without activation qparams (float32 tensors have none);
    `input_zp`: the C expression of the input's zero point where the kernel reads one."""
    a = n.attrs
    (sh, sw), (pt, _, pl, _) = a["stride"], a["padding"]
    return [f"const mt_conv_params p = {{{input_zp}, 0, {sh}, {sw}, {pt}, {pl}, {a['groups']}, -128, 127}};",
            f"static const mt_dims in_d = {e.dims(e.g.shape(n.inputs[0]))};",
            f"static const mt_dims f_d = {{{', '.join(map(str, n.params['weight'].shape))}}};",
            f"static const mt_dims out_d = {e.dims(e.g.shape(n.name))};"]


def _pool_head(e: FqtEmitter, n: Node) -> list[str]:
    (kh, kw), (sh, sw) = n.attrs["kernel"], n.attrs["stride"]
    return [f"static const mt_pool_params p = {{{kh}, {kw}, {sh}, {sw}}};",
            f"static const mt_dims in_d = {e.dims(e.g.shape(n.inputs[0]))};",
            f"static const mt_dims out_d = {e.dims(e.g.shape(n.name))};"]


# ---------------------------------------------------------------- precision float32: forward and loss


def _fwd_f32(e: FqtEmitter, k: Kernel) -> list[str]:
    n = e.g.node(k.node)
    if n.op == Op.FLATTEN:
        return fwd(e, k)
    x, y = e.t(k.reads[0]), e.t(k.writes[0])
    if n.op == Op.MAXPOOL:
        arg = [w for w in k.writes if w.endswith(".argmax")]
        return [*_pool_head(e, n),
                *call("mt_maxpool_fwd_f32_argmax", ["&p", "&in_d", x, "&out_d", y,
                                                     f"(uint8_t *)(void *){e.t(arg[0])}" if arg else "NULL"])]
    lid, w = e.lid(n.name), n.params["weight"]
    act = str(ACT_CODE[n.act])
    if n.op == Op.LINEAR:
        return call("mt_linear_fwd_f32", [act, "1", x, str(w.shape[1]), f"{lid}_weight", f"{lid}_bias",
                                           str(w.shape[0]), y])
    return [*_head_f32(e, n), *call("mt_conv2d_fwd_f32", ["&p", act, "&in_d", x, "&f_d", f"{lid}_weight",
                                                           f"{lid}_bias", "&out_d", y])]


def own_range_lines(logits: str, kk: int) -> list[str]:
    """C declaring `lo` and `hi`: the range of one sample's `kk` float32 logits, which the loss
    quantizes them with (`methods.fqt_backward.float_logits_s8`)."""
    return [f"float lo = {logits}[0];", f"float hi = {logits}[0];",
            f"for (k = 1; k < {kk}; ++k) {{",
            f"    lo = {logits}[k] < lo ? {logits}[k] : lo;",
            f"    hi = {logits}[k] > hi ? {logits}[k] : hi;", "}"]


def _loss_f(e: FqtEmitter, k: Kernel) -> list[str]:
    """Loss and float32 logit error; the logits the caller gets are the int8 values the loss saw
    (float32: each sample's logits quantized with their own range; mixed: the uint8 logits)."""
    kk = e.g.num_classes
    logits, loss, err = e.t(k.reads[0]), e.t(k.writes[0]), e.t(k.writes[1])
    lines = [f"int8_t lg8[{kk}];", "int32_t k;"]
    if e.m.prec.acts == "f32":
        lines += [*own_range_lines(logits, kk), "float s_lg;", "int32_t z_lg;",
                  *call("mt_fqt_logits_s8_f32", [str(kk), logits, "lo", "hi", "lg8", "&s_lg", "&z_lg"]),
                  "(void)z_lg;"]
        scale = "s_lg"
    else:       # the zero point cancels in softmax: uint8 logits shifted by -128 are int8
        lines += [f"for (k = 0; k < {kk}; ++k) {{", f"    lg8[k] = (int8_t)((int32_t){logits}[k] - 128);",
                  "}"]
        scale = f"{e.act(e.g.output)}_scale"
    shown = "lg8" if e.m.prec.acts == "f32" else logits
    return [*lines, *call("mt_softmax_ce_s8", ["1", str(kk), "lg8", scale, "labels + b", loss, "fqt_errq"]),
            "if (logits != NULL) {", f"    memcpy(logits + b * {kk}, {shown}, {kk});", "}",
            f"losses[b] = {loss}[0];",
            f"if ({loss}[0] > fqt_loss_max) {{", f"    fqt_loss_max = {loss}[0];", "}",
            *keep_counts(e, loss),
            *call("mt_fqt_logit_error_f32", [str(kk), "fqt_errq", err])]


# ---------------------------------------------------------------- float32 errors (mixed, float32)


def _relu_bwd_f(e: FqtEmitter, k: Kernel) -> list[str]:
    n = e.g.node(k.node)
    act = n.act if n.op in PARAMETRIC else n.op.value
    size = e.s.tensors[k.writes[0]].elements
    y, ein, eout = e.t(k.reads[1]), e.t(k.reads[0]), e.t(k.writes[0])
    if e.m.prec.acts == "f32":
        return call("mt_relu_bwd_f32", [str(size), str(ACT_CODE[act]), y, ein, eout])
    hi = "hi" if act == "relu6" else "256"
    return ["int32_t lo;", "int32_t hi;",
            f"mt_fqt_act_range_u8({e.act(n.name)}_scale, {e.act(n.name)}_zp, {ACT_CODE[act]}, &lo, &hi);",
            *(["(void)hi;"] if act != "relu6" else []),
            *call("mt_relu_bwd_u8_f32", [str(size), "lo", hi, y, ein, eout])]


def _pool_bwd_f(e: FqtEmitter, k: Kernel) -> list[str]:
    n = e.g.node(k.node)
    return [*_pool_head(e, n),
            *call("mt_maxpool_bwd_f32", ["&p", "&in_d", "&out_d",
                                          f"(const uint8_t *)(void *){e.t(k.reads[1])}", e.t(k.reads[0]),
                                          e.t(k.writes[0])])]


def _bwd_in_f(e: FqtEmitter, k: Kernel) -> list[str]:
    n = e.g.node(k.node)
    lid, w = e.lid(n.name), n.params["weight"]
    o = w.shape[0]
    ein = e.t(k.reads[0])
    dst = e.t(next(t for t in k.writes if t.startswith("err:")))
    if e.m.prec.weights == "f32":
        keep = [f"{lid}_keep", f"fqt_n_{lid}"] if n.name in e.kept_only else []   # mt_fqt_keep.h: kept only
        if n.op == Op.LINEAR:
            if keep:
                return call("mt_linear_bwd_in_f32_keep", [*keep, ein, f"{lid}_weight", str(w.shape[1]), dst])
            return call("mt_linear_bwd_in_f32", ["1", str(o), ein, f"{lid}_weight", str(w.shape[1]), dst])
        return [*_head_f32(e, n), *call("mt_conv2d_bwd_in_f32" + ("_keep" if keep else ""),
                                         ["&p", *keep, "&out_d", ein, "&f_d", f"{lid}_weight", "&in_d", dst])]
    if n.op == Op.LINEAR:
        return call("mt_linear_bwd_in_u8_f32", ["1", f"{lid}_w_zp", f"{lid}_s_w[0]", str(o), ein,
                                                 f"{lid}_weight", str(w.shape[1]), dst])
    return [*_head_f32(e, n), *call("mt_conv2d_bwd_in_u8_f32", ["&p", f"{lid}_w_zp", f"{lid}_s_w[0]",
                                                                 "&out_d", ein, "&f_d", f"{lid}_weight",
                                                                 "&in_d", dst])]


def _bwd_w_f(e: FqtEmitter, k: Kernel) -> list[str]:
    n = e.g.node(k.node)
    w = n.params["weight"]
    ein, x = e.t(k.reads[0]), e.t(k.reads[1])
    gw = e.t(next(t for t in k.writes if t.endswith(".weight")))
    gb = e.t(next(t for t in k.writes if t.endswith(".bias")))
    zero = [] if e.s.batch > 1 else [f"memset({gw}, 0, {4 * w.size});", f"memset({gb}, 0, {4 * w.shape[0]});"]
    f32 = e.m.prec.acts == "f32"
    if f32 and n.name in e.kept_only:     # mt_fqt_keep.h: the kept rows only, overwritten (batch 1)
        keep = [f"{e.lid(n.name)}_keep", f"fqt_n_{e.lid(n.name)}"]
        if n.op == Op.LINEAR:
            return call("mt_linear_bwd_w_f32_keep", [*keep, x, str(w.shape[1]), ein, gw, gb])
        return [*_head_f32(e, n), *call("mt_conv2d_bwd_w_f32_keep", ["&p", *keep, "&in_d", x, "&out_d", ein,
                                                                       "&f_d", gw, gb])]
    if n.op == Op.LINEAR:
        args = [x, str(w.shape[1]), ein, str(w.shape[0]), gw, gb]
        return [*zero, *(call("mt_linear_bwd_w_f32", args) if f32 else
                         call("mt_linear_bwd_w_u8_f32", [f"{e.act(n.inputs[0])}_zp", *args]))]
    head = _head_f32(e, n, "0" if f32 else f"{e.act(n.inputs[0])}_zp")   # uint8: the input's zero point
    return [*head, *zero, *call("mt_conv2d_bwd_w_f32" if f32 else "mt_conv2d_bwd_w_u8_f32",
                                 ["&p", "&in_d", x, "&out_d", ein, "&f_d", gw, gb])]


def _topk_f(e: FqtEmitter, k: Kernel) -> list[str]:
    n = e.g.node(k.node)
    if n.name not in e.partial:
        return ["/* this layer trains fully (the output layer, unless partial_output) */"]
    lid, o = e.lid(n.name), n.params["weight"].shape[0]
    rows = e.s.tensors[k.reads[0]].elements // o
    scratch = _f(e.t(k.writes[0]))
    return call("mt_fqt_topk_f32", [str(rows), str(o), f"fqt_k_{lid}", e.t(k.reads[0]), scratch,
                                     f"{lid}_keep", e.sample_mask(lid), f"&fqt_n_{lid}"])


def _update_f(e: FqtEmitter, k: Kernel) -> list[str]:
    n = e.g.node(k.node)
    lid, w = e.lid(n.name), n.params["weight"]
    o, per = w.shape[0], w.size // w.shape[0]
    c = e.m.cfg
    gw, gb = e.t(k.reads[0]), e.t(k.reads[1])
    upd = f"{lid}_upd" if n.name in e.partial else "NULL"
    if e.m.prec.weights == "f32":
        return [f"const mt_fqt_upd_params up = {{lr, {c_float(c.alpha_norm)}, 0.0f, 1.0f, 1.0f}};",
                *call("mt_fqt_upd_f32", ["&up", str(o), str(per), gw, gb, upd, f"{lid}_norm_mu",
                                          f"{lid}_norm_sd", f"{lid}_norm_init", f"{lid}_weight",
                                          f"{lid}_bias"])]
    # mixed: the real gradient is the float32 sum times s_x (once, in the update), the bias's is the sum
    grad = [f"const mt_fqt_grad g = {{{gw}, MT_FQT_GRAD_F32, 0, {e.act(n.inputs[0])}_scale}};",
            f"const mt_fqt_grad gb = {{{gb}, MT_FQT_GRAD_F32, 0, 1.0f}};"]
    return _update_u8_any(e, k, grad)


# ---------------------------------------------------------------- uint8 with a batch or partial updates


def _update_u8_any(e: FqtEmitter, k: Kernel, grad: list[str]) -> list[str]:
    n = e.g.node(k.node)
    lid, w = e.lid(n.name), n.params["weight"]
    c = e.m.cfg
    upd = f"{lid}_upd" if n.name in e.partial else "NULL"
    rates = f"{c_float(c.alpha_norm)}, {c_float(c.alpha_w)}"
    return [*grad, f"const mt_fqt_upd_params up = {{lr, {rates}, 0.0f, 0.0f}};",
            *call("mt_fqt_upd_u8_any", ["&up", str(w.shape[0]), str(w.size // w.shape[0]), "&g", "&gb", upd,
                                         f"{lid}_norm_mu", f"{lid}_norm_sd", f"{lid}_norm_init",
                                         f"{lid}_weight", f"{lid}_s_w", f"&{lid}_w_zp", f"{lid}_w_lo",
                                         f"{lid}_w_hi", f"{lid}_bias_step"])]


def _update_u8(e: FqtEmitter, k: Kernel) -> list[str]:
    """uint8: the gradient buffer holds uint8 values (batch 1) or the int16 sum of centred ones."""
    if e.s.batch == 1 and not e.partial:
        return FQT_KERNEL_EMITTERS["fqt_update"](e, k)
    n = e.g.node(k.node)
    lid = e.lid(n.name)
    gw, gb = e.t(k.reads[0]), e.t(k.reads[1])
    kind, zp = ("MT_FQT_GRAD_U8", "z_q") if e.s.batch == 1 else ("MT_FQT_GRAD_S16", "0")
    return _update_u8_any(e, k, [*e.err_qp(n.name, "s_e", "z_e"), "float s_q;", "int32_t z_q;", "(void)z_e;",
                                 f"mt_fqt_qparams_u8(grad_{lid}.lo, grad_{lid}.hi, &s_q, &z_q);",
                                 f"const mt_fqt_grad g = {{{gw}, {kind}, {zp}, s_q}};",
                                 f"const mt_fqt_grad gb = {{{gb}, MT_FQT_GRAD_S32, 0, s_e}};"])


def _bwd_w_u8(e: FqtEmitter, k: Kernel) -> list[str]:
    """uint8 with a batch: each sample's uint8 gradient, quantized with the step's gradient qparams,
    summed centred into the int16 buffer; a batch's first step takes its range in the seeding pass."""
    if e.s.batch == 1:
        return FQT_KERNEL_EMITTERS[k.op](e, k)
    n = e.g.node(k.node)
    lid, w = e.lid(n.name), n.params["weight"]
    ein, x = e.t(k.reads[0]), e.t(k.reads[1])
    gw = e.t(next(t for t in k.writes if t.endswith(".weight")))
    gb = e.t(next(t for t in k.writes if t.endswith(".bias")))
    xa, gr = e.act(n.inputs[0]), f"grad_{lid}"
    if e.s.tensors[next(t for t in k.writes if t.endswith(".weight"))].dtype != "s16":
        raise ExportError("fqt uint8 in C sums a batch's uint8 gradients in int16: at most --batch 128")
    head = [] if n.op == Op.LINEAR else e.conv_head(n)

    def kern(grad: str, bias: str, mult: str, zp: str) -> list[str]:
        if n.op == Op.LINEAR:
            return call("mt_linear_bwd_w_u8_s16" if grad != "NULL" else "mt_linear_bwd_w_u8",
                         [f"{xa}_zp", "z_e", x, str(w.shape[1]), ein, str(w.shape[0]), mult, zp, grad, bias,
                          "&gmin", "&gmax"])
        return call("mt_conv2d_bwd_w_u8_s16" if grad != "NULL" else "mt_conv2d_bwd_w_u8",
                     ["&p", "z_e", "&in_d", x, "&out_d", ein, "&f_d", mult, zp, grad, bias, "&gmin", "&gmax"])

    lines = [*head, *e.err_qp(n.name, "s_e", "z_e"), "float s_g;", "int32_t gmin = INT32_MAX;",
             "int32_t gmax = INT32_MIN;", f"s_g = {xa}_scale * s_e; /* float32(s_x * s_e) */"]
    if e.seed_pass:       # the range only, once per sample of the batch's first step
        return [*lines, f"if (!{gr}.initialized) {{", *("    " + y for y in kern("NULL", gb, "0.0f", "0")),
                f"    mt_fqt_range_see_acc(&{gr}, gmin, gmax, s_g);", "}"]
    return [*lines, "float s_q;", "int32_t z_q;", f"mt_fqt_qparams_u8({gr}.lo, {gr}.hi, &s_q, &z_q);",
            *kern(f"(int16_t *)(void *){gw}", gb, "s_g / s_q", "z_q"),
            f"mt_fqt_range_see_acc(&{gr}, gmin, gmax, s_g);"]


def _topk_u8(e: FqtEmitter, k: Kernel) -> list[str]:
    n = e.g.node(k.node)
    if n.name not in e.partial:
        return ["/* this layer trains fully (the output layer, unless partial_output) */"]
    lid, o = e.lid(n.name), n.params["weight"].shape[0]
    rows = e.s.tensors[k.reads[0]].elements // o
    return [*e.err_qp(n.name, "s_e", "z_e"), "(void)s_e;",
            *call("mt_fqt_topk_u8", [str(rows), str(o), f"fqt_k_{lid}", "z_e", e.t(k.reads[0]),
                                      f"{lid}_keep", e.sample_mask(lid), f"&fqt_n_{lid}"])]


def emitters(e: FqtEmitter) -> dict[str, Emitter]:
    """Schedule op -> emitter for the precision of `e`'s method."""
    table: dict[str, Emitter] = dict(FQT_KERNEL_EMITTERS)
    p = e.m.prec
    if p.errors == "f32":
        table.update({"softmax_ce": _loss_f, "relu_bwd": _relu_bwd_f, "relu6_bwd": _relu_bwd_f,
                      "maxpool_bwd": _pool_bwd_f, "linear_bwd_in": _bwd_in_f, "conv2d_bwd_in": _bwd_in_f,
                      "linear_bwd_w": _bwd_w_f, "conv2d_bwd_w": _bwd_w_f, "partial_topk": _topk_f,
                      "fqt_update": _update_f})
    if p.acts == "f32":
        table.update({op: _fwd_f32 for op in ("conv2d_fwd", "linear_fwd", "maxpool_fwd", "flatten_fwd")})
    if p.name == "uint8":
        table.update({"linear_bwd_w": _bwd_w_u8, "conv2d_bwd_w": _bwd_w_u8, "fqt_update": _update_u8,
                      "partial_topk": _topk_u8})
    return table
