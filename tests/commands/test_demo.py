import contextlib
import io
import json
from pathlib import Path

import pytest

from mcutrain import cli
from mcutrain import io as model_io
from mcutrain.demo import config
from mcutrain.demo.config import FASHION, DemoConfig, choose
from mcutrain.demo.jobs import JobError, start
from mcutrain.demo.stages import adapt_argv, describe_mcu, mcu_argv, parse, pretrain_argv


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
        assert "history" in model_io.load(out / f"{method}.npz").meta
    assert s["stages"]["fqt"]["precision"] == "int8"
    # one int8 model file, one test set: both methods start from the same accuracy
    assert s["stages"]["fqt"]["accuracy_before"] == s["stages"]["zo"]["accuracy_before"]


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
    saved = json.loads((out / "digits-cnn.mcu.json").read_text())
    assert saved["bit_exact"] is True and saved["method"] == "none" and saved["fits"] is True
    rows = {r["name"]: r for r in s["stages"]["report"]["rows"]}
    assert rows["digits-cnn"]["mcu"] == "inference" and rows["digits-cnn"]["accuracy_after"] is None
    for method in ("fqt", "zo"):
        train = mcu[method]
        assert train == {"error": "skipped: --quick runs int8 inference only on the MCU"}
        assert not (out / f"{method}.mcu.json").exists()


def test_adapt_commands_are_real_train_command_lines():
    cfg, model = DemoConfig(), Path("m.npz")
    args = parse(*adapt_argv(cfg, "fqt", model, Path(".")))
    assert (args.method, args.precision, args.partial) == ("fqt", "int8", 0.5)
    assert args.dataset == "digits-c:stripe:5" and args.output == "fqt.npz"
    assert (args.train_samples, args.test_samples, args.json) == (None, None, True)
    args = parse(*adapt_argv(cfg, "zo", model, Path(".")))
    assert (args.method, args.queries, args.lr, args.epochs) == ("zo", 10, 0.05, 5)


def test_fashion_commands_use_subsets_and_the_parts_that_fit():
    model = Path("small-cnn.npz")
    pre = parse(*pretrain_argv(FASHION, Path(".")))
    assert (pre.arch, pre.dataset, pre.train_samples, pre.test_samples) == ("small-cnn", "fashion-mnist",
                                                                            6000, 2000)
    fqt = parse(*adapt_argv(FASHION, "fqt", model, Path(".")))
    assert fqt.dataset == "fashion-mnist-c:stripe:5"
    assert (fqt.trainable, fqt.batch) == ("layers:conv1,conv2,fc2", 32)
    assert (fqt.train_samples, fqt.test_samples) == (FASHION.adapt_samples, 2000)
    zo = parse(*adapt_argv(FASHION, "zo", model, Path(".")))
    assert (zo.trainable, zo.batch) == ("layers:conv1,conv2,fc2", 8)
    run = parse(*mcu_argv(FASHION, "fqt", model))
    assert (run.method, run.trainable, run.batch, run.steps) == ("fqt", "layers:conv1,conv2,fc2", 2, 2)
    assert run.json is True


@pytest.mark.parametrize("method", ["fqt", "zo"])
def test_fashion_training_steps_fit_the_nrf52840(method, capsys):
    """The demo's settings are chosen so both methods' steps fit the board's 256 KB (the planner)."""
    args = parse(*adapt_argv(FASHION, method, Path("m.npz"), Path(".")))
    argv = ["plan", "--arch", "small-cnn", "--method", method, "--trainable", args.trainable,
            "--batch", str(args.batch), "--target", "nrf52840", "--json"]
    argv += ["--precision", "int8"] if method == "fqt" else ["--queries", str(args.queries)]
    assert cli.main(argv) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["fits"] is True and plan["ram_bytes"] < 256 * 1024


def test_demo_data_falls_back_to_digits_and_says_so(monkeypatch):
    monkeypatch.setattr(config, "fashion_mnist_missing", lambda: "dataset 'fashion-mnist' not found")
    cfg, note = choose("auto", quick=False)
    assert cfg == DemoConfig() and "Fashion-MNIST is not installed" in note and "\n" not in note
    with pytest.raises(ValueError, match="not found"):
        choose("fashion-mnist", quick=False)
    monkeypatch.setattr(config, "fashion_mnist_missing", lambda: None)
    cfg, note = choose("auto", quick=False, seed=3)
    assert (cfg.dataset, cfg.arch, cfg.seed, note) == ("fashion-mnist", "small-cnn", 3, None)
    assert choose("auto", quick=True)[0].dataset == "digits"      # --quick stays on digits
    assert choose("digits", quick=False)[0] == DemoConfig()


def test_background_jobs_return_json_or_say_what_failed():
    ok = start(["datasets", "--json"])
    assert any(row["name"] == "digits" for row in ok.json()["datasets"])
    assert ok.seconds > 0
    bad = start(["train", "--dataset", "digits"])
    with pytest.raises(JobError, match=r"'mcutrain train --dataset digits' failed: .*either a MODEL"):
        bad.json()
    crash = start(["train", "--arch", "digits-cnn", "--init", "random", "--dataset", "digits",
                   "--epochs", "1",
                   "--checkpoint", "/dev/null/x.npz", "--json"])
    with pytest.raises(JobError) as e:
        crash.json()
    first = str(e.value).splitlines()[0]       # the unwritable checkpoint is caught before training
    assert first.startswith("'mcutrain train --arch") and "is not a folder" in first
    assert "Traceback" not in str(e.value)


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
    assert said == []        # said once, by the demo's "[4/5] MCU: not run: ..." line (test_first_hour)
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


def test_the_tflite_line_names_commands_that_run(tmp_path, capsys):
    """The demo's one line for TFLM users: its two commands run as written on a real .tflite
    (with D a dataset, and a short run's sample and method options added to `train`)."""
    import re

    import numpy as np

    from mcutrain import zoo
    from mcutrain.commands.demo import TFLITE_PATH
    from mcutrain.engines import ptq
    from mcutrain.interop.tflite_export import save_tflite

    g = zoo.build("digits-cnn", seed=0)
    qm = ptq.quantize_model(g, np.random.default_rng(0).random((32, *g.input_shape), dtype=np.float32),
                            rounding="tflite")
    save_tflite(qm, tmp_path / "model.tflite")
    commands = re.findall(r"mcutrain ([a-z]+ [^,(]+?)(?:, then |\s*\(|$)", TFLITE_PATH)
    assert [c.split()[0] for c in commands] == ["train", "export"]
    short = ["--method", "zo", "--queries", "2", "--epochs", "1", "--train-samples", "64"]
    for c in commands:
        argv = [str(tmp_path / w) if w.endswith((".tflite", ".npz")) else ("digits" if w == "D" else w)
                for w in c.split()]
        assert cli.main(argv + (short if argv[0] == "train" else [])) == 0, argv
    capsys.readouterr()
    assert (tmp_path / "adapted.tflite").stat().st_size > 0
