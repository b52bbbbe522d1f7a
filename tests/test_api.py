"""The public Python API on digits-cnn and small data: each function, and that it agrees with the CLI."""

from __future__ import annotations

import json

import numpy as np
import pytest

import mcutrain
from mcutrain import cli, io, zoo
from mcutrain.engines import int_engine, ptq
from mcutrain.graph import Graph
from mcutrain.qmodel import QuantModel

DATA = "digits-c:stripe:5"
SMALL = {"epochs": 1, "train_samples": 120, "test_samples": 60}


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """A float and an int8 model file of digits-cnn (random He init; PTQ on digits samples)."""
    root = tmp_path_factory.mktemp("api")
    g = zoo.build("digits-cnn", seed=0)
    float_path = io.save(root / "float.npz", g)
    x = mcutrain.api.data.dataset_of("digits").x_train[:64]
    int8_path = root / "int8.npz"
    ptq.quantize_model(g, x).save(int8_path, {})
    return float_path, int8_path


def test_load_gives_a_quant_model_or_a_graph(files):
    float_path, int8_path = files
    assert isinstance(mcutrain.load(float_path), Graph)
    qm = mcutrain.load(int8_path)
    assert isinstance(qm, QuantModel) and qm.graph.input_shape == (8, 8, 1)


def test_load_refuses_a_missing_file_with_a_message(tmp_path):
    with pytest.raises(mcutrain.UserError):
        mcutrain.load(tmp_path / "nothing.npz")


def test_predict_int8_is_the_golden_engine_and_float_gives_logits(files):
    qm = mcutrain.load(files[1])
    x = np.random.default_rng(0).random((3, 8, 8, 1), dtype=np.float32)
    x_q = int_engine.quantize_input(qm, x)
    out = mcutrain.predict(qm, x_q)
    assert out.dtype == np.int8 and np.array_equal(out, int_engine.forward(qm, x_q))
    logits = mcutrain.predict(qm, x)
    assert logits.dtype == np.float32 and logits.shape == (3, 10)
    assert np.array_equal(logits.argmax(1), out.argmax(1))
    g = mcutrain.load(files[0])
    assert mcutrain.predict(g, x).shape == (3, 10)
    with pytest.raises(mcutrain.UserError, match="int8 inputs need an int8 model"):
        mcutrain.predict(g, x_q)


def test_evaluate_int8_and_float(files):
    qm, g = mcutrain.load(files[1]), mcutrain.load(files[0])
    acc_q = mcutrain.evaluate(qm, "digits")
    assert 0.0 <= acc_q <= 1.0
    assert acc_q == float(np.mean(int_engine.predict(qm, mcutrain.api.data.dataset_of("digits").x_test)
                                  == mcutrain.api.data.dataset_of("digits").y_test))
    assert 0.0 <= mcutrain.evaluate(g, "digits", test_samples=50) <= 1.0


@pytest.mark.parametrize(("method", "options", "extra"), [
    ("fqt", {"partial": 0.5}, ["--partial", "0.5"]),
    ("zo", {"queries": 2, "lr": 0.05}, ["--queries", "2", "--lr", "0.05"]),
    ("bp-qas", {"trainable": "last:1"}, ["--trainable", "last:1"]),
])
def test_train_equals_the_command(files, capsys, method, options, extra):
    """The API and `mcutrain train` run one path: the same --json result (the timing aside)."""
    path = str(files[1])
    r = mcutrain.train(path, DATA, method=method, **SMALL, **options)
    argv = ["train", path, "--dataset", DATA, "--method", method, "--epochs", "1", "--train-samples", "120",
            "--test-samples", "60", "--json", *extra]
    assert cli.main(argv) == 0
    doc = json.loads(capsys.readouterr().out)
    for d in (doc, r.result):
        d.pop("samples_per_s")
    assert r.result == doc
    assert r.history == doc["history"] and len(r.history) == 1
    assert isinstance(r.model, QuantModel)      # every method's trained int8 model
    meta, arrays = r.state
    assert isinstance(meta, dict) and arrays


def test_train_runs_on_the_command_s_blas_threads_whatever_the_caller_s(capsys):
    """OpenBLAS splits some float32 products by thread count (here the calibration's float forward
    pass of a zoo model), so the API trains on `--threads`'s default (1) even inside a caller's
    wider BLAS limit: the result is the command's to the bit."""
    from threadpoolctl import threadpool_limits
    run = {"train_samples": 200, "test_samples": 100, "epochs": 1, "lr": 0.01, "seed": 1, "queries": 4}
    assert cli.main(["train", "--arch", "digits-cnn", "--init", "random", "--dataset", "digits",
                     "--method", "zo", "--json",
                     *[a for k, v in run.items() for a in (f"--{k.replace('_', '-')}", str(v))]]) == 0
    doc = json.loads(capsys.readouterr().out)
    with threadpool_limits(2, "blas"):
        r = mcutrain.train(None, "digits", "zo", arch="digits-cnn", **run)
    assert r.result["history"] == doc["history"]
    with pytest.raises(mcutrain.UserError, match="threads must be a whole number of at least 1"):
        mcutrain.train(None, "digits", "zo", arch="digits-cnn", threads=0, **run)


def test_train_from_memory_and_refusals(files):
    qm = mcutrain.load(files[1])
    r = mcutrain.train(qm, DATA, method="zo", queries=2, **SMALL)
    assert r.result["queries"] == 2 and r.result["train_samples"] == 120
    with pytest.raises(mcutrain.UserError, match="--queries is an option of zo, not of fqt"):
        mcutrain.train(qm, DATA, method="fqt", queries=2, **SMALL)
    with pytest.raises(mcutrain.UserError, match="batch must be in 1"):
        mcutrain.train(qm, DATA, method="fqt", batch=0, **SMALL)


def test_plan_equals_the_command(files, capsys):
    report = mcutrain.plan(files[1], method="zo", target="nrf52840", queries=10)
    assert cli.main(["plan", str(files[1]), "--method", "zo", "--queries", "10", "--target", "nrf52840",
                     "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == json.loads(json.dumps(report.to_json()))
    assert mcutrain.plan(mcutrain.load(files[1]), method="fqt", target="nrf52840").fits in (True, False)


def test_export_inference_and_training(files, tmp_path):
    qm = mcutrain.load(files[1])
    inf = mcutrain.export(qm, tmp_path / "inf", target="cortex-m4")
    assert inf["method"] == "none" and (tmp_path / "inf" / "model.c").exists()
    tr = mcutrain.export(files[1], tmp_path / "zo", method="zo", target="nrf52840", batch=4, queries=2)
    assert tr["batch"] == 4 and tr["train_arena_bytes"] > 0
    with pytest.raises(mcutrain.UserError, match="a float Graph needs samples"):
        mcutrain.export(mcutrain.load(files[0]), tmp_path / "f", target="cortex-m4")


def test_export_for_a_firmware(files, tmp_path):
    r = mcutrain.export(files[1], tmp_path / "kws", target="nrf52840", prefix="kws_", inputs="digits",
                        examples=("zephyr", "baremetal-nrf52840"))
    assert (r["prefix"], r["examples"], r["harness_inputs"]["samples"]) == (
        "kws_", ["zephyr", "baremetal-nrf52840"], 16)
    assert {"kws_model.h", "zephyr/module.yml", "examples/baremetal-nrf52840/nrf52840.ld",
            "harness/expected_logits.bin"} <= set(r["files"])
    with pytest.raises(mcutrain.UserError, match="not a C identifier prefix"):
        mcutrain.export(files[1], tmp_path / "bad", target="nrf52840", prefix="KWS")


def test_run_in_qemu_is_bit_exact(arm_tools, files):
    r = mcutrain.run(files[1], "digits", method="zo", target="cortex-m4", steps=1, batch=2, queries=2)
    assert r["bit_exact"] is True and r["mismatch"] == "" and (r["method"], r["batch"]) == ("zo", 2)
    inf = mcutrain.run(mcutrain.load(files[1]), "digits", target="cortex-m4", steps=2)
    assert inf["bit_exact"] is True and inf["steps"] == 2
