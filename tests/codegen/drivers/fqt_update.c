/*
 * mt_fqt_upd_s8 on seeded rows (xorshift32), every output printed in hex: built once against the
 * portable reference (MT_KERNELS_REF) and once against the Helium twin, whose outputs
 * tests/codegen/test_fqt_update_mve_mcu.py compares byte for byte. Row lengths 1 to 33 (vector
 * passes after every head of n % 4 scalar slots); per case one of the kinds below, chosen to reach the twin's checks:
 *   0 typical gradients            1 zero rows: sd == 0 (scalar step)
 *   2 subnormal g_scale (scalar)   3 g_scale 2^-126 and 2^-120: real gradients near the subnormals
 *   4 initialized EMAs whose mu is tiny (norm_mu 0, 2^-100, 2^-99, subnormal) over subnormal real
 *     gradients (g_scale 1e-40): the check of |mu| >= 2^-100 on both sides
 *   5 s_w 2^-126 and subnormal     6 large gradients, a row mask (rows 1 mod 3 skipped)
 * One call per (length, kind); the stream state runs on from call to call.
 */
#include <stdio.h>
#include <string.h>

#include "mt_fqt.h"

#define MAXC 4
#define MAXK 33

static uint32_t rng_state = 12345u;

static uint32_t next(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 17;
    rng_state ^= rng_state << 5;
    return rng_state;
}

static int32_t rnd(int32_t lo, int32_t hi) /* uniform-ish in [lo, hi] */
{
    return lo + (int32_t)(next() % (uint32_t)(hi - lo + 1));
}

static uint32_t bits(float f)
{
    uint32_t b;
    memcpy(&b, &f, 4);
    return b;
}

static void put_f(const char *what, const float *v, int32_t n)
{
    int32_t i;
    printf("%s", what);
    for (i = 0; i < n; ++i) {
        printf(" %08lx", (unsigned long)bits(v[i]));
    }
    printf("\n");
}

int main(void)
{
    static const int32_t lens[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 13, 16, 17, 33};
    static const float tiny_mu[] = {0.0f, 0x1p-100f, 0x1p-99f, 1e-39f};
    int32_t grad[MAXC * MAXK], grad_bias[MAXC], i, o, li, kind;
    int8_t w[MAXC * MAXK], init[MAXC];
    float mu[MAXC], sd[MAXC], s_w[MAXC], lo[MAXC], hi[MAXC], step[MAXC];
    uint8_t upd[MAXC];
    uint32_t state = 0x9E3779B9u;
    for (li = 0; li < (int32_t)(sizeof lens / sizeof lens[0]); ++li) {
        const int32_t k = lens[li];
        for (kind = 0; kind < 7; ++kind) {
            mt_fqt_upd_params p = {0.05f, 0.1f, 0.001f, 1e-6f, 1e-4f};
            const int32_t big = kind == 6 ? (1 << 30) : (1 << 16);
            mt_status st;
            for (o = 0; o < MAXC; ++o) {
                grad_bias[o] = kind == 1 || kind == 4 ? 0 : rnd(-big, big);
                init[o] = kind == 4 || (kind != 1 && o == 3);
                mu[o] = kind == 4 ? tiny_mu[o] : 1e-3f * (float)rnd(-100, 100);
                sd[o] = kind == 4 ? 1e-3f : 1e-3f * (float)rnd(1, 100);
                s_w[o] = kind == 5 ? (o & 1 ? 1e-39f : 0x1p-126f) : 1e-3f * (float)rnd(1, 50);
                lo[o] = -0.1f * (float)rnd(0, 3);
                hi[o] = 0.1f * (float)rnd(0, 3);
                upd[o] = kind != 6 || o % 3 != 1;
                for (i = 0; i < k; ++i) {
                    grad[o * k + i] = kind == 1 ? 0 : (kind == 4 ? rnd(-3, 3) : rnd(-big, big));
                    w[o * k + i] = (int8_t)rnd(-127, 127);
                }
            }
            if (kind == 2 || kind == 4) {
                p.g_scale = 1e-40f;
            } else if (kind == 3) {
                p.g_scale = k & 1 ? 0x1p-126f : 0x1p-120f;
                p.gb_scale = 0x1p-126f;
            }
            st = mt_fqt_upd_s8(&p, MAXC, k, grad, grad_bias, kind == 6 ? upd : NULL, mu, sd, init, w, s_w, lo, hi, step,
                               &state);
            printf("k %ld kind %d status %d state %08lx\n", (long)k, (int)kind, (int)st, (unsigned long)state);
            put_f("real", (const float *)(const void *)grad, MAXC * k);
            for (i = 0; i < MAXC * k; ++i) {
                printf(" %d", w[i]);
            }
            printf("\n");
            put_f("mu", mu, MAXC);
            put_f("sd", sd, MAXC);
            put_f("s_w", s_w, MAXC);
            put_f("lo", lo, MAXC);
            put_f("hi", hi, MAXC);
            put_f("step", step, MAXC);
        }
    }
    return 0;
}
