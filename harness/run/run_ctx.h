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
    bool resume; /* dt_train_resume */
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

/* ---- faults.c: what stops a replica ---------------------------------------------------- */

enum dt_status dt_fault_poison_parse(struct run_ctx *c, const char *spec, struct dt_error *err);
enum dt_status dt_fault_poison_apply(const struct poison *p, struct dt_model *m, int64_t s,
                                     struct dt_error *err);
bool dt_fault_params_finite(struct dt_model *m, int64_t s, char *reason, size_t size);
void dt_fault_kill_hook(struct run_ctx *c);
enum dt_status dt_fault_ranks_agree(const struct dt_dist *d, struct dt_replica_result *res,
                                    int64_t step, const char *digest, struct dt_error *err);
enum dt_status dt_fault_ranks_agree_end(const struct dt_dist *d, struct dt_replica_result *res,
                                        int64_t step, enum dt_status st, const char *digest,
                                        struct dt_error *err);

#endif
