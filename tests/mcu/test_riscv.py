"""RISC-V on QEMU `virt`: cross build with picolibc, semihosting argv/files/stdio/exit status,
traps, link overflow for a small board, exact instruction counts and the cycle model."""

from __future__ import annotations

import numpy as np
import pytest

from mcutrain.buildflags import core_flags, link_flags
from mcutrain.mcu import toolchain
from mcutrain.mcu.cycles import TIMINGS, classify_riscv, estimate_cycles
from mcutrain.mcu.disasm import load_disassembly
from mcutrain.mcu.profile import count_instructions
from mcutrain.mcu.qemu import qemu_command, run_elf
from mcutrain.mcu.toolchain import LinkOverflowError, ToolchainMissingError, build, elf_arch, linker_script
from mcutrain.targets import Target, TargetError, get_target

from .conftest import PROGRAMS

CORE = "rv32imc"


@pytest.fixture(scope="module")
def dot_elf(riscv_tools, tmp_path_factory):
    return build([PROGRAMS / "dot.c"], CORE, tmp_path_factory.mktemp("rv") / "dot.elf").elf


def _vectors(n: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(n)
    return tuple(rng.integers(-128, 128, n, dtype=np.int64).astype(np.int8) for _ in range(2))


def test_boards_and_flags():
    c3 = get_target("esp32c3")
    assert (c3.core, c3.arch, c3.ram_bytes, c3.clock_hz, c3.fpu, c3.dsp) == \
        ("rv32imc", "riscv", 400 * 1024, 160_000_000, False, False)
    assert get_target("rp2350-riscv").core == "rv32imac" and get_target("gd32vf103").ram_bytes == 32 * 1024
    assert core_flags(c3) == ["-march=rv32imc", "-mabi=ilp32"]
    assert "--specs=picolibc.specs" in link_flags(c3) and "--oslib=semihost" in link_flags(c3)
    assert get_target("cortex-m4").arch == "arm"
    with pytest.raises(TargetError, match="no FPU"):
        Target("bad", "rv32imc", 1, 1024, 1024, True, False, "virt")
    with pytest.raises(TargetError, match="cannot run"):
        Target("bad", "rv32imc", 1, 1024, 1024, False, False, "mps2-an386")


def test_linker_script_and_qemu_command():
    s = linker_script(get_target("esp32c3"), stack_bytes=4096, heap_bytes=2048)
    assert "FLASH (rx)  : ORIGIN = 0x80000000, LENGTH = 4194304" in s
    assert "RAM   (rwx) : ORIGIN = 0x80400000, LENGTH = 409600" in s
    assert "__global_pointer$ = . + 0x800" in s and "${" not in s
    cmd = qemu_command("p.elf", CORE, ["a"])
    assert cmd[0].endswith("qemu-system-riscv32") and cmd[cmd.index("-machine") + 1] == "virt"
    assert cmd[cmd.index("-bios") + 1] == "none"


def test_missing_tools_say_what_to_install(monkeypatch):
    monkeypatch.setattr(toolchain.shutil, "which", lambda name: None)
    with pytest.raises(ToolchainMissingError, match="gcc-riscv64-unknown-elf picolibc-riscv64-unknown-elf"):
        toolchain.find_toolchain("riscv")


def test_guest_reads_files_prints_and_exits(dot_elf, tmp_path):
    a, b = _vectors(1000)
    (tmp_path / "in.bin").write_bytes(a.tobytes() + b.tobytes())
    r = run_elf(dot_elf, CORE, ["in.bin", "out.txt", "10"], cwd=tmp_path, timeout=30)
    assert r.exit_code == 0, r.stdout + r.stderr
    assert "len=1000 loops=10" in r.stdout and r.stderr == ""   # printf reaches QEMU's stdout
    expect = int(np.dot(a.astype(np.int32), b.astype(np.int32)))
    assert (tmp_path / "out.txt").read_text().split() == [f"dot={expect}"]
    r = run_elf(dot_elf, CORE, ["missing.bin", "out.txt", "1"], cwd=tmp_path)
    assert r.exit_code == 3 and "cannot open missing.bin" in r.stdout
    r = run_elf(dot_elf, CORE, [], cwd=tmp_path)
    assert r.exit_code == 2 and r.stdout.startswith("usage")
    assert elf_arch(dot_elf) == "riscv"


def test_trap_exits_with_message(riscv_tools, tmp_path):
    src = tmp_path / "trap.c"
    src.write_text("int main(void)\n{\n    __asm__ volatile(\"unimp\");\n    return 0;\n}\n")
    elf = build([src], CORE, tmp_path / "trap.elf").elf
    r = run_elf(elf, CORE, timeout=10)
    assert r.exit_code == 1 and "CPU trap" in r.stderr  # SYS_WRITE0 goes to the console: stderr


def test_an_image_too_big_for_the_board_does_not_link(riscv_tools, tmp_path):
    src = tmp_path / "big.c"
    src.write_text("#include <stdint.h>\nstatic volatile uint8_t big[40 * 1024];\n"
                   "int main(int argc, char **argv)\n{\n    (void)argv;\n    return big[argc];\n}\n")
    with pytest.raises(LinkOverflowError) as e:
        build([src], "gd32vf103", tmp_path / "big.elf")
    assert e.value.region == "RAM" and e.value.overflow_bytes > 8 * 1024
    assert build([src], "esp32c3", tmp_path / "ok.elf").sizes.bss >= 40 * 1024


def test_counts_are_exact_and_the_cycle_model_charges_each_class(dot_elf, tmp_path):
    a, b = _vectors(64)
    (tmp_path / "in.bin").write_bytes(a.tobytes() + b.tobytes())
    dis = load_disassembly(dot_elf)
    assert set(dis.size.tolist()) == {2, 4}          # RV32IMC: compressed and full-width instructions
    lo, hi = dis.symbol("mt_count_loop")
    body = [m for a_, m in zip(dis.address, dis.mnemonic) if lo <= a_ < hi]
    assert len(body) == 6 and body[3] == "bnez"
    runs = {n: count_instructions(dot_elf, CORE, ["in.bin", "out.txt", str(n)], cwd=tmp_path)
            for n in (1000, 2000)}
    assert runs[1000].per_function["mt_count_loop"] == 3 * 1000 + 3
    extra = runs[2000].region.total - runs[1000].region.total
    assert extra == 3 * 1000 and runs[1000].n_regions == 1
    est = {n: estimate_cycles(p.region, "esp32c3", p.elf) for n, p in runs.items()}
    c = TIMINGS[CORE].cycles
    # 1000 more iterations: two ALU instructions and one taken branch each
    per_iteration = 2 * c["alu"] + c["branch_taken"]
    assert est[2000].est_cycles - est[1000].est_cycles == pytest.approx(1000 * per_iteration)
    assert est[1000].instructions_per_class["branch_not_taken"] == 1


@pytest.mark.parametrize(("mnemonic", "cls"), [
    ("add", "alu"), ("lui", "alu"), ("mul", "mul"), ("mulh", "mul_long"), ("divu", "div"),
    ("lbu", "load"), ("sw", "store"), ("bnez", "branch"), ("bgeu", "branch"), ("j", "branch"),
    ("jal", "call"), ("ret", "indirect_branch"), ("jalr", "indirect_branch"), ("fmadd.s", "fp_mac"),
    ("flw", "fp_load_store"), ("fadd.s", "fp"), ("fence", "barrier"),
])
def test_classify_riscv(mnemonic, cls):
    assert classify_riscv(mnemonic) == cls


def test_rv32imafc_runs_hardware_floats(riscv_tools, tmp_path):
    src = tmp_path / "f.c"
    src.write_text("#include <stdio.h>\nstatic volatile float a = 1.5f;\n"
                   "int main(void)\n{\n    float b = a * a * 4.0f;\n    printf(\"%d\\n\", (int)b);\n"
                   "    return (int)b;\n}\n")
    t = get_target("rv32imafc")
    assert t.fpu and core_flags(t) == ["-march=rv32imafc", "-mabi=ilp32f"]
    elf = build([src], t, tmp_path / "f.elf").elf
    r = run_elf(elf, t, timeout=10)
    assert r.exit_code == 9 and r.stdout == "9\n"   # no trap: the startup turned the FPU on
    assert "fmul.s" in load_disassembly(elf).mnemonic
