"""`mcutrain bench NAME [--quick]`: regenerate one benchmark's results and table.

Examples:
    mcutrain bench --list
    mcutrain bench fqt-scratch            # benchmarks/results/fqt-scratch.json + docs/benchmarks.md
    mcutrain bench sim-speed --quick      # about two minutes: four rows (what the tests do)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from mcutrain import bench
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
    bench.run(args.name, args.quick, Path(args.work), Path(args.results), Path(args.docs), log)
    if args.json:
        import json
        print_json(json.loads(bench.result_path(Path(args.results), args.name, args.quick).read_text()))
    return 0
