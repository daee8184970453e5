/* Fuzz target: the readers of a replica's trace.csv and tensors.csv (harness/record/trace.c:
 * dt_trace_read, dt_trace_read_tensors), which compare, explain, report and --resume use on
 * files a kill may have cut or a user may have edited. The input is split at its first NUL
 * byte: before it trace.csv, after it tensors.csv (absent when there is no NUL), written to a
 * scratch folder of their own. Beyond crashes (ASan, UBSan, DT_ASSERT) it checks what
 * trace.h promises: a read trace has steps that never go back, digests of 64 lowercase hex
 * digits, a loss that fits its field; a failure names the file and has a data or I/O status
 * and leaves nothing allocated; the tensors reader returns at most `max` rows, each a
 * NUL-terminated name and a 64-digit digest, or -1 with a reason. libFuzzer drives it
 * (fuzz/CMakeLists.txt); so does fuzz/replay_main.c in every build. */
#include "fuzz/fuzz_target.h"
#include "harness/record/trace.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void fuzz_fail(const char *what, const char *detail)
{
    fprintf(stderr, "fuzz_trace: %s\n", what);
    if (detail) fprintf(stderr, "  %s\n", detail);
    abort();
}

/* The scratch folder (in /dev/shm where there is one: no disk traffic per input). */
static const char *scratch(void)
{
    static char dir[64];
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "%s/dt-fuzz-trace.XXXXXX",
                 access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
        if (!mkdtemp(dir)) fuzz_fail("mkdtemp failed", NULL);
    }
    return dir;
}

static void put_file(const char *dir, const char *name, const uint8_t *data, size_t size)
{
    char path[128];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (!data) {
        unlink(path);
        return;
    }
    FILE *f = fopen(path, "wb");
    if (!f || (size && fwrite(data, 1, size, f) != size) || fclose(f) != 0)
        fuzz_fail("cannot write the scratch file", path);
}

static void check_digest(const char *d, const char *what)
{
    if (strlen(d) != 64 || strspn(d, "0123456789abcdef") != 64) fuzz_fail(what, d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *dir = scratch();
    const uint8_t *nul = memchr(data, 0, size);
    const size_t trace_len = nul ? (size_t)(nul - data) : size;
    put_file(dir, "trace.csv", data, trace_len);
    put_file(dir, "tensors.csv", nul ? nul + 1 : NULL, nul ? size - trace_len - 1 : 0);

    struct dt_trace_row *rows = NULL;
    int64_t n = -1;
    struct dt_error err = {0};
    enum dt_status st = dt_trace_read(&rows, &n, dir, &err);
    if (st == DT_OK) {
        if (n < 0 || (n > 0 && !rows)) fuzz_fail("a read trace without its rows", NULL);
        for (int64_t i = 0; i < n; i++) {
            check_digest(rows[i].digest, "a row's digest is not 64 hex digits");
            if (memchr(rows[i].loss, 0, sizeof rows[i].loss) == NULL)
                fuzz_fail("a row's loss is not terminated", NULL);
            if (i > 0 && rows[i].step <= rows[i - 1].step)
                fuzz_fail("steps that do not increase were accepted", NULL);
        }
        /* the tensors of a step the trace has, and of one it has not */
        const int64_t steps[2] = {n > 0 ? rows[n - 1].step : 0, -7};
        for (int k = 0; k < 2; k++) {
            char names[16][64], digests[16][DT_DIGEST_HEX];
            struct dt_error why = {0};
            bool absent = false;
            int got = dt_trace_read_tensors(dir, steps[k], names, digests, 16, &why, &absent);
            if (got > 16) fuzz_fail("more tensor rows than asked for", NULL);
            if (got < 0 && !why.msg[0]) fuzz_fail("a tensors.csv refused without a reason", NULL);
            if (got < 0 && !nul && !absent) fuzz_fail("no tensors.csv, not said absent", why.msg);
            for (int i = 0; i < got; i++) {
                if (memchr(names[i], 0, sizeof names[i]) == NULL)
                    fuzz_fail("a tensor name is not terminated", NULL);
                check_digest(digests[i], "a tensor digest is not 64 hex digits");
            }
        }
    } else {
        if (st != DT_ERR_DATA && st != DT_ERR_IO && st != DT_ERR_NOMEM)
            fuzz_fail("unexpected status", err.msg);
        if (!strstr(err.msg, dir)) fuzz_fail("the error does not name the file", err.msg);
        if (rows) fuzz_fail("a failed read left rows behind", err.msg);
    }
    free(rows);
    return 0;
}
