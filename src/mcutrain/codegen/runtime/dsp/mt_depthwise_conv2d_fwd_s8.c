/*
 * mcutrain runtime: mt_depthwise_conv2d_fwd_s8 (see mt_nn.h).
 *
 * DSP twin of nn/mt_depthwise_conv2d_fwd_s8.c, bit-exact with it: four channels at a time,
 * through the inference row body of nn/mt_depthwise_rows_dsp.h (mt_dwf_quad: two taps per SMLAD
 * along centred int16 rows, the requantization inside the tap loop, four channels per stored word)
 * for the layers mt_dwr_fits takes with an output zero point of -128 and output rows of
 * MT_DWF_MIN_W pixels or more, through the unfused row body (mt_dwr_quad) for the other zero
 * points on rows of more than four pixels, else through every output position with single 16-bit
 * MACs (nn/mt_depthwise_dsp.h); the requantization is prepared per channel. A channel
 * multiplier, a kernel of more than MT_DW_TAPS_MAX taps, or a core without DSP runs the reference
 * body (mt_depthwise_conv2d_fwd_s8_ref.h); all compute the same exact integer sums.
 */
#include "mt_depthwise_conv2d_fwd_s8_ref.h"
#include "mt_depthwise_dsp.h"
#include "mt_depthwise_rows_dsp.h"

#if MT_DSP
/* The quad loop out of line: one call's stack holds one set of unpacked weights. */
static MT_NOINLINE void dw_quad(const mt_conv_params *p, const mt_per_channel_quant *q, const mt_dims *in_d,
                                const int8_t *x, const mt_dims *f_d, const int8_t *w, const int32_t *b,
                                const mt_dims *out_d, int8_t *y, int32_t c0, int mode)
{
    mt_dw_quad(p, q, in_d, x, f_d, w, b, out_d, y, 0, 0, c0, mode, 0);
}

/* The row body (mt_depthwise_rows_dsp.h) out of line, the channel quads below c_end in one call: one
   call's stack holds one set of its rows. */
static MT_NOINLINE void dw_rows_quad(const mt_conv_params *p, const mt_per_channel_quant *q, const mt_dims *in_d,
                                     const int8_t *x, const mt_dims *f_d, const int8_t *w, const int32_t *b,
                                     const mt_dims *out_d, int8_t *y, int32_t c_end, int mode)
{
    int32_t c0;
    if (mode == MT_DW_REQ_FLOOR) { /* the fused body for an output zero point of -128 (every fused relu) */
        mt_dwf_quad(p, q, in_d, x, f_d, w, b, out_d, y, 0, c_end, MT_DW_REQ_FLOOR);
    } else { /* other zero points: the unfused row body (half the Flash of a second fused copy) */
        for (c0 = 0; c0 + 4 <= c_end; c0 += 4) {
            mt_dwr_quad(p, q, in_d, x, f_d, w, b, out_d, y, 0, 0, c0, mode, 0);
        }
    }
}
#endif /* MT_DSP */

mt_status mt_depthwise_conv2d_fwd_s8(const mt_conv_params *params,
                                     const mt_per_channel_quant *quant,
                                     const mt_dims *input_dims,
                                     const int8_t *input,
                                     const mt_dims *filter_dims,
                                     const int8_t *filter,
                                     const int32_t *bias,
                                     const mt_dims *output_dims,
                                     int8_t *output)
{
    const mt_status st = mt_depthwise_conv2d_fwd_s8_check(params, quant, input_dims, input, filter_dims, filter,
                                                          bias, output_dims, output);
    if (st != MT_OK) {
        return st;
    }
#if MT_DSP
    {
        const int mode = mt_dw_mode(params, quant, input_dims, filter_dims);
        if (mode >= 0) {
            /* the fused body (zero point -128) from MT_DWF_MIN_W pixels a row, the unfused one above four */
            const int rows = mt_dwr_fits(params, input_dims, filter_dims, output_dims, mode,
                                         mode == MT_DW_REQ_FLOOR ? MT_DWF_MIN_W : 5);
            int32_t c = input_dims->c & ~3;
            if (rows && c > 0) {
                dw_rows_quad(params, quant, input_dims, input, filter_dims, filter, bias, output_dims, output, c,
                             mode);
            } else {
                for (c = 0; c + 4 <= input_dims->c; c += 4) {
                    dw_quad(params, quant, input_dims, input, filter_dims, filter, bias, output_dims, output, c,
                            mode);
                }
            }
            for (; c < input_dims->c; ++c) {
                mt_dw_single(params, quant, input_dims, input, filter_dims, filter, bias, output_dims, output, 0, 0,
                             c);
            }
            return MT_OK;
        }
    }
#endif /* MT_DSP */
    mt_depthwise_conv2d_fwd_s8_ref(params, quant, input_dims, input, filter_dims, filter, bias, output_dims, output);
    return MT_OK;
}
