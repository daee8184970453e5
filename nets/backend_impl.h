/* Private: the ops table each backend fills (docs/DESIGN.md, "Backends"). One table, no
 * versions: a member is a function, or NULL where the backend does not have it -- an op
 * then answers DT_ERR_UNSUPPORTED, naming itself (dt_backend_missing_op for the training
 * ops), and the other members' NULL meaning is said beside them. Argument checks live in
 * nets/dispatch.c, not here.
 *
 * Each op's signature is written once, in its row of nets/op_list.h: the function type
 * dt_<name>_fn below, the table's member and each backend's declaration (nets/cpu/cpu.h,
 * nets/cuda/cuda.h) are generated from it, so a definition that drifts from the row is a
 * compile error. The public wrappers (nets/backend.h) take the same arguments.
 *
 * Errors: an op returns its status and, when it fails, the detail in be->op_error
 * (dt_backend_op_error); it never prints. The caller formats it (nets/model.c names the
 * tensor and the step). */
#ifndef DT_BACKEND_IMPL_H
#define DT_BACKEND_IMPL_H

#include "nets/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the ops' function types: dt_<name>_fn for every row of nets/op_list.h ---------- */
#define DT_OP_FN_TYPE_(ENUM, name, phase, outputs, controls, params, args)                         \
    typedef enum dt_status dt_##name##_fn DT_OP_PARAMS params;
DT_OP_LIST(DT_OP_FN_TYPE_)
#undef DT_OP_FN_TYPE_
/* The stages of exact_sum for several ranks (nets/backend.h, struct dt_exact_layout). */
typedef enum dt_status dt_exact_max_fn(struct dt_backend *be, uint32_t *max_bits, const float *pack,
                                       const struct dt_exact_layout *L);
typedef enum dt_status dt_exact_to_fixed_fn(struct dt_backend *be, int64_t *acc, const float *pack,
                                            const uint32_t *max_bits,
                                            const struct dt_exact_layout *L);
typedef enum dt_status dt_exact_round_fn(struct dt_backend *be, float *pack, const int64_t *acc,
                                         const uint32_t *max_bits, const struct dt_exact_layout *L);
typedef enum dt_status dt_exact_sum_packs_fn(struct dt_backend *be, float *out,
                                             const float *const *packs, const int64_t *slots,
                                             int n_packs, const uint32_t *max_bits,
                                             const struct dt_exact_layout *L, int64_t e0,
                                             int64_t e1);
/* reduction: exact with one rank holding every shard (be->shards.summed set): the weight
 * gradient's shard partials summed by the op itself into dw (slot 0: dt_exact_sum's bits for
 * this tensor), *max_bits their largest |bits| (host memory); slots 1.. its scratch. `hint`:
 * the tensor's maximum the step before (DT_EXACT_UNSUMMED: none), which may speed the sum
 * and never changes its bits. */
typedef enum dt_status dt_dense_backward_weight_summed_fn(struct dt_backend *be, float *dw,
                                                          const float *x, const float *dy,
                                                          int64_t B, int64_t in, int64_t out,
                                                          const struct dt_policy *pol,
                                                          uint32_t hint, uint32_t *max_bits);
typedef int64_t dt_first_nonfinite_fn(struct dt_backend *be, const float *p, int64_t n);
typedef bool dt_first_nonfinite_many_fn(struct dt_backend *be, const float *const *p,
                                        const int64_t *n, int count, int *which, int64_t *index);

struct dt_backend_ops {
    const char *name;
    /* ---- life and memory (required, but host_view: NULL = memory is not host memory) ---- */
    enum dt_status (*init)(struct dt_backend *be, const struct dt_backend_options *opt,
                           struct dt_error *err);
    void (*destroy)(struct dt_backend *be);
    void *(*alloc)(struct dt_backend *be, size_t bytes);
    void (*free)(struct dt_backend *be, void *p);
    void (*upload)(struct dt_backend *be, void *dst, const void *src, size_t bytes);
    void (*download)(struct dt_backend *be, void *dst, const void *src, size_t bytes);
    const void *(*host_view)(struct dt_backend *be, const void *p);

    /* ---- the ops: one member per row of nets/op_list.h (dt_backend_missing_op names the
     * first NULL one) and exact_sum's stages for several ranks ---- */
#define DT_OP_MEMBER_(ENUM, name, ...) dt_##name##_fn *name;
    DT_OP_LIST(DT_OP_MEMBER_)
#undef DT_OP_MEMBER_
    dt_exact_max_fn *exact_max;
    dt_exact_to_fixed_fn *exact_to_fixed;
    dt_exact_round_fn *exact_round;
    dt_exact_sum_packs_fn *exact_sum_packs; /* NULL: memory the host cannot read */
    /* The shard partials of a batch reduction in one call, with the shards of be->shards
     * (NULL, or DT_ERR_UNSUPPORTED for a policy it does not take, = the plain op once per
     * shard, called by nets/dispatch.c). Same bits as the call per shard. */
    dt_bias_backward_fn *bias_backward_shards;
    dt_dense_backward_weight_fn *dense_backward_weight_shards;
    dt_softmax_xent_forward_fn *softmax_xent_forward_shards;
    dt_conv2d_backward_weight_fn *conv2d_backward_weight_shards;
    /* NULL: the weight gradient's partials in their slots, for exact_sum (nets/dispatch.c) */
    dt_dense_backward_weight_summed_fn *dense_backward_weight_summed;

    /* ---- optional services: NULL = what the wrapper in nets/dispatch.c says ---- */
    void (*set_forced_order)(struct dt_backend *, uint64_t seed); /* NULL: unsupported */
    void (*synchronize)(struct dt_backend *be);                   /* NULL: ops return finished */
    void *(*host_alloc)(struct dt_backend *be, size_t bytes);     /* NULL: malloc (a pair) */
    void (*host_free)(struct dt_backend *be, void *p);
    /* Snapshot copies: `ticket` counts copies from 0; ticket % DT_BACKEND_COPY_OUT_DEPTH
     * names the copy's completion slot. NULL begin: one download per tensor; NULL wait:
     * nothing to wait; release frees what begin set up in be->copy_out (before destroy). */
    void (*copy_out_begin)(struct dt_backend *be, int64_t ticket, void *host_dst,
                           const void *const *srcs, const size_t *bytes, int n);
    void (*copy_out_wait)(struct dt_backend *be, int64_t ticket);
    void (*copy_out_release)(struct dt_backend *be);
    /* The tree digests of a snapshot, off the training stream (dt_backend_digests_out_begin;
     * its tickets are copy_out's). NULL: the op now, its digests downloaded. */
    enum dt_status (*digests_out_begin)(struct dt_backend *be, int64_t ticket, uint8_t *host_dst,
                                        const float *const *srcs, const int64_t *counts, int n);
    /* The device in words, with its driver and library versions (NULL: ""). */
    void (*describe)(struct dt_backend *be, char *buf, size_t size);
    /* Library algorithm choices (NULL: none). */
    int (*take_algo_notes)(struct dt_backend *be, struct dt_algo_note *notes, int max);
    void (*reset_algo_choices)(struct dt_backend *be);
    /* The first NaN or Inf (NULL: the wrapper downloads and scans; _many NULL: one call
     * per tensor). */
    dt_first_nonfinite_fn *first_nonfinite;
    dt_first_nonfinite_many_fn *first_nonfinite_many;
    /* The resident training set (all three or none: NULL = host batches). */
    struct dt_resident *(*resident_create)(struct dt_backend *, const struct dt_resident_src *);
    void (*resident_free)(struct dt_backend *, struct dt_resident *);
    void (*gather)(struct dt_backend *, float *, int32_t *, const struct dt_resident *,
                   const int64_t *, int64_t);
    /* Deferred checks (NULL: the ops check as they go; step_end NULL = synchronize). */
    void (*defer_checks)(struct dt_backend *, bool);
    enum dt_status (*step_end)(struct dt_backend *, struct dt_error *);
    /* NULL: a download (dt_backend_read_deferred) */
    void (*read_deferred)(struct dt_backend *, void *host_dst, const void *src, size_t bytes);
    /* Device timers for per-op profiling (both or neither): op_mark records a timer before
     * (begin) or after an op on the backend's stream; op_times waits for the last and adds
     * each pair's seconds to seconds[op], then forgets them (also what a reset does). */
    void (*op_mark)(struct dt_backend *, int op, bool begin);
    void (*op_times)(struct dt_backend *, double *seconds);
    /* The step as one graph (all four or none; nets/backend.h, dt_backend_graph_begin). */
    enum dt_status (*graph_begin)(struct dt_backend *, struct dt_error *);
    enum dt_status (*graph_end)(struct dt_backend *, void **graph, bool launch, struct dt_error *);
    void (*graph_describe)(struct dt_backend *, const void *graph, char *buf, size_t size);
    void (*graph_free)(struct dt_backend *, void *graph);
};

struct dt_backend {
    const struct dt_backend_ops *ops;
    void *ctx; /* the backend's own state */
    int threads;
    /* observer || profiling || slow_op || cost: the one test an op's dispatch makes on the hot path
     * (nets/dispatch.c, DISPATCH); kept by their setters */
    bool instrumented;
    bool profiling;
    double op_seconds[DT_OP_COUNT];
    int slow_op;         /* test hook (dt_backend_set_slow_op): this op index + 1, 0 none */
    double slow_seconds; /* how much longer it takes */
    /* snapshot copies: begun and waited counts, kept by nets/dispatch.c, and the backend's
     * own state for them (made on first use, freed by copy_out_release) */
    int64_t copy_out_begun, copy_out_waited;
    void *copy_out;
    /* reduction: exact in one pass: the shards of the next ops (count 0 = none) */
    struct dt_shards shards;
    /* the training thread's waits for the device (dt_backend_host_waits), counted by the
     * backend where it waits */
    int64_t host_waits;
    /* what the backend has launched (dt_backend_launch_counts), counted by the backend */
    struct dt_launch_counts launches;
    /* the context of the next ops' deferred checks (dt_backend_set_context) */
    char context[96];
    /* the layer the next ops belong to, for observers (dt_backend_set_layer; "" none) */
    char layer[32];
    /* the detail of the last op that failed (dt_backend_op_error; read and cleared by
     * dt_backend_take_op_error) */
    struct dt_error op_error;
    /* the op observer (dt_backend_set_observer); fn NULL = none */
    dt_op_observer_fn observer;
    void *observer_ctx;
    /* the cost model's tally (dt_backend_cost_enable, nets/cost.h); NULL = not counting */
    struct dt_cost_tally *cost;
    bool checks_deferred; /* dt_backend_defer_checks's last word */
    bool loss_deferred;   /* dt_backend_defer_loss's */
};

/* For ops: record why the op fails and return `st` ("fixed-point sum of column 3 overflows
 * the float range"): the caller adds which tensor and step. The first detail since the last
 * take wins (a later op's failure is a consequence). */
enum dt_status dt_backend_op_error(struct dt_backend *be, enum dt_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* math: exact's weight gradient sums over the batch (per shard) in two-level integers: DT_OK
 * when `rows` fit their bound (DT_XP_K_OP_MAX), else the error saying so. Both backends ask. */
enum dt_status dt_backend_xp_wgrad_rows(struct dt_backend *be, int64_t rows);

extern const struct dt_backend_ops dt_backend_cpu_ops;
extern const struct dt_backend_ops dt_backend_cuda_ops;

#ifdef __cplusplus
}
#endif

#endif
