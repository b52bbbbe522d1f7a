/*
 * mcutrain runtime: the build options a model fixes (docs/c-api.md, "Build options").
 *
 * MT_ROUNDING_TFLITE selects the rounding of every forward requantization (mt_fixedpoint.h;
 * docs/integer-semantics.md 6.1.1):
 *   0  "single": one rounding of the exact product, half away from zero (mcutrain's default)
 *   1  "tflite": TFLite's MultiplyByQuantizedMultiplier (two roundings), TFLite's ADD and MEAN;
 *      what a model imported from a .tflite file computes on TensorFlow Lite Micro
 * The package's copy of this file is the single-rounding default; an exported library of a
 * "tflite" model ships a copy that defines it to 1 outright, so its runtime cannot be built in
 * the other mode by mistake (a -D of another value is a redefinition error under -Werror).
 */
#ifndef MT_CONFIG_H
#define MT_CONFIG_H

#ifndef MT_ROUNDING_TFLITE
#define MT_ROUNDING_TFLITE 0
#endif /* MT_ROUNDING_TFLITE */

#endif /* MT_CONFIG_H */
