"""Training lifetimes and the arena: where every arena tensor of a schedule sits, step by step.

Step i is kernel i of the schedule. A tensor lives from the kernel that first writes it (the
step's input: from step 0, written by the caller) to the last kernel that reads or writes it;
logits and losses live to the end (the caller reads them). Inside a loop (ZO queries, FQT's
per-sample loop) a tensor the body reads but was written before the loop stays alive to the
body's last kernel, so every iteration finds it intact.

Storage is shared where the kernels work in place (`Kernel.in_place`: relu, add into a dead
input, error masking, error sums) or never move data (`Kernel.alias`: flatten and its
backward). An output takes over an input's storage only when nothing later reads that storage
and the output fits in it. Updates write the resident weights they read: in place by
construction, no arena bytes.

Offsets come from `arena.GreedyPlanner` (largest first, lowest free offset; TensorFlow Lite
Micro's planner). The result is data the code generator uses verbatim.

Example:
    >>> from mcutrain import zoo
    >>> from mcutrain.plan.schedules import build_schedule
    >>> p = plan_training(build_schedule(zoo.build("digits-cnn"), "none"))
    >>> p.arena_bytes
    2112
"""

from __future__ import annotations

from dataclasses import dataclass

from mcutrain.plan.arena import Buffer, Storage, check_no_overlap, make_planner
from mcutrain.plan.schedule import ARENA_ROLES, Role, Schedule


@dataclass
class TrainingPlan:
    """Arena offsets of one schedule."""

    schedule: Schedule
    arena_bytes: int
    offsets: dict[str, int]
    """Arena tensor -> byte offset (tensors sharing a storage share an offset)."""
    storages: list[Storage]
    storage_of: dict[str, int]
    buffers: list[Buffer]
    steps: int

    def live_bytes(self) -> list[int]:
        """Bytes of storage alive at each step (what a perfect planner would need at that step)."""
        out = [0] * self.steps
        for st in self.storages:
            for i in range(st.first_use, st.last_use + 1):
                out[i] += st.size
        return out

    def live_at(self, step: int) -> list[Storage]:
        return [st for st in self.storages if st.first_use <= step <= st.last_use]

    def to_dict(self) -> dict:
        """Offsets and lifetimes as JSON-able data (for the code generator)."""
        return {"arena_bytes": self.arena_bytes, "steps": self.steps,
                "storages": [{"name": st.name, "offset": self.offsets[st.tensors[0]], "bytes": st.size,
                              "first_use": st.first_use, "last_use": st.last_use, "tensors": st.tensors}
                             for st in self.storages]}


def tensor_lifetimes(s: Schedule) -> dict[str, tuple[int, int]]:
    """Arena tensor -> (first, last) step, loops and logits taken into account (module docstring)."""
    steps = len(s.kernels)
    first: dict[str, int] = {}
    last: dict[str, int] = {}
    for name, t in s.tensors.items():
        if t.role == Role.INPUT:
            first[name] = last[name] = 0
    for i, k in enumerate(s.kernels):
        for t in [*k.writes, *(a for a, _ in k.alias)]:
            first.setdefault(t, i)
            last[t] = max(last.get(t, i), i)
        for t in [*k.reads, *(b for _, b in k.alias)]:
            last[t] = max(last.get(t, i), i)
    spans: dict[str, list[int]] = {}
    for i, k in enumerate(s.kernels):
        if k.loop is not None:
            spans.setdefault(k.loop, [i, i])[1] = i
    for a, b in spans.values():
        for k in s.kernels[a:b + 1]:
            for t in k.reads:
                if t in first and first[t] < a:
                    last[t] = max(last[t], b)
    for name, t in s.tensors.items():
        if t.role == Role.LOGITS and name in first:
            last[name] = steps - 1
    return {t: (first[t], last[t]) for t in first
            if s.tensors[t].role in ARENA_ROLES}


def plan_training(s: Schedule, planner: str = "greedy", kernels_alignment: int = 4,
                  in_place: bool = True) -> TrainingPlan:
    """Lifetimes, in-place sharing and arena offsets of schedule `s`."""
    life = tensor_lifetimes(s)
    storages: list[Storage] = []
    storage_of: dict[str, int] = {}

    def new(t: str) -> None:
        f, la = life[t]
        storage_of[t] = len(storages)
        storages.append(Storage(t, s.tensors[t].nbytes, f, la, [t]))

    def join(t: str, idx: int) -> None:
        st = storages[idx]
        st.tensors.append(t)
        st.last_use = max(st.last_use, life[t][1])
        st.first_use = min(st.first_use, life[t][0])
        storage_of[t] = idx

    for name, t in s.tensors.items():
        if t.role == Role.INPUT and name in life:
            new(name)
    for i, k in enumerate(s.kernels):
        for out, src in k.alias:
            if out not in storage_of and src in storage_of:
                join(out, storage_of[src])
        for out in k.writes:
            if out in storage_of or out not in life:
                continue
            target = None
            if in_place and planner != "linear":
                for o2, src in k.in_place:
                    if o2 != out or src not in storage_of:
                        continue
                    st = storages[storage_of[src]]
                    if st.last_use == i and s.tensors[out].nbytes <= st.size and \
                            s.tensors[st.tensors[0]].role != Role.SCRATCH:
                        target = storage_of[src]
                        break
            if target is None:
                new(out)
            else:
                join(out, target)
    p = make_planner(planner, kernels_alignment)
    ids = [p.add_buffer(st.size, st.first_use, st.last_use, st.name) for st in storages]
    offsets = {t: p.offset(ids[i]) for t, i in storage_of.items()}
    check_no_overlap(p.buffers)
    return TrainingPlan(s, p.peak, offsets, storages, storage_of, list(p.buffers), len(s.kernels))
