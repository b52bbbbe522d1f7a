"""The shared loop: schedules, resumption bit-exactness, best-validation protocol."""

import numpy as np
import pytest

from mcutrain.methods.base import StepStats, TrainingMethod, read_state, save_state
from mcutrain.methods.loop import cosine_lr, evaluate, fit


class Softmax(TrainingMethod):
    """A float softmax regression with momentum: enough state to test resumption."""

    name = "toy"

    def __init__(self, d, k, seed=0):
        self.w = np.random.default_rng(seed).standard_normal((d, k)).astype(np.float32) * 0.01
        self.v = np.zeros_like(self.w)
        self.steps = 0

    def _logits(self, x):
        return x.reshape(len(x), -1) @ self.w

    def step(self, x, y, lr):
        z = self._logits(x)
        p = np.exp(z - z.max(1, keepdims=True))
        p /= p.sum(1, keepdims=True)
        loss = float(-np.log(p[np.arange(len(y)), y]).mean())
        p[np.arange(len(y)), y] -= 1
        g = x.reshape(len(x), -1).T @ p / len(y)
        self.v = 0.9 * self.v + g
        self.w -= np.float32(lr) * self.v
        self.steps += 1
        return StepStats(loss, int(np.sum(z.argmax(1) == y)), len(y), {"forward": x.size * 2})

    def predict(self, x):
        return self._logits(x).argmax(1)

    def trained_model(self):
        raise NotImplementedError("a float toy: no int8 model")

    def state(self):
        return {"steps": self.steps}, {"w": self.w.copy(), "v": self.v.copy()}

    def load_state(self, meta, arrays):
        self.steps = meta["steps"]
        self.w, self.v = arrays["w"].copy(), arrays["v"].copy()


def blobs(n=300, seed=0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, n)
    x = (rng.standard_normal((n, 4)) + 3 * np.eye(3, 4)[y]).astype(np.float32)
    return x, y


def test_cosine_schedule_endpoints():
    assert cosine_lr(0.1, 0, 11) == pytest.approx(0.1)
    assert cosine_lr(0.1, 5, 11) == pytest.approx(0.05)
    assert cosine_lr(0.1, 10, 11) == pytest.approx(0.0, abs=1e-12)


def test_learns_and_reports():
    x, y = blobs()
    m = Softmax(4, 3)
    r = fit(m, x[:200], y[:200], x[200:], y[200:], epochs=3, batch=32, lr=0.5, progress=False)
    assert r.accuracy_before < 0.7 < r.accuracy_after
    assert r.steps == 3 * 7 and len(r.history) == 3
    assert r.macs["forward"] == 3 * 200 * 4 * 2
    assert r.history[-1]["loss"] < r.history[0]["loss"]


def test_resume_mid_epoch_is_bit_identical(tmp_path):
    x, y = blobs()
    ref = Softmax(4, 3)
    fit(ref, x, y, x[:50], y[:50], epochs=2, batch=32, lr=0.3, progress=False)
    part = Softmax(4, 3)
    fit(part, x, y, x[:50], y[:50], epochs=2, batch=32, lr=0.3, progress=False,
        checkpoint=tmp_path / "c.npz", stop_after_steps=12)
    # the checkpoint holds epoch 1's end; save the mid-epoch position (same run) explicitly too
    doc, _ = read_state(tmp_path / "c.npz")
    save_state(tmp_path / "mid.npz", part, {**doc["loop"], "step": 12}, run=doc["run"])
    resumed = Softmax(4, 3, seed=99)
    fit(resumed, x, y, x[:50], y[:50], epochs=2, batch=32, lr=0.3, progress=False,
        resume=tmp_path / "mid.npz")
    assert resumed.steps == ref.steps
    np.testing.assert_array_equal(resumed.w, ref.w)
    np.testing.assert_array_equal(resumed.v, ref.v)


def test_best_validation_epoch_state_is_kept():
    x, y = blobs(400)
    m = Softmax(4, 3)
    r = fit(m, x[:200], y[:200], x[300:], y[300:], epochs=4, batch=50, lr=0.5, progress=False,
            x_val=x[200:300], y_val=y[200:300])
    best = max(r.history, key=lambda e: e["val_accuracy"])
    assert r.best_val_epoch == best["epoch"] - 1
    assert r.accuracy_after == best["test_accuracy"] == evaluate(m, x[300:], y[300:])


def test_resume_refuses_other_settings(tmp_path):
    class Other(Softmax):
        name = "other"

        def config(self):
            return {"method": "other"}
    x, y = blobs()
    save_state(tmp_path / "s.npz", Softmax(4, 3), {"step": 0})
    with pytest.raises(ValueError, match="same method settings"):
        fit(Other(4, 3), x, y, x, y, epochs=1, batch=10, lr=0.1, resume=tmp_path / "s.npz", progress=False)
