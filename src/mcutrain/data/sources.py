"""A user's data on disk by kind: the one place a source spec becomes a Dataset, and its identity.

`load_source("images:flowers?size=32x32")` reads it (the loaders are in `image_folder`,
`timeseries`, `cifar`, `speech`); `source_digest` is the sha256 of the files it reads, which
`--checkpoint`/`--resume` put into a run's fingerprint so edited data is not resumed on.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path

from mcutrain.data import cifar, image_folder, speech, timeseries
from mcutrain.data.dataset import Dataset
from mcutrain.data.source_spec import KINDS, SourceSpec, is_source_spec, parse_source

Loader = Callable[[SourceSpec, int, "tuple[int, ...] | None"], Dataset]

LOADERS: dict[str, Loader] = {
    "images": image_folder.load_images,
    "csv": timeseries.load_timeseries,
    "npy": timeseries.load_timeseries,
    "cifar10": cifar.load_cifar10,
    "cifar10-c": cifar.load_cifar10c,
    "speech": speech.load_speech,
}
assert set(LOADERS) == set(KINDS)

EXAMPLES: dict[str, str] = {
    "images": "images:FOLDER[?size=32x32&channels=1|3&test=0.2&classes=0-4&corruption=fog&severity=3]",
    "csv": "csv:FILE_OR_FOLDER?window=128[&stride=64&label=label&columns=ax,ay,az&test=0.2"
           "&normalize=channel]",
    "npy": "npy:FILE_OR_FOLDER?window=128[&stride=64&label=LAST_COLUMN&columns=0,1,2]",
    "cifar10": "cifar10:cifar-10-batches-bin[?classes=0-4&corruption=fog&severity=3]",
    "cifar10-c": "cifar10-c:CIFAR-10-C?corruption=fog&severity=3[&test=0.2]",
    "speech": "speech:FOLDER[?words=yes,no&features=logmel|mfcc&mels=40&mfcc=13&window_ms=30&stride_ms=20]",
}
"""The syntax of each kind, for `mcutrain datasets` and error messages."""


def load_source(text: str, seed: int = 0, sample_shape: tuple[int, ...] | None = None) -> Dataset:
    """The Dataset a source spec names; `sample_shape` (a model's input) sizes image folders."""
    spec = parse_source(text)
    return LOADERS[spec.kind](spec, seed, None if sample_shape is None else tuple(sample_shape))


def sized_by_model(text: object) -> bool:
    """Whether the dataset takes its sample shape from the model that meets it (an image folder)."""
    return is_source_spec(text) and parse_source(str(text)).kind == "images"


def source_files(text: str) -> list[Path]:
    """The files a source spec reads, sorted."""
    spec = parse_source(text)
    if spec.kind == "images":
        return sorted(image_folder.files_of(spec))
    if spec.kind in ("csv", "npy"):
        return timeseries.files_of(spec)
    if spec.kind == "cifar10":
        train, test = cifar.cifar10_files(spec)
        return [*train, test]
    if spec.kind == "cifar10-c":
        return list(cifar.cifar10c_files(spec))
    return sorted(speech.files_of(spec))


def source_digest(text: str) -> str:
    """sha256 over the files a source spec reads: each one's path below PATH and its bytes."""
    root = Path(parse_source(text).path)
    h = hashlib.sha256()
    for f in source_files(text):
        rel = f.relative_to(root).as_posix() if f != root else f.name
        h.update(f"{rel}\0{f.stat().st_size}\0".encode())
        with open(f, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()


__all__ = ["EXAMPLES", "KINDS", "is_source_spec", "load_source", "sized_by_model", "source_digest",
           "source_files"]
