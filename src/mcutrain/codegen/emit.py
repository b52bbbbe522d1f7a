"""Emit `model.h` / `model.c`: a QuantModel as constant arrays, a static arena and `model_predict`.

The "prepare" phase happens here, on the host: requantization multipliers and shifts, clamp
bounds, the add's shared shift and the arena offsets (from `mcutrain.plan`, used verbatim) are
computed once and written as constants, so the C code only invokes kernels. Weights and all
parameter structs are `const` (Flash); the arena is the only RAM the model uses. No float
and no malloc appear in the generated code. For DSP kernels the weights of the convs that
`plan.lifetimes.widens_weights` are written widened to int16 (`widen_conv_weight`, rows paired
by `pair_weight_rows`) and run `mt_conv2d_fwd_s8_s16`: its inner loop loads the pairs SMLAD
multiplies, for twice their Flash. Linear weights are written four rows interleaved
(`interleave_rows4`, the same bytes in another order) and run `mt_linear_fwd_s8_rows4`.

Example:
    >>> from mcutrain import zoo
    >>> from mcutrain.engines import ptq
    >>> x = np.random.default_rng(0).random((8, 8, 8, 1), dtype=np.float32)
    >>> src = emit_model(ptq.quantize_model(zoo.build("digits-cnn"), x), kernels="ref")
    >>> "mt_status model_predict(const int8_t *input, int8_t *logits)" in src.header
    True
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mcutrain.codegen.cformat import c_array, c_comment, c_comment_lines, c_string, unique_idents
from mcutrain.codegen.compiled_in import compiled_in, header_lines
from mcutrain.codegen.rounding_c import mode_guard, tflite_add, tflite_mean
from mcutrain.codegen.templates import render
from mcutrain.engines.int_engine import check_accumulator
from mcutrain.graph import INPUT, Node, Op
from mcutrain.plan import ArenaPlan, plan_inference_arena
from mcutrain.plan.lifetimes import is_depthwise, widens_weights
from mcutrain.qmodel import QuantModel

SUPPORTED_OPS = frozenset({Op.CONV2D, Op.LINEAR, Op.MAXPOOL, Op.AVGPOOL, Op.GLOBAL_AVGPOOL, Op.FLATTEN,
                           Op.RELU, Op.RELU6, Op.ADD})


class ExportError(ValueError):
    """A model the C runtime cannot run; the message names the node and what to do."""


@dataclass
class ModelSource:
    """The two generated files and the facts a caller reports about them."""

    header: str
    source: str
    plan: ArenaPlan
    const_bytes: int
    """Bytes of constant data (weights, biases, multipliers, shifts) the model puts in Flash."""
    layers: list[str]
    """Tensor names in the order the layer hook reports them (one per node)."""


def wrapped_call(fn: str, args: list[str], indent: int = 8, width: int = 110) -> list[str]:
    """`st = fn(args);` wrapped at `width` columns, continuation lines aligned after the paren."""
    head = f"st = {fn}("
    lines, cur = [], head
    for i, a in enumerate(args):
        piece = a + (");" if i == len(args) - 1 else ",")
        if len(cur) + len(piece) + 1 + indent > width and cur.strip() != head.strip():
            lines.append(cur.rstrip())
            cur = " " * len(head) + piece
        else:
            cur += ("" if cur.endswith("(") else " ") + piece
    lines.append(cur)
    return lines


def dims_init(shape: tuple[int, ...]) -> str:
    """An mt_dims initializer for a per-sample shape (batch 1)."""
    if len(shape) == 3:
        h, w, c = shape
    elif len(shape) == 1:
        h, w, c = 1, 1, shape[0]
    else:  # pragma: no cover - the IR has only 1-d and 3-d activations
        raise ExportError(f"cannot lay out a tensor of shape {shape}")
    return f"{{1, {h}, {w}, {c}}}"


def widen_conv_weight(w: np.ndarray) -> np.ndarray:
    """Conv weights [O, kh, kw, Cg] int8 as `mt_conv2d_fwd_s8_s16` reads them: [O, kh, R] int16.

    R = kw * Cg rounded up to a multiple of 4 (zeros after each kernel row's weights), and every
    group of four in SMLAD order (w0, w2, w1, w3), the order of the im2col columns.

    >>> widen_conv_weight(np.arange(1, 7, dtype=np.int8).reshape(1, 1, 3, 2)).tolist()
    [[[1, 3, 2, 4, 5, 0, 6, 0]]]
    """
    o, kh, kw, cg = w.shape
    r = (kw * cg + 3) // 4 * 4
    rows = np.zeros((o, kh, r), np.int16)
    rows[:, :, : kw * cg] = w.reshape(o, kh, kw * cg)
    return np.ascontiguousarray(rows.reshape(o, kh, r // 4, 4)[..., [0, 2, 1, 3]].reshape(o, kh, r))


def pair_weight_rows(w16: np.ndarray, groups: int) -> np.ndarray:
    """Widened conv weights [O, kh, R] in the order `mt_conv2d_fwd_s8_s16` reads them: [O * kh * R].

    Within each group's rows, rows 2i and 2i + 1 interleaved two int16 at a time (one LDRD of
    the 2x3 GEMM brings a pair of k for both rows); an odd last row of a group stays alone.
    Flash-neutral: the same values in another order (`mt_w16_index` in C).

    >>> pair_weight_rows(np.arange(12, dtype=np.int16).reshape(3, 1, 4), 1).tolist()
    [0, 1, 4, 5, 2, 3, 6, 7, 8, 9, 10, 11]
    """
    o = w16.shape[0]
    opg, kp = o // groups, w16[0].size
    rows = w16.reshape(groups, opg, kp)
    even = opg & ~1
    pairs = rows[:, :even].reshape(groups, even // 2, 2, kp // 2, 2).transpose(0, 1, 3, 2, 4)
    parts = [pairs.reshape(groups, -1), rows[:, even:].reshape(groups, -1)]
    return np.ascontiguousarray(np.concatenate(parts, axis=1).reshape(-1))


def interleave_rows4(w: np.ndarray) -> np.ndarray:
    """Linear weights [O, I] int8 as `mt_linear_fwd_s8_rows4` reads them: [O * I4].

    Rows padded with zeros to I4 = I rounded up to 4; rows 4b .. 4b + 3 interleaved four values
    at a time (one LDM brings four weights of each), the last O % 4 rows stored alone.

    >>> interleave_rows4(np.arange(1, 11, dtype=np.int8).reshape(5, 2)).tolist()
    [1, 2, 0, 0, 3, 4, 0, 0, 5, 6, 0, 0, 7, 8, 0, 0, 9, 10, 0, 0]
    """
    o, i = w.shape
    i4 = (i + 3) // 4 * 4
    rows = np.zeros((o, i4), np.int8)
    rows[:, :i] = w
    o4 = o // 4 * 4
    blocks = rows[:o4].reshape(o4 // 4, 4, i4 // 4, 4).transpose(0, 2, 1, 3).reshape(-1)
    return np.ascontiguousarray(np.concatenate([blocks, rows[o4:].reshape(-1)]))


class InferenceEmitter:
    def __init__(self, qm: QuantModel, plan: ArenaPlan, widen: bool = False):
        """`widen`: store the weights of the convs that `widens_weights` as int16 (inference
        exports for DSP kernels; the training side keeps int8, its trainable weights are RAM)."""
        self.qm, self.g, self.plan = qm, qm.graph, plan
        self.widen = widen and plan.kernels == "dsp"
        self.ids = unique_idents([INPUT] + [n.name for n in self.g.nodes])
        self.consts: list[str] = []
        self.const_bytes = 0

    def tensor(self, name: str) -> str:
        return f"(model_arena.bytes + {self.plan.offsets[name]})"

    def size(self, name: str) -> int:
        return int(np.prod(self.g.shape(name)))

    def const(self, ctype: str, name: str, values: np.ndarray, comment: str = "") -> str:
        arr = np.asarray(values)
        self.const_bytes += arr.size * {"int8_t": 1, "int32_t": 4}[ctype]
        per_line = 16 if ctype == "int8_t" else 8
        self.consts.append(c_array(ctype, name, arr, per_line=per_line, comment=comment))
        return name

    def const_s16_aligned(self, name: str, values: np.ndarray, comment: str) -> str:
        """An int16 constant array inside a union with an int32_t: 4-byte aligned (LDRD) in C99."""
        arr = np.asarray(values)
        self.const_bytes += 2 * arr.size
        body = c_array("int16_t", "v", arr, per_line=16).split("\n")[1:-1]
        self.consts.append("\n".join([f"/* {c_comment(comment)} */", "static const union {",
                                       f"    int16_t v[{arr.size}];",
                                       "    int32_t align; /* 4-byte alignment for LDRD */",
                                       f"}} {name} = {{{{", *body, "}};"]))
        return f"{name}.v"

    def const_s8_aligned(self, name: str, values: np.ndarray, comment: str) -> str:
        """An int8 constant array inside a union with an int32_t: 4-byte aligned (LDM) in C99."""
        arr = np.asarray(values)
        self.const_bytes += arr.size
        body = c_array("int8_t", "v", arr, per_line=16).split("\n")[1:-1]
        self.consts.append("\n".join([f"/* {c_comment(comment)} */", "static const union {",
                                       f"    int8_t v[{arr.size}];",
                                       "    int32_t align; /* 4-byte alignment for LDM */",
                                       f"}} {name} = {{{{", *body, "}};"]))
        return f"{name}.v"

    def scratch(self, n: Node) -> str:
        off, size = self.plan.scratch.get(n.name, (0, 0))
        if not size:
            return "{NULL, 0}"
        return f"{{model_arena.bytes + {off}, {size}}}"

    # -- one block of predict() per node
    def node(self, i: int, n: Node) -> list[str]:
        qm, g = self.qm, self.g
        nid = self.ids[n.name]
        x, y = self.tensor(n.inputs[0]), self.tensor(n.name)
        if n.op in (Op.CONV2D, Op.LINEAR):
            w, b = qm.weights[n.name], qm.biases[n.name]
            try:
                check_accumulator(qm.zero_point(n.inputs[0]), w, b, f"node '{n.name}'")
            except ValueError as e:
                raise ExportError(str(e)) from None
            mult, shift = qm.requant_params(n)
            lo, hi = qm.act_range(n)
            zx, zy = qm.zero_point(n.inputs[0]), qm.zero_point(n.name)
            wide = self.widen and widens_weights(g, n)
            rows4 = self.widen and n.op == Op.LINEAR
            if rows4:
                wn = self.const_s8_aligned(
                    f"{nid}_weight", interleave_rows4(w), f"{n.name}: weight {list(w.shape)} int8 "
                    "(rows padded to fours, four rows interleaved)")
            elif wide:
                w16 = widen_conv_weight(w)
                wn = self.const_s16_aligned(
                    f"{nid}_weight", pair_weight_rows(w16, n.attrs["groups"]),
                    f"{n.name}: weight {list(w.shape)} as int16 [{', '.join(map(str, w16.shape))}] "
                    "(padded rows, SMLAD order, row pairs interleaved)")
            else:
                wn = self.const("int8_t", f"{nid}_weight", w, f"{n.name}: weight {list(w.shape)} int8")
            bn = self.const("int32_t", f"{nid}_bias", b)
            mn = self.const("int32_t", f"{nid}_multiplier", mult)
            sn = self.const("int32_t", f"{nid}_shift", shift)
            if n.op == Op.LINEAR:
                o, k = w.shape
                return [f"static const mt_linear_params p = {{{zx}, {zy}, {lo}, {hi}}};",
                        f"static const mt_per_channel_quant q = {{{mn}, {sn}}};",
                        f"const mt_context ctx = {self.scratch(n)};",
                        *wrapped_call("mt_linear_fwd_s8_rows4" if rows4 else "mt_linear_fwd_s8",
                               ["&ctx", "&p", "&q", "1", x, str(k), wn, bn, str(o), y])]
            a = n.attrs
            (sh, sw), (pt, _, pl, _) = a["stride"], a["padding"]
            head = [f"static const mt_conv_params p = {{{zx}, {zy}, {sh}, {sw}, {pt}, {pl}, {a['groups']}, "
                    f"{lo}, {hi}}};",
                    f"static const mt_per_channel_quant q = {{{mn}, {sn}}};",
                    f"static const mt_dims in_d = {dims_init(g.shape(n.inputs[0]))};",
                    f"static const mt_dims f_d = {{{', '.join(map(str, w.shape))}}};",
                    f"static const mt_dims out_d = {dims_init(g.shape(n.name))};"]
            if is_depthwise(g, n):
                return [*head, *wrapped_call("mt_depthwise_conv2d_fwd_s8",
                                      ["&p", "&q", "&in_d", x, "&f_d", wn, bn, "&out_d", y])]
            return [*head, f"const mt_context ctx = {self.scratch(n)};",
                    *wrapped_call("mt_conv2d_fwd_s8_s16" if wide else "mt_conv2d_fwd_s8",
                           ["&ctx", "&p", "&q", "&in_d", x, "&f_d", wn, bn, "&out_d", y])]
        if n.op in (Op.MAXPOOL, Op.AVGPOOL):
            (kh, kw), (sh, sw) = n.attrs["kernel"], n.attrs["stride"]
            fn = "mt_maxpool_fwd_s8" if n.op == Op.MAXPOOL else "mt_avgpool_fwd_s8"
            return [f"static const mt_pool_params p = {{{kh}, {kw}, {sh}, {sw}}};",
                    f"static const mt_dims in_d = {dims_init(g.shape(n.inputs[0]))};",
                    f"static const mt_dims out_d = {dims_init(g.shape(n.name))};",
                    *wrapped_call(fn, ["&p", "&in_d", x, "&out_d", y])]
        if n.op == Op.GLOBAL_AVGPOOL:
            in_d = f"static const mt_dims in_d = {dims_init(g.shape(n.inputs[0]))};"
            if qm.rounding == "tflite":
                params, fn = tflite_mean(qm, n)
                return [params, in_d, *wrapped_call(fn, ["&p", "&in_d", x, y])]
            return [in_d, *wrapped_call("mt_global_avgpool_fwd_s8", ["&in_d", x, y])]
        if n.op == Op.FLATTEN:
            return ["/* NHWC order is the flat order: the output is the input's storage */"]
        if n.op in (Op.RELU, Op.RELU6):
            lo, hi = qm.act_range(n)
            return wrapped_call("mt_relu_fwd_s8", [str(lo), str(hi), str(self.size(n.name)), x, y])
        if n.op == Op.ADD and qm.rounding == "tflite":
            params, fn = tflite_add(qm, n)
            return [params, *wrapped_call(fn, ["&p", str(self.size(n.name)), x, self.tensor(n.inputs[1]), y])]
        if n.op == Op.ADD:
            ma, mb, sh = qm.add_params(n)
            lo, hi = qm.act_range(n)
            za, zb = qm.zero_point(n.inputs[0]), qm.zero_point(n.inputs[1])
            return [f"static const mt_add_params p = {{{za}, {zb}, {ma}, {mb}, {sh}, "
                    f"{qm.zero_point(n.name)}, {lo}, {hi}}};",
                    *wrapped_call("mt_add_fwd_s8",
                                  ["&p", str(self.size(n.name)), x, self.tensor(n.inputs[1]), y])]
        raise ExportError(f"node '{n.name}': op {n.op.value} has no C kernel")  # pragma: no cover


def check_supported(qm: QuantModel) -> None:
    """Refuse, with what to do, a model the C runtime cannot run bit-exactly (inference and ZO/BP-QAS)."""
    g = qm.graph
    for n in g.nodes:
        if n.op not in SUPPORTED_OPS:
            raise ExportError(f"node '{n.name}': op {n.op.value} cannot be exported to C (supported: "
                              f"{', '.join(sorted(o.value for o in SUPPORTED_OPS))})")
    if len(g.input_shape) not in (1, 3):
        raise ExportError(f"input shape {g.input_shape} must be (H, W, C) or (F,)")


def qparams_comment(qm: QuantModel, tensor: str) -> str:
    qp = qm.act_qparams[tensor]
    return f"real = {float(qp.scale)!r} * (q - ({int(qp.zero_point)}))"


def emit_model(qm: QuantModel, kernels: str = "dsp", planner: str = "greedy",
               plan: ArenaPlan | None = None, provenance: str = "", widen: bool = True) -> ModelSource:
    """Generate model.h and model.c for `qm` (batch 1), planned for `kernels` ('dsp' or 'ref').

    `widen=False` keeps every weight int8 in the plain layout even for 'dsp': the Helium kernels
    read int8 weights sixteen at a time, so a library for an MVE core is exported without the
    DSP kernels' int16 widening (its plan's scratch still covers what its kernels ask for)."""
    check_supported(qm)
    g = qm.graph
    plan = plan or plan_inference_arena(g, kernels=kernels, planner=planner)
    em = InferenceEmitter(qm, plan, widen=widen)
    blocks: list[str] = []
    scratch_checks: list[str] = []
    for i, n in enumerate(g.nodes):
        body = em.node(i, n)
        op_desc = f"{n.op.value}" + (f", act {n.act}" if n.attrs.get("act", "none") != "none" else "")
        lines = [f"    {{ /* [{i}] {c_comment(n.name)}: {op_desc} -> {list(g.shape(n.name))} at arena "
                 f"offset {plan.offsets[n.name]} */"]
        lines += [f"        {s}" for s in body]
        if n.op != Op.FLATTEN:
            lines.append("        if (st != MT_OK) {")
            lines.append("            return st;")
            lines.append("        }")
        lines.append("        if (model_layer_hook_fn) {")
        lines.append(f"            model_layer_hook_fn({i}, {c_string(n.name)}, {em.tensor(n.name)}, "
                     f"{em.size(n.name)});")
        lines.append("        }")
        lines.append("    }")
        blocks.append("\n".join(lines))
        if n.name in plan.scratch:
            size = plan.scratch[n.name][1]
            if n.op == Op.LINEAR:
                fn = "mt_linear_fwd_s8_rows4" if em.widen else "mt_linear_fwd_s8"
                call = f"{fn}_get_buffer_size({qm.weights[n.name].shape[1]})"
            else:
                w, nid = qm.weights[n.name].shape, em.ids[n.name]
                scratch_checks.append(f"    static const mt_dims f_{nid} = {{{', '.join(map(str, w))}}};")
                if em.widen and widens_weights(g, n):
                    (sh, sw), (pt, _, pl, _) = n.attrs["stride"], n.attrs["padding"]
                    scratch_checks.append(f"    static const mt_conv_params p_{nid} = {{0, 0, {sh}, {sw}, "
                                          f"{pt}, {pl}, {n.attrs['groups']}, -128, 127}};")
                    scratch_checks.append(f"    static const mt_dims in_{nid} = "
                                          f"{dims_init(g.shape(n.inputs[0]))};")
                    scratch_checks.append(f"    static const mt_dims out_{nid} = "
                                          f"{dims_init(g.shape(n.name))};")
                    call = (f"mt_conv2d_fwd_s8_s16_get_buffer_size(&p_{nid}, &in_{nid}, &f_{nid}, "
                            f"&out_{nid})")
                else:
                    call = f"mt_conv2d_fwd_s8_get_buffer_size(&f_{nid})"
            scratch_checks.append(f"    if ({call} > {size}) {{ /* {c_comment(n.name)} */")
            scratch_checks.append("        return MT_ERR_BUFFER;")
            scratch_checks.append("    }")
    in_size, out_size = em.size(INPUT), em.size(g.output)
    ishape = g.input_shape if len(g.input_shape) == 3 else (1, 1, *g.input_shape)
    header = render(
        "model_inference.h", provenance=c_comment(provenance or "(not recorded)"), kernels=kernels,
        planner=plan.planner,
        h=ishape[0], w=ishape[1], c=ishape[2], in_size=in_size, out_size=out_size,
        in_zp=qm.zero_point(INPUT), in_q=c_comment(qparams_comment(qm, INPUT)),
        out_zp=qm.zero_point(g.output), out_q=c_comment(qparams_comment(qm, g.output)),
        arena=plan.arena_bytes, layers=len(g.nodes),
        compiled_in=header_lines(compiled_in(None, batch=1, rounding=qm.rounding, kernels=kernels)))
    source = render(
        "model_inference.c", kernels=kernels, planner=plan.planner, arena=plan.arena_bytes,
        consts=mode_guard(qm.rounding) + "\n\n".join(em.consts),
        in_ptr=em.tensor(INPUT), out_ptr=em.tensor(g.output),
        checks="\n".join(scratch_checks) or "    /* no kernel needs scratch memory */",
        blocks="\n".join(blocks), graph=c_comment_lines(g.summary()))
    return ModelSource(header, source, plan, em.const_bytes, [n.name for n in g.nodes])
