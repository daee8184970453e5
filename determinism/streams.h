/* Named random streams: seed -> replica -> purpose -> step -> layer (docs/DESIGN.md).
 * A counter-based mixer (splitmix64 finalizer) derives a 64-bit key per stream; values
 * are a pure function of (key, index), so any draw can be recomputed in any order, on any
 * device. Only integer operations and exact float scaling: portable bits. */
#ifndef DT_STREAMS_H
#define DT_STREAMS_H

#include <stdint.h>

#include "core/hd.h"

#ifdef __cplusplus
extern "C" { /* the CUDA backend's .cu files call these */
#endif

/* What a stream is for. Values are part of every stream's identity: append, never
 * renumber. */
enum dt_purpose {
    DT_PURPOSE_INIT = 1,       /* initial weights */
    DT_PURPOSE_DATA_ORDER = 2, /* per-epoch shuffle */
    DT_PURPOSE_SAMPLE = 3,     /* a language model's generated text (nets/gpt.c) */
};

/* splitmix64's finalizer: a bijection on 64-bit words with full avalanche. */
static inline DT_HD uint64_t dt_mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Key of the stream (seed, replica, purpose, step, layer). Each field is absorbed by a
 * separate mixing round, so streams that differ in any field are unrelated. */
static inline DT_HD uint64_t dt_stream_key(uint64_t seed, uint64_t replica, uint64_t purpose,
                                           uint64_t step, uint64_t layer)
{
    uint64_t k = dt_mix64(seed ^ 0x6a09e667f3bcc908ULL);
    k = dt_mix64(k ^ (replica + 0x9e3779b97f4a7c15ULL));
    k = dt_mix64(k ^ (purpose + 0xbb67ae8584caa73bULL));
    k = dt_mix64(k ^ (step + 0x3c6ef372fe94f82bULL));
    k = dt_mix64(k ^ (layer + 0xa54ff53a5f1d36f1ULL));
    return k;
}

/* The i-th 64-bit value of a stream (splitmix64 at position i). */
static inline DT_HD uint64_t dt_stream_u64(uint64_t key, uint64_t i)
{
    return dt_mix64(key + (i + 1) * 0x9e3779b97f4a7c15ULL);
}

/* The i-th uniform float in (0, 1): top 24 bits as (k + 0.5) * 2^-24, exact in float. */
static inline DT_HD float dt_stream_uniform(uint64_t key, uint64_t i)
{
    uint32_t k = (uint32_t)(dt_stream_u64(key, i) >> 40);
    return ((float)k + 0.5f) * 0x1p-24f;
}

/* Uniform integer in [0, n) by multiply-high (bias < n / 2^64). */
static inline uint64_t dt_stream_below(uint64_t key, uint64_t i, uint64_t n)
{
    return (uint64_t)(((unsigned __int128)dt_stream_u64(key, i) * n) >> 64);
}

/* Which replica index a purpose sees: the replica's own when `vary` lists the purpose,
 * 0 otherwise, so replicas share every source that is not varied. */
static inline uint64_t dt_stream_replica(unsigned vary_flags, unsigned purpose_flag,
                                         uint64_t replica)
{
    return (vary_flags & purpose_flag) ? replica : 0;
}

/* Fill perm[0..n) with a uniformly random permutation of 0..n-1 (Fisher-Yates driven by
 * the stream `key`); the result depends only on (key, n). */
void dt_shuffle_permutation(int64_t *perm, int64_t n, uint64_t key);

/* The forced combination order of the test hook (backend.h, set_forced_order): a
 * permutation of [0, n) drawn from the hook's seed and a salt naming the op family that
 * uses it (DT_FORCED_*). Both backends draw it here, so a forced order on the GPU is the
 * CPU's order and the tests can emulate either side on the host. */
enum dt_forced_salt {
    DT_FORCED_CHUNKS = 1,    /* dense weight gradient: the order of the batch chunks */
    DT_FORCED_ROWS = 2,      /* bias gradient: the order of the batch rows */
    DT_FORCED_SUMMANDS = 3,  /* loss: its chunks; conv backward-data: the scattered rows */
    DT_FORCED_POSITIONS = 4, /* max-pool backward: the order of the output positions */
};
void dt_forced_permutation(int64_t *perm, int64_t n, uint64_t seed, uint64_t salt);

#ifdef __cplusplus
}
#endif

#endif
