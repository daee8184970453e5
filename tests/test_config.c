/* Tests for harness/config: loading, defaults, every error class with its exact
 * file:line:column, --set overrides, and the JSON / Markdown outputs of the key table.
 * Fixtures live in tests/data/config/; each error fixture has one fault. */
#include "tests/check.h"

#include <errno.h>
#include <glob.h>
#include <time.h>

#include "core/util.h"
#include "harness/setup/config.h"

#define CFG(file) DT_TEST_DATA_DIR "/config/" file

static enum dt_status load(struct dt_experiment *e, const char *path, const char *const *sets,
                           int n_sets, struct dt_error *err)
{
    memset(err, 0, sizeof *err);
    return dt_config_load(e, path, sets, n_sets, err);
}

/* Load and expect DT_ERR_CONFIG at file:line:column, with `want` in the message. */
static void expect_error_at(const char *path, const char *const *sets, int n_sets, const char *file,
                            int line, int column, const char *want)
{
    struct dt_experiment e;
    struct dt_error err;
    int before = dt_check_failures_;
    CHECK_INT_EQ(load(&e, path, sets, n_sets, &err), DT_ERR_CONFIG);
    CHECK_INT_EQ(err.status, DT_ERR_CONFIG);
    CHECK_STR_EQ(err.file, file);
    CHECK_INT_EQ(err.line, line);
    CHECK_INT_EQ(err.column, column);
    CHECK_CONTAINS(err.msg, want);
    char prefix[1100];
    snprintf(prefix, sizeof prefix, "%s:%d:%d: ", file, line, column);
    CHECK(strncmp(err.msg, prefix, strlen(prefix)) == 0);
    if (dt_check_failures_ != before)
        fprintf(stderr, "  (loading %s; message: %s)\n", path, err.msg);
}

/* The same for a fixture expected to fail on its own. */
static void expect_file_error(const char *path, int line, int column, const char *want)
{
    expect_error_at(path, NULL, 0, path, line, column, want);
}

/* A --set that must fail at --set:<index>:<column>. Loaded over minimal.yaml. */
static void expect_set_error(const char *const *sets, int n_sets, int index, int column,
                             const char *want)
{
    expect_error_at(CFG("minimal.yaml"), sets, n_sets, "--set", index, column, want);
}

DT_TEST(load_full)
{
    struct dt_experiment e;
    struct dt_error err;
    CHECK_INT_EQ(load(&e, CFG("full.yaml"), NULL, 0, &err), DT_OK);
    CHECK_STR_EQ(e.name, "full-run_1.a");
    CHECK_STR_EQ(e.dataset.name, "fashion-mnist");
    CHECK_STR_EQ(e.dataset.path, "/data/fmnist");
    CHECK_INT_EQ(e.dataset.train_limit, 1000);
    CHECK_INT_EQ(e.dataset.test_limit, 500);
    CHECK_INT_EQ(e.model.kind, DT_MODEL_MLP);
    CHECK_INT_EQ(e.model.n_hidden, 3);
    CHECK_INT_EQ(e.model.hidden[0], 512);
    CHECK_INT_EQ(e.model.hidden[1], 256);
    CHECK_INT_EQ(e.model.hidden[2], 64);
    CHECK_INT_EQ(e.train.steps, 1234);
    CHECK_INT_EQ(e.train.batch, 32);
    CHECK_INT_EQ(e.train.optimizer.kind, DT_OPTIMIZER_SGD);
    CHECK(e.train.optimizer.lr == 0.125);
    CHECK(e.train.optimizer.momentum == 0.5);
    CHECK(e.train.optimizer.weight_decay == 0.0001);
    CHECK(e.train.seed == UINT64_MAX);
    CHECK_INT_EQ(e.train.eval_every, 100);
    CHECK_INT_EQ(e.backend.device, DT_DEVICE_CUDA);
    CHECK_INT_EQ(e.backend.threads, 8);
    CHECK_INT_EQ(e.n_policies, 3);
    CHECK_INT_EQ(e.policies[0].base, DT_LEVEL_FAST);
    CHECK_INT_EQ(e.policies[1].base, DT_LEVEL_RUN_TO_RUN);
    CHECK_INT_EQ(e.policies[2].base, DT_LEVEL_PORTABLE);
    CHECK_STR_EQ(e.policies[1].name, "run_to_run");
    CHECK_INT_EQ(e.replicas, 3);
    CHECK_INT_EQ(e.n_vary, 1);
    CHECK_INT_EQ(e.vary_sets[0], DT_VARY_INIT | DT_VARY_DATA_ORDER);
    CHECK_INT_EQ(e.hash.every, 10);
    CHECK(e.hash.per_tensor);
    CHECK_INT_EQ(e.hash.async, DT_HASH_ASYNC_OFF);
    CHECK_STR_EQ(e.source, CFG("full.yaml"));
}

DT_TEST(load_minimal_defaults)
{
    struct dt_experiment e;
    struct dt_error err;
    CHECK_INT_EQ(load(&e, CFG("minimal.yaml"), NULL, 0, &err), DT_OK);
    CHECK_STR_EQ(e.name, "q");
    CHECK_STR_EQ(e.dataset.name, "fashion-mnist");
    CHECK_STR_EQ(e.dataset.path, "");
    CHECK_INT_EQ(e.dataset.train_limit, 0);
    CHECK_INT_EQ(e.dataset.test_limit, 0);
    CHECK_INT_EQ(e.model.kind, DT_MODEL_MLP);
    CHECK_INT_EQ(e.model.n_hidden, 2);
    CHECK_INT_EQ(e.model.hidden[0], 256);
    CHECK_INT_EQ(e.model.hidden[1], 128);
    CHECK_INT_EQ(e.train.steps, 10);
    CHECK_INT_EQ(e.train.batch, 64);
    CHECK_INT_EQ(e.train.optimizer.kind, DT_OPTIMIZER_SGD);
    CHECK(e.train.optimizer.lr == 0.05);
    CHECK(e.train.optimizer.momentum == 0.9);
    CHECK(e.train.optimizer.weight_decay == 0.0);
    CHECK(e.train.seed == 0);
    CHECK_INT_EQ(e.train.eval_every, 0);
    CHECK_INT_EQ(e.backend.device, DT_DEVICE_CPU);
    CHECK_INT_EQ(e.backend.threads, 0);
    CHECK_INT_EQ(e.n_policies, 1);
    CHECK_INT_EQ(e.policies[0].base, DT_LEVEL_PORTABLE);
    CHECK_STR_EQ(e.policies[0].name, "portable");
    CHECK_INT_EQ(e.replicas, 1);
    CHECK_INT_EQ(e.n_vary, 1);
    CHECK_INT_EQ(e.vary_sets[0], 0);
    CHECK_INT_EQ(e.hash.every, 1);
    CHECK(!e.hash.per_tensor);
    CHECK_INT_EQ(e.hash.async, DT_HASH_ASYNC_AUTO);
    CHECK_INT_EQ(e.report.snapshots, 8);
    CHECK_INT_EQ(e.report.overhead_samples, 30);
    CHECK_INT_EQ(e.report.overhead_warmup, 5);
    CHECK_STR_EQ(e.source, CFG("minimal.yaml"));
}

/* hidden: [256, 128 (no ']') on line 4; libyaml stops at the next key's ':' (5:6) and
 * names the flow sequence opened at 4:11. */
DT_TEST(malformed_yaml)
{
    expect_file_error(CFG("malformed.yaml"), 5, 6,
                      "YAML syntax error: did not find expected ',' or ']' (while parsing a "
                      "flow sequence at 4:11)");
}

DT_TEST(unknown_key)
{
    struct dt_experiment e;
    struct dt_error err;
    CHECK_INT_EQ(load(&e, CFG("unknown_key.yaml"), NULL, 0, &err), DT_ERR_CONFIG);
    CHECK_STR_EQ(err.msg, CFG("unknown_key.yaml") ":5:3: unknown key 'train.stepz'; "
                                                  "did you mean 'train.steps'?");
    CHECK_INT_EQ(err.line, 5);
    CHECK_INT_EQ(err.column, 3);
}

DT_TEST(wrong_type_int)
{
    expect_file_error(CFG("wrong_type_int.yaml"), 5, 12,
                      "key 'train.steps': expected an integer, got 'ten'");
}

/* A mapping where a scalar belongs, and a scalar where a section's mapping belongs. */
DT_TEST(wrong_type_mapping)
{
    expect_file_error(CFG("wrong_type_mapping.yaml"), 6, 9,
                      "key 'train.optimizer.lr': expected a finite number, got a mapping");
    const char *sets[] = {"train.optimizer=3"};
    expect_set_error(sets, 1, 1, 17, "key 'train.optimizer': expected a mapping of keys, got '3'");
}

DT_TEST(out_of_range)
{
    expect_file_error(CFG("range_momentum.yaml"), 5, 25,
                      "key 'train.optimizer.momentum': value 1.5 is out of range [0, 1)");
    expect_file_error(CFG("range_replicas.yaml"), 4, 11,
                      "key 'replicas': value 0 is out of range [1, 64]");
    expect_file_error(CFG("range_batch.yaml"), 5, 12,
                      "key 'train.batch': value -64 is out of range [1, 65536]");
}

/* Reported at the mapping that should hold the key: train's (4:3) for train.steps; the
 * root mapping (3:1, after a comment and a blank line) for name. */
DT_TEST(missing_required)
{
    expect_file_error(CFG("missing_nested.yaml"), 4, 3, "missing required key 'train.steps'");
    expect_file_error(CFG("missing_top.yaml"), 3, 1, "missing required key 'name'");
}

DT_TEST(duplicate_key)
{
    expect_file_error(CFG("duplicate_key.yaml"), 6, 3,
                      "duplicate key 'train.steps' (first given at 4:3)");
}

DT_TEST(empty_file)
{
    expect_file_error(CFG("empty.yaml"), 1, 1, "empty configuration");
    expect_file_error(CFG("comments_only.yaml"), 1, 1, "empty configuration");
}

DT_TEST(root_not_mapping)
{
    expect_file_error(CFG("not_mapping.yaml"), 1, 1,
                      "the configuration must be a mapping of keys, got a list");
    expect_file_error(CFG("two_documents.yaml"), 4, 1,
                      "expected one YAML document, found a second one");
}

DT_TEST(file_missing)
{
    struct dt_experiment e;
    struct dt_error err;
    const char *path = CFG("no_such_file.yaml");
    CHECK_INT_EQ(load(&e, path, NULL, 0, &err), DT_ERR_IO);
    CHECK_INT_EQ(err.status, DT_ERR_IO);
    CHECK_CONTAINS(err.msg, path);
    CHECK_CONTAINS(err.msg, strerror(ENOENT));
}

DT_TEST(bad_policy)
{
    expect_file_error(CFG("bad_policy.yaml"), 4, 18,
                      "key 'policies', item 2: unknown determinism level 'quick'");
}

DT_TEST(duplicate_policy)
{
    expect_file_error(CFG("duplicate_policy.yaml"), 7, 5,
                      "key 'policies', item 3: duplicate policy name 'portable' (items 1 and 3)");
}

/* Check every control of `p` against a level with the given controls overridden:
 * `over` is {"control", "value", ...}, n pairs. */
static void expect_policy(const struct dt_policy *p, const char *name, enum dt_level base,
                          const char *const *over, int n)
{
    struct dt_policy want;
    dt_policy_from_level(&want, base);
    for (int i = 0; i < n; i++)
        CHECK_INT_EQ(dt_policy_set_control(&want, over[2 * i], over[2 * i + 1], NULL), DT_OK);
    CHECK_STR_EQ(p->name, name);
    CHECK_INT_EQ(p->base, base);
    CHECK(dt_policy_equal_controls(p, &want));
    for (int c = 0; c < dt_policy_control_count(); c++)
        CHECK_STR_EQ(dt_policy_control_value(p, c), dt_policy_control_value(&want, c));
}

/* Items are level names or mappings over a base level, in flow and block style; a
 * mapping without `name` is named after its base and the controls that differ. */
DT_TEST(policy_mappings)
{
    struct dt_experiment e;
    struct dt_error err;
    CHECK_INT_EQ(load(&e, CFG("policy_mappings.yaml"), NULL, 0, &err), DT_OK);
    if (err.msg[0]) fprintf(stderr, "  %s\n", err.msg);
    CHECK_INT_EQ(e.n_policies, 8);
    if (e.n_policies != 8) return;
    expect_policy(&e.policies[0], "fast", DT_LEVEL_FAST, NULL, 0);
    expect_policy(&e.policies[1], "run_to_run", DT_LEVEL_RUN_TO_RUN, NULL, 0);
    expect_policy(&e.policies[2], "portable", DT_LEVEL_PORTABLE, NULL, 0);
    const char *fixed[] = {"reduction", "fixed"};
    expect_policy(&e.policies[3], "fast+reduction=fixed", DT_LEVEL_FAST, fixed, 1);
    CHECK_INT_EQ(e.policies[3].reduction, DT_REDUCTION_FIXED);
    CHECK_INT_EQ(e.policies[3].atomics, DT_ATOMICS_FLOAT);
    const char *fast_math[] = {"math", "fast"};
    expect_policy(&e.policies[4], "portable+math=fast", DT_LEVEL_PORTABLE, fast_math, 1);
    const char *exact[] = {"atomics", "fixed_point"};
    expect_policy(&e.policies[5], "fast_exact_bias", DT_LEVEL_FAST, exact, 1);
    const char *two[] = {"threads", "any", "reduction", "unordered"};
    expect_policy(&e.policies[6], "portable+reduction=unordered+threads=any", DT_LEVEL_PORTABLE,
                  two, 2);
    expect_policy(&e.policies[7], "r2r.copy+1", DT_LEVEL_RUN_TO_RUN, NULL, 0);
}

/* --set goes through the same code: a flow list mixing names and mappings, or a single
 * mapping standing for a one-item list. */
DT_TEST(policy_mappings_set)
{
    struct dt_experiment e;
    struct dt_error err;
    const char *mixed[] = {"policies=[fast, {base: portable, math: fast}]"};
    CHECK_INT_EQ(load(&e, CFG("full.yaml"), mixed, 1, &err), DT_OK);
    CHECK_INT_EQ(e.n_policies, 2);
    const char *fast_math[] = {"math", "fast"};
    expect_policy(&e.policies[0], "fast", DT_LEVEL_FAST, NULL, 0);
    expect_policy(&e.policies[1], "portable+math=fast", DT_LEVEL_PORTABLE, fast_math, 1);
    const char *one[] = {"policies={base: run_to_run, rng: philox, name: r2r-philox}"};
    CHECK_INT_EQ(load(&e, CFG("policy_mappings.yaml"), one, 1, &err), DT_OK);
    CHECK_INT_EQ(e.n_policies, 1);
    const char *philox[] = {"rng", "philox"};
    expect_policy(&e.policies[0], "r2r-philox", DT_LEVEL_RUN_TO_RUN, philox, 1);
    const char *quoted[] = {"policies=[{base: 'fast', 'conv_algo': \"own\"}]"};
    CHECK_INT_EQ(load(&e, CFG("minimal.yaml"), quoted, 1, &err), DT_OK);
    const char *own[] = {"conv_algo", "own"};
    expect_policy(&e.policies[0], "fast+conv_algo=own", DT_LEVEL_FAST, own, 1);
}

/* Each error names the item and points at the node at fault. */
DT_TEST(policy_errors)
{
    expect_file_error(CFG("policy_unknown_control.yaml"), 7, 27,
                      "key 'policies', item 6: unknown control 'reductoin' (expected one of "
                      "reduction, atomics, rng, conv_algo, math, threads)");
    expect_file_error(CFG("policy_unknown_value.yaml"), 8, 31,
                      "key 'policies', item 4: control 'reduction': unknown value 'sorted' "
                      "(expected unordered, fixed, exact or pinned)");
    expect_file_error(CFG("policy_missing_base.yaml"), 6, 7,
                      "key 'policies', item 2: missing 'base' (the level to start from: fast, "
                      "run_to_run or portable)");

    const char *bad_base[] = {"policies=[fast, {math: fast, base: quick}]"};
    expect_set_error(bad_base, 1, 1, 36,
                     "key 'policies', item 2: 'base': unknown determinism "
                     "level 'quick' (expected fast, run_to_run or portable)");
    const char *list_base[] = {"policies={base: [fast]}"};
    expect_set_error(list_base, 1, 1, 17,
                     "key 'policies', item 1: 'base': expected a level "
                     "name, got a list");
    const char *no_base[] = {"policies=[{name: x}]"};
    expect_set_error(no_base, 1, 1, 11, "key 'policies', item 1: missing 'base'");
    /* an unknown control is reported before a missing base */
    const char *typo[] = {"policies=[{bsae: fast}]"};
    expect_set_error(typo, 1, 1, 12, "key 'policies', item 1: unknown control 'bsae'");
    const char *bad_value[] = {"policies=[portable, {base: fast, threads: all}]"};
    expect_set_error(bad_value, 1, 1, 43,
                     "key 'policies', item 2: control 'threads': unknown "
                     "value 'all' (expected any, fixed or independent)");
    const char *map_value[] = {"policies=[{base: fast, math: {x: 1}}]"};
    expect_set_error(map_value, 1, 1, 30,
                     "key 'policies', item 1: control 'math': expected a "
                     "value name, got a mapping");
    const char *null_value[] = {"policies=[{base: fast, math: }]"};
    expect_set_error(null_value, 1, 1, 30, "control 'math': expected a value name, got no value");
    /* math: tf32: not at base portable (the control's own refusal), not on the CPU */
    const char *tf32_portable[] = {"policies=[{base: portable, math: tf32}]"};
    expect_set_error(tf32_portable, 1, 1, 34,
                     "key 'policies', item 1: control 'math': 'tf32' is not allowed at base "
                     "portable");
    const char *tf32_cpu[] = {"policies=[fast, {base: fast, math: tf32}]"};
    expect_set_error(tf32_cpu, 1, 1, 10,
                     "key 'policies': policy 'fast+math=tf32' sets math: tf32, a GPU mode");
    /* backend.graphs: a CUDA mode, refused on the CPU where it was set; off by default */
    const char *graphs_cpu[] = {"backend.graphs=true"};
    expect_set_error(graphs_cpu, 1, 1, 16,
                     "key 'backend.graphs': CUDA graphs need backend.device: cuda");
    const char *graphs_cuda[] = {"backend.graphs=true", "backend.device=cuda"};
    struct dt_experiment ge;
    struct dt_error gerr;
    CHECK_INT_EQ(load(&ge, CFG("minimal.yaml"), graphs_cuda, 2, &gerr), DT_OK);
    CHECK(ge.backend.graphs);
    CHECK_INT_EQ(load(&ge, CFG("minimal.yaml"), NULL, 0, &gerr), DT_OK);
    CHECK(!ge.backend.graphs);
    struct dt_experiment e; /* a step modelled on a GPU (detrain cost) may ask for it */
    struct dt_error err;
    CHECK_INT_EQ(dt_config_load_modelled(&e, CFG("minimal.yaml"), tf32_cpu, 1, &err), DT_OK);
    CHECK_INT_EQ(e.policies[1].math, DT_MATH_TF32);
    const char *dup_key[] = {"policies=[{base: fast, math: strict, math: fast}]"};
    expect_set_error(dup_key, 1, 1, 38,
                     "key 'policies', item 1: duplicate key 'math' (first "
                     "given at 1:24)");
    const char *list_key[] = {"policies=[{base: fast, [math]: strict}]"};
    expect_set_error(list_key, 1, 1, 24, "key 'policies', item 1: expected a key name, got a list");
    const char *list_item[] = {"policies=[fast, [portable]]"};
    expect_set_error(list_item, 1, 1, 17,
                     "key 'policies', item 2: expected a level name or a "
                     "mapping {base: LEVEL, CONTROL: VALUE, ...}, got a list");
}

/* Names (given or automatic) must be unique: each names the policy's folder. A given
 * name is 1 to 63 characters of A-Z a-z 0-9 _ . + = - and not "." or "..". */
DT_TEST(policy_names)
{
    expect_file_error(CFG("policy_duplicate_name.yaml"), 7, 5,
                      "key 'policies', item 3: duplicate policy name 'fast' (items 1 and 3)");
    expect_file_error(CFG("policy_duplicate_explicit.yaml"), 7, 11,
                      "key 'policies', item 2: duplicate policy name 'fast+reduction=fixed' "
                      "(items 1 and 2)");
    const char *twice[] = {"policies=[{base: fast, math: strict}, run_to_run, "
                           "{base: fast, math: strict}]"};
    expect_set_error(twice, 1, 1, 51,
                     "key 'policies', item 3: duplicate policy name "
                     "'fast+math=strict' (items 1 and 3)");
    /* two names for the same controls are allowed */
    struct dt_experiment e;
    struct dt_error err;
    const char *alias[] = {"policies=[run_to_run, {base: run_to_run, name: again}]"};
    CHECK_INT_EQ(load(&e, CFG("minimal.yaml"), alias, 1, &err), DT_OK);
    CHECK_STR_EQ(e.policies[1].name, "again");
    CHECK(dt_policy_equal_controls(&e.policies[0], &e.policies[1]));

    const char *slash[] = {"policies={base: fast, name: a/b}"};
    expect_set_error(slash, 1, 1, 29,
                     "key 'policies', item 1: 'name': 'a/b' contains '/' at "
                     "position 2; allowed: A-Z a-z 0-9 _ . + = -");
    const char *space[] = {"policies={base: fast, name: 'a b'}"};
    expect_set_error(space, 1, 1, 29, "'name': 'a b' contains ' ' at position 2");
    const char *empty[] = {"policies={base: fast, name: ''}"};
    expect_set_error(empty, 1, 1, 29, "key 'policies', item 1: 'name': must not be empty");
    const char *dots[] = {"policies={base: fast, name: ..}"};
    expect_set_error(dots, 1, 1, 29, "'name': '..' cannot name a folder");
    /* the experiment's name is one folder too: not the current folder, its parent or an
     * option-like word (a name of '..' made --overwrite wipe the parent folder) */
    const char *up[] = {"name=.."};
    expect_set_error(up, 1, 1, 6, "key 'name': '..' cannot name a folder");
    const char *here[] = {"name=."};
    expect_set_error(here, 1, 1, 6, "key 'name': '.' cannot name a folder");
    const char *dash[] = {"name=-rf"};
    expect_set_error(dash, 1, 1, 6, "key 'name': '-rf' starts with '-'");
    const char *dotted[] = {"name=.hidden..ok"};
    CHECK_INT_EQ(load(&e, CFG("minimal.yaml"), dotted, 1, &err), DT_OK);
    char longname[128] = "policies={base: fast, name: ";
    size_t at = strlen(longname);
    memset(longname + at, 'n', 64);
    strcpy(longname + at + 64, "}");
    const char *toolong[] = {longname};
    expect_set_error(toolong, 1, 1, 29, "'name': value is 64 characters long; at most 63 allowed");
    memset(longname + at, 'n', 63);
    strcpy(longname + at + 63, "}");
    CHECK_INT_EQ(load(&e, CFG("minimal.yaml"), toolong, 1, &err), DT_OK);
    CHECK_INT_EQ(strlen(e.policies[0].name), 63);
    /* an automatic name longer than 63 characters asks for a name */
    const char *all[] = {"policies=[{base: run_to_run, reduction: unordered, atomics: float, "
                         "rng: philox, conv_algo: own, math: portable, threads: independent}]"};
    expect_set_error(all, 1, 1, 11,
                     "key 'policies', item 1: its automatic name "
                     "'run_to_run+reduction=unordered+atomics=float+rng=philox+");
    expect_set_error(all, 1, 1, 11, "would be longer than 63 characters; give the policy a 'name'");
}

DT_TEST(bad_vary)
{
    expect_file_error(
        CFG("bad_vary.yaml"), 4, 14,
        "key 'vary', item 2: unknown value 'weights' (expected init, data_order or epsilon)");
    const char *sets[] = {"vary=[init, init]"};
    expect_set_error(sets, 1, 1, 13, "key 'vary', item 2: 'init' is listed twice");
}

/* Overrides apply after the file, in order: the last one wins. */
DT_TEST(set_changes_value)
{
    const char *sets[] = {"train.steps=5",
                          "train.steps=7",
                          "backend.device=cuda",
                          "hash.per_tensor=on",
                          "policies=fast",
                          " train.batch = 12 ",
                          "train={eval_every: 3, seed: 42}"};
    struct dt_experiment e;
    struct dt_error err;
    CHECK_INT_EQ(load(&e, CFG("minimal.yaml"), sets, 7, &err), DT_OK);
    CHECK_INT_EQ(e.train.steps, 7);
    CHECK_INT_EQ(e.backend.device, DT_DEVICE_CUDA);
    CHECK(e.hash.per_tensor);
    CHECK_INT_EQ(e.n_policies, 1);
    CHECK_INT_EQ(e.policies[0].base, DT_LEVEL_FAST);
    CHECK_INT_EQ(e.train.batch, 12);
    CHECK_INT_EQ(e.train.eval_every, 3);
    CHECK(e.train.seed == 42);
}

DT_TEST(set_list)
{
    struct dt_experiment e;
    struct dt_error err;
    const char *one[] = {"model.hidden=[32]", "policies=[fast, portable]", "vary=[data_order]"};
    CHECK_INT_EQ(load(&e, CFG("full.yaml"), one, 3, &err), DT_OK);
    CHECK_INT_EQ(e.model.n_hidden, 1);
    CHECK_INT_EQ(e.model.hidden[0], 32);
    CHECK_INT_EQ(e.n_policies, 2);
    CHECK_STR_EQ(e.policies[0].name, "fast");
    CHECK_STR_EQ(e.policies[1].name, "portable");
    CHECK_INT_EQ(e.n_vary, 1);
    CHECK_INT_EQ(e.vary_sets[0], DT_VARY_DATA_ORDER);
    const char *none[] = {"model.hidden=[]", "vary=[]"};
    CHECK_INT_EQ(load(&e, CFG("full.yaml"), none, 2, &err), DT_OK);
    CHECK_INT_EQ(e.model.n_hidden, 0);
    CHECK_INT_EQ(e.n_vary, 1);
    CHECK_INT_EQ(e.vary_sets[0], 0);
}

/* The location is --set:<1-based index>:<column of the value in the assignment>. */
DT_TEST(set_bad_value)
{
    const char *sets[] = {"train.steps=5", "train.steps=abc"};
    struct dt_experiment e;
    struct dt_error err;
    CHECK_INT_EQ(load(&e, CFG("minimal.yaml"), sets, 2, &err), DT_ERR_CONFIG);
    CHECK_STR_EQ(err.msg, "--set:2:13: key 'train.steps': expected an integer, got 'abc'");
    const char *list[] = {"model.hidden=[1, 0]"};
    expect_set_error(list, 1, 1, 18, "key 'model.hidden', item 2: value 0 is out of range");
    const char *syntax[] = {"model.hidden=[1"};
    expect_set_error(syntax, 1, 1, 16, "key 'model.hidden': YAML syntax error:");
    const char *empty[] = {"replicas="};
    expect_set_error(empty, 1, 1, 10, "key 'replicas': no value given");
}

DT_TEST(set_unknown_key)
{
    const char *sets[] = {"replicas=2", " train.stepz=3"};
    expect_set_error(sets, 2, 2, 2, "unknown key 'train.stepz'; did you mean 'train.steps'?");
    const char *section[] = {"trian.steps=3"};
    expect_set_error(section, 1, 1, 1, "unknown key 'trian.steps'; did you mean 'train.steps'?");
    const char *nested[] = {"train={batch: 2, stepz: 3}"};
    expect_set_error(nested, 1, 1, 18, "unknown key 'train.stepz'");
}

DT_TEST(set_missing_equals)
{
    const char *sets[] = {"train.steps=3", "train.steps"};
    expect_set_error(sets, 2, 2, 1, "expected key.path=value, got 'train.steps'");
}

/* The required check runs after every override, so a --set may supply the key. */
DT_TEST(set_supplies_required)
{
    struct dt_experiment e;
    struct dt_error err;
    const char *steps[] = {"train.steps=3"};
    CHECK_INT_EQ(load(&e, CFG("missing_nested.yaml"), steps, 1, &err), DT_OK);
    CHECK_INT_EQ(e.train.steps, 3);
    CHECK(e.train.optimizer.lr == 0.1);
    const char *name[] = {"name=from-cli"};
    CHECK_INT_EQ(load(&e, CFG("missing_top.yaml"), name, 1, &err), DT_OK);
    CHECK_STR_EQ(e.name, "from-cli");
}

/* Scalar rules: decimal integers only, 64-bit overflow, open/closed double bounds,
 * finite doubles, boolean words, quoted numbers refused, string limits. */
DT_TEST(scalar_parsing)
{
    struct dt_experiment e;
    struct dt_error err;
    const char *good[] = {
        "train.seed=18446744073709551615", "train.optimizer.lr=10", "train.optimizer.momentum=0",
        "train.optimizer.weight_decay=1",  "hash.per_tensor=YES",   "dataset.name='fashion-mnist'"};
    CHECK_INT_EQ(load(&e, CFG("minimal.yaml"), good, 6, &err), DT_OK);
    CHECK(e.train.seed == UINT64_MAX);
    CHECK(e.train.optimizer.lr == 10.0);
    CHECK(e.train.optimizer.weight_decay == 1.0);
    CHECK(e.hash.per_tensor);

    const char *seed[] = {"train.seed=18446744073709551616"};
    expect_set_error(seed, 1, 1, 12,
                     "value 18446744073709551616 is out of range [0, 18446744073709551615]");
    const char *neg_seed[] = {"train.seed=-1"};
    expect_set_error(neg_seed, 1, 1, 12, "key 'train.seed': value -1 is out of range");
    const char *junk[] = {"train.steps=10x"};
    expect_set_error(junk, 1, 1, 13, "key 'train.steps': expected an integer, got '10x'");
    const char *hex[] = {"train.steps=0x10"};
    expect_set_error(hex, 1, 1, 13, "expected an integer, got '0x10'");
    const char *big[] = {"train.steps=9223372036854775808"};
    expect_set_error(big, 1, 1, 13, "value 9223372036854775808 is out of range [1, 1000000000]");
    const char *quoted[] = {"train.steps='10'"};
    expect_set_error(quoted, 1, 1, 13, "expected an integer, got the quoted string '10'");
    const char *lr0[] = {"train.optimizer.lr=0"};
    expect_set_error(lr0, 1, 1, 20, "value 0 is out of range (0, 10]");
    const char *not_a_number[] = {"train.optimizer.lr=nan"};
    expect_set_error(not_a_number, 1, 1, 20, "expected a finite number, got 'nan'");
    const char *huge[] = {"train.optimizer.lr=1e999"};
    expect_set_error(huge, 1, 1, 20, "expected a finite number, got '1e999'");
    const char *flag[] = {"hash.per_tensor=1"};
    expect_set_error(flag, 1, 1, 17, "key 'hash.per_tensor': expected a boolean");
    const char *device[] = {"backend.device=gpu"};
    expect_set_error(device, 1, 1, 16, "unknown value 'gpu' (expected cpu or cuda)");
    const char *threads[] = {"backend.threads=257"};
    expect_set_error(threads, 1, 1, 17, "value 257 is out of range [0, 256]");
    const char *name[] = {"name=a/b"};
    expect_set_error(name, 1, 1, 6, "key 'name': 'a/b' contains '/' at position 2");
    const char *noname[] = {"name=''"};
    expect_set_error(noname, 1, 1, 6, "key 'name': must not be empty");
    char longname[200] = "name=";
    memset(longname + 5, 'x', 128);
    const char *toolong[] = {longname};
    expect_set_error(toolong, 1, 1, 6, "key 'name': value is 128 characters long; at most 127");
}

DT_TEST(hidden_items)
{
    const char *many[] = {"model.hidden=[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17]"};
    expect_set_error(many, 1, 1, 14, "key 'model.hidden': expected 0 to 16 items, got 17");
    const char *nested[] = {"model.hidden=[8, [2]]"};
    expect_set_error(nested, 1, 1, 18,
                     "key 'model.hidden', item 2: expected an integer, got a list");
    const char *wide[] = {"model.hidden=[65537]"};
    expect_set_error(wide, 1, 1, 15, "value 65537 is out of range [1, 65536]");
    const char *no_policy[] = {"policies=[]"};
    expect_set_error(no_policy, 1, 1, 10, "key 'policies': expected 1 to 16 items, got 0");
}

/* Count the structural characters of a JSON text outside its strings. */
static void json_balance(const char *s, int *braces, int *brackets, int *min_depth)
{
    bool in_string = false;
    *braces = *brackets = 0;
    *min_depth = 1;
    for (const char *p = s; *p; p++) {
        if (in_string) {
            if (*p == '\\') p++;
            else if (*p == '"') in_string = false;
            continue;
        }
        if (*p == '"') in_string = true;
        else if (*p == '{') (*braces)++;
        else if (*p == '}') (*braces)--;
        else if (*p == '[') (*brackets)++;
        else if (*p == ']') (*brackets)--;
        if (*braces < *min_depth && p[1]) *min_depth = *braces; /* closed before the end */
    }
}

/* hash.digest defaults to tree; a result recorded before that (a config.json without the
 * key: tests/data/config/recorded/) is read as the sha256 it ran with, unless the key is
 * given; a config of another name takes the default. */
DT_TEST(recorded_digest_default)
{
    struct dt_experiment e;
    struct dt_error err;
    CHECK_INT_EQ(load(&e, CFG("minimal.yaml"), NULL, 0, &err), DT_OK);
    CHECK_INT_EQ(e.hash.digest, DT_HASH_DIGEST_TREE);
    CHECK_INT_EQ(load(&e, CFG("recorded/config.json"), NULL, 0, &err), DT_OK);
    CHECK_INT_EQ(e.hash.digest, DT_HASH_DIGEST_SHA256);
    const char *tree[] = {"hash.digest=tree"};
    CHECK_INT_EQ(load(&e, CFG("recorded/config.json"), tree, 1, &err), DT_OK);
    CHECK_INT_EQ(e.hash.digest, DT_HASH_DIGEST_TREE);
}

DT_TEST(write_json)
{
    struct dt_experiment e;
    struct dt_error err;
    const char *sets[] = {"policies=[fast, {base: portable, math: fast}]", "vary=[init]",
                          "dataset.path=\"a\\\"b\\\\c\""};
    CHECK_INT_EQ(load(&e, CFG("full.yaml"), sets, 3, &err), DT_OK);
    CHECK_STR_EQ(e.dataset.path, "a\"b\\c");
    char *text = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&text, &size);
    CHECK(f != NULL);
    if (!f) return;
    dt_config_write_json(f, &e);
    fclose(f);
    CHECK(size > 2 && text[0] == '{' && text[size - 1] == '}');
    CHECK_CONTAINS(text, "{\"name\":\"full-run_1.a\",\"dataset\":{\"name\":\"fashion-mnist\","
                         "\"path\":\"a\\\"b\\\\c\",\"train_limit\":1000,\"test_limit\":500},");
    /* only the keys model.kind mlp reads */
    CHECK_CONTAINS(text, "\"model\":{\"kind\":\"mlp\",\"hidden\":[512,256,64]},\"train\":{");
    /* only the keys sgd reads (no beta1, beta2, eps) */
    CHECK_CONTAINS(text, "\"optimizer\":{\"kind\":\"sgd\",\"lr\":0.125,\"momentum\":0.5,"
                         "\"weight_decay\":0.0001,\"clip_norm\":0,\"warmup\":0,"
                         "\"schedule\":\"constant\"}");
    CHECK_CONTAINS(text, "\"seed\":18446744073709551615,\"eval_every\":100,"
                         "\"checkpoint_every\":0,\"check_finite\":true,"
                         "\"checkpoint_at_divergence\":false}");
    CHECK_CONTAINS(text,
                   "\"backend\":{\"device\":\"cuda\",\"threads\":8,\"gpu\":0,\"graphs\":false}");
    /* every control of every policy, in table order */
    CHECK_CONTAINS(text, "\"policies\":[{\"name\":\"fast\",\"base\":\"fast\",\"reduction\":"
                         "\"unordered\",\"atomics\":\"float\",\"rng\":\"stored\",\"conv_algo\":"
                         "\"autotune\",\"math\":\"fast\",\"threads\":\"any\"},{\"name\":"
                         "\"portable+math=fast\",\"base\":\"portable\",\"reduction\":\"exact\","
                         "\"atomics\":\"fixed_point\",\"rng\":\"lfsr\",\"conv_algo\":\"own\","
                         "\"math\":\"fast\",\"threads\":\"independent\"}],");
    CHECK_CONTAINS(text, "\"replicas\":3,\"vary\":[\"init\"]");
    CHECK_CONTAINS(text, "\"hash\":{\"every\":10,\"per_tensor\":true,\"async\":\"off\","
                         "\"digest\":\"tree\"},"
                         "\"report\":{\"snapshots\":8,"
                         "\"overhead_samples\":30,\"overhead_warmup\":5,\"explain\":false}}");
    int braces, brackets, min_depth;
    json_balance(text, &braces, &brackets, &min_depth);
    CHECK_INT_EQ(braces, 0);
    CHECK_INT_EQ(brackets, 0);
    CHECK_INT_EQ(min_depth, 1);

    free(text);

    /* doubles are written with %.17g, so they read back to the same bits */
    CHECK_INT_EQ(load(&e, CFG("minimal.yaml"), NULL, 0, &err), DT_OK);
    text = NULL;
    f = open_memstream(&text, &size);
    CHECK(f != NULL);
    if (!f) return;
    dt_config_write_json(f, &e);
    fclose(f);
    CHECK_CONTAINS(text, "\"lr\":0.050000000000000003,\"momentum\":0.90000000000000002");
    CHECK_CONTAINS(text, "\"vary\":[]");
    free(text);
}

DT_TEST(write_reference)
{
    static const char *const every_key[] = {"name",
                                            "dataset.name",
                                            "dataset.path",
                                            "dataset.train_limit",
                                            "dataset.test_limit",
                                            "model.kind",
                                            "model.hidden",
                                            "model.overlap_pool",
                                            "model.network",
                                            "model.estimator",
                                            "model.samples",
                                            "model.test_samples",
                                            "model.prior_sigma",
                                            "model.rho_init",
                                            "model.lanes",
                                            "model.stored_generator",
                                            "model.lfsr_check_every",
                                            "model.context",
                                            "model.d_model",
                                            "model.layers",
                                            "model.heads",
                                            "model.tie_embeddings",
                                            "model.dropout",
                                            "train.steps",
                                            "train.batch",
                                            "train.shards",
                                            "train.optimizer.kind",
                                            "train.optimizer.lr",
                                            "train.optimizer.momentum",
                                            "train.optimizer.weight_decay",
                                            "train.optimizer.beta1",
                                            "train.optimizer.beta2",
                                            "train.optimizer.eps",
                                            "train.optimizer.clip_norm",
                                            "train.optimizer.warmup",
                                            "train.optimizer.schedule",
                                            "train.seed",
                                            "train.eval_every",
                                            "train.checkpoint_every",
                                            "train.check_finite",
                                            "train.checkpoint_at_divergence",
                                            "backend.device",
                                            "backend.threads",
                                            "backend.gpu",
                                            "backend.graphs",
                                            "policies",
                                            "replicas",
                                            "vary",
                                            "hash.every",
                                            "hash.per_tensor",
                                            "hash.async",
                                            "hash.digest",
                                            "report.snapshots",
                                            "report.overhead_samples",
                                            "report.overhead_warmup",
                                            "report.explain",
                                            "matrix"};
    int n_keys = (int)(sizeof every_key / sizeof every_key[0]);
    char *text = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&text, &size);
    CHECK(f != NULL);
    if (!f) return;
    dt_config_write_reference(f);
    fclose(f);
    CHECK(strncmp(text, "| key | type | default | range / values | required | meaning |\n", 62) ==
          0);
    int lines = 0;
    for (const char *p = text; *p; p++) lines += *p == '\n';
    CHECK_INT_EQ(lines, n_keys + 2);
    for (int i = 0; i < n_keys; i++) {
        char cell[96];
        snprintf(cell, sizeof cell, "| `%s` |", every_key[i]);
        CHECK_CONTAINS(text, cell);
    }
    CHECK_CONTAINS(text, "| `train.steps` | integer |  | [1, 1000000000] | yes |");
    CHECK_CONTAINS(text, "| `train.optimizer.momentum` | number | `0.9` | [0, 1) | no |");
    CHECK_CONTAINS(text, "| `backend.device` | choice | `cpu` | cpu, cuda | no |");
    CHECK_CONTAINS(text, "| `policies` | list of policies | `[portable]` | 1 to 16 items, each a "
                         "level (fast, run_to_run, portable) or a mapping {base: LEVEL, CONTROL: "
                         "VALUE, ..., name: NAME}; names unique | no |");
    CHECK_CONTAINS(text, "| `vary` | list of names, or list of lists of names | `[]` | any of "
                         "init, data_order, epsilon, no repeats; or a list of 1 to 8 such lists "
                         "(settings), no two alike | no |");
    CHECK_CONTAINS(text, "| `report.snapshots` | integer | `8` | [0, 64] | no |");
    CHECK_CONTAINS(text,
                   "| `report.overhead_samples` | integer | `30` | 0 or [20, 1000000] | no |");
    CHECK_CONTAINS(text, "| `report.overhead_warmup` | integer | `5` | [0, 100000] | no |");
    /* optional without a default: not required */
    CHECK_CONTAINS(text, "| `matrix` | list of entries |  | 1 to 32 entries {name: NAME, set: "
                         "{DOTTED.KEY: VALUE, ...}}; names unique, 1 to 127 characters from A-Z "
                         "a-z 0-9 _ . -; set cannot hold name or matrix | no |");
    free(text);
}

/* model.kind lenet loads; keys of another model kind are errors at the key's location. */
DT_TEST(model_kind_keys)
{
    struct dt_experiment e;
    struct dt_error err;
    const char *lenet[] = {"model={kind: lenet, overlap_pool: true}"};
    CHECK_INT_EQ(load(&e, CFG("minimal.yaml"), lenet, 1, &err), DT_OK);
    CHECK_INT_EQ(e.model.kind, DT_MODEL_LENET);
    CHECK(e.model.overlap_pool);
    expect_file_error(CFG("lenet_hidden.yaml"), 4, 3,
                      "key 'model.hidden' applies to model.kind mlp and bnn_mlp only, not lenet");
    const char *overlap[] = {"model.overlap_pool=true"};
    expect_set_error(overlap, 1, 1, 20,
                     "key 'model.overlap_pool' applies to model.kind lenet "
                     "only, not mlp");
}

/* model.kind bnn_mlp reads every bnn key; the resolved JSON names them. */
DT_TEST(bnn_keys)
{
    struct dt_experiment e;
    struct dt_error err;
    CHECK_INT_EQ(load(&e, CFG("bnn_full.yaml"), NULL, 0, &err), DT_OK);
    if (err.msg[0]) fprintf(stderr, "%s\n", err.msg);
    CHECK_INT_EQ(e.model.kind, DT_MODEL_BNN_MLP);
    CHECK_INT_EQ(e.model.n_hidden, 2);
    CHECK_INT_EQ(e.model.hidden[0], 30);
    CHECK_INT_EQ(e.model.hidden[1], 20);
    CHECK_INT_EQ(e.model.samples, 3);
    CHECK_INT_EQ(e.model.test_samples, 7);
    CHECK(e.model.prior_sigma == 0.5);
    CHECK(e.model.rho_init == -4.0);
    CHECK_INT_EQ(e.model.lanes, 64);
    CHECK_INT_EQ(e.model.stored_generator, DT_EPS_GEN_LFSR);
    CHECK_INT_EQ(e.model.lfsr_check_every, 5);
    CHECK_INT_EQ(e.n_vary, 1);
    CHECK_INT_EQ(e.vary_sets[0], DT_VARY_EPSILON);
    CHECK_INT_EQ(e.n_policies, 3);
    CHECK_STR_EQ(e.policies[0].name, "portable+rng=stored");
    CHECK_INT_EQ(e.policies[0].rng, DT_RNG_STORED);
    CHECK_STR_EQ(e.policies[1].name, "portable+rng=philox");
    CHECK_INT_EQ(e.policies[1].rng, DT_RNG_PHILOX);
    CHECK_INT_EQ(e.policies[2].rng, DT_RNG_LFSR);
    char *text = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&text, &size);
    CHECK(f != NULL);
    if (!f) return;
    dt_config_write_json(f, &e);
    fclose(f);
    CHECK_CONTAINS(text, "\"model\":{\"kind\":\"bnn_mlp\",\"hidden\":[30,20],"
                         "\"estimator\":\"weights\",\"samples\":3,\"test_samples\":7,\"prior_"
                         "sigma\":0.5,\"rho_init\":-4,"
                         "\"lanes\":64,\"stored_generator\":\"lfsr\",\"lfsr_check_every\":5}");
    CHECK_CONTAINS(text, "\"vary\":[\"epsilon\"]");
    free(text);
    /* the defaults, and --set over a bnn_mlp model */
    const char *sets[] = {"model={kind: bnn_mlp}", "model.samples=255", "model.test_samples=256",
                          "model.stored_generator=philox", "model.lanes=1"};
    CHECK_INT_EQ(load(&e, CFG("minimal.yaml"), sets, 1, &err), DT_OK);
    CHECK_INT_EQ(e.model.samples, 4);
    CHECK_INT_EQ(e.model.test_samples, 10);
    CHECK(e.model.prior_sigma == 1.0);
    CHECK(e.model.rho_init == -5.0);
    CHECK_INT_EQ(e.model.lanes, 1024);
    CHECK_INT_EQ(e.model.stored_generator, DT_EPS_GEN_PHILOX);
    CHECK_INT_EQ(e.model.lfsr_check_every, 0);
    CHECK_INT_EQ(load(&e, CFG("minimal.yaml"), sets, 5, &err), DT_OK);
    CHECK_INT_EQ(e.model.samples, 255);
    CHECK_INT_EQ(e.model.test_samples, 256);
    CHECK_INT_EQ(e.model.lanes, 1);
    CHECK_INT_EQ(e.model.estimator, DT_BNN_WEIGHTS);
    /* the local estimator draws once per example unless model.samples says otherwise */
    const char *local[] = {"model={kind: bnn_mlp, estimator: local}", "model.samples=3"};
    CHECK_INT_EQ(load(&e, CFG("minimal.yaml"), local, 1, &err), DT_OK);
    CHECK_INT_EQ(e.model.estimator, DT_BNN_LOCAL);
    CHECK_INT_EQ(e.model.samples, 1);
    CHECK_INT_EQ(load(&e, CFG("minimal.yaml"), local, 2, &err), DT_OK);
    CHECK_INT_EQ(e.model.samples, 3);
}

/* bnn keys under another model kind, vary: [epsilon] without epsilon, bad values: each
 * an error at file:line:column naming the key. */
DT_TEST(bnn_key_errors)
{
    expect_file_error(CFG("bnn_samples_mlp.yaml"), 4, 3,
                      "key 'model.samples' applies to model.kind bnn_mlp only, not mlp");
    expect_file_error(CFG("bnn_vary_mlp.yaml"), 4, 1,
                      "key 'vary': epsilon applies to model.kind bnn_mlp only, not mlp");
    expect_file_error(CFG("bnn_bad_generator.yaml"), 4, 21,
                      "key 'model.stored_generator': unknown value 'bogus' (expected philox or "
                      "lfsr)");
    expect_file_error(CFG("bnn_zero_lanes.yaml"), 4, 10,
                      "key 'model.lanes': value 0 is out of range [1, 1048576]");
    const char *samples[] = {"model.samples=2"};
    expect_set_error(samples, 1, 1, 15,
                     "key 'model.samples' applies to model.kind bnn_mlp only, not mlp");
    const char *estimator[] = {"model.estimator=local"};
    expect_set_error(estimator, 1, 1, 17,
                     "key 'model.estimator' applies to model.kind bnn_mlp only, not mlp");
    const char *bad_estimator[] = {"model={kind: bnn_mlp, estimator: activations}"};
    expect_set_error(bad_estimator, 1, 1, 34,
                     "key 'model.estimator': unknown value 'activations' (expected weights or "
                     "local)");
    const char *lenet[] = {"model={kind: lenet, lfsr_check_every: 4}"};
    expect_set_error(lenet, 1, 1, 21,
                     "key 'model.lfsr_check_every' applies to model.kind "
                     "bnn_mlp, gpt and net only, not lenet");
    const char *range[] = {"model.kind=bnn_mlp", "model.samples=256"};
    expect_set_error(range, 2, 2, 15, "key 'model.samples': value 256 is out of range [1, 255]");
    const char *zero[] = {"model.kind=bnn_mlp", "model.test_samples=0"};
    expect_set_error(zero, 2, 2, 20, "key 'model.test_samples': value 0 is out of range [1, 256]");
    const char *sigma[] = {"model.kind=bnn_mlp", "model.prior_sigma=0"};
    expect_set_error(sigma, 2, 2, 19, "key 'model.prior_sigma': value 0 is out of range");
    const char *vary[] = {"vary=[epsilon]"};
    expect_set_error(vary, 1, 1, 6,
                     "key 'vary': epsilon applies to model.kind bnn_mlp only, "
                     "not mlp");
}

/* ---- vary as an axis: a list of lists of names ----------------------------------------- */

/* Expect n_vary settings equal to want[0, n), in order, and zeros after them. */
static void expect_vary(const struct dt_experiment *e, const unsigned *want, int n)
{
    CHECK_INT_EQ(e->n_vary, n);
    for (int i = 0; i < DT_MAX_VARY_SETS; i++) CHECK_INT_EQ(e->vary_sets[i], i < n ? want[i] : 0u);
}

/* From a file (block style, names in any order within a setting). */
DT_TEST(vary_sets_file)
{
    struct dt_experiment e;
    struct dt_error err;
    CHECK_INT_EQ(load(&e, CFG("vary_sets.yaml"), NULL, 0, &err), DT_OK);
    if (err.msg[0]) fprintf(stderr, "  %s\n", err.msg);
    const unsigned four[] = {0, DT_VARY_INIT, DT_VARY_DATA_ORDER,
                             DT_VARY_INIT | DT_VARY_DATA_ORDER};
    expect_vary(&e, four, 4);
    CHECK_INT_EQ(load(&e, CFG("vary_sets_bnn.yaml"), NULL, 0, &err), DT_OK);
    if (err.msg[0]) fprintf(stderr, "  %s\n", err.msg);
    const unsigned bnn[] = {DT_VARY_EPSILON, 0,
                            DT_VARY_INIT | DT_VARY_DATA_ORDER | DT_VARY_EPSILON};
    expect_vary(&e, bnn, 3);
}

/* From --set, replacing the file's value as a whole (either form over either form). */
DT_TEST(vary_sets_set)
{
    struct dt_experiment e;
    struct dt_error err;
    const char *two[] = {"vary=[[], [init]]"};
    CHECK_INT_EQ(load(&e, CFG("full.yaml"), two, 1, &err), DT_OK);
    const unsigned none_init[] = {0, DT_VARY_INIT};
    expect_vary(&e, none_init, 2);
    const char *empty[] = {"vary=[[]]"}; /* one setting, no flags */
    CHECK_INT_EQ(load(&e, CFG("vary_sets.yaml"), empty, 1, &err), DT_OK);
    const unsigned zero[] = {0};
    expect_vary(&e, zero, 1);
    const char *flat[] = {"vary=[data_order, init]"}; /* one setting again */
    CHECK_INT_EQ(load(&e, CFG("vary_sets.yaml"), flat, 1, &err), DT_OK);
    const unsigned both[] = {DT_VARY_INIT | DT_VARY_DATA_ORDER};
    expect_vary(&e, both, 1);
    const char *scalar[] = {"vary=init"};
    CHECK_INT_EQ(load(&e, CFG("vary_sets.yaml"), scalar, 1, &err), DT_OK);
    const unsigned init[] = {DT_VARY_INIT};
    expect_vary(&e, init, 1);
    const char *nothing[] = {"vary=[]"};
    CHECK_INT_EQ(load(&e, CFG("vary_sets.yaml"), nothing, 1, &err), DT_OK);
    expect_vary(&e, zero, 1);
    /* the most settings: all eight subsets, under bnn_mlp */
    const char *eight[] = {"model.kind=bnn_mlp",
                           "vary=[[], [init], [data_order], [epsilon], [init, data_order], "
                           "[epsilon, init], [data_order, epsilon], [epsilon, data_order, init]]"};
    CHECK_INT_EQ(load(&e, CFG("minimal.yaml"), eight, 2, &err), DT_OK);
    if (err.msg[0]) fprintf(stderr, "  %s\n", err.msg);
    const unsigned all[] = {0, 1, 2, 4, 3, 5, 6, 7};
    expect_vary(&e, all, 8);
}

/* Each error at the node at fault, naming the item (and the name within a setting). */
DT_TEST(vary_sets_errors)
{
    expect_file_error(CFG("vary_same_setting.yaml"), 4, 32,
                      "key 'vary', item 3: the same setting as item 1");
    expect_file_error(CFG("vary_mixed.yaml"), 6, 5,
                      "key 'vary', item 2: expected a list of names like item 1, got "
                      "'data_order'");
    expect_file_error(CFG("vary_sets_epsilon_mlp.yaml"), 4, 1,
                      "key 'vary': epsilon applies to model.kind bnn_mlp only, not mlp");
    const char *mixed[] = {"vary=[init, [data_order]]"};
    expect_set_error(mixed, 1, 1, 13,
                     "key 'vary', item 2: expected a name like item 1, got a "
                     "list");
    const char *twice[] = {"vary=[[init], [init, init]]"};
    expect_set_error(twice, 1, 1, 22, "key 'vary', item 2, name 2: 'init' is listed twice");
    const char *unknown[] = {"vary=[[], [weights]]"};
    expect_set_error(unknown, 1, 1, 12,
                     "key 'vary', item 2, name 1: unknown value 'weights' "
                     "(expected init, data_order or epsilon)");
    const char *nested[] = {"vary=[[], [[init]]]"};
    expect_set_error(nested, 1, 1, 12, "key 'vary', item 2, name 1: expected a name, got a list");
    const char *same[] = {"vary=[[init], [data_order], [init]]"};
    expect_set_error(same, 1, 1, 29, "key 'vary', item 3: the same setting as item 1");
    const char *empties[] = {"vary=[[], []]"};
    expect_set_error(empties, 1, 1, 11, "key 'vary', item 2: the same setting as item 1");
    const char *nine[] = {"model.kind=bnn_mlp",
                          "vary=[[], [init], [data_order], [epsilon], [init, data_order], "
                          "[epsilon, init], [data_order, epsilon], [epsilon, data_order, init], "
                          "[init]]"};
    expect_set_error(nine, 2, 2, 6, "key 'vary': expected 1 to 8 settings, got 9");
    const char *four[] = {"vary=[init, data_order, epsilon, init]"};
    expect_set_error(four, 1, 1, 6, "key 'vary': expected 0 to 3 items, got 4");
    const char *map[] = {"vary={init: true}"};
    expect_set_error(map, 1, 1, 6,
                     "key 'vary': expected a list of names or a list of lists of "
                     "names, got a mapping");
    const char *eps[] = {"vary=[[init], [init, epsilon]]"};
    expect_set_error(eps, 1, 1, 6,
                     "key 'vary': epsilon applies to model.kind bnn_mlp only, "
                     "not mlp");
}

/* ---- hash.async ----------------------------------------------------------------------------- */

/* auto, on or off (YAML's on/off words stay names here, quoted or not); anything else is an
 * error at the value's file:line:column naming the key and the choices. */
DT_TEST(hash_async_key)
{
    struct dt_experiment e;
    struct dt_error err;
    const char *on[] = {"hash.async=on"};
    CHECK_INT_EQ(load(&e, CFG("minimal.yaml"), on, 1, &err), DT_OK);
    CHECK_INT_EQ(e.hash.async, DT_HASH_ASYNC_ON);
    const char *off[] = {"hash={async: 'off'}"};
    CHECK_INT_EQ(load(&e, CFG("minimal.yaml"), off, 1, &err), DT_OK);
    CHECK_INT_EQ(e.hash.async, DT_HASH_ASYNC_OFF);
    const char *autov[] = {"hash.async=on", "hash.async=auto"};
    CHECK_INT_EQ(load(&e, CFG("minimal.yaml"), autov, 2, &err), DT_OK);
    CHECK_INT_EQ(e.hash.async, DT_HASH_ASYNC_AUTO);
    expect_file_error(CFG("bad_hash_async.yaml"), 6, 10,
                      "key 'hash.async': unknown value 'sometimes' (expected auto, on or off)");
    const char *word[] = {"hash.async=true"};
    expect_set_error(word, 1, 1, 12,
                     "key 'hash.async': unknown value 'true' (expected auto, "
                     "on or off)");
    const char *list[] = {"train.steps=3", "hash.async=[on]"};
    expect_set_error(list, 2, 2, 12, "key 'hash.async': expected a name, got a list");
    const char *typo[] = {"hash.asnyc=on"};
    expect_set_error(typo, 1, 1, 1, "unknown key 'hash.asnyc'");
}

/* ---- report.* ---------------------------------------------------------------------------- */

DT_TEST(report_keys)
{
    struct dt_experiment e;
    struct dt_error err;
    CHECK_INT_EQ(load(&e, CFG("report_full.yaml"), NULL, 0, &err), DT_OK);
    CHECK_INT_EQ(e.report.snapshots, 64);
    CHECK_INT_EQ(e.report.overhead_samples, 1000000);
    CHECK_INT_EQ(e.report.overhead_warmup, 100000);
    const char *low[] = {"report.snapshots=0", "report={overhead_samples: 20, overhead_warmup: 0}"};
    CHECK_INT_EQ(load(&e, CFG("minimal.yaml"), low, 2, &err), DT_OK);
    CHECK_INT_EQ(e.report.snapshots, 0);
    CHECK_INT_EQ(e.report.overhead_samples, 20);
    CHECK_INT_EQ(e.report.overhead_warmup, 0);
    const char *skip[] = {"report.overhead_samples=0"};
    CHECK_INT_EQ(load(&e, CFG("minimal.yaml"), skip, 1, &err), DT_OK);
    CHECK_INT_EQ(e.report.overhead_samples, 0);
    CHECK_INT_EQ(e.report.snapshots, 8);
    CHECK_INT_EQ(e.report.overhead_warmup, 5);

    expect_file_error(CFG("report_few_samples.yaml"), 6, 21,
                      "key 'report.overhead_samples': the overhead protocol takes at least 20 "
                      "samples (or 0 to skip)");
    const char *one[] = {"report.overhead_samples=1"};
    expect_set_error(one, 1, 1, 25,
                     "key 'report.overhead_samples': the overhead protocol takes "
                     "at least 20 samples (or 0 to skip)");
    const char *many[] = {"report.overhead_samples=1000001"};
    expect_set_error(many, 1, 1, 25,
                     "key 'report.overhead_samples': value 1000001 is out of "
                     "range 0 or [20, 1000000]");
    const char *neg[] = {"report={overhead_samples: -1}"};
    expect_set_error(neg, 1, 1, 27,
                     "key 'report.overhead_samples': value -1 is out of range 0 "
                     "or [20, 1000000]");
    const char *snaps[] = {"report.snapshots=65"};
    expect_set_error(snaps, 1, 1, 18, "key 'report.snapshots': value 65 is out of range [0, 64]");
    const char *neg_snaps[] = {"report.snapshots=-1"};
    expect_set_error(neg_snaps, 1, 1, 18, "key 'report.snapshots': value -1 is out of range");
    const char *warm[] = {"report.overhead_warmup=100001"};
    expect_set_error(warm, 1, 1, 24,
                     "key 'report.overhead_warmup': value 100001 is out of range "
                     "[0, 100000]");
    const char *typo[] = {"report.snapshot=3"};
    expect_set_error(typo, 1, 1, 1,
                     "unknown key 'report.snapshot'; did you mean "
                     "'report.snapshots'?");
}

/* ---- JSON round trip: load(yaml) -> json -> load(json) -> json ----------------------------- */

static char *json_of(const struct dt_experiment *e)
{
    char *text = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&text, &size);
    CHECK(f != NULL);
    if (!f) return NULL;
    dt_config_write_json(f, e);
    fclose(f);
    return text;
}

/* Every field of struct dt_experiment but `source`. */
static void expect_same_experiment(const struct dt_experiment *a, const struct dt_experiment *b)
{
    CHECK_STR_EQ(a->name, b->name);
    CHECK_STR_EQ(a->dataset.name, b->dataset.name);
    CHECK_STR_EQ(a->dataset.path, b->dataset.path);
    CHECK_INT_EQ(a->dataset.train_limit, b->dataset.train_limit);
    CHECK_INT_EQ(a->dataset.test_limit, b->dataset.test_limit);
    CHECK_INT_EQ(a->model.kind, b->model.kind);
    CHECK_INT_EQ(a->model.n_hidden, b->model.n_hidden);
    for (int i = 0; i < DT_MAX_HIDDEN; i++) CHECK_INT_EQ(a->model.hidden[i], b->model.hidden[i]);
    CHECK_INT_EQ(a->model.overlap_pool, b->model.overlap_pool);
    CHECK_INT_EQ(a->model.samples, b->model.samples);
    CHECK_INT_EQ(a->model.test_samples, b->model.test_samples);
    CHECK(memcmp(&a->model.prior_sigma, &b->model.prior_sigma, sizeof(double)) == 0);
    CHECK(memcmp(&a->model.rho_init, &b->model.rho_init, sizeof(double)) == 0);
    CHECK_INT_EQ(a->model.lanes, b->model.lanes);
    CHECK_INT_EQ(a->model.stored_generator, b->model.stored_generator);
    CHECK_INT_EQ(a->model.lfsr_check_every, b->model.lfsr_check_every);
    CHECK_INT_EQ(a->train.steps, b->train.steps);
    CHECK_INT_EQ(a->train.batch, b->train.batch);
    CHECK_INT_EQ(a->train.optimizer.kind, b->train.optimizer.kind);
    CHECK(memcmp(&a->train.optimizer.lr, &b->train.optimizer.lr, sizeof(double)) == 0);
    CHECK(memcmp(&a->train.optimizer.momentum, &b->train.optimizer.momentum, sizeof(double)) == 0);
    CHECK(memcmp(&a->train.optimizer.weight_decay, &b->train.optimizer.weight_decay,
                 sizeof(double)) == 0);
    CHECK(a->train.seed == b->train.seed);
    CHECK_INT_EQ(a->train.eval_every, b->train.eval_every);
    CHECK_INT_EQ(a->train.checkpoint_every, b->train.checkpoint_every);
    CHECK_INT_EQ(a->backend.device, b->backend.device);
    CHECK_INT_EQ(a->backend.threads, b->backend.threads);
    CHECK_INT_EQ(a->n_policies, b->n_policies);
    for (int i = 0; i < a->n_policies && i < b->n_policies; i++) {
        const struct dt_policy *p = &a->policies[i], *q = &b->policies[i];
        CHECK_STR_EQ(p->name, q->name);
        CHECK_INT_EQ(p->base, q->base);
        CHECK(dt_policy_equal_controls(p, q));
        CHECK_INT_EQ(p->reduction, q->reduction);
        CHECK_INT_EQ(p->atomics, q->atomics);
        CHECK_INT_EQ(p->rng, q->rng);
        CHECK_INT_EQ(p->conv_algo, q->conv_algo);
        CHECK_INT_EQ(p->math, q->math);
        CHECK_INT_EQ(p->threads, q->threads);
    }
    CHECK_INT_EQ(a->replicas, b->replicas);
    CHECK_INT_EQ(a->n_vary, b->n_vary);
    for (int i = 0; i < DT_MAX_VARY_SETS; i++) CHECK_INT_EQ(a->vary_sets[i], b->vary_sets[i]);
    CHECK_INT_EQ(a->hash.every, b->hash.every);
    CHECK_INT_EQ(a->hash.per_tensor, b->hash.per_tensor);
    CHECK_INT_EQ(a->hash.async, b->hash.async);
    CHECK_INT_EQ(a->report.snapshots, b->report.snapshots);
    CHECK_INT_EQ(a->report.overhead_samples, b->report.overhead_samples);
    CHECK_INT_EQ(a->report.overhead_warmup, b->report.overhead_warmup);
}

/* Load `path`, write its JSON to a file, load that, write again: the same text, the same
 * fields. Returns the first JSON text (the caller frees it) or NULL. */
static char *round_trip(const char *path, const char *const *sets, int n_sets)
{
    static struct dt_experiment a, b;
    struct dt_error err;
    int before = dt_check_failures_;
    CHECK_INT_EQ(load(&a, path, sets, n_sets, &err), DT_OK);
    if (err.msg[0]) fprintf(stderr, "  %s\n", err.msg);
    char *first = json_of(&a);
    if (!first) return NULL;
    const char *base = strrchr(path, '/');
    char json_path[1024];
    snprintf(json_path, sizeof json_path, DT_TEST_TMP_DIR "/config.round_trip.%s.json",
             base ? base + 1 : path);
    FILE *f = fopen(json_path, "w");
    CHECK(f != NULL);
    if (!f) return first;
    fputs(first, f);
    fputc('\n', f);
    fclose(f);
    CHECK_INT_EQ(load(&b, json_path, NULL, 0, &err), DT_OK);
    if (err.msg[0]) fprintf(stderr, "  %s\n", err.msg);
    char *second = json_of(&b);
    if (second) CHECK_STR_EQ(second, first);
    free(second);
    expect_same_experiment(&a, &b);
    CHECK_STR_EQ(b.source, json_path);
    if (dt_check_failures_ != before) fprintf(stderr, "  (round trip of %s)\n", path);
    return first;
}

/* The same for every entry of a matrix config: each resolves to a plain experiment whose
 * JSON (without `matrix`) loads back. */
static void round_trip_entries(const char *path, const struct dt_experiment *m)
{
    static struct dt_experiment a, b;
    for (int k = 0; k < m->n_matrix; k++) {
        struct dt_error err = {0};
        int before = dt_check_failures_;
        CHECK_INT_EQ(dt_config_load_entry(&a, path, k, NULL, 0, &err), DT_OK);
        if (err.msg[0]) fprintf(stderr, "  %s\n", err.msg);
        CHECK_STR_EQ(a.name, m->matrix[k]);
        char *first = json_of(&a);
        if (!first) return;
        CHECK(strstr(first, "\"matrix\"") == NULL);
        char json_path[1024];
        snprintf(json_path, sizeof json_path, DT_TEST_TMP_DIR "/config.round_trip.entry.%s.json",
                 m->matrix[k]);
        FILE *f = fopen(json_path, "w");
        CHECK(f != NULL);
        if (f) {
            fputs(first, f);
            fclose(f);
            CHECK_INT_EQ(load(&b, json_path, NULL, 0, &err), DT_OK);
            char *second = json_of(&b);
            if (second) CHECK_STR_EQ(second, first);
            free(second);
            expect_same_experiment(&a, &b);
        }
        free(first);
        if (dt_check_failures_ != before)
            fprintf(stderr, "  (round trip of %s, entry %s)\n", path, m->matrix[k]);
    }
}

/* Every shipped config (each entry of a matrix config), then the test fixtures that use
 * every model kind and both forms of vary. The JSON holds only the keys the model kind
 * reads. */
DT_TEST(json_round_trip)
{
    glob_t shipped;
    CHECK_INT_EQ(glob(DT_SOURCE_DIR "/configs/*.yaml", 0, NULL, &shipped), 0);
    CHECK(shipped.gl_pathc >= 4); /* quickstart, cpu_controls, lenet, bnn at least */
    static struct dt_experiment m;
    int matrices = 0;
    for (size_t i = 0; i < shipped.gl_pathc; i++) {
        struct dt_error err = {0};
        CHECK_INT_EQ(dt_config_load_matrix(&m, shipped.gl_pathv[i], NULL, 0, &err), DT_OK);
        if (err.msg[0]) fprintf(stderr, "  %s\n", err.msg);
        if (m.n_matrix > 0) {
            round_trip_entries(shipped.gl_pathv[i], &m);
            matrices++;
        } else {
            free(round_trip(shipped.gl_pathv[i], NULL, 0));
        }
    }
    globfree(&shipped);
    CHECK(matrices >= 1); /* overhead_matrix */

    char *text = round_trip(DT_SOURCE_DIR "/configs/lenet.yaml", NULL, 0);
    if (text) {
        CHECK_CONTAINS(text, "\"model\":{\"kind\":\"lenet\",\"overlap_pool\":");
        CHECK(!strstr(text, "\"hidden\"") && !strstr(text, "\"samples\""));
    }
    free(text);
    text = round_trip(CFG("bnn_full.yaml"), NULL, 0);
    if (text) CHECK(!strstr(text, "overlap_pool"));
    free(text);
    text = round_trip(CFG("vary_sets_bnn.yaml"), NULL, 0);
    if (text) {
        CHECK_CONTAINS(text, "\"vary\":[[\"epsilon\"],[],[\"init\",\"data_order\",\"epsilon\"]]");
        CHECK_CONTAINS(text, "\"report\":{\"snapshots\":3,\"overhead_samples\":0,"
                             "\"overhead_warmup\":0,\"explain\":false}}");
        /* name + base + every control, which load back to the same policies */
        CHECK_CONTAINS(text, "{\"name\":\"fast-fixed\",\"base\":\"fast\",\"reduction\":\"fixed\","
                             "\"atomics\":\"float\",");
    }
    free(text);
    text = round_trip(CFG("vary_sets.yaml"), NULL, 0);
    if (text) {
        CHECK_CONTAINS(text, "\"vary\":[[],[\"init\"],[\"data_order\"],[\"init\",\"data_order\"]]");
        CHECK(!strstr(text, "overlap_pool") && !strstr(text, "lanes"));
    }
    free(text);
    free(round_trip(CFG("full.yaml"), NULL, 0));
    free(round_trip(CFG("policy_mappings.yaml"), NULL, 0));
    const char *one[] = {"vary=[[init]]", "train.optimizer.lr=0.1", "model.hidden=[]"};
    text = round_trip(CFG("minimal.yaml"), one, 3);
    if (text) CHECK_CONTAINS(text, "\"hidden\":[]},");
    if (text) CHECK_CONTAINS(text, "\"lr\":0.10000000000000001,");
    if (text) CHECK_CONTAINS(text, "\"replicas\":1,\"vary\":[\"init\"],\"hash\"");
    free(text);
}

/* Write `text` to DT_TEST_TMP_DIR/config.<name> and return the path (static buffer). */
static const char *tmp_config(const char *name, const char *text)
{
    static char path[1024];
    snprintf(path, sizeof path, "%s/config.%s", DT_TEST_TMP_DIR, name);
    FILE *f = fopen(path, "w");
    DT_ASSERT(f && fputs(text, f) >= 0 && fclose(f) == 0);
    return path;
}

/* n copies of `unit` after `head`, then n copies of `tail` and `end` (malloc'ed). */
static char *repeat(const char *head, const char *unit, const char *tail, const char *end, int n)
{
    struct dt_strbuf sb = {0};
    dt_strbuf_printf(&sb, "%s", head);
    for (int i = 0; i < n; i++) dt_strbuf_printf(&sb, "%s", unit);
    for (int i = 0; i < n; i++) dt_strbuf_printf(&sb, "%s", tail);
    dt_strbuf_printf(&sb, "%s", end);
    return sb.data;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* A config nested 100,000 levels deep (flow lists, flow mappings, one line of "- - -", and,
 * as a --set value, flow lists) is refused at once -- not after libyaml's scanner spends
 * tens of seconds on it -- at the line and column where the 65th level opens; 100 levels
 * of indented mappings are refused at their 65th line. Brackets inside quotes or a comment
 * nest nothing: such a config loads. All of it well under 2 s. */
DT_TEST(deep_nesting_refused)
{
    const double t0 = now_s();
    const char *const deep = "nested deeper than 64 levels";
    char *text = repeat("a: ", "[", "]", "\n", 100000);
    const char *path = tmp_config("deep-lists.yaml", text);
    expect_error_at(path, NULL, 0, path, 1, 3 + 64, deep);
    free(text);
    text = repeat("a: ", "{a: ", "}", "\n", 100000);
    path = tmp_config("deep-maps.yaml", text);
    expect_error_at(path, NULL, 0, path, 1, 3 + 4 * 63 + 1, deep);
    free(text);
    text = repeat("a:\n", "- ", "", "x\n", 100000);
    path = tmp_config("deep-dashes.yaml", text);
    expect_error_at(path, NULL, 0, path, 2, 2 * 63 + 1, deep);
    free(text);
    struct dt_strbuf sb = {0};
    for (int i = 0; i < 100; i++) dt_strbuf_printf(&sb, "%*sk%d:\n", i, "", i);
    path = tmp_config("deep-indent.yaml", sb.data);
    expect_error_at(path, NULL, 0, path, 65, 65, deep);
    dt_strbuf_free(&sb);
    text = repeat("model.hidden=", "[", "]", "", 100000);
    const char *sets[] = {text};
    expect_set_error(sets, 1, 1, 13 + 65, deep); /* the value's own 65th level */
    free(text);
    /* not nesting: 80 brackets in comments and quoted scalars (double quotes in the file,
     * single quotes in a --set) */
    char *br = repeat("", "[", "{", "", 40);
    dt_strbuf_printf(&sb,
                     "name: q\n# %s\nmodel: {kind: mlp, hidden: [32]}  # %s\n"
                     "train:\n  steps: 10\ndataset: {path: \"/x/%s\"}\n",
                     br, br, br);
    struct dt_experiment e;
    struct dt_error err;
    path = tmp_config("brackets.yaml", sb.data);
    char quoted[200];
    snprintf(quoted, sizeof quoted, "dataset.path='/y/%s'", br);
    const char *qsets[] = {quoted};
    CHECK_INT_EQ(load(&e, path, qsets, 1, &err), DT_OK);
    if (err.msg[0]) fprintf(stderr, "%s\n", err.msg);
    dt_strbuf_free(&sb);
    free(br);
    /* how long it took is printed, not asserted (a loaded machine is not a defect): that
     * libyaml's scanner never ran on the deep texts is shown by the messages above, which
     * only the depth check before it gives */
    fprintf(stderr, "took %.2f s\n", now_s() - t0);
}

DT_TEST_MAIN(DT_CASE(load_full), DT_CASE(load_minimal_defaults), DT_CASE(malformed_yaml),
             DT_CASE(unknown_key), DT_CASE(wrong_type_int), DT_CASE(wrong_type_mapping),
             DT_CASE(out_of_range), DT_CASE(missing_required), DT_CASE(duplicate_key),
             DT_CASE(empty_file), DT_CASE(root_not_mapping), DT_CASE(file_missing),
             DT_CASE(bad_policy), DT_CASE(duplicate_policy), DT_CASE(policy_mappings),
             DT_CASE(policy_mappings_set), DT_CASE(policy_errors), DT_CASE(policy_names),
             DT_CASE(bad_vary), DT_CASE(set_changes_value), DT_CASE(set_list),
             DT_CASE(set_bad_value), DT_CASE(set_unknown_key), DT_CASE(set_missing_equals),
             DT_CASE(set_supplies_required), DT_CASE(scalar_parsing), DT_CASE(hidden_items),
             DT_CASE(recorded_digest_default), DT_CASE(write_json), DT_CASE(write_reference),
             DT_CASE(model_kind_keys), DT_CASE(bnn_keys), DT_CASE(bnn_key_errors),
             DT_CASE(vary_sets_file), DT_CASE(vary_sets_set), DT_CASE(vary_sets_errors),
             DT_CASE(report_keys), DT_CASE(hash_async_key), DT_CASE(json_round_trip),
             DT_CASE(deep_nesting_refused))
