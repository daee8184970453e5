/* Models: a backend-independent network with named parameters, and the generic training
 * and evaluation steps every model shares (docs/DESIGN.md: nets/<model> forward -> loss ->
 * backward -> optimizer, on a backend, with the policy passed to every op).
 * A model kind supplies forward and backward (struct dt_model_ops); the step that runs them
 * is nets/step.h's dt_step_train. */
#ifndef DT_MODEL_H
#define DT_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "core/status.h"
#include "determinism/policy.h"
#include "nets/backend.h"

#define DT_PARAM_NAME 48

/* One parameter tensor. Weight gradients and momentum live beside it. */
struct dt_param {
    char name[DT_PARAM_NAME]; /* e.g. "dense0.weight"; part of the model digest */
    int ndim;
    int64_t shape[4];
    int64_t n;        /* elements */
    int64_t fan_in;   /* init: U(-sqrt(6/fan_in), +sqrt(6/fan_in)); 0 = init_value */
    float init_value; /* every element's initial value when fan_in == 0 (default 0) */
    float *w, *g, *v; /* backend memory: value, gradient, momentum (AdamW: first moment) */
    float *s;         /* AdamW's second moment (n floats), made on its first step; or NULL */
};

struct dt_model;

/* Optimizer settings of a training step: SGD with momentum (PyTorch convention), or AdamW
 * (adamw true: beta1, beta2, eps; weight_decay decoupled). The learning rate of step t
 * (m->step, from 1): lr * t / warmup during a warm-up of `warmup` steps, then lr, or with
 * cosine lr * (1 + cos(pi (t - warmup - 1) / (total_steps - warmup))) / 2 -- the first step
 * after the warm-up at lr, the last one above 0 (PyTorch's CosineAnnealingLR with T_max =
 * total_steps - warmup) -- computed in double on the host and rounded once (dt_model_lr). */
struct dt_sgd_options {
    float lr, momentum, weight_decay;
    bool adamw;
    float beta1, beta2, eps;
    float clip_norm; /* > 0: every gradient scaled by dt_clip_coef of the global norm first */
    int64_t warmup, total_steps;
    bool cosine;
};
/* The learning rate of step `step` (>= 1) under opt. */
float dt_model_lr(const struct dt_sgd_options *opt, int64_t step);

/* What an evaluation measures. For a Bayesian model the predicted probabilities are the
 * average over its sampled ensemble. */
struct dt_eval {
    double loss;     /* mean negative log-likelihood of the label under the prediction */
    double accuracy; /* share of examples whose first most probable class is the label */
    double ece;      /* expected calibration error, 15 equal-width confidence bins */
};
#define DT_ECE_BINS 15

/* Memory a model holds for its random draws (bytes), for run.json and the benchmark. */
struct dt_model_memory {
    int64_t eps_held;      /* epsilon kept from forward to backward (rng: stored) */
    int64_t eps_workspace; /* transient epsilon of one tensor (regenerating modes) */
    int64_t rng_state;     /* generator state kept between the passes (lane states) */
};

/* One forward and backward pass of a training step, or an evaluation's forward. The step
 * (nets/step.h, dt_step_train) runs m->passes of them: every forward with its loss, then
 * every backward, in pass order. */
struct dt_pass {
    int index;     /* the pass within the step: a Monte Carlo sample (0 .. m->passes - 1) */
    int64_t slots; /* shard partials each batch reduction gives (the backend's shards; 1 none) */
    bool training; /* a training step (dropout, sampled weights), not an evaluation */
    /* What the loss reads and writes, as forward leaves it -- by default m->logits,
     * m->probs, m->dlogits and m->labels over the batch's B rows of n_classes; a model with
     * other logits (the GPT: one row per position, T per example) sets it. */
    const float *logits;
    float *probs, *dlogits;
    const int32_t *labels;
    int64_t rows, classes, per_example;
};

/* A model kind: forward and backward, and optionally the data-free term of its gradient.
 * Everything else -- loading the batch, the loss, the combination across shards and ranks,
 * clipping, the update -- is the step's (nets/step.c), the same for every kind. */
struct dt_model_ops {
    const char *kind;
    /* Compute the logits of the B rows in m->x for pass p (setting p's loss fields when
     * they are not the defaults). */
    enum dt_status (*forward)(struct dt_model *m, int64_t B, struct dt_pass *p,
                              const struct dt_policy *pol);
    /* From p's dlogits, add pass p's data term to every param's g (the first pass
     * assigns): one result per shard in each g's slots when p->slots > 1. */
    enum dt_status (*backward)(struct dt_model *m, int64_t B, const struct dt_pass *p,
                               const struct dt_policy *pol);
    void (*destroy)(struct dt_model *m); /* frees impl only */
    /* Optional: the data-free term (a prior's KL term, the mean over the passes), added to
     * every g once per step, after the data terms of every shard and rank were combined. */
    enum dt_status (*finish_gradients)(struct dt_model *m, const struct dt_policy *pol);
    /* Optional. Evaluation over host arrays; NULL = the generic one. pred, when not NULL,
     * receives each example's predicted class (n entries). */
    enum dt_status (*evaluate)(struct dt_model *m, const float *x, const uint8_t *y, int64_t n,
                               const struct dt_policy *pol, struct dt_eval *out, uint8_t *pred);
    /* Optional. Memory held for random draws under `pol`; NULL = none. */
    void (*memory)(const struct dt_model *m, const struct dt_policy *pol,
                   struct dt_model_memory *out);
    /* Optional (a kind with statistics per shard, m->stats_per_shard > 0): move the buffers
     * (running statistics) by every shard's statistics, in shard order -- stats holds
     * m->shards_total shards of m->stats_per_shard floats (backend memory). Called by the
     * step after the combination, once per training step. */
    enum dt_status (*update_buffers)(struct dt_model *m, const float *stats,
                                     const struct dt_policy *pol);
};

struct dt_model {
    const struct dt_model_ops *ops;
    struct dt_backend *be;
    int n_params;            /* the trained tensors: params[0, n_params) */
    int n_tensors;           /* every tensor of the model's state: the trained ones, then its
                                buffers (running statistics) at [n_params, n_tensors), which
                                have a value (w; v kept at zero) and no gradient (g NULL):
                                digested, saved and exported as the parameters are, never
                                combined, clipped or updated by the optimiser */
    struct dt_param *params; /* in digest order */
    int64_t in_dim, n_classes, max_batch;
    int passes;                      /* forward/backward passes per training step (dt_pass; >= 1) */
    float *x;                        /* (max_batch, in_dim) backend memory: the current batch */
    int32_t *labels;                 /* (max_batch) backend memory */
    float *logits, *probs, *dlogits; /* (max_batch, n_classes) backend memory */
    /* Random draws during training (Bayesian models): the seed (set by dt_model_init),
     * the ensemble member this replica is (set by the caller, default 0), and the steps
     * taken so far (dt_model_begin_step counts; the first step is 1, 0 = evaluation). */
    uint64_t seed;
    uint32_t member;
    int64_t step;
    /* The global batch row of m->x's first row (dt_model_load): a model whose draws are
     * per example (the GPT's dropout masks) keys them by global row, so they do not depend
     * on how a batch is split over shards and ranks. */
    int64_t row0;
    struct dt_error err; /* the model's own failure message, when a step fails */
    void *impl;
    /* reduction: exact (dt_model_grad_slots): every param's g packed in one buffer with
     * room for grad_slots shard partials each; NULL / 0 = each g on its own */
    float *grad_pack;
    bool grad_pack_lent; /* grad_pack is the caller's memory (dt_model_grad_slots_at) */
    int64_t grad_slots;
    int64_t *grad_first; /* n_params + 1 prefix sums of the params' n */
    float *norm_sq;      /* clipping: the global gradient norm squared (backend, 1 float) */
    float *loss_ws;      /* host: a pass's per-slot losses and their sums (passes > 1) */
    int64_t loss_ws_slots;
    /* How its weights are digested (set by the harness from hash.digest; hashing is not the
     * model's arithmetic): false = SHA-256 of each tensor's bytes, true = the tree digest
     * (core/tree_hash.h, the backend op tensor_digests). */
    bool tree_digest;
    uint8_t *digests; /* backend memory, n_tensors x 32 bytes: the tree digests' output,
                         allocated on first use (dt_hash_model), freed with the model */
    /* Statistics over each canonical shard of the batch (batch normalisation, nets/net.c;
     * stats_per_shard > 0 floats a shard, set by the kind). Before every training step's
     * forward, at every level, the step (nets/step.c) sets the shards of the rows in m->x
     * (dt_model_set_shards): local shard k holds rows [shard_row[k], shard_row[k + 1]) and
     * is shard shard0 + k of shards_total over a global batch of batch_total examples;
     * none set (shard_count 0): the rows are one shard. The kind writes local shard k's
     * statistics at stats + k * stats_per_shard; after the combination the step hands
     * every shard's (gathered from every rank into stats_all) to ops->update_buffers. */
    int64_t stats_per_shard;
    int64_t shard_count, shard0, shards_total, batch_total;
    int64_t *shard_row; /* host, shard_count + 1 (room for shard_row_room) */
    int64_t shard_row_room;
    float *stats, *stats_all;
    int64_t stats_room, stats_all_room; /* shards each holds */
};

/* For model kinds' backward passes: `st`, the status of an op computing the gradient of
 * parameter `tensor` (input = false) or the gradient flowing back through it into the
 * layer's input (input = true). On failure m->err, unless already set, says which:
 * "dense0.bias gradient: fixed-point sum of column 3 overflows the float range at step 7"
 * (the op's detail from the backend's op error record, dt_backend_take_op_error). Returns
 * st. */
enum dt_status dt_model_grad_status(struct dt_model *m, const char *tensor, bool input,
                                    enum dt_status st);
#define DT_MODEL_GRAD(m, tensor, input, call)                                                      \
    do {                                                                                           \
        dt_backend_set_context((m)->be, (tensor), (input)); /* deferred checks */                  \
        DT_FORWARD_IF_ERROR(dt_model_grad_status((m), (tensor), (input), (call)));                 \
    } while (0)
/* The same for a forward product of a layer whose weight is `tensor` (the exact product
 * refuses a non-finite operand): "<tensor> forward: <detail> at step N". */
enum dt_status dt_model_fwd_status(struct dt_model *m, const char *tensor, enum dt_status st);
#define DT_MODEL_FWD(m, tensor, call)                                                              \
    do {                                                                                           \
        dt_backend_set_context_role((m)->be, (tensor), "forward"); /* deferred checks */           \
        DT_FORWARD_IF_ERROR(dt_model_fwd_status((m), (tensor), (call)));                           \
    } while (0)

/* Shared set-up for model builders: allocate the batch buffers and n_params params. */
void dt_model_setup(struct dt_model *m, const struct dt_model_ops *ops, struct dt_backend *be,
                    int n_params, int64_t in_dim, int64_t n_classes, int64_t max_batch);
/* Define parameter i and allocate its w, g, v. */
void dt_model_param(struct dt_model *m, int i, const char *name, int ndim, const int64_t *shape,
                    int64_t fan_in);
/* Room for n buffers after the parameters (n_tensors = n_params + n), then define buffer i
 * (0-based among them) of C elements, every one init_value at dt_model_init. */
void dt_model_buffers(struct dt_model *m, int n);
void dt_model_buffer(struct dt_model *m, int i, const char *name, int64_t C, float init_value);
/* The shards of the rows in m->x for the next forward: local shards [s0, s1) of S over a
 * global batch of B examples (rows from shard s0's first), or none (S = 0). Grows m->stats
 * for them. */
void dt_model_set_shards(struct dt_model *m, int64_t B, int64_t S, int64_t s0, int64_t s1);
void dt_model_destroy(struct dt_model *m);

/* The trainable state on the host: every tensor's w and v (and s, AdamW's second
 * moment, where the parameter has one; buffers included), and the step. Save
 * allocates on first use (for m's shape); load writes it back. Used to restore a step
 * (explain), keep the last agreeing state (divwatch) and write checkpoints. */
struct dt_model_state {
    int n;
    float **w, **v, **s; /* s[i] NULL where parameter i has no second moment */
    int64_t step;
};
void dt_model_state_save(struct dt_model_state *st, const struct dt_model *m);
void dt_model_state_load(const struct dt_model_state *st, struct dt_model *m);
void dt_model_state_free(struct dt_model_state *st);

/* Initialise every parameter from the init stream key: parameter i uses layer index i.
 * Host-side, integer-exact uniforms times a correctly rounded sqrt: portable bits. */
void dt_model_init(struct dt_model *m, uint64_t seed, uint64_t init_replica);

/* Copy a host batch x (B, in_dim), y (B) into m->x and m->labels. */
void dt_model_load_batch(struct dt_model *m, const float *x, const uint8_t *y, int64_t B);

/* A training batch: host rows (x (B, in_dim), y (B)), or the examples idx[0, B) of a set
 * resident in the backend (set != NULL: dt_backend_gather, no upload from pageable
 * memory). The same bits either way. dt_batch_from: the batch's rows from row b0 on;
 * row0 counts the global batch row of its first row (0 for a whole batch). */
struct dt_batch {
    const float *x;
    const uint8_t *y;
    const struct dt_resident *set;
    const int64_t *idx;
    int64_t row0;
};
struct dt_batch dt_batch_from(const struct dt_batch *b, int64_t b0, int64_t in_dim);
/* m->x and m->labels = the batch's first B rows. */
void dt_model_load(struct dt_model *m, const struct dt_batch *b, int64_t B);

/* The pieces of the step (nets/step.h, dt_step_train, which every caller takes).
 * begin_step: m->step++ and m->err cleared (once per step).
 * gradients: load the batch's B rows (struct dt_batch), then forward -> loss -> backward
 *   for each of m->passes passes: every g filled with the gradient of (sum of the B
 *   examples' losses) / denom -- denom is the global batch when these rows are a shard of
 *   it (denom >= B); *loss = the B rows' mean (over the passes) -- once the step's end has
 *   run (dt_model_step_end: a device backend reads the losses with the step's one wait)
 *   and then dt_model_finish_loss (the passes' mean) -- so *loss must outlive the step.
 * finish_gradients: the kind's data-free term (ops->finish_gradients), after the gradients
 *   of every shard and rank were combined; clip: every g scaled to the global norm
 *   opt->clip_norm (nothing when it is 0); update: SGD or AdamW on every parameter. */
void dt_model_begin_step(struct dt_model *m);
/* The end of a step on m's backend (dt_backend_step_end: its one wait, the step's deferred
 * checks read): st when the step already failed; else DT_OK, or a deferred fault with
 * m->err saying where ("dense1.bias gradient: bias gradient: ... at step 8"). */
enum dt_status dt_model_step_end(struct dt_model *m, enum dt_status st);
enum dt_status dt_model_gradients(struct dt_model *m, const struct dt_batch *b, int64_t B,
                                  int64_t denom, const struct dt_policy *pol, float *loss);
/* After the step's end: the mean over the passes of each of `slots` losses (nothing to do
 * with one pass, whose loss lands in place). */
void dt_model_finish_loss(struct dt_model *m, int64_t slots, float *loss);
enum dt_status dt_model_finish_gradients(struct dt_model *m, const struct dt_policy *pol);
enum dt_status dt_model_clip(struct dt_model *m, const struct dt_sgd_options *opt,
                             const struct dt_policy *pol);
enum dt_status dt_model_update(struct dt_model *m, const struct dt_sgd_options *opt,
                               const struct dt_policy *pol);
/* An evaluation's forward of the B rows in m->x: p (filled here, not training) then says
 * where the logits are. */
enum dt_status dt_model_forward(struct dt_model *m, int64_t B, const struct dt_policy *pol,
                                struct dt_pass *p);

/* reduction: exact in one pass (nets/step.h). grad_slots: every param's g becomes room
 * for `slots` partials of n floats, packed in m->grad_pack (param i at slots *
 * grad_first[i]); g itself points at slot 0, where the final gradient lands. Keeps the
 * layout when slots is unchanged.
 * gradients_sharded: forward, loss and backward ONCE over the batch's B rows cut into
 * sh's shards (row[count] == B; sh->count == grad_slots); slot k of every
 * g = the gradient of (sum of shard k's losses) / denom -- the bits of dt_model_gradients
 * on shard k's rows alone -- and loss_slots[k] = shard k's mean loss. */
void dt_model_grad_slots(struct dt_model *m, int64_t slots);
/* The same with the pack in `memory` (slots * grad_first[n_params] floats of host memory, on
 * a backend whose memory the host reads), which the caller keeps: before freeing it, it
 * gives the model a pack of its own again (memory NULL, as dt_model_grad_slots). A change
 * of memory keeps no gradient value. */
void dt_model_grad_slots_at(struct dt_model *m, int64_t slots, float *memory);
enum dt_status dt_model_gradients_sharded(struct dt_model *m, const struct dt_batch *b, int64_t B,
                                          int64_t denom, const struct dt_shards *sh,
                                          const struct dt_policy *pol, float *loss_slots);

/* Mean loss and accuracy over n examples (host arrays), in batches of max_batch. */
enum dt_status dt_model_evaluate(struct dt_model *m, const float *x, const uint8_t *y, int64_t n,
                                 const struct dt_policy *pol, double *loss, double *accuracy);
/* The same with every metric (loss, accuracy, calibration). */
enum dt_status dt_model_evaluate_full(struct dt_model *m, const float *x, const uint8_t *y,
                                      int64_t n, const struct dt_policy *pol, struct dt_eval *out);
/* The same, also writing each example's predicted class (the first most probable one) to
 * pred (n entries): what prediction churn between replicas is computed from. */
enum dt_status dt_model_evaluate_pred(struct dt_model *m, const float *x, const uint8_t *y,
                                      int64_t n, const struct dt_policy *pol, struct dt_eval *out,
                                      uint8_t *pred);
/* Accumulate one example into calibration bins and finish them (shared by evaluators):
 * bins hold count, confidence sum and correct count per bin. */
struct dt_ece_bins {
    int64_t count[DT_ECE_BINS], correct[DT_ECE_BINS];
    double conf[DT_ECE_BINS];
};
void dt_ece_add(struct dt_ece_bins *b, double confidence, bool correct);
double dt_ece_finish(const struct dt_ece_bins *b);
/* Memory held for random draws (zeros for models that draw none). */
void dt_model_memory(const struct dt_model *m, const struct dt_policy *pol,
                     struct dt_model_memory *out);

/* MLP: in_dim -> hidden[0] -> ... -> n_classes, ReLU between dense layers.
 * Params: dense<i>.weight (in, out), dense<i>.bias (out). */
enum dt_status dt_mlp_create(struct dt_model **out, struct dt_backend *be, int64_t in_dim,
                             const int64_t *hidden, int n_hidden, int64_t n_classes,
                             int64_t max_batch, struct dt_error *err);

/* A network described as a list of layers (model.kind: net; nets/net.c), on (B, H, W, C)
 * NHWC images: one row of DT_LAYER_LIST per layer kind (its config name, what it takes).
 * Parameters are named per kind in layer order (dense<i>.weight (in, out), dense<i>.bias,
 * conv<i>.weight (KH, KW, C, K) HWIO, conv<i>.bias, layernorm<i>.weight (C, initially 1),
 * layernorm<i>.bias, batchnorm<i>.weight and .bias likewise), as the built-in kinds name
 * theirs, then the buffers (batchnorm<i>.running_mean, .running_var: nets/net.c): the
 * MLP and LeNet written as layer lists are the same models, the same bits. */
#define DT_LAYER_LIST(X)                                                                           \
    /* X(ENUM suffix, name, takes units, takes a window (kernel, stride, pad), takes a rate) */    \
    X(DENSE, "dense", true, false, false)                                                          \
    X(CONV, "conv", true, true, false)                                                             \
    X(MAXPOOL, "maxpool", false, true, false)                                                      \
    X(AVGPOOL, "avgpool", false, true, false) /* padding counts as zeros: / K^2 */                 \
    X(RELU, "relu", false, false, false)                                                           \
    X(GELU, "gelu", false, false, false)                                                           \
    X(GLOBAL_AVGPOOL, "global_avgpool", false, false, false)                                       \
    X(LAYERNORM, "layernorm", false, false, false) /* the channels at each position */             \
    X(BATCHNORM, "batchnorm", false, false, false) /* each channel over each shard of the batch */ \
    X(DROPOUT, "dropout", false, false, true)      /* masks under `rng`: determinism/dropout.h */  \
    X(FLATTEN, "flatten", false, false, false)                                                     \
    X(RESIDUAL, "residual", false, false, false) /* its branch: the `block` layers after it */
enum dt_layer_kind {
#define DT_LAYER_ENUM_(id, name, units, window, rate) DT_LAYER_##id,
    DT_LAYER_LIST(DT_LAYER_ENUM_)
#undef DT_LAYER_ENUM_
        DT_LAYER_KIND_COUNT
};
/* The kinds' names by enum, NULL-terminated; whether a kind takes units and a window. */
extern const char *const dt_layer_kind_names[DT_LAYER_KIND_COUNT + 1];
bool dt_layer_takes_units(enum dt_layer_kind k);
bool dt_layer_takes_window(enum dt_layer_kind k);
bool dt_layer_takes_rate(enum dt_layer_kind k);
#define DT_NET_MAX_LAYERS 64
struct dt_layer {
    enum dt_layer_kind kind;
    int64_t units;               /* dense: outputs; conv: filters */
    int64_t kernel, stride, pad; /* conv (stride default 1), maxpool (stride default kernel) */
    /* residual: y = branch(x) + shortcut(x). Its branch is the `block` entries after it in
     * the list (a nested residual counts with its own branch); the shortcut is x itself, or
     * with `projection` a 1 x 1 convolution (proj<i>.weight, proj<i>.bias) striding as the
     * branch does, to the branch's output channels. */
    int block;
    bool projection;
    double rate; /* dropout: the probability p in [0, 1) that an element is dropped */
};
/* The network of n layers on H x W x C inputs: DT_ERR_CONFIG naming the layer ("layer 3
 * (dense): ...") when the shapes do not fit -- a dense layer on an image without a flatten
 * before it, a window larger than its input, a last layer that is not a dense layer of
 * n_classes units. */
enum dt_status dt_net_create(struct dt_model **out, struct dt_backend *be, int64_t H, int64_t W,
                             int64_t C, const struct dt_layer *layers, int n, int64_t n_classes,
                             int64_t max_batch, struct dt_error *err);
/* rng: lfsr dropout lanes (nets/net.c's sites, the GPT's): after a training step's backward
 * every lane of the rows [row0, row0 + rows) is back at its seed state; host is scratch of
 * rows lanes. Else DT_ERR_NUMERIC with m->err naming the first row that is not. */
enum dt_status dt_dropout_lanes_check(struct dt_model *m, const struct dt_xoro *lanes,
                                      struct dt_xoro *host, int64_t rows, int64_t row0);
/* The lfsr lane check's period of a net (default 1: every step). */
void dt_net_set_lfsr_check_every(struct dt_model *m, int64_t every);
/* The same checks alone (a config's, before anything is built); labels (n of them, or
 * NULL: "layer i") name the layers in messages -- a config's "item 3, branch item 1". */
enum dt_status dt_net_check(int64_t H, int64_t W, int64_t C, const struct dt_layer *layers, int n,
                            int64_t n_classes, const char *const *labels, struct dt_error *err);

/* LeNet-style CNN on (B, H, W, 1) images (nets/lenet.c): conv 5x5 (6, pad 2) -> ReLU ->
 * maxpool -> conv 5x5 (16) -> ReLU -> maxpool -> dense 120 -> 84 -> n_classes. Pooling is
 * 2x2 stride 2, or with overlap_pool 3x3 stride 2 pad 1. DT_ERR_CONFIG when the image is
 * too small for the layers. Params: conv<i>.weight (5,5,in,out) HWIO, conv<i>.bias,
 * dense<i>.weight (in,out), dense<i>.bias. */
enum dt_status dt_lenet_create(struct dt_model **out, struct dt_backend *be, int64_t H, int64_t W,
                               bool overlap_pool, int64_t n_classes, int64_t max_batch,
                               struct dt_error *err);

/* Bayesian MLP trained by Bayes by Backprop (nets/bnn_mlp.c): every weight and bias is
 * N(mu, softplus(rho)^2); each step draws `samples` weight sets w = mu + sigma * eps, and
 * the gradient is the mean over them of the data term plus the closed-form KL divergence
 * to the prior N(0, prior_sigma^2), weighted by kl_weight. Epsilon follows the `rng`
 * control: stored (drawn by `stored_generator` and kept), philox or lfsr (regenerated in
 * backward). Params per layer l: dense<l>.weight_mu, dense<l>.weight_rho (in, out),
 * dense<l>.bias_mu, dense<l>.bias_rho (out). */
struct dt_bnn_options {
    int samples, test_samples;
    float prior_sigma, rho_init, kl_weight;
    int64_t lanes;
    bool stored_lfsr;         /* rng: stored draws with the lanes, not Philox */
    int64_t lfsr_check_every; /* >= 1 */
    bool local; /* the local reparameterisation estimator: noise per activation, not weight */
};
enum dt_status dt_bnn_mlp_create(struct dt_model **out, struct dt_backend *be, int64_t in_dim,
                                 const int64_t *hidden, int n_hidden, int64_t n_classes,
                                 int64_t max_batch, const struct dt_bnn_options *opt,
                                 struct dt_error *err);

/* A decoder-only transformer on bytes (nets/gpt.c): token embedding (V = 256) plus a
 * learned positional embedding, `layers` pre-LayerNorm blocks (causal multi-head
 * self-attention with one fused QKV projection and an output projection; an MLP of width
 * 4 d_model with GELU, tanh form), a final LayerNorm and the output head (the token
 * embedding itself when tie_embeddings). An example is a window of context + 1 bytes (as
 * their values): the first context bytes are the input, the last context the targets;
 * the loss is the mean over every position. Params: wte (V, D), wpe (T, D), then per
 * block l: h<l>.ln1.weight, .ln1.bias (D), h<l>.attn.qkv.weight (D, 3D), .qkv.bias,
 * h<l>.attn.proj.weight (D, D), .proj.bias, h<l>.ln2.weight, .ln2.bias,
 * h<l>.mlp.fc.weight (D, 4D), .fc.bias, h<l>.mlp.proj.weight (4D, D), .proj.bias; then
 * ln_f.weight, ln_f.bias, and lm_head.weight (D, V) when not tied. */
struct dt_gpt_options {
    int64_t context, d_model, heads;
    int layers;
    bool tie_embeddings;
    /* Dropout probability p in [0, 1) at the embedding's sum and before each residual add
     * (attention's projection, the MLP's output), in training steps only; masks under `rng`
     * (determinism/dropout.h). lfsr_check_every: under rng: lfsr, check every Nth step that
     * the lanes walked back to their seed state (1 = every step). */
    double dropout;
    int64_t lfsr_check_every;
};
enum dt_status dt_gpt_create(struct dt_model **out, struct dt_backend *be,
                             const struct dt_gpt_options *opt, int64_t max_batch,
                             struct dt_error *err);

/* Text generated by a gpt model from `prompt` (its bytes, at least 1): n more bytes, each
 * drawn from the model's predicted distribution at the last position (softmax of the
 * logits divided by `temperature`), by inverse CDF in byte order with the uniform
 * dt_stream_uniform(key, i) for byte i. The window slides once it is full. out holds
 * prompt_len + n bytes. DT_ERR_USAGE for other kinds. */
enum dt_status dt_gpt_sample(struct dt_model *m, const uint8_t *prompt, int64_t prompt_len,
                             int64_t n, float temperature, uint64_t key,
                             const struct dt_policy *pol, uint8_t *out);

/* Test hooks for a bnn_mlp model (DT_ERR_USAGE for other kinds).
 * verify: in philox/lfsr modes also keep the forward epsilon and compare every tensor
 *   regenerated in backward with it bit for bit; a mismatch fails the step naming the
 *   tensor, and *verified counts the tensors compared.
 * skip_tensor >= 0: on the next training steps, lane 0 draws one pair fewer in the forward
 *   walk of that epsilon tensor (0 = dense0.weight, 1 = dense0.bias, 2 = dense1.weight...);
 *   with the local estimator, row 0's lane of sample 0 ends that layer's forward walk one
 *   pair back (0 = dense0, 1 = dense1...); -1 = no fault. */
enum dt_status dt_bnn_set_debug(struct dt_model *m, bool verify, int skip_tensor);
int64_t dt_bnn_verified_tensors(const struct dt_model *m);
/* The name of epsilon tensor k ("dense1.weight"). */
const char *dt_bnn_tensor_name(const struct dt_model *m, int k);

#endif
