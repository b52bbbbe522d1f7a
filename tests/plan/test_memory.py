"""Accounting, code-size estimate, boards from targets.toml, suggestions and `auto` trainable parts."""

from importlib import resources

import pytest

from mcutrain import targets as T
from mcutrain import zoo
from mcutrain.mcu.toolchain import DEFAULT_STACK_BYTES
from mcutrain.plan.memory import (
    CALL_SITE_BYTES,
    KERNEL_CODE_BYTES,
    STACK_ALLOWANCE,
    UNMEASURED_KERNEL_BYTES,
    account,
    code_bytes,
    format_report,
)
from mcutrain.plan.schedule import Role
from mcutrain.plan.schedules import build_schedule
from mcutrain.plan.suggest import PlanRequest, pick_trainable, suggest
from mcutrain.plan.training import plan_training

KB = 1024


def test_stack_allowance_is_what_the_linker_reserves():
    assert STACK_ALLOWANCE == DEFAULT_STACK_BYTES


def test_boards_from_targets_toml():
    b = T.BOARD_TARGETS
    assert list(b)[:5] == ["rp2040", "nrf52840", "stm32f746", "imxrt1062", "stm32h743"]
    want = {"rp2040": ("cortex-m0plus", 264 * KB, 2048 * KB, 133_000_000, False),
            "nrf52840": ("cortex-m4", 256 * KB, 1024 * KB, 64_000_000, True),
            "stm32f746": ("cortex-m7", 320 * KB, 1024 * KB, 216_000_000, True),
            "imxrt1062": ("cortex-m7", 1024 * KB, 8192 * KB, 600_000_000, True),
            "stm32h743": ("cortex-m7", 1024 * KB, 2048 * KB, 480_000_000, True),
            "nrf5340": ("cortex-m33", 512 * KB, 1024 * KB, 128_000_000, True),
            "stm32u585": ("cortex-m33", 786 * KB, 2048 * KB, 160_000_000, True),
            "rp2350": ("cortex-m33", 520 * KB, 4096 * KB, 150_000_000, True),
            "alif-e3": ("cortex-m55", 13824 * KB, 5632 * KB, 400_000_000, True),
            "stm32n657": ("cortex-m55", 4224 * KB, 131072 * KB, 800_000_000, True),
            "esp32c3": ("rv32imc", 400 * KB, 4096 * KB, 160_000_000, False),
            "rp2350-riscv": ("rv32imac", 520 * KB, 4096 * KB, 150_000_000, False),
            "gd32vf103": ("rv32imac", 32 * KB, 128 * KB, 108_000_000, False)}
    for name, (core, ram, flash, clock, fpu) in want.items():
        t = T.get_target(name)
        assert (t.core, t.ram_bytes, t.flash_bytes, t.clock_hz, t.fpu) == (core, ram, flash, clock, fpu)
    assert set(T.all_targets()) == set(T.TARGETS) | set(b)


def test_small_toml_reader_agrees_with_tomllib_and_refuses_the_rest():
    text = resources.files("mcutrain").joinpath("targets.toml").read_text()
    assert T._parse_subset(text) == T.parse_targets_toml(text)
    with pytest.raises(T.TargetError, match="line 2"):
        T._parse_subset("[targets.x]\ncore = [1, 2]\n")
    with pytest.raises(T.TargetError, match="missing keys"):
        T.load_targets('[targets.x]\ncore = "cortex-m4"\n')


def test_code_estimate_uses_the_measured_table():
    s = build_schedule(zoo.build("digits-cnn"), "zo", trainable="last:1", queries=2)
    total, table = code_bytes(s)
    assert table["conv2d_fwd"] == KERNEL_CODE_BYTES["conv2d_fwd"]
    assert all(v == KERNEL_CODE_BYTES.get(op, UNMEASURED_KERNEL_BYTES) for op, v in table.items())
    assert total == sum(table.values()) + CALL_SITE_BYTES * len(s.kernels)


def test_breakdown_adds_up_and_names_the_peak():
    g = zoo.build("small-cnn")
    s = build_schedule(g, "fqt", precision="int8", trainable="last:2")
    r = account(s, "nrf52840")
    b = r.breakdown
    assert r.ram_bytes == sum(b["ram"].values()) and r.flash_bytes == sum(b["flash"].values())
    assert b["ram"]["trainable weights and biases"] == sum(
        t.nbytes for t in s.tensors.values() if t.role == Role.WEIGHT)
    frozen = sum(int(n.params["weight"].size) + 4 * int(n.params["bias"].size)
                 for n in g.parametric()[:2])
    assert b["flash"]["frozen weights and biases"] == frozen
    peak = b["arena_at_peak"]
    assert peak["live_bytes"] == max(r.plan.live_bytes()) == sum(peak["by_role"].values())
    assert s.kernels[peak["step"]].name == peak["kernel"]
    # fc1's int32 gradient buffer alone (1568 x 64 x 4 bytes) is larger than the board's RAM
    assert b["arena_at_peak"]["by_role"]["gradient buffers"] >= 1568 * 64 * 4
    assert not r.fits and r.ram_bytes > 256 * KB
    text = format_report(r)
    assert "one sample at a time" in text and "does NOT fit nrf52840" in text


def test_mcunet_fqt_uint8_last_two_blocks_meets_the_target():
    g = zoo.build("mcunet-5fps", 10, (128, 128, 3))
    r = account(build_schedule(g, "fqt", precision="uint8", trainable="last:7"), "imxrt1062")
    assert r.fits
    assert r.ram_bytes <= 0.65 * 1133.6 * KB       # Lin et al.'s int8 SGD+M+QAS, as reported by seed A
    assert r.breakdown["arena_at_peak"]["by_role"]["transient activations"] > 0


def test_suggestion_names_something_that_fits():
    g = zoo.build("mcunet-5fps", 10, (128, 128, 3))
    req = PlanRequest("fqt", trainable="last:7", precision="float32")
    r = account(req.build(g), "imxrt1062")
    assert not r.fits
    sug = suggest(g, req, "imxrt1062")
    best = sug["best"]
    assert best is not None and best["fits"] and best["ram_bytes"] <= 1024 * KB
    assert best["method"] == "fqt" and "--trainable last:" in best["options"]
    n = int(best["options"].split("--trainable last:")[1].split()[0])
    assert n < 7
    bigger = account(PlanRequest("fqt", trainable=f"last:{n + 1}", precision="float32").build(g), "imxrt1062")
    assert not bigger.fits                               # the largest that fits
    assert any(c["kind"] == "sparse zo" for c in sug["tried"])


def test_smaller_batch_is_tried_for_batched_methods():
    g = zoo.build("small-cnn")
    req = PlanRequest("bp-qas", trainable="last:1", batch=64)
    assert not account(req.build(g), "rp2040").fits
    sug = suggest(g, req, "rp2040")
    small = [c for c in sug["tried"] if c["kind"] == "smaller batch"]
    assert len(small) == 1 and small[0]["fits"]
    batch = int(small[0]["options"].split("--batch ")[1])
    assert batch < 64
    assert not account(PlanRequest("bp-qas", trainable="last:1", batch=2 * batch).build(g), "rp2040").fits


def test_pick_trainable_auto():
    g = zoo.build("small-cnn")
    assert pick_trainable(g, "fqt", "cortex-m0plus", budget=100_000, precision="uint8") == "last:1"
    assert pick_trainable(g, "fqt", "cortex-m0plus", precision="uint8") == "last:4"
    with pytest.raises(ValueError, match="not even the last layer"):
        pick_trainable(g, "fqt", "cortex-m0plus", budget=1000, precision="uint8")


def test_linear_planner_never_smaller():
    s = build_schedule(zoo.build("small-cnn"), "fqt", precision="mixed", trainable="all")
    assert plan_training(s, planner="linear").arena_bytes >= plan_training(s).arena_bytes
