"""FQT's range records and range scratch as the C library lays them out: one decision for both sides.

The planner counts these buffers in the step's resident state and the FQT code generator declares
them, so the rules for which ranges exist and how large the scratch is live here and nowhere else:
a second formula on either side would drift from the linked library.
"""

from __future__ import annotations

from dataclasses import dataclass

from mcutrain.graph import PARAMETRIC, Graph

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
