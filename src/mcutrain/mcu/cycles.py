"""Instruction-mix cycle model: estimated cycles and milliseconds from exact instruction counts.

Each executed instruction is put in a class (ALU, load, MAC, taken branch, ...) and charged that
class's cycles on the target's core, from the processors' technical reference manuals (sources
and caveats in docs/mcu.md; for RISC-V, Hazard3's documented timings). It ignores wait states,
bus contention, cache misses and pipeline interlocks beyond what the TRM tables state, so every
result is an *estimate* and is named so (`est_cycles`, `est_ms`).

Conditional branches: the counts say how often a branch ran, not how often it was taken. We
estimate the not-taken count as the count of the fall-through instruction (capped at the
branch's count), which is exact for loop-closing branches whose exit is only reached by falling
through, and an upper bound on "not taken" otherwise.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mcutrain.mcu.disasm import Disassembly, load_disassembly
from mcutrain.mcu.profile import Counts, Profile
from mcutrain.targets import Target, core_arch, get_target

CLASSES = ("alu", "mul", "mac", "mul_long", "div", "dsp", "load", "store", "load_multiple",
           "branch_taken", "branch_not_taken", "call", "indirect_branch", "fp", "fp_mac", "fp_div",
           "fp_load_store", "barrier", "other", "mve", "mve_load_store")


@dataclass(frozen=True)
class CoreTiming:
    """Cycles per instruction class for one core; `per_register` is the N in LDM/STM/PUSH/POP 1+N."""

    core: str
    cycles: dict[str, float]
    per_register: float
    pop_pc_extra: float
    source: str


_P = 2.0  # Cortex-M4 pipeline refill after a taken branch: 1..3 cycles per its TRM; we take the middle.

_M4_CYCLES = dict(alu=1, mul=1, mac=1, mul_long=1, div=7, dsp=1, load=2, store=2, load_multiple=1,
                  branch_taken=1 + _P, branch_not_taken=1, call=1 + _P, indirect_branch=1 + _P, fp=1,
                  fp_mac=3, fp_div=14, fp_load_store=2, barrier=1 + _P, other=1)
"""Cortex-M4 TRM Table 3-1 and FPU Table 7-1; the M33 is charged the same (see its `source`)."""

TIMINGS: dict[str, CoreTiming] = {
    "cortex-m0plus": CoreTiming(
        "cortex-m0plus",
        dict(alu=1, mul=1, mac=2, mul_long=1, div=1, dsp=1, load=2, store=2, load_multiple=1,
             branch_taken=2, branch_not_taken=1, call=3, indirect_branch=2, fp=1, fp_mac=1, fp_div=1,
             fp_load_store=2, barrier=3, other=1),
        per_register=1, pop_pc_extra=2,
        source="Arm Cortex-M0+ TRM (DDI 0484C) Table 3.1; single-cycle multiplier"),
    "cortex-m4": CoreTiming(
        "cortex-m4",
        dict(_M4_CYCLES),
        per_register=1, pop_pc_extra=_P,
        source="Arm Cortex-M4 TRM (100166_0001) Table 3-1 and FPU Table 7-1"),
    "cortex-m7": CoreTiming(
        "cortex-m7",
        dict(alu=0.5, mul=0.5, mac=1, mul_long=1, div=7, dsp=0.5, load=1, store=1, load_multiple=0.5,
             branch_taken=2, branch_not_taken=0.5, call=2, indirect_branch=2, fp=1, fp_mac=1, fp_div=14,
             fp_load_store=1, barrier=5, other=1),
        per_register=0.5, pop_pc_extra=1,
        source="approximation: dual-issue 6-stage pipeline with branch prediction (Cortex-M7 TRM, "
               "DDI 0489); Arm publishes no per-instruction cycle table for the M7"),
    "cortex-m33": CoreTiming(
        "cortex-m33",
        dict(_M4_CYCLES),
        per_register=1, pop_pc_extra=_P,
        source="approximation: the Cortex-M4 figures (Arm publishes no per-instruction cycle table "
               "for the M33, TRM 100230; like the M4 it is a 3-stage pipeline with single-cycle "
               "MAC and DSP SIMD); its limited dual issue of 16-bit instructions is not modelled"),
    "cortex-m55": CoreTiming(
        "cortex-m55",
        dict(alu=1, mul=1, mac=1, mul_long=1, div=7, dsp=1, load=1, store=1, load_multiple=1,
             branch_taken=2, branch_not_taken=1, call=2, indirect_branch=2, fp=1, fp_mac=1, fp_div=16,
             fp_load_store=1, barrier=3, other=1, mve=2, mve_load_store=1),
        per_register=0.5, pop_pc_extra=1,
        source="approximation: Cortex-M55 Software Optimization Guide (Arm 102692): 4-stage pipeline, "
               "64-bit loads (two registers per cycle), dual-beat MVE (a 128-bit vector operation "
               "takes two beats; a vector load or store overlaps the beats of a neighbouring "
               "operation, charged one); a low-overhead loop's LE counted as a branch"),
}

# RISC-V (RV32IMC/IMAC/IMAFC): Hazard3's documented timings (the RP2350's RISC-V core; its
# instruction_timings chapter): 1-cycle ALU and `mul`, loads 1 cycle or 2 when the next instruction
# uses the result (we take 1.5: GEMM loops use most loads at once), taken branch and jal/jalr 2,
# the 2-bit-per-cycle divider 18. Espressif publishes no per-instruction table for the ESP32-C3,
# whose core is also a single-issue in-order pipeline; the same model stands in for it.
_RV = CoreTiming(
    "rv32",
    dict(alu=1, mul=1, mac=1, mul_long=1, div=18, dsp=1, load=1.5, store=1, load_multiple=1,
         branch_taken=2, branch_not_taken=1, call=2, indirect_branch=2, fp=1, fp_mac=1, fp_div=14,
         fp_load_store=1.5, barrier=1, other=1),
    per_register=1, pop_pc_extra=0,
    source="Hazard3 instruction timings (RP2350 RISC-V core; MUL_FAST, MULDIV_UNROLL=2), used for "
           "every RV32 core: an estimate for the ESP32-C3 and GD32VF103, whose vendors publish none")
TIMINGS.update({core: _RV for core in ("rv32imc", "rv32imac", "rv32imafc")})

_RV_CLASS: dict[str, str] = {}
for _names, _cls in (
    ("mul", "mul"), ("mulh mulhu mulhsu", "mul_long"), ("div divu rem remu", "div"),
    ("lb lbu lh lhu lw", "load"), ("sb sh sw", "store"),
    ("flw fsw flwsp fswsp", "fp_load_store"), ("fmadd.s fmsub.s fnmadd.s fnmsub.s", "fp_mac"),
    ("fdiv.s fsqrt.s", "fp_div"), ("fence fence.i", "barrier"),
    ("jal call", "call"), ("jalr jr ret", "indirect_branch"), ("j", "branch"),
    ("beq bne blt bge bltu bgeu beqz bnez blez bgez bltz bgtz bgt ble bgtu bleu", "branch"),
):
    for _n in _names.split():
        _RV_CLASS[_n] = _cls


def classify_riscv(mnemonic: str) -> str:
    """Class of one RISC-V objdump mnemonic (compressed forms print as their base instruction)."""
    m = mnemonic.removeprefix("c.")
    if m in _RV_CLASS:
        return _RV_CLASS[m]
    return "fp" if m.startswith("f") and m not in ("fence", "fence.i") else "alu"


_COND = "eq|ne|cs|hs|cc|lo|mi|pl|vs|vc|hi|ls|ge|lt|gt|le|al"
_BRANCH_RE = re.compile(rf"^b({_COND})?$")
_CBZ_RE = re.compile(r"^cbn?z$")
_LOOP_END_RE = re.compile(r"^le(tp)?$")
"""Armv8.1-M low-overhead loop ends (LE, LETP): conditional backward branches on LR."""
_MVE_LOAD_STORE = frozenset("vldrb vldrh vldrw vldrd vstrb vstrh vstrw vstrd vld20 vld21 vld40 vld41 "
                            "vld42 vld43 vst20 vst21 vst40 vst41 vst42 vst43".split())
_Q_REGISTER = re.compile(r"\bq\d")
"""An operand naming a 128-bit Q register: the instruction is an MVE (Helium) one."""
_CALL_RE = re.compile(rf"^bl({_COND})?$")
_INDIRECT_RE = re.compile(rf"^(blx|bx)({_COND})?$")
_COND_SUFFIX_RE = re.compile(rf"({_COND})$")

_BASE_CLASS: dict[str, str] = {}
for _names, _cls in (
    ("mul", "mul"), ("mla mls smlabb smlabt smlatb smlatt smlad smladx smlsd smlsdx smlawb smlawt "
                     "smmla smmls smmlar smmul smmulr smulbb smulbt smultb smultt smulwb smulwt smuad "
                     "smuadx smusd usada8 usad8", "mac"),
    ("smull umull smlal umlal umaal smlalbb smlalbt smlaltb smlaltt smlald smlaldx smlsld smlsldx",
     "mul_long"),
    ("sdiv udiv", "div"),
    ("sadd16 sadd8 ssub16 ssub8 qadd qsub qadd16 qadd8 qsub16 qsub8 uadd16 uadd8 usub16 usub8 "
     "ssat usat ssat16 usat16 sxtb16 uxtb16 sxtab16 uxtab16 pkhbt pkhtb sel shadd16 shadd8 uhadd16 "
     "uhadd8 qasx qsax sasx ssax uasx usax qdadd qdsub", "dsp"),
    ("ldr ldrb ldrh ldrsb ldrsh ldrd ldrex ldrexb ldrexh ldrt ldrbt ldrht pld", "load"),
    ("str strb strh strd strex strexb strexh strt", "store"),
    ("ldm ldmia ldmfd ldmdb stm stmia stmea stmdb push pop", "load_multiple"),
    ("vadd vsub vmul vnmul vabs vneg vcmp vcmpe vcvt vcvtr vcvta vcvtn vcvtp vcvtm vmov vmrs vmsr "
     "vmaxnm vminnm vrinta vrintn vrintp vrintm vrintx vrintz vrintr vsel", "fp"),
    ("vmla vmls vnmla vnmls vfma vfms vfnma vfnms", "fp_mac"),
    ("vdiv vsqrt", "fp_div"),
    ("vldr vstr vldm vstm vldmia vstmia vldmdb vstmdb vpush vpop", "fp_load_store"),
    ("dmb dsb isb", "barrier"),
):
    for _n in _names.split():
        _BASE_CLASS[_n] = _cls


def classify(mnemonic: str) -> str:
    """Class of one objdump mnemonic (condition codes, `.f32`-style types and the S flag removed)."""
    m = mnemonic.split(".")[0]
    if _BRANCH_RE.match(m) or _CBZ_RE.match(m) or _LOOP_END_RE.match(m):
        return "branch"
    if _CALL_RE.match(m):
        return "call"
    if _INDIRECT_RE.match(m):
        return "indirect_branch"
    for cand in (m, _COND_SUFFIX_RE.sub("", m) if len(m) > 3 else m):
        for c in (cand, cand[:-1] if cand.endswith("s") else cand):
            if c in _BASE_CLASS:
                return _BASE_CLASS[c]
    return "alu" if m and not m.startswith("v") else "fp"


def mve_class(base: str, operands: str, cls: str) -> str:
    """'mve_load_store' or 'mve' for a Helium instruction (a Q register operand, or a VLDRx/VSTRx/
    VLDn/VSTn), `cls` otherwise; only the M55 runs them, other cores charge them as floats."""
    if base in _MVE_LOAD_STORE:
        return "mve_load_store"
    return "mve" if _Q_REGISTER.search(operands) else cls


def _register_count(operands: str) -> int:
    """Registers in a list such as `{r4, r5, r6, lr}` or `{s16-s31}`."""
    m = re.search(r"\{([^}]*)\}", operands)
    if m is None:
        return 1
    n = 0
    for part in m.group(1).split(","):
        lo_hi = re.findall(r"\d+", part)
        n += int(lo_hi[1]) - int(lo_hi[0]) + 1 if "-" in part and len(lo_hi) == 2 else 1
    return n


@dataclass(frozen=True)
class _Static:
    """Per-instruction tables of one binary for one core (see `_static_tables`)."""

    cls: np.ndarray            # class index (CLASSES) of each instruction; branches marked -1
    fixed: np.ndarray          # cycles per execution for non-branch instructions
    is_cond_branch: np.ndarray
    is_uncond_branch: np.ndarray


@functools.lru_cache(maxsize=32)
def _static_tables(dis: Disassembly, core: str) -> _Static:
    t = TIMINGS[core]
    n = len(dis.mnemonic)
    cls = np.empty(n, dtype=np.int64)
    fixed = np.zeros(n, dtype=np.float64)
    cond = np.zeros(n, dtype=bool)
    uncond = np.zeros(n, dtype=bool)
    riscv = core_arch(core) == "riscv"
    for i, (mn, ops) in enumerate(zip(dis.mnemonic, dis.operands)):  # static code, once per binary
        c = classify_riscv(mn) if riscv else classify(mn)
        base = mn.split(".")[0]
        if c.startswith("fp") or base in _MVE_LOAD_STORE:
            c = mve_class(base, ops, c)
        if c == "branch":
            is_cond = base != "j" if riscv else base not in ("b", "bal")
            cond[i], uncond[i], cls[i] = is_cond, not is_cond, -1
            continue
        cls[i] = CLASSES.index(c)
        cyc = t.cycles.get(c, t.cycles["fp"])
        if not riscv and (c == "load_multiple" or (c == "fp_load_store" and "{" in ops)):
            cyc = cyc + t.per_register * _register_count(ops)
            if "pc" in ops and base.startswith(("pop", "ldm")):
                cyc += t.pop_pc_extra
        fixed[i] = cyc
    return _Static(cls, fixed, cond, uncond)


@dataclass(frozen=True)
class CycleEstimate:
    """Estimated cycles of a run or region on one target (an estimate, not a measurement)."""

    target: str
    clock_hz: int
    est_cycles: float
    est_per_class: dict[str, float]
    instructions_per_class: dict[str, int]

    @property
    def est_ms(self) -> float:
        return 1e3 * self.est_cycles / self.clock_hz

    @property
    def est_cpi(self) -> float:
        n = sum(self.instructions_per_class.values())
        return self.est_cycles / n if n else 0.0


def estimate_cycles(counts: Counts | Profile, target: str | Target,
                    elf: str | Path | Disassembly | None = None) -> CycleEstimate:
    """Estimated cycles and ms of `counts` (a Profile or its `.region`) on `target`'s core.

    `elf` (path or loaded disassembly) is needed for a `Counts`; a `Profile` knows its ELF.

    Example:
        >>> est = estimate_cycles(profile.region, "cortex-m4", profile.elf)   # doctest: +SKIP
        >>> est.est_cycles, est.est_ms                                        # doctest: +SKIP
    """
    target = get_target(target)
    if elf is None:
        if not isinstance(counts, Profile) or counts.elf is None:
            raise ValueError("estimate_cycles needs the ELF (or its Disassembly) for plain Counts")
        elf = counts.elf
    dis = elf if isinstance(elf, Disassembly) else load_disassembly(elf)
    st = _static_tables(dis, target.core)
    timing = TIMINGS[target.core]
    per_address = counts.per_address
    addrs = np.fromiter(per_address.keys(), dtype=np.uint64, count=len(per_address))
    cnt = np.fromiter(per_address.values(), dtype=np.int64, count=len(per_address))
    idx = dis.insn_index(addrs)
    known = idx >= 0
    ii, cc = idx[known], cnt[known]
    n_cls = len(CLASSES)
    cyc = np.zeros(n_cls, dtype=np.float64)
    num = np.zeros(n_cls, dtype=np.int64)
    plain = st.cls[ii] >= 0
    np.add.at(cyc, st.cls[ii][plain], st.fixed[ii][plain] * cc[plain])
    np.add.at(num, st.cls[ii][plain], cc[plain])
    # Branches: unconditional ones are always taken; conditional ones use the fall-through count.
    taken_i, not_taken_i = CLASSES.index("branch_taken"), CLASSES.index("branch_not_taken")
    br = ~plain
    b_idx, b_cnt = ii[br], cc[br]
    fall = dis.address[b_idx] + dis.size[b_idx].astype(np.uint64)
    order = np.argsort(addrs)
    pos = np.searchsorted(addrs[order], fall)
    pos_c = np.minimum(pos, len(addrs) - 1)
    hit = (pos < len(addrs)) & (addrs[order][pos_c] == fall)
    fall_cnt = np.where(hit, cnt[order][pos_c], 0)
    not_taken = np.where(st.is_cond_branch[b_idx], np.minimum(fall_cnt, b_cnt), 0)
    taken = b_cnt - not_taken
    num[taken_i] += int(taken.sum())
    num[not_taken_i] += int(not_taken.sum())
    cyc[taken_i] += float(taken.sum()) * timing.cycles["branch_taken"]
    cyc[not_taken_i] += float(not_taken.sum()) * timing.cycles["branch_not_taken"]
    unknown = int(cnt[~known].sum())
    other_i = CLASSES.index("other")
    num[other_i] += unknown
    cyc[other_i] += unknown * timing.cycles["other"]
    return CycleEstimate(
        target=target.name, clock_hz=target.clock_hz, est_cycles=float(cyc.sum()),
        est_per_class={c: float(cyc[i]) for i, c in enumerate(CLASSES) if num[i]},
        instructions_per_class={c: int(num[i]) for i, c in enumerate(CLASSES) if num[i]})
