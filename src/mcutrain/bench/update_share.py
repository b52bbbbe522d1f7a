"""`update-share`: do the int8 updates round to nothing? And does stochastic rounding help?

Per method with its default options (the factory's: lr 0.01, batch 32, zo 50 queries,
trainable all), the share of int8 weights one step changes (`train --json`'s
`weights_changed_per_step`, mean over steps) and the accuracy after adaptation, on two
transfer tasks run through the public API (`mcutrain.api.train`, as `mcutrain train`):

- digits: digits-cnn pretrained as the README does (`mcutrain pretrain --arch digits-cnn
  --dataset digits --lr 1e-2`), adapted on `digits-c:stripe:5`;
- fashion: small-cnn pretrained on clean Fashion-MNIST (`zo_protocol.pretrained_file`,
  the ZO benchmarks' model), adapted on `fashion-mnist-c:fog:5`.

zo (wp, np, mix) and bp-qas run with `--update-rounding nearest` and `stochastic` side by
side, on the same seeds and rates; fqt int8/uint8 (their own rounding) once per seed.
Epochs and samples are the budget's (below the defaults: a ZO step at 50 queries is costly).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mcutrain.bench.files import markdown_table, update_docs, write_results
from mcutrain.bench.zo_protocol import Budget as ZOBudget
from mcutrain.bench.zo_protocol import pretrained_file
from mcutrain.progress import Progress

METHODS: dict[str, dict[str, Any]] = {
    "fqt-int8": {"method": "fqt", "precision": "int8"},
    "fqt-uint8": {"method": "fqt", "precision": "uint8"},
    "zo-wp": {"method": "zo", "perturb": "wp"},
    "zo-np": {"method": "zo", "perturb": "np"},
    "zo-mix": {"method": "zo", "perturb": "mix"},
    "bp-qas": {"method": "bp-qas"},
}
LR = 0.01
"""The rate of every run: the factory's default when these were measured (now `--lr auto` chooses
one per run); kept, so the shares stay comparable."""
ROUNDED = ("zo-wp", "zo-np", "zo-mix", "bp-qas")
"""The methods that take `--update-rounding` (run with both)."""


@dataclass(frozen=True)
class Budget:
    """Tasks, epochs, samples and seeds of one run."""

    tasks: tuple[str, ...] = ("digits", "fashion")
    seeds: tuple[int, ...] = (0, 1, 2)
    epochs: dict[str, int] | None = None
    train_samples: dict[str, int | None] | None = None
    test_samples: dict[str, int | None] | None = None
    queries: int | None = None
    """None: zo's default (50)."""

    def of(self, field: str, task: str) -> Any:
        defaults = {"epochs": {"digits": 2, "fashion": 1},
                    "train_samples": {"digits": None, "fashion": 160},
                    "test_samples": {"digits": None, "fashion": 1000}}
        table = getattr(self, field) or defaults[field]
        return table[task]


QUICK = Budget(tasks=("digits",), seeds=(0,), epochs={"digits": 1}, train_samples={"digits": 128},
               test_samples={"digits": 100}, queries=2)

DATASETS = {"digits": "digits-c:stripe:5", "fashion": "fashion-mnist-c:fog:5"}


def pretrained_digits(work: Path) -> Path:
    """digits-cnn pretrained as the README does, cached in `work`."""
    from mcutrain.cli import main
    path = work / "update-share-digits.npz"
    if not path.exists():
        work.mkdir(parents=True, exist_ok=True)
        if main(["pretrain", "--arch", "digits-cnn", "--dataset", "digits", "--lr", "1e-2", "-o", str(path)]):
            raise RuntimeError("pretraining digits-cnn failed")
    return path


def model_of(task: str, work: Path, quick: bool) -> Path:
    if task == "digits":
        return pretrained_digits(work)
    return pretrained_file(work, ZOBudget(), quick)


def one_run(model: Path, task: str, name: str, rounding: str, seed: int, budget: Budget) -> dict[str, Any]:
    """Train once through the API; the row of the result file."""
    from mcutrain.api.training import train
    opts = dict(METHODS[name])
    method = opts.pop("method")
    if name in ROUNDED:
        opts["update_rounding"] = rounding
    if method == "zo" and budget.queries is not None:
        opts["queries"] = budget.queries
    t0 = time.perf_counter()
    r = train(str(model), DATASETS[task], method, train_samples=budget.of("train_samples", task),
              test_samples=budget.of("test_samples", task), epochs=budget.of("epochs", task), seed=seed,
              lr=LR, **opts).result
    share = r.get("weights_changed_per_step") or {"overall": float("nan"), "layers": {}}
    return {"task": task, "dataset": DATASETS[task], "method": name, "update_rounding": rounding,
            "seed": seed, "lr": LR, "steps": r["steps"], "accuracy_before": r["accuracy_before"],
            "accuracy_after": r["accuracy_after"], "weights_changed_per_step": share["overall"],
            "weights_changed_per_layer": share["layers"], "seconds": time.perf_counter() - t0}


def summarize(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Mean over seeds per (task, method, rounding)."""
    out = []
    keys = sorted({(r["task"], r["method"], r["update_rounding"]) for r in rows},
                  key=lambda k: (k[0], list(METHODS).index(k[1]), k[2]))
    for task, name, rounding in keys:
        sel = [r for r in rows if (r["task"], r["method"], r["update_rounding"]) == (task, name, rounding)]
        out.append({"task": task, "method": name, "update_rounding": rounding, "seeds": len(sel),
                    "accuracy_before": float(np.mean([r["accuracy_before"] for r in sel])),
                    "accuracy_after": float(np.mean([r["accuracy_after"] for r in sel])),
                    "accuracy_after_sd": float(np.std([r["accuracy_after"] for r in sel])),
                    "weights_changed_per_step": float(np.mean([r["weights_changed_per_step"] for r in sel]))})
    return out


def run(work: Path, results: Path, quick: bool = False, log=print, docs: Path = Path("docs"),
        budget: Budget | None = None) -> dict[str, Any]:
    """Share of int8 weights each step changes, per method, nearest against stochastic rounding."""
    budget = budget or (QUICK if quick else Budget())
    roundings = {name: ("nearest", "stochastic") if name in ROUNDED else ("-",) for name in METHODS}
    plan = [(task, name, rounding, seed) for task in budget.tasks for name in METHODS
            for rounding in roundings[name] for seed in budget.seeds]
    models = {task: model_of(task, Path(work), quick) for task in budget.tasks}
    rows: list[dict[str, Any]] = []
    bar = Progress(len(plan), "update-share", unit="run")
    t0 = time.perf_counter()
    for task, name, rounding, seed in plan:
        rows.append(one_run(models[task], task, name, rounding, seed, budget))
        bar.update(1)
        summary = summarize(rows)        # written after every run, so an interrupted run keeps its rows
        path = write_results(results, "update-share", rows, quick, summary=summary, budget=asdict(budget),
                             seconds=time.perf_counter() - t0, complete=len(rows) == len(plan))
    bar.close()
    table = markdown_table(summary, ["task", "method", "update_rounding", "seeds", "accuracy_before",
                                     "accuracy_after", "accuracy_after_sd", "weights_changed_per_step"],
                           {"accuracy_before": ".3f", "accuracy_after": ".3f", "accuracy_after_sd": ".3f",
                            "weights_changed_per_step": ".5f"})
    if not quick:
        update_docs(docs, "update-share", f"Share of int8 weights changed per step (mean over steps and "
                    f"seeds) and accuracy after adaptation, default options (lr 0.01), "
                    f"`mcutrain bench update-share`:\n\n{table}")
    log(table)
    log(f"wrote {path}")
    return {"rows": rows, "summary": summary}


def register(add) -> None:
    """Hook for the benchmark registry: `add(name, func)` with `func(work, results, quick, log, docs)`."""
    add("update-share", run)
