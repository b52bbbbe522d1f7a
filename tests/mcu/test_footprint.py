"""The library's share of a linked image is found by the names its sources define: the names of
the library at hand (a relative folder, a prefixed runtime), never those of another one."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from mcutrain import zoo
from mcutrain.codegen.library import export_library
from mcutrain.engines import ptq
from mcutrain.mcu.footprint import runtime_kind, runtime_symbols
from mcutrain.targets import get_target


def _export(out: Path, prefix: str = "", rounding: str = "single") -> Path:
    g = zoo.build("digits-cnn")
    x = np.random.default_rng(0).random((16, *g.input_shape), dtype=np.float32)
    export_library(ptq.quantize_model(g, x, rounding=rounding), out, kernels="dsp", prefix=prefix)
    return out


def test_names_of_each_library_its_own(arm_tools, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)            # the folders are relative, as `run --dump runs/x` gives them
    plain, kws = _export(Path("plain")), _export(Path("kws"), prefix="kws_")
    t = get_target("nrf52840")
    ours, theirs = runtime_symbols(plain, t, "dsp"), runtime_symbols(kws, t, "dsp")
    assert "mt_relu_fwd_s8" in ours and "kws_mt_relu_fwd_s8" in theirs
    assert not any(n.startswith("mt_") for n in theirs)
    assert runtime_kind(plain) != runtime_kind(_export(Path("tfl"), rounding="tflite"))
