/* Data parallelism over MPI ranks (`mpirun -np N detrain run CONFIG`), with NCCL between
 * GPUs, whose weights do not depend on the number of ranks at `reduction: exact`.
 *
 * The global batch stays train.batch. It is cut into train.shards canonical shards by a
 * fixed rule -- shard s holds rows [floor(s*B/S), floor((s+1)*B/S)) -- and rank r of N
 * takes shards [floor(r*S/N), floor((r+1)*S/N)): contiguous rows, every rank at least one
 * shard (N <= S). Every rank draws the same global batch from the same data-order stream
 * and keeps its rows. A step's gradient is combined under the `reduction` control:
 *
 *   unordered  each rank's gradient over its rows; MPI_Allreduce (NCCL on GPUs) in float,
 *              whose order is the library's.
 *   fixed      each rank's gradient over its rows; every rank gathers all N and adds them
 *              in rank order 0, 1, ..., N-1: fixed for a given N, different across N.
 *   exact      forward, loss and backward once over the rank's rows, every batch
 *              reduction giving one partial per shard (each the fixed tree over the shard's
 *              rows, as a pass over the shard alone would: nets/backend.h, dt_shards);
 *              per tensor one power-of-two scale from max |partial| over every shard (an
 *              all-reduce of the maximum, which has no order) and the shard count; each
 *              partial converted exactly to int64 and summed, with an integer all-reduce
 *              across ranks; one rounding back to float -- all backend ops (dt_exact_*),
 *              on the device for CUDA. Integer addition is associative, so the bits are the
 *              same for any N -- and for the plain single-process run, which takes the
 *              same path with N = 1.
 *
 * With one rank and unordered or fixed the step is the plain one. A model with its own
 * train_step takes these paths when it splits that step (dt_model_splits_step: bnn_mlp's
 * gradients give the data term over the rank's rows, one partial per shard at exact); the
 * data-free term (bnn_mlp's KL) is added once, after the combination, identically on every
 * rank (dt_model_finish_gradients), then the update. One that does not split its step
 * refuses more than one rank.
 *
 * Rank 0 writes every file; every rank checks its model digest against rank 0's at each
 * hashed step, and the ranks agree after every step whether to go on, so a failure or a
 * signal on one rank stops all of them at the same step (dt_dist_agree). */
#ifndef DT_DIST_H
#define DT_DIST_H

#include <stdbool.h>
#include <stdint.h>

#include "core/status.h"
#include "determinism/policy.h"
#include "nets/model.h"

/* MPI_Init when this process was started by an MPI launcher (Open MPI's, MPICH's or
 * PMIx's environment variables) and detrain was built with MPI; otherwise one rank.
 * Returns DT_ERR_USAGE when a launcher started several processes but MPI was not built
 * in (each would write the same files). Call once, before anything else. */
enum dt_status dt_dist_init(int *argc, char ***argv, struct dt_error *err);
void dt_dist_finalize(void);
/* Stop every rank (after an error on one rank that the others cannot know of). */
void dt_dist_abort(int code);

int dt_dist_rank(void);
int dt_dist_size(void);
/* The rank's index among the ranks on its machine (picks its GPU). */
int dt_dist_local_rank(void);
/* Started by an MPI launcher (also with -np 1). */
bool dt_dist_launched(void);
/* "Open MPI 4.1.4" / "MPI not built in"; "nccl 2.x" when NCCL is built in. */
const char *dt_dist_library(void);
bool dt_dist_have_mpi(void);
bool dt_dist_have_nccl(void);

/* The fixed rules: first row of shard s of S over B rows; first shard of rank r of N. */
int64_t dt_dist_shard_row(int64_t B, int64_t S, int64_t s);
int64_t dt_dist_rank_shard(int64_t S, int N, int r);

/* dt_fixed_to_float(acc, shift) by the exact path's faster route (for tests). */
float dt_dist_fixed_to_float(int64_t acc, int shift);

/* Whether a step of `pol` on `m` goes through dt_dist_step (else dt_model_train_step). */
bool dt_dist_step_needed(const struct dt_model *m, const struct dt_policy *pol);
/* Refuse what cannot run on dt_dist_size() ranks: more ranks than shards, shards larger
 * than the batch, a model whose own step does not split (dt_model_splits_step) on several
 * ranks. */
enum dt_status dt_dist_check(const struct dt_model *m, int64_t batch, int64_t shards,
                             struct dt_error *err);

/* Buffers of one model's steps under one kind of reduction (exact or not). */
struct dt_dist_step {
    struct dt_model *m;
    bool exact;                /* set up for reduction: exact (dt_model_grad_slots on m) */
    int64_t total;             /* elements over every parameter */
    int64_t *offset;           /* per parameter, into the packed gradient (n_params + 1) */
    int64_t *n;                /* per parameter, its elements */
    float *stage;              /* unordered, fixed: the rank's own packed gradient */
    float *gather;             /* fixed: N packed gradients */
    uint32_t *max_dev;         /* exact: per tensor, max |partial| bits (backend memory) */
    uint32_t *max_bits;        /* exact: the same on the host */
    int64_t *acc_dev, *acc;    /* exact with several ranks: the int64 sums (backend, host) */
    float *loss_slots;         /* per shard (exact) or per rank */
    struct dt_dist_nccl *nccl; /* NULL: MPI on host memory */
};
/* Set up for steps of m under pol's kind of reduction (exact: m's gradients get room for
 * the most shards a rank holds). */
void dt_dist_step_init(struct dt_dist_step *d, struct dt_model *m, int64_t shards,
                       const struct dt_policy *pol);
void dt_dist_step_free(struct dt_dist_step *d);

/* One training step of m on the global batch (B rows: host rows or resident indices,
 * nets/model.h), every rank passing the same batch: the rank's share, the combination across ranks
 * under pol->reduction, then the update. *loss = the global batch's mean loss (the same value on
 * every rank: exact combines the shards' means in shard order, fixed the ranks' in rank order,
 * unordered by an all-reduce). A failure on any rank fails the step on every rank: a numeric one
 * with DT_ERR_NUMERIC and m->err naming the tensor (and the rank when it is another's). */
enum dt_status dt_dist_step(struct dt_dist_step *d, const struct dt_batch *batch, int64_t B,
                            int64_t shards, const struct dt_sgd_options *opt,
                            const struct dt_policy *pol, float *loss);

/* The step every harness caller takes: dt_dist_step when dt_dist_step_needed (d set up
 * for m on first use; dt_dist_step_free it before m is destroyed), else
 * dt_model_train_step. */
enum dt_status dt_dist_train(struct dt_dist_step *d, struct dt_model *m,
                             const struct dt_batch *batch, int64_t B, int64_t shards,
                             const struct dt_sgd_options *opt, const struct dt_policy *pol,
                             float *loss);

/* What a rank brings to the agreement after a step: DT_DIST_GO_ON, a signal number
 * (1..63: it was asked to stop), or DT_DIST_FAILED (it stopped on an error). */
#define DT_DIST_GO_ON 0
#define DT_DIST_FAILED 100
struct dt_dist_verdict {
    int stop_code;      /* the highest state brought; DT_DIST_GO_ON when every rank goes on */
    int stopped_rank;   /* the first rank that brought stop_code; -1 none */
    int differing_rank; /* the first rank whose digest differs from rank 0's; -1 none */
    char digest0[72], digest_bad[72];
};
/* Collective: every rank's state and, when digest_hex is not NULL (a hashed step; the same
 * on every rank), its model digest. With one rank: stop_code = state, nothing differs. */
void dt_dist_agree(int state, const char *digest_hex, struct dt_dist_verdict *v);
/* Collective maximum of a status code (0 = DT_OK) and the lowest rank holding it. */
int dt_dist_max_status(int status, int *rank_out);
/* Collective: block until every rank arrives. */
void dt_dist_barrier(void);

#endif
