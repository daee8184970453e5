/* Host utilities: folders, atomic file writes, clocks and small statistics used by the
 * harness (traces, manifests, summaries). */
#include "core/util.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

enum dt_status dt_mkdir_p(const char *path, struct dt_error *err)
{
    char buf[4096];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf)
        return dt_error_set(err, DT_ERR_IO, "%s: path too long", path);
    for (char *p = buf + 1;; p++) {
        if (*p == '/' || *p == '\0') {
            char c = *p;
            *p = '\0';
            if (mkdir(buf, 0777) != 0 && errno != EEXIST)
                return dt_error_set(err, DT_ERR_IO, "%s: cannot create folder: %s", buf,
                                    strerror(errno));
            struct stat st;
            if (stat(buf, &st) != 0 || !S_ISDIR(st.st_mode))
                return dt_error_set(err, DT_ERR_IO, "%s: exists and is not a folder", buf);
            *p = c;
            if (c == '\0') break;
        }
    }
    return DT_OK;
}

enum dt_status dt_dir_check_writable(const char *dir, struct dt_error *err)
{
    char probe[4096];
    snprintf(probe, sizeof probe, "%s/.detrain-write-probe-%ld", dir, (long)getpid());
    FILE *f = fopen(probe, "w");
    if (!f)
        return dt_error_set(err, DT_ERR_IO, "%s: output folder is not writable: %s", dir,
                            strerror(errno));
    int bad = fputs("probe\n", f) < 0;
    bad |= fclose(f) != 0;
    remove(probe);
    if (bad)
        return dt_error_set(err, DT_ERR_IO, "%s: cannot write to output folder: %s", dir,
                            strerror(errno));
    return DT_OK;
}

enum dt_status dt_write_parts_atomic(const char *path, const void *const *parts,
                                     const size_t *sizes, int n_parts, struct dt_error *err)
{
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s.tmp-%ld", path, (long)getpid()) >= (int)sizeof tmp)
        return dt_error_set(err, DT_ERR_IO, "%s: path too long", path);
    /* a stale temporary of a killed run goes; a link planted there is not followed */
    (void)unlink(tmp);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd < 0) return dt_error_set(err, DT_ERR_IO, "%s: cannot create: %s", tmp, strerror(errno));
    for (int i = 0; i < n_parts; i++) {
        const char *p = parts[i];
        size_t left = sizes[i];
        while (left > 0) {
            ssize_t w = write(fd, p, left);
            if (w < 0) {
                if (errno == EINTR) continue;
                int e = errno;
                close(fd);
                remove(tmp);
                return dt_error_set(err, DT_ERR_IO, "%s: write failed: %s", tmp, strerror(e));
            }
            p += w;
            left -= (size_t)w;
        }
    }
    if (fsync(fd) != 0 || close(fd) != 0) {
        int e = errno;
        remove(tmp);
        return dt_error_set(err, DT_ERR_IO, "%s: cannot flush to disk: %s", tmp, strerror(e));
    }
    if (rename(tmp, path) != 0) {
        int e = errno;
        remove(tmp);
        return dt_error_set(err, DT_ERR_IO, "%s: cannot rename into place: %s", path, strerror(e));
    }
    return DT_OK;
}

enum dt_status dt_write_file_atomic(const char *path, const void *data, size_t bytes,
                                    struct dt_error *err)
{
    return dt_write_parts_atomic(path, &data, &bytes, 1, err);
}

double dt_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void dt_utc_iso8601(char *buf, size_t size)
{
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, size, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double dt_median(const double *v, int64_t n)
{
    if (n <= 0) return NAN;
    double *c = dt_xmalloc((size_t)n * sizeof *c);
    memcpy(c, v, (size_t)n * sizeof *c);
    qsort(c, (size_t)n, sizeof *c, cmp_double);
    double m = (n % 2) ? c[n / 2] : 0.5 * (c[n / 2 - 1] + c[n / 2]);
    free(c);
    return m;
}

void dt_strbuf_printf(struct dt_strbuf *sb, const char *fmt, ...)
{
    for (;;) {
        size_t avail = sb->cap - sb->len;
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(sb->data ? sb->data + sb->len : NULL, sb->data ? avail : 0, fmt, ap);
        va_end(ap);
        DT_ASSERT(n >= 0);
        if (sb->data && (size_t)n < avail) {
            sb->len += (size_t)n;
            return;
        }
        size_t need = sb->len + (size_t)n + 1;
        size_t cap = sb->cap ? sb->cap : 256;
        while (cap < need) cap *= 2;
        char *d = realloc(sb->data, cap);
        if (!d) dt_out_of_memory(cap, "a text buffer");
        sb->data = d;
        sb->cap = cap;
    }
}

void dt_strbuf_json_string(struct dt_strbuf *sb, const char *s)
{
    dt_strbuf_printf(sb, "\"");
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '"': dt_strbuf_printf(sb, "\\\""); break;
        case '\\': dt_strbuf_printf(sb, "\\\\"); break;
        case '\n': dt_strbuf_printf(sb, "\\n"); break;
        case '\t': dt_strbuf_printf(sb, "\\t"); break;
        case '\r': dt_strbuf_printf(sb, "\\r"); break;
        default:
            if (*p < 0x20) dt_strbuf_printf(sb, "\\u%04x", *p);
            else dt_strbuf_printf(sb, "%c", *p);
        }
    }
    dt_strbuf_printf(sb, "\"");
}

void dt_strbuf_free(struct dt_strbuf *sb)
{
    free(sb->data);
    sb->data = NULL;
    sb->len = sb->cap = 0;
}
