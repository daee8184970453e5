/* What stops a replica besides its end (train.h, "Faults"): the non-finite scan after each
 * step and the verdict on it, the test-only poison and kill hooks (observers of the step,
 * run_ctx.h), and with several ranks their verdict after each step (a digest that differs
 * from rank 0's, a rank that failed, a signal on any rank). */
#include "harness/run/run_ctx.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/fileio.h"
#include "core/util.h"
#include "harness/run/dist.h"
#include "harness/run/stop.h"

/* Test-only (harness/setup/test_hooks.h): parse the poison hook's
 * "STEP:TENSOR[:w|g[:VALUE]]" into c->poison (armed); nothing when spec is NULL.
 * DT_ERR_USAGE naming it when malformed. */
enum dt_status dt_fault_poison_parse(struct run_ctx *c, const char *spec, struct dt_error *err)
{
    if (!spec) return DT_OK;
    struct poison *p = &c->poison;
    memset(p, 0, sizeof *p);
    p->value = NAN;
    char which[8] = "w", value[64] = "";
    int n = sscanf(spec, "%" SCNd64 ":%47[^:]:%7[^:]:%63s", &p->step, p->tensor, which, value);
    char *end = NULL;
    if (value[0]) p->value = strtof(value, &end);
    if (n < 2 || p->step < 1 || (strcmp(which, "w") != 0 && strcmp(which, "g") != 0) ||
        (value[0] && *end != '\0'))
        return dt_error_set(err, DT_ERR_USAGE,
                            "poison hook '%s': expected STEP:TENSOR[:w|g[:VALUE]] with "
                            "STEP >= 1",
                            spec);
    p->grad = which[0] == 'g';
    p->armed = true;
    return DT_OK;
}

/* Test-only: after step s, element 0 of the poisoned tensor's weight or gradient := the
 * hook's value (NaN by default). The update of step s has run with the true gradient. */
enum dt_status dt_fault_poison_apply(const struct poison *p, struct dt_model *m, int64_t s,
                                     struct dt_error *err)
{
    if (s != p->step) return DT_OK;
    for (int i = 0; i < m->n_params; i++) {
        if (strcmp(m->params[i].name, p->tensor) != 0) continue;
        dt_backend_upload(m->be, p->grad ? m->params[i].g : m->params[i].w, &p->value,
                          sizeof p->value);
        return DT_OK;
    }
    return dt_error_set(err, DT_ERR_USAGE, "poison hook: the model has no tensor '%s'", p->tensor);
}

/* train.check_finite: the first parameter (model order) whose gradient, then weight, holds
 * a NaN or Inf after step s, all tensors scanned in one backend call (one device wait).
 * Returns false, with the reason, when one does. */
bool dt_fault_params_finite(struct dt_model *m, int64_t s, char *reason, size_t size)
{
    const int count = 2 * m->n_params;
    const float **t = dt_xmalloc((size_t)count * sizeof *t);
    int64_t *n = dt_xmalloc((size_t)count * sizeof *n);
    for (int i = 0; i < m->n_params; i++) {
        t[2 * i] = m->params[i].g;
        t[2 * i + 1] = m->params[i].w;
        n[2 * i] = n[2 * i + 1] = m->params[i].n;
    }
    int which = -1;
    int64_t bad = -1;
    const bool found = dt_backend_first_nonfinite_many(m->be, t, n, count, &which, &bad);
    free(t);
    free(n);
    if (!found) return true;
    snprintf(reason, size,
             "non-finite %s in %s (element %" PRId64 ") at step %" PRId64 "; replica stopped",
             which % 2 == 0 ? "gradient" : "weight", m->params[which / 2].name, bad, s);
    return false;
}

/* Test-only (harness/setup/test_hooks.h), an observer installed when set: the kill hook
 * kills the process after its N-th step, as a crash or `kill -9` would: nothing is flushed,
 * nothing is cleaned up. */
enum dt_status dt_observe_kill(struct run_ctx *c, struct replica *rep, struct step_done *done,
                               struct dt_error *err)
{
    if (c->kill_after > 0 && ++c->steps_run == c->kill_after) raise(c->kill_signal);
    return DT_OK;
}

/* Test-only, an observer of the first replica that trains when the poison hook is set. */
enum dt_status dt_observe_poison(struct run_ctx *c, struct replica *rep, struct step_done *done,
                                 struct dt_error *err)
{
    return dt_fault_poison_apply(&c->poison, rep->m, done->s, err);
}

/* train.check_finite: the first bad gradient or weight, named in res->reason -- acted on
 * after the step's rows are written (dt_observe_verdict). A non-finite loss is named as such
 * instead, so there is no scan then. */
enum dt_status dt_observe_scan(struct run_ctx *c, struct replica *rep, struct step_done *done,
                               struct dt_error *err)
{
    done->bad_param =
        isfinite(done->loss) && c->exp->train.check_finite &&
        !dt_fault_params_finite(rep->m, done->s, rep->res->reason, sizeof rep->res->reason);
    return DT_OK;
}

void dt_replica_failed(struct run_ctx *c, const struct replica *rep)
{
    rep->res->state = DT_REPLICA_FAILED;
    dt_progress_end(c);
    fprintf(stderr, "detrain: [%s] replica %d: %s\n", rep->pol->name, rep->r, rep->res->reason);
}

/* After the step's rows: a non-finite loss or a bad parameter fails the replica. */
enum dt_status dt_observe_verdict(struct run_ctx *c, struct replica *rep, struct step_done *done,
                                  struct dt_error *err)
{
    if (!isfinite(done->loss))
        snprintf(rep->res->reason, sizeof rep->res->reason,
                 "training loss is %s at step %" PRId64 "; replica stopped",
                 isnan(done->loss) ? "NaN" : "infinite", done->s);
    if (isfinite(done->loss) && !done->bad_param) return DT_OK;
    dt_replica_failed(c, rep);
    done->stop = true;
    return DT_OK;
}

/* The ranks' verdict after `step`: a digest that differs from rank 0's fails the replica
 * and stops the run, naming rank and step; a rank that failed stops the others; a signal
 * on any rank becomes every rank's (the loop then stops as for its own signal). */
static enum dt_status apply_verdict(const struct dt_dist *d, const struct dt_dist_verdict *v,
                                    struct dt_replica_result *res, int64_t step,
                                    struct dt_error *err)
{
    if (v->differing_rank >= 0) {
        res->state = DT_REPLICA_FAILED;
        snprintf(res->reason, sizeof res->reason,
                 "rank %d's weights differ from rank 0's after step %" PRId64
                 " (model digest %.16s... on rank %d, %.16s... on rank 0); run stopped",
                 v->differing_rank, step, v->digest_bad, v->differing_rank, v->digest0);
        if (dt_dist_rank(d) == 0) fprintf(stderr, "\ndetrain: %s\n", res->reason);
        return dt_error_set(err, DT_ERR_DATA, "%s", res->reason);
    }
    if (v->stop_code > 0 && v->stop_code < 64) {
        if (!dt_stop_requested) dt_stop_requested = v->stop_code;
        return DT_OK;
    }
    if (v->stop_code == DT_DIST_FAILED && v->stopped_rank != dt_dist_rank(d) &&
        res->state == DT_REPLICA_COMPLETED) {
        res->state = DT_REPLICA_FAILED;
        snprintf(res->reason, sizeof res->reason,
                 "rank %d stopped after step %" PRId64 " (its message is on its stderr)",
                 v->stopped_rank, step);
        return dt_error_set(err, DT_ERR_IO, "%s", res->reason);
    }
    return DT_OK;
}

/* At the start of each step: go on together, or stop together. */
enum dt_status dt_fault_ranks_agree(const struct dt_dist *d, struct dt_replica_result *res,
                                    int64_t step, const char *digest, struct dt_error *err)
{
    struct dt_dist_verdict v;
    dt_dist_agree(d, dt_stop_requested ? (int)dt_stop_requested : DT_DIST_GO_ON, digest, &v);
    return apply_verdict(d, &v, res, step, err);
}

/* After the loop, unless the ranks stopped together: the last digests, and this rank's own
 * stop (a failed step or write) made known to the others. */
enum dt_status dt_fault_ranks_agree_end(const struct dt_dist *d, struct dt_replica_result *res,
                                        int64_t step, enum dt_status st, const char *digest,
                                        struct dt_error *err)
{
    struct dt_dist_verdict v;
    const bool failed = st != DT_OK || res->state == DT_REPLICA_FAILED;
    dt_dist_agree(d, failed ? DT_DIST_FAILED : DT_DIST_GO_ON, digest, &v);
    return apply_verdict(d, &v, res, step, err);
}
