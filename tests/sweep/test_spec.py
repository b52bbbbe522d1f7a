"""The sweep file: cells expanded in order, keys canonical, every mistake refused with file and key."""

from __future__ import annotations

import pytest

from mcutrain.errors import UserError
from mcutrain.sweep.spec import parse_sweep, read_sweep

BASE = '[base]\narch = "digits-cnn"\ndataset = "digits"\n'


def test_grid_is_the_product_in_file_order_last_axis_fastest(small_sweep):
    spec = read_sweep(small_sweep)
    assert spec.name == "small" and spec.axes == ("method", "lr", "seed")
    assert [(c.config["method"], c.config["lr"], c.config["seed"]) for c in spec.cells[:3]] == [
        ("fqt", 0.01, 0), ("fqt", 0.01, 1), ("fqt", 0.05, 0)]
    zo = spec.cells[4]
    assert zo.config["queries"] == 4 and zo.axes["method"] == "zo queries=4"
    assert "queries" not in spec.cells[0].config        # only the method's own options
    assert spec.cells[0].config["precision"] == "int8"  # its defaults filled in
    assert len({c.key for c in spec.cells}) == 8


def test_key_is_canonical_and_changes_with_the_configuration():
    a = parse_sweep(BASE + "[grid]\nlr = [0.01]\n").cells[0]
    b = parse_sweep('[base]\ndataset = "digits"\narch = "digits-cnn"\nlr = 1e-2\nprecision = "int8"\n'
                    '[[cells]]\nmethod = "fqt"\n').cells[0]
    c = parse_sweep(BASE + "[grid]\nlr = [0.02]\n").cells[0]
    t = parse_sweep('[sweep]\ntarget = "rp2040"\n' + BASE + "[grid]\nlr = [0.01]\n").cells[0]
    assert a.key == b.key           # spelling, order and explicit defaults do not matter
    assert len({a.key, c.key, t.key}) == 3


def test_listed_cells_follow_the_grid():
    spec = parse_sweep(BASE + '[grid]\nseed = [0]\n[[cells]]\nmethod = "bp-qas"\nlr = 0.05\nmomentum = 0.9\n')
    assert [c.config["method"] for c in spec.cells] == ["fqt", "bp-qas"]
    assert spec.cells[1].config["momentum"] == 0.9


def test_model_file_is_keyed_by_its_content(tmp_path):
    m = tmp_path / "m.npz"
    m.write_bytes(b"one")
    text = '[base]\ndataset = "digits"\nmodel = "' + str(m) + '"\n[grid]\nseed = [0]\n'
    k1 = parse_sweep(text).cells[0].key
    m.write_bytes(b"two")
    assert parse_sweep(text).cells[0].key != k1


@pytest.mark.parametrize(("text", "says"), [
    (BASE + "[grid]\nlrr = [0.1]\n", "[grid] axis 'lrr' is not a sweep key"),
    (BASE + "epochz = 3\n[grid]\nseed = [0]\n", "[base]: unknown key 'epochz'; use one of"),
    (BASE + "[grid]\nmethod = ['sgd']\n", "unknown method 'sgd'"),
    (BASE + "[grid]\nlr = ['fast']\n", "lr"),
    (BASE + "[grid]\nlr = 0.1\n", "[grid] lr: give a non-empty list"),
    (BASE + "queries = 5\n[grid]\nseed = [0]\n", "--queries is an option of zo, not of fqt"),
    (BASE + "[grid]\nseed = [0, 0]\n", "are the same configuration"),
    (BASE, "has no cells"),
    ('[base]\ndataset = "digits"\n[grid]\nseed = [0]\n', "give either model"),
    ('[base]\narch = "digits-cnn"\n[grid]\nseed = [0]\n', "give dataset"),
    ("[sweep]\nboard = 'x'\n" + BASE, "[sweep]: unknown key 'board'"),
    ("[sweep]\ntarget = 'no-such-board'\n" + BASE + "[grid]\nseed = [0]\n", "[sweep] target"),
    ("[extra]\n" + BASE, "unknown table 'extra'"),
    (BASE + "train_samples = 0\n[grid]\nseed = [0]\n", "train_samples: must be a whole number"),
    ("[base\n", "is not valid TOML"),
])
def test_mistakes_are_refused_with_file_key_and_what_to_do(text, says):
    with pytest.raises(UserError) as e:
        parse_sweep(text, "my.toml")
    assert "sweep file 'my.toml'" in str(e.value) and says in str(e.value)


def test_unreadable_file_is_a_user_error(tmp_path):
    with pytest.raises(UserError, match="cannot read sweep file"):
        read_sweep(tmp_path / "none.toml")
