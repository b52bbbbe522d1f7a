"""FQT int8's integer-only update (`methods/fqt_update_int`, docs/integer-semantics.md 13.9): its
fixed-point helpers on hand-checked values, one update against the float32 update it replaces, and
`--update` through the factory (auto: integer on a target without an FPU)."""

from __future__ import annotations

import argparse

import numpy as np
import pytest

from mcutrain import zoo
from mcutrain.methods import factory
from mcutrain.methods.fqt import FQT
from mcutrain.methods.fqt_state import FQTConfig
from mcutrain.methods.fqt_update_int import bit_length, mant14, sat_i32, shift_round


def test_shift_round_is_round_half_up():
    x = np.array([5, -5, 6, -6, 7, -7, 2**31 - 1, -2**31], np.int64)
    assert shift_round(x, 1).tolist() == [3, -2, 3, -3, 4, -3, 2**30, -2**30]
    assert shift_round(x, 2).tolist() == [1, -1, 2, -1, 2, -2, 2**29, -2**29]
    assert shift_round(x, 0).tolist() == x.tolist()


def test_mant14_takes_the_rounded_top_bits():
    m, e = mant14(np.array([1.0, 0.75, 3.0 + 2.0**-12, 2.0**-130, 0.0, np.inf], np.float32))
    assert m.tolist() == [8192, 12288, 12289, 0, 0, 16384]
    assert e.tolist() == [13, 14, 12, 0, 0, -128]


def test_bit_length_and_saturation():
    assert bit_length(np.array([0, 1, 2**15 - 1, 2**15, 2**31])).tolist() == [0, 1, 15, 16, 32]
    assert sat_i32(np.array([np.inf, -np.inf, np.nan, 3.0], np.float32), 7).tolist() == [7, -7, 0, 3]


def _two_updates():
    rng = np.random.default_rng(0)
    x = rng.random((16, 8, 8, 1), dtype=np.float32)
    y = np.arange(16) % 10
    ms = {u: FQT(zoo.build("digits-cnn"), FQTConfig(precision="int8", update=u), x[:8])
          for u in ("float", "integer")}
    w0 = {k: v.copy() for k, v in ms["float"].w.items()}
    for m in ms.values():
        m.step(x[8:], y[8:], 0.05)
    return ms["float"], ms["integer"], w0


def test_one_update_moves_the_weights_as_the_float32_update_does():
    """From the same state and stream, both requantize the same values up to the fixed point's last
    bits: the integers differ by at most one step, in few places, the scales by float32 rounding."""
    f, i, w0 = _two_updates()
    for name in f.trainable:
        d = np.abs(f.w[name].astype(int) - i.w[name].astype(int))
        assert d.max() <= 1 and d.mean() < 0.01, name
        np.testing.assert_allclose(i.wqp[name].scale, f.wqp[name].scale, rtol=1e-5)
        assert np.any(i.w[name] != w0[name]), name           # the step moved weights


@pytest.mark.parametrize(("target", "precision", "want"), [
    ("cortex-m0plus", "int8", "integer"), ("rv32imc", "int8", "integer"), ("rp2040", "int8", "integer"),
    ("cortex-m4", "int8", "float"), ("rv32imafc", "int8", "float"), (None, "int8", "float"),
    ("cortex-m0plus", "uint8", "float")])
def test_auto_is_integer_on_cores_without_an_fpu(target, precision, want):
    v = factory.resolve_values("export", "fqt", {"precision": precision})
    v.target = target
    assert factory.fqt_config(v).update == want


def test_integer_is_int8_only():
    v = factory.resolve_values("train", "fqt", {"precision": "mixed", "update": "integer"})
    with pytest.raises(factory.FactoryError, match="the integer update is int8's"):
        factory.fqt_config(v)
    with pytest.raises(ValueError, match="the integer update is int8's"):
        FQTConfig(precision="uint8", update="integer")
    v = argparse.Namespace(**vars(factory.resolve_values("train", "fqt", {"update": "integer"})))
    assert factory.fqt_config(v).update == "integer"
