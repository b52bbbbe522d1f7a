"""IDX reading: round trips, header-only reads, damaged files refused with a clear message."""

import gzip

import numpy as np
import pytest

from mcutrain.data.idx import IdxError, read_idx, read_idx_header, write_idx


@pytest.mark.parametrize("suffix", [".gz", ""])
def test_round_trip(tmp_path, suffix):
    a = np.arange(2 * 3 * 4, dtype=np.uint8).reshape(2, 3, 4)
    p = tmp_path / f"images-idx3-ubyte{suffix}"
    write_idx(p, a)
    assert np.array_equal(read_idx(p), a)
    assert read_idx_header(p) == (np.dtype("u1"), (2, 3, 4))


def test_known_bytes(tmp_path):
    p = tmp_path / "labels-idx1-ubyte"
    p.write_bytes(bytes([0, 0, 8, 1, 0, 0, 0, 3, 7, 1, 9]))
    assert read_idx(p).tolist() == [7, 1, 9]
    q = tmp_path / "ints-idx1-ubyte"
    q.write_bytes(bytes([0, 0, 0x0C, 1, 0, 0, 0, 2]) + np.array([1, -2], ">i4").tobytes())
    assert read_idx(q).tolist() == [1, -2] and read_idx(q).dtype == np.dtype("i4")


def test_damaged_files(tmp_path):
    bad = tmp_path / "bad.gz"
    bad.write_bytes(gzip.compress(b"\x01\x02\x03\x04"))
    with pytest.raises(IdxError, match="not an IDX file"):
        read_idx(bad)
    short = tmp_path / "short"
    short.write_bytes(bytes([0, 0, 8, 1, 0, 0, 0, 5, 1, 2]))
    with pytest.raises(IdxError, match="damaged"):
        read_idx(short)
    notgz = tmp_path / "plain.gz"
    notgz.write_bytes(b"not gzip at all")
    with pytest.raises(IdxError, match="cannot read"):
        read_idx(notgz)
