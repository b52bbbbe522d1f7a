"""Digests of short training trajectories: every state array, meta value and loss, step by step.

The simulator is the specification, so an optimization of it must leave every bit of every
trajectory unchanged. `digest(case)` trains a case a few steps from fixed seeds and hashes,
after each step, the loss and correct count and the method's whole saved state (weights,
biases, ranges, normalization statistics, velocities, the xorshift32 state). One flipped bit
anywhere changes the digest. Only exact configurations are digested: integer formats, and the
float formats in their defined summation order (`exact_float_order`). The float initialization
and calibration before the first step still run through BLAS, so the digests hold under the
float kernels the tests pin (`tests/float_pin.py`).

Run `python tests/float_pin.py tests/methods/trajectory_digest.py` (with the package on the path)
to print the digests of every case under that pin, e.g. after a change that alters a trajectory
on purpose.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mcutrain import zoo
from mcutrain.engines import ptq
from mcutrain.methods.bp_qas import BPQASConfig, BPQASMethod
from mcutrain.methods.fqt import FQT
from mcutrain.methods.fqt_state import FQTConfig


@dataclass(frozen=True)
class Case:
    """One trajectory: method, architecture (and input size), batch, steps and the method's options."""

    method: str
    arch: str
    batch: int
    steps: int = 3
    input_shape: tuple[int, int, int] | None = None
    options: dict[str, Any] = field(default_factory=dict)
    start: str = "float"
    """fqt: "float" (a float graph, calibrated) or "int8-single" / "int8-tflite" (a PTQ model)."""

    @property
    def key(self) -> str:
        opts = ",".join("seq" if k == "exact_float_order" else f"{k}={v}"
                        for k, v in sorted(self.options.items()))
        size = "x".join(map(str, self.input_shape[:2])) if self.input_shape else "default"
        return f"{self.method}/{self.arch}@{size}/b{self.batch}/{self.start}/{opts}"


SMALL_MCUNET = (32, 32, 3)
SEQ = {"exact_float_order": True}
PARTIAL = {"lambda_min": 0.1}

CASES = [
    *(Case("fqt", "small-cnn", b, options={"precision": "int8"}) for b in (1, 8, 32)),
    *(Case("fqt", "small-cnn", b, options={"precision": "int8", **PARTIAL}) for b in (1, 8, 32)),
    Case("fqt", "small-cnn", 8, options={"precision": "int8", "weight_rounding": "nearest"}),
    Case("fqt", "small-cnn", 8, options={"precision": "int8"}, start="int8-single"),
    Case("fqt", "small-cnn", 8, options={"precision": "int8"}, start="int8-tflite"),
    *(Case("fqt", "small-cnn", b, options={"precision": "uint8"}) for b in (1, 8, 32)),
    Case("fqt", "small-cnn", 8, options={"precision": "uint8", **PARTIAL}),
    *(Case("fqt", "small-cnn", b, options={"precision": p, **SEQ}) for p in ("mixed", "float32")
      for b in (1, 8)),
    Case("fqt", "small-cnn", 8, options={"precision": "mixed", **SEQ, **PARTIAL}),
    *(Case("fqt", "digits-cnn", b, options={"precision": p}) for p in ("int8", "uint8") for b in (1, 8)),
    Case("fqt", "digits-cnn", 8, options={"precision": "float32", **SEQ}),
    *(Case("fqt", "mcunet-5fps", b, 2, SMALL_MCUNET, {"precision": "int8"}) for b in (1, 8)),
    Case("fqt", "mcunet-5fps", 8, 2, SMALL_MCUNET, {"precision": "int8", **PARTIAL}),
    Case("fqt", "mcunet-5fps", 4, 2, SMALL_MCUNET, {"precision": "uint8"}),
    Case("fqt", "mcunet-5fps", 2, 2, SMALL_MCUNET, {"precision": "mixed", **SEQ}),
    *(Case("bp-qas", "small-cnn", b, options={"momentum": 0.9}) for b in (1, 8)),
    Case("bp-qas", "small-cnn", 32),
    Case("bp-qas", "small-cnn", 8, options={"momentum": 0.9, "channel_ratio": 0.5, "trainable": "last:2"}),
    Case("bp-qas", "digits-cnn", 8, options={"momentum": 0.9}),
    *(Case("bp-qas", "mcunet-5fps", b, 2, SMALL_MCUNET, {"momentum": 0.9}) for b in (1, 8)),
]


def _data(case: Case) -> tuple[Any, np.ndarray, np.ndarray]:
    g = zoo.build(case.arch, 10, case.input_shape, seed=0)
    rng = np.random.default_rng([7, case.batch])
    x = rng.random((case.steps * case.batch, *g.input_shape), dtype=np.float32)
    y = rng.integers(0, 10, len(x))
    return g, x, y


def _method(case: Case, g, x: np.ndarray):
    calib = x[:16]
    if case.method == "bp-qas":
        return BPQASMethod(ptq.quantize_model(g, calib), BPQASConfig(**case.options))
    model = g if case.start == "float" else ptq.quantize_model(g, calib, rounding=case.start.split("-")[1])
    return FQT(model, FQTConfig(**case.options), calib)


def _plain(v: Any) -> Any:
    """JSON-able form of a state's meta (numpy scalars and arrays as exact values)."""
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, np.ndarray):
        return [v.dtype.str, list(v.shape), v.tobytes().hex()]
    if isinstance(v, np.generic):
        return [v.dtype.str, v.tobytes().hex()]
    if isinstance(v, float):
        return float(v).hex()
    return v


def _absorb(h: Any, method) -> None:
    meta, arrays = method.state()
    h.update(json.dumps(_plain(meta), sort_keys=True).encode())
    for k in sorted(arrays):
        a = np.ascontiguousarray(arrays[k])
        h.update(f"{k}:{a.dtype.str}:{a.shape}".encode())
        h.update(a.tobytes())


def digest(case: Case) -> str:
    """sha256 (first 16 hex digits) of the case's losses and states after every step."""
    g, x, y = _data(case)
    m = _method(case, g, x)
    h = hashlib.sha256()
    for s in range(case.steps):
        sl = slice(s * case.batch, (s + 1) * case.batch)
        st = m.step(x[sl], y[sl], 0.005)
        h.update(f"{float(st.loss).hex()}:{st.correct}".encode())
        _absorb(h, m)
    return h.hexdigest()[:16]


if __name__ == "__main__":
    for c in CASES:
        print(f'    "{c.key}": "{digest(c)}",')
