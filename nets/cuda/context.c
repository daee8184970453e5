/* What every CUDA op family uses (nets/cuda/cuda.h): error checks, the backend's one host
 * wait (counted), device and pinned scratch per slot, and the cuBLAS handle set to the
 * policy's math mode. Below the op families and the op table (nets/cuda/backend_cuda.c),
 * which own nothing of this. */
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "nets/cuda/cuda.h"
#include "nets/cuda/work.h" /* a recording backend: dt_cuda_recording, dt_cuda_note */

/* The backend whose step this thread captures (dt_cuda_capture_mark), or NULL. */
static _Thread_local struct dt_backend *capturing_be;

bool dt_cuda_capture_breaks(struct dt_backend *be, const char *fmt, ...)
{
    struct dt_cuda_ctx *c = dt_cuda(be);
    if (!c->capturing) return false;
    if (!c->capture_broken[0]) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->capture_broken, sizeof c->capture_broken, fmt, ap);
        va_end(ap);
    }
    return true;
}

void dt_cuda_capture_mark(struct dt_backend *be, bool on)
{
    struct dt_cuda_ctx *c = dt_cuda(be);
    c->capturing = on;
    capturing_be = on ? be : NULL;
    if (on) {
        c->capture_broken[0] = '\0';
        c->capture_gathers = 0;
        return;
    }
    for (int i = 0; i < DT_CUDA_SCRATCH_SLOTS; i++) { /* host scratch grown meanwhile */
        free(c->capture_spill[i]);
        c->capture_spill[i] = NULL;
    }
    for (int i = 0; i < c->capture_n_parked; i++) /* freed meanwhile: now, outside it */
        DT_CUDA_CHECK(cudaFree(c->capture_parked[i]));
    c->capture_n_parked = 0;
}

/* A site and a file name's tail: "nets/cuda/dense.cu:12" rather than the full path. */
static const char *tail(const char *file)
{
    const char *s = strstr(file, "nets/");
    return s ? s : file;
}

void dt_cuda_check(int e, const char *call, const char *file, int line)
{
    if (e == (int)cudaSuccess) return;
    if (capturing_be) { /* a capture's failure: the capture is not launched, the step reruns */
        (void)cudaGetLastError();
        dt_cuda_capture_breaks(capturing_be, "%s:%d: %s: %s", tail(file), line, call,
                               cudaGetErrorString((cudaError_t)e));
        return;
    }
    fprintf(stderr, "detrain: %s:%d: %s: %s\n", file, line, call,
            cudaGetErrorString((cudaError_t)e));
    abort();
}

void dt_cublas_check(int st, const char *call, const char *file, int line)
{
    if (st == (int)CUBLAS_STATUS_SUCCESS) return;
    if (capturing_be) {
        dt_cuda_capture_breaks(capturing_be, "%s:%d: %s: cuBLAS status %d", tail(file), line, call,
                               st);
        return;
    }
    fprintf(stderr, "detrain: %s:%d: %s: cuBLAS status %d\n", file, line, call, st);
    abort();
}

enum dt_status dt_cuda_launched(struct dt_backend *be, int rc, const char *op)
{
    if (rc == 0) return DT_OK;
    return dt_backend_op_error(be, DT_ERR_INTERNAL, "cuda %s: launch failed: %s", op,
                               cudaGetErrorString((cudaError_t)rc));
}

void dt_cuda_count_wait(struct dt_backend *be, const char *site)
{
    dt_cuda(be)->wait_site[be->host_waits % DT_CUDA_WAIT_SITES] = site;
    be->host_waits++;
}

void dt_cuda_sync_at(struct dt_backend *be, const char *site)
{
    if (dt_cuda_capture_breaks(be, "a host wait at %s", tail(site))) return;
    dt_cuda_count_wait(be, site); /* every training-thread wait goes through here */
    if (dt_cuda_recording(be)) {  /* where the real backend waits: counted in the record */
        dt_cuda_note_wait(be);
        return;
    }
    DT_CUDA_CHECK(cudaStreamSynchronize((cudaStream_t)dt_cuda(be)->stream));
}

void dt_cuda_wait_sites(struct dt_backend *be, int64_t first, char *buf, size_t n)
{
    const struct dt_cuda_ctx *c = dt_cuda(be);
    size_t used = 0;
    if (n) buf[0] = 0;
    if (first < be->host_waits - DT_CUDA_WAIT_SITES) first = be->host_waits - DT_CUDA_WAIT_SITES;
    for (int64_t k = first < 0 ? 0 : first; k < be->host_waits && used + 1 < n; k++) {
        const char *site = c->wait_site[k % DT_CUDA_WAIT_SITES], *slash = strrchr(site, '/');
        const int w =
            snprintf(buf + used, n - used, "%s%s", used ? "; " : "", slash ? slash + 1 : site);
        if (w < 0) break;
        used += (size_t)w < n - used ? (size_t)w : n - used - 1;
    }
}

void dt_cuda_copy_d2d(struct dt_backend *be, void *dst, const void *src, size_t bytes,
                      dt_cuda_stream s)
{
    be->launches.copies++;
    if (dt_cuda_note(&dt_cuda(be)->launch, dt_work(2.0 * (double)bytes, 0.0))) return;
    DT_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, (cudaStream_t)s));
}

void *dt_cuda_scratch(struct dt_backend *be, int slot, size_t bytes)
{
    struct dt_cuda_ctx *c = dt_cuda(be);
    DT_ASSERT(slot >= 0 && slot < DT_CUDA_SCRATCH_SLOTS);
    /* recording: no device memory; an address no host code reads (kernels are not run) */
    if (dt_cuda_recording(be)) return (void *)(uintptr_t)(((uintptr_t)slot + 1) << 32);
    if (bytes <= c->scratch_bytes[slot] && c->scratch[slot]) return c->scratch[slot];
    /* capturing: nothing runs, so an address no kernel will read serves (the step reruns) */
    if (dt_cuda_capture_breaks(be, "device scratch slot %d grew inside the step", slot))
        return c->scratch[slot] ? c->scratch[slot]
                                : (void *)(uintptr_t)(((uintptr_t)slot + 1) << 32);
    if (c->scratch[slot]) { /* queued work may still read the old buffer: wait, then free */
        dt_cuda_sync(be);
        DT_CUDA_CHECK(cudaFree(c->scratch[slot]));
        c->scratch[slot] = NULL;
    }
    size_t grow = bytes + bytes / 2 + 256;
    DT_CUDA_CHECK(cudaMalloc(&c->scratch[slot], grow));
    c->scratch_bytes[slot] = grow;
    return c->scratch[slot];
}

void *dt_cuda_host_scratch(struct dt_backend *be, int slot, size_t bytes)
{
    struct dt_cuda_ctx *c = dt_cuda(be);
    DT_ASSERT(slot >= 0 && slot < DT_CUDA_SCRATCH_SLOTS);
    if (bytes <= c->host_scratch_bytes[slot] && c->host_scratch[slot]) return c->host_scratch[slot];
    /* capturing: the host code may write it, so plain memory, freed as the capture ends */
    if (dt_cuda_capture_breaks(be, "pinned scratch slot %d grew inside the step", slot)) {
        free(c->capture_spill[slot]);
        c->capture_spill[slot] = dt_xcalloc(1, bytes);
        return c->capture_spill[slot];
    }
    if (dt_cuda_recording(be)) { /* host memory the host code may write: plain, not pinned */
        free(c->host_scratch[slot]);
        c->host_scratch[slot] = dt_xcalloc(1, bytes);
        c->host_scratch_bytes[slot] = bytes;
        return c->host_scratch[slot];
    }
    if (c->host_scratch[slot]) { /* an empty slot has nothing queued to wait for */
        dt_cuda_sync(be);
        DT_CUDA_CHECK(cudaFreeHost(c->host_scratch[slot]));
        c->host_scratch[slot] = NULL;
    }
    size_t grow = bytes + bytes / 2 + 256;
    DT_CUDA_CHECK(cudaMallocHost(&c->host_scratch[slot], grow));
    c->host_scratch_bytes[slot] = grow;
    return c->host_scratch[slot];
}

void *dt_cuda_cublas_int8(struct dt_backend *be)
{
    struct dt_cuda_ctx *c = dt_cuda(be);
    if (dt_cuda_recording(be)) return NULL; /* no handle: no product is made */
    if (c->cublas_mode != (int)CUBLAS_DEFAULT_MATH) {
        DT_CUBLAS_CHECK(cublasSetMathMode((cublasHandle_t)c->cublas, CUBLAS_DEFAULT_MATH));
        c->cublas_mode = (int)CUBLAS_DEFAULT_MATH;
    }
    return c->cublas;
}

void *dt_cuda_cublas_for(struct dt_backend *be, const struct dt_policy *pol)
{
    struct dt_cuda_ctx *c = dt_cuda(be);
    if (dt_cuda_recording(be)) return NULL; /* no handle: no product is made */
    /* tf32: TF32 tensor cores; fast: cuBLAS's FP32 default (no TF32 for FP32 data, as
     * PyTorch's default products); strict: pedantic FP32 */
    const int mode = dt_math_tf32(pol)   ? (int)CUBLAS_TF32_TENSOR_OP_MATH
                     : dt_math_fast(pol) ? (int)CUBLAS_DEFAULT_MATH
                                         : (int)CUBLAS_PEDANTIC_MATH;
    if (c->cublas_mode != mode) {
        DT_CUBLAS_CHECK(cublasSetMathMode((cublasHandle_t)c->cublas, (cublasMath_t)mode));
        c->cublas_mode = mode;
    }
    return c->cublas;
}
