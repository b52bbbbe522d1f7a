"""A device's saved state back into its training method: blob entries -> the method's `state()`.

A library's state blob (`state_blob`, parsed by `TrainSource.parse_state`) holds what the C step
changes, under C names (`conv1.weight`, bp-qas `fc.velocity`: weight then bias velocity in one
array; FQT's `act.<t>.range`, `<layer>.w_scale`, ...) and two header words (step counter, RNG
state). The method keeps the same numbers under its own keys (`w/conv1`, `v/fc.weight`,
`meta["wqp"]`, `meta["rng"]`); what the blob does not hold (frozen layers, constants) the method
has as built. This module is the one place that translates the first into the second, so
`mcutrain state-to-model` (and anything else that takes a device's state back) stays generic:
build the method as export did, `restore_from_blob`, then `method.trained_model()`.

Everything is checked as hostile input: the blob by `parse_state` (size, magic, fingerprint),
the header words and the arrays by the method's own `check_state` (int8 range, RNG state != 0,
step bound), so a blob that parses but holds impossible values is refused too.

Example:
    >>> src = emit_training(method, batch=1, kernels="ref")        # doctest: +SKIP
    >>> steps = restore_from_blob(method, src, Path("state.bin").read_bytes())  # doctest: +SKIP
    >>> qm = method.trained_model()                                 # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mcutrain.codegen.train_source import TrainSource
from mcutrain.methods.state_file import DEFAULT_MAX_STEPS


class StateBlobError(ValueError):
    """A blob that is not a usable state of this library; the message says what is wrong."""


def _like(live: Any, v: np.ndarray, kind: type) -> Any:
    """`v` in the JSON form the method's `state()` meta uses for `live`: a number or a list."""
    if isinstance(live, list) or (live is None and v.size > 1):
        return [kind(x) for x in v.reshape(-1)]
    return kind(v.reshape(-1)[0])


def _velocity(method: Any, meta: dict, arrays: dict, layer: str, v: np.ndarray) -> None:
    """BP-QAS's `<layer>.velocity` (weight velocity, then bias velocity) as its `v/` arrays."""
    flat, off = v.reshape(-1), 0
    for kind, layers, tensor in (("weight", method.weight_layers, method.qm.weights),
                                 ("bias", method.bias_layers, method.qm.biases)):
        if layer in layers:
            size = tensor[layer].size
            arrays[f"v/{layer}.{kind}"] = flat[off:off + size].reshape(tensor[layer].shape).copy()
            off += size
    if off != flat.size:
        raise StateBlobError(f"state entry {layer}.velocity has {flat.size} values, the method's "
                             f"momentum of {layer} has {off}")


def _qparams_field(key: str, kind: type):
    def rule(method: Any, meta: dict, arrays: dict, layer: str, v: np.ndarray) -> None:
        meta["wqp"][layer][key] = _like(meta["wqp"][layer][key], v, kind)
    return rule


def _range_field(key: str):
    def rule(method: Any, meta: dict, arrays: dict, layer: str, v: np.ndarray) -> None:
        meta["wrange"][layer][key] = _like(meta["wrange"][layer][key], v, float)
    return rule


def _array(prefix: str, dtype: Any = None):
    def rule(method: Any, meta: dict, arrays: dict, layer: str, v: np.ndarray) -> None:
        arrays[prefix.format(layer)] = v.copy() if dtype is None else v.astype(dtype)
    return rule


LAYER_FIELDS = {
    "weight": _array("w/{}"), "bias": _array("b/{}"), "velocity": _velocity,
    # FQT: scales, zero points and ranges of the weights, the bias's accumulator scale, gradient statistics
    "w_scale": _qparams_field("scale", float), "w_zero_point": _qparams_field("zero_point", int),
    "w_lo": _range_field("lo"), "w_hi": _range_field("hi"), "bias_scale": _array("bscale/{}"),
    "norm_mu": _array("norm/{}/mu"), "norm_sd": _array("norm/{}/sd"),
    "norm_init": _array("norm/{}/init", bool),
}
"""A layer's entry `<layer>.<field>` -> the rule that puts it into the method's (meta, arrays)."""
TABLE_FIELDS = ("range", "init", "scale", "zero_point")
"""Fields of FQT's per-tensor entries `act.<t>.*`, `err.<t>.*`, `grad.<layer>.*` (no layer field
has these, so the last component tells the two kinds apart)."""


def _table_entry(method: Any, meta: dict, parsed: dict, table: str, tensor: str, field: str) -> None:
    """FQT's EMA ranges: activations always (their qparams follow from the range), errors and
    per-sample gradients only once their `init` flag is set (until then the method has none)."""
    if table not in ("act", "err", "grad") or not isinstance(meta.get(table), dict):
        raise StateBlobError(f"state entry '{table}.{tensor}.{field}' has no counterpart in the "
                             f"{method.name} method's state")
    rng = np.asarray(parsed[f"{table}.{tensor}.range"]).reshape(-1)
    if table == "act" and field == "range":
        live = meta["act"].get(tensor)
        if live is None:
            raise StateBlobError(f"state entry 'act.{tensor}.range': the method has no tensor '{tensor}'")
        if live["lo"] is not None or np.any(rng != 0):
            live["lo"], live["hi"] = float(rng[0]), float(rng[1])
    elif table != "act" and field == "init":
        if int(parsed[f"{table}.{tensor}.init"][0]):
            meta[table][tensor] = {"alpha": method.cfg.alpha_e, "lo": float(rng[0]), "hi": float(rng[1])}
        else:
            meta[table].pop(tensor, None)
    # NOTE: act scale / zero_point are derived from the range on both sides; err/grad ranges are
    # applied with their init flag


def apply_entry(method: Any, meta: dict[str, Any], arrays: dict[str, np.ndarray], parsed: dict[str, Any],
                entry: str) -> None:
    """Put one blob entry into the method's (meta, arrays) (StateBlobError for an unknown layout)."""
    value = np.asarray(parsed[entry])
    head, _, field = entry.rpartition(".")
    if entry == "loss_max" and "loss_max" in meta:
        meta["loss_max"] = int(value.reshape(-1)[0])
    elif field in TABLE_FIELDS:
        table, _, tensor = head.partition(".")
        _table_entry(method, meta, parsed, table, tensor, field)
    elif field in LAYER_FIELDS and head:
        try:
            LAYER_FIELDS[field](method, meta, arrays, head, value)
        except (KeyError, AttributeError, TypeError):
            raise StateBlobError(f"state entry '{entry}' has no counterpart in the {method.name} method's "
                                 "state") from None
    else:
        raise StateBlobError(f"state entry '{entry}' of a {method.name} library has no counterpart in the "
                             "method's state: this mcutrain cannot turn it back into a model")


def state_from_blob(method: Any, src: TrainSource, blob: bytes,
                    max_steps: int = DEFAULT_MAX_STEPS) -> tuple[dict[str, Any], dict[str, np.ndarray], int]:
    """(meta, arrays, device steps) for `method.load_state` from a blob the library `src` wrote.

    `method` must be built as the library was (same model and options); its current state gives
    what the blob does not hold. Raises StateBlobError naming the problem.
    """
    try:
        parsed = src.parse_state(blob)
    except ValueError as e:
        raise StateBlobError(str(e)) from None
    steps, rng = int(parsed["steps"]), int(parsed["rng"])
    if steps > max_steps:
        raise StateBlobError(f"the state's step counter is {steps}, beyond {max_steps}: the blob is "
                             "damaged or not a state of this library")
    meta, arrays = method.state()
    for e in src.state:
        apply_entry(method, meta, arrays, parsed, e.name)
    if "steps" in meta:
        meta["steps"] = steps
    if "rng" in meta:
        meta["rng"] = rng
    elif rng != 0:     # a method without a random stream: its library never changes the word from 0
        raise StateBlobError(f"the state's RNG word is {rng}, but a {method.name} library always "
                             "writes 0: the blob is damaged")
    problems = method.check_state(meta, arrays, max_steps)
    if problems:
        raise StateBlobError("the state holds values this library cannot have written: "
                             + "; ".join(problems[:5]))
    return meta, arrays, steps


def restore_from_blob(method: Any, src: TrainSource, blob: bytes,
                      max_steps: int = DEFAULT_MAX_STEPS) -> int:
    """Load a device's state into `method` (built as the library was); returns the device's steps."""
    meta, arrays, steps = state_from_blob(method, src, blob, max_steps)
    method.load_state(meta, arrays)
    return steps
