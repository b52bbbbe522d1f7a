"""`--only AXIS=VALUE`: a sweep benchmark's grid narrowed from the command line, refused with the axes
and values it has; a subset writes NAME[.quick].subset.json, never the complete result file."""

from __future__ import annotations

import json

import pytest

from mcutrain.bench.files import result_path
from mcutrain.bench.subset import parse_only, restrict
from mcutrain.cli import main
from mcutrain.errors import UserError

GRID = {"corruption": ["fog", "zigzag"], "method": ["none", "zo-mix"], "seed": [0, 1, 2]}


def test_parse_only_collects_values_per_axis():
    assert parse_only(["seed=0", "corruption=fog", "seed=2", "seed=0"]) == {"seed": ["0", "2"],
                                                                             "corruption": ["fog"]}
    assert parse_only(None) == {}
    for bad in ("seed", "=0", "seed="):
        with pytest.raises(UserError, match="expected AXIS=VALUE"):
            parse_only([bad])


def test_restrict_keeps_the_grid_order_and_refuses_what_it_lacks():
    assert restrict("b", GRID, {"seed": ["2", "0"]}) == {**GRID, "seed": [0, 2]}
    with pytest.raises(UserError, match="has no axis 'lr'; its axes: corruption, method, seed"):
        restrict("b", GRID, {"lr": ["0.1"]})
    with pytest.raises(UserError, match="seed 7 is not in its grid; the values of seed: 0, 1, 2"):
        restrict("b", GRID, {"seed": ["7"]})


def test_result_file_of_a_subset_is_apart(tmp_path):
    assert result_path(tmp_path, "zo-adapt", subset=True).name == "zo-adapt.subset.json"
    assert result_path(tmp_path, "zo-adapt", quick=True, subset=True).name == "zo-adapt.quick.subset.json"


def test_quick_subset_run_from_the_command_line(tmp_path, capsys):
    dirs = ["--work", str(tmp_path / "w"), "--results", str(tmp_path / "r"), "--docs", str(tmp_path / "d")]
    assert main(["bench", "fqt-scratch", "--quick", "--only", "precision=int8", "--only", "precision=mixed",
                 "--json", *dirs]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [(r["precision"], r["update"]) for r in doc["rows"]] == \
        [("mixed", "float"), ("int8", "float"), ("int8", "integer")]      # in the sweep file's order
    assert doc["only"] == {"precision": ["int8", "mixed"]}
    assert [p.name for p in (tmp_path / "r").iterdir()] == ["fqt-scratch.quick.subset.json"]
    assert not (tmp_path / "d").exists()


@pytest.mark.parametrize("args, message", [
    (["fqt-scratch", "--only", "lr=0.1"], "its axes: task, seed, precision, update"),
    (["zo-adapt", "--only", "corruption=rain"], "the values of corruption: gaussian_noise, shot_noise"),
    (["memory", "--only", "seed=0"], "does not run as a sweep"),
])
def test_bad_only_is_refused_before_anything_runs(args, message, tmp_path, capsys):
    assert main(["bench", *args, "--work", str(tmp_path / "w"), "--results", str(tmp_path / "r")]) == 1
    assert message in capsys.readouterr().err
    assert not (tmp_path / "r").exists() or not any((tmp_path / "r").iterdir())
