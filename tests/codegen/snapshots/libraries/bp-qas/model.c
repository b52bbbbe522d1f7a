/*
 * model.c: constants, trainable tensors, arena, forward pass and training step (see model.h).
 * Method bp-qas; kernels planned for: ref; arena 512 bytes
 * (max of the training step's 512 and inference's 256, which share it).
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

/* conv1: weight [3, 3, 3, 1] int8 */
static const int8_t conv1_weight[27] = {
    101, -127, 21, -28, -22, -11, -100, -12, -43, 127, 9, -13, -11, -26, -40, -15,
    18, -9, 63, -13, 2, 101, 36, -33, -12, 35, 127,
};

static const int32_t conv1_bias[3] = {
    0, 0, 0,
};

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

/* conv2: SGD momentum velocity (weight then bias), float32 */
static float conv2_velocity[112];

/* fc: SGD momentum velocity (weight then bias), float32 */
static float fc_velocity[85];

/* fc: requantization slope M_c = s_x * s_w / s_y */
static const float fc_slope[5] = {
    0x1.b7d8d00000000p-9f, 0x1.754d720000000p-9f, 0x1.847f4e0000000p-9f, 0x1.2084100000000p-9f, 0x1.39a7b00000000p-9f,
};

/* fc: bias scales s_x * s_w (QAS) */
static const float fc_s_b[5] = {
    0x1.b83f1c0000000p-15f, 0x1.75a4440000000p-15f, 0x1.84d9a80000000p-15f, 0x1.20c72a0000000p-15f, 0x1.39f0a20000000p-15f,
};

/* fc: weight scales s_w (QAS) */
static const float fc_s_w[5] = {
    0x1.c162a60000000p-8f, 0x1.7d65dc0000000p-8f, 0x1.8cec120000000p-8f, 0x1.26c5c60000000p-8f, 0x1.4074f60000000p-8f,
};

/* conv2: requantization slope M_c = s_x * s_w / s_y */
static const float conv2_slope[4] = {
    0x1.abaf3a0000000p-8f, 0x1.7922a40000000p-8f, 0x1.059e5e0000000p-8f, 0x1.81a0020000000p-8f,
};

/* conv2: bias scales s_x * s_w (QAS) */
static const float conv2_s_b[4] = {
    0x1.a2fcaa0000000p-15f, 0x1.71773e0000000p-15f, 0x1.004c5c0000000p-15f, 0x1.79c86a0000000p-15f,
};

/* conv2: weight scales s_w (QAS) */
static const float conv2_s_w[4] = {
    0x1.8d343c0000000p-8f, 0x1.5e41e80000000p-8f, 0x1.e5f2660000000p-9f, 0x1.6624620000000p-8f,
};

/* The working memory of predict and train_step (never both at once). */
static union {
    int64_t align; /* 8-byte alignment for word and doubleword accesses */
    int8_t bytes[MODEL_ARENA_BYTES];
} model_arena;

/* The training step's tensors at the planner's offsets. */
#define A_conv1 ((int8_t *)(void *)(model_arena.bytes + 0)) /* conv1: s8 [2, 8, 8, 3], activation */
#define A_err_conv2 ((float *)(void *)(model_arena.bytes + 0)) /* err:conv2: f32 [2, 2, 2, 4], error */
#define A_err_flat ((float *)(void *)(model_arena.bytes + 0)) /* err:flat: f32 [2, 16], error */
#define A_err_acc_conv2 ((float *)(void *)(model_arena.bytes + 0)) /* err_acc:conv2: f32 [2, 2, 2, 4], error */
#define A_grad_conv2_row ((float *)(void *)(model_arena.bytes + 128)) /* grad:conv2.row: f32 [27], gradient */
#define A_grad_fc_row ((float *)(void *)(model_arena.bytes + 128)) /* grad:fc.row: f32 [16], gradient */
#define A_err_fc ((float *)(void *)(model_arena.bytes + 192)) /* err:fc: f32 [2, 5], error */
#define A_err_acc_fc ((float *)(void *)(model_arena.bytes + 192)) /* err_acc:fc: f32 [2, 5], error */
#define A_conv2 ((int8_t *)(void *)(model_arena.bytes + 232)) /* conv2: s8 [2, 2, 2, 4], kept */
#define A_flat ((int8_t *)(void *)(model_arena.bytes + 232)) /* flat: s8 [2, 16], kept */
#define A_grad_conv2_bias ((float *)(void *)(model_arena.bytes + 236)) /* grad:conv2.bias: f32 [4], gradient */
#define A_grad_fc_bias ((float *)(void *)(model_arena.bytes + 264)) /* grad:fc.bias: f32 [5], gradient */
#define A_fc ((int8_t *)(void *)(model_arena.bytes + 284)) /* fc: s8 [2, 5], logits */
#define A_loss ((int32_t *)(void *)(model_arena.bytes + 296)) /* loss: s32 [2], logits */
#define A_input ((int8_t *)(void *)(model_arena.bytes + 384)) /* input: s8 [2, 8, 8, 1], input */
#define A_pool ((int8_t *)(void *)(model_arena.bytes + 384)) /* pool: s8 [2, 4, 4, 3], kept */

static struct {
    uint32_t rng;   /* the method's xorshift32 state */
    uint32_t steps; /* steps taken */
} model_state = {0u, 0u};

#define MODEL_STATE_MAGIC 1414747213u
#define MODEL_STATE_FINGERPRINT 2147128965u

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
    if (!inputs || !labels || !losses) {
        return MT_ERR_ARG;
    }
    if (!MT_LR_VALID(lr)) { /* NaN, +-inf, 0 or negative: refused before any state changes */
        return MT_ERR_ARG;
    }
    if (inputs != A_input) {
        memcpy(A_input, inputs, 128);
    }
    { /* conv1.fwd (forward) */
        static const mt_conv_params p = {-128, -128, 1, 1, 1, 1, 1, -128, 127};
        static const mt_per_channel_quant q = {conv1_multiplier, conv1_shift};
        static const mt_dims in_d = {2, 8, 8, 1};
        static const mt_dims f_d = {3, 3, 3, 1};
        static const mt_dims out_d = {2, 8, 8, 3};
        const mt_context ctx = {NULL, 0};
        st = mt_conv2d_fwd_s8(&ctx, &p, &q, &in_d, A_input, &f_d, conv1_weight, conv1_bias, &out_d, A_conv1);
        if (st != MT_OK) {
            return st;
        }
    }
    { /* pool.fwd (forward) */
        static const mt_pool_params p = {2, 2, 2, 2};
        static const mt_dims in_d = {2, 8, 8, 3};
        static const mt_dims out_d = {2, 4, 4, 3};
        st = mt_maxpool_fwd_s8(&p, &in_d, A_conv1, &out_d, A_pool);
        if (st != MT_OK) {
            return st;
        }
    }
    { /* conv2.fwd (forward) */
        static const mt_conv_params p = {-128, -128, 2, 2, 1, 1, 1, -128, 127};
        static const mt_per_channel_quant q = {conv2_multiplier, conv2_shift};
        static const mt_dims in_d = {2, 4, 4, 3};
        static const mt_dims f_d = {4, 3, 3, 3};
        static const mt_dims out_d = {2, 2, 2, 4};
        const mt_context ctx = {NULL, 0};
        st = mt_conv2d_fwd_s8(&ctx, &p, &q, &in_d, A_pool, &f_d, conv2_weight, conv2_bias, &out_d, A_conv2);
        if (st != MT_OK) {
            return st;
        }
    }
    { /* flat.fwd (forward) */
        /* flatten: NHWC order is the flat order, the output is the input's storage */
    }
    { /* fc.fwd (forward) */
        static const mt_linear_params p = {-128, -64, -128, 127};
        static const mt_per_channel_quant q = {fc_multiplier, fc_shift};
        const mt_context ctx = {NULL, 0};
        st = mt_linear_fwd_s8(&ctx, &p, &q, 2, A_flat, 16, fc_weight, fc_bias, 5, A_fc);
        if (st != MT_OK) {
            return st;
        }
    }
    { /* loss (loss) */
        st = mt_softmax_ce_s8(2, 5, A_fc, 0x1.003b8a0000000p-6f, labels, A_loss, (int32_t *)(void *)A_err_fc);
        if (st != MT_OK) {
            return st;
        }
        st = mt_softmax_ce_bwd_s32_f32(2, 5, (const int32_t *)(void *)A_err_fc, 0x1.003b8a0000000p-6f,
                                       A_err_fc);
        if (st != MT_OK) {
            return st;
        }
        if (logits != NULL) {
            memcpy(logits, A_fc, 10);
        }
        memcpy(losses, A_loss, 8);
    }
    { /* fc.requant_bwd (error) */
        st = mt_requant_bwd_s8_f32(2, 5, A_err_fc, A_fc, fc_slope, -128, 127, A_err_acc_fc);
        if (st != MT_OK) {
            return st;
        }
    }
    { /* fc.bwd_in (error) */
        st = mt_linear_bwd_in_s8_f32(2, 5, A_err_acc_fc, fc_weight, 16, A_err_flat);
        if (st != MT_OK) {
            return st;
        }
    }
    { /* fc.bwd_w_update (weight_grad) */
        {
            static const float one = 1.0f;
            int32_t c;
            st = mt_bias_bwd_f32(2, 5, A_err_acc_fc, A_grad_fc_bias);
            if (st != MT_OK) {
                return st;
            }
            st = mt_sgd_momentum_f32(5, 0x1.cccccc0000000p-1f, A_grad_fc_bias, fc_velocity + 80);
            if (st != MT_OK) {
                return st;
            }
            for (c = 0; c < 5; ++c) {
                float kb;
                st = mt_qas_factor_f32(lr, 1, &one, &fc_s_b[c], &kb);
                if (st != MT_OK) {
                    return st;
                }
                st = mt_qas_upd_s32_f32(1, fc_velocity + 80 + c, &kb, fc_bias + c);
                if (st != MT_OK) {
                    return st;
                }
            }
            for (c = 0; c < 5; ++c) { /* one row of weight gradient, applied at once */
                float kw;
                st = mt_linear_bwd_w_row_s8_f32(-128, 2, A_flat, 16, A_err_acc_fc, 5, c, A_grad_fc_row);
                if (st != MT_OK) {
                    return st;
                }
                st = mt_sgd_momentum_f32(16, 0x1.cccccc0000000p-1f, A_grad_fc_row, fc_velocity + c * 16);
                if (st != MT_OK) {
                    return st;
                }
                st = mt_qas_factor_f32(lr, 1, &one, &fc_s_w[c], &kw);
                if (st != MT_OK) {
                    return st;
                }
                st = mt_qas_upd_s8_f32(1, 16, fc_velocity + c * 16, &kw, NULL, fc_weight + c * 16);
                if (st != MT_OK) {
                    return st;
                }
            }
        }
    }
    { /* flat.bwd (error) */
        /* the error of a flatten is its output's error: same storage */
    }
    { /* conv2.requant_bwd (error) */
        st = mt_requant_bwd_s8_f32(8, 4, A_err_conv2, A_conv2, conv2_slope, -128, 127, A_err_acc_conv2);
        if (st != MT_OK) {
            return st;
        }
    }
    { /* conv2.bwd_w_update (weight_grad) */
        {
            static const mt_conv_params p = {-128, -128, 2, 2, 1, 1, 1, -128, 127};
            static const mt_dims in_d = {2, 4, 4, 3};
            static const mt_dims f_d = {4, 3, 3, 3};
            static const mt_dims out_d = {2, 2, 2, 4};
            static const float one = 1.0f;
            int32_t c;
            st = mt_bias_bwd_f32(8, 4, A_err_acc_conv2, A_grad_conv2_bias);
            if (st != MT_OK) {
                return st;
            }
            st = mt_sgd_momentum_f32(4, 0x1.cccccc0000000p-1f, A_grad_conv2_bias, conv2_velocity + 108);
            if (st != MT_OK) {
                return st;
            }
            for (c = 0; c < 4; ++c) {
                float kb;
                st = mt_qas_factor_f32(lr, 1, &one, &conv2_s_b[c], &kb);
                if (st != MT_OK) {
                    return st;
                }
                st = mt_qas_upd_s32_f32(1, conv2_velocity + 108 + c, &kb, conv2_bias + c);
                if (st != MT_OK) {
                    return st;
                }
            }
            for (c = 0; c < 4; ++c) { /* one row of weight gradient, applied at once */
                float kw;
                st = mt_conv2d_bwd_w_row_s8_f32(&p, &in_d, A_pool, &out_d, A_err_acc_conv2, &f_d, c,
                                                A_grad_conv2_row);
                if (st != MT_OK) {
                    return st;
                }
                st = mt_sgd_momentum_f32(27, 0x1.cccccc0000000p-1f, A_grad_conv2_row, conv2_velocity + c * 27);
                if (st != MT_OK) {
                    return st;
                }
                st = mt_qas_factor_f32(lr, 1, &one, &conv2_s_w[c], &kw);
                if (st != MT_OK) {
                    return st;
                }
                st = mt_qas_upd_s8_f32(1, 27, conv2_velocity + c * 27, &kw, NULL, conv2_weight + c * 27);
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
    memcpy(blob + off, conv2_weight, 108);
    off += 108;
    memcpy(blob + off, conv2_bias, 16);
    off += 16;
    memcpy(blob + off, fc_weight, 80);
    off += 80;
    memcpy(blob + off, fc_bias, 20);
    off += 20;
    memcpy(blob + off, conv2_velocity, 448);
    off += 448;
    memcpy(blob + off, fc_velocity, 340);
    off += 340;
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
    memcpy(conv2_weight, blob + off, 108);
    off += 108;
    memcpy(conv2_bias, blob + off, 16);
    off += 16;
    memcpy(fc_weight, blob + off, 80);
    off += 80;
    memcpy(fc_bias, blob + off, 20);
    off += 20;
    memcpy(conv2_velocity, blob + off, 448);
    off += 448;
    memcpy(fc_velocity, blob + off, 340);
    off += 340;
    return MT_OK;
}
