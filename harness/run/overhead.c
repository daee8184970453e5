/* The overhead protocol of `detrain run` (harness/run/overhead.h). */
#include "harness/run/overhead.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "harness/record/csv.h"
#include "harness/record/layout.h"
#include "harness/record/outdir.h"
#include "harness/run/bench.h"
#include "harness/run/dist.h"
#include "harness/run/stop.h"
#include "harness/setup/model.h"

/* The overhead protocol: every policy whose controls differ from the fast level's,
 * alternated with fast step by step on one model (dt_bench_alternate), warm-up pairs
 * first; the raw pairs go to <out>/overhead.csv and the report turns them into a median
 * ratio with a bootstrap interval. */
enum dt_status dt_overhead_measure(const struct dt_experiment *exp, const char *out_dir, bool quiet,
                                   const struct dt_dist *dist, struct dt_backend *be,
                                   const struct dt_split *train,
                                   const struct dt_resident *train_set, struct dt_error *err)
{
    const int64_t n = exp->report.overhead_samples, warmup = exp->report.overhead_warmup;
    struct dt_policy fast;
    dt_policy_from_level(&fast, DT_LEVEL_FAST);
    int todo = 0;
    for (int p = 0; p < exp->n_policies; p++)
        todo += !dt_policy_equal_controls(&exp->policies[p], &fast);
    char path[1200];
    /* several ranks step in lockstep (each step is collective); rank 0 writes */
    if (dt_dist_rank(dist) == 0) snprintf(path, sizeof path, "%s/overhead.csv", out_dir);
    else snprintf(path, sizeof path, "/dev/null");
    FILE *f = dt_dist_rank(dist) == 0 ? dt_out_fopen(path, false, err) : fopen(path, "w");
    if (!f) return dt_error_set(err, DT_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
    fprintf(f, "%s\n", DT_OVERHEAD_HEADER);
    if (n == 0 || todo == 0) { /* nothing to measure: the header alone says so */
        if (fclose(f) != 0)
            return dt_error_set(err, DT_ERR_IO, "%s: write failed: %s", path, strerror(errno));
        return DT_OK;
    }
    enum dt_status hst = dt_csv_flush(f, path, err); /* killed from here on: a header-only file */
    if (hst != DT_OK) {
        fclose(f);
        return hst;
    }
    if (!quiet)
        fprintf(stderr,
                "detrain: overhead: %d polic%s vs fast, %" PRId64
                " alternated pairs each after %" PRId64 " warm-up pairs\n",
                todo, todo == 1 ? "y" : "ies", n, warmup);
    struct dt_model *m = NULL;
    enum dt_status st = dt_experiment_build_model(&m, exp, be, train->n, err);
    const int64_t B = exp->train.batch;
    double *ta = dt_xcalloc((size_t)n, sizeof(double)), *tb = dt_xcalloc((size_t)n, sizeof(double));
    struct dt_bench_stream bs;
    memset(&bs, 0, sizeof bs);
    bs.dist = dist;
    bs.slow_base_op = -1;
    for (int k = 0; k < 2; k++) dt_step_use_graphs(&bs.step[k], exp->backend.graphs);
    dt_batch_stream_init(&bs.batches, train, train_set, B, exp->train.seed, 0);
    if (st == DT_OK) dt_model_init(m, exp->train.seed, 0);
    for (int p = 0; p < exp->n_policies && st == DT_OK && !dt_stop_requested; p++) {
        const struct dt_policy *pol = &exp->policies[p];
        if (dt_policy_equal_controls(pol, &fast)) continue;
        st = dt_bench_alternate(m, exp, &bs, &fast, pol, warmup, n, ta, tb, NULL, NULL);
        if (st == DT_OK && m->err.status == DT_OK && !dt_stop_requested) /* complete */
            for (int64_t i = 0; i < n; i++)
                fprintf(f, "%s,%" PRId64 ",%s,%.6f,%.6f\n", pol->name, i,
                        (warmup + i) % 2 == 0 ? "fast_first" : "policy_first", 1e3 * ta[i],
                        1e3 * tb[i]);
        if (st != DT_OK && m->err.status != DT_OK && err) *err = m->err;
        if (st == DT_OK) st = dt_csv_flush(f, path, err);
    }
    if (fclose(f) != 0 && st == DT_OK)
        st = dt_error_set(err, DT_ERR_IO, "%s: write failed: %s", path, strerror(errno));
    dt_batch_stream_free(&bs.batches);
    free(ta);
    free(tb);
    dt_step_free(&bs.step[0]);
    dt_step_free(&bs.step[1]);
    dt_model_destroy(m);
    return st;
}
