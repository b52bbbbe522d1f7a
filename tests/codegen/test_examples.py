"""`export --example`: the bare-metal images build with arm-none-eabi-gcc (not flashed) and their
sections hold the planner's RAM and Flash; the Arduino and Zephyr layouts are checked for structure,
since neither tool is installed here."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from mcutrain.cli import main
from mcutrain.codegen.examples import MEMORY_MAPS
from mcutrain.plan.memory import STACK_ALLOWANCE
from mcutrain.targets import get_target

needs_arm_gcc = pytest.mark.skipif(
    shutil.which("arm-none-eabi-gcc") is None or shutil.which("make") is None,
    reason="arm-none-eabi-gcc and make are not installed: 'make test' installs the toolchain as root, "
           "else apt-get install gcc-arm-none-eabi libnewlib-arm-none-eabi make")

ARENA_ALIGN_AND_HOOK = 16
"""What the image's library RAM may hold beyond the planner's figure: the arena rounded up to
8-byte alignment and the layer hook's pointer."""

CASES = [("nrf52840", ["--method", "none"]),
         ("stm32f746", ["--method", "zo", "--queries", "2", "--batch", "2"]),
         ("nrf52840", ["--method", "fqt", "--precision", "int8", "--trainable", "last:2"]),
         ("nrf5340", ["--method", "fqt", "--precision", "int8", "--trainable", "last:2"]),
         ("stm32u585", ["--method", "bp-qas"])]


def _json(argv: list[str], capsys) -> dict:
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def _tool(*argv) -> str:
    return subprocess.run([str(a) for a in argv], capture_output=True, text=True, check=True).stdout


def _sections(elf: Path) -> dict[str, int]:
    out = _tool("arm-none-eabi-size", "-A", elf)
    rows = (line.split() for line in out.splitlines())
    return {p[0]: int(p[1]) for p in rows if len(p) == 3 and p[1].isdigit()}


def _ram_symbols(elf: Path) -> dict[str, int]:
    out = _tool("arm-none-eabi-nm", "-S", elf)
    return {p[3]: int(p[1], 16) for p in (line.split() for line in out.splitlines())
            if len(p) == 4 and p[2] in "dDbB"}


@needs_arm_gcc
@pytest.mark.parametrize(("board", "method"), CASES)
def test_baremetal_image_builds_and_holds_the_planners_ram_and_flash(tmp_path, capsys, board, method):
    model = ["--arch", "digits-cnn", "--target", board, *method]
    lib = tmp_path / "lib"
    _json(["export", *model, "--init", "random", "-o", str(lib), "--example", f"baremetal-{board}", "--json"],
          capsys)
    plan = _json(["plan", *model, "--json"], capsys)     # the same configuration, planned
    folder = lib / "examples" / f"baremetal-{board}"
    subprocess.run(["make", "-s", "-C", str(folder)], check=True, capture_output=True, timeout=900)
    elf, t, m = folder / "firmware.elf", get_target(board), MEMORY_MAPS[board]
    sec = _sections(elf)
    ram, flash = plan["breakdown"]["ram"], plan["breakdown"]["flash"]
    assert sec[".stack"] == ram["stack allowance"] == STACK_ALLOWANCE
    library_ram = sum(v for k, v in _ram_symbols(elf).items() if not k.startswith("demo_"))
    planned_ram = ram["arena"] + ram["trainable weights and biases"] + ram["method state"]
    assert planned_ram <= library_ram <= planned_ram + ARENA_ALIGN_AND_HOOK, (library_ram, planned_ram)
    image_flash = sec[".text"] + sec.get(".ARM.exidx", 0) + sec[".data"]
    data_flash = sum(flash[k] for k in ("frozen weights and biases", "trainable initial values",
                                        "quantization constants"))
    assert data_flash < image_flash <= t.flash_bytes
    assert sec[".data"] + sec[".bss"] + sec[".stack"] <= m.linked_ram_bytes() <= t.ram_bytes
    header = _tool("arm-none-eabi-readelf", "-lW", elf)
    assert f"Entry point 0x{m.flash_origin:x}" not in header   # the entry is Reset_Handler, not the table
    loads = re.findall(r"LOAD\s+0x[0-9a-f]+ (0x[0-9a-f]+) (0x[0-9a-f]+)", header)
    assert int(loads[0][1], 16) == m.flash_origin          # the vector table sits at the start of Flash
    assert all(m.ram_origin <= int(v, 16) < m.ram_origin + m.linked_ram_bytes() for v, _ in loads[1:])


def test_a_baremetal_example_for_another_core_is_refused(tmp_path, capsys):
    assert main(["export", "--arch", "digits-cnn", "--init", "random", "--target", "cortex-m0plus",
                 "--example", "baremetal-stm32f746", "-o", str(tmp_path / "lib")]) == 1
    err = capsys.readouterr().err
    assert "is for a cortex-m7" in err and "--target stm32f746" in err and "Traceback" not in err


def test_zephyr_module_and_arduino_library_have_what_their_tools_read(tmp_path, capsys):
    lib = tmp_path / "lib"
    r = _json(["export", "--arch", "digits-cnn", "--init", "random", "--target", "nrf52840", "--method",
               "zo", "--prefix", "kws_", "--example", "zephyr", "--example", "arduino", "-o", str(lib),
               "--json"], capsys)
    assert r["examples"] == ["zephyr", "arduino"]
    # Zephyr: module.yml names the CMake and Kconfig files; the CMake file's sources exist; Kconfig
    # defines the symbol the CMake file tests.
    module = (lib / "zephyr" / "module.yml").read_text()
    assert {"name: kws_model", "cmake: zephyr", "kconfig: zephyr/Kconfig"} <= {x.strip() for x in
                                                                           module.splitlines()}
    cmake = (lib / "zephyr" / "CMakeLists.txt").read_text()
    kconfig = (lib / "zephyr" / "Kconfig").read_text()
    assert "if(CONFIG_KWS_MODEL)" in cmake and "config KWS_MODEL\n" in kconfig
    sources = re.findall(r"\$\{ZEPHYR_CURRENT_MODULE_DIR\}/([\w./*]+)", cmake)
    assert "kws_model.c" in sources and all(list(lib.glob(s)) for s in sources)
    assert "-ffp-contract=off" in cmake                           # a training library's float order
    # Arduino: library.properties with the fields the IDE requires, src/ with the model and every
    # runtime file flat beside it, and a sketch using the header's API.
    root = lib / "arduino" / "kws_model"
    props = dict(line.split("=", 1) for line in (root / "library.properties").read_text().splitlines())
    assert {"name", "version", "author", "maintainer", "sentence", "paragraph", "category", "url",
            "architectures"} <= set(props) and props["name"] == "kws_model"
    assert (root / "src" / props["includes"]).is_file()
    runtime = {p.name for p in (lib / "runtime").iterdir()}
    assert runtime and runtime | {"kws_model.c", "kws_model.h"} == {p.name for p in (root / "src").iterdir()}
    sketch = (root / "examples" / "kws_model_demo" / "kws_model_demo.ino").read_text()
    assert '#include "kws_model.h"' in sketch and "kws_model_train_step(" in sketch


@needs_arm_gcc
def test_the_arduino_src_folder_compiles_as_arduino_compiles_it(tmp_path, capsys):
    """Arduino puts only src/ on the include path: the flattened copy must build that way."""
    lib = tmp_path / "lib"
    assert main(["export", "--arch", "digits-cnn", "--init", "random", "--target", "nrf52840",
                 "--example", "arduino", "-o", str(lib)]) == 0
    src = lib / "arduino" / "model" / "src"
    for c in sorted(src.glob("*.c")):
        subprocess.run(["arm-none-eabi-gcc", "-mcpu=cortex-m4", "-mthumb", "-O2", "-std=c99", "-Wall",
                        "-Werror", f"-I{src}", "-c", str(c), "-o", str(tmp_path / f"{c.stem}.o")],
                       check=True, timeout=300)
