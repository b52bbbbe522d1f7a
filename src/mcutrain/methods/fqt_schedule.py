"""The schedule of one FQT step: every kernel call with the tensors it reads and writes.

The planner and the code generator read this list instead of re-deriving the
method: per phase (`forward`, `error`, `weight_grad`, `update`) one entry per
kernel call, named like its C twin (`conv2d_bwd_in_u8`), with tensor names
from `tensors`, whose entries give the shape (batch included), the element
type and the role (`activation`, `kept`, `error`, `grad`, `weight`, `bias`,
`state`). Activations that only flow forward are transient; `kept` ones live
until their layer's backward; errors live from their producer to their consumer.

Example:
    >>> from mcutrain import zoo
    >>> import numpy as np
    >>> from mcutrain.methods.fqt import FQT
    >>> from mcutrain.methods.fqt_state import FQTConfig
    >>> x = np.zeros((4, 8, 8, 1), np.float32)
    >>> calls, tensors = fqt_schedule(FQT(zoo.build("digits-cnn"), FQTConfig(trainable="last:1"), x), 32)
    >>> [c.kernel for c in calls if c.phase == "weight_grad"]
    ['linear_bwd_w_s8']
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from mcutrain.graph import INPUT, PARAMETRIC, Op

_BYTES = {"u8": 1, "s8": 1, "s16": 2, "s32": 4, "f32": 4}


@dataclass(frozen=True)
class TensorInfo:
    name: str
    shape: tuple[int, ...]
    dtype: str
    role: str

    @property
    def bytes(self) -> int:
        return int(np.prod(self.shape)) * _BYTES[self.dtype]


@dataclass(frozen=True)
class KernelCall:
    phase: str
    kernel: str
    node: str
    reads: tuple[str, ...]
    writes: tuple[str, ...]
    macs: int = 0
    notes: dict = field(default_factory=dict, compare=False)


def fqt_schedule(method, batch: int) -> tuple[list[KernelCall], dict[str, TensorInfo]]:
    """(kernel calls in execution order, tensors by name) of one step of `method` on `batch` samples.

    MACs are those of full updates; with partial updates the executed share is
    reported per step in `StepStats.macs`.
    """
    g, p = method.graph, method.prec
    act_t, err_t = p.acts, p.errors
    w_t = p.weights
    acc_t = "f32" if err_t == "f32" else "s32"
    tensors: dict[str, TensorInfo] = {}
    calls: list[KernelCall] = []
    train = set(method.trainable)

    def t(name: str, shape, dtype: str, role: str) -> str:
        tensors[name] = TensorInfo(name, tuple(int(d) for d in shape), dtype, role)
        return name

    def kept_or_act(tensor: str, kept: bool) -> str:
        return t(f"act:{tensor}", (batch, *g.shape(tensor)), act_t, "kept" if kept else "activation")

    kept_inputs = {n.inputs[0] for n in g.nodes if n.name in train}
    # -- phase 1: forward
    kept_or_act(INPUT, INPUT in kept_inputs)
    for n in g.nodes:
        on_path = method.needs[n.name]
        relu_kept = on_path and (n.act != "none" or n.op in (Op.RELU, Op.RELU6))
        y = kept_or_act(n.name, n.name in kept_inputs or relu_kept)
        ins = tuple(f"act:{s}" for s in n.inputs)
        reads, writes, macs = list(ins), [y], batch * g.macs(n)
        if n.op in PARAMETRIC:
            o = n.params["weight"].shape[0]
            reads += [t(f"w:{n.name}", n.params["weight"].shape, w_t, "weight"),
                      t(f"b:{n.name}", (o,), "f32" if w_t == "f32" else "s32", "bias")]
        if n.op == Op.MAXPOOL and on_path:
            writes.append(t(f"argmax:{n.name}", (batch, *g.shape(n.name)), "u8", "kept"))
        calls.append(KernelCall("forward", f"{n.op.value}_fwd_{act_t}", n.name, tuple(reads), tuple(writes),
                                macs))
    out = g.output
    t("labels", (batch,), "s32", "activation")
    t(f"err:{out}", (batch, *g.output_shape), err_t, "error")
    t("loss", (batch,), "s32", "activation")
    calls.append(KernelCall("error", "softmax_ce_s32", out, (f"act:{out}", "labels"), ("loss", f"err:{out}")))
    # -- phases 2 and 3, reverse graph order
    for n in reversed(g.nodes):
        if not method.needs[n.name]:
            continue
        e = f"err:{n.name}"
        src_needs = [method.needs[s] for s in n.inputs]
        if n.op in PARAMETRIC:
            o = n.params["weight"].shape[0]
            if n.name in train:
                gw = t(f"grad:{n.name}", n.params["weight"].shape, acc_t, "grad")
                gb = t(f"gradb:{n.name}", (o,), acc_t, "grad")
                calls.append(KernelCall("weight_grad", f"{n.op.value}_bwd_w_{err_t}", n.name,
                                        (f"act:{n.inputs[0]}", e), (gw, gb), batch * g.macs(n),
                                        {"per_sample_8bit": p.quantize_sample_grads}))
            if src_needs[0]:
                dst = t(f"err:{n.inputs[0]}", (batch, *g.shape(n.inputs[0])), err_t, "error")
                calls.append(KernelCall("error", f"{n.op.value}_bwd_in_{err_t}", n.name, (e, f"w:{n.name}"),
                                        (dst,), batch * g.macs(n)))
            continue
        reads = [e] + ([f"argmax:{n.name}"] if n.op == Op.MAXPOOL else []) + \
                ([f"act:{n.name}"] if n.op in (Op.RELU, Op.RELU6) else [])
        writes = [t(f"err:{s}", (batch, *g.shape(s)), err_t, "error")
                  for s, need in zip(n.inputs, src_needs) if need]
        if writes:
            calls.append(KernelCall("error", f"{n.op.value}_bwd_{err_t}", n.name, tuple(reads),
                                    tuple(writes)))
    # -- phase 4: update
    for n in g.parametric():
        if n.name not in train:
            continue
        o = n.params["weight"].shape[0]
        st = t(f"norm:{n.name}", (2, o), "f32", "state")
        calls.append(KernelCall("update", f"{n.op.value}_upd_{w_t}", n.name,
                                (f"grad:{n.name}", f"gradb:{n.name}", st, f"w:{n.name}", f"b:{n.name}"),
                                (f"w:{n.name}", f"b:{n.name}", st)))
    return calls, tensors
