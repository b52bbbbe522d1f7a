"""NP's exact local weight gradient: ``sum (x - z_x) * g_acc`` of a layer's stored input and node error.

Node perturbation estimates the gradient at a layer's int8 output (`zo_estimator.estimate_np`);
the weight gradient then follows exactly, in integers, as the local product with the layer's
cached input -- the same sums as the C kernel `mt_conv2d_bwd_w_s8_s32` and its linear twin.
"""

from __future__ import annotations

import numpy as np

from mcutrain.engines.im2col import im2col, out_size, pad_nhwc, tap_views
from mcutrain.engines.int_gemm import F64_EXACT, exact_matmul_wide, gemm_dtype
from mcutrain.graph import Op
from mcutrain.qmodel import QuantModel


def local_weight_grad(qm: QuantModel, layer: str, x: np.ndarray, g_acc: np.ndarray
                      ) -> tuple[np.ndarray, np.ndarray]:
    """Exact int64 ``P_w = sum (x - z_x) * g_acc`` (weight-gradient shape) and ``P_b = sum g_acc``.

    `g_acc` holds integers per output element (B, *out); this is the weight
    gradient of a conv/linear with the error `g_acc` at its accumulator, in
    integers: im2col + one exact GEMM (depthwise: a sum over taps); float BLAS
    throughout, the reduction over batch x positions cut into exact float64
    chunks when its sums could pass 2^53 (`exact_matmul_wide`).
    """
    node = qm.graph.node(layer)
    zx = qm.zero_point(node.inputs[0])
    o = qm.weights[layer].shape[0]
    g2 = g_acc.reshape(-1, o)
    b_sum = g2.sum(axis=0)
    xm = max(abs(int(x.min()) - zx), abs(int(x.max()) - zx)) if x.size else 0
    colsum = int(np.abs(g2).sum(axis=0).max(initial=0))
    bound = xm * colsum
    gmax = int(np.abs(g2).max(initial=0))
    dt = gemm_dtype(min(bound, F64_EXACT))       # past 2^53: float64 chunks of the reduction
    if node.op == Op.LINEAR:
        xc = x.reshape(len(x), -1).astype(dt) - dt.type(zx)
        return exact_matmul_wide(g2.T.astype(dt), xc, bound, gmax, xm), b_sum
    a = node.attrs
    kh, kw = a["kernel"]
    groups = a["groups"]
    w_shape = qm.weights[layer].shape
    cig = w_shape[-1]
    bsz, h, wd, c = x.shape
    if groups == c and cig == 1:
        ho = out_size(h, kh, a["stride"][0], a["padding"][0] + a["padding"][1])
        wo = out_size(wd, kw, a["stride"][1], a["padding"][2] + a["padding"][3])
        xp = pad_nhwc(x.astype(np.int64) - zx, a["padding"], 0)
        if o != c:
            xp = np.repeat(xp, o // c, axis=3)
        ga = g_acc.reshape(bsz, ho, wo, o)
        pw = np.zeros(w_shape, np.int64)
        for i, j, view in tap_views(xp, (kh, kw), a["stride"], (ho, wo)):
            pw[:, i, j, 0] = (view * ga).sum(axis=(0, 1, 2))
        return pw, b_sum
    xc = x.astype(np.int16) - np.int16(zx)      # fits int16: gather the columns at 2 bytes, convert once
    cols = im2col(xc, (kh, kw), a["stride"], a["padding"], 0).astype(dt)       # (M, kh*kw*C)
    mrows = cols.shape[0]
    opg = o // groups
    cols_g = cols.reshape(mrows, kh * kw, groups, cig).transpose(2, 0, 1, 3).reshape(groups, mrows, -1)
    g_g = g2.reshape(mrows, groups, opg).transpose(1, 2, 0).astype(dt)            # (G, Og, M)
    pw = exact_matmul_wide(g_g, cols_g, bound, gmax, xm)                           # (G, Og, kh*kw*cig)
    return pw.reshape(w_shape), b_sum
