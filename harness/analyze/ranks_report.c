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
        struct dt_report_options ropt = {.print_summary = false, .gnuplot = NULL, .quiet = true};
        st = dt_report_build(runs[i].dir, &ropt, err); /* each run's own report first */
        if (st == DT_OK)
            st = dt_report_read_summary(runs[i].dir, &runs[i].rows, &runs[i].n_rows, err);
    }
    struct dt_strbuf md = {0}, csv = {0};
    if (st == DT_OK) {
        dt_strbuf_printf(&md, "# %s across rank counts\n\n", exp->name);
        dt_strbuf_printf(&md,
                         "Runs of one config, each in its own folder: `plain` (one process, no "
                         "mpirun) and `np<N>` (`mpirun -np N`); each has its own report.md. "
                         "The global batch is %" PRId64 " examples in %" PRId64 " shards.\n\n",
                         exp->train.batch, exp->train.shards);
        dt_strbuf_printf(&md,
                         "**How to read this.** *Digests*: replica 0's trace at every hashed "
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
        dt_strbuf_printf(&md, "## Digests across rank counts\n\n| policy | reduction |");
        for (int i = 0; i < n; i++) {
            char l[32];
            label(l, sizeof l, &runs[i]);
            dt_strbuf_printf(&md, " %s |", l);
        }
        dt_strbuf_printf(&md, " verdict |\n|---|---|");
        for (int i = 0; i <= n; i++) dt_strbuf_printf(&md, "---|");
        dt_strbuf_printf(&md, "\n");
        dt_strbuf_printf(
            &csv,
            "policy,reduction,run,ranks,steps,first_divergent_step_vs_%s,"
            "final_digest,step_ms,ratio_vs_unordered,ratio_vs_fast,ratio_lo,ratio_hi\n",
            runs[0].name);
    }
    /* one row per policy (cells of the first vary setting: rank counts do not vary data) */
    for (int p = 0; st == DT_OK && p < exp->n_policies; p++) {
        const struct dt_policy *pol = &exp->policies[p];
        const char *red = dt_policy_control_value(pol, dt_policy_find_control("reduction"));
        dt_strbuf_printf(&md, "| %s | %s |", pol->name, red);
        bool all_same = true;
        char ref_trace[1400];
        const struct dt_report_summary_row *ref_row = NULL;
        for (int i = 0; i < n; i++) {
            const struct dt_report_summary_row *row = NULL;
            for (int k = 0; k < runs[i].n_rows && !row; k++)
                if (strcmp(runs[i].rows[k].policy, pol->name) == 0) row = &runs[i].rows[k];
            if (!row) {
                dt_strbuf_printf(&md, " n/a |");
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
            if (!ref_row) {
                ref_row = row;
                snprintf(ref_trace, sizeof ref_trace, "%s", trace);
                dt_strbuf_printf(&md, " `%.12s` (%" PRId64 " rows) |", final, n_rows);
            } else {
                struct dt_trace_diff diff;
                if (dt_trace_compare(&diff, ref_trace, trace, &terr) != DT_OK) {
                    dt_strbuf_printf(&md, " error: %s |", terr.msg);
                    all_same = false;
                } else if (diff.diverged) {
                    first = diff.first_step;
                    dt_strbuf_printf(&md, " step %" PRId64 " |", first);
                    all_same = false;
                } else {
                    dt_strbuf_printf(&md, " = |");
                }
            }
            /* the unordered policy at this rank count, for the ratio */
            double base = NAN;
            for (int q = 0; q < exp->n_policies; q++) {
                if (dt_reduction_ordered(&exp->policies[q])) continue;
                for (int k = 0; k < runs[i].n_rows; k++)
                    if (strcmp(runs[i].rows[k].policy, exp->policies[q].name) == 0 &&
                        isfinite(runs[i].rows[k].step_ms))
                        base = runs[i].rows[k].step_ms;
                break;
            }
            double ratio = isfinite(base) && base > 0 ? row->step_ms / base : NAN;
            dt_strbuf_printf(&csv, "%s,%s,%s,%d,%" PRId64 ",%" PRId64 ",%s,%.4f,", pol->name, red,
                             runs[i].name, runs[i].ranks, n_rows > 0 ? n_rows - 1 : 0, first, final,
                             row->step_ms);
            if (isfinite(ratio)) dt_strbuf_printf(&csv, "%.4f", ratio);
            if (isfinite(row->ratio))
                dt_strbuf_printf(&csv, ",%.4f,%.4f,%.4f\n", row->ratio, row->ci_lo, row->ci_hi);
            else dt_strbuf_printf(&csv, ",,,\n");
        }
        dt_strbuf_printf(&md, " %s |\n",
                         n < 2      ? "one run"
                         : all_same ? "identical for every rank count"
                                    : "depends on the rank count");
    }
    /* step times */
    if (st == DT_OK) {
        dt_strbuf_printf(
            &md, "\n## Step time (ms; vs unordered at the same rank count; vs fast (alternated) "
                 "[95%% interval])\n\n"
                 "| policy | reduction |");
        for (int i = 0; i < n; i++) {
            char l[32];
            label(l, sizeof l, &runs[i]);
            dt_strbuf_printf(&md, " %s |", l);
        }
        dt_strbuf_printf(&md, "\n|---|---|");
        for (int i = 0; i < n; i++) dt_strbuf_printf(&md, "---|");
        dt_strbuf_printf(&md, "\n");
        for (int p = 0; p < exp->n_policies; p++) {
            const struct dt_policy *pol = &exp->policies[p];
            dt_strbuf_printf(&md, "| %s | %s |", pol->name,
                             dt_policy_control_value(pol, dt_policy_find_control("reduction")));
            for (int i = 0; i < n; i++) {
                const struct dt_report_summary_row *row = NULL, *base = NULL;
                for (int k = 0; k < runs[i].n_rows; k++) {
                    if (strcmp(runs[i].rows[k].policy, pol->name) == 0 && !row)
                        row = &runs[i].rows[k];
                    for (int q = 0; q < exp->n_policies && !base; q++)
                        if (!dt_reduction_ordered(&exp->policies[q]) &&
                            strcmp(runs[i].rows[k].policy, exp->policies[q].name) == 0)
                            base = &runs[i].rows[k];
                }
                if (!row || !isfinite(row->step_ms)) {
                    dt_strbuf_printf(&md, " n/a |");
                } else {
                    dt_strbuf_printf(&md, " %.3f", row->step_ms);
                    if (base && isfinite(base->step_ms) && base->step_ms > 0)
                        dt_strbuf_printf(&md, " (%.2fx)", row->step_ms / base->step_ms);
                    if (strcmp(row->verdict, "baseline") == 0) dt_strbuf_printf(&md, "; baseline");
                    else if (isfinite(row->ratio) && isfinite(row->ci_lo))
                        dt_strbuf_printf(&md, "; vs fast %.2fx [%.2f, %.2f]", row->ratio,
                                         row->ci_lo, row->ci_hi);
                    dt_strbuf_printf(&md, " |");
                }
            }
            dt_strbuf_printf(&md, "\n");
        }
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
