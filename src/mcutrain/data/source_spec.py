"""Naming a user's data on disk: `KIND:PATH[?OPTION=VALUE&...]`, beside the registry's specs.

A registry spec (`digits-c:fog:3[0-4]`) names a dataset mcutrain knows; a *source spec* names
files a user has, in one of the forms such data comes in:

    images:flowers/?size=32x32                    a folder, one subfolder per class
    csv:imu.csv?window=128&stride=64&label=activity   a time series, windows over its rows
    npy:vibration.npy?window=256&label=3           the same as a 2-D .npy array
    cifar10:cifar-10-batches-bin                   CIFAR-10, binary version
    cifar10-c:CIFAR-10-C?corruption=fog&severity=3 CIFAR-10-C, one .npy per corruption
    speech:speech_commands?words=yes,no&features=mfcc   Speech Commands, 16 kHz WAV per word

Why a prefix rather than guessing from the path: the same string must mean the same data
on every machine (and in a sweep file), whether or not the path exists there, and a registry
spec never contains `:` after its base except in `-c:` -- so `KIND:` decides, with no look at
the disk. The options follow the first `?` and are `&`-separated `name=value` pairs (an URL's
query, which every engineer reads at sight); each kind lists the options it takes and refuses
others by name.

Example:
    >>> s = parse_source("csv:runs/imu.csv?window=128&stride=64")
    >>> s.kind, s.path, s.options["window"]
    ('csv', 'runs/imu.csv', '128')
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from mcutrain.data.dataset import DatasetError
from mcutrain.data.spec import SpecError, parse_classes

KINDS: dict[str, str] = {
    "images": "a folder of PNG/JPEG/BMP images, one subfolder per class",
    "csv": "a CSV time series (or a folder of them): windows over its rows",
    "npy": "a 2-D .npy time series (or a folder of them): windows over its rows",
    "cifar10": "CIFAR-10, binary version (data_batch_*.bin, test_batch.bin)",
    "cifar10-c": "CIFAR-10-C (one .npy per corruption, labels.npy)",
    "speech": "Speech Commands: a folder of 16 kHz mono WAV files per word",
}
"""Every kind of source spec, with what its PATH is."""

_HEAD = re.compile(r"^(?P<kind>[a-z0-9-]+):(?P<rest>.+)$", re.S)


@dataclass(frozen=True)
class SourceSpec:
    """A parsed source spec; `str(spec)` is the text it was parsed from (its name in results)."""

    kind: str
    path: str
    options: dict[str, str] = field(default_factory=dict)
    text: str = ""

    def __str__(self) -> str:
        return self.text or self.kind + ":" + self.path

    def refuse_unknown(self, known: tuple[str, ...]) -> None:
        """DatasetError naming an option this kind does not take, and the ones it does."""
        bad = [k for k in self.options if k not in known]
        if bad:
            raise DatasetError(f"dataset '{self}': {self.kind} takes no option '{bad[0]}' (it takes: "
                               f"{', '.join(known)}); see docs/datasets.md")

    def _fail(self, name: str, value: str, want: str) -> DatasetError:
        return DatasetError(f"dataset '{self}': option {name}={value} is not {want}")

    def text_of(self, name: str, default: str | None = None) -> str | None:
        return self.options.get(name, default)

    def int_of(self, name: str, default: int | None = None, low: int = 1) -> int | None:
        """An integer option of at least `low` (None/default when absent)."""
        if name not in self.options:
            return default
        value = self.options[name]
        if not re.fullmatch(r"-?\d{1,9}", value) or int(value) < low:
            raise self._fail(name, value, f"a whole number of at least {low}")
        return int(value)

    def fraction_of(self, name: str, default: float) -> float:
        """A fraction strictly between 0 and 1 (a test share)."""
        if name not in self.options:
            return default
        value = self.options[name]
        try:
            f = float(value)
        except ValueError:
            raise self._fail(name, value, "a fraction such as 0.2") from None
        if not 0.0 < f < 1.0:
            raise self._fail(name, value, "a fraction strictly between 0 and 1")
        return f

    def size_of(self, name: str = "size") -> tuple[int, int] | None:
        """`HxW` (or one number N for NxN) as (H, W), None when absent."""
        if name not in self.options:
            return None
        m = re.fullmatch(r"(\d{1,5})(?:x(\d{1,5}))?", self.options[name])
        if not m or int(m[1]) < 1 or int(m[2] or m[1]) < 1:
            raise self._fail(name, self.options[name], "HxW such as 32x32 (or one number N for NxN)")
        return int(m[1]), int(m[2] or m[1])

    def list_of(self, name: str) -> tuple[str, ...] | None:
        """A comma-separated list, None when absent."""
        if name not in self.options:
            return None
        items = tuple(i.strip() for i in self.options[name].split(",") if i.strip())
        if not items:
            raise self._fail(name, self.options[name], "a comma-separated list")
        return items

    def classes_of(self) -> tuple[int, ...] | None:
        """`classes=0-4` (the registry's subset grammar), None when absent."""
        if "classes" not in self.options:
            return None
        try:
            return parse_classes(self.options["classes"], str(self))
        except SpecError as e:
            raise DatasetError(str(e)) from None


def is_source_spec(text: object) -> bool:
    """Whether a dataset argument is a source spec: a string starting with a known `KIND:`."""
    if not isinstance(text, str):
        return False
    m = _HEAD.match(text.strip())
    return bool(m) and m["kind"] in KINDS


def parse_source(text: str) -> SourceSpec:
    """Split `KIND:PATH?a=1&b=2` (see the module docstring); DatasetError on a malformed one."""
    text = text.strip()
    m = _HEAD.match(text)
    if not m or m["kind"] not in KINDS:
        raise DatasetError(f"'{text}' is not a source spec; write KIND:PATH[?OPTION=VALUE&...] with KIND "
                           f"one of {', '.join(KINDS)}")
    path, _, query = m["rest"].partition("?")
    if not path:
        raise DatasetError(f"dataset '{text}' names no path; write {m['kind']}:PATH")
    options: dict[str, str] = {}
    for pair in filter(None, query.split("&")):
        name, eq, value = pair.partition("=")
        if not eq or not re.fullmatch(r"[a-z_]+", name) or not value:
            raise DatasetError(f"dataset '{text}': option '{pair}' is not NAME=VALUE "
                               "(options follow '?' and are separated by '&')")
        if name in options:
            raise DatasetError(f"dataset '{text}': option '{name}' is given twice")
        options[name] = value
    return SourceSpec(m["kind"], path, options, text)
