/* The step's rows, an observer of every step (run_ctx.h): on a hashed step the trace row
 * (the digest pipeline, harness/run/hashpipe.h), with several ranks this rank's digest for
 * the ranks' agreement, and the divergence watch (harness/run/divwatch.h); then the
 * step-times row. */
#include "harness/run/run_ctx.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "core/util.h"
#include "harness/record/csv.h"

/* A hashed step: hash.every, the last step, or a non-finite loss (always its row; a bad
 * gradient or weight only on a step hashed anyway: docs/cli.md, "Faults"). The main
 * thread's cost is timed: the copy issued and, when pipelined, the rows of earlier steps
 * written; the last step, a failing one and a snapshot's step also wait until the trace
 * holds them. */
enum dt_status dt_observe_hash(struct run_ctx *c, struct replica *rep, struct step_done *done,
                               struct dt_error *err)
{
    const struct dt_experiment *exp = c->exp;
    struct replica_io *io = &rep->io;
    const int64_t s = done->s, steps = exp->train.steps;
    done->hashed = (s % exp->hash.every == 0) || s == steps || !isfinite(done->loss);
    done->hash_ms = NAN;
    if (!done->hashed) return DT_OK;
    enum dt_status st = DT_OK;
    const double t1 = dt_now_s();
    if (rep->writer) st = dt_replica_submit_hash(io, s, done->loss, err);
    if (st == DT_OK && rep->writer &&
        (s == steps || !isfinite(done->loss) || dt_replica_snapshot_due(io, s)))
        st = dt_hashpipe_drain(io->hp, err);
    if (st == DT_OK && rep->multi) {
        st = dt_replica_rank_digest(io, rep->m, rep->tensor_digests, rep->hash_staging, rep->digest,
                                    err);
        rep->have_digest = true;
    }
    done->hash_ms = rep->hash_ms[rep->n_hash++] = 1e3 * (dt_now_s() - t1);
    if (st == DT_OK && rep->watch.on) { /* after the timing: the watch is not hashing */
        char hex[DT_DIGEST_HEX];
        int64_t wrote;
        if (rep->multi) memcpy(hex, rep->digest, sizeof hex); /* computed above */
        else st = dt_replica_rank_digest(io, rep->m, NULL, NULL, hex, err);
        if (st == DT_OK)
            st = dt_divwatch_step(&rep->watch, rep->m, s, hex, exp, rep->pol, &rep->streams,
                                  rep->res->dir, &wrote, err);
    }
    return st;
}

/* times.csv: the step's milliseconds and, on a hashed step, the hashing's. */
enum dt_status dt_observe_times(struct run_ctx *c, struct replica *rep, struct step_done *done,
                                struct dt_error *err)
{
    if (!rep->writer) return DT_OK;
    struct replica_io *io = &rep->io;
    const int64_t s = done->s;
    fprintf(io->times, "%" PRId64 ",%.6f,", s, rep->step_ms[s - 1]);
    if (done->hashed) fprintf(io->times, "%.6f", done->hash_ms);
    fputc('\n', io->times);
    if (s == c->exp->train.steps || s % 64 == 0)
        return dt_csv_flush(io->times, io->times_path, err);
    return DT_OK;
}
