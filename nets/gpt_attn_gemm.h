/* Attention's five products as BLAS calls, for a backend whose `fast` and `run_to_run`
 * levels hand them to a library (the CUDA backend: cuBLAS, TF32 allowed at `fast`,
 * pedantic FP32 with a fixed workspace at `run_to_run`; `portable` keeps the own per-row
 * kernels). Written once here as descriptors -- BLAS's column-major convention, one
 * strided batch over the heads of one example -- so that the CUDA backend issues exactly
 * these calls and the tests run the same descriptors through a plain host BLAS
 * (tests/test_gpt.c) against the CPU op. Host C only.
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

struct dt_attn_shape {
    int64_t B, T, H, D;
};

static inline struct dt_gemm_call dt_attn_gemm_(bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                                                float alpha, const float *a, int64_t lda,
                                                int64_t sa, const float *b, int64_t ldb, int64_t sb,
                                                float *c, int64_t ldc, int64_t sc, int64_t batch)
{
    struct dt_gemm_call g = {ta, tb, m, n, k, alpha, a, lda, sa, b, ldb, sb, c, ldc, sc, batch};
    return g;
}

/* Forward, example b. S = scale Q K^T into att (row t of head h: the scores of query t;
 * the causal part and the softmax are the per-row kernel's): column-major S^T = K Q^T. */
static inline struct dt_gemm_call dt_attn_gemm_scores(const struct dt_attn_shape *s, float *att,
                                                      const float *qkv, int64_t b, float scale)
{
    const int64_t T = s->T, D = s->D, hd = s->D / s->H;
    const float *q = qkv + b * T * 3 * D, *k = q + D;
    return dt_attn_gemm_(true, false, T, T, hd, scale, k, 3 * D, hd, q, 3 * D, hd,
                         att + b * s->H * T * T, T, T * T, s->H);
}

/* Forward, example b. out = P V (P the softmax weights in att): column-major
 * out^T = V^T P^T. */
static inline struct dt_gemm_call dt_attn_gemm_out(const struct dt_attn_shape *s, float *out,
                                                   const float *att, const float *qkv, int64_t b)
{
    const int64_t T = s->T, D = s->D, hd = s->D / s->H;
    const float *v = qkv + b * T * 3 * D + 2 * D;
    return dt_attn_gemm_(false, false, hd, T, T, 1.0f, v, 3 * D, hd, att + b * s->H * T * T, T,
                         T * T, out + b * T * D, D, hd, s->H);
}

/* Backward, example b. dP = dout V^T into ds (the per-row kernel then makes it dS):
 * column-major dP^T = V dout^T. */
static inline struct dt_gemm_call dt_attn_gemm_dp(const struct dt_attn_shape *s, float *ds,
                                                  const float *dout, const float *qkv, int64_t b)
{
    const int64_t T = s->T, D = s->D, hd = s->D / s->H;
    const float *v = qkv + b * T * 3 * D + 2 * D;
    return dt_attn_gemm_(true, false, T, T, hd, 1.0f, v, 3 * D, hd, dout + b * T * D, D, hd,
                         ds + b * s->H * T * T, T, T * T, s->H);
}

/* Backward, example b, which = 0: dQ = dS K; 1: dK = dS^T Q; 2: dV = P^T dout. Column-major
 * dQ^T = K^T dS^T, dK^T = Q^T dS, dV^T = dout^T P. */
static inline struct dt_gemm_call dt_attn_gemm_grad(const struct dt_attn_shape *s, float *dqkv,
                                                    const float *ds, const float *att,
                                                    const float *dout, const float *qkv, int64_t b,
                                                    int which)
{
    const int64_t T = s->T, D = s->D, H = s->H, hd = s->D / s->H;
    const float *base = qkv + b * T * 3 * D;
    float *c = dqkv + b * T * 3 * D + which * D;
    const float *dsb = ds + b * H * T * T, *pb = att + b * H * T * T;
    if (which == 0)
        return dt_attn_gemm_(false, false, hd, T, T, 1.0f, base + D, 3 * D, hd, dsb, T, T * T, c,
                             3 * D, hd, H);
    if (which == 1)
        return dt_attn_gemm_(false, true, hd, T, T, 1.0f, base, 3 * D, hd, dsb, T, T * T, c, 3 * D,
                             hd, H);
    return dt_attn_gemm_(false, true, hd, T, T, 1.0f, dout + b * T * D, D, hd, pb, T, T * T, c,
                         3 * D, hd, H);
}

#endif
