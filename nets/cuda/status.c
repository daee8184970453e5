/* The CUDA backend's checks that need a device record (nets/backend.h, "deferred checks"):
 * the fixed-point bias gradient (dense.cu) and the fixed-point conv and pooling scatters
 * (conv.cu). Each op asks dt_cuda_check_record for its record. Checks eager (the default):
 * the op's own scratch record, read back at once by dt_cuda_check_now (one wait per op, the
 * message in the op error record as the CPU backend's ops give it). Checks deferred (a training
 * step): a slot of the step's status buffer, noted with the op and the backend's context; the op
 * returns at once and the step's end (dt_cuda_step_end) copies every slot back in one copy
 * and one wait, and names the first fault. One decoder serves both. Values the step needs
 * only after its end (its losses, reduction: exact's maxima: dt_backend_read_deferred) are
 * copied back then too, by the same stream before the same wait, each into a pinned buffer
 * of its own, then into place (a loss finished by the function its op handed over: loss.c's
 * dt_cuda_loss_finish; status.c sits below the ops and calls none by name). */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <string.h>

#include "core/util.h"
#include "nets/cuda/dense_loss.h"
#include "nets/cuda/work.h" /* a recording backend: dt_cuda_recording */

/* A value read with the step's end: its pinned buffer (kept from step to step, grown while
 * idle), where it goes, and for a loss what finishes it. */
#define DT_CUDA_READS_MAX 256
struct deferred_read {
    void *pinned;
    size_t cap, bytes;
    void *dst;
    bool is_loss;
    struct dt_cuda_loss_read loss;
    dt_cuda_loss_finish_fn finish; /* the loss op's own (loss.cu): status.c names no op */
};

struct dt_cuda_status {
    bool defer;
    struct deferred_read read[DT_CUDA_READS_MAX];
    int reads;
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
        else if (kind == DT_CUDA_CHECK_XP) /* the CPU op's words (cpu/matmul_exact.c) */
            snprintf(msg, size, "%s: non-finite input in %s %lld of %s", what,
                     i < len ? "row" : "column", i < len ? i : i - (long long)len,
                     i < len ? "A" : "B");
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
    if (dt_cuda_recording(be)) { /* a recording backend keeps no records: only the switch */
        st->defer = on;
        return;
    }
    if (on && !st->dev) {
        const size_t bytes = DT_CUDA_STATUS_SLOTS * sizeof *st->dev;
        DT_CUDA_CHECK(cudaMalloc((void **)&st->dev, bytes));
        DT_CUDA_CHECK(cudaMallocHost((void **)&st->host, bytes));
    }
    if (!on && (st->used > 0 || st->reads > 0)) { /* unread: read them now (a caller's bug) */
        struct dt_error err;
        memset(&err, 0, sizeof err);
        if (dt_cuda_step_end(be, &err) != DT_OK) fprintf(stderr, "detrain: %s\n", err.msg);
    }
    st->defer = on;
}

void dt_cuda_recorder_reset(struct dt_backend *be)
{
    DT_ASSERT(dt_cuda(be)->recorder);
    dt_cuda_status_forget(be);
}

void dt_cuda_status_forget(struct dt_backend *be)
{
    struct dt_cuda_status *st = status_of(be);
    st->used = 0;
    st->reads = 0;
}

struct dt_cuda_fixed_record *dt_cuda_check_record(struct dt_backend *be, enum dt_cuda_check kind,
                                                  const char *what, int64_t len, int slot,
                                                  bool *deferred)
{
    struct dt_cuda_status *st = status_of(be);
    *deferred = st->defer && st->used < DT_CUDA_STATUS_SLOTS; /* full: this op checks now */
    if (!*deferred) return dt_cuda_scratch(be, slot, sizeof(struct dt_cuda_fixed_record));
    const int k = st->used++;
    if (dt_cuda_recording(be)) return (struct dt_cuda_fixed_record *)dt_cuda_scratch(be, slot, 0);
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
    if (dt_cuda_recording(be)) { /* the read-back's wait; nothing to decode */
        dt_cuda_sync(be);
        return DT_OK;
    }
    struct dt_cuda_fixed_record *h = dt_cuda_host_scratch(be, slot, sizeof *h);
    DT_CUDA_CHECK(
        cudaMemcpyAsync(h, rec, sizeof *h, cudaMemcpyDeviceToHost, (cudaStream_t)c->stream));
    dt_cuda_sync(be);
    char msg[256];
    const enum dt_status s = decode(h, kind, what, len, msg, sizeof msg);
    return s == DT_OK ? s : dt_backend_op_error(be, s, "%s", msg);
}

/* The next read's slot with room for `bytes`, or NULL (checks not deferred, or the step's
 * reads full: the caller reads at once). A buffer grows only while idle: its last copy ran
 * before the previous step's end returned. */
static struct deferred_read *next_read(struct dt_backend *be, size_t bytes)
{
    struct dt_cuda_status *st = status_of(be);
    if (!st->defer || st->reads == DT_CUDA_READS_MAX || !dt_cuda(be)->one_pass) return NULL;
    struct deferred_read *r = &st->read[st->reads];
    if (dt_cuda_recording(be)) return r; /* no buffer: nothing is copied */
    if (r->cap < bytes) {
        /* capturing: no pinned buffer is freed or made (the caller downloads, which breaks
         * the capture: the step reruns uncaptured and grows it then) */
        if (dt_cuda_capture_breaks(be, "a deferred read's buffer grew inside the step"))
            return NULL;
        if (r->pinned) DT_CUDA_CHECK(cudaFreeHost(r->pinned));
        r->cap = bytes + bytes / 2 + 64;
        DT_CUDA_CHECK(cudaMallocHost(&r->pinned, r->cap));
    }
    r->bytes = bytes;
    st->reads++;
    return r;
}

void dt_cuda_read_deferred(struct dt_backend *be, void *host_dst, const void *src, size_t bytes)
{
    struct deferred_read *r = next_read(be, bytes);
    if (!r) {
        dt_backend_download(be, host_dst, src, bytes);
        return;
    }
    if (dt_cuda_recording(be)) return;
    r->dst = host_dst;
    r->is_loss = false;
    DT_CUDA_CHECK(cudaMemcpyAsync(r->pinned, src, bytes, cudaMemcpyDeviceToHost,
                                  (cudaStream_t)dt_cuda(be)->stream));
}

bool dt_cuda_defer_loss(struct dt_backend *be, const void *src, size_t bytes,
                        const struct dt_cuda_loss_read *loss, dt_cuda_loss_finish_fn finish)
{
    struct deferred_read *r = next_read(be, bytes);
    if (!r) return false;
    if (dt_cuda_recording(be)) return true;
    r->dst = NULL;
    r->is_loss = true;
    r->loss = *loss;
    r->finish = finish;
    DT_CUDA_CHECK(cudaMemcpyAsync(r->pinned, src, bytes, cudaMemcpyDeviceToHost,
                                  (cudaStream_t)dt_cuda(be)->stream));
    return true;
}

/* After the step's wait: every deferred read into place, in call order; the first loss
 * that fails (a label out of range) gives the status. */
static enum dt_status finish_reads(struct dt_backend *be, struct dt_cuda_status *st)
{
    enum dt_status first = DT_OK;
    for (int k = 0; k < st->reads; k++) {
        struct deferred_read *r = &st->read[k];
        if (!r->is_loss) {
            memcpy(r->dst, r->pinned, r->bytes);
            continue;
        }
        const enum dt_status s = r->finish(be, r->pinned, &r->loss);
        if (first == DT_OK) first = s;
    }
    st->reads = 0;
    return first;
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
    const enum dt_status read = finish_reads(be, st);
    for (int k = 0; k < n; k++) {
        char msg[256];
        const enum dt_status s = decode(&st->host[k], st->note[k].kind, st->note[k].what,
                                        st->note[k].len, msg, sizeof msg);
        if (s != DT_OK)
            return dt_error_set(err, s, "%s: %s",
                                st->note[k].context[0] ? st->note[k].context : "a gradient", msg);
    }
    if (read != DT_OK) {
        struct dt_error e = {0};
        dt_backend_take_op_error(be, &e);
        return dt_error_set(err, read, "%s", e.msg[0] ? e.msg : "a deferred read failed");
    }
    return DT_OK;
}

void dt_cuda_status_free(struct dt_backend *be)
{
    struct dt_cuda_ctx *c = dt_cuda(be);
    if (!c->status) return;
    if (c->status->dev) cudaFree(c->status->dev);
    if (c->status->host) cudaFreeHost(c->status->host);
    for (int k = 0; k < DT_CUDA_READS_MAX; k++)
        if (c->status->read[k].pinned) cudaFreeHost(c->status->read[k].pinned);
    free(c->status);
    c->status = NULL;
}
