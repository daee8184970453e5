/* Experiment configuration: YAML file + --set overrides -> struct dt_experiment.
 * Data path (docs/DESIGN.md): configs/<name>.yaml -> harness/config -> every later stage.
 * Every key is one row of `keys` below (type, field, default, bounds, doc). That table
 * alone drives parsing, validation, defaults, the required-key check, the resolved JSON
 * written to run.json and docs/config.md's reference: a new key is a new row.
 * Errors carry file:line:column (1-based) of the node at fault and name the dotted key.
 * A matrix config (`matrix: [{name, set: {DOTTED.KEY: VALUE}}]`) is resolved per entry by
 * the same walk: file, then the entry's `set` pairs applied like --set values, then --set. */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <strings.h>
#include <yaml.h>

#include "core/fileio.h"
#include "harness/setup/data.h"

/* ---- The key table ------------------------------------------------------------------- */

enum key_type {
    KEY_STRING,      /* char[size]; optionally restricted to `names` */
    KEY_INT64,       /* int64_t in [lo, hi] */
    KEY_INT,         /* int in [lo, hi] */
    KEY_UINT64,      /* uint64_t, any value */
    KEY_DOUBLE,      /* finite double in [dlo, dhi], ends open per flags */
    KEY_BOOL,        /* bool */
    KEY_ENUM,        /* an enum field; the value is the index into `names` */
    KEY_INT_LIST,    /* int64_t[], count at count_offset; each item in [lo, hi] */
    KEY_POLICY_LIST, /* struct dt_policy[], count at count_offset; level names or mappings */
    KEY_LAYER_LIST,  /* struct dt_layer[], count at count_offset; layer names or mappings */
    KEY_VARY_SETS,   /* unsigned[] of bit flags (bit i = names[i]), count at count_offset:
                        a list of names (one setting) or a list of such lists */
    KEY_MATRIX,      /* char[][DT_NAME_MAX] entry names, count at count_offset; each entry
                        {name: NAME, set: {DOTTED.KEY: VALUE, ...}} (file only) */
    KEY_TYPE_COUNT
};

/* Words for each type: the reference's type column, and what an error says was expected
 * for the whole value and for one list item. */
static const struct {
    const char *name;
    const char *expected;
    const char *item;
} type_info[KEY_TYPE_COUNT] = {
    [KEY_STRING] = {"string", "a string", "a string"},
    [KEY_INT64] = {"integer", "an integer", "an integer"},
    [KEY_INT] = {"integer", "an integer", "an integer"},
    [KEY_UINT64] = {"unsigned integer", "a non-negative integer", "a non-negative integer"},
    [KEY_DOUBLE] = {"number", "a finite number", "a finite number"},
    [KEY_BOOL] = {"boolean", "a boolean (true/false/yes/no/on/off)", "a boolean"},
    [KEY_ENUM] = {"choice", "a name", "a name"},
    [KEY_INT_LIST] = {"list of integers", "a list of integers", "an integer"},
    [KEY_POLICY_LIST] = {"list of policies", "a list of policies",
                         "a level name or a mapping {base: LEVEL, CONTROL: VALUE, ...}"},
    [KEY_LAYER_LIST] = {"list of layers", "a list of layers",
                        "a layer name or a mapping {KIND: N, kernel: K, stride: S, pad: P}"},
    [KEY_VARY_SETS] = {"list of names, or list of lists of names",
                       "a list of names or a list of lists of names", "a name"},
    [KEY_MATRIX] = {"list of entries", "a list of entries {name: NAME, set: {KEY: VALUE, ...}}",
                    "a mapping {name: NAME, set: {KEY: VALUE, ...}}"},
};

enum key_flags {
    KEY_NAME_CHARS = 1u << 0, /* string limited to [A-Za-z0-9_.-] */
    KEY_LO_OPEN = 1u << 1,    /* double: lower bound excluded */
    KEY_HI_OPEN = 1u << 2,    /* double: upper bound excluded */
    KEY_ZERO_OFF = 1u << 3,   /* integer: 0 (= off) is allowed besides [lo, hi] */
    KEY_OPTIONAL = 1u << 4,   /* no default, and not required (absent = count 0) */
};

struct key_row {
    const char *path; /* dotted key, e.g. "train.optimizer.lr" */
    enum key_type type;
    size_t offset;            /* offsetof(struct dt_experiment, field) */
    size_t size;              /* sizeof the field (string capacity, list capacity) */
    size_t count_offset;      /* lists: offsetof the int item count */
    const char *def;          /* default, as YAML text; NULL = required (or KEY_OPTIONAL) */
    int64_t lo, hi;           /* integers and integer list items; strings: lo = min length */
    double dlo, dhi;          /* doubles */
    int min_items, max_items; /* lists; KEY_VARY_SETS: max_items = most settings */
    unsigned flags;           /* enum key_flags */
    const char *below_lo;     /* KEY_ZERO_OFF: why 1..lo-1 is refused (the error says it) */
    const char *const *names; /* choices (string/enum) or flag names, NULL-terminated */
    const char *doc;          /* one line for the reference */
};

#define FIELD_(f)                                                                                  \
    .offset = offsetof(struct dt_experiment, f), .size = sizeof(((struct dt_experiment *)0)->f)
#define COUNT_(f) .count_offset = offsetof(struct dt_experiment, f)

static const char *const dataset_names[] = {"fashion-mnist", "text", NULL};
static const char *const optimizer_kind_names[] = {"sgd", "adamw",
                                                   NULL}; /* enum dt_optimizer_kind */
static const char *const lr_schedule_names[] = {"constant", "cosine",
                                                NULL};           /* enum dt_lr_schedule */
static const char *const device_names[] = {"cpu", "cuda", NULL}; /* enum dt_device */
static const char *const vary_names[] = {"init", "data_order", "epsilon",
                                         NULL}; /* enum dt_vary bits */
static const char *const eps_generator_names[] = {"philox", "lfsr",
                                                  NULL}; /* enum dt_eps_generator */
static const char *const bnn_estimator_names[] = {"weights", "local",
                                                  NULL}; /* enum dt_bnn_estimator */
static const char *const hash_async_names[] = {"auto", "on", "off", NULL}; /* enum dt_hash_async */
static const char *const hash_digest_names[] = {"sha256", "tree", NULL};   /* enum dt_hash_digest */

_Static_assert(DT_VARY_INIT == 1u << 0 && DT_VARY_DATA_ORDER == 1u << 1 &&
                   DT_VARY_EPSILON == 1u << 2,
               "vary_names[i] must name bit i");
_Static_assert(DT_DEVICE_CPU == 0 && DT_DEVICE_CUDA == 1, "device_names order");
_Static_assert(DT_HASH_ASYNC_AUTO == 0 && DT_HASH_ASYNC_ON == 1 && DT_HASH_ASYNC_OFF == 2,
               "hash_async_names order");
_Static_assert(DT_HASH_DIGEST_SHA256 == 0 && DT_HASH_DIGEST_TREE == 1, "hash_digest_names order");
_Static_assert(sizeof(enum dt_model_kind) == sizeof(unsigned) &&
                   sizeof(enum dt_optimizer_kind) == sizeof(unsigned) &&
                   sizeof(enum dt_device) == sizeof(unsigned) &&
                   sizeof(enum dt_eps_generator) == sizeof(unsigned) &&
                   sizeof(enum dt_hash_async) == sizeof(unsigned) &&
                   sizeof(enum dt_hash_digest) == sizeof(unsigned),
               "KEY_ENUM fields are written as unsigned");

/* Rows are grouped by section so the JSON nesting can be opened and closed in one pass. */
/* One row per key, as the reference prints it: */
/* clang-format off */
static const struct key_row keys[] = {
    {.path = "name", .type = KEY_STRING, FIELD_(name), .lo = 1, .flags = KEY_NAME_CHARS,
     .doc = "Experiment name; names the run folder"},
    {.path = "dataset.name", .type = KEY_STRING, FIELD_(dataset.name), .def = "fashion-mnist",
     .names = dataset_names,
     .doc = "Dataset to train and test on: fashion-mnist (images; mlp, lenet, bnn_mlp) or text "
            "(bytes; gpt)"},
    {.path = "dataset.path", .type = KEY_STRING, FIELD_(dataset.path), .def = "\"\"",
     .doc = "fashion-mnist: folder with the IDX files; \"\" = search $DETRAIN_DATA, then the "
            "Debian package folder. text: a file, or a folder whose files are read in name "
            "order (not *.dat, *.u8); \"\" = Debian's fortunes (" DT_TEXT_DEFAULT_DIR ")"},
    {.path = "dataset.train_limit", .type = KEY_INT64, FIELD_(dataset.train_limit), .def = "0",
     .lo = 0, .hi = 2000000000,
     .doc = "Use only the first N training examples (text: window offsets); 0 = all"},
    {.path = "dataset.test_limit", .type = KEY_INT64, FIELD_(dataset.test_limit), .def = "0",
     .lo = 0, .hi = 60000000, .doc = "Use only the first N test examples; 0 = all"},
    {.path = "model.kind", .type = KEY_ENUM, FIELD_(model.kind), .names = dt_model_kind_names,
     .doc = "Model architecture"},
    {.path = "model.hidden", .type = KEY_INT_LIST, FIELD_(model.hidden), COUNT_(model.n_hidden),
     .def = "[256, 128]", .lo = 1, .hi = 65536, .min_items = 0, .max_items = DT_MAX_HIDDEN,
     .doc = "mlp and bnn_mlp: hidden layer widths, input side first; [] = no hidden layer"},
    {.path = "model.overlap_pool", .type = KEY_BOOL, FIELD_(model.overlap_pool),
     .def = "false",
     .doc = "lenet only: overlapping 3x3 stride-2 max pooling (padding 1) instead of 2x2 "
            "stride 2"},
    {.path = "model.network", .type = KEY_LAYER_LIST, FIELD_(model.network),
     COUNT_(model.n_network),
     .flags = KEY_OPTIONAL, .min_items = 1, .max_items = DT_NET_MAX_LAYERS,
     .doc = "net: the network, first layer first, on NHWC images: dense, conv, maxpool, avgpool, "
            "relu, gelu, batchnorm, layernorm, dropout, global_avgpool, flatten and residual "
            "blocks "
            "(docs/config.md, \"Networks described in the config\"); the last a dense layer "
            "with one unit per class"},
    {.path = "model.estimator", .type = KEY_ENUM, FIELD_(model.estimator), .def = "weights",
     .names = bnn_estimator_names,
     .doc = "bnn_mlp only: the gradient estimator. weights: Bayes by Backprop, every weight "
            "drawn per Monte Carlo sample (shared by the batch); local: the local "
            "reparameterisation, each layer's pre-activation drawn per example and unit from its "
            "Gaussian (two products a layer instead of one, no weight draws: about 2x a plain "
            "MLP's step); the same model and evaluation"},
    {.path = "model.samples", .type = KEY_INT, FIELD_(model.samples), .def = "4", .lo = 1,
     .hi = 255,
     .doc = "bnn_mlp only: Monte Carlo samples per training step (S); default 4, or 1 with "
            "model.estimator: local (one draw per example)"},
    {.path = "model.test_samples", .type = KEY_INT, FIELD_(model.test_samples), .def = "10",
     .lo = 1, .hi = 256,
     .doc = "bnn_mlp only: sampled models whose predicted probabilities are averaged at "
            "evaluation"},
    {.path = "model.prior_sigma", .type = KEY_DOUBLE, FIELD_(model.prior_sigma), .def = "1",
     .dlo = 0, .dhi = 1e6, .flags = KEY_LO_OPEN,
     .doc = "bnn_mlp only: standard deviation of the Gaussian prior N(0, s^2) on every weight"},
    {.path = "model.rho_init", .type = KEY_DOUBLE, FIELD_(model.rho_init), .def = "-5",
     .dlo = -30, .dhi = 10,
     .doc = "bnn_mlp only: initial rho of every weight; sigma = softplus(rho)"},
    {.path = "model.lanes", .type = KEY_INT64, FIELD_(model.lanes), .def = "1024", .lo = 1,
     .hi = 1 << 20,
     .doc = "bnn_mlp only: lanes P of the reversible generator (rng: lfsr); part of the "
            "run's identity, since epsilon depends on it. Lane state is 16 bytes x P x "
            "samples (plus x tensors on checked steps)"},
    {.path = "model.stored_generator", .type = KEY_ENUM, FIELD_(model.stored_generator),
     .def = "philox", .names = eps_generator_names,
     .doc = "bnn_mlp only: generator that draws epsilon under rng: stored (philox or lfsr); "
            "stored then matches that regenerating mode bit for bit"},
    {.path = "model.lfsr_check_every", .type = KEY_INT64, FIELD_(model.lfsr_check_every),
     .def = "0", .lo = 0, .hi = 1000000000,
     .doc = "bnn_mlp and gpt (with dropout): check the lanes' return to their seed state "
            "every N steps under rng: lfsr; 0 = every step in Debug builds, every 16th "
            "otherwise"},
    {.path = "model.context", .type = KEY_INT64, FIELD_(model.context), .def = "64", .lo = 1,
     .hi = 4096, .doc = "gpt only: sequence length T (training windows are T + 1 bytes)"},
    {.path = "model.d_model", .type = KEY_INT64, FIELD_(model.d_model), .def = "64", .lo = 1,
     .hi = 8192, .doc = "gpt only: embedding width; a multiple of model.heads"},
    {.path = "model.layers", .type = KEY_INT, FIELD_(model.layers), .def = "2", .lo = 1,
     .hi = 64, .doc = "gpt only: transformer blocks (pre-LayerNorm)"},
    {.path = "model.heads", .type = KEY_INT64, FIELD_(model.heads), .def = "4", .lo = 1,
     .hi = 256, .doc = "gpt only: attention heads per block"},
    {.path = "model.tie_embeddings", .type = KEY_BOOL, FIELD_(model.tie_embeddings),
     .def = "true",
     .doc = "gpt only: the output head is the token embedding (its gradient then adds the "
            "embedding's scatter and the head's product)"},
    {.path = "model.dropout", .type = KEY_DOUBLE, FIELD_(model.dropout), .def = "0", .dlo = 0,
     .dhi = 1, .flags = KEY_HI_OPEN,
     .doc = "gpt only: dropout probability at the embedding and before each residual add, in "
            "training steps; masks come from the rng control (stored keeps a byte per "
            "element, philox and lfsr regenerate them in backward); 0 = off"},
    {.path = "train.steps", .type = KEY_INT64, FIELD_(train.steps), .lo = 1, .hi = 1000000000,
     .doc = "Optimizer steps to run"},
    {.path = "train.batch", .type = KEY_INT64, FIELD_(train.batch), .def = "64", .lo = 1,
     .hi = 65536, .doc = "Training examples per step"},
    {.path = "train.shards", .type = KEY_INT64, FIELD_(train.shards), .def = "4", .lo = 1,
     .hi = 65536,
     .doc = "Canonical shards the batch is cut into: under reduction: exact (the portable "
            "level) their gradients are summed exactly, so the digests do not depend on how "
            "many MPI ranks share them (at most this many ranks; at most train.batch); at "
            "every level a batchnorm layer's statistics are each shard's own"},
    {.path = "train.optimizer.kind", .type = KEY_ENUM, FIELD_(train.optimizer.kind),
     .def = "sgd", .names = optimizer_kind_names, .doc = "Optimizer"},
    {.path = "train.optimizer.lr", .type = KEY_DOUBLE, FIELD_(train.optimizer.lr),
     .def = "0.05", .dlo = 0, .dhi = 10, .flags = KEY_LO_OPEN, .doc = "Learning rate"},
    {.path = "train.optimizer.momentum", .type = KEY_DOUBLE, FIELD_(train.optimizer.momentum),
     .def = "0.9", .dlo = 0, .dhi = 1, .flags = KEY_HI_OPEN,
     .doc = "sgd: momentum coefficient; 0 = plain SGD"},
    {.path = "train.optimizer.weight_decay", .type = KEY_DOUBLE,
     FIELD_(train.optimizer.weight_decay), .def = "0", .dlo = 0, .dhi = 1,
     .doc = "sgd: L2 weight decay added to the gradient; adamw: decoupled decay, w -= lr * wd "
            "* w"},
    {.path = "train.optimizer.beta1", .type = KEY_DOUBLE, FIELD_(train.optimizer.beta1),
     .def = "0.9", .dlo = 0, .dhi = 1, .flags = KEY_HI_OPEN,
     .doc = "adamw: decay of the first moment"},
    {.path = "train.optimizer.beta2", .type = KEY_DOUBLE, FIELD_(train.optimizer.beta2),
     .def = "0.999", .dlo = 0, .dhi = 1, .flags = KEY_HI_OPEN,
     .doc = "adamw: decay of the second moment"},
    {.path = "train.optimizer.eps", .type = KEY_DOUBLE, FIELD_(train.optimizer.eps),
     .def = "1e-8", .dlo = 0, .dhi = 1, .flags = KEY_LO_OPEN,
     .doc = "adamw: added to the second moment's square root"},
    {.path = "train.optimizer.clip_norm", .type = KEY_DOUBLE, FIELD_(train.optimizer.clip_norm),
     .def = "0", .dlo = 0, .dhi = 1e9,
     .doc = "Scale every gradient by min(1, clip_norm / global norm) before the update "
            "(torch.nn.utils.clip_grad_norm_); the norm is a sum over every parameter under "
            "`reduction`. 0 = off"},
    {.path = "train.optimizer.warmup", .type = KEY_INT64, FIELD_(train.optimizer.warmup),
     .def = "0", .lo = 0, .hi = 1000000000,
     .doc = "Steps of linear learning-rate warm-up from lr / warmup to lr; 0 = none"},
    {.path = "train.optimizer.schedule", .type = KEY_ENUM, FIELD_(train.optimizer.schedule),
     .def = "constant", .names = lr_schedule_names,
     .doc = "Learning rate after the warm-up: constant, or cosine decay towards 0 over the "
            "steps after it (the first at lr, the last still above 0)"},
    {.path = "train.seed", .type = KEY_UINT64, FIELD_(train.seed), .def = "0",
     .doc = "Master seed for initial weights, data order and Bayesian epsilon"},
    {.path = "train.eval_every", .type = KEY_INT64, FIELD_(train.eval_every), .def = "0",
     .lo = 0, .hi = 1000000000,
     .doc = "Evaluate on the test set every N steps; 0 = only at the end"},
    {.path = "train.checkpoint_every", .type = KEY_INT64, FIELD_(train.checkpoint_every),
     .def = "0", .lo = 0, .hi = 1000000000,
     .doc = "Write each replica's checkpoint.bin every N steps and at the last step, for "
            "`detrain run --resume`; 0 = only when interrupted (SIGINT/SIGTERM/SIGHUP)"},
    {.path = "train.check_finite", .type = KEY_BOOL, FIELD_(train.check_finite),
     .def = "true",
     .doc = "After every step scan each gradient and weight for NaN/Inf and stop the "
            "replica at the first one, naming the tensor; off = only a non-finite loss "
            "stops it"},
    {.path = "train.checkpoint_at_divergence", .type = KEY_BOOL,
     FIELD_(train.checkpoint_at_divergence), .def = "false",
     .doc = "Each replica after the first compares its digest with replica 0's trace at "
            "every hashed step and, when it first differs, writes its state at the last "
            "agreeing step to divergence.bin, from which `detrain explain` starts (a `fast` "
            "run's steps need not replay the same); costs a synchronous hash and a state "
            "copy per hashed step until then"},
    {.path = "backend.device", .type = KEY_ENUM, FIELD_(backend.device), .def = "cpu",
     .names = device_names, .doc = "Device the model trains on"},
    {.path = "backend.threads", .type = KEY_INT, FIELD_(backend.threads), .def = "0", .lo = 0,
     .hi = 256, .doc = "CPU worker threads; 0 = number of online CPUs (capped at 64)"},
    {.path = "backend.gpu", .type = KEY_INT, FIELD_(backend.gpu), .def = "0", .lo = 0,
     .hi = 63, .doc = "cuda: the GPU to train on (CUDA device ordinal)"},
    {.path = "backend.graphs", .type = KEY_BOOL, FIELD_(backend.graphs), .def = "false",
     .doc = "cuda: capture each training step and launch it as one CUDA graph (the first "
            "captured step checked bit for bit against an uncaptured one; a step that cannot "
            "be captured runs uncaptured; the trace is the same either way). Needs the "
            "resident training set and one process"},
    {.path = "policies", .type = KEY_POLICY_LIST, FIELD_(policies), COUNT_(n_policies),
     .def = "[portable]", .min_items = 1, .max_items = DT_MAX_POLICIES,
     .doc = "Determinism policies to train under, one full run each. A mapping starts from "
            "level `base` and overrides single controls (`detrain policies` lists them); "
            "unless it has a `name` it is named like fast+reduction=fixed"},
    {.path = "replicas", .type = KEY_INT, FIELD_(replicas), .def = "1", .lo = 1, .hi = 64,
     .doc = "Runs per policy, compared bit for bit"},
    {.path = "vary", .type = KEY_VARY_SETS, FIELD_(vary_sets), COUNT_(n_vary), .def = "[]",
     .names = vary_names, .min_items = 1, .max_items = DT_MAX_VARY_SETS,
     .doc = "Randomness made to differ across replicas: init (initial weights), data_order "
            "(shuffle), epsilon (Bayesian weight samples: each replica its own ensemble "
            "member). A list of names is one setting; a list of such lists, e.g. "
            "[[], [init], [data_order]], is a noise-source axis: every policy runs under "
            "each setting"},
    {.path = "hash.every", .type = KEY_INT64, FIELD_(hash.every), .def = "1", .lo = 1,
     .hi = 1000000000, .doc = "Hash the model every N steps"},
    {.path = "hash.per_tensor", .type = KEY_BOOL, FIELD_(hash.per_tensor), .def = "false",
     .doc = "Also record one hash per tensor in the trace"},
    {.path = "hash.async", .type = KEY_ENUM, FIELD_(hash.async), .def = "auto",
     .names = hash_async_names,
     .doc = "Hash a copy of the weights on another thread while the next steps run; the "
            "trace is the same file. auto = on where the weights are not in host memory "
            "(cuda), off on the cpu"},
    {.path = "hash.digest", .type = KEY_ENUM, FIELD_(hash.digest), .def = "tree",
     .names = hash_digest_names,
     .doc = "A tensor's digest: tree = the tree digest (SHA-256 of 1 KiB leaves, then of "
            "8-ary nodes: docs/outputs.md, core/tree_hash.h), computed where the weights are "
            "(on the device, 32 bytes a tensor to the host); sha256 = SHA-256 of its bytes, on "
            "the host. Traces of the two kinds are not compared. A result recorded before the "
            "tree became the default (a config.json without this key) is read as sha256"},
    {.path = "report.snapshots", .type = KEY_INT, FIELD_(report.snapshots), .def = "8", .lo = 0,
     .hi = 64,
     .doc = "Weight snapshots kept per replica for drift curves and `detrain compare`: step 0 "
            "and N log-spaced steps (always the last); 0 = none"},
    {.path = "report.overhead_samples", .type = KEY_INT64, FIELD_(report.overhead_samples),
     .def = "30", .lo = 20, .hi = 1000000, .flags = KEY_ZERO_OFF,
     .below_lo = "the overhead protocol takes at least 20 samples",
     .doc = "Alternated step-time pairs per policy against `fast` for the overhead "
            "measurement; 0 = skip"},
    {.path = "report.overhead_warmup", .type = KEY_INT64, FIELD_(report.overhead_warmup),
     .def = "5", .lo = 0, .hi = 100000,
     .doc = "Unmeasured step-time pairs before the overhead samples"},
    {.path = "report.explain", .type = KEY_BOOL, FIELD_(report.explain), .def = "false",
     .doc = "Run `detrain explain` on replica-0 and replica-1 of every cell whose replicas "
            "part: report.md gains a section naming the op, tensor and control; "
            "explain/<cell>.csv holds each op table. Off by default: each explanation "
            "re-executes the divergent step (and replays the steps before it)"},
    {.path = "matrix", .type = KEY_MATRIX, FIELD_(matrix), COUNT_(n_matrix), .min_items = 1,
     .max_items = DT_MAX_MATRIX, .flags = KEY_OPTIONAL,
     .doc = "A matrix of experiments: entry NAME is the other keys of this file, then its "
            "`set` (each DOTTED.KEY: VALUE means what --set DOTTED.KEY=VALUE does), then the "
            "command line's --set; `detrain run` runs each into <out>/NAME/ (--only NAME,... "
            "picks some) and reports them side by side. Config file only"},
};
/* clang-format on */

#define N_KEYS ((int)(sizeof keys / sizeof keys[0]))
#define MAX_PATH_ 128 /* longest dotted key we build; longer ones cannot be known keys */
#define MAX_SECTIONS_ 16

static const struct key_row *find_key(const char *path)
{
    for (int i = 0; i < N_KEYS; i++)
        if (strcmp(keys[i].path, path) == 0) return &keys[i];
    return NULL;
}

/* Does `path` lie below `section` ("" is the root and contains everything)? */
static bool path_in_section(const char *path, const char *section)
{
    size_t n = strlen(section);
    return n == 0 || (strncmp(path, section, n) == 0 && path[n] == '.');
}

/* Is path[0, n) a section, i.e. a dotted prefix of some key ("train", "train.optimizer";
 * "" = the root)? */
static bool is_section_n(const char *path, size_t n)
{
    for (int i = 0; i < N_KEYS; i++)
        if (n == 0 || (strncmp(keys[i].path, path, n) == 0 && keys[i].path[n] == '.')) return true;
    return false;
}

static bool is_section(const char *path) { return is_section_n(path, strlen(path)); }

static int count_names(const char *const *names)
{
    int n = 0;
    while (names[n]) n++;
    return n;
}

/* "a", "a or b", "a, b or c" (messages: last = " or "; reference: last = ", "). */
static void format_choices(char *buf, size_t size, const char *const *names, const char *last)
{
    int n = count_names(names);
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < n && used < size; i++) {
        const char *sep = i == 0 ? "" : (i == n - 1 ? last : ", ");
        int w = snprintf(buf + used, size - used, "%s%s", sep, names[i]);
        if (w < 0) break;
        used += (size_t)w;
    }
}

/* The level names in the same style, for policies. */
static void format_levels(char *buf, size_t size, const char *last)
{
    const char *names[DT_LEVEL_COUNT + 1];
    for (int i = 0; i < DT_LEVEL_COUNT; i++) names[i] = dt_level_name((enum dt_level)i);
    names[DT_LEVEL_COUNT] = NULL;
    format_choices(buf, size, names, last);
}

/* The bounds of a numeric row as an interval: "[1, 65536]", "(0, 10]". */
static void format_range(char *buf, size_t size, const struct key_row *row)
{
    switch (row->type) {
    case KEY_DOUBLE:
        snprintf(buf, size, "%c%g, %g%c", (row->flags & KEY_LO_OPEN) ? '(' : '[', row->dlo,
                 row->dhi, (row->flags & KEY_HI_OPEN) ? ')' : ']');
        break;
    case KEY_UINT64: snprintf(buf, size, "[0, %" PRIu64 "]", UINT64_MAX); break;
    default:
        snprintf(buf, size, "%s[%" PRId64 ", %" PRId64 "]",
                 (row->flags & KEY_ZERO_OFF) ? "0 or " : "", row->lo, row->hi);
        break;
    }
}

/* ---- Loader state and error reporting --------------------------------------------------- */

/* Where the nodes being applied came from, to turn libyaml's 0-based marks into the
 * 1-based location an error reports. */
struct source {
    const char *file; /* the config path, or "--set" */
    int line;         /* 0: lines come from marks; else this fixed line (the --set index) */
    int col_off;      /* added to every column (offset of the value in a --set) */
};

/* Location of a mapping seen in the file, for "missing required key" errors. */
struct section_mark {
    char path[MAX_PATH_];
    int line, column;
};

struct loader {
    struct dt_experiment *out;
    struct dt_error *err;
    const struct source *src;     /* origin of `doc` */
    yaml_document_t *doc;         /* the document being applied */
    bool record_sections;         /* file pass: remember where each section's mapping starts */
    bool modelled;                /* dt_config_load_modelled: GPU modes on any device */
    bool file_pass;               /* applying the config file's own keys (`matrix` only there) */
    int entry;                    /* matrix entry to resolve after the file's keys; -1 = none */
    const char *text;             /* the config's bytes given in memory (dt_config_load_text), */
    size_t text_len;              /* NULL = read them from the path */
    const yaml_node_t *entry_set; /* that entry's `set` mapping in `doc`, NULL = none */
    bool seen[sizeof keys / sizeof keys[0]]; /* set by the file or a --set (not defaults) */
    struct {
        const char *file; /* the config path or "--set": both outlive the load */
        int line, column;
    } seen_at[sizeof keys / sizeof keys[0]]; /* where each seen key was last set */
    struct section_mark sections[MAX_SECTIONS_];
    int n_sections;
};

/* A --set value is one line of the assignment, so there the column is the mark's offset
 * in the value (libyaml may put end-of-input marks on a line of their own). */
static void location(const struct loader *ld, yaml_mark_t mark, int *line, int *column)
{
    *line = ld->src->line ? ld->src->line : (int)mark.line + 1;
    *column = ld->src->col_off + (int)(ld->src->line ? mark.index : mark.column) + 1;
}

/* Report a config error at `mark`; always returns DT_ERR_CONFIG. */
__attribute__((format(printf, 3, 4))) static enum dt_status
fail_at(struct loader *ld, yaml_mark_t mark, const char *fmt, ...)
{
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    int line, column;
    location(ld, mark, &line, &column);
    char safe[1024]; /* values and keys come from the file: escaped before a terminal */
    dt_sanitize_message(safe, sizeof safe, msg);
    return dt_error_set_at(ld->err, DT_ERR_CONFIG, ld->src->file, line, column, "%s", safe);
}

/* YAML's null: an empty plain scalar ("key:"), "~" or "null". */
static bool is_null(const yaml_node_t *node)
{
    if (node->type != YAML_SCALAR_NODE || node->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
        return false;
    const char *s = (const char *)node->data.scalar.value;
    return s[0] == '\0' || strcmp(s, "~") == 0 || strcmp(s, "null") == 0 ||
           strcmp(s, "Null") == 0 || strcmp(s, "NULL") == 0;
}

static bool is_quoted(const yaml_node_t *node)
{
    return node->data.scalar.style == YAML_SINGLE_QUOTED_SCALAR_STYLE ||
           node->data.scalar.style == YAML_DOUBLE_QUOTED_SCALAR_STYLE;
}

/* What a node is, for "expected X, got Y". */
static void describe_node(char *buf, size_t size, const yaml_node_t *node)
{
    const char *s = node->type == YAML_SCALAR_NODE ? (const char *)node->data.scalar.value : "";
    const char *more = strlen(s) > 60 ? "..." : "";
    if (node->type == YAML_MAPPING_NODE) snprintf(buf, size, "a mapping");
    else if (node->type == YAML_SEQUENCE_NODE) snprintf(buf, size, "a list");
    else if (is_null(node)) snprintf(buf, size, "no value");
    else if (is_quoted(node)) snprintf(buf, size, "the quoted string '%.60s%s'", s, more);
    else snprintf(buf, size, "'%.60s%s'", s, more);
}

/* "key 'policies', item 2" (item >= 0) or "key 'policies'". */
static void key_label(char *buf, size_t size, const struct key_row *row, int item)
{
    if (item >= 0) snprintf(buf, size, "key '%s', item %d", row->path, item + 1);
    else snprintf(buf, size, "key '%s'", row->path);
}

static enum dt_status fail_type(struct loader *ld, const struct key_row *row, int item,
                                const yaml_node_t *node)
{
    char label[MAX_PATH_ + 32], got[96];
    key_label(label, sizeof label, row, item);
    describe_node(got, sizeof got, node);
    const char *want = item >= 0 ? type_info[row->type].item : type_info[row->type].expected;
    return fail_at(ld, node->start_mark, "%s: expected %s, got %s", label, want, got);
}

/* A name that is not one of the row's choices (enum, restricted string, flag set). */
static enum dt_status fail_choice(struct loader *ld, const struct key_row *row, int item,
                                  const yaml_node_t *node)
{
    char label[MAX_PATH_ + 32], choices[256];
    key_label(label, sizeof label, row, item);
    format_choices(choices, sizeof choices, row->names, " or ");
    return fail_at(ld, node->start_mark, "%s: unknown value '%.64s' (expected %s)", label,
                   (const char *)node->data.scalar.value, choices);
}

static enum dt_status fail_range(struct loader *ld, const struct key_row *row, int item,
                                 const yaml_node_t *node)
{
    char label[MAX_PATH_ + 32], range[96];
    key_label(label, sizeof label, row, item);
    format_range(range, sizeof range, row);
    return fail_at(ld, node->start_mark, "%s: value %.64s is out of range %s", label,
                   (const char *)node->data.scalar.value, range);
}

/* The text of a scalar that carries a value; otherwise a type error. Numbers and
 * booleans must be plain (unquoted) scalars: "10" in quotes is a string in YAML. */
static enum dt_status scalar_text(struct loader *ld, const struct key_row *row, int item,
                                  const yaml_node_t *node, bool quoted_ok, const char **text)
{
    if (node->type != YAML_SCALAR_NODE || is_null(node) || (!quoted_ok && is_quoted(node)))
        return fail_type(ld, row, item, node);
    *text = (const char *)node->data.scalar.value;
    return DT_OK;
}

/* ---- Scalar parsing ------------------------------------------------------------------- */

enum number_parse { NUMBER_OK, NUMBER_SYNTAX, NUMBER_OVERFLOW };

/* Decimal integer: optional sign, then digits only (no spaces, hex or exponents). */
static enum number_parse parse_decimal(const char *s, bool *neg, uint64_t *mag)
{
    *neg = false;
    *mag = 0;
    if (*s == '+' || *s == '-') *neg = *s++ == '-';
    if (!isdigit((unsigned char)*s)) return NUMBER_SYNTAX;
    bool overflow = false;
    for (; *s; s++) {
        if (!isdigit((unsigned char)*s)) return NUMBER_SYNTAX;
        unsigned d = (unsigned)(*s - '0');
        if (*mag > (UINT64_MAX - d) / 10) overflow = true;
        else *mag = *mag * 10 + d;
    }
    return overflow ? NUMBER_OVERFLOW : NUMBER_OK;
}

static enum number_parse parse_int64(const char *s, int64_t *v)
{
    bool neg;
    uint64_t mag;
    enum number_parse r = parse_decimal(s, &neg, &mag);
    if (r != NUMBER_OK) return r;
    if (mag > (uint64_t)INT64_MAX + (neg ? 1u : 0u)) return NUMBER_OVERFLOW;
    *v = neg ? (mag == (uint64_t)INT64_MAX + 1u ? INT64_MIN : -(int64_t)mag) : (int64_t)mag;
    return NUMBER_OK;
}

static enum number_parse parse_uint64(const char *s, uint64_t *v)
{
    bool neg;
    enum number_parse r = parse_decimal(s, &neg, v);
    if (r == NUMBER_OK && neg && *v != 0) return NUMBER_OVERFLOW;
    return r;
}

/* A whole-string strtod; leading spaces, "nan" and "inf" are refused. */
static bool parse_double(const char *s, double *v)
{
    if (*s == '\0' || isspace((unsigned char)*s)) return false;
    char *end;
    errno = 0;
    *v = strtod(s, &end);
    return *end == '\0' && isfinite(*v);
}

static bool parse_bool(const char *s, bool *v)
{
    static const char *const yes[] = {"true", "yes", "on"}, *const no[] = {"false", "no", "off"};
    for (int i = 0; i < 3; i++) {
        if (strcasecmp(s, yes[i]) == 0 || strcasecmp(s, no[i]) == 0) {
            *v = strcasecmp(s, yes[i]) == 0;
            return true;
        }
    }
    return false;
}

/* An offending character as an error shows it: "'/'" or "byte 0x0a". */
static void format_char(char *buf, size_t size, unsigned char c)
{
    if (isprint(c)) snprintf(buf, size, "'%c'", c);
    else snprintf(buf, size, "byte 0x%02x", c);
}

static int name_index(const char *const *names, const char *s)
{
    for (int i = 0; names[i]; i++)
        if (strcmp(names[i], s) == 0) return i;
    return -1;
}

/* ---- Setters: one per type, each validating before it writes --------------------------- */

static enum dt_status get_int64(struct loader *ld, const struct key_row *row, int item,
                                const yaml_node_t *node, int64_t *v)
{
    const char *s = NULL;
    DT_FORWARD_IF_ERROR(scalar_text(ld, row, item, node, false, &s));
    enum number_parse r = parse_int64(s, v);
    if (r == NUMBER_SYNTAX) return fail_type(ld, row, item, node);
    if (r == NUMBER_OK && (row->flags & KEY_ZERO_OFF) && *v == 0) return DT_OK;
    if (r == NUMBER_OK && (row->flags & KEY_ZERO_OFF) && *v > 0 && *v < row->lo)
        return fail_at(ld, node->start_mark, "key '%s': %s (or 0 to skip)", row->path,
                       row->below_lo);
    if (r == NUMBER_OVERFLOW || *v < row->lo || *v > row->hi)
        return fail_range(ld, row, item, node);
    return DT_OK;
}

#define NAME_CHARS_ "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-"

/* The experiment-name rule (A-Z a-z 0-9 _ . -) for `s`, the text of `node`; `label`
 * starts the message ("key 'name'"). */
static enum dt_status check_name_chars(struct loader *ld, const char *label,
                                       const yaml_node_t *node, const char *s)
{
    size_t len = strlen(s), bad = strspn(s, NAME_CHARS_);
    if (bad == len) {
        /* a name becomes one folder: one path component that is neither the folder itself
         * nor its parent, and not read as an option on a command line */
        if (strcmp(s, ".") == 0 || strcmp(s, "..") == 0)
            return fail_at(ld, node->start_mark, "%s: '%s' cannot name a folder", label, s);
        if (s[0] == '-')
            return fail_at(ld, node->start_mark,
                           "%s: '%.64s' starts with '-' (it would read as an option)", label, s);
        return DT_OK;
    }
    char shown[16];
    format_char(shown, sizeof shown, (unsigned char)s[bad]);
    return fail_at(ld, node->start_mark,
                   "%s: '%.64s' contains %s at position %zu; allowed: "
                   "A-Z a-z 0-9 _ . -",
                   label, s, shown, bad + 1);
}

static enum dt_status set_string(struct loader *ld, const struct key_row *row,
                                 const yaml_node_t *node, char *field)
{
    const char *s = NULL;
    DT_FORWARD_IF_ERROR(scalar_text(ld, row, -1, node, true, &s));
    size_t len = strlen(s);
    if (len != node->data.scalar.length)
        return fail_at(ld, node->start_mark, "key '%s': the value contains a NUL character",
                       row->path);
    if (row->names && name_index(row->names, s) < 0) return fail_choice(ld, row, -1, node);
    if ((int64_t)len < row->lo)
        return fail_at(ld, node->start_mark, "key '%s': must not be empty", row->path);
    if (len >= row->size)
        return fail_at(ld, node->start_mark,
                       "key '%s': value is %zu characters long; at most %zu "
                       "allowed",
                       row->path, len, row->size - 1);
    if (row->flags & KEY_NAME_CHARS) {
        char label[MAX_PATH_ + 8];
        key_label(label, sizeof label, row, -1);
        DT_FORWARD_IF_ERROR(check_name_chars(ld, label, node, s));
    }
    memcpy(field, s, len + 1);
    return DT_OK;
}

static enum dt_status set_scalar(struct loader *ld, const struct key_row *row,
                                 const yaml_node_t *node, void *field)
{
    const char *s = NULL;
    switch (row->type) {
    case KEY_INT64: return get_int64(ld, row, -1, node, (int64_t *)field);
    case KEY_INT: {
        int64_t v;
        DT_FORWARD_IF_ERROR(get_int64(ld, row, -1, node, &v));
        *(int *)field = (int)v; /* the row's bounds fit an int */
        return DT_OK;
    }
    case KEY_UINT64: {
        DT_FORWARD_IF_ERROR(scalar_text(ld, row, -1, node, false, &s));
        enum number_parse r = parse_uint64(s, (uint64_t *)field);
        if (r == NUMBER_SYNTAX) return fail_type(ld, row, -1, node);
        if (r == NUMBER_OVERFLOW) return fail_range(ld, row, -1, node);
        return DT_OK;
    }
    case KEY_DOUBLE: {
        double v;
        DT_FORWARD_IF_ERROR(scalar_text(ld, row, -1, node, false, &s));
        if (!parse_double(s, &v)) return fail_type(ld, row, -1, node);
        bool low = (row->flags & KEY_LO_OPEN) ? v <= row->dlo : v < row->dlo;
        bool high = (row->flags & KEY_HI_OPEN) ? v >= row->dhi : v > row->dhi;
        if (low || high) return fail_range(ld, row, -1, node);
        *(double *)field = v;
        return DT_OK;
    }
    case KEY_BOOL:
        DT_FORWARD_IF_ERROR(scalar_text(ld, row, -1, node, false, &s));
        if (!parse_bool(s, (bool *)field)) return fail_type(ld, row, -1, node);
        return DT_OK;
    case KEY_ENUM: {
        DT_FORWARD_IF_ERROR(scalar_text(ld, row, -1, node, true, &s));
        int i = name_index(row->names, s);
        if (i < 0) return fail_choice(ld, row, -1, node);
        unsigned u = (unsigned)i;
        DT_ASSERT(row->size == sizeof u);
        memcpy(field, &u, sizeof u);
        return DT_OK;
    }
    default: DT_ASSERT_MSG(0, "set_scalar: not a scalar key type"); return DT_ERR_INTERNAL;
    }
}

/* ---- Policies: a level name, or {base: LEVEL, CONTROL: VALUE, ..., name: NAME} ---------- */

static const yaml_node_t *earlier_key(const struct loader *ld, const yaml_node_t *map, int i,
                                      const yaml_node_t *k);

/* The key of pair j of mapping `map` (labelled `label` in messages): a scalar, not given
 * before in the mapping. */
static enum dt_status pair_key(struct loader *ld, const yaml_node_t *map, int j, const char *label,
                               const char **key)
{
    const yaml_node_t *k = yaml_document_get_node(ld->doc, map->data.mapping.pairs.start[j].key);
    if (k->type != YAML_SCALAR_NODE)
        return fail_at(ld, k->start_mark, "%s: expected a key name, got a %s", label,
                       k->type == YAML_MAPPING_NODE ? "mapping" : "list");
    *key = (const char *)k->data.scalar.value;
    const yaml_node_t *first = earlier_key(ld, map, j, k);
    if (first) {
        int line, column;
        location(ld, first->start_mark, &line, &column);
        return fail_at(ld, k->start_mark, "%s: duplicate key '%.64s' (first given at %d:%d)", label,
                       *key, line, column);
    }
    return DT_OK;
}

/* The text of `v`, the value of entry `what` ("'base'", "control 'math'") of the policy
 * mapping labelled `label`; anything but a non-null scalar is a type error. */
static enum dt_status policy_scalar(struct loader *ld, const char *label, const char *what,
                                    const yaml_node_t *v, const char *expected, const char **text)
{
    if (v->type != YAML_SCALAR_NODE || is_null(v)) {
        char got[96];
        describe_node(got, sizeof got, v);
        return fail_at(ld, v->start_mark, "%s: %s: expected %s, got %s", label, what, expected,
                       got);
    }
    *text = (const char *)v->data.scalar.value;
    if (strlen(*text) != v->data.scalar.length)
        return fail_at(ld, v->start_mark, "%s: %s: the value contains a NUL character", label,
                       what);
    return DT_OK;
}

/* An explicit policy name: 1 to 63 characters of [A-Za-z0-9_.+=-], not "." or "..", since
 * it names the policy's folder. */
static enum dt_status set_policy_name(struct loader *ld, const char *label, const yaml_node_t *v,
                                      struct dt_policy *pol)
{
    const char *s = NULL;
    DT_FORWARD_IF_ERROR(policy_scalar(ld, label, "'name'", v, "a name", &s));
    size_t len = strlen(s);
    if (len == 0) return fail_at(ld, v->start_mark, "%s: 'name': must not be empty", label);
    if (len >= sizeof pol->name)
        return fail_at(ld, v->start_mark,
                       "%s: 'name': value is %zu characters long; at most "
                       "%zu allowed",
                       label, len, sizeof pol->name - 1);
    size_t bad = strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.+=-");
    if (bad < len) {
        char shown[16];
        format_char(shown, sizeof shown, (unsigned char)s[bad]);
        return fail_at(ld, v->start_mark,
                       "%s: 'name': '%.64s' contains %s at position %zu; "
                       "allowed: A-Z a-z 0-9 _ . + = -",
                       label, s, shown, bad + 1);
    }
    if (strcmp(s, ".") == 0 || strcmp(s, "..") == 0)
        return fail_at(ld, v->start_mark, "%s: 'name': '%s' cannot name a folder", label, s);
    memcpy(pol->name, s, len + 1);
    return DT_OK;
}

/* A policy given as a mapping. Every key is checked first (a scalar, given once, and
 * 'base', 'name' or a control), then 'base' sets every control, then each override is
 * applied in the order written. Without 'name' the policy gets its automatic name.
 * *name_node is the 'name' value, or NULL. */
static enum dt_status set_policy_mapping(struct loader *ld, const char *label,
                                         const yaml_node_t *map, struct dt_policy *pol,
                                         const yaml_node_t **name_node)
{
    const yaml_node_pair_t *pairs = map->data.mapping.pairs.start;
    int n = (int)(map->data.mapping.pairs.top - pairs);
    const yaml_node_t *base = NULL;
    struct dt_error sub;
    *name_node = NULL;
    for (int j = 0; j < n; j++) {
        const yaml_node_t *k = yaml_document_get_node(ld->doc, pairs[j].key);
        const yaml_node_t *v = yaml_document_get_node(ld->doc, pairs[j].value);
        const char *key;
        DT_FORWARD_IF_ERROR(pair_key(ld, map, j, label, &key));
        if (strcmp(key, "base") == 0) {
            base = v;
        } else if (strcmp(key, "name") == 0) {
            *name_node = v;
        } else if (dt_policy_find_control(key) < 0) {
            struct dt_policy scratch; /* the message and its list come from the policy table */
            dt_policy_from_level(&scratch, DT_LEVEL_FAST);
            dt_policy_set_control(&scratch, key, "", &sub);
            return fail_at(ld, k->start_mark, "%s: %s", label, sub.msg);
        }
    }
    if (!base) {
        char levels[96];
        format_levels(levels, sizeof levels, " or ");
        return fail_at(ld, map->start_mark, "%s: missing 'base' (the level to start from: %s)",
                       label, levels);
    }
    const char *s = NULL;
    DT_FORWARD_IF_ERROR(policy_scalar(ld, label, "'base'", base, "a level name", &s));
    if (dt_policy_from_level_name(pol, s, &sub) != DT_OK)
        return fail_at(ld, base->start_mark, "%s: 'base': %s", label, sub.msg);
    for (int j = 0; j < n; j++) {
        const yaml_node_t *k = yaml_document_get_node(ld->doc, pairs[j].key);
        const yaml_node_t *v = yaml_document_get_node(ld->doc, pairs[j].value);
        const char *key = (const char *)k->data.scalar.value;
        if (strcmp(key, "base") == 0 || strcmp(key, "name") == 0) continue;
        char what[96];
        snprintf(what, sizeof what, "control '%s'", key);
        DT_FORWARD_IF_ERROR(policy_scalar(ld, label, what, v, "a value name", &s));
        if (dt_policy_set_control(pol, key, s, &sub) != DT_OK)
            return fail_at(ld, v->start_mark, "%s: %s", label, sub.msg);
    }
    if (*name_node) return set_policy_name(ld, label, *name_node, pol);
    if (!dt_policy_auto_name(pol))
        return fail_at(ld, map->start_mark,
                       "%s: its automatic name '%s...' would be longer "
                       "than %zu characters; give the policy a 'name'",
                       label, pol->name, sizeof pol->name - 1);
    return DT_OK;
}

/* Item `i` of `policies`: a level name or a mapping. Names must be unique, as each names
 * the policy's folder; items before `i` are set. */
static enum dt_status set_policy_item(struct loader *ld, const struct key_row *row, int i,
                                      const yaml_node_t *node)
{
    struct dt_policy *pol = (struct dt_policy *)((char *)ld->out + row->offset);
    char label[MAX_PATH_ + 32];
    key_label(label, sizeof label, row, i);
    const yaml_node_t *at = node; /* where a duplicate name is reported */
    if (node->type == YAML_MAPPING_NODE) {
        const yaml_node_t *name_node = NULL;
        DT_FORWARD_IF_ERROR(set_policy_mapping(ld, label, node, &pol[i], &name_node));
        if (name_node) at = name_node;
    } else {
        const char *s = NULL;
        struct dt_error sub;
        DT_FORWARD_IF_ERROR(scalar_text(ld, row, i, node, true, &s));
        if (dt_policy_from_level_name(&pol[i], s, &sub) != DT_OK)
            return fail_at(ld, node->start_mark, "%s: %s", label, sub.msg);
    }
    for (int j = 0; j < i; j++)
        if (strcmp(pol[j].name, pol[i].name) == 0)
            return fail_at(ld, at->start_mark, "%s: duplicate policy name '%s' (items %d and %d)",
                           label, pol[i].name, j + 1, i + 1);
    return DT_OK;
}

/* ---- model.layers: a layer name, or {KIND: N, kernel: K, stride: S, pad: P} --------------- */

/* An integer of a layer's mapping, in [lo, hi]. */
static enum dt_status layer_int(struct loader *ld, const char *label, const char *what,
                                const yaml_node_t *v, int64_t lo, int64_t hi, int64_t *out)
{
    const char *s = NULL;
    DT_FORWARD_IF_ERROR(policy_scalar(ld, label, what, v, "an integer", &s));
    const enum number_parse r = parse_int64(s, out);
    if (r == NUMBER_SYNTAX)
        return fail_at(ld, v->start_mark, "%s: %s: expected an integer, got '%.64s'", label, what,
                       s);
    if (r == NUMBER_OVERFLOW || *out < lo || *out > hi)
        return fail_at(ld, v->start_mark,
                       "%s: %s: %.64s is out of range [%" PRId64 ", %" PRId64 "]", label, what, s,
                       lo, hi);
    return DT_OK;
}

/* The layer kind named `s` (at node `at`). */
static enum dt_status layer_kind(struct loader *ld, const char *label, const yaml_node_t *at,
                                 const char *s, enum dt_layer_kind *kind)
{
    const int k = name_index(dt_layer_kind_names, s);
    if (k < 0) {
        char choices[256];
        format_choices(choices, sizeof choices, dt_layer_kind_names, " or ");
        return fail_at(ld, at->start_mark, "%s: unknown layer '%.64s' (expected %s)", label, s,
                       choices);
    }
    *kind = (enum dt_layer_kind)k;
    return DT_OK;
}

/* What a layer of kind k is written as, for messages. */
static const char *layer_form(enum dt_layer_kind k)
{
    if (k == DT_LAYER_RESIDUAL) return "{residual: [LAYERS], shortcut: identity|projection}";
    if (dt_layer_takes_rate(k)) return "{dropout: P}";
    if (k == DT_LAYER_CONV) return "{conv: FILTERS, kernel: K, stride: S, pad: P}";
    if (k == DT_LAYER_MAXPOOL) return "{maxpool: K, stride: S, pad: P}";
    if (k == DT_LAYER_AVGPOOL) return "{avgpool: K, stride: S, pad: P}";
    if (dt_layer_takes_units(k)) return "{dense: UNITS}";
    return NULL; /* a bare name */
}

/* A layer given as a mapping: one key names the kind, with its units (dense, conv) or its
 * window (maxpool) as the value; a windowed kind may add kernel (conv: required), stride
 * (default 1 for conv, the window for maxpool) and pad (default 0). */
static enum dt_status set_layer_mapping(struct loader *ld, const char *label,
                                        const yaml_node_t *map, struct dt_layer *layer)
{
    const yaml_node_pair_t *pairs = map->data.mapping.pairs.start;
    const int n = (int)(map->data.mapping.pairs.top - pairs);
    const yaml_node_t *kind_v = NULL, *kv[3] = {NULL, NULL, NULL}; /* kernel, stride, pad */
    static const char *const window_keys[] = {"kernel", "stride", "pad", NULL};
    for (int j = 0; j < n; j++) {
        const yaml_node_t *k = yaml_document_get_node(ld->doc, pairs[j].key);
        const yaml_node_t *v = yaml_document_get_node(ld->doc, pairs[j].value);
        const char *key;
        DT_FORWARD_IF_ERROR(pair_key(ld, map, j, label, &key));
        const int w = name_index(window_keys, key);
        if (w >= 0) {
            kv[w] = v;
        } else if (kind_v) {
            return fail_at(ld, k->start_mark,
                           "%s: '%.64s' is not a layer's key (one kind, then kernel, stride, "
                           "pad)",
                           label, key);
        } else {
            DT_FORWARD_IF_ERROR(layer_kind(ld, label, k, key, &layer->kind));
            kind_v = v;
        }
    }
    if (!kind_v)
        return fail_at(ld, map->start_mark, "%s: no layer kind (e.g. {dense: 128})", label);
    const char *kind = dt_layer_kind_names[layer->kind];
    const char *form = layer_form(layer->kind);
    char what[96];
    snprintf(what, sizeof what, "%s layer", kind);
    if (!form)
        return fail_at(ld, kind_v->start_mark, "%s: a %s takes no value; write it as '%s'", label,
                       what, kind);
    for (int w = 0; w < 3; w++)
        if (kv[w] && !dt_layer_takes_window(layer->kind))
            return fail_at(ld, kv[w]->start_mark, "%s: a %s takes no '%s' (%s)", label, what,
                           window_keys[w], form);
    if (dt_layer_takes_rate(layer->kind)) { /* a probability in [0, 1) */
        const char *text = NULL;
        snprintf(what, sizeof what, "'%s'", kind);
        DT_FORWARD_IF_ERROR(policy_scalar(ld, label, what, kind_v, "a probability", &text));
        if (!parse_double(text, &layer->rate) || !(layer->rate >= 0.0 && layer->rate < 1.0))
            return fail_at(ld, kind_v->start_mark,
                           "%s: %s: expected a probability in [0, 1), "
                           "got '%.64s'",
                           label, what, text);
        return DT_OK;
    }
    if (layer->kind == DT_LAYER_CONV && !kv[0])
        return fail_at(ld, map->start_mark, "%s: a conv layer needs its 'kernel' (%s)", label,
                       form);
    const bool pool = !dt_layer_takes_units(layer->kind); /* a window: its value is its size */
    if (pool && kv[0])
        return fail_at(ld, kv[0]->start_mark,
                       "%s: '%s' takes its window as its value, not as 'kernel' (%s)", label, kind,
                       form);
    snprintf(what, sizeof what, "'%s'", kind);
    int64_t *first = pool ? &layer->kernel : &layer->units;
    DT_FORWARD_IF_ERROR(layer_int(ld, label, what, kind_v, 1, pool ? 64 : (int64_t)1 << 20, first));
    if (kv[0]) DT_FORWARD_IF_ERROR(layer_int(ld, label, "'kernel'", kv[0], 1, 64, &layer->kernel));
    layer->stride = pool ? layer->kernel : 1;
    if (kv[1]) DT_FORWARD_IF_ERROR(layer_int(ld, label, "'stride'", kv[1], 1, 64, &layer->stride));
    if (kv[2])
        DT_FORWARD_IF_ERROR(
            layer_int(ld, label, "'pad'", kv[2], 0, layer->kernel - 1, &layer->pad));
    return DT_OK;
}

static enum dt_status append_layer(struct loader *ld, const struct key_row *row, const char *label,
                                   const yaml_node_t *node, int *n, int depth);

/* The mapping's value for `key`, or NULL. */
static const yaml_node_t *mapping_value(struct loader *ld, const yaml_node_t *map, const char *key)
{
    for (const yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top;
         p++) {
        const yaml_node_t *k = yaml_document_get_node(ld->doc, p->key);
        if (k->type == YAML_SCALAR_NODE && strcmp((const char *)k->data.scalar.value, key) == 0)
            return yaml_document_get_node(ld->doc, p->value);
    }
    return NULL;
}

/* {residual: [LAYERS], shortcut: identity|projection} at layer (already counted): its
 * branch appended after it, nested blocks with theirs. */
static enum dt_status set_residual(struct loader *ld, const struct key_row *row, const char *label,
                                   const yaml_node_t *map, int at, int *n, int depth)
{
    static const char *const keys_[] = {"residual", "shortcut", NULL}, *const shortcuts[] = {
                                                                           "identity", "projection",
                                                                           NULL};
    const int pairs = (int)(map->data.mapping.pairs.top - map->data.mapping.pairs.start);
    for (int j = 0; j < pairs; j++) {
        const char *key;
        DT_FORWARD_IF_ERROR(pair_key(ld, map, j, label, &key));
        if (name_index(keys_, key) < 0)
            return fail_at(
                ld,
                yaml_document_get_node(ld->doc, map->data.mapping.pairs.start[j].key)->start_mark,
                "%s: '%.64s' is not a residual block's key (%s)", label, key,
                layer_form(DT_LAYER_RESIDUAL));
    }
    const yaml_node_t *branch = mapping_value(ld, map, "residual"),
                      *sc = mapping_value(ld, map, "shortcut");
    struct dt_layer *layers = (struct dt_layer *)((char *)ld->out + row->offset);
    if (sc) {
        const char *text = NULL;
        DT_FORWARD_IF_ERROR(
            policy_scalar(ld, label, "'shortcut'", sc, "identity or projection", &text));
        const int k = name_index(shortcuts, text);
        if (k < 0)
            return fail_at(ld, sc->start_mark,
                           "%s: 'shortcut': unknown value '%.64s' (expected identity or "
                           "projection)",
                           label, text);
        layers[at].projection = k == 1;
    }
    if (branch->type != YAML_SEQUENCE_NODE ||
        branch->data.sequence.items.top == branch->data.sequence.items.start)
        return fail_at(ld, branch->start_mark, "%s: 'residual': expected a list of its layers",
                       label);
    if (depth >= 8)
        return fail_at(ld, branch->start_mark, "%s: blocks nested more than 8 deep", label);
    const yaml_node_item_t *items = branch->data.sequence.items.start;
    const int count = (int)(branch->data.sequence.items.top - items);
    for (int i = 0; i < count; i++) {
        char sub[MAX_PATH_ + 96];
        snprintf(sub, sizeof sub, "%.*s, branch item %d", MAX_PATH_ + 40, label, i + 1);
        DT_FORWARD_IF_ERROR(
            append_layer(ld, row, sub, yaml_document_get_node(ld->doc, items[i]), n, depth + 1));
    }
    layers[at].block = *n - at - 1;
    return DT_OK;
}

/* A layer of `model.network` (labelled `label`) appended at *n: a name (relu, gelu,
 * global_avgpool, flatten), a mapping, or a residual block with its branch after it. */
static enum dt_status append_layer(struct loader *ld, const struct key_row *row, const char *label,
                                   const yaml_node_t *node, int *n, int depth)
{
    if (*n >= row->max_items)
        return fail_at(ld, node->start_mark,
                       "%s: more than %d layers in all (a block's branch counted in)", label,
                       row->max_items);
    const int at = (*n)++;
    struct dt_layer *layer = &((struct dt_layer *)((char *)ld->out + row->offset))[at];
    memset(layer, 0, sizeof *layer);
    if (node->type == YAML_MAPPING_NODE && mapping_value(ld, node, "residual")) {
        layer->kind = DT_LAYER_RESIDUAL;
        return set_residual(ld, row, label, node, at, n, depth);
    }
    if (node->type == YAML_MAPPING_NODE) return set_layer_mapping(ld, label, node, layer);
    const char *s = NULL;
    if (node->type != YAML_SCALAR_NODE || is_null(node)) {
        char got[96];
        describe_node(got, sizeof got, node);
        return fail_at(ld, node->start_mark, "%s: expected %s, got %s", label,
                       type_info[row->type].item, got);
    }
    s = (const char *)node->data.scalar.value;
    DT_FORWARD_IF_ERROR(layer_kind(ld, label, node, s, &layer->kind));
    const char *form = layer_form(layer->kind);
    if (form)
        return fail_at(ld, node->start_mark, "%s: a %s layer needs its %s: %s", label, s,
                       layer->kind == DT_LAYER_RESIDUAL    ? "branch"
                       : dt_layer_takes_rate(layer->kind)  ? "rate"
                       : dt_layer_takes_units(layer->kind) ? "units"
                                                           : "window",
                       form);
    return DT_OK;
}

/* model.network: a list of layers (a single layer stands for a one-item list); a residual
 * block's branch follows it in the flat list. Replaces the previous value as a whole. */
static enum dt_status set_layers(struct loader *ld, const struct key_row *row,
                                 const yaml_node_t *node)
{
    const yaml_node_item_t *items = NULL;
    int count = 1, n = 0;
    if (node->type == YAML_SEQUENCE_NODE) {
        items = node->data.sequence.items.start;
        count = (int)(node->data.sequence.items.top - items);
    } else if (is_null(node)) {
        return fail_type(ld, row, -1, node);
    }
    if (count < row->min_items)
        return fail_at(ld, node->start_mark, "key '%s': expected at least %d layer", row->path,
                       row->min_items);
    for (int i = 0; i < count; i++) {
        char label[MAX_PATH_ + 32];
        key_label(label, sizeof label, row, i);
        DT_FORWARD_IF_ERROR(append_layer(
            ld, row, label, items ? yaml_document_get_node(ld->doc, items[i]) : node, &n, 0));
    }
    *(int *)((char *)ld->out + row->count_offset) = n;
    return DT_OK;
}

/* One item of a list-typed key; `i` is its 0-based index. Items before it are set. */
static enum dt_status set_list_item(struct loader *ld, const struct key_row *row, int i,
                                    const yaml_node_t *node)
{
    char *field = (char *)ld->out + row->offset;
    if (row->type == KEY_INT_LIST) return get_int64(ld, row, i, node, &((int64_t *)field)[i]);
    return set_policy_item(ld, row, i, node);
}

/* A list replaces the previous value as a whole. A single scalar stands for a one-item
 * list (handy on the command line: --set policies=fast), and so does a single mapping
 * where items may be mappings (--set 'policies={base: fast, math: strict}'). */
static enum dt_status set_list(struct loader *ld, const struct key_row *row,
                               const yaml_node_t *node)
{
    const yaml_node_item_t *items = NULL;
    int n = 1;
    if (node->type == YAML_SEQUENCE_NODE) {
        items = node->data.sequence.items.start;
        n = (int)(node->data.sequence.items.top - items);
    } else if (!(node->type == YAML_SCALAR_NODE ||
                 (node->type == YAML_MAPPING_NODE && row->type == KEY_POLICY_LIST)) ||
               is_null(node)) {
        return fail_type(ld, row, -1, node);
    }
    if (n < row->min_items || n > row->max_items)
        return fail_at(ld, node->start_mark, "key '%s': expected %d to %d items, got %d", row->path,
                       row->min_items, row->max_items, n);
    for (int i = 0; i < n; i++) {
        const yaml_node_t *item = items ? yaml_document_get_node(ld->doc, items[i]) : node;
        DT_FORWARD_IF_ERROR(set_list_item(ld, row, i, item));
    }
    *(int *)((char *)ld->out + row->count_offset) = n;
    return DT_OK;
}

/* ---- vary: one setting [a, b] or several [[], [a], [a, b]] -------------------------------- */

/* One name of a setting into *flags; `label` names it ("key 'vary', item 2" or
 * "key 'vary', item 2, name 1"). Each name at most once per setting. */
static enum dt_status add_vary_name(struct loader *ld, const struct key_row *row, const char *label,
                                    const yaml_node_t *node, unsigned *flags)
{
    if (node->type != YAML_SCALAR_NODE || is_null(node)) {
        char got[96];
        describe_node(got, sizeof got, node);
        return fail_at(ld, node->start_mark, "%s: expected %s, got %s", label,
                       type_info[row->type].item, got);
    }
    const char *s = (const char *)node->data.scalar.value;
    int bit = name_index(row->names, s);
    if (bit < 0) {
        char choices[256];
        format_choices(choices, sizeof choices, row->names, " or ");
        return fail_at(ld, node->start_mark, "%s: unknown value '%.64s' (expected %s)", label, s,
                       choices);
    }
    if (*flags & (1u << bit))
        return fail_at(ld, node->start_mark, "%s: '%s' is listed twice", label, s);
    *flags |= 1u << bit;
    return DT_OK;
}

/* The form is set by item 1: a name makes the list one setting (as is a lone scalar, for
 * --set vary=init; [] is the setting with no flags); a list makes every item a setting of
 * its own. Settings must differ as sets. Replaces the previous value as a whole. */
static enum dt_status set_vary_sets(struct loader *ld, const struct key_row *row,
                                    const yaml_node_t *node)
{
    unsigned *sets = (unsigned *)((char *)ld->out + row->offset);
    int *count = (int *)((char *)ld->out + row->count_offset);
    const int n_names = count_names(row->names);
    DT_ASSERT(row->size == (size_t)row->max_items * sizeof *sets);
    char label[MAX_PATH_ + 48];
    if (node->type == YAML_SCALAR_NODE && !is_null(node)) {
        unsigned flags = 0;
        key_label(label, sizeof label, row, 0);
        DT_FORWARD_IF_ERROR(add_vary_name(ld, row, label, node, &flags));
        memset(sets, 0, row->size);
        sets[0] = flags;
        *count = 1;
        return DT_OK;
    }
    if (node->type != YAML_SEQUENCE_NODE) return fail_type(ld, row, -1, node);
    const yaml_node_item_t *items = node->data.sequence.items.start;
    const int n = (int)(node->data.sequence.items.top - items);
    const yaml_node_t *first = n ? yaml_document_get_node(ld->doc, items[0]) : NULL;
    const bool several = first && first->type == YAML_SEQUENCE_NODE;
    if (!several && n > n_names) /* a longer list of names must repeat one */
        return fail_at(ld, node->start_mark, "key '%s': expected 0 to %d items, got %d", row->path,
                       n_names, n);
    if (several && n > row->max_items)
        return fail_at(ld, node->start_mark, "key '%s': expected %d to %d settings, got %d",
                       row->path, row->min_items, row->max_items, n);
    unsigned got[DT_MAX_VARY_SETS] = {0};
    for (int i = 0; i < n; i++) {
        const yaml_node_t *item = yaml_document_get_node(ld->doc, items[i]);
        key_label(label, sizeof label, row, i);
        if (!several) {
            if (item->type == YAML_SEQUENCE_NODE)
                return fail_at(ld, item->start_mark,
                               "%s: expected a name like item 1, got a "
                               "list (write one setting [a, b] or several [[a], [a, b]])",
                               label);
            DT_FORWARD_IF_ERROR(add_vary_name(ld, row, label, item, &got[0]));
            continue;
        }
        if (item->type != YAML_SEQUENCE_NODE) {
            char what[96];
            describe_node(what, sizeof what, item);
            return fail_at(ld, item->start_mark,
                           "%s: expected a list of names like item 1, got "
                           "%s (write one setting [a, b] or several [[a], [a, b]])",
                           label, what);
        }
        const yaml_node_item_t *names = item->data.sequence.items.start;
        const int m = (int)(item->data.sequence.items.top - names);
        for (int j = 0; j < m; j++) {
            char name_label[sizeof label + 32];
            snprintf(name_label, sizeof name_label, "%s, name %d", label, j + 1);
            DT_FORWARD_IF_ERROR(add_vary_name(ld, row, name_label,
                                              yaml_document_get_node(ld->doc, names[j]), &got[i]));
        }
        for (int k = 0; k < i; k++)
            if (got[k] == got[i])
                return fail_at(ld, item->start_mark, "%s: the same setting as item %d", label,
                               k + 1);
    }
    *count = several ? n : 1;
    memcpy(sets, got, sizeof got);
    return DT_OK;
}

/* ---- matrix: [{name: NAME, set: {DOTTED.KEY: VALUE, ...}}, ...] ----------------------------- */

static enum dt_status fail_unknown(struct loader *ld, yaml_mark_t mark, const char *path);

/* An entry's name: the experiment-name rule, and a usable folder name. */
static enum dt_status set_entry_name(struct loader *ld, const char *label, const yaml_node_t *v,
                                     char field[DT_NAME_MAX])
{
    const char *s = NULL;
    DT_FORWARD_IF_ERROR(policy_scalar(ld, label, "'name'", v, "a name", &s));
    size_t len = strlen(s);
    if (len == 0) return fail_at(ld, v->start_mark, "%s: 'name': must not be empty", label);
    if (len >= DT_NAME_MAX)
        return fail_at(ld, v->start_mark,
                       "%s: 'name': value is %zu characters long; at most "
                       "%d allowed",
                       label, len, DT_NAME_MAX - 1);
    char what[MAX_PATH_ + 48];
    snprintf(what, sizeof what, "%s: 'name'", label);
    DT_FORWARD_IF_ERROR(check_name_chars(ld, what, v, s));
    if (strcmp(s, ".") == 0 || strcmp(s, "..") == 0)
        return fail_at(ld, v->start_mark, "%s: 'name': '%s' cannot name a folder", label, s);
    memcpy(field, s, len + 1);
    return DT_OK;
}

/* An entry's `set`: a mapping whose keys are dotted keys or sections, exactly what a --set
 * may name, given once each; `name` (the entry's own) and `matrix` cannot be set there.
 * The values are checked when the entry is resolved (apply_entry_set). */
static enum dt_status check_entry_set(struct loader *ld, const char *label, const yaml_node_t *set)
{
    if (set->type != YAML_MAPPING_NODE) {
        char got[96];
        describe_node(got, sizeof got, set);
        return fail_at(ld, set->start_mark,
                       "%s: 'set': expected a mapping {DOTTED.KEY: VALUE, "
                       "...}, got %s",
                       label, got);
    }
    const yaml_node_pair_t *pairs = set->data.mapping.pairs.start;
    const int n = (int)(set->data.mapping.pairs.top - pairs);
    for (int j = 0; j < n; j++) {
        const yaml_node_t *k = yaml_document_get_node(ld->doc, pairs[j].key);
        char set_label[MAX_PATH_ + 48];
        snprintf(set_label, sizeof set_label, "%s: 'set'", label);
        const char *path;
        DT_FORWARD_IF_ERROR(pair_key(ld, set, j, set_label, &path));
        if (strcmp(path, "name") == 0)
            return fail_at(ld, k->start_mark,
                           "%s: 'set': key 'name' cannot be set in a matrix "
                           "entry (the entry's 'name' names its experiment)",
                           label);
        if (strcmp(path, "matrix") == 0)
            return fail_at(ld, k->start_mark,
                           "%s: 'set': key 'matrix' cannot be set in a matrix "
                           "entry (entries do not nest)",
                           label);
        if (path[0] == '\0' || strlen(path) >= MAX_PATH_ || strlen(path) != k->data.scalar.length ||
            !(find_key(path) || is_section(path)))
            return fail_unknown(ld, k->start_mark, path);
    }
    return DT_OK;
}

/* One entry: a mapping with 'name' (required) and 'set' (optional), nothing else. Names
 * are unique; entries before `i` are set. The `set` of the entry being resolved is kept
 * for apply_entry_set. */
static enum dt_status set_matrix_entry(struct loader *ld, const struct key_row *row, int i,
                                       const yaml_node_t *item)
{
    char(*names)[DT_NAME_MAX] = (char(*)[DT_NAME_MAX])((char *)ld->out + row->offset);
    char label[MAX_PATH_ + 32];
    key_label(label, sizeof label, row, i);
    if (item->type != YAML_MAPPING_NODE) return fail_type(ld, row, i, item);
    const yaml_node_pair_t *pairs = item->data.mapping.pairs.start;
    const int n = (int)(item->data.mapping.pairs.top - pairs);
    const yaml_node_t *name = NULL, *set = NULL;
    for (int j = 0; j < n; j++) {
        const yaml_node_t *k = yaml_document_get_node(ld->doc, pairs[j].key);
        const yaml_node_t *v = yaml_document_get_node(ld->doc, pairs[j].value);
        const char *key;
        DT_FORWARD_IF_ERROR(pair_key(ld, item, j, label, &key));
        if (strcmp(key, "name") == 0) name = v;
        else if (strcmp(key, "set") == 0) set = v;
        else
            return fail_at(ld, k->start_mark,
                           "%s: unknown key '%.64s' (an entry has 'name' and "
                           "'set')",
                           label, key);
    }
    if (!name) return fail_at(ld, item->start_mark, "%s: missing 'name'", label);
    DT_FORWARD_IF_ERROR(set_entry_name(ld, label, name, names[i]));
    for (int j = 0; j < i; j++)
        if (strcmp(names[j], names[i]) == 0)
            return fail_at(ld, name->start_mark, "%s: duplicate entry name '%s' (items %d and %d)",
                           label, names[i], j + 1, i + 1);
    if (set) DT_FORWARD_IF_ERROR(check_entry_set(ld, label, set));
    if (i == ld->entry) ld->entry_set = set;
    return DT_OK;
}

/* Only the config file lists entries: a --set cannot (precedence would be ill-defined). */
static enum dt_status set_matrix(struct loader *ld, const struct key_row *row,
                                 const yaml_node_t *node)
{
    if (!ld->file_pass)
        return fail_at(ld, node->start_mark,
                       "key 'matrix' cannot be given with --set; list the "
                       "entries in the config file (`detrain run --only NAME,...` runs some)");
    if (node->type != YAML_SEQUENCE_NODE) return fail_type(ld, row, -1, node);
    const yaml_node_item_t *items = node->data.sequence.items.start;
    const int n = (int)(node->data.sequence.items.top - items);
    if (n < row->min_items || n > row->max_items)
        return fail_at(ld, node->start_mark, "key '%s': expected %d to %d items, got %d", row->path,
                       row->min_items, row->max_items, n);
    ld->entry_set = NULL;
    for (int i = 0; i < n; i++) {
        const yaml_node_t *item = yaml_document_get_node(ld->doc, items[i]);
        DT_FORWARD_IF_ERROR(set_matrix_entry(ld, row, i, item));
    }
    *(int *)((char *)ld->out + row->count_offset) = n;
    return DT_OK;
}

static enum dt_status set_value(struct loader *ld, const struct key_row *row,
                                const yaml_node_t *node)
{
    char *field = (char *)ld->out + row->offset;
    switch (row->type) {
    case KEY_STRING: return set_string(ld, row, node, field);
    case KEY_INT_LIST:
    case KEY_POLICY_LIST: return set_list(ld, row, node);
    case KEY_LAYER_LIST: return set_layers(ld, row, node);
    case KEY_VARY_SETS: return set_vary_sets(ld, row, node);
    case KEY_MATRIX: return set_matrix(ld, row, node);
    default: return set_scalar(ld, row, node, field);
    }
}

/* ---- Walking mappings -------------------------------------------------------------------- */

/* Levenshtein distance of a[0, la) and b[0, lb) (longer than MAX_PATH_: far apart). */
static int edit_distance(const char *a, size_t la, const char *b, size_t lb)
{
    int d[MAX_PATH_ + 1];
    if (la > MAX_PATH_ || lb > MAX_PATH_) return 1000;
    for (size_t j = 0; j <= lb; j++) d[j] = (int)j;
    for (size_t i = 1; i <= la; i++) {
        int diag = d[0];
        d[0] = (int)i;
        for (size_t j = 1; j <= lb; j++) {
            int up = d[j];
            int best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best) best = up + 1;
            if (d[j - 1] + 1 < best) best = d[j - 1] + 1;
            d[j] = best;
            diag = up;
        }
    }
    return d[lb];
}

/* For an unknown dotted `path`, the known key or section that is probably meant: within
 * the deepest known section the path lies in, the child closest (edit distance <= 2) to
 * the next component, with the rest of the path kept when that names something known.
 * Writes "" when nothing is close. */
static void suggest_key(char *buf, size_t size, const char *path)
{
    size_t slen = 0; /* path[0, slen) is the deepest known section ("" = root) */
    for (const char *dot = strchr(path, '.'); dot && is_section_n(path, (size_t)(dot - path));
         dot = strchr(dot + 1, '.'))
        slen = (size_t)(dot - path);
    size_t skip = slen ? slen + 1 : 0;
    const char *comp = path + skip, *after = comp + strcspn(comp, "."); /* after: "" or ".x" */

    int best = 3;
    const char *child = NULL;
    size_t child_len = 0;
    for (int i = 0; i < N_KEYS; i++) {
        if (slen && (strncmp(keys[i].path, path, slen) != 0 || keys[i].path[slen] != '.')) continue;
        const char *name = keys[i].path + skip;
        size_t n = strcspn(name, ".");
        int d = edit_distance(comp, (size_t)(after - comp), name, n);
        if (d < best && d < (int)n) {
            best = d;
            child = name;
            child_len = n;
        }
    }
    buf[0] = '\0';
    if (!child || size < 2 * MAX_PATH_) return;
    /* candidate = section "." child [after]; every piece is shorter than MAX_PATH_ */
    char cand[2 * MAX_PATH_];
    size_t tail = strlen(after);
    if (skip + child_len >= MAX_PATH_ || tail >= MAX_PATH_) return;
    memcpy(cand, path, skip);
    memcpy(cand + skip, child, child_len);
    memcpy(cand + skip + child_len, after, tail + 1);
    if (!(find_key(cand) || is_section(cand))) cand[skip + child_len] = '\0';
    memcpy(buf, cand, strlen(cand) + 1);
}

static enum dt_status fail_unknown(struct loader *ld, yaml_mark_t mark, const char *path)
{
    char hint[MAX_PATH_ * 2];
    suggest_key(hint, sizeof hint, path);
    if (hint[0]) return fail_at(ld, mark, "unknown key '%s'; did you mean '%s'?", path, hint);
    return fail_at(ld, mark, "unknown key '%s'", path);
}

static enum dt_status apply_mapping(struct loader *ld, const char *prefix, const yaml_node_t *map);

/* Apply `node` as the value of dotted `path` (a key or a section). `key_mark` locates
 * the key itself, for "unknown key". */
static enum dt_status apply_node(struct loader *ld, const char *path, yaml_mark_t key_mark,
                                 const yaml_node_t *node)
{
    const struct key_row *row = find_key(path);
    if (row) {
        ld->seen[row - keys] = true;
        ld->seen_at[row - keys].file = ld->src->file;
        location(ld, key_mark, &ld->seen_at[row - keys].line, &ld->seen_at[row - keys].column);
        return set_value(ld, row, node);
    }
    if (!is_section(path)) return fail_unknown(ld, key_mark, path);
    if (node->type != YAML_MAPPING_NODE) {
        char got[96];
        describe_node(got, sizeof got, node);
        return fail_at(ld, node->start_mark, "key '%s': expected a mapping of keys, got %s", path,
                       got);
    }
    return apply_mapping(ld, path, node);
}

static void record_section(struct loader *ld, const char *path, const yaml_node_t *map)
{
    if (!ld->record_sections) return;
    DT_ASSERT(ld->n_sections < MAX_SECTIONS_);
    struct section_mark *s = &ld->sections[ld->n_sections++];
    snprintf(s->path, sizeof s->path, "%s", path);
    location(ld, map->start_mark, &s->line, &s->column);
}

/* The key nodes of pairs [0, i) of `map`: is one spelled like key `k`? */
static const yaml_node_t *earlier_key(const struct loader *ld, const yaml_node_t *map, int i,
                                      const yaml_node_t *k)
{
    for (int j = 0; j < i; j++) {
        const yaml_node_t *kj =
            yaml_document_get_node(ld->doc, map->data.mapping.pairs.start[j].key);
        if (kj->type == YAML_SCALAR_NODE && kj->data.scalar.length == k->data.scalar.length &&
            memcmp(kj->data.scalar.value, k->data.scalar.value, k->data.scalar.length) == 0)
            return kj;
    }
    return NULL;
}

/* Apply every pair of a mapping found at section `prefix` ("" = root). Keys are plain
 * names; nesting is written as nested mappings, never as dots. */
static enum dt_status apply_mapping(struct loader *ld, const char *prefix, const yaml_node_t *map)
{
    record_section(ld, prefix, map);
    const yaml_node_pair_t *pairs = map->data.mapping.pairs.start;
    int n = (int)(map->data.mapping.pairs.top - pairs);
    for (int i = 0; i < n; i++) {
        const yaml_node_t *k = yaml_document_get_node(ld->doc, pairs[i].key);
        const yaml_node_t *v = yaml_document_get_node(ld->doc, pairs[i].value);
        if (k->type != YAML_SCALAR_NODE)
            return fail_at(ld, k->start_mark, "expected a key name in %s%s%s, got a %s",
                           prefix[0] ? "'" : "the top level", prefix, prefix[0] ? "'" : "",
                           k->type == YAML_MAPPING_NODE ? "mapping" : "list");
        const char *name = (const char *)k->data.scalar.value;
        char path[MAX_PATH_];
        snprintf(path, sizeof path, "%s%s%s", prefix, prefix[0] ? "." : "", name);
        const yaml_node_t *first = earlier_key(ld, map, i, k);
        if (first) {
            int line, column;
            location(ld, first->start_mark, &line, &column);
            return fail_at(ld, k->start_mark, "duplicate key '%s' (first given at %d:%d)", path,
                           line, column);
        }
        if (strchr(name, '.') || name[0] == '\0') return fail_unknown(ld, k->start_mark, path);
        DT_FORWARD_IF_ERROR(apply_node(ld, path, k->start_mark, v));
    }
    return DT_OK;
}

/* ---- Documents: the file, each --set value, each default --------------------------------- */

/* Line/column (0-based) of byte `offset` in `text`, for reader errors that carry no mark. */
static yaml_mark_t mark_at_offset(const char *text, size_t len, size_t offset)
{
    yaml_mark_t m = {0};
    for (size_t i = 0; i < offset && i < len; i++) {
        if (text[i] == '\n') m.line++, m.column = 0;
        else m.column++;
    }
    m.index = offset;
    return m;
}

static enum dt_status fail_syntax(struct loader *ld, const yaml_parser_t *p, const char *text,
                                  size_t len, const char *key)
{
    if (p->error == YAML_MEMORY_ERROR)
        return dt_error_set(ld->err, DT_ERR_NOMEM, "out of memory parsing YAML");
    yaml_mark_t mark = p->problem_mark;
    if (p->error == YAML_READER_ERROR) mark = mark_at_offset(text, len, p->problem_offset);
    char context[160] = "", label[MAX_PATH_ + 16] = "";
    if (p->context) {
        int line, column;
        location(ld, p->context_mark, &line, &column);
        snprintf(context, sizeof context, " (%s at %d:%d)", p->context, line, column);
    }
    if (key) snprintf(label, sizeof label, "key '%s': ", key);
    return fail_at(ld, mark, "%sYAML syntax error: %s%s", label,
                   p->problem ? p->problem : "unknown problem", context);
}

/* ---- Nesting bound: a pre-scan of the raw bytes, before libyaml sees them ----------------- */

/* The deepest nesting of lists and mappings a config may have (detrain's own need 6). libyaml's
 * scanner takes time quadratic in the depth of flow collections ("[[[[...": 40 s of CPU at
 * 100,000 levels), so the bound is checked over the raw text first, in one linear pass. */
#define CONFIG_MAX_DEPTH 64

/* The pre-scan's state. Block collections are kept as a stack of 2 x their column (+1 for a
 * list entry "- ", so that a list under a key at the same indentation nests one deeper);
 * flow collections ('[' '{') are counted. The depth is their sum. */
struct depth_scan {
    const char *t;
    size_t len;
    int stack[CONFIG_MAX_DEPTH + 1], top, flow;
    size_t line_begin, last_sig; /* where the current line starts; its last significant byte */
    int line_col;                /* its indentation */
    int block_scalar;            /* indentation of the line that opened a '|' / '>' scalar, or -1 */
    size_t too_deep;             /* offset of the opening past the bound; len when none */
};

/* May a token (a quote, a flow opening, a comment) start at t[i]? After a line start,
 * whitespace or an indicator; not inside a plain word such as "x[1]" or "it's". */
static bool token_start(const char *t, size_t i)
{
    if (i == 0) return true;
    const char c = t[i - 1];
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == ',' || c == '[' || c == '{' ||
           c == ':' || c == '-' || c == '?';
}

/* Past a quoted scalar starting at t[i] ('...' with '' inside, "..." with \ escapes). */
static size_t skip_quoted(const char *t, size_t len, size_t i)
{
    const char q = t[i++];
    while (i < len) {
        if (q == '"' && t[i] == '\\') i += 2;
        else if (t[i] == q && q == '\'' && i + 1 < len && t[i + 1] == '\'') i += 2;
        else if (t[i] == q) return i + 1;
        else i++;
    }
    return len;
}

static bool is_blank_char(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

/* A block collection at `level` (2 x column, +1 for a list entry) opened at offset `at`. */
static void depth_push(struct depth_scan *s, int level, size_t at)
{
    while (s->top > 0 && s->stack[s->top - 1] >= level) s->top--;
    if (s->top + s->flow >= CONFIG_MAX_DEPTH) {
        if (s->too_deep == s->len) s->too_deep = at;
        return;
    }
    s->stack[s->top++] = level;
}

/* Does the line from t[p] hold a mapping key ("key:" then a space or its end)? */
static bool line_has_key(const struct depth_scan *s, size_t p)
{
    if (p < s->len && (s->t[p] == '[' || s->t[p] == '{')) return false;
    while (p < s->len && s->t[p] != '\n') {
        const char c = s->t[p];
        if ((c == '\'' || c == '"') && token_start(s->t, p)) {
            p = skip_quoted(s->t, s->len, p);
            continue;
        }
        if (c == '#' && token_start(s->t, p) && (p == 0 || is_blank_char(s->t[p - 1])))
            return false;
        if (c == ':' && (p + 1 == s->len || is_blank_char(s->t[p + 1]))) return true;
        p++;
    }
    return false;
}

/* A new line outside flow collections, at t[i]: the lines of an open block scalar skipped,
 * then its "- " entries and its mapping key pushed. Returns where the scan goes on. */
static size_t depth_line(struct depth_scan *s, size_t i)
{
    for (;;) {
        int col = 0;
        while (i + (size_t)col < s->len && s->t[i + (size_t)col] == ' ') col++;
        const size_t p = i + (size_t)col;
        const bool blank = p >= s->len || s->t[p] == '\n' || s->t[p] == '\r';
        if (s->block_scalar >= 0 && p < s->len && (blank || col > s->block_scalar)) {
            while (i < s->len && s->t[i] != '\n') i++; /* a line of the scalar's text */
            if (i < s->len) i++;
            continue;
        }
        s->block_scalar = -1;
        s->line_begin = i;
        s->line_col = col;
        s->last_sig = s->len;
        if (blank || s->t[p] == '#') return p;
        break;
    }
    size_t p = i + (size_t)s->line_col;
    while (p < s->len && s->t[p] == '-' && (p + 1 == s->len || is_blank_char(s->t[p + 1]))) {
        depth_push(s, 2 * (int)(p - i) + 1, p);
        for (p++; p < s->len && s->t[p] == ' ';) p++;
    }
    if (line_has_key(s, p)) depth_push(s, 2 * (int)(p - i), p);
    return p;
}

/* The end of a line outside flow collections: a last token '|' or '>' (with its indicators)
 * opens a block scalar, whose more-indented lines are text. */
static void depth_line_end(struct depth_scan *s)
{
    if (s->last_sig == s->len || s->last_sig < s->line_begin) return;
    size_t j = s->last_sig;
    while (j > s->line_begin &&
           (isdigit((unsigned char)s->t[j]) || s->t[j] == '+' || s->t[j] == '-'))
        j--;
    if ((s->t[j] == '|' || s->t[j] == '>') && token_start(s->t, j)) s->block_scalar = s->line_col;
}

/* Refuse text nested deeper than CONFIG_MAX_DEPTH, at the opening past the bound. */
static enum dt_status check_depth(struct loader *ld, const char *t, size_t len, const char *key)
{
    struct depth_scan s = {.t = t, .len = len, .block_scalar = -1, .too_deep = len};
    size_t i = depth_line(&s, 0);
    while (i < len && s.too_deep == len) {
        const char c = t[i];
        if (c == '\n') {
            if (s.flow == 0) depth_line_end(&s);
            i = s.flow == 0 ? depth_line(&s, i + 1) : i + 1;
        } else if ((c == '\'' || c == '"') && token_start(t, i)) {
            i = skip_quoted(t, len, i);
            s.last_sig = i - 1;
        } else if (c == '#' && (i == 0 || is_blank_char(t[i - 1]))) {
            while (i < len && t[i] != '\n') i++; /* a comment */
        } else {
            if ((c == '[' || c == '{') && (s.flow > 0 || token_start(t, i))) {
                if (s.top + s.flow >= CONFIG_MAX_DEPTH) s.too_deep = i;
                s.flow++;
            } else if ((c == ']' || c == '}') && s.flow > 0) {
                s.flow--;
            }
            if (!is_blank_char(c)) s.last_sig = i;
            i++;
        }
    }
    if (s.too_deep == len) return DT_OK;
    return fail_at(ld, mark_at_offset(t, len, s.too_deep),
                   "%s%s%snested deeper than %d levels (lists and mappings inside one another; a "
                   "detrain config needs a few): flatten it",
                   key ? "key '" : "", key ? key : "", key ? "': " : "", CONFIG_MAX_DEPTH);
}

/* Parse `text` as at most one YAML document. On DT_OK the caller owns *doc (which may have
 * no root node: empty input) and must yaml_document_delete it; on error nothing is held. */
static enum dt_status parse_yaml(struct loader *ld, yaml_document_t *doc, const char *text,
                                 size_t len, const char *key)
{
    DT_FORWARD_IF_ERROR(check_depth(ld, text, len, key)); /* before libyaml's scanner */
    yaml_parser_t parser;
    if (!yaml_parser_initialize(&parser))
        return dt_error_set(ld->err, DT_ERR_NOMEM, "out of memory starting the YAML parser");
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    enum dt_status st = DT_OK;
    if (!yaml_parser_load(&parser, doc)) { /* libyaml has freed the partial document */
        st = fail_syntax(ld, &parser, text, len, key);
    } else if (yaml_document_get_root_node(doc)) {
        yaml_document_t extra; /* a second document would be silently ignored: refuse it */
        if (!yaml_parser_load(&parser, &extra)) {
            st = fail_syntax(ld, &parser, text, len, key);
        } else {
            if (yaml_document_get_root_node(&extra))
                st = fail_at(ld, extra.start_mark,
                             "%s%s%sexpected one YAML document, found a "
                             "second one",
                             key ? "key '" : "", key ? key : "", key ? "': " : "");
            yaml_document_delete(&extra);
        }
        if (st != DT_OK) yaml_document_delete(doc);
    }
    yaml_parser_delete(&parser);
    return st;
}

/* Largest config file read (a YAML config or a results folder's config.json is a few KiB;
 * the bound keeps a wrong path, e.g. a huge log, from being read whole). */
#define CONFIG_MAX_BYTES ((size_t)16 << 20)

/* Read a whole config file (a regular file, at most CONFIG_MAX_BYTES) into a NUL-terminated
 * buffer the caller frees. */
static enum dt_status read_file(const char *path, char **data, size_t *len, struct dt_error *err)
{
    return dt_read_regular_file(data, len, path, "a config", CONFIG_MAX_BYTES, err);
}

static enum dt_status apply_root(struct loader *ld)
{
    const yaml_node_t *root = yaml_document_get_root_node(ld->doc);
    if (!root || is_null(root))
        return fail_at(ld, root ? root->start_mark : ld->doc->start_mark,
                       "empty configuration (expected a mapping with at least 'name', "
                       "'model.kind' and 'train.steps')");
    if (root->type != YAML_MAPPING_NODE) {
        char got[96];
        describe_node(got, sizeof got, root);
        return fail_at(ld, root->start_mark, "the configuration must be a mapping of keys, got %s",
                       got);
    }
    return apply_mapping(ld, "", root);
}

/* After the file's keys: the `set` pairs of the matrix entry being resolved, in the order
 * written, each applied as a --set of that key would be (the nodes are the file's, so
 * errors point into the file). */
static enum dt_status apply_entry_set(struct loader *ld, const char *path)
{
    if (ld->entry >= ld->out->n_matrix)
        return dt_error_set(ld->err, DT_ERR_USAGE, "%s: no matrix entry %d (the config has %d)",
                            path, ld->entry + 1, ld->out->n_matrix);
    const yaml_node_t *set = ld->entry_set;
    if (!set) return DT_OK;
    const yaml_node_pair_t *pairs = set->data.mapping.pairs.start;
    const int n = (int)(set->data.mapping.pairs.top - pairs);
    for (int j = 0; j < n; j++) {
        const yaml_node_t *k = yaml_document_get_node(ld->doc, pairs[j].key);
        const yaml_node_t *v = yaml_document_get_node(ld->doc, pairs[j].value);
        DT_FORWARD_IF_ERROR(apply_node(ld, (const char *)k->data.scalar.value, k->start_mark, v));
    }
    return DT_OK;
}

static enum dt_status load_file(struct loader *ld, const char *path)
{
    char *text = NULL;
    size_t len = ld->text_len;
    if (!ld->text) DT_FORWARD_IF_ERROR(read_file(path, &text, &len, ld->err));
    struct source src = {.file = path};
    yaml_document_t doc;
    ld->src = &src;
    ld->doc = &doc;
    ld->record_sections = true;
    ld->file_pass = true;
    enum dt_status st = parse_yaml(ld, &doc, text ? text : ld->text, len, NULL);
    if (st == DT_OK) {
        st = apply_root(ld);
        ld->record_sections = false;
        ld->file_pass = false;
        if (st == DT_OK && ld->entry >= 0) st = apply_entry_set(ld, path);
        yaml_document_delete(&doc);
    }
    free(text);
    ld->record_sections = false;
    ld->file_pass = false;
    ld->entry_set = NULL;
    ld->doc = NULL;
    return st;
}

/* Apply YAML `text` to dotted `path`; the text's marks are shifted by src. */
static enum dt_status apply_text(struct loader *ld, const struct source *src, const char *path,
                                 const char *text)
{
    yaml_document_t doc;
    ld->src = src;
    ld->doc = &doc;
    DT_FORWARD_IF_ERROR(parse_yaml(ld, &doc, text, strlen(text), path));
    const yaml_node_t *root = yaml_document_get_root_node(&doc);
    yaml_mark_t start = {0};
    enum dt_status st = root ? apply_node(ld, path, start, root)
                             : fail_at(ld, start, "key '%s': no value given", path);
    yaml_document_delete(&doc);
    ld->doc = NULL;
    return st;
}

/* One override "key.path=value"; `index` is its 0-based position among the sets. The
 * error location is "--set:<index+1>:<column in the assignment>". */
static enum dt_status apply_set(struct loader *ld, int index, const char *assign)
{
    struct source src = {.file = "--set", .line = index + 1};
    ld->src = &src;
    yaml_mark_t start = {0};
    const char *eq = strchr(assign, '=');
    if (!eq) return fail_at(ld, start, "expected key.path=value, got '%.200s'", assign);
    size_t b = 0, e = (size_t)(eq - assign);
    while (b < e && isspace((unsigned char)assign[b])) b++;
    while (e > b && isspace((unsigned char)assign[e - 1])) e--;
    char key[MAX_PATH_];
    snprintf(key, sizeof key, "%.*s", (int)(e - b), assign + b);
    src.col_off = (int)b;
    if (e == b || e - b >= sizeof key || !(find_key(key) || is_section(key)))
        return fail_unknown(ld, start, key);
    src.col_off = (int)(eq - assign) + 1;
    return apply_text(ld, &src, key, eq + 1);
}

/* Every default goes through the same parser and setters as the file. A default that
 * fails its own row is a bug in the table. */
static void apply_defaults(struct dt_experiment *out)
{
    struct dt_error err;
    struct loader ld = {.out = out, .err = &err};
    struct source src = {.file = "<default>"};
    for (int i = 0; i < N_KEYS; i++) {
        if (!keys[i].def) continue;
        if (apply_text(&ld, &src, keys[i].path, keys[i].def) != DT_OK) DT_ASSERT_MSG(0, err.msg);
    }
}

/* A required key that neither the file nor a --set gave is reported at the start of the
 * mapping that should have held it (or of its closest enclosing mapping in the file).
 * `only`: check that key alone (NULL = every key). */
static enum dt_status check_required(const struct loader *ld, const char *path, const char *only)
{
    for (int i = 0; i < N_KEYS; i++) {
        if (keys[i].def || (keys[i].flags & KEY_OPTIONAL) || ld->seen[i]) continue;
        if (only && strcmp(keys[i].path, only) != 0) continue;
        const struct section_mark *at = NULL;
        for (int s = 0; s < ld->n_sections; s++) {
            const struct section_mark *m = &ld->sections[s];
            if (path_in_section(keys[i].path, m->path) &&
                (!at || strlen(m->path) > strlen(at->path)))
                at = m;
        }
        return dt_error_set_at(ld->err, DT_ERR_CONFIG, path, at ? at->line : 1, at ? at->column : 1,
                               "missing required key '%s'", keys[i].path);
    }
    return DT_OK;
}

/* Keys that only some model kinds read (their rows in nets/models.h list them). The loader
 * refuses them for another kind (the user would believe they took effect); the JSON writer
 * leaves them out, so that its output loads back. */
static bool key_applies(const struct key_row *row, enum dt_model_kind kind)
{
    return dt_model_kind_reads(kind, row->path);
}

/* The optimizer's own keys: momentum for sgd; beta1, beta2 and eps for adamw. */
static const char *const adamw_only[] = {"train.optimizer.beta1", "train.optimizer.beta2",
                                         "train.optimizer.eps"};
static bool optimizer_key_applies(const char *path, enum dt_optimizer_kind kind)
{
    if (strcmp(path, "train.optimizer.momentum") == 0) return kind == DT_OPTIMIZER_SGD;
    for (size_t i = 0; i < sizeof adamw_only / sizeof adamw_only[0]; i++)
        if (strcmp(path, adamw_only[i]) == 0) return kind == DT_OPTIMIZER_ADAMW;
    return true;
}

/* The flat layer list's items as the config wrote them: "item 3", "item 3, branch item 1". */
static void layer_labels(const struct dt_layer *L, int n, char (*labels)[96], const char **of)
{
    int end[DT_NET_MAX_LAYERS], parent[DT_NET_MAX_LAYERS], count[DT_NET_MAX_LAYERS + 1] = {0};
    int depth = 0;
    for (int i = 0; i < n; i++) {
        while (depth > 0 && end[depth - 1] < i) depth--; /* the blocks that ended */
        const int k = ++count[depth];
        if (depth == 0) snprintf(labels[i], sizeof labels[i], "item %d", k);
        else
            snprintf(labels[i], sizeof labels[i], "%.60s, branch item %d",
                     labels[parent[depth - 1]], k);
        of[i] = labels[i];
        if (L[i].kind == DT_LAYER_RESIDUAL && depth < DT_NET_MAX_LAYERS) {
            end[depth] = i + L[i].block;
            parent[depth] = i;
            count[++depth] = 0;
        }
    }
}

/* Reported where the key was set. */
static enum dt_status check_model_keys(const struct loader *ld)
{
    const enum dt_model_kind kind = ld->out->model.kind;
    /* the local estimator draws once per example unless told otherwise */
    if (ld->out->model.estimator == DT_BNN_LOCAL && !ld->seen[find_key("model.samples") - keys])
        ld->out->model.samples = 1;
    for (int r = 0; r < N_KEYS; r++) {
        if (!ld->seen[r] || key_applies(&keys[r], kind)) continue;
        char which[128];
        dt_model_kinds_reading(which, sizeof which, keys[r].path);
        return dt_error_set_at(ld->err, DT_ERR_CONFIG, ld->seen_at[r].file, ld->seen_at[r].line,
                               ld->seen_at[r].column,
                               "key '%s' applies to model.kind %s only, not %s", keys[r].path,
                               which, dt_model_kind_names[kind]);
    }
    /* the data a kind reads: text for gpt, images for the others */
    const bool text = strcmp(ld->out->dataset.name, "text") == 0;
    if (text != dt_model_kind(kind)->reads_text) {
        const int rd = (int)(find_key("dataset.name") - keys),
                  rk = (int)(find_key("model.kind") - keys);
        const int at = ld->seen[rd] ? rd : rk;
        return dt_error_set_at(ld->err, DT_ERR_CONFIG, ld->seen_at[at].file, ld->seen_at[at].line,
                               ld->seen_at[at].column,
                               "key '%s': model.kind %s trains on %s, but dataset.name is %s",
                               keys[at].path, dt_model_kind_names[kind],
                               dt_model_kind(kind)->reads_text ? "text (dataset.name: text)"
                                                               : "images (dataset.name: "
                                                                 "fashion-mnist)",
                               ld->out->dataset.name);
    }
    if (kind == DT_MODEL_NET && ld->out->model.n_network == 0) {
        const int rk = (int)(find_key("model.kind") - keys);
        return dt_error_set_at(ld->err, DT_ERR_CONFIG, ld->seen_at[rk].file, ld->seen_at[rk].line,
                               ld->seen_at[rk].column,
                               "key 'model.kind': net needs model.network, its layers (e.g. "
                               "[flatten, {dense: 128}, relu, {dense: 10}])");
    }
    struct dt_error shape = {0}; /* the layers on the images: every shape fits */
    char labels[DT_NET_MAX_LAYERS][96];
    const char *label_of[DT_NET_MAX_LAYERS];
    if (kind == DT_MODEL_NET)
        layer_labels(ld->out->model.network, ld->out->model.n_network, labels, label_of);
    if (kind == DT_MODEL_NET && dt_net_check(DT_FASHION_MNIST_SIDE, DT_FASHION_MNIST_SIDE, 1,
                                             ld->out->model.network, ld->out->model.n_network,
                                             DT_FASHION_MNIST_CLASSES, label_of, &shape) != DT_OK) {
        const int rn = (int)(find_key("model.network") - keys);
        return dt_error_set_at(ld->err, DT_ERR_CONFIG, ld->seen_at[rn].file, ld->seen_at[rn].line,
                               ld->seen_at[rn].column,
                               "key 'model.network' (on %dx%dx1 images): %s", DT_FASHION_MNIST_SIDE,
                               DT_FASHION_MNIST_SIDE, shape.msg);
    }
    if (kind == DT_MODEL_GPT && ld->out->model.d_model % ld->out->model.heads != 0) {
        const int rd = (int)(find_key("model.d_model") - keys);
        const int r = ld->seen[rd] ? rd : (int)(find_key("model.heads") - keys);
        return dt_error_set_at(
            ld->err, DT_ERR_CONFIG, ld->seen_at[r].file, ld->seen_at[r].line, ld->seen_at[r].column,
            "key 'model.d_model': %" PRId64 " is not a multiple of model.heads (%" PRId64 ")",
            ld->out->model.d_model, ld->out->model.heads);
    }
    /* the optimizer's own keys */
    const enum dt_optimizer_kind ok = ld->out->train.optimizer.kind;
    for (int r = 0; r < N_KEYS; r++) {
        if (!ld->seen[r] || optimizer_key_applies(keys[r].path, ok)) continue;
        return dt_error_set_at(
            ld->err, DT_ERR_CONFIG, ld->seen_at[r].file, ld->seen_at[r].line, ld->seen_at[r].column,
            "key '%s' applies to train.optimizer.kind %s only, not %s", keys[r].path,
            ok == DT_OPTIMIZER_SGD ? "adamw" : "sgd", optimizer_kind_names[ok]);
    }
    /* vary: [epsilon] only means something when a model draws epsilon: in any setting. */
    const int rv = (int)(find_key("vary") - keys);
    for (int v = 0; v < ld->out->n_vary; v++)
        if ((ld->out->vary_sets[v] & DT_VARY_EPSILON) && !dt_model_kind(kind)->draws_epsilon)
            return dt_error_set_at(ld->err, DT_ERR_CONFIG, ld->seen_at[rv].file,
                                   ld->seen_at[rv].line, ld->seen_at[rv].column,
                                   "key 'vary': epsilon applies to model.kind bnn_mlp only, "
                                   "not %s",
                                   dt_model_kind_names[kind]);
    return DT_OK;
}

/* Defaults, the file (and the `set` of entry ld->entry when >= 0), then the --set
 * overrides: file < entry < command line. */
static enum dt_status load_layers(struct loader *ld, const char *path, const char *const *sets,
                                  int n_sets)
{
    struct dt_experiment *out = ld->out;
    memset(out, 0, sizeof *out);
    apply_defaults(out);
    size_t n = strlen(path);
    if (n >= sizeof out->source)
        return dt_error_set(ld->err, DT_ERR_IO,
                            "config path is %zu bytes long; at most %zu "
                            "allowed",
                            n, sizeof out->source - 1);
    memcpy(out->source, path, n + 1);
    DT_FORWARD_IF_ERROR(load_file(ld, path));
    for (int i = 0; i < n_sets; i++) DT_FORWARD_IF_ERROR(apply_set(ld, i, sets[i]));
    return DT_OK;
}

/* Every check of a complete experiment. */
/* math: tf32 and backend.graphs are GPU modes: a CPU run that asks for one is refused. */
static enum dt_status check_policies_device(const struct loader *ld)
{
    if (ld->out->backend.device != DT_DEVICE_CPU || ld->modelled) return DT_OK;
    const int gr = (int)(find_key("backend.graphs") - keys);
    if (ld->out->backend.graphs)
        return dt_error_set_at(ld->err, DT_ERR_CONFIG, ld->seen_at[gr].file, ld->seen_at[gr].line,
                               ld->seen_at[gr].column,
                               "key 'backend.graphs': CUDA graphs need backend.device: cuda (the "
                               "CPU's ops run as they are called: there is nothing to capture)");
    const int r = (int)(find_key("policies") - keys);
    for (int q = 0; q < ld->out->n_policies; q++)
        if (dt_math_tf32(&ld->out->policies[q]))
            return dt_error_set_at(ld->err, DT_ERR_CONFIG, ld->seen_at[r].file, ld->seen_at[r].line,
                                   ld->seen_at[r].column,
                                   "key 'policies': policy '%s' sets math: tf32, a GPU mode "
                                   "(TF32 tensor cores), but backend.device is cpu; the CPU's "
                                   "library products are math: fast",
                                   ld->out->policies[q].name);
    return DT_OK;
}

/* A result recorded before a key's default changed: its config.json (detrain writes every key
 * it has) lacks the key, and it ran with the old default. hash.digest: sha256 until the tree
 * digest became the default (issue 67). */
static void recorded_defaults(const struct loader *ld, const char *path)
{
    const char *base = strrchr(path, '/');
    if (strcmp(base ? base + 1 : path, "config.json") != 0) return;
    if (!ld->seen[find_key("hash.digest") - keys]) ld->out->hash.digest = DT_HASH_DIGEST_SHA256;
}

static enum dt_status check_experiment(const struct loader *ld, const char *path)
{
    DT_FORWARD_IF_ERROR(check_required(ld, path, NULL));
    recorded_defaults(ld, path);
    DT_FORWARD_IF_ERROR(check_policies_device(ld));
    return check_model_keys(ld);
}

static enum dt_status load_one(struct loader *ld, const char *path, const char *const *sets,
                               int n_sets)
{
    struct dt_experiment *out = ld->out;
    struct dt_error *err = ld->err;
    DT_FORWARD_IF_ERROR(load_layers(ld, path, sets, n_sets));
    if (out->n_matrix > 0) {
        const int r = (int)(find_key("matrix") - keys);
        return dt_error_set_at(err, DT_ERR_CONFIG, ld->seen_at[r].file, ld->seen_at[r].line,
                               ld->seen_at[r].column,
                               "key 'matrix': this config is a matrix of "
                               "%d experiments (%s%s); `detrain run` runs it, other commands "
                               "take one experiment",
                               out->n_matrix, out->matrix[0], out->n_matrix > 1 ? ", ..." : "");
    }
    return check_experiment(ld, path);
}

enum dt_status dt_config_load(struct dt_experiment *out, const char *path, const char *const *sets,
                              int n_sets, struct dt_error *err)
{
    struct loader ld = {.out = out, .err = err, .entry = -1};
    return load_one(&ld, path, sets, n_sets);
}

enum dt_status dt_config_load_modelled(struct dt_experiment *out, const char *path,
                                       const char *const *sets, int n_sets, struct dt_error *err)
{
    struct loader ld = {.out = out, .err = err, .entry = -1, .modelled = true};
    return load_one(&ld, path, sets, n_sets);
}

static enum dt_status load_matrix(struct loader *ld, const char *path, const char *const *sets,
                                  int n_sets)
{
    DT_FORWARD_IF_ERROR(load_layers(ld, path, sets, n_sets));
    if (ld->out->n_matrix == 0) return check_experiment(ld, path);
    return check_required(ld, path, "name"); /* it names the matrix's folder */
}

enum dt_status dt_config_load_matrix(struct dt_experiment *out, const char *path,
                                     const char *const *sets, int n_sets, struct dt_error *err)
{
    struct loader ld = {.out = out, .err = err, .entry = -1};
    return load_matrix(&ld, path, sets, n_sets);
}

/* dt_config_load_entry once ld->entry is known to be in range. */
static enum dt_status load_entry(struct loader *ld, const char *path, const char *const *sets,
                                 int n_sets)
{
    struct dt_experiment *out = ld->out;
    struct dt_error *err = ld->err;
    const int entry = ld->entry;
    enum dt_status st = load_layers(ld, path, sets, n_sets);
    if (st == DT_OK && out->n_matrix == 0)
        return dt_error_set(err, DT_ERR_USAGE, "%s: not a matrix config (no key 'matrix')", path);
    char name[DT_NAME_MAX] = "";
    if (out->n_matrix > entry) memcpy(name, out->matrix[entry], sizeof name);
    if (st == DT_OK) {
        memcpy(out->name, name, sizeof name); /* the entry names its experiment */
        ld->seen[find_key("name") - keys] = true;
        out->n_matrix = 0;
        memset(out->matrix, 0, sizeof out->matrix);
        st = check_experiment(ld, path);
    }
    if (st != DT_OK && name[0] && err) {
        size_t used = strlen(err->msg);
        snprintf(err->msg + used, sizeof err->msg - used, " (matrix entry '%s')", name);
    }
    return st;
}

enum dt_status dt_config_load_entry(struct dt_experiment *out, const char *path, int entry,
                                    const char *const *sets, int n_sets, struct dt_error *err)
{
    if (entry < 0 || entry >= DT_MAX_MATRIX)
        return dt_error_set(err, DT_ERR_USAGE, "%s: no matrix entry %d", path, entry + 1);
    struct loader ld = {.out = out, .err = err, .entry = entry};
    return load_entry(&ld, path, sets, n_sets);
}

enum dt_status dt_config_load_text(struct dt_experiment *out, const char *name, const char *text,
                                   size_t len, int entry, const char *const *sets, int n_sets,
                                   struct dt_error *err)
{
    DT_ASSERT(text != NULL || len == 0);
    if (entry >= DT_MAX_MATRIX)
        return dt_error_set(err, DT_ERR_USAGE, "%s: no matrix entry %d", name, entry + 1);
    struct loader ld = {.out = out,
                        .err = err,
                        .entry = entry < 0 ? -1 : entry,
                        .text = text ? text : "",
                        .text_len = len};
    return entry < 0 ? load_matrix(&ld, name, sets, n_sets) : load_entry(&ld, name, sets, n_sets);
}

/* ---- Output: resolved JSON and the Markdown reference ------------------------------------ */

/* The JSON is read back as YAML, which refuses some characters raw (C1 controls, U+FFFE,
 * U+FFFF) and folds others (U+0085, U+2028, U+2029: line breaks to YAML) that JSON takes
 * as they are. For the UTF-8 sequence at `p` (a NUL-terminated, valid UTF-8 string, as
 * libyaml gives): its length when it is one of those, its code point in *cp; else 0. */
static int yaml_unreadable(const unsigned char *p, unsigned *cp)
{
    if (p[0] == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f) {
        *cp = p[1];
        return 2;
    }
    if (p[0] == 0xe2 && p[1] == 0x80 && (p[2] == 0xa8 || p[2] == 0xa9)) {
        *cp = p[2] == 0xa8 ? 0x2028u : 0x2029u;
        return 3;
    }
    if (p[0] == 0xef && p[1] == 0xbf && (p[2] == 0xbe || p[2] == 0xbf)) {
        *cp = p[2] == 0xbe ? 0xfffeu : 0xffffu;
        return 3;
    }
    return 0;
}

static void json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '"': fputs("\\\"", f); break;
        case '\\': fputs("\\\\", f); break;
        case '\n': fputs("\\n", f); break;
        case '\r': fputs("\\r", f); break;
        case '\t': fputs("\\t", f); break;
        default: {
            unsigned cp;
            const int n = yaml_unreadable(p, &cp);
            if (*p < 0x20 || *p == 0x7f) {
                fprintf(f, "\\u%04x", *p);
            } else if (n > 0) {
                fprintf(f, "\\u%04x", cp);
                p += n - 1;
            } else {
                fputc(*p, f);
            }
            break;
        }
        }
    }
    fputc('"', f);
}

/* Bit flags as a list of their names, lowest bit first: ["init","data_order"]. */
static void json_flags(FILE *f, const char *const *names, unsigned flags)
{
    bool first = true;
    fputc('[', f);
    for (int i = 0; names[i]; i++) {
        if (!(flags & (1u << i))) continue;
        if (!first) fputc(',', f);
        json_string(f, names[i]);
        first = false;
    }
    fputc(']', f);
}

/* Layers [i, end) of a flat list as JSON, a residual's branch nested in it; returns end. */
static int json_layers(FILE *f, const struct dt_layer *layers, int i, int end)
{
    fputc('[', f);
    for (bool first = true; i < end; first = false) {
        const struct dt_layer *l = &layers[i++];
        const char *kind = dt_layer_kind_names[l->kind];
        if (!first) fputc(',', f);
        if (l->kind == DT_LAYER_RESIDUAL) {
            fputs("{\"residual\":", f);
            i = json_layers(f, layers, i, i + l->block);
            fprintf(f, ",\"shortcut\":\"%s\"}", l->projection ? "projection" : "identity");
        } else if (dt_layer_takes_window(l->kind) && !dt_layer_takes_units(l->kind)) {
            fprintf(f, "{\"%s\":%" PRId64 ",\"stride\":%" PRId64 ",\"pad\":%" PRId64 "}", kind,
                    l->kernel, l->stride, l->pad);
        } else if (l->kind == DT_LAYER_CONV) {
            fprintf(f,
                    "{\"%s\":%" PRId64 ",\"kernel\":%" PRId64 ",\"stride\":%" PRId64
                    ",\"pad\":%" PRId64 "}",
                    kind, l->units, l->kernel, l->stride, l->pad);
        } else if (dt_layer_takes_units(l->kind)) {
            fprintf(f, "{\"%s\":%" PRId64 "}", kind, l->units);
        } else if (dt_layer_takes_rate(l->kind)) {
            fprintf(f, "{\"%s\":%.17g}", kind, l->rate);
        } else {
            json_string(f, kind);
        }
    }
    fputc(']', f);
    return end;
}

static void json_value(FILE *f, const struct key_row *row, const struct dt_experiment *exp)
{
    const char *field = (const char *)exp + row->offset;
    int count = row->count_offset ? *(const int *)((const char *)exp + row->count_offset) : 0;
    switch (row->type) {
    case KEY_STRING: json_string(f, field); break;
    case KEY_INT64: fprintf(f, "%" PRId64, *(const int64_t *)field); break;
    case KEY_INT: fprintf(f, "%d", *(const int *)field); break;
    case KEY_UINT64: fprintf(f, "%" PRIu64, *(const uint64_t *)field); break;
    case KEY_DOUBLE: fprintf(f, "%.17g", *(const double *)field); break;
    case KEY_BOOL: fputs(*(const bool *)field ? "true" : "false", f); break;
    case KEY_ENUM: {
        unsigned u;
        memcpy(&u, field, sizeof u);
        DT_ASSERT(u < (unsigned)count_names(row->names));
        json_string(f, row->names[u]);
        break;
    }
    case KEY_INT_LIST:
        fputc('[', f);
        for (int i = 0; i < count; i++)
            fprintf(f, "%s%" PRId64, i ? "," : "", ((const int64_t *)field)[i]);
        fputc(']', f);
        break;
    case KEY_LAYER_LIST: /* names, or mappings with every window value written out */
        json_layers(f, (const struct dt_layer *)field, 0, count);
        break;
    case KEY_POLICY_LIST: /* every control of every policy, so run.json records them all */
        fputc('[', f);
        for (int i = 0; i < count; i++) {
            const struct dt_policy *p = &((const struct dt_policy *)field)[i];
            fputs(i ? ",{\"name\":" : "{\"name\":", f);
            json_string(f, p->name);
            fputs(",\"base\":", f);
            json_string(f, dt_level_name(p->base));
            for (int c = 0; c < dt_policy_control_count(); c++) {
                fprintf(f, ",\"%s\":", dt_policy_control_name(c));
                json_string(f, dt_policy_control_value(p, c));
            }
            fputc('}', f);
        }
        fputc(']', f);
        break;
    case KEY_VARY_SETS: /* one setting: a flat list, as written; several: a list of lists */
        DT_ASSERT(count >= 1 && count <= row->max_items);
        if (count > 1) fputc('[', f);
        for (int v = 0; v < count; v++) {
            if (v) fputc(',', f);
            json_flags(f, row->names, ((const unsigned *)field)[v]);
        }
        if (count > 1) fputc(']', f);
        break;
    default: DT_ASSERT_MSG(0, "json_value: unknown key type");
    }
}

/* Rows are grouped by section, so one pass closes the objects a row is not in and opens
 * the ones it is in ("train" then "optimizer" for train.optimizer.lr). Keys the model
 * kind does not read are left out: dt_config_load reads the output back unchanged. */
void dt_config_write_json(FILE *f, const struct dt_experiment *exp)
{
    char open[MAX_PATH_] = ""; /* dotted path of the open objects below the root */
    bool first[8] = {true};    /* per depth: nothing written yet in that object */
    int depth = 0;
    fputc('{', f);
    for (int i = 0; i < N_KEYS; i++) {
        if (!key_applies(&keys[i], exp->model.kind) || keys[i].type == KEY_MATRIX ||
            !optimizer_key_applies(keys[i].path, exp->train.optimizer.kind))
            continue;
        const char *path = keys[i].path, *leaf = strrchr(path, '.');
        leaf = leaf ? leaf + 1 : path;
        char section[MAX_PATH_];
        snprintf(section, sizeof section, "%.*s", leaf == path ? 0 : (int)(leaf - path - 1), path);
        while (depth > 0 && strcmp(open, section) != 0 && !path_in_section(section, open)) {
            char *dot = strrchr(open, '.');
            *(dot ? dot : open) = '\0';
            fputc('}', f);
            depth--;
        }
        while (strcmp(open, section) != 0) {
            const char *next = section + (open[0] ? strlen(open) + 1 : 0);
            int len = (int)strcspn(next, ".");
            fprintf(f, "%s\"%.*s\":{", first[depth] ? "" : ",", len, next);
            first[depth] = false;
            size_t used = strlen(open);
            snprintf(open + used, sizeof open - used, "%s%.*s", open[0] ? "." : "", len, next);
            DT_ASSERT(depth + 1 < (int)(sizeof first / sizeof first[0]));
            first[++depth] = true;
        }
        fprintf(f, "%s\"%s\":", first[depth] ? "" : ",", leaf);
        first[depth] = false;
        json_value(f, &keys[i], exp);
    }
    for (; depth > 0; depth--) fputc('}', f);
    fputc('}', f);
}

/* The "range / values" cell of the reference. */
static void reference_values(char *buf, size_t size, const struct key_row *row)
{
    char names[128];
    switch (row->type) {
    case KEY_STRING:
        if (row->names) format_choices(buf, size, row->names, ", ");
        else if (row->flags & KEY_NAME_CHARS)
            snprintf(buf, size, "%" PRId64 " to %zu characters from A-Z a-z 0-9 _ . -", row->lo,
                     row->size - 1);
        else snprintf(buf, size, "up to %zu characters", row->size - 1);
        break;
    case KEY_BOOL: snprintf(buf, size, "true or false (also yes/no, on/off)"); break;
    case KEY_ENUM: format_choices(buf, size, row->names, ", "); break;
    case KEY_INT_LIST:
        format_range(names, sizeof names, row);
        snprintf(buf, size, "%d to %d items, each in %s", row->min_items, row->max_items, names);
        break;
    case KEY_POLICY_LIST:
        format_levels(names, sizeof names, ", ");
        snprintf(buf, size,
                 "%d to %d items, each a level (%s) or a mapping {base: LEVEL, "
                 "CONTROL: VALUE, ..., name: NAME}; names unique",
                 row->min_items, row->max_items, names);
        break;
    case KEY_LAYER_LIST: {
        format_choices(names, sizeof names, dt_layer_kind_names, ", ");
        char plain[256] = ""; /* the kinds written as a bare name: they take nothing */
        for (int k = 0; k < DT_LAYER_KIND_COUNT; k++)
            if (!dt_layer_takes_units(k) && !dt_layer_takes_window(k) && !dt_layer_takes_rate(k) &&
                k != DT_LAYER_RESIDUAL)
                snprintf(plain + strlen(plain), sizeof plain - strlen(plain), "%s%s",
                         plain[0] ? ", " : "", dt_layer_kind_names[k]);
        snprintf(buf, size,
                 "%d to %d layers in all, each a name (%s) or a mapping: {dense: UNITS}, "
                 "{dropout: P}, {residual: [LAYERS], shortcut: identity|projection}, "
                 "{conv: FILTERS, kernel: K, stride: S, pad: P}, {maxpool|avgpool: K, stride: S, "
                 "pad: P} (kinds: %s)",
                 row->min_items, row->max_items, plain, names);
        break;
    }
    case KEY_VARY_SETS:
        format_choices(names, sizeof names, row->names, ", ");
        snprintf(buf, size,
                 "any of %s, no repeats; or a list of 1 to %d such lists "
                 "(settings), no two alike",
                 names, row->max_items);
        break;
    case KEY_MATRIX:
        snprintf(buf, size,
                 "%d to %d entries {name: NAME, set: {DOTTED.KEY: VALUE, ...}}; "
                 "names unique, 1 to %d characters from A-Z a-z 0-9 _ . -; set cannot hold "
                 "name or matrix",
                 row->min_items, row->max_items, DT_NAME_MAX - 1);
        break;
    default: format_range(buf, size, row); break;
    }
}

void dt_config_write_reference(FILE *f)
{
    fputs("| key | type | default | range / values | required | meaning |\n", f);
    fputs("|---|---|---|---|---|---|\n", f);
    for (int i = 0; i < N_KEYS; i++) {
        const struct key_row *row = &keys[i];
        char values[512];
        reference_values(values, sizeof values, row);
        const bool required = !row->def && !(row->flags & KEY_OPTIONAL);
        fprintf(f, "| `%s` | %s | %s%s%s | %s | %s | %s |\n", row->path, type_info[row->type].name,
                row->def ? "`" : "", row->def ? row->def : "", row->def ? "`" : "", values,
                required ? "yes" : "no", row->doc);
    }
}
