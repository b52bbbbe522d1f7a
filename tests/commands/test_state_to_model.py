"""`mcutrain state-to-model`: a training library's saved state (host build, gcc) back into a model
file equal to the simulator's trained model bit for bit, evaluated the same, written as a .tflite
that TFLite Micro runs; hostile blobs and library folders refused with clear messages."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from mcutrain import zoo
from mcutrain.api.data import options_namespace
from mcutrain.api.device import build_method
from mcutrain.cli import main
from mcutrain.codegen.dispatch import emit_training
from mcutrain.codegen.state_blob import STATE_MAGIC
from mcutrain.data import load_dataset
from mcutrain.engines import int_engine, ptq
from mcutrain.mcu.hostbuild import build_host_train
from mcutrain.mcu.hostrun import run_host_train
from mcutrain.qmodel import QuantModel

needs_gcc = pytest.mark.skipif(shutil.which("gcc") is None, reason="host gcc missing: apt-get install -y gcc")

STEPS, BATCH, LR = 3, 2, 0.05
CASES = {"zo": {"queries": 4, "seed": 5},
         # NOTE: the last layer at batch 2: its float gradient sums two terms, so the simulator's
         # BLAS order and C's sequential order give the same floats (docs/c-training-kernels.md)
         "bp-qas": {"trainable": "last:1", "bias_last": 2, "momentum": 0.9}}


def flags(options: dict) -> list[str]:
    return [a for k, v in options.items() for a in (f"--{k.replace('_', '-')}", str(v))]


@pytest.fixture(scope="module")
def digits():
    ds = load_dataset("digits")
    qm = ptq.quantize_model(zoo.build("digits-cnn", ds.num_classes, ds.shape, seed=0), ds.x_train[:128])
    return ds, qm


def simulator(method: str, qm: QuantModel):
    """The method exactly as `export` builds it (the factory, the same options)."""
    args = options_namespace("export", method, {**CASES[method], "batch": BATCH}, model=qm)
    return build_method(args, qm)


@pytest.fixture(scope="module", params=sorted(CASES))
def device_run(request, digits, tmp_path_factory):
    """(method, library folder, state file, simulator after the same steps) of a host-run library."""
    method = request.param
    ds, qm = digits
    work = tmp_path_factory.mktemp(method)
    model = qm.save(work / "m.npz")
    lib = work / "lib"
    assert main(["export", str(model), "--method", method, *flags(CASES[method]), "--batch", str(BATCH),
                 "--target", "cortex-m4", "--kernels", "ref", "-o", str(lib)]) == 0
    sim = simulator(method, qm)
    src = emit_training(sim, batch=BATCH, kernels="ref")
    exe = build_host_train(lib, work / "train")
    batches = [(ds.x_train[i * BATCH:(i + 1) * BATCH], ds.y_train[i * BATCH:(i + 1) * BATCH])
               for i in range(STEPS)]
    results = run_host_train(exe, [(int_engine.quantize_input(qm, x), y) for x, y in batches], LR, src,
                             ds.num_classes)
    for x, y in batches:
        sim.step(x, y, LR)
    state = work / "state.bin"
    state.write_bytes(results[-1].blob)
    return method, lib, state, sim


@needs_gcc
def test_the_model_is_the_simulators_after_the_same_steps(device_run, tmp_path, capsys):
    method, lib, state, sim = device_run
    out = tmp_path / "trained.npz"
    assert main(["state-to-model", str(lib), str(state), "-o", str(out), "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["method"] == method and r["steps"] == STEPS and r["changed"] > 0
    got, want = QuantModel.load(out), sim.trained_model()
    assert sorted(got.weights) == sorted(want.weights) and got.rounding == want.rounding
    for n in want.weights:
        assert np.array_equal(got.weights[n], want.weights[n]), n
        assert np.array_equal(got.biases[n], want.biases[n]), n
        assert got.weight_qparams[n] == want.weight_qparams[n], n
    assert got.act_qparams == want.act_qparams
    assert got.provenance["device_state"]["steps"] == STEPS
    assert got.provenance["device_state"]["method"] == method


@needs_gcc
def test_eval_of_the_model_gives_the_simulators_accuracy(device_run, digits, tmp_path, capsys):
    _, lib, state, sim = device_run
    ds, _ = digits
    out = tmp_path / "trained.npz"
    assert main(["state-to-model", str(lib), str(state), "-o", str(out)]) == 0
    assert f"after {STEPS} device steps" in capsys.readouterr().out
    assert main(["eval", str(out), "--dataset", "digits", "--json"]) == 0
    acc = json.loads(capsys.readouterr().out)["accuracy"]
    assert acc == float(np.mean(sim.predict(ds.x_test) == ds.y_test))


@needs_gcc
def test_a_tflite_out_that_tflm_runs_as_mcutrain_evaluates_it(device_run, digits, tmp_path, capsys):
    pytest.importorskip("tflite")
    pytest.importorskip("tflite_micro.python.tflite_micro.runtime")
    from mcutrain.bench.tflm import tflm_outputs
    from mcutrain.interop.tflite_import import from_tflite_bytes

    _, lib, state, sim = device_run
    ds, _ = digits
    out = tmp_path / "trained.tflite"
    assert main(["state-to-model", str(lib), str(state), "-o", str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["format"] == "tflite"
    back, _ = from_tflite_bytes(out.read_bytes())
    want = sim.trained_model()
    for n in want.weights:     # the device's integers, byte for byte in the file
        assert np.array_equal(back.weights[n], want.weights[n]), n
        assert np.array_equal(back.biases[n], want.biases[n]), n
    tflm = tflm_outputs(out.read_bytes(), int_engine.quantize_input(back, ds.x_test))
    assert main(["eval", str(out), "--dataset", "digits", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["accuracy"] == float(np.mean(tflm.argmax(1) == ds.y_test))


def _blob(state) -> bytes:
    return state.read_bytes()


def _word(blob: bytes, i: int, value: int) -> bytes:
    return blob[:4 * i] + np.array([value], "<u4").tobytes() + blob[4 * i + 4:]


HOSTILE = {
    "magic": (lambda b: _word(b, 0, 0x12345678), "not a saved training state"),
    "fingerprint": (lambda b: _word(b, 1, 0xDEADBEEF), "written by a different library/configuration"),
    "truncated": (lambda b: b[:-3], "truncated"),
    "header only": (lambda b: b[:7], "truncated"),
    "oversize": (lambda b: b + b"\0" * 9, "extra bytes"),
    "empty": (lambda b: b"", "truncated"),
    "step counter": (lambda b: _word(b, 2, 2**32 - 1), "step counter"),
}


@needs_gcc
@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_blobs_are_refused_with_what_is_wrong(device_run, tmp_path, capsys, case):
    _, lib, state, _ = device_run
    mutate, needle = HOSTILE[case]
    bad = tmp_path / "bad.bin"
    bad.write_bytes(mutate(_blob(state)))
    assert main(["state-to-model", str(lib), str(bad), "-o", str(tmp_path / "t.npz")]) == 1
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err, err
    assert not (tmp_path / "t.npz").exists()


@needs_gcc
def test_impossible_values_are_refused(device_run, tmp_path, capsys):
    """A blob that parses but holds what no library writes: an RNG state 0 (zo's stream, bp-qas's
    stochastic update rounding: the default), an int8 weight of -128 (updates clip to [-127, 127]
    and the model holds none)."""
    method, lib, state, sim = device_run
    blob = _blob(state)
    assert np.frombuffer(blob[:4], "<u4")[0] == STATE_MAGIC
    bad = tmp_path / "bad.bin"
    bad.write_bytes(_word(blob, 3, 0))
    assert main(["state-to-model", str(lib), str(bad), "-o", str(tmp_path / "t.npz")]) == 1
    err = capsys.readouterr().err
    assert "state.rng" in err, err
    entries = emit_training(simulator(method, sim.qm), batch=BATCH, kernels="ref").state
    first = next(i for i, e in enumerate(entries) if e.dtype == "s8")     # a trained int8 weight
    off = 16 + sum(e.nbytes for e in entries[:first])
    bad.write_bytes(blob[:off] + b"\x80" + blob[off + 1:])
    assert main(["state-to-model", str(lib), str(bad), "-o", str(tmp_path / "t.npz")]) == 1
    err = capsys.readouterr().err
    assert "values this library cannot have written" in err and "Traceback" not in err, err


@needs_gcc
def test_a_tampered_library_folder_is_refused(device_run, tmp_path, capsys):
    _, lib, state, _ = device_run
    copy = tmp_path / "lib"
    shutil.copytree(lib, copy)
    model = copy / "model.npz"
    model.write_bytes(model.read_bytes() + b"\0")
    assert main(["state-to-model", str(copy), str(state), "-o", str(tmp_path / "t.npz")]) == 1
    assert "not the model this library was generated from" in capsys.readouterr().err
    (copy / "manifest.json").write_text("{not json")
    assert main(["state-to-model", str(copy), str(state), "-o", str(tmp_path / "t.npz")]) == 1
    assert "not valid JSON" in capsys.readouterr().err
    (copy / "manifest.json").unlink()
    assert main(["state-to-model", str(copy), str(state), "-o", str(tmp_path / "t.npz")]) == 1
    assert "has no manifest.json" in capsys.readouterr().err


@pytest.mark.parametrize(("argv", "needle"), [
    (["state-to-model", "{tmp}", "s.bin", "-o", "{tmp}/t.onnx"], "must end in .npz"),
    (["state-to-model", "{tmp}", "s.bin", "-o", "{tmp}/t.npz"], "has no manifest.json"),
    (["state-to-model", "{tmp}/nowhere", "s.bin", "-o", "{tmp}/t.npz"], "is not a folder"),
])
def test_bad_arguments_are_refused_before_any_work(argv, needle, tmp_path, capsys):
    assert main([a.replace("{tmp}", str(tmp_path)) for a in argv]) == 1
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err
