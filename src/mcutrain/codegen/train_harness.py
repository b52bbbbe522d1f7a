"""The file-driven training driver of a generated library, its data files, and host builds of it.

`harness/train_main.c` reads a data file (header, then per step MODEL_TRAIN_BATCH samples
in the library's input format (int8; uint8 for fqt uint8/mixed; float32 bytes for fqt float32) and
int32 labels) and writes per step the losses, the logits and the saved training state
(`model_save_state`), so a test or `mcutrain run` compares every trainable tensor, the RNG state
and the step counter with the simulator after every step. On the emulated boards (`MT_BOARD`)
each `model_train_step` sits between the instruction-count markers, and the driver prints the
stack high-water mark (`mt_stack_used`) at the end.

Layouts (little-endian):
    data:   magic 'MTTD', steps, batch, input size, lr (float32 bits); per step
            inputs int8 [batch * input size], labels int32 [batch]
    result: per step losses int32 [batch], logits int8 [batch * classes], state [MODEL_STATE_BYTES]

Example:
    >>> write_train_data(path, batches, lr=0.05)                          # doctest: +SKIP
    >>> exe = build_host_train(lib_dir, tmp_path / "train")                # doctest: +SKIP
    >>> steps = run_host_train(exe, path, src, num_classes=10)             # doctest: +SKIP
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mcutrain.codegen.flags import C_STD_FLAGS, HOST_SANITIZE, TRAIN_FLAGS
from mcutrain.codegen.harness import HostBuildError, find_host_cc, run_harness, runtime_objects

DATA_MAGIC = 0x4454544D
"""'MTTD' little-endian."""

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


def write_train_data(path: str | Path, batches: list[tuple[np.ndarray, np.ndarray]], lr: float) -> None:
    """The data file of `harness/train_main.c`: int8 batches (B, ...) with their labels."""
    from mcutrain.io import atomic_write_bytes

    bsz = len(batches[0][1])
    in_size = int(np.prod(batches[0][0].shape[1:]))
    parts = [np.array([DATA_MAGIC, len(batches), bsz, in_size], "<u4").tobytes(),
             np.array([lr], "<f4").tobytes()]
    for x_q, y in batches:
        if len(y) != bsz or x_q.shape[0] != bsz:
            raise ValueError(f"every batch must hold {bsz} samples")
        parts += [np.ascontiguousarray(x_q, np.int8).tobytes(), np.asarray(y, "<i4").tobytes()]
    atomic_write_bytes(Path(path), lambda f: f.write(b"".join(parts)))


@dataclass
class TrainStepResult:
    """What the C library reported after one step."""

    losses: np.ndarray             # (B,) int32 Q16, before the update
    logits: np.ndarray             # (B, K) int8, before the update
    state: dict                    # TrainSource.parse_state: tensors by name, 'steps', 'rng'


def read_train_results(path: str | Path, src, steps: int, num_classes: int) -> list[TrainStepResult]:
    """Parse the harness's result file (`src` is the library's `TrainSource`)."""
    raw = Path(path).read_bytes()
    b = src.batch
    per = 4 * b + b * num_classes + src.state_bytes
    if len(raw) != steps * per:
        raise RuntimeError(f"the training harness wrote {len(raw)} bytes, expected {steps} steps x {per}")
    out = []
    for i in range(steps):
        chunk = raw[i * per:(i + 1) * per]
        losses = np.frombuffer(chunk[:4 * b], "<i4").copy()
        logits = np.frombuffer(chunk[4 * b:4 * b + b * num_classes], np.int8).reshape(b, num_classes).copy()
        out.append(TrainStepResult(losses, logits, src.parse_state(chunk[4 * b + b * num_classes:])))
    return out


def build_host_train(lib_dir: str | Path, exe: str | Path, sanitize: bool = True, kernels: str = "ref",
                     opt: str = "-O1") -> Path:
    """Compile a generated training library and its harness with the host gcc (ASan + UBSan)."""
    lib = Path(lib_dir)
    cc = find_host_cc()
    flags = [*C_STD_FLAGS, *TRAIN_FLAGS, "-pedantic", opt, f"-I{lib / 'runtime'}"]
    flags += ["-DMT_EMULATE_DSP"] if kernels == "dsp" else ["-DMT_KERNELS_REF"]
    flags += HOST_SANITIZE if sanitize else []
    objs = runtime_objects(cc, lib / "runtime", flags)
    cmd = [cc, *flags, f"-I{lib}", str(lib / "model.c"), str(lib / "harness" / "train_main.c"),
           *map(str, objs), "-o", str(exe)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise HostBuildError(f"host build failed ({' '.join(cmd)}):\n{r.stderr}")
    return Path(exe)


def run_host_train(exe: str | Path, batches: list[tuple[np.ndarray, np.ndarray]], lr: float, src,
                   num_classes: int, timeout: float = 300.0) -> list[TrainStepResult]:
    """Run the host harness on int8 batches; the per-step results."""
    from mcutrain.contain import private_dir

    with private_dir("mt-train-") as d:
        write_train_data(d / "data.bin", batches, lr)
        run_harness(exe, ["data.bin", "results.bin"], d, timeout)
        return read_train_results(d / "results.bin", src, len(batches), num_classes)
