"""The dataset and model inputs every API function takes: a spec or an object, checked once.

A dataset is a spec (`"digits-c:stripe:5"`), a user's file (`"data.npz"`) or a source spec
(`"images:flowers"`, `"csv:imu.csv?window=128"`), cut with
`train_samples`/`test_samples` to a class-balanced subset drawn with the seed, or a
`mcutrain.data.Dataset` already loaded; a model is a file path, a float `Graph` or an int8
`QuantModel`. Errors are `UserError`s that say what to pass instead, as the command line
prints them.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

from mcutrain import io
from mcutrain.data import Dataset, load_dataset
from mcutrain.data.sources import sized_by_model
from mcutrain.data.subset import subset
from mcutrain.errors import UserError
from mcutrain.graph import Graph
from mcutrain.methods import factory
from mcutrain.model_reader import ModelInFile, read_model
from mcutrain.qmodel import QuantModel

Model = Graph | QuantModel
"""What `load` returns and every API function takes: the float graph or the int8 model."""


def dataset_of(data: str | Dataset, seed: int = 0, train_samples: int | None = None,
               test_samples: int | None = None, sample_shape: tuple[int, ...] | None = None) -> Dataset:
    """`data` as a Dataset: a spec is loaded with `seed` (its corruption draws) and, for an image
    folder, at `sample_shape` (the model's input); then cut to the subsets."""
    for opt, n in (("train_samples", train_samples), ("test_samples", test_samples)):
        if n is not None and n < 1:
            raise UserError(f"--{opt.replace('_', '-')} must be at least 1, got {n}")
    try:
        ds = data if isinstance(data, Dataset) else load_dataset(data, seed=seed, sample_shape=sample_shape)
        if train_samples is None and test_samples is None:
            return ds
        return subset(ds, train_samples, test_samples, seed=seed)
    except ValueError as e:
        raise UserError(str(e)) from None


def input_shape_for(dataset: object, model: Model | str | Path | None) -> tuple[int, ...] | None:
    """The input shape of `model` when `dataset` is sized by the model it meets (an image folder),
    else None: other data keeps its shape, and a zoo architecture (no model) takes the data's."""
    if model is None or not sized_by_model(dataset):
        return None
    return tuple(graph_of(model if isinstance(model, Graph | QuantModel) else read(model).model).input_shape)


def check_fits(graph: Graph, ds: Dataset) -> None:
    """Refuse a dataset the model cannot take: samples of another shape than its input (both shapes
    said, and the reshape when the sizes agree), or -- where only the labels tell the classes, a
    user's .npz -- a label the model has no output for."""
    check_shape(graph.input_shape, ds.shape, ds.name)
    if not ds.classes_known and ds.num_classes > graph.num_classes:
        top = graph.num_classes - 1
        raise UserError(f"dataset '{ds.name}' has labels up to {ds.num_classes - 1} but the model has "
                        f"{graph.num_classes} outputs (classes 0..{top}); relabel the data to 0..{top}, "
                        "or train a new model with --arch")


def check_shape(input_shape: tuple[int, ...], sample_shape: tuple[int, ...], dataset: str) -> None:
    """Refuse samples of another shape than the model's input: both shapes said, and the reshape
    when the sizes agree."""
    input_shape, sample_shape = tuple(input_shape), tuple(sample_shape)
    if sample_shape != input_shape:
        want = "(N, " + ", ".join(map(str, input_shape)) + ")"
        fix = (f"reshape x to {want}" if math.prod(sample_shape) == math.prod(input_shape)
               else "give samples of the model's input shape, or another model")
        raise UserError(f"the model takes samples of shape {input_shape} but dataset '{dataset}' "
                        f"has samples of shape {sample_shape}; {fix}")


def load(path: str | Path) -> Model:
    """The model in a file: a QuantModel when the file holds int8 tensors (a `.tflite` always:
    taken as it is, in TFLite's rounding), else the float Graph.

    Example:
        >>> qm = mcutrain.load("model.npz")       # from `mcutrain pretrain`: int8
        >>> qm.graph.input_shape
        (8, 8, 1)
    """
    return read(path).model


def read(path: str | Path) -> ModelInFile:
    """The model in a .npz model file or a .tflite, with its original layer names, or a UserError."""
    try:
        return read_model(path)
    except io.ModelFileError as e:
        raise UserError(str(e)) from None


def graph_of(model: Model) -> Graph:
    """The float graph of either kind of model."""
    return model.graph if isinstance(model, QuantModel) else model


def options_namespace(command: str, method: str, options: dict[str, Any],
                      **fields: Any) -> argparse.Namespace:
    """The namespace a command would parse: `options` (keywords, by dest) resolved by the factory
    for `command` and `method`, plus the command's own `fields` (model, target, ...)."""
    try:
        args = factory.resolve_values(command, method, options)
    except factory.FactoryError as e:
        raise UserError(str(e)) from None
    for k, v in {"method": method, **fields}.items():
        setattr(args, k, v)
    return args
