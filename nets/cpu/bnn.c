/* Bayesian layers and epsilon on the CPU backend (nets/backend.h, "Bayesian layers").
 * Everything here is elementwise or per lane with a fixed operation order, so every
 * policy and thread count gives the same bits; `math` picks the softplus/exp used for
 * sigma (portable ones at `math: portable`). Epsilon always comes from the portable
 * transform of determinism/eps.h. */
#include <math.h>

#include "determinism/eps.h"
#include "determinism/noise.h"
#include "determinism/portable_math.h"
#include "nets/bnn_elem.h"
#include "nets/cpu/cpu.h"

/* ---- epsilon ------------------------------------------------------------------------------
 * The reference definitions are the scalar functions of determinism/eps.h; these kernels
 * compute the same values in a vectorisable order: raw generator words for a tile first
 * (Philox blocks, or 8 lanes stepped side by side), then the Box-Muller transform over the
 * whole tile, then the values are copied to their elements. Bits are unchanged by
 * construction (same scalar operations per value; tests/test_bnn.c checks it). This file
 * is compiled with -fno-math-errno (CMakeLists.txt), which lets sqrtf vectorise; it changes
 * no value, only whether errno is set for negative arguments, which never occur here. */

#define EPS_TILE_BLOCKS 256 /* Philox blocks per tile: 1024 values */
#define EPS_GROUP 8         /* lanes stepped side by side */
#define EPS_TILE_STEPS 64   /* generator steps per lane per tile */

/* z[2i], z[2i+1] = the Box-Muller pair of words w[2i], w[2i+1]. */
DT_VECTOR_FN(gauss_words, (float *restrict z, const uint32_t *restrict w, int64_t pairs),
             (z, w, pairs))
{
    for (int64_t i = 0; i < pairs; i++) {
        float a, b;
        dt_gauss_pair(w[2 * i], w[2 * i + 1], &a, &b);
        z[2 * i] = a;
        z[2 * i + 1] = b;
    }
}

/* The four words of blocks b0 .. b0 + nb - 1. */
DT_VECTOR_FN(philox_words,
             (uint32_t *restrict w, uint64_t b0, int64_t nb, const struct dt_philox_stream *s),
             (w, b0, nb, s))
{
    const uint32_t k0 = s->key[0], k1 = s->key[1], step = s->step, w3 = s->word3;
    const uint32_t lo0 = (uint32_t)b0, hi = (uint32_t)(b0 >> 32);
    for (int64_t i = 0; i < nb; i++) {
        uint32_t c0 = lo0 + (uint32_t)i, c1 = hi, c2 = step, c3 = w3;
        dt_philox4x32_10_words(&c0, &c1, &c2, &c3, k0, k1);
        w[4 * i] = c0;
        w[4 * i + 1] = c1;
        w[4 * i + 2] = c2;
        w[4 * i + 3] = c3;
    }
}

struct philox_job {
    float *eps;
    const struct dt_philox_stream *s;
};

/* dst[i - begin] = element i of stream s's tensor, i in [begin, end) (dt_eps_philox_range). */
static void philox_fill(float *dst, int64_t begin, int64_t end, const struct dt_philox_stream *s)
{
    uint32_t words[4 * EPS_TILE_BLOCKS];
    float z[4 * EPS_TILE_BLOCKS];
    int64_t b = begin >> 2;
    const int64_t bend = (end + 3) >> 2;
    while (b < bend) {
        int64_t nb = bend - b < EPS_TILE_BLOCKS ? bend - b : EPS_TILE_BLOCKS;
        const int64_t to_wrap = (int64_t)(0x100000000ULL - (uint64_t)(uint32_t)b);
        if (nb > to_wrap) nb = to_wrap; /* keep the low counter word from wrapping in a tile */
        philox_words(words, (uint64_t)b, nb, s);
        gauss_words(z, words, 2 * nb);
        const int64_t lo = begin > 4 * b ? begin : 4 * b;
        const int64_t hi = end < 4 * (b + nb) ? end : 4 * (b + nb);
        memcpy(dst + (lo - begin), z + (lo - 4 * b), (size_t)(hi - lo) * sizeof(float));
        b += nb;
    }
}

static void philox_part(void *ctx, int64_t begin, int64_t end, int worker)
{
    const struct philox_job *j = ctx;
    philox_fill(j->eps + begin, begin, end, j->s);
}

/* portable: a pure function of (stream, element index); equals dt_eps_philox_range. */
enum dt_status dt_cpu_eps_philox(struct dt_backend *be, float *eps, int64_t n,
                                 const struct dt_philox_stream *s, const struct dt_policy *pol)
{
    struct philox_job job = {.eps = eps, .s = s};
    dt_pool_run(dt_cpu(be)->pool, n, 4096, philox_part, &job);
    return DT_OK;
}

struct lanes_job {
    float *eps;
    struct dt_xoro *lanes;
    int64_t n, P, skip_lane;
    uint64_t seed;
    uint32_t step, member, sample;
    bool backward;
};

static void seed_part(void *ctx, int64_t begin, int64_t end, int worker)
{
    const struct lanes_job *j = ctx;
    for (int64_t l = begin; l < end; l++)
        j->lanes[l] = dt_eps_lane_seed(j->seed, j->step, j->member, j->sample, (uint64_t)l);
}

/* portable: a pure function of (seed, step, member, sample, lane). */
enum dt_status dt_cpu_eps_lfsr_seed(struct dt_backend *be, struct dt_xoro *lanes, int64_t P,
                                    uint64_t seed, uint32_t step, uint32_t member, uint32_t sample,
                                    const struct dt_policy *pol)
{
    struct lanes_job job = {
        .lanes = lanes, .P = P, .seed = seed, .step = step, .member = member, .sample = sample};
    dt_pool_run(dt_cpu(be)->pool, P, 256, seed_part, &job);
    return DT_OK;
}

/* EPS_GROUP lanes, `count` steps each, words laid out [step][lane][hi, lo]: forwards
 * (output, then next) or backwards (prev, then output; row 0 = the last step taken). */
DT_VECTOR_FN(group_words,
             (uint32_t *restrict w, uint64_t *restrict s0, uint64_t *restrict s1, int64_t count,
              bool backward),
             (w, s0, s1, count, backward))
{
    if (!backward) {
        for (int64_t k = 0; k < count; k++)
            for (int j = 0; j < EPS_GROUP; j++) {
                struct dt_xoro s = {.s0 = s0[j], .s1 = s1[j]};
                const uint64_t o = dt_xoro_out(s);
                dt_xoro_next(&s);
                s0[j] = s.s0;
                s1[j] = s.s1;
                w[(k * EPS_GROUP + j) * 2] = (uint32_t)(o >> 32);
                w[(k * EPS_GROUP + j) * 2 + 1] = (uint32_t)o;
            }
    } else {
        for (int64_t k = 0; k < count; k++)
            for (int j = 0; j < EPS_GROUP; j++) {
                struct dt_xoro s = {.s0 = s0[j], .s1 = s1[j]};
                dt_xoro_prev(&s);
                const uint64_t o = dt_xoro_out(s);
                s0[j] = s.s0;
                s1[j] = s.s1;
                w[(k * EPS_GROUP + j) * 2] = (uint32_t)(o >> 32);
                w[(k * EPS_GROUP + j) * 2 + 1] = (uint32_t)o;
            }
    }
}

/* Lanes g*8 .. g*8+7 over the whole tensor (the group's lanes all exist). */
static void walk_group(const struct lanes_job *jb, int64_t g)
{
    uint32_t words[2 * EPS_GROUP * EPS_TILE_STEPS];
    float z[2 * EPS_GROUP * EPS_TILE_STEPS];
    uint64_t s0[EPS_GROUP], s1[EPS_GROUP];
    int64_t lo[EPS_GROUP], hi[EPS_GROUP];
    const int64_t n = jb->n, c = dt_eps_lane_chunk(n, jb->P), steps = dt_eps_lane_steps(n, jb->P);
    for (int j = 0; j < EPS_GROUP; j++) {
        const int64_t lane = g * EPS_GROUP + j;
        s0[j] = jb->lanes[lane].s0;
        s1[j] = jb->lanes[lane].s1;
        lo[j] = lane * c;
        hi[j] = lo[j] + c < n ? lo[j] + c : n;
    }
    for (int64_t done = 0; done < steps;) {
        const int64_t cnt = steps - done < EPS_TILE_STEPS ? steps - done : EPS_TILE_STEPS;
        group_words(words, s0, s1, cnt, jb->backward);
        gauss_words(z, words, cnt * EPS_GROUP);
        for (int64_t r = 0; r < cnt; r++) {
            /* row r is step done + r going forwards, steps - 1 - (done + r) going back */
            const int64_t k = jb->backward ? steps - 1 - (done + r) : done + r;
            for (int j = 0; j < EPS_GROUP; j++) {
                const int64_t e = lo[j] + 2 * k;
                const float *zz = z + (r * EPS_GROUP + j) * 2;
                if (e < hi[j]) jb->eps[e] = zz[0];
                if (e + 1 < hi[j]) jb->eps[e + 1] = zz[1];
            }
        }
        done += cnt;
    }
    for (int j = 0; j < EPS_GROUP; j++) {
        struct dt_xoro *st = &jb->lanes[g * EPS_GROUP + j];
        st->s0 = s0[j];
        st->s1 = s1[j];
    }
}

static void walk_part(void *ctx, int64_t begin, int64_t end, int worker)
{
    const struct lanes_job *j = ctx;
    const int64_t full = j->P / EPS_GROUP;
    for (int64_t g = begin; g < end; g++) {
        if (g < full) {
            walk_group(j, g);
        } else { /* the last P % 8 lanes: the reference walk */
            for (int64_t l = full * EPS_GROUP; l < j->P; l++) {
                if (j->backward) dt_eps_lane_backward(j->eps, j->n, j->P, l, &j->lanes[l]);
                else dt_eps_lane_forward(j->eps, j->n, j->P, l, &j->lanes[l]);
            }
        }
    }
}

/* portable: each lane walks its own chunk; lanes never share state; equals the
 * dt_eps_lane_forward / dt_eps_lane_backward walks of every lane. */
enum dt_status dt_cpu_eps_lfsr(struct dt_backend *be, float *eps, int64_t n, struct dt_xoro *lanes,
                               int64_t P, bool backward, int64_t skip_lane,
                               const struct dt_policy *pol)
{
    struct lanes_job job = {
        .eps = eps, .lanes = lanes, .n = n, .P = P, .skip_lane = skip_lane, .backward = backward};
    const int64_t groups = P / EPS_GROUP + (P % EPS_GROUP != 0);
    const int64_t steps = dt_eps_lane_steps(n, P) * EPS_GROUP;
    const int64_t grain = steps >= 512 ? 1 : 512 / steps; /* >= ~512 generator steps a task */
    dt_pool_run(dt_cpu(be)->pool, groups, grain, walk_part, &job);
    if (!backward && skip_lane >= 0) dt_xoro_prev(&lanes[skip_lane]); /* fault: one draw fewer */
    return DT_OK;
}

/* ---- Bayesian elementwise ops --------------------------------------------------------- */

struct bnn_job {
    float *a, *b;
    const float *c, *d, *e;
    float f0, f1, f2;
    bool flag;
};

/* The per-element arithmetic of these ops is nets/bnn_elem.h's, the functions the CUDA
 * kernels call too: one formula, one place. */
DT_VECTOR_PART(sigma_part)
{
    const struct bnn_job *j = ctx;
    float *restrict sigma = j->a, *restrict dsigma = j->b;
    const float *restrict rho = j->c;
    if (j->flag) /* the own softplus and exp: branch-free, the loop vectorises */
        for (int64_t i = begin; i < end; i++)
            dt_bnn_sigma_elem(&sigma[i], &dsigma[i], rho[i], true);
    else
        for (int64_t i = begin; i < end; i++)
            dt_bnn_sigma_elem(&sigma[i], &dsigma[i], rho[i], false);
}

/* portable wherever dt_math_own_elementary (fast and portable: the own softplus and exp,
 * the faster here); strict: the C library's. */
enum dt_status dt_cpu_bnn_sigma(struct dt_backend *be, float *sigma, float *dsigma,
                                const float *rho, int64_t n, const struct dt_policy *pol)
{
    struct bnn_job job = {.a = sigma, .b = dsigma, .c = rho, .flag = dt_math_own_elementary(pol)};
    dt_pool_run(dt_cpu(be)->pool, n, 4096, sigma_part, &job);
    return DT_OK;
}

DT_VECTOR_PART(sample_part)
{
    const struct bnn_job *j = ctx;
    float *restrict w = j->a;
    const float *restrict mu = j->c, *restrict sigma = j->d, *restrict eps = j->e;
    for (int64_t i = begin; i < end; i++) w[i] = dt_bnn_sample_elem(mu[i], sigma[i], eps[i]);
}

/* portable: one product and one sum per element. */
enum dt_status dt_cpu_bnn_sample(struct dt_backend *be, float *w, const float *mu,
                                 const float *sigma, const float *eps, int64_t n,
                                 const struct dt_policy *pol)
{
    struct bnn_job job = {.a = w, .c = mu, .d = sigma, .e = eps};
    dt_pool_run(dt_cpu(be)->pool, n, 16384, sample_part, &job);
    return DT_OK;
}

struct acc_job {
    float *gmu, *grho;
    const float *g, *eps, *dsigma;
    bool first;
};

DT_VECTOR_PART(acc_part)
{
    const struct acc_job *j = ctx;
    float *restrict gmu = j->gmu, *restrict grho = j->grho;
    const float *restrict g = j->g, *restrict eps = j->eps, *restrict ds = j->dsigma;
    if (j->first) { /* two loops: the branch stays out of the vectorised body */
        for (int64_t i = begin; i < end; i++)
            dt_bnn_accumulate_elem(&gmu[i], &grho[i], g[i], eps[i], ds[i], true);
    } else {
        for (int64_t i = begin; i < end; i++)
            dt_bnn_accumulate_elem(&gmu[i], &grho[i], g[i], eps[i], ds[i], false);
    }
}

/* portable: elementwise, fixed operation order; samples are added in the caller's order. */
enum dt_status dt_cpu_bnn_accumulate(struct dt_backend *be, float *gmu, float *grho, const float *g,
                                     const float *eps, const float *dsigma, int64_t n, bool first,
                                     const struct dt_policy *pol)
{
    struct acc_job job = {
        .gmu = gmu, .grho = grho, .g = g, .eps = eps, .dsigma = dsigma, .first = first};
    dt_pool_run(dt_cpu(be)->pool, n, 16384, acc_part, &job);
    return DT_OK;
}

struct finish_job {
    float *gmu, *grho;
    const float *mu, *sigma, *dsigma;
    float inv_s, klw, inv_prior_var;
};

DT_VECTOR_PART(finish_part)
{
    const struct finish_job *j = ctx;
    float *restrict gmu = j->gmu, *restrict grho = j->grho;
    const float *restrict mu = j->mu, *restrict sigma = j->sigma, *restrict ds = j->dsigma;
    const float inv_s = j->inv_s, klw = j->klw, ipv = j->inv_prior_var;
    for (int64_t i = begin; i < end; i++)
        dt_bnn_finish_elem(&gmu[i], &grho[i], mu[i], sigma[i], ds[i], inv_s, klw, ipv);
}

/* portable: elementwise, fixed operation order (1 / prior_var is rounded once, here). */
enum dt_status dt_cpu_bnn_finish(struct dt_backend *be, float *gmu, float *grho, const float *mu,
                                 const float *sigma, const float *dsigma, int64_t n,
                                 float inv_samples, float kl_weight, float prior_var,
                                 const struct dt_policy *pol)
{
    struct finish_job job = {.gmu = gmu,
                             .grho = grho,
                             .mu = mu,
                             .sigma = sigma,
                             .dsigma = dsigma,
                             .inv_s = inv_samples,
                             .klw = kl_weight,
                             .inv_prior_var = 1.0f / prior_var};
    dt_pool_run(dt_cpu(be)->pool, n, 16384, finish_part, &job);
    return DT_OK;
}

/* ---- the local reparameterisation estimator (nets/bnn_elem.h; noise: determinism/noise.h)
 * A row's noise is made a tile of columns at a time: raw words first (Philox blocks, or the
 * row's lane stepped), then the Box-Muller transform over the tile (vectorised), then the
 * tile's elementwise formula. The lane walks backwards tile by tile from the row's last
 * tile, so its state passes through the same sequence as the reference walk. */

#define NOISE_TILE 512 /* columns a tile (even: a tile holds whole pairs) */

/* z[0, c1 - c0) = the noise of columns [c0, c1) of the row with global row r (c0 even);
 * lfsr: the lane advanced over the tile's pairs (forwards) or walked back over them. */
static void noise_tile(float *z, const struct dt_noise_site *s, struct dt_xoro *lane, bool backward,
                       int64_t r, int64_t width, int64_t c0, int64_t c1)
{
    if (s->mode == DT_NOISE_PHILOX) {
        philox_fill(z, r * width + c0, r * width + c1, &s->stream);
        return;
    }
    uint64_t w64[NOISE_TILE / 2];
    uint32_t words[NOISE_TILE];
    float zz[NOISE_TILE];
    const int64_t pairs = (c1 - c0 + 1) / 2;
    dt_bnn_local_lane_words(w64, 0, pairs, lane, backward); /* the CUDA kernel's stepping */
    for (int64_t k = 0; k < pairs; k++) {
        words[2 * k] = (uint32_t)(w64[k] >> 32);
        words[2 * k + 1] = (uint32_t)w64[k];
    }
    gauss_words(zz, words, pairs);
    memcpy(z, zz, (size_t)(c1 - c0) * sizeof(float));
}

struct local_job {
    float *y, *sd, *eps_out, *t;
    struct dt_xoro *lanes;
    const float *gamma, *delta, *eps_in, *dy, *sdi;
    int64_t width;
    const struct dt_noise_site *s;
    bool backward;
};

/* The tile's elementwise formulas (forward: y and sd; backward: t). */
DT_VECTOR_FN(local_forward_tile,
             (float *restrict y, float *restrict sd, const float *restrict gamma,
              const float *restrict delta, const float *restrict z, int64_t n),
             (y, sd, gamma, delta, z, n))
{
    for (int64_t i = 0; i < n; i++) {
        float s;
        y[i] = dt_bnn_local_out(gamma[i], delta[i], z[i], &s);
        sd[i] = s;
    }
}
DT_VECTOR_FN(local_backward_tile,
             (float *restrict t, const float *restrict dy, const float *restrict z,
              const float *restrict sd, int64_t n),
             (t, dy, z, sd, n))
{
    for (int64_t i = 0; i < n; i++) t[i] = dt_bnn_local_dvar(dy[i], z[i], sd[i]);
}

/* Rows [begin, end): each row's noise is a function of its global row alone. */
static void local_part(void *ctx, int64_t begin, int64_t end, int worker)
{
    const struct local_job *j = ctx;
    const struct dt_noise_site *s = j->s;
    const int64_t W = j->width, tiles = (W + NOISE_TILE - 1) / NOISE_TILE;
    float zbuf[NOISE_TILE], g[NOISE_TILE], d[NOISE_TILE];
    for (int64_t r = begin; r < end; r++) {
        struct dt_xoro *lane = j->lanes ? &j->lanes[r] : NULL;
        for (int64_t q = 0; q < tiles; q++) {
            /* lfsr backward: the last tile first */
            const int64_t tile = j->backward && s->mode == DT_NOISE_LFSR ? tiles - 1 - q : q;
            const int64_t c0 = tile * NOISE_TILE, c1 = c0 + NOISE_TILE < W ? c0 + NOISE_TILE : W;
            const int64_t at = r * W + c0, n = c1 - c0;
            const float *z = zbuf;
            if (s->mode == DT_NOISE_STORED) {
                z = j->eps_in + at;
                if (j->eps_out) memcpy(j->eps_out + at, z, (size_t)n * sizeof(float));
            } else { /* drawn where it is kept, when it is */
                float *dst = j->eps_out ? j->eps_out + at : zbuf;
                noise_tile(dst, s, lane, j->backward, s->row0 + r, W, c0, c1);
                z = dst;
            }
            if (!j->backward) {
                /* y may alias gamma and sd delta: copy the inputs of the tile first */
                memcpy(g, j->gamma + at, (size_t)n * sizeof(float));
                memcpy(d, j->delta + at, (size_t)n * sizeof(float));
                local_forward_tile(j->y + at, j->sd + at, g, d, z, n);
            } else {
                local_backward_tile(j->t + at, j->dy + at, z, j->sdi + at, n);
            }
        }
    }
}

static int64_t local_grain(int64_t width) { return 1 + 2048 / width; }

/* portable: per row, a function of the global row (determinism/noise.h) and the row's
 * inputs; one root, one product, one sum an element. */
enum dt_status dt_cpu_bnn_local_forward(struct dt_backend *be, float *y, float *sd, float *eps_out,
                                        struct dt_xoro *lanes, const float *gamma,
                                        const float *delta, int64_t rows, int64_t width,
                                        const struct dt_noise_site *s, const struct dt_policy *pol)
{
    struct local_job j = {.y = y,
                          .sd = sd,
                          .eps_out = eps_out,
                          .lanes = lanes,
                          .gamma = gamma,
                          .delta = delta,
                          .width = width,
                          .s = s};
    dt_pool_run(dt_cpu(be)->pool, rows, local_grain(width), local_part, &j);
    return DT_OK;
}

/* portable: per row, as the forward. */
enum dt_status dt_cpu_bnn_local_backward(struct dt_backend *be, float *t, float *eps_out,
                                         struct dt_xoro *lanes, const float *eps_in,
                                         const float *dy, const float *sd, int64_t rows,
                                         int64_t width, const struct dt_noise_site *s,
                                         const struct dt_policy *pol)
{
    struct local_job j = {.t = t,
                          .eps_out = eps_out,
                          .lanes = lanes,
                          .eps_in = eps_in,
                          .dy = dy,
                          .sdi = sd,
                          .width = width,
                          .s = s,
                          .backward = true};
    dt_pool_run(dt_cpu(be)->pool, rows, local_grain(width), local_part, &j);
    return DT_OK;
}

DT_VECTOR_PART(square_part)
{
    const struct bnn_job *j = ctx;
    float *y = j->a;
    const float *x = j->c;
    for (int64_t i = begin; i < end; i++) y[i] = dt_bnn_square_elem(x[i]);
}

/* portable: one product an element. */
enum dt_status dt_cpu_square(struct dt_backend *be, float *y, const float *x, int64_t n,
                             const struct dt_policy *pol)
{
    struct bnn_job job = {.a = y, .c = x};
    dt_pool_run(dt_cpu(be)->pool, n, 16384, square_part, &job);
    return DT_OK;
}

DT_VECTOR_PART(input_grad_part)
{
    const struct bnn_job *j = ctx;
    float *dx = j->a;
    const float *dxm = j->c, *restrict x = j->d, *restrict dxv = j->e;
    for (int64_t i = begin; i < end; i++) dx[i] = dt_bnn_local_dinput(dxm[i], x[i], dxv[i]);
}

/* portable: one product, one sum an element. */
enum dt_status dt_cpu_bnn_local_input_grad(struct dt_backend *be, float *dx, const float *dxm,
                                           const float *x, const float *dxv, int64_t n,
                                           const struct dt_policy *pol)
{
    struct bnn_job job = {.a = dx, .c = dxm, .d = x, .e = dxv};
    dt_pool_run(dt_cpu(be)->pool, n, 16384, input_grad_part, &job);
    return DT_OK;
}

DT_VECTOR_PART(local_scale_part)
{
    const struct bnn_job *j = ctx;
    float *restrict g = j->a;
    const float *restrict sg = j->c, *restrict ds = j->d;
    for (int64_t i = begin; i < end; i++) g[i] = dt_bnn_local_scale_elem(g[i], sg[i], ds[i]);
}

/* portable: two products an element. */
enum dt_status dt_cpu_bnn_local_scale(struct dt_backend *be, float *grho, const float *sigma,
                                      const float *dsigma, int64_t n, const struct dt_policy *pol)
{
    struct bnn_job job = {.a = grho, .c = sigma, .d = dsigma};
    dt_pool_run(dt_cpu(be)->pool, n, 16384, local_scale_part, &job);
    return DT_OK;
}
