/* Dense layer on the CUDA backend (kernels and host functions): forward,
 * backward-data, backward-weight and the bias gradient, mirroring nets/cpu/dense.c op for
 * op. Data path (docs/DESIGN.md): nets/backend -> here (own kernels) or cuBLAS. The controls:
 *
 *   matrix products  math portable -> dt_cuda_gemm_ordered: every output summed over k in
 *                    index order from +0, two roundings per term: the CPU's bits;
 *                    math fast / strict -> cuBLAS (TF32 allowed / pedantic FP32,
 *                    dt_cuda_cublas_for), row-major products as column-major ones.
 *   backward-weight  the sum over the batch, chunk partials combined under `reduction`:
 *                    fixed     -> canonical chunks of DT_REDUCE_CHUNK rows and the fixed
 *                                 tree of reduce.h per element: at portable the CPU's bits;
 *                    unordered -> math fast / strict: one cuBLAS product over the batch
 *                                 (the fastest path; deterministic on one device);
 *                                 math portable: chunks of DT_UNORDERED_CHUNK rows added by
 *                                 float atomicAdd (arrival order); the forced-order hook
 *                                 adds them in a drawn order instead, the CPU's (same
 *                                 chunks, same draw).
 *   bias gradient    the sum over the batch under `atomics`:
 *                    fixed_point -> exact int64 fixed point, one rounding: the CPU's bits
 *                                   at every level; non-finite input and float overflow
 *                                   are reported like the CPU's;
 *                    float       -> row-slice sums added by float atomicAdd; the forced-order
 *                                   hook adds the rows in the CPU's drawn order. */
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <limits.h>
#include <stdio.h>

#include "determinism/exact_product.h"
#include "determinism/fixed_point.h"
#include "determinism/reduce.h"
#include "determinism/streams.h" /* dt_forced_permutation: the drawn orders */
#include "nets/cuda/dense_loss.h"
#include "nets/cuda/gemm_tile.h"
#include "nets/cuda/launch.cuh"
#include "nets/dense_loss_elem.h"

/* ---- kernels and their launchers ---------------------------------------------------------- */

/* Kernels of the CUDA dense layer (the ops below): the ordered matrix
 * product of `math: portable`, the bias add, the combination of backward-weight chunk
 * partials under `reduction`, and the bias gradient under `atomics`. Every kernel loops
 * over its work items grid-stride (the tiled product over tiles), so no result depends on
 * the grid or block size except where a comment says the order is arrival order. */

#define GEMM_TILE 16 /* the product's tiles: GEMM_TILE x GEMM_TILE outputs per block */
#define BIAS_ROWS DT_CUDA_BIAS_ROWS   /* rows per slice of the float bias gradient */
#define FIXED_ROWS DT_CUDA_FIXED_ROWS /* rows per slice of the fixed-point bias gradient */

/* Blocks for `tiles` tiles of one block each: at most the grid cap (dt_cuda_set_launch). */
static unsigned blocks_for_tiles(const struct dt_cuda_launch *L, int64_t tiles)
{
    int64_t cap = L->max_blocks > 0 ? L->max_blocks : 65535;
    if (tiles > cap) tiles = cap;
    return (unsigned)(tiles > 0 ? tiles : 1);
}

/* portable: thread (ty, tx) of a tile owns output (i0+ty, j0+tx) and sums its products
 * over k ascending from +0 (dt_dense_mac: two roundings); shared memory only stages the
 * operands, tiles of GEMM_TILE k at a time in k order, so every output sees the CPU's
 * sequence of roundings (nets/cpu/dense.c, matmul_rows_ordered). The block shape is
 * fixed by the tile; blocks walk the tiles grid-stride, so any grid gives the same bits. */
static __global__ void __launch_bounds__(GEMM_TILE *GEMM_TILE)
    gemm_ordered_kernel(struct dt_cuda_gemm_args g)
{
    __shared__ float as[GEMM_TILE][GEMM_TILE + 1]; /* as[i][k]; +1: no bank conflicts */
    __shared__ float bs[GEMM_TILE][GEMM_TILE + 1]; /* bs[k][j] */
    const int tx = threadIdx.x, ty = threadIdx.y;
    /* Loads let consecutive threads (tx) walk an operand's unit-stride axis. */
    const int ai = g.a_sk == 1 ? ty : tx, ak = g.a_sk == 1 ? tx : ty;
    const int bk = g.b_sj == 1 ? ty : tx, bj = g.b_sj == 1 ? tx : ty;
    const int64_t tiles_m = (g.M + GEMM_TILE - 1) / GEMM_TILE;
    const int64_t tiles_n = (g.N + GEMM_TILE - 1) / GEMM_TILE;
    const int64_t per_batch = tiles_m * tiles_n;
    for (int64_t t = blockIdx.x; t < per_batch * g.batches; t += gridDim.x) {
        const int64_t z = t / per_batch, r = t % per_batch;
        const int64_t i0 = r / tiles_n * GEMM_TILE, j0 = r % tiles_n * GEMM_TILE;
        const int64_t kz = g.K - z * g.k_chunk < g.k_chunk ? g.K - z * g.k_chunk : g.k_chunk;
        const float *a = g.a + z * g.a_batch, *b = g.b + z * g.b_batch;
        float acc = 0.0f;
        for (int64_t k0 = 0; k0 < kz; k0 += GEMM_TILE) { /* uniform across the block */
            as[ai][ak] =
                (i0 + ai < g.M && k0 + ak < kz) ? a[(i0 + ai) * g.a_si + (k0 + ak) * g.a_sk] : 0.0f;
            bs[bk][bj] =
                (k0 + bk < kz && j0 + bj < g.N) ? b[(k0 + bk) * g.b_sk + (j0 + bj) * g.b_sj] : 0.0f;
            __syncthreads();
            const int kn = kz - k0 < GEMM_TILE ? (int)(kz - k0) : GEMM_TILE;
            for (int kk = 0; kk < kn; kk++) acc = dt_dense_mac(acc, as[ty][kk], bs[kk][tx]);
            __syncthreads();
        }
        const int64_t i = i0 + ty, j = j0 + tx;
        if (i < g.M && j < g.N) g.c[z * g.c_batch + i * g.N + j] = acc;
    }
}

/* The same product in DT_GEMM_BM x DT_GEMM_BN tiles, DT_GEMM_TM x DT_GEMM_TN outputs a
 * thread in registers (nets/cuda/gemm_tile.h: the schedule, shared with its host emulation):
 * the same sums, a quarter of the shared-memory reads a product. For products of at least
 * GEMM_WIDE_MIN_TILES such tiles (the GPU-scale GPT's: the 16 x 16 kernel's portable dense
 * ops took 74 + 73 ms a step on the H200, results/nvidia-h200); smaller ones keep the
 * 16 x 16 tiles, which spread them over more blocks. */
#define GEMM_WIDE_MIN_TILES 256
static __global__ void __launch_bounds__(DT_GEMM_THREADS)
    gemm_ordered_wide_kernel(struct dt_cuda_gemm_args g)
{
    __shared__ float staged[DT_GEMM_STAGED_FLOATS];
    float *as = staged, *bs = staged + DT_GEMM_BK * DT_GEMM_AS_LD;
    const int tid = (int)threadIdx.x;
    const int64_t tiles = dt_gemm_wide_tiles(&g);
    for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) { /* uniform across the block */
        const struct dt_gemm_tile T = dt_gemm_tile_of(&g, t);
        float acc[DT_GEMM_TM][DT_GEMM_TN];
        for (int r = 0; r < DT_GEMM_TM; r++)
            for (int c = 0; c < DT_GEMM_TN; c++) acc[r][c] = 0.0f;
        for (int64_t k0 = 0; k0 < T.kz; k0 += DT_GEMM_BK) {
            dt_gemm_stage(as, bs, &g, &T, k0, tid);
            __syncthreads();
            dt_gemm_mac_staged(acc, as, bs, T.kz - k0 < DT_GEMM_BK ? (int)(T.kz - k0) : DT_GEMM_BK,
                               tid);
            __syncthreads();
        }
        dt_gemm_store_tile(&g, &T, acc, tid);
    }
}

/* portable: y[b,o] + bias[o], one rounding, as the CPU's y[o] += bias[o]. */
static __global__ void __launch_bounds__(1024)
    bias_add_kernel(float *y, const float *bias, int64_t B, int64_t out)
{
    DT_GRID_STRIDE(i, B * out)
    y[i] = dt_rn_add(y[i], bias[i % out]);
}

/* reduction fixed: the fixed tree of reduce.h by aligned blocks of TREE_BLOCK partials,
 * level after level (dt_reduce_tree_blocked: the same bits): one thread per (block,
 * element) runs its block's tree down its column (consecutive threads take consecutive
 * elements, so a warp's accesses are consecutive). One level's blocks are disjoint. A
 * thread per element walking all m partials took ~1 ms for LeNet's first conv weight
 * gradient (150 elements, 3136 partials); by blocks that level has 98 x 150 threads. */
#define TREE_BLOCK 16
static __global__ void __launch_bounds__(1024)
    reduce_tree_level_kernel(float *p, int64_t count, int64_t s, int64_t n)
{
    const int64_t blocks = (count + TREE_BLOCK - 1) / TREE_BLOCK;
    DT_GRID_STRIDE(i, blocks * n)
    dt_reduce_tree_block(p + i % n, count, s, TREE_BLOCK, i / n);
}

static __global__ void __launch_bounds__(1024) copy_kernel(float *dst, const float *src, int64_t n)
{
    DT_GRID_STRIDE(i, n) dst[i] = src[i];
}

/* reduction unordered: every partial added by float atomicAdd; partials of one element sit
 * in different blocks, so the order of the additions is the order they arrive in. */
static __global__ void __launch_bounds__(1024)
    add_partials_atomic_kernel(float *dst, const float *p, int64_t m, int64_t n)
{
    DT_GRID_STRIDE(i, m * n)
    atomicAdd(&dst[i % n], p[i]);
}

/* Forced order (test hook): one thread per element adds the partials in perm's order. */
static __global__ void __launch_bounds__(1024)
    add_partials_in_order_kernel(float *dst, const float *p, const int64_t *perm, int64_t m,
                                 int64_t n)
{
    DT_GRID_STRIDE(e, n)
    dst[e] = dt_sum_in_order(p, perm, m, n, e);
}

/* atomics float: item (slice s, column o) sums rows [s*BIAS_ROWS, ...) in order, then
 * adds the sum by float atomicAdd: arrival order across slices. */
static __global__ void __launch_bounds__(1024)
    bias_grad_atomic_kernel(float *dbias, const float *dy, int64_t B, int64_t out)
{
    const int64_t slices = (B + BIAS_ROWS - 1) / BIAS_ROWS;
    DT_GRID_STRIDE(i, slices * out)
    {
        const int64_t s = i / out, o = i % out;
        const int64_t end = (s + 1) * BIAS_ROWS < B ? (s + 1) * BIAS_ROWS : B;
        float acc = 0.0f;
        for (int64_t b = s * BIAS_ROWS; b < end; b++) acc = dt_rn_add(acc, dy[b * out + o]);
        atomicAdd(&dbias[o], acc);
    }
}

/* ---- atomics fixed_point: order-free, the CPU's bits (dt_fixed_sum_rows) -------------- */

static __global__ void __launch_bounds__(1024)
    bias_fixed_init_kernel(unsigned long long *acc, struct dt_cuda_fixed_record *rec, int64_t out)
{
    DT_GRID_STRIDE(o, out)
    acc[o] = 0;
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        dt_cuda_fixed_record_reset(rec);
    }
}

/* max |dy| as bit patterns (monotone for finite floats; max is order-free), and the first
 * non-finite input by atomicMin on its row-major index. */
static __global__ void __launch_bounds__(1024)
    bias_fixed_max_kernel(struct dt_cuda_fixed_record *rec, const float *dy, int64_t n)
{
    __shared__ unsigned int block_max;
    if (threadIdx.x == 0) block_max = 0;
    __syncthreads();
    unsigned int mx = 0;
    DT_GRID_STRIDE(i, n)
    {
        const unsigned int bits = dt_float_bits(dy[i]) & 0x7fffffffu;
        if (bits >= 0x7f800000u) atomicMin(&rec->first_bad, (unsigned long long)i);
        else if (bits > mx) mx = bits;
    }
    atomicMax(&block_max, mx);
    __syncthreads();
    if (threadIdx.x == 0) atomicMax(&rec->max_bits, block_max);
}

/* The shift of determinism/fixed_point.h for the whole tensor: max |dy| and B terms. */
static __device__ int bias_fixed_shift(const struct dt_cuda_fixed_record *rec, int64_t B)
{
    return dt_fixed_shift_for(dt_bits_float(rec->max_bits), B);
}

/* Item (slice s, column o): the exact int64 sum of the slice's terms, added to the column's
 * counter by integer atomicAdd. The shift bounds every partial and the total below 2^62 in
 * magnitude, so two's-complement wrap-around in the unsigned counters gives the exact sum
 * in any order. */
static __global__ void __launch_bounds__(1024)
    bias_fixed_sum_kernel(unsigned long long *acc, struct dt_cuda_fixed_record *rec,
                          const float *dy, int64_t B, int64_t out)
{
    if (rec->first_bad != DT_CUDA_NO_INDEX) return;
    const int shift = bias_fixed_shift(rec, B);
    const int64_t slices = (B + FIXED_ROWS - 1) / FIXED_ROWS;
    DT_GRID_STRIDE(i, slices * out)
    {
        const int64_t s = i / out, o = i % out;
        const int64_t end = (s + 1) * FIXED_ROWS < B ? (s + 1) * FIXED_ROWS : B;
        unsigned long long sum = 0;
        for (int64_t b = s * FIXED_ROWS; b < end; b++) {
            int64_t q = 0;
            /* finite and <= max |dy|: cannot fail unless the bound is broken */
            if (!dt_fixed_from_float(&q, dy[b * out + o], shift)) atomicExch(&rec->bad_term, 1u);
            sum += (unsigned long long)q;
        }
        atomicAdd(&acc[o], sum);
    }
}

/* dbias[o] = the float nearest to acc[o] * 2^-shift (one rounding); a sum beyond the float
 * range is recorded by column. */
static __global__ void __launch_bounds__(1024)
    bias_fixed_finish_kernel(float *dbias, struct dt_cuda_fixed_record *rec,
                             const unsigned long long *acc, int64_t B, int64_t out)
{
    if (rec->first_bad != DT_CUDA_NO_INDEX) return;
    const int shift = bias_fixed_shift(rec, B);
    DT_GRID_STRIDE(o, out)
    {
        const float f = dt_fixed_to_float((int64_t)acc[o], shift);
        dbias[o] = f;
        if ((dt_float_bits(f) & 0x7fffffffu) == 0x7f800000u)
            atomicMin(&rec->overflow_col, (unsigned long long)o);
    }
}

/* ---- reduction: exact's shard partials of the fixed-point bias gradient in one launch --
 * Block k computes shard k's partial with dt_fixed_sum_rows's bits (the CPU's
 * dt_cpu_bias_backward_shards): max |dy| over the shard, the shift for it and the shard's
 * row count, the exact int64 column sums (order-free), one rounding each. Each block writes
 * its own record in full; the last block to finish (a counter in device memory, back to 0
 * after it) copies the first faulty shard's record, or a clean one, into the op's record --
 * so nothing needs resetting before the launch, and the op is one kernel (a graph node). */
#define BIAS_ONE_PASS_COLS DT_CUDA_BIAS_ONE_PASS_COLS /* columns in shared memory (8 KiB) */
struct shard_rows { /* the shards' row bounds, by value (the one-launch kernels below) */
    int64_t row[DT_CUDA_SHARDS_MAX + 1];
};
static struct shard_rows shard_rows_of(const int64_t *row, int64_t shards)
{
    struct shard_rows sr;
    for (int64_t k = 0; k <= shards; k++) sr.row[k] = row[k];
    return sr;
}

static __global__ void __launch_bounds__(1024)
    bias_fixed_shards_kernel(float *dbias, struct dt_cuda_fixed_record *rec,
                             struct dt_cuda_fixed_record *block_rec, unsigned int *count,
                             const float *dy, struct shard_rows sr, int64_t mult, int64_t out)
{
    __shared__ unsigned long long acc[BIAS_ONE_PASS_COLS];
    __shared__ unsigned int mx, bad_term;
    __shared__ unsigned long long first_bad, overflow;
    __shared__ bool last;
    const int64_t k = blockIdx.x;
    const int64_t rows = (sr.row[k + 1] - sr.row[k]) * mult, n = rows * out;
    const float *v = dy + sr.row[k] * mult * out;
    const int64_t tid = threadIdx.x, nt = blockDim.x;
    if (tid == 0) {
        mx = 0;
        bad_term = 0;
        first_bad = DT_CUDA_NO_INDEX;
        overflow = DT_CUDA_NO_INDEX;
    }
    for (int64_t o = tid; o < out; o += nt) acc[o] = 0;
    __syncthreads();
    unsigned int m = 0;
    for (int64_t i = tid; i < n; i += nt) {
        const unsigned int bits = dt_float_bits(v[i]) & 0x7fffffffu;
        if (bits >= 0x7f800000u) atomicMin(&first_bad, (unsigned long long)i);
        else if (bits > m) m = bits;
    }
    atomicMax(&mx, m);
    __syncthreads();
    if (first_bad == DT_CUDA_NO_INDEX) {
        const int shift = dt_fixed_shift_for(dt_bits_float(mx), rows);
        /* out <= threads: thread t < stride (a multiple of out) keeps column t % out in a
         * register; wider rows: each thread walks whole columns */
        const int64_t stride = out <= nt ? nt / out * out : 0;
        if (stride > 0 && tid < stride) {
            unsigned long long sum = 0;
            for (int64_t i = tid; i < n; i += stride) {
                int64_t q = 0;
                if (!dt_fixed_from_float(&q, v[i], shift)) atomicExch(&bad_term, 1u);
                sum += (unsigned long long)q;
            }
            atomicAdd(&acc[tid % out], sum); /* integers: any order */
        }
        for (int64_t o = tid; stride == 0 && o < out; o += nt) {
            unsigned long long sum = 0;
            for (int64_t r = 0; r < rows; r++) {
                int64_t q = 0;
                if (!dt_fixed_from_float(&q, v[r * out + o], shift)) atomicExch(&bad_term, 1u);
                sum += (unsigned long long)q;
            }
            acc[o] = sum;
        }
        __syncthreads();
        for (int64_t o = tid; o < out; o += nt) {
            const float f = dt_fixed_to_float((int64_t)acc[o], shift);
            dbias[k * out + o] = f;
            if ((dt_float_bits(f) & 0x7fffffffu) == 0x7f800000u)
                atomicMin(&overflow, (unsigned long long)o);
        }
    }
    __syncthreads();
    if (tid == 0) {
        struct dt_cuda_fixed_record r;
        r.max_bits = mx;
        r.bad_term = bad_term;
        r.first_bad = first_bad;
        r.overflow_col = overflow;
        block_rec[k] = r;
        __threadfence(); /* the record before the count that publishes it */
        last = atomicAdd(count, 1u) == gridDim.x - 1;
    }
    __syncthreads();
    if (!last || tid != 0) return;
    __threadfence();
    const volatile struct dt_cuda_fixed_record *br = block_rec;
    int64_t j = 0; /* the first shard with a fault: its message, as the CPU's */
    while (j < gridDim.x && br[j].first_bad == DT_CUDA_NO_INDEX && !br[j].bad_term &&
           br[j].overflow_col == DT_CUDA_NO_INDEX)
        j++;
    if (j == gridDim.x) j = 0;
    rec->max_bits = br[j].max_bits;
    rec->bad_term = br[j].bad_term;
    rec->first_bad = br[j].first_bad;
    rec->overflow_col = br[j].overflow_col;
    *count = 0; /* for the next launch (stream order) */
}

/* ---- reduction: exact's weight-gradient partials at portable in one launch --------------
 * Item (k, i, j): shard k's partial of dw[i, j] (rows row[k] mult to row[k + 1] mult: mult
 * rows an example, the GPT's positions) with the bits of a call on the shard's rows
 * alone (nets/cpu/dense.c's chunks and tree; the CPU's): each DT_REDUCE_CHUNK-row chunk summed from
 * +0 in row order with dt_dense_mac, the chunk partials through the fixed tree streamed
 * (determinism/reduce.h, dt_reduce_stream: no partials in memory, no second kernel).
 * Threads along j read dy's row contiguously and share x's element. */
static __global__ void __launch_bounds__(1024)
    wgrad_shards_kernel(float *dw, const float *x, const float *dy, struct shard_rows sr, int64_t S,
                        int64_t mult, int64_t in, int64_t out)
{
    const int64_t n = in * out;
    DT_GRID_STRIDE(t, S * n)
    {
        const int64_t k = t / n, i = t % n / out, j = t % out;
        const int64_t first = sr.row[k] * mult, end = sr.row[k + 1] * mult;
        struct dt_reduce_stream rs;
        dt_reduce_stream_init(&rs);
        for (int64_t b0 = first; b0 < end; b0 += DT_REDUCE_CHUNK) {
            const int64_t b1 = b0 + DT_REDUCE_CHUNK < end ? b0 + DT_REDUCE_CHUNK : end;
            float acc = 0.0f;
            for (int64_t b = b0; b < b1; b++)
                acc = dt_dense_mac(acc, x[b * in + i], dy[b * out + j]);
            dt_reduce_stream_push(&rs, acc);
        }
        dw[t] = dt_reduce_stream_end(&rs);
    }
}

/* ---- launchers -------------------------------------------------------------------------- */

extern "C" int dt_cuda_gemm_ordered(const struct dt_cuda_gemm_args *g,
                                    const struct dt_cuda_launch *L)
{
    const dt_cuda_stream s = L->stream;
    const int64_t wide = dt_gemm_wide_tiles(g);
    /* every output a sum over K in index order (two roundings a term): the tile's threads step
     * through K together, a narrow product paying the whole tile's width (16 x 16 counted) */
    const double Mt = 16.0 * (double)((g->M + 15) / 16), Nt = 16.0 * (double)((g->N + 15) / 16);
    const struct dt_op_cost w =
        dt_work_ordered(4.0 * ((double)g->M * (double)g->K + (double)g->K * (double)g->N +
                               (double)g->batches * (double)g->M * (double)g->N),
                        DT_W_MAC * Mt * Nt * (double)g->K);
    if (wide >= GEMM_WIDE_MIN_TILES) {
        DT_LAUNCH(L, w, gemm_ordered_wide_kernel, blocks_for_tiles(L, wide), DT_GEMM_THREADS, 0, s)
        (*g);
        return DT_LAUNCHED(L);
    }
    const int64_t tiles =
        (g->M + GEMM_TILE - 1) / GEMM_TILE * ((g->N + GEMM_TILE - 1) / GEMM_TILE) * g->batches;
    DT_LAUNCH(L, w, gemm_ordered_kernel, blocks_for_tiles(L, tiles), dim3(GEMM_TILE, GEMM_TILE), 0,
              s)
    (*g);
    return DT_LAUNCHED(L);
}

extern "C" int dt_cuda_bias_add(float *y, const float *bias, int64_t B, int64_t out,
                                const struct dt_cuda_launch *L)
{
    const dt_cuda_stream s = L->stream;
    const double n = (double)B * (double)out;
    DT_LAUNCH(L, dt_work(4.0 * (2.0 * n + (double)out), n), bias_add_kernel,
              dt_cuda_grid(L, B * out), L->block_threads, 0, s)
    (y, bias, B, out);
    return DT_LAUNCHED(L);
}

extern "C" int dt_cuda_reduce_tree(float *dst, float *partials, int64_t m, int64_t n,
                                   const struct dt_cuda_launch *L)
{
    const dt_cuda_stream s = L->stream;
    for (int64_t st = n, count = m; count > 1;
         st *= TREE_BLOCK, count = (count + TREE_BLOCK - 1) / TREE_BLOCK) {
        const int64_t blocks = (count + TREE_BLOCK - 1) / TREE_BLOCK;
        DT_LAUNCH(L,
                  dt_work(4.0 * (double)(count + blocks) * (double)n,
                          (double)(count - blocks) * (double)n),
                  reduce_tree_level_kernel, dt_cuda_grid(L, blocks * n), L->block_threads, 0, s)
        (partials, count, st, n);
    }
    DT_LAUNCH(L, dt_work(8.0 * (double)n, 0.0), copy_kernel, dt_cuda_grid(L, n), L->block_threads,
              0, s)
    (dst, partials, n);
    return DT_LAUNCHED(L);
}

extern "C" int dt_cuda_add_partials_atomic(float *dst, const float *partials, int64_t m, int64_t n,
                                           const struct dt_cuda_launch *L)
{
    const dt_cuda_stream s = L->stream;
    cudaError_t e = dt_cuda_memset_async(L, dst, 0, (size_t)n * sizeof(float), s);
    if (e != cudaSuccess) {
        (void)cudaGetLastError(); /* reported here, not again by the next launch */
        return (int)e;
    }
    const double mn = (double)m * (double)n;
    DT_LAUNCH(L, dt_work(4.0 * (mn + 2.0 * (double)n), mn), add_partials_atomic_kernel,
              dt_cuda_grid(L, m * n), L->block_threads, 0, s)
    (dst, partials, m, n);
    return DT_LAUNCHED(L);
}

extern "C" int dt_cuda_add_partials_in_order(float *dst, const float *partials, const int64_t *perm,
                                             int64_t m, int64_t n, const struct dt_cuda_launch *L)
{
    const dt_cuda_stream s = L->stream;
    const double mn = (double)m * (double)n;
    DT_LAUNCH(L, dt_work(4.0 * (mn + 2.0 * (double)n), mn), add_partials_in_order_kernel,
              dt_cuda_grid(L, n), L->block_threads, 0, s)
    (dst, partials, perm, m, n);
    return DT_LAUNCHED(L);
}

extern "C" int dt_cuda_bias_grad_atomic(float *dbias, const float *dy, int64_t B, int64_t out,
                                        const struct dt_cuda_launch *L)
{
    const dt_cuda_stream s = L->stream;
    cudaError_t e = dt_cuda_memset_async(L, dbias, 0, (size_t)out * sizeof(float), s);
    if (e != cudaSuccess) {
        (void)cudaGetLastError(); /* reported here, not again by the next launch */
        return (int)e;
    }
    const int64_t items = (B + BIAS_ROWS - 1) / BIAS_ROWS * out;
    const double n = (double)B * (double)out, o = (double)out;
    DT_LAUNCH(L, dt_work(4.0 * (n + 2.0 * o), n + (double)((B + BIAS_ROWS - 1) / BIAS_ROWS) * o),
              bias_grad_atomic_kernel, dt_cuda_grid(L, items), L->block_threads, 0, s)
    (dbias, dy, B, out);
    return DT_LAUNCHED(L);
}

extern "C" int dt_cuda_fixed_scan(struct dt_cuda_fixed_record *rec, const float *v, int64_t n,
                                  const struct dt_cuda_launch *L)
{
    const dt_cuda_stream s = L->stream;
    DT_LAUNCH(L, dt_work(0.0, 0.0), bias_fixed_init_kernel, 1, 1, 0, s)(NULL, rec, 0);
    DT_LAUNCH(L, dt_work(4.0 * (double)n, DT_W_OPS_SCAN * (double)n), bias_fixed_max_kernel,
              dt_cuda_grid(L, n), L->block_threads, 0, s)
    (rec, v, n);
    return DT_LAUNCHED(L);
}

extern "C" int dt_cuda_bias_grad_fixed(float *dbias, unsigned long long *acc,
                                       struct dt_cuda_fixed_record *rec, const float *dy, int64_t B,
                                       int64_t out, const struct dt_cuda_launch *L)
{
    const dt_cuda_stream s = L->stream;
    const unsigned threads = (unsigned)L->block_threads;
    const int64_t items = (B + FIXED_ROWS - 1) / FIXED_ROWS * out;
    const double n = (double)B * (double)out, o = (double)out;
    const double slices = (double)((B + FIXED_ROWS - 1) / FIXED_ROWS);
    /* init (counters, record), max |dy|, the int64 sums, one rounding */
    DT_LAUNCH(L, dt_work(8.0 * o, 0.0), bias_fixed_init_kernel, dt_cuda_grid(L, out), threads, 0, s)
    (acc, rec, out);
    DT_LAUNCH(L, dt_work(4.0 * n, DT_W_OPS_SCAN * n), bias_fixed_max_kernel,
              dt_cuda_grid(L, B * out), threads, 0, s)
    (rec, dy, B * out);
    DT_LAUNCH(L, dt_work(4.0 * n + 16.0 * o, DT_W_OPS_FIXED_TERM * n + slices * o),
              bias_fixed_sum_kernel, dt_cuda_grid(L, items), threads, 0, s)
    (acc, rec, dy, B, out);
    DT_LAUNCH(L, dt_work(12.0 * o, DT_W_OPS_FIXED_ROUND * o), bias_fixed_finish_kernel,
              dt_cuda_grid(L, out), threads, 0, s)
    (dbias, rec, acc, B, out);
    return DT_LAUNCHED(L);
}

extern "C" int dt_cuda_bias_grad_fixed_shards(float *dbias, struct dt_cuda_fixed_record *rec,
                                              struct dt_cuda_fixed_record *block_rec,
                                              unsigned int *count, const float *dy,
                                              const int64_t *row, int64_t shards, int64_t mult,
                                              int64_t out, const struct dt_cuda_launch *L)
{
    if (shards > DT_CUDA_SHARDS_MAX || out > BIAS_ONE_PASS_COLS) return (int)cudaErrorNotSupported;
    const struct shard_rows sr = shard_rows_of(row, shards);
    /* a block a shard reading its rows twice: max, then the int64 sums and a rounding a column */
    const double n = (double)(row[shards] * mult) * (double)out, parts = (double)(shards * out);
    DT_LAUNCH(L,
              dt_work(8.0 * n + 4.0 * parts,
                      (DT_W_OPS_SCAN + DT_W_OPS_FIXED_TERM) * n + DT_W_OPS_FIXED_ROUND * parts),
              bias_fixed_shards_kernel, (unsigned)shards, L->block_threads, 0, L->stream)
    (dbias, rec, block_rec, count, dy, sr, mult, out);
    return DT_LAUNCHED(L);
}

extern "C" int dt_cuda_wgrad_shards(float *dw, const float *x, const float *dy, const int64_t *row,
                                    int64_t shards, int64_t mult, int64_t in, int64_t out,
                                    const struct dt_cuda_launch *L)
{
    if (shards > DT_CUDA_SHARDS_MAX) return (int)cudaErrorNotSupported;
    const struct shard_rows sr = shard_rows_of(row, shards);
    /* a thread an output of each shard walking its rows in order (the ordered product's rate) */
    const double B = (double)(row[shards] * mult), n = (double)in * (double)out;
    DT_LAUNCH(
        L, dt_work_ordered(4.0 * (B * (double)(in + out) + (double)shards * n), DT_W_MAC * B * n),
        wgrad_shards_kernel, dt_cuda_grid(L, shards * in * out), L->block_threads, 0, L->stream)
    (dw, x, dy, sr, shards, mult, in, out);
    return DT_LAUNCHED(L);
}

/* ---- the ops (declared from their rows of nets/op_list.h in nets/cuda/cuda.h) ----------- */

/* Scratch slots (nets/cuda/cuda.h): chunk partials or fixed-point counters; the permutation
 * or the fixed-point record. */
#define SLOT_PARTIALS 0
#define SLOT_SMALL 1

/* cuBLAS takes int sizes and leading dimensions. */
static int as_int(int64_t v)
{
    DT_ASSERT_MSG(v >= 0 && v <= INT_MAX, "dense size beyond cuBLAS's int range");
    return (int)v;
}

/* The forced combination order (test hook), drawn as the CPU backend draws it with the
 * same salt, uploaded to device scratch. Synchronises: the pinned copy is reused. */
extern "C" const int64_t *dt_cuda_forced_perm(struct dt_backend *be, int64_t m, uint64_t salt)
{
    struct dt_cuda_ctx *c = dt_cuda(be);
    const size_t bytes = (size_t)m * sizeof(int64_t);
    int64_t *h = (int64_t *)dt_cuda_host_scratch(be, SLOT_SMALL, bytes);
    int64_t *d = (int64_t *)dt_cuda_scratch(be, SLOT_SMALL, bytes);
    dt_forced_permutation(h, m, c->forced_order, salt);
    DT_CUDA_CHECK(cudaMemcpyAsync(d, h, bytes, cudaMemcpyHostToDevice, (cudaStream_t)c->stream));
    dt_cuda_sync(be);
    return d;
}

/* math portable: ordered; fast -> cuBLAS TF32; strict -> cuBLAS pedantic FP32.
 * y (B,out) = x (B,in) . w (in,out), then y + bias in its own rounding (every level).
 * Column-major, y^T (out,B) = w^T (out,in) . x^T (in,B): the row-major arrays as they are. */
extern "C" enum dt_status dt_cuda_dense_forward(struct dt_backend *be, float *y, const float *x,
                                                const float *w, const float *bias, int64_t B,
                                                int64_t in, int64_t out,
                                                const struct dt_policy *pol)
{
    if (dt_math_exact(pol)) /* the CPU's formula (determinism/exact_product.h), its bits */
        return dt_cuda_matmul_exact(be, y, x, w, bias, B, in, out, 0, DT_XP_LEVELS_FORWARD, pol);
    if (dt_math_portable(pol)) {
        struct dt_cuda_gemm_args g = {.c = y,
                                      .a = x,
                                      .b = w,
                                      .M = B,
                                      .N = out,
                                      .K = in,
                                      .k_chunk = in,
                                      .batches = 1,
                                      .a_si = in,
                                      .a_sk = 1,
                                      .b_sk = out,
                                      .b_sj = 1};
        DT_FORWARD_IF_ERROR(
            dt_cuda_launched(be, dt_cuda_gemm_ordered(&g, &dt_cuda(be)->launch), "dense_forward"));
    } else {
        const float one = 1.0f, zero = 0.0f;
        DT_CUBLAS_CALL(be, dt_work_lib((double)B, (double)out, (double)in, 1.0, dt_math_tf32(pol)),
                       cublasSgemm((cublasHandle_t)dt_cuda_cublas_for(be, pol), CUBLAS_OP_N,
                                   CUBLAS_OP_N, as_int(out), as_int(B), as_int(in), &one, w,
                                   as_int(out), x, as_int(in), &zero, y, as_int(out)));
    }
    return dt_cuda_launched(be, dt_cuda_bias_add(y, bias, B, out, &dt_cuda(be)->launch),
                            "dense_forward bias");
}

/* math portable: dx[b,k] = sum over o ascending of dy[b,o] w[k,o] from +0 (w read
 * transposed in place; the CPU's bits, which it gets through an exact transpose).
 * fast / strict: cuBLAS, dx^T (in,B) = w (in,out) . dy^T (out,B). */
extern "C" enum dt_status dt_cuda_dense_backward_data(struct dt_backend *be, float *dx,
                                                      const float *dy, const float *w, int64_t B,
                                                      int64_t in, int64_t out,
                                                      const struct dt_policy *pol)
{
    if (dt_math_exact(pol)) /* w (in, out) is B^T stored (N, K) */
        return dt_cuda_matmul_exact(be, dx, dy, w, NULL, B, out, in, DT_XP_TB, DT_XP_LEVELS_FORWARD,
                                    pol);
    if (dt_math_portable(pol)) {
        struct dt_cuda_gemm_args g = {.c = dx,
                                      .a = dy,
                                      .b = w,
                                      .M = B,
                                      .N = in,
                                      .K = out,
                                      .k_chunk = out,
                                      .batches = 1,
                                      .a_si = out,
                                      .a_sk = 1,
                                      .b_sk = 1,
                                      .b_sj = out};
        return dt_cuda_launched(be, dt_cuda_gemm_ordered(&g, &dt_cuda(be)->launch),
                                "dense_backward_data");
    }
    const float one = 1.0f, zero = 0.0f;
    DT_CUBLAS_CALL(be, dt_work_lib((double)B, (double)in, (double)out, 1.0, dt_math_tf32(pol)),
                   cublasSgemm((cublasHandle_t)dt_cuda_cublas_for(be, pol), CUBLAS_OP_T,
                               CUBLAS_OP_N, as_int(in), as_int(B), as_int(out), &one, w,
                               as_int(out), dy, as_int(out), &zero, dx, as_int(in)));
    return DT_OK;
}

/* Chunk partials of backward-weight: p[c] (in,out) = sum over the rows of chunk c (chunk
 * rows each, the last may be short) of x[b,:]^T dy[b,:], m = ceil(B / chunk) of them.
 * portable: ordered (rows ascending from +0, the CPU's partials). fast / strict: cuBLAS,
 * p[c]^T (out,in) = dy_c^T (out,len) . x_c (len,in): full chunks in one strided batch,
 * a short last chunk on its own. */
static enum dt_status wgrad_partials(struct dt_backend *be, float *p, const float *x,
                                     const float *dy, int64_t B, int64_t in, int64_t out,
                                     int64_t chunk, const struct dt_policy *pol)
{
    const int64_t n = in * out;
    if (dt_math_portable(pol)) {
        struct dt_cuda_gemm_args g = {.c = p,
                                      .a = x,
                                      .b = dy,
                                      .M = in,
                                      .N = out,
                                      .K = B,
                                      .k_chunk = chunk,
                                      .batches = (B + chunk - 1) / chunk,
                                      .a_si = 1,
                                      .a_sk = in,
                                      .a_batch = chunk * in,
                                      .b_sk = out,
                                      .b_sj = 1,
                                      .b_batch = chunk * out,
                                      .c_batch = n};
        return dt_cuda_launched(be, dt_cuda_gemm_ordered(&g, &dt_cuda(be)->launch),
                                "dense_backward_weight");
    }
    cublasHandle_t h = (cublasHandle_t)dt_cuda_cublas_for(be, pol);
    const float one = 1.0f, zero = 0.0f;
    const int64_t full = B / chunk, rest = B - full * chunk;
    if (full > 0)
        DT_CUBLAS_CALL(
            be,
            dt_work_lib((double)out, (double)in, (double)chunk, (double)full, dt_math_tf32(pol)),
            cublasSgemmStridedBatched(
                h, CUBLAS_OP_N, CUBLAS_OP_T, as_int(out), as_int(in), as_int(chunk), &one, dy,
                as_int(out), (long long)(chunk * out), x, as_int(in), (long long)(chunk * in),
                &zero, p, as_int(out), (long long)n, as_int(full)));
    if (rest > 0)
        DT_CUBLAS_CALL(
            be, dt_work_lib((double)out, (double)in, (double)rest, 1.0, dt_math_tf32(pol)),
            cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_T, as_int(out), as_int(in), as_int(rest), &one,
                        dy + full * chunk * out, as_int(out), x + full * chunk * in, as_int(in),
                        &zero, p + full * n, as_int(out)));
    return DT_OK;
}

/* dw[k,o] = sum over the batch of x[b,k] dy[b,o]: chunk partials (math control), combined
 * per the `reduction` control (file comment). */
extern "C" enum dt_status dt_cuda_dense_backward_weight(struct dt_backend *be, float *dw,
                                                        const float *x, const float *dy, int64_t B,
                                                        int64_t in, int64_t out,
                                                        const struct dt_policy *pol)
{
    if (dt_math_exact(pol)) { /* x (B, in) is A^T stored (K, M); order-free: reduction moot */
        const enum dt_status st = dt_backend_xp_wgrad_rows(be, B);
        if (st != DT_OK) return st;
        return dt_cuda_matmul_exact(be, dw, x, dy, NULL, in, B, out, DT_XP_TA, DT_XP_LEVELS_WGRAD,
                                    pol);
    }
    struct dt_cuda_ctx *c = dt_cuda(be);
    const int64_t n = in * out;
    const bool fixed = dt_reduction_ordered(pol);
    if (dt_reduction_library(pol, c->forced_order) && !dt_math_portable(pol)) {
        /* the fastest path a user can choose, and pinned's: one cuBLAS product over the
         * whole batch, dw^T (out,in) = dy^T (out,B) . x (B,in). cuBLAS sums without atomics
         * here (CUBLAS_ATOMICS_NOT_ALLOWED, its workspace pinned: backend_cuda.c), so this op
         * is deterministic run to run on one device even at `fast` (docs/gpu.md); under
         * unordered the forced-order hook keeps the chunked path, where tests show the
         * control matters. */
        const float one = 1.0f, zero = 0.0f;
        DT_CUBLAS_CALL(be, dt_work_lib((double)out, (double)in, (double)B, 1.0, dt_math_tf32(pol)),
                       cublasSgemm((cublasHandle_t)dt_cuda_cublas_for(be, pol), CUBLAS_OP_N,
                                   CUBLAS_OP_T, as_int(out), as_int(in), as_int(B), &one, dy,
                                   as_int(out), x, as_int(in), &zero, dw, as_int(out)));
        return DT_OK;
    }
    const int64_t chunk = fixed ? DT_REDUCE_CHUNK : DT_UNORDERED_CHUNK;
    const int64_t m = (B + chunk - 1) / chunk;
    float *p = (float *)dt_cuda_scratch(be, SLOT_PARTIALS, (size_t)(m * n) * sizeof(float));
    DT_FORWARD_IF_ERROR(wgrad_partials(be, p, x, dy, B, in, out, chunk, pol));
    if (fixed)
        return dt_cuda_launched(be, dt_cuda_reduce_tree(dw, p, m, n, &dt_cuda(be)->launch),
                                "dense_backward_weight tree");
    if (c->forced_order) {
        const int64_t *perm = dt_cuda_forced_perm(be, m, DT_FORCED_CHUNKS);
        return dt_cuda_launched(
            be, dt_cuda_add_partials_in_order(dw, p, perm, m, n, &dt_cuda(be)->launch),
            "dense_backward_weight forced");
    }
    return dt_cuda_launched(be, dt_cuda_add_partials_atomic(dw, p, m, n, &dt_cuda(be)->launch),
                            "dense_backward_weight atomic");
}

/* atomics fixed_point: exact, order-free; the shift is computed on the device from the
 * device's max |dy| (no host round trip); its error record is read back at once, or at
 * the step's end when checks are deferred (status.c). atomics float: slice sums by atomicAdd;
 * forced order: rows in the drawn order. */
extern "C" int64_t dt_cuda_first_nonfinite(struct dt_backend *be, const float *p, int64_t n)
{
    if (n <= 0) return -1;
    struct dt_cuda_ctx *c = dt_cuda(be);
    struct dt_cuda_fixed_record *rec =
        (dt_cuda_fixed_record *)dt_cuda_scratch(be, SLOT_SMALL, sizeof *rec);
    DT_CUDA_CHECK(
        dt_cuda_fixed_scan(rec, p, n, &dt_cuda(be)->launch)); /* a launch failure aborts */
    struct dt_cuda_fixed_record *h =
        (dt_cuda_fixed_record *)dt_cuda_host_scratch(be, SLOT_SMALL, sizeof *h);
    DT_CUDA_CHECK(
        cudaMemcpyAsync(h, rec, sizeof *h, cudaMemcpyDeviceToHost, (cudaStream_t)c->stream));
    dt_cuda_sync(be);
    return h->first_bad == DT_CUDA_NO_INDEX ? -1 : (int64_t)h->first_bad;
}

extern "C" bool dt_cuda_first_nonfinite_many(struct dt_backend *be, const float *const *p,
                                             const int64_t *n, int count, int *which,
                                             int64_t *index)
{
    if (count <= 0) return false;
    struct dt_cuda_ctx *c = dt_cuda(be);
    const size_t bytes = (size_t)count * sizeof(struct dt_cuda_fixed_record);
    struct dt_cuda_fixed_record *rec =
        (dt_cuda_fixed_record *)dt_cuda_scratch(be, SLOT_SMALL, bytes);
    for (int i = 0; i < count; i++)
        if (n[i] > 0) DT_CUDA_CHECK(dt_cuda_fixed_scan(&rec[i], p[i], n[i], &dt_cuda(be)->launch));
    struct dt_cuda_fixed_record *h =
        (dt_cuda_fixed_record *)dt_cuda_host_scratch(be, SLOT_SMALL, bytes);
    DT_CUDA_CHECK(cudaMemcpyAsync(h, rec, bytes, cudaMemcpyDeviceToHost, (cudaStream_t)c->stream));
    dt_cuda_sync(be);
    for (int i = 0; i < count; i++)
        if (n[i] > 0 && h[i].first_bad != DT_CUDA_NO_INDEX) {
            *which = i;
            *index = (int64_t)h[i].first_bad;
            return true;
        }
    return false;
}

static enum dt_status bias_fixed_one_launch(struct dt_backend *be, float *dbias, const float *dy,
                                            const int64_t *row, int64_t count, int64_t mult,
                                            int64_t out);

extern "C" enum dt_status dt_cuda_bias_backward(struct dt_backend *be, float *dbias,
                                                const float *dy, int64_t B, int64_t out,
                                                const struct dt_policy *pol)
{
    struct dt_cuda_ctx *c = dt_cuda(be);
    if (!dt_atomics_exact(pol)) {
        if (c->forced_order) {
            const int64_t *perm = dt_cuda_forced_perm(be, B, DT_FORCED_ROWS);
            return dt_cuda_launched(
                be, dt_cuda_add_partials_in_order(dbias, dy, perm, B, out, &dt_cuda(be)->launch),
                "bias_backward forced");
        }
        return dt_cuda_launched(be,
                                dt_cuda_bias_grad_atomic(dbias, dy, B, out, &dt_cuda(be)->launch),
                                "bias_backward atomic");
    }
    const int64_t all[2] = {0, B}; /* one block when small: the same bits, one launch */
    const enum dt_status one = bias_fixed_one_launch(be, dbias, dy, all, 1, 1, out);
    if (one != DT_ERR_UNSUPPORTED) return one;
    unsigned long long *acc = (unsigned long long *)dt_cuda_scratch(
        be, SLOT_PARTIALS, (size_t)out * sizeof(unsigned long long));
    bool deferred = false;
    struct dt_cuda_fixed_record *rec =
        dt_cuda_check_record(be, DT_CUDA_CHECK_BIAS, "bias gradient", out, SLOT_SMALL, &deferred);
    DT_FORWARD_IF_ERROR(dt_cuda_launched(
        be, dt_cuda_bias_grad_fixed(dbias, acc, rec, dy, B, out, &dt_cuda(be)->launch),
        "bias_backward fixed point"));
    if (deferred) return DT_OK; /* read at the step's end (status.c) */
    return dt_cuda_check_now(be, rec, DT_CUDA_CHECK_BIAS, "bias gradient", out, SLOT_SMALL);
}

/* The fixed-point bias gradient of `count` row ranges (row[k] * mult to row[k + 1] * mult of
 * dy), partial k at dbias + k * out, in one launch (dense.cu, bias_fixed_shards_kernel: a
 * block per range, dt_fixed_sum_rows's bits) with its check record; DT_ERR_UNSUPPORTED
 * beyond the kernel's bounds (the caller takes the four-kernel path or a call per shard). */
static enum dt_status bias_fixed_one_launch(struct dt_backend *be, float *dbias, const float *dy,
                                            const int64_t *row, int64_t count, int64_t mult,
                                            int64_t out)
{
    struct dt_cuda_ctx *c = dt_cuda(be);
    const int64_t widest = dt_cuda_widest_shard(row, count, mult);
    if (!c->one_pass || !dt_cuda_bias_one_launch_fits(count, widest, out))
        return DT_ERR_UNSUPPORTED;
    if (!c->one_pass_count &&
        dt_cuda_capture_breaks(be, "the one-launch counter made inside the step"))
        return DT_ERR_UNSUPPORTED;                      /* the rerun makes it */
    if (!c->one_pass_count && !dt_cuda_recording(be)) { /* once per backend: zeroed, and zero
                                                            after every launch */
        DT_CUDA_CHECK(cudaMalloc((void **)&c->one_pass_count, sizeof *c->one_pass_count));
        DT_CUDA_CHECK(cudaMemset(c->one_pass_count, 0, sizeof *c->one_pass_count));
    }
    struct dt_cuda_fixed_record *block_rec = (struct dt_cuda_fixed_record *)dt_cuda_scratch(
        be, SLOT_PARTIALS, (size_t)count * sizeof(struct dt_cuda_fixed_record));
    bool deferred = false;
    struct dt_cuda_fixed_record *rec =
        dt_cuda_check_record(be, DT_CUDA_CHECK_BIAS, "bias gradient", out, SLOT_SMALL, &deferred);
    DT_FORWARD_IF_ERROR(
        dt_cuda_launched(be,
                         dt_cuda_bias_grad_fixed_shards(dbias, rec, block_rec, c->one_pass_count,
                                                        dy, row, count, mult, out, &c->launch),
                         "bias_backward one launch"));
    if (deferred) return DT_OK; /* read at the step's end (status.c) */
    return dt_cuda_check_now(be, rec, DT_CUDA_CHECK_BIAS, "bias gradient", out, SLOT_SMALL);
}

/* reduction: exact with shards set, atomics fixed_point: every shard's partial in one
 * launch, the bits of a call per shard; beyond the kernel's bounds DT_ERR_UNSUPPORTED:
 * nets/dispatch.c then calls the op per shard. */
extern "C" enum dt_status dt_cuda_bias_backward_shards(struct dt_backend *be, float *dbias,
                                                       const float *dy, int64_t B, int64_t out,
                                                       const struct dt_policy *pol)
{
    const struct dt_shards *sh = &be->shards;
    DT_ASSERT(sh->count > 0);
    if (!dt_atomics_exact(pol)) return DT_ERR_UNSUPPORTED;
    return bias_fixed_one_launch(be, dbias, dy, sh->row, sh->count, B / sh->row[sh->count], out);
}

/* reduction: exact with shards set, math: portable: every shard's weight-gradient partial
 * in one launch (dense.cu, wgrad_shards_kernel), the bits of a call per shard (the chunks
 * and the fixed tree). Other products (cuBLAS, the exact product), more shards than the
 * kernel takes, or the first light's paths: DT_ERR_UNSUPPORTED, a call per shard. */
extern "C" enum dt_status dt_cuda_dense_backward_weight_shards(struct dt_backend *be, float *dw,
                                                               const float *x, const float *dy,
                                                               int64_t B, int64_t in, int64_t out,
                                                               const struct dt_policy *pol)
{
    struct dt_cuda_ctx *c = dt_cuda(be);
    const struct dt_shards *sh = &be->shards;
    DT_ASSERT(sh->count > 0 && B % sh->row[sh->count] == 0);
    const int64_t widest = dt_cuda_widest_shard(sh->row, sh->count, B / sh->row[sh->count]);
    if (!c->one_pass || !dt_math_portable(pol) || dt_math_exact(pol) ||
        !dt_cuda_wgrad_one_launch_fits(sh->count, widest))
        return DT_ERR_UNSUPPORTED;
    return dt_cuda_launched(be,
                            dt_cuda_wgrad_shards(dw, x, dy, sh->row, sh->count,
                                                 B / sh->row[sh->count], in, out, &c->launch),
                            "dense_backward_weight shards");
}
