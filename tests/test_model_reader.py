"""One reader for the model files users bring: an mcutrain `.npz` or a deployed `.tflite`, taken
as it is by every command (no `mcutrain import` step, no PTQ)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from mcutrain import io, zoo
from mcutrain.cli import main
from mcutrain.engines import ptq
from mcutrain.interop.tflite_export import save_tflite
from mcutrain.interop.tflite_import import from_tflite
from mcutrain.model_reader import read_model
from mcutrain.qmodel import QuantModel

DATA = "digits-c:stripe:5"


@pytest.fixture(scope="module")
def tflite_file(tmp_path_factory):
    g = zoo.build("digits-cnn", seed=2)
    qm = ptq.quantize_model(g, np.random.default_rng(2).random((64, *g.input_shape), dtype=np.float32),
                            rounding="tflite")
    return save_tflite(qm, tmp_path_factory.mktemp("tfl") / "deployed.tflite")


def _json(capsys, *argv) -> dict:
    assert main([str(a) for a in argv]) == 0
    return json.loads(capsys.readouterr().out)


def test_a_tflite_reads_as_its_int8_model(tflite_file):
    held = read_model(tflite_file)
    ref, _ = from_tflite(tflite_file)
    assert isinstance(held.model, QuantModel) and held.model.rounding == "tflite"
    for name, w in ref.weights.items():
        assert np.array_equal(held.model.weights[name], w)
        assert np.array_equal(held.model.biases[name], ref.biases[name])
    assert held.provenance["imported_from"] == {"tflite": "deployed.tflite"}


def test_an_npz_reads_with_its_provenance(tmp_path):
    g = zoo.build("digits-cnn", seed=0)
    qm = ptq.quantize_model(g, np.random.default_rng(0).random((16, *g.input_shape), dtype=np.float32))
    qm.provenance = {"source_names": {"conv1": "features.0"}, "arch": "digits-cnn"}
    held = read_model(qm.save(tmp_path / "m.npz"))
    assert isinstance(held.model, QuantModel) and held.source_names == {"conv1": "features.0"}
    assert held.provenance["arch"] == "digits-cnn"


@pytest.mark.parametrize("make, message", [
    (lambda p: p, "does not exist"),
    (lambda p: (p.mkdir(), p)[1], "is not a file"),
    (lambda p: (p.write_bytes(b"\0" * 4 + b"TFL3" + b"\xff" * 40), p)[1], "subgraphs"),
])
def test_unreadable_models_are_refused_with_a_message(tmp_path, make, message):
    path = make(tmp_path / "bad.tflite")
    with pytest.raises(io.ModelFileError, match=message):
        read_model(path)


def test_every_command_takes_a_tflite_as_it_is(capsys, tmp_path, tflite_file):
    """train, plan, export and eval on the .tflite itself: the same integers everywhere, the
    round trip byte-identical."""
    ev = _json(capsys, "eval", tflite_file, "--dataset", DATA, "--json")["accuracy"]
    res = _json(capsys, "train", tflite_file, "--dataset", DATA, "--method", "zo", "--queries", "2",
                "--epochs", "1", "--train-samples", "96", "--json", "-o", tmp_path / "t.npz")
    assert res["accuracy_before"] == ev
    plan = _json(capsys, "plan", tflite_file, "--method", "zo", "--target", "nrf52840", "--json")
    assert plan["fits"] is True
    assert main(["export", str(tflite_file), "--format", "tflite", "-o", str(tmp_path / "back.tflite")]) == 0
    assert (tmp_path / "back.tflite").read_bytes() == tflite_file.read_bytes()


def test_a_broken_tflite_is_one_error_line(capsys, tmp_path):
    bad = tmp_path / "bad.tflite"
    bad.write_bytes(b"\0" * 4 + b"TFL3" + b"\xff" * 40)
    assert main(["train", str(bad), "--dataset", DATA]) != 0
    err = capsys.readouterr().err
    assert "error:" in err and "Traceback" not in err
