/* The training loop: for each policy x replica, for each step: batch -> model step ->
 * hash -> trace; evaluation at eval_every and at the end; per-replica and experiment
 * manifests; then the summary (harness/summary.c). */
#include "harness/train.h"

#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "core/util.h"
#include "harness/manifest.h"
#include "harness/summary.h"
#include "harness/trace.h"
#include "nets/seed.h"

volatile int dt_train_stop_requested;

static void on_stop_signal(int sig) { dt_train_stop_requested = sig; }

void dt_train_install_signal_handlers(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

int64_t dt_train_lfsr_check_every(const struct dt_experiment *exp)
{
    if (exp->model.lfsr_check_every > 0) return exp->model.lfsr_check_every;
#ifdef NDEBUG
    return 16;
#else
    return 1;
#endif
}

enum dt_status dt_train_build_model(struct dt_model **m, const struct dt_experiment *exp,
                                    struct dt_backend *be, int64_t n_train,
                                    struct dt_error *err)
{
    switch (exp->model.kind) {
    case DT_MODEL_BNN_MLP: {
        struct dt_bnn_options o = {
            .samples = exp->model.samples,
            .test_samples = exp->model.test_samples,
            .prior_sigma = (float)exp->model.prior_sigma,
            .rho_init = (float)exp->model.rho_init,
            .kl_weight = n_train > 0 ? 1.0f / (float)n_train : 0.0f,
            .lanes = exp->model.lanes,
            .stored_lfsr = exp->model.stored_generator == DT_EPS_GEN_LFSR,
            .lfsr_check_every = dt_train_lfsr_check_every(exp),
        };
        return dt_bnn_mlp_create(m, be, 784, exp->model.hidden, exp->model.n_hidden, 10,
                                 exp->train.batch, &o, err);
    }
    case DT_MODEL_MLP:
        return dt_mlp_create(m, be, 784, exp->model.hidden, exp->model.n_hidden, 10,
                             exp->train.batch, err);
    case DT_MODEL_LENET:
        return dt_lenet_create(m, be, 28, 28, exp->model.overlap_pool, 10, exp->train.batch,
                               err);
    }
    return dt_error_set(err, DT_ERR_CONFIG, "unknown model kind");
}

struct dt_sgd_options dt_train_sgd_options(const struct dt_experiment *exp)
{
    struct dt_sgd_options o = {(float)exp->train.optimizer.lr,
                               (float)exp->train.optimizer.momentum,
                               (float)exp->train.optimizer.weight_decay};
    return o;
}

void dt_train_fill_batch(float *x, uint8_t *y, const struct dt_split *split, int64_t s,
                         int64_t B, uint64_t seed, uint64_t order_replica, int64_t *perm,
                         int64_t *perm_epoch)
{
    for (int64_t i = 0; i < B; i++) {
        int64_t pos = s * B + i; /* position in the endless stream of examples */
        int64_t epoch = pos / split->n;
        if (epoch != *perm_epoch) {
            uint64_t key = dt_stream_key(seed, order_replica, DT_PURPOSE_DATA_ORDER,
                                         (uint64_t)epoch, 0);
            dt_shuffle_permutation(perm, split->n, key);
            *perm_epoch = epoch;
        }
        int64_t idx = perm[pos % split->n];
        memcpy(x + i * split->dim, split->x + idx * split->dim, (size_t)split->dim * sizeof(float));
        y[i] = split->y[idx];
    }
}

void dt_train_hash_model(uint8_t model_digest[DT_DIGEST_BYTES],
                         uint8_t (*tensor_digests)[DT_DIGEST_BYTES], struct dt_model *m,
                         float *staging)
{
    const char *names[256];
    DT_ASSERT(m->n_params <= 256);
    for (int i = 0; i < m->n_params; i++) {
        const struct dt_param *p = &m->params[i];
        const float *host = dt_backend_host_view(m->be, p->w);
        if (!host) {
            dt_backend_download(m->be, staging, p->w, (size_t)p->n * sizeof(float));
            host = staging;
        }
        dt_sha256_f32(tensor_digests[i], host, p->n);
        names[i] = p->name;
    }
    dt_model_digest(model_digest, names, (const uint8_t(*)[DT_DIGEST_BYTES])tensor_digests,
                    m->n_params);
}

/* Everything one replica needs that the experiment holds. */
struct run_ctx {
    const struct dt_experiment *exp;
    const struct dt_run_options *opt;
    const struct dt_dataset *ds;
    struct dt_backend *be;
};

static enum dt_status write_hashed_step(struct dt_trace_writer *tw, struct dt_model *m,
                                        float *staging, int64_t step, float loss,
                                        struct dt_replica_result *res, bool per_tensor,
                                        struct dt_error *err)
{
    uint8_t md[DT_DIGEST_BYTES];
    uint8_t (*td)[DT_DIGEST_BYTES] = dt_xcalloc((size_t)m->n_params, DT_DIGEST_BYTES);
    dt_train_hash_model(md, td, m, staging);
    char hex[DT_DIGEST_HEX];
    enum dt_status st = DT_OK;
    if (per_tensor) {
        for (int i = 0; i < m->n_params && st == DT_OK; i++) {
            dt_digest_hex(hex, td[i]);
            st = dt_trace_write_tensor(tw, step, m->params[i].name, hex, err);
        }
        if (st == DT_OK) st = dt_trace_flush(tw, err);
    }
    dt_digest_hex(hex, md);
    if (st == DT_OK) st = dt_trace_write_row(tw, step, loss, hex, err);
    memcpy(res->final_digest, hex, DT_DIGEST_HEX);
    free(td);
    return st;
}

static enum dt_status write_metrics_row(FILE *f, const char *path, int64_t step,
                                        const struct dt_eval *e, struct dt_error *err)
{
    fprintf(f, "%" PRId64 ",%.9g,%.6f,%.6f\n", step, e->loss, e->accuracy, e->ece);
    if (fflush(f) != 0 || ferror(f))
        return dt_error_set(err, DT_ERR_IO, "%s: write failed", path);
    return DT_OK;
}

static void progress(const struct run_ctx *c, const struct dt_policy *pol, int r, int64_t s,
                     float loss, double ms)
{
    if (c->opt->quiet) return;
    fprintf(stderr, "  [%s] replica %d/%d  step %" PRId64 "/%" PRId64 "  loss %.4f  %.2f ms/step\n",
            pol->name, r + 1, c->exp->replicas, s, c->exp->train.steps, (double)loss, ms);
}

static void write_replica_manifest(const struct run_ctx *c, const struct dt_policy *pol, int r,
                                   const struct dt_replica_result *res, const char *start)
{
    static const char *const state_names[] = {"completed", "failed", "interrupted"};
    struct dt_strbuf sb = {0};
    char buf[256], end[32];
    dt_utc_iso8601(end, sizeof end);
    dt_strbuf_printf(&sb, "{\"policy\": ");
    dt_strbuf_json_string(&sb, pol->name);
    dt_policy_describe(buf, sizeof buf, pol);
    dt_strbuf_printf(&sb, ", \"controls\": ");
    dt_strbuf_json_string(&sb, buf);
    dt_strbuf_printf(&sb, ", \"replica\": %d, \"backend\": \"%s\", \"threads\": %d", r,
                     dt_backend_name(c->be), dt_backend_threads(c->be));
    dt_strbuf_printf(&sb, ", \"stream_replica\": {\"init\": %" PRIu64 ", \"data_order\": %" PRIu64
                     ", \"epsilon\": %" PRIu64 "}",
                     dt_stream_replica(c->exp->vary, DT_VARY_INIT, (uint64_t)r),
                     dt_stream_replica(c->exp->vary, DT_VARY_DATA_ORDER, (uint64_t)r),
                     dt_stream_replica(c->exp->vary, DT_VARY_EPSILON, (uint64_t)r));
    dt_strbuf_printf(&sb, ", \"state\": \"%s\", \"reason\": ", state_names[res->state]);
    dt_strbuf_json_string(&sb, res->reason);
    dt_strbuf_printf(&sb, ", \"steps_completed\": %" PRId64 ", \"final_model_digest\": \"%s\"",
                     res->steps_done, res->final_digest);
    if (isfinite(res->test_acc))
        dt_strbuf_printf(&sb, ", \"test_loss\": %.9g, \"test_accuracy\": %.6f, \"test_ece\": %.6f",
                         res->test_loss, res->test_acc, res->test_ece);
    if (c->exp->model.kind == DT_MODEL_BNN_MLP)
        dt_strbuf_printf(&sb,
                         ", \"epsilon\": {\"member\": %" PRIu64 ", \"philox_layout\": %d, "
                         "\"lanes\": %" PRId64 ", \"lfsr_check_every\": %" PRId64
                         ", \"eps_bytes_held\": %" PRId64 ", \"eps_workspace_bytes\": %" PRId64
                         ", \"rng_state_bytes\": %" PRId64 "}",
                         dt_stream_replica(c->exp->vary, DT_VARY_EPSILON, (uint64_t)r),
                         DT_PHILOX_LAYOUT_VERSION, c->exp->model.lanes,
                         dt_train_lfsr_check_every(c->exp), res->mem.eps_held,
                         res->mem.eps_workspace, res->mem.rng_state);
    dt_strbuf_printf(&sb, ", \"step_ms_median\": %.6g, \"hash_ms_median\": %.6g",
                     isfinite(res->step_ms_median) ? res->step_ms_median : -1.0,
                     isfinite(res->hash_ms_median) ? res->hash_ms_median : -1.0);
    dt_strbuf_printf(&sb, ", \"start_time\": \"%s\", \"end_time\": \"%s\"}", start, end);
    char path[1300];
    snprintf(path, sizeof path, "%s/run.json", res->dir);
    struct dt_error e;
    if (dt_manifest_write(path, &sb, &e) != DT_OK) fprintf(stderr, "detrain: %s\n", e.msg);
    dt_strbuf_free(&sb);
}

/* Train one replica under one policy. Returns an error only for faults of the tool
 * (I/O); a replica's own numerical failure is recorded in res and returns DT_OK. */
static enum dt_status run_replica(const struct run_ctx *c, const struct dt_policy *pol, int r,
                                  struct dt_replica_result *res, struct dt_error *err)
{
    const struct dt_experiment *exp = c->exp;
    memset(res, 0, sizeof *res);
    res->test_acc = res->test_loss = res->test_ece = NAN;
    res->state = DT_REPLICA_COMPLETED;
    char start[32];
    dt_utc_iso8601(start, sizeof start);
    snprintf(res->dir, sizeof res->dir, "%s/%s/replica-%d", c->opt->out_dir, pol->name, r);
    DT_FORWARD_IF_ERROR(dt_mkdir_p(res->dir, err));

    struct dt_model *m = NULL;
    DT_FORWARD_IF_ERROR(dt_train_build_model(&m, exp, c->be, c->ds->train.n, err));
    struct dt_trace_writer tw;
    enum dt_status st = dt_trace_open(&tw, res->dir, exp->hash.per_tensor, err);
    char mpath[1300];
    snprintf(mpath, sizeof mpath, "%s/metrics.csv", res->dir);
    FILE *metrics = st == DT_OK ? fopen(mpath, "w") : NULL;
    if (st == DT_OK && !metrics) st = dt_error_set(err, DT_ERR_IO, "%s: cannot create", mpath);
    if (metrics) fprintf(metrics, "step,test_loss,test_acc,test_ece\n");

    const struct dt_split *train = &c->ds->train, *test = &c->ds->test;
    const int64_t B = exp->train.batch, steps = exp->train.steps;
    const uint64_t seed = exp->train.seed;
    const uint64_t order_rep = dt_stream_replica(exp->vary, DT_VARY_DATA_ORDER, (uint64_t)r);
    float *x = dt_xmalloc((size_t)(B * train->dim) * sizeof(float));
    uint8_t *y = dt_xmalloc((size_t)B);
    int64_t *perm = dt_xmalloc((size_t)train->n * sizeof(int64_t));
    int64_t perm_epoch = -1;
    int64_t max_param = 0;
    for (int i = 0; i < m->n_params; i++)
        max_param = m->params[i].n > max_param ? m->params[i].n : max_param;
    float *staging = dt_xmalloc((size_t)max_param * sizeof(float));
    double *step_ms = dt_xcalloc((size_t)steps, sizeof(double));
    double *hash_ms = dt_xcalloc((size_t)steps + 1, sizeof(double));
    int64_t n_hash = 0;
    const struct dt_sgd_options sgd = dt_train_sgd_options(exp);
    const int64_t report_every = steps >= 10 ? steps / 10 : 1;

    if (st == DT_OK) {
        dt_model_init(m, seed, dt_stream_replica(exp->vary, DT_VARY_INIT, (uint64_t)r));
        m->member = (uint32_t)dt_stream_replica(exp->vary, DT_VARY_EPSILON, (uint64_t)r);
        dt_model_memory(m, pol, &res->mem);
        st = write_hashed_step(&tw, m, staging, 0, NAN, res, exp->hash.per_tensor, err);
    }
    for (int64_t s = 1; st == DT_OK && s <= steps; s++) {
        if (dt_train_stop_requested) {
            res->state = DT_REPLICA_INTERRUPTED;
            snprintf(res->reason, sizeof res->reason,
                     "interrupted by signal %d after step %" PRId64, (int)dt_train_stop_requested,
                     s - 1);
            break;
        }
        dt_train_fill_batch(x, y, train, s - 1, B, seed, order_rep, perm, &perm_epoch);
        float loss = NAN;
        double t0 = dt_now_s();
        st = dt_model_train_step(m, x, y, B, &sgd, pol, &loss);
        step_ms[s - 1] = 1e3 * (dt_now_s() - t0);
        if (st != DT_OK) {
            if (m->err.status != DT_OK && err) *err = m->err;
            break;
        }
        res->steps_done = s;
        bool hashed = (s % exp->hash.every == 0) || s == steps || !isfinite(loss);
        if (hashed) {
            double t1 = dt_now_s();
            st = write_hashed_step(&tw, m, staging, s, loss, res, exp->hash.per_tensor, err);
            hash_ms[n_hash++] = 1e3 * (dt_now_s() - t1);
        }
        if (st == DT_OK && !isfinite(loss)) {
            res->state = DT_REPLICA_FAILED;
            snprintf(res->reason, sizeof res->reason,
                     "training loss is %s at step %" PRId64 "; replica stopped",
                     isnan(loss) ? "NaN" : "infinite", s);
            fprintf(stderr, "detrain: [%s] replica %d: %s\n", pol->name, r, res->reason);
            break;
        }
        if (st == DT_OK && exp->train.eval_every > 0 && s % exp->train.eval_every == 0 &&
            s != steps) {
            struct dt_eval ev;
            st = dt_model_evaluate_full(m, test->x, test->y, test->n, pol, &ev);
            if (st == DT_OK) st = write_metrics_row(metrics, mpath, s, &ev, err);
        }
        if (s % report_every == 0 || s == steps) progress(c, pol, r, s, loss, step_ms[s - 1]);
    }
    if (st == DT_OK && res->state == DT_REPLICA_COMPLETED) {
        struct dt_eval ev;
        st = dt_model_evaluate_full(m, test->x, test->y, test->n, pol, &ev);
        res->test_loss = ev.loss;
        res->test_acc = ev.accuracy;
        res->test_ece = ev.ece;
        if (st == DT_OK) st = write_metrics_row(metrics, mpath, steps, &ev, err);
    }
    if (st != DT_OK) {
        res->state = DT_REPLICA_FAILED;
        snprintf(res->reason, sizeof res->reason, "%s", err ? err->msg : dt_status_str(st));
    }
    res->step_ms_median = dt_median(step_ms, res->steps_done);
    res->hash_ms_median = dt_median(hash_ms, n_hash);
    struct dt_error close_err;
    if (dt_trace_close(&tw, &close_err) != DT_OK && st == DT_OK) {
        st = close_err.status;
        if (err) *err = close_err;
    }
    if (metrics) fclose(metrics);
    write_replica_manifest(c, pol, r, res, start);
    free(x);
    free(y);
    free(perm);
    free(staging);
    free(step_ms);
    free(hash_ms);
    dt_model_destroy(m);
    return st;
}

static void experiment_manifest(struct dt_strbuf *sb, const struct run_ctx *c, const char *start,
                                const char *end, const char *status, const char *message,
                                struct dt_replica_result *results, int n_results)
{
    static const char *const state_names[] = {"completed", "failed", "interrupted"};
    sb->len = 0;
    dt_strbuf_printf(sb, "{\"tool\": \"detrain\", \"command\": ");
    dt_strbuf_json_string(sb, c->opt->command ? c->opt->command : "");
    dt_strbuf_printf(sb, ", \"config_file\": ");
    dt_strbuf_json_string(sb, c->exp->source);
    dt_strbuf_printf(sb, ", \"config\": ");
    char *cfg = NULL;
    size_t cfg_len = 0;
    FILE *mem = open_memstream(&cfg, &cfg_len);
    DT_ASSERT(mem != NULL);
    dt_config_write_json(mem, c->exp);
    fclose(mem);
    dt_strbuf_printf(sb, "%s", cfg);
    free(cfg);
    dt_strbuf_printf(sb, ", \"backend\": {\"name\": \"%s\", \"threads\": %d}, ",
                     dt_backend_name(c->be), dt_backend_threads(c->be));
    dt_manifest_environment_json(sb);
    dt_strbuf_printf(sb, ", \"dataset_dir\": ");
    dt_strbuf_json_string(sb, c->ds->dir);
    dt_strbuf_printf(sb, ", \"controls_note\": ");
    dt_strbuf_json_string(sb, "reduction, atomics and math act on the CPU ops; rng acts on "
                              "bnn_mlp (how epsilon reaches backward); conv_algo is recorded "
                              "but unused on the CPU");
    dt_strbuf_printf(sb, ", \"start_time\": \"%s\", \"end_time\": ", start);
    if (end) dt_strbuf_printf(sb, "\"%s\"", end);
    else dt_strbuf_printf(sb, "null");
    dt_strbuf_printf(sb, ", \"status\": \"%s\", \"message\": ", status);
    dt_strbuf_json_string(sb, message);
    dt_strbuf_printf(sb, ", \"replicas\": [");
    for (int i = 0; i < n_results; i++) {
        dt_strbuf_printf(sb, "%s{\"dir\": ", i ? ", " : "");
        dt_strbuf_json_string(sb, results[i].dir);
        dt_strbuf_printf(sb, ", \"state\": \"%s\"}", state_names[results[i].state]);
    }
    dt_strbuf_printf(sb, "]}");
}

enum dt_status dt_train_experiment(const struct dt_experiment *exp,
                                   const struct dt_run_options *opt, struct dt_error *err)
{
    /* Everything that can be checked is checked before the first step. */
    DT_FORWARD_IF_ERROR(dt_mkdir_p(opt->out_dir, err));
    DT_FORWARD_IF_ERROR(dt_dir_check_writable(opt->out_dir, err));
    struct dt_backend *be = NULL;
    struct dt_backend_options bopt = {exp->backend.device == DT_DEVICE_CUDA ? DT_BACKEND_CUDA
                                                                            : DT_BACKEND_CPU,
                                      exp->backend.threads, 0};
    DT_FORWARD_IF_ERROR(dt_backend_create(&be, &bopt, err));
    struct dt_dataset ds;
    memset(&ds, 0, sizeof ds);
    enum dt_status st = dt_dataset_load_fashion_mnist(&ds, exp->dataset.path,
                                                      exp->dataset.train_limit,
                                                      exp->dataset.test_limit, err);
    if (st != DT_OK) {
        dt_backend_destroy(be);
        return st;
    }
    struct run_ctx c = {exp, opt, &ds, be};
    char start[32], end[32];
    dt_utc_iso8601(start, sizeof start);
    char manifest_path[1200];
    snprintf(manifest_path, sizeof manifest_path, "%s/run.json", opt->out_dir);
    int n_runs = exp->n_policies * exp->replicas;
    struct dt_replica_result *results = dt_xcalloc((size_t)n_runs, sizeof *results);
    struct dt_strbuf sb = {0};
    experiment_manifest(&sb, &c, start, NULL, "running", "", results, 0);
    st = dt_manifest_write(manifest_path, &sb, err);
    if (!opt->quiet && st == DT_OK)
        fprintf(stderr,
                "detrain: %s: %d polic%s x %d replica%s, %" PRId64 " steps of %" PRId64
                " on %s (%d threads); train %" PRId64 ", test %" PRId64 " examples\n"
                "detrain: writing to %s\n",
                exp->name, exp->n_policies, exp->n_policies == 1 ? "y" : "ies", exp->replicas,
                exp->replicas == 1 ? "" : "s", exp->train.steps, exp->train.batch,
                dt_backend_name(be), dt_backend_threads(be), ds.train.n, ds.test.n, opt->out_dir);
    dt_train_install_signal_handlers();

    int done = 0;
    bool any_failed = false;
    for (int p = 0; st == DT_OK && p < exp->n_policies && !dt_train_stop_requested; p++) {
        for (int r = 0; st == DT_OK && r < exp->replicas && !dt_train_stop_requested; r++) {
            st = run_replica(&c, &exp->policies[p], r, &results[done], err);
            any_failed |= results[done].state == DT_REPLICA_FAILED;
            done++;
        }
    }
    bool interrupted = dt_train_stop_requested != 0;
    if (interrupted && st == DT_OK) {
        st = dt_error_set(err, DT_ERR_INTERRUPTED, "interrupted by signal %d; traces kept in %s",
                          (int)dt_train_stop_requested, opt->out_dir);
    }
    if (st == DT_OK || interrupted) {
        struct dt_error serr;
        enum dt_status sst = dt_summary_write(opt->out_dir, exp, results, done, &serr);
        if (sst != DT_OK && st == DT_OK) {
            st = sst;
            if (err) *err = serr;
        }
    }
    if (st == DT_OK && any_failed)
        st = dt_error_set(err, DT_ERR_NUMERIC, "some replicas failed; see their run.json");
    dt_utc_iso8601(end, sizeof end);
    const char *status = st == DT_OK ? "completed" : interrupted ? "interrupted" : "failed";
    experiment_manifest(&sb, &c, start, end, status, st == DT_OK ? "" : err ? err->msg : "",
                        results, done);
    struct dt_error merr;
    if (dt_manifest_write(manifest_path, &sb, &merr) != DT_OK)
        fprintf(stderr, "detrain: %s\n", merr.msg);
    dt_strbuf_free(&sb);
    free(results);
    dt_backend_destroy(be);
    dt_dataset_free(&ds);
    return st;
}
