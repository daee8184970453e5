/* What one launch of the CUDA backend costs, described where the launch is made: every
 * kernel (DT_LAUNCH, nets/cuda/launch.cuh), memset, device copy and library product names its
 * work beside the call, in the units of nets/cost.h's struct dt_op_cost. In a real run the
 * description is not read. In a recording backend (dt_cuda_recorder_create: no device,
 * struct dt_cuda_launch.record set) nothing is launched and each description is added to the
 * record instead: the cost model (nets/cost_cuda.c) is the host code itself, run without a
 * GPU, so its counts cannot drift from the launches (issue 66, item 1).
 *
 * Conventions (those of the hand-kept model, nets/cuda/cost.c, that this replaced).
 *   launches  each kernel, each cuBLAS or cuDNN call, each cudaMemsetAsync and device-to-device
 *             cudaMemcpyAsync; lib_calls the library calls among them. Copies between host and
 *             device are not launches (a blocking one is a wait).
 *   bytes     device memory read plus written, each tensor once per kernel that streams it (a
 *             gathered or scattered tensor once; read-modify-write twice); float and int32 4
 *             bytes, int64 8, dt_xp_acc 16. Records and scalars of a few bytes: 0.
 *   flops     detrain's own kernels, rough: add, subtract, multiply, compare 1; a product added
 *             to a sum (dt_dense_mac's two roundings, or an FMA) 2 (DT_W_MAC); divide, square
 *             root 4; exp, log, log1p, tanh, sine or cosine 10. Integer work that is a kernel's
 *             substance counts as flop-equivalents, about one per 32-bit operation (DT_W_OPS_*):
 *             fixed-point terms, exact dot products, the generators, SHA-256. Data movement
 *             (copies, transposes, im2col, gathers) is 0.
 *   ordered_flops  the ordered product's (gemm_ordered_kernel): every term two roundings in
 *             index order, no FMA, no split of K, at its own rate.
 *   serial_ops  the longest chain of dependent operations one thread runs: where few threads
 *             each run a long chain, latency and not throughput bounds the kernel.
 *   lib_flops 2 M N K per cuBLAS or cuDNN product (a strided batch: times its batch); lib_tf32
 *             when TF32 tensor ops are allowed. int_ops: math: exact's int8 GEMMs, 2 per
 *             multiply-add, the zero padding included.
 *   waits     dt_cuda_sync and the other synchronisations (a recording backend counts them
 *             where the real one would wait).
 * Not modelled: caches, occupancy and tails, overlap, the libraries' internals. */
#ifndef DT_CUDA_WORK_H
#define DT_CUDA_WORK_H

#include <stdbool.h>
#include <string.h>

#include "nets/cost.h"
#include "nets/cuda/cuda.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DT_W_MAC 2.0  /* a product added to a sum */
#define DT_W_DIV 4.0  /* a divide or a square root */
#define DT_W_EXP 10.0 /* exp, log, log1p, tanh, sine, cosine: library or portable */
/* a softmax element: the max's compare, the shift, exp, the sum's add, the divide */
#define DT_W_SOFTMAX (1.0 + 1.0 + DT_W_EXP + 1.0 + DT_W_DIV)
#define DT_W_OPS_SCAN 2.0        /* an element's |bits| into a max, and the non-finite test */
#define DT_W_OPS_FIXED_TERM 8.0  /* a float to int64 fixed point at a shift, added */
#define DT_W_OPS_FIXED_ROUND 8.0 /* an int64 sum back to float, rounded once */
#define DT_W_OPS_XP_MAC 16.0     /* dt_xp_dot_vec per pair */
#define DT_W_OPS_XP_FIXED 4.0    /* a value to fixed point at its row's scale */
#define DT_W_OPS_XP_SLICE 2.0    /* one int8 slice of it */
#define DT_W_OPS_XP_FOLD 6.0     /* an int32 product into an output's 128-bit parts */
#define DT_W_OPS_XP_ROUND 20.0   /* an output's parts rounded once, plus the bias */
#define DT_W_OPS_PHILOX 100.0    /* a Philox4x32-10 block (4 words) */
#define DT_W_OPS_XORO 25.0       /* a xoroshiro128** step and its output (or a step back) */
/* dt_gauss_pair: the portable log, sqrt, sine and cosine, fitted to the first light's
 * eps_lfsr */
#define DT_W_OPS_GAUSS_PAIR 400.0
#define DT_W_OPS_SHA256_BLOCK 3000.0 /* a SHA-256 compression of 64 bytes */

/* One launch moving `bytes` and doing `flops` (detrain's own kernel or a memset). */
static inline struct dt_op_cost dt_work(double bytes, double flops)
{
    struct dt_op_cost w;
    memset(&w, 0, sizeof w);
    w.launches = 1;
    w.bytes = bytes;
    w.flops = flops;
    return w;
}
/* The ordered product's kernel: its flops at the ordered rate. */
static inline struct dt_op_cost dt_work_ordered(double bytes, double ordered_flops)
{
    struct dt_op_cost w = dt_work(bytes, 0.0);
    w.ordered_flops = ordered_flops;
    return w;
}
/* A kernel whose longest thread runs `serial` dependent operations. */
static inline struct dt_op_cost dt_work_serial(double bytes, double flops, double serial)
{
    struct dt_op_cost w = dt_work(bytes, flops);
    w.serial_ops = serial;
    return w;
}
/* One library product: batch x (M x K) . (K x N), A and B read and C written once per batch
 * entry; TF32 tensor ops when tf32. */
static inline struct dt_op_cost dt_work_lib(double M, double N, double K, double batch, bool tf32)
{
    struct dt_op_cost w = dt_work(4.0 * batch * (M * K + K * N + M * N), 0.0);
    w.lib_calls = 1;
    w.lib_flops = 2.0 * batch * M * N * K;
    w.lib_tf32 = tf32;
    return w;
}

/* Whether be records (no device: nothing launched, every description added). */
static inline bool dt_cuda_recording(struct dt_backend *be)
{
    return dt_cuda(be)->launch.record != NULL;
}
/* Launch-side: when L records, add w and say so (the caller then launches nothing). */
static inline bool dt_cuda_note(const struct dt_cuda_launch *L, struct dt_op_cost w)
{
    if (!L->record) return false;
    dt_cost_accumulate(L->record, &w);
    return true;
}
/* A host wait where the real backend makes one: counted in the record. */
static inline void dt_cuda_note_wait(struct dt_backend *be)
{
    if (dt_cuda(be)->launch.record) dt_cuda(be)->launch.record->waits += 1;
}

#ifdef __cplusplus
}
#endif

#endif
