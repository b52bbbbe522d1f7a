"""The PyTorch-built models of the TFLM benchmark: what from_torch makes of them computes what torch
computes, they have the shapes their docstrings promise, and they reach .tflite in tflite rounding."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from mcutrain.bench import tflm_models as M  # noqa: E402
from mcutrain.engines import float_engine  # noqa: E402
from mcutrain.graph import Op  # noqa: E402
from mcutrain.interop.tflite_read import parse  # noqa: E402

SHAPES = {"person-detector": ((96, 96, 1), 2, 13), "ds-cnn-kws": ((49, 10, 1), 12, 4),
          "imu-cnn1d": ((1, 128, 6), 6, 0)}
"""(input, classes, depthwise layers) of each model, as its docstring describes it."""


@pytest.mark.parametrize("name", sorted(M.RECIPES))
def test_imported_graph_computes_what_torch_computes(name):
    m = M.build(name)
    net = M.torch_net(name)
    x = M.calibration_data(name)[:8]
    with torch.no_grad():
        ref = net(torch.from_numpy(M.to_torch_layout(x))).numpy()
    got = float_engine.forward(m.graph, x)
    assert np.abs(got - ref).max() <= 1e-4 * np.abs(ref).max()
    shape, classes, depthwise = SHAPES[name]
    assert m.graph.input_shape == shape and m.graph.num_classes == classes
    assert sum(n.op == Op.CONV2D and n.attrs["groups"] > 1 for n in m.graph.nodes) == depthwise
    assert Op.BATCHNORM not in {n.op for n in m.graph.nodes}


@pytest.mark.parametrize("name", sorted(M.RECIPES))
def test_batchnorm_gives_activations_a_trained_networks_ranges(name):
    """Neither vanishing nor exploding: the settled BatchNorms keep every calibrated tensor's float
    range (255 int8 steps of its scale) between 0.1 and 100, as in a trained network."""
    qm = M.build(name).quant
    assert qm.rounding == "tflite"
    spans = {t: float(np.asarray(qp.scale)) * 255 for t, qp in qm.act_qparams.items()}
    assert all(0.1 < s < 100 for s in spans.values()), spans


OPS = {"person-detector": {"PAD", "CONV_2D", "DEPTHWISE_CONV_2D", "MEAN", "RESHAPE", "FULLY_CONNECTED"},
       "ds-cnn-kws": {"PAD", "CONV_2D", "DEPTHWISE_CONV_2D", "AVERAGE_POOL_2D", "RESHAPE", "FULLY_CONNECTED"},
       "imu-cnn1d": {"PAD", "CONV_2D", "MAX_POOL_2D", "MEAN", "RESHAPE", "FULLY_CONNECTED"}}
"""The TFLite operators each file holds: torch's symmetric padding of a strided conv (not TensorFlow's
SAME) becomes PAD + VALID conv, a global pool MEAN (tflite rounding), the DS-CNN's AvgPool2d((25, 5))
an AVERAGE_POOL_2D."""


def test_each_model_is_a_function_returning_all_three_stages():
    for fn in (M.person_detector, M.ds_cnn_kws, M.imu_cnn1d):
        m = fn()
        assert m is M.build(m.name)                      # cached: one model per name and seed
        assert {op.name for op in parse(m.tflite).operators} == OPS[m.name]
    with pytest.raises(ValueError, match="unknown TFLM user model 'lenet'; available: person-detector"):
        M.build("lenet")
