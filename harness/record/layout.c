/* File layout of an experiment folder (see layout.h). */
#include "harness/record/layout.h"

#include <stdio.h>
#include <string.h>

#include "harness/record/metrics.h"

void dt_vary_label(char *buf, size_t size, unsigned vary)
{
    static const char *const names[] = {"init", "data_order", "epsilon"};
    size_t used = 0;
    buf[0] = '\0';
    if (vary == 0) {
        snprintf(buf, size, "none");
        return;
    }
    for (unsigned i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (!(vary & (1u << i))) continue;
        int w =
            snprintf(buf + used, size > used ? size - used : 0, "%s%s", used ? "+" : "", names[i]);
        if (w < 0) break;
        used += (size_t)w;
    }
}

void dt_cell_dir(char *buf, size_t size, const struct dt_experiment *exp, int cell)
{
    const char *pol = exp->policies[dt_cell_policy(exp, cell)].name;
    if (exp->n_vary <= 1) {
        snprintf(buf, size, "%s", pol);
        return;
    }
    char label[64];
    dt_vary_label(label, sizeof label, exp->vary_sets[dt_cell_vary(exp, cell)]);
    snprintf(buf, size, "%s/%s", label, pol);
}

void dt_replica_dir(char *buf, size_t size, const char *out_dir, const struct dt_experiment *exp,
                    int cell, int r)
{
    char cell_dir[256];
    dt_cell_dir(cell_dir, sizeof cell_dir, exp, cell);
    snprintf(buf, size, "%s/%s/replica-%d", out_dir, cell_dir, r);
}

void dt_snapshot_dir(char *buf, size_t size, const char *replica_dir)
{
    snprintf(buf, size, "%s/snapshots", replica_dir);
}

void dt_snapshot_path(char *buf, size_t size, const char *replica_dir, int64_t step)
{
    snprintf(buf, size, "%s/snapshots/step-%08lld.bin", replica_dir, (long long)step);
}

int dt_snapshot_steps(const struct dt_experiment *exp, int64_t *out)
{
    if (exp->report.snapshots <= 0) return 0;
    out[0] = 0;
    return 1 + dt_log_spaced_steps(exp->train.steps, exp->report.snapshots, out + 1);
}
