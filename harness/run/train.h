/* Training: for each policy x replica, for each step: batch -> model step -> hash ->
 * trace; then evaluation, per-replica manifests and the experiment summary.
 * Data path (docs/DESIGN.md): harness/config + harness/data -> harness/train -> hash/trace. */
#ifndef DT_TRAIN_H
#define DT_TRAIN_H

#include <stdbool.h>
#include <stdint.h>

#include "core/status.h"
#include "harness/setup/config.h"
#include "harness/setup/data.h"
#include "harness/record/checkpoint.h"
#include "harness/record/hash.h"
#include "nets/backend.h"
#include "nets/model.h"

struct dt_dist;
struct dt_test_hooks;

/* How one replica ended. */
enum dt_replica_state { DT_REPLICA_COMPLETED, DT_REPLICA_FAILED, DT_REPLICA_INTERRUPTED };

struct dt_replica_result {
    enum dt_replica_state state;
    char reason[1024]; /* why it failed or stopped, "" when completed */
    int64_t steps_done;
    char final_digest[DT_DIGEST_HEX];
    double test_loss, test_acc, test_ece;
    struct dt_model_memory mem; /* memory held for random draws */
    double step_ms_median;      /* forward+backward+update, excluding hashing and evaluation */
    double hash_ms_median;      /* hashing of a step, when hashed */
    int64_t resumed_from_step;  /* --resume: the checkpoint's step it went on from; -1 = none */
    char dir[1200];             /* where its trace lives */
};

/* Per-run options from the command line. */
struct dt_run_options {
    const char *out_dir;               /* results folder of the experiment */
    const char *command;               /* the command line, for run.json */
    bool quiet;                        /* no progress lines */
    bool overwrite;                    /* --overwrite: a result already in out_dir is removed whole
                                          (after every check passed) instead of refusing the run */
    const struct dt_dist *dist;        /* the ranks (harness/run/dist.h); NULL: one process */
    const struct dt_test_hooks *hooks; /* test-only (harness/setup/test_hooks.h); NULL: none */
    /* The report over the folder's files, built by the caller's function once the run
     * ended (also interrupted: it reads only what is on disk); its failure fails the run.
     * NULL: none. main.c and the matrix runner pass dt_report_build's. */
    enum dt_status (*report)(const char *dir, bool quiet, struct dt_error *err);
    /* --dry-run: every check the run makes before its first write (memory, backend, data,
     * model, folder, and for a resume the folder's config, data and checkpoints), then stop:
     * nothing trained or written, no folder lock taken. */
    bool dry_run;
};

/* Replica r of `cell`: its stream indices (init, data order; the rest of the info zero)
 * and, in *member, its ensemble member -- what `vary` gives it (harness/run/resume.c). */
struct dt_checkpoint_info dt_replica_streams(const struct dt_experiment *exp, int cell, int r,
                                             uint32_t *member);

/* Run the whole experiment. Writes <out>/run.json (updated at the end), per replica
 * trace.csv, tensors.csv, metrics.csv, run.json and checkpoint.bin (every
 * train.checkpoint_every steps, and when interrupted), and <out>/summary.csv. Prints the
 * summary table on stdout. Returns DT_OK when every replica completed.
 * Test-only (opt->hooks, harness/setup/test_hooks.h): the kill hook sends the process
 * SIGKILL after the N-th training step this call runs (counted over its replicas in run
 * order; each matrix entry counts anew), so tests can kill a run at a chosen point
 * (tests/test_checkpoint.c).
 * Faults (train.check_finite, default on): after every step, before hashing, each parameter
 * in model order has its gradient, then its weight, scanned (dt_backend_first_nonfinite);
 * the first NaN/Inf fails that replica at that step ("non-finite weight in dense1.weight
 * (element 0) at step 12; replica stopped" in its run.json and on stderr), its trace keeping
 * every hashed step before it and the step's own row only when the step is hashed anyway (a
 * non-finite loss always gets its row). A numeric error of the step itself (the model's error
 * names the tensor, e.g. a fixed-point overflow) fails the replica likewise, its trace ending
 * at the step before. The other replicas go on; the run then returns DT_ERR_NUMERIC (exit 1).
 * Test-only: the poison hook "STEP:TENSOR[:w|g[:VALUE]]" (e.g. "12:dense1.weight",
 * "7:dense0.bias:g", "3:dense1.weight:w:3e38") sets element 0 of that tensor's weight (w, the
 * default) or gradient (g) to VALUE (default NaN) right after step STEP returns -- after its
 * update, which used the true gradient, and before the scan -- in the first replica this call
 * trains only (tests/test_faults.c). A malformed value or an unknown tensor is DT_ERR_USAGE. */
enum dt_status dt_train_experiment(const struct dt_experiment *exp,
                                   const struct dt_run_options *opt, struct dt_error *err);

/* `detrain run CONFIG --resume DIR`: go on with the interrupted run of exp in opt->out_dir.
 * Refused (DT_ERR_CONFIG, naming the keys) unless its config.json is this config up to the
 * keys a resume may change (harness/record/checkpoint.h). Completed replicas are kept; replicas
 * with a checkpoint.bin go on from it, their files cut back to its step, so that trace.csv
 * and tensors.csv end up byte-identical to an uninterrupted run's; the others start again.
 * Every checkpoint is checked before the first step (DT_ERR_CONFIG / DT_ERR_DATA). Then the
 * overhead measurement and the report, as dt_train_experiment. */
enum dt_status dt_train_resume(const struct dt_experiment *exp, const struct dt_run_options *opt,
                               struct dt_error *err);

/* The memory a run of exp needs on this process, from above (bytes): the run refuses one
 * that needs more than the machine allows before anything is allocated; *what names the
 * keys that drive it. (`detrain run --dry-run` prints it.) */
double dt_run_memory_bytes(const struct dt_experiment *exp, char *what, size_t size);

#endif
