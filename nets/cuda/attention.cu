/* Causal self-attention on the CUDA backend: its kernels, their launchers and the op's host
 * functions (declared from their rows of nets/op_list.h in nets/cuda/cuda.h).
 *   math portable (and exact) -> the own kernels, per (b, h, t) row (query tiles with the key
 *                                tiles in shared memory where the head fits), every sum in
 *                                index order with the functions of nets/gpt_elem.h that the
 *                                CPU ops call: the CPU's bits, for any grid;
 *   fast, strict              -> its five products by cuBLAS (nets/gpt_attn_gemm.h, checked
 *                                through a host BLAS in tests/test_gpt.c), TF32 at fast,
 *                                pedantic FP32 at strict; softmax and dS per row through the
 *                                shared functions.
 * Compiled with --fmad=false. No op here waits for the device. */
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <limits.h>

#include "nets/cuda/cuda.h"
#include "nets/cuda/launch.cuh"
#include "nets/gpt_attn_gemm.h"
#include "nets/gpt_elem.h"

/* The tiled kernels' shared memory: two DT_GPT_ATTN_TILE x hd tiles at most this many bytes
 * (the default a block may take without opting in); wider heads take the per-row kernels. */
#define DT_CUDA_ATTN_SMEM_MAX 49152

#define THREADS L->block_threads
#define LAUNCHED return DT_LAUNCHED(L)

/* The work of the attention kernels (nets/cuda/work.h): tok = B T D floats of a projection,
 * scores = B H T T, pairs = the causal (query, key) pairs of all heads, B H T (T + 1) / 2. */
struct attn_size {
    double hd, tok, scores, pairs;
};
static struct attn_size attn_size(int64_t B, int64_t T, int64_t H, int64_t D)
{
    const double heads = (double)B * (double)H, Td = (double)T;
    return {(double)(D / H), (double)B * Td * (double)D, heads * Td * Td,
            heads * Td * (Td + 1.0) / 2.0};
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
static __global__ void __launch_bounds__(DT_GPT_ATTN_TILE)
    attention_forward_tiled_kernel(float *out, float *att, const float *qkv, int64_t B, int64_t T,
                                   int64_t H, int64_t D, float scale, bool portable, bool acc)
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

static __global__ void __launch_bounds__(1024)
    attention_dscores_kernel(float *ds, const float *att, const float *dout, const float *qkv,
                             int64_t B, int64_t T, int64_t H, int64_t D, float scale, bool exact)
{
    const int64_t hd = D / H;
    DT_GRID_STRIDE(i, B * H * T)
    {
        const int64_t t = i % T, h = (i / T) % H, b = i / (T * H);
        dt_attn_row_dscores(ds + i * T, att + i * T, dout, qkv, b, t, h, T, D, hd, scale, exact);
    }
}

/* items: every element of dqkv (B, T, 3, D) */
static __global__ void __launch_bounds__(1024)
    attention_grad_kernel(float *dqkv, const float *ds, const float *att, const float *dout,
                          const float *qkv, int64_t B, int64_t T, int64_t H, int64_t D, bool exact)
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
static __global__ void __launch_bounds__(1024)
    attention_softmax_kernel(float *att, int64_t rows, int64_t T, bool portable)
{
    DT_GRID_STRIDE(i, rows)
    dt_attn_softmax_row(att + i * T, i % T, T, portable);
}

static __global__ void __launch_bounds__(1024)
    attention_dscores_finish_kernel(float *ds, const float *att, int64_t rows, int64_t T,
                                    float scale)
{
    DT_GRID_STRIDE(i, rows)
    dt_attn_dscores_finish(ds + i * T, att + i * T, i % T, T, scale, false);
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

static int attention_forward_launch(float *out, float *att, const float *qkv, int64_t B, int64_t T,
                                    int64_t H, int64_t D, bool portable, bool exact,
                                    const struct dt_cuda_launch *L)
{
    const dt_cuda_stream s = L->stream;
    const int64_t hd = D / H;
    const size_t smem = tile_smem_bytes(hd);
    const struct attn_size z = attn_size(B, T, H, D);
    if (!exact && smem <= DT_CUDA_ATTN_SMEM_MAX) {
        const bool acc = 2 * smem <= DT_CUDA_ATTN_SMEM_MAX; /* q and the sums in shared memory */
        /* each score once, its exponential twice (in its tile, again for the stored weight) */
        const struct dt_op_cost w =
            dt_work(4.0 * (4.0 * z.tok + z.scores),
                    z.pairs * (2.0 * z.hd * DT_W_MAC + 2.0 + 2.0 * DT_W_SOFTMAX));
        DT_LAUNCH(L, w, attention_forward_tiled_kernel, tile_blocks(B, T, H), DT_GPT_ATTN_TILE,
                  acc ? 2 * smem : smem, s)
        (out, att, qkv, B, T, H, D, dt_gpt_attn_scale(hd), portable, acc);
        LAUNCHED;
    }
    /* a thread a row: dt_attn_row's two-pass softmax (exact products under math: exact) */
    const double mac = exact ? DT_W_OPS_XP_MAC : DT_W_MAC;
    DT_LAUNCH(
        L,
        dt_work(4.0 * (4.0 * z.tok + z.scores), z.pairs * (2.0 * z.hd * mac + 1.0 + DT_W_SOFTMAX)),
        attention_forward_kernel, dt_cuda_grid(L, B * H * T), THREADS, 0, s)
    (out, att, qkv, B, T, H, D, dt_gpt_attn_scale(D / H), portable, exact);
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
static __global__ void __launch_bounds__(DT_GPT_ATTN_TILE)
    attention_dkdv_tiled_kernel(float *dqkv, const float *ds, const float *att, const float *dout,
                                const float *qkv, int64_t B, int64_t T, int64_t H, int64_t D,
                                bool acc)
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

static __global__ void __launch_bounds__(DT_GPT_ATTN_TILE)
    attention_dq_tiled_kernel(float *dqkv, const float *ds, const float *qkv, int64_t B, int64_t T,
                              int64_t H, int64_t D, bool acc)
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

static int attention_backward_launch(float *dqkv, float *ds, const float *dout, const float *att,
                                     const float *qkv, int64_t B, int64_t T, int64_t H, int64_t D,
                                     bool exact, const struct dt_cuda_launch *L)
{
    const dt_cuda_stream s = L->stream;
    const struct attn_size z = attn_size(B, T, H, D);
    const double mac = exact ? DT_W_OPS_XP_MAC : DT_W_MAC;
    /* dP a row, then dt_attn_dscores_finish; then dQ, dK and dV: 3 terms a pair a column */
    DT_LAUNCH(L, dt_work(4.0 * (2.0 * z.scores + 4.0 * z.tok), z.pairs * (z.hd * mac + mac + 3.0)),
              attention_dscores_kernel, dt_cuda_grid(L, B * H * T), THREADS, 0, s)
    (ds, att, dout, qkv, B, T, H, D, dt_gpt_attn_scale(D / H), exact);
    const size_t smem = tile_smem_bytes(D / H);
    if (!exact && smem <= DT_CUDA_ATTN_SMEM_MAX) {
        const unsigned blocks = tile_blocks(B, T, H);
        const bool acc = 2 * smem <= DT_CUDA_ATTN_SMEM_MAX; /* the rows' sums in shared memory */
        const double grad = 3.0 * z.pairs * z.hd * mac;     /* every term of dQ, dK and dV */
        /* dK and dV per key tile: ds and att read, dout and q, k, v, dK and dV written */
        DT_LAUNCH(L, dt_work(4.0 * (2.0 * z.scores + 6.0 * z.tok), grad * 2.0 / 3.0),
                  attention_dkdv_tiled_kernel, blocks, DT_GPT_ATTN_TILE, acc ? 2 * smem : smem, s)
        (dqkv, ds, att, dout, qkv, B, T, H, D, acc);
        /* dQ per query tile: ds and k read, dQ written */
        DT_LAUNCH(L, dt_work(4.0 * (z.scores + 2.0 * z.tok), grad / 3.0), attention_dq_tiled_kernel,
                  blocks, DT_GPT_ATTN_TILE, acc ? smem : smem / 2, s)
        (dqkv, ds, qkv, B, T, H, D, acc);
        LAUNCHED;
    }
    DT_LAUNCH(L, dt_work(4.0 * (2.0 * z.scores + 7.0 * z.tok), 3.0 * z.pairs * z.hd * mac),
              attention_grad_kernel, dt_cuda_grid(L, B * T * 3 * D), THREADS, 0, s)
    (dqkv, ds, att, dout, qkv, B, T, H, D, exact);
    LAUNCHED;
}

static int attention_softmax_launch(float *att, int64_t rows, int64_t T, bool portable,
                                    const struct dt_cuda_launch *L)
{
    const dt_cuda_stream s = L->stream;
    /* rows of T scores read and written; the causal pairs' softmax */
    const double pairs = (double)rows * ((double)T + 1.0) / 2.0;
    DT_LAUNCH(L, dt_work(8.0 * (double)rows * (double)T, pairs * DT_W_SOFTMAX),
              attention_softmax_kernel, dt_cuda_grid(L, rows), THREADS, 0, s)
    (att, rows, T, portable);
    LAUNCHED;
}

static int attention_dscores_finish_launch(float *ds, const float *att, int64_t rows, int64_t T,
                                           float scale, const struct dt_cuda_launch *L)
{
    const dt_cuda_stream s = L->stream;
    const double pairs = (double)rows * ((double)T + 1.0) / 2.0;
    DT_LAUNCH(L, dt_work(12.0 * (double)rows * (double)T, pairs * (DT_W_MAC + 3.0)),
              attention_dscores_finish_kernel, dt_cuda_grid(L, rows), THREADS, 0, s)
    (ds, att, rows, T, scale);
    LAUNCHED;
}
/* One of attention's products (nets/gpt_attn_gemm.h) through cuBLAS, in the math mode the
 * policy sets on the handle (TF32 at fast; pedantic FP32, fixed workspace at strict). */
static int as_int(int64_t v)
{
    DT_ASSERT_MSG(v >= 0 && v <= INT_MAX, "attention size beyond cuBLAS's int range");
    return (int)v;
}

static void attn_gemm(struct dt_backend *be, const struct dt_gemm_call *g,
                      const struct dt_policy *pol)
{
    const float zero = 0.0f;
    DT_CUBLAS_CALL(
        be,
        dt_work_lib((double)g->m, (double)g->n, (double)g->k, (double)g->batch, dt_math_tf32(pol)),
        cublasSgemmStridedBatched(
            (cublasHandle_t)dt_cuda_cublas_for(be, pol), g->ta ? CUBLAS_OP_T : CUBLAS_OP_N,
            g->tb ? CUBLAS_OP_T : CUBLAS_OP_N, as_int(g->m), as_int(g->n), as_int(g->k), &g->alpha,
            g->a, as_int(g->lda), g->stride_a, g->b, as_int(g->ldb), g->stride_b, &zero, g->c,
            as_int(g->ldc), g->stride_c, as_int(g->batch)));
}
/* portable (`math: portable`): the own kernels, per (b, h, t) row, sums in index order: the
 * CPU's bits. fast and strict: the products by cuBLAS, a strided batch over the heads of each
 * example or over the examples for each head, whichever makes fewer calls, the causal softmax a
 * per-row kernel -- the library path a fast GPU implementation takes (deterministic on one GPU at
 * strict). */
extern "C" enum dt_status dt_cuda_attention_forward(struct dt_backend *be, float *out, float *att,
                                                    const float *qkv, int64_t B, int64_t T,
                                                    int64_t H, int64_t D,
                                                    const struct dt_policy *pol)
{
    if (dt_math_portable(pol))
        return dt_cuda_launched(be,
                                attention_forward_launch(out, att, qkv, B, T, H, D, true,
                                                         dt_math_exact(pol), &dt_cuda(be)->launch),
                                "attention_forward");
    const struct dt_attn_shape s = dt_attn_shape_of(B, T, H, D);
    const int64_t calls = dt_attn_gemm_calls(&s);
    for (int64_t i = 0; i < calls; i++) {
        const struct dt_gemm_call g =
            dt_attn_gemm_scores(&s, att, qkv, i, dt_gpt_attn_scale(D / H));
        attn_gemm(be, &g, pol);
    }
    DT_FORWARD_IF_ERROR(dt_cuda_launched(
        be, attention_softmax_launch(att, B * H * T, T, false, &dt_cuda(be)->launch),
        "attention_forward softmax"));
    for (int64_t i = 0; i < calls; i++) {
        const struct dt_gemm_call g = dt_attn_gemm_out(&s, out, att, qkv, i);
        attn_gemm(be, &g, pol);
    }
    return DT_OK;
}

/* portable: score gradients per row, then each element of dqkv one sum in index order.
 * fast and strict: dP by cuBLAS, dS per row, then dQ, dK, dV by cuBLAS. */
extern "C" enum dt_status dt_cuda_attention_backward(struct dt_backend *be, float *dqkv, float *ds,
                                                     const float *dout, const float *att,
                                                     const float *qkv, int64_t B, int64_t T,
                                                     int64_t H, int64_t D,
                                                     const struct dt_policy *pol)
{
    if (dt_math_portable(pol))
        return dt_cuda_launched(be,
                                attention_backward_launch(dqkv, ds, dout, att, qkv, B, T, H, D,
                                                          dt_math_exact(pol), &dt_cuda(be)->launch),
                                "attention_backward");
    const struct dt_attn_shape s = dt_attn_shape_of(B, T, H, D);
    const int64_t calls = dt_attn_gemm_calls(&s);
    for (int64_t i = 0; i < calls; i++) {
        const struct dt_gemm_call g = dt_attn_gemm_dp(&s, ds, dout, qkv, i);
        attn_gemm(be, &g, pol);
    }
    DT_FORWARD_IF_ERROR(dt_cuda_launched(be,
                                         attention_dscores_finish_launch(ds, att, B * H * T, T,
                                                                         dt_gpt_attn_scale(D / H),
                                                                         &dt_cuda(be)->launch),
                                         "attention_backward dS"));
    for (int64_t i = 0; i < calls; i++)
        for (int which = 0; which < 3; which++) {
            const struct dt_gemm_call g = dt_attn_gemm_grad(&s, dqkv, ds, att, dout, qkv, i, which);
            attn_gemm(be, &g, pol);
        }
    return DT_OK;
}
