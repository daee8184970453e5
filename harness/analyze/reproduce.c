/* `detrain reproduce`: a recorded result rerun here and compared step by step (reproduce.h). */
#include "harness/analyze/reproduce.h"

#include <dirent.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/fileio.h"
#include "core/util.h"
#include "harness/analyze/compare.h"
#include "harness/analyze/explain.h"
#include "harness/analyze/values.h"
#include "harness/record/checkpoint.h"
#include "nets/backend.h"
#include "harness/record/layout.h"
#include "harness/record/outdir.h"
#include "harness/record/trace.h"
#include "harness/run/train.h"
#include "harness/setup/config.h"

#define MAX_EXPERIMENTS 64
#define MAX_ROWS 512

/* One verdict row of the closing table. */
enum verdict { V_IDENTICAL, V_DIFFERS, V_UNCOMPARABLE };
struct verdict_row {
    char experiment[96], cell[300], recorded[200], verdict[700];
    enum verdict kind;
};

struct reproduce_ctx {
    const struct dt_reproduce_options *opt;
    FILE *out;
    struct verdict_row *rows;
    int n_rows;
    char here[200];                                    /* this machine, once a rerun has said it */
    struct dt_folder_lock locks[16 * MAX_EXPERIMENTS]; /* each result's, read-held throughout */
    int n_locks;
};

static char *xstrdup(const char *s)
{
    char *d = dt_xmalloc(strlen(s) + 1);
    return strcpy(d, s);
}

static int name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* DIR itself, or its sub-folders that are experiments, in name order. */
static enum dt_status list_experiments(char ***list, int *n, const char *dir, struct dt_error *err)
{
    *n = 0;
    *list = dt_xcalloc(MAX_EXPERIMENTS, sizeof **list);
    if (!dt_is_dir(dir))
        return dt_error_set(err, DT_ERR_USAGE,
                            "reproduce: '%s' is not a folder (give a result "
                            "folder: an experiment with config.json, or a folder of them)",
                            dir);
    if (dt_is_experiment_dir(dir)) {
        (*list)[(*n)++] = xstrdup(dir);
        return DT_OK;
    }
    DIR *d = opendir(dir);
    if (!d) return dt_error_set(err, DT_ERR_IO, "reproduce: cannot read the folder '%s'", dir);
    for (struct dirent *e; (e = readdir(d)) != NULL && *n < MAX_EXPERIMENTS;) {
        if (e->d_name[0] == '.') continue;
        char p[4200];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        struct stat st;
        if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode) && dt_is_experiment_dir(p))
            (*list)[(*n)++] = xstrdup(p);
    }
    closedir(d);
    qsort(*list, (size_t)*n, sizeof **list, name_cmp);
    if (*n == 0)
        return dt_error_set(err, DT_ERR_DATA,
                            "reproduce: '%s' holds no result (no config.json "
                            "in it or in any folder directly inside it)",
                            dir);
    return DT_OK;
}

/* Every control at portable's value: the cells that promise the same bits everywhere. */
static bool policy_is_portable(const struct dt_policy *p)
{
    struct dt_policy q;
    dt_policy_from_level(&q, DT_LEVEL_PORTABLE);
    return p->reduction == q.reduction && p->atomics == q.atomics && p->rng == q.rng &&
           p->conv_algo == q.conv_algo && p->math == q.math && p->threads == q.threads;
}

static bool in_list(const char *list, const char *name)
{
    const size_t len = strlen(name);
    for (const char *s = list; s && *s;) {
        const size_t n = strcspn(s, ",");
        if (n == len && strncmp(s, name, n) == 0) return true;
        s += n + (s[n] == ',');
    }
    return false;
}

/* The chosen cells of exp (cells[c] true), each checked: every name of --cells exists. */
static enum dt_status choose_cells(bool *chosen, const struct dt_experiment *exp, const char *dir,
                                   const char *cells, struct dt_error *err)
{
    char names[1024] = "";
    size_t len = 0;
    int n_chosen = 0;
    for (int c = 0; c < dt_cell_count(exp); c++) {
        char cd[256];
        dt_cell_dir(cd, sizeof cd, exp, c);
        len += (size_t)snprintf(names + len, len < sizeof names ? sizeof names - len : 0, "%s%s",
                                c ? ", " : "", cd);
        chosen[c] =
            cells ? in_list(cells, cd) : policy_is_portable(&exp->policies[dt_cell_policy(exp, c)]);
        n_chosen += chosen[c];
    }
    for (const char *s = cells; s && *s;) {
        const size_t n = strcspn(s, ",");
        bool found = false;
        for (int c = 0; c < dt_cell_count(exp) && !found; c++) {
            char cd[256];
            dt_cell_dir(cd, sizeof cd, exp, c);
            found = strlen(cd) == n && strncmp(cd, s, n) == 0;
        }
        if (!found)
            return dt_error_set(err, DT_ERR_USAGE,
                                "reproduce: %s has no cell '%.*s' (its cells: %s)", dir, (int)n, s,
                                names);
        s += n + (s[n] == ',');
    }
    if (n_chosen == 0)
        return dt_error_set(err, DT_ERR_USAGE,
                            "reproduce: %s has no portable cell (its cells: %s); "
                            "name the ones to rerun with --cells",
                            dir, names);
    return DT_OK;
}

/* The recorded replicas of the chosen cells, each checked against the config before
 * anything runs: a trace.csv, its steps the config's hashed steps (hash.every, the last step,
 * or a non-finite loss) and none past train.steps; all the same last step, the length of the
 * rerun. A trace that disagrees with its config was not made by it: it cannot be compared.
 * *replicas: how many replica folders the cells have. */
static enum dt_status recorded_length(int64_t *steps, int *replicas,
                                      const struct dt_experiment *exp, const bool *chosen,
                                      const char *dir, struct dt_error *err)
{
    *steps = -1;
    *replicas = 0;
    for (int c = 0; c < dt_cell_count(exp); c++) {
        if (!chosen[c]) continue;
        int r = 0;
        for (; r < exp->replicas; r++) {
            char rd[4200], tp[4300];
            dt_replica_dir(rd, sizeof rd, dir, exp, c, r);
            snprintf(tp, sizeof tp, "%s/trace.csv", rd);
            if (!dt_path_exists(rd) && r > 0) break; /* fewer replicas kept than run */
            if (!dt_path_exists(tp))
                return dt_error_set(err, DT_ERR_DATA,
                                    "reproduce: %s has no trace.csv: the result "
                                    "keeps no per-step digests to compare with",
                                    rd);
            struct dt_trace_row *rows = NULL;
            int64_t n = 0;
            DT_FORWARD_IF_ERROR(dt_trace_read(&rows, &n, tp, err));
            const int64_t last = n > 0 ? rows[n - 1].step : -1;
            enum dt_status st = DT_OK;
            for (int64_t i = 0; i < n && st == DT_OK; i++) {
                const int64_t s = rows[i].step;
                char *end;
                const double loss = rows[i].loss[0] ? strtod(rows[i].loss, &end) : 0.0;
                const bool hashed = s % exp->hash.every == 0 || s == exp->train.steps ||
                                    (rows[i].loss[0] && !isfinite(loss));
                if (s > exp->train.steps)
                    st = dt_error_set(err, DT_ERR_DATA,
                                      "reproduce: cannot be compared: %s has step %" PRId64
                                      " (row %" PRId64 "), past the %" PRId64
                                      " steps of its config.json (train.steps): the trace and "
                                      "the config are not of one run",
                                      tp, s, i + 2, exp->train.steps);
                else if (!hashed)
                    st = dt_error_set(err, DT_ERR_DATA,
                                      "reproduce: cannot be compared: %s has step %" PRId64
                                      " (row %" PRId64 "), which its config.json does not hash "
                                      "(hash.every: %" PRId64 "): the trace and the config are "
                                      "not of one run",
                                      tp, s, i + 2, exp->hash.every);
            }
            free(rows);
            DT_FORWARD_IF_ERROR(st);
            if (last < 1)
                return dt_error_set(err, DT_ERR_DATA,
                                    "reproduce: %s holds no training step to "
                                    "compare with",
                                    tp);
            if (*steps < last) *steps = last;
        }
        if (*replicas == 0 || r < *replicas) *replicas = r;
    }
    return DT_OK;
}

/* The --set keys that say where and how the rerun runs here, not what it computes. */
static bool set_is_placement(const char *set)
{
    static const char *const keys[] = {"backend.device", "backend.threads", "backend.gpu",
                                       "backend.graphs", "dataset.path",    "hash.async",
                                       "report."};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        const size_t n = strlen(keys[i]);
        if (strncmp(set, keys[i], n) == 0 && (keys[i][n - 1] == '.' || set[n] == '=')) return true;
    }
    return false;
}

/* A user's --set that changes what the result recorded makes another experiment, whose
 * rerun says nothing about this one: refused before anything runs, naming the key and
 * both values. (The data itself is checked against the recorded digest by the rerun's own
 * checks: dt_run_options.data_of.) */
static enum dt_status check_user_sets(const char *config, const char *const *base, int n_base,
                                      const struct dt_reproduce_options *opt, struct dt_error *err)
{
    if (opt->n_sets == 0) return DT_OK;
    struct dt_experiment *a = dt_xcalloc(1, sizeof *a), *b = dt_xcalloc(1, sizeof *b);
    const char **sets = dt_xcalloc((size_t)n_base + 1, sizeof *sets);
    for (int i = 0; i < n_base; i++) sets[i] = base[i];
    enum dt_status st = dt_config_load(a, config, sets, n_base, err);
    char *ta = st == DT_OK ? dt_checkpoint_config_text(a) : NULL;
    for (int i = 0; i < opt->n_sets && st == DT_OK; i++) {
        if (set_is_placement(opt->sets[i])) continue;
        sets[n_base] = opt->sets[i];
        st = dt_config_load(b, config, sets, n_base + 1, err);
        if (st != DT_OK) break;
        char *tb = dt_checkpoint_config_text(b), diff[1200] = "";
        bool differ = false;
        st =
            dt_checkpoint_config_diff(diff, sizeof diff, &differ, ta, "recorded", tb, "--set", err);
        if (st == DT_OK && !differ && a->train.steps != b->train.steps) {
            differ = true; /* a key a resume may change; the rerun's length is the trace's */
            snprintf(diff, sizeof diff, "train.steps (recorded: %" PRId64 ", --set: %" PRId64 ")",
                     a->train.steps, b->train.steps);
        }
        free(tb);
        if (st == DT_OK && differ)
            st = dt_error_set(err, DT_ERR_USAGE,
                              "reproduce: cannot be compared: --set %.200s changes what the "
                              "result recorded: %.600s; a rerun of another experiment says "
                              "nothing about this one. reproduce takes --set only for where "
                              "the rerun runs (backend.device, backend.threads, backend.gpu, "
                              "backend.graphs, dataset.path, hash.async)",
                              opt->sets[i], diff);
    }
    free(ta);
    free(sets);
    free(a);
    free(b);
    return st;
}

/* exp reduced to the chosen cells' policies (the vary settings kept). */
static void keep_chosen_policies(struct dt_experiment *run, const struct dt_experiment *exp,
                                 const bool *chosen)
{
    bool keep[DT_MAX_POLICIES] = {false};
    for (int c = 0; c < dt_cell_count(exp); c++)
        if (chosen[c]) keep[dt_cell_policy(exp, c)] = true;
    run->n_policies = 0;
    for (int p = 0; p < exp->n_policies; p++)
        if (keep[p]) run->policies[run->n_policies++] = exp->policies[p];
}

/* The explain of a non-portable cell that parted: its op and control, or why not. */
static void explain_cell(const char *rec, const char *now, char *why, size_t size)
{
    const struct dt_explain_options eo = {.a = rec, .b = now, .executions = 5, .quiet = true};
    struct dt_explain_result res = {0};
    struct dt_error e = {0};
    FILE *sink = fopen("/dev/null", "w");
    enum dt_status st = sink ? dt_explain(&eo, sink, &res, &e) : DT_ERR_IO;
    if (sink) fclose(sink);
    if (st != DT_OK)
        snprintf(why, size, "; explain could not tell here: %.200s", e.msg[0] ? e.msg : "error");
    else if (res.explained)
        snprintf(why, size, "; explain: first op %.40s (%.60s), caused by %.100s", res.op,
                 res.tensor, res.cause[0] ? res.cause : "no single control");
    else
        snprintf(why, size,
                 "; explain: re-executed here, the step gives the same outputs on "
                 "both sides (the recorded run took a path this machine does not: "
                 "another kernel, thread count or order)");
}

/* The last two parts of a path ("crossdev-t2/mlp"): enough to tell the results apart. */
static const char *last_two(const char *dir)
{
    const char *end = dir + strlen(dir), *p = end;
    int slashes = 0;
    while (p > dir && slashes < 2)
        if (*--p == '/' && ++slashes == 2) return p + 1;
    return dir;
}

/* err's message behind `prefix` (the message is copied first: it is the argument). */
static void prefix_error(struct dt_error *err, const char *prefix)
{
    char *was = dt_xmalloc(sizeof err->msg);
    memcpy(was, err->msg, sizeof err->msg);
    const size_t n = strlen(prefix) < sizeof err->msg - 1 ? strlen(prefix) : sizeof err->msg - 1;
    memcpy(err->msg, prefix, n);
    snprintf(err->msg + n, sizeof err->msg - n, "%s", was);
    free(was);
}

/* One replica's verdict: its digests (dt_trace_compare), then every value it records
 * (values.h), up to `upto` (-1: all). */
static void judge_replica(struct verdict_row *v, const char *rec, const char *now, bool portable,
                          int64_t upto)
{
    struct dt_trace_diff d = {0};
    struct dt_values_diff vd = {0};
    struct dt_error e = {0};
    enum dt_status st = dt_trace_compare(&d, rec, now, &e);
    if (st == DT_OK && !d.diverged) st = dt_values_compare(&vd, rec, now, upto, &e);
    if (st != DT_OK) {
        v->kind = V_UNCOMPARABLE;
        snprintf(v->verdict, sizeof v->verdict, "cannot be compared: %.600s", e.msg);
    } else if (!d.diverged && !vd.differs) {
        v->kind = V_IDENTICAL;
        snprintf(v->verdict, sizeof v->verdict,
                 "identical at all %lld hashed steps (%d recorded values)",
                 (long long)d.common_rows, vd.n_compared);
    } else {
        v->kind = V_DIFFERS;
        char why[300] = "", at[500];
        if (d.diverged) {
            snprintf(at, sizeof at, "at step %lld%s%.64s", (long long)d.first_step,
                     d.tensor[0] ? ", tensor " : "", d.tensor);
            if (!portable) explain_cell(rec, now, why, sizeof why);
        } else {
            snprintf(at, sizeof at, "in a recorded value, every digest equal: %.400s", vd.what);
        }
        if (!d.diverged)
            snprintf(why, sizeof why,
                     "; the weights agree at every hashed step: the recorded value was edited, "
                     "or this build computes it otherwise than the result's did");
        else if (portable)
            snprintf(why, sizeof why,
                     "; a portable cell must not part on the same config and data (both checked): "
                     "please report it");
        snprintf(v->verdict, sizeof v->verdict, "parts %s%s", at, why);
    }
}

/* Compare every chosen replica; one verdict line each. */
static void judge(struct reproduce_ctx *x, const struct dt_experiment *exp, const bool *chosen,
                  int replicas, const char *dir, const struct dt_experiment *run,
                  const char *run_dir, const char *recorded, const char *when, int64_t upto)
{
    for (int c = 0; c < dt_cell_count(exp); c++) {
        if (!chosen[c]) continue;
        char cd[256];
        dt_cell_dir(cd, sizeof cd, exp, c);
        const struct dt_policy *pol = &exp->policies[dt_cell_policy(exp, c)];
        int rc = 0; /* the cell in the rerun */
        for (; rc < dt_cell_count(run); rc++) {
            char rcd[256];
            dt_cell_dir(rcd, sizeof rcd, run, rc);
            if (strcmp(rcd, cd) == 0) break;
        }
        for (int r = 0; r < replicas && x->n_rows < MAX_ROWS; r++) {
            char rec[4200], now[4200];
            dt_replica_dir(rec, sizeof rec, dir, exp, c, r);
            dt_replica_dir(now, sizeof now, run_dir, run, rc, r);
            struct verdict_row *v = &x->rows[x->n_rows++];
            snprintf(v->experiment, sizeof v->experiment, "%s", last_two(dir));
            snprintf(v->cell, sizeof v->cell, "%s/replica-%d", cd, r);
            snprintf(v->recorded, sizeof v->recorded, "%s%s%.40s%s", recorded, when[0] ? " (" : "",
                     when, when[0] ? ")" : "");
            judge_replica(v, rec, now, policy_is_portable(pol), upto);
            if (v->kind == V_IDENTICAL)
                fprintf(x->out, "  %-22s %s to %s\n", v->cell, v->verdict, v->recorded);
            else if (v->kind == V_DIFFERS)
                fprintf(x->out, "  %-22s parts from %s %s\n", v->cell, v->recorded,
                        v->verdict + strlen("parts "));
            else fprintf(x->out, "  %-22s %s\n", v->cell, v->verdict);
        }
    }
}

/* The rerun's options: into `out_dir`, checked against the result's data, stopped at the
 * trace's length. */
static struct dt_run_options rerun_options(const char *out_dir, const char *dir,
                                           const struct dt_experiment *exp, int64_t steps, bool dry)
{
    return (struct dt_run_options){.out_dir = out_dir,
                                   .command = "detrain reproduce",
                                   .quiet = true,
                                   .dry_run = dry,
                                   .data_of = dir,
                                   .need_device = true,
                                   .stop_after = steps < exp->train.steps ? steps : 0};
}

/* Load, check and choose before anything runs; then rerun and judge one experiment. */
static enum dt_status reproduce_one(struct reproduce_ctx *x, const char *dir, const char *keep,
                                    bool check_only, struct dt_error *err)
{
    const struct dt_reproduce_options *opt = x->opt;
    char config[4200];
    snprintf(config, sizeof config, "%s/config.json", dir);
    const char **sets = dt_xcalloc((size_t)opt->n_sets + 5, sizeof *sets);
    int n_sets = 0;
    sets[n_sets++] = "backend.device=cpu";
    sets[n_sets++] = "backend.graphs=false"; /* how a GPU step was launched: same trace */
    sets[n_sets++] = "report.snapshots=0";
    sets[n_sets++] = "report.overhead_samples=0";
    sets[n_sets++] = "report.explain=false";
    const int n_base = n_sets;
    for (int i = 0; i < opt->n_sets; i++) sets[n_sets++] = opt->sets[i];
    struct dt_experiment *exp = dt_xcalloc(1, sizeof *exp), *run = dt_xcalloc(1, sizeof *run);
    bool chosen[DT_MAX_POLICIES * DT_MAX_VARY_SETS] = {false};
    int64_t steps = 0;
    int replicas = 0;
    enum dt_status st = DT_OK;
    if (check_only && x->n_locks < (int)(sizeof x->locks / sizeof x->locks[0])) {
        /* held until every rerun is judged: no run starts writing there meanwhile */
        st = dt_folder_read_lock_take(&x->locks[x->n_locks], dir, err);
        if (st == DT_OK) x->n_locks++;
        else prefix_error(err, "reproduce: cannot be compared: ");
    }
    if (st == DT_OK) st = dt_config_load(exp, config, sets, n_sets, err);
    if (st == DT_OK && check_only) st = check_user_sets(config, sets, n_base, opt, err);
    if (st == DT_OK) st = choose_cells(chosen, exp, dir, opt->cells, err);
    if (st == DT_OK) st = recorded_length(&steps, &replicas, exp, chosen, dir, err);
    char recorded[160] = "", detail[900], when[64] = "", tmp[4400] = "";
    if (st == DT_OK) {
        *run = *exp;
        keep_chosen_policies(run, exp, chosen);
        run->replicas = replicas;
    }
    if (st == DT_OK && check_only) {
        /* every check the rerun itself makes before its first write (memory, device, data
         * and its digest, model, its folder): the run's dry run, into --out or a folder
         * that does not exist */
        const char *t = getenv("TMPDIR");
        if (keep) snprintf(tmp, sizeof tmp, "%s", keep);
        else
            snprintf(tmp, sizeof tmp, "%s/detrain-reproduce-check-%ld/run", t && *t ? t : "/tmp",
                     (long)getpid());
        const struct dt_run_options ro = rerun_options(tmp, dir, run, steps, true);
        st = dt_train_experiment(run, &ro, err);
        if (st != DT_OK && strncmp(err->msg, "reproduce:", 10) != 0) {
            char what[4400];
            snprintf(what, sizeof what, "reproduce: %s cannot be rerun here: ", dir);
            prefix_error(err, what);
        }
        tmp[0] = '\0';
    }
    if (st == DT_OK && !check_only) {
        char first[256];
        dt_cell_dir(first, sizeof first, exp, 0);
        strncat(first, "/replica-0", sizeof first - strlen(first) - 1);
        dt_experiment_describe(dir, first, recorded, sizeof recorded, detail, sizeof detail, when,
                               sizeof when);
        if (keep) snprintf(tmp, sizeof tmp, "%s", keep);
        else {
            const char *t = getenv("TMPDIR");
            snprintf(tmp, sizeof tmp, "%s/detrain-reproduce-XXXXXX", t && *t ? t : "/tmp");
            if (!mkdtemp(tmp))
                st = dt_error_set(err, DT_ERR_IO,
                                  "reproduce: cannot make a temporary folder "
                                  "for the rerun in %s (set TMPDIR)",
                                  t && *t ? t : "/tmp");
        }
    }
    if (st == DT_OK && !check_only) {
        fprintf(x->out, "%s: %s, %lld steps, recorded on %s%s%s%s\n", dir,
                dt_model_kind_names[exp->model.kind], (long long)steps, recorded,
                when[0] ? " (" : "", when, when[0] ? ")" : "");
        if (!opt->quiet) fprintf(stderr, "reproduce: rerunning %s here ...\n", dir);
        fflush(x->out);
        const struct dt_run_options ro = rerun_options(tmp, dir, run, steps, false);
        st = dt_train_experiment(run, &ro, err);
        /* a replica that fails (a non-finite loss, say) is compared as it ended: the result
         * may record the same failure */
        if (st == DT_ERR_NUMERIC) st = DT_OK;
    }
    if (st == DT_OK && !check_only) {
        char here[160], hd[900];
        dt_experiment_describe(tmp, NULL, here, sizeof here, hd, sizeof hd, NULL, 0);
        snprintf(x->here, sizeof x->here, "%s%s%s", here,
                 run->backend.device == DT_DEVICE_CPU ? ", " : "",
                 run->backend.device == DT_DEVICE_CPU ? dt_cpu_kernels() : "");
        if (run->backend.device == DT_DEVICE_CPU)
            strncat(x->here, " kernels", sizeof x->here - strlen(x->here) - 1);
        judge(x, exp, chosen, replicas, dir, run, tmp, recorded, when,
              steps < exp->train.steps ? steps : -1);
    }
    if (tmp[0] && !keep) { /* the rerun's files (detrain's own only), then the folder */
        struct dt_error ignored = {0};
        (void)dt_result_clear(tmp, &ignored);
        (void)rmdir(tmp);
    }
    free(sets);
    free(exp);
    free(run);
    return st;
}

/* --out: a new or empty folder outside every result read. */
static enum dt_status check_out(const struct dt_reproduce_options *opt, struct dt_error *err)
{
    if (!opt->out) return DT_OK;
    char out[4200];
    if (!dt_resolve_path(opt->out, out, sizeof out))
        return dt_error_set(err, DT_ERR_USAGE, "reproduce: cannot resolve --out '%s'", opt->out);
    for (int i = 0; i < opt->n_dirs; i++) {
        char d[4200];
        if (!dt_resolve_path(opt->dirs[i], d, sizeof d)) continue;
        const size_t n = strlen(d);
        if (strncmp(out, d, n) == 0 && (out[n] == '/' || out[n] == '\0'))
            return dt_error_set(err, DT_ERR_USAGE,
                                "reproduce: --out '%s' lies inside the result "
                                "'%s', which reproduce only reads: give a folder elsewhere",
                                opt->out, opt->dirs[i]);
    }
    enum dt_folder_state state;
    DT_FORWARD_IF_ERROR(dt_folder_state(&state, opt->out, err));
    if (state != DT_FOLDER_ABSENT && state != DT_FOLDER_EMPTY)
        return dt_error_set(err, DT_ERR_USAGE,
                            "reproduce: --out '%s' is not empty: give a new or empty folder "
                            "for the rerun",
                            opt->out);
    return DT_OK;
}

/* The closing table: one row per replica compared, the verdict beside what it was checked
 * against. */
static void print_table(const struct reproduce_ctx *x)
{
    fprintf(x->out,
            "\nReproduced on %s:\n\n| result | cell | recorded on | verdict |\n"
            "|---|---|---|---|\n",
            x->here[0] ? x->here : "this machine");
    for (int i = 0; i < x->n_rows; i++) {
        const struct verdict_row *v = &x->rows[i];
        fprintf(x->out, "| %s | %s | %s | %s |\n", v->experiment, v->cell, v->recorded, v->verdict);
    }
}

enum dt_status dt_reproduce(const struct dt_reproduce_options *opt, FILE *out, int *verdict,
                            struct dt_error *err)
{
    *verdict = 0;
    struct reproduce_ctx *x = dt_xcalloc(1, sizeof *x);
    x->opt = opt;
    x->out = out;
    char **lists[16] = {NULL};
    int counts[16] = {0}, total = 0;
    enum dt_status st = opt->n_dirs > 16
                            ? dt_error_set(err, DT_ERR_USAGE, "reproduce: at most 16 results")
                            : check_out(opt, err);
    for (int i = 0; st == DT_OK && i < opt->n_dirs; i++) {
        st = list_experiments(&lists[i], &counts[i], opt->dirs[i], err);
        total += counts[i];
    }
    /* every check first (nothing trained while any result would be refused), then the reruns */
    for (int pass = 0; pass < 2 && st == DT_OK; pass++) {
        if (pass == 1) x->rows = dt_xcalloc(MAX_ROWS, sizeof *x->rows);
        for (int i = 0; st == DT_OK && i < opt->n_dirs; i++) {
            for (int k = 0; st == DT_OK && k < counts[i]; k++) {
                char keep[4300];
                const char *base = strrchr(lists[i][k], '/');
                if (opt->out && total > 1)
                    snprintf(keep, sizeof keep, "%s/%d-%s", opt->out, i,
                             base ? base + 1 : lists[i][k]);
                else if (opt->out) snprintf(keep, sizeof keep, "%s", opt->out);
                st = reproduce_one(x, lists[i][k], opt->out ? keep : NULL, pass == 0, err);
            }
        }
    }
    if (st == DT_OK) print_table(x);
    /* differs outranks cannot-be-compared: a difference found is the finding */
    for (int i = 0; st == DT_OK && i < x->n_rows; i++)
        if (x->rows[i].kind == V_DIFFERS) *verdict = 1;
        else if (x->rows[i].kind == V_UNCOMPARABLE && *verdict == 0) *verdict = 2;
    for (int i = 0; i < x->n_locks; i++) dt_folder_read_lock_release(&x->locks[i]);
    for (int i = 0; i < 16; i++) {
        for (int k = 0; lists[i] && k < counts[i]; k++) free(lists[i][k]);
        free(lists[i]);
    }
    free(x->rows);
    free(x);
    return st;
}
