/* The exact matrix product on the CPU backend (determinism/exact_product.h): every output
 * the integer dot product of the fixed-point operands (28 bits at one level; at two, 56 bits
 * held as two 28-bit halves, the four half products rounded together exactly), rounded
 * once. Integer sums, so the split over threads, the order and the vector width cannot
 * change a bit:
 *   wide   (AVX-512): tiles of 6 rows x 32 columns (then 8, then one by one), int64
 *          lanes of 32 x 32 -> 64-bit products (vpmuldq) summed 64 k at a time
 *          (|a b| < 2^56: below 2^62), each run added into the tile's 128-bit accumulators;
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
    int64_t *XA[DT_XP_LEVELS_MAX]; /* A's rows (M, K) in fixed point, one 28-bit half each,
                                      in int64 (the vector lanes' width) */
    int64_t *XB[DT_XP_LEVELS_MAX]; /* B (K, N) likewise */
    int *sa, *sb;                  /* the scales of A's rows and B's columns */
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

/* Rows [begin, end) of A: the scale, then the fixed point (its halves at two levels). */
static void xp_rows_part(void *ctx, int64_t begin, int64_t end, int worker)
{
    const struct xp_job *j = ctx;
    const bool ta = j->trans & DT_XP_TA;
    for (int64_t i = begin; i < end; i++) {
        const int s = j->sa[i] = dt_xp_row_scale(j->A + a_at(j, i, 0), j->K, ta ? j->M : 1);
        for (int64_t k = 0; k < j->K; k++) {
            const int64_t v = dt_xp_fixed(j->A[a_at(j, i, k)], s, j->levels);
            for (int h = 0; h < j->levels; h++)
                j->XA[h][i * j->K + k] = dt_xp_half(v, h, j->levels);
        }
    }
}

/* Rows [begin, end) of B in fixed point (the column scales already known). */
static void xp_brows_part(void *ctx, int64_t begin, int64_t end, int worker)
{
    const struct xp_job *j = ctx;
    for (int64_t k = begin; k < end; k++)
        for (int64_t c = 0; c < j->N; c++) {
            const int64_t v = dt_xp_fixed(j->B[b_at(j, k, c)], j->sb[c], j->levels);
            for (int h = 0; h < j->levels; h++)
                j->XB[h][k * j->N + c] = dt_xp_half(v, h, j->levels);
        }
}

/* Output (i, c): one rounding of its integer (at two levels of its four half products),
 * then the bias. */
static inline float xp_out(const struct xp_job *j, int64_t i, int64_t c, const dt_xp_acc *part)
{
    const float v =
        dt_xp_round_parts(part, dt_xp_out_exp(j->sa[i], j->sb[c], j->levels), j->levels);
    return j->bias ? v + j->bias[c] : v;
}

/* Output (i, c) by one dot product per pair of halves. */
static float xp_out_dot(const struct xp_job *j, int64_t i, int64_t c)
{
    const int64_t K = j->K, N = j->N;
    dt_xp_acc part[4];
    for (int h = 0; h < j->levels * j->levels; h++)
        part[h] =
            dt_xp_dot(j->XA[h >> (j->levels - 1)] + i * K, j->XB[h & (j->levels - 1)] + c, K, N);
    return xp_out(j, i, c, part);
}

#define XR 6 /* wide tile rows */
#define XV 4 /* wide tile vectors of 8 int64 lanes: 32 columns */
#define XC (8 * XV)

#ifdef DT_CPU_WIDE_KERNELS
/* acc[r XC + l] = sum_k XA[r, k] XB[k, l] for rows r < rows and the nv 8-lane vectors of a
 * tile, exactly: vpmuldq's 32 x 32 -> 64-bit products (|a b| < 2^56) in runs of 64 k (below
 * 2^62), each run added into the 128-bit accumulators. */
DT_WIDE static inline __attribute__((always_inline)) void xp_tile_wide(int rows, int nv,
                                                                       dt_xp_acc *acc,
                                                                       const int64_t *XA, int64_t K,
                                                                       const int64_t *XB, int64_t N)
{
    for (int l = 0; l < rows * XC; l++) acc[l] = 0;
    for (int64_t k0 = 0; k0 < K; k0 += 64) {
        const int64_t k1 = k0 + 64 < K ? k0 + 64 : K;
        __m512i c[XR][XV];
#pragma GCC unroll 8
        for (int r = 0; r < rows; r++)
#pragma GCC unroll 4
            for (int v = 0; v < nv; v++) c[r][v] = _mm512_setzero_si512();
        for (int64_t k = k0; k < k1; k++) {
            __m512i b[XV];
#pragma GCC unroll 4
            for (int v = 0; v < nv; v++) b[v] = _mm512_loadu_si512(XB + k * N + 8 * v);
#pragma GCC unroll 8
            for (int r = 0; r < rows; r++) {
                const __m512i a = _mm512_set1_epi64(XA[r * K + k]);
#pragma GCC unroll 4
                for (int v = 0; v < nv; v++)
                    c[r][v] = _mm512_add_epi64(c[r][v], _mm512_mul_epi32(a, b[v]));
            }
        }
        for (int r = 0; r < rows; r++)
            for (int v = 0; v < nv; v++) {
                int64_t run[8];
                _mm512_storeu_si512(run, c[r][v]);
                for (int l = 0; l < 8; l++) acc[r * XC + 8 * v + l] += run[l];
            }
    }
}

/* Output rows [i0, i1), columns [c0, c0 + 8 nv) by tiles: per pair of halves (one at one
 * level, four at two) a tile of integers, then each output rounded once. */
DT_WIDE static inline __attribute__((always_inline)) void
xp_cols_wide(const struct xp_job *j, int nv, int64_t i0, int64_t i1, int64_t c0)
{
    const int64_t K = j->K, N = j->N;
    const int pairs = j->levels * j->levels;
    dt_xp_acc part[4][XR * XC];
    for (int64_t i = i0; i < i1; i += XR) {
        const int rows = i1 - i < XR ? (int)(i1 - i) : XR;
        for (int h = 0; h < pairs; h++) {
            const int64_t *a = j->XA[h >> (j->levels - 1)] + i * K;
            const int64_t *b = j->XB[h & (j->levels - 1)] + c0;
            if (rows == XR) xp_tile_wide(XR, nv, part[h], a, K, b, N);
            else xp_tile_wide(rows, nv, part[h], a, K, b, N);
        }
        for (int r = 0; r < rows; r++)
            for (int l = 0; l < 8 * nv; l++) {
                const int o = r * XC + l;
                const dt_xp_acc p[4] = {part[0][o], part[1][o], part[2][o], part[3][o]};
                j->C[(i + r) * N + c0 + l] = xp_out(j, i + r, c0 + l, p);
            }
    }
}

/* Output rows [i0, i1): tiles of 32 columns, then of 8, then the last columns one by one. */
DT_WIDE static void xp_rows_wide(const struct xp_job *j, int64_t i0, int64_t i1)
{
    const int64_t N = j->N;
    int64_t c0 = 0;
    for (; c0 + XC <= N; c0 += XC) xp_cols_wide(j, XV, i0, i1, c0);
    for (; c0 + 8 <= N; c0 += 8) xp_cols_wide(j, 1, i0, i1, c0);
    for (int64_t i = i0; i < i1; i++)
        for (int64_t c = c0; c < N; c++) j->C[i * N + c] = xp_out_dot(j, i, c);
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
        for (int64_t c = 0; c < j->N; c++) j->C[i * j->N + c] = xp_out_dot(j, i, c);
}

/* The column scales of B: read row by row (each column's largest magnitude on the bits), or
 * per stored row when B is stored transposed. */
static void column_scales(const struct xp_job *j, uint32_t *top)
{
    if (j->trans & DT_XP_TB) {
        for (int64_t c = 0; c < j->N; c++) j->sb[c] = dt_xp_row_scale(j->B + c * j->K, j->K, 1);
        return;
    }
    for (int64_t c = 0; c < j->N; c++) top[c] = 0;
    for (int64_t k = 0; k < j->K; k++)
        for (int64_t c = 0; c < j->N; c++) {
            const uint32_t b = dt_float_bits(j->B[k * j->N + c]) & 0x7fffffffu;
            top[c] = b > top[c] ? b : top[c];
        }
    for (int64_t c = 0; c < j->N; c++) j->sb[c] = dt_xp_scale_bits(top[c]);
}

/* n bytes from *at, 64-byte aligned (the buffer itself is malloc's 16-aligned at least). */
static void *carve(char **at, size_t n)
{
    char *p = (char *)(((uintptr_t)*at + 63) & ~(uintptr_t)63);
    *at = p + n;
    return p;
}

/* portable at every policy: integer sums and one rounding. */
enum dt_status dt_cpu_matmul_exact(struct dt_backend *be, float *C, const float *A, const float *B,
                                   const float *bias, int64_t M, int64_t K, int64_t N, int trans,
                                   int levels, const struct dt_policy *pol)
{
    struct xp_job j = {.C = C, .A = A, .B = B, .bias = bias, .M = M, .K = K, .N = N};
    j.trans = trans, j.levels = levels;
    const size_t xa = (size_t)(M * K) * 8, xb = (size_t)(K * N) * 8;
    const size_t bytes = (xa + xb) * (size_t)levels + (size_t)(M + 2 * N) * 4 + 64 * 8;
    char *at = (char *)dt_cpu_xp_buffer(be, (bytes + 3) / 4);
    for (int h = 0; h < levels; h++) j.XA[h] = carve(&at, xa), j.XB[h] = carve(&at, xb);
    j.sa = carve(&at, (size_t)M * 4);
    j.sb = carve(&at, (size_t)N * 4);
    uint32_t *top = carve(&at, (size_t)N * 4);
    struct dt_pool *pool = dt_cpu(be)->pool;
    dt_pool_run(pool, M, K >= 4096 ? 1 : 4096 / K, xp_rows_part, &j);
    column_scales(&j, top);
    for (int64_t i = 0; i < M; i++)
        if (j.sa[i] == DT_XP_NONFINITE)
            return dt_backend_op_error(be, DT_ERR_NUMERIC, "non-finite input in row %lld of A",
                                       (long long)i);
    for (int64_t c = 0; c < N; c++)
        if (j.sb[c] == DT_XP_NONFINITE)
            return dt_backend_op_error(be, DT_ERR_NUMERIC, "non-finite input in column %lld of B",
                                       (long long)c);
    dt_pool_run(pool, K, N >= 4096 ? 1 : 4096 / N, xp_brows_part, &j);
    const int64_t per_row = N * K * levels * levels;
    dt_pool_run(pool, M, per_row >= 65536 ? XR : XR * (65536 / per_row), xp_out_part, &j);
    return DT_OK;
}
