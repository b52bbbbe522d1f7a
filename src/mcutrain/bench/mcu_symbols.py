"""Which step phase a function of a training image is in: the phase split of benchmark `mcu`'s
rows. The library's footprint (which symbols are the library's) is `mcu.footprint`, which
`mcutrain run` reports too.
"""

from __future__ import annotations


def phase_of(name: str, stem: str) -> str:
    """The step phase of a function (its name, then the runtime source that defines it): forward
    kernels (and the GEMMs, windows and conv helpers they call), backward kernels (error
    propagation, weight gradients, masks, prescale, top-k), or the rest (loss, update, ranges,
    multipliers, and anything outside the runtime: model.c, libc, libgcc)."""
    if "bwd" in name or "_keep" in name or "topk" in name or "prescale" in name:
        return "backward"
    if "fwd" in name:
        return "forward"
    if "_bwd" in stem or stem.endswith("_keep") or stem.startswith(("mt_fqt_topk", "mt_fqt_prescale")):
        return "backward"
    if "_fwd" in stem or stem.startswith(("mt_mat_mult", "mt_conv_")):
        return "forward"
    return "other"


def instructions_by_phase(per_function: dict[str, float], symbols: dict[str, str]) -> dict[str, float]:
    out = {"forward": 0.0, "backward": 0.0, "other": 0.0}
    for name, count in per_function.items():
        out[phase_of(name, symbols.get(name, ""))] += count
    return out
