"""`mcutrain run` on the emulated RV32IMC (QEMU `virt`): every training method and FQT precision
the M4 runs, bit-exact with the simulated method after every step, with the portable kernels
(RISC-V has no DSP twins), the exact dumps and a board name as the target."""

from __future__ import annotations

import json

import numpy as np
import pytest

from mcutrain.cli import main

BASE = ["run", "--arch", "digits-cnn", "--init", "random", "--seed", "0", "--dataset", "digits", "--json"]
FQT = ["--method", "fqt", "--trainable", "all"]

CASES = {
    "zo": (["--method", "zo", "--queries", "2", "--steps", "2"], "mt_zo_perturb_wp_s8"),
    "bp-qas": (["--method", "bp-qas", "--momentum", "0.5", "--batch", "2", "--steps", "2"],
               "mt_conv2d_bwd_w_row_s8_f32"),
    "fqt-int8": ([*FQT, "--precision", "int8", "--steps", "2"], "mt_fqt_upd_s8_int"),   # auto: no FPU
    "fqt-uint8": ([*FQT, "--precision", "uint8", "--steps", "1"], "mt_conv2d_fwd_u8_range"),
    "fqt-mixed": ([*FQT, "--precision", "mixed", "--steps", "1"], "mt_conv2d_bwd_in_u8_f32"),
    "fqt-float32": ([*FQT, "--precision", "float32", "--steps", "1"], "mt_fqt_upd_f32"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_every_method_steps_bit_exactly_on_rv32imc(riscv_tools, tmp_path, capsys, case):
    extra, kernel = CASES[case]
    dump = tmp_path / "D"
    rc = main([*BASE, *extra, "--target", "rv32imc", "--dump", str(dump)])
    r = json.loads(capsys.readouterr().out)
    assert rc == 0
    assert r["bit_exact"] is True and r["target"] == "rv32imc" and r["fits"] is True
    assert r["per_function"][kernel] > 0
    assert not any("_dsp" in f for f in r["per_function"])   # the reference kernels only
    sim, mcu = np.load(dump / "sim.npz"), np.load(dump / "mcu.npz")
    assert sim.files == mcu.files and "losses" in sim.files
    for k in sim.files:
        np.testing.assert_array_equal(sim[k], mcu[k], err_msg=k)


def test_inference_runs_on_the_esp32c3_board(riscv_tools, tmp_path, capsys):
    rc = main([*BASE, "--method", "none", "--steps", "4", "--target", "esp32c3"])
    r = json.loads(capsys.readouterr().out)
    assert rc == 0 and r["bit_exact"] is True and r["target"] == "esp32c3"
    assert r["ram_limit"] == 400 * 1024 and r["ram_bytes"] < r["ram_limit"]
    assert r["est_ms_per_step"] == pytest.approx(r["est_cycles_per_step"] / 160e3, rel=1e-3)
