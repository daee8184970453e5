/* The CPU backend's epsilon and Bayesian elementwise ops against their definitions: the
 * vectorised Philox and lane kernels (nets/cpu/bnn.c) must give exactly the bits of the
 * scalar reference walks of determinism/eps.h for any size, lane count and thread count,
 * and the elementwise ops must follow their documented formulas. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "determinism/eps.h"
#include "nets/backend.h"
#include "op_helpers.h"

static const int64_t sizes[] = {1, 3, 4, 5, 10, 400, 1023, 1024, 1025, 4000, 4097, 31360, 100003};
#define N_SIZES ((int)(sizeof sizes / sizeof sizes[0]))

DT_TEST(philox_op_matches_reference)
{
    struct dt_policy pol = level(DT_LEVEL_PORTABLE);
    for (int threads = 1; threads <= 3; threads++) {
        struct dt_backend *be = cpu(threads);
        for (int i = 0; i < N_SIZES; i++) {
            const int64_t n = sizes[i];
            float *got = dt_backend_alloc(be, (size_t)n * sizeof(float));
            float *want = malloc((size_t)n * sizeof(float));
            struct dt_philox_stream s =
                dt_philox_stream_make(0x0123456789abcdefULL + (uint64_t)i, (uint32_t)(7 * i + 1),
                                      (uint32_t)i, 3, (uint32_t)(i % 4));
            CHECK(dt_eps_philox(be, got, n, &s, &pol) == DT_OK);
            dt_eps_philox_range(want, 0, n, &s);
            if (memcmp(got, want, (size_t)n * sizeof(float)) != 0) {
                fprintf(stderr, "philox op differs from the reference: n %lld, %d threads\n",
                        (long long)n, threads);
                dt_check_failures_++;
            }
            dt_backend_free(be, got);
            free(want);
        }
        dt_backend_destroy(be);
    }
}

DT_TEST(lfsr_seed_op_matches_reference)
{
    struct dt_policy pol = level(DT_LEVEL_PORTABLE);
    struct dt_backend *be = cpu(3);
    const int64_t P = 1000;
    struct dt_xoro *lanes = dt_backend_alloc(be, (size_t)P * sizeof *lanes);
    CHECK(dt_eps_lfsr_seed(be, lanes, P, 99, 5, 2, 3, &pol) == DT_OK);
    for (int64_t j = 0; j < P; j++)
        CHECK(dt_xoro_equal(lanes[j], dt_eps_lane_seed(99, 5, 2, 3, (uint64_t)j)));
    dt_backend_free(be, lanes);
    dt_backend_destroy(be);
}

/* Forward and backward walks of the op vs dt_eps_lane_forward/backward per lane: the
 * values, and the lane states after each walk. */
DT_TEST(lfsr_op_matches_reference)
{
    static const int64_t lane_counts[] = {1, 7, 8, 9, 64, 1000};
    struct dt_policy pol = level(DT_LEVEL_PORTABLE);
    for (int threads = 1; threads <= 3; threads += 2) {
        struct dt_backend *be = cpu(threads);
        for (int a = 0; a < (int)(sizeof lane_counts / sizeof lane_counts[0]); a++) {
            const int64_t P = lane_counts[a];
            struct dt_xoro *lanes = dt_backend_alloc(be, (size_t)P * sizeof *lanes);
            struct dt_xoro *ref = malloc((size_t)P * sizeof *ref);
            for (int64_t j = 0; j < P; j++)
                ref[j] = lanes[j] = dt_eps_lane_seed(7, 1, 0, 0, (uint64_t)j);
            for (int i = 0; i < N_SIZES; i++) {
                const int64_t n = sizes[i];
                float *got = dt_backend_alloc(be, (size_t)n * sizeof(float));
                float *want = malloc((size_t)n * sizeof(float));
                for (int back = 0; back <= 1; back++) {
                    memset(got, 0xff, (size_t)n * sizeof(float));
                    memset(want, 0xff, (size_t)n * sizeof(float));
                    CHECK(dt_eps_lfsr(be, got, n, lanes, P, back, -1, &pol) == DT_OK);
                    for (int64_t j = 0; j < P; j++) {
                        if (back) dt_eps_lane_backward(want, n, P, j, &ref[j]);
                        else dt_eps_lane_forward(want, n, P, j, &ref[j]);
                    }
                    bool same = memcmp(got, want, (size_t)n * sizeof(float)) == 0;
                    for (int64_t j = 0; j < P; j++) same = same && dt_xoro_equal(lanes[j], ref[j]);
                    if (!same) {
                        fprintf(stderr,
                                "lfsr op (%s) differs from the reference walk: n %lld, "
                                "P %lld, %d threads\n",
                                back ? "backward" : "forward", (long long)n, (long long)P, threads);
                        dt_check_failures_++;
                    }
                    /* a forward then a backward walk returns every lane to where it began */
                }
                dt_backend_free(be, got);
                free(want);
            }
            for (int64_t j = 0; j < P; j++)
                CHECK(dt_xoro_equal(lanes[j], dt_eps_lane_seed(7, 1, 0, 0, (uint64_t)j)));
            dt_backend_free(be, lanes);
            free(ref);
        }
        dt_backend_destroy(be);
    }
}

/* The fault-injection hook: lane `skip` ends one step short of a full forward walk. */
DT_TEST(lfsr_skip_lane_hook)
{
    struct dt_policy pol = level(DT_LEVEL_PORTABLE);
    struct dt_backend *be = cpu(2);
    const int64_t P = 16, n = 1000;
    struct dt_xoro *lanes = dt_backend_alloc(be, (size_t)P * sizeof *lanes);
    struct dt_xoro ref[16];
    float *eps = dt_backend_alloc(be, (size_t)n * sizeof(float));
    float *tmp = malloc((size_t)n * sizeof(float));
    for (int64_t j = 0; j < P; j++) ref[j] = lanes[j] = dt_eps_lane_seed(1, 2, 3, 4, (uint64_t)j);
    CHECK(dt_eps_lfsr(be, eps, n, lanes, P, false, 5, &pol) == DT_OK);
    for (int64_t j = 0; j < P; j++) {
        dt_eps_lane_forward(tmp, n, P, j, &ref[j]);
        if (j == 5) dt_xoro_prev(&ref[j]);
        CHECK(dt_xoro_equal(lanes[j], ref[j]));
    }
    dt_backend_free(be, lanes);
    dt_backend_free(be, eps);
    free(tmp);
    dt_backend_destroy(be);
}

/* sample, accumulate and finish follow their formulas with the documented rounding order
 * (recomputed here in float, same order: the bits must match); sigma and dsigma match
 * double references closely at every math level, and bit for bit across thread counts. */
DT_TEST(bnn_elementwise_formulas)
{
    enum { N = 5000 };
    static float mu[N], rho[N], eps[N], g[N], sig[N], dsig[N], w[N], gmu[N], grho[N];
    fill(mu, N, 1.0);
    fill(eps, N, 3.0);
    fill(g, N, 0.1);
    for (int i = 0; i < N; i++) rho[i] = (float)(8.0 * urand() - 3.0); /* [-11, 5) */
    for (int lv = 0; lv < DT_LEVEL_COUNT; lv++) {
        struct dt_policy pol = level((enum dt_level)lv);
        float sig1[N], dsig1[N];
        for (int threads = 1; threads <= 3; threads += 2) {
            struct dt_backend *be = cpu(threads);
            CHECK(dt_bnn_sigma(be, sig, dsig, rho, N, &pol) == DT_OK);
            if (threads == 1) {
                memcpy(sig1, sig, sizeof sig);
                memcpy(dsig1, dsig, sizeof dsig);
            } else {
                CHECK(memcmp(sig1, sig, sizeof sig) == 0 && memcmp(dsig1, dsig, sizeof dsig) == 0);
            }
            CHECK(dt_bnn_sample(be, w, mu, sig, eps, N, &pol) == DT_OK);
            CHECK(dt_bnn_accumulate(be, gmu, grho, g, eps, dsig, N, true, &pol) == DT_OK);
            CHECK(dt_bnn_accumulate(be, gmu, grho, g, mu, dsig, N, false, &pol) == DT_OK);
            CHECK(dt_bnn_finish(be, gmu, grho, mu, sig, dsig, N, 0.25f, 0.01f, 2.0f, &pol) ==
                  DT_OK);
            dt_backend_destroy(be);
        }
        int bad = 0;
        for (int i = 0; i < N && !bad; i++) {
            double sp = log1p(exp((double)rho[i])), sg = 1.0 / (1.0 + exp(-(double)rho[i]));
            if (fabs(sig[i] - sp) > 4e-7 * sp || fabs(dsig[i] - sg) > 4e-7 * sg) {
                fprintf(stderr, "level %d: sigma/dsigma at rho %a: %a %a vs %a %a\n", lv,
                        (double)rho[i], (double)sig[i], (double)dsig[i], sp, sg);
                bad = 1;
            }
            float wf = mu[i] + sig[i] * eps[i];
            float m1 = g[i], r1 = (g[i] * eps[i]) * dsig[i];
            m1 = m1 + g[i];
            r1 = r1 + (g[i] * mu[i]) * dsig[i];
            const float ipv = 1.0f / 2.0f;
            float mf = m1 * 0.25f + 0.01f * (mu[i] * ipv);
            float rf = r1 * 0.25f + 0.01f * ((sig[i] * ipv - 1.0f / sig[i]) * dsig[i]);
            if (dt_float_bits(wf) != dt_float_bits(w[i]) ||
                dt_float_bits(mf) != dt_float_bits(gmu[i]) ||
                dt_float_bits(rf) != dt_float_bits(grho[i])) {
                fprintf(stderr, "level %d, element %d: w %a/%a gmu %a/%a grho %a/%a\n", lv, i,
                        (double)w[i], (double)wf, (double)gmu[i], (double)mf, (double)grho[i],
                        (double)rf);
                bad = 1;
            }
        }
        if (bad) dt_check_failures_++;
    }
}

DT_TEST_MAIN(DT_CASE(philox_op_matches_reference), DT_CASE(lfsr_seed_op_matches_reference),
             DT_CASE(lfsr_op_matches_reference), DT_CASE(lfsr_skip_lane_hook),
             DT_CASE(bnn_elementwise_formulas))
