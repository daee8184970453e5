/* Checkpoints and `detrain run --resume` (harness/record/checkpoint.c, harness/run/train.c).
 * unit: the file round trip, every malformed-file error with its message, the checks
 * against another config, policy, replica or model, and the config comparison.
 * e2e: runs killed (SIGKILL, through the test-only hook DETRAIN_TEST_KILL_AFTER_STEP, at a
 * step drawn from a fixed seed) or interrupted (SIGINT) and then resumed give trace.csv and
 * tensors.csv byte-identical to an uninterrupted run's, for the MLP, LeNet and the Bayesian
 * MLP (rng lfsr and philox) at run_to_run and portable; a finished run extended by
 * train.steps; fast resumes (not compared); and every refusal exits 2 naming what is
 * wrong. Each case writes under its own folder in DT_TEST_TMP_DIR. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "check.h"
#include "core/util.h"
#include "harness/record/checkpoint.h"
#include "harness/setup/config.h"
#include "harness/record/layout.h"
#include "harness/record/snapshot.h"
#include "harness/run/train.h"
#include "harness/setup/model.h"
#include "nets/backend.h"
#include "run_helper.h"

#define EXE DT_DETRAIN_EXE
#define TINY DT_TEST_DATA_DIR "/tiny.yaml"
#define TMP DT_TEST_TMP_DIR "/checkpoint."
#define KILL "DETRAIN_TEST_KILL_AFTER_STEP"

static char out[65536];

/* ---- helpers -------------------------------------------------------------------------- */

/* Numbers drawn from a fixed seed (splitmix64), so every run of the suite uses the same
 * ones and a failure can be replayed; each case has its own stream. */
static uint64_t draw(uint64_t stream)
{
    uint64_t z = 0x5eed2026u + stream * 0x9e3779b97f4a7c15u;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

/* The step (counted over the run's replicas, steps each, in run order) after which to kill
 * it: a random replica among the first n_replicas, a random step of it after its first
 * checkpoint (every `every` steps) and before its last step. */
static int64_t pick_kill(uint64_t stream, int n_replicas, int64_t steps, int64_t every)
{
    uint64_t z = draw(stream);
    int64_t replica = (int64_t)(z % (uint64_t)n_replicas);
    int64_t within = every + 1 + (int64_t)((z >> 32) % (uint64_t)(steps - every - 1));
    return replica * steps + within;
}

/* `detrain run` into dir (removed first) with extra arguments; its exit status. */
static int run(const char *env, const char *config, const char *dir, const char *extra)
{
    return dt_run_capture(out, sizeof out,
                          "rm -rf '%s' && DETRAIN_GNUPLOT=none %s '%s' run '%s' --out '%s' "
                          "--quiet %s",
                          dir, env, EXE, config, dir, extra);
}

static int resume(const char *config, const char *dir, const char *extra)
{
    return dt_run_capture(out, sizeof out,
                          "DETRAIN_GNUPLOT=none '%s' run '%s' --resume '%s' "
                          "--quiet %s",
                          EXE, config, dir, extra);
}

/* trace.csv and tensors.csv of every replica folder in `rel` are byte-identical between
 * two experiment folders, and `detrain compare` says so (exit 0). */
static void check_identical(const char *ref, const char *got, const char *const *rel, int n)
{
    for (int i = 0; i < n; i++) {
        const char *files[2] = {"trace.csv", "tensors.csv"};
        for (int f = 0; f < 2; f++) {
            char a[1024], b[1024];
            snprintf(a, sizeof a, "%s/%s/%s", ref, rel[i], files[f]);
            snprintf(b, sizeof b, "%s/%s/%s", got, rel[i], files[f]);
            if (!dt_files_equal(a, b)) fprintf(stderr, "differ: %s and %s\n", a, b);
            CHECK(dt_files_equal(a, b));
        }
        int rc = dt_run_capture(out, sizeof out, "'%s' compare '%s/%s' '%s/%s'", EXE, ref, rel[i],
                                got, rel[i]);
        if (rc != 0) fprintf(stderr, "compare %s:\n%s\n", rel[i], out);
        CHECK_INT_EQ(rc, 0);
    }
}

/* Every weight snapshot of the resumed replicas is byte-identical to the uninterrupted run's
 * at that step (none left over from the interrupted run); with `same_set` they also keep
 * the same steps (an extended run may lack snapshots its old schedule did not take). */
static void check_snapshots(const char *ref, const char *got, const char *const *rel, int n,
                            bool same_set)
{
    for (int i = 0; i < n; i++) {
        char a[1024], b[1024];
        snprintf(a, sizeof a, "%s/%s", ref, rel[i]);
        snprintf(b, sizeof b, "%s/%s", got, rel[i]);
        int64_t *sa = NULL, *sb = NULL;
        int na = 0, nb = 0;
        CHECK_INT_EQ(dt_snapshot_list(a, &sa, &na, NULL), DT_OK);
        CHECK_INT_EQ(dt_snapshot_list(b, &sb, &nb, NULL), DT_OK);
        if (same_set) CHECK_INT_EQ(nb, na);
        CHECK(nb >= 1);
        for (int j = 0; j < nb; j++) {
            char pa[1100], pb[1100];
            dt_snapshot_path(pa, sizeof pa, a, sb[j]);
            dt_snapshot_path(pb, sizeof pb, b, sb[j]);
            /* a snapshot of the interrupted run off the new schedule (another train.steps):
             * kept by the resume, and checked against its trace by compare below */
            if (!same_set && !dt_path_exists(pa)) continue;
            if (!dt_files_equal(pa, pb)) fprintf(stderr, "snapshot differs or is extra: %s\n", pb);
            CHECK(dt_files_equal(pa, pb));
        }
        free(sa);
        free(sb);
    }
}

/* How many of the replicas went on from a checkpoint (run.json "resumed_from_step"). */
static int count_resumed(const char *dir, const char *const *rel, int n)
{
    int k = 0;
    for (int i = 0; i < n; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s/run.json", dir, rel[i]);
        char *m = dt_read_file(path, NULL);
        k += m && strstr(m, "\"resumed_from_step\": ") != NULL;
        free(m);
    }
    return k;
}

/* Uninterrupted run vs the same run killed after step `kill` (global over its replicas)
 * and resumed: identical traces. kill_extra/resume_extra: arguments of those two runs only
 * (e.g. hash.async, which may change on resume). */
static void kill_and_resume(const char *name, const char *config, const char *sets, int64_t kill,
                            const char *kill_extra, const char *resume_extra,
                            const char *const *rel, int n)
{
    char ref[512], got[512], args[2048], env[64];
    snprintf(ref, sizeof ref, TMP "%s.ref", name);
    snprintf(got, sizeof got, TMP "%s.resumed", name);
    fprintf(stderr, "%s: SIGKILL after step %lld\n", name, (long long)kill);
    int rc = run("", config, ref, sets);
    if (rc != 0) fprintf(stderr, "%s\n", out);
    CHECK_INT_EQ(rc, 0);
    snprintf(env, sizeof env, "%s=%lld", KILL, (long long)kill);
    snprintf(args, sizeof args, "%s %s", sets, kill_extra);
    rc = run(env, config, got, args);
    CHECK_INT_EQ(rc, 137); /* 128 + SIGKILL, as the shell reports it */
    snprintf(args, sizeof args, "%s %s", sets, resume_extra);
    rc = resume(config, got, args);
    if (rc != 0) fprintf(stderr, "%s\n", out);
    CHECK_INT_EQ(rc, 0);
    check_identical(ref, got, rel, n);
    check_snapshots(ref, got, rel, n, true);
    CHECK(count_resumed(got, rel, n) >= 1); /* a checkpoint was used, not a restart */
    char path[600];
    snprintf(path, sizeof path, "%s/run.json", got);
    char *m = dt_read_file(path, NULL);
    CHECK(m != NULL);
    if (m) CHECK_CONTAINS(m, "\"resumed\": true");
    free(m);
}

/* ---- unit: the file -------------------------------------------------------------------- */

struct fixture {
    struct dt_experiment exp;
    struct dt_backend *be;
    struct dt_model *m;
};

static void fixture_open(struct fixture *f, const char *const *sets, int n_sets)
{
    memset(f, 0, sizeof *f);
    struct dt_error err;
    CHECK_INT_EQ(dt_config_load(&f->exp, TINY, sets, n_sets, &err), DT_OK);
    struct dt_backend_options bo = {DT_BACKEND_CPU, 1, 0};
    CHECK_INT_EQ(dt_backend_create(&f->be, &bo, &err), DT_OK);
    CHECK_INT_EQ(dt_experiment_build_model(&f->m, &f->exp, f->be, 2000, &err), DT_OK);
    dt_model_init(f->m, f->exp.train.seed, 0);
}

static void fixture_close(struct fixture *f)
{
    dt_model_destroy(f->m);
    dt_backend_destroy(f->be);
}

/* A checkpoint of the tiny MLP at step 7 with momenta that are not zero. */
static void write_sample(struct fixture *f, const char *path, const struct dt_checkpoint_info *info)
{
    for (int i = 0; i < f->m->n_params; i++) {
        const struct dt_param *p = &f->m->params[i];
        float *h = dt_xmalloc((size_t)p->n * sizeof(float));
        for (int64_t k = 0; k < p->n; k++) h[k] = (float)(i + 1) * 0.001f * (float)(k % 97) - 0.03f;
        dt_backend_upload(f->be, p->v, h, (size_t)p->n * sizeof(float));
        free(h);
    }
    f->m->step = 7;
    f->m->member = 3;
    struct dt_error err;
    CHECK_INT_EQ(dt_checkpoint_write(path, &f->exp, &f->exp.policies[0], f->m, info, &err), DT_OK);
}

static const char TRACED[] = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";

/* Write, read back, check and apply: every field and every weight and momentum bit. */
DT_TEST(format_round_trip)
{
    struct fixture f;
    fixture_open(&f, NULL, 0);
    const char *path = TMP "round_trip.bin";
    struct dt_checkpoint_info info = {11, 12, 7 * 32, 6, TRACED};
    write_sample(&f, path, &info);
    CHECK(!dt_path_exists(TMP "round_trip.bin.tmp"));
    struct dt_checkpoint ck;
    struct dt_error err;
    CHECK_INT_EQ(dt_checkpoint_read(&ck, path, &err), DT_OK);
    CHECK_INT_EQ(ck.step, 7);
    CHECK_INT_EQ(ck.seed, 5);
    CHECK_INT_EQ(ck.member, 3);
    CHECK_INT_EQ(ck.init_stream, 11);
    CHECK_INT_EQ(ck.order_stream, 12);
    CHECK_INT_EQ(ck.order_position, 7 * 32);
    CHECK_STR_EQ(ck.policy, "portable");
    CHECK_CONTAINS(ck.controls, "reduction=exact");
    CHECK_INT_EQ(ck.traced_step, 6);
    CHECK_STR_EQ(ck.traced_digest, TRACED);
    CHECK_CONTAINS(ck.config_json, "\"lr\":0.050000000000000003");
    CHECK_INT_EQ(ck.n_params, f.m->n_params);
    /* into a fresh model: every byte of w and v comes back */
    struct dt_model *m2 = NULL;
    CHECK_INT_EQ(dt_experiment_build_model(&m2, &f.exp, f.be, 2000, &err), DT_OK);
    dt_model_init(m2, 99, 1);
    struct dt_checkpoint_info want = {11, 12, 0, -1, NULL};
    CHECK_INT_EQ(dt_checkpoint_check(&ck, path, &f.exp, &f.exp.policies[0], m2, &want, 3, &err),
                 DT_OK);
    dt_checkpoint_apply(&ck, m2);
    CHECK_INT_EQ(m2->step, 7);
    CHECK_INT_EQ(m2->member, 3);
    CHECK_INT_EQ(m2->seed, 5);
    for (int i = 0; i < f.m->n_params; i++) {
        const struct dt_param *a = &f.m->params[i], *b = &m2->params[i];
        size_t bytes = (size_t)a->n * sizeof(float);
        float *x = dt_xmalloc(bytes), *y = dt_xmalloc(bytes);
        dt_backend_download(f.be, x, a->w, bytes);
        dt_backend_download(f.be, y, b->w, bytes);
        CHECK(memcmp(x, y, bytes) == 0);
        dt_backend_download(f.be, x, a->v, bytes);
        dt_backend_download(f.be, y, b->v, bytes);
        CHECK(memcmp(x, y, bytes) == 0);
        free(x);
        free(y);
    }
    dt_model_destroy(m2);
    dt_checkpoint_free(&ck);
    fixture_close(&f);
}

/* A copy of `src` cut to n bytes, or with byte `at` xor'ed with `flip`, or one byte added. */
static void mangle(const char *src, const char *dst, size_t n, long at, int flip, bool append)
{
    size_t len = 0;
    char *b = dt_read_file(src, &len);
    CHECK(b != NULL);
    if (!b) return;
    if (at >= 0) b[at] = (char)(b[at] ^ flip);
    FILE *f = fopen(dst, "wb");
    fwrite(b, 1, n < len ? n : len, f);
    if (append) fputc(0, f);
    fclose(f);
    free(b);
}

static void expect_error(const char *path, enum dt_status st, const char *what)
{
    struct dt_checkpoint ck;
    struct dt_error err = {0};
    CHECK_INT_EQ(dt_checkpoint_read(&ck, path, &err), st);
    CHECK_CONTAINS(err.msg, path);
    CHECK_CONTAINS(err.msg, what);
    CHECK(ck.params == NULL && ck.config_json == NULL); /* freed on error */
}

/* Every way a file can be wrong gives DT_ERR_DATA naming the file and the fault. */
DT_TEST(format_errors)
{
    struct fixture f;
    fixture_open(&f, NULL, 0);
    const char *good = TMP "errors.bin", *bad = TMP "errors.bad.bin";
    struct dt_checkpoint_info info = {0, 0, 7 * 32, 7, TRACED};
    write_sample(&f, good, &info);
    size_t len = 0;
    free(dt_read_file(good, &len));
    CHECK(len > 1000);
    const size_t cuts[] = {0, 5, 8, 20, 23, 24, 55, 200, len / 2, len - 32, len - 1};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        mangle(good, bad, cuts[i], -1, 0, false);
        expect_error(bad, DT_ERR_DATA, "truncated");
    }
    mangle(good, bad, len, -1, 0, true);
    expect_error(bad, DT_ERR_DATA, "trailing bytes");
    mangle(good, bad, len, 0, 0x20, false);
    expect_error(bad, DT_ERR_DATA, "bad magic");
    mangle(good, bad, len, 8, 0x03, false); /* version 1 -> 2 */
    expect_error(bad, DT_ERR_DATA, "format version 2");
    const long flips[] = {30, 100, 300, (long)len / 2, (long)len - 40, (long)len - 1};
    for (size_t i = 0; i < sizeof flips / sizeof flips[0]; i++) {
        mangle(good, bad, len, flips[i], 0x01, false);
        expect_error(bad, DT_ERR_DATA, "checksum mismatch");
    }
    expect_error(TMP "no-such-checkpoint.bin", DT_ERR_IO, "cannot open");
    fixture_close(&f);
}

/* The checks against this run: another config names the keys, another policy names both,
 * another replica's streams, another model's parameters, a step past train.steps. */
DT_TEST(check_refusals)
{
    struct fixture f;
    fixture_open(&f, NULL, 0);
    const char *path = TMP "check.bin";
    struct dt_checkpoint_info info = {0, 1, 7 * 32, 7, TRACED};
    write_sample(&f, path, &info);
    struct dt_checkpoint ck;
    struct dt_error err = {0};
    CHECK_INT_EQ(dt_checkpoint_read(&ck, path, &err), DT_OK);
    struct dt_checkpoint_info want = {0, 1, 0, -1, NULL};
    const struct dt_policy *pol = &f.exp.policies[0];
    CHECK_INT_EQ(dt_checkpoint_check(&ck, path, &f.exp, pol, f.m, &want, 3, &err), DT_OK);

    /* keys a resume may change are not part of the digest */
    struct dt_experiment e = f.exp;
    e.train.steps = 500;
    e.train.checkpoint_every = 9;
    e.hash.async = DT_HASH_ASYNC_ON;
    e.report.snapshots = 2;
    CHECK_INT_EQ(dt_checkpoint_check(&ck, path, &e, pol, f.m, &want, 3, &err), DT_OK);
    /* ... the others are, and the message names them with both values */
    e = f.exp;
    e.train.optimizer.lr = 0.1;
    e.hash.every = 2;
    CHECK_INT_EQ(dt_checkpoint_check(&ck, path, &e, pol, f.m, &want, 3, &err), DT_ERR_CONFIG);
    CHECK_CONTAINS(err.msg, path);
    CHECK_CONTAINS(err.msg, "train.optimizer.lr (checkpoint: 0.050000000000000003, this "
                            "config: 0.10000000000000001)");
    CHECK_CONTAINS(err.msg, "hash.every (checkpoint: 1, this config: 2)");
    /* policy: name or controls */
    struct dt_policy other;
    dt_policy_from_level(&other, DT_LEVEL_RUN_TO_RUN);
    CHECK_INT_EQ(dt_checkpoint_check(&ck, path, &f.exp, &other, f.m, &want, 3, &err),
                 DT_ERR_CONFIG);
    CHECK_CONTAINS(err.msg, "written under policy 'portable'");
    CHECK_CONTAINS(err.msg, "'run_to_run'");
    other = *pol;
    other.rng = DT_RNG_PHILOX; /* same name, another control */
    CHECK_INT_EQ(dt_checkpoint_check(&ck, path, &f.exp, &other, f.m, &want, 3, &err),
                 DT_ERR_CONFIG);
    CHECK_CONTAINS(err.msg, "rng=philox");
    /* another replica */
    struct dt_checkpoint_info want2 = {0, 0, 0, -1, NULL};
    CHECK_INT_EQ(dt_checkpoint_check(&ck, path, &f.exp, pol, f.m, &want2, 3, &err), DT_ERR_CONFIG);
    CHECK_CONTAINS(err.msg, "another replica");
    CHECK_INT_EQ(dt_checkpoint_check(&ck, path, &f.exp, pol, f.m, &want, 0, &err), DT_ERR_CONFIG);
    CHECK_CONTAINS(err.msg, "epsilon member 3");
    /* a step past train.steps */
    e = f.exp;
    e.train.steps = 6;
    CHECK_INT_EQ(dt_checkpoint_check(&ck, path, &e, pol, f.m, &want, 3, &err), DT_ERR_CONFIG);
    CHECK_CONTAINS(err.msg, "past train.steps 6");
    /* another model (same digest forced by checking against its own config) */
    dt_checkpoint_free(&ck);
    const char *sets[] = {"model.hidden=[33]"};
    struct fixture g;
    fixture_open(&g, sets, 1);
    write_sample(&g, path, &info);
    CHECK_INT_EQ(dt_checkpoint_read(&ck, path, &err), DT_OK);
    CHECK_INT_EQ(dt_checkpoint_check(&ck, path, &g.exp, pol, f.m, &want, 3, &err), DT_ERR_DATA);
    CHECK_CONTAINS(err.msg, "parameter 0 is dense0.weight (784, 33); the model's is "
                            "dense0.weight (784, 32)");
    dt_checkpoint_free(&ck);
    fixture_close(&g);
    fixture_close(&f);
}

/* The config as lines: nested keys dotted, lists as written, the resumable keys left out;
 * the diff names keys present on one side only. */
DT_TEST(config_lines)
{
    struct dt_strbuf sb = {0};
    struct dt_error err;
    CHECK_INT_EQ(dt_checkpoint_config_lines(&sb,
                                            "{\"name\":\"a\",\"train\":{\"steps\":5,\"optimizer\":"
                                            "{\"lr\":0.5},\"checkpoint_every\":2},\"policies\":[{"
                                            "\"name\":\"x,y\"}],\"hash\":{\"every\":1,\"async\":"
                                            "\"on\"},\"report\":{\"snapshots\":3}}\n",
                                            "t", &err),
                 DT_OK);
    CHECK_STR_EQ(sb.data, "name=\"a\"\ntrain.optimizer.lr=0.5\npolicies=[{\"name\":\"x,y\"}]\n"
                          "hash.every=1\n");
    CHECK_INT_EQ(dt_checkpoint_config_lines(&sb, "{\"name\":", "broken.json", &err), DT_ERR_DATA);
    CHECK_CONTAINS(err.msg, "broken.json: not a detrain config");
    char diff[512];
    bool differ = false;
    CHECK_INT_EQ(dt_checkpoint_config_diff(diff, sizeof diff, &differ, "{\"a\":1,\"b\":{\"c\":2}}",
                                           "A", "{\"b\":{\"c\":2,\"d\":3},\"a\":1}", "B", &err),
                 DT_OK);
    CHECK(differ);
    CHECK_STR_EQ(diff, "b.d (A: absent, B: 3)");
    CHECK_INT_EQ(dt_checkpoint_config_diff(diff, sizeof diff, &differ, "{\"a\":1}", "A",
                                           "{\"a\":1,\"train\":{\"steps\":9}}", "B", &err),
                 DT_OK);
    CHECK(!differ);
    dt_strbuf_free(&sb);
}

/* ---- e2e: killed and resumed ----------------------------------------------------------- */

static const char *const TINY_REL[] = {"run_to_run/replica-0", "run_to_run/replica-1",
                                       "portable/replica-0", "portable/replica-1"};

/* The MLP at run_to_run and portable (2 x 2 replicas of 30 steps), killed at a random
 * step: once hashing every step, pipelined (hash.async on) in the killed run and inline
 * after the resume; once hashing every 3rd step. */
DT_TEST(mlp_kill_resume)
{
    const char *sets = "--set 'policies=[run_to_run, portable]' --set train.checkpoint_every=4 "
                       "--set report.overhead_samples=0";
    kill_and_resume("mlp", TINY, sets, pick_kill(1, 4, 30, 4), "--set hash.async=on",
                    "--set hash.async=off", TINY_REL, 4);
    char sets3[512];
    snprintf(sets3, sizeof sets3, "%s --set hash.every=3", sets);
    kill_and_resume("mlp_every3", TINY, sets3, pick_kill(2, 4, 30, 4), "", "", TINY_REL, 4);
}

static const char LENET_YAML[] = "name: ck-lenet\n"
                                 "dataset: {train_limit: 400, test_limit: 200}\n"
                                 "model: {kind: lenet}\n"
                                 "train: {steps: 16, batch: 16, seed: 3, eval_every: 5,\n"
                                 "        checkpoint_every: 3}\n"
                                 "backend: {threads: 2}\n"
                                 "policies: [run_to_run, portable]\n"
                                 "replicas: 1\n"
                                 "hash: {per_tensor: true}\n"
                                 "report: {overhead_samples: 0, snapshots: 4}\n";

DT_TEST(lenet_kill_resume)
{
    const char *cfg = TMP "lenet.yaml";
    dt_write_text(cfg, LENET_YAML);
    static const char *const rel[] = {"run_to_run/replica-0", "portable/replica-0"};
    kill_and_resume("lenet", cfg, "", pick_kill(3, 2, 16, 3), "", "", rel, 2);
}

/* The Bayesian MLP: run_to_run and portable draw epsilon with the lfsr lanes, the third
 * policy with Philox; two ensemble members per cell. */
static const char BNN_YAML[] = "name: ck-bnn\n"
                               "dataset: {train_limit: 400, test_limit: 200}\n"
                               "model: {kind: bnn_mlp, hidden: [32], samples: 2, test_samples: 2,\n"
                               "        lanes: 64, lfsr_check_every: 2}\n"
                               "train: {steps: 16, batch: 16, seed: 4, eval_every: 5,\n"
                               "        checkpoint_every: 3}\n"
                               "backend: {threads: 2}\n"
                               "policies: [run_to_run, portable, {base: portable, rng: philox}]\n"
                               "replicas: 2\n"
                               "vary: [epsilon]\n"
                               "hash: {per_tensor: true}\n"
                               "report: {overhead_samples: 0, snapshots: 4}\n";

DT_TEST(bnn_kill_resume)
{
    const char *cfg = TMP "bnn.yaml";
    dt_write_text(cfg, BNN_YAML);
    static const char *const rel[] = {
        "run_to_run/replica-0", "run_to_run/replica-1",          "portable/replica-0",
        "portable/replica-1",   "portable+rng=philox/replica-0", "portable+rng=philox/replica-1"};
    kill_and_resume("bnn", cfg, "", pick_kill(4, 4, 16, 3), "", "", rel, 6);
    /* a kill inside the philox cell */
    kill_and_resume("bnn_philox", cfg, "", 4 * 16 + pick_kill(5, 2, 16, 3), "", "", rel, 6);
}

/* SIGINT mid-run: exit 130, manifests interrupted, a checkpoint although
 * train.checkpoint_every is 0; the resume (the second replica never started) is identical
 * to an uninterrupted run. The signal comes after step 50 of replica 0 (the signal hook,
 * through the same handler as a user's Ctrl-C), not wherever a polling loop sent it:
 * replica 0 is always cut partway. (cli.sigint_keeps_valid_prefix sends a real one.) */
DT_TEST(sigint_resume)
{
    const char *sets = "--set train.steps=1500 --set report.overhead_samples=0";
    const char *ref = TMP "sigint.ref", *got = TMP "sigint.resumed";
    CHECK_INT_EQ(run("", TINY, ref, sets), 0);
    int rc = dt_run_capture(out, sizeof out,
                            "rm -rf '%s'; DETRAIN_GNUPLOT=none DETRAIN_TEST_SIGNAL_AFTER_STEP=50 "
                            "'%s' run '%s' --out '%s' --quiet %s 2>&1",
                            got, EXE, TINY, got, sets);
    CHECK_INT_EQ(rc, 130);
    char *trace = dt_read_file(TMP "sigint.resumed/portable/replica-0/trace.csv", NULL);
    int lines = 0;
    for (char *p = trace; p && *p; p++) lines += *p == '\n';
    free(trace);
    CHECK_INT_EQ(lines, 52); /* the header and steps 0..50 */
    CHECK_CONTAINS(out, "interrupted by signal 2");
    char *m = dt_read_file(TMP "sigint.resumed/run.json", NULL);
    CHECK(m != NULL);
    if (m) CHECK_CONTAINS(m, "\"status\": \"interrupted\"");
    free(m);
    m = dt_read_file(TMP "sigint.resumed/portable/replica-0/run.json", NULL);
    CHECK(m != NULL);
    if (m) CHECK_CONTAINS(m, "\"state\": \"interrupted\"");
    if (m) CHECK_CONTAINS(m, "checkpoint.bin written");
    free(m);
    CHECK(dt_path_exists(TMP "sigint.resumed/portable/replica-0/checkpoint.bin"));
    CHECK(!dt_path_exists(TMP "sigint.resumed/portable/replica-0/checkpoint.bin.tmp"));
    rc = resume(TINY, got, sets);
    if (rc != 0) fprintf(stderr, "%s\n", out);
    CHECK_INT_EQ(rc, 0);
    static const char *const rel[] = {"portable/replica-0", "portable/replica-1"};
    check_identical(ref, got, rel, 2);
    check_snapshots(ref, got, rel, 2, true);
    CHECK_INT_EQ(count_resumed(got, rel, 2), 1);
}

/* A finished run (checkpoint at its last step) extended by train.steps is identical to a
 * run of the longer length, although its old last step was hashed only as the last one
 * (hash.every 4) and its snapshots followed another schedule. */
DT_TEST(extend_steps)
{
    const char *sets = "--set train.checkpoint_every=10 --set hash.every=4 "
                       "--set report.overhead_samples=0";
    char args[512];
    const char *ref = TMP "extend.ref", *got = TMP "extend.resumed";
    snprintf(args, sizeof args, "%s --set train.steps=45", sets);
    CHECK_INT_EQ(run("", TINY, ref, args), 0);
    CHECK_INT_EQ(run("", TINY, got, sets), 0); /* 30 steps */
    CHECK_INT_EQ(resume(TINY, got, args), 0);
    static const char *const rel[] = {"portable/replica-0", "portable/replica-1"};
    check_identical(ref, got, rel, 2);
    check_snapshots(ref, got, rel, 2, false);
    CHECK_INT_EQ(count_resumed(got, rel, 2), 2);
    char *m = dt_read_file(TMP "extend.resumed/portable/replica-0/run.json", NULL);
    CHECK(m != NULL);
    if (m) CHECK_CONTAINS(m, "\"resumed_from_step\": 30");
    free(m);
}

/* Killed right after the checkpoint of a replica's last step, before its final evaluation
 * and manifest: the resume runs no step, keeps the last row (hashed as the last step only,
 * hash.every 4) and finishes; metrics.csv and predictions.csv match too. */
DT_TEST(last_step_checkpoint)
{
    const char *sets = "--set train.checkpoint_every=7 --set hash.every=4 "
                       "--set train.eval_every=10 --set report.overhead_samples=0";
    const char *ref = TMP "last_step.ref", *got = TMP "last_step.resumed";
    CHECK_INT_EQ(run("", TINY, ref, sets), 0);
    CHECK_INT_EQ(run(KILL "=30", TINY, got, sets), 137);
    CHECK_INT_EQ(resume(TINY, got, sets), 0);
    static const char *const rel[] = {"portable/replica-0", "portable/replica-1"};
    check_identical(ref, got, rel, 2);
    CHECK(dt_files_equal(TMP "last_step.ref/portable/replica-0/metrics.csv",
                         TMP "last_step.resumed/portable/replica-0/metrics.csv"));
    CHECK(dt_files_equal(TMP "last_step.ref/portable/replica-0/predictions.csv",
                         TMP "last_step.resumed/portable/replica-0/predictions.csv"));
    char *m = dt_read_file(TMP "last_step.resumed/portable/replica-0/run.json", NULL);
    CHECK(m != NULL);
    if (m) CHECK_CONTAINS(m, "\"resumed_from_step\": 30");
    free(m);
}

/* fast is nondeterministic: resuming it is allowed (and completes); traces not compared. */
DT_TEST(fast_resumes)
{
    const char *sets = "--set policies=[fast] --set train.checkpoint_every=5 "
                       "--set report.overhead_samples=0";
    const char *dir = TMP "fast";
    CHECK_INT_EQ(run(KILL "=37", TINY, dir, sets), 137);
    CHECK_INT_EQ(resume(TINY, dir, sets), 0);
    char f[80];
    CHECK_INT_EQ(dt_csv_field(f, sizeof f, TMP "fast/fast/replica-1/trace.csv", 30, 0), 0);
    CHECK_STR_EQ(f, "30");
}

/* A killed run to break in the cases below: policies run_to_run and portable, replicas
 * with vary: [init], checkpoints every 4 steps, killed after global step `kill` (70: in
 * portable/replica-0, the run_to_run replicas finished). */
#define BROKEN_SETS                                                                                \
    "--set 'policies=[run_to_run, portable]' --set 'vary=[init]' "                                 \
    "--set train.checkpoint_every=4 --set report.overhead_samples=0"
static void broken_base(const char *dir, int kill)
{
    char env[64];
    snprintf(env, sizeof env, KILL "=%d", kill);
    CHECK_INT_EQ(run(env, TINY, dir, BROKEN_SETS), 137);
}

DT_TEST(truncated_checkpoint)
{
    const char *dir = TMP "truncated";
    broken_base(dir, 70);
    const char *ck = TMP "truncated/portable/replica-0/checkpoint.bin";
    size_t len = 0;
    char *b = dt_read_file(ck, &len);
    CHECK(b != NULL && len > 100);
    FILE *f = fopen(ck, "wb");
    fwrite(b, 1, len / 2, f);
    fclose(f);
    free(b);
    char *trace_before = dt_read_file(TMP "truncated/portable/replica-0/trace.csv", NULL);
    CHECK_INT_EQ(resume(TINY, dir, BROKEN_SETS), 2);
    CHECK_CONTAINS(out, ck);
    CHECK_CONTAINS(out, "truncated checkpoint");
    /* refused before the first step: nothing on disk changed */
    char *trace_after = dt_read_file(TMP "truncated/portable/replica-0/trace.csv", NULL);
    CHECK(trace_before && trace_after && strcmp(trace_before, trace_after) == 0);
    free(trace_before);
    free(trace_after);
}

DT_TEST(other_config_checkpoint)
{
    const char *dir = TMP "other_config", *other = TMP "other_config.lr";
    broken_base(dir, 70);
    CHECK_INT_EQ(run(KILL "=70", TINY, other, BROKEN_SETS " --set train.optimizer.lr=0.07"), 137);
    CHECK_INT_EQ(system("cp '" TMP "other_config.lr/portable/replica-0/checkpoint.bin' '" TMP
                        "other_config/portable/replica-0/checkpoint.bin'"),
                 0);
    CHECK_INT_EQ(resume(TINY, dir, BROKEN_SETS), 2);
    CHECK_CONTAINS(out, TMP "other_config/portable/replica-0/checkpoint.bin: written under "
                            "another config: train.optimizer.lr (checkpoint: 0.070000000000000007, "
                            "this config: 0.050000000000000003)");
}

DT_TEST(other_policy_checkpoint)
{
    const char *dir = TMP "other_policy";
    broken_base(dir, 70);
    CHECK_INT_EQ(system("cp '" TMP "other_policy/run_to_run/replica-0/checkpoint.bin' '" TMP
                        "other_policy/portable/replica-0/checkpoint.bin'"),
                 0);
    CHECK_INT_EQ(resume(TINY, dir, BROKEN_SETS), 2);
    CHECK_CONTAINS(out, "portable/replica-0/checkpoint.bin: written under policy 'run_to_run'");
}

/* The folder must be an experiment of this config; --out must be the folder; a checkpoint
 * of another replica (vary: [init] gives each its own init stream) is refused; the keys a
 * resume may change are not. */
DT_TEST(resume_refusals)
{
    const char *dir = TMP "refusals";
    broken_base(dir, 40); /* in run_to_run/replica-1 */
    CHECK_INT_EQ(resume(TINY, dir, BROKEN_SETS " --set train.optimizer.momentum=0.5"), 2);
    CHECK_CONTAINS(out, "refusals: not an experiment of this config: train.optimizer.momentum "
                        "(config.json: 0.90000000000000002, this config: 0.5)");
    CHECK_INT_EQ(resume(TINY, dir, BROKEN_SETS " --set policies=[portable]"), 2);
    CHECK_CONTAINS(out, "not an experiment of this config: policies");
    CHECK_INT_EQ(resume(TINY, dir, BROKEN_SETS " --out " TMP "elsewhere"), 2);
    CHECK_CONTAINS(out, "--out must be the --resume folder");
    CHECK_INT_EQ(resume(TINY, TMP "no-such-folder", BROKEN_SETS), 2);
    CHECK_CONTAINS(out, "no-such-folder: no such result folder");
#define CK(r) TMP "refusals/run_to_run/replica-" #r "/checkpoint.bin"
    CHECK_INT_EQ(system("cp '" CK(1) "' '" CK(1) ".keep' && cp '" CK(0) "' '" CK(1) "'"), 0);
    CHECK_INT_EQ(resume(TINY, dir, BROKEN_SETS), 2);
    CHECK_CONTAINS(out, "run_to_run/replica-1/checkpoint.bin: written for another replica "
                        "(streams init 0");
    CHECK_INT_EQ(system("mv '" CK(1) ".keep' '" CK(1) "'"), 0);
#undef CK
    /* train.steps, checkpoint_every, hash.async and report.* may change; --out may name the
     * folder another way */
    CHECK_INT_EQ(resume(TINY, dir,
                        BROKEN_SETS " --set train.checkpoint_every=6 --set "
                                    "hash.async=on --set report.snapshots=3 --out " TMP
                                    "refusals/."),
                 0);
    char f[80];
    CHECK_INT_EQ(dt_csv_field(f, sizeof f, TMP "refusals/portable/replica-1/trace.csv", 30, 0), 0);
    CHECK_STR_EQ(f, "30");
}

/* ---- round three of the misuse probe ---------------------------------------------------- */

#define GPT_TINY DT_TEST_DATA_DIR "/gpt_tiny.yaml"
#define GPT_SETS                                                                                   \
    "--set policies=[portable] --set replicas=1 --set train.checkpoint_every=2 "                   \
    "--set dataset.path=" TMP "data.corpus.txt"

/* --resume checks the data the run read (run.json's data_digest): a corpus edited between
 * the run and the resume is refused, naming it, and nothing changes on disk; the corpus as it
 * was resumes. */
DT_TEST(resume_checks_data)
{
    const char *dir = TMP "data", *corpus = TMP "data.corpus.txt";
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "cp '%s/gpt_corpus.txt' '%s'", DT_TEST_DATA_DIR, corpus);
    CHECK_INT_EQ(system(cmd), 0);
    CHECK(run(KILL "=5", GPT_TINY, dir, GPT_SETS) != 0);
    char *before = dt_read_file(TMP "data/portable/replica-0/trace.csv", NULL);
    CHECK(before != NULL);
    snprintf(cmd, sizeof cmd, "sed -i '1s/^./X/' '%s'", corpus);
    CHECK_INT_EQ(system(cmd), 0);
    CHECK_INT_EQ(resume(GPT_TINY, dir, GPT_SETS), 2);
    CHECK_CONTAINS(out, "the data changed since this run read it (text in ");
    char *after = dt_read_file(TMP "data/portable/replica-0/trace.csv", NULL);
    CHECK(after != NULL && before != NULL && strcmp(before, after) == 0);
    free(after);
    snprintf(cmd, sizeof cmd, "cp '%s/gpt_corpus.txt' '%s'", DT_TEST_DATA_DIR, corpus);
    CHECK_INT_EQ(system(cmd), 0);
    CHECK_INT_EQ(resume(GPT_TINY, dir, GPT_SETS), 0);
    free(before);
}

/* Extending a finished run (--resume --set train.steps=N) is refused under the cosine
 * schedule, which decays to train.steps (the steps run so far had other learning rates);
 * under a constant schedule it is accepted. */
DT_TEST(resume_cosine_extend_refused)
{
    const char *dir = TMP "cosine", *corpus = TMP "data.corpus.txt";
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "cp -n '%s/gpt_corpus.txt' '%s' 2>/dev/null; true", DT_TEST_DATA_DIR,
             corpus);
    (void)system(cmd);
    CHECK_INT_EQ(run("", GPT_TINY, dir, GPT_SETS " --set train.steps=6"), 0);
    CHECK_INT_EQ(resume(GPT_TINY, dir, GPT_SETS " --set train.steps=8"), 2);
    CHECK_CONTAINS(out, "train.steps was 6, now 8, under the cosine schedule");
    const char *constant = GPT_SETS " --set train.optimizer.schedule=constant";
    snprintf(cmd, sizeof cmd, "%s --set train.steps=6", constant);
    CHECK_INT_EQ(run("", GPT_TINY, dir, cmd), 0);
    snprintf(cmd, sizeof cmd, "%s --set train.steps=8", constant);
    CHECK_INT_EQ(resume(GPT_TINY, dir, cmd), 0);
}

/* A result written by an older build, whose config.json lacks keys added since (here
 * train.shards, at its default), resumes: a missing key counts at its default value. */
DT_TEST(resume_older_build_config)
{
    const char *dir = TMP "older";
    CHECK(run(KILL "=12", TINY, dir, "--set train.checkpoint_every=5") != 0);
    CHECK_INT_EQ(system("sed -i 's/\"shards\":4,//' '" TMP "older/config.json'"), 0);
    char *cfg = dt_read_file(TMP "older/config.json", NULL);
    CHECK(cfg != NULL && strstr(cfg, "shards") == NULL);
    free(cfg);
    CHECK_INT_EQ(resume(TINY, dir, "--set train.checkpoint_every=5"), 0);
    if (strlen(out)) fprintf(stderr, "%s\n", out);
}

/* report.snapshots changed on --resume: the snapshots the interrupted run wrote up to its
 * checkpoint are kept (weights it will not compute again), unchanged, and still match the
 * trace (compare checks each one). */
DT_TEST(resume_keeps_snapshots)
{
    const char *dir = TMP "snaps";
    const char *rep = TMP "snaps/portable/replica-0";
    CHECK(run(KILL "=20", TINY, dir, "--set train.checkpoint_every=5 --set report.snapshots=8") !=
          0);
    int64_t *before = NULL;
    int n_before = 0;
    CHECK_INT_EQ(dt_snapshot_list(rep, &before, &n_before, NULL), DT_OK);
    CHECK(n_before >= 3);
    CHECK_INT_EQ(system("rm -rf '" TMP "snaps.keep' && cp -r '" TMP "snaps' '" TMP "snaps.keep'"),
                 0);
    CHECK_INT_EQ(resume(TINY, dir, "--set train.checkpoint_every=5 --set report.snapshots=2"), 0);
    for (int i = 0; i < n_before; i++) {
        char a[1100], b[1100];
        dt_snapshot_path(a, sizeof a, TMP "snaps.keep/portable/replica-0", before[i]);
        dt_snapshot_path(b, sizeof b, rep, before[i]);
        if (before[i] > 20) continue; /* after the checkpoint: not the run's any more */
        if (!dt_files_equal(a, b)) fprintf(stderr, "lost or changed: %s\n", b);
        CHECK(dt_files_equal(a, b));
    }
    free(before);
    CHECK_INT_EQ(dt_run_capture(out, sizeof out, "'%s' compare '%s' '%s'", EXE, rep, rep), 0);
}

DT_TEST_MAIN(DT_CASE(format_round_trip), DT_CASE(format_errors), DT_CASE(check_refusals),
             DT_CASE(config_lines), DT_CASE(mlp_kill_resume), DT_CASE(lenet_kill_resume),
             DT_CASE(bnn_kill_resume), DT_CASE(sigint_resume), DT_CASE(extend_steps),
             DT_CASE(last_step_checkpoint), DT_CASE(fast_resumes), DT_CASE(truncated_checkpoint),
             DT_CASE(other_config_checkpoint), DT_CASE(other_policy_checkpoint),
             DT_CASE(resume_refusals), DT_CASE(resume_checks_data),
             DT_CASE(resume_cosine_extend_refused), DT_CASE(resume_older_build_config),
             DT_CASE(resume_keeps_snapshots))
