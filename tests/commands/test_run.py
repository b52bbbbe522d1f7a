"""`mcutrain run` on the emulated Cortex-M cores: bit-exact with the simulator, the exact JSON."""

from __future__ import annotations

import json

import numpy as np
import pytest

from mcutrain.api.mcu_run import JSON_KEYS, MEMORY_KEYS
from mcutrain.cli import main


@pytest.mark.parametrize("target", ["cortex-m0plus", "cortex-m4", "cortex-m7", "cortex-m33", "rv32imc"])
def test_digits_cnn_random_is_bit_exact(target_tools, tmp_path, capsys, target):
    dump = tmp_path / "D"
    rc = main(["run", "--arch", "digits-cnn", "--init", "random", "--seed", "0", "--dataset", "digits",
               "--method", "none", "--steps", "8", "--target", target, "--dump", str(dump), "--json"])
    r = json.loads(capsys.readouterr().out)
    assert rc == 0
    assert tuple(r) == (*JSON_KEYS, *MEMORY_KEYS, "method")
    assert r["method"] == "none" and r["fits"] is True
    # the image is the library (what plan plans, to alignment padding) plus the harness
    assert r["library_ram_bytes"] == pytest.approx(r["planned_ram_bytes"], rel=0.01)
    assert r["library_ram_bytes"] + r["harness_ram_bytes"] == r["ram_bytes"]
    assert r["library_flash_bytes"] + r["harness_flash_bytes"] == r["flash_bytes"]
    assert r["bit_exact"] is True and r["steps"] == 8 and r["target"] == target
    assert r["macs_per_step"] == 88064
    assert r["instructions_per_mac"] == pytest.approx(r["instructions_per_step"] / 88064, rel=1e-3)
    assert 0 < r["est_ms_per_step"] and r["ram_bytes"] > 2112 and r["flash_bytes"] > 10568
    # counted inside inference only: the kernels dominate, no stdio in the region
    assert not any(f.startswith(("fread", "fwrite", "_read", "_write")) for f in r["per_function"])
    assert sum(r["per_function"].values()) == pytest.approx(r["instructions_per_step"], abs=1)
    sim, mcu = np.load(dump / "sim.npz"), np.load(dump / "mcu.npz")
    assert sim.files == mcu.files == ["logits"]
    assert sim["logits"].shape == (8, 10) and sim["logits"].dtype == np.int8
    np.testing.assert_array_equal(sim["logits"], mcu["logits"])


def test_reference_kernels_on_m4_give_the_same_logits(arm_tools, tmp_path, capsys):
    outs = []
    for kernels in ("ref", "dsp"):
        assert main(["run", "--arch", "mnist1d-cnn", "--init", "random", "--dataset", "mnist1d", "--steps",
                     "3", "--target", "cortex-m4", "--kernels", kernels, "--dump", str(tmp_path / kernels),
                     "--json"]) == 0
        outs.append(json.loads(capsys.readouterr().out))
    assert [o["bit_exact"] for o in outs] == [True, True]
    assert outs[1]["instructions_per_step"] < outs[0]["instructions_per_step"]   # DSP is faster
    np.testing.assert_array_equal(np.load(tmp_path / "ref" / "mcu.npz")["logits"],
                                  np.load(tmp_path / "dsp" / "mcu.npz")["logits"])


def test_other_methods_are_refused(capsys):
    rc = main(["run", "--arch", "digits-cnn", "--init", "random", "--dataset", "digits", "--method", "zo",
               "--perturb", "model-wp", "--target", "cortex-m4"])
    assert rc == 1
    assert "'model-wp' (several layers in one perturbation) has no C step yet" in capsys.readouterr().err


def test_model_must_match_the_dataset(tmp_path, capsys):
    from mcutrain import zoo
    from mcutrain.engines import ptq
    qm = ptq.quantize_model(zoo.build("mnist1d-cnn"), np.zeros((4, 1, 40, 1), np.float32))
    path = qm.save(tmp_path / "m.npz")
    assert main(["run", str(path), "--dataset", "digits", "--target", "cortex-m4"]) == 1
    err = capsys.readouterr().err
    assert "takes samples of shape (1, 40, 1)" in err and "has samples of shape (8, 8, 1)" in err
