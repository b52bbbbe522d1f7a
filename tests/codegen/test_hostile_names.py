"""Model data cannot become code: hostile names never reach generated C raw.

Two layers of defence are checked. (1) End to end: an ONNX model whose names carry a
`*/ ... __attribute__((constructor)) ... system("touch CANARY") ... /*` payload is imported,
exported for inference and for ZO training, built with the host compiler and run; no CANARY
appears and the generated files hold none of the original names (import renamed them).
(2) The codegen gate alone: with the graph's name check switched off, the same payloads as
node names and provenance go through every emitter (inference, ZO, BP-QAS, FQT); outside
comments and string literals the generated C holds nothing of them, and it still compiles
under -Werror -pedantic and runs without creating the canary.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np

from conftest import needs_gcc, qp
from mcutrain import graph as G
from mcutrain import io
from mcutrain.cli import main
from mcutrain.codegen.library import export_library, export_training_library
from mcutrain.mcu.hostbuild import build_host, build_host_train
from mcutrain.mcu.hostrun import run_host, run_host_train
from mcutrain.mcu.train_data import write_train_data
from mcutrain.qmodel import QuantModel, share_input_qparams
from mcutrain.quant.qparams import QParams

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "interop"))
from hostile_onnx import FC_NAME, PAYLOAD, hostile_onnx

HOSTILE = {"conv": PAYLOAD, "pool": "p*/ int a; /*", "flat": "f??/\n#define X 1", "fc": "fc\\\n\u00e9 \"q\""}
"""Node names that each break a different rule of C comments and string literals."""
MARKERS = ("__attribute__((", 'system("', "int a;", "#define X", "\u00e9")
"""Fragments of the payloads that only their raw text holds (renamed names keep letters only)."""


def _code_only(text: str) -> str:
    """C text with every comment and string literal removed: what the compiler acts on."""
    return re.sub(r'/\*.*?\*/|"(?:[^"\\\n]|\\.)*"', " ", text, flags=re.S)


def _generated(lib: Path) -> dict[str, str]:
    """The files the generator wrote from the model (the runtime is copied verbatim)."""
    return {p.name: p.read_text() for p in [lib / "model.c", lib / "model.h", lib / "Makefile",
                                             lib / "CMakeLists.txt"]}


def hostile_qmodel() -> QuantModel:
    """The shape of conftest.tiny_qmodel with HOSTILE names (build with the name check off)."""
    c, p, f, fc = (HOSTILE[k] for k in ("conv", "pool", "flat", "fc"))
    g = G.Graph((4, 4, 1), [G.conv2d(c, G.INPUT, 2, 3, padding=1, act="relu", in_channels=1),
                            G.maxpool(p, c, 2), G.flatten(f, p), G.linear(fc, f, 3, in_features=8)],
                name="tiny")
    w_conv = (np.arange(18).reshape(2, 3, 3, 1) * 7 % 255 - 127).astype(np.int8)
    w_fc = (np.arange(24).reshape(3, 8) * 13 % 255 - 127).astype(np.int8)
    acts = {G.INPUT: qp(1 / 128, -128), c: qp(0.25, -100), fc: qp(0.5, 3)}
    return QuantModel(g, share_input_qparams(g, acts), {c: w_conv, fc: w_fc},
                      {c: QParams(np.array([0.01, 0.02], np.float32), np.zeros(2, np.int32)),
                       fc: QParams(np.array([0.005, 0.01, 0.04], np.float32), np.zeros(3, np.int32))},
                      {c: np.array([100, -200], np.int32), fc: np.array([5000, -7000, 2**20], np.int32)})


def _assert_inert(files: dict[str, str]) -> None:
    for name, text in files.items():
        code = _code_only(text)
        assert not [m for m in MARKERS if m in code], name
        if name.endswith((".c", ".h")):     # every comment closed where it began ('runtime/*.c' is Make)
            assert "/*" not in code and "*/" not in code, name
        assert all(" " <= ch <= "~" or ch in "\n\t" for ch in text), name   # Make recipes: tabs


@needs_gcc
def test_hostile_onnx_import_export_build_and_run_never_fire(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    Path("h.onnx").write_bytes(hostile_onnx(side=8, classes=10).SerializeToString())
    assert main(["import", "h.onnx", "--calibrate", "digits", "-o", "h.npz", "--json"]) == 0
    names = json.loads(capsys.readouterr().out)["source_names"]
    assert PAYLOAD in names.values() and FC_NAME in names.values()
    assert io.load("h.npz").meta["provenance"]["source_names"] == names     # kept in the model file
    fc = next(k for k, v in names.items() if v == FC_NAME)

    assert main(["export", "h.npz", "--target", "cortex-m4", "--kernels", "ref", "-o", "inf"]) == 0
    capsys.readouterr()
    assert main(["export", "h.npz", "--target", "cortex-m4", "--kernels", "ref", "--method", "zo",
                 "--batch", "1", "--trainable", f"layers:{FC_NAME}",   # the original name
                 "-o", "zo", "--json"]) == 0
    exported = json.loads(capsys.readouterr().out)
    assert exported["trainable"] == [fc] and exported["source_names"] == {fc: FC_NAME}
    for lib in (Path("inf"), Path("zo")):
        files = _generated(lib) | {"README.md": (lib / "README.md").read_text()}
        assert not [m for m in (*MARKERS, PAYLOAD, FC_NAME) for t in files.values() if m in t]
        _assert_inert(_generated(lib))

    logits, _ = run_host(build_host("inf", tmp_path / "inf.exe", sanitize=False), np.zeros((2, 8, 8, 1)), 10)
    assert logits.shape == (2, 10)
    exe = build_host_train("zo", tmp_path / "zo.exe", sanitize=False)
    data = tmp_path / "data.bin"
    write_train_data(data, [(np.zeros((1, 8, 8, 1), np.int8), np.array([3]))], 0.01)
    assert subprocess.run([str(exe), str(data), str(tmp_path / "res.bin")], timeout=120).returncode == 0
    assert not list(tmp_path.rglob("CANARY")) and not Path("CANARY").exists()


def _gate_only(monkeypatch) -> None:
    monkeypatch.setattr(G, "validate_names", lambda *_: None)  # graph.Graph calls it by this name


def test_the_codegen_gate_alone_keeps_hostile_names_in_comments(monkeypatch):
    """Every emitter, with names the graph would refuse: inference, ZO, BP-QAS (momentum), FQT."""
    from mcutrain.codegen.dispatch import emit_training
    from mcutrain.codegen.emit import emit_model
    from mcutrain.methods.bp_qas import BPQASConfig, BPQASMethod
    from mcutrain.methods.fqt import FQT
    from mcutrain.methods.fqt_state import FQTConfig
    from mcutrain.methods.zo import ZOConfig, ZOMethod

    _gate_only(monkeypatch)
    qm = hostile_qmodel()
    x = np.random.default_rng(0).random((8, 4, 4, 1), dtype=np.float32)
    sources = [emit_model(qm, kernels=k, provenance=PAYLOAD) for k in ("ref", "dsp")]
    for m in (ZOMethod(qm, ZOConfig(seed=1)), BPQASMethod(qm, BPQASConfig(momentum=0.9)),
              *(FQT(qm.graph, FQTConfig(precision=p), x) for p in ("int8", "uint8", "float32"))):
        sources.append(emit_training(m, batch=1, kernels="ref", provenance=PAYLOAD))
    for i, s in enumerate(sources):
        _assert_inert({f"{i}.h": s.header, f"{i}.c": s.source})
        assert "system" in s.header       # the payload is there, as a harmless comment


@needs_gcc
def test_gate_only_libraries_compile_pedantic_and_run_without_the_canary(tmp_path, monkeypatch):
    from mcutrain.methods.zo import ZOConfig, ZOMethod

    _gate_only(monkeypatch)
    monkeypatch.chdir(tmp_path)
    qm = hostile_qmodel()
    export_library(qm, "inf", kernels="ref", provenance=PAYLOAD)
    logits, _ = run_host(build_host("inf", tmp_path / "inf.exe"), np.zeros((1, 4, 4, 1)), 3)
    assert logits.shape == (1, 3)
    res = export_training_library(ZOMethod(qm, ZOConfig(seed=1, queries=2)), "zo", kernels="ref",
                                  provenance=PAYLOAD)
    exe = build_host_train("zo", tmp_path / "zo.exe")
    steps = run_host_train(exe, [(np.zeros((1, 4, 4, 1), np.int8), np.array([1]))], 0.5, res.model, 3)
    assert len(steps) == 1
    assert not list(tmp_path.rglob("CANARY"))


def test_hostile_onnx_through_mcutrain_run_on_the_emulated_core(tmp_path, monkeypatch, capsys, arm_tools):
    """`mcutrain run` (inference and a ZO training step, built for the M4 and run under QEMU) on the
    hostile import: bit-exact, and no CANARY anywhere the payload could have written it."""
    monkeypatch.chdir(tmp_path)
    Path("h.onnx").write_bytes(hostile_onnx(side=8, classes=10).SerializeToString())
    assert main(["import", "h.onnx", "--calibrate", "digits", "-o", "h.npz"]) == 0
    capsys.readouterr()
    assert main(["run", "h.npz", "--dataset", "digits", "--target", "cortex-m4", "--steps", "2",
                 "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["bit_exact"] is True
    assert main(["run", "h.npz", "--dataset", "digits", "--target", "cortex-m4", "--method", "zo",
                 "--trainable", f"layers:{FC_NAME}", "--queries", "2", "--batch", "1", "--steps", "1",
                 "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["bit_exact"] is True
    assert not list(tmp_path.rglob("CANARY")) and not Path("/CANARY").exists()
