/* Weight snapshots (snapshot.h): writing them atomically, reading them back with every
 * byte checked, their model digest (the trace's), the L2 distance between two, and the
 * steps a replica folder holds. Data path (docs/DESIGN.md): harness/train -> snapshots on
 * disk -> harness/report (drift curves) and harness/compare. */
#include "harness/record/snapshot.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/fileio.h"
#include "core/util.h"
#include "harness/record/metrics.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "snapshot files are little-endian; this host is not"
#endif

/* Fixed parts of the format. */
enum {
    MAGIC_BYTES = 8,
    HEADER_BYTES = MAGIC_BYTES + 8 + 4 + 4, /* magic, step, n_tensors, reserved */
    ENTRY_BYTES = DT_SNAPSHOT_NAME_MAX + 8, /* name, count */
};

/* Largest count a reader accepts: keeps header + table + 4 * sum(counts) far from int64
 * overflow (256 tensors x 2^40 values x 4 bytes < 2^63) and is far above any model. */
#define MAX_COUNT ((int64_t)1 << 40)

/* ---- writing ------------------------------------------------------------------------ */

enum dt_status dt_snapshot_write(const char *path, int64_t step, int n_tensors,
                                 const char *const *names, const int64_t *counts,
                                 const float *const *data, struct dt_error *err)
{
    if (n_tensors < 1 || n_tensors > DT_SNAPSHOT_MAX_TENSORS)
        return dt_error_set(err, DT_ERR_DATA, "%s: cannot write a snapshot of %d tensors (1..%d)",
                            path, n_tensors, DT_SNAPSHOT_MAX_TENSORS);
    if (step < 0)
        return dt_error_set(err, DT_ERR_DATA, "%s: cannot write a snapshot of step %" PRId64, path,
                            step);
    /* Header and tensor table in one buffer; the values are written from the caller's
     * arrays, so no copy of the weights is made. */
    size_t head = HEADER_BYTES + (size_t)n_tensors * ENTRY_BYTES;
    unsigned char *buf = dt_xcalloc(1, head);
    memcpy(buf, DT_SNAPSHOT_MAGIC, MAGIC_BYTES);
    memcpy(buf + 8, &step, 8);
    int32_t n32 = n_tensors, zero = 0;
    memcpy(buf + 16, &n32, 4);
    memcpy(buf + 20, &zero, 4);
    for (int i = 0; i < n_tensors; i++) {
        size_t len = strlen(names[i]);
        if (len == 0 || len >= DT_SNAPSHOT_NAME_MAX || counts[i] < 1 || counts[i] > MAX_COUNT) {
            free(buf);
            if (len == 0 || len >= DT_SNAPSHOT_NAME_MAX)
                return dt_error_set(err, DT_ERR_DATA,
                                    "%s: tensor %d: name '%s' must have 1..%d bytes", path, i,
                                    names[i], DT_SNAPSHOT_NAME_MAX - 1);
            return dt_error_set(err, DT_ERR_DATA,
                                "%s: tensor %d (%s): count %" PRId64 " out of range", path, i,
                                names[i], counts[i]);
        }
        unsigned char *e = buf + HEADER_BYTES + (size_t)i * ENTRY_BYTES;
        memcpy(e, names[i], len); /* the rest stays NUL */
        memcpy(e + DT_SNAPSHOT_NAME_MAX, &counts[i], 8);
    }

    const void *parts[DT_SNAPSHOT_MAX_TENSORS + 1];
    size_t sizes[DT_SNAPSHOT_MAX_TENSORS + 1];
    parts[0] = buf;
    sizes[0] = head;
    for (int i = 0; i < n_tensors; i++) {
        parts[i + 1] = data[i];
        sizes[i + 1] = (size_t)counts[i] * sizeof(float);
    }
    enum dt_status st = dt_write_parts_atomic(path, parts, sizes, n_tensors + 1, err);
    free(buf);
    return st;
}

/* ---- reading ------------------------------------------------------------------------ */

void dt_snapshot_free(struct dt_snapshot *s)
{
    free(s->names);
    free(s->counts);
    free(s->offsets);
    free(s->data);
    memset(s, 0, sizeof *s);
}

/* The checks run in file order, and nothing is allocated from a header value before it
 * has been checked against the file's size: the table is at most 256 x 72 bytes and the
 * values are read only once header + table + 4 * sum(counts) equals the size. */
static enum dt_status read_checked(struct dt_snapshot *s, FILE *f, int64_t size, const char *path,
                                   struct dt_error *err)
{
    unsigned char head[HEADER_BYTES];
    size_t got = fread(head, 1, sizeof head, f);
    size_t cmp = got < MAGIC_BYTES ? got : MAGIC_BYTES;
    if (memcmp(head, DT_SNAPSHOT_MAGIC, cmp) != 0)
        return dt_error_set(err, DT_ERR_DATA, "%s: not a detrain snapshot (bad magic)", path);
    if (got < sizeof head)
        return dt_error_set(err, DT_ERR_DATA,
                            "%s: truncated snapshot: expected at least %d bytes, found %" PRId64,
                            path, HEADER_BYTES, size);
    int32_t n, reserved;
    memcpy(&s->step, head + 8, 8);
    memcpy(&n, head + 16, 4);
    memcpy(&reserved, head + 20, 4);
    if (s->step < 0)
        return dt_error_set(err, DT_ERR_DATA, "%s: step %" PRId64 " out of range", path, s->step);
    if (n < 1 || n > DT_SNAPSHOT_MAX_TENSORS)
        return dt_error_set(err, DT_ERR_DATA, "%s: tensor count %" PRId32 " out of range (1..%d)",
                            path, n, DT_SNAPSHOT_MAX_TENSORS);
    if (reserved != 0)
        return dt_error_set(err, DT_ERR_DATA,
                            "%s: reserved header field is %" PRId32 ", expected 0", path, reserved);

    int64_t table_end = HEADER_BYTES + (int64_t)n * ENTRY_BYTES;
    s->n_tensors = n;
    s->names = dt_xcalloc((size_t)n, DT_SNAPSHOT_NAME_MAX);
    s->counts = dt_xcalloc((size_t)n, sizeof *s->counts);
    s->offsets = dt_xcalloc((size_t)n, sizeof *s->offsets);
    for (int i = 0; i < n; i++) {
        unsigned char e[ENTRY_BYTES];
        if (fread(e, 1, sizeof e, f) != sizeof e)
            return dt_error_set(err, DT_ERR_DATA,
                                "%s: truncated snapshot: expected at least %" PRId64
                                " bytes (header and %d-tensor table), found %" PRId64,
                                path, table_end, n, size);
        const unsigned char *nul = memchr(e, '\0', DT_SNAPSHOT_NAME_MAX);
        if (!nul)
            return dt_error_set(err, DT_ERR_DATA, "%s: tensor %d: name without NUL terminator",
                                path, i);
        if (nul == e) return dt_error_set(err, DT_ERR_DATA, "%s: tensor %d: empty name", path, i);
        for (const unsigned char *p = nul; p < e + DT_SNAPSHOT_NAME_MAX; p++)
            if (*p != '\0')
                return dt_error_set(err, DT_ERR_DATA,
                                    "%s: tensor %d: bytes after the name's NUL are not NUL", path,
                                    i);
        memcpy(s->names[i], e, DT_SNAPSHOT_NAME_MAX);
        int64_t count;
        memcpy(&count, e + DT_SNAPSHOT_NAME_MAX, 8);
        if (count < 1 || count > MAX_COUNT)
            return dt_error_set(err, DT_ERR_DATA, "%s: tensor %d: count %" PRId64 " out of range",
                                path, i, count);
        s->counts[i] = count;
        s->offsets[i] = s->total;
        s->total += count;
    }

    int64_t expected = table_end + 4 * s->total;
    if (size < expected)
        return dt_error_set(err, DT_ERR_DATA,
                            "%s: truncated snapshot: expected %" PRId64 " bytes, found %" PRId64,
                            path, expected, size);
    if (size > expected)
        return dt_error_set(err, DT_ERR_DATA,
                            "%s: %" PRId64 " trailing bytes after the last tensor", path,
                            size - expected);
    s->data = dt_xmalloc((size_t)s->total * sizeof(float));
    size_t want = (size_t)s->total * sizeof(float);
    got = fread(s->data, 1, want, f);
    if (ferror(f))
        return dt_error_set(err, DT_ERR_IO, "%s: read failed: %s", path, strerror(errno));
    if (got != want) /* the file shrank while it was read */
        return dt_error_set(err, DT_ERR_DATA,
                            "%s: truncated snapshot: expected %" PRId64 " bytes, found %" PRId64,
                            path, expected, table_end + (int64_t)got);
    return DT_OK;
}

enum dt_status dt_snapshot_read(struct dt_snapshot *s, const char *path, struct dt_error *err)
{
    memset(s, 0, sizeof *s);
    int fd; /* a FIFO or a device is refused before a byte is read (core/fileio.h) */
    int64_t size;
    DT_FORWARD_IF_ERROR(dt_open_regular(&fd, path, "a snapshot", &size, err));
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        int e = errno;
        close(fd);
        return dt_error_set(err, DT_ERR_IO, "%s: cannot open: %s", path, strerror(e));
    }
    enum dt_status rc = read_checked(s, f, size, path, err);
    fclose(f);
    if (rc != DT_OK) dt_snapshot_free(s);
    return rc;
}

/* ---- digest and distance ------------------------------------------------------------ */

void dt_snapshot_model_digest(char hex[DT_DIGEST_HEX], const struct dt_snapshot *s, bool tree)
{
    DT_ASSERT(s->n_tensors >= 1 && s->n_tensors <= DT_SNAPSHOT_MAX_TENSORS);
    const char *names[DT_SNAPSHOT_MAX_TENSORS];
    uint8_t(*td)[DT_DIGEST_BYTES] = dt_xcalloc((size_t)s->n_tensors, DT_DIGEST_BYTES);
    for (int i = 0; i < s->n_tensors; i++) {
        dt_tensor_digest_host(td[i], s->data + s->offsets[i], s->counts[i], tree);
        names[i] = s->names[i];
    }
    uint8_t md[DT_DIGEST_BYTES];
    dt_model_digest(md, names, (const uint8_t(*)[DT_DIGEST_BYTES])td, s->n_tensors);
    dt_digest_hex(hex, md);
    free(td);
}

bool dt_snapshot_matches(char own[DT_DIGEST_HEX], const struct dt_snapshot *s, const char *digest)
{
    dt_snapshot_model_digest(own, s, false);
    if (strcmp(own, digest) == 0) return true;
    char tree[DT_DIGEST_HEX];
    dt_snapshot_model_digest(tree, s, true);
    if (strcmp(tree, digest) != 0) return false;
    memcpy(own, tree, DT_DIGEST_HEX);
    return true;
}

enum dt_status dt_snapshot_distance(const struct dt_snapshot *a, const struct dt_snapshot *b,
                                    double *l2, double *norm_a, double *norm_b,
                                    struct dt_error *err)
{
    if (a->n_tensors != b->n_tensors)
        return dt_error_set(err, DT_ERR_DATA,
                            "snapshots differ in tensor count (%d vs %d): not the same model",
                            a->n_tensors, b->n_tensors);
    for (int i = 0; i < a->n_tensors; i++) {
        if (strcmp(a->names[i], b->names[i]) != 0)
            return dt_error_set(err, DT_ERR_DATA,
                                "snapshots differ at tensor %d: named '%s' vs '%s'", i, a->names[i],
                                b->names[i]);
        if (a->counts[i] != b->counts[i])
            return dt_error_set(err, DT_ERR_DATA,
                                "snapshots differ at tensor %d (%s): %" PRId64 " vs %" PRId64
                                " values",
                                i, a->names[i], a->counts[i], b->counts[i]);
    }
    /* Same tensors in the same order: the concatenated values line up index for index. */
    if (l2) *l2 = dt_l2_distance(a->data, b->data, a->total);
    if (norm_a) *norm_a = dt_l2_norm(a->data, a->total);
    if (norm_b) *norm_b = dt_l2_norm(b->data, b->total);
    return DT_OK;
}

/* ---- listing ------------------------------------------------------------------------ */

/* step-<digits>.bin -> the step; -1 for any other name. */
static int64_t parse_snapshot_name(const char *name)
{
    if (strncmp(name, "step-", 5) != 0) return -1;
    const char *p = name + 5;
    int64_t step = 0;
    int digits = 0;
    for (; *p >= '0' && *p <= '9'; p++, digits++) {
        if (digits == 18) return -1; /* would overflow */
        step = step * 10 + (*p - '0');
    }
    if (digits == 0 || strcmp(p, ".bin") != 0) return -1;
    return step;
}

static int cmp_i64(const void *x, const void *y)
{
    int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
    return (a > b) - (a < b);
}

enum dt_status dt_snapshot_list(const char *replica_dir, int64_t **steps_out, int *n_out,
                                struct dt_error *err)
{
    *steps_out = NULL;
    *n_out = 0;
    char dir[4096];
    if (snprintf(dir, sizeof dir, "%s/snapshots", replica_dir) >= (int)sizeof dir)
        return dt_error_set(err, DT_ERR_IO, "%s: path too long", replica_dir);
    DIR *d = opendir(dir);
    if (!d) {
        if (errno == ENOENT) return DT_OK;
        return dt_error_set(err, DT_ERR_IO, "%s: cannot list: %s", dir, strerror(errno));
    }
    int64_t *steps = NULL;
    int n = 0, cap = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        int64_t step = parse_snapshot_name(de->d_name);
        if (step < 0) continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 16;
            steps = dt_xrealloc(steps, (size_t)cap * sizeof *steps);
        }
        steps[n++] = step;
    }
    closedir(d);
    if (n > 1) qsort(steps, (size_t)n, sizeof *steps, cmp_i64);
    int k = 0; /* step-1.bin and step-00000001.bin name one step */
    for (int i = 0; i < n; i++)
        if (k == 0 || steps[i] != steps[k - 1]) steps[k++] = steps[i];
    if (k == 0) {
        free(steps);
        steps = NULL;
    }
    *steps_out = steps;
    *n_out = k;
    return DT_OK;
}
