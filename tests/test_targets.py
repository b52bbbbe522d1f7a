import pytest

from mcutrain.targets import BOARDS, MB, TARGETS, Target, TargetError, get_target, helium_target


def test_generic_targets_fit_their_boards():
    for t in TARGETS.values():
        assert t.link_ram_bytes == t.ram_bytes == t.board.ram_bytes
        assert t.link_flash_bytes == t.flash_bytes == t.board.flash_bytes
    assert {t.board.ram_bytes for t in TARGETS.values()} == {4 * MB}
    assert get_target("cortex-m0plus").qemu_machine == "mps2-an385"
    assert get_target("cortex-m4").qemu_machine == "mps2-an386"
    assert get_target("cortex-m7").qemu_machine == "mps2-an500"
    assert get_target("cortex-m7").clock_hz == 600_000_000
    assert get_target("cortex-m33").qemu_machine == "mps2-an505"


def test_m33_boards_run_on_the_an505_secure_aliases():
    for name in ("nrf5340", "stm32u585", "rp2350"):
        t = get_target(name)
        assert (t.core, t.fpu, t.dsp, t.qemu_machine) == ("cortex-m33", True, True, "mps2-an505")
    an505 = BOARDS["mps2-an505"]
    assert (an505.flash_origin, an505.ram_origin) == (0x10000000, 0x38000000)  # address bit 28: Secure
    assert get_target("stm32u585").link_ram_bytes == 786 * 1024


def test_cortex_m55_runs_on_the_an547():
    m55 = get_target("cortex-m55")
    assert (m55.qemu_machine, m55.fpu, m55.dsp) == ("mps3-an547", True, True)
    # QEMU's AN547 boots from the 512 KB ITCM at 0x0 and has 4 MB of SRAM at 0x21000000.
    board = BOARDS["mps3-an547"]
    assert (board.flash_origin, board.flash_bytes) == (0x0, 512 * 1024)
    assert (board.ram_origin, board.ram_bytes) == (0x21000000, 4 * MB)
    for name in ("alif-e3", "stm32n657"):
        t = get_target(name)
        assert t.core == "cortex-m55" and t.qemu_machine == "mps3-an547"
        assert t.link_flash_bytes == board.flash_bytes < t.flash_bytes


def test_unknown_target_lists_known_names():
    with pytest.raises(TargetError, match="cortex-m0plus, cortex-m4, cortex-m7, cortex-m33"):
        get_target("cortex-m3")


def test_from_dict_defaults_and_board_cap():
    t = Target.from_dict("imxrt1062", {"core": "cortex-m7", "clock_hz": 600_000_000,
                                       "ram_bytes": 1 * MB, "flash_bytes": 8 * MB})
    assert (t.fpu, t.dsp, t.qemu_machine) == (True, True, "mps2-an500")
    assert t.link_flash_bytes == BOARDS["mps2-an500"].flash_bytes == 4 * MB  # board holds 4 MB
    assert t.link_ram_bytes == 1 * MB
    rp = Target.from_dict("rp2040", {"core": "cortex-m0plus", "clock_hz": 133_000_000,
                                     "ram_bytes": 264 * 1024, "flash_bytes": 2 * MB})
    assert (rp.fpu, rp.dsp, rp.qemu_machine) == (False, False, "mps2-an385")


def test_bad_target_definitions():
    with pytest.raises(TargetError, match="unknown keys"):
        Target.from_dict("x", {"core": "cortex-m4", "clock_hz": 1, "ram_bytes": 1, "flash_bytes": 1,
                               "sram": 3})
    with pytest.raises(TargetError, match="missing keys"):
        Target.from_dict("x", {"core": "cortex-m4"})
    with pytest.raises(TargetError, match="neither FPU nor DSP"):
        Target("x", "cortex-m0plus", 1, 1, 1, True, False, "mps2-an385")
    with pytest.raises(TargetError, match="ram_bytes must be positive"):
        Target("x", "cortex-m4", 1, 0, 1, True, True, "mps2-an386")


def test_helium_targets_are_the_mve_cores():
    assert helium_target("cortex-m55") and helium_target("alif-e3") and helium_target("stm32n657")
    assert not helium_target("cortex-m4") and not helium_target("") and not helium_target(None)
