/*
 * mcutrain runtime: mt_conv2d_bwd_in_s8_f32, the ARMv6-M (Cortex-M0+) twin of
 * train/qas/mt_conv2d_bwd_in_s8_f32.c, bit-exact with it in every case: per input element the
 * taps (ky, kx) row-major, each tap's sum t over the group's output channels from +0.0, then
 * acc = acc + t; each step `t + (float)w * e` in mt_m0_f32_run (mt_m0_f32.h), the tap sums added
 * unpacked (mt_m0_f32_add), no division for stride 1 and 32-bit addressing.
 */
#include "mt_m0_f32.h"
#include "mt_qas_f32_args_ref.h"
#include "mt_train.h"

/* The output index o with o * stride == p (0 <= p), or -1 when there is none. */
static int32_t tap_index(int32_t p, int32_t stride)
{
    if (stride == 1) {
        return p;
    }
    return p % stride == 0 ? p / stride : -1;
}

mt_status mt_conv2d_bwd_in_s8_f32(const mt_conv_params *params,
                                  const mt_dims *output_dims,
                                  const float *e_acc,
                                  const mt_dims *filter_dims,
                                  const int8_t *filter,
                                  const mt_dims *input_dims,
                                  float *e_x)
{
    int32_t n;
    int32_t y;
    int32_t x;
    int32_t cg;
    int32_t og;
    int32_t jstep;
    float *dst = e_x;
    if (mt_conv2d_bwd_in_s8_f32_args(params, output_dims, e_acc, filter_dims, filter, input_dims, e_x) != MT_OK) {
        return MT_ERR_ARG;
    }
    cg = filter_dims->c;
    og = filter_dims->n / params->groups;
    jstep = filter_dims->h * filter_dims->w * cg;
    for (n = 0; n < input_dims->n; ++n) {
        for (y = 0; y < input_dims->h; ++y) {
            for (x = 0; x < input_dims->w; ++x) {
                int32_t gi;
                for (gi = 0; gi < params->groups; ++gi) {
                    int32_t i;
                    for (i = 0; i < cg; ++i, ++dst) {
                        mt_m0_f32 acc = {0u, MT_M0_F32_ZERO, 0u};
                        int32_t ky;
                        for (ky = 0; ky < filter_dims->h; ++ky) {
                            const int32_t py = y + params->pad_top - ky;
                            const int32_t oy = py < 0 ? -1 : tap_index(py, params->stride_h);
                            int32_t kx;
                            if (oy < 0 || oy >= output_dims->h) {
                                continue;
                            }
                            for (kx = 0; kx < filter_dims->w; ++kx) {
                                const int32_t px = x + params->pad_left - kx;
                                const int32_t ox = px < 0 ? -1 : tap_index(px, params->stride_w);
                                mt_m0_f32 t = {0u, MT_M0_F32_ZERO, 0u};
                                if (ox < 0 || ox >= output_dims->w) {
                                    continue;
                                }
                                mt_m0_f32_run(&t, e_acc + ((n * output_dims->h + oy) * output_dims->w + ox) *
                                                          output_dims->c + gi * og,
                                              1, filter + ((gi * og * filter_dims->h + ky) * filter_dims->w + kx) * cg + i,
                                              jstep, 0, og);
                                mt_m0_f32_add(&acc, &t);
                            }
                        }
                        *dst = mt_m0_f32_float(mt_m0_f32_pack(&acc));
                    }
                }
            }
        }
    }
    return MT_OK;
}
