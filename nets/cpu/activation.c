/* The activations on the CPU backend (the formulas: nets/activation_elem.h). Elementwise, so
 * every policy gives the same bits. */
#include "nets/activation_elem.h"
#include "nets/cpu/cpu.h"

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
