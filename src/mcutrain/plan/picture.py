"""The memory-lifetime picture: every arena storage as a bar over the step's schedule.

x is the kernel index of the step (phases shaded along the top), y the arena offset; a bar
spans the storage's lifetime and its bytes, coloured by role (`plan.colors`, shared with the
report's memory bars). The dashed line marks the arena
size and the red line the step where the most bytes are alive, so a user sees what sets the
peak. Drawn with matplotlib's Agg backend (no display needed), written atomically.
"""

from __future__ import annotations

import io as _io
from pathlib import Path

from mcutrain.io import atomic_write_bytes
from mcutrain.plan.colors import ROLE_COLORS
from mcutrain.plan.memory import RAM_LABELS, MemoryReport, arena_at_peak, kb
from mcutrain.plan.training import TrainingPlan

PHASE_COLORS = {"forward": "#deebf7", "loss": "#f0f0f0", "error": "#fee6ce", "weight_grad": "#fdd0a2",
                "update": "#fcbba1", "query": "#e5f5e0", "zero grads": "#f7f7f7"}


def shown_phase(kernel) -> str:
    """The phase a kernel is drawn under. The kernels that zero the gradient buffers before the
    batch belong to the weight-gradient phase in the schedule, but run first: drawn as "zero
    grads" so the bands read forward, error, weight grad, update."""
    return "zero grads" if kernel.op == "zero" else kernel.phase


def phase_bands(kernels) -> list[tuple[int, int, str]]:
    """(first kernel, end, shown phase) of each run of kernels drawn under one phase."""
    bands: list[tuple[int, int, str]] = []
    for i, k in enumerate(kernels):
        ph = shown_phase(k)
        if bands and bands[-1][2] == ph:
            bands[-1] = (bands[-1][0], i + 1, ph)
        else:
            bands.append((i, i + 1, ph))
    return bands


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
    for start, end, ph in phase_bands(s.kernels):      # along the top
        ax.add_patch(Rectangle((start - 0.5, top + band * 0.3), end - start, band,
                               color=PHASE_COLORS.get(ph, "#eeeeee"), lw=0))
        if end - start >= steps * 0.06:
            ax.text(start - 0.5 + (end - start) / 2, top + band * 0.8, ph.replace("_", " "),
                    ha="center", va="center", fontsize=8)
    used = set()
    for st in plan.storages:
        if st.size == 0:
            continue
        role = s.tensors[st.tensors[0]].role
        used.add(role)
        off = plan.offsets[st.tensors[0]] / scale
        ax.add_patch(Rectangle((st.first_use - 0.45, off), st.last_use - st.first_use + 0.9, st.size / scale,
                               facecolor=ROLE_COLORS[role], edgecolor="white", lw=0.3))
    step, by_role = arena_at_peak(plan)
    ax.axhline(top, color="black", ls="--", lw=1)
    ax.axvline(step, color="#cb181d", lw=1.2)
    # NOTE: on a white box with a margin from the line: drawn straight on the bars it was unreadable
    ax.text(step + (0.3 if step < steps * 0.7 else -0.3), top * 0.5,
            f"busiest step {step}\n{s.kernels[step].name}\n{kb(sum(by_role.values()))} alive",
            color="#cb181d", fontsize=8, va="center", ha="left" if step < steps * 0.7 else "right",
            bbox={"boxstyle": "round,pad=0.3", "facecolor": "white", "edgecolor": "#cb181d", "alpha": 0.92},
            zorder=5)
    ax.set_xlim(-1, steps)
    ax.set_ylim(0, top + band * 1.5)
    ax.set_xlabel(f"kernel of the training step ({steps} kernels)")
    ax.set_ylabel("arena offset (KB)")
    head = title or f"{s.method} on {s.model}"
    if report is not None:
        head += f" — RAM {kb(report.ram_bytes)} on {report.target.name} " \
                f"({'fits' if report.fits else 'does not fit'})"
    ax.set_title(f"{head}\narena {kb(plan.arena_bytes)}", fontsize=10)
    shown = {shown_phase(k) for k in s.kernels}        # the legend names the bands too narrow for a name
    phases = [ph for ph in PHASE_COLORS if ph in shown] + sorted(shown - set(PHASE_COLORS))
    ax.legend(handles=[Patch(color=ROLE_COLORS[r], label=RAM_LABELS[r]) for r in ROLE_COLORS if r in used]
              + [Patch(color=PHASE_COLORS.get(ph, "#eeeeee"), label=f"phase: {ph.replace('_', ' ')}")
                 for ph in phases],
              loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8, frameon=False)
    fig.tight_layout()
    buf = _io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    atomic_write_bytes(path, lambda f: f.write(buf.getvalue()))
    return Path(path)
