/* `detrain explain` (harness/analyze/explain.h) end to end: with the forced-op hook making
 * exactly one op order-dependent (a chosen bias gradient, a chosen convolution's
 * backward-data scatter, the epsilon draw) it names that op and the control whose switch
 * removes the difference; with every op deterministic it finds none; on the quickstart's
 * `fast` replicas it names an op of step 1 caused by `reduction` or `atomics`, and with that
 * control switched alone the named output agrees in every re-execution; a replay that does
 * not match the trace is refused, not explained. Each case writes under DT_TEST_TMP_DIR. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fileio.h"
#include "tests/check.h"
#include "tests/op_helpers.h"
#include "tests/run_helper.h"

#define EXE DT_DETRAIN_EXE
#define TMP DT_TEST_TMP_DIR "/explain."

static char out[1 << 17];

/* Train config `yaml` (written to <dir>.yaml) into dir; extra: more --set. */
static void train(const char *dir, const char *yaml, const char *extra)
{
    char cfg[1024];
    snprintf(cfg, sizeof cfg, "%s.yaml", dir);
    dt_write_text(cfg, yaml);
    int rc = dt_run_capture(out, sizeof out,
                            "rm -rf '%s' && '%s' run '%s' --out '%s' --quiet --set "
                            "report.overhead_samples=0 --set report.snapshots=0 %s",
                            dir, EXE, cfg, dir, extra ? extra : "");
    if (rc != 0) fprintf(stderr, "detrain run failed (%d):\n%s\n", rc, out);
    CHECK_INT_EQ(rc, 0);
}

/* detrain explain A B ARGS with DETRAIN_TEST_EXPLAIN_FORCE=hook (NULL: unset): exit code. */
static int explain(const char *hook, const char *a, const char *b, const char *args)
{
    int rc = dt_run_capture(out, sizeof out, "%s%s%s '%s' explain '%s' '%s' --quiet %s",
                            hook ? "DETRAIN_TEST_EXPLAIN_FORCE='" : "", hook ? hook : "",
                            hook ? "'" : "", EXE, a, b, args ? args : "");
    fprintf(stderr, "---- explain (%s) exit %d:\n%s", hook ? hook : "no hook", rc, out);
    return rc;
}

static const char MLP[] = "name: ex-mlp\n"
                          "dataset: {train_limit: 512, test_limit: 100}\n"
                          "model: {kind: mlp, hidden: [32]}\n"
                          "train: {steps: 3, batch: 32, seed: 11}\n"
                          "backend: {threads: 1}\n"
                          "policies: [{base: run_to_run, atomics: float}]\n"
                          "replicas: 2\n"
                          "hash: {per_tensor: true}\n";

#define MLP_R0 TMP "mlp/run_to_run+atomics=float/replica-0"
#define MLP_R1 TMP "mlp/run_to_run+atomics=float/replica-1"

DT_TEST(hooked_bias_gradient)
{
    train(TMP "mlp", MLP, NULL);
    /* dense1's bias gradient comes first in backward and is under atomics: float too, but
     * on one thread it is deterministic: only the hooked dense0 bias gradient is forced */
    CHECK_INT_EQ(
        explain("bias_backward:dense0", MLP_R0, MLP_R1, "--step 2 --csv " TMP "mlp-explain.csv"),
        1);
    CHECK_CONTAINS(out, "first differing op output");
    CHECK_CONTAINS(out, "bias_backward, layer dense0, tensor dense0.bias gradient, phase backward");
    CHECK_CONTAINS(out, "caused by atomics: float");
    size_t len = 0;
    char *csv = dt_read_file(TMP "mlp-explain.csv", &len);
    CHECK(csv != NULL);
    if (csv) {
        CHECK(strncmp(csv, "index,op,layer,tensor,phase,elements,hash_1,", 44) == 0);
        CHECK_CONTAINS(csv, ",bias_backward,dense0,dense0.bias gradient,backward,32,");
        /* dense1's bias gradient row: the same hash in all 5 executions */
        const char *row = strstr(csv, ",bias_backward,dense1,dense1.bias gradient,backward,");
        CHECK(row != NULL);
        if (row) {
            const char *eol = strchr(row, '\n');
            CHECK(eol && eol - row > 6 && strncmp(eol - 6, ",0,0,0", 6) == 0);
        }
        free(csv);
    }
}

DT_TEST(hooked_conv_scatter)
{
    static const char LENET[] = "name: ex-lenet\n"
                                "dataset: {train_limit: 256, test_limit: 64}\n"
                                "model: {kind: lenet}\n"
                                "train: {steps: 2, batch: 16, seed: 4}\n"
                                "backend: {threads: 1}\n"
                                "policies: [{base: run_to_run, atomics: float}]\n"
                                "replicas: 2\n";
    train(TMP "lenet", LENET, NULL);
    CHECK_INT_EQ(explain("conv2d_backward_data:conv1", TMP "lenet/run_to_run+atomics=float",
                         TMP "lenet/run_to_run+atomics=float/replica-1", "--step 1"),
                 1);
    CHECK_CONTAINS(out, "conv2d_backward_data, layer conv1, tensor conv1 input gradient");
    CHECK_CONTAINS(out, "caused by atomics: float");
}

DT_TEST(hooked_epsilon)
{
    static const char BNN[] = "name: ex-bnn\n"
                              "dataset: {train_limit: 256, test_limit: 64}\n"
                              "model: {kind: bnn_mlp, hidden: [16], samples: 2, test_samples: 2,"
                              " lanes: 64}\n"
                              "train: {steps: 2, batch: 16, seed: 9}\n"
                              "backend: {threads: 1}\n"
                              "policies: [{base: run_to_run, rng: stored}]\n"
                              "replicas: 2\n";
    train(TMP "bnn", BNN, NULL);
    CHECK_INT_EQ(explain("eps_philox", TMP "bnn/run_to_run+rng=stored/replica-0",
                         TMP "bnn/run_to_run+rng=stored/replica-1", "--step 1"),
                 1);
    CHECK_CONTAINS(out, "first differing op output: #");
    CHECK_CONTAINS(out, " eps_philox, layer dense0, tensor dense0.weight epsilon, phase forward");
    CHECK_CONTAINS(out, "caused by rng: stored");
}

/* The negative controls: every op deterministic, with and without the hook on an op whose
 * control is at its deterministic value (the forced order is ignored there). */
DT_TEST(deterministic_step_no_difference)
{
    train(TMP "det", MLP, "--set 'policies=[run_to_run]' --set backend.threads=2");
    CHECK_INT_EQ(explain(NULL, TMP "det/run_to_run/replica-0", TMP "det/run_to_run/replica-1", ""),
                 0);
    CHECK_CONTAINS(out, "nothing to explain");
    CHECK_INT_EQ(
        explain(NULL, TMP "det/run_to_run/replica-0", TMP "det/run_to_run/replica-1", "--step 2"),
        0);
    CHECK_CONTAINS(out, "no op output differs between the executions (as they ran and under "
                        "drawn combination orders)");
    CHECK_INT_EQ(explain("bias_backward:dense0", TMP "det/run_to_run/replica-0",
                         TMP "det/run_to_run/replica-1", "--step 2"),
                 0);
    CHECK_CONTAINS(out, "no op output differs");
    /* a shorter run of the same experiment: its trace only ends earlier -- not a step where
     * the two part (exit 0, never "the traces part at step 3") */
    train(TMP "det-short", MLP,
          "--set 'policies=[run_to_run]' --set backend.threads=2 --set train.steps=2");
    CHECK_INT_EQ(
        explain(NULL, TMP "det/run_to_run/replica-0", TMP "det-short/run_to_run/replica-0", ""), 0);
    CHECK_CONTAINS(out, "common hashed steps; A's goes on, B's ends: nothing to explain");
    CHECK(strstr(out, "part at step") == NULL);
}

/* The CSV row of `tensor` (op, layer, tensor, phase columns as `key`) says how many
 * executions differ: its executions_differing column, or -1 without such a row. */
static int executions_differing(const char *csv, const char *key)
{
    const char *row = strstr(csv, key);
    if (!row) return -1;
    const char *eol = strchr(row, '\n');
    if (!eol) return -1;
    /* ...,executions_differing,elements_differing,max_ulp */
    int commas = 0;
    const char *p = eol;
    while (p > row && commas < 3)
        if (*--p == ',') commas++;
    return atoi(p + 1);
}

DT_TEST(quickstart_fast_replicas)
{
    static const char Q[] = "name: ex-quick\n"
                            "dataset: {train_limit: 2048, test_limit: 100}\n"
                            "model: {kind: mlp, hidden: [256, 128]}\n"
                            "train: {steps: 2, batch: 256, seed: 20261121}\n"
                            "backend: {threads: 2}\n"
                            "policies: [fast]\n"
                            "replicas: 2\n"
                            "hash: {per_tensor: true}\n";
    train(TMP "q", Q, NULL);
    const int rc = explain(NULL, TMP "q/fast/replica-0", TMP "q/fast/replica-1",
                           "--step 1 --csv " TMP "q-explain.csv");
    CHECK_INT_EQ(rc, 1);
    CHECK_CONTAINS(out, "step 1 re-executed 5 time(s)");
    const bool atomics = strstr(out, "caused by atomics: float") != NULL;
    const bool reduction = strstr(out, "caused by reduction: unordered") != NULL;
    CHECK(atomics || reduction);
    /* the named output: "tensor T, phase" */
    char tensor[96] = "", key[160], opname[48] = "";
    const char *op = strstr(out, "first differing op output: #");
    const char *t = op ? strstr(op, ", tensor ") : NULL;
    const char *comma = t ? strstr(t, ", phase") : NULL;
    CHECK(op && t && comma);
    if (!op || !t || !comma || !(atomics || reduction)) return;
    snprintf(tensor, sizeof tensor, "%.*s", (int)(comma - t - 9), t + 9);
    CHECK_INT_EQ(sscanf(op, "first differing op output: #%*d %47[a-z0-9_]", opname), 1);
    fprintf(stderr, "named: op %s, tensor %s\n", opname, tensor);
    snprintf(key, sizeof key, ",%s,", opname);
    /* with that control alone switched, the named output agrees in every re-execution */
    train(TMP "q2", Q,
          atomics ? "--set 'policies=[{base: fast, atomics: fixed_point}]'"
                  : "--set 'policies=[{base: fast, reduction: fixed}]'");
    const char *cell = atomics ? TMP "q2/fast+atomics=fixed_point" : TMP "q2/fast+reduction=fixed";
    char r0[512], r1[512];
    snprintf(r0, sizeof r0, "%s/replica-0", cell);
    snprintf(r1, sizeof r1, "%s/replica-1", cell);
    (void)explain(NULL, r0, r1, "--step 1 --csv " TMP "q2-explain.csv");
    char *csv = dt_read_file(TMP "q2-explain.csv", NULL);
    CHECK(csv != NULL);
    if (!csv) return;
    char row_key[200];
    snprintf(row_key, sizeof row_key, "%s%s,", key, tensor);
    /* the layer sits between op and tensor: match ",op," then ",tensor," on one row */
    const char *row = csv;
    int found = 0;
    while ((row = strstr(row, key)) != NULL) {
        const char *eol = strchr(row, '\n');
        char line[512];
        snprintf(line, sizeof line, "%.*s", eol ? (int)(eol - row) : 0, row);
        char tkey[120];
        snprintf(tkey, sizeof tkey, ",%s,", tensor);
        if (strstr(line, tkey)) {
            found++;
            CHECK_INT_EQ(executions_differing(row, ","), 0);
        }
        row = eol ? eol : row + 1;
    }
    CHECK(found >= 1);
    free(csv);
}

/* Change one hex digit of the last field (a digest) of the first line of the file at
 * `path` that starts with `prefix`. */
static void spoil_line(const char *path, const char *prefix)
{
    char *trace = dt_read_file(path, NULL);
    CHECK(trace != NULL);
    if (!trace) return;
    char key[128];
    snprintf(key, sizeof key, "\n%s", prefix);
    char *row = strstr(trace, key);
    CHECK(row != NULL);
    if (row) {
        char *eol = strchr(row + 1, '\n');
        CHECK(eol != NULL);
        if (eol) {
            char *digest = eol - 64;
            digest[0] = digest[0] == '0' ? '1' : '0';
        }
    }
    dt_write_text(path, trace);
    free(trace);
}

/* Make the trace at `path` part from its replica's at `step`: that step's model digest
 * changed. */
static void spoil_trace(const char *path, int step)
{
    char prefix[32];
    snprintf(prefix, sizeof prefix, "%d,", step);
    spoil_line(path, prefix);
}

/* A replay that cannot reproduce the trace at k-1 is reported as such, not explained: the
 * config's learning rate changed after the run, the traces made to part at step 3. */
DT_TEST(replay_mismatch_refused)
{
    train(TMP "rm", MLP, "--set 'policies=[run_to_run]' --set train.steps=4");
    spoil_trace(TMP "rm/run_to_run/replica-1/trace.csv", 3);
    CHECK_INT_EQ(dt_run_capture(out, sizeof out, "sed -i 's/\"lr\":[0-9.e-]*/\"lr\":0.25/' '%s'",
                                TMP "rm/config.json"),
                 0);
    CHECK_INT_EQ(explain(NULL, TMP "rm/run_to_run/replica-0", TMP "rm/run_to_run/replica-1", ""),
                 2);
    CHECK_CONTAINS(out, "the traces part at step 3");
    CHECK_CONTAINS(out, "replay does not match");
    CHECK(strstr(out, "caused by") == NULL);
}

/* A replayed step whose digest misses the trace (as a `fast` step may) is re-executed from
 * the last matching state until it matches: the hook spoils the first 3 replayed steps;
 * spoiling more than the 32 tries allow is refused. The traces made to part at step 3. */
DT_TEST(replay_retries_missed_steps)
{
    train(TMP "rr", MLP, "--set 'policies=[run_to_run]' --set train.steps=4");
    spoil_trace(TMP "rr/run_to_run/replica-1/trace.csv", 3);
    const char *a = TMP "rr/run_to_run/replica-0", *b = TMP "rr/run_to_run/replica-1";
    CHECK_INT_EQ(explain(NULL, a, b, "--executions 2"), 0);
    CHECK_CONTAINS(out, "replayed 2 step(s)); digest");
    setenv("DETRAIN_TEST_EXPLAIN_REPLAY_MISS", "3", 1);
    CHECK_INT_EQ(explain(NULL, a, b, "--executions 2"), 0);
    CHECK_CONTAINS(out, "restored after step 2 (from the initial weights, replayed 2 step(s); 3 "
                        "re-executed until its digest matched the trace)");
    setenv("DETRAIN_TEST_EXPLAIN_REPLAY_MISS", "40", 1);
    CHECK_INT_EQ(explain(NULL, a, b, "--executions 2"), 2);
    CHECK_CONTAINS(out, "replay does not match: from the initial weights (step 0), step 1 "
                        "replayed 32 times never gave its trace's digest");
    unsetenv("DETRAIN_TEST_EXPLAIN_REPLAY_MISS");
}

/* Drawn orders reach paths the run never varied: with the traces made to part at step 2 in
 * dense0.bias alone (trace and tensors.csv of replica 1 changed), the forced executions'
 * first differing output, dense1's weight gradient (reduction: unordered), is passed over,
 * since the traces agree on dense1.weight; dense0's bias gradient (atomics: float), a
 * parameter the traces disagree on, is named. */
DT_TEST(passes_over_agreed_parameters)
{
    train(TMP "pa", MLP,
          "--set 'policies=[{base: run_to_run, atomics: float, reduction: unordered}]'");
    const char *cell = TMP "pa/run_to_run+reduction=unordered+atomics=float";
    char a[512], b[512], path[600];
    snprintf(a, sizeof a, "%s/replica-0", cell);
    snprintf(b, sizeof b, "%s/replica-1", cell);
    snprintf(path, sizeof path, "%s/trace.csv", b);
    spoil_trace(path, 2);
    snprintf(path, sizeof path, "%s/tensors.csv", b);
    spoil_line(path, "2,dense0.bias,");
    CHECK_INT_EQ(explain(NULL, a, b, ""), 1);
    CHECK_CONTAINS(out, "the traces part at step 2 (first tensor dense0.bias)");
    CHECK_CONTAINS(out, "(dense_backward_weight dense1.weight gradient, op output #");
    CHECK_CONTAINS(out, "not what parted them)");
    CHECK_CONTAINS(out, "bias_backward, layer dense0, tensor dense0.bias gradient, phase backward");
    CHECK_CONTAINS(out, "caused by atomics: float");
}

/* train.checkpoint_at_divergence: replicas that agree write no divergence.bin; replica 1
 * retrained against a replica-0 trace made to part at step 3 writes its state after step 2,
 * and explain starts from it (no step replayed; its digest is the trace's at step 2). */
DT_TEST(checkpoint_at_divergence)
{
    train(TMP "cd", MLP,
          "--set 'policies=[run_to_run]' --set train.steps=4 --set "
          "train.checkpoint_at_divergence=true");
    const char *r0 = TMP "cd/run_to_run/replica-0", *r1 = TMP "cd/run_to_run/replica-1";
    CHECK(!dt_path_exists(TMP "cd/run_to_run/replica-0/divergence.bin"));
    CHECK(!dt_path_exists(TMP "cd/run_to_run/replica-1/divergence.bin"));
    spoil_trace(TMP "cd/run_to_run/replica-0/trace.csv", 3);
    int rc = dt_run_capture(out, sizeof out,
                            "rm -rf '%s' && '%s' run '%s' --resume '%s' --quiet --set "
                            "report.overhead_samples=0 --set report.snapshots=0 --set "
                            "'policies=[run_to_run]' --set train.steps=4 --set "
                            "train.checkpoint_at_divergence=true 2>&1",
                            r1, EXE, TMP "cd.yaml", TMP "cd");
    fprintf(stderr, "---- resume exit %d:\n%s", rc, out);
    CHECK(dt_path_exists(TMP "cd/run_to_run/replica-1/divergence.bin"));
    CHECK_INT_EQ(explain(NULL, r0, r1, "--executions 2"), 0);
    CHECK_CONTAINS(out, "the traces part at step 3");
    CHECK_CONTAINS(out, "restored after step 2 (from " TMP
                        "cd/run_to_run/replica-1/divergence.bin, replayed 0 step(s)); digest");
}

/* --step K must be a step both traces cover and one before which the two sides still agree:
 * K past the traces' last step is refused naming their range (no step after the last one is
 * re-executed), with traces that agree or part; K after the step where the traces already
 * part is refused saying the states before K already differ (nothing blamed on a library or
 * device path); the parting step itself is explained. */
DT_TEST(step_out_of_range)
{
    train(TMP "range", MLP, "--set 'vary=[[], [data_order]]'");
    const char *same0 = TMP "range/none/run_to_run+atomics=float/replica-0",
               *same1 = TMP "range/none/run_to_run+atomics=float/replica-1",
               *part0 = TMP "range/data_order/run_to_run+atomics=float/replica-0",
               *part1 = TMP "range/data_order/run_to_run+atomics=float/replica-1";
    CHECK_INT_EQ(explain(NULL, same0, same1, "--step 5"), 2);
    CHECK_CONTAINS(out, "--step 5 is past the traces' last step: they cover steps 1 to 3");
    CHECK(strstr(out, "re-executed") == NULL);
    CHECK_INT_EQ(explain(NULL, part0, part1, "--step 4"), 2);
    CHECK_CONTAINS(out, "--step 4 is past the traces' last step: they cover steps 1 to 3");
    CHECK_INT_EQ(explain(NULL, part0, part1, "--step 3"), 2);
    CHECK_CONTAINS(out, "the traces part at step 1, before step 3: the states before step 3 "
                        "already differ");
    CHECK(strstr(out, "re-executed") == NULL);
    CHECK(strstr(out, "library") == NULL);
    CHECK_INT_EQ(explain(NULL, part0, part1, "--step 1"), 1);
    CHECK_CONTAINS(out, "caused by vary: data_order");
}

DT_TEST(usage_errors)
{
    CHECK_INT_EQ(dt_run_capture(out, sizeof out, "'%s' explain only-one", EXE), 2);
    CHECK_CONTAINS(out, "expected two replica folders");
    CHECK_INT_EQ(dt_run_capture(out, sizeof out, "'%s' explain /nonexistent/a /nonexistent/b", EXE),
                 2);
    CHECK_CONTAINS(out, "/nonexistent/a: no such folder");
    CHECK_INT_EQ(dt_run_capture(out, sizeof out, "'%s' explain a b --executions 1", EXE), 2);
    CHECK_CONTAINS(out, "--executions takes 2 to 64");
    CHECK_INT_EQ(dt_run_capture(out, sizeof out,
                                "DETRAIN_TEST_EXPLAIN_FORCE=no_such_op '%s' explain '%s' '%s'", EXE,
                                DT_TEST_TMP_DIR, DT_TEST_TMP_DIR),
                 2);
}

/* Replicas of two different experiments (another model width): explain refuses, naming the
 * key that differs, instead of blaming a noise source; compare of the two folders says they
 * are different experiments. A different policy is what explain is for: not refused. */
DT_TEST(different_experiments_named)
{
    train(TMP "xa", MLP, "--set replicas=1 --set 'policies=[portable]'");
    train(TMP "xb", MLP, "--set replicas=1 --set 'policies=[portable]' --set 'model.hidden=[24]'");
    CHECK_INT_EQ(dt_run_capture(out, sizeof out, "'%s' explain '%s' '%s'", EXE,
                                TMP "xa/portable/replica-0", TMP "xb/portable/replica-0"),
                 2);
    CHECK_CONTAINS(out, "are replicas of different experiments (model.hidden (A: ");
    CHECK(strstr(out, "stream") == NULL);
    const int crc =
        dt_run_capture(out, sizeof out, "'%s' compare '%s' '%s'", EXE, TMP "xa", TMP "xb");
    CHECK(crc == 1 || crc == 2); /* they differ, or cannot be compared: never 0 */
    CHECK_CONTAINS(out, "note: A and B are different experiments (model.hidden (A: ");
    train(TMP "xc", MLP, "--set replicas=1 --set 'policies=[fast]'");
    int rc = dt_run_capture(out, sizeof out, "'%s' explain '%s' '%s'", EXE,
                            TMP "xa/portable/replica-0", TMP "xc/fast/replica-0");
    CHECK(rc == 0 || rc == 1);
    CHECK(strstr(out, "different experiments") == NULL);
}

/* report.explain: true puts an explanation per diverged cell in report.md (here the vary:
 * init cells, explained by their streams); off (the default), no such section. */
DT_TEST(report_section)
{
    train(TMP "rep", MLP,
          "--set 'policies=[run_to_run]' --set 'vary=[[], [init]]' --set report.explain=true");
    char *md = dt_read_file(TMP "rep/report.md", NULL);
    CHECK(md != NULL);
    if (md) {
        CHECK_CONTAINS(md, "## Why replicas part (detrain explain)");
        CHECK_CONTAINS(md, "### init/run_to_run\n\n```\nexplain: A = init/run_to_run/replica-0");
        CHECK_CONTAINS(md, "caused by vary: init");
        CHECK(strstr(md, "### none/run_to_run") == NULL); /* its replicas do not part */
        free(md);
    }
    train(TMP "rep2", MLP, "--set 'policies=[run_to_run]' --set 'vary=[[], [init]]'");
    md = dt_read_file(TMP "rep2/report.md", NULL);
    CHECK(md != NULL);
    if (md) CHECK(strstr(md, "detrain explain") == NULL);
    free(md);
}

/* CPU against GPU: at run_to_run (the bits may differ) explain names the first differing op
 * output when the traces part; at portable it finds no difference in step 1. */
DT_TEST(cpu_vs_gpu)
{
    dt_backend_destroy(gpu_or_skip());
    static const char T[] = "name: ex-dev\n"
                            "dataset: {train_limit: 512, test_limit: 100}\n"
                            "model: {kind: mlp, hidden: [32]}\n"
                            "train: {steps: 3, batch: 32, seed: 11}\n"
                            "policies: [run_to_run, portable]\n"
                            "replicas: 1\n"
                            "hash: {per_tensor: true}\n";
    train(TMP "dev_cpu", T, "--set backend.device=cpu");
    train(TMP "dev_gpu", T, "--set backend.device=cuda");
    const int rc =
        explain(NULL, TMP "dev_cpu/run_to_run/replica-0", TMP "dev_gpu/run_to_run/replica-0", "");
    if (strstr(out, "the traces part at step")) {
        CHECK_INT_EQ(rc, 1);
        CHECK_CONTAINS(out, "first differing op output");
    } else {
        CHECK_INT_EQ(rc, 0);
    }
    CHECK_INT_EQ(explain(NULL, TMP "dev_cpu/portable/replica-0", TMP "dev_gpu/portable/replica-0",
                         "--step 1"),
                 0);
    CHECK_CONTAINS(out, "no op output differs");
}

DT_TEST_MAIN(DT_CASE(hooked_bias_gradient), DT_CASE(hooked_conv_scatter), DT_CASE(hooked_epsilon),
             DT_CASE(deterministic_step_no_difference), DT_CASE(quickstart_fast_replicas),
             DT_CASE(replay_mismatch_refused), DT_CASE(replay_retries_missed_steps),
             DT_CASE(passes_over_agreed_parameters), DT_CASE(checkpoint_at_divergence),
             DT_CASE(usage_errors), DT_CASE(different_experiments_named), DT_CASE(report_section),
             DT_CASE(step_out_of_range), DT_CASE(cpu_vs_gpu))
