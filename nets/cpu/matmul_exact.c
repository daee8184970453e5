/* The exact matrix product on the CPU backend (determinism/exact_product.h): every output
 * the 128-bit integer dot product of the fixed-point operands (28 bits at one level; at two,
 * 56 bits held as two 28-bit halves whose four half products are joined exactly), rounded
 * once. Integer sums, so the split over threads, the order and the vector width cannot
 * change a bit:
 *   wide   (AVX-512): tiles of 8 rows x 16 columns, int64 lanes of 32 x 32 -> 64-bit
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
    const float *A, *B, *bias;
    int64_t M, K, N;
    int trans, levels;
    int32_t *XA[DT_XP_LEVELS_MAX], *XB[DT_XP_LEVELS_MAX]; /* A's rows (M, K) and B (K, N) in
                                                            fixed point, one 28-bit half each */
    int *sa, *sb; /* the scales of A's rows and B's columns */
};

/* Element (i, k) of A and (k, c) of B, wherever the op's trans puts them. */
static inline int64_t a_at(const struct xp_job *j, int64_t i, int64_t k)
{
    return j->trans & DT_XP_TA ? k * j->M + i : i * j->K + k;
}
static inline int64_t b_at(const struct xp_job *j, int64_t k, int64_t c)
{
    return j->trans & DT_XP_TB ? c * j->K + k : k * j->N + c;
}

/* X's halves into X[h][o]: X itself at one level, dt_xp_hi and dt_xp_lo at two. */
static inline void put_fixed(int32_t *const *X, int64_t o, int64_t v, int levels)
{
    if (levels == 1) {
        X[0][o] = (int32_t)v;
    } else {
        X[0][o] = dt_xp_hi(v);
        X[1][o] = dt_xp_lo(v);
    }
}

/* Rows [begin, end) of A: the scale, then the fixed point. */
static void xp_rows_part(void *ctx, int64_t begin, int64_t end, int worker)
{
    const struct xp_job *j = ctx;
    const bool ta = j->trans & DT_XP_TA;
    for (int64_t i = begin; i < end; i++) {
        const int s = j->sa[i] = dt_xp_row_scale(j->A + a_at(j, i, 0), j->K, ta ? j->M : 1);
        for (int64_t k = 0; k < j->K; k++)
            put_fixed(j->XA, i * j->K + k, dt_xp_fixed(j->A[a_at(j, i, k)], s, j->levels),
                      j->levels);
    }
}

/* Rows [begin, end) of B in fixed point (the column scales already known). */
static void xp_brows_part(void *ctx, int64_t begin, int64_t end, int worker)
{
    const struct xp_job *j = ctx;
    for (int64_t k = begin; k < end; k++)
        for (int64_t c = 0; c < j->N; c++)
            put_fixed(j->XB, k * j->N + c, dt_xp_fixed(j->B[b_at(j, k, c)], j->sb[c], j->levels),
                      j->levels);
}

/* Output (i, c) from its integer: one rounding, then the bias. */
static inline float xp_out(const struct xp_job *j, int64_t i, int64_t c, dt_xp_acc acc)
{
    const float v = dt_xp_to_float(acc, dt_xp_out_exp(j->sa[i], j->sb[c], j->levels));
    return j->bias ? v + j->bias[c] : v;
}

/* The integer of output (i, c), one dot product per pair of halves. */
static dt_xp_acc xp_dot_levels(const struct xp_job *j, int64_t i, int64_t c)
{
    const int64_t K = j->K, N = j->N;
    if (j->levels == 1) return dt_xp_dot(j->XA[0] + i * K, j->XB[0] + c, K, N);
    return dt_xp_join(dt_xp_dot(j->XA[0] + i * K, j->XB[0] + c, K, N),
                      dt_xp_dot(j->XA[0] + i * K, j->XB[1] + c, K, N),
                      dt_xp_dot(j->XA[1] + i * K, j->XB[0] + c, K, N),
                      dt_xp_dot(j->XA[1] + i * K, j->XB[1] + c, K, N));
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

/* One tile's integers at the job's levels (acc: rows x XN). */
DT_WIDE static void xp_tile_levels(const struct xp_job *j, int rows, dt_xp_acc *acc, int64_t i,
                                   int64_t c0)
{
    const int64_t K = j->K, N = j->N;
    if (j->levels == 1) {
        if (rows == XR) xp_tile_wide(XR, acc, j->XA[0] + i * K, K, j->XB[0] + c0, N);
        else xp_tile_wide(rows, acc, j->XA[0] + i * K, K, j->XB[0] + c0, N);
        return;
    }
    dt_xp_acc part[4][XR * XN];
    for (int h = 0; h < 4; h++) {
        const int32_t *a = j->XA[h >> 1] + i * K, *b = j->XB[h & 1] + c0;
        if (rows == XR) xp_tile_wide(XR, part[h], a, K, b, N);
        else xp_tile_wide(rows, part[h], a, K, b, N);
    }
    for (int l = 0; l < rows * XN; l++)
        acc[l] = dt_xp_join(part[0][l], part[1][l], part[2][l], part[3][l]);
}

/* Output rows [i0, i1): the wide tiles, then the leftover columns one by one. */
DT_WIDE static void xp_rows_wide(const struct xp_job *j, int64_t i0, int64_t i1)
{
    const int64_t N = j->N, n_tiled = N / XN * XN;
    dt_xp_acc acc[XR * XN];
    for (int64_t c0 = 0; c0 < n_tiled; c0 += XN)
        for (int64_t i = i0; i < i1; i += XR) {
            const int rows = i1 - i < XR ? (int)(i1 - i) : XR;
            xp_tile_levels(j, rows, acc, i, c0);
            for (int r = 0; r < rows; r++)
                for (int l = 0; l < XN; l++)
                    j->C[(i + r) * N + c0 + l] = xp_out(j, i + r, c0 + l, acc[r * XN + l]);
        }
    for (int64_t i = i0; i < i1; i++)
        for (int64_t c = n_tiled; c < N; c++)
            j->C[i * N + c] = xp_out(j, i, c, xp_dot_levels(j, i, c));
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
            j->C[i * j->N + c] = xp_out(j, i, c, xp_dot_levels(j, i, c));
}

/* The column scales of B: read row by row (each column's largest magnitude on the bits), or
 * per stored row when B is stored transposed. */
static void column_scales(const struct xp_job *j)
{
    if (j->trans & DT_XP_TB) {
        for (int64_t c = 0; c < j->N; c++) j->sb[c] = dt_xp_row_scale(j->B + c * j->K, j->K, 1);
        return;
    }
    uint32_t *top = dt_xcalloc((size_t)j->N, sizeof *top);
    for (int64_t k = 0; k < j->K; k++)
        for (int64_t c = 0; c < j->N; c++) {
            const uint32_t b = dt_float_bits(j->B[k * j->N + c]) & 0x7fffffffu;
            top[c] = b > top[c] ? b : top[c];
        }
    for (int64_t c = 0; c < j->N; c++) j->sb[c] = dt_xp_scale_bits(top[c]);
    free(top);
}

/* portable at every policy: integer sums and one rounding. */
enum dt_status dt_cpu_matmul_exact(struct dt_backend *be, float *C, const float *A, const float *B,
                                   const float *bias, int64_t M, int64_t K, int64_t N, int trans,
                                   int levels, const struct dt_policy *pol)
{
    struct xp_job j = {.C = C,
                       .A = A,
                       .B = B,
                       .bias = bias,
                       .M = M,
                       .K = K,
                       .N = N,
                       .trans = trans,
                       .levels = levels};
    for (int h = 0; h < levels; h++) {
        j.XA[h] = dt_xmalloc((size_t)(M * K) * sizeof *j.XA[h]);
        j.XB[h] = dt_xmalloc((size_t)(K * N) * sizeof *j.XB[h]);
    }
    j.sa = dt_xmalloc((size_t)M * sizeof *j.sa);
    j.sb = dt_xmalloc((size_t)N * sizeof *j.sb);
    struct dt_pool *pool = dt_cpu(be)->pool;
    const int64_t grain = K >= 4096 ? 1 : 4096 / K;
    dt_pool_run(pool, M, grain, xp_rows_part, &j);
    column_scales(&j);
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
        const int64_t per_row = N * K * levels * levels;
        dt_pool_run(pool, M, per_row >= 65536 ? XR : XR * (65536 / per_row), xp_out_part, &j);
    }
    for (int h = 0; h < levels; h++) free(j.XA[h]), free(j.XB[h]);
    free(j.sa), free(j.sb);
    return st;
}
