/*
 * model.c: constants, trainable tensors, arena, forward pass and training step (see model.h).
 * Method zo; kernels planned for: ref; arena 856 bytes
 * (max of the training step's 856 and inference's 256, which share it).
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
#include <string.h>

#include "model.h"
#include "mt_nn.h"
#include "mt_train.h"

static const int32_t conv1_multiplier[3] = {
    1237380605, 1608902170, 1873829714,
};

static const int32_t conv1_shift[3] = {
    -7, -7, -8,
};

static const int32_t conv2_multiplier[4] = {
    1793838764, 1581820224, 1097307985, 1617428709,
};

static const int32_t conv2_shift[4] = {
    -7, -7, -7, -7,
};

static const int32_t fc_multiplier[5] = {
    1844851718, 1565744314, 1629475721, 1210123239, 1315564535,
};

static const int32_t fc_shift[5] = {
    -8, -8, -8, -8, -8,
};

/* conv1: trainable weight [3, 3, 3, 1] int8 (RAM) */
static int8_t conv1_weight[27] = {
    101, -127, 21, -28, -22, -11, -100, -12, -43, 127, 9, -13, -11, -26, -40, -15,
    18, -9, 63, -13, 2, 101, 36, -33, -12, 35, 127,
};

/* conv1: trainable bias int32 (RAM) */
static int32_t conv1_bias[3] = {
    0, 0, 0,
};

/* conv2: trainable weight [4, 3, 3, 3] int8 (RAM) */
static int8_t conv2_weight[108] = {
    -12, -11, 45, -40, -13, 40, 26, 4, 30, -127, 46, -43, -75, 12, 31, -20,
    -48, 1, -2, 63, 34, 9, 50, -9, -42, 26, 26, -11, -40, 12, -127, 35,
    25, -83, 3, -49, 39, -104, -47, 36, 59, -110, -25, 17, -31, 81, -61, 18,
    -53, 72, -1, -19, -87, 86, 55, 55, 84, 26, -47, -59, -59, 101, -107, -44,
    -24, 16, 42, -92, -127, 0, 89, 56, 16, -23, 22, -18, 60, -58, 10, -8,
    40, 11, 127, 75, 75, -102, -17, -30, 27, -114, 58, 53, -65, -49, -40, 2,
    32, 102, -10, 38, 8, 88, 37, 68, -54, -10, -41, 75,
};

/* conv2: trainable bias int32 (RAM) */
static int32_t conv2_bias[4] = {
    0, 0, 0, 0,
};

/* fc: trainable weight [5, 16] int8 (RAM) */
static int8_t fc_weight[80] = {
    34, -16, -23, 25, -36, -48, 25, 127, -13, -29, -60, -69, 27, 44, 0, 17,
    7, 8, -93, -28, 7, -48, -29, -50, -20, 52, -25, -9, 49, 39, 103, -127,
    50, -28, 8, 49, 63, 61, 9, 94, -17, -8, 47, -32, 126, 59, 127, -2,
    -30, 13, 58, -46, 30, -1, 127, -52, 82, -51, -76, -56, -94, 12, 81, 13,
    45, 118, 20, 14, -20, -116, 55, -127, 47, -1, 81, -5, -60, 26, -41, -13,
};

/* fc: trainable bias int32 (RAM) */
static int32_t fc_bias[5] = {
    0, 0, 0, 0, 0,
};

/* conv1: weight scales s_w (QAS) */
static const float conv1_s_w[3] = {
    0x1.36d8520000000p-7f, 0x1.942cfc0000000p-7f, 0x1.d6ba8e0000000p-8f,
};

/* conv1: bias scales s_x * s_w (QAS) */
static const float conv1_s_b[3] = {
    0x1.37317e0000000p-15f, 0x1.94a0ee0000000p-15f, 0x1.d741980000000p-16f,
};

/* conv2: weight scales s_w (QAS) */
static const float conv2_s_w[4] = {
    0x1.8d343c0000000p-8f, 0x1.5e41e80000000p-8f, 0x1.e5f2660000000p-9f, 0x1.6624620000000p-8f,
};

/* conv2: bias scales s_x * s_w (QAS) */
static const float conv2_s_b[4] = {
    0x1.a2fcaa0000000p-15f, 0x1.71773e0000000p-15f, 0x1.004c5c0000000p-15f, 0x1.79c86a0000000p-15f,
};

/* conv2: requantization slope M_c = s_x * s_w / s_y */
static const float conv2_slope[4] = {
    0x1.abaf3a0000000p-8f, 0x1.7922a40000000p-8f, 0x1.059e5e0000000p-8f, 0x1.81a0020000000p-8f,
};

/* fc: weight scales s_w (QAS) */
static const float fc_s_w[5] = {
    0x1.c162a60000000p-8f, 0x1.7d65dc0000000p-8f, 0x1.8cec120000000p-8f, 0x1.26c5c60000000p-8f, 0x1.4074f60000000p-8f,
};

/* fc: bias scales s_x * s_w (QAS) */
static const float fc_s_b[5] = {
    0x1.b83f1c0000000p-15f, 0x1.75a4440000000p-15f, 0x1.84d9a80000000p-15f, 0x1.20c72a0000000p-15f, 0x1.39f0a20000000p-15f,
};

/* fc: requantization slope M_c = s_x * s_w / s_y */
static const float fc_slope[5] = {
    0x1.b7d8d00000000p-9f, 0x1.754d720000000p-9f, 0x1.847f4e0000000p-9f, 0x1.2084100000000p-9f, 0x1.39a7b00000000p-9f,
};

/* The working memory of predict and train_step (never both at once). */
static union {
    int64_t align; /* 8-byte alignment for word and doubleword accesses */
    int8_t bytes[MODEL_ARENA_BYTES];
} model_arena;

/* The training step's tensors at the planner's offsets. */
#define A_a_conv1 ((int8_t *)(void *)(model_arena.bytes + 0)) /* a:conv1: s8 [2, 8, 8, 3], activation */
#define A_a_conv2 ((int8_t *)(void *)(model_arena.bytes + 0)) /* a:conv2: s8 [2, 2, 2, 4], activation */
#define A_a_flat ((int8_t *)(void *)(model_arena.bytes + 0)) /* a:flat: s8 [2, 16], activation */
#define A_b_conv1 ((int8_t *)(void *)(model_arena.bytes + 0)) /* b:conv1: s8 [2, 8, 8, 3], activation */
#define A_gy_np_conv2 ((int32_t *)(void *)(model_arena.bytes + 0)) /* gy:np:conv2: s32 [2, 16], gradient */
#define A_gy_np_fc ((int32_t *)(void *)(model_arena.bytes + 0)) /* gy:np:fc: s32 [2, 5], gradient */
#define A_lq_wp_conv1 ((int32_t *)(void *)(model_arena.bytes + 0)) /* lq:wp:conv1: s32 [2], query */
#define A_q_wp_conv1_conv1 ((int8_t *)(void *)(model_arena.bytes + 0)) /* q:wp:conv1:conv1: s8 [2, 8, 8, 3], query */
#define A_q_wp_conv1_conv2 ((int8_t *)(void *)(model_arena.bytes + 0)) /* q:wp:conv1:conv2: s8 [2, 2, 2, 4], query */
#define A_q_wp_conv1_flat ((int8_t *)(void *)(model_arena.bytes + 0)) /* q:wp:conv1:flat: s8 [2, 16], query */
#define A_a_fc ((int8_t *)(void *)(model_arena.bytes + 32)) /* a:fc: s8 [2, 5], activation */
#define A_q_wp_conv1_fc ((int8_t *)(void *)(model_arena.bytes + 32)) /* q:wp:conv1:fc: s8 [2, 5], query */
#define A_b_fc ((int8_t *)(void *)(model_arena.bytes + 40)) /* b:fc: s8 [2, 5], kept */
#define A_py_fc ((int8_t *)(void *)(model_arena.bytes + 52)) /* py:fc: s8 [2, 5], perturbed */
#define A_lq_np_fc ((int32_t *)(void *)(model_arena.bytes + 64)) /* lq:np:fc: s32 [2], query */
#define A_b_conv2 ((int8_t *)(void *)(model_arena.bytes + 128)) /* b:conv2: s8 [2, 2, 2, 4], kept */
#define A_b_flat ((int8_t *)(void *)(model_arena.bytes + 128)) /* b:flat: s8 [2, 16], kept */
#define A_lq_np_conv2 ((int32_t *)(void *)(model_arena.bytes + 160)) /* lq:np:conv2: s32 [2], query */
#define A_py_conv2 ((int8_t *)(void *)(model_arena.bytes + 160)) /* py:conv2: s8 [2, 2, 2, 4], perturbed */
#define A_q_np_conv2_flat ((int8_t *)(void *)(model_arena.bytes + 160)) /* q:np:conv2:flat: s8 [2, 16], query */
#define A_q_np_conv2_fc ((int8_t *)(void *)(model_arena.bytes + 192)) /* q:np:conv2:fc: s8 [2, 5], query */
#define A_S_wp_conv1 ((int64_t *)(void *)(model_arena.bytes + 384)) /* S:wp:conv1: s64 [30], gradient */
#define A_a_pool ((int8_t *)(void *)(model_arena.bytes + 384)) /* a:pool: s8 [2, 4, 4, 3], activation */
#define A_b_pool ((int8_t *)(void *)(model_arena.bytes + 384)) /* b:pool: s8 [2, 4, 4, 3], kept */
#define A_input ((int8_t *)(void *)(model_arena.bytes + 624)) /* input: s8 [2, 8, 8, 1], input */
#define A_pw_conv1_weight ((int8_t *)(void *)(model_arena.bytes + 752)) /* pw:conv1.weight: s8 [3, 3, 3, 1], perturbed */
#define A_q_wp_conv1_pool ((int8_t *)(void *)(model_arena.bytes + 752)) /* q:wp:conv1:pool: s8 [2, 4, 4, 3], query */
#define A_pw_conv1_bias ((int32_t *)(void *)(model_arena.bytes + 780)) /* pw:conv1.bias: s32 [3], perturbed */
#define A_l0 ((int32_t *)(void *)(model_arena.bytes + 848)) /* l0: s32 [2], logits */

static struct {
    uint32_t rng;   /* the method's xorshift32 state */
    uint32_t steps; /* steps taken */
} model_state = {5u, 0u};

#define MODEL_STATE_MAGIC 1414747213u
#define MODEL_STATE_FINGERPRINT 2808418874u

mt_status model_init(void)
{
    /* no kernel needs scratch memory */
    return MT_OK;
}

static model_layer_hook model_layer_hook_fn = NULL;

void model_set_layer_hook(model_layer_hook hook)
{
    model_layer_hook_fn = hook;
}

int8_t *model_input_buffer(void)
{
    return (model_arena.bytes + 192);
}

mt_status model_predict(const int8_t *input, int8_t *logits)
{
    mt_status st = MT_OK;
    if (!input || !logits) {
        return MT_ERR_ARG;
    }
    if (input != (model_arena.bytes + 192)) {
        memcpy((model_arena.bytes + 192), input, MODEL_INPUT_SIZE);
    }
    { /* [0] conv1: conv2d -> [8, 8, 3] */
        static const mt_conv_params p = {-128, -128, 1, 1, 1, 1, 1, -128, 127};
        static const mt_per_channel_quant q = {conv1_multiplier, conv1_shift};
        static const mt_dims in_d = {1, 8, 8, 1};
        static const mt_dims f_d = {3, 3, 3, 1};
        static const mt_dims out_d = {1, 8, 8, 3};
        const mt_context ctx = {NULL, 0};
        st = mt_conv2d_fwd_s8(&ctx, &p, &q, &in_d, (model_arena.bytes + 192), &f_d, conv1_weight, conv1_bias,
                              &out_d, (model_arena.bytes + 0));
        if (st != MT_OK) {
            return st;
        }
        if (model_layer_hook_fn) {
            model_layer_hook_fn(0, "conv1", (model_arena.bytes + 0), 192);
        }
    }
    { /* [1] pool: maxpool -> [4, 4, 3] */
        static const mt_pool_params p = {2, 2, 2, 2};
        static const mt_dims in_d = {1, 8, 8, 3};
        static const mt_dims out_d = {1, 4, 4, 3};
        st = mt_maxpool_fwd_s8(&p, &in_d, (model_arena.bytes + 0), &out_d, (model_arena.bytes + 192));
        if (st != MT_OK) {
            return st;
        }
        if (model_layer_hook_fn) {
            model_layer_hook_fn(1, "pool", (model_arena.bytes + 192), 48);
        }
    }
    { /* [2] conv2: conv2d -> [2, 2, 4] */
        static const mt_conv_params p = {-128, -128, 2, 2, 1, 1, 1, -128, 127};
        static const mt_per_channel_quant q = {conv2_multiplier, conv2_shift};
        static const mt_dims in_d = {1, 4, 4, 3};
        static const mt_dims f_d = {4, 3, 3, 3};
        static const mt_dims out_d = {1, 2, 2, 4};
        const mt_context ctx = {NULL, 0};
        st = mt_conv2d_fwd_s8(&ctx, &p, &q, &in_d, (model_arena.bytes + 192), &f_d, conv2_weight, conv2_bias,
                              &out_d, (model_arena.bytes + 0));
        if (st != MT_OK) {
            return st;
        }
        if (model_layer_hook_fn) {
            model_layer_hook_fn(2, "conv2", (model_arena.bytes + 0), 16);
        }
    }
    { /* [3] flat: flatten -> [16] */
        /* NHWC order is the flat order: the output is the input's storage */
        if (model_layer_hook_fn) {
            model_layer_hook_fn(3, "flat", (model_arena.bytes + 0), 16);
        }
    }
    { /* [4] fc: linear -> [5] */
        static const mt_linear_params p = {-128, -64, -128, 127};
        static const mt_per_channel_quant q = {fc_multiplier, fc_shift};
        const mt_context ctx = {NULL, 0};
        st = mt_linear_fwd_s8(&ctx, &p, &q, 1, (model_arena.bytes + 0), 16, fc_weight, fc_bias, 5,
                              (model_arena.bytes + 16));
        if (st != MT_OK) {
            return st;
        }
        if (model_layer_hook_fn) {
            model_layer_hook_fn(4, "fc", (model_arena.bytes + 16), 5);
        }
    }
    memcpy(logits, (model_arena.bytes + 16), MODEL_OUTPUT_SIZE);
    return st;
}

int8_t *model_train_input_buffer(void)
{
    return A_input;
}

uint32_t model_train_steps(void)
{
    return model_state.steps;
}

mt_status model_train_step(const int8_t *inputs, const int32_t *labels, float lr, int32_t *losses,
                           int8_t *logits)
{
    mt_status st = MT_OK;
    int32_t query;
    uint32_t replay;
    if (!inputs || !labels || !losses) {
        return MT_ERR_ARG;
    }
    if (!MT_LR_VALID(lr)) { /* NaN, +-inf, 0 or negative: refused before any state changes */
        return MT_ERR_ARG;
    }
    if (inputs != A_input) {
        memcpy(A_input, inputs, 128);
    }
    { /* a:conv1.fwd (forward) */
        static const mt_conv_params p = {-128, -128, 1, 1, 1, 1, 1, -128, 127};
        static const mt_per_channel_quant q = {conv1_multiplier, conv1_shift};
        static const mt_dims in_d = {2, 8, 8, 1};
        static const mt_dims f_d = {3, 3, 3, 1};
        static const mt_dims out_d = {2, 8, 8, 3};
        const mt_context ctx = {NULL, 0};
        st = mt_conv2d_fwd_s8(&ctx, &p, &q, &in_d, A_input, &f_d, conv1_weight, conv1_bias, &out_d,
                              A_a_conv1);
        if (st != MT_OK) {
            return st;
        }
    }
    { /* a:pool.fwd (forward) */
        static const mt_pool_params p = {2, 2, 2, 2};
        static const mt_dims in_d = {2, 8, 8, 3};
        static const mt_dims out_d = {2, 4, 4, 3};
        st = mt_maxpool_fwd_s8(&p, &in_d, A_a_conv1, &out_d, A_a_pool);
        if (st != MT_OK) {
            return st;
        }
    }
    { /* a:conv2.fwd (forward) */
        static const mt_conv_params p = {-128, -128, 2, 2, 1, 1, 1, -128, 127};
        static const mt_per_channel_quant q = {conv2_multiplier, conv2_shift};
        static const mt_dims in_d = {2, 4, 4, 3};
        static const mt_dims f_d = {4, 3, 3, 3};
        static const mt_dims out_d = {2, 2, 2, 4};
        const mt_context ctx = {NULL, 0};
        st = mt_conv2d_fwd_s8(&ctx, &p, &q, &in_d, A_a_pool, &f_d, conv2_weight, conv2_bias, &out_d,
                              A_a_conv2);
        if (st != MT_OK) {
            return st;
        }
    }
    { /* a:flat.fwd (forward) */
        /* flatten: NHWC order is the flat order, the output is the input's storage */
    }
    { /* a:fc.fwd (forward) */
        static const mt_linear_params p = {-128, -64, -128, 127};
        static const mt_per_channel_quant q = {fc_multiplier, fc_shift};
        const mt_context ctx = {NULL, 0};
        st = mt_linear_fwd_s8(&ctx, &p, &q, 2, A_a_flat, 16, fc_weight, fc_bias, 5, A_a_fc);
        if (st != MT_OK) {
            return st;
        }
    }
    { /* a:loss (loss) */
        st = mt_softmax_ce_s8(2, 5, A_a_fc, 0x1.003b8a0000000p-6f, labels, A_l0, NULL);
        if (st != MT_OK) {
            return st;
        }
        if (logits != NULL) {
            memcpy(logits, A_a_fc, 10);
        }
        memcpy(losses, A_l0, 8);
    }
    { /* wp:conv1.zero (query) */
        memset(A_S_wp_conv1, 0, 240);
    }
    for (query = 0; query < 4; ++query) { /* queries:wp:conv1 */
        { /* wp:conv1.perturb.conv1 (query) */
            replay = model_state.rng; /* the accumulation replays this query's draws */
            st = mt_zo_perturb_wp_s8(&model_state.rng, 1, 100, 27, conv1_weight, 3, conv1_bias, A_pw_conv1_weight,
                                     A_pw_conv1_bias);
            if (st != MT_OK) {
                return st;
            }
        }
        { /* q:wp:conv1:conv1.query (query) */
            static const mt_conv_params p = {-128, -128, 1, 1, 1, 1, 1, -128, 127};
            static const mt_per_channel_quant q = {conv1_multiplier, conv1_shift};
            static const mt_dims in_d = {2, 8, 8, 1};
            static const mt_dims f_d = {3, 3, 3, 1};
            static const mt_dims out_d = {2, 8, 8, 3};
            const mt_context ctx = {NULL, 0};
            st = mt_conv2d_fwd_s8(&ctx, &p, &q, &in_d, A_input, &f_d, A_pw_conv1_weight, A_pw_conv1_bias, &out_d,
                                  A_q_wp_conv1_conv1);
            if (st != MT_OK) {
                return st;
            }
        }
        { /* q:wp:conv1:pool.query (query) */
            static const mt_pool_params p = {2, 2, 2, 2};
            static const mt_dims in_d = {2, 8, 8, 3};
            static const mt_dims out_d = {2, 4, 4, 3};
            st = mt_maxpool_fwd_s8(&p, &in_d, A_q_wp_conv1_conv1, &out_d, A_q_wp_conv1_pool);
            if (st != MT_OK) {
                return st;
            }
        }
        { /* q:wp:conv1:conv2.query (query) */
            static const mt_conv_params p = {-128, -128, 2, 2, 1, 1, 1, -128, 127};
            static const mt_per_channel_quant q = {conv2_multiplier, conv2_shift};
            static const mt_dims in_d = {2, 4, 4, 3};
            static const mt_dims f_d = {4, 3, 3, 3};
            static const mt_dims out_d = {2, 2, 2, 4};
            const mt_context ctx = {NULL, 0};
            st = mt_conv2d_fwd_s8(&ctx, &p, &q, &in_d, A_q_wp_conv1_pool, &f_d, conv2_weight, conv2_bias, &out_d,
                                  A_q_wp_conv1_conv2);
            if (st != MT_OK) {
                return st;
            }
        }
        { /* q:wp:conv1:flat.query (query) */
            /* flatten: NHWC order is the flat order, the output is the input's storage */
        }
        { /* q:wp:conv1:fc.query (query) */
            static const mt_linear_params p = {-128, -64, -128, 127};
            static const mt_per_channel_quant q = {fc_multiplier, fc_shift};
            const mt_context ctx = {NULL, 0};
            st = mt_linear_fwd_s8(&ctx, &p, &q, 2, A_q_wp_conv1_flat, 16, fc_weight, fc_bias, 5, A_q_wp_conv1_fc);
            if (st != MT_OK) {
                return st;
            }
        }
        { /* wp:conv1.loss (query) */
            st = mt_softmax_ce_s8(2, 5, A_q_wp_conv1_fc, 0x1.003b8a0000000p-6f, labels, A_lq_wp_conv1, NULL);
            if (st != MT_OK) {
                return st;
            }
        }
        { /* wp:conv1.accumulate (query) */
            {
                int64_t dl = 0;
                int32_t b;
                for (b = 0; b < 2; ++b) {
                    dl += (int64_t)A_lq_wp_conv1[b] - A_l0[b]; /* batch loss difference, |dl| < B * 2^24 */
                }
                st = mt_zo_accumulate_wp_s64(&replay, dl, 30, A_S_wp_conv1);
                if (st != MT_OK) {
                    return st;
                }
            }
        }
    }
    { /* b:conv1.fwd (forward) */
        static const mt_conv_params p = {-128, -128, 1, 1, 1, 1, 1, -128, 127};
        static const mt_per_channel_quant q = {conv1_multiplier, conv1_shift};
        static const mt_dims in_d = {2, 8, 8, 1};
        static const mt_dims f_d = {3, 3, 3, 1};
        static const mt_dims out_d = {2, 8, 8, 3};
        const mt_context ctx = {NULL, 0};
        st = mt_conv2d_fwd_s8(&ctx, &p, &q, &in_d, A_input, &f_d, conv1_weight, conv1_bias, &out_d,
                              A_b_conv1);
        if (st != MT_OK) {
            return st;
        }
    }
    { /* conv1.update (update) */
        {
            const float gamma = mt_zo_gns_gamma_f32(4, 29, 1);
            const float cw = mt_zo_coef_f32(gamma, 4, 1, 2);
            const float cb = mt_zo_coef_f32(gamma, 4, 100, 2);
            int32_t c;
            for (c = 0; c < 3; ++c) { /* per channel: k[c], then that channel's weights and bias */
                float kw;
                float kb;
                st = mt_qas_factor_f32(lr, 1, &cw, &conv1_s_w[c], &kw);
                if (st != MT_OK) {
                    return st;
                }
                st = mt_qas_factor_f32(lr, 1, &cb, &conv1_s_b[c], &kb);
                if (st != MT_OK) {
                    return st;
                }
                st = mt_qas_upd_s8_s64(1, 9, A_S_wp_conv1 + c * 9, &kw, NULL, 2, conv1_weight + c * 9);
                if (st != MT_OK) {
                    return st;
                }
                st = mt_qas_upd_s32_s64(1, A_S_wp_conv1 + 27 + c, &kb, conv1_bias + c);
                if (st != MT_OK) {
                    return st;
                }
            }
        }
    }
    { /* b:pool.fwd (forward) */
        static const mt_pool_params p = {2, 2, 2, 2};
        static const mt_dims in_d = {2, 8, 8, 3};
        static const mt_dims out_d = {2, 4, 4, 3};
        st = mt_maxpool_fwd_s8(&p, &in_d, A_b_conv1, &out_d, A_b_pool);
        if (st != MT_OK) {
            return st;
        }
    }
    { /* b:conv2.fwd (forward) */
        static const mt_conv_params p = {-128, -128, 2, 2, 1, 1, 1, -128, 127};
        static const mt_per_channel_quant q = {conv2_multiplier, conv2_shift};
        static const mt_dims in_d = {2, 4, 4, 3};
        static const mt_dims f_d = {4, 3, 3, 3};
        static const mt_dims out_d = {2, 2, 2, 4};
        const mt_context ctx = {NULL, 0};
        st = mt_conv2d_fwd_s8(&ctx, &p, &q, &in_d, A_b_pool, &f_d, conv2_weight, conv2_bias, &out_d,
                              A_b_conv2);
        if (st != MT_OK) {
            return st;
        }
    }
    { /* np:conv2.zero (query) */
        memset(A_gy_np_conv2, 0, 128);
    }
    for (query = 0; query < 4; ++query) { /* queries:np:conv2 */
        { /* np:conv2.perturb (query) */
            replay = model_state.rng; /* the accumulation replays this query's draws */
            st = mt_zo_perturb_np_s8(&model_state.rng, 5, -128, 127, 32, A_b_conv2, A_py_conv2);
            if (st != MT_OK) {
                return st;
            }
        }
        { /* q:np:conv2:flat.query (query) */
            /* flatten: NHWC order is the flat order, the output is the input's storage */
        }
        { /* q:np:conv2:fc.query (query) */
            static const mt_linear_params p = {-128, -64, -128, 127};
            static const mt_per_channel_quant q = {fc_multiplier, fc_shift};
            const mt_context ctx = {NULL, 0};
            st = mt_linear_fwd_s8(&ctx, &p, &q, 2, A_q_np_conv2_flat, 16, fc_weight, fc_bias, 5, A_q_np_conv2_fc);
            if (st != MT_OK) {
                return st;
            }
        }
        { /* np:conv2.loss (query) */
            st = mt_softmax_ce_s8(2, 5, A_q_np_conv2_fc, 0x1.003b8a0000000p-6f, labels, A_lq_np_conv2, NULL);
            if (st != MT_OK) {
                return st;
            }
        }
        { /* np:conv2.accumulate (query) */
            {
                int32_t b;
                for (b = 0; b < 2; ++b) {
                    A_lq_np_conv2[b] -= A_l0[b]; /* per-sample loss difference, in place */
                }
            }
            st = mt_zo_accumulate_np_s32(&replay, 2, 16, A_lq_np_conv2, A_b_conv2, -128, 127, A_gy_np_conv2);
            if (st != MT_OK) {
                return st;
            }
        }
    }
    { /* conv2.bwd_w_update (weight_grad) */
        {
            static const mt_conv_params p = {-128, -128, 2, 2, 1, 1, 1, -128, 127};
            static const mt_dims in_d = {2, 4, 4, 3};
            static const mt_dims f_d = {4, 3, 3, 3};
            static const mt_dims out_d = {2, 2, 2, 4};
            const float gamma = mt_zo_gns_gamma_f32(8, 15, 1);
            const float c0 = mt_zo_coef_f32(gamma, 4, 5, 2);
            int32_t c;
            for (c = 0; c < 4; ++c) { /* local weight gradient and QAS update per channel */
                float kw;
                float kb;
                const float coef = c0 * conv2_slope[c]; /* c0 * M_c, as mt_zo_np_coef_f32 */
                st = mt_qas_factor_f32(lr, 1, &coef, &conv2_s_w[c], &kw);
                if (st != MT_OK) {
                    return st;
                }
                st = mt_qas_factor_f32(lr, 1, &coef, &conv2_s_b[c], &kb);
                if (st != MT_OK) {
                    return st;
                }
                st = mt_conv2d_bwd_w_qas_upd_s8_s32(&p, &in_d, A_b_pool, &out_d, A_gy_np_conv2, &f_d, c, kw, kb,
                                                    NULL, 2, conv2_weight, conv2_bias);
                if (st != MT_OK) {
                    return st;
                }
            }
        }
    }
    { /* b:flat.fwd (forward) */
        /* flatten: NHWC order is the flat order, the output is the input's storage */
    }
    { /* b:fc.fwd (forward) */
        static const mt_linear_params p = {-128, -64, -128, 127};
        static const mt_per_channel_quant q = {fc_multiplier, fc_shift};
        const mt_context ctx = {NULL, 0};
        st = mt_linear_fwd_s8(&ctx, &p, &q, 2, A_b_flat, 16, fc_weight, fc_bias, 5, A_b_fc);
        if (st != MT_OK) {
            return st;
        }
    }
    { /* np:fc.zero (query) */
        memset(A_gy_np_fc, 0, 40);
    }
    for (query = 0; query < 4; ++query) { /* queries:np:fc */
        { /* np:fc.perturb (query) */
            replay = model_state.rng; /* the accumulation replays this query's draws */
            st = mt_zo_perturb_np_s8(&model_state.rng, 5, -128, 127, 10, A_b_fc, A_py_fc);
            if (st != MT_OK) {
                return st;
            }
        }
        { /* np:fc.loss (query) */
            st = mt_softmax_ce_s8(2, 5, A_py_fc, 0x1.003b8a0000000p-6f, labels, A_lq_np_fc, NULL);
            if (st != MT_OK) {
                return st;
            }
        }
        { /* np:fc.accumulate (query) */
            {
                int32_t b;
                for (b = 0; b < 2; ++b) {
                    A_lq_np_fc[b] -= A_l0[b]; /* per-sample loss difference, in place */
                }
            }
            st = mt_zo_accumulate_np_s32(&replay, 2, 5, A_lq_np_fc, A_b_fc, -128, 127, A_gy_np_fc);
            if (st != MT_OK) {
                return st;
            }
        }
    }
    { /* fc.bwd_w_update (weight_grad) */
        {
            const float gamma = mt_zo_gns_gamma_f32(8, 4, 1);
            const float c0 = mt_zo_coef_f32(gamma, 4, 5, 2);
            int32_t c;
            for (c = 0; c < 5; ++c) { /* local weight gradient and QAS update per channel */
                float kw;
                float kb;
                const float coef = c0 * fc_slope[c]; /* c0 * M_c, as mt_zo_np_coef_f32 */
                st = mt_qas_factor_f32(lr, 1, &coef, &fc_s_w[c], &kw);
                if (st != MT_OK) {
                    return st;
                }
                st = mt_qas_factor_f32(lr, 1, &coef, &fc_s_b[c], &kb);
                if (st != MT_OK) {
                    return st;
                }
                st = mt_linear_bwd_w_qas_upd_s8_s32(-128, 2, A_b_flat, 16, A_gy_np_fc, 5, c, kw, kb, NULL, 2,
                                                    fc_weight, fc_bias);
                if (st != MT_OK) {
                    return st;
                }
            }
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
    memcpy(blob + off, conv1_weight, 27);
    off += 27;
    memcpy(blob + off, conv1_bias, 12);
    off += 12;
    memcpy(blob + off, conv2_weight, 108);
    off += 108;
    memcpy(blob + off, conv2_bias, 16);
    off += 16;
    memcpy(blob + off, fc_weight, 80);
    off += 80;
    memcpy(blob + off, fc_bias, 20);
    off += 20;
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
    memcpy(conv1_weight, blob + off, 27);
    off += 27;
    memcpy(conv1_bias, blob + off, 12);
    off += 12;
    memcpy(conv2_weight, blob + off, 108);
    off += 108;
    memcpy(conv2_bias, blob + off, 16);
    off += 16;
    memcpy(fc_weight, blob + off, 80);
    off += 80;
    memcpy(fc_bias, blob + off, 20);
    off += 20;
    return MT_OK;
}
