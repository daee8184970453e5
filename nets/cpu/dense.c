/* Dense layer on the CPU backend: forward, backward-data, backward-weight, bias gradient,
 * under the policy's controls (DESIGN.md, "Determinism levels and controls"):
 *
 *   matrix products  math: fast -> OpenBLAS sgemm with its own threads; otherwise
 *                    matmul_rows_ordered, which sums over k in increasing index order for
 *                    every output and vectorises across output columns, so the order
 *                    survives vectorisation and the row split across threads.
 *   backward-weight  the sum over the batch, under `reduction`:
 *                    fixed     -> canonical chunks of DT_REDUCE_CHUNK rows, each summed in
 *                                 index order, combined by the fixed tree of reduce.h;
 *                    unordered -> workers take chunks of UNORDERED_CHUNK rows dynamically,
 *                                 sum them into private partials, and add the partials into
 *                                 the result in the order they finish.
 *   bias gradient    a scatter-add over the batch, under `atomics`:
 *                    fixed_point -> exact int64 accumulation, one rounding (fixed_point.h);
 *                    float       -> every row added element by element with a float
 *                                   compare-and-swap, in arrival order. */
#include <stdatomic.h>
#include <string.h>

#include <cblas.h>

#include "determinism/fixed_point.h"
#include "determinism/reduce.h"
#include "nets/cpu/cpu.h"

#define ROW_BLOCK 4       /* rows of C updated together: each B row loaded once per block */
#define COL_TILE 512      /* columns of C per pass: keeps ROW_BLOCK rows of C in L1 */
#define UNORDERED_CHUNK 8 /* batch rows per dynamically scheduled chunk */

/* C[i, :] (+)= sum_{k=0..K-1} A[i,k] * Bm[k, :] for i in [i0, i1), k ascending; with
 * `accumulate` the sum starts from C's current value, else from +0.
 * A is (M,K) with row stride lda, Bm is (K,N) with row stride N, C is (M,N). */
DT_VECTOR_CLONES
static void matmul_rows_ordered(float *restrict C, const float *restrict A, int64_t lda,
                                const float *restrict Bm, int64_t K, int64_t N, int64_t i0,
                                int64_t i1, bool accumulate)
{
    for (int64_t j0 = 0; j0 < N; j0 += COL_TILE) {
        int64_t nj = N - j0 < COL_TILE ? N - j0 : COL_TILE;
        int64_t i = i0;
        for (; i + ROW_BLOCK <= i1; i += ROW_BLOCK) {
            float *restrict c0 = C + (i + 0) * N + j0;
            float *restrict c1 = C + (i + 1) * N + j0;
            float *restrict c2 = C + (i + 2) * N + j0;
            float *restrict c3 = C + (i + 3) * N + j0;
            if (!accumulate) {
                memset(c0, 0, (size_t)nj * sizeof(float));
                memset(c1, 0, (size_t)nj * sizeof(float));
                memset(c2, 0, (size_t)nj * sizeof(float));
                memset(c3, 0, (size_t)nj * sizeof(float));
            }
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
            if (!accumulate) memset(c0, 0, (size_t)nj * sizeof(float));
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
    matmul_rows_ordered(j->C, j->A, j->lda, j->Bm, j->K, j->N, begin, end, false);
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

/* ---- forward and backward-data: sums over features, never over the batch ------------ */

/* math fast: OpenBLAS sgemm (its own blocking and threads; bits may depend on the thread
 * count). Otherwise portable: y[b,o] = (sum_{k ascending} x[b,k] w[k,o]) + bias[o], each
 * output computed by one thread in a fixed order. */
enum dt_status dt_cpu_dense_forward(struct dt_backend *be, float *y, const float *x,
                                    const float *w, const float *bias, int64_t B, int64_t in,
                                    int64_t out, const struct dt_policy *pol)
{
    if (pol->math == DT_MATH_FAST)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)B, (int)out, (int)in, 1.0f,
                    x, (int)in, w, (int)out, 0.0f, y, (int)out);
    else
        matmul_parallel(be, y, x, w, B, in, out);
    struct bias_add_job job = {y, bias, out};
    dt_pool_run(dt_cpu(be)->pool, B, 8, bias_add_part, &job);
    return DT_OK;
}

/* math fast: OpenBLAS sgemm with w transposed. Otherwise portable: dx[b,k] =
 * sum_{o ascending} dy[b,o] w[k,o], through an exact transpose of w. */
enum dt_status dt_cpu_dense_backward_data(struct dt_backend *be, float *dx, const float *dy,
                                          const float *w, int64_t B, int64_t in, int64_t out,
                                          const struct dt_policy *pol)
{
    if (pol->math == DT_MATH_FAST) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)B, (int)in, (int)out, 1.0f,
                    dy, (int)out, w, (int)out, 0.0f, dx, (int)in);
        return DT_OK;
    }
    float *wt = dt_cpu_scratch(be, (size_t)(in * out));
    transpose_parallel(be, wt, w, in, out); /* wt is (out,in) */
    matmul_parallel(be, dx, dy, wt, B, out, in);
    return DT_OK;
}

/* ---- backward-weight: the sum over the batch (reduction control) --------------------- */

struct wgrad_job {
    struct dt_backend *be;
    float *dw;
    const float *xt, *dy; /* xt is (in,B): x transposed */
    int64_t B, in, out;
    int64_t n_chunks;
    atomic_llong next_chunk;
};

/* reduction fixed, rows [begin, end) of dw: per block of ROW_BLOCK rows, one partial per
 * canonical batch chunk, then the fixed tree. Same bits for any split of the rows. */
static void wgrad_fixed_part(void *ctx, int64_t begin, int64_t end, int worker)
{
    struct wgrad_job *j = ctx;
    const int64_t block = ROW_BLOCK * j->out;
    float *buf = dt_cpu_worker_buffer(j->be, worker, (size_t)(j->n_chunks * block));
    for (int64_t i0 = begin; i0 < end; i0 += ROW_BLOCK) {
        int64_t rows = end - i0 < ROW_BLOCK ? end - i0 : ROW_BLOCK;
        for (int64_t c = 0; c < j->n_chunks; c++) {
            int64_t b0 = c * DT_REDUCE_CHUNK;
            int64_t len = j->B - b0 < DT_REDUCE_CHUNK ? j->B - b0 : DT_REDUCE_CHUNK;
            matmul_rows_ordered(buf + c * block, j->xt + i0 * j->B + b0, j->B,
                                j->dy + b0 * j->out, len, j->out, 0, rows, false);
        }
        dt_reduce_tree_vectors(buf, j->n_chunks, rows * j->out, block);
        memcpy(j->dw + i0 * j->out, buf, (size_t)(rows * j->out) * sizeof(float));
    }
}

/* Add a private partial into the shared result; the lock order is the completion order. */
DT_VECTOR_CLONES
static void add_into(float *restrict dst, const float *restrict src, int64_t n)
{
    for (int64_t i = 0; i < n; i++) dst[i] += src[i];
}

/* reduction unordered: worker takes chunks of UNORDERED_CHUNK batch rows as they come,
 * sums them into its partial, then adds the partial into dw when it runs out of work. */
static void wgrad_unordered_part(void *ctx, int64_t begin, int64_t end, int worker)
{
    struct wgrad_job *j = ctx;
    const int64_t n = j->in * j->out;
    float *p = NULL;
    for (;;) {
        int64_t c = atomic_fetch_add(&j->next_chunk, 1);
        if (c >= j->n_chunks) break;
        int64_t b0 = c * UNORDERED_CHUNK;
        int64_t len = j->B - b0 < UNORDERED_CHUNK ? j->B - b0 : UNORDERED_CHUNK;
        bool acc = p != NULL;
        if (!p) p = dt_cpu_worker_buffer(j->be, worker, (size_t)n);
        matmul_rows_ordered(p, j->xt + b0, j->B, j->dy + b0 * j->out, len, j->out, 0, j->in,
                            acc);
    }
    if (!p) return;
    struct dt_cpu_ctx *c = dt_cpu(j->be);
    pthread_mutex_lock(&c->combine_mu);
    add_into(j->dw, p, n);
    pthread_mutex_unlock(&c->combine_mu);
}

/* Forced order (test hook): the unordered chunks' partials added serially in a
 * permutation drawn from the hook's seed. */
static void wgrad_forced(struct wgrad_job *j, uint64_t seed)
{
    int64_t *perm = dt_xmalloc((size_t)j->n_chunks * sizeof *perm);
    dt_cpu_forced_permutation(perm, j->n_chunks, seed, 1);
    const int64_t n = j->in * j->out;
    float *p = dt_cpu_worker_buffer(j->be, 0, (size_t)n);
    for (int64_t t = 0; t < j->n_chunks; t++) {
        int64_t b0 = perm[t] * UNORDERED_CHUNK;
        int64_t len = j->B - b0 < UNORDERED_CHUNK ? j->B - b0 : UNORDERED_CHUNK;
        matmul_rows_ordered(p, j->xt + b0, j->B, j->dy + b0 * j->out, len, j->out, 0, j->in,
                            false);
        add_into(j->dw, p, n);
    }
    free(perm);
}

/* dw[k,o] = sum over the batch of x[b,k] dy[b,o]; order per the `reduction` control. */
enum dt_status dt_cpu_dense_backward_weight(struct dt_backend *be, float *dw, const float *x,
                                            const float *dy, int64_t B, int64_t in, int64_t out,
                                            const struct dt_policy *pol)
{
    float *xt = dt_cpu_scratch(be, (size_t)(in * B));
    transpose_parallel(be, xt, x, B, in); /* xt is (in,B) */
    struct wgrad_job job = {.be = be, .dw = dw, .xt = xt, .dy = dy, .B = B, .in = in,
                            .out = out};
    atomic_init(&job.next_chunk, 0);
    struct dt_cpu_ctx *c = dt_cpu(be);
    if (pol->reduction == DT_REDUCTION_FIXED) {
        job.n_chunks = dt_reduce_chunks(B);
        dt_pool_run(c->pool, in, ROW_BLOCK, wgrad_fixed_part, &job);
        return DT_OK;
    }
    job.n_chunks = (B + UNORDERED_CHUNK - 1) / UNORDERED_CHUNK;
    memset(dw, 0, (size_t)(in * out) * sizeof(float));
    if (c->forced_order) {
        wgrad_forced(&job, c->forced_order);
        return DT_OK;
    }
    dt_pool_run(c->pool, dt_pool_threads(c->pool), 1, wgrad_unordered_part, &job);
    return DT_OK;
}

/* ---- bias gradient: a scatter-add over the batch (atomics control) ------------------- */

struct bgrad_job {
    float *dbias;
    const float *dy;
    int64_t B, out;
    atomic_llong next_row;
};

/* atomics float: rows taken as they come, each element added with a float CAS. */
static void bgrad_float_part(void *ctx, int64_t begin, int64_t end, int worker)
{
    struct bgrad_job *j = ctx;
    for (;;) {
        int64_t b = atomic_fetch_add(&j->next_row, 1);
        if (b >= j->B) break;
        const float *row = j->dy + b * j->out;
        for (int64_t o = 0; o < j->out; o++) dt_cpu_atomic_add_float(&j->dbias[o], row[o]);
    }
}

/* dbias[o] = sum over the batch of dy[b,o]; per the `atomics` control. */
enum dt_status dt_cpu_bias_backward(struct dt_backend *be, float *dbias, const float *dy,
                                    int64_t B, int64_t out, const struct dt_policy *pol)
{
    struct dt_cpu_ctx *c = dt_cpu(be);
    if (pol->atomics == DT_ATOMICS_FIXED_POINT) {
        int64_t *acc = (int64_t *)dt_cpu_scratch(be, (size_t)out * 2);
        int shift;
        struct dt_error err;
        enum dt_status st = dt_fixed_sum_rows(dbias, dy, B, out, acc, &shift, &err);
        if (st != DT_OK) fprintf(stderr, "detrain: bias gradient: %s\n", err.msg);
        return st;
    }
    memset(dbias, 0, (size_t)out * sizeof(float));
    if (c->forced_order) {
        int64_t *perm = dt_xmalloc((size_t)B * sizeof *perm);
        dt_cpu_forced_permutation(perm, B, c->forced_order, 2);
        for (int64_t t = 0; t < B; t++)
            for (int64_t o = 0; o < out; o++) dbias[o] += dy[perm[t] * out + o];
        free(perm);
        return DT_OK;
    }
    struct bgrad_job job = {dbias, dy, B, out};
    atomic_init(&job.next_row, 0);
    dt_pool_run(c->pool, dt_pool_threads(c->pool), 1, bgrad_float_part, &job);
    return DT_OK;
}
