/* `detrain bench`: step throughput of an experiment's first policy and the share of step
 * time spent hashing, measured side by side in one process (no timed tests). */
#ifndef DT_BENCH_H
#define DT_BENCH_H

#include <stdbool.h>

#include "harness/run/batches.h"
#include "harness/setup/config.h"
#include "harness/run/dist.h"
#include "harness/setup/data.h"
#include "core/util.h"
#include "harness/record/metrics.h"
#include "nets/model.h"

#define DT_BENCH_CSV_HEADER "config,policy,what,base_ms,policy_ms,ratio,ci_lo,ci_hi,verdict"

struct dt_bench_options {
    int64_t steps;  /* measured steps (after warm-up) */
    int64_t warmup; /* unmeasured steps */
    /* optional: DT_BENCH_CSV_HEADER, then "experiment,policy,what,base_ms,policy_ms,ratio"
     * rows; the "step" rows add ",ci_lo,ci_hi,conclusive|inconclusive" (paired bootstrap,
     * 95%). An existing file (an earlier bench CSV: main.c checks) gets the new rows after
     * its own; the whole is written to a temporary file and renamed into place. */
    const char *csv_path;
    bool baseline_first;        /* overhead against the config's first policy instead of fast */
    const struct dt_dist *dist; /* the ranks (harness/run/dist.h); NULL: one process */
    const struct dt_test_hooks *hooks; /* test-only (harness/setup/test_hooks.h); NULL: none */
};

/* The overhead protocol's sampler, shared with `detrain run` (report.overhead_samples):
 * `base` and `pol` alternate step by step on one model and one batch stream, in ABBA order
 * (base first in even pairs, pol first in odd ones) so neither always runs on the caches
 * the other left; `warmup` unmeasured pairs, then n measured ones. ta[i], tb[i]: seconds of
 * pair i's base and pol steps; oa/ob (optional, n * DT_OP_COUNT): per-op seconds, with the
 * backend's profiling enabled by the caller. *s is the running batch index. A stop request
 * (dt_stop_requested, on any rank) ends it before the next step with DT_OK and the
 * flag set on every rank: the samples are then incomplete. */
struct dt_bench_stream {
    struct dt_batch_stream batches;
    int64_t s;
    struct dt_step step[2];     /* the base's and the policy's steps, each with its own graph
                                   (dt_step_free both after) */
    const struct dt_dist *dist; /* the ranks stepping together; NULL: one process */
    int slow_base_op;           /* test hook: this op slowed in base's steps; -1 none */
    double slow_base_seconds;
    /* host waits of the last dt_bench_alternate's measured steps: [0] the base's, [1] the
     * policy's (dt_backend_host_waits; 0 on the CPU) */
    int64_t waits[2];
    int64_t xp_int8[2], xp_simple[2]; /* exact products by form (the CUDA backend's counts) */
};
enum dt_status dt_bench_alternate(struct dt_model *m, const struct dt_experiment *exp,
                                  struct dt_bench_stream *bs, const struct dt_policy *base,
                                  const struct dt_policy *pol, int64_t warmup, int64_t n,
                                  double *ta, double *tb, double *oa, double *ob);

/* A policy beats the baseline by more than noise when the upper end of the paired bootstrap
 * 95% interval of its time ratio lies below this: beyond the interval and by more than 5%
 * (per-op times of sub-millisecond ops carry percent-sized biases of their own). */
#define DT_BENCH_FLAG_BELOW 0.95
/* ... and, for an op, only when the median time it saves is at least this share of the
 * baseline's median step: a few microseconds of a tiny op that both levels run through the
 * same code (ReLU, the clipping scale) move with the cache state the ops before them leave,
 * not with the path; a saving that would not move the step by 1% is not a finding. */
#define DT_BENCH_FLAG_STEP_SHARE 0.01

/* The bench's verdict lines for one policy against the baseline, appended to `flags`, from
 * samples alone (the same samples give the same lines: tested on fixed ones, never on a
 * timing): "<base> is not the fastest here: <pol>'s step R [lo, hi]" when step_ci's upper
 * end lies below DT_BENCH_FLAG_BELOW; then "<base> is not the fastest for <op> here: ..."
 * for each op whose paired bootstrap interval (over oa, ob: n_ops rows of DT_OP_COUNT
 * seconds, 0 where the op did not run) lies below it and whose median saving is at least
 * DT_BENCH_FLAG_STEP_SHARE of base_step (the baseline's median step, seconds; 0: no such
 * floor). step_ci, or oa/ob, may be NULL. */
void dt_bench_flags(struct dt_strbuf *flags, const char *base, const char *pol,
                    const struct dt_ratio_ci *step_ci, const double *oa, const double *ob,
                    int64_t n_ops, double base_step, uint64_t seed);

/* "<pol> costs more than <level> here: ...": where pol only relaxes `level` -- some control
 * differs, each that does holds the value of a weaker level (fast's, or run_to_run's against
 * portable) -- and its step interval against fast lies wholly above the level's (both from
 * the same bench). A relaxed control allows every path the stricter value allows, so such a
 * policy pays for a slower kernel or a library switch of its own: run_to_run dearer than
 * portable, or a single-control ablation pricing something other than its control (issue
 * 69's confounds). Nothing for a policy that tightens a control or sets a value no level
 * has (reduction fixed, math strict: no order among them to assume), nor for the level
 * itself. */
void dt_bench_relax_flag(struct dt_strbuf *flags, const struct dt_policy *pol,
                         const struct dt_ratio_ci *ci, enum dt_level level,
                         const struct dt_ratio_ci *level_ci);

enum dt_status dt_bench_run(const struct dt_experiment *exp, const struct dt_bench_options *opt,
                            struct dt_error *err);

#endif
