/* `detrain export` (harness/record/export.h). */
#include "harness/record/export.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "build_info.h"
#include "core/fileio.h"
#include "core/util.h"
#include "harness/record/checkpoint.h"
#include "harness/record/layout.h"
#include "harness/record/outdir.h"
#include "harness/record/snapshot.h"
#include "harness/record/trace.h"
#include "harness/setup/config.h"
#include "harness/setup/model.h"

#define EXPORT_MAX_TENSORS 256

/* What is written: names, shapes and values of every tensor, in model order. */
struct weights {
    int n;
    char names[EXPORT_MAX_TENSORS][DT_PARAM_NAME];
    int ndim[EXPORT_MAX_TENSORS];
    int64_t shape[EXPORT_MAX_TENSORS][4];
    int64_t count[EXPORT_MAX_TENSORS];
    const float *values[EXPORT_MAX_TENSORS];
    int64_t step;
    char kind[32];
    char *config; /* the resolved config JSON (dt_config_write_json), malloc'ed; NULL: none */
};

/* The GPT's conventions a reader needs beside its config to rebuild the model (docs/cli.md,
 * "Load it in PyTorch"; nets/gpt_elem.h, harness/setup/data.c). */
static const char gpt_conventions[] =
    "bytes in, 256 classes out; wte [256, d_model] and wpe [context, d_model] added; per block: "
    "h += proj(attn(ln1(h))), h += fc2(gelu_tanh(fc(ln2(h)))), LayerNorm eps 1e-5 with weight "
    "and bias; qkv.weight [d_model, 3 d_model] fused, columns q | k | v, each d_model = heads x "
    "head_dim with head h at columns h head_dim; causal softmax of q.k scaled by 1/sqrt(head_dim); "
    "every dense layer has a bias but the head; logits = ln_f(h) x wte^T when tie_embeddings, "
    "else x lm_head.weight [d_model, 256]; dense weights are [in, out] (torch.nn.Linear's "
    "transposed); dropout only in training. Validation: the corpus's last tenth (len / 10 "
    "bytes, integer division), windows of context + 1 bytes at offsets 0, context, 2 context, "
    "...; test_loss and test_acc average every position of every window, predictions.csv "
    "holds the last position's";

/* Whether `path` begins with the checkpoint magic. It is opened as dt_open_regular opens
 * inputs: a FIFO, a device or a socket is refused (DT_ERR_IO naming what it is) before a
 * byte is read, so a FIFO with no writer cannot hang the open. */
static enum dt_status is_checkpoint(bool *yes, const char *path, struct dt_error *err)
{
    *yes = false;
    int fd;
    DT_FORWARD_IF_ERROR(dt_open_regular(&fd, path, "a checkpoint", NULL, err));
    char magic[8] = {0};
    size_t got = 0;
    const enum dt_status st = dt_read_fd(fd, magic, sizeof magic, &got, path, err);
    close(fd);
    *yes = st == DT_OK && got == 8 && memcmp(magic, DT_CHECKPOINT_MAGIC, 8) == 0;
    return st;
}

/* The experiment config.json in dir or its parents (at most four levels: replica, policy,
 * vary setting, experiment). */
static bool find_config(char *out, size_t size, const char *dir)
{
    char base[2048];
    snprintf(base, sizeof base, "%s", dir);
    for (int up = 0; up < 4; up++) {
        snprintf(out, size, "%s/config.json", base);
        if (dt_path_exists(out)) return true;
        const size_t n = strlen(base);
        if (n + 4 >= sizeof base) return false;
        memcpy(base + n, "/..", 4);
    }
    return false;
}

static enum dt_status write_safetensors(const struct weights *w, const char *src,
                                        const char *out_path, struct dt_error *err)
{
    struct dt_strbuf h = {0};
    dt_strbuf_printf(&h, "{\"__metadata__\":{\"format\":\"pt\",\"producer\":");
    dt_strbuf_json_string(&h, "detrain " DT_VERSION " (git " DT_GIT_REV ")");
    dt_strbuf_printf(&h, ",\"source\":");
    dt_strbuf_json_string(&h, src);
    dt_strbuf_printf(&h, ",\"step\":\"%" PRId64 "\",\"model.kind\":", w->step);
    dt_strbuf_json_string(&h, w->kind);
    dt_strbuf_printf(&h, ",\"layout\":\"dense weights [in, out] (torch.nn.Linear's weight "
                         "transposed); convolution weights HWIO; images NHWC\"");
    if (w->config) { /* the file alone rebuilds the model: its keys, as a string (safetensors) */
        dt_strbuf_printf(&h, ",\"config\":");
        dt_strbuf_json_string(&h, w->config);
    }
    if (strcmp(w->kind, "gpt") == 0) {
        dt_strbuf_printf(&h, ",\"gpt.conventions\":");
        dt_strbuf_json_string(&h, gpt_conventions);
    }
    dt_strbuf_printf(&h, "}");
    int64_t off = 0;
    for (int i = 0; i < w->n; i++) {
        dt_strbuf_printf(&h, ",");
        dt_strbuf_json_string(&h, w->names[i]);
        dt_strbuf_printf(&h, ":{\"dtype\":\"F32\",\"shape\":[");
        for (int d = 0; d < w->ndim[i]; d++)
            dt_strbuf_printf(&h, "%s%" PRId64, d ? "," : "", w->shape[i][d]);
        const int64_t bytes = w->count[i] * 4;
        dt_strbuf_printf(&h, "],\"data_offsets\":[%" PRId64 ",%" PRId64 "]}", off, off + bytes);
        off += bytes;
    }
    dt_strbuf_printf(&h, "}");
    while (h.len % 8) dt_strbuf_printf(&h, " "); /* the data starts 8-byte aligned */
    const uint64_t header_len = h.len;
    const int n_parts = 2 + w->n;
    const void **parts = dt_xcalloc((size_t)n_parts, sizeof *parts);
    size_t *sizes = dt_xcalloc((size_t)n_parts, sizeof *sizes);
    parts[0] = &header_len, sizes[0] = 8; /* little-endian, as every supported host is */
    parts[1] = h.data, sizes[1] = h.len;
    for (int i = 0; i < w->n; i++)
        parts[2 + i] = w->values[i], sizes[2 + i] = (size_t)w->count[i] * 4;
    struct dt_error inner = {0};
    enum dt_status st = dt_write_parts_atomic(out_path, parts, sizes, n_parts, &inner);
    if (st != DT_OK) { /* named as the user gave it, not by the temporary file beside it */
        const char *why = inner.msg;
        if (strncmp(why, out_path, strlen(out_path)) == 0 && strstr(why, ": "))
            why = strstr(why, ": ") + 2;
        dt_error_set(err, st, "%s: cannot write it: %s", out_path, why);
    }
    free(parts);
    free(sizes);
    dt_strbuf_free(&h);
    return st;
}

static enum dt_status from_checkpoint(const char *src, const char *out_path, struct dt_error *err)
{
    struct dt_checkpoint ck;
    memset(&ck, 0, sizeof ck);
    DT_FORWARD_IF_ERROR(dt_checkpoint_read(&ck, src, err));
    struct weights *w = dt_xcalloc(1, sizeof *w);
    enum dt_status st = DT_OK;
    if (ck.n_params > EXPORT_MAX_TENSORS)
        st = dt_error_set(err, DT_ERR_DATA, "%s: %d tensors (at most %d)", src, ck.n_params,
                          EXPORT_MAX_TENSORS);
    for (int i = 0; st == DT_OK && i < ck.n_params; i++) {
        snprintf(w->names[i], DT_PARAM_NAME, "%s", ck.params[i].name);
        w->ndim[i] = ck.params[i].ndim;
        memcpy(w->shape[i], ck.params[i].shape, sizeof w->shape[i]);
        w->count[i] = ck.params[i].n;
        w->values[i] = ck.params[i].w;
    }
    w->n = ck.n_params;
    w->step = ck.step;
    /* the model kind from the checkpoint's config */
    struct dt_experiment *exp = dt_xcalloc(1, sizeof *exp);
    if (st == DT_OK && dt_config_load_text(exp, src, ck.config_json, strlen(ck.config_json), -1,
                                           NULL, 0, err) == DT_OK) {
        snprintf(w->kind, sizeof w->kind, "%s", dt_model_kind_names[exp->model.kind]);
        w->config = dt_checkpoint_config_text(exp); /* the resolved config JSON */
    }
    if (st == DT_OK) st = write_safetensors(w, src, out_path, err);
    free(w->config);
    free(exp);
    free(w);
    dt_checkpoint_free(&ck);
    return st;
}

/* A folder given where a replica folder is wanted: an experiment folder (config.json in it)
 * or a cell folder (replica-0 in it) is refused naming a replica folder inside it; a folder
 * with neither trace.csv nor snapshots/ is no replica folder. */
static enum dt_status check_replica_folder(const char *dir, struct dt_error *err)
{
    char path[2100], example[2400];
    snprintf(path, sizeof path, "%s/config.json", dir);
    if (dt_path_exists(path)) {
        struct dt_experiment *exp = dt_xcalloc(1, sizeof *exp);
        struct dt_error ignored = {0};
        if (dt_config_load(exp, path, NULL, 0, &ignored) == DT_OK)
            dt_replica_dir(example, sizeof example, dir, exp, 0, 0);
        else snprintf(example, sizeof example, "%s/<cell>/replica-0", dir);
        free(exp);
        return dt_error_set(err, DT_ERR_USAGE,
                            "%s: an experiment folder; export writes one replica's weights: give "
                            "a replica folder, e.g. %s (or a checkpoint file)",
                            dir, example);
    }
    snprintf(path, sizeof path, "%s/replica-0", dir);
    if (dt_is_dir(path))
        return dt_error_set(err, DT_ERR_USAGE,
                            "%s: a cell folder; export writes one replica's weights: give a "
                            "replica folder, e.g. %s (or a checkpoint file)",
                            dir, path);
    char snaps[2100];
    snprintf(path, sizeof path, "%s/trace.csv", dir);
    dt_snapshot_dir(snaps, sizeof snaps, dir);
    if (!dt_path_exists(path) && !dt_is_dir(snaps))
        return dt_error_set(err, DT_ERR_USAGE,
                            "%s: not a replica folder of a detrain run (no trace.csv or "
                            "snapshots/ in it): give a replica folder, DIR/<cell>/replica-N, or "
                            "a checkpoint file",
                            dir);
    return DT_OK;
}

/* The step to export (*step; -1: the last snapshot) and the trace's model digest there: the
 * step must have a snapshot and lie within the replica's trace.csv, which records the
 * digest the snapshot is checked against. Nothing is clamped: another step is refused. */
static enum dt_status pick_step(int64_t *step, char digest[DT_DIGEST_HEX], const char *dir,
                                struct dt_error *err)
{
    int64_t *steps = NULL;
    int n_steps = 0;
    DT_FORWARD_IF_ERROR(dt_snapshot_list(dir, &steps, &n_steps, err));
    const bool given = *step >= 0;
    bool found = false;
    for (int i = 0; i < n_steps; i++) found |= steps[i] == *step;
    if (!given && n_steps > 0) *step = steps[n_steps - 1], found = true;
    char have[256] = "";
    for (int i = 0, used = 0; i < n_steps && used < (int)sizeof have - 16; i++)
        used += snprintf(have + used, sizeof have - (size_t)used, "%s%" PRId64, i ? ", " : "",
                         steps[i]);
    free(steps);
    if (n_steps == 0)
        return dt_error_set(err, DT_ERR_USAGE,
                            "%s: no weight snapshot at all (report.snapshots sets how many a run "
                            "keeps; a checkpoint file can be exported instead)",
                            dir);
    char tpath[2100];
    snprintf(tpath, sizeof tpath, "%s/trace.csv", dir);
    if (!dt_path_exists(tpath))
        return dt_error_set(err, DT_ERR_DATA,
                            "%s: missing: export checks a snapshot against the digest its "
                            "trace records, so the weights cannot be verified without it",
                            tpath);
    struct dt_trace_row *rows = NULL;
    int64_t n = 0;
    DT_FORWARD_IF_ERROR(dt_trace_read(&rows, &n, dir, err));
    const int64_t last = n > 0 ? rows[n - 1].step : -1;
    bool traced = false;
    for (int64_t i = 0; i < n && !traced; i++)
        if (rows[i].step == *step) memcpy(digest, rows[i].digest, DT_DIGEST_HEX), traced = true;
    free(rows);
    char which[64], ends[64] = "has no rows";
    snprintf(which, sizeof which, "%s %" PRId64, given ? "--step" : "its last snapshot, step",
             *step);
    if (n > 0) snprintf(ends, sizeof ends, "ends at step %" PRId64, last);
    if (*step > last)
        return dt_error_set(err, DT_ERR_USAGE,
                            "%s: %s is past the end of its trace (trace.csv %s), so its weights "
                            "cannot be checked: give --step with a step the trace covers "
                            "(snapshots at steps: %s)",
                            dir, which, ends, have);
    if (!found)
        return dt_error_set(err, DT_ERR_USAGE,
                            "%s: no weight snapshot at step %" PRId64
                            " (snapshots at steps: %s; report.snapshots sets how many a run "
                            "keeps)",
                            dir, *step, have);
    if (!traced)
        return dt_error_set(err, DT_ERR_DATA,
                            "%s: no row for step %" PRId64
                            ", so its snapshot cannot be checked; export another step "
                            "(snapshots at steps: %s)",
                            tpath, *step, have);
    return DT_OK;
}

/* The snapshot read is the one the trace recorded: its step, and its model digest. */
static enum dt_status verify_snapshot(const struct dt_snapshot *snap, const char *path,
                                      int64_t step, const char *digest, struct dt_error *err)
{
    if (snap->step != step)
        return dt_error_set(err, DT_ERR_DATA,
                            "%s: holds step %" PRId64 ", not %" PRId64
                            ": the file was renamed or damaged; nothing written",
                            path, snap->step, step);
    char own[DT_DIGEST_HEX];
    if (!dt_snapshot_matches(own, snap, digest))
        return dt_error_set(err, DT_ERR_DATA,
                            "%s: does not match trace.csv at step %" PRId64
                            ": snapshot corrupted or from another run (model digest %s, trace "
                            "has %s); nothing written",
                            path, step, own, digest);
    return DT_OK;
}

/* A replica folder's snapshot, verified against its trace; shapes from the experiment's
 * model, built on the CPU. */
static enum dt_status from_snapshot(const char *dir, int64_t step, const char *out_path,
                                    struct dt_error *err)
{
    DT_FORWARD_IF_ERROR(check_replica_folder(dir, err));
    char digest[DT_DIGEST_HEX];
    DT_FORWARD_IF_ERROR(pick_step(&step, digest, dir, err));
    char cfg[2100];
    if (!find_config(cfg, sizeof cfg, dir))
        return dt_error_set(err, DT_ERR_USAGE,
                            "%s: not a replica folder of a detrain run (no config.json in it or "
                            "its parents), and not a checkpoint file",
                            dir);
    struct dt_experiment *exp = dt_xcalloc(1, sizeof *exp);
    enum dt_status st = dt_config_load(exp, cfg, NULL, 0, err);
    struct dt_backend *be = NULL;
    struct dt_model *m = NULL;
    struct dt_snapshot snap;
    memset(&snap, 0, sizeof snap);
    if (st == DT_OK) {
        exp->backend.device = DT_DEVICE_CPU;
        exp->backend.threads = 1;
        exp->train.batch = 1; /* shapes only */
        st = dt_experiment_open_backend(&be, exp, 0, err);
    }
    if (st == DT_OK) st = dt_experiment_build_model(&m, exp, be, 1, err);
    char path[2300];
    dt_snapshot_path(path, sizeof path, dir, step);
    if (st == DT_OK) st = dt_snapshot_read(&snap, path, err);
    if (st == DT_OK) st = verify_snapshot(&snap, path, step, digest, err);
    struct weights *w = dt_xcalloc(1, sizeof *w);
    if (st == DT_OK && snap.n_tensors != m->n_tensors)
        st = dt_error_set(err, DT_ERR_DATA, "%s: %d tensors; the model of %s has %d", path,
                          snap.n_tensors, cfg, m->n_tensors);
    for (int i = 0; st == DT_OK && i < m->n_tensors; i++) {
        const struct dt_param *p = &m->params[i];
        if (strcmp(snap.names[i], p->name) != 0 || snap.counts[i] != p->n) {
            st = dt_error_set(err, DT_ERR_DATA,
                              "%s: tensor %d is %s (%" PRId64 " values); the model of %s has %s "
                              "(%" PRId64 ")",
                              path, i, snap.names[i], snap.counts[i], cfg, p->name, p->n);
            break;
        }
        snprintf(w->names[i], DT_PARAM_NAME, "%s", p->name);
        w->ndim[i] = p->ndim;
        memcpy(w->shape[i], p->shape, sizeof w->shape[i]);
        w->count[i] = p->n;
        w->values[i] = snap.data + snap.offsets[i];
    }
    if (st == DT_OK) {
        w->n = m->n_tensors;
        w->step = step;
        snprintf(w->kind, sizeof w->kind, "%s", dt_model_kind_names[exp->model.kind]);
        w->config = dt_checkpoint_config_text(exp); /* the resolved config JSON */
        st = write_safetensors(w, path, out_path, err);
        free(w->config);
    }
    free(w);
    dt_snapshot_free(&snap);
    dt_model_destroy(m);
    dt_backend_destroy(be);
    free(exp);
    return st;
}

/* The folder FILE goes in exists and may be written: said under the name the user gave. */
static enum dt_status check_out_folder(const char *out_path, struct dt_error *err)
{
    char folder[4096];
    snprintf(folder, sizeof folder, "%s", out_path);
    char *slash = strrchr(folder, '/');
    if (!slash) snprintf(folder, sizeof folder, ".");
    else if (slash == folder) slash[1] = '\0';
    else *slash = '\0';
    if (!dt_is_dir(folder))
        return dt_error_set(
            err, DT_ERR_USAGE, "%s: the folder %s %s: create it first or choose another place",
            out_path, folder, dt_path_exists(folder) ? "is not a folder" : "does not exist");
    if (access(folder, W_OK) != 0)
        return dt_error_set(err, DT_ERR_USAGE,
                            "%s: cannot write in the folder %s (%s): choose another place",
                            out_path, folder, strerror(errno));
    return DT_OK;
}

enum dt_status dt_export_safetensors(const char *src, int64_t step, const char *out_path,
                                     struct dt_error *err)
{
    if (dt_path_exists(out_path))
        return dt_error_set(err, DT_ERR_USAGE,
                            "%s: exists; export writes a new file (remove it or choose another)",
                            out_path);
    DT_FORWARD_IF_ERROR(check_out_folder(out_path, err));
    if (!dt_path_exists(src))
        return dt_error_set(err, DT_ERR_IO, "%s: no such checkpoint or replica folder", src);
    /* not inside what it reads: a result folder holds only detrain's own files */
    DT_FORWARD_IF_ERROR(dt_out_file_check(out_path, &src, 1, "", "safetensors file", err));
    if (!dt_is_dir(src)) {
        bool ckpt = false;
        DT_FORWARD_IF_ERROR(is_checkpoint(&ckpt, src, err)); /* a special file: refused */
        if (step >= 0)
            return dt_error_set(err, DT_ERR_USAGE,
                                "%s: --step is for a replica folder's snapshots; a checkpoint "
                                "holds one step",
                                src);
        if (!ckpt)
            return dt_error_set(err, DT_ERR_DATA,
                                "%s: not a detrain checkpoint (checkpoint.bin, divergence.bin) "
                                "nor a replica folder",
                                src);
        return from_checkpoint(src, out_path, err);
    }
    return from_snapshot(src, step, out_path, err);
}
