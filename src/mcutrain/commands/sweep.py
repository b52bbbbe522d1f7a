"""`mcutrain sweep SWEEP.toml -o DIR`: train every cell of a grid, resumably, locally or on Ray.

Each cell (a method with its options, a dataset, a rate, a seed, ...) is one training run through
the Python API; its result (the train JSON, the test accuracy, plan figures when the sweep names a
target) is one line of DIR/results.jsonl. A failed cell is a line with its error and the sweep goes
on; running the same command again skips the finished cells. `mcutrain report DIR` gives the
table and plots. The file format is in docs/sweeps.md; `--example` prints a small one.

Examples:
    mcutrain sweep --example > example.toml
    mcutrain sweep example.toml -o sweep-out
    mcutrain sweep example.toml -o sweep-out --workers 2 --json
    mcutrain sweep example.toml -o sweep-out --ray auto        # on the Ray cluster of this machine
    mcutrain report sweep-out --heatmap method,lr
"""

from __future__ import annotations

import argparse
import sys
from importlib import resources

from mcutrain.cli import print_json
from mcutrain.commands._outputs import check_output
from mcutrain.errors import UserError
from mcutrain.options import positive_int


def register(subparsers) -> None:
    p = subparsers.add_parser("sweep", help="train every cell of a grid of runs (locally or on Ray)",
                              description=__doc__.split("\n\n")[0] + "\n\n" + __doc__.split("\n\n")[1],
                              epilog="examples:" + __doc__.split("Examples:")[1],
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("sweep_file", nargs="?", metavar="SWEEP.toml", help="the sweep file")
    p.add_argument("-o", "--output", metavar="DIR", help="the results folder (created; rerun to resume)")
    p.add_argument("--workers", type=positive_int, help="local worker processes (default: the cores "
                                                        "available; each runs BLAS on one thread)")
    p.add_argument("--ray", metavar="ADDRESS", help="run the cells as tasks on the Ray cluster at "
                                                    "ADDRESS (HOST:PORT, or auto); needs mcutrain[ray]")
    p.add_argument("--example", action="store_true", help="print a small sweep file (8 cells on digits)")
    p.add_argument("--json", action="store_true", help="end with one JSON object: cells, done, skipped, "
                                                       "failed, results")
    p.set_defaults(func=run)


def example_text() -> str:
    return resources.files("mcutrain.sweep").joinpath("example.toml").read_text(encoding="utf-8")


def run(args: argparse.Namespace) -> int:
    from mcutrain.sweep.engine import run_sweep, stderr_log
    from mcutrain.sweep.spec import read_sweep

    if args.example:
        sys.stdout.write(example_text())
        return 0
    if args.sweep_file is None or args.output is None:
        raise UserError("give a sweep file and a results folder: mcutrain sweep SWEEP.toml -o DIR "
                        "(mcutrain sweep --example prints a sweep file to start from)")
    if args.workers is not None and args.ray is not None:
        raise UserError("--workers is for local processes; with --ray the cluster's CPUs run the cells")
    check_output(args.output, "-o", directory=True)
    spec = read_sweep(args.sweep_file)
    summary = run_sweep(spec, args.output, workers=args.workers, ray=args.ray, log=stderr_log)
    if args.json:
        print_json(summary)
        return 0
    print(f"sweep {spec.name}: {summary['cells']} cells, {summary['done']} done, {summary['skipped']} "
          f"skipped (finished before), {summary['failed']} failed, in {summary['seconds']:.0f} s")
    print(f"results: {summary['results']}; table and plots: mcutrain report {args.output}")
    return 0
