/* reduction: exact on the CPU backend: the exact sum of the canonical shards' gradient
 * partials (nets/backend.h, dt_exact_*; DESIGN.md "reduction"), and the per-shard dense
 * weight gradient in one fork of the pool (dense_backward_weight under the shards).
 *
 *   exact_max        per tensor, the max |bits| over its partials: workers scan slices of
 *                    the pack into their own maxima, merged after (max is order-free).
 *   exact_to_fixed   per element, the int64 sum of its partials at the tensor's shift;
 *   exact_round      the one rounding back to float;
 *   exact_sum        both in one pass, for one process holding every shard. Elements are
 *                    split over the workers; each element is owned by one of them and its
 *                    integer sum is exact, so any split gives the same bits. */
#include <string.h>

#include "determinism/fixed_point.h"
#include "nets/cpu/cpu.h"

#define EXACT_GRAIN 2048 /* elements per slice of the pack */

/* Tensor i of the layout holding flat element e (first[i] <= e < first[i + 1]). */
static int tensor_of(const struct dt_exact_layout *L, int64_t e, int hint)
{
    int i = hint;
    while (e >= L->first[i + 1]) i++;
    return i;
}

struct exact_job {
    struct dt_backend *be;
    const struct dt_exact_layout *L;
    const float *pack;
    float *out;            /* exact_sum / exact_round: the pack (slot 0 written) */
    int64_t *acc;          /* exact_to_fixed / exact_round */
    const uint32_t *max_bits;
    bool used[DT_CPU_MAX_THREADS];
};

/* exact_max over flat partial indices [begin, end) of the pack (tensor-major). */
static void max_part(void *ctx, int64_t begin, int64_t end, int worker)
{
    struct exact_job *j = ctx;
    const struct dt_exact_layout *L = j->L;
    uint32_t *mine = (uint32_t *)dt_cpu_worker_buffer(j->be, worker, (size_t)L->tensors);
    memset(mine, 0, (size_t)L->tensors * sizeof *mine);
    int i = 0;
    while (begin >= L->slots * L->first[i + 1]) i++;
    for (int64_t p = begin; p < end;) {
        while (p >= L->slots * L->first[i + 1]) i++;
        const int64_t stop = end < L->slots * L->first[i + 1] ? end : L->slots * L->first[i + 1];
        uint32_t mb = mine[i];
        for (; p < stop; p++) {
            uint32_t b = dt_float_bits(j->pack[p]) & 0x7fffffffu;
            mb = b > mb ? b : mb;
        }
        mine[i] = mb;
    }
    j->used[worker] = true;
}

enum dt_status dt_cpu_exact_max(struct dt_backend *be, uint32_t *max_bits, const float *pack,
                                    const struct dt_exact_layout *L)
{
    struct dt_cpu_ctx *c = dt_cpu(be);
    struct exact_job j = {.be = be, .L = L, .pack = pack};
    const int T = dt_pool_threads(c->pool);
    dt_pool_run(c->pool, L->slots * L->first[L->tensors], 4 * EXACT_GRAIN, max_part, &j);
    memset(max_bits, 0, (size_t)L->tensors * sizeof *max_bits);
    for (int t = 0; t < T; t++) {
        if (!j.used[t]) continue;
        const uint32_t *m = (const uint32_t *)c->worker_buf[t];
        for (int i = 0; i < L->tensors; i++) max_bits[i] = m[i] > max_bits[i] ? m[i] : max_bits[i];
    }
    return DT_OK;
}

static inline bool finite_max(uint32_t bits) { return bits < 0x7f800000u; }

/* Elements [begin, end) (flat, over every tensor's first[] range): their int64 sums
 * over the held slots, then (out) the rounding into slot 0 or (acc) the sums kept. */
DT_VECTOR_CLONES
static void sum_part(void *ctx, int64_t begin, int64_t end, int worker)
{
    (void)worker;
    struct exact_job *j = ctx;
    const struct dt_exact_layout *L = j->L;
    int i = tensor_of(L, begin, 0);
    for (int64_t e = begin; e < end; i++) {
        const int64_t stop = end < L->first[i + 1] ? end : L->first[i + 1];
        if (!finite_max(j->max_bits[i])) { /* left as it is; the caller names it */
            e = stop;
            continue;
        }
        const int shift = dt_fixed_shift_for(dt_bits_float(j->max_bits[i]), L->shards);
        const double up = dt_fixed_scale(shift), down = dt_fixed_scale(-shift);
        const int64_t n = L->n[i];
        const float *base = j->pack + L->slots * L->first[i] - L->first[i];
        float *out = j->out ? j->out + L->slots * L->first[i] - L->first[i] : NULL;
        /* |partial| <= max and S terms: no partial sum overflows (fixed_point.h) */
        for (; e < stop; e++) {
            int64_t a = 0;
            for (int64_t k = 0; k < L->slots; k++)
                a += dt_fixed_from_float_bounded(base[e + k * n], up);
            if (out)
                out[e] = dt_fixed_to_float_bounded(a, down);
            else
                j->acc[e] = a;
        }
    }
}

/* Elements [begin, end): slot 0 = acc rounded once. */
static void round_part(void *ctx, int64_t begin, int64_t end, int worker)
{
    (void)worker;
    struct exact_job *j = ctx;
    const struct dt_exact_layout *L = j->L;
    int i = tensor_of(L, begin, 0);
    for (int64_t e = begin; e < end; i++) {
        const int64_t stop = end < L->first[i + 1] ? end : L->first[i + 1];
        if (!finite_max(j->max_bits[i])) {
            e = stop;
            continue;
        }
        const int shift = dt_fixed_shift_for(dt_bits_float(j->max_bits[i]), L->shards);
        const double down = dt_fixed_scale(-shift);
        float *out = j->out + L->slots * L->first[i] - L->first[i];
        for (; e < stop; e++) out[e] = dt_fixed_to_float_bounded(j->acc[e], down);
    }
}

enum dt_status dt_cpu_exact_to_fixed(struct dt_backend *be, int64_t *acc, const float *pack,
                                         const uint32_t *max_bits, const struct dt_exact_layout *L)
{
    struct exact_job j = {.be = be, .L = L, .pack = pack, .acc = acc, .max_bits = max_bits};
    dt_pool_run(dt_cpu(be)->pool, L->first[L->tensors], EXACT_GRAIN, sum_part, &j);
    return DT_OK;
}

enum dt_status dt_cpu_exact_round(struct dt_backend *be, float *pack, const int64_t *acc,
                                      const uint32_t *max_bits, const struct dt_exact_layout *L)
{
    struct exact_job j = {.be = be, .L = L, .out = pack, .acc = (int64_t *)acc,
                          .max_bits = max_bits};
    dt_pool_run(dt_cpu(be)->pool, L->first[L->tensors], EXACT_GRAIN, round_part, &j);
    return DT_OK;
}

enum dt_status dt_cpu_exact_sum(struct dt_backend *be, float *pack, const uint32_t *max_bits,
                                    const struct dt_exact_layout *L)
{
    struct exact_job j = {.be = be, .L = L, .pack = pack, .out = pack, .max_bits = max_bits};
    dt_pool_run(dt_cpu(be)->pool, L->first[L->tensors], EXACT_GRAIN, sum_part, &j);
    return DT_OK;
}
