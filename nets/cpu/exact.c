/* reduction: exact on the CPU backend: the exact sum of the canonical shards' gradient
 * partials (nets/backend.h, dt_exact_*; docs/DESIGN.md "reduction"). The partials come from
 * the shard ops (dense.c: bias and dense weight gradients) or from the plain ops called
 * once per shard by nets/dispatch.c.
 *
 *   exact_max        per tensor, the max |bits| over its partials: workers scan slices of
 *                    the pack into their own maxima, merged after (max is order-free).
 *   exact_to_fixed   per element, the int64 sum of its partials at the tensor's shift;
 *   exact_round      the one rounding back to float;
 *   exact_sum_packs  the same sum and rounding over several ranks' packs that this process
 *                    can read (the ranks of one machine: nets/step.c), for a range of
 *                    elements;
 *   exact_sum        both in one pass, for one process holding every shard. Elements are
 *                    split over the workers; each element is owned by one of them and its
 *                    integer sum is exact, so any split gives the same bits. 4 lanes at
 *                    a time (AVX2 or baseline), or 8 with AVX-512DQ: the same bits
 *                    (tests/test_exact.c runs both, ties included).
 * Here too: dt_cpu_max_abs, the max |v| scan (the same max-bits kernel) that the
 * fixed-point scatters (conv, pool, bias gradient) and check_finite use. */
#include <string.h>

#ifdef __x86_64__
#include <immintrin.h>
#endif

#include "determinism/fixed_point.h"
#include "nets/cpu/cpu.h"
#include "nets/cpu/fixed_lanes.h"

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
    float *out;   /* exact_sum / exact_round: the pack (slot 0 written) */
    int64_t *acc; /* exact_to_fixed: written; exact_round (pack NULL): read */
    const uint32_t *max_bits;
    /* exact_sum_packs: the packs (pack NULL), their slots, and the first element: element e
     * goes to out[e - e0], the job's indices counting from e0 */
    const float *const *packs;
    const int64_t *pack_slots;
    int n_packs;
    int64_t e0;
    bool used[DT_CPU_MAX_THREADS];
};

typedef int32_t v8s __attribute__((vector_size(32)));

/* The larger of two vectors of |bits| lane by lane: below 2^31, so signed lanes order them
 * as unsigned ones do (one compare, where an unsigned one costs three). */
static inline __attribute__((always_inline)) void max_lanes(v8s *m, const v8s *b)
{
    const v8s gt = *m > *b;
    *m = (*m & gt) | (*b & ~gt);
}

/* max |bits| over p[0, n), 32 lanes at a time in four maxima that do not wait on each other
 * (max is order-free), then 8, then one by one. */
DT_VECTOR_FN_RET(uint32_t, max_bits_of, (const float *p, int64_t n, uint32_t mb), (p, n, mb))
{
    v8s m[4] = {{0}, {0}, {0}, {0}};
    int64_t i = 0;
    for (; i + 32 <= n; i += 32)
        for (int k = 0; k < 4; k++) {
            v8s b;
            memcpy(&b, p + i + 8 * k, sizeof b);
            b &= 0x7fffffff;
            max_lanes(&m[k], &b);
        }
    for (; i + 8 <= n; i += 8) {
        v8s b;
        memcpy(&b, p + i, sizeof b);
        b &= 0x7fffffff;
        max_lanes(&m[0], &b);
    }
    max_lanes(&m[0], &m[1]), max_lanes(&m[2], &m[3]), max_lanes(&m[0], &m[2]);
    for (int l = 0; l < 8; l++) mb = (uint32_t)m[0][l] > mb ? (uint32_t)m[0][l] : mb;
    for (; i < n; i++) {
        uint32_t b = dt_float_bits(p[i]) & 0x7fffffffu;
        mb = b > mb ? b : mb;
    }
    return mb;
}

#ifdef DT_CPU_WIDE_KERNELS
/* The same, 16 lanes. */
DT_WIDE static uint32_t max_bits_wide(const float *p, int64_t n, uint32_t mb)
{
    __m512i m = _mm512_setzero_si512();
    const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        m = _mm512_max_epu32(m, _mm512_and_si512(_mm512_loadu_si512(p + i), abs_mask));
    const uint32_t v = _mm512_reduce_max_epu32(m);
    mb = v > mb ? v : mb;
    return max_bits_of(p + i, n - i, mb);
}
#endif

uint32_t dt_cpu_max_bits(const float *p, int64_t n, uint32_t mb)
{
#ifdef DT_CPU_WIDE_KERNELS
    if (dt_cpu_wide()) return max_bits_wide(p, n, mb);
#endif
    return max_bits_of(p, n, mb);
}

/* ---- the max |v| scan of the fixed-point paths and of check_finite ------------------ */

/* Largest |v| as a bit pattern (monotone for finite floats) over v[0, n); false and the
 * index of the first non-finite element in *bad otherwise. */
struct maxabs_job {
    const float *v;
    uint32_t worker_max[DT_CPU_MAX_THREADS];
    int64_t worker_bad[DT_CPU_MAX_THREADS];
};

static void maxabs_part(void *ctx, int64_t begin, int64_t end, int worker)
{
    struct maxabs_job *j = ctx;
    const uint32_t m = dt_cpu_max_bits(j->v + begin, end - begin, 0);
    int64_t bad = -1;
    if (m >= 0x7f800000u) /* a NaN or Inf is here: find the first */
        for (int64_t i = begin; i < end && bad < 0; i++)
            if ((dt_float_bits(j->v[i]) & 0x7fffffffu) >= 0x7f800000u) bad = i;
    j->worker_max[worker] = m;
    j->worker_bad[worker] = bad;
}

bool dt_cpu_max_abs(struct dt_backend *be, const float *v, int64_t n, float *max_abs, int64_t *bad)
{
    struct maxabs_job *j = dt_xmalloc(sizeof *j);
    j->v = v;
    const int T = dt_pool_threads(dt_cpu(be)->pool);
    for (int t = 0; t < T; t++) j->worker_max[t] = 0, j->worker_bad[t] = -1;
    dt_pool_run(dt_cpu(be)->pool, n, 4096, maxabs_part, j);
    uint32_t m = 0;
    *bad = -1;
    for (int t = 0; t < T; t++) {
        if (j->worker_max[t] > m) m = j->worker_max[t];
        if (j->worker_bad[t] >= 0 && (*bad < 0 || j->worker_bad[t] < *bad)) *bad = j->worker_bad[t];
    }
    free(j);
    *max_abs = dt_bits_float(m);
    return *bad < 0;
}

int64_t dt_cpu_first_nonfinite(struct dt_backend *be, const float *v, int64_t n)
{
    float max_abs;
    int64_t bad = -1;
    if (n > 0) (void)dt_cpu_max_abs(be, v, n, &max_abs, &bad);
    return bad;
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
        mine[i] = dt_cpu_max_bits(j->pack + p, stop - p, mine[i]);
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

/* One tensor's run of elements [e, stop) at its shift: their int64 sums -- over the held
 * slots of every pack (base[0, nb)), or read from acc when there are none (nb 0:
 * exact_round) -- then rounded into out or kept in acc (exact_to_fixed). */
struct sum_run {
    const float *base[DT_EXACT_PACKS_MAX]; /* element e's slot k of pack b at base[b][e + k * n] */
    int64_t slots[DT_EXACT_PACKS_MAX];
    int nb;
    float *out; /* element e's result at out[e], or NULL (acc kept) */
    int64_t *acc;
    int64_t n;
    double up, down; /* 2^shift, 2^-shift */
    int shift;
};

/* The vector part of a run: whole groups of lanes from e on; returns where it stopped. */
typedef int64_t (*sum_vector_fn)(const struct sum_run *r, int64_t e, int64_t stop);

/* Elements [e, stop) of a run one by one (fixed_point.h's scalar forms: the same bits). */
static void sum_scalar(const struct sum_run *r, int64_t e, int64_t stop)
{
    for (; e < stop; e++) {
        int64_t a = r->nb ? 0 : r->acc[e];
        for (int b = 0; b < r->nb; b++)
            for (int64_t k = 0; k < r->slots[b]; k++)
                a += dt_fixed_from_float_bounded(r->base[b][e + k * r->n], r->up);
        if (r->out) r->out[e] = dt_fixed_to_float_bounded(a, r->down);
        else r->acc[e] = a;
    }
}

/* The double shortcut's span test (sum8_double, dt_cpu_exact_spec_sums): nt terms pass where
 * the largest lies within this many binades of the smallest one's unit -- every partial sum,
 * below nt * 2^(max exponent + 1), is then a whole number of that unit under 2^53. */
static inline int double_span(int nt)
{
    int lg = 0;
    while ((1 << lg) < nt) lg++;
    return 29 - lg;
}

/* 4 lanes: the form of the CUDA kernel (nets/cuda/exact.cu). */
DT_VECTOR_FN_RET(int64_t, sum_vector4, (const struct sum_run *r, int64_t e, int64_t stop),
                 (r, e, stop))
{
    /* |partial| <= max and S terms: no partial sum overflows (fixed_point.h) */
    const v4d up4 = {r->up, r->up, r->up, r->up};
    const v4d down4 = {r->down, r->down, r->down, r->down};
    for (; e + 4 <= stop; e += 4) { /* each element's slots in order */
        v4i a = {0};
        if (r->nb) {
            for (int b = 0; b < r->nb; b++)
                for (int64_t k = 0; k < r->slots[b]; k++) {
                    v4i q;
                    to_fixed4(&q, r->base[b] + e + k * r->n, &up4);
                    a += q;
                }
        } else {
            memcpy(&a, r->acc + e, sizeof a);
        }
        if (r->out) to_float4(r->out + e, &a, &down4);
        else memcpy(r->acc + e, &a, sizeof a);
    }
    return e;
}

#ifdef DT_CPU_WIDE_KERNELS
/* sum_vector4 written out for AVX2: the same operations as to_fixed4_of and to_float4
 * (nets/cpu/fixed_lanes.h), lane for lane, so the same bits; what the generic vectors left
 * to the compiler -- each float group converted by two halves and an insert, the constants
 * and down * 2^11 rebuilt inside the loop -- done once. */
#define DT_AVX2 __attribute__((target("avx2")))
DT_AVX2 static inline __attribute__((always_inline)) __m256i to_fixed4_avx2(const float *p,
                                                                            __m256d up)
{
    const __m256d magic = _mm256_set1_pd(0x1.8p52);
    const __m256d v = _mm256_mul_pd(_mm256_cvtps_pd(_mm_loadu_ps(p)), up); /* exact */
    const __m256i small_q =
        _mm256_sub_epi64(_mm256_castpd_si256(_mm256_add_pd(v, magic)), _mm256_castpd_si256(magic));
    const __m256i large_q = _mm256_slli_epi64(
        _mm256_sub_epi64(
            _mm256_castpd_si256(_mm256_add_pd(_mm256_mul_pd(v, _mm256_set1_pd(0x1p-28)), magic)),
            _mm256_castpd_si256(magic)),
        28);
    const __m256d av = _mm256_andnot_pd(_mm256_set1_pd(-0.0), v);
    const __m256d is_small = _mm256_cmp_pd(av, _mm256_set1_pd(0x1p51), _CMP_LT_OQ);
    return _mm256_castpd_si256(
        _mm256_blendv_pd(_mm256_castsi256_pd(large_q), _mm256_castsi256_pd(small_q), is_small));
}

DT_AVX2 static inline __attribute__((always_inline)) void
to_float4_avx2(float *out, __m256i a, __m256d down, __m256d big_scale)
{
    const __m256i zero = _mm256_setzero_si256();
    const __m256i sgn = _mm256_cmpgt_epi64(zero, a);
    const __m256i u = _mm256_sub_epi64(_mm256_xor_si256(a, sgn), sgn); /* |a| < 2^63 */
    const __m256i large = _mm256_cmpgt_epi64(u, _mm256_set1_epi64x(((int64_t)1 << 52) - 1));
    const __m256i sticky =
        _mm256_andnot_si256(_mm256_cmpeq_epi64(_mm256_and_si256(u, _mm256_set1_epi64x(2047)), zero),
                            _mm256_set1_epi64x(1));
    const __m256i us =
        _mm256_blendv_epi8(u, _mm256_or_si256(_mm256_srli_epi64(u, 11), sticky), large);
    const __m256d magic = _mm256_set1_pd(0x1p52);
    const __m256d d = _mm256_sub_pd(
        _mm256_castsi256_pd(_mm256_or_si256(us, _mm256_castpd_si256(magic))), magic); /* exact */
    const __m256d scale = _mm256_blendv_pd(down, big_scale, _mm256_castsi256_pd(large));
    const __m256d val = _mm256_castsi256_pd(
        _mm256_or_si256(_mm256_castpd_si256(_mm256_mul_pd(d, scale)),
                        _mm256_and_si256(sgn, _mm256_set1_epi64x(INT64_MIN)))); /* exact */
    _mm_storeu_ps(out, _mm256_cvtpd_ps(val));
}

/* A shortcut with the same bits, for 8 elements whose terms t[i][e .. e + 8) (i < nt) are
 * all whole multiples of 2^-shift (so their conversion rounds nothing: a nonzero term's
 * biased exponent, 1 for a subnormal, at least e_floor = 150 - shift) and lie within
 * span_max = 29 - ceil(log2 nt) binades of the smallest one's unit (so every partial sum,
 * below nt * 2^(max exponent + 1), is a whole number of that unit under 2^53: a double,
 * exactly). Then the integer path's sum times 2^-shift is the terms' double sum, in any
 * order, and both round that same value once to the nearest float (to_float4_avx2's
 * reduction keeps it); the sum starts from +0.0, so terms that are all -0 give the integer
 * path's +0. About 5 operations an element where the integer path takes 16. Returns false,
 * writing nothing, where a lane fails either test: the integer path takes the group. */
/* The exponents of 8 elements' terms t[i][e .. e + 8) (i < nt), lane by lane: *emax the
 * largest biased exponent, *emin the smallest unit's (a nonzero term's biased exponent, 1
 * for a subnormal; 255 where every term is zero); *bmax (kept across calls) the largest
 * |bits| seen. */
DT_AVX2 static inline __attribute__((always_inline)) void
sum8_exponents(__m256i *emax, __m256i *emin, __m256i *bmax, const float *const *t, int nt,
               int64_t e)
{
    const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff), one = _mm256_set1_epi32(1);
    const __m256i none = _mm256_set1_epi32(255), zero = _mm256_setzero_si256();
    *emax = zero, *emin = none;
#pragma GCC unroll 16
    for (int i = 0; i < nt; i++) {
        const __m256i bits =
            _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(t[i] + e)), abs_mask);
        *bmax = _mm256_max_epi32(*bmax, bits); /* |bits| < 2^31: signed order */
        const __m256i ex = _mm256_srli_epi32(bits, 23);
        *emax = _mm256_max_epi32(*emax, ex);
        const __m256i unit =
            _mm256_blendv_epi8(_mm256_max_epi32(ex, one), none, _mm256_cmpeq_epi32(bits, zero));
        *emin = _mm256_min_epi32(*emin, unit);
    }
}

/* The 8 elements' double sums, rounded once, into out[e .. e + 8). */
DT_AVX2 static inline __attribute__((always_inline)) void
sum8_store(float *out, const float *const *t, int nt, int64_t e)
{
    __m256d lo = _mm256_setzero_pd(), hi = _mm256_setzero_pd();
#pragma GCC unroll 16
    for (int i = 0; i < nt; i++) {
        const __m256 x = _mm256_loadu_ps(t[i] + e);
        lo = _mm256_add_pd(lo, _mm256_cvtps_pd(_mm256_castps256_ps128(x))); /* exact */
        hi = _mm256_add_pd(hi, _mm256_cvtps_pd(_mm256_extractf128_ps(x, 1)));
    }
    _mm256_storeu_ps(out + e, _mm256_set_m128(_mm256_cvtpd_ps(hi), _mm256_cvtpd_ps(lo)));
}

/* A shortcut with the same bits, for 8 elements whose terms t[i][e .. e + 8) (i < nt) are
 * all whole multiples of 2^-shift (so their conversion rounds nothing: a nonzero term's
 * biased exponent, 1 for a subnormal, at least e_floor = 150 - shift) and lie within
 * span_max = 29 - ceil(log2 nt) binades of the smallest one's unit (so every partial sum,
 * below nt * 2^(max exponent + 1), is a whole number of that unit under 2^53: a double,
 * exactly). Then the integer path's sum times 2^-shift is the terms' double sum, in any
 * order, and both round that same value once to the nearest float (to_float4_avx2's
 * reduction keeps it); the sum starts from +0.0, so terms that are all -0 give the integer
 * path's +0. About 5 operations an element where the integer path takes 16. Returns false,
 * writing nothing, where a lane fails either test: the integer path takes the group. */
DT_AVX2 static inline __attribute__((always_inline)) bool
sum8_double(float *out, const float *const *t, int nt, int64_t e, __m256i span_max, __m256i e_floor)
{
    __m256i emax, emin, bmax = _mm256_setzero_si256();
    sum8_exponents(&emax, &emin, &bmax, t, nt, e);
    const __m256i bad = _mm256_or_si256(_mm256_cmpgt_epi32(_mm256_sub_epi32(emax, emin), span_max),
                                        _mm256_cmpgt_epi32(e_floor, emin));
    if (!_mm256_testz_si256(bad, bad)) return false;
    sum8_store(out, t, nt, e);
    return true;
}

/* The terms of a run (pack by pack, slot by slot): their bases, so that element e's are
 * t[i][e]; 0 where there are more than SUM8_TERMS_MAX or none (the shortcut is not taken). */
#define SUM8_TERMS_MAX 16
static int run_terms(const struct sum_run *r, const float **t)
{
    int nt = 0;
    for (int b = 0; b < r->nb; b++)
        for (int64_t k = 0; k < r->slots[b]; k++) {
            if (nt == SUM8_TERMS_MAX) return 0;
            t[nt++] = r->base[b] + k * r->n;
        }
    return nt;
}

/* The integer path for elements e .. e + 4 of a run's terms: their int64 sums, each
 * rounded once into out. */
DT_AVX2 static inline __attribute__((always_inline)) void
sum4_fixed(float *out, const float *const *t, int nt, int64_t e, __m256d up, __m256d down,
           __m256d big_scale)
{
    __m256i a = to_fixed4_avx2(t[0] + e, up);
    for (int i = 1; i < nt; i++) a = _mm256_add_epi64(a, to_fixed4_avx2(t[i] + e, up));
    to_float4_avx2(out + e, a, down, big_scale);
}

DT_AVX2 static int64_t sum_vector4_avx2x(const struct sum_run *r, int64_t e, int64_t stop)
{
    const __m256d up = _mm256_set1_pd(r->up), down = _mm256_set1_pd(r->down);
    const __m256d big_scale = _mm256_set1_pd(r->down * 0x1p11);
    const float *t[SUM8_TERMS_MAX];
    const int nt = r->out ? run_terms(r, t) : 0;
    if (nt > 0) { /* sums rounded: the shortcut where it holds, else the integer path */
        const __m256i span_max = _mm256_set1_epi32(double_span(nt));
        const __m256i e_floor = _mm256_set1_epi32(150 - r->shift);
        for (; e + 8 <= stop; e += 8)
            if (!sum8_double(r->out, t, nt, e, span_max, e_floor)) {
                sum4_fixed(r->out, t, nt, e, up, down, big_scale);
                sum4_fixed(r->out, t, nt, e + 4, up, down, big_scale);
            }
        for (; e + 4 <= stop; e += 4) sum4_fixed(r->out, t, nt, e, up, down, big_scale);
        return e;
    }
    /* the int64 sums kept (exact_to_fixed), read back and rounded (exact_round), or more
     * than SUM8_TERMS_MAX terms */
    for (; e + 4 <= stop; e += 4) {
        __m256i a = _mm256_setzero_si256();
        if (r->nb)
            for (int b = 0; b < r->nb; b++)
                for (int64_t k = 0; k < r->slots[b]; k++)
                    a = _mm256_add_epi64(a, to_fixed4_avx2(r->base[b] + e + k * r->n, up));
        else a = _mm256_loadu_si256((const __m256i *)(r->acc + e));
        if (r->out) to_float4_avx2(r->out + e, a, down, big_scale);
        else _mm256_storeu_si256((__m256i *)(r->acc + e), a);
    }
    return e;
}

/* to_fixed4 for 8 lanes with AVX-512DQ: the exact product converted straight to int64,
 * rounding to nearest even named in the instruction (|v| < 2^62: in range). */
DT_WIDE static inline __attribute__((always_inline)) __m512i to_fixed8(const float *p, __m512d up)
{
    const __m512d v = _mm512_mul_pd(_mm512_cvtps_pd(_mm256_loadu_ps(p)), up); /* exact */
    return _mm512_cvt_roundpd_epi64(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}

/* to_float4 for 8 lanes: the same sticky reduction above 2^52, then an exact int64 ->
 * double conversion, the exact power-of-two scale, and the one rounding to float (to
 * nearest even, named in the instruction). */
DT_WIDE static inline __attribute__((always_inline)) void to_float8(float *out, __m512i a,
                                                                    __m512d down)
{
    const __m512i u = _mm512_abs_epi64(a); /* |a| < 2^63 */
    const __mmask8 large = _mm512_cmpge_epu64_mask(u, _mm512_set1_epi64((int64_t)1 << 52));
    const __mmask8 sticky = _mm512_test_epi64_mask(u, _mm512_set1_epi64(2047));
    __m512i us = _mm512_srli_epi64(u, 11);
    us = _mm512_mask_or_epi64(us, sticky, us, _mm512_set1_epi64(1));
    us = _mm512_mask_blend_epi64(large, u, us);
    const __m512d d = _mm512_cvtepi64_pd(us); /* exact: us < 2^53 */
    const __m512d scale =
        _mm512_mask_blend_pd(large, down, _mm512_mul_pd(down, _mm512_set1_pd(0x1p11)));
    __m512d val = _mm512_mul_pd(d, scale); /* exact */
    const __mmask8 neg = _mm512_cmplt_epi64_mask(a, _mm512_setzero_si512());
    val = _mm512_mask_sub_pd(val, neg, _mm512_setzero_pd(), val);
    _mm256_storeu_ps(out,
                     _mm512_cvt_roundpd_ps(val, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

/* 8 lanes with AVX-512. */
DT_WIDE static int64_t sum_vector8(const struct sum_run *r, int64_t e, int64_t stop)
{
    const __m512d up8 = _mm512_set1_pd(r->up), down8 = _mm512_set1_pd(r->down);
    for (; e + 8 <= stop; e += 8) {
        __m512i a = _mm512_setzero_si512();
        if (r->nb)
            for (int b = 0; b < r->nb; b++)
                for (int64_t k = 0; k < r->slots[b]; k++)
                    a = _mm512_add_epi64(a, to_fixed8(r->base[b] + e + k * r->n, up8));
        else a = _mm512_loadu_si512(r->acc + e);
        if (r->out) to_float8(r->out + e, a, down8);
        else _mm512_storeu_si512(r->acc + e, a);
    }
    return e;
}

/* exact_sum in one read of the pack where the CPU has AVX2 but not AVX-512 (whose integer
 * path costs about what the shortcut's test does, after a maxima pass): the shortcut needs
 * the tensor's shift, so its maximum, which only the end of the read knows. Pass 1, per
 * group of 8 elements (a tensor's groups from its first element; its last one may be
 * short): the maximum of the terms' |bits| (per worker and tensor), and where the terms
 * pass the span test of sum8_double, their double sums written over slot 0, slot 0's terms
 * kept in `side` and the smallest unit's exponent in the group's `meta` (>= 1; 0: the group
 * was not written). Pass 2, with the maxima merged: a group whose meta is below its tensor's
 * e_floor = 150 - shift (sum8_double's other test: a term finer than 2^-shift), or 0, has
 * its slot 0 put back and takes the integer path (sum_vector4_avx2x, the scalar form for the
 * short group); a tensor whose maximum is not finite gets every written group put back and is
 * left as it was. The groups that pass both tests hold exactly sum8_double's values; the
 * rest sum_part's: the two passes' bits (tests/test_exact.c). */
struct one_pass_job {
    struct dt_backend *be;
    const struct dt_exact_layout *L;
    float *pack;
    float *side;              /* tensor i's slot 0 terms at side[first[i] + e] */
    uint8_t *meta;            /* per group */
    const int64_t *gfirst;    /* tensor i's groups [gfirst[i], gfirst[i + 1]) */
    const uint32_t *max_bits; /* pass 2 */
    bool used[DT_CPU_MAX_THREADS];
};

/* The smallest of 8 lanes. */
DT_AVX2 static inline __attribute__((always_inline)) int32_t hmin8(__m256i v)
{
    __m128i m = _mm_min_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    m = _mm_min_epi32(m, _mm_shuffle_epi32(m, 0x4e));
    return _mm_cvtsi128_si32(_mm_min_epi32(m, _mm_shuffle_epi32(m, 0xb1)));
}

DT_AVX2 static inline __attribute__((always_inline)) uint32_t hmax8(__m256i v)
{
    __m128i m = _mm_max_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    m = _mm_max_epi32(m, _mm_shuffle_epi32(m, 0x4e));
    return (uint32_t)_mm_cvtsi128_si32(_mm_max_epi32(m, _mm_shuffle_epi32(m, 0xb1)));
}

/* Pass 1 over groups [g0, g1) of tensor i, its nt = slots terms; returns the largest |bits|
 * (at least m). Inlined with nt a constant where it is 4 (4 shards on one rank): the terms'
 * loops unrolled, each term loaded once for both the test and the sum. */
DT_AVX2 static inline __attribute__((always_inline)) uint32_t
one_pass_run(struct one_pass_job *j, int i, int64_t g, int64_t stop, const int nt, __m256i span_max,
             uint32_t m)
{
    const struct dt_exact_layout *L = j->L;
    const int64_t n = L->n[i];
    float *const slot0 = j->pack + L->slots * L->first[i], *const side = j->side + L->first[i];
    uint8_t *const meta = j->meta + j->gfirst[i]; /* the tensor's groups from its first */
    const float *t[SUM8_TERMS_MAX];
    for (int k = 0; k < nt; k++) t[k] = slot0 + k * n;
    __m256i bmax = _mm256_setzero_si256();
    for (int64_t q = g - j->gfirst[i], q1 = stop - j->gfirst[i]; q < q1; q++) {
        const int64_t e = 8 * q;
        if (e + 8 > n) { /* the short group: its maximum here, its sums in pass 2 */
            for (int k = 0; k < nt; k++)
                for (int64_t x = e; x < n; x++) {
                    const uint32_t b = dt_float_bits(t[k][x]) & 0x7fffffffu;
                    m = b > m ? b : m;
                }
            meta[q] = 0;
            continue;
        }
        __m256i emax, emin;
        sum8_exponents(&emax, &emin, &bmax, t, nt, e);
        const __m256i wide = _mm256_cmpgt_epi32(_mm256_sub_epi32(emax, emin), span_max);
        if (!_mm256_testz_si256(wide, wide)) {
            meta[q] = 0;
            continue;
        }
        const __m256 first_terms = _mm256_loadu_ps(slot0 + e);
        sum8_store(slot0, t, nt, e);
        _mm256_storeu_ps(side + e, first_terms);
        meta[q] = (uint8_t)hmin8(emin);
    }
    const uint32_t v = hmax8(bmax);
    return v > m ? v : m;
}

DT_AVX2 static void one_pass_sums(void *ctx, int64_t g0, int64_t g1, int worker)
{
    struct one_pass_job *j = ctx;
    const struct dt_exact_layout *L = j->L;
    const int nt = (int)L->slots;
    const __m256i span_max = _mm256_set1_epi32(double_span(nt));
    uint32_t *mine = (uint32_t *)dt_cpu_worker_buffer(j->be, worker, (size_t)L->tensors);
    memset(mine, 0, (size_t)L->tensors * sizeof *mine);
    int i = 0;
    while (g0 >= j->gfirst[i + 1]) i++;
    for (int64_t g = g0; g < g1; i++) {
        const int64_t stop = g1 < j->gfirst[i + 1] ? g1 : j->gfirst[i + 1];
        mine[i] = nt == 4 ? one_pass_run(j, i, g, stop, 4, span_max, mine[i])
                          : one_pass_run(j, i, g, stop, nt, span_max, mine[i]);
        g = stop;
    }
    j->used[worker] = true;
}

/* Pass 2 over groups [g0, g1). */
DT_AVX2 static void one_pass_fix(void *ctx, int64_t g0, int64_t g1, int worker)
{
    (void)worker;
    struct one_pass_job *j = ctx;
    const struct dt_exact_layout *L = j->L;
    int i = 0;
    while (g0 >= j->gfirst[i + 1]) i++;
    for (int64_t g = g0; g < g1; i++) {
        const int64_t stop = g1 < j->gfirst[i + 1] ? g1 : j->gfirst[i + 1], n = L->n[i];
        float *slot0 = j->pack + L->slots * L->first[i];
        const float *side = j->side + L->first[i];
        const bool finite = finite_max(j->max_bits[i]);
        const int shift = finite ? dt_fixed_shift_for(dt_bits_float(j->max_bits[i]), L->shards) : 0;
        const int e_floor = finite ? 150 - shift : 256; /* above every meta */
        const __m256i floor8 = _mm256_set1_epi8((char)(e_floor < 255 ? e_floor : 255));
        for (; g < stop; g++) {
            if (e_floor <= 255 && g + 32 <= stop) { /* 32 groups at once while all pass */
                const __m256i v = _mm256_loadu_si256((const __m256i *)(j->meta + g));
                if (_mm256_movemask_epi8(_mm256_cmpeq_epi8(_mm256_max_epu8(v, floor8), v)) == -1) {
                    g += 31;
                    continue;
                }
            }
            if (j->meta[g] >= e_floor) continue;
            const int64_t e = 8 * (g - j->gfirst[i]), end = e + 8 < n ? e + 8 : n;
            if (j->meta[g]) memcpy(slot0 + e, side + e, 8 * sizeof *slot0);
            if (finite) dt_cpu_exact_sum_terms(slot0, slot0, n, (int)L->slots, e, end, shift);
        }
    }
}

static enum dt_status exact_sum_one_pass(struct dt_backend *be, float *pack, uint32_t *max_bits,
                                         const struct dt_exact_layout *L)
{
    struct dt_cpu_ctx *c = dt_cpu(be);
    int64_t *gfirst = dt_xmalloc((size_t)(L->tensors + 1) * sizeof *gfirst);
    gfirst[0] = 0;
    for (int i = 0; i < L->tensors; i++) gfirst[i + 1] = gfirst[i] + (L->n[i] + 7) / 8;
    const int64_t total = L->first[L->tensors], groups = gfirst[L->tensors];
    float *side = dt_cpu_scratch(be, (size_t)(total + groups / 4 + 1));
    struct one_pass_job j = {.be = be,
                             .L = L,
                             .pack = pack,
                             .side = side,
                             .meta = (uint8_t *)(side + total),
                             .gfirst = gfirst};
    dt_pool_run(c->pool, groups, EXACT_GRAIN / 8, one_pass_sums, &j);
    memset(max_bits, 0, (size_t)L->tensors * sizeof *max_bits);
    for (int t = 0; t < dt_pool_threads(c->pool); t++) {
        if (!j.used[t]) continue;
        const uint32_t *m = (const uint32_t *)c->worker_buf[t];
        for (int i = 0; i < L->tensors; i++) max_bits[i] = m[i] > max_bits[i] ? m[i] : max_bits[i];
    }
    j.max_bits = max_bits;
    dt_pool_run(c->pool, groups, EXACT_GRAIN / 8, one_pass_fix, &j);
    free(gfirst);
    return DT_OK;
}
#endif

/* The widest vector part of a run this CPU has (the same bits on all). */
static sum_vector_fn sum_vector_here(void)
{
#ifdef DT_CPU_WIDE_KERNELS
    if (dt_cpu_wide()) return sum_vector8;
    if (dt_cpu_loops() == 1) return sum_vector4_avx2x;
#endif
    return sum_vector4;
}

/* Elements [begin, end) (flat, over every tensor's first[] range), tensor by tensor: the
 * vector part, then the rest one by one (the same bits). */
static void sum_part(void *ctx, int64_t begin, int64_t end, int worker)
{
    (void)worker;
    struct exact_job *j = ctx;
    const struct dt_exact_layout *L = j->L;
    const sum_vector_fn vector = sum_vector_here();
    begin += j->e0, end += j->e0;
    int i = tensor_of(L, begin);
    for (int64_t e = begin; e < end; i++) {
        const int64_t stop = end < L->first[i + 1] ? end : L->first[i + 1];
        if (!finite_max(j->max_bits[i])) { /* left as it is; the caller names it */
            e = stop;
            continue;
        }
        const int shift = dt_fixed_shift_for(dt_bits_float(j->max_bits[i]), L->shards);
        struct sum_run r = {.acc = j->acc,
                            .n = L->n[i],
                            .up = dt_fixed_scale(shift),
                            .down = dt_fixed_scale(-shift),
                            .shift = shift};
        if (j->packs) { /* element e of tensor i: pack b's slot k at its first[i] * slots */
            r.nb = j->n_packs;
            for (int b = 0; b < r.nb; b++) {
                r.slots[b] = j->pack_slots[b];
                r.base[b] = j->packs[b] + r.slots[b] * L->first[i] - L->first[i];
            }
            r.out = j->out - j->e0;
        } else {
            r.nb = j->pack ? 1 : 0;
            r.slots[0] = L->slots;
            r.base[0] = j->pack ? j->pack + L->slots * L->first[i] - L->first[i] : NULL;
            r.out = j->out ? j->out + L->slots * L->first[i] - L->first[i] : NULL;
        }
        sum_scalar(&r, vector(&r, e, stop), stop);
        e = stop;
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
    struct exact_job j = {
        .be = be, .L = L, .out = pack, .acc = (int64_t *)acc, .max_bits = max_bits};
    dt_pool_run(dt_cpu(be)->pool, L->first[L->tensors], EXACT_GRAIN, sum_part, &j);
    return DT_OK;
}

/* One read of the pack where exact_sum_one_pass serves; else the maxima, then the sums. */
enum dt_status dt_cpu_exact_sum(struct dt_backend *be, float *pack, uint32_t *max_bits,
                                const struct dt_exact_layout *L)
{
#ifdef DT_CPU_WIDE_KERNELS
    if (dt_cpu_loops() == 1 && L->slots <= SUM8_TERMS_MAX)
        return exact_sum_one_pass(be, pack, max_bits, L);
#endif
    dt_cpu_exact_max(be, max_bits, pack, L);
    struct exact_job j = {.be = be, .L = L, .pack = pack, .out = pack, .max_bits = max_bits};
    dt_pool_run(dt_cpu(be)->pool, L->first[L->tensors], EXACT_GRAIN, sum_part, &j);
    return DT_OK;
}

enum dt_status dt_cpu_exact_sum_packs(struct dt_backend *be, float *out, const float *const *packs,
                                      const int64_t *slots, int n_packs, const uint32_t *max_bits,
                                      const struct dt_exact_layout *L, int64_t e0, int64_t e1)
{
    struct exact_job j = {.be = be,
                          .L = L,
                          .out = out,
                          .max_bits = max_bits,
                          .packs = packs,
                          .pack_slots = slots,
                          .n_packs = n_packs,
                          .e0 = e0};
    dt_pool_run(dt_cpu(be)->pool, e1 - e0, EXACT_GRAIN, sum_part, &j);
    return DT_OK;
}

/* ---- the exact sum of terms a shard op holds (dense.c: the weight gradient on one rank) --
 * The shard op makes a block of its tensor's S partials in cache and sums them there, before
 * the tensor's maximum (so its shift) is known: per group of DT_CPU_SPEC_GROUP elements,
 * where every term lies within a double's span of the smallest one's unit (sum8_double's
 * span test), the terms' double sum, rounded once, is the exact sum's value for any shift
 * at which every term is a whole number of units -- which holds where that unit's exponent
 * reaches the floor the maximum will give (dt_cpu_exact_spec_floor). The caller guesses that
 * floor; a group too wide, or with a unit below the guess, is marked `risky` (its terms must
 * go through the integer path once the shift is known: the caller keeps them), and each
 * stood group's unit bound goes into *unit, for the caller to check against the true floor
 * (dt_cpu_exact_sum_terms). The bits of exact_sum. */

/* One element's terms t[k * ld] (k < nt): the largest |bits| into *m; its double sum into
 * *out where the span test passes; returns the smallest unit's exponent (255: all zero), or
 * -1 where the test fails. */
static inline int spec_one(float *out, const float *t, int64_t ld, int nt, int span_max,
                           uint32_t *m)
{
    uint32_t bmax = 0, bmin = UINT32_MAX;
    double s = 0.0;
    for (int k = 0; k < nt; k++) {
        const uint32_t b = dt_float_bits(t[k * ld]) & 0x7fffffffu;
        bmax = b > bmax ? b : bmax;
        bmin = b - 1 < bmin ? b - 1 : bmin; /* the smallest nonzero |bits| - 1; zero wraps */
        s += (double)t[k * ld];             /* exact where the test passes */
    }
    *m = bmax > *m ? bmax : *m;
    if (bmin == UINT32_MAX) {
        *out = (float)s;
        return 255;
    }
    int unit = (int)((bmin + 1) >> 23);
    unit = unit < 1 ? 1 : unit;
    if ((int)(bmax >> 23) - unit > span_max) return -1;
    *out = (float)s;
    return unit;
}

/* Elements [e, stop) as one group: every lane risky (a mask of them) or 0 (the sums written,
 * *unit lowered). */
static uint16_t spec_group_scalar(float *out, const float *t, int64_t ld, int nt, int64_t e,
                                  int64_t stop, int span_max, int guess, uint32_t *m, int *unit)
{
    int u = 255;
    bool risky = false;
    float sums[DT_CPU_SPEC_GROUP];
    for (int64_t x = e; x < stop; x++) { /* every maximum, even past a failed test */
        const int v = spec_one(&sums[x - e], t + x, ld, nt, span_max, m);
        risky |= v < guess; /* -1 too */
        u = v >= 0 && v < u ? v : u;
    }
    if (risky) return (uint16_t)((1u << (stop - e)) - 1u);
    memcpy(out + e, sums, (size_t)(stop - e) * sizeof *out);
    *unit = u < *unit ? u : *unit;
    return 0;
}

#ifdef DT_CPU_WIDE_KERNELS
/* The end of spec16_wide and spec16_wide4: 16 lanes' largest |bits| and smallest nonzero
 * |bits| - 1 tested, their double sums (lo, hi) rounded into out, the failing lanes
 * returned. */
DT_WIDE static inline __attribute__((always_inline)) uint16_t
spec16_finish(float *out, __m512i bmax, __m512i bmin, __m512d lo, __m512d hi, __m512i span_max,
              __m512i guess, __m512i *vmax, __m512i *vunit)
{
    *vmax = _mm512_max_epu32(*vmax, bmax);
    const __m512i unit = _mm512_srli_epi32(bmin, 23);
    const __m512i spread = _mm512_sub_epi32(_mm512_srli_epi32(bmax, 23), unit);
    const __mmask16 bad =
        _mm512_cmpgt_epi32_mask(spread, span_max) | _mm512_cmpgt_epi32_mask(guess, unit);
    *vunit = _mm512_mask_min_epi32(*vunit, (__mmask16)~bad, *vunit, unit);
    _mm256_storeu_ps(out, _mm512_cvtpd_ps(lo));
    _mm256_storeu_ps(out + 8, _mm512_cvtpd_ps(hi));
    return (uint16_t)bad;
}

/* 16 elements, AVX-512: spec_one's tests lane by lane, with a unit exponent that is never
 * above the true one (the bits of the smallest nonzero |term| - 1, shifted: one less at a
 * power of two or a subnormal, 511 where all are zero), so at worst a lane is redone. Every
 * lane's double sum is written; the lanes that fail are returned (their sums to be
 * overwritten), the others' units lower *vunit. */
DT_WIDE static inline __attribute__((always_inline)) uint16_t
spec16_wide(float *out, const float *t, int64_t ld, int nt, int64_t e, __m512i span_max,
            __m512i guess, __m512i *vmax, __m512i *vunit)
{
    const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff), one = _mm512_set1_epi32(1);
    __m512i bmax = _mm512_setzero_si512(), bmin = _mm512_set1_epi32(-1);
    __m512d lo = _mm512_setzero_pd(), hi = _mm512_setzero_pd();
#pragma GCC unroll 16
    for (int k = 0; k < nt; k++) {
        const __m512 x = _mm512_loadu_ps(t + k * ld + e);
        const __m512i b = _mm512_and_si512(_mm512_castps_si512(x), abs_mask);
        bmax = _mm512_max_epu32(bmax, b);
        bmin = _mm512_min_epu32(bmin, _mm512_sub_epi32(b, one));
        lo = _mm512_add_pd(lo, _mm512_cvtps_pd(_mm512_castps512_ps256(x))); /* exact */
        hi = _mm512_add_pd(hi, _mm512_cvtps_pd(_mm512_extractf32x8_ps(x, 1)));
    }
    return spec16_finish(out + e, bmax, bmin, lo, hi, span_max, guess, vmax, vunit);
}

/* spec16_wide for 4 terms (4 shards on one rank): each half converted from memory (no
 * extract), the double sums as a tree -- where the span test passes every partial sum is
 * exact, so any order gives the same value (a failing lane's sum is overwritten anyway).
 * 3.9 -> 3.3 ns a group in L1 (Zen 5). */
DT_WIDE static inline __attribute__((always_inline)) uint16_t
spec16_wide4(float *out, const float *t, int64_t ld, int64_t e, __m512i span_max, __m512i guess,
             __m512i *vmax, __m512i *vunit)
{
    const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff), one = _mm512_set1_epi32(1);
    const float *p0 = t + e, *p1 = p0 + ld, *p2 = p1 + ld, *p3 = p2 + ld;
    const __m512i b0 = _mm512_and_si512(_mm512_loadu_si512(p0), abs_mask);
    const __m512i b1 = _mm512_and_si512(_mm512_loadu_si512(p1), abs_mask);
    const __m512i b2 = _mm512_and_si512(_mm512_loadu_si512(p2), abs_mask);
    const __m512i b3 = _mm512_and_si512(_mm512_loadu_si512(p3), abs_mask);
    const __m512i bmax = _mm512_max_epu32(_mm512_max_epu32(b0, b1), _mm512_max_epu32(b2, b3));
    const __m512i bmin =
        _mm512_min_epu32(_mm512_min_epu32(_mm512_sub_epi32(b0, one), _mm512_sub_epi32(b1, one)),
                         _mm512_min_epu32(_mm512_sub_epi32(b2, one), _mm512_sub_epi32(b3, one)));
    const __m512d lo = _mm512_add_pd(
        _mm512_add_pd(_mm512_cvtps_pd(_mm256_loadu_ps(p0)), _mm512_cvtps_pd(_mm256_loadu_ps(p1))),
        _mm512_add_pd(_mm512_cvtps_pd(_mm256_loadu_ps(p2)), _mm512_cvtps_pd(_mm256_loadu_ps(p3))));
    const __m512d hi = _mm512_add_pd(_mm512_add_pd(_mm512_cvtps_pd(_mm256_loadu_ps(p0 + 8)),
                                                   _mm512_cvtps_pd(_mm256_loadu_ps(p1 + 8))),
                                     _mm512_add_pd(_mm512_cvtps_pd(_mm256_loadu_ps(p2 + 8)),
                                                   _mm512_cvtps_pd(_mm256_loadu_ps(p3 + 8))));
    return spec16_finish(out + e, bmax, bmin, lo, hi, span_max, guess, vmax, vunit);
}

DT_WIDE static uint32_t spec_sums_wide(float *out, const float *t, int64_t ld, int nt, int64_t n,
                                       int guess, uint16_t *risky, int *unit, uint32_t m, int span)
{
    const __m512i span_max = _mm512_set1_epi32(span), g = _mm512_set1_epi32(guess);
    __m512i vmax = _mm512_setzero_si512(), vunit = _mm512_set1_epi32(255);
    int64_t e = 0;
    if (nt == 4) /* 4 shards on one rank: the terms' loop unrolled */
        for (; e + 16 <= n; e += 16)
            *risky++ = spec16_wide4(out, t, ld, e, span_max, g, &vmax, &vunit);
    for (; e + 16 <= n; e += 16)
        *risky++ = spec16_wide(out, t, ld, nt, e, span_max, g, &vmax, &vunit);
    const uint32_t v = _mm512_reduce_max_epu32(vmax);
    m = v > m ? v : m;
    const int u = _mm512_reduce_min_epi32(vunit);
    *unit = u < *unit ? u : *unit;
    if (e < n) *risky = spec_group_scalar(out, t, ld, nt, e, n, span, guess, &m, unit);
    return m;
}

/* 16 elements, AVX2: two groups of sum8_double's 8 lanes (true unit exponents). */
DT_AVX2 static uint32_t spec_sums_avx2(float *out, const float *t, int64_t ld, int nt, int64_t n,
                                       int guess, uint16_t *risky, int *unit, uint32_t m, int span)
{
    const float *tk[DT_CPU_SPEC_TERMS_MAX];
    for (int k = 0; k < nt; k++) tk[k] = t + k * ld;
    const __m256i span_max = _mm256_set1_epi32(span), g = _mm256_set1_epi32(guess);
    __m256i bmax = _mm256_setzero_si256(), vunit = _mm256_set1_epi32(255);
    int64_t e = 0;
    for (; e + 16 <= n; e += 16) {
        __m256i emax0, emin0, emax1, emin1;
        sum8_exponents(&emax0, &emin0, &bmax, tk, nt, e);
        sum8_exponents(&emax1, &emin1, &bmax, tk, nt, e + 8);
        /* lane by lane, as spec16_wide: every lane's sum written, the failing ones named */
        const __m256i bad0 =
            _mm256_or_si256(_mm256_cmpgt_epi32(_mm256_sub_epi32(emax0, emin0), span_max),
                            _mm256_cmpgt_epi32(g, emin0));
        const __m256i bad1 =
            _mm256_or_si256(_mm256_cmpgt_epi32(_mm256_sub_epi32(emax1, emin1), span_max),
                            _mm256_cmpgt_epi32(g, emin1));
        *risky++ = (uint16_t)(_mm256_movemask_ps(_mm256_castsi256_ps(bad0)) |
                              _mm256_movemask_ps(_mm256_castsi256_ps(bad1)) << 8);
        sum8_store(out, tk, nt, e);
        sum8_store(out, tk, nt, e + 8);
        const __m256i none = _mm256_set1_epi32(255); /* the failing lanes' units left out */
        vunit = _mm256_min_epi32(vunit, _mm256_blendv_epi8(emin0, none, bad0));
        vunit = _mm256_min_epi32(vunit, _mm256_blendv_epi8(emin1, none, bad1));
    }
    const uint32_t v = hmax8(bmax);
    m = v > m ? v : m;
    const int u = hmin8(vunit);
    *unit = u < *unit ? u : *unit;
    if (e < n) *risky = spec_group_scalar(out, t, ld, nt, e, n, span, guess, &m, unit);
    return m;
}
#endif

uint32_t dt_cpu_exact_spec_sums(float *out, const float *t, int64_t ld, int nt, int64_t n,
                                int guess, uint16_t *risky, int *unit, uint32_t m)
{
    DT_ASSERT(nt >= 1 && nt <= DT_CPU_SPEC_TERMS_MAX);
    const int span = double_span(nt);
#ifdef DT_CPU_WIDE_KERNELS
    if (dt_cpu_wide()) return spec_sums_wide(out, t, ld, nt, n, guess, risky, unit, m, span);
    if (dt_cpu_loops() == 1) return spec_sums_avx2(out, t, ld, nt, n, guess, risky, unit, m, span);
#endif
    for (int64_t e = 0; e < n; e += DT_CPU_SPEC_GROUP)
        *risky++ = spec_group_scalar(out, t, ld, nt, e,
                                     e + DT_CPU_SPEC_GROUP < n ? e + DT_CPU_SPEC_GROUP : n, span,
                                     guess, &m, unit);
    return m;
}

bool dt_cpu_exact_spec_floor(uint32_t max_bits, int64_t shards, int *e_floor, int *shift)
{
    if (!finite_max(max_bits)) return false;
    *shift = dt_fixed_shift_for(dt_bits_float(max_bits), shards);
    /* shift <= 149, and >= -70 for FLT_MAX over DT_CPU_SPEC_TERMS_MAX shards: 1..220 */
    *e_floor = 150 - *shift;
    DT_ASSERT(*e_floor >= 1 && *e_floor <= 255);
    return true;
}

void dt_cpu_exact_sum_terms(float *out, const float *t, int64_t ld, int nt, int64_t e0, int64_t e1,
                            int shift)
{
    struct sum_run r = {.nb = 1,
                        .slots = {nt},
                        .base = {t},
                        .out = out,
                        .n = ld,
                        .up = dt_fixed_scale(shift),
                        .down = dt_fixed_scale(-shift),
                        .shift = shift};
    sum_scalar(&r, sum_vector_here()(&r, e0, e1), e1);
}
