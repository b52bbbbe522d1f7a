"""Model files round-trip exactly and refuse truncated, foreign and wrong-version files."""

import json
import zipfile

import numpy as np
import pytest

from mcutrain import io, zoo
from mcutrain.io import ModelFileError


def test_round_trip(tmp_path):
    g = zoo.build("digits-cnn", seed=3)
    extra = {"q/fc/weight": np.arange(-5, 5, dtype=np.int8)}
    path = io.save(tmp_path / "m.npz", g, {"provenance": {"seed": 3}}, extra)
    mf = io.load(path)
    assert mf.meta == {"provenance": {"seed": 3}}
    assert mf.graph.to_dict() == g.to_dict()
    for k, v in g.arrays().items():
        assert mf.graph.arrays()[k].dtype == v.dtype
        np.testing.assert_array_equal(mf.graph.arrays()[k], v)
    np.testing.assert_array_equal(mf.arrays["q/fc/weight"], extra["q/fc/weight"])


def test_truncated_file(tmp_path):
    path = io.save(tmp_path / "m.npz", zoo.build("digits-cnn"))
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(ModelFileError, match="truncated"):
        io.load(path)


def test_foreign_npz_and_not_a_zip(tmp_path):
    np.savez(tmp_path / "other.npz", a=np.zeros(3))
    with pytest.raises(ModelFileError, match="not an mcutrain model"):
        io.load(tmp_path / "other.npz")
    (tmp_path / "text.npz").write_text("hello")
    with pytest.raises(ModelFileError, match="not a readable"):
        io.load(tmp_path / "text.npz")
    with pytest.raises(ModelFileError, match="does not exist"):
        io.load(tmp_path / "missing.npz")


def test_pickled_content_is_refused(tmp_path):
    np.savez(tmp_path / "p.npz", __meta__=np.array([{"a": 1}], dtype=object))
    with pytest.raises(ModelFileError, match="pickle"):
        io.load(tmp_path / "p.npz")


def _rewrite_meta(path, change):
    with np.load(path, allow_pickle=False) as z:
        data = {k: z[k] for k in z.files}
    doc = json.loads(data["__meta__"].tobytes())
    change(doc)
    data["__meta__"] = np.frombuffer(json.dumps(doc).encode(), np.uint8)
    np.savez(path, **data)


def test_wrong_version_and_bad_graph(tmp_path):
    path = io.save(tmp_path / "m.npz", zoo.build("digits-cnn"))
    _rewrite_meta(path, lambda d: d.update(version=99))
    with pytest.raises(ModelFileError, match="version 99"):
        io.load(path)
    path = io.save(tmp_path / "m.npz", zoo.build("digits-cnn"))
    _rewrite_meta(path, lambda d: d["graph"]["nodes"][0]["attrs"].update(out_channels=7))
    with pytest.raises(ModelFileError, match="node 'conv1'"):
        io.load(path)


def test_failed_write_keeps_the_old_file(tmp_path, monkeypatch):
    path = io.save(tmp_path / "m.npz", zoo.build("digits-cnn", seed=0))
    before = path.read_bytes()

    def boom(*a, **k):
        raise OSError("disk full")
    monkeypatch.setattr(np, "savez_compressed", boom)
    with pytest.raises(OSError, match="disk full"):
        io.save(path, zoo.build("digits-cnn", seed=1))
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["m.npz"]  # no temp file left behind


def test_npz_is_a_zip_with_the_meta_entry(tmp_path):
    path = io.save(tmp_path / "m.npz", zoo.build("digits-cnn"))
    assert "__meta__.npy" in zipfile.ZipFile(path).namelist()


@pytest.mark.parametrize("bad", ["fc*/\nint x; /*", "fc\u2028", "9fc"])
def test_a_file_edited_to_carry_a_hostile_node_name_is_refused(tmp_path, bad):
    """The JSON meta is written by hand as `io.save` writes it, with one node renamed."""
    g = zoo.build("digits-cnn")
    doc = {"format": io.FORMAT, "version": io.VERSION, "graph": g.to_dict(), "extra_arrays": []}
    old = doc["graph"]["nodes"][-1]["name"]
    doc["graph"]["nodes"][-1]["name"] = bad
    arrays = {k.replace(f"{old}.", f"{bad}.", 1) if k.startswith(f"{old}.") else k: v
              for k, v in g.arrays().items()}
    path = tmp_path / "hostile.npz"
    np.savez(path, **arrays, **{io.META_KEY: np.frombuffer(json.dumps(doc).encode(), np.uint8)})
    with pytest.raises(ModelFileError, match=r"invalid graph: node .*letters, digits"):
        io.load(path)
