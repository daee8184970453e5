/* The activations on the CPU backend: ReLU (nets/activation_elem.h), GELU, the residual add
 * (nets/gpt_elem.h) and dropout (determinism/dropout.h), each element the function a CUDA
 * kernel calls. Elementwise or per row, so the thread count changes speed, not bits; GELU's
 * tanh follows `math` (dt_math_own_elementary), the others give the same bits at every
 * policy. */
#include "determinism/dropout.h"
#include "nets/activation_elem.h"
#include "nets/cpu/cpu.h"
#include "nets/gpt_elem.h"

struct relu_job {
    float *out;
    const float *a, *b;
};

DT_VECTOR_PART(relu_forward_part)
{
    const struct relu_job *j = ctx;
    float *restrict y = j->out;
    const float *restrict x = j->a;
    for (int64_t i = begin; i < end; i++) y[i] = dt_relu(x[i]);
}

DT_VECTOR_PART(relu_backward_part)
{
    const struct relu_job *j = ctx;
    float *dx = j->out;
    const float *dy = j->a, *restrict y = j->b;
    for (int64_t i = begin; i < end; i++) dx[i] = dt_relu_grad(y[i], dy[i]);
}

/* portable: elementwise; NaN inputs give 0 (x > 0 is false for NaN) -- the NaN check on
 * losses and weights catches them upstream. */
enum dt_status dt_cpu_relu_forward(struct dt_backend *be, float *y, const float *x, int64_t n,
                                   const struct dt_policy *pol)
{
    struct relu_job job = {.out = y, .a = x, .b = NULL};
    dt_pool_run(dt_cpu(be)->pool, n, 4096, relu_forward_part, &job);
    return DT_OK;
}

/* portable: elementwise. The subgradient at 0 is 0. */
enum dt_status dt_cpu_relu_backward(struct dt_backend *be, float *dx, const float *dy,
                                    const float *y, int64_t n, const struct dt_policy *pol)
{
    struct relu_job job = {.out = dx, .a = dy, .b = y};
    dt_pool_run(dt_cpu(be)->pool, n, 4096, relu_backward_part, &job);
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
