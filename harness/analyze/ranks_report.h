/* The report of a distributed experiment: one config run at several rank counts, each
 * into its own folder under DIR -- DIR/plain (one process) and DIR/np<N> (mpirun -np N),
 * as scripts/ranks.sh makes them. `detrain report DIR` writes each run's own report, then
 * DIR/report.md (per policy: digest equality across rank counts against the first run,
 * step time and its ratio to the reduction: unordered policy at each rank count) and
 * DIR/ranks.csv (one row per policy and run). */
#ifndef DT_RANKS_REPORT_H
#define DT_RANKS_REPORT_H

#include <stdbool.h>

#include "core/status.h"

/* DIR holds run folders named plain or np<N> and no config.json of its own. */
bool dt_ranks_is_folder(const char *dir);
enum dt_status dt_ranks_report(const char *dir, bool quiet, struct dt_error *err);

#endif
