"""Tensor lifetimes over the forward schedule, and the kernels' scratch sizes.

The schedule is the graph's node order: node i runs at step i, reading its inputs and writing
its output at that step. A tensor lives from the step that writes it (the model input: step 0,
written by the caller just before) to its last reader; the logits live to the last step.

Storage is shared where the C runtime works in place:
- `flatten` never moves data: its output *is* its input's storage (an alias);
- standalone `relu`/`relu6` and `add` are elementwise and read element i before writing it,
  so the output takes over an input's storage when that storage has no later reader.

Scratch memory of a kernel lives only during its own step. Its size mirrors the C companion
functions (`mt_conv2d_fwd_s8_get_buffer_size`, `mt_linear_fwd_s8_get_buffer_size`); the
generated `model_init` checks the two agree, so a change on one side cannot go unnoticed.

Example:
    >>> from mcutrain import zoo
    >>> lt = forward_lifetimes(zoo.build("digits-cnn"), kernels="ref")
    >>> [(s.name, s.size, s.first_use, s.last_use) for s in lt.storages][:2]
    [('input', 64, 0, 0), ('conv1', 1024, 0, 1)]
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mcutrain.graph import INPUT, Graph, Node, Op
from mcutrain.plan.arena import Storage
from mcutrain.targets import Target, helium_target

KERNELS = ("ref", "dsp")
"""Kernel builds: the portable reference loops, or the DSP inner loops (Cortex-M4/M7/M33)."""

IN_PLACE_OPS = frozenset({Op.RELU, Op.RELU6, Op.ADD})
"""Elementwise ops whose output may take over an input's storage."""


def is_depthwise(graph: Graph, node: Node) -> bool:
    """A grouped conv2d with one input channel per group (groups == C > 1): the depthwise kernel.

    A conv over a single input channel (C == groups == 1) is mathematically depthwise too, but
    the general kernel's GEMM runs it faster, with identical results.
    """
    if node.op != Op.CONV2D:
        return False
    c = graph.shape(node.inputs[0])[-1]
    return node.attrs["groups"] == c > 1 and node.params["weight"].shape[3] == 1


S16_K_MAX = 256
"""Largest padded reduction length whose conv weights the exporter widens to int16 (the 1x7
block's scratch, 14 bytes per k, stays within 3.5 KB)."""


def s16_row(node: Node) -> int:
    """Int16 weights per kernel row of a widened conv: kw * Cg rounded up to a multiple of 4."""
    _, _, kw, cg = node.params["weight"].shape
    return (kw * cg + 3) // 4 * 4


def widens_weights(graph: Graph, node: Node) -> bool:
    """Whether a DSP inference export stores this layer's (Flash) weights widened to int16.

    Plain and grouped convs (not depthwise) whose padded reduction kh * `s16_row` is at most
    `S16_K_MAX`: they run `mt_conv2d_fwd_s8_s16`, whose inner loop loads four weights with one
    LDRD instead of widening int8 weights in registers (3 instructions per 4). The price is
    Flash: 2 bytes per (padded) weight instead of 1.
    """
    if node.op != Op.CONV2D or is_depthwise(graph, node):
        return False
    return node.params["weight"].shape[1] * s16_row(node) <= S16_K_MAX


TINY_WORDS, TINY_RECORD, TINY_PIXELS = 5, 9, 16
"""The tiny path of `mt_conv2d_fwd_s8_s16` (mt_conv_s16.h): at most five int16 pairs per column,
nine int32 per output channel's record, columns of 16 pixels per pass."""


def tiny_words(kh: int, kw: int, cg: int) -> int:
    """Pairs of one column in the tiny path: per kernel row of L = kw * Cg values the full pairs
    of its groups of four, then the half-filled pairs of the rows' last groups packed by two."""
    length = kw * cg
    full = 2 * (length // 4) + (length % 4 == 3)
    halves = (0, 1, 2, 1)[length % 4]
    return kh * full + (kh * halves + 1) // 2


def runs_tiny(graph: Graph, node: Node) -> bool:
    """Whether a widened conv may take the tiny path of `mt_conv2d_fwd_s8_s16` (`mt_conv_tiny_fits`):
    groups 1, O a multiple of 4 and a reduction of at most ten values in at most five pairs."""
    o, kh, kw, cg = node.params["weight"].shape
    return (node.attrs["groups"] == 1 and o % 4 == 0 and kh * kw * cg <= 2 * TINY_WORDS
            and tiny_words(kh, kw, cg) <= TINY_WORDS)


def window_row_bytes(graph: Graph, node: Node) -> int:
    """Bytes of one padded input row in the DSP conv window (`mt_conv_window_row_bytes`): every
    tap of the output row, plus 3 bytes read past the last one, rounded up to 4."""
    kw = node.params["weight"].shape[2]
    c = graph.shape(node.inputs[0])[-1]
    out_w = graph.shape(node.name)[1]
    return (((out_w - 1) * node.attrs["stride"][1] + kw) * c + 3 + 3) // 4 * 4


def s16_scratch_bytes(graph: Graph, node: Node) -> int:
    """Scratch of `mt_conv2d_fwd_s8_s16` (`mt_conv2d_fwd_s8_s16_get_buffer_size`): the general
    path's window (kh + sh padded rows, kh + 2 sh for a one-pixel-wide output, at most the
    padded image's), three int16 columns, 16 bytes of requantization constants per output
    channel and a short last block's outputs; the tiny path's size where a layer may take it."""
    o, kh, _, _ = node.params["weight"].shape
    sh = node.attrs["stride"][0]
    out_h, out_w = graph.shape(node.name)[:2]
    slots = min(kh + sh * (2 if out_w == 1 else 1), (out_h - 1) * sh + kh)
    general = (slots * window_row_bytes(graph, node) + 2 * 3 * kh * s16_row(node) + 16 * o
               + (3 * o + 3) // 4 * 4)
    if runs_tiny(graph, node):
        tiny = 4 * TINY_RECORD * o + 4 * TINY_WORDS * TINY_PIXELS + 2 * kh * window_row_bytes(graph, node)
        return max(general, tiny)
    return general


def widens_inference_weights(kernels: str, target: str | Target | None = None) -> bool:
    """Whether an inference export for `kernels` on `target` stores its weights in the M4/M7 DSP
    kernels' layout (convs widened to int16, linear rows padded to 4), as the code generator's
    `emit_model(widen=...)` and the planner's Flash both take it: a DSP build for a core without
    Helium. A Helium build's kernels read the int8 weights as they are; `target` None: any core."""
    return kernels == "dsp" and not helium_target(target)


def flash_weight_bytes(graph: Graph, node: Node, kernels: str = "dsp",
                       target: str | Target | None = None) -> int:
    """Flash bytes of a frozen layer's weights in an inference export for `kernels` on `target`:
    where `widens_inference_weights`, widened convs take 2 bytes per padded weight and linear
    layers pad their rows to a multiple of 4 (`mt_linear_fwd_s8_rows4`); else int8 as they are."""
    w = node.params["weight"]
    widen = widens_inference_weights(kernels, target)
    if widen and widens_weights(graph, node):
        return 2 * w.shape[0] * w.shape[1] * s16_row(node)
    if widen and node.op == Op.LINEAR:
        return int(w.shape[0] * ((w.shape[1] + 3) // 4 * 4))
    return int(w.size)


def scratch_bytes(graph: Graph, node: Node, kernels: str = "dsp", widened: bool = True) -> int:
    """Scratch bytes the C kernel of `node` needs (0 for most ops).

    conv2d (not depthwise): one block of im2col columns of K = kh*kw*C/groups int16, 7 columns
    when K <= 256 (the 1x7 GEMM block; 14 * K bytes, at most 3.5 KB) else 2 (4 * K bytes), plus
    a plain int16 column (2 * K) when C/groups is not a multiple of 4; linear: the centred input
    row as int16 = 2 * I bytes. Only the DSP kernels use scratch. A conv that `widens_weights`
    runs `mt_conv2d_fwd_s8_s16` in an inference export (seven padded columns, 14 * kh * `s16_row`
    bytes, and 16 bytes of prepared requantization constants per output channel) but the int8
    kernel where its weights live in RAM (training libraries): it gets the larger of the two, so
    either kernel finds its scratch. `widened=False` gives the int8 kernel's size alone (a
    training step's own forward kernels, which never see int16 weights). Mirrors the C companions
    `mt_conv2d_fwd_s8_get_buffer_size`, `mt_conv2d_fwd_s8_s16_get_buffer_size` and
    `mt_linear_fwd_s8_get_buffer_size`.
    """
    if kernels not in KERNELS:
        raise ValueError(f"unknown kernels {kernels!r}; use one of {', '.join(KERNELS)}")
    if kernels == "ref":
        return 0
    if node.op == Op.CONV2D and not is_depthwise(graph, node):
        _, kh, kw, cg = node.params["weight"].shape
        k = kh * kw * cg
        cols = 7 if k <= 256 else 2
        s8 = 2 * cols * k + (2 * k if cg % 4 else 0)
        if widened and widens_weights(graph, node):
            return max(s8, s16_scratch_bytes(graph, node))
        return s8
    if node.op == Op.LINEAR:
        i = int(node.params["weight"].shape[1])
        # inference exports run mt_linear_fwd_s8_rows4 (the row padded to fours)
        return 2 * ((i + 3) // 4 * 4) if widened else 2 * i
    return 0


@dataclass
class Lifetimes:
    """The storages of one schedule, and which storage holds each tensor."""

    steps: int
    storages: list[Storage]
    storage_of: dict[str, int]
    """Tensor name -> index into `storages`."""
    scratch_of: dict[str, int]
    """Node name -> index of its scratch storage (only nodes that need scratch)."""


def _nbytes(shape: tuple[int, ...]) -> int:
    return int(np.prod(shape))


def forward_lifetimes(graph: Graph, kernels: str = "dsp", in_place: bool = True) -> Lifetimes:
    """Storages of the int8 forward pass (one sample) with their lifetimes, in schedule order."""
    last_read: dict[str, int] = {INPUT: 0}
    for i, n in enumerate(graph.nodes):
        last_read[n.name] = i
        for s in n.inputs:
            last_read[s] = max(last_read[s], i)
    last_read[graph.output] = len(graph.nodes) - 1

    storages: list[Storage] = [Storage(INPUT, _nbytes(graph.input_shape), 0, last_read[INPUT], [INPUT])]
    storage_of: dict[str, int] = {INPUT: 0}
    scratch_of: dict[str, int] = {}
    for i, n in enumerate(graph.nodes):
        target = None
        if n.op == Op.FLATTEN:
            target = storage_of[n.inputs[0]]
        elif in_place and n.op in IN_PLACE_OPS:
            for s in n.inputs:
                st = storages[storage_of[s]]
                # the storage's last reader so far is this step: no later reader sees it overwritten
                if st.last_use == i and st.scratch_of is None:
                    target = storage_of[s]
                    break
        if target is None:
            storage_of[n.name] = len(storages)
            storages.append(Storage(n.name, _nbytes(graph.shape(n.name)), i, last_read[n.name], [n.name]))
        else:
            st = storages[target]
            st.tensors.append(n.name)
            st.last_use = max(st.last_use, last_read[n.name])
            storage_of[n.name] = target
        need = scratch_bytes(graph, n, kernels)
        if need:
            scratch_of[n.name] = len(storages)
            storages.append(Storage(f"{n.name}.scratch", need, i, i, [], scratch_of=n.name))
    return Lifetimes(len(graph.nodes), storages, storage_of, scratch_of)
