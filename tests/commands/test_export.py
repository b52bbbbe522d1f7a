"""`mcutrain export`: a library that builds warning-free; bad input gets clear errors."""

from __future__ import annotations

import json
import shutil
import subprocess

import numpy as np
import pytest

from mcutrain import zoo
from mcutrain.cli import main
from mcutrain.engines import ptq
from mcutrain.plan.memory import kb


def test_export_random_arch_json(tmp_path, capsys):
    out = tmp_path / "lib"
    rc = main(["export", "--arch", "digits-cnn", "--init", "random", "--seed", "3", "--target", "cortex-m4",
               "-o", str(out), "--json"])
    assert rc == 0
    r = json.loads(capsys.readouterr().out)
    assert r["kernels"] == "dsp" and r["target"] == "cortex-m4"
    assert "He init (seed 3)" in r["provenance"] and "random" in r["provenance"]
    assert "model.c" in r["files"] and (out / "model.c").is_file()
    assert f"#define MODEL_ARENA_BYTES {r['arena_bytes']}" in (out / "model.h").read_text()
    assert "He init (seed 3)" in (out / "README.md").read_text()


@pytest.mark.skipif(shutil.which("make") is None or shutil.which("gcc") is None,
                    reason="needs make and gcc: apt-get install -y make gcc")
def test_exported_makefile_builds_warning_free_on_the_host(tmp_path):
    out = tmp_path / "lib"
    assert main(["export", "--arch", "mnist1d-cnn", "--init", "random", "--target", "cortex-m0plus",
                 "-o", str(out)]) == 0
    r = subprocess.run(["make", "-s", "-C", str(out), "harness", "OPT=-O1", "CFLAGS_ARCH=-pedantic"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""   # -Wall -Wextra -Werror -pedantic: not even a warning
    assert (out / "model_harness").is_file()


def test_export_int8_model_file(tmp_path, capsys):
    g = zoo.build("digits-cnn", seed=1)
    qm = ptq.quantize_model(g, np.random.default_rng(1).random((16, 8, 8, 1), dtype=np.float32))
    path = qm.save(tmp_path / "m.npz", {"arch": "digits-cnn", "dataset": "digits"})
    assert main(["export", str(path), "--target", "cortex-m7", "--kernels", "ref", "-o", str(tmp_path / "o"),
                 "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["kernels"] == "ref" and "int8 model file m.npz" in r["provenance"]
    assert "-DMT_KERNELS_REF" in (tmp_path / "o" / "Makefile").read_text()


@pytest.mark.parametrize(("argv", "message"), [
    (["--arch", "digits-cnn", "--init", "random", "--target", "cortex-m4", "--method", "fqt",
      "--precision", "uint8", "--batch", "200"], "at most --batch 128"),
    (["--arch", "digits-cnn", "--init", "random", "--target", "cortex-m0plus", "--kernels", "dsp"],
     "no DSP extension"),
    (["--arch", "digits-cnn", "--init", "random", "--target", "pdp-11"], "unknown target 'pdp-11'"),
    (["--arch", "digits-cnn", "--target", "cortex-m4"], "--arch needs --init random"),
    (["--arch", "resnet", "--init", "random", "--target", "cortex-m4"], "unknown architecture 'resnet'"),
    (["--target", "cortex-m4"], "either a MODEL file or --arch"),
    (["missing.npz", "--target", "cortex-m4"], "does not exist"),
    (["--arch", "digits-cnn", "--init", "random", "--target", "cortex-m4", "--prefix", "Kws"],
     "--prefix: symbol prefix 'Kws' is not a C identifier prefix"),
    (["--arch", "digits-cnn", "--init", "random", "--format", "tflite", "--prefix", "kws_"],
     "--prefix, --inputs and --example are about a C library"),
])
def test_export_errors(tmp_path, capsys, argv, message):
    assert main(["export", *argv, "-o", str(tmp_path / "o")]) == 1
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_export_with_a_prefix_names_every_file_and_says_so(tmp_path, capsys):
    out = tmp_path / "kws"
    assert main(["export", "--arch", "digits-cnn", "--init", "random", "--target", "nrf52840",
                 "--prefix", "kws_", "-o", str(out), "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["prefix"] == "kws_"
    assert {"kws_model.h", "kws_model.c", "runtime/kws_mt_nn.h"} <= set(r["files"])
    assert all(f.startswith(("kws_", "runtime/kws_", "harness/")) or f in
               ("README.md", "Makefile", "CMakeLists.txt", "cmake/arm-none-eabi.cmake") for f in r["files"])
    assert "int kws_model" not in (out / "kws_model.h").read_text()     # kws_mt_status, not int
    assert "kws_mt_status kws_model_predict(" in (out / "kws_model.h").read_text()
    assert "link `kws_model`" in (out / "README.md").read_text()


def test_float_model_file_needs_a_dataset(tmp_path, capsys):
    from mcutrain import io
    path = io.save(tmp_path / "f.npz", zoo.build("digits-cnn"))
    assert main(["export", str(path), "--target", "cortex-m4", "-o", str(tmp_path / "o")]) == 1
    assert "pass --dataset" in capsys.readouterr().err
    assert main(["export", str(path), "--target", "cortex-m4", "--dataset", "digits", "-o",
                 str(tmp_path / "o"), "--json"]) == 0
    assert "PTQ on 256 training samples" in json.loads(capsys.readouterr().out)["provenance"]


def test_a_library_that_does_not_fit_is_refused_with_the_planners_breakdown(tmp_path, capsys):
    """The planner's verdict, the one `plan` exits 3 on: nothing written, what takes the RAM, what to try."""
    step = ["--arch", "small-cnn", "--method", "fqt", "--precision", "int8", "--target", "nrf52840"]
    assert main(["plan", *step, "--json"]) == 3
    planned = json.loads(capsys.readouterr().out)["ram_bytes"]
    argv = ["export", *step, "--init", "random", "-o", str(tmp_path / "lib")]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err and not (tmp_path / "lib").exists()
    share = f"{100 * planned / 262144:.0f}%"
    over = kb(planned - 262144)
    assert f"the fqt step needs {kb(planned)} of RAM; nrf52840 has 256.0 KB ({share}), {over} over" in err
    assert "largest RAM parts: arena (at conv2.bwd_in: gradient buffers" in err
    # the smallest board of targets.toml that holds the ~595 KB step: the STM32U585's 786 KB
    for tip in ("--batch 8", "--partial 0.1", "--trainable last:2", "--method zo", "--target stm32u585"):
        assert tip in err
    assert main([*argv, "--allow-overflow", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["fits"] is False and doc["planned_ram_bytes"] > doc["ram_limit"] == 256 * 1024
    assert (tmp_path / "lib" / "model.c").exists()


def test_c_api_md_lists_the_exact_json_keys_of_export_and_run():
    """docs/c-api.md names every `--json` key of export and run, in the order they are printed."""
    from pathlib import Path

    from mcutrain.api.device import EXPORT_KEYS, FILE_EXPORT_KEYS, TRAINING_EXPORT_KEYS
    from mcutrain.api.mcu_run import CONFIG_KEYS, JSON_KEYS, MEMORY_KEYS

    doc = (Path(__file__).resolve().parents[2] / "docs" / "c-api.md").read_text()
    run_part = doc.split("## `mcutrain run`", 1)[1].split("\n## ", 1)[0]
    export_part = doc.split("## `mcutrain export --json`", 1)[1].split("\n## ", 1)[0]
    for part, keys in ((run_part, (*JSON_KEYS, *MEMORY_KEYS, *CONFIG_KEYS)),
                       (export_part, (*EXPORT_KEYS, *TRAINING_EXPORT_KEYS, *FILE_EXPORT_KEYS))):
        where = [part.find(f"`{k}`") for k in keys]
        assert -1 not in where, [k for k, i in zip(keys, where, strict=True) if i < 0]
    assert "accepts only `none`" not in doc


def test_export_json_keys_are_exactly_the_documented_ones(tmp_path, capsys):
    from mcutrain.api.device import EXPORT_KEYS, TRAINING_EXPORT_KEYS

    base = ["export", "--arch", "digits-cnn", "--init", "random", "--target", "cortex-m4", "--json"]
    assert main([*base, "-o", str(tmp_path / "inf")]) == 0
    assert tuple(json.loads(capsys.readouterr().out)) == EXPORT_KEYS
    assert main([*base, "--method", "zo", "--queries", "2", "-o", str(tmp_path / "zo")]) == 0
    assert tuple(json.loads(capsys.readouterr().out)) == (*EXPORT_KEYS, *TRAINING_EXPORT_KEYS)
