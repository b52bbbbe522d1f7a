"""Exact instruction counts of the depthwise backward DSP twins on MCUNet-5FPS's 14 depthwise shapes
at 64x64 (batch 1), per layer and over all layers, as docs/c-training-kernels.md quotes them.

Builds the seeded driver tests/codegen/drivers/depthwise_kernels.c against the DSP runtime for a
core and runs it under the QEMU instruction counter, kind 3 (weight gradient), 2 (error
propagation, requantizing pass) and 5 (its range-only pass); instructions of the kernel's
functions (and its memset) over the layer's MACs, padding taps counted as the planner counts them.

    PYTHONPATH=src python scripts/depthwise_backward_counts.py OUTDIR [KIND ...] [--target cortex-m4]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from mcutrain.codegen.runtime_files import runtime_files
from mcutrain.mcu.profile import count_instructions
from mcutrain.mcu.toolchain import build

DRIVER = Path(__file__).resolve().parents[1] / "tests" / "codegen" / "drivers" / "depthwise_kernels.c"
LAYERS = [  # name, h, w, c, k, stride (padding k // 2)
    ("blocks.0.dw", 32, 32, 16, 3, 1), ("blocks.1.dw", 32, 32, 32, 3, 2), ("blocks.2.dw", 16, 16, 48, 3, 1),
    ("blocks.3.dw", 16, 16, 48, 7, 2), ("blocks.4.dw", 8, 8, 120, 3, 1), ("blocks.5.dw", 8, 8, 120, 3, 2),
    ("blocks.6.dw", 4, 4, 160, 7, 1), ("blocks.7.dw", 4, 4, 160, 5, 1), ("blocks.8.dw", 4, 4, 144, 3, 1),
    ("blocks.9.dw", 4, 4, 192, 3, 1), ("blocks.10.dw", 4, 4, 240, 7, 2), ("blocks.11.dw", 2, 2, 384, 5, 1),
    ("blocks.12.dw", 2, 2, 384, 5, 1), ("blocks.13.dw", 2, 2, 576, 3, 1)]
KERNEL = {2: ("bwd_in", "bip_", "bir_", "bis_", "bik_", "mt_dwr", "mt_grouped_conv2d_bwd_in"),
          3: ("bwd_w", "bwp_", "mt_grouped_conv2d_bwd_w")}
KERNEL[5] = KERNEL[2]
DRIVER_MEMSET = 4396
"""Instructions of memset the driver itself runs (measured on the twins before they called memset)."""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("kinds", nargs="*", type=int, default=[3, 2, 5])
    ap.add_argument("--target", default="cortex-m4")
    a = ap.parse_args()
    rt = a.out / "rt"
    rt.mkdir(parents=True, exist_ok=True)
    for name, text in runtime_files("dsp", training=True).items():
        (rt / name).write_text(text)
    elf = build([DRIVER], a.target, a.out / "dsp.elf", include_dirs=[rt], heap_bytes=256 * 1024).elf
    for kind in a.kinds:
        total = macs_all = 0
        for name, h, w, c, k, s in LAYERS:
            pad = k // 2
            macs = ((h + 2 * pad - k) // s + 1) * ((w + 2 * pad - k) // s + 1) * k * k * c
            zx = -128 if kind == 3 else 0
            args = [kind, 1, h, w, c, k, k, s, pad, zx, 0, -128, 127, -20, -18, 7]
            p = count_instructions(elf, a.target, [str(v) for v in args], timeout=600)
            if "status 0" not in p.stdout:
                raise SystemExit(f"{name}: the driver failed: {p.stdout[:200]}")
            n = sum(v for f, v in p.per_function.items() if f.startswith(KERNEL[kind]))
            n += p.per_function.get("memset", 0) - DRIVER_MEMSET
            total, macs_all = total + n, macs_all + macs
            print(f"kind {kind} {name:13s} {n:9d} {n / macs:6.2f}", flush=True)
        print(f"kind {kind} all {total} {total / macs_all:.3f}", flush=True)


if __name__ == "__main__":
    main()
