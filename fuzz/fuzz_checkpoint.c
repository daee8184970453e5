/* Fuzz target: the checkpoint reader (harness/record/checkpoint.c: dt_checkpoint_read), which
 * --resume and explain use on checkpoint.bin and divergence.bin -- files a kill, a full disk
 * or a user may have cut or changed. The input is the file (an in-memory file, memfd, read
 * through its /proc/self/fd path). Beyond crashes (ASan, UBSan, DT_ASSERT) it checks what
 * checkpoint.h promises: a read checkpoint has a step >= 0, terminated names, 1..4
 * dimensions whose product is each parameter's count, and every weight and momentum
 * readable; a failure names the file, has a data, I/O or memory status and leaves the
 * result zeroed. libFuzzer drives it (fuzz/CMakeLists.txt); so does fuzz/replay_main.c in
 * every build. */
#define _GNU_SOURCE /* memfd_create */
#include "fuzz/fuzz_target.h"
#include "fuzz/memfile.h"
#include "harness/record/checkpoint.h"
#include "harness/record/hash.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void fuzz_fail(const char *what, const char *detail)
{
    fprintf(stderr, "fuzz_checkpoint: %s\n", what);
    if (detail) fprintf(stderr, "  %s\n", detail);
    abort();
}

static void terminated(const char *s, size_t size, const char *what)
{
    if (memchr(s, 0, size) == NULL) fuzz_fail(what, NULL);
}

/* One input as the file: read, and what the reader promises checked. */
static void read_one(const uint8_t *data, size_t size)
{
    const char *path = dt_fuzz_memfile(data, size);
    struct dt_checkpoint ck;
    struct dt_error err = {0};
    enum dt_status st = dt_checkpoint_read(&ck, path, &err);
    if (st == DT_OK) {
        if (ck.step < 0) fuzz_fail("a negative step was accepted", NULL);
        terminated(ck.policy, sizeof ck.policy, "the policy name is not terminated");
        terminated(ck.controls, sizeof ck.controls, "the controls are not terminated");
        terminated(ck.traced_digest, sizeof ck.traced_digest,
                   "the traced digest is not terminated");
        terminated(ck.model_digest, sizeof ck.model_digest, "the model digest is not terminated");
        if (!ck.config_json) fuzz_fail("no config text", NULL);
        if (ck.n_params < 0 || (ck.n_params > 0 && !ck.params)) fuzz_fail("no parameters", NULL);
        for (int i = 0; i < ck.n_params; i++) {
            const struct dt_checkpoint_param *p = &ck.params[i];
            terminated(p->name, sizeof p->name, "a parameter name is not terminated");
            if (p->ndim < 1 || p->ndim > 4)
                fuzz_fail("a parameter's rank is out of range", p->name);
            int64_t count = 1;
            for (int d = 0; d < p->ndim; d++) {
                if (p->shape[d] < 1) fuzz_fail("a dimension below 1", p->name);
                count *= p->shape[d];
            }
            if (count != p->n) fuzz_fail("the shape does not give the count", p->name);
            float sum = 0; /* every value readable (ASan checks the allocations) */
            for (int64_t k = 0; k < p->n; k++) sum += p->w[k] * 0.0f + p->v[k] * 0.0f;
            (void)sum;
        }
        dt_checkpoint_free(&ck);
    } else {
        if (st != DT_ERR_DATA && st != DT_ERR_IO && st != DT_ERR_NOMEM)
            fuzz_fail("unexpected status", err.msg);
        if (!strstr(err.msg, path)) fuzz_fail("the error does not name the file", err.msg);
        if (ck.params || ck.config_json || ck.n_params)
            fuzz_fail("a failed read left something in the result", err.msg);
    }
}

/* Each input twice: as it is, and "sealed" -- its length field and trailing SHA-256 made to
 * agree with it -- so that mutations reach the field parser behind the checksum. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    read_one(data, size);
    if (size >= 24 + DT_DIGEST_BYTES) {
        uint8_t *sealed = malloc(size);
        if (!sealed) fuzz_fail("malloc failed", NULL);
        memcpy(sealed, data, size);
        const uint64_t len = size;
        for (int i = 0; i < 8; i++) sealed[16 + i] = (uint8_t)(len >> (8 * i));
        dt_sha256(sealed + size - DT_DIGEST_BYTES, sealed, size - DT_DIGEST_BYTES);
        read_one(sealed, size);
        free(sealed);
    }
    return 0;
}
