"""Fuzzing `--resume`: seeded mutants of real state files of every method end in an error or are benign.

Base states are real checkpoints written by `mcutrain train --checkpoint` (fqt int8 and uint8,
zo, bp-qas with momentum) and by `fit` (float, Adam), each a finished 2-epoch run on a few digits
samples. Every mutant is resumed through the same `fit` call the command made (captured from
the command); each category of mutant also goes once through `mcutrain.cli.main`. A mutant may
only be accepted when it is benign by construction (the identical state) or when its decoded
content is unchanged (a bit flip in zip bookkeeping that neither the CRC nor the digest covers).
"""

from __future__ import annotations

import copy
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mcutrain import io, zoo
from mcutrain.cli import main
from mcutrain.methods import loop as loop_mod
from mcutrain.methods.base import read_state
from mcutrain.methods.state_file import StateFileError, canonical_json, encode_state, state_digest

MUTANTS_PER_BASE = 300
SMALL = ["--arch", "digits-cnn", "--init", "random", "--dataset", "digits", "--train-samples", "64",
         "--test-samples", "20", "--batch", "16", "--epochs", "2", "--seed", "0"]
CLI_BASES = {
    "fqt-int8": ["--method", "fqt", "--precision", "int8", "--partial", "0.5"],
    "fqt-uint8": ["--method", "fqt", "--precision", "uint8"],
    "zo": ["--method", "zo", "--queries", "2"],
    "bp-qas": ["--method", "bp-qas", "--momentum", "0.9"],
}


@dataclass
class Base:
    """A real checkpoint and the exact `fit` call that resumes it."""

    name: str
    path: Path
    method: Any
    fit_args: tuple
    fit_kwargs: dict[str, Any]
    argv: list[str] | None
    doc: dict[str, Any] = field(default_factory=dict)
    arrays: dict[str, np.ndarray] = field(default_factory=dict)

    def resume(self, path: Path, **changes: Any) -> None:
        kw = {**self.fit_kwargs, "checkpoint": None, "resume": path, "progress": False, **changes}
        loop_mod.fit(self.method, *self.fit_args, **kw)


@pytest.fixture(scope="module")
def bases(tmp_path_factory) -> dict[str, Base]:
    root = tmp_path_factory.mktemp("fuzz-bases")
    out: dict[str, Base] = {}
    captured: list[tuple] = []
    real_fit = loop_mod.fit

    def spy(method, *args, **kwargs):
        captured.append((method, args, kwargs))
        return real_fit(method, *args, **kwargs)

    with pytest.MonkeyPatch.context() as mp:
        import mcutrain.api.training as train_cmd
        mp.setattr(train_cmd, "fit", spy)
        for name, extra in CLI_BASES.items():
            path = root / f"{name}.npz"
            argv = [*SMALL, *extra]
            assert main(["train", *argv, "--checkpoint", str(path)]) == 0
            method, args, kwargs = captured.pop()
            out[name] = Base(name, path, method, args, kwargs, argv)
    from mcutrain.data import load_dataset
    from mcutrain.methods.float import FloatMethod
    ds = load_dataset("digits")
    x, y, xt, yt = ds.x_train[:48], ds.y_train[:48], ds.x_test[:20], ds.y_test[:20]
    fm = FloatMethod(zoo.build("digits-cnn", 10, ds.shape, seed=0))
    path = root / "float.npz"
    kw = {"epochs": 2, "batch": 16, "lr": 1e-3, "seed": 0, "checkpoint": path, "progress": False}
    loop_mod.fit(fm, x, y, xt, yt, **kw)
    out["float"] = Base("float", path, fm, (x, y, xt, yt), kw, None)
    for b in out.values():
        b.doc, b.arrays = read_state(b.path)
    return out


# ---------------------------------------------------------------- mutants


@dataclass(frozen=True)
class Mutant:
    category: str
    what: str
    data: bytes | None = None
    """The file's bytes (None: `path_kind` says what to pass instead)."""
    benign: bool = False
    path_kind: str = "file"
    resume_kwargs: tuple = ()


def _raw(rng: np.random.Generator, raw: bytes) -> Mutant:
    b = bytearray(raw)
    kind = rng.integers(5)
    if kind == 0:
        n = int(rng.integers(0, len(b)))
        return Mutant("raw", f"truncate to {n}", bytes(b[:n]))
    if kind == 1:
        pos = rng.integers(0, len(b), int(rng.integers(1, 9)))
        for p in pos:
            b[p] ^= 1 << int(rng.integers(8))
        return Mutant("raw", f"flip bits at {sorted(pos.tolist())}", bytes(b))
    if kind == 2:
        start = int(rng.integers(0, len(b)))
        end = min(len(b), start + int(rng.integers(1, 4096)))
        b[start:end] = bytes(end - start)
        return Mutant("raw", f"zero [{start}, {end})", bytes(b))
    if kind == 3:
        return Mutant("raw", "append garbage", bytes(b) + rng.bytes(int(rng.integers(1, 300))))
    start = int(rng.integers(0, len(b)))
    return Mutant("raw", f"random bytes from {start}", bytes(b[:start]) + rng.bytes(len(b) - start))


def _floats(arrays: dict[str, np.ndarray]) -> list[str]:
    return [k for k, v in arrays.items() if v.dtype.kind == "f" and v.size]


def _structural(rng: np.random.Generator, base: Base, others: list[Base]) -> Mutant:
    """A decoded state changed in one way, re-encoded with a valid digest."""
    doc, arrays = copy.deepcopy(base.doc), {k: v.copy() for k, v in base.arrays.items()}
    keys = sorted(arrays)
    key = keys[int(rng.integers(len(keys)))]
    a = arrays[key]
    state = doc["state"]
    kind = int(rng.integers(17))
    what = ""
    if kind == 0:
        to = [np.bool_, np.float64, np.int16, np.dtype(">f4"), np.uint8, np.int64][int(rng.integers(6))]
        if np.dtype(to) == a.dtype:
            to = np.str_
        arrays[key] = a.astype(to) if to is not np.str_ else a.astype(str)
        what = f"dtype of {key} -> {np.dtype(to)}"
    elif kind == 1:
        shapes = [a.reshape(-1), a.reshape(-1)[:-1], a[None], np.zeros((), a.dtype),
                  np.zeros(a.size + 1, a.dtype)]
        shapes = [s for s in shapes if s.shape != a.shape]
        arrays[key] = shapes[int(rng.integers(len(shapes)))]
        what = f"shape of {key} -> {arrays[key].shape}"
    elif kind == 2:
        fk = _floats(arrays)
        if not fk:
            arrays[key] = a.astype(np.float32)
            what = f"{key} as float32"
        else:
            k2 = fk[int(rng.integers(len(fk)))]
            v = arrays[k2].copy()
            v.reshape(-1)[int(rng.integers(v.size))] = [np.nan, np.inf, -np.inf][int(rng.integers(3))]
            arrays[k2] = v
            what = f"non-finite value in {k2}"
    elif kind == 3:
        del arrays[key]
        what = f"missing {key}"
    elif kind == 4:
        arrays["extra/" + key] = a
        what = f"extra array extra/{key}"
    elif kind == 5:
        value = [10**12, -1, 2**63 - 1, "3", 1.5, True, None][int(rng.integers(7))]
        counters = [k for k in ("steps", "t") if k in state]
        if "optimizer" in state:
            state["optimizer"]["t"] = value
            what = f"adam t = {value!r}"
        elif counters:
            state[counters[0]] = value
            what = f"state.{counters[0]} = {value!r}"
        else:
            doc["loop"]["step"] = value
            what = f"loop.step = {value!r}"
    elif kind == 6:
        value = [0, -1, 2**32, 2**40, 1.0][int(rng.integers(5))]
        if "rng" in state:
            state["rng"] = value
            what = f"rng = {value!r}"
        else:
            state["bogus_rng"] = value
            what = "unknown state entry"
    elif kind == 7:
        value = [0, -1, float("nan"), 1e300, 2**40][int(rng.integers(5))]
        if "loss_max" in state:
            state["loss_max"] = value
            what = f"loss_max = {value!r}"
        else:
            doc["loop"]["seconds"] = float("nan")
            what = "loop.seconds = NaN"
    elif kind == 8:
        tables = [t for t in ("act", "wrange", "err", "grad") if state.get(t)]
        if tables:
            t = tables[int(rng.integers(len(tables)))]
            name = sorted(state[t])[0]
            e = state[t][name]
            choice = int(rng.integers(4))
            if choice == 0 and e["lo"] is not None:
                hi = e["hi"]
                e["lo"] = hi + 1.0 if isinstance(hi, float) else [h + 1.0 for h in hi]
            elif choice == 1:
                e["lo"] = float("nan") if not isinstance(e["lo"], list) else [float("nan")] * len(e["lo"])
                e["hi"] = e["hi"] if e["hi"] is not None else 1.0
            elif choice == 2:
                e["alpha"] = [0.0, -0.5, 2.0, float("inf")][int(rng.integers(4))]
            else:
                e["hi"] = None if e["lo"] is not None else 1.0
            what = f"EMA {t}.{name} broken ({choice})"
        else:
            doc["loop"]["history"] = [{"epoch": 1}]
            what = "history entry broken"
    elif kind == 9:
        if state.get("wqp"):
            name = sorted(state["wqp"])[0]
            qp = state["wqp"][name]
            bad = [0.0, -1.0, float("nan"), float("inf")][int(rng.integers(4))]
            if int(rng.integers(2)):
                qp["scale"] = [bad] * len(qp["scale"]) if isinstance(qp["scale"], list) else bad
                what = f"wqp.{name}.scale = {bad}"
            else:
                zp = qp["zero_point"]
                qp["zero_point"] = [300] * len(zp) if isinstance(zp, list) else -300
                what = f"wqp.{name}.zero_point out of range"
        else:
            v = arrays[key]
            arrays[key] = np.full_like(v, -128) if v.dtype == np.int8 else v[..., :0]
            what = f"{key} filled with -128 or emptied"
    elif kind == 10:
        top = int(rng.integers(4))
        if top == 0:
            meta = b"[" + canonical_json(doc) + b"]"
            return Mutant("json", "document is a list", encode_state_raw(meta, arrays))
        if top == 1:
            depth = int(rng.integers(40, 3000))
            doc["loop"]["macs"] = {"forward": "@@"}
            meta = canonical_json(doc).replace(b'"@@"', b"[" * depth + b"0" + b"]" * depth)
            return Mutant("json", f"loop.macs nested {depth} deep", encode_state_raw(meta, arrays))
        elif top == 2:
            del doc[["method", "state", "loop", "run"][int(rng.integers(4))]]
            what = "a top-level key removed"
        else:
            doc["state"] = [1, 2, 3]
            what = "state is a list"
    elif kind == 11:
        doc["version"] = [1, 3, "2", None][int(rng.integers(4))]
        what = f"version {doc['version']!r}"
    elif kind == 12:
        other = others[int(rng.integers(len(others)))]
        doc, arrays = copy.deepcopy(other.doc), dict(other.arrays)
        if int(rng.integers(2)):
            doc["method"] = copy.deepcopy(base.doc["method"])
            doc["run"] = copy.deepcopy(base.doc["run"])
            what = f"{other.name}'s state under {base.name}'s settings"
        else:
            what = f"{other.name}'s state"
    elif kind == 13:
        cfg = doc["method"]
        k = sorted(cfg)[int(rng.integers(len(cfg)))]
        cfg[k] = "changed" if not isinstance(cfg[k], str) else cfg[k] + "x"
        what = f"method setting {k} changed"
    elif kind == 14:
        run = doc["run"]
        names = ["epochs", "batch", "lr", "seed", "train-data", "total-steps", "steps-per-epoch"]
        k = names[int(rng.integers(7))]
        changed = run[k] + 1 if isinstance(run[k], int) else {"lr": run["lr"] * 3, "train-data": "0" * 64}[k]
        run[k] = changed if int(rng.integers(2)) else "x"
        what = f"run.{k} changed"
    elif kind == 15:
        lp = doc["loop"]
        k = ["step", "history", "samples", "best", "accuracy_before", "forward_passes"][int(rng.integers(6))]
        lp[k] = [10**12, -5, [], [0, 2.0, 0.5], 7.0, "x", [5, 0.5, 0.5]][int(rng.integers(7))]
        what = f"loop.{k} = {lp[k]!r}"
    else:
        arrays["a" * int(rng.integers(1, 3)) + "/" + key] = np.zeros(3, object).astype(str)
        what = "an extra string array"
    return Mutant("structural", what, encode_state(doc, arrays))


def encode_state_raw(meta: bytes, arrays: dict[str, np.ndarray]) -> bytes:
    """Like `encode_state` for any description bytes (the digest recomputed over them)."""
    import io as _io
    payload = {f"a/{k}": v for k, v in arrays.items()}
    payload["__meta__"] = np.frombuffer(meta, np.uint8)
    payload["__digest__"] = np.frombuffer(state_digest(meta, arrays).encode(), np.uint8)
    buf = _io.BytesIO()
    np.savez(buf, **payload)
    return buf.getvalue()


def _fixed(base: Base, tmp: Path) -> list[Mutant]:
    """Mutants that need no randomness: foreign files, old versions, configuration changes, benign ones."""
    model = tmp / "model.npz"
    io.save(model, zoo.build("digits-cnn", 10, seed=0))
    pickled = tmp / "pickled.npz"
    np.savez(pickled, __meta__=np.array([{"format": "mcutrain-training-state"}], dtype=object))
    v1 = copy.deepcopy(base.doc)
    v1["version"] = 1
    del v1["run"]
    import io as _io
    buf = _io.BytesIO()
    np.savez(buf, __meta__=np.frombuffer(json.dumps(v1).encode(), np.uint8),
             **{f"a/{k}": v for k, v in base.arrays.items()})
    raw = base.path.read_bytes()
    other_lr = base.fit_kwargs["lr"] * 2
    return [
        Mutant("foreign", "a model file", model.read_bytes()),
        Mutant("foreign", "a pickled object array", pickled.read_bytes()),
        Mutant("foreign", "not a zip", b"hello, I am a text file\n" * 10),
        Mutant("foreign", "empty file", b""),
        Mutant("version", "a version 1 state", buf.getvalue()),
        Mutant("missing", "no such file", path_kind="missing"),
        Mutant("missing", "a directory", path_kind="dir"),
        Mutant("config", f"--lr {other_lr}", raw, resume_kwargs=(("lr", other_lr),)),
        Mutant("config", "--epochs 3", raw, resume_kwargs=(("epochs", 3),)),
        Mutant("config", "--batch 8", raw, resume_kwargs=(("batch", 8),)),
        Mutant("config", "other data", raw, resume_kwargs=(("x_train", "shifted"),)),
        Mutant("benign", "the identical state", raw, benign=True),
    ]


def _mutants(base: Base, others: list[Base], tmp: Path) -> list[Mutant]:
    rng = np.random.default_rng(sum(map(ord, base.name)))
    raw = base.path.read_bytes()
    out = _fixed(base, tmp)
    while len(out) < MUTANTS_PER_BASE:
        out.append(_raw(rng, raw) if rng.random() < 0.4 else _structural(rng, base, others))
    return out


def _same_content(path: Path, base: Base) -> bool:
    doc, arrays = read_state(path)
    return doc == base.doc and arrays.keys() == base.arrays.keys() and all(
        arrays[k].dtype == v.dtype and np.array_equal(arrays[k], v) for k, v in base.arrays.items())


def _path_for(m: Mutant, tmp: Path, i: int) -> Path:
    if m.path_kind == "missing":
        return tmp / "does-not-exist.npz"
    if m.path_kind == "dir":
        return tmp
    p = tmp / f"m{i}.npz"
    p.write_bytes(m.data)
    return p


def _kwargs(m: Mutant, base: Base) -> dict[str, Any]:
    kw = dict(m.resume_kwargs)
    if kw.get("x_train") == "shifted":
        kw["x_train"] = base.fit_args[0] + np.float32(0.5)
    return kw


def _resume(base: Base, path: Path, kw: dict[str, Any]) -> None:
    if "x_train" in kw:
        _, y, xt, yt = base.fit_args
        loop_mod.fit(base.method, kw.pop("x_train"), y, xt, yt,
                     **{**base.fit_kwargs, "checkpoint": None, "resume": path, "progress": False})
    else:
        base.resume(path, **kw)


@pytest.mark.parametrize("name", [*CLI_BASES, "float"])
def test_every_mutant_is_refused_or_benign(bases, name, tmp_path):
    base = bases[name]
    others = [b for b in bases.values() if b.name != name]
    mutants = _mutants(base, others, tmp_path)
    assert len(mutants) >= MUTANTS_PER_BASE
    accepted, refused, bad = [], 0, []
    for i, m in enumerate(mutants):
        path = _path_for(m, tmp_path, i)
        try:
            _resume(base, path, _kwargs(m, base))
        except StateFileError as e:
            assert str(e) and "\n" not in str(e), m
            refused += 1
            continue
        # accepted: only benign by construction, or a flip the decoder never reads (zip bookkeeping)
        if not (m.benign or (m.category == "raw" and _same_content(path, base))):
            bad.append(m.what)
        accepted.append(m.what)
    assert not bad, bad
    assert refused >= MUTANTS_PER_BASE - 20
    assert "the identical state" in accepted


def _cli_mutant(category: str, base: Base, others: list[Base], tmp: Path) -> Mutant:
    rng = np.random.default_rng(7)
    if category in ("foreign", "version", "missing", "benign"):
        return next(m for m in _fixed(base, tmp) if m.category == category)
    for _ in range(10_000):
        m = _raw(rng, base.path.read_bytes()) if category == "raw" else _structural(rng, base, others)
        if category == "raw" or m.what.startswith(category):
            return m
    raise AssertionError(category)


@pytest.mark.parametrize("category,extra", [
    ("raw", []), ("dtype", []), ("shape", []), ("non-finite", []), ("state.steps", []), ("rng", []),
    ("loss_max", []), ("version", []), ("foreign", []), ("missing", []), ("method setting", []),
    ("benign", ["--lr", "0.02"]), ("benign", ["--epochs", "3"]),
])
def test_each_category_through_the_command(bases, tmp_path, capsys, category, extra):
    base = bases["fqt-int8"]
    m = _cli_mutant(category, base, [b for b in bases.values() if b is not base], tmp_path)
    path = _path_for(m, tmp_path, 0)
    capsys.readouterr()
    rc = main(["train", *base.argv, *extra, "--resume", str(path)])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    if category == "benign" and not extra:
        assert rc == 0
    else:
        assert rc in (1, 2), m.what
        lines = [ln for ln in err.splitlines() if "error:" in ln]
        assert len(lines) == 1 and lines[0].startswith("mcutrain train: error: "), err
        if extra:
            flag = extra[0]
            assert f"{flag} {extra[1]} differs from the checkpoint's" in lines[0]
            assert f"--resume-changed {flag[2:]}" in lines[0]


def test_benign_resume_through_the_command_succeeds(bases, capsys):
    base = bases["fqt-int8"]
    assert main(["train", *base.argv, "--resume", str(base.path), "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["steps"] == base.doc["loop"]["step"] and len(res["history"]) == 2
    assert all(math.isfinite(h["loss"]) for h in res["history"])
