"""FQT's range records and range scratch as the C library lays them out: one decision for both sides.

The planner counts these buffers in the step's resident state and the FQT code generator declares
them, so the rules for which ranges exist and how large the scratch is live here and nowhere else:
a second formula on either side would drift from the linked library.
"""

from __future__ import annotations

from dataclasses import dataclass

from mcutrain.graph import INPUT, PARAMETRIC, Graph
from mcutrain.plan.schedule import Kernel, Schedule

RANGE_RECORD_BYTES = 28
"""One `mt_fqt_range` of the C runtime: float32 EMA min and max, this step's min and max, and
int32 initialized, fresh and seen flags."""

ACT_QPARAMS_BYTES = 8
"""The float32 scale and int32 zero point kept beside each activation range record."""


def error_range_keys(g: Graph, needs: dict[str, bool]) -> dict[str, str]:
    """Node -> the tensor whose error EMA gives the scale of that node's output error.

    A parametric layer's input and a tensor read by several ops (their errors summed) own a range;
    any other op's input error shares the range of the op's own output error.
    """
    keys = {g.output: g.output}
    for n in reversed(g.nodes):
        if n.name not in keys or not needs[n.name]:
            continue
        for src in n.inputs:
            own = n.op in PARAMETRIC or len(g.consumers(src)) > 1
            keys[src] = src if own else keys[n.name]
    return keys


def error_range_owners(g: Graph, needs: dict[str, bool]) -> list[str]:
    """The tensors holding an error range record, from the output back (the C library's order)."""
    keys = error_range_keys(g, needs)
    return list(dict.fromkeys(keys[n.name] for n in reversed(g.nodes) if n.name in keys and needs[n.name]))


@dataclass(frozen=True)
class RangeScratch:
    """The FQT step's static range scratch: per-channel int32 accumulator extremes of the layer
    running now (sized for the widest layer) and the logits' int32 Q24 error."""

    channels: int
    classes: int

    @property
    def nbytes(self) -> int:
        return 4 * (2 * self.channels + self.classes)


def range_scratch(g: Graph) -> RangeScratch:
    """The range scratch of graph `g`'s FQT step (every precision declares it)."""
    return RangeScratch(max(int(n.params["weight"].shape[0]) for n in g.parametric()), g.num_classes)


SEED_SKIPPED_OPS = ("zero",)
"""Schedule ops a batch's range-seeding pass never runs (the gradient buffers are not touched)."""
WEIGHT_GRAD_OPS = ("linear_bwd_w", "conv2d_bwd_w")
"""The weight-gradient ops: the seeding pass runs them only for uint8's per-sample gradient ranges."""


def seed_pass_kernels(s: Schedule, sample_grads: bool) -> list[Kernel]:
    """The kernels of a batch's range-seeding pass, after the forward of each sample: the sample loop's
    loss and backward (weight gradients only when each sample's gradient has a range: uint8)."""
    skip = SEED_SKIPPED_OPS + (() if sample_grads else WEIGHT_GRAD_OPS)
    return [k for k in s.kernels if k.loop is not None and k.phase != "forward" and k.op not in skip]


@dataclass(frozen=True)
class SeedKeep:
    """What a batch's first step keeps of each sample's forward pass across its range-seeding rounds.

    The first step seeds the error ranges one round per error tensor, every round the forward pass of
    each sample and its backward down to the first tensor without a range. A round that stops within
    `covered` (the seeding pass's leading kernels, reading no forward tensor but `tensors`) needs no
    forward pass: the first round's copies of `tensors` (the logits, small relu outputs) stand in.
    """

    tensors: tuple[str, ...]
    sample_bytes: int
    covered: tuple[str, ...]
    """Names of the seeding-pass kernels the kept tensors serve (a prefix of `seed_pass_kernels`)."""


def seed_keep(s: Schedule, sample_grads: bool) -> SeedKeep:
    """The forward tensors a batch's first step keeps per sample (`SeedKeep`): those the seeding pass
    reads in order, while together they take no more bytes than one input sample (the logits, read
    first, always): the kept batch then costs at most the caller's batch buffer again.

    NOTE: restoring them at the start of a sample is safe: each is read after the loss, so all are
    live together there, and a tensor the backward reads before them is live there too (or is
    written after it): the planner gives none of those the storage of a kept tensor.
    """
    forward = {w for k in s.kernels if k.loop is not None and k.phase == "forward" for w in k.writes}
    budget = s.tensors[INPUT].nbytes
    kept: list[str] = []
    covered: list[str] = []
    for k in seed_pass_kernels(s, sample_grads):
        new = [t for t in dict.fromkeys(k.reads) if t in forward and t != INPUT and t not in kept]
        size = sum(s.tensors[t].nbytes for t in kept + new)
        if size > budget and k.phase != "loss":
            break
        kept += new
        covered.append(k.name)
    return SeedKeep(tuple(kept), sum(s.tensors[t].nbytes for t in kept), tuple(covered))
