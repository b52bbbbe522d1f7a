"""`mcutrain demo`: the main job on the default data, start to end.

Today it runs the first stage of the user's path: pretrain the digits CNN in
float on scikit-learn's bundled digits (always available), quantize it to int8
and report both accuracies. The on-device adaptation, planning and MCU stages
join as they land.

Examples:
    mcutrain demo
    mcutrain demo --out demo-run --json
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from mcutrain.cli import print_json


def register(subparsers) -> None:
    p = subparsers.add_parser("demo", help="the main job on the default data (digits)",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default="demo-run", metavar="DIR", help="folder for the demo's files")
    p.add_argument("--seed", type=int, default=0, help="seed of every random choice (default 0)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON on stdout")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from mcutrain.commands.pretrain import pretrain
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    ns = argparse.Namespace(arch="digits-cnn", dataset="digits", epochs=10, seed=args.seed,
                            output=str(out / "digits-cnn.npz"), batch=32, lr=1e-2, threads=1,
                            calibration="minmax", calibration_samples=512)
    result = pretrain(ns, progress=not args.json and sys.stderr.isatty())
    summary = {"stages": {"pretrain": result}}
    if args.json:
        print_json(summary)
    else:
        print("mcutrain demo: digits-cnn on the digits dataset")
        print(f"  float accuracy {result['float_accuracy']:.4f}, int8 accuracy {result['int8_accuracy']:.4f}")
        print(f"  model: {result['path']} ({result['params']:,} parameters, {result['macs']:,} MACs/sample)")
    return 0
