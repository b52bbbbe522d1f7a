/*
 * Depthwise kernels on seeded data (xorshift32), printed: built once against the reference
 * runtime and once against the DSP twins (MT_EMULATE_DSP on a host, native on a core), whose
 * outputs tests/codegen/test_depthwise_dsp.py compares byte for byte.
 * Arguments: kind n h w c kh kw stride pad z_x z_y act_min act_max shift_lo shift_hi seed
 *   kind 0: mt_depthwise_conv2d_fwd_s8        kind 1: mt_depthwise_conv2d_fwd_s8_range
 *   kind 2: mt_grouped_conv2d_bwd_in_s8_s16   kind 3: mt_grouped_conv2d_bwd_w_s8_s8
 *   kind 4: mt_grouped_conv2d_bwd_in_s8_s16 into float32 reals (a tensor with several consumers)
 *   kind 5: mt_grouped_conv2d_bwd_in_s8_s16, range only from an empty range (a first step's range pass)
 *   kind 6: kind 2 with the multiplier's five low bits cleared (the error output stage's SMLAL form)
 */
#include <string.h>
#include <stdio.h>
#include <stdlib.h>

#include "mt_depthwise_conv2d_fwd_s8.c"
#include "mt_depthwise_conv2d_fwd_s8_range.c"
#include "mt_grouped_conv2d_bwd_in_s8_s16.c"
#include "mt_grouped_conv2d_bwd_w_s8_s8.c"

static uint32_t rng_state;

static int32_t rnd(int32_t lo, int32_t hi) /* uniform-ish in [lo, hi] */
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 17;
    rng_state ^= rng_state << 5;
    return lo + (int32_t)(rng_state % (uint32_t)(hi - lo + 1));
}

int main(int argc, char **argv)
{
    int32_t a[16], i, nx, nw, ny, st = 0;
    mt_dims in_d, f_d, out_d;
    mt_conv_params p;
    mt_per_channel_quant q;
    int8_t *x, *w, *y;
    int32_t *b, *m, *s, *lo, *hi, *g, *gb;
    int16_t *e16;
    if (argc != 17) {
        return 2;
    }
    for (i = 0; i < 16; ++i) {
        a[i] = (int32_t)atol(argv[i + 1]);
    }
    rng_state = (uint32_t)a[15] | 1u;
    in_d.n = a[1]; in_d.h = a[2]; in_d.w = a[3]; in_d.c = a[4];
    f_d.n = a[4]; f_d.h = a[5]; f_d.w = a[6]; f_d.c = 1;
    p.stride_h = p.stride_w = a[7];
    p.pad_top = p.pad_left = a[8];
    p.input_zero_point = a[9]; p.output_zero_point = a[10]; p.act_min = a[11]; p.act_max = a[12];
    p.groups = a[4];
    out_d.n = in_d.n; out_d.c = in_d.c;
    out_d.h = (in_d.h + 2 * a[8] - a[5]) / a[7] + 1;
    out_d.w = (in_d.w + 2 * a[8] - a[6]) / a[7] + 1;
    nx = in_d.n * in_d.h * in_d.w * in_d.c;
    nw = f_d.n * f_d.h * f_d.w;
    ny = out_d.n * out_d.h * out_d.w * out_d.c;
    x = malloc((size_t)nx); w = malloc((size_t)nw); y = malloc((size_t)ny);
    e16 = malloc(2u * (size_t)ny);
    b = malloc(4u * (size_t)in_d.c); m = malloc(4u * (size_t)in_d.c); s = malloc(4u * (size_t)in_d.c);
    lo = malloc(4u * (size_t)in_d.c); hi = malloc(4u * (size_t)in_d.c);
    g = malloc(4u * (size_t)nw); gb = malloc(4u * (size_t)in_d.c);
    for (i = 0; i < nx; ++i) { x[i] = (int8_t)rnd(-128, 127); }
    for (i = 0; i < nw; ++i) { w[i] = (int8_t)rnd(-127, 127); g[i] = rnd(-100000, 100000); }
    for (i = 0; i < ny; ++i) { y[i] = (int8_t)rnd(-127, 127); e16[i] = (int16_t)rnd(-32512, 32512); }
    for (i = 0; i < in_d.c; ++i) {
        b[i] = rnd(-40000, 40000);
        m[i] = rnd(1 << 30, 0x7FFFFFFF);
        s[i] = rnd(a[13], a[14]);
        lo[i] = rnd(-10, 10);
        hi[i] = lo[i];
        gb[i] = rnd(-1000, 1000);
    }
    q.multiplier = m;
    q.shift = s;
    if (a[0] == 0) {
        st = mt_depthwise_conv2d_fwd_s8(&p, &q, &in_d, x, &f_d, w, b, &out_d, y);
    } else if (a[0] == 1) {
        st = mt_depthwise_conv2d_fwd_s8_range(0, &p, &q, &in_d, x, &f_d, w, b, &out_d, y, lo, hi);
    } else if (a[0] == 2 || a[0] == 6) { /* 6: a multiplier with five trailing zero bits */
        int32_t emin = 0, emax = 0;
        const int32_t mul = a[0] == 6 ? (int32_t)((uint32_t)m[0] & ~31u) : m[0];
        st = mt_grouped_conv2d_bwd_in_s8_s16(&p, &out_d, e16, &f_d, w, &in_d, mul, s[0], x, 0.0f, 0, &emin, &emax);
        printf("%d %d\n", (int)emin, (int)emax);
        for (i = 0; i < nx; ++i) { printf("%d ", (int)x[i]); } /* the error of the input, written over x */
        printf("\n");
    } else if (a[0] == 5) {
        int32_t emin = INT32_MAX, emax = INT32_MIN;
        st = mt_grouped_conv2d_bwd_in_s8_s16(&p, &out_d, e16, &f_d, w, &in_d, 0, 0, 0, 0.0f, 0, &emin, &emax);
        printf("%ld %ld\n", (long)emin, (long)emax);
    } else if (a[0] == 4) {
        int32_t emin = 0, emax = 0;
        float *er = malloc(4u * (size_t)nx);
        st = mt_grouped_conv2d_bwd_in_s8_s16(&p, &out_d, e16, &f_d, w, &in_d, 0, 0, 0, 0x1p-20f, er, &emin, &emax);
        for (i = 0; i < nx; ++i) { /* the bits of each float */
            uint32_t bits;
            memcpy(&bits, &er[i], 4);
            printf("%08lx ", (unsigned long)bits);
        }
        printf("\n");
        free(er);
    } else {
        st = mt_grouped_conv2d_bwd_w_s8_s8(&p, &in_d, x, &out_d, y, &f_d, g, gb);
    }
    printf("status %d\n", (int)st);
    if (a[0] == 3) {
        for (i = 0; i < nw; ++i) { printf("%ld ", (long)g[i]); }
        printf("\n");
        for (i = 0; i < in_d.c; ++i) { printf("%ld ", (long)gb[i]); }
    } else {
        for (i = 0; i < ny; ++i) { printf("%d ", (int)y[i]); }
    }
    printf("\n");
    if (a[0] == 1) {
        for (i = 0; i < in_d.c; ++i) { printf("%ld %ld ", (long)lo[i], (long)hi[i]); }
        printf("\n");
    }
    free(x); free(w); free(y); free(e16); free(b); free(m); free(s); free(lo); free(hi); free(g); free(gb);
    return 0;
}
