"""The step phase of a profiled function (`mcutrain.bench.mcu_symbols`): by its name, else by the
runtime source that defines it."""

from __future__ import annotations

from mcutrain.bench.mcu_symbols import instructions_by_phase, phase_of


def test_phases_follow_the_defining_source():
    assert phase_of("dot_2x2", "mt_mat_mult_s8_s16") == phase_of("run", "mt_conv_fwd_pairs") == "forward"
    assert phase_of("mt_conv_c1_bwd_w", "mt_conv_c1") == "backward"
    assert phase_of("mt_fqt_topk_s8", "mt_fqt_topk_s8") == "backward"
    assert phase_of("mt_fqt_upd_s8", "mt_fqt_upd_s8") == phase_of("memset", "") == "other"
    split = instructions_by_phase({"dot_2x2_off": 10.0, "pack_block": 4.0, "memset": 1.0},
                                  {"dot_2x2_off": "mt_conv2d_fwd_s8_range",
                                   "pack_block": "mt_conv2d_bwd_in_s8_s16"})
    assert split == {"forward": 10.0, "backward": 4.0, "other": 1.0}
