/* Portable float exp, log, log1p and softplus for the `math: portable` control: the same
 * bits on every IEEE-754 binary32 machine, host C or CUDA device (docs/DESIGN.md, "Determinism
 * levels and controls", math). Built only from correctly rounded + - * /, comparisons,
 * int32 arithmetic and bit reinterpretation: no libm, no double, no tables, no FMA,
 * round-to-nearest-even assumed, no use of excess precision.
 *
 * Method
 *   exp(x)   Cody-Waite: k = round(x*log2(e)) by adding and subtracting 1.5*2^23 (exact
 *            under round-to-nearest); r = (x - k*LN2_HI) - k*LN2_LO with LN2_HI holding 15
 *            significant bits, so k*LN2_HI and the subtraction are exact for |k| <= 512;
 *            |r| <= ln2/2 (+ a hair). exp(r) = 1 + (hi + (r^2*P(r) - lo)), P of degree 5
 *            in Horner form (Chebyshev fit of (e^r-1-r)/r^2 on [-ln2/2, ln2/2], rel. error of
 *            the float-coefficient polynomial 7.6e-10). Scaling by 2^k through exponent
 *            bits; k = 128 is done as 2^127*2, k < -125 as (y*2^(k+100))*2^-100 so that a
 *            subnormal result is rounded once (gradual underflow).
 *   log(x)   Subnormal x is prescaled by 2^23. x = m*2^e with m in [sqrt(1/2), sqrt(2))
 *            from the bits; f = m-1 (exact); s = f/(2+f), z = s^2;
 *            log(1+f) = f - f^2/2 + s*(f^2/2 + R(z)), R(z) = z*(C1 + z*(C2 + z*(C3 + z*C4)))
 *            (Chebyshev fit of (log((1+s)/(1-s)) - 2s)/s on |s| <= 0.1716, rel. error
 *            3.0e-10; the fdlibm form, with our own coefficients); e*ln2 added as e*LN2_HI
 *            (exact) plus e*LN2_LO folded into the small terms.
 *   log1p(x) Direct kernel with f = x for x in (sqrt(1/2)-1, sqrt(2)-1); otherwise
 *            u = 1+x is decomposed as for log and the rounding error of 1+x enters as the
 *            first-order correction c = ((1+x) - u)/u (computed exactly, fdlibm style).
 *   tanh(x)  odd: |x| < 2^-12 -> x (the cubic term is below half an ulp); |x| < 0.55 ->
 *            x + x^3 * Q(x^2), Q the Taylor series of (tanh(x) - x) / x^3 to degree 14 in x
 *            (its truncation error below 2^-26 of the result there); else
 *            1 - 2 / (e^(2|x|) + 1) with the sign of x, +-1 beyond 9.1 (tanh rounds to 1).
 *   softplus log(1+e^x): x > 20 -> x (correctly rounded: e^-x < ulp(x)/2^9); x < -20 -> e^x;
 *            0 < x <= 20 -> x + log1p(e^-x); -20 <= x <= 0 -> log1p(e^x).
 *
 * Measured error (tests/test_portable_math.c; reference expl/logl/log1pl on x87 80-bit long
 * double; ulp = float spacing at |reference|, 2^-149 for subnormal results). "full" is
 * over EVERY float in the range (DT_ULP_FULL=1), "strided" the default CTest sweep:
 *                                                     full        strided   bound
 *   dt_exp_portable   [-103.972, 88.7228]             0.868 ulp   0.843     1
 *                     of which subnormal results      0.747       0.747     1
 *   dt_log_portable   [2^-149, FLT_MAX] (subnormals)  0.835       0.804     1
 *   dt_log1p_portable (-1, FLT_MAX]                   0.839       0.809     1
 *   dt_softplus_portable [-30, 30]                    1.620       1.579     2
 *                     [-FLT_MAX, -30]                 0.861       0.842     2
 *                     [30, FLT_MAX]                   0.000       0.000     2
 *   (exp worst at x = -0x1.4caf52p+2, log at 0x1.67cc32p+0, log1p at 0x1.9f44c4p-2,
 *   softplus at -0x1.43cff2p+0; softplus adds the errors of exp and log1p near |x| ~ 1.)
 * The tests enforce the bounds DT_PM_ULP_* below.
 *
 * Special cases (every NaN result is the canonical quiet NaN 0x7fc00000, whatever the
 * input payload or sign, because CPUs propagate payloads and GPUs do not):
 *   exp:   NaN -> NaN; +Inf -> +Inf; -Inf -> +0; exp(+-0) = 1 exactly;
 *          x > 0x1.62e42ep6 (88.7228317) -> +Inf, exactly where binary32 exp overflows;
 *          x < -0x1.9fe368p6 (-103.972076) -> +0 (true value below 2^-150); results in
 *          (0, 2^-126) are subnormal, rounded once.
 *   log:   NaN -> NaN; x < 0 (incl. -Inf) -> NaN; +-0 -> -Inf; +Inf -> +Inf; log(1) = +0;
 *          subnormal inputs are exact-prescaled and accurate.
 *   log1p: NaN -> NaN; x < -1 -> NaN; -1 -> -Inf; +Inf -> +Inf; +-0 -> +-0 (sign kept);
 *          tiny x -> x.
 *   softplus: NaN -> NaN; +Inf -> +Inf; -Inf -> +0; x < -103.97 -> +0.
 *
 * Compilation requirements: host C with -ffp-contract=off (the project's flags) and no
 * fast-math; CUDA with -fmad=false and without its fast-math option, -ftz=true or
 * -prec-div=false.
 * Device code also uses __fmul_rn/__fdiv_rn for every product and quotient, which nvcc
 * never contracts into an FMA, so the device bits hold even if -fmad=false is forgotten.
 * Each a*b+c keeps its product in a call of its own. */
#ifndef DT_PORTABLE_MATH_H
#define DT_PORTABLE_MATH_H

#include <stdint.h>
#include <string.h>

#include "core/hd.h"

/* Error bounds the tests enforce, in ulps (measured maxima in the table above). */
#define DT_PM_ULP_EXP 1.0
#define DT_PM_ULP_LOG 1.0
#define DT_PM_ULP_LOG1P 1.0
#define DT_PM_ULP_SOFTPLUS 2.0
#define DT_PM_ULP_TANH 2.0

/* ln2 = LN2_HI + LN2_LO; LN2_HI = 0x3f317200 has 15 significant bits. */
#define DT_PM_LN2_HI 0x1.62e4p-1f
#define DT_PM_LN2_LO 0x1.7f7d1cp-20f
#define DT_PM_LOG2E 0x1.715476p+0f
#define DT_PM_ROUND_MAGIC 0x1.8p23f        /* 1.5*2^23: x + M - M rounds x to an integer */
#define DT_PM_EXP_OVERFLOW 0x1.62e42ep6f   /* largest x with finite exp(x) */
#define DT_PM_EXP_UNDERFLOW -0x1.9fe368p6f /* smallest x with exp(x) > 2^-150 */

/* ---- private helpers -------------------------------------------------------------------- */

/* a*b and a/b rounded to nearest, never fused with a neighbouring add. */
static inline DT_HDI float dt_pm__mul(float a, float b) { return dt_rn_mul(a, b); }

static inline DT_HDI float dt_pm__div(float a, float b) { return dt_rn_div(a, b); }

static inline DT_HDI float dt_pm__nan(void) { return dt_bits_float(0x7fc00000u); }
static inline DT_HDI float dt_pm__inf(void) { return dt_bits_float(0x7f800000u); }

/* 2^n for n in [-126, 127], from the exponent field. */
static inline DT_HD float dt_pm__pow2(int n) { return dt_bits_float((uint32_t)(n + 127) << 23); }

/* The bits ix of a positive normal float x = m 2^e with m in [sqrt(1/2), sqrt(2)): returns
 * f = m - 1 (exact) and adds e to *e. 0x3f3504f3 is sqrt(1/2). */
static inline DT_HDI float dt_pm__split(uint32_t ix, int *e)
{
    ix += 0x3f800000u - 0x3f3504f3u;
    *e += (int)(ix >> 23) - 127;
    return dt_bits_float((ix & 0x007fffffu) + 0x3f3504f3u) - 1.0f;
}

/* log(1+f) + e*ln2 + c for f in [sqrt(1/2)-1, sqrt(2)-1], where c is a small correction
 * (|c| <= ulp(1+f)), with one final rounding of e*LN2_HI + (small terms). */
static inline DT_HDI float dt_pm__log_kernel(float f, int e, float c)
{
    const float C1 = 0x1.555556p-1f; /* ~2/3 */
    const float C2 = 0x1.9999ecp-2f; /* ~2/5 */
    const float C3 = 0x1.245c0ap-2f; /* ~2/7 */
    const float C4 = 0x1.dddae2p-3f; /* ~2/9 */
    float s = dt_pm__div(f, 2.0f + f);
    float z = dt_pm__mul(s, s);
    float r = dt_pm__mul(C4, z) + C3;
    r = dt_pm__mul(r, z) + C2;
    r = dt_pm__mul(r, z) + C1;
    r = dt_pm__mul(r, z);
    float hfsq = dt_pm__mul(0.5f, dt_pm__mul(f, f));
    float dk = (float)e;
    float lo = dt_pm__mul(dk, DT_PM_LN2_LO) + c;
    float t = dt_pm__mul(s, hfsq + r) + lo;
    return dt_pm__mul(dk, DT_PM_LN2_HI) - ((hfsq - t) - f);
}

/* ---- public functions --------------------------------------------------------------------- */

/* exp's kernel for finite x in [DT_PM_EXP_UNDERFLOW, DT_PM_EXP_OVERFLOW]: e^x = y * 2^k with
 * y in [0.7, 1.5) returned and k in *k_out. No branch: loops of it vectorise. */
static inline DT_HDI float dt_pm__exp_kernel(float x, int *k_out)
{
    /* P(r) ~ (e^r - 1 - r) / r^2 on [-ln2/2, ln2/2]. */
    const float P0 = 0x1p-1f;
    const float P1 = 0x1.555556p-3f;
    const float P2 = 0x1.5554e8p-5f;
    const float P3 = 0x1.1110ep-7f;
    const float P4 = 0x1.6d4362p-10f;
    const float P5 = 0x1.a12528p-13f;
    /* k = round-to-nearest-even(x*log2e); |x*log2e| < 151 so the magic sum is exact. */
    float t = dt_pm__mul(x, DT_PM_LOG2E) + DT_PM_ROUND_MAGIC;
    float kf = t - DT_PM_ROUND_MAGIC;
    *k_out = (int)kf;
    float hi = x - dt_pm__mul(kf, DT_PM_LN2_HI); /* exact */
    float lo = dt_pm__mul(kf, DT_PM_LN2_LO);
    float r = hi - lo; /* rounded; feeds only the polynomial */
    float p = dt_pm__mul(P5, r) + P4;
    p = dt_pm__mul(p, r) + P3;
    p = dt_pm__mul(p, r) + P2;
    p = dt_pm__mul(p, r) + P1;
    p = dt_pm__mul(p, r) + P0;
    p = dt_pm__mul(dt_pm__mul(r, r), p);
    /* 1 + r + r^2*P(r) with r = hi - lo taken unrounded: one rounding less than 1 + (r + p). */
    return 1.0f + (hi + (p - lo));
}

/* c ? a : b by masks (c is 0 or 1): no branch for a vectoriser to refuse. */
static inline DT_HDI uint32_t dt_pm__pick(uint32_t c, uint32_t a, uint32_t b)
{
    const uint32_t m = 0u - c;
    return (a & m) | (b & ~m);
}

/* y * 2^k for y in [0.7, 1.5), k in [-150, 128]: exact, or rounded once when subnormal
 * (k > 127: by 2^127 first; k < -125: by 2^(k + 100), then 2^-100). Without a branch: each
 * case computed with its exponent clamped into dt_pm__pow2's range, the one for k picked by
 * masks. */
static inline DT_HDI float dt_pm__scale(float y, int k)
{
    const int kb = k - 127 < -126 ? -126 : k - 127, ks = k + 100 > 127 ? 127 : k + 100;
    const int km = k < -126 ? -126 : (k > 127 ? 127 : k);
    const float big = dt_pm__mul(dt_pm__mul(y, 0x1p127f), dt_pm__pow2(kb));
    const float small = dt_pm__mul(dt_pm__mul(y, dt_pm__pow2(ks)), 0x1p-100f);
    const float mid = dt_pm__mul(y, dt_pm__pow2(km));
    uint32_t r = dt_pm__pick((uint32_t)(k < -125), dt_float_bits(small), dt_float_bits(mid));
    return dt_bits_float(dt_pm__pick((uint32_t)(k > 127), dt_float_bits(big), r));
}

/* e^x, <= 1 ulp (see top). Branch-free, so that loops of it vectorise (the BNN's sigma,
 * nets/cpu/bnn.c): NaN, overflow and underflow found from x's bits as integers, the kernel
 * run on 0 in their place, the answer picked by masks -- the bits of the form with early
 * returns on every input (tests/test_portable_math.c, exp_softplus_branch_free_same_bits). */
static inline DT_HDI float dt_exp_portable(float x)
{
    const uint32_t bits = dt_float_bits(x), abits = bits & 0x7fffffffu, neg = bits >> 31;
    const uint32_t nan = abits > 0x7f800000u;
    const uint32_t over = (neg ^ 1u) & (uint32_t)(abits > 0x42b17217u /* DT_PM_EXP_OVERFLOW */);
    const uint32_t under = neg & (uint32_t)(abits > 0x42cff1b4u /* -DT_PM_EXP_UNDERFLOW */);
    int k;
    const float y = dt_pm__exp_kernel(dt_bits_float(dt_pm__pick(nan | over | under, 0u, bits)), &k);
    uint32_t r = dt_pm__pick(under, 0u, dt_float_bits(dt_pm__scale(y, k)));
    r = dt_pm__pick(over, 0x7f800000u, r);
    return dt_bits_float(dt_pm__pick(nan, 0x7fc00000u, r));
}

/* Natural logarithm, <= 1 ulp (see top). */
static inline DT_HD float dt_log_portable(float x)
{
    if (x != x || x < 0.0f) return dt_pm__nan();
    if (x == 0.0f) return -dt_pm__inf();
    if (x == dt_pm__inf()) return x;
    uint32_t ix = dt_float_bits(x);
    int e = 0;
    if (ix < 0x00800000u) { /* subnormal: scale into the normal range, exactly */
        ix = dt_float_bits(dt_pm__mul(x, 0x1p23f));
        e = -23;
    }
    float f = dt_pm__split(ix, &e);
    return dt_pm__log_kernel(f, e, 0.0f);
}

/* log(1+x), accurate for small |x|, <= 1 ulp (see top). */
static inline DT_HD float dt_log1p_portable(float x)
{
    if (x != x || x < -1.0f) return dt_pm__nan();
    if (x == -1.0f) return -dt_pm__inf();
    if (x == dt_pm__inf()) return x;
    if (x == 0.0f) return x; /* keeps the sign of zero */
    if (x > -0x1.2bec34p-2f && x < 0x1.a8279ap-2f) return dt_pm__log_kernel(x, 0, 0.0f);
    float u = 1.0f + x;
    /* (1+x) - u, exact: for u >= 2, x >= 1 and u-x is exact; otherwise u-1 is exact. */
    float c = u >= 2.0f ? 1.0f - (u - x) : x - (u - 1.0f);
    c = dt_pm__div(c, u);
    int e = 0;
    float f = dt_pm__split(dt_float_bits(u), &e);
    return dt_pm__log_kernel(f, e, c);
}

/* softplus(x) = log(1 + e^x) without overflow or cancellation, <= 2 ulp (see top):
 * x above 20: x; below -20: e^x; otherwise with e = e^-|x| in (0, 1], log1p(e) (plus x for
 * x > 0), log1p's two forms for that range (its kernel on e below 0x1.a8279ap-2, else on
 * 1 + e with the rounding's correction). Branch-free like dt_exp_portable: every form
 * computed, one picked by x's bits -- the bits of the form with early returns. */
static inline DT_HDI float dt_softplus_portable(float x)
{
    const uint32_t bits = dt_float_bits(x), abits = bits & 0x7fffffffu, neg = bits >> 31;
    const float e = dt_exp_portable(dt_bits_float(abits | 0x80000000u)); /* e^-|x| */
    const float near = dt_pm__log_kernel(e, 0, 0.0f);
    const float u = 1.0f + e;
    /* (1 + e) - u, exact (log1p's two forms: 1 + e may round up to 2) */
    const float c = dt_pm__div(
        dt_bits_float(dt_pm__pick((uint32_t)(dt_float_bits(u) >= 0x40000000u /* 2 */),
                                  dt_float_bits(1.0f - (u - e)), dt_float_bits(e - (u - 1.0f)))),
        u);
    int ex = 0;
    const float f = dt_pm__split(dt_float_bits(u), &ex);
    const float far = dt_pm__log_kernel(f, ex, c);
    const uint32_t l = dt_pm__pick((uint32_t)(dt_float_bits(e) < 0x3ed413cdu /* 0x1.a8279ap-2 */),
                                   dt_float_bits(near), dt_float_bits(far));
    const float lf = dt_bits_float(l);
    uint32_t r = dt_pm__pick((neg ^ 1u) & (uint32_t)(abits != 0u), dt_float_bits(x + lf), l);
    const uint32_t outside = (uint32_t)(abits > 0x41a00000u /* 20 */);
    r = dt_pm__pick(outside & (neg ^ 1u), bits, r);
    r = dt_pm__pick(outside & neg, dt_float_bits(e), r); /* x < 0: e = e^x */
    return dt_bits_float(dt_pm__pick((uint32_t)(abits > 0x7f800000u), 0x7fc00000u, r));
}

/* e^x for x in [0, 18.25] (what dt_tanh_portable asks for): dt_exp_portable's arithmetic
 * without its special cases, so that a loop over it vectorises; the same bits there. */
static inline DT_HDI float dt_pm__exp_tanh(float x)
{
    int k;
    const float y = dt_pm__exp_kernel(x, &k);
    return dt_pm__mul(y, dt_bits_float((uint32_t)(k + 127) << 23)); /* k in [0, 27]: exact */
}

/* tanh(x), <= 2 ulp (strided sweeps measured 1.41 ulp, near the switch at 0.55; see top).
 * Every branch is computed and one selected, with no early return, so that a loop of it
 * vectorises (GELU's, nets/cpu/activation.c); the selections compare |x|'s bits as integers (the
 * same order as the floats for |x| >= 0) and pick by masks (dt_pm__pick: GCC at -O2 turns
 * neither a float compare, which may trap, nor a chain of selects into vector code), and the
 * exp branch's argument is clamped into dt_pm__exp_tanh's range. */
static inline DT_HDI float dt_tanh_portable(float x)
{
    const uint32_t bits = dt_float_bits(x), abits = bits & 0x7fffffffu;
    const uint32_t B_TINY = 0x39800000u /* 0x1p-12f */, B_POLY = 0x3f0ccccdu /* 0.55f */,
                   B_ONE = 0x4111999au /* 9.1f */;
    const float a = dt_bits_float(abits);
    /* |x| < 0.55: x + x^3 * Q(x^2), Q the Taylor series of (tanh(x) - x) / x^3:
     * Q(z) = -1/3 + 2/15 z - 17/315 z^2 + 62/2835 z^3 - 1382/155925 z^4
     *        + 21844/6081075 z^5 - 929569/638512875 z^6 + 6404582/10854718875 z^7 */
    const float z = dt_pm__mul(a, a);
    float q = 0x1.355824p-11f;
    q = dt_pm__mul(q, z) - 0x1.7da364p-10f;
    q = dt_pm__mul(q, z) + 0x1.d6d3d0p-9f;
    q = dt_pm__mul(q, z) - 0x1.226e36p-7f;
    q = dt_pm__mul(q, z) + 0x1.664f48p-6f;
    q = dt_pm__mul(q, z) - 0x1.ba1ba2p-5f;
    q = dt_pm__mul(q, z) + 0x1.111112p-3f;
    q = dt_pm__mul(q, z) - 0x1.555556p-2f;
    const float small = a + dt_pm__mul(dt_pm__mul(a, z), q);
    /* 0.55 <= |x| < 9.1: 1 - 2 / (e^(2|x|) + 1) */
    const float ac = dt_bits_float(dt_pm__pick(abits < B_ONE, abits, B_ONE));
    const float e = dt_pm__exp_tanh(dt_pm__mul(2.0f, ac));
    const float big = 1.0f - dt_pm__div(2.0f, e + 1.0f);
    uint32_t r = dt_pm__pick(abits < B_ONE, dt_float_bits(big), 0x3f800000u /* 1 */);
    r = dt_pm__pick(abits < B_POLY, dt_float_bits(small), r);
    r = dt_pm__pick(abits < B_TINY, abits, r);
    return dt_bits_float(dt_pm__pick(abits > 0x7f800000u, 0x7fc00000u, r | (bits & 0x80000000u)));
}

#endif
