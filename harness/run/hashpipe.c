/* The hashing pipeline (harness/run/hashpipe.h): synchronous hashing as the training loop has
 * always done it, or two host slots, a snapshot copy per hashed step and one worker thread
 * that hashes while the next steps train. The caller's thread alone writes the trace, in
 * step order, so rows never interleave and a drained pipeline leaves a complete prefix.
 * Data path (docs/DESIGN.md): harness/train -> harness/hashpipe -> harness/hash -> harness/trace.
 */
#include "harness/run/hashpipe.h"

#include <pthread.h>
#include <string.h>

#include "core/util.h"

enum slot_state {
    SLOT_FREE,   /* nothing in it */
    SLOT_QUEUED, /* copy begun, the worker has not finished hashing it */
    SLOT_DONE,   /* digests ready, rows not yet written */
};

struct hash_slot {
    float *host; /* every parameter back to back (dt_backend_host_alloc) */
    int64_t step;
    float loss;
    enum slot_state state;
    uint8_t model_digest[DT_DIGEST_BYTES];
    uint8_t (*tensor_digests)[DT_DIGEST_BYTES]; /* n_params */
};

struct dt_hashpipe {
    struct dt_model *m;
    struct dt_trace_writer *tw; /* NULL: digests only */
    bool per_tensor, async;
    /* asynchronous tree digests where the weights are (tree digest, device memory, or the
     * test hook): dt_backend_digests_out_begin -- on CUDA a snapshot on the training stream,
     * the digests' kernels on the copy stream -- and only the n_params x 32 bytes of digests
     * come back; the worker forms the model digest from them */
    bool device_digests;
    const char **names; /* parameter names, digest order */
    const void **srcs;  /* parameter values (backend memory) */
    size_t *bytes;      /* their sizes */
    int64_t *counts;    /* their element counts */
    /* synchronous path */
    float *staging; /* one tensor, when the backend's memory is not host memory */
    uint8_t (*tensor_digests)[DT_DIGEST_BYTES];
    /* asynchronous path: slots are used alternately, so the oldest outstanding step is in
     * slot `oldest` and the next submit goes to slot (oldest + outstanding) % 2 */
    struct hash_slot slot[2];
    int oldest, outstanding;
    int work; /* worker: the slot it hashes next */
    bool stop, started;
    pthread_t worker;
    pthread_mutex_t mu; /* slot states, stop */
    pthread_cond_t cv;  /* a state changed */
    /* results */
    enum dt_status status; /* first write error (sticky) */
    struct dt_error error;
    char last_hex[DT_DIGEST_HEX];
};

/* Digests of one snapshot: per tensor over its canonical bytes, then the model digest over
 * (name, digest) pairs -- the definition dt_hash_model implements (harness/record/hash.h). */
static void hash_snapshot(struct dt_hashpipe *p, struct hash_slot *s)
{
    const float *v = s->host;
    if (p->device_digests)
        memcpy(s->tensor_digests, s->host, (size_t)p->m->n_tensors * DT_DIGEST_BYTES);
    for (int i = 0; i < p->m->n_tensors && !p->device_digests; i++) {
        dt_tensor_digest_host(s->tensor_digests[i], v, p->counts[i], p->m->tree_digest);
        v += p->counts[i];
    }
    dt_model_digest(s->model_digest, p->names, (const uint8_t(*)[DT_DIGEST_BYTES])s->tensor_digests,
                    p->m->n_tensors);
}

static void *worker_main(void *arg)
{
    struct dt_hashpipe *p = arg;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        struct hash_slot *s = &p->slot[p->work];
        while (s->state != SLOT_QUEUED && !p->stop) pthread_cond_wait(&p->cv, &p->mu);
        if (s->state != SLOT_QUEUED) break; /* stopping, and nothing left to hash */
        pthread_mutex_unlock(&p->mu);
        dt_backend_copy_out_wait(p->m->be);
        hash_snapshot(p, s);
        pthread_mutex_lock(&p->mu);
        s->state = SLOT_DONE;
        p->work ^= 1;
        pthread_cond_broadcast(&p->cv);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

/* The rows of one hashed step: tensors.csv (when per_tensor), then trace.csv; the same
 * calls in the same order as the synchronous loop always made. After a write error nothing
 * more is written, so the files stay a prefix. */
static void write_rows(struct dt_hashpipe *p, int64_t step, float loss,
                       const uint8_t model_digest[DT_DIGEST_BYTES],
                       const uint8_t (*tensor_digests)[DT_DIGEST_BYTES])
{
    char hex[DT_DIGEST_HEX];
    dt_digest_hex(hex, model_digest);
    memcpy(p->last_hex, hex, sizeof hex);
    if (!p->tw || p->status != DT_OK) return;
    enum dt_status st = DT_OK;
    if (p->per_tensor) {
        for (int i = 0; i < p->m->n_tensors && st == DT_OK; i++) {
            char th[DT_DIGEST_HEX];
            dt_digest_hex(th, tensor_digests[i]);
            st = dt_trace_write_tensor(p->tw, step, p->names[i], th, &p->error);
        }
        if (st == DT_OK) st = dt_trace_flush(p->tw, &p->error);
    }
    if (st == DT_OK) st = dt_trace_write_row(p->tw, step, loss, hex, &p->error);
    p->status = st;
}

/* Write the rows of outstanding steps, oldest first, as long as they are hashed; with
 * `block`, first wait for the worker until at most `keep` steps remain outstanding. */
static void collect(struct dt_hashpipe *p, int keep, bool block)
{
    while (p->outstanding > 0) {
        struct hash_slot *s = &p->slot[p->oldest];
        pthread_mutex_lock(&p->mu);
        bool must = block && p->outstanding > keep;
        while (must && s->state != SLOT_DONE) pthread_cond_wait(&p->cv, &p->mu);
        bool done = s->state == SLOT_DONE;
        pthread_mutex_unlock(&p->mu);
        if (!done) return;
        write_rows(p, s->step, s->loss, s->model_digest,
                   (const uint8_t(*)[DT_DIGEST_BYTES])s->tensor_digests);
        pthread_mutex_lock(&p->mu); /* the worker may be reading the state, waiting */
        s->state = SLOT_FREE;
        pthread_mutex_unlock(&p->mu);
        p->oldest ^= 1;
        p->outstanding--;
    }
}

static enum dt_status result(const struct dt_hashpipe *p, struct dt_error *err)
{
    if (p->status != DT_OK && err) *err = p->error;
    return p->status;
}

enum dt_status dt_hashpipe_create(struct dt_hashpipe **out, struct dt_model *m,
                                  struct dt_trace_writer *tw, bool per_tensor, bool async,
                                  struct dt_error *err)
{
    *out = NULL;
    struct dt_hashpipe *p = dt_xcalloc(1, sizeof *p);
    const int n = m->n_tensors;
    p->m = m;
    p->tw = tw;
    p->per_tensor = per_tensor;
    p->async = async;
    p->names = dt_xcalloc((size_t)n + 1, sizeof *p->names); /* + 1: never a 0-byte block */
    p->srcs = dt_xcalloc((size_t)n + 1, sizeof *p->srcs);
    p->bytes = dt_xcalloc((size_t)n + 1, sizeof *p->bytes);
    p->counts = dt_xcalloc((size_t)n + 1, sizeof *p->counts);
    size_t total = 0, largest = 0;
    for (int i = 0; i < n; i++) {
        const struct dt_param *q = &m->params[i];
        p->names[i] = q->name;
        p->srcs[i] = q->w;
        p->counts[i] = q->n;
        p->bytes[i] = (size_t)q->n * sizeof(float);
        total += p->bytes[i];
        largest = p->bytes[i] > largest ? p->bytes[i] : largest;
    }
    p->status = DT_OK;
    if (!async) {
        p->staging = dt_xmalloc(largest ? largest : 1);
        p->tensor_digests = dt_xcalloc((size_t)n + 1, DT_DIGEST_BYTES);
        *out = p;
        return DT_OK;
    }
    p->device_digests = m->tree_digest && n > 0 && !dt_backend_host_view(m->be, m->params[0].w);
    const size_t digest_bytes = (size_t)n * DT_DIGEST_BYTES; /* the slot holds either form */
    for (int k = 0; k < 2; k++) {
        p->slot[k].host = dt_backend_host_alloc(m->be, total > digest_bytes ? total : digest_bytes);
        p->slot[k].tensor_digests = dt_xcalloc((size_t)n + 1, DT_DIGEST_BYTES);
    }
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    int rc = pthread_create(&p->worker, NULL, worker_main, p);
    if (rc != 0) {
        dt_hashpipe_destroy(p);
        return dt_error_set(err, DT_ERR_INTERNAL,
                            "hash.async: cannot start the hashing "
                            "thread: %s",
                            strerror(rc));
    }
    p->started = true;
    *out = p;
    return DT_OK;
}

enum dt_status dt_hashpipe_submit(struct dt_hashpipe *p, int64_t step, float loss,
                                  struct dt_error *err)
{
    if (!p->async) {
        uint8_t md[DT_DIGEST_BYTES];
        dt_hash_model(md, p->tensor_digests, p->m, p->staging);
        write_rows(p, step, loss, md, (const uint8_t(*)[DT_DIGEST_BYTES])p->tensor_digests);
        return result(p, err);
    }
    collect(p, 1, true); /* a free slot: at most one step outstanding */
    struct hash_slot *s = &p->slot[(p->oldest + p->outstanding) % 2];
    DT_ASSERT(s->state == SLOT_FREE); /* only this thread moves a slot out of FREE */
    s->step = step;
    s->loss = loss;
    if (p->device_digests) {
        const enum dt_status st =
            dt_backend_digests_out_begin(p->m->be, (uint8_t *)s->host,
                                         (const float *const *)p->srcs, p->counts, p->m->n_tensors);
        DT_ASSERT_MSG(st == DT_OK, "digests_out_begin failed");
    } else {
        dt_backend_copy_out_begin(p->m->be, s->host, p->srcs, p->bytes, p->m->n_tensors);
    }
    pthread_mutex_lock(&p->mu);
    s->state = SLOT_QUEUED;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    p->outstanding++;
    collect(p, 0, false); /* rows of earlier steps that are ready */
    return result(p, err);
}

enum dt_status dt_hashpipe_drain(struct dt_hashpipe *p, struct dt_error *err)
{
    if (p->async) collect(p, 0, true);
    return result(p, err);
}

void dt_hashpipe_set_device_digests(struct dt_hashpipe *p, bool on)
{
    DT_ASSERT(p->async && p->outstanding == 0 && (!on || p->m->tree_digest));
    p->device_digests = on;
}

const char *dt_hashpipe_last_digest(const struct dt_hashpipe *p) { return p->last_hex; }

bool dt_hashpipe_is_async(const struct dt_hashpipe *p) { return p->async; }

void dt_hashpipe_destroy(struct dt_hashpipe *p)
{
    if (!p) return;
    if (p->async) {
        if (p->started) {
            pthread_mutex_lock(&p->mu);
            p->stop = true;
            pthread_cond_broadcast(&p->cv);
            pthread_mutex_unlock(&p->mu);
            pthread_join(p->worker, NULL);
        }
        pthread_mutex_destroy(&p->mu);
        pthread_cond_destroy(&p->cv);
        for (int k = 0; k < 2; k++) {
            dt_backend_host_free(p->m->be, p->slot[k].host);
            free(p->slot[k].tensor_digests);
        }
    }
    free(p->staging);
    free(p->tensor_digests);
    free(p->names);
    free(p->srcs);
    free(p->bytes);
    free(p->counts);
    free(p);
}
