/* Epsilon streams for Bayesian layers (the `rng` control): how a tensor's standard
 * normals are drawn by the counter-based generator (Philox) and by the reversible one
 * (xoroshiro128** lanes), so any backend produces the same bits. Host C and CUDA device.
 *
 * Philox (determinism/philox.h has the counter layout): element i of a tensor is word
 * i % 4 of counter block i / 4, and words (0, 1) and (2, 3) of a block are Box-Muller
 * pairs: elements 4b, 4b+1 come from words 0, 1 and 4b+2, 4b+3 from words 2, 3. A range
 * of elements can be filled in any order or tiling.
 *
 * Reversible lanes. P lanes (a run setting, part of the run's identity) each hold a
 * xoroshiro128** state, seeded per (run seed, step, member, sample) from Philox with the
 * reserved tensor id DT_PHILOX_TENSOR_LANES and the lane index as the block. A tensor of
 * n elements is split into P chunks of c = ceil(n / P) elements: lane j owns
 * [j c, min((j + 1) c, n)), possibly empty. Every lane draws the same d = c rounded up to
 * even normals, d / 2 generator steps, whatever its chunk holds: draw counts depend only on
 * (n, P). Step k of lane j gives the 64-bit output w and the pair
 * dt_gauss_pair(w >> 32, w & 0xffffffff) -> elements j c + 2k and j c + 2k + 1 (those past
 * the chunk are discarded). Tensors are drawn in model order going forwards, in reverse
 * order going backwards; the backward walk of a tensor steps back d / 2 times and rebuilds
 * the same pairs, last first. After the first tensor's backward walk every lane is back at
 * its seed state (the invariant the BNN model checks). */
#ifndef DT_EPS_H
#define DT_EPS_H

#include <stdint.h>

#include "core/hd.h"
#include "determinism/gaussian.h"
#include "determinism/philox.h"
#include "determinism/xoroshiro.h"

/* Fill eps[i - begin] for elements i in [begin, end) of the tensor drawn by stream s. */
static inline DT_HD void dt_eps_philox_range(float *eps, int64_t begin, int64_t end,
                                             const struct dt_philox_stream *s)
{
    int64_t i = begin;
    while (i < end) {
        uint64_t block = (uint64_t)i >> 2;
        uint32_t w[4];
        dt_philox_block(w, s, block);
        float z[4];
        dt_gauss_pair(w[0], w[1], &z[0], &z[1]);
        dt_gauss_pair(w[2], w[3], &z[2], &z[3]);
        int64_t first = (int64_t)(block << 2);
        for (int k = (int)(i - first); k < 4 && first + k < end; k++) eps[first + k - begin] = z[k];
        i = first + 4;
    }
}

/* The seed state of lane `lane` for (seed, step, member, sample). */
static inline DT_HD struct dt_xoro dt_eps_lane_seed(uint64_t seed, uint32_t step, uint32_t member,
                                                    uint32_t sample, uint64_t lane)
{
    struct dt_philox_stream s =
        dt_philox_stream_make(seed, step, DT_PHILOX_TENSOR_LANES, member, sample);
    uint32_t w[4];
    dt_philox_block(w, &s, lane);
    return dt_xoro_seed((uint64_t)w[1] << 32 | w[0], (uint64_t)w[3] << 32 | w[2]);
}

/* Chunk size c = ceil(n / P) and generator steps per lane d / 2 for a tensor of n. */
static inline DT_HD int64_t dt_eps_lane_chunk(int64_t n, int64_t lanes)
{
    return (n + lanes - 1) / lanes;
}
static inline DT_HD int64_t dt_eps_lane_steps(int64_t n, int64_t lanes)
{
    int64_t c = dt_eps_lane_chunk(n, lanes);
    return (c + (c & 1)) / 2;
}

/* Write one pair to the chunk [lo, hi) at element e (e and e + 1 if inside). */
static inline DT_HD void dt_eps__put(float *eps, int64_t e, int64_t hi, uint64_t w)
{
    float z0, z1;
    if (e >= hi) return;
    dt_gauss_pair((uint32_t)(w >> 32), (uint32_t)w, &z0, &z1);
    eps[e] = z0;
    if (e + 1 < hi) eps[e + 1] = z1;
}

/* Lane `lane`'s forward walk over a tensor of n elements (eps indexed by element). */
static inline DT_HD void dt_eps_lane_forward(float *eps, int64_t n, int64_t lanes, int64_t lane,
                                             struct dt_xoro *st)
{
    int64_t c = dt_eps_lane_chunk(n, lanes), steps = dt_eps_lane_steps(n, lanes);
    int64_t lo = lane * c, hi = lo + c < n ? lo + c : n;
    struct dt_xoro s = *st;
    for (int64_t k = 0; k < steps; k++) {
        uint64_t w = dt_xoro_out(s);
        dt_xoro_next(&s);
        dt_eps__put(eps, lo + 2 * k, hi, w);
    }
    *st = s;
}

/* Lane `lane`'s backward walk: the same values, last pair first; ends where the forward
 * walk began. */
static inline DT_HD void dt_eps_lane_backward(float *eps, int64_t n, int64_t lanes, int64_t lane,
                                              struct dt_xoro *st)
{
    int64_t c = dt_eps_lane_chunk(n, lanes), steps = dt_eps_lane_steps(n, lanes);
    int64_t lo = lane * c, hi = lo + c < n ? lo + c : n;
    struct dt_xoro s = *st;
    for (int64_t k = steps - 1; k >= 0; k--) {
        dt_xoro_prev(&s);
        dt_eps__put(eps, lo + 2 * k, hi, dt_xoro_out(s));
    }
    *st = s;
}

#endif
