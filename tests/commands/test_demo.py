import contextlib
import io
import json
from pathlib import Path

import pytest

from mcutrain import cli
from mcutrain.demo.stages import DemoConfig, adapt_argv, describe_mcu, parse


@pytest.fixture(scope="module")
def quick_demo(tmp_path_factory):
    """One `mcutrain demo --quick --json` run shared by the checks below (about 20 s)."""
    out = tmp_path_factory.mktemp("demo")
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert cli.main(["demo", "--quick", "--out", str(out), "--json"]) == 0
    return out, json.loads(buf.getvalue())


def test_demo_pretrains_and_quantizes(quick_demo):
    out, s = quick_demo
    pre = s["stages"]["pretrain"]
    assert pre["float_accuracy"] >= 0.95
    assert abs(pre["int8_accuracy"] - pre["float_accuracy"]) <= 0.01
    assert (out / "digits-cnn.npz").exists()


def test_demo_adapts_with_fqt_and_zo(quick_demo):
    out, s = quick_demo
    for method in ("fqt", "zo"):
        r = s["stages"][method]
        assert r["method"] == method and r["epochs"] == 1
        # stripes at severity 5 cost the pretrained model most of its accuracy; one epoch wins some back
        assert r["accuracy_before"] < 0.5
        assert r["accuracy_after"] > r["accuracy_before"] + 0.1
        assert (out / f"{method}.npz").exists() and (out / f"{method}.history.json").exists()
    assert s["stages"]["fqt"]["precision"] == "int8"


def test_demo_plans_and_reports(quick_demo):
    out, s = quick_demo
    rows = {r["name"]: r for r in s["stages"]["report"]["rows"]}
    for method in ("fqt", "zo"):
        assert rows[method]["target"] == "nrf52840" and rows[method]["fits"] is True
        assert 0 < rows[method]["ram_bytes"] < 256 * 1024
    for name in ("curves.png", "memory.png", "lifetime-fqt.png", "lifetime-zo.png", "summary.md"):
        assert (out / "report" / name).exists()
    assert json.loads((out / "demo.json").read_text())["config"]["adapt_epochs"] == 1


def test_demo_mcu_stage_is_bit_exact_or_says_why(quick_demo):
    out, s = quick_demo
    mcu = s["stages"]["mcu"]
    lines = s["mcu_lines"]
    if not mcu["available"]:
        assert "apt" in mcu["reason"] and "not run" in lines[0]
        return
    inf = mcu["inference"]
    assert inf["bit_exact"] is True and inf["instructions_per_step"] > 0 and inf["target"] == "nrf52840"
    assert "BIT-EXACT" in lines[0]
    assert json.loads((out / "digits-cnn.mcu.json").read_text())["bit_exact"] is True
    for method in ("fqt", "zo"):
        train = mcu[method]
        assert train == {"error": "skipped: --quick runs int8 inference only on the MCU"}
        assert not (out / f"{method}.mcu.json").exists()


def test_adapt_commands_are_real_train_command_lines():
    cfg, model = DemoConfig(), Path("m.npz")
    args = parse(*adapt_argv(cfg, "fqt", model, Path(".")))
    assert (args.method, args.precision, args.partial) == ("fqt", "int8", 0.5)
    assert args.dataset == "digits-c:stripe:5" and args.output == "fqt.npz"
    args = parse(*adapt_argv(cfg, "zo", model, Path(".")))
    assert (args.method, args.queries, args.lr, args.epochs) == ("zo", 10, 0.05, 5)


def test_describe_mcu_without_toolchain():
    lines = describe_mcu({"available": False, "reason": "install with apt-get"}, DemoConfig())
    assert lines == ["MCU: not run (install with apt-get); the rest of the demo is complete"]


def test_demo_refuses_an_unknown_target(tmp_path, capsys):
    assert cli.main(["demo", "--out", str(tmp_path), "--target", "z80"]) == 1
    assert "unknown target 'z80'" in capsys.readouterr().err


def test_mcu_stage_without_toolchain_says_how_and_drops_stale_results(tmp_path, monkeypatch):
    from mcutrain.demo import stages
    hint = "arm-none-eabi-gcc not found; install it (as root): apt-get install gcc-arm-none-eabi"
    monkeypatch.setattr(stages, "_toolchain_missing", lambda: hint)
    for name in ("digits-cnn", "zo"):
        (tmp_path / f"{name}.mcu.json").write_text("{}")
    said = []
    res = stages.mcu_stage(DemoConfig(), tmp_path / "digits-cnn.npz", tmp_path, said.append)
    assert res == {"available": False, "reason": hint}
    assert said == [f"  MCU stage skipped: {hint}"]
    assert not list(tmp_path.glob("*.mcu.json"))


def test_long_errors_are_cut_to_their_first_lines():
    from mcutrain.demo.stages import short
    assert short("one line") == "one line"
    assert short("a\nb\nc\nd") == "a\n  b ... (the whole message is in demo.json)"
    res = {"available": True, "inference": {"error": "x failed\nfile.c:1: error\nmore\n"},
           "fqt": {"error": "not available yet"},
           "zo": {"error": "y"}}
    lines = describe_mcu(res, DemoConfig())
    assert lines[0] == ("MCU int8 inference of digits-cnn: x failed\n  file.c:1: error ... "
                        "(the whole message is in demo.json)")
    assert lines[1].startswith("MCU fqt int8 training steps") and lines[1].endswith(": not available yet")
