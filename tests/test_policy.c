/* Tests for determinism/policy: the levels' settings, setting one control by name (and
 * the errors that list what is valid), automatic names, equality, describe and the
 * `detrain policies` table. Expected names and values are written out here, not taken
 * from the table under test, so a row or value that goes missing fails. */
#include "tests/check.h"

#include "determinism/policy.h"

/* Every control and its values, in table order (enum order). */
static const struct {
    const char *name;
    const char *values[6];
} want_controls[] = {
    {"reduction", {"unordered", "fixed", "exact", "pinned"}},
    {"atomics", {"float", "fixed_point"}},
    {"rng", {"stored", "lfsr", "philox"}},
    {"conv_algo", {"autotune", "deterministic", "own"}},
    {"math", {"fast", "strict", "portable", "exact", "tf32"}},
    {"threads", {"any", "fixed", "independent"}},
};
#define N_WANT ((int)(sizeof want_controls / sizeof want_controls[0]))

static struct dt_policy level(enum dt_level l)
{
    struct dt_policy p;
    dt_policy_from_level(&p, l);
    return p;
}

/* The levels set exactly what docs/DESIGN.md says. */
DT_TEST(levels)
{
    struct dt_policy f = level(DT_LEVEL_FAST), r = level(DT_LEVEL_RUN_TO_RUN),
                     p = level(DT_LEVEL_PORTABLE);
    CHECK_STR_EQ(f.name, "fast");
    CHECK_STR_EQ(r.name, "run_to_run");
    CHECK_STR_EQ(p.name, "portable");
    CHECK_INT_EQ(f.base, DT_LEVEL_FAST);
    CHECK_INT_EQ(p.base, DT_LEVEL_PORTABLE);
    CHECK_INT_EQ(f.reduction, DT_REDUCTION_UNORDERED);
    CHECK_INT_EQ(f.atomics, DT_ATOMICS_FLOAT);
    CHECK_INT_EQ(f.rng, DT_RNG_STORED);
    CHECK_INT_EQ(f.conv_algo, DT_CONV_ALGO_AUTOTUNE);
    CHECK_INT_EQ(f.math, DT_MATH_FAST);
    CHECK_INT_EQ(f.threads, DT_THREADS_ANY);
    CHECK_INT_EQ(r.reduction, DT_REDUCTION_PINNED);
    CHECK_INT_EQ(r.atomics, DT_ATOMICS_FIXED_POINT);
    CHECK_INT_EQ(r.rng, DT_RNG_LFSR);
    CHECK_INT_EQ(r.conv_algo, DT_CONV_ALGO_DETERMINISTIC);
    CHECK_INT_EQ(r.math, DT_MATH_FAST);
    CHECK_INT_EQ(r.threads, DT_THREADS_FIXED);
    CHECK_INT_EQ(p.reduction, DT_REDUCTION_EXACT);
    CHECK_INT_EQ(p.atomics, DT_ATOMICS_FIXED_POINT);
    CHECK_INT_EQ(p.rng, DT_RNG_LFSR);
    CHECK_INT_EQ(p.conv_algo, DT_CONV_ALGO_OWN);
    CHECK_INT_EQ(p.math, DT_MATH_PORTABLE);
    CHECK_INT_EQ(p.threads, DT_THREADS_INDEPENDENT);
}

/* The control list in table order, and lookups by name. */
DT_TEST(control_table)
{
    CHECK_INT_EQ(dt_policy_control_count(), N_WANT);
    for (int c = 0; c < N_WANT && c < dt_policy_control_count(); c++) {
        CHECK_STR_EQ(dt_policy_control_name(c), want_controls[c].name);
        CHECK_INT_EQ(dt_policy_find_control(want_controls[c].name), c);
    }
    CHECK_INT_EQ(dt_policy_find_control("reductoin"), -1);
    CHECK_INT_EQ(dt_policy_find_control(""), -1);
    CHECK_INT_EQ(dt_policy_find_control("base"), -1);
}

/* Every value of every control can be set by name and reads back; the name is left
 * alone and the other controls do not move. */
DT_TEST(set_control_valid)
{
    for (int c = 0; c < N_WANT; c++) {
        for (int v = 0; want_controls[c].values[v]; v++) {
            struct dt_policy p = level(DT_LEVEL_RUN_TO_RUN), before = p;
            struct dt_error err = {0};
            CHECK_INT_EQ(
                dt_policy_set_control(&p, want_controls[c].name, want_controls[c].values[v], &err),
                DT_OK);
            CHECK_STR_EQ(dt_policy_control_value(&p, c), want_controls[c].values[v]);
            CHECK_STR_EQ(p.name, "run_to_run");
            CHECK_INT_EQ(p.base, DT_LEVEL_RUN_TO_RUN);
            for (int o = 0; o < N_WANT; o++)
                if (o != c)
                    CHECK_STR_EQ(dt_policy_control_value(&p, o),
                                 dt_policy_control_value(&before, o));
        }
    }
    struct dt_policy p = level(DT_LEVEL_FAST);
    CHECK_INT_EQ(dt_policy_set_control(&p, "reduction", "fixed", NULL), DT_OK);
    CHECK_INT_EQ(p.reduction, DT_REDUCTION_FIXED);
    CHECK_INT_EQ(dt_policy_set_control(&p, "atomics", "fixed_point", NULL), DT_OK);
    CHECK_INT_EQ(p.atomics, DT_ATOMICS_FIXED_POINT);
    CHECK_INT_EQ(dt_policy_set_control(&p, "rng", "philox", NULL), DT_OK);
    CHECK_INT_EQ(p.rng, DT_RNG_PHILOX);
    CHECK_INT_EQ(dt_policy_set_control(&p, "conv_algo", "own", NULL), DT_OK);
    CHECK_INT_EQ(p.conv_algo, DT_CONV_ALGO_OWN);
    CHECK_INT_EQ(dt_policy_set_control(&p, "math", "strict", NULL), DT_OK);
    CHECK_INT_EQ(p.math, DT_MATH_STRICT);
    CHECK_INT_EQ(dt_policy_set_control(&p, "threads", "independent", NULL), DT_OK);
    CHECK_INT_EQ(p.threads, DT_THREADS_INDEPENDENT);
    CHECK_INT_EQ(dt_policy_set_control(&p, "reduction", "pinned", NULL), DT_OK);
    CHECK_INT_EQ(p.reduction, DT_REDUCTION_PINNED);
    CHECK_INT_EQ(dt_policy_set_control(&p, "math", "tf32", NULL), DT_OK);
    CHECK_INT_EQ(p.math, DT_MATH_TF32);
}

/* math: tf32 is a GPU's TF32 tensor cores: refused at base portable (no other device gives
 * its bits), the policy kept; allowed from fast and run_to_run. */
DT_TEST(tf32_not_portable)
{
    struct dt_policy p = level(DT_LEVEL_PORTABLE), before = p;
    struct dt_error err = {0};
    CHECK_INT_EQ(dt_policy_set_control(&p, "math", "tf32", &err), DT_ERR_CONFIG);
    CHECK_CONTAINS(err.msg, "'tf32' is not allowed at base portable");
    CHECK(memcmp(&p, &before, sizeof p) == 0);
    CHECK_INT_EQ(dt_policy_set_control(&p, "math", "fast", NULL), DT_OK); /* fast is allowed */
    for (int l = DT_LEVEL_FAST; l <= DT_LEVEL_RUN_TO_RUN; l++) {
        struct dt_policy q = level((enum dt_level)l);
        CHECK_INT_EQ(dt_policy_set_control(&q, "math", "tf32", NULL), DT_OK);
        CHECK(dt_math_tf32(&q) && dt_math_fast(&q) && !dt_math_portable(&q));
    }
    struct dt_policy f = level(DT_LEVEL_FAST); /* fast's products are FP32 */
    CHECK(!dt_math_tf32(&f) && dt_math_fast(&f));
}

/* Unknown controls and values fail with the valid choices listed; the policy is kept. */
DT_TEST(set_control_invalid)
{
    struct dt_policy p = level(DT_LEVEL_FAST), before = p;
    struct dt_error err = {0};
    CHECK_INT_EQ(dt_policy_set_control(&p, "reductoin", "fixed", &err), DT_ERR_CONFIG);
    CHECK_INT_EQ(err.status, DT_ERR_CONFIG);
    CHECK_STR_EQ(err.msg, "unknown control 'reductoin' (expected one of reduction, atomics, rng, "
                          "conv_algo, math, threads)");
    CHECK(memcmp(&p, &before, sizeof p) == 0);
    CHECK_INT_EQ(dt_policy_set_control(&p, "reduction", "sorted", &err), DT_ERR_CONFIG);
    CHECK_STR_EQ(err.msg, "control 'reduction': unknown value 'sorted' (expected unordered, "
                          "fixed, exact or pinned)");
    CHECK_INT_EQ(dt_policy_set_control(&p, "rng", "mt19937", &err), DT_ERR_CONFIG);
    CHECK_STR_EQ(err.msg, "control 'rng': unknown value 'mt19937' (expected stored, lfsr or "
                          "philox)");
    CHECK_INT_EQ(dt_policy_set_control(&p, "math", "", &err), DT_ERR_CONFIG);
    CHECK_STR_EQ(err.msg, "control 'math': unknown value '' (expected fast, strict, portable, "
                          "exact or tf32)");
    CHECK_INT_EQ(dt_policy_set_control(&p, "threads", "Fixed", &err), DT_ERR_CONFIG);
    CHECK_CONTAINS(err.msg, "(expected any, fixed or independent)");
    CHECK_INT_EQ(dt_policy_set_control(&p, "name", "x", &err), DT_ERR_CONFIG);
    CHECK_CONTAINS(err.msg, "unknown control 'name'");
    CHECK_INT_EQ(dt_policy_set_control(&p, "math", "strict ", NULL), DT_ERR_CONFIG);
    CHECK(memcmp(&p, &before, sizeof p) == 0);
}

static void expect_auto_name(enum dt_level base, const char *const *sets, int n, const char *want)
{
    struct dt_policy p = level(base);
    for (int i = 0; i < n; i++)
        CHECK_INT_EQ(dt_policy_set_control(&p, sets[2 * i], sets[2 * i + 1], NULL), DT_OK);
    CHECK(dt_policy_auto_name(&p));
    CHECK_STR_EQ(p.name, want);
    /* usable as a folder name */
    const char *ok = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_+=";
    CHECK_INT_EQ(strspn(p.name, ok), strlen(p.name));
}

DT_TEST(auto_name)
{
    const char *one[] = {"reduction", "fixed"};
    expect_auto_name(DT_LEVEL_FAST, one, 1, "fast+reduction=fixed");
    /* an override equal to the base's value changes nothing */
    const char *same[] = {"reduction", "unordered"};
    expect_auto_name(DT_LEVEL_FAST, same, 1, "fast");
    expect_auto_name(DT_LEVEL_PORTABLE, NULL, 0, "portable");
    expect_auto_name(DT_LEVEL_RUN_TO_RUN, NULL, 0, "run_to_run");
    /* two overrides come out in table order, whatever order they were set in */
    const char *two[] = {"math", "fast", "reduction", "unordered"};
    expect_auto_name(DT_LEVEL_PORTABLE, two, 2, "portable+reduction=unordered+math=fast");
    const char *back[] = {"math", "fast", "math", "portable"};
    expect_auto_name(DT_LEVEL_PORTABLE, back, 2, "portable");
    const char *bias[] = {"atomics", "fixed_point", "threads", "any"};
    expect_auto_name(DT_LEVEL_FAST, bias, 2, "fast+atomics=fixed_point");

    /* a name that would not fit in 63 characters is refused */
    struct dt_policy p = level(DT_LEVEL_RUN_TO_RUN);
    const char *all[] = {"reduction", "unordered", "atomics", "float",    "rng",     "philox",
                         "conv_algo", "autotune",  "math",    "portable", "threads", "independent"};
    for (int i = 0; i < 6; i++)
        CHECK_INT_EQ(dt_policy_set_control(&p, all[2 * i], all[2 * i + 1], NULL), DT_OK);
    CHECK(!dt_policy_auto_name(&p));
    CHECK(strlen(p.name) < sizeof p.name);
}

/* Controls only: the name and the base do not count. */
DT_TEST(equal_controls)
{
    struct dt_policy f = level(DT_LEVEL_FAST), r = level(DT_LEVEL_RUN_TO_RUN);
    struct dt_policy f2 = level(DT_LEVEL_FAST);
    CHECK(dt_policy_equal_controls(&f, &f2));
    CHECK(!dt_policy_equal_controls(&f, &r));
    snprintf(f2.name, sizeof f2.name, "other");
    CHECK(dt_policy_equal_controls(&f, &f2));
    for (int c = 0; c < N_WANT; c++) { /* each control on its own makes a difference */
        struct dt_policy x = level(DT_LEVEL_FAST);
        CHECK_INT_EQ(
            dt_policy_set_control(&x, want_controls[c].name, want_controls[c].values[1], NULL),
            DT_OK);
        CHECK(!dt_policy_equal_controls(&f, &x));
        CHECK(!dt_policy_equal_controls(&x, &f));
    }
    /* portable with run_to_run's conv_algo, math and threads is run_to_run */
    struct dt_policy p = level(DT_LEVEL_PORTABLE);
    CHECK_INT_EQ(dt_policy_set_control(&p, "conv_algo", "deterministic", NULL), DT_OK);
    CHECK_INT_EQ(dt_policy_set_control(&p, "math", "fast", NULL), DT_OK);
    CHECK(!dt_policy_equal_controls(&p, &r));
    CHECK_INT_EQ(dt_policy_set_control(&p, "threads", "fixed", NULL), DT_OK);
    CHECK(!dt_policy_equal_controls(&p, &r)); /* reduction: exact vs pinned */
    CHECK_INT_EQ(dt_policy_set_control(&p, "reduction", "pinned", NULL), DT_OK);
    CHECK(dt_policy_equal_controls(&p, &r));
}

DT_TEST(describe)
{
    char buf[256];
    struct dt_policy p = level(DT_LEVEL_FAST);
    dt_policy_describe(buf, sizeof buf, &p);
    CHECK_STR_EQ(buf, "reduction=unordered atomics=float rng=stored conv_algo=autotune math=fast "
                      "threads=any");
    p = level(DT_LEVEL_PORTABLE);
    dt_policy_describe(buf, sizeof buf, &p);
    CHECK_STR_EQ(buf, "reduction=exact atomics=fixed_point rng=lfsr conv_algo=own math=portable "
                      "threads=independent");
    CHECK_INT_EQ(dt_policy_set_control(&p, "rng", "philox", NULL), DT_OK);
    CHECK_INT_EQ(dt_policy_set_control(&p, "math", "fast", NULL), DT_OK);
    dt_policy_describe(buf, sizeof buf, &p);
    CHECK_STR_EQ(buf, "reduction=exact atomics=fixed_point rng=philox conv_algo=own math=fast "
                      "threads=independent");
    /* a short buffer gets a terminated prefix */
    char small[12];
    memset(small, 'x', sizeof small);
    dt_policy_describe(small, sizeof small, &p);
    CHECK_STR_EQ(small, "reduction=e");
}

/* The level table stays at the top; then every value of every control has a doc line. */
DT_TEST(print_table)
{
    char *text = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&text, &size);
    CHECK(f != NULL);
    if (!f) return;
    dt_policy_print_table(f);
    fclose(f);
    const char *head = "control    fast         run_to_run     portable    \n"
                       "reduction  unordered    pinned         exact       \n"
                       "atomics    float        fixed_point    fixed_point \n"
                       "rng        stored       lfsr           lfsr        \n"
                       "conv_algo  autotune     deterministic  own         \n"
                       "math       fast         fast           portable    \n"
                       "threads    any          fixed          independent \n";
    CHECK(strncmp(text, head, strlen(head)) == 0);
    if (strncmp(text, head, strlen(head)) != 0) fprintf(stderr, "  table:\n%s\n", text);
    for (int c = 0; c < N_WANT; c++) {
        char line[96];
        snprintf(line, sizeof line, "\n%s: ", want_controls[c].name);
        CHECK_CONTAINS(text, line);
        const char *section = strstr(text, line);
        const char *next = c + 1 < N_WANT ? NULL : text + strlen(text);
        if (c + 1 < N_WANT) {
            snprintf(line, sizeof line, "\n%s: ", want_controls[c + 1].name);
            next = strstr(text, line);
        }
        for (int v = 0; want_controls[c].values[v]; v++) {
            /* "  <value> <padding><doc>" inside this control's section, with a doc */
            snprintf(line, sizeof line, "\n  %-14s ", want_controls[c].values[v]);
            const char *at = section ? strstr(section, line) : NULL;
            CHECK(at != NULL && next != NULL && at < next);
            if (!at)
                fprintf(stderr, "  missing doc line for %s.%s\n", want_controls[c].name,
                        want_controls[c].values[v]);
            else CHECK(strlen(at) > strlen(line) + 10 && at[strlen(line)] != '\n');
        }
    }
    CHECK_CONTAINS(text, "  fixed_point    exact int64 fixed-point accumulation, one rounding "
                         "at the end\n");
    CHECK_CONTAINS(text, "  unordered      partial sums from worker threads combined in "
                         "completion order (depends on scheduling); across ranks "
                         "MPI_Allreduce/NCCL in float\n");
    CHECK_CONTAINS(text, "  portable       detrain's own exp/log from IEEE basic operations, no "
                         "contraction\n");
    CHECK_CONTAINS(text, "  independent    result independent of the thread count\n");
    CHECK_CONTAINS(text, "{base: fast, reduction: fixed}");
    free(text);
}

DT_TEST_MAIN(DT_CASE(levels), DT_CASE(control_table), DT_CASE(set_control_valid),
             DT_CASE(set_control_invalid), DT_CASE(tf32_not_portable), DT_CASE(auto_name),
             DT_CASE(equal_controls), DT_CASE(describe), DT_CASE(print_table))
