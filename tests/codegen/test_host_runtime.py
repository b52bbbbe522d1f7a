"""The C runtime built with host gcc (-Wall -Wextra -Werror -pedantic, ASan + UBSan) against the
golden engine: int8 logits and every layer identical, for the reference loops and for the DSP
loops (run on the host through their portable instruction emulation)."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, note, settings
from hypothesis import strategies as st

from conftest import needs_gcc, qp, tiny_qmodel
from mcutrain import graph as G
from mcutrain import zoo
from mcutrain.codegen.library import export_library
from mcutrain.engines import int_engine as E
from mcutrain.engines import ptq
from mcutrain.mcu.hostbuild import build_host, find_host_cc
from mcutrain.mcu.hostrun import run_host
from mcutrain.qmodel import QuantModel, share_input_qparams
from mcutrain.quant.fixedpoint import (
    quantize_multiplier,
    requantize_output,
    rounding_divide,
    rounding_shift_right,
)
from mcutrain.quant.qparams import QParams

pytestmark = needs_gcc


def assert_c_matches_engine(qm: QuantModel, x_q: np.ndarray, tmp_path, kernels: str) -> None:
    """Export, build with sanitizers, run; report the first layer whose bytes differ."""
    lib = tmp_path / f"lib-{kernels}"
    res = export_library(qm, lib, kernels=kernels)
    exe = build_host(lib, lib / "harness.exe", kernels=kernels)
    sizes = [int(np.prod(qm.graph.shape(n))) for n in res.layers]
    logits, layers = run_host(exe, x_q, qm.graph.num_classes, sizes)
    want = E.run(qm, x_q)
    for name, got in zip(res.layers, layers):
        exp = want[name].reshape(len(x_q), -1)
        bad = np.argwhere(got != exp)
        assert not len(bad), (f"[{kernels}] first differing layer '{name}': {len(bad)} bytes, first at "
                              f"{bad[0].tolist()}: C {got[tuple(bad[0])]} != golden {exp[tuple(bad[0])]}")
    np.testing.assert_array_equal(logits, E.forward(qm, x_q))


@pytest.mark.parametrize("kernels", ["ref", "dsp"])
def test_tiny_model(tmp_path, kernels):
    qm = tiny_qmodel()
    x = np.random.default_rng(1).integers(-128, 128, (5, 4, 4, 1)).astype(np.int8)
    assert_c_matches_engine(qm, x, tmp_path, kernels)


ZOO = [("digits-cnn", None), ("small-cnn", None), ("mnist1d-cnn", None), ("mcunet-5fps", (32, 32, 3))]


@pytest.mark.parametrize("kernels", ["ref", "dsp"])
@pytest.mark.parametrize(("arch", "shape"), ZOO, ids=[a for a, _ in ZOO])
def test_zoo_models(tmp_path, arch, shape, kernels):
    g = zoo.build(arch, input_shape=shape, seed=1)
    rng = np.random.default_rng(2)
    x = rng.standard_normal((12, *g.input_shape)).astype(np.float32)
    qm = ptq.quantize_model(g, x[:8])
    assert_c_matches_engine(qm, E.quantize_input(qm, x[:4]), tmp_path, kernels)


# ---------------------------------------------------------------- random graphs


def random_qmodel(g: G.Graph, rng: np.random.Generator) -> QuantModel:
    """Random int8 weights and qparams with extreme zero points, all-zero channels, max biases."""
    def zp() -> int:
        return int(rng.choice([-128, 127, 0])) if rng.random() < 0.2 else int(rng.integers(-128, 128))

    acts = {G.INPUT: qp(10 ** rng.uniform(-3, 0), zp())}
    weights, wqp, biases = {}, {}, {}
    for n in g.nodes:
        if n.op in (G.Op.CONV2D, G.Op.LINEAR):
            shape = n.params["weight"].shape
            w = rng.integers(-127, 128, shape).astype(np.int8)
            if shape[0] > 1 and rng.random() < 0.3:
                w[0] = 0
            k = int(np.prod(shape[1:]))
            sx = float(acts[n.inputs[0]].scale)
            sy = sx * 10 ** rng.uniform(-1, 1)
            sw = (sy / (sx * np.sqrt(k) * 150) * 10 ** rng.uniform(-0.5, 0, shape[0])).astype(np.float32)
            acts[n.name] = qp(sy, zp())
            xm = E.x_magnitude(int(acts[n.inputs[0]].zero_point))
            room = 2**31 - 1 - xm * np.abs(w.reshape(shape[0], -1).astype(np.int64)).sum(axis=1)
            b = rng.integers(-4000 * np.sqrt(k), 4000 * np.sqrt(k) + 1, shape[0])
            if rng.random() < 0.2:
                b[-1] = room[-1]
            weights[n.name] = w
            wqp[n.name] = QParams(sw, np.zeros(shape[0], np.int32))
            biases[n.name] = np.clip(b, -room, room).astype(np.int32)
        elif n.op == G.Op.ADD:
            s = max(float(acts[i].scale) for i in n.inputs)
            acts[n.name] = qp(s * 10 ** rng.uniform(-0.5, 0.7), zp())
        else:
            acts[n.name] = acts[n.inputs[0]]
    return QuantModel(g, share_input_qparams(g, acts), weights, wqp, biases)


@st.composite
def graphs(draw) -> G.Graph:
    """Op mixes over small shapes: plain/grouped/depthwise convs (strides, asymmetric padding,
    channel counts that are and are not multiples of 4), pools, residual adds, standalone
    relu/relu6, flatten or global pooling, linear layers."""
    h, w, c = draw(st.integers(1, 7)), draw(st.integers(1, 7)), draw(st.integers(1, 9))
    nodes: list[G.Node] = []
    shape, x = (h, w, c), G.INPUT

    def push(node: G.Node) -> None:
        nonlocal shape, x
        nodes.append(node)
        shape, x = G.Graph((h, w, c), nodes).shape(node.name), node.name

    for i in range(draw(st.integers(1, 4))):
        hh, ww, cc = shape
        kind = draw(st.sampled_from(["conv", "conv", "dw", "maxpool", "avgpool", "residual", "relu",
                                     "relu6"]))
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
                out = groups * draw(st.integers(1, 5))
            push(G.conv2d(name, x, out, (kh, kw), stride, pad, groups, draw(st.sampled_from(G.ACT_NAMES)),
                          in_channels=cc))
        elif kind in ("maxpool", "avgpool"):
            k = (draw(st.integers(1, min(3, hh))), draw(st.integers(1, min(3, ww))))
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
        push(G.linear("fc0", x, draw(st.integers(1, 9)), draw(st.sampled_from(G.ACT_NAMES)),
                      in_features=shape[0]))
    push(G.linear("logits", x, draw(st.integers(1, 6)), in_features=shape[0]))
    return G.Graph((h, w, c), nodes)


@settings(max_examples=12, deadline=None, phases=[Phase.explicit, Phase.reuse, Phase.generate],
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(g=graphs(), seed=st.integers(0, 2**32 - 1), kernels=st.sampled_from(["ref", "dsp"]))
def test_random_graphs(tmp_path_factory, g, seed, kernels):
    # NOTE: no shrinking (each example builds C twice); the graph is printed on failure instead
    note(f"input {g.input_shape}\n{g.summary()}\n{[(n.name, n.attrs) for n in g.nodes]}")
    rng = np.random.default_rng(seed)
    qm = random_qmodel(g, rng)
    x_q = rng.integers(-128, 128, (3, *g.input_shape)).astype(np.int8)
    assert_c_matches_engine(qm, x_q, tmp_path_factory.mktemp("g"), kernels)


# ---------------------------------------------------------------- the one requantize, directly

PROBE_C = r"""
#include <stdio.h>
#include "mt_fixedpoint.h"
int main(void)
{
    long long a, m, s, z, lo, hi, n, d, t;
    while (scanf("%lld %lld %lld %lld %lld %lld %lld %lld %lld", &a, &m, &s, &z, &lo, &hi, &n, &d, &t) == 9) {
        printf("%d %d %lld\n", (int)mt_requantize((int32_t)a, (int32_t)m, (int32_t)s, (int32_t)z, (int32_t)lo,
                                                 (int32_t)hi),
               (int)mt_rounding_divide_s32((int32_t)n, (int32_t)d),
               (long long)mt_rounding_shift_right_s64((int64_t)t, (int32_t)(s + 32)));
    }
    return 0;
}
"""


@pytest.mark.parametrize("dsp", [False, True])
def test_requantize_and_rounding_match_python_at_the_extremes(tmp_path, dsp):
    from mcutrain.codegen.runtime_files import runtime_files

    rt = tmp_path / "rt"
    rt.mkdir()
    for name, text in runtime_files("dsp" if dsp else "ref").items():
        (rt / name).write_text(text)
    (tmp_path / "probe.c").write_text(PROBE_C)
    exe = tmp_path / "probe"
    flags = ["-std=c99", "-Wall", "-Wextra", "-Werror", "-O1", "-fsanitize=address,undefined",
             "-fno-sanitize-recover=all", f"-I{rt}"] + (["-DMT_EMULATE_DSP"] if dsp else [])
    subprocess.run([find_host_cc(), *flags, str(tmp_path / "probe.c"), "-o", str(exe)], check=True)
    rng = np.random.default_rng(7)
    n = 20000
    acc = rng.integers(-(2**31), 2**31, n, dtype=np.int64)
    acc[:8] = [-(2**31), 2**31 - 1, 0, 1, -1, 2**30, -(2**30), 12345]
    m = np.exp(rng.uniform(np.log(2.0**-33), np.log(2.0**29), n))
    m[:6] = [2.0**-33, 2.0**-32, 0.5, 1.0, 2.0**29.99, 0.0]
    mult, shift = quantize_multiplier(m)
    zp = rng.integers(-128, 128, n)
    lo = rng.integers(-128, 0, n)
    hi = rng.integers(0, 128, n)
    num = rng.integers(-(2**31) + 2**16, 2**31 - 2**16, n)
    den = rng.integers(1, 2**16, n)
    num[:4], den[:4] = [5, -5, 7, -7], [2, 2, 14, 14]  # exact halves round away from zero
    # rounding_shift_right by shift + 32 (in [1, 62]) of values with room for the rounding half
    sh = shift.astype(np.int64) + 32
    keep = (sh >= 1) & (sh <= 62)
    t = rng.integers(-(2**62), 2**62, n)
    lines = "\n".join(" ".join(map(str, r)) for r in zip(acc, mult, shift, zp, lo, hi, num, den, t)) + "\n"
    out = subprocess.run([str(exe)], input=lines, capture_output=True, text=True, check=True).stdout
    got = np.array([list(map(int, ln.split())) for ln in out.splitlines()], dtype=np.int64)
    want_rq = np.array([requantize_output(np.array([a]), mu, s, int(z), int(lo_), int(hi_))[0]
                        for a, mu, s, z, lo_, hi_ in zip(acc[:500], mult[:500], shift[:500], zp[:500],
                                                         lo[:500], hi[:500])])
    np.testing.assert_array_equal(got[:500, 0], want_rq)
    # the rest vectorized (requantize_output broadcasts element-wise)
    y = np.clip(rounding_shift_right(acc * mult.astype(np.int64), 31 - shift.astype(np.int64)) + zp, lo, hi)
    np.testing.assert_array_equal(got[:, 0], y)
    np.testing.assert_array_equal(got[:, 1], rounding_divide(num, den))
    np.testing.assert_array_equal(got[keep, 2], rounding_shift_right(t[keep], sh[keep]))
