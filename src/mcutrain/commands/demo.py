"""`mcutrain demo`: the main job on the default data, start to end, in one to two minutes.

1. pretrain a CNN in float and quantize it to int8: small-cnn on a class-balanced subset of
   Fashion-MNIST when it is installed, else digits-cnn on scikit-learn's bundled 8x8 digits
   (always available; the demo says so in one line);
2. adapt it, as the device would, to a corrupted version of the data (stripes, severity 5)
   with FQT (int8, dynamic partial updates) and with ZO (back-propagation free), simulated
   exactly;
3. plan both training steps on a real board (nrf52840: Cortex-M4F, 256 KB RAM, 64 MHz);
4. build the C libraries, run int8 inference and a few training steps of each method on an
   emulated Cortex-M4 and check them bit for bit against the simulator, counting
   instructions (without the ARM toolchain it says how to install it and goes on);
5. print one summary table and write a report folder (training curves, memory breakdown per
   method, lifetime pictures): the same as `mcutrain report DIR` gives for any runs.

Every stage runs the command a user would type (`mcutrain pretrain`, `train`, `run`); the
commands are printed so each step can be repeated by hand. Stages 2-4 need only the
pretrained model, so they run side by side as separate processes.

Examples:
    mcutrain demo
    mcutrain demo --data digits --out demo-run --json
    mcutrain demo --quick            (about 20 s on digits: one adaptation epoch, two ZO queries,
                                      MCU inference only)
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from mcutrain import io
from mcutrain.cli import counted, print_json
from mcutrain.commands._outputs import check_output
from mcutrain.errors import UserError
from mcutrain.options import add_threads_option, seed_int

TFLITE_PATH = ("a .tflite deployed with TensorFlow Lite Micro takes the same path as it is: mcutrain train "
               "model.tflite --dataset D -o adapted.npz, then mcutrain export adapted.npz --format tflite "
               "-o adapted.tflite (docs/tutorial.md)")
"""The one line that tells a TFLM user the demo's path is theirs too (the demo's model is mcutrain's)."""


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "demo", help="the main job on the default data (Fashion-MNIST, else digits): pretrain, adapt "
                     "with fqt and zo, plan, run on an emulated MCU, report",
        description=__doc__.split("Examples:")[0].strip(),
        epilog="examples:\n" + __doc__.split("Examples:\n")[1],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default="demo-run", metavar="DIR",
                   help="folder for the demo's files (default demo-run)")
    p.add_argument("--target", default="nrf52840", help="board to plan and emulate (default nrf52840)")
    p.add_argument("--seed", type=seed_int, default=0, help="seed of every random choice (default 0)")
    p.add_argument("--data", choices=("auto", "fashion-mnist", "digits"), default="auto",
                   help="auto (default): Fashion-MNIST when it is installed, else the bundled digits")
    p.add_argument("--quick", action="store_true",
                   help="the fast variant on digits: 1 adaptation epoch, 2 ZO queries, MCU inference only")
    p.add_argument("--json", action="store_true", help="print the summary as JSON on stdout")
    add_threads_option(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from mcutrain.demo.config import choose
    from mcutrain.demo.jobs import wait_all
    from mcutrain.demo.stages import (
        TRAINED,
        adapt_result,
        describe_mcu,
        pretrain_stage,
        short,
        start_adapt,
        start_mcu,
    )
    from mcutrain.targets import TargetError, get_target

    try:
        get_target(args.target)
        cfg, note = choose(args.data, args.quick, args.seed, args.target)
    except (TargetError, ValueError) as e:
        raise UserError(str(e)) from None
    check_output(args.out, "--out", directory=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stream = sys.stderr if args.json else sys.stdout
    progress = False if args.json else None     # a bar on a terminal, plain lines in a log

    def log(text: str) -> None:
        print(text, file=stream, flush=True)

    t_all = time.perf_counter()
    summary: dict[str, Any] = {"config": cfg.__dict__, "stages": {}, "seconds": {}, "cpu_seconds": {}}
    if note:
        log(note)
    log(f"mcutrain demo: {cfg.arch} on {cfg.dataset}, adapted to {cfg.adapt_dataset}, planned and run for "
        f"{cfg.target}{' (quick)' if args.quick else ''}")

    t0, c0 = time.perf_counter(), time.process_time()
    pre = pretrain_stage(cfg, out, progress)
    summary["stages"]["pretrain"], summary["seconds"]["pretrain"] = pre, time.perf_counter() - t0
    summary["cpu_seconds"]["pretrain"] = time.process_time() - c0
    model = Path(pre["path"])
    log(f"[1/5] pretrain: float accuracy {pre['float_accuracy']:.3f}, int8 (PTQ) {pre['int8_accuracy']:.3f} "
        f"on {pre['test_samples']:,} clean {cfg.dataset} test images, trained on {pre['train_samples']:,} "
        f"({summary['seconds']['pretrain']:.0f} s) -> {model}")

    # NOTE: the adaptations and the MCU runs need only the pretrained model: they run side by side
    # (separate processes), which halves the demo's wall time on two cores.
    log(f"[2-4/5] adapting with {' and '.join(TRAINED)} and building for the emulated {cfg.target} "
        "core, side by side ...")
    jobs = {m: start_adapt(cfg, m, model, out) for m in TRAINED}
    mcu_runs = start_mcu(cfg, model, out, log)
    wait_all({**{f"adapt with {m}": jobs[m] for m in TRAINED},
              **{f"MCU {part}": job for part, (job, _) in mcu_runs.jobs.items()}}, log)
    for i, method in enumerate(TRAINED):
        r = adapt_result(jobs[method])
        summary["stages"][method], summary["seconds"][method] = r, jobs[method].seconds
        summary["cpu_seconds"][method] = jobs[method].cpu_seconds
        log(f"[{2 + i}/5] adapt with {method}: accuracy on {cfg.adapt_dataset} {r['accuracy_before']:.3f} -> "
            f"{r['accuracy_after']:.3f} ({counted(r['epochs'], 'epoch')} on {r['train_samples']:,} images, "
            f"{jobs[method].seconds:.0f} s)\n      {r['command']}")
    mcu = mcu_runs.result()
    summary["stages"]["mcu"], summary["seconds"]["mcu"] = mcu, mcu_runs.seconds
    summary["cpu_seconds"]["mcu"] = sum((mcu.get("cpu_seconds") or {}).values())
    if mcu.get("available"):
        log(f"[4/5] MCU: built and ran on the emulated {cfg.target} core ({mcu_runs.seconds:.0f} s)")
    else:
        log(f"[4/5] MCU: not run: {short(mcu.get('reason', ''))}")

    t0, c0 = time.perf_counter(), time.process_time()
    from mcutrain.report import ReportError, write_report
    try:
        rep = write_report(out, out / "report", target=cfg.target)
    except ReportError as e:
        raise UserError(str(e)) from None
    summary["stages"]["report"], summary["seconds"]["report"] = rep, time.perf_counter() - t0
    summary["cpu_seconds"]["report"] = time.process_time() - c0
    summary["mcu_lines"] = describe_mcu(mcu, cfg)
    summary["seconds"]["total"] = time.perf_counter() - t_all
    log(f"[5/5] plan on {cfg.target} and report ({summary['seconds']['report']:.0f} s): {out / 'report'}")
    text = json.dumps(summary, indent=2, default=str).encode()
    io.atomic_write_bytes(out / "demo.json", lambda f: f.write(text))

    if args.json:
        print_json(summary)
        return 0
    print()
    print(rep["table"])
    print(f"Accuracy: on {pre['test_samples']:,} test images of {cfg.adapt_dataset} (before/after) and of "
          f"clean {cfg.dataset} (pretraining).")
    print()
    for line in summary["mcu_lines"]:
        print(line)
    print(f"\nplots: {', '.join(p for p in rep['files'] if p.endswith('.png'))}")
    print(f"done in {summary['seconds']['total']:.0f} s; the same report for your own runs: "
          f"mcutrain report {out}")
    print(TFLITE_PATH)
    return 0
