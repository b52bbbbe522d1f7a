"""The ARMv6-M twins' float32 arithmetic (m0/mt_m0_f32.h) equals IEEE float32 bit for bit: the
product of a float32 and a small integer then the add (mt_m0_f32_run, both rounded to nearest
even), the add of two sums (mt_m0_f32_add) and the product of two float32 (mt_m0_f32_mul_fast), on
millions of random and adversarial operands (ties of both roundings, carries out of the
significand, exact and near cancellation, zeros, subnormals, infinities, NaNs, overflow and
underflow), against the host's float32 operations; and the BP-QAS kernels built from them
(conv/linear input error and weight gradient rows, the QAS update in both rounding modes) equal
their reference kernels on tensors that are mostly 0.0, as behind ReLU and max pool. The host runs
the same C the Cortex-M0+ compiles. NaN results compare as NaN: which NaN an operation with two NaN
operands returns is not fixed by C (a compiler may swap the operands of +)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from conftest import needs_gcc
from mcutrain.buildflags import HOST_SANITIZE
from mcutrain.codegen.runtime_files import RUNTIME_DIR, runtime_files
from mcutrain.mcu.hostbuild import find_host_cc

pytestmark = needs_gcc

DRIVERS = Path(__file__).parent / "drivers"

KERNELS = ("mt_conv2d_bwd_w_row_s8_f32", "mt_conv2d_bwd_in_s8_f32", "mt_linear_bwd_in_s8_f32",
           "mt_linear_bwd_w_row_s8_f32", "mt_qas_upd_s8_f32")
"""The m0/ twins built on mt_m0_f32.h, each compared with its reference kernel."""


def _runtime(tmp_path: Path) -> Path:
    rt = tmp_path / "rt"
    rt.mkdir()
    for name, text in runtime_files("ref", training=True).items():
        (rt / name).write_text(text)
    return rt


def _run(exe: Path, n: int, seed: int) -> dict[str, int]:
    out = subprocess.run([str(exe), str(n), str(seed)], capture_output=True, text=True, check=True).stdout
    *lines, last = out.splitlines()    # mismatches, then the counts "name value ..."
    words = last.split()
    return {**{key: int(val) for key, val in zip(words[::2], words[1::2])}, "lines": len(lines)}


def test_the_float32_operations_equal_ieee_float32(tmp_path):
    exe = tmp_path / "ops"
    subprocess.run([find_host_cc(), "-std=c99", "-O2", "-ffp-contract=off", "-DMT_M0_F32_SOFT=1",
                    f"-I{RUNTIME_DIR / 'm0'}",
                    f"-I{RUNTIME_DIR / 'include'}", str(DRIVERS / "m0_f32_ops.c"), "-o", str(exe)],
                   check=True)
    r = _run(exe, 60000, 11)      # about 1.5 million terms, 60000 adds and products
    assert r["bad"] == 0 and r["lines"] == 0
    assert r["terms"] > 1_000_000 and r["mac_fast"] > r["terms"] // 3, "most terms take the integer path"
    assert r["mul_fast"] > r["products"] // 3, "most products take the integer path"


@pytest.mark.parametrize("soft", [1, 0])
def test_the_m0_bp_qas_kernels_equal_the_reference_kernels(tmp_path, soft):
    """soft 1: the integer sums (a core without float32 hardware); 0: the core's float32 (RV32 F)."""
    rt = _runtime(tmp_path)
    cc, flags = find_host_cc(), ["-std=c99", "-Wall", "-Wextra", "-Werror", "-O1", "-ffp-contract=off",
                                 f"-DMT_M0_F32_SOFT={soft}",
                                 *HOST_SANITIZE, f"-I{rt}", f"-I{RUNTIME_DIR / 'm0'}"]
    objs = []
    for name in KERNELS:
        obj = tmp_path / f"{name}_m0.o"
        subprocess.run([cc, *flags, f"-D{name}=m0{name[2:]}", "-c", str(RUNTIME_DIR / "m0" / f"{name}.c"),
                        "-o", str(obj)], check=True)
        objs.append(str(obj))
    exe = tmp_path / "k"
    sources = [str(rt / n) for n in (*[f"{k}.c" for k in KERNELS], "mt_xorshift32.c")]
    subprocess.run([cc, *flags, str(DRIVERS / "m0_f32_kernels.c"), *sources, *objs, "-o", str(exe)],
                   check=True)
    r = _run(exe, 300, 1)
    assert r["bad"] == 0 and r["lines"] == 0
    assert r["compared"] > 100_000
