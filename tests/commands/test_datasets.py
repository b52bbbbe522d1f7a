"""`mcutrain datasets`: the JSON contract, the table, --show and its refusals."""

import json

import pytest

from mcutrain import cli
from mcutrain.data import CORRUPTIONS
from mcutrain.data import registry as R
from mcutrain.data.source_spec import KINDS


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("MCUTRAIN_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("MCUTRAIN_DATA", raising=False)


def run_json(capsys, *argv):
    assert cli.main(["datasets", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_json_contract(capsys):
    doc = run_json(capsys)
    assert list(doc) == ["datasets", "corruptions", "formats"]
    assert doc["corruptions"] == list(CORRUPTIONS)
    assert [f["kind"] for f in doc["formats"]] == list(KINDS)
    assert all(f["spec"].startswith(f["kind"] + ":") for f in doc["formats"])
    rows = {r["name"]: r for r in doc["datasets"]}
    for r in rows.values():
        assert list(r) == ["name", "available", "source", "n_train", "n_test", "shape"]
    def sizes(name):
        return rows[name]["available"], rows[name]["n_train"], rows[name]["n_test"], rows[name]["shape"]

    assert sizes("digits") == (True, 1438, 359, [8, 8, 1])
    assert sizes("mnist1d") == (True, 4000, 1000, [1, 40, 1])
    assert set(rows) == {"digits", "mnist1d", "fashion-mnist", "mnist"}


@pytest.mark.skipif(R._idx_files(R.SYSTEM_DIRS[0] / "fashion-mnist") is None,
                    reason="Fashion-MNIST not installed: apt-get install dataset-fashion-mnist")
def test_json_lists_installed_fashion_mnist(capsys):
    fm = next(r for r in run_json(capsys)["datasets"] if r["name"] == "fashion-mnist")
    assert fm == {"name": "fashion-mnist", "available": True, "source": "/usr/share/datasets/fashion-mnist",
                  "n_train": 60000, "n_test": 10000, "shape": [28, 28, 1]}


def test_table_and_missing_hint(capsys, monkeypatch, tmp_path):
    monkeypatch.setattr(R, "SYSTEM_DIRS", [tmp_path / "none"])
    assert cli.main(["datasets"]) == 0
    out = capsys.readouterr().out
    assert "digits" in out and "1438" in out and "zigzag" in out
    assert "dataset 'fashion-mnist' not found" in out and "apt-get install dataset-fashion-mnist" in out


def test_show_writes_png(capsys, tmp_path):
    out = tmp_path / "grid.png"
    doc = run_json(capsys, "--show", "digits-c:fog:3", "-o", str(out))
    assert doc == {"spec": "digits-c:fog:3", "output": str(out), "seed": 0}
    assert out.read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize("argv, message", [
    (["--show", "digits"], "needs -o"),
    (["--show", "digits", "-o", "grid.jpg"], "ending in .png"),
    (["--show", "digits-c:snow:2", "-o", "g.png"], "unknown corruption 'snow'"),
    (["--show", "mnist1d", "-o", "g.png"], "1-D signals"),
    (["-o", "g.png"], "goes with --show"),
    (["--download", "digits"], "not downloaded"),
    (["--download", "cifar"], "unknown dataset"),
])
def test_refusals(capsys, tmp_path, monkeypatch, argv, message):
    monkeypatch.chdir(tmp_path)
    assert cli.main(["datasets", *argv]) == 1
    assert message in capsys.readouterr().err
