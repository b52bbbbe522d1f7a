"""`mcutrain run`: cross-build the C library for a Cortex-M core, run it in QEMU, compare with the simulator.

`--method none`: N test samples go to the emulated MCU as a file (semihosting); the int8 logits
it writes back must equal the golden engine's bit for bit. `--method zo | bp-qas | fqt`: N training
steps on batches of the training set; after every step the losses, logits, every trainable
weight and bias and the RNG state of the C library must equal the simulated method's (fqt: also
every dynamic range, weight scale, standardization statistic and bias scale of its state).
Instructions are counted exactly, inside the inference or training-step calls only (never file
I/O), and turned into an estimated cycle count at the target's clock with the instruction-mix
model of `mcutrain.mcu.cycles` (an estimate).

The board's budget is the library's, as `mcutrain plan` accounts it: a library the planner says
does not fit --target is refused (unless --allow-overflow), and the harness's own buffers (its
data, newlib's stdio and 8 KB heap) are kept out of it, linked into the emulator's memory; the
output gives the library's RAM and Flash apart from the harness's.

Examples:
    mcutrain run --arch digits-cnn --init random --seed 0 --dataset digits --method none \\
        --steps 8 --target cortex-m4 --dump out --json
    mcutrain run --arch digits-cnn --init random --seed 0 --dataset digits --method zo \\
        --batch 4 --steps 4 --target cortex-m4 --dump out --json
    mcutrain run model.npz --dataset digits --method bp-qas --batch 4 --steps 3 --target nrf52840
    mcutrain run --arch digits-cnn --init random --seed 0 --dataset digits --method fqt \\
        --precision int8 --trainable all --steps 4 --target cortex-m4 --dump out --json
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np

from mcutrain.api.mcu_run import json_result, run_args
from mcutrain.cli import print_json
from mcutrain.commands._outputs import check_output
from mcutrain.commands.export import add_model_args, resolve_options
from mcutrain.io import atomic_write_bytes
from mcutrain.methods import factory
from mcutrain.options import positive_int


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "run", help="build for a Cortex-M core, run in QEMU, compare with the simulator",
        description=__doc__.split("\n\n")[0], epilog="examples:\n" + __doc__.split("Examples:\n")[1],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    add_model_args(p)
    factory.add_options(p.add_argument_group("training (--method zo | bp-qas | fqt)"), "run")
    p.add_argument("--dataset", required=True, help="dataset spec, data.npz or KIND:PATH; inference: the "
                   "first --steps test samples; training: the first --steps x --batch training samples")
    p.add_argument("--steps", type=positive_int, default=8,
                   help="samples (inference) or training steps to run (default 8)")
    p.add_argument("--dump", metavar="DIR",
                   help="write sim.npz and mcu.npz (inference: 'logits'; training: every trainable tensor "
                        "after the last step and 'losses' per step; and state.bin, the device state for "
                        "mcutrain state-to-model DIR/build/lib DIR/state.bin) and keep the build here")
    p.add_argument("--allow-overflow", action="store_true",
                   help="run even when the planner says the library does not fit --target (the emulator "
                        "has the room; by default refused, with the breakdown and what to try)")
    p.add_argument("--json", action="store_true", help="print the result as JSON on stdout")
    p.set_defaults(func=run)


def save_npz(path: Path, **arrays: np.ndarray) -> None:
    """Write `arrays` to `path` as one .npz, atomically (a reader never sees half a file)."""
    atomic_write_bytes(path, lambda f: np.savez(f, **arrays))


def run_in_work_dir(args: argparse.Namespace) -> dict[str, Any]:
    """The run in `--dump DIR/build` (kept, with sim.npz and mcu.npz beside it) or a private temporary dir."""
    if not args.dump:
        from mcutrain.contain import private_dir  # removed on Ctrl-C and SIGTERM too

        with private_dir("mcutrain-run-") as tmp:
            return run_args(args, tmp)
    work = Path(args.dump)
    work.mkdir(parents=True, exist_ok=True)
    r = run_args(args, work / "build")
    if args.method == "none":
        save_npz(work / "sim.npz", logits=r["logits_sim"])
        save_npz(work / "mcu.npz", logits=r["logits_mcu"])
    else:
        save_npz(work / "sim.npz", **r["dump_sim"])
        save_npz(work / "mcu.npz", **r["dump_mcu"])
        blob = r["state_blob"]   # what model_save_state wrote after the last step: state-to-model's input
        atomic_write_bytes(work / "state.bin", lambda f: f.write(blob))
    return r


def run(args: argparse.Namespace) -> int:
    check_output(args.dump, "--dump", directory=True)
    resolve_options(args, "run")
    args.progress = None        # its stages on stderr: a bar on a terminal, plain lines elsewhere
    r = run_in_work_dir(args)
    if args.json:
        print_json(json_result(r, args))
    if args.method != "none":
        return report_training(r, args)
    if not args.json:
        top = ", ".join(f"{k} {v:,.0f}" for k, v in list(r["per_function"].items())[:5])
        print(f"{r['target']} ({r['core']}, {r['kernels']} kernels), {r['steps']} samples: "
              f"{'bit-exact' if r['bit_exact'] else 'MISMATCH'} with the simulator\n"
              f"per inference: {r['instructions_per_step']:,.0f} instructions, {r['macs_per_step']:,} MACs "
              f"({r['instructions_per_mac']} instructions/MAC), "
              f"est. {r['est_cycles_per_step']:,.0f} cycles = {r['est_ms_per_step']:.3f} ms (estimate)\n"
              f"{memory_lines(r)}\ntop functions: {top}\nmodel: {r['provenance']}")
    if not r["bit_exact"]:
        bad = np.argwhere(r["logits_sim"] != r["logits_mcu"])
        print(f"mcutrain run: the MCU's logits differ from the simulator's in {len(bad)} places, first at "
              f"sample {bad[0][0]}, class {bad[0][1]}", file=sys.stderr)
        return 1
    return 0


def memory_lines(r: dict[str, Any]) -> str:
    """The library's RAM and Flash (what `plan` plans, the board's budget) apart from the harness's."""
    lib_ram, target = r["library_ram_bytes"], r["target"]
    verdict = "fits" if r["fits"] else "does NOT fit"
    if r["fits"] and lib_ram > r["ram_limit"]:
        verdict += " by the plan, but the linked library is larger than the board: please report this"
    stack = f", stack used {r['stack_used']:,} of the planned 8 KB" if r.get("stack_used") else ""
    return (f"library: RAM {lib_ram:,} bytes ({100 * lib_ram / r['ram_limit']:.0f}% of {target}; planned "
            f"{r['planned_ram_bytes']:,}{stack}), Flash {r['library_flash_bytes']:,} bytes (planned "
            f"{r['planned_flash_bytes']:,}, code estimated): {verdict} {target}\n"
            f"harness (kept out of the board's budget: a firmware has none): RAM {r['harness_ram_bytes']:,} "
            f"bytes (data buffers, newlib stdio, 8 KB heap), Flash {r['harness_flash_bytes']:,} bytes; "
            f"whole emulated image: RAM {r['ram_bytes']:,}, Flash {r['flash_bytes']:,} bytes")


def report_training(r: dict[str, Any], args: argparse.Namespace) -> int:
    """Print a training run (unless --json) and its notes; the exit status."""
    if not args.json:
        top = ", ".join(f"{k} {v:,.0f}" for k, v in list(r["per_function"].items())[:6])
        print(f"{r['target']} ({r['core']}, {r['kernels']} kernels), {r['method']}: {r['steps']} training "
              f"steps {'bit-exact' if r['bit_exact'] else 'NOT bit-exact'} with the simulator (losses, "
              f"logits, weights, biases, momentum, RNG after every step)\n"
              f"per step: {r['instructions_per_step']:,.0f} instructions, {r['macs_per_step']:,} MACs "
              f"({r['instructions_per_mac']} instructions/MAC), est. {r['est_cycles_per_step']:,.0f} "
              f"cycles = {r['est_ms_per_step']:.3f} ms (estimate)\n"
              f"{memory_lines(r)}\ntop functions: {top}\nmodel: {r['provenance']}")
    if not r["bit_exact"]:
        print(f"mcutrain run: the MCU differs from the simulator: {r['mismatch']}", file=sys.stderr)
        return 1
    return 0

