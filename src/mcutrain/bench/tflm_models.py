"""Three models built in PyTorch the way TFLite Micro users' models look, brought into mcutrain.

Each goes the path of a PyTorch user's model: `nn.Module` -> `interop.from_torch` (BatchNorm
folded, activations fused) -> PTQ (`engines.ptq`, minmax, `tflite` rounding) -> `.tflite`
(`interop.tflite_export`). `build(name)` returns all three stages (`UserModel`), so the TFLM
benchmark and the tests (and later the generated C) start from the same model.

- `person-detector`: MobileNetV1 at width 0.25 on 96x96x1, the full 13 depthwise-separable
  blocks (8 -> 256 channels, BatchNorm + ReLU6), global average pool, 2 classes: the
  network of TFLM's person-detection example. torch pads its stride-2 3x3 convs (1, 1), not
  TensorFlow's SAME (0, 1), so these are exported as PAD + VALID conv, as a torch-converted
  model has them.
- `ds-cnn-kws`: the DS-CNN keyword spotter of Zhang et al., "Hello Edge: Keyword Spotting on
  Microcontrollers" (arXiv:1711.07128, ARM-software/ML-KWS-for-MCU), in the form of the MLPerf
  Tiny reference (mlcommons/tiny, benchmark/training/keyword_spotting/keras_model.py): 49x10x1
  MFCCs, Conv 10x4 stride 2 with 64 filters, four depthwise-separable blocks of 64 (3x3
  depthwise, 1x1 pointwise, BatchNorm + ReLU each), average pool over the 25x5 map, FC to 12
  classes. Keras pads the first conv SAME (4, 5 | 1, 1); the torch form pads (5 | 1)
  symmetrically, which gives the same 25x5 map and is exported as PAD + VALID conv.
- `imu-cnn1d`: a 1-D conv net over IMU windows of 128 time steps x 6 channels (3-axis
  accelerometer and gyroscope, as in UCI-HAR): Conv1d 6 -> 16 -> 32 (stride 2), MaxPool1d,
  Conv1d 32 -> 64 -> 64 (stride 2), BatchNorm + ReLU, global average pool, FC to 6 classes. In
  mcutrain it is a (1, 128, 6) height-1 map (like `zoo`'s mnist1d-cnn); in TFLite CONV_2Ds
  with (1, k) kernels.

Weights: torch's default (Kaiming-uniform) initialization from a fixed seed, and BatchNorm
made non-trivial: gamma in [0.5, 1.5), beta in [-0.25, 0.25), then running statistics
estimated by forward passes in train mode (no gradient step) over synthetic inputs, so every
layer's activations have the ranges a trained network's have (unit-scale before the
activation) rather than vanishing or exploding. The inputs are synthetic (uniform images,
normal MFCCs, random sinusoids plus noise for IMU): these models are for checking bit-exactness
against TFLM, not accuracy. torch is imported only when a model is built (the dev extra).
"""

from __future__ import annotations

import functools
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from mcutrain.engines import ptq
from mcutrain.graph import Graph
from mcutrain.interop.tflite_export import to_tflite
from mcutrain.interop.torch_import import from_torch
from mcutrain.qmodel import QuantModel

CALIBRATION_SAMPLES = 256
BN_SAMPLES = 256
PERSON_BLOCKS = ((16, 1), (32, 2), (32, 1), (64, 2), (64, 1), (128, 2), (128, 1), (128, 1), (128, 1),
                 (128, 1), (128, 1), (256, 2), (256, 1))
"""(pointwise output channels, depthwise stride) of MobileNetV1-0.25's 13 blocks."""


@dataclass(frozen=True)
class UserModel:
    """One model at each stage: the float graph from the PyTorch importer, its int8 model (PTQ in
    `tflite` rounding), and that model's `.tflite` bytes."""

    name: str
    graph: Graph
    quant: QuantModel
    tflite: bytes


def _torch():
    try:
        import torch
    except ImportError:
        raise ImportError("the PyTorch-built TFLM models need torch: pip install torch (the dev extra)") \
            from None
    return torch


def person_detector_net(seed: int = 0):
    """MobileNetV1-0.25 on (N, 1, 96, 96): 13 depthwise-separable blocks with ReLU6, 2 classes."""
    torch = _torch()
    nn = torch.nn
    torch.manual_seed(seed)
    layers: OrderedDict[str, nn.Module] = OrderedDict(
        conv0=nn.Conv2d(1, 8, 3, stride=2, padding=1, bias=False), bn0=nn.BatchNorm2d(8), relu0=nn.ReLU6())
    c = 8
    for i, (out, stride) in enumerate(PERSON_BLOCKS, start=1):
        layers[f"dw{i}"] = nn.Conv2d(c, c, 3, stride=stride, padding=1, groups=c, bias=False)
        layers[f"dw{i}_bn"], layers[f"dw{i}_relu"] = nn.BatchNorm2d(c), nn.ReLU6()
        layers[f"pw{i}"] = nn.Conv2d(c, out, 1, bias=False)
        layers[f"pw{i}_bn"], layers[f"pw{i}_relu"] = nn.BatchNorm2d(out), nn.ReLU6()
        c = out
    layers["pool"], layers["flatten"], layers["fc"] = nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(c, 2)
    return nn.Sequential(layers)


def ds_cnn_net(seed: int = 0):
    """DS-CNN (Hello Edge / MLPerf Tiny KWS) on (N, 1, 49, 10) MFCCs, 12 classes."""
    torch = _torch()
    nn = torch.nn
    torch.manual_seed(seed)
    layers: OrderedDict[str, nn.Module] = OrderedDict(
        conv1=nn.Conv2d(1, 64, (10, 4), stride=2, padding=(5, 1)), bn1=nn.BatchNorm2d(64), relu1=nn.ReLU(),
        drop1=nn.Dropout(0.2))
    for i in range(1, 5):
        layers[f"dw{i}"] = nn.Conv2d(64, 64, 3, padding=1, groups=64)
        layers[f"dw{i}_bn"], layers[f"dw{i}_relu"] = nn.BatchNorm2d(64), nn.ReLU()
        layers[f"pw{i}"] = nn.Conv2d(64, 64, 1)
        layers[f"pw{i}_bn"], layers[f"pw{i}_relu"] = nn.BatchNorm2d(64), nn.ReLU()
    layers["drop2"], layers["pool"] = nn.Dropout(0.4), nn.AvgPool2d((25, 5))
    layers["flatten"], layers["fc"] = nn.Flatten(), nn.Linear(64, 12)
    return nn.Sequential(layers)


def imu_cnn_net(seed: int = 0):
    """A 1-D conv net on (N, 6, 128) IMU windows, 6 classes."""
    torch = _torch()
    nn = torch.nn
    torch.manual_seed(seed)
    layers: OrderedDict[str, nn.Module] = OrderedDict()
    for i, (cin, cout, k, stride) in enumerate([(6, 16, 5, 1), (16, 32, 5, 2), (32, 64, 3, 1),
                                                (64, 64, 3, 2)], start=1):
        layers[f"conv{i}"] = nn.Conv1d(cin, cout, k, stride=stride, padding=k // 2, bias=False)
        layers[f"bn{i}"], layers[f"relu{i}"] = nn.BatchNorm1d(cout), nn.ReLU()
        if i == 2:
            layers["maxpool"] = nn.MaxPool1d(2)
    layers["pool"], layers["flatten"], layers["fc"] = nn.AdaptiveAvgPool1d(1), nn.Flatten(), nn.Linear(64, 6)
    return nn.Sequential(layers)


def person_images(n: int, seed: int) -> np.ndarray:
    """Uniform grey images in [-1, 1], (N, 96, 96, 1)."""
    return np.random.default_rng(seed).uniform(-1, 1, (n, 96, 96, 1)).astype(np.float32)


def mfcc_like(n: int, seed: int) -> np.ndarray:
    """Standard-normal MFCC maps, (N, 49, 10, 1) (49 frames of 10 coefficients)."""
    return np.random.default_rng(seed).standard_normal((n, 49, 10, 1)).astype(np.float32)


def imu_windows(n: int, seed: int) -> np.ndarray:
    """Six channels of three random sinusoids each plus noise, (N, 1, 128, 6)."""
    rng = np.random.default_rng(seed)
    t = np.arange(128, dtype=np.float64)[None, :, None, None]
    freq = rng.uniform(0.01, 0.25, (n, 1, 6, 3))
    phase = rng.uniform(0, 2 * np.pi, (n, 1, 6, 3))
    amp = rng.uniform(0.2, 1.0, (n, 1, 6, 3))
    x = (amp * np.sin(2 * np.pi * freq * t + phase)).sum(-1) + 0.1 * rng.standard_normal((n, 128, 6))
    return x[:, None].astype(np.float32)


@dataclass(frozen=True)
class Recipe:
    """How one model is made: its torch module, its synthetic inputs (NHWC), its per-sample shape."""

    net: Callable[[int], object]
    data: Callable[[int, int], np.ndarray]
    shape: tuple[int, ...]


RECIPES = {"person-detector": Recipe(person_detector_net, person_images, (96, 96, 1)),
           "ds-cnn-kws": Recipe(ds_cnn_net, mfcc_like, (49, 10, 1)),
           "imu-cnn1d": Recipe(imu_cnn_net, imu_windows, (1, 128, 6))}


def to_torch_layout(x_nhwc: np.ndarray) -> np.ndarray:
    """NHWC -> what torch takes: (N, C, H, W), or (N, C, L) for a height-1 signal."""
    x = np.ascontiguousarray(x_nhwc.transpose(0, 3, 1, 2))
    return x[:, :, 0] if x_nhwc.shape[1] == 1 else x


def settle_batchnorm(net, x_torch: np.ndarray, seed: int, batch: int = 64):
    """Random affine BatchNorm parameters, then running statistics from train-mode forward passes
    (cumulative averages, no gradients, dropout off), then eval mode."""
    torch = _torch()
    nn = torch.nn
    gen = torch.Generator().manual_seed(seed)
    norms = [m for m in net.modules() if isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d))]
    with torch.no_grad():
        for m in norms:
            m.weight.copy_(torch.rand(m.num_features, generator=gen) + 0.5)
            m.bias.copy_((torch.rand(m.num_features, generator=gen) - 0.5) * 0.5)
            m.reset_running_stats()
            m.momentum = None                     # cumulative average over the batches
        net.train()
        for m in net.modules():
            if isinstance(m, nn.Dropout):
                m.eval()
        for i in range(0, len(x_torch), batch):
            net(torch.from_numpy(x_torch[i:i + batch]))
    return net.eval()


def torch_net(name: str, seed: int = 0):
    """The eval-mode torch module of model `name`, its BatchNorm settled on synthetic data."""
    r = _recipe(name)
    return settle_batchnorm(r.net(seed), to_torch_layout(r.data(BN_SAMPLES, seed + 1)), seed)


def _recipe(name: str) -> Recipe:
    if name not in RECIPES:
        raise ValueError(f"unknown TFLM user model '{name}'; available: {', '.join(RECIPES)}")
    return RECIPES[name]


def calibration_data(name: str, seed: int = 0) -> np.ndarray:
    """The synthetic calibration batch of model `name` (NHWC)."""
    return _recipe(name).data(CALIBRATION_SAMPLES, seed + 2)


def build(name: str, seed: int = 0) -> UserModel:
    """Model `name` as a float graph, an int8 model and a `.tflite` (cached: all are immutable
    in use; copy the QuantModel with `dataclasses.replace` before changing it).

    >>> m = build("imu-cnn1d")                          # doctest: +SKIP
    >>> m.graph.input_shape, m.quant.rounding           # doctest: +SKIP
    ((1, 128, 6), 'tflite')
    """
    return _built(name, seed)


@functools.cache
def _built(name: str, seed: int) -> UserModel:
    r = _recipe(name)
    graph = from_torch(torch_net(name, seed), r.shape, name=name)
    quant = ptq.quantize_model(graph, calibration_data(name, seed), rounding="tflite")
    return UserModel(name, graph, quant, to_tflite(quant))


def person_detector(seed: int = 0) -> UserModel:
    """MobileNetV1-0.25 person detector, 96x96x1, 2 classes (see the module docstring)."""
    return build("person-detector", seed)


def ds_cnn_kws(seed: int = 0) -> UserModel:
    """DS-CNN keyword spotter, 49x10x1 MFCCs, 12 classes (see the module docstring)."""
    return build("ds-cnn-kws", seed)


def imu_cnn1d(seed: int = 0) -> UserModel:
    """1-D conv net on 128x6 IMU windows, 6 classes (see the module docstring)."""
    return build("imu-cnn1d", seed)
