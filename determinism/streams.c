/* Host-side uses of the named streams: the per-epoch data-order permutation and the test
 * hook's forced combination orders. */
#include "determinism/streams.h"

void dt_shuffle_permutation(int64_t *perm, int64_t n, uint64_t key)
{
    for (int64_t i = 0; i < n; i++) perm[i] = i;
    /* Draw j for i = n-1 .. 1 with stream index i: the draw count depends only on n. */
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)dt_stream_below(key, (uint64_t)i, (uint64_t)(i + 1));
        int64_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
}

void dt_forced_permutation(int64_t *perm, int64_t n, uint64_t seed, uint64_t salt)
{
    dt_shuffle_permutation(perm, n, dt_mix64(seed ^ dt_mix64(salt)));
}
