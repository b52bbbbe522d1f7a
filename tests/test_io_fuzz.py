"""The model-file fuzzer: seeded mutants of real model files end in a model or a clear error.

Three real files are written in the test (no binary blobs): a float model (what
`mcutrain train -o` writes), an int8 model (what `mcutrain pretrain` writes: float graph +
int8 tensors + qparams) and an MCUNet-like graph (depthwise convs, a residual add, pools).
Each mutant goes through `io.load` (and `QuantModel.from_file` when it loads and says it is
quantized); a few of every category also go through the command line (`mcutrain plan`).
Every case must end in success or a ModelFileError / an `error:` line with exit status 1 or
2 — never another exception, never a traceback.
"""

from __future__ import annotations

import contextlib
import io as _io
import json
import random
import time
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from mcutrain import graph as G
from mcutrain import io, zoo
from mcutrain.cli import main
from mcutrain.engines import ptq
from mcutrain.qmodel import QuantModel

SEED = 20240601
CLI_PER_CATEGORY = 2
pytestmark = pytest.mark.filterwarnings("ignore:Duplicate name")
BIG_UNREFERENCED = 64 << 20
"""Bytes of the zeros in the 'huge unreferenced member' and 'bomb' mutants (compress to ~64 KB)."""


# ---------------------------------------------------------------- the base files


def _mcunet_like() -> G.Graph:
    nodes = [G.conv2d("stem", G.INPUT, 8, 3, stride=2, padding=1, act="relu6", in_channels=3),
             G.conv2d("b0.pw1", "stem", 16, 1, act="relu6", in_channels=8),
             G.conv2d("b0.dw", "b0.pw1", 16, 3, padding=1, groups=16, act="relu6", in_channels=16),
             G.conv2d("b0.pw2", "b0.dw", 8, 1, in_channels=16),
             G.add("b0.add", "stem", "b0.pw2"),
             G.maxpool("pool1", "b0.add", 2),
             G.global_avgpool("pool", "pool1"), G.flatten("flatten", "pool"),
             G.linear("head", "flatten", 5, in_features=8)]
    return zoo.he_init(G.Graph((16, 16, 3), nodes, "mcunet-like"), seed=1)


def _base_files(tmp: Path) -> dict[str, bytes]:
    g = zoo.build("digits-cnn", seed=2)
    x = np.random.default_rng(0).random((16, 8, 8, 1), dtype=np.float32)
    qm = ptq.quantize_model(g, x)
    out = {
        "float": io.save(tmp / "float.npz", g, {"provenance": {"trained": {"epochs": 1}},
                                                "history": {"history": [{"epoch": 1, "loss": 0.5}]}}),
        "int8": qm.save(tmp / "int8.npz", {"arch": "digits-cnn", "dataset": "digits"}),
        "mcunet": io.save(tmp / "mcunet.npz", _mcunet_like()),
    }
    return {k: p.read_bytes() for k, p in out.items()}


# ---------------------------------------------------------------- zip helpers


def _members(data: bytes) -> list[tuple[str, bytes]]:
    with zipfile.ZipFile(_io.BytesIO(data)) as z:
        return [(i.filename, z.read(i)) for i in z.infolist()]


def _zip(members: list[tuple[str, bytes]], big: tuple[str, int, bytes] | None = None) -> bytes:
    """A zip of `members`; `big` = (name, n, prefix): a member of `prefix` then n zero bytes, streamed."""
    buf = _io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for name, blob in members:
            z.writestr(name, blob)
        if big is not None:
            name, n, prefix = big
            with z.open(name, "w", force_zip64=True) as f:
                f.write(prefix)
                chunk = bytes(1 << 20)
                for _ in range(n >> 20):
                    f.write(chunk)
    return buf.getvalue()


def _npy(arr: np.ndarray) -> bytes:
    """`arr` as a .npy member. An object array gets its real header (`|O`) and a payload of zero
    bytes, never a pickle: the loader must refuse it from the header alone."""
    buf = _io.BytesIO()
    if arr.dtype.hasobject:
        header = {"descr": np.lib.format.dtype_to_descr(arr.dtype), "fortran_order": False,
                  "shape": arr.shape}
        np.lib.format.write_array_header_1_0(buf, header)
        buf.write(bytes(8 * arr.size))
    else:
        np.lib.format.write_array(buf, arr, allow_pickle=False)
    return buf.getvalue()


def _npy_header(shape: tuple[int, ...], dtype: str = "<f4") -> bytes:
    buf = _io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": dtype, "fortran_order": False, "shape": shape})
    return buf.getvalue()


def _meta(data: bytes) -> dict:
    blob = dict(_members(data))["__meta__.npy"]
    return json.loads(np.lib.format.read_array(_io.BytesIO(blob)).tobytes())


def _with_meta_text(data: bytes, text: str) -> bytes:
    blob = _npy(np.frombuffer(text.encode("utf-8", "surrogatepass"), np.uint8))
    return _zip([(n, blob if n == "__meta__.npy" else b) for n, b in _members(data)])


def _with_array(data: bytes, key: str, arr: np.ndarray | bytes) -> bytes:
    blob = arr if isinstance(arr, bytes) else _npy(arr)
    return _zip([(n, blob if n == key + ".npy" else b) for n, b in _members(data)])


def _array(data: bytes, key: str) -> np.ndarray:
    return np.lib.format.read_array(_io.BytesIO(dict(_members(data))[key + ".npy"]))


# ---------------------------------------------------------------- mutants


@dataclass
class Mutant:
    category: str
    name: str
    data: bytes


def _byte_mutants(base: str, data: bytes, rng: random.Random) -> Iterator[Mutant]:
    n = len(data)
    for _ in range(12):
        cut = rng.randrange(0, n)
        yield Mutant("byte", f"{base}: truncate at {cut}", data[:cut])
    for i in range(20):
        b = bytearray(data)
        for _ in range(rng.choice((1, 1, 4, 32))):
            b[rng.randrange(n)] ^= 1 << rng.randrange(8)
        yield Mutant("byte", f"{base}: flip bits #{i}", bytes(b))
    for _ in range(10):
        b = bytearray(data)
        start = rng.randrange(n)
        b[start:start + rng.choice((4, 64, 1024))] = bytes(min(1024, n - start))[:len(b[start:start + 1024])]
        yield Mutant("byte", f"{base}: zero range at {start}", bytes(b[:n]))
    yield Mutant("byte", f"{base}: garbage appended", data + bytes(rng.randrange(256) for _ in range(500)))
    yield Mutant("byte", f"{base}: empty file", b"")
    yield Mutant("byte", f"{base}: zip magic only", b"PK\x03\x04")


def _zip_mutants(base: str, data: bytes, rng: random.Random) -> Iterator[Mutant]:
    members = _members(data)
    names = [m for m, _ in members]
    for name in names:
        yield Mutant("zip", f"{base}: drop {name}", _zip([m for m in members if m[0] != name]))
    for name in rng.sample(names, min(4, len(names))):
        yield Mutant("zip", f"{base}: rename {name}",
                     _zip([(("x_" + n) if n == name else n, b) for n, b in members]))
    for name in rng.sample(names, min(3, len(names))):
        other = _npy(np.zeros(3, np.float32))
        yield Mutant("zip", f"{base}: duplicate {name}", _zip([*members, (name, other)]))
    key = next(n for n in names if n.endswith(".weight.npy"))[:-4]
    yield Mutant("zip", f"{base}: 10^12-element header on {key}",
                 _with_array(data, key, _npy_header((10 ** 6, 10 ** 6))))
    yield Mutant("zip", f"{base}: 10^12-element unreferenced member",
                 _zip([*members, ("junk.npy", _npy_header((10 ** 12,)))]))
    yield Mutant("zip", f"{base}: huge unreferenced member",
                 _zip(members, big=("junk.npy", BIG_UNREFERENCED, _npy_header((BIG_UNREFERENCED // 4,)))))
    yield Mutant("zip", f"{base}: bomb after a referenced array",
                 _zip([m for m in members if m[0] != key + ".npy"],
                      big=(key + ".npy", BIG_UNREFERENCED, dict(members)[key + ".npy"])))
    yield Mutant("zip", f"{base}: bomb as the description",
                 _zip([m for m in members if m[0] != "__meta__.npy"],
                      big=("__meta__.npy", BIG_UNREFERENCED, _npy_header((BIG_UNREFERENCED,), "|u1"))))
    stored = _io.BytesIO()
    with zipfile.ZipFile(stored, "w", zipfile.ZIP_STORED) as z:
        for n, b in members:
            z.writestr(n, b)
    yield Mutant("zip", f"{base}: stored (uncompressed) archive", stored.getvalue())


INF = "__INF__"
"""Placeholder replaced by the literal 1e400 (json.dumps would write Infinity)."""
DEEP = "__DEEP__"
"""Placeholder replaced by 100,000 nested lists."""
BAD_VALUES = [None, "text", -1, 0, 1, 2 ** 63, 10 ** 30, 0.5, True, [], {}, [1, 2, 3], INF, DEEP, -0.0]


def _paths(doc, prefix=()) -> Iterator[tuple]:
    """Every field path of a JSON document (object keys and list indices)."""
    yield prefix
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc[:6]):
            yield from _paths(v, (*prefix, i))


def _set(doc, path: tuple, value) -> None:
    for k in path[:-1]:
        doc = doc[k]
    doc[path[-1]] = value


def _dump(doc) -> str:
    text = json.dumps(doc)
    return text.replace(f'"{INF}"', "1e400").replace(f'"{DEEP}"', "[" * 100_000 + "]" * 100_000)


def _json_mutants(base: str, data: bytes, rng: random.Random, n: int) -> Iterator[Mutant]:
    doc = _meta(data)
    paths = [p for p in _paths(doc) if p]
    for _ in range(n):
        path, value = rng.choice(paths), rng.choice(BAD_VALUES)
        d = json.loads(json.dumps(doc))
        _set(d, path, value)
        yield Mutant("json", f"{base}: {'/'.join(map(str, path))} = {str(value)[:12]}",
                     _with_meta_text(data, _dump(d)))
    for _ in range(4):          # a field removed
        path = rng.choice(paths)
        d = json.loads(json.dumps(doc))
        parent = d
        for k in path[:-1]:
            parent = parent[k]
        if isinstance(parent, dict):
            del parent[path[-1]]
        else:
            del parent[path[-1]]
        yield Mutant("json", f"{base}: delete {'/'.join(map(str, path))}", _with_meta_text(data, _dump(d)))
    nodes = doc["graph"]["nodes"]

    def variant(label: str, change: Callable[[dict], None]) -> Mutant:
        d = json.loads(json.dumps(doc))
        change(d)
        return Mutant("json", f"{base}: {label}", _with_meta_text(data, _dump(d)))

    yield variant("unknown op", lambda d: d["graph"]["nodes"][0].update(op="conv3d"))
    yield variant("loss op", lambda d: d["graph"]["nodes"][-1].update(op="softmax_cross_entropy"))
    yield variant("cyclic inputs", lambda d: d["graph"]["nodes"][0].update(inputs=[nodes[-1]["name"]]))
    yield variant("self input", lambda d: d["graph"]["nodes"][1].update(inputs=[nodes[1]["name"]]))
    yield variant("missing input", lambda d: d["graph"]["nodes"][1].update(inputs=["nowhere"]))
    yield variant("no inputs", lambda d: d["graph"]["nodes"][1].update(inputs=[]))
    yield variant("duplicate node", lambda d: d["graph"]["nodes"].append(dict(nodes[-1])))
    yield variant("no nodes", lambda d: d["graph"].update(nodes=[]))
    yield variant("reversed nodes", lambda d: d["graph"]["nodes"].reverse())
    yield variant("groups 0", lambda d: d["graph"]["nodes"][0]["attrs"].update(groups=0))
    yield variant("stride 0", lambda d: d["graph"]["nodes"][0]["attrs"].update(stride=[0, 0]))
    yield variant("stride 3 values", lambda d: d["graph"]["nodes"][0]["attrs"].update(stride=[1, 1, 1]))
    yield variant("padding -5", lambda d: d["graph"]["nodes"][0]["attrs"].update(padding=[-5, -5, -5, -5]))
    yield variant("kernel float", lambda d: d["graph"]["nodes"][0]["attrs"].update(kernel=[3.0, 3.0]))
    yield variant("shape 1e400", lambda d: d["graph"].update(input_shape=[INF, 8, 1]))
    yield variant("shape 4096^2", lambda d: d["graph"].update(input_shape=[4096, 4096, 1]))
    yield variant("shape negative", lambda d: d["graph"].update(input_shape=[-8, 8, 1]))
    yield variant("extra_arrays null", lambda d: d.update(extra_arrays=None))
    yield variant("extra_arrays string", lambda d: d.update(extra_arrays="q/fc/weight"))
    yield variant("extra_arrays a param", lambda d: d.update(extra_arrays=[nodes[0]["name"] + ".weight"]))
    yield variant("extra_arrays missing", lambda d: d.update(extra_arrays=["nothing/here"]))
    yield variant("params of relu", lambda d: d["graph"]["nodes"][-1].update(params=["weight", "bias", "x"]))
    yield variant("version 2", lambda d: d.update(version=2))
    yield variant("format foreign", lambda d: d.update(format="onnx"))
    yield Mutant("json", f"{base}: 100k-deep document", _with_meta_text(data, "[" * 100_000 + "]" * 100_000))
    yield Mutant("json", f"{base}: NaN literal",
                 _with_meta_text(data, _dump(doc).replace('"version": 1', '"version": NaN')))
    yield Mutant("json", f"{base}: huge integer", _with_meta_text(data, _dump(doc).replace(
        '"version": 1', '"version": ' + "9" * 5000)))
    yield Mutant("json", f"{base}: not UTF-8", _with_meta_text(data, _dump(doc)[:-1] + "\udcff}"))
    yield Mutant("json", f"{base}: description as float64",
                 _with_array(data, "__meta__", np.zeros(4, np.float64)))
    yield Mutant("json", f"{base}: description 2-D",
                 _with_array(data, "__meta__", np.zeros((2, 2), np.uint8)))


ARRAY_VARIANTS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "structured": lambda a: np.zeros(a.shape, [("a", "<f4"), ("b", "<i4")]),
    "object (pickle)": lambda a: np.array([{"x": 1}] * max(a.size, 1), dtype=object),
    "bool": lambda a: np.zeros(a.shape, bool),
    "str": lambda a: np.full(a.shape, "abc"),
    "float64": lambda a: a.astype(np.float64),
    "int32": lambda a: a.astype(np.int32),
    "complex": lambda a: a.astype(np.complex64),
    "wrong shape": lambda a: a.reshape(-1)[: max(a.size - 1, 0)],
    "extra axis": lambda a: a[None],
    "empty": lambda a: np.zeros((0,), a.dtype),
    "NaN": lambda a: np.where(np.arange(a.size).reshape(a.shape) == 0, np.nan, a).astype(a.dtype),
    "inf": lambda a: np.full(a.shape, np.inf).astype(a.dtype),
    "fortran order": lambda a: np.asfortranarray(a),
    "big endian": lambda a: a.astype(a.dtype.newbyteorder(">")),
}
"""What each array-level mutant does to a stored array."""


def _array_mutants(base: str, data: bytes, rng: random.Random) -> Iterator[Mutant]:
    keys = [n[:-4] for n, _ in _members(data) if n != "__meta__.npy"]
    for key in keys:
        a = _array(data, key)
        for label in rng.sample(sorted(ARRAY_VARIANTS), 6):
            with np.errstate(invalid="ignore", over="ignore"):
                arr = ARRAY_VARIANTS[label](a)
            yield Mutant("array", f"{base}: {key} {label}", _with_array(data, key, arr))


@pytest.fixture(scope="module")
def mutants(tmp_path_factory) -> list[Mutant]:
    bases = _base_files(tmp_path_factory.mktemp("bases"))
    rng = random.Random(SEED)
    out: list[Mutant] = []
    for base, data in bases.items():
        out += _byte_mutants(base, data, rng)
        out += _zip_mutants(base, data, rng)
        out += _json_mutants(base, data, rng, 70)
        out += _array_mutants(base, data, rng)
    return out


def _outcome(path: Path) -> str:
    """'ok' or 'refused'; anything else raises (the fuzzer's failure)."""
    try:
        mf = io.load(path)
    except io.ModelFileError as e:
        assert str(e) and "\n" not in str(e).strip()[:1]
        return "refused"
    if isinstance(mf.meta.get("quant"), dict):
        try:
            QuantModel.from_file(mf)
        except io.ModelFileError:
            return "refused"
    mf.graph.summary()
    return "ok"


def test_the_fuzzer_covers_every_category(mutants):
    counts = {c: sum(m.category == c for m in mutants) for c in ("byte", "zip", "json", "array")}
    assert sum(counts.values()) >= 500, counts
    assert min(counts.values()) >= 40, counts


def test_every_mutant_loads_or_is_refused(mutants, tmp_path):
    t0 = time.perf_counter()
    failures, outcomes = [], {"ok": 0, "refused": 0}
    for i, m in enumerate(mutants):
        p = tmp_path / f"m{i}.npz"
        p.write_bytes(m.data)
        try:
            outcomes[_outcome(p)] += 1
        except Exception as e:  # any other exception is what the fuzzer hunts
            failures.append(f"{m.name}: {type(e).__name__}: {e}"[:300])
        p.unlink()
    assert not failures, f"{len(failures)} of {len(mutants)} mutants raised:\n" + "\n".join(failures[:30])
    assert outcomes["refused"] > len(mutants) // 2       # most mutants are broken files
    assert outcomes["ok"] > 0                            # harmless ones (fortran order, ...) still load
    print(f"\n{len(mutants)} mutants: {outcomes} in {time.perf_counter() - t0:.1f} s")


def test_known_mutants_get_their_own_message(mutants, tmp_path):
    want = {"10^12-element header": "elements", "object (pickle)": "pickle", "structured": "type",
            "groups 0": "groups", "stride 0": "stride", "100k-deep": "nested", "shape 4096^2": "limit",
            "extra_arrays null": "extra_arrays", "NaN": "NaN", "bomb as the description": "description"}
    checked = set()
    for m in mutants:
        for label, word in want.items():
            if m.name.startswith("int8") and label in m.name and "q/" not in m.name:
                p = tmp_path / "m.npz"
                p.write_bytes(m.data)
                with pytest.raises(io.ModelFileError, match=word):
                    io.load(p)
                checked.add(label)
    assert checked == set(want)
    p = tmp_path / "m.npz"
    for m in mutants:
        if "str" == m.name.rsplit(" ", 1)[-1] and m.name.startswith("float"):
            p.write_bytes(m.data)
            with pytest.raises(io.ModelFileError) as e:
                io.load(p)
            assert "pickle" not in str(e.value)              # only object arrays need pickle


def test_cli_turns_every_category_into_an_error_line(mutants, tmp_path, capsys):
    picked: dict[str, int] = {}
    failures = []
    for i, m in enumerate(mutants):
        if picked.get(m.category, 0) >= CLI_PER_CATEGORY * 3 or "unreferenced" in m.name:
            continue
        picked[m.category] = picked.get(m.category, 0) + 1
        p = tmp_path / f"c{i}.npz"
        p.write_bytes(m.data)
        err = _io.StringIO()
        try:
            with contextlib.redirect_stderr(err):
                code = main(["plan", str(p), "--method", "fqt", "--target", "nrf52840", "--json"])
        except SystemExit as e:
            code = e.code
        except Exception as e:
            failures.append(f"{m.name}: {type(e).__name__}: {e}")
            continue
        capsys.readouterr()
        text = err.getvalue()
        if code not in (0, 1, 2) or "Traceback" in text or (code and "error:" not in text):
            failures.append(f"{m.name}: exit {code}, stderr {text[:200]!r}")
    assert not failures, "\n".join(failures)
    assert set(picked) == {"byte", "zip", "json", "array"}
