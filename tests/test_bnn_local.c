/* Tests for the Bayesian MLP's local reparameterisation estimator (model.estimator: local;
 * nets/bnn_mlp.c, the per-element arithmetic of nets/bnn_elem.h, the noise of
 * determinism/noise.h) on the CPU backend:
 *   ops_match_definition      dt_bnn_local_forward / _backward against the noise's definition
 *                             and the element functions: philox, lfsr forwards and back (the
 *                             lanes at their ends and back at their seeds), stored, eps_out;
 *                             a batch split at a row gives the whole batch's rows; widths of
 *                             one column, an odd count and several of the CPU's tiles; 1 and 3
 *                             threads; and the CUDA kernels' work items run on the host, the
 *                             same bits (nets/cuda/bnn.cu calls those functions);
 *   gradients_match_double_reference  the mu and rho gradients and the loss of two steps
 *                             against a double-precision local estimator written here, whose
 *                             own gradient is checked by central differences;
 *   training_bits             stored(philox) == philox and stored(lfsr) == lfsr at every step,
 *                             1 == 3 threads; philox != lfsr and local != weights (negative
 *                             controls);
 *   fault_injection           a lane that draws one pair fewer is caught by the lane check
 *                             (naming the row) and, with verify, by the regenerated noise
 *                             (naming the layer);
 *   memory_accounting         dt_model_memory per rng mode;
 *   reference_reproduces (e2e) configs/bnn-local.yaml's committed 100-step reference
 *                             (results/cpu/bnn-local/reference: portable under every rng
 *                             mode) rerun by `detrain reproduce`: identical at every step.
 * The e2e case skips (77) when Fashion-MNIST is not installed. */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "determinism/noise.h"
#include "harness/record/hash.h"
#include "nets/backend.h"
#include "nets/bnn_elem.h"
#include "nets/model.h"
#include "nets/step.h"
#include "core/util.h"
#include "tests/check.h"
#include "tests/op_helpers.h"
#include "tests/run_helper.h"

static uint64_t lcg_state = 1;
static double lcg(void) /* uniform in [-1, 1) */
{
    lcg_state = lcg_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (double)(lcg_state >> 11) * 0x1p-52 - 1.0;
}

static float *buf(struct dt_backend *be, int64_t n)
{
    float *p = dt_backend_alloc(be, (size_t)n * sizeof(float));
    DT_ASSERT(dt_backend_host_view(be, p) == p); /* CPU: host memory */
    return p;
}

static int64_t differing(const float *a, const float *b, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if (dt_float_bits(a[i]) != dt_float_bits(b[i])) return i;
    return -1;
}

#define SAME_BITS(what, a, b, n)                                                                   \
    do {                                                                                           \
        const int64_t at_ = differing((a), (b), (n));                                              \
        if (at_ >= 0)                                                                              \
            fprintf(stderr, "%s (W %lld, %d threads): element %lld: %a vs %a\n", (what),           \
                    (long long)W, threads, (long long)at_, (double)(a)[at_], (double)(b)[at_]);    \
        CHECK(at_ < 0);                                                                            \
    } while (0)

/* ---- 1. the ops against the definition ------------------------------------------------- */

enum { ROWS = 5, ROW0 = 7 };
static const uint64_t SEED = 0x5eed;
static const uint32_t STEP = 9, MEMBER = 3, SAMPLE = 1, LAYER = 2;

static bool lanes_equal(const struct dt_xoro *a, const struct dt_xoro *b, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if (!dt_xoro_equal(a[i], b[i])) return false;
    return true;
}

static void ops_case(int threads, int64_t W)
{
    struct dt_backend *be = cpu(threads);
    const int64_t n = ROWS * W;
    float *gamma = buf(be, n), *delta = buf(be, n), *dy = buf(be, n), *eps_in = buf(be, n);
    for (int64_t i = 0; i < n; i++) {
        gamma[i] = (float)lcg();
        delta[i] = i % 11 == 3 ? 0.0f : (float)fabs(2.0 * lcg()); /* some zero variances */
        dy[i] = (float)lcg();
        eps_in[i] = (float)(3.0 * lcg());
    }
    const struct dt_philox_stream stream = dt_noise_stream(SEED, STEP, LAYER, MEMBER, SAMPLE);
    /* the definition: philox rows, and each row's lane walked forwards from its seed */
    float *zp = malloc((size_t)n * sizeof *zp), *zl = malloc((size_t)n * sizeof *zl);
    struct dt_xoro seeds[ROWS], ends[ROWS];
    for (int64_t r = 0; r < ROWS; r++) {
        dt_noise_philox_row(zp + r * W, ROW0 + r, W, &stream);
        seeds[r] = ends[r] = dt_noise_lane_seed(SEED, STEP, MEMBER, SAMPLE, ROW0 + r);
        dt_noise_lane_row_walk(zl + r * W, W, &ends[r], false);
    }
    float *want_y = malloc((size_t)n * sizeof(float)), *want_sd = malloc((size_t)n * sizeof(float));
    float *want_t = malloc((size_t)n * sizeof(float));
    float *y = buf(be, n), *sd = buf(be, n), *t = buf(be, n), *eps = buf(be, n);
    struct dt_xoro *lanes = dt_backend_alloc(be, ROWS * sizeof *lanes);
    const struct dt_policy pol = rng_policy("lfsr");
    const char *const mode_name[] = {"philox", "lfsr"};
    for (int mode = 0; mode < 2; mode++) {
        const float *z = mode ? zl : zp;
        for (int64_t i = 0; i < n; i++) {
            want_y[i] = dt_bnn_local_out(gamma[i], delta[i], z[i], &want_sd[i]);
            want_t[i] = dt_bnn_local_dvar(dy[i], z[i], want_sd[i]);
        }
        struct dt_noise_site s = {
            .mode = mode ? DT_NOISE_LFSR : DT_NOISE_PHILOX, .stream = stream, .row0 = ROW0};
        struct dt_xoro *ln = mode ? lanes : NULL;
        /* forward, y over gamma and sd over delta (the model's aliasing) */
        memcpy(y, gamma, (size_t)n * sizeof(float));
        memcpy(sd, delta, (size_t)n * sizeof(float));
        if (ln)
            CHECK_INT_EQ(dt_dropout_seed(be, ln, ROWS, (int64_t)dt_noise_lane_row(SAMPLE, ROW0),
                                         SEED, STEP, MEMBER, &pol),
                         DT_OK);
        CHECK_INT_EQ(dt_bnn_local_forward(be, y, sd, eps, ln, y, sd, ROWS, W, &s, &pol), DT_OK);
        SAME_BITS(mode_name[mode], y, want_y, n);
        SAME_BITS(mode_name[mode], sd, want_sd, n);
        SAME_BITS(mode_name[mode], eps, z, n);
        if (ln) CHECK(lanes_equal(ln, ends, ROWS));
        /* backward: the same noise regenerated (the lanes walked back to their seeds) */
        memset(eps, 0, (size_t)n * sizeof(float));
        CHECK_INT_EQ(dt_bnn_local_backward(be, t, eps, ln, NULL, dy, sd, ROWS, W, &s, &pol), DT_OK);
        SAME_BITS(mode_name[mode], t, want_t, n);
        SAME_BITS(mode_name[mode], eps, z, n);
        if (ln) CHECK(lanes_equal(ln, seeds, ROWS));
        /* a batch split at row 2 (a rank's or a shard's rows): each part keyed by its first
         * global row gives the whole batch's rows */
        for (int part = 0; part < 2; part++) {
            const int64_t r0 = part ? 2 : 0, rows = part ? ROWS - 2 : 2;
            struct dt_noise_site sp = s;
            sp.row0 = ROW0 + r0;
            if (ln)
                CHECK_INT_EQ(dt_dropout_seed(be, ln, rows,
                                             (int64_t)dt_noise_lane_row(SAMPLE, ROW0 + r0), SEED,
                                             STEP, MEMBER, &pol),
                             DT_OK);
            CHECK_INT_EQ(dt_bnn_local_forward(be, y + r0 * W, sd + r0 * W, NULL, ln, gamma + r0 * W,
                                              delta + r0 * W, rows, W, &sp, &pol),
                         DT_OK);
        }
        SAME_BITS("split", y, want_y, n);
        /* the CUDA kernels' work items on the host: a thread a Philox block, or a row */
        struct dt_bnn_local_io io = {.y = y, .sd = sd, .gamma = gamma, .delta = delta};
        memset(y, 0, (size_t)n * sizeof(float));
        for (int back = 0; back < 2; back++) {
            io.backward = back;
            io.t = t, io.dy = dy, io.sdi = want_sd;
            if (back) memset(t, 0, (size_t)n * sizeof(float));
            if (!mode) {
                const int64_t e0 = ROW0 * W;
                for (uint64_t q = (uint64_t)e0 >> 2; q <= (uint64_t)(e0 + n - 1) >> 2; q++)
                    dt_bnn_local_philox_block(&io, e0, n, q, &stream);
            } else {
                struct dt_xoro st[ROWS];
                memcpy(st, back ? ends : seeds, sizeof st);
                for (int64_t r = 0; r < ROWS; r++) dt_bnn_local_lane_row(&io, r, W, &st[r]);
                CHECK(lanes_equal(st, back ? seeds : ends, ROWS));
                /* the tiled kernel's schedule: every row's lane stepped over a tile of pairs
                 * (the tiles last to first backwards), then the tile's pairs, in reverse */
                const int64_t TP = DT_BNN_LOCAL_TILE_PAIRS, pairs = (W + 1) / 2;
                const int64_t tiles = (pairs + TP - 1) / TP;
                uint64_t words[ROWS][DT_BNN_LOCAL_TILE_PAIRS];
                float *again = malloc((size_t)n * sizeof(float));
                float *keep_y = back ? t : y;
                memcpy(again, keep_y, (size_t)n * sizeof(float));
                memset(keep_y, 0, (size_t)n * sizeof(float));
                memcpy(st, back ? ends : seeds, sizeof st);
                for (int64_t j = 0; j < tiles; j++) {
                    const int64_t k0 = (back ? tiles - 1 - j : j) * TP;
                    const int64_t cnt = pairs - k0 < TP ? pairs - k0 : TP;
                    for (int64_t r = 0; r < ROWS; r++)
                        dt_bnn_local_lane_words(words[r], k0, cnt, &st[r], back);
                    for (int64_t e = ROWS * cnt - 1; e >= 0; e--)
                        dt_bnn_local_pair(&io, e / cnt, W, k0 + e % cnt, words[e / cnt][e % cnt]);
                }
                CHECK(lanes_equal(st, back ? seeds : ends, ROWS));
                SAME_BITS("cuda tiles", keep_y, again, n);
                free(again);
            }
        }
        SAME_BITS("cuda items", y, want_y, n);
        SAME_BITS("cuda items", sd, want_sd, n);
        SAME_BITS("cuda items", t, want_t, n);
    }
    /* stored: the kept noise read back */
    for (int64_t i = 0; i < n; i++) {
        float sdv;
        (void)dt_bnn_local_out(gamma[i], delta[i], 0.0f, &sdv);
        want_t[i] = dt_bnn_local_dvar(dy[i], eps_in[i], sdv);
        want_sd[i] = sdv;
    }
    struct dt_noise_site st = {.mode = DT_NOISE_STORED, .stream = stream, .row0 = ROW0};
    CHECK_INT_EQ(dt_bnn_local_backward(be, t, NULL, NULL, eps_in, dy, want_sd, ROWS, W, &st, &pol),
                 DT_OK);
    SAME_BITS("stored", t, want_t, n);
    struct dt_bnn_local_io io = {.t = y, .dy = dy, .sdi = want_sd, .backward = true};
    for (int64_t i = 0; i < n; i++) dt_bnn_local_item(&io, i, eps_in[i]);
    SAME_BITS("cuda items stored", y, want_t, n);
    /* the zero variances pass nothing to sigma */
    CHECK(t[3] == 0.0f);
    free(zp), free(zl), free(want_y), free(want_sd), free(want_t);
    dt_backend_free(be, gamma), dt_backend_free(be, delta), dt_backend_free(be, dy);
    dt_backend_free(be, eps_in), dt_backend_free(be, y), dt_backend_free(be, sd);
    dt_backend_free(be, t), dt_backend_free(be, eps), dt_backend_free(be, lanes);
    dt_backend_destroy(be);
}

DT_TEST(ops_match_definition)
{
    static const int64_t widths[] = {1, 25, 1100}; /* 1100: three of the CPU's noise tiles */
    for (int ti = 0; ti < 2; ti++)
        for (int wi = 0; wi < 3; wi++) ops_case(ti ? 3 : 1, widths[wi]);
}

/* ---- a small network ------------------------------------------------------------------ */

#define MAXL 4
struct net {
    int64_t dims[MAXL + 1], batch;
    int L;
    struct dt_bnn_options o;
};

static struct net small_net(int64_t in, int64_t h0, int64_t h1, int64_t classes, int64_t batch,
                            int samples)
{
    struct net n = {.dims = {in, h0, h1, classes}, .batch = batch, .L = 3};
    n.o.samples = samples;
    n.o.test_samples = 2;
    n.o.prior_sigma = 0.7f;
    n.o.rho_init = -2.0f; /* sigma 0.127 */
    n.o.kl_weight = 0.1f;
    n.o.lanes = 8;
    n.o.lfsr_check_every = 1;
    n.o.local = true;
    return n;
}

static struct dt_model *build(struct dt_backend *be, const struct net *n, uint64_t seed)
{
    struct dt_model *m = NULL;
    struct dt_error err;
    const int64_t hidden[2] = {n->dims[1], n->dims[2]};
    if (dt_bnn_mlp_create(&m, be, n->dims[0], hidden, n->L - 1, n->dims[n->L], n->batch, &n->o,
                          &err) != DT_OK) {
        fprintf(stderr, "dt_bnn_mlp_create: %s\n", err.msg);
        DT_ASSERT(0);
    }
    dt_model_init(m, seed, 0);
    return m;
}

/* Examples: x uniform in [-1, 1), y the argmax of fixed random projections. */
struct data {
    int64_t n, in;
    float *x;
    uint8_t *y;
};
static struct data make_data(const struct net *nt, int64_t n, uint64_t seed)
{
    const int64_t in = nt->dims[0], C = nt->dims[nt->L];
    struct data d = {n, in, malloc((size_t)(n * in) * sizeof(float)), malloc((size_t)n)};
    lcg_state = seed;
    double proj[64 * 16];
    DT_ASSERT(in * C <= 64 * 16);
    for (int64_t i = 0; i < in * C; i++) proj[i] = lcg();
    for (int64_t e = 0; e < n; e++) {
        int64_t best = 0;
        double bv = -1e300;
        for (int64_t i = 0; i < in; i++) d.x[e * in + i] = (float)lcg();
        for (int64_t c = 0; c < C; c++) {
            double v = 0;
            for (int64_t i = 0; i < in; i++) v += d.x[e * in + i] * proj[i * C + c];
            if (v > bv) bv = v, best = c;
        }
        d.y[e] = (uint8_t)best;
    }
    return d;
}

static const struct dt_sgd_options sgd = {.lr = 0.05f, .momentum = 0.9f, .weight_decay = 0.0f};

/* ---- 2. gradients against a double-precision local estimator --------------------------- */

static double softplus_d(double r) { return log1p(exp(r)); }
static double sigmoid_d(double r) { return 1.0 / (1.0 + exp(-r)); }

/* Every parameter in double: mu[k], rho[k] for tensor k (2l weight (in, out), 2l + 1 bias). */
struct params {
    double *mu[2 * MAXL], *rho[2 * MAXL];
};
static int64_t tsize(const struct net *n, int k)
{
    return k % 2 ? n->dims[k / 2 + 1] : n->dims[k / 2] * n->dims[k / 2 + 1];
}

/* The noise of every layer for sample s of a step, by the definition (rows 0 .. B-1 global). */
static void ref_noise(float *z[MAXL], const struct net *n, bool lfsr, uint64_t seed, uint32_t step,
                      uint32_t member, uint32_t s, int64_t B)
{
    for (int64_t r = 0; r < B; r++) {
        struct dt_xoro lane = dt_noise_lane_seed(seed, step, member, s, r);
        for (int l = 0; l < n->L; l++) {
            const int64_t W = n->dims[l + 1];
            if (lfsr) {
                dt_noise_lane_row_walk(z[l] + r * W, W, &lane, false);
            } else {
                const struct dt_philox_stream st =
                    dt_noise_stream(seed, step, (uint32_t)l, member, s);
                dt_noise_philox_row(z[l] + r * W, r, W, &st);
            }
        }
    }
}

/* The data term (mean cross-entropy) of one sample with fixed noise z; with gmu, grho, its
 * gradients added (times `scale`). Written from the math: y = x mu_w + mu_b + sqrt(x^2
 * sigma_w^2 + sigma_b^2) z per layer, ReLU between. */
static double ref_loss(const struct net *n, const struct params *p, float *const z[MAXL],
                       const float *x, const uint8_t *yl, int64_t B, struct params *g, double scale)
{
    double *a[MAXL + 1], *sd[MAXL], *dA = NULL;
    a[0] = malloc((size_t)(B * n->dims[0]) * sizeof(double));
    for (int64_t i = 0; i < B * n->dims[0]; i++) a[0][i] = x[i];
    for (int l = 0; l < n->L; l++) {
        const int64_t in = n->dims[l], out = n->dims[l + 1];
        const double *mw = p->mu[2 * l], *mb = p->mu[2 * l + 1];
        const double *rw = p->rho[2 * l], *rb = p->rho[2 * l + 1];
        a[l + 1] = malloc((size_t)(B * out) * sizeof(double));
        sd[l] = malloc((size_t)(B * out) * sizeof(double));
        for (int64_t b = 0; b < B; b++)
            for (int64_t o = 0; o < out; o++) {
                const double sb = softplus_d(rb[o]);
                double gam = mb[o], del = sb * sb;
                for (int64_t i = 0; i < in; i++) {
                    const double xi = a[l][b * in + i], sw = softplus_d(rw[i * out + o]);
                    gam += xi * mw[i * out + o];
                    del += xi * xi * sw * sw;
                }
                sd[l][b * out + o] = sqrt(del);
                double v = gam + sqrt(del) * z[l][b * out + o];
                if (l + 1 < n->L && v < 0) v = 0;
                a[l + 1][b * out + o] = v;
            }
    }
    const int64_t C = n->dims[n->L];
    double loss = 0;
    double *dy = malloc((size_t)(B * C) * sizeof(double));
    for (int64_t b = 0; b < B; b++) {
        const double *lg = a[n->L] + b * C;
        double mx = lg[0], sum = 0;
        for (int64_t c = 1; c < C; c++) mx = lg[c] > mx ? lg[c] : mx;
        for (int64_t c = 0; c < C; c++) sum += exp(lg[c] - mx);
        loss -= (lg[yl[b]] - mx - log(sum)) / (double)B;
        for (int64_t c = 0; c < C; c++)
            dy[b * C + c] = (exp(lg[c] - mx) / sum - (c == yl[b])) / (double)B;
    }
    if (g) {
        for (int l = n->L - 1; l >= 0; l--) {
            const int64_t in = n->dims[l], out = n->dims[l + 1];
            double *tt = malloc((size_t)(B * out) * sizeof(double));
            for (int64_t i = 0; i < B * out; i++)
                tt[i] = sd[l][i] > 0 ? dy[i] * z[l][i] / sd[l][i] : 0.0;
            for (int64_t o = 0; o < out; o++) {
                const double rb = p->rho[2 * l + 1][o];
                double sm = 0, sv = 0;
                for (int64_t b = 0; b < B; b++) sm += dy[b * out + o], sv += tt[b * out + o];
                g->mu[2 * l + 1][o] += scale * sm;
                g->rho[2 * l + 1][o] += scale * softplus_d(rb) * sv * sigmoid_d(rb);
                for (int64_t i = 0; i < in; i++) {
                    const double rw = p->rho[2 * l][i * out + o];
                    double gm = 0, gv = 0;
                    for (int64_t b = 0; b < B; b++) {
                        const double xi = a[l][b * in + i];
                        gm += xi * dy[b * out + o];
                        gv += xi * xi * tt[b * out + o];
                    }
                    g->mu[2 * l][i * out + o] += scale * gm;
                    g->rho[2 * l][i * out + o] += scale * softplus_d(rw) * gv * sigmoid_d(rw);
                }
            }
            if (l > 0) {
                dA = malloc((size_t)(B * in) * sizeof(double));
                for (int64_t b = 0; b < B; b++)
                    for (int64_t i = 0; i < in; i++) {
                        const double xi = a[l][b * in + i];
                        double v = 0;
                        for (int64_t o = 0; o < out; o++) {
                            const double sw = softplus_d(p->rho[2 * l][i * out + o]);
                            v += dy[b * out + o] * p->mu[2 * l][i * out + o] +
                                 xi * tt[b * out + o] * sw * sw;
                        }
                        dA[b * in + i] = xi > 0 ? v : 0.0;
                    }
                free(dy);
                dy = dA;
            }
            free(tt);
        }
    }
    free(dy);
    for (int l = 0; l <= n->L; l++) free(a[l]);
    for (int l = 0; l < n->L; l++) free(sd[l]);
    return loss;
}

static void params_alloc(struct params *p, const struct net *n)
{
    memset(p, 0, sizeof *p);
    for (int k = 0; k < 2 * n->L; k++) {
        p->mu[k] = calloc((size_t)tsize(n, k), sizeof(double));
        p->rho[k] = calloc((size_t)tsize(n, k), sizeof(double));
    }
}
static void params_free(struct params *p)
{
    for (int k = 0; k < 2 * MAXL; k++) free(p->mu[k]), free(p->rho[k]);
}

static double worst_ratio;
static void compare_grad(const char *what, int k, const float *got, const double *ref, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        const double e = fabs((double)got[i] - ref[i]), ratio = e / (1e-6 + 1e-4 * fabs(ref[i]));
        worst_ratio = ratio > worst_ratio ? ratio : worst_ratio;
        if (!(ratio <= 1.0)) {
            fprintf(stderr, "%s of tensor %d [%lld]: got %.9g, reference %.12g\n", what, k,
                    (long long)i, (double)got[i], ref[i]);
            dt_check_failures_++;
            return;
        }
    }
}

/* The reference's own gradient against central differences of its loss, a few entries of
 * every mu and rho (the noise fixed). */
static void check_reference_by_differences(const struct net *n, struct params *p,
                                           float *const z[MAXL], const struct data *d, int64_t B)
{
    struct params g;
    params_alloc(&g, n);
    (void)ref_loss(n, p, z, d->x, d->y, B, &g, 1.0);
    double worst = 0;
    for (int k = 0; k < 2 * n->L; k++)
        for (int which = 0; which < 2; which++)
            for (int64_t i = 0; i < tsize(n, k); i += 1 + tsize(n, k) / 4) {
                double *v = which ? &p->rho[k][i] : &p->mu[k][i];
                const double keep = *v, h = 1e-6;
                *v = keep + h;
                const double up = ref_loss(n, p, z, d->x, d->y, B, NULL, 0);
                *v = keep - h;
                const double down = ref_loss(n, p, z, d->x, d->y, B, NULL, 0);
                *v = keep;
                const double fd = (up - down) / (2 * h), an = which ? g.rho[k][i] : g.mu[k][i];
                const double err = fabs(fd - an) / (1e-7 + fabs(an));
                worst = err > worst ? err : worst;
                if (!(fabs(fd - an) <= 1e-7 + 1e-5 * fabs(an)))
                    fprintf(stderr,
                            "reference d/d%s[%d][%lld]: analytic %.12g, differences %.12g\n",
                            which ? "rho" : "mu", k, (long long)i, an, fd);
                CHECK(fabs(fd - an) <= 1e-7 + 1e-5 * fabs(an));
            }
    fprintf(stderr, "reference gradient vs central differences: worst relative %.2g\n", worst);
    params_free(&g);
}

static void check_gradients(const char *rng, bool stored_lfsr, bool lfsr_noise)
{
    struct net n = small_net(12, 9, 6, 4, 5, 2);
    n.o.stored_lfsr = stored_lfsr;
    struct data d = make_data(&n, 20, 31);
    struct dt_policy pol = rng_policy(rng);
    struct dt_backend *be = cpu(2);
    const uint64_t seed = 0x5eed0123456789abULL;
    struct dt_model *m = build(be, &n, seed);
    m->member = 2;
    const int S = n.o.samples, T = 2 * n.L;
    const double prior_var = (double)n.o.prior_sigma * (double)n.o.prior_sigma;
    struct params p, g;
    params_alloc(&p, &n), params_alloc(&g, &n);
    float *z[MAXL];
    for (int l = 0; l < n.L; l++) z[l] = malloc((size_t)(n.batch * n.dims[l + 1]) * sizeof(float));
    worst_ratio = 0;
    for (int step = 1; step <= 2; step++) {
        const int64_t B = step == 1 ? n.batch : n.batch - 2;
        const float *x = d.x + step * n.dims[0];
        const uint8_t *y = d.y + step;
        for (int k = 0; k < T; k++) {
            const float *pm = dt_backend_host_view(be, m->params[2 * k].w);
            const float *pr = dt_backend_host_view(be, m->params[2 * k + 1].w);
            for (int64_t i = 0; i < tsize(&n, k); i++) {
                p.mu[k][i] = pm[i], p.rho[k][i] = pr[i];
                g.mu[k][i] = g.rho[k][i] = 0;
            }
        }
        double loss_ref = 0;
        for (int s = 0; s < S; s++) {
            ref_noise(z, &n, lfsr_noise, seed, (uint32_t)step, m->member, (uint32_t)s, B);
            if (step == 1 && s == 0) {
                struct data one = {B, n.dims[0], (float *)x, (uint8_t *)y};
                check_reference_by_differences(&n, &p, z, &one, B);
            }
            loss_ref += ref_loss(&n, &p, z, x, y, B, &g, 1.0 / S) / S;
        }
        for (int k = 0; k < T; k++)
            for (int64_t i = 0; i < tsize(&n, k); i++) {
                const double sg = softplus_d(p.rho[k][i]);
                g.mu[k][i] += n.o.kl_weight * (p.mu[k][i] / prior_var);
                g.rho[k][i] += n.o.kl_weight * (sg / prior_var - 1.0 / sg) * sigmoid_d(p.rho[k][i]);
            }
        float loss = NAN;
        const enum dt_status st = dt_model_train_step(m, x, y, B, &sgd, &pol, &loss);
        if (st != DT_OK) fprintf(stderr, "%s: %s\n", rng, m->err.msg);
        CHECK_INT_EQ(st, DT_OK);
        CHECK_NEAR(loss, loss_ref, 1e-5 * fabs(loss_ref));
        for (int k = 0; k < T; k++) {
            compare_grad("d loss / d mu", k, dt_backend_host_view(be, m->params[2 * k].g), g.mu[k],
                         tsize(&n, k));
            compare_grad("d loss / d rho", k, dt_backend_host_view(be, m->params[2 * k + 1].g),
                         g.rho[k], tsize(&n, k));
        }
    }
    fprintf(stderr, "rng %s%s: worst err / (1e-6 + 1e-4 |ref|) = %.3g\n", rng,
            stored_lfsr ? " (lanes)" : "", worst_ratio);
    for (int l = 0; l < n.L; l++) free(z[l]);
    params_free(&p), params_free(&g);
    dt_model_destroy(m);
    dt_backend_destroy(be);
    free(d.x), free(d.y);
}

DT_TEST(gradients_match_double_reference)
{
    check_gradients("philox", false, false);
    check_gradients("lfsr", false, true);
    check_gradients("stored", false, false);
    check_gradients("stored", true, true);
}

/* ---- 3. bits ---------------------------------------------------------------------------- */

enum { STEPS = 12 };
typedef uint8_t digests_t[STEPS + 1][DT_DIGEST_BYTES];
static digests_t dig_a, dig_b;

static void model_digest(uint8_t out[DT_DIGEST_BYTES], struct dt_model *m)
{
    static uint8_t td[64][DT_DIGEST_BYTES];
    int64_t most = 1;
    for (int i = 0; i < m->n_params; i++) most = m->params[i].n > most ? m->params[i].n : most;
    float *staging = malloc((size_t)most * sizeof(float));
    dt_hash_model(out, td, m, staging);
    free(staging);
}

/* Widths past the CPU's noise tile (600 columns), a batch of 40, 2 samples. */
static void train_digests(digests_t dig, const struct net *n, const struct data *d, const char *rng,
                          int threads)
{
    struct dt_backend *be = cpu(threads);
    struct dt_model *m = build(be, n, 9);
    const struct dt_policy pol = rng_policy(rng);
    model_digest(dig[0], m);
    for (int s = 1; s <= STEPS; s++) {
        float loss;
        const int64_t at = (s * n->batch) % (d->n - n->batch);
        const enum dt_status st =
            dt_model_train_step(m, d->x + at * d->in, d->y + at, n->batch, &sgd, &pol, &loss);
        if (st != DT_OK) fprintf(stderr, "step %d (%s): %s\n", s, rng, m->err.msg);
        DT_ASSERT(st == DT_OK && isfinite(loss));
        model_digest(dig[s], m);
    }
    dt_model_destroy(m);
    dt_backend_destroy(be);
}

static int first_difference(void)
{
    for (int s = 0; s <= STEPS; s++)
        if (memcmp(dig_a[s], dig_b[s], DT_DIGEST_BYTES) != 0) return s;
    return -1;
}

DT_TEST(training_bits)
{
    struct net n = small_net(16, 600, 24, 10, 40, 2);
    struct data d = make_data(&n, 200, 77);
    /* stored draws with the generator it names and matches that mode bit for bit */
    train_digests(dig_a, &n, &d, "philox", 1);
    train_digests(dig_b, &n, &d, "stored", 3);
    CHECK_INT_EQ(first_difference(), -1);
    n.o.stored_lfsr = true;
    train_digests(dig_b, &n, &d, "stored", 1);
    CHECK_INT_EQ(first_difference(), 1); /* negative control: lfsr's noise is another */
    train_digests(dig_a, &n, &d, "lfsr", 1);
    CHECK_INT_EQ(first_difference(), -1);
    train_digests(dig_b, &n, &d, "lfsr", 3);
    CHECK_INT_EQ(first_difference(), -1);
    CHECK(memcmp(dig_a[0], dig_a[STEPS], DT_DIGEST_BYTES) != 0);
    /* negative control: the weights estimator trains the same model otherwise */
    n.o.local = false;
    train_digests(dig_b, &n, &d, "lfsr", 1);
    CHECK_INT_EQ(first_difference(), 1);
    free(d.x), free(d.y);
}

/* ---- 4. faults ------------------------------------------------------------------------ */

/* Row 0's lane draws one pair fewer in layer `layer`'s forward walk: the step fails. */
static const char *faulty_step(bool verify, const char *rng, int layer)
{
    static char msg[1024];
    struct net n = small_net(12, 9, 6, 4, 5, 1);
    struct data d = make_data(&n, 20, 5);
    struct dt_backend *be = cpu(1);
    struct dt_model *m = build(be, &n, 3);
    DT_ASSERT(dt_bnn_set_debug(m, verify, layer) == DT_OK);
    const struct dt_policy pol = rng_policy(rng);
    float loss;
    const enum dt_status st = dt_model_train_step(m, d.x, d.y, n.batch, &sgd, &pol, &loss);
    snprintf(msg, sizeof msg, "%s", st == DT_OK ? "" : m->err.msg);
    CHECK(st == DT_OK || st == DT_ERR_NUMERIC);
    dt_model_destroy(m);
    dt_backend_destroy(be);
    free(d.x), free(d.y);
    return msg;
}

DT_TEST(fault_injection)
{
    CHECK_CONTAINS(faulty_step(false, "lfsr", 1), "the noise lane of row 0 (sample 0) is not back");
    CHECK_CONTAINS(faulty_step(true, "lfsr", 1), "the activation noise of layer 1 regenerated");
    CHECK_STR_EQ(faulty_step(false, "lfsr", -1), ""); /* negative control: no fault */
    CHECK_STR_EQ(faulty_step(true, "lfsr", -1), "");
    CHECK_STR_EQ(faulty_step(true, "philox", 1), ""); /* philox has no lanes to break */
}

/* ---- 5. memory ---------------------------------------------------------------------------- */

DT_TEST(memory_accounting)
{
    struct net n = small_net(12, 9, 6, 4, 5, 3);
    struct dt_backend *be = cpu(1);
    struct dt_model *m = build(be, &n, 1);
    const int64_t noise = 5 * (9 + 6 + 4); /* a sample's noise: batch x every layer's width */
    const char *rngs[] = {"stored", "philox", "lfsr"};
    const int64_t held[] = {3 * noise * 4, 0, 0}, state[] = {0, 0, 3 * 5 * 16};
    for (int i = 0; i < 3; i++) {
        const struct dt_policy pol = rng_policy(rngs[i]);
        struct dt_model_memory mem;
        memset(&mem, 0x55, sizeof mem);
        dt_model_memory(m, &pol, &mem);
        CHECK_INT_EQ(mem.eps_held, held[i]);
        CHECK_INT_EQ(mem.eps_workspace, 0);
        CHECK_INT_EQ(mem.rng_state, state[i]);
    }
    dt_model_destroy(m);
    dt_backend_destroy(be);
}

/* ---- 6. the committed reference ------------------------------------------------------------ */

DT_TEST(reference_reproduces)
{
    if (!dt_have_fashion_mnist()) DT_SKIP("Fashion-MNIST not installed");
    static char out[1 << 16];
    const int rc =
        dt_run_capture(out, sizeof out,
                       "%s reproduce " DT_SOURCE_DIR "/results/cpu/bnn-local/reference "
                       "--cells portable,portable+rng=philox,portable+rng=stored --quiet",
                       DT_DETRAIN_EXE);
    if (rc != 0) fprintf(stderr, "%s\n", out);
    CHECK_INT_EQ(rc, 0);
    CHECK_CONTAINS(out, "identical at all 101 hashed steps");
}

DT_TEST_MAIN(DT_CASE(ops_match_definition), DT_CASE(gradients_match_double_reference),
             DT_CASE(training_bits), DT_CASE(fault_injection), DT_CASE(memory_accounting),
             DT_CASE(reference_reproduces))
