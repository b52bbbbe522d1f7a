/*
 * model.c: constants, arena and forward pass of the model (see model.h).
 * Kernels planned for: dsp; arena planner: greedy; arena 496 bytes.
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

/* conv1: weight [3, 3, 3, 1] as int16 [3, 3, 4] (padded rows, SMLAD order, row pairs interleaved) */
static const union {
    int16_t v[36];
    int32_t align; /* 4-byte alignment for LDRD */
} conv1_weight = {{
    101, 21, 127, -13, -127, 0, 9, 0, -28, -11, -11, -40, -22, 0, -26, 0,
    -100, -43, -15, -9, -12, 0, 18, 0, 63, 2, -13, 0, 101, -33, 36, 0,
    -12, 127, 35, 0,
}};

static const int32_t conv1_bias[3] = {
    0, 0, 0,
};

static const int32_t conv1_multiplier[3] = {
    1237380605, 1608902170, 1873829714,
};

static const int32_t conv1_shift[3] = {
    -7, -7, -8,
};

/* conv2: weight [4, 3, 3, 3] as int16 [4, 3, 12] (padded rows, SMLAD order, row pairs interleaved) */
static const union {
    int16_t v[144];
    int32_t align; /* 4-byte alignment for LDRD */
} conv2_weight = {{
    -12, 45, -11, 12, -11, -40, -40, -127, -13, 26, 35, -83, 40, 4, 25, 3,
    30, 0, -49, 0, 0, 0, 0, 0, -127, -43, 39, -47, 46, -75, -104, 36,
    12, -20, 59, -25, 31, -48, -110, 17, 1, 0, -31, 0, 0, 0, 0, 0,
    -2, 34, 81, 18, 63, 9, -61, -53, 50, -42, 72, -19, -9, 26, -1, -87,
    26, 0, 86, 0, 0, 0, 0, 0, 55, 84, 11, 75, 55, 26, 127, 75,
    -47, -59, -102, -30, -59, 101, -17, 27, -107, 0, -114, 0, 0, 0, 0, 0,
    -44, 16, 58, -65, -24, 42, 53, -49, -92, 0, -40, 32, -127, 89, 2, 102,
    56, 0, -10, 0, 0, 0, 0, 0, 16, 22, 38, 88, -23, -18, 8, 37,
    60, 10, 68, -10, -58, -8, -54, -41, 40, 0, 75, 0, 0, 0, 0, 0,
}};

static const int32_t conv2_bias[4] = {
    0, 0, 0, 0,
};

static const int32_t conv2_multiplier[4] = {
    1793838764, 1581820224, 1097307985, 1617428709,
};

static const int32_t conv2_shift[4] = {
    -7, -7, -7, -7,
};

/* fc: weight [5, 16] int8 (rows padded to fours, four rows interleaved) */
static const union {
    int8_t v[80];
    int32_t align; /* 4-byte alignment for LDM */
} fc_weight = {{
    34, -16, -23, 25, 7, 8, -93, -28, 50, -28, 8, 49, -30, 13, 58, -46,
    -36, -48, 25, 127, 7, -48, -29, -50, 63, 61, 9, 94, 30, -1, 127, -52,
    -13, -29, -60, -69, -20, 52, -25, -9, -17, -8, 47, -32, 82, -51, -76, -56,
    27, 44, 0, 17, 49, 39, 103, -127, 126, 59, 127, -2, -94, 12, 81, 13,
    45, 118, 20, 14, -20, -116, 55, -127, 47, -1, 81, -5, -60, 26, -41, -13,
}};

static const int32_t fc_bias[5] = {
    0, 0, 0, 0, 0,
};

static const int32_t fc_multiplier[5] = {
    1844851718, 1565744314, 1629475721, 1210123239, 1315564535,
};

static const int32_t fc_shift[5] = {
    -8, -8, -8, -8, -8,
};

/* The only RAM the model uses; tensors and kernel scratch sit at the planner's offsets. */
static union {
    int64_t align; /* 8-byte alignment for word and doubleword accesses */
    int8_t bytes[MODEL_ARENA_BYTES];
} model_arena;

static model_layer_hook model_layer_hook_fn = NULL;

void model_set_layer_hook(model_layer_hook hook)
{
    model_layer_hook_fn = hook;
}

int8_t *model_input_buffer(void)
{
    return (model_arena.bytes + 388);
}

mt_status model_init(void)
{
    static const mt_dims f_conv1 = {3, 3, 3, 1};
    static const mt_conv_params p_conv1 = {0, 0, 1, 1, 1, 1, 1, -128, 127};
    static const mt_dims in_conv1 = {1, 8, 8, 1};
    static const mt_dims out_conv1 = {1, 8, 8, 3};
    if (mt_conv2d_fwd_s8_s16_get_buffer_size(&p_conv1, &in_conv1, &f_conv1, &out_conv1) > 196) { /* conv1 */
        return MT_ERR_BUFFER;
    }
    static const mt_dims f_conv2 = {4, 3, 3, 3};
    static const mt_conv_params p_conv2 = {0, 0, 2, 2, 1, 1, 1, -128, 127};
    static const mt_dims in_conv2 = {1, 4, 4, 3};
    static const mt_dims out_conv2 = {1, 2, 2, 4};
    if (mt_conv2d_fwd_s8_s16_get_buffer_size(&p_conv2, &in_conv2, &f_conv2, &out_conv2) > 432) { /* conv2 */
        return MT_ERR_BUFFER;
    }
    if (mt_linear_fwd_s8_rows4_get_buffer_size(16) > 32) { /* fc */
        return MT_ERR_BUFFER;
    }
    return MT_OK;
}

mt_status model_predict(const int8_t *input, int8_t *logits)
{
    mt_status st = MT_OK;
    if (!input || !logits) {
        return MT_ERR_ARG;
    }
    if (input != (model_arena.bytes + 388)) {
        memcpy((model_arena.bytes + 388), input, MODEL_INPUT_SIZE);
    }
    { /* [0] conv1: conv2d, act relu -> [8, 8, 3] at arena offset 196 */
        static const mt_conv_params p = {-128, -128, 1, 1, 1, 1, 1, -128, 127};
        static const mt_per_channel_quant q = {conv1_multiplier, conv1_shift};
        static const mt_dims in_d = {1, 8, 8, 1};
        static const mt_dims f_d = {3, 3, 3, 1};
        static const mt_dims out_d = {1, 8, 8, 3};
        const mt_context ctx = {model_arena.bytes + 0, 196};
        st = mt_conv2d_fwd_s8_s16(&ctx, &p, &q, &in_d, (model_arena.bytes + 388), &f_d, conv1_weight.v,
                                  conv1_bias, &out_d, (model_arena.bytes + 196));
        if (st != MT_OK) {
            return st;
        }
        if (model_layer_hook_fn) {
            model_layer_hook_fn(0, "conv1", (model_arena.bytes + 196), 192);
        }
    }
    { /* [1] pool: maxpool -> [4, 4, 3] at arena offset 432 */
        static const mt_pool_params p = {2, 2, 2, 2};
        static const mt_dims in_d = {1, 8, 8, 3};
        static const mt_dims out_d = {1, 4, 4, 3};
        st = mt_maxpool_fwd_s8(&p, &in_d, (model_arena.bytes + 196), &out_d, (model_arena.bytes + 432));
        if (st != MT_OK) {
            return st;
        }
        if (model_layer_hook_fn) {
            model_layer_hook_fn(1, "pool", (model_arena.bytes + 432), 48);
        }
    }
    { /* [2] conv2: conv2d, act relu6 -> [2, 2, 4] at arena offset 480 */
        static const mt_conv_params p = {-128, -128, 2, 2, 1, 1, 1, -128, 127};
        static const mt_per_channel_quant q = {conv2_multiplier, conv2_shift};
        static const mt_dims in_d = {1, 4, 4, 3};
        static const mt_dims f_d = {4, 3, 3, 3};
        static const mt_dims out_d = {1, 2, 2, 4};
        const mt_context ctx = {model_arena.bytes + 0, 432};
        st = mt_conv2d_fwd_s8_s16(&ctx, &p, &q, &in_d, (model_arena.bytes + 432), &f_d, conv2_weight.v,
                                  conv2_bias, &out_d, (model_arena.bytes + 480));
        if (st != MT_OK) {
            return st;
        }
        if (model_layer_hook_fn) {
            model_layer_hook_fn(2, "conv2", (model_arena.bytes + 480), 16);
        }
    }
    { /* [3] flat: flatten -> [16] at arena offset 480 */
        /* NHWC order is the flat order: the output is the input's storage */
        if (model_layer_hook_fn) {
            model_layer_hook_fn(3, "flat", (model_arena.bytes + 480), 16);
        }
    }
    { /* [4] fc: linear -> [5] at arena offset 32 */
        static const mt_linear_params p = {-128, -64, -128, 127};
        static const mt_per_channel_quant q = {fc_multiplier, fc_shift};
        const mt_context ctx = {model_arena.bytes + 0, 32};
        st = mt_linear_fwd_s8_rows4(&ctx, &p, &q, 1, (model_arena.bytes + 480), 16, fc_weight.v, fc_bias, 5,
                                    (model_arena.bytes + 32));
        if (st != MT_OK) {
            return st;
        }
        if (model_layer_hook_fn) {
            model_layer_hook_fn(4, "fc", (model_arena.bytes + 32), 5);
        }
    }
    memcpy(logits, (model_arena.bytes + 32), MODEL_OUTPUT_SIZE);
    return st;
}
