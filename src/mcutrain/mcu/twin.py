"""Simulate and compare: the simulated twin of a generated training step, step by step.

`mcutrain run`, the MCU benchmarks and the API's `run` all compare a C library's training
steps in QEMU with the simulated method: after every step its losses, logits, every trainable
tensor and the RNG state. The simulation (`simulate_steps` for ZO and BP-QAS,
`simulate_fqt_steps` for FQT) and the comparison (`first_mismatch`, bit for bit, float state too) live
here, below every caller, so none of them reaches into a command for them.

Example:
    sim = simulate_steps(method, batches, lr, [e.name for e in src.state])
    mismatch = first_mismatch(sim, device_steps)    # "" when every step agrees bit for bit
"""

from __future__ import annotations

import numpy as np

from mcutrain.codegen.emit_fqt import reported_logits, state_arrays
from mcutrain.engines import int_engine
from mcutrain.methods import zo_estimator as est

Batches = list[tuple[np.ndarray, np.ndarray]]


def simulate_steps(method, batches_f: Batches, lr: float, names: list[str]):
    """Per-step (losses, logits, tensors, rng) of the simulated ZO or BP-QAS method (stepped in place).

    `names` are the state entries of the C library (`layer.weight`, `layer.bias`, bp-qas
    `layer.velocity`); losses and logits are those before the step's update, as C reports them.
    """
    qm = method.qm
    out = []
    for x, y in batches_f:
        base = int_engine.run(qm, int_engine.quantize_input(qm, x))
        logits = base[qm.graph.output].reshape(len(x), -1)
        losses = est.per_sample_loss(qm, logits, y).astype(np.int32)
        method.step(x, y, lr)
        tensors = {}
        for name in names:
            layer, kind = name.rsplit(".", 1)
            if kind == "weight":
                tensors[name] = qm.weights[layer].copy()
            elif kind == "bias":
                tensors[name] = qm.biases[layer].copy()
            else:   # bp-qas momentum: the C layout is the layer's weight velocity, then its bias velocity
                tensors[name] = velocity(method, layer)
        rng = int(method.rng.state) if hasattr(method, "rng") else 0
        out.append((losses, logits.astype(np.int8), tensors, rng))
    return out


def velocity(method, layer: str) -> np.ndarray:
    """BP-QAS's momentum of `layer` in the C state's layout: weight velocity, then bias velocity."""
    qm, v = method.qm, method.velocity
    parts = []
    if layer in method.weight_layers:
        parts.append(v.get(f"{layer}.weight", np.zeros(qm.weights[layer].size, np.float32)).reshape(-1))
    if layer in method.bias_layers:
        parts.append(v.get(f"{layer}.bias", np.zeros(qm.biases[layer].size, np.float32)).reshape(-1))
    return np.concatenate(parts).astype(np.float32)


def simulate_fqt_steps(method, batches_f: Batches, lr: float, src):
    """Per-step (losses, logits, state entries, rng) of the simulated FQT (stepped in place).

    Losses and logits are those before the step's update, as the C step reports them.
    """
    out = []
    for x, y in batches_f:
        logits, losses = method.logits_and_losses(x, y)
        method.step(x, y, lr)
        out.append((losses.astype(np.int32), reported_logits(method, logits), state_arrays(method, src),
                    int(method.rng.state)))
    return out


def first_mismatch(sim, mcu) -> str:
    """The first difference of a training run (per step: losses, logits, state, RNG), or "".

    Every state entry is compared bit for bit, BP-QAS's float32 momentum velocity too (as its
    uint32 bit patterns): the C kernels and the simulator sum every float in one documented order
    (docs/integer-semantics.md 12.6).
    """
    for s, ((l_s, lg_s, t_s, r_s), r) in enumerate(zip(sim, mcu)):
        if not np.array_equal(l_s, r.losses):
            return f"step {s}: losses differ (C {r.losses.tolist()} vs simulator {l_s.tolist()})"
        if not np.array_equal(lg_s, r.logits):
            return f"step {s}: logits differ"
        for name, v in t_s.items():
            got, want = _bits(r.state[name]), _bits(v)
            if not np.array_equal(got, want):
                return f"step {s}: {name} differs in {int(np.sum(got != want))} entries"
        if r_s != r.state["rng"]:
            return f"step {s}: RNG state C {r.state['rng']} != simulator {r_s}"
    return ""


def _bits(a) -> np.ndarray:
    """A state entry flattened, a float32 one as its bit patterns (so -0.0 != +0.0, NaN == NaN)."""
    a = np.asarray(a).reshape(-1)
    return a.view(np.uint32) if a.dtype == np.float32 else a
