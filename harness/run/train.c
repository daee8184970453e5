/* The training loop: for each cell (vary setting x policy) x replica, for each step:
 * batch -> model step -> hash -> trace (+ step times, weight snapshots at log-spaced
 * steps); evaluation at eval_every and at the end (with every test prediction); checkpoints
 * every train.checkpoint_every steps and at an interruption, and --resume from them
 * (harness/record/checkpoint.h); per-replica and experiment manifests; the overhead protocol (each
 * policy alternated with fast); then the report (harness/analyze/report.c) over the files on disk
 * (harness/record/layout.h). */
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
#include "harness/run/hashpipe.h"
#include "harness/run/overhead.h"
#include "harness/run/stop.h"
#include "harness/setup/model.h"
#include "harness/record/csv.h"
#include "harness/record/layout.h"
#include "harness/record/algolog.h"
#include "harness/run/batches.h"
#include "harness/record/manifest.h"
#include "harness/record/outdir.h"
#include "harness/analyze/report.h"
#include "harness/record/snapshot.h"
#include "harness/record/trace.h"
#include "determinism/streams.h"

/* Everything one replica needs that the experiment holds. */
struct run_ctx {
    const struct dt_experiment *exp;
    const struct dt_run_options *opt;
    const struct dt_dataset *ds;
    struct dt_backend *be;
    const struct dt_resident *train_set; /* the training split in backend memory, or NULL */
    /* progress line (a terminal only) */
    bool tty;
    int64_t steps_total, steps_done;
    double t_start, t_last;
    /* test-only kill hook (train.h): SIGKILL after step kill_after of this process */
    int64_t kill_after, steps_run;
    bool resume; /* dt_train_resume */
    /* test-only poison hook (train.h): armed until the first replica that trains takes it */
    struct poison {
        bool armed, grad;
        int64_t step;
        char tensor[DT_PARAM_NAME];
        float value;
    } poison;
};

/* hash.async resolved: `auto` overlaps hashing with the next steps where the weights are
 * not in host memory (a device backend: hashing them inline would stall the device while
 * they are copied and hashed) and hashes inline on the CPU, whose pool already keeps every
 * core busy during a step. */
static bool hash_async(const struct dt_experiment *exp, struct dt_model *m)
{
    switch (exp->hash.async) {
    case DT_HASH_ASYNC_ON: return true;
    case DT_HASH_ASYNC_OFF: return false;
    case DT_HASH_ASYNC_AUTO: break;
    }
    return m->n_params > 0 && dt_backend_host_view(m->be, m->params[0].w) == NULL;
}

static enum dt_status write_metrics_row(FILE *f, const char *path, int64_t step,
                                        const struct dt_eval *e, struct dt_error *err)
{
    fprintf(f, "%" PRId64 ",%.9g,%.6f,%.6f\n", step, e->loss, e->accuracy, e->ece);
    if (fflush(f) != 0 || ferror(f)) return dt_error_set(err, DT_ERR_IO, "%s: write failed", path);
    return DT_OK;
}

/* "1h02m", "3m05s", "42s". */
static void format_duration(char *buf, size_t size, double sec)
{
    if (!isfinite(sec) || sec < 0) {
        snprintf(buf, size, "?");
        return;
    }
    long t = (long)(sec + 0.5);
    if (t >= 3600) snprintf(buf, size, "%ldh%02ldm", t / 3600, t / 60 % 60);
    else if (t >= 60) snprintf(buf, size, "%ldm%02lds", t / 60, t % 60);
    else snprintf(buf, size, "%lds", t);
}

/* One progress line on a terminal, rewritten in place at most 5 times a second: cell,
 * replica, step, steps/s over the whole run, and the time left. Nothing when stderr is not
 * a terminal or with --quiet. */
static void progress(struct run_ctx *c, int cell, int r, int64_t s, bool force)
{
    c->steps_done++;
    if (!c->tty) return;
    double now = dt_now_s();
    if (!force && now - c->t_last < 0.2) return;
    c->t_last = now;
    const double rate = (double)c->steps_done / (now - c->t_start);
    char eta[32], cell_dir[256];
    format_duration(eta, sizeof eta, (double)(c->steps_total - c->steps_done) / rate);
    dt_cell_dir(cell_dir, sizeof cell_dir, c->exp, cell);
    fprintf(stderr,
            "\r  cell %d/%d %s  replica %d/%d  step %" PRId64 "/%" PRId64
            "  %.1f steps/s  ETA %s\033[K",
            cell + 1, dt_cell_count(c->exp), cell_dir, r + 1, c->exp->replicas, s,
            c->exp->train.steps, rate, eta);
    fflush(stderr);
}

static void progress_end(struct run_ctx *c)
{
    if (c->tty) fprintf(stderr, "\r\033[K");
}

/* The replica's run.json (DT_ERR_IO naming it when it cannot be written). */
static enum dt_status write_replica_manifest(const struct run_ctx *c, int cell, int r,
                                             const struct dt_replica_result *res, const char *start,
                                             bool hash_async, const struct dt_algolog *algos,
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
    if (c->exp->model.kind == DT_MODEL_BNN_MLP)
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
     * copy issued and the rows written when pipelined (hash_async) */
    dt_strbuf_printf(&sb,
                     ", \"step_ms_median\": %.6g, \"hash_ms_median\": %.6g, "
                     "\"hash_async\": %s",
                     isfinite(res->step_ms_median) ? res->step_ms_median : -1.0,
                     isfinite(res->hash_ms_median) ? res->hash_ms_median : -1.0,
                     hash_async ? "true" : "false");
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

/* A replica's open output files and buffers. */
struct replica_io {
    struct dt_trace_writer tw;
    bool trace_open;
    FILE *metrics, *times;
    char metrics_path[1300], times_path[1300];
    struct dt_hashpipe *hp;          /* hashing and trace rows of the hashed steps */
    int64_t submitted;               /* the last step given to hp; -1 = none yet */
    int64_t kept_step;               /* resumed: the last trace row kept from before; -1 = none */
    char kept_digest[DT_DIGEST_HEX]; /* its model digest */
    float *weights;                  /* every tensor, for snapshots */
    int64_t snap_steps[80];
    int n_snaps, next_snap;
};

/* Every parameter of m at `step` into <dir>/snapshots/ (harness/record/snapshot.h). */
static enum dt_status write_snapshot(struct dt_model *m, struct replica_io *io, const char *dir,
                                     int64_t step, struct dt_error *err)
{
    const char *names[DT_SNAPSHOT_MAX_TENSORS];
    const float *data[DT_SNAPSHOT_MAX_TENSORS];
    int64_t counts[DT_SNAPSHOT_MAX_TENSORS];
    DT_ASSERT(m->n_params <= DT_SNAPSHOT_MAX_TENSORS);
    int64_t off = 0;
    for (int i = 0; i < m->n_params; i++) {
        const struct dt_param *p = &m->params[i];
        dt_backend_download(m->be, io->weights + off, p->w, (size_t)p->n * sizeof(float));
        names[i] = p->name;
        data[i] = io->weights + off;
        counts[i] = p->n;
        off += p->n;
    }
    char path[1400];
    dt_snapshot_path(path, sizeof path, dir, step);
    return dt_snapshot_write(path, step, m->n_params, names, counts, data, err);
}

static bool snapshot_due(const struct replica_io *io, int64_t s)
{
    return io->next_snap < io->n_snaps && io->snap_steps[io->next_snap] == s;
}

/* The snapshot due at step s, if any. Readers check a snapshot against the trace's digest
 * at its step, so the pipeline is drained first: the trace has that row before the file
 * exists. */
static enum dt_status maybe_snapshot(struct dt_model *m, struct replica_io *io, const char *dir,
                                     int64_t s, struct dt_error *err)
{
    if (!snapshot_due(io, s)) return DT_OK;
    io->next_snap++;
    DT_FORWARD_IF_ERROR(dt_hashpipe_drain(io->hp, err));
    return write_snapshot(m, io, dir, s, err);
}

static enum dt_status write_predictions(const char *dir, const uint8_t *labels, const uint8_t *pred,
                                        int64_t n, struct dt_error *err)
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
static enum dt_status open_replica_io(struct replica_io *io, const struct dt_experiment *exp,
                                      struct dt_model *m, const char *dir, int64_t resume_step,
                                      struct dt_error *err)
{
    const bool append = resume_step >= 0;
    memset(io, 0, sizeof *io);
    io->submitted = io->kept_step = -1;
    int64_t total = 0;
    for (int i = 0; i < m->n_params; i++) total += m->params[i].n;
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
    DT_FORWARD_IF_ERROR(append ? trace_open_append(&io->tw, dir, exp->hash.per_tensor, err)
                               : dt_trace_open(&io->tw, dir, exp->hash.per_tensor, err));
    DT_FORWARD_IF_ERROR(
        dt_hashpipe_create(&io->hp, m, &io->tw, exp->hash.per_tensor, hash_async(exp, m), err));
    DT_FORWARD_IF_ERROR(dt_csv_create(&io->metrics, io->metrics_path, sizeof io->metrics_path, dir,
                                      "metrics.csv", DT_METRICS_HEADER, append, err));
    return dt_csv_create(&io->times, io->times_path, sizeof io->times_path, dir, "times.csv",
                         DT_TIMES_HEADER, append, err);
}

/* Close everything; the first error wins (st is the status so far). */
static enum dt_status close_replica_io(struct replica_io *io, enum dt_status st,
                                       struct dt_error *err)
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

/* ---- checkpoints and --resume (harness/record/checkpoint.h) ------------------------------------
 */

/* A whole results file (run.json, config.json, trace.csv, tensors.csv...) into a malloc'ed
 * NUL-terminated buffer: a regular file, read with its size as the bound (core/fileio.h);
 * NULL (errno set) when it cannot be read. */
static char *read_text(const char *path, size_t *len)
{
    char *text = NULL;
    size_t n = 0;
    struct dt_error e;
    if (dt_read_regular_file(&text, &n, path, "a results file", (size_t)1 << 34, &e) != DT_OK) {
        if (errno == 0) errno = EINVAL;
        return NULL;
    }
    if (len) *len = n;
    return text;
}

static bool row_step(const char *row, int64_t *step)
{
    char *end;
    if (*row < '0' || *row > '9') return false;
    *step = strtoll(row, &end, 10);
    return *end == ',';
}

/* The replica's streams (determinism/streams.h) as a checkpoint records them, and its ensemble
 * member. */
static struct dt_checkpoint_info replica_streams(const struct dt_experiment *exp, int cell, int r,
                                                 uint32_t *member)
{
    const unsigned vary = exp->vary_sets[dt_cell_vary(exp, cell)];
    struct dt_checkpoint_info info = {
        .init_stream = dt_stream_replica(vary, DT_VARY_INIT, (uint64_t)r),
        .order_stream = dt_stream_replica(vary, DT_VARY_DATA_ORDER, (uint64_t)r),
        .traced_step = -1,
    };
    *member = (uint32_t)dt_stream_replica(vary, DT_VARY_EPSILON, (uint64_t)r);
    return info;
}

/* Did the replica in `dir` finish: its run.json says completed (write_replica_manifest's
 * fixed spelling) and its trace ends at the last step? */
static bool replica_completed(const char *dir, int64_t steps)
{
    char path[1300];
    snprintf(path, sizeof path, "%s/run.json", dir);
    char *manifest = read_text(path, NULL);
    bool done = manifest && strstr(manifest, "\"state\": \"completed\"");
    free(manifest);
    if (!done) return false;
    snprintf(path, sizeof path, "%s/trace.csv", dir);
    size_t n = 0;
    char *trace = read_text(path, &n);
    int64_t last = -1;
    if (trace && n > 1 && trace[n - 1] == '\n') {
        trace[n - 1] = '\0';
        const char *row = strrchr(trace, '\n');
        if (!row || !row_step(row + 1, &last)) last = -1;
    }
    free(trace);
    return last == steps;
}

/* The trace must hold the row the checkpoint says was the last one written, with its
 * digest: otherwise the checkpoint and the trace come from different runs. */
static enum dt_status check_trace_row(const char *dir, const struct dt_checkpoint *ck,
                                      const char *ck_path, struct dt_error *err)
{
    if (ck->traced_step < 0) return DT_OK;
    char path[1300];
    snprintf(path, sizeof path, "%s/trace.csv", dir);
    char *text = read_text(path, NULL);
    if (!text)
        return dt_error_set(err, DT_ERR_DATA, "%s: cannot read (%s); %s cannot go on without it",
                            path, strerror(errno), ck_path);
    bool found = false;
    for (char *row = strchr(text, '\n'); row && !found; row = strchr(row, '\n')) {
        row++;
        int64_t step;
        char *eol = strchr(row, '\n');
        if (!eol || !row_step(row, &step) || step != ck->traced_step) continue;
        *eol = '\0';
        const char *digest = strrchr(row, ',');
        found = digest && strcmp(digest + 1, ck->traced_digest) == 0;
        *eol = '\n';
        break;
    }
    free(text);
    if (!found)
        return dt_error_set(err, DT_ERR_DATA,
                            "%s: no row for step %" PRId64 " with digest %.16s...; %s belongs to "
                            "another run",
                            path, ck->traced_step, ck->traced_digest, ck_path);
    return DT_OK;
}

/* How a replica starts: from step 0, kept as it is (it completed before), or from its
 * checkpoint. */
enum replica_start { START_FRESH, START_KEEP, START_CHECKPOINT };

/* Decide how replica r of `cell` (folder `dir`) starts; without --resume always from step
 * 0. A checkpoint is read into *ck and checked against this experiment, the cell's policy,
 * the replica's streams, model m's parameters and the trace on disk; any fault stops the
 * run (exit 2). */
static enum dt_status plan_replica(enum replica_start *start, struct dt_checkpoint *ck,
                                   const struct run_ctx *c, int cell, int r, const char *dir,
                                   const struct dt_model *m, struct dt_error *err)
{
    *start = START_FRESH;
    memset(ck, 0, sizeof *ck);
    if (!c->resume) return DT_OK;
    if (replica_completed(dir, c->exp->train.steps)) {
        *start = START_KEEP;
        return DT_OK;
    }
    char path[1300];
    dt_checkpoint_path(path, sizeof path, dir);
    if (access(path, F_OK) != 0) return DT_OK; /* never checkpointed: start again */
    DT_FORWARD_IF_ERROR(dt_checkpoint_read(ck, path, err));
    uint32_t member;
    const struct dt_checkpoint_info want = replica_streams(c->exp, cell, r, &member);
    const struct dt_policy *pol = &c->exp->policies[dt_cell_policy(c->exp, cell)];
    enum dt_status st = dt_checkpoint_check(ck, path, c->exp, pol, m, &want, member, err);
    if (st == DT_OK) st = check_trace_row(dir, ck, path, err);
    if (st != DT_OK) {
        dt_checkpoint_free(ck);
        return st;
    }
    *start = START_CHECKPOINT;
    return DT_OK;
}

/* Rewrite dir/name keeping its header and the complete rows of steps before k, and the row
 * of step k when keep_k (later rows belong to steps that run again; a killed run may have
 * left half a row). A missing file is an error when `required`, else it is created with
 * its header. last_step/last_digest (trace.csv only, may be NULL) receive the last kept
 * row's step and digest. Written atomically: a second interruption leaves it valid. */
static enum dt_status cut_csv(const char *dir, const char *name, const char *header, int64_t k,
                              bool keep_k, bool required, bool dry, int64_t *last_step,
                              char last_digest[DT_DIGEST_HEX], struct dt_error *err)
{
    char path[1300];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    char *text = read_text(path, NULL);
    if (!text && required)
        return dt_error_set(err, DT_ERR_DATA,
                            "%s: cannot read (%s); the checkpoint at step %" PRId64
                            " cannot go on without it",
                            path, strerror(errno), k);
    struct dt_strbuf out = {0};
    dt_strbuf_printf(&out, "%s\n", header);
    enum dt_status st = DT_OK;
    size_t hlen = strlen(header);
    if (text && (strncmp(text, header, hlen) != 0 || text[hlen] != '\n'))
        st = dt_error_set(err, DT_ERR_DATA, "%s: the first line is not the header '%s'", path,
                          header);
    int line = 1;
    for (char *row = text ? strchr(text, '\n') : NULL; st == DT_OK && row;) {
        row++;
        line++;
        char *eol = strchr(row, '\n');
        if (!eol) break; /* a partial last row */
        int64_t step;
        if (!row_step(row, &step)) {
            st = dt_error_set(err, DT_ERR_DATA, "%s:%d: malformed row (no step)", path, line);
            break;
        }
        if (step < k || (step == k && keep_k)) {
            dt_strbuf_printf(&out, "%.*s\n", (int)(eol - row), row);
            if (last_step) *last_step = step;
            if (last_digest) {
                const char *d = eol - (DT_DIGEST_HEX - 1);
                snprintf(last_digest, DT_DIGEST_HEX, "%.*s", DT_DIGEST_HEX - 1, d > row ? d : "");
            }
        }
        row = eol;
    }
    if (st == DT_OK && !dry) st = dt_write_file_atomic(path, out.data, out.len, err);
    dt_strbuf_free(&out);
    free(text);
    return st;
}

/* Cut a replica's files back to its checkpoint at step k: trace.csv and tensors.csv to the
 * rows the uninterrupted run has up to k (the row of k only if k is a hashed step of this
 * run: a finished run extended by train.steps drops its old last row), metrics.csv likewise
 * for periodic evaluations, times.csv to steps <= k; predictions.csv goes (the end rewrites
 * it), and so do snapshots after k or off this run's schedule (those due later are
 * rewritten).
 * kept_step/kept_digest: the last trace row kept. `dry`: every file read and checked as
 * for the cut, nothing changed (the check before the first write). */
static enum dt_status cut_back_replica(const struct dt_experiment *exp, const char *dir, int64_t k,
                                       bool dry, int64_t *kept_step,
                                       char kept_digest[DT_DIGEST_HEX], struct dt_error *err)
{
    /* k == train.steps: a checkpoint at the last step of a replica killed before it
     * finished; nothing runs again, its last row stays and the final evaluation follows */
    const bool trace_k = k % exp->hash.every == 0 || k == exp->train.steps;
    const bool eval_k =
        exp->train.eval_every > 0 && k % exp->train.eval_every == 0 && k != exp->train.steps;
    *kept_step = -1;
    kept_digest[0] = '\0';
    DT_FORWARD_IF_ERROR(cut_csv(dir, "trace.csv", DT_TRACE_HEADER, k, trace_k, true, dry, kept_step,
                                kept_digest, err));
    if (exp->hash.per_tensor)
        DT_FORWARD_IF_ERROR(
            cut_csv(dir, "tensors.csv", DT_TENSORS_HEADER, k, trace_k, true, dry, NULL, NULL, err));
    DT_FORWARD_IF_ERROR(
        cut_csv(dir, "metrics.csv", DT_METRICS_HEADER, k, eval_k, false, dry, NULL, NULL, err));
    DT_FORWARD_IF_ERROR(
        cut_csv(dir, "times.csv", DT_TIMES_HEADER, k, true, false, dry, NULL, NULL, err));
    char path[1400];
    snprintf(path, sizeof path, "%s/predictions.csv", dir);
    if (!dry && remove(path) != 0 && errno != ENOENT)
        return dt_error_set(err, DT_ERR_IO, "%s: cannot remove: %s", path, strerror(errno));
    int64_t *have = NULL, due[80];
    int n_have = 0;
    DT_FORWARD_IF_ERROR(dt_snapshot_list(dir, &have, &n_have, err));
    DT_ASSERT(exp->report.snapshots + 1 <= (int)(sizeof due / sizeof due[0]));
    const int n_due = dt_snapshot_steps(exp, due);
    enum dt_status st = DT_OK;
    for (int i = 0; i < n_have && st == DT_OK && !dry; i++) {
        bool on_schedule = false;
        for (int j = 0; j < n_due; j++) on_schedule |= due[j] == have[i];
        if (have[i] <= k && on_schedule) continue;
        dt_snapshot_path(path, sizeof path, dir, have[i]);
        if (remove(path) != 0 && errno != ENOENT)
            st = dt_error_set(err, DT_ERR_IO, "%s: cannot remove: %s", path, strerror(errno));
    }
    free(have);
    return st;
}

/* Give the pipeline step s (tracking the last step given, for the checkpoint). */
static enum dt_status submit_hash(struct replica_io *io, int64_t s, float loss,
                                  struct dt_error *err)
{
    io->submitted = s;
    return dt_hashpipe_submit(io->hp, s, loss, err);
}

/* The checkpoint of m at its current step, written once every hashed step so far is in the
 * trace and the other files are flushed: a resume cuts them back to exactly this step. */
static enum dt_status write_checkpoint(const struct run_ctx *c, struct dt_model *m,
                                       struct replica_io *io, const struct dt_policy *pol,
                                       const struct dt_checkpoint_info *streams, const char *dir,
                                       struct dt_error *err)
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

/* Test-only (train.h): parse DETRAIN_TEST_POISON="STEP:TENSOR[:w|g[:VALUE]]" into c->poison
 * (armed); nothing when the variable is unset. DT_ERR_USAGE naming it when malformed. */
static enum dt_status parse_poison(struct run_ctx *c, struct dt_error *err)
{
    const char *spec = getenv("DETRAIN_TEST_POISON");
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
                            "DETRAIN_TEST_POISON='%s': expected STEP:TENSOR[:w|g[:VALUE]] with "
                            "STEP >= 1",
                            spec);
    p->grad = which[0] == 'g';
    p->armed = true;
    return DT_OK;
}

/* Test-only: after step s, element 0 of the poisoned tensor's weight or gradient := the
 * hook's value (NaN by default). The update of step s has run with the true gradient. */
static enum dt_status apply_poison(const struct poison *p, struct dt_model *m, int64_t s,
                                   struct dt_error *err)
{
    if (s != p->step) return DT_OK;
    for (int i = 0; i < m->n_params; i++) {
        if (strcmp(m->params[i].name, p->tensor) != 0) continue;
        dt_backend_upload(m->be, p->grad ? m->params[i].g : m->params[i].w, &p->value,
                          sizeof p->value);
        return DT_OK;
    }
    return dt_error_set(err, DT_ERR_USAGE, "DETRAIN_TEST_POISON: the model has no tensor '%s'",
                        p->tensor);
}

/* train.check_finite: the first parameter (model order) whose gradient, then weight, holds
 * a NaN or Inf after step s, all tensors scanned in one backend call (one device wait).
 * Returns false, with the reason, when one does. */
static bool params_finite(struct dt_model *m, int64_t s, char *reason, size_t size)
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

/* Test-only (train.h): DETRAIN_TEST_KILL_AFTER_STEP=N kills the process after its N-th
 * step, as a crash or `kill -9` would: nothing is flushed, nothing is cleaned up. */
static void test_kill_hook(struct run_ctx *c)
{
    if (c->kill_after > 0 && ++c->steps_run == c->kill_after) raise(SIGKILL);
}

/* ---- several ranks (harness/run/dist.h) ------------------------------------------------------ */

/* The model digest of the step just hashed, as hex: rank 0's from its pipeline (drained),
 * the other ranks' (which write nothing) computed here. */
static enum dt_status rank_digest(struct replica_io *io, struct dt_model *m,
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

/* The ranks' verdict after `step`: a digest that differs from rank 0's fails the replica
 * and stops the run, naming rank and step; a rank that failed stops the others; a signal
 * on any rank becomes every rank's (the loop then stops as for its own signal). */
static enum dt_status apply_verdict(const struct dt_dist_verdict *v, struct dt_replica_result *res,
                                    int64_t step, struct dt_error *err)
{
    if (v->differing_rank >= 0) {
        res->state = DT_REPLICA_FAILED;
        snprintf(res->reason, sizeof res->reason,
                 "rank %d's weights differ from rank 0's after step %" PRId64
                 " (model digest %.16s... on rank %d, %.16s... on rank 0); run stopped",
                 v->differing_rank, step, v->digest_bad, v->differing_rank, v->digest0);
        if (dt_dist_rank() == 0) fprintf(stderr, "\ndetrain: %s\n", res->reason);
        return dt_error_set(err, DT_ERR_DATA, "%s", res->reason);
    }
    if (v->stop_code > 0 && v->stop_code < 64) {
        if (!dt_stop_requested) dt_stop_requested = v->stop_code;
        return DT_OK;
    }
    if (v->stop_code == DT_DIST_FAILED && v->stopped_rank != dt_dist_rank() &&
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
static enum dt_status ranks_agree(struct dt_replica_result *res, int64_t step, const char *digest,
                                  struct dt_error *err)
{
    struct dt_dist_verdict v;
    dt_dist_agree(dt_stop_requested ? (int)dt_stop_requested : DT_DIST_GO_ON, digest, &v);
    return apply_verdict(&v, res, step, err);
}

/* After the loop, unless the ranks stopped together: the last digests, and this rank's own
 * stop (a failed step or write) made known to the others. */
static enum dt_status ranks_agree_end(struct dt_replica_result *res, int64_t step,
                                      enum dt_status st, const char *digest, struct dt_error *err)
{
    struct dt_dist_verdict v;
    const bool failed = st != DT_OK || res->state == DT_REPLICA_FAILED;
    dt_dist_agree(failed ? DT_DIST_FAILED : DT_DIST_GO_ON, digest, &v);
    return apply_verdict(&v, res, step, err);
}

/* Train replica r of cell `cell` (with --resume: keep it, or go on from its checkpoint).
 * Returns an error only for faults of the tool (I/O, an unusable checkpoint); a replica's
 * own numerical failure is recorded in res and returns DT_OK. */
static enum dt_status run_replica(struct run_ctx *c, int cell, int r, struct dt_replica_result *res,
                                  struct dt_error *err)
{
    const struct dt_experiment *exp = c->exp;
    const struct dt_policy *pol = &exp->policies[dt_cell_policy(exp, cell)];
    memset(res, 0, sizeof *res);
    res->test_acc = res->test_loss = res->test_ece = NAN;
    res->state = DT_REPLICA_COMPLETED;
    res->resumed_from_step = -1;
    char start[32];
    dt_utc_iso8601(start, sizeof start);
    dt_replica_dir(res->dir, sizeof res->dir, c->opt->out_dir, exp, cell, r);
    if (c->resume && replica_completed(res->dir, exp->train.steps)) {
        res->steps_done = exp->train.steps; /* finished before: kept as it is */
        return DT_OK;
    }
    const bool poisoned = c->poison.armed; /* test hook: the first replica that trains */
    c->poison.armed = false;
    /* rank 0 writes every file; the other ranks train, hash and check (harness/run/dist.h) */
    const bool writer = dt_dist_rank() == 0, multi = dt_dist_size() > 1;
    if (writer) DT_FORWARD_IF_ERROR(dt_mkdir_p(res->dir, err));

    struct dt_model *m = NULL;
    DT_FORWARD_IF_ERROR(dt_experiment_build_model(&m, exp, c->be, c->ds->train.n, err));
    uint32_t member;
    const struct dt_checkpoint_info streams = replica_streams(exp, cell, r, &member);
    enum replica_start how;
    struct dt_checkpoint ck;
    struct replica_io io;
    memset(&io, 0, sizeof io);
    io.submitted = -1;
    enum dt_status st = plan_replica(&how, &ck, c, cell, r, res->dir, m, err);
    const int64_t k = how == START_CHECKPOINT ? ck.step : 0; /* steps already done */
    int64_t kept_step = -1;
    char kept_digest[DT_DIGEST_HEX] = "";
    if (st == DT_OK && how == START_CHECKPOINT && writer)
        st = cut_back_replica(exp, res->dir, k, false, &kept_step, kept_digest, err);
    if (st == DT_OK && writer)
        st = open_replica_io(&io, exp, m, res->dir, how == START_CHECKPOINT ? k : -1, err);
    io.kept_step = kept_step;
    memcpy(io.kept_digest, kept_digest, sizeof kept_digest);

    const struct dt_split *train = &c->ds->train, *test = &c->ds->test;
    const int64_t B = exp->train.batch, steps = exp->train.steps;
    const uint64_t seed = exp->train.seed;
    struct dt_batch_stream batches;
    dt_batch_stream_init(&batches, train, c->train_set, B, seed, streams.order_stream);
    double *step_ms = dt_xcalloc((size_t)steps, sizeof(double));
    double *hash_ms = dt_xcalloc((size_t)steps + 1, sizeof(double));
    int64_t n_hash = 0;
    const struct dt_sgd_options sgd = dt_experiment_sgd_options(exp);
    /* Library algorithm choices per step (cuDNN under conv_algo autotune/deterministic):
     * every replica chooses afresh, as a new process would. */
    struct dt_algolog algos;
    dt_algolog_init(&algos);
    struct dt_algo_note *notes = dt_xcalloc(DT_ALGOLOG_MAX_CALLS, sizeof *notes);
    dt_backend_reset_algo_choices(c->be);
    (void)dt_backend_take_algo_notes(c->be, NULL, 0);
    /* several ranks, or reduction: exact: the data-parallel step (harness/run/dist.h) */
    struct dt_dist_step dstep;
    memset(&dstep, 0, sizeof dstep);
    /* the digest of the last hashed step, for the ranks' agreement; every rank hashes */
    char digest[DT_DIGEST_HEX] = "";
    bool have_digest = false, stopped_together = false;
    uint8_t(*tensor_digests)[DT_DIGEST_BYTES] =
        multi && !writer ? dt_xmalloc((size_t)m->n_params * DT_DIGEST_BYTES) : NULL;
    float *hash_staging = NULL;
    if (tensor_digests) {
        int64_t most = 1;
        for (int i = 0; i < m->n_params; i++)
            if (m->params[i].n > most) most = m->params[i].n;
        hash_staging = dt_xmalloc((size_t)most * sizeof(float));
    }

    if (st == DT_OK) {
        dt_model_init(m, seed, streams.init_stream);
        m->member = member;
        if (how == START_CHECKPOINT) { /* weights, momenta, step: as they were after step k */
            dt_checkpoint_apply(&ck, m);
            res->steps_done = res->resumed_from_step = k;
        }
        dt_model_memory(m, pol, &res->mem);
        if (how != START_CHECKPOINT && writer) {
            st = submit_hash(&io, 0, NAN, err);
            if (st == DT_OK) st = maybe_snapshot(m, &io, res->dir, 0, err);
        }
        if (multi && how != START_CHECKPOINT) {
            st = rank_digest(&io, m, tensor_digests, hash_staging, digest, err);
            have_digest = true;
        }
    }
    dt_checkpoint_free(&ck);
    if (multi) { /* a rank that could not start stops the others before the first step */
        int who = -1;
        int worst = dt_dist_max_status(st == DT_OK ? 0 : (int)st, &who);
        if (worst != 0 && st == DT_OK)
            st = dt_error_set(err, (enum dt_status)worst,
                              "rank %d could not start replica %d (its message is on its "
                              "stderr)",
                              who, r);
    }
    /* one process: the ops' device-record checks are read once per step, at its end
     * (dt_backend_step_end); with several ranks each op checks at once, so that every
     * rank learns of a fault inside the step (harness/run/dist.c, agree_on_failure) */
    dt_backend_defer_checks(c->be, !multi);
    for (int64_t s = k + 1; st == DT_OK && s <= steps; s++) {
        if (multi) { /* every rank goes on, or every rank stops, after the same step */
            st = ranks_agree(res, s - 1, have_digest ? digest : NULL, err);
            have_digest = false;
            if (st != DT_OK || res->state != DT_REPLICA_COMPLETED) {
                stopped_together = true;
                break;
            }
        }
        if (dt_stop_requested) {
            res->state = DT_REPLICA_INTERRUPTED;
            snprintf(res->reason, sizeof res->reason,
                     "interrupted by signal %d after step %" PRId64, (int)dt_stop_requested, s - 1);
            break;
        }
        const struct dt_batch batch = dt_batch_stream_at(&batches, s - 1);
        float loss = NAN;
        double t0 = dt_now_s();
        st = dt_dist_train(&dstep, m, &batch, B, exp->train.shards, &sgd, pol, &loss);
        st = dt_model_step_end(m, st); /* the device has run it: one wait, checks read */
        step_ms[s - 1] = 1e3 * (dt_now_s() - t0);
        dt_algolog_step(&algos, s, notes,
                        dt_backend_take_algo_notes(c->be, notes, DT_ALGOLOG_MAX_CALLS),
                        DT_ALGOLOG_MAX_CALLS);
        if (st == DT_ERR_NUMERIC) { /* the replica's own fault (e.g. a fixed-point overflow) */
            res->state = DT_REPLICA_FAILED;
            snprintf(res->reason, sizeof res->reason, "%.900s; replica stopped",
                     m->err.status != DT_OK ? m->err.msg : "numeric error in the step");
            st = DT_OK;
            progress_end(c);
            fprintf(stderr, "detrain: [%s] replica %d: %s\n", pol->name, r, res->reason);
            break;
        }
        if (st != DT_OK) {
            if (m->err.status != DT_OK && err) *err = m->err;
            break;
        }
        res->steps_done = s;
        if (poisoned) st = apply_poison(&c->poison, m, s, err);
        if (st != DT_OK) break;
        /* a non-finite loss is named as such; else the first bad gradient or weight */
        const bool bad_param = isfinite(loss) && exp->train.check_finite &&
                               !params_finite(m, s, res->reason, sizeof res->reason);
        /* A non-finite loss always gets its row; a bad gradient or weight only on a hashed
         * step (the report compares replicas' rows step by step) -- README, Faults. */
        bool hashed = (s % exp->hash.every == 0) || s == steps || !isfinite(loss);
        double h_ms = NAN;
        if (hashed) {
            /* the main thread's cost: the copy issued and, when pipelined, the rows of
             * earlier steps written; the last step, a failing one and a snapshot's step
             * also wait until the trace holds them */
            double t1 = dt_now_s();
            if (writer) st = submit_hash(&io, s, loss, err);
            if (st == DT_OK && writer && (s == steps || !isfinite(loss) || snapshot_due(&io, s)))
                st = dt_hashpipe_drain(io.hp, err);
            if (st == DT_OK && multi) {
                st = rank_digest(&io, m, tensor_digests, hash_staging, digest, err);
                have_digest = true;
            }
            h_ms = hash_ms[n_hash++] = 1e3 * (dt_now_s() - t1);
        }
        if (writer) {
            fprintf(io.times, "%" PRId64 ",%.6f,", s, step_ms[s - 1]);
            if (hashed) fprintf(io.times, "%.6f", h_ms);
            fputc('\n', io.times);
        }
        if (st == DT_OK && writer && (s == steps || s % 64 == 0))
            st = dt_csv_flush(io.times, io.times_path, err);
        if (st == DT_OK && !isfinite(loss)) {
            res->state = DT_REPLICA_FAILED;
            snprintf(res->reason, sizeof res->reason,
                     "training loss is %s at step %" PRId64 "; replica stopped",
                     isnan(loss) ? "NaN" : "infinite", s);
            progress_end(c);
            fprintf(stderr, "detrain: [%s] replica %d: %s\n", pol->name, r, res->reason);
            break;
        }
        if (st == DT_OK && bad_param) {
            res->state = DT_REPLICA_FAILED;
            progress_end(c);
            fprintf(stderr, "detrain: [%s] replica %d: %s\n", pol->name, r, res->reason);
            break;
        }
        if (st == DT_OK && writer) st = maybe_snapshot(m, &io, res->dir, s, err);
        if (st == DT_OK && writer && exp->train.eval_every > 0 && s % exp->train.eval_every == 0 &&
            s != steps) {
            struct dt_eval ev;
            st = dt_model_evaluate_full(m, test->x, test->y, test->n, pol, &ev);
            if (st == DT_OK) st = write_metrics_row(io.metrics, io.metrics_path, s, &ev, err);
            (void)dt_backend_take_algo_notes(c->be, NULL, 0); /* evaluation is not a step */
        }
        /* after everything step s writes, so a resume finds exactly the rows up to s */
        if (st == DT_OK && writer && exp->train.checkpoint_every > 0 &&
            (s % exp->train.checkpoint_every == 0 || s == steps))
            st = write_checkpoint(c, m, &io, pol, &streams, res->dir, err);
        if (writer) progress(c, cell, r, s, s == steps);
        test_kill_hook(c);
    }
    /* The last agreement: the last step's digests, and a stop of a rank that left the loop
     * on its own (a failed write on rank 0) -- unless the ranks already stopped together. */
    if (multi && !stopped_together) {
        enum dt_status ast = ranks_agree_end(res, res->steps_done, st, have_digest ? digest : NULL,
                                             st == DT_OK ? err : NULL);
        if (st == DT_OK) st = ast;
    }
    /* Every hashed step is in the trace before anything reports on it, however the loop
     * ended (completed, failed, interrupted, an error). */
    if (io.hp) {
        enum dt_status dst = dt_hashpipe_drain(io.hp, st == DT_OK ? err : NULL);
        if (st == DT_OK) st = dst;
        memcpy(res->final_digest,
               io.submitted >= 0 ? dt_hashpipe_last_digest(io.hp) : io.kept_digest, DT_DIGEST_HEX);
    } else if (digest[0]) {
        memcpy(res->final_digest, digest, DT_DIGEST_HEX);
    }
    dt_dist_step_free(&dstep);
    free(tensor_digests);
    free(hash_staging);
    if (st == DT_OK && res->state == DT_REPLICA_INTERRUPTED && writer) {
        /* always resumable after SIGINT/SIGTERM/SIGHUP, whatever train.checkpoint_every says */
        DT_ASSERT(m->step == res->steps_done);
        st = write_checkpoint(c, m, &io, pol, &streams, res->dir, err);
        if (st == DT_OK) {
            size_t used = strlen(res->reason);
            snprintf(res->reason + used, sizeof res->reason - used,
                     "; checkpoint.bin written: detrain run --resume goes on from there");
        }
    }
    if (st == DT_OK && res->state == DT_REPLICA_COMPLETED && writer) {
        struct dt_eval ev;
        uint8_t *pred = dt_xmalloc((size_t)test->n + 1);
        st = dt_model_evaluate_pred(m, test->x, test->y, test->n, pol, &ev, pred);
        res->test_loss = ev.loss;
        res->test_acc = ev.accuracy;
        res->test_ece = ev.ece;
        if (st == DT_OK) st = write_metrics_row(io.metrics, io.metrics_path, steps, &ev, err);
        if (st == DT_OK) st = write_predictions(res->dir, test->y, pred, test->n, err);
        free(pred);
    }
    if (st != DT_OK) {
        res->state = DT_REPLICA_FAILED;
        snprintf(res->reason, sizeof res->reason, "%s", err ? err->msg : dt_status_str(st));
    }
    res->step_ms_median = dt_median(step_ms + k, res->steps_done - k); /* steps run here */
    res->hash_ms_median = dt_median(hash_ms, n_hash);
    st = close_replica_io(&io, st, err);
    if (!writer) goto done;
    char algos_path[1300];
    snprintf(algos_path, sizeof algos_path, "%s/algos.csv", res->dir);
    struct dt_error aerr;
    if (dt_algolog_write_csv(&algos, algos_path, &aerr) != DT_OK) {
        fprintf(stderr, "detrain: %s\n", aerr.msg);
        if (st == DT_OK) {
            st = DT_ERR_IO;
            if (err) *err = aerr;
        }
    }
    struct dt_error merr;
    if (write_replica_manifest(c, cell, r, res, start, hash_async(exp, m), &algos, &merr) !=
        DT_OK) { /* the run stops: a replica without its manifest is not a result */
        if (st == DT_OK) {
            st = merr.status;
            if (err) *err = merr;
        } else {
            fprintf(stderr, "detrain: %s\n", merr.msg);
        }
    }
done:
    dt_backend_defer_checks(c->be, false);
    dt_algolog_free(&algos);
    free(notes);
    dt_batch_stream_free(&batches);
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
    dt_strbuf_printf(sb, "\"ranks\": %d, \"shards\": %" PRId64 ", \"mpi\": ", dt_dist_size(),
                     c->exp->train.shards);
    dt_strbuf_json_string(sb, dt_dist_library());
    dt_strbuf_printf(sb, ", ");
    dt_manifest_environment_json(sb);
    dt_strbuf_printf(sb, ", \"dataset_dir\": ");
    dt_strbuf_json_string(sb, c->ds->dir);
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
              "reaches backward); conv_algo is recorded but unused on the CPU");
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

/* --resume: is `dir` an experiment of this config? Its config.json must match exp on every
 * key a resume may not change (harness/record/checkpoint.h); the error names the keys that
 * differ. */
static enum dt_status check_resume_folder(const char *dir, const struct dt_experiment *exp,
                                          struct dt_error *err)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/config.json", dir);
    char *stored = read_text(path, NULL);
    if (!stored)
        return dt_error_set(err, DT_ERR_CONFIG,
                            "%s: cannot read (%s): --resume takes the folder of an earlier "
                            "`detrain run` of this config",
                            path, strerror(errno));
    char *now = dt_checkpoint_config_text(exp);
    char diff[800];
    bool differ = false;
    enum dt_status st = dt_checkpoint_config_diff(diff, sizeof diff, &differ, stored, "config.json",
                                                  now, "this config", err);
    if (st == DT_OK && differ)
        st =
            dt_error_set(err, DT_ERR_CONFIG, "%s: not an experiment of this config: %s", dir, diff);
    free(stored);
    free(now);
    return st;
}

/* A replica folder a resumed run writes into: a real folder, and every file the run writes
 * there absent or a regular file (no links, FIFOs or folders in their place). */
static enum dt_status check_replica_folder(const char *dir, struct dt_error *err)
{
    static const char *const outputs[] = {"trace.csv", "tensors.csv",     "metrics.csv",
                                          "times.csv", "predictions.csv", "run.json",
                                          "algos.csv", "checkpoint.bin",  "snapshots"};
    struct stat sb;
    if (lstat(dir, &sb) != 0) return DT_OK; /* created by the run */
    if (!S_ISDIR(sb.st_mode))
        return dt_error_set(err, DT_ERR_IO,
                            "%s: is not a folder (%s); detrain does not write "
                            "through links: remove it",
                            dir, S_ISLNK(sb.st_mode) ? "a symbolic link" : "a file");
    if (access(dir, W_OK | X_OK) != 0)
        return dt_error_set(err, DT_ERR_IO, "%s: not writable: %s", dir, strerror(errno));
    for (size_t i = 0; i < sizeof outputs / sizeof outputs[0]; i++) {
        char path[1400];
        snprintf(path, sizeof path, "%s/%s", dir, outputs[i]);
        if (lstat(path, &sb) != 0) continue;
        const bool want_dir = i + 1 == sizeof outputs / sizeof outputs[0];
        if (want_dir ? S_ISDIR(sb.st_mode) : S_ISREG(sb.st_mode)) continue;
        return dt_error_set(err, DT_ERR_IO,
                            "%s: is %s where detrain writes a %s; links are not followed: "
                            "remove it",
                            path,
                            S_ISLNK(sb.st_mode)   ? "a symbolic link"
                            : S_ISDIR(sb.st_mode) ? "a folder"
                                                  : "a special file",
                            want_dir ? "folder" : "regular file");
    }
    return DT_OK;
}

/* --resume: how every replica will start, checked before the first step so that an
 * unusable checkpoint, or a file the cut-back needs (trace.csv, tensors.csv, ...) missing or
 * malformed, stops the run with nothing on disk changed. Progress counts only the
 * steps still to run. */
static enum dt_status check_resume_plans(struct run_ctx *c, struct dt_error *err)
{
    const struct dt_experiment *exp = c->exp;
    struct dt_model *m = NULL;
    DT_FORWARD_IF_ERROR(dt_experiment_build_model(&m, exp, c->be, c->ds->train.n, err));
    int count[3] = {0, 0, 0}; /* by enum replica_start */
    enum dt_status st = DT_OK;
    for (int cell = 0; st == DT_OK && cell < dt_cell_count(exp); cell++) {
        for (int r = 0; st == DT_OK && r < exp->replicas; r++) {
            char dir[1200];
            dt_replica_dir(dir, sizeof dir, c->opt->out_dir, exp, cell, r);
            enum replica_start how;
            struct dt_checkpoint ck;
            st = check_replica_folder(dir, err);
            if (st == DT_OK) st = plan_replica(&how, &ck, c, cell, r, dir, m, err);
            if (st != DT_OK) break;
            if (how == START_CHECKPOINT) { /* every file the cut will rely on, unchanged */
                int64_t kept_step;
                char kept_digest[DT_DIGEST_HEX];
                st = cut_back_replica(exp, dir, ck.step, true, &kept_step, kept_digest, err);
                if (st != DT_OK) {
                    dt_checkpoint_free(&ck);
                    break;
                }
            }
            count[how]++;
            c->steps_total -= how == START_KEEP         ? exp->train.steps
                              : how == START_CHECKPOINT ? ck.step
                                                        : 0;
            dt_checkpoint_free(&ck);
        }
    }
    dt_model_destroy(m);
    if (st == DT_OK && !c->opt->quiet)
        fprintf(stderr,
                "detrain: resuming %s: %d replica%s kept, %d from checkpoints, %d from "
                "step 0\n",
                c->opt->out_dir, count[START_KEEP], count[START_KEEP] == 1 ? "" : "s",
                count[START_CHECKPOINT], count[START_FRESH]);
    return st;
}

/* ---- an allocation that fails mid-run ------------------------------------------------- */

/* The experiment's run.json as it is to read when an allocation fails (status failed),
 * kept ready so that writing it needs no memory (core/status.h: dt_set_oom_hook). */
static struct {
    char path[1200];
    struct dt_strbuf text;
} g_oom;

static void on_out_of_memory(size_t bytes)
{
    (void)bytes; /* said on stderr by the caller */
    if (g_oom.text.data)
        (void)dt_write_file_atomic(g_oom.path, g_oom.text.data, g_oom.text.len, NULL);
    fprintf(stderr,
            "detrain: the run stops: %s says failed (out of memory); make the model "
            "or the batch smaller\n",
            g_oom.path);
    _exit(1);
}

/* Rank 0 arms the hook with the manifest a failure would leave (again after each replica,
 * so that it lists them); NULL c disarms it. */
static void arm_oom_manifest(const struct run_ctx *c, const char *start,
                             struct dt_replica_result *results, int done)
{
    if (!c || dt_dist_rank() != 0) {
        dt_set_oom_hook(NULL);
        dt_strbuf_free(&g_oom.text);
        return;
    }
    snprintf(g_oom.path, sizeof g_oom.path, "%s/run.json", c->opt->out_dir);
    experiment_manifest(&g_oom.text, c, start, NULL, "failed",
                        "out of memory: an allocation failed (its size is on stderr); make the "
                        "model or the batch smaller",
                        results, done);
    dt_strbuf_printf(&g_oom.text, "\n");
    dt_set_oom_hook(on_out_of_memory);
}

/* ---- every check that can refuse a run, before the first write -------------------------- */

/* The host memory a run of exp needs, from above (bytes): the dataset as floats, then one
 * model with its gradients, momenta, shard partials (reduction: exact), hashing and
 * snapshot copies, and its activations. *what says which keys drive it. */
static double run_memory_bytes(const struct dt_experiment *exp, char *what, size_t size)
{
    const double n_train = exp->dataset.train_limit > 0 ? (double)exp->dataset.train_limit : 60000;
    const double n_test = exp->dataset.test_limit > 0 ? (double)exp->dataset.test_limit : 10000;
    const double data = (n_train + n_test) * (784.0 * 4 + 1) + n_train * 8; /* + the order */
    const double B = (double)exp->train.batch, S = (double)exp->train.shards;
    double params = 0, acts = 0, per_param = 6 + S; /* w g v, hash, snapshot, checkpoint */
    if (exp->model.kind == DT_MODEL_LENET) {
        params = 61706;           /* LeNet-5 on 28x28 (nets/lenet.c) */
        acts = 4.0 * 6 * 28 * 28; /* conv1 output, its gradient, pooling, im2col */
        snprintf(what, size, "model.kind lenet, train.batch %" PRId64, exp->train.batch);
    } else {
        double in = 784, widest = 784;
        for (int l = 0; l <= exp->model.n_hidden; l++) {
            const double out = l < exp->model.n_hidden ? (double)exp->model.hidden[l] : 10;
            params += in * out + out;
            acts += out;
            if (out > widest) widest = out;
            in = out;
        }
        acts = 3 * (acts + 784) + 2 * widest;      /* activations, two gradient buffers */
        if (exp->model.kind == DT_MODEL_BNN_MLP) { /* mu and rho, sigma, epsilon per sample */
            params *= 2;
            per_param += 4 + exp->model.samples;
            acts *= exp->model.samples;
        }
        snprintf(what, size, "model.hidden, train.batch %" PRId64 "%s", exp->train.batch,
                 exp->model.kind == DT_MODEL_BNN_MLP ? ", model.samples" : "");
    }
    return data + 4.0 * (params * per_param + B * acts);
}

/* What this process may allocate: the machine's available memory (MemAvailable + free
 * swap), or RLIMIT_AS when lower; +inf when unknown. */
static double memory_allowed(const char **source)
{
    double avail = INFINITY;
    *source = "available on this machine (MemAvailable + SwapFree)";
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
    }
    return avail;
}

static enum dt_status check_memory(const struct dt_experiment *exp, struct dt_error *err)
{
    char what[200];
    const double need = run_memory_bytes(exp, what, sizeof what);
    const char *source;
    const double have = memory_allowed(&source);
    if (need <= have) return DT_OK;
    const double gib = 1024.0 * 1024.0 * 1024.0;
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
    enum dt_status st = dt_dist_check(m, c->exp->train.batch, c->exp->train.shards, err);
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
    enum dt_folder_state state;
    DT_FORWARD_IF_ERROR(dt_folder_state(&state, dir, err));
    if (state != DT_FOLDER_ABSENT) {
        DT_FORWARD_IF_ERROR(dt_folder_lock_take(lock, dir, opt->command, err));
        DT_FORWARD_IF_ERROR(dt_folder_state(&state, dir, err)); /* now that it is ours */
    }
    if (resume) return check_resume_folder(dir, exp, err);
    if (state == DT_FOLDER_ABSENT || state == DT_FOLDER_EMPTY) return DT_OK;
    if (state == DT_FOLDER_OTHER)
        return dt_error_set(err, DT_ERR_USAGE,
                            "%s: holds files that are not a detrain result (no config.json or "
                            "run.json), and detrain writes an experiment only into a new or "
                            "empty folder: choose another --out",
                            dir);
    if (opt->overwrite) {
        *clear = true;
        return DT_OK;
    }
    char path[1200];
    snprintf(path, sizeof path, "%s/config.json", dir);
    char *stored = read_text(path, NULL);
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
                            "config there",
                            dir, diff);
    return dt_error_set(err, DT_ERR_USAGE,
                        "%s: holds a run of this config; it is kept as it is: --resume %s goes "
                        "on with it (or extends it to more train.steps), --overwrite removes it "
                        "and runs again, or choose another --out",
                        dir, dir);
}

/* After every check: the folder becomes this run's (created, or emptied for --overwrite)
 * and its lock is held. */
static enum dt_status take_folder(const char *dir, const char *command, bool clear,
                                  struct dt_folder_lock *lock, bool quiet, struct dt_error *err)
{
    if (clear) {
        DT_FORWARD_IF_ERROR(dt_folder_clear(dir, err));
        if (!quiet)
            fprintf(stderr, "detrain: --overwrite: removed the earlier result in %s\n", dir);
    }
    if (lock->fd < 0) { /* a new folder */
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

/* dt_train_experiment, and with `resume` dt_train_resume. */
static enum dt_status train_experiment(const struct dt_experiment *exp,
                                       const struct dt_run_options *opt, bool resume,
                                       struct dt_error *err)
{
    /* Every check that can refuse the run comes before the first write into the folder, so
     * that a refused run changes nothing on disk (README: Outputs). */
    DT_FORWARD_IF_ERROR(check_memory(exp, err));
    /* rank 0 writes every file (harness/run/dist.h) */
    const bool writer = dt_dist_rank() == 0, multi = dt_dist_size() > 1;
    struct dt_backend *be = NULL;
    /* one GPU per rank: rank i of a machine takes backend.gpu + i */
    struct dt_backend_options bopt = {
        exp->backend.device == DT_DEVICE_CUDA ? DT_BACKEND_CUDA : DT_BACKEND_CPU,
        exp->backend.threads, exp->backend.gpu + dt_dist_local_rank()};
    DT_FORWARD_IF_ERROR(dt_backend_create(&be, &bopt, err));
    const char *missing = dt_backend_missing_op(be);
    if (missing) {
        enum dt_status mst = dt_error_set(err, DT_ERR_UNSUPPORTED,
                                          "backend '%s': op %s is not implemented in this "
                                          "version; use backend.device: cpu",
                                          dt_backend_name(be), missing);
        dt_backend_destroy(be);
        return mst;
    }
    struct dt_dataset ds;
    memset(&ds, 0, sizeof ds);
    enum dt_status st = dt_dataset_load_fashion_mnist(
        &ds, exp->dataset.path, exp->dataset.train_limit, exp->dataset.test_limit, err);
    if (st != DT_OK) {
        dt_backend_destroy(be);
        return st;
    }
    const int n_cells = dt_cell_count(exp);
    struct dt_resident *train_set = dt_batch_resident(be, &ds.train);
    struct run_ctx c = {exp, opt, &ds, be, train_set, false,  0,
                        0,   0,   0,   0,  0,         resume, {false, false, 0, "", 0.0f}};
    c.tty = !opt->quiet && isatty(STDERR_FILENO);
    c.steps_total = (int64_t)n_cells * exp->replicas * exp->train.steps;
    const char *kill_after = getenv("DETRAIN_TEST_KILL_AFTER_STEP"); /* test-only (train.h) */
    if (kill_after) c.kill_after = strtoll(kill_after, NULL, 10);
    st = parse_poison(&c, err);
    /* test-only: DETRAIN_TEST_POISON_RANK=R poisons rank R alone (train.h) */
    const char *poison_rank = getenv("DETRAIN_TEST_POISON_RANK");
    if (poison_rank && atoi(poison_rank) != dt_dist_rank()) c.poison.armed = false;
    if (st == DT_OK) st = check_model(&c, err);
    struct dt_folder_lock lock = {-1, ""};
    bool clear = false;
    if (st == DT_OK && writer) st = claim_folder(exp, opt, resume, &lock, &clear, err);
    if (resume && st == DT_OK) st = check_resume_plans(&c, err);
    if (multi) { /* every rank starts, or none: before anything is written */
        int who = -1;
        int worst = dt_dist_max_status(st == DT_OK ? 0 : (int)st, &who);
        if (worst != 0 && st == DT_OK)
            st = dt_error_set(err, (enum dt_status)worst,
                              "rank %d refused the run (its message "
                              "is on its stderr)",
                              who);
    }
    const bool every_rank_ready = st == DT_OK;
    if (st == DT_OK && writer)
        st = take_folder(opt->out_dir, opt->command, clear, &lock, opt->quiet, err);
    if (st != DT_OK) {
        /* the others wait for rank 0's start below: they learn that it failed */
        if (multi && every_rank_ready) (void)dt_dist_max_status((int)st, NULL);
        dt_folder_lock_release(&lock);
        dt_backend_resident_free(be, train_set);
        dt_backend_destroy(be);
        dt_dataset_free(&ds);
        return st;
    }
    c.t_start = dt_now_s();
    char start[32], end[32];
    dt_utc_iso8601(start, sizeof start);
    char manifest_path[1200];
    snprintf(manifest_path, sizeof manifest_path, "%s/run.json", opt->out_dir);
    int n_runs = n_cells * exp->replicas;
    struct dt_replica_result *results = dt_xcalloc((size_t)n_runs, sizeof *results);
    struct dt_strbuf sb = {0};
    experiment_manifest(&sb, &c, start, NULL, "running", "", results, 0);
    if (writer) st = dt_manifest_write(manifest_path, &sb, err);
    if (st == DT_OK && writer) st = write_config_json(opt->out_dir, exp, err);
    if (st == DT_OK) arm_oom_manifest(&c, start, results, 0);
    if (multi) { /* every rank starts, or none */
        int who = -1;
        int worst = dt_dist_max_status(st == DT_OK ? 0 : (int)st, &who);
        if (worst != 0 && st == DT_OK)
            st = dt_error_set(err, (enum dt_status)worst, "rank %d could not start", who);
    }
    if (!opt->quiet && st == DT_OK && multi)
        fprintf(stderr,
                "detrain: %d ranks (%s), each step's batch of %" PRId64 " in %" PRId64 " shards\n",
                dt_dist_size(), dt_dist_library(), exp->train.batch, exp->train.shards);
    if (!opt->quiet && st == DT_OK)
        fprintf(stderr,
                "detrain: %s: %d cell%s (%d vary setting%s x %d polic%s) x %d replica%s, "
                "%" PRId64 " steps of %" PRId64 " on %s (%d threads); train %" PRId64
                ", test %" PRId64 " examples\n"
                "detrain: writing to %s\n",
                exp->name, n_cells, n_cells == 1 ? "" : "s", exp->n_vary,
                exp->n_vary == 1 ? "" : "s", exp->n_policies, exp->n_policies == 1 ? "y" : "ies",
                exp->replicas, exp->replicas == 1 ? "" : "s", exp->train.steps, exp->train.batch,
                dt_backend_name(be), dt_backend_threads(be), ds.train.n, ds.test.n, opt->out_dir);
    dt_stop_install_handlers();

    int done = 0;
    bool any_failed = false;
    for (int cell = 0; st == DT_OK && cell < n_cells && !dt_stop_requested; cell++) {
        for (int r = 0; st == DT_OK && r < exp->replicas && !dt_stop_requested; r++) {
            if (multi) { /* a signal between replicas stops every rank here */
                int sig = dt_dist_max_status((int)dt_stop_requested, NULL);
                if (sig && !dt_stop_requested) dt_stop_requested = sig;
                if (dt_stop_requested) break;
            }
            st = run_replica(&c, cell, r, &results[done], err);
            any_failed |= results[done].state == DT_REPLICA_FAILED;
            done++;
            arm_oom_manifest(&c, start, results, done);
        }
    }
    progress_end(&c);
    /* every rank takes part: the sampled steps are data-parallel steps too */
    if (multi) {
        int sig = dt_dist_max_status((int)dt_stop_requested, NULL);
        if (sig && !dt_stop_requested) dt_stop_requested = sig;
    }
    if (st == DT_OK && !dt_stop_requested)
        st = dt_overhead_measure(exp, opt->out_dir, opt->quiet, be, &ds.train, train_set, err);
    bool interrupted = dt_stop_requested != 0;
    if (interrupted && st == DT_OK) {
        st = dt_error_set(err, DT_ERR_INTERRUPTED, "interrupted by signal %d; traces kept in %s",
                          (int)dt_stop_requested, opt->out_dir);
    }
    if (writer && (st == DT_OK || interrupted)) {
        /* The report reads only what is on disk, so it also covers an interrupted run. */
        struct dt_error rerr;
        struct dt_report_options ropt = {
            .print_summary = true, .gnuplot = NULL, .quiet = opt->quiet};
        enum dt_status rst = dt_report_build(opt->out_dir, &ropt, &rerr);
        if (rst != DT_OK && st == DT_OK) {
            st = rst;
            if (err) *err = rerr;
        } else if (rst != DT_OK) {
            fprintf(stderr, "detrain: report: %s\n", rerr.msg);
        }
    }
    if (st == DT_OK && any_failed)
        st = dt_error_set(err, DT_ERR_NUMERIC, "some replicas failed; see their run.json");
    dt_utc_iso8601(end, sizeof end);
    const char *status = st == DT_OK ? "completed" : interrupted ? "interrupted" : "failed";
    experiment_manifest(&sb, &c, start, end, status,
                        st == DT_OK ? ""
                        : err       ? err->msg
                                    : "",
                        results, done);
    struct dt_error merr;
    if (writer && dt_manifest_write(manifest_path, &sb, &merr) != DT_OK)
        fprintf(stderr, "detrain: %s\n", merr.msg);
    arm_oom_manifest(NULL, NULL, NULL, 0);
    dt_strbuf_free(&sb);
    free(results);
    dt_backend_resident_free(be, train_set);
    dt_backend_destroy(be);
    dt_dataset_free(&ds);
    dt_folder_lock_release(&lock);
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
