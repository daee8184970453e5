/* Private: the ops table each backend fills. Members only grow at the end; `version`
 * says how many are there. Argument checks live in nets/backend.c, not here. */
#ifndef DT_BACKEND_IMPL_H
#define DT_BACKEND_IMPL_H

#include "nets/backend.h"

#define DT_BACKEND_OPS_VERSION 11

struct dt_backend_ops {
    int version;
    const char *name;
    enum dt_status (*init)(struct dt_backend *be, const struct dt_backend_options *opt,
                           struct dt_error *err);
    void (*destroy)(struct dt_backend *be);
    void *(*alloc)(struct dt_backend *be, size_t bytes);
    void (*free)(struct dt_backend *be, void *p);
    void (*upload)(struct dt_backend *be, void *dst, const void *src, size_t bytes);
    void (*download)(struct dt_backend *be, void *dst, const void *src, size_t bytes);
    const void *(*host_view)(struct dt_backend *be, const void *p); /* optional */

    enum dt_status (*dense_forward)(struct dt_backend *, float *, const float *, const float *,
                                    const float *, int64_t, int64_t, int64_t,
                                    const struct dt_policy *);
    enum dt_status (*dense_backward_data)(struct dt_backend *, float *, const float *,
                                          const float *, int64_t, int64_t, int64_t,
                                          const struct dt_policy *);
    enum dt_status (*dense_backward_weight)(struct dt_backend *, float *, const float *,
                                            const float *, int64_t, int64_t, int64_t,
                                            const struct dt_policy *);
    enum dt_status (*bias_backward)(struct dt_backend *, float *, const float *, int64_t, int64_t,
                                    const struct dt_policy *);
    enum dt_status (*relu_forward)(struct dt_backend *, float *, const float *, int64_t,
                                   const struct dt_policy *);
    enum dt_status (*relu_backward)(struct dt_backend *, float *, const float *, const float *,
                                    int64_t, const struct dt_policy *);
    enum dt_status (*softmax_xent_forward)(struct dt_backend *, float *, float *, int64_t *,
                                           const float *, const int32_t *, int64_t, int64_t,
                                           const struct dt_policy *);
    enum dt_status (*softmax_xent_backward)(struct dt_backend *, float *, const float *,
                                            const int32_t *, int64_t, int64_t,
                                            const struct dt_policy *);
    enum dt_status (*sgd_update)(struct dt_backend *, float *, float *, const float *, int64_t,
                                 float, float, float, const struct dt_policy *);
    /* version 2 */
    void (*set_forced_order)(struct dt_backend *, uint64_t seed); /* optional */
    /* version 3: convolution and pooling (optional: NULL answers DT_ERR_UNSUPPORTED) */
    enum dt_status (*conv2d_forward)(struct dt_backend *, float *, const float *, const float *,
                                     const float *, const struct dt_conv2d_shape *,
                                     const struct dt_policy *);
    enum dt_status (*conv2d_backward_data)(struct dt_backend *, float *, const float *,
                                           const float *, const struct dt_conv2d_shape *,
                                           const struct dt_policy *);
    enum dt_status (*conv2d_backward_weight)(struct dt_backend *, float *, const float *,
                                             const float *, const struct dt_conv2d_shape *,
                                             const struct dt_policy *);
    enum dt_status (*maxpool2d_forward)(struct dt_backend *, float *, int32_t *, const float *,
                                        const struct dt_pool2d_shape *, const struct dt_policy *);
    enum dt_status (*maxpool2d_backward)(struct dt_backend *, float *, const float *,
                                         const int32_t *, const struct dt_pool2d_shape *,
                                         const struct dt_policy *);
    /* version 4: Bayesian layers and epsilon (optional: NULL answers DT_ERR_UNSUPPORTED) */
    enum dt_status (*eps_philox)(struct dt_backend *, float *, int64_t,
                                 const struct dt_philox_stream *, const struct dt_policy *);
    enum dt_status (*eps_lfsr_seed)(struct dt_backend *, struct dt_xoro *, int64_t, uint64_t,
                                    uint32_t, uint32_t, uint32_t, const struct dt_policy *);
    enum dt_status (*eps_lfsr)(struct dt_backend *, float *, int64_t, struct dt_xoro *, int64_t,
                               bool, int64_t, const struct dt_policy *);
    enum dt_status (*bnn_sigma)(struct dt_backend *, float *, float *, const float *, int64_t,
                                const struct dt_policy *);
    enum dt_status (*bnn_sample)(struct dt_backend *, float *, const float *, const float *,
                                 const float *, int64_t, const struct dt_policy *);
    enum dt_status (*bnn_accumulate)(struct dt_backend *, float *, float *, const float *,
                                     const float *, const float *, int64_t, bool,
                                     const struct dt_policy *);
    enum dt_status (*bnn_finish)(struct dt_backend *, float *, float *, const float *,
                                 const float *, const float *, int64_t, float, float, float,
                                 const struct dt_policy *);
    /* version 5: synchronisation and the hashing pipeline's copies (all optional; the
     * wrappers in nets/backend.c say what NULL means) */
    void (*synchronize)(struct dt_backend *be);               /* NULL: ops return finished (CPU) */
    void *(*host_alloc)(struct dt_backend *be, size_t bytes); /* NULL: malloc */
    void (*host_free)(struct dt_backend *be, void *p);
    /* `ticket` counts copies from 0; ticket % DT_BACKEND_COPY_OUT_DEPTH names the copy's
     * completion slot. NULL begin: one download per tensor; NULL wait: nothing to wait. */
    void (*copy_out_begin)(struct dt_backend *be, int64_t ticket, void *host_dst,
                           const void *const *srcs, const size_t *bytes, int n);
    void (*copy_out_wait)(struct dt_backend *be, int64_t ticket);
    /* frees what copy_out_begin set up in be->copy_out; called before destroy */
    void (*copy_out_release)(struct dt_backend *be);
    /* version 6: the device in words, with its driver and library versions (optional) */
    void (*describe)(struct dt_backend *be, char *buf, size_t size);
    /* version 7: max-pool backward with the forward's x and y (for libraries that
     * recompute the winners; preferred over maxpool2d_backward when set), and the notes
     * of library algorithm choices (all optional: NULL = none) */
    enum dt_status (*maxpool2d_backward_xy)(struct dt_backend *, float *, const float *,
                                            const float *, const float *, const int32_t *,
                                            const struct dt_pool2d_shape *,
                                            const struct dt_policy *);
    int (*take_algo_notes)(struct dt_backend *be, struct dt_algo_note *notes, int max);
    void (*reset_algo_choices)(struct dt_backend *be);
    /* version 8: the index of the first NaN or Inf in p[0, n), -1 when every element is
     * finite (optional: NULL = the wrapper downloads and scans on the host) */
    int64_t (*first_nonfinite)(struct dt_backend *be, const float *p, int64_t n);
    /* version 8 too: the same over several tensors with one wait (optional: NULL = one
     * first_nonfinite call per tensor) */
    bool (*first_nonfinite_many)(struct dt_backend *be, const float *const *p, const int64_t *n,
                                 int count, int *which, int64_t *index);
    /* version 9: softmax_xent_backward with the divisor `denom` >= B, the global batch a
     * shard's rows belong to (harness/run/dist.h) (optional: NULL = only denom == B) */
    enum dt_status (*softmax_xent_backward_scaled)(struct dt_backend *, float *, const float *,
                                                   const int32_t *, int64_t, int64_t, int64_t,
                                                   const struct dt_policy *);
    /* version 10: reduction: exact in one pass, the exact sum of the shard partials
     * (optional: NULL answers DT_ERR_UNSUPPORTED). The per-shard batch reductions are the
     * plain ops, called once per shard by nets/backend.c. */
    enum dt_status (*exact_max)(struct dt_backend *, uint32_t *, const float *,
                                const struct dt_exact_layout *);
    enum dt_status (*exact_to_fixed)(struct dt_backend *, int64_t *, const float *,
                                     const uint32_t *, const struct dt_exact_layout *);
    enum dt_status (*exact_round)(struct dt_backend *, float *, const int64_t *, const uint32_t *,
                                  const struct dt_exact_layout *);
    enum dt_status (*exact_sum)(struct dt_backend *, float *, const uint32_t *,
                                const struct dt_exact_layout *);
    /* version 10 too: the shard partials of a batch reduction in one call, with the
     * shards of be->shards (optional: NULL, or DT_ERR_UNSUPPORTED for a policy it does not
     * take, = the plain op once per shard). Same bits as the call per shard. */
    enum dt_status (*bias_backward_shards)(struct dt_backend *, float *, const float *, int64_t,
                                           int64_t, const struct dt_policy *);
    enum dt_status (*dense_backward_weight_shards)(struct dt_backend *, float *, const float *,
                                                   const float *, int64_t, int64_t, int64_t,
                                                   const struct dt_policy *);
    /* version 11: the resident training set (optional, all three or none: NULL = host
     * batches, nets/backend.h) */
    struct dt_resident *(*resident_create)(struct dt_backend *, const struct dt_resident_src *);
    void (*resident_free)(struct dt_backend *, struct dt_resident *);
    void (*gather)(struct dt_backend *, float *, int32_t *, const struct dt_resident *,
                   const int64_t *, int64_t);
    /* version 11 too: deferred checks (optional: NULL = the ops check as they go; step_end
     * NULL = synchronize) */
    void (*defer_checks)(struct dt_backend *, bool);
    enum dt_status (*step_end)(struct dt_backend *, struct dt_error *);
    /* version 11 too: device timers for per-op profiling (optional, both or neither):
     * op_mark records a timer before (begin) or after an op on the backend's stream;
     * op_times waits for the last and adds each pair's seconds to seconds[op], then
     * forgets them (also what a reset does) */
    void (*op_mark)(struct dt_backend *, int op, bool begin);
    void (*op_times)(struct dt_backend *, double *seconds);
};

struct dt_backend {
    const struct dt_backend_ops *ops;
    void *ctx; /* the backend's own state */
    int threads;
    bool profiling;
    double op_seconds[DT_OP_COUNT];
    /* snapshot copies (version 5): begun and waited counts, kept by nets/backend.c, and the
     * backend's own state for them (made on first use, freed by copy_out_release) */
    int64_t copy_out_begun, copy_out_waited;
    void *copy_out;
    /* reduction: exact in one pass: the shards of the next ops (count 0 = none) */
    struct dt_shards shards;
    /* the training thread's waits for the device (dt_backend_host_waits), counted by the
     * backend where it waits */
    int64_t host_waits;
    /* the context of the next ops' deferred checks (dt_backend_set_context) */
    char context[96];
};

extern const struct dt_backend_ops dt_backend_cpu_ops;
extern const struct dt_backend_ops dt_backend_cuda_ops;

#endif
