"""FQT int8's integer-only update: standardization, step and requantization in fixed point.

The float32 update (`fqt_update`, docs/integer-semantics.md 13.6-13.7) runs four float32
operations per weight; a core without an FPU (Cortex-M0+, RV32IMC) spends most of an FQT step
in soft-float calls for them. This update (section 13.9, `FQTConfig(update="integer")`) does the
per-weight work in int32 with integer sums, leaving float32 to a few operations per output
channel (statistics, scales): the same state, the same stream, a fixed-point twin of each step.

Per updated channel (K weights, the bias in weight-gradient units last, n = K + 1):

1. `sh`: the shift that brings max |G| below 2^15; `Gs = shift_round(G, sh)`.
2. `S = sum Gs`, `Q = sum Gs^2` (int64), `V = n Q - S^2`: mean `S / n`, variance `V / n^2`.
3. float32 per channel: `mu_b`, `sd_b` in real units, their EMAs (as 13.6), the step's
   fixed-point multiplier `beta` and offset `gamma` in old-scale weight steps.
4. `z = (w << 16) - shift_round(Gs * beta_m, beta_s) + gamma_q`: the new weight, Q16.
5. `amax = max |z|` moves the channel's range EMA (as 13.7) and gives the new scale;
   `w' = clamp((v rho_m + (u >> (32 - n))) >> n, -127, 127)` with `v = shift_round(z, t)`,
   `rho = s_w / s_w'` as a 14-bit multiplier: stochastic rounding's integer twin (section 4).

The C twin is `runtime/train/fqt/mt_fqt_upd_s8_int.c`, same order, same bounds.

Example:
    >>> shift_round(np.array([5, -5, 6, -6], np.int64), 1).tolist()
    [3, -2, 3, -3]
    >>> mant14(np.array([1.0, 0.75], np.float32))
    (array([8192, 12288]), array([13, 14]))
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mcutrain.methods.fqt_common import F32, NORM_EPS
from mcutrain.quant.qparams import EmaRange, QParams
from mcutrain.quant.rounding import round_half_away

GRAD_BITS = 15
"""|Gs| <= 2^15: Gs^2 <= 2^30 fits a uint32, Gs * beta_m <= 2^29 an int32."""
MANT = 14
"""Bits of the fixed-point multipliers beta_m and rho_m (in [2^13, 2^14])."""
FRAC = 16
"""Fraction bits of the new weights z (Q16 of the old scale's step)."""
V_BITS = 16
"""|v| <= 2^16: v * rho_m <= 2^30, and u >> (32 - n) < 2^30 beside it, in an int32."""
MAX_ROW = 65535
"""n = K + 1 <= 65535 keeps |S| < 2^31 and n Q - S^2 in an int64."""
GAMMA_MAX = 1 << 29
"""|gamma_q| <= 2^29: |z| <= 2^23 + 2^29 + 2^29 < 2^31."""


def bit_length(m: np.ndarray) -> np.ndarray:
    """Bits of each non-negative integer (0 for 0), exactly, for m < 2^53."""
    return np.frexp(np.asarray(m, np.float64))[1].astype(np.int64)


def shift_round(x: np.ndarray, s: np.ndarray | int) -> np.ndarray:
    """floor(x / 2^s + 1/2) (round half up) of int64 `x`, s >= 0: `((x >> (s - 1)) + 1) >> 1`."""
    x = np.asarray(x, np.int64)
    s = np.asarray(s, np.int64)
    half = np.maximum(s - 1, 0)
    return np.where(s > 0, ((x >> half) + 1) >> np.where(s > 0, 1, 0), x)


def mant14(y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(m, e) with float32 y ~= m * 2^-e, m = round_half_up(f * 2^14) in [2^13, 2^14] for
    y = f * 2^x (f in [0.5, 1)), e = 14 - x; (0, 0) for y below 2^-126 (zero, subnormal, NaN),
    (2^14, -128) for +inf."""
    y = np.asarray(y, F32)
    big = np.isinf(y)                                # an overflowed multiplier saturates
    f, x = np.frexp(np.where(big, F32(1), y))
    m = np.floor(f.astype(np.float64) * 2.0**MANT + 0.5).astype(np.int64)
    e = MANT - x.astype(np.int64)
    tiny = ~(y >= F32(2.0**-126))
    return np.where(tiny, 0, np.where(big, 1 << MANT, m)), np.where(tiny, 0, np.where(big, -128, e))


def sat_i32(q: np.ndarray, bound: int = 2**31 - 1) -> np.ndarray:
    """An integral float32 array clamped to [-bound, bound] as int64 (inf saturates, NaN is 0)."""
    q = np.asarray(q, np.float64)
    return np.clip(np.where(np.isnan(q), 0.0, q), -bound, bound).astype(np.int64)


@dataclass
class IntegerStep:
    """One layer's integer update result: new weights and scales, the bias's standardized gradient."""

    w: np.ndarray
    qparams: QParams
    ghat_bias: np.ndarray


def integer_update(g: np.ndarray, gb: np.ndarray, g_scale: F32, gb_scale: F32, upd: np.ndarray,
                   norm: dict[str, np.ndarray], alpha_norm: float, w: np.ndarray, s_w: np.ndarray,
                   ema: EmaRange, lr: np.ndarray, u32: np.ndarray) -> IntegerStep:
    """Section 13.9 on one layer. `g` (O, ...) and `gb` (O,): the integer weight and bias gradients
    (real: float32(g) * g_scale, float32(gb) * gb_scale); `norm`: the layer's {mu, sd, init}, updated
    in place; `lr` (O,): the step sizes; `u32`: one stream value per weight of the updated channels."""
    o = g.shape[0]
    k = g.size // max(o, 1)
    if k + 1 > MAX_ROW:
        raise ValueError(f"the integer update takes at most {MAX_ROW - 1} weights per channel, got {k}")
    rows = np.flatnonzero(upd)
    G = np.asarray(g, np.int64).reshape(o, -1)[rows]
    gb_real = (np.asarray(gb).astype(F32) * F32(gb_scale)).astype(F32)
    gbu = sat_i32(round_half_away((gb_real[rows] / F32(g_scale)).astype(F32)))
    # 1-2: the shift to 15 bits, then exact sums (the bias last)
    m = np.maximum(np.abs(G).max(1, initial=0), np.abs(gbu))
    sh = np.maximum(bit_length(m) - GRAD_BITS, 0)
    gs = shift_round(G, sh[:, None])
    gbs = shift_round(gbu, sh)
    n = np.int64(k + 1)
    s = gs.sum(1) + gbs
    q = np.einsum("ij,ij->i", gs, gs) + gbs * gbs
    v = n * q - s * s
    # 3: statistics and their EMAs in float32, per channel
    unit = (F32(g_scale) * np.ldexp(F32(1), sh.astype(np.int32))).astype(F32)
    nf = F32(n)
    mu_b = (s.astype(F32) / nf * unit).astype(F32)
    sd_b = (np.sqrt(v.astype(F32)) / nf * unit).astype(F32)
    an = F32(alpha_norm)
    keep = F32(1) - an
    init = norm["init"][rows]
    mu = np.where(init, keep * norm["mu"][rows] + an * mu_b, mu_b).astype(F32)
    sd = np.where(init, keep * norm["sd"][rows] + an * sd_b, sd_b).astype(F32)
    norm["mu"][rows], norm["sd"][rows], norm["init"][rows] = mu, sd, True
    den = (sd + NORM_EPS).astype(F32)
    live = sd != 0
    ghat_b = np.zeros(o, F32)
    ghat_b[rows] = np.where(live, (gb_real[rows] - mu) / den, F32(0))
    lr_r, sw = lr[rows].astype(F32), s_w[rows].astype(F32)
    with np.errstate(over="ignore"):            # a diverged channel saturates below
        beta = np.where(live, lr_r * unit / den / sw, F32(0)).astype(F32)
        gamma = np.where(live, lr_r * mu / den / sw, F32(0)).astype(F32)
        gamma_q = sat_i32(round_half_away((gamma * F32(2.0**FRAC)).astype(F32)), GAMMA_MAX)
    bm, be = mant14(beta)
    bs = be - FRAC
    bm = np.where((bs < 0) & (bm > 0), 1 << MANT, bm)    # a step of 2^13 steps or more saturates
    bs = np.where(bm > 0, np.clip(bs, 0, 31), 0)     # |Gs * bm| < 2^29: shifts past 30 all give 0
    # 4: the new weights in Q16 of the old scale, and their largest magnitude
    wi = np.asarray(w, np.int64).reshape(o, -1)[rows]
    z = (wi << FRAC) - shift_round(gs * bm[:, None], bs[:, None]) + gamma_q[:, None]
    amax = np.abs(z).max(1, initial=0)
    # 5: the range EMA and the new scale (13.7), then the fixed-point requantization
    amax_r = (amax.astype(F32) * sw * F32(2.0**-FRAC)).astype(F32)
    lo_old, hi_old = ema.lo.copy(), ema.hi.copy()
    lo_b, hi_b = lo_old.copy(), hi_old.copy()
    lo_b[rows], hi_b[rows] = -amax_r, amax_r
    ema.update(lo_b, hi_b)
    upd_all = np.zeros(o, bool)
    upd_all[rows] = True
    ema.lo = np.where(upd_all, ema.lo, lo_old).astype(F32)
    ema.hi = np.where(upd_all, ema.hi, hi_old).astype(F32)
    qn = ema.qparams("int8", symmetric=True)
    t = np.maximum(bit_length(amax) - V_BITS, 0)
    vq = shift_round(z, t[:, None])
    rho = (sw / qn.scale[rows].astype(F32)).astype(F32)
    rm, re = mant14((rho * np.ldexp(F32(1), (t - FRAC).astype(np.int32))).astype(F32))
    over = np.maximum(re - 30, 0)
    rm = np.where((re < 1) & (rm > 0), 1 << MANT, rm >> np.minimum(over, MANT + 1))
    nsh = np.clip(re, 1, 30)                         # rho_m 0 (rho below 2^-126): shift 1, w' = 0
    u = np.asarray(u32, np.uint32).reshape(len(rows), k).astype(np.int64)
    wq = (vq * rm[:, None] + (u >> (32 - nsh)[:, None])) >> nsh[:, None]
    w2 = np.asarray(w).reshape(o, -1).copy()
    w2[rows] = np.clip(wq, -127, 127).astype(np.int8)
    return IntegerStep(w2.reshape(w.shape), qn, ghat_b)
