"""Downloads: only pinned files, verified by size and sha256, falling back across mirrors."""

import hashlib
import io

import pytest

from mcutrain.data import download as D


class FakeWeb:
    """A urlopen stand-in: serves bytes per URL, raises OSError for unknown URLs."""

    def __init__(self, pages):
        self.pages, self.asked = pages, []

    def __call__(self, url):
        self.asked.append(url)
        if url not in self.pages:
            raise OSError(f"404 {url}")
        return io.BytesIO(self.pages[url])


@pytest.fixture
def pinned(monkeypatch):
    body = b"\x00\x00\x08\x01\x00\x00\x00\x02\x04\x05"
    entry = D.PinnedDataset(("https://a.example/", "https://b.example/"),
                            (D.PinnedFile("labels.gz", len(body), hashlib.sha256(body).hexdigest()),))
    monkeypatch.setitem(D.PINNED, "toy", entry)
    return body


def test_download_verifies_and_falls_back(tmp_path, pinned):
    web = FakeWeb({"https://b.example/labels.gz": pinned})
    D.download("toy", tmp_path, opener=web)
    assert (tmp_path / "labels.gz").read_bytes() == pinned
    assert web.asked == ["https://a.example/labels.gz", "https://b.example/labels.gz"]
    D.download("toy", tmp_path, opener=web)          # already there and verified: no request
    assert len(web.asked) == 2


def test_wrong_bytes_are_refused_and_not_kept(tmp_path, pinned):
    web = FakeWeb({"https://a.example/labels.gz": pinned[:-1] + b"\x06",
                   "https://b.example/labels.gz": pinned + b"extra"})
    with pytest.raises(D.DownloadError, match="sha256") as e:
        D.download("toy", tmp_path, opener=web)
    assert "larger than the pinned" in str(e.value)
    assert list(tmp_path.iterdir()) == []


def test_unpinned_dataset_is_never_downloaded(tmp_path):
    with pytest.raises(D.DownloadError, match="no pinned sha256"):
        D.download("digits", tmp_path, opener=FakeWeb({}))


def test_pins_look_like_sha256():
    for entry in D.PINNED.values():
        assert len(entry.files) == 4
        for f in entry.files:
            assert len(f.sha256) == 64 and int(f.sha256, 16) >= 0 and f.size > 0
