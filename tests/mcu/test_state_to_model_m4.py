"""`mcutrain state-to-model` on a state a Cortex-M4 wrote (QEMU, DSP kernels): the harness saves it
as on the host, and the model that comes back is the simulator's after the same steps."""

from __future__ import annotations

import json

import numpy as np

from mcutrain import zoo
from mcutrain.api.data import options_namespace
from mcutrain.api.device import build_method
from mcutrain.cli import main
from mcutrain.codegen.cross import build_mcu_train, run_mcu_train
from mcutrain.codegen.dispatch import emit_training
from mcutrain.data import load_dataset
from mcutrain.engines import int_engine, ptq
from mcutrain.qmodel import QuantModel

OPTIONS = {"queries": 2, "seed": 3, "batch": 1}
STEPS, LR = 2, 0.05


def test_an_m4_state_comes_back_as_the_simulators_model(arm_tools, tmp_path, capsys):
    ds = load_dataset("digits")
    qm = ptq.quantize_model(zoo.build("digits-cnn", ds.num_classes, ds.shape, seed=0), ds.x_train[:128])
    model, lib = qm.save(tmp_path / "m.npz"), tmp_path / "lib"
    assert main(["export", str(model), "--method", "zo", "--queries", "2", "--seed", "3", "--batch", "1",
                 "--target", "cortex-m4", "-o", str(lib)]) == 0
    capsys.readouterr()
    sim = build_method(options_namespace("export", "zo", OPTIONS, model=qm), qm)
    src = emit_training(sim, batch=1, kernels="dsp")
    elf = build_mcu_train(lib, "cortex-m4", tmp_path / "t.elf", kernels="dsp").elf
    batches = [(ds.x_train[i:i + 1], ds.y_train[i:i + 1]) for i in range(STEPS)]
    data = [(int_engine.quantize_input(qm, x), y) for x, y in batches]
    results, _, _ = run_mcu_train(elf, "cortex-m4", data, LR, src, ds.num_classes, tmp_path / "run")
    for x, y in batches:
        sim.step(x, y, LR)
    (tmp_path / "state.bin").write_bytes(results[-1].blob)
    out = tmp_path / "trained.npz"
    assert main(["state-to-model", str(lib), str(tmp_path / "state.bin"), "-o", str(out), "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["steps"] == STEPS and r["changed"] > 0
    got, want = QuantModel.load(out), sim.trained_model()
    for n in want.weights:
        assert np.array_equal(got.weights[n], want.weights[n]), n
        assert np.array_equal(got.biases[n], want.biases[n]), n
