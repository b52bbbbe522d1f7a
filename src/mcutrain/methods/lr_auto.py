"""`--lr auto`: the learning rate a run uses when the user names none, and why.

Why not one fixed default: FQT's standardized step moves every weight by about lr per step
whatever its gradient, so over many steps the weights random-walk away from their scale; a
rate that suits 450 steps (digits, 0.01) diverges over 5,625 (full Fashion-MNIST: the loss
climbs to 13 in epoch 2), so FQT's rate is derived from the run's length before training:
`FQT_TRAVEL / steps`, at most `FQT_MAX`. ZO and BP-QAS multiply a QAS-scaled or GNS-shrunk
estimate whose size depends on the model, its scales and the data (0.05 suits bp-qas on the
pretrained small-cnn, 1 a 784-128-64-10 MLP), so no formula known before training fits them:
they run a short rate search on the training split -- `SEARCH_RATES[method]`, each trained
for `search_steps(steps)` steps under cosine decay from the same starting state on the
training samples outside a held-out slice. A rate that collapsed (its loss over the search's
second half not below its first step's) is out, and so is a rate whose next higher neighbour
collapsed: the chosen rate keeps a half-decade margin from divergence, since a rate at the edge
can hold up for the search's steps and diverge in the run (bp-qas on gaussian noise: 0.1 won a
20-step search, then reached 22% against 73% at 0.01). The rest are scored by accuracy on the
held-out slice, or, on a split too small for `SCORE_SAMPLES` held-out samples, on every sample
held out once over `FOLDS` folds (ties: the lower loss on the held-out samples, then the lower
rate); the method is then restored
to its starting state exactly (`state()`/`load_state()`), so the run equals `--lr X` with
the chosen X. The slice, the batches and the methods' random streams come from the seed
alone: the search is deterministic. Its cost is at most `len(rates) * FOLDS * SEARCH_STEPS_MAX`
steps, shown with a progress bar. A resumed run (`--resume`) chooses nothing: it continues at
the rate its checkpoint's run configuration stores (`resumed_rate`), the one the first run chose.

Example:
    >>> fqt_rate(5625).lr
    0.0005333333333333334
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from mcutrain.engines import int_engine
from mcutrain.methods.base import TrainingMethod, read_state
from mcutrain.methods.loop import cosine_lr
from mcutrain.methods.resume import check_run_types
from mcutrain.progress import Progress

AUTO = "auto"
"""The `--lr` value (and the factory's default for `train`) that asks for this module's choice."""
FQT_TRAVEL = 3.0
"""lr x steps of FQT's auto rate: the stable runs measured so far have at most about 4.5 (digits,
0.01 x 450 steps; Fashion-MNIST 12k samples, 0.003 x 1,125; full Fashion-MNIST 0.0005 x 5,625 =
2.8), and 5.6 diverged (full Fashion-MNIST at 0.001, epoch 2)."""
FQT_KNEE_STEPS = 5625
"""Beyond this many steps FQT's auto rate shrinks as 1 / sqrt(steps) instead of 1 / steps, so lr x
steps grows as sqrt(steps / FQT_KNEE_STEPS) from FQT_TRAVEL. Measured on small-cnn from scratch on
the full Fashion-MNIST for 10 epochs (18,750 steps, seed 0, int8 / float32): 3 / steps = 0.00016
gave 88.8 / 89.3%, 0.00024 gave 89.5 / 89.9%, 0.00032 gave 89.6 / 90.0%, all stable, and 0.0005
diverged (the loss climbed to 1.1 / 16 by epoch 6): what stays stable there is about twice
the travel of a 3-epoch run (5,625 steps, where 0.001 diverged and 0.0005 held). The rule gives
0.00029 for the 10 epochs, inside the stable range and 0.58x the diverging rate."""
FQT_MAX = 0.003
"""FQT's auto rate is never above this: int8 diverges above about 0.005 even on short runs
(zo-adapt's probes), and on small-cnn from scratch (Fashion-MNIST 4k samples, 250 steps) 0.005
ended 3.7 points below 0.003 (`bench lr-defaults`, its first run)."""
SEARCH_RATES: dict[str, tuple[float, ...]] = {"zo": (0.03, 0.1, 0.3, 1.0, 3.0),
                                             "bp-qas": (0.01, 0.03, 0.1, 0.3, 1.0)}
"""The searched rates per method: half-decades around the rates the benchmarks tuned (zo-mix
0.2, zo-wp 1, zo-np 0.1; bp-qas 0.05 with momentum 0.9) and the MLP's 1."""
HOLDOUT_FRACTION = 0.2
"""Share of the training split held out to score the searched rates (never the test split)."""
HOLDOUT_MAX = 1000
"""At most this many held-out samples: the score's cost stays bounded on large splits."""
SCORE_SAMPLES = 1000
"""Held-out samples a searched rate is scored on at least, where the split has them: a smaller split
is searched in `FOLDS` folds instead, each sample held out once, so the score counts every sample of
the split and none it trained on. zo-adapt's 100 samples hold out 20, whose accuracy moves in steps
of 5 points: on fog bp-qas one slice preferred 0.01 (test 61.4%) over 0.03 (70.0%). Topping the
slice up with the search's own training samples (the rule before the folds) scored fit, not
generalization: on the pinned pretrained model it preferred 0.1 (score 0.78, held-out 0.60, test
56.4%) over 0.03 (0.74, 0.70, 70.4%) (`bench lr-defaults`; docs/methods.md compares the rules)."""
FOLDS = 5
"""Folds of a split whose held-out slice is smaller than `SCORE_SAMPLES` (the slice's own share,
`HOLDOUT_FRACTION`, each); the search then costs `FOLDS` times as many steps."""
SEARCH_STEPS_MAX = 20
"""Steps per searched rate: the run's own steps up to this many, under the run's cosine decay over
them. A short run (zo-adapt's 20 steps) is searched as it will run; a first version trained each
rate for a fifth of the run at a constant rate, and those 4-step probes chose rates 3 to 30 times
too low on fog and zigzag (gaps of 4.6 to 9.6 points against the grid's best)."""


@dataclass(frozen=True)
class RateChoice:
    """The rate a run uses and why (`train --json`: `lr_used`, `lr_reason`)."""

    lr: float
    reason: str
    trials: tuple[dict[str, Any], ...] = field(default=())
    """The searched rates: {lr, holdout_accuracy, holdout_loss, loss} each (empty without a search)."""


def run_steps(epochs: int, n_train: int, batch: int) -> int:
    """Steps of a run, as the training loop counts them."""
    return epochs * math.ceil(n_train / batch)


def fqt_rate(steps: int) -> RateChoice:
    """FQT's rate for a run of `steps` steps: `FQT_TRAVEL / steps` up to `FQT_KNEE_STEPS` steps,
    `FQT_TRAVEL / sqrt(FQT_KNEE_STEPS * steps)` beyond (the two meet at the knee), at most `FQT_MAX`."""
    steps = max(steps, 1)
    if steps <= FQT_KNEE_STEPS:
        lr, rule = FQT_TRAVEL / steps, f"{FQT_TRAVEL:g} / {steps:,} steps"
    else:
        lr = FQT_TRAVEL / math.sqrt(FQT_KNEE_STEPS * steps)
        rule = f"{FQT_TRAVEL:g} / sqrt({FQT_KNEE_STEPS:,} x {steps:,} steps)"
    lr = min(FQT_MAX, lr)
    capped = " (the cap)" if lr == FQT_MAX else ""
    return RateChoice(lr, f"auto: {rule}, at most {FQT_MAX:g}{capped}: fqt's standardized step "
                      "moves every weight by about lr per step, so the rate shrinks with the run's "
                      "length")


def search_steps(steps: int) -> int:
    """Steps each searched rate trains for (see `SEARCH_STEPS_MAX`)."""
    return min(steps, SEARCH_STEPS_MAX)


def holdout_split(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(search training indices, held-out indices) of a training split of `n` samples, from `seed`."""
    order = np.random.default_rng([seed, 11]).permutation(n)
    k = min(HOLDOUT_MAX, max(1, int(n * HOLDOUT_FRACTION))) if n > 1 else 0
    return order[k:] if k else order, order[:k] if k else order


def collapsed(trial: dict[str, Any]) -> bool:
    """A searched rate that diverged or ended no better than it started: its loss over the search's
    second half is not below the loss of the first step (taken before any update, the same for every
    rate), or not finite. A one-step search has no second half to compare: only a non-finite loss
    counts there. Over folds, both losses are the folds' means (`collapsed_folds` only informs)."""
    if not math.isfinite(trial["loss"]):
        return True
    return trial.get("steps", 2) > 1 and not trial["loss"] < trial["start_loss"]


def search_folds(n: int, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """(search training, held-out) index pairs of a training split of `n` samples, from `seed`: the one
    `holdout_split` when its slice has `SCORE_SAMPLES` samples (or the split is too small to fold),
    otherwise `FOLDS` folds of the same permutation, each sample held out once (see `SCORE_SAMPLES`)."""
    fit_idx, val_idx = holdout_split(n, seed)
    if len(val_idx) >= SCORE_SAMPLES or n < 2 * FOLDS:
        return [(fit_idx, val_idx)]
    parts = np.array_split(np.random.default_rng([seed, 11]).permutation(n), FOLDS)
    return [(np.concatenate(parts[:f] + parts[f + 1:]), parts[f]) for f in range(FOLDS)]


def pick(trials: list[dict[str, Any]]) -> tuple[dict[str, Any] | None, int]:
    """(the chosen trial or None, how many rates the margin rule excluded) of trials in rising rate order.

    A rate is eligible when neither it nor the next higher searched rate collapsed (`collapsed`): a
    half-decade margin from divergence (the grid's top rate has no higher neighbour and needs only
    itself). The eligible rate of the highest score wins; ties: the lower held-out loss (the same
    samples as the score, graded finer than by right or wrong), then the lower rate.
    """
    eligible = [t for i, t in enumerate(trials) if not collapsed(t)
                and (i + 1 == len(trials) or not collapsed(trials[i + 1]))]
    margin = sum(1 for i, t in enumerate(trials) if not collapsed(t)) - len(eligible)
    if not eligible:
        return None, margin
    return max(eligible, key=lambda t: (t["score"], -t["holdout_loss"], -t["lr"])), margin


def holdout_scores(method: TrainingMethod, x: np.ndarray, y: np.ndarray) -> tuple[int, float]:
    """(samples right, summed cross-entropy in nats) of the int8 model `method` trained so far on (x, y).

    One golden-engine forward pass of `trained_model()` (what C runs and `train -o` writes; for the
    searched methods it is what `predict` runs) gives both: the argmax as `int_engine.predict` takes
    it, and float64 cross-entropy of the logits dequantized with the output's qparams, which ranks
    rates more finely than right or wrong; it is not a training signal.
    """
    qm = method.trained_model()
    out = qm.act_qparams[qm.graph.output]
    right, total = 0, 0.0
    for i in range(0, len(x), 500):
        q = int_engine.forward(qm, int_engine.quantize_input(qm, x[i:i + 500]))
        yb = y[i:i + 500]
        right += int(np.sum(q.argmax(axis=1) == yb))
        z = out.dequantize(q).astype(np.float64)
        z -= z.max(axis=1, keepdims=True)
        total += float(np.sum(np.log(np.exp(z).sum(axis=1)) - z[np.arange(len(z)), yb]))
    return right, total


def _train_fold(method: TrainingMethod, x: np.ndarray, y: np.ndarray, batches: list[np.ndarray], lr: float,
                bar: Progress) -> list[float]:
    """The losses of `batches` trained at `lr` under cosine decay over them, until one is not finite."""
    losses: list[float] = []
    for i, idx in enumerate(batches):
        losses.append(float(method.step(x[idx], y[idx], cosine_lr(lr, i, len(batches))).loss))
        bar.update(1, lr=lr)
        if not math.isfinite(losses[-1]):
            break
    return losses


def search_rate(method_name: str, method: TrainingMethod, x: np.ndarray, y: np.ndarray, *, steps: int,
                batch: int, seed: int, progress: bool | None = None) -> RateChoice:
    """The best of `SEARCH_RATES[method_name]` by `pick`, each rate trained on every fold of
    `search_folds` from the method's starting state; `method` is left as it came."""
    rates = SEARCH_RATES[method_name]
    folds = search_folds(len(x), seed)
    k = search_steps(steps)
    fold_batches = []
    for f, (fit_idx, _) in enumerate(folds):
        rng = np.random.default_rng([seed, 12] if f == 0 else [seed, 12, f])
        order = np.concatenate([rng.permutation(fit_idx) for _ in range(math.ceil(k * batch / len(fit_idx)))])
        fold_batches.append([order[i * batch:(i + 1) * batch] for i in range(k)])
    start = method.state()
    trials = []
    nan = float("nan")
    with Progress(len(rates) * len(folds) * k, f"{method.name} lr search", show=progress) as bar:
        for lr in rates:
            correct = held = 0
            held_loss = 0.0
            starts, halves, n_steps, n_collapsed = [], [], [], 0
            for (_, val_idx), batches in zip(folds, fold_batches):
                losses = _train_fold(method, x, y, batches, lr, bar)
                finite = all(math.isfinite(v) for v in losses)     # the folds before were (see the break)
                if finite:
                    right, loss_sum = holdout_scores(method, x[val_idx], y[val_idx])
                    correct += right
                    held_loss += loss_sum
                    held += len(val_idx)
                    half = float(np.mean(losses[len(losses) // 2:]))
                    starts.append(losses[0])
                    halves.append(half)
                    n_steps.append(len(losses))
                    n_collapsed += collapsed({"loss": half, "start_loss": losses[0], "steps": len(losses)})
                method.load_state(*start)
                if not finite:
                    break
            score = correct / held if finite and held else nan
            trials.append({"lr": lr, "steps": min(n_steps) if finite else 0,
                           "start_loss": float(np.mean(starts)) if finite else nan,
                           "holdout_accuracy": score, "score": score,
                           "holdout_loss": held_loss / held if finite and held else nan,
                           "loss": float(np.mean(halves)) if finite else nan,
                           "collapsed_folds": n_collapsed})
    n_fit = len(folds[0][0])
    where = (f"{k} steps each on {n_fit:,} training samples, scored on {sum(len(v) for _, v in folds):,} "
             "held out" + (f", in {len(folds)} folds" if len(folds) > 1 else ""))
    best, margin = pick(trials)
    if best is None:
        return RateChoice(rates[0], f"auto: every searched rate collapsed or had a collapsing neighbour "
                          f"({where}); the lowest, {rates[0]:g}, is used", tuple(trials))
    searched = ", ".join(f"{r:g}" for r in rates)
    skipped = f"; {margin} rate(s) below a collapsing one excluded" if margin else ""
    return RateChoice(best["lr"], f"auto: search over {searched} ({where}): {best['lr']:g} scored accuracy "
                      f"{best['score']:.3f}{skipped}", tuple(trials))


def resumed_rate(checkpoint: str | Path) -> RateChoice:
    """The rate stored in `checkpoint`'s run configuration: `--lr auto` on resume continues the first
    run at its rate (choosing again could pick another one, and the resume would be refused).

    Raises `StateFileError` (a ValueError) for an unreadable checkpoint.
    """
    doc, _ = read_state(checkpoint)
    check_run_types(doc.get("run"), checkpoint)
    lr = doc["run"]["lr"]
    return RateChoice(lr, f"auto: the rate of the run resumed from '{Path(checkpoint).name}', stored with "
                      "its checkpoint's run configuration")


def choose_rate(method_name: str, method: TrainingMethod, x: np.ndarray, y: np.ndarray, *, epochs: int,
                batch: int, seed: int, progress: bool | None = None) -> RateChoice:
    """The auto rate of `method_name` (fqt: the rule; zo, bp-qas: the search) for this run."""
    steps = run_steps(epochs, len(x), batch)
    if method_name in SEARCH_RATES:
        return search_rate(method_name, method, x, y, steps=steps, batch=batch, seed=seed, progress=progress)
    return fqt_rate(steps)
