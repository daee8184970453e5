/* Matrix runs and the matrix report (matrix.h). A run resolves every selected entry first
 * (so config errors come before any training), then per entry: probe its backend (skip it
 * when that cannot be opened), dt_train_experiment into <out>/<entry>/, record the outcome
 * in matrix.json (rewritten after each entry, so an interrupted matrix leaves a true
 * record). The report reads matrix.json and each entry's summary.csv and config.json back
 * from disk, like `detrain report` does for one experiment: fixed order, no times. */
#include "harness/matrix.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <yaml.h>

#include "core/fileio.h"
#include "core/util.h"
#include "harness/record/layout.h"
#include "harness/record/outdir.h"
#include "harness/run/stop.h"
#include "harness/run/train.h"
#include "nets/backend.h"

#define PATH_LEN 2048

enum entry_status { ENTRY_PENDING, ENTRY_DONE, ENTRY_SKIPPED, ENTRY_FAILED, ENTRY_STATUS_COUNT };
static const char *const status_names[ENTRY_STATUS_COUNT] = {"pending", "done", "skipped",
                                                             "failed"};
static const char *const device_names[] = {"cpu", "cuda"}; /* enum dt_device */
#define N_DEVICES ((int)(sizeof device_names / sizeof device_names[0]))

/* One entry as matrix.json records it. */
struct entry {
    char name[DT_NAME_MAX];
    enum entry_status status;
    char reason[1024];
    int device; /* index into device_names */
    int model;  /* enum dt_model_kind */
    int n_policies;
    char policies[DT_MAX_POLICIES][DT_POLICY_NAME_MAX];
    double seconds; /* wall time of its run; NaN when it did not run */
};

struct record {
    char name[DT_NAME_MAX]; /* the matrix config's name */
    char config_file[DT_PATH_MAX];
    int n;
    struct entry e[DT_MAX_MATRIX];
};

bool dt_matrix_is_folder(const char *dir)
{
    char path[PATH_LEN];
    snprintf(path, sizeof path, "%s/matrix.json", dir);
    return dt_path_exists(path);
}

/* ---- matrix.json ---------------------------------------------------------------------- */

static enum dt_status write_record(const char *dir, const struct record *rec, const char *command,
                                   struct dt_error *err)
{
    struct dt_strbuf sb = {0};
    dt_strbuf_printf(&sb, "{\"tool\": \"detrain\", \"matrix\": ");
    dt_strbuf_json_string(&sb, rec->name);
    dt_strbuf_printf(&sb, ", \"config_file\": ");
    dt_strbuf_json_string(&sb, rec->config_file);
    dt_strbuf_printf(&sb, ", \"command\": ");
    dt_strbuf_json_string(&sb, command ? command : "");
    dt_strbuf_printf(&sb, ",\n \"entries\": [");
    for (int i = 0; i < rec->n; i++) {
        const struct entry *e = &rec->e[i];
        dt_strbuf_printf(&sb, "%s\n  {\"name\": ", i ? "," : "");
        dt_strbuf_json_string(&sb, e->name);
        dt_strbuf_printf(&sb, ", \"status\": \"%s\", \"reason\": ", status_names[e->status]);
        dt_strbuf_json_string(&sb, e->reason);
        dt_strbuf_printf(&sb, ", \"device\": \"%s\", \"model\": \"%s\", \"policies\": [",
                         device_names[e->device], dt_model_kind_names[e->model]);
        for (int p = 0; p < e->n_policies; p++) {
            dt_strbuf_printf(&sb, p ? ", " : "");
            dt_strbuf_json_string(&sb, e->policies[p]);
        }
        dt_strbuf_printf(&sb, "], \"seconds\": ");
        if (isfinite(e->seconds)) dt_strbuf_printf(&sb, "%.3f}", e->seconds);
        else dt_strbuf_printf(&sb, "null}");
    }
    dt_strbuf_printf(&sb, "\n ]}\n");
    char path[PATH_LEN];
    snprintf(path, sizeof path, "%s/matrix.json", dir);
    enum dt_status st = dt_write_file_atomic(path, sb.data, sb.len, err);
    dt_strbuf_free(&sb);
    return st;
}

/* Reading it back: libyaml reads JSON (a flow mapping) as the config loader does. */
struct reader {
    yaml_document_t *doc;
    const char *path;
    struct dt_error *err;
};

static const yaml_node_t *map_get(const struct reader *rd, const yaml_node_t *map, const char *key)
{
    for (const yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top;
         p++) {
        const yaml_node_t *k = yaml_document_get_node(rd->doc, p->key);
        if (k->type == YAML_SCALAR_NODE && strcmp((const char *)k->data.scalar.value, key) == 0)
            return yaml_document_get_node(rd->doc, p->value);
    }
    return NULL;
}

static enum dt_status fail_json(const struct reader *rd, const char *what)
{
    return dt_error_set(rd->err, DT_ERR_DATA, "%s: %s", rd->path, what);
}

/* The string value of `key` into buf; missing, non-string or too long is an error. */
static enum dt_status get_string(const struct reader *rd, const yaml_node_t *map, const char *key,
                                 char *buf, size_t size)
{
    const yaml_node_t *v = map_get(rd, map, key);
    char what[160];
    snprintf(what, sizeof what, "'%s' is missing or not a string (or too long)", key);
    if (!v || v->type != YAML_SCALAR_NODE || v->data.scalar.length >= size)
        return fail_json(rd, what);
    memcpy(buf, v->data.scalar.value, v->data.scalar.length + 1);
    return DT_OK;
}

/* An index into names[] for the string value of `key`. */
static enum dt_status get_choice(const struct reader *rd, const yaml_node_t *map, const char *key,
                                 const char *const *names, int n, int *out)
{
    char s[64];
    DT_FORWARD_IF_ERROR(get_string(rd, map, key, s, sizeof s));
    for (int i = 0; i < n; i++)
        if (strcmp(s, names[i]) == 0) return *out = i, DT_OK;
    char what[160];
    snprintf(what, sizeof what, "unknown %s '%s'", key, s);
    return fail_json(rd, what);
}

/* An entry name names a folder under the matrix: the experiment-name rule, as the config
 * loader enforces it, so a hand-edited matrix.json cannot point elsewhere. */
static bool folder_name_ok(const char *s)
{
    return s[0] &&
           strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-") ==
               strlen(s) &&
           strcmp(s, ".") != 0 && strcmp(s, "..") != 0;
}

static enum dt_status read_entry(const struct reader *rd, const yaml_node_t *m, struct entry *e)
{
    if (m->type != YAML_MAPPING_NODE) return fail_json(rd, "an entry is not an object");
    DT_FORWARD_IF_ERROR(get_string(rd, m, "name", e->name, sizeof e->name));
    if (!folder_name_ok(e->name)) return fail_json(rd, "an entry name is not a folder name");
    int status = 0;
    DT_FORWARD_IF_ERROR(get_choice(rd, m, "status", status_names, ENTRY_STATUS_COUNT, &status));
    e->status = (enum entry_status)status;
    DT_FORWARD_IF_ERROR(get_string(rd, m, "reason", e->reason, sizeof e->reason));
    DT_FORWARD_IF_ERROR(get_choice(rd, m, "device", device_names, N_DEVICES, &e->device));
    DT_FORWARD_IF_ERROR(
        get_choice(rd, m, "model", dt_model_kind_names, DT_MODEL_KIND_COUNT, &e->model));
    e->seconds = NAN;
    return DT_OK;
}

static enum dt_status read_record(const char *dir, struct record *rec, struct dt_error *err)
{
    char path[PATH_LEN];
    snprintf(path, sizeof path, "%s/matrix.json", dir);
    memset(rec, 0, sizeof *rec);
    FILE *f = NULL;
    DT_FORWARD_IF_ERROR(dt_fopen_regular(&f, path, "a matrix record", err));
    yaml_parser_t parser;
    yaml_document_t doc;
    if (!yaml_parser_initialize(&parser)) {
        fclose(f);
        return dt_error_set(err, DT_ERR_NOMEM, "out of memory starting the YAML parser");
    }
    yaml_parser_set_input_file(&parser, f);
    bool loaded = yaml_parser_load(&parser, &doc) != 0;
    enum dt_status st = DT_OK;
    if (!loaded)
        st = dt_error_set(err, DT_ERR_DATA, "%s:%zu:%zu: not valid JSON: %s", path,
                          parser.problem_mark.line + 1, parser.problem_mark.column + 1,
                          parser.problem ? parser.problem : "unknown problem");
    yaml_parser_delete(&parser);
    fclose(f);
    if (!loaded) return st;
    struct reader rd = {.doc = &doc, .path = path, .err = err};
    const yaml_node_t *root = yaml_document_get_root_node(&doc);
    const yaml_node_t *entries =
        root && root->type == YAML_MAPPING_NODE ? map_get(&rd, root, "entries") : NULL;
    if (!entries || entries->type != YAML_SEQUENCE_NODE) st = fail_json(&rd, "no \"entries\" list");
    if (st == DT_OK) st = get_string(&rd, root, "matrix", rec->name, sizeof rec->name);
    const yaml_node_item_t *items = st == DT_OK ? entries->data.sequence.items.start : NULL;
    const int n = st == DT_OK ? (int)(entries->data.sequence.items.top - items) : 0;
    if (n > DT_MAX_MATRIX) st = fail_json(&rd, "more than 32 entries");
    for (int i = 0; st == DT_OK && i < n; i++) {
        st = read_entry(&rd, yaml_document_get_node(&doc, items[i]), &rec->e[i]);
        for (int j = 0; st == DT_OK && j < i; j++)
            if (strcmp(rec->e[j].name, rec->e[i].name) == 0)
                st = fail_json(&rd, "two entries have the same name");
        rec->n = i + 1;
    }
    yaml_document_delete(&doc);
    return st;
}

/* ---- running ---------------------------------------------------------------------------- */

/* Can this entry's backend be opened here, with every training op? `why` says why not. */
static bool backend_opens(const struct dt_experiment *exp, char *why, size_t size)
{
    struct dt_backend *be = NULL;
    struct dt_backend_options bopt = {
        .kind = exp->backend.device == DT_DEVICE_CUDA ? DT_BACKEND_CUDA : DT_BACKEND_CPU,
        .threads = exp->backend.threads,
        .gpu = exp->backend.gpu};
    struct dt_error e = {0};
    if (dt_backend_create(&be, &bopt, &e) != DT_OK) {
        snprintf(why, size, "%s", e.msg[0] ? e.msg : "the backend cannot be opened");
        return false;
    }
    const char *missing = dt_backend_missing_op(be);
    if (missing)
        snprintf(why, size, "backend '%s': op %s is not implemented in this version",
                 dt_backend_name(be), missing);
    dt_backend_destroy(be);
    return missing == NULL;
}

/* --only "a,b" -> selected[i] for the matrix's entries; an unknown name lists them all. */
static enum dt_status select_entries(const struct dt_experiment *m, const char *only,
                                     bool selected[DT_MAX_MATRIX], struct dt_error *err)
{
    for (int i = 0; i < m->n_matrix; i++) selected[i] = only == NULL;
    if (!only) return DT_OK;
    char names[DT_MAX_MATRIX * (DT_NAME_MAX + 2)];
    size_t used = 0;
    names[0] = '\0';
    for (int i = 0; i < m->n_matrix; i++)
        used += (size_t)snprintf(names + used, sizeof names - used, "%s%s", i ? ", " : "",
                                 m->matrix[i]);
    for (const char *p = only;; p++) {
        size_t len = strcspn(p, ",");
        int hit = -1;
        for (int i = 0; i < m->n_matrix && len; i++)
            if (strlen(m->matrix[i]) == len && strncmp(m->matrix[i], p, len) == 0) hit = i;
        if (hit < 0)
            return dt_error_set(err, DT_ERR_USAGE,
                                "--only: no matrix entry '%.*s' in %s (its "
                                "entries: %s)",
                                (int)(len < 200 ? len : 200), p, m->source, names);
        selected[hit] = true;
        p += len;
        if (*p == '\0') break;
    }
    return DT_OK;
}

static void fill_entry(struct entry *e, const struct dt_experiment *exp)
{
    memcpy(e->name, exp->name, sizeof e->name);
    e->status = ENTRY_PENDING;
    e->device = exp->backend.device == DT_DEVICE_CUDA ? 1 : 0;
    e->model = (int)exp->model.kind;
    DT_ASSERT(e->model >= 0 && e->model < DT_MODEL_KIND_COUNT);
    e->n_policies = exp->n_policies;
    for (int p = 0; p < exp->n_policies; p++)
        memcpy(e->policies[p], exp->policies[p].name, DT_POLICY_NAME_MAX);
    e->seconds = NAN;
}

/* Run entry k (of rec, resolved as exp) into <out>/<name>/ and record how it ended. */
/* An entry's own report, as `detrain run` makes it (dt_run_options.report). */
static enum dt_status entry_report(const char *dir, bool quiet, struct dt_error *err)
{
    const struct dt_report_options ropt = {.print_summary = true, .gnuplot = NULL, .quiet = quiet};
    return dt_report_build(dir, &ropt, err);
}

static void run_entry(struct entry *e, const struct dt_experiment *exp, int k, int n,
                      const struct dt_matrix_options *opt)
{
    if (!opt->quiet) fprintf(stderr, "detrain: matrix: entry %d/%d %s\n", k + 1, n, e->name);
    if (!backend_opens(exp, e->reason, sizeof e->reason)) {
        e->status = ENTRY_SKIPPED;
        fprintf(stderr, "detrain: matrix: entry %d/%d %s skipped: %s\n", k + 1, n, e->name,
                e->reason);
        return;
    }
    char dir[PATH_LEN];
    snprintf(dir, sizeof dir, "%s/%s", opt->out_dir, e->name);
    const struct dt_run_options ropt = {.out_dir = dir,
                                        .command = opt->command,
                                        .quiet = opt->quiet,
                                        .overwrite = opt->overwrite,
                                        .dist = opt->dist,
                                        .hooks = opt->hooks,
                                        .report = entry_report};
    struct dt_error err = {0};
    double t0 = dt_now_s();
    enum dt_status st = dt_train_experiment(exp, &ropt, &err);
    e->seconds = dt_now_s() - t0;
    e->status = st == DT_OK ? ENTRY_DONE : ENTRY_FAILED;
    if (st != DT_OK) {
        snprintf(e->reason, sizeof e->reason, "%s", err.msg[0] ? err.msg : dt_status_str(st));
        fprintf(stderr, "detrain: matrix: entry %d/%d %s failed: %s\n", k + 1, n, e->name,
                e->reason);
    }
}

/* The matrix folder is new, empty or a matrix folder (locked from here on); each entry to
 * run goes into a new or empty folder, or replaces a result with --overwrite (entries not
 * run are kept: --only adds entries to a matrix folder). */
static enum dt_status claim_matrix_folder(const struct dt_matrix_options *opt,
                                          const struct record *rec, struct dt_folder_lock *lock,
                                          struct dt_error *err)
{
    enum dt_folder_state state;
    /* the entries' own paths are checked as each runs (train.c): here the folder's place */
    DT_FORWARD_IF_ERROR(dt_out_location_check(opt->out_dir, 0, err));
    DT_FORWARD_IF_ERROR(dt_folder_state(&state, opt->out_dir, err));
    if (state == DT_FOLDER_ABSENT) return DT_OK;
    DT_FORWARD_IF_ERROR(dt_folder_lock_take(lock, opt->out_dir, opt->command, err));
    if (state != DT_FOLDER_EMPTY && !dt_matrix_is_folder(opt->out_dir))
        return dt_error_set(err, DT_ERR_USAGE,
                            "%s: holds files but no matrix.json, and a matrix runs only into a "
                            "new, empty or matrix folder: choose another --out",
                            opt->out_dir);
    for (int k = 0; k < rec->n; k++) {
        char dir[PATH_LEN];
        snprintf(dir, sizeof dir, "%s/%s", opt->out_dir, rec->e[k].name);
        DT_FORWARD_IF_ERROR(dt_folder_state(&state, dir, err));
        if (state == DT_FOLDER_ABSENT || state == DT_FOLDER_EMPTY ||
            (state == DT_FOLDER_RESULT && opt->overwrite))
            continue;
        return dt_error_set(err, DT_ERR_USAGE,
                            "%s: entry %s already holds %s; it is kept as it is: add "
                            "--overwrite to replace the entries run, --only to run other "
                            "entries, or choose another --out",
                            dir, rec->e[k].name,
                            state == DT_FOLDER_RESULT ? "a result" : "other files");
    }
    return DT_OK;
}

enum dt_status dt_matrix_run(const struct dt_experiment *matrix,
                             const struct dt_matrix_options *opt, struct dt_error *err)
{
    DT_ASSERT(matrix->n_matrix > 0);
    bool selected[DT_MAX_MATRIX];
    DT_FORWARD_IF_ERROR(select_entries(matrix, opt->only, selected, err));
    /* Every selected entry resolved before anything runs. */
    struct record *rec = dt_xcalloc(1, sizeof *rec);
    struct dt_experiment *exps = dt_xcalloc(DT_MAX_MATRIX, sizeof *exps);
    snprintf(rec->name, sizeof rec->name, "%s", matrix->name);
    snprintf(rec->config_file, sizeof rec->config_file, "%s", opt->config);
    enum dt_status st = DT_OK;
    for (int i = 0; i < matrix->n_matrix && st == DT_OK; i++) {
        if (!selected[i]) continue;
        st = dt_config_load_entry(&exps[rec->n], opt->config, i, opt->sets, opt->n_sets, err);
        if (st == DT_OK) {
            fill_entry(&rec->e[rec->n], &exps[rec->n]);
            rec->n++;
        }
    }
    /* the folder rules (harness/record/outdir.h) for the matrix folder and every entry to run,
     * before anything is written */
    struct dt_folder_lock lock = {.fd = -1, .path = ""};
    if (st == DT_OK) st = claim_matrix_folder(opt, rec, &lock, err);
    if (st == DT_OK) st = dt_mkdir_p(opt->out_dir, err);
    if (st == DT_OK && lock.fd < 0)
        st = dt_folder_lock_take(&lock, opt->out_dir, opt->command, err);
    if (st == DT_OK) st = dt_dir_check_writable(opt->out_dir, err);
    if (st == DT_OK) st = write_record(opt->out_dir, rec, opt->command, err);
    if (st != DT_OK) {
        dt_folder_lock_release(&lock);
        free(exps);
        free(rec);
        return st;
    }
    char out_shown[4 * 1100];
    if (!opt->quiet)
        fprintf(stderr, "detrain: matrix %s: %d of %d entries, writing to %s\n", rec->name, rec->n,
                matrix->n_matrix, dt_escape_path(out_shown, sizeof out_shown, opt->out_dir));
    dt_stop_install_handlers();
    for (int k = 0; k < rec->n; k++) {
        struct entry *e = &rec->e[k];
        if (dt_stop_requested) {
            e->status = ENTRY_SKIPPED;
            snprintf(e->reason, sizeof e->reason, "not run: the matrix was interrupted");
        } else {
            run_entry(e, &exps[k], k, rec->n, opt);
        }
        st = write_record(opt->out_dir, rec, opt->command, err);
        if (st != DT_OK) break;
    }
    int failed = 0;
    char names[512] = "";
    for (int k = 0; k < rec->n; k++) {
        if (rec->e[k].status != ENTRY_FAILED) continue;
        size_t used = strlen(names);
        snprintf(names + used, sizeof names - used, "%s%s", failed ? ", " : "", rec->e[k].name);
        failed++;
    }
    if (st == DT_OK) {
        struct dt_report_options ropt = {
            .print_summary = true, .gnuplot = NULL, .quiet = opt->quiet};
        st = dt_matrix_report(opt->out_dir, &ropt, false, err);
    }
    if (st == DT_OK && dt_stop_requested)
        st = dt_error_set(err, DT_ERR_INTERRUPTED,
                          "matrix interrupted by signal %d; what ran is "
                          "kept in %s",
                          (int)dt_stop_requested, opt->out_dir);
    else if (st == DT_OK && failed)
        st = dt_error_set(err, DT_ERR_NUMERIC,
                          "matrix: %d of %d entries failed (%s); see "
                          "%s/matrix.json",
                          failed, rec->n, names, opt->out_dir);
    dt_folder_lock_release(&lock);
    free(exps);
    free(rec);
    return st;
}

/* ---- the matrix report ------------------------------------------------------------------ */

/* What the report shows of one entry: its rows (summary.csv) and its config. */
struct entry_view {
    const struct entry *e;
    struct dt_experiment *exp;          /* its config.json; NULL when not read */
    struct dt_report_summary_row *rows; /* NULL when not read */
    int n_rows;
    /* per row: the median over its completed replicas of run.json's host waits a step over
     * every step, after the first, and in the first (a GPU's; NaN where none recorded them:
     * the CPU; records before 2026-12-04 have the first alone) */
    double *waits_all, *waits_steady, *waits_first;
    char note[1100]; /* why a failed entry has no rows ("" otherwise) */
};

/* The controls that act on the entry's model, '/'-joined: reduction/atomics/math, then
 * conv_algo (lenet) or rng (bnn_mlp). "?" when the policy is not in config.json. */
static void controls_text(char *buf, size_t size, const struct dt_experiment *exp,
                          const char *policy)
{
    const struct dt_policy *pol = NULL;
    for (int p = 0; p < exp->n_policies; p++)
        if (strcmp(exp->policies[p].name, policy) == 0) pol = &exp->policies[p];
    if (!pol) {
        snprintf(buf, size, "?");
        return;
    }
    const char *names[4] = {"reduction", "atomics", "math",
                            dt_model_kind(exp->model.kind)->extra_control};
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < 4 && names[i] && used < size; i++) {
        int c = dt_policy_find_control(names[i]);
        DT_ASSERT(c >= 0);
        used += (size_t)snprintf(buf + used, size - used, "%s%s", i ? "/" : "",
                                 dt_policy_control_value(pol, c));
    }
}

/* "3" or "" (n/a); "-" = never diverged (every replica identical). */
static void first_text(char *buf, size_t size, const struct dt_report_summary_row *r)
{
    if (!r->has_first) snprintf(buf, size, "%s", "");
    else if (r->first_step < 0) snprintf(buf, size, "-");
    else snprintf(buf, size, "%" PRId64, r->first_step);
}

/* The policy column: the cell, with its vary setting named when one setting is not none. */
static void policy_text(char *buf, size_t size, const struct dt_report_summary_row *r)
{
    if (strcmp(r->cell, r->policy) == 0 && strcmp(r->vary, "none") != 0)
        snprintf(buf, size, "%s (vary: %s)", r->policy, r->vary);
    else snprintf(buf, size, "%s", r->cell);
}

/* The hash's share of a hashed step, hash / (update + hash) with inline hashing: what
 * checking every weight every step costs beside the training itself. NaN = n/a. */
static double hash_share(const struct dt_report_summary_row *r)
{
    return isfinite(r->step_ms) && isfinite(r->hash_ms) && r->step_ms + r->hash_ms > 0
               ? r->hash_ms / (r->step_ms + r->hash_ms)
               : NAN;
}

static void csv_num(struct dt_strbuf *sb, const char *fmt, double v)
{
    dt_strbuf_printf(sb, ",");
    if (isfinite(v)) dt_strbuf_printf(sb, fmt, v);
}

static void csv_rows(struct dt_strbuf *sb, const struct entry_view *v)
{
    for (int i = 0; i < v->n_rows; i++) {
        const struct dt_report_summary_row *r = &v->rows[i];
        char controls[128], first[32];
        controls_text(controls, sizeof controls, v->exp, r->policy);
        first_text(first, sizeof first, r);
        dt_strbuf_printf(sb, "%s,%s,%s,%s,%s,%s,%s,%d,%d,", device_names[v->e->device], v->e->name,
                         dt_model_kind_names[v->e->model], r->cell, r->vary, r->policy, controls,
                         r->replicas, r->completed);
        if (r->distinct >= 0) dt_strbuf_printf(sb, "%d", r->distinct);
        dt_strbuf_printf(sb, ",%s", first);
        csv_num(sb, "%.6f", r->step_ms);
        csv_num(sb, "%.6f", r->ratio);
        csv_num(sb, "%.6f", r->ci_lo);
        csv_num(sb, "%.6f", r->ci_hi);
        dt_strbuf_printf(sb, ",%s", r->verdict);
        csv_num(sb, "%.6f", r->hash_ms);
        csv_num(sb, "%.6f", hash_share(r));
        csv_num(sb, "%.6f", r->acc_mean);
        csv_num(sb, "%.6f", r->acc_std);
        csv_num(sb, "%.6f", r->churn_mean);
        csv_num(sb, "%.6f", r->class_std_mean);
        csv_num(sb, "%.4f", v->waits_all[i]);
        csv_num(sb, "%.4f", v->waits_steady[i]);
        csv_num(sb, "%.4f", v->waits_first[i]);
        dt_strbuf_printf(sb, "\n");
    }
}

/* "1.19x [1.13, 1.27]", "baseline", "1.01x [0.97, 1.06] inconclusive" or "-". */
static void ratio_text(char *buf, size_t size, const struct dt_report_summary_row *r)
{
    if (strcmp(r->verdict, "baseline") == 0) snprintf(buf, size, "baseline");
    else if (!isfinite(r->ratio)) snprintf(buf, size, "-");
    else if (!isfinite(r->ci_lo) || !isfinite(r->ci_hi)) snprintf(buf, size, "%.3fx", r->ratio);
    else
        snprintf(buf, size, "%.3fx [%.3f, %.3f]%s", r->ratio, r->ci_lo, r->ci_hi,
                 strcmp(r->verdict, "inconclusive") == 0 ? " inconclusive" : "");
}

/* Host waits a step for the report: "1.00 (3)", the steady steps' and the first's, or
 * "1.06 over all steps" from a record that has only that. */
static void waits_text(char *buf, size_t size, const struct entry_view *v, int i)
{
    if (!isfinite(v->waits_steady[i]) && isfinite(v->waits_all[i]))
        snprintf(buf, size, "%.2f over all steps", v->waits_all[i]);
    else if (!isfinite(v->waits_steady[i])) snprintf(buf, size, "n/a");
    else if (!isfinite(v->waits_first[i])) snprintf(buf, size, "%.2f", v->waits_steady[i]);
    else snprintf(buf, size, "%.2f (%g)", v->waits_steady[i], v->waits_first[i]);
}

static void md_rows(struct dt_strbuf *sb, const struct entry_view *v, bool waits)
{
    for (int i = 0; i < v->n_rows; i++) {
        const struct dt_report_summary_row *r = &v->rows[i];
        char controls[128], first[32], policy[400], ratio[96];
        controls_text(controls, sizeof controls, v->exp, r->policy);
        first_text(first, sizeof first, r);
        policy_text(policy, sizeof policy, r);
        ratio_text(ratio, sizeof ratio, r);
        dt_strbuf_printf(sb, "| %s | %s | %s | %s | %d/%d | ", v->e->name,
                         dt_model_kind_names[v->e->model], policy, controls, r->completed,
                         r->replicas);
        if (r->distinct >= 0) dt_strbuf_printf(sb, "%d", r->distinct);
        else dt_strbuf_printf(sb, "n/a");
        dt_strbuf_printf(sb, " | %s | ", first[0] ? first : "n/a");
        if (isfinite(r->step_ms)) dt_strbuf_printf(sb, "%.3f", r->step_ms);
        else dt_strbuf_printf(sb, "n/a");
        const double share = hash_share(r);
        if (isfinite(share)) dt_strbuf_printf(sb, " | %.1f%%", 100.0 * share);
        else dt_strbuf_printf(sb, " | n/a");
        dt_strbuf_printf(sb, " | %s |", ratio);
        if (waits) {
            char w[48];
            waits_text(w, sizeof w, v, i);
            dt_strbuf_printf(sb, " %s |", w);
        }
        dt_strbuf_printf(sb, "\n");
    }
}

static void md_num(struct dt_strbuf *sb, double v)
{
    if (isfinite(v)) dt_strbuf_printf(sb, " %.4f |", v);
    else dt_strbuf_printf(sb, " n/a |");
}

/* The noise of each cell with two or more completed replicas: how far the replicas' test
 * accuracy, predictions and per-class accuracy spread (the entry's summary.csv). */
static int md_noise_rows(struct dt_strbuf *sb, const struct entry_view *v)
{
    int n = 0;
    for (int i = 0; i < v->n_rows; i++) {
        const struct dt_report_summary_row *r = &v->rows[i];
        if (r->completed < 2) continue;
        char policy[400];
        policy_text(policy, sizeof policy, r);
        dt_strbuf_printf(sb, "| %s | %s | %d |", v->e->name, policy, r->completed);
        md_num(sb, r->acc_mean);
        md_num(sb, r->acc_std);
        md_num(sb, r->churn_mean);
        md_num(sb, r->class_std_mean);
        dt_strbuf_printf(sb, "\n");
        n++;
    }
    return n;
}

static void md_device(struct dt_strbuf *sb, const struct entry_view *views, int n, int device)
{
    dt_strbuf_printf(sb, "## %s\n\n", device_names[device]);
    int with_rows = 0;
    bool waits = false; /* a column for them where some cell recorded them */
    for (int i = 0; i < n; i++) {
        if (views[i].e->device != device) continue;
        with_rows += views[i].n_rows > 0;
        for (int j = 0; j < views[i].n_rows; j++) waits |= isfinite(views[i].waits_all[j]);
    }
    if (with_rows) {
        dt_strbuf_printf(sb,
                         "| entry | model | policy | controls | replicas | distinct digests | "
                         "first divergent step | step ms | hash share | ratio vs fast [95%% "
                         "interval] |%s\n|---|---|---|---|--:|--:|--:|--:|--:|---|%s\n",
                         waits ? " host waits a step (first step) |" : "", waits ? "--:|" : "");
        for (int i = 0; i < n; i++)
            if (views[i].e->device == device) md_rows(sb, &views[i], waits);
        dt_strbuf_printf(sb,
                         "\nNoise (%s): the replicas' spread, cell by cell.\n\n"
                         "| entry | policy | replicas | test accuracy | its sd | churn | "
                         "per-class sd |\n|---|---|--:|--:|--:|--:|--:|\n",
                         device_names[device]);
        int noise = 0;
        for (int i = 0; i < n; i++)
            if (views[i].e->device == device) noise += md_noise_rows(sb, &views[i]);
        if (!noise) dt_strbuf_printf(sb, "| (no cell with two completed replicas) | | | | | | |\n");
        dt_strbuf_printf(sb, "\n");
    } else {
        dt_strbuf_printf(sb, "No results on this device.\n\n");
    }
    for (int s = ENTRY_SKIPPED; s <= ENTRY_FAILED; s++) {
        bool head = false;
        for (int i = 0; i < n; i++) {
            const struct entry *e = views[i].e;
            if (e->device != device || (int)e->status != s) continue;
            if (!head) dt_strbuf_printf(sb, "%s:\n\n", s == ENTRY_SKIPPED ? "Skipped" : "Failed");
            head = true;
            dt_strbuf_printf(sb, "- `%s` (%s): %s%s%s\n", e->name, dt_model_kind_names[e->model],
                             e->reason, views[i].note[0] ? "; " : "", views[i].note);
        }
        if (head) dt_strbuf_printf(sb, "\n");
    }
    for (int i = 0; i < n; i++) {
        const struct entry *e = views[i].e;
        if (e->device == device && e->status == ENTRY_PENDING)
            dt_strbuf_printf(sb, "Not run: `%s` (%s)\n\n", e->name, dt_model_kind_names[e->model]);
    }
}

static enum dt_status write_report_md(const char *dir, const struct record *rec,
                                      const struct entry_view *views, struct dt_error *err)
{
    int count[ENTRY_STATUS_COUNT] = {0};
    for (int i = 0; i < rec->n; i++) count[rec->e[i].status]++;
    struct dt_strbuf sb = {0};
    dt_strbuf_printf(&sb, "# %s (matrix)\n\n", rec->name);
    dt_strbuf_printf(&sb, "%d entr%s: %d done, %d skipped, %d failed", rec->n,
                     rec->n == 1 ? "y" : "ies", count[ENTRY_DONE], count[ENTRY_SKIPPED],
                     count[ENTRY_FAILED]);
    if (count[ENTRY_PENDING]) dt_strbuf_printf(&sb, ", %d not run", count[ENTRY_PENDING]);
    dt_strbuf_printf(&sb, ". Each entry is an experiment of its own; its report is "
                          "`<entry>/report.md` (matrix.json records how each ended).\n\n");
    dt_strbuf_printf(
        &sb, "**How to read this.** One row per entry and policy. *replicas*: completed / "
             "total. *distinct digests*: distinct final model digests of the completed replicas "
             "(1 = bit-identical). *first divergent step*: the earliest step at which two "
             "replicas' model digests differ; `-` = never (every replica identical at every "
             "hashed step). With `vary: []` every difference between replicas is the tooling's. "
             "*step ms*: median update time over the cell's replicas (run one after another). "
             "*hash share*: the median hash time's share of a hashed step, hash / (update + "
             "hash), hashing inline. "
             "*ratio vs fast*: the policy's median step time over `fast`'s on alternated steps, "
             "with its paired bootstrap 95%% interval (`inconclusive` when it holds 1.0). "
             "*host waits a step*, on a device that counts them (a GPU): the times the host "
             "waited for the device in a step after the first, and in the first, medians over "
             "the cell's replicas (run.json; a record with neither: over every step). "
             "*controls*: reduction/atomics/math, then conv_algo (lenet) or rng (bnn_mlp). "
             "*Noise*, per device: the completed replicas' mean test accuracy and its standard "
             "deviation, the mean pairwise churn (the share of test predictions two replicas "
             "disagree on) and the mean over classes of the per-class accuracy's standard "
             "deviation -- with `vary: []` the tooling's noise alone, with a `vary` setting that "
             "source's. "
             "`n/a` = not available.\n\n");
    for (int d = 0; d < N_DEVICES; d++) {
        bool any = false;
        for (int i = 0; i < rec->n; i++) any |= rec->e[i].device == d;
        if (any) md_device(&sb, views, rec->n, d);
    }
    char path[PATH_LEN];
    snprintf(path, sizeof path, "%s/report.md", dir);
    enum dt_status st = dt_write_file_atomic(path, sb.data, sb.len, err);
    dt_strbuf_free(&sb);
    return st;
}

static enum dt_status write_matrix_csv(const char *dir, const struct record *rec,
                                       const struct entry_view *views, struct dt_error *err)
{
    struct dt_strbuf sb = {0};
    dt_strbuf_printf(&sb, "%s\n", DT_MATRIX_CSV_HEADER);
    for (int d = 0; d < N_DEVICES; d++)
        for (int i = 0; i < rec->n; i++)
            if (views[i].e->device == d) csv_rows(&sb, &views[i]);
    char path[PATH_LEN];
    snprintf(path, sizeof path, "%s/matrix.csv", dir);
    enum dt_status st = dt_write_file_atomic(path, sb.data, sb.len, err);
    dt_strbuf_free(&sb);
    return st;
}

static void print_table(const char *dir, const struct record *rec, const struct entry_view *views)
{
    printf("\nmatrix %s:\n%-6s %-20s %-32s %8s %8s %13s %9s  %s\n", rec->name, "device", "entry",
           "policy", "replicas", "distinct", "first_diverge", "step_ms", "vs fast");
    for (int d = 0; d < N_DEVICES; d++) {
        for (int i = 0; i < rec->n; i++) {
            const struct entry_view *v = &views[i];
            if (v->e->device != d) continue;
            for (int j = 0; j < v->n_rows; j++) {
                const struct dt_report_summary_row *r = &v->rows[j];
                char reps[32], distinct[16] = "n/a", first[32], ratio[96], ms[32] = "n/a";
                snprintf(reps, sizeof reps, "%d/%d", r->completed, r->replicas);
                if (r->distinct >= 0) snprintf(distinct, sizeof distinct, "%d", r->distinct);
                first_text(first, sizeof first, r);
                if (isfinite(r->step_ms)) snprintf(ms, sizeof ms, "%.3f", r->step_ms);
                ratio_text(ratio, sizeof ratio, r);
                printf("%-6s %-20s %-32s %8s %8s %13s %9s  %s\n", device_names[d], v->e->name,
                       r->cell, reps, distinct, first[0] ? first : "n/a", ms, ratio);
            }
            if (v->e->status == ENTRY_SKIPPED || v->e->status == ENTRY_FAILED)
                printf("%-6s %-20s %s: %s\n", device_names[d], v->e->name,
                       status_names[v->e->status], v->e->reason);
        }
    }
    printf("(first_diverge: earliest step at which two replicas' digests differ, - = never; "
           "vs fast: median step time ratio with its 95%% interval)\n");
    printf("report:  %s/report.md\nmatrix:  %s/matrix.csv\n", dir, dir);
    fflush(stdout);
}

/* The run.json keys of a row's host waits, in entry_view's order (all, steady, first). */
#define N_WAITS 3
static const char *const wait_keys[N_WAITS] = {"host_waits_per_step", "host_waits_steady",
                                               "host_waits_first_step"};

/* out[i]: the median over the completed replicas of cell (policy, vary) of run.json's
 * wait_keys[i]; NaN when no replica recorded it or no cell of the config is that one. */
static void cell_waits(const char *edir, const struct dt_experiment *exp,
                       const struct dt_report_summary_row *r, double out[N_WAITS])
{
    for (int i = 0; i < N_WAITS; i++) out[i] = NAN;
    for (int c = 0; c < dt_cell_count(exp); c++) {
        char label[64];
        dt_vary_label(label, sizeof label, exp->vary_sets[dt_cell_vary(exp, c)]);
        if (strcmp(exp->policies[dt_cell_policy(exp, c)].name, r->policy) != 0 ||
            strcmp(label, r->vary) != 0)
            continue;
        double *vals = dt_xcalloc((size_t)N_WAITS * (size_t)(exp->replicas + 1), sizeof *vals);
        int n[N_WAITS] = {0};
        for (int k = 0; k < exp->replicas; k++) {
            char rdir[PATH_LEN + 320];
            double w[N_WAITS];
            dt_replica_dir(rdir, sizeof rdir, edir, exp, c, k);
            dt_manifest_numbers(rdir, wait_keys, N_WAITS, w);
            for (int i = 0; i < N_WAITS; i++)
                if (isfinite(w[i])) vals[i * (exp->replicas + 1) + n[i]++] = w[i];
        }
        for (int i = 0; i < N_WAITS; i++)
            if (n[i]) out[i] = dt_median(vals + i * (exp->replicas + 1), n[i]);
        free(vals);
        return;
    }
}

/* Each row's host waits from its replicas' run.json (a GPU's; the CPU records none). */
static void read_waits(const char *edir, struct entry_view *v)
{
    v->waits_all = dt_xcalloc((size_t)v->n_rows + 1, sizeof *v->waits_all);
    v->waits_steady = dt_xcalloc((size_t)v->n_rows + 1, sizeof *v->waits_steady);
    v->waits_first = dt_xcalloc((size_t)v->n_rows + 1, sizeof *v->waits_first);
    for (int i = 0; i < v->n_rows; i++) {
        double w[N_WAITS];
        cell_waits(edir, v->exp, &v->rows[i], w);
        v->waits_all[i] = w[0], v->waits_steady[i] = w[1], v->waits_first[i] = w[2];
    }
}

/* Rebuild (when asked) and read one entry's report. An entry that is done must have one;
 * a failed entry may not (the note says why). */
static enum dt_status view_entry(const char *dir, struct entry_view *v,
                                 const struct dt_report_options *opt, bool rebuild,
                                 struct dt_error *err)
{
    const struct entry *e = v->e;
    if (e->status != ENTRY_DONE && e->status != ENTRY_FAILED) return DT_OK;
    char edir[PATH_LEN], cfg[PATH_LEN + 16];
    snprintf(edir, sizeof edir, "%s/%s", dir, e->name);
    snprintf(cfg, sizeof cfg, "%s/config.json", edir);
    if (e->status == ENTRY_FAILED && !dt_path_exists(cfg)) {
        snprintf(v->note, sizeof v->note, "no results were written");
        return DT_OK;
    }
    struct dt_error sub = {0};
    struct dt_report_options eopt = {
        .print_summary = false, .gnuplot = opt->gnuplot, .quiet = opt->quiet};
    enum dt_status st = rebuild ? dt_report_build(edir, &eopt, &sub) : DT_OK;
    v->exp = dt_xcalloc(1, sizeof *v->exp);
    if (st == DT_OK) st = dt_config_load(v->exp, cfg, NULL, 0, &sub);
    if (st == DT_OK) st = dt_report_read_summary(edir, &v->rows, &v->n_rows, &sub);
    if (st == DT_OK) {
        read_waits(edir, v);
        return DT_OK;
    }
    v->n_rows = 0;
    if (e->status == ENTRY_FAILED) {
        snprintf(v->note, sizeof v->note, "no report: %s", sub.msg);
        return DT_OK;
    }
    if (err) *err = sub;
    return st;
}

enum dt_status dt_matrix_report(const char *dir, const struct dt_report_options *opt,
                                bool rebuild_entries, struct dt_error *err)
{
    static const struct dt_report_options defaults = {0};
    if (!opt) opt = &defaults;
    struct record *rec = dt_xcalloc(1, sizeof *rec);
    struct entry_view views[DT_MAX_MATRIX];
    memset(views, 0, sizeof views);
    enum dt_status st = read_record(dir, rec, err);
    for (int i = 0; i < rec->n; i++) views[i].e = &rec->e[i];
    for (int i = 0; st == DT_OK && i < rec->n; i++)
        st = view_entry(dir, &views[i], opt, rebuild_entries, err);
    if (st == DT_OK) st = write_matrix_csv(dir, rec, views, err);
    if (st == DT_OK) st = write_report_md(dir, rec, views, err);
    if (st == DT_OK && opt->print_summary) print_table(dir, rec, views);
    for (int i = 0; i < rec->n; i++) {
        free(views[i].exp);
        free(views[i].rows);
        free(views[i].waits_all);
        free(views[i].waits_steady);
        free(views[i].waits_first);
    }
    free(rec);
    return st;
}
