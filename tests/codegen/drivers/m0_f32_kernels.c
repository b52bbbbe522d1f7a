/* The m0/ BP-QAS kernels (renamed m0_*) against their references (test_m0_f32.py): argv n seed. */
#include "m0_f32_common.h"
#include "mt_train.h"
mt_status m0_conv2d_bwd_w_row_s8_f32(const mt_conv_params *, const mt_dims *, const int8_t *, const mt_dims *,
                                     const float *, const mt_dims *, int32_t, float *);
mt_status m0_conv2d_bwd_in_s8_f32(const mt_conv_params *, const mt_dims *, const float *, const mt_dims *,
                                  const int8_t *, const mt_dims *, float *);
mt_status m0_linear_bwd_in_s8_f32(int32_t, int32_t, const float *, const int8_t *, int32_t, float *);
mt_status m0_linear_bwd_w_row_s8_f32(int32_t, int32_t, const int8_t *, int32_t, const float *, int32_t, int32_t,
                                     float *);
mt_status m0_qas_upd_s8_f32(int32_t, int32_t, const float *, const float *, uint32_t *, int8_t *);
static long compared, bad;
static void check(const char *what, const float *a, const float *b, long n)
{
    long i;
    for (i = 0; i < n; ++i, ++compared) {
        if (!same(bits(a[i]), bits(b[i]))) {
            if (bad++ < 5) printf("%s[%ld]: twin %08x, reference %08x\n", what, i, bits(b[i]), bits(a[i]));
            return;
        }
    }
}
/* an error tensor: mostly 0.0, else normal over a narrow range, now and then any class */
static void errors(float *e, long n)
{
    long i;
    for (i = 0; i < n; ++i) {
        const uint32_t u = below(10) < 7 ? 0u : below(50) == 0 ? operand() : (rnd() & 0x807FFFFFu) | ((110u + below(12)) << 23);
        e[i] = f32(u);
    }
}
int main(int argc, char **argv)
{
    enum { MAXE = 4096 };
    static float e[MAXE], g1[MAXE], g2[MAXE], k[64];
    static int8_t in[MAXE], w[MAXE], w1[MAXE], w2[MAXE];
    const long n = argc > 1 ? atol(argv[1]) : 1;
    long it;
    s = (uint32_t)atol(argv[2]);
    for (it = 0; it < n; ++it) {
        const int32_t groups = below(4) == 0 ? 2 : 1, cg = 1 + (int32_t)below(4), og = 1 + (int32_t)below(4);
        const int32_t kh = 1 + (int32_t)below(3), kw = 1 + (int32_t)below(3), sh = 1 + (int32_t)below(2), sw = 1 + (int32_t)below(2);
        const int32_t ph = (int32_t)below((uint32_t)kh), pw = (int32_t)below((uint32_t)kw), nb = 1 + (int32_t)below(2);
        const int32_t h = kh + (int32_t)below(6), wd = kw + (int32_t)below(6);
        const int32_t ho = (h + 2 * ph - kh) / sh + 1, wo = (wd + 2 * pw - kw) / sw + 1, zx = (int32_t)below(256) - 128;
        const mt_conv_params p = {zx, 0, sh, sw, ph, pw, groups, -128, 127};
        const mt_dims id = {nb, h, wd, cg * groups}, fd = {og * groups, kh, kw, cg}, od = {nb, ho, wo, og * groups};
        const long ni = (long)nb * h * wd * cg * groups, no = (long)nb * ho * wo * og * groups, nf = (long)og * groups * kh * kw * cg;
        int32_t c, i;
        if (ni > MAXE || no > MAXE || nf > MAXE) continue;
        errors(e, no);
        for (i = 0; i < ni; ++i) in[i] = (int8_t)(below(3) == 0 ? zx : (int32_t)below(256) - 128);
        for (i = 0; i < nf; ++i) w[i] = (int8_t)(below(6) == 0 ? 0 : (int32_t)below(255) - 127);
        for (c = 0; c < og * groups; ++c) {
            mt_conv2d_bwd_w_row_s8_f32(&p, &id, in, &od, e, &fd, c, g1);
            m0_conv2d_bwd_w_row_s8_f32(&p, &id, in, &od, e, &fd, c, g2);
            check("conv2d_bwd_w_row", g1, g2, (long)kh * kw * cg);
        }
        mt_conv2d_bwd_in_s8_f32(&p, &od, e, &fd, w, &id, g1);
        m0_conv2d_bwd_in_s8_f32(&p, &od, e, &fd, w, &id, g2);
        check("conv2d_bwd_in", g1, g2, ni);
        { /* linear: batch nb, out_features o, in_features f */
            const int32_t o = 1 + (int32_t)below(40), f = 1 + (int32_t)below(60);
            errors(e, (long)nb * o);
            mt_linear_bwd_in_s8_f32(nb, o, e, w, f, g1);
            m0_linear_bwd_in_s8_f32(nb, o, e, w, f, g2);
            check("linear_bwd_in", g1, g2, (long)nb * f);
            for (c = 0; c < o; c += 1 + (int32_t)below(5)) {
                mt_linear_bwd_w_row_s8_f32(zx, nb, in, f, e, o, c, g1);
                m0_linear_bwd_w_row_s8_f32(zx, nb, in, f, e, o, c, g2);
                check("linear_bwd_w_row", g1, g2, f);
            }
        }
        { /* QAS update: gradients of every size; steps at ties (nearest) and sums g * k + r that are
             exact integers (stochastic: g * k = -j - r for the draw r that weight gets), both modes */
            const int32_t ch = 1 + (int32_t)below(8), per = 1 + (int32_t)below(200);
            const uint32_t seed = rnd() | 1u;
            uint32_t ahead = seed;
            for (c = 0; c < ch; ++c) {
                k[c] = below(8) == 0 ? f32(operand()) : f32(((120u + below(16)) << 23) | (below(2) ? 0u : rnd() & 0x7FFFFFu));
            }
            for (i = 0; i < ch * per; ++i) {
                const float r = (float)(int32_t)(mt_xorshift32_next(&ahead) >> 8) * (1.0f / 16777216.0f);
                const float kc = k[i / per];
                switch (below(6)) {
                case 0: g1[i] = 0.0f; break;
                case 1: g1[i] = f32(operand()); break;
                case 2: g1[i] = ((float)((int32_t)below(600) - 300) + 0.5f) / kc; break;
                case 3: g1[i] = (-(float)below(300) - r) / kc; break;
                default: g1[i] = (float)((int32_t)below(4001) - 2000) / (float)(1 + below(64)) / kc;
                }
                w1[i] = w2[i] = (int8_t)((int32_t)below(256) - 128);
            }
            {
                uint32_t r1 = seed, r2 = seed;
                mt_qas_upd_s8_f32(ch, per, g1, k, &r1, w1);
                m0_qas_upd_s8_f32(ch, per, g1, k, &r2, w2);
                compared += ch * per;
                if ((memcmp(w1, w2, (size_t)(ch * per)) || r1 != r2) && bad++ < 5) printf("qas_upd stochastic differs\n");
                memcpy(w2, w1, (size_t)(ch * per));
                mt_qas_upd_s8_f32(ch, per, g1, k, NULL, w1);
                m0_qas_upd_s8_f32(ch, per, g1, k, NULL, w2);
                compared += ch * per;
                if (memcmp(w1, w2, (size_t)(ch * per)) && bad++ < 5) printf("qas_upd nearest differs\n");
            }
        }
    }
    printf("compared %ld bad %ld\n", compared, bad);
    return 0;
}
