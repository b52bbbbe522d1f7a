"""Reference architectures, each built as a Graph with seeded initialization.

`digits-cnn` (8x8x1) is the always-available model; `small-cnn` (28x28x1,
four trainable layers) is the scale of the FQT seed's from-scratch CNN;
`mnist1d-cnn` is a 1-D CNN (length-40 signals as height-1 images);
`mcunet-5fps` is rebuilt from its published layer shapes with configurable
input size and classes (layers `stem`, `blocks.{i}.pw1|dw|pw2`, `head`);
`mobilenet-v1-0.25` is the depthwise-separable person detector of TFLite Micro's examples.
"""

from __future__ import annotations

import json
from importlib import resources

import numpy as np

from mcutrain import graph as G
from mcutrain.graph import Graph, Node


def he_init(graph: Graph, seed: int = 0) -> Graph:
    """Fill every weight with He-normal values (fan-in) and zero biases, in place."""
    rng = np.random.default_rng(seed)
    for n in graph.parametric():
        w = n.params["weight"]
        fan_in = int(np.prod(w.shape[1:]))
        n.params["weight"] = (rng.standard_normal(w.shape) * np.sqrt(2.0 / fan_in)).astype(np.float32)
        n.params["bias"] = np.zeros_like(n.params["bias"], dtype=np.float32)
    return graph


def digits_cnn(num_classes: int = 10, input_shape=(8, 8, 1)) -> Graph:
    h, w, c = input_shape
    nodes = [
        G.conv2d("conv1", G.INPUT, 16, 3, padding=1, act="relu", in_channels=c),
        G.conv2d("conv2", "conv1", 32, 3, stride=2, padding=1, act="relu", in_channels=16),
        G.flatten("flatten", "conv2"),
        G.linear("fc", "flatten", num_classes, in_features=((h + 1) // 2) * ((w + 1) // 2) * 32),
    ]
    return Graph(input_shape, nodes, "digits-cnn")


def small_cnn(num_classes: int = 10, input_shape=(28, 28, 1)) -> Graph:
    h, w, c = input_shape
    nodes = [
        G.conv2d("conv1", G.INPUT, 16, 3, padding=1, act="relu", in_channels=c),
        G.maxpool("pool1", "conv1", 2),
        G.conv2d("conv2", "pool1", 32, 3, padding=1, act="relu", in_channels=16),
        G.maxpool("pool2", "conv2", 2),
        G.flatten("flatten", "pool2"),
        G.linear("fc1", "flatten", 64, act="relu", in_features=(h // 4) * (w // 4) * 32),
        G.linear("fc2", "fc1", num_classes, in_features=64),
    ]
    return Graph(input_shape, nodes, "small-cnn")


def mnist1d_cnn(num_classes: int = 10, input_shape=(1, 40, 1)) -> Graph:
    _, length, c = input_shape
    l2 = (length - 1) // 2 + 1
    l3 = (l2 - 1) // 2 + 1
    nodes = [
        G.conv2d("conv1", G.INPUT, 16, (1, 5), padding=(0, 2), act="relu", in_channels=c),
        G.conv2d("conv2", "conv1", 32, (1, 3), stride=(1, 2), padding=(0, 1), act="relu", in_channels=16),
        G.conv2d("conv3", "conv2", 32, (1, 3), stride=(1, 2), padding=(0, 1), act="relu", in_channels=32),
        G.flatten("flatten", "conv3"),
        G.linear("fc", "flatten", num_classes, in_features=l3 * 32),
    ]
    assert l3 >= 1
    return Graph(input_shape, nodes, "mnist1d-cnn")


def _mcunet_spec() -> dict:
    text = resources.files("mcutrain").joinpath("zoo_data/mcunet-5fps.json").read_text()
    return json.loads(text)


def mcunet_5fps(num_classes: int = 10, input_shape=(128, 128, 3)) -> Graph:
    """MCUNet-5FPS: stem, 14 inverted-residual blocks, global pool, linear head.

    ReLU6 after the stem, each block's pw1 and dw; pw2 is linear (the
    MobileNetV2 bottleneck); residual adds where the published spec says so.
    """
    spec = _mcunet_spec()
    fc = spec["first_conv"]
    k = fc["kernel_size"][0]
    nodes: list[Node] = [G.conv2d("stem", G.INPUT, fc["out_channel"], k, stride=fc["stride"],
                                  padding=k // 2, act="relu6", in_channels=input_shape[2])]
    x, c = "stem", fc["out_channel"]
    for i, b in enumerate(spec["blocks"]):
        block_in = x
        p = f"blocks.{i}"
        if b["pointwise1"] is not None:
            mid = b["pointwise1"]["out_channel"]
            nodes.append(G.conv2d(f"{p}.pw1", x, mid, 1, act="relu6", in_channels=c))
            x, c = f"{p}.pw1", mid
        dw = b["depthwise"]
        k = dw["kernel_size"][0]
        nodes.append(G.conv2d(f"{p}.dw", x, c, k, stride=dw["stride"], padding=k // 2, groups=c,
                              act="relu6", in_channels=c))
        x = f"{p}.dw"
        out = b["pointwise2"]["out_channel"]
        nodes.append(G.conv2d(f"{p}.pw2", x, out, 1, in_channels=c))
        x, c = f"{p}.pw2", out
        if b["residual"]:
            nodes.append(G.add(f"{p}.add", block_in, x))
            x = f"{p}.add"
    nodes += [G.global_avgpool("pool", x), G.flatten("flatten", "pool"),
              G.linear("head", "flatten", num_classes, in_features=c)]
    return Graph(input_shape, nodes, "mcunet-5fps")


def mobilenet_v1_025(num_classes: int = 2, input_shape=(96, 96, 1)) -> Graph:
    """MobileNetV1 at width 0.25 (8 channels first), four depthwise-separable blocks, relu6: the
    shape of TFLite Micro's person-detection example, the network its users deploy most."""
    nodes = [G.conv2d("conv0", G.INPUT, 8, 3, stride=2, padding=(0, 1, 0, 1), act="relu6",
                      in_channels=input_shape[2])]
    x, c = "conv0", 8
    for i, (out, stride) in enumerate([(16, 1), (32, 2), (32, 1), (64, 2)]):
        pad = (1, 1, 1, 1) if stride == 1 else (0, 1, 0, 1)
        nodes.append(G.conv2d(f"dw{i}", x, c, 3, stride=stride, padding=pad, groups=c, act="relu6",
                              in_channels=c))
        nodes.append(G.conv2d(f"pw{i}", f"dw{i}", out, 1, act="relu6", in_channels=c))
        x, c = f"pw{i}", out
    nodes += [G.global_avgpool("pool", x), G.flatten("flat", "pool"),
              G.linear("fc", "flat", num_classes, in_features=c)]
    return Graph(input_shape, nodes, "mobilenet-v1-0.25")


ARCHS = {
    "digits-cnn": (digits_cnn, (8, 8, 1)),
    "small-cnn": (small_cnn, (28, 28, 1)),
    "mnist1d-cnn": (mnist1d_cnn, (1, 40, 1)),
    "mcunet-5fps": (mcunet_5fps, (128, 128, 3)),
    "mobilenet-v1-0.25": (mobilenet_v1_025, (96, 96, 1)),
}


def build(arch: str, num_classes: int = 10, input_shape: tuple[int, ...] | None = None,
          seed: int = 0) -> Graph:
    """Build architecture `arch` with He-initialized weights from `seed`.

    >>> build("digits-cnn").total_macs()
    88064
    """
    if arch not in ARCHS:
        raise ValueError(f"unknown architecture '{arch}'; available: {', '.join(ARCHS)}")
    make, default_shape = ARCHS[arch]
    return he_init(make(num_classes, tuple(input_shape or default_shape)), seed)
