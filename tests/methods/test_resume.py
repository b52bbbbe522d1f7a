"""Resume rules: a stopped run resumed under its own settings equals the straight run bit for bit;
another total of epochs is refused unless allowed, and then says what changes."""

from __future__ import annotations

import json

import numpy as np
import pytest

from mcutrain import zoo
from mcutrain.cli import main
from mcutrain.data import load_dataset
from mcutrain.methods.fqt import FQT
from mcutrain.methods.fqt_state import FQTConfig
from mcutrain.methods.loop import fit
from mcutrain.methods.lr_auto import fqt_rate
from mcutrain.methods.state_file import StateFileError


@pytest.fixture(scope="module")
def data():
    ds = load_dataset("digits")
    return ds.x_train[:64], ds.y_train[:64], ds.x_test[:20], ds.y_test[:20], ds.shape


def _fqt(data):
    *_, shape = data
    return FQT(zoo.build("digits-cnn", 10, shape, seed=0), FQTConfig(precision="int8", lambda_min=0.5),
               data[0][:32])


KW = {"batch": 16, "lr": 0.01, "seed": 0, "progress": False}


def test_stopped_run_resumed_equals_the_straight_run(data, tmp_path):
    x, y, xt, yt, _ = data
    straight = _fqt(data)
    ref = fit(straight, x, y, xt, yt, epochs=2, **KW)
    stopped = _fqt(data)
    fit(stopped, x, y, xt, yt, epochs=2, checkpoint=tmp_path / "c.npz", stop_after_steps=4, **KW)
    resumed = _fqt(data)
    res = fit(resumed, x, y, xt, yt, epochs=2, resume=tmp_path / "c.npz", **KW)
    assert res.history == ref.history and res.steps == ref.steps and res.notes == []
    (m_ref, a_ref), (m_res, a_res) = straight.state(), resumed.state()
    assert m_res == m_ref and a_res.keys() == a_ref.keys()
    for k, v in a_ref.items():
        assert a_res[k].dtype == v.dtype
        np.testing.assert_array_equal(a_res[k], v)


def test_other_total_is_refused_unless_allowed(data, tmp_path):
    x, y, xt, yt, _ = data
    one = fit(_fqt(data), x, y, xt, yt, epochs=1, checkpoint=tmp_path / "one.npz", **KW)
    with pytest.raises(StateFileError, match=r"--epochs 2 differs from the checkpoint's 1.*changed epochs"):
        fit(_fqt(data), x, y, xt, yt, epochs=2, resume=tmp_path / "one.npz", **KW)
    straight = fit(_fqt(data), x, y, xt, yt, epochs=2, **KW)
    res = fit(_fqt(data), x, y, xt, yt, epochs=2, resume=tmp_path / "one.npz", allow_changed=["epochs"], **KW)
    assert len(res.history) == 2 and res.steps == straight.steps
    assert any("cosine schedule is recomputed" in n for n in res.notes)
    # the first epoch ran on the 1-epoch schedule: the result equals neither straight run
    assert res.history[0] == one.history[0] != straight.history[0]


def test_batch_change_recounts_at_the_epoch_boundary_and_refuses_mid_epoch(data, tmp_path):
    x, y, xt, yt, _ = data
    fit(_fqt(data), x, y, xt, yt, epochs=2, checkpoint=tmp_path / "c.npz", stop_after_steps=4, **KW)
    res = fit(_fqt(data), x, y, xt, yt, epochs=2, resume=tmp_path / "c.npz", allow_changed=["batch"],
              **{**KW, "batch": 32})
    assert res.steps == 2 + 2 and len(res.history) == 2             # epoch 1 in 4 steps, epoch 2 in 2
    fit(_fqt(data), x, y, xt, yt, epochs=2, checkpoint=tmp_path / "m.npz", stop_after_steps=6, **KW)
    from mcutrain.methods.base import read_state, save_state
    doc, _ = read_state(tmp_path / "m.npz")
    mid = _fqt(data)
    fit(mid, x, y, xt, yt, epochs=2, stop_after_steps=6, **KW)
    save_state(tmp_path / "mid.npz", mid, {**doc["loop"], "step": 6, "samples": 96}, run=doc["run"])
    with pytest.raises(StateFileError, match="mid-epoch"):
        fit(_fqt(data), x, y, xt, yt, epochs=2, resume=tmp_path / "mid.npz", allow_changed=["batch"],
            **{**KW, "batch": 32})


ARGV = ["train", "--arch", "digits-cnn", "--init", "random", "--dataset", "digits", "--train-samples", "64",
        "--test-samples", "20", "--batch", "16", "--json"]


def test_command_refuses_other_epochs_and_allows_them_by_name(tmp_path, capsys):
    ckpt = tmp_path / "c.npz"
    assert main([*ARGV, "--epochs", "1", "--checkpoint", str(ckpt)]) == 0
    capsys.readouterr()
    assert main([*ARGV, "--epochs", "2", "--lr", "0.02", "--resume", str(ckpt)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("mcutrain train: error: ") and len(err.strip().splitlines()) == 1
    assert "--epochs 2 differs from the checkpoint's 1" in err
    assert f"--lr 0.02 differs from the checkpoint's {fqt_rate(4).lr:g}" in err     # --lr auto: 4 steps
    assert "--resume-changed epochs,lr" in err
    assert main([*ARGV, "--epochs", "2", "--resume", str(ckpt), "--resume-changed", "epochs"]) == 0
    out = capsys.readouterr()
    assert len(json.loads(out.out)["history"]) == 2 and "note: --epochs changed from 1 to 2" in out.err
    with pytest.raises(SystemExit) as exc:                           # argparse: usage error, status 2
        main([*ARGV, "--epochs", "2", "--resume", str(ckpt), "--resume-changed", "seed"])
    assert exc.value.code == 2
    assert "seed cannot change on resume" in capsys.readouterr().err
    assert main([*ARGV, "--epochs", "1", "--resume", str(ckpt), "--precision", "uint8"]) == 1
    assert "setting 'precision' is 'uint8', the checkpoint's 'int8'" in capsys.readouterr().err
