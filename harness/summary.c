/* summary.csv and the summary table (see summary.h). The first divergent step of a policy
 * is the earliest step at which any replica's trace differs from replica 0's. */
#include "harness/summary.h"

#include <errno.h>
#include <math.h>
#include <string.h>

#include "core/util.h"
#include "harness/compare.h"

struct policy_row {
    const char *policy;
    int replicas, completed, distinct;
    int64_t first_divergent;
    double acc_mean, acc_std, step_ms, hash_ms;
};

static void summarise_policy(struct policy_row *row, const struct dt_replica_result *res, int n)
{
    row->replicas = n;
    row->completed = 0;
    row->distinct = 0;
    row->first_divergent = -1;
    double sum = 0, sum2 = 0;
    double *steps = dt_xcalloc((size_t)n + 1, sizeof(double));
    double *hashes = dt_xcalloc((size_t)n + 1, sizeof(double));
    for (int i = 0; i < n; i++) {
        steps[i] = res[i].step_ms_median;
        hashes[i] = res[i].hash_ms_median;
        if (res[i].state != DT_REPLICA_COMPLETED) continue;
        row->completed++;
        sum += res[i].test_acc;
        /* distinct final digests among completed replicas */
        bool seen = false;
        for (int j = 0; j < i && !seen; j++)
            seen = res[j].state == DT_REPLICA_COMPLETED &&
                   strcmp(res[j].final_digest, res[i].final_digest) == 0;
        row->distinct += !seen;
    }
    row->acc_mean = row->completed ? sum / row->completed : NAN;
    for (int i = 0; i < n; i++)
        if (res[i].state == DT_REPLICA_COMPLETED)
            sum2 += (res[i].test_acc - row->acc_mean) * (res[i].test_acc - row->acc_mean);
    row->acc_std = row->completed > 1 ? sqrt(sum2 / (row->completed - 1)) : 0.0;
    row->step_ms = dt_median(steps, n);
    row->hash_ms = dt_median(hashes, n);
    free(steps);
    free(hashes);
    for (int i = 1; i < n; i++) {
        struct dt_trace_diff d;
        struct dt_error e;
        if (dt_trace_compare(&d, res[0].dir, res[i].dir, &e) != DT_OK) continue;
        if (d.diverged && (row->first_divergent < 0 || d.first_step < row->first_divergent))
            row->first_divergent = d.first_step;
    }
}

/* Index of the policy whose controls are exactly the `fast` level's, or -1. */
static int fast_policy_index(const struct dt_experiment *exp)
{
    struct dt_policy fast;
    dt_policy_from_level(&fast, DT_LEVEL_FAST);
    for (int p = 0; p < exp->n_policies; p++)
        if (dt_policy_equal_controls(&exp->policies[p], &fast)) return p;
    return -1;
}

enum dt_status dt_summary_write(const char *out_dir, const struct dt_experiment *exp,
                                const struct dt_replica_result *results, int n,
                                struct dt_error *err)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/summary.csv", out_dir);
    FILE *f = fopen(path, "w");
    if (!f) return dt_error_set(err, DT_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
    fprintf(f, "%s\n", DT_SUMMARY_HEADER);
    printf("\n%-28s %8s %9s %14s %10s %9s %9s %9s %8s\n", "policy", "replicas", "distinct",
           "first_diverge", "acc_mean", "acc_std", "step_ms", "hash_ms", "vs_fast");
    int np = 0;
    struct policy_row *rows = dt_xcalloc((size_t)exp->n_policies, sizeof *rows);
    for (int p = 0; p < exp->n_policies; p++, np++) {
        int begin = p * exp->replicas;
        if (begin >= n) break;
        int count = n - begin < exp->replicas ? n - begin : exp->replicas;
        rows[p].policy = exp->policies[p].name;
        summarise_policy(&rows[p], results + begin, count);
    }
    int fi = fast_policy_index(exp);
    double fast_ms = (fi >= 0 && fi < np) ? rows[fi].step_ms : NAN;
    for (int p = 0; p < np; p++) {
        const struct policy_row *row = &rows[p];
        double ratio = row->step_ms / fast_ms; /* NaN when no fast policy ran */
        fprintf(f, "%s,%d,%d,%lld,%.6f,%.6f,%.4f,%.4f,%d,%.4f\n", row->policy, row->replicas,
                row->distinct, (long long)row->first_divergent, row->acc_mean, row->acc_std,
                row->step_ms, row->hash_ms, row->completed, isfinite(ratio) ? ratio : -1.0);
        printf("%-28s %8d %9d %14lld %10.4f %9.4f %9.3f %9.3f", row->policy, row->replicas,
               row->distinct, (long long)row->first_divergent, row->acc_mean, row->acc_std,
               row->step_ms, row->hash_ms);
        if (isfinite(ratio)) printf(" %7.2fx\n", ratio);
        else printf(" %8s\n", "-");
    }
    free(rows);
    printf("(distinct = distinct final model digests; first_diverge = first step where a "
           "replica's digest differs from replica 0's, -1 = never;\n vs_fast = median step "
           "time relative to the fast policy of the same run)\nsummary: %s\n", path);
    fflush(stdout);
    if (fclose(f) != 0)
        return dt_error_set(err, DT_ERR_IO, "%s: write failed: %s", path, strerror(errno));
    return DT_OK;
}
