"""The trained round trip of `bench tflm`, one row per method: a deployed `.tflite` adapted and back.

The path a TFLM user takes (issue #17, item 7), through the commands as they type them, on one
`.tflite` file (a digits model trained in float and PTQ'd, as a converter leaves it):

1. `mcutrain train model.tflite --method M ... -o trained.npz` adapts it in the simulator;
2. `mcutrain plan model.tflite --method M --target BOARD` says whether its training step fits
   each board of `BOARDS`;
3. `mcutrain run model.tflite --method M --target cortex-m4 --dump DIR` runs the C step in QEMU
   and checks it against the simulator bit for bit (losses, logits, the whole state);
4. `mcutrain export trained.npz --format tflite` writes the trained model back, and
   `mcutrain state-to-model DIR/build/lib DIR/state.bin -o device.tflite` turns the device's saved
   state into one;
5. TFLM's interpreter runs each `.tflite` on the test set: its int8 logits must equal mcutrain's
   golden engine's bit for bit, and its accuracy the `mcutrain eval` figure exactly.

Methods (`METHODS`): fqt int8 on the last layers and on all, zo, bp-qas.
"""

from __future__ import annotations

import contextlib
import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mcutrain.bench.tflm_layers import tflm_outputs
from mcutrain.engines import int_engine
from mcutrain.interop.tflite_import import from_tflite_bytes

METHODS: dict[str, tuple[tuple[str, ...], str]] = {
    "fqt-int8-last": (("--method", "fqt", "--precision", "int8", "--trainable", "last:2"), "0.05"),
    "fqt-int8-all": (("--method", "fqt", "--precision", "int8", "--trainable", "all"), "0.003"),
    "zo": (("--method", "zo", "--queries", "10"), "0.05"),
    "bp-qas": (("--method", "bp-qas", "--trainable", "all"), "0.01"),
}
"""Each method's options (the same for train, plan and run) and learning rate (train and run)."""
BOARDS = ("nrf52840", "stm32f746")
CORE = "cortex-m4"


@dataclass(frozen=True)
class TripSettings:
    """How long each method trains in the simulator and how many steps QEMU checks."""

    epochs: int
    run_steps: int
    run_batch: int


FULL_TRIP = TripSettings(epochs=3, run_steps=4, run_batch=4)
QUICK_TRIP = TripSettings(epochs=1, run_steps=2, run_batch=2)


class CommandFailed(RuntimeError):
    """An mcutrain command of the round trip exited non-zero."""


def cli_json(*argv: str | Path) -> dict[str, Any]:
    """Run `mcutrain ARGV --json` in this process; its JSON result (CommandFailed on a non-zero exit)."""
    from mcutrain.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main([str(a) for a in argv] + ["--json"])
    if code != 0:
        raise CommandFailed(f"mcutrain {' '.join(map(str, argv))} exited {code}")
    return json.loads(out.getvalue())


def tflm_check(path: Path, dataset: str) -> dict[str, Any]:
    """A `.tflite` through `mcutrain eval` and through TFLM on the test set of `dataset`."""
    from mcutrain.data import load_dataset

    data = path.read_bytes()
    qm, _ = from_tflite_bytes(data)
    ds = load_dataset(dataset, seed=0)
    x_q = int_engine.quantize_input(qm, ds.x_test)
    ref = tflm_outputs(data, x_q).reshape(len(x_q), -1)
    ours = int_engine.forward(qm, x_q).reshape(len(x_q), -1)
    acc_tflm = float(np.mean(ref.argmax(1) == ds.y_test))
    acc_eval = cli_json("eval", path, "--dataset", dataset)["accuracy"]
    return {"accuracy_eval": acc_eval, "accuracy_tflm": acc_tflm, "accuracy_identical": acc_eval == acc_tflm,
            "logits_identical": bool(np.array_equal(ours, ref)), "rounding": qm.rounding}


def method_row(model: Path, name: str, dataset: str, st: TripSettings, work: Path) -> dict[str, Any]:
    """One method's round trip from `model` (a .tflite), every step through the CLI."""
    opts, lr = METHODS[name]
    d = work / name
    d.mkdir(parents=True, exist_ok=True)
    tr = cli_json("train", model, "--dataset", dataset, *opts, "--lr", lr, "--epochs", str(st.epochs),
                  "-o", d / "trained.npz")
    row: dict[str, Any] = {"method": name, "options": " ".join(opts), "lr": float(lr), "epochs": st.epochs,
                           "accuracy_before": tr["accuracy_before"], "accuracy_after": tr["accuracy_after"]}
    for board in BOARDS:
        p = cli_json("plan", model, *opts, "--batch", str(st.run_batch), "--target", board)   # as run
        row.update({f"{board}_fits": p["fits"], f"{board}_ram_bytes": p["ram_bytes"],
                    f"{board}_flash_bytes": p["flash_bytes"]})
    run = cli_json("run", model, "--dataset", dataset, *opts, "--lr", lr, "--batch", str(st.run_batch),
                   "--steps", str(st.run_steps), "--target", CORE, "--dump", d / "run")
    row.update({"run_core": CORE, "run_steps": run["steps"], "run_batch": st.run_batch,
                "run_bit_exact": run["bit_exact"], "run_instructions_per_step": run["instructions_per_step"]})
    cli_json("export", d / "trained.npz", "--format", "tflite", "-o", d / "trained.tflite")
    row.update({f"exported_{k}": v for k, v in tflm_check(d / "trained.tflite", dataset).items()})
    cli_json("state-to-model", d / "run" / "build" / "lib", d / "run" / "state.bin", "-o",
             d / "device.tflite")
    row.update({f"device_{k}": v for k, v in tflm_check(d / "device.tflite", dataset).items()})
    return row


def method_rows(model: Path, dataset: str, quick: bool, work: Path,
                methods: tuple[str, ...] = tuple(METHODS)) -> list[dict[str, Any]]:
    """The round trip of every method in `methods` from the `.tflite` at `model`."""
    st = QUICK_TRIP if quick else FULL_TRIP
    return [method_row(model, name, dataset, st, work) for name in methods]


COLUMNS = ["method", "accuracy_before", "accuracy_after", "nrf52840_fits", "stm32f746_fits", "run_bit_exact",
           "exported_accuracy_eval", "exported_accuracy_tflm", "exported_logits_identical",
           "device_accuracy_eval", "device_accuracy_tflm", "device_logits_identical"]
FORMATS = {c: ".4f" for c in COLUMNS if "accuracy" in c}
