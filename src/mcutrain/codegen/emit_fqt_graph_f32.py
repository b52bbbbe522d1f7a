"""The C of the FQT ops beyond a chain of dense convs for float32 errors (precisions mixed and float32):
residual adds, global average pools, grouped and depthwise convs and tensors read by several ops.

`float_graph_emitters(table, acts_f32)` returns what `emit_fqt` lays over the precision's table
(`emit_fqt_float.emitters`, and for mixed the uint8 forward of `emit_fqt_graph_u8`): each emitter here
handles the graph case and hands every other kernel to the entry it replaces, so a sequential step is
generated exactly as before. Every float32 sum runs in the order of `FQTConfig(exact_float_order=True)`
(docs/integer-semantics.md 13.8), which the simulator defines (`methods/fqt.py`,
`methods/fqt_backward.py`):

- float32 forward (precision float32): a residual add is act(a + b); a global average pool sums the
  positions in order and divides; grouped and depthwise convs sum taps, then channels, from +0.0;
- a residual add's error goes unchanged to both inputs (the schedule lets both branches read one
  tensor), and a fused activation masks it first;
- a tensor read by several ops sums its consumers' float32 errors in arrival order, the first part as
  it is (`mt_fqt_error_sum_f32`);
- grouped and depthwise convs propagate errors and take their gradients with the
  `mt_grouped_conv2d_*_f32` kernels (mixed: uint8 weights and inputs, centred, as float32);
- a global average pool divides the error by the window count and spreads it.

`check_graph_f32` refuses what these emitters do not cover, saying what to use instead.
"""

from __future__ import annotations

from collections.abc import Callable

from mcutrain.codegen.emit import ExportError
from mcutrain.codegen.emit_base import call
from mcutrain.codegen.emit_fqt_base import FqtEmitter
from mcutrain.codegen.emit_fqt_graph_u8 import U8_GRAPH_OPS
from mcutrain.codegen.emit_fqt_ops import ACT_CODE
from mcutrain.graph import Node, Op
from mcutrain.plan.schedule import Kernel

__all__ = ["check_graph_f32", "float_graph_emitters"]

Emitter = Callable[[FqtEmitter, Kernel], list[str]]


def check_graph_f32(method) -> None:
    """Refuse mixed/float32 graphs the generated step does not implement, naming the node and what to do."""
    name = method.prec.name
    for n in method.graph.nodes:
        if n.op not in U8_GRAPH_OPS:
            raise ExportError(f"node '{n.name}': op {n.op.value} has no fqt {name} C step; supported: "
                              f"{', '.join(sorted(o.value for o in U8_GRAPH_OPS))} (or --precision int8)")
        if n.op == Op.CONV2D and n.attrs["groups"] != 1 and n.name in method.decisions.partial_layers:
            raise ExportError(f"node '{n.name}': fqt {name} partial updates in C run on dense convs and "
                              "linear layers; train without --partial or use --precision int8")


def _head(e: FqtEmitter, n: Node, input_zp: str = "0") -> list[str]:
    """Conv parameters and dims without output qparams (float32 tensors have none)."""
    a = n.attrs
    (sh, sw), (pt, _, pl, _) = a["stride"], a["padding"]
    return [f"const mt_conv_params p = {{{input_zp}, 0, {sh}, {sw}, {pt}, {pl}, {a['groups']}, -128, 127}};",
            f"static const mt_dims in_d = {e.dims(e.g.shape(n.inputs[0]))};",
            f"static const mt_dims f_d = {{{', '.join(map(str, n.params['weight'].shape))}}};",
            f"static const mt_dims out_d = {e.dims(e.g.shape(n.name))};"]


def _f(ptr: str) -> str:
    return f"(float *)(void *){ptr}"


# ---------------------------------------------------------------- float32 forward (precision float32)


def _conv_fwd(e: FqtEmitter, k: Kernel, dense: Emitter) -> list[str]:
    n = e.g.node(k.node)
    if n.op != Op.CONV2D or n.attrs["groups"] == 1:
        return dense(e, k)
    lid = e.lid(n.name)
    args = ["&p", str(ACT_CODE[n.act]), "&in_d", e.t(k.reads[0]), "&f_d", f"{lid}_weight", f"{lid}_bias",
            "&out_d", e.t(k.writes[0])]
    return [*_head(e, n), *call("mt_grouped_conv2d_fwd_f32", args)]


def _add_fwd(e: FqtEmitter, k: Kernel) -> list[str]:
    n = e.g.node(k.node)
    size = str(e.s.tensors[k.writes[0]].elements)
    return call("mt_add_fwd_f32", [size, str(ACT_CODE[n.act]), e.t(k.reads[0]), e.t(k.reads[1]),
                                    e.t(k.writes[0])])


def _global_avgpool_fwd(e: FqtEmitter, k: Kernel) -> list[str]:
    n = e.g.node(k.node)
    return [f"static const mt_dims in_d = {e.dims(e.g.shape(n.inputs[0]))};",
            *call("mt_global_avgpool_fwd_f32", ["&in_d", e.t(k.reads[0]), e.t(k.writes[0])])]


# ---------------------------------------------------------------- float32 errors


def _act_bwd(e: FqtEmitter, k: Kernel, other: Emitter) -> list[str]:
    """The mask of an add's fused activation (other nodes: the precision's emitter)."""
    n = e.g.node(k.node)
    if n.op != Op.ADD:
        return other(e, k)
    size = e.s.tensors[k.writes[0]].elements
    y, ein, eout = e.t(k.reads[1]), e.t(k.reads[0]), e.t(k.writes[0])
    if e.m.prec.acts == "f32":
        return call("mt_relu_bwd_f32", [str(size), str(ACT_CODE[n.act]), y, ein, eout])
    hi = "hi" if n.act == "relu6" else "256"
    return ["int32_t lo;", "int32_t hi;",
            f"mt_fqt_act_range_u8({e.act(n.name)}_scale, {e.act(n.name)}_zp, {ACT_CODE[n.act]}, &lo, &hi);",
            *(["(void)hi;"] if n.act != "relu6" else []),
            *call("mt_relu_bwd_u8_f32", [str(size), "lo", hi, y, ein, eout])]


def _conv_bwd_in(e: FqtEmitter, k: Kernel, dense: Emitter) -> list[str]:
    n = e.g.node(k.node)
    if n.attrs["groups"] == 1:
        return dense(e, k)
    lid = e.lid(n.name)
    ein = e.t(k.reads[0])
    dst = e.t(next(t for t in k.writes if t.startswith("err:")))
    tail = ["&out_d", ein, "&f_d", f"{lid}_weight", "&in_d", dst]
    if e.m.prec.weights == "f32":
        return [*_head(e, n), *call("mt_grouped_conv2d_bwd_in_f32", ["&p", *tail])]
    mixed = ["&p", f"{lid}_w_zp", f"{lid}_s_w[0]", *tail]       # uint8 weights, centred, times s_w
    return [*_head(e, n), *call("mt_grouped_conv2d_bwd_in_u8_f32", mixed)]


def _conv_bwd_w(e: FqtEmitter, k: Kernel, dense: Emitter) -> list[str]:
    n = e.g.node(k.node)
    if n.attrs["groups"] == 1:
        return dense(e, k)
    w = n.params["weight"]
    ein, x = e.t(k.reads[0]), e.t(k.reads[1])
    gw = e.t(next(t for t in k.writes if t.endswith(".weight")))
    gb = e.t(next(t for t in k.writes if t.endswith(".bias")))
    zero = [] if e.s.batch > 1 else [f"memset({gw}, 0, {4 * w.size});", f"memset({gb}, 0, {4 * w.shape[0]});"]
    f32 = e.m.prec.acts == "f32"
    head = _head(e, n, "0" if f32 else f"{e.act(n.inputs[0])}_zp")     # mixed: the input's zero point
    return [*head, *zero, *call("mt_grouped_conv2d_bwd_w_f32" if f32 else "mt_grouped_conv2d_bwd_w_u8_f32",
                                 ["&p", "&in_d", x, "&out_d", ein, "&f_d", gw, gb])]


def _global_avgpool_bwd(e: FqtEmitter, k: Kernel) -> list[str]:
    n = e.g.node(k.node)
    return [f"static const mt_dims in_d = {e.dims(e.g.shape(n.inputs[0]))};",
            *call("mt_global_avgpool_bwd_f32", ["&in_d", e.t(k.reads[0]), e.t(k.writes[0])])]


def _error_sum(e: FqtEmitter, k: Kernel) -> list[str]:
    parts = k.reads
    ptrs = ", ".join(f"(const float *)(void *){e.t(p)}" for p in parts)
    return [f"const float *const parts[{len(parts)}] = {{{ptrs}}};",
            *call("mt_fqt_error_sum_f32", [str(e.s.tensors[k.writes[0]].elements), str(len(parts)), "parts",
                                            _f(e.t(k.writes[0]))])]


def float_graph_emitters(table: dict[str, Emitter], acts_f32: bool) -> dict[str, Emitter]:
    """The float32-error graph emitters over `table`; `acts_f32`: the float32 forward too (float32)."""
    out = dict(table)
    if acts_f32:
        for op in ("conv2d_fwd", "depthwise_conv2d_fwd"):
            out[op] = lambda e, k, prev=table["conv2d_fwd"]: _conv_fwd(e, k, prev)
        out.update({"add_fwd": _add_fwd, "global_avgpool_fwd": _global_avgpool_fwd})
    for op in ("relu_bwd", "relu6_bwd"):
        out[op] = lambda e, k, prev=table[op]: _act_bwd(e, k, prev)
    for op in ("conv2d_bwd_in", "depthwise_conv2d_bwd_in"):
        out[op] = lambda e, k, prev=table["conv2d_bwd_in"]: _conv_bwd_in(e, k, prev)
    out["conv2d_bwd_w"] = lambda e, k, prev=table["conv2d_bwd_w"]: _conv_bwd_w(e, k, prev)
    out.update({"global_avgpool_bwd": _global_avgpool_bwd, "error_sum": _error_sum})
    return out
