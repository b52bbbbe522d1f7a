"""The first hour of a new user (issue 18), part 2: what the tools show while they work and after.

`make demo` installs what the demo needs, progress shows on a terminal and in a log, the
pictures keep one colour per category and readable labels, and the tutorial keeps to what is
true (PyTorch for the CPU, training off the test split).
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

from commands.first_hour_cli import RANDOM, cli
from mcutrain import zoo
from mcutrain.cli import main


def _sysdeps(tmp_path: Path, uid: int, who: str) -> tuple[subprocess.CompletedProcess, Path]:
    """scripts/install-sysdeps.sh on a machine without the ARM tools (PATH holds only fakes):
    `id` says `uid`, `apt-get` records what it was asked to do."""
    fake = tmp_path / "bin"
    fake.mkdir()
    log = tmp_path / "apt.log"
    (fake / "id").write_text(f"#!/bin/bash\necho {uid}\n")
    (fake / "apt-get").write_text(f"#!/bin/bash\necho \"$@\" >> {log}\n")
    for f in fake.iterdir():
        f.chmod(0o755)
    script = Path(__file__).parents[2] / "scripts" / "install-sysdeps.sh"
    r = subprocess.run(["/bin/bash", str(script), who], capture_output=True, text=True,
                       env={"PATH": str(fake)}, timeout=60)
    return r, log


def test_make_demo_installs_the_system_packages_first():
    makefile = (Path(__file__).parents[2] / "Makefile").read_text()
    demo = makefile.split("\ndemo:")[1].split("\n\n")[0]
    assert "scripts/install-sysdeps.sh demo" in demo and "mcutrain demo" in demo
    assert demo.index("install-sysdeps") < demo.index("mcutrain demo")


def test_sysdeps_as_root_installs_the_toolchain(tmp_path):
    r, log = _sysdeps(tmp_path, 0, "demo")
    assert r.returncode == 0, r.stderr
    calls = log.read_text().splitlines()
    assert calls[0] == "update -qq"
    assert calls[1].startswith("install -y -qq --no-install-recommends gcc-arm-none-eabi "
                               "libnewlib-arm-none-eabi qemu-system-arm")
    assert " gcc-riscv64-unknown-elf picolibc-riscv64-unknown-elf qemu-system-misc " in calls[1]


def test_sysdeps_without_root_says_the_one_command(tmp_path):
    r, log = _sysdeps(tmp_path, 1000, "demo")
    assert r.returncode == 0 and not log.exists()
    commands = [ln.strip() for ln in r.stderr.splitlines() if "apt-get" in ln]
    assert len(commands) == 1
    assert commands[0].startswith("sudo apt-get install -y --no-install-recommends gcc-arm-none-eabi "
                                  "libnewlib-arm-none-eabi qemu-system-arm")
    assert "the demo runs without them" in r.stderr


def test_demo_without_the_toolchain_says_one_consistent_thing(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))   # no arm-none-eabi-gcc, no QEMU (jobs: full path)
    monkeypatch.setenv("MCUTRAIN_CACHE", str(tmp_path / "cache"))
    assert main(["demo", "--quick", "--data", "digits", "--out", str(tmp_path / "demo")]) == 0
    out = capsys.readouterr().out
    assert "MCU stage skipped" not in out and "built and ran" not in out
    line = next(ln for ln in out.splitlines() if ln.startswith("[4/5] MCU:"))
    assert line.startswith("[4/5] MCU: not run: arm-none-eabi-gcc")
    assert "apt-get install" in line



def test_progress_writes_plain_lines_when_not_on_a_terminal():
    import io as text_io

    from mcutrain.progress import Progress
    log = text_io.StringIO()
    with Progress(4, "mcutrain run", unit="stage", stream=log, every=0) as p:
        p.stage("cross-compiling for cortex-m4")
        p.update(1)
        p.stage("emulating")
        p.update(1)
    lines = log.getvalue().splitlines()
    assert [ln.split(" (")[0] for ln in lines] == ["mcutrain run: [1/4] cross-compiling for cortex-m4",
                                                   "mcutrain run: [2/4] emulating"]
    log = text_io.StringIO()
    with Progress(10, "fqt", stream=log, every=1e-9) as p:
        for _ in range(3):
            p.update(1, loss=0.5)
    assert log.getvalue().splitlines()[-1].startswith("fqt: 3/10 steps (30%), ")
    assert log.getvalue().splitlines()[-1].endswith(", loss 0.500")
    silent = text_io.StringIO()
    with Progress(10, "fqt", stream=silent, show=False) as p:
        p.stage("x")
        p.update(5)
    assert silent.getvalue() == ""


def test_run_says_its_stages_on_stderr(tmp_path, arm_tools):
    r = cli("run", *RANDOM, "--target", "cortex-m4", "--dataset", "digits", "--steps", "1", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    stages = [ln.split(" (")[0] for ln in r.stderr.splitlines()]
    assert stages == ["mcutrain run: [1/3] writing the C library",
                      "mcutrain run: [2/3] cross-compiling for cortex-m4",
                      "mcutrain run: [3/3] emulating 1 inference in QEMU, counting instructions"]
    assert "bit-exact" in r.stdout


HELD = ("import pathlib, sys, time\n"
        "deadline = time.monotonic() + 60\n"
        "while not pathlib.Path(sys.argv[1]).exists() and time.monotonic() < deadline:\n"
        "    time.sleep(0.02)\n")
"""A job that runs until the file named by its argument exists (60 s at most, so a wait_all that never
says the line releasing it fails the test instead of hanging it)."""


def test_demo_says_each_job_as_it_ends_and_which_still_run(tmp_path):
    """The slow job is held until wait_all has said it still runs after the quick one ended: the
    order of the lines is then the same however loaded the machine (a real training job raced
    `datasets` and lost on a busy CI machine)."""
    from mcutrain.demo.jobs import Job, start, wait_all
    release = tmp_path / "release"
    said: list[str] = []

    def log(line: str) -> None:
        said.append(line)
        if line.startswith("  still running: adapt with fqt ("):
            release.touch()

    quick = start(["datasets", "--json"])
    slow = Job(["held"], subprocess.Popen([sys.executable, "-c", HELD, str(release)]),
               tempfile.TemporaryFile(), tempfile.TemporaryFile())
    wait_all({"MCU inference": quick, "adapt with fqt": slow}, log, every=0.25)
    ends = [s.split(" (")[0] for s in said if "still" not in s]
    assert ends == ["  MCU inference: done", "  adapt with fqt: done"]
    assert any(s.startswith("  still running: adapt with fqt (") for s in said)
    assert quick.seconds < slow.seconds          # each reaped when it ended, not when the other did
    wait_all({"MCU inference": quick}, said.append)
    assert len([s for s in said if "MCU inference: done" in s]) == 1


def test_lifetime_phases_read_forward_error_weight_grad_update():
    from mcutrain.plan.picture import phase_bands
    from mcutrain.plan.schedules import build_schedule
    g = zoo.build("digits-cnn", 10)
    s = build_schedule(g, "fqt", batch=4)
    bands = phase_bands(s.kernels)
    assert bands[0][2] == "zero grads" and bands[1][2] == "forward"
    first = {ph: next(i for i, b in enumerate(bands) if b[2] == ph) for ph in
             ("forward", "error", "weight_grad", "update")}
    assert first["forward"] < first["error"] < first["weight_grad"] < first["update"]
    assert [b[0] for b in bands[1:]] == [b[1] for b in bands[:-1]]      # contiguous, every kernel once
    assert bands[-1][1] == len(s.kernels)


def test_plan_picture_is_written(tmp_path):
    out = tmp_path / "life.png"
    assert main(["plan", "--arch", "digits-cnn", "--method", "fqt", "--target", "cortex-m4",
                 "--picture", str(out)]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_memory_categories_have_one_colour_in_every_picture():
    from mcutrain.plan.colors import FALLBACK, ROLE_COLORS, category_color
    from mcutrain.plan.memory import RAM_LABELS, account
    from mcutrain.plan.schedules import build_schedule
    from mcutrain.report import memory_parts
    for role, colour in ROLE_COLORS.items():
        assert category_color(RAM_LABELS[role]) == category_color(f"arena: {RAM_LABELS[role]}") == colour
    rep = account(build_schedule(zoo.build("digits-cnn", 10), "fqt", batch=4), "nrf52840")
    ram, flash = memory_parts(rep)
    names = [*ram, *flash]
    colours = [category_color(n) for n in names]
    assert FALLBACK not in colours, names
    assert len(set(colours)) == len(colours)


def test_dataset_grid_leaves_room_for_every_row_name():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from mcutrain.data.corruptions import CORRUPTIONS
    from mcutrain.data.grid import label_width
    names = [n.replace("_", " ") for n in CORRUPTIONS] + ["T-shirt/top", "Ankle boot"]
    fig = plt.figure(dpi=100)
    renderer = fig.canvas.get_renderer()
    widest = max(fig.text(0, 0, n, fontsize=9).get_window_extent(renderer).width for n in names) / fig.dpi
    plt.close(fig)
    assert widest + 0.3 <= label_width(names)      # inches: the name, and a clear gap to the block beside it


TUTORIAL = Path(__file__).parents[2] / "docs" / "tutorial.md"


def test_tutorial_says_how_to_get_pytorch_for_the_cpu():
    text = TUTORIAL.read_text()
    assert "pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu" in text
    import tomllib
    project = tomllib.loads((TUTORIAL.parents[1] / "pyproject.toml").read_text())["project"]
    assert "torch==2.13.0" in project["optional-dependencies"]["dev"]     # the version the tutorial names
    assert "partial updates not yet" not in text


def test_tutorial_model_trains_off_the_test_split(tmp_path, capsys, monkeypatch):
    """The tutorial's mynet.py, as written, trains on mcutrain's training split only."""
    import re
    pytest.importorskip("torch")
    from mcutrain.data import load_dataset
    code = re.search(r"Save it as `mynet.py`:\n\n```python\n(.*?)```", TUTORIAL.read_text(), re.S).group(1)
    assert "load_digits" not in code and "x_train" in code and "x_test" not in code
    (tmp_path / "mynet.py").write_text(code)
    monkeypatch.syspath_prepend(str(tmp_path))
    import mynet
    seen = []
    real = mynet.torch.tensor
    monkeypatch.setattr(mynet.torch, "tensor",
                        lambda a, *k, **kw: seen.append(np.asarray(a)) or real(a, *k, **kw))
    mynet.make_net()
    d = load_dataset("digits")
    assert np.array_equal(seen[0], d.x_train.transpose(0, 3, 1, 2)) and np.array_equal(seen[1], d.y_train)
