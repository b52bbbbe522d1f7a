"""`mcutrain train`: simulated on-device training of a model on a dataset with one method.

Methods plug in through `METHODS`: each entry adds its own options to the
parser and builds a `TrainingMethod` from the parsed arguments. A module
`mcutrain/commands/_<name>_options.py` that calls `register_method` is found
and imported when the parser is built, so a new method never edits this file.

Examples:
    mcutrain train --arch digits-cnn --init random --dataset digits --method fqt \\
        --precision int8 --trainable all --epochs 10 --json
    mcutrain train model.npz --dataset fashion-mnist[5-9] --method fqt --precision uint8 \\
        --trainable last:2 --partial 0.1 --epochs 5 -o adapted.npz
    mcutrain train model.npz --dataset digits-c:stripe:5 --method zo --queries 10 --lr 0.05 \\
        --epochs 5 -o runs/zo.npz
    mcutrain train model.npz --dataset digits-c:stripe:5 --method bp-qas --trainable last:1 \\
        --momentum 0.9 -o runs/bp.npz
    mcutrain train fm.npz --dataset fashion-mnist-c:stripe:5 --train-samples 2000 \\
        --test-samples 2000 --method fqt --epochs 2 -o runs/fqt.npz
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import numpy as np

from mcutrain import io, zoo
from mcutrain.cli import UserError, print_json
from mcutrain.commands._numbers import check_lr, learning_rate, positive_int, seed_int, unit_interval
from mcutrain.commands._outputs import check_output
from mcutrain.commands.method_registry import METHODS, MethodEntry, register_method
from mcutrain.commands.pretrain import add_subset_args, load_subset
from mcutrain.graph import Graph, Op
from mcutrain.methods.base import TrainingMethod
from mcutrain.methods.loop import fit
from mcutrain.methods.resume import CHANGEABLE, check_allowed
from mcutrain.methods.state_file import StateFileError, file_sha256
from mcutrain.methods.trainable import internal_spec, source_names_of

CALIB_SAMPLES = 64
"""Training samples that initialize the activation ranges of quantized methods."""


def load_method_options() -> None:
    """Import every `mcutrain.commands._*_options` module: each registers its methods."""
    import importlib
    import pkgutil

    import mcutrain.commands as pkg
    for mod in pkgutil.iter_modules(pkg.__path__):
        name = mod.name.removeprefix("_").removesuffix("_options")
        if mod.name == f"_{name}_options":   # the pattern is spelled once, in the import below
            importlib.import_module(f"mcutrain.commands._{name}_options")


# ---------------------------------------------------------------- fqt


def _fqt_args(g: argparse._ArgumentGroup) -> None:
    from mcutrain.methods.fqt_state import PRECISIONS
    g.add_argument("--precision", choices=PRECISIONS, default="int8",
                   help="fqt number formats: uint8 (the seed's), mixed (float32 errors), float32, "
                        "int8 (ours; default)")
    g.add_argument("--partial", type=unit_interval, default=1.0, metavar="LAMBDA_MIN",
                   help="fqt dynamic partial updates: lambda_min in [0, 1] (1 = off)")
    g.add_argument("--partial-max", type=unit_interval, default=None, metavar="LAMBDA_MAX",
                   help="fqt partial updates: lambda_max (default 1.0)")
    g.add_argument("--partial-output", action="store_true",
                   help="fqt: prune the output layer too (default: it always trains fully)")
    g.add_argument("--alpha-a", type=unit_interval, default=0.1, help="fqt EMA rate of activation ranges")
    g.add_argument("--alpha-e", type=unit_interval, default=0.1, help="fqt EMA rate of error ranges")
    g.add_argument("--alpha-w", type=unit_interval, default=0.001, help="fqt EMA rate of weight ranges")
    g.add_argument("--alpha-norm", type=unit_interval, default=0.1,
                   help="fqt EMA rate of the gradient standardization statistics")


def _fqt_config(args: argparse.Namespace):
    from mcutrain.methods.fqt_state import FQTConfig
    lmax = 1.0 if args.partial_max is None else args.partial_max
    if not 0.0 <= args.partial <= lmax <= 1.0:
        raise UserError(f"--partial {args.partial} / --partial-max {lmax}: need "
                        "0 <= LAMBDA_MIN <= LAMBDA_MAX <= 1")
    return FQTConfig(precision=args.precision, trainable=args.trainable, alpha_a=args.alpha_a,
                     alpha_e=args.alpha_e, alpha_w=args.alpha_w, alpha_norm=args.alpha_norm,
                     lambda_min=args.partial, lambda_max=lmax, partial_output=args.partial_output,
                     seed=args.seed)


def _fqt_build(args: argparse.Namespace, graph: Graph, calib: np.ndarray) -> TrainingMethod:
    from mcutrain.methods.fqt import FQT
    return FQT(graph, _fqt_config(args), calib)


register_method("fqt", MethodEntry(_fqt_args, _fqt_build,
                                   lambda a: {"precision": a.precision, "partial": a.partial}))


# ---------------------------------------------------------------- the command


def register(subparsers) -> None:
    load_method_options()
    p = subparsers.add_parser(
        "train", help="simulated on-device training of a model on a dataset",
        description=__doc__.split("\n\n")[0], epilog="examples:" + __doc__.split("Examples:")[1],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", nargs="?", help="model file (.npz) from 'mcutrain pretrain'")
    p.add_argument("--arch", help="start from a zoo architecture instead of a model file")
    p.add_argument("--init", choices=["random"], help="with --arch: He-initialized weights from --seed")
    p.add_argument("--dataset", required=True, help="dataset spec, e.g. digits, fashion-mnist[5-9], "
                                                    "fashion-mnist-c:fog:3")
    p.add_argument("--method", default="fqt", help=f"training method ({', '.join(METHODS)})")
    p.add_argument("--trainable", default="all", help="all | last:N | layers:a,b (default all)")
    p.add_argument("--epochs", type=positive_int, default=10)
    p.add_argument("--batch", type=positive_int, default=32)
    p.add_argument("--lr", type=learning_rate, default=0.01)
    p.add_argument("--seed", type=seed_int, default=0)
    p.add_argument("--checkpoint", help="save the training state here after every epoch")
    p.add_argument("--resume", help="continue from a training state saved with --checkpoint (same settings)")
    p.add_argument("--resume-changed", type=_changed_options, default=(), metavar="OPTION[,OPTION]",
                   help="with --resume: allow these settings to differ from the checkpoint's "
                        f"({', '.join(CHANGEABLE)}); the run then equals no straight run")
    p.add_argument("-o", "--output", help="save the trained model (.npz), its training history inside it")
    add_subset_args(p)
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    for name, entry in METHODS.items():
        entry.add_arguments(p.add_argument_group(f"method {name}"))
    p.set_defaults(func=run)


def load_graph(args: argparse.Namespace, num_classes: int, input_shape: tuple[int, ...]) -> Graph:
    """The starting float graph: a model file, or a zoo architecture with random weights.

    A model whose output size differs from the dataset's classes gets a new,
    He-initialized last linear layer (transfer to a new task).
    """
    if (args.model is None) == (args.arch is None):
        raise UserError("give either a MODEL file or --arch A --init random")
    if args.arch is not None:
        if args.init != "random":
            raise UserError("--arch needs --init random (or pass a model file)")
        try:
            return zoo.build(args.arch, num_classes, input_shape, seed=args.seed)
        except ValueError as e:
            raise UserError(str(e)) from None
    try:
        mf = io.load(args.model)
    except io.ModelFileError as e:
        raise UserError(str(e)) from None
    graph = mf.graph
    args.source_names = source_names_of(mf.meta.get("provenance"))
    try:     # an imported model's original layer names -> its IR names
        args.trainable = internal_spec(graph, args.trainable, args.source_names)
    except ValueError as e:
        raise UserError(str(e)) from None
    if graph.input_shape != tuple(input_shape):
        raise UserError(f"model input {graph.input_shape} does not match dataset samples {input_shape}")
    if graph.num_classes != num_classes:
        graph = new_head(graph, num_classes, args.seed)
    return graph


def new_head(graph: Graph, num_classes: int, seed: int) -> Graph:
    """Replace the last (linear) layer by a fresh one with `num_classes` outputs."""
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


def train(args: argparse.Namespace, progress: bool | None = None) -> tuple[dict[str, Any], TrainingMethod]:
    """Run the command's work; returns (the --json result, the trained method)."""
    if args.method not in METHODS:
        raise UserError(f"unknown method '{args.method}'; available: {', '.join(METHODS)}")
    try:
        check_lr(args.method, args.lr)
    except ValueError as e:
        raise UserError(str(e)) from None
    check_output(args.output, "-o/--output", ".npz")
    check_output(args.checkpoint, "--checkpoint", ".npz")
    ds = load_subset(args)
    graph = load_graph(args, ds.num_classes, ds.shape)
    entry = METHODS[args.method]
    x_tr, y_tr = ds.x_train, ds.y_train
    calib = x_tr[np.random.default_rng([args.seed, 3]).permutation(len(x_tr))[:CALIB_SAMPLES]]
    try:
        method = entry.build(args, graph, calib)
    except ValueError as e:
        raise UserError(str(e)) from None
    if args.resume_changed and not args.resume:
        raise UserError("--resume-changed needs --resume")
    try:
        res = fit(method, x_tr, y_tr, ds.x_test, ds.y_test, epochs=args.epochs, batch=args.batch, lr=args.lr,
                  seed=args.seed, checkpoint=args.checkpoint, resume=args.resume, progress=progress,
                  fingerprint=run_fingerprint(args), allow_changed=args.resume_changed)
    except StateFileError as e:
        raise UserError(str(e)) from None
    except FloatingPointError as e:     # the loss diverged: the message says to lower --lr
        raise UserError(str(e)) from None
    for note in res.notes:
        print(f"mcutrain train: note: {note}", file=sys.stderr)
    out = {"method": args.method, **entry.summary(args), "trainable": args.trainable,
           "train_samples": ds.n_train, "test_samples": ds.n_test,
           "accuracy_before": res.accuracy_before, "accuracy_after": res.accuracy_after,
           "epochs": res.epochs, "steps": res.steps, "samples_per_s": res.samples_per_s,
           "forward_macs": res.forward_macs, "backward_macs": res.backward_macs,
           "history": [{"epoch": h["epoch"], "loss": h["loss"], "accuracy": h["test_accuracy"],
                        "train_accuracy": h["train_accuracy"]} for h in res.history]}
    out.pop("partial", None)
    if "queries" in out:  # zeroth-order methods also report their forward passes
        out["forward_passes"] = res.forward_passes
    out = {k: out[k] for k in ("method", "precision", "trainable", "train_samples", "test_samples",
                               "accuracy_before", "accuracy_after",
                               "epochs", "steps", "samples_per_s", "forward_macs", "backward_macs",
                               "queries", "forward_passes", "history") if k in out}
    if args.output:
        save_trained(args.output, method, out, args)
    return out, method


def _changed_options(text: str) -> tuple[str, ...]:
    """`--resume-changed lr,epochs`: names checked against what may change on resume."""
    try:
        return check_allowed([n.strip() for n in text.split(",") if n.strip()])
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e).removeprefix("--resume-changed: ")) from None


def run_fingerprint(args: argparse.Namespace) -> dict[str, Any]:
    """What the command adds to a checkpoint's run configuration: data spec, subsets, model identity."""
    if args.checkpoint is None and args.resume is None:
        return {}
    if args.model is not None:
        try:
            model = f"model file sha256 {file_sha256(args.model)}"
        except OSError as e:
            raise UserError(f"cannot read model file '{args.model}' ({e.strerror or e})") from None
    else:
        model = f"--arch {args.arch} --init {args.init}"
    return {"dataset": args.dataset, "train-samples": args.train_samples, "test-samples": args.test_samples,
            "model": model}


def save_trained(path: str, method: TrainingMethod, result: dict[str, Any], args: argparse.Namespace) -> None:
    """The trained model file (float graph, dequantized) with its history inside it.

    The history (the `--json` result plus dataset, batch and lr) is the model file's
    `meta["history"]`, so model and history are written in one atomic rename and can never
    disagree; `mcutrain report` reads it from there (older runs: `<OUT>.history.json`).
    """
    to_graph = getattr(method, "to_graph", None)
    if to_graph is None:
        raise UserError(f"method {method.name} cannot export its model yet")
    prov = {"trained": {"method": method.config(), "dataset": args.dataset, "epochs": args.epochs,
                        "accuracy": result["accuracy_after"]}}
    if getattr(args, "source_names", None):   # an imported model keeps its original layer names
        prov["source_names"] = args.source_names
    history = {**result, "dataset": args.dataset, "batch": args.batch, "lr": args.lr}
    try:
        io.save(path, to_graph(), {"provenance": prov, "history": history})
    except (io.ModelFileError, OSError) as e:
        raise UserError(f"cannot write '{path}': {e}") from None


def run(args: argparse.Namespace) -> int:
    out, _ = train(args)
    if args.json:
        print_json(out)
    else:
        print(f"{out['method']}: accuracy {out['accuracy_before']:.4f} -> {out['accuracy_after']:.4f} "
              f"after {out['epochs']} epochs on {out['train_samples']:,} training samples ({out['steps']} "
              f"steps, {out['samples_per_s']:.0f} samples/s; accuracy on {out['test_samples']:,} test "
              "samples)")
        if args.output:
            print(f"saved {args.output} (the model and its training history)")
    return 0
