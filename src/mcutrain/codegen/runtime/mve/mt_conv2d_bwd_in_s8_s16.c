/*
 * Transposed conv of prescaled int16 errors with int8 weights (Python twin:
 * fqt_kernels.conv2d_bwd_in_acc in mode "int" and fqt.FQT._to_err), on Helium (MVE) cores.
 *
 * Twin of train/fqt/mt_conv2d_bwd_in_s8_s16.c (and of its DSP twin), bit-exact with it. The sparse
 * loop (bwd_in_mve_sparse) comes first: the nonzero errors of the output rows in reach, compacted
 * once per row, listed per input position over all its taps, one dot product per four input
 * channels over the list. Where its stack band does not fit, the row loop: each
 * input position gathers the output positions whose window covers it, as the reference does, but
 * the sum over the error channels runs eight at a time: one load of eight int16 errors of the
 * output position, and per input channel one gather of the eight channels' int8 weights of the tap
 * (VLDRB.S16 with offsets row * K from a table, so kept channels of partial updates need nothing
 * else) and one VMLADAVA.S16, four input channels sharing each error load. Output positions whose
 * errors are all 0 are left out of the tap lists, exactly.
 * The errors requantize "single" (FQT's specification, either mode) four channels per vector and
 * the extremes stay in two vectors until the end. Layers whose rows do not fit the offset table
 * (more than MT_MVE_BWD_ROWS error columns, (O - 1) * K above 65535, more than MT_MVE_BWD_TAPS
 * taps), or a build without MVE, run the reference loop (mt_conv2d_bwd_in_s8_s16_ref.h).
 * NOTE: the int32 bound of the reference (checked by the exporter) holds for partial sums in any
 * order, so the vector order gives the same sums.
 */
#include <stddef.h>

#include "mt_conv2d_bwd_in_s8_s16_ref.h"
#include "mt_fqt.h"
#include "mt_fqt_keep.h"
#include "mt_mve.h"

#if MT_MVE

#define MT_MVE_BWD_ROWS 256 /* error columns of the offset table: 512 bytes of stack */
#define MT_MVE_BWD_TAPS 49  /* taps of one input position's list (7x7) */
#define MT_MVE_BWD_POS 1024 /* output positions of one sample whose zero flags fit the stack */
#define MT_MVE_BWD_POOL 768  /* compacted errors of the sparse loop's band: 3 KB of stack */
#define MT_MVE_BWD_LIST 384  /* listed terms of one input position: 1.5 KB of stack */
#define MT_MVE_BWD_STARTS 128 /* positions (+1 per row) of the band's rows */

/* Whether any of the n int16 errors at e is nonzero (eight lanes a load, the tail predicated). */
MT_INLINE int mt_mve_any_s16(const int16_t *e, int32_t n)
{
    uint16_t m = 0;
    int32_t g;
    for (g = 0; g < n; g += 8) {
        m = vmaxavq_s16(m, vldrhq_z_s16(e + g, vctp16q((uint32_t)(n - g))));
    }
    return m != 0;
}

/*
 * a0..a3 (input channels pw[0], pw[d1], pw[d2], pw[d3] of one tap) += the n errors at pe times those
 * channels of the n rows: eight rows per group, their weights gathered at offsets (dense: rows
 * g * 8 + lane, K apart, the offsets advancing 8 K per group; kept rows: from the table off, any
 * order) from four fixed bases; the tail's lanes past n are predicated off on both sides.
 */
MT_INLINE void mt_mve_tap4(int dense, const int16_t *pe, const int8_t *pw, int32_t d1, int32_t d2, int32_t d3,
                           int32_t n, int32_t kk, uint16x8_t ofs, const uint16_t *off, int32_t *a0, int32_t *a1,
                           int32_t *a2, int32_t *a3)
{
    const int8_t *p1 = pw + d1, *p2 = pw + d2, *p3 = pw + d3;
    const uint16_t step = (uint16_t)(8 * kk);
    int32_t s0 = *a0, s1 = *a1, s2 = *a2, s3 = *a3;
    uint16x8_t o = ofs;
    int32_t g;
    for (g = n >> 3; g > 0; g--) {
        const int16x8_t ev = vldrhq_s16(pe);
        if (!dense) {
            o = vldrhq_u16(off);
            off += 8;
        }
        s0 = vmladavaq_s16(s0, ev, vldrbq_gather_offset_s16(pw, o));
        s1 = vmladavaq_s16(s1, ev, vldrbq_gather_offset_s16(p1, o));
        s2 = vmladavaq_s16(s2, ev, vldrbq_gather_offset_s16(p2, o));
        s3 = vmladavaq_s16(s3, ev, vldrbq_gather_offset_s16(p3, o));
        pe += 8;
        if (dense) {
            o = vaddq_n_u16(o, step);
        }
    }
    if (n & 7) {
        const mve_pred16_t p = vctp16q((uint32_t)(n & 7));
        const int16x8_t ev = vldrhq_z_s16(pe, p);
        if (!dense) {
            o = vldrhq_z_u16(off, p);
        }
        s0 = vmladavaq_s16(s0, ev, vldrbq_gather_offset_z_s16(pw, o, p));
        s1 = vmladavaq_s16(s1, ev, vldrbq_gather_offset_z_s16(p1, o, p));
        s2 = vmladavaq_s16(s2, ev, vldrbq_gather_offset_z_s16(p2, o, p));
        s3 = vmladavaq_s16(s3, ev, vldrbq_gather_offset_z_s16(p3, o, p));
    }
    *a0 = s0;
    *a1 = s1;
    *a2 = s2;
    *a3 = s3;
}

/* The four input errors of acc (their first cb) requantized "single" into [-127, 127] at out. */
MT_INLINE void mt_mve_bwd_out4(int32x4_t acc, int32_t cb, int8_t *out, int fast, int32x4_t m, int32x4_t nsh,
                               int32x4_t c1, int32_t multiplier, int32_t shift)
{
    if (fast) { /* clamp [-127, 127]: the prepared form's [-128, 127], then the error's */
        const int32x4_t r = vminq_s32(vmaxq_s32(mt_mve_requantize_single(acc, m, nsh, c1, 0), vdupq_n_s32(-127)),
                                      vdupq_n_s32(127));
        vstrbq_p_s32(out, r, vctp32q((uint32_t)cb));
    } else {
        int32_t v[4], t;
        vstrwq_s32(v, acc);
        for (t = 0; t < cb; ++t) {
            out[t] = mt_requantize_single(v[t], multiplier, shift, 0, -127, 127);
        }
    }
}

/*
 * Output row er (wo positions of rows o_n apart, n error columns) compacted for the sparse loop: per
 * position its nonzero errors in ce and their weight rows' offsets (offtab) in co, the position's
 * entries from start[ox] to start[ox + 1]. Eight columns per step: each nonzero lane's place is the
 * prefix count of the nonzero lanes before it (VSHLC lane shifts), and predicated scatter stores
 * write the errors and offsets there. 0 when they pass cap (the slot leaves n entries of slack past
 * cap, so one position's writes always fit).
 */
static MT_NOINLINE int bwd_in_compact(const int16_t *er, int32_t wo, int32_t o_n, int32_t n, const uint16_t *offtab,
                                      int32_t cap, int16_t *ce, uint16_t *co, uint16_t *start)
{
    const uint16x8_t one = vdupq_n_u16(1), none = vdupq_n_u16(0);
    int32_t cnt = 0, ox, g;
    for (ox = 0; ox < wo; ++ox) {
        const int16_t *pe = er + ox * o_n;
        start[ox] = (uint16_t)cnt;
        for (g = 0; g < n; g += 8) { /* lanes past n load as 0: never listed */
            const int16x8_t ev = vldrhq_z_s16(pe + g, vctp16q((uint32_t)(n - g)));
            const mve_pred16_t nz = vcmpneq_n_s16(ev, 0);
            uint16x8_t c = vpselq_u16(one, none, nz), four;
            uint32_t carry = 0;
            c = vaddq_u16(c, vshlcq_u16(c, &carry, 16)); /* lane k: lanes k-1..k */
            carry = 0;
            c = vaddq_u16(c, vshlcq_u16(c, &carry, 32)); /* lanes k-3..k */
            carry = 0;
            four = vshlcq_u16(c, &carry, 32);
            carry = 0;
            c = vaddq_u16(c, vshlcq_u16(four, &carry, 32)); /* lanes 0..k (k-7..k) */
            vstrhq_scatter_shifted_offset_p_s16(ce + cnt, vsubq_n_u16(c, 1), ev, nz);
            vstrhq_scatter_shifted_offset_p_u16(co + cnt, vsubq_n_u16(c, 1), vldrhq_u16(offtab + g), nz);
            cnt += vgetq_lane_u16(c, 7);
        }
        if (cnt > cap) {
            return 0;
        }
    }
    start[wo] = (uint16_t)cnt;
    return 1;
}

/* The MVE loop (`dense`: keep NULL, a constant of each copy). */
MT_INLINE int bwd_in_mve_body(int dense,
                               const mt_conv_params *params,
                               const int32_t *keep,
                               int32_t n,
                               int32_t o_n,
                               const mt_dims *output_dims,
                               const int16_t *e16,
                               const mt_dims *filter_dims,
                               const int8_t *filter,
                               const mt_dims *input_dims,
                               int32_t multiplier,
                               int32_t shift,
                               int8_t *e_x,
                               int32_t *acc_min,
                               int32_t *acc_max)
{
    const int32_t h = input_dims->h, w = input_dims->w, c_n = input_dims->c;
    const int32_t kh = filter_dims->h, kw = filter_dims->w, kk = kh * kw * c_n;
    const int32_t ho = output_dims->h, wo = output_dims->w;
    const int32_t sh = params->stride_h, sw = params->stride_w;
    const int fast = mt_requant_fast_ok_single(multiplier, shift);
    const int32x4_t m = vdupq_n_s32(multiplier), nsh = vdupq_n_s32(1 + shift);
    const int32x4_t c1 = vdupq_n_s32(fast ? mt_requant_c1(-1 - shift, 0) : 0);
    const int check_zero = ho * wo <= MT_MVE_BWD_POS;
    int32x4_t vmn = vdupq_n_s32(INT32_MAX), vmx = vdupq_n_s32(INT32_MIN);
    const uint16x8_t ofs = vmulq_n_u16(vidupq_n_u16(0, 1), (uint16_t)kk); /* dense: rows 0..7 */
    uint16_t off[MT_MVE_BWD_ROWS + 8];
    uint8_t nz[MT_MVE_BWD_POS];
    const int16_t *tap_e[MT_MVE_BWD_TAPS];
    int32_t tap_w[MT_MVE_BWD_TAPS];
    int32_t t, b, y, x, c0;
    if (n < 1 || n > MT_MVE_BWD_ROWS || kh * kw > MT_MVE_BWD_TAPS || (filter_dims->n - 1) * kk > 65535) {
        return 0;
    }
    for (t = 0; t < n + 8; ++t) { /* lanes past n gather row 0: their errors load as 0 */
        off[t] = (uint16_t)(t < n ? (keep ? keep[t] : t) * kk : 0);
    }
    for (b = 0; b < input_dims->n; ++b) {
        const int16_t *eb = e16 + b * ho * wo * o_n;
        int32_t p;
        for (p = 0; check_zero && p < ho * wo; ++p) {
            nz[p] = (uint8_t)mt_mve_any_s16(eb + p * o_n, n);
        }
        for (y = 0; y < h; ++y) {
            for (x = 0; x < w; ++x) {
                int32_t ntaps = 0, i, j;
                for (i = 0; i < kh; ++i) {
                    const int32_t ty = y + params->pad_top - i;
                    int32_t oy;
                    if (ty < 0 || ty % sh != 0 || (oy = ty / sh) >= ho) {
                        continue;
                    }
                    for (j = 0; j < kw; ++j) {
                        const int32_t tx = x + params->pad_left - j;
                        int32_t ox;
                        if (tx < 0 || tx % sw != 0 || (ox = tx / sw) >= wo || (check_zero && !nz[oy * wo + ox])) {
                            continue; /* exact: zero errors add nothing */
                        }
                        tap_e[ntaps] = eb + (oy * wo + ox) * o_n;
                        tap_w[ntaps++] = (i * kw + j) * c_n;
                    }
                }
                for (c0 = 0; c0 < c_n; c0 += 4) {
                    const int32_t cb = c_n - c0 < 4 ? c_n - c0 : 4;
                    /* channels past cb repeat the last one: the same sums, never stored */
                    const int32_t d1 = cb > 1 ? 1 : 0, d2 = cb > 2 ? 2 : cb - 1, d3 = cb - 1;
                    int32_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
                    int32x4_t acc;
                    for (t = 0; t < ntaps; ++t) {
                        mt_mve_tap4(dense, tap_e[t], filter + tap_w[t] + c0, d1, d2, d3, n, kk, ofs, off, &a0, &a1,
                                    &a2, &a3);
                    }
                    acc = mt_mve_vec4(a0, a1, a2, a3);
                    vmn = vminq_s32(vmn, acc);
                    vmx = vmaxq_s32(vmx, acc);
                    if (e_x) {
                        mt_mve_bwd_out4(acc, cb, e_x + ((b * h + y) * w + x) * c_n + c0, fast, m, nsh, c1,
                                        multiplier, shift);
                    }
                }
            }
        }
    }
    *acc_min = vminvq_s32(*acc_min, vmn);
    *acc_max = vmaxvq_s32(*acc_max, vmx);
    return 1;
}

/* The four sums of the len listed errors le times the weights at pw + lo[k] (and pw + d1, d2, d3 +
   lo[k]): a call of its own, so the loop keeps its pointers in registers (post-increment loads). */
static MT_NOINLINE int32x4_t bwd_in_list4(const int16_t *le, const uint16_t *lo, int32_t len, const int8_t *pw,
                                          int32_t d1, int32_t d2, int32_t d3)
{
    int32_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
    mt_mve_tap4(0, le, pw, d1, d2, d3, len, 0, vdupq_n_u16(0), lo, &a0, &a1, &a2, &a3);
    return mt_mve_vec4(a0, a1, a2, a3);
}

/*
 * The sparse loop: the same sums over only the nonzero errors. After a max pool each channel routes
 * its error to its own window maximum, so nearly every output position holds some nonzero errors
 * but only about one in four of them is; the band of output rows the current input row reads (at
 * most ceil(kh / sh) rows, a ring of slots, each row compacted once when first read) lists them
 * with their weight offsets, and each tap is one group of VMLADAVA.S16 over the list (errors
 * loaded, weights gathered at the listed offsets). 0 (nothing stored in the extremes; e_x is
 * rewritten by whoever runs next) when the band does not fit the stack pool.
 */
static MT_NOINLINE int bwd_in_mve_sparse(const mt_conv_params *params,
                                         const int32_t *keep,
                                         int32_t n,
                                         int32_t o_n,
                                         const mt_dims *output_dims,
                                         const int16_t *e16,
                                         const mt_dims *filter_dims,
                                         const int8_t *filter,
                                         const mt_dims *input_dims,
                                         int32_t multiplier,
                                         int32_t shift,
                                         int8_t *e_x,
                                         int32_t *acc_min,
                                         int32_t *acc_max)
{
    const int32_t h = input_dims->h, w = input_dims->w, c_n = input_dims->c;
    const int32_t kh = filter_dims->h, kw = filter_dims->w, kk = kh * kw * c_n;
    const int32_t ho = output_dims->h, wo = output_dims->w;
    const int32_t sh = params->stride_h, sw = params->stride_w;
    const int32_t rows = (kh + sh - 1) / sh, slot = MT_MVE_BWD_POOL / (rows > 0 ? rows : 1);
    const int32_t cap = slot - n - 8;
    const int fast = mt_requant_fast_ok_single(multiplier, shift);
    const int32x4_t m = vdupq_n_s32(multiplier), nsh = vdupq_n_s32(1 + shift);
    const int32x4_t c1 = vdupq_n_s32(fast ? mt_requant_c1(-1 - shift, 0) : 0);
    int32x4_t vmn = vdupq_n_s32(INT32_MAX), vmx = vdupq_n_s32(INT32_MIN);
    int16_t ce[MT_MVE_BWD_POOL];
    uint16_t co[MT_MVE_BWD_POOL];
    uint16_t start[MT_MVE_BWD_STARTS];
    int16_t le[MT_MVE_BWD_LIST + 8];
    uint16_t lo[MT_MVE_BWD_LIST + 8];
    uint16_t offtab[MT_MVE_BWD_ROWS + 8];
    int32_t slot_row[MT_MVE_BWD_TAPS];
    int32_t t, b, y, x, c0;
    if (rows < 1 || rows > MT_MVE_BWD_TAPS || cap < n || rows * (wo + 1) > MT_MVE_BWD_STARTS ||
        filter_dims->n * kk > 65536) { /* listed offsets: a row's and a tap's, below O * kk */
        return 0;
    }
    for (t = 0; t < n + 8; ++t) { /* lanes past n are never stored */
        offtab[t] = (uint16_t)(t < n ? (keep ? keep[t] : t) * kk : 0);
    }
    for (b = 0; b < input_dims->n; ++b) {
        const int16_t *eb = e16 + b * ho * wo * o_n;
        for (t = 0; t < rows; ++t) {
            slot_row[t] = -1;
        }
        for (y = 0; y < h; ++y) {
            for (x = 0; x < w; ++x) {
                int32_t len = 0, i, j;
                for (i = 0; i < kh; ++i) {
                    const int32_t ty = y + params->pad_top - i;
                    const uint16_t *st;
                    int32_t oy, s;
                    if (ty < 0 || ty % sh != 0 || (oy = ty / sh) >= ho) {
                        continue;
                    }
                    s = oy % rows; /* the rows one input row reads are consecutive: distinct slots */
                    st = start + s * (wo + 1);
                    if (slot_row[s] != oy) {
                        if (!bwd_in_compact(eb + oy * wo * o_n, wo, o_n, n, offtab, cap, ce + s * slot,
                                                co + s * slot, start + s * (wo + 1))) {
                            return 0;
                        }
                        slot_row[s] = oy;
                    }
                    for (j = 0; j < kw; ++j) {
                        const int32_t tx = x + params->pad_left - j;
                        const uint16_t tw = (uint16_t)((i * kw + j) * c_n);
                        int32_t ox, k, mm, g;
                        if (tx < 0 || tx % sw != 0 || (ox = tx / sw) >= wo || st[ox + 1] == st[ox]) {
                            continue; /* exact: zero errors add nothing */
                        }
                        k = s * slot + st[ox];
                        mm = st[ox + 1] - st[ox];
                        if (len + mm > MT_MVE_BWD_LIST) {
                            return 0;
                        }
                        for (g = 0; g < mm; g += 8) { /* whole groups: lanes past mm lie past len, unread */
                            vstrhq_s16(le + len + g, vldrhq_s16(ce + k + g));
                            vstrhq_u16(lo + len + g, vaddq_n_u16(vldrhq_u16(co + k + g), tw));
                        }
                        len += mm;
                    }
                }
                for (c0 = 0; c0 < c_n; c0 += 4) {
                    const int32_t cb = c_n - c0 < 4 ? c_n - c0 : 4;
                    /* channels past cb repeat the last one: the same sums, never stored */
                    const int32_t d1 = cb > 1 ? 1 : 0, d2 = cb > 2 ? 2 : cb - 1, d3 = cb - 1;
                    const int32x4_t acc = bwd_in_list4(le, lo, len, filter + c0, d1, d2, d3);
                    vmn = vminq_s32(vmn, acc);
                    vmx = vmaxq_s32(vmx, acc);
                    if (e_x) {
                        mt_mve_bwd_out4(acc, cb, e_x + ((b * h + y) * w + x) * c_n + c0, fast, m, nsh, c1,
                                        multiplier, shift);
                    }
                }
            }
        }
    }
    *acc_min = vminvq_s32(*acc_min, vmn);
    *acc_max = vmaxvq_s32(*acc_max, vmx);
    return 1;
}

/* The row loop (every error column of the covering positions), its own frame beside the sparse one's. */
static MT_NOINLINE int bwd_in_mve_rows(const mt_conv_params *params,
                                       const int32_t *keep,
                                       int32_t n,
                                       int32_t o_n,
                                       const mt_dims *output_dims,
                                       const int16_t *e16,
                                       const mt_dims *filter_dims,
                                       const int8_t *filter,
                                       const mt_dims *input_dims,
                                       int32_t multiplier,
                                       int32_t shift,
                                       int8_t *e_x,
                                       int32_t *acc_min,
                                       int32_t *acc_max)
{
    if (keep) {
        return bwd_in_mve_body(0, params, keep, n, o_n, output_dims, e16, filter_dims, filter, input_dims, multiplier,
                               shift, e_x, acc_min, acc_max);
    }
    return bwd_in_mve_body(1, params, keep, n, o_n, output_dims, e16, filter_dims, filter, input_dims, multiplier,
                           shift, e_x, acc_min, acc_max);
}

/* The MVE loops over the n error columns (rows o_n apart; column t is channel keep[t], keep NULL: t): the sparse
   loop where its band fits, else the row loop. */
static int bwd_in_mve(const mt_conv_params *params,
                      const int32_t *keep,
                      int32_t n,
                      int32_t o_n,
                      const mt_dims *output_dims,
                      const int16_t *e16,
                      const mt_dims *filter_dims,
                      const int8_t *filter,
                      const mt_dims *input_dims,
                      int32_t multiplier,
                      int32_t shift,
                      int8_t *e_x,
                      int32_t *acc_min,
                      int32_t *acc_max)
{
    if (n < 1 || n > MT_MVE_BWD_ROWS || filter_dims->h * filter_dims->w > MT_MVE_BWD_TAPS ||
        (filter_dims->n - 1) * filter_dims->h * filter_dims->w * input_dims->c > 65535) {
        return 0;
    }
    if (bwd_in_mve_sparse(params, keep, n, o_n, output_dims, e16, filter_dims, filter, input_dims, multiplier, shift,
                          e_x, acc_min, acc_max)) {
        return 1;
    }
    return bwd_in_mve_rows(params, keep, n, o_n, output_dims, e16, filter_dims, filter, input_dims, multiplier, shift,
                           e_x, acc_min, acc_max);
}

static const mt_bwd_in_fast_fn fast_cols = bwd_in_mve;
#else  /* !MT_MVE */
static const mt_bwd_in_fast_fn fast_cols = NULL;
#endif /* MT_MVE */

mt_status mt_conv2d_bwd_in_s8_s16(const mt_conv_params *params,
                                  const int32_t *channels,
                                  int32_t n_channels,
                                  const mt_dims *output_dims,
                                  const int16_t *e16,
                                  const mt_dims *filter_dims,
                                  const int8_t *filter,
                                  const mt_dims *input_dims,
                                  int32_t multiplier,
                                  int32_t shift,
                                  int8_t *e_x,
                                  int32_t *acc_min,
                                  int32_t *acc_max)
{
    return mt_conv2d_bwd_in_s8_s16_with(params, channels, n_channels, output_dims, e16, filter_dims, filter,
                                        input_dims, multiplier, shift, e_x, acc_min, acc_max, fast_cols);
}

mt_status mt_conv2d_bwd_in_s8_s16_keep(const mt_conv_params *params,
                                       const int32_t *keep,
                                       int32_t n_keep,
                                       const mt_dims *output_dims,
                                       const int16_t *e16,
                                       const mt_dims *filter_dims,
                                       const int8_t *filter,
                                       const mt_dims *input_dims,
                                       int32_t multiplier,
                                       int32_t shift,
                                       int8_t *e_x,
                                       int32_t *acc_min,
                                       int32_t *acc_max)
{
    return mt_conv2d_bwd_in_s8_s16_keep_with(params, keep, n_keep, output_dims, e16, filter_dims, filter, input_dims,
                                             multiplier, shift, e_x, acc_min, acc_max, fast_cols);
}
