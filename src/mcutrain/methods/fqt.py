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
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mcutrain.engines import fqt_kernels as K
from mcutrain.graph import INPUT, PARAMETRIC, Graph, Node, Op, fold_batchnorm, fuse_activations
from mcutrain.methods.base import StepStats, TrainingMethod
from mcutrain.methods.fqt_state import FQTConfig, Precision, precision
from mcutrain.methods.partial import PartialPolicy, magnitudes, top_k_mask
from mcutrain.methods.trainable import resolve_trainable
from mcutrain.quant.fixedpoint import (
    activation_range,
    output_multiplier,
    quantize_multiplier,
    requantize,
    requantize_output,
    rounding_divide,
    rounding_shift_right,
)
from mcutrain.quant.loss import LOSS_FRAC_BITS, PROB_FRAC_BITS, int_softmax_cross_entropy
from mcutrain.quant.qparams import EmaRange, QParams, qparams_from_range, quantize_bias
from mcutrain.quant.rng import XorShift32
from mcutrain.quant.rounding import round_half_away, round_mode

F32 = np.float32
SHARES_QPARAMS = frozenset({Op.MAXPOOL, Op.AVGPOOL, Op.GLOBAL_AVGPOOL, Op.FLATTEN, Op.RELU, Op.RELU6})
"""Ops whose output keeps its input's qparams (activations and errors alike)."""
ERROR_CLAMP = 127
X_MAX = 255
"""|x - z_x| <= 255 for every 8-bit activation: the GEMM exactness bound needs no scan of x."""
"""int8 errors are symmetric: levels -127..127, so negation never saturates."""
PRESCALE_BITS = 15
"""int8 error propagation: per-channel weight scales enter as Q15 ratios s_w[o] / max(s_w)."""
NORM_EPS = F32(1e-12)


def pow2_symmetric_qparams(lo: np.ndarray | float, hi: np.ndarray | float) -> QParams:
    """int8 error qparams: zero point 0, scale the smallest 2^e with 127 * 2^e >= max(|lo|, |hi|).

    Exact: with amax = f * 2^x (frexp, f in [0.5, 1)), e = x - 7 if f <= 127/128 else x - 6.
    A zero range gets 2^-24 (below any error the integer loss produces).
    """
    amax = float(max(-float(F32(lo)), float(F32(hi)), 0.0))
    if amax == 0.0:
        return QParams(np.float32(2.0**-24), np.int32(0), "int8")
    f, x = np.frexp(amax)
    e = int(x) - 7 if f <= 127 / 128 else int(x) - 6
    return QParams(np.float32(np.ldexp(1.0, max(e, -126))), np.int32(0), "int8")


def _act_clip(lo: F32, hi: F32, act: str) -> tuple[F32, F32]:
    """Real range of an activated tensor from its pre-activation range."""
    if act in ("relu", "relu6"):
        lo, hi = max(lo, F32(0)), max(hi, F32(0))
    if act == "relu6":
        lo, hi = min(lo, F32(6)), min(hi, F32(6))
    return F32(lo), F32(hi)


def _acc_range(acc: np.ndarray, scale: np.ndarray | F32) -> tuple[F32, F32]:
    """Real (min, max) of float32(acc) * scale (scale per tensor or per last-axis channel).

    NOTE: x -> float32(x) * s is monotone for s > 0, so the extremes of the
    accumulator give the extremes of the real tensor: a device tracks them on
    the fly and no float copy is kept.
    """
    s = np.asarray(scale, F32)
    if acc.size == 0:
        return F32(0), F32(0)
    if s.ndim == 0:
        return F32(F32(acc.min()) * s), F32(F32(acc.max()) * s)
    a2 = acc.reshape(-1, acc.shape[-1])
    return (F32((a2.min(0).astype(F32) * s).min()), F32((a2.max(0).astype(F32) * s).max()))


@dataclass
class _Err:
    """An error tensor in flight: centred values (int32/int64 or float32) and its scale (None: float)."""

    ec: np.ndarray
    scale: F32 | None


@dataclass
class _Batch:
    """What one step records: tensor ranges, kept tensors, gradient buffers, executed MACs."""

    act_ranges: dict[str, tuple[F32, F32]] = field(default_factory=dict)
    err_ranges: dict[str, tuple[F32, F32]] = field(default_factory=dict)
    grad_ranges: dict[str, tuple[F32, F32]] = field(default_factory=dict)
    kept: dict[str, np.ndarray] = field(default_factory=dict)
    grads: dict[str, tuple] = field(default_factory=dict)
    macs: dict[str, int] = field(default_factory=lambda: {"forward": 0, "error": 0, "weight_grad": 0})
    fresh: set = field(default_factory=set)


class FQT(TrainingMethod):
    """FQT bound to one graph; `calib_x` (a few training samples) initializes the activation ranges."""

    name = "fqt"

    def __init__(self, graph: Graph, config: FQTConfig, calib_x: np.ndarray) -> None:
        self.cfg = config
        self.prec: Precision = precision(config.precision, config.weight_rounding, config.relative_update)
        self.graph = fuse_activations(fold_batchnorm(graph))
        g = self.graph
        self.trainable = resolve_trainable(g, config.trainable)
        self.partial = PartialPolicy(config.lambda_min, config.lambda_max)
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
        self.loss_max = 0
        self.steps = 0
        self._qp_cache: dict[str, tuple] = {}
        self._bias_lr: dict[str, np.ndarray] = {}
        self._bias_ghat: dict[str, np.ndarray] = {}
        self.backward_seconds = 0.0
        """Wall time of all backward passes so far (error propagation + weight gradients); not state."""
        for n in g.parametric():
            self._init_weights(n)
        self._calibrate(np.asarray(calib_x, F32))

    # ------------------------------------------------------------ formats

    def _fwd_mode(self) -> str:
        if self.prec.quantized_acts:
            return "int"
        return "f32seq" if self.cfg.exact_float_order else "f32"

    def _err_mode(self) -> str:
        if self.prec.errors != "f32":
            return "int"
        return "f32seq" if self.cfg.exact_float_order else "f32"

    def _init_weights(self, n: Node) -> None:
        w = n.params["weight"].astype(F32)
        o = w.shape[0]
        if self.prec.weights == "f32":
            self.w[n.name], self.wqp[n.name] = w.copy(), None
            self.b[n.name] = n.params["bias"].astype(F32).copy()
            return
        if self.prec.weights == "u8":
            ema = EmaRange(self.cfg.alpha_w)
            ema.update(w.min(), w.max())
            qp = ema.qparams("uint8")
            self.w[n.name] = qp.quantize(w, "floor")
        else:
            amax = np.abs(w.reshape(o, -1)).max(1)
            ema = EmaRange(self.cfg.alpha_w)
            ema.update(-amax, amax)
            qp = ema.qparams("int8", symmetric=True)
            self.w[n.name] = np.clip(qp.quantize(w, "nearest"), -127, 127).astype(np.int8)
        self.w_ema[n.name], self.wqp[n.name] = ema, qp
        self.step_scale[n.name] = np.full(o, F32(127) * F32(np.max(qp.scale)), F32)
        self.b[n.name] = n.params["bias"].astype(F32).copy()   # quantized once s_x is known

    def act_qparams(self, t: str) -> QParams | None:
        """Current activation qparams of tensor `t` (None for float32 activations)."""
        if not self.prec.quantized_acts:
            return None
        ema = self.act_ema[self.owner[t]]
        hit = self._qp_cache.get(self.owner[t])
        if hit is not None and hit[0] is ema.lo and hit[1] is ema.hi:
            return hit[2]
        qp = ema.qparams("uint8" if self.prec.acts == "u8" else "int8")
        self._qp_cache[self.owner[t]] = (ema.lo, ema.hi, qp)
        return qp

    def _err_qparams(self, t: str, rng: tuple[F32, F32], rec: _Batch) -> QParams:
        """Error qparams of tensor `t`: from its EMA, or from this batch's range the first time."""
        ema = self.err_ema.setdefault(t, EmaRange(self.cfg.alpha_e))
        rec.err_ranges[t] = rng
        if not ema.initialized:
            ema.update(*rng)
            rec.fresh.add(("err", t))
        key = "err:" + t
        hit = self._qp_cache.get(key)
        if hit is not None and hit[0] is ema.lo and hit[1] is ema.hi:
            return hit[2]
        qp = ema.qparams("uint8") if self.prec.errors == "u8" else pow2_symmetric_qparams(ema.lo, ema.hi)
        self._qp_cache[key] = (ema.lo, ema.hi, qp)
        return qp

    def _wc(self, name: str) -> np.ndarray:
        """Centred weights: int32 w - z_w, or float32."""
        w = self.w[name]
        if self.wqp[name] is None:
            return w
        zp = self.wqp[name].zero_point.astype(F32)
        return w.astype(F32) - zp.reshape(zp.shape + (1,) * (w.ndim - zp.ndim))   # exact: |w - z| <= 255

    def _centred(self, t: str, v: np.ndarray) -> np.ndarray:
        qp = self.act_qparams(t)
        return v if qp is None else v.astype(F32) - F32(qp.zero_point)   # exact: |x - z| <= 255

    def _w_scale(self, name: str) -> np.ndarray:
        return self.wqp[name].scale

    def _acc_scale(self, name: str, src: str) -> np.ndarray:
        """Scale of a layer's accumulator, s_x * s_w[c] in float32, shape (O,)."""
        o = self.w[name].shape[0]
        return np.broadcast_to(F32(self.act_qparams(src).scale) * self._w_scale(name), (o,)).astype(F32)

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
                y, arg = K.maxpool_fwd(ins[0], n.attrs["kernel"], n.attrs["stride"])
                if rec is not None and self.needs[n.name]:
                    rec.kept[f"{n.name}/argmax"] = arg
            elif n.op == Op.AVGPOOL:
                kh, kw = n.attrs["kernel"]
                s = K.avgpool_fwd_sum(ins[0], n.attrs["kernel"], n.attrs["stride"])
                y = (s / F32(kh * kw)).astype(F32) if s.dtype.kind == "f" else \
                    rounding_divide(s, kh * kw).astype(ins[0].dtype)
            elif n.op == Op.GLOBAL_AVGPOOL:
                b, h, w, c = ins[0].shape
                if ins[0].dtype.kind == "f":
                    y = (K.seq_sum(ins[0].reshape(b, h * w, c), 1) / F32(h * w)).reshape(b, 1, 1, c)
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
        acc = acc + self.b[n.name]
        sx = F32(self.act_qparams(src).scale)
        if self.prec.acts == "u8":
            s_acc = F32(sx * F32(self._w_scale(n.name)))
            qy = self._out_qparams(n.name, _act_clip(*_acc_range(acc, s_acc), n.act), rec, init)
            lo, hi = activation_range(qy, n.act)
            m = K.f32_multiplier(sx, self._w_scale(n.name), qy.scale)
            return K.requant_f32_floor(acc, m, int(qy.zero_point), lo, hi).astype(np.uint8)
        s_acc = self._acc_scale(n.name, src)
        qy = self._out_qparams(n.name, _act_clip(*_acc_range(acc, s_acc), n.act), rec, init)
        lo, hi = activation_range(qy, n.act)
        mult, shift = output_multiplier(sx, np.broadcast_to(self._w_scale(n.name), s_acc.shape), qy.scale)
        return requantize_output(acc, mult, shift, int(qy.zero_point), lo, hi)

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
        from mcutrain.quant.fixedpoint import add_multipliers
        ma, mb, sh = add_multipliers(float(qa.scale), float(qb.scale), float(qy.scale))
        t = (a.astype(np.int64) - int(qa.zero_point)) * ma + (b.astype(np.int64) - int(qb.zero_point)) * mb
        return np.clip(rounding_shift_right(t, sh) + int(qy.zero_point), lo, hi).astype(np.int8)

    # ------------------------------------------------------------ loss

    def _loss(self, logits: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per-sample Q16 loss and Q24 error p - onehot from the integer softmax cross-entropy.

        uint8 logits are shifted by -128 (the zero point cancels in softmax);
        float32 logits are quantized to int8 with their own batch range for the loss only.
        """
        out = self.graph.output
        lg = logits.reshape(len(logits), -1)
        if self.prec.acts == "u8":
            qp = self.act_qparams(out)
            return int_softmax_cross_entropy(lg.astype(np.int16) - 128, float(qp.scale),
                                             int(qp.zero_point) - 128, y)
        if self.prec.acts == "s8":
            qp = self.act_qparams(out)
            return int_softmax_cross_entropy(lg, float(qp.scale), int(qp.zero_point), y)
        qp = qparams_from_range(lg.min(), lg.max(), "int8")
        return int_softmax_cross_entropy(qp.quantize(lg, "nearest"), float(qp.scale),
                                         int(qp.zero_point), y)

    def _logit_error(self, err_q: np.ndarray, rec: _Batch) -> _Err:
        """Quantize the Q24 error p - onehot into the logits' error format."""
        out = self.graph.output
        unit = F32(2.0**-PROB_FRAC_BITS)
        if self.prec.errors == "f32":
            return _Err(err_q.astype(F32) * unit, None)
        qp = self._err_qparams(out, _acc_range(err_q, unit), rec)
        if self.prec.errors == "u8":
            m = F32(unit / qp.scale)
            e = K.requant_f32_floor(err_q, m, int(qp.zero_point), 0, 255)
            return _Err(e - qp.zero_point, F32(qp.scale))
        k = int(np.frexp(np.float64(qp.scale))[1]) - 1           # s_e = 2^k
        n = PROB_FRAC_BITS + k
        e = rounding_shift_right(err_q.astype(np.int64), n) if n >= 1 else err_q.astype(np.int64) << -n
        return _Err(np.clip(e, -ERROR_CLAMP, ERROR_CLAMP).astype(np.int32), F32(qp.scale))

    # ------------------------------------------------------------ phases 2 and 3: backward

    def _to_err(self, t: str, acc: np.ndarray, s_acc: F32 | None, rec: _Batch) -> _Err:
        """Requantize an error accumulator (or float32 values) into tensor t's own error format."""
        if self.prec.errors == "f32":
            return _Err(acc if s_acc is None else (acc * s_acc).astype(F32), None)
        qp = self._err_qparams(t, _acc_range(acc, s_acc), rec)
        if self.prec.errors == "u8":
            m = F32(F32(s_acc) / qp.scale)
            e = K.requant_f32_floor(acc, m, int(qp.zero_point), 0, 255)
            return _Err(e - qp.zero_point, F32(qp.scale))
        mult, shift = quantize_multiplier(np.float64(F32(s_acc)) / np.float64(qp.scale))
        e = np.clip(requantize(acc, mult, shift), -ERROR_CLAMP, ERROR_CLAMP)
        return _Err(e.astype(np.int32), F32(qp.scale))

    def _combine(self, t: str, parts: list[_Err], rec: _Batch) -> _Err:
        """Sum the errors a tensor receives from several consumers (float32, arrival order), requantize."""
        total = None
        for p in parts:
            real = p.ec if p.scale is None else p.ec.astype(F32) * p.scale
            total = real.astype(F32) if total is None else total + real
        if self.prec.errors == "f32":
            return _Err(total, None)
        qp = self._err_qparams(t, (F32(total.min()), F32(total.max())), rec)
        v = total / qp.scale
        if self.prec.errors == "u8":
            e = np.clip(np.floor(v) + F32(qp.zero_point), 0, 255).astype(np.int32) - qp.zero_point
        else:
            e = np.clip(round_half_away(v), -ERROR_CLAMP, ERROR_CLAMP).astype(np.int32)
        return _Err(e, F32(qp.scale))

    def _mask(self, n: Node, err: _Err, rec: _Batch) -> _Err:
        act = n.op.value if n.op in (Op.RELU, Op.RELU6) else n.act
        if act == "none":
            return err
        y = rec.kept[f"{n.name}/y"]
        qp = self.act_qparams(n.name)
        if qp is None:
            keep = (y > 0) & (y < 6) if act == "relu6" else y > 0
        else:
            lo, hi = activation_range(qp, act)
            z = int(qp.zero_point)
            keep = (y > z) & (y < hi) if act == "relu6" else y > max(lo, z)
        return _Err(np.where(keep, err.ec, 0).astype(err.ec.dtype), err.scale)

    def _backward(self, vals: dict[str, np.ndarray], err_q: np.ndarray, loss_q: np.ndarray,
                  rec: _Batch) -> None:
        g = self.graph
        pending: dict[str, list[_Err]] = {g.output: [self._logit_error(err_q, rec)]}
        for n in reversed(g.nodes):
            parts = pending.pop(n.name, None)
            if parts is None or not self.needs[n.name]:
                continue
            err = self._combine(n.name, parts, rec) if self.n_consumers[n.name] > 1 else parts[0]
            err = self._mask(n, err, rec)
            outs = self._bwd_node(n, err, vals, loss_q, rec)
            for src, e in zip(n.inputs, outs):
                if e is None or not self.needs[src]:
                    continue
                pending.setdefault(src, []).append(e)

    def _bwd_node(self, n: Node, err: _Err, vals, loss_q, rec: _Batch) -> list[_Err | None]:
        a = n.attrs
        src = n.inputs[0]
        if n.op in PARAMETRIC:
            return [self._bwd_parametric(n, err, vals, loss_q, rec)]
        if n.op == Op.MAXPOOL:
            arg = rec.kept[f"{n.name}/argmax"]
            ec = K.maxpool_bwd(err.ec, arg, vals[src].shape, a["kernel"], a["stride"])
            return [_Err(ec, err.scale)]
        if n.op == Op.AVGPOOL:
            kh, kw = a["kernel"]
            share = self._divide(err.ec, kh * kw)
            return [_Err(K.avgpool_bwd_spread(share, vals[src].shape, a["kernel"], a["stride"]), err.scale)]
        if n.op == Op.GLOBAL_AVGPOOL:
            b, h, w, c = vals[src].shape
            share = self._divide(err.ec, h * w)
            return [_Err(np.broadcast_to(share, (b, h, w, c)).copy(), err.scale)]
        if n.op == Op.FLATTEN:
            return [_Err(err.ec.reshape(vals[src].shape), err.scale)]
        if n.op in (Op.RELU, Op.RELU6):
            return [err]
        if n.op == Op.ADD:
            return [err, _Err(err.ec.copy(), err.scale)]
        raise ValueError(f"node '{n.name}': op {n.op.value} has no fqt backward")

    @staticmethod
    def _divide(ec: np.ndarray, count: int) -> np.ndarray:
        if ec.dtype.kind == "f":
            return (ec / F32(count)).astype(F32)
        return rounding_divide(ec, count).astype(np.int32)

    def _bwd_parametric(self, n: Node, err: _Err, vals, loss_q, rec: _Batch) -> _Err | None:
        a, src, name = n.attrs, n.inputs[0], n.name
        ec = err.ec
        b = ec.shape[0]
        o = self.w[name].shape[0]
        per_filter = self.graph.macs(n) // o
        trainable = name in self.trainable
        kept = np.ones((b, o), bool)
        if trainable and self.partial.active and (name != self.graph.output or self.cfg.partial_output):
            k = self.partial.keep_counts(loss_q, self.loss_max, o)
            kept = top_k_mask(magnitudes(ec), k)
            ec = (ec.reshape(b, -1, o) * kept[:, None, :]).reshape(ec.shape).astype(ec.dtype)
        executed = int(kept.sum()) * per_filter
        if trainable:
            self._weight_grad(n, ec, err.scale, vals, kept, rec)
            rec.macs["weight_grad"] += executed
        if not self.needs[src]:
            return None
        rec.macs["error"] += executed
        mode = self._err_mode()
        wc = self._wc(name)
        ein, s_acc = ec, None
        if self.prec.errors == "u8":
            s_acc = F32(F32(self._w_scale(name)) * err.scale)
        elif self.prec.errors == "s8":
            ein, s_acc = self._prescale_errors(name, ec, err.scale)
        elif self.prec.weights == "u8":        # mixed: float32 errors, uint8 weights
            wc = wc.astype(F32)
        if n.op == Op.CONV2D:
            acc = K.conv2d_bwd_in_acc(ein, wc, vals[src].shape, a["stride"], a["padding"], a["groups"],
                                      mode, self._e_max(ein))
        else:
            acc = K.linear_bwd_in_acc(ein, wc, mode, self._e_max(ein))
        if self.prec.errors == "f32" and self.prec.weights == "u8":
            acc = (acc * F32(self._w_scale(name))).astype(F32)
        if self.n_consumers[src] > 1 and self.prec.errors != "f32":
            return self._as_real(acc, s_acc)
        return self._to_err(src, acc, s_acc, rec)

    def _as_real(self, acc: np.ndarray, s_acc: F32) -> _Err:
        """A contribution to a tensor with several consumers: float32 reals, requantized after the sum."""
        return _Err(acc.astype(F32) * F32(s_acc), None)

    def _e_max(self, ec: np.ndarray) -> int | None:
        """Known bound of |centred error| from its format (None: float errors, scan when needed)."""
        if self.prec.errors == "u8":
            return 255
        if self.prec.errors == "s8":
            return 1 << 15 if ec.dtype == np.int16 else ERROR_CLAMP   # prescaled (int16) or raw
        return None

    def _prescale_errors(self, name: str, ec: np.ndarray, s_e: F32) -> tuple[np.ndarray, F32]:
        """int8 errors times Q15 ratios s_w[o] / max(s_w), rounded to int16 (see the docs).

        e16[o] = round_half_away(e[o] * r[o] / 2^7), r[o] = round_half_away(float32(s_w[o] / s_max) * 2^15);
        the accumulator's scale is then float32(s_max * s_e) * 2^-8.
        """
        sw = self._w_scale(name)
        smax = F32(sw.max())
        r = round_half_away((sw / smax).astype(F32) * F32(2**PRESCALE_BITS)).astype(np.int64)
        v = ec.astype(np.int32) * r.astype(np.int32)             # |v| <= 127 * 2^15 < 2^22
        mag = (np.abs(v) + (1 << 6)) >> 7                        # rounding_shift_right(v, 7) in int32
        e16 = np.where(v < 0, -mag, mag).astype(np.int16)
        return e16, F32(F32(smax * s_e) * F32(2.0**-8))

    def _weight_grad(self, n: Node, ec: np.ndarray, s_e: F32 | None, vals, kept: np.ndarray,
                     rec: _Batch) -> None:
        a, src, name = n.attrs, n.inputs[0], n.name
        x = rec.kept[f"{name}/x"]
        xc = self._centred(src, x)
        per_sample = self.prec.quantize_sample_grads
        mode = "int" if (self.prec.errors != "f32") else self._err_mode()
        if self.prec.errors == "f32":
            xc = xc.astype(F32)
        if n.op == Op.CONV2D:
            gacc = K.conv2d_bwd_w_acc(xc, ec, self.w[name].shape, a["stride"], a["padding"], a["groups"],
                                      mode, per_sample, X_MAX, self._e_max(ec),
                                      cols=rec.kept.get(f"{name}/cols"))
        else:
            gacc = K.linear_bwd_w_acc(xc, ec, mode, per_sample, X_MAX, self._e_max(ec))
        gb = K.bias_grad_acc(ec, mode)
        sx = F32(self.act_qparams(src).scale) if self.prec.quantized_acts else None
        if per_sample:                                # uint8: quantize each sample's gradient
            s_gacc = F32(sx * s_e)
            rng = _acc_range(gacc, s_gacc)
            ema = self.grad_ema.setdefault(name, EmaRange(self.cfg.alpha_e))
            rec.grad_ranges[name] = rng
            if not ema.initialized:
                ema.update(*rng)
                rec.fresh.add(("grad", name))
            qg = ema.qparams("uint8")
            m = K.f32_multiplier(sx, s_e, qg.scale)
            gq = K.requant_f32_floor(gacc, m, int(qg.zero_point), 0, 255)
            gsum = gq.sum(0, dtype=np.int64) - np.int64(len(gq)) * int(qg.zero_point)
            real = gsum.astype(F32) * F32(qg.scale)
        elif self.prec.errors == "s8":
            real = gacc.astype(F32) * F32(sx * s_e)
        elif sx is not None:                          # mixed
            real = (gacc * sx).astype(F32)
        else:
            real = gacc.astype(F32)
        breal = gb.astype(F32) if s_e is None else gb.astype(F32) * s_e
        rec.grads[name] = (real, breal.astype(F32), kept.any(0))

    # ------------------------------------------------------------ phase 4: update

    def _update(self, rec: _Batch, lr: float) -> None:
        old_acc_scale = dict(self.b_acc_scale)
        for t, rng in rec.act_ranges.items():
            if self.dynamic[t] and ("act", t) not in rec.fresh:
                self.act_ema[t].update(*rng)
        for t, rng in rec.err_ranges.items():
            if ("err", t) not in rec.fresh:
                self.err_ema[t].update(*rng)
        for t, rng in rec.grad_ranges.items():
            if ("grad", t) not in rec.fresh:
                self.grad_ema[t].update(*rng)
        lr32 = F32(lr)
        if self.prec.weight_rounding == "stochastic" and self.prec.weights == "s8":
            # NOTE: one draw call for the whole update: the same consecutive stream values as
            # one call per layer (layers in graph order), without a jump-ahead per layer
            sizes = [int(g[2].sum()) * int(np.prod(self.w[nm].shape[1:])) for nm, g in rec.grads.items()]
            self._uniform = self.rng.uniform01(sum(sizes))
        for n in self.graph.parametric():
            name = n.name
            if name in rec.grads:
                self._update_layer(n, rec.grads[name], lr32)
            if self.prec.quantized_acts:
                self._rescale_bias(n, old_acc_scale[name], rec.grads.get(name), lr32)

    def _standardize(self, name: str, g: np.ndarray, gb: np.ndarray,
                     upd: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(g - mu) / sd per filter with EMA mu, sd (alpha_norm); returns (g_hat, g_hat of the bias).

        A filter's gradient is its K weights and its bias (K + 1 values, bias last).
        NOTE: the bias belongs to the filter's statistics: dividing a bias gradient by
        the sd of its weights alone blows up where the weights see (nearly) zero
        inputs and the bias does not (a dead channel below).
        """
        o = g.shape[0]
        g2 = np.concatenate([g.reshape(o, -1), gb.reshape(o, 1)], axis=1).astype(F32)
        kk = F32(g2.shape[1])
        mu_b = K.seq_sum(g2, 1) / kk
        var_b = K.seq_sum((g2 - mu_b[:, None]) * (g2 - mu_b[:, None]), 1) / kk
        sd_b = np.sqrt(var_b).astype(F32)
        st = self.norm.setdefault(name, {"mu": np.zeros(o, F32), "sd": np.zeros(o, F32),
                                         "init": np.zeros(o, bool)})
        an = F32(self.cfg.alpha_norm)
        keep = F32(1) - an
        mu = np.where(st["init"], keep * st["mu"] + an * mu_b, mu_b).astype(F32)
        sd = np.where(st["init"], keep * st["sd"] + an * sd_b, sd_b).astype(F32)
        st["mu"] = np.where(upd, mu, st["mu"]).astype(F32)
        st["sd"] = np.where(upd, sd, st["sd"]).astype(F32)
        st["init"] = st["init"] | upd
        den = st["sd"] + NORM_EPS
        ghat = ((g2 - st["mu"][:, None]) / den[:, None]).astype(F32)
        ghat[~upd | (st["sd"] == 0)] = 0
        return ghat[:, :-1].reshape(g.shape), np.ascontiguousarray(ghat[:, -1])

    def _update_layer(self, n: Node, grads: tuple, lr: F32) -> None:
        name = n.name
        g, gb, upd = grads
        ghat, ghat_b = self._standardize(name, g, gb, upd)
        w = self.w[name]
        o = w.shape[0]
        if self.prec.weights == "f32":
            self.w[name] = (w - lr * ghat).astype(F32)
            self.b[name] = (self.b[name] - lr * ghat_b).astype(F32)
            return
        self._bias_ghat[name] = ghat_b
        qp = self.wqp[name]
        self._bias_lr[name] = self._layer_lr(name, lr)
        real = qp.dequantize(w)                           # float32(w - z) * s
        step = self._layer_lr(name, lr)[:, None] * ghat.reshape(o, -1)
        new = (real.reshape(o, -1) - step).reshape(w.shape).astype(F32)
        ema = self.w_ema[name]
        if self.prec.weights == "u8":
            ema.update(new.min(), new.max())
            qn = ema.qparams("uint8")
            self.w[name] = qn.quantize(new, self.prec.weight_rounding, self.rng)
            self.wqp[name] = qn
            return
        amax = np.abs(new.reshape(o, -1)).max(1)
        lo_old, hi_old = ema.lo.copy(), ema.hi.copy()
        ema.update(np.where(upd, -amax, lo_old), np.where(upd, amax, hi_old))
        ema.lo, ema.hi = np.where(upd, ema.lo, lo_old).astype(F32), np.where(upd, ema.hi, hi_old).astype(F32)
        qn = ema.qparams("int8", symmetric=True)
        rows = np.flatnonzero(upd)
        v = new.reshape(o, -1)[rows] / qn.scale[rows][:, None]
        if self.prec.weight_rounding == "stochastic":
            u, self._uniform = self._uniform[:v.size], self._uniform[v.size:]
            r = np.floor(v + u.reshape(v.shape))          # round_stochastic with the pre-drawn stream
        else:
            r = round_mode(v, self.prec.weight_rounding, self.rng)
        q = np.clip(r, -127, 127).astype(np.int8)
        w2 = w.reshape(o, -1).copy()
        w2[rows] = q
        self.w[name] = w2.reshape(w.shape)
        self.wqp[name] = qn

    def _bias_room(self, name: str) -> np.ndarray:
        """Largest |bias| per channel that keeps the int32 accumulator safe (as in PTQ).

        NOTE: |acc| <= |b| + 255 * sum_k |w[c, k] - z_w|, so |b| <= 2^31 - 1 - 255 * L1(c)
        makes every partial sum fit int32 whatever the weights did (a diverging run
        saturates its biases instead of overflowing the C accumulator).
        """
        wc = self._wc(name)
        l1 = np.abs(wc.reshape(wc.shape[0], -1).astype(np.float64)).sum(1)
        return np.maximum(float(2**31 - 1) - X_MAX * l1, 0.0)

    def _layer_lr(self, name: str, lr: F32) -> np.ndarray:
        """Per-filter step size (O,): lr, or lr * the layer's initial max|w| with relative updates.

        NOTE: the reference is the range at the start of training, not the current
        one: a step proportional to the current range would let the range grow
        geometrically under the random walk of the updates.
        """
        o = self.w[name].shape[0]
        if not self.prec.relative_update:
            return np.full(o, lr, F32)
        return (lr * self.step_scale[name]).astype(F32)

    def _rescale_bias(self, n: Node, old_scale: np.ndarray, grads: tuple | None, lr: F32) -> None:
        """Move the int32 bias to the new accumulator scale s_x * s_w, applying its update if trained.

        b_real = float32(b) * s_old - lr * g_hat_b; b = sat(round_half_away(b_real / s_new)).
        Channels with no update and an unchanged scale keep their integer bias.
        """
        name = n.name
        new_scale = self._acc_scale(name, n.inputs[0])
        step = np.zeros_like(new_scale)
        changed = new_scale != old_scale
        if grads is not None:
            lr = self._bias_lr.pop(name)
            upd = grads[2]
            step = (lr * self._bias_ghat.pop(name)).astype(F32)    # 0 where not updated
            changed |= upd
        if not changed.any():
            return
        real = (self.b[name].astype(F32) * old_scale - step).astype(F32)
        with np.errstate(over="ignore"):      # a diverged run saturates (room clamp below)
            q = round_half_away((real / new_scale).astype(F32)).astype(np.float64)
        room = self._bias_room(name)
        q = np.clip(q, -room, room).astype(np.int32)
        self.b[name] = np.where(changed, q, self.b[name]).astype(np.int32)
        self.b_acc_scale[name] = new_scale

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

    def schedule(self, batch: int):
        """Kernel calls of one step with the tensors each reads and writes (`fqt_schedule`)."""
        from mcutrain.methods.fqt_schedule import fqt_schedule
        return fqt_schedule(self, batch)

    # ------------------------------------------------------------ export

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
