"""Frozen layers before the first trained one: bias and multipliers in Flash; the planner agrees."""

from __future__ import annotations

import re

import numpy as np
import pytest

from mcutrain import zoo
from mcutrain.codegen.emit_fqt import emit_fqt_training
from mcutrain.methods.fqt import FQT
from mcutrain.methods.fqt_state import FQTConfig
from mcutrain.plan.memory import account
from mcutrain.quant.fixedpoint import output_multiplier


def _method(precision: str) -> FQT:
    x = np.random.default_rng(0).random((4, 28, 28, 1), dtype=np.float32)
    return FQT(zoo.build("small-cnn"), FQTConfig(precision=precision, trainable="last:2"), x)


def _c_ints(source: str, name: str) -> np.ndarray:
    body = re.search(rf"static const int32_t {name}\[\d+\] = \{{([^}}]*)\}};", source).group(1)
    return np.array([int(v) for v in re.findall(r"-?\d+", body)])


def test_int8_fixed_layers_are_const_with_the_simulators_multipliers():
    m = _method("int8")
    src = emit_fqt_training(m, kernels="ref")
    s = src.source
    names = {e.name for e in src.state}
    for layer in ("conv1", "conv2"):          # frozen, before fc1: fixed ranges
        assert not m.dynamic[layer]
        sx, sy = m.act_qparams(m.graph.node(layer).inputs[0]).scale, m.act_qparams(layer).scale
        o = m.w[layer].shape[0]
        mult, shift = output_multiplier(sx, np.broadcast_to(m.wqp[layer].scale, (o,)), sy)
        np.testing.assert_array_equal(_c_ints(s, f"{layer}_mult"), mult)
        np.testing.assert_array_equal(_c_ints(s, f"{layer}_shift"), shift)
        np.testing.assert_array_equal(_c_ints(s, f"{layer}_bias"), m.b[layer])
        assert not {f"{layer}.bias", f"{layer}.w_scale", f"{layer}.bias_scale"} & names
        assert f"{layer}_s_w" not in s and f"{layer}_bias_scale" not in s
    prepare = s[s.index("static mt_status fqt_prepare"):s.index("static mt_status fqt_forward")]
    assert "fc1_mult" in prepare and "conv2_mult" not in prepare
    assert "static int32_t fc1_mult[64];" in s and {"fc1.bias", "fc1.bias_scale"} <= names


def test_uint8_fixed_layers_keep_a_const_float_multiplier():
    m = _method("uint8")
    s = emit_fqt_training(m, kernels="ref").source
    assert re.search(r"static const float conv2_m = 0x[0-9a-f.p+-]+f;", s)
    assert "static const int32_t conv2_w_zp" in s and "static float fc1_m;" in s
    assert "conv2_m = (" not in s and "fc1_m = (" in s


@pytest.mark.parametrize(("precision", "per_channel"), [("int8", 8), ("uint8", 0)])
def test_planner_puts_moving_multipliers_in_ram_and_fixed_ones_in_flash(precision, per_channel):
    src = emit_fqt_training(_method(precision), kernels="ref")
    sched = src.plan.schedule
    r = account(sched, "imxrt1062", src.plan)
    # conv1 (16 channels) and conv2 (32) before the first trained layer: Flash
    assert r.breakdown["flash"]["quantization constants"] == per_channel * (16 + 32)
    assert {"conv1.requant", "conv2.requant"} <= set(sched.frozen_bytes) or per_channel == 0
    for layer, o in (("fc1", 64), ("fc2", 10)):       # trained: multipliers move every step
        t = sched.tensors[f"state:{layer}.requant"]
        assert t.nbytes == (8 * o if precision == "int8" else 4)
        assert f"{layer}.requant" not in sched.frozen_bytes
    assert "state:conv2.requant" not in sched.tensors
