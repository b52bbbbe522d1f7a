/* mt_m0_f32.h against the host's float32 operations (test_m0_f32.py): argv n seed; prints counts. */
#include "m0_f32_common.h"
#include "mt_m0_f32.h"
int main(int argc, char **argv)
{
    const long n = atol(argv[1]);
    long i, terms = 0, fast = 0, bad = 0, adds = 0, prods = 0, pfast = 0;
    s = (uint32_t)atol(argv[2]);
    for (i = 0; i < n; ++i) {
        /* one sum from +0.0: term by term (runs of one) and in one run, against float32 */
        enum { L = 48 };
        uint32_t e[L];
        int8_t x[L];
        const int32_t zx = (int32_t)below(256) - 128;
        const uint32_t base = operand();
        const int len = 1 + (int)below(L);
        float ref = 0.0f;
        mt_m0_f32 a = {0u, MT_M0_F32_ZERO, 0u}, whole = {0u, MT_M0_F32_ZERO, 0u};
        int k;
        for (k = 0; k < len; ++k) {
            float ek;
            mt_m0_f32 probe = a;
            e[k] = below(3) == 0 ? operand() : base ^ (rnd() & (below(2) ? 0xFFu : 0x807FFFFFu));
            x[k] = (int8_t)(below(4) == 0 ? zx : (int32_t)below(256) - 128);
            if (below(4) == 0) { /* the exact negative of the sum so far: cancellation to +0.0 */
                const uint32_t neg = bits(ref) ^ 0x80000000u;
                if (((neg << 1) >> 24) - 1u < 254u && zx < 127) {
                    e[k] = neg;
                    x[k] = (int8_t)(zx + 1);
                }
            }
            memcpy(&ek, &e[k], 4);
            ref = ref + (float)(x[k] - zx) * ek;
            if ((e[k] << 1) != 0u && x[k] != zx && a.e != MT_M0_F32_PACKED) {
                fast += !mt_m0_f32_mac_fast(&probe, e[k], x[k] - zx);
            }
            mt_m0_f32_run(&a, &ek, 1, &x[k], 1, zx, 1);
            ++terms;
            if (!same(mt_m0_f32_pack(&a), bits(ref))) {
                if (bad++ < 5) printf("mac %08x * %d: %08x, float32 %08x\n", e[k], x[k] - zx, mt_m0_f32_pack(&a), bits(ref));
                break;
            }
        }
        if (k == len) {
            mt_m0_f32_run(&whole, (const float *)(const void *)e, 1, x, 1, zx, len);
            if (!same(mt_m0_f32_pack(&whole), bits(ref)) && bad++ < 5) printf("run of %d: %08x, float32 %08x\n", len, mt_m0_f32_pack(&whole), bits(ref));
        }
        { /* the add of two sums */
            uint32_t p = operand(), q = below(2) ? operand() : (p ^ 0x80000000u) + below(5) - 2u;
            mt_m0_f32 ap, aq;
            if (p == 0x80000000u) p = 0u; /* a sum is never -0.0 */
            mt_m0_f32_unpack(&ap, p);
            mt_m0_f32_unpack(&aq, q);
            mt_m0_f32_add(&ap, &aq);
            ++adds;
            if (!same(mt_m0_f32_pack(&ap), bits(f32(p) + f32(q))) && bad++ < 5) printf("add %08x + %08x: %08x, float32 %08x\n", p, q, mt_m0_f32_pack(&ap), bits(f32(p) + f32(q)));
        }
        { /* the product of two float32 */
            uint32_t p = operand(), q = operand();
            mt_m0_f32 o;
            if (below(4) == 0) q = (q & 0xFF800000u) | (1u << below(23)) | (1u << below(23));
            ++prods;
            if (!mt_m0_f32_mul_fast(&o, p, q)) {
                ++pfast;
                if (!same(mt_m0_f32_pack(&o), bits(f32(p) * f32(q))) && bad++ < 5) printf("mul %08x * %08x: %08x, float32 %08x\n", p, q, mt_m0_f32_pack(&o), bits(f32(p) * f32(q)));
            }
        }
    }
    printf("terms %ld mac_fast %ld adds %ld products %ld mul_fast %ld bad %ld\n", terms, fast, adds, prods, pfast, bad);
    return 0;
}
