/* Reading and comparing traces, replica folders and experiment folders (`detrain
 * compare`, the summary's first divergent step, the cross-device table of `compare --table`):
 * digests step by step, plus the L2 distance between the weight snapshots both sides kept. */
#ifndef DT_COMPARE_H
#define DT_COMPARE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "core/status.h"
#include "harness/record/hash.h"
#include "harness/record/snapshot.h"
#include "harness/record/trace.h"

struct dt_trace_diff {
    bool diverged;
    int64_t first_step;  /* first step whose model digest differs; -1 when none */
    int64_t common_rows; /* rows compared */
    int64_t rows_a, rows_b;
    int64_t last_common_step; /* the step of the last row both traces have (-1: none) */
    char tensor[64];          /* first differing tensor at first_step, when both have tensors.csv */
    /* when diverged at a step both hashed and `tensor` is empty: why no tensor is named
     * ("<dir>/tensors.csv: cannot open: ..."); tensor_fault = something is wrong (one
     * side lacks or cannot read tensors.csv, or it lacks the step), not merely both sides
     * without per-tensor hashes (hash.per_tensor: false) */
    char tensor_note[1024];
    bool tensor_fault;
    char digest_a[DT_DIGEST_HEX], digest_b[DT_DIGEST_HEX];
};

/* Compare two traces step by step. A trace that ends early (the other goes on with equal
 * digests) counts as diverged with first_step = the first step the shorter one lacks.
 * Traces hashed at different steps are an error (DT_ERR_DATA). */
enum dt_status dt_trace_compare(struct dt_trace_diff *diff, const char *path_a, const char *path_b,
                                struct dt_error *err);

/* Read <replica_dir>/snapshots/step-<step>.bin and, when the replica's trace (rows, n_rows:
 * its trace.csv as dt_trace_read gives it) has that step, check the snapshot's model digest
 * against the trace's. A mismatch is DT_ERR_DATA naming the snapshot file ("does not match
 * trace.csv at step N: snapshot corrupted or from another run"). The snapshot's digest is
 * returned in `hex` (may be NULL). *s is freed on error. */
enum dt_status dt_snapshot_read_verified(struct dt_snapshot *s, char *hex, const char *replica_dir,
                                         int64_t step, const struct dt_trace_row *rows,
                                         int64_t n_rows, struct dt_error *err);

/* One snapshot step both replicas kept. */
struct dt_snapshot_diff {
    int64_t step;
    double l2;             /* L2 distance of all weights */
    double norm_a, norm_b; /* L2 norms */
    double rel_l2;         /* l2 / mean(norm_a, norm_b); 0 when l2 is 0 */
    bool identical;        /* model digests equal */
};

/* Every snapshot step that both replica folders have, ascending (malloc'ed; *n = 0 and
 * *rows = NULL when none), each snapshot verified against its own trace.csv first
 * (dt_snapshot_read_verified; a replica without trace.csv is not checked). */
enum dt_status dt_compare_snapshots(struct dt_snapshot_diff **rows, int *n, const char *replica_a,
                                    const char *replica_b, struct dt_error *err);

/* `detrain compare A B`, printed to `out`. A and B are
 *   - two trace.csv files or replica folders: the first divergent step (and tensor, with
 *     tensors.csv), and, when both folders hold snapshots/, a table of every snapshot
 *     step both have (step, L2 distance, relative L2, "identical" when digests agree);
 *   - two experiment folders (each holds config.json): every cell and replica of either
 *     side against the same folder in the other, one line each, then a total.
 * *diverged = any difference (a divergent digest or snapshot, a replica missing on one
 * side). Errors (unreadable or malformed files, a snapshot that does not match its trace,
 * an experiment folder against a replica folder) return their status; in the experiment
 * case the other replicas are still compared and printed first. */
enum dt_status dt_compare_paths(const char *a, const char *b, FILE *out, bool *diverged,
                                struct dt_error *err);

/* `detrain compare --table`: one experiment (the first) against several others. */
struct dt_table_options {
    const char *const *experiments; /* experiment folders; [0] is the reference */
    int n_experiments;              /* at least 2 */
    const char *const *labels;      /* column names for experiments[0..n_labels), in order; */
    int n_labels;                   /* the rest are named by the device in their run.json */
    const char *csv_path;           /* also write the table as CSV here (NULL: not) */
};

/* The cross-device table, as Markdown to `out`: one row per cell and replica that the
 * reference's config names, one column per other experiment, each cell
 *   "identical (N steps)"                          every hashed step's model digest equal;
 *   "identical (N common steps; A vs B)"           the traces differ in length, the common
 *                                                  prefix is equal (said under the table);
 *   "step S, tensor T" / "step S"                  the first divergent step (and tensor, with
 *                                                  tensors.csv on both sides);
 *   "missing" / "missing (reference)"              no trace.csv on that side;
 *   "error"                                        unreadable trace, listed under the table.
 * Column headers name the device each experiment ran on, from its run.json (backend name,
 * threads, device description; run.json of the experiment, else of its first replica),
 * unless a label is given. Traces are compared with dt_trace_compare (digests only; no
 * snapshots). *all_identical = every cell identical (a common prefix counts). Errors: a
 * folder that is missing or not an experiment (DT_ERR_IO / DT_ERR_DATA, before anything is
 * printed); an unreadable trace (its status, after the table; the first one in `err`). */
enum dt_status dt_compare_table(const struct dt_table_options *opt, FILE *out, bool *all_identical,
                                struct dt_error *err);

/* Is `path` an experiment folder (a folder holding config.json)? */
bool dt_is_experiment_dir(const char *path);

/* What the experiment in `dir` ran on, from its run.json (else its replica
 * `first_replica`'s, may be NULL): a short label ("cpu: AMD EPYC, 2 threads", "cuda: NVIDIA
 * H100 80GB HBM3 (sm_90)"), a longer detail (device, build) and, when `when` is not NULL,
 * its start time ("" when unknown). */
void dt_experiment_describe(const char *dir, const char *first_replica, char *label,
                            size_t label_size, char *detail, size_t detail_size, char *when,
                            size_t when_size);

#endif
