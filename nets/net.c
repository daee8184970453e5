/* A network described as a list of layers (model.kind: net; nets/model.h, DT_LAYER_LIST):
 * each layer takes the previous one's output, NHWC, and makes its own. The plan (shapes,
 * parameters, which layers need their input's gradient) is worked out once by plan(),
 * which the builder and the memory estimate both read.
 *
 * Forward and backward call the same ops in the same order as the built-in kinds do for
 * the same layers: a ReLU works in place on its input (the output's sign is the input's, so
 * its backward reads the output), a flatten is a view, and no layer computes the gradient
 * of an input that no parameter lies under (the first layers' inputs: the data). So the MLP
 * and LeNet written as layer lists give the built-in kinds' bits (tests/test_net.c).
 *
 * Batch normalisation normalises each channel over one canonical shard of the batch at a
 * time (m->shard_row, set by the step at every level: nets/model.h), so its statistics, like
 * the gradients, do not depend on how many threads or ranks share the batch; each shard's
 * mean and variance land in m->stats, from which the step moves the running statistics
 * (the buffers, shard after shard: net_update_buffers) that an evaluation normalises by. */
#include <string.h>

#include "determinism/dropout.h"
#include "nets/batchnorm_elem.h"
#include "nets/model.h"
#include "nets/models.h"

const char *const dt_layer_kind_names[DT_LAYER_KIND_COUNT + 1] = {
#define DT_LAYER_NAME_(id, name, units, window, rate) name,
    DT_LAYER_LIST(DT_LAYER_NAME_)
#undef DT_LAYER_NAME_
        NULL};

/* What each kind takes in the config, from its row. */
static const struct {
    bool units, window, rate;
} takes[DT_LAYER_KIND_COUNT] = {
#define DT_LAYER_TAKES_(id, name, units, window, rate) {units, window, rate},
    DT_LAYER_LIST(DT_LAYER_TAKES_)
#undef DT_LAYER_TAKES_
};

bool dt_layer_takes_units(enum dt_layer_kind k) { return takes[k].units; }
bool dt_layer_takes_window(enum dt_layer_kind k) { return takes[k].window; }
bool dt_layer_takes_rate(enum dt_layer_kind k) { return takes[k].rate; }

/* A tensor per example: H x W x C (flat: 1 x 1 x features). */
struct dims {
    int64_t H, W, C;
};
static int64_t count(struct dims d) { return d.H * d.W * d.C; }

/* One layer as planned. */
struct net_layer {
    struct dt_layer spec;
    struct dims in, out;
    int param;    /* its weight's index (the bias follows), or -1 */
    int number;   /* per kind: dense<number>, conv<number> */
    bool grad_in; /* a parameter lies under its input: its gradient is needed */
    bool alias;   /* its output is its input's buffer (relu in place, flatten) */
    struct dt_conv2d_shape conv;
    struct dt_pool2d_shape pool;
    float *y;                /* its output (B x out), or the input's buffer when alias */
    float *dx;               /* the gradient w.r.t. its input (B x in) when grad_in and not alias */
    int32_t *argmax;         /* maxpool */
    float *mean, *rstd, *gx; /* layernorm: each position's mean and 1/std, gamma's terms */
    float *own;              /* dropout: its output in a training step (else its input) */
    int buffer;              /* batchnorm: its running mean's index (the variance follows) */
    int64_t stat;            /* batchnorm: its mean's offset in a shard's statistics (var + C) */
    uint32_t threshold;      /* dropout (dt_dropout_rate) */
    float scale;
    char name[32]; /* "maxpool1": a layer without parameters in a check's context */
    /* residual: its branch's last entry; the block's input; the projection's output and input
     * gradient; the gradient w.r.t. the block's output, kept for the shortcut */
    int end;
    bool ends_block; /* any entry: some residual's branch ends here (its first in the list) */
    const float *x_in;
    float *proj_y, *proj_dx;
    const float *dy_out;
};

struct net {
    int n;
    struct net_layer *layer;
    int n_params;
    /* dropout: its sites (the dropout layers, in order), whether this forward drops, the
     * lanes (one per example: rng lfsr and stored), the keep bytes (keep, stored modes) */
    int sites;
    bool training;
    int64_t lfsr_check_every;
    struct dt_xoro *lanes, *lanes_host;
    uint8_t *keep;
    int64_t keep_per_site; /* bytes a site: max_batch x its widest input */
};

/* How a message names layer i: its label when the caller has them (a config's "item 3,
 * branch item 1"), else "layer i+1". */
static const char *where(char *buf, size_t size, const char *const *labels, int i)
{
    if (labels) return labels[i];
    snprintf(buf, size, "layer %d", i + 1);
    return buf;
}

/* Layer l's output on `in` (any kind but a residual), or DT_ERR_CONFIG naming it: i is its
 * place in the list. */
static enum dt_status plan_shape(struct net_layer *l, struct dims in, int i,
                                 const char *const *labels, struct dt_error *err)
{
    char at[32];
    const char *kind = dt_layer_kind_names[l->spec.kind];
    struct dt_error why = {0};
    enum dt_status st = DT_OK;
    switch (l->spec.kind) {
    case DT_LAYER_DENSE:
        if (in.H != 1 || in.W != 1)
            return dt_error_set(err, DT_ERR_CONFIG,
                                "%s (dense): its input is a %lldx%lldx%lld image; put a "
                                "flatten layer before it",
                                where(at, sizeof at, labels, i), (long long)in.H, (long long)in.W,
                                (long long)in.C);
        l->out = (struct dims){1, 1, l->spec.units};
        break;
    case DT_LAYER_CONV:
        l->conv = (struct dt_conv2d_shape){.B = 1,
                                           .H = in.H,
                                           .W = in.W,
                                           .C = in.C,
                                           .K_out = l->spec.units,
                                           .KH = l->spec.kernel,
                                           .KW = l->spec.kernel,
                                           .stride = l->spec.stride,
                                           .pad = l->spec.pad};
        st = dt_conv2d_shape_init(&l->conv, &why);
        l->out = (struct dims){l->conv.OH, l->conv.OW, l->spec.units};
        break;
    case DT_LAYER_MAXPOOL:
    case DT_LAYER_AVGPOOL:
        l->pool = (struct dt_pool2d_shape){.B = 1,
                                           .H = in.H,
                                           .W = in.W,
                                           .C = in.C,
                                           .K = l->spec.kernel,
                                           .stride = l->spec.stride,
                                           .pad = l->spec.pad};
        st = dt_pool2d_shape_init(&l->pool, &why);
        l->out = (struct dims){l->pool.OH, l->pool.OW, in.C};
        break;

    case DT_LAYER_RELU:
    case DT_LAYER_GELU:
    case DT_LAYER_LAYERNORM:
    case DT_LAYER_BATCHNORM:
    case DT_LAYER_DROPOUT:
    case DT_LAYER_RESIDUAL: l->out = in; break; /* a residual's branch starts on its input */
    case DT_LAYER_GLOBAL_AVGPOOL: l->out = (struct dims){1, 1, in.C}; break;
    case DT_LAYER_FLATTEN: l->out = (struct dims){1, 1, count(in)}; break;
    case DT_LAYER_KIND_COUNT: DT_ASSERT(0);
    }
    if (st != DT_OK)
        return dt_error_set(err, DT_ERR_CONFIG, "%s (%s) on a %lldx%lldx%lld input: %s",
                            where(at, sizeof at, labels, i), kind, (long long)in.H, (long long)in.W,
                            (long long)in.C, why.msg);
    return DT_OK;
}

/* Residual r (at place ri) closed by its branch's last entry `last` (output `out`): the
 * shortcut's shape and, for a projection, its parameters. */
static enum dt_status plan_close(struct net_layer *r, int ri, const struct net_layer *last,
                                 struct dims out, int *n_params, int *n_proj,
                                 const char *const *labels, struct dt_error *err)
{
    const struct dims x = r->in;
    char at[32];
    const char *name = where(at, sizeof at, labels, ri);
    r->out = out;
    if (last->alias)
        return dt_error_set(err, DT_ERR_CONFIG,
                            "%s (residual): its branch ends with %s, which works in place; "
                            "end it with a layer of its own output and put the %s after the block",
                            name, dt_layer_kind_names[last->spec.kind],
                            dt_layer_kind_names[last->spec.kind]);
    if (!r->spec.projection) {
        if (x.H == out.H && x.W == out.W && x.C == out.C) return DT_OK;
        return dt_error_set(err, DT_ERR_CONFIG,
                            "%s (residual): its branch turns %lldx%lldx%lld into "
                            "%lldx%lldx%lld; an identity shortcut needs the same shape "
                            "(shortcut: projection)",
                            name, (long long)x.H, (long long)x.W, (long long)x.C, (long long)out.H,
                            (long long)out.W, (long long)out.C);
    }
    for (int64_t stride = 1; stride <= 64; stride++) { /* the branch's stride, as 1 x 1 takes it */
        r->conv = (struct dt_conv2d_shape){.B = 1,
                                           .H = x.H,
                                           .W = x.W,
                                           .C = x.C,
                                           .K_out = out.C,
                                           .KH = 1,
                                           .KW = 1,
                                           .stride = stride};
        if (dt_conv2d_shape_init(&r->conv, NULL) == DT_OK && r->conv.OH == out.H &&
            r->conv.OW == out.W) {
            r->param = *n_params;
            *n_params += 2;
            r->number = (*n_proj)++;
            return DT_OK;
        }
    }
    return dt_error_set(err, DT_ERR_CONFIG,
                        "%s (residual): no 1x1 projection strides %lldx%lld onto the "
                        "branch's %lldx%lld",
                        name, (long long)x.H, (long long)x.W, (long long)out.H, (long long)out.W);
}

/* The plan of n layers on `in`: every layer's shapes, parameters and gradient needs, or
 * DT_ERR_CONFIG naming the layer. L has n entries. */
static enum dt_status plan(struct net_layer *L, const struct dt_layer *layers, int n,
                           struct dims in, int64_t n_classes, int *n_params,
                           const char *const *labels, struct dt_error *err)
{
    char at[32];
    int counts[DT_LAYER_KIND_COUNT] = {0}, open[DT_NET_MAX_LAYERS], n_open = 0, n_proj = 0;
    bool params_below = false;
    *n_params = 0;
    if (n < 1 || n > DT_NET_MAX_LAYERS)
        return dt_error_set(err, DT_ERR_CONFIG, "net: %d layers (1 to %d)", n, DT_NET_MAX_LAYERS);
    for (int i = 0; i < n; i++) {
        struct net_layer *l = &L[i];
        memset(l, 0, sizeof *l);
        l->spec = layers[i];
        l->in = in;
        l->param = -1;
        l->number = counts[l->spec.kind]++;
        l->grad_in = params_below;
        snprintf(l->name, sizeof l->name, "%s%d", dt_layer_kind_names[l->spec.kind], l->number);
        DT_FORWARD_IF_ERROR(plan_shape(l, in, i, labels, err));
        if (l->spec.kind == DT_LAYER_RESIDUAL) {
            l->end = i + l->spec.block;
            const int limit = n_open ? L[open[n_open - 1]].end : n - 1;
            if (l->spec.block < 1 || l->end > limit)
                return dt_error_set(err, DT_ERR_CONFIG,
                                    "%s (residual): a branch of %d layers does not fit in "
                                    "the list",
                                    where(at, sizeof at, labels, i), l->spec.block);
            open[n_open++] = i;
        }
        if (l->spec.kind == DT_LAYER_DENSE || l->spec.kind == DT_LAYER_CONV ||
            l->spec.kind == DT_LAYER_LAYERNORM || l->spec.kind == DT_LAYER_BATCHNORM) {
            l->param = *n_params;
            *n_params += 2;
            params_below = true;
        }
        /* a ReLU in place, but never on the data (the batch buffer is the caller's) nor on a
         * residual block's input (its shortcut reads it) */
        const bool opens = i > 0 && L[i - 1].spec.kind == DT_LAYER_RESIDUAL;
        l->alias = l->spec.kind == DT_LAYER_FLATTEN || l->spec.kind == DT_LAYER_RESIDUAL ||
                   (l->spec.kind == DT_LAYER_RELU && i > 0 && !opens);
        in = l->out;
        while (n_open && L[open[n_open - 1]].end == i) { /* the blocks this entry ends */
            struct net_layer *r = &L[open[--n_open]];
            l->ends_block = true;
            DT_FORWARD_IF_ERROR(plan_close(r, open[n_open], l, in, n_params, &n_proj, labels, err));
            params_below = params_below || r->param >= 0;
        }
    }
    const struct net_layer *last = &L[n - 1];
    if (last->spec.kind != DT_LAYER_DENSE || last->spec.units != n_classes)
        return dt_error_set(err, DT_ERR_CONFIG,
                            "%s (%s): the last layer must be a dense layer of %lld units, "
                            "one per class",
                            where(at, sizeof at, labels, n - 1),
                            dt_layer_kind_names[last->spec.kind], (long long)n_classes);
    return DT_OK;
}

enum dt_status dt_net_check(int64_t H, int64_t W, int64_t C, const struct dt_layer *layers, int n,
                            int64_t n_classes, const char *const *labels, struct dt_error *err)
{
    struct net_layer *L = dt_xcalloc((size_t)(n > 0 ? n : 1), sizeof *L);
    int n_params = 0;
    const enum dt_status st =
        plan(L, layers, n, (struct dims){H, W, C}, n_classes, &n_params, labels, err);
    free(L);
    return st;
}

static struct dt_conv2d_shape conv_at(const struct net_layer *l, int64_t B)
{
    struct dt_conv2d_shape s = l->conv;
    s.B = B;
    return s;
}

static struct dt_pool2d_shape pool_at(const struct net_layer *l, int64_t B)
{
    struct dt_pool2d_shape s = l->pool;
    s.B = B;
    return s;
}

/* ---- dropout: a site a dropout layer, masks as the GPT's (determinism/dropout.h) ----- */

static enum dt_dropout_mode drop_mode(const struct dt_policy *pol, bool backward)
{
    if (dt_rng_lfsr(pol)) return backward ? DT_DROPOUT_LFSR_BACKWARD : DT_DROPOUT_LFSR_FORWARD;
    if (dt_rng_stored(pol)) return backward ? DT_DROPOUT_STORED : DT_DROPOUT_KEEP;
    return DT_DROPOUT_PHILOX;
}

/* Dropout layer l's mask from src (B examples of its input) into dst: forwards on its input,
 * backwards on its output's gradient. A lane per example, its global row m->row0 + b. */
static enum dt_status drop_site(struct dt_model *m, struct net_layer *l, float *dst,
                                const float *src, int64_t B, bool backward,
                                const struct dt_policy *pol)
{
    struct net *n = m->impl;
    const struct dt_dropout_site s = {
        .mode = drop_mode(pol, backward),
        .stream = dt_dropout_stream(m->seed, (uint32_t)m->step, (uint32_t)l->number, m->member),
        .row0 = m->row0,
        .threshold = l->threshold,
        .scale = l->scale};
    const bool bytes = s.mode == DT_DROPOUT_KEEP || s.mode == DT_DROPOUT_STORED;
    const bool walk = s.mode == DT_DROPOUT_LFSR_FORWARD || s.mode == DT_DROPOUT_LFSR_BACKWARD ||
                      s.mode == DT_DROPOUT_KEEP;
    if (bytes && !n->keep) n->keep = dt_backend_alloc(m->be, (size_t)(n->sites * n->keep_per_site));
    uint8_t *keep = bytes ? n->keep + (int64_t)l->number * n->keep_per_site : NULL;
    return dt_dropout(m->be, dst, src, keep, walk ? n->lanes : NULL, B, count(l->in), &s, pol);
}

/* rng: lfsr and stored: the lanes of this step's examples at their seed states. */
static enum dt_status drop_seed(struct dt_model *m, int64_t B, const struct dt_policy *pol)
{
    struct net *n = m->impl;
    if (!n->sites || !(dt_rng_lfsr(pol) || dt_rng_stored(pol))) return DT_OK;
    if (!n->lanes) {
        n->lanes = dt_backend_alloc(m->be, (size_t)m->max_batch * sizeof *n->lanes);
        n->lanes_host = dt_xmalloc((size_t)m->max_batch * sizeof *n->lanes_host);
    }
    return dt_dropout_seed(m->be, n->lanes, B, m->row0, m->seed, (uint32_t)m->step, m->member, pol);
}

/* ---- batch normalisation: a group a shard (nets/model.h, stats_per_shard) --------------- */

/* Rows [*r0, *r0 + *rows) of local shard k (the rows one shard when none are set), in
 * examples. */
static void shard_rows(const struct dt_model *m, int64_t k, int64_t B, int64_t *r0, int64_t *rows)
{
    *r0 = m->shard_count ? m->shard_row[k] : 0;
    *rows = m->shard_count ? m->shard_row[k + 1] - m->shard_row[k] : B;
}

static int64_t shards_here(const struct dt_model *m) { return m->shard_count ? m->shard_count : 1; }

/* Training: each shard normalised by its own statistics, kept in m->stats; evaluation: by
 * the running ones. */
static enum dt_status batchnorm_forward(struct dt_model *m, struct net_layer *l, const float *x,
                                        int64_t B, const struct dt_policy *pol)
{
    struct net *n = m->impl;
    const struct dt_param *w = &m->params[l->param], *r = &m->params[m->n_params + l->buffer];
    const int64_t C = l->in.C, hw = l->in.H * l->in.W;
    if (!n->training)
        return dt_batchnorm_inference(m->be, l->y, x, r->w, r[1].w, w->w, w[1].w, B * hw, C,
                                      DT_BN_EPS, pol);
    for (int64_t k = 0; k < shards_here(m); k++) {
        int64_t r0, rows;
        shard_rows(m, k, B, &r0, &rows);
        float *stat = m->stats + k * m->stats_per_shard + l->stat;
        DT_MODEL_FWD(m, w->name,
                     dt_batchnorm_forward(m->be, l->y + r0 * hw * C, stat, stat + C,
                                          x + r0 * hw * C, w->w, w[1].w, rows * hw, C, DT_BN_EPS,
                                          pol));
    }
    return DT_OK;
}

/* Each shard's input gradient through its statistics; gamma's and beta's over the batch by
 * the bias reductions (one partial per shard under reduction: exact). */
static enum dt_status batchnorm_backward(struct dt_model *m, struct net_layer *l, const float *x,
                                         const float *dy, int64_t B, const struct dt_policy *pol)
{
    struct dt_param *w = &m->params[l->param];
    const int64_t C = l->in.C, hw = l->in.H * l->in.W;
    for (int64_t k = 0; k < shards_here(m); k++) {
        int64_t r0, rows;
        shard_rows(m, k, B, &r0, &rows);
        const float *stat = m->stats + k * m->stats_per_shard + l->stat;
        const int64_t at = r0 * hw * C;
        DT_MODEL_GRAD(m, w->name, true,
                      dt_batchnorm_backward(m->be, l->dx + at, l->gx + at, dy + at, x + at, stat,
                                            stat + C, w->w, rows * hw, C, DT_BN_EPS, pol));
    }
    DT_MODEL_GRAD(m, w->name, false, dt_bias_backward(m->be, w->g, l->gx, B * hw, C, pol));
    DT_MODEL_GRAD(m, w[1].name, false, dt_bias_backward(m->be, w[1].g, dy, B * hw, C, pol));
    return DT_OK;
}

/* After a training step's combination: every batchnorm layer's running statistics moved by
 * every shard's, in shard order (stats: m->shards_total shards). */
static enum dt_status net_update_buffers(struct dt_model *m, const float *stats,
                                         const struct dt_policy *pol)
{
    struct net *n = m->impl;
    for (int i = 0; i < n->n; i++) {
        const struct net_layer *l = &n->layer[i];
        if (l->spec.kind != DT_LAYER_BATCHNORM) continue;
        struct dt_param *r = &m->params[m->n_params + l->buffer];
        const int64_t C = l->in.C;
        DT_FORWARD_IF_ERROR(dt_batchnorm_running(
            m->be, r->w, r[1].w, stats + l->stat, stats + l->stat + C, m->shards_total,
            m->stats_per_shard, C, m->batch_total, l->in.H * l->in.W, DT_BN_MOMENTUM, pol));
    }
    return DT_OK;
}

/* Layer l's forward from x into l->y (the last layer's into the logits). */
static enum dt_status layer_forward(struct dt_model *m, struct net_layer *l, const float *x,
                                    int64_t B, const struct dt_policy *pol)
{
    const struct dt_param *w = l->param >= 0 ? &m->params[l->param] : NULL;
    switch (l->spec.kind) {
    case DT_LAYER_DENSE:
        DT_MODEL_FWD(
            m, w->name,
            dt_dense_forward(m->be, l->y, x, w->w, w[1].w, B, count(l->in), count(l->out), pol));
        return DT_OK;
    case DT_LAYER_CONV: {
        const struct dt_conv2d_shape s = conv_at(l, B);
        DT_MODEL_FWD(m, w->name, dt_conv2d_forward(m->be, l->y, x, w->w, w[1].w, &s, pol));
        return DT_OK;
    }
    case DT_LAYER_MAXPOOL: {
        const struct dt_pool2d_shape s = pool_at(l, B);
        return dt_maxpool2d_forward(m->be, l->y, l->argmax, x, &s, pol);
    }
    case DT_LAYER_AVGPOOL: {
        const struct dt_pool2d_shape s = pool_at(l, B);
        return dt_avgpool2d_forward(m->be, l->y, x, &s, pol);
    }
    case DT_LAYER_RELU: return dt_relu_forward(m->be, l->y, x, B * count(l->in), pol);
    case DT_LAYER_GELU: return dt_gelu_forward(m->be, l->y, x, B * count(l->in), pol);
    case DT_LAYER_GLOBAL_AVGPOOL:
        return dt_global_avgpool_forward(m->be, l->y, x, B, l->in.H * l->in.W, l->in.C, pol);
    case DT_LAYER_DROPOUT: return drop_site(m, l, l->y, x, B, false, pol);
    case DT_LAYER_LAYERNORM:
        return dt_layernorm_forward(m->be, l->y, l->mean, l->rstd, x, w->w, w[1].w,
                                    B * l->in.H * l->in.W, l->in.C, pol);
    case DT_LAYER_BATCHNORM: return batchnorm_forward(m, l, x, B, pol);
    case DT_LAYER_FLATTEN: return DT_OK;
    case DT_LAYER_RESIDUAL: /* net_forward's own */
    case DT_LAYER_KIND_COUNT: break;
    }
    return DT_ERR_INTERNAL;
}

/* Residual r's block ends with `last`: its shortcut added into the branch's output (a 1 x 1
 * projection first when it has one). */
static enum dt_status residual_close(struct dt_model *m, struct net_layer *r,
                                     struct net_layer *last, int64_t B, const struct dt_policy *pol)
{
    const float *shortcut = r->x_in;
    if (r->param >= 0) {
        const struct dt_param *w = &m->params[r->param];
        const struct dt_conv2d_shape s = conv_at(r, B);
        DT_MODEL_FWD(m, w->name,
                     dt_conv2d_forward(m->be, r->proj_y, r->x_in, w->w, w[1].w, &s, pol));
        shortcut = r->proj_y;
    }
    return dt_add(m->be, last->y, shortcut, B * count(r->out), pol);
}

static enum dt_status net_forward(struct dt_model *m, int64_t B, struct dt_pass *p,
                                  const struct dt_policy *pol)
{
    struct net *n = m->impl;
    const float *x = m->x;
    int open[DT_NET_MAX_LAYERS], n_open = 0;
    n->training = p && p->training;
    if (n->training) DT_FORWARD_IF_ERROR(drop_seed(m, B, pol));
    for (int i = 0; i < n->n; i++) {
        struct net_layer *l = &n->layer[i];
        if (l->alias) l->y = (float *)x; /* relu in place, flatten a view, a block's input */
        const bool skip = l->spec.kind == DT_LAYER_DROPOUT && !n->training;
        if (l->spec.kind == DT_LAYER_DROPOUT) /* an evaluation's is the identity */
            l->y = skip ? (float *)x : l->own;
        if (i + 1 == n->n) l->y = m->logits;
        if (l->spec.kind == DT_LAYER_RESIDUAL) {
            l->x_in = x;
            open[n_open++] = i;
        } else if (!skip) {
            dt_backend_set_layer(m->be, l->name); /* explain's names */
            DT_FORWARD_IF_ERROR(layer_forward(m, l, x, B, pol));
        }
        dt_backend_set_layer(m->be, NULL); /* a shortcut: named by its projection */
        while (n_open && n->layer[open[n_open - 1]].end == i) /* innermost first */
            DT_FORWARD_IF_ERROR(residual_close(m, &n->layer[open[--n_open]], l, B, pol));
        x = l->y;
    }
    return DT_OK;
}

/* Layer l's backward from dy (the gradient w.r.t. its output) on input x: its parameters'
 * gradients, and when needed its input's into *dx_out (in place for a ReLU, the same
 * buffer for a flatten). */
static enum dt_status layer_backward(struct dt_model *m, struct net_layer *l, const float *x,
                                     float *dy, int64_t B, const struct dt_policy *pol,
                                     float **dx_out)
{
    struct dt_param *w = l->param >= 0 ? &m->params[l->param] : NULL;
    const int64_t in = count(l->in), out = count(l->out);
    *dx_out = l->alias ? dy : l->dx;
    switch (l->spec.kind) {
    case DT_LAYER_DENSE:
        DT_MODEL_GRAD(m, w->name, false,
                      dt_dense_backward_weight(m->be, w->g, x, dy, B, in, out, pol));
        DT_MODEL_GRAD(m, w[1].name, false, dt_bias_backward(m->be, w[1].g, dy, B, out, pol));
        if (l->grad_in)
            DT_MODEL_GRAD(m, w->name, true,
                          dt_dense_backward_data(m->be, l->dx, dy, w->w, B, in, out, pol));
        return DT_OK;
    case DT_LAYER_CONV: {
        const struct dt_conv2d_shape s = conv_at(l, B);
        DT_MODEL_GRAD(m, w->name, false, dt_conv2d_backward_weight(m->be, w->g, x, dy, &s, pol));
        DT_MODEL_GRAD(m, w[1].name, false,
                      dt_bias_backward(m->be, w[1].g, dy, B * s.OH * s.OW, s.K_out, pol));
        if (l->grad_in)
            DT_MODEL_GRAD(m, w->name, true,
                          dt_conv2d_backward_data(m->be, l->dx, dy, w->w, &s, pol));
        return DT_OK;
    }
    case DT_LAYER_MAXPOOL: {
        const struct dt_pool2d_shape s = pool_at(l, B);
        if (l->grad_in)
            DT_MODEL_GRAD(m, l->name, true,
                          dt_maxpool2d_backward(m->be, l->dx, dy, x, l->y, l->argmax, &s, pol));
        return DT_OK;
    }
    case DT_LAYER_AVGPOOL: {
        const struct dt_pool2d_shape s = pool_at(l, B);
        if (l->grad_in)
            DT_MODEL_GRAD(m, l->name, true, dt_avgpool2d_backward(m->be, l->dx, dy, &s, pol));
        return DT_OK;
    }
    case DT_LAYER_RELU: /* the output's sign is the input's */
        if (!l->grad_in) return DT_OK;
        return l->alias ? dt_relu_backward(m->be, dy, dy, l->y, B * in, pol)
                        : dt_relu_backward(m->be, l->dx, dy, l->y, B * in, pol);
    case DT_LAYER_GELU: /* its input kept: the derivative reads it */
        if (!l->grad_in) return DT_OK;
        return dt_gelu_backward(m->be, l->dx, dy, x, B * in, pol);
    case DT_LAYER_GLOBAL_AVGPOOL:
        if (!l->grad_in) return DT_OK;
        return dt_global_avgpool_backward(m->be, l->dx, dy, B, l->in.H * l->in.W, l->in.C, pol);
    case DT_LAYER_DROPOUT: /* the same mask on the gradient (lfsr: the lanes walked back) */
        return drop_site(m, l, l->dx, dy, B, true, pol);
    case DT_LAYER_LAYERNORM: { /* the op gives the input's gradient and gamma's terms at once */
        const int64_t rows = B * l->in.H * l->in.W;
        DT_MODEL_GRAD(m, w->name, true,
                      dt_layernorm_backward(m->be, l->dx, l->gx, dy, x, l->mean, l->rstd, w->w,
                                            rows, l->in.C, false, pol));
        DT_MODEL_GRAD(m, w->name, false, dt_bias_backward(m->be, w->g, l->gx, rows, l->in.C, pol));
        DT_MODEL_GRAD(m, w[1].name, false, dt_bias_backward(m->be, w[1].g, dy, rows, l->in.C, pol));
        return DT_OK;
    }
    case DT_LAYER_BATCHNORM: return batchnorm_backward(m, l, x, dy, B, pol);
    case DT_LAYER_FLATTEN: return DT_OK;
    case DT_LAYER_RESIDUAL: /* net_backward's own */
    case DT_LAYER_KIND_COUNT: break;
    }
    return DT_ERR_INTERNAL;
}

/* Backward through residual r's end, dy the gradient w.r.t. the block's output: kept for
 * the identity shortcut; a projection's parameter gradients and input gradient now. */
static enum dt_status residual_reopen(struct dt_model *m, struct net_layer *r, const float *dy,
                                      int64_t B, const struct dt_policy *pol)
{
    r->dy_out = dy;
    if (r->param < 0) return DT_OK;
    struct dt_param *w = &m->params[r->param];
    const struct dt_conv2d_shape s = conv_at(r, B);
    DT_MODEL_GRAD(m, w->name, false, dt_conv2d_backward_weight(m->be, w->g, r->x_in, dy, &s, pol));
    DT_MODEL_GRAD(m, w[1].name, false,
                  dt_bias_backward(m->be, w[1].g, dy, B * s.OH * s.OW, s.K_out, pol));
    if (r->grad_in)
        DT_MODEL_GRAD(m, w->name, true,
                      dt_conv2d_backward_data(m->be, r->proj_dx, dy, w->w, &s, pol));
    return DT_OK;
}

static enum dt_status net_backward(struct dt_model *m, int64_t B, const struct dt_pass *p,
                                   const struct dt_policy *pol)
{
    (void)p;
    struct net *n = m->impl;
    float *dy = m->dlogits;
    int i = n->n - 1;
    for (; i >= 0; i--) {
        struct net_layer *l = &n->layer[i];
        for (int r = 0; l->ends_block && r < i; r++) /* the blocks it ends, outermost first */
            if (n->layer[r].spec.kind == DT_LAYER_RESIDUAL && n->layer[r].end == i)
                DT_FORWARD_IF_ERROR(residual_reopen(m, &n->layer[r], dy, B, pol));
        if (l->spec.kind == DT_LAYER_RESIDUAL) { /* its branch done: dy is the branch's part */
            if (!l->grad_in) break;
            DT_FORWARD_IF_ERROR(
                dt_add(m->be, dy, l->param >= 0 ? l->proj_dx : l->dy_out, B * count(l->in), pol));
            continue;
        }
        const float *x = i > 0 ? n->layer[i - 1].y : m->x;
        float *dx = NULL;
        dt_backend_set_layer(m->be, l->name);
        const enum dt_status st = layer_backward(m, l, x, dy, B, pol, &dx);
        dt_backend_set_layer(m->be, NULL);
        DT_FORWARD_IF_ERROR(st);
        if (!l->grad_in) break; /* nothing below needs a gradient */
        dy = dx;
    }
    /* rng: lfsr -- the dropout sites below (no gradient wanted there) walk their lanes back
     * all the same, and on checked steps every lane must be at its seed state again */
    if (!n->sites || !dt_rng_lfsr(pol)) return DT_OK;
    for (i--; i >= 0; i--)
        if (n->layer[i].spec.kind == DT_LAYER_DROPOUT)
            DT_FORWARD_IF_ERROR(
                drop_site(m, &n->layer[i], n->layer[i].dx, n->layer[i].dx, B, true, pol));
    if (m->step % n->lfsr_check_every != 0) return DT_OK;
    return dt_dropout_lanes_check(m, n->lanes, n->lanes_host, B, m->row0);
}

void dt_net_set_lfsr_check_every(struct dt_model *m, int64_t every)
{
    struct net *n = m->impl;
    n->lfsr_check_every = every > 0 ? every : 1;
}

static void net_destroy(struct dt_model *m)
{
    struct net *n = m->impl;
    if (!n) return;
    for (int i = 0; i < n->n; i++) {
        struct net_layer *l = &n->layer[i];
        if (!l->alias && l->spec.kind != DT_LAYER_DROPOUT && i + 1 < n->n) /* dropout: own */
            dt_backend_free(m->be, l->y);
        dt_backend_free(m->be, l->dx);
        dt_backend_free(m->be, l->argmax);
        dt_backend_free(m->be, l->proj_y);
        dt_backend_free(m->be, l->proj_dx);
        dt_backend_free(m->be, l->own);
        dt_backend_free(m->be, l->mean);
        dt_backend_free(m->be, l->rstd);
        dt_backend_free(m->be, l->gx);
    }
    dt_backend_free(m->be, n->lanes);
    dt_backend_free(m->be, n->keep);
    free(n->lanes_host);
    free(n->layer);
    free(n);
    m->impl = NULL;
}

static const struct dt_model_ops net_ops = {
    .kind = "net",
    .forward = net_forward,
    .backward = net_backward,
    .destroy = net_destroy,
    .update_buffers = net_update_buffers,
};

static float *alloc_floats(struct dt_backend *be, int64_t n)
{
    return dt_backend_alloc(be, (size_t)n * sizeof(float));
}

/* Layer l's parameters (weight at l->param, bias after it) and buffers. */
static void layer_setup(struct dt_model *m, struct net_layer *l, bool last, int64_t max_batch)
{
    struct dt_backend *be = m->be;
    char name[DT_PARAM_NAME];
    const char *kind = dt_layer_kind_names[l->spec.kind];
    if (l->spec.kind == DT_LAYER_DENSE) {
        const int64_t shape[2] = {count(l->in), l->spec.units};
        snprintf(name, sizeof name, "%s%d.weight", kind, l->number);
        dt_model_param(m, l->param, name, 2, shape, shape[0]);
        snprintf(name, sizeof name, "%s%d.bias", kind, l->number);
        dt_model_param(m, l->param + 1, name, 1, &shape[1], 0);
    } else if (l->spec.kind == DT_LAYER_CONV) {
        const struct dt_conv2d_shape *c = &l->conv;
        const int64_t shape[4] = {c->KH, c->KW, c->C, c->K_out};
        snprintf(name, sizeof name, "%s%d.weight", kind, l->number);
        dt_model_param(m, l->param, name, 4, shape, c->KH * c->KW * c->C);
        snprintf(name, sizeof name, "%s%d.bias", kind, l->number);
        dt_model_param(m, l->param + 1, name, 1, &shape[3], 0);
    }
    if (l->spec.kind == DT_LAYER_DROPOUT) { /* its output, and an input gradient always: rng lfsr
                                              walks its lanes back even where none is wanted */
        struct net *n = m->impl;
        dt_dropout_rate(l->spec.rate, &l->threshold, &l->scale);
        l->own = alloc_floats(be, max_batch * count(l->in));
        l->dx = alloc_floats(be, max_batch * count(l->in));
        if (max_batch * count(l->in) > n->keep_per_site)
            n->keep_per_site = max_batch * count(l->in);
    }
    if (l->spec.kind == DT_LAYER_BATCHNORM) { /* gamma (initially 1), beta; running stats */
        const int64_t C = l->in.C;
        snprintf(name, sizeof name, "%s%d.weight", kind, l->number);
        dt_model_param(m, l->param, name, 1, &C, 0);
        m->params[l->param].init_value = 1.0f;
        snprintf(name, sizeof name, "%s%d.bias", kind, l->number);
        dt_model_param(m, l->param + 1, name, 1, &C, 0);
        snprintf(name, sizeof name, "%s%d.running_mean", kind, l->number);
        dt_model_buffer(m, l->buffer, name, C, 0.0f);
        snprintf(name, sizeof name, "%s%d.running_var", kind, l->number);
        dt_model_buffer(m, l->buffer + 1, name, C, 1.0f);
        l->gx = alloc_floats(be, max_batch * count(l->in));
        l->dx = alloc_floats(be, max_batch * count(l->in)); /* the op writes it always */
    }
    if (l->spec.kind == DT_LAYER_LAYERNORM) { /* gamma (initially 1) and beta, per channel */
        const int64_t C = l->in.C, rows = max_batch * l->in.H * l->in.W;
        snprintf(name, sizeof name, "%s%d.weight", kind, l->number);
        dt_model_param(m, l->param, name, 1, &C, 0);
        m->params[l->param].init_value = 1.0f;
        snprintf(name, sizeof name, "%s%d.bias", kind, l->number);
        dt_model_param(m, l->param + 1, name, 1, &C, 0);
        l->mean = alloc_floats(be, rows);
        l->rstd = alloc_floats(be, rows);
        l->gx = alloc_floats(be, rows * C);
        l->dx = alloc_floats(be, rows * C); /* the op writes it even when nothing reads it */
    }
    if (l->spec.kind == DT_LAYER_RESIDUAL && l->param >= 0) { /* its projection */
        const struct dt_conv2d_shape *c = &l->conv;
        const int64_t shape[4] = {1, 1, c->C, c->K_out};
        snprintf(name, sizeof name, "proj%d.weight", l->number);
        dt_model_param(m, l->param, name, 4, shape, c->C);
        snprintf(name, sizeof name, "proj%d.bias", l->number);
        dt_model_param(m, l->param + 1, name, 1, &shape[3], 0);
        l->proj_y = alloc_floats(be, max_batch * count(l->out));
        if (l->grad_in) l->proj_dx = alloc_floats(be, max_batch * count(l->in));
    }
    if (!l->alias && !last && l->spec.kind != DT_LAYER_DROPOUT) /* dropout: y is own or x */
        l->y = alloc_floats(be, max_batch * count(l->out));
    if (l->grad_in && !l->alias && l->spec.kind != DT_LAYER_FLATTEN && !l->dx)
        l->dx = alloc_floats(be, max_batch * count(l->in));
    if (l->spec.kind == DT_LAYER_MAXPOOL)
        l->argmax = dt_backend_alloc(be, (size_t)(max_batch * count(l->out)) * sizeof(int32_t));
}

enum dt_status dt_net_create(struct dt_model **out, struct dt_backend *be, int64_t H, int64_t W,
                             int64_t C, const struct dt_layer *layers, int n, int64_t n_classes,
                             int64_t max_batch, struct dt_error *err)
{
    *out = NULL;
    struct net *t = dt_xcalloc(1, sizeof *t);
    t->layer = dt_xcalloc((size_t)(n > 0 ? n : 1), sizeof *t->layer);
    t->n = n;
    enum dt_status st =
        plan(t->layer, layers, n, (struct dims){H, W, C}, n_classes, &t->n_params, NULL, err);
    if (st != DT_OK) {
        free(t->layer);
        free(t);
        return st;
    }
    struct dt_model *m = dt_xcalloc(1, sizeof *m);
    dt_model_setup(m, &net_ops, be, t->n_params, H * W * C, n_classes, max_batch);
    m->impl = t;
    t->lfsr_check_every = 1;
    int buffers = 0; /* batchnorm: two buffers and 2 C statistics a shard each */
    for (int i = 0; i < n; i++)
        if (t->layer[i].spec.kind == DT_LAYER_BATCHNORM) {
            t->layer[i].buffer = buffers;
            buffers += 2;
            t->layer[i].stat = m->stats_per_shard;
            m->stats_per_shard += 2 * t->layer[i].in.C;
        }
    dt_model_buffers(m, buffers);
    if (m->stats_per_shard) { /* room for one shard: a forward outside a step */
        m->stats = dt_backend_alloc(be, (size_t)m->stats_per_shard * sizeof(float));
        m->stats_room = 1;
    }
    for (int i = 0; i < n; i++) {
        if (t->layer[i].spec.kind == DT_LAYER_DROPOUT) t->sites++;
        layer_setup(m, &t->layer[i], i + 1 == n, max_batch);
    }
    *out = m;
    return DT_OK;
}

/* ---- the registry row (nets/models.h) -------------------------------------------------- */

/* Parameters from the plan; per example every layer's output and its input's gradient, and
 * a convolution's im2col columns (kernel^2 x C per output pixel). */
static struct dt_model_size net_size(const struct dt_model_spec *s)
{
    struct net_layer *L = dt_xcalloc((size_t)(s->n_layers > 0 ? s->n_layers : 1), sizeof *L);
    int n_params = 0;
    double params = 0, acts = (double)(s->height * s->width * s->channels);
    if (plan(L, s->layers, s->n_layers, (struct dims){s->height, s->width, s->channels},
             s->n_classes, &n_params, NULL, NULL) == DT_OK)
        for (int i = 0; i < s->n_layers; i++) {
            const struct net_layer *l = &L[i];
            const double in = (double)count(l->in), out = (double)count(l->out);
            if (l->spec.kind == DT_LAYER_DENSE) params += in * out + out;
            if (l->spec.kind == DT_LAYER_BATCHNORM) /* gamma, beta; gamma's terms */
                params += 2.0 * (double)l->in.C, acts += in;
            if (l->spec.kind == DT_LAYER_LAYERNORM) { /* gamma, beta; gamma's terms, stats */
                params += 2.0 * (double)l->in.C;
                acts += in + 2.0 * (double)(l->in.H * l->in.W);
            }
            if (l->spec.kind == DT_LAYER_RESIDUAL && l->param >= 0) /* a projection */
                params += (double)(l->conv.C * l->conv.K_out + l->conv.K_out),
                    acts += out + (l->grad_in ? in : 0);
            if (l->spec.kind == DT_LAYER_CONV) {
                const double k = (double)(l->conv.KH * l->conv.KW * l->conv.C);
                params += k * (double)l->conv.K_out + (double)l->conv.K_out;
                acts += k * (double)(l->conv.OH * l->conv.OW);
            }
            if (!l->alias) acts += out + (l->grad_in ? in : 0);
        }
    free(L);
    return (struct dt_model_size){.params = params,
                                  .extra_per_param = 0,
                                  .acts_per_example = acts,
                                  .stored_per_param_per_sample = 0};
}

static enum dt_status net_kind_create(struct dt_model **out, struct dt_backend *be,
                                      const struct dt_model_spec *s, struct dt_error *err)
{
    const enum dt_status st = dt_net_create(out, be, s->height, s->width, s->channels, s->layers,
                                            s->n_layers, s->n_classes, s->batch, err);
    if (st == DT_OK) dt_net_set_lfsr_check_every(*out, s->gpt.lfsr_check_every);
    return st;
}

const struct dt_model_kind_info dt_net_kind = {.name = "net",
                                               .keys = "model.network model.lfsr_check_every",
                                               .extra_control = "conv_algo",
                                               .create = net_kind_create,
                                               .size = net_size};
