/* Generic model plumbing shared by every model kind: parameters, initialisation, the SGD
 * training step and evaluation. Model kinds (nets/mlp.c, ...) supply forward/backward. */
#include "nets/model.h"

#include <math.h>
#include <string.h>

#include "nets/seed.h"

void dt_model_setup(struct dt_model *m, const struct dt_model_ops *ops, struct dt_backend *be,
                    int n_params, int64_t in_dim, int64_t n_classes, int64_t max_batch)
{
    memset(m, 0, sizeof *m);
    m->ops = ops;
    m->be = be;
    m->n_params = n_params;
    m->params = dt_xcalloc((size_t)n_params, sizeof *m->params);
    m->in_dim = in_dim;
    m->n_classes = n_classes;
    m->max_batch = max_batch;
    m->x = dt_backend_alloc(be, (size_t)(max_batch * in_dim) * sizeof(float));
    m->labels = dt_backend_alloc(be, (size_t)max_batch * sizeof(int32_t));
    size_t lb = (size_t)(max_batch * n_classes) * sizeof(float);
    m->logits = dt_backend_alloc(be, lb);
    m->probs = dt_backend_alloc(be, lb);
    m->dlogits = dt_backend_alloc(be, lb);
}

void dt_model_param(struct dt_model *m, int i, const char *name, int ndim,
                    const int64_t *shape, int64_t fan_in)
{
    DT_ASSERT(i >= 0 && i < m->n_params && ndim >= 1 && ndim <= 4);
    struct dt_param *p = &m->params[i];
    snprintf(p->name, sizeof p->name, "%s", name);
    p->ndim = ndim;
    p->n = 1;
    for (int d = 0; d < ndim; d++) {
        p->shape[d] = shape[d];
        p->n *= shape[d];
    }
    p->fan_in = fan_in;
    size_t bytes = (size_t)p->n * sizeof(float);
    p->w = dt_backend_alloc(m->be, bytes);
    p->g = dt_backend_alloc(m->be, bytes);
    p->v = dt_backend_alloc(m->be, bytes);
}

void dt_model_destroy(struct dt_model *m)
{
    if (!m) return;
    if (m->ops && m->ops->destroy) m->ops->destroy(m);
    for (int i = 0; i < m->n_params; i++) {
        dt_backend_free(m->be, m->params[i].w);
        dt_backend_free(m->be, m->params[i].g);
        dt_backend_free(m->be, m->params[i].v);
    }
    free(m->params);
    dt_backend_free(m->be, m->x);
    dt_backend_free(m->be, m->labels);
    dt_backend_free(m->be, m->logits);
    dt_backend_free(m->be, m->probs);
    dt_backend_free(m->be, m->dlogits);
    free(m);
}

void dt_model_init(struct dt_model *m, uint64_t seed, uint64_t init_replica)
{
    for (int i = 0; i < m->n_params; i++) {
        struct dt_param *p = &m->params[i];
        float *h = dt_xcalloc((size_t)p->n, sizeof *h);
        if (p->fan_in > 0) {
            uint64_t key = dt_stream_key(seed, init_replica, DT_PURPOSE_INIT, 0, (uint64_t)i);
            const float bound = sqrtf(6.0f / (float)p->fan_in);
            for (int64_t k = 0; k < p->n; k++) {
                float u = dt_stream_uniform(key, (uint64_t)k); /* (0,1), exact */
                h[k] = (2.0f * u - 1.0f) * bound;
            }
        }
        dt_backend_upload(m->be, p->w, h, (size_t)p->n * sizeof(float));
        memset(h, 0, (size_t)p->n * sizeof *h);
        dt_backend_upload(m->be, p->v, h, (size_t)p->n * sizeof(float));
        free(h);
    }
}

/* Copy a host batch into the model's backend buffers. */
static void load_batch(struct dt_model *m, const float *x, const uint8_t *y, int64_t B)
{
    DT_ASSERT(B >= 1 && B <= m->max_batch);
    int32_t lab[4096];
    int32_t *labels = B <= 4096 ? lab : dt_xmalloc((size_t)B * sizeof *labels);
    for (int64_t b = 0; b < B; b++) labels[b] = y[b];
    dt_backend_upload(m->be, m->x, x, (size_t)(B * m->in_dim) * sizeof(float));
    dt_backend_upload(m->be, m->labels, labels, (size_t)B * sizeof(int32_t));
    if (labels != lab) free(labels);
}

enum dt_status dt_model_train_step(struct dt_model *m, const float *x, const uint8_t *y,
                                   int64_t B, const struct dt_sgd_options *opt,
                                   const struct dt_policy *pol, float *loss)
{
    load_batch(m, x, y, B);
    DT_FORWARD_IF_ERROR(m->ops->forward(m, B, pol));
    DT_FORWARD_IF_ERROR(dt_softmax_xent_forward(m->be, m->probs, loss, NULL, m->logits,
                                                m->labels, B, m->n_classes, pol));
    DT_FORWARD_IF_ERROR(dt_softmax_xent_backward(m->be, m->dlogits, m->probs, m->labels, B,
                                                 m->n_classes, pol));
    DT_FORWARD_IF_ERROR(m->ops->backward(m, B, pol));
    for (int i = 0; i < m->n_params; i++) {
        struct dt_param *p = &m->params[i];
        DT_FORWARD_IF_ERROR(dt_sgd_update(m->be, p->w, p->v, p->g, p->n, opt->lr,
                                          opt->momentum, opt->weight_decay, pol));
    }
    return DT_OK;
}

enum dt_status dt_model_evaluate(struct dt_model *m, const float *x, const uint8_t *y,
                                 int64_t n, const struct dt_policy *pol, double *loss,
                                 double *accuracy)
{
    double total = 0.0;
    int64_t correct = 0;
    for (int64_t s = 0; s < n; s += m->max_batch) {
        int64_t B = n - s < m->max_batch ? n - s : m->max_batch;
        load_batch(m, x + s * m->in_dim, y + s, B);
        DT_FORWARD_IF_ERROR(m->ops->forward(m, B, pol));
        float l;
        int64_t c;
        DT_FORWARD_IF_ERROR(dt_softmax_xent_forward(m->be, m->probs, &l, &c, m->logits,
                                                    m->labels, B, m->n_classes, pol));
        total += (double)l * (double)B;
        correct += c;
    }
    *loss = n > 0 ? total / (double)n : NAN;
    *accuracy = n > 0 ? (double)correct / (double)n : NAN;
    return DT_OK;
}
