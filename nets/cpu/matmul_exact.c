/* The exact matrix product on the CPU backend (determinism/exact_product.h): every output
 * the 128-bit integer dot product of the 28-bit fixed-point operands, rounded once. The
 * portable C form: int32 operands and dt_xp_dot's exact integer sums, so the split over
 * threads, the order and the vector width cannot change a bit. (The int8 slice products of the
 * header, for integer GEMM units, give the same integers: tests/test_xp.c.) */
#include <stdlib.h>

#include "core/util.h"
#include "determinism/exact_product.h"
#include "nets/cpu/cpu.h"

struct xp_job {
    float *C;
    const float *A, *B;
    int64_t M, K, N;
    int32_t *XA, *XBt; /* A's rows and B's columns in fixed point: (M, K) and (N, K) */
    int *sa, *sb;      /* their scales */
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

/* Columns [begin, end) of B, transposed into rows of XBt. */
static void xp_cols_part(void *ctx, int64_t begin, int64_t end, int worker)
{
    const struct xp_job *j = ctx;
    for (int64_t c = begin; c < end; c++) {
        const int s = j->sb[c] = dt_xp_row_scale(j->B + c, j->K, j->N);
        for (int64_t k = 0; k < j->K; k++)
            j->XBt[c * j->K + k] = (int32_t)dt_xp_fixed(j->B[k * j->N + c], s);
    }
}

/* Output rows [begin, end). */
static void xp_out_part(void *ctx, int64_t begin, int64_t end, int worker)
{
    const struct xp_job *j = ctx;
    for (int64_t i = begin; i < end; i++)
        for (int64_t c = 0; c < j->N; c++)
            j->C[i * j->N + c] =
                dt_xp_to_float(dt_xp_dot(j->XA + i * j->K, j->XBt + c * j->K, j->K),
                               dt_xp_out_exp(j->sa[i], j->sb[c]));
}

/* portable at every policy: integer sums and one rounding. */
enum dt_status dt_cpu_matmul_exact(struct dt_backend *be, float *C, const float *A, const float *B,
                                   int64_t M, int64_t K, int64_t N, const struct dt_policy *pol)
{
    struct xp_job j = {.C = C, .A = A, .B = B, .M = M, .K = K, .N = N};
    j.XA = dt_xmalloc((size_t)(M * K) * sizeof *j.XA);
    j.XBt = dt_xmalloc((size_t)(N * K) * sizeof *j.XBt);
    j.sa = dt_xmalloc((size_t)M * sizeof *j.sa);
    j.sb = dt_xmalloc((size_t)N * sizeof *j.sb);
    struct dt_pool *pool = dt_cpu(be)->pool;
    const int64_t grain = K >= 4096 ? 1 : 4096 / K;
    dt_pool_run(pool, M, grain, xp_rows_part, &j);
    dt_pool_run(pool, N, grain, xp_cols_part, &j);
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
        const int64_t per_row = N * K;
        dt_pool_run(pool, M, per_row >= 65536 ? 1 : 65536 / per_row, xp_out_part, &j);
    }
    free(j.XA), free(j.XBt), free(j.sa), free(j.sb);
    return st;
}
