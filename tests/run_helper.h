/* Helpers for tests that run the detrain binary or read the files it writes. */
#ifndef DT_RUN_HELPER_H
#define DT_RUN_HELPER_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "core/fileio.h"

/* mpirun as the tests start it (a shell word list): as root where CI runs, more ranks than
 * cores, and a private session folder per start (TMPDIR: a short path under /tmp, since
 * Open MPI puts its sockets there, whose names are limited to 107 bytes): two mpirun
 * started at the same moment under ctest -j raced on Open MPI's shared /tmp/ompi.<host>.<uid>
 * ("mkdir: File exists", a CI flake). The cases that start it also hold the CTest lock `mpirun`
 * (tests/test_<module>.cmake, LOCKS). */
#define DT_MPIRUN                                                                                  \
    "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "                                   \
    "TMPDIR=$(d=/tmp/dt-mpirun.$$; mkdir -p $d && echo $d) mpirun --oversubscribe"

/* Fashion-MNIST where the harness looks for it ($DETRAIN_DATA, else the Debian folder): the
 * e2e cases that train on it skip (77) without it. */
static inline bool dt_have_fashion_mnist(void)
{
    const char *env = getenv("DETRAIN_DATA");
    const char *dir = env && *env ? env : "/usr/share/datasets/fashion-mnist";
    char path[1200];
    snprintf(path, sizeof path, "%s/train-images-idx3-ubyte", dir);
    if (dt_path_exists(path)) return true;
    snprintf(path, sizeof path, "%s/train-images-idx3-ubyte.gz", dir);
    return dt_path_exists(path);
}

/* Run a shell command (stdout and stderr together into `out`); return its exit status. */
static inline int dt_run_capture(char *out, size_t size, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static inline int dt_run_capture(char *out, size_t size, const char *fmt, ...)
{
    char cmd[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    char full[8300];
    snprintf(full, sizeof full, "%s 2>&1", cmd);
    FILE *p = popen(full, "r");
    if (!p) return -1;
    size_t n = 0;
    if (size) out[0] = '\0';
    char buf[4096];
    size_t got;
    while ((got = fread(buf, 1, sizeof buf, p)) > 0) {
        if (n + 1 < size) {
            size_t take = got < size - 1 - n ? got : size - 1 - n;
            memcpy(out + n, buf, take);
            n += take;
            out[n] = '\0';
        }
    }
    int st = pclose(p);
    if (!WIFEXITED(st)) return -1;
    return WEXITSTATUS(st);
}

/* Whole file into a malloc'ed NUL-terminated buffer (NULL when unreadable). */
static inline char *dt_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (fread(buf, 1, (size_t)n, f) != (size_t)n) n = 0;
    buf[n] = '\0';
    fclose(f);
    if (len) *len = (size_t)n;
    return buf;
}

/* Write `text` to path (created or truncated); a test's setup that cannot write stops the
 * test binary (exit 1) naming the file. */
static inline void dt_write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (!f || fputs(text, f) < 0 || fclose(f) != 0) {
        fprintf(stderr, "cannot write %s\n", path);
        exit(1);
    }
}

/* 1 when both files exist and have the same bytes. */
static inline int dt_files_equal(const char *a, const char *b)
{
    size_t na = 0, nb = 0;
    char *x = dt_read_file(a, &na), *y = dt_read_file(b, &nb);
    int eq = x && y && na == nb && memcmp(x, y, na) == 0;
    free(x);
    free(y);
    return eq;
}

/* Field `col` (0-based) of data row `row` (0-based, after the header) of a CSV file. */
static inline int dt_csv_field(char *out, size_t size, const char *path, int row, int col)
{
    char *text = dt_read_file(path, NULL);
    if (!text) return -1;
    char *line = strchr(text, '\n');
    for (int r = 0; line && r < row; r++) line = strchr(line + 1, '\n');
    int rc = -1;
    if (line && line[1] != '\0') {
        char *p = line + 1;
        for (int c = 0; c < col && p; c++) {
            p = strchr(p, ',');
            if (p) p++;
        }
        if (p) {
            size_t k = strcspn(p, ",\n");
            if (k < size) {
                memcpy(out, p, k);
                out[k] = '\0';
                rc = 0;
            }
        }
    }
    free(text);
    return rc;
}

/* Field in column `name` (by the header line) of data row `row` of a CSV file; -1 when the
 * file, the column or the row is missing. */
static inline int dt_csv_col(char *out, size_t size, const char *path, int row, const char *name)
{
    char *text = dt_read_file(path, NULL);
    if (!text) return -1;
    size_t header_len = strcspn(text, "\n");
    int col = -1, c = 0;
    for (char *p = text; p < text + header_len; c++) {
        size_t k = strcspn(p, ",\n");
        if (k == strlen(name) && strncmp(p, name, k) == 0) {
            col = c;
            break;
        }
        p += k + 1;
    }
    free(text);
    if (col < 0) {
        fprintf(stderr, "%s: no column '%s'\n", path, name);
        return -1;
    }
    return dt_csv_field(out, size, path, row, col);
}

#endif
