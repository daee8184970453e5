/* The exact matrix product's per-element formulas (determinism/exact_product.h, issue 51):
 * the slicing round-trips, the int8 slice products combined equal the 128-bit integer dot
 * product of the fixed-point operands on random and adversarial inputs (huge and tiny
 * magnitudes in one row, zeros, subnormals, the largest K), in any order; the one rounding
 * is the integer's nearest float; and the product's error stays within its stated bound and
 * below an index-order float32 sum's on the models' shapes -- a bound a dropped slice breaks
 * (the mutation: the test sees it). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "determinism/exact_product.h"
#include "harness/setup/data.h"
#include "nets/model.h"
#include "nets/step.h"
#include "tests/check.h"
#include "tests/op_helpers.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}
static double unit(void) { return (double)(next() >> 11) / 9007199254740992.0; } /* [0, 1) */

/* A value of a "skewed" tensor: sign, a mantissa, a magnitude spread over 2^-spread .. 1. */
static float skewed(int spread)
{
    const double m = 1.0 + unit();
    const int e = -(int)(next() % (uint64_t)(spread + 1));
    return (float)((next() & 1 ? -m : m) * ldexp(1.0, e));
}

/* Half an ulp of float32 at |x| (0 at 0: ilogb(0) is INT_MIN). */
static double half_ulp(double x) { return x == 0 ? 0.0 : 0.5 * ldexp(1.0, ilogb(x) - 23); }

static int row_scale(const float *v, int64_t n, int64_t stride)
{
    return dt_xp_row_scale(v, n, stride);
}

/* sum_k a[k] b[k] in 128 bits, term by term (the reference: K 2^112 < 2^127 at two levels). */
static dt_xp_acc dot_ref(const int64_t *a, const int64_t *b, int64_t K)
{
    dt_xp_acc acc = 0;
    for (int64_t k = 0; k < K; k++) acc += (dt_xp_acc)a[k] * b[k];
    return acc;
}

/* The exact product of A (M x K) and B (K x N), row-major, at `levels` levels, into C, two
 * ways: `sliced` the int8 slice products (int32, as an int8 GEMM computes them) combined,
 * else the direct 128-bit dot product of the fixed-point operands. drop >= 0 leaves slice
 * `drop` out (the mutation). acc (M x N) receives the integers when not NULL. */
static void xp_matmul(float *C, dt_xp_acc *acc, const float *A, const float *B, int64_t M,
                      int64_t K, int64_t N, int levels, bool sliced, int drop)
{
    int *sa = malloc((size_t)M * sizeof *sa), *sb = malloc((size_t)N * sizeof *sb);
    int64_t *XA = malloc((size_t)(M * K) * sizeof *XA), *XB = malloc((size_t)(K * N) * sizeof *XB);
    const int S = DT_XP_SLICES * levels;
    for (int64_t i = 0; i < M; i++) sa[i] = row_scale(A + i * K, K, 1);
    for (int64_t j = 0; j < N; j++) sb[j] = row_scale(B + j, K, N);
    for (int64_t i = 0; i < M; i++)
        for (int64_t k = 0; k < K; k++) XA[i * K + k] = dt_xp_fixed(A[i * K + k], sa[i], levels);
    for (int64_t k = 0; k < K; k++)
        for (int64_t j = 0; j < N; j++) XB[k * N + j] = dt_xp_fixed(B[k * N + j], sb[j], levels);
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            dt_xp_acc a = 0;
            if (sliced) {
                for (int p = 0; p < S; p++)
                    for (int q = 0; q < S; q++) {
                        if (p == drop || q == drop) continue;
                        int32_t P = 0;
                        for (int64_t k = 0; k < K; k++)
                            P += (int32_t)dt_xp_slice(XA[i * K + k], p, levels) *
                                 (int32_t)dt_xp_slice(XB[k * N + j], q, levels);
                        dt_xp_combine(&a, P, p, q, levels);
                    }
            } else { /* the plain 128-bit dot product, term by term */
                for (int64_t k = 0; k < K; k++) a += (dt_xp_acc)XA[i * K + k] * XB[k * N + j];
            }
            if (acc) acc[i * N + j] = a;
            C[i * N + j] = dt_xp_to_float(a, dt_xp_out_exp(sa[i], sb[j], levels));
        }
    free(sa), free(sb), free(XA), free(XB);
}

/* X = trunc(x 2^(28 levels - scale)), |X| < 2^(28 levels), its slices give X back, and at
 * two levels so do its halves. */
DT_TEST(slices_round_trip)
{
    for (int t = 0; t < 200000; t++) {
        const int levels = 1 + t % 2, bits = DT_XP_BITS * levels;
        float x;
        if (t % 7 == 0) {
            uint32_t b = (uint32_t)next() & 0x807fffffu; /* subnormals and zero */
            memcpy(&x, &b, 4);
        } else {
            x = skewed(60);
        }
        /* the row's scale: x itself, or a larger neighbour's */
        const float top = t % 3 ? fabsf(x) : fabsf(x) * (float)(1 + (next() % 1000));
        const int s = dt_xp_scale(top);
        if (top == 0.0f) {
            CHECK_INT_EQ(s, DT_XP_ZERO);
            CHECK_INT_EQ(dt_xp_fixed(x, s, levels), 0);
            continue;
        }
        CHECK(ldexp(1.0, s - 1) <= top && top < ldexp(1.0, s));
        const int64_t X = dt_xp_fixed(x, s, levels);
        CHECK(llabs(X) < (INT64_C(1) << bits));
        const long double want = truncl((long double)x * ldexpl(1.0L, bits - s));
        CHECK((long double)X == want);
        int64_t back = 0;
        for (int p = 0; p < DT_XP_SLICES * levels; p++) {
            const int8_t d = dt_xp_slice(X, p, levels);
            CHECK(d != -128 && (d == 0 || (d < 0) == (X < 0)));
            back = back * 128 + d;
        }
        CHECK_INT_EQ(back, X);
        const int32_t hi = dt_xp_hi(X), lo = dt_xp_lo(X);
        CHECK(llabs(hi) < (INT64_C(1) << DT_XP_BITS) && llabs(lo) < (INT64_C(1) << DT_XP_BITS));
        CHECK((hi == 0 || (hi < 0) == (X < 0)) && (lo == 0 || (lo < 0) == (X < 0)));
        CHECK_INT_EQ((int64_t)hi * (INT64_C(1) << DT_XP_BITS) + lo, X);
    }
    CHECK_INT_EQ(dt_xp_scale(INFINITY), DT_XP_NONFINITE);
    CHECK_INT_EQ(dt_xp_scale(NAN), DT_XP_NONFINITE);
    CHECK_INT_EQ(dt_xp_scale(1.0f), 1);
    CHECK_INT_EQ(dt_xp_scale(0.75f), 0);
}

/* A matrix with adversarial rows: huge and tiny magnitudes in one row, zeros, subnormals. */
static void adversarial(float *v, int64_t rows, int64_t cols)
{
    for (int64_t i = 0; i < rows * cols; i++) v[i] = skewed(20);
    for (int64_t c = 0; c < cols; c++) {
        v[0 * cols + c] = c % 2 ? 3e38f : 1e-38f;    /* huge beside tiny */
        v[1 * cols + c] = 0.0f;                      /* a zero row */
        v[2 * cols + c] = (float)(c % 3) * 1.4e-45f; /* subnormals */
        v[3 * cols + c] = c == 0 ? -1.0f : 0x1p-40f; /* one value above the rest */
    }
}

/* The slice products combined are the integer dot product exactly, on random and
 * adversarial inputs at both levels, and at the largest K the int32 slice products and the
 * 128-bit combination do not overflow. */
DT_TEST(slices_combine_to_the_integer_product)
{
    enum { M = 6, K = 137, N = 5 }; /* K past one run of 64 */
    float A[M * K], B[K * N], C1[M * N], C2[M * N];
    dt_xp_acc a1[M * N], a2[M * N];
    for (int round = 0; round < 20; round++) {
        const int levels = 1 + round / 10;
        for (int i = 0; i < M * K; i++) A[i] = skewed(30);
        for (int i = 0; i < K * N; i++) B[i] = skewed(30);
        if (round % 2) adversarial(A, M, K);
        xp_matmul(C1, a1, A, B, M, K, N, levels, true, -1);
        xp_matmul(C2, a2, A, B, M, K, N, levels, false, -1);
        CHECK(memcmp(a1, a2, sizeof a1) == 0);
        /* the ops' forms are the same integer: dt_xp_dot (int64 products in runs of 64) at one
         * level; at two the four half products joined, and rounded by dt_xp_to_float_halves */
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) {
                int64_t xa[K], xb[K];
                int64_t ha[2][K], hb[2][K];
                const int sa = row_scale(A + i * K, K, 1), sb = row_scale(B + j, K, N);
                for (int k = 0; k < K; k++) {
                    xa[k] = dt_xp_fixed(A[i * K + k], sa, levels);
                    xb[k] = dt_xp_fixed(B[k * N + j], sb, levels);
                    ha[0][k] = levels == 1 ? xa[k] : dt_xp_hi(xa[k]);
                    hb[0][k] = levels == 1 ? xb[k] : dt_xp_hi(xb[k]);
                    ha[1][k] = dt_xp_lo(xa[k]), hb[1][k] = dt_xp_lo(xb[k]);
                }
                CHECK(dot_ref(xa, xb, K) == a2[i * N + j]);
                if (levels == 1) {
                    CHECK(dt_xp_dot(ha[0], hb[0], K, 1) == a2[i * N + j]);
                } else {
                    const dt_xp_acc hh = dt_xp_dot(ha[0], hb[0], K, 1);
                    const dt_xp_acc hl = dt_xp_dot(ha[0], hb[1], K, 1);
                    const dt_xp_acc lh = dt_xp_dot(ha[1], hb[0], K, 1);
                    const dt_xp_acc ll = dt_xp_dot(ha[1], hb[1], K, 1);
                    CHECK(dt_xp_join(hh, hl, lh, ll) == a2[i * N + j]);
                    /* the int8 path's fold: the 64 slice pairs land in the same four parts */
                    dt_xp_acc part[4] = {0, 0, 0, 0};
                    for (int p = 0; p < DT_XP_SLICES * 2; p++)
                        for (int q = 0; q < DT_XP_SLICES * 2; q++) {
                            int32_t P = 0;
                            for (int k = 0; k < K; k++)
                                P += (int32_t)dt_xp_slice(xa[k], p, 2) *
                                     (int32_t)dt_xp_slice(xb[k], q, 2);
                            dt_xp_fold(part, P, p, q, 2);
                        }
                    CHECK(part[0] == hh && part[1] == hl && part[2] == lh && part[3] == ll);
                    const float f = dt_xp_to_float_halves(hh, hl, lh, ll, -90);
                    const float g = dt_xp_to_float(a2[i * N + j], -90);
                    CHECK(memcmp(&f, &g, 4) == 0);
                }
            }
        CHECK(memcmp(C1, C2, sizeof C1) == 0);
    }
    /* the largest K: every slice at +-127, the int32 products at their bound */
    CHECK((int64_t)DT_XP_K_MAX * 127 * 127 <= INT32_MAX);
    CHECK((int64_t)(DT_XP_K_MAX + 1) * 127 * 127 > INT32_MAX);
    for (int levels = 1; levels <= DT_XP_LEVELS_MAX; levels++) {
        const int64_t Km = DT_XP_K_MAX, S = DT_XP_SLICES * levels;
        const int64_t X = (INT64_C(1) << (DT_XP_BITS * levels)) - 1; /* every digit 127 */
        for (int p = 0; p < S; p++) CHECK_INT_EQ(dt_xp_slice(X, p, levels), 127);
        /* at one level the combination is the 128-bit integer; at two its value passes
         * 2^127, so the slice pairs are combined per half pair and rounded by halves */
        if (levels == 1) {
            dt_xp_acc acc = 0, want = 0;
            for (int p = 0; p < S; p++)
                for (int q = 0; q < S; q++)
                    dt_xp_combine(&acc, (int32_t)(Km * 127 * 127), p, q, levels);
            for (int64_t k = 0; k < Km; k++) want += (dt_xp_acc)X * X;
            CHECK(acc == want && acc > 0);
        }
    }
}

/* dt_xp_to_float_halves rounds hh 2^56 + (hl + lh) 2^28 + ll once, for parts up to K = 2^31
 * (the joined value past 2^127): against dt_xp_to_float of the joined integer where it fits,
 * and where it does not against an exact scaled form -- ll a multiple of 2^8, so value / 2^8
 * fits 128 bits for |hh| < 2^78 -- on random parts, ties, near-ties, negatives and parts of
 * mixed signs; at the largest parts the result is finite and has the sign of hh. */
DT_TEST(halves_round_once)
{
    for (int t = 0; t < 300000; t++) {
        const int big = t % 2;
        /* parts: |hh| < 2^78 (big) or < 2^40, the others of any sign below 2^75 */
        dt_xp_acc hh = (dt_xp_acc)(next() >> (big ? 0 : 24)) << (big ? 14 : 0);
        dt_xp_acc hl = ((dt_xp_acc)next() << 11) ^ next(), lh = (dt_xp_acc)(next() >> 3);
        dt_xp_acc ll = (((dt_xp_acc)next() << 11) ^ next()) & ~(dt_xp_acc)255;
        if (next() & 1) hh = -hh;
        if (next() & 1) hl = -hl;
        if (next() & 1) ll = -ll;
        if (t % 5 == 0) ll = (dt_xp_acc)(next() % 3) << 27; /* 0 and r = 2^27, 2^28 */
        if (t % 7 == 0) { /* a tie in the joined value, or just above or below one */
            const dt_xp_acc m = (dt_xp_acc)((next() & 0xffffffu) | 0x800000u); /* 24 bits */
            hl = lh = 0;
            hh = (2 * m + 1) * ((dt_xp_acc)1 << (big ? 46 : 10));
            ll = (dt_xp_acc)(t % 3 - 1) * 256;
        }
        const int exp = (int)(next() % 300) - 250;
        const float got = dt_xp_to_float_halves(hh, hl, lh, ll, exp);
        const dt_xp_acc scaled = hh * ((dt_xp_acc)1 << 48) + (hl + lh) * ((dt_xp_acc)1 << 20) +
                                 ll / 256; /* value / 2^8, exact */
        const float want = dt_xp_to_float(scaled, exp + 8);
        CHECK(memcmp(&got, &want, 4) == 0);
        if (!big) {
            const float joined = dt_xp_to_float(dt_xp_join(hh, hl, lh, ll), exp);
            CHECK(memcmp(&got, &joined, 4) == 0);
        }
    }
    const dt_xp_acc top = ((dt_xp_acc)1 << 87) - 1; /* K = 2^31 at every half at its bound */
    const float f = dt_xp_to_float_halves(top, top, top, top, -140);
    CHECK(isfinite(f) && f > 0);
    CHECK(dt_xp_to_float_halves(-top, top, top, top, -140) < 0);
}

/* Any order: the slice products summed over k backwards, the slice pairs in reverse, give
 * the same integers (and so the same floats). */
DT_TEST(any_order_same_bits)
{
    enum { M = 4, K = 301, N = 3 };
    static float A[M * K], B[K * N];
    for (int i = 0; i < M * K; i++) A[i] = skewed(24);
    for (int i = 0; i < K * N; i++) B[i] = skewed(24);
    for (int levels = 1; levels <= DT_XP_LEVELS_MAX; levels++) {
        float C[M * N];
        dt_xp_acc ref[M * N];
        xp_matmul(C, ref, A, B, M, K, N, levels, true, -1);
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) {
                const int sa = row_scale(A + i * K, K, 1), sb = row_scale(B + j, K, N);
                dt_xp_acc a = 0;
                for (int p = DT_XP_SLICES * levels - 1; p >= 0; p--)
                    for (int q = DT_XP_SLICES * levels - 1; q >= 0; q--) {
                        int32_t P = 0;
                        for (int64_t k = K - 1; k >= 0; k--)
                            P += (int32_t)dt_xp_slice(dt_xp_fixed(A[i * K + k], sa, levels), p,
                                                      levels) *
                                 (int32_t)dt_xp_slice(dt_xp_fixed(B[k * N + j], sb, levels), q,
                                                      levels);
                        dt_xp_combine(&a, P, p, q, levels);
                    }
                CHECK(a == ref[i * N + j]);
                const float f = dt_xp_to_float(a, dt_xp_out_exp(sa, sb, levels));
                CHECK(memcmp(&f, &C[i * N + j], 4) == 0);
            }
    }
}

/* dt_xp_to_float is the integer's nearest float: dt_fixed_to_float's bits wherever the
 * integer fits int64, and the ties, subnormals and overflow of 128-bit integers. */
DT_TEST(one_rounding)
{
    for (int t = 0; t < 200000; t++) {
        const int64_t v = (int64_t)(next() >> (next() % 64)) * (next() & 1 ? -1 : 1);
        const int exp = (int)(next() % 400) - 250;
        const float a = dt_xp_to_float((dt_xp_acc)v, exp), b = dt_fixed_to_float(v, -exp);
        CHECK(memcmp(&a, &b, 4) == 0);
    }
    const dt_xp_acc big = (dt_xp_acc)1 << 100;
    /* 2^100 (1 + 2^-24): a tie between 2^100 and its successor, to even (2^100) */
    float f = dt_xp_to_float(big + ((dt_xp_acc)1 << 76), 0);
    CHECK(f == 0x1p100f);
    f = dt_xp_to_float(big + ((dt_xp_acc)1 << 76) + 1, 0); /* just above the tie */
    CHECK(f == nextafterf(0x1p100f, INFINITY));
    f = dt_xp_to_float(-(big + 3 * ((dt_xp_acc)1 << 76)), 0); /* a tie to even, upwards */
    CHECK(f == -(0x1p100f + 0x1p78f));
    CHECK(dt_xp_to_float(big, 28) == INFINITY); /* 2^128 */
    CHECK(dt_xp_to_float(-big, 27) == -0x1p127f);
    CHECK(dt_xp_to_float(big, -249) == 0x1p-149f); /* the smallest subnormal */
    CHECK(signbit(dt_xp_to_float(-big, -251)) && dt_xp_to_float(-big, -251) == 0.0f);
    CHECK(dt_xp_to_float(0, 5) == 0.0f && !signbit(dt_xp_to_float(0, 5)));
}

/* The error against a double reference, relative to each output's sum of |a||b| (the scale
 * a float sum's error bound is stated in), on the models' shapes with skewed values: the
 * exact product stays within its bound -- |C - exact| <= 2 K 2^(eA + eB - BITS) plus half an
 * ulp -- and below an index-order float32 sum's largest error; with its last slice dropped
 * the bound breaks (the mutation). The distributions are printed. */
static void error_on_shape(int64_t M, int64_t K, int64_t N, int spread)
{
    float *A = malloc((size_t)(M * K) * 4), *B = malloc((size_t)(K * N) * 4);
    float *C = malloc((size_t)(M * N) * 4), *Cd = malloc((size_t)(M * N) * 4);
    for (int64_t i = 0; i < M * K; i++) A[i] = skewed(spread);
    for (int64_t i = 0; i < K * N; i++) B[i] = skewed(spread);
    xp_matmul(C, NULL, A, B, M, K, N, 1, false, -1);
    xp_matmul(Cd, NULL, A, B, M, K, N, 1, true, DT_XP_SLICES - 1);
    double worst_xp = 0, worst_f32 = 0, worst_drop = 0, sum_xp = 0, sum_f32 = 0;
    int64_t over_bound = 0, over_bound_drop = 0;
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            double ref = 0, mag = 0;
            float f32 = 0.0f;
            for (int64_t k = 0; k < K; k++) {
                const double p = (double)A[i * K + k] * (double)B[k * N + j];
                ref += p, mag += fabs(p);
                f32 = f32 + A[i * K + k] * B[k * N + j];
            }
            const int sa = row_scale(A + i * K, K, 1), sb = row_scale(B + j, K, N);
            const double bound =
                2.0 * (double)K * ldexp(1.0, sa + sb - DT_XP_BITS) + half_ulp(ref) + 1e-300;
            const double exs = fabs((double)C[i * N + j] - ref);
            const double exd = fabs((double)Cd[i * N + j] - ref);
            over_bound += exs > bound;
            over_bound_drop += exd > bound;
            const double rx = exs / mag, rf = fabs((double)f32 - ref) / mag, rd = exd / mag;
            worst_xp = fmax(worst_xp, rx), worst_f32 = fmax(worst_f32, rf);
            worst_drop = fmax(worst_drop, rd);
            sum_xp += rx, sum_f32 += rf;
        }
    printf("  %lldx%lldx%lld (values 2^-%d..2): |error| / sum|a b|: exact product max %.2e mean "
           "%.2e; float32 index-order sum max %.2e mean %.2e; a slice dropped max %.2e\n",
           (long long)M, (long long)K, (long long)N, spread, worst_xp, sum_xp / (double)(M * N),
           worst_f32, sum_f32 / (double)(M * N), worst_drop);
    CHECK_INT_EQ(over_bound, 0);
    CHECK(over_bound_drop > 0); /* the mutation breaks the bound */
    CHECK(worst_xp <= worst_f32);
    free(A), free(B), free(C), free(Cd);
}

DT_TEST(error_within_bound_and_below_float32)
{
    error_on_shape(64, 784, 128, 8);  /* the MLP's first layer (a slice of its batch) */
    error_on_shape(128, 256, 64, 12); /* backward-weight shapes: long K over the batch */
    error_on_shape(32, 512, 96, 4);   /* a GPT projection's shape */
}

/* dt_xp_dot_vec (attention's sums under math: exact): within half an ulp plus its stated
 * truncation, n 2^(sa + sb - 56), of the double reference on skewed strided vectors -- where
 * the index-order float sum is not -- a NaN gives NaN, a zero vector +0, and the result does
 * not depend on which way the vectors are walked (reversed strides). */
DT_TEST(dot_vec_exact)
{
    enum { N = 200 };
    static float a[3 * N], b[2 * N], ar[3 * N], br[2 * N];
    double worst_xp = 0, worst_f = 0;
    for (int round = 0; round < 200; round++) {
        for (int i = 0; i < 3 * N; i++) a[i] = skewed(30);
        for (int i = 0; i < 2 * N; i++) b[i] = skewed(30);
        const int64_t n = 1 + round % N;
        double ref = 0, mag = 0;
        float f = 0.0f;
        for (int64_t k = 0; k < n; k++) {
            ref += (double)a[3 * k] * (double)b[2 * k], mag += fabs((double)a[3 * k] * b[2 * k]);
            f = f + a[3 * k] * b[2 * k];
        }
        const float x = dt_xp_dot_vec(a, 3, b, 2, n);
        const int sa = dt_xp_row_scale(a, n, 3), sb = dt_xp_row_scale(b, n, 2);
        CHECK(fabs((double)x - ref) <= half_ulp(ref) + (double)n * ldexp(1.0, sa + sb - 56));
        worst_xp = fmax(worst_xp, fabs((double)x - ref) / mag);
        worst_f = fmax(worst_f, fabs((double)f - ref) / mag);
        /* the same vectors walked backwards: the same bits */
        for (int64_t k = 0; k < n; k++)
            ar[3 * k] = a[3 * (n - 1 - k)], br[2 * k] = b[2 * (n - 1 - k)];
        const float y = dt_xp_dot_vec(ar, 3, br, 2, n);
        CHECK(memcmp(&x, &y, 4) == 0);
    }
    printf("  dot_vec: |error| / sum|a b| max %.2e; float32 index order max %.2e\n", worst_xp,
           worst_f);
    CHECK(worst_xp < worst_f);
    a[5] = NAN;
    CHECK(isnan(dt_xp_dot_vec(a, 1, b, 1, 10)));
    for (int i = 0; i < 10; i++) b[i] = 0.0f;
    const float z = dt_xp_dot_vec(a + 6, 1, b, 1, 4);
    CHECK(z == 0.0f && !signbit(z));
}

/* ---- the op ---------------------------------------------------------------------------- */

/* dt_matmul_exact on the CPU backend equals the reference (xp_matmul, then the bias) bit for
 * bit in every form -- A and B stored either way, one level and two, with and without a
 * bias -- at 1, 2 and 3 threads and under fast and portable (it obeys no control), on a
 * shape with partial tiles (M not a multiple of 8 rows, N of 16 columns, K past runs of 64)
 * and adversarial rows; a NaN is an error naming its row or column. */
DT_TEST(op_equals_reference_every_form)
{
    enum { M = 19, K = 133, N = 37 };
    static float A[M * K], B[K * N], At[K * M], Bt[N * K], bias[N], want[M * N], got[M * N];
    for (int i = 0; i < M * K; i++) A[i] = skewed(30);
    for (int i = 0; i < K * N; i++) B[i] = skewed(30);
    for (int i = 0; i < N; i++) bias[i] = skewed(4);
    adversarial(A, M, K);
    for (int i = 0; i < M; i++)
        for (int k = 0; k < K; k++) At[k * M + i] = A[i * K + k];
    for (int k = 0; k < K; k++)
        for (int j = 0; j < N; j++) Bt[j * K + k] = B[k * N + j];
    for (int threads = 1; threads <= 3; threads++) {
        struct dt_backend *be = cpu(threads);
        for (int form = 0; form < 16 * 2; form++) {
            const int trans = form % 4, levels = 1 + (form / 4) % 2;
            const bool with_bias = (form / 8) % 2, fast = form / 16;
            struct dt_policy pol;
            dt_policy_from_level(&pol, fast ? DT_LEVEL_FAST : DT_LEVEL_PORTABLE);
            xp_matmul(want, NULL, A, B, M, K, N, levels, false, -1);
            if (with_bias)
                for (int i = 0; i < M * N; i++) want[i] += bias[i % N];
            memset(got, 0xff, sizeof got);
            CHECK(dt_matmul_exact(be, got, trans & DT_XP_TA ? At : A, trans & DT_XP_TB ? Bt : B,
                                  with_bias ? bias : NULL, M, K, N, trans, levels, &pol) == DT_OK);
            CHECK(memcmp(got, want, sizeof got) == 0);
        }
        /* a NaN in A's row 5 (stored transposed: the error names the row, not the storage) */
        struct dt_policy pol;
        dt_policy_from_level(&pol, DT_LEVEL_PORTABLE);
        At[7 * M + 5] = NAN;
        CHECK(dt_matmul_exact(be, got, At, B, NULL, M, K, N, DT_XP_TA, 2, &pol) == DT_ERR_NUMERIC);
        struct dt_error err;
        DT_ASSERT(dt_backend_take_op_error(be, &err));
        CHECK(strstr(err.msg, "row 5 of A") != NULL);
        At[7 * M + 5] = A[5 * K + 7];
        dt_backend_destroy(be);
    }
}

/* The dense ops under math: exact are the exact product (forward with its bias, backward
 * data at one level, the weight gradient at two), so no order, thread count or `reduction`
 * value changes their bits: at 1-3 threads, with the forced-order hook off and drawing two
 * orders, under reduction unordered and fixed, the bits are the reference's. The negative
 * control: the same weight gradient under math: strict with reduction: unordered, where the
 * hook's two orders give two results. */
DT_TEST(dense_ops_under_exact_math_obey_no_order)
{
    enum { BT = 40, IN = 70, OUT = 33 };
    static float x[BT * IN], w[IN * OUT], bias[OUT], dy[BT * OUT], wt[OUT * IN], xt[IN * BT];
    static float y_ref[BT * OUT], dx_ref[BT * IN], dw_ref[IN * OUT], y[BT * OUT], dx[BT * IN],
        dw[IN * OUT], dw_a[IN * OUT];
    for (int i = 0; i < BT * IN; i++) x[i] = i % 5 ? skewed(12) : 0.0f; /* ReLU's zeros */
    for (int i = 0; i < IN * OUT; i++) w[i] = skewed(6);
    for (int i = 0; i < OUT; i++) bias[i] = skewed(3);
    for (int i = 0; i < BT * OUT; i++) dy[i] = skewed(20);
    for (int i = 0; i < IN; i++)
        for (int o = 0; o < OUT; o++) wt[o * IN + i] = w[i * OUT + o];
    for (int b = 0; b < BT; b++)
        for (int i = 0; i < IN; i++) xt[i * BT + b] = x[b * IN + i];
    xp_matmul(y_ref, NULL, x, w, BT, IN, OUT, DT_XP_LEVELS_FORWARD, false, -1);
    for (int i = 0; i < BT * OUT; i++) y_ref[i] += bias[i % OUT];
    xp_matmul(dx_ref, NULL, dy, wt, BT, OUT, IN, DT_XP_LEVELS_FORWARD, false, -1);
    xp_matmul(dw_ref, NULL, xt, dy, IN, BT, OUT, DT_XP_LEVELS_WGRAD, false, -1);
    for (int threads = 1; threads <= 3; threads++) {
        struct dt_backend *be = cpu(threads);
        for (int v = 0; v < 6; v++) {
            struct dt_policy pol;
            dt_policy_from_level(&pol, DT_LEVEL_FAST);
            pol.math = DT_MATH_EXACT;
            pol.reduction = v % 2 ? DT_REDUCTION_FIXED : DT_REDUCTION_UNORDERED;
            DT_ASSERT(dt_backend_set_forced_order(be, (uint64_t)(v / 2) * 7) == DT_OK);
            CHECK(dt_dense_forward(be, y, x, w, bias, BT, IN, OUT, &pol) == DT_OK);
            CHECK(dt_dense_backward_data(be, dx, dy, w, BT, IN, OUT, &pol) == DT_OK);
            CHECK(dt_dense_backward_weight(be, dw, x, dy, BT, IN, OUT, &pol) == DT_OK);
            CHECK(memcmp(y, y_ref, sizeof y) == 0);
            CHECK(memcmp(dx, dx_ref, sizeof dx) == 0);
            CHECK(memcmp(dw, dw_ref, sizeof dw) == 0);
        }
        if (threads == 2) { /* the negative control */
            struct dt_policy pol;
            dt_policy_from_level(&pol, DT_LEVEL_FAST);
            pol.math = DT_MATH_STRICT;
            DT_ASSERT(dt_backend_set_forced_order(be, 7) == DT_OK);
            CHECK(dt_dense_backward_weight(be, dw_a, x, dy, BT, IN, OUT, &pol) == DT_OK);
            DT_ASSERT(dt_backend_set_forced_order(be, 8) == DT_OK);
            CHECK(dt_dense_backward_weight(be, dw, x, dy, BT, IN, OUT, &pol) == DT_OK);
            CHECK(memcmp(dw, dw_a, sizeof dw) != 0);
        }
        DT_ASSERT(dt_backend_set_forced_order(be, 0) == DT_OK);
        dt_backend_destroy(be);
    }
}

/* The convolution's weight gradient under math: exact sums over batch and positions -- here
 * 60,000 patch rows, past the 2^127 that one 128-bit integer holds at two levels, so the
 * rounding by halves carries it: the same bits at 1-3 threads and under the forced order,
 * and within float32's rounding of a double reference (|error| <= 2^-23 |value| plus
 * 2^-40 of sum |a b|). */
DT_TEST(conv_weight_gradient_past_2_127)
{
    const struct dt_conv2d_shape cs = {.B = 150,
                                       .H = 24,
                                       .W = 24,
                                       .C = 1,
                                       .K_out = 6,
                                       .KH = 5,
                                       .KW = 5,
                                       .stride = 1,
                                       .pad = 0,
                                       .OH = 20,
                                       .OW = 20};
    const int64_t nx = cs.B * cs.H * cs.W, ny = cs.B * cs.OH * cs.OW * cs.K_out, nw = 25 * 6;
    float *x = malloc((size_t)nx * 4), *dy = malloc((size_t)ny * 4);
    float dw[2][25 * 6];
    /* values near their rows' tops, all positive: the integers pass 2^127 (checked below) */
    for (int64_t i = 0; i < nx; i++) x[i] = (float)(1.75 + 0.25 * unit());
    for (int64_t i = 0; i < ny; i++) dy[i] = (float)(1.75 + 0.25 * unit());
    for (int threads = 1; threads <= 3; threads++) {
        struct dt_backend *be = cpu(threads);
        struct dt_policy pol;
        dt_policy_from_level(&pol, DT_LEVEL_FAST);
        pol.math = DT_MATH_EXACT;
        DT_ASSERT(dt_backend_set_forced_order(be, threads == 3 ? 9 : 0) == DT_OK);
        CHECK(dt_conv2d_backward_weight(be, dw[threads > 1], x, dy, &cs, &pol) == DT_OK);
        if (threads > 1) CHECK(memcmp(dw[0], dw[1], sizeof dw[0]) == 0);
        dt_backend_destroy(be);
    }
    for (int64_t e = 0; e < nw; e++) { /* e = (kh, kw, c = 0) x K_out */
        const int64_t kh = e / 6 / 5, kw = e / 6 % 5, o = e % 6;
        double ref = 0, mag = 0;
        for (int64_t b = 0; b < cs.B; b++)
            for (int64_t oh = 0; oh < cs.OH; oh++)
                for (int64_t ow = 0; ow < cs.OW; ow++) {
                    const double p = (double)x[(b * cs.H + oh + kh) * cs.W + ow + kw] *
                                     (double)dy[((b * cs.OH + oh) * cs.OW + ow) * 6 + o];
                    ref += p, mag += fabs(p);
                }
        CHECK(fabs((double)dw[0][e] - ref) <= ldexp(fabs(ref), -23) + ldexp(mag, -40));
        /* both scales 2^1: the integer is ref 2^110, past 2^127 when ref >= 2^17 */
        if (e == 0) CHECK(ref * ldexp(1.0, 110) >= ldexp(1.0, 127));
    }
    free(x), free(dy);
}

/* On the GPU (label gpu): the CUDA backend's exact product gives the CPU's bits -- every
 * form of matmul_exact, the three dense ops under math: exact, and a weight gradient over
 * 40,000 rows (the integers past 2^127, rounded by halves) -- in its int8 form (cuBLAS int8
 * GEMMs) and in its simple one (DETRAIN_CUDA_XP=simple). */
static void on_device(struct dt_backend *g, float **d, const float *h, int64_t n)
{
    *d = dt_backend_alloc(g, (size_t)n * 4);
    dt_backend_upload(g, *d, h, (size_t)n * 4);
}

DT_TEST(gpu_equals_cpu)
{
    dt_backend_destroy(gpu_or_skip()); /* skips here without a GPU */
    struct dt_backend *c = cpu(2);
    enum { M = 37, K = 301, N = 45, R = 40000 };
    static float A[M * K], B[K * N], bias[N], want[M * N], got[M * N], X[R * 3], Y[R * 5],
        w3[3 * 5], w3g[3 * 5];
    for (int i = 0; i < M * K; i++) A[i] = skewed(30);
    for (int i = 0; i < K * N; i++) B[i] = skewed(30);
    for (int i = 0; i < N; i++) bias[i] = skewed(4);
    for (int i = 0; i < R * 3; i++) X[i] = (float)(1.75 + 0.25 * unit());
    for (int i = 0; i < R * 5; i++) Y[i] = (float)(1.75 + 0.25 * unit());
    adversarial(A, M, K);
    float *hx = malloc((size_t)(R * 3) * 4), *hx_g = malloc((size_t)(R * 3) * 4);
    for (int simple = 0; simple < 2; simple++) { /* the int8 form, then the simple one */
        /* the backend reads DETRAIN_CUDA_XP once, when made: one backend per form */
        if (simple) setenv("DETRAIN_CUDA_XP", "simple", 1);
        struct dt_backend *g = gpu_or_skip();
        float *dA, *dB, *dbias, *dC, *dX, *dY, *dW;
        on_device(g, &dA, A, M * K), on_device(g, &dB, B, K * N), on_device(g, &dbias, bias, N);
        on_device(g, &dC, want, M * N), on_device(g, &dX, X, R * 3), on_device(g, &dY, Y, R * 5);
        on_device(g, &dW, w3, 15);
        float *dx = dt_backend_alloc(g, (size_t)(R * 3) * 4);
        struct dt_policy pol;
        dt_policy_from_level(&pol, DT_LEVEL_PORTABLE);
        for (int form = 0; form < 16; form++) {
            /* the stored shapes: A (M, K) or (K, M), B (K, N) or (N, K), the same buffers */
            const int trans = form % 4, levels = 1 + (form / 4) % 2;
            const bool with_bias = form / 8;
            CHECK(dt_matmul_exact(c, want, A, B, with_bias ? bias : NULL, M, K, N, trans, levels,
                                  &pol) == DT_OK);
            CHECK(dt_matmul_exact(g, dC, dA, dB, with_bias ? dbias : NULL, M, K, N, trans, levels,
                                  &pol) == DT_OK);
            dt_backend_download(g, got, dC, sizeof got);
            CHECK(memcmp(got, want, sizeof got) == 0);
        }
        pol.math = DT_MATH_EXACT;
        const int64_t bt = M, in = K, out = N; /* the dense ops on A as x and B as w */
        CHECK(dt_dense_forward(c, want, A, B, bias, bt, in, out, &pol) == DT_OK);
        CHECK(dt_dense_forward(g, dC, dA, dB, dbias, bt, in, out, &pol) == DT_OK);
        dt_backend_download(g, got, dC, (size_t)(bt * out) * 4);
        CHECK(memcmp(got, want, (size_t)(bt * out) * 4) == 0);
        CHECK(dt_dense_backward_weight(c, w3, X, Y, R, 3, 5, &pol) == DT_OK);
        CHECK(dt_dense_backward_weight(g, dW, dX, dY, R, 3, 5, &pol) == DT_OK);
        dt_backend_download(g, w3g, dW, sizeof w3g);
        CHECK(memcmp(w3, w3g, sizeof w3) == 0);
        CHECK(dt_dense_backward_data(c, hx, Y, w3, R, 3, 5, &pol) == DT_OK);
        CHECK(dt_dense_backward_data(g, dx, dY, dW, R, 3, 5, &pol) == DT_OK);
        dt_backend_download(g, hx_g, dx, (size_t)(R * 3) * 4);
        CHECK(memcmp(hx, hx_g, (size_t)(R * 3) * 4) == 0);
        unsetenv("DETRAIN_CUDA_XP");
        float *bufs[] = {dA, dB, dbias, dC, dX, dY, dW, dx};
        for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) dt_backend_free(g, bufs[i]);
        dt_backend_destroy(g);
    }
    free(hx), free(hx_g);
    dt_backend_destroy(c);
}

/* ---- the models' real tensors -------------------------------------------------------------- */

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* C = A B in float32, index order (what today's `portable` product rounds like). */
static void f32_matmul(float *C, const float *A, const float *B, int64_t M, int64_t K, int64_t N)
{
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            float s = 0.0f;
            for (int64_t k = 0; k < K; k++) s = s + A[i * K + k] * B[k * N + j];
            C[i * N + j] = s;
        }
}

static float *transpose(const float *A, int64_t M, int64_t N)
{
    float *T = malloc((size_t)(M * N) * 4);
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) T[j * M + i] = A[i * N + j];
    return T;
}

/* The product at `bits` bits per operand (any of 28, 35, .., 56: what one level more or
 * less of slices would give), for the measurement that chose the levels; the same
 * arithmetic as the header's, with the slices' width free. */
static void xp_matmul_bits(float *C, const float *A, const float *B, int64_t M, int64_t K,
                           int64_t N, int bits)
{
    int *sa = malloc((size_t)M * sizeof *sa), *sb = malloc((size_t)N * sizeof *sb);
    for (int64_t i = 0; i < M; i++) sa[i] = row_scale(A + i * K, K, 1);
    for (int64_t j = 0; j < N; j++) sb[j] = row_scale(B + j, K, N);
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            dt_xp_acc a = 0;
            for (int64_t k = 0; k < K; k++) {
                /* dt_xp_fixed at two levels, shifted down to `bits` (truncation again) */
                const int64_t x = dt_xp_fixed(A[i * K + k], sa[i], 2) / (INT64_C(1) << (56 - bits));
                const int64_t y = dt_xp_fixed(B[k * N + j], sb[j], 2) / (INT64_C(1) << (56 - bits));
                a += (dt_xp_acc)x * y;
            }
            C[i * N + j] = dt_xp_to_float(a, sa[i] + sb[j] - 2 * bits);
        }
    free(sa), free(sb);
}

/* |C - ref| / sum|a b| per output (double reference), sorted into e. */
static void rel_errors(double *e, const float *C, const float *A, const float *B, int64_t M,
                       int64_t K, int64_t N)
{
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            double ref = 0, mag = 0;
            for (int64_t k = 0; k < K; k++) {
                const double p = (double)A[i * K + k] * (double)B[k * N + j];
                ref += p, mag += fabs(p);
            }
            e[i * N + j] = mag > 0 ? fabs((double)C[i * N + j] - ref) / mag : 0;
        }
    qsort(e, (size_t)(M * N), 8, cmp_double);
}

/* The error distribution of one product of real tensors, as |error| / sum|a b| per output
 * against a double reference, quantiles printed: float32 in index order, the exact product
 * at `levels` (the level the op uses for this product: checked no worse than float32 at
 * p99 and max, and within its stated bound, 2 K 2^(eA + eB - 28 levels) plus half an ulp,
 * everywhere), and for the record the exact arithmetic at 28 .. 56 bits -- the measurement
 * behind DT_XP_LEVELS_WGRAD: where K runs over the batch, one scale per row or column spans
 * examples far apart in magnitude, and 28 bits are not enough. */
static void real_product(const char *what, const float *A, const float *B, int64_t M, int64_t K,
                         int64_t N, int levels)
{
    float *C = malloc((size_t)(M * N) * 4), *F = malloc((size_t)(M * N) * 4);
    double *ex = malloc((size_t)(M * N) * 8), *ef = malloc((size_t)(M * N) * 8);
    const int64_t n = M * N, q50 = n / 2, q90 = n * 9 / 10, q99 = n * 99 / 100;
    xp_matmul(C, NULL, A, B, M, K, N, levels, false, -1);
    f32_matmul(F, A, B, M, K, N);
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            double ref = 0;
            for (int64_t k = 0; k < K; k++) ref += (double)A[i * K + k] * (double)B[k * N + j];
            const double bound =
                2.0 * (double)K *
                    ldexp(1.0, dt_xp_row_scale(A + i * K, K, 1) + dt_xp_row_scale(B + j, K, N) -
                                   DT_XP_BITS * levels) +
                half_ulp(ref) + 1e-300;
            CHECK(fabs((double)C[i * N + j] - ref) <= bound);
        }
    rel_errors(ex, C, A, B, M, K, N);
    rel_errors(ef, F, A, B, M, K, N);
    printf("  %-34s %4lldx%4lldx%4lld  float32 index order: p50 %.1e p90 %.1e p99 %.1e max %.1e\n",
           what, (long long)M, (long long)K, (long long)N, ef[q50], ef[q90], ef[q99], ef[n - 1]);
    printf("  %-34s %16s  exact, %d level%s (the op): p50 %.1e p90 %.1e p99 %.1e max %.1e\n", "",
           "", levels, levels > 1 ? "s" : "", ex[q50], ex[q90], ex[q99], ex[n - 1]);
    CHECK(ex[n - 1] <= ef[n - 1]);
    CHECK(ex[q99] <= ef[q99]);
    for (int bits = 28; bits <= 56 && levels > 1; bits += 7) {
        double *eb = malloc((size_t)n * 8);
        xp_matmul_bits(C, A, B, M, K, N, bits);
        rel_errors(eb, C, A, B, M, K, N);
        printf(
            "  %-34s %16s  exact at %d bits (%d slices): p50 %.1e p90 %.1e p99 %.1e max %.1e%s\n",
            "", "", bits, bits / 7, eb[q50], eb[q90], eb[q99], eb[n - 1],
            eb[n - 1] <= ef[n - 1] && eb[q99] <= ef[q99] ? "" : "  (worse than float32)");
        free(eb);
    }
    free(C), free(F), free(ex), free(ef);
}

/* The quickstart MLP (784-256-128-10) trained 100 steps at portable on Fashion-MNIST, then
 * every product of one step on the next batch: the three forward products and the two input
 * gradients at one level, the three weight gradients (K = the batch) at two -- each no worse
 * than float32 (real_product). Skipped without the data. */
DT_TEST(real_tensors_mlp)
{
    struct dt_dataset ds;
    struct dt_error err;
    if (dt_dataset_load_fashion_mnist(&ds, "/usr/share/datasets/fashion-mnist", 256 * 101, 16,
                                      &err) != DT_OK) {
        printf("skipped: %s\n", err.msg);
        exit(77);
    }
    enum { BT = 256, D0 = 784, D1 = 256, D2 = 128, D3 = 10 };
    struct dt_backend *be = NULL;
    const struct dt_backend_options bo = {DT_BACKEND_CPU, 2, 0};
    DT_ASSERT(dt_backend_create(&be, &bo, &err) == DT_OK);
    struct dt_model *m = NULL;
    const int64_t hidden[] = {D1, D2};
    DT_ASSERT(dt_mlp_create(&m, be, D0, hidden, 2, D3, BT, &err) == DT_OK);
    dt_model_init(m, 20261121, 0);
    struct dt_policy pol;
    dt_policy_from_level(&pol, DT_LEVEL_PORTABLE);
    const struct dt_sgd_options sgd = {.lr = 0.1f, .momentum = 0.9f};
    for (int s = 0; s < 100; s++) {
        float loss;
        DT_ASSERT(dt_model_train_step(m, ds.train.x + (int64_t)s * BT * D0, ds.train.y + s * BT, BT,
                                      &sgd, &pol, &loss) == DT_OK);
    }
    const float *X = ds.train.x + (int64_t)100 * BT * D0;
    const uint8_t *Y = ds.train.y + 100 * BT;
    const float *W[3], *bias[3];
    for (int l = 0; l < 3; l++) {
        W[l] = dt_backend_host_view(be, m->params[2 * l].w);
        bias[l] = dt_backend_host_view(be, m->params[2 * l + 1].w);
    }
    /* the forward in float32, and the loss's gradient */
    static float H1[BT * D1], H2[BT * D2], Z[BT * D3], G3[BT * D3], G2[BT * D2], G1[BT * D1];
    f32_matmul(H1, X, W[0], BT, D0, D1);
    for (int i = 0; i < BT * D1; i++) H1[i] = fmaxf(H1[i] + bias[0][i % D1], 0.0f);
    f32_matmul(H2, H1, W[1], BT, D1, D2);
    for (int i = 0; i < BT * D2; i++) H2[i] = fmaxf(H2[i] + bias[1][i % D2], 0.0f);
    f32_matmul(Z, H2, W[2], BT, D2, D3);
    for (int b = 0; b < BT; b++) {
        double mx = -INFINITY, sum = 0;
        for (int c = 0; c < D3; c++) mx = fmax(mx, Z[b * D3 + c] + bias[2][c]);
        for (int c = 0; c < D3; c++) sum += exp(Z[b * D3 + c] + bias[2][c] - mx);
        for (int c = 0; c < D3; c++)
            G3[b * D3 + c] =
                (float)((exp(Z[b * D3 + c] + bias[2][c] - mx) / sum - (c == Y[b])) / BT);
    }
    float *W2t = transpose(W[2], D2, D3), *W1t = transpose(W[1], D1, D2);
    f32_matmul(G2, G3, W2t, BT, D3, D2);
    for (int i = 0; i < BT * D2; i++) G2[i] = H2[i] > 0 ? G2[i] : 0.0f;
    f32_matmul(G1, G2, W1t, BT, D2, D1);
    for (int i = 0; i < BT * D1; i++) G1[i] = H1[i] > 0 ? G1[i] : 0.0f;
    float *Xt = transpose(X, BT, D0), *H1t = transpose(H1, BT, D1), *H2t = transpose(H2, BT, D2);
    printf("the quickstart MLP after 100 steps at portable, batch 256: |error| / sum|a b|\n");
    real_product("dense0 forward   x . W0", X, W[0], BT, D0, D1, DT_XP_LEVELS_FORWARD);
    real_product("dense1 forward   h1 . W1", H1, W[1], BT, D1, D2, DT_XP_LEVELS_FORWARD);
    real_product("dense2 forward   h2 . W2", H2, W[2], BT, D2, D3, DT_XP_LEVELS_FORWARD);
    real_product("dense2 weight grad   h2^T . dz", H2t, G3, D2, BT, D3, DT_XP_LEVELS_WGRAD);
    real_product("dense1 weight grad   h1^T . dh2", H1t, G2, D1, BT, D2, DT_XP_LEVELS_WGRAD);
    real_product("dense0 weight grad   x^T . dh1", Xt, G1, D0, BT, D1, DT_XP_LEVELS_WGRAD);
    real_product("dense2 input grad   dz . W2^T", G3, W2t, BT, D3, D2, DT_XP_LEVELS_FORWARD);
    real_product("dense1 input grad   dh2 . W1^T", G2, W1t, BT, D2, D1, DT_XP_LEVELS_FORWARD);
    free(W2t), free(W1t), free(Xt), free(H1t), free(H2t);
    dt_model_destroy(m);
    dt_backend_destroy(be);
    dt_dataset_free(&ds);
}

DT_TEST_MAIN(DT_CASE(slices_round_trip), DT_CASE(slices_combine_to_the_integer_product),
             DT_CASE(halves_round_once), DT_CASE(dot_vec_exact), DT_CASE(any_order_same_bits),
             DT_CASE(one_rounding), DT_CASE(error_within_bound_and_below_float32),
             DT_CASE(op_equals_reference_every_form),
             DT_CASE(dense_ops_under_exact_math_obey_no_order),
             DT_CASE(conv_weight_gradient_past_2_127), DT_CASE(gpu_equals_cpu),
             DT_CASE(real_tensors_mlp))
