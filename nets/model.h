/* Models: a backend-independent network with named parameters, and the generic training
 * and evaluation steps every model shares (DESIGN.md: nets/<model> forward -> loss ->
 * backward -> optimizer, on a backend, with the policy passed to every op).
 * A model kind supplies forward and backward; everything else lives here. */
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
    int64_t n;       /* elements */
    int64_t fan_in;  /* init: U(-sqrt(6/fan_in), +sqrt(6/fan_in)); 0 = zeros */
    float *w, *g, *v; /* backend memory: value, gradient, momentum; n floats each */
};

struct dt_model;

struct dt_model_ops {
    const char *kind;
    /* Compute m->logits (B, n_classes) from m->x (B, in_dim). */
    enum dt_status (*forward)(struct dt_model *m, int64_t B, const struct dt_policy *pol);
    /* From m->dlogits, fill every param's g. */
    enum dt_status (*backward)(struct dt_model *m, int64_t B, const struct dt_policy *pol);
    void (*destroy)(struct dt_model *m); /* frees impl only */
};

struct dt_model {
    const struct dt_model_ops *ops;
    struct dt_backend *be;
    int n_params;
    struct dt_param *params; /* in digest order */
    int64_t in_dim, n_classes, max_batch;
    float *x;        /* (max_batch, in_dim) backend memory: the current batch */
    int32_t *labels; /* (max_batch) backend memory */
    float *logits, *probs, *dlogits; /* (max_batch, n_classes) backend memory */
    void *impl;
};

/* Shared set-up for model builders: allocate the batch buffers and n_params params. */
void dt_model_setup(struct dt_model *m, const struct dt_model_ops *ops, struct dt_backend *be,
                    int n_params, int64_t in_dim, int64_t n_classes, int64_t max_batch);
/* Define parameter i and allocate its w, g, v. */
void dt_model_param(struct dt_model *m, int i, const char *name, int ndim,
                    const int64_t *shape, int64_t fan_in);
void dt_model_destroy(struct dt_model *m);

/* Initialise every parameter from the init stream key: parameter i uses layer index i.
 * Host-side, integer-exact uniforms times a correctly rounded sqrt: portable bits. */
void dt_model_init(struct dt_model *m, uint64_t seed, uint64_t init_replica);

/* One SGD step on a host batch x (B, in_dim), y (B). *loss = the batch's mean loss
 * (computed on the weights before the update). */
struct dt_sgd_options {
    float lr, momentum, weight_decay;
};
enum dt_status dt_model_train_step(struct dt_model *m, const float *x, const uint8_t *y,
                                   int64_t B, const struct dt_sgd_options *opt,
                                   const struct dt_policy *pol, float *loss);

/* Mean loss and accuracy over n examples (host arrays), in batches of max_batch. */
enum dt_status dt_model_evaluate(struct dt_model *m, const float *x, const uint8_t *y,
                                 int64_t n, const struct dt_policy *pol, double *loss,
                                 double *accuracy);

/* MLP: in_dim -> hidden[0] -> ... -> n_classes, ReLU between dense layers.
 * Params: dense<i>.weight (in, out), dense<i>.bias (out). */
enum dt_status dt_mlp_create(struct dt_model **out, struct dt_backend *be, int64_t in_dim,
                             const int64_t *hidden, int n_hidden, int64_t n_classes,
                             int64_t max_batch, struct dt_error *err);

/* LeNet-style CNN on (B, H, W, 1) images (nets/lenet.c): conv 5x5 (6, pad 2) -> ReLU ->
 * maxpool -> conv 5x5 (16) -> ReLU -> maxpool -> dense 120 -> 84 -> n_classes. Pooling is
 * 2x2 stride 2, or with overlap_pool 3x3 stride 2 pad 1. DT_ERR_CONFIG when the image is
 * too small for the layers. Params: conv<i>.weight (5,5,in,out) HWIO, conv<i>.bias,
 * dense<i>.weight (in,out), dense<i>.bias. */
enum dt_status dt_lenet_create(struct dt_model **out, struct dt_backend *be, int64_t H, int64_t W,
                               bool overlap_pool, int64_t n_classes, int64_t max_batch,
                               struct dt_error *err);

#endif
