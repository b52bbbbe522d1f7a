"""`mcutrain train`: simulated on-device training of a model on a dataset with one method.

The options of every method come from `mcutrain.methods.factory` (declared once for train,
plan, export and run); the work is `mcutrain.api.training.train_args`, which the Python API's
`mcutrain.train` runs too.

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
    mcutrain train model.npz --dataset my-data.npz --method zo --epochs 5 -o runs/mine.npz
        (your own data: np.savez("my-data.npz", x=images, y=labels); see docs/datasets.md)
"""

from __future__ import annotations

import argparse
from typing import Any

from mcutrain.api.training import changed_options, train_args
from mcutrain.cli import counted, print_json
from mcutrain.commands._outputs import check_output
from mcutrain.commands.pretrain import add_subset_args
from mcutrain.errors import UserError
from mcutrain.methods import factory
from mcutrain.methods.base import TrainingMethod
from mcutrain.methods.resume import CHANGEABLE
from mcutrain.options import add_threads_option


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "train", help="simulated on-device training of a model on a dataset",
        description=__doc__.split("\n\n")[0], epilog="examples:" + __doc__.split("Examples:")[1],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", nargs="?", help="model file: .npz (from 'mcutrain pretrain', a trained "
                   "run) or a .tflite as deployed")
    p.add_argument("--arch", help="start from a zoo architecture instead of a model file")
    p.add_argument("--init", choices=["random"], help="with --arch: He-initialized weights from --seed")
    p.add_argument("--dataset", required=True, help="dataset spec, e.g. digits, fashion-mnist[5-9], "
                                                    "fashion-mnist-c:fog:3, your own data.npz "
                                                    "(arrays x, y; optional x_test, y_test) or KIND:PATH "
                                                    "(images:FOLDER, csv:FILE?window=N, ...: "
                                                    "mcutrain datasets)")
    p.add_argument("--method", default="fqt",
                   help=f"training method ({', '.join(factory.TRAIN_METHODS)}; default fqt)")
    p.add_argument("--checkpoint", help="save the training state here after every epoch")
    p.add_argument("--resume", help="continue from a training state saved with --checkpoint (same settings)")
    p.add_argument("--resume-changed", type=changed_options, default=(), metavar="OPTION[,OPTION]",
                   help="with --resume: allow these settings to differ from the checkpoint's "
                        f"({', '.join(CHANGEABLE)}); the run then equals no straight run")
    p.add_argument("-o", "--output", help="save the trained int8 model (.npz), its training history "
                   "inside it")
    add_subset_args(p)
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    add_threads_option(p)
    factory.add_options(p.add_argument_group("training options (methods in each help line)"), "train")
    p.set_defaults(func=run)


def train(args: argparse.Namespace, progress: bool | None = None) -> tuple[dict[str, Any], TrainingMethod]:
    """Run the command's work; returns (the --json result, the trained method)."""
    if args.method not in factory.TRAIN_METHODS:
        raise UserError(f"unknown method '{args.method}'; available: {', '.join(factory.TRAIN_METHODS)}")
    try:
        factory.resolve(args, "train", args.method)
    except factory.FactoryError as e:
        raise UserError(str(e)) from None
    check_output(args.output, "-o/--output", ".npz")
    check_output(args.checkpoint, "--checkpoint", ".npz")
    return train_args(args, progress)


def run(args: argparse.Namespace) -> int:
    out, _ = train(args)
    if args.json:
        print_json(out)
    else:
        print(f"{out['method']}: accuracy {out['accuracy_before']:.4f} -> {out['accuracy_after']:.4f} "
              f"after {counted(out['epochs'], 'epoch')} on {out['train_samples']:,} training samples "
              f"({counted(out['steps'], 'step')}, {out['samples_per_s']:.0f} samples/s; accuracy on "
              f"{out['test_samples']:,} test samples)")
        print(f"learning rate {out['lr_used']:g}: {out['lr_reason']}")
        if args.output:
            print(f"saved {args.output} (the model and its training history)")
    return 0
