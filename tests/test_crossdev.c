/* The cross-device table (`detrain compare --table`, harness/analyze/compare.c): real tiny runs
 * (tests/data/tiny.yaml, 12 steps, per-tensor digests) on 2 and 1 CPU threads stand for two
 * devices; copies of them with one trace row (and its tensor row) altered, a replica
 * removed or a trace cut short stand for devices that disagree. Runs the real binary. */
#include "tests/check.h"
#include "tests/run_helper.h"

#define EXE DT_DETRAIN_EXE
#define TINY DT_TEST_DATA_DIR "/tiny.yaml"
#define TMP DT_TEST_TMP_DIR "/crossdev."

static char out[65536];

/* A tiny portable experiment (2 replicas, 12 steps, 13 hashed steps) in TMP<name>. */
static int tiny_run(const char *name, int threads, int steps)
{
    int rc = dt_run_capture(out, sizeof out,
                            "rm -rf '" TMP "%s' && '%s' run '%s' --out '" TMP "%s' --quiet "
                            "--set train.steps=%d --set backend.threads=%d "
                            "--set report.snapshots=0 --set report.overhead_samples=0",
                            name, EXE, TINY, name, steps, threads);
    if (rc != 0) fprintf(stderr, "tiny run %s failed (%d):\n%s\n", name, rc, out);
    return rc;
}

static int copy_run(const char *from, const char *to)
{
    return dt_run_capture(out, sizeof out, "rm -rf '" TMP "%s' && cp -r '" TMP "%s' '" TMP "%s'",
                          to, from, to);
}

/* Change the first hex digit of the digest on the row of `step` (and, with `tensor`, of
 * that tensor's row) in a CSV whose digest is the last field: still a valid digest. */
static int alter_row(const char *file, int step, const char *tensor)
{
    return dt_run_capture(
        out, sizeof out,
        "f='%s' && awk -F, -v OFS=, -v s=%d -v t='%s' "
        "'NR > 1 && $1 == s && (t == \"\" || $2 == t) && !done "
        "{ c = substr($NF, 1, 1); $NF = (c == \"a\" ? \"b\" : \"a\") substr($NF, 2); done = 1 } "
        "{ print }' \"$f\" >\"$f.new\" && ! cmp -s \"$f\" \"$f.new\" && mv \"$f.new\" \"$f\"",
        file, step, tensor ? tensor : "");
}

static int table(const char *args)
{
    return dt_run_capture(out, sizeof out, "'%s' compare --table %s", EXE, args);
}

/* The same config on 2 and on 1 threads: portable digests equal at every step. */
DT_TEST(table_identical)
{
    if (tiny_run("t2", 2, 12) != 0 || tiny_run("t1", 1, 12) != 0) {
        dt_check_failures_++;
        return;
    }
    int rc = table("'" TMP "t2' '" TMP "t1' --csv '" TMP "id.csv'");
    CHECK_INT_EQ(rc, 0);
    CHECK_CONTAINS(out, "Reference: `" TMP "t2` (cpu");
    CHECK_CONTAINS(out, "2 threads)");
    CHECK_CONTAINS(out, "| replica | cpu");
    CHECK_CONTAINS(out, ", 1 thread |\n|---|---|\n");
    CHECK_CONTAINS(out, "| portable/replica-0 | identical (13 steps) |\n");
    CHECK_CONTAINS(out, "| portable/replica-1 | identical (13 steps) |\n");
    CHECK_CONTAINS(out, "detrain 0.1.0 (git ");
    CHECK_CONTAINS(out, "total: 2 replicas x 1 column: 2 identical, 0 identical over common steps, "
                        "0 diverged, 0 missing, 0 unreadable");
    char f[128];
    CHECK_INT_EQ(dt_csv_field(f, sizeof f, TMP "id.csv", 1, 0), 0);
    CHECK_STR_EQ(f, "portable/replica-1");
    CHECK_INT_EQ(dt_csv_field(f, sizeof f, TMP "id.csv", 1, 1), 0);
    CHECK_STR_EQ(f, "identical (13 steps)");
    char *csv = dt_read_file(TMP "id.csv", NULL);
    CHECK(csv != NULL);
    if (csv) CHECK(strncmp(csv, "replica,\"cpu", 12) == 0); /* the label holds a comma: quoted */
    free(csv);

    /* --label names the experiments in order, the reference first. */
    rc = table("--label 'CPU x2' '" TMP "t2' --label 'H100 | sm_90' '" TMP "t1'");
    CHECK_INT_EQ(rc, 0);
    CHECK_CONTAINS(out, "Reference: `" TMP "t2` (CPU x2)");
    CHECK_CONTAINS(out, "| replica | H100 / sm_90 |\n"); /* no '|' inside a Markdown cell */
    CHECK_CONTAINS(out, "(labelled \"H100 | sm_90\")");
    /* The same device twice: the second column carries its position. */
    rc = table("'" TMP "t2' '" TMP "t2'");
    CHECK_INT_EQ(rc, 0);
    CHECK_CONTAINS(out, "2 threads (#1) |");
}

/* One trace row altered at step 7 (and dense0.bias's row): that replica's cell names the
 * step and the tensor, the other replicas and columns stay identical; exit 1. */
DT_TEST(table_divergent_step_and_tensor)
{
    if (tiny_run("dv", 2, 12) != 0 || copy_run("dv", "dv_alt") != 0 ||
        copy_run("dv", "dv_same") != 0 || copy_run("dv", "dv_notensor") != 0) {
        dt_check_failures_++;
        return;
    }
    CHECK_INT_EQ(alter_row(TMP "dv_alt/portable/replica-1/trace.csv", 7, NULL), 0);
    CHECK_INT_EQ(alter_row(TMP "dv_alt/portable/replica-1/tensors.csv", 7, "dense0.bias"), 0);
    CHECK_INT_EQ(alter_row(TMP "dv_notensor/portable/replica-0/trace.csv", 4, NULL), 0);
    CHECK_INT_EQ(
        dt_run_capture(out, sizeof out, "rm '" TMP "dv_notensor/portable/replica-0/tensors.csv'"),
        0);
    int rc = table("'" TMP "dv' '" TMP "dv_same' '" TMP "dv_alt' '" TMP "dv_notensor' --label ref "
                   "--label same --label alt --label notensor --csv '" TMP "dv.csv'");
    CHECK_INT_EQ(rc, 1);
    CHECK_CONTAINS(out, "| replica | same | alt | notensor |\n");
    CHECK_CONTAINS(
        out, "| portable/replica-0 | identical (13 steps) | identical (13 steps) | step 4 |\n");
    CHECK_CONTAINS(out,
                   "| portable/replica-1 | identical (13 steps) | step 7, tensor dense0.bias | "
                   "identical (13 steps) |\n");
    CHECK_CONTAINS(out, "4 identical, 0 identical over common steps, 2 diverged");
    char f[128];
    CHECK_INT_EQ(dt_csv_col(f, sizeof f, TMP "dv.csv", 1, "replica"), 0);
    CHECK_STR_EQ(f, "portable/replica-1");
    CHECK_INT_EQ(dt_csv_field(f, sizeof f, TMP "dv.csv", 0, 3), 0);
    CHECK_STR_EQ(f, "step 4");
    char *csv = dt_read_file(TMP "dv.csv", NULL);
    CHECK(csv != NULL);
    if (csv)
        CHECK_CONTAINS(csv,
                       "portable/replica-1,identical (13 steps),\"step 7, tensor dense0.bias\",");
    free(csv);
    /* Only the altered pair: exit 1 as well. */
    CHECK_INT_EQ(table("'" TMP "dv' '" TMP "dv_alt'"), 1);
}

/* A replica missing on the other side, or in the reference: "missing", exit 1. */
DT_TEST(table_missing_replica)
{
    if (tiny_run("ms", 2, 12) != 0 || copy_run("ms", "ms_gone") != 0 ||
        copy_run("ms", "ms_ref") != 0) {
        dt_check_failures_++;
        return;
    }
    CHECK_INT_EQ(dt_run_capture(out, sizeof out, "rm -r '" TMP "ms_gone/portable/replica-1'"), 0);
    int rc = table("'" TMP "ms' '" TMP "ms_gone'");
    CHECK_INT_EQ(rc, 1);
    CHECK_CONTAINS(out, "| portable/replica-0 | identical (13 steps) |\n");
    CHECK_CONTAINS(out, "| portable/replica-1 | missing |\n");
    CHECK_CONTAINS(out, "0 diverged, 1 missing");
    /* Rows are the reference's replicas: one that only the other side has is no row. */
    CHECK_INT_EQ(dt_run_capture(out, sizeof out,
                                "sed -i 's/\"replicas\":2,/\"replicas\":1,/' '" TMP
                                "ms_gone/config.json'"),
                 0);
    CHECK_INT_EQ(table("'" TMP "ms_gone' '" TMP "ms'"), 0);
    CHECK_CONTAINS(out, "| portable/replica-0 | identical (13 steps) |\n");
    CHECK(strstr(out, "replica-1") == NULL);
    /* The reference lacks the trace its config names. */
    CHECK_INT_EQ(dt_run_capture(out, sizeof out, "rm '" TMP "ms_ref/portable/replica-0/trace.csv'"),
                 0);
    CHECK_INT_EQ(table("'" TMP "ms_ref' '" TMP "ms'"), 1);
    CHECK_CONTAINS(out, "| portable/replica-0 | missing (reference) |\n");
}

/* Runs of different lengths: the common prefix is compared and the cell says so; a
 * prefix of step 0 alone proves nothing and is no match. */
DT_TEST(table_different_lengths)
{
    if (tiny_run("ln12", 2, 12) != 0 || tiny_run("ln8", 1, 8) != 0 ||
        copy_run("ln8", "ln_step0") != 0) {
        dt_check_failures_++;
        return;
    }
    int rc = table("'" TMP "ln12' '" TMP "ln8'");
    CHECK_INT_EQ(rc, 0);
    CHECK_CONTAINS(out, "| portable/replica-0 | identical (9 common steps; 13 vs 9) |\n");
    CHECK_CONTAINS(out, "The experiments differ in length");
    CHECK_CONTAINS(out, "0 identical, 2 identical over common steps");
    /* Diverging within the common prefix is still a divergence. */
    CHECK_INT_EQ(alter_row(TMP "ln8/portable/replica-1/trace.csv", 8, NULL), 0);
    CHECK_INT_EQ(table("'" TMP "ln12' '" TMP "ln8'"), 1);
    CHECK_CONTAINS(out, "| portable/replica-1 | step 8");
    CHECK_INT_EQ(dt_run_capture(out, sizeof out,
                                "t='" TMP "ln_step0/portable/replica-0/trace.csv' && "
                                "head -2 \"$t\" >\"$t.new\" && mv \"$t.new\" \"$t\""),
                 0);
    CHECK_INT_EQ(table("'" TMP "ln12' '" TMP "ln_step0'"), 1);
    CHECK_CONTAINS(out, "| portable/replica-0 | too short (13 vs 1 hashed steps) |\n");
}

/* Bad input: exit 2 with the path and what is wrong. */
DT_TEST(table_bad_input)
{
    if (tiny_run("bad", 2, 12) != 0 || copy_run("bad", "bad_trace") != 0) {
        dt_check_failures_++;
        return;
    }
    CHECK_INT_EQ(table("'" TMP "bad' '" TMP "nonexistent'"), 2);
    CHECK_CONTAINS(out, "detrain: " TMP "nonexistent: no such folder");
    CHECK_INT_EQ(table("'" TMP "nonexistent' '" TMP "bad'"), 2);
    CHECK_CONTAINS(out, TMP "nonexistent: no such folder");
    CHECK_INT_EQ(table("'" TMP "bad' '" TMP "bad/portable/replica-0'"), 2);
    CHECK_CONTAINS(out, TMP "bad/portable/replica-0: not an experiment folder (no config.json)");
    CHECK_INT_EQ(table("'" TMP "bad' '" TMP "bad/config.json'"), 2);
    CHECK_CONTAINS(out, TMP "bad/config.json: not a folder");
    /* A broken trace: the table still shows the rest, then the file, line and problem. */
    CHECK_INT_EQ(dt_run_capture(out, sizeof out,
                                "sed -i '5s/,[0-9a-f]*$/,xyz/' '" TMP
                                "bad_trace/portable/replica-1/trace.csv'"),
                 0);
    CHECK_INT_EQ(table("'" TMP "bad' '" TMP "bad_trace'"), 2);
    CHECK_CONTAINS(out, "| portable/replica-0 | identical (13 steps) |\n");
    CHECK_CONTAINS(out, "| portable/replica-1 | error |\n");
    CHECK_CONTAINS(out,
                   "detrain: " TMP "bad_trace/portable/replica-1/trace.csv:5: bad digest 'xyz'");
    /* Usage. */
    CHECK_INT_EQ(table("'" TMP "bad'"), 2);
    CHECK_CONTAINS(out, "expected a reference experiment folder and at least one more");
    CHECK_INT_EQ(table("'" TMP "bad' '" TMP "bad' --bogus"), 2);
    CHECK_CONTAINS(out, "unknown option '--bogus'");
    CHECK_INT_EQ(table("'" TMP "bad' '" TMP "bad' --label a --label b --label c"), 2);
    CHECK_CONTAINS(out, "more --label options than experiments");
    CHECK_INT_EQ(table("'" TMP "bad' '" TMP "bad' --csv"), 2);
    CHECK_CONTAINS(out, "--csv needs a value");
    CHECK_INT_EQ(table("'" TMP "bad' '" TMP "bad' --csv /nonexistent/dir/t.csv"), 2);
    CHECK_CONTAINS(out, "/nonexistent/dir/t.csv");
    /* The help names the form. */
    CHECK_INT_EQ(dt_run_capture(out, sizeof out, "'%s' --help", EXE), 0);
    CHECK_CONTAINS(out, "compare --table EXPERIMENT EXPERIMENT... [--label NAME]... [--csv FILE]");
}

DT_TEST_MAIN(DT_CASE(table_identical), DT_CASE(table_divergent_step_and_tensor),
             DT_CASE(table_missing_replica), DT_CASE(table_different_lengths),
             DT_CASE(table_bad_input))
