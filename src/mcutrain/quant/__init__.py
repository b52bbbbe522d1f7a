"""Integer primitives: quantization parameters, fixed-point requantization, rounding, xorshift32.

The normative definitions live in ``docs/integer-semantics.md``; these modules
are their executable form, and the C runtime mirrors them bit for bit.
"""
