"""The generated C library against TFLite Micro: the same int8 inputs, TFLM's logits, bit for bit.

The `tflm` benchmark's golden-engine rows say mcutrain's integer specification equals TFLM; these
rows say the C a user deploys does too. Each model's library (`export_library`, the model as
imported from its `.tflite`, `tflite` rounding) is built

- on the host (gcc -O2, reference loops and the DSP loops' portable emulation), fed the very
  inputs whose TFLM logits the golden engine is compared with (1,000 in the full run), and
- for three real boards of `targets.toml` under QEMU: rp2040 (Cortex-M0+, mps2-an385, reference
  kernels), nrf52840 (M4, mps2-an386, DSP kernels) and stm32f746 (M7, mps2-an500, DSP kernels),
  linked with the board's own RAM and Flash. A model that does not fit is said
  (`does_not_fit`) and built for the next bigger board (`BIGGER`), the generic core target last.

Under QEMU the instruction-counting plugin gives the exact instructions per inference. How many
inputs: an emulated M0+ runs the reference kernels at about 23 instructions per MAC and QEMU with
the counting plugin about 0.6 G instructions per second on this kind of machine, so the 7 M-MAC
person detector costs about 0.27 s per input. `qemu_inputs` gives every (model, board) run the
same work, `QEMU_MAC_BUDGET` MACs (about a minute on the M0+), within [`QEMU_MIN_INPUTS`,
`QEMU_MAX_INPUTS`]: ~210 inputs for the person detector, 1,000 for the small models.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mcutrain.bench.tflm_layers import agreement
from mcutrain.codegen.cross import build_mcu, run_mcu
from mcutrain.codegen.library import export_library
from mcutrain.mcu import LinkOverflowError
from mcutrain.mcu.hostbuild import build_host
from mcutrain.mcu.hostrun import run_host
from mcutrain.qmodel import QuantModel
from mcutrain.targets import get_target

HOST_KERNELS = ("ref", "dsp")
BOARD_RUNS = (("rp2040", "ref"), ("nrf52840", "dsp"), ("stm32f746", "dsp"))
BIGGER = {"rp2040": "cortex-m0plus", "nrf52840": "cortex-m4", "stm32f746": "imxrt1062",
          "imxrt1062": "cortex-m7"}
"""Where a model goes that does not link for a board: a bigger board of the same core, else the
generic core target (memories as large as the QEMU machine)."""
QEMU_MAC_BUDGET = 1_500_000_000
QEMU_MIN_INPUTS, QEMU_MAX_INPUTS = 100, 1000
HOST_TIMEOUT_S, QEMU_TIMEOUT_S = 600.0, 1800.0

COLUMNS = ["model", "target", "core", "kernels", "inputs", "logits_equal", "samples_equal", "max_diff",
           "instructions_per_inference", "instructions_per_mac", "flash_bytes", "ram_bytes", "does_not_fit"]


@dataclass(frozen=True)
class Reference:
    """One model as compared: the int8 model imported from its `.tflite`, int8 inputs (N, ...) and
    TFLM's logits (N, K) on them."""

    name: str
    qm: QuantModel
    x_q: np.ndarray
    logits: np.ndarray


def qemu_inputs(macs: int, available: int) -> int:
    """Inputs of one QEMU run: `QEMU_MAC_BUDGET` MACs' worth, clipped to the bounds and to `available`."""
    return int(min(available, max(QEMU_MIN_INPUTS, min(QEMU_MAX_INPUTS, QEMU_MAC_BUDGET // max(macs, 1)))))


def _row(ref: Reference, target: str, core: str, kernels: str, logits: np.ndarray) -> dict[str, Any]:
    n = len(logits)
    a = agreement(logits, ref.logits[:n])
    return {"model": ref.name, "target": target, "core": core, "kernels": kernels, "inputs": n,
            "logits_equal": a["logits_equal"], "samples_equal": a["samples_equal"], "max_diff": a["max_diff"],
            "macs": ref.qm.graph.total_macs()}


def host_row(ref: Reference, kernels: str, inputs: int) -> dict[str, Any]:
    """The library built by gcc (-O2) and run on `inputs` of the reference inputs."""
    with tempfile.TemporaryDirectory(prefix="mt-tflm-c-") as tmp:
        lib = export_library(ref.qm, Path(tmp) / "lib", kernels=kernels, provenance=f"tflm bench {ref.name}")
        exe = build_host(Path(tmp) / "lib", Path(tmp) / "harness", sanitize=False, kernels=kernels)
        logits, _ = run_host(exe, ref.x_q[:inputs], ref.qm.graph.num_classes, timeout=HOST_TIMEOUT_S)
    return {**_row(ref, "host", "host (gcc)", kernels, logits), "instructions_per_inference": None,
            "instructions_per_mac": None, "arena_bytes": lib.arena_bytes, "const_bytes": lib.const_bytes,
            "flash_bytes": None, "ram_bytes": None, "does_not_fit": []}


def board_row(ref: Reference, board: str, kernels: str, inputs: int) -> dict[str, Any]:
    """The library cross-built for `board` (or, when it does not link, the next of `BIGGER`) and
    run under QEMU on `inputs` of the reference inputs, instructions counted."""
    misses: list[str] = []
    with tempfile.TemporaryDirectory(prefix="mt-tflm-c-") as tmp:
        lib = export_library(ref.qm, Path(tmp) / "lib", kernels=kernels, provenance=f"tflm bench {ref.name}")
        name = board
        while True:
            target = get_target(name)
            try:
                b = build_mcu(Path(tmp) / "lib", target, Path(tmp) / "m.elf", kernels=kernels)
                break
            except LinkOverflowError:
                if name not in BIGGER:
                    raise
                misses.append(name)
                name = BIGGER[name]
        logits, prof = run_mcu(b.elf, target, ref.x_q[:inputs], ref.qm.graph.num_classes, Path(tmp) / "run",
                               timeout=QEMU_TIMEOUT_S)
    if prof.region is None:
        raise RuntimeError(f"{ref.name} on {target.name}: the instruction counter saw no inference region")
    per = prof.region.total / inputs
    return {**_row(ref, target.name, target.core, kernels, logits),
            "instructions_per_inference": round(per, 1),
            "instructions_per_mac": round(per / ref.qm.graph.total_macs(), 3),
            "arena_bytes": lib.arena_bytes, "const_bytes": lib.const_bytes,
            "flash_bytes": b.sizes.flash_bytes, "ram_bytes": b.sizes.ram_bytes, "does_not_fit": misses}


def c_library_rows(ref: Reference, host_inputs: int, qemu_inputs_n: int | None, log=print
                   ) -> list[dict[str, Any]]:
    """One row per host build (`HOST_KERNELS`) and, unless `qemu_inputs_n` is None, per board run
    (`BOARD_RUNS`); `qemu_inputs_n` 0 picks the count with `qemu_inputs`."""
    rows = [host_row(ref, k, min(host_inputs, len(ref.x_q))) for k in HOST_KERNELS]
    if qemu_inputs_n is not None:
        n = qemu_inputs_n or qemu_inputs(ref.qm.graph.total_macs(), len(ref.x_q))
        rows += [board_row(ref, board, k, min(n, len(ref.x_q))) for board, k in BOARD_RUNS]
    for r in rows:
        log(f"[tflm] C library {r['model']} {r['target']} {r['kernels']}: {r['inputs']} inputs, "
            f"logits_equal {r['logits_equal']:.4f}, max_diff {r['max_diff']}, "
            f"instructions {r['instructions_per_inference']}")
    return rows
