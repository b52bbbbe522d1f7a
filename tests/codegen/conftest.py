"""Shared fixtures of the code generator tests: a tiny hand-built int8 model, host-gcc skip."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from mcutrain import graph as G
from mcutrain.qmodel import QuantModel, share_input_qparams
from mcutrain.quant.qparams import QParams

needs_gcc = pytest.mark.skipif(shutil.which("gcc") is None,
                               reason="host gcc missing: apt-get install -y gcc")


def qp(scale: float, zp: int) -> QParams:
    return QParams(np.float32(scale), np.int32(zp))


def tiny_qmodel() -> QuantModel:
    """conv 3x3 (relu) -> maxpool -> flatten -> linear, every number literal (snapshot-stable)."""
    g = G.Graph((4, 4, 1), [
        G.conv2d("conv", G.INPUT, 2, 3, padding=1, act="relu", in_channels=1),
        G.maxpool("pool", "conv", 2),
        G.flatten("flat", "pool"),
        G.linear("fc", "flat", 3, in_features=8),
    ], name="tiny")
    w_conv = (np.arange(18).reshape(2, 3, 3, 1) * 7 % 255 - 127).astype(np.int8)
    w_fc = (np.arange(24).reshape(3, 8) * 13 % 255 - 127).astype(np.int8)
    acts = {G.INPUT: qp(1 / 128, -128), "conv": qp(0.25, -100), "fc": qp(0.5, 3)}
    return QuantModel(
        g, share_input_qparams(g, acts),
        {"conv": w_conv, "fc": w_fc},
        {"conv": QParams(np.array([0.01, 0.02], np.float32), np.zeros(2, np.int32)),
         "fc": QParams(np.array([0.005, 0.01, 0.04], np.float32), np.zeros(3, np.int32))},
        {"conv": np.array([100, -200], np.int32), "fc": np.array([5000, -7000, 2**20], np.int32)})
