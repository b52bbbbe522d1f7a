/*
 * Transposed grouped conv (depthwise and dense included) of prescaled int16 errors with int8
 * weights (Python twin: fqt_kernels.conv2d_bwd_in_acc in mode "int", then fqt.FQT._to_err or
 * fqt.FQT._as_real).
 * DSP twin of train/fqt/mt_grouped_conv2d_bwd_in_s8_s16.c, bit-exact with it; grouped layers that
 * are not depthwise, and cores without DSP, run the reference body
 * (mt_grouped_conv2d_bwd_in_s8_s16_ref.h). A tensor with several consumers gets the float32 reals
 * (e_real) as in the reference.
 *
 * Depthwise: input position (y, x) of channel c sums e16[(y + pad - i) / s, (x + pad - j) / s, c]
 * * w[c, i, j] over the taps whose output position exists, so the taps are visited through the
 * output positions that cover (y, x): no stride test per tap. Four channels go together: their
 * weights are unpacked once per quad into int16 words (w[c], w[c + 1]) and (w[c + 2], w[c + 3])
 * per tap, the errors of four channels are two words as they lie in memory, and each tap is
 * four single MACs (SMLABB / SMLATT). Int8 errors (and the first step's range-only pass) run
 * bwd_in_quad_s8: runs of interior inputs take whole kernel rows in inline asm, the four errors
 * of a position are requantized, clamped and stored as one word, and the extremes are one range
 * test per value; float32 reals and error shifts without the prepared requantization run
 * bwd_in_channels. Channels past the last quad take the plain loop.
 * Int8 errors and the range-only pass of four layer kinds take a body of their own instead (same
 * requantization, packing and extremes per input, below): small maps the plane body (bip_*),
 * stride 1 with square 3/5/7 kernels the forward's row loop over the error map with the kernel
 * turned (bir_*), stride 2 with 3x3 (bis_*) or 5x5 / 7x7 kernels (bik_*) and padding (k - 1) / 2
 * a split by column parity, where one error pair of a channel serves two inputs.
 * NOTE: |e16 * w| <= 32512 * 127 and a depthwise sum has kh * kw <= MT_BWD_IN_TERMS products, so
 * it fits int32 in any order (the reference's int64 flush never triggers here).
 */
#include "mt_arch.h"
#include "mt_depthwise_dsp.h"
#include "mt_depthwise_rows_dsp.h"
#include "mt_grouped_conv2d_bwd_in_s8_s16_ref.h"

#if MT_DSP

/* The output rows [*lo, *hi] that cover input row y (tap i = y + pad - s * o in [0, k)). */
MT_INLINE void bwd_in_covering(int32_t y, int32_t pad, int32_t s, int32_t k, int32_t n_out, int32_t *lo, int32_t *hi)
{
    const int32_t t = y + pad, first = t - k + 1;
    const int32_t last = t / s;
    *lo = first <= 0 ? 0 : (first + s - 1) / s;
    *hi = last < n_out - 1 ? last : n_out - 1;
}

/* The error requantization of one accumulator, prepared (fast) or general. */
MT_INLINE int8_t bwd_in_to_err(int32_t v, int fast, int32_t multiplier, int32_t shift, int32_t sh, int32_t c1)
{
    int32_t y;
    if (!fast) {
        return mt_requantize_single(v, multiplier, shift, 0, -127, 127);
    }
    y = mt_requantize_fast_single(v, multiplier, sh, c1);
    return (int8_t)(y < -127 ? -127 : y);
}

/* Channels [c0, c0 + 4) (or, with quad = 0, channel c0 alone) of a depthwise layer. */
MT_INLINE void bwd_in_channels(const mt_conv_params *p,
                           const mt_dims *out_d,
                           const int16_t *e16,
                           const mt_dims *f_d,
                           const int8_t *filter,
                           const mt_dims *in_d,
                           int32_t multiplier,
                           int32_t shift,
                           int8_t *e_x,
                           float s_acc,
                           float *e_real,
                           int32_t *lo,
                           int32_t *hi,
                           int32_t c0,
                           const int quad)
{
    const int32_t h = in_d->h, w = in_d->w, c_n = in_d->c;
    const int32_t kh = f_d->h, kw = f_d->w, kk = kh * kw;
    const int32_t ho = out_d->h, wo = out_d->w, sh = p->stride_h, sw = p->stride_w;
    const int fast = mt_requant_fast_ok_single(multiplier, shift);
    const int32_t rsh = -1 - shift, c1 = fast ? mt_requant_c1(rsh, 0) : 0;
    int32_t wq[2 * MT_DW_TAPS_MAX];
    int32_t vmin = *lo, vmax = *hi;
    int32_t t, n, y, x;
    int32_t r[4];
    mt_dw_used_taps(p, in_d, f_d, out_d, r);
    for (t = 0; t < kk; ++t) {
        const int8_t *f = filter + c0 * kk + t;
        if (t / kw < r[0] || t / kw >= r[1] || t % kw < r[2] || t % kw >= r[3]) {
            continue; /* a tap that links no input to an output: never read */
        }
        wq[2 * t] = quad ? (int32_t)(((uint32_t)(int32_t)f[0] & 0xFFFFu) | ((uint32_t)(int32_t)f[kk] << 16)) : f[0];
        wq[2 * t + 1] =
            quad ? (int32_t)(((uint32_t)(int32_t)f[2 * kk] & 0xFFFFu) | ((uint32_t)(int32_t)f[3 * kk] << 16)) : 0;
    }
    for (n = 0; n < in_d->n; ++n) {
        for (y = 0; y < h; ++y) {
            int32_t oy_lo, oy_hi;
            bwd_in_covering(y, p->pad_top, sh, kh, ho, &oy_lo, &oy_hi);
            for (x = 0; x < w; ++x) {
                const int32_t at = ((n * h + y) * w + x) * c_n + c0;
                int32_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
                int32_t ox_lo, ox_hi, oy;
                bwd_in_covering(x, p->pad_left, sw, kw, wo, &ox_lo, &ox_hi);
                for (oy = oy_lo; oy <= oy_hi; ++oy) {
                    const int32_t i = y + p->pad_top - sh * oy;
                    const int16_t *pe = e16 + ((n * ho + oy) * wo + ox_lo) * c_n + c0;
                    int32_t wi = 2 * (i * kw + x + p->pad_left - sw * ox_lo); /* tap (i, j) of ox */
                    int32_t ox;
                    for (ox = ox_lo; ox <= ox_hi; ++ox, pe += c_n, wi -= 2 * sw) {
                        const int32_t *pw = wq + wi;
                        if (quad) {
                            const int32_t e01 = mt_read_s16x2(pe), e23 = mt_read_s16x2(pe + 2);
                            a0 = mt_smlabb(e01, pw[0], a0);
                            a1 = mt_smlatt(e01, pw[0], a1);
                            a2 = mt_smlabb(e23, pw[1], a2);
                            a3 = mt_smlatt(e23, pw[1], a3);
                        } else {
                            a0 += (int32_t)pe[0] * pw[0];
                        }
                    }
                }
                if (e_real) { /* a tensor with several consumers: float32(acc) * s_acc, no extremes */
                    e_real[at] = mt_s64_to_f32(a0) * s_acc;
                    if (quad) {
                        e_real[at + 1] = mt_s64_to_f32(a1) * s_acc;
                        e_real[at + 2] = mt_s64_to_f32(a2) * s_acc;
                        e_real[at + 3] = mt_s64_to_f32(a3) * s_acc;
                    }
                    continue;
                }
                vmin = a0 < vmin ? a0 : vmin;
                vmax = a0 > vmax ? a0 : vmax;
                if (quad) {
                    vmin = a1 < vmin ? a1 : vmin;
                    vmax = a1 > vmax ? a1 : vmax;
                    vmin = a2 < vmin ? a2 : vmin;
                    vmax = a2 > vmax ? a2 : vmax;
                    vmin = a3 < vmin ? a3 : vmin;
                    vmax = a3 > vmax ? a3 : vmax;
                }
                if (e_x) {
                    e_x[at] = bwd_in_to_err(a0, fast, multiplier, shift, rsh, c1);
                    if (quad) {
                        e_x[at + 1] = bwd_in_to_err(a1, fast, multiplier, shift, rsh, c1);
                        e_x[at + 2] = bwd_in_to_err(a2, fast, multiplier, shift, rsh, c1);
                        e_x[at + 3] = bwd_in_to_err(a3, fast, multiplier, shift, rsh, c1);
                    }
                }
            }
        }
    }
    *lo = vmin;
    *hi = vmax;
}

/* 1 when the error requantization (zero point 0, clamp [-127, 127]) has the prepared form: with a
   zero point of 0 the rounding constant c1 = 2^(sh-1) stays below 2^30 for every sh = -1 - shift in
   [1, 30], so mt_requantize_fast_single is exact there (mt_fixedpoint.h), a wider range than
   mt_requant_fast_ok_single's (which leaves room for a zero point). */
MT_INLINE int bwd_in_fast_ok(int32_t multiplier, int32_t shift)
{
    return multiplier != 0 && shift >= -31 && shift <= -2;
}

/* Four accumulators to four int8 errors in one word: the prepared requantization of each (SSAT to
   [-128, 127]), the bytes packed, then -128 raised to -127 in one SIMD maximum. */
MT_INLINE int32_t bwd_in_pack_err(int32_t a0, int32_t a1, int32_t a2, int32_t a3, int32_t multiplier, int32_t rsh,
                                  int32_t c1)
{
#if defined(MT_DSP_NATIVE)
    int32_t lo, hi; /* 5 instructions per error (mt_requantize_fast_single), then 5 to pack and 3 to clamp */
    __asm__("asr    %[lo], %[a0], #31\n\t"
            "add    %[hi], %[c1], %[lo]\n\t"
            "smlal  %[lo], %[hi], %[a0], %[m]\n\t"
            "asr    %[a0], %[hi], %[sh]\n\t"
            "ssat   %[a0], #8, %[a0]\n\t"
            "asr    %[lo], %[a1], #31\n\t"
            "add    %[hi], %[c1], %[lo]\n\t"
            "smlal  %[lo], %[hi], %[a1], %[m]\n\t"
            "asr    %[a1], %[hi], %[sh]\n\t"
            "ssat   %[a1], #8, %[a1]\n\t"
            "asr    %[lo], %[a2], #31\n\t"
            "add    %[hi], %[c1], %[lo]\n\t"
            "smlal  %[lo], %[hi], %[a2], %[m]\n\t"
            "asr    %[a2], %[hi], %[sh]\n\t"
            "ssat   %[a2], #8, %[a2]\n\t"
            "asr    %[lo], %[a3], #31\n\t"
            "add    %[hi], %[c1], %[lo]\n\t"
            "smlal  %[lo], %[hi], %[a3], %[m]\n\t"
            "asr    %[a3], %[hi], %[sh]\n\t"
            "ssat   %[a3], #8, %[a3]\n\t"
            "pkhbt  %[a0], %[a0], %[a2], lsl #16\n\t" /* (y0, y2) as halfwords */
            "pkhbt  %[a1], %[a1], %[a3], lsl #16\n\t"
            "uxtb16 %[a0], %[a0]\n\t"                  /* bytes 0 and 2: y0, y2 */
            "uxtb16 %[a1], %[a1]\n\t"
            "orr    %[a0], %[a0], %[a1], lsl #8\n\t"   /* y0, y1, y2, y3 */
            "mov    %[lo], #0x81818181\n\t"
            "ssub8  %[hi], %[a0], %[lo]\n\t"
            "sel    %[a0], %[a0], %[lo]"
            : [a0] "+&r"(a0), [a1] "+&r"(a1), [a2] "+&r"(a2), [a3] "+&r"(a3), [lo] "=&r"(lo), [hi] "=&r"(hi)
            : [m] "r"(multiplier), [sh] "r"(rsh), [c1] "r"(c1)
            : "cc");
    (void)hi;
    return a0;
#else  /* !MT_DSP_NATIVE */
    const uint32_t y0 = (uint32_t)mt_requantize_fast_single(a0, multiplier, rsh, c1);
    const uint32_t y1 = (uint32_t)mt_requantize_fast_single(a1, multiplier, rsh, c1);
    const uint32_t y2 = (uint32_t)mt_requantize_fast_single(a2, multiplier, rsh, c1);
    const uint32_t y3 = (uint32_t)mt_requantize_fast_single(a3, multiplier, rsh, c1);
    const int32_t word = (int32_t)((y0 & 0xFFu) | ((y1 & 0xFFu) << 8) | ((y2 & 0xFFu) << 16) | (y3 << 24));
    return mt_max_s8x4(word, (int32_t)0x81818181u);
#endif /* MT_DSP_NATIVE */
}

/* Merges accumulator a into [vmin, vmax]; the common case (a already inside) is one subtraction,
   one compare and one branch against (tb, span) = (vmin, vmax - vmin). */
#define BWD_IN_RANGE(a)                                                                                          \
    do {                                                                                                         \
        if ((uint32_t)(a) - tb > span) {                                                                         \
            vmin = (a) < vmin ? (a) : vmin;                                                                      \
            vmax = (a) > vmax ? (a) : vmax;                                                                      \
            tb = (uint32_t)vmin;                                                                                 \
            span = (uint32_t)vmax - (uint32_t)vmin;                                                             \
        }                                                                                                        \
    } while (0)

/* One tap of four channels: their errors at pe (two words), their unpacked weights at pw. */
#define BWD_IN_TAP(pe, pw)                                                                                       \
    do {                                                                                                         \
        const int32_t e01_ = mt_read_s16x2(pe), e23_ = mt_read_s16x2((pe) + 2);                                 \
        a0 = mt_smlabb(e01_, (pw)[0], a0);                                                                       \
        a1 = mt_smlatt(e01_, (pw)[0], a1);                                                                       \
        a2 = mt_smlabb(e23_, (pw)[1], a2);                                                                       \
        a3 = mt_smlatt(e23_, (pw)[1], a3);                                                                       \
    } while (0)

/* One tap of four channels from a kernel row walked along the errors: errors at pr (then pr moves to
   the next output column, e_step bytes on), unpacked weights at byte offset `off` from pw. Native:
   2 LDR, 1 LDRD, 1 ADD and the 4 MACs, with the walk kept in registers. */
#if defined(MT_DSP_NATIVE)
#define BWD_IN_STEP(pr, pw, off)                                                                                 \
    do {                                                                                                         \
        int32_t e01_, e23_, w0_, w1_;                                                                            \
        __asm__("ldr    %[e01], [%[pr]]\n\t"                                                                     \
                "ldr    %[e23], [%[pr], #4]\n\t"                                                                \
                "ldrd   %[w0], %[w1], [%[pw], #%c[o]]\n\t"                                                      \
                "add    %[pr], %[pr], %[es]\n\t"                                                                \
                "smlabb %[a0], %[e01], %[w0], %[a0]\n\t"                                                        \
                "smlatt %[a1], %[e01], %[w0], %[a1]\n\t"                                                        \
                "smlabb %[a2], %[e23], %[w1], %[a2]\n\t"                                                        \
                "smlatt %[a3], %[e23], %[w1], %[a3]"                                                            \
                : [a0] "+r"(a0), [a1] "+r"(a1), [a2] "+r"(a2), [a3] "+r"(a3), [pr] "+r"(pr),                   \
                  [e01] "=&r"(e01_), [e23] "=&r"(e23_), [w0] "=&r"(w0_), [w1] "=&r"(w1_)                          \
                : [pw] "r"(pw), [o] "n"(off), [es] "r"(e_step)                                                   \
                : "memory");                                                                                     \
    } while (0)
#else /* !MT_DSP_NATIVE */
#define BWD_IN_STEP(pr, pw, off)                                                                                 \
    do {                                                                                                         \
        BWD_IN_TAP(pr, (pw) + (off) / 4);                                                                        \
        pr = (const int16_t *)(const void *)((const char *)(pr) + e_step);                                      \
    } while (0)
#endif /* MT_DSP_NATIVE */

/* The four accumulators over the covering output rows of an interior input whose first tap's errors
   are at e_at: `taps` walks one kernel row (pr along the errors, pw at its weights). */
#define BWD_IN_ROWS(taps)                                                                                        \
    do {                                                                                                         \
        int32_t rr_, ei_ = e_at, wi_ = w_at;                                                                     \
        a0 = a1 = a2 = a3 = 0;                                                                                   \
        for (rr_ = rows; rr_ > 0; --rr_, ei_ += row_step, wi_ -= wrow_step) {                                    \
            const int16_t *pr = e16 + ei_;                                                                       \
            const int32_t *pw = wq + wi_;                                                                        \
            taps;                                                                                                \
        }                                                                                                        \
    } while (0)

/* K taps of a stride-2 kernel row: columns j0, j0 - 2, ... (weights 16 bytes apart) at successive outputs. */
#define BWD_IN_S2_TAPS(K)                                                                                        \
    do {                                                                                                         \
        BWD_IN_STEP(pr, pw, 0);                                                                                  \
        if ((K) >= 2) {                                                                                          \
            BWD_IN_STEP(pr, pw, -16);                                                                            \
        }                                                                                                        \
        if ((K) >= 3) {                                                                                          \
            BWD_IN_STEP(pr, pw, -32);                                                                            \
        }                                                                                                        \
        if ((K) >= 4) {                                                                                          \
            BWD_IN_STEP(pr, pw, -48);                                                                            \
        }                                                                                                        \
    } while (0)

/* The extremes of one input's four accumulators a0..a3, then (store) their errors as one word at dst. */
#define BWD_IN_EMIT_AT(dst)                                                                                      \
    do {                                                                                                         \
        BWD_IN_RANGE(a0);                                                                                        \
        BWD_IN_RANGE(a1);                                                                                        \
        BWD_IN_RANGE(a2);                                                                                        \
        BWD_IN_RANGE(a3);                                                                                        \
        if (store) {                                                                                             \
            mt_write_s8x4((dst), bwd_in_pack_err(a0, a1, a2, a3, multiplier, rsh, c1));                          \
        }                                                                                                        \
    } while (0)

/* BWD_IN_EMIT_AT for input x of the quad loop's row. */
#define BWD_IN_EMIT() BWD_IN_EMIT_AT(e_x + row_at + x * c_n)

/*
 * The output stage of the quad bodies (bip_*, bir_*, bis_*, bik_*), out of line over a block of
 * inputs: each input's four channels' accumulators (channel k at acc + k * S bytes), their extremes
 * merged, then (store) their errors as one word (bwd_in_pack_err), dst stepping by c_n. On a
 * native core it is one assembly loop with every register its own (a C loop inside the bodies
 * spilled the extremes and the requantization constants around each input).
 * The extremes are (tb, span) = (vmin, vmax - vmin): a value a outside them (unsigned a - tb >
 * span) extends them downwards (a < tb) or upwards, the order of the merges immaterial. An empty
 * starting range has no such form: the first value of the first block is merged into (*lo, *hi)
 * in C first (bwd_in_emit_seed), as the reference's min / max would.
 * The assembly tests the four values of an input at once, on their high halfwords (two PKHTB, then
 * two SSUB16 / UQSUB16 against the window (L, W) and one ORRS): a value whose high half lies in
 * [L, L + W] = [(vmin >> 16) + 1, (vmax >> 16) - 1] is strictly inside the extremes, so it
 * changes nothing; only when some value is not, all four take the exact merge (and the window is
 * recomputed). NOTE: |acc| <= MT_DW_TAPS_MAX * 32512 * 127 < 2^28, so a high half is never
 * -32768, the window (L, W) = (-32768, 0) of extremes less than 2^17 apart passes nothing.
 */
typedef struct {
    uint32_t win_l, win_w; /* the fast test's window: (L, L) and (W, W) as halfword pairs */
    int32_t m, c1;         /* the prepared requantization (bwd_in_pack_err) */
    int32_t step_sh;       /* (c_n << 8) | rsh: the store's step and, in its low byte, the shift (ASR reads it) */
    uint32_t tb, span;     /* the extremes so far: [tb, tb + span] as int32 */
    int32_t empty;         /* 1 until a value was merged into an empty (*lo > *hi) start */
    int32_t exact64;       /* 1: the requantization needs its 64-bit rounding term (bwd_in_emit_mm_ok) */
} bwd_in_emit_t;

/* Layout check for the assembly (fields at 0, 4, ..., 28). */
typedef char bwd_in_emit_layout[sizeof(bwd_in_emit_t) == 36 ? 1 : -1];

/*
 * 1 when SMMLA (the high word of acc * m + c1 * 2^32, truncated) equals the prepared form's SMLAL
 * onto (c1 + neg, neg) for every accumulator, saving two instructions an error: the two differ only
 * for acc < 0 with acc * m a multiple of 2^32, and |acc| < 2^28 (at most 49 products of an int16
 * and an int8, each below 2^22) has at most 27 factors of two, so a multiplier with at most four
 * (m & 31 nonzero) never makes one.
 */
MT_INLINE int bwd_in_emit_mm_ok(int32_t multiplier)
{
    return (multiplier & 31) != 0;
}

/* The fast test's window of the extremes (see above). */
MT_INLINE void bwd_in_emit_window(bwd_in_emit_t *st)
{
    const int32_t l = ((int32_t)st->tb >> 16) + 1, h = ((int32_t)(st->tb + st->span) >> 16) - 1;
    const uint32_t wl = h >= l ? (uint32_t)l & 0xFFFFu : 0x8000u, ww = h >= l ? (uint32_t)(h - l) : 0u;
    st->win_l = wl | (wl << 16);
    st->win_w = ww | (ww << 16);
}

MT_INLINE void bwd_in_emit_init(bwd_in_emit_t *st, int32_t lo, int32_t hi, int32_t multiplier, int32_t rsh,
                                int32_t c1, int32_t c_n)
{
    st->tb = (uint32_t)lo;
    st->span = (uint32_t)hi - (uint32_t)lo;
    st->empty = lo > hi;
    st->m = multiplier;
    st->c1 = c1;
    st->step_sh = (int32_t)(((uint32_t)c_n << 8) | (uint32_t)rsh);
    st->win_l = 0x80008000u; /* nothing passes until the start is seeded */
    st->win_w = 0;
    st->exact64 = !bwd_in_emit_mm_ok(multiplier);
    if (!st->empty) {
        bwd_in_emit_window(st);
    }
}

/* The extremes back into (*lo, *hi); untouched when nothing was merged. */
MT_INLINE void bwd_in_emit_done(const bwd_in_emit_t *st, int32_t *lo, int32_t *hi)
{
    if (!st->empty) {
        *lo = (int32_t)st->tb;
        *hi = (int32_t)(st->tb + st->span);
    }
}

/* An empty start: (*lo, *hi) merged with value a the reference's way (min and max), after which
   vmin <= vmax has the (tb, span) form. */
static MT_NOINLINE void bwd_in_emit_seed(bwd_in_emit_t *st, int32_t a)
{
    const int32_t lo = (int32_t)st->tb, hi = (int32_t)(st->tb + st->span);
    const int32_t vmin = a < lo ? a : lo, vmax = a > hi ? a : hi;
    st->tb = (uint32_t)vmin;
    st->span = (uint32_t)vmax - (uint32_t)vmin;
    st->empty = 0;
    bwd_in_emit_window(st);
}

#if defined(MT_DSP_NATIVE) && defined(__GNUC__)
/* The four channels' accumulators of one input: r12, r9, r10, r11 (acc r0 moves to the next input). */
#define BWD_IN_ASM_LOAD(S)                                                                                       \
    "ldr r9, [r0, #" #S "]\n\tldr r10, [r0, #(2 * " #S ")]\n\tldr r11, [r0, #(3 * " #S ")]\n\tldr r12, [r0], #4\n\t"
/* The windowed test of the four (r4 (L, L), r5 (W, W)): on to label 6 when some value is not inside. */
#define BWD_IN_ASM_TEST                                                                                          \
    "pkhtb lr, r9, r12, asr #16\n\tpkhtb r3, r11, r10, asr #16\n\t"                                            \
    "ssub16 lr, lr, r4\n\tssub16 r3, r3, r4\n\tuqsub16 lr, lr, r5\n\tuqsub16 r3, r3, r5\n\t"                \
    "orrs lr, lr, r3\n\tbne 6f\n\t5:\n\t"
/* The exact merge of R into (tb, span) = (r4, r5) (label L local). */
#define BWD_IN_ASM_MERGE(R, L)                                                                                   \
    "sub lr, " R ", r4\n\tcmp lr, r5\n\tbls " L "f\n\tcmp " R ", r4\n\tbge " L "1f\n\t"                      \
    "sub lr, r4, " R "\n\tadd r5, r5, lr\n\tmov r4, " R "\n\tb " L "f\n\t" L "1:\n\tsub r5, " R ", r4\n\t" L  \
    ":\n\t"
/* Label 6, after the loop: the four values merged exactly into st's extremes (st at [sp]), the
   window recomputed (bwd_in_emit_window), back to label 5. */
#define BWD_IN_ASM_SLOW                                                                                          \
    "6:\n\tldr r3, [sp]\n\tldrd r4, r5, [r3, #20]\n\t" BWD_IN_ASM_MERGE("r12", "70")                         \
    BWD_IN_ASM_MERGE("r9", "71") BWD_IN_ASM_MERGE("r10", "72") BWD_IN_ASM_MERGE("r11", "73")                 \
    "strd r4, r5, [r3, #20]\n\t"                                                                                \
    "add lr, r4, r5\n\tasr lr, lr, #16\n\tsub lr, lr, #1\n\t"   /* h */                                    \
    "asr r4, r4, #16\n\tadd r4, r4, #1\n\tsubs r5, lr, r4\n\t"  /* l, h - l */                             \
    "itt lt\n\tmovlt r4, #0x8000\n\tmovlt r5, #0\n\t"                                                         \
    "pkhbt r4, r4, r4, lsl #16\n\tpkhbt r5, r5, r5, lsl #16\n\tstrd r4, r5, [r3]\n\tb 5b\n\t"
/* The prepared requantization of R into [-128, 127] (mt_requantize_fast_single: r6 m, r7 c1, r8 rsh). */
#define BWD_IN_ASM_REQ(R) "asr lr, " R ", #31\n\tadd r3, r7, lr\n\tsmlal lr, r3, " R ", r6\n\tasr " R ", r3, r8\n\tssat " R ", #8, " R "\n\t"
/* The same in three instructions where bwd_in_emit_mm_ok holds: SMMLA onto c1, then the shift and SSAT. */
#define BWD_IN_ASM_REQ_MM(R) "smmla " R ", " R ", r6, r7\n\tasr " R ", " R ", r8\n\tssat " R ", #8, " R "\n\t"
#define BWD_IN_ARG __attribute__((unused))

/*
 * bwd_in_emit_* (acc r0, dst r1, n r2 > 0, st r3): 34 instructions per input (4 loads, the 8 of the
 * test, 4 x 3 requantization (SMMLA; 4 x 5 with SMLAL, the _ml twins), 3 BFI to pack, 3 to clamp to
 * -127, the store and the loop), 14 for the range only.
 */
#define BWD_IN_EMIT_FN(NAME, S, REQ)                                                                             \
    static void __attribute__((naked, noinline)) NAME(const int32_t *acc BWD_IN_ARG, int8_t *dst BWD_IN_ARG,  \
                                                      int32_t n BWD_IN_ARG, bwd_in_emit_t *st BWD_IN_ARG)      \
    {                                                                                                           \
        __asm__ volatile(".syntax unified\n\t"                                                                  \
                         "push {r3, r4, r5, r6, r7, r8, r9, r10, r11, lr}\n\t"                                  \
                         "ldm r3, {r4, r5, r6, r7, r8}\n\t"                                                     \
                         "add r2, r0, r2, lsl #2\n\t"                                                           \
                         "1:\n\t" BWD_IN_ASM_LOAD(S) BWD_IN_ASM_TEST REQ("r12") REQ("r9") REQ("r10") REQ("r11") \
                         "bfi r12, r9, #8, #8\n\t"                                                              \
                         "bfi r12, r10, #16, #8\n\t"                                                            \
                         "bfi r12, r11, #24, #8\n\t"                                                            \
                         "mov r9, #0x81818181\n\t" /* -128 raised to -127: a SIMD maximum */                 \
                         "ssub8 r10, r12, r9\n\t"                                                               \
                         "sel r12, r12, r9\n\t"                                                                 \
                         "str r12, [r1]\n\t"                                                                    \
                         "add r1, r1, r8, lsr #8\n\t"                                                           \
                         "cmp r0, r2\n\t"                                                                       \
                         "bne 1b\n\t"                                                                           \
                         "pop {r3, r4, r5, r6, r7, r8, r9, r10, r11, pc}\n\t" BWD_IN_ASM_SLOW);               \
    }
#define BWD_IN_RANGE_FN(NAME, S)                                                                                 \
    static void __attribute__((naked, noinline)) NAME(const int32_t *acc BWD_IN_ARG,                   \
                                                              int8_t *dst BWD_IN_ARG, int32_t n BWD_IN_ARG,    \
                                                              bwd_in_emit_t *st BWD_IN_ARG)                    \
    {                                                                                                           \
        __asm__ volatile(".syntax unified\n\t"                                                                  \
                         "push {r3, r4, r5, r9, r10, r11, r12, lr}\n\t"                                         \
                         "ldm r3, {r4, r5}\n\t"                                                                 \
                         "add r2, r0, r2, lsl #2\n\t"                                                           \
                         "1:\n\t" BWD_IN_ASM_LOAD(S) BWD_IN_ASM_TEST                                            \
                         "cmp r0, r2\n\t"                                                                       \
                         "bne 1b\n\t"                                                                           \
                         "pop {r3, r4, r5, r9, r10, r11, r12, pc}\n\t" BWD_IN_ASM_SLOW);                      \
    }
BWD_IN_EMIT_FN(bwd_in_emit_s64, 64, BWD_IN_ASM_REQ_MM)
BWD_IN_EMIT_FN(bwd_in_emit_s260, 260, BWD_IN_ASM_REQ_MM)
BWD_IN_EMIT_FN(bwd_in_emit_s64_ml, 64, BWD_IN_ASM_REQ)
BWD_IN_EMIT_FN(bwd_in_emit_s260_ml, 260, BWD_IN_ASM_REQ)
BWD_IN_RANGE_FN(bwd_in_emit_s64_range, 64)
BWD_IN_RANGE_FN(bwd_in_emit_s260_range, 260)
#undef BWD_IN_ARG
#endif /* MT_DSP_NATIVE && __GNUC__ */

/* The output stage over n inputs (see above), its accumulators' channel stride S bytes (64 or 260). */
MT_INLINE void bwd_in_emit(const int32_t *acc, int8_t *dst, int32_t n, bwd_in_emit_t *st, const int S,
                           const int store)
{
    if (n <= 0) {
        return;
    }
    if (st->empty) {
        bwd_in_emit_seed(st, acc[0]);
    }
#if defined(MT_DSP_NATIVE) && defined(__GNUC__)
    if (S == 64) {
        if (store && st->exact64) {
            bwd_in_emit_s64_ml(acc, dst, n, st);
        } else if (store) {
            bwd_in_emit_s64(acc, dst, n, st);
        } else {
            bwd_in_emit_s64_range(acc, dst, n, st);
        }
    } else {
        if (store && st->exact64) {
            bwd_in_emit_s260_ml(acc, dst, n, st);
        } else if (store) {
            bwd_in_emit_s260(acc, dst, n, st);
        } else {
            bwd_in_emit_s260_range(acc, dst, n, st);
        }
    }
#else  /* !MT_DSP_NATIVE: the same stage in C */
    {
        const int32_t S4 = S / 4, c_n = (int32_t)((uint32_t)st->step_sh >> 8), rsh = st->step_sh & 0xFF;
        const int32_t multiplier = st->m, c1 = st->c1;
        int32_t vmin = (int32_t)st->tb, vmax = (int32_t)(st->tb + st->span);
        uint32_t tb = st->tb, span = st->span;
        for (; n > 0; --n, ++acc, dst += c_n) {
            const int32_t a0 = acc[0], a1 = acc[S4], a2 = acc[2 * S4], a3 = acc[3 * S4];
            BWD_IN_RANGE(a0);
            BWD_IN_RANGE(a1);
            BWD_IN_RANGE(a2);
            BWD_IN_RANGE(a3);
            if (store) {
                mt_write_s8x4(dst, bwd_in_pack_err(a0, a1, a2, a3, multiplier, rsh, c1));
            }
        }
        (void)vmax;
        st->tb = tb;
        st->span = span;
    }
#endif /* MT_DSP_NATIVE && __GNUC__ */
}

/*
 * Channels [c0, c0 + 4) to int8 errors with the prepared requantization (bwd_in_fast_ok): the loop
 * of bwd_in_channels without its float32 and general-requantization branches, so that its
 * registers hold the four accumulators and the walk only. Per input position: the covering output
 * rows and columns, their taps (a row of output columns walks the errors by c_n and the unpacked
 * weights by -2 sw), then the four errors requantized, clamped to [-127, 127] in one SIMD maximum
 * and stored as one word, and the extremes merged (BWD_IN_RANGE).
 * NOTE: |acc| <= MT_DW_TAPS_MAX * 32512 * 127 < 2^31 - 1, so no accumulator is INT32_MIN: an
 * empty starting range (*lo > *hi, e.g. INT32_MAX / INT32_MIN) is the test (INT32_MIN, 0), which
 * lets every first value through to the exact merge, after which vmin <= vmax.
 */
MT_INLINE void bwd_in_quad_s8_body(const mt_conv_params *p, const mt_dims *out_d, const int16_t *e16,
                                   const mt_dims *f_d, const int8_t *filter, const mt_dims *in_d,
                                   int32_t multiplier, int32_t shift, int8_t *e_x, int32_t *lo, int32_t *hi,
                                   int32_t c0, const int store)
{
    const int32_t h = in_d->h, w = in_d->w, c_n = in_d->c;
    const int32_t kh = f_d->h, kw = f_d->w, kk = kh * kw;
    const int32_t ho = out_d->h, wo = out_d->w, sh = p->stride_h, sw = p->stride_w;
    const int32_t rsh = store ? -1 - shift : 1, c1 = (int32_t)((uint32_t)1 << (rsh - 1));
    const int32_t e_step = 2 * c_n; /* bytes from one output position's errors to the next */
    const int32_t row_step = wo * c_n, wrow_step = 2 * sh * kw, wcol_step = 2 * sw;
    /* stride 1 and 2: the inputs [x_a, x_b) whose covering output columns need no clamp (unrolled taps) */
    const int32_t x_a = kw - 1 - p->pad_left;
    const int32_t x_b = (kw == 3 || kw == 5 || kw == 7) && sw <= 2 ? sw * wo - p->pad_left : x_a;
    int32_t wq[2 * MT_DW_TAPS_MAX];
    int32_t vmin = *lo, vmax = *hi;
    uint32_t tb = vmin <= vmax ? (uint32_t)vmin : (uint32_t)INT32_MIN;
    uint32_t span = vmin <= vmax ? (uint32_t)vmax - (uint32_t)vmin : 0u;
    int32_t t, n, y, x;
    int32_t r[4];
    mt_dw_used_taps(p, in_d, f_d, out_d, r);
    for (t = 0; t < kk; ++t) {
        const int8_t *f = filter + c0 * kk + t;
        if (t / kw < r[0] || t / kw >= r[1] || t % kw < r[2] || t % kw >= r[3]) {
            continue; /* a tap that links no input to an output: never read */
        }
        wq[2 * t] = (int32_t)(((uint32_t)(int32_t)f[0] & 0xFFFFu) | ((uint32_t)(int32_t)f[kk] << 16));
        wq[2 * t + 1] = (int32_t)(((uint32_t)(int32_t)f[2 * kk] & 0xFFFFu) | ((uint32_t)(int32_t)f[3 * kk] << 16));
    }
    for (n = 0; n < in_d->n; ++n) {
        for (y = 0; y < h; ++y) {
            int32_t oy_lo, oy_hi, e_row, w_row, rows;
            const int32_t row_at = ((n * h + y) * w) * c_n + c0;
            bwd_in_covering(y, p->pad_top, sh, kh, ho, &oy_lo, &oy_hi);
            rows = oy_hi - oy_lo + 1;
            e_row = (n * ho + oy_lo) * row_step + c0;                           /* offsets, not pointers: */
            w_row = 2 * (y + p->pad_top - sh * oy_lo) * kw + 2 * p->pad_left; /* no row may exist */
            for (x = 0; x < w;) {
                int32_t a0, a1, a2, a3, ox_lo, ox_hi, cols;
                if (sw == 1 && rows > 0 && x >= x_a && x < x_b) {
                    /* a run of inputs that every kernel column covers: ox = x + pad_left - j for
                       j = kw - 1 ... 0, whole kernel rows (3, 5 and 7 taps, one loop each) */
                    const int32_t x_end = x_b < w ? x_b : w, w_at = w_row + 2 * (kw - 1 - p->pad_left);
                    int32_t e_at = e_row + (x + p->pad_left - kw + 1) * c_n;
                    if (kw == 3) {
                        for (; x < x_end; ++x, e_at += c_n) {
                            BWD_IN_ROWS(BWD_IN_STEP(pr, pw, 0); BWD_IN_STEP(pr, pw, -8); BWD_IN_STEP(pr, pw, -16));
                            BWD_IN_EMIT();
                        }
                    } else if (kw == 5) {
                        for (; x < x_end; ++x, e_at += c_n) {
                            BWD_IN_ROWS(BWD_IN_STEP(pr, pw, 0); BWD_IN_STEP(pr, pw, -8); BWD_IN_STEP(pr, pw, -16);
                                        BWD_IN_STEP(pr, pw, -24); BWD_IN_STEP(pr, pw, -32));
                            BWD_IN_EMIT();
                        }
                    } else {
                        for (; x < x_end; ++x, e_at += c_n) {
                            BWD_IN_ROWS(BWD_IN_STEP(pr, pw, 0); BWD_IN_STEP(pr, pw, -8); BWD_IN_STEP(pr, pw, -16);
                                        BWD_IN_STEP(pr, pw, -24); BWD_IN_STEP(pr, pw, -32);
                                        BWD_IN_STEP(pr, pw, -40); BWD_IN_STEP(pr, pw, -48));
                            BWD_IN_EMIT();
                        }
                    }
                    continue;
                }
                if (sw == 2 && rows > 0 && x >= x_a && x < x_b) {
                    /* stride 2: input x links the kernel columns j = j0, j0 - 2, ... of one parity; j0 = kw - 1
                       (the longer run, (kw + 1) / 2 taps) or kw - 2, alternately */
                    const int32_t x_end = x_b < w ? x_b : w;
                    for (; x < x_end; ++x) {
                        const int32_t t_x = x + p->pad_left, longer = ((t_x - kw + 1) & 1) == 0;
                        const int32_t j0 = longer ? kw - 1 : kw - 2;
                        const int32_t e_at = e_row + ((t_x - j0) >> 1) * c_n;
                        const int32_t w_at = w_row + 2 * (j0 - p->pad_left);
                        if (kw == 3) {
                            if (longer) {
                                BWD_IN_ROWS(BWD_IN_S2_TAPS(2));
                            } else {
                                BWD_IN_ROWS(BWD_IN_S2_TAPS(1));
                            }
                        } else if (kw == 5) {
                            if (longer) {
                                BWD_IN_ROWS(BWD_IN_S2_TAPS(3));
                            } else {
                                BWD_IN_ROWS(BWD_IN_S2_TAPS(2));
                            }
                        } else {
                            if (longer) {
                                BWD_IN_ROWS(BWD_IN_S2_TAPS(4));
                            } else {
                                BWD_IN_ROWS(BWD_IN_S2_TAPS(3));
                            }
                        }
                        BWD_IN_EMIT();
                    }
                    continue;
                }
                a0 = a1 = a2 = a3 = 0; /* a border input, or any stride: the covering outputs, visited */
                bwd_in_covering(x, p->pad_left, sw, kw, wo, &ox_lo, &ox_hi);
                cols = ox_hi - ox_lo + 1;
                if (rows > 0 && cols > 0) {
                    int32_t e_at = e_row + ox_lo * c_n;
                    int32_t wi0 = w_row + 2 * (x - sw * ox_lo); /* tap (i, x + pad_left - sw * ox_lo) */
                    int32_t rr;
                    for (rr = rows; rr > 0; --rr, e_at += row_step, wi0 -= wrow_step) {
                        const int16_t *pe = e16 + e_at;
                        int32_t wi = wi0, k;
                        for (k = cols; k > 0; --k, pe += c_n, wi -= wcol_step) {
                            BWD_IN_TAP(pe, wq + wi);
                        }
                    }
                }
                BWD_IN_EMIT();
                ++x;
            }
        }
    }
    *lo = vmin;
    *hi = vmax;
}

/* The loop out of line, with int8 errors and range only (e_x NULL: a first step's range pass). */
static MT_NOINLINE void bwd_in_quad_s8(const mt_conv_params *p, const mt_dims *out_d, const int16_t *e16,
                                       const mt_dims *f_d, const int8_t *filter, const mt_dims *in_d,
                                       int32_t multiplier, int32_t shift, int8_t *e_x, int32_t *lo, int32_t *hi,
                                       int32_t c0)
{
    bwd_in_quad_s8_body(p, out_d, e16, f_d, filter, in_d, multiplier, shift, e_x, lo, hi, c0, 1);
}

static MT_NOINLINE void bwd_in_quad_range(const mt_conv_params *p, const mt_dims *out_d, const int16_t *e16,
                                          const mt_dims *f_d, const int8_t *filter, const mt_dims *in_d,
                                          int32_t *lo, int32_t *hi, int32_t c0)
{
    bwd_in_quad_s8_body(p, out_d, e16, f_d, filter, in_d, 0, 0, 0, lo, hi, c0, 0);
}

/*
 * Small maps (at most 16 input positions and MT_BIP_PAIRS output position pairs, e.g. 4x4 and 2x2
 * maps): a plane body. Input (y, x) sums e[oy, ox] * w[y + pad - s oy, x + pad - s ox] over every
 * output position, so with the errors of a channel as position pairs (e[oy, 2q], e[oy, 2q + 1])
 * in registers, one SMLAD per pair takes the weight pair (w[i, j], w[i, j - s]). The weights of
 * each channel are laid out once per quad in a zero-padded int16 plane, rows by i and columns in
 * reverse order of j (at stride 2 each row as its even, then its odd columns), so that every such
 * pair is one LDR at an offset fixed per (oy, q), weights outside the kernel zeros (they add
 * nothing, as the taps the reference skips). Per channel the accumulators of all inputs go to a
 * small block, then each input's four channels take the requantization, clamp, store and
 * extremes of the quad loop (BWD_IN_RANGE, bwd_in_pack_err).
 */
#define MT_BIP_COLS 16  /* int16 columns of a weight-plane row (stride 2: 8 of each parity) */
#define MT_BIP_ROWS 10  /* weight-plane rows: h + s (ho - 1) <= 10 */
#define MT_BIP_PAIRS 8  /* output position pairs: 4 rows of 2 */
#define MT_BIP_INPUTS 16 /* input positions of a sample */
#define MT_BIP_PLANE (MT_BIP_ROWS * MT_BIP_COLS)

/* The int16 offset of reversed column k in a weight-plane row at stride s (1 or 2). */
MT_INLINE int32_t bip_col(int32_t k, int32_t s)
{
    return s == 1 ? k : (k & 1) * (MT_BIP_COLS / 2) + (k >> 1);
}

/* Whether the plane body takes the layer (see above). Not a single output at stride 1 with at most
 * 25 taps: its one tap per input is cheaper in the quad loop (MCUNet-5FPS's 1x1 maps at 32x32, M4,
 * with the assembly output stage: 3x3 16.8 -> 14.5 instructions/MAC; 5x5 on par, 7.2 against 7.4);
 * a 7x7 kernel or stride 2 keeps the plane (measured before that stage: 4.8 against 5.3, 8.0
 * against 20.0). */
static int bip_fits(const mt_conv_params *p, const mt_dims *in_d, const mt_dims *out_d, const mt_dims *f_d)
{
    const int32_t s = p->stride_h, nq = (out_d->w + 1) / 2;
    const int one_tap = s == 1 && out_d->h * out_d->w == 1 && f_d->h * f_d->w <= 25;
    return s == p->stride_w && s <= 2 && !one_tap && out_d->h * nq <= MT_BIP_PAIRS &&
           in_d->h * in_d->w <= MT_BIP_INPUTS &&
           in_d->h + s * (out_d->h - 1) <= MT_BIP_ROWS && in_d->w + s * (2 * nq - 1) <= MT_BIP_COLS &&
           f_d->h * f_d->w <= MT_DW_TAPS_MAX;
}

/* Per kernel tap t: the int16 offset of w[i, j] in a channel's weight plane (row i - i_min with
 * i_min = pad_top - s (ho - 1), reversed column k = w - 1 + pad_left - j), or -1 when no input
 * and output reach it. */
static void bip_list_taps(const mt_conv_params *p, const mt_dims *in_d, const mt_dims *out_d, const mt_dims *f_d,
                          int32_t *at)
{
    const int32_t s = p->stride_h, nq = (out_d->w + 1) / 2;
    const int32_t rows = in_d->h + s * (out_d->h - 1), cols = in_d->w + s * (2 * nq - 1);
    int32_t i, j;
    for (i = 0; i < f_d->h; ++i) {
        for (j = 0; j < f_d->w; ++j) {
            const int32_t r = i - (p->pad_top - s * (out_d->h - 1)), k = in_d->w - 1 + p->pad_left - j;
            at[i * f_d->w + j] = r >= 0 && r < rows && k >= 0 && k < cols ? r * MT_BIP_COLS + bip_col(k, s) : -1;
        }
    }
}

/* The weights of channels [c0, c0 + 4) (f: channel c0's) into their planes (channel c0 + c at
 * pl + c * MT_BIP_PLANE), at the offsets of bip_list_taps. */
static void bip_weights(const int8_t *f, const int32_t *at, int32_t kk, int16_t *pl)
{
    int32_t t;
    for (t = 0; t < kk; ++t, ++f) {
        if (at[t] >= 0) {
            int16_t *d = pl + at[t];
            d[0] = f[0];
            d[MT_BIP_PLANE] = f[kk];
            d[2 * MT_BIP_PLANE] = f[2 * kk];
            d[3 * MT_BIP_PLANE] = f[3 * kk];
        }
    }
}

/* One sample's int16 errors of channels [c0, c0 + 4) (eb: its first at c0) as position pairs,
 * ep[c * MT_BIP_PAIRS + n] for pair n = oy * nq + q (an odd last one with a zero partner). With an
 * even wo the caller passes the map as one row (no pair crosses a row). */
static void bip_errors(const int16_t *eb, int32_t ho, int32_t wo, int32_t c_n, int32_t *ep)
{
    int32_t oy, ox;
    for (oy = 0; oy < ho; ++oy) {
        const int16_t *pe = eb + oy * wo * c_n;
        for (ox = 0; ox < wo; ox += 2, pe += 2 * c_n, ++ep) {
            const int32_t a01 = mt_read_s16x2(pe), a23 = mt_read_s16x2(pe + 2);
            const int32_t b01 = ox + 1 < wo ? mt_read_s16x2(pe + c_n) : 0;
            const int32_t b23 = ox + 1 < wo ? mt_read_s16x2(pe + c_n + 2) : 0;
            ep[0] = mt_pkhbt(a01, b01);
            ep[MT_BIP_PAIRS] = mt_pkhtb(a01, b01);
            ep[2 * MT_BIP_PAIRS] = mt_pkhbt(a23, b23);
            ep[3 * MT_BIP_PAIRS] = mt_pkhtb(a23, b23);
        }
    }
}

/* The accumulators of one channel's h x w inputs into acc (row-major; pl: its weight plane, ec:
 * its np error pairs, nq to an output row). */
static void bip_sums(const int16_t *pl, const int32_t *ec, int32_t np, int32_t nq, int32_t s, int32_t h, int32_t w,
                     int32_t ho, int32_t *acc)
{
    int32_t y, x, n;
    for (y = 0; y < h; ++y) {
        for (x = 0; x < w; ++x, ++acc) {
            const int16_t *pb = pl + (y + s * (ho - 1)) * MT_BIP_COLS + bip_col(w - 1 - x, s);
            int32_t a = 0;
            for (n = 0; n < np; ++n) {
                a = mt_smlad(mt_read_s16x2(pb - s * (n / nq) * MT_BIP_COLS + 2 * (n % nq)), ec[n], a);
            }
            *acc = a;
        }
    }
}

#if defined(MT_DSP_NATIVE)
/*
 * The native sums of the common small maps: an input row of W unrolled (assembler .rept, bip_x the
 * column, bip_col the byte offset of its reversed column), its pairs' offsets immediates: one LDR
 * and one SMLAD (the first an SMUAD) per position pair, one STR per input, four per row.
 */
typedef void (*bip_sums_fn)(const int16_t *p, const int32_t *ec, int32_t *acc, const int32_t *acc_end);

#define BIP_COL1 "(2 * (bip_w - 1 - bip_x))"
#define BIP_COL2 "(((bip_w - 1 - bip_x) & 1) * 16 + ((bip_w - 1 - bip_x) >> 1) * 2)"
#define BIP_MUL(OP, OFF, E) "ldr %[t], [%[p], #bip_col + " OFF "]\n\t" OP " %[a], %[t], %[" E "]"
#define BIP_MAC(OFF, E) BIP_MUL("smlad", OFF, E) ", %[a]\n\t"
#define BIP_SUMS_ASM(W, S, COL, PAIRS)                                                                      \
    ".set bip_rs, " #S " * 32\n\t"                                                                          \
    ".set bip_w, " #W "\n\t"                                                                                \
    "1:\n\t"                                                                                                \
    ".set bip_x, 0\n\t"                                                                                     \
    ".rept " #W "\n\t"                                                                                      \
    ".set bip_col, " COL "\n\t" PAIRS "str %[a], [%[acc]], #4\n\t"                                          \
    ".set bip_x, bip_x + 1\n\t"                                                                             \
    ".endr\n\t"                                                                                             \
    "add %[p], %[p], #32\n\t"                                                                               \
    "cmp %[acc], %[ae]\n\t"                                                                                 \
    "bne 1b"
/* 4 output rows of 2 pairs: pair n = 2 oy + q at -oy * bip_rs + 4 q */
#define BIP_PAIRS8                                                                                          \
    BIP_MUL("smuad", "0", "e0") "\n\t" BIP_MAC("4", "e1") BIP_MAC("-bip_rs", "e2") BIP_MAC("-bip_rs + 4", "e3") \
        BIP_MAC("-2 * bip_rs", "e4") BIP_MAC("-2 * bip_rs + 4", "e5") BIP_MAC("-3 * bip_rs", "e6")           \
            BIP_MAC("-3 * bip_rs + 4", "e7")
/* 2 output rows of 1 pair */
#define BIP_PAIRS2 BIP_MUL("smuad", "0", "e0") "\n\t" BIP_MAC("-bip_rs", "e1")
#define BIP_SUMS8(NAME, W, S, COL)                                                                          \
    static void NAME(const int16_t *p, const int32_t *ec, int32_t *acc, const int32_t *acc_end)            \
    {                                                                                                       \
        const int32_t e0 = ec[0], e1 = ec[1], e2 = ec[2], e3 = ec[3], e4 = ec[4], e5 = ec[5], e6 = ec[6],  \
                      e7 = ec[7];                                                                          \
        int32_t a, t;                                                                                       \
        __asm__ volatile(BIP_SUMS_ASM(W, S, COL, BIP_PAIRS8)                                                \
                         : [p] "+r"(p), [acc] "+r"(acc), [a] "=&r"(a), [t] "=&r"(t)                        \
                         : [e0] "r"(e0), [e1] "r"(e1), [e2] "r"(e2), [e3] "r"(e3), [e4] "r"(e4), [e5] "r"(e5), \
                           [e6] "r"(e6), [e7] "r"(e7), [ae] "r"(acc_end)                                   \
                         : "cc", "memory");                                                                 \
    }
#define BIP_SUMS2(NAME, W, S, COL)                                                                          \
    static void NAME(const int16_t *p, const int32_t *ec, int32_t *acc, const int32_t *acc_end)            \
    {                                                                                                       \
        const int32_t e0 = ec[0], e1 = ec[1];                                                               \
        int32_t a, t;                                                                                       \
        __asm__ volatile(BIP_SUMS_ASM(W, S, COL, BIP_PAIRS2)                                                \
                         : [p] "+r"(p), [acc] "+r"(acc), [a] "=&r"(a), [t] "=&r"(t)                        \
                         : [e0] "r"(e0), [e1] "r"(e1), [ae] "r"(acc_end)                                    \
                         : "cc", "memory");                                                                 \
    }

BIP_SUMS8(bip_sums8_w4s1, 4, 1, BIP_COL1)
BIP_SUMS2(bip_sums2_w2s1, 2, 1, BIP_COL1)
BIP_SUMS2(bip_sums2_w4s2, 4, 2, BIP_COL2)

/* The native sums for ho output rows of nq pairs, input rows of w, stride s; 0: none (bip_sums). */
static bip_sums_fn bip_native(int32_t ho, int32_t nq, int32_t w, int32_t s)
{
    if (ho == 4 && nq == 2 && w == 4 && s == 1) {
        return bip_sums8_w4s1;
    }
    if (ho == 2 && nq == 1) {
        return w == 2 && s == 1 ? bip_sums2_w2s1 : w == 4 && s == 2 ? bip_sums2_w4s2 : 0;
    }
    return 0;
}
#endif /* MT_DSP_NATIVE */

/* Every channel quad of a layer bip_fits takes, to int8 errors with the prepared requantization
 * (store) or range only; the channels past the last quad are the caller's. */
MT_INLINE void bip_quads_body(const mt_conv_params *p, const mt_dims *out_d, const int16_t *e16, const mt_dims *f_d,
                              const int8_t *filter, const mt_dims *in_d, int32_t multiplier, int32_t shift,
                              int8_t *e_x, int32_t *lo, int32_t *hi, const int store)
{
    const int32_t h = in_d->h, w = in_d->w, c_n = in_d->c, kk = f_d->h * f_d->w, hw = h * w;
    const int32_t ho = out_d->h, wo = out_d->w, s = p->stride_h, nq = (wo + 1) / 2, np = ho * nq;
    const int32_t rsh = store ? -1 - shift : 1, c1 = (int32_t)((uint32_t)1 << (rsh - 1));
    const int32_t e_rows = wo & 1 ? ho : 1, e_cols = wo & 1 ? wo : ho * wo; /* errors as one row when even */
#if defined(MT_DSP_NATIVE)
    const bip_sums_fn sums_fn = bip_native(ho, nq, w, s);
#endif
    int16_t pl[4 * MT_BIP_PLANE]; /* zeros where no tap is, written once; each quad rewrites the taps */
    int32_t at[MT_DW_TAPS_MAX], ep[4 * MT_BIP_PAIRS], acc[4 * MT_BIP_INPUTS];
    bwd_in_emit_t st;
    int32_t c0, n, k;
    bwd_in_emit_init(&st, *lo, *hi, multiplier, rsh, c1, c_n);
    bip_list_taps(p, in_d, out_d, f_d, at);
    memset(pl, 0, sizeof pl);
    for (c0 = 0; c0 + 4 <= c_n; c0 += 4) {
        bip_weights(filter + c0 * kk, at, kk, pl);
        for (n = 0; n < in_d->n; ++n) {
            int8_t *px = store ? e_x + n * hw * c_n + c0 : 0;
            bip_errors(e16 + n * ho * wo * c_n + c0, e_rows, e_cols, c_n, ep);
            for (k = 0; k < 4; ++k) {
#if defined(MT_DSP_NATIVE)
                if (sums_fn) {
                    sums_fn(pl + k * MT_BIP_PLANE + s * (ho - 1) * MT_BIP_COLS, ep + k * MT_BIP_PAIRS,
                            acc + k * MT_BIP_INPUTS, acc + k * MT_BIP_INPUTS + hw);
                    continue;
                }
#endif
                bip_sums(pl + k * MT_BIP_PLANE, ep + k * MT_BIP_PAIRS, np, nq, s, h, w, ho, acc + k * MT_BIP_INPUTS);
            }
            bwd_in_emit(acc, px, hw, &st, 4 * MT_BIP_INPUTS, store);
        }
    }
    bwd_in_emit_done(&st, lo, hi);
}

static MT_NOINLINE void bip_quads_s8(const mt_conv_params *p, const mt_dims *out_d, const int16_t *e16,
                                     const mt_dims *f_d, const int8_t *filter, const mt_dims *in_d, int32_t multiplier,
                                     int32_t shift, int8_t *e_x, int32_t *lo, int32_t *hi)
{
    bip_quads_body(p, out_d, e16, f_d, filter, in_d, multiplier, shift, e_x, lo, hi, 1);
}

static MT_NOINLINE void bip_quads_range(const mt_conv_params *p, const mt_dims *out_d, const int16_t *e16,
                                        const mt_dims *f_d, const int8_t *filter, const mt_dims *in_d, int32_t *lo,
                                        int32_t *hi)
{
    bip_quads_body(p, out_d, e16, f_d, filter, in_d, 0, 0, 0, lo, hi, 0);
}

/*
 * Stride 1, square kernels of 3, 5 and 7, input rows of more than four pixels (MT_DSP builds of
 * the forward's row body, nn/mt_depthwise_rows_dsp.h): at stride 1 the error propagation is the
 * forward's correlation over the error map with the kernel turned by 180 degrees and padding
 * k - 1 - pad, so each input row's accumulators of a channel come from the forward's row loop
 * (two taps per SMLAD, four inputs per step): the four channels' int16 error rows are laid out
 * once per quad as int16 rows per channel (zeros for padding), the turned kernel's pairs prepared
 * once per quad, and each input's four accumulators then take the requantization, clamp, store
 * and extremes of the quad loop.
 */

#define MT_BIR_CHUNK 16 /* inputs of a row summed before they are requantized (a multiple of 4: a small block) */
#define MT_BIR_ACC MT_BIR_CHUNK /* a channel's accumulators: 64 bytes apart, as bwd_in_emit_s64 reads them */

/* One channel's accumulators of `groups` groups of four inputs (mt_dwr_rows_any), out of line: inlined
   into the body, GCC spilled the row walk inside the group loop. */
static MT_NOINLINE void bir_rows(const int32_t *x, int32_t rs, const int32_t *wr, int32_t *acc, int32_t groups,
                                 int32_t kw)
{
    mt_dwr_rows_any(x, rs, wr, 0, acc, groups, kw, 1);
}

#if defined(MT_DSP_NATIVE) && defined(__GNUC__)
/* One kernel row of bir_rows3: pairs X_0, X_1 (then the pointer on to the next group), the weight
   pairs (A_0, B_0) of the row at byte W, X_2, (A_1, B_1): the forward's two stride-1 steps
   (MT_DWR_S1_STEP). OP: SMUAD for the first row (no zeroing), SMLAD after. */
#define BIR_ROW3(P, W, FIRST)                                                                                    \
    "ldrd r10, r11, [" P "], #8\n\tldrd r1, lr, [r2, #" #W "]\n\t" FIRST                                        \
    "ldr r10, [" P "]\n\tldrd r1, lr, [r2, #(" #W " + 8)]\n\t"                                                  \
    "smlad r6, r11, r1, r6\n\tsmlad r7, r11, lr, r7\n\tsmlad r8, r10, r1, r8\n\tsmlad r9, r10, lr, r9\n\t"
#define BIR_MUL3(OP, ACC)                                                                                        \
    OP " r6, r10, r1" ACC(r6) "\n\t" OP " r7, r10, lr" ACC(r7) "\n\t" OP " r8, r11, r1" ACC(r8) "\n\t" OP       \
       " r9, r11, lr" ACC(r9) "\n\t"
#define BIR_NOACC(R) ""
#define BIR_ACC(R) ", " #R

/*
 * bir_rows for 3x3 kernels (MCUNet's stride-1 layers) in assembly, every register its own: x r0
 * (ring slot 0; slots 1 and 2 rs words on), wr r2 (a kernel row's pairs 64 bytes on), acc r3,
 * groups on the stack; per group of four inputs 36 instructions of sums (12 a kernel row), one STM
 * and the loop (GCC's build of the same loop spilled its walk: about 58).
 */
static void __attribute__((naked, noinline)) bir_rows3(const int32_t *x __attribute__((unused)),
                                                       int32_t rs __attribute__((unused)),
                                                       const int32_t *wr __attribute__((unused)),
                                                       int32_t *acc __attribute__((unused)),
                                                       int32_t groups __attribute__((unused)))
{
    __asm__ volatile(".syntax unified\n\t"
                     "push {r4, r5, r6, r7, r8, r9, r10, r11, lr}\n\t"
                     "ldr r12, [sp, #36]\n\t"
                     "add r12, r3, r12, lsl #4\n\t" /* the end of acc */
                     "add r4, r0, r1, lsl #2\n\t"   /* slot 1 */
                     "add r5, r4, r1, lsl #2\n\t"   /* slot 2 */
                     "1:\n\t" BIR_ROW3("r0", 0, BIR_MUL3("smuad", BIR_NOACC)) BIR_ROW3("r4", 64, BIR_MUL3("smlad", BIR_ACC))
                     BIR_ROW3("r5", 128, BIR_MUL3("smlad", BIR_ACC))
                     "stmia r3!, {r6, r7, r8, r9}\n\t"
                     "cmp r3, r12\n\t"
                     "bne 1b\n\t"
                     "pop {r4, r5, r6, r7, r8, r9, r10, r11, pc}");
}
#undef BIR_ROW3
#undef BIR_MUL3
#undef BIR_NOACC
#undef BIR_ACC
#endif /* MT_DSP_NATIVE && __GNUC__ */

/* The int16 elements of one error row in the ring: every column a group of four inputs reads, even. */
MT_INLINE int32_t bir_row_len(int32_t w, int32_t wo, int32_t kw, int32_t pad)
{
    const int32_t need = ((w + 3) & ~3) + 2 * (kw / 2 + 1), have = pad + wo;
    return ((need > have ? need : have) + 1) & ~1;
}

/* Whether the row body takes the layer (see above). */
static int bir_fits(const mt_conv_params *p, const mt_dims *in_d, const mt_dims *out_d, const mt_dims *f_d)
{
    const int32_t kw = f_d->w;
    return p->stride_h == 1 && p->stride_w == 1 && f_d->h == kw && (kw == 3 || kw == 5 || kw == 7) &&
           p->pad_left >= 0 && p->pad_left < kw && p->pad_top >= 0 && p->pad_top < kw && in_d->w > 4 &&
           ((in_d->w + 3) & ~3) <= MT_DWR_LINE &&
           4 * kw * bir_row_len(in_d->w, out_d->w, kw, kw - 1 - p->pad_left) <= MT_DWR_WORDS; /* the ring twice */
}

/* Error row oy (a padding row of zeros outside [0, ho)) of channels [c0, c0 + 4) (e: the sample's
 * errors at c0) into ring slot oy mod kw of buf and its copy kw slots on (rs words a slot), so that
 * any kw successive rows are successive slots: per channel an int16 row, from column pad on. */
static void bir_fill(int32_t *buf, int32_t rs, int32_t kw, int32_t oy, const int16_t *e, int32_t ho, int32_t wo,
                     int32_t c_n, int32_t pad, int32_t len)
{
    int32_t *slot = buf + (oy % kw + kw) % kw * rs, *copy = slot + kw * rs;
    int16_t *r = (int16_t *)(void *)slot + pad, *q = (int16_t *)(void *)copy + pad;
    int32_t ox, t;
    if (oy < 0 || oy >= ho) {
        for (t = 0; t < rs; ++t) {
            slot[t] = copy[t] = 0;
        }
        return;
    }
    e += oy * wo * c_n;
    for (ox = 0; ox + 2 <= wo; ox += 2, e += 2 * c_n, r += 2, q += 2) {
        const int32_t a01 = mt_read_s16x2(e), a23 = mt_read_s16x2(e + 2);
        const int32_t b01 = mt_read_s16x2(e + c_n), b23 = mt_read_s16x2(e + c_n + 2);
        const int32_t v0 = mt_pkhbt(a01, b01), v1 = mt_pkhtb(a01, b01), v2 = mt_pkhbt(a23, b23), v3 = mt_pkhtb(a23, b23);
        mt_write_s16x2(r, v0);
        mt_write_s16x2(r + len, v1);
        mt_write_s16x2(r + 2 * len, v2);
        mt_write_s16x2(r + 3 * len, v3);
        mt_write_s16x2(q, v0);
        mt_write_s16x2(q + len, v1);
        mt_write_s16x2(q + 2 * len, v2);
        mt_write_s16x2(q + 3 * len, v3);
    }
    if (ox < wo) { /* an odd width's last column */
        r[0] = q[0] = e[0];
        r[len] = q[len] = e[1];
        r[2 * len] = q[2 * len] = e[2];
        r[3 * len] = q[3 * len] = e[3];
    }
}

/* Every channel quad of a layer bir_fits takes, to int8 errors with the prepared requantization
 * (store) or range only; the channels past the last quad are the caller's. The ring's slot i holds
 * error row y - pad' + i of input row y's window (pad' = kh - 1 - pad_top); the next input row moves
 * the slots up by one and fills the last. */
MT_INLINE void bir_quads_body(const mt_conv_params *p, const mt_dims *out_d, const int16_t *e16, const mt_dims *f_d,
                              const int8_t *filter, const mt_dims *in_d, int32_t multiplier, int32_t shift,
                              int8_t *e_x, int32_t *lo, int32_t *hi, const int store)
{
    const int32_t h = in_d->h, w = in_d->w, c_n = in_d->c, ho = out_d->h, wo = out_d->w, kw = f_d->w, kk = kw * kw;
    const int32_t k = kw / 2 + 1, pad_t = kw - 1 - p->pad_top, pad_l = kw - 1 - p->pad_left;
    const int32_t len = bir_row_len(w, wo, kw, pad_l), rs = 2 * len, groups = (w + 3) / 4;
    const int32_t rsh = store ? -1 - shift : 1, c1 = (int32_t)((uint32_t)1 << (rsh - 1));
    int32_t buf[MT_DWR_WORDS];
    int32_t wp[7 * 8 * MT_DWR_KMAX]; /* per kernel row, four channels' pairs */
    int32_t acc[4 * MT_BIR_ACC];
    int8_t turned[MT_DW_TAPS_MAX];
    bwd_in_emit_t st;
    int32_t c0, ch, n, y, x0, i, t;
    bwd_in_emit_init(&st, *lo, *hi, multiplier, rsh, c1, c_n);
    memset(buf, 0, (size_t)(2 * kw * rs) * sizeof(int32_t)); /* the padding columns stay 0 */
    for (c0 = 0; c0 + 4 <= c_n; c0 += 4) {
        for (ch = 0; ch < 4; ++ch) {
            const int8_t *f = filter + (c0 + ch) * kk;
            for (t = 0; t < kk; ++t) {
                turned[t] = f[kk - 1 - t];
            }
            mt_dwr_pairs(turned, kw, kw, k, wp + ch * 2 * k, 8 * k);
        }
        for (n = 0; n < in_d->n; ++n) {
            const int16_t *image = e16 + n * ho * wo * c_n + c0;
            for (y = 0; y < h; ++y) {
                int8_t *py = store ? e_x + ((n * h + y) * w) * c_n + c0 : 0;
                const int32_t *win = buf + ((y - pad_t) % kw + kw) % kw * rs; /* the window's first slot */
                for (i = y == 0 ? 0 : kw - 1; i < kw; ++i) {
                    bir_fill(buf, rs, kw, y - pad_t + i, image, ho, wo, c_n, pad_l, len);
                }
                for (x0 = 0; x0 < w; x0 += MT_BIR_CHUNK) { /* MT_BIR_CHUNK inputs at a time: a small acc block */
                    const int32_t g0 = x0 / 4, x1 = x0 + MT_BIR_CHUNK < w ? x0 + MT_BIR_CHUNK : w;
                    const int32_t ng = groups - g0 < MT_BIR_CHUNK / 4 ? groups - g0 : MT_BIR_CHUNK / 4;
                    for (ch = 0; ch < 4; ++ch) {
#if defined(MT_DSP_NATIVE) && defined(__GNUC__)
                        if (kw == 3) {
                            bir_rows3(win + ch * (len / 2) + 2 * g0, rs, wp + ch * 2 * k, acc + ch * MT_BIR_ACC, ng);
                            continue;
                        }
#endif
                        bir_rows(win + ch * (len / 2) + 2 * g0, rs, wp + ch * 2 * k, acc + ch * MT_BIR_ACC, ng, kw);
                    }
                    bwd_in_emit(acc, store ? py + x0 * c_n : 0, x1 - x0, &st, 4 * MT_BIR_ACC, store);
                }
            }
        }
    }
    bwd_in_emit_done(&st, lo, hi);
}

static MT_NOINLINE void bir_quads_s8(const mt_conv_params *p, const mt_dims *out_d, const int16_t *e16,
                                     const mt_dims *f_d, const int8_t *filter, const mt_dims *in_d, int32_t multiplier,
                                     int32_t shift, int8_t *e_x, int32_t *lo, int32_t *hi)
{
    bir_quads_body(p, out_d, e16, f_d, filter, in_d, multiplier, shift, e_x, lo, hi, 1);
}

static MT_NOINLINE void bir_quads_range(const mt_conv_params *p, const mt_dims *out_d, const int16_t *e16,
                                        const mt_dims *f_d, const int8_t *filter, const mt_dims *in_d, int32_t *lo,
                                        int32_t *hi)
{
    bir_quads_body(p, out_d, e16, f_d, filter, in_d, 0, 0, 0, lo, hi, 0);
}

/*
 * 3x3 kernels at stride 2 with padding 1 (MCUNet's blocks 1 and 5): input column x = 2v takes tap
 * column 1 of output column v, x = 2v + 1 tap columns 2 and 0 of output columns v and v + 1; input
 * row y = 2u tap row 1 of output row u, y = 2u + 1 tap rows 2 and 0 of output rows u and u + 1. So
 * with a channel's error rows as int16 rows (a zero past the last), one LDR of the pair (e[v],
 * e[v + 1]) serves both inputs 2v and 2v + 1 of a kernel row: an SMUAD/SMLAD with (w[i, 2], w[i, 0])
 * for the odd one and an SMULBB/SMLABB with w[i, 1] for the even one. The error rows of four
 * channels are laid out once per quad in a ring of two (row oy in slot oy & 1); each input's four
 * accumulators then take the requantization, clamp, store and extremes of the quad loop.
 */
#define MT_BIS_W 64                  /* the widest input row */
#define MT_BIS_LEN (MT_BIS_W / 2 + 2) /* int16 elements of a channel's error row: wo + 1, even */

/* Whether the stride-2 body takes the layer (see above). */
static int bis_fits(const mt_conv_params *p, const mt_dims *in_d, const mt_dims *out_d, const mt_dims *f_d)
{
    return p->stride_h == 2 && p->stride_w == 2 && f_d->h == 3 && f_d->w == 3 && p->pad_top == 1 &&
           p->pad_left == 1 && in_d->w <= MT_BIS_W && out_d->w == (in_d->w - 1) / 2 + 1 &&
           out_d->h == (in_d->h - 1) / 2 + 1;
}

/* Error row oy of channels [c0, c0 + 4) (e: the sample's errors at c0) into ring slot r (channel c
 * at r + c * len): two positions of four channels per step (PKH). */
MT_INLINE void bis_fill_len(int16_t *r, const int16_t *e, int32_t wo, int32_t c_n, const int32_t len)
{
    int32_t ox;
    for (ox = 0; ox + 2 <= wo; ox += 2, e += 2 * c_n, r += 2) {
        const int32_t a01 = mt_read_s16x2(e), a23 = mt_read_s16x2(e + 2);
        const int32_t b01 = mt_read_s16x2(e + c_n), b23 = mt_read_s16x2(e + c_n + 2);
        mt_write_s16x2(r, mt_pkhbt(a01, b01));
        mt_write_s16x2(r + len, mt_pkhtb(a01, b01));
        mt_write_s16x2(r + 2 * len, mt_pkhbt(a23, b23));
        mt_write_s16x2(r + 3 * len, mt_pkhtb(a23, b23));
    }
    if (ox < wo) { /* an odd width's last column */
        r[0] = e[0];
        r[len] = e[1];
        r[2 * len] = e[2];
        r[3 * len] = e[3];
    }
}

/* bis_fill_len for each ring, its row length a constant (one function each, as GCC compiles them best). */
static void bis_fill(int16_t *r, const int16_t *e, int32_t wo, int32_t c_n)
{
    bis_fill_len(r, e, wo, c_n, MT_BIS_LEN);
}

#define MT_BIK_LEN (MT_BIS_W / 2 + 4) /* a channel's error row: a zero, wo errors, zeros to the last pair read */

static void bik_fill(int16_t *r, const int16_t *e, int32_t wo, int32_t c_n)
{
    bis_fill_len(r, e, wo, c_n, MT_BIK_LEN);
}

/* One channel's accumulators of an input row from one kernel row (ra: its error row; wa: the odd
 * inputs' weight pair and the even inputs' weight), or two (rb, wb too: rb 0 for none), into
 * acc[x] for the nv even inputs x = 2v and the odd ones after them. */
static void bis_row(const int16_t *ra, const int32_t *wa, const int16_t *rb, const int32_t *wb, int32_t nv,
                    int32_t *acc)
{
    const int32_t woa = wa[0], wea = wa[1];
    int32_t v;
    if (!rb) {
        for (v = 0; v < nv; ++v, acc += 2) {
            const int32_t pa = mt_read_s16x2(ra + v);
            acc[0] = mt_smlabb(pa, wea, 0);
            acc[1] = mt_smlad(pa, woa, 0);
        }
        return;
    }
    for (v = 0; v < nv; ++v, acc += 2) {
        const int32_t pa = mt_read_s16x2(ra + v), pb = mt_read_s16x2(rb + v);
        acc[0] = mt_smlabb(pb, wb[1], mt_smlabb(pa, wea, 0));
        acc[1] = mt_smlad(pb, wb[0], mt_smlad(pa, woa, 0));
    }
}

#if defined(MT_DSP_NATIVE) && defined(__GNUC__)
/* One input pair of a bis_row*_asm row from the error pair in RA (and RB): acc[2v] (r12) by the even
   weights (r5, r7: SMULBB / SMLABB), acc[2v + 1] (lr) by the odd pairs (r4, r6: SMUAD / SMLAD), stored. */
#define BIS_V1(RA) "smulbb r12, " RA ", r5\n\tsmuad lr, " RA ", r4\n\tstrd r12, lr, [r3], #8\n\t"
#define BIS_V2(RA, RB)                                                                                           \
    "smulbb r12, " RA ", r5\n\tsmlabb r12, " RB ", r7, r12\n\tsmuad lr, " RA ", r4\n\tsmlad lr, " RB          \
    ", r6, lr\n\tstrd r12, lr, [r3], #8\n\t"

/*
 * bis_row in assembly for an even nv, two input pairs a step (the C loop's walk in registers):
 * one kernel row (ra r0, wa r1, nv r2, acc r3) in 10 instructions a step, two (ra r0, rb r1, wa r2,
 * wb r3, nv and acc on the stack) in 16 (GCC's loops: 16 and 22).
 */
static void __attribute__((naked, noinline)) bis_row1_asm(const int16_t *ra __attribute__((unused)),
                                                          const int32_t *wa __attribute__((unused)),
                                                          int32_t nv __attribute__((unused)),
                                                          int32_t *acc __attribute__((unused)))
{
    __asm__ volatile(".syntax unified\n\t"
                     "push {r4, r5, r8, r10, lr}\n\t"
                     "ldrd r4, r5, [r1]\n\t"
                     "add r2, r3, r2, lsl #3\n\t" /* the end of acc */
                     "1:\n\t"
                     "ldr r10, [r0, #2]\n\t"
                     "ldr r8, [r0], #4\n\t" BIS_V1("r8") BIS_V1("r10")
                     "cmp r3, r2\n\t"
                     "bne 1b\n\t"
                     "pop {r4, r5, r8, r10, pc}");
}

static void __attribute__((naked, noinline)) bis_row2_asm(const int16_t *ra __attribute__((unused)),
                                                          const int16_t *rb __attribute__((unused)),
                                                          const int32_t *wa __attribute__((unused)),
                                                          const int32_t *wb __attribute__((unused)),
                                                          int32_t nv __attribute__((unused)),
                                                          int32_t *acc __attribute__((unused)))
{
    __asm__ volatile(".syntax unified\n\t"
                     "push {r4, r5, r6, r7, r8, r9, r10, r11, lr}\n\t"
                     "ldrd r4, r5, [r2]\n\t"
                     "ldrd r6, r7, [r3]\n\t"
                     "ldrd r2, r3, [sp, #36]\n\t" /* nv, acc */
                     "add r2, r3, r2, lsl #3\n\t"
                     "1:\n\t"
                     "ldr r10, [r0, #2]\n\t"
                     "ldr r8, [r0], #4\n\t"
                     "ldr r11, [r1, #2]\n\t"
                     "ldr r9, [r1], #4\n\t" BIS_V2("r8", "r9") BIS_V2("r10", "r11")
                     "cmp r3, r2\n\t"
                     "bne 1b\n\t"
                     "pop {r4, r5, r6, r7, r8, r9, r10, r11, pc}");
}
#undef BIS_V1
#undef BIS_V2
#endif /* MT_DSP_NATIVE && __GNUC__ */

/* bis_row, in assembly when nv is even (MCUNet's blocks 1 and 5: 16 and 4). */
MT_INLINE void bis_row_any(const int16_t *ra, const int32_t *wa, const int16_t *rb, const int32_t *wb, int32_t nv,
                           int32_t *acc)
{
#if defined(MT_DSP_NATIVE) && defined(__GNUC__)
    if ((nv & 1) == 0) {
        if (rb) {
            bis_row2_asm(ra, rb, wa, wb, nv, acc);
        } else {
            bis_row1_asm(ra, wa, nv, acc);
        }
        return;
    }
#endif
    bis_row(ra, wa, rb, wb, nv, acc);
}

/* Every channel quad of a layer bis_fits takes, to int8 errors with the prepared requantization
 * (store) or range only; the channels past the last quad are the caller's. */
MT_INLINE void bis_quads_body(const mt_conv_params *p, const mt_dims *out_d, const int16_t *e16, const mt_dims *f_d,
                              const int8_t *filter, const mt_dims *in_d, int32_t multiplier, int32_t shift,
                              int8_t *e_x, int32_t *lo, int32_t *hi, const int store)
{
    const int32_t h = in_d->h, w = in_d->w, c_n = in_d->c, ho = out_d->h, wo = out_d->w, nv = (w + 1) / 2;
    const int32_t rsh = store ? -1 - shift : 1, c1 = (int32_t)((uint32_t)1 << (rsh - 1));
    int16_t ring[2 * 4 * MT_BIS_LEN];
    int32_t acc[4 * (MT_BIS_W + 1)];
    int32_t wpe[4][3][2]; /* per channel and kernel row i: (w[i, 2], w[i, 0]), then w[i, 1] */
    bwd_in_emit_t st;
    int32_t c0, ch, n, y, i;
    bwd_in_emit_init(&st, *lo, *hi, multiplier, rsh, c1, c_n);
    (void)p; /* bis_fits fixed the geometry */
    (void)f_d;
    memset(ring, 0, sizeof ring); /* the zero past each row stays */
    for (c0 = 0; c0 + 4 <= c_n; c0 += 4) {
        for (ch = 0; ch < 4; ++ch) {
            const int8_t *f = filter + (c0 + ch) * 9;
            for (i = 0; i < 3; ++i) {
                wpe[ch][i][0] = (int32_t)(((uint32_t)(int32_t)f[3 * i + 2] & 0xFFFFu) | ((uint32_t)(int32_t)f[3 * i] << 16));
                wpe[ch][i][1] = f[3 * i + 1];
            }
        }
        for (n = 0; n < in_d->n; ++n) {
            const int16_t *image = e16 + n * ho * wo * c_n + c0;
            int32_t have = -1; /* the last error row in the ring */
            for (y = 0; y < h; ++y) {
                const int32_t u = y >> 1, top = y & 1 ? u + 1 : u; /* the rows: u (tap row 2 - ...), u + 1 */
                int8_t *py = store ? e_x + ((n * h + y) * w) * c_n + c0 : 0;
                for (; have < top && have + 1 < ho; ++have) {
                    bis_fill(ring + ((have + 1) & 1) * 4 * MT_BIS_LEN, image + (have + 1) * wo * c_n, wo, c_n);
                }
                for (ch = 0; ch < 4; ++ch) {
                    const int16_t *ru = ring + (u & 1) * 4 * MT_BIS_LEN + ch * MT_BIS_LEN;
                    int32_t *a = acc + ch * (MT_BIS_W + 1);
                    if (!(y & 1)) { /* tap row 1 of output row u */
                        bis_row_any(ru, wpe[ch][1], 0, 0, nv, a);
                    } else if (u + 1 < ho) { /* tap rows 2 (output row u) and 0 (output row u + 1) */
                        bis_row_any(ru, wpe[ch][2], ring + ((u + 1) & 1) * 4 * MT_BIS_LEN + ch * MT_BIS_LEN,
                                    wpe[ch][0], nv, a);
                    } else {
                        bis_row_any(ru, wpe[ch][2], 0, 0, nv, a);
                    }
                }
                bwd_in_emit(acc, py, w, &st, 4 * (MT_BIS_W + 1), store);
            }
        }
    }
    bwd_in_emit_done(&st, lo, hi);
}

static MT_NOINLINE void bis_quads_s8(const mt_conv_params *p, const mt_dims *out_d, const int16_t *e16,
                                     const mt_dims *f_d, const int8_t *filter, const mt_dims *in_d, int32_t multiplier,
                                     int32_t shift, int8_t *e_x, int32_t *lo, int32_t *hi)
{
    bis_quads_body(p, out_d, e16, f_d, filter, in_d, multiplier, shift, e_x, lo, hi, 1);
}

static MT_NOINLINE void bis_quads_range(const mt_conv_params *p, const mt_dims *out_d, const int16_t *e16,
                                        const mt_dims *f_d, const int8_t *filter, const mt_dims *in_d, int32_t *lo,
                                        int32_t *hi)
{
    bis_quads_body(p, out_d, e16, f_d, filter, in_d, 0, 0, 0, lo, hi, 0);
}

/*
 * 5x5 and 7x7 kernels at stride 2 with padding (k - 1) / 2 (MCUNet's block 3): the same parity
 * split, each input row's tap rows i = y + pad - 2 oy and, per column parity r of x = 2v + r, the
 * tap columns r + pad - 2d of output columns v + d; d runs over -1 .. 2, so two error pairs of a
 * channel's row, (e[v - 1], e[v]) and (e[v + 1], e[v + 2]), serve both inputs 2v and 2v + 1 with
 * two SMLADs each (weights outside the kernel are zero halves). The error rows of four channels
 * lie in a ring of four (row oy in slot oy & 3) behind one zero column; an input row adds its tap
 * rows one after the other into the row's accumulators.
 */
/* Whether the 5x5 / 7x7 stride-2 body takes the layer (see above). */
static int bik_fits(const mt_conv_params *p, const mt_dims *in_d, const mt_dims *out_d, const mt_dims *f_d)
{
    const int32_t k = f_d->w;
    return p->stride_h == 2 && p->stride_w == 2 && f_d->h == k && (k == 5 || k == 7) && p->pad_top == (k - 1) / 2 &&
           p->pad_left == (k - 1) / 2 && in_d->w <= MT_BIS_W && out_d->w == (in_d->w - 1) / 2 + 1 &&
           out_d->h == (in_d->h - 1) / 2 + 1;
}

/* Kernel weight w[i, j] of f as an int16 half, 0 outside the kernel's k columns. */
MT_INLINE uint32_t bik_w(const int8_t *f, int32_t i, int32_t j, int32_t k)
{
    return j >= 0 && j < k ? (uint32_t)(int32_t)f[i * k + j] & 0xFFFFu : 0u;
}

/* One tap row's products of a channel's error row e (pointing at e[v - 1] for v = 0) into the nv
 * even and odd inputs' accumulators acc[2v], acc[2v + 1] (first: set them, else add); wt: the even
 * inputs' pairs for (e[v - 1], e[v]) and (e[v + 1], e[v + 2]), then the odd inputs'. */
static MT_NOINLINE void bik_row(const int16_t *e, const int32_t *wt, int32_t nv, int32_t *acc, int first)
{
    const int32_t we0 = wt[0], we1 = wt[1], wo0 = wt[2], wo1 = wt[3];
    int32_t v;
    if (first) {
        for (v = 0; v < nv; ++v, e += 1, acc += 2) {
            const int32_t p0 = mt_read_s16x2(e), p1 = mt_read_s16x2(e + 2);
            acc[0] = mt_smlad(p1, we1, mt_smlad(p0, we0, 0));
            acc[1] = mt_smlad(p1, wo1, mt_smlad(p0, wo0, 0));
        }
        return;
    }
    for (v = 0; v < nv; ++v, e += 1, acc += 2) {
        const int32_t p0 = mt_read_s16x2(e), p1 = mt_read_s16x2(e + 2);
        acc[0] = mt_smlad(p1, we1, mt_smlad(p0, we0, acc[0]));
        acc[1] = mt_smlad(p1, wo1, mt_smlad(p0, wo0, acc[1]));
    }
}

#if defined(MT_DSP_NATIVE) && defined(__GNUC__)
/* One input pair v of bik_row4 (R0 = P_v = (e[v - 1], e[v]), R2 = P_{v + 2}): acc[2v] and acc[2v + 1]
   (r12, lr) take the even pairs (r4, r5) and the odd ones (r6, r7); FIRST sets them (SMUAD), else
   they are loaded and added to. */
#define BIK_V(R0, R2, FIRST)                                                                                     \
    FIRST("smuad r12, " R0 ", r4\n\tsmuad lr, " R0 ", r6\n\t",                                               \
          "ldrd r12, lr, [r3]\n\tsmlad r12, " R0 ", r4, r12\n\tsmlad lr, " R0 ", r6, lr\n\t")                 \
    "smlad r12, " R2 ", r5, r12\n\tsmlad lr, " R2 ", r7, lr\n\tstrd r12, lr, [r3], #8\n\t"
#define BIK_SET(A, B) A
#define BIK_ADD(A, B) B

/*
 * bik_row in assembly for nv a multiple of 4 (e r0, wt r1, nv r2, acc r3): four input pairs a step,
 * the error pairs P_v a sliding window in r8-r11 (P_{v + 2} ... P_{v + 5} loaded, P_v and P_{v + 1}
 * kept from the step before: one LDR per pair instead of two), 30 instructions a step adding, 26
 * setting (GCC's loop: about 49).
 */
#define BIK_ROW4_FN(NAME, FIRST)                                                                                 \
    static void __attribute__((naked, noinline)) NAME(const int16_t *e __attribute__((unused)),               \
                                                      const int32_t *wt __attribute__((unused)),               \
                                                      int32_t nv __attribute__((unused)),                      \
                                                      int32_t *acc __attribute__((unused)))                    \
    {                                                                                                           \
        __asm__ volatile(".syntax unified\n\t"                                                                  \
                         "push {r4, r5, r6, r7, r8, r9, r10, r11, lr}\n\t"                                      \
                         "ldm r1, {r4, r5, r6, r7}\n\t"                                                         \
                         "add r2, r3, r2, lsl #3\n\t" /* the end of acc */                                    \
                         "ldr r8, [r0]\n\t"           /* P_0 */                                               \
                         "ldr r9, [r0, #2]\n\t"       /* P_1 */                                               \
                         "adds r0, #4\n\t"                                                                      \
                         "1:\n\t"                                                                               \
                         "ldr r10, [r0], #8\n\t" /* P_{v + 2} */                                               \
                         "ldr r11, [r0, #-6]\n\t" BIK_V("r8", "r10", FIRST) "ldr r8, [r0, #-4]\n\t"             \
                         BIK_V("r9", "r11", FIRST) "ldr r9, [r0, #-2]\n\t" BIK_V("r10", "r8", FIRST)           \
                         BIK_V("r11", "r9", FIRST)                                                              \
                         "cmp r3, r2\n\t"                                                                       \
                         "bne 1b\n\t"                                                                           \
                         "pop {r4, r5, r6, r7, r8, r9, r10, r11, pc}");                                         \
    }
BIK_ROW4_FN(bik_row4_set, BIK_SET)
BIK_ROW4_FN(bik_row4_add, BIK_ADD)
#undef BIK_ROW4_FN
#undef BIK_V
#undef BIK_SET
#undef BIK_ADD
#endif /* MT_DSP_NATIVE && __GNUC__ */

/* bik_row, in assembly when nv is a multiple of 4 (MCUNet's block 3: nv 8). */
MT_INLINE void bik_row_any(const int16_t *e, const int32_t *wt, int32_t nv, int32_t *acc, int first)
{
#if defined(MT_DSP_NATIVE) && defined(__GNUC__)
    if ((nv & 3) == 0) {
        if (first) {
            bik_row4_set(e, wt, nv, acc);
        } else {
            bik_row4_add(e, wt, nv, acc);
        }
        return;
    }
#endif
    bik_row(e, wt, nv, acc, first);
}

MT_INLINE void bik_quads_body(const mt_conv_params *p, const mt_dims *out_d, const int16_t *e16, const mt_dims *f_d,
                              const int8_t *filter, const mt_dims *in_d, int32_t multiplier, int32_t shift,
                              int8_t *e_x, int32_t *lo, int32_t *hi, const int store)
{
    const int32_t h = in_d->h, w = in_d->w, c_n = in_d->c, ho = out_d->h, wo = out_d->w, nv = (w + 1) / 2;
    const int32_t k = f_d->w, kk = k * k, pad = (k - 1) / 2;
    const int32_t rsh = store ? -1 - shift : 1, c1 = (int32_t)((uint32_t)1 << (rsh - 1));
    int16_t ring[4 * 4 * MT_BIK_LEN];
    int32_t acc[4 * (MT_BIS_W + 1)];
    int32_t wt[4][7][4]; /* per channel and tap row: the even inputs' two pairs, the odd inputs' two */
    bwd_in_emit_t st;
    int32_t c0, ch, n, y, x, i, r, m, dy;
    bwd_in_emit_init(&st, *lo, *hi, multiplier, rsh, c1, c_n);
    (void)p; /* bik_fits fixed the geometry */
    memset(ring, 0, sizeof ring); /* the zero columns stay */
    for (c0 = 0; c0 + 4 <= c_n; c0 += 4) {
        for (ch = 0; ch < 4; ++ch) {
            const int8_t *f = filter + (c0 + ch) * kk;
            for (i = 0; i < k; ++i) {
                for (r = 0; r < 2; ++r) {
                    for (m = 0; m < 2; ++m) { /* output columns v + d and v + d + 1, d = 2m - 1 */
                        const int32_t j = r + pad - 2 * (2 * m - 1);
                        wt[ch][i][2 * r + m] = (int32_t)(bik_w(f, i, j, k) | (bik_w(f, i, j - 2, k) << 16));
                    }
                }
            }
        }
        for (n = 0; n < in_d->n; ++n) {
            const int16_t *image = e16 + n * ho * wo * c_n + c0;
            int32_t have = -1; /* the last error row in the ring */
            for (y = 0; y < h; ++y) {
                const int32_t u = y >> 1, ry = y & 1;
                int8_t *py = store ? e_x + ((n * h + y) * w) * c_n + c0 : 0;
                int first = 1;
                for (; have < u + 2 && have + 1 < ho; ++have) {
                    bik_fill(ring + ((have + 1) & 3) * 4 * MT_BIK_LEN + 1, image + (have + 1) * wo * c_n, wo, c_n);
                }
                for (dy = -1; dy <= 2; ++dy) { /* tap row i of output row u + dy */
                    const int32_t ti = ry + pad - 2 * dy, oy = u + dy;
                    if (ti < 0 || ti >= k || oy < 0 || oy >= ho) {
                        continue;
                    }
                    for (ch = 0; ch < 4; ++ch) {
                        bik_row_any(ring + (oy & 3) * 4 * MT_BIK_LEN + ch * MT_BIK_LEN, wt[ch][ti], nv,
                                    acc + ch * (MT_BIS_W + 1), first);
                    }
                    first = 0;
                }
                if (first) { /* no tap row reaches this input row: its sums are 0 */
                    for (x = 0; x < 4 * (MT_BIS_W + 1); ++x) {
                        acc[x] = 0;
                    }
                }
                bwd_in_emit(acc, py, w, &st, 4 * (MT_BIS_W + 1), store);
            }
        }
    }
    bwd_in_emit_done(&st, lo, hi);
}

static MT_NOINLINE void bik_quads_s8(const mt_conv_params *p, const mt_dims *out_d, const int16_t *e16,
                                     const mt_dims *f_d, const int8_t *filter, const mt_dims *in_d, int32_t multiplier,
                                     int32_t shift, int8_t *e_x, int32_t *lo, int32_t *hi)
{
    bik_quads_body(p, out_d, e16, f_d, filter, in_d, multiplier, shift, e_x, lo, hi, 1);
}

static MT_NOINLINE void bik_quads_range(const mt_conv_params *p, const mt_dims *out_d, const int16_t *e16,
                                        const mt_dims *f_d, const int8_t *filter, const mt_dims *in_d, int32_t *lo,
                                        int32_t *hi)
{
    bik_quads_body(p, out_d, e16, f_d, filter, in_d, 0, 0, 0, lo, hi, 0);
}
#undef BWD_IN_RANGE
#undef BWD_IN_TAP
#undef BWD_IN_STEP
#undef BWD_IN_ROWS
#undef BWD_IN_S2_TAPS
#undef BWD_IN_EMIT

/* One out-of-line loop for the quads, one for single channels. */
static MT_NOINLINE void bwd_in_quad(const mt_conv_params *p, const mt_dims *out_d, const int16_t *e16,
                                    const mt_dims *f_d, const int8_t *filter, const mt_dims *in_d, int32_t multiplier,
                                    int32_t shift, int8_t *e_x, float s_acc, float *e_real, int32_t *lo, int32_t *hi,
                                    int32_t c0)
{
    bwd_in_channels(p, out_d, e16, f_d, filter, in_d, multiplier, shift, e_x, s_acc, e_real, lo, hi, c0, 1);
}

static MT_NOINLINE void bwd_in_single(const mt_conv_params *p, const mt_dims *out_d, const int16_t *e16,
                                      const mt_dims *f_d, const int8_t *filter, const mt_dims *in_d,
                                      int32_t multiplier, int32_t shift, int8_t *e_x, float s_acc, float *e_real,
                                      int32_t *lo, int32_t *hi, int32_t c)
{
    bwd_in_channels(p, out_d, e16, f_d, filter, in_d, multiplier, shift, e_x, s_acc, e_real, lo, hi, c, 0);
}
#endif /* MT_DSP */

mt_status mt_grouped_conv2d_bwd_in_s8_s16(const mt_conv_params *params,
                                          const mt_dims *output_dims,
                                          const int16_t *e16,
                                          const mt_dims *filter_dims,
                                          const int8_t *filter,
                                          const mt_dims *input_dims,
                                          int32_t multiplier,
                                          int32_t shift,
                                          int8_t *e_x,
                                          float s_acc,
                                          float *e_real,
                                          int32_t *acc_min,
                                          int32_t *acc_max)
{
#if MT_DSP
    if (params && output_dims && e16 && filter_dims && filter && input_dims && acc_min && acc_max && !(e_x && e_real) &&
        params->groups == input_dims->c && filter_dims->c == 1 && filter_dims->n == input_dims->c &&
        output_dims->c == input_dims->c && params->stride_h >= 1 && params->stride_w >= 1 &&
        filter_dims->h * filter_dims->w <= MT_DW_TAPS_MAX) {
        int32_t c = 0;
        if (!e_real && (!e_x || bwd_in_fast_ok(multiplier, shift)) &&
            bip_fits(params, input_dims, output_dims, filter_dims)) { /* every quad at once */
            if (e_x) {
                bip_quads_s8(params, output_dims, e16, filter_dims, filter, input_dims, multiplier, shift, e_x, acc_min,
                             acc_max);
            } else {
                bip_quads_range(params, output_dims, e16, filter_dims, filter, input_dims, acc_min, acc_max);
            }
            c = input_dims->c & ~3;
        } else if (!e_real && (!e_x || bwd_in_fast_ok(multiplier, shift)) &&
                   bir_fits(params, input_dims, output_dims, filter_dims)) {
            if (e_x) {
                bir_quads_s8(params, output_dims, e16, filter_dims, filter, input_dims, multiplier, shift, e_x, acc_min,
                             acc_max);
            } else {
                bir_quads_range(params, output_dims, e16, filter_dims, filter, input_dims, acc_min, acc_max);
            }
            c = input_dims->c & ~3;
        } else if (!e_real && (!e_x || bwd_in_fast_ok(multiplier, shift)) &&
                   bis_fits(params, input_dims, output_dims, filter_dims)) {
            if (e_x) {
                bis_quads_s8(params, output_dims, e16, filter_dims, filter, input_dims, multiplier, shift, e_x, acc_min,
                             acc_max);
            } else {
                bis_quads_range(params, output_dims, e16, filter_dims, filter, input_dims, acc_min, acc_max);
            }
            c = input_dims->c & ~3;
        } else if (!e_real && (!e_x || bwd_in_fast_ok(multiplier, shift)) &&
                   bik_fits(params, input_dims, output_dims, filter_dims)) {
            if (e_x) {
                bik_quads_s8(params, output_dims, e16, filter_dims, filter, input_dims, multiplier, shift, e_x, acc_min,
                             acc_max);
            } else {
                bik_quads_range(params, output_dims, e16, filter_dims, filter, input_dims, acc_min, acc_max);
            }
            c = input_dims->c & ~3;
        }
        for (; c + 4 <= input_dims->c; c += 4) {
            if (e_x && bwd_in_fast_ok(multiplier, shift)) {
                bwd_in_quad_s8(params, output_dims, e16, filter_dims, filter, input_dims, multiplier, shift, e_x,
                               acc_min, acc_max, c);
                continue;
            }
            if (!e_x && !e_real) {
                bwd_in_quad_range(params, output_dims, e16, filter_dims, filter, input_dims, acc_min, acc_max, c);
                continue;
            }
            bwd_in_quad(params, output_dims, e16, filter_dims, filter, input_dims, multiplier, shift, e_x, s_acc, e_real,
                        acc_min, acc_max, c);
        }
        for (; c < input_dims->c; ++c) {
            bwd_in_single(params, output_dims, e16, filter_dims, filter, input_dims, multiplier, shift, e_x, s_acc,
                          e_real, acc_min, acc_max, c);
        }
        return MT_OK;
    }
#endif /* MT_DSP */
    return mt_grouped_conv2d_bwd_in_s8_s16_ref(params, output_dims, e16, filter_dims, filter, input_dims, multiplier,
                                               shift, e_x, s_acc, e_real, acc_min, acc_max);
}
