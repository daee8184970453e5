/* Status strings, error formatting and the abort path behind DT_ASSERT. */
#include "status.h"

#include <stdarg.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

const char *dt_status_str(enum dt_status st)
{
    switch (st) {
#define DT_STATUS_CASE_(name, str)                                                                 \
    case name: return str;
        DT_STATUS_LIST(DT_STATUS_CASE_)
#undef DT_STATUS_CASE_
    }
    return "unknown status";
}

enum dt_status dt_error_set(struct dt_error *err, enum dt_status st, const char *fmt, ...)
{
    if (!err) return st;
    err->status = st;
    err->file[0] = '\0';
    err->line = 0;
    err->column = 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    return st;
}

enum dt_status dt_error_set_at(struct dt_error *err, enum dt_status st, const char *file, int line,
                               int column, const char *fmt, ...)
{
    if (!err) return st;
    err->status = st;
    snprintf(err->file, sizeof err->file, "%s", file ? file : "");
    err->line = line;
    err->column = column;
    int n = snprintf(err->msg, sizeof err->msg, "%s:%d:%d: ", err->file, line, column);
    if (n < 0 || (size_t)n >= sizeof err->msg) return st;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg + n, sizeof err->msg - (size_t)n, fmt, ap);
    va_end(ap);
    return st;
}

int dt_status_exit_code(enum dt_status st)
{
    switch (st) {
    case DT_OK: return 0;
    case DT_ERR_USAGE:
    case DT_ERR_CONFIG:
    case DT_ERR_DATA:
    case DT_ERR_IO:
    case DT_ERR_UNSUPPORTED: /* a config asking for what this build or backend cannot do */
        return 2;
    case DT_ERR_INTERRUPTED: return 130;
    default: return 1;
    }
}

void dt_assert_fail(const char *expr, const char *file, int line, const char *msg)
{
    fflush(stdout);
    fprintf(stderr, "detrain: internal invariant broken at %s:%d: %s%s%s\n", file, line, expr,
            msg ? " -- " : "", msg ? msg : "");
    abort();
}

/* The allocator's own state (status.h): what to call when memory runs out, and the
 * test-only ceiling. Process-wide as the allocator is. */
static void (*g_oom_hook)(void *ctx, size_t bytes);
static void *g_oom_ctx;
static size_t g_fail_above = SIZE_MAX;

void dt_set_oom_hook(void (*hook)(void *ctx, size_t bytes), void *ctx)
{
    g_oom_hook = hook;
    g_oom_ctx = ctx;
}

void dt_set_alloc_ceiling(size_t bytes) { g_fail_above = bytes; }

void dt_out_of_memory(size_t bytes, const char *what)
{
    fflush(stdout);
    fprintf(stderr, "detrain: out of memory allocating %zu bytes%s%s\n", bytes, what ? " for " : "",
            what ? what : "");
    if (g_oom_hook) g_oom_hook(g_oom_ctx, bytes);
    _exit(1); /* no exit handlers: a library's may wait on memory that cannot come */
}

static void out_of_memory(size_t bytes) { dt_out_of_memory(bytes, NULL); }

void *dt_xmalloc(size_t bytes)
{
    void *p = bytes > g_fail_above ? NULL : malloc(bytes ? bytes : 1);
    if (!p) out_of_memory(bytes);
    return p;
}

void *dt_xcalloc(size_t n, size_t size)
{
    const size_t bytes = n > SIZE_MAX / (size ? size : 1) ? SIZE_MAX : n * size;
    void *p = bytes > g_fail_above ? NULL : calloc(n ? n : 1, size ? size : 1);
    if (!p) out_of_memory(bytes);
    return p;
}

void *dt_xrealloc(void *p, size_t bytes)
{
    void *q = bytes > g_fail_above ? NULL : realloc(p, bytes ? bytes : 1);
    if (!q) out_of_memory(bytes);
    return q;
}
