"""Schedule builders: one training step of each method as ordered kernels over declared tensors.

`build_schedule(graph, method, ...)` dispatches to:

- `none`: the int8 inference pass (what `plan_inference_arena` plans, so both agree);
- `fqt` (`uint8`, `mixed`, `float32`, `int8`): one sample at a time (FQT accumulates
  per-sample gradients), forward keeping what the backward reads (the input of each trainable
  layer, activated outputs for their masks, max-pool argmax), loss, error propagation, weight
  gradient into a gradient buffer, update in place. With `batch` 1 each layer is updated right
  after its backward (its weights are not read again in the step, so the result is the
  simulator's); with `batch` > 1 the per-sample part is a loop and the gradient buffers live
  across it, updated after the last sample. Partial updates are planned at their worst case
  (every structure kept), plus the ranking scratch;
- `bp-qas` and `float`: the whole batch in one pass, as the simulators do; errors float32
  (the STE kernels). Their update is elementwise (QAS-scaled or plain SGD), so each output
  channel's weight gradient is applied as soon as it is complete: one row of gradient at a
  time instead of a layer-sized buffer (Lin et al., NeurIPS 2022, likewise apply updates
  during the backward pass to free gradient memory);
- `zo`: the batch in one pass, as the simulator does. A base pass gives the losses; each
  perturbation unit then runs its queries one at a time (the simulator stacks them; the
  numbers are the same), each re-running only the tail of the network from the unit's cached
  base tensors, and updates its layers right after its last query (a unit's tail never
  contains an earlier unit's layer, so this equals the simulator's update at the end). Two
  ways to have the cached tensors: `cache` keeps them from the base pass (the simulator's way;
  small when few layers train), `recompute` runs a second base pass that stops at each unit
  and frees what no later unit needs (one extra forward pass of MACs; small when every layer
  trains). `auto` plans both and keeps the smaller arena.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np

from mcutrain.graph import INPUT, PARAMETRIC, Graph, Node, Op, fold_batchnorm, fuse_activations
from mcutrain.methods.fqt_state import PRECISIONS, precision
from mcutrain.methods.trainable import resolve_trainable
from mcutrain.plan.lifetimes import scratch_bytes
from mcutrain.plan.schedule import Role, Schedule

METHODS = ("none", "fqt", "zo", "bp-qas", "float")
RANGE_BYTES = 16
"""One tracked range: float32 min, max, scale and int32 zero point."""


@dataclass(frozen=True)
class Formats:
    """Number formats (dtype tags) of one method's tensors."""

    weight: str
    bias: str
    act: str
    error: str
    grad: str


def _fqt_formats(prec: str, batch: int) -> Formats:
    p = precision(prec)
    tag = {"u8": "u8", "s8": "s8", "f32": "f32"}
    if p.name == "uint8":
        # the per-sample gradient is quantized to uint8 (seed A); the batch sum of centred values
        # (|g - z| <= 255) fits int16 for up to 128 samples
        grad = "u8" if batch == 1 else ("s16" if 255 * batch <= 32767 else "s32")
    elif p.name == "int8":
        grad = "s32"
    else:
        grad = "f32"
    return Formats(tag[p.weights], "f32" if p.weights == "f32" else "s32", tag[p.acts], tag[p.errors], grad)


INT8 = Formats("s8", "s32", "s8", "f32", "f32")
"""zo / bp-qas: the int8 graph; bp-qas errors and gradients are float32 (STE kernels)."""
FLOAT = Formats("f32", "f32", "f32", "f32", "f32")


def prepare(graph: Graph) -> Graph:
    """The graph the methods train: BatchNorm folded, activations fused."""
    return fuse_activations(fold_batchnorm(graph))


def _elems(shape: tuple[int, ...]) -> int:
    return int(np.prod(shape, dtype=np.int64))


# ---------------------------------------------------------------- shared pieces


class _Builder:
    """Declares parameters (resident or Flash) and emits forward kernels."""

    def __init__(self, g: Graph, method: str, batch: int, fmt: Formats, ram_layers: set[str],
                 ram_biases: set[str], kernels: str = "dsp"):
        self.g, self.fmt, self.kernels = g, fmt, kernels
        self.s = Schedule(g.name, method, batch)
        self.ram_layers = ram_layers
        for n in g.parametric():
            w, o = n.params["weight"], n.params["weight"].shape[0]
            if n.name in ram_layers:
                self.s.tensor(f"{n.name}.weight", w.shape, fmt.weight, Role.WEIGHT)
            else:
                self.s.frozen_bytes[f"{n.name}.weight"] = _elems(w.shape) * _bytes(fmt.weight)
            if n.name in ram_layers or n.name in ram_biases:
                self.s.tensor(f"{n.name}.bias", (o,), fmt.bias, Role.WEIGHT)
            else:
                self.s.frozen_bytes[f"{n.name}.bias"] = o * _bytes(fmt.bias)
            # requantization constants of an int8 layer: per-channel multiplier and shift
            if fmt.act == "s8":
                self.s.frozen_bytes[f"{n.name}.requant"] = 8 * o

    def params(self, n: Node) -> list[str]:
        """Resident parameter tensors a kernel of `n` reads (frozen ones live in Flash)."""
        return [t for t in (f"{n.name}.weight", f"{n.name}.bias") if t in self.s.tensors]

    def scratch(self, n: Node, tag: str, dtype: str) -> list[str]:
        """The kernel scratch of `n`'s forward (the C companions' formula; float kernels: float columns)."""
        need = scratch_bytes(self.g, n, self.kernels)
        if not need:
            return []
        if dtype == "f32":
            need *= 2
        return [self.s.tensor(f"{tag}.scratch", (need,), "u8", Role.SCRATCH)]

    def forward(self, nodes: list[Node], name_of: dict[str, str], samples: int, prefix: str,
                role_of, phase: str = "forward", loop: str | None = None, repeat: int = 1,
                extra_reads: dict[str, list[str]] | None = None, op_suffix: str = "fwd") -> None:
        """Forward kernels of `nodes`; `name_of` maps graph tensors to schedule tensors (updated)."""
        s, act = self.s, self.fmt.act
        for n in nodes:
            out = s.tensor(f"{prefix}{n.name}", (samples, *self.g.shape(n.name)), act, role_of(n.name))
            ins = [name_of[x] for x in n.inputs]
            kw: dict = {"loop": loop, "repeat": repeat}
            if n.op == Op.FLATTEN:
                kw["alias"] = [(out, ins[0])]
            elif n.op in (Op.RELU, Op.RELU6, Op.ADD):
                kw["in_place"] = [(out, i) for i in ins]
            reads = ins + (extra_reads or {}).get(n.name, self.params(n))
            writes = [out, *self.scratch(n, f"{prefix}{n.name}", act)]
            if n.op == Op.MAXPOOL and role_of(f"{n.name}/argmax") == Role.KEPT:
                writes.append(s.tensor(f"{prefix}{n.name}.argmax", (samples, *self.g.shape(n.name)), "u8",
                                       Role.KEPT))
            op = "depthwise_conv2d" if _depthwise(self.g, n) else n.op.value
            s.kernel(f"{prefix}{n.name}.{op_suffix}", f"{op}_fwd", phase, n.name, reads, writes,
                     samples * self.g.macs(n), **kw)
            name_of[n.name] = out


def _bytes(dtype: str) -> int:
    from mcutrain.plan.schedule import DTYPE_BYTES
    return DTYPE_BYTES[dtype]


def _depthwise(g: Graph, n: Node) -> bool:
    return n.op == Op.CONV2D and n.attrs["groups"] == g.shape(n.inputs[0])[-1] > 1 \
        and n.params["weight"].shape[3] == 1


def _needs(g: Graph, wanted: set[str]) -> dict[str, bool]:
    """Tensors on the error path: a wanted layer or anything upstream of one."""
    needs = {INPUT: False}
    for n in g.nodes:
        needs[n.name] = n.name in wanted or any(needs[s] for s in n.inputs)
    return needs


# ---------------------------------------------------------------- inference


def inference_schedule(g: Graph, batch: int = 1, kernels: str = "dsp") -> Schedule:
    """`none`: the int8 forward pass (tensor names = node names, as `plan_inference_arena`)."""
    b = _Builder(g, "none", batch, INT8, set(), set(), kernels)
    b.s.tensor(INPUT, (batch, *g.input_shape), "s8", Role.INPUT)
    name_of = {INPUT: INPUT}
    b.forward(g.nodes, name_of, batch, "", lambda t: Role.LOGITS if t == g.output else Role.ACTIVATION)
    b.s.options = {"samples_per_pass": batch}
    return b.s


# ---------------------------------------------------------------- back-propagation methods


@dataclass(frozen=True)
class _Backprop:
    """How a back-propagation method runs its step."""

    fmt: Formats
    samples: int                 # samples per forward/backward pass (FQT: 1)
    loop: int                    # FQT batch loop count (1: no loop)
    weight_layers: set[str]
    bias_layers: set[str]
    kept_output_for: str         # "act": activated outputs (masks); "all": every output (STE)
    combine_real: bool           # quantized errors summed as float32 reals at a fork (FQT)
    prescale: bool = False       # int8 FQT: int16 copy of the error before propagation
    partial: bool = False        # FQT partial updates: ranking scratch (planned at full size)
    sample_grad_ranges: bool = False   # uint8 FQT: each per-sample gradient has its own EMA range
    fused_update: bool = False   # elementwise update: gradient row by row, applied at once (bp-qas, float)
    momentum: bool = False       # bp-qas: SGD momentum (a float32 velocity per trained value)


def _backprop_schedule(g: Graph, method: str, cfg: _Backprop, kernels: str) -> Schedule:
    fmt, spl = cfg.fmt, cfg.samples
    wanted = cfg.weight_layers | cfg.bias_layers
    needs = _needs(g, wanted)
    dynamic = needs  # quantized FQT: ranges change from the first trained layer on
    ram_biases = set(cfg.bias_layers)
    if method == "fqt" and fmt.act != "f32":
        ram_biases |= {n.name for n in g.parametric() if dynamic[n.name]}   # rescaled every step
    b = _Builder(g, method, cfg.samples * cfg.loop, fmt, cfg.weight_layers, ram_biases, kernels)
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
            if cfg.partial and n.name in cfg.weight_layers:
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
                op = "depthwise_conv2d" if _depthwise(g, n) else n.op.value
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
            s.tensor("state:act_ranges", (RANGE_BYTES * len(owners),), "u8", Role.STATE,
                     f"{len(owners)} EMA activation ranges")
        errs = [n.name for n in g.nodes if needs[n.name]]
        if fmt.error != "f32" and errs:
            s.tensor("state:err_ranges", (RANGE_BYTES * len(errs),), "u8", Role.STATE,
                     f"{len(errs)} EMA error ranges")
        if cfg.sample_grad_ranges:
            s.tensor("state:grad_ranges", (RANGE_BYTES * len(cfg.weight_layers),), "u8", Role.STATE)
        for name in cfg.weight_layers:
            o = g.node(name).params["weight"].shape[0]
            if fmt.weight == "u8":
                s.tensor(f"state:{name}.wqp", (RANGE_BYTES,), "u8", Role.STATE)
            elif fmt.weight == "s8":
                s.tensor(f"state:{name}.wqp", (12 * o,), "u8", Role.STATE, "per channel: min, max, scale")
                s.tensor(f"state:{name}.step_scale", (o,), "f32", Role.STATE)
            s.tensor(f"state:{name}.norm", (9 * o,), "u8", Role.STATE, "per filter: EMA mean, sd, init flag")
        if quant:
            for n in g.parametric():
                if needs[n.name]:
                    o = n.params["weight"].shape[0]
                    s.tensor(f"state:{n.name}.bias_scale", (o,), "f32", Role.STATE)
        s.tensor("state:counters", (3,), "s32", Role.STATE, "loss max, step, RNG")
    elif method == "bp-qas" and cfg.momentum:
        for name in sorted(cfg.weight_layers | cfg.bias_layers):
            node = g.node(name)
            n = (node.params["weight"].size if name in cfg.weight_layers else 0) + node.params["bias"].size
            s.tensor(f"state:{name}.velocity", (n,), "f32", Role.STATE)


def fqt_schedule(g: Graph, prec: str = "uint8", trainable: str = "all", batch: int = 1,
                 partial: bool = False, kernels: str = "dsp") -> Schedule:
    """FQT (`prec` in uint8, mixed, float32, int8); `partial`: dynamic partial updates on (worst case)."""
    if prec not in PRECISIONS:
        raise ValueError(f"unknown FQT precision {prec!r}; use one of {', '.join(PRECISIONS)}")
    g = prepare(g)
    layers = set(resolve_trainable(g, trainable))
    fmt = _fqt_formats(prec, batch)
    cfg = _Backprop(fmt, 1, batch, layers, set(), "act", combine_real=fmt.error != "f32",
                    prescale=fmt.error == "s8", partial=partial,
                    sample_grad_ranges=precision(prec).quantize_sample_grads)
    s = _backprop_schedule(g, "fqt", cfg, kernels)
    s.trainable = [n.name for n in g.parametric() if n.name in layers]
    s.options.update({"precision": prec, "partial": partial, "batch_loop": batch})
    return s


def bp_qas_schedule(g: Graph, trainable: str = "all", batch: int = 1, bias_last: int = 0,
                    momentum: float = 0.0, kernels: str = "dsp") -> Schedule:
    """BP-QAS (Lin et al.'s static sparse update): weights of `trainable`, biases of the last `bias_last`."""
    g = prepare(g)
    weights = set(resolve_trainable(g, trainable))
    layers = [n.name for n in g.parametric()]
    if not 0 <= bias_last <= len(layers):
        raise ValueError(f"bias_last must be in [0, {len(layers)}]")
    biases = set(layers[len(layers) - bias_last:]) if bias_last else set()
    cfg = _Backprop(INT8, batch, 1, weights, weights | biases, "all", combine_real=False,
                    momentum=momentum > 0, fused_update=True)
    s = _with_options(_backprop_schedule(g, "bp-qas", cfg, kernels), momentum=momentum, bias_last=bias_last)
    s.trainable = [n for n in layers if n in weights | biases]
    return s


def _with_options(s: Schedule, **kw) -> Schedule:
    s.options.update(kw)
    return s


def float_schedule(g: Graph, trainable: str = "all", batch: int = 1, kernels: str = "dsp") -> Schedule:
    """float32 back-propagation with plain SGD, the whole batch per pass."""
    g = prepare(g)
    layers = set(resolve_trainable(g, trainable))
    cfg = _Backprop(FLOAT, batch, 1, layers, set(), "act", combine_real=False, fused_update=True)
    s = _backprop_schedule(g, "float", cfg, kernels)
    s.trainable = [n.name for n in g.parametric() if n.name in layers]
    s.options["precision"] = "float32"
    return s


# ---------------------------------------------------------------- zeroth order


def zo_units(g: Graph, layers: list[str], perturb: str):
    """The method's own perturbation units (`zo.plan_units`) from shapes alone."""
    from mcutrain.methods.zo import plan_units
    shapes = SimpleNamespace(graph=g, weights={n.name: n.params["weight"] for n in g.parametric()},
                             biases={n.name: n.params["bias"] for n in g.parametric()})
    return plan_units(shapes, layers, perturb)   # type: ignore[arg-type]


def zo_schedule(g: Graph, trainable: str = "all", batch: int = 1, perturb: str = "mix", queries: int = 50,
                mask: str = "none", kernels: str = "dsp", base: str = "auto") -> Schedule:
    """ZO (seed B): `base` 'cache' keeps every unit's base tensors from one base pass (the
    simulator's order); 'recompute' runs a second base pass that stops at each unit (module
    docstring); 'auto' plans both and keeps the one with the smaller arena.
    """
    if base == "auto":
        from mcutrain.plan.training import plan_training
        a = zo_schedule(g, trainable, batch, perturb, queries, mask, kernels, "cache")
        b = zo_schedule(g, trainable, batch, perturb, queries, mask, kernels, "recompute")
        return a if plan_training(a).arena_bytes <= plan_training(b).arena_bytes else b
    if base not in ("cache", "recompute"):
        raise ValueError(f"ZO base pass {base!r}: use auto, cache or recompute")
    from mcutrain.methods import zo_forward as zf
    if queries < 1:
        raise ValueError(f"queries must be at least 1, got {queries}")
    g = prepare(g)
    layers = resolve_trainable(g, trainable)
    units = zo_units(g, layers, perturb)
    b = _Builder(g, "zo", batch, INT8, set(layers), set(), kernels)
    s = b.s
    s.trainable = list(layers)
    s.options.update({"perturb": perturb, "queries": queries, "mask": mask, "samples_per_pass": batch,
                      "base": base, "units": [f"{u.kind}:{','.join(u.layers)}" for u in units]})
    s.tensor("state:counters", (2,), "s32", Role.STATE, "RNG state, step")
    s.tensor(INPUT, (batch, *g.input_shape), "s8", Role.INPUT)
    order = {n.name: i for i, n in enumerate(g.nodes)}
    order[INPUT] = -1

    # what each unit reads from the base pass
    plans = []
    for u in units:
        shim = SimpleNamespace(graph=g)
        affected = zf.affected_nodes(shim, set(u.layers))   # type: ignore[arg-type]
        names = {n.name for n in affected}
        rerun = [n for n in affected if not (u.kind == "np" and n.name == u.layers[0])]
        cached = {x for n in rerun for x in n.inputs if x not in names}
        if u.kind == "np":
            cached |= {u.layers[0], g.node(u.layers[0]).inputs[0]}
        plans.append((u, rerun, cached))
    all_cached = {t for _, _, c in plans for t in c}

    # pass A: losses of the unperturbed model (cache: it also keeps the units' base tensors)
    name_a = {INPUT: INPUT}
    keep = all_cached if base == "cache" else set()
    b.forward(g.nodes, name_a, batch, "a:", lambda t: Role.KEPT if t in keep else Role.ACTIVATION)
    l0 = s.tensor("l0", (batch,), "s32", Role.LOGITS)
    s.kernel("a:loss", "softmax_ce", "loss", g.output, [name_a[g.output]], [l0], batch * g.num_classes)
    if base == "cache":
        for p in plans:
            _zo_unit(b, p, name_a, batch, queries, mask)
            _zo_update(b, p, name_a)
        s.validate()
        return s

    # pass B with the units' queries; a unit runs once its cached tensors exist
    last_needed = max((order[t] for t in all_cached), default=-1)
    name_b = {INPUT: INPUT}
    waiting: list = []
    for p in plans:
        if max(order[t] for t in p[2]) == -1:
            _zo_unit(b, p, name_b, batch, queries, mask)
            waiting.append(p)
    waiting = _zo_flush_updates(b, waiting, name_b, order, -1, last_needed)
    for n in g.nodes[: last_needed + 1]:
        b.forward([n], name_b, batch, "b:", lambda t: Role.KEPT if t in all_cached else Role.ACTIVATION)
        for p in plans:
            if max(order[t] for t in p[2]) == order[n.name]:
                _zo_unit(b, p, name_b, batch, queries, mask)
                waiting.append(p)
        waiting = _zo_flush_updates(b, waiting, name_b, order, order[n.name], last_needed)
    _zo_flush_updates(b, waiting, name_b, order, len(g.nodes), last_needed)
    s.validate()
    return s


def _zo_flush_updates(b: _Builder, waiting: list, name_b: dict[str, str], order: dict[str, int], done: int,
                      last_needed: int) -> list:
    """Update each waiting unit whose layers pass B has computed (or will never compute)."""
    keep = []
    for p in waiting:
        u = p[0]
        if all(order[m] <= done or order[m] > last_needed for m in u.layers) or done >= len(order) - 1:
            _zo_update(b, p, name_b)
        else:
            keep.append(p)
    return keep


def _zo_unit(b: _Builder, plan, name_b: dict[str, str], batch: int, queries: int, mask: str) -> None:
    u, rerun, _ = plan
    s, g = b.s, b.g
    tag = f"{u.kind}:{u.layers[0]}"
    loop = f"queries:{tag}"
    big = "s64" if u.kind == "wp" or queries > 127 else "s32"
    if u.kind == "wp":
        acc = s.tensor(f"S:{tag}", (u.dim,), big, Role.GRADIENT, "sum over queries of dL * u, per parameter")
    else:
        acc = s.tensor(f"gy:{tag}", (batch, u.dim), big, Role.GRADIENT, "node gradient sums")
    s.kernel(f"{tag}.zero", "zero", "query", u.layers[0], [], [acc])
    msk: list[str] = []
    if mask != "none":
        n_mask = u.dim if u.kind == "wp" else g.shape(u.layers[0])[-1]
        msk = [s.tensor(f"mask:{tag}", (n_mask,), "u8", Role.GRADIENT)]
        reads = [name_b[u.layers[0]]] if u.kind == "np" else []
        s.kernel(f"{tag}.mask", "zo_mask", "query", u.layers[0], [*reads, "state:counters"], msk)
    kw = {"loop": loop, "repeat": queries}
    names = dict(name_b)
    extra: dict[str, list[str]] = {}
    if u.kind == "wp":
        for m in u.layers:
            node = g.node(m)
            pw = s.tensor(f"pw:{m}.weight", node.params["weight"].shape, "s8", Role.PERTURBED)
            pb = s.tensor(f"pw:{m}.bias", node.params["bias"].shape, "s32", Role.PERTURBED)
            s.kernel(f"{tag}.perturb.{m}", "zo_perturb_wp", "query", m,
                     [*b.params(node), "state:counters", *msk], [pw, pb, "state:counters"], **kw)
            extra[m] = [pw, pb]
    else:
        y = u.layers[0]
        py = s.tensor(f"py:{y}", (batch, *g.shape(y)), "s8", Role.PERTURBED)
        s.kernel(f"{tag}.perturb", "zo_perturb_np", "query", y, [name_b[y], "state:counters", *msk],
                 [py, "state:counters"], **kw)
        names[y] = py
    b.forward(rerun, names, batch, f"q:{tag}:", lambda t: Role.QUERY, phase="query", loop=loop,
              repeat=queries, extra_reads=extra or None, op_suffix="query")
    lq = s.tensor(f"lq:{tag}", (batch,), "s32", Role.QUERY)
    s.kernel(f"{tag}.loss", "softmax_ce", "query", g.output, [names[g.output]], [lq],
             batch * g.num_classes, **kw)
    s.kernel(f"{tag}.accumulate", f"zo_accumulate_{u.kind}", "query", u.layers[0],
             [lq, "l0", acc, "state:counters", *msk], [acc, "state:counters"],
             s.tensors[acc].elements, **kw)


def _zo_update(b: _Builder, plan, name_b: dict[str, str]) -> None:
    u, _, _ = plan
    s, g = b.s, b.g
    tag = f"{u.kind}:{u.layers[0]}"
    acc = f"S:{tag}" if u.kind == "wp" else f"gy:{tag}"
    msk = [f"mask:{tag}"] if f"mask:{tag}" in s.tensors else []
    for m in u.layers:
        node = g.node(m)
        params = b.params(node)
        if u.kind == "wp":
            s.kernel(f"{m}.update", "qas_update", "update", m, [acc, *msk, *params], params,
                     node.params["weight"].size + node.params["bias"].size)
        else:
            # local weight gradient from the cached input, fused into the QAS update per output channel
            x = name_b[node.inputs[0]]
            s.kernel(f"{m}.bwd_w_update", f"{node.op.value}_bwd_w_qas_update", "weight_grad", m,
                     [acc, x, name_b[m], *msk, *params], params, s.batch * g.macs(node))


# ---------------------------------------------------------------- dispatch


def build_schedule(graph: Graph, method: str, trainable: str = "all", batch: int = 1,
                   precision: str = "uint8", perturb: str = "mix", queries: int = 50, mask: str = "none",
                   partial: bool = False, bias_last: int = 0, momentum: float = 0.0,
                   kernels: str = "dsp", zo_base: str = "auto") -> Schedule:
    """The schedule of one training step of `method` on `graph` (see the module docstring).

    >>> from mcutrain import zoo
    >>> s = build_schedule(zoo.build("digits-cnn"), "fqt", trainable="last:1")
    >>> [k.name for k in s.kernels if k.phase != "forward"]
    ['loss', 'fc.bwd_w', 'fc.update', 'ema_update']
    """
    if batch < 1:
        raise ValueError(f"batch must be at least 1, got {batch}")
    if method == "none":
        return inference_schedule(prepare(graph), batch, kernels)
    if method == "fqt":
        return fqt_schedule(graph, precision, trainable, batch, partial, kernels)
    if method == "zo":
        return zo_schedule(graph, trainable, batch, perturb, queries, mask, kernels, zo_base)
    if method == "bp-qas":
        return bp_qas_schedule(graph, trainable, batch, bias_last, momentum, kernels)
    if method == "float":
        return float_schedule(graph, trainable, batch, kernels)
    raise ValueError(f"unknown method {method!r}; use one of {', '.join(METHODS)}")


def schedule_for(method, batch: int = 1, kernels: str = "dsp") -> Schedule:
    """The schedule of a built training method (`FQT`, `ZOMethod`, `BPQASMethod`, `FloatMethod`).

    What the code generator calls with the method a user trained: the step is derived from the
    method's own configuration and graph, so it cannot drift from what the simulator ran.
    """
    name = getattr(method, "name", "")
    if name == "fqt":
        c = method.cfg
        return fqt_schedule(method.graph, c.precision, c.trainable, batch, c.lambda_min < 1.0, kernels)
    if name == "zo":
        c = method.cfg
        return zo_schedule(method.qm.graph, "layers:" + ",".join(method.layers), batch, c.perturb, c.queries,
                           c.mask, kernels)
    if name == "bp-qas":
        c = method.cfg
        return bp_qas_schedule(method.qm.graph, c.trainable, batch, c.bias_last, c.momentum, kernels)
    if name == "float":
        return float_schedule(method.graph, "layers:" + ",".join(method.trainable), batch, kernels)
    raise ValueError(f"no schedule for method {name!r}; known: fqt, zo, bp-qas, float")
