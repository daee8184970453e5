/* Data parallelism over MPI ranks (`mpirun -np N detrain run CONFIG`), with NCCL between
 * GPUs, whose weights do not depend on the number of ranks at `reduction: exact`.
 *
 * The global batch stays train.batch, cut into train.shards canonical shards and dealt to
 * the ranks by the rules of nets/step.h, whose step combines the ranks' gradients under the
 * `reduction` control through the exchange this module implements (struct dt_exchange:
 * MPI on host memory, NCCL on GPU memory when built in). Every rank draws the same global
 * batch from the same data-order stream and keeps its rows. A single process (no launcher)
 * has no exchange and never touches MPI.
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
#include "nets/step.h"

/* This process's place among the ranks: one object, made by dt_dist_init in main and
 * passed down; NULL everywhere below means one process (rank 0 of 1, no MPI). */
struct dt_dist;

/* MPI_Init when this process was started by an MPI launcher (Open MPI's, MPICH's or
 * PMIx's environment variables) and detrain was built with MPI; otherwise one rank, no MPI.
 * Returns DT_ERR_USAGE when a launcher started several processes but MPI was not built
 * in (each would write the same files). Call once, before anything else; *out is set in
 * either case (dt_dist_finalize it). */
enum dt_status dt_dist_init(int *argc, char ***argv, struct dt_dist **out, struct dt_error *err);
void dt_dist_finalize(struct dt_dist *d);

int dt_dist_rank(const struct dt_dist *d);
int dt_dist_size(const struct dt_dist *d);
/* The rank among those on this machine (the GPU index offset), 0 without a launcher. */
int dt_dist_local_rank(const struct dt_dist *d);
/* "Open MPI v4.1.4; NCCL 2.27.3" (the library version for manifests). */
const char *dt_dist_library(const struct dt_dist *d);
bool dt_dist_have_mpi(void);
bool dt_dist_have_nccl(void);
/* The collectives of the step (nets/step.h) across this process's ranks; NULL without a
 * launcher (one process: the step needs none). */
const struct dt_exchange *dt_dist_exchange(const struct dt_dist *d);

/* Refuses (DT_ERR_CONFIG, saying why) shards outside [max(1, ranks), batch], and
 * (DT_ERR_UNSUPPORTED) several ranks for a model that does not split its step. */
enum dt_status dt_dist_check(const struct dt_dist *d, const struct dt_model *m, int64_t batch,
                             int64_t shards, struct dt_error *err);

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
void dt_dist_agree(const struct dt_dist *d, int state, const char *digest_hex,
                   struct dt_dist_verdict *v);
/* Collective maximum of a status code (0 = DT_OK) and the lowest rank holding it. */
int dt_dist_max_status(const struct dt_dist *d, int status, int *rank_out);
/* Collective: block until every rank arrives. */
void dt_dist_barrier(const struct dt_dist *d);

#endif
