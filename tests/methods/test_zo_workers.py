"""ZO queries across worker processes (`zo_workers`): the recorded digests for any worker count."""

from __future__ import annotations

import os

import numpy as np
import pytest
from test_zo_state_hash import CASES, DIGESTS, run_digest

from mcutrain.methods import zo_workers as zw


@pytest.fixture
def always_split(monkeypatch):
    """Split every step, however small (the rule would keep the small cases in one process)."""
    monkeypatch.setattr(zw, "MIN_SPLIT_MACS", 0)


@pytest.mark.parametrize("name, workers", [
    ("small-cnn mix q10 b32", 2), ("small-cnn mix q10 b32", 3), ("small-cnn np q10 b1", 4),
    ("small-cnn mix randk q10 b32", 2), ("small-cnn np topk q10 b32", 3),
    ("small-cnn wp randk q10 b32 tflite", 2), ("small-cnn mix q1 b1", 2), ("mcunet mix q10 b8", 3),
    ("mobilenet mix q10 b8", 2)])
def test_any_worker_count_gives_the_recorded_run(pinned_floats, always_split, name, workers):
    assert run_digest(CASES[name], workers=workers) == DIGESTS[name]


def test_the_workers_really_ran_and_are_reaped(always_split):
    from mcutrain import zoo
    from mcutrain.engines import ptq
    from mcutrain.methods.zo import ZOConfig, ZOMethod
    x = np.random.default_rng(0).random((8, 28, 28, 1), dtype=np.float32)
    m = ZOMethod(ptq.quantize_model(zoo.build("small-cnn"), x), ZOConfig(queries=6), workers=3)
    m.step(x, np.arange(8) % 10, 0.01)
    pids = list(m._pool.pids)
    assert len(pids) == 2 and all(os.waitpid(p, os.WNOHANG) == (0, 0) for p in pids)   # alive
    m.close()
    for p in pids:
        with pytest.raises(ChildProcessError):
            os.waitpid(p, os.WNOHANG)                                                # reaped


def test_split_rule_and_ranges():
    assert zw.split_queries(10, 2) == ((0, 5), (5, 10))
    assert zw.split_queries(2, 5) == ((0, 1), (1, 2))          # never an empty range
    assert not zw.use_split(zw.MIN_SPLIT_MACS - 1, 2) and zw.use_split(zw.MIN_SPLIT_MACS, 2)
    assert not zw.use_split(10**12, 1)
    assert zw.available_cores() == len(os.sched_getaffinity(0))


def test_a_worker_error_reaches_the_trainer(always_split):
    def failing(state, part):
        raise ValueError("boom")
        yield
    pool = zw.QueryWorkers(zw.split_queries(4, 2), failing)
    pool.send_step([np.zeros(3)])
    with pytest.raises(RuntimeError, match="boom"):
        pool.losses(1)
    pool.close()


def test_messages_carry_arrays_without_pickle():
    arrays = [np.arange(5, dtype=np.int8), np.uint32(7), np.zeros((2, 3), np.int64)]
    back = zw.decode(zw.encode(arrays))
    assert [a.dtype for a in back] == [a.dtype for a in map(np.asarray, arrays)]
    assert all(np.array_equal(a, b) for a, b in zip(arrays, back))




@pytest.mark.parametrize("name, workers", [("small-cnn mix q10 b32", 2), ("small-cnn np q10 b1", 3)])
def test_stochastic_update_rounding_is_the_same_on_any_worker_count(always_split, name, workers):
    """The update's draws come from the stream the workers jump over: one process and N agree."""
    one = run_digest(CASES[name], workers=1, update_rounding="stochastic")
    assert one != DIGESTS[name]                                  # the rounding really changed the run
    assert run_digest(CASES[name], workers=workers, update_rounding="stochastic") == one
