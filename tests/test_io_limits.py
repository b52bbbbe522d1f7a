"""Bounded loading: peak RSS of hostile files, the size limits, output modes, temp-file cleanup."""

from __future__ import annotations

import io as _io
import json
import os
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest

from mcutrain import io, limits, zoo
from mcutrain.cli import main

RSS_BOUND_MIB = 64
"""A hostile load may raise the peak RSS by at most this much over the process after import."""

_MEASURE = """
import resource, sys
from mcutrain import io
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
try:
    io.load(sys.argv[1])
    outcome = "loaded"
except io.ModelFileError as e:
    outcome = "refused: " + str(e)
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print((after - before) // 1024, outcome)
"""


def _members(path: Path) -> list[tuple[str, bytes]]:
    with zipfile.ZipFile(path) as z:
        return [(i.filename, z.read(i)) for i in z.infolist()]


def _header(shape: tuple[int, ...]) -> bytes:
    buf = _io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": "<f4", "fortran_order": False, "shape": shape})
    return buf.getvalue()


def _peak_mib(path: Path) -> tuple[int, str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    out = subprocess.run([sys.executable, "-c", _MEASURE, str(path)], capture_output=True, text=True,
                         env=env, timeout=120, check=True).stdout.split(" ", 1)
    return int(out[0]), out[1].strip()


@pytest.mark.skipif(sys.platform != "linux", reason="ru_maxrss is in KiB on Linux")
def test_hostile_files_stay_within_the_rss_bound(tmp_path):
    good = io.save(tmp_path / "good.npz", zoo.build("digits-cnn"))
    members = _members(good)
    huge = tmp_path / "huge-header.npz"       # a referenced array claiming 10^12 elements
    with zipfile.ZipFile(huge, "w", zipfile.ZIP_DEFLATED) as z:
        for name, blob in members:
            z.writestr(name, _header((10 ** 6, 10 ** 6)) if name == "conv1.weight.npy" else blob)
    junk = tmp_path / "unreferenced.npz"      # 256 MiB of zeros nothing references
    with zipfile.ZipFile(junk, "w", zipfile.ZIP_DEFLATED) as z:
        for name, blob in members:
            z.writestr(name, blob)
        with z.open("junk.npy", "w", force_zip64=True) as f:
            f.write(_header((64 << 20,)))
            for _ in range(256):
                f.write(bytes(1 << 20))
    grown, outcome = _peak_mib(huge)
    print(f"\n10^12-element header: +{grown} MiB")
    assert outcome.startswith("refused") and "elements" in outcome
    assert grown < RSS_BOUND_MIB
    grown, outcome = _peak_mib(junk)
    print(f"256 MiB unreferenced member: +{grown} MiB")
    assert outcome == "loaded"
    assert grown < RSS_BOUND_MIB


def test_every_zoo_model_is_within_the_limits(tmp_path):
    for arch in zoo.ARCHS:
        g = zoo.build(arch)
        io.check_limits(g)
        assert io.load(io.save(tmp_path / f"{arch}.npz", g)).graph.total_macs() == g.total_macs()


def test_a_4096x4096_input_is_refused_at_load_and_in_plan(tmp_path, capsys):
    path = io.save(tmp_path / "m.npz", zoo.build("digits-cnn"))
    members = _members(path)
    meta = np.lib.format.read_array(_io.BytesIO(dict(members)["__meta__.npy"]))
    doc = json.loads(meta.tobytes())
    doc["graph"]["input_shape"] = [4096, 4096, 1]
    buf = _io.BytesIO()
    np.lib.format.write_array(buf, np.frombuffer(json.dumps(doc).encode(), np.uint8))
    with zipfile.ZipFile(path, "w") as z:
        for name, blob in members:
            z.writestr(name, buf.getvalue() if name == "__meta__.npy" else blob)
    with pytest.raises(io.ModelFileError, match=f"limit {limits.MAX_TENSOR_ELEMENTS:,}"):
        io.load(path)
    assert main(["plan", "--arch", "mcunet-5fps", "--input-size", "4096", "--method", "fqt",
                 "--target", "nrf52840"]) == 1
    assert "limit" in capsys.readouterr().err


def test_the_stated_load_bound_covers_the_largest_zoo_model():
    g = zoo.build("mcunet-5fps")
    assert limits.load_bound_bytes(g.num_params()) < 64 << 20


def test_outputs_honour_the_umask(tmp_path):
    old = os.umask(0o027)
    try:
        path = io.save(tmp_path / "m.npz", zoo.build("digits-cnn"))
    finally:
        os.umask(old)
    assert path.stat().st_mode & 0o777 == 0o640


def test_stale_temp_files_of_the_same_target_are_removed(tmp_path):
    stale = tmp_path / ".m.npz.abc123.tmp"
    fresh = tmp_path / ".m.npz.def456.tmp"
    other = tmp_path / ".other.npz.abc123.tmp"
    for p in (stale, fresh, other):
        p.write_bytes(b"x")
    old = time.time() - 2 * io.STALE_TMP_SECONDS
    os.utime(stale, (old, old))
    os.utime(other, (old, old))
    io.save(tmp_path / "m.npz", zoo.build("digits-cnn"))
    assert not stale.exists()
    assert fresh.exists() and other.exists()      # young (maybe a save in progress) or another target


def test_check_writable_refuses_before_any_work(tmp_path):
    (tmp_path / "dir.npz").mkdir()
    (tmp_path / "file").write_text("x")
    with pytest.raises(io.OutputPathError, match="is a folder"):
        io.check_writable(tmp_path / "dir.npz", ".npz")
    with pytest.raises(io.OutputPathError, match=r"must end in \.npz"):
        io.check_writable(tmp_path / "m.txt", ".npz")
    with pytest.raises(io.OutputPathError, match="not a folder"):
        io.check_writable(tmp_path / "file" / "m.npz", ".npz")
    assert io.check_writable(tmp_path / "new" / "deeper" / "m.npz", ".npz").name == "m.npz"
    if os.geteuid() != 0:                     # root may write anywhere
        ro = tmp_path / "ro"
        ro.mkdir(mode=0o500)
        with pytest.raises(io.OutputPathError, match="no permission"):
            io.check_writable(ro / "m.npz", ".npz")
