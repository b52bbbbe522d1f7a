"""Benchmark `tflm`: mcutrain's int8 inference against TensorFlow Lite Micro's own interpreter.

For each model (the zoo architectures and the MobileNetV1-0.25 person detector of TFLM's
examples, He-initialized and PTQ-calibrated on uniform random inputs so every tensor carries both
signs): export it as a `.tflite`, import that file back (what a TFLM user's model goes through),
run TFLM's interpreter (the `tflite-micro` package: its reference kernels) and mcutrain's golden
engine on the same int8 inputs, and report the fraction of bit-identical logits, the samples whose
logits are all identical, the largest difference and the argmax agreement, in both rounding modes.
A trained round trip follows: a digits model imported from `.tflite`, adapted with ZO in the
simulator, exported back; its test accuracy as `mcutrain` evaluates it and as TFLM runs it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from mcutrain import zoo
from mcutrain.bench import files
from mcutrain.engines import int_engine, ptq
from mcutrain.qmodel import QuantModel

MODELS = {"digits-cnn": (8, 8, 1), "small-cnn": (28, 28, 1), "mnist1d-cnn": (1, 40, 1),
          "mcunet-5fps": (64, 64, 3), "mobilenet-v1-0.25": (96, 96, 1)}
QUICK_MODELS = {"digits-cnn": (8, 8, 1), "mobilenet-v1-0.25": (48, 48, 1)}
SAMPLES, QUICK_SAMPLES = 1000, 100


def _interpreter(data: bytes):
    from tflite_micro.python.tflite_micro import runtime  # the tests' dev extra
    return runtime.Interpreter.from_bytes(data)


def tflm_outputs(data: bytes, x_q: np.ndarray) -> np.ndarray:
    """TFLM's int8 outputs for each int8 sample of `x_q` (one invoke per sample, as on a device)."""
    interp = _interpreter(data)
    out = []
    for i in range(len(x_q)):
        interp.set_input(x_q[i:i + 1], 0)
        interp.invoke()
        out.append(np.asarray(interp.get_output(0)).reshape(-1))
    return np.stack(out)


def agreement(ours: np.ndarray, ref: np.ndarray) -> dict[str, float]:
    """How far two (N, K) int8 logit arrays agree."""
    ours, ref = ours.reshape(len(ref), -1).astype(np.int32), ref.reshape(len(ref), -1).astype(np.int32)
    return {"logits_equal": float(np.mean(ours == ref)),
            "samples_equal": float(np.mean(np.all(ours == ref, axis=1))),
            "max_diff": int(np.abs(ours - ref).max()),
            "argmax_equal": float(np.mean(ours.argmax(1) == ref.argmax(1)))}


def model_row(arch: str, shape: tuple[int, ...], samples: int) -> dict[str, Any]:
    """One model: its .tflite through TFLM and through mcutrain in each rounding mode."""
    from dataclasses import replace

    from mcutrain.interop.tflite_export import to_tflite
    from mcutrain.interop.tflite_import import from_tflite_bytes

    g = zoo.build(arch, 2 if arch == "mobilenet-v1-0.25" else 10, shape, seed=0)
    x = np.random.default_rng(0).uniform(-1, 1, (256, *shape)).astype(np.float32)
    data = to_tflite(ptq.quantize_model(g, x))
    qm, _ = from_tflite_bytes(data)
    x_q = np.random.default_rng(7).integers(-128, 128, (samples, *qm.graph.input_shape)).astype(np.int8)
    ref = tflm_outputs(data, x_q)
    row: dict[str, Any] = {"model": arch, "input": "x".join(map(str, shape)), "samples": samples,
                           "macs": g.total_macs()}
    for mode in ("tflite", "single"):
        a = agreement(int_engine.forward(replace(qm, rounding=mode), x_q), ref)
        row.update({f"{mode}_{k}": v for k, v in a.items()})
    return row


def trained_round_trip(quick: bool) -> dict[str, Any]:
    """digits-cnn as a TFLM user has it (.tflite), adapted with ZO, back out: accuracies compared."""
    import mcutrain
    from mcutrain.data import load_dataset
    from mcutrain.interop.tflite_export import to_tflite
    from mcutrain.interop.tflite_import import from_tflite_bytes
    from mcutrain.methods.float import train as float_train

    ds = load_dataset("digits", seed=0)
    g = zoo.build("digits-cnn", ds.num_classes, ds.shape, seed=0)
    float_train(g, ds.x_train, ds.y_train, epochs=2 if quick else 5, batch=32, lr=1e-2, seed=0,
                progress=False)
    data = to_tflite(ptq.quantize_model(g, ds.x_train[:256]))
    imported, _ = from_tflite_bytes(data)
    before = mcutrain.evaluate(imported, "digits")
    r = mcutrain.train(imported, "digits-c:stripe:5", method="zo", epochs=1 if quick else 3, lr=0.05,
                       queries=10, progress=False)
    trained: QuantModel = r.model
    back = to_tflite(trained)
    ds_c = load_dataset("digits-c:stripe:5", seed=0)
    ours = mcutrain.evaluate(trained, "digits-c:stripe:5")
    tflm = tflm_outputs(back, int_engine.quantize_input(trained, ds_c.x_test))
    return {"model": "digits-cnn (.tflite in, zo on digits-c:stripe:5, .tflite out)",
            "rounding": trained.rounding, "accuracy_before_clean": before,
            "accuracy_before": r.result["accuracy_before"], "accuracy_after_mcutrain": ours,
            "accuracy_after_tflm": float(np.mean(tflm.argmax(1) == ds_c.y_test)),
            "bytes": len(back)}


def run_tflm(work: Path, results: Path, quick: bool, log, docs: Path) -> None:
    """int8 inference bit for bit against TFLM's interpreter, both rounding modes; a trained round trip."""
    rows = []
    for arch, shape in (QUICK_MODELS if quick else MODELS).items():
        rows.append(model_row(arch, shape, QUICK_SAMPLES if quick else SAMPLES))
        log(f"[tflm] {rows[-1]}")
        files.write_results(results, "tflm", rows, quick, complete=False)
    trip = trained_round_trip(quick)
    log(f"[tflm] trained round trip: {trip}")
    files.write_results(results, "tflm", rows, quick, complete=True, trained_round_trip=trip)
    if not quick:
        table = files.markdown_table(
            rows, ["model", "input", "samples", "tflite_logits_equal", "tflite_max_diff",
                   "single_logits_equal", "single_samples_equal", "single_max_diff", "single_argmax_equal"],
            {k: ".4f" for k in ("tflite_logits_equal", "single_logits_equal", "single_samples_equal",
                                "single_argmax_equal")})
        note = ("Each model exported as `.tflite`, imported back, then run by TFLM's interpreter "
                "(`tflite-micro`, reference kernels) and by mcutrain's golden engine on the same random "
                "int8 inputs. `tflite` rounding is what an imported model runs with; `single` is "
                "mcutrain's default for its own models (docs/integer-semantics.md 6.1.1).\n\n")
        trip_md = (f"\n\nTrained round trip: {trip['model']}: accuracy {trip['accuracy_before']:.4f} -> "
                   f"{trip['accuracy_after_mcutrain']:.4f} by `mcutrain eval`, "
                   f"{trip['accuracy_after_tflm']:.4f} by TFLM on the exported file.")
        files.update_docs(docs, "tflm", note + table + trip_md)


def register(add) -> None:
    add("tflm", run_tflm)
