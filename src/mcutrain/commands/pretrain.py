"""`mcutrain pretrain`: float32 training of a zoo architecture on a dataset, then int8 by PTQ.

This is the start of the user's path: the float model that on-device methods
then quantize and adapt. Training is Adam with a cosine-decayed learning rate
on the dataset's training split; post-training quantization calibrates on a
sample of it; both accuracies are on its test split. The model file holds the
float graph and its int8 version.

Examples:
    mcutrain pretrain --arch digits-cnn --dataset digits --epochs 10 --seed 0 -o digits.npz
    mcutrain pretrain --arch small-cnn --dataset fashion-mnist[0-4] --epochs 5 -o fm04.npz --json
    mcutrain pretrain --arch small-cnn --dataset fashion-mnist --train-samples 6000 \\
        --test-samples 2000 --epochs 3 --lr 1e-2 -o fm.npz
"""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np

from mcutrain import __version__, io, zoo
from mcutrain.cli import counted, print_json
from mcutrain.commands._outputs import check_output
from mcutrain.errors import UserError
from mcutrain.graph import GraphError
from mcutrain.options import (
    add_rounding_arg,
    add_threads_option,
    check_lr,
    learning_rate,
    positive_int,
    seed_int,
)

DEFAULT_LR = 3e-3
CALIBRATION_SAMPLES = 512
DEFAULT_BATCH = 32
# NOTE: Adam's learning rate, measured (test accuracy): digits-cnn / digits, 10 epochs, seeds 0-2:
# 1e-3 0.953-0.964, 3e-3 0.975-0.978, 1e-2 0.978-0.989; mnist1d-cnn / mnist1d, 10 epochs, seeds 0-1:
# 3e-3 0.83-0.87, 1e-2 0.93; small-cnn / fashion-mnist, 2 epochs, seed 0: 3e-3 0.906, 1e-2 0.899.
# 3e-3 is the default that is safe on the larger model; small models gain from --lr 1e-2.


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "pretrain", help="float training of a zoo architecture on a dataset -> model file",
        description=__doc__.split("\n\n")[0], epilog="examples:\n" + __doc__.split("Examples:\n")[1],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--arch", required=True, help=f"architecture: {', '.join(zoo.ARCHS)}")
    p.add_argument("--dataset", required=True, help="dataset spec, e.g. digits, fashion-mnist, mnist1d, "
                                                    "your own data.npz or KIND:PATH "
                                                    "(images:FOLDER, csv:FILE?window=N, ...: "
                                                    "mcutrain datasets)")
    p.add_argument("--epochs", type=positive_int, default=10,
                   help="passes over the training set (default 10)")
    p.add_argument("--seed", type=seed_int, default=0, help="weights, data order and corruptions (default 0)")
    p.add_argument("-o", "--output", required=True, metavar="FILE", help="model file to write (.npz)")
    p.add_argument("--batch", type=positive_int, default=DEFAULT_BATCH,
                   help=f"batch size (default {DEFAULT_BATCH})")
    p.add_argument("--lr", type=learning_rate, default=DEFAULT_LR,
                   help=f"Adam learning rate at the start of the cosine schedule (default {DEFAULT_LR})")
    add_threads_option(p)
    p.add_argument("--calibration", choices=("minmax", "percentile"), default="minmax",
                   help="how post-training quantization sets activation ranges (default minmax)")
    p.add_argument("--calibration-samples", type=positive_int, default=CALIBRATION_SAMPLES,
                   help=f"training samples the int8 ranges are calibrated on (default {CALIBRATION_SAMPLES})")
    add_subset_args(p)
    add_rounding_arg(p)
    p.add_argument("--json", action="store_true", help="print the result as JSON on stdout")
    p.set_defaults(func=run)


def add_subset_args(p: argparse.ArgumentParser) -> None:
    """`--train-samples` / `--test-samples`: shared with `mcutrain train`."""
    p.add_argument("--train-samples", type=positive_int, default=None, metavar="N",
                   help="train on N samples of the training split, a class-balanced subset drawn with "
                        "--seed (default: all of it); the result says how many were used")
    p.add_argument("--test-samples", type=positive_int, default=None, metavar="N",
                   help="measure accuracy on N samples of the test split, class-balanced, drawn with "
                        "--seed (default: all of it)")


def load_subset(args: argparse.Namespace):
    """`args.dataset` cut to `--train-samples` / `--test-samples`; UserError if it cannot be."""
    from mcutrain.data import load_dataset
    from mcutrain.data.subset import subset

    for opt in ("train_samples", "test_samples"):
        n = getattr(args, opt, None)
        if n is not None and n < 1:
            raise UserError(f"--{opt.replace('_', '-')} must be at least 1, got {n}")
    try:
        ds = load_dataset(args.dataset, seed=args.seed)
        return subset(ds, getattr(args, "train_samples", None), getattr(args, "test_samples", None),
                      seed=args.seed)
    except ValueError as e:
        raise UserError(str(e)) from None


def _check(args: argparse.Namespace) -> None:
    if args.epochs < 1 or args.batch < 1 or args.threads < 1 or args.calibration_samples < 1:
        raise UserError("--epochs, --batch, --threads and --calibration-samples must be at least 1")
    try:
        check_lr("pretrain", args.lr, "pretrain")
    except ValueError as e:
        raise UserError(str(e)) from None
    check_output(args.output, "-o/--output", ".npz")
    if args.arch not in zoo.ARCHS:
        raise UserError(f"unknown architecture '{args.arch}'; available: {', '.join(zoo.ARCHS)}")


def pretrain(args: argparse.Namespace, progress: bool | None) -> dict[str, Any]:
    """Train, evaluate and save; returns the `--json` result."""
    from threadpoolctl import threadpool_limits

    from mcutrain.engines import int_engine, ptq
    from mcutrain.methods.float import evaluate, train

    _check(args)
    ds = load_subset(args)
    try:
        graph = zoo.build(args.arch, ds.num_classes, ds.shape, seed=args.seed)
    except (GraphError, ValueError) as e:
        raise UserError(f"architecture '{args.arch}' does not fit dataset '{args.dataset}' "
                        f"(samples {ds.shape}, {ds.num_classes} classes): {e}") from None
    with threadpool_limits(args.threads, "blas"):
        history = train(graph, ds.x_train, ds.y_train, args.epochs, args.batch, args.lr, args.seed,
                        optimizer="adam", progress=progress, x_val=ds.x_test, y_val=ds.y_test)
        accuracy = evaluate(graph, ds.x_test, ds.y_test)
        calib = ds.x_train[np.random.default_rng(args.seed).permutation(ds.n_train)[
            :args.calibration_samples]]
        qm = ptq.quantize_model(graph, calib, method=args.calibration, rounding=args.rounding or "single")
        int8_accuracy = float(np.mean(int_engine.predict(qm, ds.x_test) == ds.y_test))
    provenance = {"arch": args.arch, "dataset": args.dataset, "epochs": args.epochs, "seed": args.seed,
                  "batch": args.batch, "lr": args.lr, "optimizer": "adam", "schedule": "cosine",
                  "accuracy": accuracy, "int8_accuracy": int8_accuracy,
                  "calibration": {"method": args.calibration, "samples": len(calib)},
                  "train_samples": ds.n_train, "test_samples": ds.n_test,
                  "mcutrain_version": __version__, "history": history}
    try:
        path = qm.save(args.output, provenance)
    except (io.ModelFileError, OSError) as e:
        raise UserError(f"cannot write '{args.output}': {e}") from None
    return {"float_accuracy": accuracy, "int8_accuracy": int8_accuracy, "params": graph.num_params(),
            "macs": graph.total_macs(), "train_samples": ds.n_train, "test_samples": ds.n_test,
            "path": str(path)}


def run(args: argparse.Namespace) -> int:
    result = pretrain(args, progress=False if args.json else None)
    if args.json:
        print_json(result)
    else:
        print(f"{args.arch} on {args.dataset}: float accuracy {result['float_accuracy']:.4f}, "
              f"int8 {result['int8_accuracy']:.4f} on {result['test_samples']:,} test samples after "
              f"{counted(args.epochs, 'epoch')} on {result['train_samples']:,} training samples "
              f"({result['params']:,} parameters, {result['macs']:,} MACs per sample); "
              f"wrote {result['path']}")
    return 0
