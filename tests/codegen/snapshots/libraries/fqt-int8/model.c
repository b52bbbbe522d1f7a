/*
 * model.c: FQT training (see model.h): the state that moves every step, the arena, the
 * forward pass and the training step of the planner's schedule. Arena 1708 bytes.
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
static int32_t act_input_zp = -128;

/* conv1: activation range (EMA) */
static mt_fqt_range act_conv1 = {0.0f, 0x1.0cd3fa0000000p+1f, 0.0f, 0.0f, 1, 0, 0};

static float act_conv1_scale = 0x1.0de1dc0000000p-7f;
static int32_t act_conv1_zp = -128;

/* conv2: activation range (EMA) */
static mt_fqt_range act_conv2 = {0.0f, 0x1.f3f78e0000000p+0f, 0.0f, 0.0f, 1, 0, 0};

static float act_conv2_scale = 0x1.f5ed7c0000000p-8f;
static int32_t act_conv2_zp = -128;

/* fc: activation range (EMA) */
static mt_fqt_range act_fc = {-0x1.039a040000000p+0f, 0x1.7c7fa00000000p+1f, 0.0f, 0.0f, 1, 0, 0};

static float act_fc_scale = 0x1.0026780000000p-6f;
static int32_t act_fc_zp = -63;

/* fc: error range (EMA) */
static mt_fqt_range err_fc = {0.0f, 0.0f, 0.0f, 0.0f, 0, 0, 0};

/* flat: error range (EMA) */
static mt_fqt_range err_flat = {0.0f, 0.0f, 0.0f, 0.0f, 0, 0, 0};

/* pool: error range (EMA) */
static mt_fqt_range err_pool = {0.0f, 0.0f, 0.0f, 0.0f, 0, 0, 0};

/* conv1: weight [3, 3, 3, 1] int8 (RAM, trained) */
static int8_t conv1_weight[27] = {
    101, -127, 21, -28, -22, -11, -100, -12, -43, 127, 9, -13, -11, -26, -40, -15,
    18, -9, 63, -13, 2, 101, 36, -33, -12, 35, 127,
};

/* conv1: bias int32 (RAM) */
static int32_t conv1_bias[3] = {
    0, 0, 0,
};

/* conv1: weight scale(s) s_w */
static float conv1_s_w[3] = {0x1.36d8520000000p-7f, 0x1.942cfc0000000p-7f, 0x1.d6ba8e0000000p-8f};

/* conv1: accumulator scales s_x * s_w of the bias */
static float conv1_bias_scale[3] = {0x1.37317e0000000p-15f, 0x1.94a0ee0000000p-15f, 0x1.d741980000000p-16f};

static int32_t conv1_mult[3];
static int32_t conv1_shift[3];

/* conv1: weight range minimum (EMA) */
static float conv1_w_lo[3] = {-0x1.346aa20000000p+0f, -0x1.9104a20000000p+0f, -0x1.d30d180000000p-1f};

/* conv1: weight range maximum (EMA) */
static float conv1_w_hi[3] = {0x1.346aa20000000p+0f, 0x1.9104a20000000p+0f, 0x1.d30d180000000p-1f};

/* conv1: gradient mean (EMA) */
static float conv1_norm_mu[3] = {0.0f, 0.0f, 0.0f};

/* conv1: gradient sd (EMA) */
static float conv1_norm_sd[3] = {0.0f, 0.0f, 0.0f};

/* conv1: statistics initialized */
static int8_t conv1_norm_init[3] = {
    0, 0, 0,
};

static float conv1_bias_step[3];

/* conv2: weight [4, 3, 3, 3] int8 (RAM, trained) */
static int8_t conv2_weight[108] = {
    -12, -11, 45, -40, -13, 40, 26, 4, 30, -127, 46, -43, -75, 12, 31, -20,
    -48, 1, -2, 63, 34, 9, 50, -9, -42, 26, 26, -11, -40, 12, -127, 35,
    25, -83, 3, -49, 39, -104, -47, 36, 59, -110, -25, 17, -31, 81, -61, 18,
    -53, 72, -1, -19, -87, 86, 55, 55, 84, 26, -47, -59, -59, 101, -107, -44,
    -24, 16, 42, -92, -127, 0, 89, 56, 16, -23, 22, -18, 60, -58, 10, -8,
    40, 11, 127, 75, 75, -102, -17, -30, 27, -114, 58, 53, -65, -49, -40, 2,
    32, 102, -10, 38, 8, 88, 37, 68, -54, -10, -41, 75,
};

/* conv2: bias int32 (RAM) */
static int32_t conv2_bias[4] = {
    0, 0, 0, 0,
};

/* conv2: weight scale(s) s_w */
static float conv2_s_w[4] = {0x1.8d343c0000000p-8f, 0x1.5e41e80000000p-8f, 0x1.e5f2660000000p-9f, 0x1.6624620000000p-8f};

/* conv2: accumulator scales s_x * s_w of the bias */
static float conv2_bias_scale[4] = {0x1.a2be540000000p-15f, 0x1.7140460000000p-15f, 0x1.0026380000000p-15f, 0x1.7990340000000p-15f};

static int32_t conv2_mult[4];
static int32_t conv2_shift[4];

/* conv2: weight range minimum (EMA) */
static float conv2_w_lo[4] = {-0x1.8a19d40000000p-1f, -0x1.5b85640000000p-1f, -0x1.e226820000000p-2f, -0x1.63581a0000000p-1f};

/* conv2: weight range maximum (EMA) */
static float conv2_w_hi[4] = {0x1.8a19d40000000p-1f, 0x1.5b85640000000p-1f, 0x1.e226820000000p-2f, 0x1.63581a0000000p-1f};

/* conv2: gradient mean (EMA) */
static float conv2_norm_mu[4] = {0.0f, 0.0f, 0.0f, 0.0f};

/* conv2: gradient sd (EMA) */
static float conv2_norm_sd[4] = {0.0f, 0.0f, 0.0f, 0.0f};

/* conv2: statistics initialized */
static int8_t conv2_norm_init[4] = {
    0, 0, 0, 0,
};

static float conv2_bias_step[4];

/* fc: weight [5, 16] int8 (RAM, trained) */
static int8_t fc_weight[80] = {
    34, -16, -23, 25, -36, -48, 25, 127, -13, -29, -60, -69, 27, 44, 0, 17,
    7, 8, -93, -28, 7, -48, -29, -50, -20, 52, -25, -9, 49, 39, 103, -127,
    50, -28, 8, 49, 63, 61, 9, 94, -17, -8, 47, -32, 126, 59, 127, -2,
    -30, 13, 58, -46, 30, -1, 127, -52, 82, -51, -76, -56, -94, 12, 81, 13,
    45, 118, 20, 14, -20, -116, 55, -127, 47, -1, 81, -5, -60, 26, -41, -13,
};

/* fc: bias int32 (RAM) */
static int32_t fc_bias[5] = {
    0, 0, 0, 0, 0,
};

/* fc: weight scale(s) s_w */
static float fc_s_w[5] = {0x1.c162a60000000p-8f, 0x1.7d65dc0000000p-8f, 0x1.8cec120000000p-8f, 0x1.26c5c60000000p-8f, 0x1.4074f60000000p-8f};

/* fc: accumulator scales s_x * s_w of the bias */
static float fc_bias_scale[5] = {0x1.b88b780000000p-15f, 0x1.75e5140000000p-15f, 0x1.851d1c0000000p-15f, 0x1.20f9400000000p-15f, 0x1.3a27160000000p-15f};

static int32_t fc_mult[5];
static int32_t fc_shift[5];

/* fc: weight range minimum (EMA) */
static float fc_w_lo[5] = {-0x1.bddfe00000000p-1f, -0x1.7a6b100000000p-1f, -0x1.89d23a0000000p-1f, -0x1.24783a0000000p-1f, -0x1.3df40c0000000p-1f};

/* fc: weight range maximum (EMA) */
static float fc_w_hi[5] = {0x1.bddfe00000000p-1f, 0x1.7a6b100000000p-1f, 0x1.89d23a0000000p-1f, 0x1.24783a0000000p-1f, 0x1.3df40c0000000p-1f};

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

/* conv2: xorshift32 jump by 27 draws (earlier layers' weights) */
static const uint32_t conv2_jump[32] = {
    0x917797A5u, 0x07E3C604u, 0xCE600435u, 0xD89B82EEu, 0xF0E0FDB9u, 0x1E13C30Eu,
    0x4790717Eu, 0x4226ADB2u, 0xFCC1E074u, 0xD0786AD6u, 0x46270C52u, 0xF51FB1EAu,
    0x80CD9808u, 0x09D07C6Du, 0xDC45619Au, 0xB345E65Au, 0xA5FA489Du, 0xD7C598E7u,
    0x9557E222u, 0x077A9DD5u, 0x2D3DE45Bu, 0x31A4ED2Au, 0x7D9BB371u, 0x2524ACD3u,
    0x47FED547u, 0xAE08DA41u, 0x3D02E42Fu, 0x50E83BC6u, 0x30C7694Bu, 0xB28CE691u,
    0x464DFA99u, 0x605E460Fu
};

/* fc: xorshift32 jump by 135 draws (earlier layers' weights) */
static const uint32_t fc_jump[32] = {
    0xDA3AB160u, 0xB98481DDu, 0xC7BA9CFCu, 0xF6F8FCD7u, 0xB9AA5AF7u, 0x706D7E02u,
    0xE0214681u, 0x82338032u, 0x7C28D535u, 0xCEC17A9Cu, 0xECA83814u, 0xC2659908u,
    0x10D1CF38u, 0x0947EBD6u, 0xEDB2A04Cu, 0xCF05F3C1u, 0x14063F6Bu, 0xF7A0766Du,
    0xADD83EBFu, 0xAA4EF252u, 0x9A036421u, 0x5BF9722Fu, 0x86F02B49u, 0x42BFD4A1u,
    0x1B526CCCu, 0x36B39EE1u, 0xEEBBE495u, 0xEA85777Au, 0xDDA5B51Cu, 0x0603114Fu,
    0xAB40B694u, 0x1AC083E4u
};

/* xorshift32 jump by the step's 215 draws */
static const uint32_t fqt_jump_total[32] = {
    0xBC79CEA6u, 0xF0E3567Fu, 0x52E91074u, 0xF208A2BEu, 0x23904729u, 0x2C72BEF5u,
    0xC765AA71u, 0xD8EA4EAFu, 0xDE7D337Fu, 0x5C252149u, 0x4B353EFFu, 0x07474CC2u,
    0xA268FBEFu, 0x176268CAu, 0x2A5F6423u, 0xF918F283u, 0x05360D92u, 0x05740FBAu,
    0xB76DDAE9u, 0xC26A0E64u, 0x1F0904BFu, 0x04FEBFE2u, 0xAF11397Au, 0xE984E1AEu,
    0xBF1669E8u, 0xFF3D000Eu, 0xC81B8381u, 0x47AF28B5u, 0xEA3472ABu, 0xF2D593F5u,
    0x8E83462Bu, 0x0B75CFDFu
};

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
#define A_grad_conv2_weight ((int32_t *)(void *)(model_arena.bytes + 0)) /* grad:conv2.weight: s32 [4, 3, 3, 3], gradient */
#define A_conv1_scratch ((uint8_t *)(void *)(model_arena.bytes + 432)) /* conv1.scratch: u8 [144], scratch */
#define A_conv2_prescale ((int16_t *)(void *)(model_arena.bytes + 432)) /* conv2.prescale: s16 [1, 2, 2, 4], scratch */
#define A_conv2_scratch ((uint8_t *)(void *)(model_arena.bytes + 432)) /* conv2.scratch: u8 [432], scratch */
#define A_err_conv1 ((int8_t *)(void *)(model_arena.bytes + 432)) /* err:conv1: s8 [1, 8, 8, 3], error */
#define A_errm_conv1 ((int8_t *)(void *)(model_arena.bytes + 432)) /* errm:conv1: s8 [1, 8, 8, 3], error */
#define A_fc_prescale ((int16_t *)(void *)(model_arena.bytes + 432)) /* fc.prescale: s16 [1, 5], scratch */
#define A_fc_scratch ((uint8_t *)(void *)(model_arena.bytes + 432)) /* fc.scratch: u8 [32], scratch */
#define A_err_fc ((int8_t *)(void *)(model_arena.bytes + 444)) /* err:fc: s8 [1, 5], error */
#define A_err_conv2 ((int8_t *)(void *)(model_arena.bytes + 464)) /* err:conv2: s8 [1, 2, 2, 4], error */
#define A_err_flat ((int8_t *)(void *)(model_arena.bytes + 464)) /* err:flat: s8 [1, 16], error */
#define A_errm_conv2 ((int8_t *)(void *)(model_arena.bytes + 464)) /* errm:conv2: s8 [1, 2, 2, 4], error */
#define A_err_pool ((int8_t *)(void *)(model_arena.bytes + 624)) /* err:pool: s8 [1, 4, 4, 3], error */
#define A_fc ((int8_t *)(void *)(model_arena.bytes + 672)) /* fc: s8 [1, 5], logits */
#define A_loss ((int32_t *)(void *)(model_arena.bytes + 680)) /* loss: s32 [1], logits */
#define A_grad_fc_weight ((int32_t *)(void *)(model_arena.bytes + 864)) /* grad:fc.weight: s32 [5, 16], gradient */
#define A_conv1 ((int8_t *)(void *)(model_arena.bytes + 1184)) /* conv1: s8 [1, 8, 8, 3], kept */
#define A_grad_conv1_weight ((int32_t *)(void *)(model_arena.bytes + 1376)) /* grad:conv1.weight: s32 [3, 3, 3, 1], gradient */
#define A_input ((int8_t *)(void *)(model_arena.bytes + 1484)) /* input: s8 [1, 8, 8, 1], input */
#define A_pool ((int8_t *)(void *)(model_arena.bytes + 1548)) /* pool: s8 [1, 4, 4, 3], kept */
#define A_pool_argmax ((uint8_t *)(void *)(model_arena.bytes + 1596)) /* pool.argmax: u8 [1, 4, 4, 3], kept */
#define A_grad_fc_bias ((int32_t *)(void *)(model_arena.bytes + 1644)) /* grad:fc.bias: s32 [5], gradient */
#define A_grad_conv2_bias ((int32_t *)(void *)(model_arena.bytes + 1664)) /* grad:conv2.bias: s32 [4], gradient */
#define A_conv2 ((int8_t *)(void *)(model_arena.bytes + 1680)) /* conv2: s8 [1, 2, 2, 4], kept */
#define A_flat ((int8_t *)(void *)(model_arena.bytes + 1680)) /* flat: s8 [1, 16], kept */
#define A_grad_conv1_bias ((int32_t *)(void *)(model_arena.bytes + 1696)) /* grad:conv1.bias: s32 [3], gradient */

static int8_t fqt_batch_in[128]; /* the caller's batch */

static struct {
    uint32_t rng;   /* the method's xorshift32 state */
    uint32_t steps; /* steps taken */
} model_state = {5u, 0u};

#define MODEL_STATE_MAGIC 1414747213u
#define MODEL_STATE_FINGERPRINT 1889855311u

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
    st = mt_fqt_output_multipliers(act_input_scale, conv1_s_w, act_conv1_scale, 3, conv1_mult, conv1_shift);
    if (st != MT_OK) {
        return st;
    }
    st = mt_fqt_output_multipliers(act_conv1_scale, conv2_s_w, act_conv2_scale, 4, conv2_mult, conv2_shift);
    if (st != MT_OK) {
        return st;
    }
    st = mt_fqt_output_multipliers(act_conv2_scale, fc_s_w, act_fc_scale, 5, fc_mult, fc_shift);
    if (st != MT_OK) {
        return st;
    }
    return st;
}

/* The forward pass on the sample in the input tensor; `record`: note the output ranges. */
static mt_status fqt_forward(int32_t record)
{
    mt_status st = MT_OK;
    (void)record;
    { /* conv1.fwd (forward) */
        const mt_per_channel_quant q = {conv1_mult, conv1_shift};
        mt_conv_params p = {act_input_zp, act_conv1_zp, 1, 1, 1, 1, 1, -128, 127};
        static const mt_dims in_d = {1, 8, 8, 1};
        static const mt_dims f_d = {3, 3, 3, 1};
        static const mt_dims out_d = {1, 8, 8, 3};
        const mt_context ctx = {(void *)A_conv1_scratch, 144};
        mt_fqt_act_range_s8(act_conv1_scale, act_conv1_zp, 1, &p.act_min, &p.act_max);
        fqt_reset_extremes(3);
        st = mt_conv2d_fwd_s8_range(&ctx, &p, &q, &in_d, A_input, &f_d, conv1_weight, conv1_bias, &out_d, A_conv1, fqt_amin, fqt_amax);
        if (st != MT_OK) {
            return st;
        }
        if (record) {
            mt_fqt_acc_range_f32(3, fqt_amin, fqt_amax, act_input_scale, conv1_s_w, 1, &act_conv1);
        }
    }
    { /* pool.fwd (forward) */
        static const mt_pool_params p = {2, 2, 2, 2};
        static const mt_dims in_d = {1, 8, 8, 3};
        static const mt_dims out_d = {1, 4, 4, 3};
        st = mt_maxpool_fwd_s8_argmax(&p, &in_d, A_conv1, &out_d, A_pool, (uint8_t *)(void *)A_pool_argmax);
        if (st != MT_OK) {
            return st;
        }
    }
    { /* conv2.fwd (forward) */
        const mt_per_channel_quant q = {conv2_mult, conv2_shift};
        mt_conv_params p = {act_conv1_zp, act_conv2_zp, 2, 2, 1, 1, 1, -128, 127};
        static const mt_dims in_d = {1, 4, 4, 3};
        static const mt_dims f_d = {4, 3, 3, 3};
        static const mt_dims out_d = {1, 2, 2, 4};
        const mt_context ctx = {(void *)A_conv2_scratch, 432};
        mt_fqt_act_range_s8(act_conv2_scale, act_conv2_zp, 2, &p.act_min, &p.act_max);
        fqt_reset_extremes(4);
        st = mt_conv2d_fwd_s8_range(&ctx, &p, &q, &in_d, A_pool, &f_d, conv2_weight, conv2_bias, &out_d, A_conv2, fqt_amin, fqt_amax);
        if (st != MT_OK) {
            return st;
        }
        if (record) {
            mt_fqt_acc_range_f32(4, fqt_amin, fqt_amax, act_conv1_scale, conv2_s_w, 2, &act_conv2);
        }
    }
    { /* flat.fwd (forward) */
        /* flatten: NHWC order is the flat order, the output is the input's storage */
    }
    { /* fc.fwd (forward) */
        const mt_per_channel_quant q = {fc_mult, fc_shift};
        mt_linear_params p = {act_conv2_zp, act_fc_zp, -128, 127};
        mt_fqt_act_range_s8(act_fc_scale, act_fc_zp, 0, &p.act_min, &p.act_max);
        fqt_reset_extremes(5);
        st = mt_linear_fwd_s8_range(&p, &q, 1, A_flat, 16, fc_weight, fc_bias, 5, A_fc, fqt_amin, fqt_amax);
        if (st != MT_OK) {
            return st;
        }
        if (record) {
            mt_fqt_acc_range_f32(5, fqt_amin, fqt_amax, act_conv2_scale, fc_s_w, 0, &act_fc);
        }
    }
    return st;
}


/* The first round's copies of fc, conv2, per sample (plan: state:seed_keep). */
static int8_t fqt_seed_keep[42];

/* A batch's first step: every error tensor gets the range of the whole batch (see emit_fqt). */
static mt_status fqt_seed(const int32_t *labels)
{
    mt_status st = MT_OK;
    int32_t round;
    int32_t b;
    int32_t kept_ready = 0; /* the first round has kept every sample's tensors */
    for (round = 0; round < 3 && (!err_fc.initialized || !err_flat.initialized || !err_pool.initialized); ++round) {
        const int32_t restore = kept_ready && (!err_fc.initialized || !err_flat.initialized || !err_pool.initialized);
        for (b = 0; b < 2; ++b) {
            memcpy(A_input, fqt_batch_in + b * 64, 64);
            if (restore) { /* this round stops where only the kept tensors are read */
                memcpy(A_fc, fqt_seed_keep + b * 21 + 0, 5);
                memcpy(A_conv2, fqt_seed_keep + b * 21 + 5, 16);
            } else {
                st = fqt_forward(0);
                if (st != MT_OK) {
                    return st;
                }
                if (!kept_ready) {
                    memcpy(fqt_seed_keep + b * 21 + 0, A_fc, 5);
                    memcpy(fqt_seed_keep + b * 21 + 5, A_conv2, 16);
                }
            }
            { /* loss (loss) */
                st = mt_softmax_ce_s8(1, 5, A_fc, act_fc_scale, labels + b, A_loss, fqt_errq);
                if (st != MT_OK) {
                    return st;
                }
                st = mt_fqt_logit_error_s8(5, fqt_errq, 0, &err_fc, A_err_fc);
                if (st != MT_OK) {
                    return st;
                }
                if (!err_fc.initialized) {
                    continue;
                }
            }
            { /* fc.bwd_in (error) */
                float smax;
                float s_acc;
                int32_t mult;
                int32_t shift;
                int32_t amin = INT32_MAX;
                int32_t amax = INT32_MIN;
                st = mt_fqt_prescale_s16(1, 5, A_err_fc, fc_s_w, (int16_t *)(void *)A_fc_prescale, &smax);
                if (st != MT_OK) {
                    return st;
                }
                s_acc = (smax * mt_fqt_err_scale(&err_fc)) * 0x1p-8f; /* (s_max * s_e) * 2^-8 */
                if (!err_flat.initialized) { /* first step: this tensor's range seeds its EMA */
                    st = mt_linear_bwd_in_s8_s16(1, NULL, 0, 5, (const int16_t *)(void *)A_fc_prescale, fc_weight, 16, 0, 0, NULL, &amin, &amax);
                    if (st != MT_OK) {
                        return st;
                    }
                    mt_fqt_range_see_acc(&err_flat, amin, amax, s_acc);
                    continue;
                }
                st = mt_fqt_quantize_multiplier((double)s_acc / (double)mt_fqt_err_scale(&err_flat), &mult, &shift);
                if (st != MT_OK) {
                    return st;
                }
                st = mt_linear_bwd_in_s8_s16(1, NULL, 0, 5, (const int16_t *)(void *)A_fc_prescale, fc_weight, 16, mult, shift, A_err_flat, &amin, &amax);
                if (st != MT_OK) {
                    return st;
                }
                mt_fqt_range_see_acc(&err_flat, amin, amax, s_acc);
            }
            { /* flat.bwd (error) */
                /* the error of a flatten is its output's error: same storage */
            }
            { /* conv2.relu6_bwd (error) */
                int32_t lo;
                int32_t hi;
                mt_fqt_act_range_s8(act_conv2_scale, act_conv2_zp, 2, &lo, &hi);
                st = mt_relu_bwd_s8(16, lo, hi, A_conv2, A_err_conv2, A_errm_conv2);
                if (st != MT_OK) {
                    return st;
                }
            }
            { /* conv2.bwd_in (error) */
                mt_conv_params p = {act_conv1_zp, act_conv2_zp, 2, 2, 1, 1, 1, -128, 127};
                static const mt_dims in_d = {1, 4, 4, 3};
                static const mt_dims f_d = {4, 3, 3, 3};
                static const mt_dims out_d = {1, 2, 2, 4};
                float smax;
                float s_acc;
                int32_t mult;
                int32_t shift;
                int32_t amin = INT32_MAX;
                int32_t amax = INT32_MIN;
                st = mt_fqt_prescale_s16(4, 4, A_errm_conv2, conv2_s_w, (int16_t *)(void *)A_conv2_prescale, &smax);
                if (st != MT_OK) {
                    return st;
                }
                s_acc = (smax * mt_fqt_err_scale(&err_flat)) * 0x1p-8f; /* (s_max * s_e) * 2^-8 */
                if (!err_pool.initialized) { /* first step: this tensor's range seeds its EMA */
                    st = mt_conv2d_bwd_in_s8_s16(&p, NULL, 0, &out_d, (const int16_t *)(void *)A_conv2_prescale, &f_d, conv2_weight, &in_d, 0, 0, NULL, &amin, &amax);
                    if (st != MT_OK) {
                        return st;
                    }
                    mt_fqt_range_see_acc(&err_pool, amin, amax, s_acc);
                    continue;
                }
                st = mt_fqt_quantize_multiplier((double)s_acc / (double)mt_fqt_err_scale(&err_pool), &mult, &shift);
                if (st != MT_OK) {
                    return st;
                }
                st = mt_conv2d_bwd_in_s8_s16(&p, NULL, 0, &out_d, (const int16_t *)(void *)A_conv2_prescale, &f_d, conv2_weight, &in_d, mult, shift, A_err_pool, &amin, &amax);
                if (st != MT_OK) {
                    return st;
                }
                mt_fqt_range_see_acc(&err_pool, amin, amax, s_acc);
            }
            { /* pool.bwd (error) */
                static const mt_pool_params p = {2, 2, 2, 2};
                static const mt_dims in_d = {1, 8, 8, 3};
                static const mt_dims out_d = {1, 4, 4, 3};
                st = mt_maxpool_bwd_s8(&p, &in_d, &out_d, (const uint8_t *)(void *)A_pool_argmax, A_err_pool, A_err_conv1);
                if (st != MT_OK) {
                    return st;
                }
            }
            { /* conv1.relu_bwd (error) */
                int32_t lo;
                int32_t hi;
                mt_fqt_act_range_s8(act_conv1_scale, act_conv1_zp, 1, &lo, &hi);
                (void)hi;
                st = mt_relu_bwd_s8(192, lo, 128, A_conv1, A_err_conv1, A_errm_conv1);
                if (st != MT_OK) {
                    return st;
                }
            }
        }
        kept_ready = 1;
        mt_fqt_range_seed(&err_fc);
        mt_fqt_range_seed(&err_flat);
        mt_fqt_range_seed(&err_pool);
    }
    (void)kept_ready;
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
    return (int8_t *)(void *)fqt_batch_in;
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
    if ((const void *)inputs != (const void *)fqt_batch_in) {
        memcpy(fqt_batch_in, inputs, 128);
    }
    (void)rng0;
    (void)lr;
    (void)b;
    st = fqt_prepare();
    if (st != MT_OK) {
        return st;
    }
    st = fqt_seed(labels);
    if (st != MT_OK) {
        return st;
    }
    { /* conv1.grad_zero (weight_grad) */
        memset(A_grad_conv1_weight, 0, 108);
        memset(A_grad_conv1_bias, 0, 12);
    }
    { /* conv2.grad_zero (weight_grad) */
        memset(A_grad_conv2_weight, 0, 432);
        memset(A_grad_conv2_bias, 0, 16);
    }
    { /* fc.grad_zero (weight_grad) */
        memset(A_grad_fc_weight, 0, 320);
        memset(A_grad_fc_bias, 0, 20);
    }
    for (b = 0; b < 2; ++b) { /* one sample at a time */
        memcpy(A_input, fqt_batch_in + b * 64, 64);
        st = fqt_forward(1);
        if (st != MT_OK) {
            return st;
        }
        { /* loss (loss) */
            st = mt_softmax_ce_s8(1, 5, A_fc, act_fc_scale, labels + b, A_loss, fqt_errq);
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
            st = mt_fqt_logit_error_s8(5, fqt_errq, 0, &err_fc, A_err_fc);
            if (st != MT_OK) {
                return st;
            }
        }
        { /* fc.bwd_in (error) */
            float smax;
            float s_acc;
            int32_t mult;
            int32_t shift;
            int32_t amin = INT32_MAX;
            int32_t amax = INT32_MIN;
            st = mt_fqt_prescale_s16(1, 5, A_err_fc, fc_s_w, (int16_t *)(void *)A_fc_prescale, &smax);
            if (st != MT_OK) {
                return st;
            }
            s_acc = (smax * mt_fqt_err_scale(&err_fc)) * 0x1p-8f; /* (s_max * s_e) * 2^-8 */
            st = mt_fqt_quantize_multiplier((double)s_acc / (double)mt_fqt_err_scale(&err_flat), &mult, &shift);
            if (st != MT_OK) {
                return st;
            }
            st = mt_linear_bwd_in_s8_s16(1, NULL, 0, 5, (const int16_t *)(void *)A_fc_prescale, fc_weight, 16, mult, shift, A_err_flat, &amin, &amax);
            if (st != MT_OK) {
                return st;
            }
            mt_fqt_range_see_acc(&err_flat, amin, amax, s_acc);
        }
        { /* fc.bwd_w (weight_grad) */
            st = mt_linear_bwd_w_s8_s8(act_conv2_zp, 1, A_flat, 16, A_err_fc, 5, A_grad_fc_weight, A_grad_fc_bias);
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
            mt_fqt_act_range_s8(act_conv2_scale, act_conv2_zp, 2, &lo, &hi);
            st = mt_relu_bwd_s8(16, lo, hi, A_conv2, A_err_conv2, A_errm_conv2);
            if (st != MT_OK) {
                return st;
            }
        }
        { /* conv2.bwd_in (error) */
            mt_conv_params p = {act_conv1_zp, act_conv2_zp, 2, 2, 1, 1, 1, -128, 127};
            static const mt_dims in_d = {1, 4, 4, 3};
            static const mt_dims f_d = {4, 3, 3, 3};
            static const mt_dims out_d = {1, 2, 2, 4};
            float smax;
            float s_acc;
            int32_t mult;
            int32_t shift;
            int32_t amin = INT32_MAX;
            int32_t amax = INT32_MIN;
            st = mt_fqt_prescale_s16(4, 4, A_errm_conv2, conv2_s_w, (int16_t *)(void *)A_conv2_prescale, &smax);
            if (st != MT_OK) {
                return st;
            }
            s_acc = (smax * mt_fqt_err_scale(&err_flat)) * 0x1p-8f; /* (s_max * s_e) * 2^-8 */
            st = mt_fqt_quantize_multiplier((double)s_acc / (double)mt_fqt_err_scale(&err_pool), &mult, &shift);
            if (st != MT_OK) {
                return st;
            }
            st = mt_conv2d_bwd_in_s8_s16(&p, NULL, 0, &out_d, (const int16_t *)(void *)A_conv2_prescale, &f_d, conv2_weight, &in_d, mult, shift, A_err_pool, &amin, &amax);
            if (st != MT_OK) {
                return st;
            }
            mt_fqt_range_see_acc(&err_pool, amin, amax, s_acc);
        }
        { /* conv2.bwd_w (weight_grad) */
            mt_conv_params p = {act_conv1_zp, act_conv2_zp, 2, 2, 1, 1, 1, -128, 127};
            static const mt_dims in_d = {1, 4, 4, 3};
            static const mt_dims f_d = {4, 3, 3, 3};
            static const mt_dims out_d = {1, 2, 2, 4};
            st = mt_conv2d_bwd_w_s8_s8(&p, &in_d, A_pool, &out_d, A_errm_conv2, &f_d, A_grad_conv2_weight, A_grad_conv2_bias);
            if (st != MT_OK) {
                return st;
            }
        }
        { /* pool.bwd (error) */
            static const mt_pool_params p = {2, 2, 2, 2};
            static const mt_dims in_d = {1, 8, 8, 3};
            static const mt_dims out_d = {1, 4, 4, 3};
            st = mt_maxpool_bwd_s8(&p, &in_d, &out_d, (const uint8_t *)(void *)A_pool_argmax, A_err_pool, A_err_conv1);
            if (st != MT_OK) {
                return st;
            }
        }
        { /* conv1.relu_bwd (error) */
            int32_t lo;
            int32_t hi;
            mt_fqt_act_range_s8(act_conv1_scale, act_conv1_zp, 1, &lo, &hi);
            (void)hi;
            st = mt_relu_bwd_s8(192, lo, 128, A_conv1, A_err_conv1, A_errm_conv1);
            if (st != MT_OK) {
                return st;
            }
        }
        { /* conv1.bwd_w (weight_grad) */
            mt_conv_params p = {act_input_zp, act_conv1_zp, 1, 1, 1, 1, 1, -128, 127};
            static const mt_dims in_d = {1, 8, 8, 1};
            static const mt_dims f_d = {3, 3, 3, 1};
            static const mt_dims out_d = {1, 8, 8, 3};
            st = mt_conv2d_bwd_w_s8_s8(&p, &in_d, A_input, &out_d, A_errm_conv1, &f_d, A_grad_conv1_weight, A_grad_conv1_bias);
            if (st != MT_OK) {
                return st;
            }
        }
    }
    { /* fc.update (update) */
        uint32_t r = rng0;
        mt_xorshift32_jump(&r, fc_jump); /* to this layer's place in the step's stream */
        const float s_e = mt_fqt_err_scale(&err_fc);
        const mt_fqt_upd_params up = {lr, 0x1.99999a0000000p-4f, 0x1.0624de0000000p-10f, act_conv2_scale * s_e, s_e};
        st = mt_fqt_upd_s8(&up, 5, 16, A_grad_fc_weight, A_grad_fc_bias, NULL, fc_norm_mu, fc_norm_sd, fc_norm_init, fc_weight, fc_s_w, fc_w_lo, fc_w_hi, fc_bias_step, &r);
        if (st != MT_OK) {
            return st;
        }
    }
    { /* conv2.update (update) */
        uint32_t r = rng0;
        mt_xorshift32_jump(&r, conv2_jump); /* to this layer's place in the step's stream */
        const float s_e = mt_fqt_err_scale(&err_flat);
        const mt_fqt_upd_params up = {lr, 0x1.99999a0000000p-4f, 0x1.0624de0000000p-10f, act_conv1_scale * s_e, s_e};
        st = mt_fqt_upd_s8(&up, 4, 27, A_grad_conv2_weight, A_grad_conv2_bias, NULL, conv2_norm_mu, conv2_norm_sd, conv2_norm_init, conv2_weight, conv2_s_w, conv2_w_lo, conv2_w_hi, conv2_bias_step, &r);
        if (st != MT_OK) {
            return st;
        }
    }
    { /* conv1.update (update) */
        uint32_t r = rng0;
        const float s_e = mt_fqt_err_scale(&err_pool);
        const mt_fqt_upd_params up = {lr, 0x1.99999a0000000p-4f, 0x1.0624de0000000p-10f, act_input_scale * s_e, s_e};
        st = mt_fqt_upd_s8(&up, 3, 9, A_grad_conv1_weight, A_grad_conv1_bias, NULL, conv1_norm_mu, conv1_norm_sd, conv1_norm_init, conv1_weight, conv1_s_w, conv1_w_lo, conv1_w_hi, conv1_bias_step, &r);
        if (st != MT_OK) {
            return st;
        }
    }
    { /* ema_update (update) */
        mt_fqt_range_update(&act_conv1, 0x1.99999a0000000p-4f);
        mt_fqt_qparams_s8(act_conv1.lo, act_conv1.hi, &act_conv1_scale, &act_conv1_zp);
        mt_fqt_range_update(&act_conv2, 0x1.99999a0000000p-4f);
        mt_fqt_qparams_s8(act_conv2.lo, act_conv2.hi, &act_conv2_scale, &act_conv2_zp);
        mt_fqt_range_update(&act_fc, 0x1.99999a0000000p-4f);
        mt_fqt_qparams_s8(act_fc.lo, act_fc.hi, &act_fc_scale, &act_fc_zp);
        mt_fqt_range_update(&err_fc, 0x1.99999a0000000p-4f);
        mt_fqt_range_update(&err_flat, 0x1.99999a0000000p-4f);
        mt_fqt_range_update(&err_pool, 0x1.99999a0000000p-4f);
        st = mt_fqt_bias_rescale_s32(3, 9, conv1_weight, act_input_scale, conv1_s_w, conv1_bias_step, NULL, conv1_bias_scale, conv1_bias);
        if (st != MT_OK) {
            return st;
        }
        st = mt_fqt_bias_rescale_s32(4, 27, conv2_weight, act_conv1_scale, conv2_s_w, conv2_bias_step, NULL, conv2_bias_scale, conv2_bias);
        if (st != MT_OK) {
            return st;
        }
        st = mt_fqt_bias_rescale_s32(5, 16, fc_weight, act_conv2_scale, fc_s_w, fc_bias_step, NULL, fc_bias_scale, fc_bias);
        if (st != MT_OK) {
            return st;
        }
        model_state.rng = rng0;
        mt_xorshift32_jump(&model_state.rng, fqt_jump_total); /* past every draw of the step */
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
    memcpy(blob + off, &err_fc.lo, 4);
    memcpy(blob + off + 4, &err_fc.hi, 4);
    off += 8;
    memcpy(blob + off, &err_fc.initialized, 4);
    off += 4;
    memcpy(blob + off, &err_flat.lo, 4);
    memcpy(blob + off + 4, &err_flat.hi, 4);
    off += 8;
    memcpy(blob + off, &err_flat.initialized, 4);
    off += 4;
    memcpy(blob + off, &err_pool.lo, 4);
    memcpy(blob + off + 4, &err_pool.hi, 4);
    off += 8;
    memcpy(blob + off, &err_pool.initialized, 4);
    off += 4;
    memcpy(blob + off, conv1_weight, 27);
    off += 27;
    memcpy(blob + off, conv1_bias, 12);
    off += 12;
    memcpy(blob + off, conv1_s_w, 12);
    off += 12;
    memcpy(blob + off, conv1_bias_scale, 12);
    off += 12;
    memcpy(blob + off, conv1_w_lo, 12);
    off += 12;
    memcpy(blob + off, conv1_w_hi, 12);
    off += 12;
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
    memcpy(blob + off, conv2_s_w, 16);
    off += 16;
    memcpy(blob + off, conv2_bias_scale, 16);
    off += 16;
    memcpy(blob + off, conv2_w_lo, 16);
    off += 16;
    memcpy(blob + off, conv2_w_hi, 16);
    off += 16;
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
    memcpy(blob + off, fc_s_w, 20);
    off += 20;
    memcpy(blob + off, fc_bias_scale, 20);
    off += 20;
    memcpy(blob + off, fc_w_lo, 20);
    off += 20;
    memcpy(blob + off, fc_w_hi, 20);
    off += 20;
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
    memcpy(&err_fc.lo, blob + off, 4);
    memcpy(&err_fc.hi, blob + off + 4, 4);
    off += 8;
    memcpy(&err_fc.initialized, blob + off, 4);
    off += 4;
    memcpy(&err_flat.lo, blob + off, 4);
    memcpy(&err_flat.hi, blob + off + 4, 4);
    off += 8;
    memcpy(&err_flat.initialized, blob + off, 4);
    off += 4;
    memcpy(&err_pool.lo, blob + off, 4);
    memcpy(&err_pool.hi, blob + off + 4, 4);
    off += 8;
    memcpy(&err_pool.initialized, blob + off, 4);
    off += 4;
    memcpy(conv1_weight, blob + off, 27);
    off += 27;
    memcpy(conv1_bias, blob + off, 12);
    off += 12;
    memcpy(conv1_s_w, blob + off, 12);
    off += 12;
    memcpy(conv1_bias_scale, blob + off, 12);
    off += 12;
    memcpy(conv1_w_lo, blob + off, 12);
    off += 12;
    memcpy(conv1_w_hi, blob + off, 12);
    off += 12;
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
    memcpy(conv2_s_w, blob + off, 16);
    off += 16;
    memcpy(conv2_bias_scale, blob + off, 16);
    off += 16;
    memcpy(conv2_w_lo, blob + off, 16);
    off += 16;
    memcpy(conv2_w_hi, blob + off, 16);
    off += 16;
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
    memcpy(fc_s_w, blob + off, 20);
    off += 20;
    memcpy(fc_bias_scale, blob + off, 20);
    off += 20;
    memcpy(fc_w_lo, blob + off, 20);
    off += 20;
    memcpy(fc_w_hi, blob + off, 20);
    off += 20;
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
