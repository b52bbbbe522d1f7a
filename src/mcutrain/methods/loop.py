"""The training loop shared by every method: epochs, shuffling, schedule, evaluation.

The data order of epoch e is a permutation drawn from (seed, e) alone, so a
run resumed from a saved state continues with exactly the batches an
uninterrupted run would have seen. A checkpoint stores the run's
configuration (`resume.run_config`); resuming under another one is refused by
name unless allowed (`allow_changed`), because the schedule's total and the
data order are part of every step.
"""

from __future__ import annotations

import math
import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from mcutrain.allocator import keep_freed_memory
from mcutrain.methods import resume as rs
from mcutrain.methods.base import (
    StepStats,
    TrainingMethod,
    apply_state,
    check_method_settings,
    read_state,
    save_state,
    verify_state,
)
from mcutrain.methods.state_file import StateFileError, data_sha256
from mcutrain.methods.update_share import UpdateShare
from mcutrain.progress import Progress


def cosine_lr(base_lr: float, step: int, total_steps: int, min_fraction: float = 0.0) -> float:
    """Cosine decay from `base_lr` at step 0 to `min_fraction * base_lr` at the last step."""
    if total_steps <= 1:
        return base_lr
    t = min(step, total_steps - 1) / (total_steps - 1)
    return base_lr * (min_fraction + (1 - min_fraction) * 0.5 * (1 + math.cos(math.pi * t)))


def evaluate(method: TrainingMethod, x: np.ndarray, y: np.ndarray, batch: int = 500) -> float:
    """Accuracy of `method.predict` over (x, y), in batches to bound memory."""
    if len(x) == 0:
        return float("nan")
    hits = sum(int(np.sum(method.predict(x[i:i + batch]) == y[i:i + batch]))
               for i in range(0, len(x), batch))
    return hits / len(x)


@dataclass
class FitResult:
    """The outcome of `fit`: per-epoch history and totals for reports and `--json`."""

    accuracy_before: float
    accuracy_after: float
    epochs: int
    steps: int
    samples_per_s: float
    macs: dict[str, int]
    forward_passes: int
    history: list[dict[str, Any]] = field(default_factory=list)
    best_val_epoch: int | None = None
    notes: list[str] = field(default_factory=list)
    """What an allowed configuration change on resume did (for the user to read)."""
    weights_changed_per_step: dict[str, Any] | None = None
    """`update_share.UpdateShare.result()` over the steps this call ran (a resumed run: since the
    resume); None for a method without integer weights."""

    @property
    def forward_macs(self) -> int:
        return self.macs.get("forward", 0)

    @property
    def backward_macs(self) -> int:
        return self.macs.get("error", 0) + self.macs.get("weight_grad", 0)


def fit(method: TrainingMethod, x_train: np.ndarray, y_train: np.ndarray,
        x_test: np.ndarray, y_test: np.ndarray, *, epochs: int, batch: int, lr: float,
        seed: int = 0, schedule: str = "cosine", x_val: np.ndarray | None = None,
        y_val: np.ndarray | None = None, checkpoint: str | Path | None = None,
        resume: str | Path | None = None, stop_after_steps: int | None = None,
        progress: bool | None = None, fingerprint: Mapping[str, Any] | None = None,
        allow_changed: Collection[str] = ()) -> FitResult:
    """Train `method` for `epochs` over (x_train, y_train); evaluate after every epoch.

    With a validation set, the reported accuracy is the test accuracy at the
    epoch of best validation accuracy (the ZO seed's protocol) and the method
    is left in that epoch's state. `checkpoint` saves the state after every
    epoch; `resume` continues from such a file. `stop_after_steps` ends early
    (mid-epoch) after that many steps in total, for tests of resumption.
    `fingerprint` adds what the caller knows of the run (dataset spec, model
    identity: keys of `resume.SETTINGS`) to the configuration a checkpoint
    stores; `allow_changed` names the settings that may differ on resume.
    Unusable or mismatched resume files raise `StateFileError` (a ValueError).
    """
    if epochs < 1 or batch < 1:
        raise ValueError("epochs and batch must be at least 1")
    if not (isinstance(lr, (int, float, np.floating, np.integer)) and math.isfinite(lr) and lr > 0):
        raise ValueError(f"the learning rate must be a finite number > 0, got {lr!r}")
    if len(x_train) == 0 or len(x_train) != len(y_train):
        raise ValueError(f"need training samples with one label each, got {len(x_train)} samples and "
                         f"{len(y_train)} labels")
    if schedule not in ("cosine", "constant"):
        raise ValueError(f"unknown schedule '{schedule}' (cosine, constant)")
    keep_freed_memory()       # NOTE: steps re-allocate the same large buffers (see mcutrain.allocator)
    n = len(x_train)
    steps_per_epoch = math.ceil(n / batch)
    total = epochs * steps_per_epoch
    loop: dict[str, Any] = {"step": 0, "history": [], "accuracy_before": None, "seconds": 0.0,
                            "samples": 0, "macs": {}, "forward_passes": 0, "best": None}
    best_state = None
    notes: tuple[str, ...] = ()
    run = None
    if checkpoint is not None or resume is not None:
        run = rs.run_config(epochs=epochs, batch=batch, lr=lr, schedule=schedule, seed=seed,
                            steps_per_epoch=steps_per_epoch, train_data=data_sha256(x_train, y_train),
                            test_data=data_sha256(x_test, y_test), val_data=data_sha256(x_val, y_val),
                            extra=fingerprint)
    if resume is not None:
        loop, best_state, notes = _resume(resume, method, run, rs.check_allowed(allow_changed))
    if loop["accuracy_before"] is None:
        loop["accuracy_before"] = evaluate(method, x_test, y_test)
    bar = Progress(total, method.name, show=progress, initial=loop["step"])
    epoch_stats: list[StepStats] = []
    share = UpdateShare()
    while loop["step"] < total:
        epoch, i = divmod(loop["step"], steps_per_epoch)
        order = np.random.default_rng([seed, epoch]).permutation(n)
        idx = order[i * batch:(i + 1) * batch]
        rate = cosine_lr(lr, loop["step"], total) if schedule == "cosine" else lr
        share.before(method)
        t0 = time.perf_counter()
        stats = method.step(x_train[idx], y_train[idx], rate)
        loop["seconds"] += time.perf_counter() - t0
        share.after(method)
        loop["samples"] += len(idx)
        loop["forward_passes"] += stats.forward_passes
        for k, v in stats.macs.items():
            loop["macs"][k] = loop["macs"].get(k, 0) + int(v)
        epoch_stats.append(stats)
        loop["step"] += 1
        bar.update(1, loss=float(stats.loss))
        if not math.isfinite(stats.loss):
            bar.close()
            raise FloatingPointError(f"{method.name}: loss became {stats.loss} at step {loop['step']}; "
                                     "lower the learning rate")
        if loop["step"] % steps_per_epoch == 0:
            entry = _epoch_entry(epoch, epoch_stats, method, x_test, y_test, x_val, y_val)
            loop["history"].append(entry)
            epoch_stats = []
            if x_val is not None and (loop["best"] is None or entry["val_accuracy"] > loop["best"][1]):
                loop["best"] = [epoch, entry["val_accuracy"], entry["test_accuracy"]]
                best_state = method.state()
                if checkpoint is not None:
                    save_state(_best_path(checkpoint), method, loop, run)
            if checkpoint is not None:
                save_state(checkpoint, method, loop, run)
        if stop_after_steps is not None and loop["step"] >= stop_after_steps:
            break
    bar.close()
    if best_state is not None:
        method.load_state(*best_state)
    after = loop["best"][2] if loop["best"] else (loop["history"][-1]["test_accuracy"]
                                                  if loop["history"] else evaluate(method, x_test, y_test))
    return FitResult(
        accuracy_before=loop["accuracy_before"], accuracy_after=after, epochs=epochs,
        steps=loop["step"], samples_per_s=loop["samples"] / max(loop["seconds"], 1e-9),
        macs=dict(loop["macs"]), forward_passes=loop["forward_passes"], history=loop["history"],
        best_val_epoch=loop["best"][0] if loop["best"] else None, notes=list(notes),
        weights_changed_per_step=share.result())


def _resume(path: str | Path, method: TrainingMethod, run: dict[str, Any], allowed: tuple[str, ...]):
    """(loop, best state or None, notes) from a checkpoint, after every check; StateFileError if unusable.

    The run's configuration is compared first (it names the options to fix),
    then the method's settings and state, then the loop's position; the
    `.best.npz` companion must pass the same checks and belong to the same run.
    """
    doc, arrays = read_state(path)
    check_method_settings(doc, method, path)
    saved = doc["run"]
    rs.check_run_types(saved, path)
    notes = rs.compare_runs(saved, run, allowed, path)
    verify_state(doc, arrays, method, path, max_steps=saved["total-steps"])
    loop = doc["loop"]
    rs.check_loop(loop, saved, path)
    step = rs.resume_position(loop["step"], saved, run, path)
    best_state = None
    if loop["best"] is not None:
        best = _best_path(path)
        if not best.is_file():
            raise StateFileError(f"'{best}' is missing: '{path}' keeps its best validation epoch's state "
                                 "there; keep the two files of one run together")
        bdoc, barrays = read_state(best)
        same_best = isinstance(bdoc["loop"], dict) and bdoc["loop"].get("best") == loop["best"]
        if bdoc["run"] != saved or not same_best:
            raise StateFileError(f"'{best}' does not belong to '{path}' (another run or another best epoch); "
                                 "keep the two files of one run together")
        verify_state(bdoc, barrays, method, best, max_steps=saved["total-steps"])
        best_state = (bdoc["state"], barrays)
    apply_state(doc, arrays, method, path)
    return {**loop, "step": step}, best_state, notes


def _best_path(checkpoint: str | Path) -> Path:
    """Where the state of the best validation epoch is kept beside a checkpoint."""
    p = Path(checkpoint)
    return p.with_name(p.stem + ".best.npz")


def _epoch_entry(epoch: int, stats: list[StepStats], method: TrainingMethod, x_test, y_test,
                 x_val, y_val) -> dict[str, Any]:
    samples = sum(s.samples for s in stats)
    entry = {"epoch": epoch + 1,
             "loss": sum(s.loss * s.samples for s in stats) / max(samples, 1),
             "train_accuracy": sum(s.correct for s in stats) / max(samples, 1),
             "test_accuracy": evaluate(method, x_test, y_test)}
    if x_val is not None:
        entry["val_accuracy"] = evaluate(method, x_val, y_val)
    return entry
