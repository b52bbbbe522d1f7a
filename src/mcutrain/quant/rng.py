"""xorshift32: the one random stream of every stochastic choice, reproduced by the C runtime.

Marsaglia's xorshift32 with shifts (13, 17, 5) (G. Marsaglia, "Xorshift RNGs",
J. Stat. Softw. 8(14), 2003) on a uint32 state that is never 0::

    x ^= x << 13; x ^= x >> 17; x ^= x << 5; return x;   // next(): update, then return

Seeding: ``state = seed mod 2^32``; seed 0 (the one fixed point of the map)
becomes ``ZERO_SEED_STATE`` = 2463534242, Marsaglia's example seed.

Values drawn from the stream:
- ``draw_u32(n)``: the next n outputs, exactly as n calls of ``next()``.
- ``uniform01(n)``: ``float32(u >> 8) * 2^-24``: 24-bit fractions in [0, 1 - 2^-24], exact in float32.
- ``rademacher(n)``: ``+1`` if the top bit of ``u`` is 0, else ``-1``, one draw per value
  (the C ``mt_xorshift32_rademacher``).
- ``rademacher_packed(rows, n)``: 32 signs per draw, for the ZO perturbations whose
  every element takes a sign (millions per step, where one draw per sign would
  cost more than the forward passes). Each of ``rows`` vectors of ``n`` signs
  takes ``ceil(n / 32)`` fresh draws; element ``e`` is ``+1`` if bit ``e mod 32``
  (bit 0 the least significant) of draw ``e div 32`` is 0, else ``-1``; the
  unused high bits of a row's last draw are discarded.

Vectorized drawing is the same single sequence: the update is linear over
GF(2), so its 32x32 bit matrix ``T`` can be raised to any power by squaring.
``draw_u32`` starts K lanes at offsets 0, L, 2L, ... of the stream (jumps by
``T^L``), advances all lanes together for L steps with numpy ops over the
lanes, and reads the result lane by lane.

Example:
    >>> g = XorShift32(1)
    >>> [g.next_u32() for _ in range(3)]
    [270369, 67634689, 2647435461]
    >>> XorShift32(1).draw_u32(3).tolist()
    [270369, 67634689, 2647435461]
"""

from __future__ import annotations

import numpy as np

ZERO_SEED_STATE = 2463534242
_MASK = 0xFFFFFFFF
_BITS = np.arange(32, dtype=np.uint32)
_SEQUENTIAL_BELOW = 256


def _step_array(x: np.ndarray) -> np.ndarray:
    x = x ^ (x << np.uint32(13))
    x = x ^ (x >> np.uint32(17))
    return x ^ (x << np.uint32(5))


def _apply(mat: np.ndarray, states: np.ndarray) -> np.ndarray:
    """Apply a GF(2) matrix (32 uint32 columns: images of the unit bits) to uint32 states."""
    bits = (states[..., None] >> _BITS) & np.uint32(1)
    return np.bitwise_xor.reduce(bits * mat, axis=-1)


def _matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Column form of ``a @ b`` over GF(2): the images under ``a`` of ``b``'s columns."""
    return _apply(a, b)


_T = _step_array(np.uint32(1) << _BITS)
_POW2: list[np.ndarray] = [_T]          # _POW2[i] = T^(2^i), extended on demand
_LANE_JUMPS: dict[int, list[tuple[np.ndarray, np.ndarray]]] = {}
"""steps -> [T^steps, T^(2 steps), T^(4 steps), ...] with their byte tables: the lane-start jumps of
`draw_u32`, kept for the few draw sizes a training run repeats (a step redraws the same counts)."""
_TABLES_FROM = 256
"""Lane-start jumps of at least this many states use the byte tables (cheaper per state, more calls)."""
_ROW_PAD = 16
"""Extra uint32 per row of `draw_u32`'s (steps, lanes) scratch: lanes is a power of two, and a
power-of-two row stride maps a column's elements to one cache set (the final transpose thrashes)."""
_LANE_JUMPS_KEPT = 64


def _jump_matrix(steps: int) -> np.ndarray:
    """``T^steps`` by binary powers."""
    result = np.uint32(1) << _BITS       # identity
    i = 0
    while steps >> i:
        while len(_POW2) <= i:
            _POW2.append(_matmul(_POW2[-1], _POW2[-1]))
        if (steps >> i) & 1:
            result = _matmul(_POW2[i], result)
        i += 1
    return result


def _byte_tables(mat: np.ndarray) -> np.ndarray:
    """(4, 256) uint32: the image under `mat` of each byte value at each byte position of a state."""
    v = np.arange(256, dtype=np.uint32)
    return np.stack([_apply(mat, v << np.uint32(8 * k)) for k in range(4)])


def _apply_tables(tabs: np.ndarray, s: np.ndarray) -> np.ndarray:
    """`_apply` by four table lookups: the map is linear, so a state's image is the XOR of its bytes'."""
    return (tabs[0][s & np.uint32(0xFF)] ^ tabs[1][(s >> np.uint32(8)) & np.uint32(0xFF)]
            ^ tabs[2][(s >> np.uint32(16)) & np.uint32(0xFF)] ^ tabs[3][s >> np.uint32(24)])


def _lane_jumps(steps: int, count: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """At least the first `count` of (T^(steps * 2^i), its byte tables), from the cache when drawn before."""
    jumps = _LANE_JUMPS.pop(steps, None) or [(m := _jump_matrix(steps), _byte_tables(m))]
    while len(jumps) < count:
        m = _matmul(jumps[-1][0], jumps[-1][0])
        jumps.append((m, _byte_tables(m)))
    if len(_LANE_JUMPS) >= _LANE_JUMPS_KEPT:
        _LANE_JUMPS.pop(next(iter(_LANE_JUMPS)))        # the least recently used
    _LANE_JUMPS[steps] = jumps
    return jumps


class XorShift32:
    """The seeded xorshift32 stream; ``state`` can be read and set for save/resume."""

    def __init__(self, seed: int = 0) -> None:
        self.state = int(seed) & _MASK or ZERO_SEED_STATE

    @property
    def state(self) -> int:
        return self._state

    @state.setter
    def state(self, value: int) -> None:
        v = int(value)
        if not 0 < v <= _MASK:
            raise ValueError(f"xorshift32 state must be in [1, 2^32 - 1], got {value}")
        self._state = v

    def next_u32(self) -> int:
        """Update the state, then return it (the C ``next()``)."""
        x = self._state
        x ^= (x << 13) & _MASK
        x ^= x >> 17
        x ^= (x << 5) & _MASK
        self._state = x
        return x

    def draw_u32(self, n: int) -> np.ndarray:
        """The next ``n`` outputs as uint32, identical to ``n`` calls of ``next_u32``."""
        if n < 0:
            raise ValueError(f"cannot draw a negative count ({n})")
        if n < _SEQUENTIAL_BELOW:
            return np.array([self.next_u32() for _ in range(n)], dtype=np.uint32)
        lanes = 1 << max(4, int(np.ceil(np.log2(np.sqrt(n * 64.0)))))
        steps = -(-n // lanes)
        # start states: lane k holds the stream value just before its first output, i.e. T^(kL) s0
        start = np.empty(lanes, dtype=np.uint32)
        start[0] = self._state
        filled = 1
        doublings = lanes.bit_length() - 1
        for mat, tabs in _lane_jumps(steps, doublings)[:doublings]:  # T^(L * filled), filled = 1, 2, 4, ...
            src = start[:filled]          # few states: the bit expansion has less call overhead
            start[filled:2 * filled] = _apply(mat, src) if filled < _TABLES_FROM else _apply_tables(tabs, src)
            filled *= 2
        out = np.empty((steps, lanes + _ROW_PAD), dtype=np.uint32)[:, :lanes]
        tmp = np.empty(lanes, dtype=np.uint32)
        prev = start
        for j in range(steps):      # loop over steps; each step advances all lanes together
            row = out[j]
            np.left_shift(prev, 13, out=tmp)
            np.bitwise_xor(prev, tmp, out=row)
            np.right_shift(row, 17, out=tmp)
            np.bitwise_xor(row, tmp, out=row)
            np.left_shift(row, 5, out=tmp)
            np.bitwise_xor(row, tmp, out=row)
            prev = row
        result = np.ascontiguousarray(out.T).reshape(-1)[:n]     # lane by lane: the stream order
        self._state = int(result[-1])
        return result

    def advance(self, n: int) -> None:
        """Skip ``n`` outputs in O(log n) (the same as drawing and discarding them)."""
        if n < 0:
            raise ValueError(f"cannot advance by a negative count ({n})")
        self._state = int(_apply(_jump_matrix(n), np.array(self._state, dtype=np.uint32)))

    def uniform01(self, n: int) -> np.ndarray:
        """``n`` float32 values ``(u >> 8) * 2^-24`` in [0, 1)."""
        u = self.draw_u32(n)
        u >>= np.uint32(8)                   # in place: the draw is a fresh array
        f = u.astype(np.float32)
        f *= np.float32(2.0**-24)
        return f

    def rademacher(self, n: int) -> np.ndarray:
        """``n`` int8 values in {-1, +1}: ``1 - 2 * (u >> 31)``."""
        return (1 - 2 * (self.draw_u32(n) >> np.uint32(31)).astype(np.int8)).astype(np.int8)

    def sign_bits(self, rows: int, n: int, whole_words: bool = False) -> np.ndarray:
        """The bits of `rademacher_packed` as uint8 (rows, n): 1 where the sign is ``-1``.

        Callers that only select between two values (``x + s`` or ``x - s``)
        or sum the selected ones use the bits directly (``u = 1 - 2 * bit``).
        `whole_words` keeps each row's whole draws, ``32 ceil(n / 32)`` bits
        (the discarded high bits of the last one included: slice ``[:, :n]``),
        so a row is a whole number of 8-byte words and needs no copy.
        """
        if rows < 0 or n < 0:
            raise ValueError(f"cannot draw a negative count ({rows} x {n})")
        words = -(-n // 32)
        w = self.draw_u32(rows * words).astype("<u4", copy=False).reshape(rows, words)
        return np.unpackbits(w.view(np.uint8), axis=1, count=None if whole_words else n, bitorder="little")

    def rademacher_packed(self, rows: int, n: int) -> np.ndarray:
        """int8 (rows, n) signs, 32 per draw, each row from fresh draws (module docstring)."""
        return (1 - 2 * self.sign_bits(rows, n).view(np.int8)).astype(np.int8, copy=False)

    def to_dict(self) -> dict[str, int]:
        return {"state": self._state}

    @classmethod
    def from_dict(cls, d: dict[str, int]) -> XorShift32:
        g = cls()
        g.state = d["state"]
        return g
