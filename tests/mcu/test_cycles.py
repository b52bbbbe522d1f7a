import numpy as np
import pytest

from mcutrain.mcu.cycles import _register_count, classify, estimate_cycles, mve_class
from mcutrain.mcu.disasm import load_disassembly
from mcutrain.mcu.profile import Counts, count_instructions
from mcutrain.targets import get_target


@pytest.mark.parametrize(("mnemonic", "cls"), [
    ("adds", "alu"), ("addne", "alu"), ("bics", "alu"), ("lsls", "alu"), ("cmp", "alu"),
    ("muls", "mul"), ("mla", "mac"), ("smlad", "mac"), ("smlabb", "mac"), ("smull", "mul_long"),
    ("sdiv", "div"), ("sxtb16", "dsp"), ("ssat", "dsp"), ("ldrsb", "load"), ("ldrbeq", "load"),
    ("strh", "store"), ("push", "load_multiple"), ("ldmia", "load_multiple"),
    ("bne", "branch"), ("b", "branch"), ("bls", "branch"), ("cbz", "branch"),
    ("bl", "call"), ("bx", "indirect_branch"), ("blx", "indirect_branch"),
    ("vadd.f32", "fp"), ("vfma.f32", "fp_mac"),
    ("vdiv.f32", "fp_div"), ("vldr", "fp_load_store"), ("dsb", "barrier"),
    ("le", "branch"), ("letp", "branch"),
])
def test_classify(mnemonic, cls):
    assert classify(mnemonic) == cls


@pytest.mark.parametrize(("mnemonic", "operands", "cls"), [
    ("vldrb.s8", "q0, [r0], #16", "mve_load_store"), ("vstrw.32", "q1, [r2]", "mve_load_store"),
    ("vmlava.s8", "r0, q0, q1", "mve"), ("vmul.f32", "q0, q1, q2", "mve"),
    ("vmul.f32", "s0, s1, s2", "fp"), ("vldr", "s0, [r0]", "fp_load_store"),
])
def test_mve_class(mnemonic, operands, cls):
    base = mnemonic.split(".")[0]
    assert mve_class(base, operands, classify(mnemonic)) == cls


def test_register_count():
    assert _register_count("{r4, r5, r6, lr}") == 4
    assert _register_count("{r4-r7, pc}") == 5
    assert _register_count("{s16-s31}") == 16
    assert _register_count("r0, [r1]") == 1


def _loop_counts(elf, profile) -> Counts:
    """The counts of just mt_count_loop (3 instructions per iteration, bne taken n-1 times)."""
    dis = load_disassembly(elf)
    lo, hi = dis.symbol("mt_count_loop")
    per_address = {a: c for a, c in profile.per_address.items() if lo <= a < hi}
    return Counts(sum(per_address.values()), {"mt_count_loop": sum(per_address.values())}, {}, per_address)


@pytest.mark.parametrize(("core", "expect"), [
    # M0+: 2n+2 ALU at 1, n-1 taken branches at 2, 1 not taken at 1, bx at 2      -> 4n + 3
    ("cortex-m0plus", lambda n: 4 * n + 3),
    # M4: ALU at 1, taken branch 1+P with P=2, not taken 1, bx 1+P                -> 5n + 3
    ("cortex-m4", lambda n: 5 * n + 3),
    # M7 (dual issue): ALU at 0.5, taken 2, not taken 0.5, bx 2                   -> 3n + 1.5
    ("cortex-m7", lambda n: 3 * n + 1.5),
    # M33: charged the M4's figures (no per-instruction table published)            -> 5n + 3
    ("cortex-m33", lambda n: 5 * n + 3),
    # M55: ALU at 1, taken 2, not taken 1, bx 2                                     -> 4n + 3
    ("cortex-m55", lambda n: 4 * n + 3),
])
def test_estimate_on_known_loop(dot_elfs, tmp_path, core, expect):
    n = 1000
    (tmp_path / "in.bin").write_bytes(np.zeros(8, dtype=np.int8).tobytes())
    p = count_instructions(dot_elfs[core], core, ["in.bin", "out.txt", str(n)], cwd=tmp_path)
    est = estimate_cycles(_loop_counts(dot_elfs[core], p), core, dot_elfs[core])
    assert est.est_cycles == expect(n)
    assert est.instructions_per_class == {"alu": 2 * n + 2, "branch_taken": n - 1, "branch_not_taken": 1,
                                          "indirect_branch": 1}
    assert est.est_ms == pytest.approx(1e3 * expect(n) / get_target(core).clock_hz)
    whole = estimate_cycles(p, core)  # a Profile knows its ELF
    assert whole.est_cycles > est.est_cycles and sum(whole.instructions_per_class.values()) == p.total
