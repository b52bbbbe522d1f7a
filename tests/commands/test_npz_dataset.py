"""`--dataset data.npz`: a user's own file through train, eval, pretrain and the Python API.

The file is made in the test from scikit-learn's digits (uint8 pixels, as a user's images
usually are); it is named by a relative path, as a user types it, and that path is the
dataset's name in every result.
"""

from __future__ import annotations

import io as _io
import json
import zipfile

import numpy as np
import pytest

import mcutrain
from mcutrain import io, zoo
from mcutrain.cli import main
from mcutrain.data import load_dataset
from mcutrain.engines import ptq


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    """A folder holding `d.npz` (all digits as uint8, labels 0..9) and `m.npz` (an int8 digits-cnn)."""
    ds = load_dataset("digits")
    x = np.round(np.concatenate([ds.x_train, ds.x_test]) * 255).astype(np.uint8)
    y = np.concatenate([ds.y_train, ds.y_test])
    np.savez(tmp_path / "d.npz", x=x, y=y)
    qm = ptq.quantize_model(zoo.build("digits-cnn", 10, (8, 8, 1), seed=0), ds.x_train[:128])
    qm.save(tmp_path / "m.npz")
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize("method", ["zo", "fqt"])
def test_train_one_epoch_on_a_file_keeps_its_path_as_the_dataset_name(method, workdir, capsys):
    assert main(["train", "m.npz", "--dataset", "d.npz", "--method", method, "--epochs", "1",
                 "--train-samples", "200", "--test-samples", "100", "-o", "out.npz", "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["train_samples"] == 200 and res["test_samples"] == 100 and len(res["history"]) == 1
    history = io.load("out.npz").meta["history"]
    assert history["dataset"] == "d.npz" and history["accuracy_after"] == res["accuracy_after"]


def test_eval_on_a_file_equals_the_api(workdir, capsys):
    assert main(["eval", "m.npz", "--dataset", "d.npz", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["dataset"] == "d.npz"
    assert out["accuracy"] == mcutrain.evaluate(mcutrain.load("m.npz"), "d.npz")


def test_pretrain_on_a_file(workdir, capsys):
    assert main(["pretrain", "--arch", "digits-cnn", "--dataset", "d.npz", "--epochs", "1",
                 "-o", "p.npz"]) == 0
    assert "digits-cnn on d.npz" in capsys.readouterr().out
    assert mcutrain.load("p.npz").graph.num_classes == 10


def test_a_model_with_more_outputs_than_the_labels_keeps_them(workdir):
    x, y = np.load("d.npz")["x"], np.load("d.npz")["y"]
    np.savez("low.npz", x=x[y < 5], y=y[y < 5])
    r = mcutrain.train("m.npz", "low.npz", method="zo", epochs=1, train_samples=100)
    assert r.model.graph.num_classes == 10          # not a new 5-class head: the file's labels are 0..9's


@pytest.mark.parametrize(("command", "make", "needle"), [
    ("train", lambda x, y: {"x": x, "y": y + 2},
     "dataset 'bad.npz' has labels up to 11 but the model has 10 outputs (classes 0..9); relabel"),
    ("eval", lambda x, y: {"x": x, "y": y + 2}, "has labels up to 11 but the model has 10 outputs"),
    ("train", lambda x, y: {"x": x.reshape(len(x), -1), "y": y},
     "the model takes samples of shape (8, 8, 1) but dataset 'bad.npz' has samples of shape (1, 64, 1); "
     "reshape x to (N, 8, 8, 1)"),
    ("eval", lambda x, y: {"x": x[:, :4, :4], "y": y},
     "has samples of shape (4, 4, 1); give samples of the model's input shape"),
    ("eval", lambda x, y: {"x": x, "y": y.astype(np.float64)}, "labels are integer class numbers"),
])
def test_the_model_and_the_file_must_agree(command, make, needle, workdir, capsys):
    with np.load("d.npz") as z:
        np.savez("bad.npz", **make(z["x"], z["y"]))
    extra = ["--epochs", "1", "--method", "zo"] if command == "train" else []
    assert main([command, "m.npz", "--dataset", "bad.npz", *extra]) == 1
    err = capsys.readouterr().err
    assert "error:" in err and needle in err and "Traceback" not in err


def test_hostile_and_missing_files_are_error_lines(workdir, capsys):
    header = _io.BytesIO()      # an object array's real header over zero bytes: no pickle is made
    np.lib.format.write_array_header_1_0(header, {"descr": "|O", "fortran_order": False, "shape": (4,)})
    with zipfile.ZipFile("obj.npz", "w") as z:
        z.writestr("x.npy", header.getvalue() + bytes(32))
        z.writestr("y.npy", header.getvalue() + bytes(32))
    (workdir / "cut.npz").write_bytes((workdir / "d.npz").read_bytes()[:5000])
    for path, needle in (("obj.npz", "pickle"), ("cut.npz", "'cut.npz'"), ("none.npz", "does not exist")):
        assert main(["eval", "m.npz", "--dataset", path]) == 1
        err = capsys.readouterr().err
        assert "error:" in err and needle in err and "Traceback" not in err


def test_resume_refuses_a_dataset_file_changed_since_the_checkpoint(workdir, capsys):
    """The checkpoint holds the file's content hash, not only its path."""
    argv = ["train", "m.npz", "--dataset", "d.npz", "--method", "zo", "--queries", "2", "--epochs", "1",
            "--train-samples", "100", "--test-samples", "50", "--checkpoint", "ck.npz"]
    assert main(argv) == 0
    resume = [*argv[:-2], "--resume", "ck.npz"]
    assert main(resume) == 0                                    # the same file resumes
    with np.load("d.npz", allow_pickle=False) as z:
        x, y = z["x"], z["y"]
    np.savez("d.npz", x=255 - x, y=y)
    capsys.readouterr()
    assert main(resume) == 1
    err = capsys.readouterr().err
    assert "--dataset d.npz sha256" in err and "--epochs" not in err and "Traceback" not in err
