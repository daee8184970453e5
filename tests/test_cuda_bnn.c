/* The CUDA backend's Bayesian-layer ops and epsilon generators against the CPU backend
 * (the reference, nets/cpu/bnn.c).
 *   unit: the DT_HD functions the kernels run (nets/bnn_elem.h), run here on the host item
 *         by item in the order a grid-stride loop visits them, equal the CPU ops bit for bit:
 *         the elementwise formulas at every math level (random, huge, tiny, subnormal, +-0,
 *         +-Inf inputs), Philox blocks, lane seeding and lane walks forwards, backwards and
 *         with the skip_lane fault hook (n below, at and above P; odd n).
 *   gpu:  the ops on a device (exit 77 without one) equal the CPU's bits: epsilon at every
 *         level; sample, accumulate and finish at every level (no math library in them);
 *         sigma and dsigma wherever dt_math_own_elementary (fast, portable); at strict (CUDA's expf
 * and log1pf, within 2 and 1 ulps, against glibc's, within about 1 and 2) within a relative 2e-6
 *         (16 to 33 ulps) or an absolute FLT_MIN: results below the normal range, where
 *         exp(-rho) may overflow on one side only (rho near -88.72), only agree absolutely.
 *         Every launch geometry gives the same bits, at every level. Inputs are drawn per
 *         check and outputs poisoned with NaN before every run.
 * NaN results: the host checks accept any NaN for a NaN (which NaN payload an x86 operation
 * returns depends on operand order, which the compiler may swap); the device checks use
 * inputs that produce no NaN, since a GPU returns one canonical NaN and x86 another. */
#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "core/util.h"
#include "determinism/eps.h"
#include "nets/bnn_elem.h"
#include "tests/check.h"
#include "tests/op_helpers.h"
#ifdef DETRAIN_HAVE_CUDA_TOOLKIT
#include "nets/cuda/cuda.h"
#endif

/* Launch geometries (threads per block, grid cap; 0 = default) every check runs under. */
static const int geometries[][2] = {{32, 1}, {64, 3}, {256, 0}, {1024, 0}};
#define N_GEOM ((int)(sizeof geometries / sizeof geometries[0]))

/* ---- host emulation of the kernels' grid-stride loops ---------------------------------- */

/* Visit every item of a grid-stride loop over `items` under geometry g, as
 * dt_cuda_grid_for sizes the grid, threads last to first (any order must give the same
 * bits: items are independent). */
static void grid_stride(int64_t items, int g, void (*visit)(void *, int64_t), void *ctx)
{
    const int64_t bt = geometries[g][0], cap = geometries[g][1] > 0 ? geometries[g][1] : 65535;
    int64_t blocks = (items + bt - 1) / bt;
    if (blocks > cap) blocks = cap;
    if (blocks < 1) blocks = 1;
    const int64_t threads = blocks * bt;
    for (int64_t t = threads - 1; t >= 0; t--)
        for (int64_t i = t; i < items; i += threads) visit(ctx, i);
}

/* ---- inputs and comparisons ------------------------------------------------------------ */

static float *falloc(int64_t n) { return dt_xmalloc((size_t)(n > 0 ? n : 1) * sizeof(float)); }

static void nan_fill(float *v, int64_t n)
{
    for (int64_t i = 0; i < n; i++) v[i] = NAN;
}

/* Values that stress the formulas: signed zeros, subnormals, the softplus branch points
 * (+-20 and their neighbours), the exp overflow and underflow edges, huge and infinite. */
static float special(int k)
{
    const float v[] = {0.0f,          -0.0f,          0x1p-149f,     -0x1p-149f,
                       FLT_MIN,       -FLT_MIN,       1.0f,          -1.0f,
                       20.0f,         -20.0f,         0x1.400002p4f, -0x1.400002p4f,
                       0x1.3ffffep4f, -0x1.3ffffep4f, 88.72283f,     -88.72283f,
                       89.0f,         -103.97207f,    -104.0f,       1e3f,
                       -1e3f,         1e30f,          -1e30f,        FLT_MAX,
                       -FLT_MAX,      INFINITY,       -INFINITY,     1e-30f,
                       -1e-30f,       0.5f,           -0.5f,         3.0f};
    const int count = (int)(sizeof v / sizeof v[0]);
    return v[k % count];
}
#define N_SPECIAL 32

/* rho-like values: the specials first, then uniform in [-30, 30) and log-uniform
 * magnitudes 2^[-40, 12) of either sign, interleaved. */
static void fill_wide(float *v, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        if (i < N_SPECIAL) v[i] = special((int)i);
        else if (i % 2) v[i] = (float)(30.0 * urand());
        else v[i] = (float)((urand() < 0 ? -1.0 : 1.0) * exp2(26.0 * urand() - 14.0));
    }
}

/* Scaled uniform values with a special value (incl. +-0 and subnormals) every 7th. */
static void fill_mixed(float *v, int64_t n, double scale)
{
    for (int64_t i = 0; i < n; i++)
        v[i] = i % 7 == 3 ? special((int)(i / 7)) : (float)(scale * urand());
}

/* Scaled uniform values with a small finite special (+-0, subnormal, FLT_MIN, 1e-30, +-1)
 * every 7th: products and sums of these never overflow, so no NaN can arise. */
static void fill_finite(float *v, int64_t n, double scale)
{
    static const float small[] = {0.0f,     -0.0f,  0x1p-149f, -0x1p-149f, FLT_MIN,
                                  -FLT_MIN, 1e-30f, -1e-30f,   1.0f,       -1.0f};
    for (int64_t i = 0; i < n; i++)
        v[i] = i % 7 == 3 ? small[(i / 7) % 10] : (float)(scale * urand());
}

/* 1 when a and b are the same bits, or both NaN. */
static bool same_value(float a, float b)
{
    return dt_float_bits(a) == dt_float_bits(b) || (a != a && b != b);
}

/* got == want element for element (same_value); prints the first difference. */
static bool check_same(const char *what, const float *got, const float *want, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if (!same_value(got[i], want[i])) {
            fprintf(stderr, "%s: element %lld: got %a (0x%08x), cpu %a (0x%08x)\n", what,
                    (long long)i, (double)got[i], (unsigned)dt_float_bits(got[i]), (double)want[i],
                    (unsigned)dt_float_bits(want[i]));
            dt_check_failures_++;
            return false;
        }
    return true;
}

static bool check_lanes_same(const char *what, const struct dt_xoro *got,
                             const struct dt_xoro *want, int64_t P)
{
    for (int64_t j = 0; j < P; j++)
        if (!dt_xoro_equal(got[j], want[j])) {
            fprintf(stderr, "%s: lane %lld: got %016llx %016llx, cpu %016llx %016llx\n", what,
                    (long long)j, (unsigned long long)got[j].s0, (unsigned long long)got[j].s1,
                    (unsigned long long)want[j].s0, (unsigned long long)want[j].s1);
            dt_check_failures_++;
            return false;
        }
    return true;
}

static const int64_t elem_sizes[] = {1, 2, 3, 31, 33, 255, 257, 1000, 4097, 20011, 65537};
#define N_ELEM_SIZES ((int)(sizeof elem_sizes / sizeof elem_sizes[0]))

/* ---- unit: the elementwise formulas ---------------------------------------------------- */

struct elem_job {
    float *a, *b;
    const float *c, *d, *e;
    float f0, f1, f2;
    bool flag;
};

static void visit_sigma(void *ctx, int64_t i)
{
    const struct elem_job *j = ctx;
    dt_bnn_sigma_elem(&j->a[i], &j->b[i], j->c[i], j->flag);
}

/* dt_bnn_sigma_elem == dt_bnn_sigma on the CPU backend, at every math level. */
DT_TEST(sigma_elem_matches_cpu)
{
    struct dt_backend *c = cpu(3);
    for (int lv = 0; lv < DT_LEVEL_COUNT; lv++) {
        const struct dt_policy pol = level((enum dt_level)lv);
        for (int si = 0; si < N_ELEM_SIZES; si++) {
            const int64_t n = elem_sizes[si];
            float *rho = falloc(n), *cs = falloc(n), *cd = falloc(n), *hs = falloc(n),
                  *hd = falloc(n);
            fill_wide(rho, n);
            if (n > 40) { /* NaNs of both signs: any NaN must come out as a NaN */
                rho[N_SPECIAL] = NAN;
                rho[N_SPECIAL + 1] = -NAN;
            }
            nan_fill(hs, n), nan_fill(hd, n);
            CHECK_INT_EQ(dt_bnn_sigma(c, cs, cd, rho, n, &pol), DT_OK);
            struct elem_job j = {.a = hs, .b = hd, .c = rho, .flag = dt_math_own_elementary(&pol)};
            grid_stride(n, si % N_GEOM, visit_sigma, &j);
            char what[64];
            snprintf(what, sizeof what, "sigma (level %d, n %lld)", lv, (long long)n);
            check_same(what, hs, cs, n);
            snprintf(what, sizeof what, "dsigma (level %d, n %lld)", lv, (long long)n);
            check_same(what, hd, cd, n);
            free(rho), free(cs), free(cd), free(hs), free(hd);
        }
    }
    /* The test can fail: the portable and the libm softplus differ somewhere here. */
    float a, b, pa, pb;
    int differ = 0;
    for (int i = 0; i < 2000; i++) {
        float r = (float)(10.0 * urand());
        dt_bnn_sigma_elem(&a, &b, r, false);
        dt_bnn_sigma_elem(&pa, &pb, r, true);
        differ += dt_float_bits(a) != dt_float_bits(pa) || dt_float_bits(b) != dt_float_bits(pb);
    }
    CHECK(differ > 0);
    dt_backend_destroy(c);
}

static void visit_sample(void *ctx, int64_t i)
{
    const struct elem_job *j = ctx;
    j->a[i] = dt_bnn_sample_elem(j->c[i], j->d[i], j->e[i]);
}

static void visit_accumulate(void *ctx, int64_t i)
{
    const struct elem_job *j = ctx; /* a = gmu, b = grho, c = g, d = eps, e = dsigma */
    dt_bnn_accumulate_elem(&j->a[i], &j->b[i], j->c[i], j->d[i], j->e[i], j->flag);
}

struct finish_job {
    float *gmu, *grho;
    const float *mu, *sigma, *dsigma;
    float inv_s, klw, ipv;
};

static void visit_finish(void *ctx, int64_t i)
{
    const struct finish_job *j = ctx;
    dt_bnn_finish_elem(&j->gmu[i], &j->grho[i], j->mu[i], j->sigma[i], j->dsigma[i], j->inv_s,
                       j->klw, j->ipv);
}

/* dt_bnn_sample_elem, dt_bnn_accumulate_elem (first, then twice more) and
 * dt_bnn_finish_elem == the CPU ops, every intermediate state, at every level. */
DT_TEST(sample_accumulate_finish_elem_match_cpu)
{
    static const float finish_args[][3] = {/* inv_samples, kl_weight, prior_var */
                                           {1.0f, 0.0f, 1.0f},
                                           {0.25f, 1e-3f, 2.0f},
                                           {1.0f / 3.0f, 0.7f, 0.1f},
                                           {0.2f, -0.0f, 3e-7f},
                                           {1.0f / 7.0f, 1e-9f, 1e6f}};
    struct dt_backend *c = cpu(3);
    for (int lv = 0; lv < DT_LEVEL_COUNT; lv++) {
        const struct dt_policy pol = level((enum dt_level)lv);
        for (int si = 0; si < N_ELEM_SIZES; si++) {
            const int64_t n = elem_sizes[si];
            const int geo = (si + lv) % N_GEOM;
            const size_t bytes = (size_t)n * sizeof(float);
            float *mu = falloc(n), *sig = falloc(n), *ds = falloc(n), *eps = falloc(n);
            float *g = falloc(n), *cw = falloc(n), *hw = falloc(n);
            float *cgm = falloc(n), *cgr = falloc(n), *hgm = falloc(n), *hgr = falloc(n);
            fill_mixed(mu, n, 1.0);
            fill_mixed(sig, n, 0.3);
            fill_mixed(ds, n, 1.0);
            fill_mixed(eps, n, 3.0);
            char what[80];

            nan_fill(hw, n);
            CHECK_INT_EQ(dt_bnn_sample(c, cw, mu, sig, eps, n, &pol), DT_OK);
            struct elem_job sj = {.a = hw, .c = mu, .d = sig, .e = eps};
            grid_stride(n, geo, visit_sample, &sj);
            snprintf(what, sizeof what, "sample (level %d, n %lld)", lv, (long long)n);
            check_same(what, hw, cw, n);

            nan_fill(hgm, n), nan_fill(hgr, n); /* first: the old values must not matter */
            for (int k = 0; k < 3; k++) {
                fill_mixed(g, n, k == 2 ? 1e-3 : 0.1);
                fill_mixed(eps, n, 3.0);
                CHECK_INT_EQ(dt_bnn_accumulate(c, cgm, cgr, g, eps, ds, n, k == 0, &pol), DT_OK);
                struct elem_job aj = {
                    .a = hgm, .b = hgr, .c = g, .d = eps, .e = ds, .flag = k == 0};
                grid_stride(n, geo, visit_accumulate, &aj);
                snprintf(what, sizeof what, "accumulate %d gmu (level %d, n %lld)", k, lv,
                         (long long)n);
                check_same(what, hgm, cgm, n);
                snprintf(what, sizeof what, "accumulate %d grho (level %d, n %lld)", k, lv,
                         (long long)n);
                check_same(what, hgr, cgr, n);
            }

            float *sgm = falloc(n), *sgr = falloc(n);
            memcpy(sgm, cgm, bytes);
            memcpy(sgr, cgr, bytes);
            for (int a = 0; a < (int)(sizeof finish_args / sizeof finish_args[0]); a++) {
                const float inv_s = finish_args[a][0], klw = finish_args[a][1],
                            pv = finish_args[a][2];
                memcpy(cgm, sgm, bytes), memcpy(cgr, sgr, bytes);
                memcpy(hgm, sgm, bytes), memcpy(hgr, sgr, bytes);
                CHECK_INT_EQ(dt_bnn_finish(c, cgm, cgr, mu, sig, ds, n, inv_s, klw, pv, &pol),
                             DT_OK);
                struct finish_job fj = {hgm, hgr, mu, sig, ds, inv_s, klw, 1.0f / pv};
                grid_stride(n, geo, visit_finish, &fj);
                snprintf(what, sizeof what, "finish %d gmu (level %d, n %lld)", a, lv,
                         (long long)n);
                check_same(what, hgm, cgm, n);
                snprintf(what, sizeof what, "finish %d grho (level %d, n %lld)", a, lv,
                         (long long)n);
                check_same(what, hgr, cgr, n);
            }
            free(mu), free(sig), free(ds), free(eps), free(g), free(cw), free(hw);
            free(cgm), free(cgr), free(hgm), free(hgr), free(sgm), free(sgr);
        }
    }
    dt_backend_destroy(c);
}

/* The formulas' operation order is what the bits depend on: a reassociated finish, or a
 * fused (single-rounding) sample, gives other bits on these inputs, so the comparisons
 * above can tell. */
DT_TEST(elem_order_is_observable)
{
    enum { N = 4096 };
    int fin = 0, fused = 0;
    for (int i = 0; i < N; i++) {
        const float mu = (float)urand(), s = (float)(0.3 * urand() + 0.31),
                    ds = (float)(0.5 * urand() + 0.5), gm = (float)(0.1 * urand()),
                    gr = (float)(0.1 * urand()), e = (float)(3.0 * urand());
        float m = gm, r = gr;
        dt_bnn_finish_elem(&m, &r, mu, s, ds, 0.25f, 1e-3f, 0.5f);
        const float r2 = gr * 0.25f + 1e-3f * (s * 0.5f * ds - ds / s); /* distributed */
        fin += dt_float_bits(r) != dt_float_bits(r2);
        const float w = dt_bnn_sample_elem(mu, s, e);
        fused += dt_float_bits(w) != dt_float_bits(fmaf(s, e, mu));
    }
    CHECK(fin > 0);
    CHECK(fused > 0);
}

/* ---- unit: epsilon --------------------------------------------------------------------- */

static const int64_t eps_sizes[] = {1,  2,   3,   4,    5,    7,    8,    9,     31,
                                    33, 255, 257, 1000, 1023, 1025, 4097, 100003};
#define N_EPS_SIZES ((int)(sizeof eps_sizes / sizeof eps_sizes[0]))

struct philox_job {
    float *eps;
    int64_t n;
    struct dt_philox_stream s;
};

static void visit_philox(void *ctx, int64_t b)
{
    const struct philox_job *j = ctx;
    dt_bnn_eps_philox_block(j->eps, j->n, b, &j->s);
}

/* A stream with every field drawn (fields in range), varied per call. */
static struct dt_philox_stream any_stream(void)
{
    const uint64_t seed = (uint64_t)((urand() + 1.0) * 0x1p62) * 3u + 1u;
    const uint32_t step = (uint32_t)((urand() + 1.0) * 0x1p31);
    const uint32_t tensor = (uint32_t)((urand() + 1.0) * 0.5 * DT_PHILOX_MAX_TENSOR);
    const uint32_t member = (uint32_t)((urand() + 1.0) * 0.5 * DT_PHILOX_MAX_MEMBER);
    const uint32_t sample = (uint32_t)((urand() + 1.0) * 0.5 * DT_PHILOX_MAX_SAMPLE);
    return dt_philox_stream_make(seed, step, tensor, member, sample);
}

/* dt_bnn_eps_philox_block over all blocks, in each geometry's visiting order ==
 * dt_eps_philox on the CPU backend. */
DT_TEST(philox_block_matches_cpu)
{
    struct dt_backend *c = cpu(3);
    const struct dt_policy pol = level(DT_LEVEL_PORTABLE);
    for (int si = 0; si < N_EPS_SIZES; si++) {
        const int64_t n = eps_sizes[si];
        float *want = falloc(n), *got = falloc(n);
        struct philox_job j = {got, n, any_stream()};
        if (si == 0) j.s = dt_philox_stream_make(0, 0, 0, 0, 0); /* all-zero fields */
        if (si == 1)
            j.s = dt_philox_stream_make(UINT64_MAX, UINT32_MAX, DT_PHILOX_MAX_TENSOR,
                                        DT_PHILOX_MAX_MEMBER, DT_PHILOX_MAX_SAMPLE);
        CHECK_INT_EQ(dt_eps_philox(c, want, n, &j.s, &pol), DT_OK);
        for (int geo = 0; geo < N_GEOM; geo++) {
            nan_fill(got, n);
            grid_stride((n + 3) / 4, geo, visit_philox, &j);
            char what[64];
            snprintf(what, sizeof what, "philox (n %lld, geometry %d)", (long long)n, geo);
            check_same(what, got, want, n);
        }
        free(want), free(got);
    }
    dt_backend_destroy(c);
}

struct lanes_job {
    float *eps;
    int64_t n, P, skip;
    struct dt_xoro *lanes;
    uint64_t seed;
    uint32_t step, member, sample;
    bool backward;
};

static void visit_seed(void *ctx, int64_t l)
{
    const struct lanes_job *j = ctx;
    j->lanes[l] = dt_eps_lane_seed(j->seed, j->step, j->member, j->sample, (uint64_t)l);
}

static void visit_walk(void *ctx, int64_t l)
{
    const struct lanes_job *j = ctx;
    dt_bnn_eps_lane_walk(j->eps, j->n, j->lanes, j->P, l, j->backward, j->skip);
}

/* One walk of tensor n by the emulated kernel (lanes h) and by the CPU op (lanes c),
 * compared: the values and every lane's state. */
static void walk_both(struct dt_backend *c, struct dt_xoro *h, struct dt_xoro *cl, int64_t P,
                      int64_t n, bool backward, int64_t skip, int geo, const char *tag)
{
    const struct dt_policy pol = level(DT_LEVEL_PORTABLE);
    float *got = falloc(n), *want = falloc(n);
    nan_fill(got, n);
    nan_fill(want, n);
    CHECK_INT_EQ(dt_eps_lfsr(c, want, n, cl, P, backward, skip, &pol), DT_OK);
    struct lanes_job j = {
        .eps = got, .n = n, .P = P, .skip = skip, .lanes = h, .backward = backward};
    grid_stride(P, geo, visit_walk, &j);
    char what[96];
    snprintf(what, sizeof what, "lfsr %s %s (n %lld, P %lld, skip %lld, geometry %d)",
             backward ? "backward" : "forward", tag, (long long)n, (long long)P, (long long)skip,
             geo);
    check_same(what, got, want, n);
    check_lanes_same(what, h, cl, P);
    free(got), free(want);
}

/* Lane seeding and walks, as the model runs them: seed; forward over tensors A then B;
 * backward over B then A, which returns every lane to its seed; then the same with the
 * skip_lane fault hook on A's forward walk, after which that lane (only) ends one step
 * short of its seed. The emulated kernel == dt_eps_lfsr_seed / dt_eps_lfsr on the CPU. */
DT_TEST(lane_walk_matches_cpu)
{
    static const int64_t lane_counts[] = {1, 2, 3, 7, 8, 9, 33, 64, 1000};
    struct dt_backend *c = cpu(3);
    const struct dt_policy pol = level(DT_LEVEL_PORTABLE);
    int case_no = 0;
    for (int pi = 0; pi < (int)(sizeof lane_counts / sizeof lane_counts[0]); pi++) {
        const int64_t P = lane_counts[pi];
        struct dt_xoro *h = dt_xmalloc((size_t)P * sizeof *h);
        struct dt_xoro *cl = dt_xmalloc((size_t)P * sizeof *cl);
        struct dt_xoro *seeds = dt_xmalloc((size_t)P * sizeof *seeds);
        for (int si = 0; si + 1 < N_EPS_SIZES; si += 2, case_no++) {
            const int64_t nA = eps_sizes[si], nB = eps_sizes[si + 1];
            const int geo = case_no % N_GEOM;
            struct lanes_job sj = {.lanes = h,
                                   .seed = 0x9e3779b97f4a7c15ULL * (uint64_t)(si + 1),
                                   .step = (uint32_t)(si * 1000 + pi),
                                   .member = (uint32_t)pi,
                                   .sample = (uint32_t)si};
            memset(h, 0xff, (size_t)P * sizeof *h);
            memset(cl, 0xff, (size_t)P * sizeof *cl);
            grid_stride(P, geo, visit_seed, &sj);
            CHECK_INT_EQ(dt_eps_lfsr_seed(c, cl, P, sj.seed, sj.step, sj.member, sj.sample, &pol),
                         DT_OK);
            check_lanes_same("lfsr seed", h, cl, P);
            memcpy(seeds, cl, (size_t)P * sizeof *seeds);
            for (int fault = 0; fault <= 1; fault++) {
                const int64_t skip = fault ? (case_no % 3 == 0   ? 0
                                              : case_no % 3 == 1 ? P - 1
                                                                 : P / 2)
                                           : -1;
                memcpy(h, seeds, (size_t)P * sizeof *h);
                memcpy(cl, seeds, (size_t)P * sizeof *cl);
                walk_both(c, h, cl, P, nA, false, skip, geo, "A");
                walk_both(c, h, cl, P, nB, false, -1, (geo + 1) % N_GEOM, "B");
                walk_both(c, h, cl, P, nB, true, -1, (geo + 2) % N_GEOM, "B");
                walk_both(c, h, cl, P, nA, true, -1, (geo + 3) % N_GEOM, "A");
                for (int64_t l = 0; l < P; l++) {
                    struct dt_xoro want = seeds[l];
                    if (l == skip) dt_xoro_prev(&want);
                    if (!dt_xoro_equal(h[l], want)) {
                        fprintf(stderr, "lane %lld of %lld (skip %lld) did not return to %s\n",
                                (long long)l, (long long)P, (long long)skip,
                                l == skip ? "one step before its seed" : "its seed");
                        dt_check_failures_++;
                        break;
                    }
                }
            }
        }
        free(h), free(cl), free(seeds);
    }
    dt_backend_destroy(c);
}

/* ---- gpu: the ops on a device against the CPU backend ---------------------------------- */

static void set_geometry(struct dt_backend *g, int geo)
{
#ifdef DETRAIN_HAVE_CUDA_TOOLKIT
    if (geo < 0) dt_cuda_set_launch(g, 0, 0);
    else dt_cuda_set_launch(g, geometries[geo][0], geometries[geo][1]);
#else
    (void)geo;
#endif
}

static void *dev_copy(struct dt_backend *g, const void *host, size_t bytes)
{
    void *d = dt_backend_alloc(g, bytes);
    dt_backend_upload(g, d, host, bytes);
    return d;
}

static void dev_poison(struct dt_backend *g, float *d, int64_t n)
{
    float *nan = falloc(n);
    nan_fill(nan, n);
    dt_backend_upload(g, d, nan, (size_t)n * sizeof(float));
    free(nan);
}

static float *download(struct dt_backend *g, const float *d, int64_t n)
{
    float *h = falloc(n);
    dt_backend_download(g, h, d, (size_t)n * sizeof(float));
    return h;
}

/* Exactly the same bits (a NaN is a failure: outputs start poisoned). */
static bool check_bits(const char *what, const float *got, const float *want, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if (dt_float_bits(got[i]) != dt_float_bits(want[i])) {
            fprintf(stderr, "%s: element %lld: gpu %a (0x%08x), cpu %a (0x%08x)\n", what,
                    (long long)i, (double)got[i], (unsigned)dt_float_bits(got[i]), (double)want[i],
                    (unsigned)dt_float_bits(want[i]));
            dt_check_failures_++;
            return false;
        }
    return true;
}

/* |got - want| <= max(2e-6 * |want|, FLT_MIN), infinities equal (see the top). */
static bool check_libm_close(const char *what, const float *got, const float *want, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        const double a = got[i], b = want[i];
        const bool ok = (isinf(b) && a == b) ||
                        (isfinite(a) && fabs(a - b) <= fmax(2e-6 * fabs(b), (double)FLT_MIN));
        if (!ok) {
            fprintf(stderr, "%s: element %lld: gpu %a, cpu %a (relative %.3g)\n", what,
                    (long long)i, a, b, fabs(a - b) / fabs(b));
            dt_check_failures_++;
            return false;
        }
    }
    return true;
}

static const int64_t gpu_sizes[] = {1, 3, 4, 5, 31, 33, 257, 1025, 4097, 100003, 1048579};
#define N_GPU_SIZES ((int)(sizeof gpu_sizes / sizeof gpu_sizes[0]))

/* dt_eps_philox on the device == on the CPU, bit for bit, at every level and geometry. */
DT_TEST(gpu_eps_philox_parity)
{
    struct dt_backend *g = gpu_or_skip(), *c = cpu(4);
    for (int lv = 0; lv < DT_LEVEL_COUNT; lv++) {
        const struct dt_policy pol = level((enum dt_level)lv);
        for (int si = 0; si < N_GPU_SIZES; si++) {
            const int64_t n = gpu_sizes[si];
            const struct dt_philox_stream s = any_stream();
            float *want = falloc(n);
            CHECK_INT_EQ(dt_eps_philox(c, want, n, &s, &pol), DT_OK);
            float *d = dt_backend_alloc(g, (size_t)n * sizeof(float));
            for (int geo = 0; geo < N_GEOM; geo++) {
                set_geometry(g, geo);
                dev_poison(g, d, n);
                CHECK_INT_EQ(dt_eps_philox(g, d, n, &s, &pol), DT_OK);
                float *got = download(g, d, n);
                char what[80];
                snprintf(what, sizeof what, "eps_philox (level %d, n %lld, geometry %d)", lv,
                         (long long)n, geo);
                check_bits(what, got, want, n);
                free(got);
            }
            dt_backend_free(g, d);
            free(want);
        }
    }
    set_geometry(g, -1);
    dt_backend_destroy(g);
    dt_backend_destroy(c);
}

/* One device walk (eps poisoned first) against the CPU's: values and lane states. */
static void gpu_walk(struct dt_backend *g, struct dt_backend *c, struct dt_xoro *dl,
                     struct dt_xoro *cl, int64_t P, int64_t n, bool backward, int64_t skip,
                     const struct dt_policy *pol, const char *tag)
{
    float *want = falloc(n);
    float *d = dt_backend_alloc(g, (size_t)n * sizeof(float));
    dev_poison(g, d, n);
    CHECK_INT_EQ(dt_eps_lfsr(c, want, n, cl, P, backward, skip, pol), DT_OK);
    CHECK_INT_EQ(dt_eps_lfsr(g, d, n, dl, P, backward, skip, pol), DT_OK);
    float *got = download(g, d, n);
    struct dt_xoro *hl = dt_xmalloc((size_t)P * sizeof *hl);
    dt_backend_download(g, hl, dl, (size_t)P * sizeof *hl);
    char what[112];
    snprintf(what, sizeof what, "eps_lfsr %s %s (n %lld, P %lld, skip %lld)",
             backward ? "backward" : "forward", tag, (long long)n, (long long)P, (long long)skip);
    check_bits(what, got, want, n);
    check_lanes_same(what, hl, cl, P);
    free(want), free(got), free(hl);
    dt_backend_free(g, d);
}

/* Lane seeding, forward walks over two tensors and the backward walks back to the seed
 * states, on the device == on the CPU (values and lane states after every walk), with and
 * without the skip_lane hook; n below, at and above P, odd n; every geometry. */
DT_TEST(gpu_eps_lfsr_parity)
{
    static const int64_t cases[][3] = {/* P, nA, nB */
                                       {1, 1, 5},         {7, 3, 1001},       {64, 5, 63},
                                       {64, 4097, 257},   {1000, 999, 1000},  {1000, 1001, 31},
                                       {1024, 100003, 7}, {1024, 200704, 256}};
    struct dt_backend *g = gpu_or_skip(), *c = cpu(4);
    for (int lv = 0; lv < DT_LEVEL_COUNT; lv++) {
        const struct dt_policy pol = level((enum dt_level)lv);
        for (int k = 0; k < (int)(sizeof cases / sizeof cases[0]); k++) {
            const int64_t P = cases[k][0], nA = cases[k][1], nB = cases[k][2];
            const size_t lbytes = (size_t)P * sizeof(struct dt_xoro);
            struct dt_xoro *cl = dt_xmalloc(lbytes), *seeds = dt_xmalloc(lbytes);
            struct dt_xoro *hl = dt_xmalloc(lbytes);
            const uint64_t seed = (uint64_t)((urand() + 1.0) * 0x1p62);
            const uint32_t step = (uint32_t)(k + 1), member = (uint32_t)lv, sample = (uint32_t)k;
            CHECK_INT_EQ(dt_eps_lfsr_seed(c, seeds, P, seed, step, member, sample, &pol), DT_OK);
            memset(hl, 0xff, lbytes);
            struct dt_xoro *dl = dev_copy(g, hl, lbytes); /* poisoned lanes */
            for (int geo = 0; geo < N_GEOM; geo++) {
                set_geometry(g, geo);
                for (int fault = 0; fault <= 1; fault++) {
                    const int64_t skip = fault ? (k % 2 ? P - 1 : P / 2) : -1;
                    dt_backend_upload(g, dl, hl, lbytes); /* poison again */
                    CHECK_INT_EQ(dt_eps_lfsr_seed(g, dl, P, seed, step, member, sample, &pol),
                                 DT_OK);
                    struct dt_xoro *gs = dt_xmalloc(lbytes);
                    dt_backend_download(g, gs, dl, lbytes);
                    check_lanes_same("eps_lfsr_seed", gs, seeds, P);
                    free(gs);
                    memcpy(cl, seeds, lbytes);
                    gpu_walk(g, c, dl, cl, P, nA, false, skip, &pol, "A");
                    gpu_walk(g, c, dl, cl, P, nB, false, -1, &pol, "B");
                    gpu_walk(g, c, dl, cl, P, nB, true, -1, &pol, "B");
                    gpu_walk(g, c, dl, cl, P, nA, true, -1, &pol, "A");
                    if (!fault) { /* back at the seed states */
                        struct dt_xoro *back = dt_xmalloc(lbytes);
                        dt_backend_download(g, back, dl, lbytes);
                        check_lanes_same("lanes after the backward walks", back, seeds, P);
                        free(back);
                    }
                }
            }
            dt_backend_free(g, dl);
            free(cl), free(seeds), free(hl);
        }
    }
    set_geometry(g, -1);
    dt_backend_destroy(g);
    dt_backend_destroy(c);
}

/* sigma, sample, accumulate (first, then again) and finish on the device against the CPU,
 * at every level and geometry; see the top for which are bitwise. The geometries must
 * agree with each other bit for bit at every level. */
DT_TEST(gpu_bnn_elementwise_parity)
{
    struct dt_backend *g = gpu_or_skip(), *c = cpu(4);
    for (int lv = 0; lv < DT_LEVEL_COUNT; lv++) {
        const struct dt_policy pol = level((enum dt_level)lv);
        const bool portable = dt_math_own_elementary(&pol); /* sigma's functions */
        for (int si = 0; si < N_GPU_SIZES; si++) {
            const int64_t n = gpu_sizes[si];
            const size_t bytes = (size_t)n * sizeof(float);
            /* inputs: rho over the whole line (no NaN), realistic others; sigma for the
             * later ops comes from the CPU's sigma, so it is never 0 there */
            float *rho = falloc(n), *mu = falloc(n), *eps = falloc(n), *g1 = falloc(n),
                  *g2 = falloc(n), *eps2 = falloc(n);
            fill_wide(rho, n);
            fill_finite(mu, n, 1.0);
            fill_finite(eps, n, 3.0);
            fill_finite(eps2, n, 3.0);
            fill_finite(g1, n, 0.1);
            fill_finite(g2, n, 0.01);
            float *csig = falloc(n), *cds = falloc(n), *cw = falloc(n), *cgm = falloc(n),
                  *cgr = falloc(n);
            CHECK_INT_EQ(dt_bnn_sigma(c, csig, cds, rho, n, &pol), DT_OK);
            /* the later ops use a positive sigma (rho in [-8, 4)) */
            float *srho = falloc(n), *sig = falloc(n), *ds = falloc(n);
            for (int64_t i = 0; i < n; i++) srho[i] = (float)(6.0 * urand() - 2.0);
            CHECK_INT_EQ(dt_bnn_sigma(c, sig, ds, srho, n, &pol), DT_OK);
            CHECK_INT_EQ(dt_bnn_sample(c, cw, mu, sig, eps, n, &pol), DT_OK);
            CHECK_INT_EQ(dt_bnn_accumulate(c, cgm, cgr, g1, eps, ds, n, true, &pol), DT_OK);
            CHECK_INT_EQ(dt_bnn_accumulate(c, cgm, cgr, g2, eps2, ds, n, false, &pol), DT_OK);
            CHECK_INT_EQ(dt_bnn_finish(c, cgm, cgr, mu, sig, ds, n, 0.5f, 1e-3f, 0.3f, &pol),
                         DT_OK);
            float *drho = dev_copy(g, rho, bytes), *dmu = dev_copy(g, mu, bytes);
            float *deps = dev_copy(g, eps, bytes), *deps2 = dev_copy(g, eps2, bytes);
            float *dg1 = dev_copy(g, g1, bytes), *dg2 = dev_copy(g, g2, bytes);
            float *dsig = dev_copy(g, sig, bytes), *dds = dev_copy(g, ds, bytes);
            float *osig = dt_backend_alloc(g, bytes), *ods = dt_backend_alloc(g, bytes);
            float *ow = dt_backend_alloc(g, bytes), *ogm = dt_backend_alloc(g, bytes),
                  *ogr = dt_backend_alloc(g, bytes);
            float *first_sig = NULL, *first_ds = NULL;
            for (int geo = 0; geo < N_GEOM; geo++) {
                set_geometry(g, geo);
                float *outs[] = {osig, ods, ow, ogm, ogr};
                for (int k = 0; k < 5; k++) dev_poison(g, outs[k], n);
                CHECK_INT_EQ(dt_bnn_sigma(g, osig, ods, drho, n, &pol), DT_OK);
                CHECK_INT_EQ(dt_bnn_sample(g, ow, dmu, dsig, deps, n, &pol), DT_OK);
                CHECK_INT_EQ(dt_bnn_accumulate(g, ogm, ogr, dg1, deps, dds, n, true, &pol), DT_OK);
                CHECK_INT_EQ(dt_bnn_accumulate(g, ogm, ogr, dg2, deps2, dds, n, false, &pol),
                             DT_OK);
                CHECK_INT_EQ(dt_bnn_finish(g, ogm, ogr, dmu, dsig, dds, n, 0.5f, 1e-3f, 0.3f, &pol),
                             DT_OK);
                float *hs = download(g, osig, n), *hd = download(g, ods, n);
                float *hw = download(g, ow, n), *hgm = download(g, ogm, n),
                      *hgr = download(g, ogr, n);
                char what[80];
#define WHAT(op)                                                                                   \
    (snprintf(what, sizeof what, "%s (level %d, n %lld, geometry %d)", op, lv, (long long)n, geo), \
     what)
                if (portable) {
                    check_bits(WHAT("bnn_sigma sigma"), hs, csig, n);
                    check_bits(WHAT("bnn_sigma dsigma"), hd, cds, n);
                } else {
                    check_libm_close(WHAT("bnn_sigma sigma"), hs, csig, n);
                    check_libm_close(WHAT("bnn_sigma dsigma"), hd, cds, n);
                }
                check_bits(WHAT("bnn_sample"), hw, cw, n);
                check_bits(WHAT("bnn_accumulate+finish gmu"), hgm, cgm, n);
                check_bits(WHAT("bnn_accumulate+finish grho"), hgr, cgr, n);
                if (!first_sig) {
                    first_sig = hs;
                    first_ds = hd;
                } else {
                    check_bits(WHAT("bnn_sigma sigma vs geometry 0"), hs, first_sig, n);
                    check_bits(WHAT("bnn_sigma dsigma vs geometry 0"), hd, first_ds, n);
                    free(hs), free(hd);
                }
#undef WHAT
                free(hw), free(hgm), free(hgr);
            }
            float *dptrs[] = {drho, dmu, deps, deps2, dg1, dg2, dsig, dds, osig, ods, ow, ogm, ogr};
            for (int k = 0; k < (int)(sizeof dptrs / sizeof dptrs[0]); k++)
                dt_backend_free(g, dptrs[k]);
            free(first_sig), free(first_ds);
            free(rho), free(mu), free(eps), free(g1), free(g2), free(eps2);
            free(csig), free(cds), free(cw), free(cgm), free(cgr), free(srho), free(sig), free(ds);
        }
    }
    set_geometry(g, -1);
    dt_backend_destroy(g);
    dt_backend_destroy(c);
}

DT_TEST_MAIN(DT_CASE(sigma_elem_matches_cpu), DT_CASE(sample_accumulate_finish_elem_match_cpu),
             DT_CASE(elem_order_is_observable), DT_CASE(philox_block_matches_cpu),
             DT_CASE(lane_walk_matches_cpu), DT_CASE(gpu_eps_philox_parity),
             DT_CASE(gpu_eps_lfsr_parity), DT_CASE(gpu_bnn_elementwise_parity))
