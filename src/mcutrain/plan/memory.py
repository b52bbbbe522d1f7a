"""RAM, Flash and MACs of one training step on a target: the planner's accounting.

RAM = the arena (its size from the greedy plan, or a ZO/BP-QAS library's inference arena where
that is larger; at its busiest step split by role: input, kept activations, transient
activations, errors, gradient buffers, ZO copies and query tensors, scratch) + trainable weights
and biases moved to RAM + method state (EMA ranges, standardization statistics, RNG and
counters, momentum) + a stack allowance.

Flash = frozen weights and biases + the initial values of the trainable ones (the load image
of initialized RAM data lives in Flash) + requantization constants + code. Code is an
**estimate** until an image is built: the sum, over the distinct kernels the schedule calls, of
their sizes from `KERNEL_CODE_BYTES` (measured once with `arm-none-eabi-size` on the C runtime
objects, `-Os`, Cortex-M7) or `UNMEASURED_KERNEL_BYTES` for kernels the runtime does not have
yet, plus `CALL_SITE_BYTES` per kernel call in the generated step function.

Example:
    >>> from mcutrain import zoo
    >>> from mcutrain.plan.schedules import build_schedule
    >>> r = account(build_schedule(zoo.build("digits-cnn"), "fqt", trainable="last:1"), "cortex-m4")
    >>> r.fits, r.breakdown["ram"]["arena"]
    (True, 5700)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mcutrain.plan.schedule import Role, Schedule
from mcutrain.plan.training import TrainingPlan, plan_training
from mcutrain.targets import Target, get_target

STACK_ALLOWANCE = 8 * 1024
"""Stack reserved in RAM; the same 8 KB the cross-build's linker script reserves."""

KERNEL_CODE_BYTES: dict[str, int] = {
    # .text bytes of the runtime's C kernels (arm-none-eabi-gcc -Os -mcpu=cortex-m7 -mthumb, one
    # object per kernel; docs/planner.md gives the command). conv2d_fwd includes the shared GEMM.
    "conv2d_fwd": 1364 + 2500, "depthwise_conv2d_fwd": 644, "linear_fwd": 520, "add_fwd": 268,
    "relu_fwd": 50, "relu6_fwd": 50, "maxpool_fwd": 310, "avgpool_fwd": 344, "global_avgpool_fwd": 158,
    "flatten_fwd": 0, "reshape": 0, "softmax_ce": 1354 + 320, "conv2d_bwd_in": 544,
    "depthwise_conv2d_bwd_in": 544, "conv2d_bwd_w": 610, "linear_bwd_in": 132, "linear_bwd_w": 210,
    "maxpool_bwd": 478, "avgpool_bwd": 350, "global_avgpool_bwd": 112, "relu_bwd": 64, "relu6_bwd": 64,
    "add_bwd": 100, "requant_bwd": 136 + 84, "qas_update": 580 + 536 + 60 + 38 + 326,
    "zo_perturb_wp": 198 + 100, "zo_perturb_np": 100 + 100, "zo_accumulate_wp": 94 + 248 + 468,
    "zo_accumulate_np": 156 + 46, "zero": 0, "error_copy": 0,
    "conv2d_bwd_w_qas_update": 610 + 580 + 536 + 60 + 38 + 326,
    "linear_bwd_w_qas_update": 210 + 580 + 536 + 60 + 38 + 326,
    "conv2d_bwd_w_sgd_update": 536 + 44, "linear_bwd_w_sgd_update": 140 + 44,
}
"""Measured .text bytes per kernel op of the schedules (sums where an op calls several C functions)."""

UNMEASURED_KERNEL_BYTES = 600
"""Estimate for a kernel the C runtime does not have yet (FQT's uint8/float kernels, its update
with standardization, EMA updates, ZO masks): about a measured backward kernel's size."""

CALL_SITE_BYTES = 32
"""Generated code per kernel call: loading a parameter struct and the buffer pointers."""

RAM_LABELS = {
    Role.INPUT: "input", Role.KEPT: "kept activations", Role.ACTIVATION: "transient activations",
    Role.LOGITS: "logits and losses", Role.ERROR: "errors", Role.GRADIENT: "gradient buffers",
    Role.PERTURBED: "zo perturbed copies", Role.QUERY: "zo query activations", Role.SCRATCH: "scratch",
}


def code_bytes(s: Schedule) -> tuple[int, dict[str, int]]:
    """Estimated code bytes of the schedule and the per-op table it used."""
    ops = sorted({k.op for k in s.kernels})
    table = {op: KERNEL_CODE_BYTES.get(op, UNMEASURED_KERNEL_BYTES) for op in ops}
    return sum(table.values()) + CALL_SITE_BYTES * len(s.kernels), table


@dataclass
class MemoryReport:
    """What `mcutrain plan` prints: RAM, Flash, MACs, fits or not."""

    target: Target
    ram_bytes: int
    flash_bytes: int
    fits: bool
    breakdown: dict[str, Any]
    macs_per_step: dict[str, Any]
    plan: TrainingPlan = field(repr=False)
    suggestion: dict[str, Any] | None = None

    @property
    def schedule(self) -> Schedule:
        return self.plan.schedule

    def to_json(self) -> dict[str, Any]:
        """Exactly the keys of `mcutrain plan --json`."""
        return {"target": self.target.name, "ram_bytes": self.ram_bytes, "flash_bytes": self.flash_bytes,
                "ram_limit": self.target.ram_bytes, "flash_limit": self.target.flash_bytes,
                "fits": self.fits, "breakdown": self.breakdown, "macs_per_step": self.macs_per_step,
                "suggestion": self.suggestion}


def arena_at_peak(plan: TrainingPlan) -> tuple[int, dict[str, int]]:
    """The step with the most live arena bytes and those bytes per role label."""
    live = plan.live_bytes()
    step = max(range(len(live)), key=lambda i: live[i]) if live else 0
    out: dict[str, int] = {}
    for st in plan.live_at(step):
        label = RAM_LABELS[plan.schedule.tensors[st.tensors[0]].role]
        out[label] = out.get(label, 0) + st.size
    return step, out


def fits_target(ram_bytes: int, flash_bytes: int, target: Target) -> bool:
    """Whether a step of `ram_bytes` RAM and `flash_bytes` Flash fits `target`: the one decision
    `plan` reports, `export` and `run` refuse on (`plan.budget`), and the report's fits column shows."""
    return ram_bytes <= target.ram_bytes and flash_bytes <= target.flash_bytes


def account(s: Schedule, target: str | Target, plan: TrainingPlan | None = None) -> MemoryReport:
    """RAM/Flash/MACs of schedule `s` on `target` (plans the arena unless `plan` is given)."""
    t = get_target(target)
    plan = plan or plan_training(s)
    resident = s.resident_bytes()
    # ZO/BP-QAS libraries run `model_predict` in the same arena: the larger of the two is linked
    ram = {"arena": max(plan.arena_bytes, s.predict_arena_bytes),
           "trainable weights and biases": resident["weight"], "method state": resident["state"],
           "stack allowance": STACK_ALLOWANCE}
    code, table = code_bytes(s)
    frozen = sum(v for k, v in s.frozen_bytes.items() if not k.endswith(".requant"))
    consts = sum(v for k, v in s.frozen_bytes.items() if k.endswith(".requant"))
    flash = {"frozen weights and biases": frozen, "trainable initial values": resident["weight"],
             "quantization constants": consts, "code (estimate)": code}
    step, by_role = arena_at_peak(plan)
    peak_kernel = s.kernels[step] if s.kernels else None
    ram_total, flash_total = sum(ram.values()), sum(flash.values())
    breakdown = {
        "ram": ram, "flash": flash,
        "arena_at_peak": {"step": step, "kernel": peak_kernel.name if peak_kernel else "",
                          "live_bytes": sum(by_role.values()), "by_role": by_role},
        "method": s.method, "trainable": list(s.trainable), "batch": s.batch,
        "samples_per_pass": s.options.get("samples_per_pass", s.batch),
        "options": {k: v for k, v in s.options.items() if k != "samples_per_pass"},
        "code_table": table,
    }
    phases = s.macs_by_phase()
    macs = {**phases, "total": sum(phases.values()), "per_node": s.macs_by_node()}
    fits = fits_target(ram_total, flash_total, t)
    return MemoryReport(t, ram_total, flash_total, fits, breakdown, macs, plan)


def kb(n: int) -> str:
    return f"{n / 1024:,.1f} KB"


def format_report(r: MemoryReport) -> str:
    """A readable breakdown table (what `mcutrain plan` prints without --json)."""
    b, t = r.breakdown, r.target
    per = "one sample at a time (FQT accumulates per-sample gradients)" if b["method"] == "fqt" \
        else f"{b['samples_per_pass']} sample(s) per pass, as the simulator runs the batch"
    lines = [f"{b['method']} on {r.schedule.model}, batch {b['batch']}: {per}",
             f"trainable: {len(b['trainable'])} layer(s)" + (f" ({', '.join(b['trainable'][:6])}"
                                                            f"{', ...' if len(b['trainable']) > 6 else ''})"
                                                            if b["trainable"] else ""),
             "", f"{'RAM':<34}{'bytes':>12}{'':>4}"]
    for k, v in b["ram"].items():
        lines.append(f"  {k:<32}{v:>12,}  {kb(v):>10}")
    peak = b["arena_at_peak"]
    lines.append(f"    arena at its busiest step ({peak['kernel']}):")
    for k, v in sorted(peak["by_role"].items(), key=lambda kv: -kv[1]):
        lines.append(f"      {k:<30}{v:>12,}  {kb(v):>10}")
    lines.append(f"  {'total':<32}{r.ram_bytes:>12,}  {kb(r.ram_bytes):>10}   of {kb(t.ram_bytes)} "
                 f"({100 * r.ram_bytes / t.ram_bytes:.0f}%)")
    lines += ["", "Flash"]
    for k, v in b["flash"].items():
        lines.append(f"  {k:<32}{v:>12,}  {kb(v):>10}")
    lines.append(f"  {'total':<32}{r.flash_bytes:>12,}  {kb(r.flash_bytes):>10}   of {kb(t.flash_bytes)} "
                 f"({100 * r.flash_bytes / t.flash_bytes:.0f}%)")
    lines += ["", "MACs per step"]
    for k in ("forward", "loss", "error", "weight_grad", "update", "query", "total"):
        if r.macs_per_step.get(k):
            lines.append(f"  {k:<32}{r.macs_per_step[k]:>16,}")
    verdict = "fits" if r.fits else "does NOT fit"
    lines += ["", f"{verdict} {t.name} ({t.core}, {kb(t.ram_bytes)} RAM, {kb(t.flash_bytes)} Flash)"]
    return "\n".join(lines)
