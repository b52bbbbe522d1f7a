"""The shared machinery of the schedule builders: number formats, tensor declaration, inference.

See `mcutrain.plan.schedules` for what each method's step looks like.
"""

from __future__ import annotations

import numpy as np

from mcutrain.graph import INPUT, Graph, Node, Op
from mcutrain.graph_passes import fold_batchnorm, fuse_activations
from mcutrain.methods.decisions import INT8, Formats
from mcutrain.plan.lifetimes import flash_weight_bytes, scratch_bytes
from mcutrain.plan.schedule import DTYPE_BYTES, Role, Schedule
from mcutrain.targets import Target

RANGE_BYTES = 16
"""One tracked range: float32 min, max, scale and int32 zero point."""


def prepare(graph: Graph) -> Graph:
    """The graph the methods train: BatchNorm folded, activations fused."""
    return fuse_activations(fold_batchnorm(graph))


def _elems(shape: tuple[int, ...]) -> int:
    return int(np.prod(shape, dtype=np.int64))


# ---------------------------------------------------------------- shared pieces


class StepBuilder:
    """Declares parameters (resident or Flash) and emits forward kernels."""

    def __init__(self, g: Graph, method: str, batch: int, fmt: Formats, ram_layers: set[str],
                 ram_biases: set[str], kernels: str = "dsp", target: str | Target | None = None):
        self.g, self.fmt, self.kernels = g, fmt, kernels
        self.inference = method == "none"
        self.s = Schedule(g.name, method, batch)
        self.ram_layers = ram_layers
        for n in g.parametric():
            w, o = n.params["weight"], n.params["weight"].shape[0]
            if n.name in ram_layers:
                self.s.tensor(f"{n.name}.weight", w.shape, fmt.weight, Role.WEIGHT)
            else:
                # inference exports for the M4/M7 DSP kernels widen frozen conv weights to int16
                # (not for Helium `target`s); training libraries keep int8 weights
                self.s.frozen_bytes[f"{n.name}.weight"] = (
                    flash_weight_bytes(g, n, kernels, target) if self.inference
                    else _elems(w.shape) * DTYPE_BYTES[fmt.weight])
            if n.name in ram_layers or n.name in ram_biases:
                self.s.tensor(f"{n.name}.bias", (o,), fmt.bias, Role.WEIGHT)
            else:
                self.s.frozen_bytes[f"{n.name}.bias"] = o * DTYPE_BYTES[fmt.bias]
            # requantization constants of an int8 layer: per-channel multiplier and shift
            if fmt.act == "s8":
                self.s.frozen_bytes[f"{n.name}.requant"] = 8 * o

    def params(self, n: Node) -> list[str]:
        """Resident parameter tensors a kernel of `n` reads (frozen ones live in Flash)."""
        return [t for t in (f"{n.name}.weight", f"{n.name}.bias") if t in self.s.tensors]

    def scratch(self, n: Node, tag: str, dtype: str) -> list[str]:
        """The kernel scratch of `n`'s forward (the C companions' formula; float kernels: float columns)."""
        need = scratch_bytes(self.g, n, self.kernels, widened=self.inference)
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
            op = "depthwise_conv2d" if is_depthwise(self.g, n) else n.op.value
            s.kernel(f"{prefix}{n.name}.{op_suffix}", f"{op}_fwd", phase, n.name, reads, writes,
                     samples * self.g.macs(n), **kw)
            name_of[n.name] = out


def is_depthwise(g: Graph, n: Node) -> bool:
    return n.op == Op.CONV2D and n.attrs["groups"] == g.shape(n.inputs[0])[-1] > 1 \
        and n.params["weight"].shape[3] == 1


def error_path(g: Graph, wanted: set[str]) -> dict[str, bool]:
    """Tensors on the error path: a wanted layer or anything upstream of one."""
    needs = {INPUT: False}
    for n in g.nodes:
        needs[n.name] = n.name in wanted or any(needs[s] for s in n.inputs)
    return needs


# ---------------------------------------------------------------- inference


def inference_schedule(g: Graph, batch: int = 1, kernels: str = "dsp",
                       target: str | Target | None = None) -> Schedule:
    """`none`: the int8 forward pass (tensor names = node names, as `plan_inference_arena`), its
    Flash weights laid out as the export for `kernels` on `target` stores them."""
    b = StepBuilder(g, "none", batch, INT8, set(), set(), kernels, target)
    b.s.tensor(INPUT, (batch, *g.input_shape), "s8", Role.INPUT)
    name_of = {INPUT: INPUT}
    b.forward(g.nodes, name_of, batch, "", lambda t: Role.LOGITS if t == g.output else Role.ACTIVATION)
    b.s.options = {"samples_per_pass": batch}
    return b.s


# ---------------------------------------------------------------- back-propagation methods


