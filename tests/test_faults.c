/* Faults that lose nothing (issue 9; harness/run/train.c, nets/dispatch.c first_nonfinite,
 * nets/model.c dt_model_grad_status).
 * unit: the CPU op first_nonfinite (NaN/Inf at the first and last element, -0 and
 *   subnormals finite, n not a multiple of the vector width, 1 and 3 threads) and the host
 *   fallback of the wrapper; a fixed-point bias-gradient overflow names the tensor.
 * e2e: small real runs of tests/data/tiny.yaml (2 replicas, 30 steps, every step hashed)
 *   with the test-only hook DETRAIN_TEST_POISON: a NaN weight or gradient at step k stops
 *   replica 0 at k naming the tensor (trace rows 0..k, manifest reason, exit 1) while
 *   replica 1 completes; with train.check_finite off the NaN goes on to the next step;
 *   a trace.csv that is a link to /dev/full (ENOSPC) and an --out under a regular file
 *   stop the run with exit 2 naming the path. */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "core/util.h"
#include "nets/backend.h"
#include "nets/backend_impl.h" /* white-box: the host fallback (an ops table without the op) */
#include "nets/model.h"
#include "nets/step.h"
#include "run_helper.h"

#define EXE DT_DETRAIN_EXE
#define TINY DT_TEST_DATA_DIR "/tiny.yaml"
#define TMP DT_TEST_TMP_DIR "/faults."

static char out[65536];

static struct dt_backend *cpu(int threads)
{
    struct dt_backend *be = NULL;
    struct dt_backend_options o = {DT_BACKEND_CPU, threads, 0};
    CHECK_INT_EQ(dt_backend_create(&be, &o, NULL), DT_OK);
    return be;
}

/* The wrapper's answer for v[0, n) on `be` (copied into backend memory first). */
static int64_t scan(struct dt_backend *be, const float *v, int64_t n)
{
    float *d = dt_backend_alloc(be, (size_t)(n ? n : 1) * sizeof(float));
    if (n) dt_backend_upload(be, d, v, (size_t)n * sizeof(float));
    int64_t r = dt_backend_first_nonfinite(be, d, n);
    dt_backend_free(be, d);
    return r;
}

/* Every case on one backend: sizes around the vector width and the pool's 4096 grain. */
static void check_scans(struct dt_backend *be)
{
    static const int64_t sizes[] = {1, 7, 8, 9, 31, 4095, 4096, 4097, 3 * 4096 + 5, 100003};
    float *v = dt_xmalloc(100003 * sizeof(float));
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        const int64_t n = sizes[k];
        for (int64_t i = 0; i < n; i++)
            v[i] = i % 3 == 0 ? -0.0f : i % 3 == 1 ? 1e-45f /* subnormal */ : -3.4e38f;
        CHECK_INT_EQ(scan(be, v, n), -1); /* -0, subnormals and FLT_MAX-sized: finite */
        v[n - 1] = NAN;                   /* at the last element */
        CHECK_INT_EQ(scan(be, v, n), n - 1);
        v[n - 1] = -INFINITY;
        CHECK_INT_EQ(scan(be, v, n), n - 1);
        if (n > 2) { /* the first of several, across the threads' slices */
            v[n / 2] = INFINITY;
            CHECK_INT_EQ(scan(be, v, n), n / 2);
            v[1] = -NAN;
            CHECK_INT_EQ(scan(be, v, n), 1);
        }
        v[0] = NAN;
        CHECK_INT_EQ(scan(be, v, n), 0);
    }
    CHECK_INT_EQ(scan(be, v, 0), -1);
    free(v);
}

DT_TEST(first_nonfinite_cpu)
{
    const int threads[] = {1, 3};
    for (int t = 0; t < 2; t++) {
        struct dt_backend *be = cpu(threads[t]);
        if (!be) return;
        CHECK(be->ops->first_nonfinite != NULL); /* the threaded op, not the fallback */
        check_scans(be);
        dt_backend_destroy(be);
    }
}

/* A backend without the op (a NULL member): the wrapper's host scan. */
DT_TEST(first_nonfinite_fallback)
{
    struct dt_backend *be = cpu(2);
    if (!be) return;
    struct dt_backend_ops ops = *be->ops;
    const struct dt_backend_ops *keep = be->ops;
    ops.first_nonfinite = NULL;
    be->ops = &ops;
    check_scans(be);
    be->ops = keep;
    dt_backend_destroy(be);
}

/* Several tensors in one call: the first tensor (in the order given) holding a NaN or Inf,
 * and its first such element; none -> false; an empty tensor is finite. On the CPU (no
 * batched op: one scan per tensor) and with neither scan op (the host scan per tensor). */
static void check_many(struct dt_backend *be)
{
    enum { T = 5, N = 300 };
    float *buf[T];
    const float *p[T];
    int64_t n[T] = {N, N, 0, N, N};
    for (int i = 0; i < T; i++) {
        buf[i] = dt_xcalloc(N, sizeof(float));
        p[i] = buf[i];
    }
    int which = -7;
    int64_t index = -7;
    CHECK(!dt_backend_first_nonfinite_many(be, p, n, T, &which, &index));
    CHECK(!dt_backend_first_nonfinite_many(be, p, n, 0, &which, &index));
    buf[4][2] = NAN;
    buf[3][250] = INFINITY;
    buf[3][251] = NAN;
    buf[2][0] = NAN; /* outside its (empty) tensor: not scanned */
    CHECK(dt_backend_first_nonfinite_many(be, p, n, T, &which, &index));
    CHECK_INT_EQ(which, 3);
    CHECK_INT_EQ(index, 250);
    buf[1][N - 1] = -INFINITY;
    CHECK(dt_backend_first_nonfinite_many(be, p, n, T, &which, &index));
    CHECK_INT_EQ(which, 1);
    CHECK_INT_EQ(index, N - 1);
    for (int i = 0; i < T; i++) free(buf[i]);
}

DT_TEST(first_nonfinite_many)
{
    struct dt_backend *be = cpu(2);
    if (!be) return;
    check_many(be);
    struct dt_backend_ops ops = *be->ops;
    const struct dt_backend_ops *keep = be->ops;
    ops.first_nonfinite = NULL;
    ops.first_nonfinite_many = NULL;
    be->ops = &ops;
    check_many(be);
    be->ops = keep;
    dt_backend_destroy(be);
}

/* An MLP 8 -> 4 -> 10 whose hidden unit 0 is 0.5 on every example and whose dense1.weight
 * row 0 is (+3e38, -3e38, ...): the logits stay finite, but every example labelled 1 sends
 * 6e38 / B back to unit 0, and the fixed-point sum of dense0.bias's column 0 leaves the
 * float range. The model's error names that gradient, the op's own detail (the column, from
 * the backend's op error record, not stderr) and the step; the record is taken. */
DT_TEST(overflow_names_tensor)
{
    struct dt_backend *be = cpu(2);
    if (!be) return;
    const int64_t hidden[1] = {4}, B = 8;
    struct dt_model *m = NULL;
    CHECK_INT_EQ(dt_mlp_create(&m, be, 8, hidden, 1, 10, B, NULL), DT_OK);
    if (!m) return;
    dt_model_init(m, 1, 0);
    float w0[8 * 4], b0[4] = {0.5f, 0, 0, 0}, w1[4 * 10];
    memset(w0, 0, sizeof w0);
    memset(w1, 0, sizeof w1);
    for (int k = 0; k < 10; k++) w1[k] = k == 0 ? 3e38f : -3e38f;
    dt_backend_upload(be, m->params[0].w, w0, sizeof w0);
    dt_backend_upload(be, m->params[1].w, b0, sizeof b0);
    dt_backend_upload(be, m->params[2].w, w1, sizeof w1);
    float x[8 * 8];
    uint8_t y[8];
    for (int i = 0; i < 64; i++) x[i] = 1.0f;
    memset(y, 1, sizeof y);
    struct dt_policy pol;
    dt_policy_from_level(&pol, DT_LEVEL_PORTABLE); /* atomics: fixed_point */
    struct dt_sgd_options sgd = {.lr = 0.1f, .momentum = 0.0f, .weight_decay = 0.0f};
    float loss;
    CHECK_INT_EQ(dt_model_train_step(m, x, y, B, &sgd, &pol, &loss), DT_ERR_NUMERIC);
    CHECK_INT_EQ(m->err.status, DT_ERR_NUMERIC);
    CHECK_CONTAINS(m->err.msg, "dense0.bias gradient: ");
    CHECK_CONTAINS(m->err.msg, "fixed-point sum of column 0 overflows the float range");
    CHECK_CONTAINS(m->err.msg, " at step 1");
    CHECK(!dt_backend_take_op_error(be, NULL));
    dt_model_destroy(m);
    dt_backend_destroy(be);
}

/* An op the backend lacks (a NULL member) is refused by name: DT_ERR_UNSUPPORTED, and the
 * op error record says which backend and op; a present op leaves no record. */
DT_TEST(missing_op_refused_by_name)
{
    struct dt_backend *be = cpu(1);
    if (!be) return;
    struct dt_backend_ops ops = *be->ops;
    const struct dt_backend_ops *keep = be->ops;
    ops.relu_forward = NULL;
    be->ops = &ops;
    struct dt_policy pol;
    dt_policy_from_level(&pol, DT_LEVEL_PORTABLE);
    float x[4] = {-1, 2, -3, 4}, y[4];
    CHECK_INT_EQ(dt_relu_forward(be, y, x, 4, &pol), DT_ERR_UNSUPPORTED);
    struct dt_error e;
    CHECK(dt_backend_take_op_error(be, &e));
    CHECK_INT_EQ(e.status, DT_ERR_UNSUPPORTED);
    CHECK_CONTAINS(e.msg, "backend 'cpu' has no op relu_forward");
    CHECK(!dt_backend_take_op_error(be, NULL)); /* taken */
    CHECK(dt_backend_missing_op(be) != NULL);
    be->ops = keep;
    CHECK_INT_EQ(dt_relu_forward(be, y, x, 4, &pol), DT_OK);
    CHECK(!dt_backend_take_op_error(be, NULL));
    dt_backend_destroy(be);
}

/* ---- e2e ------------------------------------------------------------------------------ */

static bool have_data(void) { return dt_path_exists("/usr/share/datasets/fashion-mnist"); }

/* `detrain run` of tiny.yaml into dir (removed first) with `env` and extra arguments. */
static int run(const char *env, const char *dir, const char *extra)
{
    return dt_run_capture(out, sizeof out,
                          "rm -rf '%s' && DETRAIN_GNUPLOT=none %s '%s' run '%s' --out '%s' "
                          "--quiet %s",
                          dir, env, EXE, TINY, dir, extra);
}

/* The replica's trace.csv has rows for the steps 0, every, 2 every, ... below `last`, and
 * for `last`, exactly (in order). */
static void check_trace_steps(const char *dir, const char *cell, int r, int every, int last)
{
    char path[1024], f[64];
    snprintf(path, sizeof path, "%s/%s/replica-%d/trace.csv", dir, cell, r);
    int row = 0;
    for (int step = 0; step <= last; step++) {
        if (step % every != 0 && step != last) continue;
        CHECK_INT_EQ(dt_csv_field(f, sizeof f, path, row++, 0), 0);
        char want[32];
        snprintf(want, sizeof want, "%d", step);
        CHECK_STR_EQ(f, want);
    }
    CHECK(dt_csv_field(f, sizeof f, path, row, 0) != 0);
}

static void check_trace_rows(const char *dir, const char *cell, int r, int last)
{
    check_trace_steps(dir, cell, r, 1, last);
}

static void check_manifest(const char *dir, const char *cell, int r, const char *state,
                           const char *reason)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s/replica-%d/run.json", dir, cell, r);
    char *text = dt_read_file(path, NULL);
    CHECK(text != NULL);
    if (!text) return;
    char want[1200];
    snprintf(want, sizeof want, "\"state\": \"%s\", \"reason\": \"%s", state, reason);
    CHECK_CONTAINS(text, want);
    free(text);
}

/* A NaN written into dense1.weight after step 12's update: replica 0 stops at step 12;
 * under hash.every 5 its trace ends at step 10, the last hashed step (the failing step's row
 * comes only when it is hashed: see nan_gradient_stops_replica); replica 1 runs all 30 steps. */
DT_TEST(nan_weight_stops_replica)
{
    if (!have_data()) DT_SKIP("no Fashion-MNIST installed");
    const char *dir = TMP "nan_weight";
    CHECK_INT_EQ(run("DETRAIN_TEST_POISON=12:dense1.weight", dir, "--set hash.every=5"), 1);
    const char *reason = "non-finite weight in dense1.weight (element 0) at step 12; "
                         "replica stopped";
    CHECK_CONTAINS(out, reason);
    check_manifest(dir, "portable", 0, "failed", reason);
    check_manifest(dir, "portable", 1, "completed", "");
    check_trace_steps(dir, "portable", 0, 5, 10); /* 0, 5, 10: step 12 is not hashed */
    check_trace_steps(dir, "portable", 1, 5, 30);
}

/* A NaN in dense0.bias's gradient after step 7 (the update used the true one): stopped at
 * 7, naming the gradient; every step is hashed, so the trace ends with step 7's row. */
DT_TEST(nan_gradient_stops_replica)
{
    if (!have_data()) DT_SKIP("no Fashion-MNIST installed");
    const char *dir = TMP "nan_grad";
    CHECK_INT_EQ(run("DETRAIN_TEST_POISON=7:dense0.bias:g", dir, ""), 1);
    const char *reason = "non-finite gradient in dense0.bias (element 0) at step 7";
    check_manifest(dir, "portable", 0, "failed", reason);
    check_manifest(dir, "portable", 1, "completed", "");
    check_trace_rows(dir, "portable", 0, 7);
    check_trace_rows(dir, "portable", 1, 30);
}

/* train.check_finite off: nothing stops step 7; the NaN weight reaches step 8's logits.
 * Under fast (float atomics) the existing loss stop reports it; under portable the
 * fixed-point bias gradient refuses the NaN and the model's error names the tensor and the
 * op's detail. */
DT_TEST(check_finite_off)
{
    if (!have_data()) DT_SKIP("no Fashion-MNIST installed");
    const char *dir = TMP "unchecked";
    CHECK_INT_EQ(run("DETRAIN_TEST_POISON=7:dense1.weight", dir,
                     "--set train.check_finite=false --set policies=[fast]"),
                 1);
    check_manifest(dir, "fast", 0, "failed", "training loss is NaN at step 8");
    check_manifest(dir, "fast", 1, "completed", "");
    check_trace_rows(dir, "fast", 0, 8);
    CHECK_INT_EQ(run("DETRAIN_TEST_POISON=7:dense1.weight", dir, "--set train.check_finite=false"),
                 1);
    /* the op's own detail (its error record), in run.json: which row and column */
    check_manifest(dir, "portable", 0, "failed",
                   "dense1.bias gradient: non-finite input (nan) at row 0, column 0 at step 8");
    CHECK_CONTAINS(out, "at step 8; replica stopped");
    check_manifest(dir, "portable", 1, "completed", "");
    check_trace_rows(dir, "portable", 0, 7); /* step 8 never finished */
    /* math: exact refuses the NaN operand in step 8's forward product: named by its layer's
     * weight, as portable names the gradient (not "column 0 of B" alone) */
    CHECK_INT_EQ(run("DETRAIN_TEST_POISON=7:dense1.weight", dir,
                     "--set train.check_finite=false --set 'policies=[{base: portable, math: "
                     "exact, name: p_exact}]'"),
                 1);
    check_manifest(dir, "p_exact", 0, "failed",
                   "dense1.weight forward: non-finite input in column 0 of B at step 8");
}

/* A file stops growing mid-run (RLIMIT_FSIZE of 6 KiB, as a full disk would stop it;
 * SIGXFSZ ignored, so the write returns EFBIG): tensors.csv (10 KB at the end) outgrows it
 * first; the config, trace.csv (2.5 KB) and the manifests stay under it. The experiment's
 * run.json names the build's flags and the output path four times: ~2.8 KB from a short
 * folder, past 3 KiB from CI's sanitizer build in a deep one (a 3 KiB limit left it
 * "running" there), so the limit leaves it room. The run stops with exit 2 naming the file,
 * and the replica's and the experiment's run.json say so. (A link planted in place of an
 * output is refused before the run: tests/test_folders.c.) */
DT_TEST(write_fails_midrun)
{
    if (!have_data()) DT_SKIP("no Fashion-MNIST installed");
    const char *dir = TMP "efbig";
    CHECK_INT_EQ(dt_run_capture(out, sizeof out,
                                "rm -rf '%s' && trap '' XFSZ && DETRAIN_GNUPLOT=none "
                                "prlimit --fsize=6144 '%s' run '%s' --out '%s' --quiet "
                                "--set report.snapshots=0 --set replicas=1",
                                dir, EXE, TINY, dir),
                 2);
    CHECK_CONTAINS(out, "faults.efbig/portable/replica-0/tensors.csv: write failed: File too "
                        "large");
    check_manifest(dir, "portable", 0, "failed",
                   DT_TEST_TMP_DIR "/faults.efbig/portable/"
                                   "replica-0/tensors.csv: write failed");
    char path[1024];
    snprintf(path, sizeof path, "%s/run.json", dir);
    char *text = dt_read_file(path, NULL);
    CHECK(text != NULL);
    if (text) CHECK_CONTAINS(text, "\"status\": \"failed\", \"message\": \"");
    free(text);
}

/* A full disk at the very first write (RLIMIT_FSIZE of 1 KiB: run.json is larger): the run
 * stops with exit 2 naming the file and leaves no half result, so the next run into the same
 * folder starts. A folder that an older build left so (detrain's run.json alone, "running",
 * no replica, no config.json) is taken as empty too. */
DT_TEST(first_write_fails)
{
    if (!have_data()) DT_SKIP("no Fashion-MNIST installed");
    const char *dir = TMP "first_write", *stuck = TMP "stuck";
    CHECK_INT_EQ(dt_run_capture(out, sizeof out,
                                "rm -rf '%s' && trap '' XFSZ && DETRAIN_GNUPLOT=none "
                                "prlimit --fsize=1024 '%s' run '%s' --out '%s' --quiet "
                                "--set report.snapshots=0 --set replicas=1",
                                dir, EXE, TINY, dir),
                 2);
    CHECK_CONTAINS(out, "faults.first_write/run.json");
    CHECK_INT_EQ(dt_run_capture(out, sizeof out, "ls -A '%s' | wc -l", dir), 0);
    CHECK_STR_EQ(out, "0\n");
    CHECK_INT_EQ(dt_run_capture(out, sizeof out,
                                "DETRAIN_GNUPLOT=none '%s' run '%s' --out '%s' --quiet --set "
                                "report.snapshots=0 --set replicas=1 --set train.steps=3 "
                                "--set report.overhead_samples=0",
                                EXE, TINY, dir),
                 0);
    CHECK_INT_EQ(dt_run_capture(out, sizeof out,
                                "rm -rf '%s' && mkdir -p '%s' && printf '%%s' '{\"tool\": "
                                "\"detrain\", \"status\": \"running\", \"message\": \"\", "
                                "\"replicas\": []}' > '%s/run.json' && DETRAIN_GNUPLOT=none '%s' "
                                "run '%s' --out '%s' --quiet --set report.snapshots=0 --set "
                                "replicas=1 --set train.steps=3 --set report.overhead_samples=0",
                                stuck, stuck, stuck, EXE, TINY, stuck),
                 0);
    CHECK(dt_path_exists(TMP "stuck/config.json"));
}

/* --out under a regular file: refused before training (as root too, unlike a folder
 * without write permission, which root may write anyway), exit 2 naming the path. */
DT_TEST(unwritable_out)
{
    if (!have_data()) DT_SKIP("no Fashion-MNIST installed");
    const char *file = TMP "plainfile";
    CHECK_INT_EQ(dt_run_capture(out, sizeof out, "rm -rf '%s' && echo x > '%s'", file, file), 0);
    CHECK_INT_EQ(dt_run_capture(out, sizeof out,
                                "DETRAIN_GNUPLOT=none '%s' run '%s' --out '%s/run' --quiet", EXE,
                                TINY, file),
                 2);
    CHECK_CONTAINS(out, "faults.plainfile: exists and is not a folder");
    CHECK(strstr(out, "step") == NULL); /* nothing trained */
}

/* A file-size limit (ulimit -f) without the shell's `trap '' XFSZ`: by default the kernel
 * kills a process writing past it (SIGXFSZ, exit 153, no message, a temporary file left).
 * detrain ignores the signal, so each command that writes says which file failed, exits 2
 * and leaves nothing behind: a run's new folder is gone again (so a rerun starts), an
 * export leaves no temporary file. */
DT_TEST(file_size_limit_no_trap)
{
    if (!have_data()) DT_SKIP("no Fashion-MNIST installed");
    const char *dir = TMP "xfsz";
    CHECK_INT_EQ(dt_run_capture(out, sizeof out,
                                "rm -rf '%s' && DETRAIN_GNUPLOT=none prlimit --fsize=1024 '%s' run "
                                "'%s' --out '%s' --quiet --set report.snapshots=0 --set replicas=1",
                                dir, EXE, TINY, dir),
                 2);
    CHECK_CONTAINS(out, "faults.xfsz/run.json.tmp-");
    CHECK_CONTAINS(out, "write failed: File too large");
    CHECK(!dt_path_exists(dir)); /* the folder it made, removed again */
    CHECK_INT_EQ(dt_run_capture(out, sizeof out,
                                "DETRAIN_GNUPLOT=none '%s' run '%s' --out '%s' --quiet --set "
                                "replicas=1 --set train.steps=3 --set report.overhead_samples=0",
                                EXE, TINY, dir),
                 0);
    CHECK_INT_EQ(dt_run_capture(out, sizeof out,
                                "rm -f '%s.st' && prlimit --fsize=1024 '%s' export "
                                "'%s/portable/replica-0' --safetensors '%s.st'",
                                dir, EXE, dir, dir),
                 2);
    CHECK_CONTAINS(out, "File too large");
    CHECK_INT_EQ(dt_run_capture(out, sizeof out, "ls '%s'* | grep -c tmp", TMP "xfsz.st"), 1);
    CHECK_STR_EQ(out, "0\n");
}

/* A disk that fills between the first two writes (a tmpfs of 8 KiB: run.json fits,
 * config.json does not): the start is undone -- run.json removed and not written again as
 * "failed" -- so the folder is as it was (here: absent) and the next run takes it. Needs a
 * private mount (unshare -rm), else skipped. */
DT_TEST(disk_full_at_second_write)
{
    if (!have_data()) DT_SKIP("no Fashion-MNIST installed");
    const char *mnt = TMP "tmpfs";
    int rc = dt_run_capture(out, sizeof out,
                            "mkdir -p '%s' && unshare -rm sh -c 'mount -t tmpfs -o size=8k tmpfs "
                            "\"%s\" && echo mounted'",
                            mnt, mnt);
    if (rc != 0 || !strstr(out, "mounted")) DT_SKIP("no private tmpfs mount here (unshare -rm)");
    rc = dt_run_capture(out, sizeof out,
                        "unshare -rm sh -c 'mount -t tmpfs -o size=8k tmpfs \"%s\" && "
                        "DETRAIN_GNUPLOT=none \"%s\" run \"%s\" --out \"%s/x\" --quiet --set "
                        "report.snapshots=0 --set replicas=1; echo \"rc=$?\"; ls -A \"%s\"; "
                        "ls -A \"%s/x\" 2>/dev/null | sed \"s/^/inside: /\"'",
                        mnt, EXE, TINY, mnt, mnt, mnt);
    fprintf(stderr, "%s\n", out);
    CHECK_CONTAINS(out, "config.json");
    CHECK_CONTAINS(out, "No space left on device");
    CHECK_CONTAINS(out, "rc=2");
    CHECK(strstr(out, "inside: ") == NULL);
    CHECK(strstr(out, "\nx\n") == NULL);
}

DT_TEST_MAIN(DT_CASE(first_nonfinite_cpu), DT_CASE(first_nonfinite_fallback),
             DT_CASE(first_nonfinite_many), DT_CASE(overflow_names_tensor),
             DT_CASE(missing_op_refused_by_name), DT_CASE(nan_weight_stops_replica),
             DT_CASE(nan_gradient_stops_replica), DT_CASE(check_finite_off),
             DT_CASE(write_fails_midrun), DT_CASE(first_write_fails), DT_CASE(unwritable_out),
             DT_CASE(file_size_limit_no_trap), DT_CASE(disk_full_at_second_write))
