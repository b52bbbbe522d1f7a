"""Generated C of a tiny model: snapshots (a generator refactor must give zero diff) and facts.

Set MCUTRAIN_UPDATE_SNAPSHOTS=1 to rewrite the snapshots after an intended change, then review
the diff like code.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
import pytest

from conftest import tiny_qmodel
from mcutrain.codegen.emit import ExportError, emit_model
from mcutrain.codegen.library import export_library
from mcutrain.codegen.runtime_files import runtime_files
from mcutrain.graph import Op

SNAPSHOTS = Path(__file__).parent / "snapshots" / "tiny"


@pytest.mark.parametrize("kernels", ["dsp", "ref"])
def test_snapshot_of_the_tiny_model(kernels):
    src = emit_model(tiny_qmodel(), kernels=kernels, provenance="tests/codegen tiny model")
    for name, text in ((f"model_{kernels}.h", src.header), (f"model_{kernels}.c", src.source)):
        path = SNAPSHOTS / name
        if os.environ.get("MCUTRAIN_UPDATE_SNAPSHOTS"):
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        assert path.exists(), f"snapshot {path.name} missing: run with MCUTRAIN_UPDATE_SNAPSHOTS=1"
        assert text == path.read_text(), f"generated {name} differs from its snapshot"


def test_generated_code_uses_the_plan_verbatim():
    src = emit_model(tiny_qmodel(), kernels="dsp")
    p = src.plan
    assert f"#define MODEL_ARENA_BYTES {p.arena_bytes}" in src.header
    off, size = p.scratch["conv"]
    assert f"const mt_context ctx = {{model_arena.bytes + {off}, {size}}};" in src.source
    assert f"(model_arena.bytes + {p.offsets['fc']})" in src.source
    # weights, biases, multipliers and shifts: the conv's 18 weights widened to int16 with each
    # kernel row padded to four (2 * 3 * 4 * 2 bytes), 24 int8, (2 + 3) * 3 int32
    assert src.const_bytes == 48 + 24 + 4 * 3 * 5
    assert "mt_conv2d_fwd_s8_s16(" in src.source and "conv_weight.v" in src.source
    ref = emit_model(tiny_qmodel(), kernels="ref")
    assert ref.const_bytes == 18 + 24 + 4 * 3 * 5 and "mt_conv2d_fwd_s8(" in ref.source


def test_no_float_no_malloc_in_generated_or_runtime_code():
    src = emit_model(tiny_qmodel(), kernels="dsp")
    texts = {"model.c": src.source, "model.h": src.header, **runtime_files()}
    for name, text in texts.items():
        code = re.sub(r"/\*.*?\*/", "", text, flags=re.S)   # comments may say "float"
        for word in ("float", "double", "malloc", "calloc", "free", "realloc"):
            assert not re.search(rf"\b{word}\b", code), f"{name} uses {word}"


def test_export_writes_a_complete_library(tmp_path):
    res = export_library(tiny_qmodel(), tmp_path, kernels="ref", provenance="test")
    for f in ("model.c", "model.h", "Makefile", "CMakeLists.txt", "README.md", "harness/main.c",
              "runtime/mt_nn.h", "runtime/mt_fixedpoint.h", "runtime/mt_conv2d_fwd_s8.c"):
        assert (tmp_path / f).is_file(), f
    assert "-DMT_KERNELS_REF" in (tmp_path / "Makefile").read_text()
    assert f"| arena (RAM) | {res.arena_bytes} bytes" in (tmp_path / "README.md").read_text()


def test_unsupported_op_is_refused_with_the_node_name():
    qm = tiny_qmodel()
    qm.graph.nodes[1].op = Op.BATCHNORM
    with pytest.raises(ExportError, match="node 'pool': op batchnorm cannot be exported"):
        emit_model(qm)


def test_accumulator_bound_is_checked_at_export():
    qm = tiny_qmodel()
    qm.biases["fc"] = np.array([2**31 - 1, 0, 0], np.int32)
    with pytest.raises(ExportError, match="int32 accumulator"):
        emit_model(qm)
