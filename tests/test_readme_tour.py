"""README.md's "A 5-minute tour", run as written, gives one consistent set of numbers.

The commands are read from the tour's fenced shell block (so the README cannot drift from what
is tested) and run in a fresh folder through `mcutrain.cli.main`, each with its exit status
checked. Nothing is substituted: the tour is on the bundled digits and finishes in about a
minute. Two lines are left out, and said why: `. .venv/bin/activate` (the test runs in the
environment already) and `mcutrain state-to-model zo-lib state.bin` (state.bin is what a real
board writes; tests/commands/test_state_to_model.py covers the command). `plan` and `export`
are run once more with `--json` appended, to read their numbers.

The checks: the zo step has one configuration (queries, lr, batch, trainable) in train, plan,
export and run; plan says it fits, export wrote it, run ran it bit-exactly and its library is
the one plan planned; the report's zo row holds that run's instructions beside the plan's MACs
(the same number as the run's); both methods start from the same accuracy before.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import shlex
from pathlib import Path

import pytest

from mcutrain import cli
from mcutrain.methods import factory

README = Path(__file__).resolve().parents[1] / "README.md"
LEFT_OUT = (". .venv/bin/activate", "mcutrain state-to-model zo-lib state.bin")


def tour_commands() -> list[str]:
    """The shell commands of the tour's fenced block, continuation lines joined, comments dropped."""
    text = README.read_text()
    section = text.split("## A 5-minute tour", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```sh\n(.*?)```", section, re.S).group(1)
    joined = re.sub(r"\\\n\s*", " ", block)
    lines = [re.sub(r"\s+#.*$", "", line).strip() for line in joined.splitlines()]
    return [line for line in lines if line and not line.startswith("#")]


def run(argv: list[str]) -> tuple[int, str]:
    """`mcutrain ARGV` in this process: (exit status, stdout)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = cli.main(argv)
    return rc, out.getvalue()


def resolved(argv: list[str]):
    """The namespace a tour command's options resolve to (the factory's defaults filled in)."""
    args = cli.build_parser().parse_args(argv)
    return factory.resolve(args, args.command, args.method)


def test_the_tour_commands_are_read_from_the_readme():
    cmds = tour_commands()
    assert [c.split()[1] for c in cmds if c.startswith("mcutrain ")] == [
        "datasets", "pretrain", "train", "train", "plan", "export", "run", "state-to-model", "report"]
    assert any(c.startswith(LEFT_OUT[0]) for c in cmds) and any(c.startswith(LEFT_OUT[1]) for c in cmds)


@pytest.mark.slow
def test_the_tour_runs_as_written_with_one_configuration(arm_tools, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    zo: dict[str, list[str]] = {}
    for cmd in tour_commands():
        if cmd.startswith(LEFT_OUT):
            continue
        words = shlex.split(cmd)
        assert words[0] == "mcutrain", cmd
        argv, target = words[1:], None
        if ">" in argv:
            argv, target = argv[:argv.index(">")], argv[argv.index(">") + 1]
        rc, out = run(argv)
        assert rc == 0, f"{cmd}: exit status {rc}\n{capsys.readouterr().err}"
        assert "Traceback" not in capsys.readouterr().err
        if target:
            Path(target).write_text(out)
        if "zo" in argv and "--method" in argv:
            zo[argv[0]] = argv

    # one configuration of the zo step in every command that has it
    assert set(zo) == {"train", "plan", "export", "run"}
    ns = {cmd: resolved(argv) for cmd, argv in zo.items()}
    for key in ("queries", "batch", "trainable", "perturb", "lr"):
        values = {cmd: getattr(n, key) for cmd, n in ns.items() if hasattr(n, key)}
        assert len(set(values.values())) == 1, f"--{key} differs: {values}"

    rc, out = run([*zo["plan"][:zo["plan"].index("--picture")], "--json"])
    plan = json.loads(out)
    assert rc == 0 and plan["fits"] is True and Path("zo-memory.png").exists()
    rc, out = run([*zo["export"][:-2], "-o", "zo-lib-json", "--json"])
    export = json.loads(out)
    assert rc == 0 and export["fits"] is True and export["planned_ram_bytes"] == plan["ram_bytes"]
    assert export["macs_per_step"] == plan["macs_per_step"]["total"] and export["batch"] == 32
    mcu = json.loads(Path("runs/zo.mcu.json").read_text())
    assert mcu["bit_exact"] is True and mcu["fits"] is True
    planned = (plan["ram_bytes"], plan["macs_per_step"]["total"])
    assert (mcu["planned_ram_bytes"], mcu["macs_per_step"]) == planned
    assert mcu["library_ram_bytes"] == pytest.approx(plan["ram_bytes"], rel=0.01)
    trained = ns["train"]
    assert (mcu["queries"], mcu["batch"], mcu["lr"]) == (trained.queries, trained.batch, trained.lr)

    summary = json.loads(Path("runs/report/summary.json").read_text())
    rows = {r["name"]: r for r in summary["rows"]}
    assert set(rows) == {"fqt", "zo"}      # the MCU run is of the trained step: no row of its own
    assert rows["zo"]["mcu"] == "training step" and rows["zo"]["bit_exact"] is True
    assert rows["zo"]["instructions_per_step"] == mcu["instructions_per_step"]
    assert (rows["zo"]["macs_per_step"], rows["zo"]["ram_bytes"]) == (mcu["macs_per_step"], plan["ram_bytes"])
    assert rows["zo"]["config"] == {"method": "zo", "precision": "int8", "queries": 10, "batch": 32,
                                    "trainable": mcu["trainable"], "partial": None}
    assert rows["fqt"]["accuracy_before"] == rows["zo"]["accuracy_before"]
    assert rows["zo"]["accuracy_after"] > rows["zo"]["accuracy_before"]
