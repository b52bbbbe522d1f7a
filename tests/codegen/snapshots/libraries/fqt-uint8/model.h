/*
 * model.h: int8 inference and on-device training (fqt) of one model with the mcutrain C runtime.
 *
 * Provenance: tests/codegen library snapshot
 * Kernels planned for: ref. Training: fqt, batch 1; precision uint8, alpha_a 0.1, alpha_e 0.1, alpha_w 0.001, alpha_norm 0.1.
 * Compiled in:
 *     method: fqt
 *     precision: uint8 (weights u8, biases s32, activations u8, errors u8, per-sample gradients u8)
 *     batch: 1 sample(s) per model_train_step
 *     trained weights: conv1, conv2, fc
 *     trained biases: conv1, conv2, fc
 *     partial updates: none (every trained layer in full)
 *     rounding: single
 *     kernels: ref
 *     mcutrain: 0.1.0
 *
 * Usage:
 *     if (model_init() != MT_OK) ...;                       (once: checks the arena against the kernels)
 *     model_train_step(inputs, labels, lr, losses, NULL);   (per batch of MODEL_TRAIN_BATCH samples)
 *         returns MT_ERR_ARG, changing nothing, for NULL pointers or an lr that is not finite and > 0
 *     model_predict(input, logits);                         (any time, with the current weights)
 *     model_save_state(blob, MODEL_STATE_BYTES);            (weights, biases, RNG, step counter)
 * Input: int8 [8, 8, 1] NHWC, scale 0.003910627216100693, zero point 0.
 * Output: int8 logits [5], qparams dynamic (the EMA range moves every step; the zero point macro is the initial one).
 * No malloc; all working memory is the static arena of MODEL_ARENA_BYTES (training step
 * 556 bytes as planned, inference 556); the trainable tensors are RAM arrays.
 */
#ifndef MODEL_H
#define MODEL_H

#include <stdint.h>

#include "mt_types.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MODEL_INPUT_H 8
#define MODEL_INPUT_W 8
#define MODEL_INPUT_C 1
#define MODEL_INPUT_SIZE 64
#define MODEL_INPUT_ZERO_POINT (0)
#define MODEL_OUTPUT_SIZE 5
#define MODEL_OUTPUT_ZERO_POINT (66)
#define MODEL_ARENA_BYTES 556
#define MODEL_TRAIN_ARENA_BYTES 556
#define MODEL_NUM_LAYERS 5
#define MODEL_TRAIN_BATCH 1
#define MODEL_STATE_BYTES 623

/* Check the arena's scratch blocks against the kernels compiled in: MT_OK, or MT_ERR_BUFFER when
   the library was exported for reference kernels but built with DSP kernels (re-export with
   --kernels dsp, or build with -DMT_KERNELS_REF). */
mt_status model_init(void);

/* Run one sample with the current weights. input: int8 [MODEL_INPUT_SIZE]; logits: int8
   [MODEL_OUTPUT_SIZE] (out). Returns MT_OK or a kernel's error code. */
mt_status model_predict(const int8_t *input, int8_t *logits);

/* The input tensor of model_predict inside the arena: write a sample here to skip the copy. */
int8_t *model_input_buffer(void);

/* Debugging: called after every layer of model_predict with the layer's index, name and output. */
typedef void (*model_layer_hook)(int32_t layer, const char *name, const int8_t *data, int32_t size);

/* Install (or, with NULL, remove) the layer hook. */
void model_set_layer_hook(model_layer_hook hook);

/* One training step on MODEL_TRAIN_BATCH samples (one sample when exported with --batch 1).
   inputs: int8 [MODEL_TRAIN_BATCH * MODEL_INPUT_SIZE] (may be model_train_input_buffer());
   labels: int32 [MODEL_TRAIN_BATCH] class ids; lr: the learning rate;
   losses: int32 [MODEL_TRAIN_BATCH] (out) per-sample Q16 losses before the update (real loss =
   losses[b] / 65536); logits: int8 [MODEL_TRAIN_BATCH * MODEL_OUTPUT_SIZE] (out) before the
   update, or NULL. Updates the trainable weights and biases in place; counts the step. */
mt_status model_train_step(const int8_t *inputs, const int32_t *labels, float lr, int32_t *losses,
                           int8_t *logits);

/* Where model_train_step reads its inputs inside the arena (write a batch here to skip a copy). */
int8_t *model_train_input_buffer(void);

/* Training steps taken since initialisation (or the loaded state). */
uint32_t model_train_steps(void);

/* Save the training state (trainable weights and biases, optimizer state, RNG state, step
   counter) into blob[MODEL_STATE_BYTES], e.g. to write it to flash. MT_ERR_ARG if size is short. */
mt_status model_save_state(uint8_t *blob, int32_t size);

/* Restore a state saved by this model's library; MT_ERR_ARG if the blob is from another model
   or layout (magic and layout fingerprint are checked) or too short. */
mt_status model_load_state(const uint8_t *blob, int32_t size);

#ifdef __cplusplus
}
#endif

#endif /* MODEL_H */
