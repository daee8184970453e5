/* Softmax cross-entropy on the CPU backend. Rows are independent; within a row the class
 * sums run in index order. Two controls apply:
 *   math       portable -> dt_exp_portable / dt_log_portable (same bits on every device);
 *              fast, strict -> libm expf / logf (same bits on one machine and libm).
 *   reduction  the batch mean of the loss: fixed -> the canonical chunk tree of reduce.h;
 *              unordered -> for a batch of up to DT_LOSS_SERIAL_MAX examples (every batch
 *              detrain trains) one serial pass, the fastest way (a thread pool's hand-off
 *              costs more than the adds: measured, docs/performance.md), deterministic
 *              though the control allows any order; for more, chunk partials combined in
 *              the order workers finish. The forced-order hook still draws an order. */
#include <math.h>
#include <stdatomic.h>

#include "determinism/portable_math.h"
#include "determinism/reduce.h"
#include "determinism/streams.h"
#include "nets/cpu/cpu.h"
#include "nets/dense_loss_elem.h"

/* Up to this many per-example losses, `unordered` adds them in one serial pass. */
#define DT_LOSS_SERIAL_MAX 65536

struct loss_sum_job {
    const float *v;
    int64_t n;
    atomic_llong next;
    float *total;
    pthread_mutex_t *mu;
};

/* reduction unordered: chunks taken as they come; partials added in finishing order. */
static void loss_sum_unordered_part(void *ctx, int64_t begin, int64_t end, int worker)
{
    struct loss_sum_job *j = ctx;
    float s = 0.0f;
    bool any = false;
    for (;;) {
        int64_t c = atomic_fetch_add(&j->next, 1);
        if (c * DT_UNORDERED_CHUNK >= j->n) break;
        int64_t e = (c + 1) * DT_UNORDERED_CHUNK < j->n ? (c + 1) * DT_UNORDERED_CHUNK : j->n;
        for (int64_t i = c * DT_UNORDERED_CHUNK; i < e; i++) s += j->v[i];
        any = true;
    }
    if (!any) return;
    pthread_mutex_lock(j->mu);
    *j->total += s;
    pthread_mutex_unlock(j->mu);
}

/* Sum of the per-example losses under the reduction control. */
static float sum_losses(struct dt_backend *be, const float *v, int64_t n,
                        const struct dt_policy *pol)
{
    struct dt_cpu_ctx *c = dt_cpu(be);
    if (dt_reduction_ordered(pol)) {
        float *partials = dt_xmalloc((size_t)dt_reduce_chunks(n) * sizeof(float));
        float s = dt_reduce_sum_fixed(v, n, partials);
        free(partials);
        return s;
    }
    int64_t n_chunks = (n + DT_UNORDERED_CHUNK - 1) / DT_UNORDERED_CHUNK;
    if (c->forced_order) {
        int64_t *perm = dt_xmalloc((size_t)n_chunks * sizeof *perm);
        dt_forced_permutation(perm, n_chunks, c->forced_order, DT_FORCED_SUMMANDS);
        float total = 0.0f;
        for (int64_t t = 0; t < n_chunks; t++) {
            float s = 0.0f;
            int64_t e =
                (perm[t] + 1) * DT_UNORDERED_CHUNK < n ? (perm[t] + 1) * DT_UNORDERED_CHUNK : n;
            for (int64_t i = perm[t] * DT_UNORDERED_CHUNK; i < e; i++) s += v[i];
            total += s;
        }
        free(perm);
        return total;
    }
    float total = 0.0f;
    if (n <= DT_LOSS_SERIAL_MAX) { /* the fastest way to add a batch's losses: one pass */
        for (int64_t i = 0; i < n; i++) total += v[i];
        return total;
    }
    struct loss_sum_job job = {.v = v, .n = n, .total = &total, .mu = &c->combine_mu};
    atomic_init(&job.next, 0);
    dt_pool_run(c->pool, dt_pool_threads(c->pool), 1, loss_sum_unordered_part, &job);
    return total;
}

struct xent_job {
    float *probs, *losses;
    int64_t *arg;
    const float *logits;
    const int32_t *labels;
    int64_t C;
    bool portable;
};

DT_VECTOR_PART(xent_forward_part)
{
    const struct xent_job *j = ctx;
    for (int64_t b = begin; b < end; b++) /* the row's formula is the kernels' */
        j->losses[b] = dt_softmax_xent_row(j->probs + b * j->C, &j->arg[b], j->logits + b * j->C,
                                           j->labels[b], j->C, j->portable);
}

/* Per row: max-shifted softmax; loss = log(sum exp(z - max)) - (z_label - max); the mean
 * over the batch is the controlled sum divided by B (one rounding). The rows split over the
 * workers (each row's arithmetic one worker's: the bits never depend on the split). */
enum dt_status dt_cpu_softmax_xent_forward(struct dt_backend *be, float *probs, float *loss_host,
                                           int64_t *correct_host, const float *logits,
                                           const int32_t *labels, int64_t B, int64_t C,
                                           const struct dt_policy *pol)
{
    for (int64_t b = 0; b < B; b++)
        DT_ASSERT_MSG(labels[b] >= 0 && labels[b] < C,
                      "label out of range in softmax_xent_forward");
    float *losses = dt_xmalloc((size_t)B * sizeof(float));
    int64_t *arg = dt_xmalloc((size_t)B * sizeof *arg);
    struct xent_job j = {.probs = probs,
                         .losses = losses,
                         .arg = arg,
                         .logits = logits,
                         .labels = labels,
                         .C = C,
                         .portable = dt_math_portable(pol)};
    dt_pool_run(dt_cpu(be)->pool, B, 1 + 8192 / C, xent_forward_part, &j);
    int64_t correct = 0;
    for (int64_t b = 0; b < B; b++) correct += (arg[b] == labels[b]);
    *loss_host = sum_losses(be, losses, B, pol) / (float)B;
    if (correct_host) *correct_host = correct;
    free(arg);
    free(losses);
    return DT_OK;
}

struct xent_grad_job {
    float *dlogits;
    const float *probs;
    const int32_t *labels;
    int64_t C;
    float inv_b;
};

static void xent_backward_part(void *ctx, int64_t begin, int64_t end, int worker)
{
    const struct xent_grad_job *j = ctx;
    for (int64_t b = begin; b < end; b++)
        for (int64_t c = 0; c < j->C; c++)
            j->dlogits[b * j->C + c] =
                dt_softmax_xent_grad_elem(j->probs[b * j->C + c], c == j->labels[b], j->inv_b);
}

/* portable: elementwise (p - onehot) * (1 / denom). */
enum dt_status dt_cpu_softmax_xent_backward(struct dt_backend *be, float *dlogits,
                                            const float *probs, const int32_t *labels, int64_t B,
                                            int64_t C, int64_t denom, const struct dt_policy *pol)
{
    struct xent_grad_job j = {
        .dlogits = dlogits, .probs = probs, .labels = labels, .C = C, .inv_b = 1.0f / (float)denom};
    dt_pool_run(dt_cpu(be)->pool, B, 1 + 16384 / C, xent_backward_part, &j);
    return DT_OK;
}
