"""The demo's stages, each one the command a user would type.

Pretraining runs in this process (everything after it needs its model). The adaptations and
the MCU runs are then `mcutrain train|run` command lines started in the background
(`demo.jobs`), built from the real parser's options (`argv` lists checked by `parse`), so the
demo runs exactly what those commands run, with their defaults, and keeps working when they
gain options.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mcutrain import io
from mcutrain.demo.config import DemoConfig
from mcutrain.demo.jobs import Job, JobError, start, wait_all

Log = Callable[[str], None]
TRAINED = ("fqt", "zo")
"""The methods the demo adapts with, in this order; each writes NAME.npz (its history inside)."""


def parse(*argv: str) -> argparse.Namespace:
    """Arguments of `mcutrain ARGV...` as the real command line parser gives them."""
    from mcutrain.cli import build_parser
    return build_parser().parse_args(list(argv))


def command_options(command: str) -> set[str]:
    """The option strings a command accepts (to pass only those it knows)."""
    from mcutrain.cli import build_parser
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return set(sub.choices[command]._option_string_actions)


def _samples(cfg: DemoConfig, train: int | None) -> list[str]:
    out = [] if train is None else ["--train-samples", str(train)]
    return out + ([] if cfg.test_samples is None else ["--test-samples", str(cfg.test_samples)])


def pretrain_argv(cfg: DemoConfig, out: Path) -> list[str]:
    """The `mcutrain pretrain` command line: float training on the clean data, then int8 by PTQ."""
    return ["pretrain", "--arch", cfg.arch, "--dataset", cfg.dataset, "--epochs", str(cfg.pretrain_epochs),
            "--seed", str(cfg.seed), "--lr", str(cfg.pretrain_lr), *_samples(cfg, cfg.pretrain_samples),
            "-o", str(out / f"{cfg.arch}.npz")]


def pretrain_stage(cfg: DemoConfig, out: Path, progress: bool | None) -> dict[str, Any]:
    """Float training on the clean data, then int8 by post-training quantization."""
    from mcutrain.commands.pretrain import pretrain
    argv = pretrain_argv(cfg, out)
    return {**pretrain(parse(*argv), progress=progress), "command": "mcutrain " + " ".join(argv)}


def adapt_argv(cfg: DemoConfig, method: str, model: Path, out: Path) -> list[str]:
    """The `mcutrain train` command line of one adaptation run."""
    trainable, batch = (cfg.fqt_trainable, cfg.batch) if method == "fqt" else (cfg.zo_trainable, cfg.zo_batch)
    common = ["train", str(model), "--dataset", cfg.adapt_dataset, "--method", method,
              "--trainable", trainable,
              "--epochs", str(cfg.adapt_epochs), "--batch", str(batch), "--seed", str(cfg.seed),
              *_samples(cfg, cfg.adapt_samples), "-o", str(out / f"{method}.npz"), "--json"]
    if method == "fqt":
        return [*common, "--precision", "int8", "--partial", str(cfg.fqt_partial), "--lr", str(cfg.fqt_lr)]
    return [*common, "--queries", str(cfg.zo_queries), "--lr", str(cfg.zo_lr)]


def start_adapt(cfg: DemoConfig, method: str, model: Path, out: Path) -> Job:
    """Simulated on-device training of the int8 model on the corrupted data, in the background."""
    return start(adapt_argv(cfg, method, model, out))


def adapt_result(job: Job) -> dict[str, Any]:
    """The `--json` result of an adaptation job (it saved NAME.npz, its history inside)."""
    from mcutrain.errors import UserError
    try:
        return {**job.json(), "command": job.command.removesuffix(" --json")}
    except JobError as e:
        raise UserError(str(e)) from None


def _toolchain_missing() -> str | None:
    from mcutrain.mcu import ToolchainMissingError, find_toolchain
    from mcutrain.mcu.qemu import find_qemu
    try:
        find_toolchain()
        find_qemu()
    except ToolchainMissingError as e:
        return str(e)
    return None


def training_in_c(method: str) -> bool:
    """Whether `mcutrain run` can build and run `method`'s training steps (not only inference) yet."""
    from mcutrain.api.device import METHODS_IN_C
    # NOTE: export learned zo before run did; run trains only where it takes the training options
    return method in METHODS_IN_C and "--trainable" in command_options("run")


def _train_options(cfg: DemoConfig, method: str) -> list[tuple[str, Any]]:
    """The `mcutrain run` options of a method's training steps (those run does not know are dropped).

    NOTE: a smaller batch than the simulation's: every ZO query is a forward pass in the emulator.
    The C step runs FQT's partial updates at batch 1 only, so at this batch it trains every filter
    (the planner's worst case, which the RAM column shows anyway).
    """
    if method == "fqt":
        return [("--trainable", cfg.fqt_trainable), ("--batch", cfg.mcu_batch), ("--precision", "int8"),
                ("--lr", cfg.fqt_lr)]
    return [("--trainable", cfg.zo_trainable), ("--batch", cfg.mcu_batch), ("--queries", cfg.zo_queries),
            ("--lr", cfg.zo_lr)]


def mcu_argv(cfg: DemoConfig, part: str, model: Path) -> list[str]:
    """The `mcutrain run` command line of one MCU part: 'inference' or a method's training steps."""
    argv = ["run", str(model), "--dataset", cfg.adapt_dataset, "--steps", str(cfg.mcu_steps), "--target",
            cfg.target, "--seed", str(cfg.seed), "--json"]
    if part == "inference":
        return argv
    known = command_options("run")
    return [*argv, "--method", part, *(x for opt, v in _train_options(cfg, part) if opt in known
                                       for x in (opt, str(v)))]


def _finish_part(job: Job, part: str, path: Path, log: Log) -> dict[str, Any]:
    """The result of one `mcutrain run ... --json` job, saved to `path` (the report reads it)."""
    try:
        doc = job.json()
    except JobError as e:
        log(f"  MCU {part} failed: {short(str(e))}")
        return {"error": str(e)}
    if part == "inference":
        doc["method"] = "none"
    io.atomic_write_bytes(path, lambda f: f.write(json.dumps(doc, indent=2).encode()))
    return doc


class McuRuns:
    """The MCU stage's `mcutrain run` jobs, started at once by `start_mcu`; `result()` waits for them."""

    def __init__(self, res: dict[str, Any], jobs: dict[str, tuple[Job, Path]], log: Log) -> None:
        self.res, self.jobs, self.log = res, jobs, log
        self.started = time.perf_counter()
        self.seconds = 0.0

    def result(self) -> dict[str, Any]:
        wait_all({f"MCU {part}": job for part, (job, _) in self.jobs.items()}, self.log)
        for part, (job, path) in self.jobs.items():
            self.res[part] = _finish_part(job, part, path, self.log)
            self.res["seconds"][part] = job.seconds
            self.res["cpu_seconds"][part] = job.cpu_seconds
        self.seconds = time.perf_counter() - self.started
        return self.res


def start_mcu(cfg: DemoConfig, model: Path, out: Path, log: Log) -> McuRuns:
    """Start building and running on the emulated core of `cfg.target`: int8 inference and each
    method's training steps, one background `mcutrain run` each.

    Results go to NAME.mcu.json beside the model they belong to (the report reads them). A missing
    toolchain or a part not built yet is said plainly and the demo goes on.
    """
    for name in (model.stem, *TRAINED):  # results of an earlier demo in this folder must not pass for these
        (out / f"{name}.mcu.json").unlink(missing_ok=True)
    missing = _toolchain_missing()
    if missing:     # said once, by the demo's [4/5] line and its summary
        return McuRuns({"available": False, "reason": missing}, {}, log)
    res: dict[str, Any] = {"available": True, "seconds": {}, "cpu_seconds": {}}
    jobs: dict[str, tuple[Job, Path]] = {}
    for part in ("inference", *TRAINED):
        if part != "inference" and not cfg.mcu_training:
            res[part] = {"error": "skipped: --quick runs int8 inference only on the MCU"}
        elif part != "inference" and not training_in_c(part):
            res[part] = {"error": f"not available yet: 'mcutrain run' has no {part} training step in C"}
        else:
            name = model.stem if part == "inference" else part
            jobs[part] = (start(mcu_argv(cfg, part, model)), out / f"{name}.mcu.json")
    return McuRuns(res, jobs, log)


def mcu_stage(cfg: DemoConfig, model: Path, out: Path, log: Log) -> dict[str, Any]:
    """`start_mcu` and wait for its results."""
    return start_mcu(cfg, model, out, log).result()


def short(message: str, lines: int = 2) -> str:
    """The first lines of a long message (a compiler's output); the whole one stays in demo.json."""
    parts = message.strip().splitlines()
    more = " ... (the whole message is in demo.json)" if len(parts) > lines else ""
    return "\n  ".join(parts[:lines]) + more


def describe_mcu(res: dict[str, Any], cfg: DemoConfig) -> list[str]:
    """The MCU lines of the demo's output (the bit-exact line first)."""
    if not res.get("available"):
        return [f"MCU: not run ({res.get('reason')}); the rest of the demo is complete"]
    lines = []
    parts = [("inference", f"int8 inference of {cfg.arch}"),
             ("fqt", "fqt int8 training steps (full updates: partial ones run in C at batch 1 only)"),
             ("zo", f"zo training steps ({cfg.zo_queries} queries)")]
    for part, what in parts:
        r = res.get(part) or {}
        if "error" in r:
            lines.append(f"MCU {what}: {short(r['error'])}")
            continue
        batch = f" of batch {r['batch']}" if "batch" in r else ""
        lines.append(f"MCU {what} on {r['target']} ({r['core']}, emulated), {r['steps']} steps{batch}: "
                     f"{'BIT-EXACT' if r['bit_exact'] else 'MISMATCH'} with the simulator; "
                     f"{r['instructions_per_step']:,.0f} instructions per step, "
                     f"est. {r['est_ms_per_step']:.2f} ms per step (estimate at the target clock)")
    return lines
