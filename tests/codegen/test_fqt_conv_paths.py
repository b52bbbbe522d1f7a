"""The FQT int8 conv DSP paths (`mt_conv_c1.c`, `mt_conv_c1_bwd_w.c`: one-channel forward and 3x3
weight gradient; `mt_conv_fwd_pairs.c`: interleaved column pairs; the transposed conv of
`mt_conv2d_bwd_in_s8_s16.c` over listed nonzero error pairs, or densely when a sample has too
many) against numpy, in their portable emulation on the host with the sanitizers (the native
assembly runs bit-exact in the QEMU tests): outputs, running accumulator extremes (merged into
given ones, or started from none), gradients and bias gradients, on shapes that reach every edge
(padding, stride 2, odd widths and position counts, batches of two), and the refusals that send
a layer back to the general path."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest

from conftest import needs_gcc
from mcutrain.buildflags import HOST_SANITIZE
from mcutrain.codegen.runtime_files import runtime_files
from mcutrain.mcu.hostbuild import find_host_cc
from mcutrain.quant.fixedpoint import quantize_multiplier, requantize_output

pytestmark = needs_gcc

PROBE_C = r"""
#include <stdio.h>
#include <stdlib.h>
#include "mt_conv_c1.c"
#include "mt_conv_c1_bwd_w.c"
#include "mt_conv_fwd_pairs.c"
#include "mt_conv2d_bwd_in_s8_s16.c"
#include "mt_conv2d_bwd_w_s8_s8.c"

static int32_t rd(void) { long v; if (scanf("%ld", &v) != 1) { exit(2); } return (int32_t)v; }

int main(void)
{
    long kind;
    while (scanf("%ld", &kind) == 1) {
        mt_dims in_d, f_d, out_d;
        mt_conv_params p;
        int32_t i, nx, nw, ny, taken = 0;
        int8_t *x, *w, *y;
        int32_t *b, *m, *s, *amin, *amax, *g, *gb;
        int32_t *scr;
        mt_context ctx;
        in_d.n = rd(); in_d.h = rd(); in_d.w = rd(); in_d.c = rd();
        f_d.n = rd(); f_d.h = rd(); f_d.w = rd(); f_d.c = in_d.c;
        out_d.n = in_d.n; out_d.h = rd(); out_d.w = rd(); out_d.c = f_d.n;
        p.stride_h = rd(); p.stride_w = rd(); p.pad_top = rd(); p.pad_left = rd();
        p.input_zero_point = rd(); p.output_zero_point = rd(); p.groups = 1;
        p.act_min = rd(); p.act_max = rd();
        nx = in_d.n * in_d.h * in_d.w * in_d.c;
        nw = f_d.n * f_d.h * f_d.w * f_d.c;
        ny = out_d.n * out_d.h * out_d.w * out_d.c;
        x = malloc((size_t)nx + 4); w = malloc((size_t)nw + 4); y = malloc((size_t)ny + 4);
        b = malloc(4u * (size_t)f_d.n); m = malloc(4u * (size_t)f_d.n); s = malloc(4u * (size_t)f_d.n);
        amin = malloc(4u * (size_t)f_d.n); amax = malloc(4u * (size_t)f_d.n);
        g = malloc(4u * (size_t)nw); gb = malloc(4u * (size_t)f_d.n);
        scr = malloc(4u * (size_t)(f_d.h * f_d.w * f_d.c + 4));
        ctx.buf = scr;
        ctx.size = 4 * f_d.h * f_d.w * f_d.c;
        for (i = 0; i < nx; ++i) { x[i] = (int8_t)rd(); }
        if (kind == 3) { /* transposed conv: int16 errors [n, ho, wo, o], weights, requantization, extremes */
            int16_t *e16 = malloc(2u * (size_t)ny + 4);
            int32_t mult, shift, lo, hi;
            int8_t *ex = malloc((size_t)nx + 4);
            for (i = 0; i < ny; ++i) { e16[i] = (int16_t)rd(); }
            for (i = 0; i < nw; ++i) { w[i] = (int8_t)rd(); }
            mult = rd(); shift = rd(); lo = rd(); hi = rd();
            taken = mt_conv2d_bwd_in_s8_s16(&p, NULL, 0, &out_d, e16, &f_d, w, &in_d, mult, shift, ex, &lo,
                                            &hi);
            printf("%d\n", (int)taken);
            for (i = 0; i < nx; ++i) { printf("%d ", (int)ex[i]); }
            printf("%d %d\n", (int)lo, (int)hi);
            free(e16); free(ex);
        } else if (kind == 2 || kind == 4) { /* weight gradient: errors, then the gradients to add to */
            for (i = 0; i < ny; ++i) { y[i] = (int8_t)rd(); }
            for (i = 0; i < nw; ++i) { g[i] = rd(); }
            for (i = 0; i < f_d.n; ++i) { gb[i] = rd(); }
            taken = kind == 2 ? mt_conv_c1_bwd_w(&p, &in_d, x, &out_d, y, &f_d, g, gb)
                              : mt_conv2d_bwd_w_s8_s8(&p, &in_d, x, &out_d, y, &f_d, g, gb);
            printf("%d\n", (int)taken);
            for (i = 0; i < nw; ++i) { printf("%d ", (int)g[i]); }
            for (i = 0; i < f_d.n; ++i) { printf("%d ", (int)gb[i]); }
            printf("\n");
        } else {
            for (i = 0; i < nw; ++i) { w[i] = (int8_t)rd(); }
            for (i = 0; i < f_d.n; ++i) {
                b[i] = rd(); m[i] = rd(); s[i] = rd(); amin[i] = rd(); amax[i] = rd();
            }
            memset(y, 0, (size_t)ny);
            {
                const mt_per_channel_quant q = {m, s};
                taken = kind == 0 ? mt_conv_c1_fwd(&p, &q, &in_d, x, &f_d, w, b, &out_d, y, amin, amax)
                                  : mt_conv_fwd_pairs(&ctx, &p, &q, &in_d, x, &f_d, w, b, &out_d, y, amin,
                                                      amax);
            }
            printf("%d\n", (int)taken);
            for (i = 0; i < ny; ++i) { printf("%d ", (int)y[i]); }
            for (i = 0; i < f_d.n; ++i) { printf("%d %d ", (int)amin[i], (int)amax[i]); }
            printf("\n");
        }
        free(x); free(w); free(y); free(b); free(m); free(s);
        free(amin); free(amax); free(g); free(gb); free(scr);
    }
    return 0;
}
"""

INT32_MAX, INT32_MIN = 2**31 - 1, -(2**31)


def _out_size(n: int, k: int, stride: int, pad_lo: int, pad_hi: int) -> int:
    return (n + pad_lo + pad_hi - k) // stride + 1


def _acc(x, w, bias, zx, stride, pad, out_hw):
    """bias + sum of (x - z_x) * w over the taps, padding real 0: [N, Ho, Wo, O] int64."""
    n, h, wd, c = x.shape
    o, kh, kw, _ = w.shape
    (sh, sw), (pt, pl), (ho, wo) = stride, pad, out_hw
    xp = np.zeros((n, pt + h + kh + sh * ho, pl + wd + kw + sw * wo, c), np.int64)
    xp[:, pt:pt + h, pl:pl + wd] = x.astype(np.int64) - zx
    acc = np.broadcast_to(bias.astype(np.int64), (n, ho, wo, o)).copy()
    for i in range(kh):
        for j in range(kw):
            win = xp[:, i:i + sh * ho:sh, j:j + sw * wo:sw][:, :ho, :wo]
            acc += win @ w[:, i, j, :].astype(np.int64).T
    return acc


def _header(n, h, wd, c, o, kh, kw, ho, wo, stride, pad, zx, zy, act):
    return [n, h, wd, c, o, kh, kw, ho, wo, *stride, *pad, zx, zy, *act]


def _forward_case(rng, kind, n, h, wd, c, o, kernel, stride, pad, empty, zy=-128, act=(-128, 127),
                  shift=None):
    kh, kw = kernel
    ho = _out_size(h, kh, stride[0], pad[0], pad[0])
    wo = _out_size(wd, kw, stride[1], pad[1], pad[1])
    x = rng.integers(-128, 128, (n, h, wd, c))
    w = rng.integers(-127, 128, (o, kh, kw, c))
    bias = rng.integers(-3000, 3000, o)
    zx = int(rng.integers(-128, 20))
    mult, sh = quantize_multiplier(np.exp(rng.uniform(np.log(2.0**-14), np.log(2.0**-6), o)))
    if shift is not None:
        sh[:] = shift
    acc = _acc(x, w, bias, zx, stride, pad, (ho, wo))
    lo0 = np.full(o, INT32_MAX) if empty else rng.integers(-5000, 0, o)
    hi0 = np.full(o, INT32_MIN) if empty else rng.integers(0, 5000, o)
    ext = np.stack([bias, mult, sh, lo0, hi0], axis=1)
    numbers = [kind, *_header(n, h, wd, c, o, kh, kw, ho, wo, stride, pad, zx, zy, act),
               *x.ravel(), *w.ravel(), *ext.ravel()]
    want_y = requantize_output(acc, mult, sh, zy, act[0], act[1]).ravel()
    flat = acc.reshape(-1, o)
    want_lo = np.minimum(flat.min(axis=0), lo0)
    want_hi = np.maximum(flat.max(axis=0), hi0)
    return numbers, want_y, want_lo, want_hi


def _run(exe, numbers):
    text = " ".join(str(int(v)) for v in numbers) + "\n"
    out = subprocess.run([str(exe)], input=text, capture_output=True, text=True,
                         check=True).stdout.split("\n")
    return int(out[0]), np.array(out[1].split(), dtype=np.int64)


@pytest.fixture(scope="module")
def probe(tmp_path_factory) -> Path:
    """The probe over a DSP build's runtime sources (training kernels too), sanitizers on, DSP emulated."""
    tmp = tmp_path_factory.mktemp("convpaths")
    rt = tmp / "rt"
    rt.mkdir()
    for name, text in runtime_files("dsp", training=True).items():
        (rt / name).write_text(text)
    (tmp / "probe.c").write_text(PROBE_C)
    exe = tmp / "probe"
    subprocess.run([find_host_cc(), "-std=c99", "-Wall", "-Wextra", "-Werror", "-O1", "-DMT_EMULATE_DSP",
                    *HOST_SANITIZE, f"-I{rt}", str(tmp / "probe.c"), "-o", str(exe)], check=True)
    return exe


FORWARD_CASES = [  # kind, n, h, w, c, o, kernel, stride, pad, empty extremes
    (0, 1, 28, 28, 1, 16, (3, 3), (1, 1), (1, 1), True),
    (0, 2, 9, 5, 1, 8, (3, 3), (1, 1), (1, 1), False),
    (0, 1, 7, 8, 1, 4, (3, 3), (2, 2), (1, 1), True),
    (0, 1, 1, 40, 1, 16, (1, 5), (1, 1), (0, 2), False),
    (0, 2, 6, 7, 1, 32, (2, 2), (1, 2), (0, 0), True),
    (0, 1, 5, 6, 1, 3, (5, 1), (1, 1), (2, 0), False),
    (1, 1, 14, 14, 16, 32, (3, 3), (1, 1), (1, 1), True),
    (1, 2, 7, 7, 4, 6, (3, 3), (2, 2), (1, 1), False),
    (1, 1, 5, 3, 8, 2, (1, 1), (1, 1), (0, 0), True),
    (1, 1, 3, 3, 12, 64, (3, 3), (1, 1), (1, 1), False),
]


@pytest.mark.parametrize("case", FORWARD_CASES)
def test_forward_paths_equal_the_conv_with_floor_requantization(probe, case):
    kind, *shape, empty = case
    rng = np.random.default_rng(len(str(case)))
    numbers, want_y, want_lo, want_hi = _forward_case(rng, kind, *shape, empty)
    taken, got = _run(probe, numbers)
    assert taken == 1
    ny = want_y.size
    np.testing.assert_array_equal(got[:ny], want_y)
    np.testing.assert_array_equal(got[ny::2], want_lo)
    np.testing.assert_array_equal(got[ny + 1::2], want_hi)


@pytest.mark.parametrize("kind, shape, zy, act, shift", [
    (0, (1, 8, 8, 1, 8, (3, 3), (1, 1), (1, 1)), -100, (-100, 127), None),   # zero point not -128
    (1, (1, 6, 6, 8, 4, (3, 3), (1, 1), (1, 1)), -128, (-128, 100), None),   # relu6-like clamp
    (0, (1, 8, 8, 1, 8, (3, 3), (1, 1), (1, 1)), -128, (-128, 127), -1),     # shift outside the fast range
    (1, (1, 6, 6, 4, 3, (3, 3), (1, 1), (1, 1)), -128, (-128, 127), None),   # odd output channels
    (1, (1, 6, 6, 6, 4, (3, 3), (1, 1), (1, 1)), -128, (-128, 127), None),   # C not a multiple of 4
    (0, (1, 6, 6, 2, 4, (3, 3), (1, 1), (1, 1)), -128, (-128, 127), None),   # two input channels
])
def test_forward_paths_refuse_layers_they_do_not_fit(probe, kind, shape, zy, act, shift):
    numbers, _, _, _ = _forward_case(np.random.default_rng(1), kind, *shape, False, zy=zy, act=act,
                                     shift=shift)
    taken, got = _run(probe, numbers)
    assert taken == 0
    assert not got[:-2 * shape[4]].any()   # nothing written


@pytest.mark.parametrize("n, h, w, o, pad, density", [
    (1, 28, 28, 16, (1, 1), 0.25), (2, 9, 5, 8, (1, 1), 0.5), (1, 6, 7, 4, (0, 0), 1.0),
    (1, 3, 29, 4, (1, 1), 0.1),
])
def test_one_channel_weight_gradient_equals_the_sum_over_positions(probe, n, h, w, o, pad, density):
    rng = np.random.default_rng(n * 100 + w)
    ho, wo = _out_size(h, 3, 1, pad[0], pad[0]), _out_size(w, 3, 1, pad[1], pad[1])
    x = rng.integers(-128, 128, (n, h, w, 1))
    e = np.where(rng.random((n, ho, wo, o)) < density, rng.integers(-127, 128, (n, ho, wo, o)), 0)
    e[:, :, :, 0] = 0   # a channel without errors
    g0 = rng.integers(-1000, 1000, (o, 3, 3, 1))
    gb0 = rng.integers(-1000, 1000, o)
    zx = int(rng.integers(-128, 0))
    numbers = [2, *_header(n, h, w, 1, o, 3, 3, ho, wo, (1, 1), pad, zx, -128, (-128, 127)),
               *x.ravel(), *e.ravel(), *g0.ravel(), *gb0.ravel()]
    xp = np.zeros((n, ho + 2, wo + 2), np.int64)
    xp[:, pad[0]:pad[0] + h, pad[1]:pad[1] + w] = x[..., 0] - zx
    want = g0.astype(np.int64).copy()
    for i in range(3):
        for j in range(3):
            want[:, i, j, 0] += np.einsum("nyx,nyxo->o", xp[:, i:i + ho, j:j + wo], e)
    taken, got = _run(probe, numbers)
    assert taken == 1
    np.testing.assert_array_equal(got[:want.size], want.ravel())
    np.testing.assert_array_equal(got[want.size:], gb0 + e.sum(axis=(0, 1, 2)))


def test_one_channel_weight_gradient_refuses_stride_two(probe):
    numbers = [2, *_header(1, 8, 8, 1, 4, 3, 3, 4, 4, (2, 2), (1, 1), 0, -128, (-128, 127)),
               *np.ones(64, int), *np.ones(64, int), *np.zeros(36, int), *np.zeros(4, int)]
    taken, got = _run(probe, numbers)
    assert taken == 0
    assert not got.any()


@pytest.mark.parametrize("n, h, w, c, o, kernel, stride, pad, density", [
    (1, 14, 14, 16, 32, (3, 3), (1, 1), (1, 1), 0.15),   # small-cnn conv2: listed pairs
    (1, 14, 14, 16, 32, (3, 3), (1, 1), (1, 1), 0.9),    # too many nonzero pairs: the dense loop
    (2, 9, 7, 8, 4, (3, 3), (1, 1), (1, 1), 0.3),
    (1, 7, 7, 5, 6, (3, 3), (2, 2), (1, 1), 0.3),        # stride 2: one run per tap
    (1, 6, 5, 4, 3, (3, 3), (1, 1), (1, 1), 0.3),        # O odd: the dense loop
    (1, 3, 3, 68, 68, (1, 1), (1, 1), (0, 0), 0.2),
])
def test_transposed_conv_equals_the_sum_over_taps_and_channels(probe, n, h, w, c, o, kernel, stride, pad,
                                                               density):
    rng = np.random.default_rng(h * 1000 + c * 10 + o)
    kh, kw = kernel
    ho, wo = _out_size(h, kh, stride[0], pad[0], pad[0]), _out_size(w, kw, stride[1], pad[1], pad[1])
    e16 = np.where(rng.random((n, ho, wo, o)) < density, rng.integers(-32512, 32513, (n, ho, wo, o)), 0)
    wt = rng.integers(-127, 128, (o, kh, kw, c))
    mult, shift = quantize_multiplier(np.float64(2.0**-15 / max(1, kh * kw * o) ** 0.5))
    lo0, hi0 = -5, 5
    numbers = [3, *_header(n, h, w, c, o, kh, kw, ho, wo, stride, pad, 0, 0, (-127, 127)),
               *np.zeros(n * h * w * c, int), *e16.ravel(), *wt.ravel(), int(mult), int(shift), lo0, hi0]
    acc = np.zeros((n, h + kh + stride[0] * ho, w + kw + stride[1] * wo, c), np.int64)
    for i in range(kh):
        for j in range(kw):
            acc[:, i:i + stride[0] * ho:stride[0], j:j + stride[1] * wo:stride[1]] += e16 @ wt[:, i, j, :]
    acc = acc[:, pad[0]:pad[0] + h, pad[1]:pad[1] + w]
    taken, got = _run(probe, numbers)
    assert taken == 0   # MT_OK
    np.testing.assert_array_equal(got[:-2], requantize_output(acc, mult, shift, 0, -127, 127).ravel())
    assert got[-2] == min(lo0, acc.min()) and got[-1] == max(hi0, acc.max())


@pytest.mark.parametrize("n, h, w, c, o, kernel, stride, pad, density", [
    (1, 14, 14, 16, 32, (3, 3), (1, 1), (1, 1), 0.15),   # small-cnn conv2: mostly one or two pairs
    (1, 14, 14, 16, 32, (3, 3), (1, 1), (1, 1), 0.7),    # dense blocks
    (2, 7, 6, 5, 6, (3, 3), (2, 2), (1, 1), 0.3),        # C not a multiple of 4, stride 2
    (1, 5, 9, 68, 3, (1, 1), (1, 1), (0, 0), 0.4),       # taps longer than a chunk
])
def test_conv_weight_gradient_equals_the_sum_over_positions(probe, n, h, w, c, o, kernel, stride, pad,
                                                           density):
    rng = np.random.default_rng(h * 100 + c * 10 + o)
    kh, kw = kernel
    ho, wo = _out_size(h, kh, stride[0], pad[0], pad[0]), _out_size(w, kw, stride[1], pad[1], pad[1])
    x = rng.integers(-128, 128, (n, h, w, c))
    e = np.where(rng.random((n, ho, wo, o)) < density, rng.integers(-127, 128, (n, ho, wo, o)), 0)
    g0 = rng.integers(-1000, 1000, (o, kh, kw, c))
    gb0 = rng.integers(-1000, 1000, o)
    zx = int(rng.integers(-128, 0))
    numbers = [4, *_header(n, h, w, c, o, kh, kw, ho, wo, stride, pad, zx, -128, (-128, 127)),
               *x.ravel(), *e.ravel(), *g0.ravel(), *gb0.ravel()]
    xp = np.zeros((n, h + kh + stride[0] * ho, w + kw + stride[1] * wo, c), np.int64)
    xp[:, pad[0]:pad[0] + h, pad[1]:pad[1] + w] = x - zx
    want = g0.astype(np.int64).copy()
    for i in range(kh):
        for j in range(kw):
            win = xp[:, i:i + stride[0] * ho:stride[0], j:j + stride[1] * wo:stride[1]][:, :ho, :wo]
            want[:, i, j, :] += np.einsum("nyxc,nyxo->oc", win, e)
    taken, got = _run(probe, numbers)
    assert taken == 0   # MT_OK
    np.testing.assert_array_equal(got[:want.size], want.ravel())
    np.testing.assert_array_equal(got[want.size:], gb0 + e.sum(axis=(0, 1, 2)))
