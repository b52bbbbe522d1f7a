"""`.tflite` in and out: the round trip keeps every tensor byte, refusals name the operator,
the CLI and API pick the importer by content."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

pytest.importorskip("tflite", reason="pip install tflite (a dependency of mcutrain)")

from tflite_models import MODELS, quant_model

from mcutrain import cli, qmodel
from mcutrain.engines import int_engine
from mcutrain.interop import InteropError
from mcutrain.interop import tflite_read as R
from mcutrain.interop.tflite_export import _Writer, to_tflite
from mcutrain.interop.tflite_import import from_tflite, from_tflite_bytes


def tensors(data: bytes) -> dict[str, tuple]:
    """Every tensor of a file by name: shape, type, scales, zero points, axis and data bytes."""
    m = R.parse(data)
    return {t.name: (t.shape, t.dtype, None if t.scale is None else t.scale.tobytes(),
                     None if t.zero_point is None else t.zero_point.tolist(), t.qdim,
                     None if t.data is None else t.data.tobytes()) for t in m.tensors}


def ops(data: bytes) -> list[str]:
    return [o.name for o in R.parse(data).operators]


@pytest.mark.parametrize("name", sorted(MODELS))
def test_round_trip_keeps_every_tensor_byte(name):
    qm = quant_model(name)
    first = to_tflite(qm)
    back, _ = from_tflite_bytes(first)
    again = to_tflite(back)
    assert tensors(again) == tensors(first) and ops(again) == ops(first)
    assert again == first
    x = np.random.default_rng(1).integers(-128, 128, (8, *qm.graph.input_shape)).astype(np.int8)
    # the same integers: in mcutrain's own rounding the imported model computes what the original did
    # (TFLite's rounding, which `back` carries, is checked against TFLM itself in test_tflm.py)
    np.testing.assert_array_equal(int_engine.forward(dataclasses.replace(back, rounding="single"), x),
                                  int_engine.forward(qm, x))
    assert back.rounding == "tflite"


def edges_model():
    """digits-cnn with a float QUANTIZE input, a SOFTMAX head, a DEQUANTIZE output, a PAD before a
    VALID conv, MEAN instead of the average pool and foreign tensor names: what the import records."""
    qm = quant_model("mcunet-5fps")
    w = _Writer(qm)
    first_conv = next(n for n in qm.graph.nodes if n.attrs.get("padding", (0,)) != (0, 0, 0, 0))
    gap = next(n for n in qm.graph.nodes if n.op.value == "global_avgpool")
    w.meta = {"input": {"name": "serving/input:0", "float": True, "float_name": "input_float"},
              "output": {"softmax": {"name": "probs", "scale": 1 / 256, "zero_point": -128, "beta": 1.0},
                         "dequantize": {"name": "probs_float"}},
              "pads": {first_conv.name: {"name": "padded", "paddings_name": "paddings",
                                         "pad": list(first_conv.attrs["padding"]), "padding": "VALID"}},
              "mean": {gap.name: {"keep_dims": False, "axis_name": "axes", "axis": [1, 2]}},
              "implicit_flatten": [qm.graph.consumers(gap.name)[0].name]}
    w.names = {first_conv.name: "model/conv 0/Conv2D;bias"}
    w.run()
    return qm, w.finish()


def test_edges_are_recorded_and_restored():
    qm, data = edges_model()
    assert ops(data)[0] == "QUANTIZE" and ops(data)[-2:] == ["SOFTMAX", "DEQUANTIZE"]
    assert "PAD" in ops(data) and "MEAN" in ops(data)
    back, renamed = from_tflite_bytes(data)
    assert renamed["model.conv_0.Conv2D_bias"] == "model/conv 0/Conv2D;bias"
    meta = back.provenance["tflite"]
    assert meta["output"]["softmax"]["zero_point"] == -128 and meta["input"]["float"]
    assert to_tflite(back) == data
    x = np.random.default_rng(2).integers(-128, 128, (4, *qm.graph.input_shape)).astype(np.int8)
    # the same integers: in mcutrain's own rounding the imported model computes what the original did
    # (TFLite's rounding, which `back` carries, is checked against TFLM itself in test_tflm.py)
    np.testing.assert_array_equal(int_engine.forward(dataclasses.replace(back, rounding="single"), x),
                                  int_engine.forward(qm, x))


def test_model_file_and_cli(tmp_path, capsys):
    qm, data = edges_model()
    src = tmp_path / "m.bin"          # recognized by content, not by suffix
    src.write_bytes(data)
    out = tmp_path / "m.npz"
    assert cli.main(["import", str(src), "-o", str(out), "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["quantized"] and res["softmax_head"] and res["classes"] == qm.graph.num_classes
    assert res["source_names"] == {"model.conv_0.Conv2D_bias": "model/conv 0/Conv2D;bias"}
    loaded = qmodel.load(out)
    assert loaded.provenance["imported_from"] == {"tflite": "m.bin"}
    assert loaded.rounding == "tflite"          # the model file keeps TFLite's double rounding
    assert cli.main(["export", str(out), "--target", "cortex-m4", "-o", str(tmp_path / "lib")]) == 0
    capsys.readouterr()
    assert "#define MT_ROUNDING_TFLITE 1" in (tmp_path / "lib" / "runtime" / "mt_config.h").read_text()
    for fmt in ("tflite", "onnx"):
        if fmt == "onnx":
            pytest.importorskip("onnx")
        dst = tmp_path / f"back.{fmt}"
        assert cli.main(["export", str(out), "--format", fmt, "-o", str(dst), "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["bytes"] == dst.stat().st_size
    assert (tmp_path / "back.tflite").read_bytes() == data
    import mcutrain
    assert isinstance(mcutrain.import_model(src), qmodel.QuantModel)


@pytest.mark.parametrize("argv, needle", [
    (["import", "{m}", "--calibrate", "digits", "-o", "{o}"], "does not apply to a .tflite"),
    (["export", "{o}", "--format", "tflite", "--method", "zo", "-o", "{t}"], "compiles into a C library"),
    (["export", "{o}", "-o", "{t}"], "--target is required"),
])
def test_cli_refusals(argv, needle, tmp_path, capsys):
    (tmp_path / "m.tflite").write_bytes(to_tflite(quant_model("digits-cnn")))
    quant_model("digits-cnn").save(tmp_path / "q.npz")
    args = [a.format(m=tmp_path / "m.tflite", o=tmp_path / "q.npz", t=tmp_path / "x.tflite") for a in argv]
    assert cli.main(args) != 0
    assert needle in capsys.readouterr().err


def test_refusals_name_the_problem():
    qm = quant_model("digits-cnn")
    data = to_tflite(qm)
    with pytest.raises(InteropError, match=r"not a .tflite file"):
        from_tflite_bytes(b"\0" * 64)
    with pytest.raises(InteropError, match=r"not a valid .tflite file"):
        from_tflite_bytes(data[:200])
    w = _Writer(qm)
    w.run()
    w.ops[0]["code"] = "SOFTMAX"           # not last: refused with its index
    with pytest.raises(InteropError, match=r"operator 0 \(SOFTMAX\)"):
        from_tflite_bytes(w.finish())
    w = _Writer(qm)
    w.run()
    w.tensors[w.ops[0]["outs"][0]]["q"] = (np.array([np.nan], np.float32), np.array([0]), 0)
    with pytest.raises(InteropError, match="finite and > 0"):
        from_tflite_bytes(w.finish())
    w = _Writer(qm)
    w.run()
    w.tensors[w.ops[0]["outs"][0]]["q"] = (np.array([0.1], np.float32), np.array([300]), 0)
    with pytest.raises(InteropError, match="zero points"):
        from_tflite_bytes(w.finish())
    w = _Writer(qm)
    w.run()
    w.buffers[1] = w.buffers[1][:-1]         # the first weight buffer one byte short
    with pytest.raises(InteropError, match="bytes"):
        from_tflite_bytes(w.finish())


def test_unsupported_operator_is_named(monkeypatch):
    from mcutrain.interop import tflite_export as E
    qm = quant_model("digits-cnn")
    w = _Writer(qm)
    w.run()
    monkeypatch.setitem(E.CODES, "TANH", 28)
    w.ops[1]["code"] = "TANH"
    with pytest.raises(InteropError, match=r"operator 1 \(TANH\) is not supported"):
        from_tflite_bytes(w.finish())


def test_missing_file(tmp_path):
    with pytest.raises(InteropError, match="cannot read"):
        from_tflite(tmp_path / "none.tflite")
