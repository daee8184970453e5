/* PLACEHOLDER (being written): Bayesian-layer ops of the CUDA backend. */
#include "nets/cuda/cuda.h"
enum dt_status dt_cuda_eps_philox(struct dt_backend *be, float *eps, int64_t n,
                                  const struct dt_philox_stream *s, const struct dt_policy *pol) { return DT_ERR_UNSUPPORTED; }
enum dt_status dt_cuda_eps_lfsr_seed(struct dt_backend *be, struct dt_xoro *lanes, int64_t P,
                                     uint64_t seed, uint32_t step, uint32_t member,
                                     uint32_t sample, const struct dt_policy *pol) { return DT_ERR_UNSUPPORTED; }
enum dt_status dt_cuda_eps_lfsr(struct dt_backend *be, float *eps, int64_t n,
                                struct dt_xoro *lanes, int64_t P, bool backward,
                                int64_t skip_lane, const struct dt_policy *pol) { return DT_ERR_UNSUPPORTED; }
enum dt_status dt_cuda_bnn_sigma(struct dt_backend *be, float *sigma, float *dsigma,
                                 const float *rho, int64_t n, const struct dt_policy *pol) { return DT_ERR_UNSUPPORTED; }
enum dt_status dt_cuda_bnn_sample(struct dt_backend *be, float *w, const float *mu,
                                  const float *sigma, const float *eps, int64_t n,
                                  const struct dt_policy *pol) { return DT_ERR_UNSUPPORTED; }
enum dt_status dt_cuda_bnn_accumulate(struct dt_backend *be, float *gmu, float *grho,
                                      const float *g, const float *eps, const float *dsigma,
                                      int64_t n, bool first, const struct dt_policy *pol) { return DT_ERR_UNSUPPORTED; }
enum dt_status dt_cuda_bnn_finish(struct dt_backend *be, float *gmu, float *grho,
                                  const float *mu, const float *sigma, const float *dsigma,
                                  int64_t n, float inv_samples, float kl_weight, float prior_var,
                                  const struct dt_policy *pol) { return DT_ERR_UNSUPPORTED; }
