"""`zo-diagnose`: why zo-mix's node-perturbation update of fc1 blew up, traced step by step.

On the zo-adapt protocol (small-cnn pretrained on clean Fashion-MNIST, int8, adapted to one
corruption at severity 5, trainable conv2 (WP) and fc1 (NP), 20 queries, batch 100), each
step records, per trained layer: the norm of the ZO estimate of the int8 weight's gradient,
the norm of back-propagation's gradient at the same weights (BP-QAS's, the reference), their
cosine, the GNS factor, the largest int8 weight step of the update and the share of weights
that changed; and the batch loss and the share of fc1's outputs that saturate (where NP
does not perturb: the STE mask). Run with and without the weight-step limit (`--max-step`,
`methods/step_limit.py`) on the two corruptions where zo-mix failed, one split seed, at
zo-mix's lowest grid rate. The figure is `docs/zo-step-limit.png`; the reading is in
`docs/methods.md` (zo).

Run: ``mcutrain bench zo-diagnose [--quick]``.
"""

from __future__ import annotations

import io as _io
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from mcutrain.bench.files import result_path, write_results
from mcutrain.bench.zo_protocol import QUICK, TRAINABLE, Budget, pretrained_model
from mcutrain.engines import int_engine, ptq
from mcutrain.io import atomic_write_bytes
from mcutrain.methods import zo_estimator as est
from mcutrain.methods.bp_qas import BPQASConfig, BPQASMethod
from mcutrain.methods.loop import cosine_lr
from mcutrain.methods.zo import ZOConfig, ZOMethod
from mcutrain.progress import Progress

CORRUPTIONS = ("impulse_noise", "zigzag")
LIMITS = (0, 2)
"""max_step of the two runs: no limit (the seed's update) and the default."""
LR = 0.1
"""zo-mix's lowest grid rate in zo-adapt, where the unlimited update still blew up."""
EPOCHS = 2


def trace_step(zo: ZOMethod, x: np.ndarray, y: np.ndarray, lr: float) -> dict[str, Any]:
    """One ZO step with its diagnostics (the step itself is `ZOMethod.estimate` + `apply`)."""
    qm = zo.qm
    truth, _ = BPQASMethod(qm, BPQASConfig(trainable=TRAINABLE)).gradients(x, y)
    grads, info = zo.estimate(x, y)
    fc1 = int_engine.run(qm, int_engine.quantize_input(qm, x))["fc1"]
    row: dict[str, Any] = {"loss": float(info["l0"].mean()) * float(est.LOSS_SCALE),
                           "fc1_saturated": 1.0 - float(est.saturation_mask(qm, "fc1", fc1).mean())}
    before = {n: qm.weights[n].astype(np.int64) for n in zo.layers}
    zo.apply(grads, lr)
    zo.steps += 1
    for n in zo.layers:
        g, t = grads[n].w_grad(), truth[f"{n}.weight"].astype(np.float64)
        ng, nt = float(np.linalg.norm(g)), float(np.linalg.norm(t))
        moved = np.abs(qm.weights[n].astype(np.int64) - before[n])
        row[n] = {"estimate_norm": ng, "bp_norm": nt, "cosine": float((g * t).sum() / max(ng * nt, 1e-30)),
                  "gamma": grads[n].extra["gamma"], "largest_step": int(moved.max()),
                  "changed_share": float((moved > 0).mean())}
    return row


def trace_run(graph, corr: str, max_step: int, budget: Budget, epochs: int, quick: bool) -> dict[str, Any]:
    """The per-step trace of one zo-mix run (split seed 0) and its final test accuracy."""
    from mcutrain.data import adaptation_split, load_dataset
    ds = load_dataset(f"fashion-mnist-c:{corr}:5", seed=0)
    x_tr, y_tr, _, _, x_te, y_te = adaptation_split(ds.x_test, ds.y_test, budget.n_train, budget.n_val,
                                                    seed=0, n_test=budget.n_test)
    qm = ptq.quantize_model(graph, ds.clean_train[:64] if quick else ds.clean_train[:512])
    zo = ZOMethod(qm, ZOConfig(trainable=TRAINABLE, queries=budget.queries, perturb="mix", seed=1,
                               max_step=max_step))
    batch = min(100, len(x_tr))
    per_epoch = len(x_tr) // batch
    total = epochs * per_epoch
    steps = []
    with Progress(total, f"zo-diagnose {corr} max_step {max_step}") as bar:
        for s in range(total):
            order = np.random.default_rng(s // per_epoch).permutation(len(x_tr))
            idx = order[(s % per_epoch) * batch:][:batch]
            steps.append(trace_step(zo, x_tr[idx], y_tr[idx], cosine_lr(LR, s, total)))
            bar.update(loss=f"{steps[-1]['loss']:.2f}")
    acc = float(np.mean(zo.predict(x_te) == y_te))
    return {"corruption": corr, "max_step": max_step, "lr": LR, "steps": steps, "test_accuracy": acc}


def run_diagnose(work: Path, results: Path, quick: bool = False, log=print,
                 docs: Path = Path("docs")) -> dict[str, Any]:
    """Per-step trace of zo-mix's estimates and updates on impulse noise and zigzag, step limit off/on."""
    budget = replace(QUICK, queries=2) if quick else Budget()
    graph, _ = pretrained_model(work, budget, quick)
    corrs = CORRUPTIONS[:1] if quick else CORRUPTIONS
    rows = []
    for corr in corrs:
        for limit in LIMITS:
            rows.append(trace_run(graph, corr, limit, budget, 1 if quick else EPOCHS, quick))
            log(f"[zo-diagnose] {corr} max_step {limit}: test accuracy {rows[-1]['test_accuracy']:.3f}")
            write_results(results, "zo-diagnose", rows, quick=quick, queries=budget.queries,
                          trainable=TRAINABLE, complete=False)
    write_results(results, "zo-diagnose", rows, quick=quick, queries=budget.queries, trainable=TRAINABLE,
                  complete=True)
    if not quick:
        plot(rows, docs / "zo-step-limit.png")
    return {"path": str(result_path(results, "zo-diagnose", quick)), "rows": rows}


def plot(rows: list[dict[str, Any]], png: Path) -> None:
    """Per step: fc1's largest weight step, its saturated outputs and the estimate/BP norms."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.6))
    for r in rows:
        label = f"{r['corruption']}, max_step {r['max_step'] or 'off'}"
        x = np.arange(1, len(r["steps"]) + 1)
        axes[0].plot(x, [s["fc1"]["largest_step"] for s in r["steps"]], marker=".", label=label)
        axes[1].plot(x, [100 * s["fc1_saturated"] for s in r["steps"]], marker=".", label=label)
        axes[2].plot(x, [s["fc1"]["estimate_norm"] / s["fc1"]["bp_norm"] for s in r["steps"]], marker=".",
                     label=label)
    for ax, title in zip(axes, ("fc1: largest int8 weight step", "fc1: saturated outputs (%)",
                                "fc1: |ZO estimate| / |BP gradient|")):
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("step")
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    buf = _io.BytesIO()
    fig.savefig(buf, dpi=100)
    plt.close(fig)
    atomic_write_bytes(png, lambda f: f.write(buf.getvalue()))


def register(add) -> None:
    """Hook for the benchmark registry."""
    add("zo-diagnose", run_diagnose)
