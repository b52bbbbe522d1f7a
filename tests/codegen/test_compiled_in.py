"""model.h and README.md say what a library has compiled in, read from the method's decisions."""

from __future__ import annotations

import numpy as np

from mcutrain import zoo
from mcutrain.codegen.compiled_in import compiled_in, header_lines, readme_rows
from mcutrain.codegen.library import export_library, export_training_library
from mcutrain.engines import ptq
from mcutrain.methods.decisions import INT8, StepDecisions
from mcutrain.methods.fqt import FQT
from mcutrain.methods.fqt_state import FQTConfig
from mcutrain.methods.partial import PartialPolicy
from mcutrain.version import __version__


def _calib(g):
    return np.random.default_rng(0).random((8, *g.input_shape), dtype=np.float32)


def test_an_fqt_library_names_its_partial_layers_lambdas_batch_and_version(tmp_path):
    g = zoo.build("digits-cnn", seed=0)
    method = FQT(g, FQTConfig(precision="int8", trainable="last:2", lambda_min=0.25, seed=1), _calib(g))
    export_training_library(method, tmp_path, batch=1, kernels="ref")
    header, readme = (tmp_path / "model.h").read_text(), (tmp_path / "README.md").read_text()
    d = method.decisions
    assert d.partial_layers            # the configuration has partial updates to report
    partial = "; ".join(f"{n} (lambda_min 0.25, lambda_max {p.lambda_max:g})" for n, p in d.partial)
    for line in ("method: fqt", f"partial updates: {partial}",
                 f"trained weights: {', '.join(d.weight_layers)}", "batch: 1 sample(s)",
                 "rounding: single", f"mcutrain: {__version__}"):
        assert f" *     {line}" in header
    assert f"| partial updates | {partial} |" in readme and f"| mcutrain | {__version__} |" in readme


def test_an_inference_library_says_its_rounding_mode(tmp_path):
    g = zoo.build("digits-cnn", seed=0)
    export_library(ptq.quantize_model(g, _calib(g), rounding="tflite"), tmp_path, kernels="dsp")
    header = (tmp_path / "model.h").read_text()
    assert " *     method: none (inference only)" in header and " *     rounding: tflite" in header
    assert "| kernels | dsp |" in (tmp_path / "README.md").read_text()


def test_layer_names_pass_the_comment_gate():
    hostile = "fc*/\n#include <x>|"
    d = StepDecisions("zo", INT8, (hostile,), partial=((hostile, PartialPolicy(0.5, 1.0)),))
    facts = compiled_in(d, batch=4, rounding="single", kernels="ref")
    text = header_lines(facts)
    assert "*/" not in text and "\n#" not in text and len(text.splitlines()) == len(facts)
    assert all(row.count("|") == 3 for row in readme_rows(facts).splitlines())
