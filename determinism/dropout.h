/* Dropout masks (the GPT's model.dropout) under the `rng` control: which elements of an
 * activation are kept, so that every backend, thread count and rank count keeps the same
 * ones. Host C and CUDA device.
 *
 * A site is one dropout point of a training step's forward (site 0: the embedding's sum;
 * site 1 + 2 l: block l's attention output projection, site 2 + 2 l: its MLP output, each
 * before its residual add), over a (rows, width) activation whose row r is GLOBAL: the row
 * of the step's whole batch (window b of the global batch, position t: r = b T + t), not of
 * a rank's or a shard's part. Element (r, c) gets a 32-bit uniform u, is kept when
 * u >= threshold (threshold = p 2^32 rounded, so the keep rate is exactly 1 - threshold /
 * 2^32), and a kept value is multiplied by scale = 1 / (1 - p) rounded to float.
 *
 * philox: u is word e % 4 of block e / 4 of the Philox stream (run seed, step, tensor
 * DT_PHILOX_TENSOR_DROPOUT + site, member, sample 0), e = r width + c
 * (determinism/philox.h). Any tiling, any order.
 *
 * lfsr (reversible, nothing stored; and stored, which draws with its forward walk and keeps
 * each element's keep bit as a byte -- the cheaper generator of the two on a CPU, so the
 * `fast` level's rng: stored is the fastest mask): one xoroshiro128** lane per global row, seeded
 * per step by dt_eps_lane_seed(seed, step, member, DT_DROPOUT_LANE_SAMPLE, r) (the epsilon lanes'
 * seeding, determinism/eps.h). Going forwards, at each site in site order the lane takes ceil(width
 * / 2) steps: step k's output w gives u = w >> 32 to column 2k and u = w & 0xffffffff to column 2k
 * + 1 (if inside). Backward visits the sites in reverse order and walks each back (dt_xoro_prev,
 * then the output), rebuilding the same u; after site 0 every lane is at its seed state again (the
 * invariant the model checks). Rows, not chunks of a tensor, are the lanes: a rank holding rows
 * [r0, r1) holds exactly their lanes, so the masks do not depend on how rows are split. */
#ifndef DT_DROPOUT_H
#define DT_DROPOUT_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/hd.h"
#include "determinism/eps.h"
#include "determinism/philox.h"
#include "determinism/xoroshiro.h"

#define DT_PHILOX_TENSOR_DROPOUT 0xe00u /* tensor ids 0xe00 + site */
#define DT_DROPOUT_MAX_SITES 0x1ffu
#define DT_DROPOUT_LANE_SAMPLE 0xffu /* the lanes' sample field (a BNN trains on 0..254) */

/* A site of probability p in [0, 1): its threshold (p 2^32 rounded, exact in double) and
 * scale (1 / (1 - p) rounded once to float). */
static inline void dt_dropout_rate(double p, uint32_t *threshold, float *scale)
{
    const double t = nearbyint(p * 4294967296.0);
    *threshold = t >= 4294967295.0 ? 0xffffffffu : (uint32_t)t;
    *scale = (float)(1.0 / (1.0 - p));
}

/* keep = u >= threshold; a kept x becomes x * scale, a dropped one +0. */
static inline DT_HDI bool dt_dropout_keeps(uint32_t u, uint32_t threshold)
{
    return u >= threshold;
}
static inline DT_HDI float dt_dropout_apply(float x, bool keep, float scale)
{
    return keep ? dt_rn_mul(x, scale) : 0.0f;
}

/* The philox site stream. */
static inline DT_HD struct dt_philox_stream dt_dropout_stream(uint64_t seed, uint32_t step,
                                                              uint32_t site, uint32_t member)
{
    return dt_philox_stream_make(seed, step, DT_PHILOX_TENSOR_DROPOUT + site, member, 0);
}

/* Philox block q's four elements, e = 4 q + k, those in [e0, e0 + n): y[e - e0] = dropout of
 * x[e - e0] by word k of the block. y may alias x. The CUDA kernel runs it a thread a block
 * (nets/cuda/activation.cu); dt_dropout_philox_range, block after block. */
static inline DT_HD void dt_dropout_philox_block(float *y, const float *x, int64_t e0, int64_t n,
                                                 uint64_t q, const struct dt_philox_stream *s,
                                                 uint32_t threshold, float scale)
{
    uint32_t w[4];
    dt_philox_block(w, s, q);
    for (int k = 0; k < 4; k++) {
        const int64_t i = (int64_t)(4 * q + (uint64_t)k) - e0;
        if (i >= 0 && i < n)
            y[i] = dt_dropout_apply(x[i], dt_dropout_keeps(w[k], threshold), scale);
    }
}

/* The philox blocks that global elements [e0, e0 + n) touch: q0 .. q0 + count - 1. */
static inline DT_HD uint64_t dt_dropout_philox_blocks(int64_t e0, int64_t n, uint64_t *q0)
{
    *q0 = (uint64_t)e0 >> 2;
    return n > 0 ? (((uint64_t)(e0 + n - 1) >> 2) - *q0 + 1) : 0;
}

/* y[i] = dropout of x[i] for global elements e0 + i, i in [0, n) (philox). y may alias x. */
static inline DT_HD void dt_dropout_philox_range(float *y, const float *x, int64_t e0, int64_t n,
                                                 const struct dt_philox_stream *s,
                                                 uint32_t threshold, float scale)
{
    uint64_t q0;
    const uint64_t count = dt_dropout_philox_blocks(e0, n, &q0);
    for (uint64_t j = 0; j < count; j++)
        dt_dropout_philox_block(y, x, e0, n, q0 + j, s, threshold, scale);
}

/* The CUDA kernel walks a row's lane a tile of this many columns at a time (even: a tile
 * pairs its columns as the whole row does; nets/cuda/activation.cu, dropout_lane_tiled_kernel). */
#define DT_DROPOUT_TILE_COLS 32

/* A row's lane walk over one site of `width` columns: forwards (output, then step; keep,
 * when not NULL, gets each element's keep bit as a byte) or backwards (step back, then
 * output, last pair first). y may alias x. */
static inline DT_HD void dt_dropout_lane_forward(float *y, const float *x, uint8_t *keep,
                                                 int64_t width, struct dt_xoro *st,
                                                 uint32_t threshold, float scale)
{
    struct dt_xoro s = *st;
    for (int64_t c = 0; c < width; c += 2) {
        const uint64_t w = dt_xoro_out(s);
        dt_xoro_next(&s);
        const bool k0 = dt_dropout_keeps((uint32_t)(w >> 32), threshold);
        y[c] = dt_dropout_apply(x[c], k0, scale);
        if (keep) keep[c] = (uint8_t)k0;
        if (c + 1 < width) {
            const bool k1 = dt_dropout_keeps((uint32_t)w, threshold);
            y[c + 1] = dt_dropout_apply(x[c + 1], k1, scale);
            if (keep) keep[c + 1] = (uint8_t)k1;
        }
    }
    *st = s;
}
static inline DT_HD void dt_dropout_lane_backward(float *y, const float *x, int64_t width,
                                                  struct dt_xoro *st, uint32_t threshold,
                                                  float scale)
{
    struct dt_xoro s = *st;
    for (int64_t c = (width - 1) / 2 * 2; c >= 0; c -= 2) {
        dt_xoro_prev(&s);
        const uint64_t w = dt_xoro_out(s);
        y[c] = dt_dropout_apply(x[c], dt_dropout_keeps((uint32_t)(w >> 32), threshold), scale);
        if (c + 1 < width)
            y[c + 1] = dt_dropout_apply(x[c + 1], dt_dropout_keeps((uint32_t)w, threshold), scale);
    }
    *st = s;
}

/* Global row r's lane seed for a step. */
static inline DT_HD struct dt_xoro dt_dropout_lane_seed(uint64_t seed, uint32_t step,
                                                        uint32_t member, uint64_t r)
{
    return dt_eps_lane_seed(seed, step, member, DT_DROPOUT_LANE_SAMPLE, r);
}

#endif
