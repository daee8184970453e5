/* The fixed-point conversions of fixed_point.h in 4 vector lanes, for the CPU backend's
 * vector loops (DT_VECTOR_FN clones, and the exact sum's paths without AVX-512: exact.c; the
 * bias gradient's column sums and roundings: dense.c;
 * the clipping norm's squares: optim.c; the scatters' roundings: conv.c, pool.c, embedding.c).
 * Generic GCC vectors: one AVX2 register per v4d in
 * the AVX2 copies of DT_VECTOR_FN, two SSE ones in the baseline. Same values as the scalar
 * dt_fixed_from_float_bounded and dt_fixed_to_float_bounded (tests/test_exact.c). */
#ifndef DT_CPU_FIXED_LANES_H
#define DT_CPU_FIXED_LANES_H

#include <stdint.h>
#include <string.h>

#include "determinism/fixed_point.h"

typedef float v4f __attribute__((vector_size(16)));
typedef double v4d __attribute__((vector_size(32)));
typedef int64_t v4i __attribute__((vector_size(32)));
typedef uint64_t v4u __attribute__((vector_size(32))); /* wrapping arithmetic */

/* round(x * 2^shift) for 4 finite partials with |x * 2^shift| < 2^62 (the shift's bound),
 * ties to even -- dt_fixed_from_float_bounded's value, by the double "magic number": below
 * 2^51 adding 1.5 * 2^52 rounds to an integer (the machine's mode: to nearest even) and
 * leaves it in the low bits; at 2^51 and above the product, 24 significant bits, is an
 * integer multiple of 2^28, converted as (x * 2^-28) the same way, then shifted back. */
static inline __attribute__((always_inline)) void to_fixed4_of(v4i *q, v4f x, const v4d *up)
{
    const v4d magic = {0x1.8p52, 0x1.8p52, 0x1.8p52, 0x1.8p52};
    const v4d big = {0x1p51, 0x1p51, 0x1p51, 0x1p51};
    /* exact; lane by lane, not __builtin_convertvector, which GCC 12 splits into two
     * 2-lane conversions through the stack (one vcvtps2pd this way: the bias gradient's
     * shards at 768 x 512, 2 threads, 0.13 -> 0.11 ms) */
    const v4d v = (v4d){x[0], x[1], x[2], x[3]} * *up;
    /* unsigned: in the lanes the other form serves, these wrap (and are discarded) */
    const v4i small_q = (v4i)((v4u)(v + magic) - (v4u)magic);
    const v4i large_q = (v4i)(((v4u)(v * 0x1p-28 + magic) - (v4u)magic) << 28);
    const v4d av = (v4d)((v4i)v & 0x7fffffffffffffffLL);
    const v4i is_small = (v4i)(av < big);
    *q = (small_q & is_small) | (large_q & ~is_small);
}
static inline __attribute__((always_inline)) void to_fixed4(v4i *q, const float *p, const v4d *up)
{
    v4f x;
    memcpy(&x, p, sizeof x);
    to_fixed4_of(q, x, up);
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

/* acc[i] += round(src[i] * 2^shift), i < n, up = 2^shift in 4 lanes: 4 at a time, the rest
 * by dt_fixed_from_float_bounded (the same values); every term within the shift's bound. */
static inline __attribute__((always_inline)) void add_fixed_run(int64_t *acc, const float *src,
                                                                int64_t n, const v4d *up)
{
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        v4i q, a;
        to_fixed4(&q, src + i, up);
        memcpy(&a, acc + i, sizeof a);
        a += q;
        memcpy(acc + i, &a, sizeof a);
    }
    for (; i < n; i++) acc[i] += dt_fixed_from_float_bounded(src[i], (*up)[0]);
}

/* out[i] = acc[i] * 2^-shift rounded once, i < n, down = 2^-shift in 4 lanes: 4 at a time
 * (to_float4), the rest by dt_fixed_to_float_bounded -- dt_fixed_to_float's bits (tests/
 * test_dist.c, fixed_to_float_agrees), which cost about 5 ns a value one by one. */
static inline __attribute__((always_inline)) void round_fixed_run(float *out, const int64_t *acc,
                                                                  int64_t n, const v4d *down)
{
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        v4i a;
        memcpy(&a, acc + i, sizeof a);
        to_float4(out + i, &a, down);
    }
    for (; i < n; i++) out[i] = dt_fixed_to_float_bounded(acc[i], (*down)[0]);
}

#endif
