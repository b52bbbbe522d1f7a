"""`lr-defaults`: does the default rate (`--lr auto`) come close to the best of a 5-point grid?

Each case trains once with default options (`lr` left out: `--lr auto`, `methods.lr_auto`) and
once per rate of a 5-point grid, through the public API (`mcutrain.api.train`, as `mcutrain
train`), on seed 0; the gap is the grid's best test accuracy minus the default's, in points:

- fqt int8 from scratch (He-initialized, `--init random`): digits-cnn on digits, mnist1d-cnn on
  MNIST-1D, small-cnn on a Fashion-MNIST subset. Target: gap <= 2.
- zo (mix) and bp-qas adapting small-cnn pretrained on clean Fashion-MNIST (the zo-adapt model,
  `zo_protocol.pretrained_file`) to a few Fashion-MNIST-C corruptions at severity 5, zo-adapt's
  setting (100 training samples, 5 epochs, trainable conv2 and fc1, 20 queries). Target: gap <= 3.
- the 784-128-64-10 MLP a new user tried, from scratch on a Fashion-MNIST subset, with fqt
  int8, zo and bp-qas (reported, no target).

The subsets, epochs and queries are in the result file's `budget` (`BUDGET`); the test accuracy is
on a fixed test subset. The grid is the same 5 rates for every case of a method; cases run on
`Budget.workers` processes.
"""

from __future__ import annotations

import multiprocessing
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from mcutrain import graph as G
from mcutrain import io, zoo
from mcutrain.bench.files import limit_threads, markdown_table, update_docs, write_results
from mcutrain.bench.zo_protocol import TRAINABLE, pretrained_file
from mcutrain.bench.zo_protocol import Budget as ZOBudget
from mcutrain.data import load_dataset
from mcutrain.errors import UserError
from mcutrain.graph import Graph
from mcutrain.methods import float as float_method
from mcutrain.progress import Progress

NAME = "lr-defaults"
GRIDS: dict[str, tuple[float, ...]] = {"fqt": (1e-4, 3e-4, 1e-3, 3e-3, 1e-2),
                                       "zo": (0.03, 0.1, 0.3, 1.0, 3.0),
                                       "bp-qas": (0.01, 0.03, 0.1, 0.3, 1.0)}
"""The 5-point grid of each method (fqt: from below the auto rate of long runs to the old default)."""
TARGETS = {"scratch": 2.0, "adapt": 3.0}
"""Largest gap (points) the issue allows per kind of case; the MLP's is reported only."""


@dataclass(frozen=True)
class Case:
    """One training setting: its kind, method, model source and data."""

    kind: str
    """scratch (fqt from random weights), adapt (a pretrained model), mlp (the new user's MLP)."""
    name: str
    method: str
    dataset: str
    model: str
    """A zoo architecture (from scratch), `pretrained` (the adaptation model) or `mlp`."""
    epochs: int
    train_samples: int | None
    test_samples: int | None
    options: tuple[tuple[str, Any], ...] = ()


@dataclass(frozen=True)
class Budget:
    cases: tuple[Case, ...]
    pretrained: str = "fashion"
    """The adaptation model: `fashion` (zo-adapt's small-cnn) or `digits` (digits-cnn, quick)."""
    seed: int = 0
    workers: int = 2
    """Processes running cases side by side (spawned, one BLAS thread each); results do not depend on it."""


def _adapt(corruption: str, method: str, spec: str = "fashion-mnist-c:{}:5", n_test: int | None = 1000,
           epochs: int = 5, queries: int = 20, trainable: str = TRAINABLE) -> Case:
    opts = (("trainable", trainable),) + ((("queries", queries),) if method == "zo" else ())
    return Case("adapt", corruption, method, spec.format(corruption), "pretrained", epochs, 100, n_test, opts)


def _mlp(method: str) -> Case:
    return Case("mlp", "fashion-mnist", method, "fashion-mnist", "mlp", 2, 2000, 1000,
                (("queries", 20),) if method == "zo" else ())


BUDGET = Budget(cases=(
    Case("scratch", "digits", "fqt", "digits", "digits-cnn", 10, None, None, (("precision", "int8"),)),
    Case("scratch", "mnist1d", "fqt", "mnist1d", "mnist1d-cnn", 5, None, None, (("precision", "int8"),)),
    Case("scratch", "fashion-mnist", "fqt", "fashion-mnist", "small-cnn", 2, 4000, 1000,
         (("precision", "int8"),)),
    *(_adapt(c, m, n_test=500) for c in ("gaussian_noise", "fog", "zigzag") for m in ("zo", "bp-qas")),
    *(_mlp(m) for m in ("fqt", "zo", "bp-qas")),
))
"""The full run's cases (digits and MNIST-1D whole; Fashion-MNIST subsets; test subsets of 500 or
1,000 samples), sized for about 20 minutes on two processes of the loaded shared machine."""
QUICK = Budget(cases=(
    Case("scratch", "digits", "fqt", "digits", "digits-cnn", 1, 128, 100, (("precision", "int8"),)),
    _adapt("stripe", "zo", "digits-c:{}:5", 100, 1, 2, "all"),
), pretrained="digits", workers=1)
"""One case per branch of `one_run` (a zoo architecture from scratch; the pretrained model with a
searching method); bp-qas's search is tested on its own in tests/methods/test_lr_auto.py."""


def mlp(num_classes: int = 10, input_shape=(28, 28, 1), seed: int = 0) -> Graph:
    """784-128-64-10 with relu, He-initialized: the MLP of the report that `--lr 0.01` did not train."""
    n_in = int(input_shape[0] * input_shape[1] * input_shape[2])
    nodes = [G.flatten("flatten", G.INPUT), G.linear("fc1", "flatten", 128, act="relu", in_features=n_in),
             G.linear("fc2", "fc1", 64, act="relu", in_features=128),
             G.linear("fc3", "fc2", num_classes, in_features=64)]
    return zoo.he_init(Graph(tuple(input_shape), nodes, "mlp-784-128-64-10"), seed)


def pretrained_path(work: Path, budget: Budget, quick: bool) -> Path:
    """The adaptation model's file, trained once and cached in `work` (quick: digits-cnn, one float epoch)."""
    if budget.pretrained == "digits":
        path = work / "lr-defaults-digits.npz"
        if not path.exists():
            ds = load_dataset("digits", seed=0)
            g = zoo.build("digits-cnn", seed=0)
            float_method.train(g, ds.x_train, ds.y_train, epochs=1, batch=32, lr=1e-2, seed=0, progress=False)
            work.mkdir(parents=True, exist_ok=True)
            io.save(path, g)
        return path
    return pretrained_file(work, ZOBudget(), quick)


def one_run(case: Case, lr: float | None, pretrained: Path, seed: int) -> dict[str, Any]:
    """Train `case` once at `lr` (None: the default, `--lr auto`); its accuracy and rate."""
    from mcutrain.api.training import train
    opts = dict(case.options) | ({} if lr is None else {"lr": lr})
    model: Any = None
    arch = None
    if case.model == "pretrained":
        model = str(pretrained)
    elif case.model == "mlp":
        model = mlp(seed=seed)
    else:
        arch = case.model
    t0 = time.perf_counter()
    try:
        r = train(model, case.dataset, case.method, arch=arch, train_samples=case.train_samples,
                  test_samples=case.test_samples, epochs=case.epochs, seed=seed, **opts).result
        acc, used, reason = r["accuracy_after"], r["lr_used"], r["lr_reason"]
    except UserError as e:    # NOTE: a diverged grid rate (the loop refuses a non-finite loss) scores 0
        if lr is None:
            raise
        acc, used, reason = 0.0, lr, f"diverged: {e}"
    return {"accuracy": acc, "lr": used, "reason": reason, "seconds": time.perf_counter() - t0}


def case_row(case: Case, default: dict[str, Any], grid: dict[float, dict[str, Any]]) -> dict[str, Any]:
    """The result row of one case: the default's rate and accuracy against the grid's best."""
    best = max(grid, key=lambda lr: (grid[lr]["accuracy"], -lr))
    gap = 100 * (grid[best]["accuracy"] - default["accuracy"])
    target = TARGETS.get(case.kind)
    return {"kind": case.kind, "case": case.name, "method": case.method, "dataset": case.dataset,
            "model": case.model, "epochs": case.epochs, "train_samples": case.train_samples,
            "lr_used": default["lr"], "lr_reason": default["reason"], "default_accuracy": default["accuracy"],
            "grid": {f"{lr:g}": grid[lr]["accuracy"] for lr in grid}, "best_lr": best,
            "best_accuracy": grid[best]["accuracy"], "gap_points": gap, "target_points": target,
            "met": None if target is None else bool(gap <= target),
            "seconds": default["seconds"] + sum(g["seconds"] for g in grid.values())}


def one_case(case: Case, pretrained: Path, seed: int) -> dict[str, Any]:
    """The default run and the grid's runs of `case` (one worker's unit, one BLAS thread)."""
    with limit_threads(1):
        default = one_run(case, None, pretrained, seed)
        return case_row(case, default, {lr: one_run(case, lr, pretrained, seed) for lr in GRIDS[case.method]})


def run(work: Path, results: Path, quick: bool = False, log=print, docs: Path = Path("docs"),
        budget: Budget | None = None) -> dict[str, Any]:
    """Default rate against the best of a 5-point grid, per case (see the module docstring)."""
    budget = budget or (QUICK if quick else BUDGET)
    needs_model = any(c.model == "pretrained" for c in budget.cases)
    pretrained = pretrained_path(Path(work), budget, quick) if needs_model else Path()
    done: dict[int, dict[str, Any]] = {}
    t0 = time.perf_counter()
    path = Path()

    def record(i: int, row: dict[str, Any]) -> None:
        nonlocal path
        done[i] = row
        bar.update(1)
        log(f"{NAME} {row['kind']} {row['case']} {row['method']}: default lr {row['lr_used']:g} "
            f"{row['default_accuracy']:.4f}, best {row['best_lr']:g} {row['best_accuracy']:.4f}")
        rows = [done[k] for k in sorted(done)]       # written after every case, in the budget's order
        path = write_results(results, NAME, rows, quick, budget=asdict(budget), seed=budget.seed,
                             grids={m: list(g) for m, g in GRIDS.items()}, targets=TARGETS,
                             seconds=time.perf_counter() - t0, complete=len(rows) == len(budget.cases))

    with Progress(len(budget.cases), NAME, unit="case") as bar:
        if budget.workers > 1:
            with ProcessPoolExecutor(budget.workers, mp_context=multiprocessing.get_context("spawn")) as pool:
                futures = {pool.submit(one_case, c, pretrained, budget.seed): i
                           for i, c in enumerate(budget.cases)}
                for f in as_completed(futures):
                    record(futures[f], f.result())
        else:
            for i, c in enumerate(budget.cases):
                record(i, one_case(c, pretrained, budget.seed))
    rows = [done[k] for k in sorted(done)]
    table = markdown_table(rows, ["kind", "case", "method", "lr_used", "default_accuracy", "best_lr",
                                  "best_accuracy", "gap_points", "target_points", "met"],
                           {"lr_used": ".3g", "default_accuracy": ".4f", "best_accuracy": ".4f",
                            "gap_points": ".2f"})
    if not quick:
        update_docs(docs, NAME, "Default rate (`--lr auto`) against the best of a 5-point grid, seed 0, "
                    f"`mcutrain bench {NAME}` (gap: best minus default, points):\n\n{table}")
    log(table)
    log(f"wrote {path}")
    return {"rows": rows}


def register(add) -> None:
    """Hook for the benchmark registry: `add(name, func)` with `func(work, results, quick, log, docs)`."""
    add(NAME, run)
