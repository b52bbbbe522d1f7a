"""`mcutrain report`: the summary table and plots of a folder of training runs.

Reads every NAME.npz that `mcutrain train -o NAME.npz` wrote, with its training history inside
(older runs: NAME.history.json beside it), and NAME.mcu.json (the
saved `mcutrain run --json` result, when there is one), plans each trained model on --target
with the settings it was trained with, and writes summary.md, summary.json, curves.png,
memory.png and one lifetime-NAME.png per method into RUN_DIR/report (or --out). A row is one
configuration (method, precision, queries, batch, trainable, partial), listed under the table:
an MCU run of another configuration than the training gets a row of its own.

A folder written by `mcutrain sweep -o` (it holds results.jsonl) gets the sweep's report instead:
sweep.md and sweep.json (test accuracy per cell, mean +- std over seeds per configuration),
accuracy.png and, with --heatmap AXIS1,AXIS2, heatmap.png (the mean accuracy over two axes).

Examples:
    mcutrain train model.npz --dataset digits-c:stripe:5 --method fqt --partial 0.5 -o runs/fqt.npz
    mcutrain train model.npz --dataset digits-c:stripe:5 --method zo --queries 10 --lr 0.05 -o runs/zo.npz
    mcutrain run model.npz --dataset digits-c:stripe:5 --method zo --queries 10 --lr 0.05 --steps 3 \\
        --target nrf52840 --json > runs/zo.mcu.json
    mcutrain report runs --target nrf52840
    mcutrain report demo-run --out demo-report --json
    mcutrain report sweep-out --heatmap method,lr
"""

from __future__ import annotations

import argparse

from mcutrain.cli import print_json
from mcutrain.commands._outputs import check_output
from mcutrain.errors import UserError
from mcutrain.options import positive_int
from mcutrain.sweep.store import is_sweep_dir


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "report", help="summary table and plots (curves, memory, lifetimes) of a folder of runs",
        description=__doc__.split("\n\n")[0] + "\n\n" + __doc__.split("\n\n")[1],
        epilog="examples:\n" + __doc__.split("Examples:\n")[1],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run_dir", metavar="RUN_DIR",
                   help="folder holding the NAME.npz files of 'mcutrain train -o', or a sweep's folder")
    p.add_argument("--target", default="nrf52840", help="board to plan RAM/Flash on (default nrf52840)")
    p.add_argument("--batch", type=positive_int, default=None,
                   help="batch to plan with when a history does not record it (default 32, train's)")
    p.add_argument("--out", metavar="DIR", help="where to write the report (default RUN_DIR/report)")
    p.add_argument("--heatmap", metavar="AXIS1,AXIS2", help="a sweep's folder: also heatmap.png, the mean "
                   "accuracy over these two axes of the sweep (rows, columns)")
    p.add_argument("--json", action="store_true", help="print the rows and written files as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from mcutrain.report import ReportError, write_report
    from mcutrain.targets import TargetError, get_target

    check_output(args.out, "--out", directory=True)
    if is_sweep_dir(args.run_dir):
        return sweep_report(args)
    if args.heatmap is not None:
        raise UserError(f"--heatmap is for a sweep's folder; '{args.run_dir}' holds no results.jsonl")
    try:
        get_target(args.target)
    except TargetError as e:
        raise UserError(str(e)) from None
    try:
        doc = write_report(args.run_dir, args.out, target=args.target, batch=args.batch)
    except ReportError as e:
        raise UserError(str(e)) from None
    if args.json:
        print_json({k: doc[k] for k in ("run_dir", "target", "rows", "files")})
        return 0
    print(doc["table"])
    print("\nwrote " + ", ".join(doc["files"]))
    return 0


def sweep_report(args: argparse.Namespace) -> int:
    """The report of a `mcutrain sweep` folder: table, accuracy per cell, optional heatmap."""
    from mcutrain.sweep.plots import write_sweep_report

    doc = write_sweep_report(args.run_dir, args.out, heatmap=args.heatmap)
    if args.json:
        print_json({k: doc[k] for k in ("sweep_dir", "sweep", "rows", "cells", "files")})
        return 0
    print(doc["table"])
    print("\nwrote " + ", ".join(doc["files"]))
    return 0
