/* DT_HD marks static inline functions shared by host C code and CUDA device code
 * (random streams, portable math, fixed-point accumulation), and the float <-> bits casts
 * and never-fused IEEE operations they all need. */
#ifndef DT_HD_H
#define DT_HD_H

#if defined(__CUDACC__)
#define DT_HD __host__ __device__
#else
#define DT_HD
#endif

/* DT_HD plus "always inline" on the host, for small helpers inside vectorised loops (a
 * call the compiler declines to inline would stop the loop from vectorising). nvcc inlines
 * device functions on its own. */
#if !defined(__CUDACC__) && defined(__GNUC__)
#define DT_HDI DT_HD __attribute__((always_inline))
#else
#define DT_HDI DT_HD
#endif

#include <stdint.h>
#include <string.h>

/* The IEEE-754 bit pattern of a float and back: exact, no conversion. */
static inline DT_HD uint32_t dt_float_bits(float x)
{
#if defined(__CUDA_ARCH__)
    return __float_as_uint(x);
#else
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
#endif
}

static inline DT_HD float dt_bits_float(uint32_t u)
{
#if defined(__CUDA_ARCH__)
    return __uint_as_float(u);
#else
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
#endif
}

/* a + b, a - b, a * b, a / b, each one IEEE operation rounded to nearest and never fused
 * with a neighbour: the __f*_rn intrinsics on the device (which nvcc never contracts),
 * plain operators on the host (built with -ffp-contract=off). */
static inline DT_HDI float dt_rn_add(float a, float b)
{
#if defined(__CUDA_ARCH__)
    return __fadd_rn(a, b);
#else
    return a + b;
#endif
}

static inline DT_HDI float dt_rn_sub(float a, float b)
{
#if defined(__CUDA_ARCH__)
    return __fsub_rn(a, b);
#else
    return a - b;
#endif
}

static inline DT_HDI float dt_rn_mul(float a, float b)
{
#if defined(__CUDA_ARCH__)
    return __fmul_rn(a, b);
#else
    return a * b;
#endif
}

static inline DT_HDI float dt_rn_div(float a, float b)
{
#if defined(__CUDA_ARCH__)
    return __fdiv_rn(a, b);
#else
    return a / b;
#endif
}

#endif
