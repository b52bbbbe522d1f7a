"""Arena planners: give every buffer an offset so that buffers alive at the same time never overlap.

The interface is TensorFlow Lite Micro's memory planner, kept small: `add_buffer(size,
first_use, last_use)` returns a buffer id, then `offset(id)` and `peak`. Lifetimes are
inclusive step ranges of a schedule (a forward pass today; training schedules later), so two
buffers conflict when their ranges intersect.

- `GreedyPlanner` (for use): buffers in order of decreasing size (ties: in the order added),
  each placed at the lowest aligned offset that does not overlap any already placed buffer it
  shares a step with — TFLM's GreedyMemoryPlanner.
- `LinearPlanner` (for debugging): never reuses memory; every buffer stays intact after its
  last use, so a layer-by-layer dump can read all of them.

Example:
    >>> p = GreedyPlanner()
    >>> a, b, c = p.add_buffer(64, 0, 1), p.add_buffer(32, 1, 2), p.add_buffer(64, 2, 3)
    >>> [p.offset(i) for i in (a, b, c)], p.peak
    ([0, 64, 0], 96)
"""

from __future__ import annotations

from dataclasses import dataclass, field

DEFAULT_ALIGNMENT = 4
"""Offsets are multiples of this: int16/int32 scratch and word loads need 4-byte alignment."""


@dataclass
class Storage:
    """One block of arena memory: the tensors stored in it (in order) and its lifetime [first, last].

    The inference plan (`lifetimes`) and the training plan (`training`) both lay tensors out in
    such blocks; a kernel's scratch block names the node it belongs to (`scratch_of`).
    """

    name: str
    size: int
    first_use: int
    last_use: int
    tensors: list[str] = field(default_factory=list)
    scratch_of: str | None = None
    """For a kernel's scratch block: the node it belongs to."""



class PlanError(ValueError):
    """A buffer that cannot be planned (bad size or lifetime); the message names it."""


@dataclass
class Buffer:
    """One planned block of memory, alive over steps [first_use, last_use] inclusive."""

    size: int
    first_use: int
    last_use: int
    name: str = ""
    offset: int = -1

    def overlaps_in_time(self, other: Buffer) -> bool:
        return self.first_use <= other.last_use and other.first_use <= self.last_use

    def overlaps_in_memory(self, other: Buffer) -> bool:
        if self.size == 0 or other.size == 0:
            return False
        return self.offset < other.offset + other.size and other.offset < self.offset + self.size


def align_up(n: int, alignment: int) -> int:
    return (n + alignment - 1) // alignment * alignment


class MemoryPlanner:
    """Collects buffers; subclasses decide the offsets in `_plan`."""

    def __init__(self, alignment: int = DEFAULT_ALIGNMENT):
        if alignment < 1:
            raise PlanError(f"alignment must be >= 1, got {alignment}")
        self.alignment = alignment
        self._buffers: list[Buffer] = []
        self._planned = False

    @property
    def buffers(self) -> list[Buffer]:
        """Every buffer added, in order, with its planned offset."""
        self._ensure_planned()
        return self._buffers

    def add_buffer(self, size: int, first_use: int, last_use: int, name: str = "") -> int:
        """Register a buffer of `size` bytes alive over [first_use, last_use]; returns its id."""
        label = f"buffer '{name}'" if name else f"buffer #{len(self._buffers)}"
        if size < 0:
            raise PlanError(f"{label}: size must be >= 0, got {size}")
        if first_use < 0 or last_use < first_use:
            raise PlanError(f"{label}: lifetime [{first_use}, {last_use}] must have 0 <= first <= last")
        self._buffers.append(Buffer(int(size), int(first_use), int(last_use), name))
        self._planned = False
        return len(self._buffers) - 1

    def offset(self, buffer_id: int) -> int:
        """Byte offset of a buffer in the arena."""
        self._ensure_planned()
        return self._buffers[buffer_id].offset

    @property
    def peak(self) -> int:
        """Arena bytes needed: the highest end of any buffer (rounded up to the alignment)."""
        self._ensure_planned()
        end = max((b.offset + b.size for b in self._buffers), default=0)
        return align_up(end, self.alignment)

    def _ensure_planned(self) -> None:
        if not self._planned:
            self._planned = True
            self._plan()

    def _plan(self) -> None:  # pragma: no cover - abstract
        raise NotImplementedError


class LinearPlanner(MemoryPlanner):
    """Every buffer after the previous one, in the order added: nothing is ever reused."""

    def _plan(self) -> None:
        at = 0
        for b in self._buffers:
            b.offset = at
            at = align_up(at + b.size, self.alignment)


class GreedyPlanner(MemoryPlanner):
    """Largest buffers first, each at the lowest offset free during its whole lifetime."""

    def _plan(self) -> None:
        bufs = self._buffers
        order = sorted(range(len(bufs)), key=lambda i: (-bufs[i].size, i))
        placed: list[Buffer] = []
        for i in order:
            b = bufs[i]
            live = sorted((p for p in placed if p.size and p.overlaps_in_time(b)), key=lambda p: p.offset)
            at = 0
            for p in live:
                if at + b.size <= p.offset:
                    break  # the gap before p holds b
                at = max(at, align_up(p.offset + p.size, self.alignment))
            b.offset = at
            placed.append(b)


PLANNERS = {"greedy": GreedyPlanner, "linear": LinearPlanner}


def make_planner(kind: str = "greedy", alignment: int = DEFAULT_ALIGNMENT) -> MemoryPlanner:
    """A planner by name: 'greedy' (use) or 'linear' (debugging, never reuses)."""
    try:
        return PLANNERS[kind](alignment)
    except KeyError:
        raise PlanError(f"unknown planner {kind!r}; use one of {', '.join(PLANNERS)}") from None


def check_no_overlap(buffers: list[Buffer]) -> None:
    """Raise if two buffers alive at the same step share a byte (the planners' invariant)."""
    for i, a in enumerate(buffers):
        for b in buffers[i + 1:]:
            if a.overlaps_in_time(b) and a.overlaps_in_memory(b):
                raise PlanError(f"buffers '{a.name}' [{a.offset}, {a.offset + a.size}) and '{b.name}' "
                                f"[{b.offset}, {b.offset + b.size}) overlap while both are alive "
                                f"(steps {max(a.first_use, b.first_use)}..{min(a.last_use, b.last_use)})")
