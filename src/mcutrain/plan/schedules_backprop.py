"""Schedules of the back-propagating methods: FQT (one sample at a time), BP-QAS and float."""

from __future__ import annotations

from dataclasses import dataclass, replace

from mcutrain.graph import INPUT, PARAMETRIC, Graph, Node, Op
from mcutrain.methods.decisions import Formats, StepDecisions
from mcutrain.plan import plan_inference_arena
from mcutrain.plan.fqt_ranges import (
    ACT_QPARAMS_BYTES,
    RANGE_RECORD_BYTES,
    error_range_owners,
    range_scratch,
    seed_keep,
)
from mcutrain.plan.schedule import Role, Schedule
from mcutrain.plan.schedule_builder import RANGE_BYTES, StepBuilder, error_path, is_depthwise, prepare


@dataclass(frozen=True)
class _Backprop:
    """How a back-propagation method runs its step: the method's decisions and the planner's buffers."""

    decisions: StepDecisions
    fmt: Formats                 # the decisions' formats, the gradient as the buffer sums a batch
    samples: int                 # samples per forward/backward pass (FQT: 1)
    loop: int                    # FQT batch loop count (1: no loop)
    kept_output_for: str         # "act": activated outputs (masks); "all": every output (STE)
    combine_real: bool           # quantized errors summed as float32 reals at a fork (FQT)
    prescale: bool = False       # int8 FQT: int16 copy of the error before propagation
    sample_grad_ranges: bool = False   # uint8 FQT: each per-sample gradient has its own EMA range
    momentum: bool = False       # bp-qas: SGD momentum (a float32 velocity per trained value)

    @property
    def weight_layers(self) -> set[str]:
        return set(self.decisions.weight_layers)

    @property
    def bias_layers(self) -> set[str]:
        return set(self.decisions.bias_layers)

    @property
    def fused_update(self) -> bool:
        return self.decisions.fused_update


def _backprop_schedule(g: Graph, method: str, cfg: _Backprop, kernels: str) -> Schedule:
    fmt, spl = cfg.fmt, cfg.samples
    wanted = cfg.weight_layers | cfg.bias_layers
    needs = error_path(g, wanted)
    dynamic = needs  # quantized FQT: ranges change from the first trained layer on
    ram_biases = set(cfg.bias_layers)
    if method == "fqt" and fmt.act != "f32":
        ram_biases |= {n.name for n in g.parametric() if dynamic[n.name]}   # rescaled every step
    b = StepBuilder(g, method, cfg.samples * cfg.loop, fmt, cfg.weight_layers, ram_biases, kernels)
    s = b.s
    loop = "sample" if cfg.loop > 1 else None
    rep = cfg.loop

    # what the backward pass reads from the forward pass
    kept: set[str] = set()
    for n in g.nodes:
        if not needs[n.name]:
            continue
        if n.op in PARAMETRIC:
            if n.name in cfg.weight_layers:
                kept.add(n.inputs[0])
            if cfg.kept_output_for == "all" or n.act != "none":
                kept.add(n.name)
        elif n.op in (Op.RELU, Op.RELU6) or (n.op == Op.ADD and cfg.kept_output_for == "all") \
                or (n.op == Op.ADD and n.act != "none"):
            kept.add(n.name)
        elif n.op == Op.MAXPOOL:
            if cfg.kept_output_for == "all":
                kept |= {n.name, n.inputs[0]}
            else:
                kept.add(f"{n.name}/argmax")

    def role(t: str) -> Role:
        if t == g.output:
            return Role.LOGITS
        return Role.KEPT if t in kept else Role.ACTIVATION

    _state_backprop(s, g, method, fmt, cfg, needs)
    grads = _declare_grads(s, g, cfg, fmt)
    if loop:   # gradient buffers accumulate over the samples of the batch
        for layer, ts in grads.items():
            s.kernel(f"{layer}.grad_zero", "zero", "weight_grad", layer, [], ts)

    s.tensor(INPUT, (spl, *g.input_shape), fmt.act, Role.INPUT)
    if method == "fqt" and loop:   # NOTE: the C step copies each sample in from a static batch buffer
        s.tensor("state:batch_input", (cfg.loop, *g.input_shape), "s8", Role.STATE,
                 "the caller's int8 batch, stepped through one sample at a time")
    name_of = {INPUT: INPUT}
    b.forward(g.nodes, name_of, spl, "", role, loop=loop, repeat=rep)
    k = g.num_classes
    loss = s.tensor("loss", (spl,), "s32", Role.LOGITS)
    err_out = s.tensor(f"err:{g.output}", (spl, *g.shape(g.output)), fmt.error, Role.ERROR)
    state_loss = ["state:counters"] if "state:counters" in s.tensors else []
    s.kernel("loss", "softmax_ce", "loss", g.output, [name_of[g.output], *state_loss],
             [loss, err_out, *state_loss], spl * k, loop=loop, repeat=rep)

    n_consumers = {t: len(g.consumers(t)) for t in name_of}
    pending: dict[str, list[str]] = {g.output: [err_out]}
    deferred: list[str] = []
    for n in reversed(g.nodes):
        parts = pending.pop(n.name, None)
        if parts is None or not needs[n.name]:
            continue
        kw = {"loop": loop, "repeat": rep}
        shape = (spl, *g.shape(n.name))
        if len(parts) > 1:
            e = s.tensor(f"err:{n.name}", shape, fmt.error, Role.ERROR)
            s.kernel(f"{n.name}.err_sum", "error_sum", "error", n.name, parts, [e],
                     in_place=[(e, p) for p in parts], **kw)
        else:
            e = parts[0]
        act = n.op.value if n.op in (Op.RELU, Op.RELU6) else n.act
        if n.op in PARAMETRIC and method in ("bp-qas",):
            # STE through the requantization: error at the accumulator, masked by the clamp
            e2 = s.tensor(f"err_acc:{n.name}", shape, fmt.error, Role.ERROR)
            s.kernel(f"{n.name}.requant_bwd", "requant_bwd", "error", n.name, [e, name_of[n.name]], [e2],
                     in_place=[(e2, e)], **kw)
            e = e2
        elif act != "none" and not (method == "bp-qas" and n.op == Op.ADD):
            e2 = s.tensor(f"errm:{n.name}", shape, fmt.error, Role.ERROR)
            s.kernel(f"{n.name}.{act}_bwd", f"{act}_bwd", "error", n.name, [e, name_of[n.name]], [e2],
                     in_place=[(e2, e)], **kw)
            e = e2
        srcs = n.inputs

        def contrib(src: str, real: bool = False, node: str = n.name) -> str:
            dt = "f32" if real else fmt.error
            name = f"err:{src}" if n_consumers[src] == 1 else f"err:{src}<-{node}"
            return s.tensor(name, (spl, *g.shape(src)), dt, Role.ERROR)

        if n.op in PARAMETRIC:
            src = srcs[0]
            o = n.params["weight"].shape[0]
            per_out = g.macs(n) // o
            if n.name in cfg.decisions.partial_layers:
                e = _own_error(s, n.name, e, pending, kw)
                sel = s.tensor(f"{n.name}.topk", (o * 5,), "u8", Role.SCRATCH,
                               "per structure: float32 magnitude + keep flag")
                s.kernel(f"{n.name}.topk", "partial_topk", "error", n.name, [e], [sel, e], **kw)
            if needs[src]:
                reads = [e, *b.params(n)]
                real = cfg.combine_real and n_consumers[src] > 1
                c = contrib(src, real)
                writes = [c]
                if cfg.prescale:
                    writes.append(s.tensor(f"{n.name}.prescale", shape, "s16", Role.SCRATCH))
                op = "depthwise_conv2d" if is_depthwise(g, n) else n.op.value
                s.kernel(f"{n.name}.bwd_in", f"{op}_bwd_in", "error", n.name, reads, writes,
                         spl * per_out * o, **kw)
                pending.setdefault(src, []).append(c)
            if n.name in grads:
                reads = [e] + ([name_of[src]] if n.name in cfg.weight_layers else [])
                ts = grads[n.name]
                macs = spl * g.macs(n) if n.name in cfg.weight_layers else 0
                if cfg.fused_update:
                    params = b.params(n)
                    state = [t for t in (f"state:{n.name}.velocity",) if t in s.tensors]
                    op = f"{n.op.value}_bwd_w_{_UPDATE_OP[method]}"
                    s.kernel(f"{n.name}.bwd_w_update", op, "weight_grad", n.name,
                             [*reads, *params, *state], [*ts, *params, *state], macs, **kw)
                    continue
                s.kernel(f"{n.name}.bwd_w", f"{n.op.value}_bwd_w", "weight_grad", n.name,
                         reads + (ts if loop else []), ts, macs, **kw)
                if loop:
                    deferred.append(n.name)
                else:
                    _update(s, n, ts, method)
        elif n.op == Op.FLATTEN:
            c = s.tensor(f"err:{srcs[0]}" if n_consumers[srcs[0]] == 1 else f"err:{srcs[0]}<-{n.name}",
                         (spl, *g.shape(srcs[0])), s.tensors[e].dtype, Role.ERROR)
            s.kernel(f"{n.name}.bwd", "reshape", "error", n.name, [], [], alias=[(c, e)], **kw)
            pending.setdefault(srcs[0], []).append(c)
        elif n.op == Op.ADD and method == "bp-qas":
            # STE through the add's requantization: one scaled, masked error per input
            outs = [contrib(src) for src in srcs if needs[src]]
            s.kernel(f"{n.name}.bwd", "add_bwd", "error", n.name, [e, name_of[n.name]], outs,
                     in_place=[(outs[0], e)] if outs else [], **kw)
            for src, c in zip([x for x in srcs if needs[x]], outs):
                pending.setdefault(src, []).append(c)
        elif n.op == Op.ADD:
            # both inputs receive the same error values: the add's error is read by both branches
            for src in srcs:
                if needs[src]:
                    pending.setdefault(src, []).append(e)
        elif n.op in (Op.RELU, Op.RELU6):
            if needs[srcs[0]]:
                pending.setdefault(srcs[0], []).append(e)
        else:   # pools
            if needs[srcs[0]]:
                c = contrib(srcs[0])
                reads = [e]
                if n.op == Op.MAXPOOL:
                    reads += [name_of[srcs[0]], name_of[n.name]] if cfg.kept_output_for == "all" \
                        else [f"{n.name}.argmax"]
                s.kernel(f"{n.name}.bwd", f"{n.op.value}_bwd", "error", n.name, reads, [c], **kw)
                pending.setdefault(srcs[0], []).append(c)
    for layer in deferred:
        _update(s, g.node(layer), grads[layer], method)
    if method == "fqt":
        ema = [t for t in ("state:act_ranges", "state:err_ranges", "state:grad_ranges") if t in s.tensors]
        if ema:
            s.kernel("ema_update", "ema_update", "update", "", ema, ema)
    s.options["samples_per_pass"] = spl
    s.validate()
    return s


def _own_error(s: Schedule, layer: str, e: str, pending: dict[str, list[str]], kw: dict) -> str:
    """The error a partial layer's top-k may mask in place: `e` itself, or a copy when another branch
    still reads `e` unmasked (a residual add gives both inputs one error tensor; the input not yet
    reached in the backward pass reads it after this layer, as `fqt._bwd_node`'s copy for that
    input). An error read by no later kernel is masked where it is, at no cost."""
    if not any(e in parts for parts in pending.values()):
        return e
    c = s.tensor(f"errp:{layer}", s.tensors[e].shape, s.tensors[e].dtype, Role.ERROR,
                 "a partial layer's copy of a residual add's error, masked by its top-k")
    s.kernel(f"{layer}.err_copy", "error_copy", "error", layer, [e], [c], **kw)
    return c


def _declare_grads(s: Schedule, g: Graph, cfg: _Backprop, fmt: Formats) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for n in g.parametric():
        ts = []
        if n.name in cfg.weight_layers and cfg.fused_update:
            k = int(n.params["weight"][0].size)
            ts.append(s.tensor(f"grad:{n.name}.row", (k,), fmt.grad, Role.GRADIENT,
                               "one output channel's weight gradient, applied as soon as it is complete"))
        elif n.name in cfg.weight_layers:
            ts.append(s.tensor(f"grad:{n.name}.weight", n.params["weight"].shape, fmt.grad, Role.GRADIENT))
        if n.name in cfg.weight_layers or n.name in cfg.bias_layers:
            gb = fmt.grad if fmt.grad in ("f32", "s32") else "s32"
            ts.append(s.tensor(f"grad:{n.name}.bias", (n.params["weight"].shape[0],), gb, Role.GRADIENT))
        if ts:
            out[n.name] = ts
    return out


_UPDATE_OP = {"fqt": "fqt_update", "bp-qas": "qas_update", "float": "sgd_update"}


def _update(s: Schedule, n: Node, grads: list[str], method: str) -> None:
    params = [t for t in (f"{n.name}.weight", f"{n.name}.bias") if t in s.tensors]
    state = [t for t in (f"state:{n.name}.wqp", f"state:{n.name}.norm", f"state:{n.name}.step_scale",
                         f"state:{n.name}.velocity", f"state:{n.name}.bias_scale") if t in s.tensors]
    op = _UPDATE_OP[method]
    elements = sum(s.tensors[t].elements for t in grads)
    s.kernel(f"{n.name}.update", op, "update", n.name, [*grads, *params, *state], [*params, *state],
             elements)


def _state_backprop(s: Schedule, g: Graph, method: str, fmt: Formats, cfg: _Backprop,
                    needs: dict[str, bool]) -> None:
    """Resident method state (FQT: ranges, standardization, counters; BP: momentum)."""
    if method == "fqt":
        quant = fmt.act != "f32"
        owners = [t for t in [INPUT, *(n.name for n in g.nodes)] if needs[t] and
                  (t == INPUT or g.node(t).op in (*PARAMETRIC, Op.ADD))]
        if quant and owners:
            s.tensor("state:act_ranges", ((RANGE_RECORD_BYTES + ACT_QPARAMS_BYTES) * len(owners),), "u8",
                     Role.STATE, f"{len(owners)} EMA activation ranges with their scale and zero point")
        errs = error_range_owners(g, needs)
        if fmt.error != "f32" and errs:
            s.tensor("state:err_ranges", (RANGE_RECORD_BYTES * len(errs),), "u8", Role.STATE,
                     f"{len(errs)} EMA error ranges")
        if cfg.sample_grad_ranges:
            s.tensor("state:grad_ranges", (RANGE_RECORD_BYTES * len(cfg.weight_layers),), "u8", Role.STATE)
        for name in cfg.decisions.weight_layers:
            o = g.node(name).params["weight"].shape[0]
            if fmt.weight == "u8":
                s.tensor(f"state:{name}.wqp", (RANGE_BYTES,), "u8", Role.STATE)
            elif fmt.weight == "s8":
                s.tensor(f"state:{name}.wqp", (12 * o,), "u8", Role.STATE, "per channel: min, max, scale")
                s.tensor(f"state:{name}.step_scale", (o,), "f32", Role.STATE)
            s.tensor(f"state:{name}.norm", (9 * o,), "u8", Role.STATE, "per filter: EMA mean, sd, init flag")
            if name in cfg.decisions.partial_layers:   # the C library's static arrays of mt_fqt_keep.h
                # a batch adds each sample's own mask, OR-ed into the update mask (emit_fqt_partial_batch)
                s.tensor(f"state:{name}.keep", ((5 if cfg.loop == 1 else 6) * o + 8,), "u8", Role.STATE,
                         "partial updates: kept list (int32), update mask (uint8), k and kept count" +
                         ("" if cfg.loop == 1 else ", one sample's mask (uint8)"))
        if cfg.decisions.partial:
            s.tensor("state:partial_offsets", (len(cfg.weight_layers) + 1,), "s32", Role.STATE,
                     "partial updates: each trained layer's offset in the draw stream, the draw count")
        if quant:
            for n in g.parametric():
                if needs[n.name]:
                    _fqt_moving_constants(s, n, fmt, n.name in cfg.weight_layers)
        s.tensor("state:counters", (3,), "s32", Role.STATE, "loss max, step, RNG")
        scratch = range_scratch(g)
        s.tensor("state:range_scratch", (scratch.nbytes // 4,), "s32", Role.STATE,
                 f"per-channel accumulator min and max of the running layer ({scratch.channels} channels), "
                 "the logits' Q24 error")
    elif method == "bp-qas" and cfg.momentum:
        for name in sorted(cfg.weight_layers | cfg.bias_layers):
            node = g.node(name)
            n = (node.params["weight"].size if name in cfg.weight_layers else 0) + node.params["bias"].size
            s.tensor(f"state:{name}.velocity", (n,), "f32", Role.STATE)


def _fqt_moving_constants(s: Schedule, n: Node, fmt: Formats, trained: bool) -> None:
    """RAM constants of a quantized FQT layer on the error path: they move with the ranges every step.

    Its accumulator scales (for the bias rescale) and requantization multipliers (int8: per channel
    int32 multiplier and shift; uint8: one float32) are recomputed each step, and a layer that is not
    trained keeps its weight scales (and uint8 zero point) beside them; a trained layer's are in
    `wqp`. Layers before the first trained one have fixed ranges: their multipliers are Flash
    constants (`<layer>.requant`), as the C step emits them.
    """
    o = n.params["weight"].shape[0]
    s.tensor(f"state:{n.name}.bias_scale", (o,), "f32", Role.STATE)
    s.frozen_bytes.pop(f"{n.name}.requant", None)
    s8 = fmt.weight == "s8"
    s.tensor(f"state:{n.name}.requant", (2 * o if s8 else 1,), "s32" if s8 else "f32", Role.STATE,
             "multiplier and shift per channel" if s8 else "float32 multiplier")
    if not trained:
        s.tensor(f"state:{n.name}.w_scale", (o if s8 else 2,), "f32", Role.STATE,
                 "weight scale per channel" if s8 else "weight scale and zero point")
    elif not s8:
        s.tensor(f"state:{n.name}.bias_step", (o,), "f32", Role.STATE, "bias update steps")


def batch_grad_dtype(grad: str, batch: int) -> str:
    """The gradient buffer's dtype when `batch` per-sample gradients of format `grad` are summed.

    uint8 per-sample gradients are summed centred (|g - z| <= 255): int16 holds up to 128 samples.
    """
    if grad != "u8" or batch == 1:
        return grad
    return "s16" if 255 * batch <= 32767 else "s32"


def fqt_schedule(g: Graph, decisions: StepDecisions, batch: int = 1, kernels: str = "dsp") -> Schedule:
    """FQT one sample at a time, as `decisions` (`methods.decisions.fqt_decisions`) say."""
    g = prepare(g)
    f = decisions.formats
    fmt = replace(f, grad=batch_grad_dtype(f.grad, batch))
    cfg = _Backprop(decisions, fmt, 1, batch, "act", combine_real=f.error != "f32", prescale=f.error == "s8",
                    sample_grad_ranges=f.grad == "u8")
    s = _backprop_schedule(g, "fqt", cfg, kernels)
    if batch > 1 and "state:err_ranges" in s.tensors:   # the first step seeds the error ranges in rounds
        keep = seed_keep(s, cfg.sample_grad_ranges)
        if keep.tensors:
            s.tensor("state:seed_keep", (batch * keep.sample_bytes,), "u8", Role.STATE,
                     f"the first step's copies of {', '.join(keep.tensors)} per sample, for its "
                     "range-seeding rounds")
    s.trainable = list(decisions.weight_layers)
    s.decisions = decisions
    s.options.update({"precision": decisions.precision, "partial": bool(decisions.partial),
                      "partial_layers": {n: [p.lambda_min, p.lambda_max] for n, p in decisions.partial},
                      "batch_loop": batch})
    return s


def bp_qas_schedule(g: Graph, decisions: StepDecisions, batch: int = 1, kernels: str = "dsp") -> Schedule:
    """BP-QAS (Lin et al.'s static sparse update), the whole batch per pass."""
    g = prepare(g)
    settings = dict(decisions.settings)
    momentum = float(settings["momentum"])
    cfg = _Backprop(decisions, decisions.formats, batch, 1, "all", combine_real=False, momentum=momentum > 0)
    s = _backprop_schedule(g, "bp-qas", cfg, kernels)
    s.options.update(momentum=momentum, bias_last=int(settings["bias_last"]))
    s.predict_arena_bytes = plan_inference_arena(g, kernels=kernels).arena_bytes
    s.trainable = list(decisions.bias_layers)
    s.decisions = decisions
    return s


def float_schedule(g: Graph, decisions: StepDecisions, batch: int = 1, kernels: str = "dsp") -> Schedule:
    """float32 back-propagation with plain SGD, the whole batch per pass."""
    g = prepare(g)
    cfg = _Backprop(decisions, decisions.formats, batch, 1, "act", combine_real=False)
    s = _backprop_schedule(g, "float", cfg, kernels)
    s.trainable = list(decisions.weight_layers)
    s.decisions = decisions
    s.options["precision"] = "float32"
    return s
