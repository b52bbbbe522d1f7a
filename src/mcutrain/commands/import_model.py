"""`mcutrain import`: bring a model from TensorFlow Lite, ONNX or PyTorch into an mcutrain model file.

Examples:
    mcutrain import model.tflite -o model.npz                       the int8 model as deployed
    mcutrain import model.onnx -o model.npz
    mcutrain import model.onnx --input-shape 28,28,1 -o model.npz
    mcutrain import --torch mypkg.models:make_net --input-shape 28,28,1 -o model.npz
    mcutrain import model.onnx -o model.npz --calibrate fashion-mnist     also quantize to int8

A .tflite file (recognized by its content, whatever its name) is an int8 model already: its
integers, scales and zero points are kept as they are (no PTQ), a SOFTMAX head is kept for
inference and export, and the file is written as an int8 model. ONNX and PyTorch models are
float; `--calibrate` quantizes them.

`--torch MODULE:FUNCTION` calls a Python function that returns an `nn.Module`
(no `.pt` files: they are pickles, which mcutrain never loads). Input shapes
are per sample in NHWC order (H,W,C), or F for a flat input.

Layer names outside mcutrain's naming rule (a letter or '_' first, then letters, digits,
'_', '.', '-'; at most 64 characters) are renamed: '/features/0/Conv' becomes
'features.0.Conv', nn.Sequential's '0' becomes 'n_0'. The file's provenance keeps
{new name: original name} as "source_names", so `--trainable layers:` takes either name;
reports and generated code show the new names.
"""

from __future__ import annotations

import argparse
import importlib
from pathlib import Path

from mcutrain.cli import print_json
from mcutrain.commands._outputs import check_output
from mcutrain.errors import UserError
from mcutrain.options import add_rounding_arg, add_threads_option

CALIBRATION_SAMPLES = 512


def register(subparsers) -> None:
    p = subparsers.add_parser("import", help="import a model from TFLite (int8), ONNX or PyTorch",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("onnx", nargs="?", metavar="MODEL", help="an int8 .tflite file or a float ONNX model")
    p.add_argument("--torch", metavar="MODULE:FUNCTION", help="a function returning an nn.Module")
    p.add_argument("--input-shape", metavar="H,W,C", help="per-sample NHWC input shape")
    p.add_argument("--name", help="model name stored in the file")
    p.add_argument("--calibrate", metavar="SPEC",
                   help=f"also quantize to int8 with {CALIBRATION_SAMPLES} training samples of SPEC "
                        "(a dataset spec or your own data.npz)")
    p.add_argument("-o", "--output", required=True, metavar="MODEL.npz", help="the model file to write")
    add_rounding_arg(p)
    p.add_argument("--json", action="store_true", help="print the result as JSON on stdout")
    add_threads_option(p)
    p.set_defaults(func=run)


def _shape(text: str | None) -> tuple[int, ...] | None:
    if text is None:
        return None
    try:
        shape = tuple(int(v) for v in text.split(","))
    except ValueError:
        raise UserError(f"--input-shape takes whole numbers separated by commas (e.g. 28,28,1), "
                        f"got '{text}'") from None
    from mcutrain.limits import MAX_DIM
    if len(shape) not in (1, 3) or min(shape) < 1 or max(shape) > MAX_DIM:
        raise UserError(f"--input-shape is H,W,C or F with sizes in 1..{MAX_DIM}, got '{text}'")
    return shape


def _torch_module(spec: str):
    mod_name, _, fn_name = spec.partition(":")
    if not mod_name or not fn_name:
        raise UserError(f"--torch takes MODULE:FUNCTION (e.g. mypkg.models:make_net), got '{spec}'")
    try:
        fn = getattr(importlib.import_module(mod_name), fn_name)
    except (ImportError, AttributeError) as e:
        raise UserError(f"cannot load '{spec}': {e}") from None
    except Exception as e:      # the user's module failed while importing: say so, no traceback
        raise UserError(f"importing '{mod_name}' failed: {type(e).__name__}: {e}") from None
    try:
        return fn()
    except Exception as e:
        raise UserError(f"calling '{spec}' failed: {type(e).__name__}: {e}") from None


def run(args: argparse.Namespace) -> int:
    from mcutrain import io
    from mcutrain.interop import InteropError, from_onnx_mapped, from_torch_mapped

    if (args.onnx is None) == (args.torch is None):
        raise UserError("give exactly one source: a .tflite or ONNX file, or --torch MODULE:FUNCTION")
    shape = _shape(args.input_shape)
    check_output(args.output, "-o/--output", ".npz")
    if args.onnx:
        from mcutrain.interop.tflite_import import is_tflite
        if not Path(args.onnx).exists():
            raise UserError(f"model file '{args.onnx}' does not exist")
        if is_tflite(args.onnx):
            if args.rounding is not None:
                raise UserError("--rounding applies to a model quantized with --calibrate; a .tflite "
                                "keeps its own integers and TFLite's rounding")
            return _run_tflite(args)
    if args.rounding is not None and not args.calibrate:
        raise UserError("--rounding is the rounding of the quantized model: add --calibrate SPEC")
    try:
        if args.onnx:
            graph, renamed = from_onnx_mapped(args.onnx, input_shape=shape, name=args.name)
            source = {"onnx": Path(args.onnx).name}
        else:
            if shape is None:
                raise UserError("--torch needs --input-shape H,W,C (per sample, NHWC)")
            graph, renamed = from_torch_mapped(_torch_module(args.torch), shape, name=args.name)
            source = {"torch": args.torch}
    except (InteropError, ImportError) as e:     # ImportError: onnx or torch is not installed
        raise UserError(str(e)) from None
    provenance = {"imported_from": source, **({"source_names": renamed} if renamed else {})}
    result = {"path": args.output, "params": graph.num_params(), "macs": graph.total_macs(),
              "input_shape": list(graph.input_shape), "classes": graph.num_classes, "quantized": False,
              "source_names": renamed}
    if args.calibrate:
        from mcutrain.data import DatasetError, SpecError, load_dataset
        from mcutrain.engines import ptq
        try:
            ds = load_dataset(args.calibrate, sample_shape=tuple(graph.input_shape))
        except (DatasetError, SpecError) as e:
            raise UserError(str(e)) from None
        if ds.x_train.shape[1:] != graph.input_shape:
            raise UserError(f"dataset '{args.calibrate}' has samples of shape {ds.x_train.shape[1:]}, "
                            f"the model takes {graph.input_shape}")
        try:
            qm = ptq.quantize_model(graph, ds.x_train[:CALIBRATION_SAMPLES],
                                    rounding=args.rounding or "single")
            qm.save(args.output, {**provenance, "calibration": args.calibrate})
        except ValueError as e:
            raise UserError(f"cannot quantize the imported model: {e}") from None
        except OSError as e:
            raise UserError(f"cannot write '{args.output}': {e}") from None
        result["quantized"] = True
    else:
        try:
            io.save(args.output, graph, {"provenance": provenance})
        except (io.ModelFileError, OSError) as e:
            raise UserError(f"cannot write '{args.output}': {e}") from None
    if args.json:
        print_json(result)
    else:
        print(graph.summary())
        if renamed:   # the originals are not printed: they may hold control characters
            print(f"renamed {len(renamed)} layer(s) into mcutrain's naming rule; the file keeps the "
                  "original names (--trainable layers: takes either)")
        print(f"wrote {args.output}" + (" (float + int8)" if result["quantized"] else " (float)"))
    return 0


def _run_tflite(args: argparse.Namespace) -> int:
    """An int8 .tflite: kept as it is (its integers are the model), written as an int8 model file."""
    from mcutrain.interop import InteropError
    from mcutrain.interop.tflite_import import from_tflite

    for flag, value in (("--input-shape", args.input_shape), ("--calibrate", args.calibrate)):
        if value:
            raise UserError(f"{flag} does not apply to a .tflite model: it is int8 already, with its own "
                            "input shape and quantization")
    try:
        qm, renamed = from_tflite(args.onnx)
    except (InteropError, ImportError) as e:     # ImportError: the tflite package is missing
        raise UserError(str(e)) from None
    if args.name:
        from mcutrain.graph import name_problem
        if name_problem(args.name):
            raise UserError(f"--name {args.name!r} {name_problem(args.name)}")
        qm.graph.name = args.name
    try:
        qm.save(args.output)
    except (ValueError, OSError) as e:
        raise UserError(f"cannot write '{args.output}': {e}") from None
    g = qm.graph
    head = (qm.provenance.get("tflite") or {}).get("output", {}).get("softmax")
    result = {"path": args.output, "params": g.num_params(), "macs": g.total_macs(),
              "input_shape": list(g.input_shape), "classes": g.num_classes, "quantized": True,
              "source_names": renamed, "softmax_head": bool(head),
              "rounding": getattr(qm, "rounding", "single")}
    if args.json:
        print_json(result)
    else:
        print(g.summary())
        if renamed:
            print(f"renamed {len(renamed)} tensor(s) into mcutrain's naming rule; the file keeps the "
                  "original names (--trainable layers: takes either)")
        print(f"wrote {args.output} (int8, from TFLite" + (", SOFTMAX head kept)" if head else ")"))
    return 0
