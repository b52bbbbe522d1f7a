"""Integer primitives: quantization parameters, fixed-point requantization, rounding, xorshift32, loss.

The normative definitions live in ``docs/integer-semantics.md``; these modules
are their executable form, and the C runtime mirrors them bit for bit.
"""

from mcutrain.quant.fixedpoint import (
    activation_range,
    add_multipliers,
    output_multiplier,
    quantize_multiplier,
    requantize,
    requantize_output,
    rounding_divide,
    rounding_shift_right,
)
from mcutrain.quant.loss import LOSS_FRAC_BITS, PROB_FRAC_BITS, int_softmax_cross_entropy
from mcutrain.quant.qparams import (
    EmaRange,
    QParams,
    per_channel_symmetric,
    qparams_from_range,
    quantize_bias,
)
from mcutrain.quant.rng import XorShift32
from mcutrain.quant.rounding import round_floor, round_half_away, round_mode, round_stochastic

__all__ = [
    "LOSS_FRAC_BITS", "PROB_FRAC_BITS", "EmaRange", "QParams", "XorShift32", "activation_range",
    "add_multipliers", "int_softmax_cross_entropy", "output_multiplier", "per_channel_symmetric",
    "qparams_from_range", "quantize_bias", "quantize_multiplier", "requantize", "requantize_output",
    "round_floor", "round_half_away", "round_mode", "round_stochastic", "rounding_divide",
    "rounding_shift_right",
]
