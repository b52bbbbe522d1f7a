"""The exported CMakeLists.txt: -O2 unless told otherwise, and cmake/arm-none-eabi.cmake
cross-compiles the library for the export's core (the flags read back from CMake's own
compile_commands.json, the objects from the archive)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from mcutrain import zoo
from mcutrain.buildflags import CROSS_OPT, core_flags
from mcutrain.codegen.build_files import TOOLCHAIN_FILE, toolchain_path
from mcutrain.codegen.library import export_library
from mcutrain.engines import ptq
from mcutrain.targets import get_target

needs_cmake = pytest.mark.skipif(shutil.which("cmake") is None,
                                 reason="cmake is not installed: 'make test' installs it as root "
                                        "(scripts/install-sysdeps.sh), else apt-get install cmake")


def _export(tmp_path: Path, target: str = "nrf52840") -> Path:
    g = zoo.build("digits-cnn", seed=0)
    qm = ptq.quantize_model(g, np.random.default_rng(0).random((8, *g.input_shape), dtype=np.float32))
    export_library(qm, tmp_path / "lib", kernels="dsp", target=target)
    return tmp_path / "lib"


def _configure_and_build(lib: Path, build: Path, *options: str) -> list[str]:
    subprocess.run(["cmake", "-S", str(lib), "-B", str(build), "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON",
                    *options], check=True, capture_output=True, timeout=300)
    subprocess.run(["cmake", "--build", str(build), "-j", "2"], check=True, capture_output=True, timeout=600)
    commands = json.loads((build / "compile_commands.json").read_text())
    return [c["command"] for c in commands if "/harness/" not in c["file"]]   # the library's own


@needs_cmake
def test_cmake_builds_with_o2_by_default_and_takes_another_level(tmp_path):
    lib = _export(tmp_path)
    commands = _configure_and_build(lib, tmp_path / "b")
    assert commands and all(f" {CROSS_OPT} " in c and " -std=c99 " in c for c in commands)
    commands = _configure_and_build(lib, tmp_path / "b-os", "-Dmodel_OPT=-Os")
    assert all(" -Os " in c and f" {CROSS_OPT} " not in c for c in commands)


@needs_cmake
@pytest.mark.skipif(shutil.which("arm-none-eabi-gcc") is None,
                    reason="arm-none-eabi-gcc is not installed: 'make test' installs it as root, else "
                           "apt-get install gcc-arm-none-eabi libnewlib-arm-none-eabi")
@pytest.mark.parametrize("target", ["nrf52840", "cortex-m0plus", "stm32f746", "nrf5340"])
def test_the_toolchain_file_cross_compiles_for_the_exports_core(tmp_path, target):
    lib = _export(tmp_path, target)
    commands = _configure_and_build(lib, tmp_path / "b", f"-DCMAKE_TOOLCHAIN_FILE={lib / TOOLCHAIN_FILE}")
    flags = core_flags(get_target(target))
    assert all(c.startswith(shutil.which("arm-none-eabi-gcc")) and all(f in c.split() for f in flags)
               for c in commands)
    archive = subprocess.run(["arm-none-eabi-objdump", "-f", str(tmp_path / "b" / "libmodel.a")],
                             capture_output=True, text=True, check=True).stdout
    assert "elf32-littlearm" in archive and "x86" not in archive


def test_no_target_no_toolchain_file(tmp_path):
    g = zoo.build("digits-cnn", seed=0)
    qm = ptq.quantize_model(g, np.random.default_rng(0).random((8, *g.input_shape), dtype=np.float32))
    res = export_library(qm, tmp_path / "lib", kernels="ref")
    assert TOOLCHAIN_FILE not in res.files


@needs_cmake
@pytest.mark.skipif(shutil.which("riscv64-unknown-elf-gcc") is None,
                    reason="riscv64-unknown-elf-gcc is not installed: 'make test' installs it as root, else "
                           "apt-get install gcc-riscv64-unknown-elf picolibc-riscv64-unknown-elf")
def test_the_riscv_toolchain_file_cross_compiles_for_rv32imc(tmp_path):
    lib = _export(tmp_path, "esp32c3")
    toolchain = lib / toolchain_path("esp32c3")
    assert toolchain.name == "riscv64-unknown-elf.cmake" and not (lib / TOOLCHAIN_FILE).exists()
    commands = _configure_and_build(lib, tmp_path / "b", f"-DCMAKE_TOOLCHAIN_FILE={toolchain}")
    flags = core_flags(get_target("esp32c3"))
    assert all(c.startswith(shutil.which("riscv64-unknown-elf-gcc")) and all(f in c.split() for f in flags)
               for c in commands)
    archive = subprocess.run(["riscv64-unknown-elf-objdump", "-f", str(tmp_path / "b" / "libmodel.a")],
                             capture_output=True, text=True, check=True).stdout
    assert "elf32-littleriscv" in archive and "x86" not in archive
