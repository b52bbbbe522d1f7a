"""One colour per memory category, shared by every memory picture.

Why: the lifetime picture coloured arena storages by role while the report's RAM/Flash bars
took tab20 colours by position, so "kept activations" was dark blue in one picture and
orange in the next, and a category's colour moved whenever another category was absent.
Here each category has one colour wherever it is drawn: the arena's roles (by their
`RAM_LABELS` name, with or without the report's "arena: " prefix), the other RAM parts and the
Flash parts of `memory.account`.
"""

from __future__ import annotations

from mcutrain.plan.memory import RAM_LABELS
from mcutrain.plan.schedule import Role

ROLE_COLORS = {
    Role.INPUT: "#7f7f7f", Role.ACTIVATION: "#9ecae1", Role.KEPT: "#3182bd", Role.LOGITS: "#756bb1",
    Role.ERROR: "#fd8d3c", Role.GRADIENT: "#e6550d", Role.PERTURBED: "#74c476", Role.QUERY: "#31a354",
    Role.SCRATCH: "#d9d9d9",
}
"""Arena storages by role (the lifetime picture's bars)."""
PART_COLORS = {
    "arena not alive at peak": "#f0f0f0",
    "trainable weights and biases": "#e7298a", "method state": "#ce1256", "stack allowance": "#525252",
    "frozen weights and biases": "#8c6d31", "trainable initial values": "#f768a1",
    "quantization constants": "#bcbd22", "code (estimate)": "#17becf",
}
"""The other RAM parts and the Flash parts of a memory report."""
FALLBACK = "#bdbdbd"
"""A part no table names yet (a new category): grey rather than a colour that means another."""
CATEGORY_COLORS = {**{RAM_LABELS[r]: c for r, c in ROLE_COLORS.items()}, **PART_COLORS}


def category_color(name: str) -> str:
    """The colour of a memory category, e.g. "kept activations" or "arena: kept activations"."""
    return CATEGORY_COLORS.get(name.removeprefix("arena: "), FALLBACK)
