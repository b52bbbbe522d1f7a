"""A slow, plain-loop reference of one FQT training step, for bit-exact comparison.

It covers the tiny graph of `tiny_graph()` (conv 3x3 + relu, maxpool, flatten,
linear + relu, linear) in every precision, with partial updates. Every value is
a Python int or a numpy float32 scalar, every sum a loop in the order that
docs/integer-semantics.md ("FQT training operations") defines. It reuses only
the quant primitives (qparams, the one requantize, the integer loss, xorshift32),
which have their own tests; everything the FQT code vectorizes is written out here.
"""

from __future__ import annotations

import math

import numpy as np

from mcutrain import graph as G
from mcutrain.graph import INPUT
from mcutrain.quant.fixedpoint import activation_range, output_multiplier, quantize_multiplier, requantize
from mcutrain.quant.loss import PROB_FRAC_BITS, int_softmax_cross_entropy
from mcutrain.quant.qparams import qparams_from_range

F = np.float32


def tiny_graph(seed: int = 0) -> G.Graph:
    from mcutrain.zoo import he_init
    nodes = [G.conv2d("conv", INPUT, 3, 3, padding=1, act="relu", in_channels=1),
             G.maxpool("pool", "conv", 2), G.flatten("flat", "pool"),
             G.linear("fc1", "flat", 4, act="relu", in_features=12),
             G.linear("fc2", "fc1", 3, in_features=4)]
    return he_init(G.Graph((4, 4, 1), nodes, "tiny"), seed)


def rsr(v: int, n: int) -> int:
    """round_half_away(v / 2^n) on Python ints."""
    m = (abs(v) + (1 << (n - 1))) >> n
    return -m if v < 0 else m


def rha(x: F) -> float:
    """round half away from zero of a float."""
    t = math.trunc(float(x))
    return t + (1 if float(x) - t >= 0.5 else -1 if float(x) - t <= -0.5 else 0)


def fl(x) -> int:
    return math.floor(float(x))


def pow2_qp(lo, hi):
    from mcutrain.methods.fqt_common import pow2_symmetric_qparams
    return pow2_symmetric_qparams(lo, hi)


class Ref:
    """Reads an FQT object's state (a deep copy) and performs one step on it with loops."""

    def __init__(self, m):
        self.m = m
        self.p = m.prec
        self.q = m.prec.acts != "f32"

    # -- helpers
    def qp(self, t):
        return self.m.act_qparams(t)

    def centred_x(self, t, v):
        if not self.q:
            return F(v)
        return int(v) - int(self.qp(t).zero_point)

    def wc(self, name):
        w, qp = self.m.w[name], self.m.wqp[name]
        if qp is None:
            return w.astype(F)
        zp = qp.zero_point
        return w.astype(np.int64) - (zp.reshape(-1, *([1] * (w.ndim - 1))) if zp.ndim else zp)

    def out_q(self, name, acc, s_acc_c, act, dynamic_ranges):
        """Requantize a parametric layer's accumulators (dict index -> value) as the method does."""
        m = self.m
        src = m.graph.node(name).inputs[0]
        sx = F(self.qp(src).scale)
        sw = m.wqp[name].scale
        lo = min(F(F(v) * s_acc_c[idx[-1]]) for idx, v in acc.items())
        hi = max(F(F(v) * s_acc_c[idx[-1]]) for idx, v in acc.items())
        if act == "relu":
            lo, hi = max(lo, F(0)), max(hi, F(0))
        dynamic_ranges[name] = (F(lo), F(hi))
        qy = self.qp(name)
        a_lo, a_hi = activation_range(qy, act)
        out = {}
        if self.p.acts == "u8":
            mm = F(F(sx * F(sw)) / qy.scale)
            for idx, v in acc.items():
                out[idx] = min(max(fl(F(v) * mm) + int(qy.zero_point), a_lo), a_hi)
        else:
            o = len(s_acc_c)
            mult, shift = output_multiplier(sx, np.broadcast_to(sw, (o,)), qy.scale)
            for idx, v in acc.items():
                c = idx[-1]
                r = int(requantize(np.array([v]), int(mult[c]), int(shift[c]))[0])
                out[idx] = min(max(r + int(qy.zero_point), a_lo), a_hi)
        return out

    # -- the step
    def step(self, x, y, lr):
        m, p = self.m, self.p
        lr = F(lr)
        bsz = x.shape[0]
        ranges_act, ranges_err, ranges_grad = {}, {}, {}
        # input
        if self.q:
            xq = self.qp(INPUT).quantize(x, "floor" if p.acts == "u8" else "nearest").astype(np.int64)
        else:
            xq = x.astype(F)
        # conv (3 filters, 3x3, pad 1, stride 1) + relu
        wcv, bcv = self.wc("conv"), m.b["conv"]
        acc = {}
        for b in range(bsz):
            for oh in range(4):
                for ow in range(4):
                    for o in range(3):
                        s = 0 if self.q else F(0)
                        for i in range(3):
                            for j in range(3):
                                hh, ww = oh + i - 1, ow + j - 1
                                xv = self.centred_x(INPUT, xq[b, hh, ww, 0]) if 0 <= hh < 4 and 0 <= ww < 4 \
                                    else (0 if self.q else F(0))
                                s = s + xv * wcv[o, i, j, 0] if self.q else F(s + F(xv * wcv[o, i, j, 0]))
                        acc[(b, oh, ow, o)] = s + int(bcv[o]) if self.q else F(s + bcv[o])
        if self.q:
            s_acc = [F(F(self.qp(INPUT).scale) * F(sc)) for sc in np.broadcast_to(m.wqp["conv"].scale, (3,))]
            yconv = self.out_q("conv", acc, s_acc, "relu", ranges_act)
        else:
            yconv = {k: max(v, F(0)) for k, v in acc.items()}
        # maxpool 2x2
        ypool, arg = {}, {}
        for b in range(bsz):
            for oh in range(2):
                for ow in range(2):
                    for c in range(3):
                        best, bi = None, 0
                        for t, (i, j) in enumerate([(0, 0), (0, 1), (1, 0), (1, 1)]):
                            v = yconv[(b, 2 * oh + i, 2 * ow + j, c)]
                            if best is None or v > best:
                                best, bi = v, t
                        ypool[(b, oh, ow, c)], arg[(b, oh, ow, c)] = best, bi
        flat = {(b, (oh * 2 + ow) * 3 + c): v for (b, oh, ow, c), v in ypool.items()}
        # linear layers
        def linear(name, xin, src, n_in, n_out, act):
            w, bias = self.wc(name), m.b[name]
            accl = {}
            for b in range(bsz):
                for o in range(n_out):
                    s = 0 if self.q else F(0)
                    for k in range(n_in):
                        xv = self.centred_x(src, xin[(b, k)])
                        s = s + xv * int(w[o, k]) if self.q else F(s + F(xv * w[o, k]))
                    accl[(b, o)] = s + int(bias[o]) if self.q else F(s + bias[o])
            if not self.q:
                return {k: (max(v, F(0)) if act == "relu" else v) for k, v in accl.items()}
            sws = np.broadcast_to(m.wqp[name].scale, (n_out,))
            s_acc_l = [F(F(self.qp(src).scale) * F(sc)) for sc in sws]
            return self.out_q(name, accl, s_acc_l, act, ranges_act)
        y1 = linear("fc1", flat, "flat", 12, 4, "relu")
        y2 = linear("fc2", y1, "fc1", 4, 3, "none")
        logits = np.array([[y2[(b, o)] for o in range(3)] for b in range(bsz)])
        # loss
        if p.acts == "u8":
            qpo = self.qp("fc2")
            loss, err = int_softmax_cross_entropy(logits.astype(np.int16) - 128, float(qpo.scale),
                                                  int(qpo.zero_point) - 128, y)
        elif p.acts == "s8":
            qpo = self.qp("fc2")
            loss, err = int_softmax_cross_entropy(logits.astype(np.int8), float(qpo.scale),
                                                  int(qpo.zero_point), y)
        else:               # each sample's logits quantized with that sample's own range
            lg = logits.astype(F)
            loss, err = np.zeros(bsz, np.int32), np.zeros((bsz, 3), np.int32)
            for b in range(bsz):
                qpl = qparams_from_range(lg[b].min(), lg[b].max(), "int8")
                lb, eb = int_softmax_cross_entropy(qpl.quantize(lg[b:b + 1], "nearest"), float(qpl.scale),
                                                   int(qpl.zero_point), y[b:b + 1])
                loss[b], err[b] = lb[0], eb[0]
        loss_max = max(m.loss_max, int(loss.max()))
        # logit error
        unit = F(2.0**-PROB_FRAC_BITS)
        e2, s_e2 = self.quant_err("fc2", {(b, o): int(err[b, o]) for b in range(bsz) for o in range(3)},
                                  unit, ranges_err, from_loss=True)
        grads = {}
        # fc2: no act; partial; weight grad; error to fc1
        if m.cfg.partial_output:          # the output layer is pruned only on request
            e2, keep2 = self.partial(e2, loss, loss_max, bsz, 3, 1)
        else:
            keep2 = {(b, o): True for b in range(bsz) for o in range(3)}
        grads["fc2"] = self.lin_grad("fc2", y1, "fc1", e2, s_e2, 4, 3, keep2, ranges_grad)
        e1, s_e1 = self.lin_bwd_in("fc2", e2, s_e2, 4, 3, "fc1", ranges_err)
        # fc1: relu mask
        z1 = int(self.qp("fc1").zero_point) if self.q else None
        for b in range(bsz):
            for o in range(4):
                alive = y1[(b, o)] > z1 if self.q else y1[(b, o)] > 0
                if not alive:
                    e1[(b, o)] = 0 if p.errors != "f32" else F(0)
        e1, keep1 = self.partial(e1, loss, loss_max, bsz, 4, 1)
        grads["fc1"] = self.lin_grad("fc1", flat, "flat", e1, s_e1, 12, 4, keep1, ranges_grad)
        ef, s_ef = self.lin_bwd_in("fc1", e1, s_e1, 12, 4, "flat", ranges_err)
        # flatten -> pool -> conv error (routing to the argmax)
        zero = 0 if p.errors != "f32" else F(0)
        ec = {(b, h, w, c): zero for b in range(bsz) for h in range(4) for w in range(4) for c in range(3)}
        for (b, oh, ow, c), t in arg.items():
            i, j = divmod(t, 2)
            ec[(b, 2 * oh + i, 2 * ow + j, c)] = ef[(b, (oh * 2 + ow) * 3 + c)]
        zc = int(self.qp("conv").zero_point) if self.q else None
        for k in ec:
            alive = yconv[k] > zc if self.q else yconv[k] > 0
            if not alive:
                ec[k] = zero
        ec, keepc = self.partial(ec, loss, loss_max, bsz, 3, 16)
        grads["conv"] = self.conv_grad(xq, ec, s_ef, keepc, ranges_grad)
        return self.update(grads, ranges_act, ranges_err, ranges_grad, lr, loss, loss_max)

    def quant_err(self, t, acc, s_acc, ranges_err, from_loss=False):
        """Requantize error accumulators into tensor t's error format (the method's _to_err)."""
        m, p = self.m, self.p
        if p.errors == "f32":
            if from_loss:
                return {k: F(F(v) * s_acc) for k, v in acc.items()}, None
            return acc, None
        lo = min(F(F(v) * s_acc) for v in acc.values())
        hi = max(F(F(v) * s_acc) for v in acc.values())
        ranges_err[t] = (lo, hi)
        ema = m.err_ema[t]
        if p.errors == "u8":
            qp = ema.qparams("uint8")
            mm = F(F(s_acc) / qp.scale)
            z = int(qp.zero_point)
            return {k: min(max(fl(F(v) * mm) + z, 0), 255) - z for k, v in acc.items()}, F(qp.scale)
        qp = pow2_qp(ema.lo, ema.hi)
        if from_loss:
            kk = int(np.frexp(np.float64(qp.scale))[1]) - 1
            n = PROB_FRAC_BITS + kk
            out = {k: min(max(rsr(v, n) if n >= 1 else v << -n, -127), 127) for k, v in acc.items()}
            return out, F(qp.scale)
        mult, shift = quantize_multiplier(np.float64(F(s_acc)) / np.float64(qp.scale))
        out = {k: min(max(int(requantize(np.array([v]), mult, shift)[0]), -127), 127) for k, v in acc.items()}
        return out, F(qp.scale)

    def partial(self, e, loss, loss_max, bsz, n_out, positions):
        """Top-k filters per sample by sum |e| over positions, ties to the lower index."""
        c = self.m.cfg      # the config itself, not the method's decisions: the reference stays independent
        keep = {(b, o): True for b in range(bsz) for o in range(n_out)}
        if c.lambda_min >= 1.0:
            return e, keep
        lo, hi = F(c.lambda_min), F(c.lambda_max)
        for b in range(bsz):
            r = F(abs(F(int(loss[b]))) / F(max(loss_max, 1)))
            lam = min(F(lo + F(r * F(hi - lo))), F(1))
            k = min(max(fl(F(lam * F(n_out))), 1), n_out)
            mags = []
            for o in range(n_out):
                s = 0 if self.p.errors != "f32" else F(0)
                for key, v in e.items():
                    if key[0] == b and key[-1] == o:
                        s = s + abs(v) if self.p.errors != "f32" else F(s + abs(v))
                mags.append(s)
            order = sorted(range(n_out), key=lambda o: (-mags[o], o))
            for rank, o in enumerate(order):
                keep[(b, o)] = rank < k
        zero = 0 if self.p.errors != "f32" else F(0)
        return {key: (v if keep[(key[0], key[-1])] else zero) for key, v in e.items()}, keep

    def grad_quant(self, name, gacc, sx, se, ranges_grad, shape):
        """uint8: per-sample gradient quantized with the layer's gradient EMA, summed over the batch."""
        s_g = F(sx * se)
        reals = [F(F(v) * s_g) for v in gacc.values()]
        ranges_grad[name] = (min(reals), max(reals))
        qg = self.m.grad_ema[name].qparams("uint8")
        mm = F(F(sx * se) / qg.scale)
        z = int(qg.zero_point)
        tot = {}
        for (_b, *rest), v in gacc.items():
            tot[tuple(rest)] = tot.get(tuple(rest), 0) + min(max(fl(F(v) * mm) + z, 0), 255) - z
        return {k: F(F(v) * F(qg.scale)) for k, v in tot.items()}

    def finish_grad(self, name, per_sample, sx, se, ranges_grad):
        """Per-sample accumulators -> real gradient (dict keyed by weight index)."""
        p = self.p
        if p.quantize_sample_grads:
            return self.grad_quant(name, per_sample, sx, se, ranges_grad, None)
        tot = {}
        for (_b, *rest), v in sorted(per_sample.items()):
            k = tuple(rest)
            if p.errors == "f32":
                tot[k] = F(tot.get(k, F(0)) + v)
            else:
                tot[k] = tot.get(k, 0) + v
        if p.errors == "s8":
            return {k: F(F(v) * F(sx * se)) for k, v in tot.items()}
        if sx is not None:
            return {k: F(v * sx) for k, v in tot.items()}
        return tot

    def bias_grad(self, e, se, bsz, n_out):
        tot = {}
        for b in range(bsz):
            per = {}
            for key in sorted(e):
                if key[0] != b:
                    continue
                o = key[-1]
                per[o] = F(per.get(o, F(0)) + e[key]) if self.p.errors == "f32" else per.get(o, 0) + e[key]
            for o in range(n_out):
                v = per.get(o, 0)
                tot[o] = F(tot.get(o, F(0)) + v) if self.p.errors == "f32" else tot.get(o, 0) + v
        return {o: (F(F(v) * se) if se is not None else F(v)) for o, v in tot.items()}

    def lin_grad(self, name, xin, src, e, se, n_in, n_out, keep, ranges_grad):
        bsz = len({k[0] for k in e})
        sx = F(self.qp(src).scale) if self.q else None
        per = {}
        for b in range(bsz):
            for o in range(n_out):
                for k in range(n_in):
                    xv = self.centred_x(src, xin[(b, k)])
                    per[(b, o, k)] = F(F(xv) * e[(b, o)]) if self.p.errors == "f32" else xv * e[(b, o)]
        g = self.finish_grad(name, per, sx, se, ranges_grad)
        upd = [any(keep[(b, o)] for b in range(bsz)) for o in range(n_out)]
        return g, self.bias_grad(e, se, bsz, n_out), upd

    def conv_grad(self, xq, e, se, keep, ranges_grad):
        bsz = xq.shape[0]
        sx = F(self.qp(INPUT).scale) if self.q else None
        per = {}
        for b in range(bsz):
            for o in range(3):
                for i in range(3):
                    for j in range(3):
                        s = 0 if self.p.errors != "f32" else F(0)
                        for oh in range(4):
                            for ow in range(4):
                                hh, ww = oh + i - 1, ow + j - 1
                                inside = 0 <= hh < 4 and 0 <= ww < 4
                                xv = self.centred_x(INPUT, xq[b, hh, ww, 0]) if inside else 0
                                ev = e[(b, oh, ow, o)]
                                s = F(s + F(F(xv) * ev)) if self.p.errors == "f32" else s + xv * ev
                        per[(b, o, i, j, 0)] = s
        g = self.finish_grad("conv", per, sx, se, ranges_grad)
        upd = [any(keep[(b, o)] for b in range(bsz)) for o in range(3)]
        return g, self.bias_grad(e, se, bsz, 3), upd

    def lin_bwd_in(self, name, e, se, n_in, n_out, dst, ranges_err):
        m, p = self.m, self.p
        w = self.wc(name)
        bsz = len({k[0] for k in e})
        if p.errors == "s8":
            sw = m.wqp[name].scale
            smax = F(sw.max())
            r = [int(rha(F(F(sw[o] / smax) * F(2**15)))) for o in range(n_out)]
            e16 = {k: rsr(v * r[k[1]], 7) for k, v in e.items()}
            acc = {(b, i): sum(e16[(b, o)] * int(w[o, i]) for o in range(n_out))
                   for b in range(bsz) for i in range(n_in)}
            return self.quant_err(dst, acc, F(F(smax * se) * F(2.0**-8)), ranges_err)
        if p.errors == "u8":
            acc = {(b, i): sum(e[(b, o)] * int(w[o, i]) for o in range(n_out))
                   for b in range(bsz) for i in range(n_in)}
            return self.quant_err(dst, acc, F(F(m.wqp[name].scale) * se), ranges_err)
        out = {}
        for b in range(bsz):
            for i in range(n_in):
                s = F(0)
                for o in range(n_out):
                    s = F(s + F(F(w[o, i]) * e[(b, o)]))
                out[(b, i)] = F(s * F(m.wqp[name].scale)) if m.wqp[name] is not None else s
        return out, None

    def update(self, grads, ranges_act, ranges_err, ranges_grad, lr, loss, loss_max):
        """The end of a step, written out: EMAs, standardization, weight and bias updates."""
        m, p = self.m, self.p
        res = {"loss": loss, "loss_max": loss_max}

        def ema(lo_hi, rng, alpha):
            a = F(alpha)
            keep = F(F(1) - a)
            return F(F(keep * lo_hi[0]) + F(a * rng[0])), F(F(keep * lo_hi[1]) + F(a * rng[1]))
        act = {t: (F(e.lo), F(e.hi)) for t, e in m.act_ema.items()}
        for t, rng in ranges_act.items():
            act[t] = ema(act[t], rng, m.cfg.alpha_a)
        res["act"] = act
        res["err"] = {t: ema((F(m.err_ema[t].lo), F(m.err_ema[t].hi)), rng, m.cfg.alpha_e)
                      for t, rng in ranges_err.items()}
        res["grad"] = {t: ema((F(m.grad_ema[t].lo), F(m.grad_ema[t].hi)), rng, m.cfg.alpha_e)
                       for t, rng in ranges_grad.items()}
        # qparams after the EMA step
        def act_qp(t):
            owner = m.owner[t]
            return qparams_from_range(act[owner][0], act[owner][1], "uint8" if p.acts == "u8" else "int8")
        rng_state = m.rng
        w_out, b_out, qp_out = {}, {}, {}
        for name in ("conv", "fc1", "fc2"):
            g, gb, upd = grads[name]
            w = m.w[name]
            o = w.shape[0]
            kk = int(np.prod(w.shape[1:]))
            keys = sorted(g)
            rows = [[g[k] for k in keys if k[0] == r] + [gb[r]] for r in range(o)]   # bias last
            st = m.norm.get(name, {"mu": np.zeros(o, F), "sd": np.zeros(o, F), "init": np.zeros(o, bool)})
            an = F(m.cfg.alpha_norm)
            keepn = F(F(1) - an)
            mu, sd = st["mu"].copy(), st["sd"].copy()
            ghat = np.zeros((o, kk + 1), F)
            den = np.zeros(o, F)
            for r in range(o):
                s = F(0)
                for v in rows[r]:
                    s = F(s + v)
                mu_b = F(s / F(kk + 1))
                s = F(0)
                for v in rows[r]:
                    d = F(v - mu_b)
                    s = F(s + F(d * d))
                sd_b = F(np.sqrt(F(s / F(kk + 1))))
                if upd[r]:
                    if st["init"][r]:
                        mu[r] = F(F(keepn * mu[r]) + F(an * mu_b))
                        sd[r] = F(F(keepn * sd[r]) + F(an * sd_b))
                    else:
                        mu[r], sd[r] = mu_b, sd_b
                den[r] = F(sd[r] + F(1e-12))
                for k in range(kk + 1):
                    ghat[r, k] = F(F(rows[r][k] - mu[r]) / den[r]) if upd[r] and sd[r] != 0 else F(0)
            res[f"norm/{name}"] = (mu, sd)
            w2 = w.reshape(o, kk)
            if p.weights == "f32":
                w_out[name] = np.array([[F(w2[r, k] - F(lr * ghat[r, k])) for k in range(kk)]
                                        for r in range(o)])
                b_out[name] = np.array([F(m.b[name][r] - F(lr * ghat[r, kk])) for r in range(o)])
                continue
            qp = m.wqp[name]
            lrs = [F(lr * m.step_scale[name][r]) if p.relative_update else lr for r in range(o)]
            new = np.zeros((o, kk), F)
            for r in range(o):
                for k in range(kk):
                    z = int(qp.zero_point) if qp.zero_point.ndim == 0 else int(qp.zero_point[r])
                    s = F(qp.scale) if qp.scale.ndim == 0 else F(qp.scale[r])
                    new[r, k] = F(F(F(int(w2[r, k]) - z) * s) - F(lrs[r] * ghat[r, k]))
            wr = m.w_ema[name]
            if p.weights == "u8":
                lo, hi = ema((F(wr.lo), F(wr.hi)), (F(new.min()), F(new.max())), m.cfg.alpha_w)
                qn = qparams_from_range(lo, hi, "uint8")
                rnd = fl if p.weight_rounding == "floor" else rha
                q = np.array([[min(max(int(rnd(F(new[r, k] / qn.scale))) + int(qn.zero_point), 0), 255)
                               for k in range(kk)] for r in range(o)])
            else:
                lo, hi = wr.lo.copy(), wr.hi.copy()
                for r in range(o):
                    if upd[r]:
                        amax = max(abs(float(v)) for v in new[r])
                        lo[r], hi[r] = ema((lo[r], hi[r]), (F(-amax), F(amax)), m.cfg.alpha_w)
                qn = qparams_from_range(lo, hi, "int8", symmetric=True)
                q = w2.astype(np.int64).copy()
                for r in range(o):
                    if not upd[r]:
                        continue
                    for k in range(kk):
                        v = F(new[r, k] / F(qn.scale[r]))
                        if p.weight_rounding == "nearest":
                            q[r, k] = min(max(int(rha(v)), -127), 127)
                            continue
                        u = F(rng_state.next_u32() >> 8) * F(2.0**-24)
                        q[r, k] = min(max(fl(F(v + u)), -127), 127)
            w_out[name] = q
            qp_out[name] = qn
            # bias: to the new accumulator scale, with its update
            src = m.graph.node(name).inputs[0]
            sx_new = F(act_qp(src).scale)
            new_scale = [F(sx_new * F(s)) for s in np.broadcast_to(qn.scale, (o,))]
            old = m.b_acc_scale[name]
            bo = []
            for r in range(o):
                step = F(lrs[r] * ghat[r, kk])
                if new_scale[r] != old[r] or upd[r]:
                    real = F(F(F(int(m.b[name][r])) * old[r]) - step)
                    qv = rha(F(real / new_scale[r]))
                    zq = int(qn.zero_point) if qn.zero_point.ndim == 0 else int(qn.zero_point[r])
                    room = max(2**31 - 1 - 255 * sum(abs(int(v) - zq) for v in q[r]), 0)
                    bo.append(int(min(max(qv, -room), room)))
                else:
                    bo.append(int(m.b[name][r]))
            b_out[name] = np.array(bo)
        res["w"], res["b"], res["wqp"] = w_out, b_out, qp_out
        res["rng"] = rng_state.state
        return res
