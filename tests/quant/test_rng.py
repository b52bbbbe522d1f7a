"""xorshift32: vectorized draws are the one sequential stream, and fast."""

from __future__ import annotations

import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcutrain.quant.rng import ZERO_SEED_STATE, XorShift32


def ref_stream(seed: int, n: int) -> list[int]:
    """Plain-int transcription of the C ``next()``."""
    x = seed & 0xFFFFFFFF or ZERO_SEED_STATE
    out = []
    for _ in range(n):
        x ^= (x << 13) & 0xFFFFFFFF
        x ^= x >> 17
        x ^= (x << 5) & 0xFFFFFFFF
        out.append(x)
    return out


def test_known_values() -> None:
    # Marsaglia (2003): xorshift32 from 2463534242 starts 723471715, 2497366906, 2064144800
    assert ref_stream(ZERO_SEED_STATE, 3) == [723471715, 2497366906, 2064144800]
    g = XorShift32(0)
    assert g.state == ZERO_SEED_STATE
    assert [g.next_u32() for _ in range(3)] == [723471715, 2497366906, 2064144800]
    assert XorShift32(1).draw_u32(3).tolist() == [270369, 67634689, 2647435461]


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(0, 3000))
def test_draw_equals_sequential_calls(seed: int, n: int) -> None:
    g = XorShift32(seed)
    got = g.draw_u32(n)
    assert got.dtype == np.uint32 and got.shape == (n,)
    ref = ref_stream(seed, n)
    assert got.tolist() == ref
    assert g.state == (ref[-1] if n else (seed or ZERO_SEED_STATE))


def test_large_draw_and_chained_draws_are_one_stream() -> None:
    ref = ref_stream(12345, 70_001)
    g = XorShift32(12345)
    parts = [g.draw_u32(1), g.draw_u32(300), g.draw_u32(65_536), g.next_u32(), g.draw_u32(4_163)]
    flat = np.concatenate([np.atleast_1d(np.asarray(p, np.uint32)) for p in parts])
    assert flat.tolist() == ref
    h = XorShift32(12345)
    h.advance(70_000)
    assert h.next_u32() == ref[-1]


def test_draw_speed() -> None:
    g = XorShift32(7)
    g.draw_u32(1_000_000)                              # warm the jump-matrix cache
    best = min(_timed(g.draw_u32, 1_000_000) for _ in range(3))
    assert best < 0.1


def _timed(f, n: int) -> float:
    t = time.perf_counter()
    f(n)
    return time.perf_counter() - t


def test_uniform_and_rademacher_are_defined_bitwise() -> None:
    u = ref_stream(99, 1000)
    assert XorShift32(99).uniform01(1000).tolist() == [float(np.float32((v >> 8) / 2**24)) for v in u]
    assert XorShift32(99).rademacher(1000).tolist() == [1 if v >> 31 == 0 else -1 for v in u]
    r = XorShift32(3).rademacher(100_000)
    assert r.dtype == np.int8 and set(np.unique(r).tolist()) == {-1, 1} and abs(r.mean()) < 0.02
    x = XorShift32(4).uniform01(100_000)
    assert x.dtype == np.float32 and x.min() >= 0.0 and x.max() < 1.0 and abs(x.mean() - 0.5) < 0.01


def test_state_save_and_resume() -> None:
    g = XorShift32(5)
    g.draw_u32(1234)
    saved = g.to_dict()
    a = g.draw_u32(500)
    h = XorShift32.from_dict(saved)
    assert h.draw_u32(500).tolist() == a.tolist()
    with pytest.raises(ValueError, match="state must be"):
        g.state = 0
    with pytest.raises(ValueError, match="negative"):
        g.draw_u32(-1)
    assert XorShift32(2**32 + 7).state == 7


def test_repeated_draw_sizes_reuse_lane_jumps_and_stay_one_stream() -> None:
    """A training step redraws the same counts: cached lane jumps (also for fewer lanes) change nothing."""
    ref = np.asarray(ref_stream(77, 3 * 4_000 + 2 * 2_100 + 1_000), np.uint32)
    g = XorShift32(77)
    a, u, b = g.draw_u32(4_000), g.uniform01(4_000), g.draw_u32(4_000)
    c, d, e = g.draw_u32(2_100), g.draw_u32(2_100), g.draw_u32(1_000)
    assert np.array_equal(u, (ref[4_000:8_000] >> 8).astype(np.float32) * np.float32(2.0**-24))
    assert np.concatenate([a, ref[4_000:8_000], b, c, d, e]).tolist() == ref.tolist()
    assert g.state == int(ref[-1])


def test_packed_rademacher_takes_32_signs_per_draw() -> None:
    u = ref_stream(17, 3 * 4)                      # 3 rows of 100 signs: ceil(100 / 32) = 4 draws each
    want = [[-1 if (u[4 * r + e // 32] >> (e % 32)) & 1 else 1 for e in range(100)] for r in range(3)]
    g = XorShift32(17)
    assert g.rademacher_packed(3, 100).tolist() == want
    assert g.state == u[-1]                        # the unused 28 bits of each row's last draw are dropped
    bits = XorShift32(17).sign_bits(3, 100)
    assert bits.dtype == np.uint8 and (1 - 2 * bits.astype(int)).tolist() == want
    big = XorShift32(3).rademacher_packed(4, 50_000)
    assert big.dtype == np.int8 and abs(big.mean()) < 0.01
    assert XorShift32(3).sign_bits(0, 7).shape == (0, 7) and XorShift32(3).sign_bits(2, 0).shape == (2, 0)
    with pytest.raises(ValueError, match="negative"):
        XorShift32(3).sign_bits(-1, 5)


def test_sign_bits_of_whole_words_keep_each_rows_last_draw() -> None:
    u = ref_stream(17, 3 * 4)
    g = XorShift32(17)
    bits = g.sign_bits(3, 100, whole_words=True)
    assert bits.shape == (3, 128) and bits.dtype == np.uint8       # whole draws: 4 x 32 signs per row
    want = [[(u[4 * r + e // 32] >> (e % 32)) & 1 for e in range(128)] for r in range(3)]
    assert bits.tolist() == want                                   # the discarded high bits included
    assert g.state == u[-1]
    assert np.array_equal(bits[:, :100], XorShift32(17).sign_bits(3, 100))
    assert XorShift32(3).sign_bits(0, 7, whole_words=True).shape == (0, 32)
    assert XorShift32(3).sign_bits(2, 0, whole_words=True).shape == (2, 0)
