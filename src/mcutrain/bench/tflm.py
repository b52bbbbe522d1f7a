"""Benchmark `tflm`: mcutrain's int8 inference against TensorFlow Lite Micro's own interpreter.

For each model (the zoo architectures and the MobileNetV1-0.25 person detector of TFLM's
examples, He-initialized and PTQ-calibrated on uniform random inputs so every tensor carries both
signs): export it as a `.tflite`, import that file back (what a TFLM user's model goes through),
run TFLM's interpreter (the `tflite-micro` package: its reference kernels) and mcutrain's golden
engine on the same int8 inputs, and report the fraction of bit-identical logits, the samples whose
logits are all identical, the largest difference and the argmax agreement, in both rounding modes.
The three models built in PyTorch as TFLM users build them (`tflm_models`: a MobileNetV1-0.25
person detector, a DS-CNN keyword spotter, a 1-D IMU net) are also compared layer by layer, every
layer's int8 output tensor as TFLM's interpreter holds it after the invoke (`tflm_layers`).
Every model's generated C library is compared with TFLM on the same inputs too, on the host and
under QEMU on a Cortex-M0+, M4 and M7 board (`tflm_c`: JSON key `c_library`, one row per model and
target). A trained round trip follows: a digits model imported from `.tflite`, adapted with ZO in
the simulator, exported back; its test accuracy as `mcutrain` evaluates it and as TFLM runs it. Then
the same file per method through the commands (`tflm_trained`: fqt int8 last layers and all, zo,
bp-qas; train, plan, run in QEMU, export and state-to-model back to `.tflite`, TFLM).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np

from mcutrain import zoo
from mcutrain.bench import files, tflm_c, tflm_models, tflm_trained
from mcutrain.bench.tflm_c import Reference, c_library_rows
from mcutrain.bench.tflm_layers import MODES, agreement, compare_layers, layer_rows, tflm_outputs
from mcutrain.engines import int_engine, ptq
from mcutrain.interop.tflite_export import to_tflite, to_tflite_mapped
from mcutrain.interop.tflite_import import from_tflite_bytes
from mcutrain.io import atomic_write_bytes
from mcutrain.qmodel import QuantModel

MODELS = {"digits-cnn": (8, 8, 1), "small-cnn": (28, 28, 1), "mnist1d-cnn": (1, 40, 1),
          "mcunet-5fps": (64, 64, 3), "mobilenet-v1-0.25": (96, 96, 1)}
QUICK_MODELS = {"digits-cnn": (8, 8, 1), "mobilenet-v1-0.25": (48, 48, 1)}
USER_MODELS = tuple(tflm_models.RECIPES)
QUICK_USER_MODELS = ("imu-cnn1d",)
SAMPLES, QUICK_SAMPLES = 1000, 100
QUICK_C_HOST_INPUTS, QUICK_C_QEMU_INPUTS = 20, 4
QUICK_C_QEMU_MODEL = "imu-cnn1d"
"""The quick run's generated-C rows: every model on the host, the smallest on each board."""


def model_row(arch: str, shape: tuple[int, ...], samples: int) -> tuple[dict[str, Any], Reference]:
    """One model: its .tflite through TFLM and through mcutrain in each rounding mode; the row and
    what was compared (for the generated C's rows)."""
    g = zoo.build(arch, 2 if arch == "mobilenet-v1-0.25" else 10, shape, seed=0)
    x = np.random.default_rng(0).uniform(-1, 1, (256, *shape)).astype(np.float32)
    data = to_tflite(ptq.quantize_model(g, x))
    qm, _ = from_tflite_bytes(data)
    x_q = np.random.default_rng(7).integers(-128, 128, (samples, *qm.graph.input_shape)).astype(np.int8)
    ref = tflm_outputs(data, x_q)
    row: dict[str, Any] = {"model": arch, "input": "x".join(map(str, shape)), "samples": samples,
                           "macs": g.total_macs(), "source": "zoo"}
    for mode in ("tflite", "single"):
        a = agreement(int_engine.forward(dataclasses.replace(qm, rounding=mode), x_q), ref)
        row.update({f"{mode}_{k}": v for k, v in a.items()})
    return row, Reference(arch, qm, x_q, ref.reshape(samples, -1))


def user_model_rows(name: str, samples: int) -> tuple[dict[str, Any], list[dict[str, Any]], Reference]:
    """A PyTorch-built model (`tflm_models`): its logits row (the keys of `model_row`), one row per
    layer, every layer read from TFLM's interpreter in the run whose logits are compared, and what
    was compared."""
    m = tflm_models.build(name)
    qm, _ = from_tflite_bytes(m.tflite)
    data, tensors = to_tflite_mapped(qm)
    x_q = np.random.default_rng(7).integers(-128, 128, (samples, *qm.graph.input_shape)).astype(np.int8)
    ref, layers = compare_layers(qm, data, tensors, x_q)
    row: dict[str, Any] = {"model": name, "input": "x".join(map(str, m.graph.input_shape)),
                           "samples": samples, "macs": m.graph.total_macs(), "source": "pytorch",
                           "round_trip_identical": data == m.tflite, "layers_compared": len(layers)}
    for mode in MODES:
        a = agreement(int_engine.forward(dataclasses.replace(qm, rounding=mode), x_q), ref)
        row.update({f"{mode}_{k}": v for k, v in a.items()})
    per_layer = layer_rows(name, layers)
    for key in (f"{mode}_{way}" for mode in MODES for way in ("chained", "isolated")):
        row[f"{key}_layers_min_equal"] = min(r[f"{key}_equal"] for r in per_layer)
        row[f"{key}_layers_max_diff"] = max(r[f"{key}_max_diff"] for r in per_layer)
    return row, per_layer, Reference(name, qm, x_q, ref.reshape(samples, -1))


def trained_round_trip(quick: bool, work: Path) -> dict[str, Any]:
    """digits-cnn as a TFLM user has it (.tflite), adapted with ZO, back out: accuracies compared;
    then, under `methods`, the same file through every method's CLI round trip (`tflm_trained`)."""
    import mcutrain
    from mcutrain.data import load_dataset
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
    work.mkdir(parents=True, exist_ok=True)
    model = work / "digits-cnn.tflite"
    atomic_write_bytes(model, lambda f: f.write(data))
    return {"model": "digits-cnn (.tflite in, zo on digits-c:stripe:5, .tflite out)",
            "rounding": trained.rounding, "accuracy_before_clean": before,
            "accuracy_before": r.result["accuracy_before"], "accuracy_after_mcutrain": ours,
            "accuracy_after_tflm": float(np.mean(tflm.argmax(1) == ds_c.y_test)),
            "bytes": len(back), "methods": tflm_trained.method_rows(model, "digits-c:stripe:5", quick, work)}


LOGIT_COLUMNS = ["model", "input", "samples", "tflite_logits_equal", "tflite_max_diff", "single_logits_equal",
                 "single_samples_equal", "single_max_diff", "single_argmax_equal"]
LAYER_SUMMARY_COLUMNS = ["model", "layers_compared", "tflite_chained_layers_min_equal",
                         "tflite_chained_layers_max_diff", "single_isolated_layers_min_equal",
                         "single_isolated_layers_max_diff", "single_chained_layers_min_equal",
                         "single_chained_layers_max_diff"]
LAYER_COLUMNS = ["layer", "op", "shape", "tflite_chained_equal", "tflite_isolated_equal",
                 "single_isolated_equal", "single_isolated_max_diff", "single_chained_equal",
                 "single_chained_max_diff"]


def c_library_block(c_rows: list[dict[str, Any]]) -> str:
    """The generated C library's rows: host and the three boards under QEMU, against TFLM."""
    note = ("\n\nThe generated C library (`mcutrain export`, the model as imported from its `.tflite`) "
            "against TFLM on the same int8 inputs: on the host (gcc -O2; `dsp` is the DSP loops' portable "
            "emulation) and under QEMU on rp2040 (Cortex-M0+, mps2-an385, reference kernels), nrf52840 "
            "(M4, mps2-an386, DSP kernels) and stm32f746 (M7, mps2-an500, DSP kernels), linked with the "
            "board's RAM and Flash; instructions per inference counted exactly by the QEMU plugin. QEMU "
            f"runs take {tflm_c.QEMU_MAC_BUDGET / 1e9:g} G MACs of inputs per model and board (about a "
            f"minute on the emulated M0+), between {tflm_c.QEMU_MIN_INPUTS} and {tflm_c.QEMU_MAX_INPUTS} "
            "inputs (`mcutrain.bench.tflm_c`). `does_not_fit`: boards the model did not link for; the "
            "row is then the next bigger target.\n\n")
    shown = [{**r, "does_not_fit": ", ".join(r["does_not_fit"]) or None} for r in c_rows]
    fmt = {**_fractions(tflm_c.COLUMNS), "instructions_per_inference": ",.0f", "instructions_per_mac": ".3f",
           "flash_bytes": ",d", "ram_bytes": ",d", "inputs": ",d"}
    return note + files.markdown_table(shown, tflm_c.COLUMNS, fmt)


def _fractions(columns: list[str]) -> dict[str, str]:
    return {c: ".4f" for c in columns if c.endswith("_equal")}


def docs_block(rows: list[dict[str, Any]], layers: list[dict[str, Any]], trip: dict[str, Any],
               c_rows: list[dict[str, Any]]) -> str:
    """The `tflm` block of docs/benchmarks.md: logits of every model, layers of the PyTorch-built ones."""
    note = ("Each model exported as `.tflite`, imported back, then run by TFLM's interpreter "
            "(`tflite-micro`, reference kernels) and by mcutrain's golden engine on the same random "
            "int8 inputs. `tflite` rounding is what an imported model runs with; `single` is "
            "mcutrain's default for its own models (docs/integer-semantics.md 6.1.1). The last three "
            "models are built in PyTorch as TFLM users build them (`mcutrain.bench.tflm_models`: random "
            "weights, BatchNorm statistics from synthetic data) and imported with `from_torch`.\n\n")
    table = files.markdown_table(rows, LOGIT_COLUMNS, _fractions(LOGIT_COLUMNS))
    user = [r for r in rows if r.get("source") == "pytorch"]
    layer_note = ("\n\nLayer by layer (the PyTorch-built models): every layer's int8 output as TFLM's "
                  "interpreter holds it after the invoke (`kPreserveAllTensors`, `GetTensor`), compared "
                  "element by element. *chained*: mcutrain runs the whole model from the same input; "
                  "*isolated*: mcutrain runs the layer alone on TFLM's own input tensors (the kernel's "
                  "rounding without the compounding). Smallest fraction of bit-identical elements over "
                  "the layers, and the largest difference:\n\n")
    summary = files.markdown_table(user, LAYER_SUMMARY_COLUMNS, _fractions(LAYER_SUMMARY_COLUMNS))
    per_layer = ""
    for r in user:
        mine = [lay for lay in layers if lay["model"] == r["model"]]
        per_layer += (f"\n\n{r['model']}, per layer:\n\n"
                      + files.markdown_table(mine, LAYER_COLUMNS, _fractions(LAYER_COLUMNS)))
    trip_md = (f"\n\nTrained round trip: {trip['model']}: accuracy {trip['accuracy_before']:.4f} -> "
               f"{trip['accuracy_after_mcutrain']:.4f} by `mcutrain eval`, "
               f"{trip['accuracy_after_tflm']:.4f} by TFLM on the exported file.")
    methods_md = ("\n\nThe same `.tflite` per method, every step a command (`mcutrain.bench.tflm_trained`): "
                  "`train -o` in the simulator, `plan` on the boards (at the run's batch), `run` on "
                  f"{tflm_trained.CORE} in QEMU (bit for bit against the simulator), `export --format "
                  "tflite` of the trained model (*exported*) and `state-to-model` of the device's state "
                  "after the run's steps (*device*), each run by TFLM on the test set: accuracy by "
                  "`mcutrain eval` and by TFLM, and whether every int8 logit is identical.\n\n"
                  + files.markdown_table(trip["methods"], tflm_trained.COLUMNS, tflm_trained.FORMATS))
    return note + table + layer_note + summary + per_layer + trip_md + methods_md + c_library_block(c_rows)


def run_tflm(work: Path, results: Path, quick: bool, log, docs: Path) -> None:
    """int8 inference bit for bit against TFLM's interpreter, both rounding modes, every layer of the
    PyTorch-built models; a trained round trip."""
    rows: list[dict[str, Any]] = []
    layers: list[dict[str, Any]] = []
    c_rows: list[dict[str, Any]] = []
    samples = QUICK_SAMPLES if quick else SAMPLES

    def c_library(ref: Reference) -> None:
        if quick:
            qemu = QUICK_C_QEMU_INPUTS if ref.name == QUICK_C_QEMU_MODEL else None
            c_rows.extend(c_library_rows(ref, QUICK_C_HOST_INPUTS, qemu, log))
        else:
            c_rows.extend(c_library_rows(ref, samples, 0, log))
        files.write_results(results, "tflm", rows, quick, complete=False, layers=layers, c_library=c_rows)

    for arch, shape in (QUICK_MODELS if quick else MODELS).items():
        row, ref = model_row(arch, shape, samples)
        rows.append(row)
        log(f"[tflm] {row}")
        c_library(ref)
    for name in QUICK_USER_MODELS if quick else USER_MODELS:
        row, per_layer, ref = user_model_rows(name, samples)
        rows.append(row)
        layers += per_layer
        log(f"[tflm] {row}")
        c_library(ref)
    trip = trained_round_trip(quick, Path(work) / ("tflm-trained.quick" if quick else "tflm-trained"))
    log(f"[tflm] trained round trip: {trip}")
    files.write_results(results, "tflm", rows, quick, complete=True, layers=layers, trained_round_trip=trip,
                        c_library=c_rows)
    if not quick:
        files.update_docs(docs, "tflm", docs_block(rows, layers, trip, c_rows))


def register(add) -> None:
    add("tflm", run_tflm)
