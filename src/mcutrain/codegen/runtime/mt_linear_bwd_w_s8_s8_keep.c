/*
 * Linear weight and bias gradients of the kept rows of a partial update (Python twin:
 * fqt_kernels.linear_bwd_w_acc and bias_grad_acc in mode "int" on the kept rows): one sample, the
 * kept rows overwritten, the pruned rows (zero errors) not touched.
 * DSP path: x - z_x as int16 pairs once per call (a block on the stack), then per row two products
 * per loaded word (SMULBB, SMULTB).
 */
#include "mt_arch.h"
#include "mt_fqt_keep.h"
#include "mt_train_dsp.h"

#define MT_BWD_W_XBLOCK 256 /* inputs widened at once: 128 words of stack */

mt_status mt_linear_bwd_w_s8_s8_keep(int32_t input_zero_point,
                                     const int32_t *keep,
                                     int32_t n_keep,
                                     const int8_t *input,
                                     int32_t in_features,
                                     const int8_t *e,
                                     int32_t *grad,
                                     int32_t *grad_bias)
{
    int32_t t, i;
    if (!keep || !input || !e || !grad || !grad_bias || n_keep < 0 || in_features < 1) {
        return MT_ERR_ARG;
    }
    for (t = 0; t < n_keep; ++t) {
        grad_bias[keep[t]] = e[keep[t]];
    }
#if MT_DSP
    {
        int32_t xp[MT_BWD_W_XBLOCK / 2];
        int32_t i0;
        for (i0 = 0; i0 < in_features; i0 += MT_BWD_W_XBLOCK) {
            const int32_t ni = in_features - i0 < MT_BWD_W_XBLOCK ? in_features - i0 : MT_BWD_W_XBLOCK;
            const int32_t np = ni / 2;
            int32_t q;
            for (q = 0; q < np; ++q) {
                const int32_t a = input[i0 + 2 * q] - input_zero_point;
                const int32_t b = input[i0 + 2 * q + 1] - input_zero_point;
                xp[q] = (int32_t)(((uint32_t)a & 0xFFFFu) | ((uint32_t)b << 16));
            }
            for (t = 0; t < n_keep; ++t) {
                const int32_t o = keep[t];
                const int32_t eo = e[o];
                int32_t *g = grad + o * in_features + i0;
                for (q = 0; q < np; ++q) { /* |e| <= 127, |x - z_x| <= 255: exact in the halves' products */
                    g[2 * q] = mt_smlabb(xp[q], eo, 0);
                    g[2 * q + 1] = mt_smlatb(xp[q], eo, 0);
                }
                if (ni & 1) {
                    g[ni - 1] = eo * ((int32_t)input[i0 + ni - 1] - input_zero_point);
                }
            }
        }
        return MT_OK;
    }
#endif /* MT_DSP */
    for (t = 0; t < n_keep; ++t) {
        const int32_t o = keep[t];
        const int32_t eo = e[o];
        int32_t *g = grad + o * in_features;
        for (i = 0; i < in_features; ++i) {
            g[i] = eo * ((int32_t)input[i] - input_zero_point);
        }
    }
    return MT_OK;
}
