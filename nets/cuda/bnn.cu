/* Bayesian layers and their epsilon on the CUDA backend: kernels, launchers and host
 * functions. Same contracts and operation order as the CPU reference,
 * nets/cpu/bnn.c: epsilon is always the portable transform and equals the CPU's bits at
 * every level; the elementwise ops equal the CPU's bits at every level except sigma and
 * dsigma outside `math: portable`, where both use their own math library (expf, log1pf).
 * Data path (docs/DESIGN.md): nets/bnn_mlp -> nets/backend -> here. */
#include "nets/bnn_elem.h"
#include "nets/cuda/cuda.h"
#include "nets/cuda/launch.cuh"

/* ---- kernels and their launchers ---------------------------------------------------------- */

/* Kernels of the CUDA backend's Bayesian-layer ops and epsilon generators (the ops
 * below). Every thread owns whole work items (a Philox block of 4 elements, a
 * lane, an element) in a grid-stride loop and computes each with the shared DT_HD
 * functions of nets/bnn_elem.h, which tests/test_cuda_bnn.c checks against the CPU
 * backend on the host: no item depends on another, so no result depends on the grid or
 * block size. Compiled with --fmad=false; the formulas also use the __f*_rn intrinsics. */

/* portable: eps is a pure function of (stream, element index); one thread per Philox
 * block of 4 elements, computed by the reference definition. eps is (n). */
static __global__ void __launch_bounds__(1024)
    eps_philox_kernel(float *eps, int64_t n, struct dt_philox_stream s)
{
    const int64_t blocks = (n + 3) / 4;
    DT_GRID_STRIDE(b, blocks)
    dt_bnn_eps_philox_block(eps, n, b, &s);
}

/* portable: lanes[j] is a pure function of (seed, step, member, sample, j). lanes is (P). */
static __global__ void __launch_bounds__(1024)
    eps_lfsr_seed_kernel(struct dt_xoro *lanes, int64_t P, uint64_t seed, uint32_t step,
                         uint32_t member, uint32_t sample)
{
    DT_GRID_STRIDE(j, P)
    lanes[j] = dt_eps_lane_seed(seed, step, member, sample, (uint64_t)j);
}

/* portable: one thread per lane walks the lane's own chunk with its own state, exactly as
 * the reference walk; lanes never share state or elements. eps is (n), lanes (P). */
static __global__ void __launch_bounds__(1024)
    eps_lfsr_kernel(float *eps, int64_t n, struct dt_xoro *lanes, int64_t P, bool backward,
                    int64_t skip_lane)
{
    DT_GRID_STRIDE(j, P)
    dt_bnn_eps_lane_walk(eps, n, lanes, P, j, backward, skip_lane);
}

/* portable at `math: portable` (own softplus and exp), else CUDA's expf/log1pf, within a
 * few ulps of the CPU's libm: elementwise. sigma, dsigma, rho are (n). */
static __global__ void __launch_bounds__(1024)
    bnn_sigma_kernel(float *sigma, float *dsigma, const float *rho, int64_t n, bool portable)
{
    DT_GRID_STRIDE(i, n)
    {
        float s, ds;
        dt_bnn_sigma_elem(&s, &ds, rho[i], portable);
        sigma[i] = s;
        dsigma[i] = ds;
    }
}

/* portable: w = mu + sigma * eps, one product and one sum per element. All (n). */
static __global__ void __launch_bounds__(1024)
    bnn_sample_kernel(float *w, const float *mu, const float *sigma, const float *eps, int64_t n)
{
    DT_GRID_STRIDE(i, n)
    w[i] = dt_bnn_sample_elem(mu[i], sigma[i], eps[i]);
}

/* portable: elementwise, fixed operation order; samples are added in the caller's order.
 * All (n). */
static __global__ void __launch_bounds__(1024)
    bnn_accumulate_kernel(float *gmu, float *grho, const float *g, const float *eps,
                          const float *dsigma, int64_t n, bool first)
{
    DT_GRID_STRIDE(i, n)
    {
        float m = first ? 0.0f : gmu[i], r = first ? 0.0f : grho[i];
        dt_bnn_accumulate_elem(&m, &r, g[i], eps[i], dsigma[i], first);
        gmu[i] = m;
        grho[i] = r;
    }
}

/* portable: elementwise, fixed operation order; ipv = 1 / prior_var rounded once on the
 * host, as on the CPU. All (n). */
static __global__ void __launch_bounds__(1024)
    bnn_finish_kernel(float *gmu, float *grho, const float *mu, const float *sigma,
                      const float *dsigma, int64_t n, float inv_s, float klw, float ipv)
{
    DT_GRID_STRIDE(i, n)
    {
        float m = gmu[i], r = grho[i];
        dt_bnn_finish_elem(&m, &r, mu[i], sigma[i], dsigma[i], inv_s, klw, ipv);
        gmu[i] = m;
        grho[i] = r;
    }
}

/* ---- the local reparameterisation estimator (nets/bnn_elem.h) ----------------------------- */

/* portable: y = x * x. All (n). */
static __global__ void __launch_bounds__(1024) square_kernel(float *y, const float *x, int64_t n)
{
    DT_GRID_STRIDE(i, n)
    y[i] = dt_bnn_square_elem(x[i]);
}

/* portable: dx = dxm + x * dxv. All (n). */
static __global__ void __launch_bounds__(1024)
    local_input_grad_kernel(float *dx, const float *dxm, const float *x, const float *dxv,
                            int64_t n)
{
    DT_GRID_STRIDE(i, n)
    dx[i] = dt_bnn_local_dinput(dxm[i], x[i], dxv[i]);
}

/* portable: grho = (grho * sigma) * dsigma. All (n). */
static __global__ void __launch_bounds__(1024)
    local_scale_kernel(float *grho, const float *sigma, const float *dsigma, int64_t n)
{
    DT_GRID_STRIDE(i, n)
    grho[i] = dt_bnn_local_scale_elem(grho[i], sigma[i], dsigma[i]);
}

/* philox: a thread a Philox block of the whole (rows, W) layer (its elements one run of
 * counters from e0 = row0 W), each element's formula with its noise. */
static __global__ void __launch_bounds__(1024)
    local_philox_kernel(struct dt_bnn_local_io io, int64_t e0, int64_t n, uint64_t q0,
                        uint64_t blocks, struct dt_philox_stream s)
{
    DT_GRID_STRIDE(j, (int64_t)blocks)
    dt_bnn_local_philox_block(&io, e0, n, q0 + (uint64_t)j, &s);
}

/* lfsr, tiled: a lane's steps are a serial chain, but cheap (a xoroshiro step); the Gaussian
 * pairs they feed are not. So a block takes LOCAL_TILE_ROWS rows and a tile of
 * LOCAL_TILE_PAIRS pairs at a time: the first LOCAL_TILE_ROWS threads step their row's lane
 * over the tile into shared memory (dt_bnn_local_lane_words; backwards the tiles go last to
 * first), then every thread of the block takes pairs of the tile (dt_bnn_local_pair). The
 * lanes step exactly as the row walk does: the CPU's bits (tests/test_bnn_local.c runs this
 * schedule on the host). Grid-stride over row tiles. */
#define LOCAL_TILE_ROWS 32
#define LOCAL_TILE_PAIRS DT_BNN_LOCAL_TILE_PAIRS
#define LOCAL_THREADS 256
static __global__ void __launch_bounds__(LOCAL_THREADS)
    local_lane_kernel(struct dt_bnn_local_io io, struct dt_xoro *lanes, int64_t rows, int64_t W)
{
    __shared__ uint64_t w[LOCAL_TILE_ROWS][LOCAL_TILE_PAIRS + 1]; /* + 1: rows off one bank */
    const int t = (int)threadIdx.x;
    const int64_t pairs = (W + 1) / 2, tiles = (pairs + LOCAL_TILE_PAIRS - 1) / LOCAL_TILE_PAIRS;
    for (int64_t r0 = (int64_t)blockIdx.x * LOCAL_TILE_ROWS; r0 < rows;
         r0 += (int64_t)gridDim.x * LOCAL_TILE_ROWS) {
        const int nr = (int)(rows - r0 < LOCAL_TILE_ROWS ? rows - r0 : LOCAL_TILE_ROWS);
        struct dt_xoro lane = {0, 0};
        if (t < nr) lane = lanes[r0 + t];
        for (int64_t j = 0; j < tiles; j++) {
            const int64_t k0 = (io.backward ? tiles - 1 - j : j) * LOCAL_TILE_PAIRS;
            const int n = (int)(pairs - k0 < LOCAL_TILE_PAIRS ? pairs - k0 : LOCAL_TILE_PAIRS);
            if (t < nr) dt_bnn_local_lane_words(w[t], k0, n, &lane, io.backward);
            __syncthreads();
            for (int e = t; e < nr * n; e += LOCAL_THREADS) {
                const int rr = e / n, kk = e - rr * n;
                dt_bnn_local_pair(&io, r0 + rr, W, k0 + kk, w[rr][kk]);
            }
            __syncthreads();
        }
        if (t < nr) lanes[r0 + t] = lane;
    }
}

/* stored (backward): the kept noise, element by element. */
static __global__ void __launch_bounds__(1024)
    local_stored_kernel(struct dt_bnn_local_io io, int64_t n)
{
    DT_GRID_STRIDE(i, n)
    dt_bnn_local_item(&io, i, io.eps_in[i]);
}

/* ---- launchers: 0 or the launch's cudaError_t ------------------------------------------- */

static int dt_cuda_eps_philox_launch(float *eps, int64_t n, const struct dt_philox_stream *s,
                                     const struct dt_cuda_launch *L)
{
    const dt_cuda_stream st = L->stream;
    /* a thread a Philox block of 4: two Gaussian pairs */
    const double blocks = (double)((n + 3) / 4);
    DT_LAUNCH(L, dt_work(4.0 * (double)n, blocks * (DT_W_OPS_PHILOX + 2.0 * DT_W_OPS_GAUSS_PAIR)),
              eps_philox_kernel, dt_cuda_grid(L, (n + 3) / 4), L->block_threads, 0, st)
    (eps, n, *s);
    return DT_LAUNCHED(L);
}

static int dt_cuda_eps_lfsr_seed_launch(struct dt_xoro *lanes, int64_t P, uint64_t seed,
                                        uint32_t step, uint32_t member, uint32_t sample,
                                        const struct dt_cuda_launch *L)
{
    const dt_cuda_stream st = L->stream;
    DT_LAUNCH(L, dt_work((double)sizeof(struct dt_xoro) * (double)P, (double)P * DT_W_OPS_PHILOX),
              eps_lfsr_seed_kernel, dt_cuda_grid(L, P), L->block_threads, 0, st)
    (lanes, P, seed, step, member, sample);
    return DT_LAUNCHED(L);
}

static int dt_cuda_eps_lfsr_launch(float *eps, int64_t n, struct dt_xoro *lanes, int64_t P,
                                   bool backward, int64_t skip_lane, const struct dt_cuda_launch *L)
{
    const dt_cuda_stream st = L->stream;
    /* a thread a lane walking dt_eps_lane_steps steps (every lane the same count), a Gaussian
     * pair a step, one after another (serial) */
    const double steps = (double)dt_eps_lane_steps(n, P), pairs = (double)P * steps;
    DT_LAUNCH(L,
              dt_work_serial(4.0 * (double)n + 2.0 * (double)sizeof(struct dt_xoro) * (double)P,
                             pairs * (DT_W_OPS_XORO + DT_W_OPS_GAUSS_PAIR),
                             steps * (DT_W_OPS_XORO + DT_W_OPS_GAUSS_PAIR)),
              eps_lfsr_kernel, dt_cuda_grid(L, P), L->block_threads, 0, st)
    (eps, n, lanes, P, backward, skip_lane);
    return DT_LAUNCHED(L);
}

static int dt_cuda_bnn_sigma_launch(float *sigma, float *dsigma, const float *rho, int64_t n,
                                    bool portable, const struct dt_cuda_launch *L)
{
    const dt_cuda_stream st = L->stream;
    /* softplus and the logistic: exp, log1p, exp */
    DT_LAUNCH(L, dt_work(12.0 * (double)n, (3.0 * DT_W_EXP + DT_W_DIV + 3.0) * (double)n),
              bnn_sigma_kernel, dt_cuda_grid(L, n), L->block_threads, 0, st)
    (sigma, dsigma, rho, n, portable);
    return DT_LAUNCHED(L);
}

static int dt_cuda_bnn_sample_launch(float *w, const float *mu, const float *sigma,
                                     const float *eps, int64_t n, const struct dt_cuda_launch *L)
{
    const dt_cuda_stream st = L->stream;
    DT_LAUNCH(L, dt_work(16.0 * (double)n, 2.0 * (double)n), bnn_sample_kernel, dt_cuda_grid(L, n),
              L->block_threads, 0, st)
    (w, mu, sigma, eps, n);
    return DT_LAUNCHED(L);
}

static int dt_cuda_bnn_accumulate_launch(float *gmu, float *grho, const float *g, const float *eps,
                                         const float *dsigma, int64_t n, bool first,
                                         const struct dt_cuda_launch *L)
{
    const dt_cuda_stream st = L->stream;
    /* with first the gradients are assigned (not read) */
    DT_LAUNCH(L, dt_work((first ? 20.0 : 28.0) * (double)n, (first ? 2.0 : 4.0) * (double)n),
              bnn_accumulate_kernel, dt_cuda_grid(L, n), L->block_threads, 0, st)
    (gmu, grho, g, eps, dsigma, n, first);
    return DT_LAUNCHED(L);
}

static int dt_cuda_bnn_finish_launch(float *gmu, float *grho, const float *mu, const float *sigma,
                                     const float *dsigma, int64_t n, float inv_s, float klw,
                                     float ipv, const struct dt_cuda_launch *L)
{
    const dt_cuda_stream st = L->stream;
    /* dt_bnn_finish_elem: seven products, a quotient, three sums */
    DT_LAUNCH(L, dt_work(28.0 * (double)n, (10.0 + DT_W_DIV) * (double)n), bnn_finish_kernel,
              dt_cuda_grid(L, n), L->block_threads, 0, st)
    (gmu, grho, mu, sigma, dsigma, n, inv_s, klw, ipv);
    return DT_LAUNCHED(L);
}

static int dt_cuda_square_launch(float *y, const float *x, int64_t n,
                                 const struct dt_cuda_launch *L)
{
    const dt_cuda_stream st = L->stream;
    DT_LAUNCH(L, dt_work(8.0 * (double)n, (double)n), square_kernel, dt_cuda_grid(L, n),
              L->block_threads, 0, st)
    (y, x, n);
    return DT_LAUNCHED(L);
}

static int dt_cuda_local_input_grad_launch(float *dx, const float *dxm, const float *x,
                                           const float *dxv, int64_t n,
                                           const struct dt_cuda_launch *L)
{
    const dt_cuda_stream st = L->stream;
    DT_LAUNCH(L, dt_work(16.0 * (double)n, 2.0 * (double)n), local_input_grad_kernel,
              dt_cuda_grid(L, n), L->block_threads, 0, st)
    (dx, dxm, x, dxv, n);
    return DT_LAUNCHED(L);
}

static int dt_cuda_local_scale_launch(float *grho, const float *sigma, const float *dsigma,
                                      int64_t n, const struct dt_cuda_launch *L)
{
    const dt_cuda_stream st = L->stream;
    DT_LAUNCH(L, dt_work(16.0 * (double)n, 2.0 * (double)n), local_scale_kernel, dt_cuda_grid(L, n),
              L->block_threads, 0, st)
    (grho, sigma, dsigma, n);
    return DT_LAUNCHED(L);
}

/* The local ops' work by mode: per element three floats read and one or two written (four
 * bytes more with eps_out), a root or a quotient and two operations; philox a Philox block
 * and two Gaussian pairs per 4 elements; lfsr a lane (read and written) per row walking a
 * xoroshiro step and a Gaussian pair per 2 columns, one after another; stored reads eps. */
static int dt_cuda_local_launch(const struct dt_bnn_local_io *io, struct dt_xoro *lanes,
                                int64_t rows, int64_t W, const struct dt_noise_site *site,
                                const struct dt_cuda_launch *L)
{
    const dt_cuda_stream st = L->stream;
    const int64_t n = rows * W;
    const double elems = (double)n, pairs_row = (double)((W + 1) / 2);
    double bytes = (io->backward ? 12.0 : 16.0) * elems + (io->eps_out ? 4.0 * elems : 0.0);
    const double flops = (DT_W_DIV + 2.0) * elems;
    if (site->mode == DT_NOISE_PHILOX) {
        const int64_t e0 = site->row0 * W;
        const uint64_t q0 = (uint64_t)e0 >> 2;
        const uint64_t blocks = ((uint64_t)(e0 + n - 1) >> 2) - q0 + 1;
        const double gen = (double)blocks * (DT_W_OPS_PHILOX + 2.0 * DT_W_OPS_GAUSS_PAIR);
        DT_LAUNCH(L, dt_work(bytes, flops + gen), local_philox_kernel,
                  dt_cuda_grid(L, (int64_t)blocks), L->block_threads, 0, st)
        (*io, e0, n, q0, blocks, site->stream);
        return DT_LAUNCHED(L);
    }
    if (site->mode == DT_NOISE_STORED) {
        DT_LAUNCH(L, dt_work(bytes + 4.0 * elems, flops), local_stored_kernel, dt_cuda_grid(L, n),
                  L->block_threads, 0, st)
        (*io, n);
        return DT_LAUNCHED(L);
    }
    bytes += 2.0 * (double)sizeof(struct dt_xoro) * (double)rows;
    /* the serial chain: a row's lane steps (its tiles one after another), plus a tile's
     * pairs shared by the block's threads */
    const int64_t tiles = (rows + LOCAL_TILE_ROWS - 1) / LOCAL_TILE_ROWS;
    const int64_t cap = L->max_blocks > 0 ? L->max_blocks : 65535;
    const int64_t grid = tiles < 1 ? 1 : tiles < cap ? tiles : cap;
    const double per_pair = DT_W_OPS_GAUSS_PAIR + 2.0 * (DT_W_DIV + 2.0);
    const double tile_pairs = (double)(pairs_row < LOCAL_TILE_PAIRS ? pairs_row : LOCAL_TILE_PAIRS);
    const double shared = tile_pairs * LOCAL_TILE_ROWS / LOCAL_THREADS > 1.0
                              ? tile_pairs * LOCAL_TILE_ROWS / LOCAL_THREADS
                              : 1.0;
    DT_LAUNCH(L,
              dt_work_serial(
                  bytes, flops + (double)rows * pairs_row * (DT_W_OPS_XORO + DT_W_OPS_GAUSS_PAIR),
                  pairs_row * DT_W_OPS_XORO +
                      (pairs_row / (double)LOCAL_TILE_PAIRS + 1.0) * shared * per_pair),
              local_lane_kernel, (unsigned)grid, LOCAL_THREADS, 0, st)
    (*io, lanes, rows, W);
    return DT_LAUNCHED(L);
}

/* ---- the ops (declared from their rows of nets/op_list.h in nets/cuda/cuda.h) ----------- */

/* portable: a pure function of (stream, element index); one thread per Philox block. */
extern "C" enum dt_status dt_cuda_eps_philox(struct dt_backend *be, float *eps, int64_t n,
                                             const struct dt_philox_stream *s,
                                             const struct dt_policy *pol)
{
    return dt_cuda_launched(be, dt_cuda_eps_philox_launch(eps, n, s, &dt_cuda(be)->launch),
                            "eps_philox");
}

/* portable: a pure function of (seed, step, member, sample, lane). */
extern "C" enum dt_status dt_cuda_eps_lfsr_seed(struct dt_backend *be, struct dt_xoro *lanes,
                                                int64_t P, uint64_t seed, uint32_t step,
                                                uint32_t member, uint32_t sample,
                                                const struct dt_policy *pol)
{
    return dt_cuda_launched(
        be,
        dt_cuda_eps_lfsr_seed_launch(lanes, P, seed, step, member, sample, &dt_cuda(be)->launch),
        "eps_lfsr_seed");
}

/* portable: one thread per lane walks its own chunk (the reference walk); lanes never share
 * state. The skip_lane hook acts inside the lane's own thread, after its forward walk. */
extern "C" enum dt_status dt_cuda_eps_lfsr(struct dt_backend *be, float *eps, int64_t n,
                                           struct dt_xoro *lanes, int64_t P, bool backward,
                                           int64_t skip_lane, const struct dt_policy *pol)
{
    return dt_cuda_launched(
        be, dt_cuda_eps_lfsr_launch(eps, n, lanes, P, backward, skip_lane, &dt_cuda(be)->launch),
        "eps_lfsr");
}

/* portable wherever dt_math_own_elementary (fast and portable: the own softplus and exp,
 * the CPU's bits); run_to_run at strict (CUDA's expf/log1pf: within a few ulps of the
 * CPU's libm, not its bits). */
extern "C" enum dt_status dt_cuda_bnn_sigma(struct dt_backend *be, float *sigma, float *dsigma,
                                            const float *rho, int64_t n,
                                            const struct dt_policy *pol)
{
    return dt_cuda_launched(be,
                            dt_cuda_bnn_sigma_launch(sigma, dsigma, rho, n,
                                                     dt_math_own_elementary(pol),
                                                     &dt_cuda(be)->launch),
                            "bnn_sigma");
}

/* portable: one product and one sum per element. */
extern "C" enum dt_status dt_cuda_bnn_sample(struct dt_backend *be, float *w, const float *mu,
                                             const float *sigma, const float *eps, int64_t n,
                                             const struct dt_policy *pol)
{
    return dt_cuda_launched(
        be, dt_cuda_bnn_sample_launch(w, mu, sigma, eps, n, &dt_cuda(be)->launch), "bnn_sample");
}

/* portable: elementwise, fixed operation order; samples are added in the caller's order. */
extern "C" enum dt_status dt_cuda_bnn_accumulate(struct dt_backend *be, float *gmu, float *grho,
                                                 const float *g, const float *eps,
                                                 const float *dsigma, int64_t n, bool first,
                                                 const struct dt_policy *pol)
{
    return dt_cuda_launched(
        be,
        dt_cuda_bnn_accumulate_launch(gmu, grho, g, eps, dsigma, n, first, &dt_cuda(be)->launch),
        "bnn_accumulate");
}

/* portable: elementwise, fixed operation order; 1 / prior_var is rounded once, here on the
 * host, exactly as the CPU backend does. */
extern "C" enum dt_status dt_cuda_bnn_finish(struct dt_backend *be, float *gmu, float *grho,
                                             const float *mu, const float *sigma,
                                             const float *dsigma, int64_t n, float inv_samples,
                                             float kl_weight, float prior_var,
                                             const struct dt_policy *pol)
{
    return dt_cuda_launched(be,
                            dt_cuda_bnn_finish_launch(gmu, grho, mu, sigma, dsigma, n, inv_samples,
                                                      kl_weight, 1.0f / prior_var,
                                                      &dt_cuda(be)->launch),
                            "bnn_finish");
}

/* portable: one product an element. */
extern "C" enum dt_status dt_cuda_square(struct dt_backend *be, float *y, const float *x, int64_t n,
                                         const struct dt_policy *pol)
{
    return dt_cuda_launched(be, dt_cuda_square_launch(y, x, n, &dt_cuda(be)->launch), "square");
}

/* portable: per row, a function of the global row (determinism/noise.h) and the row's
 * inputs: the CPU's bits. */
extern "C" enum dt_status dt_cuda_bnn_local_forward(struct dt_backend *be, float *y, float *sd,
                                                    float *eps_out, struct dt_xoro *lanes,
                                                    const float *gamma, const float *delta,
                                                    int64_t rows, int64_t width,
                                                    const struct dt_noise_site *s,
                                                    const struct dt_policy *pol)
{
    struct dt_bnn_local_io io = {};
    io.y = y;
    io.sd = sd;
    io.eps_out = eps_out;
    io.gamma = gamma;
    io.delta = delta;
    return dt_cuda_launched(be,
                            dt_cuda_local_launch(&io, lanes, rows, width, s, &dt_cuda(be)->launch),
                            "bnn_local_forward");
}

/* portable: per row, as the forward. */
extern "C" enum dt_status dt_cuda_bnn_local_backward(struct dt_backend *be, float *t,
                                                     float *eps_out, struct dt_xoro *lanes,
                                                     const float *eps_in, const float *dy,
                                                     const float *sd, int64_t rows, int64_t width,
                                                     const struct dt_noise_site *s,
                                                     const struct dt_policy *pol)
{
    struct dt_bnn_local_io io = {};
    io.t = t;
    io.eps_out = eps_out;
    io.dy = dy;
    io.sdi = sd;
    io.eps_in = eps_in;
    io.backward = true;
    return dt_cuda_launched(be,
                            dt_cuda_local_launch(&io, lanes, rows, width, s, &dt_cuda(be)->launch),
                            "bnn_local_backward");
}

/* portable: one product, one sum an element. */
extern "C" enum dt_status dt_cuda_bnn_local_input_grad(struct dt_backend *be, float *dx,
                                                       const float *dxm, const float *x,
                                                       const float *dxv, int64_t n,
                                                       const struct dt_policy *pol)
{
    return dt_cuda_launched(
        be, dt_cuda_local_input_grad_launch(dx, dxm, x, dxv, n, &dt_cuda(be)->launch),
        "bnn_local_input_grad");
}

/* portable: two products an element. */
extern "C" enum dt_status dt_cuda_bnn_local_scale(struct dt_backend *be, float *grho,
                                                  const float *sigma, const float *dsigma,
                                                  int64_t n, const struct dt_policy *pol)
{
    return dt_cuda_launched(
        be, dt_cuda_local_scale_launch(grho, sigma, dsigma, n, &dt_cuda(be)->launch),
        "bnn_local_scale");
}
