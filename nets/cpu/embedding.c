/* The embedding on the CPU backend (the formulas: nets/gpt_elem.h, dt_gpt_token and
 * dt_embed_elem, the ones a CUDA kernel calls). The forward is one worker per row, so the
 * thread count changes speed, not bits. The gradient is a scatter-add into the table:
 * under `atomics: float` rows are split over the workers and added by compare-and-swap in
 * arrival order, as a GPU's atomicAdd does -- the nondeterministic baseline; `fixed_point`
 * sums every entry exactly in int64 and rounds once. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "determinism/fixed_point.h"
#include "determinism/streams.h"
#include "nets/cpu/cpu.h"
#include "nets/cpu/fixed_lanes.h"
#include "nets/gpt_elem.h"

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
    float *sums;  /* fixed point: acc rounded, (V, D) */
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

/* atomics: fixed_point -- worker owns columns [begin, end) of every entry: exact sums, the
 * terms converted 4 lanes at a time (fixed_lanes.h: dt_fixed_from_float_bounded's values,
 * which are dt_fixed_from_float's in the shift's range), the rest one by one. */
DT_VECTOR_PART(scatter_fixed_part)
{
    const struct scatter_job *j = ctx;
    const double scale = dt_fixed_scale(j->shift);
    const v4d up = {scale, scale, scale, scale};
    for (int64_t r = 0; r < j->rows; r++) {
        int64_t *acc = j->acc + (int64_t)j->tokens[r] * j->D;
        const float *src = j->dh + r * j->D;
        add_fixed_run(acc + begin, src + begin, end - begin, &up); /* rows max 2^shift < 2^62 */
    }
}

/* Entries [begin, end) rounded once (dt_fixed_to_float's values), 4 lanes at a time. */
DT_VECTOR_PART(round_fixed_part)
{
    const struct scatter_job *j = ctx;
    const double dn = dt_fixed_scale(-j->shift);
    const v4d down = {dn, dn, dn, dn};
    round_fixed_run(j->sums + begin, j->acc + begin, end - begin, &down);
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
    /* the backend's grown partials buffer: no fresh pages each step */
    j.acc = (int64_t *)dt_cpu_partials(be, (size_t)(2 * V * D));
    memset(j.acc, 0, (size_t)(V * D) * sizeof *j.acc);
    dt_pool_run(c->pool, D, 4, scatter_fixed_part, &j);
    j.sums = dt_cpu_scratch(be, (size_t)(V * D));
    dt_pool_run(c->pool, V * D, 4096, round_fixed_part, &j);
    enum dt_status st = DT_OK;
    for (int64_t e = 0; e < V * D; e++) {
        const float s = j.sums[e];
        if ((dt_float_bits(s) & 0x7fffffffu) >= 0x7f800000u) {
            st = dt_backend_op_error(be, DT_ERR_NUMERIC,
                                     "fixed-point sum of token %lld, column %lld overflows the "
                                     "float range",
                                     (long long)(e / D), (long long)(e % D));
            break;
        }
        dwte[e] = accumulate ? dwte[e] + s : s;
    }
    return st;
}
