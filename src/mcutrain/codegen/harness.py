"""The file-driven driver for a generated library, and host builds of it (gcc, sanitizers).

`harness/main.c` reads raw int8 samples (MODEL_INPUT_SIZE bytes each) from INPUTS, writes raw
int8 logits to LOGITS and, if a third path is given, every layer's output of every sample to
LAYERS (in layer order, sizes from the graph). On the emulated Cortex-M boards the same file
runs with semihosting file I/O and brackets each `model_predict` with the instruction-count
markers (`MT_BOARD` defined), so only inference is counted, never file I/O.

Example:
    >>> exe = build_host(lib_dir, tmp_path / "harness")          # doctest: +SKIP
    >>> logits = run_host(exe, x_q, num_classes=10)               # doctest: +SKIP
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np

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

HOST_SANITIZE = ["-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer"]


class HostBuildError(RuntimeError):
    """The host compiler failed; the message holds its diagnostics."""


def find_host_cc() -> str:
    cc = shutil.which("gcc") or shutil.which("cc")
    if not cc:
        raise HostBuildError("no host C compiler found; install one with: apt-get install -y gcc")
    return cc


def build_host(lib_dir: str | Path, exe: str | Path, sanitize: bool = True, kernels: str = "ref",
               opt: str = "-O1", extra: list[str] | None = None) -> Path:
    """Compile a generated library and its harness with the host compiler into `exe`.

    kernels: 'ref' builds the portable loops; 'dsp' builds the DSP loops with their portable
    emulation (`MT_EMULATE_DSP`), so the DSP code path runs under the host sanitizers.
    """
    from mcutrain.codegen.library import C_STD_FLAGS

    lib = Path(lib_dir)
    srcs = [lib / "model.c", *sorted((lib / "runtime").glob("*.c")), lib / "harness" / "main.c"]
    flags = [*C_STD_FLAGS, "-pedantic", opt, f"-I{lib}", f"-I{lib / 'runtime'}"]
    flags += ["-DMT_EMULATE_DSP"] if kernels == "dsp" else ["-DMT_KERNELS_REF"]
    flags += (HOST_SANITIZE if sanitize else []) + list(extra or [])
    cmd = [find_host_cc(), *flags, *map(str, srcs), "-o", str(exe)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise HostBuildError(f"host build failed ({' '.join(cmd)}):\n{r.stderr}")
    return Path(exe)


def run_host(exe: str | Path, x_q: np.ndarray, num_classes: int, layer_sizes: list[int] | None = None,
             timeout: float = 120.0) -> tuple[np.ndarray, list[np.ndarray] | None]:
    """Run the harness on int8 samples (N, ...); returns logits (N, K) and, if asked, the layers.

    `layer_sizes` (bytes per layer, in layer order) turns on the per-layer dump; the result is
    one (N, size) array per layer.
    """
    x_q = np.ascontiguousarray(x_q, dtype=np.int8)
    n = len(x_q)
    with tempfile.TemporaryDirectory(prefix="mt-host-") as d:
        fin, fout, flay = Path(d, "in.bin"), Path(d, "out.bin"), Path(d, "layers.bin")
        fin.write_bytes(x_q.tobytes())
        cmd = [str(exe), str(fin), str(fout)] + ([str(flay)] if layer_sizes else [])
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        if r.returncode != 0:
            raise HostBuildError(f"harness exited with {r.returncode}:\n{r.stdout}\n{r.stderr}")
        logits = np.frombuffer(fout.read_bytes(), np.int8).reshape(n, num_classes)
        if not layer_sizes:
            return logits, None
        raw = np.frombuffer(flay.read_bytes(), np.int8).reshape(n, sum(layer_sizes))
        splits = np.cumsum(layer_sizes)[:-1]
        return logits, [a.copy() for a in np.split(raw, splits, axis=1)]
