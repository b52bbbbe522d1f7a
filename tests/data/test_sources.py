"""`sources`: one loader per kind, and the sha256 identity that `--resume` checks."""

import numpy as np

from mcutrain.data.source_spec import KINDS
from mcutrain.data.sources import EXAMPLES, LOADERS, sized_by_model, source_digest, source_files


def test_every_kind_has_a_loader_and_an_example():
    assert set(LOADERS) == set(EXAMPLES) == set(KINDS)
    assert all(EXAMPLES[k].startswith(k + ":") for k in KINDS)


def test_only_image_folders_are_sized_by_the_model():
    assert sized_by_model("images:photos") and not sized_by_model("csv:a.csv?window=3")
    assert not sized_by_model("digits") and not sized_by_model(None)


def test_digest_follows_the_bytes_and_names_of_the_files_read(tmp_path):
    (tmp_path / "rec").mkdir()
    for name in ("a.npy", "b.npy"):
        np.save(tmp_path / "rec" / name, np.zeros((10, 2)))
    (tmp_path / "rec" / "notes.txt").write_text("not read")
    spec = f"npy:{tmp_path / 'rec'}?window=2"
    assert [p.name for p in source_files(spec)] == ["a.npy", "b.npy"]
    before = source_digest(spec)
    (tmp_path / "rec" / "notes.txt").write_text("still not read")
    assert source_digest(spec) == before
    np.save(tmp_path / "rec" / "b.npy", np.ones((10, 2)))
    changed = source_digest(spec)
    assert changed != before
    (tmp_path / "rec" / "b.npy").rename(tmp_path / "rec" / "c.npy")
    assert source_digest(spec) not in (before, changed)
