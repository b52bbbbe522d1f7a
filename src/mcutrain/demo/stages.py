"""The demo's stages, each one the same code path as the command a user would type.

Every stage builds its arguments by parsing a command line with the real `mcutrain` parser
(`argv("train", ...)`), so the demo runs exactly what `mcutrain train|run` run, with their
defaults, and keeps working when those commands gain options.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcutrain import io

Log = Callable[[str], None]
TRAINED = ("fqt", "zo")
"""The methods the demo adapts with, in this order; each writes NAME.npz, NAME.history.json."""


@dataclass(frozen=True)
class DemoConfig:
    """What the demo runs. The defaults take one to two minutes on two cores; `quick()` about 20 s.

    The corruption 'stripe' at severity 5 drops the pretrained digits CNN from about 0.98 to
    0.40 test accuracy, and both methods recover most of it in five epochs (measured: fqt
    0.86, zo 0.86 with seed 0), so the before/after columns show adaptation rather than noise.
    """

    arch: str = "digits-cnn"
    dataset: str = "digits"
    corruption: str = "stripe:5"
    target: str = "nrf52840"
    seed: int = 0
    pretrain_epochs: int = 10
    pretrain_lr: float = 1e-2
    adapt_epochs: int = 5
    batch: int = 32
    fqt_lr: float = 0.01
    fqt_partial: float = 0.5
    zo_lr: float = 0.05
    zo_queries: int = 10
    mcu_steps: int = 4
    mcu_batch: int = 4
    mcu_training: bool = True
    """Build and run the methods' training steps too (each a cross-build of about 15 s)."""

    @property
    def adapt_dataset(self) -> str:
        return f"{self.dataset}-c:{self.corruption}"

    @classmethod
    def quick(cls, seed: int = 0, target: str = "nrf52840") -> DemoConfig:
        """The fast variant the test suite runs: one adaptation epoch, two ZO queries, MCU inference only."""
        return cls(seed=seed, target=target, adapt_epochs=1, zo_queries=2, mcu_steps=2, mcu_training=False)


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


def pretrain_stage(cfg: DemoConfig, out: Path, progress: bool) -> dict[str, Any]:
    """Float training on the clean data, then int8 by post-training quantization."""
    from mcutrain.commands.pretrain import pretrain
    args = parse("pretrain", "--arch", cfg.arch, "--dataset", cfg.dataset,
                 "--epochs", str(cfg.pretrain_epochs), "--seed", str(cfg.seed), "--lr", str(cfg.pretrain_lr),
                 "-o", str(out / f"{cfg.arch}.npz"))
    return pretrain(args, progress=progress)


def adapt_argv(cfg: DemoConfig, method: str, model: Path, out: Path) -> list[str]:
    """The `mcutrain train` command line of one adaptation run."""
    common = ["train", str(model), "--dataset", cfg.adapt_dataset, "--method", method, "--trainable", "all",
              "--epochs", str(cfg.adapt_epochs), "--batch", str(cfg.batch), "--seed", str(cfg.seed),
              "-o", str(out / f"{method}.npz")]
    if method == "fqt":
        return [*common, "--precision", "int8", "--partial", str(cfg.fqt_partial), "--lr", str(cfg.fqt_lr)]
    return [*common, "--queries", str(cfg.zo_queries), "--lr", str(cfg.zo_lr)]


def adapt_stage(cfg: DemoConfig, method: str, model: Path, out: Path, progress: bool) -> dict[str, Any]:
    """Simulated on-device training of the int8 model on the corrupted data; saves NAME.history.json."""
    from mcutrain.commands.train import train
    argv = adapt_argv(cfg, method, model, out)
    result, _ = train(parse(*argv), progress=progress)
    return {**result, "command": "mcutrain " + " ".join(argv)}


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
    from mcutrain.commands.export import METHODS_IN_C
    # NOTE: export learned zo before run did; run trains only where it takes the training options
    return method in METHODS_IN_C and "--trainable" in command_options("run")


def _train_options(cfg: DemoConfig, method: str) -> list[tuple[str, Any]]:
    """The `mcutrain run` options of a method's training steps (those run does not know are dropped).

    NOTE: a smaller batch than the simulation's: every ZO query is a forward pass in the emulator.
    FQT's partial updates are not in the C step yet, so it runs with every filter trained (the
    planner's worst case, which the RAM column shows anyway).
    """
    common = [("--trainable", "all"), ("--batch", cfg.mcu_batch)]
    if method == "fqt":
        return [*common, ("--precision", "int8"), ("--lr", cfg.fqt_lr)]
    return [*common, ("--queries", cfg.zo_queries), ("--lr", cfg.zo_lr)]


def _run_json(args: argparse.Namespace, path: Path) -> dict[str, Any]:
    """`mcutrain run` in a temporary folder; its `--json` result saved to `path`."""
    from mcutrain.commands.run import JSON_KEYS, run_on_mcu
    with tempfile.TemporaryDirectory(prefix="mcutrain-demo-") as tmp:
        r = run_on_mcu(args, Path(tmp))
    doc = {k: r[k] for k in JSON_KEYS if k in r}
    doc["method"] = getattr(args, "method", "none")
    if doc["method"] != "none" and getattr(args, "batch", None) is not None:
        doc["batch"] = args.batch
    if doc["method"] == "fqt":
        doc["partial"] = args.partial
    io.atomic_write_bytes(path, lambda f: f.write(json.dumps(doc, indent=2).encode()))
    return doc


def mcu_stage(cfg: DemoConfig, model: Path, out: Path, log: Log) -> dict[str, Any]:
    """Build and run on the emulated core of `cfg.target`: int8 inference and each method's training steps.

    Results go to NAME.mcu.json beside the model they belong to (the report reads them). A missing
    toolchain or a part not built yet is said plainly and the demo goes on.
    """
    from mcutrain.cli import UserError
    for name in (model.stem, *TRAINED):  # results of an earlier demo in this folder must not pass for these
        (out / f"{name}.mcu.json").unlink(missing_ok=True)
    missing = _toolchain_missing()
    if missing:
        log(f"  MCU stage skipped: {missing}")
        return {"available": False, "reason": missing}
    res: dict[str, Any] = {"available": True, "seconds": {}}
    common = ["--dataset", cfg.adapt_dataset, "--steps", str(cfg.mcu_steps), "--target", cfg.target,
              "--seed", str(cfg.seed)]
    for part in ("inference", *TRAINED):
        t0 = time.perf_counter()
        if part != "inference" and not cfg.mcu_training:
            res[part] = {"error": "skipped: --quick runs int8 inference only on the MCU"}
            continue
        if part != "inference" and not training_in_c(part):
            res[part] = {"error": f"not available yet: 'mcutrain run' has no {part} training step in C"}
            continue
        argv = ["run", str(model), *common]
        if part != "inference":
            known = command_options("run")
            argv += ["--method", part]
            argv += [x for opt, v in _train_options(cfg, part) if opt in known for x in (opt, str(v))]
        name = model.stem if part == "inference" else part
        try:
            res[part] = _run_json(parse(*argv), out / f"{name}.mcu.json")
        except (UserError, SystemExit) as e:
            res[part] = {"error": f"'mcutrain {' '.join(argv)}' failed: {e}"}
            log(f"  MCU {part} failed: {short(str(e))}")
        res["seconds"][part] = time.perf_counter() - t0
    return res


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
