"""Arena planners: hand-computed offsets, alignment, the overlap invariant and bad input."""

from __future__ import annotations

import numpy as np
import pytest

from mcutrain.plan.arena import (
    Buffer,
    GreedyPlanner,
    LinearPlanner,
    PlanError,
    check_no_overlap,
    make_planner,
)


def test_greedy_hand_computed_offsets():
    p = GreedyPlanner(alignment=4)
    a = p.add_buffer(100, 0, 1, "a")   # largest: placed first at 0
    b = p.add_buffer(40, 1, 2, "b")    # alive with a at step 1 -> after a, aligned: 100
    c = p.add_buffer(60, 2, 3, "c")    # alive with b only: 60 > 0..100 gap? b sits at 100, c fits at 0
    d = p.add_buffer(10, 0, 3, "d")    # alive with all three: a [0,100), b [100,140), c [0,60) -> 140
    assert [p.offset(i) for i in (a, b, c, d)] == [0, 100, 0, 140]
    assert p.peak == 152  # 150 rounded up to the alignment
    check_no_overlap(p.buffers)


def test_greedy_fills_a_gap_between_buffers():
    p = GreedyPlanner(alignment=1)
    p.add_buffer(50, 0, 0, "early")
    p.add_buffer(30, 0, 2, "long")      # 50 + 30 = 80
    p.add_buffer(20, 1, 2, "late")      # early is dead at step 1: the hole [0, 50) holds it
    assert [b.offset for b in p.buffers] == [0, 50, 0]
    assert p.peak == 80


def test_greedy_ties_keep_insertion_order():
    p = GreedyPlanner(alignment=1)
    ids = [p.add_buffer(8, 0, 0, str(i)) for i in range(3)]
    assert [p.offset(i) for i in ids] == [0, 8, 16]


def test_linear_never_reuses():
    p = LinearPlanner(alignment=4)
    for size in (5, 8, 3):
        p.add_buffer(size, 0, 0)
    assert [b.offset for b in p.buffers] == [0, 8, 16]
    assert p.peak == 20


def test_zero_sized_buffers_take_no_room():
    p = GreedyPlanner()
    p.add_buffer(0, 0, 5)
    p.add_buffer(16, 0, 5)
    assert p.peak == 16
    check_no_overlap(p.buffers)


def test_random_lifetimes_never_overlap_and_greedy_beats_linear():
    rng = np.random.default_rng(0)
    for _ in range(20):
        g, lin = GreedyPlanner(), LinearPlanner()
        for _ in range(int(rng.integers(1, 30))):
            first = int(rng.integers(0, 10))
            last = first + int(rng.integers(0, 4))
            size = int(rng.integers(0, 500))
            g.add_buffer(size, first, last)
            lin.add_buffer(size, first, last)
        check_no_overlap(g.buffers)
        check_no_overlap(lin.buffers)
        assert g.peak <= lin.peak
        # the peak is at least the bytes alive at the busiest step
        busiest = max(sum(b.size for b in g.buffers if b.first_use <= t <= b.last_use) for t in range(14))
        assert g.peak >= busiest


def test_overlap_check_names_both_buffers():
    a = Buffer(16, 0, 2, "x", offset=0)
    b = Buffer(16, 2, 3, "y", offset=8)
    with pytest.raises(PlanError, match=r"'x'.*'y'.*steps 2\.\.2"):
        check_no_overlap([a, b])
    check_no_overlap([a, Buffer(16, 3, 4, "z", offset=0)])  # not alive together: fine


def test_bad_buffers_and_planner_names():
    p = GreedyPlanner()
    with pytest.raises(PlanError, match="size"):
        p.add_buffer(-1, 0, 0, "neg")
    with pytest.raises(PlanError, match="lifetime"):
        p.add_buffer(4, 3, 1, "backwards")
    with pytest.raises(PlanError, match="unknown planner 'best'"):
        make_planner("best")
