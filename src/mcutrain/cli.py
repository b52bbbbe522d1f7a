"""The `mcutrain` command: one subcommand per module in `mcutrain.commands`.

Each command module defines `register(subparsers)` that adds its parser and
sets `func`, so commands stay small and independent. Commands that are not
built yet are still listed (so `--help` shows the whole tool) and exit with
status 2 and "not implemented yet" instead of pretending.
"""

from __future__ import annotations

import argparse
import errno
import importlib
import json
import os
import shlex
import sys
from pathlib import Path

from mcutrain.errors import UserError
from mcutrain.io import json_plain
from mcutrain.options import blas_threads
from mcutrain.version import __version__

COMMANDS = ["demo", "datasets", "import", "pretrain", "train", "eval", "plan", "export", "run",
            "state-to-model", "sweep", "bench", "report"]
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


def counted(n: int, noun: str) -> str:
    """`n` and `noun`, plural unless n is 1: "1 epoch", "3 epochs".

    >>> counted(1, "epoch"), counted(2, "epoch")
    ('1 epoch', '2 epochs')
    """
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def resume_hint(args: argparse.Namespace, argv: list[str]) -> str:
    """What to type to continue an interrupted run: its command line with `--resume CHECKPOINT`
    (empty when the run saved no checkpoint yet)."""
    ck = getattr(args, "checkpoint", None)
    if not ck or not Path(ck).is_file():
        return ""
    words, rest = [], iter(argv)
    for w in rest:      # an earlier --resume gives way to the newest checkpoint
        if w == "--resume":
            next(rest, None)
        elif not w.startswith("--resume="):
            words.append(w)
    return f"; continue with: mcutrain {shlex.join([*words, '--resume', ck])}"


def quiet_broken_pipe() -> int:
    """The reader of stdout went away (`mcutrain datasets | head -1`): stop without a traceback.

    NOTE: stdout is pointed at /dev/null so that the interpreter's final flush cannot raise
    again; the status is 0 because the reader, not mcutrain, chose to stop.
    """
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    return 0


OS_ADVICE = {errno.ENOSPC: "free some space or write elsewhere",
             errno.EDQUOT: "free some space or write elsewhere",
             errno.EACCES: "pick a folder you may write in", errno.EPERM: "pick a folder you may write in",
             errno.EROFS: "pick a folder on a writable disk"}
"""What to do about the system errors a command meets at its end (a full disk, a read-only folder)."""


def os_error_message(e: OSError) -> str:
    """One line for an OSError that escaped a command: the file, the system's reason, what to do."""
    where = f" '{e.filename}'" if e.filename else ""
    advice = OS_ADVICE.get(e.errno, "check the path and try again")
    return f"cannot use{where}: {e.strerror or e}; {advice}"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 0
    from mcutrain.allocator import keep_freed_memory
    keep_freed_memory()  # training steps reuse the same large buffers: keep them mapped
    try:
        with blas_threads(getattr(args, "threads", None)):     # the commands that compute take --threads
            status = int(args.func(args) or 0)
        sys.stdout.flush()      # a closed pipe shows here, while BrokenPipeError can be caught
        return status
    except UserError as e:
        print(f"mcutrain {args.command}: error: {e}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        return quiet_broken_pipe()
    except OSError as e:      # the machine refused (disk full, permission, a read-only folder)
        print(f"mcutrain {args.command}: error: {os_error_message(e)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        # NOTE: private run directories are gone already (contain.private_dir removes them
        # however its block ends); one line instead of the interpreter's traceback.
        fresh_line = "\n" if sys.stderr.isatty() else ""       # past the ^C and a progress bar
        print(f"{fresh_line}mcutrain {args.command}: interrupted{resume_hint(args, argv)}", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
