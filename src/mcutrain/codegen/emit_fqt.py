"""Emit `model.h` / `model.c` for FQT training (any precision): the planner's FQT schedule as C calls.

The step follows `plan.schedule_for(method)` kernel by kernel over `plan.plan_training` offsets,
like `emit_train` does for ZO and BP-QAS; each schedule op maps to one emitter in
`FQT_KERNEL_EMITTERS`. What FQT adds is state that moves every step: the EMA ranges of
activations and errors, the per-channel weight scales and their ranges, the standardization
statistics and the accumulator scale of every bias. It lives in static C variables (not the
arena) and is saved with the weights, so the state blob resumes training bit-exactly.

Order against the simulator (`methods.fqt.FQT.step`), batch 1:
- the requantization multipliers of every layer are recomputed on the device at the start of
  a step from the current scales (float64, as `output_multiplier`);
- a layer is updated right after its backward (the schedule's order): its weights are not read
  again in the step, so this equals the simulator's update after the whole backward. The
  simulator draws the stochastic-rounding stream for all layers in graph order; C jumps to each
  layer's place in that stream with a GF(2) jump matrix computed here;
- the activation and error EMAs move at the end (`ema_update`), then every bias follows its new
  accumulator scale (`_rescale_bias` needs the new activation scales).

Example:
    >>> from mcutrain import zoo
    >>> from mcutrain.methods.fqt import FQT
    >>> from mcutrain.methods.fqt_state import FQTConfig
    >>> x = np.random.default_rng(0).random((8, 8, 8, 1), dtype=np.float32)
    >>> src = emit_fqt_training(FQT(zoo.build("digits-cnn"), FQTConfig(precision="int8"), x), kernels="ref")
    >>> "mt_fqt_upd_s8(" in src.source
    True
"""

from __future__ import annotations

import numpy as np

from mcutrain.codegen.cformat import c_comment, c_comment_lines
from mcutrain.codegen.compiled_in import compiled_in, header_lines
from mcutrain.codegen.emit import ExportError
from mcutrain.codegen.emit_base import call, checked
from mcutrain.codegen.emit_fqt_base import FqtEmitter
from mcutrain.codegen.emit_fqt_float import emitters
from mcutrain.codegen.emit_fqt_graph import GRAPH_EMITTERS, check_graph
from mcutrain.codegen.emit_fqt_graph_f32 import check_graph_f32, float_graph_emitters
from mcutrain.codegen.emit_fqt_graph_u8 import check_graph_u8, uint8_graph_emitters
from mcutrain.codegen.emit_fqt_ops import FQT_KERNEL_EMITTERS
from mcutrain.codegen.emit_fqt_partial_batch import (
    loss_pass_function,
    mask_declarations,
    offset_lines,
    partial_batch_emitters,
    union_reset_lines,
)
from mcutrain.codegen.emit_fqt_source import (
    fixed_layer,
    jump_columns,
    predict_output,
    state_layout,
    stream_draws,
)
from mcutrain.codegen.rounding_c import fqt_rounding, mode_guard
from mcutrain.codegen.state_blob import STATE_HEADER_WORDS, STATE_MAGIC, state_fingerprint
from mcutrain.codegen.templates import render
from mcutrain.codegen.train_source import CTYPE, TrainSource
from mcutrain.graph import INPUT, Op
from mcutrain.methods.fqt_backward import float_logits_s8
from mcutrain.plan.fqt_ranges import error_range_owners, range_scratch, seed_keep, seed_pass_kernels
from mcutrain.plan.schedule import Kernel, Schedule
from mcutrain.plan.schedules import schedule_for
from mcutrain.plan.training import plan_training

__all__ = [
    "FQT_KERNEL_EMITTERS",
    "check_fqt",
    "emit_fqt_training",
    "jump_columns",
    "quantize_input",
    "reported_logits",
    "state_arrays",
]

PRESCALED_MAX = 32512
"""|e16| <= round_half_away(127 * 2^15 / 2^7): the bound of a prescaled error."""
BWD_IN_TERMS = (2**31 - 1) // (PRESCALED_MAX * 127)
"""Most products an int32 error-propagation accumulator can sum safely (520)."""

FQT_KERNEL_EMITTERS.update(GRAPH_EMITTERS)   # grouped convs, adds, average pools, shared tensors


UINT8_MAX_BATCH = 128
"""uint8 batches sum the samples' centred uint8 gradients (|.| <= 255 each) in int16."""


def check_fqt(method, batch: int) -> None:
    """Refuse FQT settings the generated C does not implement yet, saying what to use instead."""
    p = method.prec
    if p.name == "uint8" and batch > UINT8_MAX_BATCH:
        raise ExportError(f"fqt --precision uint8 in C sums the batch's uint8 gradients in int16: at most "
                          f"--batch {UINT8_MAX_BATCH} (got {batch})")
    if p.name in ("uint8", "mixed") and (p.weight_rounding != "nearest" or p.relative_update):
        raise ExportError(f"fqt {p.name} in C rounds weights to nearest with absolute steps; "
                          "drop the weight_rounding / relative_update overrides")
    if p.name == "int8" and (p.weight_rounding != "stochastic" or p.relative_update):
        raise ExportError("fqt int8 in C rounds weights stochastically with absolute steps; "
                          "drop the weight_rounding / relative_update overrides")
    if p.name in ("mixed", "float32"):
        check_graph_f32(method)           # residual adds, depthwise convs, global average pools
    if p.name == "uint8":
        check_graph_u8(method, batch)     # residual adds, depthwise convs, global average pools
    g = method.graph
    check_graph(method, batch)    # ops, shared tensors and bounds of non-sequential graphs
    for n in g.nodes:
        tiled = n.op != Op.MAXPOOL or tuple(n.attrs["kernel"]) == tuple(n.attrs["stride"])
        if not tiled and method.needs[n.name]:
            raise ExportError(f"node '{n.name}': overlapping max-pool windows sum errors beyond int8; "
                              "the fqt C step needs stride == kernel")
        if n.op == Op.LINEAR and method.needs[n.inputs[0]]:
            terms = n.params["weight"].shape[0]
            if terms > BWD_IN_TERMS:
                raise ExportError(f"node '{n.name}': error propagation sums {terms} products per element, "
                                  f"more than the int32 accumulator of the C kernel holds exactly "
                                  f"({BWD_IN_TERMS}); train fewer layers (--trainable last:N)")


def _block(body: list[str], k: Kernel, ind: str) -> list[str]:
    note = c_comment(f"{k.name} ({k.phase})")
    return [f"{ind}{{ /* {note} */", *(f"{ind}    {x}" if x else "" for x in body), f"{ind}}}"]


def _step(e: FqtEmitter, s: Schedule, in_size: int) -> list[str]:
    """The body of model_train_step after the forward helpers: the schedule, its sample loop opened."""
    batch_partial = s.batch > 1 and bool(e.partial)
    lines: list[str] = union_reset_lines(e) if batch_partial else []
    open_loop, fwd_done, offsets_due = None, False, batch_partial
    for k in s.kernels:
        if k.loop != open_loop:
            if open_loop is not None:
                lines.append("    }")
            if k.loop is not None:
                lines += [f"    for (b = 0; b < {k.repeat}; ++b) {{ /* one sample at a time */",
                          f"        memcpy({e.t(INPUT)}, fqt_batch_in + b * {in_size}, {in_size});"]
            open_loop, fwd_done = k.loop, False
        ind = "        " if open_loop else "    "
        if offsets_due and k.op == "fqt_update" and open_loop is None:
            lines += offset_lines(e)      # the batch's update masks are complete: the draws' offsets
            offsets_due = False
        if k.phase == "forward":
            if not fwd_done:
                lines += checked([f"st = fqt_forward(1); /* {c_comment(k.name)} ... */"]) \
                    if not open_loop else [f"{ind}{x}" for x in checked(["st = fqt_forward(1);"])]
                fwd_done = True
            continue
        lines += _block(e.emit[k.op](e, k), k, ind)
    if open_loop is not None:
        lines.append("    }")
    return [x if x.startswith(" ") or not x else "    " + x for x in lines]


def method_grad_ranges(e: FqtEmitter) -> list[str]:
    """C names of the per-sample gradient ranges (uint8), which a batch seeds like error ranges."""
    return [f"grad_{e.lid(t)}" for t in e.trained] if e.m.prec.quantize_sample_grads else []


def _seed_function(e: FqtEmitter, s: Schedule, in_size: int) -> str:
    """fqt_seed(): a batch's first step gives each error tensor the range of the whole batch.

    One pass over the batch per error tensor that has no range yet (in backward order): forward,
    then backward until that tensor, whose range it records; the ranges seed their EMAs (fresh,
    as the simulator's `_err_qparams`). Later steps find every range set and skip it.
    The first round keeps each sample's small forward tensors (`plan.fqt_ranges.seed_keep`: the
    logits, small relu outputs); a round that stops where only they are read restores them instead
    of running the forward pass again (the forward's values do not change within the step).
    """
    e.seed_pass = True
    body: list[str] = []
    grads = method_grad_ranges(e)     # uint8: the per-sample gradient ranges seed the same way
    kernels = seed_pass_kernels(s, bool(grads))
    for k in kernels:
        body += _block(e.emit[k.op](e, k), k, "            ")
    e.seed_pass = False
    ranges = [f"err_{e.ids[key]}" for key in e.err_keys] + grads
    unset = " || ".join(f"!{r}.initialized" for r in ranges)
    seeds = "\n".join(f"        mt_fqt_range_seed(&{r});" for r in ranges)
    keep = seed_keep(s, bool(grads))
    fwd = ["st = fqt_forward(0);", "if (st != MT_OK) {", "    return st;", "}"]
    decl, restore_flag = "", ""
    if keep.tensors:
        covered = set(keep.covered)
        served = [e.err(e.node_of(w)) for k in kernels if k.name in covered for w in k.writes
                  if w.startswith(("err:", "errm:")) and e.node_of(w) in e.err_key]
        stops = " || ".join(f"!{r}.initialized" for r in dict.fromkeys(served))
        store, back, off = [], [], 0
        for t in keep.tensors:
            n = s.tensors[t].nbytes
            store.append(f"    memcpy(fqt_seed_keep + b * {keep.sample_bytes} + {off}, {e.t(t)}, {n});")
            back.append(f"    memcpy({e.t(t)}, fqt_seed_keep + b * {keep.sample_bytes} + {off}, {n});")
            off += n
        fwd = ["if (restore) { /* this round stops where only the kept tensors are read */", *back,
               "} else {", *("    " + x for x in fwd), "    if (!kept_ready) {", *("    " + x for x in store),
               "    }", "}"]
        decl = (f"\n/* The first round's copies of {c_comment(', '.join(keep.tensors))}, per sample "
                f"(plan: state:seed_keep). */\nstatic int8_t fqt_seed_keep[{s.batch * keep.sample_bytes}];\n")
        restore_flag = f"        const int32_t restore = kept_ready && ({stops});\n"
    fwd_text = "\n".join(f"            {x}" for x in fwd)
    return f"""{decl}
/* A batch's first step: every error tensor gets the range of the whole batch (see emit_fqt). */
static mt_status fqt_seed(const int32_t *labels)
{{
    mt_status st = MT_OK;
    int32_t round;
    int32_t b;
    int32_t kept_ready = 0; /* the first round has kept every sample's tensors */
    for (round = 0; round < {len(e.err_keys) + bool(grads)} && ({unset}); ++round) {{
{restore_flag}        for (b = 0; b < {s.batch}; ++b) {{
            memcpy({e.t(INPUT)}, fqt_batch_in + b * {in_size}, {in_size});
{fwd_text}
{chr(10).join(body)}
        }}
        kept_ready = 1;
{seeds}
    }}
    (void)kept_ready;
    return st;
}}
"""


def emit_fqt_training(method, batch: int = 1, kernels: str = "ref", provenance: str = "") -> TrainSource:
    """model.h / model.c training `method` (an `FQT` of any precision) one sample at a time.

    The precision picks the emitters (`emit_fqt_float.emitters`); mixed and float32 sum floats in
    the order of `FQTConfig(exact_float_order=True)` whatever the method's own setting.
    """
    check_fqt(method, batch)
    s = schedule_for(method, batch=batch, kernels=kernels)
    plan = plan_training(s)
    e = FqtEmitter(method, s, plan)
    g = method.graph
    p = method.prec
    e.emit = emitters(e)
    if p.acts == "u8":      # the ops of non-sequential graphs, over the sequential ones
        e.emit = uint8_graph_emitters(e.emit, backward=p.errors == "u8")
    if p.errors == "f32":
        e.emit = float_graph_emitters(e.emit, acts_f32=p.acts == "f32")
    if batch > 1 and e.partial:      # each sample's kept structures OR-ed into the batch's update mask
        e.emit = partial_batch_emitters(e.emit)
    e.act_owners = [] if p.acts == "f32" else \
        list(dict.fromkeys(method.owner[t] for t in [INPUT, *(n.name for n in g.nodes)]))
    e.err_keys = [] if p.errors == "f32" else error_range_owners(g, method.needs)
    jumps, total = stream_draws(e)
    e.total_draws = total
    defs, entries, io = state_layout(e)
    fp = state_fingerprint(entries, "fqt", batch)
    unknown = sorted({k.op for k in s.kernels} - set(e.emit))
    if unknown:
        raise ExportError(f"fqt schedule ops without C code yet: {', '.join(unknown)}")

    fwd_lines = []
    for k in s.kernels:
        if k.phase == "forward":
            fwd_lines += _block(e.emit[k.op](e, k), k, "    ")
    # float32 inputs travel as their float32 bytes: sizes below are in bytes
    in_size = int(np.prod(g.input_shape)) * (4 if p.acts == "f32" else 1)
    step_lines = _step(e, s, in_size)
    batch_partial = batch > 1 and bool(e.partial)
    seed_fn = mask_declarations(e) if batch_partial else ""
    seed_fn += _seed_function(e, s, in_size) if batch > 1 and e.err_keys else ""
    if batch_partial:
        seed_fn += loss_pass_function(e, in_size)
    macros = []
    for t in sorted(plan.offsets, key=lambda t: (plan.offsets[t], t)):
        tt = s.tensors[t]
        note = c_comment(f"{t}: {tt.dtype} {list(tt.shape)}, {tt.role.value}")
        macros.append(f"#define A_{e.tids[t]} (({CTYPE[tt.dtype]} *)(void *)(model_arena.bytes + "
                      f"{plan.offsets[t]})) /* {note} */")
    scratch = range_scratch(g)
    prepare = []
    for n in g.parametric():
        lid = e.lid(n.name)
        if p.acts == "f32":     # float32: no multipliers, no accumulator extremes
            prepare[:] = ["(void)fqt_reset_extremes;"]
            continue
        if fixed_layer(method, n.name):     # constants in Flash, computed at export
            continue
        if e.u8:
            prepare.append(f"{lid}_m = ({e.act(n.inputs[0])}_scale * {lid}_s_w[0]) / {e.act(n.name)}_scale;")
            continue
        prepare += call("mt_fqt_output_multipliers", [f"{e.act(n.inputs[0])}_scale", f"{lid}_s_w",
                                                      f"{e.act(n.name)}_scale",
                                                      str(n.params["weight"].shape[0]), f"{lid}_mult",
                                                      f"{lid}_shift"])
    state_bytes = 4 * STATE_HEADER_WORDS + sum(x.nbytes for x in entries)
    ishape = g.input_shape if len(g.input_shape) == 3 else (1, 1, *g.input_shape)
    qin = method.act_qparams(INPUT)
    qout = method.act_qparams(g.output)
    c = method.cfg
    opts = {"method": "fqt", "precision": c.precision, "alpha_a": c.alpha_a, "alpha_e": c.alpha_e,
            "alpha_w": c.alpha_w, "alpha_norm": c.alpha_norm, "trainable": list(e.trained)}
    header = render(
        "model_training.h", provenance=c_comment(provenance or "(not recorded)"), method="fqt",
        kernels=kernels, batch=batch,
        options=f"precision {c.precision}, alpha_a {c.alpha_a}, alpha_e {c.alpha_e}, alpha_w {c.alpha_w}, "
                f"alpha_norm {c.alpha_norm}",
        input_kind="float32 values (MODEL_INPUT_SIZE bytes)" if p.acts == "f32" else "int8",
        h=ishape[0], w=ishape[1], c=ishape[2], in_size=in_size, out_size=g.num_classes,
        in_zp=int(qin.zero_point) if qin else 0,
        in_q=c_comment(f"scale {float(qin.scale)!r}, zero point {int(qin.zero_point)}") if qin
        else "float32 values",
        out_zp=int(qout.zero_point) if qout else 0,
        out_q="qparams dynamic (the EMA range moves every step; the zero point macro is the initial one)"
              if qout else "the float32 logits quantized with their own range (as the loss sees them)",
        arena=plan.arena_bytes, train_arena=plan.arena_bytes, infer_arena=plan.arena_bytes,
        state_bytes=state_bytes, layers=len(g.nodes),
        compiled_in=header_lines(compiled_in(s.decisions, batch, "single", kernels)))   # fqt: single only
    save = "\n".join(f"    {sv}\n    off += {x.nbytes};" for (sv, _), x in zip(io, entries))
    load = "\n".join(f"    {ld}\n    off += {x.nbytes};" for (_, ld), x in zip(io, entries))
    source = render(
        "model_fqt.c", arena=plan.arena_bytes, graph=c_comment_lines(g.summary()),
        state=mode_guard(fqt_rounding(method)) + "\n\n".join(defs),
        jumps="\n\n".join(jumps) or "/* no stochastic draws */", macros="\n".join(macros),
        rng0=int(method.rng.state), steps0=int(method.steps), magic=STATE_MAGIC, fp=fp,
        max_o=scratch.channels, k=scratch.classes, prepare="\n".join(f"    {x}" for x in prepare),
        fwd="\n".join(fwd_lines),
        step="\n".join(step_lines), train_in=e.t(INPUT) if batch == 1 else "fqt_batch_in",
        sample_in=e.t(INPUT), batch_in=in_size * batch, seed_fn=seed_fn,
        batch_buf=(f"static int8_t fqt_batch_in[{batch * in_size}]; /* the caller's batch */\n"
                   if batch > 1 else ""),
        seed_call="".join(f"    st = {fn};\n    if (st != MT_OK) {{\n        return st;\n    }}\n"
                          for fn, on in (("fqt_loss_pass(labels)", "fqt_loss_pass(" in seed_fn),
                                         ("fqt_seed(labels)", "fqt_seed(" in seed_fn)) if on),
        predict_out=predict_output(e, p, g)) + render("state_io.c", save=save, load=load)
    ram = sum(method.w[n].size + 4 * method.b[n].size for n in e.trained)
    const = sum(method.w[n.name].size for n in g.parametric() if n.name not in e.trained)
    return TrainSource(header, source, plan, plan.arena_bytes, plan.arena_bytes, const, ram, entries, fp,
                       batch, "fqt", opts)


def _layer_field(method, layer: str, field: str) -> np.ndarray:
    o = method.w[layer].shape[0]
    if field in ("weight", "bias"):
        return (method.w if field == "weight" else method.b)[layer]
    if field == "w_scale":
        return np.asarray(method.wqp[layer].scale).reshape(-1)
    if field == "w_zero_point":
        return np.asarray(method.wqp[layer].zero_point).reshape(-1)
    if field == "bias_scale":
        return method.b_acc_scale[layer]
    if field in ("w_lo", "w_hi"):
        ema = method.w_ema[layer]
        return np.asarray(ema.lo if field == "w_lo" else ema.hi).reshape(-1)
    st = method.norm.get(layer, {"mu": np.zeros(o), "sd": np.zeros(o), "init": np.zeros(o, bool)})
    return st[field[5:]]


def state_arrays(method, src: TrainSource) -> dict[str, np.ndarray]:
    """The simulator's values of every entry of the C state blob (`src.state`), by entry name."""
    out: dict[str, np.ndarray] = {}
    for ent in src.state:
        name = ent.name
        if name == "loss_max":
            v = np.array([method.loss_max])
        elif name.startswith(("act.", "err.", "grad.")):
            kind, rest = name.split(".", 1)
            t, field = rest.rsplit(".", 1)
            ema = {"act": method.act_ema, "err": method.err_ema, "grad": method.grad_ema}[kind].get(t)
            if field == "range":
                v = np.array([ema.lo, ema.hi]) if ema is not None and ema.initialized else np.zeros(2)
            elif field == "init":
                v = np.array([int(ema is not None and ema.initialized)])
            elif field == "scale":
                v = np.array([method.act_qparams(t).scale])
            else:
                v = np.array([method.act_qparams(t).zero_point])
        else:
            layer, field = name.rsplit(".", 1)
            v = _layer_field(method, layer, field)
        dt = {"s8": np.int8, "u8": np.uint8, "s32": np.int32, "f32": np.float32}[ent.dtype]
        out[name] = np.asarray(v).astype(dt).reshape(ent.shape)
    return out


def quantize_input(method, x: np.ndarray) -> np.ndarray:
    """Float samples as the library takes them: the simulator's input quantization (uint8: floor);
    float32: the samples' float32 bytes, (B, 4 * elements) int8."""
    qp = method.act_qparams(INPUT)
    if qp is None:
        return np.ascontiguousarray(np.asarray(x, "<f4").reshape(len(x), -1)).view(np.int8)
    q = qp.quantize(np.asarray(x, np.float32), "floor" if method.prec.acts == "u8" else "nearest")
    return q.view(np.int8) if q.dtype == np.uint8 else q


def reported_logits(method, logits: np.ndarray) -> np.ndarray:
    """The (B, K) int8 logits a library reports for the simulator's `logits` of one batch.

    8-bit logits as stored (uint8 bytes read as int8); float32 logits as the loss sees them,
    each sample's quantized to int8 with its own range (`fqt_backward.float_logits_s8`).
    """
    lg = np.asarray(logits).reshape(len(logits), -1)
    if method.act_qparams(method.graph.output) is not None:
        return lg.astype(np.int8)
    return float_logits_s8(lg)[0]
