"""from_onnx: torch.onnx exports of the twins and hand-built graphs agree with torch / onnxruntime."""

from __future__ import annotations

import io
import sys
import warnings

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
torch = pytest.importorskip("torch")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from torch_twins import (  # noqa: E402
    DigitsCNN,
    GraphTwin,
    Mnist1dCNN,
    SmallCNN,
    TinyMobileNetV2,
    load_zoo_weights,
    randomize_batchnorm,
    torch_logits,
)

from mcutrain import zoo  # noqa: E402
from mcutrain.engines import float_engine as fe  # noqa: E402
from mcutrain.graph import Op  # noqa: E402
from mcutrain.interop import InteropError, from_onnx  # noqa: E402

TOL = 1e-5


def rel_err(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-6))


def export(module, shape_nhwc, fold: bool = True) -> bytes:
    """torch.onnx's TorchScript exporter (dynamo=False: the dynamo one needs onnxscript)."""
    buf = io.BytesIO()
    h, w, c = shape_nhwc
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module.eval(), torch.zeros(1, c, h, w), buf, dynamo=False, opset_version=13,
                          do_constant_folding=fold)
    return buf.getvalue()


def ort_run(model, x_nhwc: np.ndarray) -> np.ndarray:
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    name = sess.get_inputs()[0].name
    y = sess.run(None, {name: np.ascontiguousarray(x_nhwc.transpose(0, 3, 1, 2))})[0]
    return y.reshape(len(x_nhwc), -1)


def batch(shape, n: int = 5) -> np.ndarray:
    return np.random.default_rng(0).random((n, *shape), dtype=np.float32)


@pytest.mark.parametrize("arch, make, shape", [
    ("digits-cnn", DigitsCNN, None), ("small-cnn", SmallCNN, None), ("mnist1d-cnn", Mnist1dCNN, None),
    ("mcunet-5fps", None, (32, 32, 3))])
def test_torch_onnx_export_of_zoo_twins_imports_as_the_zoo_graph(arch, make, shape):
    g = zoo.build(arch, input_shape=shape, seed=5)
    twin = load_zoo_weights(make() if make else GraphTwin(g), g)
    got = from_onnx(export(twin, g.input_shape))
    assert [(n.op, n.attrs) for n in got.nodes] == [(n.op, n.attrs) for n in g.nodes]
    x = batch(g.input_shape)
    assert rel_err(fe.forward(got, x), torch_logits(twin, x)) < TOL


@pytest.mark.parametrize("fold", [True, False])
def test_mobilenetv2_via_onnx_with_and_without_batchnorm_nodes(fold):
    torch.manual_seed(2)
    net = randomize_batchnorm(TinyMobileNetV2())
    data = export(net, (32, 32, 3), fold)
    ops = {n.op_type for n in onnx.load_from_string(data).graph.node}
    assert ("BatchNormalization" in ops) != fold
    g = from_onnx(data)
    assert [n.op for n in g.nodes].count(Op.ADD) == 4
    x = batch((32, 32, 3), 3)
    assert rel_err(fe.forward(g, x), torch_logits(net, x)) < TOL


# ---------------------------------------------------------------- hand-built graphs vs onnxruntime


def model(nodes, inits: dict[str, np.ndarray], in_shape, out_shape, opset: int = 13):
    g = helper.make_graph(nodes, "hand", [helper.make_tensor_value_info("x", TensorProto.FLOAT, in_shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, out_shape)],
                          [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 7 if opset >= 13 else 5
    onnx.checker.check_model(m)
    return m


def rnd(*shape, seed: int) -> np.ndarray:
    return (np.random.default_rng(seed).standard_normal(shape) * 0.3).astype(np.float32)


def test_hand_built_graph_covers_the_op_set_and_agrees_with_onnxruntime():
    n = helper.make_node
    inits = {
        "w1": rnd(8, 2, 4, 4, seed=1), "b1": rnd(8, seed=2),
        "g": rnd(8, seed=3) + 1, "beta": rnd(8, seed=4), "mu": rnd(8, seed=5),
        "var": np.abs(rnd(8, seed=6)) + 0.5,
        "w2": rnd(8, 4, 3, 3, seed=7), "w3": rnd(8, 8, 1, 1, seed=8), "b3": rnd(1, 8, 1, 1, seed=9),
        "shape": np.array([0, -1], np.int64), "wm": rnd(8, 6, seed=10), "bm": rnd(6, seed=11),
        "wg": rnd(6, 4, seed=12), "bg": rnd(1, 4, seed=13),
    }
    nodes = [
        n("Conv", ["x", "w1", "b1"], ["c1"], auto_pad="SAME_UPPER", strides=[2, 2]),   # 9x9 -> 5x5
        n("BatchNormalization", ["c1", "g", "beta", "mu", "var"], ["bn"], epsilon=1e-3),
        n("Constant", [], ["lo"], value=numpy_helper.from_array(np.float32(0))),
        n("Constant", [], ["hi"], value_float=6.0),
        n("Clip", ["bn", "lo", "hi"], ["r6"]),
        n("Conv", ["r6", "w2"], ["c2"], group=2, pads=[0, 1, 2, 1]),                 # 5x5 -> 5x5
        n("Relu", ["c2"], ["r2"]),
        n("Add", ["r2", "r6"], ["res"]),
        n("Conv", ["res", "w3"], ["c3"]),
        n("Add", ["b3", "c3"], ["c3b"]),                                             # bias, constant first
        n("AveragePool", ["c3b"], ["ap"], kernel_shape=[2, 2], strides=[1, 1]),      # 5x5 -> 4x4
        n("MaxPool", ["ap"], ["mp"], kernel_shape=[2, 2], strides=[2, 2]),           # 4x4 -> 2x2
        n("GlobalAveragePool", ["mp"], ["gap"]),
        n("Reshape", ["gap", "shape"], ["flat"]),
        n("MatMul", ["flat", "wm"], ["mm"]),
        n("Add", ["mm", "bm"], ["mmb"]),
        n("Relu", ["mmb"], ["h"]),
        n("Dropout", ["h"], ["d"]),
        n("Identity", ["d"], ["i"]),
        n("Gemm", ["i", "wg", "bg"], ["y"], alpha=0.5, beta=2.0),
    ]
    m = model(nodes, inits, ["N", 2, 9, 9], ["N", 4])
    g = from_onnx(m, name="hand")
    assert g.name == "hand" and g.input_shape == (9, 9, 2)
    assert g.node("c1").attrs["padding"] == (1, 2, 1, 2) and g.node("c1").act == "relu6"
    assert g.node("c2").attrs["padding"] == (0, 2, 1, 1) and g.node("c2").attrs["groups"] == 2
    assert [n.op for n in g.nodes].count(Op.LINEAR) == 2 and Op.BATCHNORM not in [n.op for n in g.nodes]
    x = batch((9, 9, 2), 4) * 4 - 2
    assert rel_err(fe.forward(g, x), ort_run(m, x)) < TOL


def test_opset10_clip_attributes_same_lower_and_flatten_permutation():
    n = helper.make_node
    inits = {"w": rnd(4, 1, 2, 2, seed=1), "fc": rnd(3, 4 * 3 * 3, seed=2), "fb": rnd(3, seed=3)}
    nodes = [n("Conv", ["x", "w"], ["c"], auto_pad="SAME_LOWER"),
             n("Clip", ["c"], ["r"], min=0.0, max=6.0),
             n("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             n("Flatten", ["p"], ["f"]),
             n("Gemm", ["f", "fc", "fb"], ["y"], transB=1)]
    m = model(nodes, inits, [1, 1, 6, 6], [1, 3], opset=10)
    g = from_onnx(m)
    assert g.node("c").attrs["padding"] == (1, 0, 1, 0) and g.node("c").act == "relu6"
    x = batch((6, 6, 1), 1) * 10
    assert rel_err(fe.forward(g, x), ort_run(m, x)) < TOL


def _conv_model(extra_nodes, extra_inits=None, out="y", in_shape=(1, 1, 6, 6), conv_attrs=None,
                out_shape=None):
    n = helper.make_node
    inits = {"w": rnd(2, 1, 3, 3, seed=1), **(extra_inits or {})}
    nodes = [n("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1], **(conv_attrs or {})), *extra_nodes]
    return model(nodes, inits, list(in_shape), out_shape or [1, 2, 6, 6])


@pytest.mark.parametrize("build, pattern", [
    (lambda: _conv_model([helper.make_node("Sigmoid", ["c"], ["y"])]),
     r"ONNX node 'y' \(Sigmoid\) is not supported; supported ops: Conv, BatchNormalization, Relu"),
    (lambda: _conv_model([helper.make_node("Relu", ["c"], ["y"])], conv_attrs={"dilations": [2, 2]}),
     r"dilations \[2, 2\] are not supported"),
    (lambda: _conv_model([helper.make_node("MaxPool", ["c"], ["y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1])]),
     r"\(MaxPool\): padded pooling is not supported"),
    (lambda: _conv_model([helper.make_node("Clip", ["c", "a", "b"], ["y"])],
                         {"a": np.float32(0), "b": np.float32(1)}),
     r"only Clip\(0, 6\) .* got min=0.0, max=1.0"),
    (lambda: _conv_model([helper.make_node("Flatten", ["c"], ["y"], axis=2)]),
     r"only Flatten with axis=1"),
    (lambda: _conv_model([helper.make_node("Relu", ["c"], ["r"]), helper.make_node("Add", ["r", "k"], ["y"])],
                         {"k": np.float32(1)}),
     r"adds a constant to a tensor that is not the sole use"),
    (lambda: _conv_model([helper.make_node("Relu", ["c"], ["y"])], in_shape=("N", 1, "H", 6)),
     r"input 'x' has shape \[None, 1, None, 6\]; .* pass input_shape"),
])
def test_unsupported_onnx_is_refused_by_node(build, pattern):
    with pytest.raises(InteropError, match=pattern):
        from_onnx(build())


def test_symbolic_input_sizes_take_input_shape():
    m = _conv_model([helper.make_node("GlobalAveragePool", ["c"], ["y"])], in_shape=("N", 1, "H", "W"),
                    out_shape=["N", 2, 1, 1])
    g = from_onnx(m, input_shape=(6, 6, 1))
    x = batch((6, 6, 1), 2)
    assert rel_err(fe.forward(g, x), ort_run(m, x)) < TOL


def test_files_and_bytes_load(tmp_path):
    m = _conv_model([helper.make_node("GlobalAveragePool", ["c"], ["y"])], out_shape=[1, 2, 1, 1])
    p = tmp_path / "m.onnx"
    p.write_bytes(m.SerializeToString())
    a, b = from_onnx(p), from_onnx(m.SerializeToString())
    assert np.array_equal(a.node("c").params["weight"], b.node("c").params["weight"])
    with pytest.raises(InteropError, match="does not exist"):
        from_onnx(tmp_path / "missing.onnx")
    (tmp_path / "bad.onnx").write_bytes(b"not onnx at all")
    with pytest.raises(InteropError, match="is not a readable ONNX model"):
        from_onnx(tmp_path / "bad.onnx")


def test_missing_onnx_says_pip_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "onnx", None)
    with pytest.raises(ImportError, match="pip install onnx"):
        from_onnx(b"")


def test_hostile_names_are_renamed_deterministically_and_the_originals_kept():
    """Node, tensor, initializer and graph names holding '*/', newlines, code, spaces, unicode."""
    from hostile_onnx import CONV_NAME, FC_NAME, FLAT_OUTPUT, PAYLOAD, hostile_onnx

    from mcutrain.graph import name_problem
    from mcutrain.interop import from_onnx_mapped

    mp = hostile_onnx()
    g, names = from_onnx_mapped(mp)
    assert [n.op for n in g.nodes] == [Op.CONV2D, Op.FLATTEN, Op.LINEAR]   # the relu fused into the conv
    assert all(name_problem(n) is None for n in [g.name, *(n.name for n in g.nodes)])
    assert sorted(names.values()) == sorted([CONV_NAME, FLAT_OUTPUT, FC_NAME])
    assert set(names) == {n.name for n in g.nodes}
    assert names[g.nodes[0].name] == PAYLOAD and "*/" not in g.nodes[0].name and len(g.nodes[2].name) <= 64
    assert from_onnx_mapped(hostile_onnx())[0].to_dict() == g.to_dict()        # deterministic
    x = batch((4, 4, 1))
    assert rel_err(fe.forward(g, x), ort_run(mp, x)) < TOL                    # and still the same model


def test_framework_names_become_dotted_paths():
    from mcutrain.interop.builder import ir_name

    assert ir_name("/features/0/Conv") == "features.0.Conv"
    assert ir_name("0") == "n_0" and ir_name("") == "node" and ir_name(" a  b ") == "a_b"
    assert ir_name("a*/b\nc") == "a_.b_c" and len(ir_name("x" * 300)) == 64
