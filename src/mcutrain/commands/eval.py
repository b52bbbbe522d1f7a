"""`mcutrain eval MODEL --dataset D`: the accuracy of a model file on a dataset's test split.

An int8 model (from `pretrain`, `import --calibrate`, a `.tflite`, or a trained run) is evaluated
by the integer golden engine in the model's own rounding mode, so the figure is what the device
computes (for a `.tflite`: what TFLite Micro computes, bit for bit); a float model by the float
engine. A `.tflite` file is taken as it is, without writing a model file first.

Examples:
    mcutrain eval model.npz --dataset digits
    mcutrain eval person_detect.tflite --dataset my-images --json
    mcutrain eval runs/zo.npz --dataset digits-c:stripe:5 --test-samples 500
"""

from __future__ import annotations

import argparse

from mcutrain.api.data import load
from mcutrain.api.models import evaluate
from mcutrain.cli import print_json
from mcutrain.options import add_threads_option, positive_int, seed_int
from mcutrain.qmodel import QuantModel


def register(subparsers) -> None:
    p = subparsers.add_parser("eval", help="accuracy of a model file on a dataset's test split",
                              description=__doc__.split("\n\n")[0],
                              epilog="examples:" + __doc__.split("Examples:")[1],
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", help="model file (.npz) or a .tflite")
    p.add_argument("--dataset", required=True, help="dataset spec, e.g. digits, fashion-mnist-c:fog:3, "
                                                    "your own data.npz or KIND:PATH "
                                                    "(images:FOLDER, csv:FILE?window=N, ...: "
                                                    "mcutrain datasets)")
    p.add_argument("--test-samples", type=positive_int, help="the first N test samples (default all)")
    p.add_argument("--seed", type=seed_int, default=0, help="the dataset's corruption seed (default 0)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    add_threads_option(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    model = load(args.model)
    acc = evaluate(model, args.dataset, seed=args.seed, test_samples=args.test_samples)
    int8 = isinstance(model, QuantModel)
    out = {"model": args.model, "dataset": args.dataset, "accuracy": acc,
           "engine": "int8" if int8 else "float32",
           **({"rounding": model.rounding} if int8 else {})}
    if args.json:
        print_json(out)
    else:
        mode = f" ({out['rounding']} rounding)" if int8 else ""
        print(f"{args.model}: accuracy {acc:.4f} on the test split of {args.dataset}, "
              f"{out['engine']} engine{mode}")
    return 0
