/* The transformer's ops on the CUDA backend (host side; kernels in nets/cuda/gpt.cu),
 * mirroring nets/cpu/gpt.c op for op. Data path (docs/DESIGN.md): nets/gpt.c ->
 * nets/backend -> here -> gpt.cu. Every kernel computes its items with the per-element
 * functions of nets/gpt_elem.h and determinism/dropout.h, one item per thread, so every op
 * but the two order-dependent ones gives the CPU's bits wherever `math` agrees (at
 * `portable`: always; elsewhere attention's exp and GELU's tanh are CUDA's expf/tanhf where
 * the CPU's are libm's). The controls:
 *
 *   embedding gradient  atomics float       -> one float atomicAdd per term (arrival
 *                                              order: the nondeterministic baseline); the
 *                                              forced-order hook adds the rows in the CPU's
 *                                              drawn order;
 *                       atomics fixed_point -> exact int64 per entry at the shift of
 *                                              (max |dh|, rows), one rounding: the CPU's bits;
 *                                              a non-finite input or a sum beyond the float
 *                                              range is reported as the bias gradient's is
 *                                              (deferred to the step's end);
 *   clipping norm       reduction unordered -> chunk sums added by float atomicAdd; forced:
 *                                              the CPU's drawn chunk order (on the host);
 *                       fixed               -> per tensor the chunks and fixed tree of
 *                                              determinism/reduce.h, the tensors in order:
 *                                              the CPU's bits;
 *                       exact               -> every square in int64 at one shift, rounded
 *                                              once: the CPU's bits;
 *   attention           math portable       -> the own per-row kernels: the CPU's bits;
 *                       fast, strict        -> its five products by cuBLAS
 *                                              (nets/gpt_attn_gemm.h, checked through a host
 *                                              BLAS in tests/test_gpt.c), TF32 at fast,
 *                                              pedantic FP32 at strict; softmax and dS per
 *                                              row through the shared functions.
 * No op here waits for the device (the forced-order hook apart). */
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <limits.h>

#include "determinism/reduce.h"
#include "nets/gpt_attn_gemm.h"
#include "nets/gpt_elem.h"
#include "determinism/streams.h"
#include "nets/cuda/gpt_launch.h"

#define SLOT_PARTIALS 0
#define SLOT_SMALL 1
/* The fixed-point scatter's records name dh's row and column for a non-finite input, and
 * the entry token * D + i for a sum beyond the float range (status.c: at most 39 chars). */
#define EMB_WHAT "embedding grad (col = token*D + i)"

static dt_cuda_stream stream_of(struct dt_backend *be) { return dt_cuda(be)->stream; }

/* portable: elementwise (dt_embed_elem, dt_gpt_token). */
enum dt_status dt_cuda_embedding_forward(struct dt_backend *be, float *h, int32_t *tokens,
                                         int32_t *targets, const float *x, const float *wte,
                                         const float *wpe, int64_t B, int64_t T, int64_t D,
                                         const struct dt_policy *pol)
{
    return dt_cuda_launched(be,
                            dt_cuda_embedding_forward_launch(h, tokens, targets, x, wte, wpe, B, T,
                                                             D, &dt_cuda(be)->launch),
                            "embedding_forward");
}

enum dt_status dt_cuda_embedding_backward(struct dt_backend *be, float *dwte, const float *dh,
                                          const int32_t *tokens, int64_t rows, int64_t V, int64_t D,
                                          bool accumulate, const struct dt_policy *pol)
{
    struct dt_cuda_ctx *c = dt_cuda(be);
    if (!dt_atomics_exact(pol)) {
        if (!accumulate)
            DT_CUDA_CHECK(
                cudaMemsetAsync(dwte, 0, (size_t)(V * D) * sizeof(float), (cudaStream_t)c->stream));
        if (c->forced_order) {
            const int64_t *perm = dt_cuda_forced_perm(be, rows, DT_FORCED_ROWS);
            return dt_cuda_launched(be,
                                    dt_cuda_embedding_scatter_in_order(dwte, dh, tokens, perm, rows,
                                                                       V, D, &dt_cuda(be)->launch),
                                    "embedding_backward forced");
        }
        return dt_cuda_launched(
            be,
            dt_cuda_embedding_scatter_atomic(dwte, dh, tokens, rows, V, D, &dt_cuda(be)->launch),
            "embedding_backward atomic");
    }
    unsigned long long *acc =
        dt_cuda_scratch(be, SLOT_PARTIALS, (size_t)(V * D) * sizeof(unsigned long long));
    bool deferred = false;
    struct dt_cuda_fixed_record *rec =
        dt_cuda_check_record(be, DT_CUDA_CHECK_BIAS, EMB_WHAT, D, SLOT_SMALL, &deferred);
    DT_FORWARD_IF_ERROR(
        dt_cuda_launched(be,
                         dt_cuda_embedding_scatter_fixed(dwte, acc, rec, dh, tokens, rows, V, D,
                                                         accumulate, &dt_cuda(be)->launch),
                         "embedding_backward fixed point"));
    if (deferred) return DT_OK; /* read at the step's end (status.c) */
    return dt_cuda_check_now(be, rec, DT_CUDA_CHECK_BIAS, EMB_WHAT, D, SLOT_SMALL);
}

/* portable: per row (dt_layernorm_row). */
enum dt_status dt_cuda_layernorm_forward(struct dt_backend *be, float *y, float *mean, float *rstd,
                                         const float *x, const float *gamma, const float *beta,
                                         int64_t rows, int64_t D, const struct dt_policy *pol)
{
    return dt_cuda_launched(be,
                            dt_cuda_layernorm_forward_launch(y, mean, rstd, x, gamma, beta, rows, D,
                                                             &dt_cuda(be)->launch),
                            "layernorm_forward");
}

/* portable: per row (dt_layernorm_row_grad). */
enum dt_status dt_cuda_layernorm_backward(struct dt_backend *be, float *dx, float *gx,
                                          const float *dy, const float *x, const float *mean,
                                          const float *rstd, const float *gamma, int64_t rows,
                                          int64_t D, bool accumulate, const struct dt_policy *pol)
{
    return dt_cuda_launched(be,
                            dt_cuda_layernorm_backward_launch(dx, gx, dy, x, mean, rstd, gamma,
                                                              rows, D, accumulate,
                                                              &dt_cuda(be)->launch),
                            "layernorm_backward");
}

/* One of attention's products (nets/gpt_attn_gemm.h) through cuBLAS, in the math mode the
 * policy sets on the handle (TF32 at fast; pedantic FP32, fixed workspace at strict). */
static int as_int(int64_t v)
{
    DT_ASSERT_MSG(v >= 0 && v <= INT_MAX, "attention size beyond cuBLAS's int range");
    return (int)v;
}

static void attn_gemm(struct dt_backend *be, const struct dt_gemm_call *g,
                      const struct dt_policy *pol)
{
    const float zero = 0.0f;
    DT_CUBLAS_CHECK(cublasSgemmStridedBatched(
        (cublasHandle_t)dt_cuda_cublas_for(be, pol), g->ta ? CUBLAS_OP_T : CUBLAS_OP_N,
        g->tb ? CUBLAS_OP_T : CUBLAS_OP_N, as_int(g->m), as_int(g->n), as_int(g->k), &g->alpha,
        g->a, as_int(g->lda), g->stride_a, g->b, as_int(g->ldb), g->stride_b, &zero, g->c,
        as_int(g->ldc), g->stride_c, as_int(g->batch)));
}

/* portable (`math: portable`): the own kernels, per (b, h, t) row, sums in index order: the
 * CPU's bits. fast and strict: the products by cuBLAS, a strided batch over the heads of each
 * example or over the examples for each head, whichever makes fewer calls, the causal softmax a
 * per-row kernel -- the library path a fast GPU implementation takes (deterministic on one GPU at
 * strict). */
enum dt_status dt_cuda_attention_forward(struct dt_backend *be, float *out, float *att,
                                         const float *qkv, int64_t B, int64_t T, int64_t H,
                                         int64_t D, const struct dt_policy *pol)
{
    if (dt_math_portable(pol))
        return dt_cuda_launched(be,
                                dt_cuda_attention_forward_launch(out, att, qkv, B, T, H, D, true,
                                                                 dt_math_exact(pol),
                                                                 &dt_cuda(be)->launch),
                                "attention_forward");
    const struct dt_attn_shape s = dt_attn_shape_of(B, T, H, D);
    const int64_t calls = dt_attn_gemm_calls(&s);
    for (int64_t i = 0; i < calls; i++) {
        const struct dt_gemm_call g =
            dt_attn_gemm_scores(&s, att, qkv, i, dt_gpt_attn_scale(D / H));
        attn_gemm(be, &g, pol);
    }
    DT_FORWARD_IF_ERROR(dt_cuda_launched(
        be, dt_cuda_attention_softmax_launch(att, B * H * T, T, false, &dt_cuda(be)->launch),
        "attention_forward softmax"));
    for (int64_t i = 0; i < calls; i++) {
        const struct dt_gemm_call g = dt_attn_gemm_out(&s, out, att, qkv, i);
        attn_gemm(be, &g, pol);
    }
    return DT_OK;
}

/* portable: score gradients per row, then each element of dqkv one sum in index order.
 * fast and strict: dP by cuBLAS, dS per row, then dQ, dK, dV by cuBLAS. */
enum dt_status dt_cuda_attention_backward(struct dt_backend *be, float *dqkv, float *ds,
                                          const float *dout, const float *att, const float *qkv,
                                          int64_t B, int64_t T, int64_t H, int64_t D,
                                          const struct dt_policy *pol)
{
    if (dt_math_portable(pol))
        return dt_cuda_launched(be,
                                dt_cuda_attention_backward_launch(dqkv, ds, dout, att, qkv, B, T, H,
                                                                  D, dt_math_exact(pol),
                                                                  &dt_cuda(be)->launch),
                                "attention_backward");
    const struct dt_attn_shape s = dt_attn_shape_of(B, T, H, D);
    const int64_t calls = dt_attn_gemm_calls(&s);
    for (int64_t i = 0; i < calls; i++) {
        const struct dt_gemm_call g = dt_attn_gemm_dp(&s, ds, dout, qkv, i);
        attn_gemm(be, &g, pol);
    }
    DT_FORWARD_IF_ERROR(
        dt_cuda_launched(be,
                         dt_cuda_attention_dscores_finish_launch(
                             ds, att, B * H * T, T, dt_gpt_attn_scale(D / H), &dt_cuda(be)->launch),
                         "attention_backward dS"));
    for (int64_t i = 0; i < calls; i++)
        for (int which = 0; which < 3; which++) {
            const struct dt_gemm_call g = dt_attn_gemm_grad(&s, dqkv, ds, att, dout, qkv, i, which);
            attn_gemm(be, &g, pol);
        }
    return DT_OK;
}

/* portable wherever dt_math_own_elementary (fast and portable: the own tanh); strict: CUDA's. */
enum dt_status dt_cuda_gelu_forward(struct dt_backend *be, float *y, const float *x, int64_t n,
                                    const struct dt_policy *pol)
{
    return dt_cuda_launched(be,
                            dt_cuda_gelu_launch(y, NULL, x, n, false, dt_math_own_elementary(pol),
                                                &dt_cuda(be)->launch),
                            "gelu_forward");
}

enum dt_status dt_cuda_gelu_backward(struct dt_backend *be, float *dx, const float *dy,
                                     const float *x, int64_t n, const struct dt_policy *pol)
{
    return dt_cuda_launched(
        be,
        dt_cuda_gelu_launch(dx, dy, x, n, true, dt_math_own_elementary(pol), &dt_cuda(be)->launch),
        "gelu_backward");
}

/* portable: elementwise. */
enum dt_status dt_cuda_add(struct dt_backend *be, float *y, const float *x, int64_t n,
                           const struct dt_policy *pol)
{
    return dt_cuda_launched(be, dt_cuda_add_launch(y, x, n, &dt_cuda(be)->launch), "add");
}

/* portable: per row, a function of the global row (determinism/dropout.h). */
enum dt_status dt_cuda_dropout(struct dt_backend *be, float *y, const float *x, uint8_t *keep,
                               struct dt_xoro *lanes, int64_t rows, int64_t width,
                               const struct dt_dropout_site *site, const struct dt_policy *pol)
{
    return dt_cuda_launched(
        be, dt_cuda_dropout_launch(y, x, keep, lanes, rows, width, site, &dt_cuda(be)->launch),
        "dropout");
}

enum dt_status dt_cuda_dropout_seed(struct dt_backend *be, struct dt_xoro *lanes, int64_t rows,
                                    int64_t row0, uint64_t seed, uint32_t step, uint32_t member,
                                    const struct dt_policy *pol)
{
    return dt_cuda_launched(
        be,
        dt_cuda_dropout_seed_launch(lanes, rows, row0, seed, step, member, &dt_cuda(be)->launch),
        "dropout_seed");
}
