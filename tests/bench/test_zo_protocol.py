"""The adaptation benchmarks' pretrained model: pinned by a committed file, trained only without one."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

from mcutrain import io, zoo
from mcutrain.bench import zo_protocol

REPO_MODELS = Path(__file__).resolve().parents[2] / "benchmarks" / "models"


def _pin(tmp_path: Path, seed: int) -> Path:
    models = tmp_path / "models"
    models.mkdir()
    model = zoo.build("small-cnn", seed=seed)
    return io.save(models / zo_protocol.PINNED_MODEL, model, {"float_accuracy": 0.5})


def _no_training(path, budget):
    raise AssertionError(f"trained a model into {path} although one is pinned")


def test_full_budget_takes_the_pinned_file_and_names_its_hash(tmp_path, monkeypatch):
    pinned = _pin(tmp_path, seed=7)
    monkeypatch.setattr(zo_protocol, "_train_pretrained", _no_training)
    graph, meta = zo_protocol.pretrained_model(tmp_path / "work", zo_protocol.Budget(), quick=False)
    want = io.load(pinned).graph.arrays()
    got = graph.arrays()
    assert sorted(got) == sorted(want)
    assert all(np.array_equal(got[k], want[k]) for k in want)
    assert meta["sha256"] == hashlib.sha256(pinned.read_bytes()).hexdigest()
    assert meta["file"] == zo_protocol.PINNED_MODEL


def test_a_model_already_in_work_wins_over_the_pinned_one(tmp_path, monkeypatch):
    _pin(tmp_path, seed=7)
    work = tmp_path / "work"
    work.mkdir()
    io.save(work / "pretrained.npz", zoo.build("small-cnn", seed=8), {})
    monkeypatch.setattr(zo_protocol, "_train_pretrained", _no_training)
    _, meta = zo_protocol.pretrained_model(work, zo_protocol.Budget(), quick=False)
    assert meta["file"] == "pretrained.npz"


def test_quick_budget_trains_its_own_small_model(tmp_path, monkeypatch):
    _pin(tmp_path, seed=7)
    trained = []
    monkeypatch.setattr(zo_protocol, "_train_pretrained",
                        lambda path, _: trained.append(io.save(path, zoo.build("small-cnn", seed=9), {})))
    _, meta = zo_protocol.pretrained_model(tmp_path / "work", zo_protocol.QUICK, quick=True)
    assert [p.name for p in trained] == ["pretrained-quick.npz"]
    assert meta["file"] == "pretrained-quick.npz"


def test_the_committed_model_is_the_float_small_cnn_of_the_protocol():
    mf = io.load(REPO_MODELS / zo_protocol.PINNED_MODEL)
    assert mf.meta["dataset"] == "fashion-mnist"
    assert sorted(mf.graph.arrays()) == sorted(zoo.build("small-cnn", seed=0).arrays())
