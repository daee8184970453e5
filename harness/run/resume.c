/* --resume (harness/record/checkpoint.h): how each replica starts -- from step 0, kept (it
 * completed), or from its checkpoint, checked against this experiment and the trace on disk --
 * and its files cut back to the checkpoint's step, every plan checked before the first write.
 */
#include "harness/record/outdir.h"
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
#include "harness/record/snapshot.h"
#include "harness/setup/model.h"

/* A whole results file (run.json, config.json, trace.csv, tensors.csv...) into a malloc'ed
 * NUL-terminated buffer: a regular file, read with its size as the bound (core/fileio.h);
 * NULL (errno set) when it cannot be read. */
char *dt_results_read_text(const char *path, size_t *len)
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
struct dt_checkpoint_info dt_replica_streams(const struct dt_experiment *exp, int cell, int r,
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

/* Did the replica in `dir` finish: its run.json says completed (dt_replica_manifest_write's
 * fixed spelling) and its trace ends at the last step? */
bool dt_replica_completed(const char *dir, int64_t steps)
{
    char path[1300];
    snprintf(path, sizeof path, "%s/run.json", dir);
    char *manifest = dt_results_read_text(path, NULL);
    bool done = manifest && strstr(manifest, "\"state\": \"completed\"");
    free(manifest);
    if (!done) return false;
    snprintf(path, sizeof path, "%s/trace.csv", dir);
    size_t n = 0;
    char *trace = dt_results_read_text(path, &n);
    int64_t last = -1;
    if (trace && n > 1 && trace[n - 1] == '\n') {
        trace[n - 1] = '\0';
        const char *row = strrchr(trace, '\n');
        if (!row || !row_step(row + 1, &last)) last = -1;
    }
    free(trace);
    return last == steps;
}

/* A trace row cut short by a kill ("<step>,<loss>,<part of the digest>", no end of line) that
 * is the row of the checkpoint's traced step, its loss whole and its digest a prefix of the
 * checkpoint's: the whole row into out ("<step>,<loss>,<digest>"), and true. */
static bool complete_cut_row(const char *partial, int64_t traced_step, const char *digest,
                             char *out, size_t size)
{
    int64_t step;
    if (!partial || traced_step < 0 || !row_step(partial, &step) || step != traced_step)
        return false;
    const char *c1 = strchr(partial, ',');
    const char *c2 = c1 ? strchr(c1 + 1, ',') : NULL;
    if (!c2 || strchr(c2 + 1, ',')) return false;
    const size_t have = strlen(c2 + 1);
    if (have > strlen(digest) || strncmp(c2 + 1, digest, have) != 0) return false;
    return snprintf(out, size, "%.*s%s", (int)(c2 + 1 - partial), partial, digest) < (int)size;
}

/* The last line of text when it has no end of line (a row cut by a kill), else NULL. */
static const char *cut_last_line(const char *text)
{
    size_t n = strlen(text);
    if (n == 0 || text[n - 1] == '\n') return NULL;
    const char *nl = strrchr(text, '\n');
    return nl ? nl + 1 : NULL;
}

/* The trace must hold the row the checkpoint says was the last one written, with its
 * digest: otherwise the checkpoint and the trace come from different runs. A last row cut
 * short by the interruption is that row when what is left of it agrees with the
 * checkpoint (the cut-back then writes it whole); a trace cut anywhere else says so. */
static enum dt_status check_trace_row(const char *dir, const struct dt_checkpoint *ck,
                                      const char *ck_path, struct dt_error *err)
{
    if (ck->traced_step < 0) return DT_OK;
    char path[1300];
    snprintf(path, sizeof path, "%s/trace.csv", dir);
    char *text = dt_results_read_text(path, NULL);
    if (!text)
        return dt_error_set(err, DT_ERR_DATA, "%s: cannot read (%s); %s cannot go on without it",
                            path, strerror(errno), ck_path);
    bool found = false;
    char whole[256];
    const char *cut = cut_last_line(text);
    if (complete_cut_row(cut, ck->traced_step, ck->traced_digest, whole, sizeof whole)) {
        free(text);
        return DT_OK; /* the cut row is the checkpoint's: dt_resume_cut_back completes it */
    }
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
    char cut_note[200] = "";
    if (cut) {
        char shown[80];
        dt_escape_str(shown, sizeof shown, cut);
        snprintf(cut_note, sizeof cut_note,
                 " (its last line, '%s', was cut short when the run was stopped)", shown);
    }
    free(text);
    if (!found)
        return dt_error_set(err, DT_ERR_DATA,
                            "%s: no whole row for step %" PRId64 " with digest %.16s...%s; %s "
                            "does not match this trace (remove it to run this replica again "
                            "from the start)",
                            path, ck->traced_step, ck->traced_digest, cut_note, ck_path);
    return DT_OK;
}

/* Decide how replica r of `cell` (folder `dir`) starts; without --resume always from step
 * 0. A checkpoint is read into *ck and checked against this experiment, the cell's policy,
 * the replica's streams, model m's parameters and the trace on disk; any fault stops the
 * run (exit 2). */
enum dt_status dt_resume_plan(enum replica_start *start, struct dt_checkpoint *ck,
                              const struct run_ctx *c, int cell, int r, const char *dir,
                              const struct dt_model *m, struct dt_error *err)
{
    *start = START_FRESH;
    memset(ck, 0, sizeof *ck);
    if (!c->resume) return DT_OK;
    if (dt_replica_completed(dir, c->exp->train.steps)) {
        *start = START_KEEP;
        return DT_OK;
    }
    char path[1300];
    dt_checkpoint_path(path, sizeof path, dir);
    if (access(path, F_OK) != 0) return DT_OK; /* never checkpointed: start again */
    DT_FORWARD_IF_ERROR(dt_checkpoint_read(ck, path, err));
    uint32_t member;
    const struct dt_checkpoint_info want = dt_replica_streams(c->exp, cell, r, &member);
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
static enum dt_status cut_csv(const char *dir, const char *name, const char *header,
                              const char *legacy, int64_t k, bool keep_k, bool required, bool dry,
                              int64_t *last_step, char last_digest[DT_DIGEST_HEX],
                              const struct dt_checkpoint *ck, struct dt_error *err)
{
    char path[1300];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    char *text = dt_results_read_text(path, NULL);
    /* a file of an older build keeps its header (legacy: before it named the digest kind) */
    if (text && legacy && strncmp(text, legacy, strlen(legacy)) == 0 &&
        text[strlen(legacy)] == '\n')
        header = legacy;
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
        if (!eol) { /* a partial last row: the trace's row of the checkpoint is completed */
            char whole[256];
            if (ck && keep_k && *row &&
                complete_cut_row(row, ck->traced_step, ck->traced_digest, whole, sizeof whole) &&
                ck->traced_step == k) {
                dt_strbuf_printf(&out, "%s\n", whole);
                if (last_step) *last_step = k;
                if (last_digest) snprintf(last_digest, DT_DIGEST_HEX, "%s", ck->traced_digest);
                if (!dry)
                    fprintf(stderr,
                            "detrain: %s: its row of step %" PRId64 " was cut short when the run "
                            "was stopped; written whole from the checkpoint, which records its "
                            "digest\n",
                            path, k);
            }
            break;
        }
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

/* Cut a replica's files back to its checkpoint ck at step k = ck->step (a trace row of step
 * k cut short by the interruption is written whole: the checkpoint records its digest):
 * trace.csv and tensors.csv to the rows the uninterrupted run has up to k (the row of k only if k
 * is a hashed step of this run: a finished run extended by train.steps drops its old last row),
 * metrics.csv likewise for periodic evaluations, times.csv to steps <= k; predictions.csv goes (the
 * end rewrites it), and so do snapshots after k (those due later are rewritten); the snapshots
 * up to k stay, also those off this run's schedule (report.snapshots or train.steps changed):
 * weights the run will not compute again.
 * kept_step/kept_digest: the last trace row kept. `dry`: every file read and checked as
 * for the cut, nothing changed (the check before the first write). */
enum dt_status dt_resume_cut_back(const struct dt_experiment *exp, const char *dir,
                                  const struct dt_checkpoint *ck, bool dry, int64_t *kept_step,
                                  char kept_digest[DT_DIGEST_HEX], struct dt_error *err)
{
    const int64_t k = ck->step;
    /* k == train.steps: a checkpoint at the last step of a replica killed before it
     * finished; nothing runs again, its last row stays and the final evaluation follows */
    const bool trace_k = k % exp->hash.every == 0 || k == exp->train.steps;
    const bool eval_k =
        exp->train.eval_every > 0 && k % exp->train.eval_every == 0 && k != exp->train.steps;
    *kept_step = -1;
    kept_digest[0] = '\0';
    DT_FORWARD_IF_ERROR(cut_csv(dir, "trace.csv", dt_trace_header(exp->hash.digest),
                                DT_TRACE_HEADER_LEGACY, k, trace_k, true, dry, kept_step,
                                kept_digest, ck, err));
    if (exp->hash.per_tensor)
        DT_FORWARD_IF_ERROR(cut_csv(dir, "tensors.csv", dt_tensors_header(exp->hash.digest),
                                    dt_tensors_header(DT_HASH_DIGEST_SHA256), k, trace_k, true, dry,
                                    NULL, NULL, NULL, err));
    DT_FORWARD_IF_ERROR(cut_csv(dir, "metrics.csv", DT_METRICS_HEADER, NULL, k, eval_k, false, dry,
                                NULL, NULL, NULL, err));
    DT_FORWARD_IF_ERROR(cut_csv(dir, "times.csv", DT_TIMES_HEADER, NULL, k, true, false, dry, NULL,
                                NULL, NULL, err));
    char path[1400];
    snprintf(path, sizeof path, "%s/predictions.csv", dir);
    if (!dry && remove(path) != 0 && errno != ENOENT)
        return dt_error_set(err, DT_ERR_IO, "%s: cannot remove: %s", path, strerror(errno));
    int64_t *have = NULL;
    int n_have = 0;
    DT_FORWARD_IF_ERROR(dt_snapshot_list(dir, &have, &n_have, err));
    enum dt_status st = DT_OK;
    for (int i = 0; i < n_have && st == DT_OK && !dry; i++) {
        /* the run's weights at a step it will not run again: kept, even off this run's
         * schedule (report.snapshots or train.steps changed on resume) */
        if (have[i] <= k) continue;
        dt_snapshot_path(path, sizeof path, dir, have[i]);
        if (remove(path) != 0 && errno != ENOENT)
            st = dt_error_set(err, DT_ERR_IO, "%s: cannot remove: %s", path, strerror(errno));
    }
    free(have);
    return st;
}

/* A resume may change train.steps (a finished run extended), but not under a schedule
 * that depends on it: cosine decays to train.steps, so every step after the warm-up of the
 * run so far had another learning rate than an uninterrupted run of the new length. */
static enum dt_status check_schedule_length(const char *config_json,
                                            const struct dt_experiment *exp, struct dt_error *err)
{
    struct dt_experiment *old = dt_xcalloc(1, sizeof *old);
    struct dt_error ignored = {0};
    enum dt_status st = DT_OK;
    if (dt_config_load(old, config_json, NULL, 0, &ignored) == DT_OK &&
        old->train.steps != exp->train.steps &&
        (old->train.optimizer.schedule == DT_LR_COSINE ||
         exp->train.optimizer.schedule == DT_LR_COSINE))
        st = dt_error_set(err, DT_ERR_CONFIG,
                          "%s: train.steps was %lld, now %lld, under the cosine schedule, which "
                          "decays to train.steps: the steps already run had other learning "
                          "rates than a run of %lld steps, so the trace could not be an "
                          "uninterrupted run's; resume with train.steps=%lld, or start a new run",
                          config_json, (long long)old->train.steps, (long long)exp->train.steps,
                          (long long)exp->train.steps, (long long)old->train.steps);
    free(old);
    return st;
}

/* --resume: is `dir` an experiment of this config? Its config.json must match exp on every
 * key a resume may not change (harness/record/checkpoint.h); the error names the keys that
 * differ. */
enum dt_status dt_resume_check_folder(const char *dir, const struct dt_experiment *exp,
                                      struct dt_error *err)
{
    if (!dt_is_dir(dir)) {
        char shown[300];
        dt_escape_str(shown, sizeof shown, dir);
        return dt_error_set(err, DT_ERR_USAGE,
                            "%s: no such result folder (--resume takes the folder of an "
                            "earlier `detrain run` of this config)",
                            shown);
    }
    /* nothing of the result is reached through a link: a cell folder that is one would
     * lead the resumed replicas' writes outside the result */
    DT_FORWARD_IF_ERROR(dt_result_check_links(dir, err));
    char path[1200];
    snprintf(path, sizeof path, "%s/config.json", dir);
    char *stored = dt_results_read_text(path, NULL);
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
    if (st == DT_OK) st = check_schedule_length(path, exp, err);
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
enum dt_status dt_resume_check_plans(struct run_ctx *c, struct dt_error *err)
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
            if (st == DT_OK) st = dt_resume_plan(&how, &ck, c, cell, r, dir, m, err);
            if (st != DT_OK) break;
            if (how == START_CHECKPOINT) { /* every file the cut will rely on, unchanged */
                int64_t kept_step;
                char kept_digest[DT_DIGEST_HEX];
                st = dt_resume_cut_back(exp, dir, &ck, true, &kept_step, kept_digest, err);
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

/* One split into the running digest: its sizes, then the digests of its features and
 * labels (bytes as read where kept, else the floats). */
static void split_digest(struct dt_strbuf *sb, const struct dt_split *s)
{
    uint8_t d[DT_DIGEST_BYTES];
    char hex[DT_DIGEST_HEX];
    dt_strbuf_printf(sb, "n=%" PRId64 " dim=%" PRId64 " stride=%" PRId64 " classes=%d", s->n,
                     s->dim, s->stride, s->n_classes);
    if (s->n > 0 && s->pixels) dt_sha256(d, s->pixels, (size_t)(s->n * s->dim));
    else if (s->n > 0 && s->x) dt_sha256_f32(d, s->x, (s->n - 1) * s->stride + s->dim);
    else dt_sha256(d, "", 0);
    dt_digest_hex(hex, d);
    dt_strbuf_printf(sb, " x=%s", hex);
    dt_sha256(d, s->y ? (const void *)s->y : "", s->y ? (size_t)s->n : 0);
    dt_digest_hex(hex, d);
    dt_strbuf_printf(sb, " y=%s\n", hex);
}

void dt_data_digest(char hex[DT_DIGEST_HEX], const struct dt_dataset *ds)
{
    struct dt_strbuf sb = {0};
    split_digest(&sb, &ds->train);
    split_digest(&sb, &ds->test);
    uint8_t d[DT_DIGEST_BYTES];
    dt_sha256(d, sb.data, sb.len);
    dt_digest_hex(hex, d);
    dt_strbuf_free(&sb);
}

/* The data digest `dir`'s run.json records: 1 same as this run's, 0 another (its first 16
 * hex digits in was), -1 none recorded (said on stderr unless quiet). */
static int recorded_data_same(const char *dir, const struct run_ctx *c, char was[17])
{
    char path[1200];
    snprintf(path, sizeof path, "%s/run.json", dir);
    char *text = dt_results_read_text(path, NULL);
    static const char key[] = "\"data_digest\": \"";
    const char *at = text ? strstr(text, key) : NULL;
    if (!at) {
        if (!c->opt->quiet)
            fprintf(stderr,
                    "detrain: %s records no data digest (a run from before it was "
                    "recorded): the data is not checked against the run's\n",
                    path);
        free(text);
        return -1;
    }
    at += sizeof key - 1;
    const bool same =
        strncmp(at, c->data_digest, DT_DIGEST_HEX - 1) == 0 && at[DT_DIGEST_HEX - 1] == '"';
    snprintf(was, 17, "%.16s", at);
    free(text);
    return same;
}

enum dt_status dt_check_data_recorded(const char *dir, const struct run_ctx *c,
                                      struct dt_error *err)
{
    char was[17];
    if (recorded_data_same(dir, c, was) != 0) return DT_OK;
    return dt_error_set(err, DT_ERR_DATA,
                        "reproduce: cannot be compared: the data here is not the data %s read "
                        "(%s in %s: digest %s... recorded, %.16s... here): a rerun on other "
                        "data says nothing about detrain; give the files it read "
                        "(dataset.path)",
                        dir, c->exp->dataset.name, c->ds->dir[0] ? c->ds->dir : "its path", was,
                        c->data_digest);
}

enum dt_status dt_resume_check_data(const char *dir, const struct run_ctx *c, struct dt_error *err)
{
    char was[17];
    if (recorded_data_same(dir, c, was) != 0) return DT_OK;
    return dt_error_set(err, DT_ERR_CONFIG,
                        "%s: the data changed since this run read it (%s in %s: digest %s... "
                        "then, %.16s... now): a resumed run on other data would match neither "
                        "run; resume with the data the run read, or start a new run",
                        dir, c->exp->dataset.name, c->ds->dir[0] ? c->ds->dir : "its path", was,
                        c->data_digest);
}
