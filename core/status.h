/* Status codes, error records and invariant checks shared by every detrain module.
 * Functions that can fail return enum dt_status and fill an optional struct dt_error;
 * only main() turns a status into an exit code. Broken invariants abort (DT_ASSERT),
 * in release builds too: a determinism tool must never carry on quietly. */
#ifndef DT_STATUS_H
#define DT_STATUS_H

#include <stdio.h>
#include <stdlib.h>

#ifdef __cplusplus
extern "C" { /* the CUDA backend's .cu files call these */
#endif

/* X-macro: one row per status; generates the enum and its strings. */
#define DT_STATUS_LIST(X)                                                                          \
    X(DT_OK, "ok")                                                                                 \
    X(DT_ERR_USAGE, "usage error")                                                                 \
    X(DT_ERR_CONFIG, "config error")                                                               \
    X(DT_ERR_IO, "input/output error")                                                             \
    X(DT_ERR_DATA, "invalid data")                                                                 \
    X(DT_ERR_NOMEM, "out of memory")                                                               \
    X(DT_ERR_UNSUPPORTED, "unsupported")                                                           \
    X(DT_ERR_NUMERIC, "numerical fault")                                                           \
    X(DT_ERR_INTERRUPTED, "interrupted")                                                           \
    X(DT_ERR_INTERNAL, "internal error")

enum dt_status {
#define DT_STATUS_ENUM_(name, str) name,
    DT_STATUS_LIST(DT_STATUS_ENUM_)
#undef DT_STATUS_ENUM_
};

/* An error record. `msg` is complete and printable on its own; for config errors it
 * starts with "file:line:column: ". file/line/column are kept separately for tests. */
struct dt_error {
    enum dt_status status;
    char msg[1024];
    char file[512]; /* empty when the error has no source location */
    int line;       /* 1-based; 0 when unknown */
    int column;     /* 1-based; 0 when unknown */
};

const char *dt_status_str(enum dt_status st);

/* Fill `err` (may be NULL) and return `st`. printf-style message. */
enum dt_status dt_error_set(struct dt_error *err, enum dt_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Same, with a source location; the message is prefixed with "file:line:column: ". */
enum dt_status dt_error_set_at(struct dt_error *err, enum dt_status st, const char *file, int line,
                               int column, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));

/* Map a status to the CLI's exit code: 0 ok; 2 usage, config, input and unsupported-request
 * errors; 130 interrupted; 1 otherwise. */
int dt_status_exit_code(enum dt_status st);

void dt_assert_fail(const char *expr, const char *file, int line, const char *msg)
    __attribute__((noreturn));

/* Checked in every build type. */
#define DT_ASSERT(cond)                                                                            \
    do {                                                                                           \
        if (!(cond)) dt_assert_fail(#cond, __FILE__, __LINE__, NULL);                              \
    } while (0)
#define DT_ASSERT_MSG(cond, msg)                                                                   \
    do {                                                                                           \
        if (!(cond)) dt_assert_fail(#cond, __FILE__, __LINE__, (msg));                             \
    } while (0)

/* Propagate a failing status to the caller. */
#define DT_FORWARD_IF_ERROR(expr)                                                                  \
    do {                                                                                           \
        enum dt_status dt_st_ = (expr);                                                            \
        if (dt_st_ != DT_OK) return dt_st_;                                                        \
    } while (0)

/* Allocation that aborts on failure (used for sizes the program computed itself). */
/* Called (when set) before dt_xmalloc/dt_xcalloc/dt_xrealloc abort on a failed allocation,
 * with ctx and the size asked for: the training run records its manifest as failed and exits
 * (harness/run/train.c). It must not allocate; if it returns, the process exits 1. NULL
 * clears it. */
void dt_set_oom_hook(void (*hook)(void *ctx, size_t bytes), void *ctx);
/* Test-only (harness/setup/test_hooks.h, the allocation ceiling): every later dt_x*
 * allocation of more than `bytes` fails as if memory had run out; SIZE_MAX: none (the
 * default). */
void dt_set_alloc_ceiling(size_t bytes);
/* An allocation of `bytes` for `what` failed: said on stderr, then the hook (a run records
 * its manifest as failed and exits 1); without one the process exits 1 too -- never an abort,
 * for memory is the machine's limit, not a broken invariant. */
__attribute__((noreturn)) void dt_out_of_memory(size_t bytes, const char *what);
void *dt_xmalloc(size_t bytes);
void *dt_xcalloc(size_t n, size_t size);
void *dt_xrealloc(void *p, size_t bytes);

#ifdef __cplusplus
}
#endif

#endif
