/* train.checkpoint_at_divergence (divwatch.h). */
#include "harness/run/divwatch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void keep(struct dt_divwatch *dw, struct dt_model *m, const char *hex)
{
    dt_model_state_save(&dw->kept, m);
    dw->have_kept = true;
    snprintf(dw->digest, sizeof dw->digest, "%s", hex);
}

void dt_divwatch_begin(struct dt_divwatch *dw, const char *replica0_dir, struct dt_model *m,
                       const char *hex)
{
    memset(dw, 0, sizeof *dw);
    struct dt_error err = {0};
    if (dt_trace_read(&dw->ref, &dw->n_ref, replica0_dir, &err) != DT_OK) {
        dw->ref = NULL;
        return;
    }
    dw->on = true;
    if (hex) keep(dw, m, hex);
}

void dt_divwatch_free(struct dt_divwatch *dw)
{
    dt_model_state_free(&dw->kept);
    free(dw->ref);
    memset(dw, 0, sizeof *dw);
}

enum dt_status dt_divwatch_step(struct dt_divwatch *dw, struct dt_model *m, int64_t s,
                                const char *hex, const struct dt_experiment *exp,
                                const struct dt_policy *pol,
                                const struct dt_checkpoint_info *streams, const char *dir,
                                int64_t *wrote, struct dt_error *err)
{
    *wrote = -1;
    if (!dw->on) return DT_OK;
    while (dw->next < dw->n_ref && dw->ref[dw->next].step < s) dw->next++;
    if (dw->next >= dw->n_ref || dw->ref[dw->next].step != s) { /* replica 0 ended */
        dt_divwatch_free(dw);
        return DT_OK;
    }
    if (strcmp(dw->ref[dw->next].digest, hex) == 0) {
        keep(dw, m, hex);
        return DT_OK;
    }
    enum dt_status st = DT_OK;
    if (dw->have_kept && dw->kept.step > 0) { /* the kept state written as a checkpoint */
        struct dt_model_state now = {0};
        dt_model_state_save(&now, m);
        dt_model_state_load(&dw->kept, m);
        struct dt_checkpoint_info info = *streams;
        info.order_position = dw->kept.step * exp->train.batch;
        info.traced_step = dw->kept.step;
        info.traced_digest = dw->digest;
        char path[1300];
        snprintf(path, sizeof path, "%s/%s", dir, DT_DIVERGENCE_FILE);
        st = dt_checkpoint_write(path, exp, pol, m, &info, err);
        dt_model_state_load(&now, m); /* the model's own state back */
        dt_model_state_free(&now);
        if (st == DT_OK) *wrote = dw->kept.step;
    }
    dt_divwatch_free(dw);
    return st;
}
