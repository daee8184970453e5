/* Private to the CUDA backend: its context, the error check every CUDA call goes through,
 * and the host-side op functions (extern "C", one op family per .cu file holding the
 * family's kernels, their launchers and its ops, like nets/cpu/cpu.h's families). The
 * backend's plumbing (backend_cuda.c, context.c, status.c, cudnn_conv.c) stays C; the .cu
 * files are compiled with --fmad=false (and -ffp-contract=off on their host side).
 * Data path (docs/DESIGN.md): nets/backend -> nets/cuda/<family>.cu.
 *
 * How the policy's controls map onto the GPU (every op states its own in its file):
 *   math      fast     -> cuBLAS with TF32 tensor-op math allowed (products);
 *             strict   -> cuBLAS in FP32, CUBLAS_PEDANTIC_MATH, a fixed workspace set once
 *                         on the backend's one stream (cuBLAS's documented run-to-run
 *                         reproducibility on one architecture and SM count);
 *             portable -> detrain's own kernels: every output's sum runs in index order from
 *                         +0 exactly as the CPU backend's, so the bits are the CPU's.
 *   reduction unordered -> chunk partials combined by float atomicAdd (block arrival order);
 *             fixed     -> canonical chunks of DT_REDUCE_CHUNK and the fixed tree of
 *                          determinism/reduce.h (two passes), the CPU's order.
 *   atomics   float       -> block partials added by float atomicAdd;
 *             fixed_point -> exact int64 fixed point (determinism/fixed_point.h) summed with
 *                            integer atomics, rounded once: order-free, the CPU's bits.
 *   rng, and the Bayesian elementwise ops: the shared DT_HD generators and formulas.
 * No result may depend on the grid or block size (tests force several: dt_cuda_set_launch). */
#ifndef DT_CUDA_H
#define DT_CUDA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nets/backend_impl.h"
#include "nets/cost.h" /* struct dt_op_cost: what a recording backend's launches add up to */

#ifdef __cplusplus
extern "C" {
#endif

typedef struct CUstream_st *dt_cuda_stream;

/* How the backend launches: its stream, threads per block (default 256) and the largest
 * grid (0 = as many blocks as the work needs, capped at 65535), and where launches are
 * counted. Every launcher takes it; kernels loop grid-stride, so every result is the same
 * bits for any setting. */
struct dt_cuda_launch {
    dt_cuda_stream stream;
    int block_threads, max_blocks;
    /* where launches are counted: the backend's (struct dt_launch_counts, nets/backend.h),
     * each at the one place it is made -- kernels by DT_LAUNCH, memsets by
     * dt_cuda_memset_async (launch.cuh), library calls by dt_cuda_count_lib, device-to-device
     * copies by dt_cuda_copy_d2d */
    struct dt_launch_counts *counts;
    /* NULL: launch. Else a recording backend (dt_cuda_recorder_create): every launch adds
     * its described work here and nothing runs (nets/cuda/work.h) */
    struct dt_op_cost *record;
};

#define DT_CUDA_SCRATCH_SLOTS 8
/* Who uses which scratch slot: 0 and 1 dense.cu, loss.cu, optim.cu and embedding.cu, 0 and
 * 1 matmul_exact.cu (one op at a time); the rest the convolution and pooling ops (conv.cu,
 * cudnn_conv.c), which call the dense ops while holding theirs. */
#define DT_CUDA_SLOT_CONV_COLS 2    /* patches or patch gradients (rows x KH*KW*C) */
#define DT_CUDA_SLOT_CONV_SMALL 3   /* a scatter's record; a forced order's permutation */
#define DT_CUDA_SLOT_CONV_WEIGHTS 4 /* weights or their gradient in cuDNN's KRSC layout */
#define DT_CUDA_SLOT_CONV_RANK 5    /* a forced order's ranks */
#define DT_CUDA_SLOT_DIGESTS 6      /* the tree digests' plan and levels (digest.cu) */
#define DT_CUDA_SLOT_SNAPSHOT 7     /* the snapshot's table of tensors (backend_cuda.c) */

/* The backend's state (be->ctx). Only the backend's own files touch it. */
#define DT_CUDA_WAIT_SITES 64
struct dt_cuda_ctx {
    int device;
    dt_cuda_stream stream;         /* every op and copy of the training step runs here */
    struct dt_cuda_launch launch;  /* stream and geometry of every kernel launch */
    bool recorder;                 /* a recording backend (nets/cuda/recorder.h): no device */
    struct dt_op_cost record_sink; /* its record between ops (launch.record points here) */
    dt_cuda_stream copy_stream;    /* device-to-host copies of the hashing pipeline */
    void *cublas;                  /* cublasHandle_t, bound to `stream` */
    void *cublas_workspace;        /* fixed cuBLAS workspace (math: strict) */
    size_t cublas_workspace_bytes;
    int cublas_mode;                      /* the math mode last set on the handle (-1 = none) */
    void *scratch[DT_CUDA_SCRATCH_SLOTS]; /* device scratch, grown on demand */
    size_t scratch_bytes[DT_CUDA_SCRATCH_SLOTS];
    void *host_scratch[DT_CUDA_SCRATCH_SLOTS]; /* pinned host scratch, grown on demand */
    size_t host_scratch_bytes[DT_CUDA_SCRATCH_SLOTS];
    uint64_t forced_order;         /* test hook (backend.h): != 0 imposes a combination order */
    struct dt_cudnn *cudnn;        /* cuDNN state (cudnn_conv.c), made on first use */
    struct dt_cuda_status *status; /* deferred checks (status.c), made on first use */
    struct cuda_timers *timers;    /* per-op device timers (backend_cuda.c), on first use */
    bool one_pass;  /* DETRAIN_CUDA_ONE_PASS (dense_loss.h), read as the backend was made */
    bool xp_simple; /* DETRAIN_CUDA_XP=simple (matmul_exact.cu), read as the backend was made */
    unsigned int *one_pass_count; /* last-block counter of one-launch kernels (dense.cu): 0 */
    /* the tree digests' plan as last copied up (digest.cu): where, its size, and the event
     * after the copy (cudaEvent_t) */
    void *digest_plan_dev;
    size_t digest_plan_words;
    void *digest_plan_up;
    /* the snapshot's table of tensors as last copied up (backend_cuda.c): its size and the
     * event after the copy (cudaEvent_t) */
    size_t snapshot_table_words;
    void *snapshot_table_up;
    int sm_count;
    char name[300];
    const char *wait_site[DT_CUDA_WAIT_SITES]; /* wait k's call site at k % DT_CUDA_WAIT_SITES */
    /* the step captured as one graph (graph.c; nets/backend.h, "the step as one graph"):
     * while `capturing`, nothing waits, grows or fails the process -- the first thing that
     * would is written to capture_broken and the capture is not launched */
    bool capturing;
    struct dt_launch_counts capture_counts0; /* the counts and waits as the capture began */
    int64_t capture_waits0;
    char capture_broken[256]; /* "" = the capture may be launched */
    int capture_gathers;      /* gathers in this capture (each its own index buffer) */
    void *capture_spill[DT_CUDA_SCRATCH_SLOTS]; /* host scratch grown while capturing */
    void *capture_parked[8]; /* device buffers freed while capturing: freed as it ends */
    int capture_n_parked;
};

static inline struct dt_cuda_ctx *dt_cuda(struct dt_backend *be)
{
    return (struct dt_cuda_ctx *)be->ctx;
}

/* Abort with the call and CUDA's message when a CUDA runtime call that must not fail
 * (copies, synchronisation, allocation) fails: a determinism tool never carries on
 * quietly. `e` is a cudaError_t cast to int. */
void dt_cuda_check(int e, const char *call, const char *file, int line);
#define DT_CUDA_CHECK(call) dt_cuda_check((int)(call), #call, __FILE__, __LINE__)
/* The same for a cuBLAS status (cublasStatus_t cast to int). */
void dt_cublas_check(int st, const char *call, const char *file, int line);
#define DT_CUBLAS_CHECK(call) dt_cublas_check((int)(call), #call, __FILE__, __LINE__)
/* A cuBLAS product on backend be's stream: counted (dt_cuda_count_lib), made, checked. */
#define DT_CUBLAS_CALL(be, W, call)                                                                \
    (dt_cuda_count_lib(be),                                                                        \
     dt_cuda_note(&dt_cuda(be)->launch, (W)) ? (void)0 : DT_CUBLAS_CHECK(call))
/* A launcher's result: DT_OK, or DT_ERR_INTERNAL after printing the op's name and CUDA's
 * message for cudaError_t `rc`. */
enum dt_status dt_cuda_launched(struct dt_backend *be, int rc, const char *op);

/* Device scratch slot `slot` of at least `bytes` (valid until the next call for that slot;
 * growing synchronises the stream first). Pinned host scratch likewise. */
void *dt_cuda_scratch(struct dt_backend *be, int slot, size_t bytes);
/* The forced-order hook's permutation of m items for an op family (dt_forced_permutation,
 * the CPU's draw), in device scratch slot 1; synchronises (nets/cuda/dense.cu). */
const int64_t *dt_cuda_forced_perm(struct dt_backend *be, int64_t m, uint64_t salt);
void *dt_cuda_host_scratch(struct dt_backend *be, int slot, size_t bytes);
/* Wait for everything queued on the backend's stream. Every training-thread wait counts
 * once in dt_backend_host_waits and leaves its call site (file:line) in a ring of the last
 * DT_CUDA_WAIT_SITES, so that a test expecting one wait a step names the others. */
#define DT_CUDA_SITE_(f, l) f ":" #l
#define DT_CUDA_SITE(f, l) DT_CUDA_SITE_(f, l)
#define dt_cuda_sync(be) dt_cuda_sync_at((be), DT_CUDA_SITE(__FILE__, __LINE__))
void dt_cuda_sync_at(struct dt_backend *be, const char *site);
/* While a step is captured (be's `capturing`): true, and the capture marked broken with the
 * reason (printf-style; the first reason kept) -- the caller then does not wait, grow or
 * copy from pageable memory (nothing runs: the capture is not launched, and the step runs
 * uncaptured). False when be is not capturing. */
bool dt_cuda_capture_breaks(struct dt_backend *be, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Capture begun or ended on be's stream by this thread (graph.c): while on, a failed CUDA
 * or cuBLAS call checked by DT_CUDA_CHECK / DT_CUBLAS_CHECK on this thread breaks the capture
 * instead of aborting. Ending it frees what grew meanwhile. */
void dt_cuda_capture_mark(struct dt_backend *be, bool on);
/* A wait made another way (an event's): counted and its site kept, as dt_cuda_sync's. */
void dt_cuda_count_wait(struct dt_backend *be, const char *site);
/* The sites of waits number first .. dt_backend_host_waits - 1 (those still in the ring),
 * "; "-separated into buf (n bytes): for a test's failure message. */
void dt_cuda_wait_sites(struct dt_backend *be, int64_t first, char *buf, size_t n);
/* A library call (a cuBLAS or cuDNN product) about to be made on the backend's stream:
 * counted (dt_backend_launch_counts). */
static inline void dt_cuda_count_lib(struct dt_backend *be) { be->launches.lib_calls++; }
/* A device-to-device cudaMemcpyAsync on stream s, counted (memsets are counted by
 * dt_cuda_memset_async, nets/cuda/launch.cuh); abort on error. */
void dt_cuda_copy_d2d(struct dt_backend *be, void *dst, const void *src, size_t bytes,
                      dt_cuda_stream s);
/* The cuBLAS handle with the math mode for `pol` set: TF32 allowed for `math: fast`,
 * pedantic FP32 otherwise (callers use it for fast and strict only). */
void *dt_cuda_cublas_for(struct dt_backend *be, const struct dt_policy *pol);
/* The handle for integer products (the exact product's int8 GEMMs): the default math mode,
 * tensor cores allowed -- integer sums are exact in any order. */
void *dt_cuda_cublas_int8(struct dt_backend *be);

/* Launch geometry hook for tests, on backend be (struct dt_cuda_launch): threads per block
 * (0 = default 256) and the largest grid (0 = as many blocks as the work needs, capped at
 * 65535). Kernels loop grid-stride, so every result must be the same bits for any setting. */
void dt_cuda_set_launch(struct dt_backend *be, int block_threads, int max_blocks);
void dt_cuda_set_block_size(struct dt_backend *be, int threads); /* the current cap kept */

/* ---- checks with a device record (status.c; nets/backend.h, "deferred checks") -------- */

#define DT_CUDA_STATUS_SLOTS                                                                       \
    1024 /* deferred records per step (the GPU-scale GPT at math:                                  \
          * exact: some 150 products); beyond, ops check at once */
enum dt_cuda_check {
    DT_CUDA_CHECK_BIAS,    /* the fixed-point bias gradient: len = its columns */
    DT_CUDA_CHECK_SCATTER, /* a fixed-point scatter: len = the patch row's length, or 0 */
    DT_CUDA_CHECK_XP       /* the exact product's scales: len = M (A's rows, then B's columns) */
};
struct dt_cuda_fixed_record;
/* The record an op's check writes: a slot of the step's status buffer (*deferred: the op
 * returns without reading it) or the op's own scratch slot `slot` (read it with
 * dt_cuda_check_now after the kernels). */
struct dt_cuda_fixed_record *dt_cuda_check_record(struct dt_backend *be, enum dt_cuda_check kind,
                                                  const char *what, int64_t len, int slot,
                                                  bool *deferred);
enum dt_status dt_cuda_check_now(struct dt_backend *be, const struct dt_cuda_fixed_record *rec,
                                 enum dt_cuda_check kind, const char *what, int64_t len, int slot);
void dt_cuda_defer_checks(struct dt_backend *be, bool on);
/* A recording backend's step records emptied (no copy: it has none). */
void dt_cuda_recorder_reset(struct dt_backend *be);
/* The step's records and reads forgotten (a capture discarded: none of them was copied). */
void dt_cuda_status_forget(struct dt_backend *be);
/* Values read with the step's end (dt_backend_read_deferred): an asynchronous copy into the
 * read's pinned buffer now, into host_dst after the step's one wait. */
void dt_cuda_read_deferred(struct dt_backend *be, void *host_dst, const void *src, size_t bytes);
/* The loss's read-back deferred to the step's end (loss.cu): what dt_cuda_loss_finish needs. */
struct dt_cuda_loss_read {
    int64_t B, C;
    enum dt_reduction reduction;
    uint64_t forced_order;
    float *loss_host; /* count > 0: one per shard */
    int64_t *correct_host;
    int64_t count, mult; /* shards (0 = none) and rows per example */
    int64_t row[64 + 1]; /* the shards' rows (64: DT_CUDA_SHARDS_MAX, dense_loss.h) */
};
/* true: the bytes at src (the op's [losses][hits][total]) are copied back with the step's
 * end and finished there; false: checks are not deferred or the step's reads are full --
 * the op reads at once. */
typedef enum dt_status (*dt_cuda_loss_finish_fn)(struct dt_backend *be, const char *h,
                                                 const struct dt_cuda_loss_read *r);
bool dt_cuda_defer_loss(struct dt_backend *be, const void *src, size_t bytes,
                        const struct dt_cuda_loss_read *r, dt_cuda_loss_finish_fn finish);
enum dt_status dt_cuda_loss_finish(struct dt_backend *be, const char *h,
                                   const struct dt_cuda_loss_read *r);
enum dt_status dt_cuda_step_end(struct dt_backend *be, struct dt_error *err);
void dt_cuda_status_free(struct dt_backend *be);

/* ---- host-side ops (same contracts as backend.h; each file states its determinism) ----
 * dt_cuda_<name> for every row of nets/op_list.h, beside its kernels in its family's .cu
 * (docs/ops.md names each op's): dense.cu (dense, bias), loss.cu (softmax cross-entropy),
 * activation.cu (relu, gelu, add, dropout), norm.cu (layernorm), attention.cu, embedding.cu,
 * optim.cu (sgd, adamw, clipping), conv.cu (convolution, pooling; conv_choose.c routes),
 * bnn.cu (epsilon, Bayesian), exact.cu (exact_sum), digest.cu, matmul_exact.cu. */
#define DT_CUDA_OP_DECLARE_(ENUM, name, ...) dt_##name##_fn dt_cuda_##name;
DT_OP_LIST(DT_CUDA_OP_DECLARE_)
#undef DT_CUDA_OP_DECLARE_

/* nets/cuda/exact.cu: reduction: exact, the sum of the shard partials */
dt_exact_max_fn dt_cuda_exact_max;
dt_exact_to_fixed_fn dt_cuda_exact_to_fixed;
dt_exact_round_fn dt_cuda_exact_round;

/* nets/cuda/dense.cu */
/* reduction: exact's bias and (portable) weight-gradient partials of every shard in one
 * launch each (DT_ERR_UNSUPPORTED where the shapes or the policy are beyond the kernels:
 * then one call per shard, nets/dispatch.c). */
dt_bias_backward_fn dt_cuda_bias_backward_shards;
dt_dense_backward_weight_fn dt_cuda_dense_backward_weight_shards;
dt_softmax_xent_forward_fn dt_cuda_softmax_xent_forward_shards;     /* loss.cu */
dt_conv2d_backward_weight_fn dt_cuda_conv2d_backward_weight_shards; /* conv.cu */
/* The op first_nonfinite: dt_cuda_fixed_scan's first bad index (atomicMin),
 * one small record read back; -1 when every element is finite. */
dt_first_nonfinite_fn dt_cuda_first_nonfinite;
/* first_nonfinite_many: one scan (and record) per tensor, queued back to back, then one
 * copy of all the records and one wait. */
dt_first_nonfinite_many_fn dt_cuda_first_nonfinite_many;

/* nets/cuda/digest.cu: the n tensors of `table` (n + 1 word offsets, then n addresses, on
 * the device) copied back to back into dst, `total` 4-byte words, in one launch. */
int dt_cuda_gather_words(uint32_t *dst, const int64_t *table, int n, int64_t total,
                         const struct dt_cuda_launch *L);

/* nets/cuda/conv.cu: `conv_algo: own`, else the cuDNN functions below;
 * detrain's own kernels for the ops above (nets/cuda/conv.cu), whatever conv_algo says: what
 * nets/cuda/conv_choose.c picks under `own`, and what cuDNN falls back to. */
dt_conv2d_forward_fn dt_cuda_own_conv2d_forward;
dt_conv2d_backward_data_fn dt_cuda_own_conv2d_backward_data;
dt_conv2d_backward_weight_fn dt_cuda_own_conv2d_backward_weight;
dt_maxpool2d_backward_fn dt_cuda_own_maxpool2d_backward;
/* dst (cols, rows) = src (rows, cols) transposed: exact copies (HWIO <-> KRSC weights;
 * nets/cuda/conv.cu, for cudnn_conv.c). Returns 0 or the launch's cudaError_t. */
int dt_cuda_transpose(float *dst, const float *src, int64_t rows, int64_t cols,
                      const struct dt_cuda_launch *L);
/* nets/cuda/cudnn_conv.c: `conv_algo: autotune | deterministic` through cuDNN (built
 * without cuDNN: DT_ERR_UNSUPPORTED saying so). Each call leaves an algorithm note. */
dt_conv2d_forward_fn dt_cudnn_conv2d_forward;
dt_conv2d_backward_data_fn dt_cudnn_conv2d_backward_data;
dt_conv2d_backward_weight_fn dt_cudnn_conv2d_backward_weight;
enum dt_status dt_cudnn_maxpool2d_backward(struct dt_backend *be, float *dx, const float *dy,
                                           const float *x, const float *y, const int32_t *argmax,
                                           const struct dt_pool2d_shape *s,
                                           const struct dt_policy *pol);
int dt_cudnn_take_notes(struct dt_backend *be, struct dt_algo_note *notes, int max);
void dt_cudnn_reset_choices(struct dt_backend *be);
void dt_cudnn_destroy(struct dt_backend *be);
/* The version of cuDNN linked (0 without), for describe. */
size_t dt_cudnn_version(void);
/* Test support, independent of how a choice was made: time every algorithm of `op`
 * ("conv_fwd", "conv_bwd_data", "conv_bwd_filter") for shape s with cudnnFind* and return
 * the determinism cuDNN reports for `algo` (1 deterministic, 0 not) in *deterministic.
 * DT_ERR_UNSUPPORTED when cuDNN did not report that algorithm. */
enum dt_status dt_cudnn_reported_determinism(struct dt_backend *be, const char *op,
                                             const struct dt_conv2d_shape *s, int algo,
                                             int *deterministic);
/* Test seam: the next n cuDNN executions (convolutions, max-pool backward) read as
 * CUDNN_STATUS_NOT_SUPPORTED before cuDNN is called, as cuDNN may answer at execution for an
 * algorithm it offered; each such call falls back to detrain's own kernels under the same
 * policy and notes "fallback at execution". False without cuDNN (or when it cannot start). */
bool dt_cudnn_test_refuse_exec(struct dt_backend *be, int n);

/* nets/cuda/gather.cu: x (B, dim) and labels gathered from the resident set (pixels or
 * values, set_labels: device memory) by the device indices idx (B of them) */
int dt_cuda_gather_launch(float *x, int32_t *labels, const uint8_t *pixels, const float *values,
                          const uint8_t *set_labels, const int64_t *idx, int64_t B, int64_t dim,
                          int64_t stride, const struct dt_cuda_launch *L);

/* nets/cuda/graph.c: the step captured and launched as one graph (nets/backend.h) */
enum dt_status dt_cuda_graph_begin(struct dt_backend *be, struct dt_error *err);
enum dt_status dt_cuda_graph_end(struct dt_backend *be, void **graph, bool launch,
                                 struct dt_error *err);
void dt_cuda_graph_describe(struct dt_backend *be, const void *graph, char *buf, size_t size);
void dt_cuda_graph_free(struct dt_backend *be, void *graph);

#ifdef __cplusplus
}
#endif

#endif
