/* The cost model (nets/cost.h, nets/cost_cuda.c: the CUDA backend's own launches recorded
 * without a device, `detrain cost`).
 * unit: ops counted through the CPU backend give the CUDA backend's launches, library calls
 * and waits for the paths the CUDA code takes (cuBLAS at fast, the ordered kernel at
 * portable, the loss's read-back, the bias gradient's one launch for all shards and its
 * per-shard fallback beyond the kernel's bounds or with DETRAIN_CUDA_ONE_PASS=0, a check
 * read at once or deferred); the record is the code's branch (attention's tiled backward:
 * three kernels, two under math: exact) and counted where a device counts; the prediction's
 * arithmetic (launch-bound, bandwidth-bound, serial, graph, waits); counting changes no bit
 * of a training step. Skipped without the CUDA toolkit (no recording backend).
 * gpu: on a device, each step's counted launches and waits agree with the record.
 * e2e: `detrain cost` over the MLP and the GPT at three levels writes a row per op with
 * launches, a step and a hash row per level; bad input is refused before anything is
 * written. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "harness/record/hash.h"
#include "nets/cost.h"
#include "nets/cuda/recorder.h"
#include "nets/model.h"
#include "nets/step.h"
#include "tests/check.h"
#include "tests/op_helpers.h"
#include "tests/run_helper.h"

#define EXE DT_DETRAIN_EXE
#define TMP DT_TEST_TMP_DIR "/cost."

static struct dt_policy with(enum dt_level l, const char *control, const char *value)
{
    struct dt_policy p = level(l);
    struct dt_error err = {0};
    CHECK_INT_EQ(dt_policy_set_control(&p, control, value, &err), DT_OK);
    return p;
}

/* The tally of one call made by fn on a fresh tally. */
#define COUNTED(be, t, call)                                                                       \
    do {                                                                                           \
        memset(&(t), 0, sizeof(t));                                                                \
        (t).model = &dt_cuda_cost_model;                                                           \
        dt_backend_cost_enable((be), &(t));                                                        \
        CHECK_INT_EQ((call), DT_OK);                                                               \
        dt_backend_cost_enable((be), NULL);                                                        \
    } while (0)

/* The model records the CUDA backend's own launches: a build without the CUDA toolkit has
 * no recording backend, and nothing to count with. */
static bool can_record(void)
{
    struct dt_backend *r = dt_cuda_recorder_create();
    if (r) dt_backend_destroy(r);
    return r != NULL;
}

DT_TEST(counts_follow_the_code)
{
    if (!can_record()) DT_SKIP("no CUDA toolkit in this build: no recording backend");
    struct dt_backend *c = cpu(2);
    const int64_t B = 64, in = 30, out = 10;
    float *x = dt_xmalloc((size_t)(B * in) * 4), *w = dt_xmalloc((size_t)(in * out) * 4);
    float *bias = dt_xmalloc((size_t)out * 4), *y = dt_xmalloc((size_t)(B * out) * 4);
    float *db = dt_xmalloc((size_t)(4 * 2000) * 4), *dy = dt_xmalloc((size_t)(B * 2000) * 4);
    fill(x, B * in, 1.0), fill(w, in * out, 0.1), fill(bias, out, 0.1), fill(dy, B * 2000, 0.1);
    const struct dt_policy fast = level(DT_LEVEL_FAST), r2r = level(DT_LEVEL_RUN_TO_RUN),
                           port = level(DT_LEVEL_PORTABLE);
    struct dt_cost_tally t;
    /* dense forward: cuBLAS + the bias add at fast; the ordered kernel + bias add at
     * portable; the exact product under math: exact has many launches and reads its scales */
    COUNTED(c, t, dt_dense_forward(c, y, x, w, bias, B, in, out, &fast));
    const struct dt_op_cost *f = &t.op[DT_OP_DENSE_FORWARD];
    CHECK(f->calls == 1 && f->launches == 2 && f->lib_calls == 1 && f->waits == 0);
    CHECK(!f->lib_tf32 && f->lib_flops == 2.0 * B * in * out); /* fast: cuBLAS in FP32 */
    const struct dt_policy tf32 = with(DT_LEVEL_FAST, "math", "tf32");
    COUNTED(c, t, dt_dense_forward(c, y, x, w, bias, B, in, out, &tf32));
    CHECK(f->lib_tf32 && f->lib_flops == 2.0 * B * in * out); /* TF32 only when asked */
    COUNTED(c, t, dt_dense_forward(c, y, x, w, bias, B, in, out, &port));
    CHECK(f->launches == 2 && f->lib_calls == 0 && f->flops > 0 && !f->lib_tf32);
    const struct dt_policy exact = with(DT_LEVEL_PORTABLE, "math", "exact");
    COUNTED(c, t, dt_dense_forward(c, y, x, w, bias, B, in, out, &exact));
    CHECK(f->launches > 4 && f->int_ops > 0 && f->waits >= 1);
    /* the loss reads its values back: one wait per call at every level */
    int32_t labels[64];
    for (int i = 0; i < B; i++) labels[i] = i % (int)out;
    float loss;
    COUNTED(c, t, dt_softmax_xent_forward(c, y, &loss, NULL, y, labels, B, out, &fast));
    CHECK(t.op[DT_OP_SOFTMAX_XENT_FORWARD].waits == 1);
    /* the bias gradient: atomics float, 2 (a memset and the atomic kernel); fixed point, one
     * block when small (1 launch), else 4 kernels, and its check -- read at once (a wait)
     * unless the step defers checks */
    const struct dt_op_cost *b = &t.op[DT_OP_BIAS_BACKWARD];
    COUNTED(c, t, dt_bias_backward(c, db, dy, B, out, &fast));
    CHECK(b->launches == 2 && b->waits == 0);
    COUNTED(c, t, dt_bias_backward(c, db, dy, B, out, &r2r));
    CHECK(b->launches == 1 && b->waits == 1);
    COUNTED(c, t, dt_bias_backward(c, db, dy, B, 2000, &r2r));
    CHECK(b->launches == 4 && b->waits == 1);
    dt_backend_defer_checks(c, true);
    COUNTED(c, t, dt_bias_backward(c, db, dy, B, 2000, &r2r));
    CHECK(b->launches == 4 && b->waits == 0);
    /* the exact product's check of its scales: read with the step's end too (issue 67,
     * item 4), so math: exact waits nowhere in a training step; its launches as above */
    COUNTED(c, t, dt_dense_forward(c, y, x, w, bias, B, in, out, &exact));
    CHECK(f->launches > 4 && f->int_ops > 0 && f->waits == 0);
    /* reduction: exact over 4 shards: one launch for all of them (dense.cu,
     * bias_fixed_shards_kernel); beyond its columns, or turned off, a call per shard */
    int64_t row[5];
    for (int s = 0; s <= 4; s++) row[s] = dt_shard_row(B, 4, s);
    const struct dt_shards sh = {.count = 4, .row = row};
    dt_backend_set_shards(c, &sh);
    COUNTED(c, t, dt_bias_backward(c, db, dy, B, out, &port));
    CHECK(b->launches == 1 && b->waits == 0);
    COUNTED(c, t, dt_bias_backward(c, db, dy, B, 2000, &port));
    CHECK(b->launches == 16);
    setenv("DETRAIN_CUDA_ONE_PASS", "0", 1);
    COUNTED(c, t, dt_bias_backward(c, db, dy, B, out, &port));
    CHECK(b->launches == 16);
    unsetenv("DETRAIN_CUDA_ONE_PASS");
    dt_backend_set_shards(c, NULL);
    dt_backend_defer_checks(c, false);
    /* blocking copies outside the ops are counted as the step's waits */
    memset(&t, 0, sizeof t);
    t.model = &dt_cuda_cost_model;
    dt_backend_cost_enable(c, &t);
    dt_backend_download(c, &loss, y, sizeof loss);
    dt_backend_cost_enable(c, NULL);
    CHECK(t.downloads == 1 && t.download_bytes == sizeof loss);
    free(x), free(w), free(bias), free(y), free(db), free(dy);
    dt_backend_destroy(c);
}

/* The record is the code's own launches: attention's backward at portable is three kernels
 * where its heads fit the tiles (dS, then dK and dV, then dQ) and two under math: exact (dS,
 * the per-element gradient) -- the branch the host code takes, which a hand-kept model had
 * missed (it counted two for both); and a recording backend counts each launch it records at
 * the same place a device would (dt_backend_launch_counts), launching nothing: this runs
 * without a GPU. */
DT_TEST(record_is_the_code)
{
    if (!can_record()) DT_SKIP("no CUDA toolkit in this build: no recording backend");
    struct dt_backend *like = cpu(1), *r = dt_cuda_recorder_create();
    enum { B = 2, T = 8, H = 2, D = 16 };
    static float qkv[B * T * 3 * D], dqkv[B * T * 3 * D], dout[B * T * D], att[B * H * T * T],
        ds[B * H * T * T];
    const struct dt_policy port = level(DT_LEVEL_PORTABLE);
    const struct dt_policy exact = with(DT_LEVEL_PORTABLE, "math", "exact");
    struct dt_op_cost c = {0}, e = {0};
    dt_cuda_recorder_begin(r, &c, like, true);
    CHECK_INT_EQ(dt_attention_backward(r, dqkv, ds, dout, att, qkv, B, T, H, D, &port), DT_OK);
    dt_cuda_recorder_end(r);
    dt_cuda_recorder_begin(r, &e, like, true);
    CHECK_INT_EQ(dt_attention_backward(r, dqkv, ds, dout, att, qkv, B, T, H, D, &exact), DT_OK);
    dt_cuda_recorder_end(r);
    CHECK(c.launches == 3 && c.waits == 0 && c.flops > 0 && c.bytes > 0);
    CHECK(e.launches == 2 && e.flops > c.flops); /* exact products: more operations a term */
    const struct dt_launch_counts n = dt_backend_launch_counts(r);
    CHECK(n.kernels == 5 && n.lib_calls == 0 && n.memsets == 0);
    dt_backend_destroy(r);
    dt_backend_destroy(like);
}

DT_TEST(prediction_arithmetic)
{
    const struct dt_cost_device *d = &dt_cost_h100;
    struct dt_op_cost k = {.launches = 1};
    CHECK_NEAR(dt_cost_predict_s(&k, d, false), d->launch_s, 1e-15); /* launch-bound */
    CHECK_NEAR(dt_cost_predict_s(&k, d, true), d->graph_launch_s, 1e-15);
    k.lib_calls = 1;
    CHECK_NEAR(dt_cost_predict_s(&k, d, false), d->lib_launch_s, 1e-15);
    struct dt_op_cost big = {.launches = 1, .bytes = 1e9}; /* bandwidth-bound */
    CHECK_NEAR(dt_cost_predict_s(&big, d, false), 1e9 / d->bytes_per_s, 1e-12);
    CHECK_NEAR(dt_cost_predict_s(&big, d, true), 1e9 / d->bytes_per_s, 1e-12);
    struct dt_op_cost chain = {.launches = 1, .serial_ops = 1e6}; /* one thread's chain */
    CHECK_NEAR(dt_cost_predict_s(&chain, d, false), 1e6 / d->serial_ops_per_s, 1e-12);
    struct dt_op_cost waits = {.launches = 2, .waits = 3};
    CHECK_NEAR(dt_cost_predict_s(&waits, d, false), 2 * d->launch_s + 3 * d->wait_s, 1e-15);
    CHECK_NEAR(dt_cost_predict_s(&waits, d, true), 2 * d->graph_launch_s, 1e-15);
    struct dt_op_cost sum = {0};
    dt_cost_accumulate(&sum, &big);
    dt_cost_accumulate(&sum, &waits);
    CHECK(sum.launches == 3 && sum.bytes == 1e9 && sum.waits == 3);
}

/* The same training steps with and without counting give the same weights, bit for bit,
 * at every level (counting happens before each op and touches only the tally). */
DT_TEST(counting_changes_nothing)
{
    const enum dt_level levels[] = {DT_LEVEL_FAST, DT_LEVEL_RUN_TO_RUN, DT_LEVEL_PORTABLE};
    for (int l = 0; l < 3; l++) {
        uint8_t digest[2][32];
        for (int k = 0; k < 2; k++) {
            struct dt_backend *c = cpu(2);
            struct dt_model *m = NULL;
            struct dt_error err = {0};
            const int64_t hidden[] = {17};
            CHECK_INT_EQ(dt_mlp_create(&m, c, 12, hidden, 1, 5, 16, &err), DT_OK);
            dt_model_init(m, 3, 0);
            struct dt_cost_tally *t = dt_xcalloc(1, sizeof *t);
            t->model = &dt_cuda_cost_model;
            t->dev = &dt_cost_h100;
            if (k == 1) dt_backend_cost_enable(c, t);
            const struct dt_policy pol = level(levels[l]);
            const struct dt_sgd_options sgd = {.lr = 0.05f, .momentum = 0.9f};
            float x[16 * 12], loss;
            uint8_t y[16];
            rng_state = 0x1234;
            for (int s = 0; s < 3; s++) {
                fill(x, 16 * 12, 1.0);
                for (int i = 0; i < 16; i++) y[i] = (uint8_t)(i % 5);
                CHECK_INT_EQ(dt_model_train_step(m, x, y, 16, &sgd, &pol, &loss), DT_OK);
            }
            if (k == 1) CHECK(t->op[DT_OP_DENSE_FORWARD].calls == 3 * 2);
            dt_backend_cost_enable(c, NULL);
            uint8_t td[8][32];
            float staging[17 * 12];
            dt_hash_model(digest[k], td, m, staging);
            free(t);
            dt_model_destroy(m);
            dt_backend_destroy(c);
        }
        CHECK(memcmp(digest[0], digest[1], 32) == 0);
    }
}

/* `detrain cost` on a config: a row per op called, with launches, and a step and a hash
 * row per level; returns the CSV's text (caller frees). */
static char *cost_csv(const char *config, const char *sets, const char *name)
{
    static char out[1 << 16];
    char csv[512];
    snprintf(csv, sizeof csv, TMP "%s.csv", name);
    remove(csv);
    const int rc = dt_run_capture(out, sizeof out,
                                  EXE " cost %s --set 'policies=[fast, run_to_run, portable]' %s "
                                      "--csv %s 2>&1",
                                  config, sets, csv);
    CHECK_INT_EQ(rc, 0);
    CHECK_CONTAINS(out, "cost model:");
    CHECK_CONTAINS(out, "pred_ms");
    CHECK(strstr(out, "counted on this device") == NULL); /* the CPU launches nothing */
    char *text = dt_read_file(csv, NULL);
    CHECK(text != NULL);
    if (!text) return NULL;
    CHECK(strncmp(text, "config,policy,what,calls,launches,waits,", 40) == 0);
    const char *levels[] = {"fast", "run_to_run", "portable"};
    for (int l = 0; l < 3; l++) {
        char key[64];
        snprintf(key, sizeof key, ",%s,step,", levels[l]);
        CHECK_CONTAINS(text, key);
        snprintf(key, sizeof key, ",%s,hash (", levels[l]);
        CHECK_CONTAINS(text, key);
    }
    /* every op row: at least one call and one launch */
    int rows = 0;
    for (char *line = strchr(text, '\n'); line && line[1]; line = strchr(line + 1, '\n')) {
        char pol[64], what[64];
        double calls, launches;
        if (sscanf(line + 1, "%*[^,],%63[^,],%63[^,],%lf,%lf", pol, what, &calls, &launches) != 4)
            continue;
        if (strcmp(what, "step") == 0 || strncmp(what, "hash", 4) == 0) continue;
        rows++;
        if (calls < 1 || launches < 1)
            fprintf(stderr, "%s %s: %g calls, %g launches\n", pol, what, calls, launches);
        CHECK(calls >= 1 && launches >= 1);
    }
    CHECK(rows >= 15);
    return text;
}

DT_TEST(cli_models)
{
    if (!can_record()) DT_SKIP("no CUDA toolkit in this build: detrain cost refuses (cli_refuses)");
    char *a = cost_csv(DT_TEST_DATA_DIR "/tiny.yaml", "", "mlp");
    CHECK_CONTAINS(a, ",portable,exact_sum,");
    free(a);
    char *g = cost_csv(DT_TEST_DATA_DIR "/gpt_tiny.yaml", "--set hash.digest=tree", "gpt");
    CHECK_CONTAINS(g, ",fast,attention_forward,");
    CHECK_CONTAINS(g, ",portable,hash (tree),"); /* the op tensor_digests, as hashing */
    free(g);
}

/* A missing --measured file, an unknown option and a CSV path inside what it reads are
 * refused (exit 2) and leave no CSV. */
DT_TEST(cli_refuses)
{
    static char out[8192];
    const char *csv = TMP "refused.csv";
    remove(csv);
    CHECK_INT_EQ(dt_run_capture(out, sizeof out,
                                EXE " cost " DT_TEST_DATA_DIR "/tiny.yaml --measured "
                                    "/nonexistent/bench.csv --csv %s 2>&1",
                                csv),
                 2);
    CHECK_CONTAINS(out, "/nonexistent/bench.csv");
    CHECK(!dt_path_exists(csv));
    CHECK_INT_EQ(
        dt_run_capture(out, sizeof out, EXE " cost " DT_TEST_DATA_DIR "/tiny.yaml --frob 2>&1"), 2);
    CHECK_CONTAINS(out, "--frob");
    CHECK_INT_EQ(dt_run_capture(out, sizeof out, EXE " cost 2>&1"), 2);
    CHECK_CONTAINS(out, "missing CONFIG");
    if (!can_record()) { /* no CUDA toolkit: refused, saying what it needs */
        CHECK(dt_run_capture(out, sizeof out, EXE " cost " DT_TEST_DATA_DIR "/tiny.yaml 2>&1") !=
              0);
        CHECK_CONTAINS(out, "needs a build with the CUDA toolkit");
    }
}

/* gpu: `detrain cost` on the device counts what each step really launched and waited
 * (dt_backend_launch_counts: every kernel at DT_LAUNCH, every cuBLAS and cuDNN call, memset
 * and device copy where it is made) and sets it beside the model's prediction: for the MLP,
 * LeNet (cuDNN at fast and run_to_run, the own kernels at portable), the BNN and the GPT, at fast,
 * run_to_run, portable and portable with exact products, every line must say the two agree. The
 * negative control is the CPU: it launches nothing, so no line is printed there (cli_models). */
DT_TEST(gpu_counts_agree_with_model)
{
    dt_backend_destroy(gpu_or_skip());
    static const struct {
        const char *config, *sets;
    } runs[] = {
        {DT_TEST_DATA_DIR "/tiny.yaml", ""},
        {DT_SOURCE_DIR "/configs/lenet.yaml",
         "--set dataset.train_limit=2000 --set dataset.test_limit=200"},
        {DT_SOURCE_DIR "/configs/bnn.yaml",
         "--set dataset.train_limit=2000 --set dataset.test_limit=200"},
        /* the committed corpus: a GPU machine has no fortunes (the H200, 2026-12-04) */
        {DT_TEST_DATA_DIR "/gpt_tiny.yaml",
         "--set hash.digest=tree --set dataset.path=" DT_TEST_DATA_DIR "/gpt_corpus.txt"},
    };
    static char out[1 << 17];
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        const int rc = dt_run_capture(
            out, sizeof out,
            EXE " cost %s --set backend.device=cuda --set 'policies=[fast, run_to_run, portable, "
                "{base: portable, math: exact}]' %s 2>&1",
            runs[i].config, runs[i].sets);
        CHECK_INT_EQ(rc, 0);
        int lines = 0, agree = 0;
        for (const char *p = strstr(out, "counted on this device:"); p;
             p = strstr(p + 1, "counted on this device:")) {
            lines++;
            const char *eol = strchr(p, '\n');
            if (eol && eol - p > 6 && strncmp(eol - 5, "agree", 5) == 0) agree++;
        }
        if (lines != 4 || agree != 4)
            fprintf(stderr, "%s %s:\n%s\n", runs[i].config, runs[i].sets, out);
        CHECK_INT_EQ(lines, 4);
        CHECK_INT_EQ(agree, 4);
    }
}

DT_TEST_MAIN(DT_CASE(counts_follow_the_code), DT_CASE(record_is_the_code),
             DT_CASE(prediction_arithmetic), DT_CASE(counting_changes_nothing), DT_CASE(cli_models),
             DT_CASE(cli_refuses), DT_CASE(gpu_counts_agree_with_model))
