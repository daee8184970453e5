/* The fixed tree over one register tile's chunk partials, kept as a stack while the chunks
 * arrive in index order (determinism/reduce.h: dt_reduce_stack_merges), for the CPU kernels
 * whose tile is STACK_V vectors of 8 floats held in registers while a chunk's products run:
 * dense.c's weight-gradient tiles (6 rows x 16 columns), conv.c's chunk tiles (two tiles of
 * 6 outputs, or 6 patch elements x 16 outputs).
 *
 * A pair of the tree is the lower partial (the earlier chunks) plus the upper one. The
 * merges a chunk closes are added into its registers -- lower + the registers, then the
 * next lower + that -- and the result is stored once; the last chunk folds the whole stack
 * into its registers, so the tile's sum never goes through memory. The same pairs as pushing
 * every partial and adding the top two (tests/test_ops.c, tree_as_stack; the kernels'
 * tests against the tree written serially). */
#ifndef DT_CPU_CHUNK_STACK_H
#define DT_CPU_CHUNK_STACK_H

#include <stdbool.h>
#include <stdint.h>

#include "determinism/reduce.h"

typedef float v8f __attribute__((vector_size(32)));

#define STACK_V 12

/* Chunk c's partial t (NV vectors of type VT; c counting from 0; `last`: the tile's last
 * chunk). Not the last: the merges it closes folded into t (t = lower + t, vector by vector),
 * which is then pushed (one store of the registers) and reset to +0 for the next chunk. The
 * last: every partial below folded into t, which is then the tile's sum. A caller zeroes t
 * once before its first chunk (no chunk: t stays the zeros). One definition for every tile
 * shape: DT_CHUNK_STACK_TAKE(NAME, VT, NV, ATTR) defines NAME for a vector type and count
 * (ATTR: the target attribute its callers carry, if any); stack_take below is the v8f tiles'
 * (dense.c's wide tiles define theirs of 16-float vectors). */
#define DT_CHUNK_STACK_TAKE(NAME, VT, NV, ATTR)                                                    \
    ATTR static inline __attribute__((always_inline)) void NAME(VT(*stack)[NV], int *depth, VT *t, \
                                                                int64_t c, bool last)              \
    {                                                                                              \
        for (int m = last ? *depth : dt_reduce_stack_merges(c + 1); m > 0; m--) {                  \
            --*depth;                                                                              \
            _Pragma("GCC unroll 16") for (int v = 0; v < (NV); v++) t[v] =                         \
                stack[*depth][v] + t[v];                                                           \
        }                                                                                          \
        if (last) return;                                                                          \
        _Pragma("GCC unroll 16") for (int v = 0; v < (NV); v++) stack[*depth][v] = t[v],           \
                                                                t[v] = (VT){0};                    \
        (*depth)++;                                                                                \
    }

DT_CHUNK_STACK_TAKE(stack_take, v8f, STACK_V, )

#endif
