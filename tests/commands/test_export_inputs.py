"""`mcutrain export --inputs DATASET`: the harness files, and the bytes the harness must write for them."""

from __future__ import annotations

import json
import shutil
import subprocess

import numpy as np
import pytest

from mcutrain.api.harness_inputs import INPUT_SAMPLES, TRAIN_STEPS
from mcutrain.cli import main

needs_gcc = pytest.mark.skipif(shutil.which("make") is None or shutil.which("gcc") is None,
                               reason="needs make and gcc: apt-get install -y make gcc")


def _export(tmp_path, capsys, *extra: str) -> dict:
    assert main(["export", "--arch", "digits-cnn", "--init", "random", "--target", "cortex-m4", "--inputs",
                 "digits", "-o", str(tmp_path / "lib"), "--json", *extra]) == 0
    return json.loads(capsys.readouterr().out)


@needs_gcc
def test_the_inference_harness_writes_exactly_the_expected_logits(tmp_path, capsys):
    r = _export(tmp_path, capsys)
    lib = tmp_path / "lib"
    h = r["harness_inputs"]
    n = INPUT_SAMPLES
    assert h["samples"] == n and {h["inputs"], h["expected_logits"]} <= set(r["files"])
    assert (lib / h["inputs"]).stat().st_size == n * 64          # int8 [N, 8 * 8 * 1]
    subprocess.run(["make", "-s", "-C", str(lib), "harness"], check=True, capture_output=True, timeout=600)
    subprocess.run([str(lib / "model_harness"), h["inputs"], "logits.bin"], cwd=lib, check=True, timeout=60)
    got, want = (np.frombuffer((lib / f).read_bytes(), np.int8) for f in ("logits.bin", h["expected_logits"]))
    assert want.size == n * 10 and np.unique(want.reshape(n, 10).argmax(1)).size > 1   # not a constant
    np.testing.assert_array_equal(got, want)


@needs_gcc
def test_the_training_harness_reads_train_bin(tmp_path, capsys):
    r = _export(tmp_path, capsys, "--method", "zo", "--batch", "4", "--queries", "2", "--lr", "0.01")
    lib, h = tmp_path / "lib", r["harness_inputs"]
    assert h["train"] in r["files"] and h["steps"] == TRAIN_STEPS and h["lr"] == 0.01
    subprocess.run(["make", "-s", "-C", str(lib), "harness"], check=True, capture_output=True, timeout=600)
    run = subprocess.run([str(lib / "model_train_harness"), h["train"], "results.bin"], cwd=lib,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    per_step = 4 * 4 + 4 * 10 + r["state_bytes"]       # losses, logits, state (docs/c-api.md)
    assert (lib / "results.bin").stat().st_size == TRAIN_STEPS * per_step


@pytest.mark.parametrize(("extra", "message"), [
    (["--method", "fqt", "--precision", "int8"], "writes harness files for inference, zo and bp-qas"),
    (["--inputs", "mnist1d"], "mnist1d"),
])
def test_inputs_errors_are_messages(tmp_path, capsys, extra, message):
    argv = ["export", "--arch", "digits-cnn", "--init", "random", "--target", "cortex-m4",
            "--inputs", "digits", "-o", str(tmp_path / "lib"), *extra]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
