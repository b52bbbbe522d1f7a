"""The schedule of one training step: ordered kernels and the tensors each reads and writes.

A method's step is a list of kernels (forward, loss, error propagation, weight gradient,
update; ZO perturbations and partial forward passes) in the order the device runs them.
Every tensor a kernel touches is declared once with its shape, dtype and role, so the
planner (`plan.training`) derives lifetimes and arena offsets from it, the accounting
(`plan.memory`) sums bytes per role, and the C generator emits the same kernels in the same
order over the same buffers: one schedule, read by both.

Where in the arena a tensor lives is decided by the planner, except for tensors whose role
is *resident* (trainable weights and biases moved to RAM, method state): they stay for the
whole life of the program and are accounted beside the arena. Frozen weights stay in Flash.

Loops: a kernel may carry `loop` (an id) and `repeat` (its iteration count). The planner
plans one iteration; every tensor a loop body reads but does not write stays alive until the
body's last kernel, so the next iteration still finds it (the ZO queries, FQT's per-sample
loop over a batch).

Example:
    >>> s = Schedule("toy", method="none", batch=1)
    >>> _ = s.tensor("input", (4,), "s8", Role.INPUT), s.tensor("y", (2,), "s8", Role.ACTIVATION)
    >>> _ = s.kernel("fc.fwd", "linear_fwd", "forward", "fc", reads=["input"], writes=["y"], macs=8)
    >>> s.macs_by_phase()["forward"], s.tensors["y"].nbytes
    (8, 2)
"""

from __future__ import annotations

import enum
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from mcutrain.methods.decisions import StepDecisions

DTYPE_BYTES = {"u8": 1, "s8": 1, "s16": 2, "s32": 4, "s64": 8, "f32": 4}
"""Bytes per element of each dtype tag (the CMSIS-style tags of STYLE.md)."""

PHASES = ("forward", "loss", "error", "weight_grad", "update", "query")
"""Kernel phases, in the order a step reports them."""


class Role(str, enum.Enum):
    """What a tensor is for; decides where it is accounted (arena, resident RAM, Flash)."""

    INPUT = "input"                  # the step's input samples (arena)
    ACTIVATION = "activation"        # transient forward tensor (arena)
    KEPT = "kept"                    # forward tensor kept for the backward pass (arena)
    LOGITS = "logits"                # the model output and the per-sample losses (arena)
    ERROR = "error"                  # error tensors of the backward pass (arena)
    GRADIENT = "gradient"            # weight/bias gradient buffers and ZO estimate sums (arena)
    PERTURBED = "perturbed"          # ZO: a perturbed copy of weights or of a layer output (arena)
    QUERY = "query"                  # ZO: tensors of a query's partial forward pass (arena)
    SCRATCH = "scratch"              # a kernel's scratch, alive during that kernel only (arena)
    WEIGHT = "weight"                # trainable weights and biases moved to RAM (resident)
    STATE = "state"                  # method state: EMA ranges, statistics, RNG, counters (resident)


ARENA_ROLES = frozenset({Role.INPUT, Role.ACTIVATION, Role.KEPT, Role.LOGITS, Role.ERROR, Role.GRADIENT,
                         Role.PERTURBED, Role.QUERY, Role.SCRATCH})
RESIDENT_ROLES = frozenset({Role.WEIGHT, Role.STATE})


class ScheduleError(ValueError):
    """A malformed schedule (a tensor read before it is written, an unknown tensor, ...)."""


@dataclass
class Tensor:
    """One buffer of the step: per-step shape (batch included where the method batches)."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    role: Role
    note: str = ""

    @property
    def elements(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) if self.shape else 1

    @property
    def nbytes(self) -> int:
        return self.elements * DTYPE_BYTES[self.dtype]

    @property
    def resident(self) -> bool:
        return self.role in RESIDENT_ROLES


@dataclass
class Kernel:
    """One kernel call: reads and writes named tensors; `macs` counts one call (times `repeat`).

    MACs are the multiply-accumulates of GEMMs and convolutions (forward, error propagation,
    weight gradient), one per element for updates, ZO accumulations and the loss; pooling,
    masks and copies count none.
    """

    name: str
    op: str
    phase: str
    node: str
    reads: list[str] = field(default_factory=list)
    writes: list[str] = field(default_factory=list)
    macs: int = 0
    in_place: list[tuple[str, str]] = field(default_factory=list)
    """(output, input) pairs: the output may take over the input's storage if the input dies here."""
    alias: list[tuple[str, str]] = field(default_factory=list)
    """(output, input) pairs: the output *is* the input's storage (a reshape; no data moves)."""
    loop: str | None = None
    repeat: int = 1

    @property
    def total_macs(self) -> int:
        return self.macs * self.repeat


@dataclass
class Schedule:
    """Ordered kernels of one training step and every tensor they touch."""

    model: str
    method: str
    batch: int
    tensors: dict[str, Tensor] = field(default_factory=dict)
    kernels: list[Kernel] = field(default_factory=list)
    frozen_bytes: dict[str, int] = field(default_factory=dict)
    """Flash: frozen parameters and constants per layer ('<layer>.weight', ...), bytes."""
    trainable: list[str] = field(default_factory=list)
    options: dict[str, Any] = field(default_factory=dict)
    """How the step was built (precision, perturbation, samples per pass, ...), for the report."""
    decisions: StepDecisions | None = None
    """The method's decisions this step was built from (None: inference); the code generator reads them."""
    predict_arena_bytes: int = 0
    """ZO and BP-QAS: the arena of the int8 forward pass (batch 1) their library's `model_predict` runs
    in the same arena; the library's arena is the larger of it and the step's (`plan.memory.account`)."""

    def tensor(self, name: str, shape: tuple[int, ...], dtype: str, role: Role, note: str = "") -> str:
        """Declare a tensor (again with the same shape/dtype is allowed); returns its name."""
        if dtype not in DTYPE_BYTES:
            raise ScheduleError(f"tensor '{name}': unknown dtype {dtype!r}; "
                                f"use one of {', '.join(DTYPE_BYTES)}")
        t = Tensor(name, tuple(int(d) for d in shape), dtype, Role(role), note)
        old = self.tensors.get(name)
        if old is not None and (old.shape, old.dtype, old.role) != (t.shape, t.dtype, t.role):
            raise ScheduleError(f"tensor '{name}' declared twice differently: {old.shape} {old.dtype} "
                                f"{old.role.value} vs {t.shape} {t.dtype} {t.role.value}")
        self.tensors[name] = t
        return name

    def kernel(self, name: str, op: str, phase: str, node: str, reads: list[str] | None = None,
               writes: list[str] | None = None, macs: int = 0, **kw: Any) -> Kernel:
        if phase not in PHASES:
            raise ScheduleError(f"kernel '{name}': unknown phase {phase!r}; use one of {', '.join(PHASES)}")
        k = Kernel(name, op, phase, node, list(reads or []), list(writes or []), int(macs), **kw)
        for t in k.reads + k.writes:
            if t not in self.tensors:
                raise ScheduleError(f"kernel '{name}' touches undeclared tensor '{t}'")
        self.kernels.append(k)
        return k

    def validate(self) -> None:
        """Every arena tensor a kernel reads was written by an earlier kernel (inputs: by the caller)."""
        written = {n for n, t in self.tensors.items() if t.resident or t.role == Role.INPUT}
        for k in self.kernels:
            for a, b in k.alias:
                if b not in written:
                    raise ScheduleError(f"kernel '{k.name}' aliases '{a}' to '{b}' before '{b}' is written")
            for r in k.reads:
                if r not in written:
                    raise ScheduleError(f"kernel '{k.name}' reads '{r}' before any kernel writes it")
            written.update(k.writes)
            written.update(a for a, _ in k.alias)

    # -- summaries
    def macs_by_phase(self) -> dict[str, int]:
        out = dict.fromkeys(PHASES, 0)
        for k in self.kernels:
            out[k.phase] += k.total_macs
        return out

    def macs_by_node(self) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {}
        for k in self.kernels:
            if k.total_macs:
                row = out.setdefault(k.node, {})
                row[k.phase] = row.get(k.phase, 0) + k.total_macs
        return out

    def resident_bytes(self) -> dict[str, int]:
        """Resident RAM per role ('weight', 'state')."""
        out = {r.value: 0 for r in (Role.WEIGHT, Role.STATE)}
        for t in self.tensors.values():
            if t.resident:
                out[t.role.value] += t.nbytes
        return out

    def to_dict(self) -> dict[str, Any]:
        """The schedule as JSON-able data (what the C generator reads)."""
        return {"model": self.model, "method": self.method, "batch": self.batch,
                "trainable": list(self.trainable), "options": dict(self.options),
                "tensors": [{**asdict(t), "role": t.role.value, "shape": list(t.shape), "bytes": t.nbytes}
                            for t in self.tensors.values()],
                "kernels": [asdict(k) for k in self.kernels]}
