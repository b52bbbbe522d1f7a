"""Simulated on-device training: one path for `mcutrain train` and `mcutrain.train(...)`.

`train_args` is the command's whole work on a namespace of resolved options (the factory's
`resolve` filled it); the API's `train` builds that namespace from keywords, so the command line
and a notebook run the same code, the same defaults and the same checks.

Example:
    >>> import mcutrain
    >>> r = mcutrain.train("model.npz", "digits-c:stripe:5", method="zo", queries=10, lr=0.05,
    ...                    epochs=1, train_samples=200)
    >>> r.result["accuracy_after"] >= 0.0
    True
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mcutrain import io, zoo
from mcutrain.api.data import (
    Model,
    check_fits,
    dataset_of,
    graph_of,
    input_shape_for,
    options_namespace,
    read,
)
from mcutrain.data import Dataset
from mcutrain.data.npz_file import is_npz_path
from mcutrain.data.sources import is_source_spec, source_digest
from mcutrain.engines import int_engine
from mcutrain.errors import UserError
from mcutrain.graph import Graph, Op
from mcutrain.methods import factory
from mcutrain.methods.base import TrainingMethod
from mcutrain.methods.loop import fit
from mcutrain.methods.lr_auto import AUTO, RateChoice, choose_rate, resumed_rate
from mcutrain.methods.resume import check_allowed
from mcutrain.methods.state_file import StateFileError, file_sha256
from mcutrain.methods.trainable import internal_spec, resolve_trainable, source_names_of, user_names
from mcutrain.options import BLAS_THREADS, blas_threads, check_lr
from mcutrain.qmodel import QuantModel

JSON_ORDER = ("method", "precision", "update", "trainable", "train_samples", "test_samples",
              "accuracy_before", "accuracy_before_method", "accuracy_after", "accuracy_exported", "epochs",
              "steps", "lr_used", "lr_reason", "samples_per_s", "forward_macs", "backward_macs", "queries",
              "forward_passes", "weights_changed_per_step", "source_names", "preprocessing", "history")
"""The keys of `train --json`, in this order (`lr_used`: the rate the run used, `lr_reason`: why,
"given (--lr)" or how `--lr auto` chose it, `methods.lr_auto`; fqt adds `update`, float or integer,
the int8 weight update that ran; zo and bp-qas add queries, zo forward_passes; an imported model
whose trained layers were renamed adds `source_names`, {IR name: original name};
a method that trains integer weights adds `weights_changed_per_step`, {"overall": f, "layers":
{layer: f}}: the mean over steps of the fraction of them each step changed, `methods/update_share`;
data preprocessed in a way the device must repeat adds `preprocessing`, `Dataset.preprocessing`:
a time series' per-channel normalization, a speech front end's parameters).
`accuracy_before` is the test accuracy of the model training starts from as it is deployed: an
int8 model (a file with int8 tensors, a QuantModel) under the golden engine -- what `mcutrain eval`
reports, the same for every method and precision -- and a float model (no int8 data) under the
method's own forward. `accuracy_before_method` is always the method's own forward before its first
step: equal to `accuracy_before` for zo, bp-qas and fqt int8, and for fqt uint8/mixed/float32 on an
int8 model the measured effect of their conversion (`methods/fqt_seed_start`).
`accuracy_exported` is the test accuracy of the trained int8 model (`trained_model()`, what
`train -o` writes) under the golden engine: equal to `accuracy_after` where the method trains
int8 integers (zo, bp-qas, fqt int8), the measured effect of the conversion otherwise."""


@dataclass
class TrainResult:
    """What a training run returns.

    `model` is the trained int8 QuantModel (`method.trained_model()`, what `train -o` writes:
    exact for zo, bp-qas and fqt int8, converted for fqt uint8/mixed/float32). `result` is the
    `--json` document of `mcutrain train`, `history` its per-epoch list.
    """

    model: QuantModel
    method: TrainingMethod
    history: list[dict[str, Any]]
    state: tuple[dict[str, Any], dict[str, np.ndarray]]
    result: dict[str, Any]


def new_head(graph: Graph, num_classes: int, seed: int) -> Graph:
    """`graph` with its last (linear) layer replaced by a He-initialized one of `num_classes` outputs."""
    g = graph.copy()
    last = g.nodes[-1]
    if last.op != Op.LINEAR:
        raise UserError(f"the model has {graph.num_classes} outputs, the dataset {num_classes} classes, "
                        "and its last layer is not linear, so no new head can be attached")
    fan_in = last.params["weight"].shape[1]
    rng = np.random.default_rng([seed, 7])
    last.params["weight"] = (rng.standard_normal((num_classes, fan_in)) * np.sqrt(2.0 / fan_in)).astype(
        np.float32)
    last.params["bias"] = np.zeros(num_classes, np.float32)
    last.attrs["out_features"] = num_classes
    return Graph(g.input_shape, g.nodes, g.name)


def starting_model(args: argparse.Namespace, ds: Dataset) -> Model:
    """The model training starts from: a file (path), a Graph or QuantModel, or a zoo architecture.

    A model file with int8 tensors gives its QuantModel (zo, bp-qas and fqt int8 train its
    integers as they are; fqt uint8/mixed/float32 start from them converted); one whose output size
    differs from the dataset's classes gets a new, He-initialized last linear layer (transfer
    to a new task) and is quantized again -- except on a user's .npz, whose classes only its
    labels tell: the model keeps its outputs and labels beyond them are refused (`check_fits`).
    Sets `args.source_names` (an imported model's original layer names).
    """
    args.source_names = {}
    if (args.model is None) == (args.arch is None):
        raise UserError("give either a MODEL file or --arch A --init random")
    if args.arch is not None:
        if args.init != "random":
            raise UserError("--arch needs --init random (or pass a model file)")
        try:
            return zoo.build(args.arch, ds.num_classes, ds.shape, seed=args.seed)
        except ValueError as e:
            raise UserError(str(e)) from None
    model: Model
    if isinstance(args.model, Graph | QuantModel):
        model = args.model
        args.source_names = source_names_of(model.provenance) if isinstance(model, QuantModel) else {}
    else:
        held = read(args.model)
        model, args.source_names = held.model, held.source_names
    graph = graph_of(model)
    try:     # an imported model's original layer names -> its IR names
        args.trainable = internal_spec(graph, args.trainable, args.source_names)
    except ValueError as e:
        raise UserError(str(e)) from None
    check_fits(graph, ds)
    if graph.num_classes != ds.num_classes and ds.classes_known:
        print(new_head_note(graph, ds), file=sys.stderr)
        return new_head(graph, ds.num_classes, args.seed)
    return model


def new_head_note(graph: Graph, ds: Dataset) -> str:
    """The line that says a trained head is being replaced, and how to keep it.

    Why: a model with 7 outputs given 10 classes used to get a new random last layer without a
    word, which looks like training that forgot everything.
    """
    n, last = graph.num_classes, graph.nodes[-1].name
    keep = (f"train on data with {n} classes to keep it (a class subset such as "
            f"'{ds.name.split('[')[0]}[0-{n - 1}]', or your own .npz with labels 0..{n - 1})"
            if n < ds.num_classes else
            f"to keep it, give the samples as your own .npz (np.savez('data.npz', x=..., y=...)): "
            f"its labels 0..{ds.num_classes - 1} fit the model's {n} outputs")
    return (f"mcutrain train: note: the model has {n} outputs, dataset '{ds.name}' {ds.num_classes} "
            f"classes: its last layer '{last}' is replaced by a new, randomly initialized one of "
            f"{ds.num_classes} outputs; {keep}")


def calibration_samples(x_train: np.ndarray, seed: int) -> np.ndarray:
    """The training samples that initialize the activation ranges of quantized methods."""
    return x_train[np.random.default_rng([seed, 3]).permutation(len(x_train))[:factory.CALIB_SAMPLES]]


def train_args(args: argparse.Namespace,
               progress: bool | None = None) -> tuple[dict[str, Any], TrainingMethod]:
    """The work of `mcutrain train` on resolved options; returns (the --json result, the trained method)."""
    if args.method not in factory.TRAIN_METHODS:
        raise UserError(f"unknown method '{args.method}'; available: {', '.join(factory.TRAIN_METHODS)}")
    try:
        if args.lr != AUTO:
            check_lr(args.method, args.lr)
    except ValueError as e:
        raise UserError(str(e)) from None
    if args.resume_changed and not args.resume:
        raise UserError("--resume-changed needs --resume")
    shape = input_shape_for(args.dataset, args.model)
    ds = args.data if isinstance(getattr(args, "data", None), Dataset) else \
        dataset_of(args.dataset, args.seed, args.train_samples, args.test_samples, shape)
    model = starting_model(args, ds)
    x_tr, y_tr = ds.x_train, ds.y_train
    calib = calibration_samples(x_tr, args.seed)

    def labels() -> np.ndarray:     # NOTE: as before the factory: the first labels of the full split
        return dataset_of(args.dataset, args.seed, sample_shape=shape).y_train[:len(calib)]

    try:
        method = factory.build_method(args.method, args, model, calib, labels=labels,
                                      source_names=args.source_names)
    except factory.FactoryError as e:
        raise UserError(str(e)) from None
    choice = rate_choice(args, method, x_tr, y_tr, progress)
    args.lr = choice.lr     # NOTE: what the run, its checkpoint and the saved history use
    try:
        res = fit(method, x_tr, y_tr, ds.x_test, ds.y_test, epochs=args.epochs, batch=args.batch, lr=args.lr,
                  seed=args.seed, checkpoint=args.checkpoint, resume=args.resume, progress=progress,
                  fingerprint=run_fingerprint(args), allow_changed=args.resume_changed)
    except StateFileError as e:
        raise UserError(str(e)) from None
    except FloatingPointError as e:     # the loss diverged: the message says to lower --lr
        raise UserError(str(e)) from None
    finally:
        getattr(method, "close", lambda: None)()     # zo's query workers (`methods.zo_workers`)
    for note in res.notes:
        print(f"mcutrain train: note: {note}", file=sys.stderr)
    trained = trained_int8(method)
    out = {"method": args.method, **factory.summary(args.method, args), "trainable": args.trainable,
           "train_samples": ds.n_train, "test_samples": ds.n_test,
           "accuracy_before": deployed_accuracy(model, ds, res.accuracy_before),
           "accuracy_before_method": res.accuracy_before, "accuracy_after": res.accuracy_after,
           "accuracy_exported": float(np.mean(int_engine.predict(trained, ds.x_test) == ds.y_test)),
           "epochs": res.epochs, "steps": res.steps, "lr_used": choice.lr, "lr_reason": choice.reason,
           "samples_per_s": res.samples_per_s,
           "forward_macs": res.forward_macs, "backward_macs": res.backward_macs,
           "history": [{"epoch": h["epoch"], "loss": h["loss"], "accuracy": h["test_accuracy"],
                        "train_accuracy": h["train_accuracy"]} for h in res.history]}
    if ds.preprocessing:    # what the device must do to its samples the same way
        out["preprocessing"] = ds.preprocessing
    if "queries" in out:  # zeroth-order methods also report their forward passes
        out["forward_passes"] = res.forward_passes
    if res.weights_changed_per_step is not None:
        out["weights_changed_per_step"] = res.weights_changed_per_step
    if args.source_names:   # an imported model: the trained layers by the names the user gave them
        renamed = user_names(resolve_trainable(graph_of(model), args.trainable), args.source_names)
        if renamed:
            out["source_names"] = renamed
    out = {k: out[k] for k in JSON_ORDER if k in out}
    if args.output:
        save_trained(args.output, method, out, args, trained)
    return out, method


def rate_choice(args: argparse.Namespace, method: TrainingMethod, x_train: np.ndarray, y_train: np.ndarray,
                progress: bool | None) -> RateChoice:
    """The run's rate: `--lr` as given; with `--lr auto`, the resumed checkpoint's rate, else the choice."""
    if args.lr != AUTO:
        return RateChoice(args.lr, "given (--lr)")
    if args.resume is not None:
        try:
            return resumed_rate(args.resume)
        except StateFileError as e:
            raise UserError(str(e)) from None
    return choose_rate(args.method, method, x_train, y_train, epochs=args.epochs, batch=args.batch,
                       seed=args.seed, progress=progress)


def deployed_accuracy(model: Model, ds: Dataset, method_accuracy: float) -> float:
    """Test accuracy of the starting model as deployed: an int8 model's under the golden engine
    (`mcutrain eval`'s figure, whatever method trains it), else the method's own `method_accuracy`."""
    if isinstance(model, QuantModel):
        return float(np.mean(int_engine.predict(model, ds.x_test) == ds.y_test))
    return method_accuracy


def changed_options(text: str) -> tuple[str, ...]:
    """`--resume-changed lr,epochs`: names checked against what may change on resume."""
    try:
        return check_allowed([n.strip() for n in text.split(",") if n.strip()])
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e).removeprefix("--resume-changed: ")) from None


def run_fingerprint(args: argparse.Namespace) -> dict[str, Any]:
    """What the command adds to a checkpoint's run configuration: data spec, subsets, model identity."""
    if args.checkpoint is None and args.resume is None:
        return {}
    if isinstance(args.model, Graph | QuantModel):
        raise UserError("--checkpoint and --resume need a model file or --arch (an in-memory model has no "
                        "identity to check on resume)")
    if args.model is not None:
        try:
            model = f"model file sha256 {file_sha256(args.model)}"
        except OSError as e:
            raise UserError(f"cannot read model file '{args.model}' ({e.strerror or e})") from None
    else:
        model = f"--arch {args.arch} --init {args.init}"
    dataset = args.dataset
    try:    # a user's files: their content, so edited data is not resumed on
        if is_npz_path(dataset):
            dataset = f"{dataset} sha256 {file_sha256(dataset)}"
        elif is_source_spec(dataset):
            dataset = f"{dataset} sha256 {source_digest(dataset)}"
    except OSError as e:
        raise UserError(f"cannot read dataset '{dataset}' ({e.strerror or e})") from None
    except ValueError as e:
        raise UserError(str(e)) from None
    return {"dataset": dataset, "train-samples": args.train_samples, "test-samples": args.test_samples,
            "model": model}


def trained_int8(method: TrainingMethod) -> QuantModel:
    """`method.trained_model()`, a refusal of the method becoming a UserError."""
    try:
        return method.trained_model()
    except ValueError as e:
        raise UserError(f"cannot make the int8 model of method {method.name}: {e}") from None


def save_trained(path: str | Path, method: TrainingMethod, result: dict[str, Any],
                 args: argparse.Namespace, trained: QuantModel | None = None) -> None:
    """The trained int8 model file (`method.trained_model()`) with its history inside it.

    `export`, `run`, `plan`, `eval` and `train` take the file as it is (no PTQ): its integers
    are the ones the simulator trained. The model keeps its rounding mode and provenance.

    The history (the `--json` result plus dataset, batch and lr) is the model file's
    `meta["history"]`, so model and history are written in one atomic rename and can never
    disagree; `mcutrain report` reads it from there (older runs: `<OUT>.history.json`).
    """
    qm = trained_int8(method) if trained is None else trained
    prov = {"trained": {"method": method.config(), "dataset": args.dataset, "epochs": args.epochs,
                        "accuracy": result["accuracy_after"]}}
    if getattr(args, "source_names", None):   # an imported model keeps its original layer names
        prov["source_names"] = args.source_names
    history = {**result, "dataset": args.dataset, "batch": args.batch, "lr": args.lr}
    try:
        meta, arrays = qm.to_file(prov)
        io.save(path, qm.graph, {**meta, "history": history}, arrays)
    except (io.ModelFileError, OSError) as e:
        raise UserError(f"cannot write '{path}': {e}") from None


def train(model: Model | str | Path | None, dataset: str | Dataset, method: str = "fqt", *,
          arch: str | None = None, train_samples: int | None = None, test_samples: int | None = None,
          output: str | Path | None = None, progress: bool = False, threads: int = BLAS_THREADS,
          **options: Any) -> TrainResult:
    """Train `model` on `dataset` with `method` in the exact simulator (as `mcutrain train`).

    `model`: a model file, a `Graph` or a `QuantModel` (None with `arch=`: a zoo architecture,
    He-initialized from `seed`). `options`: every training option of the method by its
    `--flag` name with `_` (`precision`, `partial`, `epochs`, `lr`, `batch`, `trainable`, `seed`,
    `queries`, `momentum`, ...), with the command's defaults and checks; another method's option
    is refused. `output`: also save the trained model file, as `train -o` does. `threads`: BLAS
    threads, as `train --threads` (the same default): OpenBLAS splits some float32 products
    differently on more threads, so a run on another count can differ in the last bits of
    FQT float32's or BP-QAS's sums, and the API run would not be the command's or a sweep cell's.

    Example:
        >>> r = mcutrain.train("model.npz", "digits-c:stripe:5", method="fqt", partial=0.5, epochs=2)
        >>> r.result["accuracy_after"], len(r.history)
    """
    if not isinstance(threads, int) or isinstance(threads, bool) or threads < 1:
        raise UserError(f"threads must be a whole number of at least 1, got {threads!r}")
    args = options_namespace("train", method, options, model=None if arch else model, arch=arch,
                             init="random",
                             dataset=dataset if isinstance(dataset, str) else dataset.name,
                             train_samples=train_samples, test_samples=test_samples, output=output,
                             checkpoint=None, resume=None, resume_changed=())
    if not isinstance(dataset, str):
        args.data = dataset_of(dataset, args.seed, train_samples, test_samples)
    with blas_threads(threads):
        result, trained = train_args(args, progress=progress)
    return TrainResult(trained_int8(trained), trained, result["history"], trained.state(), result)
