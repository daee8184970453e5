/* The `reduction: fixed` summation order, shared by every backend so CPU and GPU give the
 * same bits: a sum over n terms is cut into canonical chunks of DT_REDUCE_CHUNK consecutive
 * terms (the last may be short), each chunk summed serially in index order starting from
 * +0, then the chunk partials combined by a fixed pairwise tree:
 *
 *     while m > 1:  p[j] = p[2j] + p[2j+1] for j < m/2;  an odd last partial moves up
 *                   unchanged to p[m/2];  m = ceil(m/2)
 *
 * The tree's shape depends only on n -- never on thread count, block size or device.
 * (docs/DESIGN.md, "Determinism levels and controls", reduction.) */
#ifndef DT_REDUCE_H
#define DT_REDUCE_H

#include <stdint.h>

#include "core/hd.h"

#define DT_REDUCE_CHUNK 32

/* `reduction: unordered`: the grain of the arrival-order sums -- batch rows (dense weight
 * gradient) or examples (loss) per chunk that a worker takes as it comes. The forced-order
 * hook (determinism/streams.h) permutes these chunks, so a backend that emulates the CPU's
 * forced order (the CUDA tests) must use the same grain. */
#define DT_UNORDERED_CHUNK 8

static inline DT_HD int64_t dt_reduce_chunks(int64_t n)
{
    return (n + DT_REDUCE_CHUNK - 1) / DT_REDUCE_CHUNK;
}

/* One level-by-level pass of the fixed tree over m vectors of `len` floats stored
 * `stride` floats apart; the result lands in p[0 .. len). Elementwise, so vectorisable. */
static inline DT_HD void dt_reduce_tree_vectors(float *p, int64_t m, int64_t len, int64_t stride)
{
    while (m > 1) {
        int64_t half = m / 2;
        for (int64_t j = 0; j < half; j++) {
            float *dst = p + j * stride;
            const float *a = p + (2 * j) * stride, *b = p + (2 * j + 1) * stride;
            for (int64_t i = 0; i < len; i++) dst[i] = a[i] + b[i];
        }
        if (m & 1) {
            float *dst = p + half * stride;
            const float *src = p + (m - 1) * stride;
            for (int64_t i = 0; i < len; i++) dst[i] = src[i];
        }
        m = half + (m & 1);
    }
}

/* The same tree, by aligned blocks (what the GPU runs in parallel). In the level-by-level
 * tree, node j of level L holds the tree of leaves [j 2^L, min((j+1) 2^L, m)) under the
 * same rule, so for `block` a power of two the tree of m leaves is: the tree of each
 * aligned block of `block` leaves (the last may be short), then the tree of those
 * ceil(m / block) results -- applied again until one is left. One block of one level:
 * block t of the `count` items `s` floats apart, in place; its result lands on its first
 * item. Blocks are disjoint, so every (block, element) can run at once. */
static inline DT_HD void dt_reduce_tree_block(float *p, int64_t count, int64_t s, int64_t block,
                                              int64_t t)
{
    const int64_t first = t * block;
    dt_reduce_tree_vectors(p + first * s, count - first < block ? count - first : block, 1, s);
}

/* dt_reduce_tree_vectors(p, m, len, stride) by blocks, level after level (the host's
 * emulation of the GPU's order; same bits for every power-of-two block >= 2). */
static inline DT_HD void dt_reduce_tree_blocked(float *p, int64_t m, int64_t len, int64_t stride,
                                                int64_t block)
{
    for (int64_t s = stride, count = m; count > 1; s *= block, count = (count + block - 1) / block)
        for (int64_t t = 0; t * block < count; t++)
            for (int64_t e = 0; e < len; e++) dt_reduce_tree_block(p + e, count, s, block, t);
}

/* The same tree in place without compacting (what a block of GPU threads runs, a barrier
 * between levels): item j of the level of stride s sits at p[j s]; pair j of that level is
 * p[2j s] += p[(2j+1) s], and an odd last item stays where the next level (stride 2s) looks
 * for it. Node j of every level holds the tree of the same leaves as in the compacted form,
 * so the bits are dt_reduce_tree_vectors's (tests/test_batchnorm.c, strided_tree). */
static inline DT_HD void dt_reduce_tree_pair(float *p, int64_t s, int64_t j)
{
    p[2 * j * s] = p[2 * j * s] + p[(2 * j + 1) * s];
}

/* The strided tree of m items at p, serially (the host's emulation); the sum in p[0]. */
static inline DT_HD void dt_reduce_tree_strided(float *p, int64_t m)
{
    for (int64_t s = 1, count = m; count > 1; s *= 2, count = (count + 1) / 2)
        for (int64_t j = 0; j < count / 2; j++) dt_reduce_tree_pair(p, s, j);
}

/* The same tree kept as a stack while the partials arrive in index order (a kernel holding
 * one tile's chunk partials in turn): push partial n (counting from 1), then add the top
 * two dt_reduce_stack_merges(n) times; after the last, add the stack from the top down.
 * Every pair is a pair of the level-by-level tree (a block of 2^j partials closes when its
 * last arrives; the odd ones carried up are the stack's tail, added last), so the bits
 * are dt_reduce_tree_vectors's (tests/test_ops.c, tree_as_stack). */
static inline DT_HD int dt_reduce_stack_merges(int64_t n)
{
    int merges = 0;
    for (; n > 0 && (n & 1) == 0; n >>= 1) merges++;
    return merges;
}

/* Most partials a stack holds at once: one per bit of the count (chunks < 2^40). */
#define DT_REDUCE_STACK_MAX 41

/* Sum of v[0 .. n) in the fixed order. `partials` holds dt_reduce_chunks(n) floats. */
static inline DT_HD float dt_reduce_sum_fixed(const float *v, int64_t n, float *partials)
{
    int64_t m = dt_reduce_chunks(n);
    if (m == 0) return 0.0f;
    for (int64_t c = 0; c < m; c++) {
        int64_t end = (c + 1) * DT_REDUCE_CHUNK < n ? (c + 1) * DT_REDUCE_CHUNK : n;
        float s = 0.0f;
        for (int64_t i = c * DT_REDUCE_CHUNK; i < end; i++) s += v[i];
        partials[c] = s;
    }
    dt_reduce_tree_vectors(partials, m, 1, 1);
    return partials[0];
}

/* The same tree, streamed (one GPU thread summing its partials as they come, no array of
 * them): partial t (1-based) is pushed onto a stack of complete subtrees and merged with
 * the top ctz(t) times -- a binary counter, so the stack holds the subtrees of m's binary
 * digits, largest first -- and the end adds them from the top down (right to left). The
 * level-by-level tree of m leaves is exactly that: its complete 2^k-leaf subtrees, then the
 * leftovers combined right-associatively (an odd last item moves up until it meets its
 * left neighbour). The same bits for every m (tests/test_cuda_dense.c,
 * reduce_stream_equals_tree). The stack holds at most 64 subtrees: m < 2^64. */
struct dt_reduce_stream {
    float v[64];
    int top;
    uint64_t count;
};
static inline DT_HD void dt_reduce_stream_init(struct dt_reduce_stream *s)
{
    s->top = 0;
    s->count = 0;
}
static inline DT_HD void dt_reduce_stream_push(struct dt_reduce_stream *s, float x)
{
    s->v[s->top++] = x;
    for (uint64_t t = ++s->count; !(t & 1); t >>= 1) {
        s->v[s->top - 2] = s->v[s->top - 2] + s->v[s->top - 1];
        s->top--;
    }
}
static inline DT_HD float dt_reduce_stream_end(const struct dt_reduce_stream *s)
{
    if (s->top == 0) return 0.0f;
    float r = s->v[s->top - 1];
    for (int i = s->top - 2; i >= 0; i--) r = s->v[i] + r;
    return r;
}

#endif
