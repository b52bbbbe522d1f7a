"""The model's rounding mode in generated C: `runtime/mt_config.h`, model.c's guard, TFLite's ADD and MEAN.

A library computes in one rounding mode (`QuantModel.rounding`, docs/integer-semantics.md 6.1),
fixed at compile time by `MT_ROUNDING_TFLITE` in the `runtime/mt_config.h` it ships: the
package's copy (mode `single`, the default) verbatim, or for a `tflite` model a copy that
defines it to 1 outright. `single` libraries are therefore byte-identical to what they were
before the mode existed. In `tflite` mode mt_requantize is TFLite's MultiplyByQuantizedMultiplier,
and two ops call kernels of their own: ADD (`mt_add_fwd_s8_tflite`, TFLite's three
requantizations) and the global average pool (`mt_global_avgpool_fwd_s8_tflite`, TFLite's MEAN).

Example:
    >>> "#define MT_ROUNDING_TFLITE 1" in config_header("tflite")
    True
    >>> mode_guard("single")
    ''
"""

from __future__ import annotations

from mcutrain.codegen.runtime_files import RUNTIME_DIR
from mcutrain.graph import Node
from mcutrain.qmodel import QuantModel
from mcutrain.quant.fixedpoint import check_rounding

CONFIG_HEADER = "mt_config.h"
"""The runtime header holding the build options a model fixes."""

_DEFAULT = "#ifndef MT_ROUNDING_TFLITE\n#define MT_ROUNDING_TFLITE 0\n#endif /* MT_ROUNDING_TFLITE */\n"
_TFLITE = ("/* this library's model rounds \"tflite\": fixed here, not overridable */\n"
           "#define MT_ROUNDING_TFLITE 1\n")


def config_header(rounding: str) -> str:
    """The text of `runtime/mt_config.h` for a library in mode `rounding`."""
    text = (RUNTIME_DIR / "include" / CONFIG_HEADER).read_text()
    if check_rounding(rounding) == "single":
        return text
    if _DEFAULT not in text:   # pragma: no cover - the package's header and this module move together
        raise RuntimeError(f"{CONFIG_HEADER} no longer holds the default this module replaces")
    return text.replace(_DEFAULT, _TFLITE)


def fqt_rounding(method) -> str:
    """The rounding an FQT library computes in: the model's for int8 (its forward requantizations,
    ADD and MEAN follow it, `methods.fqt.FQT.rounding`), 'single' for uint8, mixed and float32,
    whose forward has no rounding mode (float32 multipliers, or float32 outright)."""
    return method.rounding if method.prec.acts == "s8" else "single"


def mode_guard(rounding: str) -> str:
    """Lines for the top of model.c that stop a build against a runtime of the other mode ('' for single)."""
    if check_rounding(rounding) == "single":
        return ""
    return "\n".join([
        "/* This model rounds \"tflite\" (TFLite's MultiplyByQuantizedMultiplier, ADD and MEAN); the runtime",
        "   must be the one exported with it (its mt_config.h defines MT_ROUNDING_TFLITE to 1). */",
        f'#include "{CONFIG_HEADER}"',
        "#if !MT_ROUNDING_TFLITE",
        '#error "this model needs the runtime exported with it: MT_ROUNDING_TFLITE 1 (runtime/mt_config.h)"',
        "#endif", "", ""])


def tflite_add(qm: QuantModel, n: Node) -> tuple[str, str]:
    """(the `mt_add_tflite_params p` definition, the kernel's name) of add node `n` in mode tflite."""
    ma, sa, mb, sb, my, sy = qm.add_params(n)
    lo, hi = qm.act_range(n)
    za, zb, zy = (qm.zero_point(t) for t in (*n.inputs, n.name))
    return (f"static const mt_add_tflite_params p = {{{za}, {zb}, {ma}, {sa}, {mb}, {sb}, {my}, {sy}, {zy}, "
            f"{lo}, {hi}}};", "mt_add_fwd_s8_tflite")


def tflite_mean(qm: QuantModel, n: Node) -> tuple[str, str]:
    """(the `mt_mean_params p` definition, the kernel's name) of global-avgpool node `n` in mode tflite."""
    m, s = qm.mean_params(n)
    return (f"static const mt_mean_params p = {{{qm.zero_point(n.inputs[0])}, {m}, {s}}};",
            "mt_global_avgpool_fwd_s8_tflite")
