/* What a run is given and what each of its replicas ends as: the options of `detrain run`
 * (struct dt_run_options) and a replica's result. Below harness/run/train.h (the run's
 * entry points) and harness/run/run_ctx.h (the training loop's shared state), so that the
 * parts the loop calls -- replica_io.c, resume.c, faults.c -- read them without an edge
 * back up to train.c. docs/DESIGN.md, "Data path". */
#ifndef DT_REPLICA_H
#define DT_REPLICA_H

#include <stdbool.h>
#include <stdint.h>

#include "core/status.h"
#include "harness/record/checkpoint.h"
#include "harness/record/hash.h"
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
    struct dt_model_memory mem;   /* memory held for random draws */
    double step_ms_median;        /* forward+backward+update, excluding hashing and evaluation */
    double hash_ms_median;        /* hashing of a step, when hashed */
    double host_waits_per_step;   /* the training thread's waits for a GPU in a step, its end
                                   * included (hashing's not), over every step run here; NAN on
                                   * the CPU */
    double host_waits_first_step; /* the first step's alone (buffers growing at first use) */
    double host_waits_steady;     /* per step after the first (NAN: fewer than 2 steps) */
    int64_t resumed_from_step;    /* --resume: the checkpoint's step it went on from; -1 = none */
    char dir[1200];               /* where its trace lives */
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
    /* `detrain reproduce`'s rerun (harness/analyze/reproduce.h):
     * data_of: a result folder whose run.json records the data it read (data_digest): the
     *   data read here must be the same, or the run is refused (DT_ERR_DATA) before its
     *   first write, naming the dataset and its path; NULL: not checked;
     * need_device: a dry run of a GPU config where there is none is refused as the run
     *   would be, not checked on the CPU instead;
     * stop_after: > 0: no step past this one is trained (the length of a recorded trace
     *   cut short), train.steps kept as the schedule's length; the replicas end there as
     *   interrupted (no evaluation, no checkpoint). */
    const char *data_of;
    bool need_device;
    int64_t stop_after;
};

/* Replica r of `cell`: its stream indices (init, data order; the rest of the info zero)
 * and, in *member, its ensemble member -- what `vary` gives it (harness/run/resume.c). */
struct dt_checkpoint_info dt_replica_streams(const struct dt_experiment *exp, int cell, int r,
                                             uint32_t *member);

#endif
