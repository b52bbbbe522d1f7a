import json

from mcutrain import cli


def test_demo_pretrains_and_quantizes(tmp_path, capsys):
    assert cli.main(["demo", "--out", str(tmp_path / "d"), "--json"]) == 0
    s = json.loads(capsys.readouterr().out)
    pre = s["stages"]["pretrain"]
    assert pre["float_accuracy"] >= 0.95
    assert abs(pre["int8_accuracy"] - pre["float_accuracy"]) <= 0.01
    assert (tmp_path / "d" / "digits-cnn.npz").exists()
