/* Data parallelism over MPI ranks: see dist.h for the rules. MPI is optional at build time
 * (DETRAIN_MPI=AUTO|ON|OFF); without it every call here is its one-rank form. */
#include "harness/run/dist.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "harness/run/dist_nccl.h"
#include "nets/backend.h"

#ifdef DETRAIN_HAVE_MPI
#include <mpi.h>
#endif

struct dt_dist {
    bool launched, initialised;
    int rank, size, local_rank;
    bool one_machine; /* every rank on this machine (MPI's shared-memory communicator) */
    char library[400];
    struct dt_exchange x;      /* over MPI_COMM_WORLD; x.ops NULL without MPI */
    struct dt_dist_nccl *nccl; /* opened on the first device sum, for one backend */
};

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

static void library_version(struct dt_dist *d)
{
#ifdef DETRAIN_HAVE_MPI
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_Get_library_version(version, &len);
    version[strcspn(version, ",\n")] = '\0';
    snprintf(d->library, sizeof d->library, "%s", version);
#else
    snprintf(d->library, sizeof d->library, "MPI not built in");
#endif
#ifdef DETRAIN_HAVE_NCCL
    size_t used = strlen(d->library);
    snprintf(d->library + used, sizeof d->library - used, "; %s", dt_dist_nccl_version());
#endif
}

#ifdef DETRAIN_HAVE_MPI
static const struct dt_exchange_ops mpi_ops;
#endif

enum dt_status dt_dist_init(int *argc, char ***argv, struct dt_dist **out, struct dt_error *err)
{
    struct dt_dist *d = dt_xcalloc(1, sizeof *d);
    *out = d;
    d->size = 1;
    const int launched = launcher_size();
    d->launched = launched >= 1;
    library_version(d);
#ifdef DETRAIN_HAVE_MPI
    if (d->launched) {
        int provided = 0;
        if (MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
            return dt_error_set(err, DT_ERR_USAGE, "MPI_Init failed");
        d->initialised = true;
        MPI_Comm_rank(MPI_COMM_WORLD, &d->rank);
        MPI_Comm_size(MPI_COMM_WORLD, &d->size);
        MPI_Comm local;
        MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, d->rank, MPI_INFO_NULL, &local);
        MPI_Comm_rank(local, &d->local_rank);
        int local_size = 0;
        MPI_Comm_size(local, &local_size);
        d->one_machine = local_size == d->size;
        MPI_Comm_free(&local);
        /* errors come back as codes, so a failed call is named instead of aborting */
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
        d->x = (struct dt_exchange){.ops = &mpi_ops, .ctx = d, .rank = d->rank, .size = d->size};
        library_version(d); /* after MPI_Init, as some libraries ask */
    }
#else
    (void)argc;
    (void)argv;
    if (launched > 1)
        return dt_error_set(err, DT_ERR_USAGE,
                            "started by an MPI launcher as one of %d processes, but this "
                            "detrain was built without MPI (DETRAIN_MPI=OFF or no MPI found): "
                            "each process would train alone and write the same files; "
                            "install libopenmpi-dev (scripts/setup.sh) and rebuild",
                            launched);
#endif
    return DT_OK;
}

void dt_dist_finalize(struct dt_dist *d)
{
    if (!d) return;
    if (d->nccl) dt_dist_nccl_close(d->nccl);
#ifdef DETRAIN_HAVE_MPI
    if (d->initialised) MPI_Finalize();
#endif
    free(d);
}

static _Noreturn void dist_abort(const struct dt_dist *d, int code)
{
#ifdef DETRAIN_HAVE_MPI
    if (d->initialised && d->size > 1) MPI_Abort(MPI_COMM_WORLD, code);
#endif
    (void)d;
    exit(code);
}

int dt_dist_rank(const struct dt_dist *d) { return d ? d->rank : 0; }
int dt_dist_size(const struct dt_dist *d) { return d ? d->size : 1; }
int dt_dist_local_rank(const struct dt_dist *d) { return d ? d->local_rank : 0; }
const char *dt_dist_library(const struct dt_dist *d)
{
    return d && d->library[0] ? d->library : "MPI not initialised";
}

const struct dt_exchange *dt_dist_exchange(const struct dt_dist *d)
{
    return d && d->initialised ? &d->x : NULL;
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

enum dt_status dt_dist_check(const struct dt_dist *d, const struct dt_model *m, int64_t batch,
                             int64_t shards, struct dt_error *err)
{
    const int N = dt_dist_size(d);
    if (shards < 1 || shards > batch)
        return dt_error_set(err, DT_ERR_CONFIG,
                            "train.shards is %" PRId64 " but must lie in [1, train.batch = %" PRId64
                            "]: every shard holds at least one example",
                            shards, batch);
    if (N > shards)
        return dt_error_set(err, DT_ERR_CONFIG,
                            "%d ranks but train.shards is %" PRId64 ": every rank needs at least "
                            "one shard of the batch; set train.shards to %d or more (a multiple "
                            "of every rank count you compare; the digests at reduction: exact do "
                            "not depend on the rank count, only on train.shards)",
                            N, shards, N);
    return DT_OK;
}

/* ---- the exchange: collectives over MPI_COMM_WORLD (nets/step.h) ---------------------- */

#ifdef DETRAIN_HAVE_MPI
static bool multi(const struct dt_dist *d) { return d && d->initialised && d->size > 1; }
#define MPI_OR_FAIL(d, call)                                                                       \
    do {                                                                                           \
        int rc_ = (call);                                                                          \
        if (rc_ != MPI_SUCCESS) {                                                                  \
            char msg_[MPI_MAX_ERROR_STRING];                                                       \
            int len_ = 0;                                                                          \
            MPI_Error_string(rc_, msg_, &len_);                                                    \
            fprintf(stderr, "detrain: rank %d: %s failed: %s\n", (d)->rank, #call, msg_);          \
            dist_abort((d), 1);                                                                    \
        }                                                                                          \
    } while (0)

static void mpi_max_u32(void *ctx, uint32_t *v, int n)
{
    struct dt_dist *d = ctx;
    if (multi(d))
        MPI_OR_FAIL(d, MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_UINT32_T, MPI_MAX, MPI_COMM_WORLD));
}

/* in pieces of at most 2^30 elements (MPI counts are int) */
static void mpi_sum(struct dt_dist *d, void *v, int64_t n, MPI_Datatype type, size_t size)
{
    for (int64_t at = 0; multi(d) && at < n; at += 1 << 30) {
        int k = (int)(n - at < (1 << 30) ? n - at : 1 << 30);
        MPI_OR_FAIL(d, MPI_Allreduce(MPI_IN_PLACE, (char *)v + (size_t)at * size, k, type, MPI_SUM,
                                     MPI_COMM_WORLD));
    }
}

static void mpi_sum_i64(void *ctx, int64_t *v, int64_t n)
{
    mpi_sum(ctx, v, n, MPI_INT64_T, sizeof *v);
}
static void mpi_sum_f32(void *ctx, float *v, int64_t n)
{
    mpi_sum(ctx, v, n, MPI_FLOAT, sizeof *v);
}
static void mpi_sum_f64(void *ctx, double *v, int n) { mpi_sum(ctx, v, n, MPI_DOUBLE, sizeof *v); }
#endif

static void mpi_gather(void *ctx, const void *send, void *recv, int64_t bytes)
{
    struct dt_dist *d = ctx;
#ifdef DETRAIN_HAVE_MPI
    if (multi(d)) {
        DT_ASSERT(bytes < INT32_MAX);
        MPI_OR_FAIL(d, MPI_Allgather(send, (int)bytes, MPI_BYTE, recv, (int)bytes, MPI_BYTE,
                                     MPI_COMM_WORLD));
        return;
    }
#endif
    (void)d;
    memcpy(recv, send, (size_t)bytes);
}

static int mpi_max_status(void *ctx, int status, int *rank_out)
{
    struct dt_dist *d = ctx;
    int pair[2] = {status, -dt_dist_rank(d)}; /* the highest status, then the lowest rank */
#ifdef DETRAIN_HAVE_MPI
    if (multi(d))
        MPI_OR_FAIL(d, MPI_Allreduce(MPI_IN_PLACE, pair, 1, MPI_2INT, MPI_MAXLOC, MPI_COMM_WORLD));
#endif
    if (rank_out) *rank_out = pair[0] ? -pair[1] : -1;
    return pair[0];
}

#ifdef DETRAIN_HAVE_NCCL
/* GPU memory over NCCL, also with one rank under a launcher (a one-GPU check of it): one
 * communicator, opened for the backend of the step that first asks. */
static enum dt_status nccl_sum(void *ctx, struct dt_backend *be, void *const *buf,
                               const int64_t *count, int n, bool is_int64, struct dt_error *err)
{
    struct dt_dist *d = ctx;
    if (d->nccl && dt_dist_nccl_backend(d->nccl) != be) {
        dt_dist_nccl_close(d->nccl);
        d->nccl = NULL;
    }
    if (!d->nccl) DT_FORWARD_IF_ERROR(dt_dist_nccl_open(&d->nccl, be, d->rank, d->size, err));
    return dt_dist_nccl_sum(d->nccl, buf, count, n, is_int64, err);
}

static void nccl_release(void *ctx, struct dt_backend *be)
{
    struct dt_dist *d = ctx;
    if (d->nccl && dt_dist_nccl_backend(d->nccl) == be) {
        dt_dist_nccl_close(d->nccl);
        d->nccl = NULL;
    }
}
#endif

#ifdef DETRAIN_HAVE_MPI
/* Shared memory between the ranks of one machine: one MPI window, every rank's part mapped
 * into every process; accessed in a passive epoch opened once (lock_all), ordered by
 * MPI_Win_sync around a barrier (the unified memory model's pattern). Offered when every
 * rank is on this machine and no rank's environment sets DETRAIN_DIST_SHARED=0 (the
 * staged path through MPI's collectives; the same bits, nets/step.c). */
struct shared_mem {
    MPI_Win win;
};

static void *mpi_shared_open(void *ctx, int64_t bytes, void **base)
{
    struct dt_dist *d = ctx;
    if (!multi(d)) return NULL;
    const char *env = getenv("DETRAIN_DIST_SHARED");
    int want = d->one_machine && !(env && strcmp(env, "0") == 0);
    MPI_OR_FAIL(d, MPI_Allreduce(MPI_IN_PLACE, &want, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
    if (!want) return NULL;
    struct shared_mem *h = dt_xcalloc(1, sizeof *h);
    void *mine = NULL;
    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, "alloc_shared_noncontig", "true"); /* each part on its rank's pages */
    MPI_OR_FAIL(d,
                MPI_Win_allocate_shared((MPI_Aint)bytes, 1, info, MPI_COMM_WORLD, &mine, &h->win));
    MPI_Info_free(&info);
    for (int q = 0; q < d->size; q++) {
        MPI_Aint size = 0;
        int unit = 0;
        MPI_OR_FAIL(d, MPI_Win_shared_query(h->win, q, &size, &unit, &base[q]));
        DT_ASSERT(size >= (MPI_Aint)bytes);
    }
    MPI_OR_FAIL(d, MPI_Win_lock_all(MPI_MODE_NOCHECK, h->win));
    return h;
}

static void mpi_shared_sync(void *ctx, void *hv)
{
    struct dt_dist *d = ctx;
    struct shared_mem *h = hv;
    MPI_OR_FAIL(d, MPI_Win_sync(h->win));
    MPI_OR_FAIL(d, MPI_Barrier(MPI_COMM_WORLD));
    MPI_OR_FAIL(d, MPI_Win_sync(h->win));
}

static void mpi_shared_close(void *ctx, void *hv)
{
    struct dt_dist *d = ctx;
    struct shared_mem *h = hv;
    if (!h) return;
    MPI_OR_FAIL(d, MPI_Win_unlock_all(h->win));
    MPI_OR_FAIL(d, MPI_Win_free(&h->win));
    free(h);
}

static const struct dt_exchange_ops mpi_ops = {
    .max_u32 = mpi_max_u32,
    .sum_i64 = mpi_sum_i64,
    .sum_f32 = mpi_sum_f32,
    .sum_f64 = mpi_sum_f64,
    .gather = mpi_gather,
    .max_status = mpi_max_status,
    .shared_open = mpi_shared_open,
    .shared_sync = mpi_shared_sync,
    .shared_close = mpi_shared_close,
#ifdef DETRAIN_HAVE_NCCL
    .sum_device = nccl_sum,
    .release_device = nccl_release,
#endif
};
#endif

int dt_dist_max_status(const struct dt_dist *d, int status, int *rank_out)
{
    return mpi_max_status((void *)d, status, rank_out);
}

void dt_dist_barrier(const struct dt_dist *d)
{
#ifdef DETRAIN_HAVE_MPI
    if (multi(d)) MPI_OR_FAIL(d, MPI_Barrier(MPI_COMM_WORLD));
#else
    (void)d;
#endif
}

/* ---- agreement after each step -------------------------------------------------------- */

struct agree_msg {
    int32_t state;
    int32_t has_digest;
    char digest[72];
};

void dt_dist_agree(const struct dt_dist *d, int state, const char *digest_hex,
                   struct dt_dist_verdict *v)
{
    memset(v, 0, sizeof *v);
    v->stopped_rank = v->differing_rank = -1;
    const int N = dt_dist_size(d);
    struct agree_msg mine;
    memset(&mine, 0, sizeof mine);
    mine.state = (int32_t)state;
    mine.has_digest = digest_hex != NULL;
    if (digest_hex) snprintf(mine.digest, sizeof mine.digest, "%s", digest_hex);
    struct agree_msg *all = dt_xcalloc((size_t)N, sizeof *all);
    mpi_gather((void *)d, &mine, all, sizeof mine);
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
