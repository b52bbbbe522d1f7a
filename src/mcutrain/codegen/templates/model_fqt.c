/*
 * model.c: FQT training (see model.h): the state that moves every step, the arena, the
 * forward pass and the training step of the planner's schedule. Arena @arena@ bytes.
 *
@graph@
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "model.h"
#include "mt_fqt.h"
#include "mt_fqt_keep.h"
#include "mt_nn.h"
#include "mt_train.h"

@state@

@jumps@

/* Per-channel accumulator extremes of the layer running now, and the logits' Q24 error. */
static int32_t fqt_amin[@max_o@];
static int32_t fqt_amax[@max_o@];
static int32_t fqt_errq[@k@];

/* The working memory of predict and train_step (never both at once). */
static union {
    int64_t align; /* 8-byte alignment for word and doubleword accesses */
    int8_t bytes[MODEL_ARENA_BYTES];
} model_arena;

/* The training step's tensors at the planner's offsets. */
@macros@

@batch_buf@
static struct {
    uint32_t rng;   /* the method's xorshift32 state */
    uint32_t steps; /* steps taken */
} model_state = {@rng0@u, @steps0@u};

#define MODEL_STATE_MAGIC @magic@u
#define MODEL_STATE_FINGERPRINT @fp@u

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
@prepare@
    return st;
}

/* The forward pass on the sample in the input tensor; `record`: note the output ranges. */
static mt_status fqt_forward(int32_t record)
{
    mt_status st = MT_OK;
    (void)record;
@fwd@
    return st;
}

@seed_fn@
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
    return (int8_t *)(void *)@sample_in@;
}

mt_status model_predict(const int8_t *input, int8_t *logits)
{
    mt_status st;
    if (!input || !logits) {
        return MT_ERR_ARG;
    }
    if ((const void *)input != (const void *)@sample_in@) {
        memcpy(@sample_in@, input, MODEL_INPUT_SIZE);
    }
    st = fqt_prepare();
    if (st == MT_OK) {
        st = fqt_forward(0);
    }
@predict_out@
    return st;
}

int8_t *model_train_input_buffer(void)
{
    return (int8_t *)(void *)@train_in@;
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
    if ((const void *)inputs != (const void *)@train_in@) {
        memcpy(@train_in@, inputs, @batch_in@);
    }
    (void)rng0;
    (void)lr;
    (void)b;
    st = fqt_prepare();
    if (st != MT_OK) {
        return st;
    }
@seed_call@@step@
    model_state.steps++;
    return st;
}

