/* The exact matrix product on the CPU backend (determinism/exact_product.h): every output
 * the 128-bit integer dot product of the 28-bit fixed-point operands, rounded once. Integer
 * sums, so the split over threads, the order and the vector width cannot change a bit:
 *   wide   (AVX-512): tiles of 4 rows x 16 columns, int64 lanes of 32 x 32 -> 64-bit
 *          products (vpmuldq) summed 64 k at a time (|a b| < 2^56: below 2^62), each run
 *          added into the tile's 128-bit accumulators;
 *   other  dt_xp_dot per output, the same integers (tests/test_parity.c, at every thread
 *          count; make check-narrow runs it).
 * (The int8 slice products of the header, for integer GEMM units, give the same integers
 * too: tests/test_xp.c.) */
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "determinism/exact_product.h"
#include "nets/cpu/cpu.h"
#ifdef DT_CPU_WIDE_KERNELS
#include <immintrin.h>
#endif

struct xp_job {
    float *C;
    const float *A, *B;
    int64_t M, K, N;
    int32_t *XA, *XB; /* A's rows and B in fixed point: (M, K) and (K, N) */
    int *sa, *sb;     /* the scales of A's rows and B's columns */
};

/* Rows [begin, end) of A: the scale, then the fixed point. */
static void xp_rows_part(void *ctx, int64_t begin, int64_t end, int worker)
{
    const struct xp_job *j = ctx;
    for (int64_t i = begin; i < end; i++) {
        const float *a = j->A + i * j->K;
        const int s = j->sa[i] = dt_xp_row_scale(a, j->K, 1);
        for (int64_t k = 0; k < j->K; k++) j->XA[i * j->K + k] = (int32_t)dt_xp_fixed(a[k], s);
    }
}

/* Rows [begin, end) of B in fixed point (the column scales already known). */
static void xp_brows_part(void *ctx, int64_t begin, int64_t end, int worker)
{
    const struct xp_job *j = ctx;
    for (int64_t k = begin; k < end; k++)
        for (int64_t c = 0; c < j->N; c++)
            j->XB[k * j->N + c] = (int32_t)dt_xp_fixed(j->B[k * j->N + c], j->sb[c]);
}

#define XR 8  /* wide tile rows */
#define XN 16 /* wide tile columns: two vectors of 8 int64 lanes */

#ifdef DT_CPU_WIDE_KERNELS
/* acc[r XN + l] = sum_k XA[r, k] XB[k, l] for rows r < rows of a tile, exactly. */
DT_WIDE static inline __attribute__((always_inline)) void
xp_tile_wide(int rows, dt_xp_acc *acc, const int32_t *XA, int64_t K, const int32_t *XB, int64_t N)
{
    for (int l = 0; l < rows * XN; l++) acc[l] = 0;
    for (int64_t k0 = 0; k0 < K; k0 += 64) {
        const int64_t k1 = k0 + 64 < K ? k0 + 64 : K;
        __m512i c[XR][2];
#pragma GCC unroll 8
        for (int r = 0; r < rows; r++) c[r][0] = c[r][1] = _mm512_setzero_si512();
        for (int64_t k = k0; k < k1; k++) {
            const int32_t *bk = XB + k * N;
            const __m512i b0 = _mm512_cvtepi32_epi64(_mm256_loadu_si256((const __m256i *)bk));
            const __m512i b1 = _mm512_cvtepi32_epi64(_mm256_loadu_si256((const __m256i *)(bk + 8)));
#pragma GCC unroll 8
            for (int r = 0; r < rows; r++) {
                const __m512i a = _mm512_set1_epi64((int64_t)XA[r * K + k]);
                c[r][0] = _mm512_add_epi64(c[r][0], _mm512_mul_epi32(a, b0));
                c[r][1] = _mm512_add_epi64(c[r][1], _mm512_mul_epi32(a, b1));
            }
        }
        for (int r = 0; r < rows; r++) {
            int64_t run[XN];
            _mm512_storeu_si512(run, c[r][0]);
            _mm512_storeu_si512(run + 8, c[r][1]);
            for (int l = 0; l < XN; l++) acc[r * XN + l] += run[l];
        }
    }
}

/* Output rows [i0, i1): the wide tiles, then the leftover columns by dt_xp_dot. */
DT_WIDE static void xp_rows_wide(const struct xp_job *j, int64_t i0, int64_t i1)
{
    const int64_t K = j->K, N = j->N, n_tiled = N / XN * XN;
    dt_xp_acc acc[XR * XN];
    for (int64_t c0 = 0; c0 < n_tiled; c0 += XN)
        for (int64_t i = i0; i < i1; i += XR) {
            const int rows = i1 - i < XR ? (int)(i1 - i) : XR;
            if (rows == XR) xp_tile_wide(XR, acc, j->XA + i * K, K, j->XB + c0, N);
            else xp_tile_wide(rows, acc, j->XA + i * K, K, j->XB + c0, N);
            for (int r = 0; r < rows; r++)
                for (int l = 0; l < XN; l++)
                    j->C[(i + r) * N + c0 + l] =
                        dt_xp_to_float(acc[r * XN + l], dt_xp_out_exp(j->sa[i + r], j->sb[c0 + l]));
        }
    for (int64_t i = i0; i < i1; i++)
        for (int64_t c = n_tiled; c < N; c++)
            j->C[i * N + c] = dt_xp_to_float(dt_xp_dot(j->XA + i * K, j->XB + c, K, N),
                                             dt_xp_out_exp(j->sa[i], j->sb[c]));
}
#endif

/* Output rows [begin, end). */
static void xp_out_part(void *ctx, int64_t begin, int64_t end, int worker)
{
    const struct xp_job *j = ctx;
#ifdef DT_CPU_WIDE_KERNELS
    if (dt_cpu_wide()) {
        xp_rows_wide(j, begin, end);
        return;
    }
#endif
    for (int64_t i = begin; i < end; i++)
        for (int64_t c = 0; c < j->N; c++)
            j->C[i * j->N + c] = dt_xp_to_float(dt_xp_dot(j->XA + i * j->K, j->XB + c, j->K, j->N),
                                                dt_xp_out_exp(j->sa[i], j->sb[c]));
}

/* The column scales of B, read row by row (each column's largest magnitude on the bits). */
static void column_scales(int *sb, const float *B, int64_t K, int64_t N)
{
    uint32_t *top = dt_xcalloc((size_t)N, sizeof *top);
    for (int64_t k = 0; k < K; k++)
        for (int64_t c = 0; c < N; c++) {
            const uint32_t b = dt_float_bits(B[k * N + c]) & 0x7fffffffu;
            top[c] = b > top[c] ? b : top[c];
        }
    for (int64_t c = 0; c < N; c++) sb[c] = dt_xp_scale_bits(top[c]);
    free(top);
}

/* portable at every policy: integer sums and one rounding. */
enum dt_status dt_cpu_matmul_exact(struct dt_backend *be, float *C, const float *A, const float *B,
                                   int64_t M, int64_t K, int64_t N, const struct dt_policy *pol)
{
    struct xp_job j = {.C = C, .A = A, .B = B, .M = M, .K = K, .N = N};
    j.XA = dt_xmalloc((size_t)(M * K) * sizeof *j.XA);
    j.XB = dt_xmalloc((size_t)(K * N) * sizeof *j.XB);
    j.sa = dt_xmalloc((size_t)M * sizeof *j.sa);
    j.sb = dt_xmalloc((size_t)N * sizeof *j.sb);
    struct dt_pool *pool = dt_cpu(be)->pool;
    const int64_t grain = K >= 4096 ? 1 : 4096 / K;
    dt_pool_run(pool, M, grain, xp_rows_part, &j);
    column_scales(j.sb, B, K, N);
    enum dt_status st = DT_OK;
    for (int64_t i = 0; i < M && st == DT_OK; i++)
        if (j.sa[i] == DT_XP_NONFINITE)
            st = dt_backend_op_error(be, DT_ERR_NUMERIC, "non-finite input in row %lld of A",
                                     (long long)i);
    for (int64_t c = 0; c < N && st == DT_OK; c++)
        if (j.sb[c] == DT_XP_NONFINITE)
            st = dt_backend_op_error(be, DT_ERR_NUMERIC, "non-finite input in column %lld of B",
                                     (long long)c);
    if (st == DT_OK) {
        dt_pool_run(pool, K, N >= 4096 ? 1 : 4096 / N, xp_brows_part, &j);
        const int64_t per_row = N * K;
        dt_pool_run(pool, M, per_row >= 65536 ? XR : XR * (65536 / per_row), xp_out_part, &j);
    }
    free(j.XA), free(j.XB), free(j.sa), free(j.sb);
    return st;
}
