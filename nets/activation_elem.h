/* The activations' per-element arithmetic, written once for every backend (the CPU ops in
 * nets/cpu/activation.c, the CUDA ops in nets/cuda/activation.cu, and the tests). Elementwise
 * and without rounding, so every policy, thread count and device gives the same bits. */
#ifndef DT_ACTIVATION_ELEM_H
#define DT_ACTIVATION_ELEM_H

#include "core/hd.h"

/* relu: x > 0 ? x : 0 (NaN gives 0: x > 0 is false for NaN; the NaN checks on losses and
 * weights catch it upstream). */
static inline DT_HD float dt_relu(float x) { return x > 0.0f ? x : 0.0f; }

/* relu's gradient from its output y: dy where y > 0, else 0 (the subgradient at 0 is 0). */
static inline DT_HD float dt_relu_grad(float y, float dy) { return y > 0.0f ? dy : 0.0f; }

#endif
