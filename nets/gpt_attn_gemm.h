/* Attention's five products as BLAS calls, for a backend whose `fast` and `run_to_run`
 * levels hand them to a library (the CUDA backend: cuBLAS, TF32 allowed at `fast`,
 * pedantic FP32 with a fixed workspace at `run_to_run`; `portable` keeps the own per-row
 * kernels). Written once here as descriptors -- BLAS's column-major convention, each call a
 * strided batch over the heads of one example or over the examples for one head, whichever
 * makes fewer calls (every (b, h) block of every layout is at b ex + h hs) -- so that the CUDA
 * backend issues exactly these calls and the tests run the same descriptors through a plain host
 * BLAS (tests/test_gpt.c) against the CPU op. Host C only.
 *
 * Row-major layouts (nets/gpt_elem.h): qkv (B, T, 3D) with q, k, v of head h at columns
 * h hd, D + h hd, 2D + h hd; att and ds (B, H, T, T); out, dout (B, T, D); dqkv as qkv.
 * A row-major (r x c) matrix with leading dimension ld is, to BLAS, its transpose
 * (c x r, the same ld); so row-major C = X Y is the column-major C^T = Y^T X^T. */
#ifndef DT_GPT_ATTN_GEMM_H
#define DT_GPT_ATTN_GEMM_H

#include <stdbool.h>
#include <stdint.h>

/* C_i = alpha op(A_i) op(B_i) + 0 C_i for i < batch, column-major, A_i = a + i stride_a
 * and so on (cublasSgemmStridedBatched's arguments). */
struct dt_gemm_call {
    bool ta, tb; /* op(X) = X^T */
    int64_t m, n, k;
    float alpha;
    const float *a;
    int64_t lda, stride_a;
    const float *b;
    int64_t ldb, stride_b;
    float *c;
    int64_t ldc, stride_c;
    int64_t batch;
};

/* over_examples: each call a strided batch over the B examples for one head (H calls), else
 * over the H heads of one example (B calls); dt_attn_shape_of picks the fewer calls. */
struct dt_attn_shape {
    int64_t B, T, H, D;
    bool over_examples;
};

static inline struct dt_attn_shape dt_attn_shape_of(int64_t B, int64_t T, int64_t H, int64_t D)
{
    struct dt_attn_shape s = {B, T, H, D, H < B};
    return s;
}

/* The calls per product: H over the examples, else B. */
static inline int64_t dt_attn_gemm_calls(const struct dt_attn_shape *s)
{
    return s->over_examples ? s->H : s->B;
}

/* A buffer whose (example b, head h) block starts at b ex + h hs: call i's offset into it,
 * and *stride the batch's step -- over the heads (call i = example i): i ex, step hs; over
 * the examples (call i = head i): i hs, step ex. */
static inline int64_t dt_attn_at_(const struct dt_attn_shape *s, int64_t i, int64_t ex, int64_t hs,
                                  int64_t *stride)
{
    *stride = s->over_examples ? ex : hs;
    return s->over_examples ? i * hs : i * ex;
}

static inline struct dt_gemm_call dt_attn_gemm_(bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                                                float alpha, const float *a, int64_t lda,
                                                int64_t sa, const float *b, int64_t ldb, int64_t sb,
                                                float *c, int64_t ldc, int64_t sc, int64_t batch)
{
    struct dt_gemm_call g = {ta, tb, m, n, k, alpha, a, lda, sa, b, ldb, sb, c, ldc, sc, batch};
    return g;
}

/* The (b, h) block steps of the layouts: qkv and dqkv (T 3D per example, hd per head), att
 * and ds (H T T, T T), out and dout (T D, hd); and the batch of one call. */
#define DT_ATTN_QKV_(s) (s)->T * 3 * (s)->D, (s)->D / (s)->H
#define DT_ATTN_TT_(s) (s)->H *(s)->T *(s)->T, (s)->T *(s)->T
#define DT_ATTN_TD_(s) (s)->T *(s)->D, (s)->D / (s)->H
#define DT_ATTN_BATCH_(s) ((s)->over_examples ? (s)->B : (s)->H)

/* Forward, call i. S = scale Q K^T into att (row t of head h: the scores of query t; the
 * causal part and the softmax are the per-row kernel's): column-major S^T = K Q^T. */
static inline struct dt_gemm_call dt_attn_gemm_scores(const struct dt_attn_shape *s, float *att,
                                                      const float *qkv, int64_t i, float scale)
{
    const int64_t T = s->T, D = s->D, hd = s->D / s->H;
    int64_t sq, sa;
    const int64_t oq = dt_attn_at_(s, i, DT_ATTN_QKV_(s), &sq),
                  oa = dt_attn_at_(s, i, DT_ATTN_TT_(s), &sa);
    return dt_attn_gemm_(true, false, T, T, hd, scale, qkv + oq + D, 3 * D, sq, qkv + oq, 3 * D, sq,
                         att + oa, T, sa, DT_ATTN_BATCH_(s));
}

/* Forward, call i. out = P V (P the softmax weights in att): column-major out^T = V^T P^T. */
static inline struct dt_gemm_call dt_attn_gemm_out(const struct dt_attn_shape *s, float *out,
                                                   const float *att, const float *qkv, int64_t i)
{
    const int64_t T = s->T, D = s->D, hd = s->D / s->H;
    int64_t sq, sa, so;
    const int64_t oq = dt_attn_at_(s, i, DT_ATTN_QKV_(s), &sq),
                  oa = dt_attn_at_(s, i, DT_ATTN_TT_(s), &sa),
                  oo = dt_attn_at_(s, i, DT_ATTN_TD_(s), &so);
    return dt_attn_gemm_(false, false, hd, T, T, 1.0f, qkv + oq + 2 * D, 3 * D, sq, att + oa, T, sa,
                         out + oo, D, so, DT_ATTN_BATCH_(s));
}

/* Backward, call i. dP = dout V^T into ds (the per-row kernel then makes it dS):
 * column-major dP^T = V dout^T. */
static inline struct dt_gemm_call dt_attn_gemm_dp(const struct dt_attn_shape *s, float *ds,
                                                  const float *dout, const float *qkv, int64_t i)
{
    const int64_t T = s->T, D = s->D, hd = s->D / s->H;
    int64_t sq, sd, so;
    const int64_t oq = dt_attn_at_(s, i, DT_ATTN_QKV_(s), &sq),
                  od = dt_attn_at_(s, i, DT_ATTN_TT_(s), &sd),
                  oo = dt_attn_at_(s, i, DT_ATTN_TD_(s), &so);
    return dt_attn_gemm_(true, false, T, T, hd, 1.0f, qkv + oq + 2 * D, 3 * D, sq, dout + oo, D, so,
                         ds + od, T, sd, DT_ATTN_BATCH_(s));
}

/* Backward, call i, which = 0: dQ = dS K; 1: dK = dS^T Q; 2: dV = P^T dout. Column-major
 * dQ^T = K^T dS^T, dK^T = Q^T dS, dV^T = dout^T P. */
static inline struct dt_gemm_call dt_attn_gemm_grad(const struct dt_attn_shape *s, float *dqkv,
                                                    const float *ds, const float *att,
                                                    const float *dout, const float *qkv, int64_t i,
                                                    int which)
{
    const int64_t T = s->T, D = s->D, hd = s->D / s->H, n = DT_ATTN_BATCH_(s);
    int64_t sq, st, so;
    const int64_t oq = dt_attn_at_(s, i, DT_ATTN_QKV_(s), &sq),
                  ot = dt_attn_at_(s, i, DT_ATTN_TT_(s), &st),
                  oo = dt_attn_at_(s, i, DT_ATTN_TD_(s), &so);
    float *c = dqkv + oq + which * D;
    if (which == 0)
        return dt_attn_gemm_(false, false, hd, T, T, 1.0f, qkv + oq + D, 3 * D, sq, ds + ot, T, st,
                             c, 3 * D, sq, n);
    if (which == 1)
        return dt_attn_gemm_(false, true, hd, T, T, 1.0f, qkv + oq, 3 * D, sq, ds + ot, T, st, c,
                             3 * D, sq, n);
    return dt_attn_gemm_(false, true, hd, T, T, 1.0f, dout + oo, D, so, att + ot, T, st, c, 3 * D,
                         sq, n);
}

#endif
