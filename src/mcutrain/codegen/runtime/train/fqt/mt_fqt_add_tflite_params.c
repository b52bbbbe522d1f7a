/*
 * TFLite's ADD multipliers computed on the device from the current scales (mode "tflite"; Python
 * twin: quant.fixedpoint.tflite_add_params; docs/integer-semantics.md 6.1.3): t = 2 max(s_a, s_b),
 * Ma = s_a / t, Mb = s_b / t, My = t / (2^20 s_y), each in float64 (single IEEE operations on
 * float32 scales, so the same doubles as numpy's) through mt_fqt_quantize_multiplier.
 */
#include "mt_fqt.h"

mt_status mt_fqt_add_tflite_params(float s_a, float s_b, float s_y, mt_add_tflite_params *p)
{
    const double sa = (double)s_a, sb = (double)s_b, sy = (double)s_y;
    double twice, my;
    mt_status st;
    if (!p || !(sa > 0.0) || !(sb > 0.0) || !(sy > 0.0) || !(sa < 1.0e300) || !(sb < 1.0e300)) {
        return MT_ERR_ARG;
    }
    twice = 2.0 * (sa > sb ? sa : sb);
    my = twice / (1048576.0 * sy); /* 2^20: TFLite's left shift of int8 ADD inputs */
    if (!(my < 1.0)) {
        return MT_ERR_ARG; /* TFLite's ADD needs every multiplier below 1 */
    }
    st = mt_fqt_quantize_multiplier(sa / twice, &p->a_multiplier, &p->a_shift);
    if (st == MT_OK) {
        st = mt_fqt_quantize_multiplier(sb / twice, &p->b_multiplier, &p->b_shift);
    }
    if (st == MT_OK) {
        st = mt_fqt_quantize_multiplier(my, &p->output_multiplier, &p->output_shift);
    }
    return st;
}
