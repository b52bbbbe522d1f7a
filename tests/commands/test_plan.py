"""`mcutrain plan`: the JSON contract, the table, suggestions, auto, pictures and refusals."""

import json

import pytest

from mcutrain import cli, io, zoo
from mcutrain.plan.lifetimes import flash_weight_bytes
from mcutrain.plan.schedules import prepare

KEYS = ["target", "ram_bytes", "flash_bytes", "ram_limit", "flash_limit", "fits", "breakdown",
        "macs_per_step", "suggestion"]


def run_json(capsys, *argv):
    """The `--json` document; the exit status is 0 when the step fits, 3 when it does not."""
    rc = cli.main(["plan", *argv, "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert rc == (0 if doc["fits"] else 3)
    return doc


def test_json_contract_mcunet_fqt(capsys):
    doc = run_json(capsys, "--arch", "mcunet-5fps", "--classes", "10", "--method", "fqt", "--precision",
                   "uint8", "--trainable", "last:7", "--batch", "1", "--target", "imxrt1062")
    assert list(doc) == KEYS
    assert doc["target"] == "imxrt1062" and doc["ram_limit"] == 1024 * 1024
    assert doc["fits"] is True and doc["suggestion"] is None
    ram = doc["breakdown"]["ram"]
    assert doc["ram_bytes"] == sum(ram.values())
    assert doc["breakdown"]["trainable"][-1] == "head" and len(doc["breakdown"]["trainable"]) == 7
    assert doc["breakdown"]["samples_per_pass"] == 1
    macs = doc["macs_per_step"]
    assert macs["forward"] == zoo.build("mcunet-5fps").total_macs()
    phases = ("forward", "loss", "error", "weight_grad", "update", "query")
    assert macs["total"] == sum(macs[k] for k in phases)


def test_zo_sparse_and_dense(capsys):
    sparse = run_json(capsys, "--arch", "mcunet-5fps", "--method", "zo", "--trainable",
                      "layers:blocks.4-7.pw1", "--batch", "1", "--target", "stm32f746")
    assert sparse["fits"] and sparse["ram_bytes"] < 200 * 1024
    assert sparse["breakdown"]["options"]["base"] == "cache"
    assert sparse["macs_per_step"]["query"] > 0


def test_partial_updates_are_planned_for_the_layers_that_run_them(capsys):
    """The lambdas reach the plan as numbers: only the layers that run partial updates get a top-k and
    the C library's kept list and mask; the output layer only with --partial-output."""
    base = ["--arch", "small-cnn", "--method", "fqt", "--precision", "int8", "--target", "nrf52840"]
    full = run_json(capsys, *base)
    part = run_json(capsys, *base, "--partial", "0.25", "--partial-max", "0.75")
    both = run_json(capsys, *base, "--partial", "0.25", "--partial-output")
    assert full["breakdown"]["options"]["partial_layers"] == {}
    lambdas = {n: [0.25, 0.75] for n in ("conv1", "conv2", "fc1")}
    assert part["breakdown"]["options"]["partial_layers"] == lambdas
    assert list(both["breakdown"]["options"]["partial_layers"]) == ["conv1", "conv2", "fc1", "fc2"]
    state = lambda d: d["breakdown"]["ram"]["method state"]
    # per partial layer of O structures: int32 kept list, uint8 mask and (the plan's batch > 1) the
    # per-sample uint8 mask whose OR is the batch's, k and count; the draw offsets
    assert state(part) - state(full) == 6 * (16 + 32 + 64) + 3 * 8 + 4 * 5
    assert state(both) - state(part) == 6 * 10 + 8


def test_text_table_and_suggestion(capsys):
    assert cli.main(["plan", "--arch", "small-cnn", "--method", "fqt", "--precision", "int8",
                     "--trainable", "all", "--target", "nrf52840"]) == 3
    out = capsys.readouterr().out
    assert "does NOT fit nrf52840" in out
    assert "best that fits: --method fqt --precision int8 --trainable last:1" in out


def test_suggestion_in_json(capsys):
    doc = run_json(capsys, "--arch", "small-cnn", "--method", "fqt", "--precision", "int8",
                   "--trainable", "all", "--target", "nrf52840")
    assert doc["fits"] is False
    best = doc["suggestion"]["best"]
    assert best["fits"] and best["ram_bytes"] <= doc["ram_limit"]


def test_trainable_auto_and_budget(capsys):
    doc = run_json(capsys, "--arch", "small-cnn", "--method", "fqt", "--trainable", "auto",
                   "--precision", "uint8", "--batch", "1", "--target", "rp2040")
    assert doc["fits"] and doc["breakdown"]["trainable"] == ["conv1", "conv2", "fc1", "fc2"]
    doc = run_json(capsys, "--arch", "small-cnn", "--method", "fqt", "--trainable", "auto:100000",
                   "--precision", "uint8", "--batch", "1", "--target", "rp2040")
    assert doc["breakdown"]["trainable"] == ["fc2"] and doc["ram_bytes"] <= 100000


def test_model_file_input_size_and_picture(tmp_path, capsys):
    path = io.save(tmp_path / "m.npz", zoo.build("digits-cnn"))
    pic = tmp_path / "life.png"
    assert cli.main(["plan", str(path), "--method", "bp-qas", "--trainable", "last:1", "--batch", "4",
                     "--target", "cortex-m0plus", "--picture", str(pic)]) == 0
    out = capsys.readouterr().out
    assert "4 sample(s) per pass" in out and f"lifetime picture: {pic}" in out
    assert pic.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    doc = run_json(capsys, "--arch", "mcunet-5fps", "--input-size", "64", "--method", "none",
                   "--target", "cortex-m7")
    assert doc["macs_per_step"]["forward"] == zoo.build("mcunet-5fps", 10, (64, 64, 3)).total_macs()


@pytest.mark.parametrize("argv,msg", [
    (["--arch", "small-cnn", "--method", "fqt", "--target", "esp32"],
     "unknown target 'esp32'; known targets"),
    (["--method", "fqt", "--target", "rp2040"], "either a MODEL file or --arch"),
    (["--arch", "vgg", "--method", "fqt", "--target", "rp2040"], "unknown architecture 'vgg'"),
    (["--arch", "small-cnn", "--method", "fqt", "--trainable", "last:9", "--target", "rp2040"],
     "has 4 layers with weights"),
    (["--arch", "small-cnn", "--method", "zo", "--sparse", "score:9", "--target", "rp2040"],
     "K must be in 1..4"),
    (["--arch", "small-cnn", "--method", "fqt", "--trainable", "auto:lots", "--target", "rp2040"],
     "use auto or auto:BYTES"),
    (["--arch", "small-cnn", "--method", "fqt", "--partial", "0.5", "--partial-max", "0.2", "--target",
      "rp2040"], "need 0 <= LAMBDA_MIN <= LAMBDA_MAX <= 1"),
])
def test_refusals(capsys, argv, msg):
    assert cli.main(["plan", *argv]) == 1
    assert msg in capsys.readouterr().err


def test_precision_is_checked_like_train(capsys):
    # NOTE: --precision comes from the method factory now: argparse refuses it (exit 2), as in train
    with pytest.raises(SystemExit) as e:
        cli.main(["plan", "--arch", "small-cnn", "--method", "fqt", "--precision", "int4",
                  "--target", "rp2040"])
    assert e.value.code == 2 and "invalid choice: 'int4'" in capsys.readouterr().err


def test_another_methods_option_is_refused(capsys):
    assert cli.main(["plan", "--arch", "small-cnn", "--method", "fqt", "--queries", "50",
                     "--target", "rp2040"]) == 1
    assert "--queries is an option of zo, not of fqt" in capsys.readouterr().err


def test_plan_without_batch_plans_trains_batch(capsys):
    """`plan` and `train` share one default batch (32): the step planned is the one trained."""
    doc = run_json(capsys, "--arch", "digits-cnn", "--method", "zo", "--target", "nrf52840")
    assert doc["breakdown"]["batch"] == 32 and doc["breakdown"]["samples_per_pass"] == 32


def test_a_step_that_does_not_fit_exits_3_with_the_verdict(capsys):
    argv = ["--arch", "mcunet-5fps", "--method", "fqt", "--precision", "int8", "--batch", "1",
            "--target", "nrf52840"]
    doc = run_json(capsys, *argv)
    share = f"({100 * doc['ram_bytes'] / doc['ram_limit']:.0f}%)"
    rc = cli.main(["plan", *argv])
    captured = capsys.readouterr()
    assert rc == 3 and "Traceback" not in captured.err and not doc["fits"]
    assert "does NOT fit nrf52840" in captured.out and share in captured.out


@pytest.mark.parametrize("target", ["cortex-m4", "cortex-m55"])
def test_an_inference_plans_flash_is_the_exported_librarys_constants(tmp_path, capsys, target):
    """The M4 DSP export widens conv weights to int16, the M55 (Helium) export keeps them int8:
    the planner lays the weights out as the export for the same target does."""
    model = ["--arch", "small-cnn", "--method", "none", "--target", target]
    flash = run_json(capsys, *model)["breakdown"]["flash"]
    assert cli.main(["export", *model, "--init", "random", "-o", str(tmp_path / "lib"), "--json"]) == 0
    exported = json.loads(capsys.readouterr().out)
    assert flash["frozen weights and biases"] + flash["quantization constants"] == exported["const_bytes"]


def test_the_helium_plan_stores_the_weights_the_m4_widens_as_int8(capsys):
    m4, m55 = (run_json(capsys, "--arch", "small-cnn", "--method", "none", "--target", t)
               ["breakdown"]["flash"] for t in ("cortex-m4", "cortex-m55"))
    g = prepare(zoo.build("small-cnn"))
    widened_share = sum(flash_weight_bytes(g, n, "dsp") - n.params["weight"].size for n in g.parametric())
    assert widened_share > 0
    assert m4["frozen weights and biases"] - m55["frozen weights and biases"] == widened_share
