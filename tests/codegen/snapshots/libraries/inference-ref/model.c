/*
 * model.c: constants, arena and forward pass of the model (see model.h).
 * Kernels planned for: ref; arena planner: greedy; arena 48 bytes.
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

/* conv: weight [2, 3, 3, 1] int8 */
static const int8_t conv_weight[18] = {
    -127, -120, -113, -106, -99, -92, -85, -78, -71, -64, -57, -50, -43, -36, -29, -22,
    -15, -8,
};

static const int32_t conv_bias[2] = {
    100, -200,
};

static const int32_t conv_multiplier[2] = {
    1374389504, 1374389504,
};

static const int32_t conv_shift[2] = {
    -11, -10,
};

/* fc: weight [3, 8] int8 */
static const int8_t fc_weight[24] = {
    -127, -114, -101, -88, -75, -62, -49, -36, -23, -10, 3, 16, 29, 42, 55, 68,
    81, 94, 107, 120, -122, -109, -96, -83,
};

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
    return (model_arena.bytes + 32);
}

mt_status model_init(void)
{
    /* no kernel needs scratch memory */
    return MT_OK;
}

mt_status model_predict(const int8_t *input, int8_t *logits)
{
    mt_status st = MT_OK;
    if (!input || !logits) {
        return MT_ERR_ARG;
    }
    if (input != (model_arena.bytes + 32)) {
        memcpy((model_arena.bytes + 32), input, MODEL_INPUT_SIZE);
    }
    { /* [0] conv: conv2d, act relu -> [4, 4, 2] at arena offset 0 */
        static const mt_conv_params p = {-128, -100, 1, 1, 1, 1, 1, -100, 127};
        static const mt_per_channel_quant q = {conv_multiplier, conv_shift};
        static const mt_dims in_d = {1, 4, 4, 1};
        static const mt_dims f_d = {2, 3, 3, 1};
        static const mt_dims out_d = {1, 4, 4, 2};
        const mt_context ctx = {NULL, 0};
        st = mt_conv2d_fwd_s8(&ctx, &p, &q, &in_d, (model_arena.bytes + 32), &f_d, conv_weight, conv_bias,
                              &out_d, (model_arena.bytes + 0));
        if (st != MT_OK) {
            return st;
        }
        if (model_layer_hook_fn) {
            model_layer_hook_fn(0, "conv", (model_arena.bytes + 0), 32);
        }
    }
    { /* [1] pool: maxpool -> [2, 2, 2] at arena offset 32 */
        static const mt_pool_params p = {2, 2, 2, 2};
        static const mt_dims in_d = {1, 4, 4, 2};
        static const mt_dims out_d = {1, 2, 2, 2};
        st = mt_maxpool_fwd_s8(&p, &in_d, (model_arena.bytes + 0), &out_d, (model_arena.bytes + 32));
        if (st != MT_OK) {
            return st;
        }
        if (model_layer_hook_fn) {
            model_layer_hook_fn(1, "pool", (model_arena.bytes + 32), 8);
        }
    }
    { /* [2] flat: flatten -> [8] at arena offset 32 */
        /* NHWC order is the flat order: the output is the input's storage */
        if (model_layer_hook_fn) {
            model_layer_hook_fn(2, "flat", (model_arena.bytes + 32), 8);
        }
    }
    { /* [3] fc: linear -> [3] at arena offset 0 */
        static const mt_linear_params p = {-100, 3, -128, 127};
        static const mt_per_channel_quant q = {fc_multiplier, fc_shift};
        const mt_context ctx = {NULL, 0};
        st = mt_linear_fwd_s8(&ctx, &p, &q, 1, (model_arena.bytes + 32), 8, fc_weight, fc_bias, 3,
                              (model_arena.bytes + 0));
        if (st != MT_OK) {
            return st;
        }
        if (model_layer_hook_fn) {
            model_layer_hook_fn(3, "fc", (model_arena.bytes + 0), 3);
        }
    }
    memcpy(logits, (model_arena.bytes + 0), MODEL_OUTPUT_SIZE);
    return st;
}
