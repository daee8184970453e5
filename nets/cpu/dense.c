/* Dense layer on the CPU backend: forward, backward-data, backward-weight, bias gradient,
 * under the policy's controls (DESIGN.md, "Determinism levels and controls"):
 *
 *   matrix products  math: fast -> OpenBLAS sgemm on each worker's rows; otherwise
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

#define ROW_BLOCK 4       /* rows per block in the fixed backward-weight tree */
#define UNORDERED_CHUNK 8 /* batch rows per dynamically scheduled chunk */

/* GCC/Clang vector of 8 floats: AVX2 registers in the avx2 clone, two SSE registers in
 * the baseline one. Mul and add stay separate roundings (no contraction). */
typedef float v8f __attribute__((vector_size(32)));

/* Unaligned vector load/store through pointers (no vector passes a call boundary by
 * value, so the ABI does not depend on the clone's instruction set). */
static inline void v8_load(v8f *v, const float *p) { memcpy(v, p, sizeof *v); }
static inline void v8_store(float *p, const v8f *v) { memcpy(p, v, sizeof *v); }

#define MR 4  /* micro-tile rows */
#define NR 16 /* micro-tile columns: two vectors */

/* One MR x NR tile of C, held in registers while k runs 0..K-1 in order. */
static inline void micro_tile(float *restrict C, int64_t ldc, const float *restrict A,
                              int64_t lda, const float *restrict Bm, int64_t ldb, int64_t K,
                              bool accumulate)
{
    v8f c00, c01, c10, c11, c20, c21, c30, c31;
    if (accumulate) {
        v8_load(&c00, C + 0 * ldc), v8_load(&c01, C + 0 * ldc + 8);
        v8_load(&c10, C + 1 * ldc), v8_load(&c11, C + 1 * ldc + 8);
        v8_load(&c20, C + 2 * ldc), v8_load(&c21, C + 2 * ldc + 8);
        v8_load(&c30, C + 3 * ldc), v8_load(&c31, C + 3 * ldc + 8);
    } else {
        c00 = c01 = c10 = c11 = c20 = c21 = c30 = c31 = (v8f){0};
    }
    for (int64_t k = 0; k < K; k++) {
        v8f b0, b1;
        v8_load(&b0, Bm + k * ldb), v8_load(&b1, Bm + k * ldb + 8);
        const float a0 = A[0 * lda + k], a1 = A[1 * lda + k];
        const float a2 = A[2 * lda + k], a3 = A[3 * lda + k];
        c00 = c00 + a0 * b0, c01 = c01 + a0 * b1;
        c10 = c10 + a1 * b0, c11 = c11 + a1 * b1;
        c20 = c20 + a2 * b0, c21 = c21 + a2 * b1;
        c30 = c30 + a3 * b0, c31 = c31 + a3 * b1;
    }
    v8_store(C + 0 * ldc, &c00), v8_store(C + 0 * ldc + 8, &c01);
    v8_store(C + 1 * ldc, &c10), v8_store(C + 1 * ldc + 8, &c11);
    v8_store(C + 2 * ldc, &c20), v8_store(C + 2 * ldc + 8, &c21);
    v8_store(C + 3 * ldc, &c30), v8_store(C + 3 * ldc + 8, &c31);
}

/* C[i, j] (+)= sum_{k=0..K-1} A[i,k] * Bm[k, j] for rows i in [i0, i1), k ascending; with
 * `accumulate` the sum starts from C's current value, else from +0. Every element sees
 * the same sequence of roundings whichever path (tile or edge) computes it, so the bits
 * depend on neither the tiling nor the row split across threads.
 * A is (M,K) with row stride lda, Bm is (K,N) with row stride N, C is (M,N). */
DT_VECTOR_CLONES
static void matmul_rows_ordered(float *restrict C, const float *restrict A, int64_t lda,
                                const float *restrict Bm, int64_t K, int64_t N, int64_t i0,
                                int64_t i1, bool accumulate)
{
    const int64_t n_tiled = N / NR * NR;
    /* Column strips of NR: the strip of Bm (K x NR) stays in cache across the rows. */
    for (int64_t j = 0; j < n_tiled; j += NR) {
        int64_t i = i0;
        for (; i + MR <= i1; i += MR)
            micro_tile(C + i * N + j, N, A + i * lda, lda, Bm + j, N, K, accumulate);
        for (; i < i1; i++) { /* leftover rows, same order per element */
            float *restrict c = C + i * N + j;
            float acc[NR];
            for (int64_t t = 0; t < NR; t++) acc[t] = accumulate ? c[t] : 0.0f;
            for (int64_t k = 0; k < K; k++) {
                const float a = A[i * lda + k];
                const float *restrict b = Bm + k * N + j;
                for (int64_t t = 0; t < NR; t++) acc[t] = acc[t] + a * b[t];
            }
            memcpy(c, acc, sizeof acc);
        }
    }
    if (n_tiled == N) return;
    for (int64_t i = i0; i < i1; i++) { /* leftover columns */
        float *restrict c = C + i * N;
        if (!accumulate) memset(c + n_tiled, 0, (size_t)(N - n_tiled) * sizeof(float));
        for (int64_t k = 0; k < K; k++) {
            const float a = A[i * lda + k];
            const float *restrict b = Bm + k * N;
            for (int64_t j = n_tiled; j < N; j++) c[j] = c[j] + a * b[j];
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

/* math fast: OpenBLAS sgemm, one call per worker on its slice of rows, OpenBLAS itself
 * single-threaded (set at backend init). OpenBLAS's own threads spin for a long time
 * after each call and would steal the cores from the rest of the step. */
struct blas_job {
    float *C;
    const float *A, *Bm;
    int64_t K, N;
    bool trans_b; /* Bm is (N,K) and used transposed */
};

static void blas_part(void *ctx, int64_t begin, int64_t end, int worker)
{
    const struct blas_job *j = ctx;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, j->trans_b ? CblasTrans : CblasNoTrans,
                (int)(end - begin), (int)j->N, (int)j->K, 1.0f, j->A + begin * j->K, (int)j->K,
                j->Bm, j->trans_b ? (int)j->K : (int)j->N, 0.0f, j->C + begin * j->N, (int)j->N);
}

static void blas_parallel(struct dt_backend *be, float *C, const float *A, const float *Bm,
                          int64_t M, int64_t K, int64_t N, bool trans_b)
{
    struct blas_job job = {C, A, Bm, K, N, trans_b};
    dt_pool_run(dt_cpu(be)->pool, M, 16, blas_part, &job);
}

/* math fast: OpenBLAS sgemm (its own blocking and kernels, FMA where the CPU has it; bits
 * may depend on the CPU and the row split). Otherwise portable: y[b,o] = (sum_{k ascending} x[b,k] w[k,o]) + bias[o], each
 * output computed by one thread in a fixed order. */
enum dt_status dt_cpu_dense_forward(struct dt_backend *be, float *y, const float *x,
                                    const float *w, const float *bias, int64_t B, int64_t in,
                                    int64_t out, const struct dt_policy *pol)
{
    if (pol->math == DT_MATH_FAST)
        blas_parallel(be, y, x, w, B, in, out, false);
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
        blas_parallel(be, dx, dy, w, B, out, in, true);
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
    struct bgrad_job job = {.dbias = dbias, .dy = dy, .B = B, .out = out};
    atomic_init(&job.next_row, 0);
    dt_pool_run(c->pool, dt_pool_threads(c->pool), 1, bgrad_float_part, &job);
    return DT_OK;
}
