/* The `atomics: fixed_point` control, shared by every backend so CPU and GPU give the same
 * bits: a scatter-add or sum is done as exact int64 accumulation. Per tensor, a max-abs pass
 * picks a power-of-two scale 2^shift (dt_fixed_shift_for); each term becomes
 * q = round-half-even(x * 2^shift) (dt_fixed_from_float, exact scaling by exponent
 * arithmetic); the int64 sum is exact and therefore independent of order, chunking, thread
 * and block counts (dt_fixed_add); the result is rounded ONCE to the float nearest to
 * acc * 2^-shift, ties to even, subnormal and overflow ranges included (dt_fixed_to_float).
 * (docs/DESIGN.md, "Determinism levels and controls", atomics.)
 *
 * Error bound for n terms x_i summed at `shift` (proved in tests/test_fixed_point.c):
 *     |result - sum x_i| <= n * 2^-(shift+1) + ulp(result) / 2
 * (each quantisation is off by at most half of 2^-shift, the final conversion by half an
 * ulp). Terms that are multiples of 2^-shift -- every float once shift == 149 -- are
 * converted exactly, so only the final rounding remains.
 *
 * All DT_HD functions are integer/bit manipulation only (no libm, no float arithmetic), so
 * host and device compute the same bits whatever the FP flags. */
#ifndef DT_FIXED_POINT_H
#define DT_FIXED_POINT_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "core/hd.h"

/* Bounds of dt_fixed_shift_for's result, and of the shifts dt_fixed_from_float accepts.
 * MAX = 149: every finite float is an integer multiple of 2^-149, so at shift 149 every
 * term converts exactly; a larger shift would only append zero bits. It is also the
 * shift for max_abs == 0 or n_terms == 0 (all terms are zero; any shift is exact).
 * MIN = -129: the shift for the worst finite case, max_abs = FLT_MAX = (2^24-1)*2^104 and
 * n_terms = INT64_MAX (62 - 104 - 87); the lower clamp is never reached for valid input. */
#define DT_FIXED_SHIFT_MIN (-129)
#define DT_FIXED_SHIFT_MAX 149
/* dt_fixed_shift_for's answer for NaN/Inf max_abs or negative n_terms; outside the
 * bounds, so dt_fixed_from_float rejects it too. */
#define DT_FIXED_SHIFT_INVALID (-1000)

static inline DT_HD bool dt_fixed_shift_valid(int shift)
{
    return shift >= DT_FIXED_SHIFT_MIN && shift <= DT_FIXED_SHIFT_MAX;
}

/* ---- private helpers (dt_fixed_*_): bit access, bit length, rounding shift ------------ */

/* Number of significant bits of u: 0 for 0, else floor(log2 u) + 1. */
static inline DT_HD int dt_fixed_bitlen_(uint64_t u)
{
    if (u == 0) return 0;
#if defined(__CUDA_ARCH__)
    return 64 - __clzll((long long)u);
#elif defined(__GNUC__)
    return 64 - __builtin_clzll(u);
#else
    int n = 0;
    while (u) {
        n++;
        u >>= 1;
    }
    return n;
#endif
}

/* Split a finite float's magnitude into m * 2^e, m < 2^24 an integer (m has its implicit
 * bit for normals), e >= -149. Returns false for NaN/Inf. *neg = sign bit. */
static inline DT_HD bool dt_fixed_decode_(uint64_t *m, int *e, bool *neg, float x)
{
    uint32_t bits = dt_float_bits(x);
    uint32_t bexp = (bits >> 23) & 0xffu;
    uint32_t frac = bits & 0x7fffffu;
    *m = 0;
    *e = 0;
    *neg = (bits >> 31) != 0;
    if (bexp == 0xffu) return false;
    if (bexp == 0) {
        *m = frac;
        *e = -149;
    } else {
        *m = frac | 0x800000u;
        *e = (int)bexp - 150;
    }
    return true;
}

/* round-half-even(u / 2^r) for r >= 1. */
static inline DT_HD uint64_t dt_fixed_rne_shr_(uint64_t u, int64_t r)
{
    if (r > 64) return 0;                                /* u / 2^r < 1/2 */
    if (r == 64) return u > (UINT64_C(1) << 63) ? 1 : 0; /* the tie 2^63 rounds to 0 */
    uint64_t q = u >> r;
    uint64_t rem = u & ((UINT64_C(1) << r) - 1);
    uint64_t half = UINT64_C(1) << (r - 1);
    if (rem > half || (rem == half && (q & 1))) q++;
    return q;
}

/* ---- the control ---------------------------------------------------------------------- */

/* The largest shift with n_terms * max_abs * 2^shift < 2^62, clamped to
 * [DT_FIXED_SHIFT_MIN, DT_FIXED_SHIFT_MAX]. The sign of max_abs is ignored. max_abs == 0
 * or n_terms == 0 give DT_FIXED_SHIFT_MAX. NaN/Inf max_abs or n_terms < 0 give
 * DT_FIXED_SHIFT_INVALID (check with dt_fixed_shift_valid).
 *
 * Why no partial sum can overflow, in any order, when every |x_i| <= max_abs: each
 * |q_i| <= round(max_abs * 2^shift). If max_abs * 2^shift is an integer, sum |q_i| <=
 * n * max_abs * 2^shift < 2^62. If not, it is below 2^24 and rounding adds at most 1/2
 * per term: sum |q_i| < 2^62 + n/2 < 2^63 for any n_terms <= INT64_MAX.
 *
 * With max_abs = M * 2^e (M < 2^24 an integer) and L = bit length of n_terms * M:
 * n*M < 2^L gives n*max*2^(62-e-L) < 2^62, and n*M >= 2^(L-1) makes one more bit reach
 * 2^62, so shift = 62 - e - L. n*M < 2^87 is formed from 32-bit halves (no 128-bit type). */
static inline DT_HD int dt_fixed_shift_for(float max_abs, int64_t n_terms)
{
    uint64_t m;
    int e;
    bool neg;
    if (!dt_fixed_decode_(&m, &e, &neg, max_abs) || n_terms < 0) return DT_FIXED_SHIFT_INVALID;
    if (m == 0 || n_terms == 0) return DT_FIXED_SHIFT_MAX;
    uint64_t n = (uint64_t)n_terms;
    uint64_t lo = (n & 0xffffffffu) * m;      /* < 2^56 */
    uint64_t hi = (n >> 32) * m + (lo >> 32); /* n*m = hi * 2^32 + (lo mod 2^32) */
    int len = hi ? 32 + dt_fixed_bitlen_(hi) : dt_fixed_bitlen_(lo);
    int shift = 62 - e - len;
    if (shift < DT_FIXED_SHIFT_MIN) shift = DT_FIXED_SHIFT_MIN;
    if (shift > DT_FIXED_SHIFT_MAX) shift = DT_FIXED_SHIFT_MAX;
    return shift;
}

/* *q = round-half-even(x * 2^shift), the scaling done exactly on the exponent. Returns
 * false (leaving *q unchanged) if x is NaN/Inf, |x * 2^shift| >= 2^63, or the shift is
 * outside [DT_FIXED_SHIFT_MIN, DT_FIXED_SHIFT_MAX] (e.g. DT_FIXED_SHIFT_INVALID). */
static inline DT_HD bool dt_fixed_from_float(int64_t *q, float x, int shift)
{
    uint64_t m, mag;
    int e;
    bool neg;
    if (!dt_fixed_shift_valid(shift) || !dt_fixed_decode_(&m, &e, &neg, x)) return false;
    int t = e + shift; /* x * 2^shift = +-m * 2^t, t in [-278, 253] */
    if (m == 0) {
        mag = 0;
    } else if (t >= 0) {
        if (t + dt_fixed_bitlen_(m) > 63) return false;
        mag = m << t;
    } else {
        mag = dt_fixed_rne_shr_(m, -t); /* m < 2^24: never reaches 2^63 */
    }
    *q = neg ? -(int64_t)mag : (int64_t)mag;
    return true;
}

/* Portable overflow-checked *acc += q (two's-complement sign test), the device path of
 * dt_fixed_add; exposed so host tests check it against the compiler builtin. */
static inline DT_HD bool dt_fixed_add_portable_(int64_t *acc, int64_t q)
{
    uint64_t s = (uint64_t)*acc + (uint64_t)q;
    /* overflow iff both operands have the same sign and the sum's sign differs */
    if ((~((uint64_t)*acc ^ (uint64_t)q) & ((uint64_t)*acc ^ s)) >> 63) return false;
    *acc = (int64_t)s; /* s < 2^63 or s >= 2^63 maps to the in-range negative value */
    return true;
}

/* *acc += q. Returns false on int64 overflow, leaving *acc unchanged. */
static inline DT_HD bool dt_fixed_add(int64_t *acc, int64_t q)
{
#if !defined(__CUDA_ARCH__) && defined(__GNUC__)
    int64_t s;
    if (__builtin_add_overflow(*acc, q, &s)) return false;
    *acc = s;
    return true;
#else
    return dt_fixed_add_portable_(acc, q);
#endif
}

/* The float nearest to acc * 2^-shift, ties to even: one rounding, done on the integer, for
 * any int shift -- subnormal results included (no double rounding through an
 * int-to-float conversion followed by a scaling), |value| beyond the float range gives
 * +-Inf as IEEE round-to-nearest does. acc == 0 gives +0; a nonzero acc whose value rounds
 * to zero gives a zero with acc's sign. */
static inline DT_HD float dt_fixed_to_float(int64_t acc, int shift)
{
    if (acc == 0) return 0.0f;
    uint32_t sign = acc < 0 ? 0x80000000u : 0u;
    uint64_t u = acc < 0 ? (uint64_t)0 - (uint64_t)acc : (uint64_t)acc; /* INT64_MIN ok */
    int b = dt_fixed_bitlen_(u);
    int64_t e = (int64_t)b - 1 - shift; /* value in [2^e, 2^(e+1)) */
    if (e > 127) return dt_bits_float(sign | 0x7f800000u);
    /* the result is a multiple of 2^qexp: 24 significant bits, or 2^-149 when subnormal */
    int64_t qexp = e - 23 < -149 ? -149 : e - 23;
    int64_t r = qexp + shift; /* value / 2^qexp = u / 2^r */
    uint64_t m;
    if (r <= 0) {
        m = u << (-r); /* exact, < 2^24 */
    } else {
        m = dt_fixed_rne_shr_(u, r); /* <= 2^24 */
    }
    if (m == 0) return dt_bits_float(sign);
    /* m in [2^23, 2^24], or qexp == -149 with m <= 2^24: adding m to the biased exponent
     * field of 2^(qexp+23) gives the float, a carry to 2^24 bumping the exponent. */
    uint32_t bits = ((uint32_t)(qexp + 149) << 23) + (uint32_t)m;
    if (bits > 0x7f800000u) bits = 0x7f800000u;
    return dt_bits_float(sign | bits);
}

/* reduction: exact, one element: the int64 sum of its `terms` shard partials p[0],
 * p[stride], ... at `shift` = dt_fixed_shift_for(max, S) for a finite max >= every |p[k]|
 * and S >= terms, which no partial sum overflows. Exact, so any order gives these bits:
 * the device path of the exact sum (nets/cuda/exact.cu), emulated on the host by tests
 * against the CPU backend's (nets/cpu/exact.c). */
static inline DT_HD int64_t dt_fixed_sum_strided(const float *p, int64_t stride, int64_t terms,
                                                 int shift)
{
    int64_t a = 0;
    for (int64_t k = 0; k < terms; k++) {
        int64_t q = 0;
        dt_fixed_from_float(&q, p[k * stride], shift);
        a += q;
    }
    return a;
}

/* ---- host helper: the whole control for a column sum (CPU backend) -------------------- */
#if !defined(__CUDACC__)
#include <inttypes.h>
#include <math.h>
#if defined(__x86_64__) && defined(__SSE2__)
#include <emmintrin.h>
#endif

/* The host's fast form of dt_fixed_from_float for a term already known to be finite and
 * within the bound the shift was chosen for (|x| <= max_abs of dt_fixed_shift_for, so
 * |x * 2^shift| < 2^62): one double multiply and one round-to-integer instruction instead
 * of the bit manipulation. Same result, bit for bit: x has 24 significant bits and
 * |x| * 2^shift lies in [2^-278, 2^62) for every valid shift, so the double product is
 * exact, and llrint rounds it half to even -- the rounding mode detrain never leaves
 * (tests/test_fixed_point.c compares the two over sweeps of x and shift). */
static inline int64_t dt_fixed_from_float_bounded(float x, double scale /* = 2^shift */)
{
#if defined(__x86_64__) && defined(__SSE2__)
    return _mm_cvtsd_si64(_mm_set_sd((double)x * scale)); /* cvtsd2si: MXCSR's mode, RNE */
#else
    return (int64_t)llrint((double)x * scale);
#endif
}
/* 2^shift as a double, exact for every valid shift. */
static inline double dt_fixed_scale(int shift) { return ldexp(1.0, shift); }

/* The host's fast form of dt_fixed_to_float(acc, shift), down = 2^-shift (dt_fixed_scale
 * (-shift)) for a valid shift. |acc| below 2^53 converts to double exactly. A larger one
 * keeps its top 53 bits with a sticky bit for the rest (bit 0 set when any dropped bit is),
 * which leaves the rounding to float's 24 bits -- 29 bits higher -- as it was: halfway,
 * below or above. Times the exact power-of-two scale (float's whole range, subnormals
 * included, lies within normal doubles), the double-to-float conversion is then the one
 * rounding, to nearest even. Branch-free (large and small sums interleave in a gradient).
 * Same bits as dt_fixed_to_float (tests/test_dist.c, fixed_to_float_agrees). */
static inline float dt_fixed_to_float_bounded(int64_t acc, double down)
{
    uint64_t u = acc < 0 ? (uint64_t)0 - (uint64_t)acc : (uint64_t)acc;
    int k = 11 - __builtin_clzll(u | 1); /* bit length - 53, or 0 below 2^53 */
    k &= ~(k >> 31);
    const uint64_t dropped = u & ((UINT64_C(1) << k) - 1);
    u = (u >> k) | (uint64_t)(dropped != 0);
    /* u < 2^53 now: a signed conversion, one instruction, exact */
    const double v = (double)(int64_t)u * (down * (double)(UINT64_C(1) << k)); /* exact */
    return (float)(acc < 0 ? -v : v);
}

#include "core/status.h"

/* out[o] = sum over r of in[r * cols + o] at a caller-chosen shift (e.g. one agreed across
 * ranks). scratch holds cols int64. Returns DT_ERR_NUMERIC naming row and column on a
 * non-finite input, an out-of-range term or an int64 overflow, and naming the column when
 * the sum lies beyond the float range; the caller adds the tensor name.
 * out = in[rows][cols] summed over rows: (cols) */
static inline enum dt_status dt_fixed_sum_rows_at_shift(float *out, const float *in, int64_t rows,
                                                        int64_t cols, int shift, int64_t *scratch,
                                                        struct dt_error *err)
{
    DT_ASSERT(rows >= 0 && cols >= 0);
    if (!dt_fixed_shift_valid(shift))
        return dt_error_set(err, DT_ERR_NUMERIC, "fixed-point shift %d outside [%d, %d]", shift,
                            DT_FIXED_SHIFT_MIN, DT_FIXED_SHIFT_MAX);
    for (int64_t c = 0; c < cols; c++) scratch[c] = 0;
    for (int64_t r = 0; r < rows; r++) {
        const float *row = in + r * cols;
        for (int64_t c = 0; c < cols; c++) {
            int64_t q;
            if (!dt_fixed_from_float(&q, row[c], shift)) {
                uint32_t bits = dt_float_bits(row[c]);
                if ((bits & 0x7f800000u) == 0x7f800000u)
                    return dt_error_set(err, DT_ERR_NUMERIC,
                                        "non-finite input (%s) at row %" PRId64 ", column %" PRId64,
                                        (bits & 0x7fffffu) ? "nan" : "inf", r, c);
                return dt_error_set(err, DT_ERR_NUMERIC,
                                    "fixed-point overflow: |%g| * 2^%d >= 2^63 at row %" PRId64
                                    ", column %" PRId64,
                                    (double)row[c], shift, r, c);
            }
            if (!dt_fixed_add(&scratch[c], q))
                return dt_error_set(
                    err, DT_ERR_NUMERIC,
                    "fixed-point overflow: int64 sum at shift %d overflows at row %" PRId64
                    ", column %" PRId64,
                    shift, r, c);
        }
    }
    for (int64_t c = 0; c < cols; c++) {
        out[c] = dt_fixed_to_float(scratch[c], shift);
        if ((dt_float_bits(out[c]) & 0x7fffffffu) == 0x7f800000u)
            return dt_error_set(err, DT_ERR_NUMERIC,
                                "fixed-point sum of column %" PRId64 " overflows the float range",
                                c);
    }
    return DT_OK;
}

/* out[o] = sum over r of in[r * cols + o], exactly in fixed point per column, with ONE
 * power-of-two scale per tensor: max |in| over the whole input and n_terms = rows. The
 * result does not depend on the order of the rows (nor on any split of them into chunks
 * whose int64 partials are added). scratch holds cols int64; *shift_out (may be NULL)
 * receives the shift used. Errors as dt_fixed_sum_rows_at_shift; a non-finite input is
 * reported at its first position in row-major order.
 * out = in[rows][cols] summed over rows: (cols) */
static inline enum dt_status dt_fixed_sum_rows(float *out, const float *in, int64_t rows,
                                               int64_t cols, int64_t *scratch, int *shift_out,
                                               struct dt_error *err)
{
    DT_ASSERT(rows >= 0 && cols >= 0);
    uint32_t max_bits = 0; /* max |x| compared as bit patterns: monotone for finite floats */
    for (int64_t i = 0; i < rows * cols; i++) {
        uint32_t bits = dt_float_bits(in[i]) & 0x7fffffffu;
        if (bits >= 0x7f800000u)
            return dt_error_set(err, DT_ERR_NUMERIC,
                                "non-finite input (%s) at row %" PRId64 ", column %" PRId64,
                                bits > 0x7f800000u ? "nan" : "inf", i / cols, i % cols);
        if (bits > max_bits) max_bits = bits;
    }
    int shift = dt_fixed_shift_for(dt_bits_float(max_bits), rows);
    if (shift_out) *shift_out = shift;
    return dt_fixed_sum_rows_at_shift(out, in, rows, cols, shift, scratch, err);
}
#endif /* !__CUDACC__ */

#endif
