"""FQT and the int8 model file: start from a QuantModel's integers, end as a QuantModel.

Start (`start_from_model`, int8 precision): the file's int8 weights, their scales, the int32
biases and the activation qparams become FQT's state as they are, with no calibration pass over
the new data. FQT keeps ranges, not qparams, so each range is an `EmaRange` built by
`ema_reproducing` so that `EmaRange.qparams` returns the file's qparams exactly (checked). Where
no float32 range gives a file's scale (about 1 in 255 of an imported .tflite's activation
scales; never one of mcutrain's PTQ), FQT carries the file's qparams while the range is the
starting one (`FQT.pinned`: a frozen tensor keeps them for good, a trained one until its first
update) and the C export refuses the model. A weight scale no range gives is used until the
layer's first update, whose new scale comes from the nearest range, as every later one does.

End (`trained_model`): the integer state as a QuantModel whose golden-engine inference equals
FQT's own forward bit for bit for int8 (same multipliers: both call
`quant.fixedpoint.output_multiplier` / `add_multipliers` / `tflite_add_params` on the same
scales). The seed-faithful precisions are converted (their accuracy is measured and reported as
`accuracy_exported` by `mcutrain train --json`):

- uint8 / mixed: activation qparams shift exactly to int8 (q - 128, zero point - 128, same
  scale); weights are dequantized (``(q - z) * s``) and re-quantized symmetric per output
  channel to int8 (nearest), biases dequantized and re-quantized at ``s_x * s_w[c]`` (nearest,
  clipped to the accumulator room as in PTQ). Their floor rounding and float32 multipliers become
  the fixed-point rule of the int8 format, so outputs can differ by a level.
- float32: PTQ of the trained float graph (`to_graph`) with the run's calibration samples.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mcutrain.engines import ptq
from mcutrain.graph import INPUT
from mcutrain.qmodel import QuantModel, share_input_qparams
from mcutrain.quant.qparams import MIN_SCALE, EmaRange, QParams

F32 = np.float32
ULP_SEARCH = 8
"""How many float32 steps either side of 255 * s (127 * s) `ema_reproducing` tries for the width."""


def _width_for(scale: np.ndarray, levels: int) -> np.ndarray:
    """float32 W, per element, with float32(W / levels) closest to `scale` (equal where one exists).

    NOTE: W / levels moves by ulp(W) / levels per float32 step of W, up to 256/255 ulp(s) for
    asymmetric ranges (128/127 symmetric), so about 1 scale in 255 (127) has no W at all.
    """
    s = np.asarray(scale, F32).astype(np.float64)
    base = (s * levels).astype(F32)
    best, err = base, np.full(s.shape, np.inf)
    for k in range(-ULP_SEARCH, ULP_SEARCH + 1):
        cand = base
        for _ in range(abs(k)):
            cand = np.nextafter(cand, F32(np.inf if k > 0 else -np.inf))
        e = np.abs((cand / F32(levels)).astype(F32).astype(np.float64) - s)
        best, err = np.where(e < err, cand, best), np.minimum(e, err)
    return np.maximum(best, MIN_SCALE * F32(levels)).astype(F32)


def ema_reproducing(qp: QParams, alpha: float, symmetric: bool = False) -> tuple[EmaRange, bool]:
    """(EmaRange of rate `alpha` whose `qparams(qp.dtype, symmetric)` is `qp`, whether it is exactly).

    Asymmetric int8 (``s = (hi - lo) / 255``, ``z = round(-128 - lo / s)``): W = hi - lo is the
    float32 with float32(W / 255) == s; lo = -(128 + z) * s rounded to a multiple of ulp(W),
    so lo, hi = lo + W and hi - lo are exact in float32 and lo / s is within 2^-15 of -(128 + z).
    Symmetric (``s = max|.| / 127``): the range is [-A, A] with float32(A / 127) == s.
    A scale no float32 range gives (see `_width_for`) gets the nearest range and False: every
    scale of mcutrain's own PTQ is reproducible (it came from such a range), some of an
    imported .tflite are not. The result is checked with `EmaRange.qparams` itself.
    """
    if symmetric:
        a = _width_for(qp.scale, 127)
        ema = EmaRange(alpha, -a, a)
    else:
        w = _width_for(qp.scale, 255)
        _, e = np.frexp(w)
        ulp = np.ldexp(np.float64(1), (e - 24).astype(np.int32))
        lo_real = -(128.0 + qp.zero_point.astype(np.float64)) * qp.scale.astype(np.float64)
        lo = np.maximum(np.round(lo_real / ulp) * ulp, -w.astype(np.float64)).astype(F32)
        ema = EmaRange(alpha, lo, (lo + w).astype(F32))
    return ema, ema.qparams(qp.dtype, symmetric) == qp


def start_from_model(m: Any, qm: QuantModel) -> None:
    """Set FQT `m` (int8 precision) to the integers of `qm`: weights, scales, biases, activation ranges.

    `m.graph` has the node names of `qm.graph` (both folded and fused). Weight scales given per
    tensor become per-channel arrays of the same value (FQT's weight ranges are per channel).
    """
    cfg = m.cfg
    for n in m.graph.parametric():
        w = qm.weights[n.name]
        o = w.shape[0]
        qp = qm.weight_qparams[n.name]
        qp = QParams(np.broadcast_to(qp.scale, (o,)).astype(F32), np.zeros(o, np.int32), "int8")
        m.w[n.name], m.wqp[n.name] = w.copy(), qp
        m.w_ema[n.name] = ema_reproducing(qp, cfg.alpha_w, symmetric=True)[0]
        m.step_scale[n.name] = np.full(o, F32(127) * F32(np.max(qp.scale)), F32)
        m.b[n.name] = qm.biases[n.name].astype(np.int32).copy()
    for t in set(m.owner.values()):
        m.act_ema[t], exact = ema_reproducing(qm.act_qparams[t], cfg.alpha_a)
        if not exact:       # the file's qparams until the range first moves (FQT.act_qparams)
            m.pinned[t] = (m.act_ema[t].lo.copy(), m.act_ema[t].hi.copy(), qm.act_qparams[t])
    for n in m.graph.parametric():     # the accumulator scale s_x * s_w[c], as FQT derives it
        o = m.w[n.name].shape[0]
        sx = F32(m.act_qparams(n.inputs[0]).scale)
        m.b_acc_scale[n.name] = np.broadcast_to(sx * m.wqp[n.name].scale, (o,)).astype(F32)


def trained_model(m: Any) -> QuantModel:
    """FQT `m`'s model as an int8 QuantModel (exact for int8; the conversions of the module doc)."""
    g = m.to_graph()
    prov = {**m.provenance, "fqt": {"precision": m.prec.name, "steps": m.steps,
                                    "exact": m.prec.name == "int8"}}
    if not m.prec.quantized_acts:
        qm = ptq.quantize_model(g, m.calib_x, rounding=m.rounding)
        qm.provenance.update(prov)
        return qm
    tensors = [INPUT, *(n.name for n in g.nodes)]
    if m.prec.acts == "s8":
        acts = {t: m.act_qparams(t) for t in tensors}
        weights = {n: m.w[n].copy() for n in m.w}
        wqp = dict(m.wqp)
        biases = {n: m.b[n].astype(np.int32).copy() for n in m.b}
        return QuantModel(g, acts, weights, wqp, biases, prov, m.rounding)
    acts = share_input_qparams(g, {t: _u8_to_s8(m.act_qparams(t)) for t in tensors})
    weights, wqp, biases = ptq.quantize_weights(g, acts)
    return QuantModel(g, acts, weights, wqp, biases, prov, m.rounding)


def _u8_to_s8(qp: QParams) -> QParams:
    """uint8 activation qparams as int8: the same levels shifted by 128 (exact)."""
    return QParams(qp.scale, qp.zero_point - 128, "int8")

