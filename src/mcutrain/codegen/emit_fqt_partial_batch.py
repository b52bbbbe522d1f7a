"""FQT partial updates (dynamic partial gradient updates, lambda_min < 1) with a batch: the bookkeeping the
batch-1 step does not need.

The simulator (`methods.fqt_backward.FQTBackward._bwd_parametric`) decides per sample: each layer keeps the
k structures of largest error, k from the sample's loss against the running maximum loss *after the whole
batch's losses joined it*, and the batch updates the union of its samples' kept structures. So the
generated step
- finds the batch's largest loss first (`fqt_loss_pass`: a forward pass over the batch, before any
  backward; a batch-1 step knows it from its one sample);
- lets each sample's top-k write its own mask (`<layer>_smp`) and ORs it into the layer's update mask
  (`<layer>_upd`, cleared when the step starts), which the update and the bias rescale read;
- places each layer in the stream of the update's stochastic draws from the union's counts, once the
  batch's masks are complete (`offset_lines`, before the first update).
The backward kernels run dense on the masked errors (`FqtEmitter.kept_only` is empty): a pruned
structure's errors are zero, so every sum is the simulator's.

Example:
    >>> from mcutrain import zoo
    >>> from mcutrain.methods.fqt import FQT
    >>> from mcutrain.methods.fqt_state import FQTConfig
    >>> from mcutrain.codegen.emit_fqt import emit_fqt_training
    >>> x = np.random.default_rng(0).random((8, 8, 8, 1), dtype=np.float32)
    >>> m = FQT(zoo.build("digits-cnn"), FQTConfig(precision="int8", lambda_min=0.5), x)
    >>> "fqt_loss_pass(labels)" in emit_fqt_training(m, batch=4).source
    True
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np  # noqa: F401  (the doctest's namespace)

from mcutrain.codegen.emit_fqt_base import FqtEmitter
from mcutrain.codegen.emit_fqt_float import own_range_lines
from mcutrain.graph import INPUT
from mcutrain.plan.schedule import Kernel

__all__ = ["loss_pass_function", "mask_declarations", "offset_lines", "partial_batch_emitters",
           "union_reset_lines"]

Emitter = Callable[[FqtEmitter, Kernel], list[str]]


def _partial(e: FqtEmitter) -> list[tuple[str, int]]:
    return [(e.lid(n), int(e.m.w[n].shape[0])) for n in e.partial]


def mask_declarations(e: FqtEmitter) -> str:
    """Each partial layer's per-sample mask (file scope, before every function that runs a top-k)."""
    masks = [f"static uint8_t {lid}_smp[{o}]; /* one sample's kept structures */" for lid, o in _partial(e)]
    head = "/* Partial updates with a batch: each sample's mask, OR-ed into the layer's update mask. */"
    return "\n".join(["", head, *masks, ""])


def loss_pass_function(e: FqtEmitter, in_size: int) -> str:
    """fqt_loss_pass(): the batch's losses join the running maximum before any sample's backward."""
    g, p = e.g, e.m.prec
    kk, logits = g.num_classes, e.t(g.output)
    if p.acts == "s8":
        lg, scale, prep = logits, f"{e.act(g.output)}_scale", []
    elif p.acts == "u8":     # the zero point cancels in softmax: uint8 logits shifted by -128 are int8
        lg, scale = "lg8", f"{e.act(g.output)}_scale"
        prep = [f"for (k = 0; k < {kk}; ++k) {{", f"    lg8[k] = (int8_t)((int32_t){logits}[k] - 128);", "}"]
    else:                    # float32: the sample's logits quantized with their own range
        lg, scale = "lg8", "s_lg"
        prep = ["{", *(f"    {x}" for x in own_range_lines(logits, kk)),
                f"    st = mt_fqt_logits_s8_f32({kk}, {logits}, lo, hi, lg8, &s_lg, &z_lg);", "}",
                "if (st != MT_OK) {", "    return st;", "}", "(void)z_lg;"]
    body = "\n".join(f"        {x}" for x in prep)
    return f"""
/* Partial updates with a batch: the batch's losses join the running maximum before any backward. */
static mt_status fqt_loss_pass(const int32_t *labels)
{{
    mt_status st = MT_OK;
    int8_t lg8[{kk}];
    float s_lg = 0.0f;
    int32_t z_lg = 0;
    int32_t loss;
    int32_t b;
    int32_t k;
    (void)lg8;
    (void)s_lg;
    (void)z_lg;
    (void)k;
    for (b = 0; b < {e.s.batch}; ++b) {{
        memcpy({e.t(INPUT)}, fqt_batch_in + b * {in_size}, {in_size});
        st = fqt_forward(0);
        if (st != MT_OK) {{
            return st;
        }}
{body}
        st = mt_softmax_ce_s8(1, {kk}, {lg}, {scale}, labels + b, &loss, fqt_errq);
        if (st != MT_OK) {{
            return st;
        }}
        if (loss > fqt_loss_max) {{
            fqt_loss_max = loss;
        }}
    }}
    return st;
}}
"""


def union_reset_lines(e: FqtEmitter) -> list[str]:
    """The step starts with empty update masks: the samples' masks are OR-ed into them."""
    return [f"memset({lid}_upd, 0, {o}); /* the union of this batch's kept structures */"
            for lid, o in _partial(e)]


def offset_lines(e: FqtEmitter) -> list[str]:
    """Each trained layer's place in the stream of the update's draws, from the complete update masks
    (graph order: the updated rows of the earlier layers), and the step's draw count."""
    lines, off = ["{ /* partial updates: the draws of each layer's updated rows, in graph order */",
                  "    int32_t c;"], []
    for n in e.g.parametric():
        if n.name not in e.trained:
            continue
        lid, w = e.lid(n.name), e.m.w[n.name]
        o = int(w.shape[0])
        lines.append(f"    fqt_off_{lid} = {' + '.join(off) or '0'};")
        if n.name not in e.partial:
            off.append(str(w.size))
            continue
        lines += [f"    fqt_n_{lid} = 0;", f"    for (c = 0; c < {o}; ++c) {{",
                  f"        fqt_n_{lid} += {lid}_upd[c];", "    }"]
        off.append(f"fqt_n_{lid} * {w.size // o}")
    return [*lines, f"    fqt_draws = {' + '.join(off)};", "}"]


def _topk(e: FqtEmitter, k: Kernel, sample: Emitter) -> list[str]:
    n = e.g.node(k.node)
    if n.name not in e.partial:
        return sample(e, k)
    lid, o = e.lid(n.name), int(e.m.w[n.name].shape[0])
    return [*sample(e, k), "{ /* the batch updates the union of its samples' kept structures */",
            "    int32_t c;", f"    for (c = 0; c < {o}; ++c) {{", f"        {lid}_upd[c] |= {lid}_smp[c];",
            "    }", "}"]


def partial_batch_emitters(table: dict[str, Emitter]) -> dict[str, Emitter]:
    """`table` with each sample's top-k OR-ed into its layer's update mask (a batch with partial updates)."""
    out = dict(table)
    out["partial_topk"] = lambda e, k, prev=table["partial_topk"]: _topk(e, k, prev)
    return out
