/* Dense layer on the CPU backend: forward, backward-data, backward-weight, bias gradient.
 * All four rest on one kernel, matmul_rows_ordered, which sums over k in increasing index
 * order for every output and vectorises across output columns, so the order survives
 * vectorisation and the row split across threads. The sum over the batch (backward-weight,
 * bias) is therefore serial in batch-index order: the same bits for any thread count.
 * (The `reduction` control's unordered and chunked-tree variants arrive with the CPU
 * determinism-controls work; until then every policy runs these fixed-order kernels.) */
#include <string.h>

#include "nets/cpu/cpu.h"

#define ROW_BLOCK 4   /* rows of C updated together: each B row loaded once per block */
#define COL_TILE 512  /* columns of C per pass: keeps ROW_BLOCK rows of C in L1 */

/* C[i, j0:j1] = sum_{k=0..K-1} A[i,k] * Bm[k, j0:j1] for i in [i0, i1), k ascending.
 * A is (M,K) with row stride lda, Bm is (K,N), C is (M,N). */
DT_VECTOR_CLONES
static void matmul_rows_ordered(float *restrict C, const float *restrict A, int64_t lda,
                                const float *restrict Bm, int64_t K, int64_t N, int64_t i0,
                                int64_t i1)
{
    for (int64_t j0 = 0; j0 < N; j0 += COL_TILE) {
        int64_t nj = N - j0 < COL_TILE ? N - j0 : COL_TILE;
        int64_t i = i0;
        for (; i + ROW_BLOCK <= i1; i += ROW_BLOCK) {
            float *restrict c0 = C + (i + 0) * N + j0;
            float *restrict c1 = C + (i + 1) * N + j0;
            float *restrict c2 = C + (i + 2) * N + j0;
            float *restrict c3 = C + (i + 3) * N + j0;
            memset(c0, 0, (size_t)nj * sizeof(float));
            memset(c1, 0, (size_t)nj * sizeof(float));
            memset(c2, 0, (size_t)nj * sizeof(float));
            memset(c3, 0, (size_t)nj * sizeof(float));
            for (int64_t k = 0; k < K; k++) {
                const float a0 = A[(i + 0) * lda + k], a1 = A[(i + 1) * lda + k];
                const float a2 = A[(i + 2) * lda + k], a3 = A[(i + 3) * lda + k];
                const float *restrict b = Bm + k * N + j0;
                for (int64_t j = 0; j < nj; j++) {
                    const float bj = b[j];
                    c0[j] += a0 * bj;
                    c1[j] += a1 * bj;
                    c2[j] += a2 * bj;
                    c3[j] += a3 * bj;
                }
            }
        }
        for (; i < i1; i++) {
            float *restrict c0 = C + i * N + j0;
            memset(c0, 0, (size_t)nj * sizeof(float));
            for (int64_t k = 0; k < K; k++) {
                const float a0 = A[i * lda + k];
                const float *restrict b = Bm + k * N + j0;
                for (int64_t j = 0; j < nj; j++) c0[j] += a0 * b[j];
            }
        }
    }
}

struct matmul_job {
    float *C;
    const float *A, *Bm;
    int64_t lda, K, N;
};

static void matmul_part(void *ctx, int64_t begin, int64_t end, int worker)
{
    const struct matmul_job *j = ctx;
    matmul_rows_ordered(j->C, j->A, j->lda, j->Bm, j->K, j->N, begin, end);
}

/* C = A . Bm with rows of C split across the pool; see matmul_rows_ordered. */
static void matmul_parallel(struct dt_backend *be, float *C, const float *A, const float *Bm,
                            int64_t M, int64_t K, int64_t N)
{
    struct matmul_job job = {C, A, Bm, K, K, N};
    dt_pool_run(dt_cpu(be)->pool, M, ROW_BLOCK, matmul_part, &job);
}

struct transpose_job {
    float *dst;
    const float *src;
    int64_t rows, cols; /* of src */
};

/* dst (cols,rows) = src (rows,cols)^T for src rows [begin, end): exact copies. */
static void transpose_part(void *ctx, int64_t begin, int64_t end, int worker)
{
    const struct transpose_job *t = ctx;
    for (int64_t r = begin; r < end; r++)
        for (int64_t c = 0; c < t->cols; c++) t->dst[c * t->rows + r] = t->src[r * t->cols + c];
}

static void transpose_parallel(struct dt_backend *be, float *dst, const float *src,
                               int64_t rows, int64_t cols)
{
    struct transpose_job job = {dst, src, rows, cols};
    dt_pool_run(dt_cpu(be)->pool, rows, 16, transpose_part, &job);
}

struct bias_add_job {
    float *y;
    const float *bias;
    int64_t out;
};

DT_VECTOR_CLONES
static void bias_add_part(void *ctx, int64_t begin, int64_t end, int worker)
{
    const struct bias_add_job *j = ctx;
    for (int64_t b = begin; b < end; b++) {
        float *restrict y = j->y + b * j->out;
        const float *restrict bias = j->bias;
        for (int64_t o = 0; o < j->out; o++) y[o] += bias[o];
    }
}

/* portable: y[b,o] = (sum_{k ascending} x[b,k] w[k,o]) + bias[o]; rows split across
 * threads, each output computed by one thread in a fixed order. */
enum dt_status dt_cpu_dense_forward(struct dt_backend *be, float *y, const float *x,
                                    const float *w, const float *bias, int64_t B, int64_t in,
                                    int64_t out, const struct dt_policy *pol)
{
    matmul_parallel(be, y, x, w, B, in, out);
    struct bias_add_job job = {y, bias, out};
    dt_pool_run(dt_cpu(be)->pool, B, 8, bias_add_part, &job);
    return DT_OK;
}

/* portable: dx[b,k] = sum_{o ascending} dy[b,o] w[k,o], through an exact transpose of w. */
enum dt_status dt_cpu_dense_backward_data(struct dt_backend *be, float *dx, const float *dy,
                                          const float *w, int64_t B, int64_t in, int64_t out,
                                          const struct dt_policy *pol)
{
    float *wt = dt_cpu_scratch(be, (size_t)(in * out));
    transpose_parallel(be, wt, w, in, out); /* wt is (out,in) */
    matmul_parallel(be, dx, dy, wt, B, out, in);
    return DT_OK;
}

/* portable: dw[k,o] = sum_{b ascending} x[b,k] dy[b,o], serial over the batch in index
 * order, rows of dw split across threads. */
enum dt_status dt_cpu_dense_backward_weight(struct dt_backend *be, float *dw, const float *x,
                                            const float *dy, int64_t B, int64_t in, int64_t out,
                                            const struct dt_policy *pol)
{
    float *xt = dt_cpu_scratch(be, (size_t)(in * B));
    transpose_parallel(be, xt, x, B, in); /* xt is (in,B) */
    matmul_parallel(be, dw, xt, dy, in, B, out);
    return DT_OK;
}

/* portable: dbias[o] = sum_{b ascending} dy[b,o]; one thread, vectorised across o. */
DT_VECTOR_CLONES
enum dt_status dt_cpu_bias_backward(struct dt_backend *be, float *dbias, const float *dy,
                                    int64_t B, int64_t out, const struct dt_policy *pol)
{
    float *restrict acc = dbias;
    memset(acc, 0, (size_t)out * sizeof(float));
    for (int64_t b = 0; b < B; b++) {
        const float *restrict row = dy + b * out;
        for (int64_t o = 0; o < out; o++) acc[o] += row[o];
    }
    return DT_OK;
}
