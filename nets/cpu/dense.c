/* Dense layer on the CPU backend: forward, backward-data, backward-weight, bias gradient,
 * under the policy's controls (docs/DESIGN.md, "Determinism levels and controls").
 * `fast` takes, op by op, the fastest path detrain has on this CPU (measured with `detrain
 * bench`, which flags an op where another level beats fast: docs/performance.md); several
 * of those happen to be deterministic, which the comments say.
 *
 *   matrix products  math: fast -> on a CPU with AVX-512 the wide tiles with fused
 *                    multiply-adds (one rounding per k, k in order: deterministic, not the
 *                    portable bits), else OpenBLAS sgemm on each worker's rows; otherwise
 *                    matmul_rows_ordered, which sums over k in increasing index order for
 *                    every output and vectorises across output columns, so the order
 *                    survives vectorisation and the row split across threads. Its tiles
 *                    are AVX-512 (8 rows x 32 or 16 columns) where the CPU has it, else AVX2 or
 *                    baseline (4 x 16): the same roundings per element on every path.
 *   backward-weight  the sum over the batch, under `reduction`:
 *                    fixed     -> canonical chunks of DT_REDUCE_CHUNK rows, each summed in
 *                                 index order, combined by the fixed tree of reduce.h (and
 *                                 exact's shards likewise); under math fast with AVX-512
 *                                 each chunk's multiply-adds fused (wgrad_fuses);
 *                    unordered -> math fast: one pass of fused tiles over the batch, x
 *                                 read in place, where the CPU has AVX-512 and the shape
 *                                 is a dense layer's (faster than OpenBLAS there; no
 *                                 chunks, deterministic), else OpenBLAS sgemm over the whole
 *                                 batch, each worker on its rows of dw (no partials);
 *                                 otherwise (detrain's own sums: math strict or portable)
 *                                 fixed's kernels, any order being allowed and theirs the
 *                                 fastest (dt_cpu_wgrad_in_order); under the forced-order
 *                                 hook, chunks of DT_UNORDERED_CHUNK rows summed into
 *                                 partials added in a drawn order.
 *   bias gradient    a scatter-add over the batch, under `atomics`:
 *                    fixed_point -> exact int64 accumulation, one rounding (fixed_point.h);
 *                    float       -> each worker's static slice of rows summed into a
 *                                   private partial (few columns: flat blocks of whole
 *                                   vectors, column_sums), each partial added with a
 *                                   float compare-and-swap in arrival order (block
 *                                   partials + atomicAdd); with three workers or more it
 *                                   is what can make `fast` replicas part on the CPU. */
#include <stdatomic.h>
#include <string.h>

#include <cblas.h>

#ifdef __x86_64__
#include <immintrin.h>
#endif

#include "determinism/exact_product.h"
#include "determinism/fixed_point.h"
#include "determinism/reduce.h"
#include "determinism/streams.h"
#include "nets/cpu/chunk_stack.h"
#include "nets/cpu/cpu.h"
#include "nets/cpu/fixed_lanes.h"

#define ROW_BLOCK 8                 /* rows per block in the fixed backward-weight tree */
#define WGRAD_COLS 64               /* columns per block there (a multiple of NR) */
#define ROWS_PARTIALS_MAX (4 << 20) /* floats of chunk partials the transposed form may use */

/* v8f (chunk_stack.h), GCC/Clang vector of 8 floats: one register in the AVX-512 and AVX2
 * copies, two SSE ones in the baseline copy (cpu.h). Mul and add stay separate roundings (no
 * contraction). */

/* Unaligned vector load/store through pointers (no vector passes a call boundary by
 * value, so the ABI does not depend on the clone's instruction set). */
static inline void v8_load(v8f *v, const float *p) { memcpy(v, p, sizeof *v); }
static inline void v8_store(float *p, const v8f *v) { memcpy(p, v, sizeof *v); }

#define MR 6   /* micro-tile rows: 6 x 2 accumulator vectors, the AVX2 registers' worth */
#define NR 16  /* micro-tile columns: two vectors */
#define KC 256 /* rows of Bm per packed block: KC x NR floats (16 KiB) stay in L1 */
_Static_assert(MR *NR == STACK_V * 8, "a weight-gradient tile is one chunk stack entry");

/* One rows x NR tile of C (rows <= MR), held in registers while k runs 0..K-1 in order,
 * from C's values (accumulate) or from +0. Bp is packed: row k's NR floats at Bp + k * NR
 * (pack_strip), so the tile reads one contiguous block whatever Bm's row stride -- a
 * power-of-two stride (a 256-wide layer: 1 KiB) would map every row of an unpacked strip
 * to the same few L1 sets. */
static inline __attribute__((always_inline)) void tile_v8(int rows, float *restrict C, int64_t ldc,
                                                          const float *restrict A, int64_t lda,
                                                          int64_t aks, const float *restrict Bp,
                                                          int64_t K, bool accumulate)
{
    v8f c0[MR], c1[MR];
#pragma GCC unroll 6
    for (int r = 0; r < rows; r++) {
        if (accumulate) v8_load(&c0[r], C + r * ldc), v8_load(&c1[r], C + r * ldc + 8);
        else c0[r] = c1[r] = (v8f){0};
    }
    for (int64_t k = 0; k < K; k++) {
        v8f b0, b1;
        v8_load(&b0, Bp + k * NR), v8_load(&b1, Bp + k * NR + 8);
#pragma GCC unroll 6
        for (int r = 0; r < rows; r++) {
            const float a = A[r * lda + k * aks];
            c0[r] = c0[r] + a * b0, c1[r] = c1[r] + a * b1;
        }
    }
#pragma GCC unroll 6
    for (int r = 0; r < rows; r++) v8_store(C + r * ldc, &c0[r]), v8_store(C + r * ldc + 8, &c1[r]);
}

/* CALL(r) with r the constant among 1 .. MR that `rows` is: a tile kernel's accumulators
 * stay in registers only where its row count is a constant. */
#define BY_ROWS(rows, CALL)                                                                        \
    switch (rows) {                                                                                \
    case 6: CALL(6); break;                                                                        \
    case 5: CALL(5); break;                                                                        \
    case 4: CALL(4); break;                                                                        \
    case 3: CALL(3); break;                                                                        \
    case 2: CALL(2); break;                                                                        \
    default: CALL(1); break;                                                                       \
    }

/* tile_v8 with `rows` a constant in each branch. */
static inline __attribute__((always_inline)) void
tile_rows(int rows, float *restrict C, int64_t ldc, const float *restrict A, int64_t lda,
          int64_t aks, const float *restrict Bp, int64_t K, bool accumulate)
{
#define TILE(r) tile_v8(r, C, ldc, A, lda, aks, Bp, K, accumulate)
    BY_ROWS(rows, TILE)
#undef TILE
}

/* Bm's rows [0, kc) and columns [0, cols) (cols <= NR) into bp (kc x NR), the columns past
 * `cols` zero: they feed only outputs that are discarded. */
static inline __attribute__((always_inline)) void
pack_strip(float *restrict bp, const float *restrict Bm, int64_t ldb, int64_t kc, int64_t cols)
{
    if (cols == NR) {
        for (int64_t k = 0; k < kc; k++) { /* two vector moves (a memcpy may be `rep movs`) */
            v8f lo, hi;
            v8_load(&lo, Bm + k * ldb), v8_load(&hi, Bm + k * ldb + 8);
            v8_store(bp + k * NR, &lo), v8_store(bp + k * NR + 8, &hi);
        }
        return;
    }
    for (int64_t k = 0; k < kc; k++) {
        memcpy(bp + k * NR, Bm + k * ldb, (size_t)cols * sizeof(float));
        memset(bp + k * NR + cols, 0, (size_t)(NR - cols) * sizeof(float));
    }
}

/* Rows [i0, i1) of one strip of cols (<= NR) columns of C against the packed block bp
 * (K x NR): full MR-row tiles, then one shorter; a strip narrower than NR goes through a
 * temporary tile whose first `cols` columns are kept. */
static inline __attribute__((always_inline)) void strip_rows(float *restrict C, int64_t ldc,
                                                             const float *restrict A, int64_t lda,
                                                             int64_t aks, const float *restrict bp,
                                                             int64_t K, int64_t cols, int64_t i0,
                                                             int64_t i1, bool accumulate)
{
    for (int64_t i = i0; i < i1; i += MR) {
        const int rows = i1 - i < MR ? (int)(i1 - i) : MR;
        if (cols == NR) {
            tile_rows(rows, C + i * ldc, ldc, A + i * lda, lda, aks, bp, K, accumulate);
            continue;
        }
        float ct[MR * NR];
        for (int r = 0; r < rows; r++)
            for (int64_t t = 0; t < NR; t++)
                ct[r * NR + t] = accumulate && t < cols ? C[(i + r) * ldc + t] : 0.0f;
        tile_rows(rows, ct, NR, A + i * lda, lda, aks, bp, K, true);
        for (int r = 0; r < rows; r++)
            memcpy(C + (i + r) * ldc, ct + r * NR, (size_t)cols * sizeof(float));
    }
}

/* C[i, j] (+)= sum_{k=0..K-1} A[i,k] * Bm[k, j] for rows i in [i0, i1), k ascending; with
 * `accumulate` the sum starts from C's current value, else from +0. Every element sees
 * the same sequence of roundings whichever tile computes it: the K blocks carry the sum
 * through C (a float stored and loaded back is the same float), a padded column or a
 * short row tile only adds outputs that are thrown away, so the bits depend on neither
 * the tiling nor the row split across threads.
 * A is (M,K) with row stride lda and k stride aks, Bm is (K,N) with row stride ldb, C is
 * (M,N) with row stride ldc. */
DT_VECTOR_FN(matmul_ordered_v8,
             (float *restrict C, int64_t ldc, const float *restrict A, int64_t lda, int64_t aks,
              const float *restrict Bm, int64_t ldb, int64_t K, int64_t N, int64_t i0, int64_t i1,
              bool accumulate),
             (C, ldc, A, lda, aks, Bm, ldb, K, N, i0, i1, accumulate))
{
    if (K == 0) {
        for (int64_t i = i0; i < i1 && !accumulate; i++)
            memset(C + i * ldc, 0, (size_t)N * sizeof(float));
        return;
    }
    float bp[KC * NR] __attribute__((aligned(64)));
    for (int64_t j = 0; j < N; j += NR) {
        const int64_t cols = N - j < NR ? N - j : NR;
        for (int64_t k0 = 0; k0 < K; k0 += KC) {
            const int64_t kc = K - k0 < KC ? K - k0 : KC;
            pack_strip(bp, Bm + k0 * ldb + j, ldb, kc, cols);
            strip_rows(C + j, ldc, A + k0 * aks, lda, aks, bp, kc, cols, i0, i1,
                       accumulate || k0 > 0);
        }
    }
}

/* One tile of dw: rows (<= MR) x NR at t (row r's batch row b factor at t[r * t_rs + b *
 * t_ks]) against bp (B x NR, dy's strip packed), each canonical chunk's partial in
 * registers from +0 and the chunks' tree as a stack (chunk_stack.h: MR x 2 vectors), the
 * sum stored into dw (row stride out) once, its first `cols` columns. */
static inline __attribute__((always_inline)) void
wgrad_tile(int rows, float *restrict dw, int64_t out, int64_t cols, const float *restrict t,
           int64_t t_rs, int64_t t_ks, const float *restrict bp, int64_t B)
{
    const int64_t n_chunks = dt_reduce_chunks(B);
    v8f stack[DT_REDUCE_STACK_MAX][STACK_V];
    v8f acc[STACK_V]; /* row r: acc[2r], acc[2r + 1] */
    int depth = 0;
#pragma GCC unroll 12
    for (int v = 0; v < STACK_V; v++) acc[v] = (v8f){0}; /* from +0 (chunk_stack.h) */
    for (int64_t c = 0; c < n_chunks; c++) {
        const int64_t b0 = c * DT_REDUCE_CHUNK;
        const int64_t len = B - b0 < DT_REDUCE_CHUNK ? B - b0 : DT_REDUCE_CHUNK;
        for (int64_t k = b0; k < b0 + len; k++) {
            v8f y0, y1;
            v8_load(&y0, bp + k * NR), v8_load(&y1, bp + k * NR + 8);
#pragma GCC unroll 6
            for (int r = 0; r < rows; r++) {
                const float a = t[r * t_rs + k * t_ks];
                acc[2 * r] = acc[2 * r] + a * y0, acc[2 * r + 1] = acc[2 * r + 1] + a * y1;
            }
        }
        stack_take(stack, &depth, acc, c, c == n_chunks - 1);
    }
#pragma GCC unroll 6
    for (int r = 0; r < rows; r++) {
        if (cols == NR) {
            v8_store(dw + r * out, &acc[2 * r]), v8_store(dw + r * out + 8, &acc[2 * r + 1]);
            continue;
        }
        float part[NR]; /* acc's address never taken: it stays in registers */
        v8_store(part, &acc[2 * r]), v8_store(part + 8, &acc[2 * r + 1]);
        memcpy(dw + r * out, part, (size_t)cols * sizeof(float));
    }
}

/* reduction fixed over batch rows [0, B) for rows [i0, i1) of dw (row stride out), tile by
 * tile (wgrad_tile: the chunk partials in registers, their tree as a stack, the tile
 * written once). Row i of dw takes batch row b's factor from a[i * a_rs + b * a_ks] (x in
 * place: a_rs 1, a_ks in; or x transposed). x in place is copied first into ap tile by
 * tile (MR rows of dw, batch row by batch row: one contiguous run per tile that every strip
 * of dy reads again, where x in place is MR floats from each of B rows `in` apart -- about
 * a fifth faster at the GPT's shapes); x transposed is read where it is (its rows are runs
 * already; a copy, an element at a time, cost as much as the product at LeNet's second
 * convolution). bp holds B x NR floats: dy's strip, packed; ap ceil((i1 - i0) / MR) * MR *
 * B where x is in place. The bits of wgrad_fixed_rows (tests/test_ops.c): the same products
 * and sums. */
DT_VECTOR_FN(wgrad_tiles_v8,
             (float *restrict dw, const float *restrict a, int64_t a_rs, int64_t a_ks,
              const float *restrict dy, int64_t B, int64_t out, int64_t i0, int64_t i1,
              float *restrict bp, float *restrict ap),
             (dw, a, a_rs, a_ks, dy, B, out, i0, i1, bp, ap))
{
    const bool packed = a_rs == 1;                    /* x transposed: its rows are read in place */
    for (int64_t i = i0; packed && i < i1; i += MR) { /* tile (i - i0) / MR: ap[b * MR + r] */
        const int rows = i1 - i < MR ? (int)(i1 - i) : MR;
        float *restrict t = ap + (i - i0) * B;
        if (rows == MR) /* MR floats of each row */
            for (int64_t b = 0; b < B; b++) memcpy(t + b * MR, a + i + b * a_ks, MR * sizeof *t);
        else
            for (int64_t b = 0; b < B; b++)
                for (int r = 0; r < rows; r++) t[b * MR + r] = a[i + r + b * a_ks];
    }
    for (int64_t j = 0; j < out; j += NR) {
        const int64_t cols = out - j < NR ? out - j : NR;
        pack_strip(bp, dy + j, out, B, cols);
        for (int64_t i = i0; i < i1; i += MR) {
            const int rows = i1 - i < MR ? (int)(i1 - i) : MR;
            const float *restrict t = packed ? ap + (i - i0) * B : a + i * a_rs;
            const int64_t t_rs = packed ? 1 : a_rs, t_ks = packed ? MR : a_ks;
            float *restrict d = dw + (i - i0) * out + j;
#define TILE(r) wgrad_tile(r, d, out, cols, t, t_rs, t_ks, bp, B)
            BY_ROWS(rows, TILE)
#undef TILE
        }
    }
}

#ifdef DT_CPU_WIDE_KERNELS
/* The same products on a CPU with AVX-512: tiles of up to WR rows x one or two 16-float
 * vectors (two wherever the columns allow: 16 accumulators cover a fused multiply-add's
 * latency where 8 did not -- `fast`'s MLP step 0.88 -> 0.74 ms on a Zen 5,
 * results/cpu/portable-cost/wide-tiles-zen5/), k in order per element, mul and add two
 * roundings as everywhere. A 512-bit operation is
 * one instruction where AVX2 needs two, so a core that issues a multiply and an add per
 * cycle (Zen 4 splits each 512-bit operation over its 256-bit pipes) runs this at about
 * OpenBLAS's FMA speed, where the AVX2 tile is held back by the number of instructions.
 * Every element sees the same sequence of roundings as in matmul_ordered_v8 (the tests
 * check both against a scalar loop), so which path runs never shows in the bits. With
 * `fused` (math: fast only: matmul_fast_wide, wgrad_fast_wide, chunk_product) each multiply-add
 * is one rounding instead, the leftover columns too (fused_tail). */
typedef float v16f __attribute__((vector_size(64)));
#define WR 8  /* wide tile rows */
#define WN 16 /* wide tile columns: one vector */

/* A tile's 16 accumulators (the unused ones too: GCC cannot see nv bound their use), row r's
 * vector v at c[r * cs + v]: cs 2 for the WR x 2 tiles, SQ_V for the square ones. */
#define TILE_ACC 16

/* k in [k0, k1) into the tile's accumulators c, in order per element. */
DT_WIDE static inline __attribute__((always_inline)) void
wide_products(int rows, int nv, int cs, v16f *restrict c, const float *restrict A, int64_t lda,
              int64_t aks, const float *restrict Bm, int64_t ldb, int64_t k0, int64_t k1,
              bool fused)
{
    for (int64_t k = k0; k < k1; k++) {
        v16f b[4];
#pragma GCC unroll 4
        for (int v = 0; v < nv; v++) memcpy(&b[v], Bm + k * ldb + v * WN, sizeof b[v]);
#pragma GCC unroll 8
        for (int r = 0; r < rows; r++) {
            const float a = A[r * lda + k * aks];
#pragma GCC unroll 4
            for (int v = 0; v < nv; v++) {
                v16f *acc = &c[r * cs + v];
                if (fused) /* math: fast: one rounding per multiply-add */
                    *acc = (v16f)_mm512_fmadd_ps(_mm512_set1_ps(a), (__m512)b[v], (__m512)*acc);
                else *acc = *acc + a * b[v];
            }
        }
    }
}

DT_WIDE static inline __attribute__((always_inline)) void
wide_store(int rows, int nv, int cs, float *restrict C, int64_t ldc, v16f *restrict c)
{
#pragma GCC unroll 8
    for (int r = 0; r < rows; r++)
#pragma GCC unroll 4
        for (int v = 0; v < nv; v++) memcpy(C + r * ldc + v * WN, &c[r * cs + v], sizeof(v16f));
}

/* One tile of rows x nv vectors (row stride cs in c) from C's values (accumulate) or +0. */
DT_WIDE static inline __attribute__((always_inline)) void
wide_tile(int rows, int nv, int cs, float *restrict C, int64_t ldc, const float *restrict A,
          int64_t lda, int64_t aks, const float *restrict Bm, int64_t ldb, int64_t K,
          bool accumulate, bool fused)
{
    v16f c[TILE_ACC] = {{0}};
#pragma GCC unroll 8
    for (int r = 0; r < rows; r++)
#pragma GCC unroll 4
        for (int v = 0; v < nv; v++)
            if (accumulate) memcpy(&c[r * cs + v], C + r * ldc + v * WN, sizeof(v16f));
    wide_products(rows, nv, cs, c, A, lda, aks, Bm, ldb, 0, K, fused);
    wide_store(rows, nv, cs, C, ldc, c);
}

/* Short products (K <= DT_REDUCE_CHUNK: a shard's or a chunk's rows), ordered: square
 * tiles of SQ_R rows x SQ_V vectors, the same 16 accumulators with 8 operand loads a k
 * instead of 10. Each tile runs only K steps between its zeros and its stores, and there the
 * loads told: the MLP's portable weight gradient at batch 64 (4 shards of 16 rows) about 4.5%
 * faster than with WR x 2 tiles (results/cpu/portable-cost/square-tiles-zen5/), where fast's
 * 64-row fused product ran 16% slower with them, and portable's long forward ones slower
 * too (the WR x 2 tiles stay there). Every element's operations as wide_tile's: the same
 * bits. */
#define SQ_R 4
#define SQ_V 4

DT_CHUNK_STACK_TAKE(wide_stack_take, v16f, TILE_ACC, DT_WIDE)

/* An ordered reduction over K as its canonical chunks (determinism/reduce.h), one tile:
 * each chunk's partial from +0 in the accumulators, the chunks' tree as a stack
 * (chunk_stack.h, over all TILE_ACC accumulators: the unused ones stay +0), the sum stored
 * once -- the bits of chunk_product per chunk and then reduce_tree, without the partials'
 * trip through memory (the MLP's portable weight gradient at batch 256: see
 * wgrad_fixed_rows). */
DT_WIDE static inline __attribute__((always_inline)) void
wide_chunk_tile(int rows, int nv, float *restrict C, int64_t ldc, const float *restrict A,
                int64_t lda, int64_t aks, const float *restrict Bm, int64_t ldb, int64_t K,
                bool fused)
{
    v16f stack[DT_REDUCE_STACK_MAX][TILE_ACC];
    v16f c[TILE_ACC] = {{0}};
    const int64_t n_chunks = dt_reduce_chunks(K);
    int depth = 0;
    for (int64_t ch = 0; ch < n_chunks; ch++) {
        const int64_t k0 = ch * DT_REDUCE_CHUNK;
        wide_products(rows, nv, 2, c, A, lda, aks, Bm, ldb, k0,
                      K - k0 < DT_REDUCE_CHUNK ? K : k0 + DT_REDUCE_CHUNK, fused);
        wide_stack_take(stack, &depth, c, ch, ch == n_chunks - 1);
    }
    wide_store(rows, nv, 2, C, ldc, c);
}

/* wide_tile's fused products for the last `cols` (< WN) columns, by masked vectors: rows
 * [i0, i1), FT_ROWS at a time, each multiply-add one rounding, k in order. 8 rows: 8
 * multiply-add chains in flight, where 4 had left LeNet's dense forward under `fast` 1.2-1.4x
 * `portable`'s (results/cpu/portable-cost/square-tiles-zen5/fused-tail-rows.txt). */
#define FT_ROWS 8
DT_WIDE static void fused_tail(float *restrict C, int64_t ldc, const float *restrict A, int64_t lda,
                               int64_t aks, const float *restrict Bm, int64_t ldb, int64_t K,
                               int64_t cols, int64_t i0, int64_t i1, bool accumulate)
{
    const __mmask16 m = (__mmask16)((1u << cols) - 1u);
    for (int64_t i = i0; i < i1; i += FT_ROWS) {
        const int rows = i1 - i < FT_ROWS ? (int)(i1 - i) : FT_ROWS;
        __m512 c[FT_ROWS];
        for (int r = 0; r < FT_ROWS; r++)
            c[r] = accumulate && r < rows ? _mm512_maskz_loadu_ps(m, C + (i + r) * ldc)
                                          : _mm512_setzero_ps();
        for (int64_t k = 0; k < K; k++) {
            const __m512 b = _mm512_maskz_loadu_ps(m, Bm + k * ldb);
            for (int r = 0; r < rows; r++)
                c[r] = _mm512_fmadd_ps(_mm512_set1_ps(A[(i + r) * lda + k * aks]), b, c[r]);
        }
        for (int r = 0; r < rows; r++) _mm512_mask_storeu_ps(C + (i + r) * ldc, m, c[r]);
    }
}

/* C rows [i0, i1) = (or +=, `accumulate`) A . Bm, tile by tile; `chunked`: each tile the
 * canonical chunks' tree over K (wide_chunk_tile; N whole vectors, no accumulate). */
DT_WIDE static inline __attribute__((always_inline)) void
matmul_wide(float *restrict C, int64_t ldc, const float *restrict A, int64_t lda, int64_t aks,
            const float *restrict Bm, int64_t ldb, int64_t K, int64_t N, int64_t i0, int64_t i1,
            bool accumulate, bool fused, bool chunked)
{
    const int64_t n_tiled = N / WN * WN;
    const bool square = !chunked && !fused && K <= DT_REDUCE_CHUNK; /* short and ordered */
    for (int64_t j = 0; j < n_tiled;) { /* the strip of Bm stays in cache */
        /* two vectors of columns where there are: 16 accumulators, enough independent
         * multiply-add chains to cover a fused operation's latency (8 were not, on a Zen 5);
         * or a square tile's four; each element's operations the same either way */
        const bool sq = square && j + SQ_V * WN <= n_tiled;
        const int nv = j + 2 * WN <= n_tiled ? 2 : 1;
        /* r rows, NV vectors, CS accumulators a row (a constant: c stays in registers) */
#define TILE(r, NV, CS)                                                                            \
    do {                                                                                           \
        if (chunked && (CS) == 2)                                                                  \
            wide_chunk_tile(r, NV, C + i * ldc + j, ldc, A + i * lda, lda, aks, Bm + j, ldb, K,    \
                            fused);                                                                \
        else                                                                                       \
            wide_tile(r, NV, CS, C + i * ldc + j, ldc, A + i * lda, lda, aks, Bm + j, ldb, K,      \
                      accumulate, fused);                                                          \
        i += r;                                                                                    \
    } while (0)
        int64_t i = i0;
        if (sq) {
            while (i + SQ_R <= i1) TILE(SQ_R, SQ_V, SQ_V);
            if (i + 2 <= i1) TILE(2, SQ_V, SQ_V);
            if (i < i1) TILE(1, SQ_V, SQ_V);
        } else {
            while (i + WR <= i1) TILE(WR, nv, 2);
            if (i + 4 <= i1) TILE(4, nv, 2);
            if (i + 2 <= i1) TILE(2, nv, 2);
            if (i < i1) TILE(1, nv, 2);
        }
#undef TILE
        j += (sq ? SQ_V : nv) * WN;
    }
    if (n_tiled < N && fused) /* leftover columns (fewer than one vector), fused too */
        fused_tail(C + n_tiled, ldc, A, lda, aks, Bm + n_tiled, ldb, K, N - n_tiled, i0, i1,
                   accumulate);
    else if (n_tiled < N)
        matmul_ordered_v8(C + n_tiled, ldc, A, lda, aks, Bm + n_tiled, ldb, K, N - n_tiled, i0, i1,
                          accumulate);
}

DT_WIDE static void matmul_ordered_wide(float *restrict C, int64_t ldc, const float *restrict A,
                                        int64_t lda, int64_t aks, const float *restrict Bm,
                                        int64_t ldb, int64_t K, int64_t N, int64_t i0, int64_t i1,
                                        bool accumulate)
{
    matmul_wide(C, ldc, A, lda, aks, Bm, ldb, K, N, i0, i1, accumulate, false, false);
}

/* The canonical chunks' tree per tile (wide_chunk_tile) over C's first N columns (whole
 * vectors), rows [i0, i1): the ordered sums, or the fused ones (wgrad_fuses). */
DT_WIDE static void chunks_ordered_wide(float *restrict C, int64_t ldc, const float *restrict A,
                                        int64_t lda, int64_t aks, const float *restrict Bm,
                                        int64_t ldb, int64_t K, int64_t N, int64_t i0, int64_t i1)
{
    matmul_wide(C, ldc, A, lda, aks, Bm, ldb, K, N, i0, i1, false, false, true);
}

DT_WIDE static void chunks_fused_wide(float *restrict C, int64_t ldc, const float *restrict A,
                                      int64_t lda, int64_t aks, const float *restrict Bm,
                                      int64_t ldb, int64_t K, int64_t N, int64_t i0, int64_t i1)
{
    matmul_wide(C, ldc, A, lda, aks, Bm, ldb, K, N, i0, i1, false, true, true);
}

/* math: fast, the weight gradient: dw rows [i0, i1) = x^T . dy over all B batch rows in
 * one pass of fused tiles, x read in place (row i of dw takes x[b * in + i]): no chunks, no
 * tree, as no order is asked for. */
DT_WIDE static void wgrad_fast_wide(float *restrict dw, const float *restrict x,
                                    const float *restrict dy, int64_t B, int64_t in, int64_t out,
                                    int64_t i0, int64_t i1)
{
    matmul_wide(dw + i0 * out, out, x + i0, 1, in, dy, out, B, out, 0, i1 - i0, false, true, false);
}

/* math: fast on a CPU with AVX-512: the same tiles with each multiply-add fused (one
 * rounding, k still in order). Faster than OpenBLAS's per-slice sgemm at the shapes detrain
 * trains (measured on this 2-core Zen 4: docs/performance.md); its bits are not
 * portable's (contraction), but deterministic for any thread count. C (M,N) = A (M,K) .
 * Bm (K,N), rows [i0, i1). */
DT_WIDE static void matmul_fast_wide(float *restrict C, const float *restrict A,
                                     const float *restrict Bm, int64_t K, int64_t N, int64_t i0,
                                     int64_t i1)
{
    matmul_wide(C, N, A, K, 1, Bm, N, K, N, i0, i1, false, true, false);
}

#endif

/* C[i, j] (+)= sum_{k ascending} A[i,k] * Bm[k, j] for rows [i0, i1), A[i,k] at
 * A[i * lda + k * aks]: the widest path this CPU has, same bits on all of them. */
static void matmul_rows_ordered_ld(float *restrict C, int64_t ldc, const float *restrict A,
                                   int64_t lda, int64_t aks, const float *restrict Bm, int64_t ldb,
                                   int64_t K, int64_t N, int64_t i0, int64_t i1, bool accumulate)
{
#ifdef DT_CPU_WIDE_KERNELS
    if (dt_cpu_wide()) {
        matmul_ordered_wide(C, ldc, A, lda, aks, Bm, ldb, K, N, i0, i1, accumulate);
        return;
    }
#endif
    matmul_ordered_v8(C, ldc, A, lda, aks, Bm, ldb, K, N, i0, i1, accumulate);
}

#ifdef DT_CPU_WIDE_KERNELS
DT_WIDE static void matmul_fused_wide(float *restrict C, int64_t ldc, const float *restrict A,
                                      int64_t lda, int64_t aks, const float *restrict Bm,
                                      int64_t ldb, int64_t K, int64_t N, int64_t i0, int64_t i1)
{
    matmul_wide(C, ldc, A, lda, aks, Bm, ldb, K, N, i0, i1, false, true, false);
}
#endif

/* An ordered reduction's chunk product from +0: k in order per element, each multiply-add
 * one rounding where `fused` (wgrad_fuses) and two otherwise. */
static void chunk_product(float *restrict C, int64_t ldc, const float *restrict A, int64_t lda,
                          int64_t aks, const float *restrict Bm, int64_t ldb, int64_t K, int64_t N,
                          int64_t i0, int64_t i1, bool fused)
{
#ifdef DT_CPU_WIDE_KERNELS
    if (fused) {
        matmul_fused_wide(C, ldc, A, lda, aks, Bm, ldb, K, N, i0, i1);
        return;
    }
#endif
    matmul_rows_ordered_ld(C, ldc, A, lda, aks, Bm, ldb, K, N, i0, i1, false);
}

#ifdef DT_CPU_WIDE_KERNELS
/* dt_reduce_tree_vectors(p, m, len, len) written out with 16-lane adds: the same pairing
 * (level by level, the odd last partial carried), elementwise, so the same bits
 * (ops.dense_paths_same_bits). GCC -O2 does not vectorise the shared form (its source and
 * destination may alias); written out, it saves about a quarter of the fixed weight
 * gradient's time. */
DT_WIDE static void reduce_tree_wide(float *p, int64_t m, int64_t len)
{
    const int64_t lv = len / WN * WN;
    while (m > 1) {
        const int64_t half = m / 2;
        for (int64_t j = 0; j < half; j++) {
            float *dst = p + j * len;
            const float *a = p + 2 * j * len, *b = p + (2 * j + 1) * len;
            int64_t i = 0;
            for (; i < lv; i += WN) {
                v16f va, vb;
                memcpy(&va, a + i, sizeof va), memcpy(&vb, b + i, sizeof vb);
                va = va + vb;
                memcpy(dst + i, &va, sizeof va);
            }
            for (; i < len; i++) dst[i] = a[i] + b[i];
        }
        if (m & 1) memmove(p + half * len, p + (m - 1) * len, (size_t)len * sizeof(float));
        m = half + (m & 1);
    }
}
#endif

/* The fixed tree over m partials of len floats stored back to back. */
static void reduce_tree(float *p, int64_t m, int64_t len)
{
#ifdef DT_CPU_WIDE_KERNELS
    if (dt_cpu_wide()) {
        reduce_tree_wide(p, m, len);
        return;
    }
#endif
    dt_reduce_tree_vectors(p, m, len, len);
}

void dt_cpu_matmul_ordered(float *C, int64_t ldc, const float *A, int64_t lda, int64_t aks,
                           const float *Bm, int64_t ldb, int64_t K, int64_t N, int64_t i0,
                           int64_t i1, bool accumulate)
{
    matmul_rows_ordered_ld(C, ldc, A, lda, aks, Bm, ldb, K, N, i0, i1, accumulate);
}

/* The same with C and Bm of row stride N. */
static void matmul_rows_ordered(float *restrict C, const float *restrict A, int64_t lda,
                                const float *restrict Bm, int64_t K, int64_t N, int64_t i0,
                                int64_t i1, bool accumulate)
{
    matmul_rows_ordered_ld(C, N, A, lda, 1, Bm, N, K, N, i0, i1, accumulate);
}

struct matmul_job {
    float *C;
    const float *A, *Bm;
    int64_t lda, K, N;
};

static void matmul_part(void *ctx, int64_t begin, int64_t end, int worker)
{
    const struct matmul_job *j = ctx;
    matmul_rows_ordered(j->C, j->A, j->lda, j->Bm, j->K, j->N, begin, end, false);
}

#ifdef DT_CPU_WIDE_KERNELS
static void matmul_fast_part(void *ctx, int64_t begin, int64_t end, int worker)
{
    const struct matmul_job *j = ctx;
    matmul_fast_wide(j->C, j->A, j->Bm, j->K, j->N, begin, end);
}
#endif

/* math: fast's product C (M,N) = A (M,K) . Bm (K,N): the fused wide tiles where the CPU has
 * AVX-512 (the faster here), else OpenBLAS (blas_parallel). Returns false when it did not
 * run (no wide kernels): the caller takes BLAS. */
static bool matmul_fast(struct dt_backend *be, float *C, const float *A, const float *Bm, int64_t M,
                        int64_t K, int64_t N)
{
#ifdef DT_CPU_WIDE_KERNELS
    if (dt_cpu_wide()) {
        struct matmul_job job = {.C = C, .A = A, .Bm = Bm, .lda = K, .K = K, .N = N};
        dt_pool_run(dt_cpu(be)->pool, M, ROW_BLOCK, matmul_fast_part, &job);
        return true;
    }
#endif
    return false;
}

/* C = A . Bm with rows of C split across the pool; see matmul_rows_ordered. */
static void matmul_parallel(struct dt_backend *be, float *C, const float *A, const float *Bm,
                            int64_t M, int64_t K, int64_t N)
{
    struct matmul_job job = {.C = C, .A = A, .Bm = Bm, .lda = K, .K = K, .N = N};
    dt_pool_run(dt_cpu(be)->pool, M, ROW_BLOCK, matmul_part, &job);
}

struct transpose_job {
    float *dst;
    const float *src;
    int64_t rows, cols; /* of src */
};

#define SHUF(a, b, ...) __builtin_shufflevector(a, b, __VA_ARGS__) /* GCC 12+, Clang */

/* dst[c * ldd + r] = src[r * lds + c] for r, c < 8: eight rows loaded, paired within
 * 128-bit halves twice, then the halves exchanged (the unpack / shuffle / permute
 * transpose), eight columns stored. Moves only: the same floats. */
static inline __attribute__((always_inline)) void transpose8(float *restrict dst, int64_t ldd,
                                                             const float *restrict src, int64_t lds)
{
    v8f r[8], t[8], u[8];
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++) v8_load(&r[i], src + i * lds);
#pragma GCC unroll 4
    for (int i = 0; i < 8; i += 2) { /* rows i, i + 1 interleaved: elements 0 1 4 5, 2 3 6 7 */
        t[i] = SHUF(r[i], r[i + 1], 0, 8, 1, 9, 4, 12, 5, 13);
        t[i + 1] = SHUF(r[i], r[i + 1], 2, 10, 3, 11, 6, 14, 7, 15);
    }
#pragma GCC unroll 2
    for (int h = 0; h < 8; h += 4) /* rows h .. h + 3 of columns 0 4, 1 5, 2 6, 3 7 */
#pragma GCC unroll 2
        for (int i = 0; i < 2; i++) {
            u[h + 2 * i] = SHUF(t[h + i], t[h + i + 2], 0, 1, 8, 9, 4, 5, 12, 13);
            u[h + 2 * i + 1] = SHUF(t[h + i], t[h + i + 2], 2, 3, 10, 11, 6, 7, 14, 15);
        }
#pragma GCC unroll 4
    for (int c = 0; c < 4; c++) { /* columns c, c + 4: rows 0-3 from u[c], 4-7 from u[c + 4] */
        const v8f lo = SHUF(u[c], u[c + 4], 0, 1, 2, 3, 8, 9, 10, 11);
        const v8f hi = SHUF(u[c], u[c + 4], 4, 5, 6, 7, 12, 13, 14, 15);
        v8_store(dst + c * ldd, &lo), v8_store(dst + (c + 4) * ldd, &hi);
    }
}
#undef SHUF

/* dst (cols,rows) = src (rows,cols)^T for src rows [begin, end): exact copies, 8 x 8 blocks,
 * the edges one by one. */
DT_VECTOR_PART(transpose_part)
{
    const struct transpose_job *t = ctx;
    const int64_t rows = t->rows, cols = t->cols;
    int64_t r = begin;
    for (; r + 8 <= end; r += 8) {
        int64_t c = 0;
        for (; c + 8 <= cols; c += 8)
            transpose8(t->dst + c * rows + r, rows, t->src + r * cols + c, cols);
        for (; c < cols; c++)
            for (int64_t i = r; i < r + 8; i++) t->dst[c * rows + i] = t->src[i * cols + c];
    }
    for (; r < end; r++)
        for (int64_t c = 0; c < cols; c++) t->dst[c * rows + r] = t->src[r * cols + c];
}

static void transpose_parallel(struct dt_backend *be, float *dst, const float *src, int64_t rows,
                               int64_t cols)
{
    struct transpose_job job = {.dst = dst, .src = src, .rows = rows, .cols = cols};
    dt_pool_run(dt_cpu(be)->pool, rows, 16, transpose_part, &job);
}

struct bias_add_job {
    float *y;
    const float *bias;
    int64_t out;
};

DT_VECTOR_PART(bias_add_part)
{
    const struct bias_add_job *j = ctx;
    for (int64_t b = begin; b < end; b++) {
        float *restrict y = j->y + b * j->out;
        const float *restrict bias = j->bias;
        for (int64_t o = 0; o < j->out; o++) y[o] += bias[o];
    }
}

/* ---- forward and backward-data: sums over features, never over the batch ------------ */

/* math fast: OpenBLAS sgemm, one call per worker on its slice of rows, OpenBLAS itself
 * single-threaded (set at backend init). OpenBLAS's own threads spin for a long time
 * after each call and would steal the cores from the rest of the step. */
struct blas_job {
    float *C;
    const float *A, *Bm;
    int64_t K, N;
    bool trans_b; /* Bm is (N,K) and used transposed */
};

static void blas_part(void *ctx, int64_t begin, int64_t end, int worker)
{
    const struct blas_job *j = ctx;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, j->trans_b ? CblasTrans : CblasNoTrans,
                (int)(end - begin), (int)j->N, (int)j->K, 1.0f, j->A + begin * j->K, (int)j->K,
                j->Bm, j->trans_b ? (int)j->K : (int)j->N, 0.0f, j->C + begin * j->N, (int)j->N);
}

static void blas_parallel(struct dt_backend *be, float *C, const float *A, const float *Bm,
                          int64_t M, int64_t K, int64_t N, bool trans_b)
{
    struct blas_job job = {.C = C, .A = A, .Bm = Bm, .K = K, .N = N, .trans_b = trans_b};
    dt_pool_run(dt_cpu(be)->pool, M, 16, blas_part, &job);
}

/* math fast: OpenBLAS sgemm (its own blocking and kernels, FMA where the CPU has it; bits
 * may depend on the CPU and the row split). Otherwise portable: y[b,o] = (sum_{k ascending} x[b,k]
 * w[k,o]) + bias[o], each output computed by one thread in a fixed order. */
enum dt_status dt_cpu_dense_forward(struct dt_backend *be, float *y, const float *x, const float *w,
                                    const float *bias, int64_t B, int64_t in, int64_t out,
                                    const struct dt_policy *pol)
{
    if (dt_math_exact(pol))
        return dt_cpu_matmul_exact(be, y, x, w, bias, B, in, out, 0, DT_XP_LEVELS_FORWARD, pol);
    if (dt_math_fast(pol)) {
        if (!matmul_fast(be, y, x, w, B, in, out)) blas_parallel(be, y, x, w, B, in, out, false);
    } else {
        matmul_parallel(be, y, x, w, B, in, out);
    }
    struct bias_add_job job = {.y = y, .bias = bias, .out = out};
    dt_pool_run(dt_cpu(be)->pool, B, 8, bias_add_part, &job);
    return DT_OK;
}

/* math fast: OpenBLAS sgemm with w transposed. Otherwise portable: dx[b,k] =
 * sum_{o ascending} dy[b,o] w[k,o], through an exact transpose of w. */
enum dt_status dt_cpu_dense_backward_data(struct dt_backend *be, float *dx, const float *dy,
                                          const float *w, int64_t B, int64_t in, int64_t out,
                                          const struct dt_policy *pol)
{
    if (dt_math_exact(pol)) /* w (in, out) is B^T stored (N, K) */
        return dt_cpu_matmul_exact(be, dx, dy, w, NULL, B, out, in, DT_XP_TB, DT_XP_LEVELS_FORWARD,
                                   pol);
    if (dt_math_fast(pol) && !dt_cpu_wide()) {
        blas_parallel(be, dx, dy, w, B, out, in, true);
        return DT_OK;
    }
    float *wt = dt_cpu_scratch(be, (size_t)(in * out));
    transpose_parallel(be, wt, w, in, out); /* wt is (out,in) */
    if (!dt_math_fast(pol) || !matmul_fast(be, dx, dy, wt, B, out, in))
        matmul_parallel(be, dx, dy, wt, B, out, in);
    return DT_OK;
}

/* ---- backward-weight: the sum over the batch (reduction control) --------------------- */

/* math fast, reduction unordered, no forced order: the fastest path a user can choose,
 * dw (in,out) = x^T (in,B) . dy (B,out) as OpenBLAS sgemm, one call per worker on its
 * slice of dw's rows, each summing over the whole batch: no partials to combine. The split
 * is static, so this op happens to be deterministic for a given thread count (docs/controls.md:
 * what `fast` leaves nondeterministic on the CPU). a is x (B,in) or, with a_is_xt, xt
 * (in,B). */
struct wgrad_blas_job {
    float *dw;
    const float *a, *dy;
    int64_t B, in, out;
    bool a_is_xt;
};

static void wgrad_blas_part(void *ctx, int64_t begin, int64_t end, int worker)
{
    const struct wgrad_blas_job *j = ctx;
    if (j->a_is_xt)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)(end - begin), (int)j->out,
                    (int)j->B, 1.0f, j->a + begin * j->B, (int)j->B, j->dy, (int)j->out, 0.0f,
                    j->dw + begin * j->out, (int)j->out);
    else
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)(end - begin), (int)j->out,
                    (int)j->B, 1.0f, j->a + begin, (int)j->in, j->dy, (int)j->out, 0.0f,
                    j->dw + begin * j->out, (int)j->out);
}

/* One OpenBLAS product per worker's slice of the output: unordered (unless a test forces
 * the order) and pinned, whose bits it fixes for a thread count (policy.h). */
static bool wgrad_takes_blas(struct dt_backend *be, const struct dt_policy *pol)
{
    return dt_math_fast(pol) && dt_reduction_library(pol, dt_cpu(be)->forced_order);
}

/* An ordered reduction's chunk products under math: fast, on a CPU with AVX-512: the fused
 * tiles (one rounding per multiply-add, k in order), as cuBLAS's chunk products are on the
 * GPU: math fast allows contraction, and the order -- the chunks, the tree, the shards --
 * stays the reduction's. So `fast` + an ordered reduction measures the order alone, not
 * also portable's separate roundings. Dense layers only (a convolution's weight gradient
 * keeps its tiles' two roundings, conv.c); without AVX-512 the two-rounding tiles. */
static bool wgrad_fuses(const struct dt_policy *pol) { return dt_math_fast(pol) && dt_cpu_wide(); }

static enum dt_status wgrad_blas(struct dt_backend *be, float *dw, const float *a, bool a_is_xt,
                                 const float *dy, int64_t B, int64_t in, int64_t out)
{
    struct wgrad_blas_job job = {
        .dw = dw, .a = a, .dy = dy, .B = B, .in = in, .out = out, .a_is_xt = a_is_xt};
    dt_pool_run(dt_cpu(be)->pool, in, 16, wgrad_blas_part, &job);
    return DT_OK;
}

struct wgrad_job {
    struct dt_backend *be;
    float *dw;
    const float *xt, *dy; /* xt is (in,B): x transposed; the fixed form may take x itself */
    int64_t B, in, out;
    int64_t a_rs, a_ks; /* the fixed form's strides of (row of dw, batch row) in xt */
    int64_t n_chunks;   /* forced order: the unordered chunks */
    bool fused;         /* the fixed form's chunk products: wgrad_fuses */
};

/* reduction fixed, rows [begin, end) of dw over batch rows [0, B), row begin at dw (row i at
 * dw + (i - begin) * out): without the wide
 * kernels, wgrad_tiles_v8 (the tree kept as a stack per register tile); with them, per
 * block of ROW_BLOCK rows, one partial per canonical chunk of those rows, then the fixed
 * tree. Row i of dw takes batch row b's factor from a[i * a_rs + b * a_ks]: x transposed
 * (a_rs >= B, a_ks 1; a shard's columns of the whole batch's transpose) or x itself (a_rs
 * 1, a_ks in). Same bits for any split of the rows and either layout. */
static void wgrad_fixed_rows(struct dt_backend *be, int worker, float *dw, const float *a,
                             int64_t a_rs, int64_t a_ks, const float *dy, int64_t B, int64_t out,
                             int64_t begin, int64_t end, bool fused)
{
    if (!dt_cpu_wide()) { /* the tiles with the tree as a stack, dy's strips and x packed */
        const int64_t rows = a_rs == 1 ? (end - begin + MR - 1) / MR * MR : 0; /* x packed */
        float *bp = dt_cpu_worker_buffer(be, worker, (size_t)(B > 0 ? B * (NR + rows) : 1));
        wgrad_tiles_v8(dw, a, a_rs, a_ks, dy, B, out, begin, end, bp, bp + B * NR);
        return;
    }
    /* the columns in whole vectors: per tile, the chunk partials and their tree in
     * registers and a stack (wide_chunk_tile), the sum stored once -- the MLP's portable
     * weight gradient at batch 256 (two chunks a shard) 0.49 -> 0.40 ms on a Zen 5,
     * results/cpu/portable-cost/chunk-stack-zen5/ */
    int64_t j_first = 0;
#ifdef DT_CPU_WIDE_KERNELS
    j_first = out / WN * WN;
    if (j_first > 0)
        (fused ? chunks_fused_wide : chunks_ordered_wide)(dw, out, a + begin * a_rs, a_rs, a_ks, dy,
                                                          out, B, j_first, 0, end - begin);
#endif
    if (j_first == out) return;
    /* the columns left (fewer than a vector), per block of ROW_BLOCK rows: the block's chunk
     * partials stay in L1 from their products through the tree (each element's sums and
     * tree as over the whole row: the column split moves no bits) */
    const int64_t n_chunks = dt_reduce_chunks(B);
    const int64_t cols_max = out - j_first < WGRAD_COLS ? out - j_first : WGRAD_COLS;
    float *buf = dt_cpu_worker_buffer(be, worker, (size_t)(n_chunks * ROW_BLOCK * cols_max));
    for (int64_t i0 = begin; i0 < end; i0 += ROW_BLOCK) {
        const int64_t rows = end - i0 < ROW_BLOCK ? end - i0 : ROW_BLOCK;
        for (int64_t j0 = j_first; j0 < out; j0 += WGRAD_COLS) {
            const int64_t cols = out - j0 < WGRAD_COLS ? out - j0 : WGRAD_COLS;
            const int64_t block = rows * cols;
            for (int64_t c = 0; c < n_chunks; c++) {
                const int64_t b0 = c * DT_REDUCE_CHUNK;
                const int64_t len = B - b0 < DT_REDUCE_CHUNK ? B - b0 : DT_REDUCE_CHUNK;
                chunk_product(buf + c * block, cols, a + i0 * a_rs + b0 * a_ks, a_rs, a_ks,
                              dy + b0 * out + j0, out, len, cols, 0, rows, fused);
            }
            reduce_tree(buf, n_chunks, block);
            for (int64_t r = 0; r < rows; r++)
                memcpy(dw + (i0 - begin + r) * out + j0, buf + r * cols,
                       (size_t)cols * sizeof(float));
        }
    }
}

#ifdef DT_CPU_WIDE_KERNELS
static void wgrad_fast_part(void *ctx, int64_t begin, int64_t end, int worker)
{
    const struct wgrad_job *j = ctx;
    wgrad_fast_wide(j->dw, j->xt, j->dy, j->B, j->in, j->out, begin, end);
}
#endif

static void wgrad_fixed_part(void *ctx, int64_t begin, int64_t end, int worker)
{
    struct wgrad_job *j = ctx;
    wgrad_fixed_rows(j->be, worker, j->dw + begin * j->out, j->xt, j->a_rs, j->a_ks, j->dy, j->B,
                     j->out, begin, end, j->fused);
}

/* reduction exact with shards set: shard k's partial at dw + k * in * out, each the fixed
 * reduction over the shard's rows alone (the bits of the plain op on those rows), from one
 * transpose of the whole batch and one pool run over (shard, row of dw) items. */
struct wgrad_shards_job {
    struct dt_backend *be;
    float *dw;
    const float *a, *dy; /* a: x or its transpose, as wgrad_fixed_rows takes it */
    int64_t a_rs, a_ks;
    int64_t B, in, out;
    const struct dt_shards *sh;
    bool fused;
};

static void wgrad_shards_part(void *ctx, int64_t begin, int64_t end, int worker)
{
    const struct wgrad_shards_job *j = ctx;
    for (int64_t t = begin; t < end;) {
        const int64_t k = t / j->in, i0 = t % j->in;
        const int64_t i1 = end - t < j->in - i0 ? i0 + (end - t) : j->in;
        const int64_t r0 = j->sh->row[k], rows = j->sh->row[k + 1] - r0;
        wgrad_fixed_rows(j->be, worker, j->dw + (k * j->in + i0) * j->out, j->a + r0 * j->a_ks,
                         j->a_rs, j->a_ks, j->dy + r0 * j->out, rows, j->out, i0, i1, j->fused);
        t += i1 - i0;
    }
}

/* Add a chunk's partial into the result (the forced order's drawn sequence). */
DT_VECTOR_FN(add_into, (float *restrict dst, const float *restrict src, int64_t n), (dst, src, n))
{
    for (int64_t i = 0; i < n; i++) dst[i] += src[i];
}

/* Forced order (test hook): the unordered chunks' partials added serially in a
 * permutation drawn from the hook's seed. */
static void wgrad_forced(struct wgrad_job *j, uint64_t seed)
{
    int64_t *perm = dt_xmalloc((size_t)j->n_chunks * sizeof *perm);
    dt_forced_permutation(perm, j->n_chunks, seed, DT_FORCED_CHUNKS);
    const int64_t n = j->in * j->out;
    float *p = dt_cpu_worker_buffer(j->be, 0, (size_t)n);
    for (int64_t t = 0; t < j->n_chunks; t++) {
        int64_t b0 = perm[t] * DT_UNORDERED_CHUNK;
        int64_t len = j->B - b0 < DT_UNORDERED_CHUNK ? j->B - b0 : DT_UNORDERED_CHUNK;
        matmul_rows_ordered(p, j->xt + b0, j->B, j->dy + b0 * j->out, len, j->out, 0, j->in, false);
        add_into(j->dw, p, n);
    }
    free(perm);
}

/* ---- backward-weight with few outputs: the transposed formulation ------------------- *
 * With out < NR the (in x out) tiles above are mostly padding. Then each chunk's partial
 * is computed transposed, dwT (out x in) = dyT (out x B) . x (B x in): the same products
 * (IEEE multiplication commutes), summed over the same rows in the same order from +0,
 * combined by the same tree or the same arrival-order adds -- so the same bits for the
 * fixed reduction -- with the long `in` axis across the vector lanes. */

bool dt_cpu_wgrad_prefers_rows(int64_t B, int64_t in, int64_t out)
{
    return out < NR && in >= NR && dt_reduce_chunks(B) * in * out <= ROWS_PARTIALS_MAX;
}

struct wgrad_rows_job {
    struct dt_backend *be;
    float *partials;      /* fixed: n_chunks x (out x in); forced order: the (out x in) sum */
    const float *dyt, *x; /* dyt (out, B), x (B, in) */
    int64_t B, in, out, n_chunks, chunk;
};

static inline int64_t rows_chunk_len(const struct wgrad_rows_job *j, int64_t c)
{
    int64_t b0 = c * j->chunk;
    return j->B - b0 < j->chunk ? j->B - b0 : j->chunk;
}

/* fixed: canonical chunks [begin, end), one transposed partial each. */
static void wgrad_rows_fixed_part(void *ctx, int64_t begin, int64_t end, int worker)
{
    struct wgrad_rows_job *j = ctx;
    for (int64_t c = begin; c < end; c++) {
        int64_t b0 = c * j->chunk;
        matmul_rows_ordered(j->partials + c * j->out * j->in, j->dyt + b0, j->B, j->x + b0 * j->in,
                            rows_chunk_len(j, c), j->in, 0, j->out, false);
    }
}

/* fixed: elements [begin, end) of the partials, through the fixed tree. */
static void wgrad_rows_tree_part(void *ctx, int64_t begin, int64_t end, int worker)
{
    struct wgrad_rows_job *j = ctx;
    dt_reduce_tree_vectors(j->partials + begin, j->n_chunks, end - begin, j->out * j->in);
}

enum dt_status dt_cpu_wgrad_rows(struct dt_backend *be, float *dw, const float *x, const float *dy,
                                 int64_t B, int64_t in, int64_t out, const struct dt_policy *pol)
{
    if (wgrad_takes_blas(be, pol)) return wgrad_blas(be, dw, x, false, dy, B, in, out);
    struct dt_cpu_ctx *c = dt_cpu(be);
    float *dyt = dt_cpu_scratch(be, (size_t)(out * B));
    transpose_parallel(be, dyt, dy, B, out); /* dyt is (out,B) */
    struct wgrad_rows_job job = {.be = be, .dyt = dyt, .x = x, .B = B, .in = in, .out = out};
    if (dt_cpu_wgrad_in_order(be, pol)) {
        job.chunk = DT_REDUCE_CHUNK;
        job.n_chunks = dt_reduce_chunks(B);
        job.partials = dt_cpu_partials(be, (size_t)(job.n_chunks * out * in));
        dt_pool_run(c->pool, job.n_chunks, 1, wgrad_rows_fixed_part, &job);
        dt_pool_run(c->pool, out * in, 64, wgrad_rows_tree_part, &job);
    } else {
        job.chunk = DT_UNORDERED_CHUNK;
        job.n_chunks = (B + DT_UNORDERED_CHUNK - 1) / DT_UNORDERED_CHUNK;
        job.partials = dt_cpu_partials(be, (size_t)(out * in));
        memset(job.partials, 0, (size_t)(out * in) * sizeof(float));
        { /* forced (dt_cpu_wgrad_in_order): the unordered chunks added in a drawn order */
            int64_t *perm = dt_xmalloc((size_t)job.n_chunks * sizeof *perm);
            dt_forced_permutation(perm, job.n_chunks, c->forced_order, DT_FORCED_CHUNKS);
            float *p = dt_cpu_worker_buffer(be, 0, (size_t)(out * in));
            for (int64_t t = 0; t < job.n_chunks; t++) {
                int64_t b0 = perm[t] * job.chunk;
                matmul_rows_ordered(p, dyt + b0, B, x + b0 * in, rows_chunk_len(&job, perm[t]), in,
                                    0, out, false);
                add_into(job.partials, p, out * in);
            }
            free(perm);
        }
    }
    transpose_parallel(be, dw, job.partials, out, in); /* dwT (out,in) -> dw (in,out) */
    return DT_OK;
}

/* reduction exact with shards set, few outputs: shard k's partial, the fixed reduction of
 * the transposed form over the shard's rows (dy read in place: row o of dwT takes batch
 * row b's factor from dy[b * out + o]), per shard on one worker, then transposed into its
 * slot. Same bits as the plain op on the shard's rows (the rows form's are the transposed
 * form's). */
struct wgrad_rows_shards_job {
    struct dt_backend *be;
    float *dw;
    const float *x, *dy;
    int64_t in, out;
    const struct dt_shards *sh;
};

static void wgrad_rows_shards_part(void *ctx, int64_t begin, int64_t end, int worker)
{
    const struct wgrad_rows_shards_job *j = ctx;
    const int64_t n = j->out * j->in;
    for (int64_t k = begin; k < end; k++) {
        const int64_t r0 = j->sh->row[k], rows = j->sh->row[k + 1] - r0;
        const int64_t n_chunks = dt_reduce_chunks(rows);
        float *p = dt_cpu_worker_buffer(j->be, worker, (size_t)(n_chunks * n));
        for (int64_t c = 0; c < n_chunks; c++) {
            const int64_t b0 = r0 + c * DT_REDUCE_CHUNK;
            const int64_t len = rows - c * DT_REDUCE_CHUNK < DT_REDUCE_CHUNK
                                    ? rows - c * DT_REDUCE_CHUNK
                                    : DT_REDUCE_CHUNK;
            matmul_rows_ordered_ld(p + c * n, j->in, j->dy + b0 * j->out, 1, j->out,
                                   j->x + b0 * j->in, j->in, len, j->in, 0, j->out, false);
        }
        reduce_tree(p, n_chunks, n);
        float *dwk = j->dw + k * n;
        for (int64_t o = 0; o < j->out; o++)
            for (int64_t i = 0; i < j->in; i++) dwk[i * j->out + o] = p[o * j->in + i];
    }
}

enum dt_status dt_cpu_dense_backward_weight_shards(struct dt_backend *be, float *dw, const float *x,
                                                   const float *dy, int64_t B, int64_t in,
                                                   int64_t out, const struct dt_policy *pol)
{
    const struct dt_shards *sh = &be->shards;
    DT_ASSERT(sh->count > 0 && dt_reduction_ordered(pol));
    if (sh->row[sh->count] != B) return DT_ERR_UNSUPPORTED; /* several rows an example */
    if (dt_math_exact(pol)) return DT_ERR_UNSUPPORTED;      /* the exact product per shard */
    if (dt_cpu_wgrad_prefers_rows(B, in, out)) {
        struct wgrad_rows_shards_job job = {
            .be = be, .dw = dw, .x = x, .dy = dy, .in = in, .out = out, .sh = sh};
        dt_pool_run(dt_cpu(be)->pool, sh->count, 1, wgrad_rows_shards_part, &job);
        return DT_OK;
    }
    struct wgrad_shards_job job = {.be = be,
                                   .dw = dw,
                                   .a = x,
                                   .dy = dy,
                                   .a_rs = 1,
                                   .a_ks = in,
                                   .B = B,
                                   .in = in,
                                   .out = out,
                                   .sh = sh,
                                   .fused = wgrad_fuses(pol)};
    dt_pool_run(dt_cpu(be)->pool, sh->count * in, ROW_BLOCK, wgrad_shards_part, &job);
    return DT_OK;
}

/* ---- reduction exact on one rank: the shard partials summed where they are made ------- *
 * Per block of rows of dw (SUMMED_BLOCK_BYTES), every shard's partial of the block
 * (wgrad_fixed_rows on the shard's rows, as dt_cpu_dense_backward_weight_shards makes it: the same
 * bits) into the worker's part of the scratch, then their exact sum before the block leaves the
 * cache (dt_cpu_exact_spec_sums: the double sum where it is the exact sum's value at the shift the
 * tensor's maximum will give), so most partials never reach memory. Which groups that holds
 * for depends on that maximum; the op guesses its floor from `hint` (the tensor's maximum
 * the step before: gradients move slowly), SUMMED_MARGIN binades on the safe side. A group
 * too wide for a double, or with a term whose unit may lie below the guess, is risky: its
 * terms are kept (the worker's run, KEPT_FLOATS; past it their slots), and once the maximum
 * is known the integer path sums them.
 * Where the maximum rose past the guess, the rows holding a stood group below the true floor
 * are made again (the same bits) and summed by the integer path. Slots 1.. hold the risky
 * groups' terms past the kept run, the rest as it was (few outputs, more than DT_CPU_SPEC_TERMS_MAX
 * shards: the shard op's partials there, then their exact sum). */
#define SUMMED_MARGIN 2 /* binades the maximum may rise in a step before rows are made again */
/* A worker's first risky elements keep their terms in its own run of KEPT_FLOATS floats
 * rather than in the slots, term-major (element q's term k at k * kept_max + q), their places
 * in kept_at: pass 2 sums them all in one call of the integer path and copies the sums out by
 * kept_at, walking the rows only where one may be made again or a group went to its slots
 * (past the run: the whole group, risky[g] left nonzero). With AVX2 or AVX-512 a risky
 * group names its risky elements (1.3-1.8 of 16, measured), elsewhere all of them. The slots lie in
 * a pack of S x n floats pass 1 never touches otherwise (a group's S terms had been cache misses
 * twice), and a call a group had cost more than its sums: on the MLP at batch 64 pass 2 had taken
 * about 20 us a step for 330 groups (results/cpu/portable-cost/kept-terms-zen5/). Risky groups grow
 * with training (the softmax's gradients of confident examples fall below the fixed-point unit:
 * late-training-zen5.txt). */
#define KEPT_FLOATS (64 * 1024)
/* Pass 1's blocks: as many rows as keep the S partials of a block within SUMMED_BLOCK_BYTES
 * (in L2), from ROW_BLOCK to SUMMED_ROWS_MAX, a multiple of ROW_BLOCK: each block reads all
 * of dy once more, so 8-row blocks had read it 49 times a worker at the MLP's first layer
 * (weight gradient 0.307 -> 0.287 ms at 1 thread with 32 rows: kept-terms-zen5/). */
#define SUMMED_BLOCK_BYTES (128 * 1024)
/* The partials' block half a page away from dw's rows (both advance a row at a time in
 * step, so their distance in the page is fixed): where the two had lain within a cache line
 * of each other modulo 4 KB, the double test's stores into dw and its loads of the next
 * terms falsely depended on each other (4K aliasing) -- the MLP-64 first layer's weight
 * gradient 169 against 150 us at 1 thread with the scratch at one address or another
 * (results/cpu/portable-cost/spec-tree-zen5/). */
#define PAGE_FLOATS 1024 /* 4 KB */
static int64_t half_page_from(const float *base, const float *dw)
{
    const uintptr_t page = PAGE_FLOATS * sizeof(float);
    const uintptr_t want = ((uintptr_t)dw + page / 2) % page, have = (uintptr_t)base % page;
    return (int64_t)((want + page - have) % page / sizeof(float));
}
#define SUMMED_ROWS_MAX 32

struct wgrad_summed_job {
    struct dt_backend *be;
    float *dw, *tmp; /* tmp: per worker, S x block x out floats */
    uint16_t *risky; /* per row of dw, its groups' risky elements (dt_cpu_exact_spec_sums) */
    uint8_t *unit;   /* per row: its stood groups' unit bound (at most 255) */
    const float *x, *dy;
    int64_t in, out, n, groups, tmp_floats;
    int64_t block; /* pass 1's rows a block */
    const struct dt_shards *sh;
    int64_t mult; /* batch rows an example (the GPT's positions) */
    bool fused;   /* the shards' chunk products: wgrad_fuses */
    int guess, shift;
    uint8_t e_floor;
    float *kept;      /* per worker, KEPT_FLOATS: its first risky elements' terms, term-major */
    int64_t *kept_at; /* per worker, kept_max: each kept element's index in dw */
    int64_t kept_max; /* elements a worker keeps there (past them, groups go to their slots) */
    uint32_t worker_max[DT_CPU_MAX_THREADS];
    uint8_t worker_unit[DT_CPU_MAX_THREADS]; /* the least of the worker's rows' */
    bool worker_risky[DT_CPU_MAX_THREADS];
    int64_t worker_kept[DT_CPU_MAX_THREADS];  /* elements kept */
    int64_t worker_slots[DT_CPU_MAX_THREADS]; /* risky groups in their slots */
    int64_t worker_begin[DT_CPU_MAX_THREADS]; /* its rows in pass 1: pass 2 takes the same */
};

/* Rows [i0, i0 + rows) of dw: shard k's partial of them at t + k * rows * out. */
static void wgrad_summed_partials(const struct wgrad_summed_job *j, int worker, float *t,
                                  int64_t i0, int64_t rows)
{
    for (int64_t k = 0; k < j->sh->count; k++) {
        const int64_t r0 = j->sh->row[k] * j->mult, len = j->sh->row[k + 1] * j->mult - r0;
        if (len <= DT_REDUCE_CHUNK) /* one chunk: its partial is the product, made in place */
            chunk_product(t + k * rows * j->out, j->out, j->x + r0 * j->in + i0, 1, j->in,
                          j->dy + r0 * j->out, j->out, len, j->out, 0, rows, j->fused);
        else
            wgrad_fixed_rows(j->be, worker, t + k * rows * j->out, j->x + r0 * j->in, 1, j->in,
                             j->dy + r0 * j->out, len, j->out, i0, i0 + rows, j->fused);
    }
}

/* Pass 1: rows [begin, end) in blocks: the shards' partials in cache, the stood groups' sums
 * into dw, the risky ones' terms into their slots; the worker's maximum. */
static void wgrad_summed_part(void *ctx, int64_t begin, int64_t end, int worker)
{
    struct wgrad_summed_job *j = ctx;
    float *t = j->tmp + worker * j->tmp_floats;
    const int nt = (int)j->sh->count;
    uint32_t m = j->worker_max[worker];
    uint8_t least = j->worker_unit[worker];
    bool any = j->worker_risky[worker];
    int64_t kept = 0, slots = 0;
    DT_ASSERT(j->worker_kept[worker] == 0); /* one range a worker (the pool's static slices) */
    j->worker_begin[worker] = begin;
    /* rows whole groups wide: a block's rows are one run in dw and in each partial, tested
     * in one call, the block's unit bound each row's (1% of the MLP-64 step, early and late in
     * training: results/cpu/portable-cost/spec-tree-zen5/late-half-page-block.txt) */
    const bool whole = j->out % DT_CPU_SPEC_GROUP == 0;
    for (int64_t i0 = begin; i0 < end; i0 += j->block) {
        const int64_t rows = end - i0 < j->block ? end - i0 : j->block;
        wgrad_summed_partials(j, worker, t, i0, rows);
        int block_unit = 255;
        if (whole)
            m = dt_cpu_exact_spec_sums(j->dw + i0 * j->out, t, rows * j->out, nt, rows * j->out,
                                       j->guess, j->risky + i0 * j->groups, &block_unit, m);
        for (int64_t r = 0; r < rows; r++) {
            const int64_t i = i0 + r;
            uint16_t *risky = j->risky + i * j->groups;
            const float *tr = t + r * j->out;
            int unit = block_unit;
            if (!whole)
                m = dt_cpu_exact_spec_sums(j->dw + i * j->out, tr, rows * j->out, nt, j->out,
                                           j->guess, risky, &unit, m);
            for (int64_t g = 0; g < j->groups; g++) {
                if (!risky[g]) continue;
                any = true;
                const int64_t e0 = g * DT_CPU_SPEC_GROUP;
                const int lanes = __builtin_popcount(risky[g]);
                if (kept + lanes <= j->kept_max) { /* its risky elements into the run */
                    float *run = j->kept + worker * KEPT_FLOATS;
                    for (unsigned b = risky[g]; b; b &= b - 1, kept++) {
                        const int64_t x = e0 + __builtin_ctz(b);
                        for (int k = 0; k < nt; k++)
                            run[k * j->kept_max + kept] = tr[k * rows * j->out + x];
                        j->kept_at[worker * j->kept_max + kept] = i * j->out + x;
                    }
                    risky[g] = 0;
                    continue;
                }
                slots++; /* the whole group into its slots (slot 0: dw itself) */
                const int64_t len =
                    j->out - e0 < DT_CPU_SPEC_GROUP ? j->out - e0 : DT_CPU_SPEC_GROUP;
                for (int k = 0; k < nt; k++)
                    memcpy(j->dw + k * j->n + i * j->out + e0, tr + k * rows * j->out + e0,
                           (size_t)len * sizeof(float));
            }
            j->unit[i] = (uint8_t)(unit < 255 ? unit : 255);
            least = j->unit[i] < least ? j->unit[i] : least;
        }
    }
    j->worker_max[worker] = m;
    j->worker_unit[worker] = least;
    j->worker_risky[worker] = any;
    j->worker_kept[worker] = kept;
    j->worker_slots[worker] = slots;
}

/* Pass 2, rows [begin, end) (pass 1's rows of this worker: the same slices): the kept
 * groups summed by the integer path in one call and copied to their places; then, where
 * this worker has any, the rows with a stood group below the floor made again and summed
 * whole the same way, and the groups in their slots summed there. */
static void wgrad_summed_fix(void *ctx, int64_t begin, int64_t end, int worker)
{
    struct wgrad_summed_job *j = ctx;
    float *t = j->tmp + worker * j->tmp_floats;
    const int nt = (int)j->sh->count;
    DT_ASSERT(j->worker_begin[worker] == begin);
    float *kept = j->kept + worker * KEPT_FLOATS;
    const int64_t n_kept = j->worker_kept[worker];
    dt_cpu_exact_sum_terms(kept, kept, j->kept_max, nt, 0, n_kept, j->shift);
    for (int64_t q = 0; q < n_kept; q++) j->dw[j->kept_at[worker * j->kept_max + q]] = kept[q];
    if (j->worker_unit[worker] >= j->e_floor && j->worker_slots[worker] == 0) return;
    for (int64_t i = begin; i < end; i++) {
        float *row = j->dw + i * j->out;
        if (j->unit[i] < j->e_floor) { /* the maximum rose past the guess */
            wgrad_summed_partials(j, worker, t, i, 1);
            dt_cpu_exact_sum_terms(row, t, j->out, nt, 0, j->out, j->shift);
            continue;
        }
        const uint16_t *risky = j->risky + i * j->groups;
        for (int64_t g = 0; g < j->groups; g++) {
            if (!risky[g]) continue; /* the groups in their slots */
            const int64_t e0 = g * DT_CPU_SPEC_GROUP;
            const int64_t e1 = e0 + DT_CPU_SPEC_GROUP < j->out ? e0 + DT_CPU_SPEC_GROUP : j->out;
            dt_cpu_exact_sum_terms(row, row, j->n, nt, e0, e1, j->shift);
        }
    }
}

enum dt_status dt_cpu_dense_backward_weight_summed(struct dt_backend *be, float *dw, const float *x,
                                                   const float *dy, int64_t B, int64_t in,
                                                   int64_t out, const struct dt_policy *pol,
                                                   uint32_t hint, uint32_t *max_bits)
{
    const struct dt_shards *sh = &be->shards;
    DT_ASSERT(sh->count > 0 && B % sh->row[sh->count] == 0 && !dt_math_exact(pol));
    const int64_t mult = B / sh->row[sh->count], n = in * out;
    if (dt_cpu_wgrad_prefers_rows(B, in, out) || sh->count > DT_CPU_SPEC_TERMS_MAX) {
        /* the partials in their slots (the plain op per shard where an example has several
         * rows, as nets/dispatch.c would call it), then this tensor's exact sum */
        if (mult == 1)
            DT_FORWARD_IF_ERROR(
                dt_cpu_dense_backward_weight_shards(be, dw, x, dy, B, in, out, pol));
        for (int64_t k = 0; mult > 1 && k < sh->count; k++) {
            const int64_t r0 = sh->row[k] * mult, len = sh->row[k + 1] * mult - r0;
            DT_FORWARD_IF_ERROR(dt_cpu_dense_backward_weight(be, dw + k * n, x + r0 * in,
                                                             dy + r0 * out, len, in, out, pol));
        }
        const int64_t first[2] = {0, n};
        const struct dt_exact_layout L = {
            .tensors = 1, .n = &n, .first = first, .slots = sh->count, .shards = sh->count};
        return dt_cpu_exact_sum(be, dw, max_bits, &L);
    }
    struct dt_cpu_ctx *c = dt_cpu(be);
    const int T = dt_pool_threads(c->pool);
    struct wgrad_summed_job job = {0}, *j = &job;
    j->be = be, j->dw = dw, j->x = x, j->dy = dy, j->in = in, j->out = out, j->n = n, j->sh = sh;
    j->mult = mult, j->fused = wgrad_fuses(pol);
    j->groups = (out + DT_CPU_SPEC_GROUP - 1) / DT_CPU_SPEC_GROUP;
    const int64_t fit = SUMMED_BLOCK_BYTES / (sh->count * out * (int64_t)sizeof(float));
    j->block = fit < ROW_BLOCK ? ROW_BLOCK : fit > SUMMED_ROWS_MAX ? SUMMED_ROWS_MAX : fit;
    j->block = j->block / ROW_BLOCK * ROW_BLOCK;
    j->tmp_floats = sh->count * j->block * out;
    /* the floor guessed from the maximum before (none: every group with a nonzero term risky) */
    int floor_before, shift_before;
    j->guess = hint != DT_EXACT_UNSUMMED &&
                       dt_cpu_exact_spec_floor(hint, sh->count, &floor_before, &shift_before)
                   ? (floor_before + SUMMED_MARGIN < 255 ? floor_before + SUMMED_MARGIN : 255)
                   : 255;
    const int64_t flag_floats = (in * (2 * j->groups + 1) + 3) / 4;
    j->kept_max = KEPT_FLOATS / sh->count;
    float *scratch =
        dt_cpu_scratch(be, (size_t)(T * (j->tmp_floats + KEPT_FLOATS + 2 * j->kept_max) +
                                    flag_floats + PAGE_FLOATS));
    j->tmp = scratch + half_page_from(scratch, dw);
    j->kept = j->tmp + T * j->tmp_floats;
    j->kept_at = (int64_t *)(j->kept + T * KEPT_FLOATS); /* 2 floats an entry */
    j->risky = (uint16_t *)(j->kept_at + T * j->kept_max);
    j->unit = (uint8_t *)(j->risky + in * j->groups);
    for (int t = 0; t < T; t++) j->worker_unit[t] = 255;
    dt_pool_run(c->pool, in, ROW_BLOCK, wgrad_summed_part, j);
    uint32_t m = 0;
    uint8_t least = 255;
    bool risky = false;
    for (int t = 0; t < T; t++) {
        m = j->worker_max[t] > m ? j->worker_max[t] : m;
        least = j->worker_unit[t] < least ? j->worker_unit[t] : least;
        risky |= j->worker_risky[t];
    }
    *max_bits = m;
    int e_floor;
    if (dt_cpu_exact_spec_floor(m, sh->count, &e_floor, &j->shift) && (risky || least < e_floor)) {
        j->e_floor = (uint8_t)e_floor;
        dt_pool_run(c->pool, in, ROW_BLOCK, wgrad_summed_fix, j);
    }
    return DT_OK;
}

/* math exact: dw = x^T . dy as the exact product at two levels (x (B, in) is A^T stored
 * (K, M)); no order to choose, so `reduction` changes nothing within a shard. */
static enum dt_status wgrad_exact(struct dt_backend *be, float *dw, const float *x, const float *dy,
                                  int64_t B, int64_t in, int64_t out, const struct dt_policy *pol)
{
    const enum dt_status st = dt_backend_xp_wgrad_rows(be, B);
    if (st != DT_OK) return st;
    return dt_cpu_matmul_exact(be, dw, x, dy, NULL, in, B, out, DT_XP_TA, DT_XP_LEVELS_WGRAD, pol);
}

/* dw[k,o] = sum over the batch of x[b,k] dy[b,o]; order per the `reduction` control. */
enum dt_status dt_cpu_dense_backward_weight(struct dt_backend *be, float *dw, const float *x,
                                            const float *dy, int64_t B, int64_t in, int64_t out,
                                            const struct dt_policy *pol)
{
    if (dt_math_exact(pol)) return wgrad_exact(be, dw, x, dy, B, in, out, pol);
    /* math: fast with AVX-512: one pass of fused tiles over the batch, x read in place, beats
     * OpenBLAS's per-slice sgemm and the fixed chunks at the dense layers' shapes (measured:
     * docs/performance.md) */
    const bool fast_wide =
        wgrad_takes_blas(be, pol) && dt_cpu_wide() && !dt_cpu_wgrad_prefers_rows(B, in, out);
#ifdef DT_CPU_WIDE_KERNELS
    if (fast_wide) {
        struct wgrad_job job = {
            .be = be, .dw = dw, .xt = x, .dy = dy, .B = B, .in = in, .out = out};
        dt_pool_run(dt_cpu(be)->pool, in, ROW_BLOCK, wgrad_fast_part, &job);
        return DT_OK;
    }
#endif
    if (wgrad_takes_blas(be, pol) && !fast_wide)
        return wgrad_blas(be, dw, x, false, dy, B, in, out);
    if (dt_cpu_wgrad_prefers_rows(B, in, out))
        return dt_cpu_wgrad_rows(be, dw, x, dy, B, in, out, pol);
    if (dt_cpu_wgrad_in_order(be, pol)) { /* x in place */
        struct wgrad_job job = {.be = be,
                                .dw = dw,
                                .xt = x,
                                .dy = dy,
                                .B = B,
                                .in = in,
                                .out = out,
                                .a_rs = 1,
                                .a_ks = in,
                                .fused = wgrad_fuses(pol)};
        dt_pool_run(dt_cpu(be)->pool, in, ROW_BLOCK, wgrad_fixed_part, &job);
        return DT_OK;
    }
    float *xt = dt_cpu_scratch(be, (size_t)(in * B));
    transpose_parallel(be, xt, x, B, in); /* xt is (in,B) */
    return dt_cpu_wgrad_transposed(be, dw, xt, dy, B, in, out, pol);
}

enum dt_status dt_cpu_wgrad_transposed(struct dt_backend *be, float *dw, const float *xt,
                                       const float *dy, int64_t B, int64_t in, int64_t out,
                                       const struct dt_policy *pol)
{
    struct wgrad_job job = {
        .be = be, .dw = dw, .xt = xt, .dy = dy, .B = B, .in = in, .out = out, .a_rs = B, .a_ks = 1};
    if (wgrad_takes_blas(be, pol)) return wgrad_blas(be, dw, xt, true, dy, B, in, out);
    struct dt_cpu_ctx *c = dt_cpu(be);
    if (dt_cpu_wgrad_in_order(be, pol)) {
        dt_pool_run(c->pool, in, ROW_BLOCK, wgrad_fixed_part, &job);
        return DT_OK;
    }
    job.n_chunks = (B + DT_UNORDERED_CHUNK - 1) / DT_UNORDERED_CHUNK;
    memset(dw, 0, (size_t)(in * out) * sizeof(float));
    wgrad_forced(&job, c->forced_order); /* forced: dt_cpu_wgrad_in_order */
    return DT_OK;
}

/* ---- bias gradient: a scatter-add over the batch (atomics control) ------------------- */

#define FIXED_PARALLEL_MIN 4096 /* elements from which the fixed-point sum is split */

struct bgrad_fixed_job {
    struct dt_backend *be;
    const float *dy;
    int64_t out;
    int shift;
    bool used[DT_CPU_MAX_THREADS];
};

/* acc[o] = exact int64 sum over rows [b0, b1) of dy[b, o] * 2^shift: every term finite
 * and within the max |dy| the shift was chosen for (dt_fixed_shift_for). */
#ifdef DT_CPU_WIDE_KERNELS
/* fixed_sum_bounded's column sums for columns [o0, o0 + 8 * V), held in V registers of 8
 * int64 while the rows go by: the exact product converted straight to int64, rounding to
 * nearest even named in the instruction (|product| < 2^62 by the shift). */
#define FIXED_COLUMNS_WIDE(V)                                                                      \
    do {                                                                                           \
        __m512i a_[V];                                                                             \
        for (int v_ = 0; v_ < (V); v_++) a_[v_] = _mm512_setzero_si512();                          \
        for (int64_t b = b0; b < b1; b++)                                                          \
            for (int v_ = 0; v_ < (V); v_++) {                                                     \
                const __m512d x_ = _mm512_mul_pd(                                                  \
                    _mm512_cvtps_pd(_mm256_loadu_ps(dy + b * out + o0 + 8 * v_)), scale);          \
                a_[v_] = _mm512_add_epi64(                                                         \
                    a_[v_],                                                                        \
                    _mm512_cvt_roundpd_epi64(x_, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));  \
            }                                                                                      \
        for (int v_ = 0; v_ < (V); v_++) _mm512_storeu_si512(acc + o0 + 8 * v_, a_[v_]);           \
    } while (0)

DT_WIDE static int64_t fixed_sum_wide(int64_t *acc, const float *dy, int64_t b0, int64_t b1,
                                      int64_t out, double scale_d)
{
    const __m512d scale = _mm512_set1_pd(scale_d);
    int64_t o0 = 0;
    for (; o0 + 32 <= out; o0 += 32) FIXED_COLUMNS_WIDE(4);
    for (; o0 + 8 <= out; o0 += 8) FIXED_COLUMNS_WIDE(1);
    return o0;
}
#endif

/* The same without AVX-512: 16 columns at a time in four 4-lane int64 accumulators while
 * the rows go by (fixed_lanes.h's conversion, fixed_point.h's values), then 4 at a time;
 * returns where it stopped. */
DT_VECTOR_FN_RET(int64_t, fixed_sum_lanes,
                 (int64_t * acc, const float *dy, int64_t b0, int64_t b1, int64_t out,
                  double scale),
                 (acc, dy, b0, b1, out, scale))
{
    const v4d up = {scale, scale, scale, scale};
    int64_t o0 = 0;
    for (; o0 + 16 <= out; o0 += 16) {
        v4i a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0}, q;
        for (int64_t b = b0; b < b1; b++) {
            const float *row = dy + b * out + o0;
            to_fixed4(&q, row, &up), a0 += q;
            to_fixed4(&q, row + 4, &up), a1 += q;
            to_fixed4(&q, row + 8, &up), a2 += q;
            to_fixed4(&q, row + 12, &up), a3 += q;
        }
        memcpy(acc + o0, &a0, sizeof a0), memcpy(acc + o0 + 4, &a1, sizeof a1);
        memcpy(acc + o0 + 8, &a2, sizeof a2), memcpy(acc + o0 + 12, &a3, sizeof a3);
    }
    for (; o0 + 4 <= out; o0 += 4) {
        v4i a = {0}, q;
        for (int64_t b = b0; b < b1; b++) to_fixed4(&q, dy + b * out + o0, &up), a += q;
        memcpy(acc + o0, &a, sizeof a);
    }
    return o0;
}

/* Few columns that the lanes above leave partly to the scalar loop (out under 32, not a
 * multiple of 8): rows [b0, b0 + returned) read as a flat run in blocks of L = lcm(out, 4)
 * floats (L / out whole rows), each converted in 4-lane groups and added into L int64 lanes,
 * folded into the columns at the end. Integer sums are exact, so any grouping gives
 * dt_fixed_sum_rows's bits (ops.bias_fixed_point_split_matches_serial); acc holds out sums. */
#define FIXED_FLAT_MAX 64

/* lcm(out, v) for v a power of two: a flat run's block of whole rows and whole vectors. */
static int64_t lanes_lcm(int64_t out, int64_t v)
{
    const int64_t low = out & -out; /* out's largest power-of-two factor */
    return out * (v / (low < v ? low : v));
}

/* The fold of a flat run's L lanes into `out` column sums (lane l belongs to column l % out). */
static void fold_lanes(int64_t *acc, const int64_t *lanes, int64_t L, int64_t out)
{
    memset(acc, 0, (size_t)out * sizeof *acc);
    for (int64_t l = 0; l < L; l++) acc[l % out] += lanes[l];
}

DT_VECTOR_FN_RET(int64_t, fixed_sum_flat,
                 (int64_t * acc, const float *dy, int64_t b0, int64_t b1, int64_t out, double scale,
                  int64_t L),
                 (acc, dy, b0, b1, out, scale, L))
{
    const v4d up = {scale, scale, scale, scale};
    v4i a[FIXED_FLAT_MAX / 4] = {{0}}, q;
    const int64_t per = L / out, blocks = (b1 - b0) / per, groups = L / 4;
    const float *p = dy + b0 * out;
    for (int64_t k = 0; k < blocks; k++, p += L)
        for (int64_t g = 0; g < groups; g++) to_fixed4(&q, p + 4 * g, &up), a[g] += q;
    int64_t lanes[FIXED_FLAT_MAX];
    memcpy(lanes, a, (size_t)L * sizeof *lanes);
    fold_lanes(acc, lanes, L, out);
    return blocks * per;
}

#ifdef DT_CPU_WIDE_KERNELS
/* The same with AVX-512, 8 lanes a conversion (FIXED_COLUMNS_WIDE's instruction), blocks of
 * lcm(out, 8) floats. */
DT_WIDE static int64_t fixed_sum_flat_wide(int64_t *acc, const float *dy, int64_t b0, int64_t b1,
                                           int64_t out, double scale_d, int64_t L)
{
    const __m512d scale = _mm512_set1_pd(scale_d);
    __m512i a[FIXED_FLAT_MAX / 8];
    const int64_t per = L / out, blocks = (b1 - b0) / per, groups = L / 8;
    for (int64_t g = 0; g < groups; g++) a[g] = _mm512_setzero_si512();
    const float *p = dy + b0 * out;
    for (int64_t k = 0; k < blocks; k++, p += L)
        for (int64_t g = 0; g < groups; g++) {
            const __m512d x = _mm512_mul_pd(_mm512_cvtps_pd(_mm256_loadu_ps(p + 8 * g)), scale);
            a[g] = _mm512_add_epi64(
                a[g], _mm512_cvt_roundpd_epi64(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        }
    int64_t lanes[FIXED_FLAT_MAX];
    for (int64_t g = 0; g < groups; g++) _mm512_storeu_si512(lanes + 8 * g, a[g]);
    fold_lanes(acc, lanes, L, out);
    return blocks * per;
}
#endif

/* acc[o] = the exact int64 sum over rows [b0, b1) of round(dy[b, o] * 2^shift): few columns
 * as a flat run (fixed_sum_flat); otherwise columns in 8-lane groups where the CPU has
 * AVX-512, in 4-lane groups otherwise (integer sums: the same values), the rest one by one. */
static void fixed_sum_bounded(int64_t *acc, const float *dy, int64_t b0, int64_t b1, int64_t out,
                              int shift)
{
    const double scale = dt_fixed_scale(shift);
    const int64_t L = lanes_lcm(out, 4);
    if (out < 32 && out % 8 != 0 && L <= FIXED_FLAT_MAX && (b1 - b0) * out >= 8 * L) {
        int64_t done;
#ifdef DT_CPU_WIDE_KERNELS
        const int64_t L8 = lanes_lcm(out, 8);
        if (dt_cpu_wide() && L8 <= FIXED_FLAT_MAX)
            done = fixed_sum_flat_wide(acc, dy, b0, b1, out, scale, L8);
        else
#endif
            done = fixed_sum_flat(acc, dy, b0, b1, out, scale, L);
        for (int64_t b = b0 + done; b < b1; b++)
            for (int64_t o = 0; o < out; o++)
                acc[o] += dt_fixed_from_float_bounded(dy[b * out + o], scale);
        return;
    }
    int64_t o0 = 0;
#ifdef DT_CPU_WIDE_KERNELS
    if (dt_cpu_wide()) o0 = fixed_sum_wide(acc, dy, b0, b1, out, scale);
    else
#endif
        o0 = fixed_sum_lanes(acc, dy, b0, b1, out, scale);
    memset(acc + o0, 0, (size_t)(out - o0) * sizeof *acc);
    for (int64_t b = b0; b < b1; b++)
        for (int64_t o = o0; o < out; o++)
            acc[o] += dt_fixed_from_float_bounded(dy[b * out + o], scale);
}

/* dbias[o] = acc[o] * down rounded once (fixed_lanes.h): one by one it had been over half
 * of the MLP's portable bias gradient at batch 64 (4 shards, each rounded on its own: 12.6 -> 5.3
 * us at 1 thread, results/cpu/portable-cost/square-tiles-zen5/). */
DT_VECTOR_FN(round_columns, (float *dbias, const int64_t *acc, int64_t out, double down),
             (dbias, acc, out, down))
{
    const v4d d4 = {down, down, down, down};
    round_fixed_run(dbias, acc, out, &d4);
}

/* dbias[o] = acc[o] * 2^-shift rounded once; an error naming the first column whose sum
 * leaves the float range. */
static enum dt_status fixed_round_columns(float *dbias, const int64_t *acc, int64_t out, int shift,
                                          struct dt_error *err)
{
    round_columns(dbias, acc, out, dt_fixed_scale(-shift));
    for (int64_t o = 0; o < out; o++) {
        if ((dt_float_bits(dbias[o]) & 0x7fffffffu) == 0x7f800000u)
            return dt_error_set(err, DT_ERR_NUMERIC,
                                "fixed-point sum of column %lld overflows the float range",
                                (long long)o);
    }
    return DT_OK;
}

/* dt_fixed_sum_rows's bits and messages on the calling thread, in lanes: max |dy| (the
 * vector scan) and the row count fix the shift, the int64 column sums (fixed_sum_bounded),
 * one rounding per column. For the plain op's small inputs (the pool costs more than the
 * sum) and for each shard of the shards op, where the scalar form spent about 10 ns an
 * element. */
static enum dt_status fixed_columns(float *db, const float *dy, int64_t rows, int64_t out,
                                    int64_t *acc, struct dt_error *err)
{
    const uint32_t m = dt_cpu_max_bits(dy, rows * out, 0);
    if (m >= 0x7f800000u) {
        int64_t bad = 0;
        while ((dt_float_bits(dy[bad]) & 0x7fffffffu) < 0x7f800000u) bad++;
        return dt_error_set(err, DT_ERR_NUMERIC, "non-finite input (%s) at row %lld, column %lld",
                            (dt_float_bits(dy[bad]) & 0x7fffffu) ? "nan" : "inf",
                            (long long)(bad / out), (long long)(bad % out));
    }
    const int shift = dt_fixed_shift_for(dt_bits_float(m), rows);
    fixed_sum_bounded(acc, dy, 0, rows, out, shift);
    return fixed_round_columns(db, acc, out, shift, err);
}

/* atomics float: each worker sums its static slice of rows (threadpool.h) into a private
 * partial, then adds the partial into dbias element by element with a float CAS, in
 * arrival order: a GPU's block partials followed by atomicAdd. The slices follow the
 * thread count, so the bits do (1 thread against 2); with two partials arrival order
 * cannot change them (0 + a + b == 0 + b + a in float), with three or more it can. Below
 * BGRAD_SERIAL_MAX elements the calling thread sums alone: waking the pool costs more
 * than the sum (issue 38: the earlier chunks taken as they came were slower than the
 * exact int64 path of run_to_run). */
#define BGRAD_SERIAL_MAX 4096
struct bgrad_job {
    struct dt_backend *be;
    float *dbias;
    const float *dy;
    int64_t out;
};

/* Column sums of rows [b0, b1) in float (the unordered bias gradient: no order to keep).
 * With few columns each column's adds would wait on each other: where the least common
 * multiple L of `out` and 16 is at most FLAT_MAX floats, the rows are read as a flat run cut
 * into blocks of L (L / out whole rows each) summed lane by lane into two alternating
 * partials -- full vectors whatever `out` -- and folded into the columns at the end
 * (LeNet's convolutions: 6 columns over 73,728 rows, 16 over 8,192); otherwise
 * COLUMN_LANES interleaved partial sums (row b into partial b % COLUMN_LANES), added
 * pairwise at the end. */
#define COLUMN_LANES 8
#define COLUMN_LANES_BELOW 32 /* columns under which they are used */
#define FLAT_MAX 256

DT_VECTOR_FN(column_sums,
             (float *restrict acc, const float *restrict dy, int64_t b0, int64_t b1, int64_t out),
             (acc, dy, b0, b1, out))
{
    memset(acc, 0, (size_t)out * sizeof *acc);
    int64_t b = b0;
    const int64_t L = lanes_lcm(out, 16);
    if (out < COLUMN_LANES_BELOW && L <= FLAT_MAX && (b1 - b0) * out >= 8 * L) {
        float part[2][FLAT_MAX] __attribute__((aligned(64))) = {{0}};
        const int64_t per = L / out, blocks = (b1 - b0) / per;
        const float *restrict p = dy + b0 * out;
        int64_t k = 0;
        for (; k + 2 <= blocks; k += 2, p += 2 * L)
            for (int64_t l = 0; l < L; l++) part[0][l] += p[l], part[1][l] += p[L + l];
        for (; k < blocks; k++, p += L)
            for (int64_t l = 0; l < L; l++) part[0][l] += p[l];
        for (int64_t l = 0; l < L; l++) acc[l % out] += part[0][l] + part[1][l];
        b = b0 + blocks * per;
    } else if (out < COLUMN_LANES_BELOW && b1 - b0 >= 4 * COLUMN_LANES) {
        float part[COLUMN_LANES][COLUMN_LANES_BELOW] = {{0}};
        for (; b + COLUMN_LANES <= b1; b += COLUMN_LANES)
            for (int u = 0; u < COLUMN_LANES; u++) {
                const float *restrict row = dy + (b + u) * out;
                for (int64_t o = 0; o < out; o++) part[u][o] += row[o];
            }
        for (int w = COLUMN_LANES / 2; w >= 1; w /= 2)
            for (int u = 0; u < w; u++)
                for (int64_t o = 0; o < out; o++) part[u][o] += part[u + w][o];
        memcpy(acc, part[0], (size_t)out * sizeof *acc);
    }
    for (; b < b1; b++) {
        const float *restrict row = dy + b * out;
        for (int64_t o = 0; o < out; o++) acc[o] += row[o];
    }
}

static void bgrad_float_part(void *ctx, int64_t begin, int64_t end, int worker)
{
    struct bgrad_job *j = ctx;
    float *p = dt_cpu_worker_buffer(j->be, worker, (size_t)j->out);
    column_sums(p, j->dy, begin, end, j->out);
    for (int64_t o = 0; o < j->out; o++) dt_cpu_atomic_add_float(&j->dbias[o], p[o]);
}

static void bgrad_fixed_part(void *ctx, int64_t begin, int64_t end, int worker)
{
    struct bgrad_fixed_job *j = ctx;
    int64_t *acc = (int64_t *)dt_cpu_worker_buffer(j->be, worker, (size_t)j->out * 2);
    fixed_sum_bounded(acc, j->dy, begin, end, j->out, j->shift);
    j->used[worker] = true;
}

/* reduction: exact with shards set, atomics fixed_point: one partial per shard, the bits of
 * dt_cpu_bias_backward on the shard's rows alone -- both of its paths give
 * dt_fixed_sum_rows's bits: max |dy| over the shard and its row count fix the shift, and
 * the int64 column sums are exact -- computed by one worker per shard (fixed_columns) in one pool
 * run instead of one op call (and two pool runs) per shard. A worker keeps its shard's error; the
 * first failing shard's message is printed, as the call per shard would. */
struct bgrad_shards_job {
    struct dt_backend *be;
    float *dbias; /* slot k at dbias + k * out */
    const float *dy;
    int64_t out, mult;
    const struct dt_shards *sh;
    enum dt_status *st; /* per shard */
    char (*msg)[160];
};

static void bgrad_shards_part(void *ctx, int64_t begin, int64_t end, int worker)
{
    struct bgrad_shards_job *j = ctx;
    const int64_t out = j->out;
    int64_t *acc = (int64_t *)dt_cpu_worker_buffer(j->be, worker, (size_t)out * 2);
    for (int64_t k = begin; k < end; k++) {
        const int64_t r0 = j->sh->row[k] * j->mult;
        const int64_t rows = (j->sh->row[k + 1] - j->sh->row[k]) * j->mult;
        const float *dy = j->dy + r0 * out;
        float *db = j->dbias + k * out;
        struct dt_error err = {0};
        j->st[k] = fixed_columns(db, dy, rows, out, acc, &err);
        if (j->st[k] != DT_OK) snprintf(j->msg[k], sizeof j->msg[k], "%.150s", err.msg);
    }
}

enum dt_status dt_cpu_bias_backward_shards(struct dt_backend *be, float *dbias, const float *dy,
                                           int64_t B, int64_t out, const struct dt_policy *pol)
{
    const struct dt_shards *sh = &be->shards;
    DT_ASSERT(sh->count > 0);
    if (!dt_atomics_exact(pol)) return DT_ERR_UNSUPPORTED; /* per shard */
    struct bgrad_shards_job j = {
        .be = be, .dbias = dbias, .dy = dy, .out = out, .sh = sh, .mult = B / sh->row[sh->count]};
    j.st = dt_xcalloc((size_t)sh->count, sizeof *j.st);
    j.msg = dt_xcalloc((size_t)sh->count, sizeof *j.msg);
    dt_pool_run(dt_cpu(be)->pool, sh->count, 1, bgrad_shards_part, &j);
    enum dt_status st = DT_OK;
    for (int64_t k = 0; k < sh->count && st == DT_OK; k++)
        if ((st = j.st[k]) != DT_OK) dt_backend_op_error(be, st, "%s", j.msg[k]);
    free(j.st);
    free(j.msg);
    return st;
}

/* dbias[o] = sum over the batch of dy[b,o]; per the `atomics` control. */
enum dt_status dt_cpu_bias_backward(struct dt_backend *be, float *dbias, const float *dy, int64_t B,
                                    int64_t out, const struct dt_policy *pol)
{
    struct dt_cpu_ctx *c = dt_cpu(be);
    if (dt_atomics_exact(pol)) {
        if (B * out < FIXED_PARALLEL_MIN) {
            int64_t *acc = (int64_t *)dt_cpu_scratch(be, (size_t)out * 2);
            struct dt_error err;
            enum dt_status st = fixed_columns(dbias, dy, B, out, acc, &err);
            return st == DT_OK ? st : dt_backend_op_error(be, st, "%s", err.msg);
        }
        /* Large (a convolution's B*OH*OW rows): the same shift (max |dy|, B terms) and
         * exact int64 sums, split over the workers' row slices and added -- integer
         * addition, so the bits are dt_fixed_sum_rows's whatever the split. */
        float max_abs;
        int64_t bad;
        if (!dt_cpu_max_abs(be, dy, B * out, &max_abs, &bad)) {
            return dt_backend_op_error(be, DT_ERR_NUMERIC,
                                       "non-finite input at row %lld, column %lld",
                                       (long long)(bad / out), (long long)(bad % out));
        }
        struct bgrad_fixed_job fj = {
            .be = be, .dy = dy, .out = out, .shift = dt_fixed_shift_for(max_abs, B)};
        const int T = dt_pool_threads(c->pool);
        for (int t = 0; t < T; t++) fj.used[t] = false;
        dt_pool_run(c->pool, B, 256, bgrad_fixed_part, &fj);
        int64_t *total = (int64_t *)dt_cpu_scratch(be, (size_t)out * 2);
        memset(total, 0, (size_t)out * sizeof *total);
        for (int t = 0; t < T; t++) {
            if (!fj.used[t]) continue;
            const int64_t *part = (const int64_t *)c->worker_buf[t];
            for (int64_t o = 0; o < out; o++) total[o] += part[o]; /* < 2^63 by the shift */
        }
        struct dt_error err;
        const enum dt_status st = fixed_round_columns(dbias, total, out, fj.shift, &err);
        return st == DT_OK ? st
                           : dt_backend_op_error(be, st, "%s", err.msg); /* as the small path */
    }
    memset(dbias, 0, (size_t)out * sizeof(float));
    if (c->forced_order) {
        int64_t *perm = dt_xmalloc((size_t)B * sizeof *perm);
        dt_forced_permutation(perm, B, c->forced_order, DT_FORCED_ROWS);
        for (int64_t t = 0; t < B; t++)
            for (int64_t o = 0; o < out; o++) dbias[o] += dy[perm[t] * out + o];
        free(perm);
        return DT_OK;
    }
    if (B * out <= BGRAD_SERIAL_MAX) {
        column_sums(dbias, dy, 0, B, out);
        return DT_OK;
    }
    struct bgrad_job job = {.be = be, .dbias = dbias, .dy = dy, .out = out};
    dt_pool_run(c->pool, B, 256, bgrad_float_part, &job);
    return DT_OK;
}
