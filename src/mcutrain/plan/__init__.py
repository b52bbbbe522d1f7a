"""Planning: tensor lifetimes over a schedule and arena offsets (RAM accounting builds on these).

`plan_inference_arena(graph)` gives every tensor of the int8 forward pass its offset in one
static arena; the C code generator uses these offsets verbatim, so the planned arena size is
the C arena's size.

Example:
    >>> from mcutrain import zoo
    >>> p = plan_inference_arena(zoo.build("digits-cnn"), kernels="ref")
    >>> p.arena_bytes, p.offsets["input"]
    (1536, 1024)
"""

from __future__ import annotations

from dataclasses import dataclass

from mcutrain.graph import Graph
from mcutrain.plan.arena import (
    DEFAULT_ALIGNMENT,
    Buffer,
    GreedyPlanner,
    LinearPlanner,
    MemoryPlanner,
    PlanError,
    check_no_overlap,
    make_planner,
)
from mcutrain.plan.lifetimes import Lifetimes, forward_lifetimes, scratch_bytes

__all__ = [
    "DEFAULT_ALIGNMENT",
    "ArenaPlan",
    "Buffer",
    "GreedyPlanner",
    "Lifetimes",
    "LinearPlanner",
    "MemoryPlanner",
    "PlanError",
    "check_no_overlap",
    "forward_lifetimes",
    "make_planner",
    "plan_inference_arena",
    "scratch_bytes",
]


@dataclass
class ArenaPlan:
    """Where every tensor and scratch block of a forward pass sits in the arena."""

    arena_bytes: int
    offsets: dict[str, int]
    """Tensor name -> byte offset (aliased tensors share an offset)."""
    scratch: dict[str, tuple[int, int]]
    """Node name -> (offset, bytes) of its kernel scratch."""
    buffers: list[Buffer]
    lifetimes: Lifetimes
    planner: str
    kernels: str


def plan_inference_arena(graph: Graph, kernels: str = "dsp", planner: str = "greedy",
                         alignment: int = DEFAULT_ALIGNMENT, in_place: bool = True) -> ArenaPlan:
    """Plan the static arena of one int8 forward pass (batch 1) of `graph`.

    `kernels` ('dsp' or 'ref') decides the scratch sizes; `planner` is 'greedy' or 'linear'
    (the linear plan never reuses memory, and also disables in-place ops so every tensor
    survives the pass for layer-by-layer debugging).
    """
    lt = forward_lifetimes(graph, kernels, in_place=in_place and planner != "linear")
    p = make_planner(planner, alignment)
    ids = [p.add_buffer(s.size, s.first_use, s.last_use, s.name) for s in lt.storages]
    offsets = {t: p.offset(ids[i]) for t, i in lt.storage_of.items()}
    scratch = {n: (p.offset(ids[i]), lt.storages[i].size) for n, i in lt.scratch_of.items()}
    check_no_overlap(p.buffers)
    return ArenaPlan(p.peak, offsets, scratch, list(p.buffers), lt, planner, kernels)
