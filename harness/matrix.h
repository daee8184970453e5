/* A matrix of experiments: a config with the key `matrix` (harness/setup/config.h) lists entries
 * {name, set}; `detrain run` runs each selected entry in turn as a complete experiment
 * (dt_train_experiment) into <out>/<entry name>/, records how each ended in
 * <out>/matrix.json, and puts the entries' summaries side by side in <out>/report.md and
 * <out>/matrix.csv, one section per device. Data path (docs/DESIGN.md): harness/config ->
 * harness/matrix -> harness/train and harness/report per entry -> the matrix report.
 *
 * <out>/matrix.json  {"tool", "matrix" (the config's name), "config_file", "command",
 *                    "entries": [{"name", "status" (done | skipped | failed; pending while
 *                    it waits), "reason" ("" when done), "device", "model", "policies",
 *                    "seconds"}]}
 * <out>/matrix.csv   one row per device, entry and cell (DT_MATRIX_CSV_HEADER)
 * <out>/report.md    the same per device, the skipped and failed entries with their reason */
#ifndef DT_MATRIX_H
#define DT_MATRIX_H

#include <stdbool.h>

#include "core/status.h"
#include "harness/setup/config.h"
#include "harness/analyze/report.h"

struct dt_dist;
struct dt_test_hooks;

#define DT_MATRIX_CSV_HEADER                                                                       \
    "device,entry,model,cell,vary,policy,controls,replicas,completed,"                             \
    "distinct_final_digests,first_divergent_step,step_ms_median,overhead_ratio,"                   \
    "overhead_ci_lo,overhead_ci_hi,overhead_verdict,hash_ms_median,hash_share,test_acc_mean,"      \
    "test_acc_std,churn_mean,class_acc_std_mean,host_waits_per_step,host_waits_steady,"            \
    "host_waits_first_step"

struct dt_matrix_options {
    const char *config;      /* the matrix config file */
    const char *const *sets; /* command-line --set overrides, over every entry */
    int n_sets;
    const char *only;           /* "a,b": run these entries only (file order); NULL = all */
    const char *out_dir;        /* the matrix folder */
    const char *command;        /* the command line, for matrix.json and each run.json */
    bool quiet;                 /* no progress lines (skips and failures are still said) */
    bool overwrite;             /* --overwrite: an entry folder that holds a result is replaced */
    const struct dt_dist *dist; /* NULL: one process (a matrix runs on one) */
    const struct dt_test_hooks *hooks; /* test-only (harness/setup/test_hooks.h); NULL: none */
};

/* Run the matrix `matrix` (dt_config_load_matrix of opt->config, n_matrix > 0). Every
 * selected entry is resolved (dt_config_load_entry) before anything runs: a config error
 * or an unknown --only name (the message lists the entries) returns DT_ERR_CONFIG /
 * DT_ERR_USAGE. An entry whose backend cannot be opened (no CUDA device, a build without
 * CUDA) is skipped with one line; one that fails is recorded and the rest still run.
 * Returns DT_OK when every entry is done or skipped, DT_ERR_NUMERIC when any failed,
 * DT_ERR_INTERRUPTED on SIGINT/SIGTERM/SIGHUP (the remaining entries are skipped). Writes the
 * matrix report at the end. */
enum dt_status dt_matrix_run(const struct dt_experiment *matrix,
                             const struct dt_matrix_options *opt, struct dt_error *err);

/* Does `dir` hold a matrix.json (a matrix folder rather than one experiment)? */
bool dt_matrix_is_folder(const char *dir);

/* The matrix report of folder `dir` from matrix.json and each entry's files: with
 * `rebuild_entries`, first each entry's own report as dt_report_build makes it (then from
 * its summary.csv and config.json); writes report.md and matrix.csv, and prints the table
 * when opt->print_summary. The same folder gives the same bytes. */
enum dt_status dt_matrix_report(const char *dir, const struct dt_report_options *opt,
                                bool rebuild_entries, struct dt_error *err);

#endif
