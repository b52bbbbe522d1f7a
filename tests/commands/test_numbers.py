"""Every number a user gives is checked at the interface: one `error:` line, exit 1 or 2."""

from __future__ import annotations

import argparse

import pytest

from mcutrain import options as N
from mcutrain.cli import main

TRAIN = ["train", "--arch", "digits-cnn", "--init", "random", "--dataset", "digits", "--epochs", "1",
         "--train-samples", "40", "--test-samples", "20"]


def _exit(capsys, argv) -> tuple[int, str]:
    try:
        code = main(argv)
    except SystemExit as e:
        code = e.code
    return code, capsys.readouterr().err


@pytest.mark.parametrize("extra,message", [
    (["--lr", "nan"], "argument --lr: must be a finite number"),
    (["--lr", "inf"], "argument --lr: must be a finite number"),
    (["--lr", "-1"], "argument --lr: must be in (0, 1000]"),
    (["--lr", "0"], "argument --lr: must be in (0, 1000]"),
    (["--lr", "1e30"], "argument --lr: must be in (0, 1000]"),
    (["--lr", "10"], "--lr 10 is above 1: fqt diverges"),
    (["--epochs", "0"], "argument --epochs: must be in 1.."),
    (["--batch", "0"], "argument --batch: must be in 1.."),
    (["--batch", "two"], "argument --batch: must be a whole number"),
    (["--seed", "-3"], "argument --seed: must be in 0.."),
    (["--partial", "1.5"], "argument --partial: must be in [0, 1]"),
    (["--alpha-a", "nan"], "argument --alpha-a: must be a finite number"),
    (["--method", "zo", "--queries", "0"], "argument --queries: must be in 1.."),
    (["--method", "bp-qas", "--momentum", "1"], "argument --momentum: must be in [0, 1)"),
    (["--method", "bp-qas", "--channel-ratio", "0"], "argument --channel-ratio: must be in (0, 1]"),
    (["--train-samples", "0"], "argument --train-samples: must be in 1.."),
])
def test_train_refuses_numbers_with_one_error_line(capsys, extra, message):
    code, err = _exit(capsys, [*TRAIN, *extra])
    assert code in (1, 2)
    assert message in err
    assert sum("error:" in line for line in err.splitlines()) == 1 and "Traceback" not in err


@pytest.mark.parametrize("argv,message", [
    (["pretrain", "--arch", "digits-cnn", "--dataset", "digits", "-o", "m.npz", "--threads", "0"],
     "argument --threads"),
    (["pretrain", "--arch", "digits-cnn", "--dataset", "digits", "-o", "m.npz",
      "--calibration-samples", "-1"], "argument --calibration-samples"),
    (["plan", "--arch", "digits-cnn", "--method", "zo", "--target", "nrf52840", "--queries", "nan"],
     "argument --queries"),
    (["plan", "--arch", "digits-cnn", "--method", "fqt", "--target", "nrf52840", "--input-size", "0"],
     "argument --input-size"),
    (["run", "--arch", "digits-cnn", "--init", "random", "--dataset", "digits", "--target", "cortex-m4",
      "--steps", "0"], "argument --steps"),
    (["run", "--arch", "digits-cnn", "--init", "random", "--dataset", "digits", "--target", "cortex-m4",
      "--method", "zo", "--lr", "nan"], "argument --lr"),
    (["export", "--arch", "digits-cnn", "--init", "random", "--target", "cortex-m4", "-o", "out",
      "--bias-last", "-1"], "argument --bias-last"),
    (["report", ".", "--batch", "0"], "argument --batch"),
    (["datasets", "--seed", "x"], "argument --seed"),
])
def test_other_commands_refuse_numbers(capsys, argv, message):
    code, err = _exit(capsys, argv)
    assert code == 2 and message in err


def test_zo_warns_about_large_rates_but_runs(capsys):
    code, err = _exit(capsys, [*TRAIN, "--method", "zo", "--queries", "1", "--lr", "20", "--json"])
    assert "warning: --lr 20 is above 10" in err
    assert code in (0, 1) and "Traceback" not in err     # a diverged loss is an error line, not a crash


def test_the_types_accept_what_is_meant():
    assert N.positive_int("7") == 7 and N.learning_rate("3e-3") == 0.003 and N.unit_interval("1") == 1.0
    with pytest.raises(argparse.ArgumentTypeError):
        N.positive_int("1.5")


def test_fit_refuses_bad_rates():
    import numpy as np

    from mcutrain import zoo
    from mcutrain.methods.float import FloatMethod
    from mcutrain.methods.loop import fit

    x = np.zeros((4, 8, 8, 1), np.float32)
    y = np.array([0, 1, 0, 1])
    m = FloatMethod(zoo.build("digits-cnn"))
    for lr in (float("nan"), float("inf"), 0.0, -1.0):
        with pytest.raises(ValueError, match="learning rate must be a finite number > 0"):
            fit(m, x, y, x, y, epochs=1, batch=2, lr=lr, progress=False)
