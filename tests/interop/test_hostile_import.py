"""Hostile or broken ONNX / PyTorch models: every case is an InteropError naming the layer, never a
traceback, and NaN weights or broken BatchNorm statistics are never written silently."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from mcutrain.cli import main  # noqa: E402
from mcutrain.interop import InteropError, from_onnx  # noqa: E402

C, H = 4, 8


def _model(w=None, b=None, bn=None, eps=1e-5, conv_attrs=None, fc_w=None, input_dims=(1, 1, H, H),
           extra_nodes=(), pool=None, outputs=("y",)) -> onnx.ModelProto:
    """Conv -> BatchNormalization -> Relu [-> pool] -> Flatten -> Gemm, with any part overridden."""
    rng = np.random.default_rng(0)
    w = rng.standard_normal((C, 1, 3, 3)).astype(np.float32) if w is None else w
    b = np.zeros(C, np.float32) if b is None else b
    g, be, mu, var = bn or (np.ones(C), np.zeros(C), np.zeros(C), np.ones(C))
    side = H // 2 if pool else H
    fc_w = rng.standard_normal((10, C * side * side)).astype(np.float32) if fc_w is None else fc_w
    inits = [numpy_helper.from_array(np.asarray(a), n) for a, n in
             [(w, "w"), (b, "b"), (np.asarray(g, np.float32), "g"), (np.asarray(be, np.float32), "be"),
              (np.asarray(mu, np.float32), "mu"), (np.asarray(var, np.float32), "var"), (fc_w, "fw")]]
    attrs = {"pads": [1, 1, 1, 1], **(conv_attrs or {})}
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", **attrs),
             helper.make_node("BatchNormalization", ["c", "g", "be", "mu", "var"], ["n"], name="bn",
                              epsilon=eps),
             helper.make_node("Relu", ["n"], ["r"], name="relu")]
    last = "r"
    if pool:
        nodes.append(helper.make_node("MaxPool", ["r"], ["p"], name="pool", **pool))
        last = "p"
    nodes += [helper.make_node("Flatten", [last], ["f"], name="flat"),
              helper.make_node("Gemm", ["f", "fw"], ["y"], name="fc", transB=1), *extra_nodes]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, list(input_dims))
    ys = [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs]
    return helper.make_model(helper.make_graph(nodes, "hostile", [x], ys, inits))


def _nan(shape, where=0, value=np.nan):
    a = np.ones(shape, np.float32)
    a.reshape(-1)[where] = value
    return a


ONNX_CASES = {
    "conv weight NaN": (lambda: _model(w=_nan((C, 1, 3, 3))), "ONNX node 'conv'"),
    "conv weight inf": (lambda: _model(w=_nan((C, 1, 3, 3), 5, np.inf)), "ONNX node 'conv'"),
    "conv bias NaN": (lambda: _model(b=_nan(C)), "ONNX node 'conv'"),
    "conv weight beyond float32": (lambda: _model(w=np.full((C, 1, 3, 3), 1e300)), "NaN or infinite"),
    "gemm weight NaN": (lambda: _model(fc_w=_nan((10, C * H * H), 7)), "ONNX node 'fc'"),
    "gemm alpha inf": (lambda: _alpha_inf(), "ONNX node 'fc'"),
    "bn negative variance": (lambda: _model(bn=(np.ones(C), np.zeros(C), np.zeros(C), -np.ones(C))),
                             "ONNX node 'bn'"),
    "bn var + eps = 0": (lambda: _model(bn=(np.ones(C), np.zeros(C), np.zeros(C), np.zeros(C)), eps=0.0),
                         "var + eps > 0"),
    "bn eps NaN": (lambda: _model(eps=float("nan")), "epsilon"),
    "bn eps negative": (lambda: _model(eps=-1.0), "epsilon"),
    "bn mean inf": (lambda: _model(bn=(np.ones(C), np.zeros(C), _nan(C, 0, np.inf), np.ones(C))), "mean"),
    "bn gamma NaN": (lambda: _model(bn=(_nan(C), np.zeros(C), np.zeros(C), np.ones(C))), "gamma"),
    "bn stats wrong length": (lambda: _model(bn=(np.ones(3), np.zeros(3), np.zeros(3), np.ones(3))), "bn"),
    "group 0": (lambda: _model(conv_attrs={"group": 0}), "groups"),
    "group -1": (lambda: _model(conv_attrs={"group": -1}), "groups"),
    "strides 0": (lambda: _model(conv_attrs={"strides": [0, 0]}), "stride"),
    "strides 3 values": (lambda: _model(conv_attrs={"strides": [1, 1, 1]}), "conv"),
    "pads negative": (lambda: _model(conv_attrs={"pads": [-1, -1, -1, -1]}), "padding"),
    "pads huge": (lambda: _model(conv_attrs={"pads": [10 ** 6] * 4}), "padding"),
    "dilations 0": (lambda: _model(conv_attrs={"dilations": [0, 0]}), "dilations"),
    "input 100000x100000": (lambda: _model(input_dims=(1, 1, 100_000, 100_000)), "input shape"),
    "input zero size": (lambda: _model(input_dims=(1, 1, 0, 8)), "input"),
    "input 5-D": (lambda: _model(input_dims=(1, 1, 1, 8, 8)), "input"),
    "conv weight 3-D": (lambda: _model(w=np.ones((C, 3, 3), np.float32)), "2-D convolutions"),
    "gemm weight 1-D": (lambda: _model(fc_w=np.ones(10, np.float32)), "fc"),
    "gemm weight wrong width": (lambda: _model(fc_w=np.ones((10, 7), np.float32)), "fc"),
    "pool kernel 0": (lambda: _model(pool={"kernel_shape": [0, 0]}), "pool"),
    "pool strides 0": (lambda: _model(pool={"kernel_shape": [2, 2], "strides": [0, 0]}), "pool"),
    "unknown op": (lambda: _model(extra_nodes=[helper.make_node("Softmax", ["y"], ["s"], name="sm")],
                                  outputs=("s",)), "Softmax"),
    "two outputs": (lambda: _model(outputs=("y", "f")), "outputs"),
    "dangling input": (lambda: _model(outputs=("z",), extra_nodes=[
        helper.make_node("Add", ["y", "ghost"], ["z"], name="add")]), "add"),
}


def _alpha_inf() -> onnx.ModelProto:
    m = _model()
    m.graph.node[-1].attribute.append(helper.make_attribute("alpha", float("inf")))
    return m


def _tensor_lies() -> onnx.ModelProto:
    """An initializer whose raw data is shorter than its dims say."""
    m = _model()
    t = m.graph.initializer[0]
    t.raw_data = t.raw_data[:10]
    return m


ONNX_CASES["initializer shorter than its dims"] = (_tensor_lies, "")


@pytest.mark.parametrize("case", sorted(ONNX_CASES))
def test_hostile_onnx_is_refused_with_a_message(case):
    make, word = ONNX_CASES[case]
    with pytest.raises(InteropError) as e:
        from_onnx(make())
    assert word in str(e.value)


def test_the_base_model_imports():
    g = from_onnx(_model())
    assert g.num_classes == 10 and all(np.isfinite(p).all() for p in g.arrays().values())


@pytest.mark.parametrize("blob", [b"", b"\x00" * 64, b"not an onnx model at all", None])
def test_garbage_and_truncated_files_are_error_lines(tmp_path, capsys, blob):
    path = tmp_path / "m.onnx"
    good = _model().SerializeToString()
    path.write_bytes(good[: len(good) // 3] if blob is None else blob)
    assert main(["import", str(path), "-o", str(tmp_path / "m.npz")]) == 1
    err = capsys.readouterr().err
    assert "error:" in err and "Traceback" not in err
    assert not (tmp_path / "m.npz").exists()


def test_a_nan_model_is_never_written(tmp_path, capsys):
    path = tmp_path / "m.onnx"
    path.write_bytes(_model(w=_nan((C, 1, 3, 3))).SerializeToString())
    assert main(["import", str(path), "-o", str(tmp_path / "m.npz")]) == 1
    assert "ONNX node 'conv'" in capsys.readouterr().err and not (tmp_path / "m.npz").exists()


def test_import_output_is_checked_before_converting(tmp_path, capsys):
    path = tmp_path / "m.onnx"
    path.write_bytes(_model().SerializeToString())
    (tmp_path / "out.npz").mkdir()
    assert main(["import", str(path), "-o", str(tmp_path / "out.npz")]) == 1
    assert "is a folder" in capsys.readouterr().err
    assert main(["import", str(path), "-o", str(tmp_path / "m.txt")]) == 1
    assert "must end in .npz" in capsys.readouterr().err


# ---------------------------------------------------------------- PyTorch

def _torch_cases():
    torch = pytest.importorskip("torch")
    nn = torch.nn

    def net(fill=None, bn=None, eps=1e-5):
        m = nn.Sequential(nn.Conv2d(1, C, 3, padding=1), nn.BatchNorm2d(C, eps=eps), nn.ReLU(), nn.Flatten(),
                          nn.Linear(C * H * H, 10)).eval()
        with torch.no_grad():
            if fill is not None:
                fill(m)
            if bn is not None:
                bn(m[1])
        return m

    return {
        "conv weight NaN": (lambda: net(lambda m: m[0].weight.view(-1)[0].fill_(float("nan"))), "module '0'"),
        "conv bias inf": (lambda: net(lambda m: m[0].bias.fill_(float("inf"))), "module '0'"),
        "linear weight NaN": (lambda: net(lambda m: m[4].weight.view(-1)[3].fill_(float("nan"))),
                              "module '4'"),
        "bn negative running_var": (lambda: net(bn=lambda b: b.running_var.fill_(-1.0)), "module '1'"),
        "bn zero var and eps": (lambda: net(bn=lambda b: b.running_var.zero_(), eps=0.0), "var + eps > 0"),
        "bn running_mean NaN": (lambda: net(bn=lambda b: b.running_mean.fill_(float("nan"))), "mean"),
        "bn weight inf": (lambda: net(bn=lambda b: b.weight.fill_(float("inf"))), "gamma"),
    }


@pytest.mark.parametrize("case", ["conv weight NaN", "conv bias inf", "linear weight NaN",
                                  "bn negative running_var", "bn zero var and eps", "bn running_mean NaN",
                                  "bn weight inf"])
def test_hostile_torch_modules_are_refused(case):
    from mcutrain.interop import from_torch
    make, word = _torch_cases()[case]
    with pytest.raises(InteropError) as e:
        from_torch(make(), (H, H, 1))
    assert word in str(e.value)


@pytest.mark.parametrize("shape,word", [((100_000, 100_000, 1), "input shape"), ((0, 8, 1), "input shape"),
                                        ((8, 8), "NHWC")])
def test_absurd_torch_input_shapes_are_refused(shape, word):
    torch = pytest.importorskip("torch")
    from mcutrain.interop import from_torch
    with pytest.raises(InteropError, match=word):
        from_torch(torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(64, 10)), shape)
