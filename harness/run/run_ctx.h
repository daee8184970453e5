/* The training loop's shared state (struct run_ctx), private to harness/run: train.c and
 * the parts it calls by name, each below it:
 * replica_io.c (a replica's output files, hashing submissions, snapshots, checkpoints, its
 * run.json), resume.c (--resume: how each replica starts, cutting its files back to the
 * checkpoint), faults.c (the test-only poison and kill hooks, the non-finite scan, the ranks'
 * verdicts). docs/DESIGN.md, "Data path". */
#ifndef DT_RUN_CTX_H
#define DT_RUN_CTX_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "harness/record/algolog.h"
#include "harness/record/checkpoint.h"
#include "harness/record/trace.h"
#include "harness/run/hashpipe.h"
#include "harness/run/dist.h"
#include "harness/run/replica.h"
#include "harness/run/batches.h"
#include "harness/run/divwatch.h"
#include "nets/step.h"

/* Everything one replica needs that the experiment holds. */
struct run_ctx {
    const struct dt_experiment *exp;
    const struct dt_run_options *opt;
    const struct dt_dataset *ds;
    struct dt_backend *be;
    const struct dt_resident *train_set; /* the training split in backend memory, or NULL */
    /* progress line (a terminal only) */
    bool tty;
    int64_t steps_total, steps_done;
    double t_start, t_last;
    /* test-only kill hook (harness/setup/test_hooks.h): SIGKILL after step kill_after of this
     * process */
    int64_t kill_after, steps_run;
    int kill_signal; /* the signal raised there (SIGKILL, or the signal hook's) */
    bool resume;     /* dt_train_resume */
    /* test-only poison hook (harness/setup/test_hooks.h): armed until the first replica that trains
     * takes it */
    struct poison {
        bool armed, grad;
        int64_t step;
        char tensor[DT_PARAM_NAME];
        float value;
    } poison;
    /* --resume: the run.json the folder held before (its segments go on in the new one) */
    char *earlier_manifest;
    /* what the run reads: SHA-256 over the training and test splits as loaded (run.json's
     * data_digest; --resume refuses data that changed since) */
    char data_digest[DT_DIGEST_HEX];
};

/* ---- after each step: the observers ------------------------------------------------------
 * A step of a replica (train.c, replica_step) is the model's step (nets/step.h) and then its
 * observers in order, each in the file that owns its concern: the poison hook and the
 * non-finite scan (faults.c), the hashed step's trace row, rank digest and divergence watch
 * and the step-times row (observe_hash.c), the verdict on a non-finite loss or parameter
 * (faults.c), the weight snapshot and the checkpoint (replica_io.c), the periodic
 * evaluation (observe_eval.c), the progress line (progress.c) and the kill hook
 * (faults.c). Test hooks are installed only when set. An observer that ends the replica
 * (it failed) sets done->stop; an error return stops it too. */
struct step_done {
    int64_t s;      /* the step */
    float loss;     /* its loss, on the weights before its update (NaN: non-finite) */
    bool bad_param; /* the scan found a NaN or Inf gradient or weight (res->reason says) */
    bool hashed;    /* a hashed step: hash.every, the last step, or a non-finite loss */
    double hash_ms; /* the main thread's hashing time (NaN when not hashed) */
    bool stop;      /* the replica ended (failed) */
};
struct replica;
typedef enum dt_status dt_step_observer_fn(struct run_ctx *c, struct replica *rep,
                                           struct step_done *done, struct dt_error *err);
#define DT_MAX_OBSERVERS 12

/* A replica's open output files and buffers. */
struct replica_io {
    struct dt_trace_writer tw;
    bool trace_open;
    FILE *metrics, *times;
    char metrics_path[1300], times_path[1300];
    struct dt_hashpipe *hp;          /* hashing and trace rows of the hashed steps */
    int64_t submitted;               /* the last step given to hp; -1 = none yet */
    int64_t kept_step;               /* resumed: the last trace row kept from before; -1 = none */
    char kept_digest[DT_DIGEST_HEX]; /* its model digest */
    float *weights;                  /* every tensor, for snapshots */
    int64_t snap_steps[80];
    int n_snaps, next_snap;
};

/* How a replica starts: from step 0, kept as it is (it completed before), or from its
 * checkpoint. */
enum replica_start { START_FRESH, START_KEEP, START_CHECKPOINT };

/* One replica while it trains: what run_replica's phases share. */
struct replica {
    int cell, r;
    const struct dt_policy *pol;
    struct dt_replica_result *res;
    char start[32];               /* when it started (run.json) */
    bool writer, multi, poisoned; /* rank 0 writes; several ranks; the poison hook's replica */
    struct dt_model *m;
    struct dt_checkpoint_info streams;
    uint32_t member;
    int64_t k;            /* steps done before this run (a checkpoint's step) */
    struct replica_io io; /* rank 0's files */
    struct dt_batch_stream batches;
    struct dt_sgd_options sgd;
    double *step_ms, *hash_ms; /* per step run here; per hashed step */
    int64_t n_hash;
    int64_t step_waits;       /* the device's host waits inside the steps run here (a GPU's) */
    int64_t first_step_waits; /* of those, the first step's (scratch grows at first use) */
    /* Library algorithm choices per step (cuDNN under conv_algo autotune/deterministic):
     * every replica chooses afresh, as a new process would. */
    struct dt_algolog algos;
    struct dt_algo_note *notes;
    /* several ranks, or reduction: exact: the combined step (nets/step.h) */
    struct dt_step dstep;
    /* the digest of the last hashed step, for the ranks' agreement; every rank hashes */
    char digest[DT_DIGEST_HEX];
    bool have_digest, stopped_together;
    uint8_t (*tensor_digests)[DT_DIGEST_BYTES]; /* ranks > 0: their own hashing */
    float *hash_staging;
    struct dt_divwatch watch; /* train.checkpoint_at_divergence (harness/run/divwatch.h) */
    /* what runs after each step, in order (install_observers, train.c): test hooks only
     * when set */
    dt_step_observer_fn *observers[DT_MAX_OBSERVERS];
    int n_observers;
};

/* ---- replica_io.c: a replica's output files ---------------------------------------------- */

/* hash.async resolved for model m (auto: pipelined where the weights are not in host
 * memory). */
bool dt_replica_hash_async(const struct dt_experiment *exp, struct dt_model *m);
/* The replica's output files: created, or with resume_step >= 0 opened to go on after that
 * step; closed with the first error winning (st is the status so far). */
enum dt_status dt_replica_metrics_row(FILE *f, const char *path, int64_t step,
                                      const struct dt_eval *e, struct dt_error *err);
enum dt_status dt_replica_manifest_write(const struct run_ctx *c, int cell, int r,
                                         const struct dt_replica_result *res, const char *start,
                                         bool dt_replica_hash_async, const struct dt_algolog *algos,
                                         struct dt_error *e);
bool dt_replica_snapshot_due(const struct replica_io *io, int64_t s);
enum dt_status dt_replica_maybe_snapshot(struct dt_model *m, struct replica_io *io, const char *dir,
                                         int64_t s, struct dt_error *err);
/* sample.txt of a gpt replica (harness/record/layout.h). */
enum dt_status dt_replica_sample_write(struct dt_model *m, const struct dt_experiment *exp,
                                       const struct dt_policy *pol, const char *dir,
                                       struct dt_error *err);
enum dt_status dt_replica_predictions_write(const char *dir, const uint8_t *labels,
                                            const uint8_t *pred, int64_t n, struct dt_error *err);
enum dt_status dt_replica_io_open(struct replica_io *io, const struct dt_experiment *exp,
                                  struct dt_model *m, const char *dir, int64_t resume_step,
                                  struct dt_error *err);
enum dt_status dt_replica_io_close(struct replica_io *io, enum dt_status st, struct dt_error *err);
enum dt_status dt_replica_submit_hash(struct replica_io *io, int64_t s, float loss,
                                      struct dt_error *err);
enum dt_status dt_replica_checkpoint_write(const struct run_ctx *c, struct dt_model *m,
                                           struct replica_io *io, const struct dt_policy *pol,
                                           const struct dt_checkpoint_info *streams,
                                           const char *dir, struct dt_error *err);
enum dt_status dt_replica_rank_digest(struct replica_io *io, struct dt_model *m,
                                      uint8_t (*tensor_digests)[DT_DIGEST_BYTES], float *staging,
                                      char hex[DT_DIGEST_HEX], struct dt_error *err);

dt_step_observer_fn dt_observe_snapshot, dt_observe_checkpoint;

/* ---- observe_hash.c, observe_eval.c, progress.c ------------------------------------------ */

dt_step_observer_fn dt_observe_hash, dt_observe_times, dt_observe_eval, dt_observe_progress;
/* The progress line's end (a terminal only), before a message of the replica's. */
void dt_progress_end(struct run_ctx *c);

/* ---- resume.c: --resume ------------------------------------------------------------------ */

bool dt_replica_completed(const char *dir, int64_t steps);
enum dt_status dt_resume_plan(enum replica_start *start, struct dt_checkpoint *ck,
                              const struct run_ctx *c, int cell, int r, const char *dir,
                              const struct dt_model *m, struct dt_error *err);
enum dt_status dt_resume_cut_back(const struct dt_experiment *exp, const char *dir,
                                  const struct dt_checkpoint *ck, bool dry, int64_t *kept_step,
                                  char kept_digest[DT_DIGEST_HEX], struct dt_error *err);
enum dt_status dt_resume_check_folder(const char *dir, const struct dt_experiment *exp,
                                      struct dt_error *err);
enum dt_status dt_resume_check_plans(struct run_ctx *c, struct dt_error *err);
char *dt_results_read_text(const char *path, size_t *len);
/* The data a run reads, as hex: SHA-256 over each split's size, features (the bytes as read,
 * or the floats) and labels, training split first. */
void dt_data_digest(char hex[DT_DIGEST_HEX], const struct dt_dataset *ds);
/* --resume: the data this run read must be what the run in `dir` read (its run.json's
 * data_digest; a run.json from before the digest is not checked, said on stderr unless
 * quiet). DT_ERR_CONFIG naming the dataset otherwise. */
enum dt_status dt_resume_check_data(const char *dir, const struct run_ctx *c, struct dt_error *err);
/* reproduce (dt_run_options.data_of): the data this run reads must be what the result in
 * `dir` read (its run.json's data_digest), else DT_ERR_DATA naming the dataset, its path
 * here and both digests. A result that records no digest (older than it) is not checked. */
enum dt_status dt_check_data_recorded(const char *dir, const struct run_ctx *c,
                                      struct dt_error *err);

/* ---- faults.c: what stops a replica ---------------------------------------------------- */

/* The replica fails for a reason of its own (res->reason): said on stderr, the run goes on. */
void dt_replica_failed(struct run_ctx *c, const struct replica *rep);
dt_step_observer_fn dt_observe_poison, dt_observe_scan, dt_observe_verdict, dt_observe_kill;

enum dt_status dt_fault_poison_parse(struct run_ctx *c, const char *spec, struct dt_error *err);
enum dt_status dt_fault_poison_apply(const struct poison *p, struct dt_model *m, int64_t s,
                                     struct dt_error *err);
bool dt_fault_params_finite(struct dt_model *m, int64_t s, char *reason, size_t size);
enum dt_status dt_fault_ranks_agree(const struct dt_dist *d, struct dt_replica_result *res,
                                    int64_t step, const char *digest, struct dt_error *err);
enum dt_status dt_fault_ranks_agree_end(const struct dt_dist *d, struct dt_replica_result *res,
                                        int64_t step, enum dt_status st, const char *digest,
                                        struct dt_error *err);

#endif
