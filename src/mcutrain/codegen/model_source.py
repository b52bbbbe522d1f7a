"""Where the int8 model of `mcutrain export` / `mcutrain run` comes from.

Either a model file (an int8 model is used as is; a float-only model is quantized with PTQ on
calibration samples of a dataset), or `--arch A --init random --seed S`: the zoo architecture
with He-initialized weights, quantized with PTQ on seeded uniform [0, 1) calibration inputs —
a model for testing the toolchain, not for accuracy; the provenance says so.

Example:
    >>> qm, prov = resolve_model(arch="digits-cnn", init="random", seed=0)
    >>> prov
    'digits-cnn, He init (seed 0), PTQ on 64 random uniform [0, 1) inputs (seed 0): untrained'
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from mcutrain import io, zoo
from mcutrain.engines import ptq
from mcutrain.graph import GraphError
from mcutrain.model_reader import read_model
from mcutrain.qmodel import QuantModel

RANDOM_CALIB_SAMPLES = 64
FLOAT_CALIB_SAMPLES = 256


class ModelSourceError(ValueError):
    """The model cannot be obtained as asked; the message says what to pass instead."""


def resolve_model(model: str | Path | None = None, arch: str | None = None, init: str | None = None,
                  seed: int = 0, num_classes: int | None = None,
                  input_shape: tuple[int, ...] | None = None,
                  calib_x: np.ndarray | None = None) -> tuple[QuantModel, str]:
    """(QuantModel, provenance text) from a model file or a randomly initialized zoo architecture.

    `calib_x` (float samples) quantizes a float-only model file; without it such a file is
    refused with what to do.
    """
    if (model is None) == (arch is None):
        raise ModelSourceError("give either a MODEL file or --arch A --init random")
    if arch is not None:
        if init != "random":
            raise ModelSourceError("--arch needs --init random (the only initialization without a model "
                                   "file); to use trained weights pass a model file from 'mcutrain pretrain'")
        if arch not in zoo.ARCHS:
            raise ModelSourceError(f"unknown architecture '{arch}'; available: {', '.join(zoo.ARCHS)}")
        try:
            g = zoo.build(arch, num_classes or 10, input_shape, seed=seed)
        except (GraphError, ValueError) as e:
            raise ModelSourceError(f"architecture '{arch}' cannot take input {input_shape} with "
                                   f"{num_classes} classes: {e}") from None
        x = np.random.default_rng(seed).random((RANDOM_CALIB_SAMPLES, *g.input_shape), dtype=np.float32)
        qm = ptq.quantize_model(g, x)
        prov = (f"{arch}, He init (seed {seed}), PTQ on {RANDOM_CALIB_SAMPLES} random uniform [0, 1) "
                f"inputs (seed {seed}): untrained")
        return qm, prov
    if init is not None:
        raise ModelSourceError("--init applies to --arch only; a MODEL file brings its own weights")
    try:
        held = read_model(model)
    except io.ModelFileError as e:
        raise ModelSourceError(str(e)) from None
    if isinstance(held.model, QuantModel):
        return held.model, f"int8 model file {Path(model).name}" + _prov_suffix(held.model.provenance)
    if calib_x is None:
        raise ModelSourceError(f"'{model}' holds a float model; pass --dataset so it can be quantized "
                               "(PTQ on training samples), or quantize it first")
    qm = ptq.quantize_model(held.model, np.asarray(calib_x[:FLOAT_CALIB_SAMPLES], np.float32))
    if held.source_names:       # an imported model's original layer names, for --trainable layers:
        qm.provenance["source_names"] = held.source_names
    return qm, (f"float model file {Path(model).name}" + _prov_suffix(held.provenance)
                + f", PTQ on {min(len(calib_x), FLOAT_CALIB_SAMPLES)} training samples")


def _prov_suffix(prov: dict) -> str:
    parts = [f"{k} {prov[k]}" for k in ("arch", "dataset", "seed") if k in prov]
    return f" ({', '.join(parts)})" if parts else ""
