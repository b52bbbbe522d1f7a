"""Optimizers against torch.optim over several steps; the cosine schedule; exact resume."""

import numpy as np
import pytest
import torch

from mcutrain.methods.optim import SGD, Adam, cosine_lr, make_optimizer

SHAPES = {"a.weight": (4, 3), "a.bias": (4,), "b.weight": (2, 2, 2, 3)}


def _grads(step: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(step)
    return {k: rng.standard_normal(s).astype(np.float32) for k, s in SHAPES.items()}


def _run_both(ours, make_torch, steps=6, lrs=(0.1, 0.05, 0.02, 0.02, 0.01, 0.005)):
    rng = np.random.default_rng(99)
    params = {k: rng.standard_normal(s).astype(np.float32) for k, s in SHAPES.items()}
    tparams = {k: torch.tensor(v, requires_grad=True) for k, v in params.items()}
    topt = make_torch(list(tparams.values()))
    for t in range(steps):
        g = _grads(t)
        ours.step(params, g, lrs[t])
        for k, tp in tparams.items():
            tp.grad = torch.tensor(g[k])
        for group in topt.param_groups:
            group["lr"] = lrs[t]
        topt.step()
    return params, {k: v.detach().numpy() for k, v in tparams.items()}


@pytest.mark.parametrize("kw", [dict(momentum=0.9), dict(momentum=0.0),
                                dict(momentum=0.9, nesterov=True, weight_decay=1e-2)])
def test_sgd_matches_torch(kw):
    ours, ref = _run_both(SGD(**kw), lambda p: torch.optim.SGD(p, lr=0.1, **kw))
    for k in SHAPES:
        assert ours[k].dtype == np.float32
        np.testing.assert_allclose(ours[k], ref[k], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("kw", [dict(), dict(weight_decay=1e-2, beta1=0.8, beta2=0.99)])
def test_adam_matches_torch(kw):
    tkw = dict(weight_decay=kw.get("weight_decay", 0.0),
               betas=(kw.get("beta1", 0.9), kw.get("beta2", 0.999)))
    ours, ref = _run_both(Adam(**kw), lambda p: torch.optim.Adam(p, lr=0.1, **tkw))
    for k in SHAPES:
        assert ours[k].dtype == np.float32
        np.testing.assert_allclose(ours[k], ref[k], rtol=1e-5, atol=1e-6)


def test_first_adam_step_moves_each_weight_by_lr():
    """With bias correction the first step is lr * g / (|g| + eps): lr in the sign of g."""
    p = {"w": np.zeros(3, np.float32)}
    Adam().step(p, {"w": np.array([2.0, -0.5, 1e-3], np.float32)}, lr=0.01)
    np.testing.assert_allclose(p["w"], [-0.01, 0.01, -0.01], rtol=1e-4)


@pytest.mark.parametrize("name", ["sgd", "adam"])
def test_state_round_trip_resumes_exactly(name):
    rng = np.random.default_rng(0)
    start = {k: rng.standard_normal(s).astype(np.float32) for k, s in SHAPES.items()}
    straight, resumed = {k: v.copy() for k, v in start.items()}, {k: v.copy() for k, v in start.items()}
    a = make_optimizer(name)
    for t in range(4):
        a.step(straight, _grads(t), 0.01)
    b = make_optimizer(name)
    for t in range(2):
        b.step(resumed, _grads(t), 0.01)
    meta, arrays = b.state()
    c = make_optimizer(name)
    c.load_state(meta, arrays)
    for t in range(2, 4):
        c.step(resumed, _grads(t), 0.01)
    for k in SHAPES:
        np.testing.assert_array_equal(straight[k], resumed[k])


def test_cosine_schedule_endpoints_and_midpoint():
    assert cosine_lr(0.1, 0, 11) == pytest.approx(0.1)
    assert cosine_lr(0.1, 5, 11) == pytest.approx(0.05)
    assert cosine_lr(0.1, 10, 11) == pytest.approx(0.0, abs=1e-12)
    assert cosine_lr(0.1, 10, 11, min_fraction=0.1) == pytest.approx(0.01)


def test_bad_names_settings_and_gradients_are_refused():
    with pytest.raises(ValueError, match="unknown optimizer 'rmsprop'"):
        make_optimizer("rmsprop")
    with pytest.raises(ValueError, match="bad settings for optimizer 'adam'"):
        make_optimizer("adam", momentum=0.9)
    p = {"w": np.zeros(3, np.float32)}
    with pytest.raises(KeyError, match="unknown parameters"):
        SGD().step(p, {"v": np.zeros(3, np.float32)}, 0.1)
    with pytest.raises(ValueError, match="has shape"):
        SGD().step(p, {"w": np.zeros(4, np.float32)}, 0.1)
