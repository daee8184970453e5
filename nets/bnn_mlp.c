/* Bayesian MLP trained by Bayes by Backprop (Blundell et al., ICML 2015), with epsilon
 * under the `rng` control (nets/model.h has the model, determinism/eps.h the streams).
 *
 * One training step:
 *   1. sigma = softplus(rho) and its derivative, once per tensor;
 *   2. for each Monte Carlo sample s = 0..S-1: for each layer, draw epsilon of the weight
 *      then of the bias, form w = mu + sigma * eps in a one-layer workspace and run the
 *      layer; the loss and dlogits of sample s are kept (activations of every sample are
 *      kept too, as one graph over S samples would);
 *   3. for each sample s = 0..S-1: walk the layers backwards; for each layer get epsilon
 *      of the bias, then of the weight (the reverse of the forward order): `stored` reads
 *      the copy kept from forward, `philox` recomputes it from the counter, `lfsr` steps
 *      the lanes back. Each tensor's epsilon is formed once and used for both the rho
 *      gradient and the sampled weight that the input gradient needs;
 *   4. gradients = sample mean + KL term (dt_bnn_finish), then SGD on every mu and rho.
 * Steps 1-3 are the passes of the step (nets/step.c: pass s = sample s, its forward in
 * ops->forward, its backward in ops->backward), step 4's sum is ops->finish_gradients: a
 * data-parallel or `reduction: exact` step (nets/step.c) runs 1-3 on a rank's rows with
 * the backend's shards set -- every weight and bias gradient of every sample one partial
 * per shard, accumulated into that shard's slot of the mu and rho gradients -- combines
 * the slots of every shard and rank, and only then adds the KL term, once per step.
 * The arithmetic is the same in every mode, so the weights match bit for bit whenever the
 * epsilon values do: `stored` draws with the generator `stored_generator` names.
 *
 * With o.local (model.estimator: local) steps 2-3 are the local reparameterisation's
 * instead (local_forward, local_backward below): no weight is drawn; each layer's
 * pre-activation is drawn per example and unit from N(x mu + b_mu, x^2 sigma^2 +
 * sigma_b^2), the noise of determinism/noise.h keyed by global row (so ranks and shards
 * draw the same), regenerated in backward by `rng` as epsilon is; mu's gradient and the
 * variance's (x^2)^T . t are written into the gradient slots directly, and the latter made
 * rho's once after the combination (dt_bnn_local_scale, before dt_bnn_finish). Evaluation
 * is the same for both estimators: the model is the same, only its gradient estimator
 * differs.
 *
 * Epsilon tensor k: 2l = dense<l>.weight, 2l+1 = dense<l>.bias; its Philox tensor id is k.
 * Params: 2k = mu of tensor k, 2k+1 = rho of tensor k. Lanes: one set of P per sample,
 * seeded per (seed, step, member, sample); evaluation uses step 0 and sample t for its
 * t-th sampled model. */
#include <math.h>
#include <string.h>

#include "core/util.h"
#include "determinism/eps.h"
#include "determinism/noise.h"
#include "nets/model.h"
#include "nets/models.h"

#define BNN_MAX_LAYERS 32
#define BNN_MAX_TENSORS (2 * BNN_MAX_LAYERS)

struct bnn {
    int L, n_tensors;
    int64_t dims[BNN_MAX_LAYERS + 1];
    struct dt_bnn_options o;
    int64_t tsize[BNN_MAX_TENSORS]; /* elements of epsilon tensor k */
    int64_t toff[BNN_MAX_TENSORS];  /* offset of tensor k in one sample's epsilon set */
    int64_t total, max_tensor, max_dim, max_batch;
    char tname[BNN_MAX_TENSORS][DT_PARAM_NAME];
    float *sigma[BNN_MAX_TENSORS], *dsigma[BNN_MAX_TENSORS];
    float **act;         /* S * (L + 1): act[s (L+1) + l]; l = 0 is m->x, l = L the logits */
    float **dlogits;     /* S */
    float *grad, *grad2; /* (max_batch, max_dim): input gradients */
    float *gw;           /* a sample's weight or bias gradient: gw_slots shard partials of
                            one tensor (tensor k's slot j at gw + j * tsize[k]) */
    int64_t gw_slots, gv_slots;
    float *ww, *wb;   /* one layer's sampled weight and bias */
    float *eps_ws;    /* one tensor: regenerated epsilon */
    float *eps_store; /* S * total: rng stored, or the verify copy; NULL until needed */
    /* Lane memory is allocated on first use (only runs that draw with the lanes pay). */
    struct dt_xoro *lanes; /* backend memory, S * P */
    struct dt_xoro *seeds; /* host, S * P: lane seeds of the step (checked steps) */
    struct dt_xoro *ckpt;  /* host, S * n_tensors * P: lanes where each forward walk began */
    struct dt_xoro *probe; /* host, P */
    float *eval_w[BNN_MAX_TENSORS]; /* evaluation: one sampled model */
    float *host_a, *host_b;         /* host staging, max_tensor floats each */
    bool verify;
    int skip_tensor;
    int64_t verified;
    /* the local estimator (o.local): sigma^2 per tensor; per sample and layer the noise's
     * scale sd (max_batch, dims[l + 1]) and, under rng: stored or verify, the noise itself;
     * x^2, t and the variance's input gradient as scratch; the variance's weight gradients
     * (gw_slots partials); one lane per (sample, row) */
    float *sig2[BNN_MAX_TENSORS];
    float **sd;                                         /* S * L */
    float *noise_store;                                 /* S * noise_total, NULL until needed */
    int64_t noise_off[BNN_MAX_LAYERS + 1], noise_total; /* per layer, max_batch * dims[l + 1] */
    float *xsq, *tv, *grad3, *gv;
    struct dt_xoro *row_lanes;      /* backend, S * max_batch */
    struct dt_xoro *row_lanes_host; /* host, max_batch */
};

enum gen { GEN_PHILOX, GEN_LFSR };

static enum gen generator(const struct bnn *n, const struct dt_policy *pol)
{
    switch (pol->rng) {
    case DT_RNG_PHILOX: return GEN_PHILOX;
    case DT_RNG_LFSR: return GEN_LFSR;
    case DT_RNG_STORED: break;
    }
    return n->o.stored_lfsr ? GEN_LFSR : GEN_PHILOX;
}

static float *mu_of(struct dt_model *m, int k) { return m->params[2 * k].w; }
static float *rho_of(struct dt_model *m, int k) { return m->params[2 * k + 1].w; }
static float **act_of(struct bnn *n, int s) { return n->act + (size_t)s * (size_t)(n->L + 1); }
static struct dt_xoro *lanes_of(struct bnn *n, int s)
{
    return n->lanes + (size_t)s * (size_t)n->o.lanes;
}

/* Allocate the lane states (and, for checked runs, the host copies) on first use. */
static void ensure_lanes(struct dt_model *m, bool check)
{
    struct bnn *n = m->impl;
    const size_t S = (size_t)n->o.samples, P = (size_t)n->o.lanes;
    if (!n->lanes) {
        n->lanes = dt_backend_alloc(m->be, S * P * sizeof(struct dt_xoro));
        n->probe = dt_xcalloc(P, sizeof *n->probe);
    }
    if (check && !n->ckpt) {
        n->seeds = dt_xcalloc(S * P, sizeof *n->seeds);
        n->ckpt = dt_xcalloc(S * (size_t)n->n_tensors * P, sizeof *n->ckpt);
    }
}

/* A host view of backend memory (downloaded into `staging` when not host memory). */
static const void *host_of(struct dt_model *m, const void *p, size_t bytes, void *staging)
{
    const void *h = dt_backend_host_view(m->be, p);
    if (h) return h;
    dt_backend_download(m->be, staging, p, bytes);
    return staging;
}

static float *store_of(struct dt_model *m, int s, int k)
{
    struct bnn *n = m->impl;
    if (!n->eps_store)
        n->eps_store =
            dt_backend_alloc(m->be, (size_t)n->o.samples * (size_t)n->total * sizeof(float));
    return n->eps_store + (size_t)s * (size_t)n->total + (size_t)n->toff[k];
}

/* Draw epsilon tensor k of Monte Carlo sample `sample` at `step` going forwards; the
 * lfsr lanes are lane set `slot`. */
static enum dt_status draw_forward(struct dt_model *m, enum gen g, int k, int slot, int sample,
                                   uint32_t step, float *eps, const struct dt_policy *pol)
{
    struct bnn *n = m->impl;
    if (g == GEN_PHILOX) {
        struct dt_philox_stream ps =
            dt_philox_stream_make(m->seed, step, (uint32_t)k, m->member, (uint32_t)sample);
        return dt_eps_philox(m->be, eps, n->tsize[k], &ps, pol);
    }
    int64_t skip = (step != 0 && k == n->skip_tensor) ? 0 : -1;
    return dt_eps_lfsr(m->be, eps, n->tsize[k], lanes_of(n, slot), n->o.lanes, false, skip, pol);
}

static enum dt_status seed_lanes(struct dt_model *m, int slot, int sample, uint32_t step,
                                 const struct dt_policy *pol)
{
    struct bnn *n = m->impl;
    return dt_eps_lfsr_seed(m->be, lanes_of(n, slot), n->o.lanes, m->seed, step, m->member,
                            (uint32_t)sample, pol);
}

/* Lanes of sample s as host states (into n->probe). */
static const struct dt_xoro *lanes_host(struct dt_model *m, int s)
{
    struct bnn *n = m->impl;
    return host_of(m, lanes_of(n, s), (size_t)n->o.lanes * sizeof(struct dt_xoro), n->probe);
}

static bool checking(const struct dt_model *m, enum gen g, const struct dt_policy *pol)
{
    const struct bnn *n = m->impl;
    return g == GEN_LFSR && dt_rng_lfsr(pol) && m->step > 0 && m->step % n->o.lfsr_check_every == 0;
}

/* The lanes must be where tensor k's forward walk began (`want`); name what broke. */
static enum dt_status check_lanes(struct dt_model *m, int s, int k, const struct dt_xoro *want,
                                  const char *what)
{
    struct bnn *n = m->impl;
    const struct dt_xoro *have = lanes_host(m, s);
    for (int64_t j = 0; j < n->o.lanes; j++) {
        if (dt_xoro_equal(have[j], want[j])) continue;
        return dt_error_set(&m->err, DT_ERR_NUMERIC,
                            "rng lfsr: %s: after the backward walk of epsilon tensor %s (layer "
                            "%d) lane %lld is not where that tensor's forward walk began (step "
                            "%lld, sample %d): the forward and backward draw counts of %s "
                            "differ, so every epsilon regenerated from here down is wrong",
                            what, n->tname[k], k / 2, (long long)j, (long long)m->step, s,
                            n->tname[k]);
    }
    return DT_OK;
}

/* Epsilon of tensor k for sample s in backward: the stored copy, or regenerated (and,
 * with verify, compared with the forward copy bit for bit). */
static enum dt_status eps_backward(struct dt_model *m, enum gen g, int k, int s, bool check,
                                   const struct dt_policy *pol, const float **eps)
{
    struct bnn *n = m->impl;
    const uint32_t step = (uint32_t)m->step;
    if (dt_rng_stored(pol)) {
        *eps = store_of(m, s, k);
        return DT_OK;
    }
    if (g == GEN_PHILOX) {
        struct dt_philox_stream ps =
            dt_philox_stream_make(m->seed, step, (uint32_t)k, m->member, (uint32_t)s);
        DT_FORWARD_IF_ERROR(dt_eps_philox(m->be, n->eps_ws, n->tsize[k], &ps, pol));
    } else {
        DT_FORWARD_IF_ERROR(
            dt_eps_lfsr(m->be, n->eps_ws, n->tsize[k], lanes_of(n, s), n->o.lanes, true, -1, pol));
        if (check) {
            const struct dt_xoro *want =
                n->ckpt + ((size_t)s * (size_t)n->n_tensors + (size_t)k) * (size_t)n->o.lanes;
            DT_FORWARD_IF_ERROR(check_lanes(m, s, k, want, "lane invariant broken"));
        }
    }
    if (n->verify) {
        size_t bytes = (size_t)n->tsize[k] * sizeof(float);
        const float *fw = host_of(m, store_of(m, s, k), bytes, n->host_a);
        const float *bw = host_of(m, n->eps_ws, bytes, n->host_b);
        for (int64_t i = 0; i < n->tsize[k]; i++) {
            if (dt_float_bits(fw[i]) == dt_float_bits(bw[i])) continue;
            return dt_error_set(&m->err, DT_ERR_NUMERIC,
                                "rng %s: epsilon of %s regenerated in backward differs from the "
                                "forward draw at element %lld (step %lld, sample %d): %a vs %a",
                                g == GEN_PHILOX ? "philox" : "lfsr", n->tname[k], (long long)i,
                                (long long)m->step, s, (double)bw[i], (double)fw[i]);
        }
        n->verified++;
    }
    *eps = n->eps_ws;
    return DT_OK;
}

static enum dt_status layer_forward(struct dt_model *m, int l, int64_t B, const float *x, float *y,
                                    const float *w, const float *b, const struct dt_policy *pol)
{
    struct bnn *n = m->impl;
    /* the sampled weight of tensor 2l (n->tname: "dense<l>.weight") */
    DT_MODEL_FWD(m, n->tname[2 * l],
                 dt_dense_forward(m->be, y, x, w, b, B, n->dims[l], n->dims[l + 1], pol));
    if (l + 1 < n->L) DT_FORWARD_IF_ERROR(dt_relu_forward(m->be, y, y, B * n->dims[l + 1], pol));
    return DT_OK;
}

static enum dt_status sigmas(struct dt_model *m, const struct dt_policy *pol)
{
    struct bnn *n = m->impl;
    for (int k = 0; k < n->n_tensors; k++)
        DT_FORWARD_IF_ERROR(
            dt_bnn_sigma(m->be, n->sigma[k], n->dsigma[k], rho_of(m, k), n->tsize[k], pol));
    return DT_OK;
}

/* Forward of Monte Carlo sample s: draws every tensor, keeps the activations. */
static enum dt_status sample_forward(struct dt_model *m, int s, int64_t B, enum gen g, bool check,
                                     const struct dt_policy *pol)
{
    struct bnn *n = m->impl;
    const uint32_t step = (uint32_t)m->step;
    const bool keep = dt_rng_stored(pol) || n->verify;
    float **act = act_of(n, s);
    act[0] = m->x;
    if (g == GEN_LFSR) {
        DT_FORWARD_IF_ERROR(seed_lanes(m, s, s, step, pol));
        if (check)
            memcpy(n->seeds + (size_t)s * (size_t)n->o.lanes, lanes_host(m, s),
                   (size_t)n->o.lanes * sizeof(struct dt_xoro));
    }
    for (int l = 0; l < n->L; l++) {
        for (int b = 0; b < 2; b++) {
            int k = 2 * l + b;
            float *eps = keep ? store_of(m, s, k) : n->eps_ws;
            if (check)
                memcpy(n->ckpt +
                           ((size_t)s * (size_t)n->n_tensors + (size_t)k) * (size_t)n->o.lanes,
                       lanes_host(m, s), (size_t)n->o.lanes * sizeof(struct dt_xoro));
            DT_FORWARD_IF_ERROR(draw_forward(m, g, k, s, s, step, eps, pol));
            DT_FORWARD_IF_ERROR(dt_bnn_sample(m->be, b ? n->wb : n->ww, mu_of(m, k), n->sigma[k],
                                              eps, n->tsize[k], pol));
        }
        DT_FORWARD_IF_ERROR(layer_forward(m, l, B, act[l], act[l + 1], n->ww, n->wb, pol));
    }
    return DT_OK;
}

/* One sample's weight or bias gradient gw, `slots` shard partials of n elements, added to
 * every slot of the mu and rho gradients of param pair 2k, 2k + 1 (slot j at + j * n). */
static enum dt_status accumulate_slots(struct dt_model *m, int k, const float *gw, const float *eps,
                                       int64_t n, int64_t slots, bool first,
                                       const struct dt_policy *pol)
{
    struct bnn *nb = m->impl;
    for (int64_t j = 0; j < slots; j++)
        DT_FORWARD_IF_ERROR(dt_bnn_accumulate(m->be, m->params[2 * k].g + j * n,
                                              m->params[2 * k + 1].g + j * n, gw + j * n, eps,
                                              nb->dsigma[k], n, first, pol));
    return DT_OK;
}

/* Backward of Monte Carlo sample s; every batch reduction gives `slots` shard partials
 * (the backend's shards, when set), each accumulated into its slot of the gradients. */
static enum dt_status sample_backward(struct dt_model *m, int s, int64_t B, enum gen g, bool check,
                                      int64_t slots, const struct dt_policy *pol)
{
    struct bnn *n = m->impl;
    float **act = act_of(n, s);
    const float *dy = n->dlogits[s];
    const bool first = s == 0;
    for (int l = n->L - 1; l >= 0; l--) {
        const int kw = 2 * l, kb = 2 * l + 1;
        const int64_t in = n->dims[l], out = n->dims[l + 1];
        const float *eps;
        DT_FORWARD_IF_ERROR(eps_backward(m, g, kb, s, check, pol, &eps));
        DT_MODEL_GRAD(m, m->params[2 * kb].name, false,
                      dt_bias_backward(m->be, n->gw, dy, B, out, pol));
        DT_FORWARD_IF_ERROR(accumulate_slots(m, kb, n->gw, eps, out, slots, first, pol));
        DT_FORWARD_IF_ERROR(eps_backward(m, g, kw, s, check, pol, &eps));
        DT_MODEL_GRAD(m, m->params[2 * kw].name, false,
                      dt_dense_backward_weight(m->be, n->gw, act[l], dy, B, in, out, pol));
        DT_FORWARD_IF_ERROR(accumulate_slots(m, kw, n->gw, eps, in * out, slots, first, pol));
        if (l == 0) break;
        /* The same epsilon gives the sampled weight for the input gradient. */
        DT_FORWARD_IF_ERROR(
            dt_bnn_sample(m->be, n->ww, mu_of(m, kw), n->sigma[kw], eps, in * out, pol));
        float *dx = (dy == n->grad) ? n->grad2 : n->grad;
        DT_MODEL_GRAD(m, m->params[2 * kw].name, true,
                      dt_dense_backward_data(m->be, dx, dy, n->ww, B, in, out, pol));
        DT_FORWARD_IF_ERROR(dt_relu_backward(m->be, dx, dx, act[l], B * in, pol));
        dy = dx;
    }
    if (check && g == GEN_LFSR && dt_rng_lfsr(pol))
        DT_FORWARD_IF_ERROR(check_lanes(m, s, 0, n->seeds + (size_t)s * (size_t)n->o.lanes,
                                        "end-state invariant broken (lanes not back at their "
                                        "seed states)"));
    return DT_OK;
}

/* ---- the local reparameterisation estimator (model.estimator: local) -------------------
 * Per layer: gamma = x . mu_w + mu_b and delta = x^2 . sigma_w^2 + sigma_b^2 (two products),
 * then y = gamma + sqrt(delta) eps with eps one standard normal per (example, unit) -- the
 * layer's noise of determinism/noise.h, keyed by global row, so every shard layout and rank
 * count draws the same (nets/bnn_elem.h has the gradients). Noise layer l of sample s:
 * philox from its counter in both passes; lfsr from the rows' lanes, walked back in
 * backward; stored drawn with stored_generator's generator and kept. */

static float *noise_of(struct dt_model *m, int s, int l)
{
    struct bnn *n = m->impl;
    if (!n->noise_store)
        n->noise_store =
            dt_backend_alloc(m->be, (size_t)n->o.samples * (size_t)n->noise_total * sizeof(float));
    return n->noise_store + (size_t)s * (size_t)n->noise_total + (size_t)n->noise_off[l];
}
static float *sd_of(struct bnn *n, int s, int l) { return n->sd[(size_t)s * (size_t)n->L + l]; }
static struct dt_xoro *row_lanes_of(struct bnn *n, int s)
{
    return n->row_lanes + (size_t)s * (size_t)n->max_batch;
}

static struct dt_noise_site noise_site(const struct dt_model *m, enum dt_noise_mode mode, int s,
                                       int l)
{
    return (struct dt_noise_site){
        .mode = mode,
        .stream = dt_noise_stream(m->seed, (uint32_t)m->step, (uint32_t)l, m->member, (uint32_t)s),
        .row0 = m->row0};
}

/* rng: lfsr, on checked steps: after sample s's backward every row's lane is back at its
 * seed state. */
static enum dt_status check_row_lanes(struct dt_model *m, int s, int64_t B)
{
    struct bnn *n = m->impl;
    dt_backend_download(m->be, n->row_lanes_host, row_lanes_of(n, s),
                        (size_t)B * sizeof *n->row_lanes_host);
    for (int64_t r = 0; r < B; r++) {
        if (dt_xoro_equal(n->row_lanes_host[r],
                          dt_noise_lane_seed(m->seed, (uint32_t)m->step, m->member, (uint32_t)s,
                                             m->row0 + r)))
            continue;
        return dt_error_set(&m->err, DT_ERR_NUMERIC,
                            "rng lfsr: the noise lane of row %lld (sample %d) is not back at its "
                            "seed state after backward at step %lld: the activation noise "
                            "regenerated in backward differs from forward's",
                            (long long)(m->row0 + r), s, (long long)m->step);
    }
    return DT_OK;
}

/* Forward of sample s under the local estimator: keeps every layer's activations and sd. */
static enum dt_status local_forward(struct dt_model *m, int s, int64_t B, enum gen g,
                                    const struct dt_policy *pol)
{
    struct bnn *n = m->impl;
    const bool keep = dt_rng_stored(pol) || n->verify;
    const enum dt_noise_mode mode = g == GEN_LFSR ? DT_NOISE_LFSR : DT_NOISE_PHILOX;
    struct dt_xoro *lanes = mode == DT_NOISE_LFSR ? row_lanes_of(n, s) : NULL;
    float **act = act_of(n, s);
    act[0] = m->x;
    if (lanes)
        DT_FORWARD_IF_ERROR(dt_dropout_seed(m->be, lanes, B,
                                            (int64_t)dt_noise_lane_row((uint32_t)s, m->row0),
                                            m->seed, (uint32_t)m->step, m->member, pol));
    for (int l = 0; l < n->L; l++) {
        const int kw = 2 * l, kb = 2 * l + 1;
        const int64_t in = n->dims[l], out = n->dims[l + 1];
        float *y = act[l + 1], *sd = sd_of(n, s, l);
        DT_FORWARD_IF_ERROR(dt_square(m->be, n->xsq, act[l], B * in, pol));
        DT_MODEL_FWD(
            m, n->tname[kw],
            dt_dense_forward(m->be, y, act[l], mu_of(m, kw), mu_of(m, kb), B, in, out, pol));
        DT_MODEL_FWD(
            m, n->tname[kw],
            dt_dense_forward(m->be, sd, n->xsq, n->sig2[kw], n->sig2[kb], B, in, out, pol));
        const struct dt_noise_site site = noise_site(m, mode, s, l);
        DT_FORWARD_IF_ERROR(dt_bnn_local_forward(m->be, y, sd, keep ? noise_of(m, s, l) : NULL,
                                                 lanes, y, sd, B, out, &site, pol));
        if (lanes && s == 0 && l == n->skip_tensor && m->step != 0) {
            /* test hook (dt_bnn_set_debug): row 0's lane has drawn one pair fewer */
            struct dt_xoro st;
            dt_backend_download(m->be, &st, lanes, sizeof st);
            dt_xoro_prev(&st);
            dt_backend_upload(m->be, lanes, &st, sizeof st);
        }
        if (l + 1 < n->L) DT_FORWARD_IF_ERROR(dt_relu_forward(m->be, y, y, B * out, pol));
    }
    return DT_OK;
}

/* The regenerated noise of layer l (in n->eps_ws) against forward's copy, bit for bit. */
static enum dt_status verify_noise(struct dt_model *m, int s, int l, int64_t count, enum gen g)
{
    struct bnn *n = m->impl;
    const size_t bytes = (size_t)count * sizeof(float);
    const float *fw = host_of(m, noise_of(m, s, l), bytes, n->host_a);
    const float *bw = host_of(m, n->eps_ws, bytes, n->host_b);
    for (int64_t i = 0; i < count; i++) {
        if (dt_float_bits(fw[i]) == dt_float_bits(bw[i])) continue;
        return dt_error_set(&m->err, DT_ERR_NUMERIC,
                            "rng %s: the activation noise of layer %d regenerated in backward "
                            "differs from the forward draw at element %lld (step %lld, sample "
                            "%d): %a vs %a",
                            g == GEN_PHILOX ? "philox" : "lfsr", l, (long long)i,
                            (long long)m->step, s, (double)bw[i], (double)fw[i]);
    }
    n->verified++;
    return DT_OK;
}

/* After a batch reduction of tensor k (slots shard partials of nk elements each) into
 * n->gw and n->gv (pass s > 0): added to the slots of its mu and rho gradients. Pass 0's
 * reductions write those slots directly (local_backward). */
static enum dt_status local_add_slots(struct dt_model *m, int k, int64_t nk, int64_t slots,
                                      const struct dt_policy *pol)
{
    struct bnn *n = m->impl;
    DT_FORWARD_IF_ERROR(dt_add(m->be, m->params[2 * k].g, n->gw, slots * nk, pol));
    return dt_add(m->be, m->params[2 * k + 1].g, n->gv, slots * nk, pol);
}

/* Backward of sample s under the local estimator; every batch reduction gives `slots` shard
 * partials, as sample_backward's. */
static enum dt_status local_backward(struct dt_model *m, int s, int64_t B, enum gen g, bool check,
                                     int64_t slots, const struct dt_policy *pol)
{
    struct bnn *n = m->impl;
    float **act = act_of(n, s);
    const float *dy = n->dlogits[s];
    const bool first = s == 0, stored = dt_rng_stored(pol);
    const enum dt_noise_mode mode = stored          ? DT_NOISE_STORED
                                    : g == GEN_LFSR ? DT_NOISE_LFSR
                                                    : DT_NOISE_PHILOX;
    struct dt_xoro *lanes = mode == DT_NOISE_LFSR ? row_lanes_of(n, s) : NULL;
    for (int l = n->L - 1; l >= 0; l--) {
        const int kw = 2 * l, kb = 2 * l + 1;
        const int64_t in = n->dims[l], out = n->dims[l + 1];
        const struct dt_noise_site site = noise_site(m, mode, s, l);
        const bool verify = n->verify && !stored;
        DT_MODEL_GRAD(m, m->params[2 * kw + 1].name, false,
                      dt_bnn_local_backward(m->be, n->tv, verify ? n->eps_ws : NULL, lanes,
                                            stored ? noise_of(m, s, l) : NULL, dy, sd_of(n, s, l),
                                            B, out, &site, pol));
        if (verify) DT_FORWARD_IF_ERROR(verify_noise(m, s, l, B * out, g));
        /* the mean's gradient into mu's slots, the variance's (x^2)^T . t into rho's
         * (dt_bnn_local_scale makes it rho's after the combination) */
        DT_MODEL_GRAD(
            m, m->params[2 * kb].name, false,
            dt_bias_backward(m->be, first ? m->params[2 * kb].g : n->gw, dy, B, out, pol));
        DT_MODEL_GRAD(
            m, m->params[2 * kb + 1].name, false,
            dt_bias_backward(m->be, first ? m->params[2 * kb + 1].g : n->gv, n->tv, B, out, pol));
        if (!first) DT_FORWARD_IF_ERROR(local_add_slots(m, kb, out, slots, pol));
        DT_FORWARD_IF_ERROR(dt_square(m->be, n->xsq, act[l], B * in, pol));
        DT_MODEL_GRAD(m, m->params[2 * kw].name, false,
                      dt_dense_backward_weight(m->be, first ? m->params[2 * kw].g : n->gw, act[l],
                                               dy, B, in, out, pol));
        DT_MODEL_GRAD(m, m->params[2 * kw + 1].name, false,
                      dt_dense_backward_weight(m->be, first ? m->params[2 * kw + 1].g : n->gv,
                                               n->xsq, n->tv, B, in, out, pol));
        if (!first) DT_FORWARD_IF_ERROR(local_add_slots(m, kw, in * out, slots, pol));
        if (l == 0) break;
        float *dx = (dy == n->grad) ? n->grad2 : n->grad;
        DT_MODEL_GRAD(m, m->params[2 * kw].name, true,
                      dt_dense_backward_data(m->be, dx, dy, mu_of(m, kw), B, in, out, pol));
        DT_MODEL_GRAD(m, m->params[2 * kw + 1].name, true,
                      dt_dense_backward_data(m->be, n->grad3, n->tv, n->sig2[kw], B, in, out, pol));
        DT_FORWARD_IF_ERROR(dt_bnn_local_input_grad(m->be, dx, dx, act[l], n->grad3, B * in, pol));
        DT_FORWARD_IF_ERROR(dt_relu_backward(m->be, dx, dx, act[l], B * in, pol));
        dy = dx;
    }
    if (check && mode == DT_NOISE_LFSR) DT_FORWARD_IF_ERROR(check_row_lanes(m, s, B));
    return DT_OK;
}

/* The step's set-up, before pass 0: room for `slots` shard partials of a tensor's
 * gradient, the lanes, and every tensor's sigma. */
static enum dt_status step_setup(struct dt_model *m, int64_t slots, enum gen g, bool check,
                                 const struct dt_policy *pol)
{
    struct bnn *n = m->impl;
    if (slots > n->gw_slots) {
        dt_backend_free(m->be, n->gw);
        n->gw = dt_backend_alloc(m->be, (size_t)(slots * n->max_tensor) * sizeof(float));
        n->gw_slots = slots;
    }
    if (n->o.local) {
        if (slots > n->gv_slots) {
            dt_backend_free(m->be, n->gv);
            n->gv = dt_backend_alloc(m->be, (size_t)(slots * n->max_tensor) * sizeof(float));
            n->gv_slots = slots;
        }
        if (g == GEN_LFSR && !n->row_lanes) {
            n->row_lanes = dt_backend_alloc(m->be, (size_t)n->o.samples * (size_t)n->max_batch *
                                                       sizeof(struct dt_xoro));
            n->row_lanes_host = dt_xcalloc((size_t)n->max_batch, sizeof *n->row_lanes_host);
        }
        DT_FORWARD_IF_ERROR(sigmas(m, pol));
        for (int k = 0; k < n->n_tensors; k++)
            DT_FORWARD_IF_ERROR(dt_square(m->be, n->sig2[k], n->sigma[k], n->tsize[k], pol));
        return DT_OK;
    }
    if (g == GEN_LFSR) ensure_lanes(m, check);
    return sigmas(m, pol);
}

/* ops->forward. Training: pass s is Monte Carlo sample s (its activations kept for its
 * backward, as one graph over every sample would), its logits and dlogits its own.
 * Epsilon depends on (seed, step, member, sample, tensor) only, never on the rows, so
 * every rank and every shard layout draws the same. Evaluation: the mean network (w = mu),
 * for callers that want one forward (bnn_evaluate averages sampled models). */
static enum dt_status bnn_forward(struct dt_model *m, int64_t B, struct dt_pass *p,
                                  const struct dt_policy *pol)
{
    struct bnn *n = m->impl;
    if (!p->training) {
        float **act = act_of(n, 0);
        act[0] = m->x;
        for (int l = 0; l < n->L; l++)
            DT_FORWARD_IF_ERROR(layer_forward(m, l, B, act[l],
                                              l + 1 == n->L ? m->logits : act[l + 1],
                                              mu_of(m, 2 * l), mu_of(m, 2 * l + 1), pol));
        return DT_OK;
    }
    const enum gen g = generator(n, pol);
    const bool check = checking(m, g, pol);
    if (p->index == 0) DT_FORWARD_IF_ERROR(step_setup(m, p->slots, g, check, pol));
    if (n->o.local) DT_FORWARD_IF_ERROR(local_forward(m, p->index, B, g, pol));
    else DT_FORWARD_IF_ERROR(sample_forward(m, p->index, B, g, check, pol));
    p->logits = act_of(n, p->index)[n->L];
    p->dlogits = n->dlogits[p->index];
    return DT_OK;
}

/* ops->backward: sample s's data term, every batch reduction one partial per shard in the
 * slots of the mu and rho gradients; dt_bnn_finish scales the sum over the samples. */
static enum dt_status bnn_backward(struct dt_model *m, int64_t B, const struct dt_pass *p,
                                   const struct dt_policy *pol)
{
    struct bnn *n = m->impl;
    if (!p->training)
        return dt_error_set(&m->err, DT_ERR_UNSUPPORTED,
                            "bnn_mlp: backward runs on a training step's samples only");
    const enum gen g = generator(n, pol);
    if (n->o.local) return local_backward(m, p->index, B, g, checking(m, g, pol), p->slots, pol);
    return sample_backward(m, p->index, B, g, checking(m, g, pol), p->slots, pol);
}

/* ops->finish_gradients: the sample mean and the KL term, once per step (dt_bnn_finish). */
static enum dt_status bnn_finish_gradients(struct dt_model *m, const struct dt_policy *pol)
{
    struct bnn *n = m->impl;
    const float inv_s = 1.0f / (float)n->o.samples;
    const float prior_var = n->o.prior_sigma * n->o.prior_sigma;
    for (int k = 0; k < n->n_tensors; k++) {
        if (n->o.local) /* the summed (x^2)^T . t made rho's gradient */
            DT_FORWARD_IF_ERROR(dt_bnn_local_scale(m->be, m->params[2 * k + 1].g, n->sigma[k],
                                                   n->dsigma[k], n->tsize[k], pol));
        DT_FORWARD_IF_ERROR(dt_bnn_finish(m->be, m->params[2 * k].g, m->params[2 * k + 1].g,
                                          mu_of(m, k), n->sigma[k], n->dsigma[k], n->tsize[k],
                                          inv_s, n->o.kl_weight, prior_var, pol));
    }
    return DT_OK;
}

/* Evaluation: the predicted probabilities are the mean over test_samples sampled models
 * (evaluation draws use step 0 and sample t for model t). */
static enum dt_status bnn_evaluate(struct dt_model *m, const float *x, const uint8_t *y, int64_t N,
                                   const struct dt_policy *pol, struct dt_eval *out, uint8_t *pred)
{
    struct bnn *n = m->impl;
    const enum gen g = generator(n, pol);
    const int64_t C = m->n_classes;
    DT_FORWARD_IF_ERROR(sigmas(m, pol));
    if (g == GEN_LFSR) ensure_lanes(m, false);
    double *pbar = dt_xcalloc((size_t)(N * C), sizeof *pbar);
    float *probs = dt_xmalloc((size_t)(m->max_batch * C) * sizeof(float));
    enum dt_status st = DT_OK;
    float **act = act_of(n, 0);
    for (int t = 0; t < n->o.test_samples && st == DT_OK; t++) {
        if (g == GEN_LFSR) st = seed_lanes(m, 0, t, 0, pol);
        for (int k = 0; k < n->n_tensors && st == DT_OK; k++) {
            st = draw_forward(m, g, k, 0, t, 0, n->eps_ws, pol);
            if (st == DT_OK)
                st = dt_bnn_sample(m->be, n->eval_w[k], mu_of(m, k), n->sigma[k], n->eps_ws,
                                   n->tsize[k], pol);
        }
        for (int64_t s0 = 0; s0 < N && st == DT_OK; s0 += m->max_batch) {
            int64_t B = N - s0 < m->max_batch ? N - s0 : m->max_batch;
            dt_model_load_batch(m, x + s0 * m->in_dim, y + s0, B);
            act[0] = m->x;
            for (int l = 0; l < n->L && st == DT_OK; l++)
                st = layer_forward(m, l, B, act[l], act[l + 1], n->eval_w[2 * l],
                                   n->eval_w[2 * l + 1], pol);
            float lossb;
            if (st == DT_OK)
                st = dt_softmax_xent_forward(m->be, m->probs, &lossb, NULL, act[n->L], m->labels, B,
                                             C, pol);
            if (st != DT_OK) break;
            dt_backend_download(m->be, probs, m->probs, (size_t)(B * C) * sizeof(float));
            for (int64_t i = 0; i < B * C; i++) pbar[s0 * C + i] += probs[i];
        }
    }
    if (st == DT_OK) {
        struct dt_ece_bins bins;
        memset(&bins, 0, sizeof bins);
        double nll = 0.0;
        int64_t correct = 0;
        const double inv_t = 1.0 / (double)n->o.test_samples;
        for (int64_t i = 0; i < N; i++) {
            const double *p = pbar + i * C;
            int64_t arg = 0;
            for (int64_t c = 1; c < C; c++)
                if (p[c] > p[arg]) arg = c;
            double py = p[y[i]] * inv_t;
            nll -= log(py > 1e-300 ? py : 1e-300);
            correct += arg == y[i];
            if (pred) pred[i] = (uint8_t)arg;
            dt_ece_add(&bins, p[arg] * inv_t, arg == y[i]);
        }
        out->loss = N > 0 ? nll / (double)N : NAN;
        out->accuracy = N > 0 ? (double)correct / (double)N : NAN;
        out->ece = dt_ece_finish(&bins);
    }
    free(pbar);
    free(probs);
    return st;
}

static void bnn_memory(const struct dt_model *m, const struct dt_policy *pol,
                       struct dt_model_memory *out)
{
    const struct bnn *n = m->impl;
    memset(out, 0, sizeof *out);
    if (n->o.local) { /* noise per activation: kept (stored) or nothing but the row lanes */
        if (dt_rng_stored(pol))
            out->eps_held = (int64_t)n->o.samples * n->noise_total * (int64_t)sizeof(float);
        if (dt_rng_lfsr(pol))
            out->rng_state = (int64_t)n->o.samples * n->max_batch * (int64_t)sizeof(struct dt_xoro);
        return;
    }
    if (dt_rng_stored(pol)) {
        out->eps_held = (int64_t)n->o.samples * n->total * (int64_t)sizeof(float);
        return;
    }
    out->eps_workspace = n->max_tensor * (int64_t)sizeof(float);
    if (dt_rng_lfsr(pol))
        out->rng_state = (int64_t)n->o.samples * n->o.lanes * (int64_t)sizeof(struct dt_xoro);
}

static void bnn_destroy(struct dt_model *m)
{
    struct bnn *n = m->impl;
    if (!n) return;
    for (int s = 0; s < n->o.samples; s++) {
        for (int l = 1; l <= n->L; l++) dt_backend_free(m->be, act_of(n, s)[l]);
        dt_backend_free(m->be, n->dlogits[s]);
    }
    for (int k = 0; k < n->n_tensors; k++) {
        dt_backend_free(m->be, n->sigma[k]);
        dt_backend_free(m->be, n->dsigma[k]);
        dt_backend_free(m->be, n->eval_w[k]);
    }
    if (n->sd)
        for (int i = 0; i < n->o.samples * n->L; i++) dt_backend_free(m->be, n->sd[i]);
    for (int k = 0; k < n->n_tensors; k++) dt_backend_free(m->be, n->sig2[k]);
    dt_backend_free(m->be, n->noise_store);
    dt_backend_free(m->be, n->xsq);
    dt_backend_free(m->be, n->tv);
    dt_backend_free(m->be, n->grad3);
    dt_backend_free(m->be, n->gv);
    dt_backend_free(m->be, n->row_lanes);
    free(n->row_lanes_host);
    free(n->sd);
    dt_backend_free(m->be, n->grad);
    dt_backend_free(m->be, n->grad2);
    dt_backend_free(m->be, n->gw);
    dt_backend_free(m->be, n->ww);
    dt_backend_free(m->be, n->wb);
    dt_backend_free(m->be, n->eps_ws);
    dt_backend_free(m->be, n->eps_store);
    dt_backend_free(m->be, n->lanes);
    free(n->act);
    free(n->dlogits);
    free(n->seeds);
    free(n->ckpt);
    free(n->probe);
    free(n->host_a);
    free(n->host_b);
    free(n);
    m->impl = NULL;
}

static const struct dt_model_ops bnn_ops = {
    .kind = "bnn_mlp",
    .forward = bnn_forward,
    .backward = bnn_backward,
    .destroy = bnn_destroy,
    .evaluate = bnn_evaluate,
    .memory = bnn_memory,
    .finish_gradients = bnn_finish_gradients,
};

enum dt_status dt_bnn_mlp_create(struct dt_model **out, struct dt_backend *be, int64_t in_dim,
                                 const int64_t *hidden, int n_hidden, int64_t n_classes,
                                 int64_t max_batch, const struct dt_bnn_options *opt,
                                 struct dt_error *err)
{
    *out = NULL;
    if (n_hidden < 0 || n_hidden + 1 > BNN_MAX_LAYERS)
        return dt_error_set(err, DT_ERR_CONFIG, "bnn_mlp: %d hidden layers (at most %d)", n_hidden,
                            BNN_MAX_LAYERS - 1);
    if (opt->samples < 1 || opt->samples > (int)DT_PHILOX_MAX_SAMPLE + 1 || opt->test_samples < 1 ||
        opt->test_samples > (int)DT_PHILOX_MAX_SAMPLE + 1)
        return dt_error_set(err, DT_ERR_CONFIG,
                            "bnn_mlp: samples %d and test_samples %d must be in 1..%u (the "
                            "Philox counter holds 8 bits of sample index)",
                            opt->samples, opt->test_samples, DT_PHILOX_MAX_SAMPLE + 1);
    if (opt->lanes < 1 || opt->prior_sigma <= 0.0f || !(opt->kl_weight >= 0.0f) ||
        opt->lfsr_check_every < 1)
        return dt_error_set(err, DT_ERR_CONFIG,
                            "bnn_mlp: lanes %lld, prior_sigma %g, kl_weight %g, "
                            "lfsr_check_every %lld: lanes, prior_sigma and lfsr_check_every "
                            "must be positive and kl_weight >= 0",
                            (long long)opt->lanes, (double)opt->prior_sigma, (double)opt->kl_weight,
                            (long long)opt->lfsr_check_every);
    struct dt_model *m = dt_xcalloc(1, sizeof *m);
    struct bnn *n = dt_xcalloc(1, sizeof *n);
    n->o = *opt;
    n->L = n_hidden + 1;
    n->n_tensors = 2 * n->L;
    n->skip_tensor = -1;
    n->dims[0] = in_dim;
    for (int i = 0; i < n_hidden; i++) n->dims[i + 1] = hidden[i];
    n->dims[n->L] = n_classes;
    dt_model_setup(m, &bnn_ops, be, 2 * n->n_tensors, in_dim, n_classes, max_batch);
    m->impl = n;
    m->passes = n->o.samples; /* one pass per Monte Carlo sample */
    for (int l = 0; l <= n->L; l++) n->max_dim = n->dims[l] > n->max_dim ? n->dims[l] : n->max_dim;
    int64_t max_w = 0, max_b = 0;
    for (int l = 0; l < n->L; l++) {
        const int64_t wshape[2] = {n->dims[l], n->dims[l + 1]};
        for (int b = 0; b < 2; b++) {
            const int k = 2 * l + b;
            char name[DT_PARAM_NAME];
            snprintf(n->tname[k], sizeof n->tname[k], "dense%d.%s", l, b ? "bias" : "weight");
            n->tsize[k] = b ? wshape[1] : wshape[0] * wshape[1];
            n->toff[k] = n->total;
            n->total += n->tsize[k];
            n->max_tensor = n->tsize[k] > n->max_tensor ? n->tsize[k] : n->max_tensor;
            snprintf(name, sizeof name, "%s_mu", n->tname[k]);
            dt_model_param(m, 2 * k, name, b ? 1 : 2, b ? &wshape[1] : wshape, b ? 0 : n->dims[l]);
            snprintf(name, sizeof name, "%s_rho", n->tname[k]);
            dt_model_param(m, 2 * k + 1, name, b ? 1 : 2, b ? &wshape[1] : wshape, 0);
            m->params[2 * k + 1].init_value = opt->rho_init;
            n->sigma[k] = dt_backend_alloc(be, (size_t)n->tsize[k] * sizeof(float));
            n->dsigma[k] = dt_backend_alloc(be, (size_t)n->tsize[k] * sizeof(float));
            n->eval_w[k] = dt_backend_alloc(be, (size_t)n->tsize[k] * sizeof(float));
        }
        max_w = n->tsize[2 * l] > max_w ? n->tsize[2 * l] : max_w;
        max_b = n->tsize[2 * l + 1] > max_b ? n->tsize[2 * l + 1] : max_b;
    }
    const int S = opt->samples;
    n->act = dt_xcalloc((size_t)S * (size_t)(n->L + 1), sizeof *n->act);
    n->dlogits = dt_xcalloc((size_t)S, sizeof *n->dlogits);
    for (int s = 0; s < S; s++) {
        for (int l = 1; l <= n->L; l++)
            act_of(n, s)[l] =
                dt_backend_alloc(be, (size_t)(max_batch * n->dims[l]) * sizeof(float));
        n->dlogits[s] = dt_backend_alloc(be, (size_t)(max_batch * n_classes) * sizeof(float));
    }
    n->grad = dt_backend_alloc(be, (size_t)(max_batch * n->max_dim) * sizeof(float));
    n->grad2 = dt_backend_alloc(be, (size_t)(max_batch * n->max_dim) * sizeof(float));
    /* n->gw: allocated by step_setup for the shard slots of its first step */
    n->ww = dt_backend_alloc(be, (size_t)max_w * sizeof(float));
    n->wb = dt_backend_alloc(be, (size_t)max_b * sizeof(float));
    n->eps_ws = dt_backend_alloc(
        be,
        (size_t)(n->max_tensor > max_batch * n->max_dim ? n->max_tensor : max_batch * n->max_dim) *
            sizeof(float));
    n->max_batch = max_batch;
    if (opt->local) {
        for (int k = 0; k < n->n_tensors; k++)
            n->sig2[k] = dt_backend_alloc(be, (size_t)n->tsize[k] * sizeof(float));
        n->sd = dt_xcalloc((size_t)S * (size_t)n->L, sizeof *n->sd);
        for (int s = 0; s < S; s++)
            for (int l = 0; l < n->L; l++)
                n->sd[(size_t)s * (size_t)n->L + l] =
                    dt_backend_alloc(be, (size_t)(max_batch * n->dims[l + 1]) * sizeof(float));
        for (int l = 0; l < n->L; l++) {
            n->noise_off[l] = n->noise_total;
            n->noise_total += max_batch * n->dims[l + 1];
        }
        const size_t scratch = (size_t)(max_batch * n->max_dim) * sizeof(float);
        n->xsq = dt_backend_alloc(be, scratch);
        n->tv = dt_backend_alloc(be, scratch);
        n->grad3 = dt_backend_alloc(be, scratch);
    }
    /* the regenerated noise or epsilon of one tensor or layer, and its host copies */
    const int64_t ws =
        n->max_tensor > max_batch * n->max_dim ? n->max_tensor : max_batch * n->max_dim;
    n->host_a = dt_xmalloc((size_t)ws * sizeof(float));
    n->host_b = dt_xmalloc((size_t)ws * sizeof(float));
    *out = m;
    return DT_OK;
}

enum dt_status dt_bnn_set_debug(struct dt_model *m, bool verify, int skip_tensor)
{
    if (m->ops != &bnn_ops) return DT_ERR_USAGE;
    struct bnn *n = m->impl;
    if (skip_tensor >= (n->o.local ? n->L : n->n_tensors)) return DT_ERR_USAGE;
    n->verify = verify;
    n->skip_tensor = skip_tensor;
    return DT_OK;
}

int64_t dt_bnn_verified_tensors(const struct dt_model *m)
{
    return m->ops == &bnn_ops ? ((const struct bnn *)m->impl)->verified : 0;
}

const char *dt_bnn_tensor_name(const struct dt_model *m, int k)
{
    const struct bnn *n = m->impl;
    return (m->ops == &bnn_ops && k >= 0 && k < n->n_tensors) ? n->tname[k] : "?";
}

/* ---- the registry row (nets/models.h) -------------------------------------------------- */

/* The MLP's sizes twice (mu and rho), sigma and the sampled weights per parameter, epsilon
 * per sample under rng: stored, the activations once per sample. */
static struct dt_model_size bnn_mlp_size(const struct dt_model_spec *s)
{
    struct dt_model_size z = dt_mlp_size(s);
    z.params *= 2;
    /* sigma, the sampled weights and their gradients (measured: 3.75 floats per mu or rho);
     * rng: stored keeps every sample's epsilon, one float per weight (0.5 per mu or rho) */
    z.extra_per_param += 3.75;
    z.stored_per_param_per_sample = 0.5;
    z.acts_per_example *= s->bnn.samples;
    if (s->bnn.local) {
        /* no epsilon per weight; per tensor sigma^2 and the variance's gradient; per sample
         * and unit the noise's scale and (rng: stored, counted always) the noise itself; x^2,
         * t and the variance's input gradient as scratch (the widest layer's) */
        double units = (double)s->n_classes, widest = (double)(s->height * s->width * s->channels);
        for (int l = 0; l < s->n_hidden; l++) {
            units += (double)s->hidden[l];
            widest = (double)s->hidden[l] > widest ? (double)s->hidden[l] : widest;
        }
        z.stored_per_param_per_sample = 0.0;
        z.extra_per_param += 1.0;
        z.acts_per_example += 2.0 * units * s->bnn.samples + 3.0 * widest;
    }
    return z;
}

static enum dt_status bnn_mlp_kind_create(struct dt_model **out, struct dt_backend *be,
                                          const struct dt_model_spec *s, struct dt_error *err)
{
    return dt_bnn_mlp_create(out, be, s->height * s->width * s->channels, s->hidden, s->n_hidden,
                             s->n_classes, s->batch, &s->bnn, err);
}

const struct dt_model_kind_info dt_bnn_mlp_kind = {
    .name = "bnn_mlp",
    .keys = "model.hidden model.estimator model.samples model.test_samples model.prior_sigma "
            "model.rho_init model.lanes model.stored_generator model.lfsr_check_every",
    .draws_epsilon = true,
    .extra_control = "rng",
    .create = bnn_mlp_kind_create,
    .size = bnn_mlp_size,
};
