/* The optimizers on the CUDA backend, for every model (kernels: nets/cuda/optim.cu): SGD
 * with momentum, AdamW, and clipping by the global norm -- the norm under `reduction`
 * (chunk sums by atomicAdd; chunks, the fixed tree and the tensors in order; exact int64 at
 * one shift) and one factor read on the device (no host round trip). Each element is the
 * CPU op's function (nets/optim_elem.h). No op here waits for the device (the forced-order
 * hook apart). */
#include <cuda_runtime_api.h>

#include "determinism/reduce.h"
#include "determinism/streams.h"
#include "nets/cuda/optim_launch.h"

#define SLOT_PARTIALS 0
#define SLOT_SMALL 1

/* portable: elementwise (dt_sgd_elem). */
enum dt_status dt_cuda_sgd_update(struct dt_backend *be, float *w, float *v, const float *g,
                                  int64_t n, float lr, float momentum, float weight_decay,
                                  const struct dt_policy *pol)
{
    return dt_cuda_launched(
        be, dt_cuda_sgd_update_launch(w, v, g, n, lr, momentum, weight_decay, &dt_cuda(be)->launch),
        "sgd_update");
}

/* portable: elementwise (dt_adamw_elem). */
enum dt_status dt_cuda_adamw_update(struct dt_backend *be, float *w, float *m, float *v,
                                    const float *g, int64_t n, const struct dt_adamw_step *s,
                                    const struct dt_policy *pol)
{
    return dt_cuda_launched(be, dt_cuda_adamw_launch(w, m, v, g, n, s, &dt_cuda(be)->launch),
                            "adamw_update");
}

/* portable: one factor from the device's norm (no host round trip), elementwise. */
enum dt_status dt_cuda_clip_scale(struct dt_backend *be, float *g, int64_t n, const float *norm_sq,
                                  float max_norm, const struct dt_policy *pol)
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
        float *part = dt_cuda_scratch(be, SLOT_PARTIALS, (size_t)m * sizeof(float));
        DT_FORWARD_IF_ERROR(dt_cuda_launched(
            be, dt_cuda_norm_chunks(part, g[i], n[i], DT_UNORDERED_CHUNK, &dt_cuda(be)->launch),
            "grad_norm forced"));
        float *h = dt_xmalloc((size_t)m * sizeof *h);
        DT_CUDA_CHECK(cudaMemcpyAsync(h, part, (size_t)m * sizeof *h, cudaMemcpyDeviceToHost,
                                      (cudaStream_t)c->stream));
        dt_cuda_sync(be);
        int64_t *perm = dt_xmalloc((size_t)m * sizeof *perm);
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

enum dt_status dt_cuda_grad_norm(struct dt_backend *be, float *norm_sq, const float *const *g,
                                 const int64_t *n, int count, const struct dt_policy *pol)
{
    struct dt_cuda_ctx *c = dt_cuda(be);
    const cudaStream_t s = (cudaStream_t)c->stream;
    if (dt_reduction_exact(pol)) {
        struct small {
            struct dt_cuda_fixed_record rec;
            unsigned long long acc;
        } *d = dt_cuda_scratch(be, SLOT_SMALL, sizeof(struct small));
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
    if (!dt_reduction_ordered(pol) && c->forced_order) return norm_forced(be, norm_sq, g, n, count);
    DT_CUDA_CHECK(cudaMemsetAsync(norm_sq, 0, sizeof(float), s));
    for (int i = 0; i < count; i++) {
        int rc;
        if (n[i] <= 0) continue;
        if (dt_reduction_ordered(pol)) { /* chunks, the fixed tree, then += in tensor order */
            const int64_t m = dt_reduce_chunks(n[i]);
            float *part = dt_cuda_scratch(be, SLOT_PARTIALS, (size_t)m * sizeof(float));
            float *t = dt_cuda_scratch(be, SLOT_SMALL, sizeof(float));
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
