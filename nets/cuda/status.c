/* The CUDA backend's checks that need a device record (nets/backend.h, "deferred checks"):
 * the fixed-point bias gradient (dense.c) and the fixed-point conv and pooling scatters
 * (conv.c). Each op asks dt_cuda_check_record for its record. Checks eager (the default):
 * the op's own scratch record, read back at once by dt_cuda_check_now (one wait per op, the
 * message in the op error record as the CPU backend's ops give it). Checks deferred (a training
 * step): a slot of the step's status buffer, noted with the op and the backend's context; the op
 * returns at once and the step's end (dt_cuda_step_end) copies every slot back in one copy
 * and one wait, and names the first fault. One decoder serves both. */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <string.h>

#include "core/util.h"
#include "nets/cuda/dense_loss.h"

struct dt_cuda_status {
    bool defer;
    struct dt_cuda_fixed_record *dev, *host; /* DT_CUDA_STATUS_SLOTS each */
    int used;
    struct {
        enum dt_cuda_check kind;
        int64_t len;
        char what[40];
        char context[96];
    } note[DT_CUDA_STATUS_SLOTS];
};

/* The op's message for a record: DT_OK, or the status with msg filled (the CPU's words). */
static enum dt_status decode(const struct dt_cuda_fixed_record *h, enum dt_cuda_check kind,
                             const char *what, int64_t len, char *msg, size_t size)
{
    if (h->first_bad != DT_CUDA_NO_INDEX) {
        const long long i = (long long)h->first_bad;
        if (kind == DT_CUDA_CHECK_BIAS)
            snprintf(msg, size, "%s: non-finite input at row %lld, column %lld", what,
                     i / (long long)len, i % (long long)len);
        else if (len > 0)
            snprintf(msg, size, "%s: non-finite gradient at patch row %lld, element %lld", what,
                     i / (long long)len, i % (long long)len);
        else snprintf(msg, size, "%s: non-finite gradient at element %lld", what, i);
        return DT_ERR_NUMERIC;
    }
    if (h->bad_term) {
        snprintf(msg, size, "%s: a fixed-point term exceeded its bound", what);
        return DT_ERR_INTERNAL;
    }
    if (kind == DT_CUDA_CHECK_BIAS && h->overflow_col != DT_CUDA_NO_INDEX) {
        snprintf(msg, size, "%s: fixed-point sum of column %lld overflows the float range", what,
                 (long long)h->overflow_col);
        return DT_ERR_NUMERIC;
    }
    return DT_OK;
}

static struct dt_cuda_status *status_of(struct dt_backend *be)
{
    struct dt_cuda_ctx *c = dt_cuda(be);
    if (!c->status) c->status = dt_xcalloc(1, sizeof *c->status);
    return c->status;
}

void dt_cuda_defer_checks(struct dt_backend *be, bool on)
{
    struct dt_cuda_status *st = status_of(be);
    if (on && !st->dev) {
        const size_t bytes = DT_CUDA_STATUS_SLOTS * sizeof *st->dev;
        DT_CUDA_CHECK(cudaMalloc((void **)&st->dev, bytes));
        DT_CUDA_CHECK(cudaMallocHost((void **)&st->host, bytes));
    }
    if (!on && st->used > 0) { /* records still unread: read them now (a caller's bug) */
        struct dt_error err;
        memset(&err, 0, sizeof err);
        if (dt_cuda_step_end(be, &err) != DT_OK) fprintf(stderr, "detrain: %s\n", err.msg);
    }
    st->defer = on;
}

struct dt_cuda_fixed_record *dt_cuda_check_record(struct dt_backend *be, enum dt_cuda_check kind,
                                                  const char *what, int64_t len, int slot,
                                                  bool *deferred)
{
    struct dt_cuda_status *st = status_of(be);
    *deferred = st->defer && st->used < DT_CUDA_STATUS_SLOTS; /* full: this op checks now */
    if (!*deferred) return dt_cuda_scratch(be, slot, sizeof(struct dt_cuda_fixed_record));
    const int k = st->used++;
    st->note[k].kind = kind;
    st->note[k].len = len;
    snprintf(st->note[k].what, sizeof st->note[k].what, "%s", what);
    snprintf(st->note[k].context, sizeof st->note[k].context, "%s", be->context);
    return &st->dev[k];
}

enum dt_status dt_cuda_check_now(struct dt_backend *be, const struct dt_cuda_fixed_record *rec,
                                 enum dt_cuda_check kind, const char *what, int64_t len, int slot)
{
    struct dt_cuda_ctx *c = dt_cuda(be);
    struct dt_cuda_fixed_record *h = dt_cuda_host_scratch(be, slot, sizeof *h);
    DT_CUDA_CHECK(
        cudaMemcpyAsync(h, rec, sizeof *h, cudaMemcpyDeviceToHost, (cudaStream_t)c->stream));
    dt_cuda_sync(be);
    char msg[256];
    const enum dt_status s = decode(h, kind, what, len, msg, sizeof msg);
    return s == DT_OK ? s : dt_backend_op_error(be, s, "%s", msg);
}

enum dt_status dt_cuda_step_end(struct dt_backend *be, struct dt_error *err)
{
    struct dt_cuda_ctx *c = dt_cuda(be);
    struct dt_cuda_status *st = status_of(be);
    const int n = st->used;
    if (n > 0)
        DT_CUDA_CHECK(cudaMemcpyAsync(st->host, st->dev, (size_t)n * sizeof *st->host,
                                      cudaMemcpyDeviceToHost, (cudaStream_t)c->stream));
    dt_cuda_sync(be); /* the step's one wait */
    st->used = 0;
    for (int k = 0; k < n; k++) {
        char msg[256];
        const enum dt_status s = decode(&st->host[k], st->note[k].kind, st->note[k].what,
                                        st->note[k].len, msg, sizeof msg);
        if (s != DT_OK)
            return dt_error_set(err, s, "%s: %s",
                                st->note[k].context[0] ? st->note[k].context : "a gradient", msg);
    }
    return DT_OK;
}

void dt_cuda_status_free(struct dt_backend *be)
{
    struct dt_cuda_ctx *c = dt_cuda(be);
    if (!c->status) return;
    if (c->status->dev) cudaFree(c->status->dev);
    if (c->status->host) cudaFreeHost(c->status->host);
    free(c->status);
    c->status = NULL;
}
