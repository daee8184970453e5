/* The training batches of a replica or a benchmark, step after step: the example order
 * (a permutation of the training split per epoch, from the data_order stream) and the rows
 * themselves -- gathered by the backend from the split resident in its memory where it
 * keeps one (nets/backend.h: no batch upload from pageable memory in a step), else copied
 * from the host split. Data path (docs/DESIGN.md): harness/data -> here -> harness/train. */
#ifndef DT_BATCHES_H
#define DT_BATCHES_H

#include <stdint.h>

#include "harness/setup/data.h"
#include "nets/backend.h"
#include "nets/model.h"

/* The example indices of the batch of step index s (0-based), B of them: positions s * B
 * .. s * B + B - 1 of the endless stream of examples, each epoch of n examples in the
 * order of its permutation. `perm` (n entries) and `perm_epoch` (-1 at first) cache the
 * current epoch's permutation. */
void dt_batch_indices(int64_t *idx, int64_t n, int64_t s, int64_t B, uint64_t seed,
                      uint64_t order_replica, int64_t *perm, int64_t *perm_epoch);

struct dt_batch_stream {
    const struct dt_split *split;
    const struct dt_resident *set; /* or NULL: host rows in x, y */
    int64_t B;
    uint64_t seed, order_replica;
    int64_t *perm, perm_epoch, *idx;
    float *x;
    uint8_t *y;
};
void dt_batch_stream_init(struct dt_batch_stream *bs, const struct dt_split *split,
                          const struct dt_resident *set, int64_t B, uint64_t seed,
                          uint64_t order_replica);
void dt_batch_stream_free(struct dt_batch_stream *bs);
/* The batch of step index s (0-based); valid until the next call. */
struct dt_batch dt_batch_stream_at(struct dt_batch_stream *bs, int64_t s);

/* The training split resident on be (NULL when be keeps none): free it with
 * dt_backend_resident_free before the dataset and the backend go. */
struct dt_resident *dt_batch_resident(struct dt_backend *be, const struct dt_split *split);

#endif
