"""The library's share of a linked image is found by the names its sources define: the names of
the library at hand (a relative folder, a prefixed runtime), never those of another one."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest

from mcutrain import zoo
from mcutrain.codegen.library import export_library
from mcutrain.engines import ptq
from mcutrain.mcu.footprint import runtime_kind, runtime_symbols, stored_runtime_symbols
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


class CompiledAgain(Exception):
    """Raised by a stand-in for the compiler: the cache missed."""


def test_runtime_names_are_compiled_once_per_kind_and_machine(arm_tools, tmp_path, monkeypatch):
    """Workers side by side and later runs read the names from the cache; an unreadable cache file
    or a changed runtime source compiles again."""
    monkeypatch.setenv("MCUTRAIN_CACHE", str(tmp_path / "cache"))
    lib, t = _export(tmp_path / "lib"), get_target("cortex-m4")
    first = stored_runtime_symbols(lib, t, "ref")
    (stored,) = (tmp_path / "cache" / "runtime-symbols").iterdir()
    assert "mt_relu_fwd_s8" in first and json.loads(stored.read_text()) == first

    def compiler(*a, **k):
        raise CompiledAgain

    monkeypatch.setattr(subprocess, "run", compiler)
    assert stored_runtime_symbols(lib, t, "ref") == first
    stored.write_text("{not json")
    with pytest.raises(CompiledAgain):
        stored_runtime_symbols(lib, t, "ref")
    stored.write_text(json.dumps(first))
    relu = lib / "runtime" / "mt_relu_fwd_s8.c"
    relu.write_text(relu.read_text() + "\n/* changed */\n")
    with pytest.raises(CompiledAgain):
        stored_runtime_symbols(lib, t, "ref")
