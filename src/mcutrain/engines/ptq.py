"""Post-training quantization: a float graph and a calibration batch -> an int8 QuantModel.

Steps:
1. Fold BatchNorm into the conv/linear before it and fuse relu/relu6 into
   their producers (so the calibrated range is that of the activated tensor).
2. Run the float engine over the calibration data (in chunks) and record the
   range of every tensor that gets its own qparams: the input, every
   conv2d/linear output and every add output. Pooling, flatten and standalone
   relu outputs share their input's qparams (`qmodel.SHARES_INPUT_QPARAMS`).
   `minmax` takes the observed extremes; `percentile` takes the p-th and
   (100 - p)-th percentiles, which ignores rare outliers that would
   otherwise stretch the scale of a whole tensor.
3. Activations: int8 asymmetric per tensor (`qparams_from_range`).
   Weights: int8 symmetric per output channel, rounded to nearest.
   Biases: int32 at scale s_x * s_w[c] (`quantize_bias`), then clipped to the
   headroom the int32 accumulator leaves after the products
   (2^31 - 1 - max|x - z_x| * sum_k |w[c, k]|), so the C accumulator provably
   never overflows (only a bias far outside any useful range is clipped).

Example:
    >>> from mcutrain import zoo
    >>> x = np.random.default_rng(0).random((32, 8, 8, 1), dtype=np.float32)
    >>> qm = quantize_model(zoo.build("digits-cnn"), x)
    >>> qm.weights["conv1"].dtype, qm.biases["conv1"].dtype
    (dtype('int8'), dtype('int32'))
"""

from __future__ import annotations

import numpy as np

from mcutrain.engines import float_engine
from mcutrain.engines.int_engine import ACC_LIMIT, x_magnitude
from mcutrain.graph import INPUT, PARAMETRIC, Graph, Op
from mcutrain.graph_passes import fold_batchnorm, fuse_activations
from mcutrain.qmodel import SHARES_INPUT_QPARAMS, QuantModel, share_input_qparams
from mcutrain.quant.qparams import QParams, per_channel_symmetric, qparams_from_range, quantize_bias

METHODS = ("minmax", "percentile")
CALIB_BATCH = 256
"""Samples per float-engine call during calibration (bounds memory on large inputs)."""
PERCENTILE_SAMPLES = 1 << 18
"""Values per tensor and chunk kept for percentiles; larger tensors are subsampled (seeded,
with replacement: a permutation of 16M values per chunk would cost more than the forward pass)."""


def calibrated_tensors(graph: Graph) -> list[str]:
    """The tensors that get their own activation qparams, in graph order."""
    return [INPUT] + [n.name for n in graph.nodes if n.op not in SHARES_INPUT_QPARAMS]


def calibrate(graph: Graph, x_calib: np.ndarray, method: str = "minmax", percentile: float = 99.99,
              batch_size: int = CALIB_BATCH, seed: int = 0) -> dict[str, tuple[float, float]]:
    """Float range (lo, hi) of every calibrated tensor over the calibration batch."""
    if method not in METHODS:
        raise ValueError(f"unknown calibration method {method!r}; use one of {', '.join(METHODS)}")
    if not 50.0 < percentile <= 100.0:
        raise ValueError(f"percentile must be in (50, 100], got {percentile}")
    x_calib = np.asarray(x_calib, np.float32)
    if len(x_calib) == 0:
        raise ValueError("calibration needs at least one sample")
    if not np.isfinite(x_calib).all():
        raise ValueError("calibration data holds NaN or inf values; clean the inputs first")
    names = calibrated_tensors(graph)
    rng = np.random.default_rng(seed)
    lo = dict.fromkeys(names, np.inf)
    hi = dict.fromkeys(names, -np.inf)
    kept: dict[str, list[np.ndarray]] = {t: [] for t in names}
    for i in range(0, len(x_calib), batch_size):
        acts = float_engine.run(graph, x_calib[i:i + batch_size], save=False)
        for t in names:
            v = acts[t].ravel()
            if not np.isfinite(v).all():
                raise ValueError(f"tensor '{t}' is not finite on the calibration data; the float "
                                 "model diverged or its inputs are out of range")
            lo[t], hi[t] = min(lo[t], float(v.min())), max(hi[t], float(v.max()))
            if method == "percentile":
                kept[t].append(v if v.size <= PERCENTILE_SAMPLES
                               else v[rng.integers(0, v.size, PERCENTILE_SAMPLES)])
    if method == "minmax":
        return {t: (lo[t], hi[t]) for t in names}
    out = {}
    for t in names:
        v = np.concatenate(kept[t])
        p_lo, p_hi = np.percentile(v, [100.0 - percentile, percentile])
        out[t] = (float(max(p_lo, lo[t])), float(min(p_hi, hi[t])))
    return out


def quantize_weights(graph: Graph, act_qparams: dict[str, QParams]
                     ) -> tuple[dict[str, np.ndarray], dict[str, QParams], dict[str, np.ndarray]]:
    """int8 per-channel weights, their qparams, and int32 biases clipped to accumulator headroom."""
    weights, wqp, biases = {}, {}, {}
    for n in graph.nodes:
        if n.op not in PARAMETRIC:
            continue
        w = n.params["weight"]
        qp = per_channel_symmetric(w)
        wq = qp.quantize(w, "nearest")
        sx = act_qparams[n.inputs[0]]
        b = quantize_bias(n.params["bias"], sx.scale, qp.scale).astype(np.int64)
        l1 = np.abs(wq.reshape(len(wq), -1).astype(np.int64)).sum(axis=1)
        room = ACC_LIMIT - x_magnitude(int(sx.zero_point)) * l1
        if np.any(room < 0):
            raise ValueError(f"node '{n.name}': {wq[0].size} inputs per output overflow the int32 "
                             "accumulator even without a bias; split the layer")
        weights[n.name], wqp[n.name] = wq, qp
        biases[n.name] = np.clip(b, -room, room).astype(np.int32)
    return weights, wqp, biases


def quantize_model(graph: Graph, x_calib: np.ndarray, method: str = "minmax",
                   percentile: float = 99.99, batch_size: int = CALIB_BATCH,
                   rounding: str = "single") -> QuantModel:
    """Post-training int8 quantization of `graph` calibrated on `x_calib` (N, *input_shape).

    `rounding` is the new model's requantization mode (`QuantModel.rounding`). The default
    `single` is what the C runtime implements today; `tflite` makes a model that TFLite Micro
    would run bit for bit (see docs/integer-semantics.md 6.1 for the measured difference).

    >>> from mcutrain import zoo
    >>> x = np.random.default_rng(1).random((16, 8, 8, 1), dtype=np.float32)
    >>> qm = quantize_model(zoo.build("digits-cnn"), x, method="percentile", percentile=99.9)
    >>> qm.provenance["ptq"]["method"]
    'percentile'
    """
    if any(n.op == Op.BATCHNORM for n in graph.nodes):
        graph = fold_batchnorm(graph)
    g = fuse_activations(graph)
    x_calib = np.asarray(x_calib, np.float32)
    if x_calib.ndim < 1 or x_calib.shape[1:] != g.input_shape:
        raise ValueError(f"calibration batch has shape {x_calib.shape}; the model takes "
                         f"(N, {', '.join(map(str, g.input_shape))})")
    ranges = calibrate(g, x_calib, method, percentile, batch_size)
    acts = share_input_qparams(g, {t: qparams_from_range(lo, hi) for t, (lo, hi) in ranges.items()})
    weights, wqp, biases = quantize_weights(g, acts)
    prov = {"ptq": {"method": method, "percentile": percentile if method == "percentile" else None,
                    "calibration_samples": len(x_calib)}}
    return QuantModel(g, acts, weights, wqp, biases, prov, rounding)
