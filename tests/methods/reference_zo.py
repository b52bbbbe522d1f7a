"""A slow, direct-loop reference of one `zo` step: plain Python ints, one query at a time.

Independent of the method's batching: every query is a full forward pass of
a perturbed copy of the model through the engine's node kernels, the
perturbation comes from sequential `next_u32` calls, and every sum is a loop
over Python ints. Only the float32 QAS formula is shared text (it is the spec).
"""

from __future__ import annotations

import numpy as np

from mcutrain.engines import int_engine
from mcutrain.methods.trainable import resolve_trainable
from mcutrain.methods.zo import ZOConfig, plan_units
from mcutrain.qmodel import QuantModel
from mcutrain.quant.loss import int_softmax_cross_entropy
from mcutrain.quant.rng import XorShift32


def _losses(qm: QuantModel, x_q: np.ndarray, y: np.ndarray, override: dict | None = None) -> list[int]:
    t = {"input": x_q}
    for node in qm.graph.nodes:
        if override and node.name in override:
            t[node.name] = override[node.name]
        else:
            t[node.name] = int_engine.run_node(qm, node, [t[s] for s in node.inputs])
    logits = t[qm.graph.output].reshape(len(x_q), -1)
    qp = qm.act_qparams[qm.graph.output]
    loss, _ = int_softmax_cross_entropy(logits, float(qp.scale), int(qp.zero_point), y)
    return [int(v) for v in loss], t


def _signs(rng: XorShift32, n: int) -> list[int]:
    """n packed Rademacher signs: bit e % 32 of the (e // 32)-th fresh draw, set means -1."""
    words = [rng.next_u32() for _ in range((n + 31) // 32)]
    return [-1 if (words[e // 32] >> (e % 32)) & 1 else 1 for e in range(n)]


def _clone(qm: QuantModel) -> QuantModel:
    return QuantModel(qm.graph, qm.act_qparams, {k: v.copy() for k, v in qm.weights.items()},
                      qm.weight_qparams, {k: v.copy() for k, v in qm.biases.items()})


def _round_half_away(v: np.float32) -> int:
    f = float(v)
    t = int(f)                       # trunc
    return t + (1 if f - t >= 0.5 else -1 if f - t <= -0.5 else 0)


def _f32(v) -> np.float32:
    return np.float32(v)


def reference_step(qm: QuantModel, x: np.ndarray, y: np.ndarray, lr: float, cfg: ZOConfig,
                   rng_state: int) -> tuple[dict, dict, int]:
    """New (weights, biases, rng state) after one zo step, computed the slow way."""
    assert cfg.mask == "none"
    qm = _clone(qm)
    x_q = int_engine.quantize_input(qm, x)
    bsz = len(x)
    l0, base = _losses(qm, x_q, y)
    layers = resolve_trainable(qm.graph, cfg.trainable)
    units = plan_units(qm, layers, cfg.perturb)
    rng = XorShift32()
    rng.state = rng_state
    n = cfg.queries
    grads = {}
    for unit in units:
        if unit.kind == "wp":
            flat = []
            for m in unit.layers:
                flat += [("w", m, i) for i in range(qm.weights[m].size)]
                flat += [("b", m, i) for i in range(qm.biases[m].size)]
            s = [0] * len(flat)
            for _ in range(n):
                u = _signs(rng, len(flat))
                pert = _clone(qm)
                for (kind, m, i), ui in zip(flat, u):
                    if kind == "w":
                        w = pert.weights[m].reshape(-1)
                        w[i] = max(-127, min(127, int(w[i]) + cfg.sigma_w * ui))
                    else:
                        b = pert.biases[m]
                        b[i] = max(-(2**31), min(2**31 - 1, int(b[i]) + cfg.sigma_b * ui))
                lq, _ = _losses(pert, x_q, y)
                dl = sum(lq) - sum(l0)
                s = [a + dl * ui for a, ui in zip(s, u)]
            d = len(flat)
            gamma = _f32(n) / _f32(n + d - 1) if cfg.gns else _f32(1)
            off = 0
            for m in unit.layers:
                nw, nb = qm.weights[m].size, qm.biases[m].size
                o = qm.weights[m].shape[0]
                cw = (gamma / _f32(n * cfg.sigma_w * bsz)) * _f32(2.0**-16)
                cb = (gamma / _f32(n * cfg.sigma_b * bsz)) * _f32(2.0**-16)
                grads[m] = (s[off:off + nw], s[off + nw:off + nw + nb], [cw] * o, [cb] * o)
                off += nw + nb
        else:
            m = unit.layers[0]
            node = qm.graph.node(m)
            yb = base[m]
            lo, hi = qm.act_range(m)
            d_out = yb[0].size
            gy = [[0] * d_out for _ in range(bsz)]
            for _ in range(n):
                flat_u = _signs(rng, bsz * d_out)
                u = [flat_u[b * d_out:(b + 1) * d_out] for b in range(bsz)]
                yp = yb.copy().reshape(bsz, -1)
                for b in range(bsz):
                    for j in range(d_out):
                        v = int(yp[b, j])
                        if lo < v < hi:
                            yp[b, j] = max(lo, min(hi, v + cfg.sigma_node * u[b][j]))
                        else:
                            u[b][j] = 0
                lq, _ = _losses(qm, x_q, y, {m: yp.reshape(yb.shape)})
                for b in range(bsz):
                    dl = lq[b] - l0[b]
                    for j in range(d_out):
                        gy[b][j] += dl * u[b][j]
            gya = np.array(gy, dtype=object).reshape(yb.shape)
            pw, pb = direct_local_grad(qm, m, base[node.inputs[0]], gya)
            gamma = _f32(bsz * n) / _f32(bsz * n + d_out - 1) if cfg.gns else _f32(1)
            o = qm.weights[m].shape[0]
            s_w = np.broadcast_to(qm.weight_qparams[m].scale, (o,)).astype(np.float32)
            c0 = (gamma / _f32(n * cfg.sigma_node * bsz)) * _f32(2.0**-16)
            coef = [_f32(c0) * ((_f32(qm.scale(node.inputs[0])) * s_w[c]) / _f32(qm.scale(m)))
                    for c in range(o)]
            grads[m] = (list(pw.reshape(-1)), list(pb), coef, coef)
    for m in layers:
        sw_sum, sb_sum, cw, cb = grads[m]
        node = qm.graph.node(m)
        w = qm.weights[m]
        o = w.shape[0]
        per = w.size // o
        s_w = np.broadcast_to(qm.weight_qparams[m].scale, (o,)).astype(np.float32)
        s_x = _f32(qm.scale(node.inputs[0]))
        wf = w.reshape(-1).copy()
        for i in range(w.size):
            c = i // per
            k = _f32(lr) * cw[c]
            if cfg.qas:
                k = k / (s_w[c] * s_w[c])
            delta = min(max(_f32(sw_sum[i]) * k, _f32(-2.0**30)), _f32(2.0**30))
            step = _round_half_away(delta)
            if cfg.max_step:                      # the weight-step limit (integer-semantics 12.5)
                step = max(-cfg.max_step, min(cfg.max_step, step))
            wf[i] = max(-127, min(127, int(wf[i]) - step))
        qm.weights[m] = wf.reshape(w.shape).astype(np.int8)
        bb = qm.biases[m].copy()
        for c in range(o):
            sb = s_x * s_w[c]
            k = _f32(lr) * cb[c]
            if cfg.qas:
                k = k / (sb * sb)
            delta = min(max(_f32(sb_sum[c]) * k, _f32(-2.0**30)), _f32(2.0**30))
            bb[c] = max(-(2**31), min(2**31 - 1, int(bb[c]) - _round_half_away(delta)))
        qm.biases[m] = bb
    return qm.weights, qm.biases, rng.state


def direct_local_grad(qm: QuantModel, layer: str, x: np.ndarray, g_acc: np.ndarray):
    """P_w[c, i, j, k] = sum over samples and output positions of (x - z_x) * g_acc, Python ints."""
    node = qm.graph.node(layer)
    zx = qm.zero_point(node.inputs[0])
    w = qm.weights[layer]
    o = w.shape[0]
    if w.ndim == 2:
        xi = x.reshape(len(x), -1)
        pw = [[sum((int(xi[b, k]) - zx) * int(g_acc[b, c]) for b in range(len(x)))
               for k in range(w.shape[1])] for c in range(o)]
        pb = [sum(int(g_acc[b, c]) for b in range(len(x))) for c in range(o)]
        return np.array(pw, dtype=object), pb
    a = node.attrs
    _, kh, kw, cig = w.shape
    sh, sw = a["stride"]
    pt, _, pl, _ = a["padding"]
    groups = a["groups"]
    opg = o // groups
    nb, ho, wo, _ = g_acc.shape
    h, wd = x.shape[1:3]
    pw = np.zeros(w.shape, dtype=object)
    pb = [0] * o
    for b in range(nb):
        for r in range(ho):
            for q in range(wo):
                for c in range(o):
                    g = int(g_acc[b, r, q, c])
                    pb[c] += g
                    if g == 0:
                        continue
                    gidx = c // opg
                    for i in range(kh):
                        for j in range(kw):
                            yy, xx = r * sh + i - pt, q * sw + j - pl
                            if 0 <= yy < h and 0 <= xx < wd:
                                for k in range(cig):
                                    pw[c, i, j, k] += (int(x[b, yy, xx, gidx * cig + k]) - zx) * g
    return pw, pb
