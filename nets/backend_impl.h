/* Private: the ops table each backend fills (docs/DESIGN.md, "Backends"). One table, no
 * versions: a member is a function, or NULL where the backend does not have it -- an op
 * then answers DT_ERR_UNSUPPORTED, naming itself (dt_backend_missing_op for the training
 * ops), and the other members' NULL meaning is said beside them. Argument checks live in
 * nets/backend.c, not here.
 *
 * Each op's signature is written once, as a function type below: the table holds pointers
 * to it and a backend declares its functions with it (`dt_dense_forward_fn
 * dt_cpu_dense_forward;` in nets/cpu/cpu.h), so a definition that drifts from the table is
 * a compile error. The public wrappers (nets/backend.h) take the same arguments.
 *
 * Errors: an op returns its status and, when it fails, the detail in be->op_error
 * (dt_backend_op_error); it never prints. The caller formats it (nets/model.c names the
 * tensor and the step). */
#ifndef DT_BACKEND_IMPL_H
#define DT_BACKEND_IMPL_H

#include "nets/backend.h"

/* ---- the ops' function types (arguments as in nets/backend.h) ----------------------- */

typedef enum dt_status dt_dense_forward_fn(struct dt_backend *be, float *y, const float *x,
                                           const float *w, const float *bias, int64_t B, int64_t in,
                                           int64_t out, const struct dt_policy *pol);
typedef enum dt_status dt_dense_backward_data_fn(struct dt_backend *be, float *dx, const float *dy,
                                                 const float *w, int64_t B, int64_t in, int64_t out,
                                                 const struct dt_policy *pol);
typedef enum dt_status dt_dense_backward_weight_fn(struct dt_backend *be, float *dw, const float *x,
                                                   const float *dy, int64_t B, int64_t in,
                                                   int64_t out, const struct dt_policy *pol);
typedef enum dt_status dt_bias_backward_fn(struct dt_backend *be, float *dbias, const float *dy,
                                           int64_t B, int64_t out, const struct dt_policy *pol);
typedef enum dt_status dt_relu_forward_fn(struct dt_backend *be, float *y, const float *x,
                                          int64_t n, const struct dt_policy *pol);
typedef enum dt_status dt_relu_backward_fn(struct dt_backend *be, float *dx, const float *dy,
                                           const float *y, int64_t n, const struct dt_policy *pol);
typedef enum dt_status dt_softmax_xent_forward_fn(struct dt_backend *be, float *probs,
                                                  float *loss_host, int64_t *correct_host,
                                                  const float *logits, const int32_t *labels,
                                                  int64_t B, int64_t C,
                                                  const struct dt_policy *pol);
/* denom >= B: the global batch a shard's rows belong to (harness/run/dist.h) */
typedef enum dt_status dt_softmax_xent_backward_fn(struct dt_backend *be, float *dlogits,
                                                   const float *probs, const int32_t *labels,
                                                   int64_t B, int64_t C, int64_t denom,
                                                   const struct dt_policy *pol);
typedef enum dt_status dt_sgd_update_fn(struct dt_backend *be, float *w, float *v, const float *g,
                                        int64_t n, float lr, float momentum, float weight_decay,
                                        const struct dt_policy *pol);
typedef enum dt_status dt_conv2d_forward_fn(struct dt_backend *be, float *y, const float *x,
                                            const float *w, const float *bias,
                                            const struct dt_conv2d_shape *s,
                                            const struct dt_policy *pol);
typedef enum dt_status dt_conv2d_backward_data_fn(struct dt_backend *be, float *dx, const float *dy,
                                                  const float *w, const struct dt_conv2d_shape *s,
                                                  const struct dt_policy *pol);
typedef enum dt_status dt_conv2d_backward_weight_fn(struct dt_backend *be, float *dw,
                                                    const float *x, const float *dy,
                                                    const struct dt_conv2d_shape *s,
                                                    const struct dt_policy *pol);
typedef enum dt_status dt_maxpool2d_forward_fn(struct dt_backend *be, float *y, int32_t *argmax,
                                               const float *x, const struct dt_pool2d_shape *s,
                                               const struct dt_policy *pol);
/* x and y: the forward's input and output, for libraries that recompute the winners (the
 * CPU reads argmax alone) */
typedef enum dt_status dt_maxpool2d_backward_fn(struct dt_backend *be, float *dx, const float *dy,
                                                const float *x, const float *y,
                                                const int32_t *argmax,
                                                const struct dt_pool2d_shape *s,
                                                const struct dt_policy *pol);
typedef enum dt_status dt_eps_philox_fn(struct dt_backend *be, float *eps, int64_t n,
                                        const struct dt_philox_stream *s,
                                        const struct dt_policy *pol);
typedef enum dt_status dt_eps_lfsr_seed_fn(struct dt_backend *be, struct dt_xoro *lanes, int64_t P,
                                           uint64_t seed, uint32_t step, uint32_t member,
                                           uint32_t sample, const struct dt_policy *pol);
typedef enum dt_status dt_eps_lfsr_fn(struct dt_backend *be, float *eps, int64_t n,
                                      struct dt_xoro *lanes, int64_t P, bool backward,
                                      int64_t skip_lane, const struct dt_policy *pol);
typedef enum dt_status dt_bnn_sigma_fn(struct dt_backend *be, float *sigma, float *dsigma,
                                       const float *rho, int64_t n, const struct dt_policy *pol);
typedef enum dt_status dt_bnn_sample_fn(struct dt_backend *be, float *w, const float *mu,
                                        const float *sigma, const float *eps, int64_t n,
                                        const struct dt_policy *pol);
typedef enum dt_status dt_bnn_accumulate_fn(struct dt_backend *be, float *gmu, float *grho,
                                            const float *g, const float *eps, const float *dsigma,
                                            int64_t n, bool first, const struct dt_policy *pol);
typedef enum dt_status dt_bnn_finish_fn(struct dt_backend *be, float *gmu, float *grho,
                                        const float *mu, const float *sigma, const float *dsigma,
                                        int64_t n, float inv_samples, float kl_weight,
                                        float prior_var, const struct dt_policy *pol);
/* reduction: exact in one pass (nets/backend.h, dt_exact_*) */
typedef enum dt_status dt_exact_max_fn(struct dt_backend *be, uint32_t *max_bits, const float *pack,
                                       const struct dt_exact_layout *L);
typedef enum dt_status dt_exact_to_fixed_fn(struct dt_backend *be, int64_t *acc, const float *pack,
                                            const uint32_t *max_bits,
                                            const struct dt_exact_layout *L);
typedef enum dt_status dt_exact_round_fn(struct dt_backend *be, float *pack, const int64_t *acc,
                                         const uint32_t *max_bits, const struct dt_exact_layout *L);
typedef enum dt_status dt_exact_sum_fn(struct dt_backend *be, float *pack, const uint32_t *max_bits,
                                       const struct dt_exact_layout *L);
typedef enum dt_status dt_embedding_forward_fn(struct dt_backend *be, float *h, int32_t *tokens,
                                               int32_t *targets, const float *x, const float *wte,
                                               const float *wpe, int64_t B, int64_t T, int64_t D,
                                               const struct dt_policy *pol);
typedef enum dt_status dt_embedding_backward_fn(struct dt_backend *be, float *dwte, const float *dh,
                                                const int32_t *tokens, int64_t rows, int64_t V,
                                                int64_t D, bool accumulate,
                                                const struct dt_policy *pol);
typedef enum dt_status dt_layernorm_forward_fn(struct dt_backend *be, float *y, float *mean,
                                               float *rstd, const float *x, const float *gamma,
                                               const float *beta, int64_t rows, int64_t D,
                                               const struct dt_policy *pol);
typedef enum dt_status dt_layernorm_backward_fn(struct dt_backend *be, float *dx, float *gx,
                                                const float *dy, const float *x, const float *mean,
                                                const float *rstd, const float *gamma, int64_t rows,
                                                int64_t D, bool accumulate,
                                                const struct dt_policy *pol);
typedef enum dt_status dt_attention_forward_fn(struct dt_backend *be, float *out, float *att,
                                               const float *qkv, int64_t B, int64_t T, int64_t H,
                                               int64_t D, const struct dt_policy *pol);
typedef enum dt_status dt_attention_backward_fn(struct dt_backend *be, float *dqkv, float *ds,
                                                const float *dout, const float *att,
                                                const float *qkv, int64_t B, int64_t T, int64_t H,
                                                int64_t D, const struct dt_policy *pol);
typedef enum dt_status dt_gelu_forward_fn(struct dt_backend *be, float *y, const float *x,
                                          int64_t n, const struct dt_policy *pol);
typedef enum dt_status dt_gelu_backward_fn(struct dt_backend *be, float *dx, const float *dy,
                                           const float *x, int64_t n, const struct dt_policy *pol);
typedef enum dt_status dt_add_fn(struct dt_backend *be, float *y, const float *x, int64_t n,
                                 const struct dt_policy *pol);
typedef enum dt_status dt_adamw_update_fn(struct dt_backend *be, float *w, float *m, float *v,
                                          const float *g, int64_t n, const struct dt_adamw_step *s,
                                          const struct dt_policy *pol);
typedef enum dt_status dt_grad_norm_fn(struct dt_backend *be, float *norm_sq, const float *const *g,
                                       const int64_t *n, int count, const struct dt_policy *pol);
typedef enum dt_status dt_clip_scale_fn(struct dt_backend *be, float *g, int64_t n,
                                        const float *norm_sq, float max_norm,
                                        const struct dt_policy *pol);
typedef enum dt_status dt_dropout_fn(struct dt_backend *be, float *y, const float *x, uint8_t *keep,
                                     struct dt_xoro *lanes, int64_t rows, int64_t width,
                                     const struct dt_dropout_site *s, const struct dt_policy *pol);
typedef enum dt_status dt_dropout_seed_fn(struct dt_backend *be, struct dt_xoro *lanes,
                                          int64_t rows, int64_t row0, uint64_t seed, uint32_t step,
                                          uint32_t member, const struct dt_policy *pol);
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

    /* ---- the training ops (dt_backend_missing_op names the first NULL one) ---- */
    dt_dense_forward_fn *dense_forward;
    dt_dense_backward_data_fn *dense_backward_data;
    dt_dense_backward_weight_fn *dense_backward_weight;
    dt_bias_backward_fn *bias_backward;
    dt_relu_forward_fn *relu_forward;
    dt_relu_backward_fn *relu_backward;
    dt_softmax_xent_forward_fn *softmax_xent_forward;
    dt_softmax_xent_backward_fn *softmax_xent_backward;
    dt_sgd_update_fn *sgd_update;
    /* ---- convolution and pooling (LeNet) ---- */
    dt_conv2d_forward_fn *conv2d_forward;
    dt_conv2d_backward_data_fn *conv2d_backward_data;
    dt_conv2d_backward_weight_fn *conv2d_backward_weight;
    dt_maxpool2d_forward_fn *maxpool2d_forward;
    dt_maxpool2d_backward_fn *maxpool2d_backward;
    /* ---- Bayesian layers and epsilon (bnn_mlp) ---- */
    dt_eps_philox_fn *eps_philox;
    dt_eps_lfsr_seed_fn *eps_lfsr_seed;
    dt_eps_lfsr_fn *eps_lfsr;
    dt_bnn_sigma_fn *bnn_sigma;
    dt_bnn_sample_fn *bnn_sample;
    dt_bnn_accumulate_fn *bnn_accumulate;
    dt_bnn_finish_fn *bnn_finish;
    /* ---- the transformer (gpt) and AdamW ---- */
    dt_embedding_forward_fn *embedding_forward;
    dt_embedding_backward_fn *embedding_backward;
    dt_layernorm_forward_fn *layernorm_forward;
    dt_layernorm_backward_fn *layernorm_backward;
    dt_attention_forward_fn *attention_forward;
    dt_attention_backward_fn *attention_backward;
    dt_gelu_forward_fn *gelu_forward;
    dt_gelu_backward_fn *gelu_backward;
    dt_add_fn *add;
    dt_adamw_update_fn *adamw_update;
    dt_grad_norm_fn *grad_norm;
    dt_clip_scale_fn *clip_scale;
    dt_dropout_fn *dropout;
    dt_dropout_seed_fn *dropout_seed;
    /* ---- reduction: exact in one pass: the exact sum of the shard partials ---- */
    dt_exact_max_fn *exact_max;
    dt_exact_to_fixed_fn *exact_to_fixed;
    dt_exact_round_fn *exact_round;
    dt_exact_sum_fn *exact_sum;
    /* The shard partials of a batch reduction in one call, with the shards of be->shards
     * (NULL, or DT_ERR_UNSUPPORTED for a policy it does not take, = the plain op once per
     * shard, called by nets/backend.c). Same bits as the call per shard. */
    dt_bias_backward_fn *bias_backward_shards;
    dt_dense_backward_weight_fn *dense_backward_weight_shards;

    /* ---- optional services: NULL = what the wrapper in nets/backend.c says ---- */
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
    /* Device timers for per-op profiling (both or neither): op_mark records a timer before
     * (begin) or after an op on the backend's stream; op_times waits for the last and adds
     * each pair's seconds to seconds[op], then forgets them (also what a reset does). */
    void (*op_mark)(struct dt_backend *, int op, bool begin);
    void (*op_times)(struct dt_backend *, double *seconds);
};

struct dt_backend {
    const struct dt_backend_ops *ops;
    void *ctx; /* the backend's own state */
    int threads;
    /* observer || profiling || slow_op: the one test an op's dispatch makes on the hot path
     * (nets/backend.c, DISPATCH); kept by their setters */
    bool instrumented;
    bool profiling;
    double op_seconds[DT_OP_COUNT];
    int slow_op;         /* test hook (dt_backend_set_slow_op): this op index + 1, 0 none */
    double slow_seconds; /* how much longer it takes */
    /* snapshot copies: begun and waited counts, kept by nets/backend.c, and the backend's
     * own state for them (made on first use, freed by copy_out_release) */
    int64_t copy_out_begun, copy_out_waited;
    void *copy_out;
    /* reduction: exact in one pass: the shards of the next ops (count 0 = none) */
    struct dt_shards shards;
    /* the training thread's waits for the device (dt_backend_host_waits), counted by the
     * backend where it waits */
    int64_t host_waits;
    /* the context of the next ops' deferred checks (dt_backend_set_context) */
    char context[96];
    /* the detail of the last op that failed (dt_backend_op_error; read and cleared by
     * dt_backend_take_op_error) */
    struct dt_error op_error;
    /* the op observer (dt_backend_set_observer); fn NULL = none */
    dt_op_observer_fn observer;
    void *observer_ctx;
};

/* For ops: record why the op fails and return `st` ("fixed-point sum of column 3 overflows
 * the float range"): the caller adds which tensor and step. The first detail since the last
 * take wins (a later op's failure is a consequence). */
enum dt_status dt_backend_op_error(struct dt_backend *be, enum dt_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

extern const struct dt_backend_ops dt_backend_cpu_ops;
extern const struct dt_backend_ops dt_backend_cuda_ops;

#endif
