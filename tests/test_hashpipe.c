/* The hashing pipeline (harness/run/hashpipe.h) and the backend calls under it: snapshot copies
 * (dt_backend_copy_out_begin/wait), host buffers, synchronisation around profiled ops.
 * unit: the CPU backend's copies and the pipeline in process against the synchronous path
 * (the same trace bytes, a complete prefix after every drain, write errors; the tree
 * digest's three paths); e2e: detrain
 * runs with hash.async off and on give the same files (hash.every, a non-finite loss, an
 * interruption); gpu: the CUDA backend's copies are exact and come from a snapshot taken
 * when they were begun, and a CUDA model's pipelined trace is the CPU's. */
#include <math.h>
#include <string.h>

#include "core/util.h"
#include "harness/run/hashpipe.h"
#include "harness/record/trace.h"
#include "nets/backend_impl.h"
#include "tests/check.h"
#include "tests/op_helpers.h"
#include "tests/run_helper.h"

#define EXE DT_DETRAIN_EXE
#define TINY DT_TEST_DATA_DIR "/tiny.yaml"
#define TMP DT_TEST_TMP_DIR "/hashpipe."

static char out[65536];

/* Values whose bytes a copy must keep: signed zeros, NaN payloads, infinities, subnormals,
 * and ordinary numbers that differ per (tag, index). */
static void pattern(float *v, int64_t n, uint32_t tag)
{
    for (int64_t i = 0; i < n; i++) {
        uint32_t bits;
        switch ((i + tag) % 7) {
        case 0: bits = 0x80000000u; break;                                           /* -0 */
        case 1: bits = 0x7fc00000u | ((tag * 31u + (uint32_t)i) & 0x3fffffu); break; /* NaN */
        case 2: bits = (i & 1) ? 0xff800000u : 0x7f800000u; break; /* -inf, +inf */
        case 3: bits = 0x00000001u + (uint32_t)i % 1000u; break;   /* subnormal */
        default: {
            float f = (float)urand() * (float)(1 + tag % 5);
            memcpy(&bits, &f, sizeof bits);
        }
        }
        memcpy(&v[i], &bits, sizeof bits);
    }
}

/* ---- backend copies ---------------------------------------------------------------------- */

/* n tensors of these sizes (floats; odd, not multiples of 32, one empty) on `be`, filled
 * with pattern(tag + i); `host` receives the concatenation the copy must produce. */
static const int64_t sizes[] = {1, 31, 0, 257, 4099, 33};
#define N_T ((int)(sizeof sizes / sizeof sizes[0]))

static int64_t total_floats(void)
{
    int64_t t = 0;
    for (int i = 0; i < N_T; i++) t += sizes[i];
    return t;
}

static void make_tensors(struct dt_backend *be, float *dev[N_T], size_t bytes[N_T], float *expect,
                         uint32_t tag)
{
    int64_t off = 0;
    for (int i = 0; i < N_T; i++) {
        bytes[i] = (size_t)sizes[i] * sizeof(float);
        if (!dev[i]) dev[i] = dt_backend_alloc(be, bytes[i]);
        pattern(expect + off, sizes[i], tag + (uint32_t)i);
        if (sizes[i]) dt_backend_upload(be, dev[i], expect + off, bytes[i]);
        off += sizes[i];
    }
}

/* 1 when the n floats of got and want have the same bits; prints the first difference. */
static int same_bits(const float *got, const float *want, int64_t n, const char *what)
{
    if (memcmp(got, want, (size_t)n * sizeof(float)) == 0) return 1;
    for (int64_t i = 0; i < n; i++)
        if (memcmp(&got[i], &want[i], sizeof(float)) != 0) {
            uint32_t a, b;
            memcpy(&a, &got[i], 4);
            memcpy(&b, &want[i], 4);
            fprintf(stderr, "%s: float %lld: got 0x%08x, want 0x%08x\n", what, (long long)i, a, b);
            break;
        }
    return 0;
}

static void poison(float *v, int64_t n)
{
    for (int64_t i = 0; i < n; i++) v[i] = NAN;
}

/* Copy the tensors, overwrite them at once, wait: the copy holds what they were at the
 * begin. Then DT_BACKEND_COPY_OUT_DEPTH copies in flight, each of different contents,
 * waited for in order. */
static void check_copy_out(struct dt_backend *be, const char *what)
{
    const int64_t total = total_floats();
    float *dev[N_T] = {0};
    size_t bytes[N_T];
    const void *srcs[N_T];
    float *expect[DT_BACKEND_COPY_OUT_DEPTH], *host[DT_BACKEND_COPY_OUT_DEPTH];
    for (int k = 0; k < DT_BACKEND_COPY_OUT_DEPTH; k++) {
        expect[k] = dt_xmalloc((size_t)total * sizeof(float));
        host[k] = dt_backend_host_alloc(be, (size_t)total * sizeof(float));
        poison(host[k], total);
    }
    float *later = dt_xmalloc((size_t)total * sizeof(float));
    make_tensors(be, dev, bytes, expect[0], 100);
    for (int i = 0; i < N_T; i++) srcs[i] = dev[i];
    dt_backend_copy_out_begin(be, host[0], srcs, bytes, N_T);
    make_tensors(be, dev, bytes, later, 200); /* the next "step" overwrites at once */
    dt_backend_copy_out_wait(be);
    CHECK(same_bits(host[0], expect[0], total, what));
    CHECK(memcmp(later, expect[0], (size_t)total * sizeof(float)) != 0); /* they did change */

    for (int k = 0; k < DT_BACKEND_COPY_OUT_DEPTH; k++) {
        poison(host[k], total);
        make_tensors(be, dev, bytes, expect[k], 300 + (uint32_t)k * 10);
        dt_backend_copy_out_begin(be, host[k], srcs, bytes, N_T);
    }
    for (int k = 0; k < DT_BACKEND_COPY_OUT_DEPTH; k++) {
        dt_backend_copy_out_wait(be);
        CHECK(same_bits(host[k], expect[k], total, what));
    }
    for (int k = 0; k < DT_BACKEND_COPY_OUT_DEPTH; k++) {
        free(expect[k]);
        dt_backend_host_free(be, host[k]);
    }
    for (int i = 0; i < N_T; i++) dt_backend_free(be, dev[i]);
    free(later);
}

/* The CPU backend's copy_out: every tensor, in order, back to back, bits kept; with copies
 * in flight up to the depth. */
DT_TEST(copy_out_cpu_in_order)
{
    struct dt_backend *c = cpu(2);
    CHECK(c->ops->copy_out_begin != NULL);
    check_copy_out(c, "cpu copy_out");
    dt_backend_synchronize(c); /* a no-op on the CPU, callable any time */
    dt_backend_destroy(c);
}

/* A backend without the optional copy and host-memory members still copies: the wrappers
 * fall back to one download per tensor and malloc'ed host memory. */
DT_TEST(copy_out_fallback)
{
    struct dt_backend *c = cpu(1);
    struct dt_backend_ops old = *c->ops;
    old.synchronize = NULL;
    old.host_alloc = NULL;
    old.host_free = NULL;
    old.copy_out_begin = NULL;
    old.copy_out_wait = NULL;
    old.copy_out_release = NULL;
    const struct dt_backend_ops *full = c->ops;
    c->ops = &old;
    check_copy_out(c, "fallback copy_out");
    c->ops = full;
    dt_backend_destroy(c);
}

static int sync_calls;
static void counting_synchronize(struct dt_backend *be) { sync_calls++; }

/* With profiling on, a backend that has a synchronize op is synchronised before and after
 * each op, so the op's time includes its kernels; with profiling off, never. */
DT_TEST(profile_synchronizes)
{
    struct dt_backend *c = cpu(1);
    struct dt_backend_ops with_sync = *c->ops;
    with_sync.synchronize = counting_synchronize;
    const struct dt_backend_ops *full = c->ops;
    c->ops = &with_sync;
    struct dt_policy pol = level(DT_LEVEL_PORTABLE);
    float x[5] = {-1, 2, -3, 4, 0};
    sync_calls = 0;
    CHECK_INT_EQ(dt_relu_forward(c, x, x, 5, &pol), DT_OK);
    CHECK_INT_EQ(sync_calls, 0);
    dt_backend_profile_enable(c, true);
    CHECK_INT_EQ(dt_relu_forward(c, x, x, 5, &pol), DT_OK);
    CHECK_INT_EQ(sync_calls, 2);
    dt_backend_synchronize(c);
    CHECK_INT_EQ(sync_calls, 3);
    dt_backend_profile_enable(c, false);
    c->ops = full;
    dt_backend_destroy(c);
}

/* ---- the pipeline in process ------------------------------------------------------------- */

/* Every parameter of m set to pattern values of step s (a stand-in for an update). */
static void set_weights(struct dt_model *m, int64_t s)
{
    for (int i = 0; i < m->n_params; i++) {
        const struct dt_param *p = &m->params[i];
        float *h = dt_xmalloc((size_t)p->n * sizeof(float));
        pattern(h, p->n, (uint32_t)(s * 16 + i));
        dt_backend_upload(m->be, p->w, h, (size_t)p->n * sizeof(float));
        free(h);
    }
}

static int count_lines(const char *path)
{
    char *t = dt_read_file(path, NULL);
    int n = 0;
    for (char *p = t; p && *p; p++) n += *p == '\n';
    free(t);
    return n;
}

/* Hash steps 0..steps (every `every`-th, and the last) of an MLP with odd sizes on `be`
 * through a pipeline into dir; the weights change right after each submit, so a pipeline
 * that hashed the live weights instead of its snapshot disagrees with the synchronous one.
 * Drains now and then and checks that the trace then holds every submitted step. The
 * model digest of the last step goes to `last`. urand is reseeded, so runs are alike. */
enum digest_mode { SHA256, TREE, TREE_ON_DEVICE /* the tree op + digests copied back */ };
static void run_pipeline_digest(char last[DT_DIGEST_HEX], struct dt_backend *be, const char *dir,
                                bool async, int64_t steps, int every, enum digest_mode mode)
{
    rng_state = 0x9e3779b97f4a7c15ULL;
    struct dt_error err = {0};
    CHECK_INT_EQ(dt_mkdir_p(dir, &err), DT_OK);
    struct dt_model *m = NULL;
    const int64_t hidden[] = {33, 7};
    CHECK_INT_EQ(dt_mlp_create(&m, be, 13, hidden, 2, 5, 4, &err), DT_OK);
    if (!m) return;
    m->tree_digest = mode != SHA256;
    struct dt_trace_writer tw;
    CHECK_INT_EQ(dt_trace_open(&tw, dir, true, DT_HASH_DIGEST_SHA256, &err), DT_OK);
    struct dt_hashpipe *hp = NULL;
    CHECK_INT_EQ(dt_hashpipe_create(&hp, m, &tw, true, async, &err), DT_OK);
    if (mode == TREE_ON_DEVICE) dt_hashpipe_set_device_digests(hp, true);
    CHECK(dt_hashpipe_is_async(hp) == async);
    CHECK_STR_EQ(dt_hashpipe_last_digest(hp), "");
    dt_model_init(m, 7, 0);
    CHECK_INT_EQ(dt_hashpipe_submit(hp, 0, NAN, &err), DT_OK);
    int submitted = 1;
    for (int64_t s = 1; s <= steps; s++) {
        set_weights(m, s);
        float loss = s % 11 == 0 ? INFINITY : s % 13 == 0 ? NAN : (float)s * 0.37f;
        if (s % every == 0 || s == steps) {
            CHECK_INT_EQ(dt_hashpipe_submit(hp, s, loss, &err), DT_OK);
            submitted++;
        }
        if (s % 17 == 0) {
            CHECK_INT_EQ(dt_hashpipe_drain(hp, &err), DT_OK);
            CHECK_INT_EQ(count_lines(tw.trace_path), 1 + submitted);
        }
    }
    CHECK_INT_EQ(dt_hashpipe_drain(hp, &err), DT_OK);
    CHECK_INT_EQ(count_lines(tw.trace_path), 1 + submitted);
    CHECK_INT_EQ(count_lines(tw.tensors_path), 1 + submitted * m->n_params);
    memcpy(last, dt_hashpipe_last_digest(hp), DT_DIGEST_HEX);
    dt_hashpipe_destroy(hp);
    CHECK_INT_EQ(dt_trace_close(&tw, &err), DT_OK);
    dt_model_destroy(m);
}

static void run_pipeline(char last[DT_DIGEST_HEX], struct dt_backend *be, const char *dir,
                         bool async, int64_t steps, int every)
{
    run_pipeline_digest(last, be, dir, async, steps, every, SHA256);
}

static void check_same_files(const char *a, const char *b)
{
    const char *names[] = {"trace.csv", "tensors.csv"};
    for (int i = 0; i < 2; i++) {
        char pa[1024], pb[1024];
        snprintf(pa, sizeof pa, "%s/%s", a, names[i]);
        snprintf(pb, sizeof pb, "%s/%s", b, names[i]);
        if (!dt_files_equal(pa, pb)) fprintf(stderr, "%s and %s differ\n", pa, pb);
        CHECK(dt_files_equal(pa, pb));
    }
}

/* The worker-thread pipeline writes the synchronous path's bytes: trace and per-tensor
 * rows, the same steps, the same last digest, for hash every step and every 3rd; and the
 * last digest is that of the final weights (not of an earlier or later step). */
DT_TEST(pipeline_matches_sync)
{
    struct dt_backend *c = cpu(2);
    const int everies[] = {1, 3};
    for (int e = 0; e < 2; e++) {
        char sync_dir[256], async_dir[256], a[DT_DIGEST_HEX], b[DT_DIGEST_HEX];
        snprintf(sync_dir, sizeof sync_dir, TMP "inproc_sync_%d", everies[e]);
        snprintf(async_dir, sizeof async_dir, TMP "inproc_async_%d", everies[e]);
        run_pipeline(a, c, sync_dir, false, 50, everies[e]);
        run_pipeline(b, c, async_dir, true, 50, everies[e]);
        check_same_files(sync_dir, async_dir);
        CHECK_STR_EQ(a, b);
        char path[512], f[80];
        snprintf(path, sizeof path, "%s/trace.csv", async_dir);
        int rows = count_lines(path) - 1;
        CHECK_INT_EQ(dt_csv_field(f, sizeof f, path, rows - 1, 0), 0);
        CHECK_STR_EQ(f, "50");
        CHECK_INT_EQ(dt_csv_field(f, sizeof f, path, rows - 1, 2), 0);
        CHECK_STR_EQ(f, a);
    }
    dt_backend_destroy(c);
}

/* hash.digest: tree through the pipeline: the synchronous path (the op, digests read back),
 * the worker hashing a snapshot on the host, and the digests computed by the op on the
 * training thread's stream with only they copied back (what a device backend does) write
 * the same bytes at every step; the SHA-256 trace of the same weights differs (the kinds
 * are told apart). */
DT_TEST(pipeline_tree_digests)
{
    struct dt_backend *c = cpu(2);
    char a[DT_DIGEST_HEX], b[DT_DIGEST_HEX], d[DT_DIGEST_HEX], s[DT_DIGEST_HEX];
    run_pipeline_digest(a, c, TMP "tree_sync", false, 40, 3, TREE);
    run_pipeline_digest(b, c, TMP "tree_async", true, 40, 3, TREE);
    run_pipeline_digest(d, c, TMP "tree_device", true, 40, 3, TREE_ON_DEVICE);
    check_same_files(TMP "tree_sync", TMP "tree_async");
    check_same_files(TMP "tree_sync", TMP "tree_device");
    CHECK_STR_EQ(a, b);
    CHECK_STR_EQ(a, d);
    run_pipeline_digest(s, c, TMP "tree_sha", true, 40, 3, SHA256);
    CHECK(strcmp(a, s) != 0);
    CHECK(!dt_files_equal(TMP "tree_sync/trace.csv", TMP "tree_sha/trace.csv"));
    dt_backend_destroy(c);
}

/* A trace that cannot be written: the error comes back from submit or drain (not lost on
 * the worker), sticks, and the pipeline still shuts down cleanly. */
DT_TEST(pipeline_write_error)
{
    FILE *full = fopen("/dev/full", "w");
    if (!full) DT_SKIP("no /dev/full");
    struct dt_backend *c = cpu(1);
    struct dt_error err = {0};
    const char *dir = TMP "write_error";
    CHECK_INT_EQ(dt_mkdir_p(dir, &err), DT_OK);
    struct dt_model *m = NULL;
    const int64_t hidden[] = {3};
    CHECK_INT_EQ(dt_mlp_create(&m, c, 4, hidden, 1, 2, 1, &err), DT_OK);
    struct dt_trace_writer tw;
    CHECK_INT_EQ(dt_trace_open(&tw, dir, false, DT_HASH_DIGEST_SHA256, &err), DT_OK);
    fclose(tw.trace);
    tw.trace = full;
    struct dt_hashpipe *hp = NULL;
    CHECK_INT_EQ(dt_hashpipe_create(&hp, m, &tw, false, true, &err), DT_OK);
    enum dt_status st = DT_OK;
    for (int64_t s = 0; s < 5 && st == DT_OK; s++) st = dt_hashpipe_submit(hp, s, 1.0f, &err);
    if (st == DT_OK) st = dt_hashpipe_drain(hp, &err);
    CHECK_INT_EQ(st, DT_ERR_IO);
    CHECK_CONTAINS(err.msg, "write failed");
    struct dt_error again = {0};
    CHECK_INT_EQ(dt_hashpipe_drain(hp, &again), DT_ERR_IO);
    CHECK_INT_EQ(dt_hashpipe_submit(hp, 9, 1.0f, &again), DT_ERR_IO);
    dt_hashpipe_destroy(hp);
    dt_trace_close(&tw, &err);
    dt_model_destroy(m);
    dt_backend_destroy(c);
}

/* ---- detrain runs ------------------------------------------------------------------------ */

static void run_ok(const char *dir, const char *extra, int want_rc)
{
    int rc = dt_run_capture(out, sizeof out,
                            "rm -rf '%s' && '%s' run '%s' --out '%s' --quiet --set replicas=1 "
                            "--set report.overhead_samples=0 %s",
                            dir, EXE, TINY, dir, extra);
    if (rc != want_rc) fprintf(stderr, "detrain run exited %d:\n%s\n", rc, out);
    CHECK_INT_EQ(rc, want_rc);
}

/* The replica's final_model_digest from its run.json ("" when missing). */
static void final_digest(char *buf, size_t size, const char *dir)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/portable/replica-0/run.json", dir);
    char *j = dt_read_file(path, NULL);
    buf[0] = '\0';
    const char *k = j ? strstr(j, "\"final_model_digest\": \"") : NULL;
    if (k) {
        k += strlen("\"final_model_digest\": \"");
        size_t n = strcspn(k, "\"");
        if (n < size) {
            memcpy(buf, k, n);
            buf[n] = '\0';
        }
    }
    free(j);
    if (!buf[0]) fprintf(stderr, "%s: no final_model_digest\n", path);
    CHECK(buf[0] != '\0');
}

static void check_same_runs(const char *a, const char *b)
{
    char ra[1024], rb[1024];
    snprintf(ra, sizeof ra, "%s/portable/replica-0", a);
    snprintf(rb, sizeof rb, "%s/portable/replica-0", b);
    check_same_files(ra, rb);
    char da[80], db[80];
    final_digest(da, sizeof da, a);
    final_digest(db, sizeof db, b);
    CHECK_STR_EQ(da, db);
}

/* Which times.csv rows have a hash time: the same steps either way. */
static void check_same_hashed_steps(const char *a, const char *b, int steps)
{
    char pa[1024], pb[1024];
    snprintf(pa, sizeof pa, "%s/portable/replica-0/times.csv", a);
    snprintf(pb, sizeof pb, "%s/portable/replica-0/times.csv", b);
    for (int row = 0; row < steps; row++) {
        char fa[64] = "", fb[64] = "";
        CHECK_INT_EQ(dt_csv_col(fa, sizeof fa, pa, row, "hash_ms"), 0);
        CHECK_INT_EQ(dt_csv_col(fb, sizeof fb, pb, row, "hash_ms"), 0);
        CHECK_INT_EQ(fa[0] != '\0', fb[0] != '\0');
    }
}

/* hash.async off and on: byte-identical trace.csv and tensors.csv and the same final digest,
 * hashing every step and every 4th (30 steps: 0, 4, ..., 28 and the last, 30). */
DT_TEST(async_trace_identical)
{
    run_ok(TMP "off", "--set hash.async=off", 0);
    run_ok(TMP "on", "--set hash.async=on", 0);
    check_same_runs(TMP "off", TMP "on");
    check_same_hashed_steps(TMP "off", TMP "on", 30);
    char *cfg = dt_read_file(TMP "on/config.json", NULL);
    CHECK(cfg != NULL);
    if (cfg) CHECK_CONTAINS(cfg, "\"async\":\"on\"");
    free(cfg);
    const char *sides[2][2] = {{TMP "on/portable/replica-0/run.json", "\"hash_async\": true"},
                               {TMP "off/portable/replica-0/run.json", "\"hash_async\": false"}};
    for (int i = 0; i < 2; i++) {
        char *r = dt_read_file(sides[i][0], NULL);
        CHECK(r != NULL);
        if (r) CHECK_CONTAINS(r, sides[i][1]);
        free(r);
    }
    run_ok(TMP "off4", "--set hash.async=off --set hash.every=4 --set report.snapshots=3", 0);
    run_ok(TMP "on4", "--set hash.async=on --set hash.every=4 --set report.snapshots=3", 0);
    check_same_runs(TMP "off4", TMP "on4");
    check_same_hashed_steps(TMP "off4", TMP "on4", 30);
    CHECK_INT_EQ(count_lines(TMP "on4/portable/replica-0/trace.csv"), 1 + 9);
    /* auto is off on the CPU: the same files again */
    run_ok(TMP "auto4", "--set hash.every=4 --set report.snapshots=3", 0);
    check_same_runs(TMP "off4", TMP "auto4");
    char *r = dt_read_file(TMP "auto4/portable/replica-0/run.json", NULL);
    CHECK(r != NULL);
    if (r) CHECK_CONTAINS(r, "\"hash_async\": false");
    free(r);
    /* the snapshots' digests are the trace's: `compare` checks them against it */
    int rc = dt_run_capture(out, sizeof out, "'%s' compare '%s' '%s'", EXE,
                            TMP "on4/portable/replica-0", TMP "off4/portable/replica-0");
    if (rc != 0) fprintf(stderr, "%s\n", out);
    CHECK_INT_EQ(rc, 0);
}

/* A loss that turns infinite at step 14 (learning rate 10 with weight decay 1 makes the
 * weights grow ninefold a step) under hash.every=5: step 14 is hashed because it failed,
 * the trace ends there, identically with and without the pipeline. */
DT_TEST(async_nonfinite_loss)
{
    const char *common = "--set train.optimizer.lr=10 --set train.optimizer.weight_decay=1 "
                         "--set train.steps=200 --set hash.every=5";
    char extra[512];
    snprintf(extra, sizeof extra, "%s --set hash.async=off", common);
    run_ok(TMP "nan_off", extra, 1);
    snprintf(extra, sizeof extra, "%s --set hash.async=on", common);
    run_ok(TMP "nan_on", extra, 1);
    CHECK_CONTAINS(out, "replica stopped");
    check_same_runs(TMP "nan_off", TMP "nan_on");
    const char *trace = TMP "nan_on/portable/replica-0/trace.csv";
    int rows = count_lines(trace) - 1;
    char f[80] = "", loss[80] = "";
    CHECK_INT_EQ(dt_csv_field(f, sizeof f, trace, rows - 1, 0), 0);
    CHECK_INT_EQ(dt_csv_field(loss, sizeof loss, trace, rows - 1, 1), 0);
    CHECK(atoi(f) % 5 != 0); /* hashed for failing, not by hash.every */
    CHECK(!isfinite(atof(loss)));
    char *r = dt_read_file(TMP "nan_on/portable/replica-0/run.json", NULL);
    CHECK(r != NULL);
    if (r) {
        CHECK_CONTAINS(r, "\"state\": \"failed\"");
        char want[64];
        snprintf(want, sizeof want, "\"steps_completed\": %s", f);
        CHECK_CONTAINS(r, want);
    }
    free(r);
}

/* SIGINT mid-run with the pipeline on: exit 130 and a trace that is exactly the first rows
 * of an uninterrupted synchronous run up to the same step (every hashed step drained). The
 * signal comes after step 6 (the signal hook: the handler a user's Ctrl-C reaches). */
DT_TEST(async_sigint_prefix)
{
    const char *dir = TMP "sigint";
    int rc = dt_run_capture(out, sizeof out,
                            "rm -rf '%s'; DETRAIN_TEST_SIGNAL_AFTER_STEP=6 '%s' run '%s' --out "
                            "'%s' --quiet --set replicas=1 --set hash.async=on --set "
                            "train.steps=1000000 2>&1",
                            dir, EXE, TINY, dir);
    CHECK_INT_EQ(rc, 130);
    const char *trace = TMP "sigint/portable/replica-0/trace.csv";
    int rows = count_lines(trace) - 1;
    CHECK_INT_EQ(rows, 7); /* steps 0..6 */
    char last[80] = "";
    CHECK_INT_EQ(dt_csv_field(last, sizeof last, trace, rows - 1, 0), 0);
    CHECK_INT_EQ(atoi(last), rows - 1); /* steps 0..last, none missing */
    char *r = dt_read_file(TMP "sigint/portable/replica-0/run.json", NULL);
    CHECK(r != NULL);
    if (r) {
        CHECK_CONTAINS(r, "\"state\": \"interrupted\"");
        char want[64];
        snprintf(want, sizeof want, "\"steps_completed\": %s", last);
        CHECK_CONTAINS(r, want);
    }
    free(r);
    char extra[256];
    snprintf(extra, sizeof extra, "--set hash.async=off --set train.steps=%d", atoi(last));
    run_ok(TMP "sigint_ref", extra, 0);
    check_same_runs(TMP "sigint_ref", dir);
}

/* ---- CUDA ---------------------------------------------------------------------------------- */

/* The CUDA backend's copy_out returns the exact bytes of every tensor, in order, through
 * pinned memory, also with several copies in flight; and synchronize waits for queued work
 * (a download after it sees the last op's result). */
DT_TEST(cuda_copy_out_exact)
{
    struct dt_backend *g = gpu_or_skip();
    check_copy_out(g, "cuda copy_out");
    dt_backend_synchronize(g);
    dt_backend_destroy(g);
}

/* A weight overwritten by a kernel right after copy_out_begin does not change what arrives:
 * the copy reads a staging snapshot taken in stream order, not the live weight. The tensor
 * is large (256 MiB) so the device-to-host copy is still running when the kernel does. */
DT_TEST(cuda_copy_out_snapshot)
{
    struct dt_backend *g = gpu_or_skip();
    const int64_t n = (int64_t)1 << 26;
    const size_t bytes = (size_t)n * sizeof(float);
    float *h = dt_xmalloc(bytes), *now = dt_xmalloc(bytes);
    fill(h, n, 1.0);
    float *w = dt_backend_alloc(g, bytes), *v = dt_backend_alloc(g, bytes);
    float *gr = dt_backend_alloc(g, bytes);
    dt_backend_upload(g, w, h, bytes);
    dt_backend_upload(g, gr, h, bytes);
    float *host = dt_backend_host_alloc(g, bytes);
    struct dt_policy pol = level(DT_LEVEL_PORTABLE);
    for (int round = 0; round < 3; round++) {
        poison(host, n);
        dt_backend_download(g, h, w, bytes); /* what the snapshot must hold */
        const void *srcs[] = {w};
        dt_backend_copy_out_begin(g, host, srcs, &bytes, 1);
        /* queued right behind the snapshot: w -= 1.0 * (w + g) changes every element */
        CHECK_INT_EQ(dt_sgd_update(g, w, v, gr, n, 1.0f, 0.0f, 0.0f, &pol), DT_OK);
        dt_backend_copy_out_wait(g);
        CHECK(same_bits(host, h, n, "cuda snapshot"));
        dt_backend_synchronize(g);
        dt_backend_download(g, now, w, bytes);
        CHECK(memcmp(now, h, bytes) != 0); /* the kernel did overwrite it */
    }
    dt_backend_host_free(g, host);
    dt_backend_free(g, w);
    dt_backend_free(g, v);
    dt_backend_free(g, gr);
    free(h);
    free(now);
    dt_backend_destroy(g);
}

/* A model on the GPU hashed through the pipeline (staging buffer, pinned slots, the
 * worker thread) writes the trace the CPU's synchronous path writes for the same weights. */
DT_TEST(cuda_pipeline_matches_cpu)
{
    struct dt_backend *g = gpu_or_skip(), *c = cpu(2);
    char a[DT_DIGEST_HEX], b[DT_DIGEST_HEX];
    run_pipeline(a, c, TMP "gpu_ref", false, 40, 3);
    run_pipeline(b, g, TMP "gpu_async", true, 40, 3);
    check_same_files(TMP "gpu_ref", TMP "gpu_async");
    CHECK_STR_EQ(a, b);
    run_pipeline(b, g, TMP "gpu_sync", false, 40, 3);
    check_same_files(TMP "gpu_ref", TMP "gpu_sync");
    /* the tree digest: computed on the device, only the digests copied back */
    run_pipeline_digest(a, c, TMP "gpu_tree_ref", false, 40, 3, TREE);
    run_pipeline_digest(b, g, TMP "gpu_tree_async", true, 40, 3, TREE);
    check_same_files(TMP "gpu_tree_ref", TMP "gpu_tree_async");
    CHECK_STR_EQ(a, b);
    dt_backend_destroy(g);
    dt_backend_destroy(c);
}

DT_TEST_MAIN(DT_CASE(copy_out_cpu_in_order), DT_CASE(copy_out_fallback),
             DT_CASE(profile_synchronizes), DT_CASE(pipeline_matches_sync),
             DT_CASE(pipeline_tree_digests), DT_CASE(pipeline_write_error),
             DT_CASE(async_trace_identical), DT_CASE(async_nonfinite_loss),
             DT_CASE(async_sigint_prefix), DT_CASE(cuda_copy_out_exact),
             DT_CASE(cuda_copy_out_snapshot), DT_CASE(cuda_pipeline_matches_cpu))
