/* Fuzz target: the IDX reader (harness/setup/data.c, dt_idx_read) on hostile bytes, read both as
 * labels (idx1) and as images (idx3). The reader goes through zlib's gzopen, so the bytes
 * are put in an in-memory file (memfd) and opened by its /proc/self/fd path: plain and
 * gzip inputs alike, no disk writes (fuzz/memfile.h). Beyond crashes (ASan, UBSan, DT_ASSERT) it
 * checks what data.h promises: a success has 1..2^31-1 per dimension, at most 2^32 bytes, all of
 * them readable, and for a plain file exactly the payload's bytes; a failure names the file, has a
 * data, I/O or memory status and leaves nothing allocated. libFuzzer drives it
 * (fuzz/CMakeLists.txt); so does fuzz/replay_main.c in every build. */
#define _GNU_SOURCE /* memfd_create */
#include "fuzz/fuzz_target.h"
#include "fuzz/memfile.h"
#include "harness/setup/data.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void fuzz_fail(const char *what, const char *detail)
{
    fprintf(stderr, "fuzz_idx: %s\n", what);
    if (detail) fprintf(stderr, "  %s\n", detail);
    abort();
}

static void check_success(const struct dt_idx *idx, int ndim, const uint8_t *data, size_t size)
{
    if (idx->ndim != ndim || !idx->data) fuzz_fail("success without the dimensions or data", NULL);
    uint64_t bytes = 1;
    for (int i = 0; i < ndim; i++) {
        if (idx->dims[i] < 1 || idx->dims[i] > 2147483647)
            fuzz_fail("dimension out of range", NULL);
        bytes *= (uint64_t)idx->dims[i];
        if (bytes > ((uint64_t)1 << 32)) fuzz_fail("more than 2^32 bytes of data", NULL);
    }
    unsigned sum = 0; /* every byte is there (ASan checks the allocation's size) */
    for (uint64_t i = 0; i < bytes; i++) sum += idx->data[i];
    const size_t header = 4 + 4 * (size_t)ndim;
    const int gzip = size >= 2 && data[0] == 0x1f && data[1] == 0x8b;
    if (!gzip && (size != header + bytes || memcmp(data + header, idx->data, bytes) != 0))
        fuzz_fail("a plain file's data are not its payload bytes", NULL);
    (void)sum;
}

static void check_failure(enum dt_status st, const struct dt_error *err, const struct dt_idx *idx,
                          const char *path)
{
    if (st != DT_ERR_DATA && st != DT_ERR_IO && st != DT_ERR_NOMEM)
        fuzz_fail("unexpected status", err->msg);
    size_t n = strlen(path);
    if (strncmp(err->msg, path, n) != 0 || strncmp(err->msg + n, ": ", 2) != 0)
        fuzz_fail("the error does not start with the file's path", err->msg);
    if (idx->data || idx->ndim) fuzz_fail("a failed read left something in the result", err->msg);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = dt_fuzz_memfile(data, size);
    static const int ndims[] = {1, 3};
    for (int k = 0; k < 2; k++) {
        struct dt_idx idx;
        struct dt_error err = {0};
        enum dt_status st = dt_idx_read(&idx, path, ndims[k], &err);
        if (st == DT_OK) check_success(&idx, ndims[k], data, size);
        else check_failure(st, &err, &idx, path);
        dt_idx_free(&idx);
    }
    return 0;
}
