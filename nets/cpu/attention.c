/* Causal self-attention on the CPU backend (the formulas: nets/gpt_elem.h, the ones a CUDA
 * kernel calls), one worker per (example, head) row set, so the thread count changes speed,
 * not bits. Under `math: fast` it takes the library path instead: its five products per
 * (example, head) through OpenBLAS, the calls the CUDA backend makes (nets/gpt_attn_gemm.h),
 * the per-row softmax and dS between -- still one worker per (example, head), so even this
 * path's bits do not depend on the thread count -- except the backward where heads are
 * whole vectors (hd a multiple of 8 up to ATTN_HD_MAX), where the portable rows in registers
 * beat the library's small products (nanoGPT's CPU shape, 2 threads on a Zen 3: 0.72 against
 * 0.78 ms) and `fast` takes them. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "nets/cpu/cpu.h"
#include "nets/gpt_attn_gemm.h"
#include "nets/gpt_elem.h"

#define ATTN_HD_MAX 64 /* the widest head whose rows the vector loops keep in registers */

/* call(nv) with nv = n (hd / 8, 1 .. ATTN_HD_MAX / 8: the vector loops' condition) a
 * constant in each branch, so that a row's hd / 8 vectors stay in registers: a runtime
 * count kept them in memory, a fifth of the forward's time at hd 32 (nanoGPT's CPU shape). */
#define ATTN_BY_NV(call, n)                                                                        \
    switch (n) {                                                                                   \
    case 1: call(1); break;                                                                        \
    case 2: call(2); break;                                                                        \
    case 3: call(3); break;                                                                        \
    case 4: call(4); break;                                                                        \
    case 5: call(5); break;                                                                        \
    case 6: call(6); break;                                                                        \
    case 7: call(7); break;                                                                        \
    default: call(8); break;                                                                       \
    }
typedef float v8f __attribute__((vector_size(32))); /* mul and add two roundings */

/* T rounded up to whole key tiles: the transposed K and V rows' length, zeros past T. */
static inline int64_t attn_padded(int64_t T)
{
    return (T + DT_GPT_ATTN_TILE - 1) / DT_GPT_ATTN_TILE * DT_GPT_ATTN_TILE;
}

/* s4 (32 lanes) += coef[c] * rows_t[c * Tp + 0..31] for c ascending: 32 sums over c at
 * once, each from the value it holds, one product and one add per term. */
static inline __attribute__((always_inline)) void
tile_dots(v8f s4[4], const float *coef, const float *rows_t, int64_t Tp, int64_t hd)
{
    for (int64_t c = 0; c < hd; c++) {
        const float cc = coef[c], *r = rows_t + c * Tp;
#pragma GCC unroll 4
        for (int k = 0; k < 4; k++) {
            v8f x;
            memcpy(&x, r + 8 * k, sizeof x);
            s4[k] = s4[k] + cc * x;
        }
    }
}

struct attn_job {
    struct dt_backend *be;
    float *out, *att, *ds, *dqkv;
    const float *qkv, *dout, *p;
    int64_t B, T, H, D, hd;
    float scale;
    bool portable, exact;
};

/* items: (b, h, t) rows */
static void attn_forward_part(void *ctx, int64_t begin, int64_t end, int worker)
{
    const struct attn_job *j = ctx;
    const int64_t T = j->T, H = j->H, D = j->D, hd = j->hd;
    for (int64_t i = begin; i < end; i++) {
        const int64_t t = i % T, h = (i / T) % H, b = i / (T * H);
        dt_attn_row(j->out + (b * T + t) * D + h * hd, j->att + i * T, j->qkv, b, t, h, T, D, hd,
                    j->scale, j->portable, j->exact);
    }
}

/* items: (b, h) blocks; each query row dt_attn_row's online softmax over key tiles with
 * the same operations in the same order, laid out so that the loops run across
 * independent values and vectorise: a tile's scores across its keys (K transposed once per
 * block into kt, each score still summed over j ascending from +0), its exps across keys,
 * its output terms across the head's elements (each still summed over keys in order); the
 * maxima and the normaliser's sum stay serial. tests/test_gpt.c holds the bits to
 * dt_attn_row's (ops_are_the_shared_functions, attention_tiles). */
DT_VECTOR_PART(attn_forward_blocks_part)
{
    const struct attn_job *j = ctx;
    const int64_t T = j->T, H = j->H, D = j->D, hd = j->hd;
    const float scale = j->scale;
    const bool portable = j->portable;
    float *kt = dt_cpu_worker_buffer(j->be, worker, (size_t)(hd * T + hd));
    float *a = kt + hd * T, e[DT_GPT_ATTN_TILE];
    for (int64_t blk = begin; blk < end; blk++) {
        const int64_t b = blk / H, h = blk % H;
        const float *qkv = j->qkv + b * T * 3 * D + h * hd;
        for (int64_t s = 0; s < T; s++)
            for (int64_t c = 0; c < hd; c++) kt[c * T + s] = qkv[s * 3 * D + D + c];
        for (int64_t t = 0; t < T; t++) {
            float *out = j->out + (b * T + t) * D + h * hd, *p = j->att + (blk * T + t) * T;
            const float *q = qkv + t * 3 * D;
            float m = -INFINITY, l = 0.0f;
            for (int64_t c = 0; c < hd; c++) out[c] = 0.0f;
            for (int64_t s0 = 0; s0 <= t; s0 += DT_GPT_ATTN_TILE) {
                const int64_t n = t + 1 - s0 < DT_GPT_ATTN_TILE ? t + 1 - s0 : DT_GPT_ATTN_TILE;
                float *sc = p + s0;
                for (int64_t i = 0; i < n; i++) sc[i] = 0.0f;
                for (int64_t c = 0; c < hd; c++) {
                    const float qc = q[c], *kc = kt + c * T + s0;
                    for (int64_t i = 0; i < n; i++) sc[i] = sc[i] + dt_rn_mul(qc, kc[i]);
                }
                float mt = -INFINITY;
                for (int64_t i = 0; i < n; i++) {
                    sc[i] = dt_rn_mul(sc[i], scale);
                    if (sc[i] > mt) mt = sc[i];
                }
                const float m_new = m > mt ? m : mt;
                const float corr = m == -INFINITY ? 0.0f : dt_gpt_exp(m - m_new, portable);
                if (portable) /* dt_gpt_exp's two cases apart, as dt_attn_row_finish_at */
                    for (int64_t i = 0; i < n; i++) e[i] = dt_exp_portable(sc[i] - m_new);
                else
                    for (int64_t i = 0; i < n; i++) e[i] = expf(sc[i] - m_new);
                float lt = 0.0f;
                for (int64_t i = 0; i < n; i++) lt += e[i];
                l = dt_rn_mul(l, corr) + lt;
                for (int64_t c = 0; c < hd; c++) a[c] = 0.0f;
                for (int64_t i = 0; i < n; i++) {
                    const float ei = e[i], *v = qkv + (s0 + i) * 3 * D + 2 * D;
                    for (int64_t c = 0; c < hd; c++) a[c] = a[c] + dt_rn_mul(ei, v[c]);
                }
                for (int64_t c = 0; c < hd; c++) out[c] = dt_rn_mul(out[c], corr) + a[c];
                m = m_new;
            }
            dt_attn_row_finish_at(out, out, 1, p, m, l, t, T, hd, portable);
        }
    }
}

/* The same block's rows with the head's elements in registers, where hd is a multiple of 8
 * up to ATTN_HD_MAX (the GPTs': 16 and 32): a tile's 32 scores in four 8-key vectors summed over j
 * ascending from +0 (K transposed into kt, its rows padded to whole tiles with zeros: the
 * lanes past the tile's n keys are computed and dropped), its exps across all 32 lanes
 * (only the first n used), and the output terms in hd / 8 vectors summed over the keys in
 * order, stored once a tile. Every kept value sees dt_attn_tile's operations in its order:
 * the same bits (tests/test_gpt.c: attention_tiles, ops_are_the_shared_functions). */

static inline __attribute__((always_inline)) void
attn_forward_rows(const struct attn_job *j, int64_t begin, int64_t end, int worker, int64_t nv)
{
    const int64_t T = j->T, H = j->H, D = j->D, hd = j->hd, Tp = attn_padded(T);
    const float scale = j->scale;
    const bool portable = j->portable;
    float *kt = dt_cpu_worker_buffer(j->be, worker, (size_t)(hd * Tp));
    float sc[DT_GPT_ATTN_TILE], e[DT_GPT_ATTN_TILE];
    for (int64_t blk = begin; blk < end; blk++) {
        const int64_t b = blk / H, h = blk % H;
        const float *qkv = j->qkv + b * T * 3 * D + h * hd;
        for (int64_t c = 0; c < hd; c++) {
            for (int64_t s = 0; s < T; s++) kt[c * Tp + s] = qkv[s * 3 * D + D + c];
            for (int64_t s = T; s < Tp; s++) kt[c * Tp + s] = 0.0f;
        }
        for (int64_t t = 0; t < T; t++) {
            float *out = j->out + (b * T + t) * D + h * hd, *p = j->att + (blk * T + t) * T;
            const float *q = qkv + t * 3 * D;
            float m = -INFINITY, l = 0.0f;
            v8f o[ATTN_HD_MAX / 8];
#pragma GCC unroll 8
            for (int64_t k = 0; k < nv; k++) o[k] = (v8f){0};
            for (int64_t s0 = 0; s0 <= t; s0 += DT_GPT_ATTN_TILE) {
                const int64_t n = t + 1 - s0 < DT_GPT_ATTN_TILE ? t + 1 - s0 : DT_GPT_ATTN_TILE;
                v8f s4[4] = {{0}, {0}, {0}, {0}};
                tile_dots(s4, q, kt + s0, Tp, hd);
#pragma GCC unroll 4
                for (int k = 0; k < 4; k++) {
                    const v8f v = s4[k] * scale;
                    memcpy(sc + 8 * k, &v, sizeof v);
                }
                float mt = -INFINITY;
                for (int64_t i = 0; i < n; i++) mt = sc[i] > mt ? sc[i] : mt;
                const float m_new = m > mt ? m : mt;
                const float corr = m == -INFINITY ? 0.0f : dt_gpt_exp(m - m_new, portable);
                if (portable)
                    for (int i = 0; i < DT_GPT_ATTN_TILE; i++)
                        e[i] = dt_exp_portable(sc[i] - m_new);
                else
                    for (int i = 0; i < DT_GPT_ATTN_TILE; i++) e[i] = expf(sc[i] - m_new);
                float lt = 0.0f;
                for (int64_t i = 0; i < n; i++) lt += e[i];
                l = dt_rn_mul(l, corr) + lt;
                v8f a[ATTN_HD_MAX / 8];
#pragma GCC unroll 8
                for (int64_t k = 0; k < nv; k++) a[k] = (v8f){0};
                for (int64_t i = 0; i < n; i++) {
                    const float ei = e[i], *v = qkv + (s0 + i) * 3 * D + 2 * D;
#pragma GCC unroll 8
                    for (int64_t k = 0; k < nv; k++) {
                        v8f vv;
                        memcpy(&vv, v + 8 * k, sizeof vv);
                        a[k] = a[k] + ei * vv;
                    }
                }
#pragma GCC unroll 8
                for (int64_t k = 0; k < nv; k++) o[k] = o[k] * corr + a[k];
                memcpy(p + s0, sc, (size_t)n * sizeof(float));
                m = m_new;
            }
#pragma GCC unroll 8
            for (int64_t k = 0; k < nv; k++) memcpy(out + 8 * k, &o[k], sizeof o[k]);
            dt_attn_row_finish_at(out, out, 1, p, m, l, t, T, hd, portable);
        }
    }
}

DT_VECTOR_PART(attn_forward_vec_part)
{
    const struct attn_job *j = ctx;
#define ATTN_FORWARD_ROWS(nv) attn_forward_rows(j, begin, end, worker, nv)
    ATTN_BY_NV(ATTN_FORWARD_ROWS, j->hd / 8);
#undef ATTN_FORWARD_ROWS
}

static void attn_dscores_part(void *ctx, int64_t begin, int64_t end, int worker)
{
    const struct attn_job *j = ctx;
    const int64_t T = j->T, H = j->H;
    for (int64_t i = begin; i < end; i++) {
        const int64_t t = i % T, h = (i / T) % H, b = i / (T * H);
        dt_attn_row_dscores(j->ds + i * T, j->p + i * T, j->dout, j->qkv, b, t, h, T, j->D, j->hd,
                            j->scale, j->exact);
    }
}

/* items: (b, h) blocks; each row of dS as dt_attn_row_dscores makes it (not under `exact`),
 * its dp sums laid across the row's positions, 32 in registers at a time: V transposed once
 * per block into vt (rows padded to whole tiles with zeros), each dp[s] still summed over j
 * ascending from +0; then dt_attn_dscores_finish. Same bits (tests/test_gpt.c,
 * ops_are_the_shared_functions, attention_tiles). */
DT_VECTOR_PART(attn_dscores_blocks_part)
{
    const struct attn_job *j = ctx;
    const int64_t T = j->T, H = j->H, D = j->D, hd = j->hd, Tp = attn_padded(T);
    float *vt = dt_cpu_worker_buffer(j->be, worker, (size_t)(hd * Tp));
    for (int64_t blk = begin; blk < end; blk++) {
        const int64_t b = blk / H, h = blk % H;
        const float *v = j->qkv + b * T * 3 * D + 2 * D + h * hd;
        for (int64_t c = 0; c < hd; c++) {
            for (int64_t s = 0; s < T; s++) vt[c * Tp + s] = v[s * 3 * D + c];
            for (int64_t s = T; s < Tp; s++) vt[c * Tp + s] = 0.0f;
        }
        for (int64_t t = 0; t < T; t++) {
            float *ds = j->ds + (blk * T + t) * T;
            const float *dy = j->dout + (b * T + t) * D + h * hd;
            /* 32 positions at a time in four registers, each summed over c from +0 */
            for (int64_t s0 = 0; s0 <= t; s0 += DT_GPT_ATTN_TILE) {
                const int64_t n = t + 1 - s0 < DT_GPT_ATTN_TILE ? t + 1 - s0 : DT_GPT_ATTN_TILE;
                v8f s4[4] = {{0}, {0}, {0}, {0}};
                tile_dots(s4, dy, vt + s0, Tp, hd);
                float tile[DT_GPT_ATTN_TILE];
                memcpy(tile, s4, sizeof tile);
                memcpy(ds + s0, tile, (size_t)n * sizeof(float));
            }
            dt_attn_dscores_finish(ds, j->p + (blk * T + t) * T, t, T, j->scale, false);
        }
    }
}

/* items: (b, u) rows of dqkv, every element of q, k and v */
static void attn_grad_part(void *ctx, int64_t begin, int64_t end, int worker)
{
    const struct attn_job *j = ctx;
    const int64_t T = j->T, D = j->D, hd = j->hd;
    for (int64_t i = begin; i < end; i++) {
        const int64_t b = i / T, u = i % T;
        float *row = j->dqkv + i * 3 * D;
        for (int which = 0; which < 3; which++)
            for (int64_t e = 0; e < D; e++)
                row[which * D + e] = dt_attn_grad_elem(j->ds, j->p, j->dout, j->qkv, b, u, e / hd,
                                                       e % hd, which, T, D, hd, j->exact);
    }
}

/* items: (b, h) blocks; every element of the block's dq, dk, dv rows the sum
 * dt_attn_grad_elem makes, in its order (from +0, positions ascending), but a row at a
 * time: each term added to the whole row (dt_attn_grad_term, as the CUDA tiles do), so the
 * loop over the row's elements vectorises -- the same bits. */
DT_VECTOR_PART(attn_grad_rows_part)
{
    const struct attn_job *j = ctx;
    const int64_t T = j->T, H = j->H, D = j->D, hd = j->hd;
    for (int64_t k = begin; k < end; k++) {
        const int64_t b = k / H, h = k % H;
        const float *dsb = j->ds + k * T * T, *pb = j->p + k * T * T;
        const float *qkv = j->qkv + b * T * 3 * D + h * hd, *dout = j->dout + b * T * D + h * hd;
        for (int64_t u = 0; u < T; u++) {
            float *dq = j->dqkv + (b * T + u) * 3 * D + h * hd, *dk = dq + D, *dv = dq + 2 * D;
            for (int64_t e = 0; e < hd; e++) dq[e] = dk[e] = dv[e] = 0.0f;
            for (int64_t s = 0; s <= u; s++)
                dt_attn_grad_term(dq, dsb[u * T + s], qkv + s * 3 * D + D, hd);
            for (int64_t t = u; t < T; t++) {
                dt_attn_grad_term(dk, dsb[t * T + u], qkv + t * 3 * D, hd);
                dt_attn_grad_term(dv, pb[t * T + u], dout + t * D, hd);
            }
        }
    }
}

/* The same with each row's sums in registers where hd is a multiple of 8 up to ATTN_HD_MAX
 * (attn_forward_vec_part's condition): dq's over s <= u, then dk's and dv's over t >= u,
 * each from +0 in position order, stored once -- the same bits. */
static inline __attribute__((always_inline)) void grad_rows_store(float *dst, const v8f *a,
                                                                  int64_t nv)
{
#pragma GCC unroll 8
    for (int64_t k = 0; k < nv; k++) memcpy(dst + 8 * k, &a[k], sizeof a[k]);
}

static inline __attribute__((always_inline)) void
attn_grad_rows(const struct attn_job *j, int64_t begin, int64_t end, int64_t nv)
{
    const int64_t T = j->T, H = j->H, D = j->D, hd = j->hd;
    for (int64_t k = begin; k < end; k++) {
        const int64_t b = k / H, h = k % H;
        const float *dsb = j->ds + k * T * T, *pb = j->p + k * T * T;
        const float *qkv = j->qkv + b * T * 3 * D + h * hd, *dout = j->dout + b * T * D + h * hd;
        for (int64_t u = 0; u < T; u++) {
            float *dq = j->dqkv + (b * T + u) * 3 * D + h * hd;
            v8f a[ATTN_HD_MAX / 8], c[ATTN_HD_MAX / 8];
#pragma GCC unroll 8
            for (int64_t v = 0; v < nv; v++) a[v] = (v8f){0};
            for (int64_t s = 0; s <= u; s++) {
                const float w = dsb[u * T + s], *x = qkv + s * 3 * D + D;
#pragma GCC unroll 8
                for (int64_t v = 0; v < nv; v++) {
                    v8f xv;
                    memcpy(&xv, x + 8 * v, sizeof xv);
                    a[v] = a[v] + w * xv;
                }
            }
            grad_rows_store(dq, a, nv);
#pragma GCC unroll 8
            for (int64_t v = 0; v < nv; v++) a[v] = c[v] = (v8f){0};
            for (int64_t t = u; t < T; t++) {
                const float wk = dsb[t * T + u], wv = pb[t * T + u];
                const float *xk = qkv + t * 3 * D, *xv = dout + t * D;
#pragma GCC unroll 8
                for (int64_t v = 0; v < nv; v++) {
                    v8f x1, x2;
                    memcpy(&x1, xk + 8 * v, sizeof x1);
                    memcpy(&x2, xv + 8 * v, sizeof x2);
                    a[v] = a[v] + wk * x1;
                    c[v] = c[v] + wv * x2;
                }
            }
            grad_rows_store(dq + D, a, nv);
            grad_rows_store(dq + 2 * D, c, nv);
        }
    }
}

DT_VECTOR_PART(attn_grad_rows_vec_part)
{
    const struct attn_job *j = ctx;
#define ATTN_GRAD_ROWS(nv) attn_grad_rows(j, begin, end, nv)
    ATTN_BY_NV(ATTN_GRAD_ROWS, j->hd / 8);
#undef ATTN_GRAD_ROWS
}

/* ---- attention's library path (math: fast) ---------------------------------------------- */

/* Element z of a strided-batch call (nets/gpt_attn_gemm.h) through OpenBLAS (one thread: the
 * pool's worker is the parallelism). */
static void gemm_one(const struct dt_gemm_call *g, int64_t z)
{
    cblas_sgemm(CblasColMajor, g->ta ? CblasTrans : CblasNoTrans, g->tb ? CblasTrans : CblasNoTrans,
                (blasint)g->m, (blasint)g->n, (blasint)g->k, g->alpha, g->a + z * g->stride_a,
                (blasint)g->lda, g->b + z * g->stride_b, (blasint)g->ldb, 0.0f,
                g->c + z * g->stride_c, (blasint)g->ldc);
}

/* The calls over the heads of one example (call b, element h): item k = b H + h is the
 * (b, h) block, rows k T .. k T + T - 1 of att and ds. */
static struct dt_attn_shape lib_shape(const struct attn_job *j)
{
    struct dt_attn_shape s = dt_attn_shape_of(j->B, j->T, j->H, j->D);
    s.over_examples = false;
    return s;
}

/* items: (b, h) blocks. S = scale Q K^T, the causal softmax per row, out = P V. */
static void attn_lib_forward_part(void *ctx, int64_t begin, int64_t end, int worker)
{
    const struct attn_job *j = ctx;
    const struct dt_attn_shape s = lib_shape(j);
    const int64_t T = j->T, H = j->H;
    for (int64_t k = begin; k < end; k++) {
        const int64_t b = k / H, h = k % H;
        const struct dt_gemm_call sc = dt_attn_gemm_scores(&s, j->att, j->qkv, b, j->scale);
        gemm_one(&sc, h);
        for (int64_t t = 0; t < T; t++) dt_attn_softmax_row(j->att + (k * T + t) * T, t, T, false);
        const struct dt_gemm_call o = dt_attn_gemm_out(&s, j->out, j->att, j->qkv, b);
        gemm_one(&o, h);
    }
}

/* items: (b, h) blocks. dP = dout V^T, dS per row, then dQ, dK, dV of the block's head. */
static void attn_lib_backward_part(void *ctx, int64_t begin, int64_t end, int worker)
{
    const struct attn_job *j = ctx;
    const struct dt_attn_shape s = lib_shape(j);
    const int64_t T = j->T, H = j->H;
    for (int64_t k = begin; k < end; k++) {
        const int64_t b = k / H, h = k % H;
        const struct dt_gemm_call dp = dt_attn_gemm_dp(&s, j->ds, j->dout, j->qkv, b);
        gemm_one(&dp, h);
        for (int64_t t = 0; t < T; t++)
            dt_attn_dscores_finish(j->ds + (k * T + t) * T, j->p + (k * T + t) * T, t, T, j->scale,
                                   false);
        for (int which = 0; which < 3; which++) {
            const struct dt_gemm_call g =
                dt_attn_gemm_grad(&s, j->dqkv, j->ds, j->p, j->dout, j->qkv, b, which);
            gemm_one(&g, h);
        }
    }
}

/* portable: per row in index order (dt_attn_row), or under math: exact each sum the exact
 * dot product of its vectors; `math` picks exp. math: fast: the library path above. */
enum dt_status dt_cpu_attention_forward(struct dt_backend *be, float *out, float *att,
                                        const float *qkv, int64_t B, int64_t T, int64_t H,
                                        int64_t D, const struct dt_policy *pol)
{
    struct attn_job j = {.be = be,
                         .out = out,
                         .att = att,
                         .qkv = qkv,
                         .B = B,
                         .T = T,
                         .H = H,
                         .D = D,
                         .hd = D / H,
                         .scale = dt_gpt_attn_scale(D / H),
                         .portable = dt_math_portable(pol),
                         .exact = dt_math_exact(pol)};
    if (dt_math_fast(pol)) dt_pool_run(dt_cpu(be)->pool, B * H, 1, attn_lib_forward_part, &j);
    else if (j.exact) dt_pool_run(dt_cpu(be)->pool, B * H * T, 4, attn_forward_part, &j);
    else if (j.hd % 8 == 0 && j.hd <= ATTN_HD_MAX)
        dt_pool_run(dt_cpu(be)->pool, B * H, 1, attn_forward_vec_part, &j);
    else dt_pool_run(dt_cpu(be)->pool, B * H, 1, attn_forward_blocks_part, &j);
    return DT_OK;
}

/* portable: the score gradients per row, then every element of dq, dk, dv one sum in index
 * order (dt_attn_grad_elem; a row at a time, attn_grad_rows_part, but under math: exact):
 * the sums over positions never depend on the split. math: fast: the library path above,
 * or these rows where the heads are whole vectors (the faster there). */
enum dt_status dt_cpu_attention_backward(struct dt_backend *be, float *dqkv, float *ds,
                                         const float *dout, const float *att, const float *qkv,
                                         int64_t B, int64_t T, int64_t H, int64_t D,
                                         const struct dt_policy *pol)
{
    struct attn_job j = {.be = be,
                         .ds = ds,
                         .dqkv = dqkv,
                         .qkv = qkv,
                         .dout = dout,
                         .p = att,
                         .B = B,
                         .T = T,
                         .H = H,
                         .D = D,
                         .hd = D / H,
                         .scale = dt_gpt_attn_scale(D / H),
                         .exact = dt_math_exact(pol)};
    const bool vec = j.hd % 8 == 0 && j.hd <= ATTN_HD_MAX;
    if (dt_math_fast(pol) && !vec) { /* with whole vectors the rows below are faster */
        dt_pool_run(dt_cpu(be)->pool, B * H, 1, attn_lib_backward_part, &j);
        return DT_OK;
    }
    if (j.exact) {
        dt_pool_run(dt_cpu(be)->pool, B * H * T, 4, attn_dscores_part, &j);
        dt_pool_run(dt_cpu(be)->pool, B * T, 2, attn_grad_part, &j);
        return DT_OK;
    }
    dt_pool_run(dt_cpu(be)->pool, B * H, 1, attn_dscores_blocks_part, &j);
    dt_pool_run(dt_cpu(be)->pool, B * H, 1, vec ? attn_grad_rows_vec_part : attn_grad_rows_part,
                &j);
    return DT_OK;
}
