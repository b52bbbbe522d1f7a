"""`state_mapping`: a state blob a host-built library wrote, loaded into a fresh method built as export
builds it, gives the simulator's whole state after the same steps (every array and meta field,
FQT's ranges, qparams and statistics, BP-QAS's momentum, the RNG and step counter), and one more
step from there stays equal: nothing the method needs is missing from the blob or lost on the way."""

from __future__ import annotations

import json

import numpy as np
import pytest

from conftest import needs_gcc
from mcutrain import zoo
from mcutrain.api.data import options_namespace
from mcutrain.api.device import build_method
from mcutrain.cli import main
from mcutrain.codegen.dispatch import emit_training
from mcutrain.codegen.emit_fqt import quantize_input as fqt_input
from mcutrain.codegen.state_mapping import StateBlobError, restore_from_blob
from mcutrain.data import load_dataset
from mcutrain.engines import int_engine, ptq
from mcutrain.mcu.hostbuild import build_host_train
from mcutrain.mcu.hostrun import run_host_train
from mcutrain.methods.base import TrainingMethod
from mcutrain.qmodel import QuantModel

LR, STEPS = 0.05, 3
CASES = {
    "fqt-int8": ("fqt", {"precision": "int8", "seed": 2, "batch": 1}),
    "fqt-int8-last": ("fqt", {"precision": "int8", "trainable": "last:1", "seed": 2, "batch": 1}),
    "fqt-uint8-partial": ("fqt", {"precision": "uint8", "partial": 0.3, "seed": 2, "batch": 1}),
    "fqt-float32": ("fqt", {"precision": "float32", "seed": 2, "batch": 1}),
    "zo": ("zo", {"queries": 3, "seed": 4, "batch": 1}),
    "bp-qas-momentum": ("bp-qas", {"trainable": "last:1", "bias_last": 1, "momentum": 0.9, "batch": 1}),
    "bp-qas-nearest": ("bp-qas", {"trainable": "last:1", "update_rounding": "nearest", "batch": 1}),
}


@pytest.fixture(scope="module")
def digits():
    ds = load_dataset("digits")
    qm = ptq.quantize_model(zoo.build("digits-cnn", ds.num_classes, ds.shape, seed=0), ds.x_train[:128])
    return ds, qm


def build(method: str, options: dict, qm: QuantModel):
    """The method as export builds it; its twin sums floats in the C order (what the device ran)."""
    return build_method(options_namespace("export", method, options, model=qm), qm, c_twin=method == "fqt")


def to_input(m, x):
    return fqt_input(m, x) if m.name == "fqt" else int_engine.quantize_input(m.qm, x)


def device_blob(tmp_path, method: str, options: dict, digits):
    """(library folder, TrainSource, last state blob, simulator after the same steps)."""
    ds, qm = digits
    model, lib = qm.save(tmp_path / "m.npz"), tmp_path / "lib"
    flags = [a for k, v in options.items() for a in (f"--{k.replace('_', '-')}", str(v))]
    assert main(["export", str(model), "--method", method, *flags, "--target", "cortex-m4",
                 "--kernels", "ref", "-o", str(lib)]) == 0
    sim = build(method, options, qm)
    src = emit_training(sim, batch=1, kernels="ref")
    batches = [(ds.x_train[i:i + 1], ds.y_train[i:i + 1]) for i in range(STEPS)]
    data = [(to_input(sim, x), y) for x, y in batches]
    results = run_host_train(build_host_train(lib, tmp_path / "train"), data, LR, src, ds.num_classes)
    for x, y in batches:
        sim.step(x, y, LR)
    return lib, src, results[-1].blob, sim


def same_state(a: TrainingMethod, b: TrainingMethod) -> None:
    (ma, aa), (mb, ab) = a.state(), b.state()
    assert json.dumps(ma, sort_keys=True) == json.dumps(mb, sort_keys=True)
    assert sorted(aa) == sorted(ab)
    for k in aa:
        assert aa[k].dtype == ab[k].dtype and np.array_equal(aa[k], ab[k]), k


@needs_gcc
@pytest.mark.parametrize("case", sorted(CASES))
def test_a_device_state_restores_the_simulators_whole_state(case, digits, tmp_path):
    method, options = CASES[case]
    ds, qm = digits
    _, src, blob, sim = device_blob(tmp_path, method, options, digits)
    fresh = build(method, options, qm)
    assert restore_from_blob(fresh, src, blob) == STEPS
    same_state(fresh, sim)
    x, y = ds.x_train[20:21], ds.y_train[20:21]
    fresh.step(x, y, LR)
    sim.step(x, y, LR)
    same_state(fresh, sim)
    assert np.array_equal(fresh.predict(ds.x_test[:200]), sim.predict(ds.x_test[:200]))


@needs_gcc
def test_an_fqt_library_goes_through_the_same_command(digits, tmp_path, capsys):
    """Where FQT gives its int8 model, state-to-model writes the simulator's; until then it says so."""
    lib, _, blob, sim = device_blob(tmp_path, *CASES["fqt-int8"], digits)
    (tmp_path / "state.bin").write_bytes(blob)
    out = tmp_path / "trained.npz"
    rc = main(["state-to-model", str(lib), str(tmp_path / "state.bin"), "-o", str(out)])
    err = capsys.readouterr().err
    if type(sim).trained_model is TrainingMethod.trained_model:
        assert rc == 1 and "cannot give its trained int8 model yet" in err and "Traceback" not in err
        return
    assert rc == 0, err
    got, want = QuantModel.load(out), sim.trained_model()
    for n in want.weights:
        assert np.array_equal(got.weights[n], want.weights[n]), n
        assert np.array_equal(got.biases[n], want.biases[n]), n
        assert got.weight_qparams[n] == want.weight_qparams[n], n
    assert got.act_qparams == want.act_qparams


def test_an_entry_without_counterpart_is_refused(digits):
    """A layout this mcutrain cannot map back is refused by name, never half-applied."""
    from mcutrain.codegen.state_mapping import apply_entry

    _, qm = digits
    m = build("zo", CASES["zo"][1], qm)
    meta, arrays = m.state()
    with pytest.raises(StateBlobError, match=r"'fc\.mystery'"):
        apply_entry(m, meta, arrays, {"fc.mystery": np.zeros(3, np.float32)}, "fc.mystery")
    with pytest.raises(StateBlobError, match=r"act\.input\.range"):
        apply_entry(m, meta, arrays, {"act.input.range": np.zeros(2, np.float32)}, "act.input.range")
