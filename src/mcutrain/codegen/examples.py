"""Ready-to-build firmware around an exported library: `export --example KIND`.

    arduino               arduino/<lib>/: an Arduino library (library.properties, src/ with the
                          model and the runtime flattened into it, examples/<lib>_demo/ a sketch)
    zephyr                zephyr/module.yml, zephyr/CMakeLists.txt, zephyr/Kconfig: the library
                          folder is a Zephyr module (ZEPHYR_EXTRA_MODULES), CONFIG_<LIB>=y
    baremetal-nrf52840    examples/baremetal-<board>/: main.c, startup.c (vectors, .data/.bss,
    baremetal-stm32f746   FPU on), <board>.ld (the chip's memory map), a Makefile for arm-none-eabi-gcc
    baremetal-nrf5340     (the Cortex-M33 boards run in the Secure state they reset in, as the
    baremetal-stm32u585   instruction-counted QEMU runs do)

The bare-metal examples link the library with the chip's real Flash and RAM and the planner's
stack allowance, so the image's section sizes are the RAM and Flash the planner accounts
(tests/codegen/test_examples.py builds them and compares). Arduino and Zephyr layouts are
checked for structure only: neither tool is installed where the tests run.

Only fixed words and numbers reach these files (board names, flags, sizes, the library name);
the examples use the unprefixed names and `codegen/prefix.py` renames them with the library.
"""

from __future__ import annotations

from dataclasses import dataclass

from mcutrain.buildflags import C_STD_FLAGS, CROSS_OPT, REF_KERNELS, TRAIN_FLAGS, core_flags
from mcutrain.codegen.cfloat import c_float
from mcutrain.codegen.templates import render
from mcutrain.plan.memory import STACK_ALLOWANCE
from mcutrain.targets import get_target
from mcutrain.version import __version__


@dataclass(frozen=True)
class MemoryMap:
    """Where a chip's Flash and RAM start (its datasheet); their sizes are the target's."""

    board: str
    flash_origin: int
    ram_origin: int
    ram_bytes: int | None = None
    """The contiguous RAM the image links into, where smaller than the chip's total (the target's
    `ram_bytes` counts every bank; one linker region cannot span a gap between them)."""

    def linked_ram_bytes(self) -> int:
        return self.ram_bytes if self.ram_bytes is not None else get_target(self.board).ram_bytes


MEMORY_MAPS = {
    "nrf52840": MemoryMap("nrf52840", 0x00000000, 0x20000000),
    "stm32f746": MemoryMap("stm32f746", 0x08000000, 0x20000000),
    "nrf5340": MemoryMap("nrf5340", 0x00000000, 0x20000000),
    "stm32u585": MemoryMap("stm32u585", 0x08000000, 0x20000000, ram_bytes=768 * 1024),
}
"""Boards with a bare-metal example: nRF52840 (Flash at 0x0), STM32F746 (Flash at 0x08000000,
RAM = DTCM + SRAM1 + SRAM2, contiguous from 0x20000000), the nRF5340's application core (1 MB
Flash at 0x0, 512 KB RAM at 0x20000000) and the STM32U585 (2 MB Flash at 0x08000000 with
TrustZone off, its reset default; SRAM1-3, 768 KB contiguous at 0x20000000: SRAM4 and the backup
SRAM sit elsewhere). The RP2350 needs a boot block of its ROM's format, and the Cortex-M55 chips
boot through their own secure firmware: no bare-metal example for them."""

EXAMPLES = ("arduino", "zephyr", *(f"baremetal-{b}" for b in MEMORY_MAPS))
"""`--example` choices."""


class ExampleError(ValueError):
    """An example that does not fit the export (another core than the library's target)."""


@dataclass(frozen=True)
class LibraryFacts:
    """What an example needs to know of its library."""

    lib: str
    """The library's name with its prefix (`model`, `kws_model`)."""
    prefix: str
    training: bool
    method: str
    kernels: str
    target: str
    lr: float = 0.0


def _demo_fields(f: LibraryFacts) -> dict[str, str]:
    """The parts of main.c / the sketch that differ between an inference and a training library."""
    if not f.training:
        return {"what": "inference", "train_buffers": "", "input_buffer": "model_input_buffer()",
                "input_bytes": "MODEL_INPUT_SIZE", "logits_size": "MODEL_OUTPUT_SIZE",
                "call": "model_predict(x, demo_logits)"}
    lr = c_float(f.lr if f.lr > 0 else 0.01)
    return {"what": "training step (all labels 0)",
            "train_buffers": ("static int32_t demo_labels[MODEL_TRAIN_BATCH];\n"
                              "static int32_t demo_losses[MODEL_TRAIN_BATCH];\n"),
            "input_buffer": "model_train_input_buffer()",
            "input_bytes": "MODEL_TRAIN_BATCH * MODEL_INPUT_SIZE",
            "logits_size": "MODEL_TRAIN_BATCH * MODEL_OUTPUT_SIZE",
            "call": f"model_train_step(x, demo_labels, {lr}, demo_losses, demo_logits)"}


def _ref_define(f: LibraryFacts) -> str:
    return f.prefix.upper() + REF_KERNELS if f.kernels != "dsp" else ""


def baremetal(f: LibraryFacts, board: str) -> dict[str, str]:
    """examples/baremetal-<board>/ for library `f`."""
    m, t = MEMORY_MAPS[board], get_target(board)
    if f.target and get_target(f.target).core != t.core:
        raise ExampleError(f"--example baremetal-{board} is for a {t.core} and this library was exported "
                           f"for {f.target} ({get_target(f.target).core}): export with --target {board}")
    folder = f"examples/baremetal-{board}"
    ref = _ref_define(f)
    mem = {"board": board, "core": t.core, "flash_origin": f"0x{m.flash_origin:08X}",
           "ram_origin": f"0x{m.ram_origin:08X}"}
    return {
        f"{folder}/main.c": render("baremetal_main.c", board=board, **_demo_fields(f)),
        f"{folder}/startup.c": render("baremetal_startup.c", board=board, core=t.core),
        f"{folder}/{board}.ld": render("baremetal.ld", **mem, flash_bytes=t.flash_bytes,
                                       ram_bytes=m.linked_ram_bytes(), flash_kb=t.flash_bytes // 1024,
                                       ram_kb=m.linked_ram_bytes() // 1024, stack_bytes=STACK_ALLOWANCE),
        f"{folder}/Makefile": render("Makefile.baremetal", board=board, core=t.core, lib=f.lib,
                                     flash_origin=mem["flash_origin"], core_flags=" ".join(core_flags(t)),
                                     opt=CROSS_OPT,
                                     flags=" ".join(C_STD_FLAGS + (TRAIN_FLAGS if f.training else [])),
                                     defines=f" -D{ref}" if ref else ""),
    }


def zephyr(f: LibraryFacts) -> dict[str, str]:
    """zephyr/: the library folder as a Zephyr module."""
    kconfig = f.lib.upper()
    ref = _ref_define(f)
    flags = " ".join(TRAIN_FLAGS) if f.training else ""
    return {
        "zephyr/module.yml": render("zephyr_module.yml", lib=f.lib),
        "zephyr/CMakeLists.txt": render(
            "zephyr_CMakeLists.txt", lib=f.lib, kconfig=kconfig, opt=CROSS_OPT,
            flags=f" {flags}" if flags else "",
            why_flags="; -ffp-contract=off keeps the simulator's float32 order" if flags else "",
            defines=f"  zephyr_compile_definitions({ref})\n" if ref else ""),
        "zephyr/Kconfig": render("zephyr_Kconfig", kconfig=kconfig, lib=f.lib, method=f.method),
    }


def arduino(f: LibraryFacts, files: dict[str, str]) -> dict[str, str]:
    """arduino/<lib>/: an Arduino library holding copies of model.c/h and the runtime in src/.

    Arduino compiles src/ with its own flags and adds nothing but src/ to the include path, so the
    runtime is flattened into src/ beside model.h (every `#include "mt_*.h"` then resolves).
    """
    root = f"arduino/{f.lib}"
    out = {f"{root}/library.properties": render("arduino_library.properties", lib=f.lib,
                                                version=__version__, method=f.method),
           f"{root}/examples/{f.lib}_demo/{f.lib}_demo.ino": render("arduino_sketch.ino", lib=f.lib,
                                                                     **_demo_fields(f))}
    for rel, text in files.items():
        if rel in ("model.h", "model.c") or rel.startswith("runtime/"):
            out[f"{root}/src/{rel.rsplit('/', 1)[-1]}"] = text
    return out


def example_files(kinds: list[str], f: LibraryFacts, files: dict[str, str]) -> dict[str, str]:
    """The files of every example in `kinds` (unknown ones refused), by path in the library folder."""
    out: dict[str, str] = {}
    for kind in kinds:
        if kind == "arduino":
            out.update(arduino(f, files))
        elif kind == "zephyr":
            out.update(zephyr(f))
        elif kind.startswith("baremetal-") and kind.removeprefix("baremetal-") in MEMORY_MAPS:
            out.update(baremetal(f, kind.removeprefix("baremetal-")))
        else:
            raise ExampleError(f"unknown example {kind!r}; known: {', '.join(EXAMPLES)}")
    return out
