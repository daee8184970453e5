/* Standard normal variates with fixed consumption, portable bits: two 32-bit words in,
 * two normals out (Box-Muller on aligned pairs), never a rejection sampler, so the draw
 * count is a pure function of the element count and a counter-based or reversible
 * generator can regenerate any value. Host C and CUDA device code.
 *
 * Uniforms. The top 24 bits k of a word give u = (k + 0.5) * 2^-24 in (0, 1): never 0 or
 * 1, symmetric about 1/2. Such a u has up to 25 significant bits, more than a float holds,
 * so u itself is never rounded: every quantity below is formed exactly from the integer k.
 *
 * Radius r = sqrt(-2 log u1). log u1 goes through the portable-math log kernel
 * (determinism/portable_math.h) with its reduced argument f = m - 1 (u1 = m 2^e) built
 * exactly from k1: u1 < 1/2 is exact in float and decomposed from its bits; for
 * 1/2 <= u1 < sqrt(1/2), f = 2 u1 - 1 = (2 k1 + 1 - 2^24) 2^-24; above, f = u1 - 1 =
 * (2 k1 + 1 - 2^25) 2^-25 (odd integers below 2^24 in magnitude, so exact). The square
 * root is IEEE's correctly rounded one. |z| <= sqrt(50 ln 2) = 5.887.
 *
 * Angle 2 pi u2 = (pi/2)(q + t): the quadrant q is k2's top 2 bits and t = (2 j + 1) 2^-23
 * with j its low 22 bits, exact; t > 1/2 is reflected to 1 - t (exact) with sine and
 * cosine swapped, so the polynomials see t in (0, 1/2]: sin(pi t / 2) as t * S(t^2)
 * (degree 11) and cos(pi t / 2) as C(t^2) (degree 10), Taylor coefficients rounded to
 * float (truncation below 3e-9 on the range).
 *
 * Output: z0 = r cos(2 pi u2), z1 = r sin(2 pi u2), each product rounded once. Every
 * product goes through dt_pm__mul and every quotient through dt_pm__div, so nvcc never
 * contracts them into an FMA, and the host build uses -ffp-contract=off. */
#ifndef DT_GAUSSIAN_H
#define DT_GAUSSIAN_H

#include <math.h>
#include <stdint.h>

#include "core/hd.h"
#include "determinism/portable_math.h"

/* k1 in [2^23, DT_GAUSS_K_SQRT_HALF) has 1/2 <= u1 < sqrt(1/2) (2 k1 + 1 <= 23726565). */
#define DT_GAUSS_K_SQRT_HALF 11863283u

static inline DT_HDI float dt_gauss__sqrt(float x)
{
#if defined(__CUDA_ARCH__)
    return __fsqrt_rn(x);
#else
    return sqrtf(x); /* IEEE 754 requires a correctly rounded square root */
#endif
}

/* cond ? a : b on the bits: both operands are computed unconditionally, so compilers keep
 * the code branch-free (and vectorise it) without speculating floating-point operations. */
static inline DT_HDI float dt_gauss__sel(uint32_t cond, float a, float b)
{
    const uint32_t m = 0u - cond; /* cond is 0 or 1 */
    return dt_bits_float((dt_float_bits(a) & m) | (dt_float_bits(b) & ~m));
}

/* log((k + 0.5) 2^-24) for k in [0, 2^24), from an exactly formed reduced argument.
 * Branch-free (the three ranges are formed and selected), so it vectorises and random k
 * costs no mispredictions. */
static inline DT_HDI float dt_gauss_log_u24(uint32_t k)
{
    const uint32_t n = 2u * k + 1u; /* odd, < 2^25 */
    /* k < 2^23: u = n 2^-25 is exact and normal; m and e from its bits. */
    float u = dt_pm__mul((float)(n & 0xffffffu), 0x1p-25f);
    int ea = 0;
    float fa = dt_pm__split(dt_float_bits(u), &ea);
    /* 2^23 <= k < DT_GAUSS_K_SQRT_HALF: e = -1, f = 2u - 1 = (n - 2^24) 2^-24. */
    float fb = dt_pm__mul((float)((int32_t)n - (int32_t)(1u << 24)), 0x1p-24f);
    /* above: e = 0, f = u - 1 = (n - 2^25) 2^-25. */
    float fc = dt_pm__mul((float)((int32_t)n - (int32_t)(1u << 25)), 0x1p-25f);
    const uint32_t low = k < (1u << 23), mid = k < DT_GAUSS_K_SQRT_HALF;
    float f = dt_gauss__sel(low, fa, dt_gauss__sel(mid, fb, fc));
    int e = (int)((uint32_t)ea & (0u - low)) - (int)(mid & (low ^ 1u)); /* ea, -1 or 0 */
    return dt_pm__log_kernel(f, e, 0.0f);
}

/* sin(pi t / 2) and cos(pi t / 2) for t in [0, 1/2]. */
static inline DT_HDI void dt_gauss_sincos_quarter(float t, float *s, float *c)
{
    const float S0 = 0x1.921fb6p+0f, S1 = -0x1.4abbcep-1f, S2 = 0x1.466bc6p-4f,
                S3 = -0x1.32d2ccp-8f, S4 = 0x1.507834p-13f, S5 = -0x1.e30750p-19f;
    const float C1 = -0x1.3bd3ccp+0f, C2 = 0x1.03c1f0p-2f, C3 = -0x1.55d3c8p-6f,
                C4 = 0x1.e1f506p-11f, C5 = -0x1.a6d1f2p-16f;
    float z = dt_pm__mul(t, t);
    float ps = dt_pm__mul(S5, z) + S4;
    ps = dt_pm__mul(ps, z) + S3;
    ps = dt_pm__mul(ps, z) + S2;
    ps = dt_pm__mul(ps, z) + S1;
    ps = dt_pm__mul(ps, z) + S0;
    *s = dt_pm__mul(t, ps);
    float pc = dt_pm__mul(C5, z) + C4;
    pc = dt_pm__mul(pc, z) + C3;
    pc = dt_pm__mul(pc, z) + C2;
    pc = dt_pm__mul(pc, z) + C1;
    *c = dt_pm__mul(z, pc) + 1.0f;
}

/* sin and cos of 2 pi (k + 0.5) 2^-24 for k in [0, 2^24). Branch-free: the reflection
 * and the quadrant become a swap and two sign flips chosen by selects. */
static inline DT_HDI void dt_gauss_sincos_u24(uint32_t k, float *sn, float *cs)
{
    const uint32_t q = k >> 22, j = k & 0x3fffffu;
    const float t = dt_pm__mul((float)(2u * j + 1u), 0x1p-23f); /* exact, in (0, 1) */
    const uint32_t refl = t > 0.5f;
    const float t1 = 1.0f - t; /* exact */
    float s, c;
    dt_gauss_sincos_quarter(dt_gauss__sel(refl, t1, t), &s, &c);
    /* sin(pi t/2) = cos(pi (1-t)/2); theta = (pi/2) q + (pi/2) t: an odd quadrant swaps
     * sine and cosine again; sine is negative in quadrants 2, 3 and cosine in 1, 2. */
    const uint32_t swap = refl ^ (q & 1u);
    const float a = dt_gauss__sel(swap, c, s), b = dt_gauss__sel(swap, s, c);
    *sn = dt_bits_float(dt_float_bits(a) ^ ((q >> 1) << 31));
    *cs = dt_bits_float(dt_float_bits(b) ^ (((q ^ (q >> 1)) & 1u) << 31));
}

/* Two standard normals from two 32-bit words (Box-Muller, see the top). */
static inline DT_HDI void dt_gauss_pair(uint32_t w1, uint32_t w2, float *z0, float *z1)
{
    float r = dt_gauss__sqrt(dt_pm__mul(-2.0f, dt_gauss_log_u24(w1 >> 8)));
    float sn, cs;
    dt_gauss_sincos_u24(w2 >> 8, &sn, &cs);
    *z0 = dt_pm__mul(r, cs);
    *z1 = dt_pm__mul(r, sn);
}

#endif
