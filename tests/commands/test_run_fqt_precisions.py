"""`mcutrain run --method fqt` in precisions mixed and float32 on an emulated Cortex-M4 and M33: every step
bit-exact with the simulated FQT, whose float32 sums `run` puts in the C kernels' sequential order
(`exact_float_order`)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from mcutrain.cli import main

BASE = ["run", "--arch", "digits-cnn", "--init", "random", "--seed", "0", "--dataset", "digits", "--json",
        "--method", "fqt", "--trainable", "all", "--steps", "2"]


@pytest.mark.parametrize(("extra", "kernels"), [
    (["--precision", "mixed"], ("mt_conv2d_fwd_u8_range", "mt_conv2d_bwd_in_u8_f32", "mt_fqt_upd_u8_any")),
    (["--precision", "float32"], ("mt_conv2d_fwd_f32", "mt_conv2d_bwd_w_f32", "mt_fqt_upd_f32")),
])
@pytest.mark.parametrize("target", ["cortex-m4", "cortex-m33"])
def test_fqt_precision_run_is_bit_exact(arm_tools, tmp_path, capsys, extra, kernels, target):
    dump = tmp_path / "D"
    rc = main([*BASE, *extra, "--target", target, "--dump", str(dump)])
    r = json.loads(capsys.readouterr().out)
    assert rc == 0
    assert r["bit_exact"] is True and r["steps"] == 2
    for kernel in kernels:
        assert r["per_function"][kernel] > 0
    sim, mcu = np.load(dump / "sim.npz"), np.load(dump / "mcu.npz")
    assert sim.files == mcu.files
    assert {"conv1.weight", "fc.norm_sd", "losses"} <= set(sim.files)
    for k in sim.files:
        np.testing.assert_array_equal(sim[k], mcu[k], err_msg=k)
