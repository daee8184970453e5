/* The tensors' tree digests on the CPU backend (core/tree_hash.h): the leaves across the
 * thread pool, each through OpenSSL's SHA-256 (SHA-NI where the CPU has it), then the
 * levels and the tensor digests on the calling thread (core/tree_hash_host.c) -- the digests the
 * CUDA kernels give from the header's own SHA-256 (tests/test_tree_hash.c holds the two to
 * each other). */
#include <stdlib.h>

#include "core/tree_hash_host.h"
#include "core/util.h"
#include "nets/cpu/cpu.h"

struct digest_job {
    const float *const *tensors;
    const uint64_t *bytes;
    const struct dt_tree_plan *plan;
    uint8_t *leaves; /* level 0: total x 32 bytes */
};

/* Leaves [begin, end) of every tensor's level 0, a tensor's run at a time. */
static void leaves_part(void *ctx, int64_t begin, int64_t end, int worker)
{
    const struct digest_job *j = ctx;
    const struct dt_tree_plan *p = j->plan;
    int t = 0;
    for (int64_t i = begin; i < end;) {
        while (t + 1 < p->n && p->off[0][t + 1] <= i) t++;
        const int64_t stop = p->off[0][t + 1] < end ? p->off[0][t + 1] : end;
        dt_tree_leaves_host(j->leaves + i * 32, j->tensors[t], j->bytes[t], i - p->off[0][t],
                            stop - p->off[0][t]);
        i = stop;
    }
}

/* portable: a fixed function of the tensors' bytes at every policy and thread count. */
enum dt_status dt_cpu_tensor_digests(struct dt_backend *be, uint8_t *digests,
                                     const float *const *tensors, const int64_t *counts, int n,
                                     const struct dt_policy *pol)
{
#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the canonical bytes are the in-memory ones on little-endian hosts only"
#endif
    uint64_t *bytes = dt_xmalloc((size_t)n * sizeof *bytes);
    for (int t = 0; t < n; t++) bytes[t] = (uint64_t)counts[t] * 4;
    int64_t *storage = dt_xmalloc((size_t)(2 * (DT_TREE_MAX_LEVELS + 1) * (n + 1)) * 8);
    struct dt_tree_plan plan;
    if (!dt_tree_plan_make(&plan, bytes, n, storage)) {
        free(bytes), free(storage);
        return dt_backend_op_error(be, DT_ERR_UNSUPPORTED,
                                   "a tensor too large for the tree digest");
    }
    const int64_t total = plan.count[0][n];
    uint8_t *a = dt_xmalloc((size_t)total * 32), *b = dt_xmalloc((size_t)total * 32);
    struct digest_job j = {.tensors = tensors, .bytes = bytes, .plan = &plan, .leaves = a};
    dt_pool_run(dt_cpu(be)->pool, total, 4, leaves_part, &j);
    dt_tree_finish_host(digests, &plan, bytes, a, b);
    free(a), free(b), free(bytes), free(storage);
    return DT_OK;
}
