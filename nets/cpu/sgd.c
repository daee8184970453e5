/* SGD with momentum and weight decay on the CPU backend: elementwise (nets/optim_elem.h,
 * the CUDA kernel's function too), so every policy and thread count gives the same bits. */
#include "nets/cpu/cpu.h"
#include "nets/optim_elem.h"

struct sgd_job {
    float *w, *v;
    const float *g;
    float lr, momentum, wd;
};

DT_VECTOR_CLONES
static void sgd_part(void *ctx, int64_t begin, int64_t end, int worker)
{
    const struct sgd_job *j = ctx;
    float *restrict w = j->w, *restrict v = j->v;
    const float *restrict g = j->g;
    const float lr = j->lr, mom = j->momentum, wd = j->wd;
    for (int64_t i = begin; i < end; i++) dt_sgd_elem(&w[i], &v[i], g[i], lr, mom, wd);
}

/* portable: elementwise, fixed operation order (see backend.h). */
enum dt_status dt_cpu_sgd_update(struct dt_backend *be, float *w, float *v, const float *g,
                                 int64_t n, float lr, float momentum, float weight_decay,
                                 const struct dt_policy *pol)
{
    struct sgd_job job = {
        .w = w, .v = v, .g = g, .lr = lr, .momentum = momentum, .wd = weight_decay};
    dt_pool_run(dt_cpu(be)->pool, n, 8192, sgd_part, &job);
    return DT_OK;
}
