import json

import pytest

from mcutrain import cli, io, zoo

FQT = {"method": "fqt", "precision": "uint8", "trainable": "last:1", "lambda_min": 1.0}


def _run_dir(d):
    io.save(d / "fqt.npz", zoo.build("digits-cnn", seed=0), {"provenance": {"trained": {"method": FQT}}})
    hist = {"accuracy_before": 0.2, "accuracy_after": 0.9, "epochs": 1, "history": [
        {"epoch": 1, "loss": 0.5, "accuracy": 0.9, "train_accuracy": 0.8}]}
    (d / "fqt.history.json").write_text(json.dumps(hist))
    return d


def test_report_json_rows_and_files(tmp_path, capsys):
    d = _run_dir(tmp_path / "runs")
    assert cli.main(["report", str(d), "--target", "rp2040", "--batch", "4", "--out", str(tmp_path / "r"),
                     "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert list(doc) == ["run_dir", "target", "rows", "files"]
    (row,) = doc["rows"]
    assert row["name"] == "fqt" and row["method"] == "fqt uint8" and row["target"] == "rp2040"
    assert row["batch"] == 4 and row["accuracy_after"] == 0.9 and row["fits"] is True
    assert (tmp_path / "r" / "lifetime-fqt.png").exists() and (tmp_path / "r" / "memory.png").exists()


def test_report_prints_the_table(tmp_path, capsys):
    d = _run_dir(tmp_path)
    assert cli.main(["report", str(d)]) == 0
    out = capsys.readouterr().out
    assert "| fqt uint8 | 0.200 | 0.900 |" in out
    assert "planner's step on nrf52840" in out
    assert (d / "report" / "summary.md").exists()


def test_report_refusals(tmp_path, capsys):
    assert cli.main(["report", str(tmp_path / "nope")]) == 1
    assert "is not a folder" in capsys.readouterr().err
    assert cli.main(["report", str(tmp_path)]) == 1
    assert "holds no trained model" in capsys.readouterr().err
    assert cli.main(["report", str(tmp_path), "--target", "pdp11"]) == 1
    assert "unknown target 'pdp11'" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        cli.main(["report", str(tmp_path), "--batch", "0"])
    assert e.value.code == 2 and "argument --batch: must be in 1.." in capsys.readouterr().err


def test_an_inference_run_beside_a_trained_model_is_not_shown_as_its_training_step(tmp_path, capsys):
    d = _run_dir(tmp_path / "runs")
    mcu = {"target": "nrf52840", "core": "cortex-m4", "bit_exact": True, "steps": 3,
           "instructions_per_step": 177435.0, "macs_per_step": 88064, "est_ms_per_step": 4.1,
           "ram_bytes": 23844, "flash_bytes": 54716, "method": "none"}
    (d / "fqt.mcu.json").write_text(json.dumps(mcu))
    assert cli.main(["report", str(d)]) == 0
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    lines = [ln for ln in captured.out.splitlines() if ln.startswith("| fqt uint8")]
    assert len(lines) == 1 and "another configuration: next row" in lines[0] and "177,435" not in lines[0]
    assert "| int8 inference (MCU run) |" in captured.out and "- fqt.mcu: method none" in captured.out
