/* The example order and the training batches (harness/run/batches.h). */
#include "harness/run/batches.h"

#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "determinism/streams.h"

void dt_batch_indices(int64_t *idx, int64_t n, int64_t s, int64_t B, uint64_t seed,
                      uint64_t order_replica, int64_t *perm, int64_t *perm_epoch)
{
    for (int64_t i = 0; i < B; i++) {
        int64_t pos = s * B + i; /* position in the endless stream of examples */
        int64_t epoch = pos / n;
        if (epoch != *perm_epoch) {
            uint64_t key =
                dt_stream_key(seed, order_replica, DT_PURPOSE_DATA_ORDER, (uint64_t)epoch, 0);
            dt_shuffle_permutation(perm, n, key);
            *perm_epoch = epoch;
        }
        idx[i] = perm[pos % n];
    }
}

void dt_batch_stream_init(struct dt_batch_stream *bs, const struct dt_split *split,
                          const struct dt_resident *set, int64_t B, uint64_t seed,
                          uint64_t order_replica)
{
    memset(bs, 0, sizeof *bs);
    bs->split = split, bs->set = set, bs->B = B, bs->seed = seed;
    bs->order_replica = order_replica;
    bs->perm = dt_xmalloc((size_t)split->n * sizeof *bs->perm);
    bs->perm_epoch = -1;
    bs->idx = dt_xmalloc((size_t)B * sizeof *bs->idx);
    if (!set) {
        bs->x = dt_xmalloc((size_t)(B * split->dim) * sizeof *bs->x);
        bs->y = dt_xmalloc((size_t)B);
    }
}

void dt_batch_stream_free(struct dt_batch_stream *bs)
{
    free(bs->perm);
    free(bs->idx);
    free(bs->x);
    free(bs->y);
    memset(bs, 0, sizeof *bs);
}

struct dt_batch dt_batch_stream_at(struct dt_batch_stream *bs, int64_t s)
{
    const struct dt_split *sp = bs->split;
    dt_batch_indices(bs->idx, sp->n, s, bs->B, bs->seed, bs->order_replica, bs->perm,
                     &bs->perm_epoch);
    if (bs->set) return (struct dt_batch){.set = bs->set, .idx = bs->idx};
    for (int64_t i = 0; i < bs->B; i++) {
        memcpy(bs->x + i * sp->dim, dt_split_row(sp, bs->idx[i]), (size_t)sp->dim * sizeof(float));
        bs->y[i] = sp->y[bs->idx[i]];
    }
    return (struct dt_batch){.x = bs->x, .y = bs->y};
}

struct dt_resident *dt_batch_resident(struct dt_backend *be, const struct dt_split *split)
{
    const struct dt_resident_src src = {.n = split->n,
                                        .dim = split->dim,
                                        .stride = split->stride,
                                        .pixels = split->pixels,
                                        .values = split->x,
                                        .labels = split->y};
    return dt_backend_resident_create(be, &src);
}
