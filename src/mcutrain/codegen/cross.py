"""Build a generated library for a Cortex-M target and run it in QEMU with exact instruction counts.

The harness (`harness/main.c`) is compiled with `MT_BOARD`, so each `model_predict` sits between
the board's `mt_mark_begin()`/`mt_mark_end()` markers: the instruction counts of the region are
inference only, never semihosting file I/O or startup. Inputs and logits travel as raw int8
files through semihosting, in a work directory that is the guest's current directory.

Example:
    >>> b = build_mcu(lib_dir, "cortex-m4", work / "model.elf")                  # doctest: +SKIP
    >>> logits, prof = run_mcu(b.elf, "cortex-m4", x_q, num_classes=10, workdir=work)  # doctest: +SKIP
    >>> prof.region.total / len(x_q)                                              # doctest: +SKIP
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from mcutrain.buildflags import CROSS_OPT, REF_KERNELS
from mcutrain.codegen.runtime_files import runtime_sources
from mcutrain.mcu import BuildResult, Profile, build, count_instructions
from mcutrain.mcu.harness_status import harness_failure
from mcutrain.mcu.train_data import read_train_results, write_train_data
from mcutrain.targets import Target, get_target


def build_mcu(lib_dir: str | Path, target: str | Target, elf: str | Path, kernels: str = "dsp",
              opt: str = CROSS_OPT, defines: tuple[str, ...] = ()) -> BuildResult:
    """Cross-compile model + runtime + harness for `target`, linked with the target's RAM/Flash.

    kernels: 'dsp' uses the DSP loops where the core has them (the architecture header decides
    from `__ARM_FEATURE_DSP`); 'ref' forces the portable loops (`MT_KERNELS_REF`). `defines` are
    more build options (e.g. `MT_NO_UNROLL`, to measure what RISC-V's unrolled loops buy).
    """
    lib = Path(lib_dir)
    srcs = [lib / "model.c", *(lib / "runtime" / n for n in runtime_sources()),
            lib / "harness" / "main.c"]
    flags = ["MT_BOARD", *([REF_KERNELS] if kernels == "ref" else []), *defines]
    return build(srcs, get_target(target), elf, include_dirs=[lib, lib / "runtime"], defines=flags, opt=opt)


def run_mcu(elf: str | Path, target: str | Target, x_q: np.ndarray, num_classes: int,
            workdir: str | Path, timeout: float = 600.0) -> tuple[np.ndarray, Profile]:
    """Run the harness ELF on `x_q` (N samples) in QEMU; returns logits (N, K) and the profile.

    Raises RuntimeError naming the exit code when the guest fails.
    """
    work = Path(workdir)
    work.mkdir(parents=True, exist_ok=True)
    x_q = np.ascontiguousarray(x_q, dtype=np.int8)
    (work / "inputs.bin").write_bytes(x_q.tobytes())
    out = work / "logits.bin"
    if out.exists():
        out.unlink()
    prof = count_instructions(elf, target, ["inputs.bin", "logits.bin"], cwd=work, timeout=timeout)
    if prof.exit_code != 0 or not out.exists():
        raise RuntimeError(harness_failure("model harness", get_target(target).name, prof.exit_code,
                                           prof.stdout, prof.stderr, out.exists()))
    logits = np.frombuffer(out.read_bytes(), np.int8)
    if logits.size != len(x_q) * num_classes:
        raise RuntimeError(f"the harness wrote {logits.size} logits, expected {len(x_q)} x {num_classes}")
    return logits.reshape(len(x_q), num_classes), prof


def build_mcu_train(lib_dir: str | Path, target: str | Target, elf: str | Path, kernels: str = "dsp",
                    opt: str = CROSS_OPT) -> BuildResult:
    """Cross-compile a training library (model + every runtime source + harness/train_main.c).

    Linked with the target's real RAM and Flash, so a plan that does not fit fails to link
    (`LinkOverflowError`). The build already passes `-ffp-contract=off` (the float32 order).
    """
    lib = Path(lib_dir)
    srcs = [lib / "model.c", *sorted((lib / "runtime").glob("*.c")), lib / "harness" / "train_main.c"]
    defines = ["MT_BOARD"] + ([REF_KERNELS] if kernels == "ref" else [])
    return build(srcs, get_target(target), elf, include_dirs=[lib, lib / "runtime"], defines=defines, opt=opt)


def run_mcu_train(elf: str | Path, target: str | Target, batches: list[tuple[np.ndarray, np.ndarray]],
                  lr: float, src, num_classes: int, workdir: str | Path, timeout: float = 600.0):
    """Run the training harness in QEMU on int8 batches; (per-step results, profile, stack bytes used).

    The data file travels by semihosting; the instruction counts cover `model_train_step` only.
    """
    import re

    work = Path(workdir)
    work.mkdir(parents=True, exist_ok=True)
    write_train_data(work / "train.bin", batches, lr)
    out = work / "results.bin"
    if out.exists():
        out.unlink()
    prof = count_instructions(elf, target, ["train.bin", "results.bin"], cwd=work, timeout=timeout)
    if prof.exit_code != 0 or not out.exists():
        raise RuntimeError(harness_failure("training harness", get_target(target).name, prof.exit_code,
                                           prof.stdout, prof.stderr, out.exists()))
    m = re.search(r"stack_used (\d+)", prof.stdout)
    stack = int(m.group(1)) if m else None
    return read_train_results(out, src, len(batches), num_classes), prof, stack
