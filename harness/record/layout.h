/* Where an experiment's files live on disk: the one place that names them, shared by the
 * writer (harness/train) and the readers (harness/report, harness/compare).
 *
 * <out>/run.json              experiment manifest (harness/train)
 * <out>/config.json           the resolved config; dt_config_load reads it back, so
 *                             `detrain report` rebuilds without the original YAML
 * <out>/overhead.csv          raw alternated step times, one row per pair:
 *                             "policy,pair,order,fast_ms,policy_ms" (order: fast_first or
 *                             policy_first; policy = the policy's name)
 * <out>/<cell>/replica-<k>/   one replica:
 *     trace.csv, tensors.csv  (harness/record/trace.h)
 *     metrics.csv             "step,test_loss,test_acc,test_ece"; the last row is the final
 *                             evaluation (step = train.steps) when the replica completed
 *     times.csv               "step,step_ms,hash_ms": every step; hash_ms empty when the step
 *                             was not hashed
 *     predictions.csv         "index,label,predicted": the final model's class for every
 *                             test example (completed replicas only); for a text, the
 *                             next byte after each validation window
 *     sample.txt              a language model's (gpt) text from DT_SAMPLE_PROMPT, sampled
 *                             at the end (completed replicas only; raw bytes)
 *     snapshots/step-<8 digits>.bin   weights at step 0 and report.snapshots log-spaced
 *                             steps (harness/record/snapshot.h)
 *     run.json                replica manifest
 *     checkpoint.bin          train.checkpoint_every, or interrupted (harness/record/checkpoint.h)
 *     divergence.bin          train.checkpoint_at_divergence, replicas after the first: the
 *                             state at the last step agreeing with replica 0's trace, written
 *                             when they first differ (harness/run/divwatch.h)
 * <out>/report.md, summary.csv, cells.csv, drift.csv, plots/   (harness/report)
 * <out>/explain/<cell>.csv     with report.explain: `detrain explain`'s op table for each cell
 *                             whose replicas part ("/" in a cell name becomes "_")
 *
 * <cell> is the policy's name when the experiment has one vary setting (the layout of
 * single-setting experiments), else "<vary label>/<policy>". A cell index c runs over
 * vary settings (outer) x policies (inner): c = v * n_policies + p. */
#ifndef DT_LAYOUT_H
#define DT_LAYOUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "harness/setup/config.h"

/* sample.txt: what a completed gpt replica writes, from its final weights: the prompt, then
 * DT_SAMPLE_BYTES bytes at temperature DT_SAMPLE_TEMPERATURE, drawn from the stream (seed,
 * replica 0, DT_PURPOSE_SAMPLE, train.steps): replicas with the same weights write the
 * same text. */
#define DT_SAMPLE_PROMPT "Q: Why did the"
#define DT_SAMPLE_BYTES 240
#define DT_SAMPLE_TEMPERATURE 0.8f

#define DT_OVERHEAD_HEADER "policy,pair,order,fast_ms,policy_ms"
#define DT_TIMES_HEADER "step,step_ms,hash_ms"
#define DT_PREDICTIONS_HEADER "index,label,predicted"
#define DT_METRICS_HEADER "step,test_loss,test_acc,test_ece"

/* "none" for 0, else the names of the set flags joined by '+' in flag order
 * ("init+data_order"). */
void dt_vary_label(char *buf, size_t size, unsigned vary);

static inline int dt_cell_count(const struct dt_experiment *exp)
{
    return exp->n_vary * exp->n_policies;
}
static inline int dt_cell_vary(const struct dt_experiment *exp, int cell)
{
    return cell / exp->n_policies;
}
static inline int dt_cell_policy(const struct dt_experiment *exp, int cell)
{
    return cell % exp->n_policies;
}

/* The cell's folder relative to <out> (see above). */
void dt_cell_dir(char *buf, size_t size, const struct dt_experiment *exp, int cell);
/* <out>/<cell>/replica-<r>. */
void dt_replica_dir(char *buf, size_t size, const char *out_dir, const struct dt_experiment *exp,
                    int cell, int r);
/* <replica_dir>/snapshots/step-<8 digits>.bin, and the folder itself. */
void dt_snapshot_path(char *buf, size_t size, const char *replica_dir, int64_t step);
void dt_snapshot_dir(char *buf, size_t size, const char *replica_dir);

/* The steps at which replicas keep weight snapshots: 0, then up to exp->report.snapshots
 * log-spaced steps in [1, train.steps] (dt_log_spaced_steps), ascending. Returns the
 * count (0 when report.snapshots is 0); out holds at least report.snapshots + 1. */
int dt_snapshot_steps(const struct dt_experiment *exp, int64_t *out);

/* The value of "key" in a replica's run.json text (a number, or a string without its
 * quotes), or "" when the key is absent: the flat form dt_replica_manifest_write writes. */
void dt_manifest_field(char *out, size_t size, const char *text, const char *key);
/* Whether replica_dir/run.json exists and says the replica completed ("state": "completed"). */
bool dt_manifest_completed(const char *replica_dir);
/* out[i]: the number keys[i] holds in replica_dir/run.json when the replica completed
 * (one read of the file); NaN when it did not, the file or the key is missing, or the value
 * is not a finite number (a CPU run has no "host_waits_steady"). */
void dt_manifest_numbers(const char *replica_dir, const char *const *keys, int n, double *out);

/* Whether `rel` -- a path inside an experiment folder, relative to it ("portable/replica-0/
 * trace.csv") -- is one that detrain writes for exp (a run, its report, resume, explain;
 * atomic writes' ".tmp" and ".tmp-<pid>" leftovers included), is_dir saying whether it is a
 * folder. What --overwrite may remove, and nothing else (harness/record/outdir.h). */
bool dt_layout_is_own(const struct dt_experiment *exp, const char *rel, bool is_dir);
/* The length of the longest path below the experiment folder ('/' first) that a run of exp
 * writes: the run refuses an --out that would push it past DT_PATH_MAX before anything. */
size_t dt_layout_longest(const struct dt_experiment *exp);

#endif
