/* MLP model: in_dim -> hidden... -> n_classes, dense layers with ReLU between them.
 * Activations are kept per layer for backward; parameters are named dense<i>.weight
 * (in, out) and dense<i>.bias (out), in layer order (the model digest's order). */
#include <string.h>

#include "nets/model.h"
#include "nets/models.h"

#define MLP_MAX_LAYERS 32

struct mlp {
    int n_layers;                     /* dense layers */
    int64_t dims[MLP_MAX_LAYERS + 1]; /* dims[0] = in, dims[n_layers] = classes */
    float *act[MLP_MAX_LAYERS + 1];   /* act[l] (B, dims[l]); act[0] = m->x; act[L] = logits */
    float *grad;                      /* (B, max dim) scratch: gradient w.r.t. an activation */
    float *grad2;
};

static enum dt_status mlp_forward(struct dt_model *m, int64_t B, struct dt_pass *p,
                                  const struct dt_policy *pol)
{
    struct mlp *n = m->impl;
    n->act[0] = m->x;
    n->act[n->n_layers] = m->logits;
    for (int l = 0; l < n->n_layers; l++) {
        const struct dt_param *w = &m->params[2 * l], *b = &m->params[2 * l + 1];
        DT_MODEL_FWD(m, w->name,
                     dt_dense_forward(m->be, n->act[l + 1], n->act[l], w->w, b->w, B, n->dims[l],
                                      n->dims[l + 1], pol));
        if (l + 1 < n->n_layers)
            DT_FORWARD_IF_ERROR(
                dt_relu_forward(m->be, n->act[l + 1], n->act[l + 1], B * n->dims[l + 1], pol));
    }
    return DT_OK;
}

static enum dt_status mlp_backward(struct dt_model *m, int64_t B, const struct dt_pass *p,
                                   const struct dt_policy *pol)
{
    struct mlp *n = m->impl;
    const float *dy = m->dlogits; /* gradient w.r.t. the output of layer l */
    for (int l = n->n_layers - 1; l >= 0; l--) {
        struct dt_param *w = &m->params[2 * l], *b = &m->params[2 * l + 1];
        int64_t in = n->dims[l], out = n->dims[l + 1];
        DT_MODEL_GRAD(m, w->name, false,
                      dt_dense_backward_weight(m->be, w->g, n->act[l], dy, B, in, out, pol));
        DT_MODEL_GRAD(m, b->name, false, dt_bias_backward(m->be, b->g, dy, B, out, pol));
        if (l == 0) break; /* no gradient needed for the input */
        float *dx = (dy == n->grad) ? n->grad2 : n->grad;
        DT_MODEL_GRAD(m, w->name, true,
                      dt_dense_backward_data(m->be, dx, dy, w->w, B, in, out, pol));
        DT_FORWARD_IF_ERROR(dt_relu_backward(m->be, dx, dx, n->act[l], B * in, pol));
        dy = dx;
    }
    return DT_OK;
}

static void mlp_destroy(struct dt_model *m)
{
    struct mlp *n = m->impl;
    if (!n) return;
    for (int l = 1; l < n->n_layers; l++) dt_backend_free(m->be, n->act[l]);
    dt_backend_free(m->be, n->grad);
    dt_backend_free(m->be, n->grad2);
    free(n);
    m->impl = NULL;
}

static const struct dt_model_ops mlp_ops = {
    .kind = "mlp",
    .forward = mlp_forward,
    .backward = mlp_backward,
    .destroy = mlp_destroy,
};

enum dt_status dt_mlp_create(struct dt_model **out, struct dt_backend *be, int64_t in_dim,
                             const int64_t *hidden, int n_hidden, int64_t n_classes,
                             int64_t max_batch, struct dt_error *err)
{
    *out = NULL;
    if (n_hidden < 0 || n_hidden + 1 > MLP_MAX_LAYERS)
        return dt_error_set(err, DT_ERR_CONFIG, "mlp: %d hidden layers (at most %d)", n_hidden,
                            MLP_MAX_LAYERS - 1);
    struct dt_model *m = dt_xcalloc(1, sizeof *m);
    struct mlp *n = dt_xcalloc(1, sizeof *n);
    n->n_layers = n_hidden + 1;
    n->dims[0] = in_dim;
    for (int i = 0; i < n_hidden; i++) n->dims[i + 1] = hidden[i];
    n->dims[n->n_layers] = n_classes;
    dt_model_setup(m, &mlp_ops, be, 2 * n->n_layers, in_dim, n_classes, max_batch);
    m->impl = n;
    int64_t max_dim = 0;
    for (int l = 0; l <= n->n_layers; l++) max_dim = n->dims[l] > max_dim ? n->dims[l] : max_dim;
    for (int l = 0; l < n->n_layers; l++) {
        char name[DT_PARAM_NAME];
        int64_t wshape[2] = {n->dims[l], n->dims[l + 1]};
        snprintf(name, sizeof name, "dense%d.weight", l);
        dt_model_param(m, 2 * l, name, 2, wshape, n->dims[l]);
        snprintf(name, sizeof name, "dense%d.bias", l);
        dt_model_param(m, 2 * l + 1, name, 1, &wshape[1], 0);
        if (l >= 1)
            n->act[l] = dt_backend_alloc(be, (size_t)(max_batch * n->dims[l]) * sizeof(float));
    }
    n->grad = dt_backend_alloc(be, (size_t)(max_batch * max_dim) * sizeof(float));
    n->grad2 = dt_backend_alloc(be, (size_t)(max_batch * max_dim) * sizeof(float));
    *out = m;
    return DT_OK;
}

/* ---- the registry row (nets/models.h) -------------------------------------------------- */

struct dt_model_size dt_mlp_size(const struct dt_model_spec *s)
{
    const double in_dim = (double)(s->height * s->width * s->channels);
    double in = in_dim, widest = in_dim, params = 0, acts = 0;
    for (int l = 0; l <= s->n_hidden; l++) {
        const double out = l < s->n_hidden ? (double)s->hidden[l] : (double)s->n_classes;
        params += in * out + out;
        acts += out;
        if (out > widest) widest = out;
        in = out;
    }
    /* every layer's output and its gradient (measured: 2 floats per unit and input) */
    (void)widest;
    return (struct dt_model_size){.params = params,
                                  .extra_per_param = 0,
                                  .acts_per_example = 2 * (acts + in_dim),
                                  .stored_per_param_per_sample = 0};
}

static enum dt_status mlp_kind_create(struct dt_model **out, struct dt_backend *be,
                                      const struct dt_model_spec *s, struct dt_error *err)
{
    return dt_mlp_create(out, be, s->height * s->width * s->channels, s->hidden, s->n_hidden,
                         s->n_classes, s->batch, err);
}

const struct dt_model_kind_info dt_mlp_kind = {
    .name = "mlp", .keys = "model.hidden", .create = mlp_kind_create, .size = dt_mlp_size};
