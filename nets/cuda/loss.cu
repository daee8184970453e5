/* Kernels of the CUDA softmax cross-entropy (host side: nets/cuda/loss.c). Rows are
 * independent: one thread per row runs dt_softmax_xent_row (nets/dense_loss_elem.h), the
 * CPU's operations in the CPU's order; the backward pass is elementwise. Grid-stride loops:
 * no result depends on the grid or block size, except the unordered loss total (float
 * atomicAdd, arrival order). */
#include "nets/cuda/dense_loss.h"
#include "nets/dense_loss_elem.h"
#include "nets/cuda/launch.cuh"

/* math portable: detrain's exp/log, the CPU's bits; otherwise CUDA's expf/logf (whose
 * library code uses fmaf: one kernel per choice keeps it out of the portable one). A label
 * outside [0, C) is flagged (hit = -1, loss NaN) for the host to report; the row's
 * probabilities are still written. total != NULL: reduction unordered, losses added by
 * float atomicAdd in arrival order. */
template <bool portable>
static __global__ void softmax_xent_rows_kernel(float *probs, float *losses, int32_t *hit,
                                                float *total, const float *logits,
                                                const int32_t *labels, int64_t B, int64_t C)
{
    DT_GRID_STRIDE(b, B)
    {
        const int32_t y = labels[b];
        const bool ok = y >= 0 && y < C;
        int64_t arg;
        float loss =
            dt_softmax_xent_row(probs + b * C, &arg, logits + b * C, ok ? y : 0, C, portable);
        if (!ok) loss = dt_bits_float(0x7fc00000u);
        losses[b] = loss;
        hit[b] = ok ? (arg == y) : -1;
        if (total && ok) atomicAdd(total, loss);
    }
}

/* portable at every level: dlogits = (p - onehot) * inv_b, two roundings. */
static __global__ void softmax_xent_grad_kernel(float *dlogits, const float *probs,
                                                const int32_t *labels, int64_t B, int64_t C,
                                                float inv_b)
{
    DT_GRID_STRIDE(i, B * C)
    dlogits[i] = dt_softmax_xent_grad_elem(probs[i], i % C == labels[i / C], inv_b);
}

extern "C" int dt_cuda_softmax_xent_rows(float *probs, float *losses, int32_t *hit, float *total,
                                         const float *logits, const int32_t *labels, int64_t B,
                                         int64_t C, bool portable, const struct dt_cuda_launch *L)
{
    const dt_cuda_stream s = L->stream;
    if (total) {
        cudaError_t e = cudaMemsetAsync(total, 0, sizeof *total, s);
        if (e != cudaSuccess) {
            (void)cudaGetLastError(); /* reported here, not again by the next launch */
            return (int)e;
        }
    }
    if (portable)
        softmax_xent_rows_kernel<true><<<dt_cuda_grid(L, B), L->block_threads, 0, s>>>(
            probs, losses, hit, total, logits, labels, B, C);
    else
        softmax_xent_rows_kernel<false><<<dt_cuda_grid(L, B), L->block_threads, 0, s>>>(
            probs, losses, hit, total, logits, labels, B, C);
    return (int)cudaGetLastError();
}

extern "C" int dt_cuda_softmax_xent_grad(float *dlogits, const float *probs, const int32_t *labels,
                                         int64_t B, int64_t C, float inv_b,
                                         const struct dt_cuda_launch *L)
{
    const dt_cuda_stream s = L->stream;
    softmax_xent_grad_kernel<<<dt_cuda_grid(L, B * C), L->block_threads, 0, s>>>(
        dlogits, probs, labels, B, C, inv_b);
    return (int)cudaGetLastError();
}
