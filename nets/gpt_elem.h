/* The GPT's per-element arithmetic, written once for every backend (nets/gpt.c's model, the
 * CPU ops of nets/cpu/embedding.c, norm.c, attention.c and activation.c, the CUDA kernels of
 * nets/cuda/embedding.cu, norm.cu, attention.cu and activation.cu, and tests/test_gpt.c): token
 * and position embedding, LayerNorm rows, causal attention rows and their gradients, GELU (tanh
 * form) (the optimizers' elements, AdamW's among them, are nets/optim_elem.h). Every sum here runs
 * in index order in one thread, so a device that calls these functions per row gets the CPU's bits.
 * Products and quotients go through dt_rn_mul / dt_rn_div (never fused into an FMA, on the host or
 * the device).
 *
 * `portable` selects the `math` control's portable exp/tanh (determinism/portable_math.h);
 * otherwise the C library's expf/tanhf (`fast` and `strict`). sqrtf is IEEE-exact on both. */
#ifndef DT_GPT_ELEM_H
#define DT_GPT_ELEM_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/hd.h"
#include "determinism/exact_product.h"
#include "determinism/portable_math.h"
#include "nets/optim_elem.h" /* AdamW and clipping, which the GPT trains with */

#define DT_GPT_LN_EPS 1e-5f
#define DT_GPT_VOCAB 256

static inline DT_HD float dt_gpt_exp(float x, bool portable)
{
    return portable ? dt_exp_portable(x) : expf(x);
}

static inline DT_HDI float dt_gpt_tanh(float x, bool portable)
{
    return portable ? dt_tanh_portable(x) : tanhf(x);
}

/* ---- embedding ------------------------------------------------------------------------ */

/* A window's byte value as a token id: x holds byte values 0..255 exactly; anything else
 * (a corrupt batch, NaN included) is clamped into the vocabulary as a float first, so that
 * no out-of-range conversion (undefined in C, saturating on a GPU) decides it. */
static inline DT_HD int32_t dt_gpt_token(float x)
{
    if (!(x >= 0.0f)) return 0;
    if (x >= (float)(DT_GPT_VOCAB - 1)) return DT_GPT_VOCAB - 1;
    return (int32_t)x;
}

/* Element e of the embedded batch h (B * T rows of D): wte[tok, i] + wpe[t, i] for row
 * r = b * T + t, i = e - r D, tok = the window's byte x[b, t] (x is (B, T + 1)). */
static inline DT_HD float dt_embed_elem(const float *x, const float *wte, const float *wpe,
                                        int64_t T, int64_t D, int64_t e)
{
    const int64_t r = e / D, i = e - r * D, b = r / T, t = r - b * T;
    return wte[(int64_t)dt_gpt_token(x[b * (T + 1) + t]) * D + i] + wpe[t * D + i];
}

/* ---- GELU, tanh form: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) ---------------- */

#define DT_GELU_K 0x1.988454p-1f /* sqrt(2/pi) */
#define DT_GELU_C 0x1.6e4cb8p-5f /* 0.044715 */

static inline DT_HDI float dt_gelu(float x, bool portable)
{
    const float x3 = dt_rn_mul(dt_rn_mul(x, x), x);
    const float u = dt_rn_mul(DT_GELU_K, x + dt_rn_mul(DT_GELU_C, x3));
    const float t = dt_gpt_tanh(u, portable);
    return dt_rn_mul(dt_rn_mul(0.5f, x), 1.0f + t);
}

/* dy * d gelu / dx = dy * (0.5 (1 + t) + 0.5 x (1 - t^2) k (1 + 3 c x^2)). */
static inline DT_HDI float dt_gelu_grad(float x, float dy, bool portable)
{
    const float x2 = dt_rn_mul(x, x);
    const float u = dt_rn_mul(DT_GELU_K, x + dt_rn_mul(DT_GELU_C, dt_rn_mul(x2, x)));
    const float t = dt_gpt_tanh(u, portable);
    const float du = dt_rn_mul(DT_GELU_K, 1.0f + dt_rn_mul(3.0f * DT_GELU_C, x2));
    const float left = dt_rn_mul(0.5f, 1.0f + t);
    const float right = dt_rn_mul(dt_rn_mul(dt_rn_mul(0.5f, x), 1.0f - dt_rn_mul(t, t)), du);
    return dt_rn_mul(dy, left + right);
}

/* ---- LayerNorm over a row of D ------------------------------------------------------- */

/* A row's sums run in one warp's order, on every backend: DT_GPT_LN_LANES lane partials --
 * lane j adds the terms of elements j, j + 32, j + 64, ... in that order -- combined by
 * dt_lanes_combine: p[i] + p[i + 16] for i < 16, then + 8, 4, 2, 1. That is the value an xor
 * shuffle butterfly leaves in every lane of a warp (each step adds the same two values in
 * both lanes, and float addition commutes), so the CUDA kernel runs a warp per row and the
 * CPU these loops, with the same bits (tests/test_gpt.c emulates the butterfly). */
#define DT_GPT_LN_LANES 32

static inline DT_HD float dt_lanes_combine(float *p)
{
    for (int off = DT_GPT_LN_LANES / 2; off >= 1; off /= 2)
        for (int i = 0; i < off; i++) p[i] = p[i] + p[i + off];
    return p[0];
}

/* Lane `lane`'s partials of the forward's two sums: x, and (x - mean)^2. */
static inline DT_HD float dt_ln_lane_sum(const float *x, int64_t D, int lane)
{
    float s = 0.0f;
    for (int64_t i = lane; i < D; i += DT_GPT_LN_LANES) s += x[i];
    return s;
}

static inline DT_HD float dt_ln_lane_sqdev(const float *x, float mean, int64_t D, int lane)
{
    float v = 0.0f;
    for (int64_t i = lane; i < D; i += DT_GPT_LN_LANES) {
        const float d = x[i] - mean;
        v += dt_rn_mul(d, d);
    }
    return v;
}

/* mean = (sum x) / D; rstd = 1 / sqrt((sum (x - mean)^2) / D + eps). */
static inline DT_HD float dt_ln_mean(float s, int64_t D) { return dt_rn_div(s, (float)D); }

static inline DT_HD float dt_ln_rstd(float v, int64_t D)
{
    return dt_rn_div(1.0f, sqrtf(dt_rn_div(v, (float)D) + DT_GPT_LN_EPS));
}

/* Lane `lane`'s outputs: y = (x - mean) * rstd * gamma + beta. */
static inline DT_HD void dt_ln_lane_out(float *y, const float *x, const float *gamma,
                                        const float *beta, float mean, float rstd, int64_t D,
                                        int lane)
{
    for (int64_t i = lane; i < D; i += DT_GPT_LN_LANES)
        y[i] = dt_rn_mul(dt_rn_mul(x[i] - mean, rstd), gamma[i]) + beta[i];
}

/* y = LayerNorm(x); *mean_out, *rstd_out kept for backward (the CPU's loop over lanes). */
static inline DT_HD void dt_layernorm_row(float *y, float *mean_out, float *rstd_out,
                                          const float *x, const float *gamma, const float *beta,
                                          int64_t D)
{
    float p[DT_GPT_LN_LANES];
    for (int lane = 0; lane < DT_GPT_LN_LANES; lane++) p[lane] = dt_ln_lane_sum(x, D, lane);
    const float mean = dt_ln_mean(dt_lanes_combine(p), D);
    for (int lane = 0; lane < DT_GPT_LN_LANES; lane++) p[lane] = dt_ln_lane_sqdev(x, mean, D, lane);
    const float rstd = dt_ln_rstd(dt_lanes_combine(p), D);
    for (int lane = 0; lane < DT_GPT_LN_LANES; lane++)
        dt_ln_lane_out(y, x, gamma, beta, mean, rstd, D, lane);
    *mean_out = mean;
    *rstd_out = rstd;
}

/* Backward: xhat = (x - mean) rstd, g = dy gamma; lane partials of sum g and sum g xhat. */
static inline DT_HD void dt_ln_lane_grad_sums(float *s1, float *s2, const float *dy, const float *x,
                                              float mean, float rstd, const float *gamma, int64_t D,
                                              int lane)
{
    float a = 0.0f, b = 0.0f;
    for (int64_t i = lane; i < D; i += DT_GPT_LN_LANES) {
        const float xhat = dt_rn_mul(x[i] - mean, rstd);
        const float g = dt_rn_mul(dy[i], gamma[i]);
        a += g;
        b += dt_rn_mul(g, xhat);
    }
    *s1 = a;
    *s2 = b;
}

/* Lane `lane`'s elements of dx = rstd (g - mean(g) - xhat mean(g xhat)) (added to what is
 * there with accumulate: a residual stream's gradient) and gx = dy xhat (the terms of
 * gamma's gradient, summed over rows by the caller's batch reduction); m1 = s1 / D,
 * m2 = s2 / D. */
static inline DT_HD void dt_ln_lane_grad_out(float *dx, float *gx, const float *dy, const float *x,
                                             float mean, float rstd, const float *gamma, float m1,
                                             float m2, int64_t D, int lane, bool accumulate)
{
    for (int64_t i = lane; i < D; i += DT_GPT_LN_LANES) {
        const float xhat = dt_rn_mul(x[i] - mean, rstd);
        const float g = dt_rn_mul(dy[i], gamma[i]);
        const float d = dt_rn_mul(rstd, (g - m1) - dt_rn_mul(xhat, m2));
        dx[i] = accumulate ? dx[i] + d : d;
        gx[i] = dt_rn_mul(dy[i], xhat);
    }
}

/* The row's input gradient into dx and dy * xhat into gx (the CPU's loop over lanes). */
static inline DT_HD void dt_layernorm_row_grad(float *dx, float *gx, const float *dy,
                                               const float *x, float mean, float rstd,
                                               const float *gamma, int64_t D, bool accumulate)
{
    float p1[DT_GPT_LN_LANES], p2[DT_GPT_LN_LANES];
    for (int lane = 0; lane < DT_GPT_LN_LANES; lane++)
        dt_ln_lane_grad_sums(&p1[lane], &p2[lane], dy, x, mean, rstd, gamma, D, lane);
    const float m1 = dt_rn_div(dt_lanes_combine(p1), (float)D);
    const float m2 = dt_rn_div(dt_lanes_combine(p2), (float)D);
    for (int lane = 0; lane < DT_GPT_LN_LANES; lane++)
        dt_ln_lane_grad_out(dx, gx, dy, x, mean, rstd, gamma, m1, m2, D, lane, accumulate);
}

/* ---- causal self-attention -------------------------------------------------------------
 * qkv is (B, T, 3D): row (b, t) holds q, then k, then v, each D = H * hd wide, head h at
 * offset h * hd. att is (B, H, T, T): row (b, h, t) holds the softmax weights over keys
 * s <= t (zeros beyond). scale = 1 / sqrt(hd), rounded once (dt_gpt_attn_scale). */

static inline DT_HD float dt_gpt_attn_scale(int64_t hd)
{
    return dt_rn_div(1.0f, sqrtf((float)hd));
}

/* The causal softmax of row t in place: scores p[0..t] on entry, weights on return, and
 * p[s] = 0 for t < s < T. */
static inline DT_HD void dt_attn_softmax_row(float *p, int64_t t, int64_t T, bool portable)
{
    float mx = -INFINITY;
    for (int64_t s = 0; s <= t; s++)
        if (p[s] > mx) mx = p[s];
    float z = 0.0f;
    for (int64_t s = 0; s <= t; s++) {
        p[s] = dt_gpt_exp(p[s] - mx, portable);
        z += p[s];
    }
    for (int64_t s = 0; s <= t; s++) p[s] = dt_rn_div(p[s], z);
    for (int64_t s = t + 1; s < T; s++) p[s] = 0.0f;
}

/* The scaled score of a query against a key: (sum_j q[j] k[j], in index order) * scale. */
static inline DT_HD float dt_attn_score_at(const float *q, int64_t q_stride, const float *k,
                                           int64_t hd, float scale)
{
    float dot = 0.0f;
    for (int64_t j = 0; j < hd; j++) dot += dt_rn_mul(q[j * q_stride], k[j]);
    return dt_rn_mul(dot, scale);
}
static inline DT_HD float dt_attn_score(const float *q, const float *k, int64_t hd, float scale)
{
    return dt_attn_score_at(q, 1, k, hd, scale);
}

/* Keys per tile of attention's online softmax (FlashAttention's algorithm). Part of
 * `portable`'s definition: where a tile ends, the running maximum, normaliser and output are
 * rescaled, so another tile size gives other bits; every backend and kernel runs these
 * tiles, key tile 0 first. */
#define DT_GPT_ATTN_TILE 32

/* One key tile of one query row's online softmax: the n keys k_i = k + i kstride and values
 * v_i = v + i vstride, n <= DT_GPT_ATTN_TILE. State: the running maximum *m (-inf before the
 * first tile), normaliser *l (0) and unnormalised output acc[0..hd) (zeros); sc receives the
 * tile's n scaled scores, kept for dt_attn_row_finish. Scores in key order; m' = max(m, the
 * tile's); every earlier term rescaled by exp(m - m') once (0 before the first tile);
 * l' = l exp(m - m') + sum_i e_i, acc'[j] = acc[j] exp(m - m') + sum_i e_i v_i[j],
 * e_i = exp(s_i - m'), each sum in key order. The CPU op and both CUDA kernels (per row, and
 * the shared-memory tiles) run exactly this; the tiled kernel keeps q and acc in shared
 * memory, element j of a row stride words after j - 1 (dt_attn_tile_at). */
static inline DT_HD void dt_attn_tile_at(float *acc, int64_t acc_stride, float *m, float *l,
                                         float *sc, const float *q, int64_t q_stride,
                                         const float *k, int64_t kstride, const float *v,
                                         int64_t vstride, int64_t n, int64_t hd, float scale,
                                         bool portable)
{
    float mt = -INFINITY, e[DT_GPT_ATTN_TILE];
    for (int64_t i = 0; i < n; i++) {
        sc[i] = dt_attn_score_at(q, q_stride, k + i * kstride, hd, scale);
        if (sc[i] > mt) mt = sc[i];
    }
    const float m_old = *m, m_new = m_old > mt ? m_old : mt;
    const float corr = m_old == -INFINITY ? 0.0f : dt_gpt_exp(m_old - m_new, portable);
    float lt = 0.0f;
    for (int64_t i = 0; i < n; i++) {
        e[i] = dt_gpt_exp(sc[i] - m_new, portable);
        lt += e[i];
    }
    *l = dt_rn_mul(*l, corr) + lt;
    for (int64_t j = 0; j < hd; j++) {
        float a = 0.0f;
        for (int64_t i = 0; i < n; i++) a += dt_rn_mul(e[i], v[i * vstride + j]);
        acc[j * acc_stride] = dt_rn_mul(acc[j * acc_stride], corr) + a;
    }
    *m = m_new;
}
static inline DT_HD void dt_attn_tile(float *acc, float *m, float *l, float *sc, const float *q,
                                      const float *k, int64_t kstride, const float *v,
                                      int64_t vstride, int64_t n, int64_t hd, float scale,
                                      bool portable)
{
    dt_attn_tile_at(acc, 1, m, l, sc, q, 1, k, kstride, v, vstride, n, hd, scale, portable);
}

/* The end of a query row t: out[j] = acc[j] / l (acc may be out), and the softmax
 * weights p[s] = exp(score_s - m) / l for s <= t from the scores the tiles left in p (no
 * product again), zeros for t < s < T -- what the backward reads. */
static inline DT_HDI void dt_attn_row_finish_at(float *out, const float *acc, int64_t acc_stride,
                                                float *p, float m, float l, int64_t t, int64_t T,
                                                int64_t hd, bool portable)
{
    for (int64_t j = 0; j < hd; j++) out[j] = dt_rn_div(acc[j * acc_stride], l);
    /* dt_gpt_exp's two cases apart, so that on the CPU the own exp inlines and the loop
     * vectorises (nets/cpu/attention.c) */
    if (portable)
        for (int64_t s = 0; s <= t; s++) p[s] = dt_rn_div(dt_exp_portable(p[s] - m), l);
    else
        for (int64_t s = 0; s <= t; s++) p[s] = dt_rn_div(expf(p[s] - m), l);
    for (int64_t s = t + 1; s < T; s++) p[s] = 0.0f;
}
static inline DT_HD void dt_attn_row_finish(float *out, float *p, float m, float l, int64_t t,
                                            int64_t T, int64_t hd, bool portable)
{
    dt_attn_row_finish_at(out, out, 1, p, m, l, t, T, hd, portable);
}

/* Row (b, h, t): out[j] = sum_s p[s] v_s[j] and p[s] for s <= t (p[s] = 0 beyond).
 * Unless `exact`, the online softmax over key tiles of DT_GPT_ATTN_TILE (dt_attn_tile, the
 * output accumulated in out, the tiles' scores in p), then dt_attn_row_finish. Under
 * `exact` (math: exact) the two-pass softmax and every dot product exact
 * (dt_xp_dot_vec: no order at all, so no tiles either). */
static inline DT_HD void dt_attn_row(float *out, float *p, const float *qkv, int64_t b, int64_t t,
                                     int64_t h, int64_t T, int64_t D, int64_t hd, float scale,
                                     bool portable, bool exact)
{
    const float *q = qkv + (b * T + t) * 3 * D + h * hd;
    const float *k0 = qkv + b * T * 3 * D + D + h * hd;    /* k_s at k0 + s 3D */
    const float *v = qkv + b * T * 3 * D + 2 * D + h * hd; /* v_s[j] at v[s 3D + j] */
    if (!exact) {
        float m = -INFINITY, l = 0.0f;
        for (int64_t j = 0; j < hd; j++) out[j] = 0.0f;
        for (int64_t s0 = 0; s0 <= t; s0 += DT_GPT_ATTN_TILE) {
            const int64_t n = t + 1 - s0 < DT_GPT_ATTN_TILE ? t + 1 - s0 : DT_GPT_ATTN_TILE;
            dt_attn_tile(out, &m, &l, p + s0, q, k0 + s0 * 3 * D, 3 * D, v + s0 * 3 * D, 3 * D, n,
                         hd, scale, portable);
        }
        dt_attn_row_finish(out, p, m, l, t, T, hd, portable);
        return;
    }
    for (int64_t s = 0; s <= t; s++)
        p[s] = dt_rn_mul(dt_xp_dot_vec(q, 1, k0 + s * 3 * D, 1, hd), scale);
    dt_attn_softmax_row(p, t, T, portable);
    for (int64_t j = 0; j < hd; j++) out[j] = dt_xp_dot_vec(p, 1, v + j, 3 * D, t + 1);
}

/* Row t of dS from dp in place: dp[0..t] on entry, dS[s] = p[s] (dp[s] - sum_s' p[s']
 * dp[s']) scale on return, zeros for t < s < T. The sum exact under `exact`. */
static inline DT_HD void dt_attn_dscores_finish(float *ds, const float *p, int64_t t, int64_t T,
                                                float scale, bool exact)
{
    float sum = 0.0f;
    if (exact) sum = dt_xp_dot_vec(p, 1, ds, 1, t + 1);
    else
        for (int64_t s = 0; s <= t; s++) sum += dt_rn_mul(p[s], ds[s]);
    for (int64_t s = 0; s <= t; s++) ds[s] = dt_rn_mul(dt_rn_mul(p[s], ds[s] - sum), scale);
    for (int64_t s = t + 1; s < T; s++) ds[s] = 0.0f;
}

/* Row (b, h, t) of dS, the gradient of the pre-softmax scores times scale:
 * dp[s] = dout_t . v_s, then dt_attn_dscores_finish. */
static inline DT_HD void dt_attn_row_dscores(float *ds, const float *p, const float *dout,
                                             const float *qkv, int64_t b, int64_t t, int64_t h,
                                             int64_t T, int64_t D, int64_t hd, float scale,
                                             bool exact)
{
    const float *dy = dout + (b * T + t) * D + h * hd;
    for (int64_t s = 0; s <= t; s++) {
        const float *v = qkv + (b * T + s) * 3 * D + 2 * D + h * hd;
        float dp = 0.0f;
        if (exact) dp = dt_xp_dot_vec(dy, 1, v, 1, hd);
        else
            for (int64_t j = 0; j < hd; j++) dp += dt_rn_mul(dy[j], v[j]);
        ds[s] = dp;
    }
    dt_attn_dscores_finish(ds, p, t, T, scale, exact);
}

/* One position's term of a gradient row, for every element at once: acc[j] += w x[j], j < hd
 * -- the term dt_attn_grad_elem adds at that position, so a kernel that walks the positions
 * in the same order, a whole row per thread, gets its bits (the CUDA tiled backward, whose
 * rows accumulate in shared memory, element j of a thread's row `stride` words after j - 1:
 * dt_attn_grad_term_at). */
static inline DT_HD void dt_attn_grad_term_at(float *acc, int64_t stride, float w, const float *x,
                                              int64_t hd)
{
    for (int64_t j = 0; j < hd; j++) acc[j * stride] += dt_rn_mul(w, x[j]);
}
static inline DT_HD void dt_attn_grad_term(float *acc, float w, const float *x, int64_t hd)
{
    dt_attn_grad_term_at(acc, 1, w, x, hd);
}

/* Element j of head h of the gradients at position u of example b, from dS and att
 * ((B, H, T, T) each) and dout (B, T, D):
 *   dq_u[j] = sum_{s <= u} dS[u, s] k_s[j]
 *   dk_u[j] = sum_{t >= u} dS[t, u] q_t[j]
 *   dv_u[j] = sum_{t >= u} p[t, u] dout_t[j]
 * each one sum in index order, or the exact dot product of its two strided vectors.
 * which: 0 = q, 1 = k, 2 = v. */
static inline DT_HD float dt_attn_grad_elem(const float *ds, const float *att, const float *dout,
                                            const float *qkv, int64_t b, int64_t u, int64_t h,
                                            int64_t j, int which, int64_t T, int64_t D, int64_t hd,
                                            bool exact)
{
    const float *dsb = ds + (b * (D / hd) + h) * T * T, *pb = att + (b * (D / hd) + h) * T * T;
    const float *q = qkv + b * T * 3 * D + h * hd + j; /* q_t[j] at q[t 3D] */
    if (exact) {
        if (which == 0) return dt_xp_dot_vec(dsb + u * T, 1, q + D, 3 * D, u + 1);
        if (which == 1) return dt_xp_dot_vec(dsb + u * T + u, T, q + u * 3 * D, 3 * D, T - u);
        return dt_xp_dot_vec(pb + u * T + u, T, dout + (b * T + u) * D + h * hd + j, D, T - u);
    }
    float acc = 0.0f;
    if (which == 0) {
        for (int64_t s = 0; s <= u; s++) acc += dt_rn_mul(dsb[u * T + s], q[s * 3 * D + D]);
    } else if (which == 1) {
        for (int64_t t = u; t < T; t++) acc += dt_rn_mul(dsb[t * T + u], q[t * 3 * D]);
    } else {
        for (int64_t t = u; t < T; t++)
            acc += dt_rn_mul(pb[t * T + u], dout[(b * T + t) * D + h * hd + j]);
    }
    return acc;
}

#endif
