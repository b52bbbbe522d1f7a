/*
 * model.c: constants, arena and forward pass of the model (see model.h).
 * Kernels planned for: @kernels@; arena planner: @planner@; arena @arena@ bytes.
 *
@graph@
 */
#include <stddef.h>
#include <string.h>

#include "model.h"
#include "mt_nn.h"

@consts@

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
    return @in_ptr@;
}

mt_status model_init(void)
{
@checks@
    return MT_OK;
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
