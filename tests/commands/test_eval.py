"""`mcutrain eval`: a model file's accuracy, as the golden engine computes it, and clear refusals."""

from __future__ import annotations

import json

import numpy as np
import pytest

from mcutrain import zoo
from mcutrain.cli import main
from mcutrain.data import load_dataset
from mcutrain.engines import int_engine, ptq


@pytest.fixture(scope="module")
def digits_model(tmp_path_factory):
    ds = load_dataset("digits")
    qm = ptq.quantize_model(zoo.build("digits-cnn", ds.num_classes, ds.shape, seed=0), ds.x_train[:128])
    path = tmp_path_factory.mktemp("eval") / "m.npz"
    qm.save(path)
    return path, float(np.mean(int_engine.predict(qm, ds.x_test) == ds.y_test))


def test_eval_reports_the_int8_accuracy(digits_model, capsys):
    path, want = digits_model
    assert main(["eval", str(path), "--dataset", "digits", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["accuracy"] == want and out["engine"] == "int8" and out["rounding"] == "single"
    assert main(["eval", str(path), "--dataset", "digits"]) == 0
    assert f"accuracy {want:.4f}" in capsys.readouterr().out


def test_eval_takes_a_tflite_as_it_is(digits_model, tmp_path, capsys):
    pytest.importorskip("tflite")
    from mcutrain.interop.tflite_export import to_tflite
    from mcutrain.qmodel import QuantModel
    path, _ = digits_model
    qm = QuantModel.load(path)
    (tmp_path / "m.tflite").write_bytes(to_tflite(qm))
    assert main(["eval", str(tmp_path / "m.tflite"), "--dataset", "digits", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["rounding"] == "tflite" and 0.0 < out["accuracy"] <= 1.0


@pytest.mark.parametrize(("argv", "needle"), [
    (["eval", "missing.npz", "--dataset", "digits"], "does not exist"),
    (["eval", "{m}", "--dataset", "mnist1d"], "takes samples of shape (8, 8, 1)"),
])
def test_eval_refusals(argv, needle, digits_model, capsys):
    path, _ = digits_model
    assert main([a.replace("{m}", str(path)) for a in argv]) == 1
    err = capsys.readouterr().err
    assert "error:" in err and needle in err and "Traceback" not in err
