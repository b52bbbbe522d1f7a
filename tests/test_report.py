import json

import pytest

from mcutrain import io, zoo
from mcutrain.plan.memory import account
from mcutrain.plan.suggest import PlanRequest
from mcutrain.report import ReportError, collect, format_table, memory_parts, plan_request, rows, write_report

FQT = {"method": "fqt", "precision": "int8", "trainable": "all", "lambda_min": 0.5, "lambda_max": 1.0}
ZO = {"method": "zo", "trainable": "all", "queries": 10, "perturb": "mix", "mask": "none",
      "layers": ["conv1", "conv2", "fc"]}


def _history(acc_before, acc_after, batch=None):
    h = {"method": "x", "accuracy_before": acc_before, "accuracy_after": acc_after, "epochs": 2, "steps": 10,
         "history": [{"epoch": 1, "loss": 1.5, "accuracy": 0.6, "train_accuracy": 0.5},
                     {"epoch": 2, "loss": 0.9, "accuracy": acc_after, "train_accuracy": 0.7}]}
    if batch is not None:
        h["batch"] = batch
    return h


def _run(d, name, config, history, beside=False):
    """A trained run as `mcutrain train -o` writes it: the history inside the model file
    (`beside`: as older versions wrote it, in NAME.history.json)."""
    meta = {"provenance": {"trained": {"method": config, "dataset": "digits", "epochs": 2}}}
    if beside:
        (d / f"{name}.history.json").write_text(json.dumps(history))
    else:
        meta["history"] = history
    io.save(d / f"{name}.npz", zoo.build("digits-cnn", seed=0), meta)


MCU = {"target": "nrf52840", "core": "cortex-m4", "bit_exact": True, "steps": 4,
       "instructions_per_step": 177435.0, "macs_per_step": 88064, "est_ms_per_step": 4.0912,
       "ram_bytes": 23844, "flash_bytes": 54716, "method": "none"}


@pytest.fixture
def run_dir(tmp_path):
    _run(tmp_path, "fqt", FQT, _history(0.4, 0.87))
    _run(tmp_path, "zo", ZO, _history(0.4, 0.85, batch=8), beside=True)     # an older run
    (tmp_path / "digits-cnn.mcu.json").write_text(json.dumps(MCU))
    return tmp_path


def test_plan_request_from_saved_configs():
    assert plan_request(FQT, 32) == PlanRequest("fqt", trainable="all", batch=32, precision="int8",
                                                lambda_min=0.5, lambda_max=1.0)
    assert plan_request({**FQT, "lambda_min": 1.0}, 1).lambda_min == 1.0
    assert plan_request(ZO, 4) == PlanRequest("zo", trainable="all", batch=4, perturb="mix", queries=10)
    assert plan_request({"method": "float", "trainable": ["conv2", "fc"]}, 2).trainable == "layers:conv2,fc"
    with pytest.raises(ReportError, match="no planner"):
        plan_request({"method": "magic"}, 1)


def test_collect_plans_each_run_with_its_own_settings(run_dir):
    runs = collect(run_dir, "nrf52840")
    assert [r.name for r in runs] == ["fqt", "zo", "digits-cnn"]
    g = zoo.build("digits-cnn", seed=0)
    fqt, zo, inf = runs
    want = account(PlanRequest("fqt", batch=32, precision="int8", lambda_min=0.5).build(g), "nrf52840")
    assert fqt.plan.ram_bytes == want.ram_bytes
    # the zo history records batch 8: planned with it, not with the default 32
    assert zo.plan.breakdown["batch"] == 8
    assert zo.plan.ram_bytes == account(PlanRequest("zo", batch=8, queries=10).build(g), "nrf52840").ram_bytes
    assert inf.plan is None and inf.history is None and inf.label == "int8 inference"
    assert fqt.label == "fqt int8, partial 0.5" and zo.label == "zo mix, 10 queries"


def test_rows_and_table(run_dir):
    runs = collect(run_dir, "nrf52840", batch=16)
    r = {row["name"]: row for row in rows(runs)}
    assert r["fqt"]["batch"] == 16 and r["zo"]["batch"] == 8
    assert r["fqt"]["accuracy_before"] == 0.4 and r["fqt"]["accuracy_after"] == 0.87
    assert r["fqt"]["mcu"] is None and r["fqt"]["fits"] is True
    assert r["digits-cnn"]["mcu"] == "inference" and r["digits-cnn"]["instructions_per_step"] == 177435.0
    assert r["digits-cnn"]["ram_bytes"] == 23844
    table = format_table(runs)
    lines = table.splitlines()
    assert lines[0].startswith("| method | accuracy before | after | RAM |")
    assert "| fqt int8, partial 0.5 | 0.400 | 0.870 |" in lines[2]
    assert ("| int8 inference | - | - | 23.3 KB | 53.4 KB | - | 1 | 88,064 | inference, bit-exact | "
            "177,435 | 4.09 |") in table
    assert "- zo: method zo, precision int8, queries 10, batch 8, trainable conv1,conv2,fc" in table
    assert "nrf52840 (cortex-m4" in table


def test_memory_parts_sum_to_the_planned_totals(run_dir):
    for r in collect(run_dir):
        if r.plan is not None:
            ram, flash = memory_parts(r.plan)
            assert sum(ram.values()) == r.plan.ram_bytes
            assert sum(flash.values()) == r.plan.flash_bytes
            assert any(k.startswith("arena: ") for k in ram)


def test_write_report_files(run_dir, tmp_path):
    doc = write_report(run_dir, tmp_path / "rep", "nrf52840")
    names = sorted(p.split("/")[-1] for p in doc["files"])
    assert names == ["curves.png", "lifetime-fqt.png", "lifetime-zo.png", "memory.png", "summary.json",
                     "summary.md"]
    for n in names:
        assert (tmp_path / "rep" / n).stat().st_size > 0
    assert (tmp_path / "rep" / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    saved = json.loads((tmp_path / "rep" / "summary.json").read_text())
    assert [r["name"] for r in saved["rows"]] == ["fqt", "zo", "digits-cnn"]
    assert (tmp_path / "rep" / "summary.md").read_text().strip() == doc["table"]


def test_runs_without_model_or_provenance_are_reported_not_planned(tmp_path):
    (tmp_path / "lost.history.json").write_text(json.dumps(_history(0.3, 0.5)))
    io.save(tmp_path / "bare.npz", zoo.build("digits-cnn", seed=0))
    (tmp_path / "bare.history.json").write_text(json.dumps(_history(0.3, 0.6)))
    runs = collect(tmp_path)
    errors = {r.name: r.plan_error for r in runs}
    assert errors == {"bare": "the model file does not say how it was trained",
                      "lost": "model file lost.npz missing"}
    table = format_table(runs)
    assert "lost: not planned (model file lost.npz missing)" in table


def test_refuses_folders_without_runs(tmp_path):
    with pytest.raises(ReportError, match="no trained model"):
        collect(tmp_path)
    with pytest.raises(ReportError, match="is not a folder"):
        collect(tmp_path / "nope")
    (tmp_path / "bad.history.json").write_text("{not json")
    with pytest.raises(ReportError, match="cannot read"):
        collect(tmp_path)


def test_mcu_runs_without_a_method_are_told_apart_by_their_macs(run_dir):
    train_run = {**MCU, "macs_per_step": 402648}
    del train_run["method"]
    (run_dir / "zo.mcu.json").write_text(json.dumps(train_run))
    inf_run = dict(MCU)
    del inf_run["method"]
    (run_dir / "fqt.mcu.json").write_text(json.dumps(inf_run))
    kinds = {r.name: r.mcu_kind for r in collect(run_dir)}
    assert kinds == {"fqt": "inference", "zo": "training step", "digits-cnn": "inference"}
    (run_dir / "digits-cnn.mcu.json").write_text(json.dumps(inf_run))
    assert collect(run_dir)[-1].mcu_kind == "MCU run"   # no model file beside it to compare with


ZO_MCU = {**MCU, "macs_per_step": 402648, "method": "zo", "batch": 8, "trainable": ["conv1", "conv2", "fc"],
          "lr": 0.05, "queries": 10, "perturb": "mix", "planned_ram_bytes": 30000,
          "planned_flash_bytes": 40000, "fits": True}


def test_an_mcu_run_of_the_trained_configuration_joins_its_row(run_dir):
    (run_dir / "zo.mcu.json").write_text(json.dumps(ZO_MCU))
    r = {row["name"]: row for row in rows(collect(run_dir))}
    assert "zo.mcu" not in r
    assert r["zo"]["mcu"] == "training step" and r["zo"]["instructions_per_step"] == 177435.0
    assert r["zo"]["batch"] == 8 and r["zo"]["accuracy_after"] == 0.85


@pytest.mark.parametrize(("change", "label"), [
    ({"batch": 4}, "zo mix, 10 queries (MCU run)"),
    ({"queries": 8}, "zo mix, 8 queries (MCU run)"),
    ({"method": "none"}, "int8 inference (MCU run)"),
])
def test_an_mcu_run_of_another_configuration_gets_its_own_row(run_dir, change, label):
    """Instructions of one configuration never sit beside MACs and RAM of another."""
    (run_dir / "zo.mcu.json").write_text(json.dumps({**ZO_MCU, **change}))
    runs = collect(run_dir)
    r = {row["name"]: row for row in rows(runs)}
    assert r["zo"]["mcu"] is None and r["zo"]["instructions_per_step"] is None and r["zo"]["mcu_elsewhere"]
    mcu = r["zo.mcu"]
    assert mcu["method"] == label and mcu["accuracy_after"] is None
    assert (mcu["macs_per_step"], mcu["ram_bytes"], mcu["instructions_per_step"]) == (402648, 30000, 177435.0)
    assert mcu["config"]["batch"] == change.get("batch", 8)
    table = format_table(runs)
    assert "another configuration: next row" in table
    assert f"- zo.mcu: method {change.get('method', 'zo')}" in table
