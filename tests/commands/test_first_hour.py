"""The first hour of a new user (issue 18): every mistake gets one `error:` line saying what to do.

Each test runs the command line as a user types it and checks the exit status, the message
and that no traceback reaches the terminal. Mistakes refused by argparse exit 2, the ones the
commands find exit 1; outputs that could not be written are refused before any work.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from commands.first_hour_cli import ENV, RANDOM, cli
from mcutrain import io, zoo
from mcutrain.cli import MODULE_NAMES, main, resume_hint


def error_line(capsys) -> str:
    """The one `error:` line of a refused command (argparse adds its usage lines above it)."""
    lines = [ln for ln in capsys.readouterr().err.splitlines() if "error:" in ln]
    assert len(lines) == 1, lines
    return lines[0]


def refused(capsys, status: int, *argv: str) -> str:
    with pytest.raises(SystemExit) as e:        # argparse exits from inside parse_args
        main(list(argv))
    assert e.value.code == status
    return error_line(capsys)


@pytest.fixture(scope="module")
def int8_model(tmp_path_factory) -> Path:
    """An int8 digits model (8x8 inputs) as `mcutrain train -o` writes it."""
    path = tmp_path_factory.mktemp("m") / "m.npz"
    assert main(["train", *RANDOM, "--dataset", "digits", "--epochs", "1", "--train-samples", "64",
                 "--test-samples", "32", "-o", str(path)]) == 0
    return path


@pytest.fixture(scope="module")
def float_model(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("f") / "float.npz"
    io.save(path, zoo.build("digits-cnn", 10, seed=1))
    return path


COUNT_AND_RATE = [("--epochs", "0", "argument --epochs: must be in 1.."),
                  ("--batch", "0", "argument --batch: must be in 1.."),
                  ("--lr", "nan", "argument --lr: must be a finite number"),
                  ("--lr", "-0.01", "argument --lr: must be in (0, ")]
COMMAND_ARGS = {"train": ["--dataset", "digits"],
                "export": ["--method", "zo", "--target", "cortex-m4", "-o", "out"],
                "run": ["--method", "zo", "--target", "cortex-m4", "--dataset", "digits"]}


@pytest.mark.parametrize("command,option,value,says", [
    (c, *case) for c in COMMAND_ARGS for case in COUNT_AND_RATE if c == "train" or case[0] != "--epochs"])
def test_counts_and_rates_that_cannot_be_meant(capsys, command, option, value, says):
    assert says in refused(capsys, 2, command, *RANDOM, *COMMAND_ARGS[command], option, value)


def test_a_refusal_reaches_the_terminal_without_traceback(tmp_path):
    r = cli("train", *RANDOM, "--dataset", "digits", "--epochs", "0", cwd=tmp_path)
    assert r.returncode == 2
    assert r.stderr.splitlines()[-1] == ("mcutrain train: error: argument --epochs: must be in "
                                         "1..2,147,483,648, got 0")


def test_options_of_the_other_method_are_refused(capsys):
    assert main(["train", *RANDOM, "--dataset", "digits", "--method", "zo", "--partial", "0.5"]) == 1
    assert "--partial is an option of fqt, not of zo" in error_line(capsys)
    assert main(["export", *RANDOM, "--method", "fqt", "--queries", "4", "--target", "cortex-m4",
                 "-o", "out"]) == 1
    assert "--queries is an option of zo" in error_line(capsys)


@pytest.mark.parametrize("argv", [
    ["train", *RANDOM, "--dataset", "digits", "-o", "{bad}/m.npz"],
    ["train", *RANDOM, "--dataset", "digits", "--checkpoint", "{bad}/ck.npz"],
    ["plan", "--arch", "digits-cnn", "--method", "fqt", "--target", "cortex-m4", "--picture", "{bad}/p.png"],
    ["report", "{tmp}", "--out", "{bad}/report"],
    ["run", *RANDOM, "--target", "cortex-m4", "--dataset", "digits", "--dump", "{bad}/d"],
    ["datasets", "--show", "digits", "-o", "{bad}/grid.png"],
    ["demo", "--quick", "--out", "{bad}/demo"],
    ["export", *RANDOM, "--target", "cortex-m4", "-o", "{bad}/lib"],
])
def test_unwritable_outputs_are_refused_before_the_work(capsys, tmp_path, argv):
    (tmp_path / "a-file").write_text("not a folder")
    bad = tmp_path / "a-file"
    t0 = time.perf_counter()
    assert main([a.format(bad=bad, tmp=tmp_path) for a in argv]) == 1
    assert "is not a folder" in error_line(capsys)
    assert time.perf_counter() - t0 < 5      # refused at once, not after training or building


def test_an_output_the_system_refuses_is_one_line(capsys, tmp_path, monkeypatch):
    def full(*a, **k):
        raise OSError(28, "No space left on device", str(tmp_path / "grid.png"))
    monkeypatch.setattr("mcutrain.data.grid.save_grid", full)
    assert main(["datasets", "--show", "digits", "-o", str(tmp_path / "grid.png")]) == 1
    line = error_line(capsys)
    assert line == (f"mcutrain datasets: error: cannot use '{tmp_path / 'grid.png'}': No space left on "
                    "device; free some space or write elsewhere")


def test_resume_from_missing_foreign_or_mismatched_files(capsys, tmp_path, int8_model):
    base = ["train", *RANDOM, "--dataset", "digits", "--train-samples", "64", "--test-samples", "32"]
    assert main([*base, "--resume", str(tmp_path / "missing.npz")]) == 1
    assert "does not exist: give the file written by --checkpoint" in error_line(capsys)
    (tmp_path / "foreign.npz").write_bytes(b"hello")
    assert main([*base, "--resume", str(tmp_path / "foreign.npz")]) == 1
    assert "not a complete training state" in error_line(capsys)
    assert main([*base, "--resume", str(int8_model)]) == 1
    assert "is a model file, not a training state" in error_line(capsys)
    ck = tmp_path / "ck.npz"
    assert main([*base, "--checkpoint", str(ck)]) == 0
    capsys.readouterr()
    assert main([*base, "--epochs", "2", "--resume", str(ck)]) == 1
    assert "--resume-changed epochs" in error_line(capsys)
    assert main([*base, "--method", "zo", "--resume", str(ck)]) == 1
    assert "is a state of method 'fqt', not 'zo'" in error_line(capsys)


@pytest.mark.parametrize("argv", [
    ["export", "{model}", "--target", "cortex-m4", "--dataset", "fashion-mnist", "-o", "{tmp}/lib"],
    ["export", "{model}", "--format", "tflite", "--dataset", "fashion-mnist", "-o", "{tmp}/m.tflite"],
    ["export", "{model}", "--method", "zo", "--target", "cortex-m4", "--dataset", "fashion-mnist",
     "-o", "{tmp}/lib"],
    ["run", "{model}", "--target", "cortex-m4", "--dataset", "fashion-mnist"],
    ["run", "{model}", "--method", "zo", "--target", "cortex-m4", "--dataset", "fashion-mnist"],
])
@pytest.mark.parametrize("kind", ["int8", "float"])
def test_shape_mismatch_in_export_and_run(capsys, tmp_path, argv, kind, int8_model, float_model):
    from mcutrain.data import load_dataset
    try:
        load_dataset("fashion-mnist")
    except ValueError:
        pytest.skip("Fashion-MNIST is not installed")
    model = int8_model if kind == "int8" else float_model
    assert main([a.format(model=model, tmp=tmp_path) for a in argv]) == 1
    assert ("the model takes samples of shape (8, 8, 1) but dataset 'fashion-mnist' has samples of "
            "shape (28, 28, 1)") in error_line(capsys)
    assert not (tmp_path / "lib").exists() and not (tmp_path / "m.tflite").exists()


def test_a_closed_pipe_ends_quietly():
    """`mcutrain datasets | head -1`: the reader stops; no traceback, exit 0."""
    p = subprocess.Popen([sys.executable, "-m", "mcutrain.cli", "datasets"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=ENV)
    p.stdout.close()                       # as `head` does once it has its line
    err = p.stderr.read().decode()
    assert p.wait(timeout=120) == 0
    assert err == ""


def _interrupted(argv: list[str], cwd: Path, wait_for) -> subprocess.CompletedProcess:
    """Start `mcutrain ARGV` and press Ctrl-C (SIGINT) once `wait_for()` holds."""
    code = ("import signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
            "from mcutrain.cli import main; sys.exit(main(sys.argv[1:]))")
    p = subprocess.Popen([sys.executable, "-c", code, *argv], cwd=cwd, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env={**ENV, "TMPDIR": str(cwd)})
    t0 = time.perf_counter()
    while not wait_for() and p.poll() is None and time.perf_counter() - t0 < 120:
        time.sleep(0.05)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=60)
    return subprocess.CompletedProcess(argv, p.returncode, out, err)


def test_ctrl_c_says_how_to_resume(tmp_path):
    ck = tmp_path / "ck.npz"
    argv = ["train", *RANDOM, "--dataset", "digits", "--epochs", "500", "--checkpoint", str(ck)]
    r = _interrupted(argv, tmp_path, ck.exists)
    assert r.returncode == 130
    assert "Traceback" not in r.stderr
    assert r.stderr.strip().splitlines() == [f"mcutrain train: interrupted; continue with: mcutrain "
                                             f"train {' '.join(argv[1:])} --resume {ck}"]


def test_resume_hint_replaces_an_earlier_resume(tmp_path):
    ck = tmp_path / "ck.npz"
    ck.write_bytes(b"x")
    args = argparse.Namespace(checkpoint=str(ck))
    hint = resume_hint(args, ["train", "m.npz", "--resume", "old.npz", "--checkpoint", str(ck)])
    assert hint == f"; continue with: mcutrain train m.npz --checkpoint {ck} --resume {ck}"
    assert resume_hint(argparse.Namespace(checkpoint=str(tmp_path / "none.npz")), ["train"]) == ""


def test_ctrl_c_in_run_removes_its_build_folder(tmp_path, arm_tools):
    def started() -> bool:
        return any(tmp_path.glob("mcutrain-run-*/lib"))
    r = _interrupted(["run", *RANDOM, "--dataset", "digits", "--method", "fqt", "--precision", "int8",
                      "--target", "cortex-m4"], tmp_path, started)
    assert r.returncode == 130, r.stderr
    lines = r.stderr.strip().splitlines()
    assert lines[-1] == "mcutrain run: interrupted"
    assert all(ln.startswith("mcutrain run: [") for ln in lines[:-1])     # its stages, nothing else
    assert not list(tmp_path.glob("mcutrain-run-*"))


def test_one_epoch_is_singular(capsys):
    assert main(["train", *RANDOM, "--dataset", "digits", "--epochs", "1", "--train-samples", "32",
                 "--test-samples", "16", "--batch", "32"]) == 0
    out = capsys.readouterr().out
    assert "after 1 epoch on 32 training samples (1 step," in out


def test_outputs_honour_the_umask(tmp_path):
    old = os.umask(0o022)
    try:
        io.atomic_write_bytes(tmp_path / "a.bin", lambda f: f.write(b"x"))
        np.savez(tmp_path / "ref.npz", a=np.zeros(1))
    finally:
        os.umask(old)
    mode = (tmp_path / "a.bin").stat().st_mode & 0o777
    assert mode == (tmp_path / "ref.npz").stat().st_mode & 0o777 == 0o644


@pytest.mark.parametrize("command", ["pretrain", "train", "eval", "plan", "export", "run", "demo", "import"])
def test_every_command_that_computes_limits_blas_threads(command, monkeypatch):
    """`--threads N` (default 1, as pretrain's always was) holds for the whole command."""
    import importlib

    from threadpoolctl import threadpool_info
    seen = []
    module = importlib.import_module(f"mcutrain.commands.{MODULE_NAMES.get(command, command)}")
    monkeypatch.setattr(module, "run", lambda args: seen.append(
        {p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"}) or 0)
    required = {"pretrain": ["--arch", "x", "--dataset", "d", "-o", "m.npz"], "train": ["--dataset", "d"],
                "eval": ["m.npz", "--dataset", "d"], "plan": ["--method", "fqt", "--target", "t"],
                "export": ["-o", "out"], "run": ["--target", "t", "--dataset", "d"], "demo": [],
                "import": ["m.onnx", "-o", "m.npz"]}[command]
    assert main([command, *required]) == 0
    assert main([command, *required, "--threads", "2"]) == 0
    if not any(seen):
        pytest.skip("numpy has no BLAS threadpool threadpoolctl can see")
    assert seen == [{1}, {2}]


def test_train_help_shows_every_default():
    from mcutrain.cli import build_parser
    from mcutrain.methods import factory
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    text = "".join(sub.choices["train"].format_help().split())      # argparse wraps lines anywhere
    for o in factory.options_of("train"):
        if not o.switch:
            assert "".join(factory.help_with_default(o).split()) in text
            assert "default" in factory.help_with_default(o)
    assert "(default1)" in text.split("--partialLAMBDA_MIN")[-1].split("--partial-max")[0]
    assert "trainingmethod(fqt,zo,bp-qas;defaultfqt)" in text
    assert "--threadsTHREADSBLASthreads(default1:" in text


@pytest.mark.parametrize("outputs,dataset,keep", [
    (7, "digits", "train on data with 7 classes to keep it (a class subset such as 'digits[0-6]'"),
    (10, "digits[0-4]", "give the samples as your own .npz"),
])
def test_a_replaced_head_is_said_with_how_to_keep_it(capsys, tmp_path, outputs, dataset, keep):
    model = tmp_path / "m.npz"
    io.save(model, zoo.build("digits-cnn", outputs, seed=1))
    assert main(["train", str(model), "--dataset", dataset, "--precision", "float32", "--epochs", "1",
                 "--train-samples", "40", "--test-samples", "20", "--json"]) == 0
    err = capsys.readouterr().err
    classes = 10 if dataset == "digits" else 5
    assert (f"mcutrain train: note: the model has {outputs} outputs, dataset '{dataset}' {classes} classes: "
            f"its last layer 'fc' is replaced by a new, randomly initialized one of {classes} outputs") in err
    assert keep in err


def test_matching_head_gets_no_note(capsys, int8_model):
    assert main(["train", str(int8_model), "--dataset", "digits", "--epochs", "1", "--train-samples", "32",
                 "--test-samples", "16", "--json"]) == 0
    assert "note:" not in capsys.readouterr().err


def test_datasets_shows_the_shape_the_files_hold(capsys, tmp_path, monkeypatch):
    from mcutrain.data import load_dataset
    from mcutrain.data import registry as R
    from mcutrain.data.idx import write_idx
    monkeypatch.setenv("MCUTRAIN_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("MCUTRAIN_DATA", str(tmp_path / "data"))
    monkeypatch.setattr(R, "SYSTEM_DIRS", [tmp_path / "system"])
    folder = tmp_path / "data" / "mnist"
    folder.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for part, a in zip(R.IDX_PARTS, [rng.integers(0, 256, (30, 13, 11), dtype=np.uint8), np.arange(30) % 10,
                                     rng.integers(0, 256, (20, 13, 11), dtype=np.uint8), np.arange(20) % 10]):
        write_idx(folder / f"{part}.gz", a.astype(np.uint8))
    assert main(["datasets", "--json"]) == 0
    import json
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)["datasets"]}
    loaded = load_dataset("mnist")
    assert rows["mnist"]["shape"] == list(loaded.shape) == [13, 11, 1]
    assert rows["digits"]["shape"] == list(load_dataset("digits").shape)
    assert main(["datasets"]) == 0
    line = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("mnist "))
    assert " 13x11x1 " in line


def test_a_failing_harness_says_what_failed_and_shows_its_output(capsys, tmp_path, arm_tools, monkeypatch):
    """A real guest that cannot open its files (exit 2), then a step error (exit 4) as the CLI shows it."""
    from mcutrain.codegen import cross
    from mcutrain.mcu import count_instructions
    dump = tmp_path / "d"
    assert main(["run", *RANDOM, "--target", "cortex-m4", "--dataset", "digits", "--steps", "1",
                 "--dump", str(dump)]) == 0
    capsys.readouterr()
    prof = count_instructions(dump / "build" / "model.elf", "cortex-m4", ["missing.bin", "out.bin"],
                              cwd=dump / "build")
    assert prof.exit_code == 2 and "cannot open missing.bin" in prof.stderr

    def failing_step(elf, target, args, cwd, timeout):
        real = count_instructions(elf, target, args, cwd=cwd, timeout=timeout)
        return dataclasses.replace(real, exit_code=4,
                                   stderr="model_predict failed with status 5 on sample 0\n")
    monkeypatch.setattr(cross, "count_instructions", failing_step)
    assert main(["run", *RANDOM, "--target", "cortex-m4", "--dataset", "digits", "--steps", "1"]) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err
    err = err[err.index("mcutrain run: error:"):]          # after the run's stage lines
    assert err.startswith("mcutrain run: error: the model harness failed on cortex-m4 with exit code 4: the "
                          "library returned an error status from a step")
    assert err.rstrip().endswith("its output:\n  model_predict failed with status 5 on sample 0\n  samples 1")
