"""Every bit of a ZO run, pinned: a digest of weights, biases, RNG state and losses after a few steps.

The simulator's speed work (float64 requantization of the stacked queries, reused buffers,
queries split across worker processes) must change no integer. Each configuration below trains
from fixed seeds and hashes, after every step, the trained layers' int8 weights and int32 biases,
the xorshift32 state and the step's loss; the digests were recorded from the simulator before
any of that work, so a single changed bit anywhere fails the test and names the configuration.
A deliberate change of ZO's integer semantics re-records them: ``python tests/methods/
test_zo_state_hash.py`` prints the current digests.
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
    'mcunet mix q10 b32 tflite': 'afa2638889d3930bad1689df5e4a70aa07c3739e48167416f933889e319fa349',
    'mcunet mix q10 b8': '5d1f6653aa3db2f7913b44fcd8bcb80d6018e6b5532e627514e7c00df5467e9b',
    'mcunet np q10 b32 tflite': '0cdf977981335e035688230296239e830b22faee54721cc2f479b52a36ce2b22',
    'mcunet wp q1 b1': 'ac7eb94eaee2d8e0c7833b61ca0ec161c7bd38f015d09cb4452b585595504f00',
    'mobilenet mix q10 b8': '5cf18d4d6fafe0469ab72870c586e0e2e6f1e73cf19d9ccda9fc454ce5715418',
    'small-cnn mix q1 b1': 'bbfc1cb28096780f868d0c63d181ddee3e498335d6d2be9c44fe58eaa1a3fbbb',
    'small-cnn mix q10 b32': 'e5840b9c5aa4f51b3f38e3d27ab6cd9a32e814e56cdb12e99bdca0fdd0d087be',
    'small-cnn mix q10 b32 tflite': '2cf3974e1f36a641c4878b801af0e34a2bb7526a6820b60e9bca7fefe77a5bf0',
    'small-cnn mix randk q10 b32': '856eaf7ce44552bf03902db42a2268bd4270b77a99f6a0ed3f40fa6719af033e',
    'small-cnn np q10 b1': '09ae4c92573a75e24ffea7ced2347369aa66598e44a63457b04eef75c05dd60b',
    'small-cnn np q10 b32': '7586566d3dc520ed4acdc124e14016bf0830070aeae59df4191b63b5a1bd183a',
    'small-cnn np topk q10 b32': '5d2ce538c2d62ba1635852ce0be2cdbbb9060318bad520cea77b552feefd2d68',
    'small-cnn wp q1 b32': '885b9dff0d2db55c8d278550f9fccd76b6835f9354a37873c714824d2687c0d8',
    'small-cnn wp q10 b1 tflite': '30dbe4f350569118c11b6d31557c6b815fbd8b7789fe7d8e00cd18ebad797cd1',
    'small-cnn wp q10 b32': '4bda8c2e9f21813e91d13de2e97abbe46add0488c21bf30b0ee9dbdb3430d361',
    'small-cnn wp randk q10 b32 tflite': '99f282ab320976aaa7638993be8fe8d7cb4e8ffba861f46ef5ab62b75783f164',
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
def test_zo_run_is_bit_identical_to_the_recorded_one(name):
    assert run_digest(CASES[name]) == DIGESTS[name], f"{name}: a bit of the ZO run changed"


def test_the_digest_sees_a_single_changed_bit():
    """Another seed of the perturbation stream gives another digest: the hash covers the state."""
    case = CASES["small-cnn mix q1 b1"]
    assert run_digest(case) != run_digest(case, seed=12)


if __name__ == "__main__":
    for key in sorted(CASES):
        print(f"    {key!r}: {run_digest(CASES[key])!r},")
