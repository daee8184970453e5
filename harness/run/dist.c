/* Data parallelism over MPI ranks: see dist.h for the rules. MPI is optional at build time
 * (DETRAIN_MPI=AUTO|ON|OFF); without it every call here is its one-rank form. */
#include "harness/run/dist.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "determinism/fixed_point.h"
#include "harness/run/dist_nccl.h"
#include "nets/backend.h"

#ifdef DETRAIN_HAVE_MPI
#include <mpi.h>
#endif

static struct {
    bool launched, initialised;
    int rank, size, local_rank;
    char library[400];
} g_dist = {false, false, 0, 1, 0, ""};

static int env_int(const char *name, int fallback)
{
    const char *v = getenv(name);
    if (!v || !*v) return fallback;
    char *end;
    long x = strtol(v, &end, 10);
    return *end == '\0' && x >= 0 && x < 1 << 30 ? (int)x : fallback;
}

/* The launcher's own count of processes, -1 when none launched this one. */
static int launcher_size(void)
{
    static const char *const names[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_SIZE", "PMI_SIZE",
                                        "MPI_LOCALNRANKS"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        int n = env_int(names[i], -1);
        if (n >= 1) return n;
    }
    return getenv("PMIX_RANK") || getenv("PMI_RANK") ? 1 : -1;
}

enum dt_status dt_dist_init(int *argc, char ***argv, struct dt_error *err)
{
    const int launched = launcher_size();
    g_dist.launched = launched >= 1;
#ifdef DETRAIN_HAVE_MPI
    if (g_dist.launched) {
        int provided = 0;
        if (MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
            return dt_error_set(err, DT_ERR_USAGE, "MPI_Init failed");
        g_dist.initialised = true;
        MPI_Comm_rank(MPI_COMM_WORLD, &g_dist.rank);
        MPI_Comm_size(MPI_COMM_WORLD, &g_dist.size);
        MPI_Comm local;
        MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, g_dist.rank, MPI_INFO_NULL,
                            &local);
        MPI_Comm_rank(local, &g_dist.local_rank);
        MPI_Comm_free(&local);
        /* errors come back as codes, so a failed call is named instead of aborting */
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    }
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_Get_library_version(version, &len);
    version[strcspn(version, ",\n")] = '\0';
    snprintf(g_dist.library, sizeof g_dist.library, "%s", version);
#else
    (void)argc;
    (void)argv;
    snprintf(g_dist.library, sizeof g_dist.library, "MPI not built in");
    if (launched > 1)
        return dt_error_set(err, DT_ERR_USAGE,
                            "started by an MPI launcher as one of %d processes, but this "
                            "detrain was built without MPI (DETRAIN_MPI=OFF or no MPI found): "
                            "each process would train alone and write the same files; "
                            "install libopenmpi-dev (scripts/setup.sh) and rebuild",
                            launched);
#endif
#ifdef DETRAIN_HAVE_NCCL
    size_t used = strlen(g_dist.library);
    snprintf(g_dist.library + used, sizeof g_dist.library - used, "; %s", dt_dist_nccl_version());
#endif
    return DT_OK;
}

void dt_dist_finalize(void)
{
#ifdef DETRAIN_HAVE_MPI
    if (g_dist.initialised) MPI_Finalize();
#endif
    g_dist.initialised = false;
}

void dt_dist_abort(int code)
{
#ifdef DETRAIN_HAVE_MPI
    if (g_dist.initialised && g_dist.size > 1) MPI_Abort(MPI_COMM_WORLD, code);
#endif
    exit(code);
}

int dt_dist_rank(void) { return g_dist.rank; }
int dt_dist_size(void) { return g_dist.size; }
int dt_dist_local_rank(void) { return g_dist.local_rank; }
bool dt_dist_launched(void) { return g_dist.launched; }
const char *dt_dist_library(void)
{
    return g_dist.library[0] ? g_dist.library : "MPI not initialised";
}

bool dt_dist_have_mpi(void)
{
#ifdef DETRAIN_HAVE_MPI
    return true;
#else
    return false;
#endif
}

bool dt_dist_have_nccl(void)
{
#ifdef DETRAIN_HAVE_NCCL
    return true;
#else
    return false;
#endif
}

int64_t dt_dist_shard_row(int64_t B, int64_t S, int64_t s)
{
    return (int64_t)(((__int128)s * B) / S); /* no overflow for any batch */
}

int64_t dt_dist_rank_shard(int64_t S, int N, int r) { return ((int64_t)r * S) / N; }

bool dt_dist_step_needed(const struct dt_model *m, const struct dt_policy *pol)
{
    if (!dt_model_splits_step(m)) return false; /* one rank only (dt_dist_check) */
    return g_dist.size > 1 || dt_reduction_exact(pol);
}

enum dt_status dt_dist_check(const struct dt_model *m, int64_t batch, int64_t shards,
                             struct dt_error *err)
{
    if (shards < 1 || shards > batch)
        return dt_error_set(err, DT_ERR_CONFIG,
                            "train.shards is %" PRId64 " but must lie in [1, train.batch = %" PRId64
                            "]: every shard holds at least one example",
                            shards, batch);
    if (g_dist.size > shards)
        return dt_error_set(err, DT_ERR_CONFIG,
                            "%d ranks but train.shards is %" PRId64 ": every rank needs at least "
                            "one shard of the batch; set train.shards to %d or more (a multiple "
                            "of every rank count you compare; the digests at reduction: exact do "
                            "not depend on the rank count, only on train.shards)",
                            g_dist.size, shards, g_dist.size);
    if (g_dist.size > 1 && !dt_model_splits_step(m))
        return dt_error_set(err, DT_ERR_UNSUPPORTED,
                            "model %s runs its own training step (several forward/backward "
                            "passes per step) and does not run on several ranks in this "
                            "version; run it with one process",
                            m->ops->kind);
    return DT_OK;
}

/* ---- collectives on host memory (the one-rank forms when MPI is not there) ------------ */

#ifdef DETRAIN_HAVE_MPI
static bool multi(void) { return g_dist.initialised && g_dist.size > 1; }
#define MPI_OR_FAIL(call)                                                                          \
    do {                                                                                           \
        int rc_ = (call);                                                                          \
        if (rc_ != MPI_SUCCESS) {                                                                  \
            char msg_[MPI_MAX_ERROR_STRING];                                                       \
            int len_ = 0;                                                                          \
            MPI_Error_string(rc_, msg_, &len_);                                                    \
            fprintf(stderr, "detrain: rank %d: %s failed: %s\n", g_dist.rank, #call, msg_);        \
            dt_dist_abort(1);                                                                      \
        }                                                                                          \
    } while (0)
#endif

static void allreduce_max_u32(uint32_t *v, int n)
{
#ifdef DETRAIN_HAVE_MPI
    if (multi())
        MPI_OR_FAIL(MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_UINT32_T, MPI_MAX, MPI_COMM_WORLD));
#else
    (void)v;
    (void)n;
#endif
}

static void allreduce_sum_i64(int64_t *v, int64_t n)
{
#ifdef DETRAIN_HAVE_MPI
    for (int64_t at = 0; multi() && at < n; at += 1 << 30) {
        int k = (int)(n - at < (1 << 30) ? n - at : 1 << 30);
        MPI_OR_FAIL(MPI_Allreduce(MPI_IN_PLACE, v + at, k, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD));
    }
#else
    (void)v;
    (void)n;
#endif
}

static void allreduce_sum_f32(float *v, int64_t n)
{
#ifdef DETRAIN_HAVE_MPI
    for (int64_t at = 0; multi() && at < n; at += 1 << 30) {
        int k = (int)(n - at < (1 << 30) ? n - at : 1 << 30);
        MPI_OR_FAIL(MPI_Allreduce(MPI_IN_PLACE, v + at, k, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD));
    }
#else
    (void)v;
    (void)n;
#endif
}

static void allgather_bytes(const void *send, void *recv, int64_t bytes)
{
#ifdef DETRAIN_HAVE_MPI
    if (multi()) {
        DT_ASSERT(bytes < INT32_MAX);
        MPI_OR_FAIL(
            MPI_Allgather(send, (int)bytes, MPI_BYTE, recv, (int)bytes, MPI_BYTE, MPI_COMM_WORLD));
        return;
    }
#endif
    memcpy(recv, send, (size_t)bytes);
}

int dt_dist_max_status(int status, int *rank_out)
{
    int pair[2] = {status, -g_dist.rank}; /* the highest status, then the lowest rank */
#ifdef DETRAIN_HAVE_MPI
    if (multi())
        MPI_OR_FAIL(MPI_Allreduce(MPI_IN_PLACE, pair, 1, MPI_2INT, MPI_MAXLOC, MPI_COMM_WORLD));
#endif
    if (rank_out) *rank_out = pair[0] ? -pair[1] : -1;
    return pair[0];
}

void dt_dist_barrier(void)
{
#ifdef DETRAIN_HAVE_MPI
    if (multi()) MPI_OR_FAIL(MPI_Barrier(MPI_COMM_WORLD));
#endif
}

/* ---- the step ----------------------------------------------------------------------- */

void dt_dist_step_init(struct dt_dist_step *d, struct dt_model *m, int64_t shards,
                       const struct dt_policy *pol)
{
    memset(d, 0, sizeof *d);
    d->m = m;
    d->offset = dt_xcalloc((size_t)m->n_params + 1, sizeof *d->offset);
    d->n = dt_xcalloc((size_t)m->n_params + 1, sizeof *d->n);
    for (int i = 0; i < m->n_params; i++) {
        d->offset[i + 1] = d->offset[i] + m->params[i].n;
        d->n[i] = m->params[i].n;
    }
    d->total = d->offset[m->n_params];
    const int N = g_dist.size;
    d->exact = dt_reduction_exact(pol);
    if (d->exact) {
        /* the rank's shards: the partials each gradient makes room for */
        const int r = g_dist.rank;
        dt_model_grad_slots(m, dt_dist_rank_shard(shards, N, r + 1) -
                                   dt_dist_rank_shard(shards, N, r));
        d->max_dev = dt_backend_alloc(m->be, (size_t)m->n_params * sizeof *d->max_dev);
        d->max_bits = dt_xcalloc((size_t)m->n_params, sizeof *d->max_bits);
        if (N > 1) {
            d->acc_dev = dt_backend_alloc(m->be, (size_t)d->total * sizeof(int64_t));
            d->acc = dt_xmalloc((size_t)d->total * sizeof(int64_t));
        }
    } else {
        d->stage = dt_xmalloc((size_t)d->total * sizeof(float));
        d->gather = N > 1 ? dt_xmalloc((size_t)(N * d->total) * sizeof(float)) : NULL;
    }
    d->loss_slots = dt_xcalloc((size_t)(shards > N ? shards : N), sizeof(float));
}

void dt_dist_step_free(struct dt_dist_step *d)
{
    if (d->nccl) dt_dist_nccl_close(d->nccl);
    if (d->max_dev) dt_backend_free(d->m->be, d->max_dev);
    if (d->acc_dev) dt_backend_free(d->m->be, d->acc_dev);
    free(d->offset);
    free(d->n);
    free(d->stage);
    free(d->acc);
    free(d->max_bits);
    free(d->gather);
    free(d->loss_slots);
    memset(d, 0, sizeof *d);
}

/* The model's gradients into the staging buffer. */
static void stage_gradients(struct dt_dist_step *d)
{
    struct dt_model *m = d->m;
    float *dst = d->stage;
    for (int i = 0; i < m->n_params; i++)
        dt_backend_download(m->be, dst + d->offset[i], m->params[i].g,
                            (size_t)m->params[i].n * sizeof(float));
}

static void unstage_gradients(struct dt_dist_step *d, const float *src)
{
    struct dt_model *m = d->m;
    for (int i = 0; i < m->n_params; i++)
        dt_backend_upload(m->be, m->params[i].g, src + d->offset[i],
                          (size_t)m->params[i].n * sizeof(float));
}

/* Every rank learns whether any failed; a rank that did not fail says which did. */
static enum dt_status agree_on_failure(struct dt_dist_step *d, enum dt_status st)
{
    int who = -1;
    int worst = dt_dist_max_status(st == DT_OK ? 0 : (int)st, &who);
    if (worst == 0) return DT_OK;
    if (st == DT_OK) {
        dt_error_set(&d->m->err, (enum dt_status)worst,
                     "rank %d failed at step %" PRId64 " (its message is on its stderr)", who,
                     d->m->step);
        return (enum dt_status)worst;
    }
    return st;
}

float dt_dist_fixed_to_float(int64_t acc, int shift)
{
    return dt_fixed_to_float_bounded(acc, dt_fixed_scale(-shift));
}

/* reduction: exact. One pass over the rank's rows with the shards set: every batch
 * reduction leaves one partial per shard in the packed gradients (nets/model.h), the loss
 * one mean per shard. Then, per tensor, one scale from max |partial| over every shard of
 * every rank (an all-reduce of the maximum, which has no order), the partials' exact int64
 * sum and one rounding, all as backend ops (nets/backend.h, dt_exact_*); with several ranks
 * the int64 sums are all-reduced between the conversion and the rounding. */
static enum dt_status step_exact(struct dt_dist_step *d, const struct dt_batch *batch, int64_t B,
                                 int64_t S, const struct dt_policy *pol, float *loss)
{
    struct dt_model *m = d->m;
    const int N = g_dist.size, r = g_dist.rank;
    const int64_t s0 = dt_dist_rank_shard(S, N, r), s1 = dt_dist_rank_shard(S, N, r + 1);
    const int64_t b0 = dt_dist_shard_row(B, S, s0), dim = m->in_dim;
    int64_t *row = dt_xmalloc((size_t)(s1 - s0 + 1) * sizeof *row);
    for (int64_t s = s0; s <= s1; s++) row[s - s0] = dt_dist_shard_row(B, S, s) - b0;
    const struct dt_shards sh = {s1 - s0, row};
    const int P = m->n_params;
    const struct dt_exact_layout L = {P, d->n, m->grad_first, s1 - s0, S};
    memset(d->loss_slots, 0, (size_t)S * sizeof(float));
    const struct dt_batch mine = dt_batch_from(batch, b0, dim);
    enum dt_status st =
        dt_model_gradients_sharded(m, &mine, row[s1 - s0], B, &sh, pol, d->loss_slots + s0);
    free(row);
    DT_FORWARD_IF_ERROR(agree_on_failure(d, st));
    st = dt_exact_max(m->be, d->max_dev, m->grad_pack, &L);
    if (st == DT_OK && N > 1) {
        dt_backend_download(m->be, d->max_bits, d->max_dev, (size_t)P * sizeof *d->max_bits);
        allreduce_max_u32(d->max_bits, P);
        dt_backend_upload(m->be, d->max_dev, d->max_bits, (size_t)P * sizeof *d->max_bits);
    }
    if (st == DT_OK && N == 1) st = dt_exact_sum(m->be, m->grad_pack, d->max_dev, &L);
    if (st == DT_OK && N > 1) {
        st = dt_exact_to_fixed(m->be, d->acc_dev, m->grad_pack, d->max_dev, &L);
        if (st == DT_OK && d->nccl) {
            st = dt_dist_nccl_allreduce_dev(d->nccl, d->acc_dev, d->total, true, &m->err);
        } else if (st == DT_OK) {
            int64_t *acc = d->acc;
            dt_backend_download(m->be, acc, d->acc_dev, (size_t)d->total * sizeof *acc);
            allreduce_sum_i64(acc, d->total);
            dt_backend_upload(m->be, d->acc_dev, acc, (size_t)d->total * sizeof *acc);
        }
        if (st == DT_OK) st = dt_exact_round(m->be, m->grad_pack, d->acc_dev, d->max_dev, &L);
    }
    if (st != DT_OK) return st;
    /* the same maxima on every rank, so every rank fails alike */
    dt_backend_download(m->be, d->max_bits, d->max_dev, (size_t)P * sizeof *d->max_bits);
    for (int i = 0; i < P; i++)
        if (d->max_bits[i] >= 0x7f800000u)
            return dt_error_set(
                &m->err, DT_ERR_NUMERIC,
                "%s gradient: non-finite (%s) in a shard at step %" PRId64 " (reduction: exact)",
                m->params[i].name, d->max_bits[i] > 0x7f800000u ? "nan" : "inf", m->step);
    /* the loss: every shard's mean, gathered (one rank holds each slot and the others add
     * +0, so the float sum is exact in any order), weighted by its rows in shard order */
    allreduce_sum_f32(d->loss_slots, S);
    double total = 0.0;
    for (int64_t s = 0; s < S; s++)
        total += (double)d->loss_slots[s] *
                 (double)(dt_dist_shard_row(B, S, s + 1) - dt_dist_shard_row(B, S, s));
    *loss = (float)(total / (double)B);
    return DT_OK;
}

static enum dt_status step_ranks(struct dt_dist_step *d, const struct dt_batch *batch, int64_t B,
                                 int64_t S, const struct dt_policy *pol, float *loss)
{
    struct dt_model *m = d->m;
    const int N = g_dist.size, r = g_dist.rank;
    const int64_t b0 = dt_dist_shard_row(B, S, dt_dist_rank_shard(S, N, r));
    const int64_t b1 = dt_dist_shard_row(B, S, dt_dist_rank_shard(S, N, r + 1));
    float l = NAN;
    const struct dt_batch mine_rows = dt_batch_from(batch, b0, m->in_dim);
    enum dt_status st = dt_model_gradients(m, &mine_rows, b1 - b0, B, pol, &l);
    DT_FORWARD_IF_ERROR(agree_on_failure(d, st));
    float *mine = d->stage;
    const double rows = (double)(b1 - b0);
    if (!dt_reduction_ordered(pol)) {
        if (d->nccl) {
            st = dt_dist_nccl_allreduce_params(d->nccl, m, &m->err);
            if (st != DT_OK) return st;
        } else {
            stage_gradients(d);
            allreduce_sum_f32(mine, d->total);
            unstage_gradients(d, mine);
        }
        double part = (double)l * rows, sum = part;
#ifdef DETRAIN_HAVE_MPI
        if (multi())
            MPI_OR_FAIL(MPI_Allreduce(&part, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
#endif
        *loss = (float)(sum / (double)B);
        return DT_OK;
    }
    /* fixed: every rank's gradient gathered, added in rank order */
    stage_gradients(d);
    allgather_bytes(mine, d->gather, d->total * (int64_t)sizeof(float));
    memcpy(mine, d->gather, (size_t)d->total * sizeof(float));
    for (int q = 1; q < N; q++) {
        const float *other = d->gather + (int64_t)q * d->total;
        for (int64_t e = 0; e < d->total; e++) mine[e] += other[e];
    }
    unstage_gradients(d, mine);
    double part = (double)l * rows;
    double *parts = dt_xmalloc((size_t)N * sizeof *parts);
    allgather_bytes(&part, parts, sizeof part);
    double sum = 0.0;
    for (int q = 0; q < N; q++) sum += parts[q];
    free(parts);
    *loss = (float)(sum / (double)B);
    return DT_OK;
}

enum dt_status dt_dist_step(struct dt_dist_step *d, const struct dt_batch *batch, int64_t B,
                            int64_t shards, const struct dt_sgd_options *opt,
                            const struct dt_policy *pol, float *loss)
{
    struct dt_model *m = d->m;
    DT_ASSERT(dt_model_splits_step(m) && shards >= g_dist.size && shards <= B);
    /* device memory (the CUDA backend) goes over NCCL when it is built in, also with one
     * rank under mpirun (the exact path's integer all-reduce: a one-GPU check of it) */
    if (!d->nccl && g_dist.initialised && dt_dist_have_nccl() &&
        !dt_backend_host_view(m->be, m->params[0].g))
        DT_FORWARD_IF_ERROR(dt_dist_nccl_open(&d->nccl, m->be, g_dist.rank, g_dist.size, &m->err));
    dt_model_begin_step(m);
    enum dt_status st = dt_reduction_exact(pol) ? step_exact(d, batch, B, shards, pol, loss)
                                                : step_ranks(d, batch, B, shards, pol, loss);
    if (st == DT_OK) st = dt_model_finish_gradients(m, pol); /* once, after the combination */
    if (st != DT_OK) return st;
    return dt_model_sgd(m, opt, pol);
}

enum dt_status dt_dist_train(struct dt_dist_step *d, struct dt_model *m,
                             const struct dt_batch *batch, int64_t B, int64_t shards,
                             const struct dt_sgd_options *opt, const struct dt_policy *pol,
                             float *loss)
{
    if (!dt_dist_step_needed(m, pol)) return dt_model_train_step_batch(m, batch, B, opt, pol, loss);
    if (d->m != m || d->exact != (dt_reduction_exact(pol))) {
        if (d->m) dt_dist_step_free(d);
        dt_dist_step_init(d, m, shards, pol);
    }
    return dt_dist_step(d, batch, B, shards, opt, pol, loss);
}

/* ---- agreement after each step -------------------------------------------------------- */

struct agree_msg {
    int32_t state;
    int32_t has_digest;
    char digest[72];
};

void dt_dist_agree(int state, const char *digest_hex, struct dt_dist_verdict *v)
{
    memset(v, 0, sizeof *v);
    v->stopped_rank = v->differing_rank = -1;
    const int N = g_dist.size;
    struct agree_msg mine;
    memset(&mine, 0, sizeof mine);
    mine.state = (int32_t)state;
    mine.has_digest = digest_hex != NULL;
    if (digest_hex) snprintf(mine.digest, sizeof mine.digest, "%s", digest_hex);
    struct agree_msg *all = dt_xcalloc((size_t)N, sizeof *all);
    allgather_bytes(&mine, all, sizeof mine);
    for (int q = 0; q < N; q++) {
        if (all[q].state > v->stop_code) {
            v->stop_code = all[q].state;
            v->stopped_rank = q;
        }
        if (q > 0 && all[q].has_digest && all[0].has_digest && v->differing_rank < 0 &&
            strcmp(all[q].digest, all[0].digest) != 0) {
            v->differing_rank = q;
            snprintf(v->digest0, sizeof v->digest0, "%s", all[0].digest);
            snprintf(v->digest_bad, sizeof v->digest_bad, "%s", all[q].digest);
        }
    }
    free(all);
}
