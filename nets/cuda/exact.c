/* reduction: exact on the CUDA backend (host side): the exact sum of the shard partials
 * as kernels on the backend's stream (nets/cuda/exact.cu), one launch per tensor and
 * stage, no host wait. The per-shard batch reductions themselves are the plain ops called
 * once per shard by nets/dispatch.c. */
#include "nets/cuda/cuda.h"

enum dt_status dt_cuda_exact_max(struct dt_backend *be, uint32_t *max_bits, const float *pack,
                                 const struct dt_exact_layout *L)
{
    for (int i = 0; i < L->tensors; i++) {
        int rc = dt_cuda_exact_max_launch(max_bits + i, pack + L->slots * L->first[i],
                                          L->slots * L->n[i], &dt_cuda(be)->launch);
        if (rc) return dt_cuda_launched(be, rc, "exact_max");
    }
    return DT_OK;
}

static enum dt_status exact_sums(struct dt_backend *be, float *pack, int64_t *acc,
                                 const uint32_t *max_bits, const struct dt_exact_layout *L,
                                 int mode)
{
    for (int i = 0; i < L->tensors; i++) {
        int rc = dt_cuda_exact_sum_launch(pack + L->slots * L->first[i],
                                          acc ? acc + L->first[i] : NULL, max_bits + i, L->n[i],
                                          L->slots, L->shards, mode, &dt_cuda(be)->launch);
        if (rc) return dt_cuda_launched(be, rc, "exact_sum");
    }
    return DT_OK;
}

enum dt_status dt_cuda_exact_sum(struct dt_backend *be, float *pack, const uint32_t *max_bits,
                                 const struct dt_exact_layout *L)
{
    return exact_sums(be, pack, NULL, max_bits, L, 0);
}

enum dt_status dt_cuda_exact_to_fixed(struct dt_backend *be, int64_t *acc, const float *pack,
                                      const uint32_t *max_bits, const struct dt_exact_layout *L)
{
    return exact_sums(be, (float *)pack, acc, max_bits, L, 1);
}

enum dt_status dt_cuda_exact_round(struct dt_backend *be, float *pack, const int64_t *acc,
                                   const uint32_t *max_bits, const struct dt_exact_layout *L)
{
    return exact_sums(be, pack, (int64_t *)acc, max_bits, L, 2);
}
