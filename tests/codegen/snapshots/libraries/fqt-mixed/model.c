/*
 * model.c: FQT training (see model.h): the state that moves every step, the arena, the
 * forward pass and the training step of the planner's schedule. Arena 1276 bytes.
 *
node               op              output              params        MACs
conv1              conv2d          (8, 8, 3)               30       1,728
pool               maxpool         (4, 4, 3)                0           0
conv2              conv2d          (2, 2, 4)              112         432
flat               flatten         (16,)                    0           0
fc                 linear          (5,)                    85          80
total                                                     227       2,240
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "model.h"
#include "mt_fqt.h"
#include "mt_fqt_keep.h"
#include "mt_nn.h"
#include "mt_train.h"

/* input: activation range (EMA) */
static mt_fqt_range act_input = {0x1.66f0000000000p-9f, 0x1.fe924c0000000p-1f, 0.0f, 0.0f, 1, 0, 0};

static float act_input_scale = 0x1.0049700000000p-8f;
static int32_t act_input_zp = 0;

/* conv1: activation range (EMA) */
static mt_fqt_range act_conv1 = {0.0f, 0x1.08e7ca0000000p+1f, 0.0f, 0.0f, 1, 0, 0};

static float act_conv1_scale = 0x1.09f1bc0000000p-7f;
static int32_t act_conv1_zp = 0;

/* conv2: activation range (EMA) */
static mt_fqt_range act_conv2 = {0.0f, 0x1.dafb5e0000000p+0f, 0.0f, 0.0f, 1, 0, 0};

static float act_conv2_scale = 0x1.dcd8360000000p-8f;
static int32_t act_conv2_zp = 0;

/* fc: activation range (EMA) */
static mt_fqt_range act_fc = {-0x1.f5f0fc0000000p-1f, 0x1.66a3bc0000000p+1f, 0.0f, 0.0f, 1, 0, 0};

static float act_fc_scale = 0x1.e606020000000p-7f;
static int32_t act_fc_zp = 66;

/* conv1: weight [3, 3, 3, 1] uint8 (RAM, trained) */
static uint8_t conv1_weight[27] = {
    198, 0, 128, 85, 90, 100, 22, 99, 72, 254, 119, 94, 97, 81, 64, 93,
    130, 99, 151, 101, 111, 177, 133, 88, 102, 133, 193,
};

/* conv1: bias int32 (RAM) */
static int32_t conv1_bias[3] = {
    0, 0, 0,
};

/* conv1: weight scale(s) s_w */
static float conv1_s_w[1] = {0x1.641bbe0000000p-7f};

/* conv1: accumulator scales s_x * s_w of the bias */
static float conv1_bias_scale[3] = {0x1.6481e60000000p-15f, 0x1.6481e60000000p-15f, 0x1.6481e60000000p-15f};

static int32_t conv1_w_zp = 110;
static float conv1_m; /* forward multiplier float32(s_x * s_w) / s_y */

/* conv1: weight range minimum (EMA) */
static float conv1_w_lo[1] = {-0x1.346aa20000000p+0f};

/* conv1: weight range maximum (EMA) */
static float conv1_w_hi[1] = {0x1.9104a20000000p+0f};

/* conv1: gradient mean (EMA) */
static float conv1_norm_mu[3] = {0.0f, 0.0f, 0.0f};

/* conv1: gradient sd (EMA) */
static float conv1_norm_sd[3] = {0.0f, 0.0f, 0.0f};

/* conv1: statistics initialized */
static int8_t conv1_norm_init[3] = {
    0, 0, 0,
};

static float conv1_bias_step[3];

/* conv2: weight [4, 3, 3, 3] uint8 (RAM, trained) */
static uint8_t conv2_weight[108] = {
    121, 122, 181, 91, 120, 175, 161, 138, 165, 0, 182, 88, 54, 147, 167, 112,
    82, 135, 131, 200, 169, 143, 186, 124, 90, 161, 161, 123, 96, 144, 15, 166,
    157, 56, 136, 88, 169, 37, 90, 167, 188, 31, 110, 149, 105, 209, 77, 150,
    84, 200, 132, 116, 52, 213, 169, 169, 187, 150, 103, 96, 96, 198, 64, 105,
    118, 144, 161, 74, 51, 133, 191, 169, 144, 118, 147, 122, 172, 96, 140, 128,
    159, 144, 254, 205, 204, 37, 117, 105, 159, 25, 189, 184, 72, 87, 96, 136,
    164, 231, 124, 170, 141, 217, 169, 198, 82, 124, 95, 205,
};

/* conv2: bias int32 (RAM) */
static int32_t conv2_bias[4] = {
    0, 0, 0, 0,
};

/* conv2: weight scale(s) s_w */
static float conv2_s_w[1] = {0x1.78312a0000000p-8f};

/* conv2: accumulator scales s_x * s_w of the bias */
static float conv2_bias_scale[4] = {0x1.86ce200000000p-15f, 0x1.86ce200000000p-15f, 0x1.86ce200000000p-15f, 0x1.86ce200000000p-15f};

static int32_t conv2_w_zp = 134;
static float conv2_m; /* forward multiplier float32(s_x * s_w) / s_y */

/* conv2: weight range minimum (EMA) */
static float conv2_w_lo[1] = {-0x1.8a19d40000000p-1f};

/* conv2: weight range maximum (EMA) */
static float conv2_w_hi[1] = {0x1.63581a0000000p-1f};

/* conv2: gradient mean (EMA) */
static float conv2_norm_mu[4] = {0.0f, 0.0f, 0.0f, 0.0f};

/* conv2: gradient sd (EMA) */
static float conv2_norm_sd[4] = {0.0f, 0.0f, 0.0f, 0.0f};

/* conv2: statistics initialized */
static int8_t conv2_norm_init[4] = {
    0, 0, 0, 0,
};

static float conv2_bias_step[4];

/* fc: weight [5, 16] uint8 (RAM, trained) */
static uint8_t fc_weight[80] = {
    153, 99, 91, 144, 77, 64, 143, 254, 103, 85, 51, 42, 146, 164, 117, 135,
    123, 124, 31, 91, 123, 73, 90, 71, 98, 164, 94, 108, 162, 153, 211, 0,
    164, 89, 124, 163, 177, 175, 125, 207, 101, 109, 161, 86, 238, 174, 238, 115,
    95, 126, 158, 84, 138, 116, 207, 79, 175, 80, 63, 77, 50, 125, 174, 126,
    151, 208, 132, 127, 101, 26, 159, 18, 153, 116, 180, 113, 70, 137, 85, 106,
};

/* fc: bias int32 (RAM) */
static int32_t fc_bias[5] = {
    0, 0, 0, 0, 0,
};

/* fc: weight scale(s) s_w */
static float fc_s_w[1] = {0x1.9dc33c0000000p-8f};

/* fc: accumulator scales s_x * s_w of the bias */
static float fc_bias_scale[5] = {0x1.815a3c0000000p-15f, 0x1.815a3c0000000p-15f, 0x1.815a3c0000000p-15f, 0x1.815a3c0000000p-15f, 0x1.815a3c0000000p-15f};

static int32_t fc_w_zp = 117;
static float fc_m; /* forward multiplier float32(s_x * s_w) / s_y */

/* fc: weight range minimum (EMA) */
static float fc_w_lo[1] = {-0x1.7a6b100000000p-1f};

/* fc: weight range maximum (EMA) */
static float fc_w_hi[1] = {0x1.bddfe00000000p-1f};

/* fc: gradient mean (EMA) */
static float fc_norm_mu[5] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f};

/* fc: gradient sd (EMA) */
static float fc_norm_sd[5] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f};

/* fc: statistics initialized */
static int8_t fc_norm_init[5] = {
    0, 0, 0, 0, 0,
};

static float fc_bias_step[5];

static int32_t fqt_loss_max = 0;

/* no stochastic draws */

/* Per-channel accumulator extremes of the layer running now, and the logits' Q24 error. */
static int32_t fqt_amin[5];
static int32_t fqt_amax[5];
static int32_t fqt_errq[5];

/* The working memory of predict and train_step (never both at once). */
static union {
    int64_t align; /* 8-byte alignment for word and doubleword accesses */
    int8_t bytes[MODEL_ARENA_BYTES];
} model_arena;

/* The training step's tensors at the planner's offsets. */
#define A_err_conv1 ((float *)(void *)(model_arena.bytes + 0)) /* err:conv1: f32 [1, 8, 8, 3], error */
#define A_errm_conv1 ((float *)(void *)(model_arena.bytes + 0)) /* errm:conv1: f32 [1, 8, 8, 3], error */
#define A_grad_conv2_weight ((float *)(void *)(model_arena.bytes + 0)) /* grad:conv2.weight: f32 [4, 3, 3, 3], gradient */
#define A_grad_fc_weight ((float *)(void *)(model_arena.bytes + 0)) /* grad:fc.weight: f32 [5, 16], gradient */
#define A_err_fc ((float *)(void *)(model_arena.bytes + 320)) /* err:fc: f32 [1, 5], error */
#define A_grad_fc_bias ((float *)(void *)(model_arena.bytes + 340)) /* grad:fc.bias: f32 [5], gradient */
#define A_conv2 ((uint8_t *)(void *)(model_arena.bytes + 360)) /* conv2: u8 [1, 2, 2, 4], kept */
#define A_flat ((uint8_t *)(void *)(model_arena.bytes + 360)) /* flat: u8 [1, 16], kept */
#define A_err_conv2 ((float *)(void *)(model_arena.bytes + 432)) /* err:conv2: f32 [1, 2, 2, 4], error */
#define A_err_flat ((float *)(void *)(model_arena.bytes + 432)) /* err:flat: f32 [1, 16], error */
#define A_errm_conv2 ((float *)(void *)(model_arena.bytes + 432)) /* errm:conv2: f32 [1, 2, 2, 4], error */
#define A_pool ((uint8_t *)(void *)(model_arena.bytes + 496)) /* pool: u8 [1, 4, 4, 3], kept */
#define A_grad_conv2_bias ((float *)(void *)(model_arena.bytes + 544)) /* grad:conv2.bias: f32 [4], gradient */
#define A_conv1 ((uint8_t *)(void *)(model_arena.bytes + 768)) /* conv1: u8 [1, 8, 8, 3], kept */
#define A_grad_conv1_weight ((float *)(void *)(model_arena.bytes + 768)) /* grad:conv1.weight: f32 [3, 3, 3, 1], gradient */
#define A_grad_conv1_bias ((float *)(void *)(model_arena.bytes + 876)) /* grad:conv1.bias: f32 [3], gradient */
#define A_err_pool ((float *)(void *)(model_arena.bytes + 960)) /* err:pool: f32 [1, 4, 4, 3], error */
#define A_input ((uint8_t *)(void *)(model_arena.bytes + 1152)) /* input: u8 [1, 8, 8, 1], input */
#define A_pool_argmax ((uint8_t *)(void *)(model_arena.bytes + 1216)) /* pool.argmax: u8 [1, 4, 4, 3], kept */
#define A_fc ((uint8_t *)(void *)(model_arena.bytes + 1264)) /* fc: u8 [1, 5], logits */
#define A_loss ((int32_t *)(void *)(model_arena.bytes + 1272)) /* loss: s32 [1], logits */


static struct {
    uint32_t rng;   /* the method's xorshift32 state */
    uint32_t steps; /* steps taken */
} model_state = {5u, 0u};

#define MODEL_STATE_MAGIC 1414747213u
#define MODEL_STATE_FINGERPRINT 3609389574u

static void fqt_reset_extremes(int32_t channels)
{
    int32_t c;
    for (c = 0; c < channels; ++c) {
        fqt_amin[c] = INT32_MAX;
        fqt_amax[c] = INT32_MIN;
    }
}

/* Requantization multipliers from the current scales (they move with the ranges and weights). */
static mt_status fqt_prepare(void)
{
    mt_status st = MT_OK;
    conv1_m = (act_input_scale * conv1_s_w[0]) / act_conv1_scale;
    conv2_m = (act_conv1_scale * conv2_s_w[0]) / act_conv2_scale;
    fc_m = (act_conv2_scale * fc_s_w[0]) / act_fc_scale;
    return st;
}

/* The forward pass on the sample in the input tensor; `record`: note the output ranges. */
static mt_status fqt_forward(int32_t record)
{
    mt_status st = MT_OK;
    (void)record;
    { /* conv1.fwd (forward) */
        mt_conv_params p = {act_input_zp, act_conv1_zp, 1, 1, 1, 1, 1, -128, 127};
        static const mt_dims in_d = {1, 8, 8, 1};
        static const mt_dims f_d = {3, 3, 3, 1};
        static const mt_dims out_d = {1, 8, 8, 3};
        mt_fqt_act_range_u8(act_conv1_scale, act_conv1_zp, 1, &p.act_min, &p.act_max);
        fqt_reset_extremes(1);
        st = mt_conv2d_fwd_u8_range(&p, conv1_w_zp, conv1_m, &in_d, A_input, &f_d, conv1_weight, conv1_bias, &out_d, A_conv1, fqt_amin, fqt_amax);
        if (st != MT_OK) {
            return st;
        }
        if (record) {
            mt_fqt_acc_range_f32(1, fqt_amin, fqt_amax, act_input_scale, conv1_s_w, 1, &act_conv1);
        }
    }
    { /* pool.fwd (forward) */
        static const mt_pool_params p = {2, 2, 2, 2};
        static const mt_dims in_d = {1, 8, 8, 3};
        static const mt_dims out_d = {1, 4, 4, 3};
        st = mt_maxpool_fwd_u8_argmax(&p, &in_d, A_conv1, &out_d, A_pool, (uint8_t *)(void *)A_pool_argmax);
        if (st != MT_OK) {
            return st;
        }
    }
    { /* conv2.fwd (forward) */
        mt_conv_params p = {act_conv1_zp, act_conv2_zp, 2, 2, 1, 1, 1, -128, 127};
        static const mt_dims in_d = {1, 4, 4, 3};
        static const mt_dims f_d = {4, 3, 3, 3};
        static const mt_dims out_d = {1, 2, 2, 4};
        mt_fqt_act_range_u8(act_conv2_scale, act_conv2_zp, 2, &p.act_min, &p.act_max);
        fqt_reset_extremes(1);
        st = mt_conv2d_fwd_u8_range(&p, conv2_w_zp, conv2_m, &in_d, A_pool, &f_d, conv2_weight, conv2_bias, &out_d, A_conv2, fqt_amin, fqt_amax);
        if (st != MT_OK) {
            return st;
        }
        if (record) {
            mt_fqt_acc_range_f32(1, fqt_amin, fqt_amax, act_conv1_scale, conv2_s_w, 2, &act_conv2);
        }
    }
    { /* flat.fwd (forward) */
        /* flatten: NHWC order is the flat order, the output is the input's storage */
    }
    { /* fc.fwd (forward) */
        mt_linear_params p = {act_conv2_zp, act_fc_zp, 0, 255};
        mt_fqt_act_range_u8(act_fc_scale, act_fc_zp, 0, &p.act_min, &p.act_max);
        fqt_reset_extremes(1);
        st = mt_linear_fwd_u8_range(&p, fc_w_zp, fc_m, 1, A_flat, 16, fc_weight, fc_bias, 5, A_fc, fqt_amin, fqt_amax);
        if (st != MT_OK) {
            return st;
        }
        if (record) {
            mt_fqt_acc_range_f32(1, fqt_amin, fqt_amax, act_conv2_scale, fc_s_w, 0, &act_fc);
        }
    }
    return st;
}


mt_status model_init(void)
{
    return MT_OK;
}

static model_layer_hook model_layer_hook_fn = NULL;

void model_set_layer_hook(model_layer_hook hook)
{
    model_layer_hook_fn = hook; /* FQT libraries do not call it (no per-layer inference blocks) */
}

int8_t *model_input_buffer(void)
{
    return (int8_t *)(void *)A_input;
}

mt_status model_predict(const int8_t *input, int8_t *logits)
{
    mt_status st;
    if (!input || !logits) {
        return MT_ERR_ARG;
    }
    if ((const void *)input != (const void *)A_input) {
        memcpy(A_input, input, MODEL_INPUT_SIZE);
    }
    st = fqt_prepare();
    if (st == MT_OK) {
        st = fqt_forward(0);
    }
    memcpy(logits, A_fc, MODEL_OUTPUT_SIZE);
    return st;
}

int8_t *model_train_input_buffer(void)
{
    return (int8_t *)(void *)A_input;
}

uint32_t model_train_steps(void)
{
    return model_state.steps;
}

mt_status model_train_step(const int8_t *inputs, const int32_t *labels, float lr, int32_t *losses,
                           int8_t *logits)
{
    mt_status st = MT_OK;
    const uint32_t rng0 = model_state.rng;
    int32_t b = 0;
    if (!inputs || !labels || !losses) {
        return MT_ERR_ARG;
    }
    if (!MT_LR_VALID(lr)) { /* NaN, +-inf, 0 or negative: refused before any state changes */
        return MT_ERR_ARG;
    }
    if ((const void *)inputs != (const void *)A_input) {
        memcpy(A_input, inputs, 64);
    }
    (void)rng0;
    (void)lr;
    (void)b;
    st = fqt_prepare();
    if (st != MT_OK) {
        return st;
    }
    st = fqt_forward(1); /* conv1.fwd ... */
    if (st != MT_OK) {
    return st;
    }
    { /* loss (loss) */
        int8_t lg8[5];
        int32_t k;
        for (k = 0; k < 5; ++k) {
            lg8[k] = (int8_t)((int32_t)A_fc[k] - 128);
        }
        st = mt_softmax_ce_s8(1, 5, lg8, act_fc_scale, labels + b, A_loss, fqt_errq);
        if (st != MT_OK) {
            return st;
        }
        if (logits != NULL) {
            memcpy(logits + b * 5, A_fc, 5);
        }
        losses[b] = A_loss[0];
        if (A_loss[0] > fqt_loss_max) {
            fqt_loss_max = A_loss[0];
        }
        st = mt_fqt_logit_error_f32(5, fqt_errq, A_err_fc);
        if (st != MT_OK) {
            return st;
        }
    }
    { /* fc.bwd_in (error) */
        st = mt_linear_bwd_in_u8_f32(1, fc_w_zp, fc_s_w[0], 5, A_err_fc, fc_weight, 16, A_err_flat);
        if (st != MT_OK) {
            return st;
        }
    }
    { /* fc.bwd_w (weight_grad) */
        memset(A_grad_fc_weight, 0, 320);
        memset(A_grad_fc_bias, 0, 20);
        st = mt_linear_bwd_w_u8_f32(act_conv2_zp, A_flat, 16, A_err_fc, 5, A_grad_fc_weight, A_grad_fc_bias);
        if (st != MT_OK) {
            return st;
        }
    }
    { /* fc.update (update) */
        const mt_fqt_grad g = {A_grad_fc_weight, MT_FQT_GRAD_F32, 0, act_conv2_scale};
        const mt_fqt_grad gb = {A_grad_fc_bias, MT_FQT_GRAD_F32, 0, 1.0f};
        const mt_fqt_upd_params up = {lr, 0x1.99999a0000000p-4f, 0x1.0624de0000000p-10f, 0.0f, 0.0f};
        st = mt_fqt_upd_u8_any(&up, 5, 16, &g, &gb, NULL, fc_norm_mu, fc_norm_sd, fc_norm_init, fc_weight, fc_s_w, &fc_w_zp, fc_w_lo, fc_w_hi, fc_bias_step);
        if (st != MT_OK) {
            return st;
        }
    }
    { /* flat.bwd (error) */
        /* the error of a flatten is its output's error: same storage */
    }
    { /* conv2.relu6_bwd (error) */
        int32_t lo;
        int32_t hi;
        mt_fqt_act_range_u8(act_conv2_scale, act_conv2_zp, 2, &lo, &hi);
        st = mt_relu_bwd_u8_f32(16, lo, hi, A_conv2, A_err_conv2, A_errm_conv2);
        if (st != MT_OK) {
            return st;
        }
    }
    { /* conv2.bwd_in (error) */
        const mt_conv_params p = {0, 0, 2, 2, 1, 1, 1, -128, 127};
        static const mt_dims in_d = {1, 4, 4, 3};
        static const mt_dims f_d = {4, 3, 3, 3};
        static const mt_dims out_d = {1, 2, 2, 4};
        st = mt_conv2d_bwd_in_u8_f32(&p, conv2_w_zp, conv2_s_w[0], &out_d, A_errm_conv2, &f_d, conv2_weight, &in_d, A_err_pool);
        if (st != MT_OK) {
            return st;
        }
    }
    { /* conv2.bwd_w (weight_grad) */
        const mt_conv_params p = {act_conv1_zp, 0, 2, 2, 1, 1, 1, -128, 127};
        static const mt_dims in_d = {1, 4, 4, 3};
        static const mt_dims f_d = {4, 3, 3, 3};
        static const mt_dims out_d = {1, 2, 2, 4};
        memset(A_grad_conv2_weight, 0, 432);
        memset(A_grad_conv2_bias, 0, 16);
        st = mt_conv2d_bwd_w_u8_f32(&p, &in_d, A_pool, &out_d, A_errm_conv2, &f_d, A_grad_conv2_weight, A_grad_conv2_bias);
        if (st != MT_OK) {
            return st;
        }
    }
    { /* conv2.update (update) */
        const mt_fqt_grad g = {A_grad_conv2_weight, MT_FQT_GRAD_F32, 0, act_conv1_scale};
        const mt_fqt_grad gb = {A_grad_conv2_bias, MT_FQT_GRAD_F32, 0, 1.0f};
        const mt_fqt_upd_params up = {lr, 0x1.99999a0000000p-4f, 0x1.0624de0000000p-10f, 0.0f, 0.0f};
        st = mt_fqt_upd_u8_any(&up, 4, 27, &g, &gb, NULL, conv2_norm_mu, conv2_norm_sd, conv2_norm_init, conv2_weight, conv2_s_w, &conv2_w_zp, conv2_w_lo, conv2_w_hi, conv2_bias_step);
        if (st != MT_OK) {
            return st;
        }
    }
    { /* pool.bwd (error) */
        static const mt_pool_params p = {2, 2, 2, 2};
        static const mt_dims in_d = {1, 8, 8, 3};
        static const mt_dims out_d = {1, 4, 4, 3};
        st = mt_maxpool_bwd_f32(&p, &in_d, &out_d, (const uint8_t *)(void *)A_pool_argmax, A_err_pool, A_err_conv1);
        if (st != MT_OK) {
            return st;
        }
    }
    { /* conv1.relu_bwd (error) */
        int32_t lo;
        int32_t hi;
        mt_fqt_act_range_u8(act_conv1_scale, act_conv1_zp, 1, &lo, &hi);
        (void)hi;
        st = mt_relu_bwd_u8_f32(192, lo, 256, A_conv1, A_err_conv1, A_errm_conv1);
        if (st != MT_OK) {
            return st;
        }
    }
    { /* conv1.bwd_w (weight_grad) */
        const mt_conv_params p = {act_input_zp, 0, 1, 1, 1, 1, 1, -128, 127};
        static const mt_dims in_d = {1, 8, 8, 1};
        static const mt_dims f_d = {3, 3, 3, 1};
        static const mt_dims out_d = {1, 8, 8, 3};
        memset(A_grad_conv1_weight, 0, 108);
        memset(A_grad_conv1_bias, 0, 12);
        st = mt_conv2d_bwd_w_u8_f32(&p, &in_d, A_input, &out_d, A_errm_conv1, &f_d, A_grad_conv1_weight, A_grad_conv1_bias);
        if (st != MT_OK) {
            return st;
        }
    }
    { /* conv1.update (update) */
        const mt_fqt_grad g = {A_grad_conv1_weight, MT_FQT_GRAD_F32, 0, act_input_scale};
        const mt_fqt_grad gb = {A_grad_conv1_bias, MT_FQT_GRAD_F32, 0, 1.0f};
        const mt_fqt_upd_params up = {lr, 0x1.99999a0000000p-4f, 0x1.0624de0000000p-10f, 0.0f, 0.0f};
        st = mt_fqt_upd_u8_any(&up, 3, 9, &g, &gb, NULL, conv1_norm_mu, conv1_norm_sd, conv1_norm_init, conv1_weight, conv1_s_w, &conv1_w_zp, conv1_w_lo, conv1_w_hi, conv1_bias_step);
        if (st != MT_OK) {
            return st;
        }
    }
    { /* ema_update (update) */
        mt_fqt_range_update(&act_conv1, 0x1.99999a0000000p-4f);
        mt_fqt_qparams_u8(act_conv1.lo, act_conv1.hi, &act_conv1_scale, &act_conv1_zp);
        mt_fqt_range_update(&act_conv2, 0x1.99999a0000000p-4f);
        mt_fqt_qparams_u8(act_conv2.lo, act_conv2.hi, &act_conv2_scale, &act_conv2_zp);
        mt_fqt_range_update(&act_fc, 0x1.99999a0000000p-4f);
        mt_fqt_qparams_u8(act_fc.lo, act_fc.hi, &act_fc_scale, &act_fc_zp);
        st = mt_fqt_bias_rescale_u8(3, 9, conv1_weight, conv1_w_zp, act_input_scale, conv1_s_w[0], conv1_bias_step, conv1_bias_scale, conv1_bias);
        if (st != MT_OK) {
            return st;
        }
        st = mt_fqt_bias_rescale_u8(4, 27, conv2_weight, conv2_w_zp, act_conv1_scale, conv2_s_w[0], conv2_bias_step, conv2_bias_scale, conv2_bias);
        if (st != MT_OK) {
            return st;
        }
        st = mt_fqt_bias_rescale_u8(5, 16, fc_weight, fc_w_zp, act_conv2_scale, fc_s_w[0], fc_bias_step, fc_bias_scale, fc_bias);
        if (st != MT_OK) {
            return st;
        }
    }
    model_state.steps++;
    return st;
}

mt_status model_save_state(uint8_t *blob, int32_t size)
{
    const uint32_t head[4] = {MODEL_STATE_MAGIC, MODEL_STATE_FINGERPRINT, 0u, 0u};
    size_t off = sizeof(head);
    if (!blob || size < MODEL_STATE_BYTES) {
        return MT_ERR_ARG;
    }
    memcpy(blob, head, sizeof(head));
    memcpy(blob + 8, &model_state.steps, 4);
    memcpy(blob + 12, &model_state.rng, 4);
    memcpy(blob + off, &act_input.lo, 4);
    memcpy(blob + off + 4, &act_input.hi, 4);
    off += 8;
    memcpy(blob + off, &act_input_scale, 4);
    off += 4;
    memcpy(blob + off, &act_input_zp, 4);
    off += 4;
    memcpy(blob + off, &act_conv1.lo, 4);
    memcpy(blob + off + 4, &act_conv1.hi, 4);
    off += 8;
    memcpy(blob + off, &act_conv1_scale, 4);
    off += 4;
    memcpy(blob + off, &act_conv1_zp, 4);
    off += 4;
    memcpy(blob + off, &act_conv2.lo, 4);
    memcpy(blob + off + 4, &act_conv2.hi, 4);
    off += 8;
    memcpy(blob + off, &act_conv2_scale, 4);
    off += 4;
    memcpy(blob + off, &act_conv2_zp, 4);
    off += 4;
    memcpy(blob + off, &act_fc.lo, 4);
    memcpy(blob + off + 4, &act_fc.hi, 4);
    off += 8;
    memcpy(blob + off, &act_fc_scale, 4);
    off += 4;
    memcpy(blob + off, &act_fc_zp, 4);
    off += 4;
    memcpy(blob + off, conv1_weight, 27);
    off += 27;
    memcpy(blob + off, conv1_bias, 12);
    off += 12;
    memcpy(blob + off, conv1_s_w, 4);
    off += 4;
    memcpy(blob + off, conv1_bias_scale, 12);
    off += 12;
    memcpy(blob + off, &conv1_w_zp, 4);
    off += 4;
    memcpy(blob + off, conv1_w_lo, 4);
    off += 4;
    memcpy(blob + off, conv1_w_hi, 4);
    off += 4;
    memcpy(blob + off, conv1_norm_mu, 12);
    off += 12;
    memcpy(blob + off, conv1_norm_sd, 12);
    off += 12;
    memcpy(blob + off, conv1_norm_init, 3);
    off += 3;
    memcpy(blob + off, conv2_weight, 108);
    off += 108;
    memcpy(blob + off, conv2_bias, 16);
    off += 16;
    memcpy(blob + off, conv2_s_w, 4);
    off += 4;
    memcpy(blob + off, conv2_bias_scale, 16);
    off += 16;
    memcpy(blob + off, &conv2_w_zp, 4);
    off += 4;
    memcpy(blob + off, conv2_w_lo, 4);
    off += 4;
    memcpy(blob + off, conv2_w_hi, 4);
    off += 4;
    memcpy(blob + off, conv2_norm_mu, 16);
    off += 16;
    memcpy(blob + off, conv2_norm_sd, 16);
    off += 16;
    memcpy(blob + off, conv2_norm_init, 4);
    off += 4;
    memcpy(blob + off, fc_weight, 80);
    off += 80;
    memcpy(blob + off, fc_bias, 20);
    off += 20;
    memcpy(blob + off, fc_s_w, 4);
    off += 4;
    memcpy(blob + off, fc_bias_scale, 20);
    off += 20;
    memcpy(blob + off, &fc_w_zp, 4);
    off += 4;
    memcpy(blob + off, fc_w_lo, 4);
    off += 4;
    memcpy(blob + off, fc_w_hi, 4);
    off += 4;
    memcpy(blob + off, fc_norm_mu, 20);
    off += 20;
    memcpy(blob + off, fc_norm_sd, 20);
    off += 20;
    memcpy(blob + off, fc_norm_init, 5);
    off += 5;
    memcpy(blob + off, &fqt_loss_max, 4);
    off += 4;
    return MT_OK;
}

mt_status model_load_state(const uint8_t *blob, int32_t size)
{
    uint32_t head[4];
    size_t off = sizeof(head);
    if (!blob || size < MODEL_STATE_BYTES) {
        return MT_ERR_ARG;
    }
    memcpy(head, blob, sizeof(head));
    if (head[0] != MODEL_STATE_MAGIC || head[1] != MODEL_STATE_FINGERPRINT) {
        return MT_ERR_ARG;
    }
    model_state.steps = head[2];
    model_state.rng = head[3];
    memcpy(&act_input.lo, blob + off, 4);
    memcpy(&act_input.hi, blob + off + 4, 4);
    off += 8;
    memcpy(&act_input_scale, blob + off, 4);
    off += 4;
    memcpy(&act_input_zp, blob + off, 4);
    off += 4;
    memcpy(&act_conv1.lo, blob + off, 4);
    memcpy(&act_conv1.hi, blob + off + 4, 4);
    off += 8;
    memcpy(&act_conv1_scale, blob + off, 4);
    off += 4;
    memcpy(&act_conv1_zp, blob + off, 4);
    off += 4;
    memcpy(&act_conv2.lo, blob + off, 4);
    memcpy(&act_conv2.hi, blob + off + 4, 4);
    off += 8;
    memcpy(&act_conv2_scale, blob + off, 4);
    off += 4;
    memcpy(&act_conv2_zp, blob + off, 4);
    off += 4;
    memcpy(&act_fc.lo, blob + off, 4);
    memcpy(&act_fc.hi, blob + off + 4, 4);
    off += 8;
    memcpy(&act_fc_scale, blob + off, 4);
    off += 4;
    memcpy(&act_fc_zp, blob + off, 4);
    off += 4;
    memcpy(conv1_weight, blob + off, 27);
    off += 27;
    memcpy(conv1_bias, blob + off, 12);
    off += 12;
    memcpy(conv1_s_w, blob + off, 4);
    off += 4;
    memcpy(conv1_bias_scale, blob + off, 12);
    off += 12;
    memcpy(&conv1_w_zp, blob + off, 4);
    off += 4;
    memcpy(conv1_w_lo, blob + off, 4);
    off += 4;
    memcpy(conv1_w_hi, blob + off, 4);
    off += 4;
    memcpy(conv1_norm_mu, blob + off, 12);
    off += 12;
    memcpy(conv1_norm_sd, blob + off, 12);
    off += 12;
    memcpy(conv1_norm_init, blob + off, 3);
    off += 3;
    memcpy(conv2_weight, blob + off, 108);
    off += 108;
    memcpy(conv2_bias, blob + off, 16);
    off += 16;
    memcpy(conv2_s_w, blob + off, 4);
    off += 4;
    memcpy(conv2_bias_scale, blob + off, 16);
    off += 16;
    memcpy(&conv2_w_zp, blob + off, 4);
    off += 4;
    memcpy(conv2_w_lo, blob + off, 4);
    off += 4;
    memcpy(conv2_w_hi, blob + off, 4);
    off += 4;
    memcpy(conv2_norm_mu, blob + off, 16);
    off += 16;
    memcpy(conv2_norm_sd, blob + off, 16);
    off += 16;
    memcpy(conv2_norm_init, blob + off, 4);
    off += 4;
    memcpy(fc_weight, blob + off, 80);
    off += 80;
    memcpy(fc_bias, blob + off, 20);
    off += 20;
    memcpy(fc_s_w, blob + off, 4);
    off += 4;
    memcpy(fc_bias_scale, blob + off, 20);
    off += 20;
    memcpy(&fc_w_zp, blob + off, 4);
    off += 4;
    memcpy(fc_w_lo, blob + off, 4);
    off += 4;
    memcpy(fc_w_hi, blob + off, 4);
    off += 4;
    memcpy(fc_norm_mu, blob + off, 20);
    off += 20;
    memcpy(fc_norm_sd, blob + off, 20);
    off += 20;
    memcpy(fc_norm_init, blob + off, 5);
    off += 5;
    memcpy(&fqt_loss_max, blob + off, 4);
    off += 4;
    return MT_OK;
}
