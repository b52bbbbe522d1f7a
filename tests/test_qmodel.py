"""QuantModel: save/load round trip, refusal of float-only or broken files, the constants cache."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from mcutrain import io, qmodel, zoo
from mcutrain.engines import int_engine as E
from mcutrain.engines import ptq
from mcutrain.quant.fixedpoint import output_multiplier
from mcutrain.quant.qparams import QParams


@pytest.fixture(scope="module")
def mcunet_qm() -> qmodel.QuantModel:
    g = zoo.build("mcunet-5fps", input_shape=(32, 32, 3), seed=0)
    x = np.random.default_rng(0).standard_normal((8, 32, 32, 3)).astype(np.float32)
    return ptq.quantize_model(g, x)


def test_save_load_round_trip_is_exact(tmp_path, mcunet_qm):
    qm = mcunet_qm
    path = qm.save(tmp_path / "m.npz", provenance={"dataset": "random"})
    back = qmodel.load(path)
    assert back.act_qparams == qm.act_qparams
    assert back.weight_qparams == qm.weight_qparams
    for name in qm.weights:
        assert back.weights[name].dtype == np.int8
        assert np.array_equal(back.weights[name], qm.weights[name])
        assert np.array_equal(back.biases[name], qm.biases[name])
    assert back.provenance == {"ptq": {"method": "minmax", "percentile": None,
                                       "calibration_samples": 8}, "dataset": "random"}
    # shared qparams come back equal (validate insists on it)
    assert back.act_qparams["pool"] == back.act_qparams["blocks.13.pw2"]
    x_q = np.random.default_rng(1).integers(-128, 128, (3, 32, 32, 3)).astype(np.int8)
    assert np.array_equal(E.forward(back, x_q), E.forward(qm, x_q))
    # the float graph travels with it, so the file is also an ordinary model file
    mf = io.load(path)
    assert [n.name for n in mf.graph.nodes] == [n.name for n in qm.graph.nodes]


def test_float_only_file_is_refused(tmp_path):
    path = io.save(tmp_path / "f.npz", zoo.build("digits-cnn"))
    with pytest.raises(io.ModelFileError, match="float model only"):
        qmodel.load(path)


def test_incomplete_file_is_refused(tmp_path):
    g = zoo.build("digits-cnn")
    qm = ptq.quantize_model(g, np.random.default_rng(2).random((4, 8, 8, 1), dtype=np.float32))
    meta, arrays = qm.to_file()
    del arrays["q/fc/bias"]
    path = io.save(tmp_path / "bad.npz", qm.graph, meta, arrays)
    with pytest.raises(io.ModelFileError, match="q/fc/bias"):
        qmodel.load(path)
    meta, arrays = qm.to_file()
    meta["quant"]["scheme"] = "int4-v9"
    path = io.save(tmp_path / "bad2.npz", qm.graph, meta, arrays)
    with pytest.raises(io.ModelFileError, match="int4-v9"):
        qmodel.load(path)


def test_validate_names_the_problem():
    g = zoo.build("digits-cnn")
    qm = ptq.quantize_model(g, np.random.default_rng(3).random((4, 8, 8, 1), dtype=np.float32))
    with pytest.raises(ValueError, match="'conv2': int8 weight"):
        dataclasses.replace(qm, weights={**qm.weights, "conv2": qm.weights["conv2"].astype(np.int16)})
    with pytest.raises(ValueError, match="'fc': bias"):
        dataclasses.replace(qm, biases={**qm.biases, "fc": qm.biases["fc"][:3]})
    acts = dict(qm.act_qparams)
    del acts["conv1"]
    with pytest.raises(ValueError, match="'conv1' has no activation qparams"):
        dataclasses.replace(qm, act_qparams=acts)
    sq = zoo.build("small-cnn")
    qs = ptq.quantize_model(sq, np.random.default_rng(3).random((2, 28, 28, 1), dtype=np.float32))
    acts = {**qs.act_qparams, "pool1": QParams(np.float32(0.5), np.int32(0))}
    with pytest.raises(ValueError, match=r"'pool1'.*share"):
        dataclasses.replace(qs, act_qparams=acts)


def test_requant_params_follow_scale_changes():
    g = zoo.build("digits-cnn")
    qm = ptq.quantize_model(g, np.random.default_rng(4).random((4, 8, 8, 1), dtype=np.float32))
    m1, s1 = qm.requant_params("conv2")
    want = output_multiplier(qm.scale("conv1"), qm.weight_qparams["conv2"].scale, qm.scale("conv2"))
    assert np.array_equal(m1, want[0]) and np.array_equal(s1, want[1]) and m1.shape == (32,)
    old = qm.act_qparams["conv2"]
    qm.act_qparams["conv2"] = QParams(old.scale * np.float32(2), old.zero_point)
    m2, s2 = qm.requant_params("conv2")
    assert np.array_equal(m2, m1) and np.array_equal(s2, s1 - 1)  # half the multiplier: one less shift


def test_per_tensor_weight_qparams_broadcast_to_channels():
    g = zoo.build("digits-cnn")
    qm = ptq.quantize_model(g, np.random.default_rng(5).random((4, 8, 8, 1), dtype=np.float32))
    wq = qm.weight_qparams["conv2"]
    qm.weight_qparams["conv2"] = QParams(wq.scale.max(), np.int32(0))
    mult, shift = qm.requant_params("conv2")
    assert mult.shape == shift.shape == (32,) and len(set(zip(mult.tolist(), shift.tolist()))) == 1
    assert E.forward(qm, np.zeros((1, 8, 8, 1), np.int8)).shape == (1, 10)
