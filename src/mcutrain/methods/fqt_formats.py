"""FQT's number formats (a mixin of `FQT`): the modes of its GEMMs, its starting weights, and the
qparams of every tensor -- activations, errors, weights, accumulators -- looked up per step.

A step asks for the same qparams many times; each lookup is cached on the identity of the EMA
range (or QParams) it derives from, which is replaced, never changed in place, when it moves.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mcutrain.graph import Node
from mcutrain.methods.fqt_common import F32, pow2_symmetric_qparams
from mcutrain.quant.qparams import EmaRange, QParams


class FQTFormats:
    """Formats and qparams lookups; state lives on the `FQT` object."""

    def _fwd_mode(self) -> str:
        if self.prec.quantized_acts:
            return "int-float"           # exact integers, left in the float dtype of the GEMM
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
        pin = self.pinned.get(self.owner[t])
        if pin is not None and np.array_equal(pin[0], ema.lo) and np.array_equal(pin[1], ema.hi):
            qp = pin[2]               # a starting file's qparams no range reproduces (fqt_model)
        else:
            qp = ema.qparams("uint8" if self.prec.acts == "u8" else "int8")
        self._qp_cache[self.owner[t]] = (ema.lo, ema.hi, qp)
        return qp

    def _err_qparams(self, t: str, rng: tuple[F32, F32], rec: Any) -> QParams:
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
        if not zp.any():                  # int8: symmetric weights
            return w.astype(F32)
        return w.astype(F32) - zp.reshape(zp.shape + (1,) * (w.ndim - zp.ndim))   # exact: |w - z| <= 255

    def _centred(self, t: str, v: np.ndarray) -> np.ndarray:
        qp = self.act_qparams(t)
        return v if qp is None else v.astype(F32) - F32(qp.zero_point)   # exact: |x - z| <= 255

    def _w_scale(self, name: str) -> np.ndarray:
        return self.wqp[name].scale

    def _acc_scale(self, name: str, src: str) -> np.ndarray:
        """Scale of a layer's accumulator, s_x * s_w[c] in float32, shape (O,) (read-only: it is shared).

        NOTE: QParams are immutable and replaced when they change, so the same two objects give
        the same scale: a step asks for it twice per layer (forward, bias rescale).
        """
        qx, qw = self.act_qparams(src), self.wqp[name]
        hit = self._qp_cache.get("acc:" + name)
        if hit is None or hit[0] is not qx or hit[1] is not qw:
            scale = np.broadcast_to(F32(qx.scale) * qw.scale, (self.w[name].shape[0],)).astype(F32)
            scale.setflags(write=False)
            hit = self._qp_cache["acc:" + name] = (qx, qw, scale)
        return hit[2]
