/* `detrain report DIR` (report.h): reads an experiment folder back (config.json; per
 * replica trace, tensors, metrics, times, predictions and snapshots; overhead.csv; the
 * layout is harness/record/layout.h), computes per cell the divergence, accuracy and drift
 * figures and per policy the overhead, and writes summary.csv, cells.csv, drift.csv,
 * report.md and plots/ (gnuplot). Data path (docs/DESIGN.md): harness/train -> files on disk
 * -> harness/report. Every output depends on the folder's files only: fixed formats,
 * fixed iteration order (cells, replicas, pairs, steps), no absolute paths or dates. */
#include "harness/analyze/report.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/fileio.h"
#include "core/util.h"
#include "harness/record/algolog.h"
#include "harness/analyze/compare.h"
#include "harness/analyze/explain.h"
#include "harness/setup/config.h"
#include "harness/record/csv.h"
#include "harness/record/layout.h"
#include "harness/record/metrics.h"
#include "harness/record/outdir.h"
#include "harness/record/snapshot.h"

#define PATH_LEN 2048
#define BOOTSTRAP_RESAMPLES 2000
#define BOOTSTRAP_SEED 0

/* ---- what the report holds ------------------------------------------------------------ */

struct dvec {
    double *v;
    int64_t n, cap;
};

struct replica {
    bool present;               /* its folder exists */
    bool completed;             /* trace reaches train.steps and predictions.csv exists */
    struct dt_trace_row *trace; /* NULL without trace.csv */
    int64_t n_trace;
    double test_acc;       /* final evaluation (metrics.csv row at train.steps), else NaN */
    double test_loss;      /* its loss (nats per example; per byte for a text), else NaN */
    uint8_t *label, *pred; /* predictions.csv; NULL when absent */
    int64_t n_pred;
};

struct pair {
    int a, b;
    bool compared; /* both replicas have a trace; diff is valid */
    struct dt_trace_diff diff;
    double churn, l2, l2_rel;     /* NaN unless both completed (and final snapshots exist) */
    double *drift_l2, *drift_rel; /* per snapshot step; NULL unless both completed */
};

struct cell {
    int v, p;
    char dir[256]; /* relative to the experiment folder (layout.h) */
    char vary[64]; /* dt_vary_label of its setting */
    const char *policy;
    struct replica *rep;
    struct pair *pairs;
    int n_pairs, completed, distinct;
    bool has_first; /* at least one pair compared */
    int64_t first_step;
    char first_tensor[64];
    double acc_mean, acc_std, churn_mean, churn_max, l2_mean, l2_rel_mean;
    double class_std_mean, class_std_max, step_ms, hash_ms;
    struct dvec step_times, hash_times;
    double *drift_mean; /* per snapshot step: mean pairwise L2 of completed replicas */
};

struct overhead {
    struct dvec fast, pol;
    bool baseline;  /* the policy's controls are the fast level's */
    bool has_ratio; /* baseline, or rows to compare */
    bool partial;   /* fewer rows than report.overhead_samples (a killed run's file) */
    double fast_med, pol_med;
    struct dt_ratio_ci ci;
};

struct plot_note {
    char name[96]; /* file stem in plots/: "drift-fast", "accuracy", "overhead" */
    char title[128];
    bool made;      /* gnuplot wrote a non-empty SVG */
    char note[256]; /* why not, when not made ("" when made) */
};

struct report {
    const char *dir;
    const struct dt_report_options *opt;
    struct dt_experiment exp;
    int n_cells;
    struct cell *cells;
    int n_steps; /* snapshot steps (layout.h), 0 when report.snapshots is 0 */
    int64_t *steps;
    struct overhead ovh[DT_MAX_POLICIES];
    bool ovh_absent, ovh_empty, ovh_cut; /* overhead.csv missing; no header; last row cut */
    char ovh_note[600];                  /* "" when every policy's overhead was measured in full */
    char plots_skipped[256];             /* the one-line reason when no plot was attempted */
    struct plot_note plots[DT_MAX_POLICIES + 2];
    int n_plots;
    char **explained;     /* report.explain: per cell, explain's text (NULL: not explained) */
    struct dt_strbuf cut; /* "`<cell>/replica-<r>/<file>`, ...": last line cut short, not used */
};

static void dvec_push(struct dvec *d, double x)
{
    if (d->n == d->cap) {
        d->cap = d->cap ? 2 * d->cap : 64;
        d->v = dt_xrealloc(d->v, (size_t)d->cap * sizeof *d->v);
    }
    d->v[d->n++] = x;
}

/* Mean and sample standard deviation; mean NaN without values, std NaN below two. */
static void mean_std(const double *v, int n, double *mean, double *std)
{
    double sum = 0, sum2 = 0;
    for (int i = 0; i < n; i++) sum += v[i];
    *mean = n > 0 ? sum / n : NAN;
    for (int i = 0; i < n; i++) sum2 += (v[i] - *mean) * (v[i] - *mean);
    *std = n > 1 ? sqrt(sum2 / (n - 1)) : NAN;
}

static bool parse_i64(const char *s, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end) return false;
    *out = v;
    return true;
}

/* A finite number; "" gives NaN when empty_ok. */
static bool parse_f64(const char *s, double *out, bool empty_ok)
{
    if (*s == '\0') {
        *out = NAN;
        return empty_ok;
    }
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(v)) return false;
    *out = v;
    return true;
}

/* ---- per-replica files ---------------------------------------------------------------- */

/* metrics.csv: the test accuracy of the row at train.steps (the final evaluation). */
static enum dt_status read_metrics(struct replica *r, const char *path, int64_t steps, bool *cut,
                                   struct dt_error *err)
{
    struct dt_csv_reader c;
    bool exists;
    enum dt_status st = dt_csv_open(&c, path, DT_METRICS_HEADER, false, &exists, err);
    bool row = exists;
    while (st == DT_OK && row && (st = dt_csv_next(&c, 4, &row, err)) == DT_OK && row) {
        int64_t step;
        double acc, loss;
        if (!parse_i64(c.field[0], &step)) st = dt_csv_fail(&c, err, "bad step '%s'", c.field[0]);
        else if (!parse_f64(c.field[2], &acc, true))
            st = dt_csv_fail(&c, err, "bad test_acc '%s'", c.field[2]);
        else if (!parse_f64(c.field[1], &loss, true))
            st = dt_csv_fail(&c, err, "bad test_loss '%s'", c.field[1]);
        else if (step == steps) r->test_acc = acc, r->test_loss = loss;
    }
    *cut = st == DT_OK && exists && !c.eol; /* its last row cut short: left out */
    dt_csv_close(&c);
    return st;
}

/* times.csv: every step's step_ms, and hash_ms where the step was hashed, into the cell's
 * pools (the cell's medians are over all its replicas' steps). */
static enum dt_status read_times(struct cell *cell, const char *path, bool *cut,
                                 struct dt_error *err)
{
    struct dt_csv_reader c;
    bool exists;
    enum dt_status st = dt_csv_open(&c, path, DT_TIMES_HEADER, false, &exists, err);
    bool row = exists;
    while (st == DT_OK && row && (st = dt_csv_next(&c, 3, &row, err)) == DT_OK && row) {
        int64_t step;
        double ms, hash;
        if (!parse_i64(c.field[0], &step)) st = dt_csv_fail(&c, err, "bad step '%s'", c.field[0]);
        else if (!parse_f64(c.field[1], &ms, true))
            st = dt_csv_fail(&c, err, "bad step_ms '%s'", c.field[1]);
        else if (!parse_f64(c.field[2], &hash, true))
            st = dt_csv_fail(&c, err, "bad hash_ms '%s'", c.field[2]);
        if (st != DT_OK) break;
        if (isfinite(ms)) dvec_push(&cell->step_times, ms);
        if (isfinite(hash)) dvec_push(&cell->hash_times, hash);
    }
    *cut = st == DT_OK && exists && !c.eol;
    dt_csv_close(&c);
    return st;
}

static bool parse_class(const char *s, uint8_t *out)
{
    int64_t v;
    if (!parse_i64(s, &v) || v < 0 || v > 255) return false;
    *out = (uint8_t)v;
    return true;
}

/* predictions.csv: label and predicted class of every test example, index 0, 1, ... */
static enum dt_status read_predictions(struct replica *r, const char *path, bool *cut,
                                       struct dt_error *err)
{
    struct dt_csv_reader c;
    bool exists;
    enum dt_status st = dt_csv_open(&c, path, DT_PREDICTIONS_HEADER, false, &exists, err);
    int64_t cap = 0;
    bool row = exists;
    while (st == DT_OK && row && (st = dt_csv_next(&c, 3, &row, err)) == DT_OK && row) {
        int64_t index;
        if (r->n_pred == cap) {
            cap = cap ? 2 * cap : 1024;
            r->label = dt_xrealloc(r->label, (size_t)cap);
            r->pred = dt_xrealloc(r->pred, (size_t)cap);
        }
        if (!parse_i64(c.field[0], &index) || index != r->n_pred)
            st = dt_csv_fail(&c, err, "bad index '%s' (expected %" PRId64 ")", c.field[0],
                             r->n_pred);
        else if (!parse_class(c.field[1], &r->label[r->n_pred]))
            st = dt_csv_fail(&c, err, "bad label '%s'", c.field[1]);
        else if (!parse_class(c.field[2], &r->pred[r->n_pred]))
            st = dt_csv_fail(&c, err, "bad predicted class '%s'", c.field[2]);
        else r->n_pred++;
    }
    *cut = st == DT_OK && exists && !c.eol;
    if (*cut) { /* written at the end of a replica: cut short, the replica did not complete */
        free(r->label), free(r->pred);
        r->label = r->pred = NULL;
        r->n_pred = 0;
    } else if (st == DT_OK && exists && !r->label) { /* header only: present but empty */
        r->label = dt_xmalloc(1);
        r->pred = dt_xmalloc(1);
    }
    dt_csv_close(&c);
    return st;
}

static int policy_index(const struct dt_experiment *exp, const char *name)
{
    for (int p = 0; p < exp->n_policies; p++)
        if (strcmp(exp->policies[p].name, name) == 0) return p;
    return -1;
}

/* One row of overhead.csv into the policy's pairs. */
static enum dt_status overhead_row(struct report *rep, struct dt_csv_reader *c,
                                   struct dt_error *err)
{
    int p = policy_index(&rep->exp, c->field[0]);
    int64_t pair;
    double fast, pol;
    if (p < 0) return dt_csv_fail(c, err, "policy '%s' is not in config.json", c->field[0]);
    if (!parse_i64(c->field[1], &pair)) return dt_csv_fail(c, err, "bad pair '%s'", c->field[1]);
    if (strcmp(c->field[2], "fast_first") != 0 && strcmp(c->field[2], "policy_first") != 0)
        return dt_csv_fail(c, err, "bad order '%s' (expected fast_first or policy_first)",
                           c->field[2]);
    if (!parse_f64(c->field[3], &fast, false) || fast <= 0)
        return dt_csv_fail(c, err, "bad fast_ms '%s'", c->field[3]);
    if (!parse_f64(c->field[4], &pol, false) || pol <= 0)
        return dt_csv_fail(c, err, "bad policy_ms '%s'", c->field[4]);
    dvec_push(&rep->ovh[p].fast, fast);
    dvec_push(&rep->ovh[p].pol, pol);
    return DT_OK;
}

/* overhead.csv: alternated (fast_ms, policy_ms) pairs grouped by policy. A run stopped
 * during its overhead measurement may leave the file empty (zero bytes, or a header cut
 * short), with fewer rows than report.overhead_samples, or with a last row cut short:
 * all accepted, and overhead_stats says what was not measured. */
static enum dt_status read_overhead(struct report *rep, const char *path, struct dt_error *err)
{
    struct dt_csv_reader c;
    bool exists;
    enum dt_status st = dt_csv_open(&c, path, DT_OVERHEAD_HEADER, true, &exists, err);
    rep->ovh_absent = !exists;
    rep->ovh_empty = exists && c.empty;
    bool row = exists && !c.empty;
    while (st == DT_OK && row) {
        struct dt_error rerr = {0};
        enum dt_status rst = dt_csv_next(&c, 5, &row, &rerr);
        if (rst == DT_OK && row) rst = overhead_row(rep, &c, &rerr);
        if (rst != DT_OK) {
            if (err) *err = rerr;
            st = rst;
        }
    }
    /* a last line without its newline: cut short, not used (dt_csv_next left it out) */
    if (st == DT_OK && exists && !c.empty && !c.eol) rep->ovh_cut = true;
    dt_csv_close(&c);
    return st;
}

/* ---- loading ---------------------------------------------------------------------------- */

static enum dt_status load_config(struct report *rep, struct dt_error *err)
{
    char path[PATH_LEN];
    snprintf(path, sizeof path, "%s/config.json", rep->dir);
    if (!dt_is_dir(rep->dir))
        return dt_error_set(err, DT_ERR_IO, "%s: no such experiment folder", rep->dir);
    if (!dt_path_exists(path))
        return dt_error_set(err, DT_ERR_IO, "%s: not an experiment folder: config.json is missing",
                            rep->dir);
    DT_FORWARD_IF_ERROR(dt_config_load(&rep->exp, path, NULL, 0, err));
    const struct dt_experiment *exp = &rep->exp;
    rep->steps = dt_xcalloc((size_t)exp->report.snapshots + 1, sizeof *rep->steps);
    rep->n_steps = dt_snapshot_steps(exp, rep->steps);
    rep->n_cells = dt_cell_count(exp);
    rep->cells = dt_xcalloc((size_t)rep->n_cells, sizeof *rep->cells);
    return DT_OK;
}

static void replica_path(char *buf, size_t size, const struct report *rep, int cell, int r,
                         const char *file)
{
    char rdir[PATH_LEN];
    dt_replica_dir(rdir, sizeof rdir, rep->dir, &rep->exp, cell, r);
    snprintf(buf, size, "%s/%s", rdir, file);
}

/* Does the file end inside a line (no end of line after its last byte, as a writer killed
 * mid-row leaves it)? */
static bool last_line_cut(const char *path)
{
    int fd;
    int64_t size = 0;
    struct dt_error ignored;
    if (dt_open_regular(&fd, path, "a CSV file", &size, &ignored) != DT_OK) return false;
    char last = '\n';
    const bool cut = size > 0 && pread(fd, &last, 1, (off_t)size - 1) == 1 && last != '\n';
    close(fd);
    return cut;
}

/* A replica's file whose cut last line was left out, listed for report.md. */
static void note_cut(struct report *rep, const struct cell *cell, int r, const char *name, bool cut)
{
    if (cut)
        dt_strbuf_printf(&rep->cut, "%s`%s/replica-%d/%s`", rep->cut.len ? ", " : "", cell->dir, r,
                         name);
}

/* One replica's files. A missing folder (run interrupted before it started) or a trace
 * that stops short of train.steps leaves it not completed. A last line cut short (a run
 * killed while writing it) is left out, as if absent, and noted. */
static enum dt_status load_replica(struct report *rep, struct cell *cell, int c, int r,
                                   struct dt_error *err)
{
    struct replica *rp = &cell->rep[r];
    char rdir[PATH_LEN], path[PATH_LEN + 32];
    rp->test_acc = NAN;
    rp->test_loss = NAN;
    dt_replica_dir(rdir, sizeof rdir, rep->dir, &rep->exp, c, r);
    rp->present = dt_is_dir(rdir);
    if (!rp->present) return DT_OK;
    snprintf(path, sizeof path, "%s/trace.csv", rdir);
    if (dt_path_exists(path)) {
        DT_FORWARD_IF_ERROR(dt_trace_read(&rp->trace, &rp->n_trace, path, err));
        note_cut(rep, cell, r, "trace.csv", last_line_cut(path));
    }
    snprintf(path, sizeof path, "%s/tensors.csv", rdir); /* read where traces are compared */
    if (dt_path_exists(path)) note_cut(rep, cell, r, "tensors.csv", last_line_cut(path));
    bool cut = false;
    snprintf(path, sizeof path, "%s/predictions.csv", rdir);
    DT_FORWARD_IF_ERROR(read_predictions(rp, path, &cut, err));
    note_cut(rep, cell, r, "predictions.csv", cut);
    snprintf(path, sizeof path, "%s/metrics.csv", rdir);
    DT_FORWARD_IF_ERROR(read_metrics(rp, path, rep->exp.train.steps, &cut, err));
    note_cut(rep, cell, r, "metrics.csv", cut);
    snprintf(path, sizeof path, "%s/times.csv", rdir);
    DT_FORWARD_IF_ERROR(read_times(cell, path, &cut, err));
    note_cut(rep, cell, r, "times.csv", cut);
    rp->completed = rp->n_trace > 0 && rp->trace[rp->n_trace - 1].step == rep->exp.train.steps &&
                    rp->label != NULL;
    /* files taken away since the run (packed or trimmed): rebuilt, the replica would read as
     * never completed and every number of its cell would go */
    if (!rp->completed && dt_manifest_completed(rdir))
        return dt_error_set(
            err, DT_ERR_DATA,
            "%s: run.json says this replica completed, but its %s: its files were packed or "
            "trimmed since (a committed results folder keeps trace.csv, times.csv and "
            "metrics.csv in per-step.tar.xz and no predictions.csv; for a matrix folder "
            "`detrain report DIR --tables-only` remakes its tables alone); nothing was rewritten",
            rdir,
            rp->n_trace == 0    ? "trace.csv is missing or empty"
            : rp->label == NULL ? "predictions.csv is missing"
                                : "trace.csv stops short of train.steps");
    cell->completed += rp->completed;
    return DT_OK;
}

static enum dt_status load_cell(struct report *rep, int c, struct dt_error *err)
{
    const struct dt_experiment *exp = &rep->exp;
    struct cell *cell = &rep->cells[c];
    const int n = exp->replicas;
    cell->v = dt_cell_vary(exp, c);
    cell->p = dt_cell_policy(exp, c);
    cell->policy = exp->policies[cell->p].name;
    dt_cell_dir(cell->dir, sizeof cell->dir, exp, c);
    dt_vary_label(cell->vary, sizeof cell->vary, exp->vary_sets[cell->v]);
    cell->rep = dt_xcalloc((size_t)n, sizeof *cell->rep);
    cell->n_pairs = n * (n - 1) / 2;
    cell->pairs = dt_xcalloc((size_t)cell->n_pairs + 1, sizeof *cell->pairs);
    cell->drift_mean = dt_xcalloc((size_t)rep->n_steps + 1, sizeof *cell->drift_mean);
    for (int s = 0; s < rep->n_steps; s++) cell->drift_mean[s] = NAN;
    int k = 0;
    for (int a = 0; a < n; a++)
        for (int b = a + 1; b < n; b++, k++) {
            struct pair *pr = &cell->pairs[k];
            pr->a = a;
            pr->b = b;
            pr->churn = pr->l2 = pr->l2_rel = NAN;
        }
    for (int r = 0; r < n; r++) DT_FORWARD_IF_ERROR(load_replica(rep, cell, c, r, err));
    cell->step_ms = dt_median(cell->step_times.v, cell->step_times.n);
    cell->hash_ms = dt_median(cell->hash_times.v, cell->hash_times.n);
    return DT_OK;
}

/* ---- divergence: traces ----------------------------------------------------------------- */

/* Every pair of replicas with traces (failed ones included: where a trace stops counts as
 * a divergence, dt_trace_compare). The cell's first divergence is the earliest over pairs;
 * its tensor comes from the first pair (in pair order) at that step that names one. */
static enum dt_status compare_cell(struct report *rep, struct cell *cell, int c,
                                   struct dt_error *err)
{
    cell->first_step = -1;
    for (int k = 0; k < cell->n_pairs; k++) {
        struct pair *pr = &cell->pairs[k];
        if (!cell->rep[pr->a].trace || !cell->rep[pr->b].trace) continue;
        char pa[PATH_LEN + 16], pb[PATH_LEN + 16];
        replica_path(pa, sizeof pa, rep, c, pr->a, "trace.csv");
        replica_path(pb, sizeof pb, rep, c, pr->b, "trace.csv");
        DT_FORWARD_IF_ERROR(dt_trace_compare(&pr->diff, pa, pb, err));
        pr->compared = true;
        cell->has_first = true;
        if (!pr->diff.diverged) continue;
        bool earlier = cell->first_step < 0 || pr->diff.first_step < cell->first_step;
        if (earlier) cell->first_tensor[0] = '\0';
        if (earlier || (pr->diff.first_step == cell->first_step && !cell->first_tensor[0])) {
            cell->first_step = pr->diff.first_step;
            snprintf(cell->first_tensor, sizeof cell->first_tensor, "%s", pr->diff.tensor);
        }
    }
    /* distinct final digests among completed replicas */
    for (int i = 0; i < rep->exp.replicas; i++) {
        const struct replica *ri = &cell->rep[i];
        if (!ri->completed) continue;
        bool seen = false;
        for (int j = 0; j < i && !seen; j++)
            seen = cell->rep[j].completed &&
                   strcmp(cell->rep[j].trace[cell->rep[j].n_trace - 1].digest,
                          ri->trace[ri->n_trace - 1].digest) == 0;
        cell->distinct += !seen;
    }
    return DT_OK;
}

/* ---- accuracy and churn ------------------------------------------------------------------ */

/* Every completed replica of a cell must have classified the same test examples. */
static enum dt_status check_same_test_set(const struct report *rep, const struct cell *cell, int c,
                                          struct dt_error *err)
{
    const struct replica *ref = NULL;
    for (int r = 0; r < rep->exp.replicas; r++) {
        const struct replica *rp = &cell->rep[r];
        if (!rp->completed) continue;
        if (!ref) {
            ref = rp;
            continue;
        }
        if (rp->n_pred == ref->n_pred && memcmp(rp->label, ref->label, (size_t)rp->n_pred) == 0)
            continue;
        char path[PATH_LEN + 32];
        replica_path(path, sizeof path, rep, c, r, "predictions.csv");
        return dt_error_set(err, DT_ERR_DATA,
                            "%s: %" PRId64 " examples whose labels differ from the other "
                            "replicas' (%" PRId64 " examples): not the same test set",
                            path, rp->n_pred, ref->n_pred);
    }
    return DT_OK;
}

/* Accuracy of replica rp on each class (NaN for classes absent from the labels). */
static void class_accuracy(double acc[256], const struct replica *rp)
{
    int64_t total[256] = {0}, right[256] = {0};
    for (int64_t i = 0; i < rp->n_pred; i++) {
        total[rp->label[i]]++;
        right[rp->label[i]] += rp->pred[i] == rp->label[i];
    }
    for (int k = 0; k < 256; k++) acc[k] = total[k] ? (double)right[k] / (double)total[k] : NAN;
}

/* Sample std across completed replicas of each class's accuracy: mean and max over the
 * classes present in the labels (the same in every completed replica). */
static void class_spread(struct cell *cell, int n_rep)
{
    cell->class_std_mean = cell->class_std_max = NAN;
    if (cell->completed < 2) return;
    double(*acc)[256] = dt_xcalloc((size_t)cell->completed, sizeof *acc);
    int m = 0;
    for (int r = 0; r < n_rep; r++)
        if (cell->rep[r].completed) class_accuracy(acc[m++], &cell->rep[r]);
    double sum = 0, max = 0, *col = dt_xcalloc((size_t)m, sizeof *col);
    int classes = 0;
    for (int k = 0; k < 256; k++) {
        if (!isfinite(acc[0][k])) continue;
        for (int i = 0; i < m; i++) col[i] = acc[i][k];
        double mean, std;
        mean_std(col, m, &mean, &std);
        sum += std;
        max = classes == 0 || std > max ? std : max;
        classes++;
    }
    free(col);
    free(acc);
    if (classes == 0) return;
    cell->class_std_mean = sum / classes;
    cell->class_std_max = max;
}

static enum dt_status accuracy_cell(const struct report *rep, struct cell *cell, int c,
                                    struct dt_error *err)
{
    const int n = rep->exp.replicas;
    DT_FORWARD_IF_ERROR(check_same_test_set(rep, cell, c, err));
    double *acc = dt_xcalloc((size_t)n, sizeof *acc);
    int m = 0;
    for (int r = 0; r < n; r++)
        if (cell->rep[r].completed && isfinite(cell->rep[r].test_acc))
            acc[m++] = cell->rep[r].test_acc;
    mean_std(acc, m, &cell->acc_mean, &cell->acc_std);
    free(acc);
    double sum = 0;
    int pairs = 0;
    cell->churn_max = NAN;
    for (int k = 0; k < cell->n_pairs; k++) {
        struct pair *pr = &cell->pairs[k];
        const struct replica *ra = &cell->rep[pr->a], *rb = &cell->rep[pr->b];
        if (!ra->completed || !rb->completed) continue;
        pr->churn = dt_churn(ra->pred, rb->pred, ra->n_pred);
        if (!isfinite(pr->churn)) continue;
        sum += pr->churn;
        cell->churn_max = pairs == 0 || pr->churn > cell->churn_max ? pr->churn : cell->churn_max;
        pairs++;
    }
    cell->churn_mean = pairs ? sum / pairs : NAN;
    class_spread(cell, n);
    return DT_OK;
}

/* ---- drift and final L2: snapshots --------------------------------------------------------- */

/* One replica's snapshot at `step`, checked against its trace (dt_snapshot_read_verified:
 * a mismatch is an error naming the snapshot). *have = false when there is no such file. */
static enum dt_status load_snapshot(struct dt_snapshot *s, bool *have, const char *rdir,
                                    const char *path, const struct replica *rp, int64_t step,
                                    struct dt_error *err)
{
    *have = false;
    if (!dt_path_exists(path)) return DT_OK;
    DT_FORWARD_IF_ERROR(
        dt_snapshot_read_verified(s, NULL, rdir, step, rp->trace, rp->n_trace, err));
    *have = true;
    return DT_OK;
}

static enum dt_status pair_distance(struct pair *pr, int s, const struct dt_snapshot *a,
                                    const struct dt_snapshot *b, const char *path_a,
                                    const char *path_b, struct dt_error *err)
{
    double l2, na, nb;
    struct dt_error e;
    if (dt_snapshot_distance(a, b, &l2, &na, &nb, &e) != DT_OK)
        return dt_error_set(err, DT_ERR_DATA, "%s vs %s: %s", path_a, path_b, e.msg);
    double mean_norm = 0.5 * (na + nb);
    pr->drift_l2[s] = l2;
    pr->drift_rel[s] = l2 == 0.0 ? 0.0 : l2 / mean_norm; /* as dt_compare_snapshots */
    return DT_OK;
}

/* Pairwise distances of the completed replicas' snapshots at snapshot step index s. */
static enum dt_status drift_step(const struct report *rep, struct cell *cell, int c, int s,
                                 struct dt_snapshot *snap, bool *have, struct dt_error *err)
{
    const int n = rep->exp.replicas;
    const int64_t step = rep->steps[s];
    char(*paths)[PATH_LEN + 64] = dt_xcalloc((size_t)n, sizeof *paths);
    enum dt_status st = DT_OK;
    for (int r = 0; r < n && st == DT_OK; r++) {
        have[r] = false;
        if (!cell->rep[r].completed) continue;
        char rdir[PATH_LEN];
        dt_replica_dir(rdir, sizeof rdir, rep->dir, &rep->exp, c, r);
        dt_snapshot_path(paths[r], sizeof paths[r], rdir, step);
        st = load_snapshot(&snap[r], &have[r], rdir, paths[r], &cell->rep[r], step, err);
    }
    double sum = 0;
    int m = 0;
    for (int k = 0; k < cell->n_pairs && st == DT_OK; k++) {
        struct pair *pr = &cell->pairs[k];
        if (!pr->drift_l2 || !have[pr->a] || !have[pr->b]) continue;
        st = pair_distance(pr, s, &snap[pr->a], &snap[pr->b], paths[pr->a], paths[pr->b], err);
        sum += st == DT_OK ? pr->drift_l2[s] : 0;
        m += st == DT_OK;
    }
    cell->drift_mean[s] = m ? sum / m : NAN;
    for (int r = 0; r < n; r++)
        if (have[r]) dt_snapshot_free(&snap[r]);
    free(paths);
    return st;
}

/* Drift at every snapshot step; the final L2 (absolute and relative) is the drift at the
 * last snapshot step, which is train.steps (layout.h). */
static enum dt_status drift_cell(const struct report *rep, struct cell *cell, int c,
                                 struct dt_error *err)
{
    const int n = rep->exp.replicas;
    for (int k = 0; k < cell->n_pairs; k++) {
        struct pair *pr = &cell->pairs[k];
        if (!cell->rep[pr->a].completed || !cell->rep[pr->b].completed) continue;
        pr->drift_l2 = dt_xcalloc((size_t)rep->n_steps + 1, sizeof(double));
        pr->drift_rel = dt_xcalloc((size_t)rep->n_steps + 1, sizeof(double));
        for (int s = 0; s < rep->n_steps; s++) pr->drift_l2[s] = pr->drift_rel[s] = NAN;
    }
    struct dt_snapshot *snap = dt_xcalloc((size_t)n, sizeof *snap);
    bool *have = dt_xcalloc((size_t)n, sizeof *have);
    enum dt_status st = DT_OK;
    for (int s = 0; s < rep->n_steps && st == DT_OK; s++)
        st = drift_step(rep, cell, c, s, snap, have, err);
    free(snap);
    free(have);
    const int last = rep->n_steps - 1;
    double sum = 0, sum_rel = 0;
    int m = 0, m_rel = 0;
    for (int k = 0; k < cell->n_pairs && st == DT_OK && last >= 0; k++) {
        struct pair *pr = &cell->pairs[k];
        if (!pr->drift_l2 || rep->steps[last] != rep->exp.train.steps) continue;
        pr->l2 = pr->drift_l2[last];
        pr->l2_rel = pr->drift_rel[last];
        if (isfinite(pr->l2)) {
            sum += pr->l2;
            m++;
        }
        if (isfinite(pr->l2_rel)) {
            sum_rel += pr->l2_rel;
            m_rel++;
        }
    }
    cell->l2_mean = m ? sum / m : NAN;
    cell->l2_rel_mean = m_rel ? sum_rel / m_rel : NAN;
    return st;
}

/* ---- overhead --------------------------------------------------------------------------- */

/* rep->ovh_note: what of the overhead was not measured, and why ("" when all was). */
static void overhead_note(struct report *rep)
{
    const struct dt_experiment *exp = &rep->exp;
    struct dt_strbuf missing = {0}, partial = {0};
    int n_missing = 0, n_partial = 0;
    for (int p = 0; p < exp->n_policies; p++) {
        const struct overhead *o = &rep->ovh[p];
        if (o->baseline) continue;
        if (o->fast.n == 0)
            dt_strbuf_printf(&missing, "%s%s", n_missing++ ? ", " : "", exp->policies[p].name);
        else if (o->partial)
            dt_strbuf_printf(&partial, "%s%s (%" PRId64 " of %" PRId64 " pairs)",
                             n_partial++ ? ", " : "", exp->policies[p].name, o->fast.n,
                             exp->report.overhead_samples);
    }
    const char *again = "`detrain run --resume` with the same config measures it";
    char *out = rep->ovh_note;
    const size_t size = sizeof rep->ovh_note;
    out[0] = '\0';
    if (n_missing > 0 && exp->report.overhead_samples == 0)
        snprintf(out, size, "not measured (report.overhead_samples is 0)");
    else if (n_missing > 0 && rep->ovh_absent)
        snprintf(out, size,
                 "not measured: %s/overhead.csv is missing (the run was stopped "
                 "before its overhead measurement; %s)",
                 rep->dir, again);
    else if (n_missing > 0)
        snprintf(out, size,
                 "not measured for %s: %s/overhead.csv %s (the run was stopped "
                 "before or during its overhead measurement; %s)",
                 missing.data, rep->dir, rep->ovh_empty ? "is empty" : "has no rows for it", again);
    if (n_partial > 0)
        snprintf(out + strlen(out), size - strlen(out),
                 "%smeasured over the rows present only "
                 "for %s: %s/overhead.csv is partial (the run was stopped during its overhead "
                 "measurement)",
                 out[0] ? "; " : "", partial.data, rep->dir);
    else if (rep->ovh_cut && out[0] == '\0')
        snprintf(out, size,
                 "measured; the cut-short last line of %s/overhead.csv was left "
                 "out",
                 rep->dir);
    dt_strbuf_free(&missing);
    dt_strbuf_free(&partial);
}

static void overhead_stats(struct report *rep)
{
    struct dt_policy fast;
    dt_policy_from_level(&fast, DT_LEVEL_FAST);
    for (int p = 0; p < rep->exp.n_policies; p++) {
        struct overhead *o = &rep->ovh[p];
        o->baseline = dt_policy_equal_controls(&rep->exp.policies[p], &fast);
        o->fast_med = dt_median(o->fast.v, o->fast.n);
        o->pol_med = dt_median(o->pol.v, o->pol.n);
        if (o->baseline) {
            o->has_ratio = true;
            o->ci = (struct dt_ratio_ci){.ratio = 1.0, .lo = NAN, .hi = NAN};
        } else if (o->fast.n > 0) {
            o->has_ratio = true;
            dt_bootstrap_median_ratio(o->fast.v, o->pol.v, o->fast.n, BOOTSTRAP_RESAMPLES,
                                      BOOTSTRAP_SEED, &o->ci);
        }
        o->partial = !o->baseline && o->fast.n > 0 && o->fast.n < rep->exp.report.overhead_samples;
    }
    overhead_note(rep);
}

static const char *overhead_verdict(const struct overhead *o)
{
    if (o->baseline) return "baseline";
    if (!o->has_ratio) return "";
    return o->ci.inconclusive ? "inconclusive" : "conclusive";
}

/* ---- CSV outputs -------------------------------------------------------------------------- */

/* ",<value>" with a fixed format, or "," when not available. */
static void put_f(struct dt_strbuf *sb, const char *fmt, double v)
{
    dt_strbuf_printf(sb, ",");
    if (isfinite(v)) dt_strbuf_printf(sb, fmt, v);
}

static enum dt_status write_out(const struct report *rep, const char *name, struct dt_strbuf *sb,
                                struct dt_error *err)
{
    char path[PATH_LEN];
    snprintf(path, sizeof path, "%s/%s", rep->dir, name);
    enum dt_status st = dt_write_file_atomic(path, sb->data ? sb->data : "", sb->len, err);
    dt_strbuf_free(sb);
    return st;
}

static void summary_row(struct dt_strbuf *sb, const struct report *rep, const struct cell *cell)
{
    const struct overhead *o = &rep->ovh[cell->p];
    dt_strbuf_printf(sb, "%s,%s,%s,%d,%d,", cell->dir, cell->vary, cell->policy, rep->exp.replicas,
                     cell->completed);
    if (cell->completed) dt_strbuf_printf(sb, "%d", cell->distinct);
    dt_strbuf_printf(sb, ",");
    if (cell->has_first) dt_strbuf_printf(sb, "%" PRId64, cell->first_step);
    dt_strbuf_printf(sb, ",%s", cell->first_tensor);
    put_f(sb, "%.6f", cell->acc_mean);
    put_f(sb, "%.6f", cell->acc_std);
    put_f(sb, "%.6f", cell->churn_mean);
    put_f(sb, "%.6f", cell->churn_max);
    put_f(sb, "%.6g", cell->l2_mean);
    put_f(sb, "%.6g", cell->l2_rel_mean);
    put_f(sb, "%.6f", cell->class_std_mean);
    put_f(sb, "%.6f", cell->class_std_max);
    put_f(sb, "%.6f", cell->step_ms);
    put_f(sb, "%.6f", cell->hash_ms);
    put_f(sb, "%.6f", o->has_ratio ? o->ci.ratio : NAN);
    put_f(sb, "%.6f", o->has_ratio ? o->ci.lo : NAN);
    put_f(sb, "%.6f", o->has_ratio ? o->ci.hi : NAN);
    dt_strbuf_printf(sb, ",%s\n", overhead_verdict(o));
}

static enum dt_status write_summary_csv(const struct report *rep, struct dt_error *err)
{
    struct dt_strbuf sb = {0};
    dt_strbuf_printf(&sb, "%s\n", DT_REPORT_SUMMARY_HEADER);
    for (int c = 0; c < rep->n_cells; c++) summary_row(&sb, rep, &rep->cells[c]);
    return write_out(rep, "summary.csv", &sb, err);
}

static void pair_row(struct dt_strbuf *sb, const struct cell *cell, const struct pair *pr)
{
    const struct replica *ra = &cell->rep[pr->a], *rb = &cell->rep[pr->b];
    dt_strbuf_printf(sb, "%s,%s,%s,%d,%d,", cell->dir, cell->vary, cell->policy, pr->a, pr->b);
    if (ra->completed && rb->completed)
        dt_strbuf_printf(
            sb, "%d",
            strcmp(ra->trace[ra->n_trace - 1].digest, rb->trace[rb->n_trace - 1].digest) == 0);
    dt_strbuf_printf(sb, ",");
    if (pr->compared) dt_strbuf_printf(sb, "%" PRId64, pr->diff.first_step);
    dt_strbuf_printf(sb, ",%s", pr->compared ? pr->diff.tensor : "");
    put_f(sb, "%.6f", pr->churn);
    put_f(sb, "%.6g", pr->l2);
    put_f(sb, "%.6g", pr->l2_rel);
    put_f(sb, "%.6f", ra->completed ? ra->test_acc : NAN);
    put_f(sb, "%.6f", rb->completed ? rb->test_acc : NAN);
    dt_strbuf_printf(sb, "\n");
}

static enum dt_status write_cells_csv(const struct report *rep, struct dt_error *err)
{
    struct dt_strbuf sb = {0};
    dt_strbuf_printf(&sb, "%s\n", DT_REPORT_CELLS_HEADER);
    for (int c = 0; c < rep->n_cells; c++)
        for (int k = 0; k < rep->cells[c].n_pairs; k++)
            pair_row(&sb, &rep->cells[c], &rep->cells[c].pairs[k]);
    return write_out(rep, "cells.csv", &sb, err);
}

static enum dt_status write_drift_csv(const struct report *rep, struct dt_error *err)
{
    struct dt_strbuf sb = {0};
    dt_strbuf_printf(&sb, "%s\n", DT_REPORT_DRIFT_HEADER);
    for (int c = 0; c < rep->n_cells; c++) {
        const struct cell *cell = &rep->cells[c];
        for (int s = 0; s < rep->n_steps; s++)
            for (int k = 0; k < cell->n_pairs; k++) {
                const struct pair *pr = &cell->pairs[k];
                if (!pr->drift_l2) continue;
                dt_strbuf_printf(&sb, "%s,%s,%s,%" PRId64 ",%d,%d", cell->dir, cell->vary,
                                 cell->policy, rep->steps[s], pr->a, pr->b);
                put_f(&sb, "%.6g", pr->drift_l2[s]);
                put_f(&sb, "%.6g", pr->drift_rel[s]);
                dt_strbuf_printf(&sb, "\n");
            }
    }
    return write_out(rep, "drift.csv", &sb, err);
}

/* ---- plots ---------------------------------------------------------------------------------- */

/* Full path of an executable: a name with '/' as given (made absolute, since gnuplot runs
 * in plots/), else the first match on $PATH. */
static bool find_executable(char *out, size_t size, const char *name)
{
    if (strchr(name, '/')) {
        char *real = realpath(name, NULL);
        bool ok = real && access(real, X_OK) == 0 && !dt_is_dir(real);
        if (ok) snprintf(out, size, "%s", real);
        free(real);
        return ok;
    }
    const char *path = getenv("PATH");
    if (!path || !*path) path = "/usr/local/bin:/usr/bin:/bin";
    for (const char *p = path; *p;) {
        size_t len = strcspn(p, ":");
        snprintf(out, size, "%.*s/%s", (int)len, len ? p : ".", name);
        if (access(out, X_OK) == 0 && !dt_is_dir(out)) return true;
        p += len + (p[len] == ':');
    }
    return false;
}

/* Which gnuplot runs; false with the report.md line in `why` when plots are off. */
static bool choose_gnuplot(char *exe, size_t size, const struct dt_report_options *opt, char *why,
                           size_t why_size)
{
    const char *env = getenv("DETRAIN_GNUPLOT");
    const char *name = opt->gnuplot ? opt->gnuplot : env ? env : "gnuplot";
    if (name[0] == '\0' || strcmp(name, "none") == 0) {
        if (opt->gnuplot)
            snprintf(why, why_size, "Plots skipped: plotting turned off (gnuplot: none).");
        else snprintf(why, why_size, "Plots skipped: DETRAIN_GNUPLOT=%s.", name[0] ? name : "\"\"");
        return false;
    }
    if (!find_executable(exe, size, name)) {
        if (opt->gnuplot || env)
            snprintf(why, why_size,
                     "Plots skipped: gnuplot not found (the gnuplot named by %s "
                     "is not an executable).",
                     opt->gnuplot ? "the caller" : "DETRAIN_GNUPLOT");
        else
            snprintf(why, why_size,
                     "Plots skipped: gnuplot not found on PATH (install gnuplot, "
                     "or set DETRAIN_GNUPLOT to its path).");
        return false;
    }
    return true;
}

/* Run `exe script` in plots_dir, output into log_fd; the exit status (127: exec failed). */
static int run_gnuplot(const char *exe, const char *plots_dir, const char *script, int log_fd)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        int null_fd = open("/dev/null", O_RDONLY);
        if (null_fd >= 0) dup2(null_fd, 0);
        dup2(log_fd, 1);
        dup2(log_fd, 2);
        if (chdir(plots_dir) != 0) _exit(126);
        char *const argv[] = {(char *)exe, (char *)script, NULL};
        execv(exe, argv);
        _exit(127);
    }
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status)
                             : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

/* The start of every script: SVG first; plot_tail renders the same plot to PNG. */
static void plot_head(struct dt_strbuf *gp, const char *name, const char *title)
{
    dt_strbuf_printf(gp, "# detrain report: %s (run `gnuplot %s.gp` in this folder)\n", title,
                     name);
    dt_strbuf_printf(gp, "set terminal svg noenhanced size 800,480 background rgb 'white'\n");
    dt_strbuf_printf(gp, "set output '%s.svg'\nset title '%s'\nset grid\n", name, title);
}

static void plot_tail(struct dt_strbuf *gp, const char *name)
{
    dt_strbuf_printf(gp, "set terminal pngcairo noenhanced size 800,480\n");
    dt_strbuf_printf(gp, "set output '%s.png'\nreplot\nunset output\n", name);
}

static struct plot_note *new_plot(struct report *rep, const char *name, const char *title)
{
    DT_ASSERT(rep->n_plots < (int)(sizeof rep->plots / sizeof rep->plots[0]));
    struct plot_note *pl = &rep->plots[rep->n_plots++];
    snprintf(pl->name, sizeof pl->name, "%s", name);
    snprintf(pl->title, sizeof pl->title, "%s", title);
    return pl;
}

static bool write_plot_file(const char *plots_dir, const char *file, struct dt_strbuf *sb,
                            struct plot_note *pl)
{
    char path[PATH_LEN + 128];
    struct dt_error e;
    snprintf(path, sizeof path, "%s/%s", plots_dir, file);
    bool ok = dt_write_file_atomic(path, sb->data ? sb->data : "", sb->len, &e) == DT_OK;
    if (!ok) snprintf(pl->note, sizeof pl->note, "could not write plots/%s", file);
    dt_strbuf_free(sb);
    return ok;
}

/* One vary setting's line of a drift plot: <name>-<v>.dat with the positive mean distances
 * at steps >= 1, and its clause of the plot command appended to `plot`. Returns how many
 * points it has, or -1 when the file could not be written (pl->note says so). */
static int drift_line(struct dt_strbuf *plot, const struct report *rep, const struct cell *cell,
                      int v, const char *plots_dir, struct plot_note *pl)
{
    struct dt_strbuf dat = {0};
    int pos = 0, zero = 0;
    for (int s = 0; s < rep->n_steps; s++) {
        double m = cell->drift_mean[s];
        if (rep->steps[s] < 1 || !isfinite(m)) continue;
        if (m == 0) {
            zero++;
            continue;
        }
        dt_strbuf_printf(&dat, "%" PRId64 " %.9g\n", rep->steps[s], m);
        pos++;
    }
    char file[160];
    snprintf(file, sizeof file, "%s-%d.dat", pl->name, v);
    if (!write_plot_file(plots_dir, file, &dat, pl)) return -1;
    const char *tag = pos == 0 && zero > 0 ? " (identical)" : pos == 0 ? " (no data)" : "";
    const char *sep = plot->len ? ", " : "";
    if (pos)
        dt_strbuf_printf(plot, "%s'%s' using 1:2 with linespoints lt %d lw 2 title '%s%s'", sep,
                         file, v + 1, cell->vary, tag);
    else
        dt_strbuf_printf(plot, "%skeyentry with lines lt %d title '%s%s'", sep, v + 1, cell->vary,
                         tag);
    return pos;
}

/* drift-<policy>: one line per vary setting, mean pairwise L2 against step, log-log. Step 0
 * and zero distances have no place on log axes: they are left out, and a setting whose
 * every distance is zero is titled "(identical)". Returns false (note set) when not written. */
static bool drift_plot_files(const struct report *rep, int p, const char *plots_dir,
                             struct plot_note *pl)
{
    const struct dt_experiment *exp = &rep->exp;
    struct dt_strbuf gp = {0}, plot = {0};
    int positive = 0;
    for (int v = 0; v < exp->n_vary && positive >= 0; v++) {
        int pos = drift_line(&plot, rep, &rep->cells[v * exp->n_policies + p], v, plots_dir, pl);
        positive = pos < 0 ? -1 : positive + pos;
    }
    if (positive < 0) {
        dt_strbuf_free(&plot);
        return false;
    }
    plot_head(&gp, pl->name, pl->title);
    dt_strbuf_printf(&gp,
                     "set logscale xy\nset xlabel 'step'\nset ylabel 'mean pairwise L2 "
                     "distance of the weights'\nset format y '%%.0e'\nset key outside right\n");
    dt_strbuf_printf(&gp, "set xrange [%s:%" PRId64 "]\n", exp->train.steps > 1 ? "1" : "0.5",
                     exp->train.steps > 1 ? exp->train.steps : 2);
    if (!positive) /* nothing to draw: a fixed range and the legend alone */
        dt_strbuf_printf(&gp, "set yrange [1e-9:1]\nset label 1 'replicas identical at every "
                              "snapshot' at graph 0.5, 0.5 center\n");
    dt_strbuf_printf(&gp, "plot %s%s\n", positive ? "" : "NaN notitle, ", plot.data);
    dt_strbuf_free(&plot);
    plot_tail(&gp, pl->name);
    char file[160];
    snprintf(file, sizeof file, "%s.gp", pl->name);
    return write_plot_file(plots_dir, file, &gp, pl);
}

/* accuracy: every completed replica's test accuracy per cell, and the mean +- std. */
static bool accuracy_plot_files(const struct report *rep, const char *plots_dir,
                                struct plot_note *pl)
{
    struct dt_strbuf pts = {0}, means = {0}, gp = {0};
    int cells_with_acc = 0;
    for (int c = 0; c < rep->n_cells; c++) {
        const struct cell *cell = &rep->cells[c];
        for (int r = 0; r < rep->exp.replicas; r++)
            if (cell->rep[r].completed && isfinite(cell->rep[r].test_acc))
                dt_strbuf_printf(&pts, "%d %.9g\n", c + 1, cell->rep[r].test_acc);
        if (!isfinite(cell->acc_mean)) continue;
        dt_strbuf_printf(&means, "%d %.9g %.9g \"%s\"\n", c + 1, cell->acc_mean,
                         isfinite(cell->acc_std) ? cell->acc_std : 0.0, cell->dir);
        cells_with_acc++;
    }
    if (!cells_with_acc) {
        snprintf(pl->note, sizeof pl->note, "no completed replica has a test accuracy");
        dt_strbuf_free(&pts);
        dt_strbuf_free(&means);
        return false;
    }
    plot_head(&gp, pl->name, pl->title);
    dt_strbuf_printf(&gp,
                     "set xrange [0.5:%d.5]\nset ylabel 'test accuracy'\nset xtics "
                     "rotate by -30\nset key bottom right\n",
                     rep->n_cells);
    dt_strbuf_printf(&gp, "plot 'accuracy-mean.dat' using 1:2:3:xtic(4) with yerrorbars pt 7 "
                          "ps 1.5 lw 2 title 'mean +- std', 'accuracy-replicas.dat' using 1:2 with "
                          "points pt 1 ps 1.5 title 'replica'\n");
    plot_tail(&gp, pl->name);
    return write_plot_file(plots_dir, "accuracy-replicas.dat", &pts, pl) &&
           write_plot_file(plots_dir, "accuracy-mean.dat", &means, pl) &&
           write_plot_file(plots_dir, "accuracy.gp", &gp, pl);
}

/* overhead: one bar per policy (ratio of medians to fast) with its 95% interval. */
static bool overhead_plot_files(const struct report *rep, const char *plots_dir,
                                struct plot_note *pl)
{
    struct dt_strbuf dat = {0}, gp = {0};
    int bars = 0;
    for (int p = 0; p < rep->exp.n_policies; p++) {
        const struct overhead *o = &rep->ovh[p];
        if (!o->has_ratio) continue;
        double lo = isfinite(o->ci.lo) ? o->ci.lo : o->ci.ratio;
        double hi = isfinite(o->ci.hi) ? o->ci.hi : o->ci.ratio;
        dt_strbuf_printf(&dat, "%d %.9g %.9g %.9g \"%s\"\n", ++bars, o->ci.ratio, lo, hi,
                         rep->exp.policies[p].name);
    }
    if (!bars) {
        snprintf(pl->note, sizeof pl->note, "no overhead measurements (overhead.csv)");
        dt_strbuf_free(&dat);
        return false;
    }
    plot_head(&gp, pl->name, pl->title);
    dt_strbuf_printf(&gp,
                     "set style fill solid 0.4\nset boxwidth 0.6\nset yrange [0:*]\n"
                     "set xrange [0.5:%d.5]\nset ylabel 'median step time / fast'\n"
                     "set key top left\n",
                     bars);
    dt_strbuf_printf(&gp,
                     "plot 'overhead.dat' using 1:2:xtic(5) with boxes notitle, '' using "
                     "1:2:3:4 with yerrorbars pt 7 lw 2 title '95%% interval', 1 with lines dt 2 "
                     "lc 'black' title '1.0 = fast'\n");
    plot_tail(&gp, pl->name);
    return write_plot_file(plots_dir, "overhead.dat", &dat, pl) &&
           write_plot_file(plots_dir, "overhead.gp", &gp, pl);
}

static void render_plot(struct report *rep, struct plot_note *pl, const char *exe,
                        const char *plots_dir, int log_fd)
{
    char script[128], svg[PATH_LEN + 128];
    snprintf(script, sizeof script, "%s.gp", pl->name);
    snprintf(svg, sizeof svg, "%s/%s.svg", plots_dir, pl->name);
    int rc = run_gnuplot(exe, plots_dir, script, log_fd);
    struct stat st;
    pl->made = rc == 0 && stat(svg, &st) == 0 && st.st_size > 0;
    if (!pl->made) {
        snprintf(pl->note, sizeof pl->note,
                 "gnuplot failed (exit status %d; see "
                 "plots/gnuplot.log)",
                 rc);
        if (!rep->opt->quiet)
            fprintf(stderr, "detrain report: warning: plot %s: %s\n", pl->name, pl->note);
    }
}

/* Remove the images an earlier build left, so plots/ never shows stale ones. */
static void remove_old_plots(const struct report *rep, const char *plots_dir)
{
    static const char *const ext[] = {"svg", "png"};
    char path[PATH_LEN + 128];
    for (int e = 0; e < 2; e++) {
        for (int p = 0; p < rep->exp.n_policies; p++) {
            snprintf(path, sizeof path, "%s/drift-%s.%s", plots_dir, rep->exp.policies[p].name,
                     ext[e]);
            unlink(path);
        }
        snprintf(path, sizeof path, "%s/accuracy.%s", plots_dir, ext[e]);
        unlink(path);
        snprintf(path, sizeof path, "%s/overhead.%s", plots_dir, ext[e]);
        unlink(path);
    }
}

/* Decide on gnuplot, write the inputs and run it per plot. Never fails the report: what
 * went wrong becomes a warning and a line in report.md. */
static void make_plots(struct report *rep)
{
    char plots_dir[PATH_LEN], exe[PATH_LEN];
    snprintf(plots_dir, sizeof plots_dir, "%s/plots", rep->dir);
    if (dt_is_dir(plots_dir)) remove_old_plots(rep, plots_dir);
    struct dt_error e;
    bool on =
        choose_gnuplot(exe, sizeof exe, rep->opt, rep->plots_skipped, sizeof rep->plots_skipped);
    if (on && dt_mkdir_p(plots_dir, &e) != DT_OK) {
        snprintf(rep->plots_skipped, sizeof rep->plots_skipped,
                 "Plots skipped: could not create the plots/ folder.");
        on = false;
    }
    char log[PATH_LEN + 32];
    snprintf(log, sizeof log, "%s/gnuplot.log", plots_dir);
    int log_fd = on ? dt_out_open(log, O_TRUNC, NULL) : -1;
    if (on && log_fd < 0) {
        snprintf(rep->plots_skipped, sizeof rep->plots_skipped,
                 "Plots skipped: could not create plots/gnuplot.log.");
        on = false;
    }
    if (!on) {
        if (!rep->opt->quiet) fprintf(stderr, "detrain report: %s\n", rep->plots_skipped);
        return;
    }
    for (int p = 0; p < rep->exp.n_policies && rep->n_steps > 1; p++) {
        char name[96], title[128];
        snprintf(name, sizeof name, "drift-%s", rep->exp.policies[p].name);
        snprintf(title, sizeof title, "Drift between replicas: %s", rep->exp.policies[p].name);
        struct plot_note *pl = new_plot(rep, name, title);
        if (drift_plot_files(rep, p, plots_dir, pl)) render_plot(rep, pl, exe, plots_dir, log_fd);
    }
    struct plot_note *acc = new_plot(rep, "accuracy", "Test accuracy per cell");
    if (accuracy_plot_files(rep, plots_dir, acc)) render_plot(rep, acc, exe, plots_dir, log_fd);
    struct plot_note *ovh = new_plot(rep, "overhead", "Cost of determinism: step time vs fast");
    if (overhead_plot_files(rep, plots_dir, ovh)) render_plot(rep, ovh, exe, plots_dir, log_fd);
    close(log_fd);
}

/* ---- report.md --------------------------------------------------------------------------------
 */

/* " | <value>" with a fixed format, or " | -" when not available. */
static void md_f(struct dt_strbuf *sb, const char *fmt, double v)
{
    dt_strbuf_printf(sb, " | ");
    if (isfinite(v)) dt_strbuf_printf(sb, fmt, v);
    else dt_strbuf_printf(sb, "-");
}

static void md_setup(struct dt_strbuf *sb, const struct report *rep)
{
    const struct dt_experiment *exp = &rep->exp;
    dt_strbuf_printf(sb, "# %s\n\n", exp->name);
    dt_strbuf_printf(sb, "**Setup.** Model %s", dt_model_kind_names[exp->model.kind]);
    if (dt_model_kind_reads(exp->model.kind, "model.hidden")) {
        dt_strbuf_printf(sb, " (hidden [");
        for (int i = 0; i < exp->model.n_hidden; i++)
            dt_strbuf_printf(sb, "%s%" PRId64, i ? ", " : "", exp->model.hidden[i]);
        dt_strbuf_printf(sb, "])");
    }
    dt_strbuf_printf(sb,
                     " on %s, %" PRId64 " steps of batch %" PRId64 " (seed %" PRIu64 "), on "
                     "the %s backend; %d replicas per cell. Vary settings: ",
                     exp->dataset.name, exp->train.steps, exp->train.batch, exp->train.seed,
                     exp->backend.device == DT_DEVICE_CUDA ? "cuda" : "cpu", exp->replicas);
    for (int v = 0; v < exp->n_vary; v++) {
        char label[64];
        dt_vary_label(label, sizeof label, exp->vary_sets[v]);
        dt_strbuf_printf(sb, "%s`%s`", v ? ", " : "", label);
    }
    dt_strbuf_printf(sb, ". Policies: ");
    for (int p = 0; p < exp->n_policies; p++)
        dt_strbuf_printf(sb, "%s`%s`", p ? ", " : "", exp->policies[p].name);
    dt_strbuf_printf(sb, ". %d cells (vary setting x policy). Weights hashed ", rep->n_cells);
    if (exp->hash.every == 1) dt_strbuf_printf(sb, "at every step");
    else dt_strbuf_printf(sb, "every %" PRId64 " steps", exp->hash.every);
    dt_strbuf_printf(sb, "%s; ", exp->hash.per_tensor ? " (per tensor)" : "");
    if (rep->n_steps == 0) dt_strbuf_printf(sb, "no weight snapshots.\n\n");
    else {
        dt_strbuf_printf(sb, "weight snapshots at steps ");
        for (int s = 0; s < rep->n_steps; s++)
            dt_strbuf_printf(sb, "%s%" PRId64, s ? ", " : "", rep->steps[s]);
        dt_strbuf_printf(sb, ".\n\n");
    }
}

static void md_how_to_read(struct dt_strbuf *sb)
{
    dt_strbuf_printf(
        sb, "**How to read this.** The replicas of a cell share every setting of the config. With "
            "`vary: []` (setting `none`) and a nondeterministic policy such as `fast`, whatever "
            "differs between replicas is *implementation noise* only (the order of floating-point "
            "operations). With a vary setting such as `init` and a deterministic policy such as "
            "`portable`, it is *algorithmic noise* only (the varied source of randomness). This is "
            "the split of Zhuang et al., \"Randomness in Neural Network Training: Characterizing "
            "the Impact of Tooling\", MLSys 2022. *Distinct digests*: distinct final model digests "
            "among completed replicas; *first divergent step*: the earliest step at which two "
            "replicas' model digests differ (-1 = never; a trace that stops early counts); "
            "*churn*: the share of test examples two replicas classify differently; *L2 rel*: the "
            "distance of two replicas' final weights over the mean of their norms. `-` = not "
            "available.\n\n");
}

/* A cell whose policy promises nothing (reduction unordered or atomics float) but whose
 * replicas all agree: say so, and what still depends on the schedule or the machine
 * (issue 38: fast takes its fastest paths, and on a CPU some happen to be deterministic). */
static void md_unparted_note(struct dt_strbuf *sb, const struct report *rep,
                             const struct cell *cell)
{
    const struct dt_policy *pol = &rep->exp.policies[cell->p];
    if (rep->exp.replicas < 2 || cell->completed < 2 || cell->distinct != 1) return;
    if (dt_reduction_ordered(pol) && dt_atomics_exact(pol)) return;
    const bool cpu = rep->exp.backend.device == DT_DEVICE_CPU;
    dt_strbuf_printf(
        sb, "`%s`: its replicas did not part, though `%s` promises no order. %s\n\n", cell->dir,
        pol->name,
        cpu ? "On the CPU `fast` takes the fastest path op by op, and in this run none of "
              "them handed work out as threads came or added partials in an order that could "
              "change the bits (two per-thread partials cannot: 0 + a + b = 0 + b + a). Whether "
              "another thread count gives other bits depends on the CPU and the batch -- which "
              "kernels the products take (detrain's AVX-512 tiles split outputs, never a sum; "
              "OpenBLAS's choice varies by processor) and how the batch splits -- so compare a "
              "run at another thread count (`make demo` shows 1 thread against 2). The order "
              "still matters: `detrain explain` on two replicas re-executes a step under drawn "
              "combination orders and names the op whose bits change."
            : "On a GPU its float atomicAdd (bias gradients, scatter-adds) and cuDNN's timed "
              "algorithm choice still depend on the schedule; this run's replicas happened to "
              "agree.");
}

static void md_divergence(struct dt_strbuf *sb, const struct report *rep)
{
    dt_strbuf_printf(sb,
                     "## Divergence per cell\n\n| cell | replicas | completed | distinct "
                     "digests | first divergent step | first divergent tensor | churn mean | "
                     "churn max | L2 mean | L2 rel mean |\n|---|--:|--:|--:|--:|---|--:|--:|--:|"
                     "--:|\n");
    for (int c = 0; c < rep->n_cells; c++) {
        const struct cell *cell = &rep->cells[c];
        dt_strbuf_printf(sb, "| %s | %d | %d", cell->dir, rep->exp.replicas, cell->completed);
        md_f(sb, "%.0f", cell->completed ? cell->distinct : NAN);
        md_f(sb, "%.0f", cell->has_first ? (double)cell->first_step : NAN);
        dt_strbuf_printf(sb, " | %s", cell->first_tensor[0] ? cell->first_tensor : "-");
        md_f(sb, "%.4f", cell->churn_mean);
        md_f(sb, "%.4f", cell->churn_max);
        md_f(sb, "%.4g", cell->l2_mean);
        md_f(sb, "%.4g", cell->l2_rel_mean);
        dt_strbuf_printf(sb, " |\n");
    }
    dt_strbuf_printf(sb, "\n");
    for (int c = 0; c < rep->n_cells; c++) md_unparted_note(sb, rep, &rep->cells[c]);
}

/* report.explain: `detrain explain` on replica-0 and replica-1 of each cell whose replicas
 * part; its text kept for report.md, its op table in explain/<cell>.csv. A cell explain
 * cannot handle says why in its place; the report goes on. */
static enum dt_status explain_cells(struct report *rep, struct dt_error *err)
{
    if (!rep->exp.report.explain || rep->exp.replicas < 2) return DT_OK;
    rep->explained = dt_xcalloc((size_t)rep->n_cells, sizeof *rep->explained);
    char dir[PATH_LEN];
    snprintf(dir, sizeof dir, "%s/explain", rep->dir);
    for (int c = 0; c < rep->n_cells; c++) {
        const struct cell *cell = &rep->cells[c];
        if (!cell->has_first || cell->first_step < 0) continue;
        DT_FORWARD_IF_ERROR(dt_mkdir_p(dir, err));
        char a[PATH_LEN], b[PATH_LEN], csv[PATH_LEN + 300], name[256];
        dt_replica_dir(a, sizeof a, rep->dir, &rep->exp, c, 0);
        dt_replica_dir(b, sizeof b, rep->dir, &rep->exp, c, 1);
        snprintf(name, sizeof name, "%s", cell->dir);
        for (char *p = name; *p; p++)
            if (*p == '/') *p = '_';
        snprintf(csv, sizeof csv, "%s/%s.csv", dir, name);
        char *text = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&text, &len);
        if (!f) dt_out_of_memory(0, "an explanation's text");
        const struct dt_explain_options opt = {
            .a = a, .b = b, .executions = 5, .csv = csv, .quiet = true, .step = 0, .hooks = NULL};
        struct dt_explain_result res;
        struct dt_error why = {0};
        if (dt_explain(&opt, f, &res, &why) != DT_OK) fprintf(f, "explain failed: %s\n", why.msg);
        fclose(f);
        /* folders relative to the experiment, as the rest of report.md names them */
        const size_t dl = strlen(rep->dir);
        for (char *p = text; (p = strstr(p, rep->dir)) != NULL;)
            if (p[dl] == '/') memmove(p, p + dl + 1, strlen(p + dl + 1) + 1);
            else p += dl;
        rep->explained[c] = text;
    }
    return DT_OK;
}

static void md_explain(struct dt_strbuf *sb, const struct report *rep)
{
    if (!rep->explained) return;
    dt_strbuf_printf(sb, "## Why replicas part (detrain explain)\n\n"
                         "For each cell whose replicas part, `detrain explain` on replica-0 and "
                         "replica-1 (`report.explain: true`; the op tables are in "
                         "`explain/<cell>.csv`):\n\n");
    for (int c = 0; c < rep->n_cells; c++)
        if (rep->explained[c])
            dt_strbuf_printf(sb, "### %s\n\n```\n%s```\n\n", rep->cells[c].dir, rep->explained[c]);
}

static void md_accuracy(struct dt_strbuf *sb, const struct report *rep)
{
    dt_strbuf_printf(sb, "## Accuracy per cell\n\nTest accuracy of the completed replicas; "
                         "per-class std is the spread across replicas of each class's accuracy.\n\n"
                         "| cell | completed | test acc mean | test acc std | per-class std mean | "
                         "per-class std max |\n|---|--:|--:|--:|--:|--:|\n");
    for (int c = 0; c < rep->n_cells; c++) {
        const struct cell *cell = &rep->cells[c];
        dt_strbuf_printf(sb, "| %s | %d", cell->dir, cell->completed);
        md_f(sb, "%.4f", cell->acc_mean);
        md_f(sb, "%.4f", cell->acc_std);
        md_f(sb, "%.4f", cell->class_std_mean);
        md_f(sb, "%.4f", cell->class_std_max);
        dt_strbuf_printf(sb, " |\n");
    }
    dt_strbuf_printf(sb, "\n");
}

/* A language model (dataset.name: text): validation loss in nats and bits per byte per
 * cell, and the text replica 0 of each cell sampled at the end (sample.txt, layout.h). */
static void md_text(struct dt_strbuf *sb, const struct report *rep)
{
    if (!dt_model_kind(rep->exp.model.kind)->reads_text) return;
    dt_strbuf_printf(sb, "## Language model\n\nMean validation loss of the completed replicas "
                         "over the fixed validation windows (every byte after a window's "
                         "first predicted once), in nats and in bits per byte (nats / ln 2); "
                         "test acc above is the share of bytes predicted first.\n\n"
                         "| cell | completed | loss (nats/byte) | bits per byte |\n"
                         "|---|--:|--:|--:|\n");
    for (int c = 0; c < rep->n_cells; c++) {
        const struct cell *cell = &rep->cells[c];
        double sum = 0;
        int m = 0;
        for (int r = 0; r < rep->exp.replicas; r++)
            if (cell->rep[r].completed && isfinite(cell->rep[r].test_loss))
                sum += cell->rep[r].test_loss, m++;
        dt_strbuf_printf(sb, "| %s | %d", cell->dir, cell->completed);
        md_f(sb, "%.4f", m ? sum / m : NAN);
        md_f(sb, "%.4f", m ? sum / m / log(2.0) : NAN);
        dt_strbuf_printf(sb, " |\n");
    }
    dt_strbuf_printf(sb,
                     "\nText sampled from each cell's replica 0 after training (prompt `%s`, "
                     "temperature %.1f; the same stream for every replica, so replicas with "
                     "the same weights write the same text; bytes outside printable text "
                     "shown as \\xHH):\n\n",
                     DT_SAMPLE_PROMPT, (double)DT_SAMPLE_TEMPERATURE);
    for (int c = 0; c < rep->n_cells; c++) {
        char rdir[PATH_LEN], path[PATH_LEN + 16];
        dt_replica_dir(rdir, sizeof rdir, rep->dir, &rep->exp, c, 0);
        snprintf(path, sizeof path, "%s/sample.txt", rdir);
        size_t len = 0;
        char *text = NULL;
        struct dt_error e;
        if (dt_read_regular_file(&text, &len, path, "a sample", 1 << 16, &e) != DT_OK) continue;
        dt_strbuf_printf(sb, "`%s`:\n\n", rep->cells[c].dir);
        for (size_t i = 0; i < len;) {
            const size_t j = i + strcspn(text + i, "\n");
            char line[1024];
            dt_escape_bytes(line, sizeof line, text + i, j - i, sizeof line);
            dt_strbuf_printf(sb, "    %s\n", line);
            i = j + 1;
        }
        dt_strbuf_printf(sb, "\n");
        free(text);
    }
}

static void md_overhead(struct dt_strbuf *sb, const struct report *rep)
{
    dt_strbuf_printf(sb,
                     "## Overhead per policy\n\nMedian step time of each policy over the "
                     "median of `fast` on alternated steps (overhead.csv), with a paired "
                     "bootstrap 95%% interval (%d resamples); *inconclusive* when the interval "
                     "holds 1.0.\n\n| policy | pairs | fast_ms median | policy_ms median | ratio "
                     "| 95%% interval | verdict |\n|---|--:|--:|--:|--:|---|---|\n",
                     BOOTSTRAP_RESAMPLES);
    for (int p = 0; p < rep->exp.n_policies; p++) {
        const struct overhead *o = &rep->ovh[p];
        dt_strbuf_printf(sb, "| %s | %" PRId64, rep->exp.policies[p].name, o->fast.n);
        md_f(sb, "%.4f", o->fast_med);
        md_f(sb, "%.4f", o->pol_med);
        md_f(sb, "%.3f", o->has_ratio ? o->ci.ratio : NAN);
        if (o->has_ratio && isfinite(o->ci.lo))
            dt_strbuf_printf(sb, " | [%.3f, %.3f]", o->ci.lo, o->ci.hi);
        else dt_strbuf_printf(sb, " | -");
        dt_strbuf_printf(sb, " | %s%s |\n", o->has_ratio ? overhead_verdict(o) : "not measured",
                         o->partial ? " (partial)" : "");
    }
    dt_strbuf_printf(sb, "\n");
    for (int p = 0; p < rep->exp.n_policies; p++) { /* a baseline slower than it need be */
        const struct overhead *o = &rep->ovh[p];
        if (o->has_ratio && !o->baseline && isfinite(o->ci.hi) && o->ci.hi < 0.95)
            dt_strbuf_printf(
                sb,
                "**fast is not the fastest here**: %s's step is %.3fx fast's "
                "[%.3f, %.3f], beyond the interval by more than 5%%; every ratio against fast "
                "flatters determinism until fast takes the faster path "
                "(docs/performance.md).\n\n",
                rep->exp.policies[p].name, o->ci.ratio, o->ci.lo, o->ci.hi);
    }
    if (rep->ovh_note[0]) dt_strbuf_printf(sb, "Overhead %s.\n\n", rep->ovh_note);
}

static void md_drift(struct dt_strbuf *sb, const struct report *rep)
{
    dt_strbuf_printf(sb, "## Drift\n\n");
    if (rep->n_steps == 0) {
        dt_strbuf_printf(sb, "No weight snapshots (report.snapshots: 0).\n\n");
        return;
    }
    dt_strbuf_printf(sb, "Mean pairwise L2 distance of the weights of completed replicas at "
                         "each snapshot step (per pair: drift.csv).\n\n| step |");
    for (int c = 0; c < rep->n_cells; c++) dt_strbuf_printf(sb, " %s |", rep->cells[c].dir);
    dt_strbuf_printf(sb, "\n|--:|");
    for (int c = 0; c < rep->n_cells; c++) dt_strbuf_printf(sb, "--:|");
    dt_strbuf_printf(sb, "\n");
    for (int s = 0; s < rep->n_steps; s++) {
        dt_strbuf_printf(sb, "| %" PRId64, rep->steps[s]);
        for (int c = 0; c < rep->n_cells; c++) md_f(sb, "%.4g", rep->cells[c].drift_mean[s]);
        dt_strbuf_printf(sb, " |\n");
    }
    dt_strbuf_printf(sb, "\n");
}

static void md_plots(struct dt_strbuf *sb, const struct report *rep)
{
    dt_strbuf_printf(sb, "## Plots\n\n");
    if (rep->plots_skipped[0]) {
        dt_strbuf_printf(sb, "%s\n", rep->plots_skipped);
        return;
    }
    for (int i = 0; i < rep->n_plots; i++) {
        const struct plot_note *pl = &rep->plots[i];
        if (pl->made) dt_strbuf_printf(sb, "![%s](plots/%s.svg)\n\n", pl->title, pl->name);
        else dt_strbuf_printf(sb, "Plot %s not made: %s.\n\n", pl->name, pl->note);
    }
}

/* One replica's algos.csv (harness/record/algolog.h) summarised: its choices without their step
 * ranges as one string (rows in opening order: "call op shape name; ..."), its rows and the
 * changes within the run (rows beyond the first of each call site). False when absent. */
static bool read_algos(const char *path, struct dt_strbuf *choices, int *rows, int *changes)
{
    FILE *f; /* not a regular file (a FIFO would block): no record */
    if (dt_fopen_regular(&f, path, "algos.csv", NULL) != DT_OK) return false;
    char line[512];
    bool seen[DT_ALGOLOG_MAX_CALLS] = {false};
    *rows = *changes = 0;
    for (int n = 0; fgets(line, sizeof line, f); n++) {
        if (n == 0) continue; /* header */
        line[strcspn(line, "\r\n")] = 0;
        char *field[10];
        int k = 0;
        for (char *t = line, *e; k < 10 && t; t = e ? e + 1 : NULL, k++) {
            e = strchr(t, ',');
            if (e) *e = 0;
            field[k] = t;
        }
        if (k < 10) continue; /* not a row of this format */
        const int call = atoi(field[2]);
        if (call >= 0 && call < DT_ALGOLOG_MAX_CALLS) {
            if (seen[call]) (*changes)++;
            seen[call] = true;
        }
        (*rows)++;
        dt_strbuf_printf(choices, "%s%s %s %s %s%s", *rows > 1 ? "; " : "", field[2], field[3],
                         field[4], field[6], strcmp(field[7], "true") == 0 ? "" : " (nondet.)");
    }
    fclose(f);
    return true;
}

/* Which library algorithms ran (algos.csv, cuDNN under conv_algo autotune/deterministic):
 * per cell, whether the replicas chose alike and whether a run changed its choice. No
 * section when no replica has such a record (CPU runs, conv_algo: own). */
static void md_algorithms(struct dt_strbuf *sb, const struct report *rep)
{
    bool header = false;
    for (int c = 0; c < rep->n_cells; c++) {
        const struct cell *cell = &rep->cells[c];
        struct dt_strbuf first = {0};
        int with = 0, distinct = 0, changes = 0;
        char **sigs = dt_xcalloc((size_t)rep->exp.replicas, sizeof *sigs);
        for (int r = 0; r < rep->exp.replicas; r++) {
            char path[PATH_LEN + 32];
            replica_path(path, sizeof path, rep, c, r, "algos.csv");
            struct dt_strbuf sig = {0};
            int rows, ch;
            if (!read_algos(path, &sig, &rows, &ch)) continue;
            with++;
            changes += ch;
            const char *text = sig.data ? sig.data : "";
            bool seen = false;
            for (int q = 0; q < r && !seen; q++) seen = sigs[q] && strcmp(sigs[q], text) == 0;
            distinct += !seen;
            if (!first.data) dt_strbuf_printf(&first, "%s", text);
            sigs[r] = dt_xmalloc(strlen(text) + 1);
            memcpy(sigs[r], text, strlen(text) + 1);
            dt_strbuf_free(&sig);
        }
        if (with > 0) {
            if (!header)
                dt_strbuf_printf(sb, "## Library algorithms per cell\n\nFrom each replica's "
                                     "`algos.csv`: the algorithms cuDNN ran (call site, op, shape, "
                                     "algorithm). *distinct choices*: how many different sets of "
                                     "choices the replicas made (autotuning may choose differently "
                                     "in each run); *changes*: choices that changed within a run, "
                                     "summed over replicas.\n\n| cell | replicas with a record | "
                                     "distinct choices | changes | choices of the first |\n"
                                     "|---|--:|--:|--:|---|\n");
            header = true;
            dt_strbuf_printf(sb, "| %s | %d | %d | %d | %s |\n", cell->dir, with, distinct, changes,
                             first.data ? first.data : "");
        }
        for (int r = 0; r < rep->exp.replicas; r++) free(sigs[r]);
        free(sigs);
        dt_strbuf_free(&first);
    }
    if (header) dt_strbuf_printf(sb, "\n");
}

/* The replicas' files whose last line was cut short (a run stopped while writing it): left
 * out of every figure, as if absent. */
static void md_cut(struct dt_strbuf *sb, const struct report *rep)
{
    if (!rep->cut.len) return;
    dt_strbuf_printf(sb,
                     "**Cut short.** The last line of %s had no end of line (the run was stopped "
                     "while writing it): it is left out of every figure below, as if absent.\n\n",
                     rep->cut.data);
}

static enum dt_status write_report_md(const struct report *rep, struct dt_error *err)
{
    struct dt_strbuf sb = {0};
    md_setup(&sb, rep);
    md_cut(&sb, rep);
    md_how_to_read(&sb);
    md_divergence(&sb, rep);
    md_explain(&sb, rep);
    md_algorithms(&sb, rep);
    md_accuracy(&sb, rep);
    md_text(&sb, rep);
    md_overhead(&sb, rep);
    md_drift(&sb, rep);
    md_plots(&sb, rep);
    return write_out(rep, "report.md", &sb, err);
}

/* ---- stdout summary ----------------------------------------------------------------------- */

static void print_overhead(const struct overhead *o)
{
    if (o->baseline) printf("baseline");
    else if (!o->has_ratio) printf("not measured");
    else if (o->ci.inconclusive) printf("%.2fx inconclusive", o->ci.ratio);
    else printf("%.2fx [%.2f, %.2f]", o->ci.ratio, o->ci.lo, o->ci.hi);
    if (o->partial) printf(" (partial: %" PRId64 " pair%s)", o->fast.n, o->fast.n == 1 ? "" : "s");
}

static void print_summary(const struct report *rep)
{
    printf("\n%-28s %8s %8s %13s %-20s %17s %7s %9s  %s\n", "cell", "replicas", "distinct",
           "first_diverge", "first_tensor", "acc_mean +- std", "churn", "l2_rel", "overhead");
    for (int c = 0; c < rep->n_cells; c++) {
        const struct cell *cell = &rep->cells[c];
        char reps[32], distinct[16] = "-", first[24] = "-", acc[40] = "-", churn[16] = "-",
                       rel[16] = "-";
        snprintf(reps, sizeof reps, "%d/%d", cell->completed, rep->exp.replicas);
        if (cell->completed) snprintf(distinct, sizeof distinct, "%d", cell->distinct);
        if (cell->has_first) snprintf(first, sizeof first, "%" PRId64, cell->first_step);
        if (isfinite(cell->acc_mean))
            snprintf(acc, sizeof acc, "%.4f +- %.4f", cell->acc_mean,
                     isfinite(cell->acc_std) ? cell->acc_std : 0.0);
        if (isfinite(cell->churn_mean)) snprintf(churn, sizeof churn, "%.4f", cell->churn_mean);
        if (isfinite(cell->l2_rel_mean)) snprintf(rel, sizeof rel, "%.3g", cell->l2_rel_mean);
        printf("%-28s %8s %8s %13s %-20s %17s %7s %9s  ", cell->dir, reps, distinct, first,
               cell->first_tensor[0] ? cell->first_tensor : "-", acc, churn, rel);
        print_overhead(&rep->ovh[cell->p]);
        printf("\n");
    }
    printf("(replicas = completed/total; distinct = distinct final model digests; "
           "first_diverge = earliest step at which two replicas' digests differ, -1 = never;\n"
           " churn = mean share of test examples two replicas classify differently; l2_rel = "
           "final weight distance over weight norm;\n overhead = median step time vs fast "
           "with its 95%% interval)\n");
    if (rep->ovh_note[0]) printf("overhead: %s\n", rep->ovh_note);
    if (rep->cut.len)
        printf("note: a replica file's last line was cut short (a stopped run) and left out; "
               "report.md names the files\n");
    char dir[4 * 1100]; /* the folder as given, escaped for the terminal */
    dt_escape_path(dir, sizeof dir, rep->dir);
    printf("report:  %s/report.md\nsummary: %s/summary.csv\ncells:   %s/cells.csv\n"
           "drift:   %s/drift.csv\n",
           dir, dir, dir, dir);
    int made = 0;
    for (int i = 0; i < rep->n_plots; i++) made += rep->plots[i].made;
    if (rep->plots_skipped[0]) printf("plots:   %s\n", rep->plots_skipped);
    else printf("plots:   %s/plots/ (%d of %d made)\n", dir, made, rep->n_plots);
    fflush(stdout);
}

/* ---- entry point -------------------------------------------------------------------------- */

static void report_free(struct report *rep)
{
    for (int c = 0; c < rep->n_cells && rep->explained; c++) free(rep->explained[c]);
    free(rep->explained);
    for (int c = 0; c < rep->n_cells && rep->cells; c++) {
        struct cell *cell = &rep->cells[c];
        for (int r = 0; r < rep->exp.replicas && cell->rep; r++) {
            free(cell->rep[r].trace);
            free(cell->rep[r].label);
            free(cell->rep[r].pred);
        }
        for (int k = 0; k < cell->n_pairs && cell->pairs; k++) {
            free(cell->pairs[k].drift_l2);
            free(cell->pairs[k].drift_rel);
        }
        free(cell->rep);
        free(cell->pairs);
        free(cell->drift_mean);
        free(cell->step_times.v);
        free(cell->hash_times.v);
    }
    for (int p = 0; p < DT_MAX_POLICIES; p++) {
        free(rep->ovh[p].fast.v);
        free(rep->ovh[p].pol.v);
    }
    free(rep->cells);
    free(rep->steps);
    dt_strbuf_free(&rep->cut);
    free(rep);
}

static enum dt_status analyse(struct report *rep, struct dt_error *err)
{
    for (int c = 0; c < rep->n_cells; c++) {
        struct cell *cell = &rep->cells[c];
        DT_FORWARD_IF_ERROR(load_cell(rep, c, err));
        DT_FORWARD_IF_ERROR(compare_cell(rep, cell, c, err));
        DT_FORWARD_IF_ERROR(accuracy_cell(rep, cell, c, err));
        DT_FORWARD_IF_ERROR(drift_cell(rep, cell, c, err));
    }
    char path[PATH_LEN];
    snprintf(path, sizeof path, "%s/overhead.csv", rep->dir);
    DT_FORWARD_IF_ERROR(read_overhead(rep, path, err));
    overhead_stats(rep);
    return DT_OK;
}

enum dt_status dt_report_build(const char *dir, const struct dt_report_options *opt,
                               struct dt_error *err)
{
    DT_FORWARD_IF_ERROR(dt_result_check_links(dir, err)); /* no link followed in it */
    static const struct dt_report_options defaults = {0};
    struct report *rep = dt_xcalloc(1, sizeof *rep);
    rep->dir = dir;
    rep->opt = opt ? opt : &defaults;
    enum dt_status st = load_config(rep, err);
    if (st == DT_OK) st = analyse(rep, err);
    if (st == DT_OK) st = write_summary_csv(rep, err);
    if (st == DT_OK) st = write_cells_csv(rep, err);
    if (st == DT_OK) st = write_drift_csv(rep, err);
    if (st == DT_OK) make_plots(rep);
    if (st == DT_OK) st = explain_cells(rep, err);
    if (st == DT_OK) st = write_report_md(rep, err);
    if (st == DT_OK && rep->opt->print_summary) print_summary(rep);
    report_free(rep);
    return st;
}

/* ---- summary.csv read back (for matrix reports) ------------------------------------------ */

/* A field copied into a fixed buffer; false when it does not fit. */
static bool copy_field(char *dst, size_t size, const char *s)
{
    size_t n = strlen(s);
    if (n >= size) return false;
    memcpy(dst, s, n + 1);
    return true;
}

static bool parse_int_field(const char *s, int64_t *v, bool empty_ok, bool *empty)
{
    *empty = *s == '\0';
    if (*empty) return empty_ok;
    return parse_i64(s, v);
}

/* One data row of summary.csv (field order of DT_REPORT_SUMMARY_HEADER). */
static enum dt_status summary_fields(struct dt_report_summary_row *r, const struct dt_csv_reader *c,
                                     struct dt_error *err)
{
    char *const *f = c->field;
    int64_t v;
    bool empty;
    memset(r, 0, sizeof *r);
    if (!copy_field(r->cell, sizeof r->cell, f[0]) || !copy_field(r->vary, sizeof r->vary, f[1]) ||
        !copy_field(r->policy, sizeof r->policy, f[2]) ||
        !copy_field(r->first_tensor, sizeof r->first_tensor, f[7]) ||
        !copy_field(r->verdict, sizeof r->verdict, f[21]))
        return dt_csv_fail(c, err, "a name field is too long");
    if (!parse_int_field(f[3], &v, false, &empty) || v < 1)
        return dt_csv_fail(c, err, "bad replicas '%s'", f[3]);
    r->replicas = (int)v;
    if (!parse_int_field(f[4], &v, false, &empty) || v < 0 || v > r->replicas)
        return dt_csv_fail(c, err, "bad completed '%s'", f[4]);
    r->completed = (int)v;
    if (!parse_int_field(f[5], &v, true, &empty) || (!empty && (v < 1 || v > r->completed)))
        return dt_csv_fail(c, err, "bad distinct_final_digests '%s'", f[5]);
    r->distinct = empty ? -1 : (int)v;
    if (!parse_int_field(f[6], &v, true, &empty) || (!empty && v < -1))
        return dt_csv_fail(c, err, "bad first_divergent_step '%s'", f[6]);
    r->has_first = !empty;
    r->first_step = empty ? -1 : v;
    const struct {
        int col;
        double *out;
    } num[] = {{16, &r->step_ms}, {17, &r->hash_ms},    {18, &r->ratio},
               {19, &r->ci_lo},   {20, &r->ci_hi},      {8, &r->acc_mean},
               {9, &r->acc_std},  {10, &r->churn_mean}, {14, &r->class_std_mean}};
    for (size_t i = 0; i < sizeof num / sizeof num[0]; i++)
        if (!parse_f64(f[num[i].col], num[i].out, true))
            return dt_csv_fail(c, err, "bad number '%s' in column %d", f[num[i].col],
                               num[i].col + 1);
    return DT_OK;
}

enum dt_status dt_report_read_summary(const char *dir, struct dt_report_summary_row **rows,
                                      int *n_rows, struct dt_error *err)
{
    char path[PATH_LEN];
    snprintf(path, sizeof path, "%s/summary.csv", dir);
    *rows = NULL;
    *n_rows = 0;
    struct dt_csv_reader c;
    bool exists, row;
    enum dt_status st = dt_csv_open(&c, path, DT_REPORT_SUMMARY_HEADER, false, &exists, err);
    if (st == DT_OK && !exists) st = dt_error_set(err, DT_ERR_IO, "%s: missing", path);
    int cap = 0;
    row = exists;
    while (st == DT_OK && row && (st = dt_csv_next(&c, 22, &row, err)) == DT_OK && row) {
        if (*n_rows == cap) {
            cap = cap ? 2 * cap : 16;
            *rows = dt_xrealloc(*rows, (size_t)cap * sizeof **rows);
        }
        st = summary_fields(&(*rows)[*n_rows], &c, err);
        if (st == DT_OK) (*n_rows)++;
    }
    dt_csv_close(&c);
    if (st != DT_OK) {
        free(*rows);
        *rows = NULL;
        *n_rows = 0;
    }
    return st;
}
