"""Running a sweep: the same lines for any worker count, failures recorded, finished cells skipped,
an interrupted sweep resumed without redoing a finished cell."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import mcutrain
from mcutrain.sweep import store
from mcutrain.sweep.engine import run_sweep
from mcutrain.sweep.spec import parse_sweep, read_sweep


def lines_by_key(out: Path) -> dict[str, str]:
    return {json.loads(t)["key"]: t for t in (out / store.RESULTS).read_text().splitlines()}


def test_one_worker_and_two_write_the_same_lines(small_sweep, tmp_path):
    spec = read_sweep(small_sweep)
    one = run_sweep(spec, tmp_path / "one", workers=1, progress=False)
    two = run_sweep(spec, tmp_path / "two", workers=2, progress=False)
    assert one["done"] == two["done"] == 8 and one["failed"] == two["failed"] == 0
    a, b = lines_by_key(tmp_path / "one"), lines_by_key(tmp_path / "two")
    assert set(a) == {c.key for c in spec.cells} and a == b
    line = json.loads(a[spec.cells[0].key])
    assert line["status"] == "done" and line["mcutrain"] == mcutrain.__version__
    assert "samples_per_s" not in line["train"] and 0.0 <= line["eval"]["accuracy"] <= 1.0
    timings = store.read_lines(tmp_path / "one" / store.TIMINGS)
    assert sorted(t["key"] for t in timings) == sorted(a) and all(t["seconds"] > 0 for t in timings)


def test_a_cell_matches_the_api_run_it_stands_for(small_sweep, tmp_path):
    spec = read_sweep(small_sweep)
    run_sweep(spec, tmp_path, workers=1, progress=False)
    cell = spec.cells[5]        # zo, lr 0.01, seed 1
    line = json.loads(lines_by_key(tmp_path)[cell.key])
    r = mcutrain.train(None, "digits", "zo", arch="digits-cnn", train_samples=200, test_samples=100,
                       epochs=1, lr=0.01, seed=1, queries=4)
    assert line["train"]["accuracy_after"] == r.result["accuracy_after"]
    assert line["train"]["history"] == json.loads(json.dumps(r.result["history"]))
    assert line["eval"]["accuracy"] == mcutrain.evaluate(r.model, "digits", seed=1, test_samples=100)


def test_failed_cell_is_recorded_and_the_sweep_goes_on_then_reruns(tmp_path):
    spec = parse_sweep('[base]\narch = "digits-cnn"\nepochs = 1\ntrain_samples = 100\ntest_samples = 50\n'
                       '[grid]\ndataset = ["no-such-data", "digits"]\n', "f.toml")
    s = run_sweep(spec, tmp_path, workers=1, progress=False)
    assert (s["done"], s["failed"], s["skipped"]) == (1, 1, 0)
    bad = json.loads(lines_by_key(tmp_path)[spec.cells[0].key])
    assert bad["status"] == "failed" and bad["error"]["type"] == "UserError"
    assert "no-such-data" in bad["error"]["message"]
    again = run_sweep(spec, tmp_path, workers=1, progress=False)
    assert (again["done"], again["failed"], again["skipped"]) == (0, 1, 1)     # failures run again


def test_interrupted_sweep_resumes_without_redoing_finished_cells(small_sweep, tmp_path):
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "mcutrain.cli", "sweep", str(small_sweep), "-o", str(out), "--workers", "1"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and len(store.read_lines(out / store.RESULTS)) < 2:
            time.sleep(0.05)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)     # the sweep's own process group: a kill mid-run
        proc.wait()
    before = lines_by_key(out)
    assert 2 <= len(before) < 8, "the sweep must be killed part way for this test to mean anything"
    done = subprocess.run([*cmd, "--json"], env=env, capture_output=True, text=True, check=True)
    summary = json.loads(done.stdout)
    assert summary["cells"] == 8 and summary["skipped"] == len(before)
    assert summary["done"] == 8 - len(before) and summary["failed"] == 0
    keys = Counter(ln["key"] for ln in store.read_lines(out / store.RESULTS))
    assert len(keys) == 8 and set(keys.values()) == {1}     # no finished cell was run twice
    after = lines_by_key(out)
    assert all(after[k] == v for k, v in before.items())
