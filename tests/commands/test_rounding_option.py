"""`--rounding tflite` on the commands that quantize a model: the model then simulates exactly
what TFLite Micro computes on its exported `.tflite`; `export --format tflite` of a `single` model
says that TFLM will round its own way."""

from __future__ import annotations

import json

import numpy as np
import pytest

from mcutrain.bench.tflm_layers import tflm_outputs
from mcutrain.cli import main
from mcutrain.engines import int_engine
from mcutrain.interop.tflite_import import from_tflite
from mcutrain.qmodel import QuantModel

PRETRAIN = ["pretrain", "--arch", "digits-cnn", "--dataset", "digits", "--epochs", "1",
            "--train-samples", "300", "--test-samples", "100"]


def _float_onnx(tmp_path):
    """A float ONNX model of digits-cnn, as a user's framework would write it."""
    pytest.importorskip("onnx")
    from mcutrain import zoo
    from mcutrain.interop.onnx_export import save_onnx
    return save_onnx(zoo.build("digits-cnn"), tmp_path / "f.onnx")


def _run(capsys, *argv) -> tuple[int, str, str]:
    rc = main([str(a) for a in argv])
    out = capsys.readouterr()
    return rc, out.out, out.err


@pytest.mark.parametrize("mode", ["single", "tflite"])
def test_pretrain_writes_the_rounding_asked_for(tmp_path, capsys, mode):
    rc, _, _ = _run(capsys, *PRETRAIN, "--rounding", mode, "-o", tmp_path / "m.npz")
    assert rc == 0 and QuantModel.load(tmp_path / "m.npz").rounding == mode


def test_a_tflite_rounding_model_is_what_tflm_computes(tmp_path, capsys):
    pytest.importorskip("tflite_micro")
    assert _run(capsys, *PRETRAIN, "--rounding", "tflite", "-o", tmp_path / "m.npz")[0] == 0
    rc, _, err = _run(capsys, "export", tmp_path / "m.npz", "--format", "tflite", "-o", tmp_path / "m.tflite")
    assert rc == 0 and "note:" not in err
    qm = QuantModel.load(tmp_path / "m.npz")
    x = np.random.default_rng(0).integers(-128, 128, (200, *qm.graph.input_shape), dtype=np.int8)
    ours = int_engine.forward(qm, x)
    theirs = tflm_outputs((tmp_path / "m.tflite").read_bytes(), x)
    assert np.array_equal(ours, theirs)


def test_export_of_a_single_model_to_tflite_says_tflm_rounds_otherwise(tmp_path, capsys):
    assert _run(capsys, *PRETRAIN, "-o", tmp_path / "m.npz")[0] == 0
    rc, out, err = _run(capsys, "export", tmp_path / "m.npz", "--format", "tflite", "-o",
                        tmp_path / "m.tflite", "--json")
    assert rc == 0 and json.loads(out)["rounding"] == "single"
    assert "note: the model rounds 'single'" in err and "--rounding tflite" in err
    assert from_tflite(tmp_path / "m.tflite")[0].rounding == "tflite"


def test_import_calibrate_takes_the_rounding(tmp_path, capsys):
    path = _float_onnx(tmp_path)
    rc, _, err = _run(capsys, "import", path, "--calibrate", "digits", "--rounding", "tflite",
                      "-o", tmp_path / "q.npz")
    assert rc == 0, err
    assert QuantModel.load(tmp_path / "q.npz").rounding == "tflite"


def test_rounding_without_quantization_is_refused(tmp_path, capsys):
    path = _float_onnx(tmp_path)
    rc, _, err = _run(capsys, "import", path, "--rounding", "tflite", "-o", tmp_path / "q.npz")
    assert rc != 0 and "add --calibrate SPEC" in err and "Traceback" not in err


def test_rounding_of_a_tflite_import_is_refused(tmp_path, capsys):
    assert _run(capsys, *PRETRAIN, "-o", tmp_path / "m.npz")[0] == 0
    tfl = tmp_path / "m.tflite"
    assert _run(capsys, "export", tmp_path / "m.npz", "--format", "tflite", "-o", tfl)[0] == 0
    rc, _, err = _run(capsys, "import", tfl, "--rounding", "single", "-o", tmp_path / "q.npz")
    assert rc != 0 and "keeps its own integers and TFLite's rounding" in err
