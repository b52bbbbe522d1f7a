"""FQT's range records and scratch: the sizes the planner counts are the C runtime's."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from mcutrain import graph as G
from mcutrain.codegen.runtime_files import RUNTIME_DIR
from mcutrain.plan.fqt_ranges import RANGE_RECORD_BYTES, error_range_owners, range_scratch


@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is not installed: apt-get install gcc")
def test_a_range_record_is_the_runtimes_mt_fqt_range(tmp_path):
    src = tmp_path / "size.c"
    src.write_text('#include <stdio.h>\n#include "mt_fqt_common.h"\n'
                   'int main(void) { printf("%u", (unsigned)sizeof(mt_fqt_range)); return 0; }\n')
    exe = tmp_path / "size"
    subprocess.run(["gcc", "-I", str(RUNTIME_DIR / "include"), "-I", str(RUNTIME_DIR / "train" / "fqt"),
                    str(src), "-o", str(exe)], check=True, capture_output=True)
    out = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout
    assert int(out) == RANGE_RECORD_BYTES


def _branchy() -> G.Graph:
    """A linear read by two heads summed: its output owns an error range, the relu's does not."""
    return G.Graph((4,), [G.linear("a", G.INPUT, 6, act="relu", in_features=4),
                          G.linear("b", "a", 3, in_features=6),
                          G.linear("c", "a", 3, in_features=6),
                          G.add("s", "b", "c")], "branchy")


def test_error_ranges_belong_to_layer_inputs_and_forks():
    g = _branchy()
    needs = {G.INPUT: False, "a": True, "b": True, "c": True, "s": True}
    assert error_range_owners(g, needs) == ["s", "a"]
    needs_head = {G.INPUT: False, "a": False, "b": False, "c": True, "s": True}
    assert error_range_owners(g, needs_head) == ["s"]


def test_range_scratch_is_sized_by_the_widest_layer_and_the_classes():
    scratch = range_scratch(_branchy())
    assert (scratch.channels, scratch.classes) == (6, 3)
    assert scratch.nbytes == 4 * (2 * 6 + 3)


def _fqt_small(batch: int):
    import numpy as np

    from mcutrain import zoo
    from mcutrain.methods.fqt import FQT
    from mcutrain.methods.fqt_state import FQTConfig
    from mcutrain.plan.schedules import schedule_for

    x = np.random.default_rng(0).random((4, 8, 8, 1), dtype=np.float32)
    m = FQT(zoo.build("digits-cnn"), FQTConfig(precision="int8", trainable="all"), x)
    return m, schedule_for(m, batch=batch, kernels="ref")


def test_a_batch_keeps_its_logits_and_small_tensors_for_the_seeding_rounds():
    from mcutrain.codegen.emit_fqt import emit_fqt_training
    from mcutrain.plan.fqt_ranges import seed_keep

    m, s = _fqt_small(3)
    keep = seed_keep(s, sample_grads=False)
    assert keep.tensors[0] == m.graph.output            # the loss reads the logits first
    assert keep.sample_bytes == sum(s.tensors[t].nbytes for t in keep.tensors) <= s.tensors[G.INPUT].nbytes
    assert keep.covered[0] == "loss"
    buf = s.tensors["state:seed_keep"]
    assert (buf.role.value, buf.nbytes) == ("state", 3 * keep.sample_bytes)
    others = sum(t.nbytes for n, t in s.tensors.items() if n != "state:seed_keep" and t.resident
                 and t.role.value == "state")
    assert s.resident_bytes()["state"] == others + buf.nbytes      # the planner counts it as method state
    assert f"static int8_t fqt_seed_keep[{buf.nbytes}];" in emit_fqt_training(m, batch=3).source
    assert "state:seed_keep" not in _fqt_small(1)[1].tensors      # batch 1 seeds from its one sample
