/* The optimizers on the CPU backend, for every model: SGD with momentum and weight decay,
 * AdamW, and clipping by the global norm (the norm under `reduction`, then one factor).
 * Every element through nets/optim_elem.h, the CUDA kernels' functions too, so the updates
 * give the same bits under every policy and thread count. */
#include <float.h>

#include "determinism/fixed_point.h"
#include "determinism/reduce.h"
#include "nets/cpu/cpu.h"
#include "nets/cpu/fixed_lanes.h"
#include "nets/optim_elem.h"

struct sgd_job {
    float *w, *v;
    const float *g;
    float lr, momentum, wd;
};

DT_VECTOR_PART(sgd_part)
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

/* ---- AdamW -------------------------------------------------------------------------------- */

struct adamw_job {
    float *w, *m, *v;
    const float *g;
    const struct dt_adamw_step *s;
};

/* Vectorised across elements (restrict, the step's constants in locals), each element
 * dt_adamw_elem's roundings. */
DT_VECTOR_PART(adamw_part)
{
    const struct adamw_job *j = ctx;
    float *restrict w = j->w, *restrict m = j->m, *restrict v = j->v;
    const float *restrict g = j->g;
    const struct dt_adamw_step s = *j->s;
    if (s.weight_decay != 0.0f)
        for (int64_t i = begin; i < end; i++) dt_adamw_elem_(&w[i], &m[i], &v[i], g[i], &s, true);
    else
        for (int64_t i = begin; i < end; i++) dt_adamw_elem_(&w[i], &m[i], &v[i], g[i], &s, false);
}

/* portable: elementwise (dt_adamw_elem). */
enum dt_status dt_cpu_adamw_update(struct dt_backend *be, float *w, float *m, float *v,
                                   const float *g, int64_t n, const struct dt_adamw_step *s,
                                   const struct dt_policy *pol)
{
    struct adamw_job j = {.w = w, .m = m, .v = v, .g = g, .s = s};
    dt_pool_run(dt_cpu(be)->pool, n, 8192, adamw_part, &j);
    return DT_OK;
}

/* ---- clipping by the global norm ---------------------------------------------------------- */

struct norm_job {
    const float *g;
    int64_t n;
    float *chunks; /* fixed: one partial per DT_REDUCE_CHUNK squares */
    float *total;  /* unordered: the arrival-order sum */
    int64_t *acc;  /* exact: per-worker int64 sums */
    int shift;
    double scale; /* exact: 2^shift */
};

static void norm_fixed_part(void *ctx, int64_t begin, int64_t end, int worker)
{
    const struct norm_job *j = ctx;
    for (int64_t c = begin; c < end; c++) {
        const int64_t e = (c + 1) * DT_REDUCE_CHUNK < j->n ? (c + 1) * DT_REDUCE_CHUNK : j->n;
        j->chunks[c] = dt_sq_sum(j->g, c * DT_REDUCE_CHUNK, e);
    }
}

typedef float v8f __attribute__((vector_size(32)));

/* reduction unordered (no order promised): the squares of g[begin, end) in 32 lanes, four
 * 8-float accumulators, then the lanes and the tail -- not dt_sq_sum's one serial chain,
 * whose adds wait on each other (it was 0.74x slower than the fixed chunks). */
DT_VECTOR_FN_RET(float, sq_sum_lanes, (const float *g, int64_t begin, int64_t end), (g, begin, end))
{
    v8f a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0}, x0, x1, x2, x3;
    int64_t i = begin;
    for (; i + 32 <= end; i += 32) {
        memcpy(&x0, g + i, sizeof x0), memcpy(&x1, g + i + 8, sizeof x1);
        memcpy(&x2, g + i + 16, sizeof x2), memcpy(&x3, g + i + 24, sizeof x3);
        a0 = a0 + x0 * x0, a1 = a1 + x1 * x1, a2 = a2 + x2 * x2, a3 = a3 + x3 * x3;
    }
    const v8f a = (a0 + a1) + (a2 + a3);
    float s = 0.0f;
    for (int l = 0; l < 8; l++) s = s + a[l];
    return s + dt_sq_sum(g, i, end);
}

static void norm_unordered_part(void *ctx, int64_t begin, int64_t end, int worker)
{
    const struct norm_job *j = ctx;
    dt_cpu_atomic_add_float(j->total, sq_sum_lanes(j->g, begin, end));
}

/* The int64 sum of round(g[i]^2 * 2^shift) over [begin, end): every square within the
 * shift's bound (|g|^2 <= max_sq), so the bounded conversions apply -- 4 lanes at a time
 * (fixed_lanes.h), the rest one by one -- dt_fixed_from_float's values (fixed_point.h;
 * tests/test_fixed_point.c, tests/test_exact.c); integer sums, so any grouping. */
DT_VECTOR_FN_RET(int64_t, sq_fixed_sum, (const float *g, int64_t begin, int64_t end, double scale),
                 (g, begin, end, scale))
{
    const v4d up = {scale, scale, scale, scale};
    v4i a = {0}, q;
    int64_t i = begin;
    for (; i + 4 <= end; i += 4) {
        v4f x;
        memcpy(&x, g + i, sizeof x);
        to_fixed4_of(&q, x * x, &up), a += q;
    }
    int64_t acc = a[0] + a[1] + a[2] + a[3];
    for (; i < end; i++) acc += dt_fixed_from_float_bounded(dt_rn_mul(g[i], g[i]), scale);
    return acc;
}

static void norm_exact_part(void *ctx, int64_t begin, int64_t end, int worker)
{
    const struct norm_job *j = ctx;
    const int64_t acc = sq_fixed_sum(j->g, begin, end, j->scale);
    __atomic_fetch_add(j->acc, acc, __ATOMIC_RELAXED); /* integers: any order */
}

enum dt_status dt_cpu_grad_norm(struct dt_backend *be, float *norm_sq, const float *const *g,
                                const int64_t *n, int count, const struct dt_policy *pol)
{
    struct dt_cpu_ctx *c = dt_cpu(be);
    if (dt_reduction_exact(pol)) {
        /* one scale for every square: the largest |g| and the count of all terms */
        float max_abs = 0.0f, m;
        int64_t total = 0, bad;
        for (int i = 0; i < count; i++) {
            if (!dt_cpu_max_abs(be, g[i], n[i], &m, &bad)) {
                *norm_sq = NAN; /* the non-finite scan names the tensor */
                return DT_OK;
            }
            max_abs = m > max_abs ? m : max_abs;
            total += n[i];
        }
        const float max_sq = max_abs * max_abs;
        if (!(max_sq <= FLT_MAX)) {
            *norm_sq = INFINITY;
            return DT_OK;
        }
        int64_t acc = 0;
        struct norm_job j = {.acc = &acc, .shift = dt_fixed_shift_for(max_sq, total)};
        j.scale = dt_fixed_scale(j.shift);
        for (int i = 0; i < count; i++) {
            j.g = g[i], j.n = n[i];
            dt_pool_run(c->pool, n[i], 4096, norm_exact_part, &j);
        }
        *norm_sq = dt_fixed_to_float(acc, j.shift);
        return DT_OK;
    }
    float sum = 0.0f;
    for (int i = 0; i < count; i++) {
        if (n[i] <= 0) continue;
        struct norm_job j = {.g = g[i], .n = n[i]};
        if (dt_reduction_ordered(pol)) {
            const int64_t m = dt_reduce_chunks(n[i]);
            j.chunks = dt_cpu_scratch(be, (size_t)m);
            dt_pool_run(c->pool, m, 64, norm_fixed_part, &j);
            dt_reduce_tree_vectors(j.chunks, m, 1, 1);
            sum += j.chunks[0];
            continue;
        }
        float t = 0.0f;
        j.total = &t;
        if (c->forced_order) { /* test hook: the chunks serially, in a drawn order */
            const int64_t m = (n[i] + DT_UNORDERED_CHUNK - 1) / DT_UNORDERED_CHUNK;
            int64_t *perm = dt_xmalloc((size_t)m * sizeof *perm);
            dt_forced_permutation(perm, m, c->forced_order, DT_FORCED_SUMMANDS);
            for (int64_t k = 0; k < m; k++) {
                const int64_t b = perm[k] * DT_UNORDERED_CHUNK;
                norm_unordered_part(
                    &j, b, b + DT_UNORDERED_CHUNK < n[i] ? b + DT_UNORDERED_CHUNK : n[i], 0);
            }
            free(perm);
        } else {
            dt_pool_run(c->pool, n[i], 4096, norm_unordered_part, &j);
        }
        sum += t;
    }
    *norm_sq = sum;
    return DT_OK;
}

struct clip_job {
    float *g;
    float f;
};

static void clip_part(void *ctx, int64_t begin, int64_t end, int worker)
{
    const struct clip_job *j = ctx;
    const float f = j->f;
    for (int64_t i = begin; i < end; i++) j->g[i] *= f;
}

/* portable: elementwise, one factor (dt_clip_coef). */
enum dt_status dt_cpu_clip_scale(struct dt_backend *be, float *g, int64_t n, const float *norm_sq,
                                 float max_norm, const struct dt_policy *pol)
{
    const float f = dt_clip_coef(*norm_sq, max_norm);
    if (f == 1.0f) return DT_OK;
    struct clip_job j = {.g = g, .f = f};
    dt_pool_run(dt_cpu(be)->pool, n, 8192, clip_part, &j);
    return DT_OK;
}
