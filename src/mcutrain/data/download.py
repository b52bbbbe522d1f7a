"""Download of the official dataset files, each checked against a pinned size and sha256.

The hashes are the ones TensorFlow Datasets records for these exact URLs
(`tensorflow_datasets/url_checksums/mnist.txt` and `fashion_mnist.txt` in
github.com/tensorflow/datasets). A mirror serves the same bytes or fails the
check. A dataset without pinned hashes is never downloaded.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path


class DownloadError(RuntimeError):
    """A download that failed or did not match its pinned hash; nothing was kept."""


@dataclass(frozen=True)
class PinnedFile:
    name: str
    size: int
    sha256: str


@dataclass(frozen=True)
class PinnedDataset:
    mirrors: tuple[str, ...]
    files: tuple[PinnedFile, ...]


PINNED: dict[str, PinnedDataset] = {
    "fashion-mnist": PinnedDataset(
        mirrors=("http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/",
                 "https://raw.githubusercontent.com/zalandoresearch/fashion-mnist/master/data/fashion/"),
        files=(
            PinnedFile("train-images-idx3-ubyte.gz", 26421880,
                       "3aede38d61863908ad78613f6a32ed271626dd12800ba2636569512369268a84"),
            PinnedFile("train-labels-idx1-ubyte.gz", 29515,
                       "a04f17134ac03560a47e3764e11b92fc97de4d1bfaf8ba1a3aa29af54cc90845"),
            PinnedFile("t10k-images-idx3-ubyte.gz", 4422102,
                       "346e55b948d973a97e58d2351dde16a484bd415d4595297633bb08f03db6a073"),
            PinnedFile("t10k-labels-idx1-ubyte.gz", 5148,
                       "67da17c76eaffca5446c3361aaab5c3cd6d1c2608764d35dfb1850b086bf8dd5"),
        )),
    "mnist": PinnedDataset(
        mirrors=("https://storage.googleapis.com/cvdf-datasets/mnist/",
                 "https://ossci-datasets.s3.amazonaws.com/mnist/"),
        files=(
            PinnedFile("train-images-idx3-ubyte.gz", 9912422,
                       "440fcabf73cc546fa21475e81ea370265605f56be210a4024d2ca8f203523609"),
            PinnedFile("train-labels-idx1-ubyte.gz", 28881,
                       "3552534a0a558bbed6aed32b30c495cca23d567ec52cac8be1a0730e8010255c"),
            PinnedFile("t10k-images-idx3-ubyte.gz", 1648877,
                       "8d422c7b0a1c1c79245a5bcf07fe86e33eeafee792b84584aec276f5a2dbc4e6"),
            PinnedFile("t10k-labels-idx1-ubyte.gz", 4542,
                       "f7ae60f92e00ec6debd23a6088c31dbd2371eca3ffa0defaefb259924204aec6"),
        )),
}

Opener = Callable[[str], object]
"""urlopen-like: returns a readable, closable response for a URL (tests pass a fake)."""


def _fetch(url: str, pinned: PinnedFile, dest: Path, opener: Opener) -> None:
    """Stream `url` into a temp file beside `dest`, check size and sha256, then rename."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".part", dir=dest.parent)
    digest, size = hashlib.sha256(), 0
    try:
        with os.fdopen(fd, "wb") as out:
            response = opener(url)
            try:
                while chunk := response.read(1 << 20):
                    size += len(chunk)
                    if size > pinned.size:
                        raise DownloadError(f"{url}: larger than the pinned {pinned.size} bytes")
                    digest.update(chunk)
                    out.write(chunk)
            finally:
                response.close()
            out.flush()
            os.fsync(out.fileno())
        if size != pinned.size or digest.hexdigest() != pinned.sha256:
            raise DownloadError(f"{url}: got {size} bytes with sha256 {digest.hexdigest()}, expected "
                                f"{pinned.size} bytes with sha256 {pinned.sha256}")
        os.replace(tmp, dest)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def download(name: str, dest_dir: str | Path, opener: Opener | None = None,
             log: Callable[[str], None] = lambda msg: None) -> Path:
    """Download dataset `name` into `dest_dir`, verified file by file; returns `dest_dir`.

    Files already present with the pinned hash are kept. Each file tries the
    mirrors in order; if none gives the pinned bytes, DownloadError lists why.
    """
    if name not in PINNED:
        raise DownloadError(f"no pinned sha256 for '{name}', so mcutrain will not download it; "
                            f"downloadable: {', '.join(PINNED)}")
    opener = opener or (lambda url: urllib.request.urlopen(url, timeout=60))
    dest_dir = Path(dest_dir)
    for pinned in PINNED[name].files:
        dest = dest_dir / pinned.name
        if dest.is_file() and sha256_of(dest) == pinned.sha256:
            continue
        errors = []
        for mirror in PINNED[name].mirrors:
            log(f"downloading {mirror}{pinned.name}")
            try:
                _fetch(mirror + pinned.name, pinned, dest, opener)
                break
            except (OSError, DownloadError) as e:
                errors.append(f"{mirror}{pinned.name}: {e}")
        else:
            raise DownloadError(f"could not download {pinned.name} for {name}:\n  " + "\n  ".join(errors))
    return dest_dir


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()
