"""int8 models for the TFLite tests, built here (no TensorFlow): zoo architectures and a
MobileNetV1-0.25-style depthwise-separable net, He-initialized and PTQ-calibrated on uniform
random inputs, so every tensor of the network carries values of both signs."""

from __future__ import annotations

import numpy as np

from mcutrain import graph as G
from mcutrain import zoo
from mcutrain.engines import ptq
from mcutrain.graph import Graph
from mcutrain.qmodel import QuantModel


def mobilenet_v1_025(input_shape=(48, 48, 1), classes: int = 2) -> Graph:
    """MobileNetV1 at width 0.25 (8 channels first), four depthwise-separable blocks, relu6."""
    nodes = [G.conv2d("conv0", "input", 8, 3, stride=2, padding=(0, 1, 0, 1), act="relu6",
                      in_channels=input_shape[2])]
    x, c = "conv0", 8
    for i, (out, stride) in enumerate([(16, 1), (32, 2), (32, 1), (64, 2)]):
        pad = (1, 1, 1, 1) if stride == 1 else (0, 1, 0, 1)
        nodes.append(G.conv2d(f"dw{i}", x, c, 3, stride=stride, padding=pad, groups=c, act="relu6",
                              in_channels=c))
        nodes.append(G.conv2d(f"pw{i}", f"dw{i}", out, 1, act="relu6", in_channels=c))
        x, c = f"pw{i}", out
    nodes += [G.global_avgpool("pool", x), G.flatten("flat", "pool"),
              G.linear("fc", "flat", classes, in_features=c)]
    return Graph(input_shape, nodes, "mobilenet_v1_025")


MODELS = {"digits-cnn": lambda: zoo.build("digits-cnn"), "small-cnn": lambda: zoo.build("small-cnn"),
          "mnist1d-cnn": lambda: zoo.build("mnist1d-cnn"),
          "mcunet-5fps": lambda: zoo.build("mcunet-5fps", input_shape=(32, 32, 3)),
          "mobilenet-v1-0.25": mobilenet_v1_025}


def quant_model(name: str, seed: int = 0) -> QuantModel:
    g = zoo.he_init(MODELS[name](), seed=seed)
    x = np.random.default_rng(seed).uniform(-1, 1, (256, *g.input_shape)).astype(np.float32)
    return ptq.quantize_model(g, x)
