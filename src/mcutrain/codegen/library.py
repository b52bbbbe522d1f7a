"""Write a self-contained C library for one model: model.c/h, the runtime, build files, README.

Layout of the output directory:
    model.h, model.c           the model (see `emit.py`)
    runtime/                   the mcutrain C runtime: the files `runtime_files.runtime_files(kernels)`
                               picks from the package's folders, in one flat folder
    harness/main.c             a file-in, file-out driver (host or semihosting), optional to use
    Makefile, CMakeLists.txt   build `libmodel.a` (C99, -Wall -Wextra -Werror)
    README.md                  the API, the model's facts and how to build
Files are written atomically; a failed export leaves an earlier one intact file by file.

Example:
    >>> from mcutrain import zoo
    >>> from mcutrain.engines import ptq
    >>> x = np.random.default_rng(0).random((8, 8, 8, 1), dtype=np.float32)
    >>> qm = ptq.quantize_model(zoo.build("digits-cnn"), x)
    >>> res = export_library(qm, tmp_path, kernels="ref")   # doctest: +SKIP
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from mcutrain.codegen.dispatch import emit_training
from mcutrain.codegen.emit import ModelSource, emit_model
from mcutrain.codegen.flags import C_STD_FLAGS, TRAIN_FLAGS
from mcutrain.codegen.harness import HARNESS_C
from mcutrain.codegen.runtime_files import runtime_files
from mcutrain.codegen.train_harness import TRAIN_HARNESS_C
from mcutrain.io import atomic_write_bytes
from mcutrain.qmodel import QuantModel


@dataclass
class ExportResult:
    """What `export_library` wrote and the model's memory figures."""

    out_dir: Path
    files: list[str]
    kernels: str
    arena_bytes: int
    const_bytes: int
    layers: list[str] = field(default_factory=list)
    model: ModelSource | None = None


def _write(path: Path, text: str) -> None:
    atomic_write_bytes(path, lambda f: f.write(text.encode()))


def export_library(qm: QuantModel, out_dir: str | Path, kernels: str = "dsp", planner: str = "greedy",
                   provenance: str = "", target: str = "") -> ExportResult:
    """Generate the library for `qm` into `out_dir` (created if needed)."""
    out = Path(out_dir)
    src = emit_model(qm, kernels=kernels, planner=planner, provenance=provenance)
    files: dict[str, str] = {"model.h": src.header, "model.c": src.source, "harness/main.c": HARNESS_C}
    for name, text in runtime_files(kernels).items():
        files[f"runtime/{name}"] = text
    defines = "" if kernels == "dsp" else " -DMT_KERNELS_REF"
    files["Makefile"] = _MAKEFILE.format(flags=" ".join(C_STD_FLAGS), defines=defines)
    files["CMakeLists.txt"] = _CMAKE.format(
        defines="" if kernels == "dsp" else "target_compile_definitions(model PUBLIC MT_KERNELS_REF)\n")
    g = qm.graph
    files["README.md"] = _README.format(
        name=g.name, provenance=provenance or "(not recorded)", target=target or "(any)", kernels=kernels,
        planner=planner, arena=src.plan.arena_bytes, consts=src.const_bytes, macs=g.total_macs(),
        summary=g.summary(), in_shape=list(g.input_shape), k=g.num_classes)
    for rel, text in files.items():
        _write(out / rel, text)
    return ExportResult(out, sorted(files), kernels, src.plan.arena_bytes, src.const_bytes, src.layers, src)


def export_training_library(method, out_dir: str | Path, batch: int = 1, kernels: str = "dsp",
                            provenance: str = "", target: str = "", lr: float = 0.0) -> ExportResult:
    """Generate a training library for `method` (ZOMethod, BPQASMethod or FQT) into `out_dir`.

    The files are those of `export_library` plus `harness/train_main.c`; the Makefile and CMake
    builds add `-ffp-contract=off` (the float32 order of the update). `res.model` holds the
    `TrainSource` (plan, state layout) for callers that run the library.
    """

    out = Path(out_dir)
    src = emit_training(method, batch=batch, kernels=kernels, provenance=provenance)
    files: dict[str, str] = {"model.h": src.header, "model.c": src.source, "harness/main.c": HARNESS_C,
                             "harness/train_main.c": TRAIN_HARNESS_C}
    for name, text in runtime_files(kernels, training=True).items():
        files[f"runtime/{name}"] = text
    defines = "" if kernels == "dsp" else " -DMT_KERNELS_REF"
    files["Makefile"] = _MAKEFILE.format(flags=" ".join(C_STD_FLAGS + TRAIN_FLAGS), defines=defines).replace(
        "harness: harness/main.c libmodel.a\n\t$(CC) $(CFLAGS) harness/main.c libmodel.a -o model_harness\n",
        "harness: harness/main.c harness/train_main.c libmodel.a\n"
        "\t$(CC) $(CFLAGS) harness/main.c libmodel.a -o model_harness\n"
        "\t$(CC) $(CFLAGS) harness/train_main.c libmodel.a -o model_train_harness\n").replace(
        "rm -f $(OBJS) libmodel.a model_harness",
        "rm -f $(OBJS) libmodel.a model_harness model_train_harness")
    cmake_defs = "" if kernels == "dsp" else "target_compile_definitions(model PUBLIC MT_KERNELS_REF)\n"
    files["CMakeLists.txt"] = _CMAKE.format(defines=cmake_defs).replace(
        "-Wall -Wextra -Werror)", "-Wall -Wextra -Werror -ffp-contract=off)") + (
        "add_executable(model_train_harness EXCLUDE_FROM_ALL harness/train_main.c)\n"
        "target_link_libraries(model_train_harness model)\n")
    g = method.qm.graph if hasattr(method, "qm") else method.graph   # FQT keeps its own graph
    s = src.plan.schedule
    files["README.md"] = _TRAIN_README.format(
        name=g.name, method=method.name, provenance=provenance or "(not recorded)", target=target or "(any)",
        kernels=kernels, batch=batch, arena=src.arena_bytes, train_arena=src.plan.arena_bytes,
        infer_arena=src.inference_arena_bytes, ram_w=src.ram_weight_bytes, consts=src.const_bytes,
        state=src.state_bytes, macs=sum(s.macs_by_phase().values()),
        trainable=", ".join(s.trainable) or "(none)",
        options=", ".join(f"{k} {v}" for k, v in src.options.items() if k != "method"),
        entries="\n".join(f"| {e.name} | {e.dtype} | {list(e.shape)} | {e.nbytes} |" for e in src.state),
        summary=g.summary(), in_shape=list(g.input_shape), k=g.num_classes, lr=lr)
    for rel, text in files.items():
        _write(out / rel, text)
    return ExportResult(out, sorted(files), kernels, src.arena_bytes, src.const_bytes,
                        [n.name for n in g.nodes], src)


_TRAIN_README = """\
# {name}: int8 inference and on-device training ({method})

Provenance: {provenance}

Target: {target}. Kernels: `{kernels}` (DSP inner loops where the compiler defines
`__ARM_FEATURE_DSP`; `-DMT_KERNELS_REF` forces the portable loops; identical results).
Training: `{method}`, {batch} sample(s) per step; {options}. Trainable: {trainable}.
Suggested learning rate: {lr}.

| | |
|---|---|
| input | int8 {in_shape} NHWC (scale and zero point in `model.h`) |
| output | int8 logits [{k}] |
| arena (RAM) | {arena} bytes, static: training step {train_arena} (planner), inference {infer_arena} |
| trainable weights and biases (RAM) | {ram_w} bytes, initialised from Flash |
| constants (Flash) | {consts} bytes of frozen weights, biases and requantization constants |
| training state blob | {state} bytes (`MODEL_STATE_BYTES`) |
| MACs per training step | {macs} |

## API (`model.h`)

```c
mt_status model_init(void);                                    /* once */
mt_status model_predict(const int8_t *input, int8_t *logits);  /* per sample, current weights */
mt_status model_train_step(const int8_t *inputs, const int32_t *labels, float lr,
                           int32_t *losses, int8_t *logits);   /* per MODEL_TRAIN_BATCH samples */
int8_t *model_train_input_buffer(void);      /* write a batch here to skip a copy */
uint32_t model_train_steps(void);
mt_status model_save_state(uint8_t *blob, int32_t size);       /* size >= MODEL_STATE_BYTES */
mt_status model_load_state(const uint8_t *blob, int32_t size);
```

`losses` are the per-sample Q16 cross-entropy losses before the update (divide by 65536).
The state blob is what an application writes to flash to resume training bit-exactly after a
reset: 16 bytes of header (magic 'MTST', layout fingerprint, step counter, RNG state), then:

| tensor | dtype | shape | bytes |
|---|---|---|---|
{entries}

Every function returns `MT_OK` (0) on success. Nothing is allocated. The float32 operations
(the QAS update factors; in bp-qas also the errors and gradients) follow a fixed order: build
with `-ffp-contract=off` and without fast-math (the Makefile and CMakeLists.txt do).

## Build

    make                       # libmodel.a with the host compiler
    make CC=arm-none-eabi-gcc AR=arm-none-eabi-ar \\
        CFLAGS_ARCH="-mcpu=cortex-m4 -mthumb -mfloat-abi=hard -mfpu=fpv4-sp-d16"
    make harness               # model_harness (inference) and model_train_harness DATA RESULTS

or with CMake: `add_subdirectory(this_dir)` and link `model`.

## Graph

```
{summary}
```
"""


_MAKEFILE = """\
# Builds libmodel.a (and, with `make harness`, a file-driven test program).
# Cross-compiling: make CC=arm-none-eabi-gcc CFLAGS_ARCH="-mcpu=cortex-m4 -mthumb"
CC ?= cc
AR ?= ar
OPT ?= -O2
CFLAGS_ARCH ?=
CFLAGS = {flags} $(OPT) $(CFLAGS_ARCH){defines} -Iruntime -I.
SRCS = model.c $(wildcard runtime/*.c)
OBJS = $(SRCS:.c=.o)

.PHONY: all harness clean

all: libmodel.a

libmodel.a: $(OBJS)
\t$(AR) rcs $@ $^

%.o: %.c
\t$(CC) $(CFLAGS) -c $< -o $@

harness: harness/main.c libmodel.a
\t$(CC) $(CFLAGS) harness/main.c libmodel.a -o model_harness

clean:
\trm -f $(OBJS) libmodel.a model_harness
"""

_CMAKE = """\
cmake_minimum_required(VERSION 3.13)
project(model C)

set(CMAKE_C_STANDARD 99)
set(CMAKE_C_STANDARD_REQUIRED ON)

file(GLOB MT_RUNTIME_SOURCES ${{CMAKE_CURRENT_SOURCE_DIR}}/runtime/*.c)
add_library(model STATIC model.c ${{MT_RUNTIME_SOURCES}})
target_include_directories(model PUBLIC ${{CMAKE_CURRENT_SOURCE_DIR}} ${{CMAKE_CURRENT_SOURCE_DIR}}/runtime)
target_compile_options(model PRIVATE -Wall -Wextra -Werror)
{defines}
add_executable(model_harness EXCLUDE_FROM_ALL harness/main.c)
target_link_libraries(model_harness model)
"""

_README = """\
# {name}: int8 inference library

Provenance: {provenance}

Target: {target}. Kernels: `{kernels}` (DSP inner loops are used where the compiler defines
`__ARM_FEATURE_DSP`; `-DMT_KERNELS_REF` forces the portable loops; both give identical
results). Arena planner: `{planner}`.

| | |
|---|---|
| input | int8 {in_shape} NHWC (see `model.h` for its scale and zero point) |
| output | int8 logits [{k}] |
| arena (RAM) | {arena} bytes, static, in `model.c` |
| constants (Flash) | {consts} bytes of weights, biases and requantization constants |
| MACs per inference | {macs} |

## API (`model.h`)

```c
mt_status model_init(void);                                  /* once */
mt_status model_predict(const int8_t *input, int8_t *logits);  /* per sample */
int8_t *model_input_buffer(void);               /* write the input here to skip a copy */
void model_set_layer_hook(model_layer_hook hook);  /* debugging: every layer's output */
```

Every function returns `MT_OK` (0) on success. The library allocates nothing and uses no
floating point. The kernels are documented in `runtime/mt_nn.h`; their semantics are the
integer specification of mcutrain (`docs/integer-semantics.md`), bit for bit.

## Build

    make                       # libmodel.a with the host compiler
    make CC=arm-none-eabi-gcc AR=arm-none-eabi-ar CFLAGS_ARCH="-mcpu=cortex-m4 -mthumb"
    make harness               # model_harness INPUTS LOGITS [LAYERS]: raw int8 files

or with CMake: `add_subdirectory(this_dir)` and link `model`.

## Graph

```
{summary}
```
"""
