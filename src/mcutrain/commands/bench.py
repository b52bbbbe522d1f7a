"""`mcutrain bench NAME [--quick]`: regenerate one benchmark's results and table.

Examples:
    mcutrain bench --list
    mcutrain bench fqt-scratch            # benchmarks/results/fqt-scratch.json + docs/benchmarks.md
    mcutrain bench sim-speed --quick      # about two minutes: four rows (what the tests do)
    mcutrain bench zo-adapt --ray auto    # a sweep benchmark's runs as tasks on a Ray cluster
    mcutrain bench zo-adapt --only corruption=gaussian_noise --only seed=0   # part of its grid
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from mcutrain import bench
from mcutrain.bench.runner import runs_as_sweep
from mcutrain.bench.subset import parse_only
from mcutrain.cli import print_json
from mcutrain.errors import UserError


def register(subparsers) -> None:
    p = subparsers.add_parser("bench", help="regenerate a benchmark table",
                              description=__doc__.split("\n\n")[0],
                              epilog="examples:" + __doc__.split("Examples:")[1],
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("name", nargs="?", help="benchmark name (see --list)")
    p.add_argument("--list", action="store_true", help="list the benchmarks")
    p.add_argument("--quick", action="store_true", help="a small variant of under a minute; writes "
                                                         "NAME.quick.json and leaves the docs alone")
    p.add_argument("--work", default="benchmarks/work",
                   help="cache of pretrained models (default %(default)s)")
    p.add_argument("--results", default="benchmarks/results", help="result directory (default %(default)s)")
    p.add_argument("--docs", default="docs", help="directory of benchmarks.md and figures")
    p.add_argument("--ray", metavar="ADDRESS", help="a sweep benchmark (zo-adapt, fqt-*): run its cells as "
                   "tasks on the Ray cluster at ADDRESS (HOST:PORT or auto; docs/sweeps.md)")
    p.add_argument("--only", action="append", metavar="AXIS=VALUE",
                   help="a sweep benchmark: run only this value of one axis of its grid (repeatable; "
                   "writes NAME.subset.json and leaves the docs alone; docs/sweeps.md)")
    p.add_argument("--json", action="store_true", help="print the result file's content")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    names = bench.benchmarks()
    if args.list or not args.name:
        for name, func in names.items():
            doc = (func.__doc__ or "").strip().splitlines()
            print(f"{name:<16} {doc[0] if doc else ''}")
        return 0
    if args.name not in names:
        raise UserError(f"unknown benchmark '{args.name}'; available: {', '.join(names)}")
    log = (lambda s: print(s, file=sys.stderr, flush=True)) if args.json else (lambda s: print(s, flush=True))
    only = parse_only(args.only)
    if (args.ray is not None or only) and not runs_as_sweep(names[args.name]):
        sweeps = ", ".join(n for n, f in names.items() if runs_as_sweep(f))
        raise UserError(f"benchmark '{args.name}' does not run as a sweep, so --ray cannot spread it "
                        f"nor --only restrict it; the sweeps: {sweeps}")
    bench.run(args.name, args.quick, Path(args.work), Path(args.results), Path(args.docs), log, ray=args.ray,
              only=only)
    if args.json:
        import json
        path = bench.result_path(Path(args.results), args.name, args.quick, bool(only))
        print_json(json.loads(path.read_text()))
    return 0
