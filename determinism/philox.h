/* Philox4x32-10 (Salmon, Moraes, Dror, Shaw, "Parallel Random Numbers: As Easy as 1, 2, 3",
 * SC11): a keyed bijection of a 128-bit counter, so every value is a pure function of
 * (key, counter) and can be recomputed in any order, on any device, from nothing. Integer
 * operations only: the same bits on every machine. Host C and CUDA device code.
 *
 * Epsilon counter layout (version 1; run.json records it as "philox_layout": 1).
 * The key is the run seed: key = (seed & 0xffffffff, seed >> 32). Element i of the epsilon
 * tensor `tensor` of Monte Carlo sample `sample` of ensemble member `member` at training
 * step `step` is word i % 4 of Philox(key, ctr) with
 *     ctr[0] = (i / 4) & 0xffffffff          element block, low half
 *     ctr[1] = (i / 4) >> 32                 element block, high half
 *     ctr[2] = step                          32 bits; 0 = the evaluation ensemble
 *     ctr[3] = tensor << 20 | member << 8 | sample   12 + 12 + 8 bits
 * The packing is a bijection from the field tuple to the counter (each field has its own
 * bits), so two distinct tuples never share a counter. Tensor id DT_PHILOX_TENSOR_LANES
 * (0xfff) is reserved for seeding the reversible generator's lanes (determinism/eps.h),
 * with the lane index in the block field. In cuRAND terms this is
 * curand_init(seed, subsequence = (uint64)ctr[3] << 32 | step, offset = 4 * block). */
#ifndef DT_PHILOX_H
#define DT_PHILOX_H

#include <stdint.h>

#include "core/hd.h"

#define DT_PHILOX_LAYOUT_VERSION 1
#define DT_PHILOX_MAX_TENSOR 0xffeu /* ids 0..0xffe are epsilon tensors */
#define DT_PHILOX_TENSOR_LANES 0xfffu
#define DT_PHILOX_MAX_MEMBER 0xfffu
#define DT_PHILOX_MAX_SAMPLE 0xffu

#define DT_PHILOX_M0 0xD2511F53u
#define DT_PHILOX_M1 0xCD9E8D57u
#define DT_PHILOX_W0 0x9E3779B9u /* key schedule: golden ratio */
#define DT_PHILOX_W1 0xBB67AE85u /* key schedule: sqrt(3) - 1 */

/* One round on the counter words held in scalars (no arrays: loops that call this stay
 * vectorisable across blocks). */
static inline DT_HDI void dt_philox__round(uint32_t *c0, uint32_t *c1, uint32_t *c2, uint32_t *c3,
                                           uint32_t k0, uint32_t k1)
{
    const uint64_t p0 = (uint64_t)DT_PHILOX_M0 * *c0;
    const uint64_t p1 = (uint64_t)DT_PHILOX_M1 * *c2;
    const uint32_t n0 = (uint32_t)(p1 >> 32) ^ *c1 ^ k0;
    const uint32_t n2 = (uint32_t)(p0 >> 32) ^ *c3 ^ k1;
    *c1 = (uint32_t)p1;
    *c3 = (uint32_t)p0;
    *c0 = n0;
    *c2 = n2;
}

/* Philox4x32-10 on counter words held in scalars, in place: 10 rounds, the key bumped by
 * the Weyl constants between rounds. */
static inline DT_HDI void dt_philox4x32_10_words(uint32_t *w0, uint32_t *w1, uint32_t *w2,
                                                 uint32_t *w3, uint32_t k0, uint32_t k1)
{
    uint32_t c0 = *w0, c1 = *w1, c2 = *w2, c3 = *w3;
    dt_philox__round(&c0, &c1, &c2, &c3, k0, k1);
    dt_philox__round(&c0, &c1, &c2, &c3, k0 + 1u * DT_PHILOX_W0, k1 + 1u * DT_PHILOX_W1);
    dt_philox__round(&c0, &c1, &c2, &c3, k0 + 2u * DT_PHILOX_W0, k1 + 2u * DT_PHILOX_W1);
    dt_philox__round(&c0, &c1, &c2, &c3, k0 + 3u * DT_PHILOX_W0, k1 + 3u * DT_PHILOX_W1);
    dt_philox__round(&c0, &c1, &c2, &c3, k0 + 4u * DT_PHILOX_W0, k1 + 4u * DT_PHILOX_W1);
    dt_philox__round(&c0, &c1, &c2, &c3, k0 + 5u * DT_PHILOX_W0, k1 + 5u * DT_PHILOX_W1);
    dt_philox__round(&c0, &c1, &c2, &c3, k0 + 6u * DT_PHILOX_W0, k1 + 6u * DT_PHILOX_W1);
    dt_philox__round(&c0, &c1, &c2, &c3, k0 + 7u * DT_PHILOX_W0, k1 + 7u * DT_PHILOX_W1);
    dt_philox__round(&c0, &c1, &c2, &c3, k0 + 8u * DT_PHILOX_W0, k1 + 8u * DT_PHILOX_W1);
    dt_philox__round(&c0, &c1, &c2, &c3, k0 + 9u * DT_PHILOX_W0, k1 + 9u * DT_PHILOX_W1);
    *w0 = c0;
    *w1 = c1;
    *w2 = c2;
    *w3 = c3;
}

/* out = Philox4x32-10(ctr, key). */
static inline DT_HDI void dt_philox4x32_10(uint32_t out[4], const uint32_t ctr[4],
                                           const uint32_t key[2])
{
    uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3];
    dt_philox4x32_10_words(&c0, &c1, &c2, &c3, key[0], key[1]);
    out[0] = c0;
    out[1] = c1;
    out[2] = c2;
    out[3] = c3;
}

/* The identity of one epsilon tensor draw (everything but the element index). */
struct dt_philox_stream {
    uint32_t key[2];
    uint32_t step;
    uint32_t word3; /* tensor << 20 | member << 8 | sample */
};

/* Fields must be in range (tensor <= 0xfff, member <= 0xfff, sample <= 0xff); callers
 * check at configuration time (dt_philox_fields_ok). */
static inline DT_HDI struct dt_philox_stream dt_philox_stream_make(uint64_t seed, uint32_t step,
                                                                   uint32_t tensor, uint32_t member,
                                                                   uint32_t sample)
{
    struct dt_philox_stream s;
    s.key[0] = (uint32_t)seed;
    s.key[1] = (uint32_t)(seed >> 32);
    s.step = step;
    s.word3 = tensor << 20 | member << 8 | sample;
    return s;
}

static inline DT_HDI int dt_philox_fields_ok(uint64_t tensor, uint64_t member, uint64_t sample)
{
    return tensor <= DT_PHILOX_TENSOR_LANES && member <= DT_PHILOX_MAX_MEMBER &&
           sample <= DT_PHILOX_MAX_SAMPLE;
}

/* The four words of element block `block` (elements 4*block .. 4*block+3). */
static inline DT_HDI void dt_philox_block(uint32_t out[4], const struct dt_philox_stream *s,
                                          uint64_t block)
{
    uint32_t ctr[4] = {(uint32_t)block, (uint32_t)(block >> 32), s->step, s->word3};
    dt_philox4x32_10(out, ctr, s->key);
}

#endif
