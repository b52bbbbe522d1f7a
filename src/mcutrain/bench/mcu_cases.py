"""The cases of benchmark `mcu`: which model, method and trainable part run on which cores.

Apart from the measurement (`mcu`) and the tables (`mcu_tables`) because both read them: the
tables name the cases' settings and targets, and tests build cases of their own.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field

BOARDS = {"cortex-m0plus": "rp2040", "cortex-m4": "nrf52840", "cortex-m7": "imxrt1062",
          "cortex-m33": "nrf5340", "cortex-m55": "alif-e3"}
"""The board whose clock (and RAM, for the planner's fit) each core's rows are quoted at."""
BOARDS.update({"rv32imc": "esp32c3", "rv32imafc": "rv32imafc"})   # no F board yet: the generic target

ALL_RUNS = (("cortex-m0plus", "ref"), ("cortex-m4", "ref"), ("cortex-m4", "dsp"), ("cortex-m7", "ref"),
            ("cortex-m7", "dsp"), ("cortex-m33", "ref"), ("cortex-m33", "dsp"), ("cortex-m55", "dsp"))
"""Every core; the M55's 'dsp' build is its Helium one (the MVE twins first, the DSP ones elsewhere)."""
ALL_RUNS += (("rv32imc", "ref"), ("rv32imafc", "ref"))   # RISC-V: the portable kernels, without/with F
M7_RUNS = (("cortex-m7", "ref"), ("cortex-m7", "dsp"))
RISCV_VS_M4 = 1.3
"""Issue #23's RISC-V target: rv32imc's instructions within 1.3x of the M4's portable C."""
RISCV_CORES = ("rv32imc", "rv32imafc")

SEED_SMALL_MS = {"cortex-m0plus": 817.1, "cortex-m4": 897.6, "cortex-m7": 35.4}
"""Seed A, small CNN, uint8 FQT, ms per training sample (RP2040, nRF52840, i.MX RT1062)."""
SEED_MCUNET = "192.6-377.6 ms (M7)"

LIN_SPARSE = "layers:blocks.7-10.pw1,blocks.12.pw1,blocks.13.pw1"
"""Lin et al.'s sparse update of MCUNet-5FPS (weights; input-channel ratios taken as 1)."""

TARGET_INSTR_PER_MAC = 1.5
TARGET_RAM_PCT = 5.0


@dataclass(frozen=True)
class Case:
    """One training setting measured on several cores: `argv` are `mcutrain run` method options."""

    model: str
    setting: str
    argv: tuple[str, ...]
    runs: tuple[tuple[str, str], ...] = ALL_RUNS
    input_shape: tuple[int, int, int] | None = None
    batch: int = 2
    steps: int = 1
    seed_ms: dict[str, float] = field(default_factory=dict)
    reference: str = ""
    steady: bool = False
    """Per-step figures from the steps after the first: the ELF also runs the first step alone and
    its count is subtracted (FQT's first step at batch > 1 seeds the error ranges over the batch)."""
    timeout: float = 900.0
    """Seconds the QEMU run may take (MCUNet-5FPS's dense ZO step at 128x128 is 15.6 G instructions
    with the DSP kernels, about 17 minutes here; its reference-kernel run, about 2x more, is left
    to the sparse row's ref/dsp ratio)."""
    warmup: int = 0
    """FQT: simulated steps (one sample each, partial updates at WARMUP_LAMBDA) before the measured
    ones; the library is exported from the state they reach (see `warm_state`)."""


def _fqt(setting: str, precision: str, partial: bool, batch: int = 1, steps: int = 4,
         runs: tuple[tuple[str, str], ...] = ALL_RUNS, warmup: int = 0) -> Case:
    """Small-cnn FQT: one sample per step, as seed A trains; four steps, since dynamic partial
    updates keep every structure on the first sample (its loss is the largest seen so far).
    With a batch, two steps, counted after the first (which seeds the error ranges from the whole
    batch: an error pass of every sample per error tensor, with a forward pass where the tensors its
    first round keeps do not reach)."""
    argv = ("--method", "fqt", "--precision", precision, "--trainable", "all")
    return Case("small-cnn", setting, argv + (("--partial", "0.1") if partial else ()), batch=batch,
                steps=steps, runs=runs, seed_ms=SEED_SMALL_MS, steady=batch > 1, warmup=warmup,
                reference="seed A, uint8 FQT" if precision == "uint8" and not partial and batch == 1
                and not warmup else "")


SMALL_FQT = [_fqt(f"fqt {p}, all 4 layers{', partial 0.1' if part else ''}", p, part)
             for p in ("uint8", "int8", "float32") for part in (False, True)]
SMALL_FQT_BATCH = [_fqt("fqt int8, all 4 layers, batch 8", "int8", False, batch=8, steps=2),
                   _fqt("fqt int8, all 4 layers, batch 32", "int8", False, batch=32, steps=2,
                        runs=(("cortex-m4", "dsp"), ("cortex-m7", "dsp"), ("cortex-m33", "dsp"))),
                   _fqt("fqt float32, all 4 layers, batch 8", "float32", False, batch=8, steps=2,
                        runs=(("cortex-m4", "ref"), ("cortex-m4", "dsp"), ("cortex-m7", "dsp")))]
"""Mini-batch SGD: gradients of the batch's samples accumulate, the float32 update runs once per step
(float32: one forward pass per sample, each sample's logits quantized with their own range)."""
WARMUP = 200
WARMUP_LAMBDA = 0.1
TRAINED = f"trained {WARMUP} steps"
SMALL_FQT_TRAINED = [_fqt(f"fqt {p}, all 4 layers, {TRAINED}{', partial 0.1' if part else ''}", p, part,
                          warmup=WARMUP) for p in ("int8", "uint8", "float32") for part in (False, True)]
"""Partial updates as in training: from the state {WARMUP} simulated steps of partial training at
lambda_min 0.1 reach (so the largest loss seen is an earlier sample's and the loss ratio of the
measured samples is below 1), the same four samples full and partial."""
MCUNET_SIZE = (128, 128, 3)
CASES: list[Case] = [
    Case("small-cnn", "zo mix, all 4 layers, 8 queries",
         ("--method", "zo", "--perturb", "mix", "--queries", "8", "--trainable", "all"),
         seed_ms=SEED_SMALL_MS),
    Case("small-cnn", "bp-qas, all 4 layers",
         ("--method", "bp-qas", "--trainable", "all"), seed_ms=SEED_SMALL_MS),
    *SMALL_FQT,
    *SMALL_FQT_BATCH,
    *SMALL_FQT_TRAINED,
    Case("mcunet-5fps", "zo mix, sparse blocks.4-7.pw1, 8 queries",
         ("--method", "zo", "--perturb", "mix", "--queries", "8", "--trainable", "layers:blocks.4-7.pw1"),
         runs=M7_RUNS, input_shape=MCUNET_SIZE, batch=1, steps=1, reference="seed B's sparse ZO"),
    Case("mcunet-5fps", "zo mix, dense (all layers), 8 queries",
         ("--method", "zo", "--perturb", "mix", "--queries", "8", "--trainable", "all"),
         runs=(("cortex-m7", "dsp"),), input_shape=MCUNET_SIZE, batch=1, steps=1,
         reference="seed B's dense ZO", timeout=7200.0),
    Case("mcunet-5fps", "bp-qas, last 2 blocks",
         ("--method", "bp-qas", "--trainable", "last:7"), runs=M7_RUNS, input_shape=MCUNET_SIZE, batch=1,
         steps=1, reference="Lin et al. int8 SGD+M+QAS: 377.6 ms"),
    Case("mcunet-5fps", "bp-qas sparse (Lin et al.), momentum 0.9",
         ("--method", "bp-qas", "--trainable", LIN_SPARSE, "--bias-last", "22", "--momentum", "0.9"),
         runs=M7_RUNS, input_shape=MCUNET_SIZE, batch=1, steps=1,
         reference="Lin et al. int8 SGD+M+QAS: 377.6 ms"),
    Case("mcunet-5fps", "fqt uint8, last 2 blocks",
         ("--method", "fqt", "--precision", "uint8", "--trainable", "last:7"), runs=M7_RUNS,
         input_shape=MCUNET_SIZE, batch=1, steps=1, reference="seed A: 192.6 ms (its MBedNet)"),
    Case("mcunet-5fps", "fqt int8, last 2 blocks",
         ("--method", "fqt", "--precision", "int8", "--trainable", "last:7"),
         runs=(*M7_RUNS, ("cortex-m4", "dsp")),   # the M4 DSP row: the depthwise twins in the step
         input_shape=MCUNET_SIZE, batch=1, steps=1),
]
M4_DSP = (("cortex-m4", "dsp"),)
MCUNET_SMALL = (32, 32, 3)
"""MCUNet-5FPS at 32x32: the 128x128 network's layers at 1/16 of its positions (a QEMU row in minutes)."""
MCUNET_LAST_BLOCKS_BUT_ADD = "layers:blocks.12.pw1,blocks.12.dw,blocks.13.pw1,blocks.13.dw,blocks.13.pw2,head"
"""The last two blocks without the projection feeding block 12's add (the partial row measured before a
partial layer could feed a residual add in C; kept so its figures stay comparable)."""
GRAPH_FQT: list[Case] = [
    Case("mobilenet-v1-0.25", "fqt uint8, last 4 layers (2 depthwise)",
         ("--method", "fqt", "--precision", "uint8", "--trainable", "last:4"), runs=M4_DSP, batch=1, steps=1),
    *(Case("mcunet-5fps", f"fqt {p}, last 2 blocks, 32x32",
           ("--method", "fqt", "--precision", p, "--trainable", "last:7"), runs=M4_DSP,
           input_shape=MCUNET_SMALL, batch=1, steps=1) for p in ("uint8", "mixed", "float32")),
    Case("mcunet-5fps", "fqt int8, last 2 blocks but blocks.12.pw2, partial 0.1, batch 4, 32x32",
         ("--method", "fqt", "--precision", "int8", "--trainable", MCUNET_LAST_BLOCKS_BUT_ADD,
          "--partial", "0.1"),
         runs=M4_DSP, input_shape=MCUNET_SMALL, batch=4, steps=2, steady=True),
    Case("mcunet-5fps", "fqt int8, last 2 blocks and blocks.11.pw2, partial 0.1, batch 4, 32x32",
         ("--method", "fqt", "--precision", "int8", "--trainable", "last:8", "--partial", "0.1"),
         runs=M4_DSP, input_shape=MCUNET_SMALL, batch=4, steps=2, steady=True),
]
"""FQT precisions and partial updates on depthwise and residual graphs (uint8, mixed, float32 and partial
updates with a batch ran only with int8 / batch 1 in C before); `last:8` trains blocks.12.pw2 partially
before block 12's add, whose skip (block 11's output) needs its error: that layer masks a copy."""
CASES += GRAPH_FQT
QUICK_CASES: list[Case] = [
    Case("small-cnn", "zo mix, all 4 layers, 2 queries",
         ("--method", "zo", "--perturb", "mix", "--queries", "2", "--trainable", "all"),
         runs=(("cortex-m4", "dsp"), ("cortex-m33", "dsp")), batch=1, steps=1, seed_ms=SEED_SMALL_MS),
    Case("small-cnn", "fqt int8, fc2",
         ("--method", "fqt", "--precision", "int8", "--trainable", "layers:fc2"),
         runs=(("cortex-m0plus", "ref"), ("cortex-m4", "ref"), ("rv32imc", "ref")), batch=1, steps=1,
         seed_ms=SEED_SMALL_MS),
]


class Pending(Exception):
    """The case's method has no C training code yet (or its options are not accepted by `run`)."""


def method_args(case: Case, core: str, kernels: str) -> argparse.Namespace:
    """The `mcutrain run` namespace of `case` on `core`; raises Pending if `run` cannot do it yet."""
    from mcutrain.api.device import resolve_target_and_kernels
    from mcutrain.errors import UserError
    from mcutrain.methods import factory

    p = argparse.ArgumentParser(exit_on_error=False, add_help=False)
    for flag in ("--arch", "--init", "--target", "--kernels", "--method"):
        p.add_argument(flag)
    factory.add_options(p, "run")
    argv = ["--arch", case.model, "--init", "random", "--seed", "0", "--target", core, "--kernels", kernels,
            "--batch", str(case.batch), *case.argv]
    try:
        args, extra = p.parse_known_args(argv)
    except argparse.ArgumentError as e:
        raise Pending(f"run does not take these options yet: {e}") from None
    if extra:
        raise Pending(f"run does not take {' '.join(extra)} yet")
    args.model = None
    try:
        resolve_target_and_kernels(args)    # first: a method without C code is pending, not refused
        factory.resolve(args, "run", args.method)
    except (UserError, factory.FactoryError) as e:
        raise Pending(str(e)) from None
    return args
