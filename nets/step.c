/* One training step for every caller: see step.h. */
#include "nets/step.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"

int64_t dt_shard_row(int64_t B, int64_t S, int64_t s)
{
    return (int64_t)(((__int128)s * B) / S); /* no overflow for any batch */
}

int64_t dt_rank_shard(int64_t S, int N, int r) { return ((int64_t)r * S) / N; }

/* ---- the exchange, or its one-process form ---------------------------------------------- */

static int ranks(const struct dt_exchange *x) { return x ? x->size : 1; }
static int rank_of(const struct dt_exchange *x) { return x ? x->rank : 0; }
static bool several(const struct dt_exchange *x) { return x && x->size > 1; }

static void x_max_u32(const struct dt_exchange *x, uint32_t *v, int n)
{
    if (several(x)) x->ops->max_u32(x->ctx, v, n);
}

static void x_sum_i64(const struct dt_exchange *x, int64_t *v, int64_t n)
{
    if (several(x)) x->ops->sum_i64(x->ctx, v, n);
}

static void x_sum_f32(const struct dt_exchange *x, float *v, int64_t n)
{
    if (several(x)) x->ops->sum_f32(x->ctx, v, n);
}

static void x_sum_f64(const struct dt_exchange *x, double *v, int n)
{
    if (several(x)) x->ops->sum_f64(x->ctx, v, n);
}

static void x_gather(const struct dt_exchange *x, const void *send, void *recv, int64_t bytes)
{
    if (several(x)) x->ops->gather(x->ctx, send, recv, bytes);
    else memcpy(recv, send, (size_t)bytes);
}

static int x_max_status(const struct dt_exchange *x, int status, int *rank_out)
{
    if (several(x)) return x->ops->max_status(x->ctx, status, rank_out);
    if (rank_out) *rank_out = status ? 0 : -1;
    return status;
}

/* Device memory goes through the exchange's device sum when it has one (NCCL between GPUs,
 * also with one rank under a launcher: a one-GPU check of it); host memory never does. */
static bool device_sum(struct dt_step *d)
{
    const struct dt_exchange *x = d->x;
    if (!x || !x->ops->sum_device || dt_backend_host_view(d->m->be, d->m->params[0].g))
        return false;
    d->device_sum = true;
    return true;
}

/* ---- set-up --------------------------------------------------------------------------- */

static int64_t align64(int64_t bytes) { return (bytes + 63) / 64 * 64; }

/* Rank q's partials in the shared memory. */
static float *shared_pack(const struct dt_step *d, int q)
{
    return (float *)((char *)d->shared_base[q] + d->shared_partials);
}

/* exact over the ranks of one machine: the shared memory, when the exchange offers it and
 * the gradients are host memory (the same answer on every rank: the same backend). Rank q's
 * part: its maxima (n_params uint32), its partials (the most slots any rank holds), then the
 * rounded sums of its elements (at most ceil(total / N)). */
static void open_shared(struct dt_step *d, int64_t shards)
{
    const struct dt_exchange *x = d->x;
    struct dt_model *m = d->m;
    const int N = ranks(x);
    if (N > DT_EXACT_PACKS_MAX || !x->ops->shared_open ||
        !dt_backend_host_view(m->be, m->grad_pack))
        return;
    int64_t most = 0;
    for (int q = 0; q < N; q++) {
        d->rank_slots[q] = dt_rank_shard(shards, N, q + 1) - dt_rank_shard(shards, N, q);
        if (d->rank_slots[q] > most) most = d->rank_slots[q];
    }
    d->shared_partials = align64((int64_t)m->n_params * (int64_t)sizeof(uint32_t));
    d->shared_results = d->shared_partials + align64(most * d->total * (int64_t)sizeof(float));
    const int64_t bytes =
        d->shared_results + align64((d->total + N - 1) / N * (int64_t)sizeof(float));
    d->shared = x->ops->shared_open(x->ctx, bytes, d->shared_base);
    /* the shard partials written straight into the rank's part: no copy a step */
    if (d->shared) dt_model_grad_slots_at(m, m->grad_slots, shared_pack(d, rank_of(x)));
}

bool dt_step_needs_combine(const struct dt_policy *pol, const struct dt_exchange *x)
{
    return several(x) || dt_reduction_exact(pol);
}

void dt_step_init(struct dt_step *d, struct dt_model *m, int64_t shards,
                  const struct dt_policy *pol, const struct dt_exchange *x)
{
    memset(d, 0, sizeof *d);
    d->m = m;
    d->x = x;
    d->offset = dt_xcalloc((size_t)m->n_params + 1, sizeof *d->offset);
    d->n = dt_xcalloc((size_t)m->n_params + 1, sizeof *d->n);
    for (int i = 0; i < m->n_params; i++) {
        d->offset[i + 1] = d->offset[i] + m->params[i].n;
        d->n[i] = m->params[i].n;
    }
    d->total = d->offset[m->n_params];
    const int N = ranks(x), r = rank_of(x);
    d->exact = dt_reduction_exact(pol);
    if (d->exact) {
        /* the rank's shards: the partials each gradient makes room for */
        dt_model_grad_slots(m, dt_rank_shard(shards, N, r + 1) - dt_rank_shard(shards, N, r));
        d->max_dev = dt_backend_alloc(m->be, (size_t)m->n_params * sizeof *d->max_dev);
        d->max_bits = dt_xcalloc((size_t)m->n_params, sizeof *d->max_bits);
        if (N == 1) {
            d->summed = dt_xcalloc((size_t)m->n_params, sizeof *d->summed);
            d->summed_before = dt_xcalloc((size_t)m->n_params, sizeof *d->summed_before);
            for (int i = 0; i < m->n_params; i++) d->summed[i] = DT_EXACT_UNSUMMED;
        }
        if (N > 1) open_shared(d, shards);
        if (N > 1 && !d->shared) {
            d->acc_dev = dt_backend_alloc(m->be, (size_t)d->total * sizeof(int64_t));
            d->acc = dt_xmalloc((size_t)d->total * sizeof(int64_t));
        }
    } else {
        d->stage = dt_xmalloc((size_t)d->total * sizeof(float));
        d->gather = N > 1 ? dt_xmalloc((size_t)(N * d->total) * sizeof(float)) : NULL;
    }
    d->loss_slots = dt_xcalloc((size_t)(shards > N ? shards : N), sizeof(float));
}

const char *dt_step_exchange_path(const struct dt_step *d)
{
    if (!d->m || !several(d->x)) return NULL;
    if (!d->exact) return d->device_sum ? "the device exchange's sums" : "MPI's collectives";
    if (d->shared) return "the ranks' shared memory (one machine), no integer all-reduce";
    return d->device_sum ? "the device exchange's integer sum"
                         : "MPI's integer all-reduce, staged (DETRAIN_DIST_SHARED=0, or ranks on "
                           "several machines)";
}

/* d's buffers freed; its graph kept (prepare) */
static void free_buffers(struct dt_step *d)
{
    if (d->shared) { /* the model's pack its own again, if it is still in the shared memory */
        if (d->m->grad_pack == shared_pack(d, rank_of(d->x)))
            dt_model_grad_slots_at(d->m, d->m->grad_slots, NULL);
        d->x->ops->shared_close(d->x->ctx, d->shared);
    }
    if (d->device_sum && d->x->ops->release_device) d->x->ops->release_device(d->x->ctx, d->m->be);
    if (d->max_dev) dt_backend_free(d->m->be, d->max_dev);
    if (d->acc_dev) dt_backend_free(d->m->be, d->acc_dev);
    free(d->offset);
    free(d->n);
    free(d->stage);
    free(d->acc);
    free(d->max_bits);
    free(d->summed);
    free(d->summed_before);
    free(d->gather);
    free(d->loss_slots);
    const struct dt_step_graph keep = d->graph;
    memset(d, 0, sizeof *d);
    d->graph = keep;
}

void dt_step_free(struct dt_step *d)
{
    free_buffers(d);
    dt_backend_graph_free(d->graph.be, d->graph.exec);
    memset(d, 0, sizeof *d);
}

/* ---- the combined step ------------------------------------------------------------------ */

/* The model's gradients into the staging buffer, and back. */
static void stage_gradients(struct dt_step *d)
{
    struct dt_model *m = d->m;
    for (int i = 0; i < m->n_params; i++)
        dt_backend_download(m->be, d->stage + d->offset[i], m->params[i].g,
                            (size_t)m->params[i].n * sizeof(float));
}

static void unstage_gradients(struct dt_step *d, const float *src)
{
    struct dt_model *m = d->m;
    for (int i = 0; i < m->n_params; i++)
        dt_backend_upload(m->be, m->params[i].g, src + d->offset[i],
                          (size_t)m->params[i].n * sizeof(float));
}

/* Every rank learns whether any failed; a rank that did not fail says which did. */
static enum dt_status agree_on_failure(struct dt_step *d, enum dt_status st)
{
    int who = -1;
    int worst = x_max_status(d->x, st == DT_OK ? 0 : (int)st, &who);
    if (worst == 0) return DT_OK;
    if (st == DT_OK) {
        dt_error_set(&d->m->err, (enum dt_status)worst,
                     "rank %d failed at step %" PRId64 " (its message is on its stderr)", who,
                     d->m->step);
        return (enum dt_status)worst;
    }
    return st;
}

/* exact, the int64 sums across ranks: on the device when the exchange can, else staged. */
static enum dt_status sum_fixed(struct dt_step *d)
{
    struct dt_model *m = d->m;
    if (device_sum(d)) {
        void *buf[1] = {d->acc_dev};
        const int64_t count[1] = {d->total};
        return d->x->ops->sum_device(d->x->ctx, m->be, buf, count, 1, true, &m->err);
    }
    dt_backend_download(m->be, d->acc, d->acc_dev, (size_t)d->total * sizeof *d->acc);
    x_sum_i64(d->x, d->acc, d->total);
    dt_backend_upload(m->be, d->acc_dev, d->acc, (size_t)d->total * sizeof *d->acc);
    return DT_OK;
}

/* Rank q's first element of the combined gradient (q = N: the end): each element's sum is
 * one rank's work. */
static int64_t element_of_rank(const struct dt_step *d, int q)
{
    return (int64_t)(((__int128)q * d->total) / ranks(d->x));
}

/* exact over the ranks of one machine: every rank puts its maxima and partials in its part
 * of the shared memory; after a synchronisation each reads every rank's maxima, sums its own
 * range of elements over every rank's partials and rounds it (dt_exact_sum_packs: the bits
 * of the integer all-reduce); after a second one each copies every rank's rounded range into
 * slot 0. No rank writes its part again before the next step's first synchronisation, which
 * every rank reaches only after its copies. */
static enum dt_status combine_shared(struct dt_step *d, const struct dt_exact_layout *L)
{
    struct dt_model *m = d->m;
    const struct dt_exchange *x = d->x;
    const int P = m->n_params, N = ranks(x), r = rank_of(x);
    char *mine = d->shared_base[r];
    enum dt_status st = dt_exact_max(m->be, d->max_dev, m->grad_pack, L);
    if (st == DT_OK) {
        dt_backend_download(m->be, mine, d->max_dev, (size_t)P * sizeof(uint32_t));
        if (m->grad_pack != shared_pack(d, r)) /* another step lent the model another pack */
            dt_backend_download(m->be, shared_pack(d, r), m->grad_pack,
                                (size_t)(L->slots * d->total) * sizeof(float));
    } else {
        memset(mine, 0xff, (size_t)P * sizeof(uint32_t)); /* every rank sees a failure */
    }
    x->ops->shared_sync(x->ctx, d->shared);
    memset(d->max_bits, 0, (size_t)P * sizeof *d->max_bits);
    const float *packs[DT_EXACT_PACKS_MAX];
    for (int q = 0; q < N; q++) {
        const uint32_t *mq = d->shared_base[q];
        for (int i = 0; i < P; i++)
            d->max_bits[i] = mq[i] > d->max_bits[i] ? mq[i] : d->max_bits[i];
        packs[q] = shared_pack(d, q);
    }
    dt_backend_upload(m->be, d->max_dev, d->max_bits, (size_t)P * sizeof *d->max_bits);
    const int64_t e0 = element_of_rank(d, r), e1 = element_of_rank(d, r + 1);
    float *sums = (float *)(mine + d->shared_results);
    if (st == DT_OK && e1 > e0)
        st = dt_exact_sum_packs(m->be, sums, packs, d->rank_slots, N, d->max_dev, L, e0, e1);
    x->ops->shared_sync(x->ctx, d->shared);
    if (st != DT_OK) return st;
    for (int q = 0; q < N; q++) { /* rank q's range, tensor by tensor, into slot 0 */
        const int64_t q0 = element_of_rank(d, q), q1 = element_of_rank(d, q + 1);
        const float *from = (const float *)((const char *)d->shared_base[q] + d->shared_results);
        for (int i = 0; i < P; i++) {
            const int64_t a = q0 > L->first[i] ? q0 : L->first[i];
            const int64_t b = q1 < L->first[i + 1] ? q1 : L->first[i + 1];
            if (a < b)
                dt_backend_upload(m->be, m->params[i].g + (a - L->first[i]), from + (a - q0),
                                  (size_t)(b - a) * sizeof(float));
        }
    }
    return DT_OK;
}

/* exact: per tensor the maxima (across ranks), the int64 sum, one rounding. */
static enum dt_status combine_exact(struct dt_step *d, const struct dt_exact_layout *L)
{
    struct dt_model *m = d->m;
    const int P = m->n_params;
    if (d->shared) return combine_shared(d, L);
    if (ranks(d->x) == 1) { /* + maxima; the tensors the shard ops summed left as they are */
        struct dt_exact_layout rest = *L;
        rest.summed = d->summed;
        return dt_exact_sum(m->be, m->grad_pack, d->max_dev, &rest);
    }
    enum dt_status st = dt_exact_max(m->be, d->max_dev, m->grad_pack, L);
    if (st != DT_OK) return st;
    dt_backend_download(m->be, d->max_bits, d->max_dev, (size_t)P * sizeof *d->max_bits);
    x_max_u32(d->x, d->max_bits, P);
    dt_backend_upload(m->be, d->max_dev, d->max_bits, (size_t)P * sizeof *d->max_bits);
    st = dt_exact_to_fixed(m->be, d->acc_dev, m->grad_pack, d->max_dev, L);
    if (st == DT_OK) st = sum_fixed(d);
    if (st == DT_OK) st = dt_exact_round(m->be, m->grad_pack, d->acc_dev, d->max_dev, L);
    return st;
}

/* The rank's rows [b0, b1) of the global batch, and under exact its shards [s0, s1). */
struct share {
    int64_t s0, s1, b0, b1;
};
static struct share share_of(const struct dt_step *d, int64_t B, int64_t S)
{
    const int N = ranks(d->x), r = rank_of(d->x);
    struct share h = {.s0 = dt_rank_shard(S, N, r), .s1 = dt_rank_shard(S, N, r + 1)};
    h.b0 = dt_shard_row(B, S, h.s0);
    h.b1 = dt_shard_row(B, S, h.s1);
    return h;
}

/* reduction: exact. One pass over the rank's rows with the shards set: every batch
 * reduction leaves one partial per shard in the packed gradients (nets/model.h), the loss
 * one mean per shard (in loss_slots). */
static enum dt_status exact_gradients(struct dt_step *d, const struct dt_batch *batch, int64_t B,
                                      int64_t S, const struct dt_policy *pol)
{
    struct dt_model *m = d->m;
    const struct share h = share_of(d, B, S);
    int64_t *row = dt_xmalloc((size_t)(h.s1 - h.s0 + 1) * sizeof *row);
    for (int64_t s = h.s0; s <= h.s1; s++) row[s - h.s0] = dt_shard_row(B, S, s) - h.b0;
    struct dt_shards sh = {.count = h.s1 - h.s0, .row = row};
    const struct dt_exact_layout L = {
        .tensors = m->n_params, .n = d->n, .first = m->grad_first, .slots = sh.count, .shards = S};
    for (int i = 0; d->summed && i < m->n_params; i++) { /* the last step's maxima: hints */
        d->summed_before[i] = d->summed[i];
        d->summed[i] = DT_EXACT_UNSUMMED;
    }
    if (d->summed && m->passes == 1) /* one rank holds every shard and one pass writes each
                                      * gradient's partials once (more passes add theirs into
                                      * the slots): a shard op may sum its own partials */
        sh.pack = m->grad_pack, sh.layout = &L, sh.summed = d->summed, sh.hint = d->summed_before;
    memset(d->loss_slots, 0, (size_t)S * sizeof(float));
    const struct dt_batch mine = dt_batch_from(batch, h.b0, m->in_dim);
    enum dt_status st =
        dt_model_gradients_sharded(m, &mine, h.b1 - h.b0, B, &sh, pol, d->loss_slots + h.s0);
    free(row);
    return st;
}

/* reduction: exact, the combination: every shard's partials added exactly, across ranks.
 * The maxima it used are read with the step's end (exact_finish checks them). */
static enum dt_status exact_combine(struct dt_step *d)
{
    struct dt_model *m = d->m;
    const int P = m->n_params;
    const struct share h = share_of(d, d->B, d->S);
    const struct dt_exact_layout L = {
        .tensors = P, .n = d->n, .first = m->grad_first, .slots = h.s1 - h.s0, .shards = d->S};
    DT_FORWARD_IF_ERROR(combine_exact(d, &L));
    dt_backend_read_deferred(m->be, d->max_bits, d->max_dev, (size_t)P * sizeof *d->max_bits);
    return DT_OK;
}

/* After the step's end: a non-finite maximum fails the step (the same maxima on every rank,
 * so every rank fails alike); the loss from every shard's mean, gathered (one rank holds
 * each slot and the others add +0, so the float sum is exact in any order), weighted by its
 * rows in shard order. */
static enum dt_status exact_finish(struct dt_step *d, float *loss)
{
    struct dt_model *m = d->m;
    const int64_t B = d->B, S = d->S;
    const struct share h = share_of(d, B, S);
    for (int i = 0; i < m->n_params; i++)
        if (d->max_bits[i] >= 0x7f800000u)
            return dt_error_set(
                &m->err, DT_ERR_NUMERIC,
                "%s gradient: non-finite (%s) in a shard at step %" PRId64 " (reduction: exact)",
                m->params[i].name, d->max_bits[i] > 0x7f800000u ? "nan" : "inf", m->step);
    dt_model_finish_loss(m, h.s1 - h.s0, d->loss_slots + h.s0);
    x_sum_f32(d->x, d->loss_slots, S);
    double total = 0.0;
    for (int64_t s = 0; s < S; s++)
        total +=
            (double)d->loss_slots[s] * (double)(dt_shard_row(B, S, s + 1) - dt_shard_row(B, S, s));
    *loss = (float)(total / (double)B);
    return DT_OK;
}

/* unordered: the exchange's float sum, on the device when it can. */
static enum dt_status sum_unordered(struct dt_step *d)
{
    struct dt_model *m = d->m;
    if (device_sum(d)) {
        void **buf = dt_xmalloc((size_t)m->n_params * sizeof *buf);
        for (int i = 0; i < m->n_params; i++) buf[i] = m->params[i].g;
        enum dt_status st =
            d->x->ops->sum_device(d->x->ctx, m->be, buf, d->n, m->n_params, false, &m->err);
        free(buf);
        return st;
    }
    stage_gradients(d);
    x_sum_f32(d->x, d->stage, d->total);
    unstage_gradients(d, d->stage);
    return DT_OK;
}

/* fixed: every rank's gradient gathered, added in rank order. */
static void sum_rank_order(struct dt_step *d)
{
    const int N = ranks(d->x);
    float *mine = d->stage;
    stage_gradients(d);
    x_gather(d->x, mine, d->gather, d->total * (int64_t)sizeof(float));
    memcpy(mine, d->gather, (size_t)d->total * sizeof(float));
    for (int q = 1; q < N; q++) {
        const float *other = d->gather + (int64_t)q * d->total;
        for (int64_t e = 0; e < d->total; e++) mine[e] += other[e];
    }
    unstage_gradients(d, mine);
}

/* unordered, fixed: the gradient over the rank's rows (loss_slots[0]: their mean loss). */
static enum dt_status rank_gradients(struct dt_step *d, const struct dt_batch *batch, int64_t B,
                                     int64_t S, const struct dt_policy *pol)
{
    struct dt_model *m = d->m;
    const struct share h = share_of(d, B, S);
    d->loss_slots[0] = NAN;
    const struct dt_batch mine = dt_batch_from(batch, h.b0, m->in_dim);
    return dt_model_gradients(m, &mine, h.b1 - h.b0, B, pol, &d->loss_slots[0]);
}

/* unordered, fixed: the ranks' gradients added (by the exchange, or in rank order). */
static enum dt_status rank_combine(struct dt_step *d, const struct dt_policy *pol)
{
    if (!dt_reduction_ordered(pol)) return sum_unordered(d);
    sum_rank_order(d);
    return DT_OK;
}

/* After the step's end: the loss from the ranks' means weighted by their rows (the
 * exchange's sum, or gathered and added in rank order). */
static void rank_finish(struct dt_step *d, const struct dt_policy *pol, float *loss)
{
    const int N = ranks(d->x);
    const struct share h = share_of(d, d->B, d->S);
    dt_model_finish_loss(d->m, 1, &d->loss_slots[0]);
    const double part = (double)d->loss_slots[0] * (double)(h.b1 - h.b0);
    double sum = part;
    if (!dt_reduction_ordered(pol)) {
        x_sum_f64(d->x, &sum, 1);
    } else {
        double *parts = dt_xmalloc((size_t)N * sizeof *parts);
        x_gather(d->x, &part, parts, sizeof part);
        sum = 0.0;
        for (int q = 0; q < N; q++) sum += parts[q];
        free(parts);
    }
    *loss = (float)(sum / (double)d->B);
}

/* ---- statistics per shard (batch normalisation: nets/model.h, stats_per_shard) ------------ */

/* Before the forward: the shards of the rank's rows, at every level (the statistics are per
 * canonical shard whatever the reduction, so they do not follow the rank count). */
static void set_shards(const struct dt_exchange *x, struct dt_model *m, int64_t B, int64_t S)
{
    if (!m->stats_per_shard) return;
    const int N = ranks(x), r = rank_of(x);
    dt_model_set_shards(m, B, S, dt_rank_shard(S, N, r), dt_rank_shard(S, N, r + 1));
}

/* After the combination: every shard's statistics -- the other ranks' gathered, each slot
 * from the one rank that holds it and +0 from the rest, so the float sum is exact in any
 * order -- move the model's buffers in shard order (ops->update_buffers). */
static enum dt_status update_buffers(const struct dt_exchange *x, struct dt_model *m,
                                     const struct dt_policy *pol)
{
    if (!m->stats_per_shard || !m->ops->update_buffers) return DT_OK;
    const int64_t P = m->stats_per_shard, S = m->shards_total, mine = m->shard_count;
    DT_ASSERT(mine >= 1);
    if (!several(x)) return m->ops->update_buffers(m, m->stats, pol);
    float *all = dt_xcalloc((size_t)(S * P), sizeof *all);
    dt_backend_download(m->be, all + m->shard0 * P, m->stats, (size_t)(mine * P) * sizeof *all);
    x_sum_f32(x, all, S * P);
    if (m->stats_all_room < S) {
        dt_backend_free(m->be, m->stats_all);
        m->stats_all = dt_backend_alloc(m->be, (size_t)(S * P) * sizeof *all);
        m->stats_all_room = S;
    }
    dt_backend_upload(m->be, m->stats_all, all, (size_t)(S * P) * sizeof *all);
    free(all);
    return m->ops->update_buffers(m, m->stats_all, pol);
}

/* Set up d for m under pol (again when the model, exchange or reduction changed; the graph
 * state is the caller's, kept). */
static void prepare(struct dt_step *d, struct dt_model *m, const struct dt_exchange *x,
                    int64_t shards, const struct dt_policy *pol)
{
    if (d->m == m && d->x == x && d->exact == dt_reduction_exact(pol)) return;
    const struct dt_step_graph keep = d->graph;
    if (d->m) free_buffers(d);
    dt_step_init(d, m, shards, pol, x);
    d->graph = keep;
}

/* The step up to its end: load -> forward -> loss -> backward, the combination, the
 * data-free term, clipping, the update -- what a device queues (or a capture holds). */
static enum dt_status step_body(struct dt_step *d, struct dt_model *m, const struct dt_exchange *x,
                                const struct dt_batch *batch, int64_t B, int64_t shards,
                                const struct dt_sgd_options *opt, const struct dt_policy *pol,
                                float *loss)
{
    const bool combine = dt_step_needs_combine(pol, x), exact = dt_reduction_exact(pol);
    DT_ASSERT(!combine || (shards >= ranks(x) && shards <= B));
    if (combine) prepare(d, m, x, shards, pol);
    dt_model_begin_step(m);
    set_shards(x, m, B, shards);
    enum dt_status st;
    /* load -> forward -> loss -> backward: the whole batch, or the rank's rows (under
     * exact with one partial per shard) */
    if (!combine) st = dt_model_gradients(m, batch, B, B, pol, loss);
    else
        st = exact ? exact_gradients(d, batch, B, shards, pol)
                   : rank_gradients(d, batch, B, shards, pol);
    /* combine across shards and ranks (every rank learns whether one failed first) */
    if (combine) {
        d->B = B;
        d->S = shards;
        st = agree_on_failure(d, st);
    }
    /* the buffers (running statistics) from every shard's statistics: its exchange where
     * every rank agrees it got here, before anything that may fail on one rank alone */
    if (st == DT_OK) st = update_buffers(x, m, pol);
    m->shard_count = 0; /* a forward outside a step: its rows one shard */
    if (combine && st == DT_OK) st = exact ? exact_combine(d) : rank_combine(d, pol);
    /* the data-free term, once; clip; update */
    if (st == DT_OK) st = dt_model_finish_gradients(m, pol);
    if (st == DT_OK) st = dt_model_clip(m, opt, pol);
    if (st == DT_OK) st = dt_model_update(m, opt, pol);
    return st;
}

/* The step's end: the device's one wait, the deferred checks and values read; then the
 * loss, from what was read (every rank reaches here, so its exchanges pair up). */
static enum dt_status step_finish(struct dt_step *d, struct dt_model *m,
                                  const struct dt_exchange *x, const struct dt_policy *pol,
                                  enum dt_status st, float *loss)
{
    st = dt_model_step_end(m, st);
    if (st != DT_OK) return st;
    if (!dt_step_needs_combine(pol, x)) dt_model_finish_loss(m, 1, loss);
    else if (dt_reduction_exact(pol)) st = exact_finish(d, loss);
    else rank_finish(d, pol, loss);
    return st;
}

static enum dt_status eager_step(struct dt_step *d, struct dt_model *m, const struct dt_exchange *x,
                                 const struct dt_batch *batch, int64_t B, int64_t shards,
                                 const struct dt_sgd_options *opt, const struct dt_policy *pol,
                                 float *loss)
{
    const enum dt_status st = step_body(d, m, x, batch, B, shards, opt, pol, loss);
    return step_finish(d, m, x, pol, st, loss);
}

/* ---- the step as one graph (dt_step_use_graphs) ------------------------------------------ */

void dt_step_use_graphs(struct dt_step *d, bool on)
{
    dt_backend_graph_free(d->graph.be, d->graph.exec);
    memset(&d->graph, 0, sizeof d->graph);
    d->graph.want = on;
}

void dt_step_graph_summary(const struct dt_step *d, char *buf, size_t size)
{
    const struct dt_step_graph *g = &d->graph;
    char exec[200];
    dt_backend_graph_describe(g->be, g->exec, exec, sizeof exec);
    if (!g->want) snprintf(buf, size, "off");
    else if (g->off) snprintf(buf, size, "off %s", g->why);
    else if (!g->checked) snprintf(buf, size, "not checked yet%s%s", g->why[0] ? ": " : "", g->why);
    else
        snprintf(buf, size,
                 "checked at step %" PRId64 " (%s); %" PRId64
                 " steps launched as one graph, %" PRId64 " ran uncaptured%s%s%s; captures: %s",
                 g->checked_at,
                 g->checked_bits ? "bit for bit" : "within its tolerance: no bits promised",
                 g->launched, g->uncaptured, g->why[0] ? " (last: " : "", g->why,
                 g->why[0] ? ")" : "", exec);
}

/* Graphs off for the rest of the run, saying why once. */
static void graphs_off(struct dt_step_graph *g, int64_t step, const char *why)
{
    g->off = true;
    snprintf(g->why, sizeof g->why, "from step %" PRId64 ": %.280s", step, why);
    fprintf(stderr, "detrain: CUDA graphs off %s\n", g->why);
}

/* Whether this step may be captured: a step of the same shape ran before it (its first-use
 * allocations and algorithm choices made), one process, a resident batch. */
static bool may_capture(struct dt_step *d, struct dt_model *m, const struct dt_exchange *x,
                        const struct dt_batch *batch, int64_t B, int64_t shards,
                        const struct dt_policy *pol)
{
    struct dt_step_graph *g = &d->graph;
    if (!g->want || g->off) return false;
    if (several(x)) {
        graphs_off(g, m->step + 1, "more than one rank (the exchange waits inside the step)");
        return false;
    }
    if (!batch->set) {
        graphs_off(g, m->step + 1,
                   "the batch comes from host rows (graphs need the resident training set)");
        return false;
    }
    const bool warm = g->warm && g->key.m == m && g->key.pol == pol && g->key.set == batch->set &&
                      g->key.x == x && g->key.B == B && g->key.shards == shards;
    g->key.m = m, g->key.pol = pol, g->key.set = batch->set, g->key.x = x;
    g->key.B = B, g->key.shards = shards;
    g->warm = true;
    return warm;
}

/* The step captured and launched as one graph (*launched), or -- when the capture broke
 * (nothing of it ran) or could not begin -- run uncaptured from the same host state. */
static enum dt_status captured_step(struct dt_step *d, struct dt_model *m,
                                    const struct dt_exchange *x, const struct dt_batch *batch,
                                    int64_t B, int64_t shards, const struct dt_sgd_options *opt,
                                    const struct dt_policy *pol, float *loss, bool *launched)
{
    struct dt_step_graph *g = &d->graph;
    const int64_t step0 = m->step;
    struct dt_error err = {0};
    *launched = false;
    if (dt_backend_graph_begin(m->be, &err) != DT_OK) { /* not now (profiled, ...) */
        g->uncaptured++;
        snprintf(g->why, sizeof g->why, "step %" PRId64 ": %.280s", step0 + 1, err.msg);
        return eager_step(d, m, x, batch, B, shards, opt, pol, loss);
    }
    const enum dt_status body = step_body(d, m, x, batch, B, shards, opt, pol, loss);
    if (g->be != m->be) { /* another backend's graph is no use here */
        dt_backend_graph_free(g->be, g->exec);
        g->exec = NULL;
        g->be = m->be;
    }
    const enum dt_status end = dt_backend_graph_end(m->be, &g->exec, body == DT_OK, &err);
    if (body == DT_OK && end == DT_OK) {
        *launched = true;
        g->broken_in_a_row = 0;
        return step_finish(d, m, x, pol, DT_OK, loss);
    }
    /* nothing ran: the step again, uncaptured, from the step count it began with (an op's
     * own failure then speaks in its usual words; the capture's algorithm notes dropped) */
    m->step = step0;
    (void)dt_backend_take_algo_notes(m->be, NULL, 0);
    if (end != DT_OK) { /* the capture broke (the ops' failure, if any, followed from it) */
        g->uncaptured++;
        snprintf(g->why, sizeof g->why, "step %" PRId64 ": %.280s", step0 + 1, err.msg);
        if (++g->broken_in_a_row >= 2) graphs_off(g, step0 + 1, err.msg);
    }
    return eager_step(d, m, x, batch, B, shards, opt, pol, loss);
}

/* The self-check's comparison of the captured step's state g with the uncaptured one's e
 * (both from state b): "" when they agree, else what differs. A policy that promises the
 * same bits at every run must agree bit for bit (the first tensor that differs is named).
 * One that does not (fast: float atomics, unordered sums, algorithms chosen by timing) gives
 * other bits at every run with or without a graph, so its check asks the weights' change to
 * agree within DT_GRAPH_FAST_TOLERANCE of the uncaptured change (both as Euclidean norms
 * over every weight; float atomics alone stay orders of magnitude below it, though
 * AdamW may flip the sign of an update whose gradient is near zero), the loss within 1e-4. */
#define DT_GRAPH_FAST_TOLERANCE 0.05
static void check_difference(const struct dt_model_state *b, const struct dt_model_state *g,
                             const struct dt_model_state *e, float gl, float el,
                             const struct dt_model *m, bool bits, char *buf, size_t size)
{
    buf[0] = '\0';
    double diff = 0.0, change = 0.0, worst = 0.0;
    int at = -1;
    for (int i = 0; i < m->n_params; i++) {
        const size_t bytes = (size_t)m->params[i].n * sizeof(float);
        if (bits) {
            const char *what =
                memcmp(g->w[i], e->w[i], bytes)   ? "weights"
                : memcmp(g->v[i], e->v[i], bytes) ? "first moment or velocity"
                : (!g->s[i] != !e->s[i]) || (g->s[i] && memcmp(g->s[i], e->s[i], bytes))
                    ? "second moment"
                    : NULL;
            if (what) {
                snprintf(buf, size, "%s (%s)", m->params[i].name, what);
                return;
            }
            continue;
        }
        double d = 0.0;
        for (int64_t k = 0; k < m->params[i].n; k++) {
            const double x = (double)g->w[i][k] - (double)e->w[i][k];
            const double c = (double)e->w[i][k] - (double)b->w[i][k];
            d += x * x;
            change += c * c;
        }
        diff += d;
        if (d > worst) worst = d, at = i;
    }
    if (bits) {
        if (memcmp(&gl, &el, sizeof gl) != 0) snprintf(buf, size, "the loss");
        return;
    }
    if (sqrt(diff) > DT_GRAPH_FAST_TOLERANCE * sqrt(change))
        snprintf(buf, size,
                 "the weights' change beyond %g of the uncaptured change (%.3g of it, most in %s)",
                 DT_GRAPH_FAST_TOLERANCE, change > 0 ? sqrt(diff / change) : INFINITY,
                 m->params[at].name);
    else if (!(fabs((double)gl - (double)el) <= 1e-4 * fabs((double)el)))
        snprintf(buf, size, "the loss beyond 1e-4 (%.9g against %.9g)", (double)gl, (double)el);
}

/* The self-check: the state saved, the step launched as a graph, its result kept, the
 * state loaded back and the step run uncaptured; graphs stay on only when the two agree
 * bit for bit. The uncaptured result is the step's. */
static enum dt_status checked_step(struct dt_step *d, struct dt_model *m,
                                   const struct dt_exchange *x, const struct dt_batch *batch,
                                   int64_t B, int64_t shards, const struct dt_sgd_options *opt,
                                   const struct dt_policy *pol, float *loss)
{
    struct dt_step_graph *g = &d->graph;
    struct dt_model_state before = {0}, graph = {0}, eager = {0};
    dt_model_state_save(&before, m);
    bool launched = false;
    float graph_loss = NAN;
    enum dt_status st = captured_step(d, m, x, batch, B, shards, opt, pol, &graph_loss, &launched);
    if (launched && st == DT_OK) dt_model_state_save(&graph, m);
    if (launched) { /* the step again, uncaptured, from the same state (its notes kept) */
        dt_model_state_load(&before, m);
        (void)dt_backend_take_algo_notes(m->be, NULL, 0);
        st = eager_step(d, m, x, batch, B, shards, opt, pol, loss);
    } else {
        *loss = graph_loss;
    }
    if (launched && st == DT_OK) {
        dt_model_state_save(&eager, m);
        char diff[200];
        if (graph.w)
            check_difference(&before, &graph, &eager, graph_loss, *loss, m,
                             dt_policy_same_bits_every_run(pol), diff, sizeof diff);
        else snprintf(diff, sizeof diff, "the captured step failed, the uncaptured one did not");
        if (diff[0]) {
            char why[300];
            snprintf(why, sizeof why,
                     "the self-check's captured step differed from the uncaptured one in %s", diff);
            graphs_off(g, m->step, why);
        } else {
            g->checked = true;
            g->checked_bits = dt_policy_same_bits_every_run(pol);
            g->checked_at = m->step;
            g->why[0] = '\0';
        }
    }
    dt_model_state_free(&before);
    dt_model_state_free(&graph);
    dt_model_state_free(&eager);
    return st;
}

enum dt_status dt_step_train(struct dt_step *d, struct dt_model *m, const struct dt_exchange *x,
                             const struct dt_batch *batch, int64_t B, int64_t shards,
                             const struct dt_sgd_options *opt, const struct dt_policy *pol,
                             float *loss)
{
    if (!may_capture(d, m, x, batch, B, shards, pol))
        return eager_step(d, m, x, batch, B, shards, opt, pol, loss);
    if (!d->graph.checked) return checked_step(d, m, x, batch, B, shards, opt, pol, loss);
    bool launched = false;
    const enum dt_status st = captured_step(d, m, x, batch, B, shards, opt, pol, loss, &launched);
    if (launched) d->graph.launched++;
    return st;
}

enum dt_status dt_model_train_step_batch(struct dt_model *m, const struct dt_batch *b, int64_t B,
                                         const struct dt_sgd_options *opt,
                                         const struct dt_policy *pol, float *loss)
{
    struct dt_step d;
    memset(&d, 0, sizeof d);
    const enum dt_status st = dt_step_train(&d, m, NULL, b, B, 1, opt, pol, loss);
    if (d.m) dt_step_free(&d);
    return st;
}

enum dt_status dt_model_train_step(struct dt_model *m, const float *x, const uint8_t *y, int64_t B,
                                   const struct dt_sgd_options *opt, const struct dt_policy *pol,
                                   float *loss)
{
    const struct dt_batch b = {.x = x, .y = y};
    return dt_model_train_step_batch(m, &b, B, opt, pol, loss);
}
