/* Backend interface: where tensors live and how ops run (docs/DESIGN.md, "Backends").
 * One opaque handle per backend; ops are free functions that check their arguments once
 * here and dispatch through the backend's private ops table (nets/backend_impl.h).
 * The training loop, models, hashing and reports never know which backend runs.
 *
 * Conventions: pointers passed to ops are backend memory (dt_backend_alloc); shapes are
 * row-major; parameter order is outputs, inputs, sizes, policy. Every op states its
 * determinism in its implementation ("portable: ...").
 * Dense weights are stored [in, out] (row k holds the weights from input k), so the
 * forward product vectorises across outputs while summing over inputs in index order.
 * Images are NHWC (batch, height, width, channels) and convolution weights HWIO
 * (kh, kw, in channel, out channel): a convolution is then a dense layer applied to
 * image patches (im2col rows ordered kh, kw, c), and flatten is a no-op view: a
 * (B, H, W, C) tensor is the (B, H*W*C) matrix the next dense layer reads. */
#ifndef DT_BACKEND_H
#define DT_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "determinism/philox.h"
#include "determinism/policy.h"
#include "determinism/xoroshiro.h"
#include "nets/op_list.h"
#include "nets/optim_elem.h" /* struct dt_adamw_step */

struct dt_backend;

#ifdef __cplusplus
extern "C" {
#endif

enum dt_backend_kind { DT_BACKEND_CPU, DT_BACKEND_CUDA };

struct dt_backend_options {
    enum dt_backend_kind kind;
    int threads; /* CPU worker threads; 0 = online CPUs (capped at 64) */
    int gpu;     /* CUDA device ordinal */
};

/* Create a backend by kind. A backend that was not built still links: its create says
 * "built without CUDA" (DT_ERR_UNSUPPORTED). */
enum dt_status dt_backend_create(struct dt_backend **out, const struct dt_backend_options *opt,
                                 struct dt_error *err);
void dt_backend_destroy(struct dt_backend *be);
const char *dt_backend_name(const struct dt_backend *be);
/* The name of the first op of nets/op_list.h the backend does not implement, or NULL when
 * it has them all: a run checks this before its first step (never a silent fallback). */
const char *dt_backend_missing_op(const struct dt_backend *be);
/* Why the last op that failed failed (an op never prints): true, with the detail in *out
 * (may be NULL), and the record cleared; false when no op failed since the last take. An op
 * the backend lacks is named there ("backend 'cuda' has no op conv2d_forward"). */
bool dt_backend_take_op_error(struct dt_backend *be, struct dt_error *out);
/* The device in words for manifests and benchmarks ("NVIDIA H100 80GB HBM3 (sm_90), 132
 * SMs; driver 13.0, runtime 13.0, cuBLAS 130100"); "" when the backend has nothing to add
 * (the CPU: the manifest's environment already names the processor). */
void dt_backend_describe(struct dt_backend *be, char *buf, size_t size);
/* The CPU backend's kernel family in this process: "avx512" (the wide kernels), "avx2" or
 * "baseline"; DETRAIN_CPU_ISA=avx2 holds it to avx2. The bits are the same on every one
 * (nets/cpu/cpu.h); run.json records it. */
const char *dt_cpu_kernels(void);
/* Worker threads in use (CPU), 1 for device backends. */
int dt_backend_threads(const struct dt_backend *be);

/* Backend memory, zero-filled. Aborts when memory runs out. */
void *dt_backend_alloc(struct dt_backend *be, size_t bytes);
void dt_backend_free(struct dt_backend *be, void *p);
void dt_backend_upload(struct dt_backend *be, void *dst, const void *src, size_t bytes);
void dt_backend_download(struct dt_backend *be, void *dst, const void *src, size_t bytes);
/* A host pointer to backend memory when it is host memory (CPU), NULL otherwise. */
const void *dt_backend_host_view(struct dt_backend *be, const void *p);

/* Wait until every op queued so far has finished (snapshot copies begun by
 * dt_backend_copy_out_begin have their own wait, dt_backend_copy_out_wait, so a step's
 * timing does not include them). Ops on a device backend may return before their kernels
 * ran, so a step's end time is read after this. A no-op on the CPU, whose ops return
 * finished. */
void dt_backend_synchronize(struct dt_backend *be);

/* How many times the training thread has waited for the device through this backend: a
 * stream synchronisation inside an op (an error record read back, a download, an upload
 * from pageable memory, a scratch buffer regrown) or dt_backend_synchronize. 0 on the CPU,
 * whose ops never wait. Tests and `detrain bench` read it per step (issues 19 and 21: the
 * exact reduction must add none; a step should need one). */
int64_t dt_backend_host_waits(const struct dt_backend *be);

/* What a device backend has put on its streams since it was made, each counted where it is
 * made (the CUDA backend: nets/cuda/launch.cuh, DT_LAUNCH; all zero on the CPU): its own
 * kernels, library calls (cuBLAS and cuDNN products), memsets and device-to-device copies.
 * `detrain cost` on a device compares a step's with the cost model's prediction. */
struct dt_launch_counts {
    int64_t kernels, lib_calls, memsets, copies;
    /* exact products (math: exact) by the form that ran: cuBLAS's int8 tensor-core GEMMs,
     * or the simple kernels where cuBLAS refused them (nets/cuda/matmul_exact.cu) */
    int64_t xp_int8, xp_simple;
};
struct dt_launch_counts dt_backend_launch_counts(const struct dt_backend *be);

/* ---- deferred checks: one status read per step (issue 21, item 1) --------------------
 * Ops whose checks need a device record (the fixed-point bias gradient, the fixed-point
 * conv and pooling scatters: non-finite input, float overflow of a sum) read it back and
 * wait for it after each call -- unless checks are deferred: then each record goes into a
 * slot of one status buffer, noted with the op and the context (the tensor whose gradient
 * the call computes, dt_backend_set_context; nets/model.h's DT_MODEL_GRAD sets it), the op
 * returns at once, and dt_backend_step_end reads every record of the step in one copy and
 * one wait. A fault then surfaces at the step's end, after the update: the step is failed
 * and its weights are not used (the replica stops, docs/cli.md, "Faults"). No effect on the CPU,
 * whose ops check as they go. */
void dt_backend_defer_checks(struct dt_backend *be, bool on);
void dt_backend_set_context(struct dt_backend *be, const char *tensor, bool input);
/* The same with the role named ("forward": nets/model.h's DT_MODEL_FWD). */
void dt_backend_set_context_role(struct dt_backend *be, const char *tensor, const char *role);
/* The layer the next ops belong to ("maxpool0"), for an observer's names (explain: "maxpool0
 * pool input gradient"), set by a model whose layers have names of their own (nets/net.c);
 * NULL or "" = none: an observer names an op by the parameters it reads. */
void dt_backend_set_layer(struct dt_backend *be, const char *layer);
const char *dt_backend_layer(const struct dt_backend *be);
/* The step's end: waits for the device (the one wait of dt_backend_synchronize) and reads
 * the deferred records. DT_OK, or the first fault in op order with err saying where:
 * "dense0.bias gradient: bias gradient: fixed-point sum of column 3 overflows the float
 * range" (the op's own message after the context). */
enum dt_status dt_backend_step_end(struct dt_backend *be, struct dt_error *err);
/* A value the step needs only after its end (its loss: softmax_xent_forward's loss_host and
 * correct_host; reduction: exact's maxima): bytes from backend memory src into host_dst,
 * which holds them once dt_backend_step_end returns when checks are deferred (copied back
 * with the records, no wait of its own), at once otherwise (a download). The CPU copies at
 * once. host_dst must stay valid until the step's end. */
void dt_backend_read_deferred(struct dt_backend *be, void *host_dst, const void *src, size_t bytes);
/* ---- the step as one graph (issue 67, item 5; the CUDA backend: nets/cuda/graph.c) ----
 * A device backend may capture a training step's launches instead of making them and
 * launch them as one graph. Between dt_backend_graph_begin and dt_backend_graph_end the
 * ops run their host code as always but nothing reaches the device; a capture that met
 * something it cannot hold (a host wait, a buffer grown, a read-back, a failed call) is
 * "broken" and is not launched: nothing of the step ran, and the caller runs it uncaptured
 * (nets/step.c holds the rules: when to capture, the self-check, the fall-back).
 * begin: DT_OK capturing, or DT_ERR_UNSUPPORTED with err saying why not (no graphs on this
 * backend: the CPU's ops run at once; checks not deferred; instrumented; ...).
 * end: *graph is the caller's executable graph (NULL at first: made), updated in place from
 * this capture when it can be, made anew when not. launch true -- DT_OK when the step was
 * launched as one graph; launch false -- discarded. Either way DT_ERR_UNSUPPORTED with err
 * naming what broke the capture when something did (its records and reads forgotten, its
 * launch counts taken back): a broken capture can make the step's own ops fail. */
enum dt_status dt_backend_graph_begin(struct dt_backend *be, struct dt_error *err);
enum dt_status dt_backend_graph_end(struct dt_backend *be, void **graph, bool launch,
                                    struct dt_error *err);
/* "12 launched (11 updated in place, 1 instantiated), 0 discarded", or "" (none, or a
 * backend without graphs). */
void dt_backend_graph_describe(struct dt_backend *be, const void *graph, char *buf, size_t size);
void dt_backend_graph_free(struct dt_backend *be, void *graph); /* NULL: nothing */

/* The training step around its loss ops (nets/model.c): while on, and checks are deferred,
 * softmax_xent_forward's loss_host and correct_host may land at the step's end instead of
 * at once (a device backend then reads them with the records: no wait of the op's own).
 * Off everywhere else (an evaluation reads its loss at once). */
void dt_backend_defer_loss(struct dt_backend *be, bool on);

/* ---- the training set resident in backend memory (issue 21, item 2) -------------------
 * A dataset held by the backend once, so each training batch is gathered (and, from pixel
 * bytes, converted: dt_pixel_value, nets/gather_hd.h) by the backend from the batch's
 * example indices: no batch upload from pageable host memory in a step. The source: n
 * examples of `dim` features as pixel bytes (pixels, n * dim) and/or their float values
 * (values, n * dim, each dt_pixel_value of its byte when both are given), and n labels.
 * The CPU backend borrows values and labels (they must outlive the set); the CUDA backend
 * copies the bytes (4x fewer than floats; the values when there are no bytes) and labels
 * to the device once. NULL: the backend keeps no resident set (host batches then). */
struct dt_resident;
struct dt_resident_src {
    int64_t n, dim;
    const uint8_t *pixels; /* may be NULL */
    const float *values;   /* may be NULL when pixels are given */
    const uint8_t *labels;
    int64_t stride; /* elements from example i's first to example i + 1's; 0 = dim (the
                       training windows of a text overlap: stride 1) */
};
struct dt_resident *dt_backend_resident_create(struct dt_backend *be,
                                               const struct dt_resident_src *src);
void dt_backend_resident_free(struct dt_backend *be, struct dt_resident *set);
/* x (B, dim) and labels (B), backend memory: row b = example idx[b] of set (idx: a host
 * array of B indices < n, read before the call returns). The bits of copying the host
 * rows. On CUDA: the indices go through pinned memory, one asynchronous copy and one
 * kernel, no wait. */
void dt_backend_gather(struct dt_backend *be, float *x, int32_t *labels,
                       const struct dt_resident *set, const int64_t *idx, int64_t B);

/* Host memory the backend copies into fastest: pinned on CUDA (so a device-to-host copy
 * can run while the host goes on), plain malloc on the CPU. Aborts when memory runs out. */
void *dt_backend_host_alloc(struct dt_backend *be, size_t bytes);
void dt_backend_host_free(struct dt_backend *be, void *p);

/* Snapshot copies for hashing without stalling the device (harness/run/hashpipe.h).
 * copy_out_begin copies n backend tensors srcs[i] of bytes[i] bytes, in order and back to
 * back, into host_dst (dt_backend_host_alloc memory), ordered after all work queued so far,
 * and returns at once: ops queued after it may overwrite the sources straight away (CUDA
 * snapshots them into a device staging buffer first). host_dst holds the bytes once the
 * matching copy_out_wait returns. Every begin is matched by one wait, in the order begun
 * (waits from one thread at a time); the waits may run on another thread than the begins,
 * also while later copies are begun. At most DT_BACKEND_COPY_OUT_DEPTH copies may be
 * begun and not yet waited for.
 * CPU: the bytes are copied before begin returns; wait returns at once. */
#define DT_BACKEND_COPY_OUT_DEPTH 4
void dt_backend_copy_out_begin(struct dt_backend *be, void *host_dst, const void *const *srcs,
                               const size_t *bytes, int n);
void dt_backend_copy_out_wait(struct dt_backend *be);
/* The same for the tree digests (core/tree_hash.h) of n float tensors: host_dst receives
 * n x 32 bytes, the op tensor_digests' output for the tensors as they were at the begin,
 * once the matching dt_backend_copy_out_wait returns (the two share their tickets and
 * depth). CUDA: the snapshot's copies on the training stream, the digests' kernels and
 * their copy back on the copy stream, so the training stream pays the copies alone.
 * CPU: the digests computed before begin returns. */
enum dt_status dt_backend_digests_out_begin(struct dt_backend *be, uint8_t *host_dst,
                                            const float *const *srcs, const int64_t *counts, int n);

/* Which library algorithm ran: one note per call of an op that lets a library choose
 * (CUDA: cuDNN convolutions and pooling under `conv_algo: autotune` or `deterministic`),
 * in call order. `deterministic` is what the library reports for that algorithm (for
 * autotune, from its timing run; for deterministic, checked at choice time). */
struct dt_algo_note {
    char op[24];        /* conv_fwd, conv_bwd_data, conv_bwd_filter, pool_bwd */
    char shape[64];     /* the call's geometry, e.g. 28x28x1>6 k5 s1 p2 b128 */
    int algo;           /* the library's algorithm number (-1: not a numbered algorithm) */
    char name[48];      /* its name, e.g. IMPLICIT_PRECOMP_GEMM, MAX_DETERMINISTIC */
    bool deterministic; /* the library marks it deterministic */
    char math[16];      /* math mode it ran with: fma (FP32 only), tf32 (tensor ops allowed) */
    char how[16];       /* how it was chosen: timed (autotune), heuristic, fixed */
};
/* Move up to `max` notes made since the last call into notes[]; returns how many were
 * made (more than max: the rest are dropped). 0 on backends without such choices. */
int dt_backend_take_algo_notes(struct dt_backend *be, struct dt_algo_note *notes, int max);
/* Forget every algorithm chosen so far, so that the next calls choose again as a fresh
 * process would (each replica starts with this: autotuning may then choose differently
 * from one replica to the next, which is what the notes are there to show). */
void dt_backend_reset_algo_choices(struct dt_backend *be);

/* The index of the first NaN or Inf (either sign; -0 and subnormals are finite) in p[0, n)
 * (backend memory), -1 when there is none: the per-step fault check of harness/run/train.c.
 * The backend's own scan (a max of |bits| in parallel, then the first index where it found
 * one), or a download and a host scan on backends without one. */
int64_t dt_backend_first_nonfinite(struct dt_backend *be, const float *p, int64_t n);
/* The same over `count` tensors p[i] of n[i] elements at once: false when all are finite;
 * true with *which = the first tensor (in the order given) holding a NaN or Inf and *index
 * = its first such element. One wait for the device in all (CUDA), not one per tensor. */
bool dt_backend_first_nonfinite_many(struct dt_backend *be, const float *const *p, const int64_t *n,
                                     int count, int *which, int64_t *index);

/* ---- reduction: exact, one pass (nets/step.c, docs/DESIGN.md "reduction") ------------------
 * The canonical shards of the batch the next ops see: shard k holds batch rows
 * [row[k], row[k+1]), row[0] = 0 and row[count] = the batch. While set, every batch
 * reduction called with `reduction: exact` -- dense_backward_weight, bias_backward,
 * conv2d_backward_weight, and the loss of softmax_xent_forward -- gives one result per
 * shard instead of one over the batch: slot k (dw + k * n, loss_host[k]) holds exactly
 * what the op gives on shard k's rows alone (the fixed tree over the shard's rows), so
 * the forward and backward run once over the batch and the per-row ops never see the
 * shards. An op whose rows are a multiple of the batch's (a convolution's bias gradient
 * over B*OH*OW rows) scales the shard rows by that multiple. Other policies ignore it. */
struct dt_shards {
    int64_t count;      /* shards; 0 = none set */
    const int64_t *row; /* count + 1 ascending row indices (kept by the caller while set) */
    /* One rank holding every shard of the step may also set these (else NULL): the packed
     * gradients (pack, laid out as *layout says) and, per tensor of the layout, `summed`,
     * DT_EXACT_UNSUMMED until a shard op sums its partials itself (the CPU backend's weight
     * gradient) and writes its tensor's maximum |bits| there; dt_exact_sum, given the same
     * array, then leaves that tensor as it is (kept by the caller while set). */
    const float *pack;
    const struct dt_exact_layout *layout;
    uint32_t *summed;
    const uint32_t *hint; /* NULL, or per tensor its maximum the step before (or UNSUMMED) */
};
/* Set (sh != NULL) or clear (NULL) the shards of the next ops. */
void dt_backend_set_shards(struct dt_backend *be, const struct dt_shards *sh);

/* The shard partials of every gradient, packed: tensor i of n[i] elements holds `slots`
 * partials at pack + slots * first[i] (slot k at + k * n[i]), first[] the prefix sums of
 * n[] (tensors + 1 entries, first[0] = 0). The exact sum over S = `shards` partials (every rank's)
 * per element: max_bits[i] = max over the held partials of tensor i of |bits| (dt_exact_max);
 *   shift_i = dt_fixed_shift_for(max_i, S): no sum of S terms overflows int64;
 *   acc[first[i] + e] = sum over the held slots of round(partial * 2^shift_i), exact
 *   (dt_exact_to_fixed); ranks add their acc with an integer all-reduce;
 *   slot 0 = acc * 2^-shift_i rounded once to float (dt_exact_round).
 * dt_exact_sum does all three when one process holds every shard: max_bits is then its
 * output (the CPU backend finds the maxima while it sums: nets/cpu/exact.c).
 * A tensor whose max_bits is not finite (>= 0x7f800000) is left as it is: the caller
 * reads max_bits and names it. max_bits (tensors uint32) and acc (first[tensors] int64)
 * are backend memory; n and first are host arrays. Integer sums: the bits depend on
 * neither the thread count, the device, nor how the shards are spread over ranks. */
struct dt_exact_layout {
    int tensors;
    const int64_t *n, *first;
    int64_t slots, shards;
    /* dt_exact_sum only, NULL or per tensor: DT_EXACT_UNSUMMED, or the maximum of a tensor
     * whose slot 0 already holds its exact sum (struct dt_shards: summed), which is then
     * copied into max_bits and the tensor left as it is. Host memory. */
    const uint32_t *summed;
};
#define DT_EXACT_UNSUMMED UINT32_MAX
enum dt_status dt_exact_max(struct dt_backend *be, uint32_t *max_bits, const float *pack,
                            const struct dt_exact_layout *L);
enum dt_status dt_exact_to_fixed(struct dt_backend *be, int64_t *acc, const float *pack,
                                 const uint32_t *max_bits, const struct dt_exact_layout *L);
enum dt_status dt_exact_round(struct dt_backend *be, float *pack, const int64_t *acc,
                              const uint32_t *max_bits, const struct dt_exact_layout *L);
/* The same sum in one pass over several ranks' packs that this process can read (the ranks
 * of one machine share their packs: nets/step.c), for elements [e0, e1): out[e - e0] = the
 * one rounding of the int64 sum, over every pack p and each of its slots[p] partials, of
 * round(partial * 2^shift_i) -- the bits of dt_exact_to_fixed, the integer all-reduce and
 * dt_exact_round. Pack p is laid out as L says with slots[p] slots (L->slots unused);
 * 1 <= n_packs <= DT_EXACT_PACKS_MAX. Host memory only: a backend whose memory the host
 * cannot read has no such op (DT_ERR_UNSUPPORTED). */
#define DT_EXACT_PACKS_MAX 16
enum dt_status dt_exact_sum_packs(struct dt_backend *be, float *out, const float *const *packs,
                                  const int64_t *slots, int n_packs, const uint32_t *max_bits,
                                  const struct dt_exact_layout *L, int64_t e0, int64_t e1);

/* Test hook: with seed != 0, the nondeterministic paths (`reduction: unordered`,
 * `atomics: float`) run serially in a combination order drawn from `seed` instead of
 * the order in which threads happen to finish, so a test can show that the order changes
 * the bits without relying on timing luck. 0 restores the real behaviour. Deterministic
 * paths ignore it. Returns DT_ERR_UNSUPPORTED when the backend has no such hook. */
enum dt_status dt_backend_set_forced_order(struct dt_backend *be, uint64_t seed);

/* Test hook: op (a DT_OP index; -1 none) takes `seconds` longer each call (a spin on the
 * host clock before it runs, inside its profiled time), so a test can make one op of one
 * policy slower than another policy's and see `detrain bench` flag it. */
void dt_backend_set_slow_op(struct dt_backend *be, int op, double seconds);

/* Per-op timing for benchmarks: while enabled, every op call's time is added to its slot
 * (DT_OP_*). Off by default. On the CPU, wall time (two clock reads per op). On a backend
 * with queued work and device timers (CUDA: a pair of events recorded around the op on its
 * stream, no wait), the device time between the pair, collected by dt_backend_profile_read
 * with one wait; a backend with neither brackets each op by dt_backend_synchronize. Step
 * times are taken with profiling off either way (`detrain bench`). */
/* The ops: one row each in nets/op_list.h, which says what a row holds. */
enum dt_op_phase { DT_PHASE_FORWARD, DT_PHASE_BACKWARD, DT_PHASE_UPDATE };
enum dt_op {
#define DT_OP_ENUM_(ENUM, ...) DT_OP_##ENUM,
    DT_OP_LIST(DT_OP_ENUM_)
#undef DT_OP_ENUM_
        DT_OP_COUNT
};
const char *dt_op_name(enum dt_op op);
/* The row's phase as a word ("forward", "backward", "update"), its k-th output's name and
 * whether `control` (a policy control's name: "reduction") is one of its controls. */
const char *dt_op_phase(enum dt_op op);
void dt_op_output_name(char *buf, size_t size, enum dt_op op, int k);
bool dt_op_obeys(enum dt_op op, const char *control);
void dt_backend_profile_enable(struct dt_backend *be, bool on);
/* Seconds spent per op since the last reset (device timers: waits for the last one). */
void dt_backend_profile_read(struct dt_backend *be, double seconds[DT_OP_COUNT]);
void dt_backend_profile_reset(struct dt_backend *be);

/* ---- op observation (`detrain explain`, harness/analyze/explain.c) ------------------------
 * While an observer is set, every op call hands it, before the op runs (after = false) and
 * after it returned DT_OK (after = true), the op and its tensors: the memory it writes
 * (its outputs: gradients, activations, the loss, the update's weights and momenta) and,
 * for naming only (bytes 0), the parameters it reads. The observer may download and hash
 * the outputs (copies: it must never write them) and may set the forced order
 * (dt_backend_set_forced_order) for this one op in its before call. With no observer, no profiling
 * and no slow-op hook the cost is one test per op (dt_backend.instrumented). */
enum dt_op_tensor_role {
    DT_OP_OUT,      /* written by the op, in backend memory: float32 */
    DT_OP_OUT_INT,  /* written by the op, in backend memory: int32 (an argmax, lane states) */
    DT_OP_OUT_HOST, /* written by the op, in host memory: float32 (a loss) */
    DT_OP_IN_PARAM, /* read by the op; a parameter's weights for naming (bytes 0) */
};
struct dt_op_tensor {
    const void *p;
    int64_t bytes;
    enum dt_op_tensor_role role;
};
typedef void (*dt_op_observer_fn)(void *ctx, struct dt_backend *be, enum dt_op op, bool after,
                                  const struct dt_op_tensor *t, int n);
/* fn NULL: none (the default). */
void dt_backend_set_observer(struct dt_backend *be, dt_op_observer_fn fn, void *ctx);

/* ---- convolution and pooling (NHWC) ------------------------------------------------- */

/* Geometry of a 2-D convolution; the same stride and zero padding on both axes. Fill the
 * inputs and call dt_conv2d_shape_init, which checks them and sets OH, OW. */
struct dt_conv2d_shape {
    int64_t B, H, W, C;    /* input x (B, H, W, C) */
    int64_t K_out, KH, KW; /* weight (KH, KW, C, K_out), bias (K_out) */
    int64_t stride, pad;   /* stride >= 1, 0 <= pad < kernel size */
    int64_t OH, OW;        /* output y (B, OH, OW, K_out) */
};
/* Geometry of a 2-D max pooling window; padding cells never win the max. */
struct dt_pool2d_shape {
    int64_t B, H, W, C;     /* input x (B, H, W, C) */
    int64_t K, stride, pad; /* window K x K; 0 <= pad < K */
    int64_t OH, OW;         /* output y (B, OH, OW, C) */
};
/* OH = (H + 2 pad - KH) / stride + 1 (likewise OW). DT_ERR_CONFIG naming the bad value
 * when a size is not positive, the padding is not below the kernel size, or the window
 * does not fit in the padded input. */
enum dt_status dt_conv2d_shape_init(struct dt_conv2d_shape *s, struct dt_error *err);
enum dt_status dt_pool2d_shape_init(struct dt_pool2d_shape *s, struct dt_error *err);

/* ---- dropout (model.dropout; masks under `rng`, determinism/dropout.h) -----------------
 * How a site's mask is formed: philox regenerates it from the counter (forward and
 * backward alike); lfsr walks each row's lane forwards (forward) or backwards (backward);
 * keep walks the lanes forwards and writes each element's keep byte (rng: stored,
 * forward); stored applies those bytes (rng: stored, backward). */
enum dt_dropout_mode {
    DT_DROPOUT_PHILOX,
    DT_DROPOUT_KEEP,
    DT_DROPOUT_STORED,
    DT_DROPOUT_LFSR_FORWARD,
    DT_DROPOUT_LFSR_BACKWARD
};
struct dt_dropout_site {
    enum dt_dropout_mode mode;
    struct dt_philox_stream stream; /* philox, keep: the site's stream (dt_dropout_stream) */
    int64_t row0;                   /* the global row of row 0 (determinism/dropout.h) */
    uint32_t threshold;             /* keep when u >= threshold */
    float scale;                    /* 1 / (1 - p), rounded */
};

/* ---- activation noise (bnn_mlp's local estimator; determinism/noise.h) -----------------
 * How a layer's noise reaches the op: philox draws it from the counter (forward and backward
 * alike); lfsr walks each row's lane forwards (forward) or backwards (backward); stored reads
 * the copy the forward kept (backward only: rng: stored draws with philox or lfsr). */
enum dt_noise_mode { DT_NOISE_PHILOX, DT_NOISE_LFSR, DT_NOISE_STORED };
struct dt_noise_site {
    enum dt_noise_mode mode;
    struct dt_philox_stream stream; /* philox: the layer's stream (dt_noise_stream) */
    int64_t row0;                   /* the global row of row 0 (determinism/noise.h) */
};

/* ---- the ops: dt_<name>(be, parameters) for every row of nets/op_list.h, where each op's
 * contract is written above its row ---------------------------------------------------- */
#define DT_OP_DECLARE_(ENUM, name, phase, outputs, controls, params, args)                         \
    enum dt_status dt_##name DT_OP_PARAMS params;
DT_OP_LIST(DT_OP_DECLARE_)
#undef DT_OP_DECLARE_

#ifdef __cplusplus
}
#endif

#endif
