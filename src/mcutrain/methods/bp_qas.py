"""Method `bp-qas`: back-propagation through the int8 graph with the STE and QAS-scaled SGD.

The baseline of both seeds (Lin et al., "On-Device Training Under 256KB
Memory", NeurIPS 2022): the forward pass is the int8 golden engine; the
error of the integer softmax cross-entropy (``p - onehot``, Q24) flows back
through the int8 graph with the straight-through estimator in float32
(`engines.ste_kernels`), giving gradients of the integer weights and biases;
the update is SGD (optionally with momentum) with quantization-aware scaling
(``/s_w^2``, biases ``/(s_x s_w)^2``) applied to the int8/int32 tensors in
place (`qas`), no float master copy. Every float32 operation has the order of
the C twins (``docs/integer-semantics.md`` 12.6): the kernels' sums are
sequential (`ste_kernels`), the bias gradient sums rows in order, the error of a
tensor read by several nodes adds their errors in reverse graph order, and the
velocity starts at +0.0 (``v = mu * v + g`` from the first step).

Static sparse update (Lin et al.'s scheme): `trainable` names layers whose
weights and biases train; `bias_last` adds the biases of the last N layers;
`channel_ratio` < 1 updates only the first fraction of a trained weight's
input channels. The backward pass stops at the earliest trained layer.

Example:
    >>> from mcutrain import zoo
    >>> from mcutrain.engines import ptq
    >>> rng = np.random.default_rng(0)
    >>> x = rng.random((20, 8, 8, 1), dtype=np.float32); y = rng.integers(0, 10, 20)
    >>> bp = BPQASMethod(ptq.quantize_model(zoo.build("digits-cnn"), x), BPQASConfig(trainable="last:1"))
    >>> bp.step(x, y, 0.01).forward_passes
    1
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from mcutrain.engines import int_engine
from mcutrain.engines import ste_kernels as sk
from mcutrain.graph import INPUT, PARAMETRIC, Op
from mcutrain.methods import qas
from mcutrain.methods.base import StepStats, TrainingMethod
from mcutrain.methods.decisions import bp_qas_decisions
from mcutrain.methods.trainable import resolve_trainable
from mcutrain.methods.zo import copy_quant_model, dequantized_graph, trained_copy
from mcutrain.qmodel import QuantModel
from mcutrain.quant.loss import LOSS_FRAC_BITS, PROB_FRAC_BITS, int_softmax_cross_entropy
from mcutrain.quant.rng import XorShift32


@dataclass(frozen=True)
class BPQASConfig:
    """Settings of `bp-qas`."""

    trainable: str = "all"
    bias_last: int = 0
    """Also train the biases of the last N layers with weights."""
    channel_ratio: float = 1.0
    """Fraction of input channels (the first ones) whose weights train, in (0, 1]."""
    momentum: float = 0.0
    qas: bool = True
    update_rounding: str = "nearest"
    """How int8 weight updates round (`qas.UPDATE_ROUNDINGS`); `stochastic` draws one uniform per
    weight from the method's xorshift32 stream (seeded by `seed`), in the order the updates run:
    layers last to first (the backward pass), each weight tensor in C order."""
    seed: int = 1
    """The stochastic rounding's stream (unused with `nearest`)."""


class BPQASMethod(TrainingMethod):
    """Back-propagation with STE through the int8 graph, QAS-scaled SGD (see module docstring)."""

    name = "bp-qas"

    def __init__(self, qm: QuantModel, config: BPQASConfig | None = None) -> None:
        self.cfg = config or BPQASConfig()
        if not 0 < self.cfg.channel_ratio <= 1:
            raise ValueError(f"channel_ratio must be in (0, 1], got {self.cfg.channel_ratio}")
        if not 0 <= self.cfg.momentum < 1:
            raise ValueError(f"momentum must be in [0, 1), got {self.cfg.momentum}")
        if self.cfg.update_rounding not in qas.UPDATE_ROUNDINGS:
            raise ValueError(f"update_rounding must be one of {', '.join(qas.UPDATE_ROUNDINGS)}, "
                             f"got {self.cfg.update_rounding!r}")
        self.qm = copy_quant_model(qm)
        g = self.qm.graph
        self.weight_layers = resolve_trainable(g, self.cfg.trainable)
        layers = [n.name for n in g.parametric()]
        if self.cfg.bias_last < 0 or self.cfg.bias_last > len(layers):
            raise ValueError(f"bias_last must be in [0, {len(layers)}]")
        extra = layers[len(layers) - self.cfg.bias_last:] if self.cfg.bias_last else []
        self.bias_layers = [n for n in layers if n in self.weight_layers or n in extra]
        self.decisions = bp_qas_decisions(g, self.cfg.trainable, self.cfg.bias_last, self.cfg.momentum)
        """What the planner and the code generator read (`methods.decisions`)."""
        self.velocity: dict[str, np.ndarray] = {}
        if self.cfg.update_rounding == "stochastic":    # only then a stream (state "rng", the C word)
            self.rng = XorShift32(self.cfg.seed)

    def _channel_mask(self, name: str) -> np.ndarray | None:
        if self.cfg.channel_ratio >= 1:
            return None
        w = self.qm.weights[name]
        cin = w.shape[-1]
        keep = max(1, int(np.floor(self.cfg.channel_ratio * cin)))
        mask = np.zeros(w.shape, np.float32)
        mask[..., :keep] = 1
        return mask

    def gradients(self, x: np.ndarray, y: np.ndarray) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """Gradients of the trained integer tensors ('<layer>.weight' / '.bias'), float32."""
        qm, g = self.qm, self.qm.graph
        t = int_engine.run(qm, int_engine.quantize_input(qm, x))
        logits = t[g.output].reshape(len(x), -1)
        qp = qm.act_qparams[g.output]
        loss_q, err_q = int_softmax_cross_entropy(logits, float(qp.scale), int(qp.zero_point), y)
        bsz = len(x)
        e_logit = err_q.astype(np.float32) * np.float32(2.0**-PROB_FRAC_BITS / bsz) * np.float32(qp.scale)
        wanted = set(self.bias_layers)
        needs = {INPUT: False}
        for n in g.nodes:
            needs[n.name] = n.name in wanted or any(needs[s] for s in n.inputs)
        errs = {g.output: e_logit.reshape(t[g.output].shape)}
        grads: dict[str, np.ndarray] = {}
        t0 = time.perf_counter()
        macs = 0
        for node in reversed(g.nodes):
            e = errs.pop(node.name, None)
            if e is None or not needs[node.name]:
                continue
            ins = [t[s] for s in node.inputs]
            need_in = [needs[s] for s in node.inputs]
            for src, dx in zip(node.inputs, self._node_bwd(node, ins, t[node.name], e, grads, need_in)):
                if dx is not None and needs[src]:
                    # NOTE: a tensor read by several nodes: errors added in reverse graph order
                    errs[src] = errs[src] + dx if src in errs else dx
            if node.op in PARAMETRIC:
                macs += bsz * g.macs(node) * (1 + int(any(need_in)))
        info = {"loss": float(loss_q.astype(np.int64).sum()) / bsz * 2.0**-LOSS_FRAC_BITS,
                "correct": int(np.sum(logits.argmax(axis=1) == y)), "backward_seconds":
                time.perf_counter() - t0, "backward_macs": macs}
        return grads, info

    def _node_bwd(self, node, ins, y, e, grads, need_in) -> list[np.ndarray | None]:
        qm, a = self.qm, node.attrs
        x = ins[0]
        if node.op in PARAMETRIC:
            lo, hi = qm.act_range(node)
            o = qm.weights[node.name].shape[0]
            s_w = np.broadcast_to(qm.weight_qparams[node.name].scale, (o,)).astype(np.float32)
            slope = (np.float32(qm.scale(node.inputs[0])) * s_w) / np.float32(qm.scale(node.name))
            e_acc = sk.requant_bwd_f32(e, y, slope, lo, hi)
            zx = qm.zero_point(node.inputs[0])
            w = qm.weights[node.name]
            if node.name in self.bias_layers:
                grads[f"{node.name}.bias"] = sk.bias_bwd_f32(e_acc)
            if node.op == Op.LINEAR:
                if node.name in self.weight_layers:
                    grads[f"{node.name}.weight"] = sk.linear_bwd_w_s8_f32(x, zx, e_acc)
                return [sk.linear_bwd_in_s8_f32(e_acc, w).reshape(x.shape) if need_in[0] else None]
            if node.name in self.weight_layers:
                grads[f"{node.name}.weight"] = sk.conv2d_bwd_w_s8_f32(
                    x, zx, e_acc, w.shape, a["stride"], a["padding"], a["groups"])
            return [sk.conv2d_bwd_in_s8_f32(e_acc, w, x.shape, a["stride"], a["padding"], a["groups"])
                    if need_in[0] else None]
        if node.op == Op.MAXPOOL:
            return [sk.maxpool_bwd_s8_f32(x, y, e, a["kernel"], a["stride"])]
        if node.op == Op.AVGPOOL:
            return [sk.avgpool_bwd_f32(e, x.shape, a["kernel"], a["stride"])]
        if node.op == Op.GLOBAL_AVGPOOL:
            return [sk.global_avgpool_bwd_f32(e, x.shape)]
        if node.op == Op.FLATTEN:
            return [e.reshape(x.shape)]
        if node.op in (Op.RELU, Op.RELU6):
            lo, hi = qm.act_range(node)
            return [np.where((y > lo) & (y < hi), e, np.float32(0)).astype(np.float32)]
        if node.op == Op.ADD:
            lo, hi = qm.act_range(node)
            sy = np.float32(qm.scale(node.name))
            ra = np.float32(qm.scale(node.inputs[0])) / sy
            rb = np.float32(qm.scale(node.inputs[1])) / sy
            return list(sk.add_bwd_f32(e, y, ra, rb, lo, hi))
        raise ValueError(f"node '{node.name}': no backward rule for op {node.op.value}")

    def step(self, x: np.ndarray, y: np.ndarray, lr: float) -> StepStats:
        y = np.asarray(y)
        grads, info = self.gradients(x, y)
        qm = self.qm
        for key, gr in grads.items():
            name, kind = key.rsplit(".", 1)
            node = qm.graph.node(name)
            o = qm.weights[name].shape[0]
            s_w = np.broadcast_to(qm.weight_qparams[name].scale, (o,)).astype(np.float32)
            scale = s_w if kind == "weight" else qas.bias_scale(qm.scale(node.inputs[0]), s_w)
            if kind == "weight":
                mask = self._channel_mask(name)
                gr = gr if mask is None else gr * mask
            if self.cfg.momentum:
                # v = mu * v + g from v = +0.0 (as C: no first-step special case), no FMA
                v = self.velocity.get(key, np.zeros_like(gr))
                gr = (np.float32(self.cfg.momentum) * v + gr).astype(np.float32)
                self.velocity[key] = gr
            # QAS update as in `qas`: steps = round(lr * g / s^2); the gradient is already float
            k = qas.update_factor(lr, np.ones(o, np.float32), scale if self.cfg.qas else None)
            r = self.rng.uniform01(gr.size) if kind == "weight" and hasattr(self, "rng") else None
            steps = qas.integer_steps_float(gr, k, r)
            if kind == "weight":
                qm.weights[name] = np.clip(qm.weights[name].astype(np.int64) - steps, qas.W_MIN,
                                           qas.W_MAX).astype(np.int8)
            else:
                qm.biases[name] = np.clip(qm.biases[name].astype(np.int64) - steps, qas.B_MIN,
                                          qas.B_MAX).astype(np.int32)
        b = len(x)
        return StepStats(loss=info["loss"], correct=info["correct"], samples=b,
                         macs={"forward": b * qm.graph.total_macs(), "error": info["backward_macs"]},
                         backward_seconds=info["backward_seconds"], forward_passes=1)

    def predict(self, x: np.ndarray) -> np.ndarray:
        return int_engine.predict(self.qm, x)

    def to_graph(self):
        """The trained model as a float graph (dequantized), for `mcutrain train -o`."""
        return dequantized_graph(self.qm)

    def trained_model(self) -> QuantModel:
        """A copy of the int8 model as trained so far (exact: it is what the method trains)."""
        return trained_copy(self.qm)

    def state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        arrays = {f"w/{n}": self.qm.weights[n].copy() for n in self.weight_layers}
        arrays.update({f"b/{n}": self.qm.biases[n].copy() for n in self.bias_layers})
        arrays.update({f"v/{k}": v.copy() for k, v in self.velocity.items()})
        return ({"rng": self.rng.state} if hasattr(self, "rng") else {}), arrays

    def check_state(self, meta: Any, arrays: dict[str, np.ndarray], max_steps: int) -> list[str]:
        from mcutrain.methods import state_checks
        return state_checks.bp_qas(self, meta, arrays, max_steps)

    def load_state(self, meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
        for n in self.weight_layers:
            self.qm.weights[n] = arrays[f"w/{n}"].astype(np.int8).copy()
        for n in self.bias_layers:
            self.qm.biases[n] = arrays[f"b/{n}"].astype(np.int32).copy()
        self.velocity = {k[2:]: v.astype(np.float32).copy() for k, v in arrays.items()
                         if k.startswith("v/")}
        if hasattr(self, "rng"):
            self.rng.state = int(meta["rng"])

    def config(self) -> dict[str, Any]:
        return {"method": self.name, **asdict(self.cfg)}
