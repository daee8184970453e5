/* Tests for determinism/fixed_point.h, the `atomics: fixed_point` control: exact int64
 * accumulation with one power-of-two scale per tensor and one final rounding. References
 * are independent of the code under test: quantisation via long double (x87, 64-bit
 * significand: every int64 and every scaled float is exact), sums in __int128, the exact
 * sum of the original floats in a 320-bit integer at scale 2^149. */
#include <float.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>

#include "determinism/fixed_point.h"
#include "tests/check.h"

__extension__ typedef __int128 i128;

/* ---- small helpers ------------------------------------------------------------------- */

static uint64_t rng_state_;
static uint64_t rng_next(void) /* splitmix64 */
{
    uint64_t z = (rng_state_ += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}
static double rng_unit(void) { return (double)(rng_next() >> 11) * 0x1p-53; }
static int rng_int(int lo, int hi) { return lo + (int)(rng_next() % (uint64_t)(hi - lo + 1)); }

static uint32_t f2u(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}
static float u2f(uint32_t u)
{
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

#define CHECK_BITS_EQ(got, want, what, ...)                                                        \
    do {                                                                                           \
        float g_ = (got), w_ = (want);                                                             \
        if (f2u(g_) != f2u(w_)) {                                                                  \
            fprintf(stderr, "%s:%d: bits differ (" what "): got %a (0x%08x) want %a (0x%08x)\n",   \
                    __FILE__, __LINE__, __VA_ARGS__, (double)g_, (unsigned)f2u(g_), (double)w_,    \
                    (unsigned)f2u(w_));                                                            \
            dt_check_failures_++;                                                                  \
        }                                                                                          \
    } while (0)

/* Reference quantisation: round-half-even(x * 2^shift) through long double (exact
 * scaling; llrintl rounds in the default to-nearest-even mode). Returns false if
 * |x * 2^shift| >= 2^63. */
static bool ref_quantize(int64_t *q, float x, int shift)
{
    long double v = ldexpl((long double)x, shift);
    if (fabsl(v) >= 0x1p63L) return false;
    *q = llrintl(v);
    return true;
}

/* Reference final rounding: (long double)acc is exact, ldexpl is exact, and the
 * long double -> float conversion is one correctly rounded operation (subnormals too). */
static float ref_to_float(int64_t acc, int shift)
{
    return (float)ldexpl((long double)acc, -shift);
}

/* ---- 320-bit two's-complement integers (5 limbs, little-endian) ----------------------- */

#define BIGW 5
struct big {
    uint64_t w[BIGW];
};

static void big_add(struct big *a, const struct big *b)
{
    unsigned __int128 carry = 0;
    for (int i = 0; i < BIGW; i++) {
        unsigned __int128 t = (unsigned __int128)a->w[i] + b->w[i] + carry;
        a->w[i] = (uint64_t)t;
        carry = t >> 64;
    }
}
static void big_neg(struct big *a)
{
    struct big one = {{1, 0, 0, 0, 0}};
    for (int i = 0; i < BIGW; i++) a->w[i] = ~a->w[i];
    big_add(a, &one);
}
static bool big_is_neg(const struct big *a) { return (a->w[BIGW - 1] >> 63) != 0; }
/* +-m * 2^sh, m < 2^64, sh + 64 <= 319 */
static struct big big_shifted(uint64_t m, int sh, bool neg)
{
    struct big b = {{0}};
    int limb = sh / 64, off = sh % 64;
    b.w[limb] = m << off;
    if (off && limb + 1 < BIGW) b.w[limb + 1] = m >> (64 - off);
    if (neg) big_neg(&b);
    return b;
}
/* compare non-negative a, b: -1, 0, 1 */
static int big_cmp(const struct big *a, const struct big *b)
{
    for (int i = BIGW - 1; i >= 0; i--)
        if (a->w[i] != b->w[i]) return a->w[i] < b->w[i] ? -1 : 1;
    return 0;
}
static long double big_to_ld(struct big a)
{
    bool neg = big_is_neg(&a);
    if (neg) big_neg(&a);
    long double v = 0;
    for (int i = BIGW - 1; i >= 0; i--) v = v * 0x1p64L + (long double)a.w[i];
    return neg ? -v : v;
}
/* x = +-m * 2^e exactly (m < 2^24, e >= -149) */
static void float_split(uint64_t *m, int *e, bool *neg, float x)
{
    uint32_t u = f2u(x), be = (u >> 23) & 0xff, fr = u & 0x7fffff;
    *neg = (u >> 31) != 0;
    *m = be ? (fr | 0x800000u) : fr;
    *e = be ? (int)be - 150 : -149;
}
/* a += x * 2^149 (exact: every finite float is an integer multiple of 2^-149) */
static void big_add_float(struct big *a, float x)
{
    uint64_t m;
    int e;
    bool neg;
    float_split(&m, &e, &neg, x);
    struct big t = big_shifted(m, e + 149, neg);
    big_add(a, &t);
}

/* ---- exact_vs_reference ---------------------------------------------------------------- */

/* Sum v[rows][cols] over rows with dt_fixed_sum_rows; every column must be bit-equal to the
 * correctly rounded exact sum of the reference-quantised terms, and within the documented
 * bound of the exact sum of the original floats. */
static void check_set(const char *name, const float *v, int64_t rows, int64_t cols)
{
    float *out = malloc((size_t)cols * sizeof *out);
    int64_t *scratch = malloc((size_t)cols * sizeof *scratch);
    struct dt_error err = {0};
    int shift = 0;
    enum dt_status st = dt_fixed_sum_rows(out, v, rows, cols, scratch, &shift, &err);
    CHECK_INT_EQ(st, DT_OK);
    if (st != DT_OK) fprintf(stderr, "  %s: %s\n", name, err.msg);
    for (int64_t c = 0; c < cols && st == DT_OK; c++) {
        i128 qsum = 0;
        struct big exact = {{0}};
        float naive = 0.0f;
        bool ok = true;
        for (int64_t r = 0; r < rows; r++) {
            float x = v[r * cols + c];
            int64_t q = 0, q_dt = 0;
            ok = ok && ref_quantize(&q, x, shift) && dt_fixed_from_float(&q_dt, x, shift);
            if (q_dt != q) { /* per-term quantisation is round-half-even, exactly */
                fprintf(stderr, "  %s row %lld col %lld: x=%a q=%" PRId64 " want %" PRId64 "\n",
                        name, (long long)r, (long long)c, (double)x, q_dt, q);
                ok = false;
            }
            qsum += q;
            big_add_float(&exact, x);
            naive += x;
        }
        CHECK(ok);
        CHECK(qsum < ((i128)1 << 63) && qsum >= -((i128)1 << 63));
        CHECK_BITS_EQ(out[c], ref_to_float((int64_t)qsum, shift), "%s column %lld", name,
                      (long long)c);

        /* 2|result - exact| <= n * 2^-shift + ulp(result), all at scale 2^149 */
        uint64_t rm;
        int re;
        bool rneg;
        float_split(&rm, &re, &rneg, out[c]);
        struct big d = big_shifted(rm, re + 149, rneg);
        struct big ne = exact;
        big_neg(&ne);
        big_add(&d, &ne);
        big_add(&d, &d); /* 2 * (result - exact) */
        if (big_is_neg(&d)) big_neg(&d);
        struct big bound = big_shifted((uint64_t)rows, 149 - shift, false);
        struct big half_ulp2 = big_shifted(1, re + 149, false);
        big_add(&bound, &half_ulp2);
        CHECK(big_cmp(&d, &bound) <= 0);
        long double exact_ld = ldexpl(big_to_ld(exact), -149);
        fprintf(stderr,
                "%-14s col %lld n=%lld shift=%d result=%.9g exact=%.12Lg |err|=%.3Lg "
                "bound=%.3Lg (naive float sum %.9g, |err|=%.3Lg)\n",
                name, (long long)c, (long long)rows, shift, (double)out[c], exact_ld,
                ldexpl(big_to_ld(d), -150), ldexpl(big_to_ld(bound), -150), (double)naive,
                fabsl((long double)naive - exact_ld));
    }
    free(out);
    free(scratch);
}

static float rand_sign(float x) { return (rng_next() & 1) ? -x : x; }

DT_TEST(exact_vs_reference)
{
    rng_state_ = 1;
    /* heavy cancellation: +2^20, many small values, -2^20 (col 0: big ones at the ends;
     * col 1: in the middle, opposite signs) */
    {
        int64_t n = 100002, cols = 2;
        float *v = malloc((size_t)(n * cols) * sizeof *v);
        for (int64_t r = 0; r < n; r++)
            for (int64_t c = 0; c < cols; c++)
                v[r * cols + c] = rand_sign((float)ldexp(1.0 + rng_unit(), rng_int(-12, -1)));
        v[0] = 0x1p20f;
        v[(n - 1) * cols] = -0x1p20f;
        v[3 * cols + 1] = -0x1p20f;
        v[50000 * cols + 1] = 0x1p20f;
        check_set("cancellation", v, n, cols);
        free(v);
    }
    /* magnitudes spanning 2^-40 .. 2^20, random signs */
    {
        int64_t n = 60000;
        float *v = malloc((size_t)n * sizeof *v);
        for (int64_t r = 0; r < n; r++)
            v[r] = rand_sign((float)ldexp(1.0 + rng_unit(), rng_int(-40, 19)));
        v[7] = 0x1p20f;
        v[8] = 0x1p-40f;
        check_set("span", v, n, 1);
        free(v);
    }
    /* 10^6 copies of 0.1f: exact sum 100000.00149..., nearest float 100000 */
    {
        int64_t n = 1000000;
        float *v = malloc((size_t)n * sizeof *v);
        for (int64_t r = 0; r < n; r++) v[r] = 0.1f;
        check_set("tenth_x1e6", v, n, 1);
        float out = 0.0f;
        int64_t scratch;
        int shift;
        CHECK_INT_EQ(dt_fixed_sum_rows(&out, v, n, 1, &scratch, &shift, NULL), DT_OK);
        CHECK_BITS_EQ(out, 100000.0f, "%s", "10^6 * 0.1f");
        free(v);
    }
    /* random signs, uniform magnitudes */
    {
        int64_t n = 200000, cols = 3;
        float *v = malloc((size_t)(n * cols) * sizeof *v);
        for (int64_t i = 0; i < n * cols; i++) v[i] = (float)(2.0 * rng_unit() - 1.0);
        check_set("uniform", v, n, cols);
        free(v);
    }
    /* subnormal inputs: shift clamps to 149, every term exact */
    {
        int64_t n = 1000, cols = 2;
        float *v = malloc((size_t)(n * cols) * sizeof *v);
        for (int64_t i = 0; i < n * cols; i++) v[i] = u2f((uint32_t)(rng_next() & 0x807fffffu));
        check_set("subnormal", v, n, cols);
        free(v);
    }
    /* huge values: a negative shift */
    {
        int64_t n = 1000;
        float *v = malloc((size_t)n * sizeof *v);
        for (int64_t r = 0; r < n; r++) v[r] = rand_sign((float)(1e34 + 9e34 * rng_unit()));
        int shift = dt_fixed_shift_for(1e35f, n);
        CHECK(shift < 0);
        check_set("huge", v, n, 1);
        free(v);
    }
}

/* ---- order_independent ----------------------------------------------------------------- */

/* int64 partials of rows [r0, r1) at a given shift */
static void chunk_partials(int64_t *acc, const float *v, int64_t r0, int64_t r1, int64_t cols,
                           int shift)
{
    for (int64_t c = 0; c < cols; c++) acc[c] = 0;
    for (int64_t r = r0; r < r1; r++)
        for (int64_t c = 0; c < cols; c++) {
            int64_t q = 0;
            CHECK(dt_fixed_from_float(&q, v[r * cols + c], shift));
            CHECK(dt_fixed_add(&acc[c], q));
        }
}

DT_TEST(order_independent)
{
    enum { N = 4099, C = 5 };
    rng_state_ = 2;
    float *v = malloc(sizeof(float) * N * C), *p = malloc(sizeof(float) * N * C);
    for (int i = 0; i < N * C; i++)
        v[i] = rand_sign((float)ldexp(1.0 + rng_unit(), rng_int(-30, 10)));
    float base[C], out[C];
    int64_t scratch[C];
    int shift = 0, shift2 = 0;
    CHECK_INT_EQ(dt_fixed_sum_rows(base, v, N, C, scratch, &shift, NULL), DT_OK);

    /* random row permutations */
    int64_t perm[N];
    for (int t = 0; t < 8; t++) {
        for (int64_t i = 0; i < N; i++) perm[i] = i;
        for (int64_t i = N - 1; i > 0; i--) {
            int64_t j = (int64_t)(rng_next() % (uint64_t)(i + 1)), tmp = perm[i];
            perm[i] = perm[j];
            perm[j] = tmp;
        }
        for (int64_t i = 0; i < N; i++) memcpy(p + i * C, v + perm[i] * C, sizeof(float) * C);
        CHECK_INT_EQ(dt_fixed_sum_rows(out, p, N, C, scratch, &shift2, NULL), DT_OK);
        CHECK_INT_EQ(shift2, shift);
        for (int c = 0; c < C; c++) CHECK_BITS_EQ(out[c], base[c], "permutation %d col %d", t, c);
    }

    /* chunkings (thread splits): partials per chunk, combined last chunk first */
    const int64_t chunk_sizes[] = {1, 3, 32, 64, 1000, 2050, N};
    for (size_t k = 0; k < sizeof chunk_sizes / sizeof chunk_sizes[0] + 3; k++) {
        int64_t bounds[N + 1], nb = 0;
        bounds[nb++] = 0;
        while (bounds[nb - 1] < N) {
            int64_t step = k < sizeof chunk_sizes / sizeof chunk_sizes[0]
                               ? chunk_sizes[k]
                               : 1 + (int64_t)(rng_next() % 700); /* ragged random split */
            bounds[nb] = bounds[nb - 1] + step < N ? bounds[nb - 1] + step : N;
            nb++;
        }
        int64_t total[C] = {0}, part[C];
        for (int64_t b = nb - 2; b >= 0; b--) {
            chunk_partials(part, k % 2 ? p : v, bounds[b], bounds[b + 1], C, shift);
            for (int c = 0; c < C; c++) CHECK(dt_fixed_add(&total[c], part[c]));
        }
        for (int c = 0; c < C; c++)
            CHECK_BITS_EQ(dt_fixed_to_float(total[c], shift), base[c], "chunking %zu col %d", k, c);
    }

    /* negative control: the same inputs summed in float are order-sensitive */
    int differ = 0;
    for (int c = 0; c < C; c++) {
        float fwd = 0.0f, rev = 0.0f, per = 0.0f;
        for (int64_t r = 0; r < N; r++) fwd += v[r * C + c];
        for (int64_t r = N - 1; r >= 0; r--) rev += v[r * C + c];
        for (int64_t r = 0; r < N; r++) per += p[r * C + c];
        differ += f2u(fwd) != f2u(rev) || f2u(fwd) != f2u(per);
        fprintf(stderr, "col %d: fixed %a  float fwd %a rev %a permuted %a\n", c, (double)base[c],
                (double)fwd, (double)rev, (double)per);
    }
    CHECK(differ > 0);
    free(v);
    free(p);
}

/* ---- overflow_reported ----------------------------------------------------------------- */

DT_TEST(overflow_reported)
{
    int64_t q = 12345;
    /* dt_fixed_from_float: |x * 2^shift| >= 2^63, NaN/Inf, shift out of bounds */
    CHECK(!dt_fixed_from_float(&q, 1.0f, 63));
    CHECK(!dt_fixed_from_float(&q, -1.0f, 63));
    CHECK(!dt_fixed_from_float(&q, 0x1p40f, 23));
    CHECK(!dt_fixed_from_float(&q, NAN, 0));
    CHECK(!dt_fixed_from_float(&q, INFINITY, 0));
    CHECK(!dt_fixed_from_float(&q, -INFINITY, 0));
    CHECK(!dt_fixed_from_float(&q, 1.0f, DT_FIXED_SHIFT_MAX + 1));
    CHECK(!dt_fixed_from_float(&q, 1.0f, DT_FIXED_SHIFT_INVALID));
    CHECK_INT_EQ(q, 12345); /* untouched on failure */
    CHECK(dt_fixed_from_float(&q, 1.0f, 62));
    CHECK_INT_EQ(q, INT64_C(1) << 62);
    CHECK(dt_fixed_from_float(&q, -0x1.fffffep62f, 0)); /* largest float below 2^63 */
    CHECK_INT_EQ(q, -(INT64_C(0xffffff) << 39));
    CHECK(dt_fixed_from_float(&q, 0.0f, DT_FIXED_SHIFT_MIN));
    CHECK_INT_EQ(q, 0);

    /* dt_fixed_add and its portable (device) path agree on the edges */
    const int64_t edge[][2] = {{INT64_MAX, 1},
                               {INT64_MIN, -1},
                               {INT64_MAX, INT64_MIN},
                               {INT64_MIN, INT64_MIN},
                               {INT64_MAX, INT64_MAX},
                               {INT64_MAX, 0},
                               {INT64_MIN, 0},
                               {-1, INT64_MIN},
                               {1, INT64_MAX - 1},
                               {INT64_C(1) << 62, INT64_C(1) << 62},
                               {-(INT64_C(1) << 62), -(INT64_C(1) << 62)},
                               {5, -7}};
    const bool edge_ok[] = {false, false, true, false, false, true,
                            true,  false, true, false, true,  true};
    for (size_t i = 0; i < sizeof edge / sizeof edge[0]; i++) {
        int64_t a = edge[i][0], b = a;
        bool ra = dt_fixed_add(&a, edge[i][1]), rb = dt_fixed_add_portable_(&b, edge[i][1]);
        CHECK_INT_EQ(ra, edge_ok[i]);
        CHECK_INT_EQ(rb, edge_ok[i]);
        CHECK_INT_EQ(a, b);
        if (!ra) CHECK_INT_EQ(a, edge[i][0]); /* unchanged on overflow */
    }
    rng_state_ = 3;
    for (int i = 0; i < 100000; i++) {
        int64_t a = (int64_t)rng_next() >> rng_int(0, 3), b = (int64_t)rng_next() >> rng_int(0, 3);
        int64_t x = a, y = a;
        i128 exact = (i128)a + b;
        bool fits = exact <= INT64_MAX && exact >= INT64_MIN;
        CHECK_INT_EQ(dt_fixed_add(&x, b), fits);
        CHECK_INT_EQ(dt_fixed_add_portable_(&y, b), fits);
        CHECK_INT_EQ(x, y);
    }

    /* dt_fixed_sum_rows_at_shift with a shift 2 above the chosen one: the 4th 1.0 overflows */
    float in[4 * 3] = {0.5f, 1.0f, 0.0f, 0.5f, 1.0f, 0.0f, 0.5f, 1.0f, 0.0f, 0.5f, 1.0f, 0.0f};
    float out[4];
    int64_t scratch[4];
    struct dt_error err = {0};
    int shift = dt_fixed_shift_for(1.0f, 4);
    CHECK_INT_EQ(shift, 59);
    CHECK_INT_EQ(dt_fixed_sum_rows_at_shift(out, in, 4, 3, shift, scratch, &err), DT_OK);
    CHECK_BITS_EQ(out[1], 4.0f, "%s", "4 * 1.0 at the chosen shift");
    CHECK_INT_EQ(dt_fixed_sum_rows_at_shift(out, in, 4, 3, shift + 2, scratch, &err),
                 DT_ERR_NUMERIC);
    CHECK_INT_EQ(err.status, DT_ERR_NUMERIC);
    CHECK_CONTAINS(err.msg, "fixed-point overflow");
    CHECK_CONTAINS(err.msg, "row 3, column 1");
    /* a single term beyond 2^63 */
    CHECK_INT_EQ(dt_fixed_sum_rows_at_shift(out, in, 4, 3, 63, scratch, &err), DT_ERR_NUMERIC);
    CHECK_CONTAINS(err.msg, "fixed-point overflow");
    CHECK_CONTAINS(err.msg, "row 0, column 1");
    CHECK_INT_EQ(dt_fixed_sum_rows_at_shift(out, in, 4, 3, DT_FIXED_SHIFT_INVALID, scratch, &err),
                 DT_ERR_NUMERIC);
    CHECK_CONTAINS(err.msg, "fixed-point shift");

    /* non-finite inputs, with row and column */
    float grid[7 * 4];
    for (int i = 0; i < 7 * 4; i++) grid[i] = (float)i;
    grid[5 * 4 + 2] = NAN;
    grid[6 * 4 + 3] = INFINITY;
    int shift_out = 0;
    CHECK_INT_EQ(dt_fixed_sum_rows(out, grid, 7, 4, scratch, &shift_out, &err), DT_ERR_NUMERIC);
    CHECK_CONTAINS(err.msg, "non-finite input (nan) at row 5, column 2");
    CHECK_INT_EQ(dt_fixed_sum_rows_at_shift(out, grid, 7, 4, 20, scratch, &err), DT_ERR_NUMERIC);
    CHECK_CONTAINS(err.msg, "non-finite input (nan) at row 5, column 2");
    grid[0] = -INFINITY;
    CHECK_INT_EQ(dt_fixed_sum_rows(out, grid, 7, 4, scratch, NULL, &err), DT_ERR_NUMERIC);
    CHECK_CONTAINS(err.msg, "non-finite input (inf) at row 0, column 0");
    CHECK_INT_EQ(dt_fixed_sum_rows(out, grid, 7, 4, scratch, NULL, NULL), DT_ERR_NUMERIC);

    /* a sum beyond the float range */
    float big[2 * 2] = {1.0f, -FLT_MAX, 2.0f, -FLT_MAX};
    CHECK_INT_EQ(dt_fixed_sum_rows(out, big, 2, 2, scratch, NULL, &err), DT_ERR_NUMERIC);
    CHECK_CONTAINS(err.msg, "column 1 overflows the float range");
    big[3] = FLT_MAX;
    CHECK_INT_EQ(dt_fixed_sum_rows(out, big, 2, 2, scratch, NULL, &err), DT_OK);
    CHECK_BITS_EQ(out[1], 0.0f, "%s", "-FLT_MAX + FLT_MAX");
    /* one scale per tensor: beside FLT_MAX the shift is -67, so 1 and 2 quantise to 0 */
    CHECK_INT_EQ(dt_fixed_shift_for(FLT_MAX, 2), -67);
    CHECK_BITS_EQ(out[0], 0.0f, "%s", "1 + 2 beside FLT_MAX");
}

/* ---- single_rounding ------------------------------------------------------------------- */

DT_TEST(single_rounding)
{
    const struct {
        int64_t acc;
        int shift;
        uint32_t want;
    } lit[] = {
        {(INT64_C(1) << 24) + 1, 0, 0x4B800000u}, /* tie -> even 2^24 */
        {(INT64_C(1) << 24) + 2, 0, 0x4B800001u}, /* exact */
        {(INT64_C(1) << 24) + 3, 0, 0x4B800002u}, /* tie -> even 2^24+4 */
        {-((INT64_C(1) << 24) + 1), 0, 0xCB800000u},
        {(INT64_C(1) << 25) + 1, 0, 0x4C000000u},  /* below the tie */
        {(INT64_C(1) << 25) + 2, 0, 0x4C000000u},  /* tie -> even */
        {(INT64_C(1) << 25) + 3, 0, 0x4C000001u},  /* above the tie */
        {(INT64_C(1) << 25) + 6, 0, 0x4C000002u},  /* tie -> even (up) */
        {(INT64_C(1) << 24) + 1, 30, 0x3C800000u}, /* tie at 2^-6 */
        {INT64_MAX, 0, 0x5F000000u},               /* rounds up to 2^63 */
        {INT64_MIN, 0, 0xDF000000u},               /* -2^63 exact */
        {INT64_MAX, 10, 0x5A000000u},              /* 2^53 */
        {(INT64_C(1) << 53) + 1, 0, 0x5A000000u},
        {(INT64_C(0xffffff) << 39), -65, 0x7F7FFFFFu},  /* FLT_MAX */
        {(INT64_C(0x1ffffff) << 38), -65, 0x7F800000u}, /* tie above FLT_MAX -> Inf */
        {3, 149, 0x00000003u},                          /* subnormal, exact */
        {3, 150, 0x00000002u},                          /* 1.5 * 2^-149 -> 2 */
        {5, 150, 0x00000002u},                          /* 2.5 -> 2 */
        {7, 150, 0x00000004u},                          /* 3.5 -> 4 */
        {3, 151, 0x00000001u},                          /* 0.75 -> 1 */
        {1, 150, 0x00000000u},                          /* 0.5 -> +0 */
        {-1, 150, 0x80000000u},                         /* -0.5 -> -0 */
        {INT64_C(1) << 23, 149, 0x00800000u},           /* FLT_MIN */
        {(INT64_C(1) << 25) - 1, 150, 0x01000000u},     /* tie carries into 2^-125 */
        {0, 0, 0x00000000u},
        {1, 1000, 0x00000000u},
        {1, -1000, 0x7F800000u},
        {-1, INT_MIN, 0xFF800000u},
        {INT64_MAX, INT_MAX, 0x00000000u},
    };
    for (size_t i = 0; i < sizeof lit / sizeof lit[0]; i++) {
        CHECK_BITS_EQ(dt_fixed_to_float(lit[i].acc, lit[i].shift), u2f(lit[i].want),
                      "acc %" PRId64 " shift %d", lit[i].acc, lit[i].shift);
        if (lit[i].shift > -2000 && lit[i].shift < 2000)
            CHECK_BITS_EQ(ref_to_float(lit[i].acc, lit[i].shift), u2f(lit[i].want),
                          "reference: acc %" PRId64 " shift %d", lit[i].acc, lit[i].shift);
    }

    /* the rounding shift itself at its edges (r == 64 is reachable only through it) */
    CHECK_INT_EQ(dt_fixed_rne_shr_(UINT64_MAX, 64), 1);
    CHECK_INT_EQ(dt_fixed_rne_shr_(UINT64_C(1) << 63, 64), 0);
    CHECK_INT_EQ(dt_fixed_rne_shr_((UINT64_C(1) << 63) + 1, 64), 1);
    CHECK_INT_EQ(dt_fixed_rne_shr_(UINT64_MAX, 65), 0);
    CHECK_INT_EQ(dt_fixed_rne_shr_(3, 1), 2);  /* 1.5 -> 2 */
    CHECK_INT_EQ(dt_fixed_rne_shr_(5, 1), 2);  /* 2.5 -> 2 */
    CHECK_INT_EQ(dt_fixed_rne_shr_(11, 2), 3); /* 2.75 -> 3 */

    /* random acc of every bit length, shifts across the normal, subnormal, overflow ranges */
    rng_state_ = 4;
    for (int i = 0; i < 300000; i++) {
        int64_t acc = (int64_t)(rng_next() >> rng_int(1, 63));
        if (rng_next() & 1) acc = -acc;
        int shift = rng_int(-140, 260);
        CHECK_BITS_EQ(dt_fixed_to_float(acc, shift), ref_to_float(acc, shift),
                      "acc %" PRId64 " shift %d", acc, shift);
    }

    /* exact ties and their neighbours, quantum 2^j: acc = K * 2^j + 2^(j-1) + d.
     * Normal results: K has 24 bits. Subnormal results: shift = 149 + j, K < 2^23. The
     * naive two-step conversion ldexpf((float)acc, -shift) rounds twice and must differ
     * somewhere in the subnormal set (negative control: the reference can see it). */
    int ties = 0, naive_wrong = 0;
    for (int j = 1; j <= 39; j++)
        for (int t = 0; t < 600; t++) {
            bool subnormal = t % 2;
            int64_t k = subnormal ? (int64_t)(rng_next() >> rng_int(41, 63))
                                  : (int64_t)((rng_next() >> 40) | (UINT64_C(1) << 23));
            int shift = subnormal ? 149 + j : rng_int(j - 100, 149 + j);
            for (int d = -1; d <= 1; d++) {
                int64_t acc = (k << j) + (INT64_C(1) << (j - 1)) + d;
                if (rng_next() & 1) acc = -acc;
                float want = ref_to_float(acc, shift);
                CHECK_BITS_EQ(dt_fixed_to_float(acc, shift), want, "acc %" PRId64 " shift %d", acc,
                              shift);
                ties += d == 0;
                if (subnormal) naive_wrong += f2u(ldexpf((float)acc, -shift)) != f2u(want);
            }
        }
    fprintf(stderr, "ties tested: %d; naive (float)acc * 2^-shift wrong in %d subnormal cases\n",
            ties, naive_wrong);
    CHECK(naive_wrong > 0);
}

/* ---- shift_choice ---------------------------------------------------------------------- */

/* n * max * 2^shift < 2^62, exactly (max = M * 2^e, n * M < 2^87) */
static bool below_2_62(float max_abs, int64_t n, int shift)
{
    uint64_t m;
    int e;
    bool neg;
    float_split(&m, &e, &neg, max_abs);
    i128 p = (i128)n * (i128)m;
    int t = 62 - e - shift; /* p * 2^(e+shift) < 2^62  <=>  p < 2^t */
    if (p == 0) return true;
    if (t >= 120) return true;
    if (t < 0) return false;
    return p < ((i128)1 << t);
}

DT_TEST(shift_choice)
{
    CHECK_INT_EQ(DT_FIXED_SHIFT_MIN, -129);
    CHECK_INT_EQ(DT_FIXED_SHIFT_MAX, 149);
    CHECK_INT_EQ(dt_fixed_shift_for(0.0f, 1000), DT_FIXED_SHIFT_MAX);
    CHECK_INT_EQ(dt_fixed_shift_for(-0.0f, 1000), DT_FIXED_SHIFT_MAX);
    CHECK_INT_EQ(dt_fixed_shift_for(1.0f, 0), DT_FIXED_SHIFT_MAX);
    CHECK_INT_EQ(dt_fixed_shift_for(NAN, 5), DT_FIXED_SHIFT_INVALID);
    CHECK_INT_EQ(dt_fixed_shift_for(INFINITY, 5), DT_FIXED_SHIFT_INVALID);
    CHECK_INT_EQ(dt_fixed_shift_for(-INFINITY, 5), DT_FIXED_SHIFT_INVALID);
    CHECK_INT_EQ(dt_fixed_shift_for(1.0f, -1), DT_FIXED_SHIFT_INVALID);
    CHECK(!dt_fixed_shift_valid(DT_FIXED_SHIFT_INVALID));
    CHECK_INT_EQ(dt_fixed_shift_for(1.0f, 1), 61);
    CHECK_INT_EQ(dt_fixed_shift_for(-1.0f, 1), 61);
    CHECK_INT_EQ(dt_fixed_shift_for(1.0f, 3), 60); /* 3 * 2^60 < 2^62 <= 3 * 2^61 */
    CHECK_INT_EQ(dt_fixed_shift_for(1.0f, 4), 59);
    CHECK_INT_EQ(dt_fixed_shift_for(0x1p-149f, 1), DT_FIXED_SHIFT_MAX);       /* 210, clamped */
    CHECK_INT_EQ(dt_fixed_shift_for(FLT_MAX, INT64_MAX), DT_FIXED_SHIFT_MIN); /* reached */
    CHECK(below_2_62(FLT_MAX, INT64_MAX, DT_FIXED_SHIFT_MIN));

    /* sweep: maximal shift below 2^62, and the worst case n * max sums without overflow */
    rng_state_ = 5;
    int clamped = 0;
    for (int i = 0; i < 200000; i++) {
        float m = u2f((uint32_t)(rng_next() % 0x7f800000u));
        int64_t n = (int64_t)(rng_next() >> rng_int(1, 63));
        if (i < 64) m = i % 2 ? FLT_MAX : 0x1p-149f, n = INT64_MAX >> (i / 2);
        if (m == 0.0f || n == 0) continue;
        int s = dt_fixed_shift_for(m, n);
        CHECK(dt_fixed_shift_valid(s));
        CHECK(below_2_62(m, n, s));
        if (s < DT_FIXED_SHIFT_MAX) CHECK(!below_2_62(m, n, s + 1));
        else clamped++;
        int64_t q = 0;
        CHECK(dt_fixed_from_float(&q, m, s));
        CHECK((i128)n * q < ((i128)1 << 63)); /* n copies of +max (or -max) fit */
    }
    fprintf(stderr, "sweep: %d shifts clamped to DT_FIXED_SHIFT_MAX\n", clamped);

    /* dt_fixed_sum_rows takes max |in| over the whole tensor, wherever it sits */
    {
        float v[3 * 4];
        int64_t scratch[4];
        float out[4];
        for (int pos = 0; pos < 12; pos++) {
            for (int i = 0; i < 12; i++) v[i] = 0.25f * (float)(i - 6);
            v[pos] = pos % 2 ? -1000.0f : 1000.0f;
            int s = -1;
            CHECK_INT_EQ(dt_fixed_sum_rows(out, v, 3, 4, scratch, &s, NULL), DT_OK);
            CHECK_INT_EQ(s, dt_fixed_shift_for(1000.0f, 3));
        }
    }

    /* real worst-case accumulations: n copies of +-max, in sequence */
    const float maxes[] = {1.0f, 0.1f, 0x1.fffffep-1f, 3.0e38f, 1e-30f, 0x1p-140f, 12345.678f};
    const int64_t ns[] = {1, 3, 1000, 99991};
    for (size_t a = 0; a < sizeof maxes / sizeof maxes[0]; a++)
        for (size_t b = 0; b < sizeof ns / sizeof ns[0]; b++) {
            int s = dt_fixed_shift_for(maxes[a], ns[b]);
            int64_t q = 0, pos = 0, neg = 0;
            bool ok = dt_fixed_from_float(&q, maxes[a], s);
            for (int64_t r = 0; r < ns[b] && ok; r++)
                ok = dt_fixed_add(&pos, q) && dt_fixed_add(&neg, -q);
            CHECK(ok);
            CHECK(ok && (i128)pos == (i128)ns[b] * q && neg == -pos);
        }
    /* negative control: two bits beyond the chosen shift, 4 * 1.0 overflows */
    {
        int s = dt_fixed_shift_for(1.0f, 4) + 2;
        int64_t q = 0, acc = 0;
        bool ok = dt_fixed_from_float(&q, 1.0f, s);
        for (int r = 0; r < 4 && ok; r++) ok = dt_fixed_add(&acc, q);
        CHECK(!ok);
    }
}

/* The CPU's fast conversion (one double multiply + llrint) gives dt_fixed_from_float's
 * bits for every term inside the shift's bound: random bit patterns at every exponent
 * (subnormals included), every valid shift, and exact ties. */
DT_TEST(bounded_matches_exact)
{
    rng_state_ = 99;
    long checked = 0;
    for (int shift = DT_FIXED_SHIFT_MIN; shift <= DT_FIXED_SHIFT_MAX; shift++)
        for (int i = 0; i < 4000; i++) {
            float x;
            uint32_t bits = (uint32_t)rng_next() & 0xff7fffffu; /* exponent below 0xff */
            memcpy(&x, &bits, sizeof x);
            if (i % 4 == 0) x = (float)ldexp((double)(rng_next() % 1000000) + 0.5, -rng_int(0, 20));
            if (!(fabsf(x) * ldexp(1.0, shift) < 0x1p62)) continue; /* outside the bound */
            int64_t q = 0;
            CHECK(dt_fixed_from_float(&q, x, shift));
            int64_t fast = dt_fixed_from_float_bounded(x, dt_fixed_scale(shift));
            if (q != fast) {
                fprintf(stderr, "x=%a shift=%d: exact %lld, bounded %lld\n", (double)x, shift,
                        (long long)q, (long long)fast);
                dt_check_failures_++;
                return;
            }
            checked++;
        }
    CHECK(checked > 400000);
    /* ties go to even */
    CHECK_INT_EQ(dt_fixed_from_float_bounded(2.5f, 1.0), 2);
    CHECK_INT_EQ(dt_fixed_from_float_bounded(3.5f, 1.0), 4);
    CHECK_INT_EQ(dt_fixed_from_float_bounded(-2.5f, 1.0), -2);
    CHECK_INT_EQ(dt_fixed_from_float_bounded(0x1p-149f, dt_fixed_scale(148)), 0); /* 0.5 */
    CHECK_INT_EQ(dt_fixed_from_float_bounded(0x3p-149f, dt_fixed_scale(148)), 2); /* 1.5 */
}

DT_TEST_MAIN(DT_CASE(exact_vs_reference), DT_CASE(order_independent), DT_CASE(overflow_reported),
             DT_CASE(single_rounding), DT_CASE(shift_choice), DT_CASE(bounded_matches_exact))
