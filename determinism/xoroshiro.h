/* xoroshiro128** (Blackman and Vigna, "Scrambled linear pseudorandom number generators",
 * ACM TOMS 2021; parameters a, b, c = 24, 16, 37), run forwards AND backwards: the
 * reversible generator behind the `rng: lfsr` control (Shift-BNN-style epsilon
 * regeneration, after Wan et al., MICRO 2021). Host C and CUDA device code; 64-bit integer
 * operations only, the same bits everywhere.
 *
 * The state transition is F2-linear (an LFSR-family generator with period 2^128 - 1) and
 * invertible; the ** scrambler, rotl(s0 * 5, 7) * 9, is an output function of the state,
 * so it does not affect reversal. A raw LFSR's output fails linearity tests and is not
 * offered. Drawing forwards is `out = dt_xoro_out(s); dt_xoro_next(&s)`, backwards
 * `dt_xoro_prev(&s); out = dt_xoro_out(s)`: the backward walk returns the forward outputs
 * in reverse order and ends in the state the forward walk started from.
 *
 * Inverse of one step. Forward: t = s0 ^ s1; s0' = rotl(s0, 24) ^ t ^ (t << 16);
 * s1' = rotl(t, 37). Backward: t = rotr(s1', 37); s0 = rotr(s0' ^ t ^ (t << 16), 24);
 * s1 = t ^ s0. */
#ifndef DT_XOROSHIRO_H
#define DT_XOROSHIRO_H

#include <stdint.h>

#include "core/hd.h"
#include "determinism/streams.h"

struct dt_xoro {
    uint64_t s0, s1; /* never both zero: the zero state is a fixed point */
};

static inline DT_HDI uint64_t dt_xoro__rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

/* The 64-bit output of state s (the ** scrambler). */
static inline DT_HDI uint64_t dt_xoro_out(struct dt_xoro s)
{
    return dt_xoro__rotl(s.s0 * 5u, 7) * 9u;
}

static inline DT_HDI void dt_xoro_next(struct dt_xoro *s)
{
    uint64_t t = s->s0 ^ s->s1;
    s->s0 = dt_xoro__rotl(s->s0, 24) ^ t ^ (t << 16);
    s->s1 = dt_xoro__rotl(t, 37);
}

/* The exact inverse of dt_xoro_next. */
static inline DT_HDI void dt_xoro_prev(struct dt_xoro *s)
{
    uint64_t t = dt_xoro__rotl(s->s1, 64 - 37);
    uint64_t s0 = dt_xoro__rotl(s->s0 ^ t ^ (t << 16), 64 - 24);
    s->s0 = s0;
    s->s1 = t ^ s0;
}

/* The state seeded from 128 bits of seed material (a, b): each word goes through the
 * splitmix64 finalizer (a bijection); the one input pair that would give the all-zero
 * state is remapped to a fixed non-zero state, so seeding never yields the fixed point. */
#define DT_XORO_ZERO_REMAP_S0 0x9e3779b97f4a7c15ULL
#define DT_XORO_ZERO_REMAP_S1 0xbf58476d1ce4e5b9ULL
static inline DT_HDI struct dt_xoro dt_xoro_seed(uint64_t a, uint64_t b)
{
    struct dt_xoro s;
    s.s0 = dt_mix64(a);
    s.s1 = dt_mix64(b ^ 0x6a09e667f3bcc908ULL);
    if ((s.s0 | s.s1) == 0) {
        s.s0 = DT_XORO_ZERO_REMAP_S0;
        s.s1 = DT_XORO_ZERO_REMAP_S1;
    }
    return s;
}

static inline DT_HDI int dt_xoro_equal(struct dt_xoro a, struct dt_xoro b)
{
    return a.s0 == b.s0 && a.s1 == b.s1;
}

/* Host only (determinism/xoroshiro_jump.c): move the state k steps forwards
 * (dt_xoro_jump) or backwards (dt_xoro_jump_back) in O(128^2 log k) bit operations,
 * the same result as k calls of dt_xoro_next / dt_xoro_prev. */
void dt_xoro_jump(struct dt_xoro *s, uint64_t k);
void dt_xoro_jump_back(struct dt_xoro *s, uint64_t k);

#endif
