/* File layout of an experiment folder (see layout.h). */
#include "harness/record/layout.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fileio.h"
#include "harness/record/metrics.h"

void dt_vary_label(char *buf, size_t size, unsigned vary)
{
    static const char *const names[] = {"init", "data_order", "epsilon"};
    size_t used = 0;
    buf[0] = '\0';
    if (vary == 0) {
        snprintf(buf, size, "none");
        return;
    }
    for (unsigned i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (!(vary & (1u << i))) continue;
        int w =
            snprintf(buf + used, size > used ? size - used : 0, "%s%s", used ? "+" : "", names[i]);
        if (w < 0) break;
        used += (size_t)w;
    }
}

void dt_cell_dir(char *buf, size_t size, const struct dt_experiment *exp, int cell)
{
    const char *pol = exp->policies[dt_cell_policy(exp, cell)].name;
    if (exp->n_vary <= 1) {
        snprintf(buf, size, "%s", pol);
        return;
    }
    char label[64];
    dt_vary_label(label, sizeof label, exp->vary_sets[dt_cell_vary(exp, cell)]);
    snprintf(buf, size, "%s/%s", label, pol);
}

void dt_replica_dir(char *buf, size_t size, const char *out_dir, const struct dt_experiment *exp,
                    int cell, int r)
{
    char cell_dir[256];
    dt_cell_dir(cell_dir, sizeof cell_dir, exp, cell);
    snprintf(buf, size, "%s/%s/replica-%d", out_dir, cell_dir, r);
}

void dt_snapshot_dir(char *buf, size_t size, const char *replica_dir)
{
    snprintf(buf, size, "%s/snapshots", replica_dir);
}

void dt_snapshot_path(char *buf, size_t size, const char *replica_dir, int64_t step)
{
    snprintf(buf, size, "%s/snapshots/step-%08lld.bin", replica_dir, (long long)step);
}

int dt_snapshot_steps(const struct dt_experiment *exp, int64_t *out)
{
    if (exp->report.snapshots <= 0) return 0;
    out[0] = 0;
    return 1 + dt_log_spaced_steps(exp->train.steps, exp->report.snapshots, out + 1);
}

/* ---- what detrain writes (dt_layout_is_own) ------------------------------------------------ */

/* Files of the experiment folder itself, of a replica folder, and the endings a file of
 * plots/ may have (the gnuplot script, its data, the images, gnuplot's log). */
static const char *const top_files[] = {"run.json",  "config.json",  "overhead.csv",
                                        "report.md", "summary.csv",  "cells.csv",
                                        "drift.csv", ".detrain.lock"};
static const char *const replica_files[] = {
    "trace.csv", "tensors.csv",    "metrics.csv",    "times.csv", "predictions.csv",
    "run.json",  "checkpoint.bin", "divergence.bin", "algos.csv", "sample.txt"};
static const char *const plot_endings[] = {".gp", ".dat", ".svg", ".png", ".log"};

static bool in_list(const char *s, const char *const *list, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(s, list[i]) == 0) return true;
    return false;
}
#define IN_LIST(s, list) in_list((s), (list), sizeof(list) / sizeof((list)[0]))

static bool ends_with(const char *s, const char *end)
{
    size_t n = strlen(s), m = strlen(end);
    return n > m && strcmp(s + n - m, end) == 0;
}

/* `name` without the suffix of an atomic write in progress (".tmp", ".tmp-<pid>"), into
 * buf: what a run killed mid-write leaves is its own file too. */
static const char *without_tmp(char *buf, size_t size, const char *name)
{
    snprintf(buf, size, "%s", name);
    char *t = strstr(buf, ".tmp");
    if (!t || t == buf) return buf;
    if (t[4] == '\0') {
        *t = '\0';
    } else if (t[4] == '-' && t[5] && strspn(t + 5, "0123456789") == strlen(t + 5)) {
        *t = '\0';
    }
    return buf;
}

/* "replica-<k>" with 0 <= k < replicas, written as dt_replica_dir writes it. */
static bool replica_name(const char *s, int replicas)
{
    if (strncmp(s, "replica-", 8) != 0 || !s[8] || strspn(s + 8, "0123456789") != strlen(s + 8))
        return false;
    if (s[8] == '0' && s[9]) return false;
    return atol(s + 8) < replicas;
}

/* A path below a cell folder: replica-<k>[/file | /snapshots[/step-<8 digits>.bin]]. */
static bool replica_part(const struct dt_experiment *exp, char **c, int n, bool is_dir)
{
    if (n < 1 || !replica_name(c[0], exp->replicas)) return false;
    if (n == 1) return is_dir;
    char name[256];
    if (n == 2) {
        if (is_dir) return strcmp(c[1], "snapshots") == 0;
        return IN_LIST(without_tmp(name, sizeof name, c[1]), replica_files);
    }
    if (n == 3 && !is_dir && strcmp(c[1], "snapshots") == 0) {
        const char *f = without_tmp(name, sizeof name, c[2]);
        return strlen(f) == 17 && strncmp(f, "step-", 5) == 0 && strspn(f + 5, "0123456789") == 8 &&
               strcmp(f + 13, ".bin") == 0;
    }
    return false;
}

bool dt_layout_is_own(const struct dt_experiment *exp, const char *rel, bool is_dir)
{
    char path[2048];
    if (snprintf(path, sizeof path, "%s", rel) >= (int)sizeof path) return false;
    char *c[8];
    int n = 0;
    for (char *save = NULL, *t = strtok_r(path, "/", &save); t; t = strtok_r(NULL, "/", &save)) {
        if (n == 8) return false;
        c[n++] = t;
    }
    if (n == 0) return false;
    char name[256];
    if (n == 1 && !is_dir && IN_LIST(without_tmp(name, sizeof name, c[0]), top_files)) return true;
    if (strcmp(c[0], "plots") == 0) {
        if (n == 1) return is_dir;
        if (n > 2 || is_dir) return false;
        const char *f = without_tmp(name, sizeof name, c[1]);
        for (size_t i = 0; i < sizeof plot_endings / sizeof plot_endings[0]; i++)
            if (ends_with(f, plot_endings[i])) return true;
        return false;
    }
    if (strcmp(c[0], "explain") == 0) { /* explain/<cell with '/' as '_'>.csv */
        if (n == 1) return is_dir;
        return n == 2 && !is_dir && ends_with(without_tmp(name, sizeof name, c[1]), ".csv");
    }
    /* cells: <policy>, or with several vary settings <vary label>/<policy> */
    const int depth = exp->n_vary <= 1 ? 1 : 2;
    if (depth == 2) {
        bool label = false;
        for (int v = 0; v < exp->n_vary && !label; v++) {
            char l[64];
            dt_vary_label(l, sizeof l, exp->vary_sets[v]);
            label = strcmp(l, c[0]) == 0;
        }
        if (!label) return false;
        if (n == 1) return is_dir;
    }
    bool policy = false;
    for (int p = 0; p < exp->n_policies && !policy; p++)
        policy = strcmp(exp->policies[p].name, c[depth - 1]) == 0;
    if (!policy) return false;
    if (n == depth) return is_dir;
    return replica_part(exp, c + depth, n - depth, is_dir);
}

size_t dt_layout_longest(const struct dt_experiment *exp)
{
    size_t cell = 0;
    for (int k = 0; k < dt_cell_count(exp); k++) {
        char d[256];
        dt_cell_dir(d, sizeof d, exp, k);
        if (strlen(d) > cell) cell = strlen(d);
    }
    char rep[32];
    snprintf(rep, sizeof rep, "/replica-%d", exp->replicas > 0 ? exp->replicas - 1 : 0);
    /* /<cell>/replica-<k>/snapshots/step-<8 digits>.bin.tmp-<pid>: the longest in a replica;
     * /explain/<cell>.csv.tmp-<pid> and /plots/<name>.tmp-<pid> are shorter or close: the
     * cell's length counted for both, 24 for a plot's name */
    const size_t pid = 1 + 20;
    size_t in_replica = 1 + cell + strlen(rep) + strlen("/snapshots/step-00000000.bin") + 4 + pid;
    size_t in_explain = strlen("/explain/") + cell + strlen(".csv") + 4 + pid;
    size_t in_plots = strlen("/plots/") + 24 + strlen(".png") + 4 + pid;
    size_t m = in_replica > in_explain ? in_replica : in_explain;
    return m > in_plots ? m : in_plots;
}

void dt_manifest_field(char *out, size_t size, const char *text, const char *key)
{
    char pat[80];
    snprintf(pat, sizeof pat, "\"%s\": ", key);
    const char *at = strstr(text, pat);
    out[0] = '\0';
    if (!at) return;
    at += strlen(pat);
    if (*at == '"') at++;
    const size_t n = strcspn(at, "\",}");
    snprintf(out, size, "%.*s", (int)(n < size ? n : size - 1), at);
}

/* replica_dir/run.json's text (malloc'ed), or NULL when it is missing or unreadable. */
static char *manifest_text(const char *replica_dir)
{
    char path[4300];
    snprintf(path, sizeof path, "%s/run.json", replica_dir);
    if (!dt_path_exists(path)) return NULL;
    char *text = NULL;
    size_t len;
    struct dt_error ignored;
    if (dt_read_regular_file(&text, &len, path, "run.json", 1 << 20, &ignored) != DT_OK)
        return NULL;
    return text;
}

bool dt_manifest_completed(const char *replica_dir)
{
    char state[32];
    char *text = manifest_text(replica_dir);
    if (!text) return false;
    dt_manifest_field(state, sizeof state, text, "state");
    free(text);
    return strcmp(state, "completed") == 0;
}

void dt_manifest_numbers(const char *replica_dir, const char *const *keys, int n, double *out)
{
    char state[32], value[64];
    for (int i = 0; i < n; i++) out[i] = NAN;
    char *text = manifest_text(replica_dir);
    if (!text) return;
    dt_manifest_field(state, sizeof state, text, "state");
    for (int i = 0; i < n && strcmp(state, "completed") == 0; i++) {
        dt_manifest_field(value, sizeof value, text, keys[i]);
        char *end = NULL;
        const double v = value[0] ? strtod(value, &end) : NAN;
        if (end && *end == '\0' && isfinite(v)) out[i] = v;
    }
    free(text);
}
