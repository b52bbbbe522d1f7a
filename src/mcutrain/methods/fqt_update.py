"""FQT phase 4: EMA ranges, gradient standardization and the in-place requantized update (a mixin of `FQT`).

docs/integer-semantics.md, sections 13.6-13.7, define every operation here; the integer-only
int8 update (section 13.9) is `fqt_update_int`.
"""

from __future__ import annotations

import numpy as np

from mcutrain.engines import fqt_kernels as K
from mcutrain.graph import Node
from mcutrain.methods.fqt_common import (
    F32,
    NORM_EPS,
    X_MAX,
    _Batch,
)
from mcutrain.methods.fqt_update_int import integer_update
from mcutrain.quant.rounding import round_half_away, round_mode


class FQTUpdate:
    """The end of a step: ranges move, weights and biases are updated in place."""

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
            if self.cfg.update == "integer":        # the integer twin reads the stream's u32 as they are
                self._u32 = self.rng.draw_u32(sum(sizes))
            else:
                self._uniform = self.rng.uniform01(sum(sizes))
        for n in self.graph.parametric():
            name = n.name
            if name in rec.int_grads:
                self._update_layer_int(name, rec.int_grads[name], rec.grads[name][2], lr32)
            elif name in rec.grads:
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
        g2 = np.empty((o, g.size // max(o, 1) + 1), F32)     # the filter's weights, then its bias
        g2[:, :-1] = g.reshape(o, -1)
        g2[:, -1] = gb.reshape(o)
        kk = F32(g2.shape[1])
        cols = np.ascontiguousarray(g2.T)           # (K + 1, O): the sums run down its columns
        mu_b = self._column_sums(cols) / kk
        cols -= mu_b
        cols *= cols                                # (g - mu)^2, elementwise as in C
        var_b = self._column_sums(cols) / kk
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
        ghat = g2                                 # (g2 - mu) / den, in place: g2 is not read again
        np.subtract(ghat, st["mu"][:, None], out=ghat)
        np.divide(ghat, den[:, None], out=ghat)
        ghat[~upd | (st["sd"] == 0)] = 0
        return ghat[:, :-1], ghat[:, -1].copy()

    @staticmethod
    def _column_sums(cols: np.ndarray) -> np.ndarray:
        """float32 sums of each column of a C-contiguous (K, O) array from +0.0 in row order.

        `K.seq_sum(g2, 1)` of the (O, K) array `cols` transposes, without its copy: a
        reduction over the outer axis adds the rows in turn (numpy sums pairwise only along
        the contiguous axis), which needs O >= 2 columns; one column goes to seq_sum's
        strictly sequential accumulate.
        """
        if cols.shape[1] < 2 or cols.shape[0] == 0:
            return K.seq_sum(cols, 0)
        return (np.add.reduce(cols, axis=0) + F32(0)).astype(F32)   # "+ 0": -0.0 becomes +0.0, as in C

    def _update_layer(self, n: Node, grads: tuple, lr: F32) -> None:
        name = n.name
        g, gb, upd = grads
        ghat, ghat_b = self._standardize(name, g, gb, upd)
        w = self.w[name]
        o = w.shape[0]
        if self.prec.weights == "f32":
            self.w[name] = (w - lr * ghat.reshape(w.shape)).astype(F32)
            self.b[name] = (self.b[name] - lr * ghat_b).astype(F32)
            return
        self._bias_ghat[name] = ghat_b
        qp = self.wqp[name]
        lr_o = self._layer_lr(name, lr)
        self._bias_lr[name] = lr_o
        if self.prec.weights == "u8":
            real = qp.dequantize(w).reshape(o, -1)          # float32(w - z) * s
        else:                                               # symmetric: z = 0, (w - 0) is w exactly
            real = w.reshape(o, -1).astype(F32)
            real *= qp.scale[:, None]
        new = real
        new -= lr_o[:, None] * ghat                         # real - lr * g_hat, in real's buffer
        ema = self.w_ema[name]
        if self.prec.weights == "u8":
            ema.update(new.min(), new.max())
            qn = ema.qparams("uint8")
            self.w[name] = qn.quantize(new.reshape(w.shape), self.prec.weight_rounding, self.rng)
            self.wqp[name] = qn
            return
        amax = np.maximum(new.max(1), -new.min(1))          # = max |new| per row, exactly
        lo_old, hi_old = ema.lo.copy(), ema.hi.copy()
        ema.update(np.where(upd, -amax, lo_old), np.where(upd, amax, hi_old))
        ema.lo, ema.hi = np.where(upd, ema.lo, lo_old).astype(F32), np.where(upd, ema.hi, hi_old).astype(F32)
        qn = ema.qparams("int8", symmetric=True)
        rows = np.flatnonzero(upd)
        every = len(rows) == o
        v = new if every else new[rows]                     # the updated filters only
        np.divide(v, qn.scale[:, None] if every else qn.scale[rows][:, None], out=v)
        if self.prec.weight_rounding == "stochastic":
            u, self._uniform = self._uniform[:v.size], self._uniform[v.size:]
            v += u.reshape(v.shape)                         # round_stochastic with the pre-drawn stream
            r = np.floor(v, out=v)
        else:
            r = round_mode(v, self.prec.weight_rounding, self.rng)
        q = np.clip(r, -127, 127, out=r).astype(np.int8)
        if every:
            w2 = q
        else:
            w2 = w.reshape(o, -1).copy()
            w2[rows] = q
        self.w[name] = w2.reshape(w.shape)
        self.wqp[name] = qn

    def _update_layer_int(self, name: str, grads: tuple, upd: np.ndarray, lr: F32) -> None:
        """Section 13.9: the int8 layer's update in fixed point from its integer gradients."""
        g, gb, g_scale, gb_scale = grads
        o = g.shape[0]
        st = self.norm.setdefault(name, {"mu": np.zeros(o, F32), "sd": np.zeros(o, F32),
                                         "init": np.zeros(o, bool)})
        lr_o = self._layer_lr(name, lr)
        size = int(upd.sum()) * (g.size // max(o, 1))
        u, self._u32 = self._u32[:size], self._u32[size:]
        res = integer_update(g, gb, g_scale, gb_scale, upd, st, self.cfg.alpha_norm, self.w[name],
                             self.wqp[name].scale, self.w_ema[name], lr_o, u)
        self._bias_ghat[name] = res.ghat_bias
        self._bias_lr[name] = lr_o
        self.w[name] = res.w
        self.wqp[name] = res.qparams

    def _bias_room(self, name: str) -> np.ndarray:
        """Largest |bias| per channel that keeps the int32 accumulator safe (as in PTQ).

        NOTE: |acc| <= |b| + 255 * sum_k |w[c, k] - z_w|, so |b| <= 2^31 - 1 - 255 * L1(c)
        makes every partial sum fit int32 whatever the weights did (a diverging run
        saturates its biases instead of overflowing the C accumulator).
        """
        w, qp = self.w[name], self.wqp[name]
        hit = self._room_cache.get(name)
        if hit is not None and hit[0] is w and hit[1] is qp:     # the same weights: the same room
            return hit[2]
        if qp is None:
            l1 = np.abs(w.reshape(w.shape[0], -1).astype(np.float64)).sum(1)
        else:                             # integers: |w - z| summed exactly in int64
            wi = w.reshape(w.shape[0], -1).astype(np.int32)
            zp = qp.zero_point
            if zp.any():
                wi -= zp.reshape(-1, 1) if zp.ndim else zp
            l1 = np.abs(wi).sum(1, dtype=np.int64).astype(np.float64)
        room = np.maximum(float(2**31 - 1) - X_MAX * l1, 0.0)
        self._room_cache[name] = (w, qp, room)
        return room

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
