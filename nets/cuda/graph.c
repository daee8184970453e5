/* The training step captured and launched as one CUDA graph (nets/backend.h, "the step as
 * one graph"; issue 67, item 5). Every step is captured anew -- the ops' host code runs as
 * it always does, so every value that changes from step to step (the learning rate, AdamW's
 * bias corrections, the generators' step, the batch's indices, a buffer that moved) is in
 * that step's capture, and the records and reads the ops register with status.c are the
 * ones the launch fills -- and the executable graph is updated in place from it
 * (cudaGraphExecUpdate: the same kernels and copies with this step's arguments), or
 * instantiated again when its shape changed. What the device runs is then one launch
 * instead of one per kernel, copy and library call.
 *
 * While capturing, nothing may wait, grow or read back (context.c, dt_cuda_capture_breaks:
 * a host wait, a regrown scratch buffer, a pageable copy, a failed call): the first such
 * thing is kept as the reason, nothing of the capture runs, and the caller runs the step
 * uncaptured (nets/step.c). Capture mode is per thread (cudaStreamCaptureModeThreadLocal):
 * the hashing pipeline's thread is not restricted. */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <string.h>

#include "core/util.h"
#include "nets/cuda/cuda.h"
#include "nets/cuda/work.h" /* dt_cuda_recording */

/* A caller's executable graph (nets/step.c keeps one per struct dt_step: a bench that
 * alternates two policies keeps two) and what became of its captures. */
struct dt_cuda_graph {
    cudaGraphExec_t exec; /* the last launched step's, updated each step */
    int64_t launched, updated, instantiated, discarded;
    char last_update[160]; /* why the last in-place update was refused, "" none */
};

/* Why be cannot capture a step now, or NULL. */
static const char *cannot_capture(struct dt_backend *be)
{
    struct dt_cuda_ctx *c = dt_cuda(be);
    if (dt_cuda_recording(be)) return "a recording backend launches nothing";
    if (c->forced_order) return "the forced-order hook reads partial sums back inside the step";
    if (!be->checks_deferred)
        return "checks are not deferred (each op's record would be read back inside the step)";
    if (!c->one_pass) return "DETRAIN_CUDA_ONE_PASS=0 reads losses back inside the step";
    if (be->instrumented) return "an op observer, the profiler or the cost model is on";
    if (c->capturing) return "a capture is already under way";
    return NULL;
}

enum dt_status dt_cuda_graph_begin(struct dt_backend *be, struct dt_error *err)
{
    struct dt_cuda_ctx *c = dt_cuda(be);
    const char *why = cannot_capture(be);
    if (why) return dt_error_set(err, DT_ERR_UNSUPPORTED, "%s", why);
    c->capture_counts0 = be->launches;
    c->capture_waits0 = be->host_waits;
    const cudaError_t e =
        cudaStreamBeginCapture((cudaStream_t)c->stream, cudaStreamCaptureModeThreadLocal);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return dt_error_set(err, DT_ERR_UNSUPPORTED, "cudaStreamBeginCapture: %s",
                            cudaGetErrorString(e));
    }
    dt_cuda_capture_mark(be, true);
    return DT_OK;
}

/* The capture's graph g made executable: the last one updated in place when CUDA can, else
 * instantiated anew. */
static cudaError_t executable(struct dt_cuda_graph *G, cudaGraph_t g)
{
    if (G->exec) {
        cudaGraphExecUpdateResultInfo info;
        memset(&info, 0, sizeof info);
        const cudaError_t e = cudaGraphExecUpdate(G->exec, g, &info);
        if (e == cudaSuccess) {
            G->updated++;
            return e;
        }
        (void)cudaGetLastError();
        snprintf(G->last_update, sizeof G->last_update, "%s (update result %d)",
                 cudaGetErrorString(e), (int)info.result);
        cudaGraphExecDestroy(G->exec);
        G->exec = NULL;
    }
    const cudaError_t e = cudaGraphInstantiate(&G->exec, g, 0);
    if (e == cudaSuccess) G->instantiated++;
    else G->exec = NULL;
    return e;
}

enum dt_status dt_cuda_graph_end(struct dt_backend *be, void **graph, bool launch,
                                 struct dt_error *err)
{
    struct dt_cuda_ctx *c = dt_cuda(be);
    DT_ASSERT(c->capturing);
    if (!*graph) *graph = dt_xcalloc(1, sizeof(struct dt_cuda_graph));
    struct dt_cuda_graph *G = *graph;
    cudaGraph_t g = NULL;
    cudaError_t e = cudaStreamEndCapture((cudaStream_t)c->stream, &g);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        dt_cuda_capture_breaks(be, "cudaStreamEndCapture: %s", cudaGetErrorString(e));
    }
    char broken[sizeof c->capture_broken];
    snprintf(broken, sizeof broken, "%s", c->capture_broken);
    dt_cuda_capture_mark(be, false);
    if (launch && !broken[0]) {
        e = executable(G, g);
        if (e == cudaSuccess) e = cudaGraphLaunch(G->exec, (cudaStream_t)c->stream);
        if (e != cudaSuccess) {
            (void)cudaGetLastError();
            snprintf(broken, sizeof broken, "%s: %s",
                     G->exec ? "cudaGraphLaunch" : "cudaGraphInstantiate", cudaGetErrorString(e));
        }
    }
    if (g) cudaGraphDestroy(g);
    if (launch && !broken[0]) {
        G->launched++;
        return DT_OK;
    }
    /* nothing of it ran: what its host code noted is forgotten, its counts taken back; what
     * broke it is said even when the step's own ops failed (a capture CUDA invalidated makes
     * every later launch fail: that is the capture's fault, not the step's) */
    G->discarded++;
    dt_cuda_status_forget(be);
    be->launches = c->capture_counts0;
    be->host_waits = c->capture_waits0;
    return broken[0] ? dt_error_set(err, DT_ERR_UNSUPPORTED, "%s", broken) : DT_OK;
}

void dt_cuda_graph_describe(struct dt_backend *be, const void *graph, char *buf, size_t size)
{
    const struct dt_cuda_graph *G = graph;
    if (!G) {
        snprintf(buf, size, "no step captured");
        return;
    }
    snprintf(buf, size,
             "%lld launched (%lld updated in place, %lld instantiated), %lld discarded%s%s",
             (long long)G->launched, (long long)G->updated, (long long)G->instantiated,
             (long long)G->discarded, G->last_update[0] ? "; last update refused: " : "",
             G->last_update);
}

void dt_cuda_graph_free(struct dt_backend *be, void *graph)
{
    struct dt_cuda_graph *G = graph;
    if (!G) return;
    if (G->exec) cudaGraphExecDestroy(G->exec);
    free(G);
}
