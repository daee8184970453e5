/* Private to the CPU backend: its context and the op functions it registers. */
#ifndef DT_CPU_H
#define DT_CPU_H

#include <pthread.h>
#include <string.h>

#include "nets/backend_impl.h"
#include "nets/cpu/threadpool.h"

/* Loops compiled three times -- AVX-512 (F, DQ, BW, VL), AVX2 and baseline x86-64 -- and
 * picked per call by dt_cpu_loops(), so DETRAIN_CPU_ISA=avx2 and the tests' dt_cpu_set_wide
 * hold them to AVX2 as they do the hand-written wide kernels. Bits do not change between
 * them: contraction is off (-ffp-contract=off), no fast-math lets the compiler swap an
 * operation for an approximation, and vectors run across independent outputs, never
 * across a sum. The AVX-512 copy runs the elementwise loops (epsilon, sigma, AdamW, GELU,
 * ...) 16 wide (docs/performance.md).
 *
 *   DT_VECTOR_PART(name) { body }   a dt_pool_fn (ctx, begin, end, worker)
 *   DT_VECTOR_FN(name, (params), (args)) { body }            any other void function
 *   DT_VECTOR_FN_RET(type, name, (params), (args)) { body }  one that returns a value
 *
 * The body is one always-inline function; each copy is a wrapper compiled for its
 * instruction set, the body inlined there. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(DT_NO_CLONES)
#define DT_TARGET_V4 __attribute__((target("avx2,avx512f,avx512dq,avx512bw,avx512vl")))
#define DT_TARGET_AVX2 __attribute__((target("avx2")))
#define DT_VECTOR_FN_(ret, name, params, args, ret_kw)                                             \
    static inline __attribute__((always_inline)) ret name##_body params;                           \
    DT_TARGET_V4 static ret name##_v4 params { ret_kw name##_body args; }                          \
    DT_TARGET_AVX2 static ret name##_avx2 params { ret_kw name##_body args; }                      \
    static ret name##_base params { ret_kw name##_body args; }                                     \
    static ret name params                                                                         \
    {                                                                                              \
        const int loops_ = dt_cpu_loops();                                                         \
        if (loops_ == 2) {                                                                         \
            ret_kw name##_v4 args;                                                                 \
        } else if (loops_ == 1) {                                                                  \
            ret_kw name##_avx2 args;                                                               \
        } else {                                                                                   \
            ret_kw name##_base args;                                                               \
        }                                                                                          \
    }                                                                                              \
    static inline __attribute__((always_inline)) ret name##_body params
#define DT_VECTOR_FN(name, params, args) DT_VECTOR_FN_(void, name, params, args, )
#define DT_VECTOR_FN_RET(ret, name, params, args) DT_VECTOR_FN_(ret, name, params, args, return )
#else
#define DT_VECTOR_FN(name, params, args) static void name params
#define DT_VECTOR_FN_RET(ret, name, params, args) static ret name params
#endif
#define DT_VECTOR_PART(name)                                                                       \
    DT_VECTOR_FN(name, (void *ctx, int64_t begin, int64_t end, int worker),                        \
                 (ctx, begin, end, worker))

/* The loops' instruction set in this process: 2 AVX-512 (where the wide kernels run, see
 * dt_cpu_wide), 1 AVX2, 0 baseline. */
int dt_cpu_loops(void);

/* AVX-512 kernels (the ordered product and tree in dense.c, the exact sum in exact.c),
 * picked at run time where the CPU has AVX-512F and DQ. Same bits as the AVX2 and
 * baseline kernels (tests/test_ops.c, tests/test_exact.c run both). */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(DT_NO_CLONES)
#define DT_CPU_WIDE_KERNELS 1
#define DT_WIDE __attribute__((target("avx512f,avx512dq")))
#endif
/* max(mb, max over p[0, n) of |bits|): for finite floats the bits of the largest |p[i]|;
 * 0x7f800000 or more when a NaN or Inf is there (exact.c). */
uint32_t dt_cpu_max_bits(const float *p, int64_t n, uint32_t mb);
/* Whether the wide kernels run now. */
bool dt_cpu_wide(void);
/* Test hook: allow (true, the default) or forbid the wide kernels; returns whether this
 * CPU has them. Process-wide; not for use while ops run. */
bool dt_cpu_set_wide(bool on);

#define DT_CPU_MAX_THREADS 256

struct dt_cpu_ctx {
    struct dt_pool *pool;
    float *scratch; /* transposes; grown on demand */
    size_t scratch_floats;
    float *cols; /* convolution patches (im2col); grown on demand */
    size_t cols_floats;
    float *partials; /* backward-weight chunk partials; grown on demand */
    size_t partials_floats;
    float *xp; /* the exact product's fixed-point operands; grown on demand */
    size_t xp_floats;
    float *worker_buf[DT_CPU_MAX_THREADS]; /* per-worker partials; each grown by its worker */
    size_t worker_floats[DT_CPU_MAX_THREADS];
    pthread_mutex_t combine_mu; /* unordered paths: partials combined in completion order */
    uint64_t forced_order;      /* test hook: != 0 imposes a combination order (see backend.h) */
    int blas_threads;
    struct dt_cpu_dnnl *dnnl; /* oneDNN's convolutions for `fast` (conv_dnnl.h); NULL: none */
};

static inline struct dt_cpu_ctx *dt_cpu(struct dt_backend *be)
{
    return (struct dt_cpu_ctx *)be->ctx;
}

/* Does a weight gradient that detrain sums itself (no library product) take the fixed
 * order's kernels? Under an ordered reduction, yes; under `unordered` too unless a test
 * forces a combination order: the control allows any order, and the fixed order's register
 * tiles beat adding 8-row chunk partials into the result as workers finish (issue 69: an
 * ablation that relaxes `reduction` no longer costs more than the control it relaxes; the
 * forced order still shows the control matters, as it does for `fast`'s library paths). */
static inline bool dt_cpu_wgrad_in_order(struct dt_backend *be, const struct dt_policy *pol)
{
    return dt_reduction_ordered(pol) || !dt_cpu(be)->forced_order;
}

/* Scratch space of at least n floats (valid until the next call). */
float *dt_cpu_scratch(struct dt_backend *be, size_t n);
/* The im2col buffer of at least n floats (valid until the next call; distinct from
 * dt_cpu_scratch, which the dense ops use). */
float *dt_cpu_cols(struct dt_backend *be, size_t n);
/* A third buffer, for backward-weight partials (dt_cpu_wgrad_rows). */
float *dt_cpu_partials(struct dt_backend *be, size_t n);
/* A fourth, for the exact product's operands (matmul_exact.c), whose inputs may lie in any
 * of the others. */
float *dt_cpu_xp_buffer(struct dt_backend *be, size_t n);
/* Worker `w`'s own buffer of at least n floats; only worker w may call this for slot w. */
float *dt_cpu_worker_buffer(struct dt_backend *be, int w, size_t n);
/* *max_abs = the largest |v[i]| over [0, n), computed in parallel (max is order-free).
 * Returns false, with *bad the index of the first NaN/Inf, when one is present. */
bool dt_cpu_max_abs(struct dt_backend *be, const float *v, int64_t n, float *max_abs, int64_t *bad);
/* The backend op first_nonfinite: dt_cpu_max_abs's scan, its first bad index. */
dt_first_nonfinite_fn dt_cpu_first_nonfinite;
/* Add src into *dst atomically (compare-and-swap on the bits): float, arrival order. */
static inline void dt_cpu_atomic_add_float(float *dst, float v)
{
    uint32_t *bits = (uint32_t *)dst;
    uint32_t old = __atomic_load_n(bits, __ATOMIC_RELAXED), want;
    do {
        float cur, next;
        memcpy(&cur, &old, 4);
        next = cur + v;
        memcpy(&want, &next, 4);
    } while (
        !__atomic_compare_exchange_n(bits, &old, want, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
}

/* Backward-weight in its two forms, same bits under `reduction: fixed`: from x (B, in) when
 * dt_cpu_wgrad_prefers_rows (few outputs: partials computed transposed), else from x
 * given transposed, xt (in, B). dt_cpu_dense_backward_weight picks; convolutions build
 * their patches in the layout the chosen form reads. */
/* The own fixed-order product (dense.c): C[i, j] (+)= sum_{k = 0..K-1 ascending} A[i,k] *
 * Bm[k,j] for rows [i0, i1), A[i,k] at A[i * lda + k * aks]; every element's roundings in
 * that order whatever the path. */
void dt_cpu_matmul_ordered(float *C, int64_t ldc, const float *A, int64_t lda, int64_t aks,
                           const float *Bm, int64_t ldb, int64_t K, int64_t N, int64_t i0,
                           int64_t i1, bool accumulate);

bool dt_cpu_wgrad_prefers_rows(int64_t B, int64_t in, int64_t out);
/* conv.c's chunk tiles on one slot: the chunks a block when a weight gradient's `items`
 * tiles over n_chunks chunks are split into aligned blocks for `threads` workers (a power
 * of two), 0 when they are not (tests: which shapes take the split). */
int64_t dt_cpu_chunk_block(int64_t n_chunks, int64_t items, int threads);
enum dt_status dt_cpu_wgrad_rows(struct dt_backend *be, float *dw, const float *x, const float *dy,
                                 int64_t B, int64_t in, int64_t out, const struct dt_policy *pol);
enum dt_status dt_cpu_wgrad_transposed(struct dt_backend *be, float *dw, const float *xt,
                                       const float *dy, int64_t B, int64_t in, int64_t out,
                                       const struct dt_policy *pol);
/* reduction: exact, the shard partials in one call (nets/backend_impl.h) */
dt_bias_backward_fn dt_cpu_bias_backward_shards;
dt_dense_backward_weight_fn dt_cpu_dense_backward_weight_shards;
dt_dense_backward_weight_summed_fn dt_cpu_dense_backward_weight_summed;
dt_conv2d_backward_weight_fn dt_cpu_conv2d_backward_weight_shards;
/* reduction: exact on one rank, summed where a shard op makes its partials (exact.c; used by
 * dense.c's dt_cpu_dense_backward_weight_summed). Term k of element e at t[k * ld + e], k <
 * nt <= DT_CPU_SPEC_TERMS_MAX. dt_cpu_exact_spec_sums: per group of DT_CPU_SPEC_GROUP
 * elements from 0 (the last may be short), risky[g] = a mask of the group's elements
 * (bit x: element g * DT_CPU_SPEC_GROUP + x) whose terms' double sum is not exact or whose
 * term's unit exponent may lie below `guess` (a guess of the floor) -- with AVX2 or AVX-512
 * those elements alone, else the whole group -- their out to be written by the caller; every other
 * element gets the double sum rounded into out, and *unit = min(*unit, a lower bound on its
 * smallest nonzero term's unit exponent: at least guess; 255 or more: all zero);
 * returns max(m, max |bits| of every term). dt_cpu_exact_spec_floor: from the tensor's
 * maximum over `shards` partials, *e_floor (1..255) -- stood groups whose unit reaches it
 * hold exact_sum's bits -- and *shift; false for a non-finite maximum (nothing to redo:
 * exact_sum leaves such a tensor as it is and the step fails). dt_cpu_exact_sum_terms:
 * elements [e0, e1) summed by the integer path at shift, into out (in place over term 0
 * too). Together: exact_sum's bits (tests/test_exact.c). */
#define DT_CPU_SPEC_GROUP 16
#define DT_CPU_SPEC_TERMS_MAX 16
uint32_t dt_cpu_exact_spec_sums(float *out, const float *t, int64_t ld, int nt, int64_t n,
                                int guess, uint16_t *risky, int *unit, uint32_t m);
bool dt_cpu_exact_spec_floor(uint32_t max_bits, int64_t shards, int *e_floor, int *shift);
void dt_cpu_exact_sum_terms(float *out, const float *t, int64_t ld, int nt, int64_t e0, int64_t e1,
                            int shift);
/* reduction: exact (nets/cpu/exact.c): exact_sum's stages for several ranks. */
dt_exact_max_fn dt_cpu_exact_max;
dt_exact_to_fixed_fn dt_cpu_exact_to_fixed;
dt_exact_round_fn dt_cpu_exact_round;
dt_exact_sum_packs_fn dt_cpu_exact_sum_packs;

/* ---- the ops: dt_cpu_<name> for every row of nets/op_list.h, in nets/cpu/<layer>.c:
 * dense.c (dense, bias), activation.c (relu), loss.c (softmax cross-entropy), optim.c (sgd,
 * adamw, clipping), conv.c and pool.c, bnn.c (epsilon, Bayesian), exact.c (exact_sum),
 * gpt.c (the transformer's ops, dropout). */
#define DT_CPU_OP_DECLARE_(ENUM, name, ...) dt_##name##_fn dt_cpu_##name;
DT_OP_LIST(DT_CPU_OP_DECLARE_)
#undef DT_CPU_OP_DECLARE_

#endif
