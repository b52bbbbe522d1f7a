"""from_torch: zoo twins come back as the zoo graphs, logits equal torch's, refusals name the layer."""

from __future__ import annotations

import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402
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
from mcutrain.interop import InteropError, from_torch  # noqa: E402

TOL = 1e-5
"""Float tolerance of the logits, relative to the largest logit: float32 sums in another order."""


def rel_err(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-6))


def batch(shape, n: int = 6, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).random((n, *shape), dtype=np.float32)


ZOO_TWINS = {
    "digits-cnn": (DigitsCNN, None),
    "small-cnn": (SmallCNN, None),
    "mnist1d-cnn": (Mnist1dCNN, None),
    "mcunet-5fps": (None, (32, 32, 3)),
}


@pytest.mark.parametrize("arch", list(ZOO_TWINS))
def test_zoo_twin_imports_as_the_zoo_graph(arch):
    make, shape = ZOO_TWINS[arch]
    g = zoo.build(arch, input_shape=shape, seed=3)
    twin = load_zoo_weights(make() if make else GraphTwin(g), g)
    got = from_torch(twin, g.input_shape)
    assert [(n.op, n.attrs) for n in got.nodes] == [(n.op, n.attrs) for n in g.nodes]
    for a, b in zip(got.nodes, g.nodes):
        for k in b.params:
            np.testing.assert_array_equal(a.params[k], b.params[k], err_msg=f"{arch} {b.name}.{k}")
    x = batch(g.input_shape)
    assert rel_err(fe.forward(got, x), torch_logits(twin, x)) < TOL


def test_module_paths_become_node_names():
    g = from_torch(DigitsCNN().eval(), (8, 8, 1))
    assert [n.name for n in g.nodes] == ["features.0", "features.2", "flatten", "fc"]
    assert [n.act for n in g.nodes] == ["relu", "relu", "none", "none"]


def test_mobilenetv2_blocks_fold_batchnorm_and_keep_residuals():
    torch.manual_seed(0)
    net = randomize_batchnorm(TinyMobileNetV2())
    g = from_torch(net, (32, 32, 3), name="mbv2")
    ops = [n.op for n in g.nodes]
    assert Op.BATCHNORM not in ops and Op.RELU6 not in ops
    assert ops.count(Op.ADD) == 4
    assert ops.count(Op.CONV2D) == 1 + 2 + 6 * 3
    dw = [n for n in g.nodes if n.op == Op.CONV2D and n.attrs["groups"] > 1]
    assert len(dw) == 7 and all(n.act == "relu6" for n in dw)
    assert g.node("features.1.conv.0.0").attrs["groups"] == 16
    x = batch((32, 32, 3), n=4)
    assert rel_err(fe.forward(g, x), torch_logits(net, x)) < TOL


class Functional(nn.Module):
    """Every supported functional / method spelling, 'same' padding, BatchNorm1d after a Linear."""

    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(2, 8, 3, padding="same")
        self.c2 = nn.Conv2d(8, 8, 4, padding="same", groups=4)
        self.c3 = nn.Conv2d(8, 8, 1, padding="valid")
        self.act = nn.Hardtanh(0.0, 6.0)
        self.pool = nn.AdaptiveAvgPool2d(4)
        self.avg = nn.AvgPool2d(2)
        self.fc = nn.Linear(8 * 2 * 2, 12)
        self.fc2 = nn.Linear(8 * 2 * 2, 12)
        self.zfc = nn.Linear(8, 12)
        self.bn = nn.BatchNorm1d(12)
        self.head = nn.Sequential(nn.Identity(), nn.Dropout(0.5), nn.Linear(12, 5))

    def forward(self, x):
        a = F.relu6(self.c1(x))
        b = self.act(self.c2(a))
        y = torch.add(a, b)
        y = y.add(self.c3(y).relu())
        y += F.hardtanh(y, 0.0, 6.0)
        y = torch.clamp(F.avg_pool2d(self.pool(y), 2, 1), 0, 6)   # 8 -> 4 -> 3
        y = F.max_pool2d(y, 2, 1)                                  # 3 -> 2
        z = y.mean((2, 3))                                         # (8,)
        y = F.relu(self.bn(self.fc(y.reshape(y.size(0), -1)))) + self.fc2(torch.flatten(y, 1))
        y = y + self.zfc(z)
        return self.head(y)


@pytest.mark.filterwarnings("ignore:Using padding='same' with even kernel")
def test_functional_forms_and_same_padding():
    torch.manual_seed(1)
    net = randomize_batchnorm(Functional())
    g = from_torch(net, torch.zeros(2, 2, 8, 8))
    assert g.input_shape == (8, 8, 2)
    assert g.node("c1").attrs["padding"] == (1, 1, 1, 1)
    assert g.node("c2").attrs["padding"] == (1, 2, 1, 2)  # torch puts the extra pixel at the end
    assert g.node("pool").op == Op.AVGPOOL and g.node("pool").attrs["kernel"] == (2, 2)
    assert Op.BATCHNORM not in [n.op for n in g.nodes]
    x = batch((8, 8, 2))
    assert rel_err(fe.forward(g, x), torch_logits(net, x)) < TOL


def test_example_batch_and_shape_tuple_agree_and_module_is_untouched():
    net = randomize_batchnorm(nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(),
                                            nn.Flatten(), nn.Linear(4 * 3 * 4, 2)))
    net.train()
    before = {k: v.clone() for k, v in net.state_dict().items()}
    a = from_torch(net, (5, 6, 3))
    b = from_torch(net, np.zeros((1, 3, 5, 6), np.float32))
    assert a.input_shape == b.input_shape == (5, 6, 3)
    for p, q in zip(a.nodes, b.nodes):
        assert np.array_equal(p.params.get("weight"), q.params.get("weight"))
    assert net.training
    assert all(torch.equal(before[k], v) for k, v in net.state_dict().items())
    x = batch((5, 6, 3))
    assert rel_err(fe.forward(a, x), torch_logits(net, x)) < TOL  # what eval() computes


def test_mlp_on_flat_input():
    net = nn.Sequential(nn.Linear(20, 16), nn.ReLU6(), nn.Linear(16, 3))
    g = from_torch(net, (20,))
    x = np.random.default_rng(0).random((4, 20), dtype=np.float32)
    with torch.no_grad():
        ref = net(torch.from_numpy(x)).numpy()
    assert rel_err(fe.forward(g, x), ref) < TOL


def test_ceil_mode_is_accepted_only_where_it_changes_nothing():
    ok = nn.Sequential(nn.Conv2d(1, 2, 3, padding=1), nn.MaxPool2d(2, ceil_mode=True), nn.Flatten(),
                       nn.Linear(2 * 4 * 4, 3))
    assert from_torch(ok, (8, 8, 1)).node("n_1").op == Op.MAXPOOL   # Sequential "1" renamed
    with pytest.raises(InteropError, match=r"module '1' \(MaxPool2d\): ceil_mode=True .* 7x7"):
        from_torch(ok, (7, 7, 1))


def _seq(*layers):
    return nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), *layers)


@pytest.mark.parametrize("layers, pattern", [
    ((nn.Conv2d(4, 4, 3, dilation=2),), r"module '1' \(Conv2d\): dilation \(2, 2\) is not supported"),
    ((nn.Conv2d(4, 4, 3, padding=1, padding_mode="reflect"),), r"padding_mode 'reflect'"),
    ((nn.MaxPool2d(2, padding=1),), r"module '1' \(MaxPool2d\): padding 1 is not supported"),
    ((nn.MaxPool2d(2, dilation=2),), r"dilation 2 is not supported"),
    ((nn.AvgPool2d(2, padding=1),), r"module '1' \(AvgPool2d\): padding 1"),
    ((nn.AdaptiveAvgPool2d(3),), r"8x8 to 3x3 has unequal windows"),
    ((nn.Flatten(0),), r"only flatten\(start_dim=1"),
    ((nn.BatchNorm2d(4, track_running_stats=False),), r"no running statistics"),
    ((nn.ReLU(), nn.BatchNorm2d(4), nn.AdaptiveAvgPool2d(1), nn.Flatten()), r"BatchNorm can only be folded"),
    ((nn.Flatten(), nn.Conv2d(4, 4, 1)), r"module '2' \(Conv2d\) needs a \(C, H, W\) feature map"),
    ((nn.Linear(8, 3),), r"module '1' \(Linear\) needs a flat input; insert a Flatten"),
    ((nn.ReLU(),), r"output is a feature map of shape \(8, 8, 4\)"),
])
def test_unsupported_configurations_are_refused_by_name(layers, pattern):
    with pytest.raises(InteropError, match=pattern):
        from_torch(_seq(*layers), (8, 8, 1))


def test_unsupported_layer_names_path_type_and_the_supported_list():
    net = nn.Sequential()
    net.add_module("body", nn.Sequential(nn.Conv2d(1, 2, 3), nn.ReLU(), nn.Sigmoid()))
    with pytest.raises(InteropError) as e:
        from_torch(net, (8, 8, 1))
    msg = str(e.value)
    assert "module 'body.2' (Sigmoid) is not supported" in msg
    assert "supported modules: Conv2d" in msg and "BatchNorm2d" in msg and "F.relu" in msg


class _Mul(nn.Module):
    def forward(self, x):
        return torch.flatten(x * 2, 1)


class _TwoOut(nn.Module):
    def forward(self, x):
        return torch.flatten(x, 1), x


class _AddConst(nn.Module):
    def forward(self, x):
        return torch.flatten(x + 1.0, 1)


class _Branchy(nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            return x
        return x


@pytest.mark.parametrize("net, pattern", [
    (_Mul(), r"call 'mul' \(mul\) is not supported; supported modules"),
    (_TwoOut(), r"returns several values"),
    (_AddConst(), r"adds a constant \(1.0\)"),
    (_Branchy(), r"torch.fx could not trace _Branchy"),
    ("not a module", r"needs a torch.nn.Module, got str"),
])
def test_untraceable_or_unsupported_forward_is_refused(net, pattern):
    with pytest.raises(InteropError, match=pattern):
        from_torch(net, (4, 4, 1))


def test_bad_input_shape_is_refused():
    with pytest.raises(InteropError, match=r"must be the per-sample NHWC shape"):
        from_torch(DigitsCNN(), (1, 8, 8, 1))
    with pytest.raises(InteropError, match=r"pass a batch \(N, C, H, W\), \(N, C, L\) or \(N, F\)"):
        from_torch(DigitsCNN(), torch.zeros(1, 1, 8, 8, 1))


class Imu1d(nn.Module):
    """Conv1d (plain, strided 'valid', depthwise, 'same'), BatchNorm1d, MaxPool1d, AvgPool1d,
    AdaptiveAvgPool1d(1) and a Flatten of a (C, L) map into a Linear."""

    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv1d(6, 8, 5, padding=2)
        self.bn = nn.BatchNorm1d(8)
        self.pool = nn.MaxPool1d(2)
        self.c2 = nn.Conv1d(8, 8, 3, stride=2, padding="valid", groups=8)
        self.c3 = nn.Conv1d(8, 12, 4, padding="same", bias=False)
        self.avg = nn.AvgPool1d(2)
        self.gap = nn.AdaptiveAvgPool1d(1)
        self.fc, self.fc2 = nn.Linear(12, 4), nn.Linear(12 * 3, 4)

    def forward(self, x):
        y = self.pool(F.relu(self.bn(self.c1(x))))             # L 32 -> 16
        y = self.avg(F.relu6(self.c3(self.c2(y))))             # 16 -> 7 -> 7 -> 3
        return self.fc(torch.flatten(self.gap(y), 1)) + self.fc2(torch.flatten(y, 1))


@pytest.mark.filterwarnings("ignore:Using padding='same' with even kernel")
def test_conv1d_nets_import_as_height_one_maps():
    torch.manual_seed(2)
    net = randomize_batchnorm(Imu1d())
    g = from_torch(net, torch.zeros(2, 6, 32))
    assert g.input_shape == (1, 32, 6)
    assert g.node("c2").attrs["kernel"] == (1, 3) and g.node("c2").attrs["groups"] == 8
    assert g.node("c3").attrs["padding"] == (0, 0, 1, 2)
    assert g.shape("avg") == (1, 3, 12) and g.node("gap").op == Op.GLOBAL_AVGPOOL
    x = np.random.default_rng(0).standard_normal((5, 32, 6)).astype(np.float32)
    with torch.no_grad():
        ref = net(torch.from_numpy(np.ascontiguousarray(x.transpose(0, 2, 1)))).numpy()
    assert rel_err(fe.forward(g, x[:, None]), ref) < TOL


def test_a_1d_layer_on_a_2d_map_is_refused():
    net = nn.Sequential(nn.Conv2d(1, 4, 3), nn.Conv1d(4, 4, 3))
    with pytest.raises(InteropError, match=r"module '1' \(Conv1d\) reads a 1-D signal .* \(6, 6, 4\)"):
        from_torch(net, (8, 8, 1))
    with pytest.raises(InteropError, match=r"module '0' \(MaxPool1d\) reads a 1-D signal"):
        from_torch(nn.Sequential(nn.MaxPool1d(2), nn.Flatten()), (4, 4, 2))


def test_missing_torch_says_pip_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(ImportError, match="pip install torch"):
        from_torch(object(), (8, 8, 1))


def test_module_names_outside_the_rule_are_renamed_and_the_originals_kept():
    """torch refuses '.' and '' in module names but takes '*/', spaces, unicode and any length
    (a newline breaks torch.fx's own code generation before mcutrain sees the name)."""
    from mcutrain.graph import name_problem
    from mcutrain.interop import from_torch_mapped

    originals = ["c */ int y; /*", "0", "\u00fcber", "fc" * 40]
    m = nn.Sequential()
    for name, layer in zip(originals, [nn.Conv2d(1, 2, 3, padding=1), nn.ReLU(), nn.Flatten(),
                                       nn.Linear(32, 3)]):
        m.add_module(name, layer)
    g, names = from_torch_mapped(m, (4, 4, 1))
    assert all(name_problem(n.name) is None for n in g.nodes)
    assert "*/" not in "".join(n.name for n in g.nodes)
    assert names == dict(zip([n.name for n in g.nodes], [originals[0], originals[2], originals[3]]))
    x = batch((4, 4, 1))
    assert rel_err(fe.forward(g, x), torch_logits(m, x)) < 1e-5
