"""The runtime file lists are derived from the folders by one rule (codegen/runtime_files.py)."""

from __future__ import annotations

import re
import shutil

import pytest

from mcutrain.codegen import runtime_files as rf


@pytest.mark.parametrize("kernels", rf.KERNEL_CHOICES)
def test_inference_set_is_include_and_nn_and_includes_only_itself(kernels):
    paths = rf.runtime_paths(kernels)
    assert {p.parent.name for p in paths.values()} - {rf.DSP_FOLDER} == {"include", "nn"}
    for name, p in paths.items():
        for inc in re.findall(r'#include "([^"]+)"', p.read_text()):
            assert inc in paths, f"{name} includes {inc}, which an inference library does not ship"


STILL_SWITCHING = {"mt_conv_fwd_pairs.c", "mt_conv_c1.c", "mt_conv_c1_bwd_w.c", "mt_conv2d_fwd_s8_range.c",
                   "mt_fqt_topk.c", "mt_fqt_bias_rescale_s32.c"}
"""Reference files whose DSP paths have not moved to dsp/ yet: the FQT forward convs, and two whose
moved form compiled to more instructions on some core (the moves must not cost cycles)."""


def test_reference_kernels_hold_no_dsp_code():
    """TFLM's layout: the DSP code is in the dsp/ twins; only the shared headers switch on MT_DSP."""
    switch = re.compile(r"^\s*#\s*(if|ifdef|elif)\b.*\bMT_DSP\b", re.M)
    refs = rf.runtime_paths("ref", training=True)
    found = {n for n, p in refs.items() if n.endswith(".c") and switch.search(p.read_text())}
    assert found == STILL_SWITCHING & set(refs), f"reference files with DSP code: {sorted(found)}"


def test_training_set_holds_every_file_once_under_its_own_name():
    every = sorted(p for p in rf.RUNTIME_DIR.rglob("*.[ch]")
                   if not {rf.DSP_FOLDER, rf.MVE_FOLDER, rf.M0_FOLDER} & set(p.parts))
    assert sorted(rf.runtime_paths("ref", training=True).values()) == every
    assert len({p.name for p in every}) == len(every)


def test_dsp_build_takes_the_same_named_twin(tmp_path, monkeypatch):
    root = tmp_path / "runtime"
    shutil.copytree(rf.RUNTIME_DIR, root)
    (root / "dsp").mkdir(exist_ok=True)
    (root / "dsp" / "mt_relu_fwd_s8.c").write_text("/* twin */\n")
    monkeypatch.setattr(rf, "RUNTIME_DIR", root)
    assert rf.runtime_paths("dsp")["mt_relu_fwd_s8.c"] == root / "dsp" / "mt_relu_fwd_s8.c"
    assert rf.runtime_paths("ref")["mt_relu_fwd_s8.c"] == root / "nn" / "mt_relu_fwd_s8.c"
    assert rf.runtime_sources("dsp") == rf.runtime_sources("ref")
    (root / "dsp" / "mt_orphan.c").write_text("/* no reference */\n")
    with pytest.raises(rf.RuntimeLayoutError, match=r"mt_orphan\.c has no reference"):
        rf.runtime_paths("dsp")


def test_unknown_kernel_choice_is_refused():
    with pytest.raises(ValueError, match="kernels must be one of ref, dsp"):
        rf.runtime_files("neon")


def test_every_dsp_file_replaces_a_reference_of_its_name():
    dsp = sorted(p.name for p in (rf.RUNTIME_DIR / rf.DSP_FOLDER).glob("*.[ch]"))
    assert dsp, "the DSP twins live in runtime/dsp"
    ref, fast = rf.runtime_paths("ref", training=True), rf.runtime_paths("dsp", training=True)
    for name in dsp:
        assert ref[name].parent.name != rf.DSP_FOLDER and fast[name].parent.name == rf.DSP_FOLDER, name
    assert rf.runtime_paths("dsp")["mt_linear_fwd_s8.c"].parent.name == rf.DSP_FOLDER


def test_helium_build_takes_the_mve_twin_first_and_no_other_build_ships_one():
    mve = {p.name for p in (rf.RUNTIME_DIR / rf.MVE_FOLDER).glob("*.[ch]")}
    assert {"mt_mve.h", "mt_conv2d_fwd_s8.c", "mt_linear_fwd_s8.c"} <= mve
    for training in (False, True):
        helium = rf.runtime_paths("dsp", training=training, helium=True)
        assert helium["mt_conv2d_fwd_s8.c"].parent.name == rf.MVE_FOLDER
        assert helium["mt_mve.h"].parent.name == rf.MVE_FOLDER
        assert helium["mt_conv2d_fwd_s8_s16.c"].parent.name == rf.DSP_FOLDER  # no twin: the DSP one
        for kernels in rf.KERNEL_CHOICES:
            plain = rf.runtime_paths(kernels, training=training)
            assert all(p.parent.name != rf.MVE_FOLDER for p in plain.values())
            assert "mt_mve.h" not in plain
        headers = {n for n in mve if n.startswith("mt_mve") and n.endswith(".h")}
        assert set(helium) == set(rf.runtime_paths("dsp", training=training)) | headers
    fqt = rf.runtime_paths("dsp", training=True, helium=True)
    for name in ("mt_conv_fwd_pairs.c", "mt_linear_fwd_s8_range.c", "mt_conv2d_bwd_in_s8_s16.c",
                 "mt_linear_bwd_in_s8_s16.c"):  # the FQT int8 step's twins
        assert fqt[name].parent.name == rf.MVE_FOLDER, name
    # the reference build of a Helium core stays the reference
    assert rf.runtime_paths("ref", helium=True) == rf.runtime_paths("ref")


def test_a_new_mve_file_needs_a_reference_or_the_mt_mve_prefix(tmp_path, monkeypatch):
    root = tmp_path / "runtime"
    shutil.copytree(rf.RUNTIME_DIR, root)
    monkeypatch.setattr(rf, "RUNTIME_DIR", root)
    (root / "mve" / "mt_mve_extra.h").write_text("/* shared */\n")
    assert "mt_mve_extra.h" in rf.runtime_paths("dsp", helium=True)
    (root / "mve" / "mt_orphan.c").write_text("/* no reference */\n")
    with pytest.raises(rf.RuntimeLayoutError, match=r"mve/mt_orphan\.c has no reference"):
        rf.runtime_paths("dsp", helium=True)


def test_an_m0_build_takes_the_m0_twin_first_and_no_other_build_ships_one(tmp_path, monkeypatch):
    m0 = rf.runtime_paths("ref", m0=True)
    assert m0["mt_conv2d_fwd_s8.c"].parent.name == rf.M0_FOLDER
    assert m0["mt_m0.h"].parent.name == rf.M0_FOLDER
    assert m0["mt_relu_fwd_s8.c"].parent.name == "nn"   # no twin: the reference
    for kernels in rf.KERNEL_CHOICES:
        assert "mt_m0.h" not in rf.runtime_paths(kernels, training=True)
    assert "mt_m0.h" not in rf.runtime_paths("dsp", m0=True)   # a DSP build never takes them
    root = tmp_path / "runtime"
    shutil.copytree(rf.RUNTIME_DIR, root)
    (root / rf.M0_FOLDER / "mt_orphan.c").write_text("/* no reference */\n")
    monkeypatch.setattr(rf, "RUNTIME_DIR", root)
    with pytest.raises(rf.RuntimeLayoutError, match=r"m0/mt_orphan\.c has no reference"):
        rf.runtime_paths("ref", m0=True)
