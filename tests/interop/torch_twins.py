"""PyTorch twins of the zoo models and a torchvision-style MobileNetV2, for the interop tests.

The zoo twins are written the way a PyTorch user would write them (modules,
functional calls, `x.view(x.size(0), -1)`), each in a different style, so
tracing covers the common idioms. `load_zoo_weights` copies a zoo graph's
weights into its twin (OHWI -> OIHW; the first linear's columns HWC -> CHW),
so an import must give back the zoo graph exactly. `GraphTwin` builds any IR
graph (MCUNet) as a module with the same forward pass.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from mcutrain.graph import INPUT, Graph, Op
from mcutrain.interop.builder import hwc_to_chw_columns


class DigitsCNN(nn.Module):
    """zoo digits-cnn as nn.Sequential, with module activations."""

    def __init__(self, num_classes: int = 10):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(),
                                      nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.ReLU())
        self.flatten = nn.Flatten()
        self.fc = nn.Linear(4 * 4 * 32, num_classes)

    def forward(self, x):
        return self.fc(self.flatten(self.features(x)))


class SmallCNN(nn.Module):
    """zoo small-cnn in the functional style: F.relu, F.max_pool2d, torch.flatten."""

    def __init__(self, num_classes: int = 10):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.fc1 = nn.Linear(7 * 7 * 32, 64)
        self.fc2 = nn.Linear(64, num_classes)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(torch.relu(self.conv2(x)), kernel_size=2, stride=2)
        x = torch.flatten(x, 1)
        return self.fc2(F.relu(self.fc1(x)))


class Mnist1dCNN(nn.Module):
    """zoo mnist1d-cnn: height-1 Conv2d kernels, Tensor.relu and reshape(size(0), -1)."""

    def __init__(self, num_classes: int = 10):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, (1, 5), padding=(0, 2))
        self.conv2 = nn.Conv2d(16, 32, (1, 3), stride=(1, 2), padding=(0, 1))
        self.conv3 = nn.Conv2d(32, 32, (1, 3), stride=(1, 2), padding=(0, 1))
        self.fc = nn.Linear(10 * 32, num_classes)

    def forward(self, x):
        x = self.conv3(self.conv2(self.conv1(x).relu()).relu()).relu()
        return self.fc(x.reshape(x.size(0), -1))


class GraphTwin(nn.Module):
    """Any IR graph as a module: convs and linears in a ModuleDict, the rest functional."""

    def __init__(self, graph: Graph):
        super().__init__()
        self.layers = nn.ModuleDict()
        self.spec = [(n.name, n.op, list(n.inputs), dict(n.attrs)) for n in graph.nodes]
        for n in graph.parametric():
            w = n.params["weight"]
            if n.op == Op.CONV2D:
                pt, _, pl, _ = n.attrs["padding"]
                cin = graph.shape(n.inputs[0])[2]
                m = nn.Conv2d(cin, w.shape[0], n.attrs["kernel"], n.attrs["stride"], (pt, pl),
                              groups=n.attrs["groups"])
            else:
                m = nn.Linear(w.shape[1], w.shape[0])
            self.layers[key(n.name)] = m

    def forward(self, x):
        t = {INPUT: x}
        for name, op, inputs, a in self.spec:
            y = t[inputs[0]]
            if op in (Op.CONV2D, Op.LINEAR):
                y = self.layers[key(name)](y)
            elif op == Op.MAXPOOL:
                y = F.max_pool2d(y, a["kernel"], a["stride"])
            elif op == Op.AVGPOOL:
                y = F.avg_pool2d(y, a["kernel"], a["stride"])
            elif op == Op.GLOBAL_AVGPOOL:
                y = F.adaptive_avg_pool2d(y, 1)
            elif op == Op.FLATTEN:
                y = torch.flatten(y, 1)
            elif op == Op.ADD:
                y = y + t[inputs[1]]
            act = "relu" if op == Op.RELU else "relu6" if op == Op.RELU6 else a.get("act", "none")
            y = F.relu(y) if act == "relu" else F.relu6(y) if act == "relu6" else y
            t[name] = y
        return t[self.spec[-1][0]]


def key(name: str) -> str:
    return name.replace(".", "_")


def _set(p: nn.Parameter, a: np.ndarray) -> None:
    with torch.no_grad():
        p.copy_(torch.from_numpy(np.ascontiguousarray(a)))


def load_zoo_weights(module: nn.Module, graph: Graph) -> nn.Module:
    """Copy the graph's weights into the twin's conv/linear layers, in order."""
    layers = [m for m in module.modules() if isinstance(m, (nn.Conv2d, nn.Linear))]
    nodes = graph.parametric()
    assert len(layers) == len(nodes)
    for m, n in zip(layers, nodes):
        w = n.params["weight"]
        if n.op == Op.CONV2D:
            w = w.transpose(0, 3, 1, 2)
        else:
            src = graph.node(n.inputs[0])
            shape = graph.shape(src.inputs[0]) if src.op == Op.FLATTEN else ()
            if len(shape) == 3:
                w = hwc_to_chw_columns(w, shape)
        _set(m.weight, w)
        _set(m.bias, n.params["bias"])
    return module.eval()


# ---------------------------------------------------------------- MobileNetV2 (torchvision style)


class ConvBNActivation(nn.Sequential):
    """torchvision's Conv2dNormActivation: conv without bias, BatchNorm2d, ReLU6."""

    def __init__(self, inp: int, oup: int, kernel: int = 3, stride: int = 1, groups: int = 1):
        super().__init__(nn.Conv2d(inp, oup, kernel, stride, (kernel - 1) // 2, groups=groups, bias=False),
                         nn.BatchNorm2d(oup), nn.ReLU6(inplace=True))


class InvertedResidual(nn.Module):
    """torchvision.models.mobilenetv2.InvertedResidual (Sandler et al., CVPR 2018)."""

    def __init__(self, inp: int, oup: int, stride: int, expand_ratio: int):
        super().__init__()
        hidden = inp * expand_ratio
        self.use_res_connect = stride == 1 and inp == oup
        layers: list[nn.Module] = []
        if expand_ratio != 1:
            layers.append(ConvBNActivation(inp, hidden, kernel=1))
        layers += [ConvBNActivation(hidden, hidden, stride=stride, groups=hidden),
                   nn.Conv2d(hidden, oup, 1, 1, 0, bias=False), nn.BatchNorm2d(oup)]
        self.conv = nn.Sequential(*layers)

    def forward(self, x):
        if self.use_res_connect:
            return x + self.conv(x)
        return self.conv(x)


class TinyMobileNetV2(nn.Module):
    """A MobileNetV2 with torchvision's structure and fewer blocks: 4 of its 7 have residuals."""

    def __init__(self, num_classes: int = 10):
        super().__init__()
        cfg = [(16, 1, 1), (24, 2, 6), (24, 1, 6), (32, 2, 6), (32, 1, 6), (32, 1, 6), (48, 1, 6)]
        layers: list[nn.Module] = [ConvBNActivation(3, 16, stride=2)]
        c = 16
        for out, stride, t in cfg:
            layers.append(InvertedResidual(c, out, stride, t))
            c = out
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(c, num_classes))

    def forward(self, x):
        x = self.features(x)
        x = F.adaptive_avg_pool2d(x, (1, 1))
        x = torch.flatten(x, 1)
        return self.classifier(x)


def randomize_batchnorm(module: nn.Module, seed: int = 0) -> nn.Module:
    """Give every BatchNorm non-trivial statistics and affine parameters, so folding is tested."""
    g = torch.Generator().manual_seed(seed)
    for m in module.modules():
        if isinstance(m, (nn.BatchNorm2d, nn.BatchNorm1d)):
            c = m.num_features
            m.running_mean.copy_(torch.randn(c, generator=g) * 0.3)
            m.running_var.copy_(torch.rand(c, generator=g) + 0.5)
            if m.affine:
                with torch.no_grad():
                    m.weight.copy_(torch.rand(c, generator=g) + 0.5)
                    m.bias.copy_(torch.randn(c, generator=g) * 0.2)
    return module.eval()


def torch_logits(module: nn.Module, x_nhwc: np.ndarray) -> np.ndarray:
    """The module's output for an NHWC float batch, as (N, K) numpy."""
    xt = torch.from_numpy(np.ascontiguousarray(x_nhwc.transpose(0, 3, 1, 2)))
    with torch.no_grad():
        return module.eval()(xt).reshape(len(x_nhwc), -1).numpy()
