/* The embedding on the CUDA backend: its kernels, their launchers and the op's host
 * functions (declared from their rows of nets/op_list.h in nets/cuda/cuda.h), the formulas
 * those of nets/gpt_elem.h (dt_gpt_token, dt_embed_elem) that the CPU ops call. Every thread
 * owns whole items in a grid-stride loop, so no result depends on the grid or block size.
 * The controls of the gradient (a scatter-add into the table):
 *   atomics float       -> one float atomicAdd per term (arrival order: the nondeterministic
 *                          baseline); the forced-order hook adds the rows in the CPU's drawn
 *                          order;
 *   atomics fixed_point -> exact int64 per entry at the shift of (max |dh|, rows), one
 *                          rounding: the CPU's bits; a non-finite input or a sum beyond the
 *                          float range is reported as the bias gradient's is (deferred to the
 *                          step's end).
 * Compiled with --fmad=false. No op here waits for the device (the forced-order hook apart). */
#include <cuda_runtime_api.h>

#include "determinism/fixed_point.h"
#include "determinism/streams.h"
#include "nets/cuda/cuda.h"
#include "nets/cuda/dense_loss.h" /* struct dt_cuda_fixed_record */
#include "nets/cuda/launch.cuh"
#include "nets/gpt_elem.h"

#define SLOT_PARTIALS 0
#define SLOT_SMALL 1
/* The fixed-point scatter's records name dh's row and column for a non-finite input, and
 * the entry token * D + i for a sum beyond the float range (status.c: at most 39 chars). */
#define EMB_WHAT "embedding grad (col = token*D + i)"
#define THREADS L->block_threads
#define LAUNCHED return DT_LAUNCHED(L)

static __global__ void __launch_bounds__(1024)
    embed_tokens_kernel(int32_t *tokens, int32_t *targets, const float *x, int64_t B, int64_t T)
{
    DT_GRID_STRIDE(r, B * T)
    {
        const int64_t b = r / T, t = r - b * T;
        tokens[r] = dt_gpt_token(x[b * (T + 1) + t]);
        targets[r] = dt_gpt_token(x[b * (T + 1) + t + 1]);
    }
}

static __global__ void __launch_bounds__(1024)
    embed_kernel(float *h, const float *x, const float *wte, const float *wpe, int64_t T, int64_t D,
                 int64_t n)
{
    DT_GRID_STRIDE(e, n)
    h[e] = dt_embed_elem(x, wte, wpe, T, D, e);
}

/* atomics float: one float atomicAdd per term, in arrival order (what a fast GPU scatter
 * does; tokens out of [0, V) -- impossible after dt_gpt_token -- are skipped). */
static __global__ void __launch_bounds__(1024)
    scatter_atomic_kernel(float *dwte, const float *dh, const int32_t *tokens, int64_t rows,
                          int64_t V, int64_t D)
{
    DT_GRID_STRIDE(e, rows * D)
    {
        const int64_t r = e / D, i = e - r * D, tok = tokens[r];
        if (tok >= 0 && tok < V) atomicAdd(&dwte[tok * D + i], dh[e]);
    }
}

/* The forced-order hook: column i of every entry gets the rows in perm's order, one
 * thread per column (the CPU's forced path adds the same terms in the same order). */
static __global__ void __launch_bounds__(1024)
    scatter_in_order_kernel(float *dwte, const float *dh, const int32_t *tokens,
                            const int64_t *perm, int64_t rows, int64_t V, int64_t D)
{
    DT_GRID_STRIDE(i, D)
    for (int64_t k = 0; k < rows; k++) {
        const int64_t r = perm[k], tok = tokens[r];
        if (tok >= 0 && tok < V) dwte[tok * D + i] += dh[r * D + i];
    }
}

static __global__ void __launch_bounds__(1024) fixed_zero_kernel(unsigned long long *acc, int64_t n)
{
    DT_GRID_STRIDE(e, n)
    acc[e] = 0;
}

/* atomics fixed_point: every term to int64 at the shift of (max |dh|, rows); integer
 * atomics add them exactly in any order (the shift bounds every sum below 2^62). */
static __global__ void __launch_bounds__(1024)
    scatter_fixed_kernel(unsigned long long *acc, struct dt_cuda_fixed_record *rec, const float *dh,
                         const int32_t *tokens, int64_t rows, int64_t V, int64_t D)
{
    if (rec->first_bad != DT_CUDA_NO_INDEX) return;
    const int shift = dt_fixed_shift_for(dt_bits_float(rec->max_bits), rows);
    DT_GRID_STRIDE(e, rows * D)
    {
        const int64_t r = e / D, i = e - r * D, tok = tokens[r];
        int64_t q = 0;
        if (!dt_fixed_from_float(&q, dh[e], shift)) atomicExch(&rec->bad_term, 1u);
        if (tok >= 0 && tok < V) atomicAdd(&acc[tok * D + i], (unsigned long long)q);
    }
}

/* One rounding per entry; = or += into dwte; an entry beyond the float range is recorded. */
static __global__ void __launch_bounds__(1024)
    scatter_fixed_finish_kernel(float *dwte, struct dt_cuda_fixed_record *rec,
                                const unsigned long long *acc, int64_t rows, int64_t n,
                                bool accumulate)
{
    if (rec->first_bad != DT_CUDA_NO_INDEX) return;
    const int shift = dt_fixed_shift_for(dt_bits_float(rec->max_bits), rows);
    DT_GRID_STRIDE(e, n)
    {
        const float f = dt_fixed_to_float((int64_t)acc[e], shift);
        if ((dt_float_bits(f) & 0x7fffffffu) >= 0x7f800000u)
            atomicMin(&rec->overflow_col, (unsigned long long)e);
        dwte[e] = accumulate ? dwte[e] + f : f; /* the Inf too, as the bias gradient writes it */
    }
}

static int embedding_forward_launch(float *h, int32_t *tokens, int32_t *targets, const float *x,
                                    const float *wte, const float *wpe, int64_t B, int64_t T,
                                    int64_t D, const struct dt_cuda_launch *L)
{
    const dt_cuda_stream s = L->stream;
    /* wte's rows gathered: at most the vocabulary, counted once; wpe's T rows once */
    const double rows = (double)B * (double)T, xs = (double)B * (double)(T + 1);
    const double vocab = rows < DT_GPT_VOCAB ? rows : (double)DT_GPT_VOCAB;
    DT_LAUNCH(L, dt_work(4.0 * (xs + 2.0 * rows), 0.0), embed_tokens_kernel, dt_cuda_grid(L, B * T),
              THREADS, 0, s)
    (tokens, targets, x, B, T);
    DT_LAUNCH(L, dt_work(4.0 * (xs + (vocab + (double)T + rows) * (double)D), rows * (double)D),
              embed_kernel, dt_cuda_grid(L, B * T * D), THREADS, 0, s)
    (h, x, wte, wpe, T, D, B * T * D);
    LAUNCHED;
}

static int embedding_scatter_atomic(float *dwte, const float *dh, const int32_t *tokens,
                                    int64_t rows, int64_t V, int64_t D,
                                    const struct dt_cuda_launch *L)
{
    const dt_cuda_stream s = L->stream;
    const double terms = (double)rows * (double)D, table = (double)V * (double)D;
    DT_LAUNCH(L, dt_work(4.0 * ((double)rows + terms + 2.0 * table), terms), scatter_atomic_kernel,
              dt_cuda_grid(L, rows * D), THREADS, 0, s)
    (dwte, dh, tokens, rows, V, D);
    LAUNCHED;
}

static int embedding_scatter_in_order(float *dwte, const float *dh, const int32_t *tokens,
                                      const int64_t *perm, int64_t rows, int64_t V, int64_t D,
                                      const struct dt_cuda_launch *L)
{
    const dt_cuda_stream s = L->stream;
    const double terms = (double)rows * (double)D, table = (double)V * (double)D;
    DT_LAUNCH(L, dt_work(4.0 * ((double)rows + terms + 2.0 * table), terms),
              scatter_in_order_kernel, dt_cuda_grid(L, D), THREADS, 0, s)
    (dwte, dh, tokens, perm, rows, V, D);
    LAUNCHED;
}

static int embedding_scatter_fixed(float *dwte, unsigned long long *acc,
                                   struct dt_cuda_fixed_record *rec, const float *dh,
                                   const int32_t *tokens, int64_t rows, int64_t V, int64_t D,
                                   bool accumulate, const struct dt_cuda_launch *L)
{
    const dt_cuda_stream s = L->stream;
    const int rc = dt_cuda_fixed_scan(rec, dh, rows * D, L);
    if (rc != 0) return rc;
    const double terms = (double)rows * (double)D, table = (double)V * (double)D;
    DT_LAUNCH(L, dt_work(8.0 * table, 0.0), fixed_zero_kernel, dt_cuda_grid(L, V * D), THREADS, 0,
              s)
    (acc, V * D);
    DT_LAUNCH(L, dt_work(4.0 * ((double)rows + terms) + 16.0 * table, DT_W_OPS_FIXED_TERM * terms),
              scatter_fixed_kernel, dt_cuda_grid(L, rows * D), THREADS, 0, s)
    (acc, rec, dh, tokens, rows, V, D);
    DT_LAUNCH(L,
              dt_work((accumulate ? 16.0 : 12.0) * table,
                      (DT_W_OPS_FIXED_ROUND + (accumulate ? 1.0 : 0.0)) * table),
              scatter_fixed_finish_kernel, dt_cuda_grid(L, V * D), THREADS, 0, s)
    (dwte, rec, acc, rows, V * D, accumulate);
    LAUNCHED;
}
/* portable: elementwise (dt_embed_elem, dt_gpt_token). */
extern "C" enum dt_status dt_cuda_embedding_forward(struct dt_backend *be, float *h,
                                                    int32_t *tokens, int32_t *targets,
                                                    const float *x, const float *wte,
                                                    const float *wpe, int64_t B, int64_t T,
                                                    int64_t D, const struct dt_policy *pol)
{
    return dt_cuda_launched(
        be,
        embedding_forward_launch(h, tokens, targets, x, wte, wpe, B, T, D, &dt_cuda(be)->launch),
        "embedding_forward");
}

extern "C" enum dt_status dt_cuda_embedding_backward(struct dt_backend *be, float *dwte,
                                                     const float *dh, const int32_t *tokens,
                                                     int64_t rows, int64_t V, int64_t D,
                                                     bool accumulate, const struct dt_policy *pol)
{
    struct dt_cuda_ctx *c = dt_cuda(be);
    if (!dt_atomics_exact(pol)) {
        if (!accumulate)
            DT_CUDA_CHECK(dt_cuda_memset_async(&c->launch, dwte, 0, (size_t)(V * D) * sizeof(float),
                                               c->stream));
        if (c->forced_order) {
            const int64_t *perm = dt_cuda_forced_perm(be, rows, DT_FORCED_ROWS);
            return dt_cuda_launched(be,
                                    embedding_scatter_in_order(dwte, dh, tokens, perm, rows, V, D,
                                                               &dt_cuda(be)->launch),
                                    "embedding_backward forced");
        }
        return dt_cuda_launched(
            be, embedding_scatter_atomic(dwte, dh, tokens, rows, V, D, &dt_cuda(be)->launch),
            "embedding_backward atomic");
    }
    unsigned long long *acc = (unsigned long long *)dt_cuda_scratch(
        be, SLOT_PARTIALS, (size_t)(V * D) * sizeof(unsigned long long));
    bool deferred = false;
    struct dt_cuda_fixed_record *rec =
        dt_cuda_check_record(be, DT_CUDA_CHECK_BIAS, EMB_WHAT, D, SLOT_SMALL, &deferred);
    DT_FORWARD_IF_ERROR(
        dt_cuda_launched(be,
                         embedding_scatter_fixed(dwte, acc, rec, dh, tokens, rows, V, D, accumulate,
                                                 &dt_cuda(be)->launch),
                         "embedding_backward fixed point"));
    if (deferred) return DT_OK; /* read at the step's end (status.c) */
    return dt_cuda_check_now(be, rec, DT_CUDA_CHECK_BIAS, EMB_WHAT, D, SLOT_SMALL);
}
