"""Plan and export: one path for `mcutrain plan` / `mcutrain export` and `mcutrain.plan` / `mcutrain.export`.

`plan_args` and `export_args` are the commands' work on namespaces the factory resolved; the API
functions build those namespaces from keywords. The model is a file, a zoo architecture
(`arch=`, with `init="random"` for export) or an in-memory `Graph` / `QuantModel`.

Example:
    >>> report = mcutrain.plan(mcutrain.load("model.npz"), method="zo", target="nrf52840", queries=10)
    >>> report.fits
    True
    >>> mcutrain.export("model.npz", "zo-lib", method="zo", target="nrf52840", queries=10)["fits"]
    True
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np

from mcutrain import zoo
from mcutrain.api.data import (
    Model,
    check_shape,
    dataset_of,
    graph_of,
    input_shape_for,
    options_namespace,
    read,
)
from mcutrain.api.harness_inputs import (
    check_inputs_method,
    harness_files,
    inputs_dataset,
    write_harness_inputs,
)
from mcutrain.api.library_manifest import write_library_record
from mcutrain.codegen.cformat import c_prefix
from mcutrain.codegen.examples import ExampleError
from mcutrain.errors import UserError
from mcutrain.graph import Graph
from mcutrain.methods import factory
from mcutrain.methods.trainable import internal_spec, resolve_trainable, source_names_of, user_names
from mcutrain.options import check_lr
from mcutrain.qmodel import QuantModel

METHODS_IN_C = ("none", "zo", "bp-qas", "fqt")
"""Training methods the C code generator supports so far (none = inference only)."""
PLAN_METHODS = ("fqt", "zo", "bp-qas", "float", "none")
"""Methods the planner accounts ('none': inference)."""


EXPORT_KEYS = ("out_dir", "target", "core", "kernels", "planner", "arena_bytes", "const_bytes", "macs",
               "provenance", "files", "method", "planned_ram_bytes", "planned_flash_bytes", "ram_limit",
               "flash_limit", "fits", "prefix", "examples")
"""The keys of `export --json` for a C library (in this order; `harness_inputs` follows with
`--inputs`); a training library adds `TRAINING_EXPORT_KEYS` (an imported model's
`source_names` before them)."""
TRAINING_EXPORT_KEYS = ("batch", "trainable", "train_arena_bytes", "inference_arena_bytes",
                        "ram_weight_bytes", "state_bytes", "macs_per_step", "options")
FILE_EXPORT_KEYS = ("path", "format", "bytes", "rounding", "provenance", "macs", "params")
"""The keys of `export --format tflite | onnx --json`."""


def check_method_lr(args: argparse.Namespace, command: str) -> None:
    """The per-method bound of `--lr` (`options.check_lr`) when a training method is compiled in."""
    if args.method != "none":
        try:
            check_lr(args.method, args.lr, command)
        except ValueError as e:
            raise UserError(str(e)) from None


def resolve_target_and_kernels(args: argparse.Namespace):
    """(Target, kernels) from --target/--kernels; refuses methods the C side lacks."""
    from mcutrain.targets import TargetError, get_target

    if args.method not in METHODS_IN_C:
        raise UserError(f"not implemented yet for C (method {args.method}); use --method "
                        f"{', '.join(METHODS_IN_C)}")
    try:
        target = get_target(args.target)
    except TargetError as e:
        raise UserError(str(e)) from None
    kernels = getattr(args, "kernels", None) or ("dsp" if target.dsp else "ref")
    if kernels == "dsp" and not target.dsp:
        raise UserError(f"target {target.name} ({target.core}) has no DSP extension; use --kernels ref")
    return target, kernels


def int8_model(args: argparse.Namespace, calib_x: np.ndarray | None = None, num_classes: int | None = None,
               input_shape: tuple[int, ...] | None = None) -> tuple[QuantModel, str]:
    """(QuantModel, provenance) of export and run: a file, `--arch --init random`, or an in-memory model.

    A float model (file or Graph) is quantized on `calib_x`; without samples it is refused, and
    samples of another shape than the model's input are refused before any work (`check_shape`).
    """
    from mcutrain.codegen.model_source import FLOAT_CALIB_SAMPLES, ModelSourceError, resolve_model
    from mcutrain.engines import ptq

    if calib_x is not None and getattr(args, "arch", None) is None and args.model is not None:
        model = args.model if isinstance(args.model, Graph | QuantModel) else read(args.model).model
        check_shape(graph_of(model).input_shape, calib_x.shape[1:], getattr(args, "dataset", None) or "given")
    if isinstance(args.model, QuantModel):
        return args.model, f"int8 model '{args.model.graph.name}' (in memory)"
    if isinstance(args.model, Graph):
        if calib_x is None:
            raise UserError("a float Graph needs samples to be quantized on: pass a dataset")
        qm = ptq.quantize_model(args.model, np.asarray(calib_x[:FLOAT_CALIB_SAMPLES], np.float32))
        return qm, (f"float model '{args.model.name}' (in memory), PTQ on "
                    f"{min(len(calib_x), FLOAT_CALIB_SAMPLES)} training samples")
    try:
        return resolve_model(args.model, args.arch, args.init, args.seed, num_classes, input_shape,
                             calib_x=calib_x)
    except ModelSourceError as e:
        raise UserError(str(e)) from None


def build_method(args: argparse.Namespace, qm: QuantModel, calib: np.ndarray | None = None,
                 c_twin: bool = False):
    """The `--method` of export/run on `qm` through the factory (None for 'none'); UserError on bad input.

    Every method's C step runs in `qm`'s rounding mode (fqt int8's forward requantizations, ADD and
    MEAN included: codegen/rounding_c.py), so a `tflite` model exports as it is.
    """
    try:
        method = factory.build_method(args.method, args, qm, calib, c_twin=c_twin)
    except factory.FactoryError as e:
        raise UserError(str(e)) from None
    if getattr(method, "pinned", None):
        raise UserError(f"the qparams of {', '.join(sorted(method.pinned))} come from no float32 range, "
                        "which the fqt C step needs; export with --method zo / bp-qas / none")
    return method


def library_report(method, qm: QuantModel, target, kernels: str, batch: int):
    """The planner's `MemoryReport` of the library export and run build: the method's own step
    (`schedule_for`, as the code generator plans it) or, without a method, one inference."""
    from mcutrain.plan.memory import account
    from mcutrain.plan.schedules import build_schedule, schedule_for

    s = build_schedule(qm.graph, "none", kernels=kernels, target=target) if method is None else \
        schedule_for(method, batch=batch, kernels=kernels)
    return account(s, target)


def check_budget(report, allow_overflow: bool) -> None:
    """Refuse a library that does not fit its board (`plan.budget`), unless `allow_overflow`."""
    from mcutrain.plan.budget import overflow_message

    if not report.fits and not allow_overflow:
        raise UserError(overflow_message(report))


def budget_json(report) -> dict[str, Any]:
    """What export and run say of the planner's verdict (the keys of `plan --json` they share)."""
    return {"planned_ram_bytes": report.ram_bytes, "planned_flash_bytes": report.flash_bytes,
            "ram_limit": report.target.ram_bytes, "flash_limit": report.target.flash_bytes,
            "fits": report.fits}


def symbol_prefix(args: argparse.Namespace) -> str:
    """`--prefix` checked as a C identifier prefix ('' without one), before any work."""
    prefix = getattr(args, "prefix", None) or ""
    if prefix:
        try:
            c_prefix(prefix)
        except ValueError as e:
            raise UserError(f"--prefix: {e}") from None
    return prefix


def export_args(args: argparse.Namespace) -> dict[str, Any]:
    """The work of `mcutrain export` on resolved options: the library written, its `--json` result."""
    from mcutrain.codegen.emit import ExportError
    from mcutrain.codegen.library import export_library, export_training_library

    check_method_lr(args, "export")
    prefix = symbol_prefix(args)
    examples = tuple(getattr(args, "example", None) or ())
    inputs = getattr(args, "inputs", None)
    if inputs:
        check_inputs_method(args.method)
    target, kernels = resolve_target_and_kernels(args)
    calib = None
    if args.dataset:
        calib = dataset_of(args.dataset, args.seed,
                           sample_shape=input_shape_for(args.dataset, getattr(args, "model", None))).x_train
    qm, prov = int8_model(args, calib)
    harness_ds = inputs_dataset(args, qm) if inputs else None
    try:
        method = build_method(args, qm, None if calib is None else calib[:factory.CALIB_SAMPLES])
        budget = library_report(method, qm, target, kernels, getattr(args, "batch", 1))
        check_budget(budget, getattr(args, "allow_overflow", False))
        if method is None:
            res = export_library(qm, args.output, kernels=kernels, planner=args.planner, provenance=prov,
                                 target=target.name, prefix=prefix, examples=examples)
        else:
            if args.planner != "greedy":
                raise UserError("--planner linear applies to inference libraries (--method none)")
            res = export_training_library(method, args.output, batch=args.batch,
                                          kernels=kernels, provenance=prov, target=target.name, lr=args.lr,
                                          prefix=prefix, examples=examples)
            res.files = sorted(res.files + write_library_record(args.output, args, qm, res.model, kernels,
                                                                target.name, prov))
        harness = (write_harness_inputs(args, qm, harness_ds, args.output, training=method is not None)
                   if harness_ds is not None else None)
    except (ExportError, ExampleError) as e:
        raise UserError(str(e)) from None
    except OSError as e:
        raise UserError(f"cannot write to '{args.output}': {e}") from None
    out = {"out_dir": str(res.out_dir), "target": target.name, "core": target.core, "kernels": kernels,
           "planner": args.planner, "arena_bytes": res.arena_bytes, "const_bytes": res.const_bytes,
           "macs": qm.graph.total_macs(), "provenance": prov, "files": res.files, "method": args.method,
           **budget_json(budget), "prefix": prefix, "examples": list(examples)}
    assert tuple(out) == EXPORT_KEYS
    if harness:
        out["harness_inputs"] = harness
        out["files"] = sorted(res.files + harness_files(harness))
    if method is not None:
        src = res.model
        s = src.plan.schedule
        renamed = user_names(list(s.trainable), source_names_of(qm.provenance))
        if renamed:     # an imported model: its trained layers by the names the user gave them
            out["source_names"] = renamed
        out.update({"batch": args.batch, "trainable": list(s.trainable),
                    "train_arena_bytes": src.plan.arena_bytes,
                    "inference_arena_bytes": src.inference_arena_bytes,
                    "ram_weight_bytes": src.ram_weight_bytes, "state_bytes": src.state_bytes,
                    "macs_per_step": sum(s.macs_by_phase().values()), "options": src.options})
    return out


def export_file_args(args: argparse.Namespace) -> dict[str, Any]:
    """The work of `mcutrain export --format tflite | onnx`: the int8 model written as one file."""
    from mcutrain.interop import InteropError
    from mcutrain.interop.onnx_export import save_onnx
    from mcutrain.interop.tflite_export import save_tflite

    if args.method != "none":
        raise UserError(f"--format {args.format} writes the int8 model; training (--method {args.method}) "
                        "compiles into a C library: drop --format")
    calib = dataset_of(args.dataset, args.seed, sample_shape=input_shape_for(
        args.dataset, getattr(args, "model", None))).x_train if args.dataset else None
    qm, prov = int8_model(args, calib)
    try:
        path = (save_tflite if args.format == "tflite" else save_onnx)(qm, args.output)
    except (InteropError, ImportError) as e:     # ImportError: the tflite or onnx package is missing
        raise UserError(str(e)) from None
    except OSError as e:
        raise UserError(f"cannot write '{args.output}': {e}") from None
    if args.format == "tflite" and qm.rounding != "tflite":
        print(f"mcutrain export: note: the model rounds {qm.rounding!r}, TFLite Micro in its own double "
              "rounding ('tflite'): some outputs may differ by one step from the simulation; "
              f"`mcutrain eval {args.output}` gives TFLM's accuracy. To simulate TFLM exactly, quantize "
              "with `--rounding tflite` (pretrain, import --calibrate)", file=sys.stderr)
    return {"path": str(path), "format": args.format, "bytes": Path(path).stat().st_size,
            "rounding": qm.rounding, "provenance": prov, "macs": qm.graph.total_macs(),
            "params": qm.graph.num_params()}


def plan_graph(args: argparse.Namespace) -> Graph:
    """The float graph `plan` accounts: a file, an in-memory model or `--arch` with --classes/--input-size."""
    if isinstance(args.model, Graph | QuantModel):
        return graph_of(args.model)
    if (args.model is None) == (args.arch is None):
        raise UserError("give either a MODEL file or --arch A")
    if args.arch is not None:
        shape = None
        if args.input_size is not None:
            default = zoo.ARCHS[args.arch][1] if args.arch in zoo.ARCHS else None
            if default is not None:
                shape = (1, args.input_size, default[2]) if default[0] == 1 else \
                    (args.input_size, args.input_size, default[2])
        try:
            return zoo.build(args.arch, args.classes, shape)
        except ValueError as e:
            raise UserError(str(e)) from None
    held = read(args.model)
    graph, args.source_names = graph_of(held.model), held.source_names
    try:     # an imported model's original layer names -> its IR names
        args.trainable = internal_spec(graph, args.trainable, args.source_names)
    except ValueError as e:
        raise UserError(str(e)) from None
    return graph


def plan_sparse(args: argparse.Namespace, graph: Graph) -> tuple[str, str]:
    """(trainable, mask) for zo's --sparse: K layers picked later are planned as the K largest."""
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


def plan_args(args: argparse.Namespace):
    """The work of `mcutrain plan` on resolved options: the MemoryReport (a suggestion if it does not fit)."""
    from mcutrain.plan.memory import account
    from mcutrain.plan.suggest import PlanRequest, pick_trainable, suggest
    from mcutrain.targets import TargetError, get_target

    graph = plan_graph(args)
    try:
        target = get_target(args.target)
    except TargetError as e:
        raise UserError(str(e)) from None
    mask = "none"
    trainable = args.trainable
    try:
        if args.method == "zo" and not trainable.startswith("auto"):
            trainable, mask = plan_sparse(args, graph)
        batch = 1 if args.method == "none" else args.batch     # inference plans one sample
        common = {"batch": batch, "precision": args.precision, "perturb": args.perturb,
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
        report = account(req.build(graph, target), target)
        if not report.fits:
            report.suggestion = suggest(graph, req, target)
    except ValueError as e:
        raise UserError(str(e)) from None
    return report


def plan(model: Model | str | Path | None, method: str, target: str, *, arch: str | None = None,
         classes: int = 10, input_size: int | None = None, **options: Any):
    """RAM, Flash and MACs of one training step of `method` on `target` (as `mcutrain plan`).

    `options`: the method's plan options (`batch`, `trainable` incl. `auto`, `precision`, `partial`,
    `partial_max`, `partial_output`,
    `queries`, `perturb`, `sparse`, `bias_last`), with the command's defaults. Returns the
    `MemoryReport` (`.fits`, `.ram_bytes`, `.to_json()`, `.suggestion` when it does not fit).
    """
    if method not in PLAN_METHODS:
        raise UserError(f"unknown method '{method}'; plan accounts {', '.join(PLAN_METHODS)}")
    return plan_args(options_namespace("plan", method, options, model=None if arch else model, arch=arch,
                                       target=target, classes=classes, input_size=input_size))


def export(model: Model | str | Path | None, out_dir: str | Path, method: str = "none",
           target: str = "cortex-m4", *, arch: str | None = None, kernels: str | None = None,
           planner: str = "greedy", dataset: str | None = None, allow_overflow: bool = False,
           prefix: str = "", inputs: str | None = None, examples: tuple[str, ...] = (),
           **options: Any) -> dict[str, Any]:
    """Write the self-contained C library of `model` for `target` to `out_dir` (as `mcutrain export`).

    `method` 'none' is inference only; zo, bp-qas and fqt compile their training step in, with
    the training options of `options` (same names, defaults and checks as the command). A float
    model is quantized on `dataset`'s training samples. A library that does not fit `target` is
    refused (UserError with the planner's breakdown) unless `allow_overflow`. `prefix` ('kws_')
    starts every name and file of the library, so two libraries link into one image. `inputs` (a
    dataset spec) writes the harness files and the expected logits (`api.harness_inputs`);
    `examples` ready-to-build firmware layouts (`codegen.examples.EXAMPLES`). Returns the `--json`
    result.
    """
    return export_args(options_namespace("export", method, options, model=None if arch else model, arch=arch,
                                         init="random" if arch else None, target=target, kernels=kernels,
                                         planner=planner, dataset=dataset, output=out_dir,
                                         allow_overflow=allow_overflow, prefix=prefix, inputs=inputs,
                                         example=list(examples)))
