"""`mcutrain plan`: will training fit? RAM, Flash and MACs of one training step on a board.

Plans the arena of the method's training step (greedy offsets, in place where legal), adds the
trainable weights moved to RAM, the method's state and a stack allowance, and the Flash of the
frozen weights and the code (an estimate until an image is built). When it does not fit, the
planner tries fewer trainable layers, sparse ZO and smaller batches and names the best that fits.
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

from mcutrain.cli import UserError, print_json
from mcutrain.commands._numbers import non_negative_int, positive_int, unit_interval
from mcutrain.commands._outputs import check_output

METHODS = ("fqt", "zo", "bp-qas", "float", "none")


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "plan", help="RAM / Flash / MACs of a training step on a target: fits or not, and what would",
        description=__doc__.split("\n\n")[0], epilog="Examples:" + __doc__.split("Examples:")[1],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", nargs="?", help="model file (.npz); or use --arch")
    p.add_argument("--arch", help="a zoo architecture instead of a model file")
    p.add_argument("--classes", type=positive_int, default=10,
                   help="with --arch: number of classes (default 10)")
    p.add_argument("--input-size", type=positive_int, metavar="S",
                   help="with --arch: input height and width S (channels as the architecture's default)")
    p.add_argument("--method", required=True, choices=METHODS, help="training method ('none': inference)")
    p.add_argument("--precision", default="uint8", help="fqt: uint8 | mixed | float32 | int8 (default uint8)")
    p.add_argument("--trainable", default="all",
                   help="all | last:N | layers:a,b | auto | auto:BYTES (default all)")
    p.add_argument("--target", required=True, help="board or core (see the error for the list)")
    p.add_argument("--batch", type=positive_int, default=1, help="samples per training step (default 1)")
    p.add_argument("--partial", type=unit_interval, default=1.0, metavar="LAMBDA_MIN",
                   help="fqt: dynamic partial updates, lambda_min (planned at their worst case: every "
                        "structure of each layer that runs them)")
    p.add_argument("--partial-max", type=unit_interval, default=1.0, metavar="LAMBDA_MAX",
                   help="fqt partial updates: lambda_max (default 1.0)")
    p.add_argument("--partial-output", action="store_true",
                   help="fqt: the output layer runs partial updates too (default: it trains fully)")
    p.add_argument("--perturb", default="mix", help="zo: wp | np | mix | mix:LAYER | model-wp (default mix)")
    p.add_argument("--sparse", default="none", metavar="SPEC",
                   help="zo: none | score:K | test:K (K of the trainable layers; planned for the K "
                        "largest) | topk:R | randk:R")
    p.add_argument("--queries", type=positive_int, default=50,
                   help="zo: queries per layer and step (default 50)")
    p.add_argument("--bias-last", type=non_negative_int, default=0,
                   help="bp-qas: also train biases of the last N layers")
    p.add_argument("--picture", metavar="PNG", help="write the memory-lifetime picture here")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=run)


def load_graph(args: argparse.Namespace):
    from mcutrain import io, zoo
    if (args.model is None) == (args.arch is None):
        raise UserError("give either a MODEL file or --arch A")
    if args.arch is not None:
        shape = None
        if args.input_size is not None:
            if args.input_size < 1:
                raise UserError(f"--input-size must be positive, got {args.input_size}")
            default = zoo.ARCHS[args.arch][1] if args.arch in zoo.ARCHS else None
            if default is not None:
                shape = (1, args.input_size, default[2]) if default[0] == 1 else \
                    (args.input_size, args.input_size, default[2])
        try:
            return zoo.build(args.arch, args.classes, shape)
        except ValueError as e:
            raise UserError(str(e)) from None
    try:
        mf = io.load(args.model)
    except (io.ModelFileError, OSError) as e:
        raise UserError(str(e)) from None
    from mcutrain.methods.trainable import internal_spec, source_names_of
    try:     # an imported model's original layer names -> its IR names
        args.trainable = internal_spec(mf.graph, args.trainable, source_names_of(mf.meta.get("provenance")))
    except ValueError as e:
        raise UserError(str(e)) from None
    return mf.graph


def _sparse(args: argparse.Namespace, graph) -> tuple[str, str]:
    """(trainable, mask) for zo's --sparse: K layers picked later are planned as the K largest."""
    from mcutrain.methods.trainable import resolve_trainable
    sp = args.sparse
    if sp == "none":
        return args.trainable, "none"
    if sp.startswith(("topk:", "randk:")):
        return args.trainable, sp
    if sp.startswith(("score:", "test:")):
        try:
            k = int(sp.split(":", 1)[1])
        except ValueError:
            raise UserError(f"--sparse '{sp}': K must be a whole number") from None
        cands = resolve_trainable(graph, args.trainable)
        if not 1 <= k <= len(cands):
            raise UserError(f"--sparse '{sp}': K must be in 1..{len(cands)} (the trainable layers)")
        big = sorted(cands, key=lambda n: -graph.num_params(graph.node(n)))[:k]
        return "layers:" + ",".join(big), "none"
    raise UserError(f"--sparse '{sp}': use none, score:K, test:K, topk:R or randk:R")


def run(args: argparse.Namespace) -> int:
    from mcutrain.plan.memory import account, format_report
    from mcutrain.plan.suggest import PlanRequest, pick_trainable, suggest
    from mcutrain.targets import TargetError, get_target

    check_output(args.picture, "--picture", ".png")
    graph = load_graph(args)
    try:
        target = get_target(args.target)
    except TargetError as e:
        raise UserError(str(e)) from None
    if args.batch < 1:
        raise UserError(f"--batch must be at least 1, got {args.batch}")
    if not 0.0 <= args.partial <= args.partial_max <= 1.0:
        raise UserError(f"--partial {args.partial} / --partial-max {args.partial_max}: need "
                        "0 <= LAMBDA_MIN <= LAMBDA_MAX <= 1")
    mask = "none"
    trainable = args.trainable
    try:
        if args.method == "zo" and not trainable.startswith("auto"):
            trainable, mask = _sparse(args, graph)
        common = {"batch": args.batch, "precision": args.precision, "perturb": args.perturb,
                  "queries": args.queries, "mask": mask, "lambda_min": args.partial,
                  "lambda_max": args.partial_max, "partial_output": args.partial_output,
                  "bias_last": args.bias_last}
        if trainable.startswith("auto"):
            budget = None
            if trainable != "auto":
                try:
                    budget = int(trainable.split(":", 1)[1])
                except (IndexError, ValueError):
                    raise UserError(f"--trainable '{trainable}': use auto or auto:BYTES") from None
            trainable = pick_trainable(graph, args.method, target, budget, **common)
        req = PlanRequest(args.method, trainable=trainable, **common)
        report = account(req.build(graph), target)
        if not report.fits:
            report.suggestion = suggest(graph, req, target)
    except ValueError as e:
        raise UserError(str(e)) from None
    if args.picture:
        from mcutrain.plan.picture import draw
        draw(report.plan, args.picture, report=report)
    if args.json:
        print_json(report.to_json())
        return 0
    print(format_report(report))
    if report.suggestion is not None:
        best = report.suggestion["best"]
        if best is None:
            print("nothing the planner tried fits; pick a target with more RAM")
        else:
            print(f"best that fits: {best['options']}  ({best['kind']}: "
                  f"RAM {best['ram_bytes'] / 1024:,.1f} KB, {best['trained_params']:,} trained parameters)")
    if args.picture:
        print(f"lifetime picture: {args.picture}")
    return 0
