"""`mcutrain pretrain`: the digits acceptance run, the model file it writes, and clear errors."""

import json

import numpy as np
import pytest

from mcutrain import __version__, cli, io
from mcutrain.methods.float import evaluate


def test_digits_cnn_reaches_95_percent_and_writes_a_model(tmp_path, capsys):
    out = tmp_path / "m.npz"
    code = cli.main(["pretrain", "--arch", "digits-cnn", "--dataset", "digits", "--epochs", "10",
                     "--seed", "0", "-o", str(out), "--json"])
    assert code == 0
    captured = capsys.readouterr()
    result = json.loads(captured.out)            # stdout holds exactly one JSON document
    assert captured.err == ""                    # no progress bar with --json
    assert set(result) == {"float_accuracy", "int8_accuracy", "params", "macs", "train_samples",
                           "test_samples", "path"}
    assert (result["train_samples"], result["test_samples"]) == (1438, 359)   # all of digits
    assert result["float_accuracy"] >= 0.95
    assert abs(result["int8_accuracy"] - result["float_accuracy"]) <= 0.01  # PTQ costs under a point
    assert result["params"] == 9930 and result["macs"] == 88064
    model = io.load(result["path"])
    prov = model.meta["provenance"]
    assert {k: prov[k] for k in ("arch", "dataset", "epochs", "seed", "mcutrain_version")} == {
        "arch": "digits-cnn", "dataset": "digits", "epochs": 10, "seed": 0, "mcutrain_version": __version__}
    assert prov["accuracy"] == result["float_accuracy"]
    assert len(prov["history"]) == 10 and prov["history"][-1]["loss"] < prov["history"][0]["loss"]
    # The saved weights are the trained ones: they reproduce the reported accuracy.
    from mcutrain.data import load_dataset
    ds = load_dataset("digits", seed=0)
    assert evaluate(model.graph, ds.x_test, ds.y_test) == result["float_accuracy"]
    # ... and the int8 model beside them reproduces the int8 accuracy.
    from mcutrain import qmodel
    from mcutrain.engines import int_engine
    qm = qmodel.load(result["path"])
    assert np.mean(int_engine.predict(qm, ds.x_test) == ds.y_test) == result["int8_accuracy"]
    assert prov["int8_accuracy"] == result["int8_accuracy"]


def test_same_seed_same_model_and_text_output(tmp_path, capsys):
    paths = [tmp_path / "a.npz", tmp_path / "b.npz"]
    for p in paths:
        assert cli.main(["pretrain", "--arch", "digits-cnn", "--dataset", "digits[0-2]", "--epochs", "1",
                         "--seed", "3", "-o", str(p)]) == 0
    text = capsys.readouterr().out
    assert "digits-cnn on digits[0-2]: float accuracy" in text and str(paths[1]) in text
    a, b = (io.load(p).graph for p in paths)
    assert a.num_classes == 3
    for name, arr in a.arrays().items():
        np.testing.assert_array_equal(arr, b.arrays()[name])


@pytest.mark.parametrize("argv,message", [
    (["--arch", "no-such-net"], "unknown architecture 'no-such-net'"),
    (["--dataset", "no-such-data"], "no-such-data"),
    (["--epochs", "0"], "argument --epochs: must be in 1.."),
    (["--lr", "-1"], "argument --lr: must be in (0, 1000]"),
    (["--lr", "5"], "--lr 5 is above 1"),
    (["--arch", "small-cnn", "--dataset", "mnist1d"], "does not fit dataset 'mnist1d'"),
])
def test_bad_input_is_refused_with_a_clear_message(tmp_path, capsys, argv, message):
    base = {"--arch": "digits-cnn", "--dataset": "digits", "--epochs": "1"}
    for flag, value in zip(argv[::2], argv[1::2]):
        base[flag] = value
    args = ["pretrain", *[s for kv in base.items() for s in kv], "-o", str(tmp_path / "m.npz")]
    try:
        code = cli.main(args)
    except SystemExit as e:          # argparse refuses a number that can never be meant
        code = e.code
    assert code in (1, 2)
    assert message in capsys.readouterr().err
    assert not (tmp_path / "m.npz").exists()


def test_output_must_be_an_npz_file(tmp_path, capsys):
    assert cli.main(["pretrain", "--arch", "digits-cnn", "--dataset", "digits", "-o",
                     str(tmp_path / "m.pt")]) == 1
    assert "end in .npz" in capsys.readouterr().err


def test_train_and_test_samples_are_balanced_subsets_and_recorded(tmp_path, capsys):
    out = tmp_path / "m.npz"
    assert cli.main(["pretrain", "--arch", "digits-cnn", "--dataset", "digits", "--epochs", "1",
                     "--train-samples", "200", "--test-samples", "100", "-o", str(out), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert (result["train_samples"], result["test_samples"]) == (200, 100)
    prov = io.load(out).meta["provenance"]
    assert (prov["train_samples"], prov["test_samples"]) == (200, 100)
    assert prov["calibration"]["samples"] == 200          # calibrated on the subset it trained on
    with pytest.raises(SystemExit) as e:
        cli.main(["pretrain", "--arch", "digits-cnn", "--dataset", "digits", "--epochs", "1",
                  "--train-samples", "0", "-o", str(out)])
    assert e.value.code == 2
    assert "argument --train-samples: must be in 1.." in capsys.readouterr().err
    assert cli.main(["pretrain", "--arch", "digits-cnn", "--dataset", "digits", "--epochs", "1",
                     "--test-samples", "5000", "-o", str(out)]) == 1
    assert "has 359 test samples; ask for 1 to 359, not 5000" in capsys.readouterr().err
