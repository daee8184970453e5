/* The CUDA backend's kernels as counts, for the cost model of nets/cost.h: dt_cost_<name> for
 * every row of nets/op_list.h adds to *c what one call of the op costs on the CUDA backend
 * for its arguments and policy -- kernel launches and library calls, the device-memory
 * bytes they move, flops, library products, math: exact's int8 tensor-core ops and host
 * waits. Each function mirrors the host code it names (the ops and launchers of
 * nets/cuda/<family>.cu), branch by branch, asking the policy the same questions
 * (determinism/policy.h), behind the routing of nets/dispatch.c's plan_<name> (the shard
 * routes of reduction: exact). Counting needs no GPU: a CPU run records what the CUDA
 * backend would launch. Change a function here with the code it mirrors.
 *
 * Conventions.
 *   launches  each <<<>>> launch, each cuBLAS or cuDNN call, each cudaMemsetAsync and
 *             device-to-device cudaMemcpyAsync; lib_calls the library calls among them. Copies
 * between host and device are not launches (a blocking one is a wait). bytes     device memory read
 * plus written, each tensor once per kernel that streams it (a gathered or scattered tensor once;
 * read-modify-write twice); float and int32 4 bytes, int64 8, dt_xp_acc 16. Records and scalars of
 * a few bytes: 0. flops     detrain's own kernels, rough: add, subtract, multiply, compare 1; a
 * product added to a sum (dt_dense_mac's two roundings, or an FMA) 2; divide, square root 4; exp,
 * log, log1p, tanh, sine or cosine 10. Integer work on the CUDA cores that is a kernel's substance
 * counts as flop-equivalents, about one per 32-bit operation (the OPS_ constants below):
 * fixed-point terms, exact dot products, the generators (Philox, xoroshiro), SHA-256. Data movement
 * (copies, transposes, im2col, gathers) is 0. ordered_flops the ordered product's (dense.cu,
 * gemm_ordered_kernel), at its own rate: every term two roundings in index order, no FMA, no split
 * of K. serial_ops the longest chain of dependent operations one thread runs, summed over the op's
 * kernels (they run one after another): where few threads each run a long chain (the tree digests'
 * SHA-256 compressions), latency and not throughput bounds the kernel. lib_flops 2 M N K per cuBLAS
 * or cuDNN product (a strided batch: times its batch); lib_tf32 when TF32 tensor ops are allowed:
 * cuBLAS under math: fast (dt_cuda_cublas_for), cuDNN under conv_algo: autotune
 * (CUDNN_DEFAULT_MATH). int_ops   math: exact's int8 GEMMs, 2 per multiply-add, every slice pair of
 * each batch and the zero padding (to multiples of 16) included. waits     dt_cuda_sync and the
 * other synchronisations an op makes; a check record read at once (dt_cuda_check_now) is one, none
 * when the step defers its checks (cx->checks_deferred; nets/cuda/status.c). The steady state:
 * scratch already grown (a growth waits once), cuDNN's choice for the shape cached (the first
 * cudnnFind of a shape under autotune waits once) and cuDNN has an algorithm (no fallback to the
 * own kernels), the forced-order test hook off, at most DT_CUDA_STATUS_SLOTS (128) deferred records
 * in a step (beyond, an op checks at once), and per-shard routes on the canonical split of
 * nets/step.c (equal shards when their count divides the batch). Not modelled: caches (reuse within
 * a kernel is free, across kernels paid again), occupancy and tails (a kernel of few threads costs
 * as if it filled the device), overlap of kernels with each other or with the host, cuBLAS's and
 * cuDNN's internals (their workspace traffic, extra kernels of their own), host-side costs beyond a
 * launch. */
#include "nets/cost.h"

#include <stdbool.h>
#include <stdint.h>

#include "core/tree_hash.h"            /* the tree digest's leaves and arity */
#include "determinism/eps.h"           /* dt_eps_lane_steps: the lanes' draws per tensor */
#include "determinism/exact_product.h" /* math: exact's slices, levels and K per GEMM */
#include "determinism/reduce.h"        /* the chunks of reduction: fixed and unordered */
#include "nets/cuda/dense_loss.h"      /* the one-launch bias shards' bounds */
#include "nets/gpt_attn_gemm.h"        /* attention's library calls: how many, how batched */
#include "nets/gpt_elem.h"             /* DT_GPT_VOCAB: the embedding table's rows */

/* ---- flop conventions (file comment) ----------------------------------------------------- */

#define MAC 2.0       /* a product added to a sum */
#define FLOP_DIV 4.0  /* a divide or a square root */
#define FLOP_EXP 10.0 /* exp, log, log1p, tanh, sine, cosine: library or portable */
/* a softmax element: the max's compare, the shift, exp, the sum's add, the divide */
#define FLOP_SOFTMAX (1.0 + 1.0 + FLOP_EXP + 1.0 + FLOP_DIV)
#define OPS_SCAN 2.0        /* an element's |bits| into a max, and the non-finite test */
#define OPS_FIXED_TERM 8.0  /* a float to int64 fixed point at a shift, added (fixed_point.h) */
#define OPS_FIXED_ROUND 8.0 /* an int64 sum back to float, rounded once */
/* dt_xp_dot_vec per pair: two scale passes, two conversions, a 64 x 64 -> 128-bit MAC */
#define OPS_XP_MAC 16.0
#define OPS_XP_FIXED 4.0  /* a value to fixed point at its row's scale (dt_xp_fixed) */
#define OPS_XP_SLICE 2.0  /* one int8 slice of it (dt_xp_slice) */
#define OPS_XP_FOLD 6.0   /* an int32 product into an output's 128-bit parts (dt_xp_fold) */
#define OPS_XP_ROUND 20.0 /* an output's parts rounded once, plus the bias */
#define OPS_PHILOX 100.0  /* a Philox4x32-10 block (4 words) */
#define OPS_XORO 25.0     /* a xoroshiro128** step and its 64-bit output (or a step back) */
/* dt_gauss_pair: the portable log, sqrt, sine and cosine (determinism/gaussian.h, polynomials
 * after range reduction, ~100 operations each), fitted to the first light's eps_lfsr */
#define OPS_GAUSS_PAIR 400.0
#define OPS_SHA256_BLOCK 3000.0 /* a SHA-256 compression of 64 bytes (schedule and 64 rounds) */

/* ---- constants private to the .cu files, copied (change them with their source) ---------- */

#define CU_TREE_BLOCK 16               /* TREE_BLOCK, nets/cuda/dense.cu: the fixed tree's block */
#define CU_BIAS_ROWS DT_CUDA_BIAS_ROWS /* rows per float bias slice (dense_loss.h) */
#define CU_FIXED_ROWS DT_CUDA_FIXED_ROWS /* rows per fixed-point slice */
#define CU_XP_PAD 16 /* matmul_exact.cu: rows, columns and K padded to multiples of 16 */
#define CU_XP_SCRATCH_BLOCK ((int64_t)256 << 20) /* XP_SCRATCH_BLOCK, matmul_exact.cu */

/* ---- the pieces every op is made of -------------------------------------------------------- */

/* One kernel launch of detrain's own. */
static void kernel(struct dt_op_cost *c, double bytes, double flops)
{
    c->launches += 1;
    c->bytes += bytes;
    c->flops += flops;
}

/* cudaMemsetAsync of `bytes`: a launch on the stream. */
static void memset_async(struct dt_op_cost *c, double bytes)
{
    c->launches += 1;
    c->bytes += bytes;
}

/* One cuBLAS float product on dt_cuda_cublas_for's handle (TF32 under math: fast):
 * batch x (M x K) . (K x N), A and B read and C written once per batch entry. */
static void cublas_gemm(struct dt_op_cost *c, const struct dt_policy *pol, double M, double N,
                        double K, double batch)
{
    c->launches += 1;
    c->lib_calls += 1;
    c->bytes += 4.0 * batch * (M * K + K * N + M * N);
    c->lib_flops += 2.0 * batch * M * N * K;
    if (dt_math_fast(pol)) c->lib_tf32 = true;
}

/* nets/cuda/dense.cu, dt_cuda_gemm_ordered: one kernel, every output a sum in index order
 * (two roundings per term); `batches` chunk partials of M x N over K's rows in all. */
static void ordered_gemm(struct dt_op_cost *c, double M, double N, double K, double batches)
{
    /* a tile's 16 x 16 threads step through K together: a narrow product (a convolution's
     * 6 or 16 channels) costs the whole tile's width */
    const double Mt = 16.0 * (double)(((int64_t)M + 15) / 16);
    const double Nt = 16.0 * (double)(((int64_t)N + 15) / 16);
    kernel(c, 4.0 * (M * K + K * N + batches * M * N), 0.0);
    c->ordered_flops += MAC * Mt * Nt * K;
}

/* nets/cuda/dense.cu, dt_cuda_reduce_tree: m partials of n floats to one, a kernel per level
 * of blocks of CU_TREE_BLOCK, then a copy kernel into the destination. */
static void reduce_tree(struct dt_op_cost *c, int64_t m, double n)
{
    for (int64_t count = m; count > 1; count = (count + CU_TREE_BLOCK - 1) / CU_TREE_BLOCK) {
        const int64_t blocks = (count + CU_TREE_BLOCK - 1) / CU_TREE_BLOCK;
        kernel(c, 4.0 * (double)(count + blocks) * n, (double)(count - blocks) * n);
    }
    kernel(c, 8.0 * n, 0.0);
}

/* nets/cuda/dense.cu, dt_cuda_fixed_scan: the record reset (one thread), then max |v| and
 * the first non-finite element over n values. */
static void fixed_scan(struct dt_op_cost *c, double n)
{
    kernel(c, 0.0, 0.0);
    kernel(c, 4.0 * n, OPS_SCAN * n);
}

/* nets/cuda/status.c: the op's check record read at once (a copy back and dt_cuda_sync), or
 * left for the step's end when checks are deferred. */
static void check_record(struct dt_op_cost *c, const struct dt_cost_ctx *cx)
{
    if (!cx->checks_deferred) c->waits += 1;
}

/* ---- nets/dispatch.c's routes under reduction: exact --------------------------------------- */

/* sharded(): shards set and reduction: exact -- a batch reduction gives one partial per
 * shard, each the plain op over the shard's rows (FOR_EACH_SHARD), but for the bias
 * gradient's one-launch shard op (the CUDA backend has no dense_backward_weight_shards). */
static bool sharded(const struct dt_cost_ctx *cx, const struct dt_policy *pol)
{
    return cx->shards > 0 && dt_reduction_exact(pol);
}

/* library_sharded(): also math: fast -- the library's per-row products run per shard. */
static bool library_sharded(const struct dt_cost_ctx *cx, const struct dt_policy *pol)
{
    return dt_math_fast(pol) && sharded(cx, pol);
}

/* Rows of shard k of `rows` (a multiple of the shards' batch: its rows per example times
 * the example rows of shard k in the canonical split, dt_shard_row in nets/step.c). */
static int64_t shard_rows(const struct dt_cost_ctx *cx, int64_t rows, int64_t k)
{
    const int64_t S = cx->shards, batch = cx->shard_batch;
    if (batch > 0 && rows % batch == 0) return rows / batch * ((k + 1) * batch / S - k * batch / S);
    return (k + 1) * rows / S - k * rows / S;
}

/* Rows of the widest shard of `rows` (what the one-launch rules of dense_loss.h ask). */
static int64_t widest_shard(const struct dt_cost_ctx *cx, int64_t rows)
{
    int64_t widest = 0;
    for (int64_t k = 0; k < cx->shards; k++)
        if (shard_rows(cx, rows, k) > widest) widest = shard_rows(cx, rows, k);
    return widest;
}

/* ---- math: exact's product (nets/cuda/matmul_exact.cu) ---------------------------------- */

static int64_t pad16(int64_t v) { return (v + CU_XP_PAD - 1) / CU_XP_PAD * CU_XP_PAD; }

/* dt_cuda_matmul_exact's default form, xp_int8: C (M,N) = A (M,K) . B (K,N) at `levels`
 * levels (S = 4 x levels int8 slices per operand), bias fused into the rounding. xp_scales:
 * A's row and B's column scales, read back to name a non-finite input -- the op's one wait;
 * xp_slice_kernel: every slice of A and B, padded; then per block of output rows (mb rows
 * bounding the scratch to XP_SCRATCH_BLOCK): a memset of its integers, per block of K
 * (DT_XP_K_MAX) and slice p of A one cuBLAS int8 GEMM against all S slices of B (a strided
 * batch of S) and xp_fold_kernel, then xp_round_kernel. The simple form (where cuBLAS refuses
 * the int8 call, or DETRAIN_CUDA_XP=simple) is not counted: xp_scales' two kernels and wait,
 * xp_fixed_kernel for A and for B (one thread per row, levels int64 halves per value), and
 * xp_out_kernel, one thread per output summing levels^2 dot products of K 128-bit terms:
 * 5 launches, 1 wait, no tensor cores. */
static void xp_product(struct dt_op_cost *c, int64_t M, int64_t K, int64_t N, int levels, bool bias)
{
    const int64_t S = (int64_t)DT_XP_SLICES * levels, L2 = (int64_t)levels * levels;
    const int64_t kp = pad16(K), mp = pad16(M), np = pad16(N);
    const double acc = (double)sizeof(dt_xp_acc);
    const double Md = (double)M, Kd = (double)K, Nd = (double)N, Sd = (double)S;
    kernel(c, 4.0 * (Md * Kd + Md), OPS_SCAN * Md * Kd); /* xp_scales: A's rows */
    kernel(c, 4.0 * (Nd * Kd + Nd), OPS_SCAN * Nd * Kd); /* B's columns */
    c->waits += 1;                                       /* the scales read back */
    const double slice_ops = OPS_XP_FIXED + OPS_XP_SLICE * Sd;
    kernel(c, 4.0 * (Md * Kd + Md) + Sd * (double)mp * (double)kp,
           slice_ops * (double)mp * (double)kp);
    kernel(c, 4.0 * (Nd * Kd + Nd) + Sd * (double)np * (double)kp,
           slice_ops * (double)np * (double)kp);
    const int64_t per_row = S * np * 4 + N * L2 * (int64_t)sizeof(dt_xp_acc);
    int64_t mb = CU_XP_SCRATCH_BLOCK / per_row;
    mb = mb < CU_XP_PAD ? CU_XP_PAD : mb / CU_XP_PAD * CU_XP_PAD;
    mb = mb > mp ? mp : mb;
    const int64_t kc_max = DT_XP_K_MAX / CU_XP_PAD * CU_XP_PAD;
    const double kblocks = (double)((kp + kc_max - 1) / kc_max);
    for (int64_t i0 = 0; i0 < M; i0 += mb) {
        const int64_t rows = M - i0 < mb ? M - i0 : mb;
        const double r = (double)rows, rp = (double)pad16(rows), parts = r * Nd * (double)L2 * acc;
        memset_async(c, parts);
        /* kblocks x S GEMMs: all of B's slices (S np kc bytes) against A's slice p (rp kc),
         * S int32 products of rp x np each */
        c->launches += kblocks * Sd;
        c->lib_calls += kblocks * Sd;
        c->int_ops += 2.0 * Sd * Sd * rp * (double)np * (double)kp;
        c->bytes += Sd * (Sd * (double)np + rp) * (double)kp + 4.0 * kblocks * Sd * Sd * rp * np;
        /* kblocks x S folds: S products read, the block's integers read and written */
        c->launches += kblocks * Sd;
        c->bytes += kblocks * Sd * (4.0 * Sd * r * Nd + 2.0 * parts);
        c->flops += kblocks * Sd * OPS_XP_FOLD * Sd * r * Nd;
        kernel(c, parts + 4.0 * (r * Nd + (bias ? Nd : 0.0)), OPS_XP_ROUND * r * Nd);
    }
}

/* ---- the dense layer (nets/cuda/dense.cu) --------------------------------------------------- */

/* dt_cuda_dense_forward: exact -> the exact product (bias in its rounding); portable -> the
 * ordered kernel; fast, strict -> cublasSgemm; then dt_cuda_bias_add. */
static void cuda_dense_forward(struct dt_op_cost *c, const struct dt_policy *pol, int64_t B,
                               int64_t in, int64_t out)
{
    if (dt_math_exact(pol)) {
        xp_product(c, B, in, out, DT_XP_LEVELS_FORWARD, true);
        return;
    }
    const double Bd = (double)B, o = (double)out;
    if (dt_math_portable(pol)) ordered_gemm(c, Bd, o, (double)in, 1.0);
    else cublas_gemm(c, pol, Bd, o, (double)in, 1.0);
    kernel(c, 4.0 * (2.0 * Bd * o + o), Bd * o); /* dt_cuda_bias_add */
}

/* dt_cuda_dense_backward_data: exact -> the exact product (w as B^T); portable -> ordered;
 * fast, strict -> cublasSgemm. */
static void cuda_dense_backward_data(struct dt_op_cost *c, const struct dt_policy *pol, int64_t B,
                                     int64_t in, int64_t out)
{
    if (dt_math_exact(pol)) {
        xp_product(c, B, out, in, DT_XP_LEVELS_FORWARD, false);
        return;
    }
    if (dt_math_portable(pol)) ordered_gemm(c, (double)B, (double)in, (double)out, 1.0);
    else cublas_gemm(c, pol, (double)B, (double)in, (double)out, 1.0);
}

/* dt_cuda_dense_backward_weight: exact -> the exact product at two levels (x as A^T);
 * unordered at fast / strict -> one cublasSgemm over the batch; otherwise chunk partials
 * (wgrad_partials: the ordered kernel, or cuBLAS's strided batch of the full chunks and a
 * cublasSgemm for a short last one), combined by the fixed tree (fixed, exact) or by
 * dt_cuda_add_partials_atomic (a memset and an atomicAdd kernel). */
static void cuda_dense_backward_weight(struct dt_op_cost *c, const struct dt_policy *pol, int64_t B,
                                       int64_t in, int64_t out)
{
    if (dt_math_exact(pol)) {
        xp_product(c, in, B, out, DT_XP_LEVELS_WGRAD, false);
        return;
    }
    const double n = (double)in * (double)out;
    const bool fixed = dt_reduction_ordered(pol);
    if (!fixed && !dt_math_portable(pol)) {
        cublas_gemm(c, pol, (double)out, (double)in, (double)B, 1.0);
        return;
    }
    const int64_t chunk = fixed ? DT_REDUCE_CHUNK : DT_UNORDERED_CHUNK;
    const int64_t m = (B + chunk - 1) / chunk;
    if (dt_math_portable(pol)) {
        ordered_gemm(c, (double)in, (double)out, (double)B, (double)m);
    } else {
        const int64_t full = B / chunk, rest = B - full * chunk;
        if (full > 0) cublas_gemm(c, pol, (double)out, (double)in, (double)chunk, (double)full);
        if (rest > 0) cublas_gemm(c, pol, (double)out, (double)in, (double)rest, 1.0);
    }
    if (fixed) {
        reduce_tree(c, m, n);
        return;
    }
    memset_async(c, 4.0 * n);
    kernel(c, 4.0 * ((double)m * n + 2.0 * n), (double)m * n);
}

/* dt_cuda_bias_backward: atomics float -> dt_cuda_bias_grad_atomic (a memset, slice sums
 * added by atomicAdd); fixed_point -> dt_cuda_bias_grad_fixed (init, max, int64 sums,
 * rounding) and its check record. */
static void cuda_bias_backward(struct dt_op_cost *c, const struct dt_cost_ctx *cx,
                               const struct dt_policy *pol, int64_t B, int64_t out)
{
    const double n = (double)B * (double)out, o = (double)out;
    if (!dt_atomics_exact(pol)) {
        const double slices = (double)((B + CU_BIAS_ROWS - 1) / CU_BIAS_ROWS);
        memset_async(c, 4.0 * o);
        kernel(c, 4.0 * (n + 2.0 * o), n + slices * o);
        return;
    }
    if (cx->one_pass && dt_cuda_bias_one_launch_fits(1, B, out)) { /* one block */
        kernel(c, 8.0 * n + 4.0 * o, (OPS_SCAN + OPS_FIXED_TERM) * n + OPS_FIXED_ROUND * o);
        check_record(c, cx);
        return;
    }
    const double slices = (double)((B + CU_FIXED_ROWS - 1) / CU_FIXED_ROWS);
    kernel(c, 8.0 * o, 0.0);                                        /* init: counters, record */
    kernel(c, 4.0 * n, OPS_SCAN * n);                               /* max |dy| */
    kernel(c, 4.0 * n + 16.0 * o, OPS_FIXED_TERM * n + slices * o); /* int64 sums */
    kernel(c, 12.0 * o, OPS_FIXED_ROUND * o);                       /* one rounding */
    check_record(c, cx);
}

/* nets/cuda/dense.cu, dt_cuda_dense_forward; nets/dispatch.c, plan_dense_forward: per shard
 * under math: fast and reduction: exact with shards. */
void dt_cost_dense_forward(struct dt_op_cost *c, const struct dt_cost_ctx *cx, float *y,
                           const float *x, const float *w, const float *bias, int64_t B, int64_t in,
                           int64_t out, const struct dt_policy *pol)
{
    if (library_sharded(cx, pol)) {
        for (int64_t k = 0; k < cx->shards; k++)
            cuda_dense_forward(c, pol, shard_rows(cx, B, k), in, out);
        return;
    }
    cuda_dense_forward(c, pol, B, in, out);
}

/* nets/cuda/dense.cu, dt_cuda_dense_backward_data; plan_dense_backward_data: per shard under
 * math: fast and reduction: exact with shards. */
void dt_cost_dense_backward_data(struct dt_op_cost *c, const struct dt_cost_ctx *cx, float *dx,
                                 const float *dy, const float *w, int64_t B, int64_t in,
                                 int64_t out, const struct dt_policy *pol)
{
    if (library_sharded(cx, pol)) {
        for (int64_t k = 0; k < cx->shards; k++)
            cuda_dense_backward_data(c, pol, shard_rows(cx, B, k), in, out);
        return;
    }
    cuda_dense_backward_data(c, pol, B, in, out);
}

/* dense.c, dt_cuda_dense_backward_weight_shards: every shard's partials in one launch at
 * portable, a thread per output of each shard walking its rows in order (the ordered
 * product's rate); false (nothing counted) where it declines. */
static bool wgrad_shards(struct dt_op_cost *c, const struct dt_cost_ctx *cx,
                         const struct dt_policy *pol, int64_t B, int64_t in, int64_t out)
{
    const int64_t widest = widest_shard(cx, B);
    if (!cx->one_pass || !dt_math_portable(pol) || dt_math_exact(pol) ||
        !dt_cuda_wgrad_one_launch_fits(cx->shards, widest))
        return false;
    const double n = (double)in * (double)out;
    kernel(c, 4.0 * ((double)B * (double)(in + out) + (double)cx->shards * n), 0.0);
    c->ordered_flops += MAC * (double)B * n;
    return true;
}

/* nets/cuda/dense.cu, dt_cuda_dense_backward_weight; plan_dense_backward_weight: under
 * reduction: exact with shards, dt_cuda_dense_backward_weight_shards (one launch at
 * portable), else a call per shard (dense_wgrad_shards -> dense_wgrad_per_shard). */
void dt_cost_dense_backward_weight(struct dt_op_cost *c, const struct dt_cost_ctx *cx, float *dw,
                                   const float *x, const float *dy, int64_t B, int64_t in,
                                   int64_t out, const struct dt_policy *pol)
{
    if (sharded(cx, pol)) {
        if (wgrad_shards(c, cx, pol, B, in, out)) return;
        for (int64_t k = 0; k < cx->shards; k++)
            cuda_dense_backward_weight(c, pol, shard_rows(cx, B, k), in, out);
        return;
    }
    cuda_dense_backward_weight(c, pol, B, in, out);
}

/* nets/cuda/dense.cu, dt_cuda_bias_backward_shards (bias_fixed_one_launch): every shard's
 * fixed-point partial in one launch (bias_fixed_shards_kernel, a block per shard reading its rows
 * twice: max, then the int64 sums and one rounding per column) and the op's check record;
 * DT_ERR_UNSUPPORTED (nothing launched) for float atomics, too many shards or columns, or too wide
 * a shard. */
static bool cuda_bias_backward_shards(struct dt_op_cost *c, const struct dt_cost_ctx *cx,
                                      const struct dt_policy *pol, int64_t B, int64_t out)
{
    const int64_t widest = widest_shard(cx, B);
    if (!cx->one_pass || !dt_atomics_exact(pol) ||
        !dt_cuda_bias_one_launch_fits(cx->shards, widest, out))
        return false;
    const double n = (double)B * (double)out, parts = (double)cx->shards * (double)out;
    kernel(c, 8.0 * n + 4.0 * parts, (OPS_SCAN + OPS_FIXED_TERM) * n + OPS_FIXED_ROUND * parts);
    check_record(c, cx);
    return true;
}

/* nets/cuda/dense.cu, dt_cuda_bias_backward; plan_bias_backward: under reduction: exact with
 * shards, bias_shards -- the backend's shard op where it takes the call, else one call per
 * shard (bias_per_shard). */
void dt_cost_bias_backward(struct dt_op_cost *c, const struct dt_cost_ctx *cx, float *dbias,
                           const float *dy, int64_t B, int64_t out, const struct dt_policy *pol)
{
    if (sharded(cx, pol)) {
        if (cuda_bias_backward_shards(c, cx, pol, B, out)) return;
        for (int64_t k = 0; k < cx->shards; k++)
            cuda_bias_backward(c, cx, pol, shard_rows(cx, B, k), out);
        return;
    }
    cuda_bias_backward(c, cx, pol, B, out);
}

/* ---- activations (nets/cuda/activation.cu) ---------------------------------------------- */

/* dt_cuda_relu_forward: one kernel. */
void dt_cost_relu_forward(struct dt_op_cost *c, const struct dt_cost_ctx *cx, float *y,
                          const float *x, int64_t n, const struct dt_policy *pol)
{
    kernel(c, 8.0 * (double)n, (double)n);
}

/* dt_cuda_relu_backward: one kernel. */
void dt_cost_relu_backward(struct dt_op_cost *c, const struct dt_cost_ctx *cx, float *dx,
                           const float *dy, const float *y, int64_t n, const struct dt_policy *pol)
{
    kernel(c, 12.0 * (double)n, (double)n);
}

/* ---- softmax cross-entropy (nets/cuda/loss.cu) ------------------------------------------- */

/* dt_cuda_softmax_xent_forward: reduction unordered -> the atomic total zeroed (a memset)
 * and added in the rows kernel; one rows kernel; the losses, hits and total copied back
 * and summed on the host: with a wait of its own, or -- a training step's loss with checks
 * deferred (dt_cuda_defer_loss) -- read with the step's end. */
static void cuda_softmax_xent_forward(struct dt_op_cost *c, const struct dt_cost_ctx *cx,
                                      const struct dt_policy *pol, int64_t B, int64_t C)
{
    const bool atomic_total = !dt_reduction_ordered(pol);
    const double Bd = (double)B, n = Bd * (double)C;
    if (atomic_total) memset_async(c, 4.0);
    kernel(c, 4.0 * (2.0 * n + 3.0 * Bd),
           n * FLOP_SOFTMAX + Bd * (FLOP_EXP + 2.0) + (atomic_total ? Bd : 0.0));
    if (!(cx->checks_deferred && cx->loss_deferred && cx->one_pass)) c->waits += 1;
}

/* nets/cuda/loss.cu, dt_cuda_softmax_xent_forward; plan_softmax_xent_forward: under
 * reduction: exact with shards, dt_cuda_softmax_xent_forward_shards (one rows kernel, one
 * read-back), else a call per shard (loss_per_shard). */
void dt_cost_softmax_xent_forward(struct dt_op_cost *c, const struct dt_cost_ctx *cx, float *probs,
                                  float *loss_host, int64_t *correct_host, const float *logits,
                                  const int32_t *labels, int64_t B, int64_t C,
                                  const struct dt_policy *pol)
{
    if (sharded(cx, pol)) {
        if (cx->one_pass && cx->shards <= DT_CUDA_SHARDS_MAX) { /* loss.c, _shards */
            cuda_softmax_xent_forward(c, cx, pol, B, C);
            return;
        }
        for (int64_t k = 0; k < cx->shards; k++)
            cuda_softmax_xent_forward(c, cx, pol, shard_rows(cx, B, k), C);
        return;
    }
    cuda_softmax_xent_forward(c, cx, pol, B, C);
}

/* nets/cuda/loss.cu, dt_cuda_softmax_xent_backward: one elementwise kernel. */
void dt_cost_softmax_xent_backward(struct dt_op_cost *c, const struct dt_cost_ctx *cx,
                                   float *dlogits, const float *probs, const int32_t *labels,
                                   int64_t B, int64_t C, int64_t denom, const struct dt_policy *pol)
{
    const double n = (double)B * (double)C;
    kernel(c, 4.0 * (2.0 * n + (double)B), 2.0 * n);
}

/* ---- optimizers (nets/cuda/optim.cu) ----------------------------------------------------- */

/* dt_cuda_sgd_update: one kernel (dt_sgd_elem: three products, three sums). */
void dt_cost_sgd_update(struct dt_op_cost *c, const struct dt_cost_ctx *cx, float *w, float *v,
                        const float *g, int64_t n, float lr, float momentum, float weight_decay,
                        const struct dt_policy *pol)
{
    kernel(c, 20.0 * (double)n, 6.0 * (double)n);
}

/* ---- convolution and pooling (nets/cuda/conv_choose.c, conv.cu, cudnn_conv.c) ---------- */

static double conv_rows(const struct dt_conv2d_shape *s)
{
    return (double)s->B * (double)s->OH * (double)s->OW;
}
static double conv_patch(const struct dt_conv2d_shape *s)
{
    return (double)s->KH * (double)s->KW * (double)s->C;
}
static double conv_cells(const struct dt_conv2d_shape *s)
{
    return (double)s->B * (double)s->H * (double)s->W * (double)s->C;
}

/* conv.cu, dt_cuda_im2col: x read, the patches written. */
static void im2col(struct dt_op_cost *c, const struct dt_conv2d_shape *s)
{
    kernel(c, 4.0 * (conv_cells(s) + conv_rows(s) * conv_patch(s)), 0.0);
}

/* conv.cu, dt_cuda_transpose: the weights between HWIO and cuDNN's KRSC. */
static void weight_transpose(struct dt_op_cost *c, const struct dt_conv2d_shape *s)
{
    kernel(c, 8.0 * conv_patch(s) * (double)s->K_out, 0.0);
}

/* cudnn_conv.c: cuDNN's math (set_conv): CUDNN_DEFAULT_MATH, TF32 allowed, under autotune;
 * CUDNN_FMA_MATH under deterministic. */
static bool cudnn_tf32(const struct dt_policy *pol)
{
    switch (pol->conv_algo) {
    case DT_CONV_ALGO_AUTOTUNE: return true;
    case DT_CONV_ALGO_DETERMINISTIC:
    case DT_CONV_ALGO_OWN: return false;
    }
    return false;
}

/* One cuDNN convolution call (forward, backward data or filter): x, w and y once each,
 * 2 x the convolution's multiply-adds. */
static void cudnn_conv(struct dt_op_cost *c, const struct dt_policy *pol,
                       const struct dt_conv2d_shape *s)
{
    const double y = conv_rows(s) * (double)s->K_out, wn = conv_patch(s) * (double)s->K_out;
    c->launches += 1;
    c->lib_calls += 1;
    c->bytes += 4.0 * (conv_cells(s) + wn + y);
    c->lib_flops += 2.0 * y * conv_patch(s);
    if (cudnn_tf32(pol)) c->lib_tf32 = true;
}

/* conv.c, dt_cuda_own_conv2d_forward: im2col, then the dense forward over the patches. */
static void own_conv2d_forward(struct dt_op_cost *c, const struct dt_policy *pol,
                               const struct dt_conv2d_shape *s)
{
    im2col(c, s);
    cuda_dense_forward(c, pol, s->B * s->OH * s->OW, s->KH * s->KW * s->C, s->K_out);
}

/* conv.c, dt_cuda_own_conv2d_backward_weight: im2col, then the dense weight gradient. */
static void own_conv2d_backward_weight(struct dt_op_cost *c, const struct dt_policy *pol,
                                       const struct dt_conv2d_shape *s)
{
    im2col(c, s);
    cuda_dense_backward_weight(c, pol, s->B * s->OH * s->OW, s->KH * s->KW * s->C, s->K_out);
}

/* conv.c, dt_cuda_own_conv2d_backward_data: the patch gradients by the dense backward-data,
 * then col2im: fixed_point -> dt_cuda_fixed_scan, the per-cell gather (col2im_fixed) and the
 * check record; float -> dt_cuda_col2im_atomic (a memset of dx and an atomicAdd kernel). */
static void own_conv2d_backward_data(struct dt_op_cost *c, const struct dt_cost_ctx *cx,
                                     const struct dt_policy *pol, const struct dt_conv2d_shape *s)
{
    const double cols = conv_rows(s) * conv_patch(s), cells = conv_cells(s);
    cuda_dense_backward_data(c, pol, s->B * s->OH * s->OW, s->KH * s->KW * s->C, s->K_out);
    if (dt_atomics_exact(pol)) {
        fixed_scan(c, cols);
        kernel(c, 4.0 * (cols + cells), OPS_FIXED_TERM * cols + OPS_FIXED_ROUND * cells);
        check_record(c, cx);
        return;
    }
    memset_async(c, 4.0 * cells);
    kernel(c, 4.0 * (cols + 2.0 * cells), cols);
}

/* conv_choose.c, dt_cuda_conv2d_forward: cuDNN (cudnn_conv.c, dt_cudnn_conv2d_forward: the
 * weights to KRSC, cudnnConvolutionForward, dt_cuda_bias_add) or the own kernels. */
static void cuda_conv2d_forward(struct dt_op_cost *c, const struct dt_policy *pol,
                                const struct dt_conv2d_shape *s)
{
    if (!dt_conv_algo_library(pol)) {
        own_conv2d_forward(c, pol, s);
        return;
    }
    const double y = conv_rows(s) * (double)s->K_out;
    weight_transpose(c, s);
    cudnn_conv(c, pol, s);
    kernel(c, 4.0 * (2.0 * y + (double)s->K_out), y);
}

/* conv_choose.c, dt_cuda_conv2d_backward_data: cuDNN (dt_cudnn_conv2d_backward_data: the
 * weights to KRSC, cudnnConvolutionBackwardData) or the own kernels. */
static void cuda_conv2d_backward_data(struct dt_op_cost *c, const struct dt_cost_ctx *cx,
                                      const struct dt_policy *pol, const struct dt_conv2d_shape *s)
{
    if (!dt_conv_algo_library(pol)) {
        own_conv2d_backward_data(c, cx, pol, s);
        return;
    }
    weight_transpose(c, s);
    cudnn_conv(c, pol, s);
}

/* conv_choose.c, dt_cuda_conv2d_backward_weight: cuDNN (dt_cudnn_conv2d_backward_weight:
 * cudnnConvolutionBackwardFilter, the gradient back from KRSC) or the own kernels. */
static void cuda_conv2d_backward_weight(struct dt_op_cost *c, const struct dt_policy *pol,
                                        const struct dt_conv2d_shape *s)
{
    if (!dt_conv_algo_library(pol)) {
        own_conv2d_backward_weight(c, pol, s);
        return;
    }
    cudnn_conv(c, pol, s);
    weight_transpose(c, s);
}

/* conv_choose.c, dt_cuda_conv2d_forward; plan_conv2d_forward: per shard under math: fast
 * and reduction: exact with shards (conv_forward_per_shard). */
void dt_cost_conv2d_forward(struct dt_op_cost *c, const struct dt_cost_ctx *cx, float *y,
                            const float *x, const float *w, const float *bias,
                            const struct dt_conv2d_shape *s, const struct dt_policy *pol)
{
    if (library_sharded(cx, pol)) {
        struct dt_conv2d_shape part = *s;
        for (int64_t k = 0; k < cx->shards; k++) {
            part.B = shard_rows(cx, s->B, k);
            cuda_conv2d_forward(c, pol, &part);
        }
        return;
    }
    cuda_conv2d_forward(c, pol, s);
}

/* conv_choose.c, dt_cuda_conv2d_backward_data; plan_conv2d_backward_data: per shard under
 * math: fast and reduction: exact with shards (conv_bwd_data_per_shard). */
void dt_cost_conv2d_backward_data(struct dt_op_cost *c, const struct dt_cost_ctx *cx, float *dx,
                                  const float *dy, const float *w, const struct dt_conv2d_shape *s,
                                  const struct dt_policy *pol)
{
    if (library_sharded(cx, pol)) {
        struct dt_conv2d_shape part = *s;
        for (int64_t k = 0; k < cx->shards; k++) {
            part.B = shard_rows(cx, s->B, k);
            cuda_conv2d_backward_data(c, cx, pol, &part);
        }
        return;
    }
    cuda_conv2d_backward_data(c, cx, pol, s);
}

/* conv_choose.c, dt_cuda_conv2d_backward_weight; plan_conv2d_backward_weight: per shard
 * under reduction: exact with shards (conv_wgrad_per_shard). */
void dt_cost_conv2d_backward_weight(struct dt_op_cost *c, const struct dt_cost_ctx *cx, float *dw,
                                    const float *x, const float *dy,
                                    const struct dt_conv2d_shape *s, const struct dt_policy *pol)
{
    if (sharded(cx, pol)) {
        /* conv.c, dt_cuda_conv2d_backward_weight_shards: own kernels at portable -- im2col of
         * the batch, then every shard's partials in one launch */
        if (!dt_conv_algo_library(pol) &&
            wgrad_shards(c, cx, pol, s->B * s->OH * s->OW, s->KH * s->KW * s->C, s->K_out)) {
            im2col(c, s);
            return;
        }
        struct dt_conv2d_shape part = *s;
        for (int64_t k = 0; k < cx->shards; k++) {
            part.B = shard_rows(cx, s->B, k);
            cuda_conv2d_backward_weight(c, pol, &part);
        }
        return;
    }
    cuda_conv2d_backward_weight(c, pol, s);
}

static double pool_outs(const struct dt_pool2d_shape *s)
{
    return (double)s->B * (double)s->OH * (double)s->OW * (double)s->C;
}
static double pool_cells(const struct dt_pool2d_shape *s)
{
    return (double)s->B * (double)s->H * (double)s->W * (double)s->C;
}

/* conv.c, dt_cuda_maxpool2d_forward: one kernel at every level (y and argmax). */
void dt_cost_maxpool2d_forward(struct dt_op_cost *c, const struct dt_cost_ctx *cx, float *y,
                               int32_t *argmax, const float *x, const struct dt_pool2d_shape *s,
                               const struct dt_policy *pol)
{
    kernel(c, 4.0 * (pool_cells(s) + 2.0 * pool_outs(s)),
           pool_outs(s) * (double)s->K * (double)s->K);
}

/* conv_choose.c, dt_cuda_maxpool2d_backward: cuDNN's cudnnPoolingBackward (cudnn_conv.c:
 * y, dy, x read, dx written; no product) or conv.c, dt_cuda_own_maxpool2d_backward: windows
 * apart (K <= stride) -> the direct kernel; fixed_point -> dt_cuda_fixed_scan, the per-cell
 * gather and the check record; float -> a memset of dx and an atomicAdd kernel. */
void dt_cost_maxpool2d_backward(struct dt_op_cost *c, const struct dt_cost_ctx *cx, float *dx,
                                const float *dy, const float *x, const float *y,
                                const int32_t *argmax, const struct dt_pool2d_shape *s,
                                const struct dt_policy *pol)
{
    const double outs = pool_outs(s), cells = pool_cells(s);
    if (dt_conv_algo_library(pol)) {
        c->launches += 1;
        c->bytes += 4.0 * (2.0 * outs + 2.0 * cells);
        return;
    }
    if (s->K <= s->stride) {
        kernel(c, 4.0 * (2.0 * outs + cells), 0.0);
        return;
    }
    if (dt_atomics_exact(pol)) {
        fixed_scan(c, outs);
        kernel(c, 4.0 * (2.0 * outs + cells), OPS_FIXED_TERM * outs + OPS_FIXED_ROUND * cells);
        check_record(c, cx);
        return;
    }
    memset_async(c, 4.0 * cells);
    kernel(c, 4.0 * (2.0 * outs + 2.0 * cells), outs);
}

/* ---- Bayesian layers and epsilon (nets/cuda/bnn.cu) --------------------------------------- */

/* dt_cuda_eps_philox: one kernel, a thread per Philox block of 4 (two Gaussian pairs). */
void dt_cost_eps_philox(struct dt_op_cost *c, const struct dt_cost_ctx *cx, float *eps, int64_t n,
                        const struct dt_philox_stream *s, const struct dt_policy *pol)
{
    const double blocks = (double)((n + 3) / 4);
    kernel(c, 4.0 * (double)n, blocks * (OPS_PHILOX + 2.0 * OPS_GAUSS_PAIR));
}

/* dt_cuda_eps_lfsr_seed: one kernel, a Philox block per lane. */
void dt_cost_eps_lfsr_seed(struct dt_op_cost *c, const struct dt_cost_ctx *cx,
                           struct dt_xoro *lanes, int64_t P, uint64_t seed, uint32_t step,
                           uint32_t member, uint32_t sample, const struct dt_policy *pol)
{
    kernel(c, (double)sizeof(struct dt_xoro) * (double)P, (double)P * OPS_PHILOX);
}

/* dt_cuda_eps_lfsr: one kernel, a thread per lane walking dt_eps_lane_steps steps (every
 * lane the same count, whatever its chunk holds), a Gaussian pair per step. */
void dt_cost_eps_lfsr(struct dt_op_cost *c, const struct dt_cost_ctx *cx, float *eps, int64_t n,
                      struct dt_xoro *lanes, int64_t P, bool backward, int64_t skip_lane,
                      const struct dt_policy *pol)
{
    const double steps = (double)dt_eps_lane_steps(n, P), pairs = (double)P * steps;
    kernel(c, 4.0 * (double)n + 2.0 * (double)sizeof(struct dt_xoro) * (double)P,
           pairs * (OPS_XORO + OPS_GAUSS_PAIR));
    c->serial_ops += steps * (OPS_XORO + OPS_GAUSS_PAIR); /* a lane walks its draws in turn */
}

/* dt_cuda_bnn_sigma: one kernel (softplus and the logistic: exp, log1p, exp). */
void dt_cost_bnn_sigma(struct dt_op_cost *c, const struct dt_cost_ctx *cx, float *sigma,
                       float *dsigma, const float *rho, int64_t n, const struct dt_policy *pol)
{
    kernel(c, 12.0 * (double)n, (3.0 * FLOP_EXP + FLOP_DIV + 3.0) * (double)n);
}

/* dt_cuda_bnn_sample: one kernel (a product and a sum). */
void dt_cost_bnn_sample(struct dt_op_cost *c, const struct dt_cost_ctx *cx, float *w,
                        const float *mu, const float *sigma, const float *eps, int64_t n,
                        const struct dt_policy *pol)
{
    kernel(c, 16.0 * (double)n, 2.0 * (double)n);
}

/* dt_cuda_bnn_accumulate: one kernel; with first the gradients are assigned (not read). */
void dt_cost_bnn_accumulate(struct dt_op_cost *c, const struct dt_cost_ctx *cx, float *gmu,
                            float *grho, const float *g, const float *eps, const float *dsigma,
                            int64_t n, bool first, const struct dt_policy *pol)
{
    kernel(c, (first ? 20.0 : 28.0) * (double)n, (first ? 2.0 : 4.0) * (double)n);
}

/* dt_cuda_bnn_finish: one kernel (dt_bnn_finish_elem: seven products, a quotient, three
 * sums). */
void dt_cost_bnn_finish(struct dt_op_cost *c, const struct dt_cost_ctx *cx, float *gmu, float *grho,
                        const float *mu, const float *sigma, const float *dsigma, int64_t n,
                        float inv_samples, float kl_weight, float prior_var,
                        const struct dt_policy *pol)
{
    kernel(c, 28.0 * (double)n, (10.0 + FLOP_DIV) * (double)n);
}

/* ---- reduction: exact (nets/cuda/exact.cu) ---------------------------------------------- */

/* dt_cuda_exact_sum: one kernel per tensor (exact_sum_kernel, mode 0): its `slots` partials
 * read, each term to int64 at the tensor's shift, one rounding into slot 0. */
void dt_cost_exact_sum(struct dt_op_cost *c, const struct dt_cost_ctx *cx, float *pack,
                       const uint32_t *max_bits, const struct dt_exact_layout *L)
{
    for (int i = 0; i < L->tensors; i++) {
        const double elems = (double)L->n[i], terms = (double)L->slots * elems;
        kernel(c, 4.0 * (terms + elems), OPS_FIXED_TERM * terms + OPS_FIXED_ROUND * elems);
    }
}

/* ---- the transformer's ops (nets/cuda/embedding.cu, norm.cu, attention.cu)
 * ------------------------------------------- */

/* dt_cuda_embedding_forward: the tokens kernel, then the embedding kernel (wte's rows
 * gathered: at most the vocabulary, DT_GPT_VOCAB, counted once; wpe's T rows once). */
void dt_cost_embedding_forward(struct dt_op_cost *c, const struct dt_cost_ctx *cx, float *h,
                               int32_t *tokens, int32_t *targets, const float *x, const float *wte,
                               const float *wpe, int64_t B, int64_t T, int64_t D,
                               const struct dt_policy *pol)
{
    const double rows = (double)B * (double)T, xs = (double)B * (double)(T + 1);
    const double vocab = rows < DT_GPT_VOCAB ? rows : (double)DT_GPT_VOCAB;
    kernel(c, 4.0 * (xs + 2.0 * rows), 0.0);
    kernel(c, 4.0 * (xs + (vocab + (double)T + rows) * (double)D), rows * (double)D);
}

/* dt_cuda_embedding_backward: atomics float -> dwte zeroed (unless accumulating) and one
 * atomicAdd per term; fixed_point -> dt_cuda_embedding_scatter_fixed (dt_cuda_fixed_scan,
 * the counters zeroed, the int64 scatter, one rounding per entry) and the check record. */
static void cuda_embedding_backward(struct dt_op_cost *c, const struct dt_cost_ctx *cx,
                                    const struct dt_policy *pol, int64_t rows, int64_t V, int64_t D,
                                    bool accumulate)
{
    const double terms = (double)rows * (double)D, table = (double)V * (double)D;
    if (!dt_atomics_exact(pol)) {
        if (!accumulate) memset_async(c, 4.0 * table);
        kernel(c, 4.0 * ((double)rows + terms + 2.0 * table), terms);
        return;
    }
    fixed_scan(c, terms);
    kernel(c, 8.0 * table, 0.0);
    kernel(c, 4.0 * ((double)rows + terms) + 16.0 * table, OPS_FIXED_TERM * terms);
    kernel(c, (accumulate ? 16.0 : 12.0) * table,
           (OPS_FIXED_ROUND + (accumulate ? 1.0 : 0.0)) * table);
    check_record(c, cx);
}

/* nets/cuda/embedding.cu, dt_cuda_embedding_backward; plan_embedding_backward: per shard under
 * reduction: exact with shards (embedding_bwd_per_shard: a table per shard). */
void dt_cost_embedding_backward(struct dt_op_cost *c, const struct dt_cost_ctx *cx, float *dwte,
                                const float *dh, const int32_t *tokens, int64_t rows, int64_t V,
                                int64_t D, bool accumulate, const struct dt_policy *pol)
{
    if (sharded(cx, pol)) {
        for (int64_t k = 0; k < cx->shards; k++)
            cuda_embedding_backward(c, cx, pol, shard_rows(cx, rows, k), V, D, accumulate);
        return;
    }
    cuda_embedding_backward(c, cx, pol, rows, V, D, accumulate);
}

/* dt_cuda_layernorm_forward: one kernel, a warp per row (dt_layernorm_row's lanes; the
 * butterfly's 5 shuffles a sum, 10 in all, counted as flops). */
void dt_cost_layernorm_forward(struct dt_op_cost *c, const struct dt_cost_ctx *cx, float *y,
                               float *mean, float *rstd, const float *x, const float *gamma,
                               const float *beta, int64_t rows, int64_t D,
                               const struct dt_policy *pol)
{
    const double r = (double)rows, d = (double)D;
    kernel(c, 4.0 * (2.0 * r * d + 2.0 * d + 2.0 * r),
           r * (8.0 * d + 3.0 * FLOP_DIV + 2.0 + 2.0 * 5.0 * DT_GPT_LN_LANES));
}

/* dt_cuda_layernorm_backward: one kernel, a warp per row (dt_layernorm_row_grad's lanes, two
 * butterflies); dx read too when accumulating. */
void dt_cost_layernorm_backward(struct dt_op_cost *c, const struct dt_cost_ctx *cx, float *dx,
                                float *gx, const float *dy, const float *x, const float *mean,
                                const float *rstd, const float *gamma, int64_t rows, int64_t D,
                                bool accumulate, const struct dt_policy *pol)
{
    const double r = (double)rows, d = (double)D, acc = accumulate ? 1.0 : 0.0;
    kernel(c, 4.0 * ((4.0 + acc) * r * d + d + 2.0 * r),
           r * ((14.0 + acc) * d + 2.0 * FLOP_DIV + 2.0 * 5.0 * DT_GPT_LN_LANES));
}

/* The causal (query, key) pairs of one head: T (T + 1) / 2. */
static double causal_pairs(int64_t T) { return (double)T * (double)(T + 1) / 2.0; }

/* dt_cuda_attention_forward: math portable -> one kernel, a block per query tile with the
 * key tiles in shared memory, a thread per row running dt_attn_tile (each score once, its
 * exponential twice: in its tile, and again for the stored weight) then P V's sums; math exact ->
 * one kernel, a thread per (b, h, t) row (dt_attn_row's two-pass softmax, exact products); fast,
 * strict -> min(B, H) cuBLAS strided batches for the scores (over one example's heads, or over the
 * examples for one head), the causal softmax kernel, as many for P V (nets/gpt_attn_gemm.h; full T
 * x T products, the causal zeros included). */
void dt_cost_attention_forward(struct dt_op_cost *c, const struct dt_cost_ctx *cx, float *out,
                               float *att, const float *qkv, int64_t B, int64_t T, int64_t H,
                               int64_t D, const struct dt_policy *pol)
{
    const double hd = (double)(D / H), heads = (double)B * (double)H, pairs = causal_pairs(T);
    const double Td = (double)T, tok = (double)B * Td * (double)D, scores = heads * Td * Td;
    if (dt_math_portable(pol)) {
        const bool exact = dt_math_exact(pol);
        const double mac = exact ? OPS_XP_MAC : MAC;
        kernel(c, 4.0 * (3.0 * tok + scores + tok),
               exact ? heads * pairs * (2.0 * hd * mac + 1.0 + FLOP_SOFTMAX)
                     : heads * pairs * (2.0 * hd * mac + 2.0 + 2.0 * FLOP_SOFTMAX));
        return;
    }
    const struct dt_attn_shape s = dt_attn_shape_of(B, T, H, D);
    const int64_t calls = dt_attn_gemm_calls(&s);
    const double batch = heads / (double)calls;
    for (int64_t i = 0; i < calls; i++) cublas_gemm(c, pol, Td, Td, hd, batch);
    kernel(c, 8.0 * scores, heads * pairs * FLOP_SOFTMAX);
    for (int64_t i = 0; i < calls; i++) cublas_gemm(c, pol, hd, Td, Td, batch);
}

/* dt_cuda_attention_backward: math portable (and exact) -> the dS kernel (a thread per
 * row: dP, then dt_attn_dscores_finish) and the gradient kernel (a thread per element of
 * dqkv); fast, strict -> min(B, H) batches for dP, the dS kernel, min(B, H) times three
 * batches (dQ, dK, dV). */
void dt_cost_attention_backward(struct dt_op_cost *c, const struct dt_cost_ctx *cx, float *dqkv,
                                float *ds, const float *dout, const float *att, const float *qkv,
                                int64_t B, int64_t T, int64_t H, int64_t D,
                                const struct dt_policy *pol)
{
    const double hd = (double)(D / H), heads = (double)B * (double)H, pairs = causal_pairs(T);
    const double Td = (double)T, tok = (double)B * Td * (double)D, scores = heads * Td * Td;
    if (dt_math_portable(pol)) {
        const double mac = dt_math_exact(pol) ? OPS_XP_MAC : MAC;
        kernel(c, 4.0 * (scores + tok + 3.0 * tok + scores),
               heads * pairs * (hd * mac + mac + 3.0));
        /* dq: u + 1 terms, dk and dv: T - u terms each, per element: 3 pairs per column */
        kernel(c, 4.0 * (2.0 * scores + tok + 3.0 * tok + 3.0 * tok),
               (double)B * 3.0 * pairs * (double)D * mac);
        return;
    }
    const struct dt_attn_shape s = dt_attn_shape_of(B, T, H, D);
    const int64_t calls = dt_attn_gemm_calls(&s);
    const double batch = heads / (double)calls;
    for (int64_t i = 0; i < calls; i++) cublas_gemm(c, pol, Td, Td, hd, batch);
    kernel(c, 12.0 * scores, heads * pairs * (MAC + 3.0));
    for (int64_t i = 0; i < calls; i++)
        for (int which = 0; which < 3; which++) cublas_gemm(c, pol, hd, Td, Td, batch);
}

/* dt_cuda_gelu_forward: one kernel (dt_gelu: a tanh, eight products and sums). */
void dt_cost_gelu_forward(struct dt_op_cost *c, const struct dt_cost_ctx *cx, float *y,
                          const float *x, int64_t n, const struct dt_policy *pol)
{
    kernel(c, 8.0 * (double)n, (8.0 + FLOP_EXP) * (double)n);
}

/* dt_cuda_gelu_backward: one kernel (dt_gelu_grad: a tanh, seventeen products and sums). */
void dt_cost_gelu_backward(struct dt_op_cost *c, const struct dt_cost_ctx *cx, float *dx,
                           const float *dy, const float *x, int64_t n, const struct dt_policy *pol)
{
    kernel(c, 12.0 * (double)n, (17.0 + FLOP_EXP) * (double)n);
}

/* dt_cuda_add: one kernel. */
void dt_cost_add(struct dt_op_cost *c, const struct dt_cost_ctx *cx, float *y, const float *x,
                 int64_t n, const struct dt_policy *pol)
{
    kernel(c, 12.0 * (double)n, (double)n);
}

/* nets/cuda/optim.cu, dt_cuda_adamw_update: one kernel (dt_adamw_elem: the decay, both
 * moments, three quotients, a square root). */
void dt_cost_adamw_update(struct dt_op_cost *c, const struct dt_cost_ctx *cx, float *w, float *m,
                          float *v, const float *g, int64_t n, const struct dt_adamw_step *s,
                          const struct dt_policy *pol)
{
    const double decay = s->weight_decay != 0.0f ? 3.0 : 0.0;
    kernel(c, 28.0 * (double)n, (decay + 14.0 + 4.0 * FLOP_DIV) * (double)n);
}

/* nets/cuda/optim.cu, dt_cuda_grad_norm: reduction exact -> the init kernel, a max kernel per
 * tensor, a sum kernel per tensor (every square to int64 at one shift), the finish kernel;
 * otherwise *norm_sq zeroed (a memset), then per tensor: fixed -> chunk sums, the fixed
 * tree (reduce_tree over one float: its levels and copy) and the in-order add (one
 * thread); unordered -> one kernel of chunk sums, one atomicAdd a block. */
void dt_cost_grad_norm(struct dt_op_cost *c, const struct dt_cost_ctx *cx, float *norm_sq,
                       const float *const *g, const int64_t *n, int count,
                       const struct dt_policy *pol)
{
    if (dt_reduction_exact(pol)) {
        kernel(c, 0.0, 0.0);
        for (int i = 0; i < count; i++) kernel(c, 4.0 * (double)n[i], OPS_SCAN * (double)n[i]);
        for (int i = 0; i < count; i++)
            kernel(c, 4.0 * (double)n[i], (1.0 + OPS_FIXED_TERM) * (double)n[i]);
        kernel(c, 0.0, OPS_FIXED_ROUND);
        return;
    }
    memset_async(c, 4.0);
    for (int i = 0; i < count; i++) {
        if (n[i] <= 0) continue;
        const double elems = (double)n[i];
        if (dt_reduction_ordered(pol)) {
            const int64_t chunks = dt_reduce_chunks(n[i]);
            kernel(c, 4.0 * (elems + (double)chunks), MAC * elems);
            reduce_tree(c, chunks, 1.0);
            kernel(c, 0.0, 1.0);
        } else {
            const double chunks = (double)((n[i] + DT_UNORDERED_CHUNK - 1) / DT_UNORDERED_CHUNK);
            kernel(c, 4.0 * elems, MAC * elems + chunks);
        }
    }
}

/* nets/cuda/optim.cu, dt_cuda_clip_scale: one kernel; counted as clipping (a factor of 1
 * returns before touching g: then it moves nothing). */
void dt_cost_clip_scale(struct dt_op_cost *c, const struct dt_cost_ctx *cx, float *g, int64_t n,
                        const float *norm_sq, float max_norm, const struct dt_policy *pol)
{
    kernel(c, 8.0 * (double)n, (double)n);
}

/* nets/cuda/activation.cu, dt_cuda_dropout: one kernel, a thread per row, by mode: philox draws a
 * Philox block per 4 elements; keep and lfsr walk the row's lane (read and written), a
 * xoroshiro step per pair, keep writing a byte per element; stored reads them. */
void dt_cost_dropout(struct dt_op_cost *c, const struct dt_cost_ctx *cx, float *y, const float *x,
                     uint8_t *keep, struct dt_xoro *lanes, int64_t rows, int64_t width,
                     const struct dt_dropout_site *s, const struct dt_policy *pol)
{
    const double elems = (double)rows * (double)width;
    const double lane_bytes = 2.0 * (double)sizeof(struct dt_xoro) * (double)rows;
    const double steps = (double)rows * (double)((width + 1) / 2);
    double bytes = 8.0 * elems, flops = elems; /* x read, y written; a product per element */
    switch (s->mode) {
    case DT_DROPOUT_PHILOX: flops += OPS_PHILOX * elems / 4.0; break;
    case DT_DROPOUT_KEEP:
        bytes += elems + lane_bytes;
        flops += OPS_XORO * steps;
        break;
    case DT_DROPOUT_STORED: bytes += elems; break;
    case DT_DROPOUT_LFSR_FORWARD:
    case DT_DROPOUT_LFSR_BACKWARD:
        bytes += lane_bytes;
        flops += OPS_XORO * steps;
        break;
    }
    kernel(c, bytes, flops);
}

/* nets/cuda/activation.cu, dt_cuda_dropout_seed: one kernel, a Philox block per row's lane. */
void dt_cost_dropout_seed(struct dt_op_cost *c, const struct dt_cost_ctx *cx, struct dt_xoro *lanes,
                          int64_t rows, int64_t row0, uint64_t seed, uint32_t step, uint32_t member,
                          const struct dt_policy *pol)
{
    kernel(c, (double)sizeof(struct dt_xoro) * (double)rows, OPS_PHILOX * (double)rows);
}

/* ---- the tree digests (nets/cuda/digest.cu) ------------------------------------------- */

/* SHA-256 compressions of a message of `len` bytes (padding: 0x80 and the 8-byte length). */
static double sha256_blocks(int64_t len) { return (double)((len + 9 + 63) / 64); }

/* Digests at level l of an n-byte tensor's tree (level 0: its leaves; core/tree_hash.h). */
static int64_t tree_count(int64_t bytes, int l)
{
    int64_t d = dt_tree_leaves((uint64_t)bytes);
    for (int i = 0; i < l && d > 1; i++) d = dt_tree_parents(d);
    return d;
}

/* dt_cuda_tensor_digests: the plan up through pinned scratch (a host-to-device copy, not a
 * launch), leaf_kernel (a thread per 4 KiB leaf of every tensor), step_kernel per level
 * of the plan (a thread per node of 64 child digests, or a tensor's top carried up), then
 * tensor_kernel (a thread per tensor). No wait: the caller's read of the digests waits. */
void dt_cost_tensor_digests(struct dt_op_cost *c, const struct dt_cost_ctx *cx, uint8_t *digests,
                            const float *const *tensors, const int64_t *counts, int n,
                            const struct dt_policy *pol)
{
    double data = 0.0, leaves = 0.0, leaf_blocks = 0.0;
    int levels = 0;
    for (int t = 0; t < n; t++) {
        const int64_t bytes = counts[t] * 4, full = bytes / DT_TREE_LEAF_BYTES;
        const int64_t rest = bytes - full * DT_TREE_LEAF_BYTES;
        data += (double)bytes;
        leaves += (double)dt_tree_leaves((uint64_t)bytes);
        leaf_blocks += (double)full * sha256_blocks(1 + DT_TREE_LEAF_BYTES);
        if (rest > 0 || bytes == 0) leaf_blocks += sha256_blocks(1 + rest);
        int depth = 0;
        while (tree_count(bytes, depth) > 1) depth++;
        if (depth > levels) levels = depth;
    }
    /* one thread per leaf and node: its compressions are one dependent chain (serial) */
    double longest = 0.0;
    for (int t = 0; t < n; t++)
        if (counts[t] > 0) {
            const double b = sha256_blocks(
                1 + (counts[t] * 4 < DT_TREE_LEAF_BYTES ? counts[t] * 4 : DT_TREE_LEAF_BYTES));
            longest = b > longest ? b : longest;
        }
    kernel(c, data + 32.0 * leaves, OPS_SHA256_BLOCK * leaf_blocks);
    c->serial_ops += OPS_SHA256_BLOCK * (longest > 0 ? longest : 1.0);
    if (levels > 0)
        c->serial_ops += OPS_SHA256_BLOCK * levels * sha256_blocks(1 + 32 * DT_TREE_ARITY);
    c->serial_ops += OPS_SHA256_BLOCK * sha256_blocks(9 + 32);
    for (int l = 0; l < levels; l++) {
        double in = 0.0, next = 0.0, blocks = 0.0;
        for (int t = 0; t < n; t++) {
            const int64_t bytes = counts[t] * 4, below = tree_count(bytes, l);
            const int64_t nodes = below > 1 ? dt_tree_parents(below) : 1;
            in += (double)below;
            next += (double)nodes;
            if (below == 1) continue; /* its top carried up: a copy */
            const int64_t last = below - (nodes - 1) * DT_TREE_ARITY;
            blocks += (double)(nodes - 1) * sha256_blocks(1 + 32 * DT_TREE_ARITY) +
                      sha256_blocks(1 + 32 * last);
        }
        kernel(c, 32.0 * (in + next), OPS_SHA256_BLOCK * blocks);
    }
    kernel(c, 64.0 * (double)n, OPS_SHA256_BLOCK * sha256_blocks(9 + 32) * (double)n);
}

/* ---- the exact product ---------------------------------------------------------------------- */

/* nets/cuda/matmul_exact.cu, dt_cuda_matmul_exact: the int8 form (xp_product above). */
void dt_cost_matmul_exact(struct dt_op_cost *c, const struct dt_cost_ctx *cx, float *C,
                          const float *A, const float *B, const float *bias, int64_t M, int64_t K,
                          int64_t N, int trans, int levels, const struct dt_policy *pol)
{
    xp_product(c, M, K, N, levels, bias != NULL);
}

/* ---- the hashing pipeline's snapshot (nets/cuda/backend_cuda.c, snapshot) --------------- */

void dt_cost_snapshot(struct dt_op_cost *c, const struct dt_cost_tally *t, const int64_t *counts,
                      int n)
{
    double bytes = 0.0;
    for (int i = 0; i < n; i++) bytes += 8.0 * (double)counts[i]; /* read and written */
    if (n >= 2 && t->one_pass) { /* gather_words_kernel (the table kept on the device) */
        kernel(c, bytes, 0.0);
        return;
    }
    for (int i = 0; i < n; i++) memset_async(c, 8.0 * (double)counts[i]); /* a D2D copy each */
}

/* nets/cuda/status.c, dt_cuda_read_deferred: no wait of its own with checks deferred (read
 * with the step's end), a download's wait with DETRAIN_CUDA_ONE_PASS=0. */
bool dt_cost_read_deferred_waits(const struct dt_cost_tally *t) { return !t->one_pass; }

/* The switches the counts follow, read once as counting starts (not at every count). */
static void cuda_cost_begin(struct dt_cost_tally *t) { t->one_pass = dt_cuda_one_pass(); }

const struct dt_cost_model dt_cuda_cost_model = {
#define DT_COST_MODEL_ROW_(ENUM, name, phase, outputs, controls, params, args)                     \
    .name = dt_cost_##name,
    DT_OP_LIST(DT_COST_MODEL_ROW_)
#undef DT_COST_MODEL_ROW_
        .begin = cuda_cost_begin,
    .read_deferred_waits = dt_cost_read_deferred_waits};
