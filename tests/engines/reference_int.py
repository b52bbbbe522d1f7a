"""A slow, direct-loop int8 reference engine, used only by tests.

Written straight from docs/integer-semantics.md, independently of the golden
engine: one loop over output positions (and groups) with an int64 numpy dot
inside, requantization and rounding in plain Python integers (numpy object
arrays), no BLAS in floating point, no strided-view tricks. Only the
constants (multipliers, shifts, clamp bounds) come from the QuantModel, since
they are parameters of the ops, not their semantics.
"""

from __future__ import annotations

import numpy as np

from mcutrain.graph import INPUT, Op
from mcutrain.qmodel import QuantModel


def py_round_shift(p: np.ndarray, n: np.ndarray) -> np.ndarray:
    """round_half_away(p / 2^n) on Python ints: sign(p) * ((|p| + 2^(n-1)) >> n)."""
    p = np.asarray(p, dtype=object)
    n = np.broadcast_to(np.asarray(n, dtype=object), p.shape)
    mag = np.frompyfunc(lambda v, k: (abs(v) + (1 << (k - 1))) >> k, 2, 1)(p, n)
    return np.where(p < 0, -mag, mag)


def py_requantize(acc: np.ndarray, mult: np.ndarray, shift: np.ndarray, zp: int,
                  lo: int, hi: int) -> np.ndarray:
    """clamp(round_half_away(acc * mult / 2^(31 - shift)) + zp, lo, hi), channels on the last axis."""
    acc = np.asarray(acc, dtype=object)
    mult = np.asarray(mult).astype(object)
    n = 31 - np.asarray(shift).astype(object)
    r = py_round_shift(acc * mult, n) + zp
    return np.clip(r, lo, hi).astype(np.int8)


def py_round_div(s: np.ndarray, d: int) -> np.ndarray:
    """round_half_away(s / d) for d > 0 on Python ints."""
    s = np.asarray(s, dtype=object)
    mag = np.frompyfunc(lambda v: (abs(v) + d // 2) // d, 1, 1)(s)
    return np.where(s < 0, -mag, mag)


def conv2d(x, zx, w, bias, mult, shift, zy, lo, hi, stride, padding, groups):
    n, h, wd, c = x.shape
    o, kh, kw, cig = w.shape
    pt, pb, pl, pr = padding
    sh, sw = stride
    xp = np.full((n, h + pt + pb, wd + pl + pr, c), zx, np.int64)
    xp[:, pt:pt + h, pl:pl + wd, :] = x
    ho, wo = (h + pt + pb - kh) // sh + 1, (wd + pl + pr - kw) // sw + 1
    opg = o // groups
    acc = np.zeros((n, ho, wo, o), np.int64)
    for i in range(ho):
        for j in range(wo):
            patch = xp[:, i * sh:i * sh + kh, j * sw:j * sw + kw, :] - zx  # (n, kh, kw, c)
            for g in range(groups):
                pg = patch[..., g * cig:(g + 1) * cig].reshape(n, -1)
                wg = w[g * opg:(g + 1) * opg].astype(np.int64).reshape(opg, -1)
                acc[:, i, j, g * opg:(g + 1) * opg] = pg @ wg.T
    acc += bias.astype(np.int64)
    assert np.abs(acc).max(initial=0) < 2**31, "int32 accumulator overflow"
    return py_requantize(acc, mult, shift, zy, lo, hi)


def linear(x, zx, w, bias, mult, shift, zy, lo, hi):
    acc = (x.astype(np.int64) - zx) @ w.astype(np.int64).T + bias.astype(np.int64)
    assert np.abs(acc).max(initial=0) < 2**31, "int32 accumulator overflow"
    return py_requantize(acc, mult, shift, zy, lo, hi)


def pool(x, kernel, stride, kind):
    n, h, w, c = x.shape
    (kh, kw), (sh, sw) = kernel, stride
    ho, wo = (h - kh) // sh + 1, (w - kw) // sw + 1
    y = np.zeros((n, ho, wo, c), np.int8)
    for i in range(ho):
        for j in range(wo):
            win = x[:, i * sh:i * sh + kh, j * sw:j * sw + kw, :].astype(np.int64)
            if kind == "max":
                y[:, i, j, :] = win.max(axis=(1, 2))
            else:
                y[:, i, j, :] = py_round_div(win.sum(axis=(1, 2)), kh * kw).astype(np.int8)
    return y


def add(a, za, b, zb, ma, mb, nsh, zy, lo, hi):
    t = (a.astype(object) - za) * ma + (b.astype(object) - zb) * mb
    return np.clip(py_round_shift(t, nsh) + zy, lo, hi).astype(np.int8)


def run(qm: QuantModel, x_q: np.ndarray) -> dict[str, np.ndarray]:
    """Every int8 tensor of the forward pass, like `int_engine.run`."""
    t = {INPUT: x_q}
    for node in qm.graph.nodes:
        x = t[node.inputs[0]]
        a = node.attrs
        if node.op in (Op.CONV2D, Op.LINEAR):
            args = (qm.zero_point(node.inputs[0]), qm.weights[node.name], qm.biases[node.name],
                    *qm.requant_params(node), qm.zero_point(node.name), *qm.act_range(node))
            y = (linear(x, *args) if node.op == Op.LINEAR
                 else conv2d(x, *args, a["stride"], a["padding"], a["groups"]))
        elif node.op == Op.MAXPOOL:
            y = pool(x, a["kernel"], a["stride"], "max")
        elif node.op == Op.AVGPOOL:
            y = pool(x, a["kernel"], a["stride"], "avg")
        elif node.op == Op.GLOBAL_AVGPOOL:
            y = pool(x, x.shape[1:3], (1, 1), "avg")
        elif node.op == Op.FLATTEN:
            y = x.reshape(len(x), -1)
        elif node.op in (Op.RELU, Op.RELU6):
            lo, hi = qm.act_range(node)
            y = np.clip(x, lo, hi).astype(np.int8)
        elif node.op == Op.ADD:
            b = t[node.inputs[1]]
            y = add(x, qm.zero_point(node.inputs[0]), b, qm.zero_point(node.inputs[1]),
                    *qm.add_params(node), qm.zero_point(node.name), *qm.act_range(node))
        else:
            raise ValueError(f"reference has no op {node.op}")
        t[node.name] = y
    return t
