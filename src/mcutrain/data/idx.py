"""Reader for the IDX format of MNIST and Fashion-MNIST (gzip-compressed or raw).

IDX (LeCun et al., http://yann.lecun.com/exdb/mnist/): two zero bytes, a type
code, the number of dimensions, then each dimension as a big-endian uint32,
then the data in C order, big-endian.
"""

from __future__ import annotations

import gzip
import struct
from pathlib import Path

import numpy as np

IDX_TYPES = {0x08: np.dtype("u1"), 0x09: np.dtype("i1"), 0x0B: np.dtype(">i2"),
             0x0C: np.dtype(">i4"), 0x0D: np.dtype(">f4"), 0x0E: np.dtype(">f8")}


class IdxError(ValueError):
    """An IDX file that cannot be read; the message names the file and what to do."""


def _open(path: Path):
    return gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb")


def _parse_header(head: bytes, path: Path) -> tuple[np.dtype, tuple[int, ...], int]:
    if len(head) < 4 or head[0] != 0 or head[1] != 0 or head[2] not in IDX_TYPES:
        raise IdxError(f"'{path}' is not an IDX file (bad magic number); "
                       "replace it with the original dataset file")
    ndim = head[3]
    if len(head) < 4 + 4 * ndim:
        raise IdxError(f"'{path}' is truncated inside its header; replace it with the original file")
    shape = struct.unpack(f">{ndim}I", head[4:4 + 4 * ndim])
    return IDX_TYPES[head[2]], tuple(int(d) for d in shape), 4 + 4 * ndim


def read_idx_header(path: str | Path) -> tuple[np.dtype, tuple[int, ...]]:
    """The element type and shape of an IDX file, reading only its first bytes."""
    path = Path(path)
    try:
        with _open(path) as f:
            head = f.read(4 + 4 * 255)
    except (OSError, EOFError) as e:
        raise IdxError(f"cannot read '{path}': {e}; replace it with the original file") from None
    dtype, shape, _ = _parse_header(head, path)
    return dtype, shape


def read_idx(path: str | Path) -> np.ndarray:
    """The whole array of an IDX file, in native byte order."""
    path = Path(path)
    try:
        with _open(path) as f:
            raw = f.read()
    except (OSError, EOFError) as e:
        raise IdxError(f"cannot read '{path}': {e}; the file may be truncated: replace it") from None
    dtype, shape, offset = _parse_header(raw[:4 + 4 * 255], path)
    count = int(np.prod(shape)) if shape else 1
    if len(raw) - offset != count * dtype.itemsize:
        raise IdxError(f"'{path}' holds {len(raw) - offset} data bytes but its header says "
                       f"{count * dtype.itemsize} ({shape}); the file is damaged: replace it")
    return np.frombuffer(raw, dtype=dtype, count=count, offset=offset).reshape(shape).astype(
        dtype.newbyteorder("="))


def write_idx(path: str | Path, array: np.ndarray) -> None:
    """Write `array` as IDX (gzip-compressed when the name ends in .gz); used to make test files."""
    path = Path(path)
    codes = {v.newbyteorder("="): k for k, v in IDX_TYPES.items()}
    code = codes.get(array.dtype.newbyteorder("="))
    if code is None:
        raise IdxError(f"IDX cannot store dtype {array.dtype}")
    header = bytes([0, 0, code, array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape)
    payload = header + np.ascontiguousarray(array, dtype=IDX_TYPES[code]).tobytes()
    with (gzip.open(path, "wb") if path.suffix == ".gz" else open(path, "wb")) as f:
        f.write(payload)
