/* Private to the CUDA dense and softmax cross-entropy ops: the extern "C" launchers of
 * nets/cuda/dense.cu and nets/cuda/loss.cu (each returns 0 or the launch's cudaError_t),
 * the device error record of the fixed-point bias gradient, and the host-side loss sum of
 * nets/cuda/loss.cu (exposed for the unit tests). Included by C and CUDA sources. */
#ifndef DT_CUDA_DENSE_LOSS_H
#define DT_CUDA_DENSE_LOSS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "nets/cuda/cuda.h"

#ifdef __cplusplus
extern "C" {
#endif

/* An ordered matrix product, batched over `batches` slices of the k axis:
 *   C_z[i,j] = sum over k ascending in [0, K_z) of A_z(i,k) * B_z(k,j), from +0,
 *   A_z(i,k) = a[z*a_batch + i*a_si + k*a_sk],  B_z(k,j) = b[z*b_batch + k*b_sk + j*b_sj],
 *   C_z row-major (M,N) at c + z*c_batch,  K_z = min(k_chunk, K - z*k_chunk).
 * One batch with k_chunk = K is a plain product. Strides let the same kernel read x, w,
 * w^T and x^T without copies. */
struct dt_cuda_gemm_args {
    float *c;
    const float *a, *b;
    int64_t M, N, K, k_chunk, batches;
    int64_t a_si, a_sk, a_batch;
    int64_t b_sk, b_sj, b_batch;
    int64_t c_batch;
};

/* What the fixed-point bias gradient's kernels found, downloaded after them: the first
 * non-finite input (row-major index) and the first column whose sum leaves the float
 * range, each DT_CUDA_NO_INDEX when there is none. */
#define DT_CUDA_NO_INDEX (~0ull)

/* The bias gradient's row slices: under `atomics: float` an item sums DT_CUDA_BIAS_ROWS rows
 * in order and adds its partial into the zeroed output by float atomicAdd, so an output sees
 * ceil(B / 64) addends in arrival order -- order-free at two or fewer (onto +0 first, then
 * the other: a + b = b + a), order-dependent from three (tests/test_cuda_dense.c,
 * bias_atomic_arrival_orders); under `fixed_point` DT_CUDA_FIXED_ROWS rows an integer partial. */
#define DT_CUDA_BIAS_ROWS 64
#define DT_CUDA_FIXED_ROWS 32
struct dt_cuda_fixed_record {
    unsigned int max_bits;           /* max |dy| over the finite inputs, as bits */
    unsigned int bad_term;           /* != 0: a term failed to convert (a broken bound) */
    unsigned long long first_bad;    /* first NaN/Inf input */
    unsigned long long overflow_col; /* first column whose sum overflows the float range */
};
#ifdef __CUDACC__
/* A record as no scan has written it yet (device code: one thread). */
static __device__ inline void dt_cuda_fixed_record_reset(struct dt_cuda_fixed_record *rec)
{
    rec->max_bits = 0;
    rec->bad_term = 0;
    rec->first_bad = DT_CUDA_NO_INDEX;
    rec->overflow_col = DT_CUDA_NO_INDEX;
}
#endif

/* ---- nets/cuda/dense.cu ---------------------------------------------------------------- */

/* portable: each output summed by one thread over k ascending from +0 (tiles of k staged in
 * shared memory, the order unchanged); independent of the grid size. */
int dt_cuda_gemm_ordered(const struct dt_cuda_gemm_args *g, const struct dt_cuda_launch *L);
/* y[b,o] = y[b,o] + bias[o]: elementwise. y is (B,out). */
int dt_cuda_bias_add(float *y, const float *bias, int64_t B, int64_t out,
                     const struct dt_cuda_launch *L);
/* dst[e] = the fixed tree (determinism/reduce.h) over partials[c*n + e], c in [0, m);
 * partials is overwritten. */
int dt_cuda_reduce_tree(float *dst, float *partials, int64_t m, int64_t n,
                        const struct dt_cuda_launch *L);
/* dst[e] = sum over c of partials[c*n + e] by float atomicAdd into a zeroed dst, in the
 * order the additions arrive (nondeterministic). */
int dt_cuda_add_partials_atomic(float *dst, const float *partials, int64_t m, int64_t n,
                                const struct dt_cuda_launch *L);
/* dst[e] = +0 + partials[perm[0]*n + e] + partials[perm[1]*n + e] + ... (m terms, that
 * order): the forced-order test hook. perm is device memory. */
int dt_cuda_add_partials_in_order(float *dst, const float *partials, const int64_t *perm, int64_t m,
                                  int64_t n, const struct dt_cuda_launch *L);
/* dbias[o] = sum over b of dy[b,o]: row slices summed in order, the slice sums added by
 * float atomicAdd into a zeroed dbias (nondeterministic). dy is (B,out). */
int dt_cuda_bias_grad_atomic(float *dbias, const float *dy, int64_t B, int64_t out,
                             const struct dt_cuda_launch *L);
/* dbias[o] = sum over b of dy[b,o] in exact fixed point (determinism/fixed_point.h):
 * max |dy| -> shift (on the device) -> int64 column sums by integer atomics -> one
 * rounding. acc holds `out` counters; rec is device memory, filled for the caller to read. */
int dt_cuda_bias_grad_fixed(float *dbias, unsigned long long *acc, struct dt_cuda_fixed_record *rec,
                            const float *dy, int64_t B, int64_t out,
                            const struct dt_cuda_launch *L);

/* reduction: exact's shard partials of the fixed-point bias gradient, one launch (block k:
 * shard k, rows [row[k] * mult, row[k + 1] * mult) of dy; partial k at dbias + k * out, the
 * bits of dt_fixed_sum_rows over the shard). rec receives the first faulty shard's record
 * (in full: no reset before); block_rec holds `shards` records; *count is 0 before and
 * after. cudaErrorNotSupported beyond DT_CUDA_SHARDS_MAX shards or
 * DT_CUDA_BIAS_ONE_PASS_COLS columns. One block reads its shard twice: where
 * dt_cuda_bias_one_launch_fits says no, the caller calls per shard instead (four grid-wide
 * kernels per shard read faster than one block per shard). */
#define DT_CUDA_SHARDS_MAX 64 /* shards of one launch: every one-launch shard form */
/* The weight gradient's shards in one launch (dense.c, wgrad_shards_kernel: a thread an
 * output of a shard, walking the shard's rows in order, nothing shared) pays while shards are
 * short; past DT_CUDA_WGRAD_ONE_PASS_ROWS rows a shard, a call per shard -- the ordered
 * product's chunk partials and the fixed tree -- reuses each operand value across outputs.
 * On the H200 (results/nvidia-h200) the one launch took 165 ms a step for the GPU-scale GPT
 * (4096 rows a shard) and 2.99 ms for LeNet's convolutions (25,088 rows of 150 outputs: 600
 * threads in all). The cost model asks the same. */
#define DT_CUDA_WGRAD_ONE_PASS_ROWS 1024
/* Rows of the widest of `count` shards (row[k] .. row[k + 1], mult rows an example). */
static inline int64_t dt_cuda_widest_shard(const int64_t *row, int64_t count, int64_t mult)
{
    int64_t widest = 0;
    for (int64_t k = 0; k < count; k++)
        if ((row[k + 1] - row[k]) * mult > widest) widest = (row[k + 1] - row[k]) * mult;
    return widest;
}
static inline bool dt_cuda_wgrad_one_launch_fits(int64_t shards, int64_t widest_rows)
{
    return shards >= 1 && shards <= DT_CUDA_SHARDS_MAX &&
           widest_rows <= DT_CUDA_WGRAD_ONE_PASS_ROWS;
}
/* DETRAIN_CUDA_ONE_PASS=0 runs the step as the first light did -- the shards' bias gradient a
 * call per shard, the hashing snapshot a copy per tensor, the loss and reduction: exact's
 * maxima each read back with a wait of its own: the same bits, for A/B timing on a GPU. The
 * CUDA backend reads it once, when made (dt_cuda_ctx.one_pass); the cost model once, as
 * counting begins (dt_cost_tally.one_pass). */
static inline bool dt_cuda_one_pass(void)
{
    const char *v = getenv("DETRAIN_CUDA_ONE_PASS");
    return !(v && v[0] == '0' && v[1] == '\0');
}
#define DT_CUDA_BIAS_ONE_PASS_COLS 1024
/* When the one launch pays (dense.c, bias_fixed_one_launch; the cost model asks the same).
 * A block walks its shard's rows twice, a thread's loads one after another: on the H200
 * (results/nvidia-h200, 2026-11-28) about 2 ns an element of the widest shard -- the MLP at
 * batch 256, one shard, 0.223 ms a step for its three bias gradients, where the four
 * grid-wide kernels took 0.068 ms on the H100 (about 0.023 ms a call, whatever the size);
 * LeNet's convolution biases, 100,352 rows of one shard, 0.516 ms. So one launch while the
 * widest shard holds at most DT_CUDA_BIAS_ONE_PASS_PER_SHARD elements for each shard whose
 * call it saves (8192: the break-even of the two, rounded down). */
#define DT_CUDA_BIAS_ONE_PASS_PER_SHARD ((int64_t)1 << 13)
static inline bool dt_cuda_bias_one_launch_fits(int64_t shards, int64_t widest_rows, int64_t out)
{
    return shards >= 1 && shards <= DT_CUDA_SHARDS_MAX && out <= DT_CUDA_BIAS_ONE_PASS_COLS &&
           widest_rows * out <= DT_CUDA_BIAS_ONE_PASS_PER_SHARD * shards;
}

/* reduction: exact's weight-gradient partials at portable, one launch for every shard
 * (item (k, i, j) = shard k's dw[i, j]: its chunks in row order, the fixed tree streamed;
 * dw holds `shards` partials of in x out). cudaErrorNotSupported beyond
 * DT_CUDA_SHARDS_MAX shards. */
int dt_cuda_wgrad_shards(float *dw, const float *x, const float *dy, const int64_t *row,
                         int64_t shards, int64_t mult, int64_t in, int64_t out,
                         const struct dt_cuda_launch *L);
int dt_cuda_bias_grad_fixed_shards(float *dbias, struct dt_cuda_fixed_record *rec,
                                   struct dt_cuda_fixed_record *block_rec, unsigned int *count,
                                   const float *dy, const int64_t *row, int64_t shards,
                                   int64_t mult, int64_t out, const struct dt_cuda_launch *L);
/* rec reset, then max |v| (as bits) and the first non-finite index over v[0, n): the
 * first pass of every fixed-point scatter (the bias gradient, conv.cu's col2im and
 * max-pool backward). */
int dt_cuda_fixed_scan(struct dt_cuda_fixed_record *rec, const float *v, int64_t n,
                       const struct dt_cuda_launch *L);

/* ---- nets/cuda/loss.cu ----------------------------------------------------------------- */

/* Per row b (nets/dense_loss_elem.h, dt_softmax_xent_row): probs, losses[b], and hit[b] = 1 when
 * the first argmax is the label, 0 when not, -1 when the label is outside [0, C) (its loss
 * is then NaN). With total != NULL, *total = the sum of the losses by float atomicAdd
 * (arrival order; total is zeroed first). */
int dt_cuda_softmax_xent_rows(float *probs, float *losses, int32_t *hit, float *total,
                              const float *logits, const int32_t *labels, int64_t B, int64_t C,
                              bool portable, const struct dt_cuda_launch *L);
/* dlogits[b,c] = (probs[b,c] - (c == labels[b])) * inv_b: elementwise. */
int dt_cuda_softmax_xent_grad(float *dlogits, const float *probs, const int32_t *labels, int64_t B,
                              int64_t C, float inv_b, const struct dt_cuda_launch *L);

/* ---- nets/cuda/loss.cu (host) ----------------------------------------------------------- */

/* The sum of B per-example losses (host memory) under the reduction control, exactly as
 * the CPU backend adds them: fixed -> dt_reduce_sum_fixed; unordered with a forced order
 * -> chunks of 8 summed in order, added in the drawn chunk order; unordered otherwise ->
 * device_total (the device's atomicAdd sum). */
float dt_cuda_loss_sum(const float *losses, int64_t B, enum dt_reduction reduction,
                       uint64_t forced_order, float device_total);

#ifdef __cplusplus
}
#endif

#endif
