/* `detrain cost` (harness/run/cost_report.h). For `fast` and every policy of the config, one
 * warm-up step and one counted step of the experiment's model run on the configured backend
 * with the cost model's tally on (nets/cost.h); the counts depend only on shapes and the
 * policy, so one step says it. Hashing is a row of its own: the tree digest is the op
 * tensor_digests, counted with the rest; SHA-256 runs on the host after copying the
 * weights back, at the throughput the first light measured (DT_COST_HOST_SHA_BPS). */
#include "harness/run/cost_report.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fileio.h"
#include "core/util.h"
#include "harness/record/hash.h"
#include "harness/run/batches.h"
#include "harness/setup/model.h"
#include "nets/cost.h"
#include "nets/step.h"

/* Host SHA-256 of weights on the device, copy included: 1037.5 MB/s, the first light's
 * hash median on the MLP (results/nvidia-h100-80gb-hbm3/bench/detrain-cuda-mlp.txt). */
#define DT_COST_HOST_SHA_BPS 1.0375e9

/* A bench CSV's time for (policy, what): policy_ms of the row naming both; for the
 * baseline (`fast`, or the config's first policy when the bench ran with --baseline first,
 * whose rows then name only the others) the base_ms of any row naming `what`. -1 when
 * absent. */
static double measured_ms(const char *csv, const char *policy, const char *what, bool base)
{
    if (!csv) return -1;
    double base_ms = -1;
    for (const char *line = csv; *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : "") {
        char pol[96], w[96];
        double b, val;
        if (sscanf(line, "%*[^,],%95[^,],%95[^,],%lf,%lf", pol, w, &b, &val) != 4) continue;
        if (strcmp(w, what) != 0) continue;
        if (strcmp(pol, policy) == 0) return val;
        if (base_ms < 0) base_ms = b;
    }
    return base ? base_ms : -1;
}

struct cost_row {
    const char *config, *policy, *what;
    const struct dt_op_cost *c;
    double pred_s, graph_s, meas_ms;
};

static void print_row(struct dt_strbuf *csv, const struct cost_row *r)
{
    const struct dt_op_cost *c = r->c;
    printf("  %-22s %6.0f %8.0f %5.0f %9.3f %10.3f %9.4f %9.4f", r->what, c->calls, c->launches,
           c->waits, c->bytes / 1e6,
           (c->flops + c->ordered_flops + c->lib_flops + c->int_ops) / 1e6, 1e3 * r->pred_s,
           1e3 * r->graph_s);
    if (r->meas_ms >= 0) printf(" %9.4f %6.2f", r->meas_ms, 1e3 * r->pred_s / r->meas_ms);
    printf("\n");
    if (!csv) return;
    dt_strbuf_printf(csv, "%s,%s,%s,%.0f,%.0f,%.0f,%.0f,%.0f,%.0f,%.0f,%.6f,%.6f,", r->config,
                     r->policy, r->what, c->calls, c->launches, c->waits, c->bytes,
                     c->flops + c->ordered_flops, c->lib_flops, c->int_ops, 1e3 * r->pred_s,
                     1e3 * r->graph_s);
    if (r->meas_ms >= 0) dt_strbuf_printf(csv, "%.6f", r->meas_ms);
    dt_strbuf_printf(csv, "\n");
}

/* What a device backend counted in the step (dt_backend_launch_counts, dt_backend_host_waits)
 * beside what the model predicted for it: the check that the model follows the code. */
struct counted {
    struct dt_launch_counts launched;
    int64_t waits;
    struct dt_op_cost model; /* the tally's ops of the step (hashing apart) */
};

static void counted_delta(struct counted *c, const struct dt_backend *be, bool end)
{
    const struct dt_launch_counts n = dt_backend_launch_counts(be);
    const int64_t w = dt_backend_host_waits(be);
    if (!end) {
        c->launched = n;
        c->waits = w;
        return;
    }
    c->launched = (struct dt_launch_counts){.kernels = n.kernels - c->launched.kernels,
                                            .lib_calls = n.lib_calls - c->launched.lib_calls,
                                            .memsets = n.memsets - c->launched.memsets,
                                            .copies = n.copies - c->launched.copies,
                                            .xp_int8 = n.xp_int8 - c->launched.xp_int8,
                                            .xp_simple = n.xp_simple - c->launched.xp_simple};
    c->waits = w - c->waits;
}

/* Count one step (and its hashing) of `pol` into t; *cnt: the device's counts of the step. */
static enum dt_status count_step(struct dt_model *m, const struct dt_experiment *exp,
                                 struct dt_batch_stream *bs, int64_t *s, struct dt_step *step,
                                 const struct dt_policy *pol, struct dt_cost_tally *t,
                                 double *step_downloads, float *staging,
                                 uint8_t (*td)[DT_DIGEST_BYTES], struct counted *cnt)
{
    const struct dt_sgd_options sgd = dt_experiment_sgd_options(exp);
    enum dt_status st = DT_OK;
    for (int k = 0; k < 2 && st == DT_OK; k++) { /* a warm-up step, then the counted one */
        const struct dt_batch batch = dt_batch_stream_at(bs, (*s)++);
        float loss;
        if (k == 1) {
            dt_backend_cost_enable(m->be, t);
            if (!t->recorder) {
                dt_backend_cost_enable(m->be, NULL);
                return dt_error_set(&m->err, DT_ERR_UNSUPPORTED,
                                    "detrain cost needs a build with the CUDA toolkit (no GPU): "
                                    "it records the CUDA backend's own launches");
            }
        }
        counted_delta(cnt, m->be, false);
        st = dt_step_train(step, m, NULL, &batch, exp->train.batch, exp->train.shards, &sgd, pol,
                           &loss);
        counted_delta(cnt, m->be, true);
        memset(&cnt->model, 0, sizeof cnt->model);
        for (int o = 0; o < DT_OP_COUNT; o++) dt_cost_accumulate(&cnt->model, &t->op[o]);
        cnt->model.launches += t->gathers; /* the batch's gather from a resident set */
        uint8_t md[DT_DIGEST_BYTES];
        *step_downloads = t->downloads;
        if (st == DT_OK && k == 1) /* the hash's ops into their own op rows */
            dt_hash_model(md, td, m, staging);
        dt_backend_cost_enable(m->be, NULL);
    }
    return st;
}

static void report_policy(struct dt_strbuf *csv, const struct dt_experiment *exp,
                          const struct dt_model *m, const char *meas, const char *policy, bool base,
                          const struct dt_cost_tally *t, double step_downloads)
{
    printf("\n%s\n", policy);
    printf("  %-22s %6s %8s %5s %9s %10s %9s %9s", "op", "calls", "launches", "waits", "MB",
           "MFLOP", "pred_ms", "graph_ms");
    if (meas) printf(" %9s %6s", "meas_ms", "pred/m");
    printf("\n");
    struct dt_op_cost step = {0}, hash = {0};
    double step_s = 0, graph_s = 0, hash_s = 0;
    for (int o = 0; o < DT_OP_COUNT; o++) {
        const struct dt_op_cost *c = &t->op[o];
        if (c->calls == 0) continue;
        if (o == DT_OP_TENSOR_DIGESTS) {
            dt_cost_accumulate(&hash, c);
            hash_s += t->pred_s[o];
            continue;
        }
        dt_cost_accumulate(&step, c);
        step_s += t->pred_s[o];
        graph_s += t->graph_s[o];
        const struct cost_row r = {exp->name,
                                   policy,
                                   dt_op_name((enum dt_op)o),
                                   c,
                                   t->pred_s[o],
                                   t->graph_s[o],
                                   measured_ms(meas, policy, dt_op_name((enum dt_op)o), base)};
        print_row(csv, &r);
    }
    /* the step: its ops, its blocking copies back outside them, and the step's end (one
     * wait: the final synchronisation); a graph replays it with one launch and that one
     * wait (a copy back inside the step cannot be captured: it would move to the end) */
    step.waits += 1 + step_downloads;
    step_s += (1 + step_downloads) * t->dev->wait_s;
    graph_s += t->dev->launch_s + t->dev->wait_s;
    const struct cost_row r = {
        exp->name, policy, "step", &step, step_s, graph_s, measured_ms(meas, policy, "step", base)};
    print_row(csv, &r);
    int64_t params = 0;
    for (int i = 0; i < m->n_params; i++) params += m->params[i].n;
    if (!m->tree_digest) { /* host SHA-256 of the weights copied back */
        hash.bytes = 4.0 * (double)params;
        hash.waits = 1;
        hash_s = hash.bytes / DT_COST_HOST_SHA_BPS;
    } else { /* the digests copied back: one wait (none when pipelined: hash.async) */
        hash.waits += t->downloads - step_downloads;
        hash_s += (t->downloads - step_downloads) * t->dev->wait_s;
    }
    const struct cost_row h = {exp->name, policy, m->tree_digest ? "hash (tree)" : "hash (sha256)",
                               &hash,     hash_s, hash_s,
                               -1};
    print_row(csv, &h);
    printf("  hashing share %.1f%% of the step (streamed), %.1f%% (graph)\n",
           100.0 * hash_s / (hash_s + step_s), 100.0 * hash_s / (hash_s + graph_s));
    /* hash.async: on, tree digest: the training stream pays only the snapshot (one copy
     * kernel; nets/cuda/backend_cuda.c, snapshot); the digests' kernels and copy back run on
     * the copy stream */
    if (m->tree_digest) {
        int64_t counts[256];
        const int n = m->n_tensors < 256 ? m->n_tensors : 256;
        for (int i = 0; i < n; i++) counts[i] = m->params[i].n;
        struct dt_op_cost snap = {0};
        dt_cost_snapshot(&snap, t, counts, n);
        const double pipe_s = dt_cost_predict_s(&snap, t->dev, false);
        const double pipe_g = dt_cost_predict_s(&snap, t->dev, true);
        printf("  pipelined (hash.async: on): the training stream pays the snapshot, %.0f "
               "launch(es), %.4f ms: %.1f%% of the step (streamed), %.1f%% (graph)\n",
               snap.launches, 1e3 * pipe_s, 100.0 * pipe_s / (pipe_s + step_s),
               100.0 * pipe_g / (pipe_g + graph_s));
        /* the copy stream hashes one snapshot at a time and the pipeline holds one step
         * outstanding: digests slower than a step hold the training thread back */
        if (hash_s > graph_s)
            printf("  but the digests take %.4f ms on the copy stream, longer than a %s step "
                   "(%.4f ms): pipelined, the steps would wait for them\n",
                   1e3 * hash_s, hash_s > step_s ? "streamed" : "graph-replayed",
                   1e3 * (hash_s > step_s ? step_s : graph_s));
    }
}

/* On a device backend: what it launched and waited in the counted step beside the model's
 * prediction -- launches (kernels, library calls, memsets, device copies) and library calls
 * must agree exactly; waits: the ops', the step's copies back and its end. Nothing on the
 * CPU, which launches nothing. */
static void report_counted(const struct counted *c, double step_downloads)
{
    const struct dt_launch_counts *n = &c->launched;
    const int64_t launches = n->kernels + n->lib_calls + n->memsets + n->copies;
    if (launches == 0 && c->waits == 0) return;
    const double waits = c->model.waits + step_downloads + 1;
    const bool agree = (double)launches == c->model.launches &&
                       (double)n->lib_calls == c->model.lib_calls && (double)c->waits == waits;
    printf("  counted on this device: %" PRId64 " launches (%" PRId64 " kernels, %" PRId64
           " library calls, %" PRId64 " memsets, %" PRId64 " copies), %" PRId64
           " waits; the model: %.0f launches (%.0f library calls), %.0f waits: %s\n",
           launches, n->kernels, n->lib_calls, n->memsets, n->copies, c->waits, c->model.launches,
           c->model.lib_calls, waits,
           agree ? "agree" : "DIFFER (the cost model no longer follows the code)");
}

enum dt_status dt_cost_report(const struct dt_experiment *exp, const struct dt_cost_options *opt,
                              struct dt_error *err)
{
    const struct dt_cost_device *dev = opt->device ? opt->device : &dt_cost_h200;
    char *meas = NULL;
    size_t meas_len = 0;
    if (opt->measured_csv)
        DT_FORWARD_IF_ERROR(dt_read_regular_file(&meas, &meas_len, opt->measured_csv,
                                                 "the measured bench CSV", (size_t)1 << 26, err));
    struct dt_dataset ds;
    memset(&ds, 0, sizeof ds);
    enum dt_status st = dt_experiment_load_dataset(&ds, exp, err);
    struct dt_backend *be = NULL;
    if (st == DT_OK) st = dt_experiment_open_backend(&be, exp, 0, err);
    struct dt_model *m = NULL;
    if (st == DT_OK) st = dt_experiment_build_model(&m, exp, be, ds.train.n, err);
    if (st != DT_OK) {
        dt_backend_destroy(be);
        dt_dataset_free(&ds);
        free(meas);
        return st;
    }
    struct dt_resident *train_set = dt_batch_resident(be, &ds.train);
    struct dt_batch_stream bs;
    dt_batch_stream_init(&bs, &ds.train, train_set, exp->train.batch, exp->train.seed, 0);
    int64_t max_param = 0, s = 0;
    for (int i = 0; i < m->n_tensors; i++)
        max_param = m->params[i].n > max_param ? m->params[i].n : max_param;
    float *staging = dt_xmalloc((size_t)max_param * sizeof(float));
    uint8_t(*td)[DT_DIGEST_BYTES] = dt_xcalloc((size_t)m->n_tensors, DT_DIGEST_BYTES);
    struct dt_step step;
    memset(&step, 0, sizeof step);
    dt_model_init(m, exp->train.seed, 0);
    dt_backend_defer_checks(be, true); /* as a training step in one process (train.c) */

    printf("cost model: %s (model %s, batch %" PRId64 ") on %s, per training step\n", exp->name,
           m->ops->kind, exp->train.batch, dev->name);
    printf("  recorded from the CUDA backend's own launches for the ops the step calls "
           "(nets/cost_cuda.c);\n  pred_ms: kernels "
           "launched one by one,\n  graph_ms: the step replayed from a captured graph; MB "
           "read + written in device memory%s\n",
           meas ? ";\n  meas_ms: the bench CSV's median" : "");
    struct dt_strbuf csvb = {0}, *csv = opt->csv_path ? &csvb : NULL;
    if (csv) dt_strbuf_printf(csv, "%s\n", DT_COST_CSV_HEADER);
    struct dt_policy fast;
    dt_policy_from_level(&fast, DT_LEVEL_FAST);
    /* fast first (bench's baseline), unless the measured bench ran against the config's
     * first policy (--baseline first: the CSV then names no fast) */
    const bool first_base = meas && !strstr(meas, ",fast,") && !strstr(meas, ",fast+");
    for (int p = first_base ? 0 : -1; p < exp->n_policies && st == DT_OK; p++) {
        const struct dt_policy *pol = p < 0 ? &fast : &exp->policies[p];
        if (p >= 0 && !first_base && dt_policy_equal_controls(pol, &fast)) continue;
        struct dt_cost_tally *t = dt_xcalloc(1, sizeof *t);
        t->model = &dt_cuda_cost_model;
        t->dev = dev;
        double step_downloads = 0;
        struct counted cnt;
        st = count_step(m, exp, &bs, &s, &step, pol, t, &step_downloads, staging, td, &cnt);
        if (st == DT_OK) {
            report_policy(csv, exp, m, meas, p < 0 ? "fast" : pol->name,
                          p < 0 || (first_base && p == 0), t, step_downloads);
            report_counted(&cnt, step_downloads);
        }
        free(t);
    }
    dt_backend_defer_checks(be, false);
    if (st != DT_OK && m->err.status != DT_OK && err && err->status == DT_OK) *err = m->err;
    if (csv) {
        if (st == DT_OK) st = dt_write_file_atomic(opt->csv_path, csv->data, csv->len, err);
        dt_strbuf_free(csv);
    }
    dt_step_free(&step);
    dt_batch_stream_free(&bs);
    free(staging);
    free(td);
    free(meas);
    dt_model_destroy(m);
    dt_backend_resident_free(be, train_set);
    dt_backend_destroy(be);
    dt_dataset_free(&ds);
    return st;
}
