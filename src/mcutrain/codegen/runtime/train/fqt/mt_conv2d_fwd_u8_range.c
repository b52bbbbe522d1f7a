/*
 * uint8 conv forward of seed A (Python twin: fqt_kernels.conv2d_fwd_acc on centred uint8 operands,
 * the bias add and requant_f32_floor): acc = b + sum (x - z_x)(w - z_w), then
 * y = clamp(floor(float32(acc) * m) + z_y, act_min, act_max) with one float32 multiplier m per
 * tensor; the extremes of acc over the tensor go to *acc_min / *acc_max (merged).
 * NOTE: |acc| <= |b| + 255 * 255 * K < 2^31 (the bias room of fqt._bias_room keeps the sum safe).
 */
#include "mt_fqt.h"
#include "mt_fqt_math.h"

/* Output channels summed at once per output position (their accumulators on the stack). */
#define MT_U8_FWD_CHANNELS 32

/*
 * NOTE: scatter order. Per output position, each input value of the window adds
 * (x - z_x)(w[o] - z_w) to every output channel o of its group; an input at z_x (a real 0: a ReLU's
 * output, an image's background) adds 0 and is skipped before the filters are read. Integer sums:
 * the same bits in any order.
 */
mt_status mt_conv2d_fwd_u8_range(const mt_conv_params *params,
                                 int32_t w_zero_point,
                                 float multiplier,
                                 const mt_dims *input_dims,
                                 const uint8_t *input,
                                 const mt_dims *filter_dims,
                                 const uint8_t *filter,
                                 const int32_t *bias,
                                 const mt_dims *output_dims,
                                 uint8_t *output,
                                 int32_t *acc_min,
                                 int32_t *acc_max)
{
    const int32_t hi_ = input_dims->h, wi = input_dims->w, ci = input_dims->c;
    const int32_t o_n = filter_dims->n, kh = filter_dims->h, kw = filter_dims->w, cig = filter_dims->c;
    const int32_t ho = output_dims->h, wo = output_dims->w;
    const int32_t groups = params ? params->groups : 0;
    const int32_t opg = groups > 0 ? o_n / groups : 0;
    const int32_t k_row = kh * kw * cig;
    int32_t acc[MT_U8_FWD_CHANNELS];
    int32_t b, y, x, o0, on, lo, hi;
    if (!params || !input || !filter || !bias || !output || !acc_min || !acc_max || groups < 1 ||
        cig * groups != ci || output_dims->c != o_n) {
        return MT_ERR_ARG;
    }
    lo = *acc_min;
    hi = *acc_max;
    for (b = 0; b < input_dims->n; ++b) {
        for (y = 0; y < ho; ++y) {
            for (x = 0; x < wo; ++x) {
                uint8_t *out = output + ((b * ho + y) * wo + x) * o_n;
                for (o0 = 0; o0 < o_n; o0 += on) {
                    /* a chunk stays inside one group: it ends at the group's last channel */
                    const int32_t g = o0 / opg;
                    const int32_t g_end = (g + 1) * opg;
                    const uint8_t *wchunk = filter + o0 * k_row;
                    int32_t i, j, c, o;
                    on = g_end - o0 < MT_U8_FWD_CHANNELS ? g_end - o0 : MT_U8_FWD_CHANNELS;
                    for (o = 0; o < on; ++o) {
                        acc[o] = bias[o0 + o];
                    }
                    for (i = 0; i < kh; ++i) {
                        const int32_t iy = y * params->stride_h - params->pad_top + i;
                        if (iy < 0 || iy >= hi_) {
                            continue;
                        }
                        for (j = 0; j < kw; ++j) {
                            const int32_t ix = x * params->stride_w - params->pad_left + j;
                            const uint8_t *px;
                            if (ix < 0 || ix >= wi) {
                                continue;
                            }
                            px = input + ((b * hi_ + iy) * wi + ix) * ci + g * cig;
                            for (c = 0; c < cig; ++c) {
                                const int32_t xv = (int32_t)px[c] - params->input_zero_point;
                                const uint8_t *pw = wchunk + (i * kw + j) * cig + c;
                                if (xv == 0) {
                                    continue;
                                }
                                for (o = 0; o < on; ++o) {
                                    acc[o] += xv * ((int32_t)pw[o * k_row] - w_zero_point);
                                }
                            }
                        }
                    }
                    for (o = 0; o < on; ++o) {
                        lo = acc[o] < lo ? acc[o] : lo;
                        hi = acc[o] > hi ? acc[o] : hi;
                        out[o0 + o] = (uint8_t)mt_requant_f32_floor(acc[o], multiplier, params->output_zero_point,
                                                                    params->act_min, params->act_max);
                    }
                }
            }
        }
    }
    *acc_min = lo;
    *acc_max = hi;
    return MT_OK;
}
