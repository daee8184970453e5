/* Softmax cross-entropy on the CUDA backend (kernels and host functions),
 * mirroring nets/cpu/loss.c. Two controls apply:
 *   math       portable -> dt_exp_portable / dt_log_portable: the CPU's bits;
 *              fast, strict -> CUDA's expf / logf (close to, not equal to, the CPU's libm).
 *   reduction  the batch mean of the loss. The per-example losses come back to pinned host
 *              memory in one copy (the loss is needed on the host anyway) and are summed
 *              there by the CPU's own code: fixed -> dt_reduce_sum_fixed (the CPU's bits at
 *              portable); unordered -> float atomicAdd on the device in arrival order, or,
 *              under the forced-order hook, the CPU's forced path (chunks of 8 added in a
 *              drawn order).
 * A label outside [0, C) (the CPU asserts) returns DT_ERR_INTERNAL naming the first such
 * row; the loss is then left unset. */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <string.h>

#include "determinism/reduce.h"
#include "determinism/streams.h" /* dt_forced_permutation: the drawn orders */
#include "nets/cuda/dense_loss.h"
#include "nets/cuda/launch.cuh"
#include "nets/dense_loss_elem.h"

/* ---- kernels and their launchers ---------------------------------------------------------- */

/* Kernels of the CUDA softmax cross-entropy (the ops below). Rows are
 * independent: one thread per row runs dt_softmax_xent_row (nets/dense_loss_elem.h), the
 * CPU's operations in the CPU's order; the backward pass is elementwise. Grid-stride loops:
 * no result depends on the grid or block size, except the unordered loss total (float
 * atomicAdd, arrival order). */

/* math portable: detrain's exp/log, the CPU's bits; otherwise CUDA's expf/logf (whose
 * library code uses fmaf: one kernel per choice keeps it out of the portable one). A label
 * outside [0, C) is flagged (hit = -1, loss NaN) for the host to report; the row's
 * probabilities are still written. total != NULL: reduction unordered, losses added by
 * float atomicAdd in arrival order. */
template <bool portable>
static __global__ void __launch_bounds__(1024)
    softmax_xent_rows_kernel(float *probs, float *losses, int32_t *hit, float *total,
                             const float *logits, const int32_t *labels, int64_t B, int64_t C)
{
    DT_GRID_STRIDE(b, B)
    {
        const int32_t y = labels[b];
        const bool ok = y >= 0 && y < C;
        int64_t arg;
        float loss =
            dt_softmax_xent_row(probs + b * C, &arg, logits + b * C, ok ? y : 0, C, portable);
        if (!ok) loss = dt_bits_float(0x7fc00000u);
        losses[b] = loss;
        hit[b] = ok ? (arg == y) : -1;
        if (total && ok) atomicAdd(total, loss);
    }
}

/* portable at every level: dlogits = (p - onehot) * inv_b, two roundings. */
static __global__ void __launch_bounds__(1024)
    softmax_xent_grad_kernel(float *dlogits, const float *probs, const int32_t *labels, int64_t B,
                             int64_t C, float inv_b)
{
    DT_GRID_STRIDE(i, B * C)
    dlogits[i] = dt_softmax_xent_grad_elem(probs[i], i % C == labels[i / C], inv_b);
}

extern "C" int dt_cuda_softmax_xent_rows(float *probs, float *losses, int32_t *hit, float *total,
                                         const float *logits, const int32_t *labels, int64_t B,
                                         int64_t C, bool portable, const struct dt_cuda_launch *L)
{
    const dt_cuda_stream s = L->stream;
    if (total) {
        cudaError_t e = dt_cuda_memset_async(L, total, 0, sizeof *total, s);
        if (e != cudaSuccess) {
            (void)cudaGetLastError(); /* reported here, not again by the next launch */
            return (int)e;
        }
    }
    /* a thread a row: the softmax of C logits, the loss (a log and two more), the hit; the
     * atomic total's add when it is kept */
    const double n = (double)B * (double)C;
    const struct dt_op_cost w =
        dt_work(4.0 * (2.0 * n + 3.0 * (double)B),
                n * DT_W_SOFTMAX + (double)B * (DT_W_EXP + 2.0) + (total ? (double)B : 0.0));
    if (portable) {
        DT_LAUNCH(L, w, softmax_xent_rows_kernel<true>, dt_cuda_grid(L, B), L->block_threads, 0, s)
        (probs, losses, hit, total, logits, labels, B, C);
    } else {
        DT_LAUNCH(L, w, softmax_xent_rows_kernel<false>, dt_cuda_grid(L, B), L->block_threads, 0, s)
        (probs, losses, hit, total, logits, labels, B, C);
    }
    return DT_LAUNCHED(L);
}

extern "C" int dt_cuda_softmax_xent_grad(float *dlogits, const float *probs, const int32_t *labels,
                                         int64_t B, int64_t C, float inv_b,
                                         const struct dt_cuda_launch *L)
{
    const dt_cuda_stream s = L->stream;
    const double n = (double)B * (double)C;
    DT_LAUNCH(L, dt_work(4.0 * (2.0 * n + (double)B), 2.0 * n), softmax_xent_grad_kernel,
              dt_cuda_grid(L, B * C), L->block_threads, 0, s)
    (dlogits, probs, labels, B, C, inv_b);
    return DT_LAUNCHED(L);
}

/* ---- the ops (declared from their rows of nets/op_list.h in nets/cuda/cuda.h) ----------- */

extern "C" float dt_cuda_loss_sum(const float *losses, int64_t B, enum dt_reduction reduction,
                                  uint64_t forced_order, float device_total)
{
    if (reduction != DT_REDUCTION_UNORDERED) { /* fixed, exact and pinned: the fixed sum */
        float *partials = (float *)dt_xmalloc((size_t)dt_reduce_chunks(B) * sizeof(float));
        float s = dt_reduce_sum_fixed(losses, B, partials);
        free(partials);
        return s;
    }
    if (!forced_order) return device_total;
    const int64_t n_chunks = (B + DT_UNORDERED_CHUNK - 1) / DT_UNORDERED_CHUNK;
    int64_t *perm = (int64_t *)dt_xmalloc((size_t)n_chunks * sizeof *perm);
    dt_forced_permutation(perm, n_chunks, forced_order, DT_FORCED_SUMMANDS);
    float total = 0.0f;
    for (int64_t t = 0; t < n_chunks; t++) {
        float s = 0.0f;
        int64_t e = (perm[t] + 1) * DT_UNORDERED_CHUNK < B ? (perm[t] + 1) * DT_UNORDERED_CHUNK : B;
        for (int64_t i = perm[t] * DT_UNORDERED_CHUNK; i < e; i++) s += losses[i];
        total += s;
    }
    free(perm);
    return total;
}

/* The op's result from its read-back h = [losses: B floats][hit: B int32][atomic total]:
 * the label check, the correct count and the loss sum per `reduction` -- at once, or at the
 * step's end when the read was deferred (status.c). With shards (r->count > 0) one loss per
 * shard, over its rows [row[k] mult, row[k + 1] mult), as a call per shard gives it (a
 * label error named by its row within the first such shard). */
extern "C" enum dt_status dt_cuda_loss_finish(struct dt_backend *be, const char *h,
                                              const struct dt_cuda_loss_read *r)
{
    const int64_t B = r->B;
    const float *h_losses = (const float *)h;
    const int32_t *h_hit = (const int32_t *)(h + (size_t)B * 4);
    float h_total;
    memcpy(&h_total, h + (size_t)B * 8, sizeof h_total);
    const int64_t parts = r->count > 0 ? r->count : 1;
    int64_t correct = 0;
    for (int64_t k = 0; k < parts; k++) {
        const int64_t r0 = r->count > 0 ? r->row[k] * r->mult : 0;
        const int64_t rows = r->count > 0 ? (r->row[k + 1] - r->row[k]) * r->mult : B;
        for (int64_t b = 0; b < rows; b++) {
            if (h_hit[r0 + b] < 0)
                return dt_backend_op_error(be, DT_ERR_INTERNAL,
                                           "softmax_xent_forward: label out of range [0, %lld) "
                                           "at row %lld",
                                           (long long)r->C, (long long)b);
            correct += h_hit[r0 + b];
        }
        r->loss_host[k] =
            dt_cuda_loss_sum(h_losses + r0, rows, r->reduction, r->forced_order, h_total) /
            (float)rows;
    }
    if (r->correct_host) *r->correct_host = correct;
    return DT_OK;
}

/* The rows kernel over B rows into scratch, then the read-back: deferred to the step's end
 * (a training step's loss with checks deferred: no wait of the op's own) or at once. */
static enum dt_status rows_and_read(struct dt_backend *be, float *probs, const float *logits,
                                    const int32_t *labels, const struct dt_policy *pol,
                                    struct dt_cuda_loss_read *r)
{
    struct dt_cuda_ctx *c = dt_cuda(be);
    const int64_t B = r->B, C = r->C;
    /* [losses: B floats][hit: B int32][atomic total: 1 float] */
    const size_t bytes = (size_t)B * (sizeof(float) + sizeof(int32_t)) + sizeof(float);
    char *d = (char *)dt_cuda_scratch(be, 0, bytes);
    float *losses = (float *)d, *total = (float *)(d + (size_t)B * 8);
    int32_t *hit = (int32_t *)(d + (size_t)B * 4);
    const bool atomic_total = !dt_reduction_ordered(pol) && !c->forced_order;
    DT_FORWARD_IF_ERROR(dt_cuda_launched(
        be,
        dt_cuda_softmax_xent_rows(probs, losses, hit, atomic_total ? total : NULL, logits, labels,
                                  B, C, dt_math_portable(pol), &dt_cuda(be)->launch),
        "softmax_xent_forward"));
    r->reduction = pol->reduction;
    r->forced_order = c->forced_order;
    if (be->loss_deferred && dt_cuda(be)->one_pass &&
        dt_cuda_defer_loss(be, d, bytes, r, dt_cuda_loss_finish))
        return DT_OK;
    if (dt_cuda_recording(be)) { /* the read-back's wait; no values to finish */
        dt_cuda_sync(be);
        return DT_OK;
    }
    char *h = (char *)dt_cuda_host_scratch(be, 0, bytes);
    DT_CUDA_CHECK(cudaMemcpyAsync(h, d, bytes, cudaMemcpyDeviceToHost, (cudaStream_t)c->stream));
    dt_cuda_sync(be);
    return dt_cuda_loss_finish(be, h, r);
}

/* reduction: exact with shards set: every shard's loss from one rows kernel over the batch
 * and one read-back (the per-row losses do not depend on the call; each shard's sum is the
 * call per shard's). Beyond DT_CUDA_SHARDS_MAX shards, or with DETRAIN_CUDA_ONE_PASS=0:
 * DT_ERR_UNSUPPORTED, a call per shard (nets/dispatch.c). */
extern "C" enum dt_status dt_cuda_softmax_xent_forward_shards(
    struct dt_backend *be, float *probs, float *loss_host, int64_t *correct_host,
    const float *logits, const int32_t *labels, int64_t B, int64_t C, const struct dt_policy *pol)
{
    const struct dt_shards *sh = &be->shards;
    DT_ASSERT(sh->count > 0 && B % sh->row[sh->count] == 0);
    if (!dt_cuda(be)->one_pass || sh->count > DT_CUDA_SHARDS_MAX || dt_cuda(be)->forced_order)
        return DT_ERR_UNSUPPORTED;
    struct dt_cuda_loss_read r = {.B = B,
                                  .C = C,
                                  .loss_host = loss_host,
                                  .correct_host = correct_host,
                                  .count = sh->count,
                                  .mult = B / sh->row[sh->count]};
    memcpy(r.row, sh->row, (size_t)(sh->count + 1) * sizeof *r.row);
    return rows_and_read(be, probs, logits, labels, pol, &r);
}

/* Rows on the device (one thread each, the CPU's order); then one copy of the losses, hit
 * flags and atomic total to the host and the sum per `reduction` (rows_and_read). */
extern "C" enum dt_status dt_cuda_softmax_xent_forward(struct dt_backend *be, float *probs,
                                                       float *loss_host, int64_t *correct_host,
                                                       const float *logits, const int32_t *labels,
                                                       int64_t B, int64_t C,
                                                       const struct dt_policy *pol)
{
    struct dt_cuda_loss_read r = {
        .B = B, .C = C, .loss_host = loss_host, .correct_host = correct_host, .count = 0};
    return rows_and_read(be, probs, logits, labels, pol, &r);
}

/* portable at every level: elementwise (p - onehot) * inv_b, inv_b = 1/B rounded once
 * here as on the CPU. */
extern "C" enum dt_status dt_cuda_softmax_xent_backward(struct dt_backend *be, float *dlogits,
                                                        const float *probs, const int32_t *labels,
                                                        int64_t B, int64_t C, int64_t denom,
                                                        const struct dt_policy *pol)
{
    const float inv_b = 1.0f / (float)denom;
    return dt_cuda_launched(
        be, dt_cuda_softmax_xent_grad(dlogits, probs, labels, B, C, inv_b, &dt_cuda(be)->launch),
        "softmax_xent_backward");
}
