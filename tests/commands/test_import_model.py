"""`mcutrain import`: ONNX and PyTorch sources to model files, with clear refusals."""

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from mcutrain import cli, io, qmodel, zoo
from mcutrain.engines import float_engine

pytest.importorskip("onnx", reason="pip install onnx (the dev extra has it)")


def test_onnx_round_trip_and_calibration(tmp_path, capsys):
    from mcutrain.interop import save_onnx
    g = zoo.build("digits-cnn", seed=4)
    save_onnx(g, tmp_path / "m.onnx")
    assert cli.main(["import", str(tmp_path / "m.onnx"), "-o", str(tmp_path / "m.npz"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["params"] == g.num_params() and out["quantized"] is False
    x = np.random.default_rng(0).random((4, 8, 8, 1), np.float32)
    got = float_engine.forward(io.load(tmp_path / "m.npz").graph, x)
    np.testing.assert_allclose(got, float_engine.forward(g, x), rtol=1e-5, atol=1e-5)

    assert cli.main(["import", str(tmp_path / "m.onnx"), "-o", str(tmp_path / "q.npz"),
                     "--calibrate", "digits", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["quantized"] is True
    qm = qmodel.load(tmp_path / "q.npz")
    assert qm.provenance["calibration"] == "digits"


def test_torch_factory(tmp_path, capsys, monkeypatch):
    torch = pytest.importorskip("torch")
    mod = type(sys)("factory_for_test")
    mod.make = lambda: torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(12, 3))
    monkeypatch.setitem(sys.modules, "factory_for_test", mod)
    assert cli.main(["import", "--torch", "factory_for_test:make", "--input-shape", "2,2,3",
                     "-o", str(tmp_path / "t.npz"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["classes"] == 3


@pytest.mark.parametrize("argv, needle", [
    (["import", "-o", "x.npz"], "exactly one source"),
    (["import", "missing.onnx", "-o", "x.npz"], "does not exist"),
    (["import", "--torch", "nocolon", "--input-shape", "2,2,3", "-o", "x.npz"], "MODULE:FUNCTION"),
    (["import", "--torch", "a:b", "--input-shape", "2,x", "-o", "x.npz"], "whole numbers"),
    (["import", "--torch", "a:b", "-o", "x.npz"], "needs --input-shape"),
])
def test_bad_input(argv, needle, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert cli.main(argv) == 1
    assert needle in capsys.readouterr().err


def test_renamed_layers_keep_their_original_names_for_plan_and_train(tmp_path, capsys):
    """A float import (no --calibrate) keeps the mapping in its provenance; plan and train
    resolve `--trainable layers:` given the original (hostile, unicode) name."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "interop"))
    from hostile_onnx import FC_NAME, hostile_onnx

    (tmp_path / "h.onnx").write_bytes(hostile_onnx(side=8, classes=10).SerializeToString())
    assert cli.main(["import", str(tmp_path / "h.onnx"), "-o", str(tmp_path / "h.npz")]) == 0
    assert "renamed 3 layer(s)" in capsys.readouterr().out
    names = io.load(tmp_path / "h.npz").meta["provenance"]["source_names"]
    fc = next(k for k, v in names.items() if v == FC_NAME)
    assert cli.main(["plan", str(tmp_path / "h.npz"), "--method", "bp-qas", "--trainable",
                     f"layers:{FC_NAME}", "--target", "cortex-m4", "--json"]) == 0
    planned = json.loads(capsys.readouterr().out)
    assert fc in json.dumps(planned) and planned["source_names"] == {fc: FC_NAME}   # the user's name too
    assert cli.main(["plan", str(tmp_path / "h.npz"), "--method", "bp-qas", "--trainable",
                     f"layers:{FC_NAME}", "--target", "cortex-m4"]) == 0
    assert f"renamed on import: {fc} = '{FC_NAME}'" in capsys.readouterr().out
    assert cli.main(["train", str(tmp_path / "h.npz"), "--dataset", "digits", "--method", "bp-qas",
                     "--trainable", f"layers:{FC_NAME}", "--epochs", "1", "--train-samples", "64",
                     "--json", "-o", str(tmp_path / "trained.npz")]) == 0
    trained = json.loads(capsys.readouterr().out)
    assert trained["trainable"] == f"layers:{fc}" and trained["source_names"] == {fc: FC_NAME}
    # the trained model keeps the mapping, so a further train still speaks the original names
    assert io.load(tmp_path / "trained.npz").meta["provenance"]["source_names"] == names
