"""Every training option of every method, declared once, and one builder per method.

Why one table: `train`, `plan`, `export` and `run` each used to declare their own options,
and their defaults drifted apart (`--queries` 50 or 8, `--batch` 32 or 1, `--lr` 0.01 or 0.05,
fqt `--precision` uint8 or int8). Here each option is one `Option` -- flag, type (the
validating types of `mcutrain.options`), default, help, the methods that take it and the
commands that offer it -- and every command builds its parser with `add_options`, the Python
API validates keyword arguments with `resolve_values`, and all of them build a method with
`build_method`, so a default or a check cannot differ between two entry points.

An option of another method is refused when given explicitly (`--queries is an option of zo,
not of fqt`). Parsers get the sentinel `UNSET` as every default, so "given" means given, even
when the value equals the default; `resolve` then fills in the declared defaults.

Example:
    >>> p = argparse.ArgumentParser()
    >>> add_options(p, "train")
    >>> v = resolve(p.parse_args(["--queries", "10"]), "train", "zo")
    >>> v.queries, v.batch
    (10, 32)
    >>> zo_config(v).queries
    10
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from mcutrain.graph import Graph
from mcutrain.methods.base import TrainingMethod
from mcutrain.methods.bp_qas import BPQASConfig
from mcutrain.methods.fqt_state import PRECISIONS, UPDATES, FQTConfig, precision
from mcutrain.methods.lr_auto import AUTO
from mcutrain.methods.qas import UPDATE_ROUNDINGS
from mcutrain.methods.trainable import internal_spec
from mcutrain.methods.zo import ZOConfig
from mcutrain.options import (
    learning_rate_or_auto,
    momentum,
    non_negative_int,
    open_unit,
    positive_int,
    seed_int,
    unit_interval,
)
from mcutrain.qmodel import QuantModel
from mcutrain.targets import TargetError, get_target

TRAIN_METHODS = ("fqt", "zo", "bp-qas")
"""Methods `mcutrain train` simulates (fqt covers the float32 path with `--precision float32`)."""
COMMANDS = ("train", "plan", "export", "run")
"""The commands whose parsers come from this table."""
ALL_METHODS = ("fqt", "zo", "bp-qas", "float", "none")
INT8_METHODS = ("zo", "bp-qas")
"""Methods that train the int8 graph itself (their only precision is int8)."""
COMMAND_METHODS = {"train": TRAIN_METHODS, "plan": ALL_METHODS, "export": ("none", "zo", "bp-qas", "fqt"),
                   "run": ("none", "zo", "bp-qas", "fqt")}
"""The methods each command offers (a refusal names only these)."""
FQT_UPDATES = ("auto", *UPDATES)
"""`--update`'s choices: auto resolves per target (`fqt_update`)."""
CALIB_SAMPLES = 64
"""Training samples that initialize the activation ranges of quantized methods."""


class FactoryError(ValueError):
    """A method or option the factory cannot build as asked; the message names the option."""


class _Unset:
    """The parser default of every factory option: tells "not given" from "given the default"."""

    def __repr__(self) -> str:
        return "UNSET"


UNSET: Any = _Unset()


@dataclass(frozen=True)
class Option:
    """One training option: how it is parsed, its one default, who takes it."""

    flag: str
    default: Any
    help: str
    methods: tuple[str, ...]
    """The methods the option configures; given with another method it is refused."""
    commands: tuple[str, ...] = COMMANDS
    type: Callable[[str], Any] | None = None
    """The validating parse (None with a bool default: a switch)."""
    choices: tuple[str, ...] | None = None
    metavar: str | None = None
    command_defaults: tuple[tuple[str, Any], ...] = ()
    """(command, default) where a command's default is not `default`: `--lr` is `auto` for train
    (the rate is chosen per run) and 0.01 for export and run (a number the C API is given)."""

    def default_for(self, command: str) -> Any:
        """The option's default in `command`."""
        return dict(self.command_defaults).get(command, self.default)

    @property
    def dest(self) -> str:
        return self.flag.lstrip("-").replace("-", "_")

    @property
    def switch(self) -> bool:
        return self.type is None and isinstance(self.default, bool)

    def parse(self, value: Any) -> Any:
        """A Python value checked as the command line checks its text (the API's path)."""
        if self.switch:
            if not isinstance(value, bool):
                raise FactoryError(f"{self.dest} must be True or False, got {value!r}")
            return value
        if value is None and self.default is None:
            return None
        if self.choices is not None and value not in self.choices:
            raise FactoryError(f"{self.dest} '{value}': use one of {', '.join(self.choices)}")
        if self.type is None:
            if not isinstance(value, str):
                raise FactoryError(f"{self.dest} must be a string, got {value!r}")
            return value
        if isinstance(value, bool) or not isinstance(value, int | float | str):
            raise FactoryError(f"{self.dest} must be a number, got {value!r}")
        try:
            return self.type(str(value))
        except argparse.ArgumentTypeError as e:
            raise FactoryError(f"{self.dest} {e}") from None


_TRAINING = ("fqt", "zo", "bp-qas", "float")

OPTIONS: tuple[Option, ...] = (
    # ------------------------------------------------------------ every method
    Option("--trainable", "all", "trainable layers: all | last:N | layers:a,b (plan also: auto | "
           "auto:BYTES; default all)", _TRAINING),
    Option("--epochs", 10, "passes over the training set (default 10)", _TRAINING, ("train",),
           positive_int),
    Option("--batch", 32, "samples per training step (default 32)", _TRAINING, type=positive_int),
    Option("--lr", AUTO, "learning rate. train: a number or auto (default: fqt's from the run's steps, "
           "zo's and bp-qas's from a short search on a held-out slice of the training split; "
           "docs/methods.md); export (the one the README suggests, the C API takes it per step) and run: "
           "a number (default 0.01)", _TRAINING, ("train", "export", "run"), learning_rate_or_auto,
           metavar="LR", command_defaults=(("export", 0.01), ("run", 0.01))),
    Option("--seed", 0, "seed of data draws, initialization and the method's random streams (default 0)",
           ALL_METHODS, ("train", "export", "run"), seed_int),
    # ------------------------------------------------------------ fqt
    Option("--precision", "int8", "number formats: fqt int8 (default), uint8 (the seed's), mixed "
           "(float32 errors), float32; zo and bp-qas: int8 only", ("fqt", *INT8_METHODS),
           choices=PRECISIONS),
    Option("--partial", 1.0, "fqt dynamic partial updates: lambda_min in [0, 1] (1 = off; the C step runs "
           "it at --batch 1; plan: planned at the worst case)", ("fqt",), type=unit_interval,
           metavar="LAMBDA_MIN"),
    Option("--partial-max", 1.0, "fqt partial updates: lambda_max in [LAMBDA_MIN, 1] (default 1)", ("fqt",),
           type=unit_interval, metavar="LAMBDA_MAX"),
    Option("--partial-output", False, "fqt: prune the output layer too (default: it always trains fully)",
           ("fqt",), ("train", "plan")),
    Option("--update", "auto", "fqt int8: how the weight update computes: float (float32, "
           "docs/integer-semantics.md 13.6-13.7) | integer (fixed point, 13.9: no float32 per weight) | "
           "auto (integer on a --target without an FPU, else float; default auto)", ("fqt",),
           choices=FQT_UPDATES),
    Option("--alpha-a", 0.1, "fqt EMA rate of activation ranges (default 0.1)", ("fqt",),
           ("train", "export", "run"), unit_interval),
    Option("--alpha-e", 0.1, "fqt EMA rate of error ranges (default 0.1)", ("fqt",),
           ("train", "export", "run"), unit_interval),
    Option("--alpha-w", 0.001, "fqt EMA rate of weight ranges (default 0.001)", ("fqt",),
           ("train", "export", "run"), unit_interval),
    Option("--alpha-norm", 0.1, "fqt EMA rate of the gradient standardization statistics (default 0.1)",
           ("fqt",), ("train", "export", "run"), unit_interval),
    # ------------------------------------------------------------ zo
    Option("--queries", 50, "zo: queries per layer and step (default 50)", ("zo",), type=positive_int),
    Option("--perturb", "mix", "zo: wp | np | mix | mix:LAYER | model-wp (default mix)", ("zo",)),
    Option("--sparse", "none", "zo: none | score:K | test:K (pick K of the trainable layers; plan: the K "
           "largest) | topk:R | randk:R (perturbation masks)", ("zo",), ("train", "plan"), metavar="SPEC"),
    Option("--workers", None, "zo: processes a step's queries split across, results identical for any "
           "count (default: the cores available to the process, os.sched_getaffinity; a step splits "
           "only when its queries hold at least 50M multiply-accumulates)", ("zo",), ("train",),
           positive_int, metavar="N"),
    Option("--max-step", ZOConfig.max_step, "zo: largest change of one int8 weight per update, in int8 "
           "steps, 0 to 254 (0: no limit)", ("zo",), ("train", "export", "run"), non_negative_int),
    Option("--no-gns", False, "zo: no GNS shrink (ablation)", ("zo",), ("train", "export", "run")),
    Option("--no-qas", False, "zo / bp-qas: no QAS scaling (ablation)", INT8_METHODS,
           ("train", "export", "run")),
    Option("--update-rounding", "stochastic", "zo / bp-qas: how an int8 weight update rounds: stochastic "
           "(one xorshift32 draw per weight: a step below half a weight step still moves it with that "
           "probability; measured in docs/methods.md) | nearest (default stochastic)", INT8_METHODS,
           ("train", "export", "run"), choices=UPDATE_ROUNDINGS),
    # ------------------------------------------------------------ bp-qas
    Option("--momentum", 0.0, "bp-qas: SGD momentum in [0, 1) (default 0)", ("bp-qas",),
           ("train", "export", "run"), momentum),
    Option("--bias-last", 0, "bp-qas: also train biases of the last N layers (default 0)", ("bp-qas",),
           type=non_negative_int),
    Option("--channel-ratio", 1.0, "bp-qas: fraction of input channels whose weights train (static sparse "
           "update; default 1)", ("bp-qas",), ("train",), open_unit),
)
BY_DEST: dict[str, Option] = {o.dest: o for o in OPTIONS}


def options_of(command: str) -> tuple[Option, ...]:
    """The options `command` offers, in table order."""
    if command not in COMMANDS:
        raise ValueError(f"unknown command {command!r}; the factory serves {', '.join(COMMANDS)}")
    return tuple(o for o in OPTIONS if command in o.commands)


def defaults(command: str) -> dict[str, Any]:
    """{dest: default} of `command`'s options."""
    return {o.dest: o.default_for(command) for o in options_of(command)}


def help_with_default(o: Option) -> str:
    """`o.help`, ending in "(default X)" from the table when the text does not say its default:
    the parser's own default is `UNSET`, so argparse cannot show it."""
    if "default" in o.help:
        return o.help
    shown = f"{o.default:g}" if isinstance(o.default, float) else str(o.default)
    return f"{o.help} (default {shown})"


def add_options(p: argparse.ArgumentParser | argparse._ArgumentGroup, command: str,
                skip: Iterable[str] = ()) -> None:
    """Add `command`'s options to `p`, each with the default `UNSET` (see `resolve`)."""
    skip = set(skip)
    for o in options_of(command):
        if o.dest in skip:
            continue
        if o.switch:
            p.add_argument(o.flag, action="store_const", const=True, default=UNSET, help=o.help)
        else:
            p.add_argument(o.flag, type=o.type, default=UNSET, choices=o.choices, metavar=o.metavar,
                           help=help_with_default(o))


def refuse_foreign(given: Iterable[str], method: str, command: str) -> None:
    """FactoryError for the first option in `given` (dests) that `method` does not take."""
    for dest in given:
        o = BY_DEST[dest]
        if method not in o.methods:
            owners = [m for m in o.methods if m != "none" and m in COMMAND_METHODS[command]]
            names = owners[0] if len(owners) == 1 else f"{', '.join(owners[:-1])} and {owners[-1]}"
            raise FactoryError(f"{o.flag} is an option of {names}, not of {method}")


def resolve(args: argparse.Namespace, command: str, method: str) -> argparse.Namespace:
    """Fill `args`' unset factory options with their defaults (in place) after refusing foreign ones.

    Then checks what no single option can: lambda_min <= lambda_max, int8 for zo and bp-qas.
    """
    if method not in ALL_METHODS:
        raise FactoryError(f"unknown method '{method}'; available: {', '.join(ALL_METHODS)}")
    opts = options_of(command)
    refuse_foreign([o.dest for o in opts if getattr(args, o.dest, UNSET) is not UNSET], method, command)
    for o in opts:
        if getattr(args, o.dest, UNSET) is UNSET:
            setattr(args, o.dest, o.default_for(command))
    if command != "train" and getattr(args, "lr", None) == AUTO:
        raise FactoryError(f"--lr auto chooses the rate of a simulated run (train); {command} takes a "
                           "number, e.g. --lr 0.01 or the lr_used of `train --json`")
    check_values(args, method)
    return args


def resolve_values(command: str, method: str, given: Mapping[str, Any]) -> argparse.Namespace:
    """The API's `resolve`: keyword values (by dest) checked like the command line's text."""
    known = {o.dest: o for o in options_of(command)}
    unknown = sorted(set(given) - set(known))
    if unknown:
        raise FactoryError(f"{command} takes no option {', '.join(unknown)}; its options: "
                           f"{', '.join(known)}")
    args = argparse.Namespace(**{d: known[d].parse(v) for d, v in given.items()})
    return resolve(args, command, method)


def check_values(v: argparse.Namespace, method: str) -> None:
    """The checks between options (FactoryError), shared by every command."""
    lmin, lmax = getattr(v, "partial", 1.0), getattr(v, "partial_max", 1.0)
    if not 0.0 <= lmin <= lmax <= 1.0:
        raise FactoryError(f"--partial {lmin} / --partial-max {lmax}: need "
                           "0 <= LAMBDA_MIN <= LAMBDA_MAX <= 1")
    if method in INT8_METHODS and getattr(v, "precision", "int8") != "int8":
        raise FactoryError(f"--precision {v.precision}: {method} trains the int8 graph; use --precision int8")


# ---------------------------------------------------------------- one builder per method


def fqt_update(v: argparse.Namespace) -> str:
    """`--update` resolved: auto is integer for int8 on a `--target` without an FPU (the M0+, RV32IMC:
    the float32 update's soft-float calls dominate their step), float otherwise (no target: train)."""
    update = getattr(v, "update", "auto")
    if update == "integer" and v.precision != "int8":
        raise FactoryError(f"--update integer: the integer update is int8's; --precision {v.precision} "
                           "updates in float32 (use --precision int8, or leave --update out)")
    if update != "auto":
        return update
    target = getattr(v, "target", None)
    if v.precision != "int8" or not target:
        return "float"
    try:
        return "float" if get_target(target).fpu else "integer"
    except TargetError:                   # an unknown target is refused where it is used
        return "float"


def fqt_config(v: argparse.Namespace, c_twin: bool = False) -> FQTConfig:
    """FQT's config. `c_twin`: mixed/float32 sum floats in the C step's order (`exact_float_order`)."""
    return FQTConfig(precision=v.precision, trainable=v.trainable, alpha_a=v.alpha_a, alpha_e=v.alpha_e,
                     alpha_w=v.alpha_w, alpha_norm=v.alpha_norm, lambda_min=v.partial,
                     lambda_max=v.partial_max, partial_output=getattr(v, "partial_output", False),
                     seed=v.seed, exact_float_order=c_twin and precision(v.precision).errors == "f32",
                     update=fqt_update(v))


def zo_config(v: argparse.Namespace, trainable: str | None = None, mask: str = "none") -> ZOConfig:
    """ZO's config; `trainable`/`mask` as `--sparse` resolved them (`zo_sparse`). Its RNG: seed + 1."""
    return ZOConfig(trainable=v.trainable if trainable is None else trainable, queries=v.queries,
                    perturb=v.perturb, gns=not v.no_gns, qas=not v.no_qas, mask=mask, seed=v.seed + 1,
                    update_rounding=v.update_rounding, max_step=v.max_step)


def bp_qas_config(v: argparse.Namespace) -> BPQASConfig:
    """BP-QAS's config. Its RNG (stochastic update rounding only): seed + 1, as zo's."""
    return BPQASConfig(trainable=v.trainable, bias_last=v.bias_last,
                       channel_ratio=getattr(v, "channel_ratio", 1.0), momentum=v.momentum, qas=not v.no_qas,
                       update_rounding=v.update_rounding, seed=v.seed + 1)


def float_options(v: argparse.Namespace) -> dict[str, Any]:
    """The float method's settings (it has no config class: its optimizer options are keywords)."""
    return {"trainable": v.trainable, "batch": v.batch}


def zo_sparse(v: argparse.Namespace, qm: QuantModel, calib: np.ndarray,
              labels: Callable[[], np.ndarray] | None) -> tuple[str, str]:
    """(trainable, mask) of `--sparse`: score:K / test:K pick K layers by the ZO score on the
    calibration samples (`labels()` gives theirs), topk:R / randk:R are perturbation masks."""
    from mcutrain.methods.trainable import resolve_trainable
    from mcutrain.methods.zo_select import select_by_score

    sparse = getattr(v, "sparse", "none")
    if sparse == "none":
        return v.trainable, "none"
    if sparse.startswith(("topk:", "randk:")):
        return v.trainable, sparse
    if sparse.startswith(("score:", "test:")) and labels is not None:
        try:
            k = int(sparse.split(":", 1)[1])
        except ValueError:
            raise FactoryError(f"--sparse '{sparse}': K must be a whole number") from None
        cands = resolve_trainable(qm.graph, v.trainable)
        cfg = ZOConfig(queries=v.queries, perturb=v.perturb, seed=v.seed + 1)
        # NOTE: test-and-pick needs validation data no command splits off; both rules use the ZO
        # score on the calibration samples.
        return "layers:" + ",".join(select_by_score(qm, calib, labels(), cands, k, cfg)), "none"
    raise FactoryError(f"--sparse '{sparse}': use none, score:K, test:K, topk:R or randk:R")


def build_method(method: str, v: argparse.Namespace, model: Graph | QuantModel,
                 calib: np.ndarray | None = None, c_twin: bool = False,
                 labels: Callable[[], np.ndarray] | None = None,
                 source_names: Mapping[str, str] | None = None) -> TrainingMethod | None:
    """The training method `method` with resolved options `v` on `model` (None for 'none').

    fqt int8 trains a QuantModel's integers as they are (in its rounding mode), fqt
    uint8/mixed/float32 start from them converted into their formats (`fqt_seed_start`); fqt on
    a float graph starts from ranges on `calib` (a few training samples; without them uniform
    [0, 1) inputs of `v.seed`, as `--init random`'s PTQ); zo and bp-qas train an int8 model: a
    QuantModel as is, a float graph quantized first (PTQ, min/max over `calib`). `c_twin`: the
    simulator a generated C step is compared with bit for bit. `source_names`: an imported
    model's original layer names, which `--trainable layers:` also accepts.
    """
    from mcutrain.engines import ptq
    from mcutrain.methods.bp_qas import BPQASMethod
    from mcutrain.methods.fqt import FQT
    from mcutrain.methods.zo import ZOMethod

    if method == "none":
        return None
    if method not in TRAIN_METHODS:
        raise FactoryError(f"unknown method '{method}'; available: {', '.join(TRAIN_METHODS)}")
    graph = model.graph if isinstance(model, QuantModel) else model
    if source_names is None and isinstance(model, QuantModel):
        from mcutrain.methods.trainable import source_names_of
        source_names = source_names_of(model.provenance)
    try:     # an imported model's original layer names -> its IR names (idempotent)
        v.trainable = internal_spec(graph, v.trainable, dict(source_names or {}))
        if method == "fqt":
            if calib is None:
                calib = np.random.default_rng(v.seed).random((CALIB_SAMPLES, *graph.input_shape),
                                                             dtype=np.float32)
            return FQT(model, fqt_config(v, c_twin), np.asarray(calib, np.float32))
        qm = model if isinstance(model, QuantModel) else ptq.quantize_model(graph, calib)
        if method == "zo":
            trainable, mask = zo_sparse(v, qm, calib, labels)
            return ZOMethod(qm, zo_config(v, trainable, mask), workers=getattr(v, "workers", 1))
        return BPQASMethod(qm, bp_qas_config(v))
    except FactoryError:
        raise
    except ValueError as e:
        raise FactoryError(str(e)) from None


def summary(method: str, v: argparse.Namespace) -> dict[str, Any]:
    """The method's settings in `train --json`: its precision (fqt: and its update, `fqt_update`),
    and zo's queries (bp-qas: 0)."""
    if method == "fqt":
        return {"precision": v.precision, "update": fqt_update(v)}
    return {"precision": "int8", "queries": v.queries if method == "zo" else 0}
