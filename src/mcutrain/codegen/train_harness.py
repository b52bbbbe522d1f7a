"""The file-driven training driver of a generated library (`harness/train_main.c`).

`harness/train_main.c` reads a data file (header, then per step MODEL_TRAIN_BATCH samples
in the library's input format (int8; uint8 for fqt uint8/mixed; float32 bytes for fqt float32) and
int32 labels) and writes per step the losses, the logits and the saved training state
(`model_save_state`), so a test or `mcutrain run` compares every trainable tensor, the RNG state
and the step counter with the simulator after every step. On the emulated boards (`MT_BOARD`)
each `model_train_step` sits between the instruction-count markers, and the driver prints the
stack high-water mark (`mt_stack_used`) at the end.

Layouts (little-endian; read and written by `mcu/train_data.py`):
    data:   magic 'MTTD', steps, batch, input size, lr (float32 bits); per step
            inputs int8 [batch * input size], labels int32 [batch]
    result: per step losses int32 [batch], logits int8 [batch * classes], state [MODEL_STATE_BYTES]

Example:
    >>> from mcutrain.mcu.hostbuild import build_host_train
    >>> exe = build_host_train(lib_dir, tmp_path / "train")                # doctest: +SKIP
"""

from __future__ import annotations

TRAIN_HARNESS_C = """\
/* File-driven training driver: model_train_harness DATA RESULTS (layouts: mcutrain.codegen.train_harness). */
#include <stdio.h>
#include <string.h>

#include "model.h"

#if defined(MT_BOARD)
#include "mt_board.h"
#else
static void mt_mark_begin(void)
{
}

static void mt_mark_end(void)
{
}
#endif /* MT_BOARD */

#define DATA_MAGIC 0x4454544Du

static int32_t labels[MODEL_TRAIN_BATCH];
static int32_t losses[MODEL_TRAIN_BATCH];
static int8_t logits[MODEL_TRAIN_BATCH * MODEL_OUTPUT_SIZE];
static uint8_t state[MODEL_STATE_BYTES];

int main(int argc, char **argv)
{
    FILE *in;
    FILE *out;
    uint32_t head[5];
    float lr;
    uint32_t step;
    int8_t *x = model_train_input_buffer();
    if (argc < 3) {
        fprintf(stderr, "usage: model_train_harness DATA RESULTS\\n");
        return 2;
    }
    if (model_init() != MT_OK) {
        fprintf(stderr, "model_init failed: the arena does not match the kernels compiled in\\n");
        return 3;
    }
    in = fopen(argv[1], "rb");
    out = fopen(argv[2], "wb");
    if (!in || !out) {
        fprintf(stderr, "cannot open %s or %s\\n", argv[1], argv[2]);
        return 2;
    }
    if (fread(head, 4, 5, in) != 5 || head[0] != DATA_MAGIC || head[2] != MODEL_TRAIN_BATCH ||
        head[3] != MODEL_INPUT_SIZE) {
        fprintf(stderr, "%s: not a training data file for this model (batch %d, input size %d)\\n", argv[1],
                MODEL_TRAIN_BATCH, MODEL_INPUT_SIZE);
        return 3;
    }
    memcpy(&lr, &head[4], 4);
    for (step = 0; step < head[1]; ++step) {
        mt_status st;
        if (fread(x, 1, MODEL_TRAIN_BATCH * MODEL_INPUT_SIZE, in) != MODEL_TRAIN_BATCH * MODEL_INPUT_SIZE ||
            fread(labels, 4, MODEL_TRAIN_BATCH, in) != MODEL_TRAIN_BATCH) {
            fprintf(stderr, "%s: data ends before step %lu\\n", argv[1], (unsigned long)step);
            return 3;
        }
        mt_mark_begin();
        st = model_train_step(x, labels, lr, losses, logits);
        mt_mark_end();
        if (st != MT_OK) {
            fprintf(stderr, "model_train_step failed with status %d at step %lu\\n", (int)st,
                    (unsigned long)step);
            return 4;
        }
        if (model_save_state(state, MODEL_STATE_BYTES) != MT_OK ||
            fwrite(losses, 4, MODEL_TRAIN_BATCH, out) != MODEL_TRAIN_BATCH ||
            fwrite(logits, 1, sizeof(logits), out) != sizeof(logits) ||
            fwrite(state, 1, MODEL_STATE_BYTES, out) != MODEL_STATE_BYTES) {
            fprintf(stderr, "cannot write %s\\n", argv[2]);
            return 2;
        }
    }
    fclose(in);
    fclose(out);
    printf("steps %lu\\n", (unsigned long)head[1]);
#if defined(MT_BOARD)
    printf("stack_used %lu\\n", (unsigned long)mt_stack_used());
#endif /* MT_BOARD */
    return 0;
}
"""
