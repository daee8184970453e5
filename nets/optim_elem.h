/* The optimizers' per-element arithmetic, written once for every backend and model (the
 * CPU ops in nets/cpu/optim.c, the CUDA kernels in nets/cuda/optim.cu, and the tests): SGD with
 * momentum and weight decay, AdamW, and the global-norm clipping's chunk of squares and factor.
 * Products and quotients go through dt_rn_mul / dt_rn_div, sums are plain (no contraction anywhere:
 * -ffp-contract=off,
 * --fmad=false), so the host and the device give the same bits. */
#ifndef DT_OPTIM_ELEM_H
#define DT_OPTIM_ELEM_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/hd.h"

/* ---- SGD with momentum (PyTorch's convention) ------------------------------------------
 * g' = g + wd w; v = mom v + g'; w = w - lr v -- each product and sum rounded on its own. */
static inline DT_HD void dt_sgd_elem(float *w, float *v, float g, float lr, float mom, float wd)
{
    const float gi = g + dt_rn_mul(wd, *w);
    const float vi = dt_rn_mul(mom, *v) + gi;
    *v = vi;
    *w = *w - dt_rn_mul(lr, vi);
}

/* ---- AdamW (decoupled weight decay, bias correction; PyTorch's order) ------------------
 * w -= lr * wd * w; m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2;
 * w -= lr * (m / bc1) / (sqrt(v / bc2) + eps), with bc1 = 1 - b1^t, bc2 = 1 - b2^t rounded
 * to float once per step by the caller (host doubles). */
struct dt_adamw_step {
    float lr, beta1, beta2, eps, weight_decay, bc1, bc2;
};

/* decay: weight_decay != 0 (the caller's test, once per loop, so a CPU loop has no branch
 * and vectorises). */
static inline DT_HD void dt_adamw_elem_(float *w, float *m, float *v, float g,
                                        const struct dt_adamw_step *s, bool decay)
{
    float wi = *w;
    if (decay) wi = wi - dt_rn_mul(dt_rn_mul(s->lr, s->weight_decay), wi);
    const float mi = dt_rn_mul(s->beta1, *m) + dt_rn_mul(1.0f - s->beta1, g);
    const float vi = dt_rn_mul(s->beta2, *v) + dt_rn_mul(dt_rn_mul(1.0f - s->beta2, g), g);
    const float mhat = dt_rn_div(mi, s->bc1);
    const float denom = sqrtf(dt_rn_div(vi, s->bc2)) + s->eps;
    *w = wi - dt_rn_mul(s->lr, dt_rn_div(mhat, denom));
    *m = mi;
    *v = vi;
}

static inline DT_HD void dt_adamw_elem(float *w, float *m, float *v, float g,
                                       const struct dt_adamw_step *s)
{
    dt_adamw_elem_(w, m, v, g, s, s->weight_decay != 0.0f);
}

/* ---- clipping by the global norm (torch.nn.utils.clip_grad_norm_'s factor) ----------- */

/* The squares of g[begin, end) summed in index order from +0: a chunk of the clipping
 * norm (each square rounded on its own). */
static inline DT_HD float dt_sq_sum(const float *g, int64_t begin, int64_t end)
{
    float s = 0.0f;
    for (int64_t i = begin; i < end; i++) s = s + dt_rn_mul(g[i], g[i]);
    return s;
}

/* min(1, max_norm / (sqrt(norm_sq) + 1e-6)); a NaN norm gives 1 (the non-finite scan then
 * names the gradient). */
static inline DT_HD float dt_clip_coef(float norm_sq, float max_norm)
{
    const float c = dt_rn_div(max_norm, sqrtf(norm_sq) + 1e-6f);
    return c < 1.0f ? c : 1.0f;
}

#endif
