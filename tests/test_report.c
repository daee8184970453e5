/* The report (harness/analyze/report.c) on experiment folders built by hand: config.json from a
 * small YAML, and per replica trace.csv, tensors.csv, metrics.csv, times.csv,
 * predictions.csv and snapshots whose weights are chosen so that every figure of
 * summary.csv, cells.csv and drift.csv is known in advance (worked out in the comments). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "core/util.h"
#include "harness/setup/config.h"
#include "harness/record/hash.h"
#include "harness/record/layout.h"
#include "harness/analyze/report.h"
#include "harness/record/snapshot.h"
#include "harness/record/trace.h"
#include "run_helper.h"

/* ---- the synthetic model: fc1.weight (4 values) and fc1.bias (2 values) ------------------- */

static const char *const tensor_names[2] = {"fc1.weight", "fc1.bias"};
static const int64_t tensor_counts[2] = {4, 2};

struct weights {
    float w[4], b[2];
};

/* Cell kinds of the fixtures. */
enum kind {
    KIND_FAST,     /* vary none, fast: replicas part at steps 1 and 2 (below) */
    KIND_PORTABLE, /* vary none, portable: every replica has the same weights */
    KIND_INIT,     /* vary init: replica r starts (and stays) at bias (3 + r, 0) */
};

/* Weights of replica r of a cell of `kind` after `step` (steps 0..4). Weights are 0 except
 * where stated.
 *   FAST  r0: bias (3,0) up to step 3, (3,4) at step 4
 *         r1: bias (3,0) at step 0, (3,4) at steps 1-3, (3,0) at step 4
 *         r2: bias (3,0) at steps 0-1; weight[0] = 1 at steps 2-3; bias (0,4) at step 4
 *   PORTABLE: FAST r0 for every replica.  INIT: bias (3 + r, 0) at every step. */
static struct weights state(enum kind kind, int r, int step)
{
    struct weights s = {{0, 0, 0, 0}, {3, 0}};
    if (kind == KIND_INIT) {
        s.b[0] = 3.0f + (float)r;
        return s;
    }
    if (kind == KIND_PORTABLE) r = 0;
    if (r == 0 && step == 4) s.b[1] = 4;
    if (r == 1 && step >= 1 && step <= 3) s.b[1] = 4;
    if (r == 2 && (step == 2 || step == 3)) s.w[0] = 1;
    if (r == 2 && step == 4) s.b[0] = 0, s.b[1] = 4;
    return s;
}

static void tensor_hex(char hex[DT_DIGEST_HEX], const float *v, int64_t n)
{
    uint8_t d[DT_DIGEST_BYTES];
    dt_sha256_f32(d, v, n);
    dt_digest_hex(hex, d);
}

/* The model digest harness/hash would record for these weights. */
static void model_hex(char hex[DT_DIGEST_HEX], const struct weights *s)
{
    uint8_t d[2][DT_DIGEST_BYTES], m[DT_DIGEST_BYTES];
    dt_sha256_f32(d[0], s->w, 4);
    dt_sha256_f32(d[1], s->b, 2);
    dt_model_digest(m, tensor_names, (const uint8_t(*)[DT_DIGEST_BYTES])d, 2);
    dt_digest_hex(hex, m);
}

static void write_snapshot(const char *rdir, int64_t step, const struct weights *s)
{
    char path[2048];
    struct dt_error err = {0};
    const float *data[2] = {s->w, s->b};
    dt_snapshot_path(path, sizeof path, rdir, step);
    char sdir[2048];
    dt_snapshot_dir(sdir, sizeof sdir, rdir);
    CHECK(dt_mkdir_p(sdir, &err) == DT_OK);
    if (dt_snapshot_write(path, step, 2, tensor_names, tensor_counts, data, &err) != DT_OK)
        fprintf(stderr, "dt_snapshot_write: %s\n", err.msg);
}

/* ---- files ------------------------------------------------------------------------------ */

static FILE *open_w(const char *dir, const char *name)
{
    char path[2048];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "cannot create %s\n", path);
        exit(1);
    }
    return f;
}

static void sh(const char *fmt, const char *a, const char *b)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, fmt, a, b);
    if (system(cmd) != 0) {
        fprintf(stderr, "command failed: %s\n", cmd);
        exit(1);
    }
}

/* A fresh, empty folder for one case. */
static void case_dir(char *out, size_t size, const char *name)
{
    snprintf(out, size, "%s/report-%s", DT_TEST_TMP_DIR, name);
    sh("rm -rf '%s' && mkdir -p '%s'", out, out);
}

/* The test set: labels 0..4 twice. */
static const uint8_t labels[10] = {0, 1, 2, 3, 4, 0, 1, 2, 3, 4};

struct replica_spec {
    enum kind kind;
    int r;
    int last_step;       /* trace rows 0..last_step; train.steps = 4 */
    const uint8_t *pred; /* NULL: no predictions.csv (not completed) */
    double acc;          /* metrics.csv's final test_acc (consistent with pred) */
    double ms_base;      /* times.csv: step_ms = ms_base + step - 1 */
};

static void write_trace_files(const char *rdir, const struct replica_spec *rs)
{
    FILE *t = open_w(rdir, "trace.csv"), *ts = open_w(rdir, "tensors.csv");
    fprintf(t, "step,loss,model_digest\n");
    fprintf(ts, "step,tensor,sha256\n");
    for (int step = 0; step <= rs->last_step; step++) {
        struct weights s = state(rs->kind, rs->r, step);
        char hex[DT_DIGEST_HEX];
        model_hex(hex, &s);
        fprintf(t, step ? "%d,0.5,%s\n" : "%d,,%s\n", step, hex);
        tensor_hex(hex, s.w, 4);
        fprintf(ts, "%d,fc1.weight,%s\n", step, hex);
        tensor_hex(hex, s.b, 2);
        fprintf(ts, "%d,fc1.bias,%s\n", step, hex);
    }
    fclose(t);
    fclose(ts);
}

static void write_replica(const char *out, const struct dt_experiment *exp, int cell,
                          const struct replica_spec *rs)
{
    char rdir[2048];
    struct dt_error err = {0};
    dt_replica_dir(rdir, sizeof rdir, out, exp, cell, rs->r);
    CHECK(dt_mkdir_p(rdir, &err) == DT_OK);
    write_trace_files(rdir, rs);
    int64_t steps[80];
    int n = dt_snapshot_steps(exp, steps);
    for (int i = 0; i < n; i++) {
        if (steps[i] > rs->last_step) continue;
        struct weights s = state(rs->kind, rs->r, (int)steps[i]);
        write_snapshot(rdir, steps[i], &s);
    }
    FILE *f = open_w(rdir, "times.csv");
    fprintf(f, "step,step_ms,hash_ms\n");
    for (int step = 1; step <= rs->last_step; step++) /* step 1 of replica 0: not hashed */
        fprintf(f, rs->r == 0 && step == 1 ? "%d,%.1f,\n" : "%d,%.1f,0.5\n", step,
                rs->ms_base + step - 1);
    fclose(f);
    f = open_w(rdir, "metrics.csv");
    fprintf(f, "step,test_loss,test_acc,test_ece\n");
    if (rs->pred) fprintf(f, "%d,0.3,%.4f,0.01\n", rs->last_step, rs->acc);
    fclose(f);
    if (!rs->pred) return;
    f = open_w(rdir, "predictions.csv");
    fprintf(f, "index,label,predicted\n");
    for (int i = 0; i < 10; i++) fprintf(f, "%d,%d,%d\n", i, labels[i], rs->pred[i]);
    fclose(f);
}

/* Predictions (labels 0 1 2 3 4 0 1 2 3 4):
 *   fast r0 all right (acc 1.0); r1 wrong at 0 and 9 (0.8); r2 wrong at 0, 5 and 8 (0.7)
 *   portable r0 = r1 wrong at 9 (0.9). */
static const uint8_t pred_fast0[10] = {0, 1, 2, 3, 4, 0, 1, 2, 3, 4};
static const uint8_t pred_fast1[10] = {1, 1, 2, 3, 4, 0, 1, 2, 3, 0};
static const uint8_t pred_fast2[10] = {1, 1, 2, 3, 4, 1, 1, 2, 0, 4};
static const uint8_t pred_port[10] = {0, 1, 2, 3, 4, 0, 1, 2, 3, 0};

static void write_fast_cell(const char *out, const struct dt_experiment *exp, int cell)
{
    const struct replica_spec r[3] = {
        {KIND_FAST, 0, 4, pred_fast0, 1.0, 1.0},
        {KIND_FAST, 1, 4, pred_fast1, 0.8, 2.0},
        {KIND_FAST, 2, 4, pred_fast2, 0.7, 3.0},
    };
    for (int i = 0; i < 3; i++) write_replica(out, exp, cell, &r[i]);
}

/* Replica 2 failed after step 2: trace up to step 2, no predictions. */
static void write_portable_cell(const char *out, const struct dt_experiment *exp, int cell)
{
    const struct replica_spec r[3] = {
        {KIND_PORTABLE, 0, 4, pred_port, 0.9, 10.0},
        {KIND_PORTABLE, 1, 4, pred_port, 0.9, 10.0},
        {KIND_PORTABLE, 2, 2, NULL, 0.0, 10.0},
    };
    for (int i = 0; i < 3; i++) write_replica(out, exp, cell, &r[i]);
}

/* `replicas` completed replicas (0..replicas-1) of the init kind; the others never started. */
static void write_init_cell(const char *out, const struct dt_experiment *exp, int cell,
                            int replicas)
{
    for (int i = 0; i < replicas; i++) {
        const struct replica_spec r = {KIND_INIT, i, 4, pred_port, 0.9, 5.0};
        write_replica(out, exp, cell, &r);
    }
}

/* overhead.csv: 30 alternated pairs for portable. Conclusive: fast 10 ms, portable 19 / 21
 * ms -> medians 10 and 20, ratio exactly 2, every resample ratio in {1.9, 2.0, 2.1}.
 * Inconclusive: fast 9 / 11, portable 11 / 9 -> ratio 1 and an interval around it. */
static void write_overhead(const char *out, bool conclusive)
{
    FILE *f = open_w(out, "overhead.csv");
    fprintf(f, "policy,pair,order,fast_ms,policy_ms\n");
    for (int i = 0; i < 30; i++) {
        double fast = conclusive ? 10.0 : (i % 2 ? 11.0 : 9.0);
        double pol = conclusive ? (i % 2 ? 21.0 : 19.0) : (i % 2 ? 9.0 : 11.0);
        fprintf(f, "portable,%d,%s,%.1f,%.1f\n", i, i % 2 ? "policy_first" : "fast_first", fast,
                pol);
    }
    fclose(f);
}

/* config.json from YAML, as `detrain run` saves it. */
static void write_config(struct dt_experiment *exp, const char *out, const char *yaml)
{
    char ypath[2048];
    snprintf(ypath, sizeof ypath, "%s.yaml", out);
    FILE *y = fopen(ypath, "w");
    fputs(yaml, y);
    fclose(y);
    struct dt_error err = {0};
    if (dt_config_load(exp, ypath, NULL, 0, &err) != DT_OK) {
        fprintf(stderr, "config: %s\n", err.msg);
        exit(1);
    }
    FILE *f = open_w(out, "config.json");
    dt_config_write_json(f, exp);
    fputc('\n', f);
    fclose(f);
}

#define CONFIG_HEAD                                                                                \
    "name: reptest\nmodel:\n  kind: mlp\n  hidden: [4]\ntrain:\n  steps: 4\n  batch: 8\n"          \
    "policies: [fast, portable]\nreplicas: 3\nhash:\n  per_tensor: true\nreport:\n"                \
    "  snapshots: 2\n" /* snapshot steps 0, 1, 4 */

/* One vary setting (cells "fast" and "portable"). */
static void build_single(char *out, size_t size, const char *name)
{
    struct dt_experiment exp;
    case_dir(out, size, name);
    write_config(&exp, out, CONFIG_HEAD);
    CHECK_INT_EQ(exp.n_vary, 1);
    write_fast_cell(out, &exp, 0);
    write_portable_cell(out, &exp, 1);
    write_overhead(out, true);
}

/* Two vary settings, [] and [init]: cells none/fast, none/portable, init/fast,
 * init/portable; init/portable's replica 2 never started (no folder). */
static void build_two(char *out, size_t size, const char *name)
{
    struct dt_experiment exp;
    case_dir(out, size, name);
    write_config(&exp, out, CONFIG_HEAD "vary: [[], [init]]\n");
    CHECK_INT_EQ(exp.n_vary, 2);
    write_fast_cell(out, &exp, 0);
    write_portable_cell(out, &exp, 1);
    write_init_cell(out, &exp, 2, 3);
    write_init_cell(out, &exp, 3, 2);
    write_overhead(out, true);
}

static enum dt_status build_report(const char *dir, const char *gnuplot, struct dt_error *err)
{
    struct dt_report_options opt = {.print_summary = false, .gnuplot = gnuplot, .quiet = true};
    memset(err, 0, sizeof *err);
    enum dt_status st = dt_report_build(dir, &opt, err);
    if (st != DT_OK) fprintf(stderr, "dt_report_build: %s\n", err->msg);
    return st;
}

/* ---- reading the outputs ----------------------------------------------------------------- */

/* Field `col` (by header name) of data row `row` of DIR/FILE; "<missing>" when absent. */
static const char *field(const char *dir, const char *file, int row, const char *col)
{
    static char out[512];
    char path[2048];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    snprintf(out, sizeof out, "<missing>");
    char *text = dt_read_file(path, NULL);
    if (!text) return out;
    int idx = -1, i = 0;
    size_t len = strlen(col);
    for (const char *p = text; *p && *p != '\n'; i++) {
        size_t k = strcspn(p, ",\n");
        if (k == len && strncmp(p, col, len) == 0) idx = i;
        p += k + (p[k] == ',');
    }
    free(text);
    if (idx >= 0 && dt_csv_field(out, sizeof out, path, row, idx) != 0)
        snprintf(out, sizeof out, "<missing>");
    return out;
}

#define CHECK_FIELD(dir, file, row, col, want)                                                     \
    do {                                                                                           \
        const char *got_ = field(dir, file, row, col);                                             \
        if (strcmp(got_, want) != 0) {                                                             \
            fprintf(stderr, "%s:%d: %s row %d column %s: got \"%s\", want \"%s\"\n", __FILE__,     \
                    __LINE__, file, row, col, got_, want);                                         \
            dt_check_failures_++;                                                                  \
        }                                                                                          \
    } while (0)

static int count_lines(const char *path)
{
    char *text = dt_read_file(path, NULL);
    int n = 0;
    for (const char *p = text; p && *p; p++) n += *p == '\n';
    free(text);
    return text ? n : -1;
}

static int count_occurrences(const char *path, const char *needle)
{
    char *text = dt_read_file(path, NULL);
    int n = 0;
    for (const char *p = text; p && (p = strstr(p, needle)) != NULL; p++) n++;
    free(text);
    return n;
}

static bool has_gnuplot(void) { return system("command -v gnuplot >/dev/null 2>&1") == 0; }

/* ---- cases ---------------------------------------------------------------------------------- */

/* Cell fast: final digests all differ (3). First divergence: pair (0,1) at step 1 in fc1.bias
 * (pair (0,2) parts at step 2 in fc1.weight). acc 1.0, 0.8, 0.7: mean 0.833333, sample std
 * sqrt(0.046667 / 2) = 0.152753. Churn: (0,1) 2/10, (0,2) 3/10, (1,2) 3/10 (examples 5, 8,
 * 9): mean 0.266667, max 0.3. Final weights (bias only; norms 5, 3, 4): L2 4, 3, 5, mean 4;
 * relative 4/4, 3/4.5, 5/3.5: mean 1.031746. Per-class accuracy (r0, r1, r2): class 0 (1,
 * .5, 0) std 0.5; classes 1, 2 std 0; class 3 (1, 1, .5) and class 4 (1, .5, 1) std
 * sqrt(1/12) = 0.288675: mean 0.215470, max 0.5. step_ms pooled 1..4, 2..5, 3..6: median
 * 3.5. fast is the baseline.
 * Cell portable: replica 2 stopped after step 2, so 2 completed, 1 distinct digest, and the
 * first divergence is step 3 (the first step its trace lacks), with no tensor. Ratio 2. */
DT_TEST(summary_values)
{
    char dir[1024];
    struct dt_error err;
    build_single(dir, sizeof dir, "summary");
    CHECK(build_report(dir, "none", &err) == DT_OK);
    const char *S = "summary.csv";
    char path[1200];
    snprintf(path, sizeof path, "%s/summary.csv", dir);
    char *text = dt_read_file(path, NULL);
    CHECK(text &&
          strncmp(text, DT_REPORT_SUMMARY_HEADER "\n", strlen(DT_REPORT_SUMMARY_HEADER) + 1) == 0);
    free(text);
    CHECK_INT_EQ(count_lines(path), 3);
    CHECK_FIELD(dir, S, 0, "cell", "fast");
    CHECK_FIELD(dir, S, 0, "vary", "none");
    CHECK_FIELD(dir, S, 0, "policy", "fast");
    CHECK_FIELD(dir, S, 0, "replicas", "3");
    CHECK_FIELD(dir, S, 0, "completed", "3");
    CHECK_FIELD(dir, S, 0, "distinct_final_digests", "3");
    CHECK_FIELD(dir, S, 0, "first_divergent_step", "1");
    CHECK_FIELD(dir, S, 0, "first_divergent_tensor", "fc1.bias");
    CHECK_FIELD(dir, S, 0, "test_acc_mean", "0.833333");
    CHECK_FIELD(dir, S, 0, "test_acc_std", "0.152753");
    CHECK_FIELD(dir, S, 0, "churn_mean", "0.266667");
    CHECK_FIELD(dir, S, 0, "churn_max", "0.300000");
    CHECK_FIELD(dir, S, 0, "l2_mean", "4");
    CHECK_FIELD(dir, S, 0, "l2_rel_mean", "1.03175");
    CHECK_FIELD(dir, S, 0, "class_acc_std_mean", "0.215470");
    CHECK_FIELD(dir, S, 0, "class_acc_std_max", "0.500000");
    CHECK_FIELD(dir, S, 0, "step_ms_median", "3.500000");
    CHECK_FIELD(dir, S, 0, "hash_ms_median", "0.500000");
    CHECK_FIELD(dir, S, 0, "overhead_ratio", "1.000000");
    CHECK_FIELD(dir, S, 0, "overhead_ci_lo", "");
    CHECK_FIELD(dir, S, 0, "overhead_verdict", "baseline");

    CHECK_FIELD(dir, S, 1, "cell", "portable");
    CHECK_FIELD(dir, S, 1, "completed", "2");
    CHECK_FIELD(dir, S, 1, "distinct_final_digests", "1");
    CHECK_FIELD(dir, S, 1, "first_divergent_step", "3");
    CHECK_FIELD(dir, S, 1, "first_divergent_tensor", "");
    CHECK_FIELD(dir, S, 1, "test_acc_mean", "0.900000");
    CHECK_FIELD(dir, S, 1, "test_acc_std", "0.000000");
    CHECK_FIELD(dir, S, 1, "churn_mean", "0.000000");
    CHECK_FIELD(dir, S, 1, "l2_mean", "0");
    CHECK_FIELD(dir, S, 1, "l2_rel_mean", "0");
    CHECK_FIELD(dir, S, 1, "class_acc_std_max", "0.000000");
    CHECK_FIELD(dir, S, 1, "step_ms_median", "11.000000"); /* 10..13 twice, 10..11 */
    CHECK_FIELD(dir, S, 1, "overhead_ratio", "2.000000");
    CHECK_FIELD(dir, S, 1, "overhead_verdict", "conclusive");
    double lo = atof(field(dir, S, 1, "overhead_ci_lo")),
           hi = atof(field(dir, S, 1, "overhead_ci_hi"));
    CHECK(lo >= 1.9 - 1e-9 && lo <= 2.0 && hi >= 2.0 && hi <= 2.1 + 1e-9);
}

/* Per pair; the same figures as summary_values, pair by pair. */
DT_TEST(cells_values)
{
    char dir[1024];
    struct dt_error err;
    build_single(dir, sizeof dir, "cells");
    CHECK(build_report(dir, "none", &err) == DT_OK);
    const char *C = "cells.csv";
    char path[1200];
    snprintf(path, sizeof path, "%s/cells.csv", dir);
    CHECK_INT_EQ(count_lines(path), 7); /* header + 3 pairs x 2 cells */
    /* fast (0,1) */
    CHECK_FIELD(dir, C, 0, "replica_a", "0");
    CHECK_FIELD(dir, C, 0, "replica_b", "1");
    CHECK_FIELD(dir, C, 0, "identical_final", "0");
    CHECK_FIELD(dir, C, 0, "first_divergent_step", "1");
    CHECK_FIELD(dir, C, 0, "first_divergent_tensor", "fc1.bias");
    CHECK_FIELD(dir, C, 0, "churn", "0.200000");
    CHECK_FIELD(dir, C, 0, "l2", "4");
    CHECK_FIELD(dir, C, 0, "l2_rel", "1");
    CHECK_FIELD(dir, C, 0, "test_acc_a", "1.000000");
    CHECK_FIELD(dir, C, 0, "test_acc_b", "0.800000");
    /* fast (0,2): weights part first at step 2 */
    CHECK_FIELD(dir, C, 1, "first_divergent_step", "2");
    CHECK_FIELD(dir, C, 1, "first_divergent_tensor", "fc1.weight");
    CHECK_FIELD(dir, C, 1, "churn", "0.300000");
    CHECK_FIELD(dir, C, 1, "l2", "3");
    CHECK_FIELD(dir, C, 1, "l2_rel", "0.666667");
    /* fast (1,2) */
    CHECK_FIELD(dir, C, 2, "first_divergent_step", "1");
    CHECK_FIELD(dir, C, 2, "l2", "5");
    CHECK_FIELD(dir, C, 2, "l2_rel", "1.42857");
    /* portable (0,1): identical */
    CHECK_FIELD(dir, C, 3, "cell", "portable");
    CHECK_FIELD(dir, C, 3, "identical_final", "1");
    CHECK_FIELD(dir, C, 3, "first_divergent_step", "-1");
    CHECK_FIELD(dir, C, 3, "churn", "0.000000");
    CHECK_FIELD(dir, C, 3, "l2", "0");
    /* portable (0,2): replica 2 failed: compared by trace only */
    CHECK_FIELD(dir, C, 4, "identical_final", "");
    CHECK_FIELD(dir, C, 4, "first_divergent_step", "3");
    CHECK_FIELD(dir, C, 4, "churn", "");
    CHECK_FIELD(dir, C, 4, "l2", "");
    CHECK_FIELD(dir, C, 4, "test_acc_a", "0.900000");
    CHECK_FIELD(dir, C, 4, "test_acc_b", "");

    /* drift.csv: fast 3 steps x 3 pairs, portable 3 steps x 1 completed pair. Step 1: fast
     * (0,1) at 4 (bias (3,0) vs (3,4)), (0,2) 0. */
    const char *D = "drift.csv";
    snprintf(path, sizeof path, "%s/drift.csv", dir);
    CHECK_INT_EQ(count_lines(path), 13);
    CHECK_FIELD(dir, D, 0, "step", "0");
    CHECK_FIELD(dir, D, 0, "l2", "0");
    CHECK_FIELD(dir, D, 3, "step", "1");
    CHECK_FIELD(dir, D, 3, "replica_b", "1");
    CHECK_FIELD(dir, D, 3, "l2", "4");
    CHECK_FIELD(dir, D, 3, "l2_rel", "1"); /* 4 / mean(3, 5) */
    CHECK_FIELD(dir, D, 4, "l2", "0");
    CHECK_FIELD(dir, D, 8, "step", "4");
    CHECK_FIELD(dir, D, 8, "l2", "5");
    CHECK_FIELD(dir, D, 9, "cell", "portable");
    CHECK_FIELD(dir, D, 11, "l2", "0");
}

/* The same folder gives the same overhead ratio of 1 with an interval around it: inconclusive. */
DT_TEST(overhead_inconclusive)
{
    char dir[1024];
    struct dt_error err;
    build_single(dir, sizeof dir, "inconclusive");
    write_overhead(dir, false);
    CHECK(build_report(dir, "none", &err) == DT_OK);
    CHECK_FIELD(dir, "summary.csv", 1, "overhead_ratio", "1.000000");
    CHECK_FIELD(dir, "summary.csv", 1, "overhead_verdict", "inconclusive");
    double lo = atof(field(dir, "summary.csv", 1, "overhead_ci_lo"));
    double hi = atof(field(dir, "summary.csv", 1, "overhead_ci_hi"));
    CHECK(lo < 1.0 && hi > 1.0);
    /* without overhead.csv: no ratio for portable, fast still the baseline */
    char path[1200];
    snprintf(path, sizeof path, "%s/overhead.csv", dir);
    CHECK(remove(path) == 0);
    CHECK(build_report(dir, "none", &err) == DT_OK);
    CHECK_FIELD(dir, "summary.csv", 1, "overhead_ratio", "");
    CHECK_FIELD(dir, "summary.csv", 1, "overhead_verdict", "");
    CHECK_FIELD(dir, "summary.csv", 0, "overhead_verdict", "baseline");
}

/* algos.csv in a cell's replicas: the report's "Library algorithms" section counts the
 * distinct sets of choices and the changes within runs; without any algos.csv (every other
 * case here) there is no such section. */
static void write_algos(const char *dir, const char *rel, const char *rows)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/%s/algos.csv", dir, rel);
    FILE *f = fopen(path, "w");
    DT_ASSERT(f != NULL);
    fprintf(f, "first_step,last_step,call,op,shape,algo,name,deterministic,math,how\n%s", rows);
    fclose(f);
}

DT_TEST(algorithms_section)
{
    char dir[1024], md[1200];
    struct dt_error err;
    build_single(dir, sizeof dir, "algorithms");
    snprintf(md, sizeof md, "%s/report.md", dir);
    CHECK(build_report(dir, "none", &err) == DT_OK);
    CHECK_INT_EQ(count_occurrences(md, "## Library algorithms"), 0);
    const int portable_rows = count_occurrences(md, "| portable |");
    const char *a = "1,4,0,conv_fwd,8x8x1>2 k3x3 s1 p1 b2,1,IMPLICIT_PRECOMP_GEMM,true,fma,timed\n"
                    "1,4,1,conv_bwd_filter,8x8x1>2 k3x3 s1 p1 b2,0,ALGO_0,false,fma,timed\n";
    /* replica 1: the same choices; replica 2: another filter algorithm from step 3 on */
    const char *c = "1,4,0,conv_fwd,8x8x1>2 k3x3 s1 p1 b2,1,IMPLICIT_PRECOMP_GEMM,true,fma,timed\n"
                    "1,2,1,conv_bwd_filter,8x8x1>2 k3x3 s1 p1 b2,0,ALGO_0,false,fma,timed\n"
                    "3,4,1,conv_bwd_filter,8x8x1>2 k3x3 s1 p1 b2,1,ALGO_1,true,fma,timed\n";
    write_algos(dir, "fast/replica-0", a);
    write_algos(dir, "fast/replica-1", a);
    write_algos(dir, "fast/replica-2", c);
    CHECK(build_report(dir, "none", &err) == DT_OK);
    CHECK_INT_EQ(count_occurrences(md, "## Library algorithms per cell"), 1);
    CHECK_INT_EQ(count_occurrences(md, "| fast | 3 | 2 | 1 | 0 conv_fwd 8x8x1>2 k3x3 s1 p1 b2 "
                                       "IMPLICIT_PRECOMP_GEMM; 1 conv_bwd_filter 8x8x1>2 k3x3 "
                                       "s1 p1 b2 ALGO_0 (nondet.) |"),
                 1);
    /* portable has no record: no row of its own in the new section */
    CHECK_INT_EQ(count_occurrences(md, "| portable |"), portable_rows);
    /* all three alike: one set of choices, no change */
    write_algos(dir, "fast/replica-2", a);
    CHECK(build_report(dir, "none", &err) == DT_OK);
    CHECK_INT_EQ(count_occurrences(md, "| fast | 3 | 1 | 0 |"), 1);
}

/* Two vary settings: four cells in layout order; init cells part at step 0 in fc1.bias; the
 * replica that never started counts as not completed. init/fast biases 3, 4, 5: L2 1, 2, 1
 * (mean 4/3); init/portable has replicas 0 and 1 only: L2 1. */
DT_TEST(two_settings)
{
    char dir[1024];
    struct dt_error err;
    build_two(dir, sizeof dir, "two");
    CHECK(build_report(dir, "none", &err) == DT_OK);
    const char *S = "summary.csv";
    CHECK_FIELD(dir, S, 0, "cell", "none/fast");
    CHECK_FIELD(dir, S, 1, "cell", "none/portable");
    CHECK_FIELD(dir, S, 2, "cell", "init/fast");
    CHECK_FIELD(dir, S, 2, "vary", "init");
    CHECK_FIELD(dir, S, 3, "cell", "init/portable");
    CHECK_FIELD(dir, S, 0, "first_divergent_step", "1");
    CHECK_FIELD(dir, S, 0, "l2_mean", "4");
    CHECK_FIELD(dir, S, 2, "first_divergent_step", "0");
    CHECK_FIELD(dir, S, 2, "first_divergent_tensor", "fc1.bias");
    CHECK_FIELD(dir, S, 2, "l2_mean", "1.33333");
    CHECK_FIELD(dir, S, 2, "distinct_final_digests", "3");
    CHECK_FIELD(dir, S, 3, "completed", "2");
    CHECK_FIELD(dir, S, 3, "first_divergent_step", "0");
    CHECK_FIELD(dir, S, 3, "l2_mean", "1");
    CHECK_FIELD(dir, S, 3, "overhead_ratio", "2.000000");
    CHECK_FIELD(dir, "cells.csv", 10, "cell", "init/portable");
    CHECK_FIELD(dir, "cells.csv", 10, "replica_b", "2");
    CHECK_FIELD(dir, "cells.csv", 10, "first_divergent_step", ""); /* no trace to compare */
    char md[1200];
    snprintf(md, sizeof md, "%s/report.md", dir);
    CHECK(count_occurrences(md, "| init/portable |") >= 2);
    CHECK(count_occurrences(md, "`none`, `init`") == 1);
}

/* Byte-identical outputs from a copy of the folder (so no absolute path, date or host). */
DT_TEST(reproducible_copy)
{
    static const char *const outs[] = {"summary.csv", "cells.csv", "drift.csv", "report.md"};
    char dir[1024], copy[1100];
    struct dt_error err;
    build_two(dir, sizeof dir, "repro");
    CHECK(build_report(dir, "none", &err) == DT_OK);
    snprintf(copy, sizeof copy, "%s-copy", dir);
    char cmd[5000]; /* copy, then drop the copied outputs so that they are rebuilt */
    snprintf(cmd, sizeof cmd,
             "rm -rf '%s' && cp -r '%s' '%s' && cd '%s' && rm -f summary.csv "
             "cells.csv drift.csv report.md",
             copy, dir, copy, copy);
    CHECK(system(cmd) == 0);
    CHECK(build_report(copy, "none", &err) == DT_OK);
    for (int i = 0; i < 4; i++) {
        char a[1200], b[1200];
        snprintf(a, sizeof a, "%s/%s", dir, outs[i]);
        snprintf(b, sizeof b, "%s/%s", copy, outs[i]);
        if (!dt_files_equal(a, b)) {
            fprintf(stderr, "%s differs between %s and its copy\n", outs[i], dir);
            dt_check_failures_++;
        }
    }
}

static void check_nonempty(const char *dir, const char *name)
{
    char path[1200];
    size_t len = 0;
    snprintf(path, sizeof path, "%s/plots/%s", dir, name);
    char *data = dt_read_file(path, &len);
    if (!data || len == 0) {
        fprintf(stderr, "plot %s missing or empty\n", path);
        dt_check_failures_++;
    }
    free(data);
}

/* With gnuplot: every plot as SVG and PNG, embedded in report.md. The single-setting
 * folder's portable drift plot has only zeros (the "identical" branch). */
DT_TEST(plots_gnuplot)
{
    if (!has_gnuplot()) DT_SKIP("gnuplot is not installed");
    char dir[1024], md[1200];
    struct dt_error err;
    build_two(dir, sizeof dir, "plots-two");
    CHECK(build_report(dir, "gnuplot", &err) == DT_OK);
    static const char *const names[] = {"drift-fast", "drift-portable", "accuracy", "overhead"};
    for (int i = 0; i < 4; i++) {
        char f[128];
        snprintf(f, sizeof f, "%s.svg", names[i]);
        check_nonempty(dir, f);
        snprintf(f, sizeof f, "%s.png", names[i]);
        check_nonempty(dir, f);
    }
    snprintf(md, sizeof md, "%s/report.md", dir);
    CHECK_INT_EQ(count_occurrences(md, "](plots/"), 4);
    CHECK_INT_EQ(count_occurrences(md, "(plots/drift-fast.svg)"), 1);
    CHECK_INT_EQ(count_occurrences(md, "Plots skipped"), 0);
    char gp[1200];
    snprintf(gp, sizeof gp, "%s/plots/drift-portable.gp", dir);
    CHECK_INT_EQ(count_occurrences(gp, "none (identical)"), 1);
    CHECK_INT_EQ(count_occurrences(gp, "'init'"), 1);

    build_single(dir, sizeof dir, "plots-single");
    CHECK(build_report(dir, "gnuplot", &err) == DT_OK);
    for (int i = 0; i < 4; i++) {
        char f[128];
        snprintf(f, sizeof f, "%s.svg", names[i]);
        check_nonempty(dir, f);
    }
    snprintf(md, sizeof md, "%s/report.md", dir);
    CHECK_INT_EQ(count_occurrences(md, "](plots/"), 4);
}

/* gnuplot "none" (option) or DETRAIN_GNUPLOT=none: the tables, one line saying why, no SVG;
 * a rebuild with plots off removes the images an earlier build made. */
DT_TEST(plots_none)
{
    char dir[1024], md[1200], svg[1200];
    struct dt_error err;
    build_single(dir, sizeof dir, "noplots");
    CHECK(build_report(dir, "none", &err) == DT_OK);
    snprintf(md, sizeof md, "%s/report.md", dir);
    snprintf(svg, sizeof svg, "%s/plots/drift-fast.svg", dir);
    CHECK_INT_EQ(count_occurrences(md, "Plots skipped"), 1);
    CHECK_INT_EQ(count_occurrences(md, "gnuplot: none"), 1);
    CHECK_INT_EQ(count_occurrences(md, "!["), 0);
    CHECK_INT_EQ(count_occurrences(md, "## Divergence per cell"), 1);
    CHECK_INT_EQ(count_occurrences(md, "## Drift"), 1);
    CHECK(!dt_path_exists(svg));

    if (has_gnuplot()) CHECK(build_report(dir, "gnuplot", &err) == DT_OK);
    setenv("DETRAIN_GNUPLOT", "none", 1);
    CHECK(build_report(dir, NULL, &err) == DT_OK);
    unsetenv("DETRAIN_GNUPLOT");
    CHECK_INT_EQ(count_occurrences(md, "Plots skipped: DETRAIN_GNUPLOT=none."), 1);
    CHECK(!dt_path_exists(svg));

    CHECK(build_report(dir, "/nonexistent/gnuplot", &err) == DT_OK);
    CHECK_INT_EQ(count_occurrences(md, "Plots skipped: gnuplot not found"), 1);
    CHECK_INT_EQ(count_occurrences(md, "/nonexistent"), 0);
}

/* The stdout table: one line per cell, the overhead column, the paths written. */
DT_TEST(print_summary_table)
{
    char dir[1024], out[1200];
    build_single(dir, sizeof dir, "stdout");
    snprintf(out, sizeof out, "%s/stdout.txt", dir);
    fflush(stdout);
    FILE *saved = fdopen(dup(fileno(stdout)), "w");
    CHECK(freopen(out, "w", stdout) != NULL);
    struct dt_report_options opt = {.print_summary = true, .gnuplot = "none", .quiet = true};
    struct dt_error err = {0};
    enum dt_status st = dt_report_build(dir, &opt, &err);
    fflush(stdout);
    dup2(fileno(saved), fileno(stdout));
    fclose(saved);
    CHECK(st == DT_OK);
    char *text = dt_read_file(out, NULL);
    CHECK(text != NULL);
    if (!text) return;
    CHECK_CONTAINS(text, "fast ");
    CHECK_CONTAINS(text, "3/3");
    CHECK_CONTAINS(text, "2/3");
    CHECK_CONTAINS(text, "fc1.bias");
    CHECK_CONTAINS(text, "0.8333 +- 0.1528");
    CHECK_CONTAINS(text, "baseline");
    CHECK_CONTAINS(text, "2.00x [");
    CHECK_CONTAINS(text, "/summary.csv");
    CHECK_CONTAINS(text, "/report.md");
    free(text);
}

DT_TEST(error_missing_config)
{
    char dir[1024];
    struct dt_error err;
    case_dir(dir, sizeof dir, "noconfig");
    CHECK(build_report(dir, "none", &err) != DT_OK);
    CHECK_CONTAINS(err.msg, dir);
    CHECK_CONTAINS(err.msg, "config.json");
}

DT_TEST(error_malformed_predictions)
{
    char dir[1024], path[1200];
    struct dt_error err;
    build_single(dir, sizeof dir, "badpred");
    snprintf(path, sizeof path, "%s/fast/replica-1/predictions.csv", dir);
    FILE *f = fopen(path, "w");
    fprintf(f, "index,label,predicted\n0,0,1\n1,1,1\n2,2\n3,3,3\n");
    fclose(f);
    CHECK(build_report(dir, "none", &err) == DT_ERR_DATA);
    CHECK_CONTAINS(err.msg, "fast/replica-1/predictions.csv:4:");
    CHECK_CONTAINS(err.msg, "expected 3 fields");
}

/* A snapshot whose weights are not the ones the trace hashed at that step. */
DT_TEST(error_snapshot_mismatch)
{
    char dir[1024], rdir[1200];
    struct dt_error err;
    build_single(dir, sizeof dir, "badsnap");
    snprintf(rdir, sizeof rdir, "%s/portable/replica-1", dir);
    struct weights other = state(KIND_FAST, 1, 4);
    write_snapshot(rdir, 4, &other);
    CHECK(build_report(dir, "none", &err) == DT_ERR_DATA);
    CHECK_CONTAINS(err.msg, "portable/replica-1/snapshots/step-00000004.bin");
    CHECK_CONTAINS(err.msg, "does not match");
}

/* A replica whose run.json says it completed but whose files were trimmed since (a committed
 * results folder: no predictions.csv, the per-step files packed): the rebuild is refused,
 * naming the replica and the file, and the reports already there stay as they were -- where
 * it would have counted the replica as never completed. A run.json that says interrupted
 * with the same files missing is the ordinary unfinished replica (negative control). */
DT_TEST(error_trimmed_completed_replica)
{
    char dir[1024], path[1200], keep[1300], md[1200], keep_md[1300];
    struct dt_error err = {0};
    build_single(dir, sizeof dir, "trimmed");
    CHECK_INT_EQ(build_report(dir, "none", &err), DT_OK);
    snprintf(path, sizeof path, "%s/summary.csv", dir);
    snprintf(keep, sizeof keep, "%s.summary.csv", dir);
    snprintf(md, sizeof md, "%s/report.md", dir);
    snprintf(keep_md, sizeof keep_md, "%s.report.md", dir);
    char *text = dt_read_file(path, NULL), *text_md = dt_read_file(md, NULL);
    CHECK(text && text_md);
    if (!text || !text_md) return;
    dt_write_text(keep, text);
    dt_write_text(keep_md, text_md);
    free(text), free(text_md);
    char rj[1200], pred[1200];
    snprintf(rj, sizeof rj, "%s/fast/replica-1/run.json", dir);
    snprintf(pred, sizeof pred, "%s/fast/replica-1/predictions.csv", dir);
    dt_write_text(rj, "{\"policy\": \"fast\", \"state\": \"completed\", \"reason\": \"\"}\n");
    CHECK_INT_EQ(remove(pred), 0);
    CHECK_INT_EQ(build_report(dir, "none", &err), DT_ERR_DATA);
    CHECK_CONTAINS(err.msg, "fast/replica-1: run.json says this replica completed");
    CHECK_CONTAINS(err.msg, "predictions.csv is missing");
    CHECK(dt_files_equal(path, keep));
    CHECK(dt_files_equal(md, keep_md));
    dt_write_text(rj, "{\"policy\": \"fast\", \"state\": \"interrupted\", \"reason\": \"\"}\n");
    err = (struct dt_error){0};
    CHECK_INT_EQ(build_report(dir, "none", &err), DT_OK);
    CHECK(!dt_files_equal(path, keep)); /* fast's cell now one replica short */
}

/* Append `text` (no end of line) to DIR/REL: a last line cut short, as kill -9 leaves it. */
static void append_cut(const char *dir, const char *rel, const char *text)
{
    char path[2048];
    snprintf(path, sizeof path, "%s/%s", dir, rel);
    FILE *f = fopen(path, "a");
    DT_ASSERT(f && fputs(text, f) >= 0 && fclose(f) == 0);
}

/* A last line without its end of line (a killed run's trace.csv, tensors.csv, times.csv,
 * metrics.csv) is treated as absent by the report and by the trace reader compare uses --
 * every figure is the one without it -- and report.md names the files it was left out of;
 * a malformed line that is not the last is still an error. */
DT_TEST(cut_last_lines_ignored)
{
    char dir[1024], clean[1024], path[1200];
    struct dt_error err;
    build_single(clean, sizeof clean, "cut-clean");
    CHECK(build_report(clean, "none", &err) == DT_OK);
    build_single(dir, sizeof dir, "cut");
    /* replica 2 of portable stopped after step 2: its row of step 3 cut inside the digest */
    append_cut(dir, "portable/replica-2/trace.csv", "3,0.5,0123456789abcdef");
    append_cut(dir, "portable/replica-2/tensors.csv", "3,fc1.wei");
    append_cut(dir, "portable/replica-2/times.csv", "3,12.");
    append_cut(dir, "fast/replica-1/metrics.csv", "5,0.3,0.1");
    CHECK(build_report(dir, "none", &err) == DT_OK);
    const char *outputs[] = {"summary.csv", "cells.csv", "drift.csv"};
    for (int i = 0; i < 3; i++) {
        char a[1200], b[1200];
        snprintf(a, sizeof a, "%s/%s", dir, outputs[i]);
        snprintf(b, sizeof b, "%s/%s", clean, outputs[i]);
        if (!dt_files_equal(a, b)) fprintf(stderr, "%s differs from the uncut folder's\n", a);
        CHECK(dt_files_equal(a, b));
    }
    CHECK_FIELD(dir, "summary.csv", 1, "first_divergent_step", "3");
    snprintf(path, sizeof path, "%s/report.md", dir);
    char *md = dt_read_file(path, NULL);
    CHECK(md != NULL);
    if (md) {
        CHECK_CONTAINS(md, "**Cut short.** The last line of `");
        CHECK_CONTAINS(md, "`portable/replica-2/trace.csv`");
        CHECK_CONTAINS(md, "`portable/replica-2/tensors.csv`");
        CHECK_CONTAINS(md, "`portable/replica-2/times.csv`");
        CHECK_CONTAINS(md, "`fast/replica-1/metrics.csv`");
        CHECK(strstr(md, "`fast/replica-0/") == NULL);
    }
    free(md);
    snprintf(path, sizeof path, "%s/report.md", clean);
    md = dt_read_file(path, NULL);
    CHECK(md && strstr(md, "Cut short") == NULL);
    free(md);
    /* the trace reader compare uses: the same rows as without the cut line */
    struct dt_trace_row *rows = NULL;
    int64_t n = 0;
    snprintf(path, sizeof path, "%s/portable/replica-2", dir);
    CHECK_INT_EQ(dt_trace_read(&rows, &n, path, &err), DT_OK);
    CHECK_INT_EQ(n, 3);
    free(rows);
    /* cut in the middle (a line follows): still refused, naming file and line */
    append_cut(dir, "portable/replica-2/times.csv", "\n4,13.0,0.5\n");
    CHECK(build_report(dir, "none", &err) == DT_ERR_DATA);
    CHECK_CONTAINS(err.msg, "portable/replica-2/times.csv:4: expected 3 fields, found 2");
}

DT_TEST_MAIN(DT_CASE(summary_values), DT_CASE(cells_values), DT_CASE(overhead_inconclusive),
             DT_CASE(algorithms_section), DT_CASE(two_settings), DT_CASE(reproducible_copy),
             DT_CASE(plots_gnuplot), DT_CASE(plots_none), DT_CASE(print_summary_table),
             DT_CASE(error_missing_config), DT_CASE(error_malformed_predictions),
             DT_CASE(error_snapshot_mismatch), DT_CASE(cut_last_lines_ignored),
             DT_CASE(error_trimmed_completed_replica))
