/*
 * model.c: constants, arena and forward pass of the model (see model.h).
 * Kernels planned for: dsp; arena planner: greedy; arena 208 bytes.
 *
node               op              output              params        MACs
conv               conv2d          (4, 4, 2)               20         288
pool               maxpool         (2, 2, 2)                0           0
flat               flatten         (8,)                     0           0
fc                 linear          (3,)                    27          24
total                                                      47         312
 */
#include <stddef.h>
#include <string.h>

#include "model.h"
#include "mt_nn.h"

/* conv: weight [2, 3, 3, 1] as int16 [2, 3, 4] (padded rows, SMLAD order, row pairs interleaved) */
static const union {
    int16_t v[24];
    int32_t align; /* 4-byte alignment for LDRD */
} conv_weight = {{
    -127, -113, -64, -50, -120, 0, -57, 0, -106, -92, -43, -29, -99, 0, -36, 0,
    -85, -71, -22, -8, -78, 0, -15, 0,
}};

static const int32_t conv_bias[2] = {
    100, -200,
};

static const int32_t conv_multiplier[2] = {
    1374389504, 1374389504,
};

static const int32_t conv_shift[2] = {
    -11, -10,
};

/* fc: weight [3, 8] int8 (rows padded to fours, four rows interleaved) */
static const union {
    int8_t v[24];
    int32_t align; /* 4-byte alignment for LDM */
} fc_weight = {{
    -127, -114, -101, -88, -75, -62, -49, -36, -23, -10, 3, 16, 29, 42, 55, 68,
    81, 94, 107, 120, -122, -109, -96, -83,
}};

static const int32_t fc_bias[3] = {
    5000, -7000, 1048576,
};

static const int32_t fc_multiplier[3] = {
    1374389504, 1374389504, 1374389504,
};

static const int32_t fc_shift[3] = {
    -8, -7, -5,
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
    return (model_arena.bytes + 192);
}

mt_status model_init(void)
{
    static const mt_dims f_conv = {2, 3, 3, 1};
    static const mt_conv_params p_conv = {0, 0, 1, 1, 1, 1, 1, -128, 127};
    static const mt_dims in_conv = {1, 4, 4, 1};
    static const mt_dims out_conv = {1, 4, 4, 2};
    if (mt_conv2d_fwd_s8_s16_get_buffer_size(&p_conv, &in_conv, &f_conv, &out_conv) > 160) { /* conv */
        return MT_ERR_BUFFER;
    }
    if (mt_linear_fwd_s8_rows4_get_buffer_size(8) > 16) { /* fc */
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
    if (input != (model_arena.bytes + 192)) {
        memcpy((model_arena.bytes + 192), input, MODEL_INPUT_SIZE);
    }
    { /* [0] conv: conv2d, act relu -> [4, 4, 2] at arena offset 160 */
        static const mt_conv_params p = {-128, -100, 1, 1, 1, 1, 1, -100, 127};
        static const mt_per_channel_quant q = {conv_multiplier, conv_shift};
        static const mt_dims in_d = {1, 4, 4, 1};
        static const mt_dims f_d = {2, 3, 3, 1};
        static const mt_dims out_d = {1, 4, 4, 2};
        const mt_context ctx = {model_arena.bytes + 0, 160};
        st = mt_conv2d_fwd_s8_s16(&ctx, &p, &q, &in_d, (model_arena.bytes + 192), &f_d, conv_weight.v,
                                  conv_bias, &out_d, (model_arena.bytes + 160));
        if (st != MT_OK) {
            return st;
        }
        if (model_layer_hook_fn) {
            model_layer_hook_fn(0, "conv", (model_arena.bytes + 160), 32);
        }
    }
    { /* [1] pool: maxpool -> [2, 2, 2] at arena offset 16 */
        static const mt_pool_params p = {2, 2, 2, 2};
        static const mt_dims in_d = {1, 4, 4, 2};
        static const mt_dims out_d = {1, 2, 2, 2};
        st = mt_maxpool_fwd_s8(&p, &in_d, (model_arena.bytes + 160), &out_d, (model_arena.bytes + 16));
        if (st != MT_OK) {
            return st;
        }
        if (model_layer_hook_fn) {
            model_layer_hook_fn(1, "pool", (model_arena.bytes + 16), 8);
        }
    }
    { /* [2] flat: flatten -> [8] at arena offset 16 */
        /* NHWC order is the flat order: the output is the input's storage */
        if (model_layer_hook_fn) {
            model_layer_hook_fn(2, "flat", (model_arena.bytes + 16), 8);
        }
    }
    { /* [3] fc: linear -> [3] at arena offset 24 */
        static const mt_linear_params p = {-100, 3, -128, 127};
        static const mt_per_channel_quant q = {fc_multiplier, fc_shift};
        const mt_context ctx = {model_arena.bytes + 0, 16};
        st = mt_linear_fwd_s8_rows4(&ctx, &p, &q, 1, (model_arena.bytes + 16), 8, fc_weight.v, fc_bias, 3,
                                    (model_arena.bytes + 24));
        if (st != MT_OK) {
            return st;
        }
        if (model_layer_hook_fn) {
            model_layer_hook_fn(3, "fc", (model_arena.bytes + 24), 3);
        }
    }
    memcpy(logits, (model_arena.bytes + 24), MODEL_OUTPUT_SIZE);
    return st;
}
