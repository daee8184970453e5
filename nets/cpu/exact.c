/* reduction: exact on the CPU backend: the exact sum of the canonical shards' gradient
 * partials (nets/backend.h, dt_exact_*; DESIGN.md "reduction"). The per-shard batch
 * reductions themselves are the plain ops, called once per shard by nets/backend.c.
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
static int tensor_of(const struct dt_exact_layout *L, int64_t e)
{
    int i = 0;
    while (e >= L->first[i + 1]) i++;
    return i;
}

struct exact_job {
    struct dt_backend *be;
    const struct dt_exact_layout *L;
    const float *pack;
    float *out;            /* exact_sum / exact_round: the pack (slot 0 written) */
    int64_t *acc;          /* exact_to_fixed: written; exact_round (pack NULL): read */
    const uint32_t *max_bits;
    bool used[DT_CPU_MAX_THREADS];
};

typedef uint32_t v8u __attribute__((vector_size(32)));
typedef float v4f __attribute__((vector_size(16)));
typedef double v4d __attribute__((vector_size(32)));
typedef int64_t v4i __attribute__((vector_size(32)));
typedef uint64_t v4u __attribute__((vector_size(32))); /* wrapping arithmetic */

/* max |bits| over p[0, n), 8 lanes at a time (max is order-free). */
DT_VECTOR_CLONES
static uint32_t max_bits_of(const float *p, int64_t n, uint32_t mb)
{
    v8u m = {0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        v8u b;
        memcpy(&b, p + i, sizeof b);
        b &= 0x7fffffffu;
        const v8u gt = (v8u)(m > b);
        m = (m & gt) | (b & ~gt);
    }
    for (int l = 0; l < 8; l++) mb = m[l] > mb ? m[l] : mb;
    for (; i < n; i++) {
        uint32_t b = dt_float_bits(p[i]) & 0x7fffffffu;
        mb = b > mb ? b : mb;
    }
    return mb;
}

/* round(x * 2^shift) for 4 finite partials with |x * 2^shift| < 2^62 (the shift's bound),
 * ties to even -- dt_fixed_from_float_bounded's value, by the double "magic number": below
 * 2^51 adding 1.5 * 2^52 rounds to an integer (the machine's mode: to nearest even) and
 * leaves it in the low bits; at 2^51 and above the product, 24 significant bits, is an
 * integer multiple of 2^28, converted as (x * 2^-28) the same way, then shifted back. */
static inline __attribute__((always_inline)) void to_fixed4(v4i *q, const float *p,
                                                           const v4d *up)
{
    const v4d magic = {0x1.8p52, 0x1.8p52, 0x1.8p52, 0x1.8p52};
    const v4d big = {0x1p51, 0x1p51, 0x1p51, 0x1p51};
    v4f x;
    memcpy(&x, p, sizeof x);
    const v4d v = __builtin_convertvector(x, v4d) * *up; /* exact */
    /* unsigned: in the lanes the other form serves, these wrap (and are discarded) */
    const v4i small_q = (v4i)((v4u)(v + magic) - (v4u)magic);
    const v4i large_q = (v4i)(((v4u)(v * 0x1p-28 + magic) - (v4u)magic) << 28);
    const v4d av = (v4d)((v4i)v & 0x7fffffffffffffffLL);
    const v4i is_small = (v4i)(av < big);
    *q = (small_q & is_small) | (large_q & ~is_small);
}

/* The floats nearest to a * 2^-shift for 4 int64 sums (|a| < 2^63), ties to even, down =
 * 2^-shift: dt_fixed_to_float_bounded's value in vector lanes. |a| below 2^52 converts to
 * double exactly (the magic number again); a larger one keeps its bits from 2^11 up with a
 * sticky bit for the rest -- the float's rounding point lies at 2^29 or higher there, so
 * halfway, below and above stay as they were -- and the power-of-two scale is exact. The
 * conversion to float is then the one rounding. */
static inline __attribute__((always_inline)) void to_float4(float *out, const v4i *acc,
                                                            const v4d *down)
{
    const v4d magic = {0x1p52, 0x1p52, 0x1p52, 0x1p52};
    const v4i a = *acc;
    const v4i sgn = a >> 63;
    const v4i u = (a ^ sgn) - sgn;
    const v4i large = (v4i)(u >= (int64_t)1 << 52);
    const v4i sticky = (v4i)((u & 2047) != 0) & 1;
    const v4i us = (((u >> 11) | sticky) & large) | (u & ~large);
    const v4d d = (v4d)(us | (v4i)magic) - magic; /* exact: us < 2^52 */
    const v4d big_scale = *down * 0x1p11;
    const v4d scale = (v4d)(((v4i)big_scale & large) | ((v4i)*down & ~large));
    const v4d val = (v4d)((v4i)(d * scale) | (sgn & INT64_MIN)); /* exact */
    const v4f f = __builtin_convertvector(val, v4f);
    memcpy(out, &f, sizeof f);
}

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
        mine[i] = max_bits_of(j->pack + p, stop - p, mine[i]);
        p = stop;
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

/* Elements [begin, end) (flat, over every tensor's first[] range): their int64 sums --
 * over the held slots of the pack, or read from acc when there is no pack (exact_round)
 * -- then rounded into slot 0 (out) or kept in acc (exact_to_fixed). The form of the
 * CUDA kernel (nets/cuda/exact.cu), 4 elements at a time. */
DT_VECTOR_CLONES
static void sum_part(void *ctx, int64_t begin, int64_t end, int worker)
{
    (void)worker;
    struct exact_job *j = ctx;
    const struct dt_exact_layout *L = j->L;
    int i = tensor_of(L, begin);
    for (int64_t e = begin; e < end; i++) {
        const int64_t stop = end < L->first[i + 1] ? end : L->first[i + 1];
        if (!finite_max(j->max_bits[i])) { /* left as it is; the caller names it */
            e = stop;
            continue;
        }
        const int shift = dt_fixed_shift_for(dt_bits_float(j->max_bits[i]), L->shards);
        const double up = dt_fixed_scale(shift), down = dt_fixed_scale(-shift);
        const int64_t n = L->n[i];
        const float *base = j->pack ? j->pack + L->slots * L->first[i] - L->first[i] : NULL;
        float *out = j->out ? j->out + L->slots * L->first[i] - L->first[i] : NULL;
        /* |partial| <= max and S terms: no partial sum overflows (fixed_point.h) */
        const v4d up4 = {up, up, up, up}, down4 = {down, down, down, down};
        for (; e + 4 <= stop; e += 4) { /* each element's slots in order */
            v4i a = {0};
            if (base) {
                for (int64_t k = 0; k < L->slots; k++) {
                    v4i q;
                    to_fixed4(&q, base + e + k * n, &up4);
                    a += q;
                }
            } else {
                memcpy(&a, j->acc + e, sizeof a);
            }
            if (out)
                to_float4(out + e, &a, &down4);
            else
                memcpy(j->acc + e, &a, sizeof a);
        }
        for (; e < stop; e++) {
            int64_t a = base ? 0 : j->acc[e];
            for (int64_t k = 0; base && k < L->slots; k++)
                a += dt_fixed_from_float_bounded(base[e + k * n], up);
            if (out)
                out[e] = dt_fixed_to_float_bounded(a, down);
            else
                j->acc[e] = a;
        }
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
    dt_pool_run(dt_cpu(be)->pool, L->first[L->tensors], EXACT_GRAIN, sum_part, &j);
    return DT_OK;
}

enum dt_status dt_cpu_exact_sum(struct dt_backend *be, float *pack, const uint32_t *max_bits,
                                const struct dt_exact_layout *L)
{
    struct exact_job j = {.be = be, .L = L, .pack = pack, .out = pack, .max_bits = max_bits};
    dt_pool_run(dt_cpu(be)->pool, L->first[L->tensors], EXACT_GRAIN, sum_part, &j);
    return DT_OK;
}
