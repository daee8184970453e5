/* The tensors' tree digests on the CUDA backend (core/tree_hash.h): the host function beside
 * its kernels, every digest from the header's DT_HD SHA-256 -- one thread per leaf, then one
 * per node of each level, then one per tensor -- so the weights never leave the device and
 * only the 32-byte digests are read back (by the caller). The CPU backend's digests are the
 * same by definition (OpenSSL there); tests/test_tree_hash.c emulates these kernels on the
 * host and, on a GPU, compares the two backends. NOT yet run on a GPU. Beside them, the
 * hashing pipeline's snapshot copy in one launch (gather_words_kernel). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/tree_hash.h"
#include "nets/cuda/cuda.h"
#include "nets/cuda/launch.cuh"

/* Leaf i of all tensors' level 0 (ptrs, bytes: the tensors; off0: the plan's level 0). */
static __global__ void __launch_bounds__(1024)
    leaf_kernel(uint8_t *out, const int64_t *ptrs, const int64_t *bytes, const int64_t *off0, int n,
                int64_t total)
{
    DT_GRID_STRIDE(i, total)
    {
        int t = 0;
        while (t + 1 < n && off0[t + 1] <= i) t++;
        dt_tree_leaf(out + i * 32, (const uint8_t *)(uintptr_t)ptrs[t], (uint64_t)bytes[t],
                     i - off0[t]);
    }
}

/* Level l + 1 from level l: dt_tree_step per digest. */
static __global__ void __launch_bounds__(1024)
    step_kernel(uint8_t *out, const uint8_t *in, const int64_t *count_l, const int64_t *off_l,
                const int64_t *off_next, int n, int64_t total)
{
    DT_GRID_STRIDE(i, total) { dt_tree_step(out, in, count_l, off_l, off_next, n, i); }
}

static __global__ void __launch_bounds__(1024)
    tensor_kernel(uint8_t *digests, const uint8_t *top, const int64_t *bytes,
                  const int64_t *off_top, int n)
{
    DT_GRID_STRIDE(t, n)
    {
        dt_tree_tensor(digests + t * 32, (uint64_t)bytes[t], top + off_top[t] * 32);
    }
}

/* The tree digest's work (nets/cuda/work.h): SHA-256 compressions of a message of len bytes
 * (padding: 0x80 and the 8-byte length). */
static double sha256_blocks(int64_t len) { return (double)((len + 9 + 63) / 64); }
/* leaf_kernel: every tensor's bytes read, a digest a leaf written; a thread a leaf, its
 * compressions one dependent chain (the longest leaf's: serial). */
static struct dt_op_cost leaf_work(const int64_t *counts, int n)
{
    double data = 0.0, leaves = 0.0, blocks = 0.0, longest = 0.0;
    for (int t = 0; t < n; t++) {
        const int64_t bytes = counts[t] * 4, full = bytes / DT_TREE_LEAF_BYTES;
        const int64_t rest = bytes - full * DT_TREE_LEAF_BYTES;
        data += (double)bytes;
        leaves += (double)dt_tree_leaves((uint64_t)bytes);
        blocks += (double)full * sha256_blocks(1 + DT_TREE_LEAF_BYTES);
        if (rest > 0 || bytes == 0) blocks += sha256_blocks(1 + rest);
        if (counts[t] > 0) {
            const double b =
                sha256_blocks(1 + (bytes < DT_TREE_LEAF_BYTES ? bytes : DT_TREE_LEAF_BYTES));
            longest = b > longest ? b : longest;
        }
    }
    return dt_work_serial(data + 32.0 * leaves, DT_W_OPS_SHA256_BLOCK * blocks,
                          DT_W_OPS_SHA256_BLOCK * (longest > 0 ? longest : 1.0));
}
/* step_kernel at level l of the plan: the level's digests read, the next level's written; a
 * node hashes up to DT_TREE_ARITY children, a tensor's top is carried up (a copy). */
static struct dt_op_cost level_work(const struct dt_tree_plan *plan, int l)
{
    double blocks = 0.0;
    for (int t = 0; t < plan->n; t++) {
        const int64_t below = plan->count[l][t], nodes = plan->count[l + 1][t];
        if (below == 1) continue;
        const int64_t last = below - (nodes - 1) * DT_TREE_ARITY;
        blocks += (double)(nodes - 1) * sha256_blocks(1 + 32 * DT_TREE_ARITY) +
                  sha256_blocks(1 + 32 * last);
    }
    const double in = (double)plan->count[l][plan->n], next = (double)plan->count[l + 1][plan->n];
    return dt_work_serial(32.0 * (in + next), DT_W_OPS_SHA256_BLOCK * blocks,
                          DT_W_OPS_SHA256_BLOCK * sha256_blocks(1 + 32 * DT_TREE_ARITY));
}

/* portable: a fixed function of the tensors' bytes. The plan and the tensors' addresses go
 * up through pinned scratch without a wait, and only when they changed: a hashing pipeline
 * calls again before the previous call's copy up ran, and the pinned bytes it would rewrite
 * are then the same (same tensors, same plan) -- kept, not rewritten. When they differ, the
 * previous copy up is waited for first (c->digest_plan_up), so pinned memory is never
 * rewritten under a pending copy. */
extern "C" enum dt_status dt_cuda_tensor_digests(struct dt_backend *be, uint8_t *digests,
                                                 const float *const *tensors, const int64_t *counts,
                                                 int n, const struct dt_policy *pol)
{
    struct dt_cuda_ctx *c = dt_cuda(be);
    const struct dt_cuda_launch *L = &c->launch;
    const cudaStream_t st = (cudaStream_t)L->stream;
    const size_t plan_words = (size_t)(2 * (DT_TREE_MAX_LEVELS + 1) * (n + 1));
    const size_t words = 2 * (size_t)n + plan_words;
    int64_t *want = (int64_t *)calloc(words, 8);
    if (!want) return dt_backend_op_error(be, DT_ERR_INTERNAL, "tensor_digests: out of memory");
    int64_t *ptrs = want, *bytes = want + n;
    for (int t = 0; t < n; t++) ptrs[t] = (int64_t)(uintptr_t)tensors[t], bytes[t] = counts[t] * 4;
    struct dt_tree_plan plan;
    if (!dt_tree_plan_make(&plan, (const uint64_t *)bytes, n, want + 2 * n)) {
        free(want);
        return dt_backend_op_error(be, DT_ERR_UNSUPPORTED,
                                   "a tensor too large for the tree digest");
    }
    const int64_t total = plan.count[0][n];
    char *dev =
        (char *)dt_cuda_scratch(be, DT_CUDA_SLOT_DIGESTS, words * 8 + (size_t)total * 64 + 256);
    int64_t *dtab = (int64_t *)dev;
    const bool same = c->digest_plan_dev == (void *)dev && c->digest_plan_words == words &&
                      memcmp(c->host_scratch[DT_CUDA_SLOT_DIGESTS], want, words * 8) == 0;
    if (dt_cuda_recording(be)) { /* no plan to copy up: a host-to-device copy, no launch */
    } else if (same) {           /* copied up on another stream, maybe (the pipeline's): after it */
        DT_CUDA_CHECK(cudaStreamWaitEvent(st, (cudaEvent_t)c->digest_plan_up, 0));
    } else {
        if (!c->digest_plan_up)
            DT_CUDA_CHECK(cudaEventCreateWithFlags((cudaEvent_t *)&c->digest_plan_up,
                                                   cudaEventDisableTiming));
        else DT_CUDA_CHECK(cudaEventSynchronize((cudaEvent_t)c->digest_plan_up));
        int64_t *host = (int64_t *)dt_cuda_host_scratch(be, DT_CUDA_SLOT_DIGESTS, words * 8);
        memcpy(host, want, words * 8);
        cudaError_t e = cudaMemcpyAsync(dtab, host, words * 8, cudaMemcpyHostToDevice, st);
        if (e == cudaSuccess) e = cudaEventRecord((cudaEvent_t)c->digest_plan_up, st);
        if (e != cudaSuccess) {
            free(want);
            c->digest_plan_dev = NULL;
            return dt_cuda_launched(be, (int)e, "tensor_digests");
        }
        c->digest_plan_dev = dev;
        c->digest_plan_words = words;
    }
    /* the plan's pointers, rebased from `want` (the same layout as the uploaded table) */
    int64_t *host = want;
    uint8_t *a = (uint8_t *)(dev + (words * 8 + 255) / 256 * 256), *b = a + (size_t)total * 32;
    /* the plan's arrays on the device: the same offsets from dtab as from host */
#define DEV(p) (dtab + ((p)-host))
    DT_LAUNCH(L, leaf_work(counts, n), leaf_kernel, dt_cuda_grid(L, total), L->block_threads, 0, st)
    (a, DEV(ptrs), DEV(bytes), DEV(plan.off[0]), n, total);
    for (int l = 0; l < plan.levels; l++) {
        DT_LAUNCH(L, level_work(&plan, l), step_kernel, dt_cuda_grid(L, plan.count[l + 1][n]),
                  L->block_threads, 0, st)
        (b, a, DEV(plan.count[l]), DEV(plan.off[l]), DEV(plan.off[l + 1]), n, plan.count[l + 1][n]);
        uint8_t *swap = a;
        a = b, b = swap;
    }
    /* a thread a tensor: its length and top digest hashed once */
    DT_LAUNCH(L,
              dt_work_serial(64.0 * (double)n,
                             DT_W_OPS_SHA256_BLOCK * sha256_blocks(9 + 32) * (double)n,
                             DT_W_OPS_SHA256_BLOCK * sha256_blocks(9 + 32)),
              tensor_kernel, dt_cuda_grid(L, n), L->block_threads, 0, st)
    (digests, a, DEV(bytes), DEV(plan.off[plan.levels]), n);
#undef DEV
    free(want);
    return dt_cuda_launched(be, DT_LAUNCHED(L), "tensor_digests");
}

/* ---- the hashing pipeline's snapshot in one launch (backend_cuda.c, snapshot) ---------
 * Word i of the concatenation: tensor t, the last whose first word off[t] <= i (an empty
 * tensor shares its offset with the next and is never chosen), word i - off[t] of it. */
static __global__ void __launch_bounds__(1024)
    gather_words_kernel(uint32_t *dst, const int64_t *off, const int64_t *src, int n, int64_t total)
{
    DT_GRID_STRIDE(i, total)
    {
        int lo = 0, hi = n - 1;
        while (lo < hi) {
            const int mid = (lo + hi + 1) / 2;
            if (off[mid] <= i) lo = mid;
            else hi = mid - 1;
        }
        dst[i] = ((const uint32_t *)(uintptr_t)src[lo])[i - off[lo]];
    }
}

extern "C" int dt_cuda_gather_words(uint32_t *dst, const int64_t *table, int n, int64_t total,
                                    const struct dt_cuda_launch *L)
{
    DT_LAUNCH(L, dt_work(8.0 * (double)total, 0.0), gather_words_kernel, dt_cuda_grid(L, total),
              L->block_threads, 0, L->stream)
    (dst, table, table + n + 1, n, total);
    return DT_LAUNCHED(L);
}
