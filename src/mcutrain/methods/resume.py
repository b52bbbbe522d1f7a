"""Resume rules: the run's configuration fingerprint, what may differ, and the loop's position.

A checkpoint continues one run. A resume that silently used another learning
rate, batch, dataset or number of epochs would produce a run that equals
neither the old nor the new configuration (the cosine schedule's total is
part of every step's rate), so every difference is refused by name unless the
caller allows it (`--resume-changed OPTION,...`); then the result says what
changes. Method settings, the seed and the model can never change: the saved
arrays, qparams and random streams derive from them.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcutrain.methods.state_file import StateFileError
from mcutrain.methods.state_schema import int_in, kind_of, raise_problems


@dataclass(frozen=True)
class Setting:
    """One entry of the fingerprint: how messages name it, and whether and how it may change."""

    label: str
    changeable: bool
    effect: str
    """What a resume with another value does (printed when the change is allowed)."""
    digest: bool = False
    """A sha256 identity: shown shortened."""


_NEW_DATA = ("the remaining epochs train on the new data from the checkpoint's epoch boundary, so the "
             "run equals no straight run; accuracy_before and the earlier history refer to the old data")
SETTINGS: dict[str, Setting] = {
    "epochs": Setting("--epochs", True, "the cosine schedule is recomputed for the new total, so the run "
                                        "differs from a straight run of either length"),
    "lr": Setting("--lr", True, "the remaining steps take their rates from the new base rate, so the "
                                "run differs from a straight run"),
    "batch": Setting("--batch", True, "the remaining epochs use the new batch size from the checkpoint's "
                                      "epoch boundary; the step count is re-counted in new batches"),
    "schedule": Setting("the schedule", True, "the remaining steps follow the new schedule"),
    "dataset": Setting("--dataset", True, _NEW_DATA),
    "train-samples": Setting("--train-samples", True, _NEW_DATA),
    "test-samples": Setting("--test-samples", True, "accuracy is measured on the new test set from now "
                                                    "on; earlier history entries used the old one"),
    "train-data": Setting("the training data", True, _NEW_DATA, digest=True),
    "test-data": Setting("the test data", True, "accuracy is measured on the new test set from now on",
                         digest=True),
    "val-data": Setting("the validation data", True, "the best epoch is chosen on the new validation set "
                                                     "from now on", digest=True),
    "seed": Setting("--seed", False, "the seed also drew the initial weights, the calibration samples and "
                                     "the method's random stream"),
    "model": Setting("the model", False, "the saved state belongs to the model it was trained from"),
}
CHANGEABLE = tuple(k for k, s in SETTINGS.items() if s.changeable)
"""What `--resume-changed` accepts; allowing an option also allows the data identities it sets."""
IMPLIES = {"dataset": ("train-data", "test-data", "val-data"), "train-samples": ("train-data",),
           "test-samples": ("test-data",)}
"""A changed option explains (and, when allowed, allows) a change of these data identities."""
DERIVED = ("steps-per-epoch", "total-steps")
"""Stored for checks of the loop position; they follow from epochs, batch and the data."""
MAX_EPOCHS = 10**7
MAX_FORWARD_PER_STEP = 2**24
"""Bound of the forward passes one step may run (zeroth-order methods run queries x layers)."""
MAX_TOTAL_STEPS = 2**40


def run_config(*, epochs: int, batch: int, lr: float, schedule: str, seed: int, steps_per_epoch: int,
               train_data: str | None, test_data: str | None, val_data: str | None,
               extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The fingerprint `fit` stores in a checkpoint and compares on resume."""
    run: dict[str, Any] = {"epochs": int(epochs), "batch": int(batch), "lr": float(lr), "schedule": schedule,
                           "seed": int(seed), "train-data": train_data, "test-data": test_data,
                           "val-data": val_data, "steps-per-epoch": int(steps_per_epoch),
                           "total-steps": int(epochs) * int(steps_per_epoch)}
    for k, v in (extra or {}).items():
        if k not in SETTINGS or k in run:
            raise ValueError(f"unknown or reserved fingerprint entry '{k}'")
        run[k] = v
    return run


def check_allowed(names: Collection[str]) -> tuple[str, ...]:
    """The validated `--resume-changed` names (ValueError naming the choices otherwise)."""
    bad = sorted(set(names) - set(CHANGEABLE))
    if bad:
        fixed = [n for n in bad if n in SETTINGS]
        why = (f"; {', '.join(fixed)} cannot change on resume" if fixed else "")
        raise ValueError(f"--resume-changed: unknown option {', '.join(bad)}{why}; choose from "
                         f"{', '.join(CHANGEABLE)}")
    return tuple(names)


def check_run_types(run: Any, path: str | Path) -> None:
    """Refuse a stored fingerprint whose entries are of the wrong type or out of bounds."""
    if not isinstance(run, dict):
        raise StateFileError(f"'{path}' carries no run configuration (it was not written by a training "
                             "run's --checkpoint), so it cannot be resumed")
    problems = []
    unknown = sorted(set(run) - set(SETTINGS) - set(DERIVED))
    if unknown:
        problems.append(f"run has unknown entries {unknown[:5]}")
    problems += int_in(run.get("epochs"), 1, MAX_EPOCHS, "run.epochs")
    problems += int_in(run.get("batch"), 1, 2**31 - 1, "run.batch")
    problems += int_in(run.get("seed"), -(2**63), 2**63 - 1, "run.seed")
    problems += int_in(run.get("steps-per-epoch"), 1, 2**31 - 1, "run.steps-per-epoch")
    problems += int_in(run.get("total-steps"), 1, MAX_TOTAL_STEPS, "run.total-steps")
    lr = run.get("lr")
    if not isinstance(lr, float) or not math.isfinite(lr):
        problems.append(f"run.lr is {lr!r}, expected a finite float")
    if run.get("schedule") not in ("cosine", "constant"):
        problems.append(f"run.schedule is {str(run.get('schedule'))[:20]!r}")
    for k in ("train-data", "test-data", "val-data"):
        v = run.get(k)
        if not (v is None or (isinstance(v, str) and len(v) == 64)):
            problems.append(f"run.{k} is not a sha256")
    if not problems and run["total-steps"] != run["epochs"] * run["steps-per-epoch"]:
        problems.append("run.total-steps is not epochs times steps-per-epoch")
    raise_problems(problems, path, "run configuration")


def _show(key: str, v: Any) -> str:
    if SETTINGS[key].digest and isinstance(v, str):
        return f"(sha256 {v[:12]})"
    if v is None:
        return "(not set)"
    return str(v) if not isinstance(v, str) else v[:80]


def compare_runs(saved: Mapping[str, Any], current: Mapping[str, Any], allowed: Collection[str],
                 path: str | Path) -> tuple[str, ...]:
    """Notes on the allowed differences; StateFileError naming every difference not allowed."""
    keys = [k for k in SETTINGS if k in saved or k in current]
    differ = [k for k in keys if saved.get(k) != current.get(k)]
    explained = {d for k in differ for d in IMPLIES.get(k, ())}
    differ = [k for k in differ if k not in explained]
    allow = set(allowed) | {d for k in allowed for d in IMPLIES.get(k, ())}
    refused = [k for k in differ if k not in allow or not SETTINGS[k].changeable]
    if refused:
        parts = [f"{SETTINGS[k].label} {_show(k, current.get(k))} differs from the checkpoint's "
                 f"{_show(k, saved.get(k))}" for k in refused]
        fixed = [k for k in refused if not SETTINGS[k].changeable]
        flag = [k for k in refused if SETTINGS[k].changeable]
        hint = []
        if flag:
            hint.append(f"resume with the checkpoint's settings or allow the change with --resume-changed "
                        f"{','.join(flag)}")
        if fixed:
            hint.append(" and ".join(f"{SETTINGS[k].label} cannot change ({SETTINGS[k].effect})"
                                     for k in fixed))
        raise StateFileError(f"'{path}' was saved by another run configuration: {'; '.join(parts)}. "
                             + _sentence("; ".join(hint)))
    return tuple(f"{SETTINGS[k].label} changed from {_show(k, saved.get(k))} to {_show(k, current.get(k))}: "
                 f"{SETTINGS[k].effect}" for k in differ)


def resume_position(loop_step: int, saved: Mapping[str, Any], current: Mapping[str, Any],
                    path: str | Path) -> int:
    """The step to continue from under the current configuration (re-counted at epoch boundaries)."""
    spe_old, spe_new = saved["steps-per-epoch"], current["steps-per-epoch"]
    step = loop_step
    if spe_old != spe_new:
        if loop_step % spe_old:
            raise StateFileError(f"'{path}' stopped mid-epoch (step {loop_step}, {spe_old} steps per epoch) "
                                 f"and the new configuration has {spe_new} steps per epoch; a change of "
                                 "--batch or the data needs a checkpoint from the end of an epoch")
        step = loop_step // spe_old * spe_new
    if step > current["total-steps"]:
        raise StateFileError(f"'{path}' has already trained {loop_step // spe_old} epochs "
                             f"({loop_step} steps), "
                             f"more than the {current['epochs']} epochs asked for")
    return step


_HISTORY_KEYS = {"epoch", "loss", "train_accuracy", "test_accuracy"}


def check_loop(loop: Any, run: Mapping[str, Any], path: str | Path) -> None:
    """Refuse a loop position that `fit` could not have written for this run."""
    keys = {"step", "history", "accuracy_before", "seconds", "samples", "macs", "forward_passes", "best"}
    if not isinstance(loop, dict) or set(loop) != keys:
        raise_problems([f"loop has keys {sorted(loop)[:10] if isinstance(loop, dict) else kind_of(loop)}, "
                        f"expected {sorted(keys)}"], path, "checkpoint")
    problems = int_in(loop["step"], 0, run["total-steps"], "loop.step")
    steps = loop["step"] if not problems else 0
    problems += int_in(loop["samples"], 0, steps * run["batch"], "loop.samples")
    problems += int_in(loop["forward_passes"], 0, steps * MAX_FORWARD_PER_STEP, "loop.forward_passes")
    if not _number(loop["seconds"]) or not 0 <= loop["seconds"] < 1e12:
        problems.append("loop.seconds is not a finite number of seconds")
    if not (loop["accuracy_before"] is None or _accuracy(loop["accuracy_before"])):
        problems.append("loop.accuracy_before is not an accuracy")
    macs = loop["macs"]
    if not isinstance(macs, dict) or any(int_in(v, 0, 2**63 - 1, "") for v in macs.values()):
        problems.append("loop.macs is not a table of non-negative integers")
    hist = loop["history"]
    done = loop["step"] // run["steps-per-epoch"] if not problems else 0
    if not isinstance(hist, list) or (not problems and len(hist) != done):
        problems.append(f"loop.history does not hold one entry per completed epoch ({done})")
    else:
        for i, e in enumerate(hist):
            if not isinstance(e, dict) or not _HISTORY_KEYS <= set(e) <= _HISTORY_KEYS | {"val_accuracy"} \
                    or e["epoch"] != i + 1 or not _number(e["loss"]) or not math.isfinite(e["loss"]) \
                    or not all(_accuracy(e[k]) for k in e if k.endswith("accuracy")):
                problems.append(f"loop.history[{i}] is not an epoch entry")
                break
    best = loop["best"]
    if best is not None and not (isinstance(best, list) and len(best) == 3 and not int_in(
            best[0], 0, max(len(hist) - 1, 0) if isinstance(hist, list) else 0, "")
            and _accuracy(best[1]) and _accuracy(best[2])):
        problems.append("loop.best is not [epoch, validation accuracy, test accuracy]")
    raise_problems(problems, path, "checkpoint")


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _accuracy(v: Any) -> bool:
    """An accuracy in [0, 1], or NaN (what `evaluate` reports for an empty set)."""
    return _number(v) and (math.isnan(v) or 0.0 <= v <= 1.0)


def config_differences(saved: Any, current: Mapping[str, Any]) -> list[str]:
    """Each method setting that differs, as "setting 'k' is NEW, the checkpoint's OLD"."""
    if not isinstance(saved, dict):
        return ["the checkpoint's method settings are not an object"]
    keys = list(current) + [k for k in saved if k not in current]
    return [f"setting '{k[:40]}' is {repr(current.get(k, '(absent)'))[:60]}, the checkpoint's "
            f"{repr(saved.get(k, '(absent)'))[:60]}"
            for k in keys if saved.get(k, _ABSENT) != current.get(k, _ABSENT)][:8]


_ABSENT = object()


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:]
