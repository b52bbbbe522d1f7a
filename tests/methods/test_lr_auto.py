"""`--lr auto`: FQT's rate from the run's steps, zo's and bp-qas's from a short search on a held-out
slice of the training split; deterministic, reported, and leaving the method as it came."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from mcutrain import zoo
from mcutrain.api import training
from mcutrain.api.training import train
from mcutrain.cli import main
from mcutrain.data import load_dataset
from mcutrain.engines import int_engine, ptq
from mcutrain.methods.bp_qas import BPQASConfig, BPQASMethod
from mcutrain.methods.lr_auto import (
    FOLDS,
    FQT_KNEE_STEPS,
    FQT_MAX,
    FQT_TRAVEL,
    SEARCH_RATES,
    fqt_rate,
    holdout_scores,
    holdout_split,
    pick,
    run_steps,
    search_folds,
    search_rate,
    search_steps,
)

RUN = {"train_samples": 96, "test_samples": 40, "epochs": 1, "batch": 32}


def test_fqt_rate_shrinks_with_the_run_and_is_capped():
    long, short = fqt_rate(5625), fqt_rate(10)
    assert long.lr == FQT_TRAVEL / 5625 and "5,625 steps" in long.reason
    assert short.lr == FQT_MAX and "(the cap)" in short.reason
    assert run_steps(3, 60000, 32) == 5625
    ten = fqt_rate(run_steps(10, 60000, 32))       # beyond the knee: 1 / sqrt(steps), continuous at it
    assert ten.lr == FQT_TRAVEL / math.sqrt(FQT_KNEE_STEPS * 18750)
    assert "sqrt(5,625 x 18,750 steps)" in ten.reason
    assert 0.00024 < ten.lr < 0.00032 and fqt_rate(FQT_KNEE_STEPS + 1).lr < long.lr


def test_holdout_is_part_of_the_training_split_and_search_steps_are_bounded():
    fit_idx, val_idx = holdout_split(100, seed=3)
    assert len(val_idx) == 20 and sorted(np.concatenate([fit_idx, val_idx])) == list(range(100))
    assert np.array_equal(holdout_split(100, seed=3)[1], val_idx)
    assert not np.array_equal(holdout_split(100, seed=4)[1], val_idx)
    assert [search_steps(s) for s in (2, 20, 60, 10_000)] == [2, 20, 20, 20]


def test_a_small_split_is_searched_in_folds_that_hold_out_every_sample_once():
    folds = search_folds(100, seed=3)
    assert len(folds) == FOLDS
    held = np.concatenate([v for _, v in folds])
    assert sorted(held) == list(range(100))                      # each sample held out exactly once
    assert all(not set(f) & set(v) and len(f) + len(v) == 100 for f, v in folds)
    big = search_folds(6000, seed=3)                              # 1,000 held out: one slice, as before
    assert len(big) == 1 and all(np.array_equal(a, b) for a, b in zip(big[0], holdout_split(6000, seed=3)))
    assert len(search_folds(7, seed=0)) == 1                      # too small to fold


def _trials(losses, scores, held_losses=(1.0,) * 5):
    return [{"lr": lr, "start_loss": 2.0, "loss": loss, "score": score, "holdout_loss": held}
            for lr, loss, score, held in zip((0.01, 0.03, 0.1, 0.3, 1.0), losses, scores, held_losses,
                                             strict=True)]


def test_pick_keeps_a_margin_below_a_collapsing_rate():
    nan = float("nan")
    # 0.1 scores best but 0.3 ends above its start loss and 1 diverged: 0.1 is at the edge, 0.03 wins
    best, excluded = pick(_trials([1.0, 0.9, 1.1, 3.0, nan], [0.70, 0.72, 0.80, 0.10, nan]))
    assert best["lr"] == 0.03 and excluded == 1
    # nothing collapses: the top rate needs no higher neighbour; ties go to the lower held-out loss
    # (not the training loss), then to the lower rate
    best, excluded = pick(_trials([1.5, 1.4, 1.3, 1.2, 1.1], [0.5, 0.6, 0.6, 0.7, 0.7], [1, 1, 1, 0.9, 0.8]))
    assert best["lr"] == 1.0 and excluded == 0
    best, _ = pick(_trials([1.5, 1.4, 1.3, 1.1, 1.2], [0.5, 0.6, 0.6, 0.7, 0.7], [1, 1, 1, 0.9, 0.8]))
    assert best["lr"] == 1.0
    best, _ = pick(_trials([1.5, 1.4, 1.3, 1.2, 1.1], [0.5, 0.6, 0.6, 0.7, 0.7], [1, 1, 1, 0.8, 0.9]))
    assert best["lr"] == 0.3
    best, _ = pick(_trials([1.5, 1.4, 1.3, 1.2, 1.1], [0.5, 0.6, 0.6, 0.7, 0.7]))
    assert best["lr"] == 0.3
    assert pick(_trials([1.0, 3.0, 3.0, nan, nan], [0.7, 0.1, 0.1, nan, nan])) == (None, 1)
    one_step = [{**t, "steps": 1} for t in _trials([2.0] * 5, [0.5, 0.6, 0.7, 0.6, 0.5])]
    assert pick(one_step)[0]["lr"] == 0.1          # one step: no second half to judge a collapse by


@pytest.fixture(scope="module")
def digits():
    ds = load_dataset("digits", seed=0)
    return ds.x_train[:96], ds.y_train[:96]


def test_holdout_scores_count_what_predict_gets_right_and_the_float_cross_entropy(digits):
    x, y = digits
    qm = ptq.quantize_model(zoo.build("digits-cnn", seed=0), x[:32])
    method = BPQASMethod(qm, BPQASConfig())
    right, loss = holdout_scores(method, x, y)
    assert right == int(np.sum(method.predict(x) == y))
    out = qm.act_qparams[qm.graph.output]
    z = out.dequantize(int_engine.forward(qm, int_engine.quantize_input(qm, x))).astype(np.float64)
    expected = -np.log(np.exp(z) / np.exp(z).sum(axis=1, keepdims=True))[np.arange(len(y)), y].sum()
    assert loss == pytest.approx(expected, rel=1e-9) and loss > 0


def test_search_is_deterministic_and_restores_the_method(digits):
    x, y = digits
    qm = ptq.quantize_model(zoo.build("digits-cnn", seed=0), x[:32])
    method = BPQASMethod(qm, BPQASConfig())
    before_meta, before = method.state()
    choices = [search_rate("bp-qas", method, x, y, steps=3, batch=32, seed=0, progress=False)
               for _ in range(2)]
    assert choices[0] == choices[1]
    assert choices[0].lr in SEARCH_RATES["bp-qas"] and len(choices[0].trials) == len(SEARCH_RATES["bp-qas"])
    after_meta, after = method.state()
    assert after_meta == before_meta and all(np.array_equal(after[k], before[k]) for k in before)


def test_auto_is_the_default_and_equals_the_explicit_run_of_its_rate():
    auto = train(None, "digits", "bp-qas", arch="digits-cnn", **RUN).result
    assert auto["lr_used"] in SEARCH_RATES["bp-qas"] and auto["lr_reason"].startswith("auto: search over")
    given = train(None, "digits", "bp-qas", arch="digits-cnn", lr=auto["lr_used"], **RUN).result
    assert given["lr_reason"] == "given (--lr)" and given["lr_used"] == auto["lr_used"]
    assert given["history"] == auto["history"] and given["accuracy_after"] == auto["accuracy_after"]


def test_explicit_lr_is_used_as_given(capsys):
    argv = ["train", "--arch", "digits-cnn", "--init", "random", "--dataset", "digits", "--method", "fqt",
            "--train-samples", "64", "--test-samples", "40", "--epochs", "1"]
    assert main([*argv, "--lr", "0.0123", "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert (res["lr_used"], res["lr_reason"]) == (0.0123, "given (--lr)")
    assert main(argv) == 0           # the human output says the rate and why
    assert f"learning rate {fqt_rate(2).lr:g}: auto: 3 / 2 steps" in capsys.readouterr().out


def test_lr_must_be_a_number_or_auto(capsys):
    with pytest.raises(SystemExit):
        main(["train", "--arch", "digits-cnn", "--init", "random", "--dataset", "digits", "--lr", "fast"])
    assert "must be a number, got 'fast'" in capsys.readouterr().err


def test_resume_reuses_the_rate_the_first_run_chose(tmp_path, capsys, monkeypatch):
    argv = ["train", "--arch", "digits-cnn", "--init", "random", "--dataset", "digits", "--method", "bp-qas",
            "--train-samples", "64", "--test-samples", "20", "--batch", "16", "--json"]
    ckpt = tmp_path / "c.npz"
    assert main([*argv, "--epochs", "1", "--checkpoint", str(ckpt)]) == 0
    first = json.loads(capsys.readouterr().out)
    assert first["lr_reason"].startswith("auto: search over")

    def no_second_choice(*args, **kwargs):
        raise AssertionError("a resumed --lr auto run chose its rate again")

    monkeypatch.setattr(training, "choose_rate", no_second_choice)
    assert main([*argv, "--epochs", "2", "--resume", str(ckpt), "--resume-changed", "epochs"]) == 0
    resumed = json.loads(capsys.readouterr().out)
    assert resumed["lr_used"] == first["lr_used"] and "the run resumed from 'c.npz'" in resumed["lr_reason"]
    assert len(resumed["history"]) == 2


def test_resume_from_an_unreadable_checkpoint_is_a_clear_error(tmp_path, capsys):
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"not a checkpoint")
    argv = ["train", "--arch", "digits-cnn", "--init", "random", "--dataset", "digits", "--method", "bp-qas",
            "--train-samples", "64", "--test-samples", "20", "--resume", str(bad)]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith("mcutrain train: error: ") and "bad.npz" in err
