"""Float training: the method on the shared loop, partial training, exact resume, MAC counts."""

import numpy as np
import pytest
from sklearn.datasets import load_digits

from mcutrain import zoo
from mcutrain.methods.float import FloatMethod, evaluate, train
from mcutrain.methods.loop import fit


@pytest.fixture(scope="module")
def digits():
    d = load_digits()
    x = (d.images / 16.0).astype(np.float32)[..., None]
    return x[::2], d.target[::2], x[1::2], d.target[1::2]


def test_train_learns_and_reports_history(digits):
    x, y, xv, yv = digits
    g = zoo.build("digits-cnn", seed=0)
    before = evaluate(g, xv, yv)
    history = train(g, x, y, epochs=3, batch=32, lr=3e-3, seed=0, progress=False, x_val=xv, y_val=yv)
    assert [h["epoch"] for h in history] == [1, 2, 3]
    assert history[-1]["loss"] < history[0]["loss"]
    assert history[-1]["val_accuracy"] == evaluate(g, xv, yv) > before + 0.5


def test_only_trainable_layers_change(digits):
    x, y, _, _ = digits
    g = zoo.build("digits-cnn", seed=1)
    start = {k: v.copy() for k, v in g.arrays().items()}
    train(g, x[:256], y[:256], epochs=1, batch=64, lr=1e-2, seed=0, optimizer="sgd", progress=False,
          trainable=["fc"], momentum=0.9)
    for k, v in g.arrays().items():
        assert np.array_equal(v, start[k]) == (not k.startswith("fc."))


def test_step_counts_macs_per_phase():
    g = zoo.build("digits-cnn")                  # conv1 9216, conv2 73728, fc 5120 MACs per sample
    x = np.zeros((4, 8, 8, 1), np.float32)
    y = np.arange(4)
    all_stats = FloatMethod(g.copy()).step(x, y, 0.0)
    assert all_stats.macs == {"forward": 4 * 88064, "error": 4 * (73728 + 5120), "weight_grad": 4 * 88064}
    head = FloatMethod(g.copy(), trainable=["fc"]).step(x, y, 0.0)
    assert head.macs == {"forward": 4 * 88064, "error": 0, "weight_grad": 4 * 5120}


def test_resume_from_saved_state_is_exact(digits, tmp_path):
    x, y, xv, yv = digits
    x, y = x[:200], y[:200]
    straight = FloatMethod(zoo.build("digits-cnn", seed=2))
    fit(straight, x, y, xv, yv, epochs=2, batch=50, lr=1e-2, seed=5, progress=False)
    ckpt = tmp_path / "state.npz"
    first = FloatMethod(zoo.build("digits-cnn", seed=2))
    fit(first, x, y, xv, yv, epochs=2, batch=50, lr=1e-2, seed=5, progress=False, checkpoint=ckpt,
        stop_after_steps=4)                                  # 4 steps = epoch 1, then checkpointed
    resumed = FloatMethod(zoo.build("digits-cnn", seed=9))   # other weights: all must come from the file
    fit(resumed, x, y, xv, yv, epochs=2, batch=50, lr=1e-2, seed=5, progress=False, resume=ckpt)
    for k, v in straight.graph.arrays().items():
        np.testing.assert_array_equal(resumed.graph.arrays()[k], v)


def test_unknown_layers_and_optimizers_are_refused():
    g = zoo.build("digits-cnn")
    with pytest.raises(ValueError, match=r"trainable layers \['flatten'\]"):
        FloatMethod(g, trainable=["flatten"])
    with pytest.raises(ValueError, match="unknown optimizer"):
        FloatMethod(g, optimizer="lbfgs")
