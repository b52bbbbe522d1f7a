"""The memory-lifetime picture: every arena storage as a bar over the step's schedule.

x is the kernel index of the step (phases shaded along the top), y the arena offset; a bar
spans the storage's lifetime and its bytes, coloured by role. The dashed line marks the arena
size and the red line the step where the most bytes are alive, so a user sees what sets the
peak. Drawn with matplotlib's Agg backend (no display needed), written atomically.
"""

from __future__ import annotations

import io as _io
from pathlib import Path

from mcutrain.io import atomic_write_bytes
from mcutrain.plan.memory import RAM_LABELS, MemoryReport, arena_at_peak, kb
from mcutrain.plan.schedule import Role
from mcutrain.plan.training import TrainingPlan

COLORS = {
    Role.INPUT: "#7f7f7f", Role.ACTIVATION: "#9ecae1", Role.KEPT: "#3182bd", Role.LOGITS: "#756bb1",
    Role.ERROR: "#fd8d3c", Role.GRADIENT: "#e6550d", Role.PERTURBED: "#74c476", Role.QUERY: "#31a354",
    Role.SCRATCH: "#d9d9d9",
}
PHASE_COLORS = {"forward": "#deebf7", "loss": "#f0f0f0", "error": "#fee6ce", "weight_grad": "#fdd0a2",
                "update": "#fcbba1", "query": "#e5f5e0"}


def draw(plan: TrainingPlan, path: str | Path, title: str = "", report: MemoryReport | None = None) -> Path:
    """Write the lifetime picture of `plan` to `path` (PNG)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch, Rectangle

    s = plan.schedule
    steps = max(plan.steps, 1)
    scale = 1024.0
    fig, ax = plt.subplots(figsize=(12, 6), dpi=110)
    top = plan.arena_bytes / scale
    band = max(top * 0.04, 0.5)
    # phase bands along the top
    start = 0
    for i in range(1, steps + 1):
        if i == steps or s.kernels[i].phase != s.kernels[start].phase:
            ph = s.kernels[start].phase
            ax.add_patch(Rectangle((start - 0.5, top + band * 0.3), i - start, band,
                                   color=PHASE_COLORS.get(ph, "#eeeeee"), lw=0))
            if i - start >= steps * 0.06:
                ax.text(start - 0.5 + (i - start) / 2, top + band * 0.8, ph.replace("_", " "),
                        ha="center", va="center", fontsize=8)
            start = i
    used = set()
    for st in plan.storages:
        if st.size == 0:
            continue
        role = s.tensors[st.tensors[0]].role
        used.add(role)
        off = plan.offsets[st.tensors[0]] / scale
        ax.add_patch(Rectangle((st.first_use - 0.45, off), st.last_use - st.first_use + 0.9, st.size / scale,
                               facecolor=COLORS[role], edgecolor="white", lw=0.3))
    step, by_role = arena_at_peak(plan)
    ax.axhline(top, color="black", ls="--", lw=1)
    ax.axvline(step, color="#cb181d", lw=1.2)
    ax.text(step, top * 0.5, f" busiest step {step}\n {s.kernels[step].name}\n "
            f"{kb(sum(by_role.values()))} alive", color="#cb181d", fontsize=8, va="center",
            ha="left" if step < steps * 0.7 else "right")
    ax.set_xlim(-1, steps)
    ax.set_ylim(0, top + band * 1.5)
    ax.set_xlabel(f"kernel of the training step ({steps} kernels)")
    ax.set_ylabel("arena offset (KB)")
    head = title or f"{s.method} on {s.model}"
    if report is not None:
        head += f" — RAM {kb(report.ram_bytes)} on {report.target.name} " \
                f"({'fits' if report.fits else 'does not fit'})"
    ax.set_title(f"{head}\narena {kb(plan.arena_bytes)}", fontsize=10)
    ax.legend(handles=[Patch(color=COLORS[r], label=RAM_LABELS[r]) for r in COLORS if r in used],
              loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8, frameon=False)
    fig.tight_layout()
    buf = _io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    atomic_write_bytes(path, lambda f: f.write(buf.getvalue()))
    return Path(path)
