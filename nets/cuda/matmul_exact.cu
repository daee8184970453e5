/* The exact matrix product on the CUDA backend: the host function beside its kernels, the
 * formulas those of determinism/exact_product.h that the CPU op calls -- so the bits are the
 * CPU's whatever the grid. Two forms, the same integers:
 *   int8    the Ozaki slices as int8 matrices (K contiguous, padded with zeros to multiples
 *           of 16), one cuBLAS int8 GEMM with 32-bit integer compute per slice pair
 *           (cublasGemmStridedBatchedEx, batched over B's slices), K cut into blocks of at
 *           most DT_XP_K_MAX so every int32 sum is exact, output rows in blocks that bound
 *           the scratch; a kernel folds each block's products into the outputs' integers
 *           (dt_xp_combine per half pair) and a last one rounds (dt_xp_to_float[_halves]);
 *   simple  one thread per row (scales, fixed point) and one per output (the dot products):
 *           where cuBLAS refuses the int8 call, and under DETRAIN_CUDA_XP=simple (tests; read
 *           once, when the backend is made: dt_cuda_ctx.xp_simple).
 * Both NOT yet run on a GPU: tests/test_xp.c gpu_equals_cpu holds them to the CPU's bits
 * there; the slicing and grouping are checked on the host (slices_combine_...). A
 * non-finite input is named by a check record (xp_scales), read with the step's end in a
 * training step: no host wait of the op's own there. */
#include <cublas_v2.h>
#include <stdlib.h>
#include <string.h>

#include "determinism/exact_product.h"
#include "nets/cuda/cuda.h"
#include "nets/cuda/dense_loss.h"
#include "nets/cuda/launch.cuh"

/* Row r's scale (rows of n values at stride `stride`, `step` between rows). */
static __global__ void __launch_bounds__(1024)
    xp_scale_kernel(int *scale, const float *a, int64_t rows, int64_t n, int64_t step,
                    int64_t stride)
{
    DT_GRID_STRIDE(r, rows) { scale[r] = dt_xp_row_scale(a + r * step, n, stride); }
}

/* Where the op's rows of A and columns of B lie: A's row i at A + i step, values `stride`
 * apart (A + i K at 1, or stored transposed A + i at M); B's column c likewise (B + c at N,
 * or stored transposed B + c K at 1). */
struct xp_walk {
    int64_t a_step, a_stride, b_step, b_stride;
};
static struct xp_walk xp_walk_of(int64_t M, int64_t K, int64_t N, int trans)
{
    const bool ta = trans & DT_XP_TA, tb = trans & DT_XP_TB;
    return (struct xp_walk){ta ? 1 : K, ta ? M : 1, tb ? K : 1, tb ? 1 : N};
}

/* The check record of a product's scales (status.c, DT_CUDA_CHECK_XP): first_bad = the
 * first index r of sa (A's rows, then B's columns from M on) whose scale is
 * DT_XP_NONFINITE, or none. One block: it resets the record, then every thread takes
 * the minimum of its indices' (atomicMin: the least index whatever the order). */
#define XP_CHECK_THREADS 256
#define SLOT_XP_CHECK 1 /* the record when checked at once: read before the int8 form's blocks */
static __global__ void __launch_bounds__(XP_CHECK_THREADS)
    xp_check_kernel(struct dt_cuda_fixed_record *rec, const int *sa, int64_t n)
{
    if (threadIdx.x == 0) dt_cuda_fixed_record_reset(rec);
    __syncthreads();
    for (int64_t r = threadIdx.x; r < n; r += blockDim.x)
        if (sa[r] == DT_XP_NONFINITE) {
            atomicMin(&rec->first_bad, (unsigned long long)r);
            break; /* this thread's least; the others' may be less */
        }
}

/* Both forms' first step: the scales of A's rows (sa) and B's columns (sb, right after sa),
 * and the check naming a non-finite input: read with the step's end when checks are
 * deferred (a training step: no wait of the op's own; the product goes on with such a row
 * or column as zeros, dt_xp_fixed, and the step fails at its end), else at once -- the
 * op's one wait. */
static enum dt_status xp_scales(struct dt_backend *be, int *sa, const float *A, const float *B,
                                int64_t M, int64_t K, int64_t N, const struct xp_walk *w)
{
    const struct dt_cuda_launch *L = &dt_cuda(be)->launch;
    const cudaStream_t st = (cudaStream_t)L->stream;
    const double Md = (double)M, Nd = (double)N, Kd = (double)K;
    DT_LAUNCH(L, dt_work(4.0 * (Md * Kd + Md), DT_W_OPS_SCAN * Md * Kd), xp_scale_kernel,
              dt_cuda_grid(L, M), L->block_threads, 0, st)
    (sa, A, M, K, w->a_step, w->a_stride);
    DT_LAUNCH(L, dt_work(4.0 * (Nd * Kd + Nd), DT_W_OPS_SCAN * Nd * Kd), xp_scale_kernel,
              dt_cuda_grid(L, N), L->block_threads, 0, st)
    (sa + M, B, N, K, w->b_step, w->b_stride);
    bool deferred = false;
    struct dt_cuda_fixed_record *rec =
        dt_cuda_check_record(be, DT_CUDA_CHECK_XP, "matmul_exact", M, SLOT_XP_CHECK, &deferred);
    DT_LAUNCH(L, dt_work(4.0 * (Md + Nd), Md + Nd), xp_check_kernel, 1, XP_CHECK_THREADS, 0, st)
    (rec, sa, M + N);
    DT_FORWARD_IF_ERROR(dt_cuda_launched(be, DT_LAUNCHED(L), "matmul_exact check"));
    if (deferred) return DT_OK; /* read at the step's end (status.c) */
    return dt_cuda_check_now(be, rec, DT_CUDA_CHECK_XP, "matmul_exact", M, SLOT_XP_CHECK);
}

/* Row r's n values in fixed point at `levels` levels, as the CPU holds them: half h of every
 * value (dt_xp_half) at X + h rows n, the row's values contiguous. */
static __global__ void __launch_bounds__(1024)
    xp_fixed_kernel(int64_t *X, const int *scale, const float *a, int64_t rows, int64_t n,
                    int64_t step, int64_t stride, int levels)
{
    DT_GRID_STRIDE(r, rows)
    {
        const float *v = a + r * step;
        for (int64_t k = 0; k < n; k++) {
            const int64_t x = dt_xp_fixed(v[k * stride], scale[r], levels);
            for (int h = 0; h < levels; h++) X[(h * rows + r) * n + k] = dt_xp_half(x, h, levels);
        }
    }
}

/* Output (i, c): one dot product per pair of halves (dt_xp_dot, as the CPU's), one
 * rounding, then the bias. */
static __global__ void __launch_bounds__(1024)
    xp_out_kernel(float *C, const int64_t *XA, const int64_t *XBt, const int *sa, const int *sb,
                  const float *bias, int64_t M, int64_t K, int64_t N, int levels)
{
    DT_GRID_STRIDE(o, M * N)
    {
        const int64_t i = o / N, c = o - i * N;
        dt_xp_acc part[4];
        for (int h = 0; h < levels * levels; h++)
            part[h] = dt_xp_dot(XA + ((h >> (levels - 1)) * M + i) * K,
                                XBt + ((h & (levels - 1)) * N + c) * K, K, 1);
        const float v = dt_xp_round_parts(part, dt_xp_out_exp(sa[i], sb[c], levels), levels);
        C[o] = bias ? v + bias[c] : v;
    }
}

/* The simple form: one thread per row, then one per output. */
static enum dt_status xp_simple(struct dt_backend *be, float *C, const float *A, const float *B,
                                const float *bias, int64_t M, int64_t K, int64_t N, int trans,
                                int levels)
{
    const struct dt_cuda_launch *L = &dt_cuda(be)->launch;
    const size_t xa = (size_t)(M * K) * levels, xb = (size_t)(N * K) * levels;
    char *ws = (char *)dt_cuda_scratch(be, 0, (xa + xb) * 8 + (size_t)(M + N) * sizeof(int));
    int64_t *XA = (int64_t *)ws, *XBt = XA + xa;
    int *sa = (int *)(XBt + xb), *sb = sa + M;
    const struct xp_walk w = xp_walk_of(M, K, N, trans);
    DT_FORWARD_IF_ERROR(xp_scales(be, sa, A, B, M, K, N, &w));
    /* each value to `levels` int64 halves; then a thread an output summing levels^2 dot
     * products of K 128-bit terms */
    const double Md = (double)M, Nd = (double)N, Kd = (double)K, lv = (double)levels;
    DT_LAUNCH(L, dt_work(4.0 * Md * Kd + 8.0 * lv * Md * Kd, DT_W_OPS_XP_FIXED * lv * Md * Kd),
              xp_fixed_kernel, dt_cuda_grid(L, M), L->block_threads, 0, L->stream)
    (XA, sa, A, M, K, w.a_step, w.a_stride, levels);
    DT_LAUNCH(L, dt_work(4.0 * Nd * Kd + 8.0 * lv * Nd * Kd, DT_W_OPS_XP_FIXED * lv * Nd * Kd),
              xp_fixed_kernel, dt_cuda_grid(L, N), L->block_threads, 0, L->stream)
    (XBt, sb, B, N, K, w.b_step, w.b_stride, levels);
    DT_LAUNCH(L,
              dt_work(8.0 * lv * (Md + Nd) * Kd + 4.0 * Md * Nd,
                      DT_W_OPS_XP_MAC * lv * lv * Md * Nd * Kd),
              xp_out_kernel, dt_cuda_grid(L, M * N), L->block_threads, 0, L->stream)
    (C, XA, XBt, sa, sb, bias, M, K, N, levels);
    return dt_cuda_launched(be, DT_LAUNCHED(L), "matmul_exact");
}

/* ---- the int8 form ------------------------------------------------------------------------- */

/* The S slices of every value: slice p of row r, element k at sl[(p rows_p + r) kp + k];
 * the padding (r >= rows or k >= n) zero. */
static __global__ void __launch_bounds__(1024)
    xp_slice_kernel(int8_t *sl, const int *scale, const float *a, int64_t rows, int64_t n,
                    int64_t step, int64_t stride, int64_t rows_p, int64_t kp, int levels)
{
    DT_GRID_STRIDE(o, rows_p * kp)
    {
        const int64_t r = o / kp, k = o - r * kp;
        const int64_t X =
            r < rows && k < n ? dt_xp_fixed(a[r * step + k * stride], scale[r], levels) : 0;
        for (int p = 0; p < DT_XP_SLICES * levels; p++)
            sl[(p * rows_p + r) * kp + k] = dt_xp_slice(X, p, levels);
    }
}

/* The outputs' integers (rows [0, rows) of the block, N columns, L^2 parts each) += A's
 * slice p against every slice q of B: P (S, rows_p, np) int32, folded by dt_xp_fold. */
static __global__ void __launch_bounds__(1024)
    xp_fold_kernel(dt_xp_acc *acc, const int32_t *P, int p, int64_t rows, int64_t rows_p,
                   int64_t np, int64_t N, int levels)
{
    DT_GRID_STRIDE(o, rows * N)
    {
        const int64_t i = o / N, c = o - i * N;
        for (int q = 0; q < DT_XP_SLICES * levels; q++)
            dt_xp_fold(acc + o * levels * levels, P[(q * rows_p + i) * np + c], p, q, levels);
    }
}

/* C's rows [i0, i0 + mb): one rounding each, then the bias. */
static __global__ void __launch_bounds__(1024)
    xp_round_kernel(float *C, const dt_xp_acc *acc, const int *sa, const int *sb, const float *bias,
                    int64_t i0, int64_t mb, int64_t N, int levels)
{
    DT_GRID_STRIDE(o, mb * N)
    {
        const int64_t i = i0 + o / N, c = o % N;
        const float v = dt_xp_round_parts(acc + o * levels * levels,
                                          dt_xp_out_exp(sa[i], sb[c], levels), levels);
        C[i * N + c] = bias ? v + bias[c] : v;
    }
}

static int64_t round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

#define XP_SCRATCH_BLOCK ((size_t)256 << 20) /* products and integers of one row block */

/* The int8 form; DT_ERR_UNSUPPORTED (nothing written) where cuBLAS refuses the call. */
static enum dt_status xp_int8(struct dt_backend *be, float *C, const float *A, const float *B,
                              const float *bias, int64_t M, int64_t K, int64_t N, int trans,
                              int levels)
{
    const struct dt_cuda_launch *L = &dt_cuda(be)->launch;
    const cudaStream_t st = (cudaStream_t)L->stream;
    const int S = DT_XP_SLICES * levels, L2 = levels * levels;
    const int64_t kp = round_up(K, 16), mp = round_up(M, 16), np = round_up(N, 16);
    char *ws = (char *)dt_cuda_scratch(
        be, 0, (size_t)(M + N) * sizeof(int) + 256 + (size_t)S * (size_t)(mp + np) * (size_t)kp);
    int *sa = (int *)ws, *sb = sa + M;
    int8_t *slA = (int8_t *)(ws + round_up((int64_t)(M + N) * (int64_t)sizeof(int), 256));
    int8_t *slB = slA + (size_t)S * (size_t)mp * (size_t)kp;
    const struct xp_walk w = xp_walk_of(M, K, N, trans);
    DT_FORWARD_IF_ERROR(xp_scales(be, sa, A, B, M, K, N, &w));
    /* every value to fixed point at its row's scale, then its S int8 slices (padding zero) */
    const double slice_ops = DT_W_OPS_XP_FIXED + DT_W_OPS_XP_SLICE * (double)S;
    const double Md = (double)M, Nd = (double)N, Kd = (double)K;
    DT_LAUNCH(L,
              dt_work(4.0 * (Md * Kd + Md) + (double)S * (double)mp * (double)kp,
                      slice_ops * (double)mp * (double)kp),
              xp_slice_kernel, dt_cuda_grid(L, mp * kp), L->block_threads, 0, st)
    (slA, sa, A, M, K, w.a_step, w.a_stride, mp, kp, levels);
    DT_LAUNCH(L,
              dt_work(4.0 * (Nd * Kd + Nd) + (double)S * (double)np * (double)kp,
                      slice_ops * (double)np * (double)kp),
              xp_slice_kernel, dt_cuda_grid(L, np * kp), L->block_threads, 0, st)
    (slB, sb, B, N, K, w.b_step, w.b_stride, np, kp, levels);
    /* output rows in blocks: S products of (mb, np) int32 and the (mb, N) integers */
    const size_t per_row = (size_t)S * (size_t)np * 4 + (size_t)N * (size_t)L2 * sizeof(dt_xp_acc);
    int64_t mb = (int64_t)(XP_SCRATCH_BLOCK / per_row);
    mb = mb < 16 ? 16 : mb / 16 * 16;
    mb = mb > mp ? mp : mb;
    char *blk = (char *)dt_cuda_scratch(be, 1, (size_t)mb * per_row + 256);
    dt_xp_acc *acc = (dt_xp_acc *)blk;
    int32_t *P =
        (int32_t *)(blk +
                    round_up((int64_t)((size_t)mb * (size_t)N * (size_t)L2 * sizeof(dt_xp_acc)),
                             256));
    cublasHandle_t h = (cublasHandle_t)dt_cuda_cublas_int8(be);
    const int32_t one = 1, zero = 0;
    const int64_t kc_max = DT_XP_K_MAX / 16 * 16;
    for (int64_t i0 = 0; i0 < M; i0 += mb) {
        const int64_t rows = M - i0 < mb ? M - i0 : mb, rows_p = round_up(rows, 16);
        const double parts = (double)rows * Nd * (double)L2 * (double)sizeof(dt_xp_acc);
        dt_cuda_memset_async(L, acc, 0, (size_t)rows * (size_t)N * (size_t)L2 * sizeof(dt_xp_acc),
                             st);
        for (int64_t k0 = 0; k0 < kp; k0 += kc_max) {
            const int64_t kc = kp - k0 < kc_max ? kp - k0 : kc_max;
            for (int p = 0; p < S; p++) {
                /* P_q (rows_p, np) row-major = column-major (np, rows_p): B_q^T's rows (K
                 * contiguous: op T) times A_p's rows (op N) */
                /* a strided batch of S: all of B's slices against A's slice p, S int32 products
                 * of rows_p x np over kc */
                dt_cuda_count_lib(be);
                struct dt_op_cost g =
                    dt_work((double)S * (double)np * (double)kc + (double)rows_p * (double)kc +
                                4.0 * (double)S * (double)rows_p * (double)np,
                            0.0);
                g.lib_calls = 1;
                g.int_ops = 2.0 * (double)S * (double)rows_p * (double)np * (double)kc;
                const cublasStatus_t cs =
                    dt_cuda_note(L, g)
                        ? CUBLAS_STATUS_SUCCESS
                        : cublasGemmStridedBatchedEx(
                              h, CUBLAS_OP_T, CUBLAS_OP_N, (int)np, (int)rows_p, (int)kc, &one,
                              slB + k0, CUDA_R_8I, (int)kp, (long long)(np * kp),
                              slA + ((int64_t)p * mp + i0) * kp + k0, CUDA_R_8I, (int)kp, 0LL,
                              &zero, P, CUDA_R_32I, (int)np, (long long)(rows_p * np), S,
                              CUBLAS_COMPUTE_32I, CUBLAS_GEMM_DEFAULT);
                if (cs != CUBLAS_STATUS_SUCCESS) return DT_ERR_UNSUPPORTED;
                /* S products read, the block's integers read and written */
                DT_LAUNCH(L,
                          dt_work(4.0 * (double)S * (double)rows * Nd + 2.0 * parts,
                                  DT_W_OPS_XP_FOLD * (double)S * (double)rows * Nd),
                          xp_fold_kernel, dt_cuda_grid(L, rows * N), L->block_threads, 0, st)
                (acc, P, p, rows, rows_p, np, N, levels);
            }
        }
        DT_LAUNCH(L,
                  dt_work(parts + 4.0 * ((double)rows * Nd + (bias ? Nd : 0.0)),
                          DT_W_OPS_XP_ROUND * (double)rows * Nd),
                  xp_round_kernel, dt_cuda_grid(L, rows * N), L->block_threads, 0, st)
        (C, acc, sa, sb, bias, i0, rows, N, levels);
    }
    return dt_cuda_launched(be, DT_LAUNCHED(L), "matmul_exact");
}

/* portable at every policy: integer sums and one rounding -- the int8 form, or the simple
 * one where cuBLAS refuses it (or DETRAIN_CUDA_XP=simple asks). */
extern "C" enum dt_status dt_cuda_matmul_exact(struct dt_backend *be, float *C, const float *A,
                                               const float *B, const float *bias, int64_t M,
                                               int64_t K, int64_t N, int trans, int levels,
                                               const struct dt_policy *pol)
{
    if (!dt_cuda(be)->xp_simple) { /* DETRAIN_CUDA_XP, read as the backend was made */
        const enum dt_status st = xp_int8(be, C, A, B, bias, M, K, N, trans, levels);
        if (st == DT_OK) be->launches.xp_int8++; /* which form ran: detrain bench says */
        if (st != DT_ERR_UNSUPPORTED) return st;
    }
    be->launches.xp_simple++;
    return xp_simple(be, C, A, B, bias, M, K, N, trans, levels);
}
