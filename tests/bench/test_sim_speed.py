"""`sim-speed` (`bench.sim_speed`): its rows, the fresh-process sides and the PyTorch twin."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mcutrain import zoo
from mcutrain.bench import sim_speed
from mcutrain.bench.sim_speed_step import Side


def test_the_full_budget_has_a_row_for_every_method_precision_batch_and_arch():
    rows = {(s.arch, s.method, s.precision, s.batch, s.workers) for s in sim_speed.sides(sim_speed.BUDGET)}
    want = {(a, m, p, b, 1) for a in ("small-cnn", "mcunet-5fps") for m, p in sim_speed.METHODS
            for b in (1, 8, 32)}
    assert rows == want | {("small-cnn", "zo", "mix", 32, 2)}
    assert {p for m, p in sim_speed.METHODS if m == "fqt"} == {"uint8", "mixed", "float32", "int8"}
    assert {p for m, p in sim_speed.METHODS if m == "zo"} == {"wp", "np", "mix"}


def test_a_side_runs_in_its_own_process_and_times_only_its_steps():
    s = Side("mcutrain", "small-cnn", 2, 2, "fqt", "int8")
    seconds = sim_speed.run_side(s)
    assert 0 < seconds < 30
    assert Side("mcutrain", "small-cnn", 2, 2, "zo", workers=2).clock == "wall" and s.clock == "process CPU"


def test_a_failing_side_says_what_failed():
    with pytest.raises(RuntimeError, match="unknown method"):
        sim_speed.run_side(Side("mcutrain", "small-cnn", 1, 1, "nope"))


def test_torch_twin_covers_depthwise_and_residual_adds():
    torch = pytest.importorskip("torch")
    from mcutrain.bench.torch_twin import torch_model
    g = zoo.build("mcunet-5fps", 10, (32, 32, 3), seed=0)
    model = torch_model(g)
    out = model(torch.rand(2, 3, 32, 32))
    assert tuple(out.shape) == (2, 10)
    convs = [m for m in model.modules() if isinstance(m, torch.nn.Conv2d)]
    assert len(convs) == sum(n.op.value == "conv2d" for n in g.nodes)
    assert any(c.groups == c.in_channels > 1 for c in convs)                       # depthwise
    params = sum(p.numel() for p in model.parameters())
    assert params == sum(n.params["weight"].size + n.params["bias"].size for n in g.parametric())


def test_step_entry_point_prints_its_measurement():
    pytest.importorskip("torch")
    spec = {"side": "torch", "arch": "small-cnn", "batch": 2, "steps": 1}
    out = subprocess.run([sys.executable, "-m", "mcutrain.bench.sim_speed_step", json.dumps(spec)],
                         capture_output=True, text=True, check=True, env=sim_speed_env())
    doc = json.loads(out.stdout)
    assert doc["seconds"] > 0 and doc["side"] == "torch" and doc["workers"] == 1
    assert doc["keep_freed_memory"] is False       # PyTorch users run glibc's defaults


def test_an_mcutrain_side_keeps_freed_memory_as_mcutrain_train_does():
    if not sys.platform.startswith("linux"):
        pytest.skip("keep_freed_memory sets glibc's malloc thresholds: Linux only")
    spec = {"side": "mcutrain", "arch": "small-cnn", "batch": 1, "steps": 1, "warmup": 0}
    out = subprocess.run([sys.executable, "-m", "mcutrain.bench.sim_speed_step", json.dumps(spec)],
                         capture_output=True, text=True, check=True, env=sim_speed_env())
    assert json.loads(out.stdout)["keep_freed_memory"] is True


def sim_speed_env() -> dict[str, str]:
    src = str(Path(sim_speed.__file__).resolve().parents[2])
    return {**os.environ, "PYTHONPATH": src}
