/* train.checkpoint_at_divergence: a replica after the first watches its model digest
 * against replica 0's trace at every hashed step, keeping (on the host) its state after the
 * last step where they agree; at the first step where they differ it writes that state to
 * <replica>/divergence.bin (the checkpoint format, harness/record/checkpoint.h) and stops
 * watching. `detrain explain` (harness/analyze/explain.h) starts from it instead of
 * replaying: a `fast` step need not take the run's bits again, and one whose result
 * depended on the run's thread schedule may never.
 *
 * Replicas of a cell train one after another, so replica 0's trace is complete when
 * replica r >= 1 starts. Without it (replica 0 failed early, or r == 0) nothing is
 * watched. The state at step 0 is the initial weights, which explain builds anyway: a
 * replica that differs at step 1 writes nothing. Watching costs, per hashed step until the
 * divergence, the wait for the step's digest (the hash pipeline drained) and a copy of the
 * weights and momenta; it writes nothing into the trace and changes no bit of the run. */
#ifndef DT_DIVWATCH_H
#define DT_DIVWATCH_H

#include <stdbool.h>
#include <stdint.h>

#include "core/status.h"
#include "determinism/policy.h"
#include "harness/record/checkpoint.h"
#include "harness/record/hash.h"
#include "harness/record/trace.h"
#include "harness/setup/config.h"
#include "nets/model.h"

#define DT_DIVERGENCE_FILE "divergence.bin"

struct dt_divwatch {
    bool on;
    struct dt_trace_row *ref;   /* replica 0's trace */
    int64_t n_ref, next;        /* next: the first row not yet passed */
    struct dt_model_state kept; /* the state after kept.step (when have_kept) */
    bool have_kept;
    char digest[DT_DIGEST_HEX]; /* kept.step's */
};

/* Start watching (dw->on) when `replica0_dir`'s trace can be read; keep the state after
 * m->step, whose digest is `hex` (NULL: unknown, not kept). */
void dt_divwatch_begin(struct dt_divwatch *dw, const char *replica0_dir, struct dt_model *m,
                       const char *hex);

/* After hashed step s, the model's digest `hex`: keep the state when replica 0's trace
 * agrees; at the first difference write <dir>/divergence.bin from the state kept (not when
 * that is step 0) and stop. *wrote: the step written, or -1. */
enum dt_status dt_divwatch_step(struct dt_divwatch *dw, struct dt_model *m, int64_t s,
                                const char *hex, const struct dt_experiment *exp,
                                const struct dt_policy *pol,
                                const struct dt_checkpoint_info *streams, const char *dir,
                                int64_t *wrote, struct dt_error *err);

void dt_divwatch_free(struct dt_divwatch *dw);

#endif
