"""A device's saved state back into its training method: blob entries -> the method's `state()`.

A library's state blob (`state_blob`, parsed by `TrainSource.parse_state`) holds what the C step
changes, under C names (`conv1.weight`, bp-qas `fc.velocity`: weight then bias velocity in one
array) and two header words (step counter, RNG state). The method keeps the same numbers under
its own keys (`w/conv1`, `v/fc.weight`, `meta["rng"]`). This module is the one place that
translates the first into the second, so `mcutrain state-to-model` (and anything else that takes
a device's state back) stays generic: build the method as export did, `restore_from_blob`, then
`method.trained_model()`.

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


def _velocity(method: Any, layer: str, flat: np.ndarray) -> dict[str, np.ndarray]:
    """BP-QAS's `<layer>.velocity` (weight velocity, then bias velocity) as its `v/` arrays."""
    out, off = {}, 0
    for kind, layers, tensor in (("weight", method.weight_layers, method.qm.weights),
                                 ("bias", method.bias_layers, method.qm.biases)):
        if layer in layers:
            size = tensor[layer].size
            out[f"v/{layer}.{kind}"] = flat[off:off + size].reshape(tensor[layer].shape).copy()
            off += size
    if off != flat.size:
        raise StateBlobError(f"state entry {layer}.velocity has {flat.size} values, the method's "
                             f"momentum of {layer} has {off}")
    return out


def method_arrays(method: Any, entry: str, value: np.ndarray) -> dict[str, np.ndarray]:
    """The method's `state()` arrays of one blob entry (ZO and BP-QAS; other layouts refused)."""
    layer, _, kind = entry.rpartition(".")
    if kind == "weight":
        return {f"w/{layer}": value}
    if kind == "bias":
        return {f"b/{layer}": value}
    if kind == "velocity" and hasattr(method, "velocity"):
        return _velocity(method, layer, value.reshape(-1))
    raise StateBlobError(f"state entry '{entry}' of a {method.name} library has no counterpart in the "
                         f"method's state yet: {method.name} states cannot be turned back into a model "
                         "by this mcutrain")


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
        arrays.update(method_arrays(method, e.name, np.asarray(parsed[e.name])))
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
