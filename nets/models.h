/* The model registry (docs/DESIGN.md, "Models"): one row per model kind, like the policy
 * table. A new model is its file (nets/<kind>.c, defining its struct dt_model_kind_info)
 * and one row of DT_MODEL_KIND_LIST; the config's model.kind names, the keys each kind
 * reads, the report's wording and the memory check come from the row. */
#ifndef DT_MODELS_H
#define DT_MODELS_H

#include <stdbool.h>
#include <stdint.h>

#include "core/status.h"
#include "nets/backend.h"
#include "nets/model.h"

/* X(ENUM suffix, model.kind name, the kind's info in its file) */
#define DT_MODEL_KIND_LIST(X)                                                                      \
    X(MLP, "mlp", dt_mlp_kind)                                                                     \
    X(LENET, "lenet", dt_lenet_kind)                                                               \
    X(BNN_MLP, "bnn_mlp", dt_bnn_mlp_kind)                                                         \
    X(GPT, "gpt", dt_gpt_kind)                                                                     \
    X(NET, "net", dt_net_kind)

enum dt_model_kind {
#define DT_MODEL_ENUM_(id, name, info) DT_MODEL_##id,
    DT_MODEL_KIND_LIST(DT_MODEL_ENUM_)
#undef DT_MODEL_ENUM_
        DT_MODEL_KIND_COUNT
};

/* What a model is built from: the data's shape and the model keys of the config (each kind
 * reads those its row lists). */
struct dt_model_spec {
    int64_t height, width, channels, n_classes; /* the input images and the classes */
    int64_t batch;                              /* the largest batch a step takes */
    const int64_t *hidden;                      /* model.hidden */
    int n_hidden;
    bool overlap_pool;             /* model.overlap_pool */
    struct dt_bnn_options bnn;     /* model.samples, ...: bnn_mlp */
    struct dt_gpt_options gpt;     /* model.context, ...: gpt */
    const struct dt_layer *layers; /* model.layers: net */
    int n_layers;
};

/* What a model of a spec holds, for the run's memory estimate (harness/run/train.c,
 * dt_run_memory_bytes; calibrated against measured peaks by the test
 * folders.memory_estimate_matches_peak): parameters (floats), floats kept per parameter
 * beyond the run's own copies, floats per parameter per sample under rng: stored, and
 * activation floats per example of a batch. */
struct dt_model_size {
    double params, extra_per_param, acts_per_example;
    double stored_per_param_per_sample;
};

struct dt_model_kind_info {
    const char *name;
    /* the config keys only some kinds read that this kind reads (space-separated) */
    const char *keys;
    bool draws_epsilon;        /* vary: [epsilon] means something */
    bool reads_text;           /* trains on dataset.name: text (else images) */
    const char *extra_control; /* the control beyond reduction, atomics and math that acts on
                                  it (matrix reports name it), or NULL */
    enum dt_status (*create)(struct dt_model **out, struct dt_backend *be,
                             const struct dt_model_spec *s, struct dt_error *err);
    struct dt_model_size (*size)(const struct dt_model_spec *s);
};

/* The MLP's sizes (nets/mlp.c; bnn_mlp builds on them). */
struct dt_model_size dt_mlp_size(const struct dt_model_spec *s);

/* model.kind's names by enum, NULL-terminated (the config's KEY_ENUM table). */
extern const char *const dt_model_kind_names[DT_MODEL_KIND_COUNT + 1];
/* The row of a kind. */
const struct dt_model_kind_info *dt_model_kind(enum dt_model_kind kind);
/* Does `kind` read `key` ("model.samples")? Keys that no row lists are read by every kind. */
bool dt_model_kind_reads(enum dt_model_kind kind, const char *key);
/* Is `key` read by some kinds only (listed in some row)? */
bool dt_model_key_is_kind_specific(const char *key);
/* "mlp and bnn_mlp": the kinds that read `key`. */
void dt_model_kinds_reading(char *buf, size_t size, const char *key);

#endif
