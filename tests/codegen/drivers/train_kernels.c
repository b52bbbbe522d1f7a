/*
 * Per-kernel driver of the training kernels: train_kernels CASES RESULTS.
 *
 * CASES is a sequence of records of little-endian int32 words: kernel id, array count, then per
 * array its word count and words (int8 and float values travel as int32 words / float bits;
 * int64 values as (low, high) word pairs). RESULTS gets per record the kernel's outputs as a
 * sequence of (byte count, bytes) blocks. tests/codegen/test_train_kernels.py writes the cases
 * and compares each block with the Python twin. Memory comes from one static arena per record.
 */
#include <stdio.h>
#include <string.h>

#include "mt_train.h"

#define MAX_ARRAYS 16
#define ARENA_BYTES (4 * 1024 * 1024)

static uint8_t arena[ARENA_BYTES];
static size_t arena_used;
static int32_t *arr[MAX_ARRAYS];
static int32_t len[MAX_ARRAYS];
static FILE *out;

static void *alloc(size_t bytes)
{
    void *p = arena + arena_used;
    arena_used += (bytes + 7u) & ~(size_t)7u;
    if (arena_used > sizeof(arena)) {
        fprintf(stderr, "arena too small\n");
        return NULL;
    }
    memset(p, 0, bytes);
    return p;
}

static void emit(const void *p, size_t bytes)
{
    const int32_t n = (int32_t)bytes;
    fwrite(&n, 4, 1, out);
    fwrite(p, 1, bytes, out);
}

static void emit_i32(int32_t v)
{
    emit(&v, 4);
}

static int8_t *as_s8(int32_t i)
{
    int8_t *p = alloc((size_t)len[i] + 1u);
    int32_t k;
    for (k = 0; k < len[i]; ++k) {
        p[k] = (int8_t)arr[i][k];
    }
    return p;
}

static float *as_f32(int32_t i)
{
    return (float *)arr[i]; /* float bits, 4-byte aligned */
}

static int64_t *as_s64(int32_t i)
{
    int64_t *p = alloc(8u * (size_t)(len[i] / 2) + 8u);
    int32_t k;
    for (k = 0; k < len[i] / 2; ++k) {
        p[k] = (int64_t)(((uint64_t)(uint32_t)arr[i][2 * k + 1] << 32) | (uint32_t)arr[i][2 * k]);
    }
    return p;
}

static float f32_word(int32_t w)
{
    float f;
    memcpy(&f, &w, 4);
    return f;
}

static void conv_setup(const int32_t *a, mt_conv_params *p, mt_dims *in, mt_dims *f, mt_dims *o)
{
    /* a: N H W C  O kh kw  Ho Wo  sh sw pt pl groups zx */
    in->n = a[0];
    in->h = a[1];
    in->w = a[2];
    in->c = a[3];
    f->n = a[4];
    f->h = a[5];
    f->w = a[6];
    f->c = a[3] / a[13];
    o->n = a[0];
    o->h = a[7];
    o->w = a[8];
    o->c = a[4];
    memset(p, 0, sizeof(*p));
    p->stride_h = a[9];
    p->stride_w = a[10];
    p->pad_top = a[11];
    p->pad_left = a[12];
    p->groups = a[13];
    p->input_zero_point = a[14];
}

static int run_case(int32_t id)
{
    const int32_t *a = arr[0];
    switch (id) {
    case 1: { /* xorshift32: seed, n -> seeded state, u32[n], rademacher[n], uniform[n], state */
        uint32_t s = mt_xorshift32_seed((uint32_t)a[0]);
        const int32_t n = a[1];
        uint32_t *u = alloc(4u * (size_t)n);
        int32_t *r = alloc(4u * (size_t)n);
        float *f = alloc(4u * (size_t)n);
        int32_t k;
        emit(&s, 4);
        mt_xorshift32_draw_u32(&s, n, u);
        for (k = 0; k < n; ++k) {
            r[k] = mt_xorshift32_rademacher(&s);
        }
        for (k = 0; k < n; ++k) {
            f[k] = mt_xorshift32_uniform01(&s);
        }
        emit(u, 4u * (size_t)n);
        emit(r, 4u * (size_t)n);
        emit(f, 4u * (size_t)n);
        emit(&s, 4);
        return 0;
    }
    case 2: { /* rounding: [state], x f32[n] -> half-away[n], stochastic[n], state */
        uint32_t s = (uint32_t)a[0];
        const int32_t n = len[1];
        const float *x = as_f32(1);
        float *h = alloc(4u * (size_t)n);
        float *st = alloc(4u * (size_t)n);
        int32_t k;
        for (k = 0; k < n; ++k) {
            h[k] = mt_round_half_away_f32(x[k]);
        }
        for (k = 0; k < n; ++k) {
            st[k] = mt_round_stochastic_f32(x[k], &s);
        }
        emit(h, 4u * (size_t)n);
        emit(st, 4u * (size_t)n);
        emit(&s, 4);
        return 0;
    }
    case 3: { /* [state, shift], x s64[n] -> stochastic shift s64[n], state */
        uint32_t s = (uint32_t)a[0];
        const int32_t n = len[1] / 2;
        int64_t *x = as_s64(1);
        int32_t k;
        for (k = 0; k < n; ++k) {
            x[k] = mt_stochastic_shift_right_s64(x[k], a[1], &s);
        }
        emit(x, 8u * (size_t)n);
        emit(&s, 4);
        return 0;
    }
    case 4: { /* softmax CE: [B, K, scale], logits, labels -> status, loss[B], err[B*K] */
        const int32_t b = a[0];
        const int32_t k = a[1];
        int32_t *loss = alloc(4u * (size_t)b);
        int32_t *err = alloc(4u * (size_t)b * (size_t)k);
        emit_i32(mt_softmax_ce_s8(b, k, as_s8(1), f32_word(a[2]), arr[2], loss, err));
        emit(loss, 4u * (size_t)b);
        emit(err, 4u * (size_t)b * (size_t)k);
        return 0;
    }
    case 5: { /* WP perturbation: [state, sigma_w, sigma_b], w, b -> status, w', b', state */
        uint32_t s = (uint32_t)a[0];
        int8_t *w = alloc((size_t)len[1] + 1u);
        int32_t *b = alloc(4u * (size_t)len[2] + 4u);
        emit_i32(mt_zo_perturb_wp_s8(&s, a[1], a[2], len[1], as_s8(1), len[2], arr[2], w, b));
        emit(w, (size_t)len[1]);
        emit(b, 4u * (size_t)len[2]);
        emit(&s, 4);
        return 0;
    }
    case 6: { /* NP perturbation: [state, sigma, act_min, act_max], y -> status, y', state */
        uint32_t s = (uint32_t)a[0];
        int8_t *y = alloc((size_t)len[1] + 1u);
        emit_i32(mt_zo_perturb_np_s8(&s, a[1], a[2], a[3], len[1], as_s8(1), y));
        emit(y, (size_t)len[1]);
        emit(&s, 4);
        return 0;
    }
    case 7: { /* WP accumulation: [state], dl s64[1], sums s64[d] -> status, sums, state */
        uint32_t s = (uint32_t)a[0];
        int64_t *dl = as_s64(1);
        int64_t *sums = as_s64(2);
        emit_i32(mt_zo_accumulate_wp_s64(&s, dl[0], len[2] / 2, sums));
        emit(sums, 4u * (size_t)len[2]);
        emit(&s, 4);
        return 0;
    }
    case 8: { /* NP accumulation: [state, B, d, act_min, act_max], dl[B], y[B*d], g[B*d] -> status, g, state */
        uint32_t s = (uint32_t)a[0];
        emit_i32(mt_zo_accumulate_np_s32(&s, a[1], a[2], arr[1], as_s8(2), a[3], a[4], arr[3]));
        emit(arr[3], 4u * (size_t)len[3]);
        emit(&s, 4);
        return 0;
    }
    case 9: { /* coefficients: [numer, dim-1, gns, queries, sigma, batch, s_x, s_y], s_w -> gamma, c0, coef */
        const float gamma = mt_zo_gns_gamma_f32(a[0], a[1], a[2]);
        const float c0 = mt_zo_coef_f32(gamma, a[3], a[4], a[5]);
        float *coef = alloc(4u * (size_t)len[1]);
        emit(&gamma, 4);
        emit(&c0, 4);
        emit_i32(mt_zo_np_coef_f32(c0, f32_word(a[6]), as_f32(1), f32_word(a[7]), len[1], coef));
        emit(coef, 4u * (size_t)len[1]);
        return 0;
    }
    case 10: { /* integer conv weight gradient: conv args, x, g -> status, grad_w s64, grad_b s64 */
        mt_conv_params p;
        mt_dims in;
        mt_dims f;
        mt_dims o;
        int64_t *gw;
        int64_t *gb;
        conv_setup(a, &p, &in, &f, &o);
        gw = alloc(8u * (size_t)f.n * (size_t)f.h * (size_t)f.w * (size_t)f.c);
        gb = alloc(8u * (size_t)f.n);
        emit_i32(mt_conv2d_bwd_w_s8_s32(&p, &in, as_s8(1), &o, arr[2], &f, gw, gb));
        emit(gw, 8u * (size_t)f.n * (size_t)f.h * (size_t)f.w * (size_t)f.c);
        emit(gb, 8u * (size_t)f.n);
        return 0;
    }
    case 11: { /* integer linear weight gradient: [zx, N, I, O], x, g -> status, grad_w, grad_b */
        int64_t *gw = alloc(8u * (size_t)a[2] * (size_t)a[3]);
        int64_t *gb = alloc(8u * (size_t)a[3]);
        emit_i32(mt_linear_bwd_w_s8_s32(a[0], a[1], as_s8(1), a[2], arr[2], a[3], gw, gb));
        emit(gw, 8u * (size_t)a[2] * (size_t)a[3]);
        emit(gb, 8u * (size_t)a[3]);
        return 0;
    }
    case 12: { /* QAS: [lr, O, per, use_scale], coef, scale, sums_w, w, sums_b, b, g_w, g_b ->
                  k, w (s64), b (s64), w (f32), b (f32) */
        const int32_t o = a[1];
        const int32_t per = a[2];
        float *k = alloc(4u * (size_t)o);
        int8_t *w1 = as_s8(4);
        int8_t *w2 = as_s8(4);
        int32_t *b1 = alloc(4u * (size_t)o);
        int32_t *b2 = alloc(4u * (size_t)o);
        memcpy(b1, arr[6], 4u * (size_t)o);
        memcpy(b2, arr[6], 4u * (size_t)o);
        mt_qas_factor_f32(f32_word(a[0]), o, as_f32(1), a[3] ? as_f32(2) : NULL, k);
        emit(k, 4u * (size_t)o);
        mt_qas_upd_s8_s64(o, per, as_s64(3), k, NULL, 254, w1); /* nearest, 254: no step limit */
        mt_qas_upd_s32_s64(o, as_s64(5), k, b1);
        mt_qas_upd_s8_f32(o, per, as_f32(7), k, NULL, w2);
        mt_qas_upd_s32_f32(o, as_f32(8), k, b2);
        emit(w1, (size_t)o * (size_t)per);
        emit(b1, 4u * (size_t)o);
        emit(w2, (size_t)o * (size_t)per);
        emit(b2, 4u * (size_t)o);
        return 0;
    }
    case 13: { /* momentum and bias scale: [mu, s_x], g, v, s_w -> v, bias scale */
        float *bs = alloc(4u * (size_t)len[3]);
        mt_sgd_momentum_f32(len[1], f32_word(a[0]), as_f32(1), as_f32(2));
        mt_qas_bias_scale_f32(f32_word(a[1]), as_f32(3), len[3], bs);
        emit(arr[2], 4u * (size_t)len[2]);
        emit(bs, 4u * (size_t)len[3]);
        return 0;
    }
    case 14: { /* STE conv: conv args, x, e_acc, w -> e_x, grad_w (f32) */
        mt_conv_params p;
        mt_dims in;
        mt_dims f;
        mt_dims o;
        float *ex;
        float *gw;
        size_t nx;
        size_t nw;
        conv_setup(a, &p, &in, &f, &o);
        nx = (size_t)in.n * (size_t)in.h * (size_t)in.w * (size_t)in.c;
        nw = (size_t)f.n * (size_t)f.h * (size_t)f.w * (size_t)f.c;
        ex = alloc(4u * nx);
        gw = alloc(4u * nw);
        if (mt_conv2d_bwd_in_s8_f32(&p, &o, as_f32(2), &f, as_s8(3), &in, ex) != MT_OK ||
            mt_conv2d_bwd_w_s8_f32(&p, &in, as_s8(1), &o, as_f32(2), &f, gw) != MT_OK) {
            return 1;
        }
        emit(ex, 4u * nx);
        emit(gw, 4u * nw);
        return 0;
    }
    case 15: { /* STE linear: [zx, N, I, O], x, e_acc, w -> e_x, grad_w */
        float *ex = alloc(4u * (size_t)a[1] * (size_t)a[2]);
        float *gw = alloc(4u * (size_t)a[2] * (size_t)a[3]);
        if (mt_linear_bwd_in_s8_f32(a[1], a[3], as_f32(2), as_s8(3), a[2], ex) != MT_OK ||
            mt_linear_bwd_w_s8_f32(a[0], a[1], as_s8(1), a[2], as_f32(2), a[3], gw) != MT_OK) {
            return 1;
        }
        emit(ex, 4u * (size_t)a[1] * (size_t)a[2]);
        emit(gw, 4u * (size_t)a[2] * (size_t)a[3]);
        return 0;
    }
    case 16: { /* requant + bias backward: [rows, C, act_min, act_max], e_y, y, slope -> e_acc, grad_b */
        float *e = alloc(4u * (size_t)len[1]);
        float *gb = alloc(4u * (size_t)a[1]);
        if (mt_requant_bwd_s8_f32(a[0], a[1], as_f32(1), as_s8(2), as_f32(3), a[2], a[3], e) != MT_OK ||
            mt_bias_bwd_f32(a[0], a[1], e, gb) != MT_OK) {
            return 1;
        }
        emit(e, 4u * (size_t)len[1]);
        emit(gb, 4u * (size_t)a[1]);
        return 0;
    }
    case 17: { /* pools: [op, N, H, W, C, kh, kw, sh, sw, Ho, Wo], x, y, e_y -> e_x */
        const mt_dims in = {a[1], a[2], a[3], a[4]};
        const mt_dims od = {a[1], a[9], a[10], a[4]};
        const mt_pool_params pp = {a[5], a[6], a[7], a[8]};
        const size_t nx = (size_t)a[1] * (size_t)a[2] * (size_t)a[3] * (size_t)a[4];
        float *ex = alloc(4u * nx);
        mt_status st = a[0] == 3   ? mt_maxpool_bwd_s8_f32(&pp, &in, as_s8(1), &od, as_s8(2), as_f32(3), ex)
                       : a[0] == 4 ? mt_avgpool_bwd_f32(&pp, &in, &od, as_f32(3), ex)
                                   : mt_global_avgpool_bwd_f32(&in, as_f32(3), ex);
        if (st != MT_OK) {
            return 1;
        }
        emit(ex, 4u * nx);
        return 0;
    }
    case 18: { /* relu / add / loss backward: [act_min, act_max, ratio_a, ratio_b, B, K, scale], y, e_y, err
                  -> relu e_x, e_a, e_b, e_logits, e_b alone (e_a NULL, in place), e_x + e_a + e_b */
        const int32_t n = len[1];
        float *er = alloc(4u * (size_t)n);
        float *ea = alloc(4u * (size_t)n);
        float *eb = alloc(4u * (size_t)n);
        float *el = alloc(4u * (size_t)len[3]);
        const int8_t *y = as_s8(1);
        if (mt_relu_bwd_s8_f32(a[0], a[1], n, y, as_f32(2), er) != MT_OK ||
            mt_add_bwd_s8_f32(n, as_f32(2), y, f32_word(a[2]), f32_word(a[3]), a[0], a[1], ea, eb) != MT_OK ||
            mt_softmax_ce_bwd_s32_f32(a[4], a[5], arr[3], f32_word(a[6]), el) != MT_OK) {
            return 1;
        }
        emit(er, 4u * (size_t)n);
        emit(ea, 4u * (size_t)n);
        emit(eb, 4u * (size_t)n);
        emit(el, 4u * (size_t)len[3]);
        {   /* only input b needs an error, written over e_y's copy; then the three errors summed
               into the first one's storage */
            float *ip = alloc(4u * (size_t)n);
            const float *parts[3];
            memcpy(ip, as_f32(2), 4u * (size_t)n);
            parts[0] = er;
            parts[1] = ea;
            parts[2] = eb;
            if (mt_add_bwd_s8_f32(n, ip, y, f32_word(a[2]), f32_word(a[3]), a[0], a[1], NULL, ip) != MT_OK ||
                mt_error_sum_f32(n, 3, parts, er) != MT_OK || mt_error_sum_f32(n, 1, parts, er) != MT_ERR_ARG) {
                return 1;
            }
            emit(ip, 4u * (size_t)n);
            emit(er, 4u * (size_t)n);
        }
        return 0;
    }
    default:
        return 1;
    }
}

int main(int argc, char **argv)
{
    FILE *in;
    int32_t id;
    if (argc < 3) {
        fprintf(stderr, "usage: train_kernels CASES RESULTS\n");
        return 2;
    }
    in = fopen(argv[1], "rb");
    out = fopen(argv[2], "wb");
    if (in == NULL || out == NULL) {
        return 2;
    }
    while (fread(&id, 4, 1, in) == 1) {
        int32_t n = 0;
        int32_t i;
        arena_used = 0;
        if (fread(&n, 4, 1, in) != 1 || n < 1 || n > MAX_ARRAYS) {
            return 3;
        }
        for (i = 0; i < n; ++i) {
            if (fread(&len[i], 4, 1, in) != 1 || len[i] < 0 || (arr[i] = alloc(4u * (size_t)len[i] + 8u)) == NULL ||
                fread(arr[i], 4, (size_t)len[i], in) != (size_t)len[i]) {
                return 3;
            }
        }
        if (run_case(id) != 0) {
            fprintf(stderr, "case %ld failed\n", (long)id);
            return 4;
        }
    }
    fclose(out);
    fclose(in);
    return 0;
}
