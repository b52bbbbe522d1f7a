"""`emit_training`: the one entry point that turns any trainable method into a training library.

FQT has its own kernels, state and step (`emit_fqt`); ZO and BP-QAS share theirs
(`emit_train`). Choosing between them here, above both, keeps each emitter ignorant of the
other (neither imports the other).
"""

from __future__ import annotations

from mcutrain.codegen.emit_fqt import emit_fqt_training
from mcutrain.codegen.emit_train import emit_zo_bp_training
from mcutrain.codegen.train_source import TrainSource


def emit_training(method, batch: int = 1, kernels: str = "dsp", provenance: str = "") -> TrainSource:
    """model.h / model.c for training `method` (ZOMethod, BPQASMethod or FQT) on batches of `batch`."""
    if getattr(method, "name", "") == "fqt":
        return emit_fqt_training(method, batch, kernels, provenance)
    return emit_zo_bp_training(method, batch, kernels, provenance)
