/*
 * model.h: int8 inference of one model with the mcutrain C runtime.
 *
 * Provenance: @provenance@
 * Kernels planned for: @kernels@; arena planner: @planner@.
 * Compiled in:
@compiled_in@
 *
 * Usage:
 *     if (model_init() != MT_OK) ...;            (once: checks the arena against the kernels)
 *     model_predict(input, logits);              (any number of times)
 * Input: int8 [@h@, @w@, @c@] NHWC, @in_q@.
 * Output: int8 logits [@out_size@], @out_q@.
 * No malloc and no floating point; all RAM is the static arena of MODEL_ARENA_BYTES.
 */
#ifndef MODEL_H
#define MODEL_H

#include <stdint.h>

#include "mt_types.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MODEL_INPUT_H @h@
#define MODEL_INPUT_W @w@
#define MODEL_INPUT_C @c@
#define MODEL_INPUT_SIZE @in_size@
#define MODEL_INPUT_ZERO_POINT (@in_zp@)
#define MODEL_OUTPUT_SIZE @out_size@
#define MODEL_OUTPUT_ZERO_POINT (@out_zp@)
#define MODEL_ARENA_BYTES @arena@
#define MODEL_NUM_LAYERS @layers@

/* Check the arena's scratch blocks against the kernels compiled in. MT_OK, or MT_ERR_BUFFER when
   the library was exported for reference kernels but built with DSP kernels (re-export with
   --kernels dsp, or build with -DMT_KERNELS_REF); predictions are correct either way. */
mt_status model_init(void);

/* Run one sample. input: int8 [MODEL_INPUT_SIZE] (may be model_input_buffer(), then no copy is
   made); logits: int8 [MODEL_OUTPUT_SIZE] (out). Returns MT_OK or a kernel's error code. */
mt_status model_predict(const int8_t *input, int8_t *logits);

/* The input tensor inside the arena: write a sample here to skip predict's input copy. Its
   contents are overwritten during model_predict. */
int8_t *model_input_buffer(void);

/* Debugging: called after every layer with the layer's index, name and int8 output. */
typedef void (*model_layer_hook)(int32_t layer, const char *name, const int8_t *data, int32_t size);

/* Install (or, with NULL, remove) the layer hook. */
void model_set_layer_hook(model_layer_hook hook);

#ifdef __cplusplus
}
#endif

#endif /* MODEL_H */
