/* Every recorded per-step value of a replica, compared (values.h). */
#include "harness/analyze/values.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fileio.h"
#include "harness/record/layout.h"
#include "harness/record/trace.h"

#define MAX_FILE (1u << 30)

/* Two printed numbers that are the same value ("nan" equals "nan"; "" equals ""). */
static bool same_number(const char *a, const char *b)
{
    if (strcmp(a, b) == 0) return true;
    char *ea, *eb;
    const double x = strtod(a, &ea), y = strtod(b, &eb);
    if (ea == a || eb == b || *ea || *eb) return false;
    return x == y || (isnan(x) && isnan(y));
}

static void differ(struct dt_values_diff *d, int64_t step, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void differ(struct dt_values_diff *d, int64_t step, const char *fmt, ...)
{
    if (d->differs) return; /* the first one is what is said */
    d->differs = true;
    d->step = step;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(d->what, sizeof d->what, fmt, ap);
    va_end(ap);
}

/* dir/name read whole; NULL with *absent when there is no such file. */
static enum dt_status read_text(char **text, bool *absent, const char *dir, const char *name,
                                struct dt_error *err)
{
    char path[4300];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    *text = NULL;
    *absent = !dt_path_exists(path);
    if (*absent) return DT_OK;
    size_t len;
    return dt_read_regular_file(text, &len, path, name, MAX_FILE, err);
}

/* The next line of *s (its end of line cut), or NULL at the end. */
static char *next_line(char **s)
{
    if (!*s || !**s) return NULL;
    char *line = *s, *nl = strchr(line, '\n');
    if (nl) {
        *nl = '\0';
        *s = nl + 1;
    } else {
        *s += strlen(line);
    }
    const size_t n = strlen(line);
    if (n && line[n - 1] == '\r') line[n - 1] = '\0';
    return line;
}

/* trace.csv: the loss of every recorded row (the digests are dt_trace_compare's). */
static enum dt_status compare_losses(struct dt_values_diff *d, const char *rec, const char *now,
                                     int64_t upto, struct dt_error *err)
{
    struct dt_trace_row *a = NULL, *b = NULL;
    int64_t na = 0, nb = 0;
    DT_FORWARD_IF_ERROR(dt_trace_read(&a, &na, rec, err));
    enum dt_status st = dt_trace_read(&b, &nb, now, err);
    for (int64_t i = 0, j = 0; st == DT_OK && i < na && (upto < 0 || a[i].step <= upto); i++) {
        while (j < nb && b[j].step < a[i].step) j++;
        if (j == nb || b[j].step != a[i].step) {
            differ(d, a[i].step, "trace.csv: step %" PRId64 " recorded, not hashed here",
                   a[i].step);
            break;
        }
        d->n_compared++;
        if (!same_number(a[i].loss, b[j].loss))
            differ(d, a[i].step, "loss at step %" PRId64 ": %s recorded, %s here", a[i].step,
                   a[i].loss[0] ? a[i].loss : "(none)", b[j].loss[0] ? b[j].loss : "(none)");
    }
    free(a);
    free(b);
    return st;
}

/* tensors.csv: every recorded row, in order, the same here (the header, which names the
 * digest kind, is not a value: a result from before it named one reads as well). */
static enum dt_status compare_tensors(struct dt_values_diff *d, const char *rec, const char *now,
                                      int64_t upto, struct dt_error *err)
{
    char *ta, *tb;
    bool absent_a, absent_b;
    DT_FORWARD_IF_ERROR(read_text(&ta, &absent_a, rec, "tensors.csv", err));
    if (absent_a) return DT_OK;
    enum dt_status st = read_text(&tb, &absent_b, now, "tensors.csv", err);
    if (st != DT_OK || absent_b) {
        if (st == DT_OK) differ(d, -1, "tensors.csv recorded, not written here");
        free(ta);
        return st;
    }
    char *sa = ta, *sb = tb, *la, *lb;
    (void)next_line(&sa), (void)next_line(&sb); /* headers */
    for (int64_t row = 2; (la = next_line(&sa)) != NULL; row++) {
        if (!la[0]) continue;
        const int64_t step = strtoll(la, NULL, 10);
        if (upto >= 0 && step > upto) break;
        lb = next_line(&sb);
        d->n_compared++;
        if (!lb || strcmp(la, lb) != 0) {
            const char *name = strchr(la, ',');
            char tensor[80] = "";
            if (name)
                snprintf(tensor, sizeof tensor, "%.*s", (int)strcspn(name + 1, ","), name + 1);
            differ(d, step, "tensors.csv row %" PRId64 " (step %" PRId64 ", tensor %s): %s here",
                   row, step, tensor, lb ? "another digest or tensor" : "no such row");
            break;
        }
    }
    free(ta);
    free(tb);
    return DT_OK;
}

/* The fields of a CSV line, cut in place (at most max). */
static int split_csv(char *line, char **fields, int max)
{
    int n = 0;
    for (char *p = line; n < max;) {
        fields[n++] = p;
        char *comma = strchr(p, ',');
        if (!comma) break;
        *comma = '\0';
        p = comma + 1;
    }
    return n;
}

/* metrics.csv: every recorded row's every column, found here by step and column name. */
static enum dt_status compare_metrics(struct dt_values_diff *d, const char *rec, const char *now,
                                      int64_t upto, struct dt_error *err)
{
    enum { MAX_COLS = 32 };
    char *ta, *tb;
    bool absent_a, absent_b;
    DT_FORWARD_IF_ERROR(read_text(&ta, &absent_a, rec, "metrics.csv", err));
    if (absent_a) return DT_OK;
    enum dt_status st = read_text(&tb, &absent_b, now, "metrics.csv", err);
    if (st != DT_OK) {
        free(ta);
        return st;
    }
    char *sa = ta, *sb = tb ? tb : (char *)"";
    char *ha[MAX_COLS], *hb[MAX_COLS];
    char *hla = next_line(&sa), *hlb = next_line(&sb);
    const int nha = hla ? split_csv(hla, ha, MAX_COLS) : 0;
    const int nhb = hlb ? split_csv(hlb, hb, MAX_COLS) : 0;
    /* the rerun's rows, by step (a few: one per evaluation) */
    int nrows = 0, cap = 0;
    char *(*rows)[MAX_COLS] = NULL;
    int *ncols = NULL;
    for (char *lb; (lb = next_line(&sb)) != NULL;) {
        if (!lb[0]) continue;
        if (nrows == cap) {
            cap = cap ? 2 * cap : 16;
            rows = realloc(rows, (size_t)cap * sizeof *rows);
            ncols = realloc(ncols, (size_t)cap * sizeof *ncols);
        }
        ncols[nrows] = split_csv(lb, rows[nrows], MAX_COLS);
        nrows++;
    }
    for (char *la; !d->differs && (la = next_line(&sa)) != NULL;) {
        if (!la[0]) continue;
        char *fa[MAX_COLS];
        const int nfa = split_csv(la, fa, MAX_COLS);
        const int64_t step = strtoll(fa[0], NULL, 10);
        if (upto >= 0 && step > upto) break;
        int r = 0;
        while (r < nrows && strcmp(rows[r][0], fa[0]) != 0) r++;
        if (r == nrows) {
            differ(d, step, "metrics.csv: an evaluation at step %" PRId64 " recorded, none here",
                   step);
            break;
        }
        for (int c = 1; c < nfa && c < nha; c++) {
            int k = 1;
            while (k < nhb && strcmp(hb[k], ha[c]) != 0) k++;
            if (k == nhb || k >= ncols[r]) {
                differ(d, step, "metrics.csv: %s at step %" PRId64 " recorded, not computed here",
                       ha[c], step);
                break;
            }
            d->n_compared++;
            if (!same_number(fa[c], rows[r][k])) {
                differ(d, step, "%s at step %" PRId64 ": %s recorded, %s here", ha[c], step, fa[c],
                       rows[r][k]);
                break;
            }
        }
    }
    free(rows);
    free(ncols);
    free(ta);
    free(tb);
    return DT_OK;
}

/* run.json: the final digest, the steps and the test metrics of a completed replica. */
static enum dt_status compare_manifest(struct dt_values_diff *d, const char *rec, const char *now,
                                       int64_t upto, struct dt_error *err)
{
    char *ta, *tb;
    bool absent_a, absent_b;
    DT_FORWARD_IF_ERROR(read_text(&ta, &absent_a, rec, "run.json", err));
    if (absent_a) return DT_OK;
    enum dt_status st = read_text(&tb, &absent_b, now, "run.json", err);
    char state[32];
    dt_manifest_field(state, sizeof state, ta, "state");
    if (st == DT_OK && !absent_b && strcmp(state, "completed") == 0 && upto < 0) {
        static const char *const keys[] = {"final_model_digest", "steps_completed", "test_loss",
                                           "test_accuracy", "test_ece"};
        for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
            char va[96], vb[96];
            dt_manifest_field(va, sizeof va, ta, keys[i]);
            dt_manifest_field(vb, sizeof vb, tb, keys[i]);
            if (!va[0]) continue; /* not recorded (an older result) */
            d->n_compared++;
            if (!same_number(va, vb)) {
                differ(d, -1, "run.json's %s: %s recorded, %s here", keys[i], va,
                       vb[0] ? vb : "(none)");
                break;
            }
        }
    }
    free(ta);
    free(tb);
    return st;
}

/* A file compared byte for byte, when recorded. */
static enum dt_status compare_bytes(struct dt_values_diff *d, const char *rec, const char *now,
                                    const char *name, struct dt_error *err)
{
    char *ta, *tb;
    bool absent_a, absent_b;
    DT_FORWARD_IF_ERROR(read_text(&ta, &absent_a, rec, name, err));
    if (absent_a) return DT_OK;
    enum dt_status st = read_text(&tb, &absent_b, now, name, err);
    if (st == DT_OK) {
        d->n_compared++;
        if (absent_b) differ(d, -1, "%s recorded, not written here", name);
        else if (strcmp(ta, tb) != 0) differ(d, -1, "%s: other bytes here", name);
    }
    free(ta);
    free(tb);
    return st;
}

enum dt_status dt_values_compare(struct dt_values_diff *d, const char *rec, const char *now,
                                 int64_t upto, struct dt_error *err)
{
    memset(d, 0, sizeof *d);
    d->step = -1;
    DT_FORWARD_IF_ERROR(compare_losses(d, rec, now, upto, err));
    DT_FORWARD_IF_ERROR(compare_tensors(d, rec, now, upto, err));
    DT_FORWARD_IF_ERROR(compare_metrics(d, rec, now, upto, err));
    DT_FORWARD_IF_ERROR(compare_manifest(d, rec, now, upto, err));
    if (upto < 0) { /* written once the last step is done */
        DT_FORWARD_IF_ERROR(compare_bytes(d, rec, now, "predictions.csv", err));
        DT_FORWARD_IF_ERROR(compare_bytes(d, rec, now, "sample.txt", err));
    }
    return DT_OK;
}
