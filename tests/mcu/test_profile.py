"""Exact instruction counts, checked against counts predicted from the disassembly."""

import re

import numpy as np
import pytest

from mcutrain.mcu.disasm import load_disassembly
from mcutrain.mcu.profile import count_instructions

from .conftest import CORES


def _loop_shape(elf, name: str) -> tuple[int, int, int]:
    """(before, body, after) instruction counts of a function with one loop (one conditional
    backward branch, or an Armv8.1-M loop end LE; an unconditional backward jump to shared exit
    code is not a loop)."""
    dis = load_disassembly(elf)
    lo, hi = dis.symbol(name)
    sel = (dis.address >= lo) & (dis.address < hi)
    addrs = dis.address[sel]
    mnems = [m for m, s in zip(dis.mnemonic, sel) if s]
    ops = [o for o, s in zip(dis.operands, sel) if s]
    back = []
    for i, (m, o) in enumerate(zip(mnems, ops)):
        t = re.search(r"([0-9a-f]+) <", o)
        conditional = (m.startswith(("b", "cb")) and m not in ("b", "bl", "blx", "bx")) or m in ("le", "letp")
        if conditional and t and lo <= int(t.group(1), 16) < int(addrs[i]):
            back.append((i, int(t.group(1), 16)))
    assert len(back) == 1, f"{name}: expected one loop, found backward branches {back}"
    i_branch, target = back[0]
    i_target = int(np.flatnonzero(addrs == target)[0])
    return i_target, i_branch - i_target + 1, len(addrs) - i_branch - 1


def _between_markers(elf) -> int:
    """Instructions of main after `bl mt_mark_begin` up to and including `bl mt_mark_end`."""
    dis = load_disassembly(elf)
    lo, hi = dis.symbol("main")
    calls = [i for i, (a, m, o) in enumerate(zip(dis.address, dis.mnemonic, dis.operands))
             if lo <= a < hi and m == "bl"]
    begin = [i for i in calls if "<mt_mark_begin>" in dis.operands[i]]
    end = [i for i in calls if "<mt_mark_end>" in dis.operands[i]]
    assert len(begin) == len(end) == 1
    return end[0] - begin[0]


def _write_input(path, n: int) -> None:
    rng = np.random.default_rng(n)
    path.write_bytes(rng.integers(-128, 128, 2 * n, dtype=np.int64).astype(np.int8).tobytes())


@pytest.mark.parametrize("core", CORES)
def test_counts_equal_prediction_from_disassembly(dot_elfs, tmp_path, core):
    elf = dot_elfs[core]
    before, body, after = _loop_shape(elf, "mt_count_loop")
    assert (before, body, after) == (1, 3, 2)
    n_loop = 100_000
    profiles = {}
    for length in (64, 1064):
        _write_input(tmp_path / f"in{length}.bin", length)
        p = count_instructions(elf, core, [f"in{length}.bin", "out.txt", str(n_loop)], cwd=tmp_path)
        assert p.exit_code == 0, p.stdout
        profiles[length] = p
    p = profiles[64]
    # The hand-written loop: exact absolute count, in the whole run and in the marked region.
    expect_loop = before + body * n_loop + after
    assert p.per_function["mt_count_loop"] == expect_loop
    in_main = _between_markers(elf)  # straight-line code around the call: 3..6 instructions
    assert p.region.per_function == {"mt_count_loop": expect_loop, "main": in_main}
    assert p.region.total == expect_loop + in_main and p.n_regions == 1
    assert p.region.per_mnemonic["adds"] == n_loop and p.region.per_mnemonic["bne"] == n_loop
    # The C dot product: 1000 more elements cost exactly 1000 loop bodies.
    _, dot_body, _ = _loop_shape(elf, "mt_dot_s8")
    extra = profiles[1064].per_function["mt_dot_s8"] - p.per_function["mt_dot_s8"]
    assert extra == 1000 * dot_body
    # The breakdowns add up to the total.
    assert sum(p.per_function.values()) == p.total == sum(p.per_mnemonic.values())
    assert sum(p.per_address.values()) == p.total


def test_dsp_intrinsic_executes_smlad(dot_elfs, tmp_path):
    _write_input(tmp_path / "in.bin", 100)
    for core in ("cortex-m4", "cortex-m7"):
        p = count_instructions(dot_elfs[core], core, ["in.bin", "out.txt", "1"], cwd=tmp_path)
        assert p.per_mnemonic["smlad"] == 50  # 100 int8 products, two per instruction
        assert p.per_mnemonic["sxtb16"] == 100
    p = count_instructions(dot_elfs["cortex-m0plus"], "cortex-m0plus", ["in.bin", "out.txt", "1"],
                           cwd=tmp_path)
    assert "smlad" not in p.per_mnemonic and "mt_dot_s8_smlad" not in p.per_function


def test_program_without_markers_has_no_region(arm_tools, tmp_path):
    from mcutrain.mcu.toolchain import build
    src = tmp_path / "p.c"
    src.write_text("int main(void)\n{\n    return 7;\n}\n")
    elf = build([src], "cortex-m0plus", tmp_path / "p.elf", startup=True).elf
    p = count_instructions(elf, "cortex-m0plus")
    # The markers are linked (startup.c) but never called: no region, exit code passes through.
    assert p.exit_code == 7 and p.region is None and p.n_regions == 0
    assert p.per_function["Reset_Handler"] > 0 and p.per_function["main"] == 2
