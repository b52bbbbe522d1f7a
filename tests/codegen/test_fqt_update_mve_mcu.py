"""The Helium (MVE) twin of the FQT int8 update (`mve/mt_fqt_upd_s8.c`) on an emulated Cortex-M55
(QEMU mps3-an547), byte for byte against the portable reference on the same core: one seeded
driver (`drivers/fqt_update.c`) over row lengths 1 to 33 (every tail of the four-slot passes) and
the rows that reach the twin's checks (subnormal and near-subnormal scales and means, sd == 0,
skipped rows). The whole steps of `test_mve_fqt_mcu.py` run it on real layers. Needs the ARM cross
toolchain and QEMU."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcutrain.codegen.runtime_files import MVE_FOLDER, runtime_files, runtime_paths
from mcutrain.mcu import count_instructions
from mcutrain.mcu.qemu import run_elf
from mcutrain.mcu.toolchain import build

pytestmark = pytest.mark.slow  # two QEMU runs and a profiled one

CORE = "cortex-m55"
DRIVER = Path(__file__).parent / "drivers" / "fqt_update.c"


@pytest.fixture(scope="module")
def elfs(arm_tools, tmp_path_factory) -> dict[str, Path]:
    """The driver against the reference (MT_KERNELS_REF) and against the Helium runtime."""
    tmp = tmp_path_factory.mktemp("fqt_update")
    rt = tmp / "rt"
    rt.mkdir()
    assert runtime_paths("dsp", training=True, helium=True)["mt_fqt_upd_s8.c"].parent.name == MVE_FOLDER
    for name, text in runtime_files("dsp", training=True, helium=True).items():
        (rt / name).write_text(text)
    srcs = [DRIVER, rt / "mt_fqt_upd_s8.c"]
    builds = (("ref", ["MT_KERNELS_REF"]), ("mve", []))
    return {k: build(srcs, CORE, tmp / f"{k}.elf", include_dirs=[rt], defines=d).elf for k, d in builds}


def test_the_mve_update_is_bit_exact_with_the_reference(elfs):
    ref, mve = (run_elf(elfs[k], CORE, timeout=120) for k in ("ref", "mve"))
    assert ref.exit_code == 0 and mve.exit_code == 0, ref.stderr + mve.stderr
    assert ref.stdout.count("status 0") == 13 * 7, "every call ran"
    for a, b in zip(ref.stdout.splitlines(), mve.stdout.splitlines(), strict=True):
        assert a == b


def test_the_mve_update_runs_fewer_instructions(elfs):
    """The vector passes ran (inlined into mt_fqt_upd_s8; the scalar row heads are their own functions)."""
    ref, mve = (count_instructions(elfs[k], CORE).per_function["mt_fqt_upd_s8"] for k in ("ref", "mve"))
    assert mve < ref
