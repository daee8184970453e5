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
#include "determinism/noise.h"
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

/* ---- the local reparameterisation estimator (model.estimator: local) ----------------------
 * A dense layer with independent Gaussian weights N(mu, sigma^2) has, for one example x, the
 * Gaussian pre-activation N(gamma, delta): gamma = x . mu_w + mu_b, delta = x^2 . sigma_w^2 +
 * sigma_b^2 (Kingma, Salimans & Welling, NeurIPS 2015). The estimator samples it directly,
 * y = gamma + sqrt(delta) eps with eps one standard normal per (example, unit). With
 * sd = sqrt(delta) and t = dy eps / sd (the gradient through the scale):
 *   d mu_w = x^T . dy, d sigma_w = sigma_w (x^2)^T . t (likewise the bias, summing t),
 * the sum (x^2)^T . t kept in rho's gradient through the shards, ranks and samples and made
 * rho's once, after the combination (dt_bnn_local_scale_elem),
 *   dx = dy . mu_w^T + x (t . (sigma_w^2)^T).
 * sqrtf is correctly rounded on both devices (IEEE 754; nvcc's default -prec-sqrt). */

/* y = x * x. */
static inline DT_HDI float dt_bnn_square_elem(float x) { return dt_rn_mul(x, x); }

/* sd = sqrt(delta); y = gamma + sd * eps (one root, one product, one sum). */
static inline DT_HDI float dt_bnn_local_out(float gamma, float delta, float eps, float *sd)
{
    const float s = sqrtf(delta);
    *sd = s;
    return dt_rn_add(gamma, dt_rn_mul(s, eps));
}

/* t = (dy * eps) / sd; 0 where sd is 0 (delta = 0: no noise, nothing flows to sigma). */
static inline DT_HDI float dt_bnn_local_dvar(float dy, float eps, float sd)
{
    const float q = dt_rn_div(dt_rn_mul(dy, eps), sd > 0.0f ? sd : 1.0f);
    return sd > 0.0f ? q : 0.0f;
}

/* dx = dxm + x * dxv. */
static inline DT_HDI float dt_bnn_local_dinput(float dxm, float x, float dxv)
{
    return dt_rn_add(dxm, dt_rn_mul(x, dxv));
}

/* grho = (grho * sigma) * dsigma: d sigma = sigma (x^2)^T . t, then the chain to rho. */
static inline DT_HDI float dt_bnn_local_scale_elem(float g, float sigma, float dsigma)
{
    return dt_rn_mul(dt_rn_mul(g, sigma), dsigma);
}

/* The local estimator's per-item work as the CUDA kernels run it (nets/cuda/bnn.cu), over a
 * (rows, W) layer whose row 0 is global row row0: element i with noise z, forward (y, sd;
 * y may alias gamma, sd delta) or backward (t), eps_out (when not NULL) getting z. */
struct dt_bnn_local_io {
    float *y, *sd, *t, *eps_out;
    const float *gamma, *delta, *dy, *sdi, *eps_in;
    bool backward;
};
static inline DT_HDI void dt_bnn_local_item(const struct dt_bnn_local_io *io, int64_t i, float z)
{
    if (io->eps_out) io->eps_out[i] = z;
    if (io->backward) {
        io->t[i] = dt_bnn_local_dvar(io->dy[i], z, io->sdi[i]);
    } else {
        float s;
        const float y = dt_bnn_local_out(io->gamma[i], io->delta[i], z, &s);
        io->y[i] = y;
        io->sd[i] = s;
    }
}

/* philox: block q of the layer's stream, its elements inside [e0, e0 + n) (e0 = row0 W). */
static inline DT_HD void dt_bnn_local_philox_block(const struct dt_bnn_local_io *io, int64_t e0,
                                                   int64_t n, uint64_t q,
                                                   const struct dt_philox_stream *s)
{
    uint32_t w[4];
    float z[4];
    dt_philox_block(w, s, q);
    dt_gauss_pair(w[0], w[1], &z[0], &z[1]);
    dt_gauss_pair(w[2], w[3], &z[2], &z[3]);
    for (int k = 0; k < 4; k++) {
        const int64_t i = (int64_t)(4 * q + (uint64_t)k) - e0;
        if (i >= 0 && i < n) dt_bnn_local_item(io, i, z[k]);
    }
}

/* lfsr, a tile of a row at a time (the CUDA kernel's schedule): the row's lane stepped over
 * pairs [k0, k0 + n) of the row -- forwards in ascending order (output, then step),
 * backwards in descending order (step back, then output) -- pair k's 64-bit output into
 * words[k - k0]; then each pair's two columns by dt_bnn_local_pair, in any order. Tiles
 * taken in ascending order forwards and descending backwards step the lane exactly as
 * dt_bnn_local_lane_row does. */
#define DT_BNN_LOCAL_TILE_PAIRS 32 /* the CUDA kernel's tile: pairs of a row a step */
static inline DT_HD void dt_bnn_local_lane_words(uint64_t *words, int64_t k0, int64_t n,
                                                 struct dt_xoro *lane, bool backward)
{
    struct dt_xoro st = *lane;
    for (int64_t q = 0; q < n; q++) {
        if (backward) {
            dt_xoro_prev(&st);
            words[n - 1 - q] = dt_xoro_out(st);
        } else {
            words[q] = dt_xoro_out(st);
            dt_xoro_next(&st);
        }
    }
    *lane = st;
}
/* Pair k of row r (of W columns) from its 64-bit output w: columns 2k and 2k + 1 (if inside). */
static inline DT_HDI void dt_bnn_local_pair(const struct dt_bnn_local_io *io, int64_t r, int64_t W,
                                            int64_t k, uint64_t w)
{
    float z0, z1;
    dt_gauss_pair((uint32_t)(w >> 32), (uint32_t)w, &z0, &z1);
    dt_bnn_local_item(io, r * W + 2 * k, z0);
    if (2 * k + 1 < W) dt_bnn_local_item(io, r * W + 2 * k + 1, z1);
}

/* lfsr: row r's lane walked over the row's W columns, forwards (output, then step) or, in
 * backward, back (step back, then output; last pair first), as dt_noise_lane_row_walk. */
static inline DT_HD void dt_bnn_local_lane_row(const struct dt_bnn_local_io *io, int64_t r,
                                               int64_t W, struct dt_xoro *lane)
{
    struct dt_xoro st = *lane;
    const int64_t steps = (W + 1) / 2;
    for (int64_t q = 0; q < steps; q++) {
        const int64_t k = io->backward ? steps - 1 - q : q;
        uint64_t o;
        if (io->backward) {
            dt_xoro_prev(&st);
            o = dt_xoro_out(st);
        } else {
            o = dt_xoro_out(st);
            dt_xoro_next(&st);
        }
        float z0, z1;
        dt_gauss_pair((uint32_t)(o >> 32), (uint32_t)o, &z0, &z1);
        dt_bnn_local_item(io, r * W + 2 * k, z0);
        if (2 * k + 1 < W) dt_bnn_local_item(io, r * W + 2 * k + 1, z1);
    }
    *lane = st;
}

#endif
