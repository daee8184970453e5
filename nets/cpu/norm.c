/* Normalisation on the CPU backend: LayerNorm (the formulas: nets/gpt_elem.h, the lane
 * functions a CUDA warp calls), one worker per row, so the thread count changes speed, not
 * bits; batch normalisation (nets/batchnorm_elem.h): workers take chunks of rows, each
 * chunk's partials are its own, the chunks meet in the fixed tree -- the bits follow the
 * rows, never the workers. */
#include <string.h>

#include "nets/batchnorm_elem.h"
#include "nets/cpu/cpu.h"
#include "nets/gpt_elem.h"

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

/* ---- batch normalisation ----------------------------------------------------------------- */

struct bn_job {
    float *y, *gx, *p; /* p: the chunk partials, m x C (twice in backward) */
    const float *x, *dy, *gamma, *beta;
    const float *mean, *rstd, *a, *b; /* per channel */
    int64_t n, C, m;
    bool sq;
};

/* Chunks [begin, end): every channel's partial, dt_bn_chunk_sum's order (row by row, each
 * channel from +0), the channels side by side -- vectors across channels, never across a
 * sum (DT_VECTOR_PART: the AVX-512, AVX2 and baseline copies give the same bits). */
DT_VECTOR_PART(bn_sums_part)
{
    const struct bn_job *j = ctx;
    const int64_t C = j->C;
    for (int64_t c = begin; c < end; c++) {
        float *restrict p = j->p + c * C;
        for (int64_t ch = 0; ch < C; ch++) p[ch] = 0.0f;
        for (int64_t r = c * DT_REDUCE_CHUNK; r < dt_bn_chunk_end(c, j->n); r++) {
            const float *restrict x = j->x + r * C;
            if (j->sq)
                for (int64_t ch = 0; ch < C; ch++) p[ch] += dt_bn_term(x[ch], j->mean[ch], true);
            else
                for (int64_t ch = 0; ch < C; ch++) p[ch] += dt_bn_term(x[ch], 0.0f, false);
        }
    }
}

/* Chunks [begin, end): the partials of sum dy (first m x C) and sum dy xhat (next). */
DT_VECTOR_PART(bn_grad_sums_part)
{
    const struct bn_job *j = ctx;
    const int64_t C = j->C;
    for (int64_t c = begin; c < end; c++) {
        float *restrict pa = j->p + c * C, *restrict pb = j->p + (j->m + c) * C;
        for (int64_t ch = 0; ch < C; ch++) pa[ch] = pb[ch] = 0.0f;
        const float *restrict mean = j->mean, *restrict rstd = j->rstd;
        for (int64_t r = c * DT_REDUCE_CHUNK; r < dt_bn_chunk_end(c, j->n); r++) {
            const float *restrict g = j->dy + r * C, *restrict x = j->x + r * C;
            for (int64_t ch = 0; ch < C; ch++) pa[ch] += g[ch]; /* one store a loop, as above */
            for (int64_t ch = 0; ch < C; ch++)
                pb[ch] += dt_bn_grad_term(g[ch], x[ch], mean[ch], rstd[ch]);
        }
    }
}

DT_VECTOR_PART(bn_out_part)
{
    const struct bn_job *j = ctx;
    const int64_t C = j->C;
    for (int64_t r = begin; r < end; r++) {
        const float *restrict x = j->x + r * C;
        float *restrict y = j->y + r * C;
        for (int64_t ch = 0; ch < C; ch++)
            y[ch] = dt_bn_out(x[ch], j->mean[ch], j->rstd[ch], j->gamma[ch], j->beta[ch]);
    }
}

DT_VECTOR_PART(bn_grad_part)
{
    const struct bn_job *j = ctx;
    const int64_t C = j->C;
    const float *restrict mean = j->mean, *restrict rstd = j->rstd, *restrict k = j->gamma,
                          *restrict a = j->a, *restrict b = j->b; /* gamma: the factors k */
    for (int64_t r = begin; r < end; r++) {
        const float *restrict x = j->x + r * C, *restrict g = j->dy + r * C;
        float *restrict dx = j->y + r * C, *restrict gx = j->gx + r * C;
        /* short loops, one store each: the vectoriser takes them (xhat kept in dx first) */
        for (int64_t ch = 0; ch < C; ch++) dx[ch] = dt_bn_xhat(x[ch], mean[ch], rstd[ch]);
        for (int64_t ch = 0; ch < C; ch++) gx[ch] = dt_bn_gamma_term(g[ch], dx[ch]);
        for (int64_t ch = 0; ch < C; ch++) dx[ch] = dt_bn_grad(g[ch], dx[ch], k[ch], a[ch], b[ch]);
    }
}

/* One statistic per channel into out (C): the chunks' partials (workers), the tree, / n. */
static void bn_statistic(struct dt_backend *be, struct bn_job *j, float *out)
{
    dt_pool_run(dt_cpu(be)->pool, j->m, 4, bn_sums_part, j);
    dt_reduce_tree_vectors(j->p, j->m, j->C, j->C);
    for (int64_t ch = 0; ch < j->C; ch++) out[ch] = dt_bn_per_row(j->p[ch], j->n);
}

/* The fixed order of nets/batchnorm_elem.h at every policy. */
enum dt_status dt_cpu_batchnorm_forward(struct dt_backend *be, float *y, float *mean, float *var,
                                        const float *x, const float *gamma, const float *beta,
                                        int64_t rows, int64_t C, float eps,
                                        const struct dt_policy *pol)
{
    const int64_t m = dt_reduce_chunks(rows);
    float *p = dt_cpu_scratch(be, (size_t)((m + 1) * C));
    float *rstd = p + m * C;
    struct bn_job j = {.p = p, .x = x, .n = rows, .C = C, .m = m, .mean = mean};
    bn_statistic(be, &j, mean);
    j.sq = true;
    bn_statistic(be, &j, var);
    for (int64_t ch = 0; ch < C; ch++) rstd[ch] = dt_bn_rstd(var[ch], eps);
    j = (struct bn_job){
        .y = y, .x = x, .gamma = gamma, .beta = beta, .mean = mean, .rstd = rstd, .C = C};
    dt_pool_run(dt_cpu(be)->pool, rows, 256, bn_out_part, &j);
    return DT_OK;
}

enum dt_status dt_cpu_batchnorm_backward(struct dt_backend *be, float *dx, float *gx,
                                         const float *dy, const float *x, const float *mean,
                                         const float *var, const float *gamma, int64_t rows,
                                         int64_t C, float eps, const struct dt_policy *pol)
{
    const int64_t m = dt_reduce_chunks(rows);
    float *p = dt_cpu_scratch(be, (size_t)((2 * m + 4) * C));
    float *rstd = p + 2 * m * C, *a = rstd + C, *b = a + C, *k = b + C;
    for (int64_t ch = 0; ch < C; ch++) rstd[ch] = dt_bn_rstd(var[ch], eps);
    struct bn_job j = {
        .p = p, .x = x, .dy = dy, .mean = mean, .rstd = rstd, .n = rows, .C = C, .m = m};
    dt_pool_run(dt_cpu(be)->pool, m, 4, bn_grad_sums_part, &j);
    dt_reduce_tree_vectors(p, m, C, C);
    dt_reduce_tree_vectors(p + m * C, m, C, C);
    for (int64_t ch = 0; ch < C; ch++) {
        a[ch] = dt_bn_per_row(p[ch], rows);
        b[ch] = dt_bn_per_row(p[m * C + ch], rows);
        k[ch] = dt_bn_grad_scale(gamma[ch], rstd[ch]);
    }
    j = (struct bn_job){.y = dx,
                        .gx = gx,
                        .x = x,
                        .dy = dy,
                        .gamma = k,
                        .mean = mean,
                        .rstd = rstd,
                        .a = a,
                        .b = b,
                        .C = C};
    dt_pool_run(dt_cpu(be)->pool, rows, 256, bn_grad_part, &j);
    return DT_OK;
}

enum dt_status dt_cpu_batchnorm_inference(struct dt_backend *be, float *y, const float *x,
                                          const float *mean, const float *var, const float *gamma,
                                          const float *beta, int64_t rows, int64_t C, float eps,
                                          const struct dt_policy *pol)
{
    float *rstd = dt_cpu_scratch(be, (size_t)C);
    for (int64_t ch = 0; ch < C; ch++) rstd[ch] = dt_bn_rstd(var[ch], eps);
    struct bn_job j = {
        .y = y, .x = x, .gamma = gamma, .beta = beta, .mean = mean, .rstd = rstd, .C = C};
    dt_pool_run(dt_cpu(be)->pool, rows, 256, bn_out_part, &j);
    return DT_OK;
}

enum dt_status dt_cpu_batchnorm_running(struct dt_backend *be, float *rmean, float *rvar,
                                        const float *mean, const float *var, int64_t groups,
                                        int64_t stride, int64_t C, int64_t batch,
                                        int64_t per_example, float momentum,
                                        const struct dt_policy *pol)
{
    for (int64_t g = 0; g < groups; g++) {
        const int64_t n = dt_bn_group_rows(g, groups, batch, per_example);
        for (int64_t ch = 0; ch < C; ch++) {
            rmean[ch] = dt_bn_running(rmean[ch], mean[g * stride + ch], momentum);
            rvar[ch] = dt_bn_running(rvar[ch], dt_bn_unbiased(var[g * stride + ch], n), momentum);
        }
    }
    return DT_OK;
}
