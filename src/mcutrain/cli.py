"""The `mcutrain` command: one subcommand per module in `mcutrain.commands`.

Each command module defines `register(subparsers)` that adds its parser and
sets `func`, so commands stay small and independent. Commands that are not
built yet are still listed (so `--help` shows the whole tool) and exit with
status 2 and "not implemented yet" instead of pretending.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys

from mcutrain.errors import UserError
from mcutrain.io import json_plain
from mcutrain.version import __version__

COMMANDS = ["demo", "datasets", "import", "pretrain", "train", "eval", "plan", "export", "run",
            "state-to-model", "bench", "report"]
"""Every subcommand, in the order of the user's path (DESIGN section 9)."""
MODULE_NAMES = {"import": "import_model", "state-to-model": "state_to_model"}
"""Commands whose module name differs (`import` is a Python keyword; a module name has no `-`)."""


def _not_implemented(name: str):
    def run(args: argparse.Namespace) -> int:
        print(f"mcutrain {name}: not implemented yet", file=sys.stderr)
        return 2
    return run


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mcutrain",
        description="Train fully quantized neural networks on microcontrollers.",
        epilog="Start with 'mcutrain demo'. Run 'mcutrain COMMAND --help' for a command's options "
               "and examples.")
    parser.add_argument("--version", action="version", version=f"mcutrain {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        try:
            module_name = f"mcutrain.commands.{MODULE_NAMES.get(name, name)}"
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as e:
            if e.name != module_name:
                raise
            p = sub.add_parser(name, help="(not implemented yet)")
            p.add_argument("rest", nargs=argparse.REMAINDER)
            p.set_defaults(func=_not_implemented(name))
            continue
        module.register(sub)
    return parser


def print_json(obj) -> None:
    """Machine-readable output for `--json`: one JSON document on stdout."""
    json.dump(obj, sys.stdout, indent=2, sort_keys=False, default=json_plain)
    sys.stdout.write("\n")


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 0
    from mcutrain.engines import keep_freed_memory
    keep_freed_memory()  # training steps reuse the same large buffers: keep them mapped
    try:
        return int(args.func(args) or 0)
    except UserError as e:
        print(f"mcutrain {args.command}: error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
