/* `detrain reproduce DIR...`: rerun a committed or downloaded result on this machine and
 * compare it step by step with the traces it recorded (docs/cli.md, "reproduce").
 *
 * Each DIR is an experiment folder (config.json, run.json, <cell>/replica-<k>/trace.csv) or
 * a folder of them (results/cpu/crossdev-t2: mlp/, lenet/, bnn/). For each experiment:
 *  1. its config.json is loaded as `run` loads a config (a key this build does not know is
 *     refused, naming it), then the --set overrides (default backend.device=cpu; the
 *     config's threads);
 *  2. the cells are chosen: by default those whose policy is `portable` in every control
 *     (the cells that promise the same bits everywhere); --cells names others; every
 *     chosen replica must have a trace.csv (else refused: nothing to compare with);
 *  3. those cells alone are trained for the recorded trace's length into a temporary
 *     folder (or --out), with no snapshots and no overhead measurement;
 *  4. each replica's trace is compared with the recorded one (dt_trace_compare): "identical
 *     at all N hashed steps to <machine> (<date>)", or the first divergent step and
 *     tensor; a cell whose policy is not portable is then passed to `explain` (the
 *     recorded replica against the new one), whose op and control are printed, or why it
 *     could not tell.
 * Every refusal comes before anything is trained: the folders, configs, cells and traces,
 * then for each experiment the rerun's own checks (its dry run: memory, data, model,
 * folder; dt_run_options.dry_run). Nothing is written into DIR: the rerun
 * goes to a temporary folder that is removed at the end, unless --out keeps it. */
#ifndef DT_REPRODUCE_H
#define DT_REPRODUCE_H

#include <stdbool.h>
#include <stdio.h>

#include "core/status.h"

struct dt_reproduce_options {
    const char *const *dirs; /* results to reproduce */
    int n_dirs;
    const char *cells;       /* comma-separated cell names, or NULL: the portable cells */
    const char *const *sets; /* --set overrides, after the defaults */
    int n_sets;
    const char *out; /* keep the rerun here (one experiment: this folder; several:
                        <out>/<name>); NULL: a temporary folder, removed */
    bool quiet;      /* no progress on stderr */
};

/* DT_OK with *verdict the exit code: 0 every replica identical (every recorded value
 * recomputed and equal); 1 some replica parts (the first step, value or tensor, and for a
 * cell that is not portable what explain attributes it to); 2 some replica cannot be
 * compared (and none parts). An error when a result cannot be reproduced here, before
 * anything is trained (exit 2: what the user, the data or the result changed, or what this
 * machine lacks, said in err). The verdicts and a closing table are printed on `out`. */
enum dt_status dt_reproduce(const struct dt_reproduce_options *opt, FILE *out, int *verdict,
                            struct dt_error *err);

#endif
