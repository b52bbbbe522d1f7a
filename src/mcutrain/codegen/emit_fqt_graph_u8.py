"""The C of the FQT uint8 ops beyond a chain of dense convs: residual adds, global average pools, grouped and
depthwise convs and tensors read by several ops, for precision uint8 (seed A's formats).

`uint8_graph_emitters(table)` returns what `emit_fqt` lays over the precision's table
(`emit_fqt_float.emitters`): each emitter here handles the graph case and hands every other kernel to
the entry it replaces, so the sequential uint8 step is generated exactly as before. The golden engine
defines each operation (`methods/fqt.py`, `methods/fqt_backward.py`, docs/integer-semantics.md section 13):

- a residual add computes floor(ca * (s_a / s_y) + cb * (s_b / s_y)) + z_y in float32 (`_fwd_add`) and
  its real result range feeds the output's EMA;
- its error goes unchanged to both inputs (the schedule lets both branches read one tensor);
- a tensor read by several ops sums the reals of its consumers' errors in arrival order (a transposed
  conv's float32(acc) * s_acc, or float32(e - z_e) * s_e of a uint8 error) and requantizes them with
  its own error range (`mt_fqt_error_sum_u8`, two passes, as the int8 `mt_fqt_error_sum_s8`);
- grouped and depthwise convs propagate errors and take their per-sample uint8 gradients with
  `mt_grouped_conv2d_bwd_in_u8` / `mt_grouped_conv2d_bwd_w_u8` (exact int32 sums), and a dense conv
  whose input has several consumers gives its float32 part through the same error kernel;
- a global average pool rounds the channel sums' average (forward) and divides the centred error by
  the window (backward), the input's error keeping the output's range.

`check_graph_u8` refuses what these emitters do not cover, saying what to use instead.
"""

from __future__ import annotations

from collections.abc import Callable

from mcutrain.codegen.emit import ExportError
from mcutrain.codegen.emit_base import call
from mcutrain.codegen.emit_fqt_base import FqtEmitter
from mcutrain.codegen.emit_fqt_graph import act_clip_lines
from mcutrain.codegen.emit_fqt_ops import ACT_CODE, first_range
from mcutrain.graph import Op
from mcutrain.plan.schedule import Kernel

__all__ = ["U8_ACC_TERMS", "check_graph_u8", "uint8_graph_emitters"]

Emitter = Callable[[FqtEmitter, Kernel], list[str]]

U8_ACC_TERMS = (2**31 - 1) // (255 * 255)
"""Products of two centred uint8 values an int32 sum holds exactly (33025)."""
U8_GRAPH_OPS = frozenset({Op.CONV2D, Op.LINEAR, Op.MAXPOOL, Op.FLATTEN, Op.GLOBAL_AVGPOOL, Op.ADD})
"""Ops the FQT uint8 C step runs."""
_F32_MAX = "3.40282347e+38f"


def check_graph_u8(method, batch: int) -> None:
    """Refuse uint8 graphs the generated step does not implement, naming the node and what to do."""
    g, needs = method.graph, method.needs
    for n in g.nodes:
        if n.op not in U8_GRAPH_OPS:
            raise ExportError(f"node '{n.name}': op {n.op.value} has no fqt uint8 C step; supported: "
                              f"{', '.join(sorted(o.value for o in U8_GRAPH_OPS))} (or --precision int8)")
        if n.op != Op.CONV2D:
            continue
        o, kh, kw, _ = n.params["weight"].shape
        terms = o // n.attrs["groups"] * kh * kw
        if needs[n.inputs[0]] and terms > U8_ACC_TERMS:
            raise ExportError(f"node '{n.name}': its uint8 error propagation sums {terms} products per "
                              f"element, more than an int32 holds exactly ({U8_ACC_TERMS}); train fewer "
                              "layers (--trainable last:N) or use --precision int8")
        ho, wo = g.shape(n.name)[:2]
        if n.name in method.trainable and ho * wo > U8_ACC_TERMS:
            raise ExportError(f"node '{n.name}': its uint8 weight gradient sums {ho * wo} products per "
                              f"element, more than an int32 holds exactly ({U8_ACC_TERMS}); use a smaller "
                              "input")
        if n.attrs["groups"] != 1 and n.name in method.decisions.partial_layers:
            raise ExportError(f"node '{n.name}': fqt uint8 partial updates in C run on dense convs and "
                              "linear layers; train without --partial or use --precision int8")


# ---------------------------------------------------------------- forward


def _add_fwd(e: FqtEmitter, k: Kernel) -> list[str]:
    n = e.g.node(k.node)
    a, b, y = e.t(k.reads[0]), e.t(k.reads[1]), e.t(k.writes[0])
    qa, qb, qy = e.act(n.inputs[0]), e.act(n.inputs[1]), e.act(n.name)
    lines = ["int32_t act_min;", "int32_t act_max;", f"float lo = {_F32_MAX};", f"float hi = -{_F32_MAX};",
             f"mt_fqt_act_range_u8({qy}_scale, {qy}_zp, {ACT_CODE[n.act]}, &act_min, &act_max);",
             *call("mt_add_fwd_u8_range", [str(e.s.tensors[k.writes[0]].elements),
                                            a, f"{qa}_zp", f"{qa}_scale", f"{qa}_scale / {qy}_scale",
                                            b, f"{qb}_zp", f"{qb}_scale", f"{qb}_scale / {qy}_scale",
                                            f"{qy}_zp", "act_min", "act_max", y, "&lo", "&hi"])]
    if not e.m.dynamic[n.name]:
        return [*lines, "(void)lo;", "(void)hi;"]
    return [*lines, "if (record) { /* the real range of a + b, clipped by the activation (fqt._fwd_add) */",
            *(f"    {x}" for x in act_clip_lines(n.act)), f"    mt_fqt_range_see(&{qy}, lo, hi);", "}"]


def _global_avgpool_fwd(e: FqtEmitter, k: Kernel) -> list[str]:
    n = e.g.node(k.node)
    return [f"static const mt_dims in_d = {e.dims(e.g.shape(n.inputs[0]))};",
            *call("mt_global_avgpool_fwd_u8", ["&in_d", e.t(k.reads[0]), e.t(k.writes[0])])]


# ---------------------------------------------------------------- backward


def _global_avgpool_bwd(e: FqtEmitter, k: Kernel) -> list[str]:
    n = e.g.node(k.node)
    return [f"static const mt_dims in_d = {e.dims(e.g.shape(n.inputs[0]))};",
            *e.err_qp(n.name, "s_e", "z_e"), "(void)s_e;",
            *call("mt_global_avgpool_bwd_u8", ["&in_d", "z_e", e.t(k.reads[0]), e.t(k.writes[0])])]


def _conv_bwd_in(e: FqtEmitter, k: Kernel, dense: Emitter) -> list[str]:
    """Grouped/depthwise convs, and any conv whose input error is one part of a sum (float32 reals)."""
    n = e.g.node(k.node)
    dst = next(w for w in k.writes if w.startswith("err:"))
    to_real = e.s.tensors[dst].dtype == "f32"
    if n.attrs["groups"] == 1 and not to_real:
        return dense(e, k)
    lid = e.lid(n.name)

    def kern(out: str, real: str, mult: str, zp: str) -> list[str]:
        return call("mt_grouped_conv2d_bwd_in_u8", ["&p", "z_e", f"{lid}_w_zp", "&out_d", e.t(k.reads[0]),
                                                     "&f_d", f"{lid}_weight", "&in_d", mult, zp, out, "s_acc",
                                                     real, "&amin", "&amax"])
    lines = [*e.conv_head(n), *e.err_qp(n.name, "s_e", "z_e"), "float s_acc;", "int32_t amin = INT32_MAX;",
             "int32_t amax = INT32_MIN;", f"s_acc = {lid}_s_w[0] * s_e; /* float32(s_w * s_e) */"]
    if to_real:
        return [*lines, *kern("NULL", f"(float *)(void *){e.t(dst)}", "0.0f", "0")]
    de = e.err(n.inputs[0])
    return [*lines, "float s_x;", "int32_t z_x;", *first_range(e, de, kern("NULL", "NULL", "0.0f", "0")),
            f"mt_fqt_qparams_u8({de}.lo, {de}.hi, &s_x, &z_x);",
            *kern(f"(uint8_t *)(void *){e.t(dst)}", "NULL", "s_acc / s_x", "z_x"),
            f"mt_fqt_range_see_acc(&{de}, amin, amax, s_acc);"]


def _conv_bwd_w(e: FqtEmitter, k: Kernel, dense: Emitter) -> list[str]:
    """Grouped/depthwise convs: seed A's per-sample uint8 gradient, stored (batch 1) or summed (a batch)."""
    n = e.g.node(k.node)
    if n.attrs["groups"] == 1:
        return dense(e, k)
    lid, w = e.lid(n.name), n.params["weight"]
    ein, x = e.t(k.reads[0]), e.t(k.reads[1])
    gw_t = next(t for t in k.writes if t.endswith(".weight"))
    gw, gb = e.t(gw_t), e.t(next(t for t in k.writes if t.endswith(".bias")))
    xa, gr = e.act(n.inputs[0]), f"grad_{lid}"
    wide = e.s.batch > 1
    if wide and e.s.tensors[gw_t].dtype != "s16":
        raise ExportError("fqt uint8 in C sums a batch's uint8 gradients in int16: at most --batch 128")

    def kern(grad: str, grad16: str, mult: str, zp: str) -> list[str]:
        return call("mt_grouped_conv2d_bwd_w_u8", ["&p", "z_e", "&in_d", x, "&out_d", ein, "&f_d", mult, zp,
                                                    grad, grad16, gb, "&gmin", "&gmax"])
    range_only = kern("NULL", "NULL", "0.0f", "0")
    lines = [*e.conv_head(n), *e.err_qp(n.name, "s_e", "z_e"), "float s_g;", "int32_t gmin = INT32_MAX;",
             "int32_t gmax = INT32_MIN;", f"s_g = {xa}_scale * s_e; /* float32(s_x * s_e) */"]
    if e.seed_pass:       # a batch's first step: the gradient's range only, once per sample
        return [*lines, f"if (!{gr}.initialized) {{", *("    " + y for y in range_only),
                f"    mt_fqt_range_see_acc(&{gr}, gmin, gmax, s_g);", "}"]
    if not wide:          # batch 1: the first step's range seeds the EMA from this sample
        lines += [f"memset({gb}, 0, {4 * w.shape[0]});",
                  f"if (!{gr}.initialized) {{ /* first step: this gradient's range seeds its EMA */",
                  *("    " + y for y in range_only), f"    mt_fqt_range_see_acc(&{gr}, gmin, gmax, s_g);",
                  f"    mt_fqt_range_seed(&{gr});", "}"]
    out = ([f"(uint8_t *)(void *){gw}", "NULL"] if not wide else ["NULL", f"(int16_t *)(void *){gw}"])
    return [*lines, "float s_q;", "int32_t z_q;", f"mt_fqt_qparams_u8({gr}.lo, {gr}.hi, &s_q, &z_q);",
            *kern(*out, "s_g / s_q", "z_q"), f"mt_fqt_range_see_acc(&{gr}, gmin, gmax, s_g);"]


def _error_sum(e: FqtEmitter, k: Kernel) -> list[str]:
    """fqt._combine on uint8 errors: the parts' reals summed in arrival order, requantized."""
    de = e.err(k.node)
    parts, out = k.reads, e.t(k.writes[0])
    size = e.s.tensors[k.writes[0]].elements
    lines, scales, zps = [], [], []
    for i, part in enumerate(parts):
        if e.s.tensors[part].dtype == "f32":
            scales.append("0.0f")
            zps.append("0")
            continue
        body = part.split(":", 1)[1]
        lines += e.err_qp(body.split("<-", 1)[1] if "<-" in body else body, f"s_p{i}", f"z_p{i}")
        scales.append(f"s_p{i}")
        zps.append(f"z_p{i}")

    def kern(scale: str, zp: str, dst: str) -> list[str]:
        return call("mt_fqt_error_sum_u8", [str(size), str(len(parts)), "parts", "scales", "zps", scale, zp,
                                             dst, "&lo", "&hi"])
    ptrs = ", ".join(f"(const void *){e.t(p)}" for p in parts)
    lines += [f"const void *const parts[{len(parts)}] = {{{ptrs}}};",
              f"const float scales[{len(parts)}] = {{{', '.join(scales)}}};",
              f"const int32_t zps[{len(parts)}] = {{{', '.join(zps)}}};",
              "float lo;", "float hi;", "float s_o;", "int32_t z_o;", *kern("0.0f", "0", "NULL"),
              f"mt_fqt_range_see(&{de}, lo, hi);"]
    if e.seed_pass:
        lines += [f"if (!{de}.initialized) {{ /* a batch's seeding pass: this tensor's range only */",
                  "    continue;", "}"]
    elif e.s.batch == 1:
        lines += [f"mt_fqt_range_seed(&{de}); /* first step: this tensor's range seeds its EMA */"]
    return [*lines, f"mt_fqt_qparams_u8({de}.lo, {de}.hi, &s_o, &z_o);", *kern("s_o", "z_o", out)]


def uint8_graph_emitters(table: dict[str, Emitter], backward: bool = True) -> dict[str, Emitter]:
    """The uint8 graph emitters over `table` (the precision's): graph cases here, the rest handed on.

    `backward` False: the forward ops only (mixed: uint8 activations, float32 errors).
    """
    out = dict(table)
    out.update({"add_fwd": _add_fwd, "global_avgpool_fwd": _global_avgpool_fwd})
    if not backward:
        return out
    for op in ("conv2d_bwd_in", "depthwise_conv2d_bwd_in"):
        out[op] = lambda e, k, prev=table[op]: _conv_bwd_in(e, k, prev)
    out["conv2d_bwd_w"] = lambda e, k, prev=table["conv2d_bwd_w"]: _conv_bwd_w(e, k, prev)
    out.update({"global_avgpool_bwd": _global_avgpool_bwd, "error_sum": _error_sum})
    return out
