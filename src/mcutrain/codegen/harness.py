"""The file-driven driver for a generated library (`harness/main.c`); host builds in `mcu/hostbuild.py`.

`harness/main.c` reads raw int8 samples (MODEL_INPUT_SIZE bytes each) from INPUTS, writes raw
int8 logits to LOGITS and, if a third path is given, every layer's output of every sample to
LAYERS (in layer order, sizes from the graph). On the emulated Cortex-M boards the same file
runs with semihosting file I/O and brackets each `model_predict` with the instruction-count
markers (`MT_BOARD` defined), so only inference is counted, never file I/O.

Example:
    >>> from mcutrain.mcu.hostbuild import build_host
    >>> exe = build_host(lib_dir, tmp_path / "harness")          # doctest: +SKIP
"""

from __future__ import annotations

HARNESS_C = """\
/* File-driven driver: model_harness INPUTS LOGITS [LAYERS] (raw int8 files). */
#include <stdio.h>

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

static FILE *layers_file = NULL;

static void dump_layer(int32_t layer, const char *name, const int8_t *data, int32_t size)
{
    (void)layer;
    (void)name;
    fwrite(data, 1, (size_t)size, layers_file);
}

int main(int argc, char **argv)
{
    static int8_t logits[MODEL_OUTPUT_SIZE];
    FILE *in;
    FILE *out;
    int8_t *x = model_input_buffer();
    long n = 0;
    if (argc < 3) {
        fprintf(stderr, "usage: model_harness INPUTS LOGITS [LAYERS]\\n");
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
    if (argc > 3) {
        layers_file = fopen(argv[3], "wb");
        if (!layers_file) {
            fprintf(stderr, "cannot open %s\\n", argv[3]);
            return 2;
        }
        model_set_layer_hook(dump_layer);
    }
    while (fread(x, 1, MODEL_INPUT_SIZE, in) == MODEL_INPUT_SIZE) {
        mt_status st;
        mt_mark_begin();
        st = model_predict(x, logits);
        mt_mark_end();
        if (st != MT_OK) {
            fprintf(stderr, "model_predict failed with status %d on sample %ld\\n", (int)st, n);
            return 4;
        }
        if (fwrite(logits, 1, MODEL_OUTPUT_SIZE, out) != MODEL_OUTPUT_SIZE) {
            fprintf(stderr, "cannot write %s\\n", argv[2]);
            return 2;
        }
        n++;
    }
    fclose(in);
    fclose(out);
    if (layers_file) {
        fclose(layers_file);
    }
    printf("samples %ld\\n", n);
    return 0;
}
"""
