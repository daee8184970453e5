/* The activations on the CUDA backend: each op's host function (declared from its row of
 * nets/op_list.h in nets/cuda/cuda.h) beside its kernel, the formulas those of
 * nets/activation_elem.h that the CPU ops call. Each thread owns element i (grid-stride
 * loop), so the result is independent of grid and block size: the CPU's bits at every policy. */
#include "determinism/dropout.h"
#include "nets/activation_elem.h"
#include "nets/cuda/cuda.h"
#include "nets/cuda/launch.cuh"
#include "nets/gpt_elem.h" /* dt_gelu, dt_gelu_grad */

static __global__ void __launch_bounds__(1024)
    relu_forward_kernel(float *y, const float *x, int64_t n)
{
    DT_GRID_STRIDE(i, n)
    y[i] = dt_relu(x[i]);
}

static __global__ void __launch_bounds__(1024)
    relu_backward_kernel(float *dx, const float *dy, const float *y, int64_t n)
{
    DT_GRID_STRIDE(i, n)
    dx[i] = dt_relu_grad(y[i], dy[i]);
}

/* portable at every policy: elementwise. */
extern "C" enum dt_status dt_cuda_relu_forward(struct dt_backend *be, float *y, const float *x,
                                               int64_t n, const struct dt_policy *pol)
{
    const struct dt_cuda_launch *L = &dt_cuda(be)->launch;
    DT_LAUNCH(L, dt_work(8.0 * (double)n, (double)n), relu_forward_kernel, dt_cuda_grid(L, n),
              L->block_threads, 0, L->stream)
    (y, x, n);
    return dt_cuda_launched(be, DT_LAUNCHED(L), "relu_forward");
}

extern "C" enum dt_status dt_cuda_relu_backward(struct dt_backend *be, float *dx, const float *dy,
                                                const float *y, int64_t n,
                                                const struct dt_policy *pol)
{
    const struct dt_cuda_launch *L = &dt_cuda(be)->launch;
    DT_LAUNCH(L, dt_work(12.0 * (double)n, (double)n), relu_backward_kernel, dt_cuda_grid(L, n),
              L->block_threads, 0, L->stream)
    (dx, dy, y, n);
    return dt_cuda_launched(be, DT_LAUNCHED(L), "relu_backward");
}

/* ---- GELU, the residual add ------------------------------------------------------------- */

static __global__ void __launch_bounds__(1024)
    gelu_kernel(float *y, const float *dy, const float *x, int64_t n, bool backward, bool own_tanh)
{
    DT_GRID_STRIDE(i, n)
    y[i] = backward ? dt_gelu_grad(x[i], dy[i], own_tanh) : dt_gelu(x[i], own_tanh);
}

static __global__ void __launch_bounds__(1024) add_kernel(float *y, const float *x, int64_t n)
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
static __global__ void __launch_bounds__(1024)
    dropout_stored_kernel(float *y, const float *x, const uint8_t *keep, int64_t n, float scale)
{
    DT_GRID_STRIDE(i, n)
    y[i] = dt_dropout_apply(x[i], keep[i] != 0, scale);
}

/* philox: a thread a Philox block of the whole (rows, W) site (dt_dropout_philox_block),
 * not a thread a row: the rows' elements are one run of counters, so neighbouring threads
 * read and write neighbouring 16 bytes. Items: the site's blocks, q0 + j. */
static __global__ void __launch_bounds__(1024)
    dropout_philox_kernel(float *y, const float *x, int64_t e0, int64_t n, uint64_t q0,
                          uint64_t blocks, struct dt_dropout_site s)
{
    DT_GRID_STRIDE(j, (int64_t)blocks)
    dt_dropout_philox_block(y, x, e0, n, q0 + (uint64_t)j, &s.stream, s.threshold, s.scale);
}

static __global__ void __launch_bounds__(1024)
    dropout_seed_kernel(struct dt_xoro *lanes, int64_t rows, int64_t row0, uint64_t seed,
                        uint32_t step, uint32_t member)
{
    DT_GRID_STRIDE(r, rows)
    lanes[r] = dt_dropout_lane_seed(seed, step, member, (uint64_t)(row0 + r));
}

#define THREADS L->block_threads
#define LAUNCHED return DT_LAUNCHED(L)

static int gelu_launch(float *y, const float *dy, const float *x, int64_t n, bool backward,
                       bool own_tanh, const struct dt_cuda_launch *L)
{
    const dt_cuda_stream s = L->stream;
    /* dt_gelu: a tanh, eight products and sums; dt_gelu_grad: a tanh, seventeen */
    const struct dt_op_cost w = backward ? dt_work(12.0 * (double)n, (17.0 + DT_W_EXP) * (double)n)
                                         : dt_work(8.0 * (double)n, (8.0 + DT_W_EXP) * (double)n);
    DT_LAUNCH(L, w, gelu_kernel, dt_cuda_grid(L, n), THREADS, 0, s)
    (y, dy, x, n, backward, own_tanh);
    LAUNCHED;
}

static int add_launch(float *y, const float *x, int64_t n, const struct dt_cuda_launch *L)
{
    const dt_cuda_stream s = L->stream;
    DT_LAUNCH(L, dt_work(12.0 * (double)n, (double)n), add_kernel, dt_cuda_grid(L, n), THREADS, 0,
              s)
    (y, x, n);
    LAUNCHED;
}

/* The dropout kernel's work by mode: x read, y written, a product an element; philox a Philox
 * block per 4 elements; keep and lfsr walk the row's lane (read and written), a xoroshiro step
 * per pair, keep writing a byte an element; stored reads them. */
static struct dt_op_cost dropout_work(int64_t rows, int64_t width, const struct dt_dropout_site *s)
{
    const double elems = (double)rows * (double)width;
    const double lane_bytes = 2.0 * (double)sizeof(struct dt_xoro) * (double)rows;
    const double steps = (double)rows * (double)((width + 1) / 2);
    double bytes = 8.0 * elems, flops = elems;
    switch (s->mode) {
    case DT_DROPOUT_PHILOX: flops += DT_W_OPS_PHILOX * elems / 4.0; break;
    case DT_DROPOUT_KEEP:
        bytes += elems + lane_bytes;
        flops += DT_W_OPS_XORO * steps;
        break;
    case DT_DROPOUT_STORED: bytes += elems; break;
    case DT_DROPOUT_LFSR_FORWARD:
    case DT_DROPOUT_LFSR_BACKWARD:
        bytes += lane_bytes;
        flops += DT_W_OPS_XORO * steps;
        break;
    }
    return dt_work(bytes, flops);
}

static int dropout_launch(float *y, const float *x, uint8_t *keep, struct dt_xoro *lanes,
                          int64_t rows, int64_t width, const struct dt_dropout_site *site,
                          const struct dt_cuda_launch *L)
{
    const dt_cuda_stream s = L->stream;
    const struct dt_op_cost w = dropout_work(rows, width, site);
    if (site->mode == DT_DROPOUT_PHILOX) {
        const int64_t e0 = site->row0 * width, n = rows * width;
        uint64_t q0;
        const uint64_t blocks = dt_dropout_philox_blocks(e0, n, &q0);
        DT_LAUNCH(L, w, dropout_philox_kernel, dt_cuda_grid(L, (int64_t)blocks), THREADS, 0, s)
        (y, x, e0, n, q0, blocks, *site);
        LAUNCHED;
    }
    if (site->mode == DT_DROPOUT_STORED) {
        DT_LAUNCH(L, w, dropout_stored_kernel, dt_cuda_grid(L, rows * width), THREADS, 0, s)
        (y, x, keep, rows * width, site->scale);
        LAUNCHED;
    }
    const int64_t tiles = (rows + DROP_TILE_ROWS - 1) / DROP_TILE_ROWS;
    const int64_t cap = L->max_blocks > 0 ? L->max_blocks : 65535;
    const int64_t grid = tiles < 1 ? 1 : tiles < cap ? tiles : cap;
    DT_LAUNCH(L, w, dropout_lane_tiled_kernel, (unsigned)grid, DROP_TILE_ROWS, 0, s)
    (y, x, keep, lanes, rows, width, *site);
    LAUNCHED;
}

static int dropout_seed_launch(struct dt_xoro *lanes, int64_t rows, int64_t row0, uint64_t seed,
                               uint32_t step, uint32_t member, const struct dt_cuda_launch *L)
{
    const dt_cuda_stream s = L->stream;
    DT_LAUNCH(
        L, dt_work((double)sizeof(struct dt_xoro) * (double)rows, DT_W_OPS_PHILOX * (double)rows),
        dropout_seed_kernel, dt_cuda_grid(L, rows), THREADS, 0, s)
    (lanes, rows, row0, seed, step, member);
    LAUNCHED;
}
/* portable wherever dt_math_own_elementary (fast and portable: the own tanh); strict: CUDA's. */
extern "C" enum dt_status dt_cuda_gelu_forward(struct dt_backend *be, float *y, const float *x,
                                               int64_t n, const struct dt_policy *pol)
{
    return dt_cuda_launched(
        be, gelu_launch(y, NULL, x, n, false, dt_math_own_elementary(pol), &dt_cuda(be)->launch),
        "gelu_forward");
}

extern "C" enum dt_status dt_cuda_gelu_backward(struct dt_backend *be, float *dx, const float *dy,
                                                const float *x, int64_t n,
                                                const struct dt_policy *pol)
{
    return dt_cuda_launched(
        be, gelu_launch(dx, dy, x, n, true, dt_math_own_elementary(pol), &dt_cuda(be)->launch),
        "gelu_backward");
}

/* portable: elementwise. */
extern "C" enum dt_status dt_cuda_add(struct dt_backend *be, float *y, const float *x, int64_t n,
                                      const struct dt_policy *pol)
{
    return dt_cuda_launched(be, add_launch(y, x, n, &dt_cuda(be)->launch), "add");
}

/* portable: per row, a function of the global row (determinism/dropout.h). */
extern "C" enum dt_status dt_cuda_dropout(struct dt_backend *be, float *y, const float *x,
                                          uint8_t *keep, struct dt_xoro *lanes, int64_t rows,
                                          int64_t width, const struct dt_dropout_site *site,
                                          const struct dt_policy *pol)
{
    return dt_cuda_launched(
        be, dropout_launch(y, x, keep, lanes, rows, width, site, &dt_cuda(be)->launch), "dropout");
}

extern "C" enum dt_status dt_cuda_dropout_seed(struct dt_backend *be, struct dt_xoro *lanes,
                                               int64_t rows, int64_t row0, uint64_t seed,
                                               uint32_t step, uint32_t member,
                                               const struct dt_policy *pol)
{
    return dt_cuda_launched(
        be, dropout_seed_launch(lanes, rows, row0, seed, step, member, &dt_cuda(be)->launch),
        "dropout_seed");
}
