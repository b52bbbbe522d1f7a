/*
 * model.c: constants, trainable tensors, arena, forward pass and training step (see model.h).
 * Method @method@; kernels planned for: @kernels@; arena @arena@ bytes
 * (max of the training step's @train_arena@ and inference's @infer_arena@, which share it).
 *
@graph@
 */
#include <stddef.h>
#include <string.h>

#include "model.h"
#include "mt_nn.h"
#include "mt_train.h"

@consts@

@ram@

@fconsts@

/* The working memory of predict and train_step (never both at once). */
static union {
    int64_t align; /* 8-byte alignment for word and doubleword accesses */
    int8_t bytes[MODEL_ARENA_BYTES];
} model_arena;

/* The training step's tensors at the planner's offsets. */
@macros@

static struct {
    uint32_t rng;   /* the method's xorshift32 state */
    uint32_t steps; /* steps taken */
} model_state = {@rng0@u, @steps0@u};

#define MODEL_STATE_MAGIC @magic@u
#define MODEL_STATE_FINGERPRINT @fp@u

mt_status model_init(void)
{
@checks@
    return MT_OK;
}

static model_layer_hook model_layer_hook_fn = NULL;

void model_set_layer_hook(model_layer_hook hook)
{
    model_layer_hook_fn = hook;
}

int8_t *model_input_buffer(void)
{
    return @in_ptr@;
}

mt_status model_predict(const int8_t *input, int8_t *logits)
{
    mt_status st = MT_OK;
    if (!input || !logits) {
        return MT_ERR_ARG;
    }
    if (input != @in_ptr@) {
        memcpy(@in_ptr@, input, MODEL_INPUT_SIZE);
    }
@blocks@
    memcpy(logits, @out_ptr@, MODEL_OUTPUT_SIZE);
    return st;
}

int8_t *model_train_input_buffer(void)
{
    return @train_in@;
}

uint32_t model_train_steps(void)
{
    return model_state.steps;
}

mt_status model_train_step(const int8_t *inputs, const int32_t *labels, float lr, int32_t *losses,
                           int8_t *logits)
{
    mt_status st = MT_OK;
@qdecl@    if (!inputs || !labels || !losses) {
        return MT_ERR_ARG;
    }
    if (!MT_LR_VALID(lr)) { /* NaN, +-inf, 0 or negative: refused before any state changes */
        return MT_ERR_ARG;
    }
    if (inputs != @train_in@) {
        memcpy(@train_in@, inputs, @batch_in@);
    }
@step@
    model_state.steps++;
    return st;
}

