"""Argparse types for every number a user gives: checked at the interface, refused with exit 2.

Why here and not in each command: `--epochs 0`, `--batch 0`, `--lr nan` or `--lr -1` used to
reach the training loop and end in a traceback, or in a run that exits 0 with its accuracy
at chance. Each type below refuses what can never be meant (non-finite, out of range) with
argparse's `error:` line; `check_lr` adds the per-method judgement of a rate that is valid
but almost surely a mistake.

Example:
    >>> p = argparse.ArgumentParser()
    >>> _ = p.add_argument("--epochs", type=positive_int, default=1)
    >>> p.parse_args(["--epochs", "3"]).epochs
    3
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable

from mcutrain.quant.fixedpoint import ROUNDING_MODES

MAX_COUNT = 1 << 31
"""Largest epoch, batch, step, sample or query count accepted (any larger is a typo)."""
MAX_SEED = (1 << 32) - 2
"""Seeds feed numpy generators and the device's 32-bit xorshift (seed + 1 must fit)."""
LR_MAX = 1e3
"""No method's learning rate is meaningful above this; refused for every method."""
LR_REFUSE_ABOVE = {"fqt": 1.0, "float": 1.0, "pretrain": 1.0}
"""Methods whose updates are plain (standardized) gradient steps: a rate above 1 always
diverges (FQT int8 already diverges above about 0.005), so it is refused."""
LR_WARN_ABOVE = {"zo": 10.0, "bp-qas": 10.0}
"""Methods whose rate multiplies a QAS-scaled or GNS-shrunk estimate: the benchmark's grids go
up to 2 (zo-wp), so larger rates are allowed but get a warning line on stderr."""


def _int_type(name: str, lo: int, hi: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            v = int(text, 10)
        except (TypeError, ValueError):
            raise argparse.ArgumentTypeError(f"must be a whole number, got '{text}'") from None
        if not lo <= v <= hi:
            raise argparse.ArgumentTypeError(f"must be in {lo}..{hi:,}, got {v}")
        return v
    parse.__name__ = name
    return parse


def _float_type(name: str, lo: float, hi: float, lo_open: bool = False,
                hi_open: bool = False) -> Callable[[str], float]:
    def parse(text: str) -> float:
        try:
            v = float(text)
        except (TypeError, ValueError):
            raise argparse.ArgumentTypeError(f"must be a number, got '{text}'") from None
        if not math.isfinite(v):
            raise argparse.ArgumentTypeError(f"must be a finite number, got '{text}'")
        if (v <= lo if lo_open else v < lo) or (v >= hi if hi_open else v > hi):
            left, right = "(" if lo_open else "[", ")" if hi_open else "]"
            raise argparse.ArgumentTypeError(f"must be in {left}{lo:g}, {hi:g}{right}, got {v:g}")
        return v
    parse.__name__ = name
    return parse


positive_int = _int_type("positive_int", 1, MAX_COUNT)
"""Counts: epochs, batch, steps, queries, samples, threads."""
non_negative_int = _int_type("non_negative_int", 0, MAX_COUNT)
"""Counts that may be zero (e.g. `--bias-last`)."""
seed_int = _int_type("seed", 0, MAX_SEED)
"""Random seeds."""
learning_rate = _float_type("learning_rate", 0.0, LR_MAX, lo_open=True)
"""A learning rate: finite, > 0 and at most `LR_MAX` (see `check_lr` for per-method bounds)."""


def learning_rate_or_auto(text: str) -> float | str:
    """`--lr` of `train`: `auto` (the rate chosen for the run, `methods.lr_auto`) or a `learning_rate`."""
    return "auto" if str(text).strip().lower() == "auto" else learning_rate(text)
unit_interval = _float_type("unit_interval", 0.0, 1.0)
"""Fractions and EMA rates in [0, 1] (`--partial`, `--alpha-*`)."""
open_unit = _float_type("open_unit", 0.0, 1.0, lo_open=True)
"""Fractions in (0, 1] (`--channel-ratio`)."""
momentum = _float_type("momentum", 0.0, 1.0, hi_open=True)
"""SGD momentum in [0, 1): 1 never forgets a gradient and diverges."""


BLAS_THREADS = 1
"""Default of `--threads`: the engines' matrices are small, and on a busy machine extra BLAS
threads spin and slow training several fold (an epoch took 2x longer under contention)."""


def add_threads_option(p: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """`--threads N`: the BLAS threads of a command that computes; `mcutrain.cli.main` applies it
    (`blas_threads`) around the whole command."""
    p.add_argument("--threads", type=positive_int, default=BLAS_THREADS,
                   help=f"BLAS threads (default {BLAS_THREADS}: the engine's matrices are small, and on a "
                        "busy machine extra BLAS threads spin and slow the work several fold)")


def blas_threads(n: int | None):
    """A context that limits BLAS to `n` threads (none when `n` is None)."""
    import contextlib

    if n is None:
        return contextlib.nullcontext()
    from threadpoolctl import threadpool_limits
    return threadpool_limits(n, "blas")


def check_lr(method: str, lr: float, command: str = "train") -> None:
    """Refuse (ValueError) or warn (stderr) for a rate valid in type but implausible for `method`."""
    hi = LR_REFUSE_ABOVE.get(method)
    if hi is not None and lr > hi:
        raise ValueError(f"--lr {lr:g} is above {hi:g}: {method} diverges at such rates (its useful "
                         "rates are about 1e-3..1e-2); pass a smaller --lr")
    warn = LR_WARN_ABOVE.get(method)
    if warn is not None and lr > warn:
        print(f"mcutrain {command}: warning: --lr {lr:g} is above {warn:g}, far above the rates {method} "
              "is tuned with (0.05..2); expect divergence", file=sys.stderr)


def add_rounding_arg(p: argparse.ArgumentParser) -> None:
    """`--rounding`, for the commands that quantize a model (pretrain, import --calibrate).

    The mode is the new model's for its whole life (simulator, C, `.tflite`): `tflite` makes the
    simulation and the generated C compute exactly what TFLite Micro computes on the exported
    `.tflite`; `single` (the default, one exact rounding) is what a model without TFLM needs.
    """
    p.add_argument("--rounding", choices=ROUNDING_MODES, default=None,
                   help="requantization rounding of the new int8 model: 'single' (default: one rounding, "
                        "half away from zero) or 'tflite' (TFLite Micro's double rounding, so its .tflite "
                        "runs bit-exactly as simulated); docs/integer-semantics.md 6.1")
