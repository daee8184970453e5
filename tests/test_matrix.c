/* Matrices of experiments (config key `matrix`, harness/matrix.c): parsing and every error
 * with its file:line:column and key, precedence file < entry's set < command line, the
 * matrix report's aggregation on a hand-built folder (unit), and real runs of a tiny
 * 2-entry matrix: matrix.json / report.md / matrix.csv, `detrain report` rebuilding them
 * byte for byte, --only, a cuda entry skipped where no CUDA backend opens, a failing entry
 * that does not stop the rest, config errors before any training (e2e). Fixtures are
 * written into DT_TEST_TMP_DIR by each case. */
#include "tests/check.h"
#include "tests/run_helper.h"

#include "core/util.h"
#include "harness/setup/config.h"
#include "harness/matrix.h"
#include "harness/analyze/report.h"
#include "nets/backend.h"

#define EXE DT_DETRAIN_EXE
#define TMP DT_TEST_TMP_DIR "/matrix."

static char out[65536];

/* A config file TMP<name>.yaml holding `text`; returns its path (static buffer per slot). */
static const char *fixture(const char *name, const char *text)
{
    static char paths[8][512];
    static int next;
    char *p = paths[next++ % 8];
    snprintf(p, 512, TMP "%s.yaml", name);
    dt_write_text(p, text);
    return p;
}

/* The shared part of the parsing fixtures: 7 lines, so `matrix:` is line 8. */
#define SHARED                                                                                     \
    "name: m\n"                                                                                    \
    "model: {kind: mlp, hidden: [4]}\n"                                                            \
    "train:\n"                                                                                     \
    "  steps: 10\n"                                                                                \
    "  batch: 8\n"                                                                                 \
    "policies: [portable]\n"                                                                       \
    "replicas: 2\n"

/* Expect `st`/err to be a config error at file:line:column whose message holds `want`. */
static void expect_at(enum dt_status st, const struct dt_error *err, const char *file, int line,
                      int column, const char *want)
{
    int before = dt_check_failures_;
    CHECK_INT_EQ(st, DT_ERR_CONFIG);
    CHECK_STR_EQ(err->file, file);
    CHECK_INT_EQ(err->line, line);
    CHECK_INT_EQ(err->column, column);
    CHECK_CONTAINS(err->msg, want);
    char prefix[1100];
    snprintf(prefix, sizeof prefix, "%s:%d:%d: ", file, line, column);
    CHECK(strncmp(err->msg, prefix, strlen(prefix)) == 0);
    if (dt_check_failures_ != before) fprintf(stderr, "  (message: %s)\n", err->msg);
}

/* A matrix fixture that dt_config_load_matrix must refuse at line:column. */
static void expect_matrix_error(const char *name, const char *text, int line, int column,
                                const char *want)
{
    static struct dt_experiment e;
    struct dt_error err = {0};
    const char *path = fixture(name, text);
    expect_at(dt_config_load_matrix(&e, path, NULL, 0, &err), &err, path, line, column, want);
}

/* A matrix fixture whose entry `entry` must fail to resolve at line:column. */
static void expect_entry_error(const char *name, const char *text, int entry,
                               const char *const *sets, int n_sets, const char *file, int line,
                               int column, const char *want)
{
    static struct dt_experiment e;
    struct dt_error err = {0};
    const char *path = fixture(name, text);
    CHECK_INT_EQ(dt_config_load_matrix(&e, path, sets, n_sets, &err), DT_OK);
    if (err.msg[0]) fprintf(stderr, "  unexpected: %s\n", err.msg);
    memset(&err, 0, sizeof err);
    expect_at(dt_config_load_entry(&e, path, entry, sets, n_sets, &err), &err, file ? file : path,
              line, column, want);
}

/* ---- parsing ------------------------------------------------------------------------------ */

DT_TEST(parse_entries)
{
    const char *path = fixture(
        "good",
        "name: m\n"
        "model: {kind: mlp}\n" /* no hidden: lenet does not read it */
        "train:\n"
        "  steps: 10\n"
        "  batch: 8\n"
        "policies: [portable]\n"
        "replicas: 2\n"
        "matrix:\n"           /* 8 */
        "  - name: mlp-cpu\n" /* 9 */
        "    set: {backend.device: cpu, policies: &p [fast, {base: portable, math: fast}]}\n"
        "  - name: lenet.gpu_1\n"
        "    set:\n"
        "      model: {kind: lenet}\n"
        "      model.overlap_pool: true\n"
        "      backend: {device: cuda, gpu: 3}\n"
        "      policies: *p\n"
        "  - name: plain\n");
    static struct dt_experiment m, e;
    struct dt_error err = {0};
    CHECK_INT_EQ(dt_config_load_matrix(&m, path, NULL, 0, &err), DT_OK);
    if (err.msg[0]) fprintf(stderr, "%s\n", err.msg);
    CHECK_INT_EQ(m.n_matrix, 3);
    CHECK_STR_EQ(m.matrix[0], "mlp-cpu");
    CHECK_STR_EQ(m.matrix[1], "lenet.gpu_1");
    CHECK_STR_EQ(m.matrix[2], "plain");
    CHECK_STR_EQ(m.name, "m");

    CHECK_INT_EQ(dt_config_load_entry(&e, path, 0, NULL, 0, &err), DT_OK);
    CHECK_STR_EQ(e.name, "mlp-cpu"); /* the entry names its experiment */
    CHECK_INT_EQ(e.n_matrix, 0);
    CHECK_INT_EQ(e.model.kind, DT_MODEL_MLP);
    CHECK_INT_EQ(e.model.n_hidden, 2); /* the default [256, 128] */
    CHECK_INT_EQ(e.backend.device, DT_DEVICE_CPU);
    CHECK_INT_EQ(e.n_policies, 2);
    CHECK_STR_EQ(e.policies[1].name, "portable+math=fast");
    CHECK_INT_EQ(e.train.steps, 10);

    CHECK_INT_EQ(dt_config_load_entry(&e, path, 1, NULL, 0, &err), DT_OK);
    if (err.msg[0]) fprintf(stderr, "%s\n", err.msg);
    CHECK_STR_EQ(e.name, "lenet.gpu_1");
    CHECK_INT_EQ(e.model.kind, DT_MODEL_LENET);
    CHECK_INT_EQ(e.model.overlap_pool, 1);
    CHECK_INT_EQ(e.backend.device, DT_DEVICE_CUDA);
    CHECK_INT_EQ(e.backend.gpu, 3);
    CHECK_INT_EQ(e.n_policies, 2); /* an alias gives the anchored list */
    CHECK_STR_EQ(e.policies[0].name, "fast");

    CHECK_INT_EQ(dt_config_load_entry(&e, path, 2, NULL, 0, &err), DT_OK);
    CHECK_STR_EQ(e.name, "plain"); /* no set: the shared keys alone */
    CHECK_INT_EQ(e.n_policies, 1);
    CHECK_STR_EQ(e.policies[0].name, "portable");

    /* its resolved JSON is a plain experiment that loads back (no `matrix` in it) */
    char *text = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&text, &size);
    dt_config_write_json(f, &e);
    fclose(f);
    CHECK(strstr(text, "matrix") == NULL);
    dt_write_text(TMP "good.entry.json", text);
    free(text);
    CHECK_INT_EQ(dt_config_load(&m, TMP "good.entry.json", NULL, 0, &err), DT_OK);
    CHECK_STR_EQ(m.name, "plain");

    /* no such entry; not a matrix */
    CHECK_INT_EQ(dt_config_load_entry(&e, path, 3, NULL, 0, &err), DT_ERR_USAGE);
    CHECK_CONTAINS(err.msg, "no matrix entry 4");
    const char *plain = fixture("plain", SHARED);
    CHECK_INT_EQ(dt_config_load_matrix(&m, plain, NULL, 0, &err), DT_OK);
    CHECK_INT_EQ(m.n_matrix, 0);
    CHECK_INT_EQ(dt_config_load_entry(&e, plain, 0, NULL, 0, &err), DT_ERR_USAGE);

    /* every other command takes one experiment: dt_config_load names the key */
    memset(&err, 0, sizeof err);
    expect_at(dt_config_load(&m, path, NULL, 0, &err), &err, path, 8, 1,
              "key 'matrix': this config is a matrix of 3 experiments");
}

/* file < entry's set < command line; within a set, pairs apply in the order written, and a
 * section mapping sets only the keys it names (as --set 'train={...}' does). */
DT_TEST(precedence)
{
    const char *path =
        fixture("prec", SHARED "matrix:\n"
                               "  - name: a\n"
                               "    set: {train.steps: 20, train: {batch: 16}, replicas: 3}\n"
                               "  - name: b\n"
                               "    set: {train.steps: 5, train: {steps: 6}}\n"
                               "  - name: c\n");
    static struct dt_experiment e;
    struct dt_error err = {0};
    CHECK_INT_EQ(dt_config_load_entry(&e, path, 0, NULL, 0, &err), DT_OK);
    CHECK_INT_EQ(e.train.steps, 20); /* entry over file */
    CHECK_INT_EQ(e.train.batch, 16);
    CHECK_INT_EQ(e.replicas, 3);
    CHECK_INT_EQ(dt_config_load_entry(&e, path, 1, NULL, 0, &err), DT_OK);
    CHECK_INT_EQ(e.train.steps, 6); /* the later pair wins */
    CHECK_INT_EQ(e.train.batch, 8); /* the file's: the section set only steps */
    CHECK_INT_EQ(dt_config_load_entry(&e, path, 2, NULL, 0, &err), DT_OK);
    CHECK_INT_EQ(e.train.steps, 10); /* the file's */

    const char *sets[] = {"train.steps=30", "name=other"};
    CHECK_INT_EQ(dt_config_load_entry(&e, path, 0, sets, 2, &err), DT_OK);
    CHECK_INT_EQ(e.train.steps, 30); /* command line over entry */
    CHECK_INT_EQ(e.train.batch, 16);
    CHECK_STR_EQ(e.name, "a"); /* the entry still names its experiment */
    CHECK_INT_EQ(dt_config_load_entry(&e, path, 2, sets, 1, &err), DT_OK);
    CHECK_INT_EQ(e.train.steps, 30);
    static struct dt_experiment m;
    CHECK_INT_EQ(dt_config_load_matrix(&m, path, sets, 2, &err), DT_OK);
    CHECK_STR_EQ(m.name, "other"); /* ... and a --set name renames the matrix */
}

DT_TEST(structure_errors)
{
    expect_matrix_error("e_unknown_set_key",
                        SHARED "matrix:\n  - name: a\n    set: {train.stepz: 5}\n", 10, 11,
                        "unknown key 'train.stepz'; did you mean 'train.steps'?");
    expect_matrix_error("e_duplicate_name",
                        SHARED "matrix:\n  - name: a\n  - name: b\n  - name: a\n", 11, 11,
                        "key 'matrix', item 3: duplicate entry name 'a' (items 1 and 3)");
    expect_matrix_error("e_name_chars", SHARED "matrix:\n  - name: a/b\n", 9, 11,
                        "key 'matrix', item 1: 'name': 'a/b' contains '/' at position 2");
    expect_matrix_error("e_name_dots", SHARED "matrix:\n  - name: ..\n", 9, 11,
                        "key 'matrix', item 1: 'name': '..' cannot name a folder");
    expect_matrix_error("e_missing_name", SHARED "matrix:\n  - name: a\n  - set: {replicas: 2}\n",
                        10, 5, "key 'matrix', item 2: missing 'name'");
    expect_matrix_error("e_entry_key", SHARED "matrix:\n  - name: a\n    sett: {}\n", 10, 5,
                        "key 'matrix', item 1: unknown key 'sett' (an entry has 'name' and 'set')");
    expect_matrix_error("e_entry_dup", SHARED "matrix:\n  - {name: a, set: {}, name: b}\n", 9, 24,
                        "key 'matrix', item 1: duplicate key 'name'");
    expect_matrix_error("e_set_type", SHARED "matrix:\n  - name: a\n    set: [replicas]\n", 10, 10,
                        "key 'matrix', item 1: 'set': expected a mapping");
    expect_matrix_error("e_set_name", SHARED "matrix:\n  - name: a\n    set: {name: b}\n", 10, 11,
                        "key 'name' cannot be set in a matrix entry");
    expect_matrix_error("e_set_matrix", SHARED "matrix:\n  - name: a\n    set: {matrix: []}\n", 10,
                        11, "key 'matrix' cannot be set in a matrix entry");
    expect_matrix_error("e_set_dup",
                        SHARED "matrix:\n  - name: a\n    set: {replicas: 2, replicas: 3}\n", 10,
                        24, "'set': duplicate key 'replicas' (first given at 10:11)");
    expect_matrix_error("e_item_type", SHARED "matrix:\n  - a\n", 9, 5,
                        "key 'matrix', item 1: expected a mapping {name: NAME, set:");
    expect_matrix_error("e_not_list", SHARED "matrix: {name: a}\n", 8, 9,
                        "key 'matrix': expected a list of entries");
    expect_matrix_error("e_empty", SHARED "matrix: []\n", 8, 9,
                        "key 'matrix': expected 1 to 32 items, got 0");
    char many[8192] = SHARED "matrix:\n";
    for (int i = 0; i < 33; i++)
        snprintf(many + strlen(many), sizeof many - strlen(many), "  - name: e%d\n", i);
    expect_matrix_error("e_many", many, 9, 3, "key 'matrix': expected 1 to 32 items, got 33");

    /* only the file lists entries */
    static struct dt_experiment e;
    struct dt_error err = {0};
    const char *sets[] = {"replicas=2", "matrix=[{name: a}]"};
    const char *path = fixture("e_set_cli", SHARED);
    expect_at(dt_config_load_matrix(&e, path, sets, 2, &err), &err, "--set", 2, 8,
              "key 'matrix' cannot be given with --set");
}

/* Errors that appear when an entry is resolved: at the value in the file (or the --set),
 * naming the key, and the entry. */
DT_TEST(entry_errors)
{
    expect_entry_error(
        "e_bad_value",
        SHARED "matrix:\n  - name: a\n  - name: b\n    set: {replicas: 2, train.steps: abc}\n", 1,
        NULL, 0, NULL, 11, 37,
        "key 'train.steps': expected an integer, got 'abc' "
        "(matrix entry 'b')");
    expect_entry_error(
        "e_bad_section", SHARED "matrix:\n  - name: a\n    set:\n      train: {steps: 0}\n", 0,
        NULL, 0, NULL, 11, 22, "key 'train.steps': value 0 is out of range [1, 1000000000]");
    expect_entry_error(
        "e_bad_policy",
        SHARED "matrix:\n  - name: a\n    set: {policies: [fast, {base: fast, math: exactly}]}\n",
        0, NULL, 0, NULL, 10, 47,
        "key 'policies', item 2: control 'math': unknown value 'exactly'");
    /* a key of another model kind: reported where the file set it, naming the entry */
    expect_entry_error("e_model_key",
                       SHARED "matrix:\n  - name: cnn\n    set: {model.kind: lenet}\n", 0, NULL, 0,
                       NULL, 2, 20,
                       "key 'model.hidden' applies to model.kind mlp and bnn_mlp "
                       "only, not lenet (matrix entry 'cnn')");
    /* a required key that neither the file nor the entry gives */
    expect_entry_error("e_required",
                       "name: m\ntrain: {steps: 3}\nmatrix:\n  - name: x\n    set: {replicas: 2}\n"
                       "  - name: y\n    set: {model.kind: mlp}\n",
                       0, NULL, 0, NULL, 1, 1,
                       "missing required key 'model.kind' (matrix entry 'x')");
    /* a --set that fails over this entry only: reported at the --set */
    const char *sets[] = {"model.overlap_pool=true"};
    static struct dt_experiment e;
    struct dt_error err = {0};
    const char *path = fixture(
        "e_cli_entry", "name: m\nmodel: {kind: mlp}\ntrain: {steps: 3}\nmatrix:\n  - name: k\n");
    expect_at(dt_config_load_entry(&e, path, 0, sets, 1, &err), &err, "--set", 1, 20,
              "key 'model.overlap_pool' applies to model.kind lenet only, not mlp (matrix entry "
              "'k')");
}

/* ---- the report's aggregation, on a hand-made matrix folder ---------------------------------- */

static void mkdir_or_die(const char *path)
{
    struct dt_error err = {0};
    if (dt_mkdir_p(path, &err) != DT_OK) {
        fprintf(stderr, "%s\n", err.msg);
        exit(1);
    }
}

/* DIR/NAME/config.json from YAML, as `detrain run` saves it. */
static void entry_config(const char *dir, const char *name, const char *yaml)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    mkdir_or_die(path);
    snprintf(path, sizeof path, "%s/%s.yaml", dir, name);
    dt_write_text(path, yaml);
    static struct dt_experiment e;
    struct dt_error err = {0};
    if (dt_config_load(&e, path, NULL, 0, &err) != DT_OK) {
        fprintf(stderr, "%s\n", err.msg);
        exit(1);
    }
    snprintf(path, sizeof path, "%s/%s/config.json", dir, name);
    FILE *f = fopen(path, "w");
    dt_config_write_json(f, &e);
    fclose(f);
}

static const char *summary_head = DT_REPORT_SUMMARY_HEADER "\n";

/* Field `col` (by header name) of data row `row` of DIR/matrix.csv; "<missing>" if none. */
static const char *mfield(const char *dir, int row, const char *col)
{
    static char buf[256];
    char path[1024];
    snprintf(path, sizeof path, "%s/matrix.csv", dir);
    if (dt_csv_col(buf, sizeof buf, path, row, col) != 0) snprintf(buf, sizeof buf, "<missing>");
    return buf;
}

#define CHECK_M(dir, row, col, want) CHECK_STR_EQ(mfield(dir, row, col), want)

/* Entries: `nets` (done, cpu, mlp): cells with 3 distinct digests from step 1, identical,
 * divergent late (step 7) though the final digests agree, and one with a single replica
 * (no pair: not available); `gpu` (skipped, cuda); `gone` (failed, cpu, nothing written);
 * `cnn` (done, cuda, lenet). The CSV and report.md must tell every one apart. */
static void build_folder(const char *dir)
{
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", dir, dir);
    CHECK_INT_EQ(system(cmd), 0);
    char path[1024];
    snprintf(path, sizeof path, "%s/matrix.json", dir);
    dt_write_text(
        path,
        "{\"tool\": \"detrain\", \"matrix\": \"agg\", \"config_file\": \"x.yaml\", \"command\": "
        "\"\",\n"
        " \"entries\": [\n"
        "  {\"name\": \"nets\", \"status\": \"done\", \"reason\": \"\", \"device\": \"cpu\", "
        "\"model\": \"mlp\", \"policies\": [], \"seconds\": 1.5},\n"
        "  {\"name\": \"gpu\", \"status\": \"skipped\", \"reason\": \"backend 'cuda': no CUDA "
        "device available\", \"device\": \"cuda\", \"model\": \"bnn_mlp\", \"policies\": [], "
        "\"seconds\": null},\n"
        "  {\"name\": \"gone\", \"status\": \"failed\", \"reason\": \"dataset missing\", "
        "\"device\": \"cpu\", \"model\": \"mlp\", \"policies\": [], \"seconds\": 0.1},\n"
        "  {\"name\": \"cnn\", \"status\": \"done\", \"reason\": \"\", \"device\": \"cuda\", "
        "\"model\": \"lenet\", \"policies\": [], \"seconds\": 2}\n"
        " ]}\n");
    entry_config(dir, "nets",
                 "name: nets\nmodel: {kind: mlp}\ntrain: {steps: 9}\nreplicas: 3\n"
                 "policies: [fast, portable, {base: fast, atomics: fixed_point}, "
                 "{base: portable, name: solo}]\n");
    snprintf(path, sizeof path, "%s/nets/summary.csv", dir);
    char text[4096];
    snprintf(text, sizeof text,
             "%s"
             "fast,none,fast,3,3,3,1,dense0.weight,0.8,0.01,0.05,0.06,1,0.1,0.01,0.02,2.5,0.5,1."
             "000000,,,baseline\n"
             "portable,none,portable,3,3,1,-1,,0.8,0,0,0,0,0,0,0,3.0,0.5,1.200000,1.100000,1."
             "300000,conclusive\n"
             "fast+atomics=fixed_point,none,fast+atomics=fixed_point,3,3,1,7,dense1.bias,0.8,0,0,0,"
             "0,0,0,0,2.6,0.5,1.010000,0.980000,1.040000,inconclusive\n"
             "solo,none,solo,3,1,1,,,0.8,,,,,,,,3.1,0.5,,,,\n",
             summary_head);
    dt_write_text(path, text);
    entry_config(dir, "cnn",
                 "name: cnn\nmodel: {kind: lenet}\ntrain: {steps: 9}\nreplicas: 2\n"
                 "backend: {device: cuda}\npolicies: [portable]\n");
    snprintf(path, sizeof path, "%s/cnn/summary.csv", dir);
    snprintf(text, sizeof text,
             "%s"
             "portable,none,portable,2,2,2,0,conv0.weight,0.8,0,0,0,0,0,0,0,1.0,0.1,,,,\n",
             summary_head);
    dt_write_text(path, text);
    /* the GPU's host waits, in each replica's run.json (the CPU entry's have none); a
     * replica that did not complete is left out of the median */
    static const char *const runs[3] = {
        "{\"state\": \"completed\", \"host_waits_per_step\": 1.1, \"host_waits_first_step\": 3, "
        "\"host_waits_steady\": 1}\n",
        "{\"state\": \"completed\", \"host_waits_per_step\": 2.2, \"host_waits_first_step\": 6, "
        "\"host_waits_steady\": 2}\n",
        "{\"state\": \"interrupted\", \"host_waits_steady\": 40}\n"};
    for (int r = 0; r < 3; r++) {
        snprintf(path, sizeof path, "%s/cnn/portable/replica-%d", dir, r);
        snprintf(text, sizeof text, "mkdir -p '%s'", path);
        CHECK_INT_EQ(system(text), 0);
        snprintf(path, sizeof path, "%s/cnn/portable/replica-%d/run.json", dir, r);
        dt_write_text(path, runs[r]);
    }
}

DT_TEST(report_aggregation)
{
    const char *dir = TMP "agg";
    build_folder(dir);
    struct dt_report_options opt = {.print_summary = false, .gnuplot = "none", .quiet = true};
    struct dt_error err = {0};
    CHECK_INT_EQ(dt_matrix_report(dir, &opt, false, &err), DT_OK);
    if (err.msg[0]) fprintf(stderr, "%s\n", err.msg);
    /* cpu rows first, then cuda; skipped/failed entries have no rows */
    CHECK_M(dir, 0, "device", "cpu");
    CHECK_M(dir, 0, "entry", "nets");
    CHECK_M(dir, 0, "policy", "fast");
    CHECK_M(dir, 0, "controls", "unordered/float/fast");
    CHECK_M(dir, 0, "distinct_final_digests", "3");
    CHECK_M(dir, 0, "first_divergent_step", "1"); /* divergent: never shown as "-" */
    CHECK_M(dir, 0, "overhead_verdict", "baseline");
    CHECK_M(dir, 1, "policy", "portable");
    CHECK_M(dir, 1, "distinct_final_digests", "1");
    CHECK_M(dir, 1, "first_divergent_step", "-"); /* identical */
    CHECK_M(dir, 1, "overhead_ratio", "1.200000");
    CHECK_M(dir, 1, "overhead_ci_lo", "1.100000");
    CHECK_M(dir, 1, "overhead_ci_hi", "1.300000");
    CHECK_M(dir, 2, "controls", "unordered/fixed_point/fast");
    CHECK_M(dir, 2, "distinct_final_digests", "1");
    CHECK_M(dir, 2, "first_divergent_step", "7"); /* same final digests, yet diverged */
    CHECK_M(dir, 2, "overhead_verdict", "inconclusive");
    CHECK_M(dir, 3, "policy", "solo");
    CHECK_M(dir, 3, "completed", "1");
    CHECK_M(dir, 3, "first_divergent_step", ""); /* not available, not identical */
    CHECK_M(dir, 4, "device", "cuda");
    CHECK_M(dir, 4, "entry", "cnn");
    CHECK_M(dir, 4, "model", "lenet");
    CHECK_M(dir, 4, "controls", "exact/fixed_point/portable/own");
    CHECK_M(dir, 4, "first_divergent_step", "0");
    CHECK_M(dir, 4, "distinct_final_digests", "2");
    CHECK_M(dir, 5, "device", "<missing>");
    CHECK_M(dir, 4, "host_waits_steady", "1.5000"); /* (1 + 2) / 2; the interrupted one out */
    CHECK_M(dir, 4, "host_waits_first_step", "4.5000");
    CHECK_M(dir, 4, "host_waits_per_step", "1.6500");
    CHECK_M(dir, 0, "host_waits_steady", ""); /* the CPU records none */
    CHECK_M(dir, 0, "host_waits_per_step", "");

    char path[1024], text[1024];
    snprintf(path, sizeof path, "%s/report.md", dir);
    char *md = dt_read_file(path, NULL);
    CHECK(md != NULL);
    if (!md) return;
    CHECK_CONTAINS(md, "# agg (matrix)\n\n4 entries: 2 done, 1 skipped, 1 failed.");
    CHECK_CONTAINS(
        md, "## cpu\n\n| entry | model | policy | controls | replicas | distinct digests "
            "| first divergent step | step ms | hash share | ratio vs fast [95% interval] |");
    /* hash share = hash / (update + hash): 0.5 / 3.0, 0.5 / 3.5, 0.5 / 3.1 */
    CHECK_CONTAINS(
        md,
        "| nets | mlp | fast | unordered/float/fast | 3/3 | 3 | 1 | 2.500 | 16.7% | baseline |");
    CHECK_CONTAINS(md, "| nets | mlp | portable | exact/fixed_point/portable | 3/3 | 1 | - | 3.000 "
                       "| 14.3% | 1.200x [1.100, 1.300] |");
    CHECK_CONTAINS(md, "| 3/3 | 1 | 7 | 2.600 | 16.1% | 1.010x [0.980, 1.040] inconclusive |");
    CHECK_CONTAINS(md, "| nets | mlp | solo | exact/fixed_point/portable | 1/3 | 1 | n/a | 3.100 | "
                       "13.9% | - |");
    /* the noise table: cells with two or more completed replicas, the summary's spread */
    CHECK_CONTAINS(md, "Noise (cpu): the replicas' spread, cell by cell.\n\n| entry | policy | "
                       "replicas | test accuracy | its sd | churn | per-class sd |");
    CHECK_CONTAINS(md, "| nets | fast | 3 | 0.8000 | 0.0100 | 0.0500 | 0.0100 |\n");
    CHECK_CONTAINS(md, "| nets | portable | 3 | 0.8000 | 0.0000 | 0.0000 | 0.0000 |\n");
    CHECK(strstr(md, "| nets | solo | 1 |") == NULL); /* one replica: no spread */
    CHECK_CONTAINS(md, "| cnn | portable | 2 | 0.8000 | 0.0000 | 0.0000 | 0.0000 |\n");
    CHECK_M(dir, 0, "hash_ms_median", "0.500000");
    CHECK_M(dir, 0, "hash_share", "0.166667");
    CHECK_M(dir, 0, "test_acc_std", "0.010000");
    CHECK_M(dir, 0, "churn_mean", "0.050000");
    CHECK_M(dir, 0, "class_acc_std_mean", "0.010000");
    CHECK_M(dir, 3, "test_acc_std", ""); /* not available */
    CHECK_CONTAINS(md, "Failed:\n\n- `gone` (mlp): dataset missing; no results were written\n");
    CHECK_CONTAINS(md, "## cuda\n\n| entry |");
    CHECK_CONTAINS(md, "| cnn | lenet | portable | exact/fixed_point/portable/own | 2/2 | 2 | 0 |");
    /* a host-waits column on the device that counted them, none on the CPU */
    CHECK_CONTAINS(md, "ratio vs fast [95% interval] | host waits a step (first step) |\n"
                       "|---|---|---|---|--:|--:|--:|--:|--:|---|--:|\n| cnn |");
    CHECK_CONTAINS(md, "| 1.000 | 9.1% | - | 1.50 (4.5) |\n");
    CHECK(strstr(md, "host waits a step (first") > strstr(md, "## cuda"));
    CHECK_CONTAINS(md, "Skipped:\n\n- `gpu` (bnn_mlp): backend 'cuda': no CUDA device available\n");
    CHECK(strstr(md, "## cpu") < strstr(md, "## cuda"));

    /* the same folder gives the same bytes */
    char *csv1 = NULL;
    snprintf(path, sizeof path, "%s/matrix.csv", dir);
    csv1 = dt_read_file(path, NULL);
    CHECK_INT_EQ(dt_matrix_report(dir, &opt, false, &err), DT_OK);
    char *csv2 = dt_read_file(path, NULL);
    CHECK(csv1 && csv2 && strcmp(csv1, csv2) == 0);
    snprintf(path, sizeof path, "%s/report.md", dir);
    char *md2 = dt_read_file(path, NULL);
    CHECK(md2 && strcmp(md, md2) == 0);
    free(csv1);
    free(csv2);
    free(md);
    free(md2);

    /* a done entry with a malformed or missing summary is an error naming the file */
    snprintf(path, sizeof path, "%s/cnn/summary.csv", dir);
    snprintf(text, sizeof text, "%sportable,none,portable,2,2,x,0,,,,,,,,,,1.0,,,,,\n",
             summary_head);
    dt_write_text(path, text);
    CHECK_INT_EQ(dt_matrix_report(dir, &opt, false, &err), DT_ERR_DATA);
    CHECK_CONTAINS(err.msg, "cnn/summary.csv:2: bad distinct_final_digests 'x'");
    CHECK_INT_EQ(remove(path), 0);
    CHECK_INT_EQ(dt_matrix_report(dir, &opt, false, &err), DT_ERR_IO);
    CHECK_CONTAINS(err.msg, "cnn/summary.csv: missing");
    /* and a matrix.json that names a folder outside the matrix is refused */
    snprintf(path, sizeof path, "%s/matrix.json", dir);
    dt_write_text(path, "{\"matrix\": \"x\", \"entries\": [{\"name\": \"../x\", \"status\": "
                        "\"done\", \"reason\": \"\", \"device\": \"cpu\", \"model\": \"mlp\"}]}\n");
    CHECK_INT_EQ(dt_matrix_report(dir, &opt, false, &err), DT_ERR_DATA);
    CHECK_CONTAINS(err.msg, "matrix.json: an entry name is not a folder name");
}

/* ---- real runs ------------------------------------------------------------------------------ */

/* Tiny shared settings (500 training / 200 test images, 4 steps): a run of both entries
 * takes about a second. Entry a: 2 policies (fast measured against), entry b: one. */
#define RUN_SHARED                                                                                 \
    "name: tinymatrix\n"                                                                           \
    "dataset: {train_limit: 500, test_limit: 200}\n"                                               \
    "model: {kind: mlp, hidden: [8]}\n"                                                            \
    "train: {steps: 4, batch: 16, seed: 3}\n"                                                      \
    "backend: {threads: 2}\n"                                                                      \
    "replicas: 2\n"                                                                                \
    "vary: []\n"                                                                                   \
    "hash: {per_tensor: true}\n"                                                                   \
    "report: {snapshots: 0, overhead_samples: 20, overhead_warmup: 0}\n"

static const char *run_config(void)
{
    return fixture("run", RUN_SHARED "matrix:\n"
                                     "  - name: a\n"
                                     "    set: {policies: [fast, portable]}\n"
                                     "  - name: b\n"
                                     "    set: {policies: [portable], model.hidden: [4]}\n");
}

/* Field of data row `row` of FILE in DIR, by column name. */
static const char *csv_at(const char *dir, const char *file, int row, const char *col)
{
    static char buf[256];
    char path[1200];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    if (dt_csv_col(buf, sizeof buf, path, row, col) != 0) snprintf(buf, sizeof buf, "<missing>");
    return buf;
}

DT_TEST(run_two_entries)
{
    const char *cfg = run_config(), *dir = TMP "run2";
    int rc = dt_run_capture(out, sizeof out, "rm -rf '%s' && '%s' run '%s' --out '%s'", dir, EXE,
                            cfg, dir);
    if (rc != 0) fprintf(stderr, "%s\n", out);
    CHECK_INT_EQ(rc, 0);
    CHECK_CONTAINS(out, "matrix: entry 1/2 a\n");
    CHECK_CONTAINS(out, "matrix: entry 2/2 b\n");
    char path[1024];
    snprintf(path, sizeof path, "%s/matrix.json", dir);
    char *json = dt_read_file(path, NULL);
    CHECK(json != NULL);
    if (json) {
        CHECK_CONTAINS(json, "\"matrix\": \"tinymatrix\"");
        CHECK_CONTAINS(json,
                       "{\"name\": \"a\", \"status\": \"done\", \"reason\": \"\", \"device\": "
                       "\"cpu\", \"model\": \"mlp\", \"policies\": [\"fast\", \"portable\"]");
        CHECK_CONTAINS(json,
                       "{\"name\": \"b\", \"status\": \"done\", \"reason\": \"\", \"device\": "
                       "\"cpu\", \"model\": \"mlp\", \"policies\": [\"portable\"]");
    }
    free(json);
    /* each entry is a complete experiment, named after the entry */
    snprintf(path, sizeof path, "%s/a/portable/replica-1/trace.csv", dir);
    CHECK(dt_path_exists(path));
    snprintf(path, sizeof path, "%s/b/config.json", dir);
    char *bcfg = dt_read_file(path, NULL);
    CHECK(bcfg && strstr(bcfg, "\"name\":\"b\"") && strstr(bcfg, "\"hidden\":[4]"));
    free(bcfg);
    /* rows: a/fast, a/portable, b/portable, each the entry's own summary figures */
    const char *rows[3][2] = {{"a", "fast"}, {"a", "portable"}, {"b", "portable"}};
    for (int r = 0; r < 3; r++) {
        char edir[1024];
        snprintf(edir, sizeof edir, "%s/%s", dir, rows[r][0]);
        int er = r == 1; /* row in the entry's summary.csv */
        CHECK_STR_EQ(csv_at(dir, "matrix.csv", r, "entry"), rows[r][0]);
        CHECK_STR_EQ(csv_at(dir, "matrix.csv", r, "policy"), rows[r][1]);
        CHECK_STR_EQ(csv_at(dir, "matrix.csv", r, "device"), "cpu");
        CHECK_STR_EQ(csv_at(dir, "matrix.csv", r, "replicas"), "2");
        CHECK_STR_EQ(csv_at(dir, "matrix.csv", r, "completed"), "2");
        char want[256];
        snprintf(want, sizeof want, "%s",
                 csv_at(edir, "summary.csv", er, "distinct_final_digests"));
        CHECK_STR_EQ(csv_at(dir, "matrix.csv", r, "distinct_final_digests"), want);
        snprintf(want, sizeof want, "%s", csv_at(edir, "summary.csv", er, "first_divergent_step"));
        if (strcmp(want, "-1") == 0) snprintf(want, sizeof want, "-");
        CHECK_STR_EQ(csv_at(dir, "matrix.csv", r, "first_divergent_step"), want);
        snprintf(want, sizeof want, "%s", csv_at(edir, "summary.csv", er, "overhead_ratio"));
        CHECK_STR_EQ(csv_at(dir, "matrix.csv", r, "overhead_ratio"), want);
    }
    /* portable keeps its replicas identical: one digest, never divergent */
    CHECK_STR_EQ(csv_at(dir, "matrix.csv", 1, "distinct_final_digests"), "1");
    CHECK_STR_EQ(csv_at(dir, "matrix.csv", 1, "first_divergent_step"), "-");
    const char *verdict = csv_at(dir, "matrix.csv", 1, "overhead_verdict"); /* vs fast */
    CHECK(strcmp(verdict, "conclusive") == 0 || strcmp(verdict, "inconclusive") == 0);
    CHECK_STR_EQ(csv_at(dir, "matrix.csv", 2, "first_divergent_step"), "-");
    CHECK_STR_EQ(csv_at(dir, "matrix.csv", 3, "entry"), "<missing>");

    /* `detrain report DIR` rebuilds every entry's report and the same matrix files */
    char md[1024], csv[1024], md_copy[1100], csv_copy[1100];
    snprintf(md, sizeof md, "%s/report.md", dir);
    snprintf(csv, sizeof csv, "%s/matrix.csv", dir);
    snprintf(md_copy, sizeof md_copy, "%s.report.md", dir);
    snprintf(csv_copy, sizeof csv_copy, "%s.matrix.csv", dir);
    CHECK_INT_EQ(dt_run_capture(out, sizeof out,
                                "cp '%s' '%s' && cp '%s' '%s' && rm '%s' '%s' "
                                "'%s/a/summary.csv'",
                                md, md_copy, csv, csv_copy, md, csv, dir),
                 0);
    rc = dt_run_capture(out, sizeof out, "'%s' report '%s' --no-plots", EXE, dir);
    if (rc != 0) fprintf(stderr, "%s\n", out);
    CHECK_INT_EQ(rc, 0);
    CHECK_CONTAINS(out, "matrix tinymatrix:");
    CHECK(dt_files_equal(md, md_copy));
    CHECK(dt_files_equal(csv, csv_copy));
    snprintf(path, sizeof path, "%s/a/summary.csv", dir);
    CHECK(dt_path_exists(path));

    /* `--tables-only`: the matrix files again from the entries' summaries as they are (a
     * committed folder, its per-step files packed): no entry rebuilt -- its report.md, taken
     * away here, stays away -- and the same bytes */
    CHECK_INT_EQ(dt_run_capture(out, sizeof out, "rm '%s' '%s' '%s/a/report.md'", md, csv, dir), 0);
    rc = dt_run_capture(out, sizeof out, "'%s' report '%s' --tables-only --quiet", EXE, dir);
    if (rc != 0) fprintf(stderr, "%s\n", out);
    CHECK_INT_EQ(rc, 0);
    CHECK(dt_files_equal(md, md_copy));
    CHECK(dt_files_equal(csv, csv_copy));
    snprintf(path, sizeof path, "%s/a/report.md", dir);
    CHECK(!dt_path_exists(path));
    /* anything but a matrix folder is refused, naming the option */
    rc = dt_run_capture(out, sizeof out, "'%s' report '%s/a' --tables-only", EXE, dir);
    CHECK_INT_EQ(rc, 2);
    CHECK_CONTAINS(out, "--tables-only takes a matrix folder");
}

DT_TEST(only_entries)
{
    const char *cfg = run_config(), *dir = TMP "only";
    int rc = dt_run_capture(out, sizeof out,
                            "rm -rf '%s' && '%s' run '%s' --out '%s' --quiet "
                            "--only b",
                            dir, EXE, cfg, dir);
    if (rc != 0) fprintf(stderr, "%s\n", out);
    CHECK_INT_EQ(rc, 0);
    char path[1024];
    snprintf(path, sizeof path, "%s/a", dir);
    CHECK(!dt_path_exists(path));
    CHECK_STR_EQ(csv_at(dir, "matrix.csv", 0, "entry"), "b");
    CHECK_STR_EQ(csv_at(dir, "matrix.csv", 1, "entry"), "<missing>");
    snprintf(path, sizeof path, "%s/matrix.json", dir);
    char *json = dt_read_file(path, NULL);
    CHECK(json && !strstr(json, "\"name\": \"a\"") && strstr(json, "\"name\": \"b\""));
    free(json);

    /* an unknown name is a usage error that lists the entries; nothing runs */
    const char *dir2 = TMP "only_bad";
    rc = dt_run_capture(out, sizeof out, "rm -rf '%s' && '%s' run '%s' --out '%s' --only b,zz",
                        dir2, EXE, cfg, dir2);
    CHECK_INT_EQ(rc, 2);
    CHECK_CONTAINS(out, "--only: no matrix entry 'zz' in ");
    CHECK_CONTAINS(out, "(its entries: a, b)");
    CHECK(!dt_path_exists(dir2));
    /* --only on a plain config */
    rc = dt_run_capture(out, sizeof out, "'%s' run '%s/tiny.yaml' --out '%s' --only a", EXE,
                        DT_TEST_DATA_DIR, dir2);
    CHECK_INT_EQ(rc, 2);
    CHECK_CONTAINS(out, "--only picks matrix entries");
}

/* A cuda entry is skipped with one line where the CUDA backend cannot be opened (no device,
 * or a build without CUDA), and the matrix still succeeds; where it opens, it runs. */
DT_TEST(cuda_entry_skipped)
{
    struct dt_backend *be = NULL;
    struct dt_backend_options bopt = {DT_BACKEND_CUDA, 0, 0};
    struct dt_error berr = {0};
    bool opens = dt_backend_create(&be, &bopt, &berr) == DT_OK;
    if (opens) opens = dt_backend_missing_op(be) == NULL;
    if (be) dt_backend_destroy(be);
    const char *cfg = fixture("cuda", RUN_SHARED "policies: [portable]\n"
                                                 "matrix:\n"
                                                 "  - name: gpu\n"
                                                 "    set: {backend.device: cuda}\n"
                                                 "  - name: host\n");
    const char *dir = TMP "cuda";
    int rc = dt_run_capture(out, sizeof out, "rm -rf '%s' && '%s' run '%s' --out '%s' --quiet", dir,
                            EXE, cfg, dir);
    if (rc != 0) fprintf(stderr, "%s\n", out);
    CHECK_INT_EQ(rc, 0);
    char path[1024];
    snprintf(path, sizeof path, "%s/matrix.json", dir);
    char *json = dt_read_file(path, NULL);
    CHECK(json != NULL);
    if (!json) return;
    CHECK_CONTAINS(json, "{\"name\": \"host\", \"status\": \"done\"");
    if (opens) {
        CHECK_CONTAINS(json, "{\"name\": \"gpu\", \"status\": \"done\"");
    } else {
        fprintf(stderr, "no CUDA backend here (%s): the entry must be skipped\n", berr.msg);
        char want[1400];
        snprintf(want, sizeof want, "matrix: entry 1/2 gpu skipped: %s\n", berr.msg);
        CHECK_CONTAINS(out, want);
        CHECK_CONTAINS(json, "{\"name\": \"gpu\", \"status\": \"skipped\", \"reason\": \"backend "
                             "'cuda'");
        snprintf(path, sizeof path, "%s/gpu", dir);
        CHECK(!dt_path_exists(path));
        snprintf(path, sizeof path, "%s/report.md", dir);
        char *md = dt_read_file(path, NULL);
        CHECK(md &&
              strstr(md, "## cuda\n\nNo results on this device.\n\nSkipped:\n\n- `gpu` (mlp): "
                         "backend 'cuda'"));
        free(md);
    }
    free(json);
}

/* A failing entry is recorded, the rest still run, and the exit status is 1. */
DT_TEST(failed_entry_others_run)
{
    const char *cfg =
        fixture("fail", RUN_SHARED "policies: [portable]\n"
                                   "matrix:\n"
                                   "  - name: broken\n"
                                   "    set: {dataset.path: /nonexistent/fashion-mnist}\n"
                                   "  - name: fine\n");
    const char *dir = TMP "fail";
    int rc = dt_run_capture(out, sizeof out, "rm -rf '%s' && '%s' run '%s' --out '%s' --quiet", dir,
                            EXE, cfg, dir);
    CHECK_INT_EQ(rc, 1);
    CHECK_CONTAINS(out, "matrix: entry 1/2 broken failed: ");
    CHECK_CONTAINS(out, "matrix: 1 of 2 entries failed (broken)");
    char path[1024];
    snprintf(path, sizeof path, "%s/matrix.json", dir);
    char *json = dt_read_file(path, NULL);
    CHECK(json && strstr(json, "{\"name\": \"broken\", \"status\": \"failed\", \"reason\": \"") &&
          strstr(json, "/nonexistent/fashion-mnist") &&
          strstr(json, "{\"name\": \"fine\", \"status\": \"done\""));
    free(json);
    CHECK_STR_EQ(csv_at(dir, "matrix.csv", 0, "entry"), "fine");
    snprintf(path, sizeof path, "%s/report.md", dir);
    char *md = dt_read_file(path, NULL);
    CHECK(md && strstr(md, "Failed:\n\n- `broken` (mlp): "));
    free(md);
}

/* Every selected entry is resolved before anything runs: a bad value in entry 2 stops the
 * matrix with exit 2 and its file:line:column, before entry 1 trains. */
DT_TEST(config_error_before_any_run)
{
    const char *cfg = fixture("badrun", RUN_SHARED "matrix:\n" /* 10 */
                                                   "  - name: a\n"
                                                   "  - name: b\n"
                                                   "    set: {train.batch: -3}\n"); /* 13 */
    const char *dir = TMP "badrun";
    int rc = dt_run_capture(out, sizeof out, "rm -rf '%s' && '%s' run '%s' --out '%s'", dir, EXE,
                            cfg, dir);
    CHECK_INT_EQ(rc, 2);
    char want[1024];
    snprintf(want, sizeof want,
             "%s:13:24: key 'train.batch': value -3 is out of range [1, 65536] "
             "(matrix entry 'b')",
             cfg);
    CHECK_CONTAINS(out, want);
    CHECK(!dt_path_exists(dir));
    /* --only past it runs */
    rc =
        dt_run_capture(out, sizeof out, "'%s' run '%s' --out '%s' --quiet --only a", EXE, cfg, dir);
    CHECK_INT_EQ(rc, 0);
}

DT_TEST_MAIN(DT_CASE(parse_entries), DT_CASE(precedence), DT_CASE(structure_errors),
             DT_CASE(entry_errors), DT_CASE(report_aggregation), DT_CASE(run_two_entries),
             DT_CASE(only_entries), DT_CASE(cuda_entry_skipped), DT_CASE(failed_entry_others_run),
             DT_CASE(config_error_before_any_run))
