/* Data parallelism over MPI ranks (harness/run/dist.h): at reduction: exact (portable) the
 * traces of N = 1, 2, 3, 4 ranks equal each other and the plain single-process run's; under
 * unordered and fixed they depend on N (the negative control); a rank whose weights are
 * perturbed is named with its step; a checkpoint taken with N ranks resumes with another N
 * into the identical trace. The e2e cases run `mpirun --oversubscribe`; they skip (77)
 * when detrain was built without MPI. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "determinism/fixed_point.h"
#include "core/util.h"
#include "harness/run/dist.h"
#include "nets/backend.h"
#include "nets/model.h"
#include "nets/step.h"
#include "run_helper.h"

#define EXE DT_DETRAIN_EXE
#define TMP DT_TEST_TMP_DIR "/dist."
/* root in CI containers; one slot per rank on a two-core machine */
#define MPIRUN DT_MPIRUN

static bool skip_without_mpi(void)
{
    if (dt_dist_have_mpi()) return false;
    fprintf(stderr, "skipped: detrain was built without MPI (DETRAIN_MPI)\n");
    return true;
}

static char out_[1 << 16];

/* detrain run CONFIG into dir, with np ranks (0 = no mpirun); the exit status. */
static int run_ranks(int np, const char *env, const char *config, const char *dir, const char *sets)
{
    char rm[1200];
    snprintf(rm, sizeof rm, "rm -rf '%s'", dir);
    DT_ASSERT(system(rm) == 0);
    int rc;
    if (np == 0)
        rc = dt_run_capture(out_, sizeof out_, "%s %s run %s --out %s --quiet %s", env, EXE, config,
                            dir, sets);
    else
        rc = dt_run_capture(out_, sizeof out_, "%s " MPIRUN " -np %d %s run %s --out %s --quiet %s",
                            env, np, EXE, config, dir, sets);
    if (rc != 0) fprintf(stderr, "[np=%d rc=%d] %s\n", np, rc, out_);
    return rc;
}

/* Do dir_a and dir_b hold the same bytes in rel (a file under each)? */
static bool same_file(const char *dir_a, const char *dir_b, const char *rel)
{
    char pa[1300], pb[1300];
    snprintf(pa, sizeof pa, "%s/%s", dir_a, rel);
    snprintf(pb, sizeof pb, "%s/%s", dir_b, rel);
    size_t la = 0, lb = 0;
    char *a = dt_read_file(pa, &la), *b = dt_read_file(pb, &lb);
    bool same = a && b && la == lb && memcmp(a, b, la) == 0;
    if (!a || !b) fprintf(stderr, "missing: %s or %s\n", pa, pb);
    free(a);
    free(b);
    return same;
}

/* How many trace rows (header excluded) a file has. */
static int trace_rows(const char *path)
{
    char *t = dt_read_file(path, NULL);
    if (!t) return -1;
    int n = -1;
    for (char *p = t; *p; p++) n += *p == '\n';
    free(t);
    return n;
}

static const char MLP_YAML[] = "name: dist-mlp\n"
                               "dataset: {train_limit: 1000, test_limit: 200}\n"
                               "model: {kind: mlp, hidden: [32]}\n"
                               "train: {steps: 12, batch: 48, shards: 12, seed: 7}\n"
                               "backend: {threads: 1}\n"
                               "policies: [portable]\n"
                               "replicas: 1\n"
                               "hash: {per_tensor: true}\n"
                               "report: {overhead_samples: 0}\n";

static const char LENET_YAML[] = "name: dist-lenet\n"
                                 "dataset: {train_limit: 300, test_limit: 100}\n"
                                 "model: {kind: lenet}\n"
                                 "train: {steps: 5, batch: 16, shards: 4, seed: 3}\n"
                                 "backend: {threads: 1}\n"
                                 "policies: [portable]\n"
                                 "replicas: 1\n"
                                 "hash: {per_tensor: true}\n"
                                 "report: {overhead_samples: 0}\n";

/* A residual network with batch normalisation: each shard's statistics are its own, so the
 * ranks (and threads) that share the 4 shards of a batch of 22 (5, 6, 5, 6 rows) change no
 * bit -- the running statistics (in tensors.csv and the digest) gathered in shard order. */
static const char BN_YAML[] =
    "name: dist-bn\n"
    "dataset: {train_limit: 300, test_limit: 100}\n"
    "model: {kind: net, network: [{conv: 4, kernel: 3, stride: 2, pad: 1},"
    " batchnorm, relu, {residual: [{conv: 4, kernel: 3, pad: 1},"
    " batchnorm]}, relu, global_avgpool, {dense: 10}]}\n"
    "train: {steps: 5, batch: 22, shards: 4, seed: 3, eval_every: 5}\n"
    "backend: {threads: 1}\n"
    "policies: [portable]\n"
    "replicas: 1\n"
    "hash: {per_tensor: true}\n"
    "report: {overhead_samples: 0}\n";

/* The Bayesian MLP: 2 Monte Carlo samples, the KL term on (kl_weight 1 / train_limit),
 * the lanes' end-state check at every step; a batch of 25 in 6 shards (4, 4, 4, 4, 4, 5 rows), so
 * ranks hold uneven rows. Three cells: epsilon by the lanes (portable), by Philox, and stored. */
static const char BNN_YAML[] = "name: dist-bnn\n"
                               "dataset: {train_limit: 300, test_limit: 100}\n"
                               "model: {kind: bnn_mlp, hidden: [16], samples: 2, test_samples: 2,"
                               " lanes: 64, lfsr_check_every: 1}\n"
                               "train: {steps: 6, batch: 25, shards: 6, seed: 11}\n"
                               "backend: {threads: 1}\n"
                               "policies: [portable, {base: portable, rng: philox},"
                               " {base: portable, rng: stored}]\n"
                               "replicas: 1\n"
                               "hash: {per_tensor: true}\n"
                               "report: {overhead_samples: 0}\n";
static const char *const BNN_CELLS[] = {"portable", "portable+rng=philox", "portable+rng=stored"};

/* Does dir hold rel (a trace.csv) with rows steps 0..steps? */
static bool full_trace(const char *dir, const char *cell, int steps)
{
    char path[800];
    snprintf(path, sizeof path, "%s/%s/replica-0/trace.csv", dir, cell);
    return trace_rows(path) == steps + 1;
}

/* portable: the plain run (one thread) and mpirun -np nps[i] with sets[i] give the same
 * trace.csv (every step's digest and loss) and tensors.csv in every cell, and run.json
 * names the rank count. */
static void ranks_identical_env(const char *tag, const char *yaml, int steps, int n_runs,
                                const int *nps, const char *const *sets, int n_cells,
                                const char *const *cells, const char *env)
{
    char cfg[512], plain[512], dir[512];
    snprintf(cfg, sizeof cfg, TMP "%s.yaml", tag);
    dt_write_text(cfg, yaml);
    snprintf(plain, sizeof plain, TMP "%s.plain", tag);
    CHECK_INT_EQ(run_ranks(0, "", cfg, plain, ""), 0);
    for (int c = 0; c < n_cells; c++) CHECK(full_trace(plain, cells[c], steps));
    for (int i = 0; i < n_runs; i++) {
        const int np = nps[i];
        snprintf(dir, sizeof dir, TMP "%s.run%d", tag, i);
        CHECK_INT_EQ(run_ranks(np, env, cfg, dir, sets ? sets[i] : ""), 0);
        for (int c = 0; c < n_cells; c++) {
            char rel[300];
            snprintf(rel, sizeof rel, "%s/replica-0/trace.csv", cells[c]);
            CHECK(same_file(plain, dir, rel));
            snprintf(rel, sizeof rel, "%s/replica-0/tensors.csv", cells[c]);
            CHECK(same_file(plain, dir, rel));
        }
        char path[700];
        snprintf(path, sizeof path, "%s/run.json", dir);
        char *manifest = dt_read_file(path, NULL);
        char want[32];
        snprintf(want, sizeof want, "\"ranks\": %d,", np ? np : 1);
        CHECK(manifest != NULL);
        if (manifest) CHECK_CONTAINS(manifest, want);
        free(manifest);
    }
}

static void ranks_identical_cells(const char *tag, const char *yaml, int steps, int n_runs,
                                  const int *nps, const char *const *sets, int n_cells,
                                  const char *const *cells)
{
    ranks_identical_env(tag, yaml, steps, n_runs, nps, sets, n_cells, cells, "");
}

/* portable: N = 1..4 ranks and the plain run give the same trace.csv and tensors.csv. */
static void ranks_identical(const char *tag, const char *yaml, int steps, int max_np)
{
    static const char *const cells[] = {"portable"};
    int nps[8];
    for (int np = 1; np <= max_np; np++) nps[np - 1] = np;
    ranks_identical_cells(tag, yaml, steps, max_np, nps, NULL, 1, cells);
}

DT_TEST(portable_mlp_ranks)
{
    if (skip_without_mpi()) exit(77);
    ranks_identical("mlp", MLP_YAML, 12, 4);
}

DT_TEST(portable_lenet_ranks)
{
    if (skip_without_mpi()) exit(77);
    ranks_identical("lenet", LENET_YAML, 5, 4);
}

/* batch normalisation at portable: the plain run's digests at every step with 1, 2 and 4
 * ranks, and with 2 threads (plain and on 2 ranks). */
DT_TEST(portable_batchnorm_ranks)
{
    if (skip_without_mpi()) exit(77);
    static const int nps[] = {1, 2, 4, 0, 2};
    static const char *const sets[] = {"", "", "", "--set backend.threads=2",
                                       "--set backend.threads=2"};
    static const char *const cells[] = {"portable"};
    ranks_identical_cells("bn", BN_YAML, 5, 5, nps, sets, 1, cells);
}

/* bnn_mlp at portable: the plain run's digests at every step with 1, 2 and 3 ranks, and
 * with 2 threads (plain and on 2 ranks): every rank draws the same epsilon, the KL term is
 * added once after the exact sum over every shard of every rank. */
DT_TEST(portable_bnn_ranks)
{
    if (skip_without_mpi()) exit(77);
    static const int nps[] = {1, 2, 3, 0, 2};
    static const char *const sets[] = {"", "", "", "--set backend.threads=2",
                                       "--set backend.threads=2"};
    ranks_identical_cells("bnn", BNN_YAML, 6, 5, nps, sets, 3, BNN_CELLS);
}

/* The local estimator (noise per example and unit, keyed by global row): the plain run's
 * digests at every step with 1, 2 and 3 ranks and with 2 threads, in all three rng modes. */
DT_TEST(portable_bnn_local_ranks)
{
    if (skip_without_mpi()) exit(77);
    static const int nps[] = {1, 2, 3, 0, 2};
    static const char *const sets[] = {"", "", "", "--set backend.threads=2",
                                       "--set backend.threads=2"};
    char yaml[sizeof BNN_YAML + 64];
    const char *at = strstr(BNN_YAML, "model: {kind: bnn_mlp,");
    DT_ASSERT(at);
    const int head = (int)(at - BNN_YAML) + (int)strlen("model: {kind: bnn_mlp,");
    snprintf(yaml, sizeof yaml, "%.*s estimator: local,%s", head, BNN_YAML, BNN_YAML + head);
    ranks_identical_cells("bnnlocal", yaml, 6, 5, nps, sets, 3, BNN_CELLS);
}

/* The BNN's negative control: at reduction: fixed the ranks' data gradients are added as
 * whole per-rank sums, so 2 and 3 ranks give different digests (and neither the plain
 * run's); both run to the end. */
DT_TEST(bnn_rank_count_changes_fixed)
{
    if (skip_without_mpi()) exit(77);
    const char *cfg = TMP "bnnneg.yaml";
    dt_write_text(cfg, BNN_YAML);
    const char *sets = "--set 'policies=[{base: portable, reduction: fixed}]'";
    const char *rel = "portable+reduction=fixed/replica-0/trace.csv";
    CHECK_INT_EQ(run_ranks(0, "", cfg, TMP "bnnneg.plain", sets), 0);
    CHECK_INT_EQ(run_ranks(2, "", cfg, TMP "bnnneg.np2", sets), 0);
    CHECK_INT_EQ(run_ranks(3, "", cfg, TMP "bnnneg.np3", sets), 0);
    CHECK(full_trace(TMP "bnnneg.np2", "portable+reduction=fixed", 6));
    CHECK(full_trace(TMP "bnnneg.np3", "portable+reduction=fixed", 6));
    CHECK(!same_file(TMP "bnnneg.np2", TMP "bnnneg.np3", rel));
    CHECK(!same_file(TMP "bnnneg.plain", TMP "bnnneg.np2", rel));
}

/* The negative control: under unordered and fixed the ranks' gradients are added as whole
 * per-rank sums, so 2 and 3 ranks (different row splits) give different digests; fixed
 * repeats itself for a given N. One thread per rank: the difference is the rank count's,
 * not thread timing's. */
DT_TEST(rank_count_changes_unordered_and_fixed)
{
    if (skip_without_mpi()) exit(77);
    const char *cfg = TMP "neg.yaml";
    dt_write_text(cfg, MLP_YAML);
    static const char *const pols[] = {"{base: run_to_run, reduction: unordered}", "run_to_run"};
    static const char *const names[] = {"run_to_run+reduction=unordered", "run_to_run"};
    for (int i = 0; i < 2; i++) {
        char sets[200], rel[200];
        snprintf(sets, sizeof sets, "--set 'policies=[%s]'", pols[i]);
        snprintf(rel, sizeof rel, "%s/replica-0/trace.csv", names[i]);
        CHECK_INT_EQ(run_ranks(2, "", cfg, TMP "neg.np2", sets), 0);
        CHECK_INT_EQ(run_ranks(3, "", cfg, TMP "neg.np3", sets), 0);
        char path[400];
        snprintf(path, sizeof path, TMP "neg.np3/%s", rel);
        CHECK_INT_EQ(trace_rows(path), 13); /* steps 0..12: both ran to the end */
        CHECK(!same_file(TMP "neg.np2", TMP "neg.np3", rel));
        if (i == 1) { /* fixed: the same N gives the same bits */
            CHECK_INT_EQ(run_ranks(2, "", cfg, TMP "neg.np2b", sets), 0);
            CHECK(same_file(TMP "neg.np2", TMP "neg.np2b", rel));
        }
    }
}

/* A rank whose weights are changed after step 5 is named, with the step, and the run
 * stops there: exit status 1, run.json failed with the message, the trace a valid prefix
 * ending at that step. */
DT_TEST(perturbed_rank_detected)
{
    if (skip_without_mpi()) exit(77);
    const char *cfg = TMP "perturb.yaml";
    dt_write_text(cfg, MLP_YAML);
    const char *dir = TMP "perturb";
    int rc = run_ranks(3, "DETRAIN_TEST_POISON=5:dense0.weight:w:0.25 DETRAIN_TEST_POISON_RANK=2",
                       cfg, dir, "");
    CHECK(rc != 0);
    CHECK_CONTAINS(out_, "rank 2's weights differ from rank 0's after step 5");
    char *manifest = dt_read_file(TMP "perturb/run.json", NULL);
    CHECK(manifest != NULL);
    if (manifest) {
        CHECK_CONTAINS(manifest, "\"status\": \"failed\"");
        CHECK_CONTAINS(manifest, "rank 2's weights differ from rank 0's after step 5");
    }
    free(manifest);
    CHECK_INT_EQ(trace_rows(TMP "perturb/portable/replica-0/trace.csv"), 6); /* steps 0..5 */
    /* the same hook on rank 0 is found too (rank 1 and 2 differ from it) */
    rc = run_ranks(2, "DETRAIN_TEST_POISON=3:dense0.bias:w:0.5 DETRAIN_TEST_POISON_RANK=0", cfg,
                   dir, "");
    CHECK(rc != 0);
    CHECK_CONTAINS(out_, "rank 1's weights differ from rank 0's after step 3");
}

/* Killed after step 7 with 2 ranks (checkpoint at step 4), resumed with 3, then with 1 and
 * 4 from a checkpoint of 3 ranks: every trace equals the uninterrupted plain run's. */
DT_TEST(resume_across_rank_counts)
{
    if (skip_without_mpi()) exit(77);
    const char *cfg = TMP "resume.yaml";
    dt_write_text(cfg, MLP_YAML);
    const char *sets = "--set train.checkpoint_every=4";
    CHECK_INT_EQ(run_ranks(0, "", cfg, TMP "resume.plain", sets), 0);
    static const int kill_np[] = {2, 3}, resume_np[] = {3, 1};
    for (int i = 0; i < 2; i++) {
        const char *dir = TMP "resume.run";
        CHECK(run_ranks(kill_np[i], "DETRAIN_TEST_KILL_AFTER_STEP=7", cfg, dir, sets) != 0);
        CHECK(dt_path_exists(TMP "resume.run/portable/replica-0/checkpoint.bin"));
        CHECK_INT_EQ(trace_rows(TMP "resume.run/portable/replica-0/trace.csv") < 13, 1);
        int rc =
            dt_run_capture(out_, sizeof out_, MPIRUN " -np %d %s run %s --resume %s --quiet %s",
                           resume_np[i], EXE, cfg, dir, sets);
        if (rc != 0) fprintf(stderr, "%s\n", out_);
        CHECK_INT_EQ(rc, 0);
        CHECK(same_file(TMP "resume.plain", dir, "portable/replica-0/trace.csv"));
        CHECK(same_file(TMP "resume.plain", dir, "portable/replica-0/tensors.csv"));
    }
}

/* The overhead sampling under mpirun: every rank alternates fast and the policy in
 * lockstep (each step is collective); rank 0 writes overhead.csv. */
DT_TEST(overhead_in_lockstep)
{
    if (skip_without_mpi()) exit(77);
    const char *cfg = TMP "overhead.yaml";
    dt_write_text(cfg, MLP_YAML);
    CHECK_INT_EQ(run_ranks(3, "", cfg, TMP "overhead",
                           "--set report.overhead_samples=20 --set report.overhead_warmup=1 "
                           "--set 'policies=[fast, portable]' --set train.steps=3"),
                 0);
    CHECK_INT_EQ(trace_rows(TMP "overhead/overhead.csv"), 20);
    char *md = dt_read_file(TMP "overhead/report.md", NULL);
    CHECK(md != NULL);
    free(md);
}

/* The ranks of one machine sum exactly through their shared memory (the cases above); with
 * DETRAIN_DIST_SHARED=0 they take the staged path, MPI's integer all-reduce, that ranks on
 * several machines take: the same digests at 2 and 3 ranks. */
DT_TEST(staged_exchange_equals_plain)
{
    if (skip_without_mpi()) exit(77);
    static const int nps[] = {2, 3};
    static const char *const cells[] = {"portable"};
    ranks_identical_env("staged", MLP_YAML, 12, 2, nps, NULL, 1, cells, "DETRAIN_DIST_SHARED=0");
}

/* bench names the way reduction: exact went across the ranks: shared memory by default on
 * one machine, staged with DETRAIN_DIST_SHARED=0 (so the case above tests the other path). */
DT_TEST(exchange_path_named)
{
    if (skip_without_mpi()) exit(77);
    const char *cfg = TMP "path.yaml";
    dt_write_text(cfg, MLP_YAML);
    static const char *const envs[] = {"", "DETRAIN_DIST_SHARED=0"};
    static const char *const want[] = {"portable across 2 ranks: the ranks' shared memory",
                                       "portable across 2 ranks: MPI's integer all-reduce, staged"};
    for (int k = 0; k < 2; k++) {
        const int rc = dt_run_capture(out_, sizeof out_,
                                      "%s " MPIRUN " -np 2 %s bench %s --steps 3 --warmup 1 "
                                      "--set 'policies=[fast, portable]'",
                                      envs[k], EXE, cfg);
        CHECK_INT_EQ(rc, 0);
        CHECK_CONTAINS(out_, want[k]);
        CHECK_CONTAINS(out_, ", 2 ranks\n");
        /* rank 0 alone speaks: one header */
        const char *first = strstr(out_, "bench: dist-mlp");
        CHECK(first && !strstr(first + 1, "bench: dist-mlp"));
    }
}

/* What cannot run on N ranks is refused before the first step, naming the key. */
DT_TEST(refusals)
{
    if (skip_without_mpi()) exit(77);
    const char *cfg = TMP "refuse.yaml";
    dt_write_text(cfg, MLP_YAML);
    CHECK(run_ranks(3, "", cfg, TMP "refuse", "--set train.shards=2") != 0);
    CHECK_CONTAINS(out_, "3 ranks but train.shards is 2");
    CHECK(run_ranks(0, "", cfg, TMP "refuse", "--set train.shards=49") != 0);
    CHECK_CONTAINS(out_, "train.shards is 49 but must lie in [1, train.batch = 48]");
    /* bnn_mlp goes through the same rules */
    CHECK(run_ranks(3, "", cfg, TMP "refuse",
                    "--set model.kind=bnn_mlp --set model.samples=1 --set model.lanes=64 "
                    "--set train.shards=2") != 0);
    CHECK_CONTAINS(out_, "3 ranks but train.shards is 2");
}

/* One GPU: the CUDA backend at portable under mpirun -np 1 (the exact path's integer
 * all-reduce over NCCL when it is built in) gives the plain CUDA run's trace and the CPU's.
 * Several GPUs (N >= 2, one per rank) are not tested here: docs/data-parallel.md says so. */
DT_TEST(cuda_one_rank_equals_plain)
{
    if (skip_without_mpi()) exit(77);
    struct dt_backend *be = NULL;
    struct dt_backend_options bo = {DT_BACKEND_CUDA, 0, 0};
    struct dt_error err = {0};
    if (dt_backend_create(&be, &bo, &err) != DT_OK) DT_SKIP_NO_GPU(err.msg);
    dt_backend_destroy(be);
    const char *cfg = TMP "cuda.yaml";
    dt_write_text(cfg, MLP_YAML);
    CHECK_INT_EQ(run_ranks(0, "", cfg, TMP "cuda.cpu", ""), 0);
    CHECK_INT_EQ(run_ranks(0, "", cfg, TMP "cuda.plain", "--set backend.device=cuda"), 0);
    CHECK_INT_EQ(run_ranks(1, "", cfg, TMP "cuda.np1", "--set backend.device=cuda"), 0);
    CHECK(same_file(TMP "cuda.cpu", TMP "cuda.plain", "portable/replica-0/tensors.csv"));
    CHECK(same_file(TMP "cuda.plain", TMP "cuda.np1", "portable/replica-0/trace.csv"));
    CHECK(same_file(TMP "cuda.plain", TMP "cuda.np1", "portable/replica-0/tensors.csv"));
    char *manifest = dt_read_file(TMP "cuda.np1/run.json", NULL);
    CHECK(manifest != NULL);
    if (manifest && dt_dist_have_nccl()) CHECK_CONTAINS(manifest, "NCCL ");
    free(manifest);
}

/* bnn_mlp's exact step (one process, S = 4 shards): its gradients with kl_weight 0.25
 * equal those with kl_weight 0 plus the KL term added once -- gmu + klw (mu / prior_var),
 * grho + klw ((sigma / prior_var - 1 / sigma) dsigma) -- in the op's float operations,
 * bit for bit, and within 1e-5 of the double-precision analytic KL gradient (4 times it,
 * once per shard, would fail both). The data terms are not all zero. */
DT_TEST(bnn_kl_counted_once)
{
    struct dt_backend *be = NULL;
    struct dt_backend_options bo = {DT_BACKEND_CPU, 2, 0};
    struct dt_error err = {0};
    DT_ASSERT(dt_backend_create(&be, &bo, &err) == DT_OK);
    enum { IN = 12, H = 6, C = 4, B = 11, S = 4 };
    const int64_t hidden[] = {H};
    float x[B * IN];
    uint8_t y[B];
    uint64_t r = 777;
    for (int i = 0; i < B * IN; i++) {
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = (float)(r >> 40) / (float)(1u << 24) - 0.5f;
    }
    for (int b = 0; b < B; b++) y[b] = (uint8_t)(b % C);
    struct dt_policy pol;
    dt_policy_from_level(&pol, DT_LEVEL_PORTABLE);
    const struct dt_sgd_options sgd = {.lr = 0.1f, .momentum = 0.9f, .weight_decay = 0.0f};
    const float klw = 0.25f, prior_sigma = 0.7f;
    float *g[2][4], *w[4];
    int64_t n[4] = {0};
    for (int run = 0; run < 2; run++) {
        const struct dt_bnn_options o = {2, 2,     prior_sigma, -3.0f, run ? klw : 0.0f,
                                         8, false, 1,           false};
        struct dt_model *m = NULL;
        DT_ASSERT(dt_bnn_mlp_create(&m, be, IN, hidden, 1, C, B, &o, &err) == DT_OK);
        dt_model_init(m, 42, 0);
        DT_ASSERT(m->n_params == 8);
        for (int i = 0; i < 4; i++) { /* dense0's weight and bias: mu, rho */
            n[i] = m->params[i].n;
            if (run == 0) {
                w[i] = dt_xmalloc((size_t)n[i] * sizeof(float));
                dt_backend_download(be, w[i], m->params[i].w, (size_t)n[i] * sizeof(float));
            }
        }
        struct dt_step d;
        dt_step_init(&d, m, S, &pol, NULL);
        float loss = 0.0f;
        const struct dt_batch batch = {.x = x, .y = y};
        CHECK_INT_EQ(dt_step_train(&d, m, NULL, &batch, B, S, &sgd, &pol, &loss), DT_OK);
        CHECK(isfinite(loss) && loss > 0.0f);
        for (int i = 0; i < 4; i++) {
            g[run][i] = dt_xmalloc((size_t)n[i] * sizeof(float));
            dt_backend_download(be, g[run][i], m->params[i].g, (size_t)n[i] * sizeof(float));
        }
        dt_step_free(&d);
        dt_model_destroy(m);
    }
    const float prior_var = prior_sigma * prior_sigma, ipv = 1.0f / prior_var;
    int64_t bad = 0, nonzero = 0;
    for (int t = 0; t < 2; t++) { /* tensor t: mu param 2t, rho param 2t + 1 */
        const int64_t len = n[2 * t];
        float *sigma = dt_backend_alloc(be, (size_t)len * sizeof(float));
        float *dsigma = dt_backend_alloc(be, (size_t)len * sizeof(float));
        float *rho = dt_backend_alloc(be, (size_t)len * sizeof(float));
        float *hs = dt_xmalloc((size_t)len * sizeof(float)),
              *hd = dt_xmalloc((size_t)len * sizeof(float));
        dt_backend_upload(be, rho, w[2 * t + 1], (size_t)len * sizeof(float));
        CHECK_INT_EQ(dt_bnn_sigma(be, sigma, dsigma, rho, len, &pol), DT_OK);
        dt_backend_download(be, hs, sigma, (size_t)len * sizeof(float));
        dt_backend_download(be, hd, dsigma, (size_t)len * sizeof(float));
        for (int64_t e = 0; e < len; e++) {
            const float mu = w[2 * t][e];
            const float kl_mu = klw * (mu * ipv);
            const float kl_rho = klw * ((hs[e] * ipv - 1.0f / hs[e]) * hd[e]);
            const float want_mu = g[0][2 * t][e] + kl_mu, got_mu = g[1][2 * t][e];
            const float want_rho = g[0][2 * t + 1][e] + kl_rho, got_rho = g[1][2 * t + 1][e];
            const double ref_mu = (double)klw * (double)mu / ((double)prior_sigma * prior_sigma);
            const double d_mu = (double)got_mu - (double)g[0][2 * t][e];
            nonzero += g[0][2 * t][e] != 0.0f && g[0][2 * t + 1][e] != 0.0f;
            if (want_mu != got_mu || want_rho != got_rho ||
                fabs(d_mu - ref_mu) > 1e-5 * fabs(ref_mu) + 1e-6) {
                if (bad++ < 5)
                    fprintf(stderr, "tensor %d element %lld: mu %a want %a, rho %a want %a\n", t,
                            (long long)e, (double)got_mu, (double)want_mu, (double)got_rho,
                            (double)want_rho);
            }
        }
        free(hs);
        free(hd);
        dt_backend_free(be, sigma);
        dt_backend_free(be, dsigma);
        dt_backend_free(be, rho);
    }
    CHECK_INT_EQ(bad, 0);
    CHECK(nonzero > 0);
    for (int i = 0; i < 4; i++) {
        free(w[i]);
        free(g[0][i]);
        free(g[1][i]);
    }
    dt_backend_destroy(be);
}

/* The shard rules: contiguous, covering, none empty, for every B >= S >= N. */
DT_TEST(shard_rules)
{
    for (int64_t B = 1; B <= 70; B++) {
        for (int64_t S = 1; S <= B; S++) {
            CHECK_INT_EQ(dt_shard_row(B, S, 0), 0);
            CHECK_INT_EQ(dt_shard_row(B, S, S), B);
            for (int64_t s = 0; s < S; s++)
                if (dt_shard_row(B, S, s + 1) <= dt_shard_row(B, S, s)) {
                    CHECK(!"empty shard");
                    return;
                }
            for (int N = 1; N <= S && N <= 8; N++) {
                CHECK_INT_EQ(dt_rank_shard(S, N, 0), 0);
                CHECK_INT_EQ(dt_rank_shard(S, N, N), S);
                for (int r = 0; r < N; r++)
                    if (dt_rank_shard(S, N, r + 1) <= dt_rank_shard(S, N, r)) {
                        CHECK(!"rank without a shard");
                        return;
                    }
            }
        }
    }
}

/* softmax_xent_backward against a double-precision reference: (p - t) / denom, with the one
 * rounding of 1/denom the op documents, for a whole batch (denom = B) and a shard's rows. */
DT_TEST(scaled_loss_gradient)
{
    struct dt_backend *be = NULL;
    struct dt_backend_options bo = {DT_BACKEND_CPU, 1, 0};
    struct dt_error err = {0};
    DT_ASSERT(dt_backend_create(&be, &bo, &err) == DT_OK);
    enum { B = 7, C = 5 };
    float probs[B * C], g[B * C];
    int32_t labels[B];
    uint64_t x = 12345;
    for (int i = 0; i < B * C; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        probs[i] = (float)(x >> 40) / (float)(1u << 24);
    }
    for (int b = 0; b < B; b++) labels[b] = b % C;
    struct dt_policy pol;
    dt_policy_from_level(&pol, DT_LEVEL_PORTABLE);
    const int64_t denoms[] = {B, 3 * B, 1000};
    for (int k = 0; k < 3; k++) {
        CHECK_INT_EQ(dt_softmax_xent_backward(be, g, probs, labels, B, C, denoms[k], &pol), DT_OK);
        for (int b = 0; b < B; b++)
            for (int c = 0; c < C; c++) {
                const double t = c == labels[b] ? 1.0 : 0.0;
                const double ref = ((double)probs[b * C + c] - t) / (double)denoms[k];
                const double got = g[b * C + c];
                CHECK(fabs(got - ref) <= 2e-7 * fabs(ref) + 1e-12);
            }
    }
    dt_backend_destroy(be);
}

/* The exact path's fast int64 -> float route (dt_fixed_to_float_bounded, what nets/cpu/exact.c
 * rounds with) gives dt_fixed_to_float's bits: sums around
 * 2^53 (both routes), tiny and huge scales, subnormal and overflowing results. */
DT_TEST(fixed_to_float_agrees)
{
    uint64_t x = 99;
    int64_t bad = 0;
    for (int i = 0; i < 2000000; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        const int bits = 1 + (int)(x >> 58) % 63; /* 1..63 */
        int64_t acc = (int64_t)(x >> (64 - bits)) * ((x & 1) ? -1 : 1);
        if (i % 7 == 0) acc = ((int64_t)1 << 53) - (int64_t)(x % 5) + 2; /* the boundary */
        const int shift =
            DT_FIXED_SHIFT_MIN + (int)((x >> 20) % (DT_FIXED_SHIFT_MAX - DT_FIXED_SHIFT_MIN + 1));
        const float a = dt_fixed_to_float(acc, shift),
                    b = dt_fixed_to_float_bounded(acc, dt_fixed_scale(-shift));
        if (memcmp(&a, &b, sizeof a) != 0 && bad++ < 5)
            fprintf(stderr, "acc %lld shift %d: %a vs %a\n", (long long)acc, shift, (double)a,
                    (double)b);
    }
    /* just below a float halfway point, where rounding to double first would land on the
     * tie and round the wrong way: 2^k + 2^(k-23) (odd last bit) + 2^(k-24) - 1 */
    for (int k = 30; k <= 62; k++) {
        for (int sign = -1; sign <= 1; sign += 2) {
            const int64_t acc = sign * (((int64_t)1 << k) + ((int64_t)1 << (k - 23)) +
                                        ((int64_t)1 << (k - 24)) - 1);
            for (int shift = -10; shift <= 140; shift += 15) {
                const float a = dt_fixed_to_float(acc, shift),
                            b = dt_fixed_to_float_bounded(acc, dt_fixed_scale(-shift));
                if (memcmp(&a, &b, sizeof a) != 0 && bad++ < 10)
                    fprintf(stderr, "acc %lld shift %d: %a vs %a\n", (long long)acc, shift,
                            (double)a, (double)b);
            }
        }
    }
    CHECK_INT_EQ(bad, 0);
}

/* ---- the shared-memory protocol, with threads for ranks ----------------------------------
 * An in-process exchange: each rank a thread, every collective a barrier around shared
 * slots, the shared memory plain allocations. The ranks of nets/step.c's shared path then
 * train to the bits of one process: with the model's pack in the shared memory (one exact
 * step) and copied there (two exact steps on one model, alternating: each finds the pack
 * the other lent). No MPI needed. */
enum { TR = 2, T_IN = 10, T_H = 7, T_C = 3, T_B = 24, T_S = 4, T_STEPS = 4 };

struct tx {
    pthread_barrier_t bar;
    const void *slot[TR];
    void *base[TR];
};
struct tx_rank {
    struct tx *t;
    int rank;
    bool two_steps;
    float w[T_IN * T_H + T_H + T_H * T_C + T_C];
};

static void tx_max_u32(void *ctx, uint32_t *v, int n)
{
    struct tx_rank *me = ctx;
    uint32_t *tmp = dt_xcalloc((size_t)n, sizeof *tmp);
    me->t->slot[me->rank] = v;
    pthread_barrier_wait(&me->t->bar);
    for (int q = 0; q < TR; q++)
        for (int i = 0; i < n; i++) {
            const uint32_t x = ((const uint32_t *)me->t->slot[q])[i];
            tmp[i] = x > tmp[i] ? x : tmp[i];
        }
    pthread_barrier_wait(&me->t->bar);
    memcpy(v, tmp, (size_t)n * sizeof *tmp);
    free(tmp);
}
static void tx_sum_f32(void *ctx, float *v, int64_t n)
{
    struct tx_rank *me = ctx;
    float *tmp = dt_xcalloc((size_t)n, sizeof *tmp);
    me->t->slot[me->rank] = v;
    pthread_barrier_wait(&me->t->bar);
    for (int q = 0; q < TR; q++)
        for (int64_t i = 0; i < n; i++) tmp[i] += ((const float *)me->t->slot[q])[i];
    pthread_barrier_wait(&me->t->bar);
    memcpy(v, tmp, (size_t)n * sizeof *tmp);
    free(tmp);
}
static int tx_max_status(void *ctx, int status, int *rank_out)
{
    struct tx_rank *me = ctx;
    me->t->slot[me->rank] = &status;
    pthread_barrier_wait(&me->t->bar);
    int worst = 0, who = -1;
    for (int q = 0; q < TR; q++) {
        const int s = *(const int *)me->t->slot[q];
        if (s > worst) worst = s, who = q;
    }
    pthread_barrier_wait(&me->t->bar);
    if (rank_out) *rank_out = who;
    return worst;
}
static void *tx_shared_open(void *ctx, int64_t bytes, void **base)
{
    struct tx_rank *me = ctx;
    me->t->base[me->rank] = dt_xcalloc(1, (size_t)bytes);
    pthread_barrier_wait(&me->t->bar);
    memcpy(base, me->t->base, sizeof me->t->base);
    pthread_barrier_wait(&me->t->bar);
    return base[me->rank]; /* the handle: this rank's part */
}
static void tx_shared_sync(void *ctx, void *h)
{
    (void)h;
    pthread_barrier_wait(&((struct tx_rank *)ctx)->t->bar);
}
static void tx_shared_close(void *ctx, void *h)
{
    struct tx_rank *me = ctx;
    pthread_barrier_wait(&me->t->bar);
    free(h);
}
static const struct dt_exchange_ops tx_ops = {.max_u32 = tx_max_u32,
                                              .sum_f32 = tx_sum_f32,
                                              .max_status = tx_max_status,
                                              .shared_open = tx_shared_open,
                                              .shared_sync = tx_shared_sync,
                                              .shared_close = tx_shared_close};

/* T_STEPS steps of an MLP on a fixed batch as rank `rank` of TR (x: the exchange) or alone
 * (x NULL); with two_steps, portable and fast+reduction=exact alternate, each its own step.
 * The weights, concatenated, into w. */
static void tx_train(const struct dt_exchange *x, bool two_steps, float *w)
{
    struct dt_backend *be = NULL;
    struct dt_backend_options bo = {DT_BACKEND_CPU, 1, 0};
    DT_ASSERT(dt_backend_create(&be, &bo, NULL) == DT_OK);
    const int64_t hidden[] = {T_H};
    struct dt_model *m = NULL;
    DT_ASSERT(dt_mlp_create(&m, be, T_IN, hidden, 1, T_C, T_B, NULL) == DT_OK);
    dt_model_init(m, 5, 0);
    float xs[T_B * T_IN];
    uint8_t ys[T_B];
    uint64_t r = 99;
    for (int i = 0; i < T_B * T_IN; i++) {
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        xs[i] = (float)(r >> 40) / (float)(1u << 24) - 0.5f;
    }
    for (int b = 0; b < T_B; b++) ys[b] = (uint8_t)(b % T_C);
    struct dt_policy pol[2];
    dt_policy_from_level(&pol[0], DT_LEVEL_PORTABLE);
    dt_policy_from_level(&pol[1], DT_LEVEL_FAST);
    DT_ASSERT(dt_policy_set_control(&pol[1], "reduction", "exact", NULL) == DT_OK);
    const struct dt_sgd_options sgd = {.lr = 0.1f, .momentum = 0.9f, .weight_decay = 0.0f};
    struct dt_step d[2];
    memset(d, 0, sizeof d);
    const struct dt_batch batch = {.x = xs, .y = ys};
    for (int t = 0; t < T_STEPS; t++) {
        const int k = two_steps ? t % 2 : 0;
        float loss = 0.0f;
        CHECK_INT_EQ(dt_step_train(&d[k], m, x, &batch, T_B, T_S, &sgd, &pol[k], &loss), DT_OK);
        if (x && t == 0) CHECK(d[k].shared != NULL);
    }
    int64_t at = 0;
    for (int i = 0; i < m->n_params; i++) {
        dt_backend_download(be, w + at, m->params[i].w, (size_t)m->params[i].n * sizeof(float));
        at += m->params[i].n;
    }
    dt_step_free(&d[0]);
    dt_step_free(&d[1]);
    dt_model_destroy(m);
    dt_backend_destroy(be);
}

static void *tx_rank_main(void *arg)
{
    struct tx_rank *me = arg;
    const struct dt_exchange x = {.ops = &tx_ops, .ctx = me, .rank = me->rank, .size = TR};
    tx_train(&x, me->two_steps, me->w);
    return NULL;
}

DT_TEST(shared_protocol_equals_one_process)
{
    for (int two = 0; two < 2; two++) {
        float plain[sizeof((struct tx_rank *)0)->w / sizeof(float)];
        tx_train(NULL, two, plain);
        struct tx t;
        memset(&t, 0, sizeof t);
        pthread_barrier_init(&t.bar, NULL, TR);
        struct tx_rank rk[TR];
        pthread_t th[TR];
        for (int q = 0; q < TR; q++) {
            rk[q] = (struct tx_rank){.t = &t, .rank = q, .two_steps = two};
            DT_ASSERT(pthread_create(&th[q], NULL, tx_rank_main, &rk[q]) == 0);
        }
        for (int q = 0; q < TR; q++) pthread_join(th[q], NULL);
        pthread_barrier_destroy(&t.bar);
        for (int q = 0; q < TR; q++) {
            fprintf(stderr, "%s, rank %d\n", two ? "two exact steps" : "one exact step", q);
            CHECK(memcmp(rk[q].w, plain, sizeof plain) == 0);
        }
    }
}

DT_TEST_MAIN(DT_CASE(fixed_to_float_agrees), DT_CASE(portable_mlp_ranks),
             DT_CASE(portable_batchnorm_ranks), DT_CASE(portable_lenet_ranks),
             DT_CASE(rank_count_changes_unordered_and_fixed), DT_CASE(perturbed_rank_detected),
             DT_CASE(resume_across_rank_counts), DT_CASE(refusals), DT_CASE(overhead_in_lockstep),
             DT_CASE(shard_rules), DT_CASE(scaled_loss_gradient),
             DT_CASE(cuda_one_rank_equals_plain), DT_CASE(portable_bnn_ranks),
             DT_CASE(portable_bnn_local_ranks), DT_CASE(bnn_rank_count_changes_fixed),
             DT_CASE(bnn_kl_counted_once), DT_CASE(staged_exchange_equals_plain),
             DT_CASE(exchange_path_named), DT_CASE(shared_protocol_equals_one_process))
