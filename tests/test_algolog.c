/* The per-step record of library algorithm choices (harness/record/algolog.c): run-length rows
 * per call site, a row for every change (autotuning changing its mind, a short last batch
 * with its own shape), the call-site and row limits, the algos.csv and run.json texts; and
 * that a CPU run -- whose backend chooses no algorithm -- writes neither. */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "core/util.h"
#include "harness/record/algolog.h"
#include "nets/backend.h"
#include "tests/check.h"
#include "tests/op_helpers.h"
#include "tests/run_helper.h"

#define EXE DT_DETRAIN_EXE
#define TMP DT_TEST_TMP_DIR "/algolog."

static char out[65536];

static struct dt_algo_note note(const char *op, const char *shape, int algo, const char *name,
                                bool deterministic, const char *math, const char *how)
{
    struct dt_algo_note n;
    memset(&n, 0, sizeof n);
    snprintf(n.op, sizeof n.op, "%s", op);
    snprintf(n.shape, sizeof n.shape, "%s", shape);
    n.algo = algo;
    snprintf(n.name, sizeof n.name, "%s", name);
    n.deterministic = deterministic;
    snprintf(n.math, sizeof n.math, "%s", math);
    snprintf(n.how, sizeof n.how, "%s", how);
    return n;
}

/* One LeNet-like step's notes: two convolution ops and a pooling backward. */
static void step_notes(struct dt_algo_note n[3], const char *batch)
{
    char shape[64];
    snprintf(shape, sizeof shape, "28x28x1>6 k5x5 s1 p2 %s", batch);
    n[0] = note("conv_fwd", shape, 1, "IMPLICIT_PRECOMP_GEMM", true, "fma", "heuristic");
    n[1] = note("conv_bwd_data", shape, 1, "ALGO_1", true, "fma", "heuristic");
    snprintf(shape, sizeof shape, "28x28x6 k3 s2 p1 %s", batch);
    n[2] = note("pool_bwd", shape, -1, "MAX_DETERMINISTIC", true, "fp32", "fixed");
}

/* Row r is call site `call` from first to last with note n. */
static void check_row(const struct dt_algolog *log, int64_t r, int64_t first, int64_t last,
                      int call, const struct dt_algo_note *n)
{
    if (r >= log->n_runs) {
        fprintf(stderr, "row %lld missing (%lld rows)\n", (long long)r, (long long)log->n_runs);
        dt_check_failures_++;
        return;
    }
    const struct dt_algo_run *a = &log->runs[r];
    if (a->first_step != first || a->last_step != last || a->call != call ||
        memcmp(&a->note, n, sizeof *n) != 0) {
        fprintf(stderr,
                "row %lld: steps %lld..%lld call %d %s %s algo %d; wanted %lld..%lld "
                "call %d %s %s algo %d\n",
                (long long)r, (long long)a->first_step, (long long)a->last_step, a->call,
                a->note.op, a->note.shape, a->note.algo, (long long)first, (long long)last, call,
                n->op, n->shape, n->algo);
        dt_check_failures_++;
    }
}

/* Unchanged notes over 10,000 steps: one row per call site, from step 1 to the last. */
DT_TEST(unchanged_notes_one_row_per_call)
{
    struct dt_algolog log;
    dt_algolog_init(&log);
    struct dt_algo_note n[3];
    step_notes(n, "b128");
    for (int64_t s = 1; s <= 10000; s++) dt_algolog_step(&log, s, n, 3, DT_ALGOLOG_MAX_CALLS);
    CHECK_INT_EQ(log.n_runs, 3);
    for (int i = 0; i < 3; i++) check_row(&log, i, 1, 10000, i, &n[i]);
    CHECK_INT_EQ(dt_algolog_changes(&log), 0);
    CHECK_INT_EQ(log.steps_noted, 10000);
    CHECK_INT_EQ(log.dropped, 0);
    dt_algolog_free(&log);
}

/* A call site that changes its choice at step 500 and back at 700 gets a row per stretch;
 * the others keep theirs; each change counts. Every field of a note is part of the
 * choice: changing any one alone starts a row. */
DT_TEST(change_mid_run_starts_a_row)
{
    struct dt_algolog log;
    dt_algolog_init(&log);
    struct dt_algo_note n[3], m[3];
    step_notes(n, "b128");
    memcpy(m, n, sizeof m);
    m[1] = note("conv_bwd_data", n[1].shape, 0, "ALGO_0", false, "default(tf32)", "timed");
    for (int64_t s = 1; s <= 1000; s++)
        dt_algolog_step(&log, s, s >= 500 && s < 700 ? m : n, 3, DT_ALGOLOG_MAX_CALLS);
    CHECK_INT_EQ(log.n_runs, 5);
    check_row(&log, 0, 1, 1000, 0, &n[0]);
    check_row(&log, 1, 1, 499, 1, &n[1]);
    check_row(&log, 2, 1, 1000, 2, &n[2]);
    check_row(&log, 3, 500, 699, 1, &m[1]);
    check_row(&log, 4, 700, 1000, 1, &n[1]);
    CHECK_INT_EQ(dt_algolog_changes(&log), 2);
    dt_algolog_free(&log);

    /* a step that makes fewer calls: the missing site's row ends there (a row says the
     * site ran with that choice at every step it spans) and a new one starts on return */
    dt_algolog_init(&log);
    for (int64_t s = 1; s <= 5; s++)
        dt_algolog_step(&log, s, n, s == 3 ? 2 : 3, DT_ALGOLOG_MAX_CALLS);
    CHECK_INT_EQ(log.n_runs, 4);
    check_row(&log, 0, 1, 5, 0, &n[0]);
    check_row(&log, 1, 1, 5, 1, &n[1]);
    check_row(&log, 2, 1, 2, 2, &n[2]);
    check_row(&log, 3, 4, 5, 2, &n[2]);
    dt_algolog_free(&log);

    for (int field = 0; field < 7; field++) {
        dt_algolog_init(&log);
        struct dt_algo_note a = n[0], b = n[0];
        switch (field) {
        case 0: snprintf(b.op, sizeof b.op, "conv_bwd_filter"); break;
        case 1: snprintf(b.shape, sizeof b.shape, "28x28x1>6 k5x5 s1 p2 b64"); break;
        case 2: b.algo = 0; break;
        case 3: snprintf(b.name, sizeof b.name, "IMPLICIT_GEMM"); break;
        case 4: b.deterministic = false; break;
        case 5: snprintf(b.math, sizeof b.math, "tensor_op"); break;
        default: snprintf(b.how, sizeof b.how, "timed"); break;
        }
        dt_algolog_step(&log, 1, &a, 1, DT_ALGOLOG_MAX_CALLS);
        dt_algolog_step(&log, 2, &b, 1, DT_ALGOLOG_MAX_CALLS);
        if (log.n_runs != 2) fprintf(stderr, "field %d: a change not seen\n", field);
        CHECK_INT_EQ(log.n_runs, 2);
        CHECK_INT_EQ(dt_algolog_changes(&log), 1);
        dt_algolog_free(&log);
    }
}

/* A short last batch: the last step's shapes differ, so every call site gets a one-step
 * row of its own, and each counts as a change. */
DT_TEST(short_last_step_gets_its_rows)
{
    struct dt_algolog log;
    dt_algolog_init(&log);
    struct dt_algo_note n[3], last[3];
    step_notes(n, "b128");
    step_notes(last, "b32");
    for (int64_t s = 1; s <= 9; s++) dt_algolog_step(&log, s, n, 3, DT_ALGOLOG_MAX_CALLS);
    dt_algolog_step(&log, 10, last, 3, DT_ALGOLOG_MAX_CALLS);
    CHECK_INT_EQ(log.n_runs, 6);
    for (int i = 0; i < 3; i++) {
        check_row(&log, i, 1, 9, i, &n[i]);
        check_row(&log, 3 + i, 10, 10, i, &last[i]);
    }
    CHECK_INT_EQ(dt_algolog_changes(&log), 3);
    CHECK_INT_EQ(log.steps_noted, 10);
    dt_algolog_free(&log);
}

/* More notes in a step than DT_ALGOLOG_MAX_CALLS call sites: the first 64 are followed,
 * the rest ignored; more made than kept (dt_backend_take_algo_notes returned n > max):
 * only the kept ones are read; a step without notes is not a noted step. */
DT_TEST(more_calls_than_followed)
{
    enum { N = DT_ALGOLOG_MAX_CALLS + 36 };
    static struct dt_algo_note n[N];
    for (int i = 0; i < N; i++) {
        char shape[64];
        snprintf(shape, sizeof shape, "call %d", i);
        n[i] = note("conv_fwd", shape, i % 8, "GEMM", true, "fma", "heuristic");
    }
    struct dt_algolog log;
    dt_algolog_init(&log);
    for (int64_t s = 1; s <= 5; s++) dt_algolog_step(&log, s, n, N, N);
    dt_algolog_step(&log, 6, n, 1000, DT_ALGOLOG_MAX_CALLS); /* 1000 made, 64 kept */
    dt_algolog_step(&log, 7, n, 0, DT_ALGOLOG_MAX_CALLS);
    CHECK_INT_EQ(log.n_runs, DT_ALGOLOG_MAX_CALLS);
    for (int i = 0; i < DT_ALGOLOG_MAX_CALLS; i++) check_row(&log, i, 1, 6, i, &n[i]);
    CHECK_INT_EQ(dt_algolog_changes(&log), 0);
    CHECK_INT_EQ(log.steps_noted, 6);
    dt_algolog_free(&log);
}

/* Beyond DT_ALGOLOG_MAX_RUNS rows, rows are counted, not kept: a call site that keeps
 * changing adds one per change; one that then keeps its choice adds one row in all, not
 * one per step. */
DT_TEST(rows_beyond_the_limit_are_counted)
{
    struct dt_algolog log;
    dt_algolog_init(&log);
    struct dt_algo_note n[2];
    n[0] = note("conv_fwd", "8x8x1>2 k3x3 s1 p1 b4", 0, "IMPLICIT_GEMM", false, "fma", "timed");
    n[1] = note("conv_fwd", "8x8x1>2 k3x3 s1 p1 b4", 1, "IMPLICIT_PRECOMP_GEMM", false, "fma",
                "timed");
    int64_t s = 1;
    for (; s <= DT_ALGOLOG_MAX_RUNS + 10; s++) /* a new choice every step */
        dt_algolog_step(&log, s, &n[s % 2], 1, DT_ALGOLOG_MAX_CALLS);
    CHECK_INT_EQ(log.n_runs, DT_ALGOLOG_MAX_RUNS);
    CHECK_INT_EQ(log.dropped, 10);
    const struct dt_algo_note *next = &n[s % 2]; /* differs from the last step's */
    for (int64_t t = 0; t < 100; t++, s++)       /* then that one choice for 100 steps */
        dt_algolog_step(&log, s, next, 1, DT_ALGOLOG_MAX_CALLS);
    CHECK_INT_EQ(log.n_runs, DT_ALGOLOG_MAX_RUNS);
    CHECK_INT_EQ(log.dropped, 11); /* one more row, not one per step */
    CHECK_INT_EQ(dt_algolog_changes(&log), DT_ALGOLOG_MAX_RUNS - 1 + 11);
    check_row(&log, DT_ALGOLOG_MAX_RUNS - 1, DT_ALGOLOG_MAX_RUNS, DT_ALGOLOG_MAX_RUNS, 0,
              &n[DT_ALGOLOG_MAX_RUNS % 2]);
    struct dt_strbuf sb = {0};
    dt_algolog_json(&log, &sb);
    char want[128];
    snprintf(want, sizeof want, "\"rows\": %d, \"changes\": %d,", DT_ALGOLOG_MAX_RUNS + 11,
             DT_ALGOLOG_MAX_RUNS + 10);
    CHECK_CONTAINS(sb.data, want);
    dt_strbuf_free(&sb);
    dt_algolog_free(&log);
}

/* A small log: call site 0 unchanged over steps 1..4; site 1 changes at step 3 and its
 * name needs CSV quoting. */
static void small_log(struct dt_algolog *log)
{
    dt_algolog_init(log);
    struct dt_algo_note a[2], b[2];
    a[0] = note("conv_fwd", "28x28x1>6 k5x5 s1 p2 b128", 1, "IMPLICIT_PRECOMP_GEMM", true, "fma",
                "heuristic");
    a[1] =
        note("conv_bwd_data", "14x14x6>16 k5x5 s1 p0 b128", 1, "ALGO_1", true, "fma", "heuristic");
    b[0] = a[0];
    b[1] = note("conv_bwd_data", "14x14x6>16 k5x5 s1 p0 b128", 0, "ALGO_0,\"x\"", false,
                "default(tf32)", "timed");
    for (int64_t s = 1; s <= 4; s++)
        dt_algolog_step(log, s, s < 3 ? a : b, 2, DT_ALGOLOG_MAX_CALLS);
}

/* algos.csv: the header, then one line per row in opening order, fields quoted only where
 * they need it. */
DT_TEST(csv_header_and_rows)
{
    struct dt_algolog log;
    small_log(&log);
    const char *path = TMP "algos.csv";
    remove(path);
    struct dt_error err;
    CHECK_INT_EQ(dt_algolog_write_csv(&log, path, &err), DT_OK);
    char *text = dt_read_file(path, NULL);
    CHECK(text != NULL);
    if (text)
        CHECK_STR_EQ(text,
                     "first_step,last_step,call,op,shape,algo,name,deterministic,math,how\n"
                     "1,4,0,conv_fwd,28x28x1>6 k5x5 s1 p2 b128,1,IMPLICIT_PRECOMP_GEMM,true,fma,"
                     "heuristic\n"
                     "1,2,1,conv_bwd_data,14x14x6>16 k5x5 s1 p0 b128,1,ALGO_1,true,fma,heuristic\n"
                     "3,4,1,conv_bwd_data,14x14x6>16 k5x5 s1 p0 b128,0,\"ALGO_0,\"\"x\"\"\",false,"
                     "default(tf32),timed\n");
    free(text);
    char f[64];
    CHECK_INT_EQ(dt_csv_col(f, sizeof f, path, 1, "last_step"), 0);
    CHECK_STR_EQ(f, "2");
    /* an unwritable path names itself */
    memset(&err, 0, sizeof err);
    CHECK_INT_EQ(dt_algolog_write_csv(&log, TMP "no-such-folder/algos.csv", &err), DT_ERR_IO);
    CHECK_CONTAINS(err.msg, "no-such-folder/algos.csv");
    dt_algolog_free(&log);

    /* nothing noted: no file at all */
    dt_algolog_init(&log);
    dt_algolog_step(&log, 1, NULL, 0, DT_ALGOLOG_MAX_CALLS);
    remove(path);
    CHECK_INT_EQ(dt_algolog_write_csv(&log, path, &err), DT_OK);
    CHECK(!dt_path_exists(path));
    dt_algolog_free(&log);
}

/* run.json's "algorithms": counts, then the first rows in full (at most 64). */
DT_TEST(json_text)
{
    struct dt_algolog log;
    small_log(&log);
    struct dt_strbuf sb = {0};
    dt_algolog_json(&log, &sb);
    CHECK_STR_EQ(sb.data,
                 "\"algorithms\": {\"steps_noted\": 4, \"rows\": 3, \"changes\": 1, "
                 "\"first_rows\": ["
                 "{\"first_step\": 1, \"last_step\": 4, \"call\": 0, \"op\": \"conv_fwd\", "
                 "\"shape\": \"28x28x1>6 k5x5 s1 p2 b128\", \"algo\": 1, \"name\": "
                 "\"IMPLICIT_PRECOMP_GEMM\", \"deterministic\": true, \"math\": \"fma\", "
                 "\"how\": \"heuristic\"}, "
                 "{\"first_step\": 1, \"last_step\": 2, \"call\": 1, \"op\": \"conv_bwd_data\", "
                 "\"shape\": \"14x14x6>16 k5x5 s1 p0 b128\", \"algo\": 1, \"name\": \"ALGO_1\", "
                 "\"deterministic\": true, \"math\": \"fma\", \"how\": \"heuristic\"}, "
                 "{\"first_step\": 3, \"last_step\": 4, \"call\": 1, \"op\": \"conv_bwd_data\", "
                 "\"shape\": \"14x14x6>16 k5x5 s1 p0 b128\", \"algo\": 0, \"name\": "
                 "\"ALGO_0,\\\"x\\\"\", \"deterministic\": false, \"math\": \"default(tf32)\", "
                 "\"how\": \"timed\"}]}");
    dt_strbuf_free(&sb);
    dt_algolog_free(&log);

    /* 70 call sites: 70 rows counted, 64 written out */
    enum { N = 70 };
    static struct dt_algo_note n[N];
    for (int i = 0; i < N; i++) n[i] = note("conv_fwd", "s", i, "GEMM", true, "fma", "heuristic");
    dt_algolog_init(&log);
    dt_algolog_step(&log, 1, n, 64, DT_ALGOLOG_MAX_CALLS);
    for (int i = 0; i < 6; i++) /* six more rows: site i changes at step 2 */
        n[i].algo = 100 + i;
    dt_algolog_step(&log, 2, n, 64, DT_ALGOLOG_MAX_CALLS);
    CHECK_INT_EQ(log.n_runs, N);
    memset(&sb, 0, sizeof sb);
    dt_algolog_json(&log, &sb);
    CHECK_CONTAINS(sb.data, "\"steps_noted\": 2, \"rows\": 70, \"changes\": 6,");
    int objects = 0;
    for (const char *p = sb.data; (p = strstr(p, "\"first_step\"")) != NULL; p++) objects++;
    CHECK_INT_EQ(objects, 64);
    dt_strbuf_free(&sb);
    dt_algolog_free(&log);
}

/* The CPU backend logs no algorithm (oneDNN, under conv_algo autotune or deterministic, picks by
 * ISA and shape, never by timing, and says nothing of it): its take
 * returns 0 after convolutions under every conv_algo, and a CPU run of LeNet under
 * run_to_run (conv_algo deterministic) and portable with conv_algo autotune writes no
 * algos.csv and no "algorithms" in any run.json. */
DT_TEST(cpu_run_writes_no_algos)
{
    struct dt_backend *be = cpu(2);
    struct dt_conv2d_shape s = {
        .B = 2, .H = 6, .W = 6, .C = 1, .K_out = 2, .KH = 3, .KW = 3, .stride = 1, .pad = 1};
    CHECK_INT_EQ(dt_conv2d_shape_init(&s, NULL), DT_OK);
    float *x = dt_backend_alloc(be, 72 * 4), *w = dt_backend_alloc(be, 18 * 4);
    float *bias = dt_backend_alloc(be, 2 * 4), *y = dt_backend_alloc(be, 144 * 4);
    for (int l = 0; l < DT_LEVEL_COUNT; l++) {
        const struct dt_policy pol = level((enum dt_level)l);
        CHECK_INT_EQ(dt_conv2d_forward(be, y, x, w, bias, &s, &pol), DT_OK);
        CHECK_INT_EQ(dt_conv2d_backward_data(be, x, y, w, &s, &pol), DT_OK);
        struct dt_algo_note n[4];
        CHECK_INT_EQ(dt_backend_take_algo_notes(be, n, 4), 0);
    }
    dt_backend_reset_algo_choices(be); /* a no-op there */
    CHECK_INT_EQ(dt_backend_take_algo_notes(be, NULL, 0), 0);
    dt_backend_free(be, x), dt_backend_free(be, w), dt_backend_free(be, bias);
    dt_backend_free(be, y);
    dt_backend_destroy(be);

    const char *dir = TMP "cpu_lenet";
    int rc = dt_run_capture(out, sizeof out,
                            "rm -rf '%s' && '%s' run '%s/configs/lenet.yaml' --out '%s' --quiet "
                            "--set backend.device=cpu --set train.steps=3 "
                            "--set dataset.train_limit=500 --set dataset.test_limit=100 "
                            "--set replicas=1 --set report.overhead_samples=0 "
                            "--set 'policies=[run_to_run, {base: portable, conv_algo: autotune}]'",
                            dir, EXE, DT_SOURCE_DIR, dir);
    if (rc != 0) fprintf(stderr, "%s\n", out);
    CHECK_INT_EQ(rc, 0);
    const char *const cells[] = {"run_to_run", "portable+conv_algo=autotune"};
    for (int i = 0; i < 2; i++) {
        char p[1024];
        snprintf(p, sizeof p, "%s/%s/replica-0/trace.csv", dir, cells[i]);
        CHECK(dt_path_exists(p)); /* the replica ran */
        snprintf(p, sizeof p, "%s/%s/replica-0/algos.csv", dir, cells[i]);
        CHECK(!dt_path_exists(p));
        snprintf(p, sizeof p, "%s/%s/replica-0/run.json", dir, cells[i]);
        char *json = dt_read_file(p, NULL);
        CHECK(json && strstr(json, "\"final_model_digest\"") != NULL);
        CHECK(json && strstr(json, "\"algorithms\"") == NULL);
        free(json);
    }
    char p[1024];
    snprintf(p, sizeof p, "%s/run.json", dir);
    char *json = dt_read_file(p, NULL);
    CHECK(json != NULL);
    CHECK(json && strstr(json, "\"algorithms\"") == NULL);
    free(json);
}

DT_TEST_MAIN(DT_CASE(unchanged_notes_one_row_per_call), DT_CASE(change_mid_run_starts_a_row),
             DT_CASE(short_last_step_gets_its_rows), DT_CASE(more_calls_than_followed),
             DT_CASE(rows_beyond_the_limit_are_counted), DT_CASE(csv_header_and_rows),
             DT_CASE(json_text), DT_CASE(cpu_run_writes_no_algos))
