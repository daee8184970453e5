/* The per-step record of which library algorithm ran (nets/backend.h, dt_algo_note): the
 * notes of every training step, run-length encoded per call site -- a call site being the
 * i-th noted call of a step -- so that a 10,000-step run whose choices never change is one
 * row per call site, and every change (autotuning changing its mind, a short last batch
 * getting its own choice) starts a new row. Written to the replica's algos.csv and its
 * run.json (harness/run/train.c). */
#ifndef DT_ALGOLOG_H
#define DT_ALGOLOG_H

#include <stdint.h>

#include "core/status.h"
#include "core/util.h"
#include "nets/backend.h"

#define DT_ALGOLOG_MAX_CALLS 64    /* call sites per step that are followed */
#define DT_ALGOLOG_MAX_RUNS 100000 /* rows kept; beyond, changes are only counted */

struct dt_algo_run {
    int64_t first_step, last_step;
    int call;
    struct dt_algo_note note;
};

struct dt_algolog {
    struct dt_algo_run *runs; /* closed and open rows, in the order they were opened */
    int64_t n_runs, cap;
    /* index in runs of call site i's open row, or -1; beyond DT_ALGOLOG_MAX_RUNS rows, a
     * site's current (not kept) row is followed in runs[DT_ALGOLOG_MAX_RUNS + i] */
    int64_t open[DT_ALGOLOG_MAX_CALLS];
    int64_t dropped;     /* rows not kept (beyond DT_ALGOLOG_MAX_RUNS) */
    int64_t steps_noted; /* steps that had at least one note */
};

void dt_algolog_init(struct dt_algolog *log);
void dt_algolog_free(struct dt_algolog *log);
/* Add step `step`'s notes (in call order; n may exceed what notes holds: see
 * dt_backend_take_algo_notes, only the first min(n, max_kept) are read). */
void dt_algolog_step(struct dt_algolog *log, int64_t step, const struct dt_algo_note *notes, int n,
                     int max_kept);
/* Rows whose call site changed its choice at least once: rows beyond the first per site. */
int64_t dt_algolog_changes(const struct dt_algolog *log);
/* algos.csv: first_step,last_step,call,op,shape,algo,name,deterministic,math,how (rows in
 * opening order). Nothing is written when no step had a note. */
enum dt_status dt_algolog_write_csv(const struct dt_algolog *log, const char *path,
                                    struct dt_error *err);
/* `"algorithms": {...}` for run.json: rows (up to 64; the csv has them all), changes. */
void dt_algolog_json(const struct dt_algolog *log, struct dt_strbuf *sb);

#endif
