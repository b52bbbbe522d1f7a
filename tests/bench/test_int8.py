"""The int8-core benchmark's quick variant runs end to end and reports real measurements."""

import json

from mcutrain.cli import main


def test_quick_int8_core(tmp_path, capsys):
    assert main(["bench", "int8-core", "--quick", "--work", str(tmp_path / "w"), "--results",
                 str(tmp_path / "r"), "--docs", str(tmp_path / "d"), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["benchmark"] == "int8-core" and doc["complete"] is True
    (row,) = doc["rows"]
    assert row["arch"] == "digits-cnn"
    assert 0.5 < row["float_accuracy"] <= 1 and 0.5 < row["int8_accuracy"] <= 1
    assert row["agreement"] > 0.9
    assert row["int8_samples_per_s"] > 0 and row["float_samples_per_s"] > 0
    assert not (tmp_path / "d").exists()
