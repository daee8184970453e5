/* Kernels of the CUDA backend's transformer ops (host side: nets/cuda/gpt.c). Every thread
 * owns whole work items -- an element, a row, a (b, h, t) attention row, a chunk -- in a
 * grid-stride loop and computes each with the DT_HD functions of nets/gpt_elem.h and
 * determinism/dropout.h, the ones the CPU ops call (tests/test_gpt.c checks those against
 * the CPU ops; tests/test_parity.c's gpu table checks these kernels against the CPU): no
 * item depends on another, so no result depends on the grid or block size. The order-
 * dependent forms are the `fast` ones -- float atomicAdd into the embedding table and into
 * the clipping norm -- and their forced-order hooks. Compiled with --fmad=false; the
 * formulas also round each product on its own (dt_rn_mul). */
#include "determinism/dropout.h"
#include "determinism/fixed_point.h"
#include "nets/cuda/gpt_launch.h"
#include "nets/cuda/launch.cuh"
#include "nets/gpt_elem.h"

/* ---- embedding ------------------------------------------------------------------------- */

static __global__ void embed_tokens_kernel(int32_t *tokens, int32_t *targets, const float *x,
                                           int64_t B, int64_t T)
{
    DT_GRID_STRIDE(r, B * T)
    {
        const int64_t b = r / T, t = r - b * T;
        tokens[r] = dt_gpt_token(x[b * (T + 1) + t]);
        targets[r] = dt_gpt_token(x[b * (T + 1) + t + 1]);
    }
}

static __global__ void embed_kernel(float *h, const float *x, const float *wte, const float *wpe,
                                    int64_t T, int64_t D, int64_t n)
{
    DT_GRID_STRIDE(e, n)
    h[e] = dt_embed_elem(x, wte, wpe, T, D, e);
}

/* atomics float: one float atomicAdd per term, in arrival order (what a fast GPU scatter
 * does; tokens out of [0, V) -- impossible after dt_gpt_token -- are skipped). */
static __global__ void scatter_atomic_kernel(float *dwte, const float *dh, const int32_t *tokens,
                                             int64_t rows, int64_t V, int64_t D)
{
    DT_GRID_STRIDE(e, rows * D)
    {
        const int64_t r = e / D, i = e - r * D, tok = tokens[r];
        if (tok >= 0 && tok < V) atomicAdd(&dwte[tok * D + i], dh[e]);
    }
}

/* The forced-order hook: column i of every entry gets the rows in perm's order, one
 * thread per column (the CPU's forced path adds the same terms in the same order). */
static __global__ void scatter_in_order_kernel(float *dwte, const float *dh, const int32_t *tokens,
                                               const int64_t *perm, int64_t rows, int64_t V,
                                               int64_t D)
{
    DT_GRID_STRIDE(i, D)
    for (int64_t k = 0; k < rows; k++) {
        const int64_t r = perm[k], tok = tokens[r];
        if (tok >= 0 && tok < V) dwte[tok * D + i] += dh[r * D + i];
    }
}

static __global__ void fixed_zero_kernel(unsigned long long *acc, int64_t n)
{
    DT_GRID_STRIDE(e, n)
    acc[e] = 0;
}

/* atomics fixed_point: every term to int64 at the shift of (max |dh|, rows); integer
 * atomics add them exactly in any order (the shift bounds every sum below 2^62). */
static __global__ void scatter_fixed_kernel(unsigned long long *acc,
                                            struct dt_cuda_fixed_record *rec, const float *dh,
                                            const int32_t *tokens, int64_t rows, int64_t V,
                                            int64_t D)
{
    if (rec->first_bad != DT_CUDA_NO_INDEX) return;
    const int shift = dt_fixed_shift_for(dt_bits_float(rec->max_bits), rows);
    DT_GRID_STRIDE(e, rows * D)
    {
        const int64_t r = e / D, i = e - r * D, tok = tokens[r];
        int64_t q = 0;
        if (!dt_fixed_from_float(&q, dh[e], shift)) atomicExch(&rec->bad_term, 1u);
        if (tok >= 0 && tok < V) atomicAdd(&acc[tok * D + i], (unsigned long long)q);
    }
}

/* One rounding per entry; = or += into dwte; an entry beyond the float range is recorded. */
static __global__ void scatter_fixed_finish_kernel(float *dwte, struct dt_cuda_fixed_record *rec,
                                                   const unsigned long long *acc, int64_t rows,
                                                   int64_t n, bool accumulate)
{
    if (rec->first_bad != DT_CUDA_NO_INDEX) return;
    const int shift = dt_fixed_shift_for(dt_bits_float(rec->max_bits), rows);
    DT_GRID_STRIDE(e, n)
    {
        const float f = dt_fixed_to_float((int64_t)acc[e], shift);
        if ((dt_float_bits(f) & 0x7fffffffu) >= 0x7f800000u)
            atomicMin(&rec->overflow_col, (unsigned long long)e);
        dwte[e] = accumulate ? dwte[e] + f : f; /* the Inf too, as the bias gradient writes it */
    }
}

/* ---- LayerNorm, attention ---------------------------------------------------------------- */

/* LayerNorm: a warp per row (rows grid-stride over the grid's warps; blocks of
 * LN_BLOCK threads, whole warps), lane j the row's elements j, j + 32, ...; each sum's lane
 * partials combined by the xor butterfly, whose value every lane gets: dt_lanes_combine's,
 * the CPU's bits. */
#define LN_BLOCK 128

static __device__ float warp_combine(float v)
{
    for (int off = DT_GPT_LN_LANES / 2; off >= 1; off /= 2)
        v = v + __shfl_xor_sync(0xffffffffu, v, off);
    return v;
}

static __global__ void layernorm_forward_kernel(float *y, float *mean, float *rstd, const float *x,
                                                const float *gamma, const float *beta, int64_t rows,
                                                int64_t D)
{
    const int lane = threadIdx.x % DT_GPT_LN_LANES;
    const int64_t warps = (int64_t)gridDim.x * (blockDim.x / DT_GPT_LN_LANES);
    for (int64_t r =
             blockIdx.x * (int64_t)(blockDim.x / DT_GPT_LN_LANES) + threadIdx.x / DT_GPT_LN_LANES;
         r < rows; r += warps) {
        const float *xr = x + r * D;
        const float m = dt_ln_mean(warp_combine(dt_ln_lane_sum(xr, D, lane)), D);
        const float rs = dt_ln_rstd(warp_combine(dt_ln_lane_sqdev(xr, m, D, lane)), D);
        dt_ln_lane_out(y + r * D, xr, gamma, beta, m, rs, D, lane);
        if (lane == 0) {
            mean[r] = m;
            rstd[r] = rs;
        }
    }
}

static __global__ void layernorm_backward_kernel(float *dx, float *gx, const float *dy,
                                                 const float *x, const float *mean,
                                                 const float *rstd, const float *gamma,
                                                 int64_t rows, int64_t D, bool accumulate)
{
    const int lane = threadIdx.x % DT_GPT_LN_LANES;
    const int64_t warps = (int64_t)gridDim.x * (blockDim.x / DT_GPT_LN_LANES);
    for (int64_t r =
             blockIdx.x * (int64_t)(blockDim.x / DT_GPT_LN_LANES) + threadIdx.x / DT_GPT_LN_LANES;
         r < rows; r += warps) {
        float s1, s2;
        dt_ln_lane_grad_sums(&s1, &s2, dy + r * D, x + r * D, mean[r], rstd[r], gamma, D, lane);
        const float m1 = dt_rn_div(warp_combine(s1), (float)D);
        const float m2 = dt_rn_div(warp_combine(s2), (float)D);
        dt_ln_lane_grad_out(dx + r * D, gx + r * D, dy + r * D, x + r * D, mean[r], rstd[r], gamma,
                            m1, m2, D, lane, accumulate);
    }
}

/* Blocks of LN_BLOCK threads for a warp per row, at most L's cap. */
static unsigned ln_grid(const struct dt_cuda_launch *L, int64_t rows)
{
    const int64_t per_block = LN_BLOCK / DT_GPT_LN_LANES,
                  cap = L->max_blocks > 0 ? L->max_blocks : 65535;
    int64_t blocks = (rows + per_block - 1) / per_block;
    if (blocks > cap) blocks = cap;
    return (unsigned)(blocks > 0 ? blocks : 1);
}

/* items: (b, h, t) rows, i = (b H + h) T + t. Its block is the launch knob (up to 1024
 * threads, dt_cuda_set_launch); unbounded, the compiler gave it 72 registers, and a
 * 1024-thread block of those does not fit the 65536 of a multiprocessor: the H200 refused
 * the launch (results/nvidia-h200, gpt.gpu_gradients_equal_cpu_and_grid_free). The bound
 * holds it to 64. */
static __global__ void __launch_bounds__(1024)
    attention_forward_kernel(float *out, float *att, const float *qkv, int64_t B, int64_t T,
                             int64_t H, int64_t D, float scale, bool portable, bool exact)
{
    const int64_t hd = D / H;
    DT_GRID_STRIDE(i, B * H * T)
    {
        const int64_t t = i % T, h = (i / T) % H, b = i / (T * H);
        dt_attn_row(out + (b * T + t) * D + h * hd, att + i * T, qkv, b, t, h, T, D, hd, scale,
                    portable, exact);
    }
}

/* The same rows with the key tiles staged in shared memory (FlashAttention's forward
 * schedule): a block of DT_GPT_ATTN_TILE threads owns one query tile of one (b, h), a thread
 * one query row; for key tile 0, 1, ... up to the block's own, the block loads the tile's keys
 * and values (n rows of hd each) into ks and vs, then each thread whose row reaches the tile
 * runs dt_attn_tile on it -- the calls dt_attn_row makes, in the same order, on the same
 * values: the CPU's bits (tests/test_gpt.c emulates this schedule on the host). Items: (bh,
 * query tile), grid-stride over blocks. */
static __global__ void attention_forward_tiled_kernel(float *out, float *att, const float *qkv,
                                                      int64_t B, int64_t T, int64_t H, int64_t D,
                                                      float scale, bool portable, bool acc)
{
    /* acc: each thread's query row and output sums in shared memory, [hd][DT_GPT_ATTN_TILE]
     * (a bank a thread), not read from and written back to device memory at every key tile
     * and every key (32.5 ms a step at portable for the GPU-scale GPT on the H200, against
     * 4.7 ms at fast); without room, in place as before. The same operations either way. */
    extern __shared__ float tile_smem[];
    const int64_t hd = D / H, nq = (T + DT_GPT_ATTN_TILE - 1) / DT_GPT_ATTN_TILE;
    float *ks = tile_smem, *vs = tile_smem + DT_GPT_ATTN_TILE * hd;
    const int64_t st = acc ? DT_GPT_ATTN_TILE : 1;
    for (int64_t item = blockIdx.x; item < B * H * nq; item += gridDim.x) {
        const int64_t qt = item % nq, bh = item / nq, h = bh % H, b = bh / H;
        const int64_t t = qt * DT_GPT_ATTN_TILE + threadIdx.x;
        const bool row = threadIdx.x < DT_GPT_ATTN_TILE && t < T;
        const float *q = qkv + (b * T + (row ? t : 0)) * 3 * D + h * hd;
        const float *k0 = qkv + b * T * 3 * D + D + h * hd;
        float *o = out + (b * T + (row ? t : 0)) * D + h * hd,
              *p = att + (bh * T + (row ? t : 0)) * T;
        float *qs = tile_smem + 2 * DT_GPT_ATTN_TILE * hd + threadIdx.x;
        float *a = acc ? tile_smem + 3 * DT_GPT_ATTN_TILE * hd + threadIdx.x : o;
        const float *qq = acc ? qs : q;
        float m = -INFINITY, l = 0.0f;
        if (row)
            for (int64_t j = 0; j < hd; j++) {
                a[j * st] = 0.0f;
                if (acc) qs[j * st] = q[j];
            }
        for (int64_t s0 = 0; s0 <= qt * DT_GPT_ATTN_TILE; s0 += DT_GPT_ATTN_TILE) {
            const int64_t rows = T - s0 < DT_GPT_ATTN_TILE ? T - s0 : DT_GPT_ATTN_TILE;
            for (int64_t e = threadIdx.x; e < rows * hd; e += blockDim.x) {
                const int64_t r = e / hd, j = e - r * hd;
                ks[e] = k0[(s0 + r) * 3 * D + j];
                vs[e] = k0[(s0 + r) * 3 * D + D + j];
            }
            __syncthreads();
            if (row && t >= s0) {
                const int64_t n = t + 1 - s0 < DT_GPT_ATTN_TILE ? t + 1 - s0 : DT_GPT_ATTN_TILE;
                dt_attn_tile_at(a, st, &m, &l, p + s0, qq, st, ks, hd, vs, hd, n, hd, scale,
                                portable);
            }
            __syncthreads();
        }
        if (row) dt_attn_row_finish_at(o, a, st, p, m, l, t, T, hd, portable);
    }
}

static __global__ void attention_dscores_kernel(float *ds, const float *att, const float *dout,
                                                const float *qkv, int64_t B, int64_t T, int64_t H,
                                                int64_t D, float scale, bool exact)
{
    const int64_t hd = D / H;
    DT_GRID_STRIDE(i, B * H * T)
    {
        const int64_t t = i % T, h = (i / T) % H, b = i / (T * H);
        dt_attn_row_dscores(ds + i * T, att + i * T, dout, qkv, b, t, h, T, D, hd, scale, exact);
    }
}

/* items: every element of dqkv (B, T, 3, D) */
static __global__ void attention_grad_kernel(float *dqkv, const float *ds, const float *att,
                                             const float *dout, const float *qkv, int64_t B,
                                             int64_t T, int64_t H, int64_t D, bool exact)
{
    const int64_t hd = D / H;
    DT_GRID_STRIDE(k, B * T * 3 * D)
    {
        const int64_t e = k % D, which = (k / D) % 3, u = (k / (3 * D)) % T, b = k / (3 * D * T);
        dqkv[k] = dt_attn_grad_elem(ds, att, dout, qkv, b, u, e / hd, e % hd, (int)which, T, D, hd,
                                    exact);
    }
}

/* The library path's per-row steps (math fast and strict): the causal softmax of the
 * scores cuBLAS left in att, and dS from the dP it left in ds. */
static __global__ void attention_softmax_kernel(float *att, int64_t rows, int64_t T, bool portable)
{
    DT_GRID_STRIDE(i, rows)
    dt_attn_softmax_row(att + i * T, i % T, T, portable);
}

static __global__ void attention_dscores_finish_kernel(float *ds, const float *att, int64_t rows,
                                                       int64_t T, float scale)
{
    DT_GRID_STRIDE(i, rows)
    dt_attn_dscores_finish(ds + i * T, att + i * T, i % T, T, scale, false);
}

/* ---- elementwise --------------------------------------------------------------------------- */

static __global__ void gelu_kernel(float *y, const float *dy, const float *x, int64_t n,
                                   bool backward, bool own_tanh)
{
    DT_GRID_STRIDE(i, n)
    y[i] = backward ? dt_gelu_grad(x[i], dy[i], own_tanh) : dt_gelu(x[i], own_tanh);
}

static __global__ void add_kernel(float *y, const float *x, int64_t n)
{
    DT_GRID_STRIDE(i, n)
    y[i] = y[i] + x[i];
}

/* ---- dropout --------------------------------------------------------------------------------- */

/* The lane modes (lfsr forwards and backwards, stored's forward, which keeps the bits): a
 * thread a row, as the CPU, but the rows staged through shared memory a tile of
 * DROP_TILE_COLS columns at a time, so that a warp's loads and stores are whole rows'
 * neighbouring words instead of one word of each of 32 rows (3.9 ms and 6.9 ms a step for the
 * GPU-scale GPT's sites, row after row, on the H200: results/nvidia-h200). Each thread walks
 * its row's lane over the tile with the row functions of determinism/dropout.h: tiles start
 * at even columns, so the walk pairs the columns as the whole-row walk does, and backwards
 * the tiles go last to first -- the same lane steps in the same order, the CPU's bits
 * (tests/test_gpt.c, dropout_lane_tiles_match_rows, runs this schedule on the host). Blocks
 * of DROP_TILE_ROWS rows, grid-stride. */
#define DROP_TILE_ROWS 64
#define DROP_TILE_COLS DT_DROPOUT_TILE_COLS
static __global__ void __launch_bounds__(DROP_TILE_ROWS)
    dropout_lane_tiled_kernel(float *y, const float *x, uint8_t *keep, struct dt_xoro *lanes,
                              int64_t rows, int64_t W, struct dt_dropout_site s)
{
    __shared__ float v[DROP_TILE_ROWS][DROP_TILE_COLS + 1]; /* + 1: a row per bank */
    __shared__ uint8_t kb[DROP_TILE_ROWS][DROP_TILE_COLS];
    const int t = (int)threadIdx.x;
    const int64_t tiles = (W + DROP_TILE_COLS - 1) / DROP_TILE_COLS;
    const bool backward = s.mode == DT_DROPOUT_LFSR_BACKWARD;
    const bool write_keep = s.mode == DT_DROPOUT_KEEP;
    for (int64_t r0 = (int64_t)blockIdx.x * DROP_TILE_ROWS; r0 < rows;
         r0 += (int64_t)gridDim.x * DROP_TILE_ROWS) {
        const int nr = (int)(rows - r0 < DROP_TILE_ROWS ? rows - r0 : DROP_TILE_ROWS);
        struct dt_xoro lane = {0, 0};
        if (t < nr) lane = lanes[r0 + t];
        for (int64_t j = 0; j < tiles; j++) {
            const int64_t c0 = (backward ? tiles - 1 - j : j) * DROP_TILE_COLS;
            const int tw = (int)(W - c0 < DROP_TILE_COLS ? W - c0 : DROP_TILE_COLS);
            for (int e = t; e < nr * tw; e += DROP_TILE_ROWS) {
                const int rr = e / tw, cc = e - rr * tw;
                v[rr][cc] = x[(r0 + rr) * W + c0 + cc];
            }
            __syncthreads();
            if (t < nr) {
                if (backward) dt_dropout_lane_backward(v[t], v[t], tw, &lane, s.threshold, s.scale);
                else
                    dt_dropout_lane_forward(v[t], v[t], write_keep ? kb[t] : NULL, tw, &lane,
                                            s.threshold, s.scale);
            }
            __syncthreads();
            for (int e = t; e < nr * tw; e += DROP_TILE_ROWS) {
                const int rr = e / tw, cc = e - rr * tw;
                const int64_t at = (r0 + rr) * W + c0 + cc;
                y[at] = v[rr][cc];
                if (write_keep) keep[at] = kb[rr][cc];
            }
            __syncthreads();
        }
        if (t < nr) lanes[r0 + t] = lane;
    }
}

/* stored's backward: the kept bytes, element by element. */
static __global__ void dropout_stored_kernel(float *y, const float *x, const uint8_t *keep,
                                             int64_t n, float scale)
{
    DT_GRID_STRIDE(i, n)
    y[i] = dt_dropout_apply(x[i], keep[i] != 0, scale);
}

/* philox: a thread a Philox block of the whole (rows, W) site (dt_dropout_philox_block),
 * not a thread a row: the rows' elements are one run of counters, so neighbouring threads
 * read and write neighbouring 16 bytes. Items: the site's blocks, q0 + j. */
static __global__ void dropout_philox_kernel(float *y, const float *x, int64_t e0, int64_t n,
                                             uint64_t q0, uint64_t blocks, struct dt_dropout_site s)
{
    DT_GRID_STRIDE(j, (int64_t)blocks)
    dt_dropout_philox_block(y, x, e0, n, q0 + (uint64_t)j, &s.stream, s.threshold, s.scale);
}

static __global__ void dropout_seed_kernel(struct dt_xoro *lanes, int64_t rows, int64_t row0,
                                           uint64_t seed, uint32_t step, uint32_t member)
{
    DT_GRID_STRIDE(r, rows)
    lanes[r] = dt_dropout_lane_seed(seed, step, member, (uint64_t)(row0 + r));
}

/* ---- launchers ------------------------------------------------------------------------------- */

#define THREADS L->block_threads
#define LAUNCHED return (int)cudaGetLastError()

extern "C" int dt_cuda_embedding_forward_launch(float *h, int32_t *tokens, int32_t *targets,
                                                const float *x, const float *wte, const float *wpe,
                                                int64_t B, int64_t T, int64_t D,
                                                const struct dt_cuda_launch *L)
{
    const dt_cuda_stream s = L->stream;
    embed_tokens_kernel<<<dt_cuda_grid(L, B * T), THREADS, 0, s>>>(tokens, targets, x, B, T);
    embed_kernel<<<dt_cuda_grid(L, B * T * D), THREADS, 0, s>>>(h, x, wte, wpe, T, D, B * T * D);
    LAUNCHED;
}

extern "C" int dt_cuda_embedding_scatter_atomic(float *dwte, const float *dh, const int32_t *tokens,
                                                int64_t rows, int64_t V, int64_t D,
                                                const struct dt_cuda_launch *L)
{
    const dt_cuda_stream s = L->stream;
    scatter_atomic_kernel<<<dt_cuda_grid(L, rows * D), THREADS, 0, s>>>(dwte, dh, tokens, rows, V,
                                                                        D);
    LAUNCHED;
}

extern "C" int dt_cuda_embedding_scatter_in_order(float *dwte, const float *dh,
                                                  const int32_t *tokens, const int64_t *perm,
                                                  int64_t rows, int64_t V, int64_t D,
                                                  const struct dt_cuda_launch *L)
{
    const dt_cuda_stream s = L->stream;
    scatter_in_order_kernel<<<dt_cuda_grid(L, D), THREADS, 0, s>>>(dwte, dh, tokens, perm, rows, V,
                                                                   D);
    LAUNCHED;
}

extern "C" int dt_cuda_embedding_scatter_fixed(float *dwte, unsigned long long *acc,
                                               struct dt_cuda_fixed_record *rec, const float *dh,
                                               const int32_t *tokens, int64_t rows, int64_t V,
                                               int64_t D, bool accumulate,
                                               const struct dt_cuda_launch *L)
{
    const dt_cuda_stream s = L->stream;
    const int rc = dt_cuda_fixed_scan(rec, dh, rows * D, L);
    if (rc != 0) return rc;
    fixed_zero_kernel<<<dt_cuda_grid(L, V * D), THREADS, 0, s>>>(acc, V * D);
    scatter_fixed_kernel<<<dt_cuda_grid(L, rows * D), THREADS, 0, s>>>(acc, rec, dh, tokens, rows,
                                                                       V, D);
    scatter_fixed_finish_kernel<<<dt_cuda_grid(L, V * D), THREADS, 0, s>>>(dwte, rec, acc, rows,
                                                                           V * D, accumulate);
    LAUNCHED;
}

extern "C" int dt_cuda_layernorm_forward_launch(float *y, float *mean, float *rstd, const float *x,
                                                const float *gamma, const float *beta, int64_t rows,
                                                int64_t D, const struct dt_cuda_launch *L)
{
    const dt_cuda_stream s = L->stream;
    layernorm_forward_kernel<<<ln_grid(L, rows), LN_BLOCK, 0, s>>>(y, mean, rstd, x, gamma, beta,
                                                                   rows, D);
    LAUNCHED;
}

extern "C" int dt_cuda_layernorm_backward_launch(float *dx, float *gx, const float *dy,
                                                 const float *x, const float *mean,
                                                 const float *rstd, const float *gamma,
                                                 int64_t rows, int64_t D, bool accumulate,
                                                 const struct dt_cuda_launch *L)
{
    const dt_cuda_stream s = L->stream;
    layernorm_backward_kernel<<<ln_grid(L, rows), LN_BLOCK, 0, s>>>(dx, gx, dy, x, mean, rstd,
                                                                    gamma, rows, D, accumulate);
    LAUNCHED;
}

/* The tiled attention kernels' launch: shared memory for two tiles of DT_GPT_ATTN_TILE rows
 * of hd floats, and a block per (b, h, tile), at most 65535 * 16 (they walk the rest). */
static size_t tile_smem_bytes(int64_t hd)
{
    return 2 * (size_t)DT_GPT_ATTN_TILE * (size_t)hd * sizeof(float);
}

static unsigned tile_blocks(int64_t B, int64_t T, int64_t H)
{
    const int64_t items = B * H * ((T + DT_GPT_ATTN_TILE - 1) / DT_GPT_ATTN_TILE);
    return (unsigned)(items < 65535 * 16 ? items : 65535 * 16);
}

extern "C" int dt_cuda_attention_forward_launch(float *out, float *att, const float *qkv, int64_t B,
                                                int64_t T, int64_t H, int64_t D, bool portable,
                                                bool exact, const struct dt_cuda_launch *L)
{
    const dt_cuda_stream s = L->stream;
    const int64_t hd = D / H;
    const size_t smem = tile_smem_bytes(hd);
    if (!exact && smem <= DT_CUDA_ATTN_SMEM_MAX) {
        const bool acc = 2 * smem <= DT_CUDA_ATTN_SMEM_MAX; /* q and the sums in shared memory */
        attention_forward_tiled_kernel<<<tile_blocks(B, T, H), DT_GPT_ATTN_TILE,
                                         acc ? 2 * smem : smem, s>>>(
            out, att, qkv, B, T, H, D, dt_gpt_attn_scale(hd), portable, acc);
        LAUNCHED;
    }
    attention_forward_kernel<<<dt_cuda_grid(L, B * H * T), THREADS, 0, s>>>(
        out, att, qkv, B, T, H, D, dt_gpt_attn_scale(D / H), portable, exact);
    LAUNCHED;
}

/* The backward's sums with the rows staged in shared memory, outside math: exact: dK and dV
 * per key tile (a block, a thread per key row u) over the query tiles from its own in
 * order, each thread adding the terms t = u, u + 1, ... (dt_attn_grad_term) into its rows
 * of dqkv; dQ per query tile over the key tiles up to its own, terms s = 0 .. u. The terms
 * and their order are dt_attn_grad_elem's: the CPU's bits, no atomics (tests/test_gpt.c
 * emulates both schedules). */
/* acc: each thread's dK, dV (dQ) rows accumulate in shared memory, [hd][DT_GPT_ATTN_TILE]
 * (a thread a column: element j of 32 threads' rows in 32 banks), and go to dqkv once at the
 * end; without room, in dqkv itself, as before. The same additions in the same order either
 * way. In dqkv, a thread's 2 hd words a term were read and written back in device memory,
 * its row 3 D words from its neighbours' -- 311 ms a step for the GPU-scale GPT's attention
 * backward at portable on the H200 (results/nvidia-h200), against 4.7 ms at fast. */
static __global__ void attention_dkdv_tiled_kernel(float *dqkv, const float *ds, const float *att,
                                                   const float *dout, const float *qkv, int64_t B,
                                                   int64_t T, int64_t H, int64_t D, bool acc)
{
    extern __shared__ float tile_smem[];
    const int64_t hd = D / H, nt = (T + DT_GPT_ATTN_TILE - 1) / DT_GPT_ATTN_TILE;
    float *qs = tile_smem, *os = tile_smem + DT_GPT_ATTN_TILE * hd;
    const int64_t st = acc ? DT_GPT_ATTN_TILE : 1;
    for (int64_t item = blockIdx.x; item < B * H * nt; item += gridDim.x) {
        const int64_t kt = item % nt, bh = item / nt, h = bh % H, b = bh / H;
        const int64_t u = kt * DT_GPT_ATTN_TILE + threadIdx.x;
        const bool row = threadIdx.x < DT_GPT_ATTN_TILE && u < T;
        float *dk = dqkv + (b * T + (row ? u : 0)) * 3 * D + D + h * hd, *dv = dk + D;
        float *ak = acc ? tile_smem + 2 * DT_GPT_ATTN_TILE * hd + threadIdx.x : dk;
        float *av = acc ? tile_smem + 3 * DT_GPT_ATTN_TILE * hd + threadIdx.x : dv;
        const float *dsb = ds + bh * T * T, *pb = att + bh * T * T;
        if (row)
            for (int64_t j = 0; j < hd; j++) ak[j * st] = av[j * st] = 0.0f;
        for (int64_t t0 = kt * DT_GPT_ATTN_TILE; t0 < T; t0 += DT_GPT_ATTN_TILE) {
            const int64_t rows = T - t0 < DT_GPT_ATTN_TILE ? T - t0 : DT_GPT_ATTN_TILE;
            for (int64_t e = threadIdx.x; e < rows * hd; e += blockDim.x) {
                const int64_t r = e / hd, j = e - r * hd;
                qs[e] = qkv[(b * T + t0 + r) * 3 * D + h * hd + j];
                os[e] = dout[(b * T + t0 + r) * D + h * hd + j];
            }
            __syncthreads();
            if (row)
                for (int64_t r = 0; r < rows; r++) {
                    const int64_t t = t0 + r;
                    if (t < u) continue;
                    dt_attn_grad_term_at(ak, st, dsb[t * T + u], qs + r * hd, hd);
                    dt_attn_grad_term_at(av, st, pb[t * T + u], os + r * hd, hd);
                }
            __syncthreads();
        }
        if (row && acc)
            for (int64_t j = 0; j < hd; j++) dk[j] = ak[j * st], dv[j] = av[j * st];
    }
}

static __global__ void attention_dq_tiled_kernel(float *dqkv, const float *ds, const float *qkv,
                                                 int64_t B, int64_t T, int64_t H, int64_t D,
                                                 bool acc)
{
    extern __shared__ float tile_smem[];
    const int64_t hd = D / H, nt = (T + DT_GPT_ATTN_TILE - 1) / DT_GPT_ATTN_TILE;
    float *ks = tile_smem;
    const int64_t st = acc ? DT_GPT_ATTN_TILE : 1;
    for (int64_t item = blockIdx.x; item < B * H * nt; item += gridDim.x) {
        const int64_t qt = item % nt, bh = item / nt, h = bh % H, b = bh / H;
        const int64_t u = qt * DT_GPT_ATTN_TILE + threadIdx.x;
        const bool row = threadIdx.x < DT_GPT_ATTN_TILE && u < T;
        float *dq = dqkv + (b * T + (row ? u : 0)) * 3 * D + h * hd;
        float *aq = acc ? tile_smem + DT_GPT_ATTN_TILE * hd + threadIdx.x : dq;
        const float *dsr = ds + (bh * T + (row ? u : 0)) * T;
        if (row)
            for (int64_t j = 0; j < hd; j++) aq[j * st] = 0.0f;
        for (int64_t s0 = 0; s0 <= qt * DT_GPT_ATTN_TILE; s0 += DT_GPT_ATTN_TILE) {
            const int64_t rows = T - s0 < DT_GPT_ATTN_TILE ? T - s0 : DT_GPT_ATTN_TILE;
            for (int64_t e = threadIdx.x; e < rows * hd; e += blockDim.x) {
                const int64_t r = e / hd, j = e - r * hd;
                ks[e] = qkv[(b * T + s0 + r) * 3 * D + D + h * hd + j];
            }
            __syncthreads();
            if (row)
                for (int64_t r = 0; r < rows && s0 + r <= u; r++)
                    dt_attn_grad_term_at(aq, st, dsr[s0 + r], ks + r * hd, hd);
            __syncthreads();
        }
        if (row && acc)
            for (int64_t j = 0; j < hd; j++) dq[j] = aq[j * st];
    }
}

extern "C" int dt_cuda_attention_backward_launch(float *dqkv, float *ds, const float *dout,
                                                 const float *att, const float *qkv, int64_t B,
                                                 int64_t T, int64_t H, int64_t D, bool exact,
                                                 const struct dt_cuda_launch *L)
{
    const dt_cuda_stream s = L->stream;
    attention_dscores_kernel<<<dt_cuda_grid(L, B * H * T), THREADS, 0, s>>>(
        ds, att, dout, qkv, B, T, H, D, dt_gpt_attn_scale(D / H), exact);
    const size_t smem = tile_smem_bytes(D / H);
    if (!exact && smem <= DT_CUDA_ATTN_SMEM_MAX) {
        const unsigned blocks = tile_blocks(B, T, H);
        const bool acc = 2 * smem <= DT_CUDA_ATTN_SMEM_MAX; /* the rows' sums in shared memory */
        attention_dkdv_tiled_kernel<<<blocks, DT_GPT_ATTN_TILE, acc ? 2 * smem : smem, s>>>(
            dqkv, ds, att, dout, qkv, B, T, H, D, acc);
        attention_dq_tiled_kernel<<<blocks, DT_GPT_ATTN_TILE, acc ? smem : smem / 2, s>>>(
            dqkv, ds, qkv, B, T, H, D, acc);
        LAUNCHED;
    }
    attention_grad_kernel<<<dt_cuda_grid(L, B * T * 3 * D), THREADS, 0, s>>>(
        dqkv, ds, att, dout, qkv, B, T, H, D, exact);
    LAUNCHED;
}

extern "C" int dt_cuda_attention_softmax_launch(float *att, int64_t rows, int64_t T, bool portable,
                                                const struct dt_cuda_launch *L)
{
    const dt_cuda_stream s = L->stream;
    attention_softmax_kernel<<<dt_cuda_grid(L, rows), THREADS, 0, s>>>(att, rows, T, portable);
    LAUNCHED;
}

extern "C" int dt_cuda_attention_dscores_finish_launch(float *ds, const float *att, int64_t rows,
                                                       int64_t T, float scale,
                                                       const struct dt_cuda_launch *L)
{
    const dt_cuda_stream s = L->stream;
    attention_dscores_finish_kernel<<<dt_cuda_grid(L, rows), THREADS, 0, s>>>(ds, att, rows, T,
                                                                              scale);
    LAUNCHED;
}

extern "C" int dt_cuda_gelu_launch(float *y, const float *dy, const float *x, int64_t n,
                                   bool backward, bool own_tanh, const struct dt_cuda_launch *L)
{
    const dt_cuda_stream s = L->stream;
    gelu_kernel<<<dt_cuda_grid(L, n), THREADS, 0, s>>>(y, dy, x, n, backward, own_tanh);
    LAUNCHED;
}

extern "C" int dt_cuda_add_launch(float *y, const float *x, int64_t n,
                                  const struct dt_cuda_launch *L)
{
    const dt_cuda_stream s = L->stream;
    add_kernel<<<dt_cuda_grid(L, n), THREADS, 0, s>>>(y, x, n);
    LAUNCHED;
}

extern "C" int dt_cuda_dropout_launch(float *y, const float *x, uint8_t *keep,
                                      struct dt_xoro *lanes, int64_t rows, int64_t width,
                                      const struct dt_dropout_site *site,
                                      const struct dt_cuda_launch *L)
{
    const dt_cuda_stream s = L->stream;
    if (site->mode == DT_DROPOUT_PHILOX) {
        const int64_t e0 = site->row0 * width, n = rows * width;
        uint64_t q0;
        const uint64_t blocks = dt_dropout_philox_blocks(e0, n, &q0);
        dropout_philox_kernel<<<dt_cuda_grid(L, (int64_t)blocks), THREADS, 0, s>>>(y, x, e0, n, q0,
                                                                                   blocks, *site);
        LAUNCHED;
    }
    if (site->mode == DT_DROPOUT_STORED) {
        dropout_stored_kernel<<<dt_cuda_grid(L, rows * width), THREADS, 0, s>>>(
            y, x, keep, rows * width, site->scale);
        LAUNCHED;
    }
    const int64_t tiles = (rows + DROP_TILE_ROWS - 1) / DROP_TILE_ROWS;
    const int64_t cap = L->max_blocks > 0 ? L->max_blocks : 65535;
    const int64_t grid = tiles < 1 ? 1 : tiles < cap ? tiles : cap;
    dropout_lane_tiled_kernel<<<(unsigned)grid, DROP_TILE_ROWS, 0, s>>>(y, x, keep, lanes, rows,
                                                                        width, *site);
    LAUNCHED;
}

extern "C" int dt_cuda_dropout_seed_launch(struct dt_xoro *lanes, int64_t rows, int64_t row0,
                                           uint64_t seed, uint32_t step, uint32_t member,
                                           const struct dt_cuda_launch *L)
{
    const dt_cuda_stream s = L->stream;
    dropout_seed_kernel<<<dt_cuda_grid(L, rows), THREADS, 0, s>>>(lanes, rows, row0, seed, step,
                                                                  member);
    LAUNCHED;
}
