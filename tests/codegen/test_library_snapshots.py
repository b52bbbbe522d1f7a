"""Snapshots of every kind of generated library: inference, ZO, BP-QAS and FQT in each precision,
with and without partial updates. A refactor of the code generator must leave them byte-identical;
a change is reviewed like code (set MCUTRAIN_UPDATE_SNAPSHOTS=1 to rewrite them).

Only the files generated per model are kept (model.c, model.h, Makefile, CMakeLists.txt,
README.md); the runtime sources are copied verbatim from the package and have tests of their own.
The models are small on purpose (a few hundred weights), so a diff stays readable.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from conftest import tiny_qmodel
from mcutrain import graph as G
from mcutrain import zoo
from mcutrain.codegen.library import export_library, export_training_library
from mcutrain.engines import ptq
from mcutrain.methods.bp_qas import BPQASConfig, BPQASMethod
from mcutrain.methods.fqt import FQT
from mcutrain.methods.fqt_state import FQTConfig
from mcutrain.methods.zo import ZOConfig, ZOMethod

SNAPSHOTS = Path(__file__).parent / "snapshots" / "libraries"
GENERATED = ("model.c", "model.h", "Makefile", "CMakeLists.txt", "README.md")
PROVENANCE = "tests/codegen library snapshot"


def _graph() -> G.Graph:
    """conv(relu) -> maxpool -> conv(relu6, stride 2) -> flatten -> linear on 8x8x1."""
    nodes = [G.conv2d("conv1", G.INPUT, 3, 3, padding=1, act="relu", in_channels=1),
             G.maxpool("pool", "conv1", 2),
             G.conv2d("conv2", "pool", 4, 3, stride=2, padding=1, act="relu6", in_channels=3),
             G.flatten("flat", "conv2"),
             G.linear("fc", "flat", 5, in_features=2 * 2 * 4)]
    return zoo.he_init(G.Graph((8, 8, 1), nodes, "snapshot"), seed=3)


def _calibration() -> np.ndarray:
    return np.random.default_rng(0).random((8, 8, 8, 1), dtype=np.float32)


def _qmodel():
    return ptq.quantize_model(_graph(), _calibration())


def _fqt(precision: str, lambda_min: float = 1.0) -> FQT:
    cfg = FQTConfig(precision=precision, trainable="all", seed=5, lambda_min=lambda_min,
                    partial_output=lambda_min < 1)
    return FQT(_graph(), cfg, _calibration())


CASES = {
    "inference-ref": lambda out: export_library(tiny_qmodel(), out, kernels="ref", provenance=PROVENANCE),
    "inference-dsp": lambda out: export_library(_qmodel(), out, kernels="dsp", provenance=PROVENANCE),
    "zo-mix": lambda out: export_training_library(
        ZOMethod(_qmodel(), ZOConfig(queries=4, perturb="mix", seed=5)), out, batch=2, kernels="ref",
        provenance=PROVENANCE),
    "zo-np-dsp": lambda out: export_training_library(
        ZOMethod(_qmodel(), ZOConfig(queries=3, perturb="np", seed=5)), out, batch=1, kernels="dsp",
        provenance=PROVENANCE),
    "bp-qas": lambda out: export_training_library(
        BPQASMethod(_qmodel(), BPQASConfig(trainable="last:2", bias_last=1, momentum=0.9)), out, batch=2,
        kernels="ref", provenance=PROVENANCE),
    "fqt-int8": lambda out: export_training_library(_fqt("int8"), out, batch=2, kernels="dsp",
                                                    provenance=PROVENANCE),
    "fqt-int8-partial": lambda out: export_training_library(_fqt("int8", 0.1), out, batch=1, kernels="ref",
                                                            provenance=PROVENANCE),
    "fqt-uint8": lambda out: export_training_library(_fqt("uint8"), out, batch=1, kernels="ref",
                                                     provenance=PROVENANCE),
    "fqt-uint8-partial": lambda out: export_training_library(_fqt("uint8", 0.5), out, batch=1,
                                                             kernels="ref", provenance=PROVENANCE),
    "fqt-mixed": lambda out: export_training_library(_fqt("mixed"), out, batch=1, kernels="ref",
                                                     provenance=PROVENANCE),
    "fqt-float32": lambda out: export_training_library(_fqt("float32"), out, batch=1, kernels="ref",
                                                       provenance=PROVENANCE),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_generated_library_equals_its_snapshot(tmp_path, case):
    CASES[case](tmp_path / case)
    for name in GENERATED:
        text = (tmp_path / case / name).read_text()
        path = SNAPSHOTS / case / name
        if os.environ.get("MCUTRAIN_UPDATE_SNAPSHOTS"):
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        assert path.exists(), f"snapshot {case}/{name} missing: run with MCUTRAIN_UPDATE_SNAPSHOTS=1"
        assert text == path.read_text(), f"generated {case}/{name} differs from its snapshot"


def test_snapshots_have_no_stale_cases():
    """A case removed from CASES takes its snapshot folder with it (no unchecked golden files)."""
    kept = {p.name for p in SNAPSHOTS.iterdir() if p.is_dir()}
    assert kept == set(CASES), f"snapshot folders without a case: {sorted(kept - set(CASES))}"
