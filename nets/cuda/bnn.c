/* Bayesian layers and their epsilon on the CUDA backend (host side; kernels in
 * nets/cuda/bnn.cu). Same contracts and operation order as the CPU reference,
 * nets/cpu/bnn.c: epsilon is always the portable transform and equals the CPU's bits at
 * every level; the elementwise ops equal the CPU's bits at every level except sigma and
 * dsigma outside `math: portable`, where both use their own math library (expf, log1pf).
 * Data path (docs/DESIGN.md): nets/bnn_mlp -> nets/backend -> here -> nets/cuda/bnn.cu. */
#include "nets/cuda/bnn_launch.h"

/* portable: a pure function of (stream, element index); one thread per Philox block. */
enum dt_status dt_cuda_eps_philox(struct dt_backend *be, float *eps, int64_t n,
                                  const struct dt_philox_stream *s, const struct dt_policy *pol)
{
    return dt_cuda_launched(be, dt_cuda_eps_philox_launch(eps, n, s, &dt_cuda(be)->launch),
                            "eps_philox");
}

/* portable: a pure function of (seed, step, member, sample, lane). */
enum dt_status dt_cuda_eps_lfsr_seed(struct dt_backend *be, struct dt_xoro *lanes, int64_t P,
                                     uint64_t seed, uint32_t step, uint32_t member, uint32_t sample,
                                     const struct dt_policy *pol)
{
    return dt_cuda_launched(
        be,
        dt_cuda_eps_lfsr_seed_launch(lanes, P, seed, step, member, sample, &dt_cuda(be)->launch),
        "eps_lfsr_seed");
}

/* portable: one thread per lane walks its own chunk (the reference walk); lanes never share
 * state. The skip_lane hook acts inside the lane's own thread, after its forward walk. */
enum dt_status dt_cuda_eps_lfsr(struct dt_backend *be, float *eps, int64_t n, struct dt_xoro *lanes,
                                int64_t P, bool backward, int64_t skip_lane,
                                const struct dt_policy *pol)
{
    return dt_cuda_launched(
        be, dt_cuda_eps_lfsr_launch(eps, n, lanes, P, backward, skip_lane, &dt_cuda(be)->launch),
        "eps_lfsr");
}

/* portable wherever dt_math_own_elementary (fast and portable: the own softplus and exp,
 * the CPU's bits); run_to_run at strict (CUDA's expf/log1pf: within a few ulps of the
 * CPU's libm, not its bits). */
enum dt_status dt_cuda_bnn_sigma(struct dt_backend *be, float *sigma, float *dsigma,
                                 const float *rho, int64_t n, const struct dt_policy *pol)
{
    return dt_cuda_launched(be,
                            dt_cuda_bnn_sigma_launch(sigma, dsigma, rho, n,
                                                     dt_math_own_elementary(pol),
                                                     &dt_cuda(be)->launch),
                            "bnn_sigma");
}

/* portable: one product and one sum per element. */
enum dt_status dt_cuda_bnn_sample(struct dt_backend *be, float *w, const float *mu,
                                  const float *sigma, const float *eps, int64_t n,
                                  const struct dt_policy *pol)
{
    return dt_cuda_launched(
        be, dt_cuda_bnn_sample_launch(w, mu, sigma, eps, n, &dt_cuda(be)->launch), "bnn_sample");
}

/* portable: elementwise, fixed operation order; samples are added in the caller's order. */
enum dt_status dt_cuda_bnn_accumulate(struct dt_backend *be, float *gmu, float *grho,
                                      const float *g, const float *eps, const float *dsigma,
                                      int64_t n, bool first, const struct dt_policy *pol)
{
    return dt_cuda_launched(
        be,
        dt_cuda_bnn_accumulate_launch(gmu, grho, g, eps, dsigma, n, first, &dt_cuda(be)->launch),
        "bnn_accumulate");
}

/* portable: elementwise, fixed operation order; 1 / prior_var is rounded once, here on the
 * host, exactly as the CPU backend does. */
enum dt_status dt_cuda_bnn_finish(struct dt_backend *be, float *gmu, float *grho, const float *mu,
                                  const float *sigma, const float *dsigma, int64_t n,
                                  float inv_samples, float kl_weight, float prior_var,
                                  const struct dt_policy *pol)
{
    return dt_cuda_launched(be,
                            dt_cuda_bnn_finish_launch(gmu, grho, mu, sigma, dsigma, n, inv_samples,
                                                      kl_weight, 1.0f / prior_var,
                                                      &dt_cuda(be)->launch),
                            "bnn_finish");
}
