/* `detrain report DIR` on a folder of runs of one config at several rank counts
 * (scripts/ranks.sh): DIR/plain (one process, no mpirun; optional) and DIR/np<N> (mpirun
 * -np N). See ranks_report.h. */
#include "harness/analyze/ranks_report.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/fileio.h"
#include "core/util.h"
#include "harness/analyze/compare.h"
#include "harness/setup/config.h"
#include "harness/analyze/report.h"

#define MAX_RUNS 16

struct run {
    char name[300]; /* "plain", "np2" */
    int ranks;      /* 0 = plain */
    char dir[1100];
    struct dt_report_summary_row *rows;
    int n_rows;
};

static bool has_file(const char *dir, const char *name)
{
    char path[1300];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return dt_path_exists(path); /* no open: a FIFO named config.json must not block it */
}

static int cmp_runs(const void *a, const void *b)
{
    const struct run *x = a, *y = b;
    return (x->ranks > y->ranks) - (x->ranks < y->ranks);
}

/* The runs in dir, plain first then by rank count; 0 when it is not a ranks folder. */
static int find_runs(const char *dir, struct run *runs)
{
    DIR *d = opendir(dir);
    if (!d) return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL && n < MAX_RUNS) {
        int ranks = -1;
        char tail;
        if (strcmp(e->d_name, "plain") == 0) ranks = 0;
        else if (sscanf(e->d_name, "np%d%c", &ranks, &tail) != 1 || ranks < 1) continue;
        struct run *r = &runs[n];
        memset(r, 0, sizeof *r);
        snprintf(r->name, sizeof r->name, "%s", e->d_name);
        snprintf(r->dir, sizeof r->dir, "%s/%s", dir, e->d_name);
        r->ranks = ranks;
        if (has_file(r->dir, "config.json")) n++;
    }
    closedir(d);
    qsort(runs, (size_t)n, sizeof *runs, cmp_runs);
    return n;
}

bool dt_ranks_is_folder(const char *dir)
{
    struct run runs[MAX_RUNS];
    return !has_file(dir, "config.json") && find_runs(dir, runs) > 0;
}

static void label(char *buf, size_t size, const struct run *r)
{
    if (r->ranks == 0) snprintf(buf, size, "plain");
    else snprintf(buf, size, "N=%d", r->ranks);
}

/* The reading guide and the digest table's header; the CSV's header. */
static void ranks_header(struct dt_strbuf *md, struct dt_strbuf *csv,
                         const struct dt_experiment *exp, const struct run *runs, int n)
{
    dt_strbuf_printf(md, "# %s across rank counts\n\n", exp->name);
    dt_strbuf_printf(md,
                     "Runs of one config, each in its own folder: `plain` (one process, no "
                     "mpirun) and `np<N>` (`mpirun -np N`); each has its own report.md. "
                     "The global batch is %" PRId64 " examples in %" PRId64 " shards.\n\n",
                     exp->train.batch, exp->train.shards);
    dt_strbuf_printf(md, "**How to read this.** *Digests*: replica 0's trace at every hashed "
                         "step compared with the first column's; `=` means identical at every "
                         "step, otherwise the first step that differs. `reduction: exact` (the "
                         "portable level) must read `=` everywhere: its digests do not depend on "
                         "the number of ranks. *Step ms*: median update time of the cell's "
                         "replicas, ranks' communication included, with its ratio to the "
                         "`reduction: unordered` policy's median at the same rank count (medians "
                         "of separate training runs: noisy on a shared machine). *vs fast "
                         "(alternated)*: each run's own overhead measurement, the policy and "
                         "`fast` alternating step by step in one launch (all ranks in "
                         "lockstep), with its 95%% bootstrap interval -- the ratio to trust; "
                         "for a policy that differs from `fast` only in `reduction` it is the "
                         "cost of that reduction against `unordered`.\n\n");
    dt_strbuf_printf(md, "## Digests across rank counts\n\n| policy | reduction |");
    for (int i = 0; i < n; i++) {
        char l[32];
        label(l, sizeof l, &runs[i]);
        dt_strbuf_printf(md, " %s |", l);
    }
    dt_strbuf_printf(md, " verdict |\n|---|---|");
    for (int i = 0; i <= n; i++) dt_strbuf_printf(md, "---|");
    dt_strbuf_printf(md, "\n");
    dt_strbuf_printf(csv,
                     "policy,reduction,run,ranks,steps,first_divergent_step_vs_%s,"
                     "final_digest,step_ms,ratio_vs_unordered,ratio_vs_fast,ratio_lo,ratio_hi\n",
                     runs[0].name);
}

/* Run r's summary row of policy `name`, NULL when it has none. */
static const struct dt_report_summary_row *policy_row(const struct run *r, const char *name)
{
    for (int k = 0; k < r->n_rows; k++)
        if (strcmp(r->rows[k].policy, name) == 0) return &r->rows[k];
    return NULL;
}

/* Run r's row of the config's first unordered policy (the ratios' base), NULL when none. */
static const struct dt_report_summary_row *unordered_row(const struct run *r,
                                                         const struct dt_experiment *exp)
{
    for (int q = 0; q < exp->n_policies; q++)
        if (!dt_reduction_ordered(&exp->policies[q])) return policy_row(r, exp->policies[q].name);
    return NULL;
}

/* One policy's digest row: each run's replica-0 trace against the first run's. */
static void digest_row(struct dt_strbuf *md, struct dt_strbuf *csv, const struct dt_experiment *exp,
                       const struct dt_policy *pol, const struct run *runs, int n)
{
    const char *red = dt_policy_control_value(pol, dt_policy_find_control("reduction"));
    dt_strbuf_printf(md, "| %s | %s |", pol->name, red);
    bool all_same = true, have_ref = false;
    char ref_trace[1400];
    for (int i = 0; i < n; i++) {
        const struct dt_report_summary_row *row = policy_row(&runs[i], pol->name);
        if (!row) {
            dt_strbuf_printf(md, " n/a |");
            all_same = false;
            continue;
        }
        char trace[1400];
        snprintf(trace, sizeof trace, "%s/%s/replica-0/trace.csv", runs[i].dir, row->cell);
        struct dt_trace_row *rows = NULL;
        int64_t n_rows = 0;
        struct dt_error terr;
        char final[DT_DIGEST_HEX] = "";
        if (dt_trace_read(&rows, &n_rows, trace, &terr) == DT_OK && n_rows > 0)
            snprintf(final, sizeof final, "%s", rows[n_rows - 1].digest);
        free(rows);
        int64_t first = -1;
        struct dt_trace_diff diff;
        if (!have_ref) {
            have_ref = true;
            snprintf(ref_trace, sizeof ref_trace, "%s", trace);
            dt_strbuf_printf(md, " `%.12s` (%" PRId64 " rows) |", final, n_rows);
        } else if (dt_trace_compare(&diff, ref_trace, trace, &terr) != DT_OK) {
            dt_strbuf_printf(md, " error: %s |", terr.msg);
            all_same = false;
        } else if (diff.diverged) {
            first = diff.first_step;
            dt_strbuf_printf(md, " step %" PRId64 " |", first);
            all_same = false;
        } else {
            dt_strbuf_printf(md, " = |");
        }
        /* the unordered policy at this rank count, for the ratio */
        const struct dt_report_summary_row *b = unordered_row(&runs[i], exp);
        const double base = b && isfinite(b->step_ms) ? b->step_ms : NAN;
        const double ratio = isfinite(base) && base > 0 ? row->step_ms / base : NAN;
        dt_strbuf_printf(csv, "%s,%s,%s,%d,%" PRId64 ",%" PRId64 ",%s,%.4f,", pol->name, red,
                         runs[i].name, runs[i].ranks, n_rows > 0 ? n_rows - 1 : 0, first, final,
                         row->step_ms);
        if (isfinite(ratio)) dt_strbuf_printf(csv, "%.4f", ratio);
        if (isfinite(row->ratio))
            dt_strbuf_printf(csv, ",%.4f,%.4f,%.4f\n", row->ratio, row->ci_lo, row->ci_hi);
        else dt_strbuf_printf(csv, ",,,\n");
    }
    dt_strbuf_printf(md, " %s |\n",
                     n < 2      ? "one run"
                     : all_same ? "identical for every rank count"
                                : "depends on the rank count");
}

/* The step-time table: per policy and run, its median, the ratio to unordered, the
 * alternated ratio to fast. */
static void step_time_table(struct dt_strbuf *md, const struct dt_experiment *exp,
                            const struct run *runs, int n)
{
    dt_strbuf_printf(md, "\n## Step time (ms; vs unordered at the same rank count; vs fast "
                         "(alternated) [95%% interval])\n\n"
                         "| policy | reduction |");
    for (int i = 0; i < n; i++) {
        char l[32];
        label(l, sizeof l, &runs[i]);
        dt_strbuf_printf(md, " %s |", l);
    }
    dt_strbuf_printf(md, "\n|---|---|");
    for (int i = 0; i < n; i++) dt_strbuf_printf(md, "---|");
    dt_strbuf_printf(md, "\n");
    for (int p = 0; p < exp->n_policies; p++) {
        const struct dt_policy *pol = &exp->policies[p];
        dt_strbuf_printf(md, "| %s | %s |", pol->name,
                         dt_policy_control_value(pol, dt_policy_find_control("reduction")));
        for (int i = 0; i < n; i++) {
            const struct dt_report_summary_row *row = policy_row(&runs[i], pol->name);
            const struct dt_report_summary_row *base = unordered_row(&runs[i], exp);
            if (!row || !isfinite(row->step_ms)) {
                dt_strbuf_printf(md, " n/a |");
                continue;
            }
            dt_strbuf_printf(md, " %.3f", row->step_ms);
            if (base && isfinite(base->step_ms) && base->step_ms > 0)
                dt_strbuf_printf(md, " (%.2fx)", row->step_ms / base->step_ms);
            if (strcmp(row->verdict, "baseline") == 0) dt_strbuf_printf(md, "; baseline");
            else if (isfinite(row->ratio) && isfinite(row->ci_lo))
                dt_strbuf_printf(md, "; vs fast %.2fx [%.2f, %.2f]", row->ratio, row->ci_lo,
                                 row->ci_hi);
            dt_strbuf_printf(md, " |");
        }
        dt_strbuf_printf(md, "\n");
    }
}

enum dt_status dt_ranks_report(const char *dir, bool quiet, struct dt_error *err)
{
    struct run runs[MAX_RUNS];
    const int n = find_runs(dir, runs);
    if (n == 0)
        return dt_error_set(err, DT_ERR_IO, "%s: no run folders (plain, np<N>) with config.json",
                            dir);
    struct dt_experiment *exp = dt_xcalloc(1, sizeof *exp);
    char path[1400];
    snprintf(path, sizeof path, "%s/config.json", runs[0].dir);
    enum dt_status st = dt_config_load(exp, path, NULL, 0, err);
    for (int i = 0; st == DT_OK && i < n; i++) {
        const struct dt_report_options ropt = {
            .print_summary = false, .gnuplot = NULL, .quiet = true};
        st = dt_report_build(runs[i].dir, &ropt, err); /* each run's own report first */
        if (st == DT_OK)
            st = dt_report_read_summary(runs[i].dir, &runs[i].rows, &runs[i].n_rows, err);
    }
    struct dt_strbuf md = {0}, csv = {0};
    if (st == DT_OK) {
        ranks_header(&md, &csv, exp, runs, n);
        /* one row per policy (cells of the first vary setting: rank counts do not vary data) */
        for (int p = 0; p < exp->n_policies; p++)
            digest_row(&md, &csv, exp, &exp->policies[p], runs, n);
        step_time_table(&md, exp, runs, n);
    }
    char md_path[1200], csv_path[1200];
    snprintf(md_path, sizeof md_path, "%s/report.md", dir);
    snprintf(csv_path, sizeof csv_path, "%s/ranks.csv", dir);
    if (st == DT_OK) st = dt_write_file_atomic(md_path, md.data, md.len, err);
    if (st == DT_OK) st = dt_write_file_atomic(csv_path, csv.data, csv.len, err);
    if (st == DT_OK && !quiet) {
        fwrite(md.data, 1, md.len, stdout);
        printf("\nreport:  %s\nranks:   %s\n", md_path, csv_path);
    }
    dt_strbuf_free(&md);
    dt_strbuf_free(&csv);
    for (int i = 0; i < n; i++) free(runs[i].rows);
    free(exp);
    return st;
}
