/* The progress line on a terminal: an observer of every step (run_ctx.h). */
#include "harness/run/run_ctx.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>

#include "core/util.h"
#include "harness/record/layout.h"

/* "1h02m", "3m05s", "42s". */
static void format_duration(char *buf, size_t size, double sec)
{
    if (!isfinite(sec) || sec < 0) {
        snprintf(buf, size, "?");
        return;
    }
    long t = (long)(sec + 0.5);
    if (t >= 3600) snprintf(buf, size, "%ldh%02ldm", t / 3600, t / 60 % 60);
    else if (t >= 60) snprintf(buf, size, "%ldm%02lds", t / 60, t % 60);
    else snprintf(buf, size, "%lds", t);
}

/* One progress line on a terminal, rewritten in place at most 5 times a second: cell,
 * replica, step, steps/s over the whole run, and the time left. Nothing when stderr is not
 * a terminal or with --quiet. */
static void progress(struct run_ctx *c, int cell, int r, int64_t s, bool force)
{
    c->steps_done++;
    if (!c->tty) return;
    double now = dt_now_s();
    if (!force && now - c->t_last < 0.2) return;
    c->t_last = now;
    const double rate = (double)c->steps_done / (now - c->t_start);
    char eta[32], cell_dir[256];
    format_duration(eta, sizeof eta, (double)(c->steps_total - c->steps_done) / rate);
    dt_cell_dir(cell_dir, sizeof cell_dir, c->exp, cell);
    fprintf(stderr,
            "\r  cell %d/%d %s  replica %d/%d  step %" PRId64 "/%" PRId64
            "  %.1f steps/s  ETA %s\033[K",
            cell + 1, dt_cell_count(c->exp), cell_dir, r + 1, c->exp->replicas, s,
            c->exp->train.steps, rate, eta);
    fflush(stderr);
}

void dt_progress_end(struct run_ctx *c)
{
    if (c->tty) fprintf(stderr, "\r\033[K");
}

/* The observer: rank 0's line after each step (forced at the last). */
enum dt_status dt_observe_progress(struct run_ctx *c, struct replica *rep, struct step_done *done,
                                   struct dt_error *err)
{
    if (rep->writer) progress(c, rep->cell, rep->r, done->s, done->s == c->exp->train.steps);
    return DT_OK;
}
