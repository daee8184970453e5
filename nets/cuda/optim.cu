/* The optimizers on the CUDA backend, for every model (kernels and host functions): SGD
 * with momentum, AdamW, and clipping by the global norm -- the norm under `reduction`
 * (chunk sums by atomicAdd; chunks, the fixed tree and the tensors in order; exact int64 at
 * one shift) and one factor read on the device (no host round trip). Each element is the
 * CPU op's function (nets/optim_elem.h). No op here waits for the device (the forced-order
 * hook apart). */
#include <cuda_runtime_api.h>

#include "determinism/fixed_point.h"
#include "determinism/reduce.h"
#include "determinism/streams.h"
#include "nets/cuda/cuda.h"
#include "nets/cuda/dense_loss.h" /* struct dt_cuda_fixed_record */
#include "nets/cuda/launch.cuh"
#include "nets/optim_elem.h"

/* ---- kernels and their launchers ---------------------------------------------------------- */

/* The kernels:
 * SGD with momentum and AdamW, one element per thread, and clipping by the global norm -- its
 * chunk sums under `reduction` (atomicAdd in arrival order; chunks then the fixed tree;
 * exact int64) and one factor. Each element is the DT_HD function of nets/optim_elem.h that
 * the CPU op calls, so no result depends on the grid or block size; compiled with
 * --fmad=false. */

/* portable: the CPU's element function (nets/optim_elem.h), one element per thread. */
static __global__ void __launch_bounds__(1024)
    sgd_update_kernel(float *w, float *v, const float *g, int64_t n, float lr, float mom, float wd)
{
    DT_GRID_STRIDE(i, n) dt_sgd_elem(&w[i], &v[i], g[i], lr, mom, wd);
}

static __global__ void __launch_bounds__(1024)
    adamw_kernel(float *w, float *m, float *v, const float *g, int64_t n, struct dt_adamw_step st)
{
    DT_GRID_STRIDE(i, n)
    dt_adamw_elem(&w[i], &m[i], &v[i], g[i], &st);
}

static __global__ void __launch_bounds__(1024)
    clip_scale_kernel(float *g, int64_t n, const float *norm_sq, float max_norm)
{
    const float f = dt_clip_coef(*norm_sq, max_norm);
    if (f == 1.0f) return;
    DT_GRID_STRIDE(i, n)
    g[i] = dt_rn_mul(g[i], f);
}

/* ---- the clipping norm --------------------------------------------------------------------- */

static __global__ void __launch_bounds__(1024)
    norm_chunks_kernel(float *part, const float *g, int64_t n, int64_t chunk)
{
    DT_GRID_STRIDE(c, (n + chunk - 1) / chunk)
    {
        const int64_t e = (c + 1) * chunk < n ? (c + 1) * chunk : n;
        part[c] = dt_sq_sum(g, c * chunk, e);
    }
}

/* reduction: unordered -- the chunk sums added in whatever order they arrive: first a
 * thread's own chunks, then the block's threads into shared memory, then one float atomic a
 * block into dst. A float atomic a chunk, as before, queued 1.35 million atomics on one
 * address for the GPU-scale GPT's 10.8 M gradients: 2.56 ms, twice run_to_run's ordered
 * chunks and tree (results/nvidia-h200, gpt-gpu/bench.csv). */
static __global__ void __launch_bounds__(1024)
    norm_atomic_kernel(float *dst, const float *g, int64_t n, int64_t chunk)
{
    __shared__ float block_sum;
    if (threadIdx.x == 0) block_sum = 0.0f;
    __syncthreads();
    float mine = 0.0f;
    DT_GRID_STRIDE(c, (n + chunk - 1) / chunk)
    {
        const int64_t e = (c + 1) * chunk < n ? (c + 1) * chunk : n;
        mine = mine + dt_sq_sum(g, c * chunk, e);
    }
    atomicAdd(&block_sum, mine);
    __syncthreads();
    if (threadIdx.x == 0) atomicAdd(dst, block_sum);
}

/* reduction: pinned (run_to_run) -- no atomics, and no chunks and tree of its own: a
 * thread's chunk sums in order, the block's threads by a fixed pairwise tree in shared
 * memory (any block size), the block's partial into its own slot; then one thread adds
 * every tensor's slots in order (norm_slots_kernel). The bits follow the grid -- the
 * machine's launch settings, which run_to_run's promise fixes -- and the launches are
 * unordered's: one a tensor and one more. */
static __global__ void __launch_bounds__(1024)
    norm_blocks_kernel(float *slot, const float *g, int64_t n, int64_t chunk)
{
    extern __shared__ float part[]; /* blockDim.x */
    float mine = 0.0f;
    DT_GRID_STRIDE(c, (n + chunk - 1) / chunk)
    {
        const int64_t e = (c + 1) * chunk < n ? (c + 1) * chunk : n;
        mine = mine + dt_sq_sum(g, c * chunk, e);
    }
    part[threadIdx.x] = mine;
    __syncthreads();
    for (unsigned int w = 1; w < blockDim.x; w *= 2) {
        if (threadIdx.x % (2 * w) == 0 && threadIdx.x + w < blockDim.x)
            part[threadIdx.x] = part[threadIdx.x] + part[threadIdx.x + w];
        __syncthreads();
    }
    if (threadIdx.x == 0) slot[blockIdx.x] = part[0];
}

static __global__ void __launch_bounds__(1)
    norm_slots_kernel(float *dst, const float *slot, int64_t m)
{
    float s = 0.0f;
    for (int64_t k = 0; k < m; k++) s = s + slot[k];
    *dst = s;
}

static __global__ void __launch_bounds__(1) norm_add_in_order_kernel(float *dst, const float *sum)
{
    *dst = *dst + *sum;
}

static __global__ void __launch_bounds__(1)
    norm_exact_init_kernel(unsigned long long *acc, struct dt_cuda_fixed_record *rec)
{
    *acc = 0;
    dt_cuda_fixed_record_reset(rec);
}

/* max |g| as bits (order-free): a thread's elements, the block's threads in shared memory,
 * one atomic a block (one a thread put 10.8 M atomics on one word for the GPU-scale GPT's
 * gradients, whose grid has a thread an element: grad_norm 8.97 ms a step at portable on the
 * H200, results/nvidia-h200); any non-finite element flags. */
static __global__ void __launch_bounds__(1024)
    norm_exact_max_kernel(struct dt_cuda_fixed_record *rec, const float *g, int64_t n)
{
    __shared__ unsigned int block_max, block_bad;
    if (threadIdx.x == 0) block_max = 0, block_bad = 0;
    __syncthreads();
    unsigned int mx = 0;
    bool bad = false;
    DT_GRID_STRIDE(i, n)
    {
        const unsigned int bits = dt_float_bits(g[i]) & 0x7fffffffu;
        if (bits >= 0x7f800000u) bad = true;
        else if (bits > mx) mx = bits;
    }
    if (bad) atomicExch(&block_bad, 1u);
    if (mx) atomicMax(&block_max, mx);
    __syncthreads();
    if (threadIdx.x == 0) {
        if (block_bad) atomicMin(&rec->first_bad, 0ull);
        if (block_max) atomicMax(&rec->max_bits, block_max);
    }
}

/* The shift of every square: max |g|^2 (rounded once) and the count of all terms. */
static __device__ int norm_exact_shift(const struct dt_cuda_fixed_record *rec, int64_t total)
{
    const float mx = dt_bits_float(rec->max_bits);
    return dt_fixed_shift_for(dt_rn_mul(mx, mx), total);
}

static __global__ void __launch_bounds__(1024)
    norm_exact_sum_kernel(unsigned long long *acc, const struct dt_cuda_fixed_record *rec,
                          const float *g, int64_t n, int64_t total)
{
    if (rec->first_bad != DT_CUDA_NO_INDEX) return; /* the same for every thread */
    const float mx = dt_bits_float(rec->max_bits);
    if (!(dt_rn_mul(mx, mx) <= 3.402823466e+38f)) return; /* finish says +Inf */
    __shared__ unsigned long long block_sum;
    if (threadIdx.x == 0) block_sum = 0;
    __syncthreads();
    const int shift = norm_exact_shift(rec, total);
    unsigned long long sum = 0; /* exact in any grouping: the shift bounds every sum */
    DT_GRID_STRIDE(i, n)
    {
        int64_t q = 0;
        (void)dt_fixed_from_float(&q, dt_rn_mul(g[i], g[i]), shift); /* in range by the shift */
        sum += (unsigned long long)q;
    }
    if (sum) atomicAdd(&block_sum, sum); /* integers: a thread a block, then a block */
    __syncthreads();
    if (threadIdx.x == 0 && block_sum) atomicAdd(acc, block_sum);
}

static __global__ void __launch_bounds__(1)
    norm_exact_finish_kernel(float *dst, const unsigned long long *acc,
                             const struct dt_cuda_fixed_record *rec, int64_t total)
{
    const float mx = dt_bits_float(rec->max_bits), max_sq = dt_rn_mul(mx, mx);
    if (rec->first_bad != DT_CUDA_NO_INDEX) *dst = __int_as_float(0x7fc00000); /* NaN */
    else if (!(max_sq <= 3.402823466e+38f)) *dst = __int_as_float(0x7f800000); /* +Inf */
    else *dst = dt_fixed_to_float((int64_t)*acc, norm_exact_shift(rec, total));
}

/* ---- launchers ------------------------------------------------------------------------------- */

#define THREADS L->block_threads
#define LAUNCHED return DT_LAUNCHED(L)

static int dt_cuda_sgd_update_launch(float *w, float *v, const float *g, int64_t n, float lr,
                                     float momentum, float weight_decay,
                                     const struct dt_cuda_launch *L)
{
    const dt_cuda_stream s = L->stream;
    /* dt_sgd_elem: three products, three sums */
    DT_LAUNCH(L, dt_work(20.0 * (double)n, 6.0 * (double)n), sgd_update_kernel, dt_cuda_grid(L, n),
              L->block_threads, 0, s)
    (w, v, g, n, lr, momentum, weight_decay);
    return DT_LAUNCHED(L);
}

static int dt_cuda_adamw_launch(float *w, float *m, float *v, const float *g, int64_t n,
                                const struct dt_adamw_step *st, const struct dt_cuda_launch *L)
{
    const dt_cuda_stream s = L->stream;
    /* dt_adamw_elem: the decay, both moments, three quotients, a square root */
    const double decay = st->weight_decay != 0.0f ? 3.0 : 0.0;
    DT_LAUNCH(L, dt_work(28.0 * (double)n, (decay + 14.0 + 4.0 * DT_W_DIV) * (double)n),
              adamw_kernel, dt_cuda_grid(L, n), THREADS, 0, s)
    (w, m, v, g, n, *st);
    LAUNCHED;
}

static int dt_cuda_clip_scale_launch(float *g, int64_t n, const float *norm_sq, float max_norm,
                                     const struct dt_cuda_launch *L)
{
    const dt_cuda_stream s = L->stream;
    /* counted as clipping (a factor of 1 returns before touching g: then it moves nothing) */
    DT_LAUNCH(L, dt_work(8.0 * (double)n, (double)n), clip_scale_kernel, dt_cuda_grid(L, n),
              THREADS, 0, s)
    (g, n, norm_sq, max_norm);
    LAUNCHED;
}

static int dt_cuda_norm_chunks(float *part, const float *g, int64_t n, int64_t chunk,
                               const struct dt_cuda_launch *L)
{
    const dt_cuda_stream s = L->stream;
    const double chunks = (double)((n + chunk - 1) / chunk);
    DT_LAUNCH(L, dt_work(4.0 * ((double)n + chunks), DT_W_MAC * (double)n), norm_chunks_kernel,
              dt_cuda_grid(L, (n + chunk - 1) / chunk), THREADS, 0, s)
    (part, g, n, chunk);
    LAUNCHED;
}

static int dt_cuda_norm_add_in_order(float *dst, const float *sum, const struct dt_cuda_launch *L)
{
    const dt_cuda_stream s = L->stream;
    DT_LAUNCH(L, dt_work(0.0, 1.0), norm_add_in_order_kernel, 1, 1, 0, s)(dst, sum);
    LAUNCHED;
}

static int dt_cuda_norm_blocks(float *slot, const float *g, int64_t n, int64_t chunk,
                               int64_t blocks, const struct dt_cuda_launch *L)
{
    const dt_cuda_stream s = L->stream;
    const double chunks = (double)((n + chunk - 1) / chunk);
    DT_LAUNCH(L, dt_work(4.0 * ((double)n + (double)blocks), DT_W_MAC * (double)n + chunks),
              norm_blocks_kernel, blocks, THREADS, (size_t)THREADS * sizeof(float), s)
    (slot, g, n, chunk);
    LAUNCHED;
}

static int dt_cuda_norm_slots(float *dst, const float *slot, int64_t m,
                              const struct dt_cuda_launch *L)
{
    const dt_cuda_stream s = L->stream;
    DT_LAUNCH(L, dt_work(4.0 * (double)m, (double)m), norm_slots_kernel, 1, 1, 0, s)(dst, slot, m);
    LAUNCHED;
}

static int dt_cuda_norm_atomic(float *dst, const float *g, int64_t n, int64_t chunk,
                               const struct dt_cuda_launch *L)
{
    const dt_cuda_stream s = L->stream;
    const double chunks = (double)((n + chunk - 1) / chunk);
    DT_LAUNCH(L, dt_work(4.0 * (double)n, DT_W_MAC * (double)n + chunks), norm_atomic_kernel,
              dt_cuda_grid(L, (n + chunk - 1) / chunk), THREADS, 0, s)
    (dst, g, n, chunk);
    LAUNCHED;
}

static int dt_cuda_norm_exact_init(unsigned long long *acc, struct dt_cuda_fixed_record *rec,
                                   const struct dt_cuda_launch *L)
{
    const dt_cuda_stream s = L->stream;
    DT_LAUNCH(L, dt_work(0.0, 0.0), norm_exact_init_kernel, 1, 1, 0, s)(acc, rec);
    LAUNCHED;
}

static int dt_cuda_norm_exact_max(struct dt_cuda_fixed_record *rec, const float *g, int64_t n,
                                  const struct dt_cuda_launch *L)
{
    const dt_cuda_stream s = L->stream;
    DT_LAUNCH(L, dt_work(4.0 * (double)n, DT_W_OPS_SCAN * (double)n), norm_exact_max_kernel,
              dt_cuda_grid(L, n), THREADS, 0, s)
    (rec, g, n);
    LAUNCHED;
}

static int dt_cuda_norm_exact_sum(unsigned long long *acc, const struct dt_cuda_fixed_record *rec,
                                  const float *g, int64_t n, int64_t total,
                                  const struct dt_cuda_launch *L)
{
    const dt_cuda_stream s = L->stream;
    DT_LAUNCH(L, dt_work(4.0 * (double)n, (1.0 + DT_W_OPS_FIXED_TERM) * (double)n),
              norm_exact_sum_kernel, dt_cuda_grid(L, n), THREADS, 0, s)
    (acc, rec, g, n, total);
    LAUNCHED;
}

static int dt_cuda_norm_exact_finish(float *dst, const unsigned long long *acc,
                                     const struct dt_cuda_fixed_record *rec, int64_t total,
                                     const struct dt_cuda_launch *L)
{
    const dt_cuda_stream s = L->stream;
    DT_LAUNCH(L, dt_work(0.0, DT_W_OPS_FIXED_ROUND), norm_exact_finish_kernel, 1, 1, 0, s)
    (dst, acc, rec, total);
    LAUNCHED;
}

/* ---- the ops (declared from their rows of nets/op_list.h in nets/cuda/cuda.h) ----------- */

#define SLOT_PARTIALS 0
#define SLOT_SMALL 1

/* portable: elementwise (dt_sgd_elem). */
extern "C" enum dt_status dt_cuda_sgd_update(struct dt_backend *be, float *w, float *v,
                                             const float *g, int64_t n, float lr, float momentum,
                                             float weight_decay, const struct dt_policy *pol)
{
    return dt_cuda_launched(
        be, dt_cuda_sgd_update_launch(w, v, g, n, lr, momentum, weight_decay, &dt_cuda(be)->launch),
        "sgd_update");
}

/* portable: elementwise (dt_adamw_elem). */
extern "C" enum dt_status dt_cuda_adamw_update(struct dt_backend *be, float *w, float *m, float *v,
                                               const float *g, int64_t n,
                                               const struct dt_adamw_step *s,
                                               const struct dt_policy *pol)
{
    return dt_cuda_launched(be, dt_cuda_adamw_launch(w, m, v, g, n, s, &dt_cuda(be)->launch),
                            "adamw_update");
}

/* portable: one factor from the device's norm (no host round trip), elementwise. */
extern "C" enum dt_status dt_cuda_clip_scale(struct dt_backend *be, float *g, int64_t n,
                                             const float *norm_sq, float max_norm,
                                             const struct dt_policy *pol)
{
    return dt_cuda_launched(
        be, dt_cuda_clip_scale_launch(g, n, norm_sq, max_norm, &dt_cuda(be)->launch), "clip_scale");
}

/* The forced-order hook under reduction unordered: each tensor's chunk sums come to the
 * host and are added there in the CPU's drawn order (nets/cpu/optim.c), the tensors in order. */
static enum dt_status norm_forced(struct dt_backend *be, float *norm_sq, const float *const *g,
                                  const int64_t *n, int count)
{
    struct dt_cuda_ctx *c = dt_cuda(be);
    float sum = 0.0f;
    for (int i = 0; i < count; i++) {
        const int64_t m = (n[i] + DT_UNORDERED_CHUNK - 1) / DT_UNORDERED_CHUNK;
        float *part = (float *)dt_cuda_scratch(be, SLOT_PARTIALS, (size_t)m * sizeof(float));
        DT_FORWARD_IF_ERROR(dt_cuda_launched(
            be, dt_cuda_norm_chunks(part, g[i], n[i], DT_UNORDERED_CHUNK, &dt_cuda(be)->launch),
            "grad_norm forced"));
        float *h = (float *)dt_xmalloc((size_t)m * sizeof *h);
        DT_CUDA_CHECK(cudaMemcpyAsync(h, part, (size_t)m * sizeof *h, cudaMemcpyDeviceToHost,
                                      (cudaStream_t)c->stream));
        dt_cuda_sync(be);
        int64_t *perm = (int64_t *)dt_xmalloc((size_t)m * sizeof *perm);
        dt_forced_permutation(perm, m, c->forced_order, DT_FORCED_SUMMANDS);
        float t = 0.0f;
        for (int64_t k = 0; k < m; k++) t += h[perm[k]];
        sum += t;
        free(perm);
        free(h);
    }
    DT_CUDA_CHECK(cudaMemcpyAsync(norm_sq, &sum, sizeof sum, cudaMemcpyHostToDevice,
                                  (cudaStream_t)c->stream));
    dt_cuda_sync(be); /* sum is on this stack */
    return DT_OK;
}

extern "C" enum dt_status dt_cuda_grad_norm(struct dt_backend *be, float *norm_sq,
                                            const float *const *g, const int64_t *n, int count,
                                            const struct dt_policy *pol)
{
    struct dt_cuda_ctx *c = dt_cuda(be);
    const cudaStream_t s = (cudaStream_t)c->stream;
    if (dt_reduction_exact(pol)) {
        struct small {
            struct dt_cuda_fixed_record rec;
            unsigned long long acc;
        } *d = (small *)dt_cuda_scratch(be, SLOT_SMALL, sizeof(struct small));
        int64_t total = 0;
        int rc = dt_cuda_norm_exact_init(&d->acc, &d->rec, &dt_cuda(be)->launch);
        for (int i = 0; i < count && rc == 0; i++) {
            rc = dt_cuda_norm_exact_max(&d->rec, g[i], n[i], &dt_cuda(be)->launch);
            total += n[i];
        }
        for (int i = 0; i < count && rc == 0; i++)
            rc = dt_cuda_norm_exact_sum(&d->acc, &d->rec, g[i], n[i], total, &dt_cuda(be)->launch);
        if (rc == 0)
            rc = dt_cuda_norm_exact_finish(norm_sq, &d->acc, &d->rec, total, &dt_cuda(be)->launch);
        return dt_cuda_launched(be, rc, "grad_norm exact");
    }
    /* pinned: block slots (unordered keeps its own paths: atomics, or the forced order) */
    if (dt_reduction_library(pol, true)) {
        const struct dt_cuda_launch *L = &dt_cuda(be)->launch;
        int64_t slots = 0;
        for (int i = 0; i < count; i++)
            if (n[i] > 0)
                slots += dt_cuda_grid(L, (n[i] + DT_UNORDERED_CHUNK - 1) / DT_UNORDERED_CHUNK);
        float *slot = (float *)dt_cuda_scratch(be, SLOT_PARTIALS,
                                               (size_t)(slots > 0 ? slots : 1) * sizeof(float));
        int rc = 0;
        int64_t at = 0;
        for (int i = 0; i < count && rc == 0; i++) {
            if (n[i] <= 0) continue;
            const int64_t blocks =
                dt_cuda_grid(L, (n[i] + DT_UNORDERED_CHUNK - 1) / DT_UNORDERED_CHUNK);
            rc = dt_cuda_norm_blocks(slot + at, g[i], n[i], DT_UNORDERED_CHUNK, blocks, L);
            at += blocks;
        }
        if (rc == 0) rc = dt_cuda_norm_slots(norm_sq, slot, slots, L);
        return dt_cuda_launched(be, rc, "grad_norm pinned");
    }
    if (!dt_reduction_ordered(pol) && c->forced_order) return norm_forced(be, norm_sq, g, n, count);
    DT_CUDA_CHECK(dt_cuda_memset_async(&dt_cuda(be)->launch, norm_sq, 0, sizeof(float), s));
    for (int i = 0; i < count; i++) {
        int rc;
        if (n[i] <= 0) continue;
        if (dt_reduction_ordered(pol)) { /* chunks, the fixed tree, then += in tensor order */
            const int64_t m = dt_reduce_chunks(n[i]);
            float *part = (float *)dt_cuda_scratch(be, SLOT_PARTIALS, (size_t)m * sizeof(float));
            float *t = (float *)dt_cuda_scratch(be, SLOT_SMALL, sizeof(float));
            rc = dt_cuda_norm_chunks(part, g[i], n[i], DT_REDUCE_CHUNK, &dt_cuda(be)->launch);
            if (rc == 0) rc = dt_cuda_reduce_tree(t, part, m, 1, &dt_cuda(be)->launch);
            if (rc == 0) rc = dt_cuda_norm_add_in_order(norm_sq, t, &dt_cuda(be)->launch);
        } else {
            rc = dt_cuda_norm_atomic(norm_sq, g[i], n[i], DT_UNORDERED_CHUNK, &dt_cuda(be)->launch);
        }
        DT_FORWARD_IF_ERROR(dt_cuda_launched(be, rc, "grad_norm"));
    }
    return DT_OK;
}
