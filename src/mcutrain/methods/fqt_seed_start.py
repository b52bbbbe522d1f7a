"""FQT's seed-faithful precisions (uint8, mixed, float32) starting from an int8 model's integers.

fqt int8 takes a file's integers as they are (`fqt_model.start_from_model`). The seed's formats
cannot hold all of them, so each tensor family is converted by one rule, with no calibration pass
over the new data:

- **Activations** (uint8, mixed): int8 ``(s, z)`` becomes uint8 ``(s, z + 128)``, the same levels
  shifted by 128 -- exact. The EMA range is the one fqt int8 starts from (`ema_reproducing`) when
  its uint8 qparams are these (the uint8 zero point is ``floor(-lo / s)``, not int8's rounding),
  else the range half a level lower, else (no float32 range gives the scale) the file's qparams
  are carried as int8 carries them (`FQT.pinned`).
- **Weights** (uint8, mixed): the int8 per-output-channel symmetric weights are dequantized
  (``q * s_w[c]`` in float32) and re-quantized per tensor, to nearest, over the file's own range
  of the layer, ``[-127, 127] * max_c s_w[c]`` (the union of its channels' ranges; the weight
  EMA range starts there). Per-channel scales have no per-tensor equivalent, so this loses:
  channels with small scales get coarser steps. Of the four rules measured (nearest or the
  seed's floor; the file's range or the tensor's min/max) nearest loses least, and over the
  file's range its forward agrees best with the file's on the shifted test sets (98.7% against
  97.9% of the predictions on small-cnn, 98.9% against 99.2% on digits-cnn; docs/methods.md).
- **Biases** (uint8, mixed): the int32 bias at ``s_x * s_w[c]`` re-quantized at
  ``s_x * s_w`` (the per-tensor weight scale), to nearest in float64 and clipped to the
  accumulator room as every FQT bias is; ``s_x`` is the file's, unchanged.
- **float32**: the dequantized weights (``q * s_w[c]`` in float32, the values the int8 model
  stands for) and biases (``b * s_x * s_w[c]``, one float64 product rounded to float32). The
  activation qparams are not used: float32 activations have none.

What the converted forward gives differs from the file's by the weight re-quantization and the
seed's arithmetic (floor rounding, float32 multipliers): `mcutrain train` reports the file's
accuracy as `accuracy_before` for every method and this forward's as `accuracy_before_method`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mcutrain.methods.fqt_model import ema_reproducing
from mcutrain.qmodel import QuantModel
from mcutrain.quant.qparams import EmaRange, QParams
from mcutrain.quant.rounding import round_half_away

F32 = np.float32


def uint8_activation(qp: QParams, alpha: float) -> tuple[EmaRange, QParams, bool]:
    """(EmaRange of rate `alpha`, the uint8 qparams of int8 `qp`, whether the range gives them exactly).

    The uint8 qparams are ``(s, z + 128)``. The range tried first is fqt int8's; where
    ``floor(-lo / s)`` falls one level short of ``z + 128`` there, ``lo`` moves half a level lower
    (a multiple of ulp(hi - lo), so the width and the scale stay).
    """
    target = QParams(qp.scale, qp.zero_point + 128, "uint8")
    ema, _ = ema_reproducing(qp, alpha)
    if ema.qparams("uint8") == target:
        return ema, target, True
    width = (ema.hi - ema.lo).astype(np.float64)
    _, e = np.frexp(width)
    ulp = np.ldexp(np.float64(1), (e - 24).astype(np.int32))
    lo_real = -(float(target.zero_point) + 0.5) * float(qp.scale)
    lo = np.maximum(np.round(lo_real / ulp) * ulp, -width).astype(F32)
    half = EmaRange(alpha, lo, (lo + width).astype(F32))
    if half.qparams("uint8") == target:
        return half, target, True
    return ema, target, False


def start_from_model(m: Any, qm: QuantModel) -> None:
    """Set FQT `m` (uint8, mixed or float32 precision) to `qm`'s integers by the module's rules."""
    if m.prec.weights == "f32":
        _start_float32(m, qm)
        return
    for t in set(m.owner.values()):
        m.act_ema[t], qp, exact = uint8_activation(qm.act_qparams[t], m.cfg.alpha_a)
        if not exact:       # the file's levels until the range first moves (FQT.act_qparams)
            m.pinned[t] = (m.act_ema[t].lo.copy(), m.act_ema[t].hi.copy(), qp)
    for n in m.graph.parametric():
        name, o = n.name, qm.weights[n.name].shape[0]
        w_real = qm.weight_qparams[name].dequantize(qm.weights[name])
        reach = F32(127) * F32(np.max(qm.weight_qparams[name].scale))
        ema = EmaRange(m.cfg.alpha_w)
        ema.update(-reach, reach)
        qp = ema.qparams("uint8")
        m.w[name], m.wqp[name], m.w_ema[name] = qp.quantize(w_real, "nearest"), qp, ema
        m.step_scale[name] = np.full(o, F32(127) * F32(np.max(qp.scale)), F32)
        sx = np.float64(F32(qm.act_qparams[n.inputs[0]].scale))
        b_real = qm.biases[name].astype(np.float64) * (sx * _channel_scales(qm, name, o))
        q = round_half_away(b_real / (sx * np.float64(qp.scale)))
        room = m._bias_room(name)        # NOTE: FQT's own accumulator bound (fqt_update)
        m.b[name] = np.clip(q, -room, room).astype(np.int32)
        m.b_acc_scale[name] = m._acc_scale(name, n.inputs[0])


def _start_float32(m: Any, qm: QuantModel) -> None:
    """float32: the values the int8 model stands for, weights and biases."""
    for n in m.graph.parametric():
        name, o = n.name, qm.weights[n.name].shape[0]
        m.w[name] = qm.weight_qparams[name].dequantize(qm.weights[name]).astype(F32)
        m.wqp[name] = None
        sx = np.float64(F32(qm.act_qparams[n.inputs[0]].scale))
        m.b[name] = (qm.biases[name].astype(np.float64) * (sx * _channel_scales(qm, name, o))).astype(F32)


def _channel_scales(qm: QuantModel, name: str, o: int) -> np.ndarray:
    """The weight scale of each output channel of layer `name` in float64 (per tensor: repeated)."""
    return np.broadcast_to(qm.weight_qparams[name].scale, (o,)).astype(np.float64)
