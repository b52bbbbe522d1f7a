"""What every `mcutrain run` shares: the `--json` keys, the npz dumps and the training-run checks.

`run` (the command: inference and dispatch), its FQT path and `_run_train` (ZO, BP-QAS) all
report the same keys and compare steps the same way; these live here, below all of them, so
the command imports its training half and never the other way round.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np

from mcutrain.cli import UserError
from mcutrain.io import atomic_write_bytes

JSON_KEYS = ("target", "core", "bit_exact", "steps", "instructions_per_step", "macs_per_step",
             "instructions_per_mac", "est_cycles_per_step", "est_ms_per_step", "ram_bytes", "flash_bytes",
             "per_function")
"""The keys of `--json` (in this order); a training run adds `method`, `batch` and, for fqt,
`precision` and `partial` after them (`_run_train.json_result`)."""


def save_npz(path: Path, **arrays: np.ndarray) -> None:
    """Write `arrays` to `path` as one .npz, atomically (a reader never sees half a file)."""
    atomic_write_bytes(path, lambda f: np.savez(f, **arrays))


def first_mismatch(sim, mcu) -> str:
    """The first difference of a training run (per step: losses, logits, integer state, RNG), or ""."""
    for s, ((l_s, lg_s, t_s, r_s), r) in enumerate(zip(sim, mcu)):
        if not np.array_equal(l_s, r.losses):
            return f"step {s}: losses differ (C {r.losses.tolist()} vs simulator {l_s.tolist()})"
        if not np.array_equal(lg_s, r.logits):
            return f"step {s}: logits differ"
        for name, v in t_s.items():
            got = r.state[name]
            if name.endswith(".velocity"):
                continue    # float state: compared by `_float_state_diff`
            if not np.array_equal(np.asarray(got).reshape(-1), np.asarray(v).reshape(-1)):
                bad = int(np.sum(np.asarray(got).reshape(-1) != np.asarray(v).reshape(-1)))
                return f"step {s}: {name} differs in {bad} entries"
        if r_s != r.state["rng"]:
            return f"step {s}: RNG state C {r.state['rng']} != simulator {r_s}"
    return ""


def load_run_inputs(args: argparse.Namespace):
    """The dataset, the int8 model and its provenance of a `run --method ...`, checked against each other."""
    from mcutrain.codegen.model_source import ModelSourceError, resolve_model
    from mcutrain.data import load_dataset

    if args.steps < 1:
        raise UserError(f"--steps must be at least 1, got {args.steps}")
    try:
        ds = load_dataset(args.dataset, seed=args.seed)
    except ValueError as e:
        raise UserError(str(e)) from None
    n = args.steps * args.batch
    if n > len(ds.y_train):
        raise UserError(f"--steps {args.steps} x --batch {args.batch} exceeds the {len(ds.y_train)} training "
                        f"samples of '{args.dataset}'")
    try:
        qm, prov = resolve_model(args.model, args.arch, args.init, args.seed, ds.num_classes,
                                 tuple(ds.x_train.shape[1:]), calib_x=ds.x_train)
    except ModelSourceError as e:
        raise UserError(str(e)) from None
    if tuple(ds.x_train.shape[1:]) != qm.graph.input_shape:
        raise UserError(f"the model takes inputs {qm.graph.input_shape} but '{args.dataset}' has samples "
                        f"{tuple(ds.x_train.shape[1:])}; pick a matching dataset")
    return ds, qm, prov


def step_result(prof, target, src, build, steps: int, mismatch) -> dict[str, Any]:
    """The `--json` keys of a training run: counted instructions of the marked step region."""
    from mcutrain.mcu import estimate_cycles

    region = prof.region
    if region is None:
        raise UserError("the instruction counter saw no training-step region (markers missing)")
    est = estimate_cycles(region, target, prof.elf)
    macs = int(sum(src.plan.schedule.macs_by_phase().values()))
    per_step = region.total / steps
    by_count = sorted(region.per_function.items(), key=lambda kv: -kv[1])
    result = {
        "target": target.name, "core": target.core, "bit_exact": not mismatch, "steps": steps,
        "instructions_per_step": round(per_step, 1), "macs_per_step": macs,
        "instructions_per_mac": round(per_step / macs, 4) if macs else None,
        "est_cycles_per_step": round(est.est_cycles / steps, 1),
        "est_ms_per_step": round(est.est_ms / steps, 4),
        "ram_bytes": build.sizes.ram_bytes, "flash_bytes": build.sizes.flash_bytes,
        "per_function": {k: round(v / steps, 1) for k, v in by_count},
    }
    assert tuple(result) == JSON_KEYS
    return result
