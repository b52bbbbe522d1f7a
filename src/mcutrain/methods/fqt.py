"""Method `fqt`: fully quantized training with dynamic ranges and dynamic partial updates (seed A).

Deutel et al., "On-Device Training of Fully Quantized Deep Neural Networks on
Cortex-M Microcontrollers", IEEE TCAD 44(4), 2025. One training step is four
explicit phases per layer, the schedule a planner and the C code follow:

1. forward (`_forward`): 8-bit (or float32) forward; keeps exactly what the
   backward needs — the input of every trainable layer, the output of every
   fused/standalone relu on the error path (its mask), the argmax of every
   max-pool on the error path. Frozen layers before the first trainable one
   keep nothing. The real range of every produced tensor is taken from its
   accumulator on the fly (no float copy).
2. error propagation (`_backward`): the integer softmax cross-entropy gives
   p - onehot; each layer masks its relu, drops the errors of pruned
   structures (partial updates), and propagates with a transposed GEMM /
   transposed conv requantized into the input's error qparams, whose range is
   again tracked on the fly.
3. weight gradient: from the stored input and the (pruned) error; per-sample
   gradients are summed into a gradient buffer (uint8: each per-sample
   gradient is first quantized to uint8 with its own EMA range, as in the seed).
4. update (`_update`): the EMA ranges of activations and errors move
   (alpha_a, alpha_e) and give new qparams; the gradient of each filter/row is
   standardized by EMA-smoothed mean and standard deviation (alpha_norm); each
   weight is dequantized, updated and requantized with a new scale (from the
   EMA of the updated weights' range, alpha_w) — no float master copy.

Example:
    >>> from mcutrain import zoo
    >>> x = np.random.default_rng(0).random((8, 8, 8, 1), dtype=np.float32)
    >>> m = FQT(zoo.build("digits-cnn"), FQTConfig(precision="int8"), x)
    >>> m.step(x, np.arange(8) % 10, 0.01).samples
    8
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from mcutrain.engines import fqt_kernels as K
from mcutrain.engines import fqt_pool as POOL
from mcutrain.engines.int_engine import add_fwd_s8_tflite, global_avgpool_fwd_s8_tflite
from mcutrain.graph import INPUT, PARAMETRIC, Graph, Node, Op
from mcutrain.graph_passes import fold_batchnorm, fuse_activations
from mcutrain.methods import fqt_model, fqt_seed_start
from mcutrain.methods.base import StepStats, TrainingMethod
from mcutrain.methods.decisions import fqt_decisions
from mcutrain.methods.fqt_backward import FQTBackward
from mcutrain.methods.fqt_common import (
    F32,
    SHARES_QPARAMS,
    X_MAX,
    _acc_range,
    _act_clip,
    _Batch,
)
from mcutrain.methods.fqt_formats import FQTFormats
from mcutrain.methods.fqt_state import FQTConfig, Precision, precision
from mcutrain.methods.fqt_update import FQTUpdate
from mcutrain.methods.trainable import resolve_trainable
from mcutrain.qmodel import QuantModel
from mcutrain.quant.fixedpoint import (
    activation_range,
    add_multipliers,
    output_multiplier,
    requantize_output,
    rounding_divide,
    rounding_shift_right,
    tflite_add_params,
    tflite_mean_params,
)
from mcutrain.quant.loss import LOSS_FRAC_BITS
from mcutrain.quant.qparams import EmaRange, QParams, quantize_bias
from mcutrain.quant.rng import XorShift32


class FQT(FQTFormats, FQTBackward, FQTUpdate, TrainingMethod):
    """FQT bound to one model; `calib_x` (a few training samples) initializes the activation ranges.

    `model` is a float graph, or an int8 QuantModel: FQT then starts from its integers with no
    calibration pass -- int8 as they are (`fqt_model.start_from_model`; its forward runs in the
    model's rounding mode), uint8/mixed/float32 converted into their formats
    (`fqt_seed_start.start_from_model`).
    """

    name = "fqt"

    def __init__(self, model: Graph | QuantModel, config: FQTConfig, calib_x: np.ndarray) -> None:
        self.cfg = config
        self.prec: Precision = precision(config.precision, config.weight_rounding, config.relative_update)
        quant = isinstance(model, QuantModel)
        start = model if quant else None
        self.rounding = model.rounding if quant else "single"
        """The model's rounding: int8's forward requantizations run in it (uint8's float32
        multipliers have no mode); error and weight-gradient requantizations always round 'single'."""
        self.provenance = dict(model.provenance) if quant else {}
        """Where the starting model came from; the trained model keeps it (a .tflite's export data)."""
        self.calib_x = np.asarray(calib_x, F32)
        """The calibration samples (not state): PTQ of a float32 run's `trained_model`."""
        graph = model.graph if isinstance(model, QuantModel) else model
        self.graph = fuse_activations(fold_batchnorm(graph))
        g = self.graph
        self.trainable = resolve_trainable(g, config.trainable)
        self.decisions = fqt_decisions(g, config)
        """Which layers run partial updates with which lambdas, the formats: what the planner and
        the code generator read too (`methods.decisions`)."""
        for a in ("alpha_a", "alpha_e", "alpha_w", "alpha_norm"):
            if not 0.0 < getattr(config, a) <= 1.0:
                raise ValueError(f"{a} must be in (0, 1], got {getattr(config, a)}")
        self.rng = XorShift32(config.seed)
        self.owner = {INPUT: INPUT}
        for n in g.nodes:
            self.owner[n.name] = self.owner[n.inputs[0]] if n.op in SHARES_QPARAMS else n.name
        train = set(self.trainable)
        self.needs = {INPUT: False}
        self.dynamic = {INPUT: False}
        for n in g.nodes:
            up = any(self.needs[s] for s in n.inputs)
            self.needs[n.name] = n.name in train or up
            self.dynamic[n.name] = n.name in train or any(self.dynamic[s] for s in n.inputs)
        self.n_consumers = {t: len(g.consumers(t)) for t in [INPUT, *(n.name for n in g.nodes)]}
        self.act_ema = {t: EmaRange(config.alpha_a) for t in set(self.owner.values())}
        self.err_ema: dict[str, EmaRange] = {}
        self.grad_ema: dict[str, EmaRange] = {}
        self.w: dict[str, np.ndarray] = {}
        self.wqp: dict[str, QParams | None] = {}
        self.w_ema: dict[str, EmaRange] = {}
        self.b: dict[str, np.ndarray] = {}
        self.b_acc_scale: dict[str, np.ndarray] = {}
        self.norm: dict[str, dict[str, np.ndarray]] = {}
        self.step_scale: dict[str, np.ndarray] = {}
        self.loss_max = self.steps = 0
        self._qp_cache: dict[str, tuple] = {}
        self.pinned: dict[str, tuple[np.ndarray, np.ndarray, QParams]] = {}
        """Starting-file qparams used while a tensor's range is still (lo, hi) (`fqt_model`)."""
        self._bias_lr: dict[str, np.ndarray] = {}
        self._bias_ghat: dict[str, np.ndarray] = {}
        self._room_cache: dict[str, tuple] = {}
        """Per layer (weights, their qparams, `_bias_room`): the room changes only with the weights."""
        self.backward_seconds = 0.0
        """Wall time of all backward passes so far (error propagation + weight gradients); not state."""
        if start is not None:
            if self.prec.acts == "s8":
                fqt_model.start_from_model(self, start)
            else:
                fqt_seed_start.start_from_model(self, start)
            return
        for n in g.parametric():
            self._init_weights(n)
        self._calibrate(self.calib_x)

    # ------------------------------------------------------------ phase 1: forward

    def _calibrate(self, x: np.ndarray) -> None:
        rec = _Batch()
        self._forward(x, rec, init=True)

    def _quantize_input(self, x: np.ndarray, rec: _Batch | None, init: bool) -> np.ndarray:
        if x.shape[1:] != self.graph.input_shape:
            raise ValueError(f"input batch has per-sample shape {x.shape[1:]}, the model expects "
                             f"{self.graph.input_shape}")
        if not self.prec.quantized_acts:
            return x.astype(F32)
        if init and not self.act_ema[INPUT].initialized:
            self.act_ema[INPUT].update(x.min(), x.max())
        qp = self.act_qparams(INPUT)
        return qp.quantize(x, "floor" if self.prec.acts == "u8" else "nearest")

    def _out_qparams(self, name: str, rng: tuple[F32, F32], rec: _Batch | None, init: bool) -> QParams:
        ema = self.act_ema[name]
        if rec is not None and (self.dynamic[name] or init):
            rec.act_ranges[name] = rng
        if not ema.initialized:
            if not init and rec is None:
                raise AssertionError("activation ranges are set at construction")
            ema.update(*rng)
            if rec is not None:
                rec.fresh.add(("act", name))
        return self.act_qparams(name)

    def _forward(self, x: np.ndarray, rec: _Batch | None, init: bool = False) -> dict[str, np.ndarray]:
        """Every tensor of the forward pass (8-bit values or float32); `rec` collects what training needs."""
        g = self.graph
        vals = {INPUT: self._quantize_input(x, rec, init)}
        for n in g.nodes:
            ins = [vals[s] for s in n.inputs]
            if n.op in PARAMETRIC:
                y = self._fwd_parametric(n, ins[0], rec, init)
                if rec is not None and n.name in self.trainable:
                    rec.kept[f"{n.name}/x"] = ins[0]
                if rec is not None:
                    rec.macs["forward"] += g.macs(n) * len(x)
            elif n.op == Op.MAXPOOL:
                y, arg = POOL.maxpool_fwd(ins[0], n.attrs["kernel"], n.attrs["stride"])
                if rec is not None and self.needs[n.name]:
                    rec.kept[f"{n.name}/argmax"] = arg
            elif n.op == Op.AVGPOOL:
                kh, kw = n.attrs["kernel"]
                s = POOL.avgpool_fwd_sum(ins[0], n.attrs["kernel"], n.attrs["stride"])
                y = (s / F32(kh * kw)).astype(F32) if s.dtype.kind == "f" else \
                    rounding_divide(s, kh * kw).astype(ins[0].dtype)
            elif n.op == Op.GLOBAL_AVGPOOL:
                b, h, w, c = ins[0].shape
                if ins[0].dtype.kind == "f":
                    y = (K.seq_sum(ins[0].reshape(b, h * w, c), 1) / F32(h * w)).reshape(b, 1, 1, c)
                elif self.rounding == "tflite" and self.prec.acts == "s8":   # TFLite's MEAN (golden engine)
                    zx = int(self.act_qparams(n.inputs[0]).zero_point)
                    y = global_avgpool_fwd_s8_tflite(ins[0], zx, *tflite_mean_params(h * w))
                else:
                    s = ins[0].sum(axis=(1, 2), keepdims=True, dtype=np.int32)
                    y = rounding_divide(s, h * w).astype(ins[0].dtype)
            elif n.op == Op.FLATTEN:
                y = ins[0].reshape(len(x), -1)
            elif n.op in (Op.RELU, Op.RELU6):
                y = self._clamp_act(n.name, ins[0], n.op.value)
            elif n.op == Op.ADD:
                y = self._fwd_add(n, ins, rec, init)
            else:
                raise ValueError(f"node '{n.name}': op {n.op.value} is not supported by fqt")
            if rec is not None and self.needs[n.name] and (n.act != "none" or n.op in (Op.RELU, Op.RELU6)):
                rec.kept[f"{n.name}/y"] = y
            vals[n.name] = y
        return vals

    def _clamp_act(self, name: str, v: np.ndarray, act: str) -> np.ndarray:
        qp = self.act_qparams(name)
        if qp is None:
            return np.clip(v, 0, 6 if act == "relu6" else None).astype(F32) if act != "none" else v
        lo, hi = activation_range(qp, act)
        return np.clip(v, lo, hi).astype(v.dtype)

    def _fwd_parametric(self, n: Node, x: np.ndarray, rec: _Batch | None, init: bool) -> np.ndarray:
        a, src = n.attrs, n.inputs[0]
        xc = self._centred(src, x)
        wc = self._wc(n.name)
        mode = self._fwd_mode()
        if n.op == Op.CONV2D:
            keep = {} if rec is not None and n.name in self.trainable else None
            acc = K.conv2d_fwd_acc(xc, wc, a["stride"], a["padding"], a["groups"], mode, X_MAX, keep)
            if keep:
                rec.kept[f"{n.name}/cols"] = keep["cols"]
        else:
            acc = K.linear_fwd_acc(xc, wc, mode, X_MAX)
        if not self.prec.quantized_acts:
            acc = acc + self.b[n.name]
            return K.act_f32(acc, n.act)
        if self.b[n.name].dtype != np.int32:      # first pass: s_x is known now
            self.b_acc_scale[n.name] = self._acc_scale(n.name, src)
            bq = quantize_bias(self.b[n.name], self.act_qparams(src).scale,
                               np.broadcast_to(self._w_scale(n.name), (wc.shape[0],)))
            room = self._bias_room(n.name)
            self.b[n.name] = np.clip(bq.astype(np.float64), -room, room).astype(np.int32)
        sx = F32(self.act_qparams(src).scale)
        if self.prec.acts == "s8":
            return self._requant_s8(n, acc, src, sx, rec, init)
        # uint8: exact, an int32 bias plus an exact accumulator is an integer below 2^53 in float64
        acc = np.add(acc, self.b[n.name], dtype=np.float64 if acc.dtype.kind == "f" else np.int64)
        s_acc = F32(sx * F32(self._w_scale(n.name)))
        qy = self._out_qparams(n.name, _act_clip(*_acc_range(acc, s_acc), n.act), rec, init)
        lo, hi = activation_range(qy, n.act)
        m = K.f32_multiplier(sx, self._w_scale(n.name), qy.scale)
        return K.requant_f32_floor(acc, m, int(qy.zero_point), lo, hi).astype(np.uint8)

    def _requant_s8(self, n: Node, acc: np.ndarray, src: str, sx: F32, rec: _Batch | None,
                    init: bool) -> np.ndarray:
        """int8 output of a conv/linear from its bias-free accumulator (exact integers, any dtype).

        The range is `_acc_range(acc + b, s_acc)`, from per-channel extremes of acc
        found once (extremes of acc + b are those of acc plus b); `requantize_output` adds
        the bias exactly.
        """
        b = self.b[n.name]
        s_acc = self._acc_scale(n.name, src)
        if acc.size:
            mn, mx = K.channel_extremes(acc)
            wide = np.float64 if mn.dtype.kind == "f" else np.int64     # exact sums with the int32 bias
            mn, mx = np.add(mn, b, dtype=wide), np.add(mx, b, dtype=wide)
            rng = F32((mn.astype(F32) * s_acc).min()), F32((mx.astype(F32) * s_acc).max())
            amax = int(max(-mn.min(), mx.max()))
        else:
            rng, amax = _acc_range(acc, s_acc), 0
        qy = self._out_qparams(n.name, _act_clip(*rng, n.act), rec, init)
        lo, hi = activation_range(qy, n.act)
        mult, shift = output_multiplier(sx, np.broadcast_to(self._w_scale(n.name), s_acc.shape), qy.scale)
        return requantize_output(acc, mult, shift, int(qy.zero_point), lo, hi, bias=b, acc_max=amax,
                                 rounding=self.rounding)

    def _fwd_add(self, n: Node, ins: list[np.ndarray], rec: _Batch | None, init: bool) -> np.ndarray:
        a, b = ins
        qa, qb = self.act_qparams(n.inputs[0]), self.act_qparams(n.inputs[1])
        if qa is None:
            return K.act_f32(a + b, n.act)
        ca = (a.astype(np.int32) - qa.zero_point).astype(F32)
        cb = (b.astype(np.int32) - qb.zero_point).astype(F32)
        real = ca * qa.scale + cb * qb.scale
        qy = self._out_qparams(n.name, _act_clip(F32(real.min()), F32(real.max()), n.act), rec, init)
        lo, hi = activation_range(qy, n.act)
        if self.prec.acts == "u8":
            ma, mb = F32(qa.scale / qy.scale), F32(qb.scale / qy.scale)
            v = np.floor(ca * ma + cb * mb) + F32(qy.zero_point)
            return np.clip(v, lo, hi).astype(np.uint8)
        za, zb, zy = int(qa.zero_point), int(qb.zero_point), int(qy.zero_point)
        if self.rounding == "tflite":
            params = tflite_add_params(float(qa.scale), float(qb.scale), float(qy.scale))
            return add_fwd_s8_tflite(a, za, b, zb, params, zy, lo, hi)
        ma, mb, sh = add_multipliers(float(qa.scale), float(qb.scale), float(qy.scale))
        t = (a.astype(np.int64) - za) * ma + (b.astype(np.int64) - zb) * mb
        return np.clip(rounding_shift_right(t, sh) + zy, lo, hi).astype(np.int8)

    # ------------------------------------------------------------ the method interface

    def step(self, x: np.ndarray, y: np.ndarray, lr: float) -> StepStats:
        x = np.asarray(x, F32)
        y = np.asarray(y).astype(np.int64)
        rec = _Batch()
        vals = self._forward(x, rec)
        logits = vals[self.graph.output].reshape(len(x), -1)
        loss_q, err_q = self._loss(logits, y)
        self.loss_max = max(self.loss_max, int(loss_q.max(initial=0)))
        t0 = time.perf_counter()
        self._backward(vals, err_q, loss_q, rec)
        backward_s = time.perf_counter() - t0
        self.backward_seconds += backward_s
        self._update(rec, lr)
        self.steps += 1
        loss = float(loss_q.astype(np.float64).mean() / 2**LOSS_FRAC_BITS)
        correct = int(np.sum(logits.argmax(1) == y))
        return StepStats(loss, correct, len(x), dict(rec.macs), backward_s)

    def logits_and_losses(self, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Quantized logits (B, K) and per-sample Q16 losses at the current weights, no update.

        What a device reports for a step before its update; the C comparison reads it.
        """
        logits = self._forward(np.asarray(x, F32), None)[self.graph.output].reshape(len(x), -1)
        losses, _ = self._loss(logits, np.asarray(y).astype(np.int64))
        return logits, losses

    def predict(self, x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, F32)
        out = []
        for i in range(0, len(x), 256):
            v = self._forward(x[i:i + 256], None)[self.graph.output]
            out.append(v.reshape(len(v), -1).argmax(1))
        return np.concatenate(out) if out else np.zeros(0, np.int64)

    def config(self) -> dict[str, Any]:
        return {"method": self.name, **self.cfg.to_dict()}

    def state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        arrays: dict[str, np.ndarray] = {}
        meta: dict[str, Any] = {"steps": self.steps, "loss_max": self.loss_max, "rng": self.rng.state,
                                "act": {}, "err": {}, "grad": {}, "wrange": {}, "wqp": {}}
        for name in self.w:
            arrays[f"w/{name}"] = self.w[name].copy()
            arrays[f"b/{name}"] = self.b[name].copy()
            if name in self.b_acc_scale:
                arrays[f"bscale/{name}"] = self.b_acc_scale[name].copy()
            if name in self.step_scale:
                arrays[f"stepscale/{name}"] = self.step_scale[name].copy()
            if self.wqp[name] is not None:
                meta["wqp"][name] = self.wqp[name].to_dict()
                meta["wrange"][name] = self.w_ema[name].to_dict()
            for k, v in self.norm.get(name, {}).items():
                arrays[f"norm/{name}/{k}"] = v.copy()
        for key, table in (("act", self.act_ema), ("err", self.err_ema), ("grad", self.grad_ema)):
            meta[key] = {t: e.to_dict() for t, e in table.items()}
        return meta, arrays

    def check_state(self, meta: Any, arrays: dict[str, np.ndarray], max_steps: int) -> list[str]:
        from mcutrain.methods import state_checks
        return state_checks.fqt(self, meta, arrays, max_steps)

    def load_state(self, meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
        self.steps, self.loss_max = int(meta["steps"]), int(meta["loss_max"])
        self.rng.state = int(meta["rng"])
        for name in self.w:
            self.w[name] = arrays[f"w/{name}"].copy()
            self.b[name] = arrays[f"b/{name}"].copy()
            if f"bscale/{name}" in arrays:
                self.b_acc_scale[name] = arrays[f"bscale/{name}"].copy()
            if f"stepscale/{name}" in arrays:
                self.step_scale[name] = arrays[f"stepscale/{name}"].copy()
            if name in meta["wqp"]:
                self.wqp[name] = QParams.from_dict(meta["wqp"][name])
                self.w_ema[name] = EmaRange.from_dict(meta["wrange"][name])
            keys = [k for k in arrays if k.startswith(f"norm/{name}/")]
            if keys:
                self.norm[name] = {k.rsplit("/", 1)[1]: arrays[k].copy() for k in keys}
            else:
                self.norm.pop(name, None)
        self.act_ema = {t: EmaRange.from_dict(d) for t, d in meta["act"].items()}
        self.err_ema = {t: EmaRange.from_dict(d) for t, d in meta["err"].items()}
        self.grad_ema = {t: EmaRange.from_dict(d) for t, d in meta["grad"].items()}

    # ------------------------------------------------------------ export

    def trained_model(self) -> QuantModel:
        """The trained int8 model (exact for int8; uint8/mixed/float32 converted: `fqt_model`)."""
        return fqt_model.trained_model(self)

    def to_graph(self) -> Graph:
        """The trained model as a float graph (weights and biases dequantized), for `io.save`."""
        g = self.graph.copy()
        for n in g.parametric():
            w, qp = self.w[n.name], self.wqp[n.name]
            n.params["weight"] = w.astype(F32) if qp is None else qp.dequantize(w)
            b = self.b[n.name]
            n.params["bias"] = b.astype(F32) if b.dtype != np.int32 else \
                (b.astype(F32) * self._acc_scale(n.name, n.inputs[0])).astype(F32)
        return g
