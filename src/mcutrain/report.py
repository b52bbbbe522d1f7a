"""Reports of training runs: one summary table and the plots people look at.

A run folder holds what `mcutrain train -o NAME.npz` writes (the adapted model, its training
history inside it; runs of older versions have `NAME.history.json` beside it) and,
optionally, `NAME.mcu.json`: the `--json` result of `mcutrain run` for that model (the demo
writes it; by hand: `mcutrain run NAME.npz ... --json > NAME.mcu.json`). A `.mcu.json`
without a history (an inference-only model) gets its own row.

Each trained model is planned on a target with the settings it was trained with (read from
the model file's provenance), so the table's RAM and Flash are what that very training step
needs. A row is one configuration (`CONFIG`): an MCU run joins a trained model's row only when
it ran the trained configuration, else it gets a row of its own. The report writes:

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

        `mcutrain run --json` names its method; for a run saved by an older version, which did
        not, a run whose MACs per step equal one inference of the model was an inference run.
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
        if (self.config or {}).get("method"):
            return config_label(self.config)
        return "int8 inference" if self.history is None else self.name

    def trained_config(self) -> dict[str, Any] | None:
        """The `CONFIG` of the trained (and planned) step, None without a plan."""
        if self.plan is None or not self.config:
            return None
        c, b = self.config, self.plan.breakdown
        return {"method": c["method"], "precision": precision_of(c), "queries": c.get("queries"),
                "batch": b["batch"], "trainable": list(b["trainable"]),
                "partial": float(c.get("lambda_min", 1.0)) if c["method"] == "fqt" else None}


CONFIG = ("method", "precision", "queries", "batch", "trainable", "partial")
"""What makes one configuration of a step: a row of the report holds figures of one only."""


def precision_of(c: dict[str, Any]) -> str:
    """The number format of a method's step: fqt's precision; zo, bp-qas and inference run int8."""
    m = c.get("method")
    return str(c.get("precision") or "uint8") if m == "fqt" else ("float32" if m == "float" else "int8")


def config_label(c: dict[str, Any]) -> str:
    """A short label of a configuration, e.g. 'fqt int8, partial 0.5' or 'zo mix, 10 queries'."""
    m = c.get("method")
    if m == "fqt":
        partial = c.get("lambda_min", c.get("partial")) or 1.0
        return f"fqt {precision_of(c)}" + (f", partial {partial:g}" if partial < 1.0 else "")
    if m == "zo":
        return f"zo {c.get('perturb') or 'mix'}, {c.get('queries', '?')} queries"
    return "int8 inference" if m in (None, "none") else str(m)


def mcu_config(m: dict[str, Any]) -> dict[str, Any]:
    """The `CONFIG` of a saved `mcutrain run --json` (keys an older run did not write are None)."""
    method = m.get("method", "none")
    return {"method": method, "precision": precision_of(m), "queries": m.get("queries"),
            "batch": m.get("batch", 1 if method == "none" else None), "trainable": m.get("trainable"),
            "partial": m.get("partial", 1.0) if method == "fqt" else None}


def same_config(trained: dict[str, Any] | None, mcu: dict[str, Any]) -> bool:
    """Whether an MCU run measured the trained step: equal in every `CONFIG` key both know."""
    if trained is None:
        return False
    return all(trained[k] == mcu[k] for k in CONFIG if trained[k] is not None and mcu[k] is not None)


def describe_config(c: dict[str, Any]) -> str:
    """'method zo, precision int8, queries 10, batch 32, trainable conv1,conv2,fc'."""
    parts = [f"{k} {','.join(v) if isinstance(v, list) else v}" for k, v in c.items() if v is not None]
    return ", ".join(parts)


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


def measured_config(r: MethodRun) -> dict[str, Any] | None:
    """The `CONFIG` of a run's saved MCU run; an older one without `method` is told by its MACs."""
    if not r.mcu:
        return None
    c = mcu_config(r.mcu)
    if "method" not in r.mcu:
        c["method"] = "none" if r.mcu_kind == "inference" else (r.config or {}).get("method")
    return c


def _mcu_figures(kind: str | None, m: dict[str, Any]) -> dict[str, Any]:
    keys = ("bit_exact", "instructions_per_step", "est_ms_per_step")
    return {"mcu": kind, **{k: m.get(k) for k in keys}}


def rows(runs: list[MethodRun]) -> list[dict[str, Any]]:
    """The table as JSON rows (None where a figure is not known), one configuration per row.

    A trained run's MCU figures join its row only when the MCU ran the trained configuration
    (`same_config`); otherwise they get a row of their own (name `NAME.mcu`) with the MCU run's
    configuration, the planner's RAM/Flash of that library, its MACs and no accuracy.
    """
    out = []
    for r in runs:
        h, p, m = r.history or {}, r.plan, r.mcu or {}
        trained, measured = r.trained_config(), measured_config(r)
        joined = measured is not None and (trained is None or same_config(trained, measured))
        if p is None and measured is not None:      # an MCU run alone (the model's inference)
            out.append(_mcu_row(r.name, measured, m, r.mcu_kind, h, r.plan_error))
            continue
        out.append({
            "name": r.name, "method": r.label, "config": trained,
            "accuracy_before": h.get("accuracy_before"), "accuracy_after": h.get("accuracy_after"),
            "epochs": h.get("epochs"), "target": p.target.name if p else None,
            "ram_bytes": p.ram_bytes if p else None, "flash_bytes": p.flash_bytes if p else None,
            "fits": p.fits if p else None, "batch": p.breakdown["batch"] if p else None,
            "macs_per_step": p.macs_per_step["total"] if p else None,
            **_mcu_figures(r.mcu_kind if joined else None, m if joined else {}),
            "mcu_elsewhere": measured is not None and not joined, "plan_error": r.plan_error,
        })
        if measured is not None and not joined:
            out.append(_mcu_row(f"{r.name}.mcu", measured, m, r.mcu_kind, {}, None))
    return out


def _mcu_row(name: str, c: dict[str, Any], m: dict[str, Any], kind: str | None, h: dict[str, Any],
             plan_error: str | None) -> dict[str, Any]:
    """A row of an MCU run's own configuration: the planner's figures it saved (older runs: the image's)."""
    label = config_label(c) + (" (MCU run)" if name.endswith(".mcu") else "")
    return {"name": name, "method": label, "config": c, "accuracy_before": h.get("accuracy_before"),
            "accuracy_after": h.get("accuracy_after"), "epochs": h.get("epochs"), "target": m.get("target"),
            "ram_bytes": m.get("planned_ram_bytes", m.get("ram_bytes")),
            "flash_bytes": m.get("planned_flash_bytes", m.get("flash_bytes")), "fits": m.get("fits"),
            "batch": c["batch"], "macs_per_step": m.get("macs_per_step"), **_mcu_figures(kind, m),
            "mcu_elsewhere": False, "plan_error": plan_error}


def _fmt(v: Any, spec: str) -> str:
    return "-" if v is None else format(v, spec)


def format_table(runs: list[MethodRun]) -> str:
    """The summary table (Markdown, readable as plain text too), then each row's configuration."""
    head = ["method", "accuracy before", "after", "RAM", "Flash", "fits", "batch", "MACs/step", "MCU",
            "instructions/step", "est. ms/step"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    table = rows(runs)
    for row in table:
        mcu = "-"
        if row["mcu"]:
            mcu = f"{row['mcu']}, {'bit-exact' if row['bit_exact'] else 'MISMATCH'}"
        elif row["mcu_elsewhere"]:
            mcu = "another configuration: next row"
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
                     "Instructions: counted exactly on the emulated core; ms: estimated at the target clock. "
                     "Every figure of a row is of the configuration below:")
    for row in table:
        if row["config"]:
            lines.append(f"- {row['name']}: {describe_config(row['config'])}")
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
