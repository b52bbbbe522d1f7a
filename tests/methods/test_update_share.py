"""`update_share`: the fraction of integer weights a step changes, per layer and overall."""

from __future__ import annotations

import numpy as np

from mcutrain import zoo
from mcutrain.engines import ptq
from mcutrain.methods.bp_qas import BPQASConfig, BPQASMethod
from mcutrain.methods.loop import fit
from mcutrain.methods.update_share import UpdateShare


class _Weights:
    """A stand-in method: two int8 layers and a float one, stepped by hand."""

    def __init__(self) -> None:
        self.a = np.zeros(4, np.int8)
        self.b = np.zeros(2, np.int8)
        self.f = np.zeros(3, np.float32)

    def state(self):
        return {}, {"w/a": self.a.copy(), "w/b": self.b.copy(), "b/a": np.zeros(4, np.int32),
                    "w/f": self.f.copy()}


def test_hand_counted_shares():
    m, share = _Weights(), UpdateShare()
    share.before(m)
    m.a[0] = 1                                 # 1 of 4 in a, 0 of 2 in b
    m.f[:] = 1                                 # float weights are not counted
    share.after(m)
    share.before(m)
    m.a[1:3] = -1                              # 2 of 4 in a, 1 of 2 in b
    m.b[1] = 5
    share.after(m)
    r = share.result()
    assert r == {"overall": (1 / 6 + 3 / 6) / 2, "layers": {"a": 0.375, "b": 0.25}}


def test_no_step_no_share():
    assert UpdateShare().result() is None


def _bp_qas_run(lr: float):
    g = zoo.build("digits-cnn", seed=1)
    rng = np.random.default_rng(0)
    x = rng.random((64, *g.input_shape), dtype=np.float32)
    y = rng.integers(0, g.num_classes, 64)
    m = BPQASMethod(ptq.quantize_model(g, x), BPQASConfig(trainable="all"))
    return fit(m, x, y, x[:16], y[:16], epochs=1, batch=16, lr=lr, schedule="constant", progress=False)


def test_fit_reports_updates_that_round_to_nothing():
    """A tiny rate rounds every int8 update to 0; a large one moves weights in every layer."""
    small, large = _bp_qas_run(1e-9), _bp_qas_run(5.0)
    layers = ("conv1", "conv2", "fc")
    assert small.weights_changed_per_step == {"overall": 0.0, "layers": dict.fromkeys(layers, 0.0)}
    assert large.weights_changed_per_step["overall"] > 0
    assert all(v > 0 for v in large.weights_changed_per_step["layers"].values())
