"""Source specs on the command line: train one epoch on an image folder and on a CSV time series,
eval and `datasets --info` on them, and `--resume` seeing an edited folder."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest
from PIL import Image

from mcutrain import io, zoo
from mcutrain.cli import main
from mcutrain.data import load_dataset
from mcutrain.engines import ptq


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    """`photos/` (digits 0-2 as 16x16 RGB PNGs, one folder per class), `imu.csv` (3 channels, 3
    activities) and `m.npz` (an int8 digits-cnn, input 8x8x1); its own dataset cache."""
    monkeypatch.setenv("MCUTRAIN_CACHE", str(tmp_path / "cache"))
    digits = load_dataset("digits")
    for c, name in enumerate(("zero", "one", "two")):
        (tmp_path / "photos" / name).mkdir(parents=True)
        for i, img in enumerate(digits.x_train[digits.y_train == c][:20]):
            px = np.repeat(np.kron(img[..., 0], np.ones((2, 2))), 3).reshape(16, 16, 3)
            Image.fromarray(np.rint(px * 255).astype(np.uint8)).save(tmp_path / "photos" / name / f"{i}.png")
    rng = np.random.default_rng(0)
    with open(tmp_path / "imu.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["ax", "ay", "az", "activity"])
        for t in range(900):
            k = t // 300
            signal = np.sin(t * (k + 1) / 5) + 0.1 * rng.standard_normal(3)
            w.writerow([*signal.round(4), ["sit", "walk", "run"][k]])
    qm = ptq.quantize_model(zoo.build("digits-cnn", 10, (8, 8, 1), seed=0), digits.x_train[:128])
    qm.save(tmp_path / "m.npz")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _json(capsys) -> dict:
    return json.loads(capsys.readouterr().out)


def test_train_one_epoch_on_an_image_folder_resized_to_the_model(workdir, capsys):
    assert main(["train", "m.npz", "--dataset", "images:photos", "--method", "fqt", "--epochs", "1",
                 "-o", "out.npz", "--json"]) == 0
    res = _json(capsys)
    assert res["train_samples"] == 48 and res["test_samples"] == 12 and len(res["history"]) == 1
    assert "preprocessing" not in res
    assert io.load("out.npz").meta["history"]["dataset"] == "images:photos"
    assert main(["eval", "out.npz", "--dataset", "images:photos", "--json"]) == 0
    assert _json(capsys)["accuracy"] == res["accuracy_exported"]


def test_train_one_epoch_on_a_csv_time_series_keeps_the_normalization(workdir, capsys):
    spec = "csv:imu.csv?window=40&stride=20&label=activity"
    assert main(["train", "--arch", "mnist1d-cnn", "--init", "random", "--dataset", spec, "--method", "fqt",
                 "--epochs", "1", "-o", "ts.npz", "--json"]) == 0
    res = _json(capsys)
    norm = res["preprocessing"]["normalize"]
    assert norm["columns"] == ["ax", "ay", "az"] and len(norm["mean"]) == len(norm["std"]) == 3
    assert res["preprocessing"]["window"] == 40 and len(res["history"]) == 1
    assert io.load("ts.npz").meta["history"]["preprocessing"] == res["preprocessing"]
    assert io.load("ts.npz").graph.input_shape == (1, 40, 3)


def test_datasets_info_shows_real_shapes_and_classes(workdir, capsys):
    assert main(["datasets", "--info", "images:photos?size=12x12", "--info",
                 "csv:imu.csv?window=40&label=activity", "--json"]) == 0
    rows = _json(capsys)["datasets"]
    assert rows[0]["shape"] == [12, 12, 3] and rows[0]["classes"] == {"0": "one", "1": "two", "2": "zero"}
    assert rows[0]["n_train"] + rows[0]["n_test"] == 60
    assert rows[1]["shape"] == [1, 40, 3] and rows[1]["classes"] == {"0": "run", "1": "sit", "2": "walk"}


def test_a_bad_folder_is_one_error_line(workdir, capsys):
    (workdir / "photos" / "one" / "x.jpg").write_bytes(b"not a jpeg")
    assert main(["eval", "m.npz", "--dataset", "images:photos"]) == 1
    err = capsys.readouterr().err
    assert "cannot decode image 'photos/one/x.jpg'" in err and "Traceback" not in err


def test_resume_refuses_an_edited_folder(workdir, capsys):
    args = ["train", "m.npz", "--dataset", "images:photos", "--method", "zo", "--epochs", "1",
            "--queries", "2", "--checkpoint", "ck.npz"]
    assert main(args) == 0
    Image.fromarray(np.zeros((16, 16, 3), np.uint8)).save(workdir / "photos" / "two" / "new.png")
    capsys.readouterr()
    assert main([*args[:-2], "--resume", "ck.npz", "--epochs", "2"]) == 1
    err = capsys.readouterr().err
    assert "--dataset images:photos sha256" in err
    assert "differs from the checkpoint's images:photos sha256" in err
