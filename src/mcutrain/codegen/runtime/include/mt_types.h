/*
 * mcutrain runtime: shared types of the int8 kernels.
 *
 * Layouts: activations NHWC, convolution filters OHWI (O, kh, kw, C / groups), linear weights
 * (O, I) row-major, biases int32 per output channel. Every kernel returns an mt_status; kernels
 * never allocate: scratch memory is owned by the caller and passed in an mt_context.
 */
#ifndef MT_TYPES_H
#define MT_TYPES_H

#include <stdint.h>

/* Return codes of every kernel. */
typedef enum {
    MT_OK = 0,           /* success */
    MT_ERR_ARG = -1,     /* a NULL pointer, a non-positive size, shapes that do not match, or a
                            learning rate that is not finite and > 0 (MT_LR_VALID, mt_train.h) */
    MT_ERR_BUFFER = -2   /* the scratch buffer in the mt_context is smaller than the kernel needs */
} mt_status;

/* A 4-d shape. Activations: (n, h, w, c) = NHWC. Filters: (n, h, w, c) = (O, kh, kw, C/groups). */
typedef struct {
    int32_t n;
    int32_t h;
    int32_t w;
    int32_t c;
} mt_dims;

/* Caller-owned scratch memory: `size` bytes at `buf` (4-byte aligned), or {NULL, 0}. */
typedef struct {
    void *buf;
    int32_t size;
} mt_context;

/* Per-output-channel requantization: real multiplier M_c = multiplier[c] * 2^(shift[c] - 31). */
typedef struct {
    const int32_t *multiplier; /* [O], each in [2^30, 2^31), or 0 for M_c < 2^-32 */
    const int32_t *shift;      /* [O], each in [-31, 30]: right shift 31 - shift in [1, 62] */
} mt_per_channel_quant;

/* Parameters of a 2-d convolution (plain or grouped; depthwise has its own kernel). */
typedef struct {
    int32_t input_zero_point;  /* z_x in [-128, 127]; padding holds z_x (real 0) */
    int32_t output_zero_point; /* z_y in [-128, 127] */
    int32_t stride_h;          /* >= 1 */
    int32_t stride_w;          /* >= 1 */
    int32_t pad_top;           /* >= 0; bottom padding is implied by the output height */
    int32_t pad_left;          /* >= 0; right padding is implied by the output width */
    int32_t groups;            /* >= 1, divides both C and O */
    int32_t act_min;           /* clamp of the output in [-128, 127] (fused relu / relu6) */
    int32_t act_max;           /* act_min <= act_max <= 127 */
} mt_conv_params;

/* Parameters of a fully connected layer. */
typedef struct {
    int32_t input_zero_point;  /* z_x in [-128, 127] */
    int32_t output_zero_point; /* z_y in [-128, 127] */
    int32_t act_min;           /* clamp of the output, as in mt_conv_params */
    int32_t act_max;
} mt_linear_params;

/* Parameters of max and average pooling (no padding; output shape from the dims). */
typedef struct {
    int32_t kernel_h; /* >= 1 */
    int32_t kernel_w; /* >= 1 */
    int32_t stride_h; /* >= 1 */
    int32_t stride_w; /* >= 1 */
} mt_pool_params;

/* Parameters of the residual add: y = clamp(z_y + rshift((a - z_a) Ma + (b - z_b) Mb, n)). */
typedef struct {
    int32_t a_zero_point;      /* z_a in [-128, 127] */
    int32_t b_zero_point;      /* z_b in [-128, 127] */
    int32_t a_multiplier;      /* Ma = round(s_a / s_y * 2^n), in [0, 2^31) */
    int32_t b_multiplier;      /* Mb = round(s_b / s_y * 2^n), in [0, 2^31) */
    int32_t right_shift;       /* n in [1, 62], shared by both inputs */
    int32_t output_zero_point; /* z_y in [-128, 127] */
    int32_t act_min;           /* clamp of the output (fused relu / relu6) */
    int32_t act_max;
} mt_add_params;

/*
 * Parameters of TFLite's int8 ADD (mode "tflite", fixedpoint.tflite_add_params):
 * y = clamp(z_y + R(R((a - z_a) 2^20, Ma, sa) + R((b - z_b) 2^20, Mb, sb), My, sy)), R =
 * TFLite's MultiplyByQuantizedMultiplier (mt_multiply_by_quantized_multiplier).
 */
typedef struct {
    int32_t a_zero_point;      /* z_a in [-128, 127] */
    int32_t b_zero_point;      /* z_b in [-128, 127] */
    int32_t a_multiplier;      /* Ma in [0, 2^31) with a_shift: s_a / (2 max(s_a, s_b)) <= 0.5 */
    int32_t a_shift;           /* <= 0 */
    int32_t b_multiplier;      /* Mb, likewise for s_b */
    int32_t b_shift;           /* <= 0 */
    int32_t output_multiplier; /* My in [0, 2^31) with output_shift: 2 max(s_a, s_b) / (2^20 s_y) < 1 */
    int32_t output_shift;      /* <= 0 */
    int32_t output_zero_point; /* z_y in [-128, 127] */
    int32_t act_min;           /* clamp of the output (fused relu / relu6) */
    int32_t act_max;
} mt_add_tflite_params;

/* Parameters of TFLite's int8 MEAN over H and W (mode "tflite", fixedpoint.tflite_mean_params):
   equal input and output qparams, 1 / (H * W) folded into the multiplier. */
typedef struct {
    int32_t zero_point; /* z in [-128, 127], of the input and the output */
    int32_t multiplier; /* M' in [0, 2^31) */
    int32_t shift;      /* s' in [-31, 1] */
} mt_mean_params;

#endif /* MT_TYPES_H */
