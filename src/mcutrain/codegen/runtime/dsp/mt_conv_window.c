/*
 * mcutrain runtime: the padded-row window of mt_conv2d_fwd_s8_s16's DSP paths (mt_conv_s16.h).
 *
 * Why: with z_x written into the padding once per row, the im2col of every output pixel is the
 * same word copy (no border cases), and a ring of a few rows keeps the scratch small whatever
 * the image height. With two copies of each row, consecutive rows are contiguous.
 *
 * DSP only: nn/mt_conv_window.c is its empty reference twin, what a build without the DSP
 * twins compiles in its place.
 */
#include <string.h>

#include "mt_conv_s16.h"

#if MT_DSP

int32_t mt_conv_window_row_bytes(const mt_conv_params *p, const mt_dims *in_d, const mt_dims *f_d, int32_t out_w)
{
    return (((out_w - 1) * p->stride_w + f_d->w) * in_d->c + 3 + 3) & ~3;
}

void mt_conv_window_init(mt_conv_window *w,
                         int8_t *buf,
                         int32_t slots,
                         int32_t copies,
                         int32_t row_bytes,
                         const mt_conv_params *p,
                         const mt_dims *in_d,
                         const int8_t *img)
{
    const int32_t lead = p->pad_left * in_d->c;
    const int32_t img_row = in_d->w * in_d->c;
    w->img = img;
    w->buf = buf;
    w->slots = slots;
    w->copies = copies;
    w->row_bytes = row_bytes;
    w->lead = lead < row_bytes ? lead : row_bytes;
    w->copy = img_row < row_bytes - w->lead ? img_row : row_bytes - w->lead;
    w->img_row = img_row;
    w->in_h = in_d->h;
    w->pad_top = p->pad_top;
    w->next = 0;
    w->zx = p->input_zero_point;
}

/* Padded row r into its slot, then (with two copies) into the slot `slots` rows further. */
static void load_row(mt_conv_window *w, int32_t r)
{
    int8_t *d = w->buf + (r % w->slots) * w->row_bytes;
    const int32_t iy = r - w->pad_top;
    if (iy >= 0 && iy < w->in_h) {
        memset(d, w->zx, (size_t)w->lead);
        memcpy(d + w->lead, w->img + iy * w->img_row, (size_t)w->copy);
        memset(d + w->lead + w->copy, w->zx, (size_t)(w->row_bytes - w->lead - w->copy));
    } else {
        memset(d, w->zx, (size_t)w->row_bytes);
    }
    if (w->copies == 2) {
        memcpy(d + w->slots * w->row_bytes, d, (size_t)w->row_bytes);
    }
}

const int8_t *mt_conv_window_rows(mt_conv_window *w, int32_t first, int32_t last)
{
    int32_t r = w->next;
    if (r < last + 1 - w->slots) {
        r = last + 1 - w->slots; /* rows before these are never read again */
    }
    for (; r <= last; r++) {
        load_row(w, r);
    }
    if (w->next < last + 1) {
        w->next = last + 1;
    }
    return w->buf + (first % w->slots) * w->row_bytes;
}

#else /* !MT_DSP */

/* ISO C forbids an empty translation unit. */
typedef int mt_conv_window_unused;

#endif /* MT_DSP */
