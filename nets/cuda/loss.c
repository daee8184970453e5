/* PLACEHOLDER (being written): softmax cross-entropy of the CUDA backend. */
#include "nets/cuda/cuda.h"
enum dt_status dt_cuda_softmax_xent_forward(struct dt_backend *be, float *probs,
                                            float *loss_host, int64_t *correct_host,
                                            const float *logits, const int32_t *labels,
                                            int64_t B, int64_t C, const struct dt_policy *pol) { return DT_ERR_UNSUPPORTED; }
enum dt_status dt_cuda_softmax_xent_backward(struct dt_backend *be, float *dlogits,
                                             const float *probs, const int32_t *labels,
                                             int64_t B, int64_t C, const struct dt_policy *pol) { return DT_ERR_UNSUPPORTED; }
