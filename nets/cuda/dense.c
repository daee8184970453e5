/* PLACEHOLDER (being written): dense ops of the CUDA backend. */
#include "nets/cuda/cuda.h"
enum dt_status dt_cuda_dense_forward(struct dt_backend *be, float *y, const float *x,
                                     const float *w, const float *bias, int64_t B, int64_t in,
                                     int64_t out, const struct dt_policy *pol) { return DT_ERR_UNSUPPORTED; }
enum dt_status dt_cuda_dense_backward_data(struct dt_backend *be, float *dx, const float *dy,
                                           const float *w, int64_t B, int64_t in, int64_t out,
                                           const struct dt_policy *pol) { return DT_ERR_UNSUPPORTED; }
enum dt_status dt_cuda_dense_backward_weight(struct dt_backend *be, float *dw, const float *x,
                                             const float *dy, int64_t B, int64_t in,
                                             int64_t out, const struct dt_policy *pol) { return DT_ERR_UNSUPPORTED; }
enum dt_status dt_cuda_bias_backward(struct dt_backend *be, float *dbias, const float *dy,
                                     int64_t B, int64_t out, const struct dt_policy *pol) { return DT_ERR_UNSUPPORTED; }
