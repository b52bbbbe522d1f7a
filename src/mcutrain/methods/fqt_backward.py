"""FQT phases 2 and 3: the integer loss, error propagation and weight gradients (a mixin of `FQT`).

docs/integer-semantics.md, sections 13.2-13.5, define every operation here.
"""

from __future__ import annotations

import numpy as np

from mcutrain.engines import fqt_kept as KEPT
from mcutrain.engines import fqt_kernels as K
from mcutrain.engines import fqt_pool as POOL
from mcutrain.graph import PARAMETRIC, Node, Op
from mcutrain.methods.fqt_common import (
    ERROR_CLAMP,
    F32,
    PRESCALE_BITS,
    X_MAX,
    _acc_range,
    _Batch,
    _Err,
)
from mcutrain.methods.partial import magnitudes, top_k
from mcutrain.quant.fixedpoint import (
    activation_range,
    quantize_multiplier,
    requantize_output,
    rounding_divide,
    rounding_shift_right,
)
from mcutrain.quant.loss import PROB_FRAC_BITS, int_softmax_cross_entropy
from mcutrain.quant.qparams import EmaRange, QParams, qparams_from_range
from mcutrain.quant.rounding import round_half_away

ERR_S8 = np.int16
"""Storage of centred int8 errors in flight (|e| <= 127): half the bytes of int32, and room for the
sums of overlapping max-pool windows (at most 256 taps of 127)."""


KEPT_DENSE_ABOVE = 0.5
"""Partial updates compute only the kept filters while they are at most this share of the dense
products (padding included); above it the dense kernels are faster (measured in docs/methods.md)."""


def float_logits_s8(logits: np.ndarray) -> tuple[np.ndarray, QParams]:
    """float32 logits (B, K) as the integer loss sees them: each sample's logits quantized to int8
    (nearest) with the qparams of that sample's own range (a per-sample QParams, first axis).

    Per sample, not per batch, so a sample's loss does not depend on the other samples of its batch
    and the generated C quantizes each sample's logits as its forward pass ends, with no pass over
    the batch first to find a range (docs/integer-semantics.md 13.2).
    """
    lg = np.asarray(logits).reshape(len(logits), -1)
    own = [qparams_from_range(lo, hi, "int8") for lo, hi in zip(lg.min(axis=1), lg.max(axis=1))]
    qp = QParams(np.array([p.scale for p in own], np.float32),
                 np.array([p.zero_point for p in own], np.int32))
    return qp.quantize(lg, "nearest"), qp


class FQTBackward:
    """Loss, error propagation and weight gradients; state lives on the `FQT` object."""

    def _loss(self, logits: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per-sample Q16 loss and Q24 error p - onehot from the integer softmax cross-entropy.

        uint8 logits are shifted by -128 (the zero point cancels in softmax);
        float32 logits are quantized to int8 for the loss only, each sample with its own range
        (`float_logits_s8`).
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
        q, qp = float_logits_s8(lg)
        return int_softmax_cross_entropy(q, qp.scale, qp.zero_point, y)

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
        return _Err(np.clip(e, -ERROR_CLAMP, ERROR_CLAMP).astype(ERR_S8), F32(qp.scale))

    # ------------------------------------------------------------ phases 2 and 3: backward

    def _to_err(self, t: str, acc: np.ndarray, s_acc: F32 | None, rec: _Batch) -> _Err:
        """Requantize an error accumulator (or float32 values) into tensor t's own error format."""
        if self.prec.errors == "f32":
            return _Err(acc if s_acc is None else (acc * s_acc).astype(F32), None)
        lo, hi = (acc.min(), acc.max()) if acc.size else (0, 0)      # exact integers (any dtype)
        s = F32(s_acc)
        qp = self._err_qparams(t, (F32(F32(lo) * s), F32(F32(hi) * s)), rec)     # = _acc_range(acc, s_acc)
        if self.prec.errors == "u8":
            m = F32(s / qp.scale)
            e = K.requant_f32_floor(acc, m, int(qp.zero_point), 0, 255)
            return _Err(e - qp.zero_point, F32(qp.scale))
        mult, shift = quantize_multiplier(np.float64(s) / np.float64(qp.scale))
        e = requantize_output(acc, mult, shift, 0, -ERROR_CLAMP, ERROR_CLAMP, ERR_S8,
                              acc_max=int(max(-lo, hi)))
        return _Err(e, F32(qp.scale))

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
            e = np.clip(round_half_away(v), -ERROR_CLAMP, ERROR_CLAMP).astype(ERR_S8)
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
        return _Err(POOL.select(err.ec, keep), err.scale)

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
            ec = POOL.maxpool_bwd(err.ec, arg, vals[src].shape, a["kernel"], a["stride"])
            return [_Err(ec, err.scale)]
        if n.op == Op.AVGPOOL:
            kh, kw = a["kernel"]
            share = self._divide(err.ec, kh * kw)
            spread = POOL.avgpool_bwd_spread(share, vals[src].shape, a["kernel"], a["stride"])
            return [_Err(spread, err.scale)]
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
        groups = eg = None
        policy = self.decisions.partial_policy(name)
        if policy is not None:
            k = policy.keep_counts(loss_q, self.loss_max, o)
            kept, order = top_k(magnitudes(ec), k)
            groups = self._kept_groups(n, kept, order)
            if groups is None:
                ec = (ec.reshape(b, -1, o) * kept.astype(ec.dtype)[:, None, :]).reshape(ec.shape)
            else:                     # only the kept filters' errors, gathered per group of samples
                eg = KEPT.gather_kept(ec, kept, groups)
        executed = int(kept.sum()) * per_filter
        if trainable:
            self._weight_grad(n, ec, err.scale, vals, kept, rec, groups, eg)
            rec.macs["weight_grad"] += executed
        if not self.needs[src]:
            return None
        rec.macs["error"] += executed
        mode = "int-float" if self.prec.errors != "f32" else self._err_mode()
        wc = self._wc(name)
        ein, s_acc = ec, None
        if self.prec.errors == "u8":
            s_acc = F32(F32(self._w_scale(name)) * err.scale)
        elif self.prec.errors == "s8":
            if eg is None:
                ein, s_acc = self._prescale_errors(name, ec, err.scale)
            else:                     # elementwise per structure: prescaling the gathered errors is the same
                r, s_acc = self._prescale_ratios(name, err.scale)
                eg = [self._prescale(e, r[g.idx][:, :, None]) for g, e in zip(groups, eg)]
        elif self.prec.weights == "u8":        # mixed: float32 errors, uint8 weights
            wc = wc.astype(F32)
        if groups is not None:
            acc = KEPT.conv2d_bwd_in_acc_kept(eg, groups, wc, vals[src].shape, a["stride"], a["padding"],
                                           mode, self._e_max(prescaled=True))
        elif n.op == Op.CONV2D:
            acc = K.conv2d_bwd_in_acc(ein, wc, vals[src].shape, a["stride"], a["padding"], a["groups"],
                                      mode, self._e_max(prescaled=True))
        else:
            acc = K.linear_bwd_in_acc(ein, wc, mode, self._e_max(prescaled=True))
        if self.prec.errors == "f32" and self.prec.weights == "u8":
            acc = (acc * F32(self._w_scale(name))).astype(F32)
        if self.n_consumers[src] > 1 and self.prec.errors != "f32":
            return self._as_real(acc, s_acc)
        return self._to_err(src, acc, s_acc, rec)

    def _kept_groups(self, n: Node, kept: np.ndarray, order: np.ndarray) -> list[KEPT.KeptGroup] | None:
        """The samples' kept filters when computing only those is faster than the dense kernels.

        Dense convs with integer errors only: their sums are exact in any order. float
        errors (mixed, float32) keep the dense kernels and their summation order, which
        the C runtime mirrors.
        """
        if n.op != Op.CONV2D or n.attrs["groups"] != 1 or self.prec.errors == "f32":
            return None
        width = KEPT.kept_widths(kept)
        if KEPT.kept_fraction(width, kept.shape[1]) > KEPT_DENSE_ABOVE:
            return None
        return KEPT.kept_groups(kept, order, width)

    def _as_real(self, acc: np.ndarray, s_acc: F32) -> _Err:
        """A contribution to a tensor with several consumers: float32 reals, requantized after the sum."""
        return _Err(acc.astype(F32) * F32(s_acc), None)

    def _e_max(self, prescaled: bool = False) -> int | None:
        """Known bound of |centred error| from its format (None: float errors, scan when needed)."""
        if self.prec.errors == "u8":
            return 255
        if self.prec.errors == "s8":
            return 1 << 15 if prescaled else ERROR_CLAMP   # int8 errors times Q15 ratios, or raw
        return None

    def _prescale_errors(self, name: str, ec: np.ndarray, s_e: F32) -> tuple[np.ndarray, F32]:
        """int8 errors times Q15 ratios s_w[o] / max(s_w), rounded to int16, and the accumulator's scale.

        e16[o] = round_half_away(e[o] * r[o] / 2^7), r[o] = round_half_away(float32(s_w[o] / s_max) * 2^15);
        the accumulator's scale is then float32(s_max * s_e) * 2^-8.
        """
        r, s_acc = self._prescale_ratios(name, s_e)
        return self._prescale(ec, r), s_acc

    def _prescale_ratios(self, name: str, s_e: F32) -> tuple[np.ndarray, F32]:
        """Q15 ratios r[o] = round_half_away(float32(s_w[o] / max(s_w)) * 2^15) (int32) and the
        scale of the prescaled errors' accumulator, float32(s_max * s_e) * 2^-8 (see the docs)."""
        sw = self._w_scale(name)
        smax = F32(sw.max())
        r = round_half_away((sw / smax).astype(F32) * F32(2**PRESCALE_BITS)).astype(np.int32)
        return r, F32(F32(smax * s_e) * F32(2.0**-8))

    @staticmethod
    def _prescale(ec: np.ndarray, r: np.ndarray) -> np.ndarray:
        """int8 errors times their structures' Q15 ratios `r` (broadcast), rounded to int16:
        e16 = round_half_away(e * r / 2^7)."""
        v = np.multiply(ec, r, dtype=np.int32)                 # |v| <= 127 * 2^15 < 2^22
        # rounding_shift_right(v, 7) in int32: floor((v + 2^6 - [v < 0]) / 2^7), v >> 31 = -[v < 0]
        neg = v >> 31
        v += neg
        v += 1 << 6
        v >>= 7
        return v.astype(np.int16)

    def _weight_grad(self, n: Node, ec: np.ndarray, s_e: F32 | None, vals, kept: np.ndarray,
                     rec: _Batch, groups: list[KEPT.KeptGroup] | None = None,
                     eg: list[np.ndarray] | None = None) -> None:
        """Weight and bias gradients; with `groups`, from the kept filters' gathered errors `eg` only."""
        a, src, name = n.attrs, n.inputs[0], n.name
        x = rec.kept[f"{name}/x"]
        cols = rec.kept.get(f"{name}/cols")
        # the kept im2col matrix already holds the centred input (only the batch size is read then)
        xc = x if cols is not None and a["groups"] == 1 else self._centred(src, x)
        per_sample = self.prec.quantize_sample_grads
        mode = "int-float" if self.prec.errors != "f32" else self._err_mode()
        if self.prec.errors == "f32":
            xc = xc.astype(F32)
        if groups is not None:
            gacc = KEPT.conv2d_bwd_w_acc_kept(xc, eg, groups, self.w[name].shape, a["stride"], a["padding"],
                                           mode, per_sample, X_MAX, self._e_max(), cols=cols)
        elif n.op == Op.CONV2D:
            gacc = K.conv2d_bwd_w_acc(xc, ec, self.w[name].shape, a["stride"], a["padding"], a["groups"],
                                      mode, per_sample, X_MAX, self._e_max(),
                                      cols=cols)
        else:
            gacc = K.linear_bwd_w_acc(xc, ec, mode, per_sample, X_MAX, self._e_max())
        gb = (K.bias_grad_acc(ec, mode) if groups is None
              else KEPT.bias_grad_acc_kept(eg, groups, len(kept[0])))
        sx = F32(self.act_qparams(src).scale) if self.prec.quantized_acts else None
        if per_sample:                                # uint8: quantize each sample's gradient
            s_gacc = F32(sx * s_e)
            if n.op == Op.CONV2D:
                rng = _acc_range(gacc, s_gacc)
            else:        # = _acc_range(gacc, s_gacc) from the operands' extremes (no pass over gacc)
                g_lo, g_hi = K.outer_range(ec, xc)
                rng = F32(F32(g_lo) * s_gacc), F32(F32(g_hi) * s_gacc)
            ema = self.grad_ema.setdefault(name, EmaRange(self.cfg.alpha_e))
            rec.grad_ranges[name] = rng
            if not ema.initialized:
                ema.update(*rng)
                rec.fresh.add(("grad", name))
            qg = ema.qparams("uint8")
            m = K.f32_multiplier(sx, s_e, qg.scale)
            # gacc is this step's own buffer: the quantization may overwrite it
            gsum = K.requant_f32_floor_batch_sum(gacc, m, int(qg.zero_point), 0, 255, overwrite=True)
            real = gsum.astype(F32) * F32(qg.scale)
        elif self.prec.errors == "s8":
            real = gacc.astype(F32) * F32(sx * s_e)
            if self.cfg.update == "integer":          # section 13.9 reads the integers themselves
                rec.int_grads[name] = (gacc, gb, F32(sx * s_e), F32(s_e))
        elif sx is not None:                          # mixed
            real = (gacc * sx).astype(F32)
        else:
            real = gacc.astype(F32)
        breal = gb.astype(F32) if s_e is None else gb.astype(F32) * s_e
        rec.grads[name] = (real, breal.astype(F32), kept.any(0))
