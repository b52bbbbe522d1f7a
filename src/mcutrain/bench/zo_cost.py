"""Benchmark `zo-cost`: a ZO step's time against queries x one partial forward pass (target <= 1.2x).

Apart from `zo` (zo-adapt, zo-ablation) because it measures speed, not accuracy: it shares only
the pretrained model and the adaptation data with `zo-adapt` (`zo_protocol`).

Run: ``mcutrain bench zo-cost [--quick]``.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import numpy as np

from mcutrain.bench import files
from mcutrain.bench.zo_protocol import QUICK, Budget, pretrained_model
from mcutrain.engines import int_engine, ptq
from mcutrain.methods.zo import ZOConfig

COST_LAYERS = ("conv2", "fc1")
COST_QUERIES = (10, 50)
COST_REPEATS = 15
"""Repeats per row (medians): a step of the largest row takes well under a second, and the machine
the benchmark runs on is shared, so more repeats buy a steadier median cheaply."""


def _median_ms(times: list[float]) -> float:
    return float(np.median(times)) * 1e3


def cost_rows(qm, x: np.ndarray, y: np.ndarray, layers: tuple[str, ...], queries: tuple[int, ...],
              repeats: int, cfg: ZOConfig | None = None) -> list[dict[str, Any]]:
    """Per layer, kind and query count: a ZO step's time against queries x one partial forward pass.

    The step is the unit's whole estimate (draws, perturbation, the n query
    passes, loss, accumulation; NP also the local weight gradient); one
    partial pass re-runs the network from that layer, unperturbed, on the
    same batch, with its loss. Each repeat times the step and then n
    separate partial passes back to back (so load hits both alike and the
    short pass is not timed alone); medians of `repeats`.
    """
    from mcutrain.methods import zo_estimator as est
    cfg = cfg or ZOConfig()
    base = int_engine.run(qm, int_engine.quantize_input(qm, x))
    l0 = est.per_sample_loss(qm, base[qm.graph.output].reshape(len(x), -1), y)
    rows = []
    for n in queries:
        for layer in layers:
            for kind in ("wp", "np"):
                unit = est.make_unit(qm, kind, (layer,))
                funcs = _cost_funcs(qm, base, y, l0, unit, n, cfg)
                times: dict[str, list[float]] = {k: [] for k in funcs}
                funcs["step"]()                                  # warm caches (jump matrices)
                for _ in range(repeats):
                    for k, f in funcs.items():
                        t0 = time.perf_counter()
                        f()
                        times[k].append(time.perf_counter() - t0)
                step_ms, one_ms = _median_ms(times["step"]), _median_ms(times["partial"]) / n
                local_ms = _median_ms(times["local"]) if "local" in times else None
                draws = unit.draws_per_query if kind == "wp" else -(-(len(x) * unit.dim) // 32)
                local_macs = qm.graph.macs(qm.graph.node(layer)) if kind == "np" else None
                rows.append({"layer": layer, "kind": kind, "queries": n, "dim": unit.dim,
                             "draws_per_query": draws, "tail_macs": unit.tail_macs, "local_macs": local_macs,
                             "step_ms": step_ms, "partial_ms": one_ms,
                             "ratio": step_ms / (n * one_ms), "local_grad_ms": local_ms,
                             "ratio_without_local_grad": (None if local_ms is None
                                                          else (step_ms - local_ms) / (n * one_ms))})
    return rows


def _cost_funcs(qm, base: dict[str, np.ndarray], y: np.ndarray, l0: np.ndarray, unit, n: int,
                cfg: ZOConfig) -> dict[str, Any]:
    """The timed callables of one unit: its step, one partial pass and (NP) the local weight gradient."""
    from mcutrain.methods import zo_estimator as est
    from mcutrain.methods import zo_forward as zf
    from mcutrain.quant.rng import XorShift32
    layer = unit.layers[0]
    node = qm.graph.node(layer)
    if unit.kind == "wp":
        producer = zf.WeightSets(qm, node, qm.weights[layer][None], qm.biases[layer][None])
        funcs = {"step": lambda: est.estimate_wp(qm, base, y, l0, unit, XorShift32(cfg.seed), n, cfg.sigma_w,
                                                 cfg.sigma_b, cfg.gns, budget=cfg.budget)}
    else:
        y0 = base[layer][None]
        producer = lambda xx: y0                                 # the unperturbed output
        funcs = {"step": lambda: est.estimate_np(qm, base, y, l0, unit, XorShift32(cfg.seed), n,
                                                 cfg.sigma_node, cfg.gns, budget=cfg.budget)}

    def partials():                                              # n single partial passes
        for _ in range(n):
            est.per_sample_loss(qm, zf.run_queries(qm, base, 1, {layer: producer}), y)
    funcs["partial"] = partials
    if unit.kind == "np":
        g_acc = np.full(base[layer].shape, 1 << 20, np.int64)
        funcs["local"] = lambda: est.local_weight_grad(qm, layer, base[node.inputs[0]], g_acc)
    return funcs


def run_cost(work: Path, results: Path, quick: bool = False, log=print,
             docs: Path = Path("docs")) -> dict[str, Any]:
    """The `zo-cost` benchmark: the ZO step cost target (at most 1.2x queries x one partial pass)."""
    from mcutrain.data import adaptation_split, load_dataset
    budget = QUICK if quick else Budget()
    graph, _ = pretrained_model(work, budget, quick)
    ds = load_dataset("fashion-mnist-c:gaussian_noise:5", seed=0)
    x_tr, y_tr, *_ = adaptation_split(ds.x_test, ds.y_test, budget.n_train, budget.n_val, seed=0,
                                      n_test=budget.n_test)
    qm = ptq.quantize_model(graph, ds.clean_train[:512] if not quick else ds.clean_train[:64])
    bsz = 10 if quick else 100
    queries, repeats = ((2,), 2) if quick else (COST_QUERIES, COST_REPEATS)
    t0, load0 = time.perf_counter(), os.getloadavg()[0]
    with files.limit_threads(1):
        rows = cost_rows(qm, x_tr[:bsz], y_tr[:bsz], COST_LAYERS, queries, repeats)
    for r in rows:
        log(f"[zo-cost] {r['layer']:6s} {r['kind']} n={r['queries']:3d}: step {r['step_ms']:8.1f} ms, "
            f"one partial {r['partial_ms']:6.2f} ms, ratio {r['ratio']:.2f}")
    files.write_results(results, "zo-cost", rows, quick, arch="small-cnn", batch=bsz, repeats=repeats,
                         threads=1, seconds=time.perf_counter() - t0,
                         load_average=[round(load0, 2), round(os.getloadavg()[0], 2)], cpus=os.cpu_count())
    if not quick:
        files.update_docs(docs, "zo-cost", cost_markdown(rows, bsz, repeats))
    return {"benchmark": "zo-cost", "rows": rows}


def cost_markdown(rows: list[dict[str, Any]], bsz: int, repeats: int) -> str:
    head = (f"ZO step cost on small-cnn (int8, batch {bsz}, one BLAS thread, median of {repeats} "
            "repeats; `mcutrain bench zo-cost`): the step time of one perturbation unit (draws, "
            "perturbations, the n query passes, losses, accumulation; NP also the exact local weight "
            "gradient) against n separate partial forward passes from that layer (unperturbed, with the "
            "loss), timed in the same repeat. "
            "Target: ratio at most 1.2. A WP pass re-runs the perturbed layer and everything after it "
            "(`tail_macs` per sample); an NP pass starts after the layer, whose output is what is "
            "perturbed. An NP step also pays work no pass has: per query, B x d_out signs drawn, "
            "selected and summed against the per-sample losses, and once per step the exact local "
            "weight gradient, a GEMM as large as the layer's forward (`local_macs` per sample). For "
            "conv2 that GEMM alone is local_macs / (n tail_macs) = "
            f"{_np_share(rows, 'conv2', 10)} of the n passes' MACs at n = 10 and "
            f"{_np_share(rows, 'conv2', 50)} at n = 50.\n\n")
    cols = ["layer", "kind", "queries", "dim", "draws_per_query", "tail_macs", "local_macs", "step_ms",
            "partial_ms", "ratio", "local_grad_ms", "ratio_without_local_grad"]
    return head + files.markdown_table(rows, cols,
                                        {"step_ms": ".1f", "partial_ms": ".2f", "ratio": ".2f",
                                        "local_grad_ms": ".1f", "ratio_without_local_grad": ".2f"})


def _np_share(rows: list[dict[str, Any]], layer: str, n: int) -> str:
    """``local_macs / (n tail_macs)`` of the NP row of `layer` at `n` queries, or a dash."""
    for r in rows:
        if r["layer"] == layer and r["kind"] == "np" and r["queries"] == n and r["local_macs"]:
            return f"{r['local_macs'] / (n * r['tail_macs']):.2f}"
    return "—"


def register(add) -> None:
    """Hook for the benchmark registry: `add(name, func)` with `func(work, results, quick, log)`."""
    add("zo-cost", run_cost)
