"""Every bit of a ZO run, pinned: a digest of weights, biases, RNG state and losses after a few steps.

The simulator's speed work (float64 requantization of the stacked queries, reused buffers,
queries split across worker processes) must change no integer. Each configuration below trains
from fixed seeds and hashes, after every step, the trained layers' int8 weights and int32 biases,
the xorshift32 state and the step's loss; the digests were recorded from the simulator before
any of that work, so a single changed bit anywhere fails the test and names the configuration.
A deliberate change of ZO's integer semantics re-records them: ``python tests/float_pin.py
tests/methods/test_zo_state_hash.py`` prints the current digests under the float kernels the
tests pin (the model's float initialization and calibration run through BLAS).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace

import numpy as np
import pytest

from mcutrain import zoo
from mcutrain.engines import ptq
from mcutrain.methods.zo import ZOConfig, ZOMethod
from mcutrain.qmodel import QuantModel

STEPS = 2


@dataclass(frozen=True)
class Case:
    arch: str
    input_shape: tuple[int, int, int]
    perturb: str
    queries: int
    batch: int
    rounding: str = "single"
    mask: str = "none"
    trainable: str = "all"


CASES = {
    "small-cnn wp q10 b32": Case("small-cnn", (28, 28, 1), "wp", 10, 32),
    "small-cnn np q10 b32": Case("small-cnn", (28, 28, 1), "np", 10, 32),
    "small-cnn mix q10 b32": Case("small-cnn", (28, 28, 1), "mix", 10, 32),
    "small-cnn mix q1 b1": Case("small-cnn", (28, 28, 1), "mix", 1, 1),
    "small-cnn wp q1 b32": Case("small-cnn", (28, 28, 1), "wp", 1, 32),
    "small-cnn np q10 b1": Case("small-cnn", (28, 28, 1), "np", 10, 1),
    "small-cnn mix q10 b32 tflite": Case("small-cnn", (28, 28, 1), "mix", 10, 32, "tflite"),
    "small-cnn wp q10 b1 tflite": Case("small-cnn", (28, 28, 1), "wp", 10, 1, "tflite"),
    "small-cnn mix randk q10 b32": Case("small-cnn", (28, 28, 1), "mix", 10, 32, mask="randk:0.5"),
    "small-cnn np topk q10 b32": Case("small-cnn", (28, 28, 1), "np", 10, 32, mask="topk:0.25"),
    "small-cnn wp randk q10 b32 tflite": Case("small-cnn", (28, 28, 1), "wp", 10, 32, "tflite",
                                              "randk:0.3"),
    "mcunet mix q10 b8": Case("mcunet-5fps", (32, 32, 3), "mix", 10, 8, trainable="last:6"),
    "mcunet wp q1 b1": Case("mcunet-5fps", (32, 32, 3), "wp", 1, 1, trainable="last:4"),
    "mcunet np q10 b32 tflite": Case("mcunet-5fps", (32, 32, 3), "np", 10, 32, "tflite", trainable="last:6"),
    "mcunet mix q10 b32 tflite": Case("mcunet-5fps", (32, 32, 3), "mix", 10, 32, "tflite",
                                      trainable="last:12"),
    "mobilenet mix q10 b8": Case("mobilenet-v1-0.25", (24, 24, 1), "mix", 10, 8),
}

DIGESTS = {
    'mcunet mix q10 b32 tflite': 'caea0f786521f075cc19678bb1027e9a7f120b03a54c29e2c2b2848300c4eca7',
    'mcunet mix q10 b8': '0ca61cb0b3ef4ec8112320a51179621b3030a84480dc393119dbfd0b9e55873d',
    'mcunet np q10 b32 tflite': 'c2e8cc83120242664cf37aae0147192a9e1d4ec831e1f682b75a3e011f9814bc',
    'mcunet wp q1 b1': 'ac7eb94eaee2d8e0c7833b61ca0ec161c7bd38f015d09cb4452b585595504f00',
    'mobilenet mix q10 b8': '5cf18d4d6fafe0469ab72870c586e0e2e6f1e73cf19d9ccda9fc454ce5715418',
    'small-cnn mix q1 b1': 'bbfc1cb28096780f868d0c63d181ddee3e498335d6d2be9c44fe58eaa1a3fbbb',
    'small-cnn mix q10 b32': 'cdceb7bc020d84d101b3789dfaa42532d2fa3f63521874736ca97b0a1d89549c',
    'small-cnn mix q10 b32 tflite': '4a149e9dd56d63c4db44e00e075fb598646fca078f3e3f1b7b0417add40b6c9f',
    'small-cnn mix randk q10 b32': '31aa0dbcf1337b84e53ae7914b5f3190387f7931806b9b15d67211b591dd7b51',
    'small-cnn np q10 b1': '09ae4c92573a75e24ffea7ced2347369aa66598e44a63457b04eef75c05dd60b',
    'small-cnn np q10 b32': '024e68ea6c14c524668a45234d6816df5adc2a3f43dfb5738d16506678a95c13',
    'small-cnn np topk q10 b32': 'd8a3e30313ce838e3156c1f66c186d7ea1758f17069d6c5a328a198da1791557',
    'small-cnn wp q1 b32': 'aa3890ca6c18544ea1c8ada7048e4fc78d3a65e0f7b241381723019ea0efbc24',
    'small-cnn wp q10 b1 tflite': '44ab8d9dd1e37ba5a12c80ebe004eecc48b4c79910a5cb1bc01ee377a9b7325f',
    'small-cnn wp q10 b32': '41f3d2d8995e54f97dad9e96b4feb2adc9553c35a881c292ed377ea75fb392ec',
    'small-cnn wp randk q10 b32 tflite': '8e8d1fe5c97fee6b9efdc99de6e6bc44d38bbf8bd32ce96a3dd183c966b439fe',
}
"""sha256 of each case's run, recorded from the simulator before the speed work."""


def _model(case: Case) -> tuple[QuantModel, np.ndarray, np.ndarray]:
    g = zoo.build(case.arch, 10, case.input_shape, seed=0)
    rng = np.random.default_rng(5)
    for n in g.parametric():        # nonzero biases, so the bias path is exercised too
        n.params["bias"] = rng.normal(0, 0.05, n.params["bias"].shape).astype(np.float32)
    x = rng.random((max(case.batch, 16) * STEPS, *case.input_shape), dtype=np.float32)
    y = rng.integers(0, 10, len(x))
    qm = ptq.quantize_model(g, x[:64])
    return replace(qm, rounding=case.rounding), x, y


def run_digest(case: Case, workers: int = 1, **config_changes) -> str:
    """The sha256 of a `STEPS`-step run of `case` on `workers` processes (`config_changes`
    replace ZOConfig fields).

    Raises when the run moves no weight or bias at all: a digest of an untouched state would
    pin nothing.
    """
    qm, x, y = _model(case)
    # max_step=0: the recorded digests pin the update without the step limit (they predate it;
    # the limit has its own tests in test_step_limit.py and test_zo_step_limit.py)
    cfg = ZOConfig(trainable=case.trainable, queries=case.queries, perturb=case.perturb, mask=case.mask,
                   seed=11, max_step=0)
    m = ZOMethod(qm, replace(cfg, **config_changes), workers=workers)
    h = hashlib.sha256()
    for s in range(STEPS):
        sl = slice(s * case.batch, (s + 1) * case.batch)
        stats = m.step(x[sl], y[sl], 0.05)
        for name in m.layers:
            h.update(name.encode())
            h.update(np.ascontiguousarray(m.qm.weights[name], np.int8).tobytes())
            h.update(np.ascontiguousarray(m.qm.biases[name], np.int32).tobytes())
        h.update(int(m.rng.state).to_bytes(4, "little"))
        h.update(np.float64(stats.loss).tobytes())
    m.close()
    moved = sum(int(np.count_nonzero(m.qm.weights[n] != qm.weights[n]))
                + int(np.count_nonzero(m.qm.biases[n] != qm.biases[n])) for n in m.layers)
    if moved == 0:
        raise AssertionError("the run moved no weight: raise the learning rate of the hash runs")
    return h.hexdigest()


@pytest.mark.parametrize("name", sorted(CASES))
def test_zo_run_is_bit_identical_to_the_recorded_one(pinned_floats, name):
    assert run_digest(CASES[name]) == DIGESTS[name], f"{name}: a bit of the ZO run changed"


def test_the_digest_sees_a_single_changed_bit():
    """Another seed of the perturbation stream gives another digest: the hash covers the state."""
    case = CASES["small-cnn mix q1 b1"]
    assert run_digest(case) != run_digest(case, seed=12)


if __name__ == "__main__":
    for key in sorted(CASES):
        print(f"    {key!r}: {run_digest(CASES[key])!r},")
