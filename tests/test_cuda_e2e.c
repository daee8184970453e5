/* End to end on the GPU: the CUDA backend's traces against the CPU backend's for the same
 * config. At `portable` every per-step digest (trace.csv, tensors.csv), the final
 * predictions and the metrics must be byte-identical to the CPU's -- the headline claim;
 * at `run_to_run`, five GPU reruns must be identical to each other. The same for LeNet
 * (both pooling variants), whose run_to_run replicas must also record, in algos.csv, only
 * algorithms cuDNN marks deterministic. Every gpu case needs a device and exits 77 (skipped)
 * without one, after the build has linked it. The CPU side of the portable comparisons is
 * committed (tests/data/gpu_ref), kept current by cpu_references_current (label e2e), so
 * that no CPU training runs in device time. */
#include "core/status.h"
#include "nets/backend.h"
#include "tests/check.h"
#include "tests/op_helpers.h"
#include "tests/run_helper.h"
#ifdef DETRAIN_HAVE_CUDA_TOOLKIT
#include "nets/cuda/cuda.h" /* dt_cudnn_version */
#endif

#define EXE DT_DETRAIN_EXE
#define TINY DT_TEST_DATA_DIR "/tiny.yaml"
#define BNN DT_SOURCE_DIR "/configs/bnn.yaml"
#define LENET DT_SOURCE_DIR "/configs/lenet.yaml"
#define TMP DT_TEST_TMP_DIR "/cuda_e2e."

static char out[65536];

static void run_ok(const char *cfg, const char *dir, const char *device, const char *extra)
{
    int rc = dt_run_capture(out, sizeof out,
                            "rm -rf '%s' && '%s' run '%s' --out '%s' --quiet "
                            "--set backend.device=%s --set report.overhead_samples=0 %s",
                            dir, EXE, cfg, dir, device, extra);
    if (rc != 0) fprintf(stderr, "detrain run (%s) failed (%d):\n%s\n", device, rc, out);
    CHECK_INT_EQ(rc, 0);
}

/* Each named file of replica folder `rel` is byte-identical in the two experiments. */
static void same_files(const char *a, const char *b, const char *rel)
{
    static const char *const files[] = {"trace.csv", "tensors.csv", "predictions.csv",
                                        "metrics.csv"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char pa[1024], pb[1024];
        snprintf(pa, sizeof pa, "%.800s/%.100s/%.20s", a, rel, files[i]);
        snprintf(pb, sizeof pb, "%.800s/%.100s/%.20s", b, rel, files[i]);
        if (!dt_path_exists(pa)) continue; /* tensors.csv only with hash.per_tensor */
        if (!dt_files_equal(pa, pb)) {
            fprintf(stderr, "differ: %s and %s\n", pa, pb);
            dt_check_failures_++;
        }
    }
    /* and `detrain compare` says so too (0 = identical) */
    char ra[1024], rb[1024];
    snprintf(ra, sizeof ra, "%.800s/%.100s", a, rel);
    snprintf(rb, sizeof rb, "%.800s/%.100s", b, rel);
    int rc = dt_run_capture(out, sizeof out, "'%s' compare '%s' '%s'", EXE, ra, rb);
    if (rc != 0) fprintf(stderr, "%s\n", out);
    CHECK_INT_EQ(rc, 0);
}

/* ---- the committed CPU references -------------------------------------------------------
 * The portable cases compare the GPU with CPU runs made beforehand and committed under
 * tests/data/gpu_ref/<case>/<cell>/replica-0/ (the four files of same_files): no CPU
 * training in device time. cpu_references_current (label e2e, every make check) retrains
 * them on the CPU and fails when the CPU bits no longer match the committed files, naming
 * the command that remakes them (DT_WRITE_GPU_REFS=1 ctest -R cuda_e2e.cpu_references_current). */
#define REF_DIR DT_SOURCE_DIR "/tests/data/gpu_ref"

/* A short LeNet: a few dozen steps on the first 1,000 training images. */
#define LENET_SHORT                                                                                \
    "--set train.steps=24 --set dataset.train_limit=1000 --set dataset.test_limit=200 "            \
    "--set replicas=1 --set 'policies=[portable]' "
#define BNN_PORTABLE                                                                               \
    "--set train.steps=6 --set dataset.train_limit=1000 --set dataset.test_limit=200 "             \
    "--set model.test_samples=2 --set replicas=1 "                                                 \
    "--set 'policies=[portable, {base: portable, rng: philox}, {base: portable, rng: stored}]'"

struct ref_case {
    const char *name;     /* folder under REF_DIR */
    const char *cfg;      /* config */
    const char *extra;    /* the overrides of both runs */
    const char *cells[3]; /* the cells compared (NULL-terminated) */
    bool fmnist;          /* needs Fashion-MNIST */
};
static const struct ref_case ref_cases[] = {
    {"mlp", TINY, "--set replicas=1 --set 'policies=[portable]'", {"portable"}, false},
    {"bnn", BNN, BNN_PORTABLE, {"portable", "portable+rng=philox", "portable+rng=stored"}, true},
    {"lenet_pool2", LENET, LENET_SHORT "--set model.overlap_pool=false", {"portable"}, true},
    {"lenet_overlap", LENET, LENET_SHORT "--set model.overlap_pool=true", {"portable"}, true},
};
static const char *const ref_files[] = {"trace.csv", "tensors.csv", "predictions.csv",
                                        "metrics.csv"};

static const struct ref_case *ref_case(const char *name)
{
    for (size_t i = 0; i < sizeof ref_cases / sizeof ref_cases[0]; i++)
        if (strcmp(ref_cases[i].name, name) == 0) return &ref_cases[i];
    DT_ASSERT_MSG(0, "no such reference case");
    return NULL;
}

/* Fashion-MNIST where detrain looks for it ($DETRAIN_DATA, else the Debian folder). */
static bool dt_test_have_fmnist(void)
{
    const char *env = getenv("DETRAIN_DATA");
    char p[1024];
    snprintf(p, sizeof p, "%s/train-images-idx3-ubyte.gz",
             env && env[0] ? env : "/usr/share/datasets/fashion-mnist");
    return dt_path_exists(p);
}

/* Train reference case `c` on `device` into dir. */
static void run_case(const struct ref_case *c, const char *dir, const char *device)
{
    run_ok(c->cfg, dir, device, c->extra);
}

/* The GPU run `gpu` of case c equals its committed CPU reference, cell by cell. */
static void same_as_reference(const struct ref_case *c, const char *gpu)
{
    char ref[1024];
    snprintf(ref, sizeof ref, REF_DIR "/%s", c->name);
    for (int k = 0; k < 3 && c->cells[k]; k++) {
        char rel[96];
        snprintf(rel, sizeof rel, "%.80s/replica-0", c->cells[k]);
        fprintf(stderr, "%s %s: committed cpu reference vs cuda\n", c->name, c->cells[k]);
        same_files(ref, gpu, rel);
    }
}

/* The committed references are the current CPU bits: each case retrained on the CPU (label
 * e2e: make check, no GPU involved) gives the committed files byte for byte. With
 * DT_WRITE_GPU_REFS=1 it writes them instead (after a change of the CPU bits, reviewed). */
DT_TEST(cpu_references_current)
{
    const bool write = getenv("DT_WRITE_GPU_REFS") && strcmp(getenv("DT_WRITE_GPU_REFS"), "1") == 0;
    int checked = 0;
    for (size_t i = 0; i < sizeof ref_cases / sizeof ref_cases[0]; i++) {
        const struct ref_case *c = &ref_cases[i];
        if (c->fmnist && !dt_test_have_fmnist()) {
            fprintf(stderr, "%s: no Fashion-MNIST installed: not checked\n", c->name);
            continue;
        }
        char dir[512];
        snprintf(dir, sizeof dir, TMP "ref_%s", c->name);
        run_case(c, dir, "cpu");
        for (int k = 0; k < 3 && c->cells[k]; k++)
            for (size_t f = 0; f < sizeof ref_files / sizeof ref_files[0]; f++) {
                char got[1024], want[1024];
                snprintf(got, sizeof got, "%s/%s/replica-0/%s", dir, c->cells[k], ref_files[f]);
                snprintf(want, sizeof want, REF_DIR "/%s/%s/replica-0/%s", c->name, c->cells[k],
                         ref_files[f]);
                if (!dt_path_exists(got)) { /* tensors.csv only with hash.per_tensor */
                    if (dt_path_exists(want)) fprintf(stderr, "%s: not written\n", got);
                    CHECK(!dt_path_exists(want));
                    continue;
                }
                if (write) {
                    CHECK_INT_EQ(dt_run_capture(out, sizeof out,
                                                "mkdir -p \"$(dirname '%s')\" && cp '%s' '%s'",
                                                want, got, want),
                                 0);
                    continue;
                }
                if (!dt_files_equal(got, want)) {
                    fprintf(stderr,
                            "%s differs from the committed %s: the CPU bits changed; if that is "
                            "intended, remake the references with\n  DT_WRITE_GPU_REFS=1 ctest "
                            "--test-dir build -R cuda_e2e.cpu_references_current\n",
                            got, want);
                    dt_check_failures_++;
                }
            }
        checked++;
    }
    if (checked == 0) DT_SKIP("no Fashion-MNIST installed, and the tiny case alone proves little");
}

/* The MLP at portable: the GPU trace is the committed CPU trace, step for step and tensor
 * by tensor; and a different seed changes it (a trace that ignores the weights would pass
 * the first check). */
DT_TEST(mlp_portable_equals_cpu)
{
    dt_backend_destroy(gpu_or_skip());
    const struct ref_case *c = ref_case("mlp");
    run_case(c, TMP "mlp_gpu", "cuda");
    same_as_reference(c, TMP "mlp_gpu");
    run_ok(TINY, TMP "mlp_gpu_seed", "cuda",
           "--set replicas=1 --set 'policies=[portable]' "
           "--set train.seed=6");
    CHECK(!dt_files_equal(TMP "mlp_gpu/portable/replica-0/trace.csv",
                          TMP "mlp_gpu_seed/portable/replica-0/trace.csv"));
}

/* The Bayesian MLP at portable with epsilon regenerated by Philox and by the reversible
 * lanes (portable's own rng), and with stored epsilon: GPU traces equal the CPU's. */
DT_TEST(bnn_portable_equals_cpu)
{
    dt_backend_destroy(gpu_or_skip());
    const struct ref_case *c = ref_case("bnn");
    run_case(c, TMP "bnn_gpu", "cuda");
    same_as_reference(c, TMP "bnn_gpu");
}

/* run_to_run on the GPU (cuBLAS in pedantic FP32 with a fixed workspace, fixed-order
 * reductions, fixed-point atomics): five replicas with nothing varied in one process, and
 * a second process, all give one trace. */
DT_TEST(run_to_run_reruns_identical)
{
    dt_backend_destroy(gpu_or_skip());
    const char *extra = "--set replicas=5 --set 'vary=[]' --set 'policies=[run_to_run]'";
    run_ok(TINY, TMP "r2r_a", "cuda", extra);
    run_ok(TINY, TMP "r2r_b", "cuda",
           "--set replicas=1 --set 'vary=[]' "
           "--set 'policies=[run_to_run]'");
    for (int r = 1; r < 5; r++) {
        char rel[64];
        snprintf(rel, sizeof rel, "run_to_run/replica-%d", r);
        char pa[1024], pb[1024];
        snprintf(pa, sizeof pa, TMP "r2r_a/run_to_run/replica-0/trace.csv");
        snprintf(pb, sizeof pb, TMP "r2r_a/%s/trace.csv", rel);
        CHECK(dt_files_equal(pa, pb));
    }
    CHECK(dt_files_equal(TMP "r2r_a/run_to_run/replica-0/trace.csv",
                         TMP "r2r_b/run_to_run/replica-0/trace.csv"));
    /* the Bayesian MLP too, under its run_to_run rng (lfsr) */
    const char *bextra = "--set train.steps=6 --set dataset.train_limit=1000 "
                         "--set dataset.test_limit=200 --set model.test_samples=2 "
                         "--set replicas=1 --set 'vary=[]' --set 'policies=[run_to_run]'";
    run_ok(BNN, TMP "r2r_bnn_a", "cuda", bextra);
    run_ok(BNN, TMP "r2r_bnn_b", "cuda", bextra);
    CHECK(dt_files_equal(TMP "r2r_bnn_a/run_to_run/replica-0/trace.csv",
                         TMP "r2r_bnn_b/run_to_run/replica-0/trace.csv"));
}

/* The run's manifest names the backend, the device and its libraries; a replica's run.json
 * its host waits: over every step, the first step's and the steady ones' (after the first). */
DT_TEST(manifest_names_gpu)
{
    dt_backend_destroy(gpu_or_skip());
    run_ok(TINY, TMP "manifest", "cuda",
           "--set replicas=1 --set train.steps=3 --set 'policies=[portable]'");
    char *json = dt_read_file(TMP "manifest/run.json", NULL);
    CHECK(json != NULL);
    CHECK(json && strstr(json, "\"name\": \"cuda\"") != NULL);
    CHECK(json && strstr(json, "(sm_") != NULL && strstr(json, "cuBLAS") != NULL);
    free(json);
    json = dt_read_file(TMP "manifest/portable/replica-0/run.json", NULL);
    CHECK(json != NULL);
    CHECK(json && strstr(json, "\"host_waits_per_step\": ") != NULL);
    CHECK(json && strstr(json, "\"host_waits_first_step\": ") != NULL);
    CHECK(json && strstr(json, "\"host_waits_steady\": ") != NULL);
    free(json);
}

/* ---- LeNet ------------------------------------------------------------------------------ */

/* Replica folder `rel` of experiment `dir` has no algos.csv and its run.json no
 * "algorithms" (nothing chose an algorithm: the own kernels ran). */
static void no_algorithm_record(const char *dir, const char *rel)
{
    char p[1024];
    snprintf(p, sizeof p, "%s/%s/algos.csv", dir, rel);
    if (dt_path_exists(p)) fprintf(stderr, "%s exists\n", p);
    CHECK(!dt_path_exists(p));
    snprintf(p, sizeof p, "%s/%s/run.json", dir, rel);
    char *json = dt_read_file(p, NULL);
    CHECK(json != NULL);
    CHECK(json && strstr(json, "\"final_model_digest\"") != NULL); /* the right file */
    CHECK(json && strstr(json, "\"algorithms\"") == NULL);
    free(json);
}

/* LeNet at portable, 2x2 pooling and overlapping 3x3/2 pooling: the GPU trace is the
 * committed CPU trace, step for step and tensor by tensor (convolution backward-data and the
 * pooling scatter in fixed point, every sum in the CPU's order); no algorithm choice is
 * recorded (nothing chose one: the own kernels ran). */
DT_TEST(lenet_portable_equals_cpu)
{
    dt_backend_destroy(gpu_or_skip());
    const char *const names[2] = {"lenet_pool2", "lenet_overlap"};
    for (int o = 0; o < 2; o++) {
        const struct ref_case *c = ref_case(names[o]);
        char dg[256];
        snprintf(dg, sizeof dg, TMP "%s_gpu", names[o]);
        run_case(c, dg, "cuda");
        same_as_reference(c, dg);
        no_algorithm_record(dg, "portable/replica-0");
    }
}

/* The rows of a replica's algos.csv: the header, then rows each of which must name a
 * deterministic algorithm chosen at step 1 and kept to the last step. Returns the
 * number of rows; *ops gets one bit per op name seen. */
static int check_algos_csv(const char *path, int64_t steps, unsigned *ops)
{
    static const char *const op_names[4] = {"conv_fwd", "conv_bwd_data", "conv_bwd_filter",
                                            "pool_bwd"};
    char *text = dt_read_file(path, NULL);
    if (!text) {
        fprintf(stderr, "%s: missing\n", path);
        dt_check_failures_++;
        return 0;
    }
    const char *header = "first_step,last_step,call,op,shape,algo,name,deterministic,math,how\n";
    CHECK(strncmp(text, header, strlen(header)) == 0);
    int rows = 0;
    for (char *line = strchr(text, '\n'); line && line[1]; line = strchr(line + 1, '\n')) rows++;
    for (int r = 0; r < rows; r++) {
        char f[64] = "", op[64] = "", det[16] = "";
        CHECK_INT_EQ(dt_csv_col(det, sizeof det, path, r, "deterministic"), 0);
        CHECK_INT_EQ(dt_csv_col(op, sizeof op, path, r, "op"), 0);
        if (strcmp(det, "true") != 0)
            fprintf(stderr, "%s row %d (%s): not deterministic\n", path, r, op);
        CHECK_STR_EQ(det, "true");
        for (int i = 0; i < 4; i++)
            if (strcmp(op, op_names[i]) == 0) *ops |= 1u << i;
        CHECK_INT_EQ(dt_csv_col(f, sizeof f, path, r, "first_step"), 0);
        CHECK_INT_EQ(atoll(f), 1);
        CHECK_INT_EQ(dt_csv_col(f, sizeof f, path, r, "last_step"), 0);
        CHECK_INT_EQ(atoll(f), steps);
        CHECK_INT_EQ(dt_csv_col(f, sizeof f, path, r, "call"), 0);
        CHECK_INT_EQ(atoll(f), r); /* one row per call site, in call order */
    }
    free(text);
    return rows;
}

/* LeNet at run_to_run on the GPU (cuDNN's deterministic algorithms, overlapping pooling
 * through CUDNN_POOLING_MAX_DETERMINISTIC): five replicas with nothing varied give one
 * final digest and one trace, and each replica's algos.csv lists only algorithms cuDNN
 * marks deterministic -- one row per call site of a step (two forwards, two pooling
 * backwards, two weight gradients, one data gradient), unchanged from first step to last. */
DT_TEST(lenet_run_to_run_replicas_identical)
{
    struct dt_backend *g = gpu_or_skip();
    dt_backend_destroy(g);
#ifdef DETRAIN_HAVE_CUDA_TOOLKIT
    if (dt_cudnn_version() == 0) DT_SKIP("built without cuDNN: conv_algo deterministic refuses");
#endif
    const int64_t steps = 16;
    const char *dir = TMP "lenet_r2r";
    run_ok(LENET, dir, "cuda",
           "--set train.steps=16 --set dataset.train_limit=1000 --set dataset.test_limit=200 "
           "--set replicas=5 --set 'vary=[]' --set 'policies=[run_to_run]' "
           "--set model.overlap_pool=true");
    char f[64] = "", path[1024], first[1024];
    CHECK_INT_EQ(dt_csv_col(f, sizeof f, TMP "lenet_r2r/summary.csv", 0, "distinct_final_digests"),
                 0);
    CHECK_STR_EQ(f, "1");
    snprintf(first, sizeof first, "%s/run_to_run/replica-0/trace.csv", dir);
    for (int r = 0; r < 5; r++) {
        snprintf(path, sizeof path, "%s/run_to_run/replica-%d/trace.csv", dir, r);
        CHECK(dt_files_equal(first, path));
        snprintf(path, sizeof path, "%s/run_to_run/replica-%d/algos.csv", dir, r);
        unsigned ops = 0;
        const int rows = check_algos_csv(path, steps, &ops);
        fprintf(stderr, "%s: %d rows\n", path, rows);
        CHECK_INT_EQ(rows, 7);
        CHECK_INT_EQ(ops, 0xf); /* every op noted */
        snprintf(path, sizeof path, "%s/run_to_run/replica-%d/run.json", dir, r);
        char *json = dt_read_file(path, NULL);
        CHECK(json && strstr(json, "\"algorithms\": {\"steps_noted\": 16, \"rows\": 7, "
                                   "\"changes\": 0") != NULL);
        free(json);
    }
}

DT_TEST_MAIN(DT_CASE(cpu_references_current), DT_CASE(mlp_portable_equals_cpu),
             DT_CASE(bnn_portable_equals_cpu), DT_CASE(run_to_run_reruns_identical),
             DT_CASE(manifest_names_gpu), DT_CASE(lenet_portable_equals_cpu),
             DT_CASE(lenet_run_to_run_replicas_identical))
