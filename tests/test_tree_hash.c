/* The tree digest (core/tree_hash.h, issue 52) and the SHA-256 its kernels compute
 * (core/sha256_hd.h): the header's SHA-256 gives FIPS 180-4's digests and OpenSSL's on any
 * input split any way; the backend op tensor_digests equals the host emulation of the CUDA
 * kernels (leaves, levels and tensor digests through the DT_HD functions, in the kernels'
 * order) for tensors of every size class -- empty, one value, a partial leaf, one leaf,
 * many leaves, two and three levels -- at 1-3 threads, alone or batched; a flipped bit
 * changes the digest; on a GPU (label gpu) the CUDA op gives the CPU's bytes. */
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>

#include "core/sha256_hd.h"
#include "core/tree_hash.h"
#include "harness/record/hash.h"
#include "harness/record/layout.h"
#include "harness/record/snapshot.h"
#include "nets/backend.h"
#include "tests/check.h"
#include "tests/op_helpers.h"
#include "tests/run_helper.h"

#define EXE DT_DETRAIN_EXE
#define TINY DT_TEST_DATA_DIR "/tiny.yaml"
#define TMP DT_TEST_TMP_DIR "/tree_hash."

static uint64_t rng = 0x2545f4914f6cdd1dull;
static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static void hex(char out[65], const uint8_t d[32])
{
    for (int i = 0; i < 32; i++) sprintf(out + 2 * i, "%02x", d[i]);
}

static void openssl_sha256(uint8_t out[32], const void *p, size_t n)
{
    unsigned len = 0;
    DT_ASSERT(EVP_Digest(p, n, out, &len, EVP_sha256(), NULL) == 1 && len == 32);
}

static void hd_sha256(uint8_t out[32], const void *p, size_t n)
{
    struct dt_sha256_hd s;
    dt_sha256_hd_init(&s);
    dt_sha256_hd_update(&s, p, n);
    dt_sha256_hd_final(&s, out);
}

/* FIPS 180-4's examples (the standard's own test vectors). */
DT_TEST(sha256_known_answers)
{
    static const struct {
        const char *msg, *digest;
    } v[] = {
        {"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
        {"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
        {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
         "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
    };
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        uint8_t d[32];
        char h[65];
        hd_sha256(d, v[i].msg, strlen(v[i].msg));
        hex(h, d);
        CHECK_STR_EQ(h, v[i].digest);
    }
}

/* Random lengths around the block and padding boundaries and a large one, fed in random
 * pieces: OpenSSL's digest every time. */
DT_TEST(sha256_matches_openssl)
{
    static uint8_t buf[300000];
    for (size_t i = 0; i < sizeof buf; i++) buf[i] = (uint8_t)next();
    for (int t = 0; t < 400; t++) {
        const size_t n = t < 300 ? (size_t)t : (size_t)(next() % sizeof buf);
        uint8_t a[32], b[32];
        openssl_sha256(a, buf, n);
        struct dt_sha256_hd s;
        dt_sha256_hd_init(&s);
        size_t at = 0;
        while (at < n) {
            const size_t r = 1 + next() % 200, k = r < n - at ? r : n - at;
            dt_sha256_hd_update(&s, buf + at, k);
            at += k;
        }
        dt_sha256_hd_final(&s, b);
        CHECK(memcmp(a, b, 32) == 0);
    }
}

/* The kernels' work on the host: leaf_kernel, step_kernel per level, tensor_kernel (nets/
 * cuda/digest.cu), each a loop over its items calling the same DT_HD functions. */
static void emulate(uint8_t *digests, const float *const *tensors, const int64_t *counts, int n)
{
    uint64_t bytes[16];
    int64_t storage[2 * (DT_TREE_MAX_LEVELS + 1) * 17];
    DT_ASSERT(n <= 16);
    for (int t = 0; t < n; t++) bytes[t] = (uint64_t)counts[t] * 4;
    struct dt_tree_plan p;
    DT_ASSERT(dt_tree_plan_make(&p, bytes, n, storage));
    const int64_t total = p.count[0][n];
    uint8_t *a = malloc((size_t)total * 32), *b = malloc((size_t)total * 32);
    for (int64_t i = 0; i < total; i++) {
        int t = 0;
        while (t + 1 < n && p.off[0][t + 1] <= i) t++;
        dt_tree_leaf(a + i * 32, (const uint8_t *)tensors[t], bytes[t], i - p.off[0][t]);
    }
    for (int l = 0; l < p.levels; l++) {
        for (int64_t i = 0; i < p.count[l + 1][n]; i++)
            dt_tree_step(b, a, p.count[l], p.off[l], p.off[l + 1], n, i);
        uint8_t *s = a;
        a = b, b = s;
    }
    for (int t = 0; t < n; t++)
        dt_tree_tensor(digests + t * 32, bytes[t], a + p.off[p.levels][t] * 32);
    free(a), free(b);
}

/* Every size class (LF floats a leaf, A leaves a node): 0 values, 1, a partial leaf, one leaf,
 * one leaf and a bit, A leaves (one node), A + 1 leaves (two levels), A^3 + 1 leaves (four
 * levels) less a few floats. */
#define LF (DT_TREE_LEAF_BYTES / 4)
#define A DT_TREE_ARITY
static const int64_t sizes[] = {0,      1,     LF - 1,    LF,
                                LF + 1, A *LF, A *LF + 1, (A * A * A + 1) * LF - 3};
#define N_SIZES ((int)(sizeof sizes / sizeof sizes[0]))

static float *filled(int64_t n)
{
    float *v = malloc((size_t)(n > 0 ? n : 1) * 4);
    for (int64_t i = 0; i < n; i++) v[i] = (float)(int32_t)next() * 1e-9f;
    return v;
}

DT_TEST(op_equals_kernel_emulation)
{
    float *ts[N_SIZES];
    for (int i = 0; i < N_SIZES; i++) ts[i] = filled(sizes[i]);
    uint8_t want[N_SIZES * 32], got[N_SIZES * 32], one[32];
    emulate(want, (const float *const *)ts, sizes, N_SIZES);
    /* each tensor alone: the same digest as in the batch */
    for (int i = 0; i < N_SIZES; i++) {
        emulate(one, (const float *const *)&ts[i], &sizes[i], 1);
        CHECK(memcmp(one, want + i * 32, 32) == 0);
    }
    /* the structure by hand for the smallest cases: a one-leaf tensor's top is its leaf */
    uint8_t leaf[32], top[32];
    dt_tree_leaf(leaf, (const uint8_t *)ts[1], 4, 0);
    dt_tree_tensor(top, 4, leaf);
    CHECK(memcmp(top, want + 32, 32) == 0);
    for (int threads = 1; threads <= 3; threads++) {
        struct dt_backend *be = cpu(threads);
        struct dt_policy pol;
        dt_policy_from_level(&pol, DT_LEVEL_PORTABLE);
        CHECK(dt_tensor_digests(be, got, (const float *const *)ts, sizes, N_SIZES, &pol) == DT_OK);
        CHECK(memcmp(got, want, sizeof got) == 0);
        dt_backend_destroy(be);
    }
    /* one flipped bit anywhere changes that tensor's digest, and only that one */
    ts[6][sizes[6] - 1] = -ts[6][sizes[6] - 1] + 1.0f;
    emulate(got, (const float *const *)ts, sizes, N_SIZES);
    for (int i = 0; i < N_SIZES; i++)
        CHECK((memcmp(got + i * 32, want + i * 32, 32) == 0) == (i != 6));
    /* distinct sizes of zeros digest apart (the length is bound) */
    float zeros[2 * LF] = {0};
    const float *z[2] = {zeros, zeros};
    const int64_t zc[2] = {LF, LF + 1};
    emulate(got, z, zc, 2);
    CHECK(memcmp(got, got + 32, 32) != 0);
    for (int i = 0; i < N_SIZES; i++) free(ts[i]);
}

/* hash.digest: tree end to end: a run's trace holds the tree digests -- its step-0 snapshot's
 * tree model digest is the trace's row 0, its SHA-256 one is not -- run.json says so, the
 * digests are the same at 1 and 2 threads (the second run by default: the tree is it), and `detrain
 * compare` refuses to set a tree trace against a SHA-256 one (exit 2, naming hash.digest) rather
 * than call every step divergent. */
DT_TEST(tree_traces)
{
    static char out[65536];
    const char *t1 = TMP "t1", *t2 = TMP "t2", *sha = TMP "sha";
    const char *common = "--quiet --set train.steps=4 --set replicas=1 "
                         "--set report.overhead_samples=0";
    int rc = dt_run_capture(out, sizeof out,
                            "rm -rf '%s' '%s' '%s' && '%s' run '%s' --out '%s' %s "
                            "--set hash.digest=tree --set backend.threads=1 && '%s' run '%s' "
                            "--out '%s' %s && '%s' run '%s' --out '%s' %s "
                            "--set hash.digest=sha256",
                            t1, t2, sha, EXE, TINY, t1, common, EXE, TINY, t2, common, EXE, TINY,
                            sha, common);
    if (rc != 0) fprintf(stderr, "%s\n", out);
    CHECK_INT_EQ(rc, 0);
    rc =
        dt_run_capture(out, sizeof out,
                       "'%s' compare '%s/portable/replica-0' '%s/portable/replica-0'", EXE, t1, t2);
    CHECK_INT_EQ(rc, 0);
    CHECK_CONTAINS(out, "identical");
    char *json = dt_read_file(TMP "t1/portable/replica-0/run.json", NULL);
    CHECK(json && strstr(json, "\"hash_digest\": \"tree\""));
    free(json);
    /* the step-0 snapshot against the trace's row 0 */
    char trace0[128] = "", path[4096];
    CHECK_INT_EQ(dt_csv_field(trace0, sizeof trace0, TMP "t1/portable/replica-0/trace.csv", 0, 2),
                 0);
    dt_snapshot_path(path, sizeof path, TMP "t1/portable/replica-0", 0);
    struct dt_snapshot snap;
    struct dt_error err;
    DT_ASSERT(dt_snapshot_read(&snap, path, &err) == DT_OK);
    char tree[DT_DIGEST_HEX], plain[DT_DIGEST_HEX];
    dt_snapshot_model_digest(tree, &snap, true);
    dt_snapshot_model_digest(plain, &snap, false);
    CHECK_STR_EQ(tree, trace0);
    CHECK(strcmp(plain, trace0) != 0);
    dt_snapshot_free(&snap);
    /* the SHA-256 run's row 0 is the plain digest of the same initial weights */
    char sha0[128] = "";
    CHECK_INT_EQ(dt_csv_field(sha0, sizeof sha0, TMP "sha/portable/replica-0/trace.csv", 0, 2), 0);
    CHECK_STR_EQ(sha0, plain);
    rc = dt_run_capture(out, sizeof out, "'%s' compare '%s' '%s' 2>&1", EXE, t1, sha);
    CHECK_INT_EQ(rc, 2);
    CHECK_CONTAINS(out, "hash.digest");
    rc = dt_run_capture(out, sizeof out,
                        "'%s' compare '%s/portable/replica-0' '%s/portable/replica-0' 2>&1", EXE,
                        t1, sha);
    CHECK_INT_EQ(rc, 2);
    CHECK_CONTAINS(out, "traces of two kinds");
    /* the trace files alone, away from their run.json: the header names the kind (exit 2,
     * not "diverged at step 0"); explain and reproduce say the same, never "the initial
     * weights differ" */
    const char *bare = TMP "bare";
    rc = dt_run_capture(out, sizeof out,
                        "rm -rf '%s' && mkdir -p '%s' && cp '%s/portable/replica-0/trace.csv' "
                        "'%s/tree.csv' && cp '%s/portable/replica-0/trace.csv' '%s/sha.csv' && "
                        "head -1 '%s/tree.csv' '%s/sha.csv' && '%s' compare '%s/tree.csv' "
                        "'%s/sha.csv' 2>&1",
                        bare, bare, t1, bare, sha, bare, bare, bare, EXE, bare, bare);
    CHECK_INT_EQ(rc, 2);
    CHECK_CONTAINS(out, "step,loss,model_tree\n");
    CHECK_CONTAINS(out, "step,loss,model_sha256\n");
    CHECK_CONTAINS(out, "tree.csv holds tree digests and ");
    CHECK(strstr(out, "diverged") == NULL);
    rc = dt_run_capture(out, sizeof out,
                        "'%s' explain '%s/portable/replica-0' '%s/portable/replica-0' 2>&1", EXE,
                        t1, sha);
    CHECK_INT_EQ(rc, 2);
    CHECK_CONTAINS(out, "traces of two kinds");
    CHECK(strstr(out, "initial weights") == NULL);
    /* negative control: with the kinds unknown (legacy headers, no run.json), the same two
     * files compare as digests, which part at step 0 */
    rc = dt_run_capture(out, sizeof out,
                        "sed -i '1s/.*/step,loss,model_digest/' '%s/tree.csv' '%s/sha.csv' && "
                        "'%s' compare '%s/tree.csv' '%s/sha.csv' 2>&1",
                        bare, bare, EXE, bare, bare);
    CHECK_INT_EQ(rc, 1);
    CHECK_CONTAINS(out, "diverged at step 0");
}

/* On a GPU: the CUDA op's bytes are the CPU op's for every size class. */
DT_TEST(gpu_equals_cpu)
{
    struct dt_backend *g = gpu_or_skip(), *c = cpu(2);
    struct dt_policy pol;
    dt_policy_from_level(&pol, DT_LEVEL_PORTABLE);
    float *ts[N_SIZES], *ds[N_SIZES];
    for (int i = 0; i < N_SIZES; i++) {
        ts[i] = filled(sizes[i]);
        ds[i] = dt_backend_alloc(g, (size_t)(sizes[i] > 0 ? sizes[i] : 1) * 4);
        dt_backend_upload(g, ds[i], ts[i], (size_t)sizes[i] * 4);
    }
    uint8_t want[N_SIZES * 32], got[N_SIZES * 32];
    CHECK(dt_tensor_digests(c, want, (const float *const *)ts, sizes, N_SIZES, &pol) == DT_OK);
    uint8_t *dd = dt_backend_alloc(g, sizeof got);
    CHECK(dt_tensor_digests(g, dd, (const float *const *)ds, sizes, N_SIZES, &pol) == DT_OK);
    dt_backend_download(g, got, dd, sizeof got);
    CHECK(memcmp(got, want, sizeof got) == 0);
    dt_backend_free(g, dd);
    for (int i = 0; i < N_SIZES; i++) free(ts[i]), dt_backend_free(g, ds[i]);
    dt_backend_destroy(g);
    dt_backend_destroy(c);
}

DT_TEST_MAIN(DT_CASE(sha256_known_answers), DT_CASE(sha256_matches_openssl),
             DT_CASE(op_equals_kernel_emulation), DT_CASE(tree_traces), DT_CASE(gpu_equals_cpu))
