"""Reading `.npz` members as hostile input: bounded headers, no pickle, exactly the declared bytes.

Model files (`mcutrain.io`) and a user's dataset file (`mcutrain.data.npz_file`) are both
`.npz` archives from outside. Both read them through these functions: a member's `.npy`
header is parsed with a bounded length and refused when it declares Python objects (which
need pickle), a structured or exotic type, or more elements than the caller allows; only then
is its data read, exactly the bytes the header declares, straight into the array.

Example:
    >>> with open_zip(path) as z:
    ...     info = zip_members(z)["x.npy"]
    ...     h = member_header(z, info, "x", max_elements=1 << 20)
    ...     x = member_data(z, info, h, "x")
"""

from __future__ import annotations

import io
import struct
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import numpy as np
from numpy.lib import format as npy_format

from mcutrain import limits

MAX_NPY_HEADER = 64 << 10
"""Largest `.npy` header accepted (numpy's own default limit is 10,000 characters)."""


class Refused(Exception):
    """A reason to refuse an archive; the caller turns it into its own error naming the file."""


@dataclass(frozen=True)
class NpyHeader:
    dtype: np.dtype
    shape: tuple[int, ...]
    fortran: bool
    offset: int   # bytes of magic + header

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.float64)) * self.dtype.itemsize


def read_exact(f: BinaryIO, n: int, what: str) -> bytes:
    b = f.read(n)
    if len(b) != n:
        raise Refused(f"{what} is truncated")
    return b


def read_header(f: BinaryIO, name: str, max_elements: int = limits.MAX_PARAMS) -> NpyHeader:
    """The `.npy` header of a member, read with a bounded length; refuses pickled (object) data."""
    magic = read_exact(f, 8, f"array '{name}'")
    try:
        major, minor = npy_format.read_magic(io.BytesIO(magic))
    except ValueError:
        raise Refused(f"array '{name}' is not a .npy array (bad magic)") from None
    if (major, minor) not in ((1, 0), (2, 0), (3, 0)):
        raise Refused(f"array '{name}' has .npy format version {major}.{minor}")
    size_fmt = "<H" if major == 1 else "<I"
    raw = read_exact(f, struct.calcsize(size_fmt), f"array '{name}' header")
    hlen = struct.unpack(size_fmt, raw)[0]
    if hlen > MAX_NPY_HEADER:
        raise Refused(f"array '{name}' has a {hlen:,}-byte header (limit {MAX_NPY_HEADER:,})")
    head = read_exact(f, hlen, f"array '{name}' header")
    reader = npy_format.read_array_header_1_0 if major == 1 else npy_format.read_array_header_2_0
    try:
        shape, fortran, dtype = reader(io.BytesIO(raw + head))
    except Exception as e:  # numpy's header parser raises ValueError, SyntaxError,
        # tokenize.TokenError, RecursionError... on hostile headers; each is just a corrupt header
        raise Refused(f"array '{name}' has a corrupt header ({str(e)[:120]})") from None
    if dtype.hasobject:
        raise Refused(f"array '{name}' holds Python objects that need pickle to load; "
                      "mcutrain never loads pickled data")
    if dtype.fields is not None or dtype.subdtype is not None or dtype.kind not in "iuf" \
            or dtype.itemsize > 8:
        raise Refused(f"array '{name}' has type {dtype}; mcutrain reads plain integer or float arrays")
    if any(d < 0 for d in shape) or len(shape) > 8:
        raise Refused(f"array '{name}' has an invalid shape {shape}")
    n = int(np.prod(shape, dtype=np.float64))
    if n > max_elements:
        raise Refused(f"array '{name}' claims {n:,} elements, more than the limit {max_elements:,}")
    return NpyHeader(dtype, tuple(int(d) for d in shape), bool(fortran), 8 + len(raw) + hlen)


def read_data(f: BinaryIO, h: NpyHeader, name: str) -> np.ndarray:
    """Exactly the bytes the header declares, straight into the array (no second copy)."""
    order = h.shape[::-1] if h.fortran else h.shape
    arr = np.empty(order, h.dtype)
    view = memoryview(arr.reshape(-1).view(np.uint8))
    got = 0
    while got < len(view):
        k = f.readinto(view[got:])
        if not k:
            raise Refused(f"array '{name}' is truncated ({got:,} of {len(view):,} bytes)")
        got += k
    if h.fortran:
        arr = np.ascontiguousarray(arr.T)
    if not arr.dtype.isnative:
        arr = arr.astype(arr.dtype.newbyteorder("="))
    return arr


def open_zip(path: Path, what: str) -> zipfile.ZipFile:
    """The zip archive at `path`, refused (naming `what` it should be) when it is not one."""
    with open(path, "rb") as fh:
        if fh.read(4) != b"PK\x03\x04":
            raise Refused(f"is not a readable {what} (not a zip archive)")
    try:
        return zipfile.ZipFile(path)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, OSError, ValueError) as e:
        raise Refused(f"is not a readable {what} ({e}); it may be truncated") from None


def zip_members(z: zipfile.ZipFile) -> dict[str, zipfile.ZipInfo]:
    """Member name -> info; a duplicated name is refused (which copy counts would be ambiguous)."""
    out: dict[str, zipfile.ZipInfo] = {}
    dup = set()
    for info in z.infolist():
        if info.filename in out:
            dup.add(info.filename)
        out[info.filename] = info
    if dup:
        raise Refused(f"the archive holds duplicated entries {sorted(dup)[:5]}")
    return out


def open_member(z: zipfile.ZipFile, info: zipfile.ZipInfo) -> BinaryIO:
    if info.flag_bits & 0x1:
        raise Refused(f"entry '{info.filename}' is encrypted")
    return z.open(info)


def member_header(z: zipfile.ZipFile, info: zipfile.ZipInfo, name: str,
                  max_elements: int = limits.MAX_PARAMS) -> NpyHeader:
    """The header of member `info`, which must declare exactly the bytes the entry holds."""
    with open_member(z, info) as f:
        h = read_header(f, name, max_elements)
    if h.offset + h.nbytes != info.file_size:
        raise Refused(f"array '{name}': the entry holds {info.file_size:,} bytes, its header "
                      f"declares {h.offset + h.nbytes:,}")
    return h


def member_data(z: zipfile.ZipFile, info: zipfile.ZipInfo, h: NpyHeader, name: str) -> np.ndarray:
    """The data of member `info` whose header `h` was read (and checked) before."""
    with open_member(z, info) as f:
        f.read(h.offset)
        return read_data(f, h, name)
