/* LeNet-style CNN (LeCun et al. 1998, with ReLU and max pooling):
 *   conv0 (1->6, 5x5, pad 2) -> ReLU -> maxpool -> conv1 (6->16, 5x5) -> ReLU -> maxpool
 *   -> flatten -> dense0 (->120) -> ReLU -> dense1 (->84) -> ReLU -> dense2 (->classes).
 * Pooling is 2x2 stride 2, or with `overlap` 3x3 stride 2 padding 1 (AlexNet's
 * overlapping windows; same output sizes, so a 28x28 input gives 5x5x16 = 400 features
 * either way). Images are NHWC, so flatten is a view: the (B, 5, 5, 16) pooled tensor is
 * dense0's (B, 400) input, features in (h, w, c) order.
 * Parameters, in digest order: conv0.weight (5,5,1,6), conv0.bias, conv1.weight
 * (5,5,6,16), conv1.bias, dense0.weight (400,120), dense0.bias, dense1.*, dense2.*. */
#include <string.h>

#include "nets/model.h"
#include "nets/models.h"

enum { N_DENSE = 3 };

struct lenet {
    struct dt_conv2d_shape conv[2];
    struct dt_pool2d_shape pool[2];
    int64_t dims[N_DENSE + 1];        /* dense widths: flat, 120, 84, classes */
    float *conv_out[2], *pool_out[2]; /* post-ReLU conv outputs, pooled outputs */
    int32_t *argmax[2];
    float *hidden[N_DENSE - 1]; /* post-ReLU dense outputs */
    float *d_conv[2], *d_pool0; /* gradients w.r.t. conv outputs and pool0 output */
    float *d_dense[2];          /* ping-pong gradients of dense activations */
};

/* The shape for a batch of B (the stored shapes use max_batch). */
static struct dt_conv2d_shape conv_at(const struct dt_conv2d_shape *s, int64_t B)
{
    struct dt_conv2d_shape t = *s;
    t.B = B;
    return t;
}
static struct dt_pool2d_shape pool_at(const struct dt_pool2d_shape *s, int64_t B)
{
    struct dt_pool2d_shape t = *s;
    t.B = B;
    return t;
}
static int64_t conv_out_n(const struct dt_conv2d_shape *s)
{
    return s->B * s->OH * s->OW * s->K_out;
}
static int64_t pool_out_n(const struct dt_pool2d_shape *s) { return s->B * s->OH * s->OW * s->C; }

static enum dt_status lenet_forward(struct dt_model *m, int64_t B, struct dt_pass *p,
                                    const struct dt_policy *pol)
{
    struct lenet *n = m->impl;
    const float *in = m->x;
    for (int l = 0; l < 2; l++) {
        struct dt_conv2d_shape cs = conv_at(&n->conv[l], B);
        struct dt_pool2d_shape ps = pool_at(&n->pool[l], B);
        const struct dt_param *w = &m->params[2 * l], *b = &m->params[2 * l + 1];
        DT_MODEL_FWD(m, w->name,
                     dt_conv2d_forward(m->be, n->conv_out[l], in, w->w, b->w, &cs, pol));
        DT_FORWARD_IF_ERROR(
            dt_relu_forward(m->be, n->conv_out[l], n->conv_out[l], conv_out_n(&cs), pol));
        DT_FORWARD_IF_ERROR(
            dt_maxpool2d_forward(m->be, n->pool_out[l], n->argmax[l], n->conv_out[l], &ps, pol));
        in = n->pool_out[l];
    }
    for (int l = 0; l < N_DENSE; l++) { /* `in` is the flattened pool1 output, then hidden */
        const struct dt_param *w = &m->params[4 + 2 * l], *b = &m->params[5 + 2 * l];
        float *out = l + 1 < N_DENSE ? n->hidden[l] : m->logits;
        DT_MODEL_FWD(
            m, w->name,
            dt_dense_forward(m->be, out, in, w->w, b->w, B, n->dims[l], n->dims[l + 1], pol));
        if (l + 1 < N_DENSE)
            DT_FORWARD_IF_ERROR(dt_relu_forward(m->be, out, out, B * n->dims[l + 1], pol));
        in = out;
    }
    return DT_OK;
}

static enum dt_status lenet_backward(struct dt_model *m, int64_t B, const struct dt_pass *p,
                                     const struct dt_policy *pol)
{
    struct lenet *n = m->impl;
    const float *dy = m->dlogits;
    for (int l = N_DENSE - 1; l >= 0; l--) {
        struct dt_param *w = &m->params[4 + 2 * l], *b = &m->params[5 + 2 * l];
        const int64_t in = n->dims[l], out = n->dims[l + 1];
        const float *x = l > 0 ? n->hidden[l - 1] : n->pool_out[1];
        DT_MODEL_GRAD(m, w->name, false,
                      dt_dense_backward_weight(m->be, w->g, x, dy, B, in, out, pol));
        DT_MODEL_GRAD(m, b->name, false, dt_bias_backward(m->be, b->g, dy, B, out, pol));
        float *dx = dy == n->d_dense[0] ? n->d_dense[1] : n->d_dense[0];
        DT_MODEL_GRAD(m, w->name, true,
                      dt_dense_backward_data(m->be, dx, dy, w->w, B, in, out, pol));
        if (l > 0) DT_FORWARD_IF_ERROR(dt_relu_backward(m->be, dx, dx, x, B * in, pol));
        dy = dx; /* after l == 0: the gradient w.r.t. the flattened pool1 output */
    }
    for (int l = 1; l >= 0; l--) {
        struct dt_conv2d_shape cs = conv_at(&n->conv[l], B);
        struct dt_pool2d_shape ps = pool_at(&n->pool[l], B);
        struct dt_param *w = &m->params[2 * l], *b = &m->params[2 * l + 1];
        float *dc = n->d_conv[l];
        DT_MODEL_GRAD(m, w->name, true,
                      dt_maxpool2d_backward(m->be, dc, dy, n->conv_out[l], n->pool_out[l],
                                            n->argmax[l], &ps, pol));
        DT_FORWARD_IF_ERROR(dt_relu_backward(m->be, dc, dc, n->conv_out[l], conv_out_n(&cs), pol));
        const float *x = l > 0 ? n->pool_out[0] : m->x;
        DT_MODEL_GRAD(m, w->name, false, dt_conv2d_backward_weight(m->be, w->g, x, dc, &cs, pol));
        DT_MODEL_GRAD(m, b->name, false,
                      dt_bias_backward(m->be, b->g, dc, B * cs.OH * cs.OW, cs.K_out, pol));
        if (l == 0) break; /* no gradient needed for the input */
        DT_MODEL_GRAD(m, w->name, true,
                      dt_conv2d_backward_data(m->be, n->d_pool0, dc, w->w, &cs, pol));
        dy = n->d_pool0;
    }
    return DT_OK;
}

static void lenet_destroy(struct dt_model *m)
{
    struct lenet *n = m->impl;
    if (!n) return;
    for (int l = 0; l < 2; l++) {
        dt_backend_free(m->be, n->conv_out[l]);
        dt_backend_free(m->be, n->pool_out[l]);
        dt_backend_free(m->be, n->argmax[l]);
        dt_backend_free(m->be, n->d_conv[l]);
        dt_backend_free(m->be, n->d_dense[l]);
        dt_backend_free(m->be, n->hidden[l]);
    }
    dt_backend_free(m->be, n->d_pool0);
    free(n);
    m->impl = NULL;
}

static const struct dt_model_ops lenet_ops = {
    .kind = "lenet",
    .forward = lenet_forward,
    .backward = lenet_backward,
    .destroy = lenet_destroy,
};

static float *alloc_floats(struct dt_backend *be, int64_t n)
{
    return dt_backend_alloc(be, (size_t)n * sizeof(float));
}

enum dt_status dt_lenet_create(struct dt_model **out, struct dt_backend *be, int64_t H, int64_t W,
                               bool overlap_pool, int64_t n_classes, int64_t max_batch,
                               struct dt_error *err)
{
    *out = NULL;
    struct lenet *n = dt_xcalloc(1, sizeof *n);
    const int64_t pk = overlap_pool ? 3 : 2, pp = overlap_pool ? 1 : 0;
    n->conv[0] = (struct dt_conv2d_shape){.B = max_batch,
                                          .H = H,
                                          .W = W,
                                          .C = 1,
                                          .K_out = 6,
                                          .KH = 5,
                                          .KW = 5,
                                          .stride = 1,
                                          .pad = 2};
    enum dt_status st = dt_conv2d_shape_init(&n->conv[0], err);
    for (int l = 0; l < 2 && st == DT_OK; l++) {
        const struct dt_conv2d_shape *c = &n->conv[l];
        n->pool[l] = (struct dt_pool2d_shape){
            .B = max_batch, .H = c->OH, .W = c->OW, .C = c->K_out, .K = pk, .stride = 2, .pad = pp};
        st = dt_pool2d_shape_init(&n->pool[l], err);
        if (st == DT_OK && l == 0) {
            const struct dt_pool2d_shape *p = &n->pool[0];
            n->conv[1] = (struct dt_conv2d_shape){.B = max_batch,
                                                  .H = p->OH,
                                                  .W = p->OW,
                                                  .C = p->C,
                                                  .K_out = 16,
                                                  .KH = 5,
                                                  .KW = 5,
                                                  .stride = 1,
                                                  .pad = 0};
            st = dt_conv2d_shape_init(&n->conv[1], err);
        }
    }
    if (st != DT_OK) {
        free(n);
        char why[sizeof err->msg];
        snprintf(why, sizeof why, "%s", err ? err->msg : "bad shape");
        return dt_error_set(err, DT_ERR_CONFIG, "lenet on %lldx%lld images: %s", (long long)H,
                            (long long)W, why);
    }
    const struct dt_pool2d_shape *p1 = &n->pool[1];
    const int64_t dims[N_DENSE + 1] = {p1->OH * p1->OW * p1->C, 120, 84, n_classes};
    memcpy(n->dims, dims, sizeof dims);

    struct dt_model *m = dt_xcalloc(1, sizeof *m);
    dt_model_setup(m, &lenet_ops, be, 4 + 2 * N_DENSE, H * W, n_classes, max_batch);
    m->impl = n;
    for (int l = 0; l < 2; l++) {
        const struct dt_conv2d_shape *c = &n->conv[l];
        char name[DT_PARAM_NAME];
        const int64_t wshape[4] = {c->KH, c->KW, c->C, c->K_out};
        snprintf(name, sizeof name, "conv%d.weight", l);
        dt_model_param(m, 2 * l, name, 4, wshape, c->KH * c->KW * c->C);
        snprintf(name, sizeof name, "conv%d.bias", l);
        dt_model_param(m, 2 * l + 1, name, 1, &wshape[3], 0);
        n->conv_out[l] = alloc_floats(be, conv_out_n(c));
        n->d_conv[l] = alloc_floats(be, conv_out_n(c));
        n->pool_out[l] = alloc_floats(be, pool_out_n(&n->pool[l]));
        n->argmax[l] = dt_backend_alloc(be, (size_t)pool_out_n(&n->pool[l]) * sizeof(int32_t));
    }
    n->d_pool0 = alloc_floats(be, pool_out_n(&n->pool[0]));
    int64_t widest = 0;
    for (int l = 0; l < N_DENSE; l++) {
        char name[DT_PARAM_NAME];
        const int64_t wshape[2] = {n->dims[l], n->dims[l + 1]};
        snprintf(name, sizeof name, "dense%d.weight", l);
        dt_model_param(m, 4 + 2 * l, name, 2, wshape, n->dims[l]);
        snprintf(name, sizeof name, "dense%d.bias", l);
        dt_model_param(m, 5 + 2 * l, name, 1, &wshape[1], 0);
        if (l + 1 < N_DENSE) n->hidden[l] = alloc_floats(be, max_batch * n->dims[l + 1]);
        if (n->dims[l] > widest) widest = n->dims[l];
    }
    for (int i = 0; i < 2; i++) n->d_dense[i] = alloc_floats(be, max_batch * widest);
    *out = m;
    return DT_OK;
}

/* ---- the registry row (nets/models.h) -------------------------------------------------- */

/* LeNet-5 as built above, with 2x2 pooling (overlapping 3x3 windows give no more). */
static struct dt_model_size lenet_size(const struct dt_model_spec *s)
{
    const double flat = (double)((s->height / 2 - 4) / 2) * (double)((s->width / 2 - 4) / 2) * 16;
    const double params = (25.0 * (double)s->channels * 6 + 6) + (25.0 * 6 * 16 + 16) +
                          (flat * 120 + 120) + (120.0 * 84 + 84) +
                          (84.0 * (double)s->n_classes + (double)s->n_classes);
    /* per example: the convolutions' im2col columns (25 per output pixel and channel in),
     * outputs, gradients and pooling indices -- about 50 floats per input pixel, measured */
    return (struct dt_model_size){.params = params,
                                  .extra_per_param = 0,
                                  .acts_per_example = 50.0 * (double)(s->height * s->width),
                                  .stored_per_param_per_sample = 0};
}

static enum dt_status lenet_kind_create(struct dt_model **out, struct dt_backend *be,
                                        const struct dt_model_spec *s, struct dt_error *err)
{
    if (s->channels != 1)
        return dt_error_set(err, DT_ERR_CONFIG, "lenet takes one-channel images, not %lld",
                            (long long)s->channels);
    return dt_lenet_create(out, be, s->height, s->width, s->overlap_pool, s->n_classes, s->batch,
                           err);
}

const struct dt_model_kind_info dt_lenet_kind = {.name = "lenet",
                                                 .keys = "model.overlap_pool",
                                                 .extra_control = "conv_algo",
                                                 .create = lenet_kind_create,
                                                 .size = lenet_size};
