/* Per-element arithmetic of the Bayesian-layer ops and the per-item work of the epsilon
 * generators (nets/backend.h, "Bayesian layers"), as DT_HD functions: the CUDA kernels
 * (nets/cuda/bnn.cu) call them, and tests/test_cuda_bnn.c runs the same functions on the
 * host against the CPU backend (nets/cpu/bnn.c, the reference) bit for bit.
 * Each formula is the CPU's, operation for operation and in its order; every product, sum
 * and quotient is a separate IEEE round-to-nearest operation (the __f*_rn intrinsics on the
 * device, which nvcc never contracts; plain operators on the host, built with
 * -ffp-contract=off). Host C and CUDA device code. */
#ifndef DT_BNN_ELEM_H
#define DT_BNN_ELEM_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/hd.h"
#include "determinism/eps.h"
#include "determinism/portable_math.h"

/* ---- epsilon ------------------------------------------------------------------------- */

/* Philox block `block` of a tensor of n elements: eps[4 block .. min(4 block + 4, n)),
 * by the reference definition (dt_eps_philox_range), so blocks can be computed in any
 * order or tiling. */
static inline DT_HD void dt_bnn_eps_philox_block(float *eps, int64_t n, int64_t block,
                                                 const struct dt_philox_stream *s)
{
    const int64_t first = 4 * block, end = first + 4 < n ? first + 4 : n;
    dt_eps_philox_range(eps + first, first, end, s);
}

/* Lane `lane` of P over a tensor of n elements: the reference walk of determinism/eps.h,
 * forwards (draw, then step) or backwards (step back, then draw), writing only the lane's
 * own chunk of eps and its own state lanes[lane]. Fault hook (as nets/cpu/bnn.c): on a
 * forward walk, lane skip_lane ends one step back, i.e. it has drawn one pair fewer. */
static inline DT_HD void dt_bnn_eps_lane_walk(float *eps, int64_t n, struct dt_xoro *lanes,
                                              int64_t P, int64_t lane, bool backward,
                                              int64_t skip_lane)
{
    struct dt_xoro st = lanes[lane];
    if (backward) {
        dt_eps_lane_backward(eps, n, P, lane, &st);
    } else {
        dt_eps_lane_forward(eps, n, P, lane, &st);
        if (lane == skip_lane) dt_xoro_prev(&st);
    }
    lanes[lane] = st;
}

/* ---- Bayesian elementwise ops ---------------------------------------------------------- */

/* softplus through the math library (`math` other than portable): x above 20 is its own
 * softplus (e^-x < ulp(x)/2), else log1p(e^x). On the device these are CUDA's expf and
 * log1pf (at most 2 and 1 ulp), on the host the C library's: the two differ by a few ulps. */
static inline DT_HD float dt_bnn_softplus_libm(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

/* sigma = softplus(rho), dsigma = 1 / (1 + exp(-rho)): the portable softplus and exp of
 * determinism/portable_math.h when `portable`, the math library's otherwise. */
static inline DT_HDI void dt_bnn_sigma_elem(float *sigma, float *dsigma, float rho, bool portable)
{
    if (portable) {
        *sigma = dt_softplus_portable(rho);
        *dsigma = dt_rn_div(1.0f, dt_rn_add(1.0f, dt_exp_portable(-rho)));
    } else {
        *sigma = dt_bnn_softplus_libm(rho);
        *dsigma = dt_rn_div(1.0f, dt_rn_add(1.0f, expf(-rho)));
    }
}

/* w = mu + sigma * eps: one product, one sum. */
static inline DT_HDI float dt_bnn_sample_elem(float mu, float sigma, float eps)
{
    return dt_rn_add(mu, dt_rn_mul(sigma, eps));
}

/* One sample's gradient g added to (gmu, grho): gmu += g; grho += (g * eps) * dsigma; with
 * first, assigned instead (gmu = g exactly, so a -0 gradient stays -0). */
static inline DT_HDI void dt_bnn_accumulate_elem(float *gmu, float *grho, float g, float eps,
                                                 float dsigma, bool first)
{
    const float t = dt_rn_mul(dt_rn_mul(g, eps), dsigma);
    if (first) {
        *gmu = g;
        *grho = t;
    } else {
        *gmu = dt_rn_add(*gmu, g);
        *grho = dt_rn_add(*grho, t);
    }
}

/* The finished gradients (ipv = 1 / prior_var, rounded once by the caller):
 *   gmu  = gmu * inv_s + klw * (mu * ipv)
 *   grho = grho * inv_s + klw * ((sigma * ipv - 1 / sigma) * dsigma) */
static inline DT_HDI void dt_bnn_finish_elem(float *gmu, float *grho, float mu, float sigma,
                                             float dsigma, float inv_s, float klw, float ipv)
{
    *gmu = dt_rn_add(dt_rn_mul(*gmu, inv_s), dt_rn_mul(klw, dt_rn_mul(mu, ipv)));
    const float dkl = dt_rn_mul(dt_rn_sub(dt_rn_mul(sigma, ipv), dt_rn_div(1.0f, sigma)), dsigma);
    *grho = dt_rn_add(dt_rn_mul(*grho, inv_s), dt_rn_mul(klw, dkl));
}

#endif
