"""Reports of training runs: one summary table and the plots people look at.

A run folder holds what `mcutrain train -o NAME.npz` writes (the adapted model, its training
history inside it; runs of older versions have `NAME.history.json` beside it) and,
optionally, `NAME.mcu.json`: the `--json` result of `mcutrain run` for that model (the demo
writes it; by hand: `mcutrain run NAME.npz ... --json > NAME.mcu.json`). A `.mcu.json`
without a history (an inference-only model) gets its own row.

Each trained model is planned on a target with the settings it was trained with (read from
the model file's provenance), so the table's RAM and Flash are what that very training step
needs. The report writes:

    summary.md, summary.json   the table
    curves.png                 test accuracy and training loss per epoch, every method
    memory.png                 RAM and Flash per method, split by category
    lifetime-NAME.png          the arena's memory-lifetime picture of each method's step

Example:
    >>> runs = collect("demo-run", target="nrf52840")          # doctest: +SKIP
    >>> print(format_table(runs))                               # doctest: +SKIP
"""

from __future__ import annotations

import io as _io
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcutrain import io
from mcutrain.plan.colors import category_color
from mcutrain.plan.memory import MemoryReport, arena_at_peak, kb
from mcutrain.plan.suggest import PlanRequest

DEFAULT_TARGET = "nrf52840"
DEFAULT_BATCH = 32
"""Batch a run is planned with when its history does not say (`mcutrain train`'s default)."""


class ReportError(ValueError):
    """A run folder that cannot be reported on; the message says what is missing."""


@dataclass
class MethodRun:
    """One row of the report: a trained (or inference-only) model and what is known of it."""

    name: str
    history: dict[str, Any] | None = None
    config: dict[str, Any] | None = None
    plan: MemoryReport | None = field(default=None, repr=False)
    plan_error: str | None = None
    inference_macs: int | None = None
    """MACs of one inference of the model (tells an inference `mcu.json` from a training one)."""

    @property
    def mcu_kind(self) -> str | None:
        """'inference' or 'training step': what the saved MCU run measured per step.

        `mcutrain run --json` does not name its method; a run whose MACs per step equal one
        inference of the model was an inference run, any other a training run.
        """
        m = self.mcu
        if not m:
            return None
        if "method" in m:
            return "inference" if m["method"] == "none" else "training step"
        if self.inference_macs is not None and m.get("macs_per_step") is not None:
            return "inference" if m["macs_per_step"] == self.inference_macs else "training step"
        return "MCU run"
    mcu: dict[str, Any] | None = None

    @property
    def label(self) -> str:
        """A short description of the method and its settings, e.g. 'fqt int8, partial 0.5'."""
        c = self.config or {}
        m = c.get("method")
        if m == "fqt":
            text = f"fqt {c.get('precision', '')}"
            if c.get("lambda_min", 1.0) < 1.0:
                text += f", partial {c['lambda_min']:g}"
            return text
        if m == "zo":
            return f"zo {c.get('perturb', '')}, {c.get('queries', '?')} queries"
        if m:
            return str(m)
        return "int8 inference" if self.history is None else self.name


def plan_request(config: dict[str, Any], batch: int) -> PlanRequest:
    """The planner's request for the training step a method's saved config describes."""
    m = config.get("method")
    trainable = config.get("trainable", "all")
    if isinstance(trainable, list):
        trainable = "layers:" + ",".join(trainable)
    if m == "fqt":
        return PlanRequest("fqt", trainable=trainable, batch=batch,
                           precision=config.get("precision", "uint8"),
                           lambda_min=float(config.get("lambda_min", 1.0)),
                           lambda_max=float(config.get("lambda_max", 1.0)),
                           partial_output=bool(config.get("partial_output", False)))
    if m == "zo":
        return PlanRequest("zo", trainable=trainable, batch=batch, perturb=config.get("perturb", "mix"),
                           queries=int(config.get("queries", 50)), mask=config.get("mask", "none"))
    if m == "bp-qas":
        return PlanRequest("bp-qas", trainable=trainable, batch=batch,
                           bias_last=int(config.get("bias_last", 0)))
    if m == "float":
        return PlanRequest("float", trainable=trainable, batch=batch)
    raise ReportError(f"no planner for method '{m}'")


def _read_json(path: Path) -> dict[str, Any]:
    try:
        doc = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise ReportError(f"cannot read '{path}': {e}") from None
    if not isinstance(doc, dict):
        raise ReportError(f"'{path}' does not hold a JSON object")
    return doc


def _stem(path: Path, suffix: str) -> str:
    return path.name[:-len(suffix)]


def collect(run_dir: str | Path, target: str = DEFAULT_TARGET, batch: int | None = None) -> list[MethodRun]:
    """Every run in `run_dir`, planned on `target` (batch from the history, else `batch` or 32)."""
    d = Path(run_dir)
    if not d.is_dir():
        raise ReportError(f"'{d}' is not a folder; give the folder that 'mcutrain train -o' or "
                          "'mcutrain demo' wrote to")
    histories: dict[str, dict[str, Any] | Path] = {}
    for p in sorted(d.glob("*.npz")):
        try:
            h = io.load(p).meta.get("history")
        except io.ModelFileError:
            continue                     # a broken model is reported by its row, if it has one
        if isinstance(h, dict):
            histories[p.stem] = h
    for p in sorted(d.glob("*.history.json")):      # runs of mcutrain before the history moved inside
        histories.setdefault(_stem(p, ".history.json"), p)
    mcus = {_stem(p, ".mcu.json"): p for p in sorted(d.glob("*.mcu.json"))}
    if not histories and not mcus:
        raise ReportError(f"'{d}' holds no trained model (NAME.npz from 'mcutrain train -o NAME.npz') and no "
                          "NAME.mcu.json (from 'mcutrain run NAME.npz --json > NAME.mcu.json')")
    runs = []
    for name in sorted(set(histories) | set(mcus), key=lambda n: (n not in histories, n)):
        r = MethodRun(name, mcu=_read_json(mcus[name]) if name in mcus else None)
        if name in histories:
            h = histories[name]
            r.history = h if isinstance(h, dict) else _read_json(h)
            _plan(r, d / f"{name}.npz", target, int(r.history.get("batch") or batch or DEFAULT_BATCH))
        elif (d / f"{name}.npz").exists():
            try:
                r.inference_macs = io.load(d / f"{name}.npz").graph.total_macs()
            except io.ModelFileError as e:
                r.plan_error = str(e)
        runs.append(r)
    return runs


def _plan(r: MethodRun, model: Path, target: str, batch: int) -> None:
    """Fill `r.config` and `r.plan` from the model file's provenance (or say why not)."""
    if not model.exists():
        r.plan_error = f"model file {model.name} missing"
        return
    try:
        mf = io.load(model)
        r.inference_macs = mf.graph.total_macs()
        r.config = dict(mf.meta.get("provenance", {}).get("trained", {}).get("method") or {})
        if not r.config:
            r.plan_error = "the model file does not say how it was trained"
            return
        from mcutrain.plan.memory import account
        r.plan = account(plan_request(r.config, batch).build(mf.graph), target)
    except (io.ModelFileError, ValueError) as e:
        r.plan_error = str(e)


# ---------------------------------------------------------------- the table


def rows(runs: list[MethodRun]) -> list[dict[str, Any]]:
    """The table as JSON rows (None where a figure is not known)."""
    out = []
    for r in runs:
        h, p, m = r.history or {}, r.plan, r.mcu or {}
        out.append({
            "name": r.name, "method": r.label, "accuracy_before": h.get("accuracy_before"),
            "accuracy_after": h.get("accuracy_after"), "epochs": h.get("epochs"),
            "target": p.target.name if p else m.get("target"),
            "ram_bytes": p.ram_bytes if p else m.get("ram_bytes"),
            "flash_bytes": p.flash_bytes if p else m.get("flash_bytes"),
            "fits": p.fits if p else None, "batch": p.breakdown["batch"] if p else None,
            "macs_per_step": p.macs_per_step["total"] if p else m.get("macs_per_step"),
            "mcu": r.mcu_kind, "mcu_batch": m.get("batch"), "bit_exact": m.get("bit_exact"),
            "mcu_partial_off": m.get("partial", 0.0) >= 1.0 and (r.config or {}).get("lambda_min", 1.0) < 1.0,
            "instructions_per_step": m.get("instructions_per_step"),
            "est_ms_per_step": m.get("est_ms_per_step"),
            "plan_error": r.plan_error,
        })
    return out


def _fmt(v: Any, spec: str) -> str:
    return "-" if v is None else format(v, spec)


def format_table(runs: list[MethodRun]) -> str:
    """The summary table (Markdown, readable as plain text too)."""
    head = ["method", "accuracy before", "after", "RAM", "Flash", "fits", "batch", "MACs/step", "MCU",
            "instructions/step", "est. ms/step"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows(runs):
        mcu = "-"
        if row["mcu"]:
            notes = [f"batch {row['mcu_batch']}"] if row["mcu_batch"] else []
            if row["mcu_partial_off"]:
                notes.append("partial updates off")
            mcu = row["mcu"] + (f" ({', '.join(notes)})" if notes else "")
            mcu += f", {'bit-exact' if row['bit_exact'] else 'MISMATCH'}"
        elif row["accuracy_after"] is not None:
            mcu = "not run"
        cells = [row["method"], _fmt(row["accuracy_before"], ".3f"), _fmt(row["accuracy_after"], ".3f"),
                 kb(row["ram_bytes"]) if row["ram_bytes"] is not None else "-",
                 kb(row["flash_bytes"]) if row["flash_bytes"] is not None else "-",
                 {True: "yes", False: "NO", None: "-"}[row["fits"]], _fmt(row["batch"], "d"),
                 _fmt(row["macs_per_step"], ","),
                 mcu, _fmt(row["instructions_per_step"], ",.0f"), _fmt(row["est_ms_per_step"], ".2f")]
        lines.append("| " + " | ".join(cells) + " |")
    target = next((r.plan.target for r in runs if r.plan), None)
    if target is not None:
        lines.append(f"\nRAM, Flash and MACs: the planner's step on {target.name} ({target.core}, "
                     f"{kb(target.ram_bytes)} RAM, {kb(target.flash_bytes)} Flash; code size estimated). "
                     "Instructions: counted exactly on the emulated core; ms: estimated at the target clock.")
    for r in runs:
        if r.plan_error:
            lines.append(f"{r.name}: not planned ({r.plan_error})")
    return "\n".join(lines)


# ---------------------------------------------------------------- the plots


def _pyplot():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _save(fig, path: Path) -> Path:
    buf = _io.BytesIO()
    fig.savefig(buf, format="png")
    _pyplot().close(fig)
    io.atomic_write_bytes(path, lambda f: f.write(buf.getvalue()))
    return path


def plot_curves(runs: list[MethodRun], path: str | Path) -> Path:
    """Test accuracy (epoch 0 = before training) and training loss per epoch, one line per method."""
    plt = _pyplot()
    fig, (ax_acc, ax_loss) = plt.subplots(1, 2, figsize=(10, 4), dpi=100)
    for r in runs:
        h = r.history
        if not h or not h.get("history"):
            continue
        ep = [e["epoch"] for e in h["history"]]
        ax_acc.plot([0, *ep], [h["accuracy_before"], *(e["accuracy"] for e in h["history"])], marker="o",
                    label=r.label)
        ax_loss.plot(ep, [e["loss"] for e in h["history"]], marker="o", label=r.label)
    ax_acc.set(xlabel="epoch", ylabel="test accuracy", title="accuracy (epoch 0: before training)")
    ax_loss.set(xlabel="epoch", ylabel="mean training loss", title="training loss")
    from matplotlib.ticker import MaxNLocator
    for ax in (ax_acc, ax_loss):
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    return _save(fig, Path(path))


def memory_parts(p: MemoryReport) -> tuple[dict[str, int], dict[str, int]]:
    """(RAM parts, Flash parts) in bytes; the arena is split by role at its busiest step.

    The arena's bytes beyond those alive at that step (gaps the greedy offsets leave) are
    'arena not alive at peak', so the parts sum to the planner's RAM total.
    """
    _, by_role = arena_at_peak(p.plan)
    ram = {f"arena: {k}": v for k, v in sorted(by_role.items(), key=lambda kv: -kv[1])}
    gap = p.breakdown["ram"]["arena"] - sum(by_role.values())
    if gap:
        ram["arena not alive at peak"] = gap
    ram.update({k: v for k, v in p.breakdown["ram"].items() if k != "arena"})
    return ram, dict(p.breakdown["flash"])


def plot_memory(runs: list[MethodRun], path: str | Path) -> Path | None:
    """Stacked RAM and Flash bars per planned method, with the target's limits; None if nothing is planned."""
    planned = [r for r in runs if r.plan is not None]
    if not planned:
        return None
    plt = _pyplot()
    fig, axes = plt.subplots(2, 1, figsize=(11, 2.4 + 1.2 * len(planned)), dpi=100)
    for ax, which in zip(axes, ("RAM", "Flash"), strict=True):
        parts = [memory_parts(r.plan)[which == "Flash"] for r in planned]
        keys = list(dict.fromkeys(k for d in parts for k in d))
        labelled: set[str] = set()
        for i in range(len(planned)):
            left = 0.0
            for k in keys:       # one colour per category in every memory picture (plan.colors)
                v = parts[i].get(k, 0) / 1024
                ax.barh(i, v, left=left, color=category_color(k), edgecolor="white", lw=0.5,
                        label=None if k in labelled or not v else k)
                labelled |= {k} if v else set()
                left += v
        limit = planned[0].plan.target.ram_bytes if which == "RAM" else planned[0].plan.target.flash_bytes
        total = max(sum(d.values()) for d in parts)
        if limit <= 2 * total:
            ax.axvline(limit / 1024, color="black", ls="--", lw=1)
        ax.set_yticks(range(len(planned)), [r.label for r in planned])
        ax.set(xlabel="KB", title=f"{which} on {planned[0].plan.target.name} (limit {kb(limit)})")
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    fig.tight_layout()
    return _save(fig, Path(path))


def write_report(run_dir: str | Path, out_dir: str | Path | None = None, target: str = DEFAULT_TARGET,
                 batch: int | None = None) -> dict[str, Any]:
    """Collect `run_dir`, write the table and plots to `out_dir` (default RUN_DIR/report); the JSON result."""
    runs = collect(run_dir, target, batch)
    out = Path(out_dir) if out_dir is not None else Path(run_dir) / "report"
    out.mkdir(parents=True, exist_ok=True)
    from mcutrain.plan.picture import draw
    files = [plot_curves(runs, out / "curves.png")]
    mem = plot_memory(runs, out / "memory.png")
    files += [mem] if mem else []
    for r in runs:
        if r.plan is not None:
            files.append(draw(r.plan.plan, out / f"lifetime-{r.name}.png", title=r.label, report=r.plan))
    table = format_table(runs)
    doc = {"run_dir": str(run_dir), "target": target, "rows": rows(runs), "table": table}
    io.atomic_write_bytes(out / "summary.md", lambda f: f.write((table + "\n").encode()))
    io.atomic_write_bytes(out / "summary.json", lambda f: f.write(json.dumps(doc, indent=2).encode()))
    doc["files"] = [str(p) for p in (*files, out / "summary.md", out / "summary.json")]
    return doc
