"""The depthwise DSP twins (`dsp/mt_depthwise_conv2d_fwd_s8.c`, `..._fwd_s8_range.c`,
`mt_grouped_conv2d_bwd_in_s8_s16.c`, `mt_grouped_conv2d_bwd_w_s8_s8.c`) byte for byte against
their references: one seeded driver (`drivers/depthwise_kernels.c`) built against the reference
runtime and against the DSP twins in their portable emulation (MT_EMULATE_DSP), with the
sanitizers, on shapes that reach every branch (channel counts that are no multiple of four,
stride 1 and 2, padding 0 to 3, 3x3, 5x5 and 7x7 kernels, maps smaller than the kernel, batches
of two, layer clamps, zero points of -128 and others, channels whose requantization has no
prepared form). The native assembly
runs in tests/codegen/test_depthwise_dsp_mcu.py."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from conftest import needs_gcc
from mcutrain.buildflags import HOST_SANITIZE
from mcutrain.codegen.runtime_files import runtime_files
from mcutrain.mcu.hostbuild import find_host_cc

pytestmark = needs_gcc

DRIVER = Path(__file__).parent / "drivers" / "depthwise_kernels.c"
KINDS = {"forward": 0, "forward with extremes": 1, "error propagation": 2, "weight gradient": 3,
         "error propagation to float32": 4, "error range only": 5}

# (n, h, w, c, kh, kw, stride, pad, z_x, z_y, act_min, act_max, shift_lo, shift_hi)
SHAPES = {
    "7 channels, 3x3 stride 1 pad 1, floor requantization":
        (1, 9, 9, 7, 3, 3, 1, 1, -128, -128, -128, 127, -12, -6),
    "12 channels, 5x5 stride 2 pad 2, batch 2, a clamp": (2, 8, 7, 12, 5, 5, 2, 2, 3, -5, -100, 90, -12, -6),
    "8 channels, 3x3 stride 2, relu6-like clamp, general shifts":
        (1, 6, 6, 8, 3, 3, 2, 1, 10, -128, -128, 40, -3, 0),
    "9 channels, 3x3 no padding, odd width": (1, 5, 6, 9, 3, 3, 1, 0, -128, 7, -128, 127, -20, -2),
    "5 channels, 5x5 stride 1 pad 2, wide rows": (1, 11, 40, 5, 5, 5, 1, 2, 17, 0, -128, 127, -14, -8),
    "a 2x2 map under a 7x7 kernel, pad 3 (most taps only see padding)":
        (2, 2, 2, 8, 7, 7, 1, 3, -128, -128, -128, 127, -12, -6),
    "a 3x3 map, 7x7 stride 2 pad 3, 6 channels": (1, 3, 3, 6, 7, 7, 2, 3, 4, -128, -128, 127, -12, -6),
    "7x7 stride 2 pad 3 on a 16x14 map, 4 channels": (1, 16, 14, 4, 7, 7, 2, 3, 0, -128, -128, 127, -12, -6),
    "4 channels, 3x3 stride 2 pad 1 on a 7x9 map, batch 2 (odd sizes: a last even input)":
        (2, 7, 9, 4, 3, 3, 2, 1, 0, -128, -128, 127, -12, -6),
    "8 channels, 3x3 stride 1 on a 5x37 map (rows in three chunks)":
        (2, 5, 37, 8, 3, 3, 1, 1, 3, -128, -128, 127, -12, -6),
}
ERROR_SHIFTS = (-26, -18)
"""Error requantization shifts: an int16 error times an int8 weight needs about 2^-20 to land in int8."""


@pytest.fixture(scope="module")
def probes(tmp_path_factory) -> dict[str, Path]:
    """The driver built against the reference runtime and against the DSP twins."""
    out = {}
    root = tmp_path_factory.mktemp("dw")
    for kernels, flags in (("ref", []), ("dsp", ["-DMT_EMULATE_DSP"])):
        rt = root / kernels
        rt.mkdir()
        for name, text in runtime_files(kernels, training=True).items():
            (rt / name).write_text(text)
        exe = root / f"probe_{kernels}"
        subprocess.run([find_host_cc(), "-std=c99", "-pedantic", "-Wall", "-Wextra", "-Werror", "-O1", *flags,
                        *HOST_SANITIZE,
                        f"-I{rt}", str(DRIVER), "-o", str(exe)], check=True)
        out[kernels] = exe
    return out


def _run(exe: Path, args: list[int]) -> str:
    return subprocess.run([str(exe), *map(str, args)], check=True, capture_output=True, text=True).stdout


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("shape", list(SHAPES))
def test_dsp_twin_matches_the_reference(probes, kind, shape):
    args = list(SHAPES[shape])
    if KINDS[kind] == 2:
        args[-2:] = ERROR_SHIFTS
    for seed in (1, 2):
        argv = [KINDS[kind], *args, seed]
        ref, dsp = _run(probes["ref"], argv), _run(probes["dsp"], argv)
        assert ref.startswith("status 0") or KINDS[kind] in (2, 4, 5), ref[:200]
        assert dsp == ref, f"{kind}, {shape}, seed {seed}: the DSP twin differs from the reference"


def test_error_propagation_without_a_prepared_requantization(probes):
    """Error shifts of -1 and 0 (a multiplier of 2^-1 and more) leave bwd_in_fast_ok: the general loop."""
    args = [2, *SHAPES["9 channels, 3x3 no padding, odd width"][:-2], -1, 0]
    for seed in (1, 2):
        assert _run(probes["dsp"], [*args, seed]) == _run(probes["ref"], [*args, seed])


def test_error_propagation_keeps_int8_values_in_range(probes):
    """The requantized errors are not all saturated or all zero, so the comparison above means something."""
    args = [2, *SHAPES["7 channels, 3x3 stride 1 pad 1, floor requantization"][:-2], *ERROR_SHIFTS, 1]
    values = [int(v) for v in _run(probes["dsp"], args).splitlines()[1].split()]
    assert len(set(values)) > 10 and max(abs(v) for v in values) < 127


def test_weight_gradient_past_the_twins_kernel_sizes(probes):
    """A 9x9 kernel (81 taps, over the weight-gradient twin's stack block of 49) takes the reference
    arithmetic, and a 1x16 one (16 columns, the widest the twin takes) the twin: both as the reference."""
    for kh, kw, pad in ((9, 9, 4), (1, 16, 0)):
        args = [KINDS["weight gradient"], 2, 10, 20, 8, kh, kw, 1, pad, 5, 0, -128, 127, -12, -6]
        for seed in (1, 2):
            ref = _run(probes["ref"], [*args, seed])
            assert ref.startswith("status 0") and _run(probes["dsp"], [*args, seed]) == ref

PLANE_SHAPES = {  # layers the plane bodies take (at most 8 output position pairs, at most 16 inputs)
    "4x4 map, 3x3, batch 2, 6 channels": (2, 4, 4, 6, 3, 3, 1, 1, 9, 0, -128, 127, -12, -6),
    "4x4 map, 7x7 pad 3": (1, 4, 4, 4, 7, 7, 1, 3, -3, 0, -128, 127, -12, -6),
    "8x8 map, 3x3 stride 2, 5 channels": (1, 8, 8, 5, 3, 3, 2, 1, -128, 0, -128, 127, -12, -6),
    "4x4 map, 5x5 stride 2": (1, 4, 4, 8, 5, 5, 2, 2, 0, 0, -128, 127, -12, -6),
    "4x3 map, 3x3 (odd width: a zero partner)": (1, 4, 3, 4, 3, 3, 1, 1, -128, 0, -128, 127, -12, -6),
    "3x5 map, 3x3 stride 2, odd input width": (2, 3, 5, 4, 3, 3, 2, 1, 7, 0, -128, 127, -12, -6),
    "3x3 map, 3x3 no padding (one output position)": (1, 3, 3, 4, 3, 3, 1, 0, -128, 0, -128, 127, -12, -6),
}


@pytest.mark.parametrize("kind", ["weight gradient", "error propagation", "error range only"])
def test_plane_bodies_match_the_reference(probes, kind):
    """The small-map plane bodies of the weight gradient and of the error propagation."""
    for what, shape in PLANE_SHAPES.items():
        args = list(shape)
        if KINDS[kind] == 2:
            args[-2:] = ERROR_SHIFTS
        for seed in (1, 2):
            argv = [KINDS[kind], *args, seed]
            ref = _run(probes["ref"], argv)
            assert (ref.startswith("status 0") or KINDS[kind] != 3) and _run(probes["dsp"], argv) == ref, what


ROW_SHAPES = {  # layers the forward's row body (mt_depthwise_rows_dsp.h) takes: > 4 outputs a row
    "16 channels, 3x3 stride 1 pad 1, batch 2, a relu6-like act_max":
        (2, 9, 10, 16, 3, 3, 1, 1, -128, -128, -128, 50, -12, -6),
    "8 channels, 3x3 stride 2 pad 1, odd width, output zero point 5 (the 5-instruction form)":
        (1, 11, 13, 8, 3, 3, 2, 1, 7, 5, -128, 127, -12, -6),
    "12 channels, 7x7 stride 2 pad 3, batch 2": (2, 12, 11, 12, 7, 7, 2, 3, -128, -128, -128, 127, -12, -6),
    "4 channels, 5x5 stride 1 pad 2 on a 3x9 map (bottom padding rows)":
        (1, 3, 9, 4, 5, 5, 1, 2, -20, -128, -128, 127, -12, -6),
    "10 channels, 5x5 stride 2 pad 2, width 11 (a partial group of outputs)":
        (1, 7, 11, 10, 5, 5, 2, 2, -128, -128, -128, 127, -12, -6),
}


@pytest.mark.parametrize("kind", ["forward", "forward with extremes"])
@pytest.mark.parametrize("shape", list(ROW_SHAPES))
def test_forward_rows_match_the_reference(probes, kind, shape):
    for seed in (1, 2):
        argv = [KINDS[kind], *ROW_SHAPES[shape], seed]
        ref, dsp = _run(probes["ref"], argv), _run(probes["dsp"], argv)
        assert ref.startswith("status 0"), ref[:200]
        assert dsp == ref, f"{kind}, {shape}, seed {seed}: the DSP row body differs from the reference"
