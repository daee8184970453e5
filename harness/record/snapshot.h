/* Weight snapshots: every parameter of a model at one step, kept at log-spaced steps so
 * drift curves (replica-to-replica L2 distance over time) and `detrain compare` can be
 * rebuilt from disk without keeping every step's weights.
 *
 * File format (little-endian, as every supported host is):
 *   8 bytes   magic "DTSNAP01"
 *   int64     step
 *   int32     n_tensors (1..256), int32 0 (reserved)
 *   n_tensors x { char name[64] (NUL-padded), int64 count (>= 1) }
 *   the float32 values of every tensor in that order, nothing after them.
 * Files are written atomically (temporary file, fsync, rename). The model digest of a
 * snapshot (dt_snapshot_model_digest) is the one the trace records for that step, so a
 * reader can check a snapshot against its trace. */
#ifndef DT_SNAPSHOT_H
#define DT_SNAPSHOT_H

#include <stdint.h>

#include "core/status.h"
#include "harness/record/hash.h"

#define DT_SNAPSHOT_MAGIC "DTSNAP01"
#define DT_SNAPSHOT_NAME_MAX 64
#define DT_SNAPSHOT_MAX_TENSORS 256

struct dt_snapshot {
    int64_t step;
    int n_tensors;
    char (*names)[DT_SNAPSHOT_NAME_MAX];
    int64_t *counts;  /* values per tensor */
    int64_t *offsets; /* where each tensor starts in data */
    int64_t total;    /* sum of counts */
    float *data;
};

/* Write `path` atomically. names[i] shorter than DT_SNAPSHOT_NAME_MAX bytes. */
enum dt_status dt_snapshot_write(const char *path, int64_t step, int n_tensors,
                                 const char *const *names, const int64_t *counts,
                                 const float *const *data, struct dt_error *err);

/* Read a whole snapshot. Errors (DT_ERR_IO when it cannot be opened, DT_ERR_DATA when the
 * bytes are wrong) name the file and what is wrong: bad magic, a count out of range, a
 * name without its NUL, truncated (expected N bytes, found M), trailing bytes. *s is
 * zeroed first and freed on error. */
enum dt_status dt_snapshot_read(struct dt_snapshot *s, const char *path, struct dt_error *err);
void dt_snapshot_free(struct dt_snapshot *s);

/* The model digest (hex) of the snapshot's weights, as harness/hash computes it for the
 * trace: per tensor SHA-256 (tree false) or the tree digest (true: hash.digest: tree), then
 * the model digest over names and tensor digests. */
void dt_snapshot_model_digest(char hex[DT_DIGEST_HEX], const struct dt_snapshot *s, bool tree);

/* Is the snapshot the one a trace recorded as `digest` (hex)? Either kind of digest may be
 * the trace's (hash.digest); own receives the snapshot's digest of the kind that matched, or
 * its SHA-256 one when neither does. */
bool dt_snapshot_matches(char own[DT_DIGEST_HEX], const struct dt_snapshot *s, const char *digest);

/* L2 distance between two snapshots of the same model and the L2 norm of each,
 * accumulated in double in index order (harness/record/metrics.h). Snapshots whose tensors
 * differ in count, names or sizes give DT_ERR_DATA naming the first difference. */
enum dt_status dt_snapshot_distance(const struct dt_snapshot *a, const struct dt_snapshot *b,
                                    double *l2, double *norm_a, double *norm_b,
                                    struct dt_error *err);

/* Steps that have a snapshot file in <replica_dir>/snapshots, ascending (malloc'ed; *n = 0
 * and *steps = NULL when the folder is missing or empty). Files not named
 * step-<digits>.bin are ignored. */
enum dt_status dt_snapshot_list(const char *replica_dir, int64_t **steps, int *n,
                                struct dt_error *err);

#endif
