/*
 * model.c: FQT training (see model.h): the state that moves every step, the arena, the
 * forward pass and the training step of the planner's schedule. Arena 2056 bytes.
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

/* conv1: weight [3, 3, 3, 1] float32 (RAM, trained) */
static float conv1_weight[27] = {0x1.ec982c0000000p-1f, -0x1.346aa20000000p+0f, 0x1.93a5da0000000p-3f, -0x1.1212a00000000p-2f, -0x1.b5010e0000000p-3f, -0x1.a04a6c0000000p-4f, -0x1.e78ac40000000p-1f, -0x1.bfd4fa0000000p-4f, -0x1.a1a7740000000p-2f, 0x1.9104a20000000p+0f, 0x1.b3f71c0000000p-4f, -0x1.5471500000000p-3f, -0x1.0f90ac0000000p-3f, -0x1.427a680000000p-2f, -0x1.fd57240000000p-2f, -0x1.794b240000000p-3f, 0x1.d149a40000000p-3f, -0x1.cc9de00000000p-4f, 0x1.ce53dc0000000p-2f, -0x1.81cae20000000p-4f, 0x1.76bcb20000000p-7f, 0x1.7519140000000p-1f, 0x1.0721e40000000p-2f, -0x1.e7c4280000000p-3f, -0x1.6109f00000000p-4f, 0x1.04ebdc0000000p-2f, 0x1.d30d180000000p-1f};

/* conv1: bias float32 (RAM, trained) */
static float conv1_bias[3] = {0.0f, 0.0f, 0.0f};

/* conv1: gradient mean (EMA) */
static float conv1_norm_mu[3] = {0.0f, 0.0f, 0.0f};

/* conv1: gradient sd (EMA) */
static float conv1_norm_sd[3] = {0.0f, 0.0f, 0.0f};

/* conv1: statistics initialized */
static int8_t conv1_norm_init[3] = {
    0, 0, 0,
};

/* conv2: weight [4, 3, 3, 3] float32 (RAM, trained) */
static float conv2_weight[108] = {-0x1.2c91ee0000000p-4f, -0x1.0f844c0000000p-4f, 0x1.1757a00000000p-2f, -0x1.ee1bbc0000000p-3f, -0x1.4534f00000000p-4f, 0x1.ebec3e0000000p-3f, 0x1.437bf40000000p-3f, 0x1.98166e0000000p-6f, 0x1.7583480000000p-3f, -0x1.8a19d40000000p-1f, 0x1.1ca2ba0000000p-2f, -0x1.0b735a0000000p-2f, -0x1.d10a4a0000000p-2f, 0x1.342dd00000000p-4f, 0x1.867af00000000p-3f, -0x1.efd2820000000p-4f, -0x1.2bfdda0000000p-2f, 0x1.d1fab00000000p-8f, -0x1.d66ad80000000p-7f, 0x1.87bc980000000p-2f, 0x1.a099fa0000000p-3f, 0x1.b020a40000000p-5f, 0x1.35cf340000000p-2f, -0x1.ca3ae60000000p-5f, -0x1.020bc00000000p-2f, 0x1.458d1a0000000p-3f, 0x1.44b43a0000000p-3f, -0x1.defa6e0000000p-5f, -0x1.b455660000000p-3f, 0x1.feeabe0000000p-5f, -0x1.5b85640000000p-1f, 0x1.80ac0e0000000p-3f, 0x1.11e2de0000000p-3f, -0x1.c8bed20000000p-2f, 0x1.1195ca0000000p-6f, -0x1.0cb1320000000p-2f, 0x1.a6123c0000000p-3f, -0x1.1b756c0000000p-1f, -0x1.fdbc140000000p-3f, 0x1.8b842e0000000p-3f, 0x1.42493c0000000p-2f, -0x1.2cb7220000000p-1f, -0x1.159adc0000000p-3f, 0x1.6dac6c0000000p-4f, -0x1.5392f40000000p-3f, 0x1.bb4eb60000000p-2f, -0x1.4bfdee0000000p-2f, 0x1.8b3a8a0000000p-4f, -0x1.2430200000000p-2f, 0x1.87d69e0000000p-2f, -0x1.822f680000000p-8f, -0x1.9efb300000000p-4f, -0x1.deda960000000p-2f, 0x1.d4b8780000000p-2f, 0x1.a398540000000p-3f, 0x1.a408600000000p-3f, 0x1.3d1fea0000000p-2f, 0x1.8550760000000p-4f, -0x1.6450180000000p-3f, -0x1.be0cea0000000p-3f, -0x1.be07080000000p-3f, 0x1.7dd5f20000000p-2f, -0x1.97012c0000000p-2f, -0x1.4c69d40000000p-3f, -0x1.661e980000000p-4f, 0x1.f4ce5c0000000p-5f, 0x1.40b2660000000p-3f, -0x1.5c1ec60000000p-2f, -0x1.e226820000000p-2f, -0x1.3af0b80000000p-10f, 0x1.52379a0000000p-2f, 0x1.a5fafa0000000p-3f, 0x1.e0cf880000000p-5f, -0x1.618fdc0000000p-4f, 0x1.46e4dc0000000p-4f, -0x1.0f447c0000000p-4f, 0x1.c781c20000000p-3f, -0x1.bad22c0000000p-3f, 0x1.2b4c780000000p-5f, -0x1.edfc820000000p-6f, 0x1.2edda60000000p-3f, 0x1.f4d97c0000000p-5f, 0x1.63581a0000000p-1f, 0x1.a1abdc0000000p-2f, 0x1.a1230c0000000p-2f, -0x1.1c33ca0000000p-1f, -0x1.7b61ae0000000p-4f, -0x1.533c8c0000000p-3f, 0x1.28efb60000000p-3f, -0x1.3d945a0000000p-1f, 0x1.4754700000000p-2f, 0x1.295d960000000p-2f, -0x1.6ae2460000000p-2f, -0x1.10b8120000000p-2f, -0x1.be91bc0000000p-3f, 0x1.82206e0000000p-7f, 0x1.65462a0000000p-3f, 0x1.1d5ed00000000p-1f, -0x1.b8386a0000000p-5f, 0x1.abcd560000000p-3f, 0x1.5a84360000000p-5f, 0x1.ea7cb00000000p-2f, 0x1.9dacd20000000p-3f, 0x1.7d695e0000000p-2f, -0x1.2c586a0000000p-2f, -0x1.ac9db60000000p-5f, -0x1.c597ba0000000p-3f, 0x1.a36cd20000000p-2f};

/* conv2: bias float32 (RAM, trained) */
static float conv2_bias[4] = {0.0f, 0.0f, 0.0f, 0.0f};

/* conv2: gradient mean (EMA) */
static float conv2_norm_mu[4] = {0.0f, 0.0f, 0.0f, 0.0f};

/* conv2: gradient sd (EMA) */
static float conv2_norm_sd[4] = {0.0f, 0.0f, 0.0f, 0.0f};

/* conv2: statistics initialized */
static int8_t conv2_norm_init[4] = {
    0, 0, 0, 0,
};

/* fc: weight [5, 16] float32 (RAM, trained) */
static float fc_weight[80] = {0x1.dc2ea20000000p-3f, -0x1.b9e5760000000p-4f, -0x1.479f2a0000000p-3f, 0x1.5eef520000000p-3f, -0x1.fbefe00000000p-3f, -0x1.50e8be0000000p-2f, 0x1.5c7ade0000000p-3f, 0x1.bddfe00000000p-1f, -0x1.6470800000000p-4f, -0x1.927d640000000p-3f, -0x1.a8010a0000000p-2f, -0x1.e3535a0000000p-2f, 0x1.7c20e40000000p-3f, 0x1.34060a0000000p-2f, 0x1.a92a500000000p-9f, 0x1.e19f1a0000000p-4f, 0x1.4fbaf20000000p-5f, 0x1.91965c0000000p-5f, -0x1.1443aa0000000p-1f, -0x1.4bb68c0000000p-3f, 0x1.42e0ea0000000p-5f, -0x1.1b89620000000p-2f, -0x1.58f8d40000000p-3f, -0x1.288d9e0000000p-2f, -0x1.e2f46c0000000p-4f, 0x1.34dbb20000000p-2f, -0x1.2665480000000p-3f, -0x1.bda8380000000p-5f, 0x1.2698f60000000p-2f, 0x1.d2dd0e0000000p-3f, 0x1.32dd880000000p-1f, -0x1.7a6b100000000p-1f, 0x1.3637500000000p-2f, -0x1.5d36020000000p-3f, 0x1.861bf40000000p-5f, 0x1.2f496c0000000p-2f, 0x1.882df60000000p-2f, 0x1.7849000000000p-2f, 0x1.c13caa0000000p-5f, 0x1.23614c0000000p-1f, -0x1.99ca5c0000000p-4f, -0x1.9853c60000000p-5f, 0x1.2165640000000p-2f, -0x1.8f3c7c0000000p-3f, 0x1.872a720000000p-1f, 0x1.70fe000000000p-2f, 0x1.89d23a0000000p-1f, -0x1.340ac40000000p-7f, -0x1.1562c00000000p-3f, 0x1.e3d29c0000000p-5f, 0x1.09f1f20000000p-2f, -0x1.a957d40000000p-3f, 0x1.12eef60000000p-3f, -0x1.855cf60000000p-8f, 0x1.24783a0000000p-1f, -0x1.dfd8ee0000000p-3f, 0x1.7ac0420000000p-2f, -0x1.d234fe0000000p-3f, -0x1.5bc9660000000p-2f, -0x1.0127e60000000p-2f, -0x1.aee4b00000000p-2f, 0x1.a7e03c0000000p-5f, 0x1.755b360000000p-2f, 0x1.dbe8200000000p-5f, 0x1.c40f460000000p-3f, 0x1.2774800000000p-1f, 0x1.870a420000000p-4f, 0x1.1aa0120000000p-4f, -0x1.8e54e00000000p-4f, -0x1.231f7a0000000p-1f, 0x1.130e0c0000000p-2f, -0x1.3df40c0000000p-1f, 0x1.d896960000000p-3f, -0x1.4bcf1a0000000p-8f, 0x1.97f03e0000000p-2f, -0x1.88913a0000000p-6f, -0x1.2a07c20000000p-2f, 0x1.03279c0000000p-3f, -0x1.95a7800000000p-3f, -0x1.060db00000000p-4f};

/* fc: bias float32 (RAM, trained) */
static float fc_bias[5] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f};

/* fc: gradient mean (EMA) */
static float fc_norm_mu[5] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f};

/* fc: gradient sd (EMA) */
static float fc_norm_sd[5] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f};

/* fc: statistics initialized */
static int8_t fc_norm_init[5] = {
    0, 0, 0, 0, 0,
};

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
#define A_conv1 ((float *)(void *)(model_arena.bytes + 0)) /* conv1: f32 [1, 8, 8, 3], kept */
#define A_grad_conv1_weight ((float *)(void *)(model_arena.bytes + 0)) /* grad:conv1.weight: f32 [3, 3, 3, 1], gradient */
#define A_grad_conv1_bias ((float *)(void *)(model_arena.bytes + 108)) /* grad:conv1.bias: f32 [3], gradient */
#define A_err_conv1 ((float *)(void *)(model_arena.bytes + 768)) /* err:conv1: f32 [1, 8, 8, 3], error */
#define A_errm_conv1 ((float *)(void *)(model_arena.bytes + 768)) /* errm:conv1: f32 [1, 8, 8, 3], error */
#define A_grad_conv2_weight ((float *)(void *)(model_arena.bytes + 768)) /* grad:conv2.weight: f32 [4, 3, 3, 3], gradient */
#define A_grad_fc_weight ((float *)(void *)(model_arena.bytes + 768)) /* grad:fc.weight: f32 [5, 16], gradient */
#define A_conv2 ((float *)(void *)(model_arena.bytes + 1088)) /* conv2: f32 [1, 2, 2, 4], kept */
#define A_flat ((float *)(void *)(model_arena.bytes + 1088)) /* flat: f32 [1, 16], kept */
#define A_err_fc ((float *)(void *)(model_arena.bytes + 1152)) /* err:fc: f32 [1, 5], error */
#define A_grad_fc_bias ((float *)(void *)(model_arena.bytes + 1172)) /* grad:fc.bias: f32 [5], gradient */
#define A_pool ((float *)(void *)(model_arena.bytes + 1200)) /* pool: f32 [1, 4, 4, 3], kept */
#define A_err_conv2 ((float *)(void *)(model_arena.bytes + 1392)) /* err:conv2: f32 [1, 2, 2, 4], error */
#define A_err_flat ((float *)(void *)(model_arena.bytes + 1392)) /* err:flat: f32 [1, 16], error */
#define A_errm_conv2 ((float *)(void *)(model_arena.bytes + 1392)) /* errm:conv2: f32 [1, 2, 2, 4], error */
#define A_grad_conv2_bias ((float *)(void *)(model_arena.bytes + 1456)) /* grad:conv2.bias: f32 [4], gradient */
#define A_input ((float *)(void *)(model_arena.bytes + 1536)) /* input: f32 [1, 8, 8, 1], input */
#define A_err_pool ((float *)(void *)(model_arena.bytes + 1792)) /* err:pool: f32 [1, 4, 4, 3], error */
#define A_pool_argmax ((uint8_t *)(void *)(model_arena.bytes + 1984)) /* pool.argmax: u8 [1, 4, 4, 3], kept */
#define A_fc ((float *)(void *)(model_arena.bytes + 2032)) /* fc: f32 [1, 5], logits */
#define A_loss ((int32_t *)(void *)(model_arena.bytes + 2052)) /* loss: s32 [1], logits */


static struct {
    uint32_t rng;   /* the method's xorshift32 state */
    uint32_t steps; /* steps taken */
} model_state = {5u, 0u};

#define MODEL_STATE_MAGIC 1414747213u
#define MODEL_STATE_FINGERPRINT 2092013933u

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
    (void)fqt_reset_extremes;
    return st;
}

/* The forward pass on the sample in the input tensor; `record`: note the output ranges. */
static mt_status fqt_forward(int32_t record)
{
    mt_status st = MT_OK;
    (void)record;
    { /* conv1.fwd (forward) */
        const mt_conv_params p = {0, 0, 1, 1, 1, 1, 1, -128, 127};
        static const mt_dims in_d = {1, 8, 8, 1};
        static const mt_dims f_d = {3, 3, 3, 1};
        static const mt_dims out_d = {1, 8, 8, 3};
        st = mt_conv2d_fwd_f32(&p, 1, &in_d, A_input, &f_d, conv1_weight, conv1_bias, &out_d, A_conv1);
        if (st != MT_OK) {
            return st;
        }
    }
    { /* pool.fwd (forward) */
        static const mt_pool_params p = {2, 2, 2, 2};
        static const mt_dims in_d = {1, 8, 8, 3};
        static const mt_dims out_d = {1, 4, 4, 3};
        st = mt_maxpool_fwd_f32_argmax(&p, &in_d, A_conv1, &out_d, A_pool, (uint8_t *)(void *)A_pool_argmax);
        if (st != MT_OK) {
            return st;
        }
    }
    { /* conv2.fwd (forward) */
        const mt_conv_params p = {0, 0, 2, 2, 1, 1, 1, -128, 127};
        static const mt_dims in_d = {1, 4, 4, 3};
        static const mt_dims f_d = {4, 3, 3, 3};
        static const mt_dims out_d = {1, 2, 2, 4};
        st = mt_conv2d_fwd_f32(&p, 2, &in_d, A_pool, &f_d, conv2_weight, conv2_bias, &out_d, A_conv2);
        if (st != MT_OK) {
            return st;
        }
    }
    { /* flat.fwd (forward) */
        /* flatten: NHWC order is the flat order, the output is the input's storage */
    }
    { /* fc.fwd (forward) */
        st = mt_linear_fwd_f32(0, 1, A_flat, 16, fc_weight, fc_bias, 5, A_fc);
        if (st != MT_OK) {
            return st;
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
    if (st == MT_OK) {
        float lo = A_fc[0], hi = A_fc[0], s;
        int32_t z, k;
        for (k = 1; k < 5; ++k) {
            lo = A_fc[k] < lo ? A_fc[k] : lo;
            hi = A_fc[k] > hi ? A_fc[k] : hi;
        }
        st = mt_fqt_logits_s8_f32(5, A_fc, lo, hi, logits, &s, &z);
    }
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
        memcpy(A_input, inputs, 256);
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
        float lo = A_fc[0];
        float hi = A_fc[0];
        for (k = 1; k < 5; ++k) {
            lo = A_fc[k] < lo ? A_fc[k] : lo;
            hi = A_fc[k] > hi ? A_fc[k] : hi;
        }
        float s_lg;
        int32_t z_lg;
        st = mt_fqt_logits_s8_f32(5, A_fc, lo, hi, lg8, &s_lg, &z_lg);
        if (st != MT_OK) {
            return st;
        }
        (void)z_lg;
        st = mt_softmax_ce_s8(1, 5, lg8, s_lg, labels + b, A_loss, fqt_errq);
        if (st != MT_OK) {
            return st;
        }
        if (logits != NULL) {
            memcpy(logits + b * 5, lg8, 5);
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
        st = mt_linear_bwd_in_f32(1, 5, A_err_fc, fc_weight, 16, A_err_flat);
        if (st != MT_OK) {
            return st;
        }
    }
    { /* fc.bwd_w (weight_grad) */
        memset(A_grad_fc_weight, 0, 320);
        memset(A_grad_fc_bias, 0, 20);
        st = mt_linear_bwd_w_f32(A_flat, 16, A_err_fc, 5, A_grad_fc_weight, A_grad_fc_bias);
        if (st != MT_OK) {
            return st;
        }
    }
    { /* fc.update (update) */
        const mt_fqt_upd_params up = {lr, 0x1.99999a0000000p-4f, 0.0f, 1.0f, 1.0f};
        st = mt_fqt_upd_f32(&up, 5, 16, A_grad_fc_weight, A_grad_fc_bias, NULL, fc_norm_mu, fc_norm_sd, fc_norm_init, fc_weight, fc_bias);
        if (st != MT_OK) {
            return st;
        }
    }
    { /* flat.bwd (error) */
        /* the error of a flatten is its output's error: same storage */
    }
    { /* conv2.relu6_bwd (error) */
        st = mt_relu_bwd_f32(16, 2, A_conv2, A_err_conv2, A_errm_conv2);
        if (st != MT_OK) {
            return st;
        }
    }
    { /* conv2.bwd_in (error) */
        const mt_conv_params p = {0, 0, 2, 2, 1, 1, 1, -128, 127};
        static const mt_dims in_d = {1, 4, 4, 3};
        static const mt_dims f_d = {4, 3, 3, 3};
        static const mt_dims out_d = {1, 2, 2, 4};
        st = mt_conv2d_bwd_in_f32(&p, &out_d, A_errm_conv2, &f_d, conv2_weight, &in_d, A_err_pool);
        if (st != MT_OK) {
            return st;
        }
    }
    { /* conv2.bwd_w (weight_grad) */
        const mt_conv_params p = {0, 0, 2, 2, 1, 1, 1, -128, 127};
        static const mt_dims in_d = {1, 4, 4, 3};
        static const mt_dims f_d = {4, 3, 3, 3};
        static const mt_dims out_d = {1, 2, 2, 4};
        memset(A_grad_conv2_weight, 0, 432);
        memset(A_grad_conv2_bias, 0, 16);
        st = mt_conv2d_bwd_w_f32(&p, &in_d, A_pool, &out_d, A_errm_conv2, &f_d, A_grad_conv2_weight, A_grad_conv2_bias);
        if (st != MT_OK) {
            return st;
        }
    }
    { /* conv2.update (update) */
        const mt_fqt_upd_params up = {lr, 0x1.99999a0000000p-4f, 0.0f, 1.0f, 1.0f};
        st = mt_fqt_upd_f32(&up, 4, 27, A_grad_conv2_weight, A_grad_conv2_bias, NULL, conv2_norm_mu, conv2_norm_sd, conv2_norm_init, conv2_weight, conv2_bias);
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
        st = mt_relu_bwd_f32(192, 1, A_conv1, A_err_conv1, A_errm_conv1);
        if (st != MT_OK) {
            return st;
        }
    }
    { /* conv1.bwd_w (weight_grad) */
        const mt_conv_params p = {0, 0, 1, 1, 1, 1, 1, -128, 127};
        static const mt_dims in_d = {1, 8, 8, 1};
        static const mt_dims f_d = {3, 3, 3, 1};
        static const mt_dims out_d = {1, 8, 8, 3};
        memset(A_grad_conv1_weight, 0, 108);
        memset(A_grad_conv1_bias, 0, 12);
        st = mt_conv2d_bwd_w_f32(&p, &in_d, A_input, &out_d, A_errm_conv1, &f_d, A_grad_conv1_weight, A_grad_conv1_bias);
        if (st != MT_OK) {
            return st;
        }
    }
    { /* conv1.update (update) */
        const mt_fqt_upd_params up = {lr, 0x1.99999a0000000p-4f, 0.0f, 1.0f, 1.0f};
        st = mt_fqt_upd_f32(&up, 3, 9, A_grad_conv1_weight, A_grad_conv1_bias, NULL, conv1_norm_mu, conv1_norm_sd, conv1_norm_init, conv1_weight, conv1_bias);
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
    memcpy(blob + off, conv1_weight, 108);
    off += 108;
    memcpy(blob + off, conv1_bias, 12);
    off += 12;
    memcpy(blob + off, conv1_norm_mu, 12);
    off += 12;
    memcpy(blob + off, conv1_norm_sd, 12);
    off += 12;
    memcpy(blob + off, conv1_norm_init, 3);
    off += 3;
    memcpy(blob + off, conv2_weight, 432);
    off += 432;
    memcpy(blob + off, conv2_bias, 16);
    off += 16;
    memcpy(blob + off, conv2_norm_mu, 16);
    off += 16;
    memcpy(blob + off, conv2_norm_sd, 16);
    off += 16;
    memcpy(blob + off, conv2_norm_init, 4);
    off += 4;
    memcpy(blob + off, fc_weight, 320);
    off += 320;
    memcpy(blob + off, fc_bias, 20);
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
    memcpy(conv1_weight, blob + off, 108);
    off += 108;
    memcpy(conv1_bias, blob + off, 12);
    off += 12;
    memcpy(conv1_norm_mu, blob + off, 12);
    off += 12;
    memcpy(conv1_norm_sd, blob + off, 12);
    off += 12;
    memcpy(conv1_norm_init, blob + off, 3);
    off += 3;
    memcpy(conv2_weight, blob + off, 432);
    off += 432;
    memcpy(conv2_bias, blob + off, 16);
    off += 16;
    memcpy(conv2_norm_mu, blob + off, 16);
    off += 16;
    memcpy(conv2_norm_sd, blob + off, 16);
    off += 16;
    memcpy(conv2_norm_init, blob + off, 4);
    off += 4;
    memcpy(fc_weight, blob + off, 320);
    off += 320;
    memcpy(fc_bias, blob + off, 20);
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
