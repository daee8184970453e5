/* Reading traces back and comparing them: behind `detrain compare` and the summary's
 * first divergent step. Data path (DESIGN.md): harness/trace -> harness/compare. */
#include "harness/compare.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ---- reading ------------------------------------------------------------------------ */

static bool is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* Resolve a trace argument: a file, or a folder holding trace.csv. */
static void trace_file_path(char *out, size_t size, const char *path)
{
    if (is_dir(path)) snprintf(out, size, "%s/trace.csv", path);
    else snprintf(out, size, "%s", path);
}

static bool is_hex_digest(const char *s)
{
    if (strlen(s) != 64) return false;
    for (int i = 0; i < 64; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return false;
    return true;
}

static void chomp(char *line)
{
    size_t n = strlen(line);
    while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = '\0';
}

enum dt_status dt_trace_read(struct dt_trace_row **rows_out, int64_t *n_out, const char *path,
                             struct dt_error *err)
{
    *rows_out = NULL;
    *n_out = 0;
    char file[1200];
    trace_file_path(file, sizeof file, path);
    FILE *f = fopen(file, "r");
    if (!f) return dt_error_set(err, DT_ERR_IO, "%s: cannot open: %s", file, strerror(errno));
    char line[512];
    int64_t lineno = 0, n = 0, cap = 0;
    struct dt_trace_row *rows = NULL;
    enum dt_status st = DT_OK;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        chomp(line);
        if (lineno == 1) {
            if (strcmp(line, DT_TRACE_HEADER) != 0) {
                st = dt_error_set(err, DT_ERR_DATA,
                                  "%s:1: not a detrain trace (header is '%s', expected '%s')",
                                  file, line, DT_TRACE_HEADER);
                break;
            }
            continue;
        }
        if (line[0] == '\0') continue;
        char *c1 = strchr(line, ','), *c2 = c1 ? strchr(c1 + 1, ',') : NULL;
        if (!c1 || !c2 || strchr(c2 + 1, ',')) {
            st = dt_error_set(err, DT_ERR_DATA, "%s:%" PRId64 ": expected 3 fields", file, lineno);
            break;
        }
        *c1 = *c2 = '\0';
        char *end;
        errno = 0;
        long long step = strtoll(line, &end, 10);
        if (errno || *end || end == line || step < 0) {
            st = dt_error_set(err, DT_ERR_DATA, "%s:%" PRId64 ": bad step '%s'", file, lineno, line);
            break;
        }
        if (!is_hex_digest(c2 + 1)) {
            st = dt_error_set(err, DT_ERR_DATA, "%s:%" PRId64 ": bad digest '%s'", file, lineno,
                              c2 + 1);
            break;
        }
        if (n > 0 && step <= rows[n - 1].step) {
            st = dt_error_set(err, DT_ERR_DATA, "%s:%" PRId64 ": step %lld does not increase",
                              file, lineno, step);
            break;
        }
        if (n == cap) {
            cap = cap ? 2 * cap : 1024;
            rows = realloc(rows, (size_t)cap * sizeof *rows);
            DT_ASSERT_MSG(rows != NULL, "out of memory reading a trace");
        }
        rows[n].step = step;
        snprintf(rows[n].loss, sizeof rows[n].loss, "%s", c1 + 1);
        memcpy(rows[n].digest, c2 + 1, DT_DIGEST_HEX);
        n++;
    }
    if (st == DT_OK && ferror(f))
        st = dt_error_set(err, DT_ERR_IO, "%s: read failed: %s", file, strerror(errno));
    if (st == DT_OK && lineno == 0)
        st = dt_error_set(err, DT_ERR_DATA, "%s: empty file (no trace header)", file);
    fclose(f);
    if (st != DT_OK) {
        free(rows);
        return st;
    }
    *rows_out = rows;
    *n_out = n;
    return DT_OK;
}

/* tensors.csv beside a trace: the (name, digest) rows of `step`, in file order. */
static int read_tensor_rows(const char *trace_arg, int64_t step, char names[][64],
                            char digests[][DT_DIGEST_HEX], int max)
{
    char file[1200], dir[1200];
    trace_file_path(file, sizeof file, trace_arg);
    snprintf(dir, sizeof dir, "%s", file);
    char *slash = strrchr(dir, '/');
    if (slash) *slash = '\0';
    else snprintf(dir, sizeof dir, ".");
    char tpath[1300];
    snprintf(tpath, sizeof tpath, "%s/tensors.csv", dir);
    FILE *f = fopen(tpath, "r");
    if (!f) return -1;
    char line[512];
    int n = 0;
    while (fgets(line, sizeof line, f) && n < max) {
        chomp(line);
        char *c1 = strchr(line, ','), *c2 = c1 ? strchr(c1 + 1, ',') : NULL;
        if (!c1 || !c2) continue;
        *c1 = *c2 = '\0';
        char *end;
        long long s = strtoll(line, &end, 10);
        if (*end || s != step) continue;
        snprintf(names[n], 64, "%.63s", c1 + 1);
        snprintf(digests[n], DT_DIGEST_HEX, "%.64s", c2 + 1);
        n++;
    }
    fclose(f);
    return n;
}

static void find_first_tensor(struct dt_trace_diff *d, const char *a, const char *b)
{
    enum { MAXT = 256 };
    static char na[MAXT][64], nb[MAXT][64], da[MAXT][DT_DIGEST_HEX], db[MAXT][DT_DIGEST_HEX];
    int ka = read_tensor_rows(a, d->first_step, na, da, MAXT);
    int kb = read_tensor_rows(b, d->first_step, nb, db, MAXT);
    if (ka <= 0 || kb <= 0) return;
    for (int i = 0; i < ka && i < kb; i++) {
        if (strcmp(na[i], nb[i]) != 0 || strcmp(da[i], db[i]) != 0) {
            snprintf(d->tensor, sizeof d->tensor, "%.63s", na[i]);
            return;
        }
    }
}

enum dt_status dt_trace_compare(struct dt_trace_diff *d, const char *path_a, const char *path_b,
                                struct dt_error *err)
{
    memset(d, 0, sizeof *d);
    d->first_step = -1;
    struct dt_trace_row *a = NULL, *b = NULL;
    int64_t na = 0, nb = 0;
    DT_FORWARD_IF_ERROR(dt_trace_read(&a, &na, path_a, err));
    enum dt_status st = dt_trace_read(&b, &nb, path_b, err);
    if (st != DT_OK) {
        free(a);
        return st;
    }
    d->rows_a = na;
    d->rows_b = nb;
    int64_t n = na < nb ? na : nb;
    for (int64_t i = 0; i < n; i++) {
        if (a[i].step != b[i].step) {
            st = dt_error_set(err, DT_ERR_DATA,
                              "traces were hashed at different steps (row %" PRId64
                              ": step %" PRId64 " in %s, step %" PRId64 " in %s)",
                              i + 1, a[i].step, path_a, b[i].step, path_b);
            break;
        }
        d->common_rows = i + 1;
        if (strcmp(a[i].digest, b[i].digest) != 0) {
            d->diverged = true;
            d->first_step = a[i].step;
            memcpy(d->digest_a, a[i].digest, DT_DIGEST_HEX);
            memcpy(d->digest_b, b[i].digest, DT_DIGEST_HEX);
            break;
        }
    }
    if (st == DT_OK && !d->diverged && na != nb) {
        d->diverged = true;
        d->first_step = na < nb ? b[n].step : a[n].step;
    }
    if (st == DT_OK && d->diverged && d->digest_a[0]) find_first_tensor(d, path_a, path_b);
    free(a);
    free(b);
    return st;
}
