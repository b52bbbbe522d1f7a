"""The integer golden engine against hand-checked cases and the direct-loop reference, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest
import reference_int as ref
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mcutrain import graph as G
from mcutrain import zoo
from mcutrain.engines import int_engine as E
from mcutrain.engines import ptq
from mcutrain.engines.int_gemm import exact_matmul, gemm_dtype
from mcutrain.qmodel import QuantModel, share_input_qparams
from mcutrain.quant.fixedpoint import quantize_multiplier
from mcutrain.quant.qparams import QParams

FULL = (-128, 127)


def qp(scale: float, zp: int) -> QParams:
    return QParams(np.float32(scale), np.int32(zp))


def mult_shift(m: float, channels: int = 1) -> tuple[np.ndarray, np.ndarray]:
    mu, sh = quantize_multiplier(np.full(channels, m))
    return mu, sh


# ---------------------------------------------------------------- hand-checked kernels


def test_linear_hand_checked():
    # x - z = [3, -2]; acc = 10 + 3*2 + (-2)*5 = 6; y = round(6 * 0.75) + 1 = round(4.5) + 1 = 6
    x = np.array([[2, -3]], np.int8)
    w = np.array([[2, 5]], np.int8)
    mu, sh = mult_shift(0.75)
    y = E.linear_fwd_s8(x, -1, w, np.array([10], np.int32), mu, sh, 1, *FULL)
    assert y.tolist() == [[6]]
    # acc = 10 - 6 - 10 = -6; -4.5 rounds away from zero to -5, + z = -4; a relu clamp at z = 1 lifts it
    y = E.linear_fwd_s8(np.array([[-4, -3]], np.int8), -1, w, np.array([10], np.int32), mu, sh, 1, *FULL)
    assert y.tolist() == [[-4]]
    y = E.linear_fwd_s8(np.array([[-4, -3]], np.int8), -1, w, np.array([10], np.int32), mu, sh, 1, 1, 127)
    assert y.tolist() == [[1]]


def test_conv_padding_contributes_real_zero():
    # 1x1 input, 3x3 kernel, padding 1: only the centre tap sees data; padding holds z_x = 5
    x = np.array([[[[7]]]], np.int8)
    w = np.full((1, 3, 3, 1), 100, np.int8)
    mu, sh = mult_shift(0.5)
    y = E.conv2d_fwd_s8(x, 5, w, np.zeros(1, np.int32), mu, sh, 0, *FULL, (1, 1), (1, 1, 1, 1))
    assert y.shape == (1, 1, 1, 1) and y.item() == 100  # (7 - 5) * 100 * 0.5


def test_depthwise_hand_checked():
    # two channels, 2x2 input, 2x2 kernel, no padding: one output per channel
    x = np.array([[[[1, 10], [2, 20]], [[3, 30], [4, 40]]]], np.int8)
    w = np.stack([np.ones((2, 2, 1)), -np.ones((2, 2, 1))]).astype(np.int8)
    mu, sh = mult_shift(1.0 / 4.0, 2)
    y = E.conv2d_fwd_s8(x, 0, w, np.zeros(2, np.int32), mu, sh, 0, *FULL, (1, 1), (0, 0, 0, 0), groups=2)
    assert y.reshape(-1).tolist() == [3, -25]  # 10/4 = 2.5 -> 3; -100/4 = -25


def test_pools_hand_checked():
    x = np.array([-3, -2, 4, 5], np.int8).reshape(1, 2, 2, 1)
    assert E.maxpool_fwd_s8(x, (2, 2), (2, 2)).item() == 5
    assert E.avgpool_fwd_s8(x, (2, 2), (2, 2)).item() == 1          # 4 / 4
    x = np.array([-3, -2, 0, 0], np.int8).reshape(1, 2, 2, 1)
    assert E.avgpool_fwd_s8(x, (2, 2), (2, 2)).item() == -1         # -5/4 = -1.25 -> -1
    x = np.array([-3, -3, 0, 0], np.int8).reshape(1, 2, 2, 1)
    assert E.global_avgpool_fwd_s8(x).item() == -2                  # -6/4 = -1.5 -> -2 (away from 0)
    x = np.full((1, 2, 2, 1), -128, np.int8)
    assert E.global_avgpool_fwd_s8(x).item() == -128


def test_add_hand_checked():
    ma, mb, n = 3 << 28, 1 << 29, 30  # 0.75 and 0.5 on a shift of 30
    a = np.array([10, -10, 127], np.int8)
    b = np.array([3, -3, 127], np.int8)
    y = E.add_fwd_s8(a, 0, b, 1, ma, mb, n, -2, *FULL)
    # 7.5 + 1 -> round(8.5) = 9 - 2 = 7; -7.5 - 2 = -9.5 -> -10 - 2 = -12; saturates at 127
    assert y.tolist() == [7, -12, 127]


def test_standalone_relu6_clamps():
    y = E.relu_fwd_s8(np.array([-128, -5, 0, 60, 127], np.int8), -5, 55)
    assert y.tolist() == [-5, -5, 0, 55, 55]


# ---------------------------------------------------------------- exact GEMM


def test_gemm_dtype_thresholds():
    assert gemm_dtype(2**24) == np.float32
    assert gemm_dtype(2**24 + 1) == np.float64
    assert gemm_dtype(2**53) == np.float64
    assert gemm_dtype(2**53 + 1) == np.int64


def test_exact_matmul_never_rounds_at_the_float32_edge():
    # 2^24 + 1 is the first integer float32 cannot hold: the bound must push it to float64
    a = np.array([[2**24, 1]], np.int64)
    b = np.array([[1], [1]], np.int64)
    assert np.matmul(a.astype(np.float32), b.astype(np.float32)).item() == 2**24  # what would go wrong
    assert exact_matmul(a, b, 2**24 + 1).item() == 2**24 + 1


@pytest.mark.parametrize("bound", [2**20, 2**40, 2**60])
def test_exact_matmul_each_dtype_matches_int64(bound):
    rng = np.random.default_rng(1)
    a = rng.integers(-255, 256, (17, 40))
    b = rng.integers(-127, 128, (40, 9))
    assert np.array_equal(exact_matmul(a, b, bound), a @ b)


def test_conv_on_the_float64_path_is_exact():
    # K = 3*3*64 at full weight magnitude: bound 255 * 127 * 576 > 2^24 -> float64 GEMM
    rng = np.random.default_rng(2)
    w = rng.choice(np.array([-127, 127], np.int8), (8, 3, 3, 64))
    assert gemm_dtype(E.check_accumulator(-128, w, np.zeros(8, np.int32))) == np.float64
    x = rng.integers(-128, 128, (2, 4, 4, 64)).astype(np.int8)
    bias = rng.integers(-2**20, 2**20, 8).astype(np.int32)
    mu, sh = mult_shift(1e-5, 8)
    args = (x, -128, w, bias, mu, sh, 3, *FULL, (1, 1), (1, 1, 1, 1), 1)
    assert np.array_equal(E.conv2d_fwd_s8(*args), ref.conv2d(*args))


def test_accumulator_overflow_is_refused():
    w = np.full((1, 70000), 127, np.int8)
    with pytest.raises(E.AccumulatorOverflow, match="int32 accumulator"):
        E.check_accumulator(-128, w, np.zeros(1, np.int32), "fc")
    with pytest.raises(E.AccumulatorOverflow):
        E.check_accumulator(0, np.ones((1, 4), np.int8), np.array([2**31 - 100], np.int32))


# ---------------------------------------------------------------- whole models vs reference


def random_qmodel(g: G.Graph, rng: np.random.Generator) -> QuantModel:
    """Random int8 weights, biases and qparams, with extremes (zero points +-128/127, saturation)."""
    zps = [-128, 127, 0]
    acts = {}

    def pick_zp() -> int:
        return int(rng.choice(zps)) if rng.random() < 0.15 else int(rng.integers(-128, 128))

    acts[G.INPUT] = qp(10 ** rng.uniform(-3, 0), pick_zp())
    weights, wqp, biases = {}, {}, {}
    for n in g.nodes:
        if n.op in (G.Op.CONV2D, G.Op.LINEAR):
            shape = n.params["weight"].shape
            w = rng.integers(-127, 128, shape).astype(np.int8)
            if shape[0] > 1 and rng.random() < 0.3:
                w[0] = 0  # an all-zero channel
            k = int(np.prod(shape[1:]))
            sx = float(acts[n.inputs[0]].scale)
            sy = sx * 10 ** rng.uniform(-1, 1)
            # |acc| is about sqrt(k) * 100 * 73: aim the output at a few tens of steps
            sw = (sy / (sx * np.sqrt(k) * 150) * 10 ** rng.uniform(-0.5, 0, shape[0])).astype(np.float32)
            acts[n.name] = qp(sy, pick_zp())
            xm = E.x_magnitude(int(acts[n.inputs[0]].zero_point))
            room = 2**31 - 1 - xm * np.abs(w.reshape(shape[0], -1).astype(np.int64)).sum(axis=1)
            b = rng.integers(-4000 * np.sqrt(k), 4000 * np.sqrt(k) + 1, shape[0])
            if rng.random() < 0.2:
                b[-1] = room[-1]  # the largest bias the int32 accumulator allows
            weights[n.name] = w
            wqp[n.name] = QParams(sw, np.zeros(shape[0], np.int32))
            biases[n.name] = np.clip(b, -room, room).astype(np.int32)
        elif n.op == G.Op.ADD:
            s = max(float(acts[i].scale) for i in n.inputs)
            acts[n.name] = qp(s * 10 ** rng.uniform(-0.5, 0.7), pick_zp())
        else:
            acts[n.name] = acts[n.inputs[0]]
    return QuantModel(g, share_input_qparams(g, acts), weights, wqp, biases)


def assert_engine_matches_reference(qm: QuantModel, x_q: np.ndarray) -> None:
    got = E.run(qm, x_q)
    want = ref.run(qm, x_q)
    for name in want:
        assert got[name].dtype == np.int8, name
        bad = np.argwhere(got[name] != want[name])
        assert not len(bad), f"tensor '{name}': {len(bad)} mismatches, first at {bad[0].tolist()}: " \
                             f"{got[name][tuple(bad[0])]} != {want[name][tuple(bad[0])]}"


def test_small_cnn_ptq_matches_reference():
    g = zoo.build("small-cnn", seed=3)
    rng = np.random.default_rng(3)
    x = rng.random((8, 28, 28, 1), dtype=np.float32)
    qm = ptq.quantize_model(g, x)
    assert_engine_matches_reference(qm, E.quantize_input(qm, x[:3]))


def test_small_cnn_random_qparams_match_reference():
    g = zoo.build("small-cnn", seed=4)
    rng = np.random.default_rng(4)
    qm = random_qmodel(g, rng)
    assert_engine_matches_reference(qm, rng.integers(-128, 128, (2, 28, 28, 1)).astype(np.int8))


def test_mcunet_he_init_matches_reference():
    g = zoo.build("mcunet-5fps", input_shape=(32, 32, 3), seed=5)
    rng = np.random.default_rng(5)
    x = rng.standard_normal((6, 32, 32, 3)).astype(np.float32)
    qm = ptq.quantize_model(g, x)
    assert any(n.op == G.Op.ADD for n in qm.graph.nodes)
    assert_engine_matches_reference(qm, E.quantize_input(qm, x[:2]))


@st.composite
def small_graphs(draw) -> G.Graph:
    """Random op mixes over small shapes: convs (groups, depthwise, strides, asymmetric padding),
    pools, residual adds, standalone relu/relu6, then a flatten (or global pool) and a linear."""
    h, w, c = draw(st.integers(1, 7)), draw(st.integers(1, 7)), draw(st.integers(1, 6))
    nodes: list[G.Node] = []
    shape = (h, w, c)
    x = G.INPUT

    def push(node: G.Node) -> None:
        nonlocal shape, x
        nodes.append(node)
        shape = G.Graph((h, w, c), nodes).shape(node.name)
        x = node.name

    for i in range(draw(st.integers(1, 4))):
        hh, ww, cc = shape
        kind = draw(st.sampled_from(["conv", "dw", "maxpool", "avgpool", "residual", "relu", "relu6"]))
        name = f"n{i}"
        if kind in ("conv", "dw"):
            pad = tuple(draw(st.integers(0, 2)) for _ in range(4))
            kh = draw(st.integers(1, min(3, hh + pad[0] + pad[1])))
            kw = draw(st.integers(1, min(3, ww + pad[2] + pad[3])))
            stride = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
            if kind == "dw":
                groups, out = cc, cc * draw(st.integers(1, 2))
            else:
                groups = draw(st.sampled_from([d for d in range(1, cc + 1) if cc % d == 0]))
                out = groups * draw(st.integers(1, 3))
            act = draw(st.sampled_from(G.ACT_NAMES))
            push(G.conv2d(name, x, out, (kh, kw), stride, pad, groups, act, in_channels=cc))
        elif kind in ("maxpool", "avgpool"):
            k = (draw(st.integers(1, min(2, hh))), draw(st.integers(1, min(2, ww))))
            s = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
            push((G.maxpool if kind == "maxpool" else G.avgpool)(name, x, k, s))
        elif kind == "residual":
            src = x
            push(G.conv2d(name + "c", x, cc, 3, 1, 1, act=draw(st.sampled_from(G.ACT_NAMES)), in_channels=cc))
            push(G.add(name, src, x, draw(st.sampled_from(G.ACT_NAMES))))
        else:
            push((G.relu if kind == "relu" else G.relu6)(name, x))
    if draw(st.booleans()):
        push(G.global_avgpool("gap", x))
    push(G.flatten("flat", x))
    if draw(st.booleans()):
        push(G.linear("fc0", x, draw(st.integers(1, 8)), draw(st.sampled_from(G.ACT_NAMES)),
                      in_features=shape[0]))
    push(G.linear("logits", x, draw(st.integers(1, 5)), in_features=shape[0]))
    return G.Graph((h, w, c), nodes)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(g=small_graphs(), seed=st.integers(0, 2**32 - 1), batch=st.integers(1, 3))
def test_random_graphs_match_reference(g, seed, batch):
    rng = np.random.default_rng(seed)
    qm = random_qmodel(g, rng)
    x_q = rng.integers(-128, 128, (batch, *g.input_shape)).astype(np.int8)
    assert_engine_matches_reference(qm, x_q)


# ---------------------------------------------------------------- API


def test_predict_chunks_agree_with_forward():
    g = zoo.build("digits-cnn", seed=6)
    x = np.random.default_rng(6).random((21, 8, 8, 1), dtype=np.float32)
    qm = ptq.quantize_model(g, x)
    logits = E.forward(qm, E.quantize_input(qm, x))
    assert logits.dtype == np.int8 and logits.shape == (21, 10)
    assert np.array_equal(E.predict(qm, x, batch_size=4), logits.argmax(axis=1))


def test_run_refuses_float_or_misshaped_input():
    g = zoo.build("digits-cnn")
    x = np.zeros((2, 8, 8, 1), np.float32)
    qm = ptq.quantize_model(g, x + 0.5)
    with pytest.raises(ValueError, match="int8 batch"):
        E.run(qm, x)
    with pytest.raises(ValueError, match="does not match"):
        E.quantize_input(qm, np.zeros((2, 8, 8), np.float32))


# ---------------------------------------------------------------- the exact float64 requantization


@pytest.mark.parametrize("arch, shape, rounding", [
    ("small-cnn", (28, 28, 1), "single"), ("mcunet-5fps", (32, 32, 3), "single"),
    ("mcunet-5fps", (32, 32, 3), "tflite")])
def test_float_accumulators_requantize_as_the_int64_rule_on_captured_layers(monkeypatch, arch, shape,
                                                                            rounding):
    """Every conv/linear of a forward pass: its exact float accumulators and the result of the
    float64 form, against the int64 rule on the same integers (no bound given)."""
    from mcutrain.quant import fixedpoint
    calls = []

    def spy(acc, mult, shift, zp, lo, hi, **kw):
        y = fixedpoint_requantize_output(acc, mult, shift, zp, lo, hi, **kw)
        calls.append((np.array(acc), mult, shift, zp, lo, hi, kw, y))
        return y
    fixedpoint_requantize_output = fixedpoint.requantize_output
    g = zoo.build(arch, 10, shape, seed=3)
    rng = np.random.default_rng(5)
    for n in g.parametric():
        n.params["bias"] = rng.normal(0, 0.05, n.params["bias"].shape).astype(np.float32)
    x = rng.random((6, *shape), dtype=np.float32)
    qm = ptq.quantize_model(g, x, rounding=rounding)
    monkeypatch.setattr(fixedpoint, "requantize_output", spy)
    E.run(qm, E.quantize_input(qm, x))
    monkeypatch.undo()
    assert len(calls) == len(list(g.parametric()))
    floats = 0
    for acc, mult, shift, zp, lo, hi, kw, y in calls:
        exact = acc.astype(np.int64) + np.asarray(kw["bias"], np.int64)
        assert np.array_equal(exact, acc + np.asarray(kw["bias"], np.float64))  # acc held exact integers
        assert int(np.abs(exact).max(initial=0)) <= kw["acc_max"]              # the bound of the NOTE
        reference = fixedpoint.requantize_output(exact, mult, shift, zp, lo, hi, rounding=rounding)
        assert reference.dtype == y.dtype == np.int8 and np.array_equal(reference, y)
        floats += acc.dtype.kind == "f"
    assert floats == len(calls)       # every layer kept its accumulators in float (no int64 copy)


def test_depthwise_with_a_channel_multiplier_matches_the_reference():
    rng = np.random.default_rng(6)
    x = rng.integers(-128, 128, (2, 7, 7, 3)).astype(np.int8)
    w = rng.integers(-127, 128, (6, 3, 3, 1)).astype(np.int8)
    b = rng.integers(-5000, 5000, 6).astype(np.int32)
    mu, sh = mult_shift(0.0123, 6)
    got = E.depthwise_conv2d_fwd_s8(x, 3, w, b, mu, sh, -4, -4, 127, (2, 2), (1, 1, 1, 1))
    want = ref.conv2d(x, 3, w, b, mu, sh, -4, -4, 127, (2, 2), (1, 1, 1, 1), groups=3)
    assert got.dtype == np.int8 and np.array_equal(got, want)
