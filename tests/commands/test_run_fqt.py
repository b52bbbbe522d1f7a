"""`mcutrain run --method fqt` on an emulated Cortex-M4 (int8 on the M33 too): every step bit-exact
with the simulated FQT (every state entry), the exact JSON, dumps with the same tensors; unsupported
settings refused."""

from __future__ import annotations

import json

import numpy as np
import pytest

from mcutrain.api.mcu_run import JSON_KEYS, MEMORY_KEYS
from mcutrain.cli import main

BASE = ["run", "--arch", "digits-cnn", "--init", "random", "--seed", "0", "--dataset", "digits", "--json",
        "--method", "fqt"]


@pytest.mark.parametrize("target", ["cortex-m4", "cortex-m33"])
def test_fqt_int8_run_is_bit_exact(arm_tools, tmp_path, capsys, target):
    dump = tmp_path / "D"
    rc = main([*BASE, "--precision", "int8", "--trainable", "all", "--steps", "2", "--target", target,
               "--dump", str(dump)])
    r = json.loads(capsys.readouterr().out)
    assert rc == 0
    config = ("method", "batch", "trainable", "lr", "precision", "partial", "update")
    assert tuple(r) == (*JSON_KEYS, *MEMORY_KEYS, *config)
    # the linked library is the planned one, its batch buffer and range scratch included (to the
    # fixed activations' scale and zero point and alignment padding)
    assert r["library_ram_bytes"] == pytest.approx(r["planned_ram_bytes"], rel=0.01) and r["fits"] is True
    assert r["library_ram_bytes"] + r["harness_ram_bytes"] == r["ram_bytes"]
    assert (r["method"], r["batch"], r["precision"], r["partial"]) == ("fqt", 32, "int8", 1.0)
    assert r["update"] == "float"                     # auto on a core with an FPU
    assert r["bit_exact"] is True and r["steps"] == 2 and r["target"] == target
    assert sum(r["per_function"].values()) == pytest.approx(r["instructions_per_step"], abs=1)
    for kernel in ("mt_conv2d_fwd_s8_range", "mt_conv2d_bwd_in_s8_s16", "mt_fqt_upd_s8"):
        assert r["per_function"][kernel] > 0
    sim, mcu = np.load(dump / "sim.npz"), np.load(dump / "mcu.npz")
    assert sim.files == mcu.files
    assert {"conv1.weight", "fc.w_scale", "err.fc.range", "act.conv2.zero_point", "losses"} <= set(sim.files)
    for k in sim.files:
        np.testing.assert_array_equal(sim[k], mcu[k], err_msg=k)


def test_fqt_int8_on_the_m0plus_updates_in_integers(arm_tools, tmp_path, capsys):
    """No FPU: --update auto runs the integer-only update (docs/integer-semantics.md 13.9), bit-exact
    (every state entry after each step, the stream's state included)."""
    rc = main([*BASE, "--precision", "int8", "--trainable", "all", "--steps", "2", "--batch", "1",
               "--target", "cortex-m0plus"])
    r = json.loads(capsys.readouterr().out)
    assert rc == 0 and r["bit_exact"] is True and r["update"] == "integer"
    pf = r["per_function"]
    assert pf["mt_fqt_upd_s8_int"] > 0 and "mt_fqt_upd_s8" not in pf


def test_a_tflite_run_dumps_the_device_state_state_to_model_takes(arm_tools, tmp_path, capsys):
    """`run model.tflite --method fqt --dump D` (TFLite's rounding in C) leaves D/state.bin beside the
    library D/build/lib; `state-to-model` turns them into the model the steps trained, weight for weight."""
    from mcutrain import zoo
    from mcutrain.engines import ptq
    from mcutrain.interop.tflite_export import save_tflite
    from mcutrain.qmodel import QuantModel

    g = zoo.build("digits-cnn", seed=1)
    x = np.random.default_rng(1).random((64, *g.input_shape), dtype=np.float32)
    tfl = save_tflite(ptq.quantize_model(g, x, rounding="tflite"), tmp_path / "m.tflite")
    dump = tmp_path / "D"
    assert main(["run", str(tfl), "--dataset", "digits", "--json", "--method", "fqt", "--trainable", "last:2",
                 "--batch", "2", "--steps", "2", "--target", "cortex-m4", "--dump", str(dump)]) == 0
    assert json.loads(capsys.readouterr().out)["bit_exact"] is True
    out = tmp_path / "trained.npz"
    assert main(["state-to-model", str(dump / "build" / "lib"), str(dump / "state.bin"), "-o", str(out),
                 "--json"]) == 0
    back = json.loads(capsys.readouterr().out)
    assert back["steps"] == 2 and back["changed"] > 0
    trained, mcu = QuantModel.load(out), np.load(dump / "mcu.npz")
    assert trained.rounding == "tflite"
    for layer in ("conv2", "fc"):
        np.testing.assert_array_equal(trained.weights[layer].reshape(-1), mcu[f"{layer}.weight"].reshape(-1))


def test_fqt_uint8_run_is_bit_exact_on_the_m4(arm_tools, tmp_path, capsys):
    """Seed A's uint8 step on the FPU core: its float requantization, the zero-skipping conv kernels
    and the tabled update, every state entry equal to the simulator's after each step."""
    rc = main([*BASE, "--precision", "uint8", "--trainable", "all", "--batch", "1", "--steps", "2",
               "--target", "cortex-m4", "--kernels", "ref"])
    r = json.loads(capsys.readouterr().out)
    assert rc == 0 and r["bit_exact"] is True and r["precision"] == "uint8" and r["steps"] == 2
    for kernel in ("mt_conv2d_fwd_u8_range", "mt_conv2d_bwd_in_u8", "mt_conv2d_bwd_w_u8", "mt_fqt_upd_u8"):
        assert r["per_function"][kernel] > 0
