"""Emit `model.h` / `model.c` training a ZO or BP-QAS method: `model_train_step` follows its schedule.

The step is not re-derived here: `plan.schedule_for(method)` gives the ordered kernels and the
tensors each reads and writes, `plan.plan_training` their arena offsets, and this module turns
each kernel into C calls over exactly those offsets (so the planner's arena bytes are the C
arena's bytes). A kernel op maps to one emitter function in `emit_train_ops.KERNEL_EMITTERS`;
FQT has its own emitters (`emit_fqt`), and `dispatch.emit_training` picks between the two.
Loops of the schedule (ZO queries) become `for` loops around their kernels.

Trainable weights and biases are RAM arrays initialised from the model (their initial values
sit in Flash as the load image); frozen ones, requantization constants and the float32 scales
of the QAS update stay `const`. Floats are written as C99 hexadecimal literals (exact).
`model_predict` runs the int8 forward pass with the current weights in the same arena.

Example:
    >>> from mcutrain import zoo
    >>> from mcutrain.engines import ptq
    >>> from mcutrain.methods.zo import ZOConfig, ZOMethod
    >>> x = np.random.default_rng(0).random((8, 8, 8, 1), dtype=np.float32)
    >>> m = ZOMethod(ptq.quantize_model(zoo.build("digits-cnn"), x), ZOConfig(queries=2))
    >>> src = emit_zo_bp_training(m, batch=2, kernels="ref")
    >>> "mt_status model_train_step(const int8_t *inputs," in src.header
    True
"""

from __future__ import annotations

import numpy as np

from mcutrain.codegen.cformat import c_array, c_comment, c_comment_lines, c_ident, c_string, unique_idents
from mcutrain.codegen.compiled_in import compiled_in, header_lines
from mcutrain.codegen.emit import ExportError, InferenceEmitter, check_supported, qparams_comment
from mcutrain.codegen.emit_train_graph import GRAPH_EMITTERS
from mcutrain.codegen.emit_train_ops import StepEmitter, method_op
from mcutrain.codegen.rounding_c import mode_guard
from mcutrain.codegen.state_blob import (
    STATE_HEADER_WORDS,
    STATE_MAGIC,
    StateEntry,
    state_fingerprint,
)
from mcutrain.codegen.templates import render
from mcutrain.codegen.train_source import CTYPE, TrainSource
from mcutrain.graph import INPUT, Op
from mcutrain.plan import plan_inference_arena
from mcutrain.plan.schedule import Schedule
from mcutrain.plan.schedules import schedule_for
from mcutrain.plan.training import TrainingPlan, plan_training

TRAIN_METHODS = ("zo", "bp-qas", "fqt")
"""Methods whose schedules the generator can emit (fqt: `emit_fqt`, precision int8)."""


def _ram_array(ctype: str, name: str, values: np.ndarray, per_line: int, comment: str) -> str:
    """A writable (non-const) initialised array: a trainable tensor in RAM."""
    return c_array(ctype, name, values, per_line=per_line, comment=comment, const=False)


# ---------------------------------------------------------------- checks


def check_trainable(method) -> None:
    """Refuse method settings the generated step does not implement, saying what to use instead."""
    name = getattr(method, "name", "")
    if name not in TRAIN_METHODS:
        raise ExportError(f"not implemented yet for C (method {name}); "
                          f"use one of: none, {', '.join(TRAIN_METHODS)}")
    if name == "zo":
        c = method.cfg
        if c.mask != "none":
            raise ExportError(f"zo perturbation mask '{c.mask}' has no C kernels yet (a mask of mcutrain "
                              "train --sparse); export and run perturb every entry (mask 'none')")
        if any(len(u.layers) > 1 for u in method.units):
            raise ExportError("zo 'model-wp' (several layers in one perturbation) has no C step yet; "
                              "use --perturb wp, np or mix")
        if c.queries > 127 and any(u.kind == "np" for u in method.units):
            raise ExportError(f"{c.queries} queries: node perturbation in C keeps int32 sums, exact for "
                              "at most 127 queries; use --queries 127 or fewer")
    else:
        if method.cfg.channel_ratio < 1:
            raise ExportError("bp-qas channel ratio below 1 (mcutrain train --channel-ratio) has no C step "
                              "yet; export and run train every input channel (ratio 1)")


# ---------------------------------------------------------------- the files


class _PredictEmitter(InferenceEmitter):
    """The inference emitter, but trainable tensors are RAM arrays emitted by the training side."""

    def __init__(self, qm, plan, ram: set[str]):
        super().__init__(qm, plan)
        self.ram = ram

    def const(self, ctype: str, name: str, values: np.ndarray, comment: str = "") -> str:
        if name in self.ram:
            return name
        return super().const(ctype, name, values, comment)


def emit_zo_bp_training(method, batch: int = 1, kernels: str = "dsp", provenance: str = "") -> TrainSource:
    """model.h / model.c for training `method` (ZOMethod, BPQASMethod or FQT) on batches of `batch`."""
    check_trainable(method)
    qm = method.qm
    check_supported(qm)
    g = qm.graph
    s = schedule_for(method, batch=batch, kernels=kernels)
    plan = plan_training(s)
    if any(s.tensors[t].dtype == "s64" and off % 8 for t, off in plan.offsets.items()):
        plan = plan_training(s, kernels_alignment=8)   # int64 sums need 8-byte alignment on the host
    inf = plan_inference_arena(g, kernels=kernels)
    ids = unique_idents([INPUT] + [n.name for n in g.nodes])
    trained_w = [n.name for n in g.parametric() if f"{n.name}.weight" in s.tensors]
    trained_b = [n.name for n in g.parametric() if f"{n.name}.bias" in s.tensors]
    ram = {f"{ids[n]}_weight" for n in trained_w} | {f"{ids[n]}_bias" for n in trained_b}
    pe = _PredictEmitter(qm, inf, ram)
    arena = max(plan.arena_bytes, inf.arena_bytes)

    # predict(): the inference emitter's blocks with batch 1 at the inference plan's offsets
    blocks = []
    for i, n in enumerate(g.nodes):
        body = pe.node(i, n)
        lines = [f"    {{ /* [{i}] {c_comment(n.name)}: {n.op.value} -> {list(g.shape(n.name))} */"]
        lines += [f"        {x}" for x in body]
        if n.op != Op.FLATTEN:
            lines += ["        if (st != MT_OK) {", "            return st;", "        }"]
        lines += ["        if (model_layer_hook_fn) {",
                  f"            model_layer_hook_fn({i}, {c_string(n.name)}, {pe.tensor(n.name)}, "
                  f"{pe.size(n.name)});",
                  "        }", "    }"]
        blocks.append("\n".join(lines))

    # RAM copies of the trainable tensors and the state layout
    ram_arrays, entries = [], []
    ram_bytes = 0
    for n in g.parametric():
        nid = ids[n.name]
        if n.name in trained_w:
            w = qm.weights[n.name]
            ram_arrays.append(_ram_array("int8_t", f"{nid}_weight", w, 16, f"{n.name}: trainable weight "
                                                                             f"{list(w.shape)} int8 (RAM)"))
            entries.append(StateEntry(f"{n.name}.weight", "s8", tuple(w.shape)))
            ram_bytes += w.size
        if n.name in trained_b:
            b = qm.biases[n.name]
            ram_arrays.append(_ram_array("int32_t", f"{nid}_bias", b, 8,
                                         f"{n.name}: trainable bias int32 (RAM)"))
            entries.append(StateEntry(f"{n.name}.bias", "s32", tuple(b.shape)))
            ram_bytes += 4 * b.size
    for name, t in s.tensors.items():
        if name.startswith("state:") and name.endswith(".velocity"):
            layer = name[6:-9]
            ram_arrays.append(f"/* {c_comment(layer)}: SGD momentum velocity (weight then bias), float32 */\n"
                              f"static float {ids[layer]}_velocity[{t.elements}];")
            entries.append(StateEntry(name[6:], "f32", (t.elements,)))
    fp = state_fingerprint(entries, method.name, batch)

    # the step
    se = StepEmitter(method, s, plan, ids)
    step_lines: list[str] = []
    open_loop: str | None = None
    for k in s.kernels:
        if k.loop != open_loop:
            if open_loop is not None:
                step_lines.append("    }")
            if k.loop is not None:
                loop_note = c_comment(k.loop)
                step_lines += [f"    for (query = 0; query < {k.repeat}; ++query) {{ /* {loop_note} */"]
            open_loop = k.loop
        ind = "        " if open_loop else "    "
        fn = method_op(method.name, k.op) or GRAPH_EMITTERS.get(k.op)
        if fn is None:
            raise ExportError(f"kernel '{k.name}' (op {k.op}) has no C code in the generated step yet")
        body = fn(se, k)
        step_lines.append(f"{ind}{{ /* {c_comment(f'{k.name} ({k.phase})')} */")
        step_lines += [f"{ind}    {x}" if x else "" for x in body]
        step_lines.append(f"{ind}}}")
    if open_loop is not None:
        step_lines.append("    }")
    uses_q = any(k.loop for k in s.kernels)

    macros = []
    for t in sorted(plan.offsets, key=lambda t: (plan.offsets[t], t)):
        tt = s.tensors[t]
        note = c_comment(f"{t}: {tt.dtype} {list(tt.shape)}, {tt.role.value}")
        macros.append(f"#define A_{se.tids[t]} (({CTYPE[tt.dtype]} *)(void *)(model_arena.bytes + "
                      f"{plan.offsets[t]})) /* {note} */")
    in_name = INPUT
    rng0 = int(method.rng.state) if hasattr(method, "rng") else 0
    steps0 = int(getattr(method, "steps", 0))
    opts = {"method": method.name, **{k: v for k, v in s.options.items() if k != "units"}}
    if method.name == "zo":
        c = method.cfg
        opts.update({"sigma_w": c.sigma_w, "sigma_b": c.sigma_b, "sigma_node": c.sigma_node, "gns": c.gns,
                     "qas": c.qas, "units": s.options.get("units")})
    else:
        opts.update({"qas": method.cfg.qas, "weights": list(method.weight_layers),
                     "biases": list(method.bias_layers)})
    if method.cfg.update_rounding != "nearest":     # the default leaves the text as it was
        opts["update_rounding"] = method.cfg.update_rounding
    ishape = g.input_shape if len(g.input_shape) == 3 else (1, 1, *g.input_shape)
    in_size = int(np.prod(g.input_shape))
    state_bytes = 4 * STATE_HEADER_WORDS + sum(e.nbytes for e in entries)
    save_lines, load_lines = [], []
    for e in entries:
        layer, kind = e.name.rsplit(".", 1)
        arr = f"{ids[layer]}_{kind}"
        save_lines.append(f"    memcpy(blob + off, {arr}, {e.nbytes});\n    off += {e.nbytes};")
        load_lines.append(f"    memcpy({arr}, blob + off, {e.nbytes});\n    off += {e.nbytes};")
    header = render(
        "model_training.h", provenance=c_comment(provenance or "(not recorded)"), method=method.name,
        kernels=kernels, batch=batch,
        options=c_comment(", ".join(f"{k} {v}" for k, v in opts.items() if k != "method")),
        input_kind="int8", h=ishape[0], w=ishape[1], c=ishape[2], in_size=in_size, out_size=g.num_classes,
        in_zp=qm.zero_point(INPUT), in_q=c_comment(qparams_comment(qm, INPUT)),
        out_zp=qm.zero_point(g.output),
        out_q=c_comment(qparams_comment(qm, g.output)), arena=arena, train_arena=plan.arena_bytes,
        infer_arena=inf.arena_bytes, state_bytes=state_bytes, layers=len(g.nodes),
        compiled_in=header_lines(compiled_in(s.decisions, batch, qm.rounding, kernels)))
    source = render(
        "model_zo_bp.c", method=method.name, kernels=kernels, arena=arena, train_arena=plan.arena_bytes,
        infer_arena=inf.arena_bytes,
        graph=c_comment_lines(g.summary()), consts=mode_guard(qm.rounding) + "\n\n".join(pe.consts),
        ram="\n\n".join(ram_arrays) or "/* nothing trainable */",
        fconsts="\n\n".join(se.extra_consts.values()) or "/* no float constants */",
        macros="\n".join(macros), rng0=rng0, steps0=steps0, magic=STATE_MAGIC, fp=fp,
        in_ptr=pe.tensor(INPUT), out_ptr=pe.tensor(g.output), blocks="\n".join(blocks),
        train_in=se.t(in_name), batch_in=batch * in_size,
        qdecl="    int32_t query;\n    uint32_t replay;\n" if uses_q else "",
        step="\n".join(step_lines), checks=_scratch_checks(s, plan, qm, se)) + render(
        "state_io.c", save="\n".join(save_lines) or "    /* nothing trainable */",
        load="\n".join(load_lines) or "    /* nothing trainable */")
    return TrainSource(header, source, plan, inf.arena_bytes, arena, pe.const_bytes, ram_bytes, entries, fp,
                       batch, method.name, opts)


def _scratch_checks(s: Schedule, plan: TrainingPlan, qm, se: StepEmitter) -> str:
    """model_init(): every forward scratch block against the kernels compiled in (as emit.py does)."""
    out, seen = [], set()
    for k in s.kernels:
        for w in k.writes:
            if not w.endswith(".scratch") or k.node in seen:
                continue
            seen.add(k.node)
            n = qm.graph.node(k.node)
            size, note = s.tensors[w].nbytes, c_comment(n.name)
            if n.op == Op.LINEAR:
                call = f"mt_linear_fwd_s8_get_buffer_size({qm.weights[n.name].shape[1]})"
                out += [f"    if ({call} > {size}) {{ /* {note} */", "        return MT_ERR_BUFFER;",
                        "    }"]
            else:
                fid = f"f_{c_ident(n.name)}"
                shape = ", ".join(map(str, qm.weights[n.name].shape))
                out += [f"    static const mt_dims {fid} = {{{shape}}};",
                        f"    if (mt_conv2d_fwd_s8_get_buffer_size(&{fid}) > {size}) {{ /* {note} */",
                        "        return MT_ERR_BUFFER;", "    }"]
    return "\n".join(out) or "    /* no kernel needs scratch memory */"
