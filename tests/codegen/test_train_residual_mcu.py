"""A BP-QAS library of a residual graph on the emulated Cortex-M7 (QEMU mps2-an500, DSP kernels):
every step bit-exact with the simulator (`mcu.twin.first_mismatch`), as `mcutrain bench mcu`
measures MCUNet-5FPS. One configuration: every layer of the one-block graph of
`test_train_export.residual_graph` trained, so the error splits at the add, sums at the skip
tensor and crosses the depthwise conv (ZO through the same block runs on the host in
`test_train_export_residual.py`; its kernels are the forward ones every ZO M7 test runs)."""

from __future__ import annotations

from test_train_export import model_and_data

from mcutrain.codegen.cross import build_mcu_train, run_mcu_train
from mcutrain.codegen.library import export_training_library
from mcutrain.engines import int_engine
from mcutrain.mcu.twin import first_mismatch, simulate_steps
from mcutrain.methods.bp_qas import BPQASConfig, BPQASMethod


def _method(qm) -> BPQASMethod:
    return BPQASMethod(qm, BPQASConfig(trainable="all", momentum=0.9))


def test_bp_qas_through_a_residual_block_is_bit_exact_on_the_m7(arm_tools, tmp_path):
    lr, bsz = 0.05, 2
    qm, batches = model_and_data("tiny-residual", 2, bsz)
    res = export_training_library(_method(qm), tmp_path / "lib", batch=bsz, kernels="dsp")
    elf = build_mcu_train(tmp_path / "lib", "cortex-m7", tmp_path / "t.elf", kernels="dsp").elf
    data = [(int_engine.quantize_input(qm, x), y) for x, y in batches]
    mcu, prof, _ = run_mcu_train(elf, "cortex-m7", data, lr, res.model, qm.graph.num_classes,
                                 tmp_path / "run")
    m = _method(qm)
    w0 = {n: w.copy() for n, w in m.qm.weights.items()}
    sim = simulate_steps(m, batches, lr, [e.name for e in res.model.state])
    assert first_mismatch(sim, mcu) == ""
    assert prof.region.total > 0
    # the steps changed weights, so the equality above is not trivial
    assert sum(int((m.qm.weights[n] != w).sum()) for n, w in w0.items()) > 0
