"""What RV32IMC's unrolled int8 dot products (`MT_UNROLL_DOT` in mt_arch.h) buy: the same logits
as the simulator with and without them, and fewer instructions with them (figures printed)."""

from __future__ import annotations

import numpy as np

from mcutrain.codegen.cross import build_mcu, run_mcu
from mcutrain.codegen.library import export_library
from mcutrain.codegen.model_source import resolve_model
from mcutrain.engines import int_engine


def test_unrolled_dot_products_are_bit_exact_and_fewer_instructions(riscv_tools, tmp_path):
    qm, prov = resolve_model(arch="digits-cnn", init="random", seed=0)
    x = np.random.default_rng(1).random((2, *qm.graph.input_shape), dtype=np.float32)
    x_q = int_engine.quantize_input(qm, x)
    export_library(qm, tmp_path / "lib", kernels="ref", provenance=prov, target="rv32imc")
    counts = {}
    for name, defines in (("rolled", ("MT_NO_UNROLL",)), ("unrolled", ())):
        b = build_mcu(tmp_path / "lib", "rv32imc", tmp_path / f"{name}.elf", kernels="ref", defines=defines)
        logits, prof = run_mcu(b.elf, "rv32imc", x_q, qm.graph.num_classes, tmp_path / name)
        np.testing.assert_array_equal(logits, int_engine.forward(qm, x_q))
        counts[name] = prof.region.total / len(x_q)
    print(f"\ndigits-cnn inference on rv32imc: {counts['rolled']:,.0f} -> {counts['unrolled']:,.0f} "
          f"instructions ({counts['unrolled'] / counts['rolled'] - 1:+.1%})")
    assert counts["unrolled"] < counts["rolled"]
