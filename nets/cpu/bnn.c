/* Bayesian layers and epsilon on the CPU backend (nets/backend.h, "Bayesian layers").
 * Everything here is elementwise or per lane with a fixed operation order, so every
 * policy and thread count gives the same bits; `math` picks the softplus/exp used for
 * sigma (portable ones at `math: portable`). Epsilon always comes from the portable
 * transform of determinism/eps.h. */
#include <math.h>

#include "determinism/eps.h"
#include "determinism/portable_math.h"
#include "nets/cpu/cpu.h"

/* ---- epsilon ------------------------------------------------------------------------------ */

struct philox_job {
    float *eps;
    const struct dt_philox_stream *s;
};

static void philox_part(void *ctx, int64_t begin, int64_t end, int worker)
{
    const struct philox_job *j = ctx;
    dt_eps_philox_range(j->eps + begin, begin, end, j->s);
}

/* portable: a pure function of (stream, element index). */
enum dt_status dt_cpu_eps_philox(struct dt_backend *be, float *eps, int64_t n,
                                 const struct dt_philox_stream *s, const struct dt_policy *pol)
{
    struct philox_job job = {eps, s};
    dt_pool_run(dt_cpu(be)->pool, n, 4096, philox_part, &job);
    return DT_OK;
}

struct lanes_job {
    float *eps;
    struct dt_xoro *lanes;
    int64_t n, P, skip_lane;
    uint64_t seed;
    uint32_t step, member, sample;
    bool backward;
};

static void seed_part(void *ctx, int64_t begin, int64_t end, int worker)
{
    const struct lanes_job *j = ctx;
    for (int64_t l = begin; l < end; l++)
        j->lanes[l] = dt_eps_lane_seed(j->seed, j->step, j->member, j->sample, (uint64_t)l);
}

/* portable: a pure function of (seed, step, member, sample, lane). */
enum dt_status dt_cpu_eps_lfsr_seed(struct dt_backend *be, struct dt_xoro *lanes, int64_t P,
                                    uint64_t seed, uint32_t step, uint32_t member,
                                    uint32_t sample, const struct dt_policy *pol)
{
    struct lanes_job job = {.lanes = lanes, .P = P, .seed = seed, .step = step,
                            .member = member, .sample = sample};
    dt_pool_run(dt_cpu(be)->pool, P, 256, seed_part, &job);
    return DT_OK;
}

static void walk_part(void *ctx, int64_t begin, int64_t end, int worker)
{
    const struct lanes_job *j = ctx;
    for (int64_t l = begin; l < end; l++) {
        if (j->backward) {
            dt_eps_lane_backward(j->eps, j->n, j->P, l, &j->lanes[l]);
        } else {
            dt_eps_lane_forward(j->eps, j->n, j->P, l, &j->lanes[l]);
            if (l == j->skip_lane) dt_xoro_prev(&j->lanes[l]); /* fault: one draw fewer */
        }
    }
}

/* portable: each lane walks its own chunk; lanes never share state. */
enum dt_status dt_cpu_eps_lfsr(struct dt_backend *be, float *eps, int64_t n,
                               struct dt_xoro *lanes, int64_t P, bool backward,
                               int64_t skip_lane, const struct dt_policy *pol)
{
    struct lanes_job job = {.eps = eps, .lanes = lanes, .n = n, .P = P,
                            .skip_lane = skip_lane, .backward = backward};
    int64_t steps = dt_eps_lane_steps(n, P);
    int64_t grain = steps >= 256 ? 1 : 256 / steps; /* ~256 generator steps per task at least */
    dt_pool_run(dt_cpu(be)->pool, P, grain, walk_part, &job);
    return DT_OK;
}

/* ---- Bayesian elementwise ops --------------------------------------------------------- */

struct bnn_job {
    float *a, *b;
    const float *c, *d, *e;
    float f0, f1, f2;
    bool flag;
};

static inline float softplus_libm(float x)
{
    return x > 20.0f ? x : log1pf(expf(x));
}

static void sigma_part(void *ctx, int64_t begin, int64_t end, int worker)
{
    const struct bnn_job *j = ctx;
    float *restrict sigma = j->a, *restrict dsigma = j->b;
    const float *restrict rho = j->c;
    if (j->flag) { /* math: portable */
        for (int64_t i = begin; i < end; i++) {
            sigma[i] = dt_softplus_portable(rho[i]);
            dsigma[i] = 1.0f / (1.0f + dt_exp_portable(-rho[i]));
        }
    } else {
        for (int64_t i = begin; i < end; i++) {
            sigma[i] = softplus_libm(rho[i]);
            dsigma[i] = 1.0f / (1.0f + expf(-rho[i]));
        }
    }
}

/* portable at `math: portable` (own softplus and exp); run_to_run otherwise (libm). */
enum dt_status dt_cpu_bnn_sigma(struct dt_backend *be, float *sigma, float *dsigma,
                                const float *rho, int64_t n, const struct dt_policy *pol)
{
    struct bnn_job job = {.a = sigma, .b = dsigma, .c = rho, .flag = pol->math == DT_MATH_PORTABLE};
    dt_pool_run(dt_cpu(be)->pool, n, 4096, sigma_part, &job);
    return DT_OK;
}

DT_VECTOR_CLONES
static void sample_part(void *ctx, int64_t begin, int64_t end, int worker)
{
    const struct bnn_job *j = ctx;
    float *restrict w = j->a;
    const float *restrict mu = j->c, *restrict sigma = j->d, *restrict eps = j->e;
    for (int64_t i = begin; i < end; i++) w[i] = mu[i] + sigma[i] * eps[i];
}

/* portable: one product and one sum per element. */
enum dt_status dt_cpu_bnn_sample(struct dt_backend *be, float *w, const float *mu,
                                 const float *sigma, const float *eps, int64_t n,
                                 const struct dt_policy *pol)
{
    struct bnn_job job = {.a = w, .c = mu, .d = sigma, .e = eps};
    dt_pool_run(dt_cpu(be)->pool, n, 16384, sample_part, &job);
    return DT_OK;
}

struct acc_job {
    float *gmu, *grho;
    const float *g, *eps, *dsigma;
    bool first;
};

DT_VECTOR_CLONES
static void acc_part(void *ctx, int64_t begin, int64_t end, int worker)
{
    const struct acc_job *j = ctx;
    float *restrict gmu = j->gmu, *restrict grho = j->grho;
    const float *restrict g = j->g, *restrict eps = j->eps, *restrict ds = j->dsigma;
    if (j->first) {
        for (int64_t i = begin; i < end; i++) {
            gmu[i] = g[i];
            grho[i] = (g[i] * eps[i]) * ds[i];
        }
    } else {
        for (int64_t i = begin; i < end; i++) {
            gmu[i] = gmu[i] + g[i];
            grho[i] = grho[i] + (g[i] * eps[i]) * ds[i];
        }
    }
}

/* portable: elementwise, fixed operation order; samples are added in the caller's order. */
enum dt_status dt_cpu_bnn_accumulate(struct dt_backend *be, float *gmu, float *grho,
                                     const float *g, const float *eps, const float *dsigma,
                                     int64_t n, bool first, const struct dt_policy *pol)
{
    struct acc_job job = {gmu, grho, g, eps, dsigma, first};
    dt_pool_run(dt_cpu(be)->pool, n, 16384, acc_part, &job);
    return DT_OK;
}

struct finish_job {
    float *gmu, *grho;
    const float *mu, *sigma, *dsigma;
    float inv_s, klw, inv_prior_var;
};

static void finish_part(void *ctx, int64_t begin, int64_t end, int worker)
{
    const struct finish_job *j = ctx;
    float *restrict gmu = j->gmu, *restrict grho = j->grho;
    const float *restrict mu = j->mu, *restrict sigma = j->sigma, *restrict ds = j->dsigma;
    const float inv_s = j->inv_s, klw = j->klw, ipv = j->inv_prior_var;
    for (int64_t i = begin; i < end; i++) {
        float s = sigma[i];
        gmu[i] = gmu[i] * inv_s + klw * (mu[i] * ipv);
        float dkl = (s * ipv - 1.0f / s) * ds[i];
        grho[i] = grho[i] * inv_s + klw * dkl;
    }
}

/* portable: elementwise, fixed operation order (1 / prior_var is rounded once, here). */
enum dt_status dt_cpu_bnn_finish(struct dt_backend *be, float *gmu, float *grho, const float *mu,
                                 const float *sigma, const float *dsigma, int64_t n,
                                 float inv_samples, float kl_weight, float prior_var,
                                 const struct dt_policy *pol)
{
    struct finish_job job = {gmu, grho, mu, sigma, dsigma, inv_samples, kl_weight,
                             1.0f / prior_var};
    dt_pool_run(dt_cpu(be)->pool, n, 16384, finish_part, &job);
    return DT_OK;
}
