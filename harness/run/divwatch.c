/* train.checkpoint_at_divergence (divwatch.h). */
#include "harness/run/divwatch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "nets/backend.h"

static void keep(struct dt_divwatch *dw, struct dt_model *m, int64_t step, const char *hex)
{
    for (int i = 0; i < m->n_params; i++) {
        const size_t bytes = (size_t)m->params[i].n * sizeof(float);
        dt_backend_download(m->be, dw->w[i], m->params[i].w, bytes);
        dt_backend_download(m->be, dw->v[i], m->params[i].v, bytes);
    }
    dw->step = step;
    snprintf(dw->digest, sizeof dw->digest, "%s", hex);
}

void dt_divwatch_begin(struct dt_divwatch *dw, const char *replica0_dir, struct dt_model *m,
                       const char *hex)
{
    memset(dw, 0, sizeof *dw);
    dw->step = -1;
    struct dt_error err = {0};
    if (dt_trace_read(&dw->ref, &dw->n_ref, replica0_dir, &err) != DT_OK) {
        dw->ref = NULL;
        return;
    }
    dw->on = true;
    dw->n_params = m->n_params;
    dw->w = dt_xcalloc((size_t)m->n_params, sizeof *dw->w);
    dw->v = dt_xcalloc((size_t)m->n_params, sizeof *dw->v);
    for (int i = 0; i < m->n_params; i++) {
        dw->w[i] = dt_xmalloc((size_t)m->params[i].n * sizeof(float));
        dw->v[i] = dt_xmalloc((size_t)m->params[i].n * sizeof(float));
    }
    if (hex) keep(dw, m, m->step, hex);
}

void dt_divwatch_free(struct dt_divwatch *dw)
{
    for (int i = 0; dw->w && i < dw->n_params; i++) {
        free(dw->w[i]);
        free(dw->v[i]);
    }
    free(dw->w);
    free(dw->v);
    free(dw->ref);
    memset(dw, 0, sizeof *dw);
    dw->step = -1;
}

/* The kept state into the model, the model's own into cur_w, cur_v. */
static void swap_state(struct dt_divwatch *dw, struct dt_model *m, float **cur_w, float **cur_v)
{
    for (int i = 0; i < m->n_params; i++) {
        const size_t bytes = (size_t)m->params[i].n * sizeof(float);
        dt_backend_download(m->be, cur_w[i], m->params[i].w, bytes);
        dt_backend_download(m->be, cur_v[i], m->params[i].v, bytes);
        dt_backend_upload(m->be, m->params[i].w, dw->w[i], bytes);
        dt_backend_upload(m->be, m->params[i].v, dw->v[i], bytes);
    }
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
        keep(dw, m, s, hex);
        return DT_OK;
    }
    enum dt_status st = DT_OK;
    if (dw->step > 0) { /* the kept state written as a checkpoint of its step */
        float **cur_w = dt_xcalloc((size_t)m->n_params, sizeof *cur_w);
        float **cur_v = dt_xcalloc((size_t)m->n_params, sizeof *cur_v);
        for (int i = 0; i < m->n_params; i++) {
            cur_w[i] = dt_xmalloc((size_t)m->params[i].n * sizeof(float));
            cur_v[i] = dt_xmalloc((size_t)m->params[i].n * sizeof(float));
        }
        swap_state(dw, m, cur_w, cur_v);
        const int64_t now = m->step;
        m->step = dw->step;
        struct dt_checkpoint_info info = *streams;
        info.order_position = dw->step * exp->train.batch;
        info.traced_step = dw->step;
        info.traced_digest = dw->digest;
        char path[1300];
        snprintf(path, sizeof path, "%s/%s", dir, DT_DIVERGENCE_FILE);
        st = dt_checkpoint_write(path, exp, pol, m, &info, err);
        m->step = now;
        for (int i = 0; i < m->n_params; i++) { /* the model's own state back */
            const size_t bytes = (size_t)m->params[i].n * sizeof(float);
            dt_backend_upload(m->be, m->params[i].w, cur_w[i], bytes);
            dt_backend_upload(m->be, m->params[i].v, cur_v[i], bytes);
            free(cur_w[i]);
            free(cur_v[i]);
        }
        free(cur_w);
        free(cur_v);
        if (st == DT_OK) *wrote = dw->step;
    }
    dt_divwatch_free(dw);
    return st;
}
