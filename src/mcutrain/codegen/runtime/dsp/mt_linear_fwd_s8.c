/*
 * mcutrain runtime: mt_linear_fwd_s8, the fully connected layer (see mt_nn.h).
 *
 * DSP twin of nn/mt_linear_fwd_s8.c, bit-exact with it: the input row is centred into int16 once
 * (SMLAD order), then every weight row reuses it through mt_mat_mult_s8_s16_1col. Without scratch,
 * or on a core without DSP, it runs the reference body (mt_linear_fwd_s8_ref.h).
 */
#include "mt_fixedpoint.h"
#include "mt_linear_fwd_s8_ref.h"
#include "mt_nn.h"
#include "mt_support.h"

int32_t mt_linear_fwd_s8_get_buffer_size(int32_t in_features)
{
#if MT_DSP
    return 2 * in_features;
#else  /* !MT_DSP */
    (void)in_features;
    return 0;
#endif /* MT_DSP */
}

mt_status mt_linear_fwd_s8(const mt_context *ctx,
                           const mt_linear_params *params,
                           const mt_per_channel_quant *quant,
                           int32_t batch,
                           const int8_t *input,
                           int32_t in_features,
                           const int8_t *weight,
                           const int32_t *bias,
                           int32_t out_features,
                           int8_t *output)
{
    if (mt_linear_fwd_s8_check(params, quant, batch, input, in_features, weight, bias, out_features, output) !=
        MT_OK) {
        return MT_ERR_ARG;
    }
#if MT_DSP
    if (ctx && ctx->buf && ctx->size >= mt_linear_fwd_s8_get_buffer_size(in_features)) {
        const int32_t zx = params->input_zero_point;
        int16_t *col = (int16_t *)ctx->buf;
        int32_t n, i;
        mt_gemm_out qo;
        qo.bias = bias;
        qo.multiplier = quant->multiplier;
        qo.shift = quant->shift;
        qo.zero_point = params->output_zero_point;
        qo.act_min = params->act_min;
        qo.act_max = params->act_max;
        for (n = 0; n < batch; n++) {
            const int8_t *x = input + n * in_features;
            /* -z_x in both halves; SXTAB16 centres two bytes at once, already in SMLAD order */
            const int32_t off2 = (int32_t)(((uint32_t)(-zx) & 0xFFFFu) | ((uint32_t)(-zx) << 16));
            for (i = 0; i + 4 <= in_features; i += 4) {
                const int32_t v = mt_read_s8x4(x + i);
                mt_write_s16x2(col + i, mt_sxtab16(off2, v));
                mt_write_s16x2(col + i + 2, mt_sxtab16_ror8(off2, v));
            }
            for (; i < in_features; i++) {
                col[i] = (int16_t)((int32_t)x[i] - zx);
            }
            mt_mat_mult_s8_s16_1col(weight, col, out_features, in_features, &qo, output + n * out_features);
        }
        return MT_OK;
    }
#else  /* !MT_DSP */
    (void)ctx;
#endif /* MT_DSP */
    mt_linear_fwd_s8_ref(params, quant, batch, input, in_features, weight, bias, out_features, output);
    return MT_OK;
}
