/* Kernels of the CUDA dense layer (host side: nets/cuda/dense.c): the ordered matrix
 * product of `math: portable`, the bias add, the combination of backward-weight chunk
 * partials under `reduction`, and the bias gradient under `atomics`. Every kernel loops
 * over its work items grid-stride (the tiled product over tiles), so no result depends on
 * the grid or block size except where a comment says the order is arrival order. */
#include "determinism/fixed_point.h"
#include "determinism/reduce.h"
#include "nets/cuda/dense_loss.h"
#include "nets/cuda/gemm_tile.h"
#include "nets/dense_loss_elem.h"
#include "nets/cuda/launch.cuh"

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
static __global__ void gemm_ordered_kernel(struct dt_cuda_gemm_args g)
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
static __global__ void bias_add_kernel(float *y, const float *bias, int64_t B, int64_t out)
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
static __global__ void reduce_tree_level_kernel(float *p, int64_t count, int64_t s, int64_t n)
{
    const int64_t blocks = (count + TREE_BLOCK - 1) / TREE_BLOCK;
    DT_GRID_STRIDE(i, blocks * n)
    dt_reduce_tree_block(p + i % n, count, s, TREE_BLOCK, i / n);
}

static __global__ void copy_kernel(float *dst, const float *src, int64_t n)
{
    DT_GRID_STRIDE(i, n) dst[i] = src[i];
}

/* reduction unordered: every partial added by float atomicAdd; partials of one element sit
 * in different blocks, so the order of the additions is the order they arrive in. */
static __global__ void add_partials_atomic_kernel(float *dst, const float *p, int64_t m, int64_t n)
{
    DT_GRID_STRIDE(i, m * n)
    atomicAdd(&dst[i % n], p[i]);
}

/* Forced order (test hook): one thread per element adds the partials in perm's order. */
static __global__ void add_partials_in_order_kernel(float *dst, const float *p, const int64_t *perm,
                                                    int64_t m, int64_t n)
{
    DT_GRID_STRIDE(e, n)
    dst[e] = dt_sum_in_order(p, perm, m, n, e);
}

/* atomics float: item (slice s, column o) sums rows [s*BIAS_ROWS, ...) in order, then
 * adds the sum by float atomicAdd: arrival order across slices. */
static __global__ void bias_grad_atomic_kernel(float *dbias, const float *dy, int64_t B,
                                               int64_t out)
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

static __global__ void bias_fixed_init_kernel(unsigned long long *acc,
                                              struct dt_cuda_fixed_record *rec, int64_t out)
{
    DT_GRID_STRIDE(o, out)
    acc[o] = 0;
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        dt_cuda_fixed_record_reset(rec);
    }
}

/* max |dy| as bit patterns (monotone for finite floats; max is order-free), and the first
 * non-finite input by atomicMin on its row-major index. */
static __global__ void bias_fixed_max_kernel(struct dt_cuda_fixed_record *rec, const float *dy,
                                             int64_t n)
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
static __global__ void bias_fixed_sum_kernel(unsigned long long *acc,
                                             struct dt_cuda_fixed_record *rec, const float *dy,
                                             int64_t B, int64_t out)
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
static __global__ void bias_fixed_finish_kernel(float *dbias, struct dt_cuda_fixed_record *rec,
                                                const unsigned long long *acc, int64_t B,
                                                int64_t out)
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

static __global__ void bias_fixed_shards_kernel(float *dbias, struct dt_cuda_fixed_record *rec,
                                                struct dt_cuda_fixed_record *block_rec,
                                                unsigned int *count, const float *dy,
                                                struct shard_rows sr, int64_t mult, int64_t out)
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
 * alone (dense.c's chunks and tree; the CPU's): each DT_REDUCE_CHUNK-row chunk summed from
 * +0 in row order with dt_dense_mac, the chunk partials through the fixed tree streamed
 * (determinism/reduce.h, dt_reduce_stream: no partials in memory, no second kernel).
 * Threads along j read dy's row contiguously and share x's element. */
static __global__ void wgrad_shards_kernel(float *dw, const float *x, const float *dy,
                                           struct shard_rows sr, int64_t S, int64_t mult,
                                           int64_t in, int64_t out)
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
    if (wide >= GEMM_WIDE_MIN_TILES) {
        gemm_ordered_wide_kernel<<<blocks_for_tiles(L, wide), DT_GEMM_THREADS, 0, s>>>(*g);
        return (int)cudaGetLastError();
    }
    const int64_t tiles =
        (g->M + GEMM_TILE - 1) / GEMM_TILE * ((g->N + GEMM_TILE - 1) / GEMM_TILE) * g->batches;
    gemm_ordered_kernel<<<blocks_for_tiles(L, tiles), dim3(GEMM_TILE, GEMM_TILE), 0, s>>>(*g);
    return (int)cudaGetLastError();
}

extern "C" int dt_cuda_bias_add(float *y, const float *bias, int64_t B, int64_t out,
                                const struct dt_cuda_launch *L)
{
    const dt_cuda_stream s = L->stream;
    bias_add_kernel<<<dt_cuda_grid(L, B * out), L->block_threads, 0, s>>>(y, bias, B, out);
    return (int)cudaGetLastError();
}

extern "C" int dt_cuda_reduce_tree(float *dst, float *partials, int64_t m, int64_t n,
                                   const struct dt_cuda_launch *L)
{
    const dt_cuda_stream s = L->stream;
    for (int64_t st = n, count = m; count > 1;
         st *= TREE_BLOCK, count = (count + TREE_BLOCK - 1) / TREE_BLOCK) {
        const int64_t blocks = (count + TREE_BLOCK - 1) / TREE_BLOCK;
        reduce_tree_level_kernel<<<dt_cuda_grid(L, blocks * n), L->block_threads, 0, s>>>(
            partials, count, st, n);
    }
    copy_kernel<<<dt_cuda_grid(L, n), L->block_threads, 0, s>>>(dst, partials, n);
    return (int)cudaGetLastError();
}

extern "C" int dt_cuda_add_partials_atomic(float *dst, const float *partials, int64_t m, int64_t n,
                                           const struct dt_cuda_launch *L)
{
    const dt_cuda_stream s = L->stream;
    cudaError_t e = cudaMemsetAsync(dst, 0, (size_t)n * sizeof(float), s);
    if (e != cudaSuccess) {
        (void)cudaGetLastError(); /* reported here, not again by the next launch */
        return (int)e;
    }
    add_partials_atomic_kernel<<<dt_cuda_grid(L, m * n), L->block_threads, 0, s>>>(dst, partials, m,
                                                                                   n);
    return (int)cudaGetLastError();
}

extern "C" int dt_cuda_add_partials_in_order(float *dst, const float *partials, const int64_t *perm,
                                             int64_t m, int64_t n, const struct dt_cuda_launch *L)
{
    const dt_cuda_stream s = L->stream;
    add_partials_in_order_kernel<<<dt_cuda_grid(L, n), L->block_threads, 0, s>>>(dst, partials,
                                                                                 perm, m, n);
    return (int)cudaGetLastError();
}

extern "C" int dt_cuda_bias_grad_atomic(float *dbias, const float *dy, int64_t B, int64_t out,
                                        const struct dt_cuda_launch *L)
{
    const dt_cuda_stream s = L->stream;
    cudaError_t e = cudaMemsetAsync(dbias, 0, (size_t)out * sizeof(float), s);
    if (e != cudaSuccess) {
        (void)cudaGetLastError(); /* reported here, not again by the next launch */
        return (int)e;
    }
    const int64_t items = (B + BIAS_ROWS - 1) / BIAS_ROWS * out;
    bias_grad_atomic_kernel<<<dt_cuda_grid(L, items), L->block_threads, 0, s>>>(dbias, dy, B, out);
    return (int)cudaGetLastError();
}

extern "C" int dt_cuda_fixed_scan(struct dt_cuda_fixed_record *rec, const float *v, int64_t n,
                                  const struct dt_cuda_launch *L)
{
    const dt_cuda_stream s = L->stream;
    bias_fixed_init_kernel<<<1, 1, 0, s>>>(NULL, rec, 0);
    bias_fixed_max_kernel<<<dt_cuda_grid(L, n), L->block_threads, 0, s>>>(rec, v, n);
    return (int)cudaGetLastError();
}

extern "C" int dt_cuda_bias_grad_fixed(float *dbias, unsigned long long *acc,
                                       struct dt_cuda_fixed_record *rec, const float *dy, int64_t B,
                                       int64_t out, const struct dt_cuda_launch *L)
{
    const dt_cuda_stream s = L->stream;
    const unsigned threads = (unsigned)L->block_threads;
    const int64_t items = (B + FIXED_ROWS - 1) / FIXED_ROWS * out;
    bias_fixed_init_kernel<<<dt_cuda_grid(L, out), threads, 0, s>>>(acc, rec, out);
    bias_fixed_max_kernel<<<dt_cuda_grid(L, B * out), threads, 0, s>>>(rec, dy, B * out);
    bias_fixed_sum_kernel<<<dt_cuda_grid(L, items), threads, 0, s>>>(acc, rec, dy, B, out);
    bias_fixed_finish_kernel<<<dt_cuda_grid(L, out), threads, 0, s>>>(dbias, rec, acc, B, out);
    return (int)cudaGetLastError();
}

extern "C" int dt_cuda_bias_grad_fixed_shards(float *dbias, struct dt_cuda_fixed_record *rec,
                                              struct dt_cuda_fixed_record *block_rec,
                                              unsigned int *count, const float *dy,
                                              const int64_t *row, int64_t shards, int64_t mult,
                                              int64_t out, const struct dt_cuda_launch *L)
{
    if (shards > DT_CUDA_SHARDS_MAX || out > BIAS_ONE_PASS_COLS) return (int)cudaErrorNotSupported;
    const struct shard_rows sr = shard_rows_of(row, shards);
    bias_fixed_shards_kernel<<<(unsigned)shards, L->block_threads, 0, L->stream>>>(
        dbias, rec, block_rec, count, dy, sr, mult, out);
    return (int)cudaGetLastError();
}

extern "C" int dt_cuda_wgrad_shards(float *dw, const float *x, const float *dy, const int64_t *row,
                                    int64_t shards, int64_t mult, int64_t in, int64_t out,
                                    const struct dt_cuda_launch *L)
{
    if (shards > DT_CUDA_SHARDS_MAX) return (int)cudaErrorNotSupported;
    const struct shard_rows sr = shard_rows_of(row, shards);
    wgrad_shards_kernel<<<dt_cuda_grid(L, shards * in * out), L->block_threads, 0, L->stream>>>(
        dw, x, dy, sr, shards, mult, in, out);
    return (int)cudaGetLastError();
}
