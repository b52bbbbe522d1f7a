"""The parts of an FQT `model.c` around the step: state variables, stream jumps, the file template.

The state that moves every step (ranges, qparams, weight scales and ranges, standardization
statistics, bias scales, largest loss) is emitted as static C variables with the simulator's
current values, and listed as `StateEntry`s in blob order with the C that saves and loads each.
"""

from __future__ import annotations

import numpy as np

from mcutrain.codegen.cfloat import c_float
from mcutrain.codegen.cformat import c_array, c_comment
from mcutrain.codegen.emit_fqt_base import FqtEmitter
from mcutrain.codegen.state_blob import StateEntry
from mcutrain.engines.fqt_kernels import f32_multiplier
from mcutrain.quant.fixedpoint import output_multiplier
from mcutrain.quant.rng import XorShift32


def jump_columns(n: int) -> np.ndarray:
    """Columns of the xorshift32 jump matrix T^n: the state reached from each unit bit after n steps."""
    cols = []
    for b in range(32):
        g = XorShift32(1 << b)
        g.advance(n)
        cols.append(g.state)
    return np.array(cols, np.uint32)


def _f32(v) -> np.ndarray:
    return np.asarray(v, np.float32).reshape(-1)


def _norm_state(arr, m, name: str, lid: str, o: int) -> None:
    """The standardization statistics of a trained layer (EMA mean, sd, initialized flags)."""
    st = m.norm.get(name, {"mu": np.zeros(o), "sd": np.zeros(o), "init": np.zeros(o, bool)})
    arr("float", f"{lid}_norm_mu", st["mu"], "f32", f"{name}.norm_mu", f"{name}: gradient mean (EMA)")
    arr("float", f"{lid}_norm_sd", st["sd"], "f32", f"{name}.norm_sd", f"{name}: gradient sd (EMA)")
    arr("int8_t", f"{lid}_norm_init", st["init"].astype(np.int8), "s8", f"{name}.norm_init",
        f"{name}: statistics initialized")


def fixed_layer(m, name: str) -> bool:
    """Are layer `name`'s bias and requantization constants fixed for the whole training?

    A frozen layer before the first trained one (`not m.dynamic[name]`) has fixed weights and
    fixed input and output ranges (the simulator moves only dynamic ranges), so its bias, weight
    scales and multipliers never change: they are `static const` (Flash), left out of the state
    blob and of `fqt_prepare`. Only quantized weights and activations have such constants.
    """
    return m.prec.weights != "f32" and m.prec.quantized_acts and not m.dynamic[name]


def _fixed_constants(e: FqtEmitter, n, arr) -> list[str]:
    """Flash constants of a fixed layer: its int32 bias and the multipliers `fqt_prepare` would compute.

    int8: the per-channel fixed-point multiplier and shift of `output_multiplier` (the simulator's
    `_requant_s8`); uint8: the float32 multiplier of `f32_multiplier` and the weight zero point.
    """
    m, name, lid = e.m, n.name, e.lid(n.name)
    o = m.w[name].shape[0]
    sx = np.float32(m.act_qparams(n.inputs[0]).scale)
    sy = np.float32(m.act_qparams(name).scale)
    s_w = m.wqp[name].scale
    arr("int32_t", f"{lid}_bias", m.b[name], "s32", None, f"{name}: bias int32 (frozen, fixed ranges)",
        const=True)
    if e.u8:
        mult = np.asarray(f32_multiplier(sx, s_w, sy), np.float32).reshape(-1)[0]
        return [f"static const int32_t {lid}_w_zp = {int(m.wqp[name].zero_point)};\n"
                f"static const float {lid}_m = {c_float(float(mult))}; "
                f"/* forward multiplier float32(s_x * s_w) / s_y (fixed) */"]
    mult, shift = output_multiplier(sx, np.broadcast_to(s_w, (o,)), sy)
    return [c_array("int32_t", f"{lid}_mult", np.asarray(mult, np.int32), per_line=8,
                    comment=f"{name}: requantization multipliers (fixed ranges)"),
            c_array("int32_t", f"{lid}_shift", np.asarray(shift, np.int32), per_line=16,
                    comment=f"{name}: requantization shifts (fixed ranges)")]


def state_layout(e: FqtEmitter) -> tuple[list[str], list[StateEntry], list[tuple[str, str]]]:
    """C definitions of the FQT state, its blob entries and (save, load) code per entry."""
    m, g = e.m, e.g
    defs: list[str] = []
    entries: list[StateEntry] = []
    io: list[tuple[str, str]] = []

    def arr(ctype: str, name: str, values: np.ndarray, dtype: str, entry: str | None, comment: str,
            const: bool = False) -> None:
        v = np.asarray(values)
        if ctype == "float":
            items = ", ".join(c_float(x) for x in _f32(v).tolist())
            qual = "const " if const else ""
            defs.append(f"/* {c_comment(comment)} */\nstatic {qual}float {name}[{v.size}] = {{{items}}};")
        else:
            defs.append(c_array(ctype, name, v, per_line=16, comment=comment, const=const))
        if entry is not None:
            entries.append(StateEntry(entry, dtype, tuple(v.shape)))
            nb = entries[-1].nbytes
            io.append((f"memcpy(blob + off, {name}, {nb});", f"memcpy({name}, blob + off, {nb});"))

    def rng_struct(name: str, ema, entry: str, comment: str) -> None:
        init = ema is not None and ema.initialized
        lo, hi = (float(ema.lo), float(ema.hi)) if init else (0.0, 0.0)
        defs.append(f"/* {c_comment(comment)} */\nstatic mt_fqt_range {name} = "
                    f"{{{c_float(lo)}, {c_float(hi)}, 0.0f, 0.0f, {int(init)}, 0, 0}};")
        entries.append(StateEntry(entry, "f32", (2,)))
        io.append((f"memcpy(blob + off, &{name}.lo, 4);\n    memcpy(blob + off + 4, &{name}.hi, 4);",
                   f"memcpy(&{name}.lo, blob + off, 4);\n    memcpy(&{name}.hi, blob + off + 4, 4);"))

    for t in e.act_owners:
        a = f"act_{e.ids[t]}"
        qp = m.act_qparams(t)
        rng_struct(a, m.act_ema[t], f"act.{t}.range", f"{t}: activation range (EMA)")
        defs.append(f"static float {a}_scale = {c_float(qp.scale)};\n"
                    f"static int32_t {a}_zp = {int(qp.zero_point)};")
        entries += [StateEntry(f"act.{t}.scale", "f32", (1,)), StateEntry(f"act.{t}.zero_point", "s32", (1,))]
        io += [(f"memcpy(blob + off, &{a}_scale, 4);", f"memcpy(&{a}_scale, blob + off, 4);"),
               (f"memcpy(blob + off, &{a}_zp, 4);", f"memcpy(&{a}_zp, blob + off, 4);")]
    for key in e.err_keys:
        name = f"err_{e.ids[key]}"
        ema = m.err_ema.get(key)
        rng_struct(name, ema, f"err.{key}.range", f"{key}: error range (EMA)")
        entries.append(StateEntry(f"err.{key}.init", "s32", (1,)))
        io.append((f"memcpy(blob + off, &{name}.initialized, 4);",
                   f"memcpy(&{name}.initialized, blob + off, 4);"))
    for n in g.parametric():
        lid, name = e.lid(n.name), n.name
        w = m.w[name]
        o = w.shape[0]
        qp = m.wqp[name]
        trained = name in e.trained
        if m.prec.weights == "f32":     # float32: weights and biases only, plus the statistics
            arr("float", f"{lid}_weight", w, "f32", f"{name}.weight" if trained else None,
                f"{name}: weight {list(w.shape)} float32" + (" (RAM, trained)" if trained else " (frozen)"),
                const=not trained)
            arr("float", f"{lid}_bias", m.b[name], "f32", f"{name}.bias" if trained else None,
                f"{name}: bias float32" + (" (RAM, trained)" if trained else " (frozen)"), const=not trained)
            if trained:
                _norm_state(arr, m, name, lid, o)
            continue
        nw = 1 if e.u8 else o            # uint8: one scale, zero point and range per tensor
        wt = "uint8_t" if e.u8 else "int8_t"
        arr(wt, f"{lid}_weight", w, "u8" if e.u8 else "s8", f"{name}.weight" if trained else None,
            f"{name}: weight {list(w.shape)} {wt[:-2]}" + (" (RAM, trained)" if trained else " (frozen)"),
            const=not trained)
        if fixed_layer(m, name):
            defs += _fixed_constants(e, n, arr)
            continue
        arr("int32_t", f"{lid}_bias", m.b[name], "s32", f"{name}.bias", f"{name}: bias int32 (RAM)")
        arr("float", f"{lid}_s_w", np.broadcast_to(qp.scale, (nw,)), "f32", f"{name}.w_scale",
            f"{name}: weight scale(s) s_w")
        arr("float", f"{lid}_bias_scale", m.b_acc_scale[name], "f32", f"{name}.bias_scale",
            f"{name}: accumulator scales s_x * s_w of the bias")
        if e.u8:
            defs.append(f"static int32_t {lid}_w_zp = {int(qp.zero_point)};\n"
                        f"static float {lid}_m; /* forward multiplier float32(s_x * s_w) / s_y */")
            entries.append(StateEntry(f"{name}.w_zero_point", "s32", (1,)))
            io.append((f"memcpy(blob + off, &{lid}_w_zp, 4);", f"memcpy(&{lid}_w_zp, blob + off, 4);"))
        else:
            defs.append(f"static int32_t {lid}_mult[{o}];\nstatic int32_t {lid}_shift[{o}];")
        if trained:
            ema = m.w_ema[name]
            arr("float", f"{lid}_w_lo", np.broadcast_to(ema.lo, (nw,)), "f32", f"{name}.w_lo",
                f"{name}: weight range minimum (EMA)")
            arr("float", f"{lid}_w_hi", np.broadcast_to(ema.hi, (nw,)), "f32", f"{name}.w_hi",
                f"{name}: weight range maximum (EMA)")
            if m.prec.quantize_sample_grads:
                rng_struct(f"grad_{lid}", m.grad_ema.get(name), f"grad.{name}.range",
                           f"{name}: per-sample gradient range (EMA)")
                entries.append(StateEntry(f"grad.{name}.init", "s32", (1,)))
                io.append((f"memcpy(blob + off, &grad_{lid}.initialized, 4);",
                           f"memcpy(&grad_{lid}.initialized, blob + off, 4);"))
            _norm_state(arr, m, name, lid, o)
            defs.append(f"static float {lid}_bias_step[{o}];")
    defs.append(f"static int32_t fqt_loss_max = {int(m.loss_max)};")
    entries.append(StateEntry("loss_max", "s32", (1,)))
    io.append(("memcpy(blob + off, &fqt_loss_max, 4);", "memcpy(&fqt_loss_max, blob + off, 4);"))
    return defs, entries, io


def predict_output(e: FqtEmitter, prec, g) -> str:
    """model_predict's copy of the logits: the 8-bit logits, or float32 logits quantized with their range."""
    if prec.acts != "f32":
        return f"    memcpy(logits, {e.t(g.output)}, MODEL_OUTPUT_SIZE);"
    lg, kk = e.t(g.output), g.num_classes
    return f"""    if (st == MT_OK) {{
        float lo = {lg}[0], hi = {lg}[0], s;
        int32_t z, k;
        for (k = 1; k < {kk}; ++k) {{
            lo = {lg}[k] < lo ? {lg}[k] : lo;
            hi = {lg}[k] > hi ? {lg}[k] : hi;
        }}
        st = mt_fqt_logits_s8_f32({kk}, {lg}, lo, hi, logits, &s, &z);
    }}"""


def _jump_array(name: str, n: int, comment: str) -> str:
    cols = [f"0x{int(v):08X}u" for v in jump_columns(n)]
    rows = [", ".join(cols[i:i + 6]) for i in range(0, 32, 6)]
    body = ",\n".join(f"    {r}" for r in rows)
    return f"/* {c_comment(comment)} */\nstatic const uint32_t {name}[32] = {{\n{body}\n}};"


def _partial_decl(e: FqtEmitter) -> list[str]:
    """Partial updates: per layer k, the kept channels and the update mask; each layer's draw offset."""
    decl = [f"static int32_t fqt_k_{e.lid(n)};\nstatic int32_t fqt_n_{e.lid(n)};\n"
            f"static int32_t {e.lid(n)}_keep[{e.m.w[n].shape[0]}];\n"
            f"static uint8_t {e.lid(n)}_upd[{e.m.w[n].shape[0]}];" for n in e.partial]
    return decl + [f"static int32_t fqt_off_{e.lid(n)};" for n in e.trained]


def stream_draws(e: FqtEmitter) -> tuple[list[str], int]:
    """Jump matrices to each trained layer's place in the step's stochastic-rounding stream."""
    out, off = [], 0
    e.jumps = set()
    if e.m.prec.weight_rounding != "stochastic":
        if e.partial:   # no draws: only k, the kept channels and the update mask per layer
            out.append("/* Partial updates: k, kept channels and update mask per layer. */\n"
                       + "\n".join(_partial_decl(e)) + "\nstatic int32_t fqt_draws; /* (no draws: unused) */")
        return out, 0
    if e.partial:
        full = sum(e.m.w[n].size for n in e.trained)
        e.jump_bits = max(int(full).bit_length(), 1)
        rows = []
        for i in range(e.jump_bits):
            cols = ", ".join(f"0x{int(v):08X}u" for v in jump_columns(1 << i))
            rows.append(f"    {{{cols}}}")
        decl = _partial_decl(e)
        out.append("/* Partial updates: k, kept channels and update mask per layer; draw offsets. */\n"
                   + "\n".join(decl) + "\nstatic int32_t fqt_draws;\n"
                   f"/* columns of the xorshift32 jumps by 2^i draws */\n"
                   f"static const uint32_t fqt_jump_pow[{e.jump_bits}][32] = {{\n" + ",\n".join(rows)
                   + "\n};")
        return out, full
    for n in e.g.parametric():
        if n.name not in e.trained:
            continue
        if off:
            e.jumps.add(f"{e.lid(n.name)}_jump")
            out.append(_jump_array(f"{e.lid(n.name)}_jump", off,
                                   f"{n.name}: xorshift32 jump by {off} draws (earlier layers' weights)"))
        off += n.params["weight"].size
    if off:
        out.append(_jump_array("fqt_jump_total", off, f"xorshift32 jump by the step's {off} draws"))
    return out, off
