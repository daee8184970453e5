/* Benchmark of the training step and of per-step hashing. Each measured step is timed in
 * two parts -- the update (forward, backward, SGD) and the hash of every parameter -- so
 * the ratio comes from the same steps on the same machine state. Medians, not means. */
#include "harness/bench.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/util.h"
#include "harness/train.h"
#include "nets/seed.h"

enum dt_status dt_bench_run(const struct dt_experiment *exp, const struct dt_bench_options *opt,
                            struct dt_error *err)
{
    struct dt_dataset ds;
    memset(&ds, 0, sizeof ds);
    DT_FORWARD_IF_ERROR(dt_dataset_load_fashion_mnist(&ds, exp->dataset.path,
                                                      exp->dataset.train_limit,
                                                      exp->dataset.test_limit, err));
    struct dt_backend *be = NULL;
    struct dt_backend_options bopt = {exp->backend.device == DT_DEVICE_CUDA ? DT_BACKEND_CUDA
                                                                            : DT_BACKEND_CPU,
                                      exp->backend.threads, 0};
    enum dt_status st = dt_backend_create(&be, &bopt, err);
    struct dt_model *m = NULL;
    if (st == DT_OK) st = dt_train_build_model(&m, exp, be, err);
    if (st != DT_OK) {
        dt_backend_destroy(be);
        dt_dataset_free(&ds);
        return st;
    }
    const struct dt_policy *pol = &exp->policies[0];
    const int64_t B = exp->train.batch, total = opt->warmup + opt->steps;
    float *x = dt_xmalloc((size_t)(B * ds.train.dim) * sizeof(float));
    uint8_t *y = dt_xmalloc((size_t)B);
    int64_t *perm = dt_xmalloc((size_t)ds.train.n * sizeof(int64_t));
    int64_t perm_epoch = -1, max_param = 0;
    for (int i = 0; i < m->n_params; i++)
        max_param = m->params[i].n > max_param ? m->params[i].n : max_param;
    float *staging = dt_xmalloc((size_t)max_param * sizeof(float));
    uint8_t(*td)[DT_DIGEST_BYTES] = dt_xcalloc((size_t)m->n_params, DT_DIGEST_BYTES);
    double *step_ms = dt_xcalloc((size_t)opt->steps, sizeof(double));
    double *hash_ms = dt_xcalloc((size_t)opt->steps, sizeof(double));
    const struct dt_sgd_options sgd = {(float)exp->train.optimizer.lr,
                                       (float)exp->train.optimizer.momentum,
                                       (float)exp->train.optimizer.weight_decay};
    int64_t params = 0;
    for (int i = 0; i < m->n_params; i++) params += m->params[i].n;

    dt_model_init(m, exp->train.seed, 0);
    for (int64_t s = 0; s < total && st == DT_OK; s++) {
        dt_train_fill_batch(x, y, &ds.train, s, B, exp->train.seed, 0, perm, &perm_epoch);
        float loss;
        double t0 = dt_now_s();
        st = dt_model_train_step(m, x, y, B, &sgd, pol, &loss);
        double t1 = dt_now_s();
        uint8_t md[DT_DIGEST_BYTES];
        dt_train_hash_model(md, td, m, staging);
        double t2 = dt_now_s();
        if (s >= opt->warmup) {
            step_ms[s - opt->warmup] = 1e3 * (t1 - t0);
            hash_ms[s - opt->warmup] = 1e3 * (t2 - t1);
        }
    }
    if (st == DT_OK) {
        double sm = dt_median(step_ms, opt->steps), hm = dt_median(hash_ms, opt->steps);
        double share = hm / (sm + hm);
        printf("bench: %s, model %s (%" PRId64 " parameters), batch %" PRId64
               ", policy %s, backend %s, %d threads\n",
               exp->name, m->ops->kind, params, B, pol->name, dt_backend_name(be),
               dt_backend_threads(be));
        printf("  measured steps        %" PRId64 " (after %" PRId64 " warm-up)\n", opt->steps,
               opt->warmup);
        printf("  step (update) median  %.3f ms  -> %.1f steps/s without hashing\n", sm,
               1e3 / sm);
        printf("  hash median           %.3f ms  (%.1f MB/s of weights)\n", hm,
               (double)params * 4.0 / 1e6 / (hm / 1e3));
        printf("  with hashing          %.1f steps/s\n", 1e3 / (sm + hm));
        printf("  hashing share         %.2f%% of step time (target <= 5%%)\n", 100.0 * share);
        if (opt->csv_path) {
            FILE *f = fopen(opt->csv_path, "a");
            if (!f) {
                st = dt_error_set(err, DT_ERR_IO, "%s: cannot open for appending", opt->csv_path);
            } else {
                fprintf(f, "%s,%s,%" PRId64 ",%d,%.4f,%.4f,%.4f\n", exp->name, pol->name, B,
                        dt_backend_threads(be), sm, hm, share);
                fclose(f);
            }
        }
    }
    free(x);
    free(y);
    free(perm);
    free(staging);
    free(td);
    free(step_ms);
    free(hash_ms);
    dt_model_destroy(m);
    dt_backend_destroy(be);
    dt_dataset_free(&ds);
    return st;
}
