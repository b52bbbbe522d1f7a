"""What a training library folder says about itself: `manifest.json` and the model it was built from.

`mcutrain export --method M` writes, beside the C files, the int8 model the library was
generated from (`model.npz`) and a manifest naming its sha256, the method and every training
option as the factory resolved them, the batch, the kernels and the state layout. With both, a
device's saved state can be turned back into a model from the folder alone
(`mcutrain state-to-model LIBRARY_DIR STATE.bin`): the user repeats no option, and a state of
another library is told apart by its layout fingerprint.

The folder is untrusted input like any model file: the manifest is read bounded, its fields
typed, the model file's hash checked before the model is read (by `io.load`, which treats it
as hostile itself), and the options go through the factory's checks again when the method is
rebuilt.

Example:
    >>> m = read_manifest("zo-lib")                # doctest: +SKIP
    >>> m.method, m.batch, m.options["queries"]    # doctest: +SKIP
    ('zo', 4, 10)
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mcutrain.errors import UserError
from mcutrain.io import ModelFileError, atomic_write_bytes
from mcutrain.methods import factory
from mcutrain.methods.state_file import file_sha256
from mcutrain.qmodel import QuantModel
from mcutrain.version import __version__

if TYPE_CHECKING:
    from mcutrain.codegen.train_source import TrainSource

MANIFEST = "manifest.json"
MODEL_FILE = "model.npz"
"""The int8 model a training library was generated from, beside its C files."""
MANIFEST_FORMAT = "mcutrain-training-library"
MANIFEST_VERSION = 1
MAX_MANIFEST_BYTES = 1 << 20
"""A manifest is a few hundred bytes; anything near this bound is not one."""


@dataclass(frozen=True)
class Manifest:
    """A training library's record of how it was generated (the fields of `manifest.json`)."""

    method: str
    options: dict[str, Any]
    """The export options `method` takes (factory dests), as resolved when it was exported."""
    batch: int
    kernels: str
    target: str
    dataset: str | None
    """The dataset spec export calibrated on (None: none, or an in-memory dataset)."""
    model_sha256: str
    fingerprint: int
    state_bytes: int
    provenance: str


def method_options(args: argparse.Namespace) -> dict[str, Any]:
    """The resolved export options of `args.method`, by dest (what rebuilding the method needs)."""
    return {o.dest: getattr(args, o.dest) for o in factory.options_of("export")
            if args.method in o.methods and hasattr(args, o.dest)}


def write_library_record(out_dir: str | Path, args: argparse.Namespace, qm: QuantModel, src: TrainSource,
                         kernels: str, target: str, provenance: str) -> list[str]:
    """Write `model.npz` and `manifest.json` into a training library folder; their names."""
    out = Path(out_dir)
    qm.save(out / MODEL_FILE)
    doc = {"format": MANIFEST_FORMAT, "version": MANIFEST_VERSION, "mcutrain_version": __version__,
           "method": args.method, "options": method_options(args), "batch": src.batch, "kernels": kernels,
           "target": target, "dataset": args.dataset if isinstance(args.dataset, str) else None,
           "model": {"file": MODEL_FILE, "sha256": file_sha256(out / MODEL_FILE)},
           "state": {"bytes": src.state_bytes, "fingerprint": src.fingerprint,
                     "entries": [f"{e.name}: {e.dtype} {list(e.shape)}" for e in src.state]},
           "provenance": provenance}
    text = json.dumps(doc, indent=2) + "\n"
    atomic_write_bytes(out / MANIFEST, lambda f: f.write(text.encode()))
    return [MANIFEST, MODEL_FILE]


def _field(doc: dict[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    v = doc.get(key)
    if not isinstance(v, kind) or (isinstance(v, bool) and kind is int):
        raise UserError(f"{where}: '{key}' is missing or not a {getattr(kind, '__name__', kind)}; "
                        "export the library again")
    return v


def read_manifest(lib_dir: str | Path) -> Manifest:
    """The manifest of a training library folder, every field checked (UserError saying what to do)."""
    lib = Path(lib_dir)
    path = lib / MANIFEST
    if not lib.is_dir():
        raise UserError(f"'{lib}' is not a folder: give the library folder mcutrain export wrote")
    if not path.is_file():
        raise UserError(f"'{lib}' has no {MANIFEST}: it is not a training library of this mcutrain "
                        "(export it again with mcutrain export --method zo | bp-qas | fqt)")
    with open(path, "rb") as f:
        raw = f.read(MAX_MANIFEST_BYTES + 1)
    if len(raw) > MAX_MANIFEST_BYTES:
        raise UserError(f"'{path}' is larger than {MAX_MANIFEST_BYTES} bytes: not a manifest of mcutrain")
    try:
        doc = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
        raise UserError(f"'{path}' is not valid JSON ({type(e).__name__}); export the library "
                        "again") from None
    where = f"'{path}'"
    if not isinstance(doc, dict) or doc.get("format") != MANIFEST_FORMAT:
        raise UserError(f"{where} is not a manifest of an mcutrain training library")
    if doc.get("version") != MANIFEST_VERSION:
        raise UserError(f"{where} has version {str(doc.get('version'))[:20]!r}; this mcutrain reads version "
                        f"{MANIFEST_VERSION}: export the library again")
    model = _field(doc, "model", dict, where)
    state = _field(doc, "state", dict, where)
    dataset = doc.get("dataset")
    if dataset is not None and not isinstance(dataset, str):
        raise UserError(f"{where}: 'dataset' is not a string; export the library again")
    if _field(model, "file", str, where) != MODEL_FILE:
        raise UserError(f"{where}: the model file must be {MODEL_FILE} inside the folder")
    return Manifest(method=_field(doc, "method", str, where), options=_field(doc, "options", dict, where),
                    batch=_field(doc, "batch", int, where), kernels=_field(doc, "kernels", str, where),
                    target=_field(doc, "target", str, where), dataset=dataset,
                    model_sha256=_field(model, "sha256", str, where),
                    fingerprint=_field(state, "fingerprint", int, where),
                    state_bytes=_field(state, "bytes", int, where),
                    provenance=_field(doc, "provenance", str, where))


def library_model(lib_dir: str | Path, manifest: Manifest) -> QuantModel:
    """The int8 model the library was generated from, after its hash is checked against the manifest."""
    path = Path(lib_dir) / MODEL_FILE
    if not path.is_file():
        raise UserError(f"'{path}' is missing: the library folder is incomplete; export it again")
    if file_sha256(path) != manifest.model_sha256:
        raise UserError(f"'{path}' is not the model this library was generated from (its sha256 differs "
                        f"from {MANIFEST}'s): restore it or export the library again")
    try:
        return QuantModel.load(path)
    except ModelFileError as e:
        raise UserError(f"'{path}': {e}") from None
