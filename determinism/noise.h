/* Activation noise of the Bayesian MLP's local reparameterisation estimator (model.estimator:
 * local; nets/bnn_mlp.c) under the `rng` control: the standard normals eps (rows, width) of a
 * layer's pre-activations, so that every backend, thread count, shard layout and rank count
 * draws the same. Host C and CUDA device.
 *
 * Layer l of Monte Carlo sample s over a (rows, width) activation whose row r is GLOBAL (the
 * row of the step's whole batch, not of a rank's or a shard's part):
 *
 * philox: element (r, c) is element e = r width + c of the Philox epsilon stream (run seed,
 * step, tensor DT_PHILOX_TENSOR_NOISE + l, member, sample s), drawn as determinism/eps.h
 * draws a tensor (word e % 4 of block e / 4, Box-Muller pairs of words (0, 1) and (2, 3)).
 * Any tiling, any order.
 *
 * lfsr (reversible, nothing stored; and stored, which draws with philox or, with
 * model.stored_generator: lfsr, with these lanes' forward walk and keeps the values): one
 * xoroshiro128** lane per (sample, global row), seeded per step as the dropout lanes are
 * (determinism/dropout.h, dt_dropout_lane_seed) at the lane row dt_noise_lane_row(s, r) =
 * s 2^32 + r -- a row number no dropout site reaches, and a model has either dropout or
 * this noise. Going forwards, at each layer in order the row's lane draws the layer's row as
 * a one-lane tensor of `width` elements (dt_eps_lane_forward: ceil(width / 2) steps, step
 * k's pair to columns 2k and 2k + 1); backward visits the layers in reverse and walks each
 * back (dt_eps_lane_backward), rebuilding the same values; after layer 0 every lane is at
 * its seed state again (the invariant the model checks). A rank holding rows [r0, r1) holds
 * exactly their lanes. */
#ifndef DT_NOISE_H
#define DT_NOISE_H

#include <stdbool.h>
#include <stdint.h>

#include "core/hd.h"
#include "determinism/dropout.h"
#include "determinism/eps.h"
#include "determinism/philox.h"
#include "determinism/xoroshiro.h"

#define DT_PHILOX_TENSOR_NOISE 0xd00u /* tensor ids 0xd00 + layer */
#define DT_NOISE_MAX_LAYERS 0x100

/* The philox stream of layer `layer` of sample `sample`. */
static inline DT_HD struct dt_philox_stream
dt_noise_stream(uint64_t seed, uint32_t step, uint32_t layer, uint32_t member, uint32_t sample)
{
    return dt_philox_stream_make(seed, step, DT_PHILOX_TENSOR_NOISE + layer, member, sample);
}

/* The lane row of (sample, global row r): the row dt_dropout_lane_seed seeds its lane for. */
static inline DT_HD uint64_t dt_noise_lane_row(uint32_t sample, int64_t r)
{
    return ((uint64_t)sample << 32) + (uint64_t)r;
}

/* The seed state of (sample, global row r)'s lane for a step. */
static inline DT_HD struct dt_xoro dt_noise_lane_seed(uint64_t seed, uint32_t step, uint32_t member,
                                                      uint32_t sample, int64_t r)
{
    return dt_dropout_lane_seed(seed, step, member, dt_noise_lane_row(sample, r));
}

/* z[0, width) = the philox noise of global row r. */
static inline DT_HD void dt_noise_philox_row(float *z, int64_t r, int64_t width,
                                             const struct dt_philox_stream *s)
{
    dt_eps_philox_range(z, r * width, (r + 1) * width, s);
}

/* z[0, width) = a row's lfsr noise: its lane walked forwards, or backwards (the same values;
 * the lane ends where the forward walk began). */
static inline DT_HD void dt_noise_lane_row_walk(float *z, int64_t width, struct dt_xoro *st,
                                                bool backward)
{
    if (backward) dt_eps_lane_backward(z, width, 1, 0, st);
    else dt_eps_lane_forward(z, width, 1, 0, st);
}

#endif
