"""`mcutrain run --method zo | bp-qas` on emulated Cortex-M cores: every step bit-exact with the
simulated method, the exact JSON, dumps with the same tensors, and a plan too big to link."""

from __future__ import annotations

import json

import numpy as np
import pytest

from mcutrain.api.mcu_run import JSON_KEYS, MEMORY_KEYS
from mcutrain.cli import main

BASE = ["run", "--arch", "digits-cnn", "--init", "random", "--seed", "0", "--dataset", "digits", "--json"]


@pytest.mark.parametrize(("target", "extra"), [
    ("cortex-m4", ["--method", "zo", "--queries", "2", "--steps", "2"]),
    ("cortex-m7", ["--method", "bp-qas", "--momentum", "0.5", "--batch", "2", "--steps", "2"]),
    ("cortex-m33", ["--method", "bp-qas", "--momentum", "0.5", "--batch", "2", "--steps", "2"]),
    ("cortex-m0plus", ["--method", "bp-qas", "--momentum", "0.5", "--batch", "2", "--steps", "2"]),
    ("cortex-m4", ["--method", "zo", "--queries", "2", "--steps", "2", "--update-rounding", "stochastic"]),
    ("cortex-m4", ["--method", "bp-qas", "--momentum", "0.5", "--batch", "2", "--steps", "2",
                   "--update-rounding", "stochastic"]),
])
def test_training_run_is_bit_exact(arm_tools, tmp_path, capsys, target, extra):
    dump = tmp_path / "D"
    rc = main([*BASE, *extra, "--target", target, "--dump", str(dump)])
    r = json.loads(capsys.readouterr().out)
    assert rc == 0
    zo = "zo" in extra
    config = ("method", "batch", "trainable", "lr", *(("queries", "perturb") if zo else ()))
    assert tuple(r) == (*JSON_KEYS, *MEMORY_KEYS, *config)
    assert (r["method"], r["batch"]) == (("zo", 32) if zo else ("bp-qas", 2))
    assert r["trainable"] == ["conv1", "conv2", "fc"] and (r["queries"] == 2 if zo else True)
    # the linked library is the planned one (to alignment padding and a few small statics)
    assert r["library_ram_bytes"] == pytest.approx(r["planned_ram_bytes"], rel=0.01) and r["fits"] is True
    assert r["library_ram_bytes"] + r["harness_ram_bytes"] == r["ram_bytes"]
    assert r["bit_exact"] is True and r["steps"] == 2 and r["target"] == target
    per_mac = r["instructions_per_step"] / r["macs_per_step"]
    assert r["instructions_per_mac"] == pytest.approx(per_mac, rel=1e-3)
    assert sum(r["per_function"].values()) == pytest.approx(r["instructions_per_step"], abs=1)
    assert not any(f.startswith(("fread", "fwrite", "_read", "_write")) for f in r["per_function"])
    kernel = "mt_zo_perturb_wp_s8" if "zo" in extra else "mt_conv2d_bwd_w_row_s8_f32"
    assert r["per_function"][kernel] > 0
    sim, mcu = np.load(dump / "sim.npz"), np.load(dump / "mcu.npz")
    assert sim.files == mcu.files
    assert {"conv1.weight", "conv1.bias", "fc.weight", "fc.bias", "losses"} <= set(sim.files)
    assert sim["losses"].shape[0] == 2 and sim["conv1.weight"].dtype == np.int8
    if not zo:      # the float32 momentum is compared bit for bit too, and dumped
        assert sim["conv1.velocity"].dtype == np.float32 and np.any(sim["conv1.velocity"] != 0)
    for k in sim.files:
        np.testing.assert_array_equal(sim[k], mcu[k], err_msg=k)


def test_a_step_plan_says_does_not_fit_is_refused_before_any_build(tmp_path, capsys):
    """No toolchain needed: the planner's verdict comes first, the same one `plan` exits 3 on."""
    argv = ["--arch", "digits-cnn", "--method", "bp-qas", "--batch", "96", "--target", "rp2040"]
    assert main(["plan", *argv, "--json"]) == 3
    assert json.loads(capsys.readouterr().out)["fits"] is False
    rc = main(["run", *argv, "--init", "random", "--seed", "0", "--dataset", "digits", "--steps", "1",
               "--dump", str(tmp_path / "D")])
    err = capsys.readouterr().err
    assert rc == 1 and "Traceback" not in err
    assert "the bp-qas step needs" in err and "rp2040 has 264.0 KB" in err and "over" in err
    assert "largest RAM parts: arena" in err and "try: a smaller batch (--batch 24" in err
    assert "--allow-overflow" in err
    assert not (tmp_path / "D" / "build").exists()


def test_a_step_plan_says_fits_runs_although_the_harness_would_not_fit_beside_it(arm_tools, tmp_path, capsys):
    """small-cnn zo at batch 4 on the nRF52840: the planner's 191 KB fit the 256 KB, the harness's copy of
    the 104 KB state blob and its 8 KB heap would not; they are kept out of the board's budget."""
    rng = np.random.default_rng(0)
    np.savez(tmp_path / "data.npz", x=rng.integers(0, 256, (40, 28, 28, 1), dtype=np.uint8),
             y=np.arange(40) % 10)
    step = ["--arch", "small-cnn", "--method", "zo", "--queries", "2", "--batch", "4", "--target", "nrf52840"]
    assert main(["plan", *step, "--json"]) == 0
    planned = json.loads(capsys.readouterr().out)["ram_bytes"]
    rc = main(["run", *step, "--init", "random", "--seed", "0", "--dataset", str(tmp_path / "data.npz"),
               "--steps", "1", "--json"])
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    r = json.loads(captured.out)
    assert r["bit_exact"] is True and r["fits"] is True and r["planned_ram_bytes"] == planned
    assert r["library_ram_bytes"] <= r["ram_limit"] < r["ram_bytes"]     # the image alone would not fit
    assert r["harness_ram_bytes"] > r["ram_bytes"] - r["ram_limit"]
