"""Method `zo`: quantized zeroth-order, back-propagation-free training on the int8 engine.

Seed method B (Zhao et al., "Poor Man's Training on MCUs", ACM TODAES 2025).
One step on a batch:

1. base pass: `zo_forward.run_base` keeps every tensor (the engine's integers); per-sample Q16 losses
   ``l0`` from the integer softmax cross-entropy (computed once per step);
2. for each perturbation unit (`ZOUnit`, in graph order): ``n`` queries of
   integer Rademacher perturbations drawn from the method's xorshift32
   stream (never stored), each query re-running only the network after the
   perturbed layer from its cached input, all queries batched into large
   GEMMs; the estimator keeps exact integer sums (`zo_estimator`);
3. all updates at once, from the estimates at the same base weights: the QAS
   update (`qas`), no momentum, no float master copy.

Perturbation modes (`perturb`): `wp` (each trainable layer by weight
perturbation), `np` (node perturbation), `mix` (each layer takes the
lower-dimensional of the two: early convs WP, late layers NP), `mix:NAME`
(WP before layer NAME, NP from it on), `model-wp` (all layers in one
weight perturbation; for the ablation).

Example:
    >>> from mcutrain import zoo
    >>> from mcutrain.engines import ptq
    >>> rng = np.random.default_rng(0)
    >>> x = rng.random((20, 8, 8, 1), dtype=np.float32); y = rng.integers(0, 10, 20)
    >>> zo = ZOMethod(ptq.quantize_model(zoo.build("digits-cnn"), x), ZOConfig(queries=4))
    >>> [u.kind for u in zo.units]
    ['wp', 'wp', 'np']
    >>> zo.step(x, y, 0.01).forward_passes
    13
"""

from __future__ import annotations

import copy
import time
import weakref
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from mcutrain.engines import int_engine
from mcutrain.methods import qas
from mcutrain.methods import zo_estimator as est
from mcutrain.methods import zo_forward as zf
from mcutrain.methods import zo_workers as zw
from mcutrain.methods.base import StepStats, TrainingMethod
from mcutrain.methods.decisions import zo_decisions
from mcutrain.methods.step_limit import NO_LIMIT, apply_limited_weight_update
from mcutrain.methods.trainable import resolve_trainable
from mcutrain.qmodel import QuantModel
from mcutrain.quant.rng import XorShift32

PERTURB_MODES = ("wp", "np", "mix", "model-wp")
QUERY_CHUNK_ELEMENTS = est.QUERY_CHUNK_ELEMENTS


@dataclass(frozen=True)
class ZOConfig:
    """Settings of the `zo` method (defaults: the seed's)."""

    trainable: str = "all"
    """Trainable-layer spec (`all`, `last:N`, `layers:a,b`) or a comma list after selection."""
    queries: int = 50
    perturb: str = "mix"
    sigma_w: int = 1
    """Weight perturbation, in int8 steps."""
    sigma_b: int = 100
    """Bias perturbation, in int32 bias steps."""
    sigma_node: int = 5
    """Node (activation) perturbation, in int8 steps."""
    gns: bool = True
    qas: bool = True
    mask: str = "none"
    """`none`, `topk:R` (NP: the fraction R of output channels with the largest mean |y - z_y|)
    or `randk:R` (a random fraction R of the perturbed entries / channels, redrawn every step)."""
    max_step: int = 2
    """Largest change of one int8 weight per update, in int8 steps (0: no limit; `step_limit`).
    Not the seed's: without it the NP estimate of a late layer on badly-predicted data moves
    weights by 20-37 steps at once and kills the layer (docs/methods.md, zo)."""
    seed: int = 1
    update_rounding: str = "nearest"
    """How int8 weight updates round (`qas.UPDATE_ROUNDINGS`); `stochastic` draws one uniform per
    weight of a unit's layers from the method's stream, just before that unit's query draws."""
    budget: int = QUERY_CHUNK_ELEMENTS
    """Elements per query chunk (memory and speed only: results do not depend on it)."""


def _parse_mask(mask: str) -> tuple[str, float]:
    if mask == "none":
        return "none", 1.0
    kind, _, r = mask.partition(":")
    try:
        ratio = float(r)
    except ValueError:
        ratio = -1.0
    if kind not in ("topk", "randk") or not 0 < ratio <= 1:
        raise ValueError(f"mask '{mask}': use none, topk:R or randk:R with 0 < R <= 1")
    return kind, ratio


def plan_units(qm: QuantModel, layers: list[str], perturb: str) -> list[est.ZOUnit]:
    """The perturbation units of one step, in the order they consume the random stream."""
    if perturb == "model-wp":
        return [est.make_unit(qm, "wp", tuple(layers))]
    split = None
    if perturb.startswith("mix:"):
        split = perturb[4:]
        names = [n.name for n in qm.graph.nodes]
        if split not in names:
            raise ValueError(f"perturb '{perturb}': no layer '{split}'")
        split_at = names.index(split)
    elif perturb not in PERTURB_MODES:
        raise ValueError(f"unknown perturbation '{perturb}'; use wp, np, mix, mix:LAYER or model-wp")
    units = []
    for name in layers:
        wp, np_ = est.make_unit(qm, "wp", (name,)), est.make_unit(qm, "np", (name,))
        if perturb == "wp":
            units.append(wp)
        elif perturb == "np":
            units.append(np_)
        elif split is not None:
            units.append(np_ if [n.name for n in qm.graph.nodes].index(name) >= split_at else wp)
        else:
            units.append(wp if wp.dim <= np_.dim else np_)
    return units


def copy_quant_model(qm: QuantModel) -> QuantModel:
    """A QuantModel whose weight and bias arrays can be trained without touching `qm`."""
    return QuantModel(qm.graph, dict(qm.act_qparams), {k: v.copy() for k, v in qm.weights.items()},
                      dict(qm.weight_qparams), {k: v.copy() for k, v in qm.biases.items()},
                      copy.deepcopy(qm.provenance), qm.rounding)


def dequantized_graph(qm: QuantModel):
    """The float graph of an int8 model's current weights (``w * s_w``, ``b * s_x * s_w``) for export."""
    g = qm.graph.copy()
    for n in g.parametric():
        o = qm.weights[n.name].shape[0]
        s_w = np.broadcast_to(qm.weight_qparams[n.name].scale, (o,)).astype(np.float32)
        shape = (-1,) + (1,) * (qm.weights[n.name].ndim - 1)
        n.params["weight"] = (qm.weights[n.name].astype(np.float32) * s_w.reshape(shape)).astype(np.float32)
        n.params["bias"] = (qm.biases[n.name].astype(np.float64) * float(qm.scale(n.inputs[0]))
                            * s_w.astype(np.float64)).astype(np.float32)
    return g


def trained_copy(qm: QuantModel) -> QuantModel:
    """The int8 model as trained: copies of its integers, its float graph the dequantized weights.

    The float graph follows the integers so a reader of the float parameters (a later FQT run,
    a float export) sees the trained model too; the integers stay exactly the simulator's.
    """
    c = copy_quant_model(qm)
    return QuantModel(dequantized_graph(qm), c.act_qparams, c.weights, c.weight_qparams, c.biases,
                      c.provenance, c.rounding)


class ZOMethod(TrainingMethod):
    """Zeroth-order training of an int8 model (see the module docstring)."""

    name = "zo"

    def __init__(self, qm: QuantModel, config: ZOConfig | None = None, workers: int | None = 1) -> None:
        """`workers`: processes a step's queries may split across (None: the cores available,
        `zo_workers.available_cores`); the results are the same for any count."""
        self.cfg = config or ZOConfig()
        if workers is not None and workers < 1:
            raise ValueError(f"workers must be at least 1, got {workers}")
        self.workers = zw.available_cores() if workers is None else int(workers)
        self._pool: zw.QueryWorkers | None = None
        if self.cfg.queries < 1:
            raise ValueError(f"queries must be at least 1, got {self.cfg.queries}")
        if min(self.cfg.sigma_w, self.cfg.sigma_b, self.cfg.sigma_node) < 1:
            raise ValueError("perturbation sizes sigma_w, sigma_b, sigma_node must be at least 1 step")
        if self.cfg.update_rounding not in qas.UPDATE_ROUNDINGS:
            raise ValueError(f"update_rounding must be one of {', '.join(qas.UPDATE_ROUNDINGS)}, "
                             f"got {self.cfg.update_rounding!r}")
        if not 0 <= self.cfg.max_step <= NO_LIMIT:
            raise ValueError(f"max_step must be 0 (no limit) to {NO_LIMIT} int8 steps, "
                             f"got {self.cfg.max_step}")
        self.mask_kind, self.mask_ratio = _parse_mask(self.cfg.mask)
        self.qm = copy_quant_model(qm)
        self.layers = resolve_trainable(self.qm.graph, self.cfg.trainable)
        self.units = plan_units(self.qm, self.layers, self.cfg.perturb)
        c = self.cfg
        self.decisions = zo_decisions(self.qm.graph, self.layers, c.perturb, c.queries, c.mask)
        """What the planner and the code generator read (`methods.decisions`)."""
        self.rng = XorShift32(self.cfg.seed)
        self.steps = 0
        self.last_timing: dict[str, float] = {}
        self.rounding_draws: dict[str, np.ndarray] = {}
        """Stochastic rounding: this step's uniform draws per layer, taken by `estimate`."""

    # -- the step
    def schedule(self, batch: int) -> list[dict[str, Any]]:
        """The step's structure for planners: per unit what is cached, re-run and drawn."""
        out = []
        for u in self.units:
            draws = u.draws_per_query if u.kind == "wp" else -(-(batch * u.dim) // 32)
            out.append({**asdict(u), "queries": self.cfg.queries, "draws": self.cfg.queries * draws,
                        "partial_forward_macs": self.cfg.queries * batch * u.tail_macs})
        return out

    def estimate(self, x: np.ndarray, y: np.ndarray) -> tuple[dict[str, est.IntGrad], dict[str, Any]]:
        """Gradient estimates of every trainable layer at the current weights (no update)."""
        qm, cfg = self.qm, self.cfg
        t0 = time.perf_counter()
        x_q = int_engine.quantize_input(qm, x)
        share = self._start_split(x_q, y)
        try:
            base = zf.run_base(qm, x_q)
            logits = base[qm.graph.output].reshape(len(x), -1)
            l0 = est.per_sample_loss(qm, logits, y)
            info = {"l0": l0, "correct": int(np.sum(logits.argmax(axis=1) == y))}
            t_base = time.perf_counter() - t0
            grads: dict[str, est.IntGrad] = {}
            for u in self.units:
                if cfg.update_rounding == "stochastic":     # NOTE: before the unit's mask and query draws
                    for m in u.layers:
                        w = qm.weights[m]
                        self.rounding_draws[m] = self.rng.uniform01(w.size).reshape(w.shape)
                if u.kind == "wp":
                    masks = self._wp_masks(u) if self.mask_kind == "randk" else None
                    grads.update(est.estimate_wp(qm, base, y, l0, u, self.rng, cfg.queries, cfg.sigma_w,
                                                 cfg.sigma_b, cfg.gns, masks, cfg.budget, share))
                else:
                    cmask = self._np_mask(u, base) if self.mask_kind != "none" else None
                    grads.update(est.estimate_np(qm, base, y, l0, u, self.rng, cfg.queries,
                                                 cfg.sigma_node, cfg.gns, cmask, cfg.budget, share))
        except BaseException:
            self.close()            # a worker may hold unread answers of this step: start afresh
            raise
        self.last_timing = {"base": t_base, "queries": time.perf_counter() - t0 - t_base}
        return grads, info

    # -- queries across worker processes (`zo_workers`)
    def query_macs(self, batch: int) -> int:
        """Multiply-accumulates of one step's query passes (what `zo_workers.use_split` weighs)."""
        return sum(self.cfg.queries * batch * u.tail_macs for u in self.units)

    def _start_split(self, x_q: np.ndarray, y: np.ndarray) -> est.QueryShare | None:
        """The step's `QueryShare` after sending its state to the workers, or None (one process)."""
        parts = zw.split_queries(self.cfg.queries, self.workers)
        if not zw.use_split(self.query_macs(len(x_q)), len(parts)):
            return None
        if self._pool is None:
            self._pool = zw.QueryWorkers(parts, self._worker_losses)
            weakref.finalize(self, self._pool.close)
        state = [a for n in self.layers for a in (self.qm.weights[n], self.qm.biases[n])]
        self._pool.send_step([*state, x_q, np.asarray(y, np.int64), np.uint32(self.rng.state)])
        return est.QueryShare(parts, self._pool.losses)

    def _worker_losses(self, state: list[np.ndarray], part: tuple[int, int]):
        """In a worker: the step of `state` (weights, biases, batch, labels, stream position) as the
        trainer runs it, but only the loss changes of the queries in `part`, one array per unit."""
        qm, cfg = self.qm, self.cfg
        for i, n in enumerate(self.layers):
            qm.weights[n], qm.biases[n] = state[2 * i], state[2 * i + 1]
        x_q, y, rng_state = state[-3:]
        self.rng.state = int(rng_state)
        base = zf.run_base(qm, x_q)
        l0 = est.per_sample_loss(qm, base[qm.graph.output].reshape(len(x_q), -1), y)
        for u in self.units:
            if cfg.update_rounding == "stochastic":     # the trainer's update draws: skipped here
                self.rng.advance(sum(qm.weights[m].size for m in u.layers))
            if u.kind == "wp":
                masks = self._wp_masks(u) if self.mask_kind == "randk" else None
                yield est.wp_losses(qm, base, y, l0, u, self.rng, cfg.queries, cfg.sigma_w, cfg.sigma_b,
                                    masks, cfg.budget, part)
            else:
                cmask = self._np_mask(u, base) if self.mask_kind != "none" else None
                yield est.np_losses(qm, base, y, l0, u, self.rng, cfg.queries, cfg.sigma_node, cmask,
                                    cfg.budget, part)

    def close(self) -> None:
        """Stop the worker processes (the next split step starts new ones)."""
        if self._pool is not None:
            self._pool.close()
            self._pool = None

    def step(self, x: np.ndarray, y: np.ndarray, lr: float) -> StepStats:
        y = np.asarray(y)
        grads, info = self.estimate(x, y)
        self.apply(grads, lr)
        self.steps += 1
        b = len(x)
        g = self.qm.graph
        fwd = b * g.total_macs() + sum(self.cfg.queries * b * u.tail_macs for u in self.units)
        wgrad = sum(b * g.macs(g.node(u.layers[0])) for u in self.units if u.kind == "np")
        return StepStats(loss=float(info["l0"].sum()) / b * float(est.LOSS_SCALE), correct=info["correct"],
                         samples=b, macs={"forward": fwd, "weight_grad": wgrad},
                         forward_passes=1 + self.cfg.queries * len(self.units))

    def apply(self, grads: dict[str, est.IntGrad], lr: float) -> None:
        """QAS update of every estimated layer (`qas`; weight steps limited by `step_limit`; graph order)."""
        qm = self.qm
        for name in self.layers:
            gr = grads[name]
            node = qm.graph.node(name)
            o = qm.weights[name].shape[0]
            s_w = np.broadcast_to(qm.weight_qparams[name].scale, (o,)).astype(np.float32)
            s_b = qas.bias_scale(qm.scale(node.inputs[0]), s_w)
            kw = qas.update_factor(lr, gr.w_coef, s_w if self.cfg.qas else None)
            kb = qas.update_factor(lr, gr.b_coef, s_b if self.cfg.qas else None)
            r = self.rounding_draws.pop(name, None) if self.cfg.update_rounding == "stochastic" else None
            qm.weights[name] = apply_limited_weight_update(qm.weights[name], gr.w_sum, kw,
                                                           self.cfg.max_step, r)
            qm.biases[name] = qas.apply_bias_update(qm.biases[name], gr.b_sum, kb)

    # -- sparse perturbation masks
    def _count(self, total: int) -> int:
        return max(1, int(np.floor(self.mask_ratio * total)))

    def _pick(self, total: int) -> np.ndarray:
        """Random-k: the k entries with the smallest of `total` fresh draws (ties: lower index)."""
        r = self.rng.draw_u32(total)
        keep = np.zeros(total, np.int8)
        keep[np.argsort(r, kind="stable")[:self._count(total)]] = 1
        return keep

    def _wp_masks(self, u: est.ZOUnit) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        out = {}
        for m in u.layers:
            w, b = self.qm.weights[m], self.qm.biases[m]
            keep = self._pick(w.size + b.size)
            out[m] = (keep[:w.size].reshape(w.shape), keep[w.size:])
        return out

    def _np_mask(self, u: est.ZOUnit, base: dict[str, np.ndarray]) -> np.ndarray:
        layer = u.layers[0]
        y = base[layer]
        c = y.shape[-1]
        if self.mask_kind == "randk":
            return self._pick(c)
        mag = np.abs(y.reshape(-1, c).astype(np.int64) - self.qm.zero_point(layer)).sum(axis=0)
        keep = np.zeros(c, np.int8)
        keep[np.argsort(-mag, kind="stable")[:self._count(c)]] = 1
        return keep

    # -- TrainingMethod plumbing
    def to_graph(self):
        """The trained model as a float graph (dequantized), for `mcutrain train -o`."""
        return dequantized_graph(self.qm)

    def trained_model(self) -> QuantModel:
        """A copy of the int8 model as trained so far (exact: it is what the method trains)."""
        return trained_copy(self.qm)

    def predict(self, x: np.ndarray) -> np.ndarray:
        return int_engine.predict(self.qm, x)

    def state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        arrays = {}
        for name in self.layers:
            arrays[f"w/{name}"] = self.qm.weights[name].copy()
            arrays[f"b/{name}"] = self.qm.biases[name].copy()
        return {"rng": self.rng.state, "steps": self.steps}, arrays

    def check_state(self, meta: Any, arrays: dict[str, np.ndarray], max_steps: int) -> list[str]:
        from mcutrain.methods import state_checks
        return state_checks.zo(self, meta, arrays, max_steps)

    def load_state(self, meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
        for name in self.layers:
            self.qm.weights[name] = arrays[f"w/{name}"].astype(np.int8).copy()
            self.qm.biases[name] = arrays[f"b/{name}"].astype(np.int32).copy()
        self.rng.state = int(meta["rng"])
        self.steps = int(meta["steps"])

    def config(self) -> dict[str, Any]:
        return {"method": self.name, **asdict(self.cfg), "layers": self.layers}
