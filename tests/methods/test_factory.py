"""The method factory: every option declared once, one default per option for every command,
another method's option refused, and the configs it builds equal the ones the commands built."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from mcutrain import cli
from mcutrain.methods import factory
from mcutrain.methods.bp_qas import BPQASConfig
from mcutrain.methods.fqt_state import FQTConfig
from mcutrain.methods.zo import ZOConfig

COMMANDS_DIR = Path(factory.__file__).resolve().parents[1] / "commands"

MINIMAL_ARGV = {
    "train": ["--dataset", "digits"],
    "plan": ["--method", "fqt", "--target", "rp2040"],
    "export": ["--target", "cortex-m4", "-o", "out"],
    "run": ["--target", "cortex-m4", "--dataset", "digits"],
}


def subparser(command: str) -> argparse.ArgumentParser:
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[command]


def test_every_option_is_declared_once():
    flags = [o.flag for o in factory.OPTIONS]
    assert len(flags) == len(set(flags))
    for path in (COMMANDS_DIR / f"{c}.py" for c in factory.COMMANDS):   # none declares one itself
        text = path.read_text()
        declared = [f for f in flags if f'add_argument("{f}"' in text]
        assert not declared, f"{path.name} declares {declared}; they come from methods/factory.py"


@pytest.mark.parametrize("command", factory.COMMANDS)
def test_parser_defaults_are_the_factorys(command):
    p = subparser(command)
    offered = {o.dest for o in factory.options_of(command)}
    assert offered <= {a.dest for a in p._actions}
    args = p.parse_args(MINIMAL_ARGV[command])
    method = "fqt" if command in ("train", "plan") else "none"
    factory.resolve(args, command, method)
    assert {d: getattr(args, d) for d in offered} == factory.defaults(command)


def test_defaults_agree_between_commands():
    seen: dict[str, set] = {}
    for command in factory.COMMANDS:
        for dest, value in factory.defaults(command).items():
            seen.setdefault(dest, set()).add(repr(value))
    # NOTE: train's rate is chosen per run (`--lr auto`); export and run keep the rate the C API suggests
    assert {d: v for d, v in seen.items() if len(v) > 1} == {"lr": {"'auto'", "0.01"}}
    assert factory.BY_DEST["queries"].default == 50 and factory.BY_DEST["batch"].default == 32
    assert factory.BY_DEST["lr"].default == "auto" and factory.BY_DEST["precision"].default == "int8"
    assert factory.defaults("export")["lr"] == factory.defaults("run")["lr"] == 0.01


@pytest.mark.parametrize(("command", "method", "argv", "message"), [
    ("train", "fqt", ["--queries", "50"], "--queries is an option of zo, not of fqt"),
    ("train", "zo", ["--partial", "1.0"], "--partial is an option of fqt, not of zo"),
    ("train", "bp-qas", ["--no-gns"], "--no-gns is an option of zo, not of bp-qas"),
    ("export", "none", ["--momentum", "0"], "--momentum is an option of bp-qas, not of none"),
    ("run", "fqt", ["--bias-last", "0"], "--bias-last is an option of bp-qas, not of fqt"),
    ("train", "fqt", ["--update-rounding", "stochastic"],
     "--update-rounding is an option of zo and bp-qas, not of fqt"),
    ("plan", "float", ["--perturb", "mix"], "--perturb is an option of zo, not of float"),
])
def test_another_methods_option_is_refused_even_at_its_default(command, method, argv, message):
    args = subparser(command).parse_args([*MINIMAL_ARGV[command], *argv])
    with pytest.raises(factory.FactoryError, match=message):
        factory.resolve(args, command, method)


def test_refusal_reaches_the_user_as_one_line(capsys):
    assert cli.main(["train", "--arch", "digits-cnn", "--init", "random", "--dataset", "digits",
                     "--method", "fqt", "--queries", "10"]) == 1
    assert capsys.readouterr().err == "mcutrain train: error: --queries is an option of zo, not of fqt\n"


def defaults_of(command: str, method: str) -> argparse.Namespace:
    return factory.resolve_values(command, method, {})


# What the commands built from their defaults before the factory (train's own defaults; export and
# run built fqt without lambda_max, i.e. 1.0). Only zo's queries in `run` changed (8 -> 50).
OLD_CONFIGS = [
    ("train", "fqt", FQTConfig(precision="int8", trainable="all", alpha_a=0.1, alpha_e=0.1, alpha_w=0.001,
                               alpha_norm=0.1, lambda_min=1.0, lambda_max=1.0, partial_output=False, seed=0)),
    ("export", "fqt", FQTConfig(precision="int8", trainable="all", alpha_a=0.1, alpha_e=0.1, alpha_w=0.001,
                                alpha_norm=0.1, lambda_min=1.0, seed=0)),
    ("train", "zo", ZOConfig(trainable="all", queries=50, perturb="mix", gns=True, qas=True, mask="none",
                             seed=1, update_rounding="stochastic")),
    ("export", "zo", ZOConfig(trainable="all", queries=50, perturb="mix", gns=True, qas=True, seed=1,
                              update_rounding="stochastic")),
    ("train", "bp-qas", BPQASConfig(trainable="all", bias_last=0, channel_ratio=1.0, momentum=0.0, qas=True,
                                    update_rounding="stochastic", seed=1)),
    ("run", "bp-qas", BPQASConfig(trainable="all", bias_last=0, momentum=0.0, qas=True,
                                  update_rounding="stochastic", seed=1)),
]
BUILDERS = {"fqt": factory.fqt_config, "zo": factory.zo_config, "bp-qas": factory.bp_qas_config}


@pytest.mark.parametrize(("command", "method", "old"), OLD_CONFIGS)
def test_configs_from_defaults_equal_the_old_ones(command, method, old):
    assert BUILDERS[method](defaults_of(command, method)) == old


def test_options_reach_the_config():
    v = factory.resolve_values("train", "fqt", {"precision": "mixed", "partial": 0.2, "partial_max": 0.8,
                                                "alpha_w": 0.01, "seed": 3})
    cfg = factory.fqt_config(v, c_twin=True)
    assert (cfg.precision, cfg.lambda_min, cfg.lambda_max, cfg.alpha_w, cfg.seed) == \
        ("mixed", 0.2, 0.8, 0.01, 3)
    assert cfg.exact_float_order is True and factory.fqt_config(v).exact_float_order is False
    zo = factory.zo_config(factory.resolve_values("run", "zo", {"queries": 8, "no_gns": True, "seed": 4}))
    assert (zo.queries, zo.gns, zo.seed) == (8, False, 5)


@pytest.mark.parametrize(("given", "message"), [
    ({"batch": 0}, "batch must be in 1.."),
    ({"lr": float("nan")}, "lr must be a finite number"),
    ({"partial": 0.9, "partial_max": 0.5}, "need 0 <= LAMBDA_MIN <= LAMBDA_MAX <= 1"),
    ({"precision": "int4"}, "precision 'int4': use one of"),
    ({"no_qas": "yes"}, "no_qas must be True or False"),
    ({"bogus": 1}, "train takes no option bogus"),
])
def test_api_values_are_checked_like_the_command_line(given, message):
    with pytest.raises(factory.FactoryError, match=message):
        factory.resolve_values("train", "fqt", given)


def test_int8_methods_refuse_other_precisions():
    with pytest.raises(factory.FactoryError, match="zo trains the int8 graph"):
        factory.resolve_values("export", "zo", {"precision": "uint8"})
