/* Normalisation on the CPU backend: LayerNorm (the formulas: nets/gpt_elem.h, the lane
 * functions a CUDA warp calls), one worker per row, so the thread count changes speed, not
 * bits. */
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
