/*
 * model.h: int8 inference of one model with the mcutrain C runtime.
 *
 * Provenance: tests/codegen tiny model
 * Kernels planned for: ref; arena planner: greedy.
 * Compiled in:
 *     method: none (inference only)
 *     rounding: single
 *     kernels: ref
 *     mcutrain: 0.1.0
 *
 * Usage:
 *     if (model_init() != MT_OK) ...;            (once: checks the arena against the kernels)
 *     model_predict(input, logits);              (any number of times)
 * Input: int8 [4, 4, 1] NHWC, real = 0.0078125 * (q - (-128)).
 * Output: int8 logits [3], real = 0.5 * (q - (3)).
 * No malloc and no floating point; all RAM is the static arena of MODEL_ARENA_BYTES.
 */
#ifndef MODEL_H
#define MODEL_H

#include <stdint.h>

#include "mt_types.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MODEL_INPUT_H 4
#define MODEL_INPUT_W 4
#define MODEL_INPUT_C 1
#define MODEL_INPUT_SIZE 16
#define MODEL_INPUT_ZERO_POINT (-128)
#define MODEL_OUTPUT_SIZE 3
#define MODEL_OUTPUT_ZERO_POINT (3)
#define MODEL_ARENA_BYTES 48
#define MODEL_NUM_LAYERS 4

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
