/* Generic model plumbing shared by every model kind: parameters, initialisation, the SGD
 * training step and evaluation. Model kinds (nets/mlp.c, ...) supply forward/backward. */
#include "nets/model.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "determinism/dropout.h"
#include "determinism/streams.h"

void dt_model_setup(struct dt_model *m, const struct dt_model_ops *ops, struct dt_backend *be,
                    int n_params, int64_t in_dim, int64_t n_classes, int64_t max_batch)
{
    memset(m, 0, sizeof *m);
    m->ops = ops;
    m->be = be;
    m->n_params = m->n_tensors = n_params;
    m->params = dt_xcalloc((size_t)n_params, sizeof *m->params);
    m->in_dim = in_dim;
    m->n_classes = n_classes;
    m->max_batch = max_batch;
    m->passes = 1;
    m->x = dt_backend_alloc(be, (size_t)(max_batch * in_dim) * sizeof(float));
    m->labels = dt_backend_alloc(be, (size_t)max_batch * sizeof(int32_t));
    size_t lb = (size_t)(max_batch * n_classes) * sizeof(float);
    m->logits = dt_backend_alloc(be, lb);
    m->probs = dt_backend_alloc(be, lb);
    m->dlogits = dt_backend_alloc(be, lb);
}

void dt_model_param(struct dt_model *m, int i, const char *name, int ndim, const int64_t *shape,
                    int64_t fan_in)
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

void dt_model_buffers(struct dt_model *m, int n)
{
    DT_ASSERT(n >= 0 && m->n_tensors == m->n_params);
    m->params = dt_xrealloc(m->params, (size_t)(m->n_params + n) * sizeof *m->params);
    memset(m->params + m->n_params, 0, (size_t)n * sizeof *m->params);
    m->n_tensors = m->n_params + n;
}

void dt_model_buffer(struct dt_model *m, int i, const char *name, int64_t C, float init_value)
{
    DT_ASSERT(i >= 0 && m->n_params + i < m->n_tensors);
    struct dt_param *p = &m->params[m->n_params + i];
    snprintf(p->name, sizeof p->name, "%s", name);
    p->ndim = 1;
    p->shape[0] = p->n = C;
    p->init_value = init_value;
    p->w = dt_backend_alloc(m->be, (size_t)C * sizeof(float));
    p->v = dt_backend_alloc(m->be, (size_t)C * sizeof(float)); /* zeros: a state like the rest */
}

void dt_model_set_shards(struct dt_model *m, int64_t B, int64_t S, int64_t s0, int64_t s1)
{
    m->shard_count = 0;
    if (S == 0) return;
    DT_ASSERT(S >= 1 && S <= B && 0 <= s0 && s0 < s1 && s1 <= S);
    m->shard_count = s1 - s0;
    m->shard0 = s0;
    m->shards_total = S;
    m->batch_total = B;
    if (m->shard_row_room < s1 - s0 + 1) { /* grown once, not every step */
        m->shard_row = dt_xrealloc(m->shard_row, (size_t)(s1 - s0 + 1) * sizeof *m->shard_row);
        m->shard_row_room = s1 - s0 + 1;
    }
    const int64_t b0 = s0 * B / S; /* dt_shard_row's cut (B * S < 2^63) */
    for (int64_t s = s0; s <= s1; s++) m->shard_row[s - s0] = s * B / S - b0;
    if (m->stats_per_shard && m->stats_room < s1 - s0) {
        dt_backend_free(m->be, m->stats);
        m->stats =
            dt_backend_alloc(m->be, (size_t)((s1 - s0) * m->stats_per_shard) * sizeof(float));
        m->stats_room = s1 - s0;
    }
}

enum dt_status dt_model_grad_status(struct dt_model *m, const char *tensor, bool input,
                                    enum dt_status st)
{
    if (st == DT_OK || m->err.status != DT_OK) return st;
    struct dt_error detail;
    const char *what = dt_backend_take_op_error(m->be, &detail) ? detail.msg
                       : st == DT_ERR_NUMERIC ? "a NaN/Inf term or a fixed-point sum beyond the "
                                                "float range"
                                              : dt_status_str(st);
    dt_error_set(&m->err, st, "%s %sgradient: %s at step %" PRId64, tensor, input ? "input " : "",
                 what, m->step);
    return st;
}

enum dt_status dt_model_fwd_status(struct dt_model *m, const char *tensor, enum dt_status st)
{
    if (st == DT_OK || m->err.status != DT_OK) return st;
    struct dt_error detail;
    const char *what = dt_backend_take_op_error(m->be, &detail) ? detail.msg : dt_status_str(st);
    dt_error_set(&m->err, st, "%s forward: %s at step %" PRId64, tensor, what, m->step);
    return st;
}

void dt_model_state_save(struct dt_model_state *st, const struct dt_model *m)
{
    if (!st->w) {
        st->n = m->n_tensors;
        st->w = dt_xcalloc((size_t)st->n, sizeof *st->w);
        st->v = dt_xcalloc((size_t)st->n, sizeof *st->v);
        st->s = dt_xcalloc((size_t)st->n, sizeof *st->s);
        for (int i = 0; i < st->n; i++) {
            st->w[i] = dt_xmalloc((size_t)m->params[i].n * sizeof(float));
            st->v[i] = dt_xmalloc((size_t)m->params[i].n * sizeof(float));
        }
    }
    DT_ASSERT(st->n == m->n_tensors);
    for (int i = 0; i < st->n; i++) {
        const size_t bytes = (size_t)m->params[i].n * sizeof(float);
        dt_backend_download(m->be, st->w[i], m->params[i].w, bytes);
        dt_backend_download(m->be, st->v[i], m->params[i].v, bytes);
        if (m->params[i].s) {
            if (!st->s[i]) st->s[i] = dt_xmalloc(bytes);
            dt_backend_download(m->be, st->s[i], m->params[i].s, bytes);
        }
    }
    st->step = m->step;
}

void dt_model_state_load(const struct dt_model_state *st, struct dt_model *m)
{
    DT_ASSERT(st->w && st->n == m->n_tensors);
    for (int i = 0; i < st->n; i++) {
        const size_t bytes = (size_t)m->params[i].n * sizeof(float);
        dt_backend_upload(m->be, m->params[i].w, st->w[i], bytes);
        dt_backend_upload(m->be, m->params[i].v, st->v[i], bytes);
        if (st->s[i]) {
            if (!m->params[i].s) m->params[i].s = dt_backend_alloc(m->be, bytes);
            dt_backend_upload(m->be, m->params[i].s, st->s[i], bytes);
        } else if (m->params[i].s) { /* a state from before AdamW's first step: none yet */
            dt_backend_free(m->be, m->params[i].s);
            m->params[i].s = NULL;
        }
    }
    m->step = st->step;
}

void dt_model_state_free(struct dt_model_state *st)
{
    for (int i = 0; st->w && i < st->n; i++) {
        free(st->w[i]);
        free(st->v[i]);
        if (st->s) free(st->s[i]);
    }
    free(st->w);
    free(st->v);
    free(st->s);
    memset(st, 0, sizeof *st);
}

void dt_model_destroy(struct dt_model *m)
{
    if (!m) return;
    if (m->ops && m->ops->destroy) m->ops->destroy(m);
    for (int i = 0; i < m->n_tensors; i++) {
        dt_backend_free(m->be, m->params[i].w);
        if (!m->grad_pack && m->params[i].g) dt_backend_free(m->be, m->params[i].g);
        dt_backend_free(m->be, m->params[i].v);
        dt_backend_free(m->be, m->params[i].s);
    }
    if (m->grad_pack && !m->grad_pack_lent) dt_backend_free(m->be, m->grad_pack);
    dt_backend_free(m->be, m->norm_sq);
    dt_backend_free(m->be, m->digests);
    dt_backend_free(m->be, m->stats);
    dt_backend_free(m->be, m->stats_all);
    free(m->shard_row);
    free(m->grad_first);
    free(m->loss_ws);
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
    m->seed = seed;
    m->step = 0;
    for (int i = 0; i < m->n_tensors; i++) {
        struct dt_param *p = &m->params[i];
        float *h = dt_xcalloc((size_t)p->n, sizeof *h);
        if (p->fan_in == 0 && p->init_value != 0.0f)
            for (int64_t k = 0; k < p->n; k++) h[k] = p->init_value;
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
        if (p->s) dt_backend_upload(m->be, p->s, h, (size_t)p->n * sizeof(float));
        free(h);
    }
}

/* Copy a host batch into the model's backend buffers. */
void dt_model_load_batch(struct dt_model *m, const float *x, const uint8_t *y, int64_t B)
{
    DT_ASSERT(B >= 1 && B <= m->max_batch);
    int32_t lab[4096];
    int32_t *labels = B <= 4096 ? lab : dt_xmalloc((size_t)B * sizeof *labels);
    for (int64_t b = 0; b < B; b++) labels[b] = y[b];
    dt_backend_upload(m->be, m->x, x, (size_t)(B * m->in_dim) * sizeof(float));
    dt_backend_upload(m->be, m->labels, labels, (size_t)B * sizeof(int32_t));
    if (labels != lab) free(labels);
}

struct dt_batch dt_batch_from(const struct dt_batch *b, int64_t b0, int64_t in_dim)
{
    struct dt_batch r = *b;
    r.row0 += b0;
    if (r.set) {
        r.idx += b0;
    } else {
        r.x += b0 * in_dim;
        r.y += b0;
    }
    return r;
}

void dt_model_load(struct dt_model *m, const struct dt_batch *b, int64_t B)
{
    DT_ASSERT(B >= 1 && B <= m->max_batch);
    m->row0 = b->row0;
    if (b->set) dt_backend_gather(m->be, m->x, m->labels, b->set, b->idx, B);
    else dt_model_load_batch(m, b->x, b->y, B);
}

/* The loss's defaults for pass p (struct dt_pass): m's own buffers over B rows. */
static void pass_init(struct dt_pass *p, const struct dt_model *m, int64_t B, int index,
                      int64_t slots, bool training)
{
    *p = (struct dt_pass){.index = index,
                          .slots = slots,
                          .training = training,
                          .logits = m->logits,
                          .probs = m->probs,
                          .dlogits = m->dlogits,
                          .labels = m->labels,
                          .rows = B,
                          .classes = m->n_classes,
                          .per_example = 1};
}

enum dt_status dt_model_forward(struct dt_model *m, int64_t B, const struct dt_policy *pol,
                                struct dt_pass *p)
{
    pass_init(p, m, B, 0, 1, false);
    return m->ops->forward(m, B, p, pol);
}

/* Room for `slots` per-slot losses and their sums (several passes). */
/* Every pass's losses, passes x slots (host): written by the loss op as the step goes, read
 * after its end (dt_model_finish_loss). */
static float *loss_workspace(struct dt_model *m, int64_t slots)
{
    const int64_t need = slots * m->passes;
    if (need > m->loss_ws_slots) {
        free(m->loss_ws);
        m->loss_ws = dt_xmalloc((size_t)need * sizeof(float));
        m->loss_ws_slots = need;
    }
    return m->loss_ws;
}

/* The one forward -> loss -> backward in the code: each pass's forward and its softmax
 * cross-entropy (the loss of each of `slots` shards when the backend's shards are set),
 * then each pass's backward, in pass order. The losses land after the step's end
 * (dt_backend_read_deferred): loss[k] directly with one pass, else each pass's in the
 * workspace, combined by dt_model_finish_loss. */
static enum dt_status forward_loss_backward(struct dt_model *m, int64_t B, int64_t denom,
                                            int64_t slots, const struct dt_policy *pol, float *loss)
{
    const int P = m->passes;
    float *ws = P > 1 ? loss_workspace(m, slots) : NULL;
    struct dt_pass p;
    for (int i = 0; i < P; i++) {
        pass_init(&p, m, B, i, slots, true);
        float *ls = P > 1 ? ws + (int64_t)i * slots : loss;
        DT_FORWARD_IF_ERROR(m->ops->forward(m, B, &p, pol));
        dt_backend_defer_loss(m->be, true); /* read at the step's end (checks deferred) */
        const enum dt_status st = dt_softmax_xent_forward(m->be, p.probs, ls, NULL, p.logits,
                                                          p.labels, p.rows, p.classes, pol);
        dt_backend_defer_loss(m->be, false);
        DT_FORWARD_IF_ERROR(st);
        DT_FORWARD_IF_ERROR(dt_softmax_xent_backward(m->be, p.dlogits, p.probs, p.labels, p.rows,
                                                     p.classes, denom * p.per_example, pol));
    }
    for (int i = 0; i < P; i++) {
        pass_init(&p, m, B, i, slots, true);
        DT_FORWARD_IF_ERROR(m->ops->backward(m, B, &p, pol));
    }
    return DT_OK;
}

void dt_model_finish_loss(struct dt_model *m, int64_t slots, float *loss)
{
    const int P = m->passes;
    if (P == 1) return;
    const float inv = 1.0f / (float)P;
    for (int64_t k = 0; k < slots; k++) { /* the passes' sum in pass order, times 1 / P */
        float total = 0.0f;
        for (int i = 0; i < P; i++) total += m->loss_ws[(int64_t)i * slots + k];
        loss[k] = total * inv;
    }
}

enum dt_status dt_model_gradients(struct dt_model *m, const struct dt_batch *b, int64_t B,
                                  int64_t denom, const struct dt_policy *pol, float *loss)
{
    DT_ASSERT(denom >= B && B >= 1);
    dt_model_load(m, b, B);
    return forward_loss_backward(m, B, denom, 1, pol, loss);
}

void dt_model_grad_slots(struct dt_model *m, int64_t slots)
{
    dt_model_grad_slots_at(m, slots, NULL);
}

void dt_model_grad_slots_at(struct dt_model *m, int64_t slots, float *memory)
{
    DT_ASSERT(slots >= 1);
    DT_ASSERT(!memory || dt_backend_host_view(m->be, m->params[0].w));
    if (m->grad_pack && m->grad_slots == slots &&
        (memory ? m->grad_pack == memory : !m->grad_pack_lent))
        return;
    if (m->grad_pack) {
        if (!m->grad_pack_lent) dt_backend_free(m->be, m->grad_pack);
    } else {
        for (int i = 0; i < m->n_params; i++) dt_backend_free(m->be, m->params[i].g);
        m->grad_first = dt_xcalloc((size_t)m->n_params + 1, sizeof *m->grad_first);
        for (int i = 0; i < m->n_params; i++)
            m->grad_first[i + 1] = m->grad_first[i] + m->params[i].n;
    }
    m->grad_slots = slots;
    m->grad_pack_lent = memory != NULL;
    m->grad_pack =
        memory
            ? memory
            : dt_backend_alloc(m->be, (size_t)(slots * m->grad_first[m->n_params]) * sizeof(float));
    for (int i = 0; i < m->n_params; i++) m->params[i].g = m->grad_pack + slots * m->grad_first[i];
}

enum dt_status dt_model_gradients_sharded(struct dt_model *m, const struct dt_batch *b, int64_t B,
                                          int64_t denom, const struct dt_shards *sh,
                                          const struct dt_policy *pol, float *loss_slots)
{
    DT_ASSERT(denom >= B && B >= 1);
    DT_ASSERT(dt_reduction_exact(pol) && sh->count >= 1 && sh->count == m->grad_slots &&
              sh->row[sh->count] == B);
    dt_model_load(m, b, B);
    dt_backend_set_shards(m->be, sh);
    const enum dt_status st = forward_loss_backward(m, B, denom, sh->count, pol, loss_slots);
    dt_backend_set_shards(m->be, NULL);
    return st;
}

/* Every gradient scaled by min(1, max_norm / global norm): after the batch reductions and
 * the exchange across ranks, so every rank scales the same combined gradient. */
static enum dt_status clip_gradients(struct dt_model *m, float max_norm,
                                     const struct dt_policy *pol)
{
    if (!m->norm_sq) m->norm_sq = dt_backend_alloc(m->be, sizeof(float));
    const float **g = dt_xcalloc((size_t)m->n_params, sizeof *g);
    int64_t *n = dt_xcalloc((size_t)m->n_params, sizeof *n);
    for (int i = 0; i < m->n_params; i++) g[i] = m->params[i].g, n[i] = m->params[i].n;
    enum dt_status st =
        dt_grad_norm(m->be, m->norm_sq, (const float *const *)g, n, m->n_params, pol);
    for (int i = 0; st == DT_OK && i < m->n_params; i++)
        st = dt_clip_scale(m->be, m->params[i].g, m->params[i].n, m->norm_sq, max_norm, pol);
    free(g);
    free(n);
    return st;
}

float dt_model_lr(const struct dt_sgd_options *opt, int64_t step)
{
    double lr = opt->lr;
    if (opt->warmup > 0 && step <= opt->warmup)
        return (float)(lr * (double)step / (double)opt->warmup);
    if (opt->cosine && opt->total_steps > opt->warmup) {
        /* the first step after the warm-up at lr, the last one still above 0 */
        const double progress =
            (double)(step - opt->warmup - 1) / (double)(opt->total_steps - opt->warmup);
        lr *= 0.5 * (1.0 + cos(M_PI * (progress > 1.0 ? 1.0 : progress)));
    }
    return (float)lr;
}

enum dt_status dt_model_clip(struct dt_model *m, const struct dt_sgd_options *opt,
                             const struct dt_policy *pol)
{
    return opt->clip_norm > 0.0f ? clip_gradients(m, opt->clip_norm, pol) : DT_OK;
}

enum dt_status dt_model_update(struct dt_model *m, const struct dt_sgd_options *opt,
                               const struct dt_policy *pol)
{
    const float lr = dt_model_lr(opt, m->step > 0 ? m->step : 1);
    if (opt->adamw) {
        /* bias corrections 1 - beta^t in double, rounded once per step */
        const double t = (double)(m->step > 0 ? m->step : 1);
        const struct dt_adamw_step s = {.lr = lr,
                                        .beta1 = opt->beta1,
                                        .beta2 = opt->beta2,
                                        .eps = opt->eps,
                                        .weight_decay = opt->weight_decay,
                                        .bc1 = (float)(1.0 - pow((double)opt->beta1, t)),
                                        .bc2 = (float)(1.0 - pow((double)opt->beta2, t))};
        for (int i = 0; i < m->n_params; i++) {
            struct dt_param *p = &m->params[i];
            if (!p->s) p->s = dt_backend_alloc(m->be, (size_t)p->n * sizeof(float));
            DT_FORWARD_IF_ERROR(dt_adamw_update(m->be, p->w, p->v, p->s, p->g, p->n, &s, pol));
        }
        return DT_OK;
    }
    for (int i = 0; i < m->n_params; i++) {
        struct dt_param *p = &m->params[i];
        DT_FORWARD_IF_ERROR(dt_sgd_update(m->be, p->w, p->v, p->g, p->n, lr, opt->momentum,
                                          opt->weight_decay, pol));
    }
    return DT_OK;
}

enum dt_status dt_model_finish_gradients(struct dt_model *m, const struct dt_policy *pol)
{
    return m->ops->finish_gradients ? m->ops->finish_gradients(m, pol) : DT_OK;
}

void dt_model_begin_step(struct dt_model *m)
{
    m->step++;
    m->err.status = DT_OK;
    m->err.msg[0] = '\0';
    (void)dt_backend_take_op_error(m->be, NULL); /* nothing stale from before the step */
}

enum dt_status dt_model_step_end(struct dt_model *m, enum dt_status st)
{
    struct dt_error check;
    if (st != DT_OK && m->err.status == DT_OK && dt_backend_take_op_error(m->be, &check))
        dt_error_set(&m->err, st, "%.800s at step %" PRId64, check.msg, m->step); /* an op
                                                       outside a named gradient (DT_MODEL_GRAD) */
    const enum dt_status end = dt_backend_step_end(m->be, &check);
    if (st != DT_OK || end == DT_OK) return st;
    return dt_error_set(&m->err, end, "%.800s at step %" PRId64, check.msg, m->step);
}

enum dt_status dt_dropout_lanes_check(struct dt_model *m, const struct dt_xoro *lanes,
                                      struct dt_xoro *host, int64_t rows, int64_t row0)
{
    dt_backend_download(m->be, host, lanes, (size_t)rows * sizeof *host);
    for (int64_t r = 0; r < rows; r++) {
        const int64_t row = row0 + r;
        if (!dt_xoro_equal(host[r], dt_dropout_lane_seed(m->seed, (uint32_t)m->step, m->member,
                                                         (uint64_t)row)))
            return dt_error_set(&m->err, DT_ERR_NUMERIC,
                                "rng lfsr: dropout lane of row %lld is not back at its seed "
                                "state after backward at step %lld: the masks regenerated in "
                                "backward differ from forward's",
                                (long long)row, (long long)m->step);
    }
    return DT_OK;
}

void dt_ece_add(struct dt_ece_bins *b, double confidence, bool correct)
{
    int k = (int)(confidence * DT_ECE_BINS); /* bins [k/15, (k+1)/15); 1.0 goes in the last */
    if (k >= DT_ECE_BINS) k = DT_ECE_BINS - 1;
    if (k < 0) k = 0;
    b->count[k]++;
    b->correct[k] += correct;
    b->conf[k] += confidence;
}

double dt_ece_finish(const struct dt_ece_bins *b)
{
    int64_t n = 0;
    for (int k = 0; k < DT_ECE_BINS; k++) n += b->count[k];
    if (n == 0) return NAN;
    double ece = 0.0;
    for (int k = 0; k < DT_ECE_BINS; k++) {
        if (!b->count[k]) continue;
        double acc = (double)b->correct[k] / (double)b->count[k];
        double conf = b->conf[k] / (double)b->count[k];
        ece += (double)b->count[k] / (double)n * fabs(acc - conf);
    }
    return ece;
}

/* The generic evaluation: one forward per batch; calibration from the downloaded
 * probabilities (first maximum = the prediction, as the accuracy counts it). */
static enum dt_status evaluate_generic(struct dt_model *m, const float *x, const uint8_t *y,
                                       int64_t n, const struct dt_policy *pol, struct dt_eval *out,
                                       uint8_t *pred)
{
    double total = 0.0;
    int64_t correct = 0;
    struct dt_ece_bins bins;
    memset(&bins, 0, sizeof bins);
    const int64_t C = m->n_classes;
    float *probs = dt_xmalloc((size_t)(m->max_batch * C) * sizeof(float));
    for (int64_t s = 0; s < n; s += m->max_batch) {
        int64_t B = n - s < m->max_batch ? n - s : m->max_batch;
        dt_model_load_batch(m, x + s * m->in_dim, y + s, B);
        struct dt_pass pass;
        enum dt_status st = dt_model_forward(m, B, pol, &pass);
        float l;
        int64_t c;
        if (st == DT_OK)
            st =
                dt_softmax_xent_forward(m->be, m->probs, &l, &c, pass.logits, m->labels, B, C, pol);
        if (st != DT_OK) {
            free(probs);
            return st;
        }
        total += (double)l * (double)B;
        correct += c;
        dt_backend_download(m->be, probs, m->probs, (size_t)(B * C) * sizeof(float));
        for (int64_t b = 0; b < B; b++) {
            const float *p = probs + b * C;
            int64_t arg = 0;
            for (int64_t k = 1; k < C; k++)
                if (p[k] > p[arg]) arg = k;
            dt_ece_add(&bins, p[arg], arg == y[s + b]);
            if (pred) pred[s + b] = (uint8_t)arg;
        }
    }
    free(probs);
    out->loss = n > 0 ? total / (double)n : NAN;
    out->accuracy = n > 0 ? (double)correct / (double)n : NAN;
    out->ece = dt_ece_finish(&bins);
    return DT_OK;
}

enum dt_status dt_model_evaluate_pred(struct dt_model *m, const float *x, const uint8_t *y,
                                      int64_t n, const struct dt_policy *pol, struct dt_eval *out,
                                      uint8_t *pred)
{
    DT_ASSERT(m->n_classes <= 256 || !pred);
    if (m->ops->evaluate) return m->ops->evaluate(m, x, y, n, pol, out, pred);
    return evaluate_generic(m, x, y, n, pol, out, pred);
}

enum dt_status dt_model_evaluate_full(struct dt_model *m, const float *x, const uint8_t *y,
                                      int64_t n, const struct dt_policy *pol, struct dt_eval *out)
{
    return dt_model_evaluate_pred(m, x, y, n, pol, out, NULL);
}

enum dt_status dt_model_evaluate(struct dt_model *m, const float *x, const uint8_t *y, int64_t n,
                                 const struct dt_policy *pol, double *loss, double *accuracy)
{
    struct dt_eval e;
    DT_FORWARD_IF_ERROR(dt_model_evaluate_full(m, x, y, n, pol, &e));
    *loss = e.loss;
    *accuracy = e.accuracy;
    return DT_OK;
}

void dt_model_memory(const struct dt_model *m, const struct dt_policy *pol,
                     struct dt_model_memory *out)
{
    memset(out, 0, sizeof *out);
    if (m->ops->memory) m->ops->memory(m, pol, out);
}
