/* The CUDA backend against the CPU backend (the reference). Cases labelled `gpu` need a
 * device and exit 77 without one (CPU-only machines and CI build and link them, then skip).
 * Every check draws fresh inputs and poisons the outputs (NaN) before each run, so a
 * kernel that writes nothing cannot pass. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "tests/check.h"
#include "tests/op_helpers.h"
#include "nets/backend_impl.h"
#include "nets/model.h"
#include "nets/step.h"
#ifdef DETRAIN_HAVE_CUDA_TOOLKIT
#include "nets/cuda/cuda.h"
#endif

/* Without a device (or without CUDA in the build) the backend refuses with a message that
 * names it and says what to do; with one, it comes up. Runs everywhere. */
DT_TEST(create_or_clear_error)
{
    struct dt_backend *be = NULL;
    struct dt_backend_options opt = {DT_BACKEND_CUDA, 0, 0};
    struct dt_error err = {0};
    enum dt_status st = dt_backend_create(&be, &opt, &err);
    if (st == DT_OK) {
        CHECK_STR_EQ(dt_backend_name(be), "cuda");
        dt_backend_destroy(be);
        return;
    }
    CHECK_INT_EQ(st, DT_ERR_UNSUPPORTED);
    CHECK_CONTAINS(err.msg, "backend 'cuda'");
    CHECK_CONTAINS(err.msg, "backend.device: cpu");
    struct dt_backend_options bad = {DT_BACKEND_CUDA, 0, 64};
    CHECK_INT_EQ(dt_backend_create(&be, &bad, &err), DT_ERR_UNSUPPORTED);
}

static float *dev_floats(struct dt_backend *g, const float *host, int64_t n)
{
    float *d = dt_backend_alloc(g, (size_t)n * sizeof(float));
    dt_backend_upload(g, d, host, (size_t)n * sizeof(float));
    return d;
}

static void poison(struct dt_backend *g, float *d, int64_t n)
{
    float *nan = dt_xmalloc((size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++) nan[i] = NAN;
    dt_backend_upload(g, d, nan, (size_t)n * sizeof(float));
    free(nan);
}

/* 1 when the device array holds exactly the host array's bits. */
static int same_bits(struct dt_backend *g, const float *d, const float *host, int64_t n,
                     const char *what)
{
    float *h = dt_xmalloc((size_t)n * sizeof(float));
    dt_backend_download(g, h, d, (size_t)n * sizeof(float));
    int ok = memcmp(h, host, (size_t)n * sizeof(float)) == 0;
    for (int64_t i = 0; i < n && !ok; i++)
        if (memcmp(&h[i], &host[i], sizeof(float)) != 0) {
            fprintf(stderr, "%s: element %lld: gpu %a, cpu %a\n", what, (long long)i, (double)h[i],
                    (double)host[i]);
            break;
        }
    free(h);
    return ok;
}

/* ReLU forward/backward and SGD: bit-equal to the CPU at every level, for several block
 * sizes (the grid follows the block size), sizes that are not multiples of a block. */
DT_TEST(elementwise_parity)
{
    struct dt_backend *g = gpu_or_skip(), *c = cpu(2);
    const int64_t sizes[] = {1, 255, 257, 100003};
    const int blocks[] = {32, 128, 256, 1024};
    for (int l = 0; l < 3; l++) {
        struct dt_policy pol = level((enum dt_level)l);
        for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
            const int64_t n = sizes[si];
            float *x = dt_xmalloc((size_t)n * sizeof(float)), *dy = dt_xmalloc((size_t)n * 4);
            float *w = dt_xmalloc((size_t)n * 4), *v = dt_xmalloc((size_t)n * 4);
            float *gr = dt_xmalloc((size_t)n * 4);
            fill(x, n, 2.0);
            fill(dy, n, 1.0);
            fill(w, n, 0.5);
            fill(v, n, 0.1);
            fill(gr, n, 0.3);
            x[0] = 0.0f; /* the subgradient's edge */
            /* CPU reference */
            float *cy = dt_xmalloc((size_t)n * 4), *cdx = dt_xmalloc((size_t)n * 4);
            float *cw = dt_xmalloc((size_t)n * 4), *cv = dt_xmalloc((size_t)n * 4);
            memcpy(cw, w, (size_t)n * 4);
            memcpy(cv, v, (size_t)n * 4);
            CHECK_INT_EQ(dt_relu_forward(c, cy, x, n, &pol), DT_OK);
            CHECK_INT_EQ(dt_relu_backward(c, cdx, dy, cy, n, &pol), DT_OK);
            CHECK_INT_EQ(dt_sgd_update(c, cw, cv, gr, n, 0.05f, 0.9f, 1e-4f, &pol), DT_OK);
            for (size_t bi = 0; bi < sizeof blocks / sizeof blocks[0]; bi++) {
#ifdef DETRAIN_HAVE_CUDA_TOOLKIT
                dt_cuda_set_block_size(g, blocks[bi]);
#endif
                float *dx_ = dev_floats(g, x, n), *ddy = dev_floats(g, dy, n);
                float *dw = dev_floats(g, w, n), *dv = dev_floats(g, v, n),
                      *dg = dev_floats(g, gr, n);
                float *dyo = dt_backend_alloc(g, (size_t)n * 4),
                      *ddx = dt_backend_alloc(g, (size_t)n * 4);
                poison(g, dyo, n);
                poison(g, ddx, n);
                CHECK_INT_EQ(dt_relu_forward(g, dyo, dx_, n, &pol), DT_OK);
                CHECK_INT_EQ(dt_relu_backward(g, ddx, ddy, dyo, n, &pol), DT_OK);
                CHECK_INT_EQ(dt_sgd_update(g, dw, dv, dg, n, 0.05f, 0.9f, 1e-4f, &pol), DT_OK);
                CHECK(same_bits(g, dyo, cy, n, "relu_forward"));
                CHECK(same_bits(g, ddx, cdx, n, "relu_backward"));
                CHECK(same_bits(g, dw, cw, n, "sgd_update w"));
                CHECK(same_bits(g, dv, cv, n, "sgd_update v"));
                float *ptrs[] = {dx_, ddy, dw, dv, dg, dyo, ddx};
                for (int k = 0; k < 7; k++) dt_backend_free(g, ptrs[k]);
            }
            free(x), free(dy), free(w), free(v), free(gr), free(cy), free(cdx), free(cw), free(cv);
        }
    }
#ifdef DETRAIN_HAVE_CUDA_TOOLKIT
    dt_cuda_set_block_size(g, 0);
#endif
    dt_backend_destroy(g);
    dt_backend_destroy(c);
}

/* first_nonfinite : the device scan gives the CPU's index -- the first
 * NaN/Inf, -1 when none; -0, subnormals and huge finite values are finite -- for sizes
 * around the block and grid, with the bad element first, last, in the middle, or several. */
DT_TEST(first_nonfinite_parity)
{
    struct dt_backend *g = gpu_or_skip(), *c = cpu(3);
    CHECK(g->ops->first_nonfinite != NULL);
    const int64_t sizes[] = {1, 255, 257, 100003, 3000001};
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
        const int64_t n = sizes[si];
        float *v = dt_xmalloc((size_t)n * sizeof(float));
        for (int64_t i = 0; i < n; i++) v[i] = i % 3 == 0 ? -0.0f : i % 3 == 1 ? 1e-45f : -3.4e38f;
        const int64_t at[][2] = {{-1, -1}, {n - 1, -1}, {n / 2, n - 1}, {0, n / 2}};
        for (int k = 0; k < 4; k++) {
            for (int j = 0; j < 2; j++)
                if (at[k][j] >= 0) v[at[k][j]] = j == 0 ? NAN : -INFINITY;
            float *d = dev_floats(g, v, n);
            const int64_t want = dt_backend_first_nonfinite(c, v, n);
            CHECK_INT_EQ(want, at[k][0] < 0                          ? -1
                               : at[k][0] < at[k][1] || at[k][1] < 0 ? at[k][0]
                                                                     : at[k][1]);
            CHECK_INT_EQ(dt_backend_first_nonfinite(g, d, n), want);
            /* the batched op (one wait): behind a finite tensor and an empty one */
            float *fin = dev_floats(g, v, 1);
            if (v[0] != v[0] || v[0] - v[0] != 0.0f) dt_backend_upload(g, fin, &(float){0.0f}, 4);
            const float *ps[3] = {fin, d, d};
            const int64_t ns[3] = {1, 0, n};
            int which = -1;
            int64_t index = -1;
            const bool found = dt_backend_first_nonfinite_many(g, ps, ns, 3, &which, &index);
            CHECK_INT_EQ(found, want >= 0);
            if (found) {
                CHECK_INT_EQ(which, 2);
                CHECK_INT_EQ(index, want);
            }
            dt_backend_free(g, fin);
            dt_backend_free(g, d);
        }
        free(v);
    }
    dt_backend_destroy(g);
    dt_backend_destroy(c);
}

/* A backend still being built (the CUDA one, op by op) leaves ops NULL: the public
 * wrapper answers DT_ERR_UNSUPPORTED and dt_backend_missing_op names the first, which
 * `detrain run` and `detrain bench` check before the first step (never a silent fallback).
 * Shown on a CPU backend with one op taken out. */
DT_TEST(missing_op_named)
{
    struct dt_backend *c = cpu(1);
    CHECK(dt_backend_missing_op(c) == NULL);
    struct dt_backend_ops partial = *c->ops;
    partial.dense_backward_weight = NULL;
    const struct dt_backend_ops *full = c->ops;
    c->ops = &partial;
    const char *missing = dt_backend_missing_op(c);
    CHECK(missing != NULL);
    if (missing) CHECK_STR_EQ(missing, dt_op_name(DT_OP_DENSE_BACKWARD_WEIGHT));
    struct dt_policy pol = level(DT_LEVEL_PORTABLE);
    float a[1] = {1.0f};
    CHECK_INT_EQ(dt_dense_backward_weight(c, a, a, a, 1, 1, 1, &pol), DT_ERR_UNSUPPORTED);
    c->ops = full;
    dt_backend_destroy(c);
}

/* The resident training set (issue 21, item 2): batches gathered on the device -- from
 * pixel bytes (converted by the kernel) and from float values -- are the CPU backend's
 * bits for every block size, labels too; after a step's synchronisation the next two
 * gathers (one per index buffer) wait for nothing (host waits counted by the backend). */
DT_TEST(resident_gather_parity)
{
    struct dt_backend *g = gpu_or_skip(), *c = cpu(1);
    const int64_t n = 1000, dim = 784, B = 300;
    uint8_t *pix = dt_xmalloc((size_t)(n * dim)), *lab = dt_xmalloc((size_t)n);
    float *val = dt_xmalloc((size_t)(n * dim) * sizeof(float));
    for (int64_t i = 0; i < n * dim; i++) {
        pix[i] = (uint8_t)((i * 2654435761u) >> 13);
        val[i] = (float)pix[i] / 255.0f;
    }
    for (int64_t i = 0; i < n; i++) lab[i] = (uint8_t)(i % 10);
    int64_t idx[300];
    for (int64_t b = 0; b < B; b++) idx[b] = (b * 7919 + 13) % n;
    const struct dt_resident_src both = {n, dim, pix, val, lab, dim},
                                 vals = {n, dim, NULL, val, lab, dim};
    struct dt_resident *cs = dt_backend_resident_create(c, &both);
    float *cx = dt_xmalloc((size_t)(B * dim) * sizeof(float));
    int32_t *cl = dt_xmalloc((size_t)B * sizeof(int32_t)), *gl = dt_xmalloc((size_t)B * 4);
    dt_backend_gather(c, cx, cl, cs, idx, B);
    const struct dt_resident_src *srcs[2] = {&both, &vals};
    const int blocks[] = {32, 256, 1024};
    for (int k = 0; k < 2; k++) {
        struct dt_resident *gs = dt_backend_resident_create(g, srcs[k]);
        CHECK(gs != NULL);
        float *gx = dt_backend_alloc(g, (size_t)(B * dim) * sizeof(float));
        int32_t *glab = dt_backend_alloc(g, (size_t)B * sizeof(int32_t));
        for (size_t bi = 0; bi < sizeof blocks / sizeof blocks[0]; bi++) {
#ifdef DETRAIN_HAVE_CUDA_TOOLKIT
            dt_cuda_set_block_size(g, blocks[bi]);
#endif
            poison(g, gx, B * dim);
            dt_backend_gather(g, gx, glab, gs, idx, B); /* the first may size its buffers */
            dt_backend_synchronize(g); /* as at a step's end: both index buffers are free */
            const int64_t w0 = dt_backend_host_waits(g);
            dt_backend_gather(g, gx, glab, gs, idx, B);
            dt_backend_gather(g, gx, glab, gs, idx, B);
            CHECK_INT_EQ(dt_backend_host_waits(g) - w0, 0);
            CHECK(same_bits(g, gx, cx, B * dim, k == 0 ? "gather (bytes)" : "gather (values)"));
            dt_backend_download(g, gl, glab, (size_t)B * sizeof(int32_t));
            CHECK(memcmp(gl, cl, (size_t)B * sizeof(int32_t)) == 0);
        }
        dt_backend_free(g, gx);
        dt_backend_free(g, glab);
        dt_backend_resident_free(g, gs);
    }
#ifdef DETRAIN_HAVE_CUDA_TOOLKIT
    dt_cuda_set_block_size(g, 0);
#endif
    dt_backend_resident_free(c, cs);
    free(pix), free(lab), free(val), free(cx), free(cl), free(gl);
    dt_backend_destroy(g);
    dt_backend_destroy(c);
}

/* Per-op profiling with device timers (issue 21, item 5): profiled ops queue an event
 * pair each and wait for nothing; reading the times waits once and gives every profiled
 * op a positive time, the others none; a reset forgets them. */
DT_TEST(profile_device_timers)
{
    struct dt_backend *g = gpu_or_skip();
    const struct dt_policy pol = level(DT_LEVEL_FAST);
    const int64_t n = 1 << 20;
    float *x = dt_backend_alloc(g, (size_t)n * sizeof(float));
    float *y = dt_backend_alloc(g, (size_t)n * sizeof(float));
    dt_backend_synchronize(g);
    dt_backend_profile_reset(g);
    dt_backend_profile_enable(g, true);
    const int64_t w0 = dt_backend_host_waits(g);
    for (int k = 0; k < 5; k++) {
        CHECK_INT_EQ(dt_relu_forward(g, y, x, n, &pol), DT_OK);
        CHECK_INT_EQ(dt_relu_backward(g, x, y, y, n, &pol), DT_OK);
    }
    CHECK_INT_EQ(dt_backend_host_waits(g) - w0, 0);
    double sec[DT_OP_COUNT];
    dt_backend_profile_read(g, sec);
    CHECK_INT_EQ(dt_backend_host_waits(g) - w0, 1);
    CHECK(sec[DT_OP_RELU_FORWARD] > 0.0 && sec[DT_OP_RELU_BACKWARD] > 0.0);
    CHECK(sec[DT_OP_DENSE_FORWARD] == 0.0);
    dt_backend_profile_reset(g);
    dt_backend_profile_read(g, sec);
    CHECK(sec[DT_OP_RELU_FORWARD] == 0.0);
    dt_backend_profile_enable(g, false);
    dt_backend_free(g, x);
    dt_backend_free(g, y);
    dt_backend_destroy(g);
}

/* Issue 52: a training step waits for the device once -- its end, which also reads the
 * deferred checks, the losses (one per shard at portable) and reduction: exact's maxima --
 * at fast, run_to_run and portable (4 shards); the losses read so are the CPU's bits at
 * portable and finite elsewhere, and the weights after 4 steps are the CPU's at portable.
 * The batches come as a run's do (harness/run/batches.c): gathered from a resident set on
 * the device, where a host batch's copy up would wait for itself. Step 0 is not counted:
 * the backend's scratch grows at first use, and a buffer that grows waits for the queued
 * work that may still read the old one (the H200 run, results/nvidia-h200: 3 to 7 waits
 * a step with host batches, step 0 included). A step that waits more names the call sites.
 * With DETRAIN_CUDA_ONE_PASS=0 (the first light's paths) the same step waits more (the
 * negative control: the counter counts). */
DT_TEST(one_wait_per_step)
{
    struct dt_backend *c = cpu(2);
    const enum dt_level levels[] = {DT_LEVEL_FAST, DT_LEVEL_RUN_TO_RUN, DT_LEVEL_PORTABLE};
    enum { B = 64, in = 20, classes = 7, steps = 4 };
    const int64_t hidden[] = {33};
    static float x[steps * B * in];
    static uint8_t y[steps * B];
    int64_t idx[B];
    fill(x, steps * B * in, 1.0);
    for (int i = 0; i < steps * B; i++) y[i] = (uint8_t)((i * 5 + i / B) % classes);
    const struct dt_resident_src src = {steps * B, in, NULL, x, y, in};
    const struct dt_sgd_options sgd = {.lr = 0.05f, .momentum = 0.9f};
    for (int one_pass = 1; one_pass >= 0; one_pass--) {
        if (!one_pass) setenv("DETRAIN_CUDA_ONE_PASS", "0", 1); /* read as the backend is made */
        struct dt_backend *g = gpu_or_skip();
        struct dt_resident *set = dt_backend_resident_create(g, &src);
        CHECK(set != NULL);
        for (int l = 0; l < 3; l++) {
            const struct dt_policy pol = level(levels[l]);
            struct dt_model *mg = NULL, *mc = NULL;
            struct dt_error err = {0};
            CHECK_INT_EQ(dt_mlp_create(&mg, g, in, hidden, 1, classes, B, &err), DT_OK);
            CHECK_INT_EQ(dt_mlp_create(&mc, c, in, hidden, 1, classes, B, &err), DT_OK);
            dt_model_init(mg, 11, 0);
            dt_model_init(mc, 11, 0);
            struct dt_step dg, dc;
            memset(&dg, 0, sizeof dg);
            memset(&dc, 0, sizeof dc);
            dt_backend_defer_checks(g, true);
            int64_t most = 0;
            for (int s = 0; s < steps; s++) {
                for (int b = 0; b < B; b++) idx[b] = (int64_t)s * B + b;
                const struct dt_batch bg = {.set = set, .idx = idx},
                                      bc = {.x = x + (size_t)s * B * in, .y = y + s * B};
                float lg = NAN, lc = NAN;
                const int64_t w0 = dt_backend_host_waits(g);
                CHECK_INT_EQ(dt_step_train(&dg, mg, NULL, &bg, B, 4, &sgd, &pol, &lg), DT_OK);
                const int64_t waits = dt_backend_host_waits(g) - w0;
                if (s > 0) most = waits > most ? waits : most;
                CHECK_INT_EQ(dt_step_train(&dc, mc, NULL, &bc, B, 4, &sgd, &pol, &lc), DT_OK);
                CHECK(isfinite(lg));
                if (levels[l] == DT_LEVEL_PORTABLE) CHECK(memcmp(&lg, &lc, sizeof lg) == 0);
                if (one_pass && s > 0 && waits != 1) {
                    char sites[2048] = "";
#ifdef DETRAIN_HAVE_CUDA_TOOLKIT
                    dt_cuda_wait_sites(g, w0, sites, sizeof sites);
#endif
                    fprintf(stderr, "level %d step %d: %lld waits: %s\n", l, s, (long long)waits,
                            sites);
                    CHECK_INT_EQ(waits, 1);
                }
            }
            if (!one_pass) CHECK(most > 1);
            dt_backend_defer_checks(g, false);
            if (levels[l] == DT_LEVEL_PORTABLE)
                for (int i = 0; i < mg->n_params; i++) {
                    const int64_t n = mg->params[i].n;
                    float *a = dt_xmalloc((size_t)n * 4);
                    dt_backend_download(g, a, mg->params[i].w, (size_t)n * 4);
                    CHECK(memcmp(a, mc->params[i].w, (size_t)n * 4) == 0);
                    free(a);
                }
            dt_step_free(&dg);
            dt_step_free(&dc);
            dt_model_destroy(mg);
            dt_model_destroy(mc);
        }
        dt_backend_resident_free(g, set);
        unsetenv("DETRAIN_CUDA_ONE_PASS");
        dt_backend_destroy(g);
    }
    dt_backend_destroy(c);
}

DT_TEST_MAIN(DT_CASE(create_or_clear_error), DT_CASE(elementwise_parity), DT_CASE(missing_op_named),
             DT_CASE(first_nonfinite_parity), DT_CASE(resident_gather_parity),
             DT_CASE(profile_device_timers), DT_CASE(one_wait_per_step))
