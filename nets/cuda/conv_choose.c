/* The `conv_algo` control's choice, above both implementations (docs/DESIGN.md, "where each
 * control value is implemented"): own -> detrain's kernels (nets/cuda/conv.cu); autotune and
 * deterministic -> cuDNN (nets/cuda/cudnn_conv.c), which falls back to the own kernels where
 * cuDNN refuses. Max-pool forward is always the own kernel (conv.cu). */
#include "nets/cuda/cuda.h"

enum dt_status dt_cuda_conv2d_forward(struct dt_backend *be, float *y, const float *x,
                                      const float *w, const float *bias,
                                      const struct dt_conv2d_shape *s, const struct dt_policy *pol)
{
    if (dt_conv_algo_library(pol)) return dt_cudnn_conv2d_forward(be, y, x, w, bias, s, pol);
    return dt_cuda_own_conv2d_forward(be, y, x, w, bias, s, pol);
}

enum dt_status dt_cuda_conv2d_backward_weight(struct dt_backend *be, float *dw, const float *x,
                                              const float *dy, const struct dt_conv2d_shape *s,
                                              const struct dt_policy *pol)
{
    if (dt_conv_algo_library(pol)) return dt_cudnn_conv2d_backward_weight(be, dw, x, dy, s, pol);
    return dt_cuda_own_conv2d_backward_weight(be, dw, x, dy, s, pol);
}

enum dt_status dt_cuda_conv2d_backward_data(struct dt_backend *be, float *dx, const float *dy,
                                            const float *w, const struct dt_conv2d_shape *s,
                                            const struct dt_policy *pol)
{
    if (dt_conv_algo_library(pol)) return dt_cudnn_conv2d_backward_data(be, dx, dy, w, s, pol);
    return dt_cuda_own_conv2d_backward_data(be, dx, dy, w, s, pol);
}

enum dt_status dt_cuda_maxpool2d_backward(struct dt_backend *be, float *dx, const float *dy,
                                          const float *x, const float *y, const int32_t *argmax,
                                          const struct dt_pool2d_shape *s,
                                          const struct dt_policy *pol)
{
    if (dt_conv_algo_library(pol))
        return dt_cudnn_maxpool2d_backward(be, dx, dy, x, y, argmax, s, pol);
    return dt_cuda_own_maxpool2d_backward(be, dx, dy, x, y, argmax, s, pol);
}
