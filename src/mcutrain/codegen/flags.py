"""The compiler flags of every build of a generated library: the one place build flags live.

The Makefile and CMakeLists.txt of an exported library, the host builds of the tests and
`mcutrain run`, and the Cortex-M cross builds must compile with the same warnings and the same
float rounding, or a build that passes here could fail (or round differently) there.
"""

from __future__ import annotations

C_STANDARD = ["-std=c99"]
"""The language of the runtime and the generated code (CMake sets it with CMAKE_C_STANDARD)."""

WARNING_FLAGS = ["-Wall", "-Wextra", "-Werror"]
"""Warnings every build of the library treats as errors (host, cross, Makefile, CMake)."""

C_STD_FLAGS = C_STANDARD + WARNING_FLAGS
"""Standard and warnings: what every compiler command line of the library starts with."""

TRAIN_FLAGS = ["-ffp-contract=off"]
"""What a training library adds: no fused multiply-add, so every float32 operation of the QAS
update and the BP-QAS errors rounds where the simulator rounds (docs/integer-semantics.md 11)."""

HOST_SANITIZE = ["-fsanitize=address,undefined,float-cast-overflow", "-fno-sanitize-recover=all",
                 "-fno-omit-frame-pointer"]
"""Host sanitizers: ASan, UBSan and float-cast-overflow (a float-to-int cast out of range, e.g. of
inf or NaN, is undefined behaviour that plain -fsanitize=undefined does not check)."""
