/* Dense layer on the CUDA backend (host side; kernels in nets/cuda/dense.cu): forward,
 * backward-data, backward-weight and the bias gradient, mirroring nets/cpu/dense.c op for
 * op. Data path (docs/DESIGN.md): nets/backend -> here -> dense.cu or cuBLAS. The controls:
 *
 *   matrix products  math portable -> dt_cuda_gemm_ordered: every output summed over k in
 *                    index order from +0, two roundings per term: the CPU's bits;
 *                    math fast / strict -> cuBLAS (TF32 allowed / pedantic FP32,
 *                    dt_cuda_cublas_for), row-major products as column-major ones.
 *   backward-weight  the sum over the batch, chunk partials combined under `reduction`:
 *                    fixed     -> canonical chunks of DT_REDUCE_CHUNK rows and the fixed
 *                                 tree of reduce.h per element: at portable the CPU's bits;
 *                    unordered -> math fast / strict: one cuBLAS product over the batch
 *                                 (the fastest path; deterministic on one device);
 *                                 math portable: chunks of DT_UNORDERED_CHUNK rows added by
 *                                 float atomicAdd (arrival order); the forced-order hook
 *                                 adds them in a drawn order instead, the CPU's (same
 *                                 chunks, same draw).
 *   bias gradient    the sum over the batch under `atomics`:
 *                    fixed_point -> exact int64 fixed point, one rounding: the CPU's bits
 *                                   at every level; non-finite input and float overflow
 *                                   are reported like the CPU's;
 *                    float       -> row-slice sums added by float atomicAdd; the forced-order
 *                                   hook adds the rows in the CPU's drawn order. */
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <limits.h>
#include <stdio.h>

#include "determinism/exact_product.h"
#include "determinism/reduce.h"
#include "determinism/streams.h" /* dt_forced_permutation: the drawn orders */
#include "nets/cuda/dense_loss.h"

/* Scratch slots (nets/cuda/cuda.h): chunk partials or fixed-point counters; the permutation
 * or the fixed-point record. */
#define SLOT_PARTIALS 0
#define SLOT_SMALL 1

/* cuBLAS takes int sizes and leading dimensions. */
static int as_int(int64_t v)
{
    DT_ASSERT_MSG(v >= 0 && v <= INT_MAX, "dense size beyond cuBLAS's int range");
    return (int)v;
}

/* The forced combination order (test hook), drawn as the CPU backend draws it with the
 * same salt, uploaded to device scratch. Synchronises: the pinned copy is reused. */
const int64_t *dt_cuda_forced_perm(struct dt_backend *be, int64_t m, uint64_t salt)
{
    struct dt_cuda_ctx *c = dt_cuda(be);
    const size_t bytes = (size_t)m * sizeof(int64_t);
    int64_t *h = dt_cuda_host_scratch(be, SLOT_SMALL, bytes);
    int64_t *d = dt_cuda_scratch(be, SLOT_SMALL, bytes);
    dt_forced_permutation(h, m, c->forced_order, salt);
    DT_CUDA_CHECK(cudaMemcpyAsync(d, h, bytes, cudaMemcpyHostToDevice, (cudaStream_t)c->stream));
    dt_cuda_sync(be);
    return d;
}

/* math portable: ordered; fast -> cuBLAS TF32; strict -> cuBLAS pedantic FP32.
 * y (B,out) = x (B,in) . w (in,out), then y + bias in its own rounding (every level).
 * Column-major, y^T (out,B) = w^T (out,in) . x^T (in,B): the row-major arrays as they are. */
enum dt_status dt_cuda_dense_forward(struct dt_backend *be, float *y, const float *x,
                                     const float *w, const float *bias, int64_t B, int64_t in,
                                     int64_t out, const struct dt_policy *pol)
{
    if (dt_math_exact(pol)) /* the CPU's formula (determinism/exact_product.h), its bits */
        return dt_cuda_matmul_exact(be, y, x, w, bias, B, in, out, 0, DT_XP_LEVELS_FORWARD, pol);
    if (dt_math_portable(pol)) {
        struct dt_cuda_gemm_args g = {.c = y,
                                      .a = x,
                                      .b = w,
                                      .M = B,
                                      .N = out,
                                      .K = in,
                                      .k_chunk = in,
                                      .batches = 1,
                                      .a_si = in,
                                      .a_sk = 1,
                                      .b_sk = out,
                                      .b_sj = 1};
        DT_FORWARD_IF_ERROR(
            dt_cuda_launched(be, dt_cuda_gemm_ordered(&g, &dt_cuda(be)->launch), "dense_forward"));
    } else {
        const float one = 1.0f, zero = 0.0f;
        DT_CUBLAS_CHECK(cublasSgemm((cublasHandle_t)dt_cuda_cublas_for(be, pol), CUBLAS_OP_N,
                                    CUBLAS_OP_N, as_int(out), as_int(B), as_int(in), &one, w,
                                    as_int(out), x, as_int(in), &zero, y, as_int(out)));
    }
    return dt_cuda_launched(be, dt_cuda_bias_add(y, bias, B, out, &dt_cuda(be)->launch),
                            "dense_forward bias");
}

/* math portable: dx[b,k] = sum over o ascending of dy[b,o] w[k,o] from +0 (w read
 * transposed in place; the CPU's bits, which it gets through an exact transpose).
 * fast / strict: cuBLAS, dx^T (in,B) = w (in,out) . dy^T (out,B). */
enum dt_status dt_cuda_dense_backward_data(struct dt_backend *be, float *dx, const float *dy,
                                           const float *w, int64_t B, int64_t in, int64_t out,
                                           const struct dt_policy *pol)
{
    if (dt_math_exact(pol)) /* w (in, out) is B^T stored (N, K) */
        return dt_cuda_matmul_exact(be, dx, dy, w, NULL, B, out, in, DT_XP_TB, DT_XP_LEVELS_FORWARD,
                                    pol);
    if (dt_math_portable(pol)) {
        struct dt_cuda_gemm_args g = {.c = dx,
                                      .a = dy,
                                      .b = w,
                                      .M = B,
                                      .N = in,
                                      .K = out,
                                      .k_chunk = out,
                                      .batches = 1,
                                      .a_si = out,
                                      .a_sk = 1,
                                      .b_sk = 1,
                                      .b_sj = out};
        return dt_cuda_launched(be, dt_cuda_gemm_ordered(&g, &dt_cuda(be)->launch),
                                "dense_backward_data");
    }
    const float one = 1.0f, zero = 0.0f;
    DT_CUBLAS_CHECK(cublasSgemm((cublasHandle_t)dt_cuda_cublas_for(be, pol), CUBLAS_OP_T,
                                CUBLAS_OP_N, as_int(in), as_int(B), as_int(out), &one, w,
                                as_int(out), dy, as_int(out), &zero, dx, as_int(in)));
    return DT_OK;
}

/* Chunk partials of backward-weight: p[c] (in,out) = sum over the rows of chunk c (chunk
 * rows each, the last may be short) of x[b,:]^T dy[b,:], m = ceil(B / chunk) of them.
 * portable: ordered (rows ascending from +0, the CPU's partials). fast / strict: cuBLAS,
 * p[c]^T (out,in) = dy_c^T (out,len) . x_c (len,in): full chunks in one strided batch,
 * a short last chunk on its own. */
static enum dt_status wgrad_partials(struct dt_backend *be, float *p, const float *x,
                                     const float *dy, int64_t B, int64_t in, int64_t out,
                                     int64_t chunk, const struct dt_policy *pol)
{
    const int64_t n = in * out;
    if (dt_math_portable(pol)) {
        struct dt_cuda_gemm_args g = {.c = p,
                                      .a = x,
                                      .b = dy,
                                      .M = in,
                                      .N = out,
                                      .K = B,
                                      .k_chunk = chunk,
                                      .batches = (B + chunk - 1) / chunk,
                                      .a_si = 1,
                                      .a_sk = in,
                                      .a_batch = chunk * in,
                                      .b_sk = out,
                                      .b_sj = 1,
                                      .b_batch = chunk * out,
                                      .c_batch = n};
        return dt_cuda_launched(be, dt_cuda_gemm_ordered(&g, &dt_cuda(be)->launch),
                                "dense_backward_weight");
    }
    cublasHandle_t h = (cublasHandle_t)dt_cuda_cublas_for(be, pol);
    const float one = 1.0f, zero = 0.0f;
    const int64_t full = B / chunk, rest = B - full * chunk;
    if (full > 0)
        DT_CUBLAS_CHECK(cublasSgemmStridedBatched(
            h, CUBLAS_OP_N, CUBLAS_OP_T, as_int(out), as_int(in), as_int(chunk), &one, dy,
            as_int(out), (long long)(chunk * out), x, as_int(in), (long long)(chunk * in), &zero, p,
            as_int(out), (long long)n, as_int(full)));
    if (rest > 0)
        DT_CUBLAS_CHECK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_T, as_int(out), as_int(in),
                                    as_int(rest), &one, dy + full * chunk * out, as_int(out),
                                    x + full * chunk * in, as_int(in), &zero, p + full * n,
                                    as_int(out)));
    return DT_OK;
}

/* dw[k,o] = sum over the batch of x[b,k] dy[b,o]: chunk partials (math control), combined
 * per the `reduction` control (file comment). */
enum dt_status dt_cuda_dense_backward_weight(struct dt_backend *be, float *dw, const float *x,
                                             const float *dy, int64_t B, int64_t in, int64_t out,
                                             const struct dt_policy *pol)
{
    if (dt_math_exact(pol)) { /* x (B, in) is A^T stored (K, M); order-free: reduction moot */
        const enum dt_status st = dt_backend_xp_wgrad_rows(be, B);
        if (st != DT_OK) return st;
        return dt_cuda_matmul_exact(be, dw, x, dy, NULL, in, B, out, DT_XP_TA, DT_XP_LEVELS_WGRAD,
                                    pol);
    }
    struct dt_cuda_ctx *c = dt_cuda(be);
    const int64_t n = in * out;
    const bool fixed = dt_reduction_ordered(pol);
    if (!fixed && !c->forced_order && !dt_math_portable(pol)) {
        /* the fastest path a user can choose: one cuBLAS product over the whole batch,
         * dw^T (out,in) = dy^T (out,B) . x (B,in). cuBLAS sums without atomics here, so this
         * op is deterministic run to run on one device even at `fast` (docs/gpu.md); the
         * forced-order hook keeps the chunked path, where tests show the control matters. */
        const float one = 1.0f, zero = 0.0f;
        DT_CUBLAS_CHECK(cublasSgemm((cublasHandle_t)dt_cuda_cublas_for(be, pol), CUBLAS_OP_N,
                                    CUBLAS_OP_T, as_int(out), as_int(in), as_int(B), &one, dy,
                                    as_int(out), x, as_int(in), &zero, dw, as_int(out)));
        return DT_OK;
    }
    const int64_t chunk = fixed ? DT_REDUCE_CHUNK : DT_UNORDERED_CHUNK;
    const int64_t m = (B + chunk - 1) / chunk;
    float *p = dt_cuda_scratch(be, SLOT_PARTIALS, (size_t)(m * n) * sizeof(float));
    DT_FORWARD_IF_ERROR(wgrad_partials(be, p, x, dy, B, in, out, chunk, pol));
    if (fixed)
        return dt_cuda_launched(be, dt_cuda_reduce_tree(dw, p, m, n, &dt_cuda(be)->launch),
                                "dense_backward_weight tree");
    if (c->forced_order) {
        const int64_t *perm = dt_cuda_forced_perm(be, m, DT_FORCED_CHUNKS);
        return dt_cuda_launched(
            be, dt_cuda_add_partials_in_order(dw, p, perm, m, n, &dt_cuda(be)->launch),
            "dense_backward_weight forced");
    }
    return dt_cuda_launched(be, dt_cuda_add_partials_atomic(dw, p, m, n, &dt_cuda(be)->launch),
                            "dense_backward_weight atomic");
}

/* atomics fixed_point: exact, order-free; the shift is computed on the device from the
 * device's max |dy| (no host round trip); its error record is read back at once, or at
 * the step's end when checks are deferred (status.c). atomics float: slice sums by atomicAdd;
 * forced order: rows in the drawn order. */
int64_t dt_cuda_first_nonfinite(struct dt_backend *be, const float *p, int64_t n)
{
    if (n <= 0) return -1;
    struct dt_cuda_ctx *c = dt_cuda(be);
    struct dt_cuda_fixed_record *rec = dt_cuda_scratch(be, SLOT_SMALL, sizeof *rec);
    DT_CUDA_CHECK(
        dt_cuda_fixed_scan(rec, p, n, &dt_cuda(be)->launch)); /* a launch failure aborts */
    struct dt_cuda_fixed_record *h = dt_cuda_host_scratch(be, SLOT_SMALL, sizeof *h);
    DT_CUDA_CHECK(
        cudaMemcpyAsync(h, rec, sizeof *h, cudaMemcpyDeviceToHost, (cudaStream_t)c->stream));
    dt_cuda_sync(be);
    return h->first_bad == DT_CUDA_NO_INDEX ? -1 : (int64_t)h->first_bad;
}

bool dt_cuda_first_nonfinite_many(struct dt_backend *be, const float *const *p, const int64_t *n,
                                  int count, int *which, int64_t *index)
{
    if (count <= 0) return false;
    struct dt_cuda_ctx *c = dt_cuda(be);
    const size_t bytes = (size_t)count * sizeof(struct dt_cuda_fixed_record);
    struct dt_cuda_fixed_record *rec = dt_cuda_scratch(be, SLOT_SMALL, bytes);
    for (int i = 0; i < count; i++)
        if (n[i] > 0) DT_CUDA_CHECK(dt_cuda_fixed_scan(&rec[i], p[i], n[i], &dt_cuda(be)->launch));
    struct dt_cuda_fixed_record *h = dt_cuda_host_scratch(be, SLOT_SMALL, bytes);
    DT_CUDA_CHECK(cudaMemcpyAsync(h, rec, bytes, cudaMemcpyDeviceToHost, (cudaStream_t)c->stream));
    dt_cuda_sync(be);
    for (int i = 0; i < count; i++)
        if (n[i] > 0 && h[i].first_bad != DT_CUDA_NO_INDEX) {
            *which = i;
            *index = (int64_t)h[i].first_bad;
            return true;
        }
    return false;
}

static enum dt_status bias_fixed_one_launch(struct dt_backend *be, float *dbias, const float *dy,
                                            const int64_t *row, int64_t count, int64_t mult,
                                            int64_t out);

enum dt_status dt_cuda_bias_backward(struct dt_backend *be, float *dbias, const float *dy,
                                     int64_t B, int64_t out, const struct dt_policy *pol)
{
    struct dt_cuda_ctx *c = dt_cuda(be);
    if (!dt_atomics_exact(pol)) {
        if (c->forced_order) {
            const int64_t *perm = dt_cuda_forced_perm(be, B, DT_FORCED_ROWS);
            return dt_cuda_launched(
                be, dt_cuda_add_partials_in_order(dbias, dy, perm, B, out, &dt_cuda(be)->launch),
                "bias_backward forced");
        }
        return dt_cuda_launched(be,
                                dt_cuda_bias_grad_atomic(dbias, dy, B, out, &dt_cuda(be)->launch),
                                "bias_backward atomic");
    }
    const int64_t all[2] = {0, B}; /* one block when small: the same bits, one launch */
    const enum dt_status one = bias_fixed_one_launch(be, dbias, dy, all, 1, 1, out);
    if (one != DT_ERR_UNSUPPORTED) return one;
    unsigned long long *acc =
        dt_cuda_scratch(be, SLOT_PARTIALS, (size_t)out * sizeof(unsigned long long));
    bool deferred = false;
    struct dt_cuda_fixed_record *rec =
        dt_cuda_check_record(be, DT_CUDA_CHECK_BIAS, "bias gradient", out, SLOT_SMALL, &deferred);
    DT_FORWARD_IF_ERROR(dt_cuda_launched(
        be, dt_cuda_bias_grad_fixed(dbias, acc, rec, dy, B, out, &dt_cuda(be)->launch),
        "bias_backward fixed point"));
    if (deferred) return DT_OK; /* read at the step's end (status.c) */
    return dt_cuda_check_now(be, rec, DT_CUDA_CHECK_BIAS, "bias gradient", out, SLOT_SMALL);
}

/* The fixed-point bias gradient of `count` row ranges (row[k] * mult to row[k + 1] * mult of
 * dy), partial k at dbias + k * out, in one launch (dense.cu, bias_fixed_shards_kernel: a
 * block per range, dt_fixed_sum_rows's bits) with its check record; DT_ERR_UNSUPPORTED
 * beyond the kernel's bounds (the caller takes the four-kernel path or a call per shard). */
static enum dt_status bias_fixed_one_launch(struct dt_backend *be, float *dbias, const float *dy,
                                            const int64_t *row, int64_t count, int64_t mult,
                                            int64_t out)
{
    struct dt_cuda_ctx *c = dt_cuda(be);
    const int64_t widest = dt_cuda_widest_shard(row, count, mult);
    if (!c->one_pass || !dt_cuda_bias_one_launch_fits(count, widest, out))
        return DT_ERR_UNSUPPORTED;
    if (!c->one_pass_count) { /* once per backend: zeroed, and zero after every launch */
        DT_CUDA_CHECK(cudaMalloc((void **)&c->one_pass_count, sizeof *c->one_pass_count));
        DT_CUDA_CHECK(cudaMemset(c->one_pass_count, 0, sizeof *c->one_pass_count));
    }
    struct dt_cuda_fixed_record *block_rec =
        dt_cuda_scratch(be, SLOT_PARTIALS, (size_t)count * sizeof(struct dt_cuda_fixed_record));
    bool deferred = false;
    struct dt_cuda_fixed_record *rec =
        dt_cuda_check_record(be, DT_CUDA_CHECK_BIAS, "bias gradient", out, SLOT_SMALL, &deferred);
    DT_FORWARD_IF_ERROR(
        dt_cuda_launched(be,
                         dt_cuda_bias_grad_fixed_shards(dbias, rec, block_rec, c->one_pass_count,
                                                        dy, row, count, mult, out, &c->launch),
                         "bias_backward one launch"));
    if (deferred) return DT_OK; /* read at the step's end (status.c) */
    return dt_cuda_check_now(be, rec, DT_CUDA_CHECK_BIAS, "bias gradient", out, SLOT_SMALL);
}

/* reduction: exact with shards set, atomics fixed_point: every shard's partial in one
 * launch, the bits of a call per shard; beyond the kernel's bounds DT_ERR_UNSUPPORTED:
 * nets/dispatch.c then calls the op per shard. */
enum dt_status dt_cuda_bias_backward_shards(struct dt_backend *be, float *dbias, const float *dy,
                                            int64_t B, int64_t out, const struct dt_policy *pol)
{
    const struct dt_shards *sh = &be->shards;
    DT_ASSERT(sh->count > 0);
    if (!dt_atomics_exact(pol)) return DT_ERR_UNSUPPORTED;
    return bias_fixed_one_launch(be, dbias, dy, sh->row, sh->count, B / sh->row[sh->count], out);
}

/* reduction: exact with shards set, math: portable: every shard's weight-gradient partial
 * in one launch (dense.cu, wgrad_shards_kernel), the bits of a call per shard (the chunks
 * and the fixed tree). Other products (cuBLAS, the exact product), more shards than the
 * kernel takes, or the first light's paths: DT_ERR_UNSUPPORTED, a call per shard. */
enum dt_status dt_cuda_dense_backward_weight_shards(struct dt_backend *be, float *dw,
                                                    const float *x, const float *dy, int64_t B,
                                                    int64_t in, int64_t out,
                                                    const struct dt_policy *pol)
{
    struct dt_cuda_ctx *c = dt_cuda(be);
    const struct dt_shards *sh = &be->shards;
    DT_ASSERT(sh->count > 0 && B % sh->row[sh->count] == 0);
    const int64_t widest = dt_cuda_widest_shard(sh->row, sh->count, B / sh->row[sh->count]);
    if (!c->one_pass || !dt_math_portable(pol) || dt_math_exact(pol) ||
        !dt_cuda_wgrad_one_launch_fits(sh->count, widest))
        return DT_ERR_UNSUPPORTED;
    return dt_cuda_launched(be,
                            dt_cuda_wgrad_shards(dw, x, dy, sh->row, sh->count,
                                                 B / sh->row[sh->count], in, out, &c->launch),
                            "dense_backward_weight shards");
}
