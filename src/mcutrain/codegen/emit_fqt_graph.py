"""The C of the FQT int8 ops beyond a chain of dense convs: grouped/depthwise convs, residual adds,
average pools, standalone relus and tensors read by several ops (`GRAPH_EMITTERS`, merged into
`emit_fqt_ops.FQT_KERNEL_EMITTERS` by `emit_fqt`).

The golden engine (`methods/fqt.py`, `methods/fqt_backward.py`) and docs/integer-semantics.md
section 13 define every operation:

- a residual add requantizes with multipliers computed on the device from the current scales (the
  scales move every step), and its real result range feeds the output's EMA;
- its error goes unchanged to both inputs (the schedule lets both branches read one tensor);
- a tensor read by several ops receives float32 reals from each consumer (a transposed conv's
  `float32(acc) * s_acc`, or `float32(e) * s_e` of an int8 error), summed in arrival order and
  requantized with the tensor's own error range (`mt_fqt_error_sum_s8`, two passes: the range fixes
  the scale, then the totals are recomputed bit for bit and quantized; no float buffer is needed);
- grouped and depthwise convs propagate errors with `mt_grouped_conv2d_bwd_in_s8_s16` (exact in
  int64 past 520 products, so dense 1x1 convs with many output channels also take it) and take
  their weight gradient with `mt_grouped_conv2d_bwd_w_s8_s8`;
- average pools divide the error by the window count (`rounding_divide`) and spread it.

`check_graph` refuses what these emitters do not cover, saying what to use instead.
"""

from __future__ import annotations

from collections.abc import Callable

from mcutrain.codegen.emit import ExportError
from mcutrain.codegen.emit_base import call
from mcutrain.codegen.emit_fqt_base import FqtEmitter
from mcutrain.codegen.emit_fqt_ops import ACT_CODE, bwd_in, bwd_w, first_range, fwd
from mcutrain.codegen.rounding_c import fqt_rounding
from mcutrain.graph import Node, Op
from mcutrain.plan.schedule import Kernel
from mcutrain.quant.fixedpoint import tflite_mean_params

__all__ = ["BWD_IN_TERMS", "GRAPH_EMITTERS", "GRAPH_OPS", "act_clip_lines", "check_graph"]

GRAPH_OPS = frozenset({Op.CONV2D, Op.LINEAR, Op.MAXPOOL, Op.FLATTEN, Op.AVGPOOL, Op.GLOBAL_AVGPOOL, Op.ADD,
                       Op.RELU, Op.RELU6})
"""Ops the FQT int8 C step runs (forward, and backward where the error path crosses them)."""
BWD_IN_TERMS = 520
"""Products an int32 error-propagation sum holds: (2^31 - 1) // (32512 * 127)."""
GRAD_TERMS = (2**31 - 1) // (255 * 127)
"""Products per weight-gradient element an int32 buffer holds (batch * output positions)."""
_F32_MAX = "3.40282347e+38f"


# ---------------------------------------------------------------- checks


def check_graph(method, batch: int) -> None:
    """Refuse graph shapes the generated FQT C step does not implement, naming the node."""
    g, needs = method.graph, method.needs
    for n in g.nodes:
        if n.op not in GRAPH_OPS:
            raise ExportError(f"node '{n.name}': op {n.op.value} has no fqt C step; supported: "
                              f"{', '.join(sorted(o.value for o in GRAPH_OPS))}")
        if n.op == Op.ADD and n.inputs[0] == n.inputs[1]:
            raise ExportError(f"node '{n.name}': an add of a tensor with itself has no fqt C step")
        if n.op == Op.AVGPOOL and needs[n.name]:
            (kh, kw), (sh, sw) = n.attrs["kernel"], n.attrs["stride"]
            if sh < kh or sw < kw:
                raise ExportError(f"node '{n.name}': overlapping average-pool windows sum errors beyond "
                                  "int8; the fqt C step needs stride >= kernel")
        if n.op == Op.CONV2D and n.name in method.trainable:
            ho, wo = g.shape(n.name)[:2]
            if batch * ho * wo > GRAD_TERMS:
                raise ExportError(f"node '{n.name}': its weight gradient sums {batch * ho * wo} products per "
                                  f"element, more than an int32 buffer holds exactly ({GRAD_TERMS}); use a "
                                  "smaller batch or input")
        users = g.consumers(n.name)
        if len(users) > 1 and needs[n.name]:
            for u in users:
                if u.op == Op.LINEAR:
                    raise ExportError(f"node '{n.name}' feeds several ops and the linear '{u.name}'; the fqt "
                                      "C step sums a shared tensor's errors from convs, adds, pools and "
                                      "flatten")


# ---------------------------------------------------------------- forward


def _pool_head(e: FqtEmitter, n: Node) -> list[str]:
    (kh, kw), (sh, sw) = n.attrs["kernel"], n.attrs["stride"]
    return [f"static const mt_pool_params p = {{{kh}, {kw}, {sh}, {sw}}};",
            f"static const mt_dims in_d = {e.dims(e.g.shape(n.inputs[0]))};",
            f"static const mt_dims out_d = {e.dims(e.g.shape(n.name))};"]


def act_clip_lines(act: str) -> list[str]:
    """fqt_common._act_clip of (lo, hi) in C: the real range of an activated tensor."""
    if act == "none":
        return []
    lines = ["lo = lo > 0.0f ? lo : 0.0f;", "hi = hi > 0.0f ? hi : 0.0f;"]
    if act == "relu6":
        lines += ["lo = lo < 6.0f ? lo : 6.0f;", "hi = hi < 6.0f ? hi : 6.0f;"]
    return lines


def _graph_fwd(e: FqtEmitter, k: Kernel) -> list[str]:
    n = e.g.node(k.node)
    x, y = e.t(k.reads[0]), e.t(k.writes[0])
    if n.op == Op.AVGPOOL:
        return [*_pool_head(e, n), *call("mt_avgpool_fwd_s8", ["&p", "&in_d", x, "&out_d", y])]
    if n.op == Op.GLOBAL_AVGPOOL:
        in_d = f"static const mt_dims in_d = {e.dims(e.g.shape(n.inputs[0]))};"
        if fqt_rounding(e.m) == "tflite":   # TFLite's MEAN: 1 / (H W) folded at export, z on the device
            m, sh = tflite_mean_params(int(e.g.shape(n.inputs[0])[0] * e.g.shape(n.inputs[0])[1]))
            return [f"const mt_mean_params p = {{{e.act(n.inputs[0])}_zp, {m}, {sh}}};", in_d,
                    *call("mt_global_avgpool_fwd_s8_tflite", ["&p", "&in_d", x, y])]
        return [in_d, *call("mt_global_avgpool_fwd_s8", ["&in_d", x, y])]
    if n.op in (Op.RELU, Op.RELU6):
        xa = e.act(n.name)
        return ["int32_t lo;", "int32_t hi;",
                f"mt_fqt_act_range_s8({xa}_scale, {xa}_zp, {ACT_CODE[n.op.value]}, &lo, &hi);",
                *call("mt_relu_fwd_s8", ["lo", "hi", str(e.s.tensors[k.writes[0]].elements), x, y])]
    if n.op == Op.ADD:
        return _add_fwd(e, k, n)
    if n.params["weight"].shape[0] != n.attrs["groups"]:      # a channel multiplier: the grouped loops
        return fwd(e, k)
    # depthwise: the same call and arithmetic, channels as the inner loop
    return fwd(e, k, conv_fn="mt_depthwise_conv2d_fwd_s8_range")


def _add_fwd(e: FqtEmitter, k: Kernel, n: Node) -> list[str]:
    a, b, y = e.t(k.reads[0]), e.t(k.reads[1]), e.t(k.writes[0])
    qa, qb, qy = e.act(n.inputs[0]), e.act(n.inputs[1]), e.act(n.name)
    size = str(e.s.tensors[k.writes[0]].elements)
    if fqt_rounding(e.m) == "tflite":   # TFLite's ADD, its multipliers from the scales of this step
        head = [f"mt_add_tflite_params p = {{{qa}_zp, {qb}_zp, 0, 0, 0, 0, 0, 0, {qy}_zp, -128, 127}};",
                *call("mt_fqt_add_tflite_params", [f"{qa}_scale", f"{qb}_scale", f"{qy}_scale", "&p"])]
        kernel = "mt_add_fwd_s8_tflite_range"
    else:
        head = [f"mt_add_params p = {{{qa}_zp, {qb}_zp, 0, 0, 0, {qy}_zp, -128, 127}};",
                *call("mt_fqt_add_multipliers", [f"{qa}_scale", f"{qb}_scale", f"{qy}_scale", "&p"])]
        kernel = "mt_add_fwd_s8_range"
    lines = [head[0], f"float lo = {_F32_MAX};", f"float hi = -{_F32_MAX};",
             f"mt_fqt_act_range_s8({qy}_scale, {qy}_zp, {ACT_CODE[n.act]}, &p.act_min, &p.act_max);",
             *head[1:],
             *call(kernel, ["&p", size, a, b, f"{qa}_scale", f"{qb}_scale", y, "&lo", "&hi"])]
    if not e.m.dynamic[n.name]:
        return [*lines, "(void)lo;", "(void)hi;"]
    return [*lines, "if (record) { /* the real range of a + b, clipped by the activation (fqt._fwd_add) */",
            *(f"    {x}" for x in act_clip_lines(n.act)), f"    mt_fqt_range_see(&{qy}, lo, hi);", "}"]


# ---------------------------------------------------------------- backward


def _grouped(e: FqtEmitter, n: Node, dst: str) -> bool:
    """Does this conv's error propagation need the grouped kernel (not the dense int32 one)?"""
    if n.op != Op.CONV2D:
        return False
    w = n.params["weight"]
    terms = w.shape[0] // n.attrs["groups"] * w.shape[1] * w.shape[2]
    return n.attrs["groups"] != 1 or e.s.tensors[dst].dtype == "f32" or terms > BWD_IN_TERMS


def _conv_bwd_in(e: FqtEmitter, k: Kernel) -> list[str]:
    n = e.g.node(k.node)
    dst = next(w for w in k.writes if w.startswith("err:"))
    if e.u8 or not _grouped(e, n, dst):
        return bwd_in(e, k)
    lid, o = e.lid(n.name), n.params["weight"].shape[0]
    ein = e.t(k.reads[0])
    pre = e.t(next(w for w in k.writes if w.endswith(".prescale")))
    rows = e.s.tensors[k.reads[0]].elements // o

    def kern(out: str, real: str, mult: str, shift: str) -> list[str]:
        return call("mt_grouped_conv2d_bwd_in_s8_s16",
                     ["&p", "&out_d", f"(const int16_t *)(void *){pre}", "&f_d", f"{lid}_weight", "&in_d",
                      mult, shift, out, "s_acc", real, "&amin", "&amax"])
    lines = [*e.conv_head(n), "float smax;", "float s_acc;", "int32_t amin = INT32_MAX;",
             "int32_t amax = INT32_MIN;",
             *call("mt_fqt_prescale_s16", [str(rows), str(o), ein, f"{lid}_s_w", f"(int16_t *)(void *){pre}",
                                            "&smax"]),
             f"s_acc = (smax * mt_fqt_err_scale(&{e.err(n.name)})) * 0x1p-8f; /* (s_max * s_e) * 2^-8 */"]
    if e.s.tensors[dst].dtype == "f32":      # one of several consumers: float32 reals, summed later
        return [*lines, *kern("NULL", f"(float *)(void *){e.t(dst)}", "0", "0")]
    de = e.err(n.inputs[0])
    return [*lines, "int32_t mult;", "int32_t shift;",
            *first_range(e, de, kern("NULL", "NULL", "0", "0")),
            *call("mt_fqt_quantize_multiplier", [f"(double)s_acc / (double)mt_fqt_err_scale(&{de})", "&mult",
                                                  "&shift"]),
            *kern(e.t(dst), "NULL", "mult", "shift"),
            f"mt_fqt_range_see_acc(&{de}, amin, amax, s_acc);"]


def _conv_bwd_w(e: FqtEmitter, k: Kernel) -> list[str]:
    n = e.g.node(k.node)
    if e.u8 or n.op != Op.CONV2D or n.attrs["groups"] == 1:
        return bwd_w(e, k)
    ein, x = e.t(k.reads[0]), e.t(k.reads[1])
    gw = e.t(next(w for w in k.writes if w.endswith(".weight")))
    gb = e.t(next(w for w in k.writes if w.endswith(".bias")))
    w = n.params["weight"]
    zero = [] if e.s.batch > 1 else [f"memset({gw}, 0, {4 * w.size});", f"memset({gb}, 0, {4 * w.shape[0]});"]
    return [*e.conv_head(n), *zero,
            *call("mt_grouped_conv2d_bwd_w_s8_s8", ["&p", "&in_d", x, "&out_d", ein, "&f_d", gw, gb])]


def _avgpool_bwd(e: FqtEmitter, k: Kernel) -> list[str]:
    n = e.g.node(k.node)
    ey, ex = e.t(k.reads[0]), e.t(k.writes[0])
    if n.op == Op.GLOBAL_AVGPOOL:
        return [f"static const mt_dims in_d = {e.dims(e.g.shape(n.inputs[0]))};",
                *call("mt_global_avgpool_bwd_s8", ["&in_d", ey, ex])]
    return [*_pool_head(e, n), *call("mt_avgpool_bwd_s8", ["&p", "&in_d", "&out_d", ey, ex])]


def _part_scale(e: FqtEmitter, part: str) -> str:
    """C expression of the real value of one unit of an error part (0.0f: the part holds float32 reals)."""
    if e.s.tensors[part].dtype == "f32":
        return "0.0f"
    body = part.split(":", 1)[1]
    node = body.split("<-", 1)[1] if "<-" in body else body
    return f"mt_fqt_err_scale(&{e.err(node)})"


def _error_sum(e: FqtEmitter, k: Kernel) -> list[str]:
    """fqt._combine: the reals of every consumer's error, summed in arrival order, requantized."""
    de = e.err(k.node)
    parts, out = k.reads, e.t(k.writes[0])
    size = e.s.tensors[k.writes[0]].elements

    def kern(scale: str, dst: str) -> list[str]:
        return call("mt_fqt_error_sum_s8", [str(size), str(len(parts)), "parts", "scales", scale, dst, "&lo",
                                             "&hi"])
    ptrs = ", ".join(f"(const void *){e.t(p)}" for p in parts)
    lines = [f"const void *const parts[{len(parts)}] = {{{ptrs}}};",
             f"const float scales[{len(parts)}] = {{{', '.join(_part_scale(e, p) for p in parts)}}};",
             "float lo;", "float hi;", *kern("0.0f", "NULL"), f"mt_fqt_range_see(&{de}, lo, hi);"]
    if e.seed_pass:
        lines += [f"if (!{de}.initialized) {{ /* a batch's seeding pass: this tensor's range only */",
                  "    continue;", "}"]
    elif e.s.batch == 1:
        lines += [f"mt_fqt_range_seed(&{de}); /* first step: this tensor's range seeds its EMA */"]
    return [*lines, *kern(f"mt_fqt_err_scale(&{de})", out)]


GRAPH_EMITTERS: dict[str, Callable[[FqtEmitter, Kernel], list[str]]] = {
    "depthwise_conv2d_fwd": _graph_fwd, "add_fwd": _graph_fwd, "avgpool_fwd": _graph_fwd,
    "global_avgpool_fwd": _graph_fwd, "relu_fwd": _graph_fwd, "relu6_fwd": _graph_fwd,
    "conv2d_bwd_in": _conv_bwd_in, "depthwise_conv2d_bwd_in": _conv_bwd_in, "conv2d_bwd_w": _conv_bwd_w,
    "avgpool_bwd": _avgpool_bwd, "global_avgpool_bwd": _avgpool_bwd, "error_sum": _error_sum,
}
"""FQT schedule op -> emitter of its C code, for the ops of non-sequential int8 graphs."""
