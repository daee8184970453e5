/* The CUDA backend (host side, C): device selection, memory, the cuBLAS handle and the op
 * table (the helpers every op family uses -- error checks, the one wait, scratch, cuBLAS
 * per policy -- are in nets/cuda/context.c). The op families live in nets/cuda/<family>.cu,
 * host functions beside their kernels (nets/cuda/cuda.h says how each determinism control
 * maps onto the GPU). Data path (docs/DESIGN.md): nets/backend ->
 * nets/cuda. */
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "nets/cuda/cuda.h"
#include "nets/cuda/recorder.h"
#include "nets/cuda/work.h"
#include "nets/cuda/dense_loss.h" /* dt_cuda_one_pass */

/* cuBLAS's workspace for `math: strict`: fixed once per handle and stream, as cuBLAS's
 * reproducibility statement requires (CUBLAS_WORKSPACE_CONFIG=:4096:8 is the same idea
 * for PyTorch); 32 MiB covers what cuBLAS asks for on Hopper. */
#define CUBLAS_WORKSPACE_BYTES ((size_t)32 << 20)

static void cuda_timers_free(struct dt_cuda_ctx *c);

static enum dt_status cuda_init(struct dt_backend *be, const struct dt_backend_options *opt,
                                struct dt_error *err)
{
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0)
        return dt_error_set(err, DT_ERR_UNSUPPORTED,
                            "backend 'cuda': no CUDA device available (%s); use "
                            "backend.device: cpu",
                            e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
    if (opt->gpu < 0 || opt->gpu >= count)
        return dt_error_set(err, DT_ERR_UNSUPPORTED,
                            "backend 'cuda': backend.gpu is %d but this machine has %d CUDA "
                            "device%s (0..%d)",
                            opt->gpu, count, count == 1 ? "" : "s", count - 1);
    struct dt_cuda_ctx *c = dt_xcalloc(1, sizeof *c);
    c->device = opt->gpu;
    c->cublas_mode = -1;
    c->one_pass = dt_cuda_one_pass(); /* read once: the ops ask the context, not the env */
    const char *xp = getenv("DETRAIN_CUDA_XP");
    c->xp_simple = xp && strcmp(xp, "simple") == 0;
    struct cudaDeviceProp prop;
    cudaStream_t stream = NULL, copy_stream = NULL;
    e = cudaSetDevice(c->device);
    if (e == cudaSuccess) e = cudaGetDeviceProperties(&prop, c->device);
    if (e == cudaSuccess) e = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
    if (e == cudaSuccess) e = cudaStreamCreateWithFlags(&copy_stream, cudaStreamNonBlocking);
    if (e == cudaSuccess) e = cudaMalloc(&c->cublas_workspace, CUBLAS_WORKSPACE_BYTES);
    if (e != cudaSuccess) {
        if (stream) cudaStreamDestroy(stream);
        if (copy_stream) cudaStreamDestroy(copy_stream);
        if (c->cublas_workspace) cudaFree(c->cublas_workspace);
        free(c);
        return dt_error_set(err, DT_ERR_UNSUPPORTED, "backend 'cuda': device %d: %s", opt->gpu,
                            cudaGetErrorString(e));
    }
    c->stream = (dt_cuda_stream)stream;
    c->launch =
        (struct dt_cuda_launch){.stream = c->stream, .block_threads = 256, .counts = &be->launches};
    c->copy_stream = (dt_cuda_stream)copy_stream;
    c->cublas_workspace_bytes = CUBLAS_WORKSPACE_BYTES;
    cublasHandle_t h = NULL;
    cublasStatus_t bs = cublasCreate(&h);
    if (bs == CUBLAS_STATUS_SUCCESS) bs = cublasSetStream(h, stream);
    if (bs == CUBLAS_STATUS_SUCCESS)
        bs = cublasSetWorkspace(h, c->cublas_workspace, c->cublas_workspace_bytes);
    if (bs == CUBLAS_STATUS_SUCCESS) bs = cublasSetPointerMode(h, CUBLAS_POINTER_MODE_HOST);
    /* No atomics inside cuBLAS routines: its run-to-run guarantee depends on it. */
    if (bs == CUBLAS_STATUS_SUCCESS) bs = cublasSetAtomicsMode(h, CUBLAS_ATOMICS_NOT_ALLOWED);
    if (bs != CUBLAS_STATUS_SUCCESS) {
        if (h) cublasDestroy(h);
        cudaFree(c->cublas_workspace);
        cudaStreamDestroy(stream);
        cudaStreamDestroy(copy_stream);
        free(c);
        return dt_error_set(err, DT_ERR_UNSUPPORTED, "backend 'cuda': device %d: cuBLAS: %s",
                            opt->gpu, cublasGetStatusString(bs));
    }
    c->cublas = h;
    c->sm_count = prop.multiProcessorCount;
    snprintf(c->name, sizeof c->name, "%s (sm_%d%d)", prop.name, prop.major, prop.minor);
    be->ctx = c;
    be->threads = 1;
    return DT_OK;
}

static void cuda_destroy(struct dt_backend *be)
{
    struct dt_cuda_ctx *c = dt_cuda(be);
    if (!c) return;
    if (c->recorder) { /* nothing on a device: its plain host scratch and state */
        for (int i = 0; i < DT_CUDA_SCRATCH_SLOTS; i++) free(c->host_scratch[i]);
        free(c->status);
        free(c);
        return;
    }
    cudaStreamSynchronize((cudaStream_t)c->stream);
    cudaStreamSynchronize((cudaStream_t)c->copy_stream);
    for (int i = 0; i < DT_CUDA_SCRATCH_SLOTS; i++) {
        if (c->scratch[i]) cudaFree(c->scratch[i]);
        if (c->host_scratch[i]) cudaFreeHost(c->host_scratch[i]);
    }
    dt_cudnn_destroy(be);
    dt_cuda_status_free(be);
    cuda_timers_free(c);
    cudaFree(c->one_pass_count);
    if (c->digest_plan_up) cudaEventDestroy((cudaEvent_t)c->digest_plan_up);
    if (c->snapshot_table_up) cudaEventDestroy((cudaEvent_t)c->snapshot_table_up);
    cublasDestroy((cublasHandle_t)c->cublas);
    cudaFree(c->cublas_workspace);
    cudaStreamDestroy((cudaStream_t)c->stream);
    cudaStreamDestroy((cudaStream_t)c->copy_stream);
    free(c);
}

static void *cuda_alloc(struct dt_backend *be, size_t bytes)
{
    void *p = NULL;
    if (dt_cuda_capture_breaks(be, "an allocation inside the step")) {
        /* a real buffer the model keeps: the capture is not launched and the step reruns
         * uncaptured, so it is made and zeroed now, outside the capture (relaxed mode
         * allows the calls; the copy stream is not capturing) */
        struct dt_cuda_ctx *c = dt_cuda(be);
        enum cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
        DT_CUDA_CHECK(cudaThreadExchangeStreamCaptureMode(&mode));
        DT_CUDA_CHECK(cudaMalloc(&p, bytes ? bytes : 1));
        DT_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, (cudaStream_t)c->copy_stream));
        DT_CUDA_CHECK(cudaStreamSynchronize((cudaStream_t)c->copy_stream));
        DT_CUDA_CHECK(cudaThreadExchangeStreamCaptureMode(&mode));
        return p;
    }
    DT_CUDA_CHECK(cudaMalloc(&p, bytes ? bytes : 1));
    DT_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, (cudaStream_t)dt_cuda(be)->stream));
    return p;
}

static void cuda_free(struct dt_backend *be, void *p)
{
    struct dt_cuda_ctx *c = dt_cuda(be);
    if (dt_cuda_capture_breaks(be, "a buffer freed inside the step")) {
        if (c->capture_n_parked < (int)(sizeof c->capture_parked / sizeof c->capture_parked[0]))
            c->capture_parked[c->capture_n_parked++] = p; /* freed as the capture ends */
        return; /* beyond: kept (one buffer lost, the step reruns) */
    }
    dt_cuda_sync(be);
    DT_CUDA_CHECK(cudaFree(p));
}

static void cuda_upload(struct dt_backend *be, void *dst, const void *src, size_t bytes)
{
    struct dt_cuda_ctx *c = dt_cuda(be);
    if (dt_cuda_capture_breaks(be, "an upload from host memory inside the step")) return;
    DT_CUDA_CHECK(
        cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, (cudaStream_t)c->stream));
    dt_cuda_sync(be);
}

static void cuda_download(struct dt_backend *be, void *dst, const void *src, size_t bytes)
{
    struct dt_cuda_ctx *c = dt_cuda(be);
    if (dt_cuda_capture_breaks(be, "a download inside the step")) return; /* dst as it was */
    if (dt_cuda_recording(be)) { /* the copy's wait; no bytes (dst is left as it is) */
        dt_cuda_sync(be);
        return;
    }
    DT_CUDA_CHECK(
        cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, (cudaStream_t)c->stream));
    dt_cuda_sync(be);
}

static void cuda_set_forced_order(struct dt_backend *be, uint64_t seed)
{
    dt_cuda(be)->forced_order = seed;
}

/* ---- synchronisation and snapshot copies for the hashing pipeline ------------------- */

static void cuda_synchronize(struct dt_backend *be) { dt_cuda_sync(be); }

static void *cuda_host_alloc(struct dt_backend *be, size_t bytes)
{
    void *p = NULL;
    DT_CUDA_CHECK(cudaMallocHost(&p, bytes ? bytes : 1));
    return p;
}

static void cuda_host_free(struct dt_backend *be, void *p) { DT_CUDA_CHECK(cudaFreeHost(p)); }

/* be->copy_out: one device staging buffer that holds the snapshot, so the next step may
 * overwrite the weights as soon as the device-to-device copies ran; `snapped` marks those
 * copies on the main stream, arrived[t % depth] the device-to-host copy of ticket t on the
 * copy stream. */
struct cuda_copy_out {
    void *staging;
    size_t staging_bytes;
    void *digests; /* the tree digests of a snapshot (cuda_digests_out_begin) */
    size_t digests_bytes;
    cudaEvent_t snapped;
    cudaEvent_t arrived[DT_BACKEND_COPY_OUT_DEPTH];
    int64_t last_ticket; /* -1 before the first copy */
};

static struct cuda_copy_out *cuda_copy_out_state(struct dt_backend *be)
{
    if (be->copy_out) return be->copy_out;
    struct cuda_copy_out *co = dt_xcalloc(1, sizeof *co);
    DT_CUDA_CHECK(cudaEventCreateWithFlags(&co->snapped, cudaEventDisableTiming));
    for (int i = 0; i < DT_BACKEND_COPY_OUT_DEPTH; i++)
        DT_CUDA_CHECK(cudaEventCreateWithFlags(&co->arrived[i], /* the worker sleeps, not spins */
                                               cudaEventDisableTiming | cudaEventBlockingSync));
    co->last_ticket = -1;
    be->copy_out = co;
    return co;
}

/* The snapshot's copies in one launch (digest.cu, dt_cuda_gather_words) when every tensor is
 * whole 4-byte words: the table of offsets and addresses goes up through pinned scratch only
 * when it changed (the same model's tensors give the same table every step), after the
 * previous copy up ran. false: copy tensor by tensor instead. */
static bool gather_snapshot(struct dt_backend *be, struct cuda_copy_out *co,
                            const void *const *srcs, const size_t *bytes, int n)
{
    struct dt_cuda_ctx *c = dt_cuda(be);
    cudaStream_t s = (cudaStream_t)c->stream;
    if (n < 2 || !c->one_pass) return false;
    for (int i = 0; i < n; i++)
        if (bytes[i] % 4 || (uintptr_t)srcs[i] % 4) return false;
    const size_t words = 2 * (size_t)n + 1;
    int64_t *want = dt_xmalloc(words * 8);
    want[0] = 0;
    for (int i = 0; i < n; i++) {
        want[i + 1] = want[i] + (int64_t)(bytes[i] / 4);
        want[n + 1 + i] = (int64_t)(uintptr_t)srcs[i];
    }
    const int64_t total = want[n];
    int64_t *dev = dt_cuda_scratch(be, DT_CUDA_SLOT_SNAPSHOT, words * 8);
    const bool same = c->snapshot_table_words == words && c->host_scratch[DT_CUDA_SLOT_SNAPSHOT] &&
                      memcmp(c->host_scratch[DT_CUDA_SLOT_SNAPSHOT], want, words * 8) == 0;
    if (!same) {
        if (!c->snapshot_table_up)
            DT_CUDA_CHECK(cudaEventCreateWithFlags((cudaEvent_t *)&c->snapshot_table_up,
                                                   cudaEventDisableTiming));
        else DT_CUDA_CHECK(cudaEventSynchronize((cudaEvent_t)c->snapshot_table_up));
        int64_t *host = dt_cuda_host_scratch(be, DT_CUDA_SLOT_SNAPSHOT, words * 8);
        memcpy(host, want, words * 8);
        DT_CUDA_CHECK(cudaMemcpyAsync(dev, host, words * 8, cudaMemcpyHostToDevice, s));
        DT_CUDA_CHECK(cudaEventRecord((cudaEvent_t)c->snapshot_table_up, s));
        c->snapshot_table_words = words;
    }
    free(want);
    if (total > 0)
        DT_CUDA_CHECK(dt_cuda_gather_words((uint32_t *)co->staging, dev, n, total, &c->launch));
    return true;
}

/* Main stream: [wait for the previous device-to-host copy to have read the staging buffer]
 * device-to-device copies into it, record `snapped`. The host returns at once. */
static void snapshot(struct dt_backend *be, struct cuda_copy_out *co, const void *const *srcs,
                     const size_t *bytes, int n)
{
    struct dt_cuda_ctx *c = dt_cuda(be);
    cudaStream_t s = (cudaStream_t)c->stream, cs = (cudaStream_t)c->copy_stream;
    size_t total = 0;
    for (int i = 0; i < n; i++) total += bytes[i];
    if (total > co->staging_bytes) {
        /* a device-to-host copy may still read the old buffer; cudaFree waits for the
         * device anyway, and this happens once per model */
        DT_CUDA_CHECK(cudaStreamSynchronize(cs));
        if (co->staging) DT_CUDA_CHECK(cudaFree(co->staging));
        co->staging = NULL;
        DT_CUDA_CHECK(cudaMalloc(&co->staging, total));
        co->staging_bytes = total;
    }
    if (co->last_ticket >= 0) {
        cudaEvent_t prev = co->arrived[co->last_ticket % DT_BACKEND_COPY_OUT_DEPTH];
        DT_CUDA_CHECK(cudaStreamWaitEvent(s, prev, 0));
    }
    if (!gather_snapshot(be, co, srcs, bytes, n)) { /* a copy per tensor */
        size_t off = 0;
        for (int i = 0; i < n; i++) {
            if (bytes[i]) dt_cuda_copy_d2d(be, (char *)co->staging + off, srcs[i], bytes[i], s);
            off += bytes[i];
        }
    }
    DT_CUDA_CHECK(cudaEventRecord(co->snapped, s));
}

/* The snapshot (above); then on the copy stream: wait for `snapped`, one device-to-host
 * copy of the whole snapshot, record arrived[ticket]. Neither stream waits for the host. */
static void cuda_copy_out_begin(struct dt_backend *be, int64_t ticket, void *host_dst,
                                const void *const *srcs, const size_t *bytes, int n)
{
    struct dt_cuda_ctx *c = dt_cuda(be);
    struct cuda_copy_out *co = cuda_copy_out_state(be);
    cudaStream_t cs = (cudaStream_t)c->copy_stream;
    snapshot(be, co, srcs, bytes, n);
    size_t total = 0;
    for (int i = 0; i < n; i++) total += bytes[i];
    DT_CUDA_CHECK(cudaStreamWaitEvent(cs, co->snapped, 0));
    if (total)
        DT_CUDA_CHECK(cudaMemcpyAsync(host_dst, co->staging, total, cudaMemcpyDeviceToHost, cs));
    DT_CUDA_CHECK(cudaEventRecord(co->arrived[ticket % DT_BACKEND_COPY_OUT_DEPTH], cs));
    co->last_ticket = ticket;
}

/* The tree digests off the training stream: the snapshot (above, the training stream's only
 * cost: its copies); then on the copy stream: wait for `snapped`, the op tensor_digests over
 * the snapshot's tensors into a device buffer of n x 32 bytes (its kernels launched on the
 * copy stream), one device-to-host copy of the digests, record arrived[ticket]. */
static enum dt_status cuda_digests_out_begin(struct dt_backend *be, int64_t ticket,
                                             uint8_t *host_dst, const float *const *srcs,
                                             const int64_t *counts, int n)
{
    struct dt_cuda_ctx *c = dt_cuda(be);
    struct cuda_copy_out *co = cuda_copy_out_state(be);
    cudaStream_t cs = (cudaStream_t)c->copy_stream;
    size_t *bytes = dt_xcalloc((size_t)n + 1, sizeof *bytes);
    const float **snap = dt_xcalloc((size_t)n + 1, sizeof *snap);
    for (int i = 0; i < n; i++) bytes[i] = (size_t)counts[i] * sizeof(float);
    snapshot(be, co, (const void *const *)srcs, bytes, n);
    if ((size_t)n * 32 > co->digests_bytes) { /* once per model; nothing reads it yet */
        DT_CUDA_CHECK(cudaStreamSynchronize(cs));
        if (co->digests) DT_CUDA_CHECK(cudaFree(co->digests));
        DT_CUDA_CHECK(cudaMalloc(&co->digests, (size_t)n * 32 + 1));
        co->digests_bytes = (size_t)n * 32;
    }
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        snap[i] = (const float *)((const char *)co->staging + off);
        off += bytes[i];
    }
    DT_CUDA_CHECK(cudaStreamWaitEvent(cs, co->snapped, 0));
    const struct dt_cuda_launch keep = c->launch;
    c->launch.stream = c->copy_stream;
    struct dt_policy pol; /* the op obeys no control */
    dt_policy_from_level(&pol, DT_LEVEL_PORTABLE);
    const enum dt_status st = dt_cuda_tensor_digests(be, co->digests, snap, counts, n, &pol);
    c->launch = keep;
    free(bytes);
    free(snap);
    if (st != DT_OK) return st;
    DT_CUDA_CHECK(
        cudaMemcpyAsync(host_dst, co->digests, (size_t)n * 32, cudaMemcpyDeviceToHost, cs));
    DT_CUDA_CHECK(cudaEventRecord(co->arrived[ticket % DT_BACKEND_COPY_OUT_DEPTH], cs));
    co->last_ticket = ticket;
    return DT_OK;
}

static void cuda_copy_out_wait(struct dt_backend *be, int64_t ticket)
{
    struct cuda_copy_out *co = be->copy_out;
    DT_ASSERT(co != NULL);
    DT_CUDA_CHECK(cudaSetDevice(dt_cuda(be)->device));
    DT_CUDA_CHECK(cudaEventSynchronize(co->arrived[ticket % DT_BACKEND_COPY_OUT_DEPTH]));
}

static void cuda_copy_out_release(struct dt_backend *be)
{
    struct cuda_copy_out *co = be->copy_out;
    if (!co) return;
    DT_CUDA_CHECK(cudaStreamSynchronize((cudaStream_t)dt_cuda(be)->stream));
    DT_CUDA_CHECK(cudaStreamSynchronize((cudaStream_t)dt_cuda(be)->copy_stream));
    if (co->staging) DT_CUDA_CHECK(cudaFree(co->staging));
    if (co->digests) DT_CUDA_CHECK(cudaFree(co->digests));
    DT_CUDA_CHECK(cudaEventDestroy(co->snapped));
    for (int i = 0; i < DT_BACKEND_COPY_OUT_DEPTH; i++)
        DT_CUDA_CHECK(cudaEventDestroy(co->arrived[i]));
    free(co);
    be->copy_out = NULL;
}

/* ---- per-op device timers (nets/backend.h, profiling) ---------------------------------
 * A pair of events per profiled op call, recorded on the stream around it: no wait while
 * the step runs; op_times waits for the last event once and adds each pair's elapsed time
 * to its op. Events are kept and reused from one read to the next. */
struct cuda_timers {
    cudaEvent_t *ev;
    int *op;    /* per pair */
    int n, cap; /* events recorded / created */
};

static void cuda_op_mark(struct dt_backend *be, int op, bool begin)
{
    struct dt_cuda_ctx *c = dt_cuda(be);
    if (!c->timers) c->timers = dt_xcalloc(1, sizeof *c->timers);
    struct cuda_timers *t = c->timers;
    if (t->n == t->cap) {
        const int cap = t->cap ? 2 * t->cap : 256;
        t->ev = dt_xrealloc(t->ev, (size_t)cap * sizeof *t->ev);
        t->op = dt_xrealloc(t->op, (size_t)(cap / 2) * sizeof *t->op);
        for (int i = t->cap; i < cap; i++) DT_CUDA_CHECK(cudaEventCreate(&t->ev[i]));
        t->cap = cap;
    }
    DT_ASSERT(begin == (t->n % 2 == 0)); /* pairs, not nested */
    if (begin) t->op[t->n / 2] = op;
    DT_CUDA_CHECK(cudaEventRecord(t->ev[t->n++], (cudaStream_t)c->stream));
}

static void cuda_op_times(struct dt_backend *be, double *seconds)
{
    struct cuda_timers *t = dt_cuda(be)->timers;
    if (!t || t->n == 0) return;
    DT_ASSERT(t->n % 2 == 0);
    dt_cuda_count_wait(be, DT_CUDA_SITE(__FILE__, __LINE__));
    DT_CUDA_CHECK(cudaEventSynchronize(t->ev[t->n - 1]));
    for (int k = 0; k < t->n / 2; k++) {
        float ms = 0.0f;
        DT_CUDA_CHECK(cudaEventElapsedTime(&ms, t->ev[2 * k], t->ev[2 * k + 1]));
        seconds[t->op[k]] += 1e-3 * (double)ms;
    }
    t->n = 0;
}

static void cuda_timers_free(struct dt_cuda_ctx *c)
{
    struct cuda_timers *t = c->timers;
    if (!t) return;
    for (int i = 0; i < t->cap; i++) cudaEventDestroy(t->ev[i]);
    free(t->ev);
    free(t->op);
    free(t);
    c->timers = NULL;
}

/* ---- the resident training set (nets/backend.h; kernel in gather.cu) -------------------
 * Pixel bytes (or float values) and labels on the device, copied once. A gather writes
 * the batch's indices into one of two pinned buffers, copies them to the device
 * asynchronously and launches the kernel: no wait, unless the copy from that buffer two
 * gathers ago has not run yet (a host wait then, counted). */
#define GATHER_RING 2
struct dt_resident {
    int64_t n, dim, stride;
    uint8_t *pixels;                          /* device, (n - 1) * stride + dim, or NULL */
    float *values;                            /* device, likewise, when there are no pixels */
    uint8_t *labels;                          /* device, n */
    int64_t *idx_dev, *idx_host[GATHER_RING]; /* capacity cap each */
    int64_t cap, turn;
    cudaEvent_t copied[GATHER_RING];
};

static struct dt_resident *cuda_resident_create(struct dt_backend *be,
                                                const struct dt_resident_src *src)
{
    struct dt_cuda_ctx *c = dt_cuda(be);
    cudaStream_t s = (cudaStream_t)c->stream;
    struct dt_resident *r = dt_xcalloc(1, sizeof *r);
    r->n = src->n, r->dim = src->dim, r->stride = src->stride ? src->stride : src->dim;
    const size_t count = (size_t)((src->n - 1) * r->stride + src->dim);
    if (src->pixels) {
        DT_CUDA_CHECK(cudaMalloc((void **)&r->pixels, count));
        DT_CUDA_CHECK(cudaMemcpyAsync(r->pixels, src->pixels, count, cudaMemcpyHostToDevice, s));
    } else {
        DT_CUDA_CHECK(cudaMalloc((void **)&r->values, count * sizeof(float)));
        DT_CUDA_CHECK(cudaMemcpyAsync(r->values, src->values, count * sizeof(float),
                                      cudaMemcpyHostToDevice, s));
    }
    DT_CUDA_CHECK(cudaMalloc((void **)&r->labels, (size_t)src->n));
    DT_CUDA_CHECK(
        cudaMemcpyAsync(r->labels, src->labels, (size_t)src->n, cudaMemcpyHostToDevice, s));
    for (int i = 0; i < GATHER_RING; i++)
        DT_CUDA_CHECK(cudaEventCreateWithFlags(&r->copied[i], cudaEventDisableTiming));
    dt_cuda_sync(be); /* once per set, before the first step */
    return r;
}

static void cuda_resident_free(struct dt_backend *be, struct dt_resident *r)
{
    dt_cuda_sync(be);
    cudaFree(r->pixels);
    cudaFree(r->values);
    cudaFree(r->labels);
    cudaFree(r->idx_dev);
    for (int i = 0; i < GATHER_RING; i++) {
        if (r->idx_host[i]) cudaFreeHost(r->idx_host[i]);
        cudaEventDestroy(r->copied[i]);
    }
    free(r);
}

static void cuda_gather(struct dt_backend *be, float *x, int32_t *labels,
                        const struct dt_resident *set, const int64_t *idx, int64_t B)
{
    struct dt_cuda_ctx *c = dt_cuda(be);
    cudaStream_t s = (cudaStream_t)c->stream;
    struct dt_resident *r = (struct dt_resident *)set; /* its index buffers change */
    for (int64_t b = 0; b < B; b++) DT_ASSERT(idx[b] >= 0 && idx[b] < r->n);
    if (B > r->cap && !c->capturing) { /* first use, or a larger batch: regrow (queued
                                            copies done first) */
        dt_cuda_sync(be);
        cudaFree(r->idx_dev);
        DT_CUDA_CHECK(cudaMalloc((void **)&r->idx_dev, (size_t)B * sizeof(int64_t)));
        for (int i = 0; i < GATHER_RING; i++) {
            if (r->idx_host[i]) DT_CUDA_CHECK(cudaFreeHost(r->idx_host[i]));
            DT_CUDA_CHECK(cudaMallocHost((void **)&r->idx_host[i], (size_t)B * sizeof(int64_t)));
        }
        r->cap = B;
    }
    if (c->capturing) { /* a buffer per gather of the step, no event: the step's end waits */
        if (B > r->cap || c->capture_gathers >= GATHER_RING) {
            dt_cuda_capture_breaks(be, "%s",
                                   B > r->cap ? "a larger batch inside the step"
                                              : "more than two gathers in the step");
            return;
        }
        int64_t *h = r->idx_host[c->capture_gathers++];
        memcpy(h, idx, (size_t)B * sizeof(int64_t));
        DT_CUDA_CHECK(
            cudaMemcpyAsync(r->idx_dev, h, (size_t)B * sizeof(int64_t), cudaMemcpyHostToDevice, s));
        DT_CUDA_CHECK(dt_cuda_gather_launch(x, labels, r->pixels, r->values, r->labels, r->idx_dev,
                                            B, r->dim, r->stride, &c->launch));
        return;
    }
    const int k = (int)(r->turn++ % GATHER_RING);
    if (r->turn > GATHER_RING) { /* that buffer's last copy must have read it */
        cudaError_t q = cudaEventQuery(r->copied[k]);
        if (q == cudaErrorNotReady) {
            /* not an error, but it may be left as the last error: clear it so that the next
             * cudaGetLastError check (a launch's) does not report it */
            (void)cudaGetLastError();
            dt_cuda_count_wait(be, DT_CUDA_SITE(__FILE__, __LINE__));
            q = cudaEventSynchronize(r->copied[k]);
        }
        DT_CUDA_CHECK(q);
    }
    memcpy(r->idx_host[k], idx, (size_t)B * sizeof(int64_t));
    DT_CUDA_CHECK(cudaMemcpyAsync(r->idx_dev, r->idx_host[k], (size_t)B * sizeof(int64_t),
                                  cudaMemcpyHostToDevice, s));
    DT_CUDA_CHECK(cudaEventRecord(r->copied[k], s));
    DT_CUDA_CHECK(dt_cuda_gather_launch(x, labels, r->pixels, r->values, r->labels, r->idx_dev, B,
                                        r->dim, r->stride, &dt_cuda(be)->launch));
}

/* "<name> (sm_XY), N SMs; driver a.b, runtime c.d, cuBLAS v": what a report needs to say
 * which device and libraries produced a trace. */
static void cuda_describe(struct dt_backend *be, char *buf, size_t size)
{
    struct dt_cuda_ctx *c = dt_cuda(be);
    int driver = 0, runtime = 0, blas = 0;
    cudaDriverGetVersion(&driver);
    cudaRuntimeGetVersion(&runtime);
    cublasGetVersion((cublasHandle_t)c->cublas, &blas);
    const size_t dnn = dt_cudnn_version();
    char dnn_text[32] = "none";
    if (dnn) snprintf(dnn_text, sizeof dnn_text, "%zu", dnn);
    snprintf(buf, size, "%s, %d SMs; driver %d.%d, runtime %d.%d, cuBLAS %d, cuDNN %s", c->name,
             c->sm_count, driver / 1000, driver % 1000 / 10, runtime / 1000, runtime % 1000 / 10,
             blas, dnn_text);
}

/* ---- the recording backend (nets/cuda/recorder.h) ---------------------------------------- */

struct dt_backend *dt_cuda_recorder_create(void)
{
    struct dt_backend *be = dt_xcalloc(1, sizeof *be);
    struct dt_cuda_ctx *c = dt_xcalloc(1, sizeof *c);
    be->ops = &dt_backend_cuda_ops;
    be->threads = 1;
    be->ctx = c;
    c->recorder = true;
    c->cublas_mode = -1;
    c->one_pass = dt_cuda_one_pass();
    const char *xp = getenv("DETRAIN_CUDA_XP");
    c->xp_simple = xp && strcmp(xp, "simple") == 0;
    c->launch = (struct dt_cuda_launch){
        .block_threads = 256, .counts = &be->launches, .record = &c->record_sink};
    snprintf(c->name, sizeof c->name, "recording (no device)");
    return be;
}

void dt_cuda_recorder_begin(struct dt_backend *rec, struct dt_op_cost *cost,
                            const struct dt_backend *like, bool one_pass)
{
    struct dt_cuda_ctx *c = dt_cuda(rec);
    DT_ASSERT(c->recorder && cost);
    rec->shards = like->shards;
    rec->loss_deferred = like->loss_deferred;
    c->one_pass = one_pass;
    dt_cuda_defer_checks(rec, like->checks_deferred);
    dt_cuda_recorder_reset(rec); /* a step's records: the model counts ops one at a time */
    c->launch.record = cost;
}

bool dt_cuda_one_pass_env(void) { return dt_cuda_one_pass(); }

void dt_cuda_recorder_end(struct dt_backend *rec)
{
    struct dt_cuda_ctx *c = dt_cuda(rec);
    c->launch.record = &c->record_sink;
    memset(&rec->shards, 0, sizeof rec->shards);
}

const struct dt_backend_ops dt_backend_cuda_ops = {
    .name = "cuda",
    .init = cuda_init,
    .destroy = cuda_destroy,
    .alloc = cuda_alloc,
    .free = cuda_free,
    .upload = cuda_upload,
    .download = cuda_download,
#define DT_CUDA_OP_ENTRY_(ENUM, name, ...) .name = dt_cuda_##name,
    DT_OP_LIST(DT_CUDA_OP_ENTRY_) /* every op of nets/op_list.h */
#undef DT_CUDA_OP_ENTRY_
        .bias_backward_shards = dt_cuda_bias_backward_shards,
    .dense_backward_weight_shards = dt_cuda_dense_backward_weight_shards,
    .softmax_xent_forward_shards = dt_cuda_softmax_xent_forward_shards,
    .conv2d_backward_weight_shards = dt_cuda_conv2d_backward_weight_shards,
    .set_forced_order = cuda_set_forced_order,
    .synchronize = cuda_synchronize,
    .host_alloc = cuda_host_alloc,
    .host_free = cuda_host_free,
    .copy_out_begin = cuda_copy_out_begin,
    .copy_out_wait = cuda_copy_out_wait,
    .digests_out_begin = cuda_digests_out_begin,
    .copy_out_release = cuda_copy_out_release,
    .describe = cuda_describe,
    .take_algo_notes = dt_cudnn_take_notes,
    .reset_algo_choices = dt_cudnn_reset_choices,
    .first_nonfinite = dt_cuda_first_nonfinite,
    .first_nonfinite_many = dt_cuda_first_nonfinite_many,
    .exact_max = dt_cuda_exact_max,
    .exact_to_fixed = dt_cuda_exact_to_fixed,
    .exact_round = dt_cuda_exact_round,
    .resident_create = cuda_resident_create,
    .resident_free = cuda_resident_free,
    .gather = cuda_gather,
    .defer_checks = dt_cuda_defer_checks,
    .step_end = dt_cuda_step_end,
    .read_deferred = dt_cuda_read_deferred,
    .op_mark = cuda_op_mark,
    .op_times = cuda_op_times,
    .graph_begin = dt_cuda_graph_begin,
    .graph_end = dt_cuda_graph_end,
    .graph_describe = dt_cuda_graph_describe,
    .graph_free = dt_cuda_graph_free,
};
