"""The model in a file, in either format users bring: mcutrain's `.npz` or a deployed `.tflite`.

A TFLite Micro user's model is a `.tflite`; every command that takes a model file (train,
eval, plan, export, run) takes it as it is, so the int8 model that runs on the device is the
one that trains, with no `mcutrain import` step and no PTQ. One reader for all of them keeps
the rule in one place: a file is a `.tflite` by its content (the flatbuffer identifier), else
an mcutrain model file. Both are read as hostile input by their own validating readers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcutrain import io
from mcutrain.graph import Graph
from mcutrain.interop.builder import InteropError
from mcutrain.interop.tflite_import import from_tflite, is_tflite
from mcutrain.methods.trainable import source_names_of
from mcutrain.qmodel import QuantModel


@dataclass
class ModelInFile:
    """What a model file holds: the model, the original names of renamed layers, its provenance."""

    model: Graph | QuantModel
    source_names: dict[str, str] = field(default_factory=dict)
    """{IR name: the layer's name in the framework it came from}, for `--trainable layers:`."""
    provenance: dict[str, Any] = field(default_factory=dict)


def read_model(path: str | Path) -> ModelInFile:
    """The model in the file at `path`, with its original layer names and provenance.

    An mcutrain file gives its int8 QuantModel when it holds int8 tensors, else its float
    Graph; a `.tflite` gives its int8 QuantModel in TFLite's rounding, the renamed tensors'
    file names kept in its provenance (as `mcutrain import` keeps them) so `--trainable
    layers:` takes them. Raises `io.ModelFileError` with what to do.
    """
    p = Path(path)
    if not p.is_file():
        raise io.ModelFileError(f"model file '{path}' does not exist" if not p.exists() else
                                f"model '{path}' is not a file: pass a .npz model file or a .tflite")
    if is_tflite(p):
        try:
            qm, renamed = from_tflite(p)
        except InteropError as e:
            raise io.ModelFileError(str(e)) from None
        if renamed:
            qm.provenance = {**qm.provenance, "source_names": dict(renamed)}
        return ModelInFile(qm, dict(renamed), qm.provenance)
    try:
        mf = io.load(p)
    except OSError as e:
        raise io.ModelFileError(f"cannot read model file '{path}' ({e.strerror or e})") from None
    prov = mf.meta.get("provenance")
    prov = prov if isinstance(prov, dict) else {}
    model = QuantModel.from_file(mf) if isinstance(mf.meta.get("quant"), dict) else mf.graph
    return ModelInFile(model, source_names_of(prov), prov)
