/*
 * mcutrain runtime: mt_linear_fwd_s8_range, the FQT linear forward with per-channel accumulator
 * extremes (mt_fqt.h), on Helium (MVE) cores.
 *
 * Twin of train/fqt/mt_linear_fwd_s8_range.c (and of its DSP twin), bit-exact with it: the input
 * rows are the columns of mt_mve_range.h's GEMM as they are, four output rows share each 16-byte
 * load (VMLADAVA.S8), the requantization runs four outputs per vector, and the extremes widen
 * once per block of four outputs. Without MVE it runs the reference body
 * (mt_linear_fwd_s8_range_ref.h).
 */
#include "mt_fqt.h"
#include "mt_linear_fwd_s8_range_ref.h"
#include "mt_mve.h"
#include "mt_mve_range.h"

mt_status mt_linear_fwd_s8_range(const mt_linear_params *params,
                                 const mt_per_channel_quant *quant,
                                 int32_t batch,
                                 const int8_t *input,
                                 int32_t in_features,
                                 const int8_t *weight,
                                 const int32_t *bias,
                                 int32_t out_features,
                                 int8_t *output,
                                 int32_t *acc_min,
                                 int32_t *acc_max)
{
    const int32_t zx = params ? params->input_zero_point : 0;
    int32_t b, o;
    if (!params || !quant || !input || !weight || !bias || !output || !acc_min || !acc_max || batch < 1) {
        return MT_ERR_ARG;
    }
#if MT_MVE
    if (in_features >= 1) {
        mt_mve_block blk;
        for (o = 0; o < out_features; o += MT_MVE_BLOCK) {
            const int32_t nb = out_features - o < MT_MVE_BLOCK ? out_features - o : MT_MVE_BLOCK;
            mt_mve_prepare(&blk, weight, in_features, in_features, bias, quant, zx, params->output_zero_point, o,
                           nb);
            mt_mve_gemm_range(&blk, weight + o * in_features, in_features, in_features, input, batch, in_features,
                              quant, o, nb, params->output_zero_point, params->act_min, params->act_max, output + o,
                              out_features, acc_min, acc_max);
        }
        return MT_OK;
    }
#endif /* MT_MVE */
    for (b = 0; b < batch; ++b) {
        for (o = 0; o < out_features; ++o) {
            mt_linear_fwd_s8_range_ref(params, quant, zx, input + b * in_features, in_features, weight, bias, o,
                                       out_features, b, output, acc_min, acc_max);
        }
    }
    return MT_OK;
}
