/* Reading traces back and comparing them, with the weight snapshots beside them: behind
 * `detrain compare` (traces, replica folders, experiment folders), the summary's first
 * divergent step, and the cross-device table (`compare --table`: one reference experiment
 * against runs of the same config on other devices). Data path (docs/DESIGN.md): harness/trace,
 * harness/snapshot -> harness/compare. */
#include "harness/record/checkpoint.h"
#include "harness/record/outdir.h"
#include "harness/analyze/compare.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <yaml.h>

#include "core/fileio.h"
#include "core/util.h"
#include "harness/setup/config.h"
#include "harness/record/layout.h"

/* ---- reading ------------------------------------------------------------------------ */

static void find_first_tensor(struct dt_trace_diff *d, const char *a, const char *b)
{
    enum { MAXT = 256 };
    struct names {
        char na[MAXT][64], nb[MAXT][64], da[MAXT][DT_DIGEST_HEX], db[MAXT][DT_DIGEST_HEX];
    } *t = dt_xmalloc(sizeof *t); /* on the heap: no static buffer, so reentrant */
    char(*na)[64] = t->na, (*nb)[64] = t->nb, (*da)[DT_DIGEST_HEX] = t->da,
    (*db)[DT_DIGEST_HEX] = t->db;
    struct dt_error why_a = {0}, why_b = {0};
    char note[sizeof d->tensor_note];
    bool absent_a, absent_b;
    int ka = dt_trace_read_tensors(a, d->first_step, na, da, MAXT, &why_a, &absent_a);
    int kb = dt_trace_read_tensors(b, d->first_step, nb, db, MAXT, &why_b, &absent_b);
    d->tensor_fault = true;
    if (ka < 0 && kb < 0 && absent_a && absent_b) {
        d->tensor_fault = false;
        snprintf(note, sizeof note,
                 "neither side has tensors.csv (written with "
                 "hash.per_tensor: true)");
    } else if (ka < 0 || kb < 0) {
        _Static_assert(sizeof note == sizeof why_a.msg, "a note holds an error message");
        memcpy(note, ka < 0 ? why_a.msg : why_b.msg, sizeof note);
    } else {
        for (int i = 0; i < ka && i < kb; i++) {
            if (strcmp(na[i], nb[i]) != 0 || strcmp(da[i], db[i]) != 0) {
                snprintf(d->tensor, sizeof d->tensor, "%.63s", na[i]);
                free(t);
                return;
            }
        }
        snprintf(note, sizeof note,
                 "the %d and %d tensor digests of step %" PRId64
                 " in the two tensors.csv files do not differ",
                 ka, kb, d->first_step);
    }
    dt_sanitize_message(d->tensor_note, sizeof d->tensor_note, note);
    free(t);
}

enum dt_status dt_trace_compare(struct dt_trace_diff *d, const char *path_a, const char *path_b,
                                struct dt_error *err)
{
    memset(d, 0, sizeof *d);
    d->first_step = -1;
    d->last_common_step = -1;
    /* digests of two kinds share no value: comparing them would call every step diverged */
    const int ka = dt_trace_digest_kind(path_a), kb = dt_trace_digest_kind(path_b);
    if (ka >= 0 && kb >= 0 && ka != kb)
        return dt_error_set(err, DT_ERR_USAGE,
                            "%s holds %s digests and %s %s digests (hash.digest): traces of two "
                            "kinds cannot be compared; rerun one with the other's hash.digest",
                            path_a, dt_digest_kind_name((enum dt_hash_digest)ka), path_b,
                            dt_digest_kind_name((enum dt_hash_digest)kb));
    struct dt_trace_row *a = NULL, *b = NULL;
    int64_t na = 0, nb = 0;
    DT_FORWARD_IF_ERROR(dt_trace_read(&a, &na, path_a, err));
    enum dt_status st = dt_trace_read(&b, &nb, path_b, err);
    if (st != DT_OK) {
        free(a);
        return st;
    }
    d->rows_a = na;
    d->rows_b = nb;
    int64_t n = na < nb ? na : nb;
    for (int64_t i = 0; i < n; i++) {
        if (a[i].step != b[i].step) {
            st = dt_error_set(err, DT_ERR_DATA,
                              "traces were hashed at different steps (row %" PRId64
                              ": step %" PRId64 " in %s, step %" PRId64 " in %s)",
                              i + 1, a[i].step, path_a, b[i].step, path_b);
            break;
        }
        d->common_rows = i + 1;
        d->last_common_step = a[i].step;
        if (strcmp(a[i].digest, b[i].digest) != 0) {
            d->diverged = true;
            d->first_step = a[i].step;
            memcpy(d->digest_a, a[i].digest, DT_DIGEST_HEX);
            memcpy(d->digest_b, b[i].digest, DT_DIGEST_HEX);
            break;
        }
    }
    if (st == DT_OK && !d->diverged && na != nb) {
        d->diverged = true;
        d->first_step = na < nb ? b[n].step : a[n].step;
    }
    if (st == DT_OK && d->diverged && d->digest_a[0]) find_first_tensor(d, path_a, path_b);
    free(a);
    free(b);
    return st;
}

/* ---- snapshots ---------------------------------------------------------------------- */

enum dt_status dt_snapshot_read_verified(struct dt_snapshot *s, char *hex, const char *replica_dir,
                                         int64_t step, const struct dt_trace_row *rows,
                                         int64_t n_rows, struct dt_error *err)
{
    char path[4096];
    dt_snapshot_path(path, sizeof path, replica_dir, step);
    DT_FORWARD_IF_ERROR(dt_snapshot_read(s, path, err));
    char own[DT_DIGEST_HEX];
    dt_snapshot_model_digest(own, s, false);
    if (s->step != step) {
        int64_t inside = s->step;
        dt_snapshot_free(s);
        return dt_error_set(err, DT_ERR_DATA, "%s: holds step %" PRId64 ", not %" PRId64, path,
                            inside, step);
    }
    /* Trace rows ascend by step (dt_trace_read checks): binary search. */
    int64_t lo = 0, hi = n_rows;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (rows[mid].step < step) lo = mid + 1;
        else hi = mid;
    }
    if (lo < n_rows && rows[lo].step == step && !dt_snapshot_matches(own, s, rows[lo].digest)) {
        dt_snapshot_free(s);
        return dt_error_set(err, DT_ERR_DATA,
                            "%s: does not match trace.csv at step %" PRId64
                            ": snapshot corrupted or from another run (model digest %s, "
                            "trace has %s)",
                            path, step, own, rows[lo].digest);
    }
    if (hex) memcpy(hex, own, DT_DIGEST_HEX);
    return DT_OK;
}

static bool file_exists(const char *dir, const char *name)
{
    char path[4096];
    if (snprintf(path, sizeof path, "%s/%s", dir, name) >= (int)sizeof path) return false;
    return dt_path_exists(path);
}

/* The replica's trace rows for checking snapshots; none (OK) when it has no trace.csv. */
static enum dt_status read_trace_if_any(struct dt_trace_row **rows, int64_t *n,
                                        const char *replica_dir, struct dt_error *err)
{
    *rows = NULL;
    *n = 0;
    if (!file_exists(replica_dir, "trace.csv")) return DT_OK;
    return dt_trace_read(rows, n, replica_dir, err);
}

/* One common step: both snapshots read, verified and measured. */
static enum dt_status diff_one_step(struct dt_snapshot_diff *d, int64_t step, const char *replica_a,
                                    const struct dt_trace_row *ta, int64_t nta,
                                    const char *replica_b, const struct dt_trace_row *tb,
                                    int64_t ntb, struct dt_error *err)
{
    struct dt_snapshot sa, sb;
    char ha[DT_DIGEST_HEX], hb[DT_DIGEST_HEX];
    DT_FORWARD_IF_ERROR(dt_snapshot_read_verified(&sa, ha, replica_a, step, ta, nta, err));
    enum dt_status st = dt_snapshot_read_verified(&sb, hb, replica_b, step, tb, ntb, err);
    if (st != DT_OK) {
        dt_snapshot_free(&sa);
        return st;
    }
    d->step = step;
    d->identical = strcmp(ha, hb) == 0;
    struct dt_error inner = {0};
    st = dt_snapshot_distance(&sa, &sb, &d->l2, &d->norm_a, &d->norm_b, &inner);
    if (st != DT_OK) {
        char pa[4096], pb[4096];
        dt_snapshot_path(pa, sizeof pa, replica_a, step);
        dt_snapshot_path(pb, sizeof pb, replica_b, step);
        st = dt_error_set(err, st, "%s vs %s: %s", pa, pb, inner.msg);
    } else {
        double mean = 0.5 * (d->norm_a + d->norm_b);
        d->rel_l2 = d->l2 == 0.0 ? 0.0 : d->l2 / mean;
    }
    dt_snapshot_free(&sa);
    dt_snapshot_free(&sb);
    return st;
}

enum dt_status dt_compare_snapshots(struct dt_snapshot_diff **rows_out, int *n_out,
                                    const char *replica_a, const char *replica_b,
                                    struct dt_error *err)
{
    *rows_out = NULL;
    *n_out = 0;
    int64_t *sa = NULL, *sb = NULL, nta = 0, ntb = 0;
    int na = 0, nb = 0, n = 0;
    struct dt_trace_row *ta = NULL, *tb = NULL;
    struct dt_snapshot_diff *rows = NULL;
    enum dt_status st = dt_snapshot_list(replica_a, &sa, &na, err);
    if (st == DT_OK) st = dt_snapshot_list(replica_b, &sb, &nb, err);
    if (st == DT_OK && na > 0 && nb > 0) {
        st = read_trace_if_any(&ta, &nta, replica_a, err);
        if (st == DT_OK) st = read_trace_if_any(&tb, &ntb, replica_b, err);
        rows = dt_xcalloc((size_t)(na < nb ? na : nb), sizeof *rows);
        /* Both lists ascend: merge. */
        for (int i = 0, j = 0; st == DT_OK && i < na && j < nb;) {
            if (sa[i] < sb[j]) i++;
            else if (sa[i] > sb[j]) j++;
            else {
                st = diff_one_step(&rows[n], sa[i], replica_a, ta, nta, replica_b, tb, ntb, err);
                if (st == DT_OK) n++;
                i++;
                j++;
            }
        }
    }
    free(sa);
    free(sb);
    free(ta);
    free(tb);
    if (st != DT_OK || n == 0) {
        free(rows);
        return st;
    }
    *rows_out = rows;
    *n_out = n;
    return DT_OK;
}

/* ---- detrain compare ---------------------------------------------------------------- */

static bool has_snapshot_dir(const char *dir)
{
    char path[4096];
    dt_snapshot_dir(path, sizeof path, dir);
    return dt_is_dir(path);
}

/* The first snapshot step both kept whose weights differ, or -1. */
static int64_t first_differing_snapshot(const struct dt_snapshot_diff *rows, int n)
{
    for (int i = 0; i < n; i++)
        if (!rows[i].identical) return rows[i].step;
    return -1;
}

/* Two traces or replica folders: the digest comparison as `compare` always printed it,
 * then the snapshot table when both are folders with snapshots. */
enum { JSON_MAX_DEPTH = 16, JSON_VALUE = 256 };
static enum dt_status json_scalars(char (*values)[JSON_VALUE], const char *path,
                                   const char *const *keys, int n_keys, struct dt_error *err);

static enum dt_status compare_replicas(const char *a, const char *b, FILE *out, bool *diverged,
                                       struct dt_error *err)
{
    struct dt_trace_diff d;
    DT_FORWARD_IF_ERROR(dt_trace_compare(&d, a, b, err));
    struct dt_snapshot_diff *rows = NULL;
    int n = 0;
    bool snaps = dt_is_dir(a) && dt_is_dir(b) && has_snapshot_dir(a) && has_snapshot_dir(b);
    if (snaps) DT_FORWARD_IF_ERROR(dt_compare_snapshots(&rows, &n, a, b, err));

    if (!d.diverged) {
        fprintf(out, "identical: %lld hashed steps, every model digest equal\n",
                (long long)d.common_rows);
    } else if (d.digest_a[0]) {
        fprintf(out, "diverged at step %lld (after %lld equal hashed steps)\n",
                (long long)d.first_step, (long long)(d.common_rows - 1));
        fprintf(out, "  %s: %s\n  %s: %s\n", a, d.digest_a, b, d.digest_b);
        if (d.tensor[0]) fprintf(out, "  first divergent tensor: %s\n", d.tensor);
        else fprintf(out, "  first divergent tensor: unknown: %s\n", d.tensor_note);
    } else {
        fprintf(out,
                "%s stops at step %lld and %s goes on: every one of the %lld hashed steps "
                "both have is equal (a shorter run, not a divergence)\n",
                d.rows_a < d.rows_b ? a : b, (long long)d.last_common_step,
                d.rows_a < d.rows_b ? b : a, (long long)d.common_rows);
    }
    *diverged = d.diverged;
    if (snaps) {
        if (n == 0) {
            fprintf(out, "snapshots: no step kept by both\n");
        } else {
            fprintf(out,
                    "snapshots: %d step%s kept by both (relative L2 = L2 / mean of the two "
                    "norms)\n",
                    n, n == 1 ? "" : "s");
            fprintf(out, "%12s  %14s  %14s\n", "step", "l2", "rel_l2");
            for (int i = 0; i < n; i++)
                fprintf(out, "%12lld  %14.6g  %14.6g%s\n", (long long)rows[i].step, rows[i].l2,
                        rows[i].rel_l2, rows[i].identical ? "  identical" : "");
        }
        int64_t s = first_differing_snapshot(rows, n);
        if (!d.diverged && s >= 0) {
            /* Possible when the traces skip that step (hash.every > 1). */
            fprintf(out,
                    "diverged: the snapshots at step %lld differ although every hashed "
                    "step is equal\n",
                    (long long)s);
            *diverged = true;
        }
    }
    free(rows);
    return DT_OK;
}

enum replica_outcome {
    REPLICA_IDENTICAL,
    REPLICA_DIVERGED,
    REPLICA_MISSING,
    REPLICA_ERROR,
    REPLICA_SHORTER /* every common step equal, one trace stops earlier */
};

/* One replica of an experiment-folder comparison, as one line. */
static enum replica_outcome compare_replica_line(FILE *out, const char *label, const char *ra,
                                                 const char *rb, struct dt_error *err)
{
    bool in_a = file_exists(ra, "trace.csv"), in_b = file_exists(rb, "trace.csv");
    if (!in_a || !in_b) {
        fprintf(out, "%s: missing %s\n", label,
                !in_a && !in_b ? "on both sides"
                : !in_a        ? "in A"
                               : "in B");
        return REPLICA_MISSING;
    }
    struct dt_trace_diff d;
    struct dt_snapshot_diff *rows = NULL;
    int n = 0;
    enum dt_status st = dt_trace_compare(&d, ra, rb, err);
    if (st == DT_OK) st = dt_compare_snapshots(&rows, &n, ra, rb, err);
    if (st != DT_OK) {
        fprintf(out, "%s: error: %s\n", label, err ? err->msg : dt_status_str(st));
        return REPLICA_ERROR;
    }
    int64_t snap_diff = first_differing_snapshot(rows, n);
    enum replica_outcome oc = REPLICA_DIVERGED;
    if (!d.diverged && snap_diff < 0) {
        fprintf(out, "%s: identical (%lld steps)\n", label, (long long)d.common_rows);
        oc = REPLICA_IDENTICAL;
    } else if (!d.diverged) {
        fprintf(out,
                "%s: diverged: the snapshots at step %lld differ although every hashed "
                "step is equal",
                label, (long long)snap_diff);
    } else if (d.digest_a[0]) {
        fprintf(out, "%s: diverged at step %lld", label, (long long)d.first_step);
        if (d.tensor[0]) fprintf(out, ", tensor %s", d.tensor);
        else if (d.tensor_fault) fprintf(out, ", tensor unknown (%s)", d.tensor_note);
    } else {
        fprintf(out,
                "%s: %s stops at step %lld (every one of the %lld common hashed steps equal)\n",
                label, d.rows_a < d.rows_b ? "A" : "B", (long long)d.last_common_step,
                (long long)d.common_rows);
        oc = REPLICA_SHORTER;
    }
    if (oc == REPLICA_DIVERGED) {
        if (n > 0)
            fprintf(out, ", final L2 %.6g (relative %.3g, step %lld)", rows[n - 1].l2,
                    rows[n - 1].rel_l2, (long long)rows[n - 1].step);
        fprintf(out, "\n");
    }
    free(rows);
    return oc;
}

bool dt_is_experiment_dir(const char *path)
{
    return dt_is_dir(path) && file_exists(path, "config.json");
}

/* The replica folders an experiment's config names, relative to its folder. */
static char (*experiment_replicas(const struct dt_experiment *exp, int *n))[512]
{
    int cells = dt_cell_count(exp);
    char(*rel)[512] = dt_xcalloc((size_t)cells * (size_t)exp->replicas + 1, sizeof *rel);
    *n = 0;
    for (int c = 0; c < cells; c++) {
        char cell[256];
        dt_cell_dir(cell, sizeof cell, exp, c);
        for (int r = 0; r < exp->replicas; r++)
            snprintf(rel[(*n)++], sizeof *rel, "%s/replica-%d", cell, r);
    }
    return rel;
}

static enum dt_status load_experiment(struct dt_experiment *exp, const char *dir,
                                      struct dt_error *err)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", dir);
    return dt_config_load(exp, path, NULL, 0, err);
}

/* Traces of two digest kinds (hash.digest) share no digest: comparing them would call
 * every step divergent. */
static enum dt_status same_digest_kind(const struct dt_experiment *a, const char *da,
                                       const struct dt_experiment *b, const char *db,
                                       struct dt_error *err)
{
    if (a->hash.digest == b->hash.digest) return DT_OK;
    return dt_error_set(err, DT_ERR_USAGE,
                        "%s holds %s digests and %s %s digests (hash.digest): traces of two "
                        "kinds cannot be compared; rerun one with the other's hash.digest",
                        da, a->hash.digest == DT_HASH_DIGEST_TREE ? "tree" : "sha256", db,
                        b->hash.digest == DT_HASH_DIGEST_TREE ? "tree" : "sha256");
}

/* Two experiment folders: every replica either config names, A's order first. */
static enum dt_status compare_experiments(const char *a, const char *b, FILE *out, bool *diverged,
                                          struct dt_error *err)
{
    struct dt_experiment *ea = dt_xcalloc(1, sizeof *ea), *eb = dt_xcalloc(1, sizeof *eb);
    enum dt_status st = load_experiment(ea, a, err);
    if (st == DT_OK) st = load_experiment(eb, b, err);
    if (st == DT_OK) st = same_digest_kind(ea, a, eb, b, err);
    if (st != DT_OK) {
        free(ea);
        free(eb);
        return st;
    }
    /* two experiments of different configs: said first, naming the keys (the device, the
     * name and what a run may change without changing its trace are expected to differ) */
    char diff[800] = "";
    bool differ = false;
    struct dt_error ignored;
    if (dt_experiment_diff(diff, sizeof diff, &differ, ea, eb, false, &ignored) == DT_OK && differ)
        fprintf(out,
                "note: A and B are different experiments (%s); their replicas are compared all "
                "the same\n",
                diff);
    int na = 0, nb = 0;
    char(*ra)[512] = experiment_replicas(ea, &na);
    char(*rb)[512] = experiment_replicas(eb, &nb);
    free(ea);
    free(eb);
    /* The union of both lists: A's replicas, then those only B's config names. */
    char(*all)[512] = dt_xcalloc((size_t)(na + nb) + 1, sizeof *all);
    int n = 0;
    for (int i = 0; i < na; i++) memcpy(all[n++], ra[i], sizeof *all);
    for (int j = 0; j < nb; j++) {
        bool seen = false;
        for (int i = 0; i < na && !seen; i++) seen = strcmp(ra[i], rb[j]) == 0;
        if (!seen) memcpy(all[n++], rb[j], sizeof *all);
    }
    free(ra);
    free(rb);

    int count[5] = {0};
    enum dt_status first_error = DT_OK;
    struct dt_error first_err = {0};
    for (int i = 0; i < n; i++) {
        char pa[4096], pb[4096];
        snprintf(pa, sizeof pa, "%s/%s", a, all[i]);
        snprintf(pb, sizeof pb, "%s/%s", b, all[i]);
        struct dt_error e = {0};
        enum replica_outcome oc = compare_replica_line(out, all[i], pa, pb, &e);
        count[oc]++;
        if (oc == REPLICA_ERROR && first_error == DT_OK) {
            first_error = e.status != DT_OK ? e.status : DT_ERR_DATA;
            first_err = e;
        }
    }
    free(all);
    fprintf(out, "total: %d replica%s: %d identical, %d diverged, %d missing", n, n == 1 ? "" : "s",
            count[REPLICA_IDENTICAL], count[REPLICA_DIVERGED], count[REPLICA_MISSING]);
    if (count[REPLICA_SHORTER]) fprintf(out, ", %d stopping earlier", count[REPLICA_SHORTER]);
    if (count[REPLICA_ERROR]) fprintf(out, ", %d unreadable", count[REPLICA_ERROR]);
    fprintf(out, "\n");
    /* exit 1 for any difference: a shorter run is not the same run, though not a divergence */
    *diverged =
        count[REPLICA_DIVERGED] > 0 || count[REPLICA_MISSING] > 0 || count[REPLICA_SHORTER] > 0;
    if (first_error != DT_OK) {
        if (err) *err = first_err;
        return first_error;
    }
    return DT_OK;
}

enum dt_status dt_compare_paths(const char *a, const char *b, FILE *out, bool *diverged,
                                struct dt_error *err)
{
    *diverged = false;
    /* no link followed inside a result (outdir.h) */
    DT_FORWARD_IF_ERROR(dt_result_check_links(a, err));
    DT_FORWARD_IF_ERROR(dt_result_check_links(b, err));
    bool xa = dt_is_experiment_dir(a), xb = dt_is_experiment_dir(b);
    if (xa && xb) return compare_experiments(a, b, out, diverged, err);
    if (xa || xb)
        return dt_error_set(err, DT_ERR_USAGE,
                            "%s is an experiment folder (it has config.json) but %s is not: "
                            "compare two experiment folders, or two replica folders or traces",
                            xa ? a : b, xa ? b : a);
    return compare_replicas(a, b, out, diverged, err);
}

/* ---- detrain compare --table -------------------------------------------------------- */

/* The scalars at the dotted paths `keys` ("backend.device") of a JSON file such as
 * run.json, read with libyaml's event parser (JSON is YAML); a path that is absent, or
 * inside a list, leaves its value "". */
static enum dt_status json_scalars(char (*values)[JSON_VALUE], const char *path,
                                   const char *const *keys, int n_keys, struct dt_error *err)
{
    for (int i = 0; i < n_keys; i++) values[i][0] = '\0';
    FILE *f;
    DT_FORWARD_IF_ERROR(dt_fopen_regular(&f, path, "a manifest", err));
    yaml_parser_t parser;
    DT_ASSERT_MSG(yaml_parser_initialize(&parser), "out of memory starting libyaml");
    yaml_parser_set_input_file(&parser, f);
    struct {
        bool mapping, want_key;
        char key[64]; /* the mapping's current key; "[]" for a list */
    } st[JSON_MAX_DEPTH];
    int depth = 0;
    enum dt_status rc = DT_OK;
    for (bool done = false; !done && rc == DT_OK;) {
        yaml_event_t ev;
        if (!yaml_parser_parse(&parser, &ev)) {
            rc = dt_error_set(err, DT_ERR_DATA, "%s:%zu: not valid JSON: %s", path,
                              parser.problem_mark.line + 1,
                              parser.problem ? parser.problem : "parse error");
            break;
        }
        switch (ev.type) {
        case YAML_MAPPING_START_EVENT:
        case YAML_SEQUENCE_START_EVENT:
            if (depth == JSON_MAX_DEPTH) {
                rc = dt_error_set(err, DT_ERR_DATA, "%s: nested deeper than %d levels", path,
                                  JSON_MAX_DEPTH);
                break;
            }
            st[depth].mapping = ev.type == YAML_MAPPING_START_EVENT;
            st[depth].want_key = true;
            snprintf(st[depth].key, sizeof st[depth].key, "%s", st[depth].mapping ? "" : "[]");
            depth++;
            break;
        case YAML_MAPPING_END_EVENT:
        case YAML_SEQUENCE_END_EVENT:
            if (depth > 0) depth--;
            if (depth > 0 && st[depth - 1].mapping) st[depth - 1].want_key = true;
            break;
        case YAML_SCALAR_EVENT: {
            const char *text = (const char *)ev.data.scalar.value;
            if (depth > 0 && st[depth - 1].mapping && st[depth - 1].want_key) {
                snprintf(st[depth - 1].key, sizeof st[depth - 1].key, "%.63s", text);
                st[depth - 1].want_key = false;
                break;
            }
            char full[JSON_MAX_DEPTH * 65] = "";
            for (int d = 0; d < depth; d++)
                snprintf(full + strlen(full), sizeof full - strlen(full), "%s%s", d ? "." : "",
                         st[d].key);
            for (int i = 0; i < n_keys; i++)
                if (strcmp(full, keys[i]) == 0) /* printed in the table: escaped */
                    dt_sanitize_message(values[i], JSON_VALUE, text);
            if (depth > 0 && st[depth - 1].mapping) st[depth - 1].want_key = true;
            break;
        }
        case YAML_STREAM_END_EVENT: done = true; break;
        default: break;
        }
        yaml_event_delete(&ev);
    }
    yaml_parser_delete(&parser);
    fclose(f);
    return rc;
}

/* One experiment of the table: its folder, config, column name and what it ran on. */
struct table_exp {
    const char *dir;
    struct dt_experiment *exp;
    char label[160];  /* the column header */
    char detail[900]; /* the line under the table: device, build */
};

/* What an experiment ran on, from <dir>/run.json (backend.name, .threads, .device, the CPU
 * model, the build), else from its first replica's run.json (backend, threads): "cpu: AMD
 * EPYC, 2 threads", "cuda: NVIDIA H100 80GB HBM3 (sm_90)". A missing or unreadable run.json
 * makes the device unknown, not the table impossible: the traces are what is compared. */
void dt_experiment_describe(const char *dir, const char *first_replica, char *label,
                            size_t label_size, char *detail, size_t detail_size, char *when,
                            size_t when_size)
{
    enum { NAME, THREADS, DEVICE, CPU_MODEL, VERSION, GIT, START, N_KEYS };
    static const char *const keys[N_KEYS] = {
        "backend.name",  "backend.threads",    "backend.device", "system.cpu_model",
        "build.version", "build.git_revision", "start_time"};
    static const char *const replica_keys[2] = {"backend", "threads"};
    char v[N_KEYS][JSON_VALUE], path[4096];
    struct dt_error e = {0};
    snprintf(path, sizeof path, "%s/run.json", dir);
    enum dt_status st = json_scalars(v, path, keys, N_KEYS, &e);
    if (when && when_size) snprintf(when, when_size, "%s", v[START]);
    if (v[NAME][0] == '\0' && first_replica) {
        char rv[2][JSON_VALUE];
        snprintf(path, sizeof path, "%s/%s/run.json", dir, first_replica);
        if (json_scalars(rv, path, replica_keys, 2, NULL) == DT_OK) {
            memcpy(v[NAME], rv[0], JSON_VALUE);
            memcpy(v[THREADS], rv[1], JSON_VALUE);
        }
    }
    if (v[NAME][0] == '\0') {
        snprintf(label, label_size, "unknown device");
        snprintf(detail, detail_size, "device unknown: %.800s",
                 st != DT_OK ? e.msg : "run.json names no backend");
        return;
    }
    if (strcmp(v[NAME], "cpu") == 0) {
        int threads = atoi(v[THREADS]);
        snprintf(label, label_size, "cpu%s%.80s, %d thread%s", v[CPU_MODEL][0] ? ": " : "",
                 v[CPU_MODEL], threads, threads == 1 ? "" : "s");
    } else {
        /* "<name> (sm_XY), N SMs; driver ...": the name and architecture head the column */
        snprintf(label, label_size, "%.20s%s%.*s", v[NAME], v[DEVICE][0] ? ": " : "",
                 (int)strcspn(v[DEVICE], ",;"), v[DEVICE]);
    }
    snprintf(detail, detail_size, "%s%s%.200s; detrain %.60s (git %.40s)", label,
             v[DEVICE][0] ? "; device " : "", v[DEVICE], v[VERSION][0] ? v[VERSION] : "?",
             v[GIT][0] ? v[GIT] : "?");
}

static void describe_experiment(struct table_exp *t, const char *first_replica)
{
    dt_experiment_describe(t->dir, first_replica, t->label, sizeof t->label, t->detail,
                           sizeof t->detail, NULL, 0);
}

/* Markdown table cells hold no '|' and no line breaks. */
static void md_cell(FILE *out, const char *s)
{
    for (; *s; s++) fputc(*s == '|' ? '/' : *s == '\n' ? ' ' : *s, out);
}

static void csv_cell(struct dt_strbuf *sb, const char *s)
{
    if (!strpbrk(s, ",\"\n")) {
        dt_strbuf_printf(sb, "%s", s);
        return;
    }
    dt_strbuf_printf(sb, "\"");
    for (; *s; s++) dt_strbuf_printf(sb, *s == '"' ? "\"\"" : "%c", *s);
    dt_strbuf_printf(sb, "\"");
}

enum table_outcome { CELL_IDENTICAL, CELL_COMMON, CELL_DIVERGED, CELL_MISSING, CELL_ERROR };

/* One replica of the reference against the same replica of another experiment. */
static enum table_outcome table_cell(char *text, size_t size, const char *ref, const char *other,
                                     struct dt_error *err)
{
    if (!file_exists(ref, "trace.csv")) {
        snprintf(text, size, "missing (reference)");
        return CELL_MISSING;
    }
    if (!file_exists(other, "trace.csv")) {
        snprintf(text, size, "missing");
        return CELL_MISSING;
    }
    struct dt_trace_diff d;
    if (dt_trace_compare(&d, ref, other, err) != DT_OK) {
        snprintf(text, size, "error");
        return CELL_ERROR;
    }
    if (!d.diverged) {
        snprintf(text, size, "identical (%lld steps)", (long long)d.common_rows);
        return CELL_IDENTICAL;
    }
    if (d.digest_a[0]) {
        snprintf(text, size, "step %lld%s%s", (long long)d.first_step,
                 d.tensor[0] ? ", tensor " : "", d.tensor);
        return CELL_DIVERGED;
    }
    /* Equal as far as both go, one goes on. A prefix counts when it holds a trained step
     * (not only step 0's initial weights). */
    if (d.common_rows < 2) {
        snprintf(text, size, "too short (%lld vs %lld hashed steps)", (long long)d.rows_a,
                 (long long)d.rows_b);
        return CELL_DIVERGED;
    }
    snprintf(text, size, "identical (%lld common steps; %lld vs %lld)", (long long)d.common_rows,
             (long long)d.rows_a, (long long)d.rows_b);
    return CELL_COMMON;
}

/* Every experiment folder checked and its config loaded before anything is printed. */
static enum dt_status load_table_experiments(struct table_exp *t,
                                             const struct dt_table_options *opt,
                                             struct dt_error *err)
{
    for (int i = 0; i < opt->n_experiments; i++) {
        t[i].dir = opt->experiments[i];
        if (!dt_is_dir(t[i].dir)) {
            struct stat st;
            return stat(t[i].dir, &st) == 0
                       ? dt_error_set(err, DT_ERR_DATA,
                                      "%s: not a folder: give the experiment "
                                      "folders `detrain run --out` wrote",
                                      t[i].dir)
                       : dt_error_set(err, DT_ERR_IO, "%s: no such folder", t[i].dir);
        }
        if (!dt_is_experiment_dir(t[i].dir))
            return dt_error_set(err, DT_ERR_DATA,
                                "%s: not an experiment folder (no config.json): give the folder "
                                "`detrain run --out` wrote, not a cell or replica folder",
                                t[i].dir);
        t[i].exp = dt_xcalloc(1, sizeof *t[i].exp);
        DT_FORWARD_IF_ERROR(load_experiment(t[i].exp, t[i].dir, err));
        if (i > 0)
            DT_FORWARD_IF_ERROR(same_digest_kind(t[0].exp, t[0].dir, t[i].exp, t[i].dir, err));
    }
    return DT_OK;
}

/* Column names: the label given, else the device; a name an earlier column already has gets
 * the experiment's position ("(#2)"), so that no two columns read alike. */
static void name_table_columns(struct table_exp *t, const struct dt_table_options *opt)
{
    for (int i = 0; i < opt->n_experiments; i++) {
        int n = 0;
        char(*rel)[512] = experiment_replicas(t[i].exp, &n);
        describe_experiment(&t[i], n > 0 ? rel[0] : NULL);
        free(rel);
        if (i < opt->n_labels) snprintf(t[i].label, sizeof t[i].label, "%s", opt->labels[i]);
        for (int j = 0; j < i; j++) {
            if (strcmp(t[i].label, t[j].label) == 0) {
                size_t len = strlen(t[i].label);
                snprintf(t[i].label + len, sizeof t[i].label - len, " (#%d)", i);
                break;
            }
        }
    }
}

/* The table as CSV: a row per replica, a column per compared experiment. */
static enum dt_status write_table_csv(const char *path, const struct table_exp *t, int n_cols,
                                      const char (*rows)[512], int n_rows, const char (*cells)[160],
                                      struct dt_error *err)
{
    struct dt_strbuf sb = {0};
    dt_strbuf_printf(&sb, "replica");
    for (int c = 0; c < n_cols; c++) {
        dt_strbuf_printf(&sb, ",");
        csv_cell(&sb, t[c + 1].label);
    }
    dt_strbuf_printf(&sb, "\n");
    for (int r = 0; r < n_rows; r++) {
        csv_cell(&sb, rows[r]);
        for (int c = 0; c < n_cols; c++) {
            dt_strbuf_printf(&sb, ",");
            csv_cell(&sb, cells[(size_t)r * (size_t)n_cols + (size_t)c]);
        }
        dt_strbuf_printf(&sb, "\n");
    }
    enum dt_status st = dt_write_file_atomic(path, sb.data, sb.len, err);
    dt_strbuf_free(&sb);
    return st;
}

enum dt_status dt_compare_table(const struct dt_table_options *opt, FILE *out, bool *all_identical,
                                struct dt_error *err)
{
    for (int i = 0; i < opt->n_experiments; i++) /* no link followed inside a result */
        DT_FORWARD_IF_ERROR(dt_result_check_links(opt->experiments[i], err));
    *all_identical = false;
    if (opt->n_experiments < 2)
        return dt_error_set(err, DT_ERR_USAGE,
                            "compare --table: needs a reference and at "
                            "least one other experiment folder");
    if (opt->n_labels > opt->n_experiments)
        return dt_error_set(err, DT_ERR_USAGE, "compare --table: %d labels for %d experiments",
                            opt->n_labels, opt->n_experiments);
    const int n_exp = opt->n_experiments, n_cols = n_exp - 1;
    struct table_exp *t = dt_xcalloc((size_t)n_exp, sizeof *t);
    enum dt_status st = load_table_experiments(t, opt, err);
    int n_rows = 0;
    char(*rows)[512] = NULL;
    char(*cells)[160] = NULL;
    enum table_outcome *kind = NULL;
    struct dt_error *errs = NULL;
    if (st != DT_OK) goto done;
    name_table_columns(t, opt);

    rows = experiment_replicas(t[0].exp, &n_rows);
    cells = dt_xcalloc((size_t)n_rows * (size_t)n_cols + 1, sizeof *cells);
    kind = dt_xcalloc((size_t)n_rows * (size_t)n_cols + 1, sizeof *kind);
    errs = dt_xcalloc((size_t)n_rows * (size_t)n_cols + 1, sizeof *errs);
    int count[CELL_ERROR + 1] = {0};
    for (int r = 0; r < n_rows; r++) {
        char ref[2048]; /* file_exists adds "/trace.csv" within 4096 */
        snprintf(ref, sizeof ref, "%s/%s", t[0].dir, rows[r]);
        for (int c = 0; c < n_cols; c++) {
            char other[2048];
            snprintf(other, sizeof other, "%s/%s", t[c + 1].dir, rows[r]);
            size_t k = (size_t)r * (size_t)n_cols + (size_t)c;
            kind[k] = table_cell(cells[k], sizeof cells[k], ref, other, &errs[k]);
            count[kind[k]]++;
        }
    }

    fprintf(out, "Reference: `%s` (", t[0].dir);
    md_cell(out, t[0].label);
    fprintf(out, ")\n\n| replica |");
    for (int c = 0; c < n_cols; c++) {
        fputc(' ', out);
        md_cell(out, t[c + 1].label);
        fprintf(out, " |");
    }
    fprintf(out, "\n|---|");
    for (int c = 0; c < n_cols; c++) fprintf(out, "---|");
    fprintf(out, "\n");
    for (int r = 0; r < n_rows; r++) {
        fprintf(out, "| ");
        md_cell(out, rows[r]);
        fprintf(out, " |");
        for (int c = 0; c < n_cols; c++) {
            fputc(' ', out);
            md_cell(out, cells[(size_t)r * (size_t)n_cols + (size_t)c]);
            fprintf(out, " |");
        }
        fprintf(out, "\n");
    }
    fprintf(out, "\n");
    if (count[CELL_COMMON])
        fprintf(out, "The experiments differ in length: a cell with \"common steps\" compares the "
                     "hashed steps both have (reference vs column); those are equal.\n\n");
    if (count[CELL_ERROR]) {
        fprintf(out, "Unreadable:\n");
        for (size_t k = 0; k < (size_t)n_rows * (size_t)n_cols; k++)
            if (kind[k] == CELL_ERROR)
                fprintf(out, "- %s vs `%s`: %s\n", rows[k / (size_t)n_cols],
                        t[k % (size_t)n_cols + 1].dir, errs[k].msg);
        fprintf(out, "\n");
    }
    fprintf(out, "Experiments:\n");
    for (int i = 0; i < n_exp; i++) {
        fprintf(out, "- %s`%s`: ", i ? "" : "reference ", t[i].dir);
        md_cell(out, t[i].detail);
        if (i < opt->n_labels) fprintf(out, " (labelled \"%s\")", t[i].label);
        fprintf(out, "\n");
    }
    fprintf(out,
            "\ntotal: %d replica%s x %d column%s: %d identical, %d identical over common "
            "steps, %d diverged, %d missing, %d unreadable\n",
            n_rows, n_rows == 1 ? "" : "s", n_cols, n_cols == 1 ? "" : "s", count[CELL_IDENTICAL],
            count[CELL_COMMON], count[CELL_DIVERGED], count[CELL_MISSING], count[CELL_ERROR]);

    if (opt->csv_path)
        st = write_table_csv(opt->csv_path, t, n_cols, (const char(*)[512])rows, n_rows,
                             (const char(*)[160])cells, err);
    *all_identical = count[CELL_DIVERGED] + count[CELL_MISSING] + count[CELL_ERROR] == 0;
    for (size_t k = 0; st == DT_OK && k < (size_t)n_rows * (size_t)n_cols; k++) {
        if (kind[k] == CELL_ERROR) {
            if (err) *err = errs[k];
            st = errs[k].status != DT_OK ? errs[k].status : DT_ERR_DATA;
        }
    }
done:
    for (int i = 0; i < n_exp; i++) free(t[i].exp);
    free(t);
    free(rows);
    free(cells);
    free(kind);
    free(errs);
    return st;
}
