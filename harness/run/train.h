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
#include "harness/run/replica.h"

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
