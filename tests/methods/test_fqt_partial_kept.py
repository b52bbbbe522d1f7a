"""Partial updates over the kept filters only train bit-identically to the dense kernels."""

from __future__ import annotations

import numpy as np
import pytest

from mcutrain import graph as G
from mcutrain.engines import fqt_kept as KEPT
from mcutrain.methods import fqt_backward
from mcutrain.methods.fqt import FQT
from mcutrain.methods.fqt_state import FQTConfig
from mcutrain.zoo import he_init

_KEPT_IN, _KEPT_W = KEPT.conv2d_bwd_in_acc_kept, KEPT.conv2d_bwd_w_acc_kept


def _graph() -> G.Graph:
    nodes = [G.conv2d("c1", G.INPUT, 8, 3, padding=1, act="relu", in_channels=1),
             G.conv2d("c2", "c1", 8, 3, stride=2, padding=1, act="relu", in_channels=8),
             G.conv2d("c3", "c2", 8, 3, padding=1, act="none", in_channels=8),
             G.add("add", "c2", "c3", act="relu"),
             G.maxpool("pool", "add", 2), G.flatten("flat", "pool"),
             G.linear("fc", "flat", 3, in_features=2 * 2 * 8)]
    return he_init(G.Graph((8, 8, 1), nodes, "kept"), 0)


def _train(prec: str, dense: bool, monkeypatch) -> tuple[dict, dict]:
    monkeypatch.setattr(fqt_backward, "KEPT_DENSE_ABOVE", -1.0 if dense else 0.5)
    calls = {"in": 0, "w": 0}
    kin, kw = _KEPT_IN, _KEPT_W

    def count_in(*a, **k):
        calls["in"] += 1
        return kin(*a, **k)

    def count_w(*a, **k):
        calls["w"] += 1
        return kw(*a, **k)

    monkeypatch.setattr(KEPT, "conv2d_bwd_in_acc_kept", count_in)
    monkeypatch.setattr(KEPT, "conv2d_bwd_w_acc_kept", count_w)
    rng = np.random.default_rng(3)
    x = rng.random((40, 8, 8, 1), dtype=np.float32)
    y = rng.integers(0, 3, 40)
    cfg = FQTConfig(precision=prec, lambda_min=0.2, lambda_max=0.3, seed=1)
    m = FQT(_graph(), cfg, x[:8])
    for s in range(4):
        m.step(x[10 * s:10 * s + 10], y[10 * s:10 * s + 10], 0.02)
    return m.state()[1], calls


@pytest.mark.parametrize("prec", ["int8", "uint8"])
def test_kept_filters_train_like_dense(prec, monkeypatch):
    dense, calls_dense = _train(prec, True, monkeypatch)
    kept, calls_kept = _train(prec, False, monkeypatch)
    assert calls_dense == {"in": 0, "w": 0}
    assert calls_kept["in"] >= 4 and calls_kept["w"] >= 8     # c2, c3 propagate; c1, c2, c3 train
    assert dense.keys() == kept.keys()
    for k in dense:
        assert np.array_equal(dense[k], kept[k]), k


def test_float_errors_keep_the_dense_kernels(monkeypatch):
    _, calls = _train("mixed", False, monkeypatch)
    assert calls == {"in": 0, "w": 0}
