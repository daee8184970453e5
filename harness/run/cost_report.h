/* `detrain cost`: the cost model's view of an experiment's training step on the CUDA
 * backend (nets/cost.h) -- per op and policy, launches, host waits, bytes and flops, and the
 * predicted time on a device, beside a GPU run's measured per-op times when given. Needs no
 * GPU: the step runs on the configured backend (the CPU here) while the ops are counted. */
#ifndef DT_COST_REPORT_H
#define DT_COST_REPORT_H

#include "core/status.h"
#include "harness/setup/config.h"
#include "nets/cost.h" /* struct dt_cost_device */

#define DT_COST_CSV_HEADER                                                                         \
    "config,policy,what,calls,launches,waits,bytes,flops,lib_flops,int_ops,pred_ms,graph_ms,"      \
    "measured_ms"

struct dt_cost_options {
    /* optional: a `detrain bench --csv` file from a GPU run of the same config: its per-op
     * and step times print beside the prediction (fast's from the base_ms column) */
    const char *measured_csv;
    /* optional: DT_COST_CSV_HEADER and one row per policy and op, then a "step" row (and a
     * "hash" row: the step's hashing); written atomically */
    const char *csv_path;
    /* the device whose constants turn counts into time (NULL: dt_cost_h200) */
    const struct dt_cost_device *device;
};

enum dt_status dt_cost_report(const struct dt_experiment *exp, const struct dt_cost_options *opt,
                              struct dt_error *err);

#endif
