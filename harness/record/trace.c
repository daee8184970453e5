/* Trace files: writing them during training and reading/comparing them afterwards. */
#include "harness/record/trace.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/fileio.h"
#include "core/util.h"
#include "harness/record/csv.h"
#include "harness/record/outdir.h"

const char *dt_digest_kind_name(enum dt_hash_digest kind)
{
    return kind == DT_HASH_DIGEST_TREE ? "tree" : "sha256";
}

const char *dt_trace_header(enum dt_hash_digest kind)
{
    return kind == DT_HASH_DIGEST_TREE ? "step,loss,model_tree" : "step,loss,model_sha256";
}

const char *dt_tensors_header(enum dt_hash_digest kind)
{
    return kind == DT_HASH_DIGEST_TREE ? "step,tensor,tree" : "step,tensor,sha256";
}

/* A trace header: its kind (0, 1), -2 the legacy header, -1 not a trace header. */
static int header_kind(const char *line)
{
    if (strcmp(line, dt_trace_header(DT_HASH_DIGEST_SHA256)) == 0) return DT_HASH_DIGEST_SHA256;
    if (strcmp(line, dt_trace_header(DT_HASH_DIGEST_TREE)) == 0) return DT_HASH_DIGEST_TREE;
    return strcmp(line, DT_TRACE_HEADER_LEGACY) == 0 ? -2 : -1;
}

int dt_trace_digest_kind(const char *path)
{
    char file[1200], line[128] = "";
    dt_trace_file_path(file, sizeof file, path);
    FILE *f = fopen(file, "r");
    if (!f) return -1;
    if (!fgets(line, sizeof line, f)) line[0] = '\0';
    fclose(f);
    line[strcspn(line, "\r\n")] = '\0';
    const int k = header_kind(line);
    if (k >= 0 || k == -1) return k;
    /* the legacy header: the replica's run.json says ("hash_digest": "tree") */
    char manifest[1300];
    const char *slash = strrchr(file, '/');
    if (slash) snprintf(manifest, sizeof manifest, "%.*s/run.json", (int)(slash - file), file);
    else snprintf(manifest, sizeof manifest, "run.json");
    char *text = NULL;
    size_t len;
    struct dt_error ignored;
    if (!dt_path_exists(manifest) ||
        dt_read_regular_file(&text, &len, manifest, "run.json", 1u << 24, &ignored) != DT_OK)
        return -1;
    const char *at = strstr(text, "\"hash_digest\": \"");
    int kind = -1;
    if (at) {
        at += strlen("\"hash_digest\": \"");
        kind = strncmp(at, "tree\"", 5) == 0     ? DT_HASH_DIGEST_TREE
               : strncmp(at, "sha256\"", 7) == 0 ? DT_HASH_DIGEST_SHA256
                                                 : -1;
    } else if (strstr(text, "\"tool\": \"detrain\"")) {
        kind = DT_HASH_DIGEST_SHA256; /* a replica from before hash.digest: SHA-256 only */
    }
    free(text);
    return kind;
}

enum dt_status dt_trace_open(struct dt_trace_writer *t, const char *dir, bool per_tensor,
                             enum dt_hash_digest kind, struct dt_error *err)
{
    memset(t, 0, sizeof *t);
    DT_FORWARD_IF_ERROR(dt_csv_create(&t->trace, t->trace_path, sizeof t->trace_path, dir,
                                      "trace.csv", dt_trace_header(kind), false, err));
    if (per_tensor)
        DT_FORWARD_IF_ERROR(dt_csv_create(&t->tensors, t->tensors_path, sizeof t->tensors_path, dir,
                                          "tensors.csv", dt_tensors_header(kind), false, err));
    return DT_OK;
}

static enum dt_status check_stream(FILE *f, const char *path, struct dt_error *err)
{
    if (ferror(f))
        return dt_error_set(err, DT_ERR_IO, "%s: write failed: %s", path,
                            errno ? strerror(errno) : "stream error");
    return DT_OK;
}

enum dt_status dt_trace_write_row(struct dt_trace_writer *t, int64_t step, float loss,
                                  const char *digest_hex, struct dt_error *err)
{
    if (isnan(loss) && step == 0) fprintf(t->trace, "%" PRId64 ",,%s\n", step, digest_hex);
    else fprintf(t->trace, "%" PRId64 ",%.9g,%s\n", step, (double)loss, digest_hex);
    if (fflush(t->trace) != 0)
        return dt_error_set(err, DT_ERR_IO, "%s: write failed: %s", t->trace_path, strerror(errno));
    return check_stream(t->trace, t->trace_path, err);
}

enum dt_status dt_trace_write_tensor(struct dt_trace_writer *t, int64_t step, const char *name,
                                     const char *digest_hex, struct dt_error *err)
{
    if (!t->tensors) return DT_OK;
    fprintf(t->tensors, "%" PRId64 ",%s,%s\n", step, name, digest_hex);
    return check_stream(t->tensors, t->tensors_path, err);
}

enum dt_status dt_trace_flush(struct dt_trace_writer *t, struct dt_error *err)
{
    if (t->tensors && fflush(t->tensors) != 0)
        return dt_error_set(err, DT_ERR_IO, "%s: write failed: %s", t->tensors_path,
                            strerror(errno));
    return DT_OK;
}

enum dt_status dt_trace_close(struct dt_trace_writer *t, struct dt_error *err)
{
    enum dt_status st = DT_OK;
    if (t->trace && fclose(t->trace) != 0)
        st = dt_error_set(err, DT_ERR_IO, "%s: close failed: %s", t->trace_path, strerror(errno));
    if (t->tensors && fclose(t->tensors) != 0 && st == DT_OK)
        st = dt_error_set(err, DT_ERR_IO, "%s: close failed: %s", t->tensors_path, strerror(errno));
    t->trace = t->tensors = NULL;
    return st;
}

/* ---- reading (the writer's counterpart; harness/analyze/compare.c compares) -------------- */

void dt_trace_file_path(char *out, size_t size, const char *path)
{
    if (dt_is_dir(path)) snprintf(out, size, "%s/trace.csv", path);
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
    dt_trace_file_path(file, sizeof file, path);
    FILE *f;
    DT_FORWARD_IF_ERROR(dt_fopen_regular(&f, file, "a trace", err));
    char line[512], esc[160];
    int64_t lineno = 0, n = 0, cap = 0;
    struct dt_trace_row *rows = NULL;
    enum dt_status st = DT_OK;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        if (!strchr(line, '\n') && !feof(f)) { /* a longer line would be read as two */
            st = dt_error_set(err, DT_ERR_DATA, "%s:%" PRId64 ": line longer than %zu bytes", file,
                              lineno, sizeof line - 2);
            break;
        }
        if (!strchr(line, '\n') && lineno > 1) break; /* a last row cut by a kill: absent */
        chomp(line);
        if (lineno == 1) {
            if (header_kind(line) == -1) {
                st = dt_error_set(err, DT_ERR_DATA,
                                  "%s:1: not a detrain trace (header is '%s', expected '%s' or "
                                  "'%s')",
                                  file, dt_escape_str(esc, sizeof esc, line),
                                  dt_trace_header(DT_HASH_DIGEST_SHA256),
                                  dt_trace_header(DT_HASH_DIGEST_TREE));
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
            st = dt_error_set(err, DT_ERR_DATA, "%s:%" PRId64 ": bad step '%s'", file, lineno,
                              dt_escape_str(esc, sizeof esc, line));
            break;
        }
        if (!is_hex_digest(c2 + 1)) {
            st = dt_error_set(err, DT_ERR_DATA, "%s:%" PRId64 ": bad digest '%s'", file, lineno,
                              dt_escape_str(esc, sizeof esc, c2 + 1));
            break;
        }
        if (n > 0 && step <= rows[n - 1].step) {
            st = dt_error_set(err, DT_ERR_DATA, "%s:%" PRId64 ": step %lld does not increase", file,
                              lineno, step);
            break;
        }
        if (n == cap) {
            cap = cap ? 2 * cap : 1024;
            rows = dt_xrealloc(rows, (size_t)cap * sizeof *rows);
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

int dt_trace_read_tensors(const char *trace_arg, int64_t step, char names[][64],
                          char digests[][DT_DIGEST_HEX], int max, struct dt_error *why,
                          bool *absent)
{
    char file[1200], dir[1200];
    dt_trace_file_path(file, sizeof file, trace_arg);
    snprintf(dir, sizeof dir, "%s", file);
    char *slash = strrchr(dir, '/');
    if (slash) *slash = '\0';
    else snprintf(dir, sizeof dir, ".");
    char tpath[1300];
    snprintf(tpath, sizeof tpath, "%s/tensors.csv", dir);
    FILE *f;
    *absent = false;
    if (dt_fopen_regular(&f, tpath, "tensors.csv", why) != DT_OK) {
        *absent = errno == ENOENT;
        return -1;
    }
    char line[512];
    int n = 0;
    int64_t lineno = 0;
    bool bad = false;
    while (!bad && fgets(line, sizeof line, f) && n < max) {
        lineno++;
        if (!strchr(line, '\n') && !feof(f)) { /* a longer line would be read as two */
            dt_error_set(why, DT_ERR_DATA, "%s:%" PRId64 ": line longer than %zu bytes", tpath,
                         lineno, sizeof line - 2);
            bad = true;
            break;
        }
        if (!strchr(line, '\n') && lineno > 1) break; /* a last row cut by a kill: absent */
        chomp(line);
        char *c1 = strchr(line, ','), *c2 = c1 ? strchr(c1 + 1, ',') : NULL;
        if (!c1 || !c2) continue;
        *c1 = *c2 = '\0';
        char *end;
        long long s = strtoll(line, &end, 10);
        if (*end || end == line || s != step) continue;
        /* a row of this step: a tensor name (1..63 printable bytes) and a model digest */
        const char *name = c1 + 1, *digest = c2 + 1;
        const size_t nlen = strlen(name);
        bool name_ok = nlen > 0 && nlen < 64;
        for (size_t i = 0; name_ok && i < nlen; i++)
            name_ok = (unsigned char)name[i] > 0x20 && (unsigned char)name[i] < 0x7f;
        if (!name_ok || !is_hex_digest(digest)) {
            char esc[160];
            dt_error_set(why, DT_ERR_DATA,
                         "%s:%" PRId64 ": malformed row of step %" PRId64 " ('%s')", tpath, lineno,
                         step, dt_escape_str(esc, sizeof esc, !name_ok ? name : digest));
            bad = true;
            break;
        }
        snprintf(names[n], 64, "%s", name);
        snprintf(digests[n], DT_DIGEST_HEX, "%s", digest);
        n++;
    }
    if (bad) {
        n = -1;
    } else if (ferror(f)) {
        n = -1;
        dt_error_set(why, DT_ERR_IO, "%s: read failed: %s", tpath, strerror(errno));
    } else if (n == 0) {
        n = -1;
        dt_error_set(why, DT_ERR_DATA, "%s: no rows for step %" PRId64, tpath, step);
    }
    fclose(f);
    return n;
}
