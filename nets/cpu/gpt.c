/* The transformer's ops on the CPU backend (nets/backend.h, "the transformer's ops"). Each
 * output element is computed by the per-element functions of nets/gpt_elem.h -- the ones a
 * CUDA kernel calls -- in one worker, so the thread count changes speed, not bits. The one
 * exception is the embedding's scatter-add under `atomics: float`: rows are split over the
 * workers and added into the table by compare-and-swap in arrival order, as a GPU's
 * atomicAdd does -- the nondeterministic baseline; `fixed_point` sums every entry exactly
 * in int64 and rounds once. Under `math: fast` attention takes the library path instead:
 * its five products per (example, head) through OpenBLAS, the calls the CUDA backend makes
 * (nets/gpt_attn_gemm.h), the per-row softmax and dS between -- still one worker per
 * (example, head), so even this path's bits do not depend on the thread count. */
#include <math.h>
#include <stdlib.h>

#include <cblas.h>

#include "determinism/fixed_point.h"
#include "determinism/streams.h"
#include "determinism/dropout.h"
#include "nets/cpu/cpu.h"
#include "nets/gpt_attn_gemm.h"
#include "nets/gpt_elem.h"

/* ---- embedding --------------------------------------------------------------------------- */

struct emb_job {
    float *h;
    int32_t *tokens, *targets;
    const float *x, *wte, *wpe;
    int64_t T, D;
};

static void emb_forward_part(void *ctx, int64_t begin, int64_t end, int worker)
{
    const struct emb_job *j = ctx;
    const int64_t T = j->T, D = j->D;
    for (int64_t r = begin; r < end; r++) {
        const int64_t b = r / T, t = r % T;
        j->tokens[r] = dt_gpt_token(j->x[b * (T + 1) + t]);
        j->targets[r] = dt_gpt_token(j->x[b * (T + 1) + t + 1]);
        for (int64_t e = r * D; e < (r + 1) * D; e++)
            j->h[e] = dt_embed_elem(j->x, j->wte, j->wpe, T, D, e);
    }
}

/* portable: elementwise. */
enum dt_status dt_cpu_embedding_forward(struct dt_backend *be, float *h, int32_t *tokens,
                                        int32_t *targets, const float *x, const float *wte,
                                        const float *wpe, int64_t B, int64_t T, int64_t D,
                                        const struct dt_policy *pol)
{
    struct emb_job j = {.h = h,
                        .tokens = tokens,
                        .targets = targets,
                        .x = x,
                        .wte = wte,
                        .wpe = wpe,
                        .T = T,
                        .D = D};
    dt_pool_run(dt_cpu(be)->pool, B * T, 16, emb_forward_part, &j);
    return DT_OK;
}

struct scatter_job {
    struct dt_backend *be;
    float *dwte;
    const float *dh;
    const int32_t *tokens;
    int64_t rows, V, D;
    int shift;
    int64_t *acc; /* fixed point: (V, D) */
};

/* Rows [begin, end) added into the table dst in row order. */
static void scatter_rows(float *dst, const struct scatter_job *j, int64_t begin, int64_t end)
{
    for (int64_t r = begin; r < end; r++) {
        float *d = dst + (int64_t)j->tokens[r] * j->D;
        const float *src = j->dh + r * j->D;
        for (int64_t i = 0; i < j->D; i++) d[i] += src[i];
    }
}

/* atomics: float -- each worker scatters its rows into its own table, then adds the table
 * into the result in arrival order (compare-and-swap per entry): the fastest form measured
 * here (results/cpu/gpt/bench.txt; a compare-and-swap per term was 1.15x the exact path). */
static void scatter_float_part(void *ctx, int64_t begin, int64_t end, int worker)
{
    const struct scatter_job *j = ctx;
    const int64_t n = j->V * j->D;
    float *p = dt_cpu_worker_buffer(j->be, worker, (size_t)n);
    memset(p, 0, (size_t)n * sizeof *p);
    scatter_rows(p, j, begin, end);
    for (int64_t e = 0; e < n; e++)
        if (p[e] != 0.0f) dt_cpu_atomic_add_float(&j->dwte[e], p[e]);
}

/* atomics: fixed_point -- worker owns columns [begin, end) of every entry: exact sums. */
static void scatter_fixed_part(void *ctx, int64_t begin, int64_t end, int worker)
{
    const struct scatter_job *j = ctx;
    for (int64_t r = 0; r < j->rows; r++) {
        int64_t *acc = j->acc + (int64_t)j->tokens[r] * j->D;
        const float *src = j->dh + r * j->D;
        for (int64_t i = begin; i < end; i++) {
            int64_t q = 0;
            (void)dt_fixed_from_float(&q, src[i], j->shift); /* in range: max |term| set it */
            acc[i] += q; /* rows * max * 2^shift < 2^62: no overflow in any order */
        }
    }
}

enum dt_status dt_cpu_embedding_backward(struct dt_backend *be, float *dwte, const float *dh,
                                         const int32_t *tokens, int64_t rows, int64_t V, int64_t D,
                                         bool accumulate, const struct dt_policy *pol)
{
    struct dt_cpu_ctx *c = dt_cpu(be);
    for (int64_t r = 0; r < rows; r++)
        if (tokens[r] < 0 || tokens[r] >= V)
            return dt_backend_op_error(be, DT_ERR_DATA, "token %d at row %lld is not below %lld",
                                       (int)tokens[r], (long long)r, (long long)V);
    struct scatter_job j = {
        .be = be, .dwte = dwte, .dh = dh, .tokens = tokens, .rows = rows, .V = V, .D = D};
    if (!dt_atomics_exact(pol)) {
        if (!accumulate) memset(dwte, 0, (size_t)(V * D) * sizeof(float));
        if (c->forced_order) { /* test hook: the rows in a drawn order, serially */
            int64_t *perm = dt_xmalloc((size_t)rows * sizeof *perm);
            dt_forced_permutation(perm, rows, c->forced_order, DT_FORCED_ROWS);
            for (int64_t k = 0; k < rows; k++) scatter_rows(dwte, &j, perm[k], perm[k] + 1);
            free(perm);
            return DT_OK;
        }
        dt_pool_run(c->pool, rows, 64, scatter_float_part, &j);
        return DT_OK;
    }
    /* fixed point: one shift from max |dh| and the row count, exact int64 sums, one
     * rounding per entry (then added to what is there with accumulate) */
    float max_abs = 0.0f;
    int64_t bad = -1;
    if (!dt_cpu_max_abs(be, dh, rows * D, &max_abs, &bad))
        return dt_backend_op_error(be, DT_ERR_NUMERIC, "non-finite input at row %lld, column %lld",
                                   (long long)(bad / D), (long long)(bad % D));
    j.shift = dt_fixed_shift_for(max_abs, rows);
    j.acc = dt_xcalloc((size_t)(V * D), sizeof *j.acc);
    dt_pool_run(c->pool, D, 1, scatter_fixed_part, &j);
    enum dt_status st = DT_OK;
    for (int64_t e = 0; e < V * D; e++) {
        const float s = dt_fixed_to_float(j.acc[e], j.shift);
        if ((dt_float_bits(s) & 0x7fffffffu) >= 0x7f800000u) {
            st = dt_backend_op_error(be, DT_ERR_NUMERIC,
                                     "fixed-point sum of token %lld, column %lld overflows the "
                                     "float range",
                                     (long long)(e / D), (long long)(e % D));
            break;
        }
        dwte[e] = accumulate ? dwte[e] + s : s;
    }
    free(j.acc);
    return st;
}

/* ---- LayerNorm ---------------------------------------------------------------------------- */

struct ln_job {
    float *y, *mean, *rstd, *gx;
    const float *x, *gamma, *beta, *dy;
    int64_t D;
    bool accumulate;
};

static void ln_forward_part(void *ctx, int64_t begin, int64_t end, int worker)
{
    const struct ln_job *j = ctx;
    for (int64_t r = begin; r < end; r++)
        dt_layernorm_row(j->y + r * j->D, &j->mean[r], &j->rstd[r], j->x + r * j->D, j->gamma,
                         j->beta, j->D);
}

static void ln_backward_part(void *ctx, int64_t begin, int64_t end, int worker)
{
    const struct ln_job *j = ctx;
    for (int64_t r = begin; r < end; r++)
        dt_layernorm_row_grad(j->y + r * j->D, j->gx + r * j->D, j->dy + r * j->D, j->x + r * j->D,
                              j->mean[r], j->rstd[r], j->gamma, j->D, j->accumulate);
}

/* portable: per row, in index order (dt_layernorm_row). */
enum dt_status dt_cpu_layernorm_forward(struct dt_backend *be, float *y, float *mean, float *rstd,
                                        const float *x, const float *gamma, const float *beta,
                                        int64_t rows, int64_t D, const struct dt_policy *pol)
{
    struct ln_job j = {
        .y = y, .mean = mean, .rstd = rstd, .x = x, .gamma = gamma, .beta = beta, .D = D};
    dt_pool_run(dt_cpu(be)->pool, rows, 16, ln_forward_part, &j);
    return DT_OK;
}

/* portable: per row (dt_layernorm_row_grad); y carries dx. */
enum dt_status dt_cpu_layernorm_backward(struct dt_backend *be, float *dx, float *gx,
                                         const float *dy, const float *x, const float *mean,
                                         const float *rstd, const float *gamma, int64_t rows,
                                         int64_t D, bool accumulate, const struct dt_policy *pol)
{
    struct ln_job j = {.accumulate = accumulate,
                       .y = dx,
                       .gx = gx,
                       .dy = dy,
                       .x = x,
                       .mean = (float *)mean,
                       .rstd = (float *)rstd,
                       .gamma = gamma,
                       .D = D};
    dt_pool_run(dt_cpu(be)->pool, rows, 16, ln_backward_part, &j);
    return DT_OK;
}

/* ---- attention ----------------------------------------------------------------------------- */

struct attn_job {
    float *out, *att, *ds, *dqkv;
    const float *qkv, *dout, *p;
    int64_t B, T, H, D, hd;
    float scale;
    bool portable, exact;
};

/* items: (b, h, t) rows */
static void attn_forward_part(void *ctx, int64_t begin, int64_t end, int worker)
{
    const struct attn_job *j = ctx;
    const int64_t T = j->T, H = j->H, D = j->D, hd = j->hd;
    for (int64_t i = begin; i < end; i++) {
        const int64_t t = i % T, h = (i / T) % H, b = i / (T * H);
        dt_attn_row(j->out + (b * T + t) * D + h * hd, j->att + i * T, j->qkv, b, t, h, T, D, hd,
                    j->scale, j->portable, j->exact);
    }
}

static void attn_dscores_part(void *ctx, int64_t begin, int64_t end, int worker)
{
    const struct attn_job *j = ctx;
    const int64_t T = j->T, H = j->H;
    for (int64_t i = begin; i < end; i++) {
        const int64_t t = i % T, h = (i / T) % H, b = i / (T * H);
        dt_attn_row_dscores(j->ds + i * T, j->p + i * T, j->dout, j->qkv, b, t, h, T, j->D, j->hd,
                            j->scale, j->exact);
    }
}

/* items: (b, u) rows of dqkv, every element of q, k and v */
static void attn_grad_part(void *ctx, int64_t begin, int64_t end, int worker)
{
    const struct attn_job *j = ctx;
    const int64_t T = j->T, D = j->D, hd = j->hd;
    for (int64_t i = begin; i < end; i++) {
        const int64_t b = i / T, u = i % T;
        float *row = j->dqkv + i * 3 * D;
        for (int which = 0; which < 3; which++)
            for (int64_t e = 0; e < D; e++)
                row[which * D + e] = dt_attn_grad_elem(j->ds, j->p, j->dout, j->qkv, b, u, e / hd,
                                                       e % hd, which, T, D, hd, j->exact);
    }
}

/* items: (b, h) blocks; every element of the block's dq, dk, dv rows the sum
 * dt_attn_grad_elem makes, in its order (from +0, positions ascending), but a row at a
 * time: each term added to the whole row (dt_attn_grad_term, as the CUDA tiles do), so the
 * loop over the row's elements vectorises -- the same bits. */
DT_VECTOR_PART(attn_grad_rows_part)
{
    const struct attn_job *j = ctx;
    const int64_t T = j->T, H = j->H, D = j->D, hd = j->hd;
    for (int64_t k = begin; k < end; k++) {
        const int64_t b = k / H, h = k % H;
        const float *dsb = j->ds + k * T * T, *pb = j->p + k * T * T;
        const float *qkv = j->qkv + b * T * 3 * D + h * hd, *dout = j->dout + b * T * D + h * hd;
        for (int64_t u = 0; u < T; u++) {
            float *dq = j->dqkv + (b * T + u) * 3 * D + h * hd, *dk = dq + D, *dv = dq + 2 * D;
            for (int64_t e = 0; e < hd; e++) dq[e] = dk[e] = dv[e] = 0.0f;
            for (int64_t s = 0; s <= u; s++)
                dt_attn_grad_term(dq, dsb[u * T + s], qkv + s * 3 * D + D, hd);
            for (int64_t t = u; t < T; t++) {
                dt_attn_grad_term(dk, dsb[t * T + u], qkv + t * 3 * D, hd);
                dt_attn_grad_term(dv, pb[t * T + u], dout + t * D, hd);
            }
        }
    }
}

/* ---- attention's library path (math: fast) ---------------------------------------------- */

/* Element z of a strided-batch call (nets/gpt_attn_gemm.h) through OpenBLAS (one thread: the
 * pool's worker is the parallelism). */
static void gemm_one(const struct dt_gemm_call *g, int64_t z)
{
    cblas_sgemm(CblasColMajor, g->ta ? CblasTrans : CblasNoTrans, g->tb ? CblasTrans : CblasNoTrans,
                (blasint)g->m, (blasint)g->n, (blasint)g->k, g->alpha, g->a + z * g->stride_a,
                (blasint)g->lda, g->b + z * g->stride_b, (blasint)g->ldb, 0.0f,
                g->c + z * g->stride_c, (blasint)g->ldc);
}

/* The calls over the heads of one example (call b, element h): item k = b H + h is the
 * (b, h) block, rows k T .. k T + T - 1 of att and ds. */
static struct dt_attn_shape lib_shape(const struct attn_job *j)
{
    struct dt_attn_shape s = dt_attn_shape_of(j->B, j->T, j->H, j->D);
    s.over_examples = false;
    return s;
}

/* items: (b, h) blocks. S = scale Q K^T, the causal softmax per row, out = P V. */
static void attn_lib_forward_part(void *ctx, int64_t begin, int64_t end, int worker)
{
    const struct attn_job *j = ctx;
    const struct dt_attn_shape s = lib_shape(j);
    const int64_t T = j->T, H = j->H;
    for (int64_t k = begin; k < end; k++) {
        const int64_t b = k / H, h = k % H;
        const struct dt_gemm_call sc = dt_attn_gemm_scores(&s, j->att, j->qkv, b, j->scale);
        gemm_one(&sc, h);
        for (int64_t t = 0; t < T; t++) dt_attn_softmax_row(j->att + (k * T + t) * T, t, T, false);
        const struct dt_gemm_call o = dt_attn_gemm_out(&s, j->out, j->att, j->qkv, b);
        gemm_one(&o, h);
    }
}

/* items: (b, h) blocks. dP = dout V^T, dS per row, then dQ, dK, dV of the block's head. */
static void attn_lib_backward_part(void *ctx, int64_t begin, int64_t end, int worker)
{
    const struct attn_job *j = ctx;
    const struct dt_attn_shape s = lib_shape(j);
    const int64_t T = j->T, H = j->H;
    for (int64_t k = begin; k < end; k++) {
        const int64_t b = k / H, h = k % H;
        const struct dt_gemm_call dp = dt_attn_gemm_dp(&s, j->ds, j->dout, j->qkv, b);
        gemm_one(&dp, h);
        for (int64_t t = 0; t < T; t++)
            dt_attn_dscores_finish(j->ds + (k * T + t) * T, j->p + (k * T + t) * T, t, T, j->scale,
                                   false);
        for (int which = 0; which < 3; which++) {
            const struct dt_gemm_call g =
                dt_attn_gemm_grad(&s, j->dqkv, j->ds, j->p, j->dout, j->qkv, b, which);
            gemm_one(&g, h);
        }
    }
}

/* portable: per row in index order (dt_attn_row), or under math: exact each sum the exact
 * dot product of its vectors; `math` picks exp. math: fast: the library path above. */
enum dt_status dt_cpu_attention_forward(struct dt_backend *be, float *out, float *att,
                                        const float *qkv, int64_t B, int64_t T, int64_t H,
                                        int64_t D, const struct dt_policy *pol)
{
    struct attn_job j = {.out = out,
                         .att = att,
                         .qkv = qkv,
                         .B = B,
                         .T = T,
                         .H = H,
                         .D = D,
                         .hd = D / H,
                         .scale = dt_gpt_attn_scale(D / H),
                         .portable = dt_math_portable(pol),
                         .exact = dt_math_exact(pol)};
    if (dt_math_fast(pol)) dt_pool_run(dt_cpu(be)->pool, B * H, 1, attn_lib_forward_part, &j);
    else dt_pool_run(dt_cpu(be)->pool, B * H * T, 4, attn_forward_part, &j);
    return DT_OK;
}

/* portable: the score gradients per row, then every element of dq, dk, dv one sum in index
 * order (dt_attn_grad_elem; a row at a time, attn_grad_rows_part, but under math: exact):
 * the sums over positions never depend on the split. math: fast: the library path above. */
enum dt_status dt_cpu_attention_backward(struct dt_backend *be, float *dqkv, float *ds,
                                         const float *dout, const float *att, const float *qkv,
                                         int64_t B, int64_t T, int64_t H, int64_t D,
                                         const struct dt_policy *pol)
{
    struct attn_job j = {.ds = ds,
                         .dqkv = dqkv,
                         .qkv = qkv,
                         .dout = dout,
                         .p = att,
                         .B = B,
                         .T = T,
                         .H = H,
                         .D = D,
                         .hd = D / H,
                         .scale = dt_gpt_attn_scale(D / H),
                         .exact = dt_math_exact(pol)};
    if (dt_math_fast(pol)) {
        dt_pool_run(dt_cpu(be)->pool, B * H, 1, attn_lib_backward_part, &j);
        return DT_OK;
    }
    dt_pool_run(dt_cpu(be)->pool, B * H * T, 4, attn_dscores_part, &j);
    if (j.exact) dt_pool_run(dt_cpu(be)->pool, B * T, 2, attn_grad_part, &j);
    else dt_pool_run(dt_cpu(be)->pool, B * H, 1, attn_grad_rows_part, &j);
    return DT_OK;
}

/* ---- GELU, add --------------------------------------------------------------------------
 */

struct ew_job {
    float *y;
    const float *x, *dy;
    bool portable;
};

/* One loop per tanh, so that the own one's (branch-free: dt_tanh_portable) vectorises. */
DT_VECTOR_PART(gelu_forward_part)
{
    const struct ew_job *j = ctx;
    float *restrict y = j->y;
    const float *restrict x = j->x;
    if (j->portable)
        for (int64_t i = begin; i < end; i++) y[i] = dt_gelu(x[i], true);
    else
        for (int64_t i = begin; i < end; i++) y[i] = dt_gelu(x[i], false);
}

DT_VECTOR_PART(gelu_backward_part)
{
    const struct ew_job *j = ctx;
    float *y = j->y; /* may alias dy */
    const float *restrict x = j->x, *dy = j->dy;
    if (j->portable)
        for (int64_t i = begin; i < end; i++) y[i] = dt_gelu_grad(x[i], dy[i], true);
    else
        for (int64_t i = begin; i < end; i++) y[i] = dt_gelu_grad(x[i], dy[i], false);
}

DT_VECTOR_PART(add_part)
{
    const struct ew_job *j = ctx;
    float *restrict y = j->y;
    const float *restrict x = j->x;
    for (int64_t i = begin; i < end; i++) y[i] += x[i];
}

/* portable: elementwise; `math` picks tanh (dt_math_own_elementary). */
enum dt_status dt_cpu_gelu_forward(struct dt_backend *be, float *y, const float *x, int64_t n,
                                   const struct dt_policy *pol)
{
    struct ew_job j = {.y = y, .x = x, .portable = dt_math_own_elementary(pol)};
    dt_pool_run(dt_cpu(be)->pool, n, 2048, gelu_forward_part, &j);
    return DT_OK;
}

enum dt_status dt_cpu_gelu_backward(struct dt_backend *be, float *dx, const float *dy,
                                    const float *x, int64_t n, const struct dt_policy *pol)
{
    struct ew_job j = {.y = dx, .dy = dy, .x = x, .portable = dt_math_own_elementary(pol)};
    dt_pool_run(dt_cpu(be)->pool, n, 2048, gelu_backward_part, &j);
    return DT_OK;
}

/* portable: elementwise. */
enum dt_status dt_cpu_add(struct dt_backend *be, float *y, const float *x, int64_t n,
                          const struct dt_policy *pol)
{
    struct ew_job j = {.y = y, .x = x};
    dt_pool_run(dt_cpu(be)->pool, n, 8192, add_part, &j);
    return DT_OK;
}

/* ---- dropout ------------------------------------------------------------------------------ */

struct drop_job {
    float *y;
    const float *x;
    uint8_t *keep;
    struct dt_xoro *lanes;
    int64_t width;
    const struct dt_dropout_site *s;
};

/* Rows [begin, end): each row's mask is a function of its global row alone. */
static void dropout_part(void *ctx, int64_t begin, int64_t end, int worker)
{
    const struct drop_job *j = ctx;
    const struct dt_dropout_site *s = j->s;
    const int64_t W = j->width;
    for (int64_t r = begin; r < end; r++) {
        float *y = j->y + r * W;
        const float *x = j->x + r * W;
        switch (s->mode) {
        case DT_DROPOUT_PHILOX:
            dt_dropout_philox_range(y, x, (s->row0 + r) * W, W, &s->stream, s->threshold, s->scale);
            break;
        case DT_DROPOUT_KEEP:
            dt_dropout_lane_forward(y, x, j->keep + r * W, W, &j->lanes[r], s->threshold, s->scale);
            break;
        case DT_DROPOUT_STORED:
            for (int64_t c = 0; c < W; c++)
                y[c] = dt_dropout_apply(x[c], j->keep[r * W + c] != 0, s->scale);
            break;
        case DT_DROPOUT_LFSR_FORWARD:
            dt_dropout_lane_forward(y, x, NULL, W, &j->lanes[r], s->threshold, s->scale);
            break;
        case DT_DROPOUT_LFSR_BACKWARD:
            dt_dropout_lane_backward(y, x, W, &j->lanes[r], s->threshold, s->scale);
            break;
        }
    }
}

/* portable: per row, a function of the global row (determinism/dropout.h). */
enum dt_status dt_cpu_dropout(struct dt_backend *be, float *y, const float *x, uint8_t *keep,
                              struct dt_xoro *lanes, int64_t rows, int64_t width,
                              const struct dt_dropout_site *s, const struct dt_policy *pol)
{
    struct drop_job j = {.y = y, .x = x, .keep = keep, .lanes = lanes, .width = width, .s = s};
    dt_pool_run(dt_cpu(be)->pool, rows, 1 + 4096 / width, dropout_part, &j);
    return DT_OK;
}

enum dt_status dt_cpu_dropout_seed(struct dt_backend *be, struct dt_xoro *lanes, int64_t rows,
                                   int64_t row0, uint64_t seed, uint32_t step, uint32_t member,
                                   const struct dt_policy *pol)
{
    for (int64_t r = 0; r < rows; r++)
        lanes[r] = dt_dropout_lane_seed(seed, step, member, (uint64_t)(row0 + r));
    return DT_OK;
}
