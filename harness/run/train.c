/* The training loop: for each cell (vary setting x policy) x replica, for each step:
 * batch -> model step -> hash -> trace (+ step times, weight snapshots at log-spaced
 * steps); evaluation at eval_every and at the end (with every test prediction); checkpoints
 * every train.checkpoint_every steps and at an interruption, and --resume from them
 * (harness/record/checkpoint.h); per-replica and experiment manifests; the overhead protocol (each
 * policy alternated with fast); then the caller's report (dt_run_options.report) over the files
 * on disk (harness/record/layout.h). */
#include "harness/run/run_ctx.h"
#include "harness/run/train.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/fileio.h"
#include "core/util.h"
#include "harness/record/checkpoint.h"
#include "harness/run/dist.h"
#include "harness/run/divwatch.h"
#include "harness/run/hashpipe.h"
#include "harness/run/overhead.h"
#include "harness/run/stop.h"
#include "harness/setup/model.h"
#include "harness/setup/test_hooks.h"
#include "harness/record/csv.h"
#include "harness/record/layout.h"
#include "harness/record/algolog.h"
#include "harness/run/batches.h"
#include "harness/record/manifest.h"
#include "harness/record/outdir.h"
#include "harness/record/snapshot.h"
#include "harness/record/trace.h"
#include "determinism/streams.h"

/* The replica's start: its model built, its plan (resume.c) made, rank 0's files opened (cut
 * back first when it goes on from a checkpoint), the model initialised or restored, step 0
 * hashed. An error before the model exists returns with nothing to free (*built false). */
static enum dt_status replica_begin(struct replica *rep, struct run_ctx *c, int cell, int r,
                                    struct dt_replica_result *res, bool *built,
                                    struct dt_error *err)
{
    const struct dt_experiment *exp = c->exp;
    memset(rep, 0, sizeof *rep);
    *built = false;
    rep->cell = cell;
    rep->r = r;
    rep->res = res;
    rep->pol = &exp->policies[dt_cell_policy(exp, cell)];
    dt_utc_iso8601(rep->start, sizeof rep->start);
    rep->poisoned = c->poison.armed; /* test hook: the first replica that trains */
    c->poison.armed = false;
    /* rank 0 writes every file; the other ranks train, hash and check (harness/run/dist.h) */
    rep->writer = dt_dist_rank(c->opt->dist) == 0;
    rep->multi = dt_dist_size(c->opt->dist) > 1;
    if (rep->writer) DT_FORWARD_IF_ERROR(dt_mkdir_p(res->dir, err));
    DT_FORWARD_IF_ERROR(dt_experiment_build_model(&rep->m, exp, c->be, c->ds->train.n, err));
    *built = true;
    struct dt_model *m = rep->m;
    rep->streams = dt_replica_streams(exp, cell, r, &rep->member);
    rep->io.submitted = -1;
    enum replica_start how;
    struct dt_checkpoint ck;
    enum dt_status st = dt_resume_plan(&how, &ck, c, cell, r, res->dir, m, err);
    rep->k = how == START_CHECKPOINT ? ck.step : 0;
    int64_t kept_step = -1;
    char kept_digest[DT_DIGEST_HEX] = "";
    if (st == DT_OK && how == START_CHECKPOINT && rep->writer)
        st = dt_resume_cut_back(exp, res->dir, &ck, false, &kept_step, kept_digest, err);
    if (st == DT_OK && rep->writer)
        st = dt_replica_io_open(&rep->io, exp, m, res->dir, how == START_CHECKPOINT ? rep->k : -1,
                                err);
    rep->io.kept_step = kept_step;
    memcpy(rep->io.kept_digest, kept_digest, sizeof kept_digest);

    const int64_t steps = exp->train.steps;
    dt_batch_stream_init(&rep->batches, &c->ds->train, c->train_set, exp->train.batch,
                         exp->train.seed, rep->streams.order_stream);
    rep->step_ms = dt_xcalloc((size_t)steps, sizeof(double));
    rep->hash_ms = dt_xcalloc((size_t)steps + 1, sizeof(double));
    rep->sgd = dt_experiment_sgd_options(exp);
    dt_step_use_graphs(&rep->dstep, exp->backend.graphs);
    dt_algolog_init(&rep->algos);
    rep->notes = dt_xcalloc(DT_ALGOLOG_MAX_CALLS, sizeof *rep->notes);
    dt_backend_reset_algo_choices(c->be);
    (void)dt_backend_take_algo_notes(c->be, NULL, 0);
    if (c->opt->hooks && c->opt->hooks->forced_order) /* test hook: a drawn order per replica */
        (void)dt_backend_set_forced_order(c->be, c->opt->hooks->forced_order + (uint64_t)r);
    if (rep->multi && !rep->writer) {
        rep->tensor_digests = dt_xmalloc((size_t)m->n_tensors * DT_DIGEST_BYTES);
        int64_t most = 1;
        for (int i = 0; i < m->n_tensors; i++)
            if (m->params[i].n > most) most = m->params[i].n;
        rep->hash_staging = dt_xmalloc((size_t)most * sizeof(float));
    }

    if (st == DT_OK) {
        dt_model_init(m, exp->train.seed, rep->streams.init_stream);
        m->member = rep->member;
        if (how == START_CHECKPOINT) { /* weights, momenta, step: as they were after step k */
            dt_checkpoint_apply(&ck, m);
            res->steps_done = res->resumed_from_step = rep->k;
        }
        dt_model_memory(m, rep->pol, &res->mem);
        if (how != START_CHECKPOINT && rep->writer) {
            st = dt_replica_submit_hash(&rep->io, 0, NAN, err);
            if (st == DT_OK) st = dt_replica_maybe_snapshot(m, &rep->io, res->dir, 0, err);
        }
        if (rep->multi && how != START_CHECKPOINT) {
            st = dt_replica_rank_digest(&rep->io, m, rep->tensor_digests, rep->hash_staging,
                                        rep->digest, err);
            rep->have_digest = true;
        }
        if (st == DT_OK && rep->writer && r > 0 && exp->train.checkpoint_at_divergence) {
            char first[sizeof res->dir], hex[DT_DIGEST_HEX];
            dt_replica_dir(first, sizeof first, c->opt->out_dir, exp, cell, 0);
            const bool fresh = how != START_CHECKPOINT;
            if (fresh) st = dt_replica_rank_digest(&rep->io, m, NULL, NULL, hex, err);
            if (st == DT_OK) dt_divwatch_begin(&rep->watch, first, m, fresh ? hex : NULL);
        }
    }
    dt_checkpoint_free(&ck);
    if (rep->multi) { /* a rank that could not start stops the others before the first step */
        int who = -1;
        int worst = dt_dist_max_status(c->opt->dist, st == DT_OK ? 0 : (int)st, &who);
        if (worst != 0 && st == DT_OK)
            st = dt_error_set(err, (enum dt_status)worst,
                              "rank %d could not start replica %d (its message is on its "
                              "stderr)",
                              who, r);
    }
    return st;
}

/* The observers of rep's steps, in order (run_ctx.h); the test hooks only when set. */
static void install_observers(struct replica *rep, const struct run_ctx *c)
{
    int n = 0;
    if (rep->poisoned) rep->observers[n++] = dt_observe_poison;
    rep->observers[n++] = dt_observe_scan;
    rep->observers[n++] = dt_observe_hash;
    rep->observers[n++] = dt_observe_times;
    rep->observers[n++] = dt_observe_verdict;
    rep->observers[n++] = dt_observe_snapshot;
    rep->observers[n++] = dt_observe_eval;
    rep->observers[n++] = dt_observe_checkpoint;
    rep->observers[n++] = dt_observe_progress;
    if (c->kill_after > 0) rep->observers[n++] = dt_observe_kill;
    DT_ASSERT(n <= DT_MAX_OBSERVERS);
    rep->n_observers = n;
}

/* Before step s: with several ranks, go on together or stop together; a signal stops the
 * replica (interrupted). False when it must not take the step (*st: why, or DT_OK). */
static bool may_step(struct run_ctx *c, struct replica *rep, int64_t s, enum dt_status *st,
                     struct dt_error *err)
{
    struct dt_replica_result *res = rep->res;
    *st = DT_OK;
    if (rep->multi) { /* every rank goes on, or every rank stops, after the same step */
        *st = dt_fault_ranks_agree(c->opt->dist, res, s - 1, rep->have_digest ? rep->digest : NULL,
                                   err);
        rep->have_digest = false;
        if (*st != DT_OK || res->state != DT_REPLICA_COMPLETED) {
            rep->stopped_together = true;
            return false;
        }
    }
    if (dt_stop_requested) {
        res->state = DT_REPLICA_INTERRUPTED;
        snprintf(res->reason, sizeof res->reason, "interrupted by signal %d after step %" PRId64,
                 (int)dt_stop_requested, s - 1);
        return false;
    }
    return true;
}

/* The model's step s (nets/step.h) on its batch, to the device's end (one wait, the
 * deferred checks read), timed; the algorithm notes it left. A numeric fault of the step
 * (the model's error names the tensor) fails the replica (done->stop). */
static enum dt_status model_step(struct run_ctx *c, struct replica *rep, struct step_done *done,
                                 struct dt_error *err)
{
    const struct dt_experiment *exp = c->exp;
    struct dt_model *m = rep->m;
    const int64_t s = done->s;
    const struct dt_batch batch = dt_batch_stream_at(&rep->batches, s - 1);
    done->loss = NAN;
    const double t0 = dt_now_s();
    const int64_t w0 = dt_backend_host_waits(c->be);
    enum dt_status st =
        dt_step_train(&rep->dstep, m, dt_dist_exchange(c->opt->dist), &batch, exp->train.batch,
                      exp->train.shards, &rep->sgd, rep->pol, &done->loss); /* to its end */
    rep->step_ms[s - 1] = 1e3 * (dt_now_s() - t0);
    rep->step_waits += dt_backend_host_waits(c->be) - w0;
    if (s == rep->k + 1) rep->first_step_waits = dt_backend_host_waits(c->be) - w0;
    dt_algolog_step(&rep->algos, s, rep->notes,
                    dt_backend_take_algo_notes(c->be, rep->notes, DT_ALGOLOG_MAX_CALLS),
                    DT_ALGOLOG_MAX_CALLS);
    if (st == DT_ERR_NUMERIC) {
        snprintf(rep->res->reason, sizeof rep->res->reason, "%.900s; replica stopped",
                 m->err.status != DT_OK ? m->err.msg : "numeric error in the step");
        dt_replica_failed(c, rep);
        done->stop = true;
        return DT_OK;
    }
    if (st != DT_OK && m->err.status != DT_OK && err) *err = m->err;
    if (st == DT_OK) rep->res->steps_done = s;
    return st;
}

/* Step s: the model's step, then its observers in order (run_ctx.h). *stop: the replica
 * ends after it (failed, interrupted, or the ranks stopped together); an error return stops
 * it too. */
static enum dt_status replica_step(struct run_ctx *c, struct replica *rep, int64_t s, bool *stop,
                                   struct dt_error *err)
{
    enum dt_status st;
    *stop = true;
    if (!may_step(c, rep, s, &st, err)) return st;
    struct step_done done = {.s = s};
    st = model_step(c, rep, &done, err);
    for (int i = 0; i < rep->n_observers && st == DT_OK && !done.stop; i++)
        st = rep->observers[i](c, rep, &done, err);
    *stop = done.stop;
    return st;
}

/* After the loop, however it ended: the ranks' last agreement, every hashed step into the
 * trace, a checkpoint when interrupted, the final evaluation and predictions when completed,
 * then (rank 0) algos.csv and run.json. st: the loop's status; returns the replica's. */
static enum dt_status replica_end(struct run_ctx *c, struct replica *rep, enum dt_status st,
                                  struct dt_error *err)
{
    const struct dt_experiment *exp = c->exp;
    struct dt_model *m = rep->m;
    struct dt_replica_result *res = rep->res;
    struct replica_io *io = &rep->io;
    /* The last agreement: the last step's digests, and a stop of a rank that left the loop
     * on its own (a failed write on rank 0) -- unless the ranks already stopped together. */
    if (rep->multi && !rep->stopped_together) {
        enum dt_status ast = dt_fault_ranks_agree_end(c->opt->dist, res, res->steps_done, st,
                                                      rep->have_digest ? rep->digest : NULL,
                                                      st == DT_OK ? err : NULL);
        if (st == DT_OK) st = ast;
    }
    /* Every hashed step is in the trace before anything reports on it, however the loop
     * ended (completed, failed, interrupted, an error). */
    if (io->hp) {
        enum dt_status dst = dt_hashpipe_drain(io->hp, st == DT_OK ? err : NULL);
        if (st == DT_OK) st = dst;
        memcpy(res->final_digest,
               io->submitted >= 0 ? dt_hashpipe_last_digest(io->hp) : io->kept_digest,
               DT_DIGEST_HEX);
    } else if (rep->digest[0]) {
        memcpy(res->final_digest, rep->digest, DT_DIGEST_HEX);
    }
    if (st == DT_OK && res->state == DT_REPLICA_INTERRUPTED && rep->writer && !c->opt->stop_after) {
        /* always resumable after SIGINT/SIGTERM/SIGHUP, whatever train.checkpoint_every says */
        DT_ASSERT(m->step == res->steps_done);
        st = dt_replica_checkpoint_write(c, m, io, rep->pol, &rep->streams, res->dir, err);
        if (st == DT_OK) {
            size_t used = strlen(res->reason);
            snprintf(res->reason + used, sizeof res->reason - used,
                     "; checkpoint.bin written: detrain run --resume goes on from there");
        }
    }
    if (st == DT_OK && res->state == DT_REPLICA_COMPLETED && rep->writer) {
        const struct dt_split *test = &c->ds->test;
        struct dt_eval ev;
        uint8_t *pred = dt_xmalloc((size_t)test->n + 1);
        st = dt_model_evaluate_pred(m, test->x, test->y, test->n, rep->pol, &ev, pred);
        res->test_loss = ev.loss;
        res->test_acc = ev.accuracy;
        res->test_ece = ev.ece;
        if (st == DT_OK)
            st = dt_replica_metrics_row(io->metrics, io->metrics_path, exp->train.steps, &ev, err);
        if (st == DT_OK) st = dt_replica_predictions_write(res->dir, test->y, pred, test->n, err);
        if (st == DT_OK && dt_model_kind(exp->model.kind)->reads_text)
            st = dt_replica_sample_write(m, exp, rep->pol, res->dir, err);
        free(pred);
    }
    if (st != DT_OK) {
        res->state = DT_REPLICA_FAILED;
        snprintf(res->reason, sizeof res->reason, "%s", err ? err->msg : dt_status_str(st));
    }
    if (exp->backend.graphs && rep->writer) { /* what became of the captures */
        char g[700];
        dt_step_graph_summary(&rep->dstep, g, sizeof g);
        fprintf(stderr, "detrain: %s: CUDA graphs %s\n", res->dir, g);
    }
    res->step_ms_median = dt_median(rep->step_ms + rep->k, res->steps_done - rep->k);
    res->hash_ms_median = dt_median(rep->hash_ms, rep->n_hash);
    const int64_t run_here = res->steps_done - rep->k;
    const bool gpu_waits = exp->backend.device != DT_DEVICE_CPU && run_here > 0;
    res->host_waits_per_step = gpu_waits ? (double)rep->step_waits / (double)run_here : NAN;
    res->host_waits_first_step = gpu_waits ? (double)rep->first_step_waits : NAN;
    res->host_waits_steady =
        gpu_waits && run_here > 1
            ? (double)(rep->step_waits - rep->first_step_waits) / (double)(run_here - 1)
            : NAN;
    st = dt_replica_io_close(io, st, err);
    if (!rep->writer) return st;
    char algos_path[1300];
    snprintf(algos_path, sizeof algos_path, "%s/algos.csv", res->dir);
    struct dt_error aerr;
    if (dt_algolog_write_csv(&rep->algos, algos_path, &aerr) != DT_OK) {
        fprintf(stderr, "detrain: %s\n", aerr.msg);
        if (st == DT_OK) {
            st = DT_ERR_IO;
            if (err) *err = aerr;
        }
    }
    struct dt_error merr;
    if (dt_replica_manifest_write(c, rep->cell, rep->r, res, rep->start,
                                  dt_replica_hash_async(exp, m), &rep->algos, &merr) !=
        DT_OK) { /* the run stops: a replica without its manifest is not a result */
        if (st == DT_OK) {
            st = merr.status;
            if (err) *err = merr;
        } else {
            fprintf(stderr, "detrain: %s\n", merr.msg);
        }
    }
    return st;
}

static void replica_free(struct replica *rep)
{
    dt_divwatch_free(&rep->watch);
    dt_step_free(&rep->dstep);
    free(rep->tensor_digests);
    free(rep->hash_staging);
    dt_algolog_free(&rep->algos);
    free(rep->notes);
    dt_batch_stream_free(&rep->batches);
    free(rep->step_ms);
    free(rep->hash_ms);
    dt_model_destroy(rep->m);
}

/* Train replica r of cell `cell` (with --resume: keep it, or go on from its checkpoint).
 * Returns an error only for faults of the tool (I/O, an unusable checkpoint); a replica's
 * own numerical failure is recorded in res and returns DT_OK. */
static enum dt_status run_replica(struct run_ctx *c, int cell, int r, struct dt_replica_result *res,
                                  struct dt_error *err)
{
    const struct dt_experiment *exp = c->exp;
    memset(res, 0, sizeof *res);
    res->test_acc = res->test_loss = res->test_ece = res->host_waits_per_step = NAN;
    res->host_waits_first_step = res->host_waits_steady = NAN;
    res->state = DT_REPLICA_COMPLETED;
    res->resumed_from_step = -1;
    dt_replica_dir(res->dir, sizeof res->dir, c->opt->out_dir, exp, cell, r);
    if (c->resume && dt_replica_completed(res->dir, exp->train.steps)) {
        res->steps_done = exp->train.steps; /* finished before: kept as it is */
        return DT_OK;
    }
    struct replica rep;
    bool built;
    enum dt_status st = replica_begin(&rep, c, cell, r, res, &built, err);
    if (!built) return st;
    install_observers(&rep, c);
    /* one process: the ops' device-record checks are read once per step, at its end
     * (dt_backend_step_end); with several ranks each op checks at once, so that every
     * rank learns of a fault inside the step (nets/step.c, agree_on_failure) */
    dt_backend_defer_checks(c->be, !rep.multi);
    bool stop = false;
    const int64_t last = c->opt->stop_after > 0 && c->opt->stop_after < exp->train.steps
                             ? c->opt->stop_after
                             : exp->train.steps;
    for (int64_t s = rep.k + 1; st == DT_OK && !stop && s <= last; s++)
        st = replica_step(c, &rep, s, &stop, err);
    if (st == DT_OK && res->state == DT_REPLICA_COMPLETED && last < exp->train.steps) {
        res->state = DT_REPLICA_INTERRUPTED; /* reproduce of a trace cut short: no more */
        snprintf(res->reason, sizeof res->reason,
                 "stopped after step %" PRId64 " of %" PRId64 " (the recorded trace's length)",
                 last, exp->train.steps);
    }
    st = replica_end(c, &rep, st, err);
    dt_backend_defer_checks(c->be, false);
    replica_free(&rep);
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
    if (c->resume) /* went on from an interrupted run in the same folder */
        dt_strbuf_printf(sb, ", \"resumed\": true");
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
    char device[512];
    dt_backend_describe(c->be, device, sizeof device);
    dt_strbuf_printf(sb, ", \"backend\": {\"name\": \"%s\", \"threads\": %d, \"device\": ",
                     dt_backend_name(c->be), dt_backend_threads(c->be));
    dt_strbuf_json_string(sb, device);
    dt_strbuf_printf(sb, "}, ");
    /* the ranks that shared each step (harness/run/dist.h) */
    dt_strbuf_printf(sb, "\"ranks\": %d, \"shards\": %" PRId64 ", \"mpi\": ",
                     dt_dist_size(c->opt->dist), c->exp->train.shards);
    dt_strbuf_json_string(sb, dt_dist_library(c->opt->dist));
    dt_strbuf_printf(sb, ", ");
    dt_manifest_environment_json(sb);
    dt_strbuf_printf(sb, ", \"dataset_dir\": ");
    dt_strbuf_json_string(sb, c->ds->dir);
    dt_strbuf_printf(sb, ", \"data_digest\": \"%s\"", c->data_digest);
    dt_strbuf_printf(sb, ", \"controls_note\": ");
    dt_strbuf_json_string(
        sb,
        c->exp->backend.device == DT_DEVICE_CUDA
            ? "reduction, atomics and math act on the dense, loss and own convolution ops (math "
              "fast: cuBLAS with TF32, strict: cuBLAS pedantic FP32, portable: own ordered "
              "kernels); rng acts on bnn_mlp; conv_algo picks the convolutions (autotune: cuDNN "
              "timed choice, TF32; deterministic: cuDNN deterministic algorithms by heuristic, "
              "FP32; own: detrain's kernels) -- each replica's algos.csv says what ran"
            : "reduction, atomics and math act on the CPU ops; rng acts on bnn_mlp (how epsilon "
              "reaches backward); conv_algo picks the convolutions (autotune, deterministic: "
              "oneDNN under math fast, op by op where no other control orders the op; own: "
              "detrain's kernels)");
    /* the segments: each start of the run (the first `run`, then every --resume), with its
     * build; the run's start time is the first one's */
    struct dt_strbuf seg = {0};
    char first[64];
    dt_manifest_segments_json(&seg, c->earlier_manifest, start, end, status,
                              c->opt->command ? c->opt->command : "", first, sizeof first);
    dt_strbuf_printf(sb, ", \"start_time\": \"%s\", \"end_time\": ", first);
    if (end) dt_strbuf_printf(sb, "\"%s\"", end);
    else dt_strbuf_printf(sb, "null");
    dt_strbuf_printf(sb, ", \"status\": \"%s\", \"message\": ", status);
    dt_strbuf_json_string(sb, message);
    dt_strbuf_printf(sb, ", \"segments\": [%s]", seg.data);
    dt_strbuf_free(&seg);
    dt_strbuf_printf(sb, ", \"replicas\": [");
    for (int i = 0; i < n_results; i++) {
        dt_strbuf_printf(sb, "%s{\"dir\": ", i ? ", " : "");
        dt_strbuf_json_string(sb, results[i].dir);
        dt_strbuf_printf(sb, ", \"state\": \"%s\"}", state_names[results[i].state]);
    }
    dt_strbuf_printf(sb, "]}");
}

/* <out>/config.json: the resolved config, which `detrain report` loads back. */
static enum dt_status write_config_json(const char *out_dir, const struct dt_experiment *exp,
                                        struct dt_error *err)
{
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    DT_ASSERT(mem != NULL);
    dt_config_write_json(mem, exp);
    fclose(mem);
    struct dt_strbuf sb = {0};
    dt_strbuf_printf(&sb, "%s", text);
    free(text);
    char path[1200];
    snprintf(path, sizeof path, "%s/config.json", out_dir);
    enum dt_status st = dt_manifest_write(path, &sb, err);
    dt_strbuf_free(&sb);
    return st;
}

/* ---- an allocation that fails mid-run ------------------------------------------------- */

/* The experiment's run.json as it is to read when an allocation fails (status failed),
 * kept ready so that writing it needs no memory (core/status.h: dt_set_oom_hook). */
struct oom_manifest {
    char path[1200];
    struct dt_strbuf text;
};

static void on_out_of_memory(void *ctx, size_t bytes)
{
    (void)bytes; /* said on stderr by the caller */
    const struct oom_manifest *o = ctx;
    if (o->text.data) (void)dt_write_file_atomic(o->path, o->text.data, o->text.len, NULL);
    fprintf(stderr,
            "detrain: the run stops: %s says failed (out of memory); make the model "
            "or the batch smaller\n",
            o->path);
    _exit(1);
}

/* Rank 0 arms the hook with the manifest a failure would leave (again after each replica,
 * so that it lists them); NULL c disarms it. The test hook's allocation ceiling
 * (harness/setup/test_hooks.h) holds while it is armed. */
static void arm_oom_manifest(struct oom_manifest *o, const struct run_ctx *c, const char *start,
                             struct dt_replica_result *results, int done)
{
    if (!c || dt_dist_rank(c->opt->dist) != 0) {
        dt_set_oom_hook(NULL, NULL);
        dt_set_alloc_ceiling(SIZE_MAX);
        dt_strbuf_free(&o->text);
        return;
    }
    snprintf(o->path, sizeof o->path, "%s/run.json", c->opt->out_dir);
    experiment_manifest(&o->text, c, start, NULL, "failed",
                        "out of memory: an allocation failed (its size is on stderr); make the "
                        "model or the batch smaller",
                        results, done);
    dt_strbuf_printf(&o->text, "\n");
    dt_set_oom_hook(on_out_of_memory, o);
    const struct dt_test_hooks *h = c->opt->hooks;
    dt_set_alloc_ceiling(h && h->fail_alloc ? h->fail_alloc_above : SIZE_MAX);
}

/* ---- every check that can refuse a run, before the first write -------------------------- */

/* The resident memory of this process now (VmRSS: its code, the libraries it loaded -- the
 * CUDA ones alone are some 200 MiB -- and what it holds so far), 0 when unknown. */
/* A field of /proc/self/status in bytes ("VmRSS", "VmSize"); 0 when unknown. */
static double process_status_bytes(const char *field)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return 0;
    char line[256], fmt[48];
    snprintf(fmt, sizeof fmt, "%s: %%lld kB", field);
    double kib = 0;
    while (fgets(line, sizeof line, f)) {
        long long v;
        if (sscanf(line, fmt, &v) == 1) kib = (double)v;
    }
    fclose(f);
    return kib * 1024.0;
}

static double process_rss_bytes(void) { return process_status_bytes("VmRSS"); }

/* The memory a run of exp needs (bytes), for the check before anything is allocated: this
 * process's baseline (measured now, plus what it adds once running), the dataset as floats,
 * then the largest cell's model
 * state -- cells run one after another -- in floats per parameter, and its activations.
 * The copies per parameter were measured (peak RSS, this machine's CPU backend; test
 * folders.memory_estimate_matches_peak keeps them within 15% for every model at three
 * sizes): w, v, the gradient, the hash copy and work buffers, 4.25 copies, or under
 * reduction: exact 3.35 + one partial per shard; one more with snapshots; 4 more while
 * checkpoints are written (the weights and momenta downloaded and serialised); what the
 * kind keeps (dt_model_size), and under rng: stored every sample's epsilon. *what says
 * which keys drive it. */
/* The data's part of dt_run_memory_bytes (the splits as held, a corpus read twice). */
static double run_data_bytes(const struct dt_experiment *exp)
{
    const struct dt_model_spec spec = dt_experiment_model_spec(exp, 0);
    const double dim = (double)(spec.height * spec.width * spec.channels);
    const bool text = dt_experiment_text(exp);
    /* Fashion-MNIST's 60,000 + 10,000 images; a text's windows overlap (4 bytes a byte) over
     * the corpus's bytes, counted from the files (the default corpus about 2.8 MB), which are
     * held twice while they are read */
    const int64_t corpus = text ? dt_text_corpus_bytes(exp->dataset.path) : 0;
    const double bytes = corpus > 0 ? (double)corpus : 2.8e6;
    double n_train = text ? 0.9 * bytes : 60000, n_test = text ? 0.1 * bytes / dim : 10000;
    if (exp->dataset.train_limit > 0 && (double)exp->dataset.train_limit < n_train)
        n_train = (double)exp->dataset.train_limit;
    if (exp->dataset.test_limit > 0 && (double)exp->dataset.test_limit < n_test)
        n_test = (double)exp->dataset.test_limit;
    return text ? 2 * bytes + n_train * (4 + 1 + 8) + n_test * (dim * 4 + 1)
                : (n_train + n_test) * (dim * 4 + 1) + n_train * 8; /* + order */
}

double dt_run_memory_bytes(const struct dt_experiment *exp, char *what, size_t size)
{
    const struct dt_model_spec spec = dt_experiment_model_spec(exp, 0);
    const double data = run_data_bytes(exp);
    const double B = (double)exp->train.batch, S = (double)exp->train.shards;
    const struct dt_model_kind_info *kind = dt_model_kind(exp->model.kind);
    const struct dt_model_size z = kind->size(&spec);
    double copies = 0; /* the largest over the cells' policies */
    for (int p = 0; p < exp->n_policies; p++) {
        const struct dt_policy *pol = &exp->policies[p];
        double c = pol->reduction == DT_REDUCTION_EXACT ? 3.35 + S : 4.25;
        if (pol->rng == DT_RNG_STORED) c += z.stored_per_param_per_sample * spec.bnn.samples;
        if (c > copies) copies = c;
    }
    copies += z.extra_per_param;
    /* the largest layer's w^T for backward-data (the ordered and the fused fast tiles read
     * it), kept in the backend's scratch across cells: about 3/4 of an MLP's weights */
    copies += 0.75;
    if (exp->report.snapshots > 0) copies += 1;
    if (exp->train.checkpoint_every > 0 || exp->train.checkpoint_at_divergence) copies += 4;
    /* the keys that drive it: the batch, and the kind's own */
    size_t used = (size_t)snprintf(what, size, "model.kind %s, train.batch %" PRId64, kind->name,
                                   exp->train.batch);
    if (kind->keys && used < size) snprintf(what + used, size - used, ", %s", kind->keys);
    /* + what the process adds once it runs (its threads, the BLAS's buffers): about 60 MiB
     * above the baseline measured here, on this machine's CPU backend */
    return process_rss_bytes() + 64.0 * 1024 * 1024 + data +
           4.0 * (z.params * copies + B * z.acts_per_example);
}

/* What this process may allocate: the machine's available memory (MemAvailable + free
 * swap), or RLIMIT_AS when lower (then *address_space: the limit counts address space, not
 * resident memory); +inf when unknown. */
static double memory_allowed(const char **source, bool *address_space)
{
    double avail = INFINITY;
    *source = "available on this machine (MemAvailable + SwapFree)";
    *address_space = false;
    FILE *f = fopen("/proc/meminfo", "r");
    if (f) {
        char line[256];
        double kib = 0;
        bool seen = false;
        while (fgets(line, sizeof line, f)) {
            long long v;
            if (sscanf(line, "MemAvailable: %lld kB", &v) == 1 ||
                sscanf(line, "SwapFree: %lld kB", &v) == 1) {
                kib += (double)v;
                seen = true;
            }
        }
        fclose(f);
        if (seen) avail = kib * 1024.0;
    }
    struct rlimit rl;
    if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
        (double)rl.rlim_cur < avail) {
        avail = (double)rl.rlim_cur;
        *source = "allowed by RLIMIT_AS (ulimit -v)";
        *address_space = true;
    }
    return avail;
}

/* Under RLIMIT_AS what counts is address space, not resident memory: the libraries mapped
 * (the CUDA ones: hundreds of MiB never touched), and for each thread its stack and the
 * malloc arena glibc reserves for it (64 MiB each, up to 8 a core). So the estimate's
 * baseline becomes the address space in use now (VmSize, not VmRSS), plus those reserves for
 * the pool's threads, the main thread and one more (measured: a GPT whose run needs 1.55 GiB
 * of address space, 0.71 GiB resident, is estimated at 1.8 GiB). */
static double address_space_bytes(const struct dt_experiment *exp, double need)
{
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (cores < 1) cores = 1;
    const double threads = (exp->backend.threads > 0 ? exp->backend.threads : (double)cores) + 2;
    const double arenas = fmin(threads, 8.0 * (double)cores);
    const double mib = 1024.0 * 1024.0;
    return need - process_rss_bytes() + process_status_bytes("VmSize") + arenas * 64 * mib +
           threads * 8 * mib;
}

static enum dt_status check_memory(const struct dt_experiment *exp, struct dt_error *err)
{
    char what[400];
    double need = dt_run_memory_bytes(exp, what, sizeof what);
    const char *source;
    bool address_space;
    const double have = memory_allowed(&source, &address_space);
    if (address_space) {
        need = address_space_bytes(exp, need);
        strncat(what, "; address space: the libraries mapped, stacks and malloc arenas",
                sizeof what - strlen(what) - 1);
    }
    if (need <= have) return DT_OK;
    const double gib = 1024.0 * 1024.0 * 1024.0, data = run_data_bytes(exp);
    if (data > 0.5 * need) /* the data set is most of it: naming the model would mislead */
        return dt_error_set(
            err, DT_ERR_CONFIG,
            "this run needs about %.1f GiB of memory, more than the %.1f GiB %s, "
            "and the data set is %.1f GiB of it (%s%s%s): %s",
            need / gib, have / gib, source, data / gib, exp->dataset.name,
            exp->dataset.path[0] ? " at " : "", exp->dataset.path[0] ? exp->dataset.path : "",
            dt_experiment_text(exp) ? "give a smaller corpus (dataset.path): it is read whole"
                                    : "give a smaller data set (dataset.path) or limit it "
                                      "(dataset.train_limit, dataset.test_limit)");
    return dt_error_set(err, DT_ERR_CONFIG,
                        "this run needs about %.1f GiB of memory (%s), more than the %.1f GiB "
                        "%s: make the model or the batch smaller",
                        need / gib, what, have / gib, source);
}

/* The keys of exp checked against the model it builds: shards vs batch vs ranks, and what
 * the model supports on several ranks (harness/run/dist.h). */
static enum dt_status check_model(const struct run_ctx *c, struct dt_error *err)
{
    struct dt_model *m = NULL;
    DT_FORWARD_IF_ERROR(dt_experiment_build_model(&m, c->exp, c->be, c->ds->train.n, err));
    enum dt_status st =
        dt_dist_check(c->opt->dist, m, c->exp->train.batch, c->exp->train.shards, err);
    dt_model_destroy(m);
    return st;
}

/* One experiment per folder (outdir.h): may this run write into opt->out_dir? An existing
 * folder is locked first (held until the run ends) and then looked at. A folder that holds
 * a result is refused unless the run resumes it or opt->overwrite (then *clear: it is
 * emptied once every other check has passed). */
static enum dt_status claim_folder(const struct dt_experiment *exp,
                                   const struct dt_run_options *opt, bool resume,
                                   struct dt_folder_lock *lock, bool *clear, struct dt_error *err)
{
    *clear = false;
    const char *dir = opt->out_dir;
    DT_FORWARD_IF_ERROR(dt_out_location_check(dir, dt_layout_longest(exp), err));
    enum dt_folder_state state;
    DT_FORWARD_IF_ERROR(dt_folder_state(&state, dir, err));
    if (state != DT_FOLDER_ABSENT && !opt->dry_run) { /* a dry run writes not even a lock */
        DT_FORWARD_IF_ERROR(dt_folder_lock_take(lock, dir, opt->command, err));
        DT_FORWARD_IF_ERROR(dt_folder_state(&state, dir, err)); /* now that it is ours */
    }
    if (resume) return dt_resume_check_folder(dir, exp, err);
    if (state == DT_FOLDER_ABSENT || state == DT_FOLDER_EMPTY) return DT_OK;
    if (state == DT_FOLDER_OTHER)
        return dt_error_set(err, DT_ERR_USAGE,
                            "%s: holds files that are not a detrain result (no detrain "
                            "run.json and config.json), and detrain writes an experiment only "
                            "into a new or empty folder: choose another --out",
                            dir);
    /* a result: what else is there? --overwrite removes only what detrain wrote */
    char foreign[1200];
    DT_FORWARD_IF_ERROR(dt_result_foreign(dir, foreign, sizeof foreign, err));
    char foreign_shown[300] = "";
    if (foreign[0]) dt_escape_str(foreign_shown, sizeof foreign_shown, foreign);
    if (opt->overwrite) {
        if (foreign[0])
            return dt_error_set(err, DT_ERR_USAGE,
                                "%s: holds an earlier result and %s, which detrain did not "
                                "write; --overwrite removes only a result's own files, so "
                                "nothing was removed: move it out of the folder first, or "
                                "choose another --out",
                                dir, foreign_shown);
        *clear = true;
        return DT_OK;
    }
    char also[500] = "";
    if (foreign[0])
        snprintf(also, sizeof also,
                 " (it also holds %s, which detrain did not write: move it out before "
                 "--overwrite, which refuses to remove anything beside a result)",
                 foreign_shown);
    char path[1200];
    snprintf(path, sizeof path, "%s/config.json", dir);
    char *stored = dt_results_read_text(path, NULL);
    char diff[800] = "";
    bool differ = true;
    if (stored) {
        char *now = dt_checkpoint_config_text(exp);
        struct dt_error ignored;
        if (dt_checkpoint_config_diff(diff, sizeof diff, &differ, stored, "there", now,
                                      "this config", &ignored) != DT_OK)
            snprintf(diff, sizeof diff, "its config.json is not readable as one");
        free(now);
        free(stored);
    } else {
        snprintf(diff, sizeof diff, "no readable config.json");
    }
    if (differ)
        return dt_error_set(err, DT_ERR_USAGE,
                            "%s: holds another experiment (%s); it is kept as it is: choose "
                            "another --out, or add --overwrite to remove it and run this "
                            "config there%s",
                            dir, diff, also);
    return dt_error_set(err, DT_ERR_USAGE,
                        "%s: holds a run of this config; it is kept as it is: --resume %s goes "
                        "on with it (or extends it to more train.steps), --overwrite removes it "
                        "and runs again, or choose another --out%s",
                        dir, dir, also);
}

/* After every check: the folder becomes this run's (created, or emptied for --overwrite)
 * and its lock is held. */
static enum dt_status take_folder(const char *dir, const char *command, bool clear,
                                  struct dt_folder_lock *lock, bool quiet, bool *made,
                                  struct dt_error *err)
{
    *made = false;
    if (clear) {
        DT_FORWARD_IF_ERROR(dt_result_clear(dir, err));
        char shown[4 * 1100];
        if (!quiet)
            fprintf(stderr, "detrain: --overwrite: removed the earlier result in %s\n",
                    dt_escape_path(shown, sizeof shown, dir));
    }
    if (lock->fd < 0) { /* a new folder */
        *made = !dt_path_exists(dir);
        DT_FORWARD_IF_ERROR(dt_mkdir_p(dir, err));
        DT_FORWARD_IF_ERROR(dt_folder_lock_take(lock, dir, command, err));
        enum dt_folder_state state;
        DT_FORWARD_IF_ERROR(dt_folder_state(&state, dir, err));
        if (state != DT_FOLDER_EMPTY) /* another run made it meanwhile */
            return dt_error_set(err, DT_ERR_USAGE,
                                "%s: another run wrote into this new folder first; choose "
                                "another --out",
                                dir);
    }
    return dt_dir_check_writable(dir, err);
}

/* A start whose first writes failed leaves no half result: its run.json and config.json
 * (and their temporary files) removed, so that the folder is empty again. */
static void unstart_folder(const char *dir)
{
    static const char *const names[] = {"run.json", "config.json"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char path[1300];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        (void)unlink(path);
        snprintf(path, sizeof path, "%s/%s.tmp", dir, names[i]);
        (void)unlink(path);
        snprintf(path, sizeof path, "%s/%s.tmp-%ld", dir, names[i], (long)getpid());
        (void)unlink(path);
    }
}

/* An experiment while it runs: what train_experiment's phases share. */
struct experiment {
    struct run_ctx c;
    struct dt_dataset ds;
    struct dt_resident *train_set; /* c.train_set, owned here */
    struct dt_folder_lock lock;
    bool writer, multi;
    char start[32];
    char manifest_path[1200];
    struct dt_strbuf sb; /* run.json */
    struct oom_manifest oom;
    struct dt_replica_result *results;
    int done;
    bool any_failed;
    bool made_dir;  /* the run made its folder (a new one) */
    bool unstarted; /* its first writes failed: removed again, no manifest rewritten */
};

/* Every rank goes on, or none: st, or another rank's failure ("rank 2 <what>"). */
static enum dt_status ranks_all_ok(const struct experiment *e, enum dt_status st, const char *what,
                                   struct dt_error *err)
{
    if (!e->multi) return st;
    int who = -1;
    int worst = dt_dist_max_status(e->c.opt->dist, st == DT_OK ? 0 : (int)st, &who);
    if (worst != 0 && st == DT_OK)
        st = dt_error_set(err, (enum dt_status)worst, "rank %d %s", who, what);
    return st;
}

/* The test hooks that act on a run (harness/setup/test_hooks.h): the kill point and the
 * poison (on one rank, when the hook names it). */
static enum dt_status take_test_hooks(struct run_ctx *c, struct dt_error *err)
{
    const struct dt_test_hooks *h = c->opt->hooks;
    if (!h) return DT_OK;
    c->kill_after = h->kill_after_step;
    c->kill_signal = h->kill_signal ? h->kill_signal : SIGKILL;
    enum dt_status st = dt_fault_poison_parse(c, h->poison, err);
    if (h->poison_rank >= 0 && h->poison_rank != dt_dist_rank(c->opt->dist))
        c->poison.armed = false;
    return st;
}

/* The backend (one GPU per rank: rank i of a machine takes backend.gpu + i) and the data. */
static enum dt_status open_backend_and_data(struct experiment *e, struct dt_error *err)
{
    const struct dt_experiment *exp = e->c.exp;
    struct dt_backend *be = NULL;
    enum dt_status st =
        dt_experiment_open_backend(&be, exp, dt_dist_local_rank(e->c.opt->dist), err);
    if (st == DT_ERR_UNSUPPORTED && e->c.opt->dry_run && !e->c.opt->need_device &&
        exp->backend.device != DT_DEVICE_CPU) {
        /* a dry run of a GPU config where there is none: the rest checked on the CPU */
        fprintf(stderr, "detrain: dry run: %s; the other checks are made with the CPU backend\n",
                err->msg);
        struct dt_experiment *cpu = dt_xmalloc(sizeof *cpu);
        *cpu = *exp;
        cpu->backend.device = DT_DEVICE_CPU;
        *err = (struct dt_error){0};
        st = dt_experiment_open_backend(&be, cpu, 0, err);
        free(cpu);
    }
    if (st != DT_OK) return st;
    st = dt_experiment_load_dataset(&e->ds, exp, err);
    if (st != DT_OK) {
        dt_backend_destroy(be);
        return st;
    }
    if (exp->train.batch > e->ds.train.n) {
        char lim[80] = "";
        if (exp->dataset.train_limit > 0)
            snprintf(lim, sizeof lim, ", dataset.train_limit: %lld",
                     (long long)exp->dataset.train_limit);
        st = dt_error_set(err, DT_ERR_CONFIG,
                          "train.batch is %lld but the training set holds %lld example%s (%s%s): "
                          "a batch would hold some examples twice; make train.batch at most "
                          "%lld",
                          (long long)exp->train.batch, (long long)e->ds.train.n,
                          e->ds.train.n == 1 ? "" : "s", exp->dataset.name, lim,
                          (long long)e->ds.train.n);
        dt_dataset_free(&e->ds);
        dt_backend_destroy(be);
        return st;
    }
    e->c.be = be;
    e->c.ds = &e->ds;
    e->train_set = dt_batch_resident(be, &e->ds.train);
    e->c.train_set = e->train_set;
    return DT_OK;
}

static void close_backend_and_data(struct experiment *e)
{
    dt_backend_resident_free(e->c.be, e->train_set);
    dt_backend_destroy(e->c.be);
    dt_dataset_free(&e->ds);
}

/* The first phase: every check that can refuse the run before the first write into the
 * folder, so that a refused run changes nothing on disk (docs/outputs.md); then the folder
 * taken and run.json / config.json written. On failure everything is released. */
static enum dt_status experiment_open(struct experiment *e, const struct dt_experiment *exp,
                                      const struct dt_run_options *opt, bool resume,
                                      struct dt_error *err)
{
    memset(e, 0, sizeof *e);
    e->lock = (struct dt_folder_lock){.fd = -1};
    e->c = (struct run_ctx){.exp = exp, .opt = opt, .resume = resume};
    /* rank 0 writes every file (harness/run/dist.h) */
    e->writer = dt_dist_rank(opt->dist) == 0;
    e->multi = dt_dist_size(opt->dist) > 1;
    /* every refusal below reaches ranks_all_ok: a rank that cannot read the data (say)
     * must not leave the others waiting for it */
    enum dt_status st = check_memory(exp, err);
    if (st == DT_OK) st = open_backend_and_data(e, err);
    const bool opened = st == DT_OK;
    struct run_ctx *c = &e->c;
    c->tty = !opt->quiet && isatty(STDERR_FILENO);
    c->steps_total = (int64_t)dt_cell_count(exp) * exp->replicas * exp->train.steps;
    if (st == DT_OK) st = take_test_hooks(c, err);
    if (st == DT_OK) st = check_model(c, err);
    bool clear = false;
    if (st == DT_OK && e->writer) st = claim_folder(exp, opt, resume, &e->lock, &clear, err);
    if (st == DT_OK) dt_data_digest(c->data_digest, &e->ds);
    if (resume && st == DT_OK && e->writer) st = dt_resume_check_data(opt->out_dir, c, err);
    if (opt->data_of && st == DT_OK) st = dt_check_data_recorded(opt->data_of, c, err);
    if (resume && st == DT_OK) st = dt_resume_check_plans(c, err);
    st = ranks_all_ok(e, st, "refused the run (its message is on its stderr)", err);
    const bool every_rank_ready = st == DT_OK;
    if (st == DT_OK && e->writer && !opt->dry_run)
        st =
            take_folder(opt->out_dir, opt->command, clear, &e->lock, opt->quiet, &e->made_dir, err);
    if (st != DT_OK || opt->dry_run) { /* a dry run stops here, every check made */
        /* the others wait for rank 0's start below: they learn that it failed */
        if (e->multi && every_rank_ready) (void)dt_dist_max_status(opt->dist, (int)st, NULL);
        dt_folder_lock_release(&e->lock);
        if (opened) close_backend_and_data(e);
        return st;
    }
    c->t_start = dt_now_s();
    dt_utc_iso8601(e->start, sizeof e->start);
    snprintf(e->manifest_path, sizeof e->manifest_path, "%s/run.json", opt->out_dir);
    if (resume) c->earlier_manifest = dt_results_read_text(e->manifest_path, NULL);
    e->results = dt_xcalloc((size_t)dt_cell_count(exp) * (size_t)exp->replicas, sizeof *e->results);
    experiment_manifest(&e->sb, c, e->start, NULL, "running", "", e->results, 0);
    if (e->writer) st = dt_manifest_write(e->manifest_path, &e->sb, err);
    if (st == DT_OK && e->writer) st = write_config_json(opt->out_dir, exp, err);
    if (st != DT_OK && e->writer && !resume) { /* the first writes failed (a full disk): */
        unstart_folder(opt->out_dir);          /* the folder as it was, for the next run to take */
        e->unstarted = true;
    }
    if (st == DT_OK) arm_oom_manifest(&e->oom, c, e->start, e->results, 0);
    return ranks_all_ok(e, st, "could not start", err);
}

/* A signal on any rank stops every rank here (with one rank: nothing to do). */
static void ranks_share_stop(const struct experiment *e)
{
    if (!e->multi) return;
    int sig = dt_dist_max_status(e->c.opt->dist, (int)dt_stop_requested, NULL);
    if (sig && !dt_stop_requested) dt_stop_requested = sig;
}

static void say_plan(const struct experiment *e)
{
    const struct run_ctx *c = &e->c;
    const struct dt_experiment *exp = c->exp;
    const int n_cells = dt_cell_count(exp);
    if (e->multi)
        fprintf(stderr,
                "detrain: %d ranks (%s), each step's batch of %" PRId64 " in %" PRId64 " shards\n",
                dt_dist_size(c->opt->dist), dt_dist_library(c->opt->dist), exp->train.batch,
                exp->train.shards);
    char out_shown[4 * 1100];
    dt_escape_path(out_shown, sizeof out_shown, c->opt->out_dir);
    fprintf(stderr,
            "detrain: %s: %d cell%s (%d vary setting%s x %d polic%s) x %d replica%s, "
            "%" PRId64 " steps of %" PRId64 " on %s (%d threads); train %" PRId64 ", test %" PRId64
            " examples\n"
            "detrain: writing to %s\n",
            exp->name, n_cells, n_cells == 1 ? "" : "s", exp->n_vary, exp->n_vary == 1 ? "" : "s",
            exp->n_policies, exp->n_policies == 1 ? "y" : "ies", exp->replicas,
            exp->replicas == 1 ? "" : "s", exp->train.steps, exp->train.batch,
            dt_backend_name(c->be), dt_backend_threads(c->be), e->ds.train.n, e->ds.test.n,
            out_shown);
}

/* The second phase: every replica of every cell, then the overhead measurement. */
static enum dt_status experiment_loop(struct experiment *e, struct dt_error *err)
{
    struct run_ctx *c = &e->c;
    const struct dt_experiment *exp = c->exp;
    if (!c->opt->quiet) say_plan(e);
    dt_stop_install_handlers();
    enum dt_status st = DT_OK;
    for (int cell = 0; st == DT_OK && cell < dt_cell_count(exp) && !dt_stop_requested; cell++) {
        for (int r = 0; st == DT_OK && r < exp->replicas && !dt_stop_requested; r++) {
            ranks_share_stop(e); /* a signal between replicas stops every rank here */
            if (dt_stop_requested) break;
            st = run_replica(c, cell, r, &e->results[e->done], err);
            e->any_failed |= e->results[e->done].state == DT_REPLICA_FAILED;
            e->done++;
            arm_oom_manifest(&e->oom, c, e->start, e->results, e->done);
        }
    }
    dt_progress_end(c);
    ranks_share_stop(e); /* every rank takes part: the sampled steps are combined steps too */
    if (c->opt->hooks && c->opt->hooks->forced_order) (void)dt_backend_set_forced_order(c->be, 0);
    if (st == DT_OK && !dt_stop_requested)
        st = dt_overhead_measure(exp, c->opt->out_dir, c->opt->quiet, c->opt->dist, c->be,
                                 &e->ds.train, c->train_set, err);
    return st;
}

/* The last phase: the caller's report (also of an interrupted run: it reads only what is
 * on disk), the final run.json, everything released. */
static enum dt_status experiment_close(struct experiment *e, enum dt_status st,
                                       struct dt_error *err)
{
    struct run_ctx *c = &e->c;
    const struct dt_run_options *opt = c->opt;
    const bool interrupted = dt_stop_requested != 0;
    if (interrupted && st == DT_OK)
        st = dt_error_set(err, DT_ERR_INTERRUPTED, "interrupted by signal %d; traces kept in %s",
                          (int)dt_stop_requested, opt->out_dir);
    if (e->writer && opt->report && (st == DT_OK || interrupted)) {
        struct dt_error rerr;
        enum dt_status rst = opt->report(opt->out_dir, opt->quiet, &rerr);
        if (rst != DT_OK && st == DT_OK) {
            st = rst;
            if (err) *err = rerr;
        } else if (rst != DT_OK) {
            fprintf(stderr, "detrain: report: %s\n", rerr.msg);
        }
    }
    if (st == DT_OK && e->any_failed)
        st = dt_error_set(err, DT_ERR_NUMERIC, "some replicas failed; see their run.json");
    char end[32];
    dt_utc_iso8601(end, sizeof end);
    const char *status = st == DT_OK ? "completed" : interrupted ? "interrupted" : "failed";
    experiment_manifest(&e->sb, c, e->start, end, status,
                        st == DT_OK ? ""
                        : err       ? err->msg
                                    : "",
                        e->results, e->done);
    struct dt_error merr;
    if (e->writer && !e->unstarted && dt_manifest_write(e->manifest_path, &e->sb, &merr) != DT_OK)
        fprintf(stderr, "detrain: %s\n", merr.msg);
    arm_oom_manifest(&e->oom, NULL, NULL, NULL, 0);
    dt_strbuf_free(&e->sb);
    free(e->results);
    free(c->earlier_manifest);
    close_backend_and_data(e);
    dt_folder_lock_release(&e->lock);
    if (e->unstarted && e->made_dir) (void)rmdir(opt->out_dir); /* empty again: as it was */
    return st;
}

/* dt_train_experiment, and with `resume` dt_train_resume. */
static enum dt_status train_experiment(const struct dt_experiment *exp,
                                       const struct dt_run_options *opt, bool resume,
                                       struct dt_error *err)
{
    struct experiment *e = dt_xmalloc(sizeof *e); /* the OOM hook points into it */
    enum dt_status st = experiment_open(e, exp, opt, resume, err);
    if (st == DT_OK && !opt->dry_run) {
        st = experiment_loop(e, err);
        st = experiment_close(e, st, err);
    } else if (e->results) { /* opened, but a rank could not start */
        st = experiment_close(e, st, err);
    }
    free(e);
    return st;
}

enum dt_status dt_train_experiment(const struct dt_experiment *exp,
                                   const struct dt_run_options *opt, struct dt_error *err)
{
    return train_experiment(exp, opt, false, err);
}

enum dt_status dt_train_resume(const struct dt_experiment *exp, const struct dt_run_options *opt,
                               struct dt_error *err)
{
    return train_experiment(exp, opt, true, err);
}
