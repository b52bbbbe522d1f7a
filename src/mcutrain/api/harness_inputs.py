"""`export --inputs SPEC`: the files an exported library's harnesses read, and what they must print.

A firmware engineer porting a library wants to know, on their own board or host, that it computes
what mcutrain computes. The export therefore writes, beside the drivers in `harness/`:

    inputs.bin           int8 [N, MODEL_INPUT_SIZE]: the first N test samples, quantized with the
                         model's input qparams (what `model_harness INPUTS LOGITS` reads)
    expected_logits.bin  int8 [N, MODEL_OUTPUT_SIZE]: the golden engine's logits of those samples;
                         `model_harness` must write exactly these bytes (`cmp` them)
    train.bin            training libraries: `TRAIN_STEPS` batches of the training split in the
                         data layout of `model_train_harness` (mcu/train_data.py), with `--lr`

The layouts are in docs/c-api.md ("Harness files"). FQT libraries are not covered yet: their
predict starts from the method's own state rather than the int8 model, so the expected logits
would need the simulator's forward (`mcutrain run` checks FQT libraries end to end).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np

from mcutrain.api.data import check_fits, dataset_of
from mcutrain.data import Dataset
from mcutrain.engines import int_engine
from mcutrain.errors import UserError
from mcutrain.io import atomic_write_bytes
from mcutrain.mcu.train_data import write_train_data
from mcutrain.qmodel import QuantModel

INPUT_SAMPLES = 16
"""Test samples written to inputs.bin: enough to see a wrong port, small enough for any board's file."""

TRAIN_STEPS = 2
"""Batches written to train.bin."""

INPUTS, EXPECTED, TRAIN = "harness/inputs.bin", "harness/expected_logits.bin", "harness/train.bin"


def check_inputs_method(method: str) -> None:
    """Refuse `--inputs` for a method it cannot give expected outputs for, before any work."""
    if method == "fqt":
        raise UserError("--inputs writes harness files for inference, zo and bp-qas libraries; an fqt "
                        "library's first predict is the method's own forward, so check it with "
                        "'mcutrain run ... --method fqt' instead, or leave --inputs out")


def inputs_dataset(args: argparse.Namespace, qm: QuantModel) -> Dataset:
    """The dataset of `--inputs`, checked against the model before the library is written."""
    ds = dataset_of(args.inputs, args.seed, sample_shape=tuple(qm.graph.input_shape))
    check_fits(qm.graph, ds)
    return ds


def write_harness_inputs(args: argparse.Namespace, qm: QuantModel, ds: Dataset, out_dir: str | Path,
                         training: bool) -> dict[str, Any]:
    """Write the harness files of `ds` (`inputs_dataset`) for `qm` into `out_dir`; the `--json` part."""
    out = Path(out_dir)
    x_q = int_engine.quantize_input(qm, ds.x_test[:INPUT_SAMPLES])
    logits = int_engine.run(qm, x_q)[qm.graph.output].astype(np.int8).reshape(len(x_q), -1)
    for rel, arr in ((INPUTS, x_q), (EXPECTED, logits)):
        data = np.ascontiguousarray(arr, np.int8).tobytes()
        atomic_write_bytes(out / rel, lambda f, data=data: f.write(data))
    result: dict[str, Any] = {"dataset": args.inputs, "samples": len(x_q), "inputs": INPUTS,
                              "expected_logits": EXPECTED}
    if training:
        b = args.batch
        if len(ds.x_train) < b * TRAIN_STEPS:
            raise UserError(f"--inputs {args.inputs}: {len(ds.x_train)} training samples, fewer than "
                            f"{TRAIN_STEPS} batches of {b}; use a larger dataset or a smaller --batch")
        x_t = int_engine.quantize_input(qm, ds.x_train[:b * TRAIN_STEPS])
        batches = [(x_t[i * b:(i + 1) * b], ds.y_train[i * b:(i + 1) * b]) for i in range(TRAIN_STEPS)]
        write_train_data(out / TRAIN, batches, args.lr)
        result.update({"train": TRAIN, "steps": TRAIN_STEPS, "lr": args.lr})
    return result


def harness_files(result: dict[str, Any]) -> list[str]:
    """The files `write_harness_inputs` wrote, from its result."""
    return [result[k] for k in ("inputs", "expected_logits", "train") if k in result]
