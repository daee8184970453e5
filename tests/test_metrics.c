/* Divergence and overhead metrics (harness/record/metrics.c) against hand-computed values. */
#include <math.h>
#include <stdio.h>

#include "check.h"
#include "harness/record/metrics.h"
#include "harness/run/bench.h"
#include "nets/backend.h"

DT_TEST(churn_known_vectors)
{
    const uint8_t a[] = {1, 2, 3, 4}, b[] = {1, 0, 3, 0}, c[] = {1, 2, 3, 4};
    CHECK(dt_churn(a, b, 4) == 0.5); /* two of four differ: disagreement, not agreement */
    CHECK(dt_churn(a, c, 4) == 0.0);
    CHECK(dt_churn(a, b, 1) == 0.0);
    CHECK(isnan(dt_churn(a, b, 0)));
}

DT_TEST(l2_known_weights)
{
    const float a[] = {3.0f, 0.0f}, b[] = {0.0f, 4.0f}, c[] = {3.0f, 4.0f};
    CHECK(dt_l2_distance(a, b, 2) == 5.0);
    CHECK(dt_l2_distance(a, a, 2) == 0.0);
    CHECK(dt_l2_norm(c, 2) == 5.0);
    /* 1e-8 apart in float terms: the distance is taken in double, not lost to rounding */
    const float x[] = {1.0f}, y[] = {1.0f + 0x1p-23f};
    CHECK(dt_l2_distance(x, y, 1) == 0x1p-23);
}

DT_TEST(log_spaced_steps_known)
{
    int64_t s[16];
    CHECK_INT_EQ(dt_log_spaced_steps(1000, 4, s), 4);
    CHECK(s[0] == 1 && s[1] == 10 && s[2] == 100 && s[3] == 1000);
    CHECK_INT_EQ(dt_log_spaced_steps(3, 10, s), 3); /* duplicates removed */
    CHECK(s[0] == 1 && s[1] == 2 && s[2] == 3);
    CHECK_INT_EQ(dt_log_spaced_steps(77, 1, s), 1);
    CHECK(s[0] == 77);
    CHECK_INT_EQ(dt_log_spaced_steps(0, 5, s), 0);
}

DT_TEST(bootstrap_interval_known)
{
    /* Two pairs (1, 1) and (1, 3): a resample holds pair 0 twice (ratio 1, p = 1/4), both
     * (ratio 2, p = 1/2) or pair 1 twice (ratio 3, p = 1/4), so the 2.5% and 97.5%
     * quantiles are 1 and 3; the point estimate is median(b) / median(a) = 2 / 1. */
    const double a[] = {1.0, 1.0}, b[] = {1.0, 3.0};
    struct dt_ratio_ci ci;
    dt_bootstrap_median_ratio(a, b, 2, 4000, 7, &ci);
    CHECK(ci.ratio == 2.0);
    CHECK(ci.lo == 1.0 && ci.hi == 3.0);
    CHECK(ci.inconclusive); /* the interval contains 1.0 */
    /* One pair: every resample is that pair. */
    const double a1[] = {2.0}, b1[] = {3.0};
    dt_bootstrap_median_ratio(a1, b1, 1, 100, 7, &ci);
    CHECK(ci.ratio == 1.5 && ci.lo == 1.5 && ci.hi == 1.5 && !ci.inconclusive);
    /* A clear 10% slowdown with small noise is conclusive; equal timings are not. */
    double x[40], y[40], z[40];
    for (int i = 0; i < 40; i++) {
        x[i] = 10.0 + 0.01 * (i % 7);
        y[i] = 11.0 + 0.01 * (i % 5);
        z[i] = 10.0 + 0.01 * (i % 5);
    }
    dt_bootstrap_median_ratio(x, y, 40, 2000, 1, &ci);
    CHECK(!ci.inconclusive && ci.lo > 1.05 && ci.hi < 1.15 && ci.lo <= ci.ratio &&
          ci.ratio <= ci.hi);
    dt_bootstrap_median_ratio(x, z, 40, 2000, 1, &ci);
    CHECK(ci.inconclusive);
    /* A fixed seed gives the same interval. */
    struct dt_ratio_ci c2;
    dt_bootstrap_median_ratio(x, y, 40, 2000, 1, &c2);
    dt_bootstrap_median_ratio(x, y, 40, 2000, 1, &ci);
    CHECK(ci.lo == c2.lo && ci.hi == c2.hi);
}

/* `detrain bench`'s verdict lines (dt_bench_flags) from fixed samples -- the logic a timed
 * bench could only show by hoping for a clear enough machine: a policy's step at half the
 * baseline's is flagged, equal steps are not, an interval whose upper end lies exactly at the
 * threshold is not; per op, a ReLU forward 30 times slower in the baseline is flagged and
 * named, but not where its 2.9 ms are under 1% of the baseline's step; equal ops and an op
 * only one side ran are not. */
DT_TEST(bench_flags_fixed_samples)
{
    enum { N = 12 };
    double ta[N], tb[N], same[N];
    for (int i = 0; i < N; i++) {
        ta[i] = 10e-3 + 1e-5 * (i % 3); /* the baseline's steps */
        tb[i] = 5e-3 + 1e-5 * (i % 2);  /* the policy's: half */
        same[i] = ta[i];
    }
    struct dt_ratio_ci ci;
    struct dt_strbuf f = {0};
    dt_bootstrap_median_ratio(ta, tb, N, 2000, 7, &ci);
    dt_bench_flags(&f, "fast", "run_to_run", &ci, NULL, NULL, 0, 0, 7);
    CHECK(f.data && strstr(f.data, "fast is not the fastest here: run_to_run's step 0.50x"));
    dt_strbuf_free(&f);
    dt_bootstrap_median_ratio(ta, same, N, 2000, 7, &ci);
    dt_bench_flags(&f, "fast", "run_to_run", &ci, NULL, NULL, 0, 0, 7);
    CHECK(f.len == 0);
    dt_strbuf_free(&f);
    const struct dt_ratio_ci edge = {.ratio = 0.9, .lo = 0.85, .hi = DT_BENCH_FLAG_BELOW};
    dt_bench_flags(&f, "fast", "run_to_run", &edge, NULL, NULL, 0, 0, 7);
    CHECK(f.len == 0);
    dt_strbuf_free(&f);
    /* per op: rows of DT_OP_COUNT seconds */
    static double oa[N * DT_OP_COUNT], ob[N * DT_OP_COUNT];
    const int relu = DT_OP_RELU_FORWARD, other = DT_OP_RELU_FORWARD == 0 ? 1 : 0;
    for (int i = 0; i < N; i++) {
        oa[i * DT_OP_COUNT + relu] = 3e-3 + 1e-6 * i; /* the baseline's, slowed */
        ob[i * DT_OP_COUNT + relu] = 1e-4 + 1e-6 * (i % 4);
        oa[i * DT_OP_COUNT + other] = ob[i * DT_OP_COUNT + other] = 2e-4; /* the same */
    }
    dt_bench_flags(&f, "fast", "run_to_run", NULL, oa, ob, N, 10e-3, 7);
    CHECK(f.data && strstr(f.data, "fast is not the fastest for relu_forward here: run_to_run's"));
    CHECK(f.data && strstr(f.data, "not the fastest here:") == NULL); /* no step line */
    CHECK(f.data && strstr(f.data, dt_op_name((enum dt_op)other)) == NULL);
    dt_strbuf_free(&f);
    /* the same op saving 2.9 ms of a 0.3 s step (under 1%): not a finding */
    dt_bench_flags(&f, "fast", "run_to_run", NULL, oa, ob, N, 0.3, 7);
    CHECK(f.len == 0);
    dt_strbuf_free(&f);
    dt_bench_flags(&f, "fast", "run_to_run", NULL, oa, ob, N, 0.28, 7); /* just over 1% */
    CHECK(f.data && strstr(f.data, "fast is not the fastest for relu_forward here"));
    dt_strbuf_free(&f);
    for (int i = 0; i < N; i++) oa[i * DT_OP_COUNT + relu] = 0; /* ran on one side only */
    dt_bench_flags(&f, "fast", "run_to_run", NULL, oa, ob, N, 10e-3, 7);
    CHECK(f.len == 0);
    dt_strbuf_free(&f);
}

/* run_to_run against portable (dt_bench_relax_flag): every control it changes holds a
 * weaker level's value, so its interval wholly above portable's is flagged with both;
 * touching or overlapping intervals, or run_to_run the cheaper, are not. */
DT_TEST(bench_level_flag)
{
    const struct dt_ratio_ci r2r = {.ratio = 1.30, .lo = 1.27, .hi = 1.33};
    const struct dt_ratio_ci cheaper = {.ratio = 1.21, .lo = 1.19, .hi = 1.23};
    const struct dt_ratio_ci touching = {.ratio = 1.24, .lo = 1.20, .hi = 1.27};
    struct dt_policy run_to_run, portable;
    dt_policy_from_level(&run_to_run, DT_LEVEL_RUN_TO_RUN);
    dt_policy_from_level(&portable, DT_LEVEL_PORTABLE);
    struct dt_strbuf f = {0};
    dt_bench_relax_flag(&f, &run_to_run, &r2r, DT_LEVEL_PORTABLE, &cheaper);
    CHECK(f.data && strstr(f.data, "run_to_run costs more than portable here: 1.30x [1.27, 1.33] "
                                   "against 1.21x [1.19, 1.23]"));
    dt_strbuf_free(&f);
    dt_bench_relax_flag(&f, &run_to_run, &r2r, DT_LEVEL_PORTABLE, &touching);
    CHECK(f.len == 0);
    dt_bench_relax_flag(&f, &run_to_run, &cheaper, DT_LEVEL_PORTABLE, &r2r);
    CHECK(f.len == 0);
    dt_bench_relax_flag(&f, &run_to_run, NULL, DT_LEVEL_PORTABLE, &r2r);
    CHECK(f.len == 0);
    /* portable against run_to_run tightens: never flagged */
    dt_bench_relax_flag(&f, &portable, &r2r, DT_LEVEL_RUN_TO_RUN, &cheaper);
    CHECK(f.len == 0);
    dt_strbuf_free(&f);
}

/* The relaxation check (dt_bench_relax_flag): an ablation that only relaxes its level
 * (portable+reduction=unordered, run_to_run+atomics=float) and costs more than it, beyond
 * both intervals, is flagged; one that tightens (fast+reduction=exact), sets a value no
 * level has (portable+math=strict), or overlaps the level's interval is not. */
DT_TEST(bench_relax_flag)
{
    struct dt_policy pol;
    struct dt_error err;
    const struct dt_ratio_ci dearer = {.ratio = 1.53, .lo = 1.50, .hi = 1.56};
    const struct dt_ratio_ci level = {.ratio = 1.10, .lo = 1.08, .hi = 1.12};
    const struct dt_ratio_ci near = {.ratio = 1.13, .lo = 1.11, .hi = 1.15};
    struct dt_strbuf f = {0};
    static const struct {
        const char *base, *control, *value;
        bool flagged;
    } cases[] = {
        {"portable", "reduction", "unordered", true}, /* fast's value */
        {"portable", "reduction", "pinned", true},    /* run_to_run's */
        {"run_to_run", "atomics", "float", true},
        {"portable", "math", "strict", false}, /* no level's value */
        {"portable", "reduction", "fixed", false},
        {"fast", "reduction", "exact", false}, /* tightens */
        {"run_to_run", "reduction", "exact", false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        CHECK_INT_EQ(dt_policy_from_level_name(&pol, cases[i].base, &err), DT_OK);
        CHECK_INT_EQ(dt_policy_set_control(&pol, cases[i].control, cases[i].value, &err), DT_OK);
        CHECK(dt_policy_auto_name(&pol));
        dt_bench_relax_flag(&f, &pol, &dearer, pol.base, &level);
        CHECK_INT_EQ(f.len > 0, cases[i].flagged);
        if (cases[i].flagged) {
            char want[160];
            snprintf(want, sizeof want,
                     "  %s costs more than %s here: 1.53x [1.50, 1.56] against "
                     "1.10x [1.08, 1.12]",
                     pol.name, cases[i].base);
            CHECK(f.data && strstr(f.data, want) == f.data);
        }
        dt_strbuf_free(&f);
        dt_bench_relax_flag(&f, &pol, &near, pol.base, &level); /* overlapping intervals */
        CHECK_INT_EQ((int)f.len, 0);
        dt_strbuf_free(&f);
    }
    CHECK_INT_EQ(dt_policy_from_level_name(&pol, "portable", &err), DT_OK);
    dt_bench_relax_flag(&f, &pol, &dearer, pol.base, &level); /* the level itself: nothing */
    CHECK_INT_EQ((int)f.len, 0);
    dt_strbuf_free(&f);
}

DT_TEST_MAIN(DT_CASE(churn_known_vectors), DT_CASE(l2_known_weights),
             DT_CASE(log_spaced_steps_known), DT_CASE(bootstrap_interval_known),
             DT_CASE(bench_flags_fixed_samples), DT_CASE(bench_level_flag),
             DT_CASE(bench_relax_flag))
