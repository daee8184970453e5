/* The exact matrix product on the CUDA backend: the host function beside its kernels, the
 * formulas those of determinism/exact_product.h that the CPU op calls -- so the bits are the
 * CPU's whatever the grid. This first form is one thread per row (scales, fixed point) and
 * one per output (the 128-bit dot product); the int8 GEMM path (cuBLAS, 32-bit integer
 * compute, the same integers) is issue 51's next step. NOT yet run on a GPU. */
#include "determinism/exact_product.h"
#include "nets/cuda/cuda.h"
#include "nets/cuda/launch.cuh"

/* Row r of a (rows of n values at stride `stride` apart, `step` between rows): its scale,
 * then its n values in fixed point at `levels` levels, contiguous in X. */
static __global__ void xp_fixed_kernel(int64_t *X, int *scale, const float *a, int64_t rows,
                                       int64_t n, int64_t step, int64_t stride, int levels)
{
    DT_GRID_STRIDE(r, rows)
    {
        const float *v = a + r * step;
        const int s = scale[r] = dt_xp_row_scale(v, n, stride);
        for (int64_t k = 0; k < n; k++) X[r * n + k] = dt_xp_fixed(v[k * stride], s, levels);
    }
}

/* Output (i, c): the integer dot product of A's row and B's column (at two levels its four
 * half products, as the CPU forms them), one rounding, then the bias. */
static __global__ void xp_out_kernel(float *C, const int64_t *XA, const int64_t *XBt, const int *sa,
                                     const int *sb, const float *bias, int64_t M, int64_t K,
                                     int64_t N, int levels)
{
    DT_GRID_STRIDE(o, M * N)
    {
        const int64_t i = o / N, c = o - i * N;
        const int64_t *a = XA + i * K, *b = XBt + c * K;
        const int e = dt_xp_out_exp(sa[i], sb[c], levels);
        float v;
        if (levels == 1) {
            v = dt_xp_to_float(dt_xp_dot(a, b, K, 1), e);
        } else {
            dt_xp_acc hh = 0, hl = 0, lh = 0, ll = 0;
            for (int64_t k = 0; k < K; k++) {
                const int64_t ah = dt_xp_hi(a[k]), al = dt_xp_lo(a[k]);
                const int64_t bh = dt_xp_hi(b[k]), bl = dt_xp_lo(b[k]);
                hh += ah * bh, hl += ah * bl, lh += al * bh, ll += al * bl;
            }
            v = dt_xp_to_float_halves(hh, hl, lh, ll, e);
        }
        C[o] = bias ? v + bias[c] : v;
    }
}

/* portable at every policy: integer sums and one rounding. The scales are read back to
 * name a non-finite input (one wait; the deferred-check form comes with the int8 path). */
extern "C" enum dt_status dt_cuda_matmul_exact(struct dt_backend *be, float *C, const float *A,
                                               const float *B, const float *bias, int64_t M,
                                               int64_t K, int64_t N, int trans, int levels,
                                               const struct dt_policy *pol)
{
    const struct dt_cuda_launch *L = &dt_cuda(be)->launch;
    const size_t xa = (size_t)(M * K), xb = (size_t)(N * K);
    char *ws = (char *)dt_cuda_scratch(be, 0, (xa + xb) * 8 + (size_t)(M + N) * sizeof(int));
    int64_t *XA = (int64_t *)ws, *XBt = XA + xa;
    int *sa = (int *)(XBt + xb), *sb = sa + M;
    const bool ta = trans & DT_XP_TA, tb = trans & DT_XP_TB;
    /* A's row i: A + i K at stride 1, or A + i at stride M; B's column c: B + c at stride N,
     * or B + c K at stride 1 */
    xp_fixed_kernel<<<dt_cuda_grid(L, M), L->block_threads, 0, L->stream>>>(
        XA, sa, A, M, K, ta ? 1 : K, ta ? M : 1, levels);
    xp_fixed_kernel<<<dt_cuda_grid(L, N), L->block_threads, 0, L->stream>>>(
        XBt, sb, B, N, K, tb ? K : 1, tb ? 1 : N, levels);
    int *host = (int *)dt_cuda_host_scratch(be, 0, (size_t)(M + N) * sizeof(int));
    const cudaError_t e = cudaMemcpyAsync(host, sa, (size_t)(M + N) * sizeof(int),
                                          cudaMemcpyDeviceToHost, (cudaStream_t)L->stream);
    if (e != cudaSuccess) return dt_cuda_launched(be, (int)e, "matmul_exact");
    dt_cuda_sync(be); /* the one wait, counted */
    for (int64_t r = 0; r < M + N; r++)
        if (host[r] == DT_XP_NONFINITE)
            return dt_backend_op_error(be, DT_ERR_NUMERIC, "non-finite input in %s %lld of %s",
                                       r < M ? "row" : "column", (long long)(r < M ? r : r - M),
                                       r < M ? "A" : "B");
    xp_out_kernel<<<dt_cuda_grid(L, M * N), L->block_threads, 0, L->stream>>>(
        C, XA, XBt, sa, sb, bias, M, K, N, levels);
    return dt_cuda_launched(be, (int)cudaGetLastError(), "matmul_exact");
}
