/* A decoder-only transformer on bytes (nets/model.h, dt_gpt_create): every step is backend
 * ops under the policy, so the controls act on it as on the other models -- the products
 * are the dense ops (reduction, math), the batch reductions of LayerNorm's gamma and beta,
 * the biases and the positional embedding are dt_bias_backward, the token embedding's
 * gradient is a scatter-add by token id (atomics), softmax and GELU take `math`'s exp and
 * tanh (nets/gpt_elem.h). Activations of every block are kept for backward.
 *
 * Dropout (model.dropout = p > 0, training steps only): at site 0 the embedding's sum, at
 * sites 1 + 2 l and 2 + 2 l block l's attention projection and MLP output before their
 * residual adds, each in place; masks by global row under `rng` (determinism/dropout.h):
 * philox regenerates them in backward, lfsr walks each row's lane back through the sites
 * in reverse order, stored draws as lfsr does and keeps one byte per element instead. */
#include <math.h>
#include <string.h>

#include "determinism/dropout.h"
#include "determinism/streams.h"

#include "nets/gpt_elem.h"
#include "nets/model.h"
#include "nets/models.h"

#define GPT_MAX_LAYERS 64

/* Parameters per block, in digest order. */
enum {
    P_LN1_W,
    P_LN1_B,
    P_QKV_W,
    P_QKV_B,
    P_PROJ_W,
    P_PROJ_B,
    P_LN2_W,
    P_LN2_B,
    P_FC_W,
    P_FC_B,
    P_FC2_W,
    P_FC2_B,
    P_PER_BLOCK
};

struct gpt_block {
    float *ln1, *mean1, *rstd1, *qkv, *att, *ao, *mid, *ln2, *mean2, *rstd2, *fc, *gl;
};

struct gpt {
    int64_t T, D, H, V, F; /* F = 4 D */
    int L;
    bool tie;
    int64_t B;   /* rows of the last forward: B * T */
    float **res; /* L + 1 residual streams (rows, D); res[0] = the embedding */
    struct gpt_block blk[GPT_MAX_LAYERS];
    float *lnf, *meanf, *rstdf, *logits, *probs, *dlogits;
    int32_t *tokens, *targets;
    float *zero_d, *zero_v;                   /* bias-free products */
    float *dres, *dtmp, *gx, *d4, *dqkv, *ds; /* backward scratch */
    /* tied: the head's product's part of wte's gradient (one partial per shard under
     * reduction: exact), added after the scatter has written wte's gradient: each op's
     * output is then its own (explain names the scatter's, unmixed with the product's) */
    float *demb;
    int64_t demb_slots, slots; /* capacity; the slots of this step's gradients */
    /* dropout */
    bool dropout;          /* p > 0 */
    uint32_t threshold;    /* keep when u >= threshold */
    float scale;           /* 1 / (1 - p) */
    bool training;         /* the forward of a training step (masks on) */
    uint8_t *keep;         /* rng: stored: (2 L + 1) sites of rows D bytes; NULL until used */
    struct dt_xoro *lanes; /* rng: lfsr: one per row; NULL until used */
    struct dt_xoro *lanes_host;
    float *ddrop;             /* a site's gradient before its mask */
    int64_t lfsr_check_every; /* >= 1 */
};

static struct dt_param *P(struct dt_model *m, int l, int which)
{
    return &m->params[2 + l * P_PER_BLOCK + which];
}

static struct dt_param *wte(struct dt_model *m) { return &m->params[0]; }
static struct dt_param *wpe(struct dt_model *m) { return &m->params[1]; }
static struct dt_param *lnf_w(struct dt_model *m)
{
    return &m->params[2 + ((struct gpt *)m->impl)->L * P_PER_BLOCK];
}
static struct dt_param *lnf_b(struct dt_model *m) { return lnf_w(m) + 1; }
static struct dt_param *head(struct dt_model *m) { return lnf_w(m) + 2; } /* untied only */

#define TRY(call) DT_FORWARD_IF_ERROR(call)

static float *alloc_floats(struct dt_backend *be, int64_t n)
{
    return dt_backend_alloc(be, (size_t)n * sizeof(float));
}

/* ---- dropout ------------------------------------------------------------------------------ */

static enum dt_dropout_mode drop_mode(const struct dt_policy *pol, bool backward)
{
    if (dt_rng_lfsr(pol)) return backward ? DT_DROPOUT_LFSR_BACKWARD : DT_DROPOUT_LFSR_FORWARD;
    if (dt_rng_stored(pol)) return backward ? DT_DROPOUT_STORED : DT_DROPOUT_KEEP;
    return DT_DROPOUT_PHILOX;
}

static bool dropping(const struct gpt *g) { return g->dropout && g->training; }

/* Site `site`'s mask from src (rows, D) into dst (may alias): forwards on an activation or
 * backwards on its gradient. Only in a step that drops (dropping). */
static enum dt_status drop_site(struct dt_model *m, float *dst, const float *src, int site,
                                int64_t rows, bool backward, const struct dt_policy *pol)
{
    struct gpt *g = m->impl;
    DT_ASSERT(dropping(g));
    const struct dt_dropout_site s = {
        .mode = drop_mode(pol, backward),
        .stream = dt_dropout_stream(m->seed, (uint32_t)m->step, (uint32_t)site, m->member),
        .row0 = m->row0 * g->T,
        .threshold = g->threshold,
        .scale = g->scale};
    const bool bytes = s.mode == DT_DROPOUT_KEEP || s.mode == DT_DROPOUT_STORED;
    const bool walk = s.mode == DT_DROPOUT_LFSR_FORWARD || s.mode == DT_DROPOUT_LFSR_BACKWARD ||
                      s.mode == DT_DROPOUT_KEEP;
    if (bytes && !g->keep)
        g->keep = dt_backend_alloc(m->be, (size_t)((2 * g->L + 1) * m->max_batch * g->T * g->D));
    uint8_t *keep = bytes ? g->keep + (int64_t)site * m->max_batch * g->T * g->D : NULL;
    return dt_dropout(m->be, dst, src, keep, walk ? g->lanes : NULL, rows, g->D, &s, pol);
}

/* rng: lfsr and stored (which draws with the lanes' forward walk): the lanes of this step's
 * rows at their seed states (before forward). */
static enum dt_status drop_seed(struct dt_model *m, int64_t rows, const struct dt_policy *pol)
{
    struct gpt *g = m->impl;
    if (!dropping(g) || !(dt_rng_lfsr(pol) || dt_rng_stored(pol))) return DT_OK;
    if (!g->lanes) {
        g->lanes = dt_backend_alloc(m->be, (size_t)(m->max_batch * g->T) * sizeof *g->lanes);
        g->lanes_host = dt_xmalloc((size_t)(m->max_batch * g->T) * sizeof *g->lanes_host);
    }
    return dt_dropout_seed(m->be, g->lanes, rows, m->row0 * g->T, m->seed, (uint32_t)m->step,
                           m->member, pol);
}

/* rng: lfsr, on checked steps: after backward every lane is back at its seed state. */
static enum dt_status drop_check(struct dt_model *m, int64_t rows, const struct dt_policy *pol)
{
    struct gpt *g = m->impl;
    if (!dropping(g) || !dt_rng_lfsr(pol) || m->step % g->lfsr_check_every != 0) return DT_OK;
    return dt_dropout_lanes_check(m, g->lanes, g->lanes_host, rows, m->row0 * g->T);
}

/* The forward of a training step (g->training: with dropout) or of an evaluation. */
static enum dt_status run_forward(struct dt_model *m, int64_t B, const struct dt_policy *pol)
{
    struct gpt *g = m->impl;
    struct dt_backend *be = m->be;
    const int64_t T = g->T, D = g->D, F = g->F, V = g->V, rows = B * T;
    const bool drop = dropping(g);
    g->B = B;
    TRY(drop_seed(m, rows, pol));
    TRY(dt_embedding_forward(be, g->res[0], g->tokens, g->targets, m->x, wte(m)->w, wpe(m)->w, B, T,
                             D, pol));
    if (drop) TRY(drop_site(m, g->res[0], g->res[0], 0, rows, false, pol));
    for (int l = 0; l < g->L; l++) {
        struct gpt_block *k = &g->blk[l];
        TRY(dt_layernorm_forward(be, k->ln1, k->mean1, k->rstd1, g->res[l], P(m, l, P_LN1_W)->w,
                                 P(m, l, P_LN1_B)->w, rows, D, pol));
        DT_MODEL_FWD(m, P(m, l, P_QKV_W)->name,
                     dt_dense_forward(be, k->qkv, k->ln1, P(m, l, P_QKV_W)->w, P(m, l, P_QKV_B)->w,
                                      rows, D, 3 * D, pol));
        TRY(dt_attention_forward(be, k->ao, k->att, k->qkv, B, T, g->H, D, pol));
        DT_MODEL_FWD(m, P(m, l, P_PROJ_W)->name,
                     dt_dense_forward(be, k->mid, k->ao, P(m, l, P_PROJ_W)->w, P(m, l, P_PROJ_B)->w,
                                      rows, D, D, pol));
        if (drop) TRY(drop_site(m, k->mid, k->mid, 1 + 2 * l, rows, false, pol));
        TRY(dt_add(be, k->mid, g->res[l], rows * D, pol));
        TRY(dt_layernorm_forward(be, k->ln2, k->mean2, k->rstd2, k->mid, P(m, l, P_LN2_W)->w,
                                 P(m, l, P_LN2_B)->w, rows, D, pol));
        DT_MODEL_FWD(m, P(m, l, P_FC_W)->name,
                     dt_dense_forward(be, k->fc, k->ln2, P(m, l, P_FC_W)->w, P(m, l, P_FC_B)->w,
                                      rows, D, F, pol));
        TRY(dt_gelu_forward(be, k->gl, k->fc, rows * F, pol));
        DT_MODEL_FWD(m, P(m, l, P_FC2_W)->name,
                     dt_dense_forward(be, g->res[l + 1], k->gl, P(m, l, P_FC2_W)->w,
                                      P(m, l, P_FC2_B)->w, rows, F, D, pol));
        if (drop) TRY(drop_site(m, g->res[l + 1], g->res[l + 1], 2 + 2 * l, rows, false, pol));
        TRY(dt_add(be, g->res[l + 1], k->mid, rows * D, pol));
    }
    TRY(dt_layernorm_forward(be, g->lnf, g->meanf, g->rstdf, g->res[g->L], lnf_w(m)->w, lnf_b(m)->w,
                             rows, D, pol));
    if (g->tie) /* logits = lnf . wte^T: the backward-data product with wte as (V, D) */
        DT_MODEL_FWD(m, wte(m)->name,
                     dt_dense_backward_data(be, g->logits, g->lnf, wte(m)->w, rows, V, D, pol));
    else
        DT_MODEL_FWD(
            m, head(m)->name,
            dt_dense_forward(be, g->logits, g->lnf, head(m)->w, g->zero_v, rows, D, V, pol));
    return DT_OK;
}

/* ops->forward: a training step's (p->training: dropout; p->slots: the shard partials
 * backward gives) or an evaluation's. The loss is over every position: B T rows of V
 * classes, T per example, so a shard of rows of a global batch of `denom` windows scales
 * by denom * T. */
static enum dt_status gpt_forward(struct dt_model *m, int64_t B, struct dt_pass *p,
                                  const struct dt_policy *pol)
{
    struct gpt *g = m->impl;
    g->training = p->training;
    g->slots = p->slots;
    p->logits = g->logits;
    p->probs = g->probs;
    p->dlogits = g->dlogits;
    p->labels = g->targets;
    p->rows = B * g->T;
    p->classes = g->V;
    p->per_example = g->T;
    return run_forward(m, B, pol);
}

/* An evaluation's forward (no dropout). */
static enum dt_status eval_forward(struct dt_model *m, int64_t B, const struct dt_policy *pol)
{
    struct dt_pass p;
    return dt_model_forward(m, B, pol, &p);
}

/* The gradient of a residual branch's output before its dropout: dres itself when the step
 * does not drop, else dres through site `site`'s mask (in ddrop). */
static enum dt_status branch_grad(struct dt_model *m, int site, int64_t rows,
                                  const struct dt_policy *pol, const float **out)
{
    struct gpt *g = m->impl;
    *out = g->dres;
    if (!dropping(g)) return DT_OK;
    *out = g->ddrop;
    return drop_site(m, g->ddrop, g->dres, site, rows, true, pol);
}

/* Gradients of an LN's gamma and beta: column sums of gx and dy over the rows. */
static enum dt_status ln_param_grads(struct dt_model *m, struct dt_param *w, struct dt_param *b,
                                     const float *gx, const float *dy, int64_t rows, int64_t D,
                                     const struct dt_policy *pol)
{
    DT_MODEL_GRAD(m, w->name, false, dt_bias_backward(m->be, w->g, gx, rows, D, pol));
    DT_MODEL_GRAD(m, b->name, false, dt_bias_backward(m->be, b->g, dy, rows, D, pol));
    return DT_OK;
}

/* A dense layer's weight and bias gradients from its input x and output gradient dy. */
static enum dt_status dense_grads(struct dt_model *m, struct dt_param *w, struct dt_param *b,
                                  const float *x, const float *dy, int64_t rows, int64_t in,
                                  int64_t out, const struct dt_policy *pol)
{
    DT_MODEL_GRAD(m, w->name, false,
                  dt_dense_backward_weight(m->be, w->g, x, dy, rows, in, out, pol));
    DT_MODEL_GRAD(m, b->name, false, dt_bias_backward(m->be, b->g, dy, rows, out, pol));
    return DT_OK;
}

static enum dt_status gpt_backward(struct dt_model *m, int64_t B, const struct dt_pass *p,
                                   const struct dt_policy *pol)
{
    struct gpt *g = m->impl;
    g->training = p->training;
    g->slots = p->slots;
    struct dt_backend *be = m->be;
    const int64_t T = g->T, D = g->D, F = g->F, V = g->V, rows = B * T;
    /* the head */
    if (g->tie) {
        if (g->demb_slots < g->slots) {
            dt_backend_free(be, g->demb);
            g->demb = alloc_floats(be, g->slots * V * D);
            g->demb_slots = g->slots;
        }
        DT_MODEL_GRAD(m, wte(m)->name, false,
                      dt_dense_backward_weight(be, g->demb, g->dlogits, g->lnf, rows, V, D, pol));
        DT_MODEL_GRAD(
            m, "ln_f", true,
            dt_dense_forward(be, g->dtmp, g->dlogits, wte(m)->w, g->zero_d, rows, V, D, pol));
    } else {
        DT_MODEL_GRAD(
            m, head(m)->name, false,
            dt_dense_backward_weight(be, head(m)->g, g->lnf, g->dlogits, rows, D, V, pol));
        DT_MODEL_GRAD(m, head(m)->name, true,
                      dt_dense_backward_data(be, g->dtmp, g->dlogits, head(m)->w, rows, D, V, pol));
    }
    DT_MODEL_GRAD(m, lnf_w(m)->name, true,
                  dt_layernorm_backward(be, g->dres, g->gx, g->dtmp, g->res[g->L], g->meanf,
                                        g->rstdf, lnf_w(m)->w, rows, D, false, pol));
    TRY(ln_param_grads(m, lnf_w(m), lnf_b(m), g->gx, g->dtmp, rows, D, pol));
    for (int l = g->L - 1; l >= 0; l--) {
        struct gpt_block *k = &g->blk[l];
        /* res[l + 1] = mid + drop(fc2(gelu(fc(ln2(mid))))): dres is its gradient */
        const float *db = NULL;
        TRY(branch_grad(m, 2 + 2 * l, rows, pol, &db));
        TRY(dense_grads(m, P(m, l, P_FC2_W), P(m, l, P_FC2_B), k->gl, db, rows, F, D, pol));
        DT_MODEL_GRAD(m, P(m, l, P_FC2_W)->name, true,
                      dt_dense_backward_data(be, g->d4, db, P(m, l, P_FC2_W)->w, rows, F, D, pol));
        TRY(dt_gelu_backward(be, g->d4, g->d4, k->fc, rows * F, pol));
        TRY(dense_grads(m, P(m, l, P_FC_W), P(m, l, P_FC_B), k->ln2, g->d4, rows, D, F, pol));
        DT_MODEL_GRAD(
            m, P(m, l, P_FC_W)->name, true,
            dt_dense_backward_data(be, g->dtmp, g->d4, P(m, l, P_FC_W)->w, rows, D, F, pol));
        DT_MODEL_GRAD(m, P(m, l, P_LN2_W)->name, true,
                      dt_layernorm_backward(be, g->dres, g->gx, g->dtmp, k->mid, k->mean2, k->rstd2,
                                            P(m, l, P_LN2_W)->w, rows, D, true, pol));
        TRY(ln_param_grads(m, P(m, l, P_LN2_W), P(m, l, P_LN2_B), g->gx, g->dtmp, rows, D, pol));
        /* mid = res[l] + drop(proj(attention(qkv(ln1(res[l]))))): dres is mid's gradient */
        TRY(branch_grad(m, 1 + 2 * l, rows, pol, &db));
        TRY(dense_grads(m, P(m, l, P_PROJ_W), P(m, l, P_PROJ_B), k->ao, db, rows, D, D, pol));
        DT_MODEL_GRAD(
            m, P(m, l, P_PROJ_W)->name, true,
            dt_dense_backward_data(be, g->dtmp, db, P(m, l, P_PROJ_W)->w, rows, D, D, pol));
        TRY(dt_attention_backward(be, g->dqkv, g->ds, g->dtmp, k->att, k->qkv, B, T, g->H, D, pol));
        TRY(dense_grads(m, P(m, l, P_QKV_W), P(m, l, P_QKV_B), k->ln1, g->dqkv, rows, D, 3 * D,
                        pol));
        DT_MODEL_GRAD(
            m, P(m, l, P_QKV_W)->name, true,
            dt_dense_backward_data(be, g->dtmp, g->dqkv, P(m, l, P_QKV_W)->w, rows, D, 3 * D, pol));
        DT_MODEL_GRAD(m, P(m, l, P_LN1_W)->name, true,
                      dt_layernorm_backward(be, g->dres, g->gx, g->dtmp, g->res[l], k->mean1,
                                            k->rstd1, P(m, l, P_LN1_W)->w, rows, D, true, pol));
        TRY(ln_param_grads(m, P(m, l, P_LN1_W), P(m, l, P_LN1_B), g->gx, g->dtmp, rows, D, pol));
    }
    /* the embeddings: dres is h0's gradient. wpe: the sum over the batch of each position's
     * rows, a bias gradient of B rows of T D; wte: the scatter by token id (added to the
     * head's product when tied); through site 0's mask first */
    if (dropping(g)) TRY(drop_site(m, g->dres, g->dres, 0, rows, true, pol));
    DT_MODEL_GRAD(m, wpe(m)->name, false, dt_bias_backward(be, wpe(m)->g, g->dres, B, T * D, pol));
    DT_MODEL_GRAD(m, wte(m)->name, false,
                  dt_embedding_backward(be, wte(m)->g, g->dres, g->tokens, rows, V, D, false, pol));
    if (g->tie)
        DT_MODEL_GRAD(m, wte(m)->name, false,
                      dt_add(be, wte(m)->g, g->demb, g->slots * V * D, pol));
    return drop_check(m, rows, pol);
}

/* Mean loss per predicted byte (nats) and next-byte accuracy over the windows x (n, T + 1)
 * of a text's validation split; calibration over every position's prediction. */
static enum dt_status gpt_evaluate(struct dt_model *m, const float *x, const uint8_t *y, int64_t n,
                                   const struct dt_policy *pol, struct dt_eval *out, uint8_t *pred)
{
    struct gpt *g = m->impl;
    const int64_t T = g->T, V = g->V;
    double total = 0.0;
    int64_t correct = 0, count = 0;
    struct dt_ece_bins bins;
    memset(&bins, 0, sizeof bins);
    float *probs = dt_xmalloc((size_t)(m->max_batch * T * V) * sizeof(float));
    int32_t *targets = dt_xmalloc((size_t)(m->max_batch * T) * sizeof(int32_t));
    enum dt_status st = DT_OK;
    for (int64_t s = 0; s < n && st == DT_OK; s += m->max_batch) {
        const int64_t B = n - s < m->max_batch ? n - s : m->max_batch, rows = B * T;
        dt_model_load_batch(m, x + s * m->in_dim, y + s, B);
        st = eval_forward(m, B, pol);
        float l = 0.0f;
        int64_t c = 0;
        if (st == DT_OK)
            st = dt_softmax_xent_forward(m->be, g->probs, &l, &c, g->logits, g->targets, rows, V,
                                         pol);
        if (st != DT_OK) break;
        total += (double)l * (double)rows;
        correct += c;
        count += rows;
        dt_backend_download(m->be, probs, g->probs, (size_t)(rows * V) * sizeof(float));
        dt_backend_download(m->be, targets, g->targets, (size_t)rows * sizeof(int32_t));
        for (int64_t r = 0; r < rows; r++) {
            const float *p = probs + r * V;
            int64_t arg = 0;
            for (int64_t k = 1; k < V; k++)
                if (p[k] > p[arg]) arg = k;
            dt_ece_add(&bins, p[arg], arg == targets[r]);
            if (pred && r % T == T - 1) pred[s + r / T] = (uint8_t)arg; /* the last position */
        }
    }
    free(probs);
    free(targets);
    if (st != DT_OK) return st;
    out->loss = count > 0 ? total / (double)count : NAN;
    out->accuracy = count > 0 ? (double)correct / (double)count : NAN;
    out->ece = dt_ece_finish(&bins);
    return DT_OK;
}

static void gpt_destroy(struct dt_model *m)
{
    struct gpt *g = m->impl;
    if (!g) return;
    struct dt_backend *be = m->be;
    for (int l = 0; l <= g->L; l++) dt_backend_free(be, g->res[l]);
    free(g->res);
    for (int l = 0; l < g->L; l++) {
        struct gpt_block *k = &g->blk[l];
        float *bufs[] = {k->ln1, k->mean1, k->rstd1, k->qkv,   k->att, k->ao,
                         k->mid, k->ln2,   k->mean2, k->rstd2, k->fc,  k->gl};
        for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) dt_backend_free(be, bufs[i]);
    }
    float *bufs[] = {g->lnf,     g->meanf,  g->rstdf,  g->logits, g->probs,
                     g->dlogits, g->zero_d, g->zero_v, g->dres,   g->dtmp,
                     g->gx,      g->d4,     g->dqkv,   g->ds,     g->demb};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) dt_backend_free(be, bufs[i]);
    dt_backend_free(be, g->tokens);
    dt_backend_free(be, g->targets);
    dt_backend_free(be, g->ddrop);
    dt_backend_free(be, g->keep);
    dt_backend_free(be, g->lanes);
    free(g->lanes_host);
    free(g);
    m->impl = NULL;
}

static const struct dt_model_ops gpt_ops = {
    .kind = "gpt",
    .forward = gpt_forward,
    .backward = gpt_backward,
    .destroy = gpt_destroy,
    .evaluate = gpt_evaluate,
};

enum dt_status dt_gpt_create(struct dt_model **out, struct dt_backend *be,
                             const struct dt_gpt_options *opt, int64_t max_batch,
                             struct dt_error *err)
{
    *out = NULL;
    const int64_t T = opt->context, D = opt->d_model, H = opt->heads, V = DT_GPT_VOCAB;
    if (opt->layers < 1 || opt->layers > GPT_MAX_LAYERS || T < 1 || D < 1 || H < 1 || D % H ||
        !(opt->dropout >= 0 && opt->dropout < 1) || opt->lfsr_check_every < 0)
        return dt_error_set(err, DT_ERR_CONFIG,
                            "gpt: %d layers (1..%d), d_model %lld a multiple of heads %lld, "
                            "context %lld >= 1, dropout %g in [0, 1)",
                            opt->layers, GPT_MAX_LAYERS, (long long)D, (long long)H, (long long)T,
                            opt->dropout);
    struct dt_model *m = dt_xcalloc(1, sizeof *m);
    struct gpt *g = dt_xcalloc(1, sizeof *g);
    g->T = T, g->D = D, g->H = H, g->V = V, g->F = 4 * D, g->L = opt->layers;
    g->tie = opt->tie_embeddings;
    g->slots = 1;
    g->dropout = opt->dropout > 0;
    if (g->dropout) dt_dropout_rate(opt->dropout, &g->threshold, &g->scale);
    g->lfsr_check_every = opt->lfsr_check_every > 0 ? opt->lfsr_check_every : 1;
    const int n_params = 2 + g->L * P_PER_BLOCK + 2 + (g->tie ? 0 : 1);
    dt_model_setup(m, &gpt_ops, be, n_params, T + 1, V, max_batch);
    m->impl = g;
    char name[DT_PARAM_NAME];
    const int64_t s_vd[2] = {V, D}, s_td[2] = {T, D};
    /* initialisation: U(-sqrt(6 / fan_in), +) like the other models; the embeddings with
     * fan_in D; LayerNorm gamma 1, beta 0 */
    dt_model_param(m, 0, "wte", 2, s_vd, D);
    dt_model_param(m, 1, "wpe", 2, s_td, D);
    for (int l = 0; l < g->L; l++) {
        static const char *const names[P_PER_BLOCK] = {
            "ln1.weight",       "ln1.bias",       "attn.qkv.weight", "attn.qkv.bias",
            "attn.proj.weight", "attn.proj.bias", "ln2.weight",      "ln2.bias",
            "mlp.fc.weight",    "mlp.fc.bias",    "mlp.proj.weight", "mlp.proj.bias"};
        const int64_t shapes[P_PER_BLOCK][2] = {{D, 0},    {D, 0},    {D, 3 * D}, {3 * D, 0},
                                                {D, D},    {D, 0},    {D, 0},     {D, 0},
                                                {D, g->F}, {g->F, 0}, {g->F, D},  {D, 0}};
        for (int p = 0; p < P_PER_BLOCK; p++) {
            snprintf(name, sizeof name, "h%d.%s", l, names[p]);
            const bool matrix = shapes[p][1] != 0;
            dt_model_param(m, 2 + l * P_PER_BLOCK + p, name, matrix ? 2 : 1, shapes[p],
                           matrix ? shapes[p][0] : 0);
            if (p == P_LN1_W || p == P_LN2_W) m->params[2 + l * P_PER_BLOCK + p].init_value = 1.0f;
        }
    }
    const int64_t s_d[1] = {D};
    const int pf = 2 + g->L * P_PER_BLOCK;
    dt_model_param(m, pf, "ln_f.weight", 1, s_d, 0);
    m->params[pf].init_value = 1.0f;
    dt_model_param(m, pf + 1, "ln_f.bias", 1, s_d, 0);
    if (!g->tie) {
        const int64_t s_dv[2] = {D, V};
        dt_model_param(m, pf + 2, "lm_head.weight", 2, s_dv, D);
    }
    /* activations */
    const int64_t rows = max_batch * T, att = max_batch * H * T * T;
    g->res = dt_xcalloc((size_t)g->L + 1, sizeof *g->res);
    for (int l = 0; l <= g->L; l++) g->res[l] = alloc_floats(be, rows * D);
    for (int l = 0; l < g->L; l++) {
        struct gpt_block *k = &g->blk[l];
        k->ln1 = alloc_floats(be, rows * D);
        k->mean1 = alloc_floats(be, rows);
        k->rstd1 = alloc_floats(be, rows);
        k->qkv = alloc_floats(be, rows * 3 * D);
        k->att = alloc_floats(be, att);
        k->ao = alloc_floats(be, rows * D);
        k->mid = alloc_floats(be, rows * D);
        k->ln2 = alloc_floats(be, rows * D);
        k->mean2 = alloc_floats(be, rows);
        k->rstd2 = alloc_floats(be, rows);
        k->fc = alloc_floats(be, rows * g->F);
        k->gl = alloc_floats(be, rows * g->F);
    }
    g->lnf = alloc_floats(be, rows * D);
    g->meanf = alloc_floats(be, rows);
    g->rstdf = alloc_floats(be, rows);
    g->logits = alloc_floats(be, rows * V);
    g->probs = alloc_floats(be, rows * V);
    g->dlogits = alloc_floats(be, rows * V);
    g->zero_d = alloc_floats(be, D);
    g->zero_v = alloc_floats(be, V);
    g->dres = alloc_floats(be, rows * D);
    g->dtmp = alloc_floats(be, rows * D);
    g->gx = alloc_floats(be, rows * D);
    g->d4 = alloc_floats(be, rows * g->F);
    g->dqkv = alloc_floats(be, rows * 3 * D);
    g->ds = alloc_floats(be, att);
    if (g->dropout) g->ddrop = alloc_floats(be, rows * D);
    g->tokens = dt_backend_alloc(be, (size_t)rows * sizeof(int32_t));
    g->targets = dt_backend_alloc(be, (size_t)rows * sizeof(int32_t));
    *out = m;
    return DT_OK;
}

/* ---- sampling ------------------------------------------------------------------------ */

enum dt_status dt_gpt_sample(struct dt_model *m, const uint8_t *prompt, int64_t prompt_len,
                             int64_t n, float temperature, uint64_t key,
                             const struct dt_policy *pol, uint8_t *out)
{
    if (m->ops != &gpt_ops) return DT_ERR_USAGE;
    DT_ASSERT(prompt_len >= 1 && n >= 0 && temperature > 0);
    struct gpt *g = m->impl;
    const int64_t T = g->T, V = g->V;
    memcpy(out, prompt, (size_t)prompt_len);
    float *win = dt_xcalloc((size_t)(T + 1), sizeof *win);
    float *logits = dt_xmalloc((size_t)(T * V) * sizeof *logits);
    double *p = dt_xmalloc((size_t)V * sizeof *p);
    enum dt_status st = DT_OK;
    for (int64_t i = 0; i < n && st == DT_OK; i++) {
        const int64_t have = prompt_len + i, first = have > T ? have - T : 0, len = have - first;
        for (int64_t t = 0; t <= T; t++) win[t] = t < len ? (float)out[first + t] : 32.0f;
        const uint8_t y = 0;
        dt_model_load_batch(m, win, &y, 1);
        st = eval_forward(m, 1, pol);
        if (st != DT_OK) break;
        dt_backend_download(m->be, logits, g->logits, (size_t)(T * V) * sizeof *logits);
        /* causal: position len - 1 saw only the window's first len bytes */
        const float *z = logits + (len - 1) * V;
        double mx = z[0], sum = 0;
        for (int64_t v = 1; v < V; v++) mx = z[v] > mx ? z[v] : mx;
        for (int64_t v = 0; v < V; v++) sum += p[v] = exp(((double)z[v] - mx) / temperature);
        const double u = (double)dt_stream_uniform(key, (uint64_t)i) * sum;
        double c = 0;
        int64_t pick = V - 1;
        for (int64_t v = 0; v < V; v++)
            if ((c += p[v]) > u) {
                pick = v;
                break;
            }
        out[have] = (uint8_t)pick;
    }
    free(win);
    free(logits);
    free(p);
    return st;
}

/* ---- the registry row (nets/models.h) -------------------------------------------------- */

static struct dt_model_size gpt_size(const struct dt_model_spec *s)
{
    const double T = (double)s->gpt.context, D = (double)s->gpt.d_model, H = (double)s->gpt.heads,
                 L = (double)s->gpt.layers, V = DT_GPT_VOCAB;
    double params = V * D + T * D + L * (12 * D * D + 13 * D) + 2 * D;
    if (!s->gpt.tie_embeddings) params += D * V;
    /* per position, as dt_gpt_create allocates: each block's 16 D kept (ln1 D, qkv 3 D, ao,
     * mid, ln2 D each, fc and gelu 4 D each, its input residual D), 4 statistics and H T
     * attention weights; the last residual and the final LayerNorm (2 D + 2), the logits,
     * probabilities and their gradient (3 V), and the backward scratch (dres, dtmp, gx D
     * each, d4 4 D, dqkv 3 D: 10 D; H T); the tokens and targets (2). (It counted 20 D a
     * block: 23% above the GPU-scale GPT's measured peak.) */
    double per_pos = L * (16 * D + H * T + 4) + 12 * D + 4 + 3 * V + H * T;
    /* dropout: its gradient scratch, and at most (rng: stored) a byte per element of every
     * site, and a lane per row (rng: lfsr) */
    if (s->gpt.dropout > 0) per_pos += D + (2 * L + 1) * D / 4 + 4;
    return (struct dt_model_size){.params = params,
                                  .extra_per_param = 1, /* AdamW's second moment */
                                  .acts_per_example = T * per_pos,
                                  .stored_per_param_per_sample = 0};
}

static enum dt_status gpt_kind_create(struct dt_model **out, struct dt_backend *be,
                                      const struct dt_model_spec *s, struct dt_error *err)
{
    return dt_gpt_create(out, be, &s->gpt, s->batch, err);
}

const struct dt_model_kind_info dt_gpt_kind = {
    .name = "gpt",
    .keys = "model.context model.d_model model.layers model.heads model.tie_embeddings "
            "model.dropout model.lfsr_check_every",
    .extra_control = "rng", /* with model.dropout > 0 */
    .reads_text = true,
    .create = gpt_kind_create,
    .size = gpt_size};
