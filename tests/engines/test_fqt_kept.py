"""Kept-structure conv kernels (partial updates) equal the dense kernels on the masked errors."""

from __future__ import annotations

import numpy as np
import pytest

from mcutrain.engines import fqt_kept as KEPT
from mcutrain.engines import fqt_kernels as K
from mcutrain.engines.im2col import out_size
from mcutrain.methods.partial import top_k


def _case(seed: int, stride: tuple[int, int], padding: tuple[int, int, int, int], e_max: int):
    rng = np.random.default_rng(seed)
    n, h, w, c, o = 6, 7, 6, 3, 8
    xc = rng.integers(-255, 256, (n, h, w, c)).astype(np.float32)
    wc = rng.integers(-127, 128, (o, 3, 3, c)).astype(np.int32)
    ho = out_size(h, 3, stride[0], padding[0] + padding[1])
    wo = out_size(w, 3, stride[1], padding[2] + padding[3])
    ec = rng.integers(-e_max, e_max + 1, (n, ho, wo, o)).astype(np.int16 if e_max < 2**15 else np.int32)
    k = np.array([1, 2, 3, 5, 8, 1])                 # several groups, one of full width
    mag = np.abs(ec.reshape(n, -1, o)).sum(1)
    kept, order = top_k(mag, k)
    masked = ec * kept.astype(ec.dtype)[:, None, None, :]
    return xc, wc, ec, kept, order, masked


@pytest.mark.parametrize("stride,padding", [((1, 1), (1, 1, 1, 1)), ((2, 1), (0, 1, 1, 0))])
@pytest.mark.parametrize("e_max", [127, 2**15])
def test_bwd_in_kept_equals_dense(stride, padding, e_max):
    xc, wc, ec, kept, order, masked = _case(0, stride, padding, e_max)
    groups = KEPT.kept_groups(kept, order)
    assert len(groups) > 1
    eg = KEPT.gather_kept(ec, kept, groups)
    for mode in ("int", "int-float"):
        dense = K.conv2d_bwd_in_acc(masked, wc, xc.shape, stride, padding, 1, mode, e_max)
        kept_acc = KEPT.conv2d_bwd_in_acc_kept(eg, groups, wc, xc.shape, stride, padding, mode, e_max)
        assert np.array_equal(np.asarray(kept_acc, np.int64), np.asarray(dense, np.int64))
        assert np.abs(np.asarray(dense)).max() > 0


@pytest.mark.parametrize("per_sample", [False, True])
@pytest.mark.parametrize("stride,padding", [((1, 1), (1, 1, 1, 1)), ((2, 1), (0, 1, 1, 0))])
def test_bwd_w_and_bias_kept_equal_dense(per_sample, stride, padding):
    xc, wc, ec, kept, order, masked = _case(1, stride, padding, 127)
    groups = KEPT.kept_groups(kept, order)
    eg = KEPT.gather_kept(ec, kept, groups)
    dense = K.conv2d_bwd_w_acc(xc, masked, wc.shape, stride, padding, 1, "int-float", per_sample, 255, 127)
    got = KEPT.conv2d_bwd_w_acc_kept(xc, eg, groups, wc.shape, stride, padding, "int-float", per_sample,
                                  255, 127)
    assert got.shape == dense.shape
    assert np.array_equal(got.astype(np.int64), dense.astype(np.int64))
    assert np.array_equal(KEPT.bias_grad_acc_kept(eg, groups, wc.shape[0]), K.bias_grad_acc(masked, "int"))


def test_gather_kept_zeroes_the_padding():
    kept = np.array([[True, False, True, False, False]])
    order = np.array([[2, 0, 1, 3, 4]])
    ec = np.arange(1, 11, dtype=np.int16).reshape(1, 2, 5)           # (N, P, O)
    (g,) = KEPT.kept_groups(kept, order)
    assert g.idx.tolist() == [[2, 0]]
    (e,) = KEPT.gather_kept(ec, kept, [g])
    assert e.tolist() == [[[3, 8], [1, 6]]]
    g4 = KEPT.KeptGroup(np.array([0]), np.array([[2, 0, 1, 3]]))
    (e4,) = KEPT.gather_kept(ec, kept, [g4])
    assert e4[0, 2:].tolist() == [[0, 0], [0, 0]]


def test_widths_and_fraction():
    kept = np.zeros((3, 16), bool)
    kept[0, :1] = kept[1, :3] = kept[2, :9] = True
    w = KEPT.kept_widths(kept)
    assert w.tolist() == [1, 4, 16]
    assert KEPT.kept_fraction(w, 16) == pytest.approx(21 / 48)


def test_kept_kernels_refuse_float_and_grouped():
    xc, wc, ec, kept, order, _ = _case(2, (1, 1), (1, 1, 1, 1), 127)
    groups = KEPT.kept_groups(kept, order)
    eg = KEPT.gather_kept(ec, kept, groups)
    with pytest.raises(ValueError, match="integer mode"):
        KEPT.conv2d_bwd_in_acc_kept(eg, groups, wc, xc.shape, (1, 1), (1, 1, 1, 1), "f32")
    with pytest.raises(ValueError, match="integer mode"):
        KEPT.conv2d_bwd_w_acc_kept(xc, eg, groups, (8, 3, 3, 1), (1, 1), (1, 1, 1, 1), "int")
