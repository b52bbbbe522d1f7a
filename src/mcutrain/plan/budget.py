"""A step that does not fit its board: how much over, what takes the memory, and what to try.

`plan` exits with `PLAN_DOES_NOT_FIT` when a step does not fit; `export` and `run` refuse it
(unless `--allow-overflow`) with `overflow_message`. All three read the planner's own
`MemoryReport`, whose `fits` is `memory.fits_target`: one decision, so a step `plan` says fits is
one `export` writes and `run` runs, and the other way round.

The board's budget is the library's: what `plan` accounts (arena, trainable tensors, method
state, stack). The buffers of `run`'s harness (its copy of the state blob, the data it reads,
newlib's 8 KB heap) are not part of a real firmware and are kept out of it (`docs/planner.md`).

Example:
    >>> from mcutrain import zoo
    >>> from mcutrain.plan.memory import account
    >>> from mcutrain.plan.schedules import build_schedule
    >>> r = account(build_schedule(zoo.build("small-cnn"), "fqt", trainable="all", batch=32), "nrf52840")
    >>> r.fits, overflow_message(r).splitlines()[0][:40]
    (False, 'the fqt step needs 355.6 KB of RAM; nrf5')
"""

from __future__ import annotations

from mcutrain.plan.memory import MemoryReport, fits_target, kb
from mcutrain.targets import all_targets

PLAN_DOES_NOT_FIT = 3
"""Exit status of `mcutrain plan` when the step does not fit (1: an input error, 2: a usage error)."""


def over_bytes(r: MemoryReport) -> dict[str, int]:
    """Bytes over the target's RAM and Flash (0 where it fits)."""
    t = r.target
    return {"ram": max(0, r.ram_bytes - t.ram_bytes), "flash": max(0, r.flash_bytes - t.flash_bytes)}


def largest_parts(r: MemoryReport, which: str, n: int = 3) -> list[tuple[str, int]]:
    """The `n` largest entries of the RAM or Flash breakdown (the arena split at its busiest step)."""
    parts = dict(r.breakdown[which])
    if which == "ram":
        arena = parts.pop("arena")
        peak = r.breakdown["arena_at_peak"]
        roles = sorted(peak["by_role"].items(), key=lambda kv: -kv[1])
        top = ", ".join(f"{k} {kb(v)}" for k, v in roles[:2])
        parts[f"arena (at {peak['kernel'] or 'its busiest step'}: {top})" if top else "arena"] = arena
    return sorted(parts.items(), key=lambda kv: -kv[1])[:n]


def bigger_boards(r: MemoryReport) -> list[str]:
    """Boards of `targets.toml` (the generic cores left out) that hold this step, smallest RAM first."""
    boards = [t for t in all_targets().values() if not t.name.startswith("cortex-")
              and fits_target(r.ram_bytes, r.flash_bytes, t)]
    return [t.name for t in sorted(boards, key=lambda t: (t.ram_bytes, t.name))]


def what_to_try(r: MemoryReport) -> list[str]:
    """Options that shrink this step, in the order they cost the least accuracy."""
    b = r.breakdown
    tips = []
    if b["batch"] > 1:
        why = "the gradient buffers live across the samples" if b["method"] == "fqt" else \
            "the batch runs in one pass"
        tips.append(f"a smaller batch (--batch {max(1, b['batch'] // 4)}: {why})")
    if b["method"] == "fqt" and b["options"].get("lambda_min", 1.0) >= 1.0:
        tips.append("partial updates (--partial 0.1)")
    if len(b["trainable"]) > 1:
        tips.append(f"fewer trainable layers (--trainable last:{max(1, len(b['trainable']) // 2)}, or "
                    "--trainable auto in 'mcutrain plan' for the most that fit)")
    if b["method"] != "zo":
        tips.append("--method zo (no back-propagation: the step needs little more than inference)")
    boards = bigger_boards(r)
    tips.append(f"a bigger board (--target {boards[0]})" if boards
                else "a bigger board (none in targets.toml holds it)")
    return tips


def overflow_message(r: MemoryReport) -> str:
    """What a refused export or run says: the step's needs against the board, its largest parts,
    what to try."""
    t, over = r.target, over_bytes(r)
    lines = [f"the {r.breakdown['method']} step needs {kb(r.ram_bytes)} of RAM; {t.name} has "
             f"{kb(t.ram_bytes)} ({100 * r.ram_bytes / t.ram_bytes:.0f}%)"
             + (f", {kb(over['ram'])} over" if over["ram"] else "")
             + f"; Flash {kb(r.flash_bytes)} of {kb(t.flash_bytes)}"
             + (f", {kb(over['flash'])} over" if over["flash"] else "")]
    for which in ("ram", "flash"):
        if over[which]:
            lines.append(f"  largest {which.upper() if which == 'ram' else 'Flash'} parts: "
                         + "; ".join(f"{k} {kb(v)}" for k, v in largest_parts(r, which)))
    lines.append("  try: " + "; ".join(what_to_try(r)))
    lines.append("  ('mcutrain plan' with the same options prints the whole breakdown and the best that "
                 "fits; --allow-overflow goes ahead anyway)")
    return "\n".join(lines)
