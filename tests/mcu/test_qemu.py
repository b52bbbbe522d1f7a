import numpy as np
import pytest

from mcutrain.mcu.qemu import QemuError, QemuTimeoutError, qemu_command, run_elf
from mcutrain.mcu.toolchain import build

from .conftest import CORES


def _vectors(seed: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return (rng.integers(-128, 128, n, dtype=np.int64).astype(np.int8),
            rng.integers(-128, 128, n, dtype=np.int64).astype(np.int8))


@pytest.mark.parametrize("core", CORES)
def test_guest_reads_input_and_writes_output_file(dot_elfs, tmp_path, core):
    a, b = _vectors(1, 1000)
    (tmp_path / "in.bin").write_bytes(a.tobytes() + b.tobytes())
    r = run_elf(dot_elfs[core], core, ["in.bin", "out.txt", "10"], cwd=tmp_path, timeout=30)
    assert r.exit_code == 0, r.stdout + r.stderr
    assert "len=1000 loops=10" in r.stdout
    expect = int(np.dot(a.astype(np.int32), b.astype(np.int32)))
    lines = (tmp_path / "out.txt").read_text().split()
    assert lines[0] == f"dot={expect}"
    if core != "cortex-m0plus":  # __smlad runs on the M4 (mps2-an386), M7 (mps2-an500) and M33 (mps2-an505)
        assert lines[1] == f"smlad={expect}"
    else:
        assert len(lines) == 1


def test_exit_codes_pass_through(dot_elfs, tmp_path):
    r = run_elf(dot_elfs["cortex-m4"], "cortex-m4", ["missing.bin", "out.txt", "1"], cwd=tmp_path)
    assert r.exit_code == 3 and "cannot open missing.bin" in r.stdout
    r = run_elf(dot_elfs["cortex-m0plus"], "cortex-m0plus", [], cwd=tmp_path)
    assert r.exit_code == 2 and r.stdout.startswith("usage")


def test_timeout_and_bad_input(arm_tools, tmp_path):
    src = tmp_path / "spin.c"
    src.write_text("int main(void)\n{\n    for (;;) {\n    }\n}\n")
    elf = build([src], "cortex-m4", tmp_path / "spin.elf").elf
    with pytest.raises(QemuTimeoutError, match="did not exit within 1 s"):
        run_elf(elf, "cortex-m4", timeout=1)
    with pytest.raises(QemuError, match="does not exist"):
        run_elf(tmp_path / "nope.elf", "cortex-m4")


def test_guest_arguments_are_checked():
    with pytest.raises(ValueError, match="whitespace"):
        qemu_command("p.elf", "cortex-m4", ["two words"])
    with pytest.raises(ValueError, match="longer than"):
        qemu_command("p.elf", "cortex-m4", ["x" * 2000])
    cmd = qemu_command("p.elf", "cortex-m7", ["a,b"])
    assert cmd[cmd.index("-machine") + 1] == "mps2-an500"
    assert "enable=on,target=native,arg=p.elf,arg=a,,b" in cmd


def test_cpu_fault_exits_with_message(arm_tools, tmp_path):
    src = tmp_path / "fault.c"
    src.write_text("int main(void)\n{\n    __asm__ volatile(\"udf #0\");\n    return 0;\n}\n")
    for core in CORES:
        elf = build([src], core, tmp_path / f"fault-{core}.elf").elf
        r = run_elf(elf, core, timeout=10)
        assert r.exit_code == 1 and "CPU fault" in r.stderr  # SYS_WRITE0 goes to the console: stderr
