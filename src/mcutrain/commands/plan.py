"""`mcutrain plan`: will training fit? RAM, Flash and MACs of one training step on a board.

Plans the arena of the method's training step (greedy offsets, in place where legal), adds the
trainable weights moved to RAM, the method's state and a stack allowance, and the Flash of the
frozen weights and the code (an estimate until an image is built). When it does not fit, the
planner tries fewer trainable layers, sparse ZO and smaller batches and names the best that fits.
Exits with status 3 when the step does not fit (1: an input error, 2: a usage error), so a
script can stop before `export`, which refuses such a step too. Without `--batch` it plans
train's batch (32).
FQT plans one sample at a time (it accumulates per-sample gradients; the batch only keeps the
gradient buffers alive across samples); zo, bp-qas and float run the batch in one pass, as
their simulators do.

Examples:
    mcutrain plan --arch mcunet-5fps --classes 10 --method fqt --precision uint8 \\
        --trainable last:7 --target imxrt1062
    mcutrain plan --arch mcunet-5fps --method zo --trainable layers:blocks.4-7.pw1 \\
        --target stm32f746 --json
    mcutrain plan model.npz --method fqt --trainable auto --target nrf52840 --picture mem.png
"""

from __future__ import annotations

import argparse

from mcutrain.api.device import PLAN_METHODS, plan_args
from mcutrain.cli import print_json
from mcutrain.commands._outputs import check_output
from mcutrain.commands.export import resolve_options
from mcutrain.methods import factory
from mcutrain.methods.trainable import user_names
from mcutrain.options import add_threads_option, positive_int
from mcutrain.plan.budget import PLAN_DOES_NOT_FIT

EXIT_STATUS = (f"\n\nExit status: 0 when the step fits, {PLAN_DOES_NOT_FIT} when it does not (export and run "
               "refuse it too), 1 for an input error, 2 for a usage error.")


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "plan", help="RAM / Flash / MACs of a training step on a target: fits or not, and what would",
        description=__doc__.split("\n\n")[0] + EXIT_STATUS,
        epilog="Examples:" + __doc__.split("Examples:")[1],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", nargs="?", help="model file (.npz or a .tflite as deployed); or use --arch")
    p.add_argument("--arch", help="a zoo architecture instead of a model file")
    p.add_argument("--classes", type=positive_int, default=10,
                   help="with --arch: number of classes (default 10)")
    p.add_argument("--input-size", type=positive_int, metavar="S",
                   help="with --arch: input height and width S (channels as the architecture's default)")
    p.add_argument("--method", required=True, choices=PLAN_METHODS,
                   help="training method ('none': inference)")
    p.add_argument("--target", required=True, help="board or core (see the error for the list)")
    factory.add_options(p.add_argument_group("training options (methods in each help line)"), "plan")
    p.add_argument("--picture", metavar="PNG", help="write the memory-lifetime picture here")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    add_threads_option(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from mcutrain.plan.memory import format_report

    check_output(args.picture, "--picture", ".png")
    opts = resolve_options(args, "plan")
    report = plan_args(opts)
    renamed = user_names(list(report.schedule.trainable), getattr(opts, "source_names", {}))
    if args.picture:
        from mcutrain.plan.picture import draw
        draw(report.plan, args.picture, report=report)
    status = 0 if report.fits else PLAN_DOES_NOT_FIT
    if args.json:     # an imported model adds its trained layers' original names
        print_json({**report.to_json(), **({"source_names": renamed} if renamed else {})})
        return status
    print(format_report(report))
    if renamed:
        print("renamed on import: " + ", ".join(f"{k} = '{v}'" for k, v in renamed.items()))
    if report.suggestion is not None:
        best = report.suggestion["best"]
        if best is None:
            print("nothing the planner tried fits; pick a target with more RAM")
        else:
            print(f"best that fits: {best['options']}  ({best['kind']}: "
                  f"RAM {best['ram_bytes'] / 1024:,.1f} KB, {best['trained_params']:,} trained parameters)")
    if args.picture:
        print(f"lifetime picture: {args.picture}")
    return status
