"""Every compiler flag a build of generated C uses: the one place build flags live.

The Makefile and CMakeLists.txt of an exported library, the host builds of the tests and of
`mcutrain run` (codegen), and the Cortex-M cross builds (mcu) must compile with the same
warnings and the same float rounding, or a build that passes here could fail (or round
differently) there. This module sits below codegen and mcu (it imports only `targets`), so
both read it. Which of these options can change results, and which only warn or place code,
is the table "Build options" in docs/c-api.md.
"""

from __future__ import annotations

import re

from mcutrain.targets import Target

C_STANDARD = ["-std=c99"]
"""The language of the runtime and the generated code (CMake sets it with CMAKE_C_STANDARD)."""

WARNING_FLAGS = ["-Wall", "-Wextra", "-Werror"]
"""Warnings every build of the library treats as errors (host, cross, Makefile, CMake)."""

C_STD_FLAGS = C_STANDARD + WARNING_FLAGS
"""Standard and warnings: what every compiler command line of the library starts with."""

TRAIN_FLAGS = ["-ffp-contract=off"]
"""No fused multiply-add, so every float32 operation of the QAS update, the BP-QAS errors and
FQT's float scales rounds where the simulator rounds (docs/integer-semantics.md 11). Training
libraries' Makefile/CMake and host builds add it; cross builds always pass it."""

HOST_CHECK_FLAGS = ["-pedantic"]
"""Host builds of the harnesses also refuse anything outside ISO C99."""

HOST_SANITIZE = ["-fsanitize=address,undefined,float-cast-overflow", "-fno-sanitize-recover=all",
                 "-fno-omit-frame-pointer"]
"""Host sanitizers: ASan, UBSan and float-cast-overflow (a float-to-int cast out of range, e.g. of
inf or NaN, is undefined behaviour that plain -fsanitize=undefined does not check)."""

HOST_OPT = "-O1"
"""Host harness builds: fast to compile, and the sanitizers still see every access."""

CROSS_OPT = "-O2"
"""Cortex-M builds, and the exported Makefile's default `OPT`: what the instruction counts measure."""

OPT_LEVEL = re.compile(r"-O[0-3sgz]|-Ofast")
"""The optimisation flags a cross build accepts."""

REF_KERNELS = "MT_KERNELS_REF"
"""Defined: the portable loops everywhere, whatever the core offers (identical results)."""

EMULATE_DSP = "MT_EMULATE_DSP"
"""Host only: the DSP loops with portable emulations of their intrinsics, so the sanitizers run them."""

CORE_FLAGS: dict[str, tuple[str, ...]] = {
    "cortex-m0plus": ("-mcpu=cortex-m0plus", "-mthumb", "-mfloat-abi=soft"),
    "cortex-m4": ("-mcpu=cortex-m4", "-mthumb", "-mfloat-abi=hard", "-mfpu=fpv4-sp-d16"),
    "cortex-m7": ("-mcpu=cortex-m7", "-mthumb", "-mfloat-abi=hard", "-mfpu=fpv5-d16"),
    # Armv8-M mainline; GCC's cortex-m33 includes the DSP extension (+nodsp removes it), so
    # __ARM_FEATURE_DSP selects the same SMLAD loops as on the M4. FPv5 single precision only.
    "cortex-m33": ("-mcpu=cortex-m33", "-mthumb", "-mfloat-abi=hard", "-mfpu=fpv5-sp-d16"),
    # -mcpu=cortex-m55 is armv8.1-m.main+mve.fp+fp.dp (GCC 12): __ARM_FEATURE_MVE=3, DSP, FPv5-D16.
    "cortex-m55": ("-mcpu=cortex-m55", "-mthumb", "-mfloat-abi=hard"),
    "rv32imc": ("-march=rv32imc", "-mabi=ilp32"),
    "rv32imac": ("-march=rv32imac", "-mabi=ilp32"),
    "rv32imafc": ("-march=rv32imafc", "-mabi=ilp32f"),
}
"""Code-generation flags per core when the target has an FPU (soft float otherwise). A RISC-V
core's ISA string already says whether it has floats, so its flags never change."""

SECTION_FLAGS = ["-ffunction-sections", "-fdata-sections"]
"""One section per function and object, so the linker drops what is unused (and sizes are per symbol)."""

CROSS_LINK_FLAGS = ["--specs=rdimon.specs", "-nostartfiles", "-Wl,--gc-sections", *SECTION_FLAGS]
"""Semihosting newlib, our own startup code, unused sections dropped."""

RISCV_LINK_FLAGS = ["--specs=picolibc.specs", "--oslib=semihost", "-nostartfiles", "-Wl,--gc-sections",
                    *SECTION_FLAGS]
"""RISC-V: picolibc with its semihosting system calls (stdio, files, exit status), our own startup."""


def libc_flags(target: Target) -> list[str]:
    """What a compile-only command for `target` needs to find the C library's headers: the RISC-V
    compiler has none of its own (picolibc's specs add them); arm-none-eabi-gcc finds newlib's."""
    return ["--specs=picolibc.specs"] if target.arch == "riscv" else []


def link_flags(target: Target) -> list[str]:
    """The C library, startup and section flags a cross build of `target` links with."""
    return list(RISCV_LINK_FLAGS if target.arch == "riscv" else CROSS_LINK_FLAGS)


def core_flags(target: Target) -> list[str]:
    """Compiler flags selecting the core and float ABI of `target`."""
    flags = list(CORE_FLAGS[target.core])
    if target.core == "cortex-m33" and not target.dsp:  # the M33's DSP extension is optional
        flags = [f"{f}+nodsp" if f.startswith("-mcpu=") else f for f in flags]
    if not target.fpu and target.arch == "arm":
        flags = [f for f in flags if not f.startswith(("-mfpu=", "-mfloat-abi="))] + ["-mfloat-abi=soft"]
    return flags


def host_kernel_flags(kernels: str) -> list[str]:
    """'ref': the portable loops; 'dsp': the DSP loops, emulated on the host."""
    return [f"-D{EMULATE_DSP}"] if kernels == "dsp" else [f"-D{REF_KERNELS}"]

