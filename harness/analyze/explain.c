/* `detrain explain A B` (explain.h): restore the state before the first divergent step,
 * re-execute that step with every op's outputs hashed, name the first op output that
 * differs, and find the control whose switch makes it agree. */
#include "harness/record/outdir.h"
#include "harness/analyze/explain.h"

#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "core/fileio.h"
#include "core/util.h"
#include "harness/analyze/compare.h"
#include "harness/record/checkpoint.h"
#include "harness/record/hash.h"
#include "harness/record/layout.h"
#include "harness/record/trace.h"
#include "harness/run/batches.h"
#include "harness/run/divwatch.h"
#include "harness/run/train.h"
#include "harness/setup/config.h"
#include "harness/setup/data.h"
#include "harness/setup/model.h"
#include "harness/setup/test_hooks.h"
#include "nets/backend.h"
#include "nets/model.h"
#include "nets/models.h"
#include "nets/step.h"

enum { PATH_LEN = 1200, MAX_EXEC = 64 };

/* ---- one side: a replica's run, rebuilt ---------------------------------------------------- */

struct side {
    char dir[PATH_LEN], exp_dir[PATH_LEN];
    char shown[PATH_LEN]; /* the folder as the command line named it */
    struct dt_experiment exp;
    int cell, r;
    struct dt_policy pol; /* the replica's policy */
    struct dt_checkpoint_info streams;
    uint32_t member;
    struct dt_backend *be;
    struct dt_dataset ds;
    bool ds_loaded;
    struct dt_resident *set;
    struct dt_model *m;
    struct dt_step dstep;       /* the step (nets/step.h), one process: no exchange */
    struct dt_policy dstep_pol; /* the policy dstep was last used with */
    int replay_miss;            /* test hook: replayed steps still to spoil */
    struct dt_batch_stream bs;
    bool bs_init;
    struct dt_sgd_options sgd;
    struct dt_trace_row *rows;
    int64_t n_rows;
    struct dt_model_state saved; /* the state after step saved.step */
    char how[PATH_LEN + 64];     /* where the restored state came from */
};

/* The folder holding config.json at or above `dir` (at most three levels up). */
static bool find_experiment(char *out, size_t size, const char *dir)
{
    char cur[PATH_LEN];
    snprintf(cur, sizeof cur, "%s", dir);
    for (int up = 0; up < 4; up++) {
        char path[PATH_LEN + 16];
        snprintf(path, sizeof path, "%s/config.json", cur);
        if (dt_path_exists(path)) {
            snprintf(out, size, "%s", cur);
            return true;
        }
        char *slash = strrchr(cur, '/');
        if (!slash || slash == cur) return false;
        *slash = '\0';
    }
    return false;
}

/* Which experiment, cell and replica `arg` is (a cell folder means its replica-0). */
static enum dt_status side_locate(struct side *sd, const char *arg, struct dt_error *err)
{
    char abs[PATH_MAX];
    if (!dt_is_dir(arg)) return dt_error_set(err, DT_ERR_IO, "%s: no such folder", arg);
    if (!realpath(arg, abs)) return dt_error_set(err, DT_ERR_IO, "%s: cannot resolve", arg);
    snprintf(sd->shown, sizeof sd->shown, "%.1150s", arg);
    snprintf(sd->dir, sizeof sd->dir, "%.1150s", abs);
    char trace[PATH_LEN + 16];
    snprintf(trace, sizeof trace, "%s/trace.csv", sd->dir);
    if (!dt_path_exists(trace)) {
        char r0[PATH_LEN + 16];
        snprintf(r0, sizeof r0, "%s/replica-0", sd->dir);
        if (!dt_is_dir(r0))
            return dt_error_set(err, DT_ERR_IO,
                                "%s: not a replica folder (no trace.csv) nor a cell folder (no "
                                "replica-0)",
                                arg);
        snprintf(sd->dir, sizeof sd->dir, "%.1150s", r0);
        snprintf(sd->shown, sizeof sd->shown, "%.1100s/replica-0", arg);
    }
    if (!find_experiment(sd->exp_dir, sizeof sd->exp_dir, sd->dir))
        return dt_error_set(err, DT_ERR_IO,
                            "%s: no config.json in the folders above it: explain needs the "
                            "experiment folder the replica belongs to",
                            arg);
    char cfg[PATH_LEN + 16];
    snprintf(cfg, sizeof cfg, "%s/config.json", sd->exp_dir);
    DT_FORWARD_IF_ERROR(dt_config_load(&sd->exp, cfg, NULL, 0, err));
    for (int c = 0; c < dt_cell_count(&sd->exp); c++)
        for (int r = 0; r < sd->exp.replicas; r++) {
            char rd[PATH_LEN];
            dt_replica_dir(rd, sizeof rd, sd->exp_dir, &sd->exp, c, r);
            if (dt_same_path(rd, sd->dir)) {
                sd->cell = c;
                sd->r = r;
                sd->pol = sd->exp.policies[dt_cell_policy(&sd->exp, c)];
                sd->streams = dt_replica_streams(&sd->exp, c, r, &sd->member);
                return dt_trace_read(&sd->rows, &sd->n_rows, sd->dir, err);
            }
        }
    return dt_error_set(err, DT_ERR_DATA, "%s: not a replica of the experiment in %s", arg,
                        sd->exp_dir);
}

/* A and B must be runs of one experiment up to what explain attributes a divergence to (the
 * policy, the vary setting, the replica), what it may rerun on another device (backend) and
 * what a run may change without changing its trace (train.steps, report.*, ...): explain
 * on replicas of two different models used to blame the initial-weight stream. Refused
 * (DT_ERR_USAGE) naming the keys that differ. */
static enum dt_status same_experiment(const struct side *a, const struct side *b,
                                      struct dt_error *err)
{
    char diff[800] = "";
    bool differ = false;
    enum dt_status st = dt_experiment_diff(diff, sizeof diff, &differ, &a->exp, &b->exp, true, err);
    if (st == DT_OK && differ)
        st = dt_error_set(err, DT_ERR_USAGE,
                          "%s and %s are replicas of different experiments (%s): explain "
                          "attributes a divergence to a determinism control or a noise source, "
                          "not to a change of model, data or training; explain two replicas of "
                          "one config (their policies, vary settings and devices may differ)",
                          a->shown, b->shown, diff);
    return st;
}

static void side_free(struct side *sd)
{
    if (sd->m) {
        dt_step_free(&sd->dstep);
        dt_model_destroy(sd->m);
    }
    dt_model_state_free(&sd->saved);
    if (sd->bs_init) dt_batch_stream_free(&sd->bs);
    if (sd->be) dt_backend_resident_free(sd->be, sd->set);
    if (sd->ds_loaded) dt_dataset_free(&sd->ds);
    dt_backend_destroy(sd->be);
    free(sd->rows);
}

/* How many times a replayed segment whose digest misses the trace is re-executed. */
enum { REPLAY_TRIES = 32 };

/* Test hook (harness/setup/test_hooks.h): the first N replayed steps' results spoiled (one
 * weight's low bit flipped), as a step that took other bits would. */
static void spoil_step(struct side *sd)
{
    uint32_t w;
    dt_backend_download(sd->be, &w, sd->m->params[0].w, sizeof w);
    w ^= 1u;
    dt_backend_upload(sd->be, sd->m->params[0].w, &w, sizeof w);
}

/* The trace's digest at `step`, or NULL when that step was not hashed. */
static const char *trace_digest(const struct side *sd, int64_t step)
{
    for (int64_t i = 0; i < sd->n_rows; i++)
        if (sd->rows[i].step == step) return sd->rows[i].digest;
    return NULL;
}

static void model_digest(struct side *sd, char hex[DT_DIGEST_HEX])
{
    struct dt_model *m = sd->m;
    int64_t most = 1;
    for (int i = 0; i < m->n_tensors; i++)
        if (m->params[i].n > most) most = m->params[i].n;
    float *staging = dt_xmalloc((size_t)most * sizeof(float));
    uint8_t(*td)[DT_DIGEST_BYTES] = dt_xmalloc((size_t)m->n_tensors * DT_DIGEST_BYTES);
    uint8_t d[DT_DIGEST_BYTES];
    dt_hash_model(d, td, m, staging);
    dt_digest_hex(hex, d);
    free(td);
    free(staging);
}

/* One training step s (1-based) under pol, as the run took it. */
static enum dt_status side_step(struct side *sd, const struct dt_policy *pol, int64_t s,
                                struct dt_error *err)
{
    if (!dt_policy_equal_controls(pol, &sd->dstep_pol)) { /* another kind of reduction */
        dt_step_free(&sd->dstep);
        sd->dstep_pol = *pol;
    }
    const struct dt_batch b = dt_batch_stream_at(&sd->bs, s - 1);
    float loss = 0.0f;
    enum dt_status st = dt_step_train(&sd->dstep, sd->m, NULL, &b, sd->exp.train.batch,
                                      sd->exp.train.shards, &sd->sgd, pol, &loss);
    if (st != DT_OK)
        return dt_error_set(err, st, "%s: step %" PRId64 " failed: %s", sd->dir, s,
                            sd->m->err.status != DT_OK ? sd->m->err.msg : dt_status_str(st));
    return DT_OK;
}

static void side_save(struct side *sd) { dt_model_state_save(&sd->saved, sd->m); }

static void side_restore(struct side *sd) { dt_model_state_load(&sd->saved, sd->m); }

/* The latest saved state at or before `upto` loaded into sd's model: the side's
 * checkpoint.bin or divergence.bin (train.checkpoint_at_divergence), or, for replicas of one
 * run (other not NULL), the other's divergence.bin: they agree up to k-1 (checked after the
 * replay). Returns where it came from (sd->how), "the initial weights" when none. */
static const char *side_load_saved(struct side *sd, const struct side *other, int64_t upto)
{
    struct dt_model *m = sd->m;
    snprintf(sd->how, sizeof sd->how, "the initial weights");
    const struct {
        const struct side *sd;
        const char *file;
    } cand[] = {{sd, DT_CHECKPOINT_FILE}, {sd, DT_DIVERGENCE_FILE}, {other, DT_DIVERGENCE_FILE}};
    struct dt_checkpoint best;
    memset(&best, 0, sizeof best);
    best.step = -1;
    for (size_t c = 0; c < sizeof cand / sizeof cand[0]; c++) {
        if (!cand[c].sd || upto <= 0) continue;
        char path[PATH_LEN + 32];
        snprintf(path, sizeof path, "%s/%s", cand[c].sd->dir, cand[c].file);
        if (!dt_path_exists(path)) continue;
        struct dt_checkpoint ck;
        memset(&ck, 0, sizeof ck);
        struct dt_error ckerr = {0};
        if (dt_checkpoint_read(&ck, path, &ckerr) == DT_OK && ck.step <= upto &&
            ck.step > best.step && ck.n_params == m->n_tensors) {
            dt_checkpoint_free(&best);
            best = ck;
            if (cand[c].sd == sd && c == 0) snprintf(sd->how, sizeof sd->how, "its checkpoint");
            else snprintf(sd->how, sizeof sd->how, "%s/%s", cand[c].sd->shown, cand[c].file);
        } else dt_checkpoint_free(&ck);
    }
    if (best.step >= 0) dt_checkpoint_apply(&best, m);
    dt_checkpoint_free(&best);
    return sd->how;
}

/* Build the side's backend, data and model; its state after step `upto`: from its
 * checkpoint when that is not later, then replayed; checked against its trace. */
static enum dt_status side_prepare(struct side *sd, const struct side *other, int64_t upto,
                                   FILE *out, bool quiet, struct dt_error *err)
{
    const struct dt_experiment *exp = &sd->exp;
    DT_FORWARD_IF_ERROR(dt_experiment_open_backend(&sd->be, exp, 0, err));
    DT_FORWARD_IF_ERROR(dt_experiment_load_dataset(&sd->ds, exp, err));
    sd->ds_loaded = true;
    sd->set = dt_batch_resident(sd->be, &sd->ds.train);
    DT_FORWARD_IF_ERROR(dt_experiment_build_model(&sd->m, exp, sd->be, sd->ds.train.n, err));
    struct dt_model *m = sd->m;
    sd->sgd = dt_experiment_sgd_options(exp);
    sd->dstep_pol = sd->pol;
    dt_batch_stream_init(&sd->bs, &sd->ds.train, sd->set, exp->train.batch, exp->train.seed,
                         sd->streams.order_stream);
    sd->bs_init = true;
    dt_model_init(m, exp->train.seed, sd->streams.init_stream);
    m->member = sd->member;
    const char *how = side_load_saved(sd, other, upto);
    /* Replayed step by step, each hashed step checked against the trace. A policy with
     * unordered reductions or float atomics need not take the same bits again; a segment
     * whose digest misses is re-executed from the last matching state, up to REPLAY_TRIES
     * times: the trace says which of the step's possible outcomes the run took. */
    const int64_t from = m->step;
    int64_t retried = 0;
    int tries = 0;
    char hex[DT_DIGEST_HEX];
    if (upto > from) side_save(sd);
    for (int64_t s = from + 1; s <= upto; s++) {
        DT_FORWARD_IF_ERROR(side_step(sd, &sd->pol, s, err));
        if (sd->replay_miss > 0) {
            sd->replay_miss--;
            spoil_step(sd);
        }
        const char *at = trace_digest(sd, s);
        if (!at && s == upto)
            return dt_error_set(err, DT_ERR_DATA,
                                "%s: its trace has no row for step %" PRId64
                                " to check the replay against",
                                sd->dir, upto);
        if (at) {
            model_digest(sd, hex);
            if (strcmp(hex, at) == 0) {
                side_save(sd);
                tries = 0;
            } else if (++tries < REPLAY_TRIES) {
                retried += s - sd->saved.step;
                side_restore(sd);
                s = sd->saved.step;
                continue;
            } else {
                return dt_error_set(
                    err, DT_ERR_DATA,
                    "%s: replay does not match: from %s (step %" PRId64 "), step %" PRId64
                    " replayed %d times never gave its trace's digest %.16s... (last %.16s...); "
                    "the run cannot be reproduced here (another build, device or thread count), "
                    "so nothing is explained",
                    sd->dir, how, from, s, REPLAY_TRIES, at, hex);
            }
        }
        if (!quiet && (s % 100 == 0 || s == upto))
            fprintf(stderr, "explain: %s: replayed to step %" PRId64 " of %" PRId64 "\r", sd->dir,
                    s, upto);
    }
    if (!quiet && upto > from) fputc('\n', stderr);
    model_digest(sd, hex);
    const char *want = trace_digest(sd, upto);
    if (!want)
        return dt_error_set(err, DT_ERR_DATA,
                            "%s: its trace has no row for step %" PRId64 " to check the replay "
                            "against",
                            sd->dir, upto);
    if (strcmp(hex, want) != 0) /* not replayed: the initial weights or the checkpoint */
        return dt_error_set(err, DT_ERR_DATA,
                            "%s: replay does not match: %s (step %" PRId64 ") has model digest "
                            "%.16s..., its trace says %.16s...; the run cannot be reproduced "
                            "here (another build, device or config), so nothing is explained",
                            sd->dir, how, upto, hex, want);
    fprintf(out, "  %s: restored after step %" PRId64 " (from %s, replayed %" PRId64 " step(s)",
            sd->shown, upto, how, upto - from);
    if (retried > 0)
        fprintf(out, "; %" PRId64 " re-executed until its digest matched the trace", retried);
    fprintf(out, "); digest %.16s... matches its trace\n", hex);
    side_save(sd);
    return DT_OK;
}

/* ---- op-level hashing ---------------------------------------------------------------------- */

/* One op output of one execution. */
struct rec {
    enum dt_op op; /* DT_OP_COUNT: the batch */
    char layer[48], tensor[96];
    const char *phase;
    int occurrence;      /* among the records before it with the same op and tensor */
    bool is_float, host; /* host: the batch loss, a host scalar */
    int64_t words;
    uint8_t digest[DT_DIGEST_BYTES];
    uint32_t *copy; /* the reference execution only */
    int64_t differing;
    uint64_t max_ulp;
};

struct exec {
    struct rec *r;
    int n, cap;
    char final[DT_DIGEST_HEX];
};

/* The forced-op test hook (explain.h). */
struct force_hook {
    bool on;
    enum dt_op op;
    char tensor[64];
};

struct observer {
    struct side *sd;
    struct exec *ex;
    const struct exec *ref; /* NULL: ex is the reference */
    const struct dt_policy *pol;
    uint64_t seed;        /* this execution's forced order (0 none) */
    struct force_hook fh; /* the hooked ops forced (else the whole step, or nothing) */
    bool batch_done, forced_now;
    char layer[48];
    char param[DT_PARAM_NAME]; /* the last parameter read, "_mu" / "_rho" cut */
    uint32_t *buf;
    int64_t buf_words;
};

/* The layer of a parameter name: "dense1.weight_mu" -> "dense1". */
static void layer_of(char *out, size_t size, const char *param)
{
    snprintf(out, size, "%s", param);
    char *dot = strchr(out, '.');
    if (dot) *dot = '\0';
}

/* Name output k: a parameter's gradient, weights or momentum by pointer, else the op's
 * output in the current layer. */
static void name_output(struct observer *o, enum dt_op op, const void *p, int k, char *tensor,
                        size_t size)
{
    const struct dt_model *m = o->sd->m;
    for (int i = 0; i < m->n_tensors; i++) {
        const struct dt_param *q = &m->params[i];
        const char *what = p == q->g   ? " gradient"
                           : p == q->w ? ""
                           : p == q->v ? " momentum"
                                       : NULL;
        if (!what) continue;
        snprintf(tensor, size, "%s%s", q->name, what);
        layer_of(o->layer, sizeof o->layer, q->name);
        return;
    }
    if (op == DT_OP_EXACT_SUM) snprintf(o->layer, sizeof o->layer, "all");
    char name[48]; /* the op row's name of output k (nets/op_list.h) */
    dt_op_output_name(name, sizeof name, op, k);
    /* "dense0.weight sampled weights", else "dense1 input gradient" */
    const char *of = op == DT_OP_BNN_SAMPLE && o->param[0] ? o->param : o->layer;
    snprintf(tensor, size, "%.*s %.40s", (int)(size > 42 ? size - 42 : 0), of, name);
}

static bool hook_matches(const struct observer *o, enum dt_op op, const struct dt_op_tensor *t,
                         int n)
{
    if (!o->fh.on || op != o->fh.op) return false;
    if (!o->fh.tensor[0]) return true;
    const struct dt_model *m = o->sd->m;
    const size_t len = strlen(o->fh.tensor);
    for (int j = 0; j < n; j++)
        for (int i = 0; i < m->n_tensors; i++) {
            const struct dt_param *q = &m->params[i];
            if ((t[j].p == q->g || t[j].p == q->w) && strncmp(q->name, o->fh.tensor, len) == 0)
                return true;
        }
    return false;
}

static uint64_t ulp_distance(uint32_t a, uint32_t b)
{
    const int64_t ia = (a & 0x80000000u) ? -(int64_t)(a & 0x7fffffffu) : (int64_t)a;
    const int64_t ib = (b & 0x80000000u) ? -(int64_t)(b & 0x7fffffffu) : (int64_t)b;
    return (uint64_t)(ia > ib ? ia - ib : ib - ia);
}

static void record(struct observer *o, enum dt_op op, const char *tensor, const void *p,
                   int64_t bytes, enum dt_op_tensor_role role)
{
    struct exec *ex = o->ex;
    if (ex->n == ex->cap) {
        ex->cap = ex->cap ? 2 * ex->cap : 64;
        ex->r = realloc(ex->r, (size_t)ex->cap * sizeof *ex->r);
        DT_ASSERT(ex->r);
    }
    struct rec *r = &ex->r[ex->n++];
    memset(r, 0, sizeof *r);
    r->op = op;
    snprintf(r->tensor, sizeof r->tensor, "%s", tensor);
    snprintf(r->layer, sizeof r->layer, "%s", op == DT_OP_COUNT ? "input" : o->layer);
    r->phase = op == DT_OP_COUNT ? "data" : dt_op_phase(op);
    r->is_float = role == DT_OP_OUT || role == DT_OP_OUT_HOST;
    r->host = role == DT_OP_OUT_HOST;
    r->words = bytes / 4;
    if (r->words > o->buf_words) {
        free(o->buf);
        o->buf_words = r->words;
        o->buf = dt_xmalloc((size_t)r->words * 4);
    }
    if (role == DT_OP_OUT_HOST) memcpy(o->buf, p, (size_t)bytes);
    else if (bytes) dt_backend_download(o->sd->be, o->buf, p, (size_t)bytes);
    dt_sha256(r->digest, o->buf, (size_t)bytes);
    if (!o->ref) {
        r->copy = dt_xmalloc((size_t)(bytes ? bytes : 4));
        memcpy(r->copy, o->buf, (size_t)bytes);
        return;
    }
    /* the reference's record at the same place (a different op there is a structural
     * difference, found by first_difference) */
    const int at = ex->n - 1;
    const struct rec *q = at < o->ref->n ? &o->ref->r[at] : NULL;
    if (!q || q->op != op || q->words != r->words) return;
    for (int64_t e = 0; e < r->words; e++)
        if (q->copy[e] != o->buf[e]) {
            r->differing++;
            const uint64_t u = r->is_float ? ulp_distance(q->copy[e], o->buf[e])
                                           : (uint64_t)llabs((long long)(int32_t)q->copy[e] -
                                                             (long long)(int32_t)o->buf[e]);
            if (u > r->max_ulp) r->max_ulp = u;
        }
}

static void observe(void *ctx, struct dt_backend *be, enum dt_op op, bool after,
                    const struct dt_op_tensor *t, int n)
{
    struct observer *o = ctx;
    struct dt_model *m = o->sd->m;
    if (!o->batch_done) { /* the step's batch, before its first op */
        o->batch_done = true;
        record(o, DT_OP_COUNT, "batch x", m->x, o->sd->exp.train.batch * m->in_dim * 4, DT_OP_OUT);
        record(o, DT_OP_COUNT, "batch labels", m->labels, o->sd->exp.train.batch * 4,
               DT_OP_OUT_INT);
    }
    if (dt_backend_layer(be)[0]) /* the model names its layers (nets/net.c) */
        snprintf(o->layer, sizeof o->layer, "%s", dt_backend_layer(be));
    for (int j = 0; j < n; j++) /* else the layer of the parameters it reads */
        if (t[j].role == DT_OP_IN_PARAM)
            for (int i = 0; i < m->n_tensors; i++)
                if (t[j].p == m->params[i].w) {
                    layer_of(o->layer, sizeof o->layer, m->params[i].name);
                    snprintf(o->param, sizeof o->param, "%s", m->params[i].name);
                    char *cut = strstr(o->param, "_mu");
                    if (!cut) cut = strstr(o->param, "_rho");
                    if (cut) *cut = '\0';
                }
    const bool hooked = hook_matches(o, op, t, n);
    if (!after) {
        if (hooked && o->seed) {
            (void)dt_backend_set_forced_order(be, o->seed);
            o->forced_now = true;
        }
        return;
    }
    if (o->forced_now) {
        (void)dt_backend_set_forced_order(be, 0);
        o->forced_now = false;
    }
    if (hooked && o->seed && o->pol->rng == DT_RNG_STORED &&
        (op == DT_OP_EPS_PHILOX || op == DT_OP_EPS_LFSR)) {
        /* an epsilon draw has no combination order: flip one element's low bit */
        const int64_t words = t[0].bytes / 4;
        float v;
        const int64_t e = (int64_t)(o->seed % (uint64_t)words);
        dt_backend_download(be, &v, (const float *)t[0].p + e, sizeof v);
        uint32_t bits;
        memcpy(&bits, &v, sizeof bits);
        bits ^= 1u;
        memcpy(&v, &bits, sizeof v);
        dt_backend_upload(be, (float *)t[0].p + e, &v, sizeof v);
    }
    int k = 0;
    for (int j = 0; j < n; j++) {
        if (t[j].role == DT_OP_IN_PARAM) continue;
        char tensor[96];
        name_output(o, op, t[j].p, k++, tensor, sizeof tensor);
        record(o, op, tensor, t[j].p, t[j].bytes, t[j].role);
    }
}

static void exec_free(struct exec *ex)
{
    for (int i = 0; i < ex->n; i++) free(ex->r[i].copy);
    free(ex->r);
    memset(ex, 0, sizeof *ex);
}

/* Names finished after the step: an epsilon draw is named after the parameter whose
 * sample (forward) or gradient (backward) takes it next ("dense0.weight epsilon"); then
 * each record's occurrence among those with its op and final name is counted. */
static bool is_eps(enum dt_op op)
{
    return op == DT_OP_EPS_PHILOX || op == DT_OP_EPS_LFSR || op == DT_OP_EPS_LFSR_SEED;
}

static void finish_names(struct exec *ex)
{
    for (int i = 0; i < ex->n; i++) {
        struct rec *r = &ex->r[i];
        if (!is_eps(r->op)) continue;
        for (int j = i + 1; j < ex->n; j++) {
            const struct rec *c = &ex->r[j];
            if (c->op != DT_OP_BNN_SAMPLE && c->op != DT_OP_BNN_ACCUMULATE) continue;
            char stem[96];
            snprintf(stem, sizeof stem, "%.95s", c->tensor);
            char *cut = strchr(stem, ' ');
            if (cut) *cut = '\0';
            cut = strstr(stem, "_mu");
            if (cut) *cut = '\0';
            const bool lanes = strstr(r->tensor, "lane states") != NULL;
            snprintf(r->tensor, sizeof r->tensor, "%.60s %s", stem,
                     lanes ? "lane states" : "epsilon");
            snprintf(r->layer, sizeof r->layer, "%s", c->layer);
            break;
        }
    }
    for (int i = 0; i < ex->n; i++) {
        ex->r[i].occurrence = 0;
        for (int j = 0; j < i; j++)
            if (ex->r[j].op == ex->r[i].op && !strcmp(ex->r[j].tensor, ex->r[i].tensor))
                ex->r[i].occurrence++;
    }
}

/* Re-execute step s of sd from its saved state under pol with op hashing into ex. */
static enum dt_status run_execution(struct side *sd, const struct dt_policy *pol, int64_t s,
                                    struct exec *ex, const struct exec *ref, uint64_t seed,
                                    bool force_all, const struct force_hook *fh,
                                    struct dt_error *err)
{
    side_restore(sd);
    struct observer o = {.sd = sd, .ex = ex, .ref = ref, .pol = pol, .seed = seed};
    if (fh) o.fh = *fh;
    snprintf(o.layer, sizeof o.layer, "-");
    if (force_all && seed) (void)dt_backend_set_forced_order(sd->be, seed);
    dt_backend_set_observer(sd->be, observe, &o);
    enum dt_status st = side_step(sd, pol, s, err);
    dt_backend_set_observer(sd->be, NULL, NULL);
    (void)dt_backend_set_forced_order(sd->be, 0);
    free(o.buf);
    finish_names(ex);
    if (st == DT_OK) model_digest(sd, ex->final);
    return st;
}

/* The batch loss (a host scalar) feeds no weight: a loss that differs is said, but the
 * first differing op named is the first that can move the weights. */
static bool is_loss(const struct rec *r) { return r->host; }

/* The parameters the two sides' traces agree on after the divergent step (tensors.csv):
 * an output that is one of their gradients, weights or momenta did not differ in the run,
 * though it may in a re-execution (a forced order the run never takes). */
struct agreed {
    int n;
    char names[256][64];
};

static void read_agreed(struct agreed *ag, const struct side *a, const struct side *b, int64_t step)
{
    struct names {
        char na[256][64], nb[256][64], da[256][DT_DIGEST_HEX], db[256][DT_DIGEST_HEX];
    } *t = dt_xmalloc(sizeof *t);
    char(*na)[64] = t->na, (*nb)[64] = t->nb, (*da)[DT_DIGEST_HEX] = t->da,
    (*db)[DT_DIGEST_HEX] = t->db;
    struct dt_error why = {0};
    bool absent;
    ag->n = 0;
    const int ka = dt_trace_read_tensors(a->dir, step, na, da, 256, &why, &absent);
    const int kb = dt_trace_read_tensors(b->dir, step, nb, db, 256, &why, &absent);
    for (int i = 0; i < ka && i < kb; i++)
        if (!strcmp(na[i], nb[i]) && !strcmp(da[i], db[i]))
            snprintf(ag->names[ag->n++], sizeof ag->names[0], "%.63s", na[i]);
    free(t);
}

static bool run_agrees_on(const struct agreed *ag, const struct rec *r)
{
    if (!ag) return false;
    for (int i = 0; i < ag->n; i++) {
        const size_t len = strlen(ag->names[i]);
        if (!strncmp(r->tensor, ag->names[i], len) &&
            (!r->tensor[len] || !strcmp(r->tensor + len, " gradient") ||
             !strcmp(r->tensor + len, " momentum")))
            return true;
    }
    return false;
}

/* The first record index where some execution differs from the reference (0), or -1;
 * *structural: the executions ran different ops there. Outputs of parameters the run's
 * traces agree on (ag, may be NULL) are passed over; *passed: the first of them, or -1. */
static int first_difference(const struct exec *ex, int n_ex, bool *structural,
                            const struct agreed *ag, int *passed)
{
    *structural = false;
    *passed = -1;
    for (int i = 0;; i++) {
        bool any = false, all = true;
        for (int e = 0; e < n_ex; e++) {
            if (i < ex[e].n) any = true;
            else all = false;
        }
        if (!any) return -1;
        if (!all) {
            *structural = true;
            return i;
        }
        for (int e = 1; e < n_ex; e++) {
            const struct rec *a = &ex[0].r[i], *b = &ex[e].r[i];
            if (a->op != b->op || strcmp(a->tensor, b->tensor) != 0) {
                *structural = true;
                return i;
            }
            if (memcmp(a->digest, b->digest, DT_DIGEST_BYTES) != 0 && !is_loss(a)) {
                if (!run_agrees_on(ag, a)) return i;
                if (*passed < 0) *passed = i;
                break;
            }
        }
    }
}

/* In executions ex[0..n_ex), does the output (op, tensor, occurrence) differ? -1 when no
 * execution ran it; else how many executions differ from the first that ran it. */
static int named_differs(const struct exec *ex, int n_ex, const struct rec *want)
{
    const uint8_t *first = NULL;
    int differ = 0;
    for (int e = 0; e < n_ex; e++)
        for (int i = 0; i < ex[e].n; i++) {
            const struct rec *r = &ex[e].r[i];
            if (r->op != want->op || r->occurrence != want->occurrence ||
                strcmp(r->tensor, want->tensor) != 0)
                continue;
            if (!first) first = r->digest;
            else if (memcmp(first, r->digest, DT_DIGEST_BYTES) != 0) differ++;
            break;
        }
    return first ? differ : -1;
}

static const char *op_label(enum dt_op op) { return op == DT_OP_COUNT ? "batch" : dt_op_name(op); }

/* ---- the explain.csv table ----------------------------------------------------------------- */

static enum dt_status write_csv(const char *path, const struct exec *ex, int n_ex,
                                struct dt_error *err)
{
    struct dt_strbuf sb = {0};
    dt_strbuf_printf(&sb, "%s", DT_EXPLAIN_CSV_HEADER);
    for (int e = 0; e < n_ex; e++) dt_strbuf_printf(&sb, "hash_%d,", e + 1);
    dt_strbuf_printf(&sb, "executions_differing,elements_differing,max_ulp\n");
    int rows = 0;
    for (int e = 0; e < n_ex; e++) rows = ex[e].n > rows ? ex[e].n : rows;
    for (int i = 0; i < rows; i++) {
        const struct rec *a = NULL;
        for (int e = 0; e < n_ex && !a; e++)
            if (i < ex[e].n) a = &ex[e].r[i];
        dt_strbuf_printf(&sb, "%d,%s,%s,%s,%s,%" PRId64, i, op_label(a->op), a->layer, a->tensor,
                         a->phase, a->words);
        int differ = 0;
        int64_t elems = 0;
        uint64_t ulp = 0;
        for (int e = 0; e < n_ex; e++) {
            if (i >= ex[e].n) {
                dt_strbuf_printf(&sb, ",");
                continue;
            }
            const struct rec *r = &ex[e].r[i];
            char hex[DT_DIGEST_HEX];
            dt_digest_hex(hex, r->digest);
            dt_strbuf_printf(&sb, ",%.16s", hex);
            if (e > 0 && (i >= ex[0].n || memcmp(r->digest, ex[0].r[i].digest, DT_DIGEST_BYTES)))
                differ++;
            if (r->differing > elems) elems = r->differing;
            if (r->max_ulp > ulp) ulp = r->max_ulp;
        }
        dt_strbuf_printf(&sb, ",%d,%" PRId64 ",%" PRIu64 "\n", differ, elems, ulp);
    }
    enum dt_status st = dt_write_file_atomic(path, sb.data, sb.len, err);
    dt_strbuf_free(&sb);
    return st;
}

/* ---- explain ---------------------------------------------------------------------------- */

/* The force hook (harness/setup/test_hooks.h): "OP[:TENSOR]", NULL or "" for none. */
static enum dt_status parse_hook(struct force_hook *fh, const char *spec, struct dt_error *err)
{
    memset(fh, 0, sizeof *fh);
    if (!spec || !*spec) return DT_OK;
    char op[64];
    snprintf(op, sizeof op, "%s", spec);
    char *colon = strchr(op, ':');
    if (colon) {
        *colon = '\0';
        snprintf(fh->tensor, sizeof fh->tensor, "%s", colon + 1);
    }
    for (int i = 0; i < DT_OP_COUNT; i++)
        if (strcmp(dt_op_name((enum dt_op)i), op) == 0) {
            fh->op = (enum dt_op)i;
            fh->on = true;
            return DT_OK;
        }
    return dt_error_set(err, DT_ERR_USAGE, "explain force hook: no op '%s'", op);
}

/* Run n executions of step s. Replicas (one side): the first from sd, then n - 1 more;
 * seeds 1..n when forced. Two sides: one each. */
static enum dt_status executions(struct side *sides, int n_sides, const struct dt_policy *pols,
                                 int64_t s, int n, bool forced, const struct force_hook *fh,
                                 struct exec *ex, struct dt_error *err)
{
    const int count = n_sides == 2 ? 2 : n;
    for (int e = 0; e < count; e++) {
        struct side *sd = n_sides == 2 ? &sides[e] : &sides[0];
        const uint64_t seed = fh->on || forced ? (uint64_t)e + 1 : 0;
        DT_FORWARD_IF_ERROR(run_execution(sd, &pols[n_sides == 2 ? e : 0], s, &ex[e],
                                          e ? &ex[0] : NULL, seed, forced && !fh->on, fh, err));
    }
    return DT_OK;
}

static void free_execs(struct exec *ex, int n)
{
    for (int e = 0; e < n; e++) exec_free(&ex[e]);
}

/* The `vary` sources in which two sides' streams differ, or "" */
static void vary_cause(char *out, size_t size, const struct side *a, const struct side *b)
{
    out[0] = '\0';
    if (a->streams.init_stream != b->streams.init_stream) snprintf(out, size, "vary: init");
    else if (a->streams.order_stream != b->streams.order_stream)
        snprintf(out, size, "vary: data_order");
    else if (a->member != b->member) snprintf(out, size, "vary: epsilon");
}

/* One explanation while it is made: what dt_explain's phases share. */
struct explanation {
    const struct dt_explain_options *opt;
    FILE *out;
    struct dt_explain_result *res;
    int R; /* re-executions for replicas */
    struct force_hook fh;
    struct side sides[2];
    struct exec ex[MAX_EXEC];
    int n_ex;
    struct dt_trace_diff diff;
    int64_t k, prev, s; /* the step to explain, the last one both hashed before it, the one named */
    char vary[64];      /* the `vary` source the sides' streams differ in, or "" */
    int n_sides;        /* 1: replicas of one run, re-executed from A; 2: each side its own */
    struct dt_policy pols[2];
    int first, passed; /* the named op output; one the traces agree on (-1 none) */
    bool structural, forced, fallback;
    struct agreed agreed;
    bool finished; /* said all there is: the later phases have nothing to do */
};

/* --step K: a step both traces cover (1 to the last step both hashed), and one the two sides
 * reach from the same state: once the traces have parted at S < K, the states before K
 * already differ and re-executing K could show only that, so S is what to explain. */
static enum dt_status check_step(const struct explanation *x, struct dt_error *err)
{
    const struct side *A = &x->sides[0], *B = &x->sides[1];
    const int64_t k = x->opt->step;
    const int64_t last_a = A->n_rows > 0 ? A->rows[A->n_rows - 1].step : 0;
    const int64_t last_b = B->n_rows > 0 ? B->rows[B->n_rows - 1].step : 0;
    const int64_t last = last_a < last_b ? last_a : last_b;
    if (k > last)
        return dt_error_set(err, DT_ERR_USAGE,
                            "explain: --step %" PRId64
                            " is past the traces' last step: they cover steps 1 to %" PRId64
                            " (A's trace ends at step %" PRId64 ", B's at step %" PRId64
                            "); give a step in that range",
                            k, last, last_a, last_b);
    const int64_t s = x->diff.first_step;
    if (x->diff.diverged && s < k) {
        char what[96] = "leave out --step";
        if (s > 0) snprintf(what, sizeof what, "leave out --step, or give --step %" PRId64, s);
        return dt_error_set(err, DT_ERR_USAGE,
                            "explain: the traces part at step %" PRId64 ", before step %" PRId64
                            ": the states before step %" PRId64
                            " already differ, so re-executing it would show only that; explain "
                            "step %" PRId64 ", where they part (%s)",
                            s, k, k, s, what);
    }
    return DT_OK;
}

/* Phase 1, locate: the two sides, their traces compared, the step to explain; an initial
 * divergence is explained here (a `vary` source), an agreement said. */
static enum dt_status explain_locate(struct explanation *x, struct dt_error *err)
{
    const struct dt_explain_options *opt = x->opt;
    FILE *out = x->out;
    struct side *A = &x->sides[0], *B = &x->sides[1];
    DT_FORWARD_IF_ERROR(side_locate(A, opt->a, err));
    DT_FORWARD_IF_ERROR(side_locate(B, opt->b, err));
    DT_FORWARD_IF_ERROR(same_experiment(A, B, err));
    DT_FORWARD_IF_ERROR(dt_trace_compare(&x->diff, A->dir, B->dir, err));
    if (opt->step > 0) DT_FORWARD_IF_ERROR(check_step(x, err));
    const struct dt_trace_diff *diff = &x->diff;
    fprintf(out, "explain: A = %s\n         B = %s\n", A->shown, B->shown);
    /* one trace only longer (a shorter run, or one still going): no step where both hashed
     * differs -- not a divergence to explain */
    const bool only_longer = diff->diverged && !diff->digest_a[0];
    if ((!diff->diverged || only_longer) && opt->step <= 0) {
        fprintf(out,
                "the traces agree at every one of their %" PRId64
                " common hashed steps%s: nothing to explain (--step K re-executes step K "
                "anyway)\n",
                diff->common_rows,
                only_longer ? (diff->rows_a > diff->rows_b ? "; A's goes on, B's ends"
                                                           : "; B's goes on, A's ends")
                            : "");
        x->finished = true;
        /* --csv: the table's header and no row (nothing was re-executed) */
        if (opt->csv) DT_FORWARD_IF_ERROR(write_csv(opt->csv, x->ex, 0, err));
        return DT_OK;
    }
    x->res->diverged = diff->diverged;
    x->k = opt->step > 0 ? opt->step : diff->first_step;
    x->res->step = x->k;
    if (diff->diverged)
        fprintf(out, "the traces part at step %" PRId64 "%s%s%s\n", diff->first_step,
                diff->tensor[0] ? " (first tensor " : "", diff->tensor, diff->tensor[0] ? ")" : "");
    else fprintf(out, "the traces agree at every common hashed step\n");
    if (opt->step > 0) fprintf(out, "re-executing step %" PRId64 " (--step)\n", x->k);
    vary_cause(x->vary, sizeof x->vary, A, B);
    if (x->k != 0) return DT_OK;
    if (!x->vary[0])
        return dt_error_set(err, DT_ERR_DATA,
                            "the initial weights differ though both replicas draw them from "
                            "the same stream: not a nondeterministic op; compare the configs "
                            "(seed, model) of %s and %s",
                            A->exp_dir, B->exp_dir);
    struct dt_explain_result *res = x->res;
    res->explained = true;
    snprintf(res->op, sizeof res->op, "init");
    snprintf(res->tensor, sizeof res->tensor, "%s", diff->tensor);
    snprintf(res->phase, sizeof res->phase, "init");
    snprintf(res->cause, sizeof res->cause, "%s", x->vary);
    fprintf(out, "the initial weights differ: each replica draws its own (%s); caused by %s\n",
            x->vary, x->vary);
    x->finished = true;
    return DT_OK;
}

/* Phase 2, restore: each side's state after the last step both traces hashed before k. */
static enum dt_status explain_restore(struct explanation *x, struct dt_error *err)
{
    struct side *A = &x->sides[0], *B = &x->sides[1];
    x->prev = -1;
    for (int64_t i = 0; i < A->n_rows; i++)
        if (A->rows[i].step < x->k && trace_digest(B, A->rows[i].step)) x->prev = A->rows[i].step;
    if (x->prev < 0)
        return dt_error_set(err, DT_ERR_DATA, "no step before %" PRId64 " hashed by both traces",
                            x->k);
    const bool same_run = dt_policy_equal_controls(&A->pol, &B->pol) && !x->vary[0] &&
                          A->exp.backend.device == B->exp.backend.device &&
                          A->exp.backend.threads == B->exp.backend.threads &&
                          dt_same_path(A->exp_dir, B->exp_dir);
    x->n_sides = same_run ? 1 : 2;
    fprintf(x->out, "%s\n",
            same_run ? "same config, policy, device and streams: replicas of one run"
                     : "two runs: each side re-executed from its own state");
    for (int i = 0; i < x->n_sides; i++)
        DT_FORWARD_IF_ERROR(side_prepare(&x->sides[i], x->n_sides == 1 ? B : NULL, x->prev, x->out,
                                         x->opt->quiet, err));
    x->pols[0] = A->pol;
    x->pols[1] = B->pol;
    return DT_OK;
}

/* Step s re-executed with op hashing until an op output differs: as they run; then under
 * drawn orders; then, when only outputs the traces agree on differed as they ran and nothing
 * under drawn orders, as they run again to name the first of those (fallback). */
static enum dt_status reexecute_step(struct explanation *x, int64_t s, struct dt_error *err)
{
    struct side *A = &x->sides[0];
    int passed_natural = -1;
    for (int pass = 0; pass < 3 && x->first < 0; pass++) {
        if (pass == 2 && passed_natural < 0) break; /* `forced` says the last pass run */
        x->forced = pass == 1;
        if (x->forced && (x->n_sides == 2 || x->fh.on ||
                          dt_backend_set_forced_order(A->be, 0) != DT_OK)) { /* one pass only */
            x->forced = false;
            x->fallback = x->passed >= 0;
            if (x->fallback) x->first = x->passed;
            break;
        }
        free_execs(x->ex, x->n_ex);
        x->n_ex = x->n_sides == 2 ? 2 : x->R;
        DT_FORWARD_IF_ERROR(
            executions(x->sides, x->n_sides, x->pols, s, x->R, x->forced, &x->fh, x->ex, err));
        x->first = first_difference(x->ex, x->n_ex, &x->structural,
                                    s == x->diff.first_step && x->agreed.n ? &x->agreed : NULL,
                                    &x->passed);
        if (pass == 0) passed_natural = x->passed;
        else if (x->first < 0 && x->passed >= 0) {
            x->first = x->passed;
            x->fallback = true;
        }
    }
    return DT_OK;
}

/* Phase 3, re-execute: from the step after prev up to k, each step re-executed until an op
 * output differs; a step where none does is taken as the run took it, and the next tried. */
static enum dt_status explain_reexecute(struct explanation *x, struct dt_error *err)
{
    x->first = x->passed = -1;
    x->agreed.n = 0;
    if (x->diff.diverged && x->diff.first_step <= x->k)
        read_agreed(&x->agreed, &x->sides[0], &x->sides[1], x->diff.first_step);
    int64_t s = x->prev + 1;
    for (; s <= x->k && x->first < 0; s++) {
        DT_FORWARD_IF_ERROR(reexecute_step(x, s, err));
        if (x->first < 0 && s < x->k) /* no op differs at s: go on from the state after s */
            for (int i = 0; i < x->n_sides; i++) {
                side_restore(&x->sides[i]);
                DT_FORWARD_IF_ERROR(side_step(&x->sides[i], &x->sides[i].pol, s, err));
                side_save(&x->sides[i]);
            }
    }
    x->s = s - 1;
    fprintf(x->out,
            "step %" PRId64 " re-executed %d time(s) with op hashing (%" PRId64
            " op outputs each)%s\n",
            x->s, x->n_ex, (int64_t)x->ex[0].n,
            x->forced  ? ", each in a combination order drawn from its number (forced-order hook): "
                         "no two executions differed as they ran"
            : x->fh.on ? ", the hooked op forced (test hook)"
                       : "");
    for (int e = 0; e < x->n_ex; e++) {
        const char *da = trace_digest(&x->sides[0], x->s), *db = trace_digest(&x->sides[1], x->s);
        fprintf(x->out, "  execution %d: model digest %.16s...%s%s\n", e + 1, x->ex[e].final,
                da && !strcmp(da, x->ex[e].final) ? " = A's trace" : "",
                db && !strcmp(db, x->ex[e].final) ? " = B's trace" : "");
    }
    if (x->opt->csv) DT_FORWARD_IF_ERROR(write_csv(x->opt->csv, x->ex, x->n_ex, err));
    return DT_OK;
}

/* Phase 4, name: the first differing op output said and recorded; a `vary` source that
 * explains it ends the explanation. */
static void explain_name(struct explanation *x)
{
    FILE *out = x->out;
    const struct exec *ex = x->ex;
    const int first = x->first, n_ex = x->n_ex;
    if (first < 0) {
        fprintf(out,
                "no op output differs between the executions (%s): the difference did not "
                "show here%s\n",
                x->forced ? "as they ran and under drawn combination orders" : "as they ran",
                x->n_sides == 1 ? "; try more --executions" : "");
        x->finished = true;
        return;
    }
    for (int i = 0; i < first; i++)
        for (int e = 1; e < n_ex; e++)
            if (is_loss(&ex[0].r[i]) && i < ex[e].n &&
                memcmp(ex[0].r[i].digest, ex[e].r[i].digest, DT_DIGEST_BYTES) != 0) {
                fprintf(out, "(the batch loss, op output #%d, differs too; it feeds no weight)\n",
                        i);
                e = n_ex;
                i = first;
            }
    if (x->fallback)
        fprintf(out,
                "(only outputs of parameters the run's traces agree on after step %" PRId64
                " (tensors.csv) differ in these executions: the run's own difference did not "
                "recur; the first of them is named)\n",
                x->s);
    else if (x->passed >= 0 && x->passed != first)
        fprintf(out,
                "(%s %s, op output #%d, differs in these executions too, but the run's traces "
                "agree on its parameter after step %" PRId64
                " (tensors.csv): not what parted them)\n",
                op_label(ex[0].r[x->passed].op), ex[0].r[x->passed].tensor, x->passed, x->s);
    const struct rec *named = &ex[0].r[first];
    int differing_execs = 0;
    int64_t elems = 0;
    uint64_t ulp = 0;
    for (int e = 1; e < n_ex; e++)
        if (first < ex[e].n && memcmp(ex[e].r[first].digest, named->digest, DT_DIGEST_BYTES)) {
            differing_execs++;
            if (ex[e].r[first].differing > elems) elems = ex[e].r[first].differing;
            if (ex[e].r[first].max_ulp > ulp) ulp = ex[e].r[first].max_ulp;
        }
    struct dt_explain_result *res = x->res;
    res->explained = true;
    res->step = x->s;
    snprintf(res->op, sizeof res->op, "%s", op_label(named->op));
    snprintf(res->layer, sizeof res->layer, "%s", named->layer);
    snprintf(res->tensor, sizeof res->tensor, "%s", named->tensor);
    snprintf(res->phase, sizeof res->phase, "%s", named->phase);
    res->elements = named->words;
    res->differing = elems;
    res->max_ulp = ulp;
    if (x->structural)
        fprintf(out,
                "the executions ran different ops from op output #%d on (%s %s): the "
                "policies or devices take different paths\n",
                first, op_label(named->op), named->tensor);
    else
        fprintf(out,
                "first differing op output: #%d %s, layer %s, tensor %s, phase %s: %d of %d "
                "execution(s) differ from execution 1; %" PRId64 " of %" PRId64
                " elements differ, by at most %" PRIu64 " %s\n",
                first, op_label(named->op), named->layer, named->tensor, named->phase,
                differing_execs, n_ex, elems, named->words, ulp, named->is_float ? "ulp" : "");
    if (x->vary[0] && (named->op == DT_OP_COUNT || named->op == DT_OP_EPS_PHILOX ||
                       named->op == DT_OP_EPS_LFSR || named->op == DT_OP_EPS_LFSR_SEED)) {
        snprintf(res->cause, sizeof res->cause, "%s", x->vary);
        fprintf(out, "caused by %s: the replicas draw %s from their own streams\n", x->vary,
                named->op == DT_OP_COUNT ? "their batches" : "their epsilon");
        x->finished = true;
    }
}

/* Whether switching control c alone to the target value `want` removes the named output's
 * difference: *d = how many executions still differ from the first (-1: the op did not
 * run), the largest over the natural and (can_force) the drawn orders. */
static enum dt_status switch_control(struct explanation *x, int c, const char *want, bool can_force,
                                     int *d, struct dt_error *err)
{
    struct dt_policy sw[2];
    for (int i = 0; i < x->n_sides; i++) {
        sw[i] = x->pols[i];
        (void)dt_policy_set_control(&sw[i], dt_policy_control_name(c), want, NULL);
    }
    *d = -1;
    for (int set = 0; set < (can_force ? 2 : 1); set++) {
        struct exec *ax = dt_xcalloc(MAX_EXEC, sizeof *ax);
        enum dt_status st =
            executions(x->sides, x->n_sides, sw, x->s, x->R, set == 1, &x->fh, ax, err);
        const int ds = st == DT_OK ? named_differs(ax, x->n_ex, &x->ex[0].r[x->first]) : -1;
        free_execs(ax, x->n_ex);
        free(ax);
        DT_FORWARD_IF_ERROR(st);
        if (ds > *d) *d = ds;
    }
    return DT_OK;
}

/* Phase 5, attribute: each control that acts on the model and is not at the target value,
 * switched alone; the controls whose switch removes the difference are the cause. */
static enum dt_status explain_attribute(struct explanation *x, struct dt_error *err)
{
    FILE *out = x->out;
    struct side *A = &x->sides[0];
    struct dt_explain_result *res = x->res;
    const enum dt_level target_level = x->n_sides == 1 ? DT_LEVEL_RUN_TO_RUN : DT_LEVEL_PORTABLE;
    struct dt_policy target;
    dt_policy_from_level(&target, target_level);
    const struct dt_model_kind_info *kind = dt_model_kind(A->exp.model.kind);
    const bool can_force =
        x->n_sides == 1 && !x->fh.on && dt_backend_set_forced_order(A->be, 0) == DT_OK;
    fprintf(out,
            "attribution: step %" PRId64 " again with one control switched to its %s value "
            "(%s):\n",
            x->s, dt_level_name(target_level),
            x->fh.on    ? "the hooked op forced in each execution"
            : can_force ? "each switch run as they run and under drawn combination orders; it "
                          "removes the difference only if neither set differs"
                        : "each switch run once per side");
    int found = 0, differing_execs = 0;
    char fix[96] = "";
    for (int c = 0; c < dt_policy_control_count(); c++) {
        const char *name = dt_policy_control_name(c);
        const bool acts = !strcmp(name, "reduction") || !strcmp(name, "atomics") ||
                          !strcmp(name, "math") ||
                          (kind->extra_control && !strcmp(name, kind->extra_control));
        if (!acts) continue; /* threads is a property; rng and conv_algo act on some models */
        const char *want = dt_policy_control_value(&target, c);
        bool needed = false;
        for (int i = 0; i < x->n_sides; i++)
            if (strcmp(dt_policy_control_value(&x->pols[i], c), want) != 0) needed = true;
        if (!needed) continue;
        int d = -1;
        DT_FORWARD_IF_ERROR(switch_control(x, c, want, can_force, &d, err));
        fprintf(out, "  %-10s %-14s -> %s\n", name, want,
                d < 0   ? "the op does not run: no difference"
                : d > 0 ? "still differs"
                        : "no longer differs");
        if (d > 0) continue;
        const char *was = dt_policy_control_value(&x->pols[0], c);
        if (!strcmp(was, want)) was = dt_policy_control_value(&x->pols[1], c);
        if (!found) {
            snprintf(res->cause, sizeof res->cause, "%s: %s", name, was);
            snprintf(fix, sizeof fix, "%s: %s", name, want);
        }
        found++;
    }
    const struct rec *named = &x->ex[0].r[x->first];
    for (int e = 1; e < x->n_ex; e++)
        differing_execs += x->first < x->ex[e].n &&
                           memcmp(x->ex[e].r[x->first].digest, named->digest, DT_DIGEST_BYTES);
    if (found)
        fprintf(out, "caused by %s: %s differs in %d of %d executions; with %s it does not\n",
                res->cause, named->tensor, differing_execs, x->n_ex, fix);
    else
        fprintf(out, "no single control removes it: %s\n",
                x->n_sides == 2 ? "the sides differ beyond what the controls decide (a library "
                                  "or device path no control switches)"
                                : "the difference comes from more than one control, or none");
    return DT_OK;
}

enum dt_status dt_explain(const struct dt_explain_options *opt, FILE *out,
                          struct dt_explain_result *res, struct dt_error *err)
{
    DT_FORWARD_IF_ERROR(dt_result_check_links(opt->a, err)); /* no link followed inside */
    DT_FORWARD_IF_ERROR(dt_result_check_links(opt->b, err));
    memset(res, 0, sizeof *res);
    res->step = -1;
    const int R = opt->executions ? opt->executions : 5;
    if (R < 2 || R > MAX_EXEC)
        return dt_error_set(err, DT_ERR_USAGE, "explain: --executions %d: give 2 to %d", R,
                            MAX_EXEC);
    struct explanation *x = dt_xcalloc(1, sizeof *x);
    x->opt = opt;
    x->out = out;
    x->res = res;
    x->R = R;
    const struct dt_test_hooks *h = opt->hooks;
    x->sides[0].replay_miss = x->sides[1].replay_miss = h ? h->explain_replay_miss : 0;
    enum dt_status st = parse_hook(&x->fh, h ? h->explain_force : NULL, err);
    if (st == DT_OK) st = explain_locate(x, err);
    if (st == DT_OK && !x->finished) st = explain_restore(x, err);
    if (st == DT_OK && !x->finished) st = explain_reexecute(x, err);
    if (st == DT_OK && !x->finished) explain_name(x);
    if (st == DT_OK && !x->finished) st = explain_attribute(x, err);
    free_execs(x->ex, x->n_ex);
    side_free(&x->sides[0]);
    side_free(&x->sides[1]);
    free(x);
    return st;
}
