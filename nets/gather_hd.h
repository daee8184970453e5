/* A training batch gathered from a resident dataset (nets/backend.h, dt_backend_gather):
 * the per-element rule shared by the host (harness/setup/data.c's conversion, the CPU backend)
 * and the CUDA gather kernel (nets/cuda/gather.cu), so a batch gathered on the device has
 * the bits of the host's. Tests: tests/test_data.c (the conversion is the correctly
 * rounded quotient for every byte; host emulation of the kernel against the host batch). */
#ifndef DT_GATHER_HD_H
#define DT_GATHER_HD_H

#include <stdint.h>

#include "core/hd.h"

/* A pixel byte as the network sees it: byte / 255, one IEEE division (correctly rounded:
 * CUDA's `/` on floats is, without fast-math). Not byte * (1 / 255): that differs. */
static inline DT_HD float dt_pixel_value(uint8_t byte) { return (float)byte / 255.0f; }

/* Element e of a gathered batch of rows of `dim` features: x[e] for e = b * dim + f is
 * feature f of example idx[b], which starts `stride` elements after example idx[b] - 1's
 * (stride = dim for images; 1 for a text's overlapping windows), from the pixel bytes
 * (pixels != NULL) or from the float values themselves. */
static inline DT_HD float dt_gather_elem(const uint8_t *pixels, const float *values,
                                         const int64_t *idx, int64_t dim, int64_t stride, int64_t e)
{
    const int64_t b = e / dim, f = e - b * dim;
    const int64_t src = idx[b] * stride + f;
    return pixels ? dt_pixel_value(pixels[src]) : values[src];
}

#endif
