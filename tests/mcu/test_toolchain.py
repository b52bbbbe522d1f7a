import re

import pytest

from mcutrain.buildflags import core_flags
from mcutrain.mcu.toolchain import (
    BuildError,
    LinkOverflowError,
    build,
    build_timeout,
    linker_script,
)
from mcutrain.targets import Target

SMALL = Target("small-m4", "cortex-m4", 64_000_000, ram_bytes=64 * 1024, flash_bytes=128 * 1024,
               fpu=True, dsp=True, qemu_machine="mps2-an386")


def test_linker_script_uses_board_addresses_and_chip_sizes():
    s = linker_script(SMALL, stack_bytes=4096, heap_bytes=2048)
    assert "FLASH (rx)  : ORIGIN = 0x00000000, LENGTH = 131072" in s
    assert "RAM   (rwx) : ORIGIN = 0x20000000, LENGTH = 65536" in s
    assert "__stack_size__ = 4096;" in s and "__heap_size__ = 2048;" in s
    assert "$" not in s
    with pytest.raises(ValueError, match="multiple of 8"):
        linker_script(SMALL, stack_bytes=1001)


def test_core_flags_follow_fpu():
    assert "-mfpu=fpv4-sp-d16" in core_flags(SMALL)
    soft = Target("m4-nofpu", "cortex-m4", 1, 1024, 1024, False, True, "mps2-an386")
    assert core_flags(soft)[-1] == "-mfloat-abi=soft" and not any("-mfpu" in f for f in core_flags(soft))


def test_m33_flags_and_secure_alias_addresses():
    m33 = Target("u5", "cortex-m33", 160_000_000, 768 * 1024, 2048 * 1024, True, True, "mps2-an505")
    assert core_flags(m33) == ["-mcpu=cortex-m33", "-mthumb", "-mfloat-abi=hard", "-mfpu=fpv5-sp-d16"]
    no_dsp = Target("m33-nodsp", "cortex-m33", 1, 1024, 1024, True, False, "mps2-an505")
    assert core_flags(no_dsp)[0] == "-mcpu=cortex-m33+nodsp"
    s = linker_script(m33)
    assert "FLASH (rx)  : ORIGIN = 0x10000000, LENGTH = 2097152" in s
    assert "RAM   (rwx) : ORIGIN = 0x38000000, LENGTH = 786432" in s


def _program(tmp_path, body: str):
    src = tmp_path / "prog.c"
    src.write_text("#include <stdint.h>\n" + body + "\nint main(int argc, char **argv)\n{\n"
                   "    (void)argv;\n    return (int)big[argc];\n}\n")
    return src


def test_sizes_reported(arm_tools, tmp_path):
    src = _program(tmp_path, "static volatile uint8_t big[1000];")
    b = build([src], SMALL, tmp_path / "ok.elf", stack_bytes=4096, heap_bytes=2048)
    assert b.elf.is_file() and (tmp_path / "ok.elf.ld").is_file()
    assert (b.sizes.heap, b.sizes.stack) == (2048, 4096)
    assert b.sizes.bss >= 1000 and b.sizes.text > 1000
    assert b.sizes.ram_bytes == b.sizes.data + b.sizes.bss + 2048 + 4096 <= 64 * 1024


def test_too_much_ram_fails_naming_region_and_overflow(arm_tools, tmp_path):
    ok = build([_program(tmp_path, "static volatile uint8_t big[1000];")], SMALL, tmp_path / "a.elf")
    src = _program(tmp_path, "static volatile uint8_t big[100000];")
    with pytest.raises(LinkOverflowError) as e:
        build([src], SMALL, tmp_path / "big.elf")
    assert e.value.region == "RAM"
    assert e.value.overflows == {"RAM": e.value.overflow_bytes}
    # The overflow is what the RAM sections need beyond the chip's 64 KB (up to 8-byte alignment).
    assert abs(e.value.overflow_bytes - (ok.sizes.ram_bytes + 99000 - 64 * 1024)) <= 8
    assert re.search(r"region RAM \(65536 bytes\) overflowed by \d+ bytes", str(e.value))
    assert not (tmp_path / "big.elf").exists()


def test_too_much_flash_fails(arm_tools, tmp_path):
    src = _program(tmp_path, "static const uint8_t table[200000] = {1};\n"
                             "static const volatile uint8_t *big = table;")
    with pytest.raises(LinkOverflowError) as e:
        build([src], SMALL, tmp_path / "big.elf")
    assert list(e.value.overflows) == ["FLASH"]
    assert 200000 - 128 * 1024 < e.value.overflow_bytes < 200000 - 128 * 1024 + 64 * 1024
    assert "pick a target with more Flash" in str(e.value)


def test_compile_error_is_reported(arm_tools, tmp_path):
    src = tmp_path / "bad.c"
    src.write_text("int main(void) { int unused; return 0; }\n")
    with pytest.raises(BuildError, match="unused variable") as e:
        build([src], "cortex-m0plus", tmp_path / "bad.elf")
    assert not isinstance(e.value, LinkOverflowError)
    with pytest.raises(BuildError, match="does not exist"):
        build([tmp_path / "missing.c"], "cortex-m4", tmp_path / "x.elf")


def test_a_build_past_its_time_limit_is_a_build_error(arm_tools, tmp_path):
    src = tmp_path / "ok.c"
    src.write_text("int main(void) { return 0; }\n")
    with pytest.raises(BuildError, match=r"took longer than 0\.001 s.*MCUTRAIN_BUILD_TIMEOUT"):
        build([src], "cortex-m4", tmp_path / "ok.elf", timeout=0.001)
    assert not (tmp_path / "ok.elf").exists()


def test_build_timeout_comes_from_the_environment(monkeypatch):
    monkeypatch.delenv("MCUTRAIN_BUILD_TIMEOUT", raising=False)
    assert build_timeout() == 900
    monkeypatch.setenv("MCUTRAIN_BUILD_TIMEOUT", "1200")
    assert build_timeout() == 1200
    for bad in ("soon", "0"):
        monkeypatch.setenv("MCUTRAIN_BUILD_TIMEOUT", bad)
        with pytest.raises(BuildError, match="MCUTRAIN_BUILD_TIMEOUT"):
            build_timeout()
