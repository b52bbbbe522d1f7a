"""The integer golden engine: the int8 forward pass that the C runtime reproduces bit for bit.

Each op is one small function named like the C kernel it mirrors
(`mt_conv2d_fwd_s8` in C is `conv2d_fwd_s8` here). Kernels take plain arrays
and integer constants (zero points, multipliers, shifts, clamp bounds) — the
"invoke" phase; `QuantModel` computes those constants once — the "prepare"
phase. `run` walks the graph and keeps every tensor, because the training
methods need the stored activations.

Semantics (docs/integer-semantics.md is normative):
- conv2d / linear: acc[c] = bias[c] + sum (x - z_x) * w[c] as an exact
  integer, then `requantize_products` with the per-channel multiplier/shift,
  the output zero point and the activation clamp (relu/relu6 fused there).
  Padding holds z_x, i.e. a real 0, so it contributes (z_x - z_x) * w = 0.
  The GEMM runs in float32 / float64 BLAS when that is exact (see int_gemm).
- depthwise conv: a sum over the kh*kw taps of strided views (no
  block-diagonal GEMM), in float32 where that is exact (the values of the C int32 loop).
- The accumulators stay in their exact float dtype and `requantize_products` requantizes
  them in float64 where its bound proves that bit-identical to the int64 rule.
- maxpool / avgpool / global-avgpool / flatten / standalone relu(6): same
  qparams in and out, so no requantization.
- add: both inputs rescaled with one shared shift (see `QuantModel.add_params`).

Rounding (`QuantModel.rounding`, section 6.1 of the spec): every requantization runs in the
model's mode. `single` is the rule above; `tflite` is TFLite's MultiplyByQuantizedMultiplier
for conv/depthwise/linear, TFLite's three-step ADD (`add_fwd_s8_tflite`) and TFLite's MEAN
for the global average pool (`global_avgpool_fwd_s8_tflite`). Window average pools round
half away from zero in both modes (TFLite's AVERAGE_POOL_2D does exactly that).

Example:
    >>> from mcutrain import zoo
    >>> from mcutrain.engines import ptq
    >>> g = zoo.build("digits-cnn")
    >>> x = np.random.default_rng(0).random((16, 8, 8, 1), dtype=np.float32)
    >>> qm = ptq.quantize_model(g, x)
    >>> forward(qm, quantize_input(qm, x)).shape
    (16, 10)
"""

from __future__ import annotations

import numpy as np

from mcutrain.engines.im2col import im2col, out_size, pad_nhwc, tap_views
from mcutrain.engines.int_gemm import F32_EXACT, exact_matmul_keep, gemm_dtype
from mcutrain.graph import INPUT, Op
from mcutrain.qmodel import QuantModel
from mcutrain.quant.fixedpoint import (
    TFLITE_ADD_LEFT_SHIFT,
    requantize_products,
    requantize_tflite,
    rounding_divide,
    rounding_shift_right,
)

ACC_LIMIT = (1 << 31) - 1
"""The C kernels accumulate in int32: every partial sum must stay within +-ACC_LIMIT."""

PREDICT_ELEMENTS = 1 << 22
"""`predict` chunks a batch so that its largest tensor holds about this many elements (the
transient int64 accumulator and float GEMM operands are then ~100 MB), at most 256 samples."""


class AccumulatorOverflow(ValueError):
    """A layer whose int32 accumulator could overflow in C; the message names the bound."""


def x_magnitude(x_zp: int) -> int:
    """max |x - z_x| over int8 x: 255 at the extreme zero points, 128 at z_x = 0."""
    return max(127 - int(x_zp), int(x_zp) + 128)


def check_accumulator(x_zp: int, w: np.ndarray, bias: np.ndarray, where: str = "layer") -> int:
    """Return the L1 product bound; raise if bias + products could leave int32.

    NOTE: every partial sum of channel c is bounded by
    |bias[c]| + max|x - z_x| * sum_k |w[c, k]|, whatever the summation order;
    below 2^31 the C int32 accumulator (and any float GEMM) cannot overflow.
    The shape-only form of this bound is K * 255 * 127 + |bias| (K <= 66 000).
    """
    xm = x_magnitude(x_zp)
    l1 = np.abs(w.reshape(w.shape[0], -1).astype(np.int64)).sum(axis=1)
    worst = int((xm * l1 + np.abs(bias.astype(np.int64))).max(initial=0))
    if worst > ACC_LIMIT:
        raise AccumulatorOverflow(
            f"{where}: |bias| + max|x - z_x| * sum|w| = {worst} exceeds the int32 accumulator "
            f"({ACC_LIMIT}); re-quantize the model (smaller bias or fewer inputs per output)")
    return xm * int(l1.max(initial=0))


# ---------------------------------------------------------------- kernels


def conv2d_fwd_s8(x: np.ndarray, x_zp: int, w: np.ndarray, bias: np.ndarray,
                  mult: np.ndarray, shift: np.ndarray, y_zp: int, act_min: int, act_max: int,
                  stride: tuple[int, int], padding: tuple[int, int, int, int],
                  groups: int = 1, rounding: str = "single") -> np.ndarray:
    """int8 NHWC x (N,H,W,C), OHWI w (O,kh,kw,C/groups) -> int8 (N,Ho,Wo,O).

    Depthwise layers (groups == C, one input channel per group) go to
    `depthwise_conv2d_fwd_s8`; other grouped layers run one batched GEMM.
    """
    n, h, wd, c = x.shape
    o, kh, kw, cig = w.shape
    if groups == c and cig == 1 and groups > 1:  # NOTE: one input channel is a plain GEMM
        return depthwise_conv2d_fwd_s8(x, x_zp, w, bias, mult, shift, y_zp, act_min, act_max,
                                       stride, padding, rounding)
    bound = check_accumulator(x_zp, w, bias, "conv2d")
    dt = gemm_dtype(bound)
    xc = x.astype(dt) - dt.type(x_zp)  # padding below is 0 = z_x after centring
    cols = im2col(xc, (kh, kw), stride, padding, 0)  # (M, kh*kw*C)
    m = cols.shape[0]
    if groups == 1:
        acc = exact_matmul_keep(cols, w.reshape(o, -1).T, bound)     # exact integers in dt
    else:
        opg = o // groups
        cols_g = cols.reshape(m, kh * kw, groups, cig).transpose(2, 0, 1, 3).reshape(groups, m, -1)
        w_g = w.reshape(groups, opg, kh * kw * cig).transpose(0, 2, 1)
        acc = exact_matmul_keep(cols_g, w_g, bound).transpose(1, 0, 2).reshape(m, o)
    ho, wo = out_size(h, kh, stride[0], padding[0] + padding[1]), out_size(wd, kw, stride[1],
                                                                           padding[2] + padding[3])
    y = requantize_products(acc, bias, bound, mult, shift, y_zp, act_min, act_max, rounding)
    return y.reshape(n, ho, wo, o)


def depthwise_conv2d_fwd_s8(x: np.ndarray, x_zp: int, w: np.ndarray, bias: np.ndarray,
                            mult: np.ndarray, shift: np.ndarray, y_zp: int, act_min: int,
                            act_max: int, stride: tuple[int, int],
                            padding: tuple[int, int, int, int], rounding: str = "single") -> np.ndarray:
    """Depthwise conv: output channel o reads input channel o // (O / C); w (O,kh,kw,1).

    The C loop's int32 accumulator sums the taps in (i, j) order; `check_accumulator` proves
    no partial sum overflows, so the sum is the same exact integer in any order and dtype
    (`depthwise_acc_sets`).
    """
    h, wd = x.shape[1:3]
    kh, kw = w.shape[1:3]
    bound = check_accumulator(x_zp, w, bias, "depthwise conv2d")
    ho = out_size(h, kh, stride[0], padding[0] + padding[1])
    wo = out_size(wd, kw, stride[1], padding[2] + padding[3])
    acc = depthwise_acc_sets(x[None], x_zp, w[None], bound, stride, padding, (ho, wo))[0]
    return requantize_products(acc, bias, bound, mult, shift, y_zp, act_min, act_max, rounding)


def depthwise_acc_sets(x: np.ndarray, zx: int, w: np.ndarray, bound: int, stride, padding,
                       out_hw: tuple[int, int]) -> np.ndarray:
    """Depthwise accumulators (Q, B, Ho, Wo, O) of Q weight sets w (Q, O, kh, kw, 1) on x (Qx, B, H, W, C).

    Qx is 1 (one input for every set: ZO's weight perturbations) or Q; no bias, a sum over
    kernel taps.

    NOTE: every partial sum is at most `bound` (max|x - z_x| * max_c sum_k |w[c, k]|), so the
    taps sum exactly in float32 when bound <= 2^24 (a 3x3 kernel: 9 * 255 * 127 < 2^24 always),
    else in int64: exact integers in any order, the engine's int32 tap loop's values.
    """
    qx, bsz, h, wd, c = x.shape
    o, kh, kw = w.shape[1:4]
    dt = np.dtype(np.float32) if bound <= F32_EXACT else np.dtype(np.int64)
    xp = pad_nhwc(x.reshape(qx * bsz, h, wd, c).astype(dt) - dt.type(zx), padding, 0)
    if o != c:
        xp = np.repeat(xp, o // c, axis=3)
    wt = w.astype(dt)
    ho, wo = out_hw
    acc = None
    for i, j, view in tap_views(xp, (kh, kw), stride, out_hw):
        term = view.reshape(qx, bsz, ho, wo, o) * wt[:, None, None, None, :, i, j, 0]
        if acc is None:
            acc = term                       # (Q, ...): the weight sets broadcast a shared input
        else:
            acc += term
    return acc


def linear_fwd_s8(x: np.ndarray, x_zp: int, w: np.ndarray, bias: np.ndarray,
                  mult: np.ndarray, shift: np.ndarray, y_zp: int, act_min: int,
                  act_max: int, rounding: str = "single") -> np.ndarray:
    """int8 x (N, I), w (O, I) -> int8 (N, O)."""
    bound = check_accumulator(x_zp, w, bias, "linear")
    dt = gemm_dtype(bound)
    xc = x.astype(dt) - dt.type(x_zp)
    acc = exact_matmul_keep(xc, w.T, bound)        # exact integers in dt
    return requantize_products(acc, bias, bound, mult, shift, y_zp, act_min, act_max, rounding)


def maxpool_fwd_s8(x: np.ndarray, kernel: tuple[int, int], stride: tuple[int, int]) -> np.ndarray:
    """Max over each window; qparams are those of the input (max commutes with them)."""
    _, h, w, _ = x.shape
    ho, wo = out_size(h, kernel[0], stride[0], 0), out_size(w, kernel[1], stride[1], 0)
    y = None
    for _, _, view in tap_views(x, kernel, stride, (ho, wo)):
        y = view.copy() if y is None else np.maximum(y, view, out=y)
    return y


def avgpool_fwd_s8(x: np.ndarray, kernel: tuple[int, int], stride: tuple[int, int]) -> np.ndarray:
    """Window mean as round_half_away(sum / count), sum in int32; same qparams in and out.

    NOTE: the mean of values in [-128, 127] stays in [-128, 127], and since the
    zero point is the same on both sides, mean(q) - z = mean(q - z): no
    requantization, no clamp needed. |sum| <= count * 128 < 2^31 for any window.
    """
    n, h, w, c = x.shape
    ho, wo = out_size(h, kernel[0], stride[0], 0), out_size(w, kernel[1], stride[1], 0)
    acc = np.zeros((n, ho, wo, c), np.int32)
    for _, _, view in tap_views(x, kernel, stride, (ho, wo)):
        acc += view
    return rounding_divide(acc, kernel[0] * kernel[1]).astype(np.int8)


def global_avgpool_fwd_s8(x: np.ndarray) -> np.ndarray:
    """(N, H, W, C) -> (N, 1, 1, C): round_half_away(sum over H, W / (H*W)), sum in int32."""
    _, h, w, _ = x.shape
    acc = x.sum(axis=(1, 2), keepdims=True, dtype=np.int32)
    return rounding_divide(acc, h * w).astype(np.int8)


def global_avgpool_fwd_s8_tflite(x: np.ndarray, x_zp: int, mult: int, shift: int) -> np.ndarray:
    """TFLite's int8 MEAN over H, W with equal input/output qparams (`QuantModel.mean_params`).

    ``y = clamp(requantize_tflite(sum(x) - z * H*W, M', s') + z, -128, 127)``: TFLite folds
    1/(H*W) into the multiplier, so the result can differ by 1 from `global_avgpool_fwd_s8`.
    NOTE: |sum(x - z)| <= 255 * H * W < 2^31 for H * W <= 2^23 (checked by `tflite_mean_params`).
    """
    _, h, w, _ = x.shape
    acc = x.sum(axis=(1, 2), keepdims=True, dtype=np.int64) - np.int64(x_zp) * (h * w)
    y = requantize_tflite(acc, mult, shift) + np.int64(x_zp)
    return np.clip(y, -128, 127).astype(np.int8)


def add_fwd_s8_tflite(a: np.ndarray, a_zp: int, b: np.ndarray, b_zp: int,
                      params: tuple[int, int, int, int, int, int], y_zp: int, act_min: int,
                      act_max: int) -> np.ndarray:
    """TFLite's int8 ADD: each centred input times 2^20 requantized, summed, requantized again.

    NOTE: |a - z_a| <= 255, so (a - z_a) * 2^20 < 2^28 (int32 in C); each scaled input has
    |.| <= 2^27 (multipliers <= 0.5) and their sum stays below 2^28.
    """
    ma, sa, mb, sb, my, sy = params
    xa = requantize_tflite((a.astype(np.int64) - a_zp) << TFLITE_ADD_LEFT_SHIFT, ma, sa)
    xb = requantize_tflite((b.astype(np.int64) - b_zp) << TFLITE_ADD_LEFT_SHIFT, mb, sb)
    y = requantize_tflite(xa + xb, my, sy) + y_zp
    return np.clip(y, act_min, act_max).astype(np.int8)


def add_fwd_s8(a: np.ndarray, a_zp: int, b: np.ndarray, b_zp: int, a_mult: int, b_mult: int,
               n_shift: int, y_zp: int, act_min: int, act_max: int) -> np.ndarray:
    """y = clamp(z_y + round_half_away(((a - z_a) Ma + (b - z_b) Mb) / 2^n)), int64 inside.

    NOTE: |a - z_a| <= 255 and Ma, Mb < 2^31, so the sum is below 2^40: int64 is ample.
    """
    t = (a.astype(np.int64) - a_zp) * np.int64(a_mult) + (b.astype(np.int64) - b_zp) * np.int64(b_mult)
    y = rounding_shift_right(t, n_shift) + y_zp
    return np.clip(y, act_min, act_max).astype(np.int8)


def relu_fwd_s8(x: np.ndarray, act_min: int, act_max: int) -> np.ndarray:
    """Standalone relu / relu6: a clamp with the input's qparams (bounds from activation_range)."""
    return np.clip(x, act_min, act_max).astype(np.int8)


def flatten_fwd_s8(x: np.ndarray) -> np.ndarray:
    """NHWC -> (N, H*W*C): a view, no data movement (NHWC order is the flat order)."""
    return x.reshape(x.shape[0], -1)


# ---------------------------------------------------------------- graph walk


def quantize_input(qm: QuantModel, x: np.ndarray) -> np.ndarray:
    """Float input batch (N, *input_shape) -> int8 with the model's input qparams (nearest)."""
    x = np.asarray(x, np.float32)
    if x.shape[1:] != qm.graph.input_shape:
        raise ValueError(f"input batch shape {x.shape} does not match the model's per-sample input "
                         f"{qm.graph.input_shape}; pass (N, {', '.join(map(str, qm.graph.input_shape))})")
    return qm.act_qparams[INPUT].quantize(x, "nearest")


def run(qm: QuantModel, x_q: np.ndarray) -> dict[str, np.ndarray]:
    """Every tensor of the int8 forward pass, keyed by tensor name ('input' included)."""
    g = qm.graph
    x_q = np.asarray(x_q)
    if x_q.dtype != np.int8 or x_q.shape[1:] != g.input_shape:
        raise ValueError(f"run needs an int8 batch of shape (N, {', '.join(map(str, g.input_shape))}), "
                         f"got {x_q.dtype} {x_q.shape}; use quantize_input for float data")
    t: dict[str, np.ndarray] = {INPUT: x_q}
    for node in g.nodes:
        t[node.name] = run_node(qm, node, [t[s] for s in node.inputs])
    return t


def run_node(qm: QuantModel, node, ins: list[np.ndarray]) -> np.ndarray:
    """One node of the int8 forward pass on its input tensors (training methods re-run parts)."""
    a = node.attrs
    x = ins[0]
    if node.op in (Op.CONV2D, Op.LINEAR):
        zx = qm.zero_point(node.inputs[0])
        zy = qm.zero_point(node.name)
        mult, shift = qm.requant_params(node)
        lo, hi = qm.act_range(node)
        w, b = qm.weights[node.name], qm.biases[node.name]
        if node.op == Op.LINEAR:
            return linear_fwd_s8(x, zx, w, b, mult, shift, zy, lo, hi, qm.rounding)
        return conv2d_fwd_s8(x, zx, w, b, mult, shift, zy, lo, hi, a["stride"], a["padding"],
                             a["groups"], qm.rounding)
    if node.op == Op.MAXPOOL:
        return maxpool_fwd_s8(x, a["kernel"], a["stride"])
    if node.op == Op.AVGPOOL:
        return avgpool_fwd_s8(x, a["kernel"], a["stride"])
    if node.op == Op.GLOBAL_AVGPOOL:
        if qm.rounding == "tflite":
            return global_avgpool_fwd_s8_tflite(x, qm.zero_point(node.inputs[0]), *qm.mean_params(node))
        return global_avgpool_fwd_s8(x)
    if node.op == Op.FLATTEN:
        return flatten_fwd_s8(x)
    if node.op in (Op.RELU, Op.RELU6):
        lo, hi = qm.act_range(node)
        return relu_fwd_s8(x, lo, hi)
    if node.op == Op.ADD:
        lo, hi = qm.act_range(node)
        za, zb, zy = (qm.zero_point(t) for t in (*node.inputs, node.name))
        if qm.rounding == "tflite":
            return add_fwd_s8_tflite(x, za, ins[1], zb, qm.add_params(node), zy, lo, hi)
        ma, mb, n = qm.add_params(node)
        return add_fwd_s8(x, za, ins[1], zb, ma, mb, n, zy, lo, hi)
    raise ValueError(f"node '{node.name}': op {node.op.value} has no int8 forward kernel "
                     "(fold BatchNorm before quantizing; losses belong to training methods)")


def forward(qm: QuantModel, x_q: np.ndarray) -> np.ndarray:
    """int8 logits (N, K) of an int8 input batch."""
    return run(qm, x_q)[qm.graph.output].reshape(len(x_q), -1)


def predict(qm: QuantModel, x: np.ndarray, batch_size: int | None = None) -> np.ndarray:
    """Class ids (int64, N) for a float batch, in chunks; ties go to the lowest class id.

    Without `batch_size` the chunk is sized from the model's largest tensor, so
    10k samples of a 128x128 model never hold all their activations at once.
    """
    x = np.asarray(x, np.float32)
    if batch_size is None:
        largest = max(int(np.prod(s)) for s in qm.graph.shapes.values())
        batch_size = int(np.clip(PREDICT_ELEMENTS // largest, 1, 256))
    out = [forward(qm, quantize_input(qm, x[i:i + batch_size])).argmax(axis=1)
           for i in range(0, len(x), batch_size)]
    return np.concatenate(out) if out else np.zeros(0, np.int64)
