"""The C of the BP-QAS ops beyond a chain of layers: a residual add's backward and the error sum of a
tensor several nodes read (used by `emit_train` beside `emit_train_ops.KERNEL_EMITTERS`).

Both follow `bp_qas.gradients` (docs/integer-semantics.md 12.6): the add passes its error, masked
where its output saturated, to each input that needs one, scaled by s_in / s_y in float32
(`mt_add_bwd_s8_f32`); a tensor read by several nodes (the skip tensor of a block) gets the float32
sum of their errors in reverse graph order, the order the schedule lists them (`mt_error_sum_f32`).
Depthwise convs need nothing here: their error, weight gradient and NP recovery are the grouped
forms of the conv kernels `emit_train_ops` calls.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from mcutrain.codegen.cfloat import c_float
from mcutrain.codegen.emit import wrapped_call
from mcutrain.codegen.emit_base import checked
from mcutrain.codegen.emit_train_ops import StepEmitter
from mcutrain.plan.schedule import Kernel


def _add_bwd(e: StepEmitter, k: Kernel) -> list[str]:
    n = e.g.node(k.node)
    lo, hi = e.qm.act_range(n)
    s_y = np.float32(e.qm.scale(n.name))
    ratios = [c_float(np.float32(e.qm.scale(src)) / s_y) for src in n.inputs]
    # the schedule writes one error per input that needs one (`_backprop_schedule`'s names)
    dst = [next((e.t(w) for w in k.writes if w in (f"err:{src}", f"err:{src}<-{n.name}")), "NULL")
           for src in n.inputs]
    size = e.s.tensors[k.reads[0]].elements
    return checked(wrapped_call("mt_add_bwd_s8_f32", [str(size), e.t(k.reads[0]), e.t(k.reads[1]), *ratios,
                                                      str(lo), str(hi), *dst], indent=8))


def _error_sum(e: StepEmitter, k: Kernel) -> list[str]:
    parts = ", ".join(e.t(p) for p in k.reads)
    size = e.s.tensors[k.writes[0]].elements
    return ["{",
            f"    const float *const parts[{len(k.reads)}] = {{{parts}}}; /* reverse graph order */",
            *("    " + s for s in checked(wrapped_call(
                "mt_error_sum_f32", [str(size), str(len(k.reads)), "parts", e.t(k.writes[0])], indent=12))),
            "}"]


GRAPH_EMITTERS: dict[str, Callable[[StepEmitter, Kernel], list[str]]] = {
    "add_bwd": _add_bwd, "error_sum": _error_sum,
}
"""Schedule op -> emitter, for the BP-QAS ops of residual graphs."""
