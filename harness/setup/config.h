/* Experiment configuration: the struct every later stage reads, and its YAML loader.
 * Data path (docs/DESIGN.md): configs/<name>.yaml -> harness/config -> struct dt_experiment.
 * Every key is one row of a table in config.c that drives parsing, validation, the
 * resolved-config JSON in run.json and docs/config.md's reference. */
#ifndef DT_CONFIG_H
#define DT_CONFIG_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "core/status.h"
#include "determinism/policy.h"
#include "nets/models.h" /* enum dt_model_kind: the model registry */

#define DT_MAX_HIDDEN 16
#define DT_MAX_POLICIES 16
#define DT_PATH_MAX 1024
#define DT_MAX_VARY_SETS 8 /* settings of `vary` in one experiment (noise-source matrix) */
#define DT_MAX_MATRIX 32   /* entries of `matrix` in one config (a matrix of experiments) */
#define DT_NAME_MAX 128    /* experiment and matrix entry names, NUL included */

/* Which generator draws epsilon under `rng: stored` (the regenerating modes name theirs). */
enum dt_eps_generator { DT_EPS_GEN_PHILOX, DT_EPS_GEN_LFSR };
enum dt_bnn_estimator { DT_BNN_WEIGHTS, DT_BNN_LOCAL };
enum dt_optimizer_kind { DT_OPTIMIZER_SGD, DT_OPTIMIZER_ADAMW };
enum dt_lr_schedule { DT_LR_CONSTANT, DT_LR_COSINE };
enum dt_device { DT_DEVICE_CPU, DT_DEVICE_CUDA };
/* hash.async: hash a step's weights while the next steps run (harness/run/hashpipe.h). */
enum dt_hash_async { DT_HASH_ASYNC_AUTO, DT_HASH_ASYNC_ON, DT_HASH_ASYNC_OFF };
/* A tensor's digest in the trace: plain SHA-256 of its bytes, or the tree digest
 * (core/tree_hash.h) computed where the weights are. */
enum dt_hash_digest { DT_HASH_DIGEST_SHA256, DT_HASH_DIGEST_TREE };

/* Randomness sources that `vary` can make differ across replicas (bit flags). */
enum dt_vary {
    DT_VARY_INIT = 1u << 0,       /* initial weights */
    DT_VARY_DATA_ORDER = 1u << 1, /* per-epoch shuffle */
    DT_VARY_EPSILON = 1u << 2,    /* Bayesian epsilon: the ensemble member of each replica */
};

struct dt_experiment {
    char name[DT_NAME_MAX]; /* required; [A-Za-z0-9_.-]+ */
    struct {
        char name[64];          /* default "fashion-mnist"; "text" (gpt) */
        char path[DT_PATH_MAX]; /* "" = search $DETRAIN_DATA, then the Debian folder */
        int64_t train_limit;    /* 0 = all; else first N training examples */
        int64_t test_limit;     /* 0 = all; else first N test examples */
    } dataset;
    struct {
        enum dt_model_kind kind; /* required: mlp, lenet or bnn_mlp */
        int n_hidden;
        int64_t hidden[DT_MAX_HIDDEN]; /* mlp, bnn_mlp: hidden widths, default [256, 128] */
        bool overlap_pool;             /* lenet: 3x3 stride-2 pooling; default false (2x2) */
        int n_network; /* net: its layers (model.network; nets/model.h, struct dt_layer) */
        struct dt_layer network[DT_NET_MAX_LAYERS];
        /* bnn_mlp (Bayes by Backprop) */
        enum dt_bnn_estimator estimator; /* default weights */
        int samples;        /* Monte Carlo samples per step S, default 4 (1 with estimator local) */
        int test_samples;   /* sampled models averaged at evaluation, default 10 */
        double prior_sigma; /* Gaussian prior N(0, prior_sigma^2), default 1 */
        double rho_init;    /* initial rho (sigma = softplus(rho)), default -5 */
        int64_t lanes;      /* reversible-generator lanes P, default 1024 */
        enum dt_eps_generator stored_generator; /* rng: stored draws with this, default philox */
        int64_t lfsr_check_every;               /* lane invariant check period; 0 = auto */
        /* gpt (nets/gpt.c) */
        int64_t context, d_model, heads; /* T, D, H; default 64, 64, 4 */
        int layers;                      /* default 2 */
        bool tie_embeddings;             /* default true */
        double dropout;                  /* default 0 (off), in [0, 1) */
    } model;
    struct {
        int64_t steps;  /* required, >= 1 */
        int64_t batch;  /* default 64 */
        int64_t shards; /* default 4: reduction exact's canonical shards (nets/step.c) */
        struct {
            enum dt_optimizer_kind kind;  /* default sgd */
            double lr;                    /* default 0.05 */
            double momentum;              /* default 0.9, in [0, 1) */
            double weight_decay;          /* default 0, >= 0 */
            double beta1, beta2, eps;     /* adamw: default 0.9, 0.999, 1e-8 */
            double clip_norm;             /* default 0 = off */
            int64_t warmup;               /* default 0 */
            enum dt_lr_schedule schedule; /* default constant */
        } optimizer;
        uint64_t seed;                 /* default 0 */
        int64_t eval_every;            /* 0 = only at the end; else every N steps */
        int64_t checkpoint_every;      /* 0 = only at an interruption; else every N steps and the
                                          last (harness/record/checkpoint.h) */
        bool check_finite;             /* default true: stop a replica at the first NaN/Inf in a
                                          gradient or weight after each step (harness/run/train.c) */
        bool checkpoint_at_divergence; /* default false: each replica after the first keeps
                                          its state at its last step agreeing with replica 0
                                          (harness/run/divwatch.h) */
    } train;
    struct {
        enum dt_device device; /* default cpu */
        int threads;           /* default 0 = number of online CPUs (capped at 64) */
        int gpu;               /* cuda: device ordinal, default 0 */
        bool graphs;           /* cuda: each step launched as one graph (nets/step.h) */
    } backend;
    int n_policies; /* default 1: [portable] */
    struct dt_policy policies[DT_MAX_POLICIES];
    int replicas; /* default 1, 1..64 */
    /* The noise-source axis: `vary` is one setting (a list of names, e.g. [init]) or
     * several (a list of lists, e.g. [[], [init], [init, data_order]]). Each setting is a
     * set of enum dt_vary flags; default one setting, 0 (none). Cells = settings x
     * policies, each trained with `replicas` replicas (harness/record/layout.h). */
    int n_vary;
    unsigned vary_sets[DT_MAX_VARY_SETS];
    struct {
        int64_t every;              /* default 1: hash every step */
        bool per_tensor;            /* default false */
        enum dt_hash_async async;   /* default auto: on where weights are not host memory */
        enum dt_hash_digest digest; /* default sha256 */
    } hash;
    struct {
        int snapshots;            /* weight snapshots at step 0 and up to N log-spaced steps
                                     (always the last); default 8, 0 = none */
        int64_t overhead_samples; /* alternated step-time pairs per policy vs fast; default 30,
                                     0 = skip, else >= 20 */
        int64_t overhead_warmup;  /* unmeasured pairs first; default 5 */
        bool explain;             /* default false: `detrain explain` on each diverged cell's
                                     replica-0 and replica-1 (harness/analyze/explain.h) */
    } report;

    /* `matrix`: a config listing entries {name, set} is a matrix of experiments; entry k
     * is the file's other keys, then its `set` (each DOTTED.KEY: VALUE as --set gives it),
     * then the command line's --set (dt_config_load_entry). 0 = one experiment; always 0
     * in a resolved entry, which is named after the entry. */
    int n_matrix;
    char matrix[DT_MAX_MATRIX][DT_NAME_MAX]; /* entry names, in file order, unique */

    char source[DT_PATH_MAX]; /* path the config was loaded from */
};

/* Load `path`, apply the `n_sets` overrides "key.path=value" (the value is parsed as YAML:
 * a scalar, a flow sequence such as "[512, 256]", or a flow mapping for a whole section),
 * then check that every required key was given. On failure fills `err` with
 * "file:line:column: ... 'key' ..." (for a --set, the file is "--set", the line is the
 * override's 1-based index and the column points into the assignment) and returns
 * DT_ERR_CONFIG (or DT_ERR_IO when the file cannot be read). On error *out is unspecified
 * and must not be used. */
enum dt_status dt_config_load(struct dt_experiment *out, const char *path, const char *const *sets,
                              int n_sets, struct dt_error *err);
/* The same for a config whose step is modelled on a GPU, not run (`detrain cost`): a policy
 * may ask for a GPU mode (math: tf32) whatever backend.device says. */
enum dt_status dt_config_load_modelled(struct dt_experiment *out, const char *path,
                                       const char *const *sets, int n_sets, struct dt_error *err);
/* dt_config_load refuses a matrix config (one with `matrix`: only `detrain run` runs
 * those), naming the key. These two load one:
 *
 * dt_config_load_matrix: like dt_config_load for a plain config (n_matrix = 0, every check
 * made); for a matrix config, the shared keys and the --set overrides, every entry's name
 * and the keys of its `set` checked (known keys, no `name` or `matrix`), n_matrix and
 * matrix[] filled. Only `name` is required then: whether an entry is complete and valid
 * is checked when it is resolved.
 *
 * dt_config_load_entry: entry `entry` (0-based) of the matrix config `path` as a complete
 * experiment: the file's keys, then the entry's `set` in the order written, then `sets`
 * (precedence file < entry < command line), named after the entry, every check of
 * dt_config_load made. Errors carry file:line:column as the loader's others do; those
 * found while resolving the entry end with " (matrix entry 'NAME')". DT_ERR_USAGE when
 * `path` has no such entry. */
enum dt_status dt_config_load_matrix(struct dt_experiment *out, const char *path,
                                     const char *const *sets, int n_sets, struct dt_error *err);
enum dt_status dt_config_load_entry(struct dt_experiment *out, const char *path, int entry,
                                    const char *const *sets, int n_sets, struct dt_error *err);

/* The loaders above on `len` bytes of YAML in memory instead of a file (the fuzz targets,
 * fuzz/fuzz_config.c): `name` stands for the path, in out->source and in every message.
 * `entry` < 0 loads as dt_config_load_matrix; `entry` >= 0 as dt_config_load_entry. */
enum dt_status dt_config_load_text(struct dt_experiment *out, const char *name, const char *text,
                                   size_t len, int entry, const char *const *sets, int n_sets,
                                   struct dt_error *err);

/* The resolved configuration as one JSON object (no trailing newline), for run.json. It
 * never holds `matrix` (a resolved entry is one experiment). */
void dt_config_write_json(FILE *f, const struct dt_experiment *exp);

/* The config reference as a Markdown table (key, type, default, bounds, meaning),
 * generated from the same table that drives parsing; docs/config.md embeds its output. */
void dt_config_write_reference(FILE *f);

#endif
