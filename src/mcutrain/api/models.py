"""Models in a notebook: import, predict and evaluate without the command line.

Example:
    >>> import numpy as np, mcutrain
    >>> qm = mcutrain.load("model.npz")                          # int8 (from `mcutrain pretrain`)
    >>> x = np.zeros((2, *qm.graph.input_shape), np.float32)
    >>> mcutrain.predict(qm, x).shape                            # float in: float logits
    (2, 10)
    >>> mcutrain.evaluate(qm, "digits")                          # test accuracy
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from mcutrain.api.data import Model, check_fits, dataset_of
from mcutrain.data import Dataset
from mcutrain.engines import float_engine, int_engine
from mcutrain.errors import UserError
from mcutrain.graph import Graph
from mcutrain.methods import float as float_method
from mcutrain.qmodel import QuantModel


def import_model(path_or_module: str | Path | Any, input_shape: tuple[int, ...] | None = None,
                 name: str | None = None) -> Graph | QuantModel:
    """An int8 QuantModel from a .tflite file, or a float Graph from an ONNX file (a path) or a
    PyTorch `nn.Module` (needs `input_shape`, NHWC).

    A .tflite is recognized by its content; its integers are kept as they are (no PTQ) and the
    QuantModel's provenance holds what `mcutrain export --format tflite` restores.

    Foreign layer names are renamed into mcutrain's naming rule; `mcutrain import` keeps the
    original names in the model file it writes (this returns the graph only).
    """
    from mcutrain.interop import InteropError, from_onnx_mapped, from_torch_mapped

    try:
        if isinstance(path_or_module, str | Path):
            if not Path(path_or_module).exists():
                raise UserError(f"model file '{path_or_module}' does not exist")
            from mcutrain.interop.tflite_import import from_tflite, is_tflite
            if is_tflite(path_or_module):
                if input_shape is not None:
                    raise UserError("input_shape does not apply to a .tflite model (its shape is in "
                                    "the file)")
                qm, _ = from_tflite(path_or_module)
                return qm
            graph, _ = from_onnx_mapped(path_or_module, input_shape=input_shape, name=name)
            return graph
        if input_shape is None:
            raise UserError("a PyTorch module needs input_shape=(H, W, C) (per sample, NHWC)")
        graph, _ = from_torch_mapped(path_or_module, tuple(input_shape), name=name)
        return graph
    except (InteropError, ImportError) as e:     # ImportError: onnx or torch is not installed
        raise UserError(str(e)) from None


def predict(model: Model, x: np.ndarray) -> np.ndarray:
    """The model's outputs for the batch `x` (N, *input_shape).

    An int8 `x` (already quantized with the model's input parameters) gives the int8 logits of
    the golden engine, bit-exact with the C library; a float `x` gives float logits (a
    QuantModel: its int8 logits dequantized with the output's parameters).
    """
    x = np.asarray(x)
    try:
        if x.dtype == np.int8:
            if not isinstance(model, QuantModel):
                raise UserError("int8 inputs need an int8 model (QuantModel); a float graph takes float "
                                "inputs")
            return int_engine.forward(model, x)
        if isinstance(model, QuantModel):
            logits = int_engine.forward(model, int_engine.quantize_input(model, x))
            return model.act_qparams[model.graph.output].dequantize(logits)
        return float_engine.forward(model, np.asarray(x, np.float32))
    except ValueError as e:
        raise UserError(str(e)) from None


def evaluate(model: Model, dataset: str | Dataset, seed: int = 0, test_samples: int | None = None) -> float:
    """Accuracy of `model` on `dataset`'s test split (int8: the golden engine; float: the float engine)."""
    graph = model.graph if isinstance(model, QuantModel) else model
    ds = dataset_of(dataset, seed, None, test_samples, tuple(graph.input_shape))
    check_fits(graph, ds)
    if isinstance(model, QuantModel):
        return float(np.mean(int_engine.predict(model, ds.x_test) == ds.y_test))
    return float(float_method.evaluate(model, ds.x_test, ds.y_test))
