/* The exact matrix product (issue 51): C = A . B with every output a fixed function of the
 * inputs -- the same bits whichever kernel, order, tiling, thread count or device computes
 * it -- because everything between the inputs and the one rounding is integer arithmetic.
 * The per-element formulas, written once for every backend and the tests (DT_HD).
 *
 * 1. Scales: each row i of A (K values) gets the exponent eA_i = the smallest e with every
 *    |A[i,k]| < 2^e (dt_xp_scale of the row's max |value|); each column j of B likewise eB_j.
 * 2. Fixed point at L levels of DT_XP_BITS (28) bits: XA[i,k] = trunc(A[i,k] 2^(28 L - eA_i)),
 *    an integer with |XA| < 2^(28 L) (dt_xp_fixed; truncation toward zero). The operand
 *    loses what lies below 2^(eA_i - 28 L): below 2^-(28 L) of the row's largest value.
 *    Float32 keeps 2^-24 of each value's own magnitude; so one level serves products whose
 *    rows and columns run over features (forward, input gradients), and products whose K
 *    runs over the batch (weight gradients: examples far apart in magnitude) take two --
 *    DT_XP_LEVELS_FORWARD and DT_XP_LEVELS_WGRAD, chosen by measurement on the models' real
 *    tensors (tests/test_xp.c, results/cpu/exact-product/errors.txt).
 * 3. Slices: XA = sum_p a_p 2^(7 (S-1-p)) with int8 digits a_p in [-127, 127] of XA's sign
 *    (dt_xp_slice), S = 4 L. An int8 x int8 -> int32 product of slices,
 *    P_pq[i,j] = sum_k a_p[i,k] b_q[k,j], is exact for K <= DT_XP_K_MAX: what int8 GEMMs
 *    (cuBLAS cublasGemmEx with 32-bit integer compute, oneDNN s8s8s32, AVX-512 VNNI,
 *    AMX-INT8, a plain C loop) all compute, whatever their order. Likewise a level split
 *    XA = hi 2^28 + lo (dt_xp_hi, dt_xp_lo: 28-bit halves of XA's sign) for 32 x 32 -> 64-bit
 *    integer units (the CPU's vpmuldq).
 * 4. Combination: acc[i,j] = sum_pq P_pq[i,j] 2^(7 (2S-2-p-q)) (dt_xp_combine) -- exactly
 *    sum_k XA[i,k] XB[k,j]: every slice pair is kept, so the combination is the integer dot
 *    product of the fixed-point operands, |acc| < K 2^(56 L). At one level it is a 128-bit
 *    integer; at two it may pass 2^127 (K > 32767), so it is held as the four half products
 *    hh, hl, lh, ll (each below K 2^56) of acc = hh 2^56 + (hl + lh) 2^28 + ll. An int8
 *    GEMM's int32 products are exact for K <= DT_XP_K_MAX; past that it sums its K in
 *    blocks (exact integers: any blocking gives the same acc). The op takes K < 2^31.
 * 5. One rounding: C[i,j] = the float nearest acc 2^(eA_i + eB_j - 56 L), ties to even,
 *    subnormals and overflow as IEEE round-to-nearest (dt_xp_to_float; at two levels
 *    dt_xp_to_float_halves, the same rounding of the joined value).
 * A zero row or column (max 0) has every X 0 and gives +0. NaN and Inf have no fixed-point
 * form: the caller checks the scales first (dt_xp_row_scale returns DT_XP_NONFINITE). */
#ifndef DT_EXACT_PRODUCT_H
#define DT_EXACT_PRODUCT_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "core/hd.h"
#include "determinism/fixed_point.h"

#define DT_XP_SLICE_BITS 7                           /* an int8 digit: |a_p| <= 127 */
#define DT_XP_SLICES 4                               /* slices per operand per level */
#define DT_XP_BITS (DT_XP_SLICE_BITS * DT_XP_SLICES) /* 28 bits below the row's top */
#define DT_XP_LEVELS_FORWARD 1                       /* forward, input gradients */
#define DT_XP_LEVELS_WGRAD 2                         /* weight gradients (K: the batch) */
#define DT_XP_LEVELS_MAX 2
#define DT_XP_K_MAX ((int64_t)133144)       /* an int8 GEMM: K 127^2 < 2^31, int32 exact */
#define DT_XP_K_OP_MAX ((int64_t)INT32_MAX) /* the op's K: every part below 2^87 */
#define DT_XP_TA 1                          /* matmul_exact: A stored transposed, (K, M) */
#define DT_XP_TB 2                          /* matmul_exact: B stored transposed, (N, K) */
#define DT_XP_ZERO (-100000)                /* the scale of an all-zero row */
#define DT_XP_NONFINITE 100000              /* the scale of a row with NaN/Inf */

typedef __int128 dt_xp_acc;

/* The scale exponent of a row (column) whose largest |value| is max_abs: the smallest e with
 * max_abs < 2^e; DT_XP_ZERO for 0, DT_XP_NONFINITE for NaN or Inf. */
static inline DT_HD int dt_xp_scale(float max_abs)
{
    uint64_t m;
    int e;
    bool neg;
    if (!dt_fixed_decode_(&m, &e, &neg, max_abs)) return DT_XP_NONFINITE;
    if (m == 0) return DT_XP_ZERO;
    return e + dt_fixed_bitlen_(m); /* m 2^e < 2^(e + bitlen(m)), and not below 2^(.. - 1) */
}

/* The scale of n values v[0], v[stride], ...: dt_xp_scale of their largest magnitude, taken
 * on the bits (a NaN or Inf, whose bits are the largest, makes it DT_XP_NONFINITE). */
static inline DT_HD int dt_xp_scale_bits(uint32_t top) /* top: the largest |bits| */
{
    return dt_xp_scale(dt_bits_float(top > 0x7f800000u ? 0x7f800000u : top));
}

static inline DT_HD int dt_xp_row_scale(const float *v, int64_t n, int64_t stride)
{
    uint32_t top = 0;
    for (int64_t i = 0; i < n; i++) {
        const uint32_t b = dt_float_bits(v[i * stride]) & 0x7fffffffu;
        top = b > top ? b : top;
    }
    return dt_xp_scale_bits(top);
}

/* 2^p as a double, for |p| < 1023. */
static inline DT_HD double dt_xp_pow2_(int p)
{
    const uint64_t bits = (uint64_t)(1023 + p) << 52;
    double d;
    memcpy(&d, &bits, sizeof d);
    return d;
}

/* trunc(x 2^(28 levels - scale)) for |x| < 2^scale: |X| < 2^(28 levels). The product is
 * exact in double (x's 24 bits, shifted by a power of two into a value below 2^56, at most
 * 2^204 away), and the conversion truncates toward zero: one multiply and one convert per
 * element, which vectorise (0 for a zero or non-finite row, whose values have no fixed
 * point). */
static inline DT_HD int64_t dt_xp_fixed(float x, int scale, int levels)
{
    if (scale == DT_XP_ZERO || scale == DT_XP_NONFINITE) return 0;
    return (int64_t)((double)x * dt_xp_pow2_(DT_XP_BITS * levels - scale));
}

/* Slice p (0: the top digit) of X at `levels` levels (S = 4 levels slices): the p-th
 * base-128 digit of |X| from the top, with X's sign, in [-127, 127];
 * sum_p slice_p 2^(7 (S-1-p)) == X. */
static inline DT_HD int8_t dt_xp_slice(int64_t X, int p, int levels)
{
    const uint64_t mag = X < 0 ? (uint64_t)(-X) : (uint64_t)X;
    const int d = (int)((mag >> (DT_XP_SLICE_BITS * (DT_XP_SLICES * levels - 1 - p))) & 127u);
    return (int8_t)(X < 0 ? -d : d);
}

/* The two 28-bit halves of a two-level X, each of X's sign: X == hi 2^28 + lo. */
static inline DT_HD int32_t dt_xp_hi(int64_t X)
{
    return (int32_t)(X / ((int64_t)1 << DT_XP_BITS)); /* C division: toward zero */
}
static inline DT_HD int32_t dt_xp_lo(int64_t X)
{
    return (int32_t)(X - (int64_t)dt_xp_hi(X) * ((int64_t)1 << DT_XP_BITS));
}

/* sum_k a[k] b[k bstride] of a one-level fixed-point row and column (or two 28-bit halves),
 * exactly: int64 products (|a b| < 2^56) summed 64 at a time (below 2^62) into the 128-bit
 * accumulator -- the portable form of the product (no int8 units), the same integer as the
 * slices combined. The values are held in int64 (as vector lanes read them). */
static inline DT_HD dt_xp_acc dt_xp_dot(const int64_t *a, const int64_t *b, int64_t K,
                                        int64_t bstride)
{
    dt_xp_acc acc = 0;
    for (int64_t k0 = 0; k0 < K; k0 += 64) {
        const int64_t k1 = k0 + 64 < K ? k0 + 64 : K;
        int64_t s = 0;
        for (int64_t k = k0; k < k1; k++) s += a[k] * b[k * bstride];
        acc += s;
    }
    return acc;
}

/* acc += P 2^(7 (2S-2-p-q)), S = 4 levels: slice pair (p, q)'s exact int32 product into the
 * output. */
static inline DT_HD void dt_xp_combine(dt_xp_acc *acc, int32_t P, int p, int q, int levels)
{
    const int S = DT_XP_SLICES * levels;
    *acc += (dt_xp_acc)P * ((dt_xp_acc)1 << (DT_XP_SLICE_BITS * (2 * S - 2 - p - q)));
}

/* Half h of a fixed-point value as the 32 x 32 -> 64-bit paths hold it: X itself at one
 * level; at two, h 0 its high half and h 1 its low one (dt_xp_hi, dt_xp_lo). */
static inline DT_HD int64_t dt_xp_half(int64_t X, int h, int levels)
{
    return levels == 1 ? X : h == 0 ? dt_xp_hi(X) : dt_xp_lo(X);
}

/* The slice pair (p, q)'s exact product P into the output's integer, held per half pair at
 * two levels: part[0] at one level; at two, slice p belongs to half p / 4 (a 56-bit value's
 * top four base-128 digits are its high half's, its low four the low half's, signs alike),
 * so the pair adds into part[(p / 4) 2 + q / 4] (hh, hl, lh, ll) with the one-level weight
 * of (p % 4, q % 4): an int8 GEMM path's fold, the same parts as the halves' dot products. */
static inline DT_HD void dt_xp_fold(dt_xp_acc *part, int32_t P, int p, int q, int levels)
{
    const int h = levels == 1 ? 0 : (p / DT_XP_SLICES) * 2 + q / DT_XP_SLICES;
    dt_xp_combine(&part[h], P, p % DT_XP_SLICES, q % DT_XP_SLICES, 1);
}

/* A two-level product from its four half products (hi/lo of A times hi/lo of B), exactly:
 * hh 2^56 + (hl + lh) 2^28 + ll -- while that fits 128 bits (K <= 32767; the tests' form). */
static inline DT_HD dt_xp_acc dt_xp_join(dt_xp_acc hh, dt_xp_acc hl, dt_xp_acc lh, dt_xp_acc ll)
{
    return hh * ((dt_xp_acc)1 << (2 * DT_XP_BITS)) + (hl + lh) * ((dt_xp_acc)1 << DT_XP_BITS) + ll;
}

/* Number of significant bits of a 128-bit magnitude. */
static inline DT_HD int dt_xp_bitlen_(unsigned __int128 u)
{
    const uint64_t hi = (uint64_t)(u >> 64);
    return hi ? 64 + dt_fixed_bitlen_(hi) : dt_fixed_bitlen_((uint64_t)u);
}

/* round-half-even(u / 2^r), r >= 1. */
static inline DT_HD unsigned __int128 dt_xp_rne_shr_(unsigned __int128 u, int r)
{
    if (r > 128) return 0;
    if (r == 128) return u > ((unsigned __int128)1 << 127) ? 1 : 0;
    const unsigned __int128 q = u >> r;
    const unsigned __int128 rem = u & ((((unsigned __int128)1) << r) - 1);
    const unsigned __int128 half = ((unsigned __int128)1) << (r - 1);
    return q + (rem > half || (rem == half && (q & 1)) ? 1 : 0);
}

/* The float nearest acc 2^exp (ties to even): one rounding, done on the integer, for any
 * exponent -- subnormal results included, beyond the float range +-Inf; acc == 0 gives +0, a
 * nonzero acc whose value rounds to zero a zero of its sign. */
static inline DT_HD float dt_xp_to_float(dt_xp_acc acc, int exp)
{
    if (acc == 0) return 0.0f;
    const uint32_t sign = acc < 0 ? 0x80000000u : 0u;
    const unsigned __int128 u =
        acc < 0 ? (unsigned __int128)0 - (unsigned __int128)acc : (unsigned __int128)acc;
    const int64_t e = (int64_t)dt_xp_bitlen_(u) - 1 + exp; /* value in [2^e, 2^(e+1)) */
    if (e > 127) return dt_bits_float(sign | 0x7f800000u);
    const int64_t qexp = e - 23 < -149 ? -149 : e - 23; /* the result's last bit */
    const int64_t r = qexp - exp;                       /* value / 2^qexp = u / 2^r */
    unsigned __int128 m;
    if (r <= 0) m = u << (-r); /* exact, < 2^24 */
    else m = dt_xp_rne_shr_(u, r > 200 ? 200 : (int)r);
    if (m == 0) return dt_bits_float(sign);
    uint32_t bits = ((uint32_t)(qexp + 149) << 23) + (uint32_t)m; /* a carry bumps the exponent */
    if (bits > 0x7f800000u) bits = 0x7f800000u;
    return dt_bits_float(sign | bits);
}

/* The float nearest (hh 2^56 + (hl + lh) 2^28 + ll) 2^exp, ties to even: one rounding of the
 * joined two-level integer for any K < 2^31 (each part below 2^87), without forming it.
 * value = y 2^28 + r with 0 <= r < 2^28 and y = hh 2^28 + hl + lh + floor(ll / 2^28). */
static inline DT_HD float dt_xp_to_float_halves(dt_xp_acc hh, dt_xp_acc hl, dt_xp_acc lh,
                                                dt_xp_acc ll, int exp)
{
    const dt_xp_acc unit = (dt_xp_acc)1 << DT_XP_BITS;
    dt_xp_acc q = ll / unit, r = ll - q * unit; /* toward zero: r of ll's sign */
    if (r < 0) q -= 1, r += unit;
    const dt_xp_acc y = hh * unit + hl + lh + q, lim = (dt_xp_acc)1 << 98; /* |y| < 2^116 */
    if (y < lim && y > -lim) return dt_xp_to_float(y * unit + r, exp);
    /* |value| >= 2^126: the floats' midpoints are multiples of 2^102 (subnormal outputs'
     * coarser still), none strictly between y 2^28 and (y + 1) 2^28, so value rounds as
     * (y + 1/2) 2^28 does when r > 0 -- (2y + 1) 2^27, in 128 bits */
    return dt_xp_to_float(2 * y + (r != 0 ? 1 : 0), exp + DT_XP_BITS - 1);
}

/* The exact dot product of two float vectors, n values each at strides as and bs: each
 * vector scaled by its own largest magnitude at two levels (56 bits), the integer dot
 * product in 128 bits (n <= 32767), one rounding -- for the fused ops whose sums are dot
 * products of strided rows and columns (attention's, nets/gpt_elem.h). A NaN or Inf in
 * either vector gives NaN; n == 0 gives +0. */
static inline DT_HD float dt_xp_dot_vec(const float *a, int64_t as, const float *b, int64_t bs,
                                        int64_t n)
{
    const int sa = dt_xp_row_scale(a, n, as), sb = dt_xp_row_scale(b, n, bs);
    if (sa == DT_XP_NONFINITE || sb == DT_XP_NONFINITE) return dt_bits_float(0x7fc00000u);
    if (sa == DT_XP_ZERO || sb == DT_XP_ZERO) return 0.0f;
    dt_xp_acc acc = 0;
    for (int64_t k = 0; k < n; k++)
        acc += (dt_xp_acc)dt_xp_fixed(a[k * as], sa, 2) * (dt_xp_acc)dt_xp_fixed(b[k * bs], sb, 2);
    return dt_xp_to_float(acc, sa + sb - 4 * DT_XP_BITS);
}

/* An output from its integer's parts (part[0] at one level; hh, hl, lh, ll at two) and
 * exponent: the one rounding every path ends with. */
static inline DT_HD float dt_xp_round_parts(const dt_xp_acc *part, int exp, int levels)
{
    return levels == 1 ? dt_xp_to_float(part[0], exp)
                       : dt_xp_to_float_halves(part[0], part[1], part[2], part[3], exp);
}

/* The exponent of output (i, j): acc 2^(eA + eB - 56 levels). */
static inline DT_HD int dt_xp_out_exp(int scale_a, int scale_b, int levels)
{
    return scale_a + scale_b - 2 * DT_XP_BITS * levels;
}

#endif
