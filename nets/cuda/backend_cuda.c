/* The CUDA backend (host side, C): device selection, memory, and the op table. Kernels
 * live in the .cu files beside it behind extern "C" launchers (nets/cuda/cuda.h). Ops not
 * written yet are NULL, which the public wrappers answer with DT_ERR_UNSUPPORTED, and
 * dt_backend_missing_op() names them so a run refuses to start instead of failing late.
 * Data path (DESIGN.md): nets/backend -> nets/cuda. */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/util.h"
#include "nets/cuda/cuda.h"

struct cuda_ctx {
    int device;
    cudaStream_t stream;
    char name[300];
};

static struct cuda_ctx *ctx_of(struct dt_backend *be) { return be->ctx; }

/* A CUDA call that must not fail (memory copies, synchronisation): abort with the call
 * and CUDA's message, like DT_ASSERT -- a determinism tool never carries on quietly. */
#define CUDA_CHECK(call)                                                                   \
    do {                                                                                   \
        cudaError_t e_ = (call);                                                           \
        if (e_ != cudaSuccess) {                                                           \
            fprintf(stderr, "detrain: %s:%d: %s: %s\n", __FILE__, __LINE__, #call,         \
                    cudaGetErrorString(e_));                                               \
            abort();                                                                       \
        }                                                                                  \
    } while (0)

/* A launcher's result: DT_ERR_INTERNAL naming the op and CUDA's message. */
static enum dt_status launched(int rc, const char *op)
{
    if (rc == 0) return DT_OK;
    fprintf(stderr, "detrain: cuda %s: launch failed: %s\n", op,
            cudaGetErrorString((cudaError_t)rc));
    return DT_ERR_INTERNAL;
}

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
    struct cuda_ctx *c = dt_xcalloc(1, sizeof *c);
    c->device = opt->gpu;
    struct cudaDeviceProp prop;
    e = cudaSetDevice(c->device);
    if (e == cudaSuccess) e = cudaGetDeviceProperties(&prop, c->device);
    if (e == cudaSuccess) e = cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking);
    if (e != cudaSuccess) {
        free(c);
        return dt_error_set(err, DT_ERR_UNSUPPORTED, "backend 'cuda': device %d: %s", opt->gpu,
                            cudaGetErrorString(e));
    }
    snprintf(c->name, sizeof c->name, "%s (sm_%d%d)", prop.name, prop.major, prop.minor);
    be->ctx = c;
    be->threads = 1;
    return DT_OK;
}

static void cuda_destroy(struct dt_backend *be)
{
    struct cuda_ctx *c = ctx_of(be);
    if (!c) return;
    cudaStreamSynchronize(c->stream);
    cudaStreamDestroy(c->stream);
    free(c);
}

static void *cuda_alloc(struct dt_backend *be, size_t bytes)
{
    void *p = NULL;
    CUDA_CHECK(cudaMalloc(&p, bytes ? bytes : 1));
    CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, ctx_of(be)->stream));
    return p;
}

static void cuda_free(struct dt_backend *be, void *p)
{
    CUDA_CHECK(cudaStreamSynchronize(ctx_of(be)->stream));
    CUDA_CHECK(cudaFree(p));
}

static void cuda_upload(struct dt_backend *be, void *dst, const void *src, size_t bytes)
{
    struct cuda_ctx *c = ctx_of(be);
    CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, c->stream));
    CUDA_CHECK(cudaStreamSynchronize(c->stream));
}

static void cuda_download(struct dt_backend *be, void *dst, const void *src, size_t bytes)
{
    struct cuda_ctx *c = ctx_of(be);
    CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, c->stream));
    CUDA_CHECK(cudaStreamSynchronize(c->stream));
}

/* portable at every policy: elementwise (nets/cuda/elementwise.cu). */
static enum dt_status cuda_relu_forward(struct dt_backend *be, float *y, const float *x,
                                        int64_t n, const struct dt_policy *pol)
{
    return launched(dt_cuda_relu_forward(y, x, n, (dt_cuda_stream)ctx_of(be)->stream),
                    "relu_forward");
}

static enum dt_status cuda_relu_backward(struct dt_backend *be, float *dx, const float *dy,
                                         const float *y, int64_t n, const struct dt_policy *pol)
{
    return launched(dt_cuda_relu_backward(dx, dy, y, n, (dt_cuda_stream)ctx_of(be)->stream),
                    "relu_backward");
}

static enum dt_status cuda_sgd_update(struct dt_backend *be, float *w, float *v, const float *g,
                                      int64_t n, float lr, float momentum, float weight_decay,
                                      const struct dt_policy *pol)
{
    return launched(dt_cuda_sgd_update(w, v, g, n, lr, momentum, weight_decay,
                                       (dt_cuda_stream)ctx_of(be)->stream),
                    "sgd_update");
}

const struct dt_backend_ops dt_backend_cuda_ops = {
    .version = DT_BACKEND_OPS_VERSION,
    .name = "cuda",
    .init = cuda_init,
    .destroy = cuda_destroy,
    .alloc = cuda_alloc,
    .free = cuda_free,
    .upload = cuda_upload,
    .download = cuda_download,
    .relu_forward = cuda_relu_forward,
    .relu_backward = cuda_relu_backward,
    .sgd_update = cuda_sgd_update,
};
