/* A replica's output files (docs/DESIGN.md, "Data path"): trace.csv and tensors.csv through
 * the hashing pipeline, metrics.csv, times.csv, predictions.csv, weight snapshots, the
 * checkpoint and the replica's run.json. Opened by the training loop (train.c), created or,
 * for a resumed replica, opened to add rows after its checkpoint (resume.c cut them back). */
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
#include "determinism/streams.h"
#include "harness/record/csv.h"
#include "harness/record/hash.h"
#include "harness/record/layout.h"
#include "harness/record/manifest.h"
#include "harness/record/outdir.h"
#include "harness/record/snapshot.h"
#include "harness/setup/model.h"

/* hash.async resolved: `auto` overlaps hashing with the next steps where the weights are
 * not in host memory (a device backend: hashing them inline would stall the device while
 * they are copied and hashed) and hashes inline on the CPU, whose pool already keeps every
 * core busy during a step. */
bool dt_replica_hash_async(const struct dt_experiment *exp, struct dt_model *m)
{
    switch (exp->hash.async) {
    case DT_HASH_ASYNC_ON: return true;
    case DT_HASH_ASYNC_OFF: return false;
    case DT_HASH_ASYNC_AUTO: break;
    }
    return m->n_tensors > 0 && dt_backend_host_view(m->be, m->params[0].w) == NULL;
}

enum dt_status dt_replica_metrics_row(FILE *f, const char *path, int64_t step,
                                      const struct dt_eval *e, struct dt_error *err)
{
    fprintf(f, "%" PRId64 ",%.9g,%.6f,%.6f\n", step, e->loss, e->accuracy, e->ece);
    if (fflush(f) != 0 || ferror(f)) return dt_error_set(err, DT_ERR_IO, "%s: write failed", path);
    return DT_OK;
}

/* The replica's run.json (DT_ERR_IO naming it when it cannot be written). */
enum dt_status dt_replica_manifest_write(const struct run_ctx *c, int cell, int r,
                                         const struct dt_replica_result *res, const char *start,
                                         bool async, const struct dt_algolog *algos,
                                         struct dt_error *e)
{
    static const char *const state_names[] = {"completed", "failed", "interrupted"};
    const struct dt_policy *pol = &c->exp->policies[dt_cell_policy(c->exp, cell)];
    const unsigned vary = c->exp->vary_sets[dt_cell_vary(c->exp, cell)];
    struct dt_strbuf sb = {0};
    char buf[256], end[32];
    dt_utc_iso8601(end, sizeof end);
    dt_strbuf_printf(&sb, "{\"policy\": ");
    dt_strbuf_json_string(&sb, pol->name);
    dt_policy_describe(buf, sizeof buf, pol);
    dt_strbuf_printf(&sb, ", \"controls\": ");
    dt_strbuf_json_string(&sb, buf);
    dt_vary_label(buf, sizeof buf, vary);
    dt_strbuf_printf(&sb, ", \"vary\": ");
    dt_strbuf_json_string(&sb, buf);
    dt_strbuf_printf(&sb, ", \"replica\": %d, \"backend\": \"%s\", \"threads\": %d", r,
                     dt_backend_name(c->be), dt_backend_threads(c->be));
    dt_strbuf_printf(&sb,
                     ", \"stream_replica\": {\"init\": %" PRIu64 ", \"data_order\": %" PRIu64
                     ", \"epsilon\": %" PRIu64 "}",
                     dt_stream_replica(vary, DT_VARY_INIT, (uint64_t)r),
                     dt_stream_replica(vary, DT_VARY_DATA_ORDER, (uint64_t)r),
                     dt_stream_replica(vary, DT_VARY_EPSILON, (uint64_t)r));
    dt_strbuf_printf(&sb, ", \"state\": \"%s\", \"reason\": ", state_names[res->state]);
    dt_strbuf_json_string(&sb, res->reason);
    dt_strbuf_printf(&sb, ", \"steps_completed\": %" PRId64 ", \"final_model_digest\": \"%s\"",
                     res->steps_done, res->final_digest);
    if (res->resumed_from_step >= 0)
        dt_strbuf_printf(&sb, ", \"resumed_from_step\": %" PRId64, res->resumed_from_step);
    if (isfinite(res->test_acc))
        dt_strbuf_printf(&sb, ", \"test_loss\": %.9g, \"test_accuracy\": %.6f, \"test_ece\": %.6f",
                         res->test_loss, res->test_acc, res->test_ece);
    if (dt_model_kind(c->exp->model.kind)->draws_epsilon)
        dt_strbuf_printf(&sb,
                         ", \"epsilon\": {\"member\": %" PRIu64 ", \"philox_layout\": %d, "
                         "\"lanes\": %" PRId64 ", \"lfsr_check_every\": %" PRId64
                         ", \"eps_bytes_held\": %" PRId64 ", \"eps_workspace_bytes\": %" PRId64
                         ", \"rng_state_bytes\": %" PRId64 "}",
                         dt_stream_replica(vary, DT_VARY_EPSILON, (uint64_t)r),
                         DT_PHILOX_LAYOUT_VERSION, c->exp->model.lanes,
                         dt_experiment_lfsr_check_every(c->exp), res->mem.eps_held,
                         res->mem.eps_workspace, res->mem.rng_state);
    /* hash_ms is the training thread's share of hashing: the whole hash when inline, the
     * copy issued and the rows written when pipelined (async) */
    dt_strbuf_printf(&sb,
                     ", \"step_ms_median\": %.6g, \"hash_ms_median\": %.6g, "
                     "\"hash_async\": %s, \"hash_digest\": \"%s\"",
                     isfinite(res->step_ms_median) ? res->step_ms_median : -1.0,
                     isfinite(res->hash_ms_median) ? res->hash_ms_median : -1.0,
                     async ? "true" : "false",
                     c->exp->hash.digest == DT_HASH_DIGEST_TREE ? "tree" : "sha256");
    if (isfinite(res->host_waits_per_step)) /* a GPU's: the step's waits, its end included */
        dt_strbuf_printf(&sb, ", \"host_waits_per_step\": %.4g, \"host_waits_first_step\": %.4g",
                         res->host_waits_per_step, res->host_waits_first_step);
    if (isfinite(res->host_waits_steady)) /* the steps after the first */
        dt_strbuf_printf(&sb, ", \"host_waits_steady\": %.4g", res->host_waits_steady);
    if (algos->steps_noted > 0) { /* library algorithm choices (algos.csv has every row) */
        dt_strbuf_printf(&sb, ", ");
        dt_algolog_json(algos, &sb);
    }
    dt_strbuf_printf(&sb, ", \"start_time\": \"%s\", \"end_time\": \"%s\"}", start, end);
    char path[1300];
    snprintf(path, sizeof path, "%s/run.json", res->dir);
    enum dt_status st = dt_manifest_write(path, &sb, e);
    dt_strbuf_free(&sb);
    return st;
}

/* Every parameter of m at `step` into <dir>/snapshots/ (harness/record/snapshot.h). */
static enum dt_status write_snapshot(struct dt_model *m, struct replica_io *io, const char *dir,
                                     int64_t step, struct dt_error *err)
{
    const char *names[DT_SNAPSHOT_MAX_TENSORS];
    const float *data[DT_SNAPSHOT_MAX_TENSORS];
    int64_t counts[DT_SNAPSHOT_MAX_TENSORS];
    DT_ASSERT(m->n_tensors <= DT_SNAPSHOT_MAX_TENSORS);
    int64_t off = 0;
    for (int i = 0; i < m->n_tensors; i++) {
        const struct dt_param *p = &m->params[i];
        dt_backend_download(m->be, io->weights + off, p->w, (size_t)p->n * sizeof(float));
        names[i] = p->name;
        data[i] = io->weights + off;
        counts[i] = p->n;
        off += p->n;
    }
    char path[1400];
    dt_snapshot_path(path, sizeof path, dir, step);
    return dt_snapshot_write(path, step, m->n_tensors, names, counts, data, err);
}

bool dt_replica_snapshot_due(const struct replica_io *io, int64_t s)
{
    return io->next_snap < io->n_snaps && io->snap_steps[io->next_snap] == s;
}

/* The snapshot due at step s, if any. Readers check a snapshot against the trace's digest
 * at its step, so the pipeline is drained first: the trace has that row before the file
 * exists. */
enum dt_status dt_replica_maybe_snapshot(struct dt_model *m, struct replica_io *io, const char *dir,
                                         int64_t s, struct dt_error *err)
{
    if (!dt_replica_snapshot_due(io, s)) return DT_OK;
    io->next_snap++;
    DT_FORWARD_IF_ERROR(dt_hashpipe_drain(io->hp, err));
    return write_snapshot(m, io, dir, s, err);
}

enum dt_status dt_replica_predictions_write(const char *dir, const uint8_t *labels,
                                            const uint8_t *pred, int64_t n, struct dt_error *err)
{
    FILE *f;
    char path[1300];
    DT_FORWARD_IF_ERROR(dt_csv_create(&f, path, sizeof path, dir, "predictions.csv",
                                      DT_PREDICTIONS_HEADER, false, err));
    for (int64_t i = 0; i < n; i++) fprintf(f, "%" PRId64 ",%d,%d\n", i, labels[i], pred[i]);
    enum dt_status st = dt_csv_flush(f, path, err);
    if (fclose(f) != 0 && st == DT_OK)
        st = dt_error_set(err, DT_ERR_IO, "%s: write failed: %s", path, strerror(errno));
    return st;
}

enum dt_status dt_replica_sample_write(struct dt_model *m, const struct dt_experiment *exp,
                                       const struct dt_policy *pol, const char *dir,
                                       struct dt_error *err)
{
    const size_t np = sizeof DT_SAMPLE_PROMPT - 1;
    uint8_t *text = dt_xmalloc(np + DT_SAMPLE_BYTES);
    const uint64_t key =
        dt_stream_key(exp->train.seed, 0, DT_PURPOSE_SAMPLE, (uint64_t)exp->train.steps, 0);
    enum dt_status st = dt_gpt_sample(m, (const uint8_t *)DT_SAMPLE_PROMPT, (int64_t)np,
                                      DT_SAMPLE_BYTES, DT_SAMPLE_TEMPERATURE, key, pol, text);
    char path[1300];
    snprintf(path, sizeof path, "%.1200s/sample.txt", dir);
    if (st == DT_OK) st = dt_write_file_atomic(path, text, np + DT_SAMPLE_BYTES, err);
    else if (err) dt_error_set(err, st, "%s: sampling text failed: %s", path, dt_status_str(st));
    free(text);
    return st;
}

/* trace.csv and tensors.csv opened to add rows: the counterpart of dt_trace_open (which
 * creates them) for a resumed replica, whose files were cut back to its checkpoint. */
static enum dt_status trace_open_append(struct dt_trace_writer *t, const char *dir, bool per_tensor,
                                        struct dt_error *err)
{
    memset(t, 0, sizeof *t);
    snprintf(t->trace_path, sizeof t->trace_path, "%.1000s/trace.csv", dir);
    t->trace = dt_out_fopen(t->trace_path, true, err);
    if (!t->trace) return DT_ERR_IO;
    if (!per_tensor) return DT_OK;
    snprintf(t->tensors_path, sizeof t->tensors_path, "%.1000s/tensors.csv", dir);
    t->tensors = dt_out_fopen(t->tensors_path, true, err);
    return t->tensors ? DT_OK : DT_ERR_IO;
}

/* The replica's output files: created, or with resume_step >= 0 opened to go on after that
 * step (snapshots due up to it are already on disk). */
enum dt_status dt_replica_io_open(struct replica_io *io, const struct dt_experiment *exp,
                                  struct dt_model *m, const char *dir, int64_t resume_step,
                                  struct dt_error *err)
{
    const bool append = resume_step >= 0;
    memset(io, 0, sizeof *io);
    io->submitted = io->kept_step = -1;
    int64_t total = 0;
    for (int i = 0; i < m->n_tensors; i++) total += m->params[i].n;
    DT_ASSERT(exp->report.snapshots + 1 <= (int)(sizeof io->snap_steps / sizeof io->snap_steps[0]));
    io->n_snaps = dt_snapshot_steps(exp, io->snap_steps);
    while (append && io->next_snap < io->n_snaps && io->snap_steps[io->next_snap] <= resume_step)
        io->next_snap++;
    if (io->n_snaps > 0) {
        char sdir[1300];
        dt_snapshot_dir(sdir, sizeof sdir, dir);
        DT_FORWARD_IF_ERROR(dt_mkdir_p(sdir, err));
        io->weights = dt_xmalloc((size_t)total * sizeof(float));
    }
    io->trace_open = true; /* closing a writer that never opened is a no-op */
    DT_FORWARD_IF_ERROR(
        append ? trace_open_append(&io->tw, dir, exp->hash.per_tensor, err)
               : dt_trace_open(&io->tw, dir, exp->hash.per_tensor, exp->hash.digest, err));
    DT_FORWARD_IF_ERROR(dt_hashpipe_create(&io->hp, m, &io->tw, exp->hash.per_tensor,
                                           dt_replica_hash_async(exp, m), err));
    DT_FORWARD_IF_ERROR(dt_csv_create(&io->metrics, io->metrics_path, sizeof io->metrics_path, dir,
                                      "metrics.csv", DT_METRICS_HEADER, append, err));
    return dt_csv_create(&io->times, io->times_path, sizeof io->times_path, dir, "times.csv",
                         DT_TIMES_HEADER, append, err);
}

/* Close everything; the first error wins (st is the status so far). */
enum dt_status dt_replica_io_close(struct replica_io *io, enum dt_status st, struct dt_error *err)
{
    struct dt_error e;
    dt_hashpipe_destroy(io->hp); /* drained by the caller: nothing left to write */
    io->hp = NULL;
    if (io->trace_open && dt_trace_close(&io->tw, &e) != DT_OK && st == DT_OK) {
        st = e.status;
        if (err) *err = e;
    }
    FILE *files[2] = {io->metrics, io->times};
    const char *paths[2] = {io->metrics_path, io->times_path};
    for (int i = 0; i < 2; i++)
        if (files[i] && fclose(files[i]) != 0 && st == DT_OK)
            st = dt_error_set(err, DT_ERR_IO, "%s: write failed: %s", paths[i], strerror(errno));
    free(io->weights);
    return st;
}

/* Give the pipeline step s (tracking the last step given, for the checkpoint). */
enum dt_status dt_replica_submit_hash(struct replica_io *io, int64_t s, float loss,
                                      struct dt_error *err)
{
    io->submitted = s;
    return dt_hashpipe_submit(io->hp, s, loss, err);
}

/* The checkpoint of m at its current step, written once every hashed step so far is in the
 * trace and the other files are flushed: a resume cuts them back to exactly this step. */
enum dt_status dt_replica_checkpoint_write(const struct run_ctx *c, struct dt_model *m,
                                           struct replica_io *io, const struct dt_policy *pol,
                                           const struct dt_checkpoint_info *streams,
                                           const char *dir, struct dt_error *err)
{
    DT_FORWARD_IF_ERROR(dt_hashpipe_drain(io->hp, err));
    DT_FORWARD_IF_ERROR(dt_csv_flush(io->times, io->times_path, err));
    DT_FORWARD_IF_ERROR(dt_csv_flush(io->metrics, io->metrics_path, err));
    struct dt_checkpoint_info info = *streams;
    info.order_position = m->step * c->exp->train.batch;
    info.traced_step = io->submitted >= 0 ? io->submitted : io->kept_step;
    info.traced_digest = io->submitted >= 0 ? dt_hashpipe_last_digest(io->hp) : io->kept_digest;
    char path[1300];
    dt_checkpoint_path(path, sizeof path, dir);
    return dt_checkpoint_write(path, c->exp, pol, m, &info, err);
}

/* The model digest of the step just hashed, as hex: rank 0's from its pipeline (drained),
 * the other ranks' (which write nothing) computed here. */
enum dt_status dt_replica_rank_digest(struct replica_io *io, struct dt_model *m,
                                      uint8_t (*tensor_digests)[DT_DIGEST_BYTES], float *staging,
                                      char hex[DT_DIGEST_HEX], struct dt_error *err)
{
    if (io->hp) {
        DT_FORWARD_IF_ERROR(dt_hashpipe_drain(io->hp, err));
        memcpy(hex, dt_hashpipe_last_digest(io->hp), DT_DIGEST_HEX);
        return DT_OK;
    }
    uint8_t md[DT_DIGEST_BYTES];
    dt_hash_model(md, tensor_digests, m, staging);
    dt_digest_hex(hex, md);
    return DT_OK;
}

/* ---- observers of every step (run_ctx.h) ------------------------------------------------- */

/* The weight snapshot at its log-spaced steps. */
enum dt_status dt_observe_snapshot(struct run_ctx *c, struct replica *rep, struct step_done *done,
                                   struct dt_error *err)
{
    if (!rep->writer) return DT_OK;
    return dt_replica_maybe_snapshot(rep->m, &rep->io, rep->res->dir, done->s, err);
}

/* The checkpoint every train.checkpoint_every steps and at the last: after everything step
 * s writes, so a resume finds exactly the rows up to s. */
enum dt_status dt_observe_checkpoint(struct run_ctx *c, struct replica *rep, struct step_done *done,
                                     struct dt_error *err)
{
    const struct dt_experiment *exp = c->exp;
    if (!rep->writer || exp->train.checkpoint_every <= 0 ||
        (done->s % exp->train.checkpoint_every != 0 && done->s != exp->train.steps))
        return DT_OK;
    return dt_replica_checkpoint_write(c, rep->m, &rep->io, rep->pol, &rep->streams, rep->res->dir,
                                       err);
}
