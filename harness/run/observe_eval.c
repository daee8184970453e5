/* The periodic evaluation, an observer of every step (run_ctx.h): every train.eval_every
 * steps but the last (the final evaluation is the replica's end's), a row of metrics.csv
 * from the test split. */
#include "harness/run/run_ctx.h"

#include "harness/setup/data.h"

enum dt_status dt_observe_eval(struct run_ctx *c, struct replica *rep, struct step_done *done,
                               struct dt_error *err)
{
    const struct dt_experiment *exp = c->exp;
    const int64_t s = done->s;
    if (!rep->writer || exp->train.eval_every <= 0 || s % exp->train.eval_every != 0 ||
        s == exp->train.steps)
        return DT_OK;
    struct dt_eval ev;
    const struct dt_split *test = &c->ds->test;
    enum dt_status st = dt_model_evaluate_full(rep->m, test->x, test->y, test->n, rep->pol, &ev);
    if (st == DT_OK)
        st = dt_replica_metrics_row(rep->io.metrics, rep->io.metrics_path, s, &ev, err);
    (void)dt_backend_take_algo_notes(c->be, NULL, 0); /* evaluation is not a step */
    return st;
}
