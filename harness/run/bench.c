/* Benchmark of the training step and of per-step hashing. Each measured step is timed in
 * two parts -- the update (forward, backward, SGD) and the hash of every parameter -- so
 * the ratio comes from the same steps on the same machine state; then as many steps again
 * with hashing pipelined (harness/run/hashpipe.h), timing what it costs the training thread.
 * A step's time ends when the backend has finished it (dt_backend_step_end: the one wait
 * that also reads the step's deferred checks, as in training), so device backends are
 * timed as honestly as the CPU. Medians, not means. */
#include "harness/run/bench.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fileio.h"
#include "core/util.h"
#include "harness/run/hashpipe.h"
#include "harness/record/metrics.h"
#include "harness/record/hash.h"
#include "harness/run/stop.h"
#include "harness/setup/model.h"
#include "harness/setup/test_hooks.h"
#include "nets/backend.h"
#include "determinism/streams.h"

/* Time one training step of `pol` on m: total and per op (seconds). */
static enum dt_status timed_step(struct dt_step *step, const struct dt_exchange *x,
                                 struct dt_model *m, const struct dt_batch *batch, int64_t B,
                                 int64_t shards, const struct dt_sgd_options *sgd,
                                 const struct dt_policy *pol, double *total,
                                 double ops[DT_OP_COUNT])
{
    float loss;
    dt_backend_profile_reset(m->be);
    double t0 = dt_now_s();
    enum dt_status st =
        dt_step_train(step, m, x, batch, B, shards, sgd, pol, &loss); /* to its end */
    *total = dt_now_s() - t0;
    dt_backend_profile_read(m->be, ops);
    return st;
}

enum dt_status dt_bench_alternate(struct dt_model *m, const struct dt_experiment *exp,
                                  struct dt_bench_stream *bs, const struct dt_policy *base,
                                  const struct dt_policy *pol, int64_t warmup, int64_t n,
                                  double *ta, double *tb, double *oa, double *ob)
{
    const int64_t B = exp->train.batch;
    const struct dt_sgd_options sgd = dt_experiment_sgd_options(exp);
    enum dt_status st = DT_OK;
    dt_backend_defer_checks(m->be, dt_dist_size(bs->dist) == 1); /* as a training step (train.c) */
    bs->waits[0] = bs->waits[1] = 0;
    memset(bs->xp_int8, 0, sizeof bs->xp_int8);
    memset(bs->xp_simple, 0, sizeof bs->xp_simple);
    for (int64_t i = 0; i < warmup + n && st == DT_OK; i++) {
        const bool base_first = i % 2 == 0;
        for (int step = 0; step < 2 && st == DT_OK; step++) {
            /* a stop request (SIGINT, SIGTERM, SIGHUP in `detrain run`) ends the sampling
             * before the next step; every rank agrees, since each step is collective. The
             * caller sees dt_stop_requested and drops the unfinished samples. */
            const int sig = dt_dist_max_status(bs->dist, (int)dt_stop_requested, NULL);
            if (sig) {
                if (!dt_stop_requested) dt_stop_requested = sig;
                dt_backend_defer_checks(m->be, false);
                return DT_OK;
            }
            const int k = base_first ? step : 1 - step; /* 0 = base, 1 = the policy */
            double t, ops[DT_OP_COUNT];
            if (bs->slow_base_op >= 0) /* test hook: one op of the baseline slowed */
                dt_backend_set_slow_op(m->be, k == 0 ? bs->slow_base_op : -1,
                                       bs->slow_base_seconds);
            const struct dt_batch batch = dt_batch_stream_at(&bs->batches, bs->s++);
            const int64_t w0 = dt_backend_host_waits(m->be);
            const struct dt_launch_counts c0 = dt_backend_launch_counts(m->be);
            st = timed_step(&bs->step[k], dt_dist_exchange(bs->dist), m, &batch, B,
                            exp->train.shards, &sgd, k == 0 ? base : pol, &t, ops);
            if (i < warmup) continue;
            bs->waits[k] += dt_backend_host_waits(m->be) - w0;
            const struct dt_launch_counts c1 = dt_backend_launch_counts(m->be);
            bs->xp_int8[k] += c1.xp_int8 - c0.xp_int8;
            bs->xp_simple[k] += c1.xp_simple - c0.xp_simple;
            int64_t r = i - warmup;
            (k == 0 ? ta : tb)[r] = t;
            double *o = k == 0 ? oa : ob;
            if (o) memcpy(o + r * DT_OP_COUNT, ops, sizeof ops);
        }
    }
    dt_backend_defer_checks(m->be, false);
    dt_backend_set_slow_op(m->be, -1, 0);
    return st;
}

/* "fast is not the fastest for OP here": the policy's op beats the baseline's beyond
 * DT_BENCH_FLAG_BELOW (both ran the op). */
static void op_flag(struct dt_strbuf *flags, const char *base, const char *pol, enum dt_op op,
                    const double *oa, const double *ob, int64_t n, double base_step, uint64_t seed)
{
    double *a = dt_xmalloc((size_t)n * sizeof *a), *b = dt_xmalloc((size_t)n * sizeof *b);
    bool ran = true;
    for (int64_t r = 0; r < n; r++) {
        a[r] = oa[r * DT_OP_COUNT + op];
        b[r] = ob[r * DT_OP_COUNT + op];
        ran &= a[r] > 0 && b[r] > 0;
    }
    struct dt_ratio_ci ci;
    if (ran) dt_bootstrap_median_ratio(a, b, n, 2000, seed, &ci);
    if (ran && ci.hi < DT_BENCH_FLAG_BELOW &&
        dt_median(a, n) - dt_median(b, n) >= DT_BENCH_FLAG_STEP_SHARE * base_step)
        dt_strbuf_printf(flags, "  %s is not the fastest for %s here: %s's %.2fx [%.2f, %.2f]\n",
                         base, dt_op_name(op), pol, ci.ratio, ci.lo, ci.hi);
    free(a);
    free(b);
}

void dt_bench_flags(struct dt_strbuf *flags, const char *base, const char *pol,
                    const struct dt_ratio_ci *step_ci, const double *oa, const double *ob,
                    int64_t n_ops, double base_step, uint64_t seed)
{
    if (step_ci && step_ci->hi < DT_BENCH_FLAG_BELOW)
        dt_strbuf_printf(flags, "  %s is not the fastest here: %s's step %.2fx [%.2f, %.2f]\n",
                         base, pol, step_ci->ratio, step_ci->lo, step_ci->hi);
    for (int o = 0; oa && ob && o < DT_OP_COUNT; o++)
        op_flag(flags, base, pol, (enum dt_op)o, oa, ob, n_ops, base_step, seed);
}

/* Does pol only relax `level`: some control differs from the level's, and each that does
 * holds the value of a weaker level? */
static bool only_relaxes(const struct dt_policy *pol, enum dt_level level)
{
    struct dt_policy ref;
    dt_policy_from_level(&ref, level);
    bool changed = false;
    for (int c = 0; c < dt_policy_control_count(); c++) {
        const char *v = dt_policy_control_value(pol, c);
        if (strcmp(v, dt_policy_control_value(&ref, c)) == 0) continue;
        bool weaker = false;
        for (int l = 0; l < (int)level; l++) {
            struct dt_policy lv;
            dt_policy_from_level(&lv, (enum dt_level)l);
            weaker |= strcmp(v, dt_policy_control_value(&lv, c)) == 0;
        }
        if (!weaker) return false;
        changed = true;
    }
    return changed;
}

void dt_bench_relax_flag(struct dt_strbuf *flags, const struct dt_policy *pol,
                         const struct dt_ratio_ci *ci, enum dt_level level,
                         const struct dt_ratio_ci *level_ci)
{
    if (!pol || !ci || !level_ci || !only_relaxes(pol, level) || ci->lo <= level_ci->hi) return;
    dt_strbuf_printf(flags,
                     "  %s costs more than %s here: %.2fx [%.2f, %.2f] against %.2fx [%.2f, "
                     "%.2f] -- every control it changes holds a weaker level's value, which "
                     "allows every path the stricter one does, so a kernel or library choice of "
                     "its own is the slower (docs/performance.md)\n",
                     pol->name, dt_level_name(level), ci->ratio, ci->lo, ci->hi, level_ci->ratio,
                     level_ci->lo, level_ci->hi);
}

/* After the table: every policy that only relaxes a level the run also timed, and costs
 * more than it (run_to_run against portable; an ablation against its own level). */
static void print_level_flags(const struct dt_experiment *exp, const struct dt_ratio_ci *level_ci,
                              const bool *level_seen, const struct dt_ratio_ci *pol_ci,
                              const bool *pol_seen)
{
    struct dt_strbuf f = {0};
    for (int p = 0; p < exp->n_policies; p++)
        for (int l = DT_LEVEL_COUNT - 1; pol_seen[p] && l > 0; l--)
            if (level_seen[l])
                dt_bench_relax_flag(&f, &exp->policies[p], &pol_ci[p], (enum dt_level)l,
                                    &level_ci[l]);
    if (f.data) printf("\n%s", f.data);
    dt_strbuf_free(&f);
}

/* A named level's step interval against fast (its name and controls the level's). */
static void note_level(struct dt_ratio_ci *level_ci, bool *level_seen, const struct dt_policy *pol,
                       const struct dt_ratio_ci *ci)
{
    for (int l = 0; l < DT_LEVEL_COUNT; l++) {
        struct dt_policy lv;
        dt_policy_from_level(&lv, (enum dt_level)l);
        if (strcmp(pol->name, dt_level_name((enum dt_level)l)) == 0 &&
            dt_policy_equal_controls(pol, &lv))
            level_ci[l] = *ci, level_seen[l] = true;
    }
}

/* The bench CSV in memory: an earlier bench CSV of this path (main.c checked it is one)
 * first, else the header; written atomically at the end. */
static enum dt_status csv_begin(struct dt_strbuf *csv, const char *path, struct dt_error *err)
{
    char *old = NULL;
    size_t old_len = 0;
    if (dt_path_exists(path))
        DT_FORWARD_IF_ERROR(
            dt_read_regular_file(&old, &old_len, path, "the bench CSV", (size_t)1 << 30, err));
    if (old && old_len) dt_strbuf_printf(csv, "%s%s", old, old[old_len - 1] == '\n' ? "" : "\n");
    else dt_strbuf_printf(csv, "%s\n", DT_BENCH_CSV_HEADER);
    free(old);
    return DT_OK;
}

/* Under a policy's overhead row: what ran beside the ratios (a device's host waits, CUDA
 * graphs, the exact sum's way across ranks, the exact products' form). */
static void print_notes(const struct dt_experiment *exp, const struct dt_bench_options *opt,
                        struct dt_bench_stream *bs, const char *base_name, const char *pol_name,
                        int64_t waits_base, int64_t waits_pol, int64_t xp_int8, int64_t xp_simple)
{
    const int64_t n = opt->steps;
    if (waits_base + waits_pol > 0) /* a device backend: each level's waits, not one's */
        printf("  host waits per step: %s %.2f, %s %.2f (the step's end included)\n", base_name,
               (double)waits_base / (double)n, pol_name, (double)waits_pol / (double)n);
    if (exp->backend.graphs) { /* backend.graphs: what became of each step's captures */
        char a[700], b[700];
        dt_step_graph_summary(&bs->step[0], a, sizeof a);
        dt_step_graph_summary(&bs->step[1], b, sizeof b);
        printf("  CUDA graphs: %s %s; %s %s\n", base_name, a, pol_name, b);
    }
    const char *path = dt_step_exchange_path(&bs->step[1]);
    if (path && bs->step[1].exact) /* reduction: exact across ranks: which way it went */
        printf("  %s across %d ranks: %s\n", pol_name, dt_dist_size(opt->dist), path);
    if (xp_int8 + xp_simple > 0) /* math: exact on a device: which form ran */
        printf("  exact products per step (%s): %.1f int8 (cuBLAS tensor-core GEMMs), %.1f "
               "simple (cuBLAS refused int8, or DETRAIN_CUDA_XP=simple)\n",
               pol_name, (double)xp_int8 / (double)n, (double)xp_simple / (double)n);
}

/* Overhead of every policy against the baseline (`fast`, or the config's first policy),
 * with a paired bootstrap 95% interval of the step-time ratio ("inconcl." when it holds
 * 1.0; harness/record/metrics.h):
 * the two alternate step by step on one model and one batch stream, so both see the same
 * machine state, in ABBA order (baseline first in even pairs, the policy first in odd
 * ones) so neither always runs on the caches the other left; ratios of medians, per
 * training step and per op. Models that draw epsilon also report its memory per policy. */
static enum dt_status bench_overhead(const struct dt_experiment *exp,
                                     const struct dt_bench_options *opt, struct dt_backend *be,
                                     struct dt_model *m, struct dt_bench_stream *bs,
                                     struct dt_error *err)
{
    struct dt_policy fast;
    dt_policy_from_level(&fast, DT_LEVEL_FAST);
    if (opt->baseline_first) fast = exp->policies[0];
    const char *base_name = opt->baseline_first ? exp->policies[0].name : "fast";
    struct dt_model_memory mem;
    dt_model_memory(m, &fast, &mem);
    const bool draws = m->ops->memory != NULL;
    if (draws)
        printf("\nepsilon memory (bytes): %s holds %" PRId64 " from forward to backward, "
               "workspace %" PRId64 ", generator state %" PRId64 "\n",
               base_name, mem.eps_held, mem.eps_workspace, mem.rng_state);
    struct dt_strbuf csvb = {0}, *csv = opt->csv_path ? &csvb : NULL;
    if (csv) DT_FORWARD_IF_ERROR(csv_begin(csv, opt->csv_path, err));
    const int64_t n = opt->steps;
    double *ta = dt_xcalloc((size_t)n, sizeof(double)), *tb = dt_xcalloc((size_t)n, sizeof(double));
    double *oa = dt_xcalloc((size_t)(n * DT_OP_COUNT), sizeof(double));
    double *ob = dt_xcalloc((size_t)(n * DT_OP_COUNT), sizeof(double));
    double *col = dt_xcalloc((size_t)n, sizeof(double));
    enum dt_status st = DT_OK;
    bool header = false;
    /* per-op times come from a pass of their own: timing each op makes a device backend
     * wait for it, which must not enter the step times */
    const int64_t n_ops = n < 100 ? n : 100;
    double *scratch_a = dt_xcalloc((size_t)n_ops, sizeof(double));
    double *scratch_b = dt_xcalloc((size_t)n_ops, sizeof(double));
    /* the levels' step intervals against fast, and every policy's, for dt_bench_relax_flag */
    struct dt_ratio_ci level_ci[DT_LEVEL_COUNT];
    bool level_seen[DT_LEVEL_COUNT] = {false};
    struct dt_ratio_ci *pol_ci = dt_xcalloc((size_t)exp->n_policies + 1, sizeof *pol_ci);
    bool *pol_seen = dt_xcalloc((size_t)exp->n_policies + 1, sizeof *pol_seen);
    for (int p = 0; p < exp->n_policies && st == DT_OK; p++) {
        const struct dt_policy *pol = &exp->policies[p];
        if (dt_policy_equal_controls(pol, &fast)) continue;
        if (!header) {
            printf("\noverhead vs %s: ratio of medians over %" PRId64 " alternating steps "
                   "(ABBA: base, policy, policy, base, ...) after %" PRId64 " warm-up pairs, "
                   "ops unprofiled; per op: a separate pass of %" PRId64 " pairs timing "
                   "each op\n",
                   base_name, n, opt->warmup, n_ops);
            printf("%-26s %8s %8s %7s %-20s", "policy", "base_ms", "pol_ms", "step",
                   "95% CI (bootstrap)");
            if (draws) printf(" %12s %12s %10s", "eps_held_B", "eps_work_B", "state_B");
            for (int o = 0; o < DT_OP_COUNT; o++) printf(" %9.9s", dt_op_name((enum dt_op)o));
            printf("\n");
            header = true;
        }
        st = dt_bench_alternate(m, exp, bs, &fast, pol, opt->warmup, n, ta, tb, NULL, NULL);
        if (st != DT_OK || dt_stop_requested) break;
        const int64_t waits_base = bs->waits[0], waits_pol = bs->waits[1];
        const int64_t xp_int8 = bs->xp_int8[1], xp_simple = bs->xp_simple[1];
        dt_backend_profile_enable(be, true);
        st = dt_bench_alternate(m, exp, bs, &fast, pol, 2, n_ops, scratch_a, scratch_b, oa, ob);
        dt_backend_profile_enable(be, false);
        if (st != DT_OK || dt_stop_requested) break;
        double ma = dt_median(ta, n), mb = dt_median(tb, n);
        struct dt_ratio_ci ci;
        dt_bootstrap_median_ratio(ta, tb, n, 2000, exp->train.seed, &ci);
        char cis[64];
        snprintf(cis, sizeof cis, "[%.2f, %.2f]%s", ci.lo, ci.hi,
                 ci.inconclusive ? " inconcl." : "");
        printf("%-26s %8.3f %8.3f %6.2fx %-20s", pol->name, 1e3 * ma, 1e3 * mb, mb / ma, cis);
        if (draws) {
            dt_model_memory(m, pol, &mem);
            printf(" %12" PRId64 " %12" PRId64 " %10" PRId64, mem.eps_held, mem.eps_workspace,
                   mem.rng_state);
        }
        if (csv)
            dt_strbuf_printf(csv, "%s,%s,step,%.6f,%.6f,%.4f,%.4f,%.4f,%s\n", exp->name, pol->name,
                             1e3 * ma, 1e3 * mb, mb / ma, ci.lo, ci.hi,
                             ci.inconclusive ? "inconclusive" : "conclusive");
        struct dt_strbuf flags = {0}; /* where the baseline is not the fastest */
        dt_bench_flags(&flags, base_name, pol->name, &ci, oa, ob, n_ops, ma, exp->train.seed);
        if (!opt->baseline_first) note_level(level_ci, level_seen, pol, &ci);
        pol_ci[p] = ci, pol_seen[p] = !opt->baseline_first;
        for (int o = 0; o < DT_OP_COUNT; o++) {
            for (int64_t r = 0; r < n_ops; r++) col[r] = oa[r * DT_OP_COUNT + o];
            double a = dt_median(col, n_ops);
            for (int64_t r = 0; r < n_ops; r++) col[r] = ob[r * DT_OP_COUNT + o];
            double b = dt_median(col, n_ops);
            if (a > 0) printf(" %8.2fx", b / a);
            else printf(" %9s", "-");
            if (csv && a > 0)
                dt_strbuf_printf(csv, "%s,%s,%s,%.6f,%.6f,%.4f\n", exp->name, pol->name,
                                 dt_op_name((enum dt_op)o), 1e3 * a, 1e3 * b, b / a);
            else if (csv && b > 0) /* an op only the policy runs (exact_sum): no ratio */
                dt_strbuf_printf(csv, "%s,%s,%s,%.6f,%.6f,\n", exp->name, pol->name,
                                 dt_op_name((enum dt_op)o), 1e3 * a, 1e3 * b);
        }
        printf("\n%s", flags.data ? flags.data : "");
        dt_strbuf_free(&flags);
        print_notes(exp, opt, bs, base_name, pol->name, waits_base, waits_pol, xp_int8, xp_simple);
    }
    free(scratch_a);
    free(scratch_b);
    print_level_flags(exp, level_ci, level_seen, pol_ci, pol_seen);
    free(pol_ci);
    free(pol_seen);
    if (!header)
        printf("\n(no policy other than the baseline %s in this config, so no overhead table; "
               "e.g. --set 'policies=[fast, run_to_run, portable]')\n",
               base_name);
    if (csv) {
        if (st == DT_OK) st = dt_write_file_atomic(opt->csv_path, csv->data, csv->len, err);
        dt_strbuf_free(csv);
    }
    free(ta);
    free(tb);
    free(oa);
    free(ob);
    free(col);
    return st;
}

/* The step and hashing times of dt_bench_run (ms per measured step). */
struct bench_times {
    const double *step_ms, *hash_ms;   /* hashing after the step (hash.async: off) */
    const double *pstep_ms, *phash_ms; /* pipelined hashing (hash.async: on) */
    int64_t waits;                     /* host waits over the measured steps */
    int64_t params;                    /* the model's parameters */
};

static void print_bench(const struct dt_experiment *exp, const struct dt_bench_options *opt,
                        struct dt_model *m, const struct dt_policy *pol,
                        const struct bench_times *t, const struct dt_step *step)
{
    struct dt_backend *be = m->be;
    const int64_t B = exp->train.batch, params = t->params, waits = t->waits;
    const double sm = dt_median(t->step_ms, opt->steps), hm = dt_median(t->hash_ms, opt->steps);
    const double share = hm / (sm + hm);
    const double psm = dt_median(t->pstep_ms, opt->steps), phm = dt_median(t->phash_ms, opt->steps);
    printf("bench: %s, model %s (%" PRId64 " parameters), batch %" PRId64
           ", policy %s, backend %s, %d threads",
           exp->name, m->ops->kind, params, B, pol->name, dt_backend_name(be),
           dt_backend_threads(be));
    if (dt_dist_size(opt->dist) > 1) printf(", %d ranks", dt_dist_size(opt->dist));
    printf("\n");
    char device[512];
    dt_backend_describe(be, device, sizeof device);
    if (device[0]) printf("  device                %s\n", device);
    printf("  measured steps        %" PRId64 " (after %" PRId64 " warm-up)\n", opt->steps,
           opt->warmup);
    printf("  step (update) median  %.3f ms  -> %.1f steps/s without hashing\n", sm, 1e3 / sm);
    if (waits > 0) /* a device backend: how often the host waited in a step */
        printf("  host waits per step   %.2f (the step's final synchronisation included)\n",
               (double)waits / (double)opt->steps);
    printf("  hash median           %.3f ms  (%.1f MB/s of weights)\n", hm,
           (double)params * 4.0 / 1e6 / (hm / 1e3));
    printf("  with hashing          %.1f steps/s\n", 1e3 / (sm + hm));
    printf("  hashing share         %.2f%% of step time (target <= 5%%)\n", 100.0 * share);
    printf("  pipelined hash median %.3f ms on the training thread, step %.3f ms -> "
           "%.2f%% of step time (hash.async: on)\n",
           phm, psm, 100.0 * phm / (psm + phm));
    if (exp->backend.graphs) {
        char g[700];
        dt_step_graph_summary(step, g, sizeof g);
        printf("  CUDA graphs           %s\n", g);
    }
}

enum dt_status dt_bench_run(const struct dt_experiment *exp, const struct dt_bench_options *opt,
                            struct dt_error *err)
{
    struct dt_dataset ds;
    memset(&ds, 0, sizeof ds);
    DT_FORWARD_IF_ERROR(dt_experiment_load_dataset(&ds, exp, err));
    struct dt_backend *be = NULL;
    enum dt_status st = dt_experiment_open_backend(&be, exp, 0, err);
    struct dt_model *m = NULL;
    if (st == DT_OK) st = dt_experiment_build_model(&m, exp, be, ds.train.n, err);
    if (st != DT_OK) {
        dt_backend_destroy(be);
        dt_dataset_free(&ds);
        return st;
    }
    const struct dt_policy *pol = &exp->policies[0];
    const int64_t B = exp->train.batch, total = opt->warmup + opt->steps;
    struct dt_resident *train_set = dt_batch_resident(be, &ds.train);
    struct dt_bench_stream bs;
    memset(&bs, 0, sizeof bs);
    dt_batch_stream_init(&bs.batches, &ds.train, train_set, B, exp->train.seed, 0);
    int64_t max_param = 0;
    for (int i = 0; i < m->n_tensors; i++)
        max_param = m->params[i].n > max_param ? m->params[i].n : max_param;
    float *staging = dt_xmalloc((size_t)max_param * sizeof(float));
    uint8_t(*td)[DT_DIGEST_BYTES] = dt_xcalloc((size_t)m->n_tensors, DT_DIGEST_BYTES);
    double *step_ms = dt_xcalloc((size_t)opt->steps, sizeof(double));
    double *hash_ms = dt_xcalloc((size_t)opt->steps, sizeof(double));
    double *pstep_ms = dt_xcalloc((size_t)opt->steps, sizeof(double));
    double *phash_ms = dt_xcalloc((size_t)opt->steps, sizeof(double));
    const struct dt_sgd_options sgd = dt_experiment_sgd_options(exp);
    struct dt_step step; /* reduction: exact's shards (nets/step.h) */
    memset(&step, 0, sizeof step);
    dt_step_use_graphs(&step, exp->backend.graphs);
    for (int k = 0; k < 2; k++) dt_step_use_graphs(&bs.step[k], exp->backend.graphs);
    const struct dt_exchange *x = dt_dist_exchange(opt->dist);
    bs.dist = opt->dist;
    bs.slow_base_op = opt->hooks ? opt->hooks->slow_base_op : -1;
    bs.slow_base_seconds = opt->hooks ? opt->hooks->slow_base_seconds : 0;
    int64_t params = 0;
    for (int i = 0; i < m->n_params; i++) params += m->params[i].n;

    dt_model_init(m, exp->train.seed, 0);
    dt_backend_defer_checks(be, dt_dist_size(opt->dist) == 1); /* as a training step (train.c) */
    int64_t waits = 0; /* host waits of the measured steps, the step's end included */
    /* synchronous hashing (hash.async: off), as a trace would be written without a pipeline */
    for (int64_t s = 0; s < total && st == DT_OK; s++) {
        const struct dt_batch batch = dt_batch_stream_at(&bs.batches, bs.s++);
        float loss;
        const int64_t w0 = dt_backend_host_waits(be);
        double t0 = dt_now_s();
        st = dt_step_train(&step, m, x, &batch, B, exp->train.shards, &sgd, pol, &loss);
        double t1 = dt_now_s();
        if (s >= opt->warmup) waits += dt_backend_host_waits(be) - w0;
        uint8_t md[DT_DIGEST_BYTES];
        dt_hash_model(md, td, m, staging);
        double t2 = dt_now_s();
        if (s >= opt->warmup) {
            step_ms[s - opt->warmup] = 1e3 * (t1 - t0);
            hash_ms[s - opt->warmup] = 1e3 * (t2 - t1);
        }
    }
    /* pipelined hashing (hash.async: on): the hash's cost is what the training thread
     * spends issuing the copy and waiting for a slot; its step time is taken in the same
     * loop, so a hashing thread that slows the step (sharing the CPU's cores) counts too */
    struct dt_hashpipe *hp = NULL;
    if (st == DT_OK) st = dt_hashpipe_create(&hp, m, NULL, false, true, err);
    for (int64_t s = 0; s < total && st == DT_OK; s++) {
        const struct dt_batch batch = dt_batch_stream_at(&bs.batches, bs.s++);
        float loss;
        double t0 = dt_now_s();
        st = dt_step_train(&step, m, x, &batch, B, exp->train.shards, &sgd, pol, &loss);
        double t1 = dt_now_s();
        if (st == DT_OK) st = dt_hashpipe_submit(hp, s, loss, err);
        double t2 = dt_now_s();
        if (s >= opt->warmup) {
            pstep_ms[s - opt->warmup] = 1e3 * (t1 - t0);
            phash_ms[s - opt->warmup] = 1e3 * (t2 - t1);
        }
    }
    if (hp) {
        enum dt_status dst = dt_hashpipe_drain(hp, st == DT_OK ? err : NULL);
        if (st == DT_OK) st = dst;
        dt_hashpipe_destroy(hp);
    }
    if (st == DT_OK) {
        const struct bench_times t = {.step_ms = step_ms,
                                      .hash_ms = hash_ms,
                                      .pstep_ms = pstep_ms,
                                      .phash_ms = phash_ms,
                                      .waits = waits,
                                      .params = params};
        print_bench(exp, opt, m, pol, &t, &step);
    }
    if (st == DT_OK) st = bench_overhead(exp, opt, be, m, &bs, err);
    if (st != DT_OK && m->err.status != DT_OK && err && err->status == DT_OK)
        *err = m->err; /* a step's own fault: the model says where */
    dt_step_free(&bs.step[0]);
    dt_step_free(&bs.step[1]);
    dt_step_free(&step);
    dt_batch_stream_free(&bs.batches);
    free(staging);
    free(td);
    free(step_ms);
    free(hash_ms);
    free(pstep_ms);
    free(phash_ms);
    dt_model_destroy(m);
    dt_backend_resident_free(be, train_set);
    dt_backend_destroy(be);
    dt_dataset_free(&ds);
    return st;
}
