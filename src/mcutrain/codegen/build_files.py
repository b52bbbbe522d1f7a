"""The build files of an exported library: its Makefile, CMakeLists.txt and harness drivers.

An inference library has one file-driven driver (`harness/main.c` -> `model_harness`); a
training library adds `harness/train_main.c` -> `model_train_harness` and builds with the
training flags (`buildflags.TRAIN_FLAGS`). Both come from the same templates (`Makefile.in`,
`CMakeLists.txt.in`), the difference being the fields: the flags and one rule per driver.
Only fixed words reach these files (flags, the kernel choice, file names, a symbol prefix checked
by `cformat.c_prefix`); no model text. With a prefix the library, its CMake target, its driver
programs and the `MT_KERNELS_REF` define carry it (`codegen/prefix.py`).
"""

from __future__ import annotations

from dataclasses import dataclass

from mcutrain.buildflags import (
    C_STD_FLAGS,
    CROSS_OPT,
    REF_KERNELS,
    SECTION_FLAGS,
    TRAIN_FLAGS,
    WARNING_FLAGS,
    core_flags,
)
from mcutrain.codegen.prefix import LIBRARY_NAME
from mcutrain.codegen.templates import render
from mcutrain.targets import get_target


@dataclass(frozen=True)
class HarnessProgram:
    """One driver of a library: its source in the library folder, the program it builds, its template."""

    source: str
    program: str
    template: str


INFERENCE_HARNESSES = (HarnessProgram("harness/main.c", "model_harness", "harness_main.c"),)
TRAINING_HARNESSES = (*INFERENCE_HARNESSES,
                      HarnessProgram("harness/train_main.c", "model_train_harness", "harness_train_main.c"))


def harness_sources(training: bool) -> dict[str, str]:
    """The drivers' C files by their path in the library folder."""
    return {h.source: render(h.template) for h in (TRAINING_HARNESSES if training else INFERENCE_HARNESSES)}


def harness_programs(training: bool, prefix: str = "") -> tuple[str, ...]:
    """The driver programs' names (what the build makes and a prefixed library renames)."""
    return tuple(prefix + h.program for h in (TRAINING_HARNESSES if training else INFERENCE_HARNESSES))


TOOLCHAIN_TEMPLATES = {"arm": "arm-none-eabi.cmake", "riscv": "riscv64-unknown-elf.cmake"}
"""The toolchain file's template per architecture: each is named after the GNU compiler it sets."""

TOOLCHAIN_FILE = "cmake/" + TOOLCHAIN_TEMPLATES["arm"]
"""The CMake toolchain file of a library exported for a Cortex-M target."""


def toolchain_path(target: str = "") -> str:
    """Where a library exported for `target` keeps its toolchain file (the Arm one without a target)."""
    return "cmake/" + TOOLCHAIN_TEMPLATES[get_target(target).arch] if target else TOOLCHAIN_FILE


def toolchain_file(target: str) -> str:
    """The CMake toolchain file for `target`'s GNU cross compiler with its core flags (`-mcpu`/`-march`,
    FPU, ABI)."""
    t = get_target(target)
    return render(TOOLCHAIN_TEMPLATES[t.arch], target=t.name, core=t.core,
                  core_flags=" ".join(core_flags(t) + SECTION_FLAGS))


def build_files(kernels: str, training: bool, prefix: str = "", target: str = "") -> dict[str, str]:
    """Makefile and CMakeLists.txt for a library planned for `kernels` ('dsp' or 'ref').

    'ref' libraries define `MT_KERNELS_REF` so every build runs the portable loops they were
    planned for; CMake sets the C standard itself, so it gets the warnings without `-std=`.
    `prefix` (already checked) names the library `lib<prefix>model.a`, target `<prefix>model`.
    Both build with `CROSS_OPT` unless told otherwise (Make's `OPT`, CMake's `<lib>_OPT`); with a
    `target`, `cmake/arm-none-eabi.cmake` (RISC-V: `cmake/riscv64-unknown-elf.cmake`) cross-compiles
    for its core.
    """
    harnesses = TRAINING_HARNESSES if training else INFERENCE_HARNESSES
    programs = harness_programs(training, prefix)
    extra = TRAIN_FLAGS if training else []
    lib = prefix + LIBRARY_NAME
    ref_define = prefix.upper() + REF_KERNELS if kernels != "dsp" else ""
    makefile = render(
        "Makefile.in", flags=" ".join(C_STD_FLAGS + extra), opt=CROSS_OPT, lib=lib,
        defines=f" -D{ref_define}" if ref_define else "",
        harness_sources=" ".join(h.source for h in harnesses),
        harness_recipes="".join(render("Makefile.harness.in", source=h.source, program=p, lib=lib)
                                for h, p in zip(harnesses, programs, strict=True)),
        harness_programs=" ".join(programs))
    cmake = render(
        "CMakeLists.txt.in", flags=" ".join(WARNING_FLAGS + extra), lib=lib, opt=CROSS_OPT,
        defines=f"target_compile_definitions({lib} PUBLIC {ref_define})\n" if ref_define else "",
        harnesses="".join(render("CMakeLists.harness.txt.in", source=h.source, program=p, lib=lib)
                          for h, p in zip(harnesses, programs, strict=True)))
    files = {"Makefile": makefile, "CMakeLists.txt": cmake}
    if target:
        files[toolchain_path(target)] = toolchain_file(target)
    return files
