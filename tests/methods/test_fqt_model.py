"""FQT and the int8 model: its trained model equals its forward bit for bit, it starts from a
file's integers, and it runs a `tflite` model's rounding."""

from __future__ import annotations

import numpy as np
import pytest
from reference_fqt import tiny_graph
from test_fqt import _residual_graph

from mcutrain import zoo
from mcutrain.engines import int_engine as ie
from mcutrain.engines import ptq
from mcutrain.methods.fqt import FQT
from mcutrain.methods.fqt_model import ema_reproducing
from mcutrain.methods.fqt_state import FQTConfig
from mcutrain.qmodel import QuantModel
from mcutrain.quant.qparams import QParams

GRAPHS = {"tiny": tiny_graph, "residual": _residual_graph,
          "digits-cnn": lambda s: zoo.build("digits-cnn", seed=s)}
"""conv + maxpool + linear; depthwise + ADD + avgpool + global avgpool + relu6; a zoo CNN."""


def _batch(g, n=24, seed=0):
    rng = np.random.default_rng(seed)
    return rng.random((n, *g.input_shape), dtype=np.float32), rng.integers(0, g.num_classes, n)


def _engine_logits(qm: QuantModel, x: np.ndarray) -> np.ndarray:
    return ie.forward(qm, ie.quantize_input(qm, x))


def test_ema_reproduces_qparams_exactly():
    """Every scale a float32 range gives is reproduced exactly; about 1 in 255 has no such range."""
    rng = np.random.default_rng(0)
    scales = np.float32(2.0) ** rng.uniform(-20, 6, 2000).astype(np.float32)
    exact = 0
    for s, z in zip(scales, rng.integers(-128, 128, 2000), strict=True):
        qp = QParams(np.float32(s), np.int32(z), "int8")
        ema, ok = ema_reproducing(qp, 0.1)
        assert ok == (ema.qparams("int8") == qp)
        exact += ok
        reached = ema.qparams("int8")      # a range's own qparams: always reproducible
        assert ema_reproducing(reached, 0.1)[1]
        if not ok:      # the nearest range: one scale step away, the same zero point
            assert abs(float(reached.scale) - float(s)) <= float(np.spacing(np.float32(s)))
    assert 0.99 <= exact / 2000 < 1.0, exact
    per_channel = QParams(ema_reproducing(QParams(scales[:64], np.zeros(64, np.int32)), 0.1, True)[0]
                          .qparams("int8", True).scale, np.zeros(64, np.int32), "int8")
    assert ema_reproducing(per_channel, 0.001, symmetric=True)[0].qparams("int8", True) == per_channel
    for z in (-128, 127):     # ranges with 0 at an end
        qp = QParams(np.float32(0.0123), np.int32(z), "int8")
        ema, ok = ema_reproducing(qp, 0.1)
        assert ok and ema.qparams("int8") == qp


def test_a_file_qparams_no_range_gives_is_carried_until_the_range_moves():
    g = tiny_graph(0)
    x, y = _batch(g, 16)
    qm = ptq.quantize_model(g, x)
    acts = dict(qm.act_qparams)
    s = np.float32(acts["fc1"].scale)
    for _ in range(300):        # the next scale above fc1's that no float32 range gives
        s = np.nextafter(s, np.float32(1))
        if not ema_reproducing(QParams(s, acts["fc1"].zero_point), 0.1)[1]:
            break
    acts["fc1"] = QParams(s, acts["fc1"].zero_point)
    qm = QuantModel(qm.graph, acts, qm.weights, qm.weight_qparams, qm.biases)
    m = FQT(qm, FQTConfig(precision="int8", trainable="last:1"), x)
    assert set(m.pinned) == {"fc1"} and m.act_qparams("fc1") == acts["fc1"]
    assert np.array_equal(m.logits_and_losses(x, y)[0], _engine_logits(qm, x))
    m.step(x, y, 0.02)          # fc1 is frozen (before the trained fc2): its qparams stay the file's
    assert m.act_qparams("fc1") == acts["fc1"]
    assert np.array_equal(m.logits_and_losses(x, y)[0], _engine_logits(m.trained_model(), x))


@pytest.mark.parametrize("graph", GRAPHS)
@pytest.mark.parametrize("trainable,lmin", [("all", 1.0), ("last:1", 1.0), ("all", 0.4)])
def test_trained_model_equals_fqt_forward(graph, trainable, lmin):
    g = GRAPHS[graph](1)
    x, y = _batch(g)
    m = FQT(g, FQTConfig(precision="int8", trainable=trainable, lambda_min=lmin, seed=3), x[:8])
    for i in range(4):
        m.step(x[i * 6:(i + 1) * 6], y[i * 6:(i + 1) * 6], 0.02)
        qm = m.trained_model()
        assert np.array_equal(_engine_logits(qm, x), m.logits_and_losses(x, y)[0])
    assert qm.rounding == "single" and qm.provenance["fqt"]["exact"]
    assert all(np.array_equal(qm.weights[n], m.w[n]) and np.array_equal(qm.biases[n], m.b[n]) for n in m.w)


@pytest.mark.parametrize("graph", GRAPHS)
@pytest.mark.parametrize("rounding", ["single", "tflite"])
def test_starts_from_the_files_integers(graph, rounding):
    """No calibration over new data: weights, biases and every activation qparams are the file's."""
    g = GRAPHS[graph](2)
    x, y = _batch(g, seed=4)
    qm = ptq.quantize_model(g, _batch(g, 16, seed=9)[0], rounding=rounding)
    m = FQT(qm, FQTConfig(precision="int8"), x)      # other samples than qm's calibration
    assert np.array_equal(m.logits_and_losses(x, y)[0], _engine_logits(qm, x))
    back = m.trained_model()
    assert back.act_qparams == qm.act_qparams and back.rounding == rounding
    for n in qm.weights:
        assert np.array_equal(back.weights[n], qm.weights[n]) and np.array_equal(back.biases[n], qm.biases[n])
        assert np.all(back.weight_qparams[n].scale == np.broadcast_to(qm.weight_qparams[n].scale,
                                                                      back.weight_qparams[n].scale.shape))
    m.step(x, y, 0.02)       # training moves on from there, in the model's rounding
    assert np.array_equal(m.logits_and_losses(x, y)[0], _engine_logits(m.trained_model(), x))


def test_tflite_forward_differs_from_single():
    """The mode is really used: on small-cnn single and tflite logits differ, and FQT follows each."""
    g = zoo.build("small-cnn", seed=0)
    x, y = _batch(g, 32, seed=1)
    logits = {}
    for mode in ("single", "tflite"):
        qm = ptq.quantize_model(g, x[:16], rounding=mode)
        logits[mode] = FQT(qm, FQTConfig(precision="int8"), x).logits_and_losses(x, y)[0]
        assert np.array_equal(logits[mode], _engine_logits(qm, x))
    assert not np.array_equal(logits["single"], logits["tflite"])


@pytest.mark.parametrize("prec", ["uint8", "mixed", "float32"])
def test_converted_precisions_give_a_valid_int8_model(prec):
    """The seed formats convert (fqt_model's rules); their predictions mostly agree with the simulator's."""
    g = GRAPHS["digits-cnn"](0)
    x, y = _batch(g, 64, seed=2)
    m = FQT(g, FQTConfig(precision=prec), x[:16])
    m.step(x[:32], y[:32], 0.01)
    qm = m.trained_model()
    assert not qm.provenance["fqt"]["exact"]
    agree = np.mean(ie.predict(qm, x) == m.predict(x))
    assert agree >= 0.9, agree


def test_resume_is_exact_from_a_files_integers(tmp_path):
    from mcutrain.methods.loop import fit
    g = GRAPHS["residual"](0)
    x, y = _batch(g, 48, seed=6)
    qm = ptq.quantize_model(g, x[:16], rounding="tflite")
    cfg = FQTConfig(precision="int8", trainable="last:2")
    kw = dict(epochs=2, batch=16, lr=0.02, seed=1, progress=False)
    a = FQT(qm, cfg, x[:16])
    fit(a, x, y, x, y, **kw)
    b = FQT(qm, cfg, x[:16])
    fit(b, x, y, x, y, checkpoint=tmp_path / "c.npz", stop_after_steps=4, **kw)
    c = FQT(qm, cfg, x[:16])
    fit(c, x, y, x, y, resume=tmp_path / "c.npz", **kw)
    sa, sc = a.state(), c.state()
    assert sa[0] == sc[0] and all(np.array_equal(sa[1][k], sc[1][k]) for k in sa[1])
    assert np.array_equal(_engine_logits(a.trained_model(), x), _engine_logits(c.trained_model(), x))
