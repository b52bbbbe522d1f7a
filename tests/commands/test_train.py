"""`mcutrain train`: JSON result, saved model and history, errors for bad input."""

from __future__ import annotations

import json

import numpy as np
import pytest

from mcutrain import io
from mcutrain.cli import main

KEYS = ["method", "precision", "update", "trainable", "train_samples", "test_samples", "accuracy_before",
        "accuracy_before_method", "accuracy_after", "accuracy_exported", "epochs", "steps", "lr_used",
        "lr_reason", "samples_per_s", "forward_macs", "backward_macs", "weights_changed_per_step", "history"]


def _run(capsys, *argv):
    assert main(list(argv)) == 0
    return json.loads(capsys.readouterr().out)


def test_train_json_and_output(capsys, tmp_path):
    out = tmp_path / "m.npz"
    res = _run(capsys, "train", "--arch", "digits-cnn", "--init", "random", "--dataset", "digits",
               "--method", "fqt", "--precision", "int8", "--trainable", "last:1", "--epochs", "1",
               "--batch", "64", "--lr", "0.003", "--json", "-o", str(out))
    assert list(res) == KEYS
    assert res["precision"] == "int8" and res["trainable"] == "last:1" and res["update"] == "float"
    assert res["steps"] == 23 and len(res["history"]) == 1
    assert (res["train_samples"], res["test_samples"]) == (1438, 359)
    assert res["accuracy_after"] > res["accuracy_before"]
    assert res["forward_macs"] == 88064 * 1438
    assert res["backward_macs"] == 2 * 0 + 5120 * 1438      # last:1: the head's weight gradient only
    assert list(res["weights_changed_per_step"]["layers"]) == ["fc"]    # the trained int8 weights
    mf = io.load(out)
    assert mf.graph.num_classes == 10
    assert mf.meta["provenance"]["trained"]["method"]["precision"] == "int8"
    hist = mf.meta["history"]                                  # one atomic file: model and history
    assert not out.with_suffix(".history.json").exists()
    assert hist["accuracy_after"] == res["accuracy_after"]
    assert (hist["train_samples"], hist["test_samples"]) == (1438, 359)


def test_train_samples_subset_sets_the_steps_and_is_recorded(capsys, tmp_path):
    out = tmp_path / "m.npz"
    res = _run(capsys, "train", "--arch", "digits-cnn", "--init", "random", "--dataset", "digits-c:stripe:5",
               "--method", "zo", "--queries", "2", "--epochs", "1", "--batch", "32", "--train-samples", "100",
               "--test-samples", "50", "--json", "-o", str(out))
    assert (res["train_samples"], res["test_samples"], res["steps"]) == (100, 50, 4)
    assert res["accuracy_before"] * 50 == round(res["accuracy_before"] * 50)     # measured on 50 samples
    hist = io.load(out).meta["history"]
    assert (hist["train_samples"], hist["test_samples"]) == (100, 50)


def test_transfer_gets_new_head(capsys, tmp_path):
    from mcutrain import zoo
    model = tmp_path / "base.npz"
    io.save(model, zoo.build("digits-cnn", 10, seed=1))
    res = _run(capsys, "train", str(model), "--dataset", "digits[0-4]", "--precision", "uint8",
               "--trainable", "last:1", "--partial", "0.5", "--epochs", "1", "--json")
    assert res["precision"] == "uint8"
    assert 0 <= res["accuracy_after"] <= 1


@pytest.mark.parametrize("argv,msg", [
    (["--dataset", "digits"], "either a MODEL"),
    (["--arch", "digits-cnn", "--dataset", "digits"], "--init random"),
    (["--arch", "nope", "--init", "random", "--dataset", "digits"], "unknown architecture"),
    (["--arch", "digits-cnn", "--init", "random", "--dataset", "digits", "--method", "sgd"],
     "unknown method"),
    (["--arch", "digits-cnn", "--init", "random", "--dataset", "digits", "--partial", "0.5",
      "--partial-max", "0.2"], "LAMBDA_MIN"),
    (["--arch", "digits-cnn", "--init", "random", "--dataset", "digits", "--trainable", "last:9"],
     "layers with weights"),
])
def test_bad_input(capsys, argv, msg):
    assert main(["train", *argv, "--epochs", "1"]) == 1
    assert msg in capsys.readouterr().err


def test_seed_determinism(capsys):
    argv = ["train", "--arch", "digits-cnn", "--init", "random", "--dataset", "digits", "--epochs", "1",
            "--batch", "128", "--json"]
    a, b = _run(capsys, *argv), _run(capsys, *argv)
    assert a["history"] == b["history"]
    assert np.isclose(a["accuracy_after"], b["accuracy_after"])


def test_digits_int8_from_scratch_reaches_90_percent(capsys):
    res = _run(capsys, "train", "--arch", "digits-cnn", "--init", "random", "--seed", "0", "--dataset",
               "digits", "--method", "fqt", "--precision", "int8", "--trainable", "all", "--epochs", "10",
               "--json")
    assert res["accuracy_after"] >= 0.90
    assert res["history"][-1]["loss"] < res["history"][0]["loss"]


def test_zo_workers_change_no_result(capsys, monkeypatch):
    """`--workers N` (zo): the same run for any count; every step splits here (`MIN_SPLIT_MACS` 0)."""
    from mcutrain.methods import zo_workers
    monkeypatch.setattr(zo_workers, "MIN_SPLIT_MACS", 0)
    argv = ["train", "--arch", "digits-cnn", "--init", "random", "--dataset", "digits", "--method", "zo",
            "--queries", "5", "--epochs", "1", "--train-samples", "96", "--test-samples", "40", "--json"]
    runs = [_run(capsys, *argv, "--workers", str(w)) for w in (1, 3)]
    for r in runs:
        r.pop("samples_per_s")
    assert runs[0] == runs[1] and runs[0]["steps"] == 3
    assert main([*argv[:8], "fqt", "--workers", "2", "--epochs", "1"]) == 1
    assert "--workers is an option of zo, not of fqt" in capsys.readouterr().err
