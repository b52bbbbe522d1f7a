"""int8 models for the TFLite tests, built here (no TensorFlow): zoo architectures and a
MobileNetV1-0.25-style depthwise-separable net, He-initialized and PTQ-calibrated on uniform
random inputs, so every tensor of the network carries values of both signs."""

from __future__ import annotations

import numpy as np

from mcutrain import zoo
from mcutrain.engines import ptq
from mcutrain.qmodel import QuantModel

MODELS = {"digits-cnn": lambda: zoo.build("digits-cnn"), "small-cnn": lambda: zoo.build("small-cnn"),
          "mnist1d-cnn": lambda: zoo.build("mnist1d-cnn"),
          "mcunet-5fps": lambda: zoo.build("mcunet-5fps", input_shape=(32, 32, 3)),
          "mobilenet-v1-0.25": lambda: zoo.build("mobilenet-v1-0.25", 2, (48, 48, 1))}


def quant_model(name: str, seed: int = 0) -> QuantModel:
    g = zoo.he_init(MODELS[name](), seed=seed)
    x = np.random.default_rng(seed).uniform(-1, 1, (256, *g.input_shape)).astype(np.float32)
    return ptq.quantize_model(g, x)
