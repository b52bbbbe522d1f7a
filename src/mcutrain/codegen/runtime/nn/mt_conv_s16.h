/*
 * mcutrain runtime: internal pieces of mt_conv2d_fwd_s8_s16's DSP paths (not part of the API).
 *
 * Both paths read the input through a window of padded rows (mt_conv_window): the image rows a
 * block of output pixels needs, each copied once per call with z_x in the padding columns (and
 * rows of z_x for the padding rows), so every kernel row of every pixel is one run of bytes and
 * no pixel needs a border case (z_x centres to 0). The window is a ring of `slots` rows: padded
 * row r in slot r % slots. The tiny path stores each row twice (at slot s and s + slots), so
 * its kh consecutive rows are contiguous; the general path stores it once and steps through
 * the slots itself.
 */
#ifndef MT_CONV_S16_H
#define MT_CONV_S16_H

#include <stdint.h>

#include "mt_arch.h"
#include "mt_support.h"
#include "mt_types.h"

/*
 * Index of element e (< kp = kh * R) of weight row o in the exported int16 layout: within each
 * group of opg rows, rows 2i and 2i + 1 interleaved pair by pair ([row 2i: e0 e1][row 2i+1: e0 e1]
 * [row 2i: e2 e3] ...), so one LDRD brings a pair of k for both; an odd last row of a group is
 * stored alone. Each row is the padded kernel rows of mt_nn.h (SMLAD order within fours).
 */
MT_INLINE int32_t mt_w16_index(int32_t o, int32_t e, int32_t opg, int32_t kp)
{
    const int32_t l = o % opg;
    const int32_t base = (o - l + (l & ~1)) * kp;
    if ((opg & 1) && l == opg - 1) {
        return base + e;
    }
    return base + (e >> 1) * 4 + (l & 1) * 2 + (e & 1);
}

/* Pixels (columns) per block of the general path's GEMM (mt_gemm3). */
#define MT_GEMM3_COLS 3

/* Longest padded kernel row R the exporter widens (kh * R <= 256). */
#define MT_S16_ROW_MAX 256

#if MT_DSP

/* The padded-row window of one image (see above). */
typedef struct {
    const int8_t *img; /* the image [H, W, C] */
    int8_t *buf;       /* 2 * slots rows of row_bytes */
    int32_t slots;     /* rows the ring holds */
    int32_t copies;    /* 1, or 2: every row also `slots` rows further */
    int32_t row_bytes; /* bytes of a padded row (a multiple of 4) */
    int32_t lead;      /* pad_left * C bytes of z_x before the image row */
    int32_t copy;      /* bytes of an image row inside the padded row */
    int32_t img_row;   /* W * C */
    int32_t in_h;
    int32_t pad_top;
    int32_t next; /* first padded row not loaded yet */
    int32_t zx;
} mt_conv_window;

/*
 * Bytes of a padded row for a conv over `in_d` whose output is `out_w` wide: every tap of every
 * output pixel, plus 3 bytes that kernel rows padded to four (or read by words) may read past
 * the last tap (they meet zero weights), rounded up to 4.
 */
int32_t mt_conv_window_row_bytes(const mt_conv_params *p, const mt_dims *in_d, const mt_dims *f_d, int32_t out_w);

/* Set the window up on `buf` (copies * slots * row_bytes bytes) for the image at `img`. */
void mt_conv_window_init(mt_conv_window *w,
                         int8_t *buf,
                         int32_t slots,
                         int32_t copies,
                         int32_t row_bytes,
                         const mt_conv_params *p,
                         const mt_dims *in_d,
                         const int8_t *img);

/*
 * Padded rows first .. last (padded coordinates: image row + pad_top; last - first < slots,
 * first never smaller than in the previous call) loaded, and a pointer to row `first` (with two
 * copies, row first + i starts i * row_bytes further).
 */
const int8_t *mt_conv_window_rows(mt_conv_window *w, int32_t first, int32_t last);

/*
 * Requantization constants of the 2x3 GEMM into prep: per row pair (bias0, bias1, m0, c1_0, sh0,
 * m1, c1_1, sh1), for an odd last row (bias, m, c1, sh). Returns 1 (mt_requantize_floor: zero
 * point -128), 2 (mt_requantize_fast) or 0 when some row needs the general mt_requantize (prep
 * is then not written).
 */
int mt_gemm3_prepare(const mt_gemm_out *q, int32_t rows, int32_t *prep);

/*
 * `rows` weight rows (exported layout, k int16 each, k a multiple of 4, 4-byte aligned) times
 * three columns (cols: k / 2 pairs, pair p of column j at word 3 p + j, centred int16):
 * out[j * stride + r] = requant(bias[r] + w[r] . column j) for j < 3, r < rows; prep and mode
 * from mt_gemm3_prepare.
 */
void mt_gemm3(const int16_t *w,
              const int32_t *cols,
              int32_t rows,
              int32_t k,
              const mt_gemm_out *q,
              const int32_t *prep,
              int mode,
              int8_t *out,
              int32_t stride);

/* Words of one pixel's column in the tiny path (kh * kw * Cg <= 10 values, in pairs). */
#define MT_TINY_WORDS 5

/* Int32 words of one output channel's record in the tiny path: five weight pairs, the bias, the
   multiplier, c1 and sh (mt_fixedpoint.h). */
#define MT_TINY_RECORD 9

/* Pixels whose columns the tiny path builds per call of its channel loop. */
#define MT_TINY_PIXELS 16

/*
 * Whether the tiny path takes a conv of these shapes: groups == 1, O a multiple of 4 and a
 * column of at most MT_TINY_WORDS pairs (mt_conv_tiny_words).
 */
int mt_conv_tiny_fits(const mt_conv_params *p, const mt_dims *f_d);

/* Pairs of one tiny column: per kernel row of L = kw * C values, the full pairs of its groups of
   four, and the half-filled pairs of its last group packed two by two across kernel rows. */
int32_t mt_conv_tiny_words(const mt_dims *f_d);

/* Scratch bytes of the tiny path (window of kh rows, records, columns of MT_TINY_PIXELS). */
int32_t mt_conv_tiny_buffer_size(const mt_conv_params *p, const mt_dims *in_d, const mt_dims *f_d,
                                 const mt_dims *out_d);

/*
 * The tiny path of mt_conv2d_fwd_s8_s16: one pixel's column held in registers while every output
 * channel's record (weights, bias, requantization constants) streams past it. Returns 0 (and
 * does nothing) when the layer's requantization does not allow it (then the general path runs).
 */
int mt_conv_tiny(const mt_conv_params *p,
                 const mt_per_channel_quant *q,
                 const mt_dims *in_d,
                 const int8_t *input,
                 const mt_dims *f_d,
                 const int16_t *filter,
                 const int32_t *bias,
                 const mt_dims *out_d,
                 int8_t *output,
                 int8_t *scratch);

#endif /* MT_DSP */

#endif /* MT_CONV_S16_H */
