/* The step as one graph (nets/step.h, dt_step_use_graphs; issue 67, item 5).
 *
 * On the CPU the step logic is checked against a fake: the CPU backend's ops with graph
 * hooks that emulate a capture -- the CPU runs the ops as they are called, so the fake saves
 * the model's state as the capture begins and, when its capture "breaks", loads it back
 * (nothing ran, as on a device); it can break chosen captures, refuse to begin, or corrupt
 * the launched step (one bit of one weight) so that the self-check has something to find.
 * Every case compares the losses and the whole model state after every step with a run
 * without graphs: the trace must be the same whatever the graphs did.
 * On a GPU (label gpu) the real thing: the MLP, LeNet and the GPT (dropout, lfsr lane checks
 * that break the capture on their steps) with graphs and without, bit for bit. */
#include <math.h>
#include <string.h>

#include "check.h"
#include "core/util.h"
#include "nets/backend_impl.h"
#include "nets/model.h"
#include "nets/step.h"
#include "op_helpers.h"

enum { IN = 12, HID = 8, CLS = 4, B = 6, N = 30, STEPS = 8 };

/* ---- the fake ------------------------------------------------------------------------ */

enum fake_mode { HONEST, BREAK, PERTURB, PERTURB_BIG, REFUSE };
static struct {
    enum fake_mode mode;
    uint64_t break_mask; /* BREAK: capture k (1-based) breaks when bit k is set */
    int captures;
    struct dt_model *m;
    struct dt_model_state saved;
} fake;
static struct dt_backend_ops fake_ops;

static enum dt_status fake_begin(struct dt_backend *be, struct dt_error *err)
{
    (void)be;
    if (fake.mode == REFUSE) return dt_error_set(err, DT_ERR_UNSUPPORTED, "fake: refused");
    fake.captures++;
    dt_model_state_save(&fake.saved, fake.m);
    return DT_OK;
}

static enum dt_status fake_end(struct dt_backend *be, void **graph, bool launch,
                               struct dt_error *err)
{
    if (!*graph) *graph = dt_xcalloc(1, sizeof(int64_t));
    const bool broken = fake.mode == BREAK && (fake.break_mask >> fake.captures & 1);
    if (!launch || broken) { /* nothing of the capture ran */
        dt_model_state_load(&fake.saved, fake.m);
        return launch
                   ? dt_error_set(err, DT_ERR_UNSUPPORTED, "fake: capture %d broke", fake.captures)
                   : DT_OK;
    }
    ++*(int64_t *)*graph;
    if (fake.mode == PERTURB_BIG) { /* the launched step moved dense0.weight by 0.5 more */
        const int64_t n = fake.m->params[0].n;
        float *w = dt_xmalloc((size_t)n * sizeof *w);
        dt_backend_download(be, w, fake.m->params[0].w, (size_t)n * sizeof *w);
        for (int64_t k = 0; k < n; k++) w[k] += 0.5f;
        dt_backend_upload(be, fake.m->params[0].w, w, (size_t)n * sizeof *w);
        free(w);
    }
    if (fake.mode == PERTURB && fake.captures == 1) { /* the self-check's launched step is off
                                                         by one bit in dense0.weight */
        float w;
        dt_backend_download(be, &w, fake.m->params[0].w, sizeof w);
        uint32_t u;
        memcpy(&u, &w, sizeof u);
        u ^= 1u;
        memcpy(&w, &u, sizeof w);
        dt_backend_upload(be, fake.m->params[0].w, &w, sizeof w);
    }
    return DT_OK;
}

static void fake_describe(struct dt_backend *be, const void *graph, char *buf, size_t size)
{
    (void)be;
    snprintf(buf, size, "%lld launched (fake)", (long long)*(const int64_t *)graph);
}

static void fake_free(struct dt_backend *be, void *graph)
{
    (void)be;
    free(graph);
}

static struct dt_backend *fake_backend(enum fake_mode mode, uint64_t break_mask)
{
    struct dt_backend *be = NULL;
    struct dt_backend_options opt = {DT_BACKEND_CPU, 1, 0};
    DT_ASSERT(dt_backend_create(&be, &opt, NULL) == DT_OK);
    fake_ops = dt_backend_cpu_ops;
    fake_ops.graph_begin = fake_begin;
    fake_ops.graph_end = fake_end;
    fake_ops.graph_describe = fake_describe;
    fake_ops.graph_free = fake_free;
    be->ops = &fake_ops;
    dt_model_state_free(&fake.saved);
    memset(&fake, 0, sizeof fake);
    fake.mode = mode;
    fake.break_mask = break_mask;
    return be;
}

/* ---- one run ------------------------------------------------------------------------- */

struct run {
    float loss[STEPS];
    enum dt_status st[STEPS];
    struct dt_model_state state[STEPS]; /* after each step */
    char summary[800];
};

static void run_free(struct run *r)
{
    for (int s = 0; s < STEPS; s++) dt_model_state_free(&r->state[s]);
}

/* The examples: N rows of IN values, labels in [0, CLS). */
static void examples(float *x, uint8_t *y)
{
    uint64_t s = 2026;
    for (int i = 0; i < N * IN; i++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        x[i] = (float)(s >> 40) * 0x1p-24f - 0.5f;
    }
    for (int i = 0; i < N; i++) y[i] = (uint8_t)((i * 7 + 3) % CLS);
}

/* STEPS steps of model m on be (graphs or not), each a batch of B drawn from the resident
 * set (or host rows when `host`), AdamW with clipping, a warm-up and a cosine schedule: the
 * learning rate and the bias corrections change every step. */
static void train(struct run *r, struct dt_backend *be, struct dt_model *m, bool graphs,
                  const struct dt_policy *pol, bool host, const float *x, const uint8_t *y,
                  int64_t dim)
{
    memset(r, 0, sizeof *r);
    const struct dt_resident_src src = {N, dim, NULL, x, y, dim};
    struct dt_resident *set = host ? NULL : dt_backend_resident_create(be, &src);
    const struct dt_sgd_options opt = {.lr = 0.01f,
                                       .adamw = true,
                                       .beta1 = 0.9f,
                                       .beta2 = 0.999f,
                                       .eps = 1e-8f,
                                       .weight_decay = 0.01f,
                                       .clip_norm = 0.5f,
                                       .warmup = 2,
                                       .cosine = true,
                                       .total_steps = STEPS};
    dt_model_init(m, 17, 0);
    fake.m = m;
    dt_backend_defer_checks(be, true); /* as a training step (harness/run/train.c) */
    struct dt_step d;
    memset(&d, 0, sizeof d);
    dt_step_use_graphs(&d, graphs);
    float hx[B * 144];
    uint8_t hy[B];
    for (int s = 0; s < STEPS; s++) {
        int64_t idx[B];
        for (int b = 0; b < B; b++) idx[b] = (s * 11 + b * 5) % N;
        for (int b = 0; b < B && host; b++) {
            memcpy(hx + b * dim, x + idx[b] * dim, (size_t)dim * sizeof(float));
            hy[b] = y[idx[b]];
        }
        const struct dt_batch batch =
            host ? (struct dt_batch){.x = hx, .y = hy} : (struct dt_batch){.set = set, .idx = idx};
        r->st[s] = dt_step_train(&d, m, NULL, &batch, B, 2, &opt, pol, &r->loss[s]);
        dt_model_state_save(&r->state[s], m);
    }
    dt_step_graph_summary(&d, r->summary, sizeof r->summary);
    dt_step_free(&d);
    dt_backend_defer_checks(be, false);
    if (set) dt_backend_resident_free(be, set);
}

/* The whole trace of b is a's: every step's status, loss and state, bit for bit. */
static void same_trace(const struct run *a, const struct run *b, const struct dt_model *m,
                       const char *what)
{
    const int before = dt_check_failures_;
    for (int s = 0; s < STEPS; s++) {
        CHECK_INT_EQ(b->st[s], a->st[s]);
        CHECK(memcmp(&a->loss[s], &b->loss[s], sizeof(float)) == 0);
        CHECK_INT_EQ(b->state[s].step, a->state[s].step);
        for (int i = 0; i < m->n_params; i++) {
            const size_t bytes = (size_t)m->params[i].n * sizeof(float);
            CHECK(memcmp(a->state[s].w[i], b->state[s].w[i], bytes) == 0);
            CHECK(memcmp(a->state[s].v[i], b->state[s].v[i], bytes) == 0);
            CHECK(!a->state[s].s[i] == !b->state[s].s[i]);
            if (a->state[s].s[i] && b->state[s].s[i])
                CHECK(memcmp(a->state[s].s[i], b->state[s].s[i], bytes) == 0);
        }
        if (dt_check_failures_ != before) {
            fprintf(stderr, "  %s: the traces part at step %d (%s)\n", what, s + 1, b->summary);
            return;
        }
    }
}

/* The reference (no graphs) and a run with the fake in `mode`, on the MLP under pol. */
static void fake_pair(struct run *ref, struct run *got, enum fake_mode mode, uint64_t mask,
                      const struct dt_policy *pol, bool host)
{
    float x[N * IN];
    uint8_t y[N];
    examples(x, y);
    const int64_t hidden[1] = {HID};
    for (int k = 0; k < 2; k++) {
        struct dt_backend *be = fake_backend(k == 0 ? HONEST : mode, mask);
        struct dt_model *m = NULL;
        DT_ASSERT(dt_mlp_create(&m, be, IN, hidden, 1, CLS, B, NULL) == DT_OK);
        train(k == 0 ? ref : got, be, m, k == 1, pol, host, x, y, IN);
        if (k == 1) same_trace(ref, got, m, pol->name);
        dt_model_state_free(&fake.saved);
        dt_model_destroy(m);
        dt_backend_destroy(be);
    }
}

/* A capture that always holds: step 1 runs uncaptured (its first-use work), step 2 is the
 * self-check (captured, then run again uncaptured from the same state: equal), steps 3..8
 * are launched as graphs -- and the trace is the one without graphs, at every level (fast and
 * run_to_run take the plain path, portable the exact combination). */
DT_TEST(fake_same_trace)
{
    const enum dt_level levels[] = {DT_LEVEL_FAST, DT_LEVEL_RUN_TO_RUN, DT_LEVEL_PORTABLE};
    for (int l = 0; l < 3; l++) {
        const struct dt_policy pol = level(levels[l]);
        struct run ref, got;
        fake_pair(&ref, &got, HONEST, 0, &pol, false);
        CHECK_CONTAINS(got.summary, l == 0 ? "checked at step 2 (within its tolerance: no bits "
                                             "promised); 6 steps launched as one graph"
                                           : "checked at step 2 (bit for bit); 6 steps launched "
                                             "as one graph");
        CHECK_CONTAINS(got.summary, "0 ran uncaptured; captures: 7 launched (fake)");
        CHECK_INT_EQ(fake.captures, STEPS - 1);
        run_free(&ref);
        run_free(&got);
    }
}

/* A capture that breaks (a host wait, a grown buffer: nothing of it ran) is followed by the
 * step run uncaptured from the same host state: capture 3 (step 4) breaks alone and graphs
 * go on; captures 5 and 6 (steps 6, 7) break in a row and graphs are off from step 7. */
DT_TEST(fake_broken_capture_reruns)
{
    const struct dt_policy pol = level(DT_LEVEL_RUN_TO_RUN);
    struct run ref, got;
    fake_pair(&ref, &got, BREAK, (1u << 3) | (1u << 5) | (1u << 6), &pol, false);
    CHECK_CONTAINS(got.summary, "off from step 7: fake: capture 6 broke");
    CHECK_INT_EQ(fake.captures, 6); /* steps 2..7; step 8 uncaptured */
    run_free(&ref);
    run_free(&got);
    /* the rerun is what keeps the trace: without it, the broken steps would be missing (a
     * negative control of the comparison -- the two runs differ when a step is skipped) */
    fake_pair(&ref, &got, BREAK, 1u << 3, &pol, false);
    CHECK_CONTAINS(got.summary, "1 ran uncaptured (last: step 4: fake: capture 3 broke)");
    CHECK(memcmp(ref.state[3].w[0], ref.state[2].w[0], IN * HID * sizeof(float)) != 0);
    run_free(&ref);
    run_free(&got);
}

/* The self-check finds a launched step that is off by one bit: graphs off from step 2,
 * naming the tensor, and the trace is still the uncaptured one. */
DT_TEST(fake_self_check_catches)
{
    const struct dt_policy pol = level(DT_LEVEL_PORTABLE);
    struct run ref, got;
    fake_pair(&ref, &got, PERTURB, 0, &pol, false);
    CHECK_CONTAINS(got.summary, "off from step 2: the self-check's captured step differed from "
                                "the uncaptured one in dense0.weight (weights)");
    CHECK_INT_EQ(fake.captures, 1);
    run_free(&ref);
    run_free(&got);
}

/* Under fast, which gives other bits at every run graph or not, the check allows the
 * rounding-sized differences of float atomics (one flipped bit passes) but not a step that
 * moved the weights otherwise. */
DT_TEST(fake_fast_check_tolerance)
{
    const struct dt_policy pol = level(DT_LEVEL_FAST);
    struct run ref, got;
    fake_pair(&ref, &got, PERTURB, 0, &pol, false);
    CHECK_CONTAINS(got.summary, "checked at step 2 (within its tolerance");
    run_free(&ref);
    run_free(&got);
    fake_pair(&ref, &got, PERTURB_BIG, 0, &pol, false);
    CHECK_CONTAINS(got.summary, "off from step 2: the self-check's captured step differed from "
                                "the uncaptured one in the weights' change beyond 0.05");
    CHECK_CONTAINS(got.summary, "most in dense0.weight");
    run_free(&ref);
    run_free(&got);
}

/* A backend that cannot capture now runs every step uncaptured, saying why; a batch from
 * host rows turns graphs off at once (its upload would wait inside the step). */
DT_TEST(fake_refusals)
{
    const struct dt_policy pol = level(DT_LEVEL_FAST);
    struct run ref, got;
    fake_pair(&ref, &got, REFUSE, 0, &pol, false);
    CHECK_CONTAINS(got.summary, "not checked yet: step 8: fake: refused");
    run_free(&ref);
    run_free(&got);
    fake_pair(&ref, &got, HONEST, 0, &pol, true);
    CHECK_CONTAINS(got.summary, "off from step 1: the batch comes from host rows");
    CHECK_INT_EQ(fake.captures, 0);
    run_free(&ref);
    run_free(&got);
}

/* ---- on a GPU -------------------------------------------------------------------------- */

/* The real graphs: each model with graphs and without on the same device, bit for bit at
 * every step under run_to_run and portable (fast: every step done, the check passed within
 * its tolerance); the self-check passed and most steps launched as one graph. The GPT's lfsr
 * lane check (every 3rd step) reads back inside its step: those steps run uncaptured. */
DT_TEST(cuda_graphs_same_bits)
{
    struct dt_backend *probe = gpu_or_skip();
    dt_backend_destroy(probe);
    float x[N * 144];
    uint8_t y[N];
    uint64_t s = 99;
    for (int i = 0; i < N * 144; i++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        x[i] = (float)((s >> 33) % 256); /* bytes: pixels, or a text's windows */
    }
    for (int i = 0; i < N; i++) y[i] = (uint8_t)(i % CLS);
    const enum dt_level levels[] = {DT_LEVEL_FAST, DT_LEVEL_RUN_TO_RUN, DT_LEVEL_PORTABLE};
    for (int kind = 0; kind < 3; kind++)
        for (int l = 0; l < 3; l++) {
            const struct dt_policy pol = level(levels[l]);
            struct run r[2];
            for (int k = 0; k < 2; k++) {
                struct dt_backend *be = gpu_or_skip();
                struct dt_model *m = NULL;
                struct dt_error err;
                const int64_t hidden[1] = {HID};
                const struct dt_gpt_options go = {.context = 9,
                                                  .d_model = 16,
                                                  .heads = 2,
                                                  .layers = 2,
                                                  .tie_embeddings = true,
                                                  .dropout = 0.1,
                                                  .lfsr_check_every = 3};
                int64_t dim = 144; /* 12 x 12 images */
                if (kind == 0)
                    CHECK_INT_EQ(dt_mlp_create(&m, be, dim, hidden, 1, CLS, B, &err), DT_OK);
                else if (kind == 1)
                    CHECK_INT_EQ(dt_lenet_create(&m, be, 12, 12, false, CLS, B, &err), DT_OK);
                else {
                    CHECK_INT_EQ(dt_gpt_create(&m, be, &go, B, &err), DT_OK);
                    dim = 10;
                }
                if (!m) return;
                float xs[N * 144];
                for (int i = 0; i < N * dim; i++) xs[i] = kind == 0 ? x[i] / 255.0f : x[i];
                train(&r[k], be, m, k == 1, &pol, false, xs, y, dim);
                if (k == 1) { /* fast gives other bits at every run: its check is loose */
                    char what[128];
                    snprintf(what, sizeof what, "%s at %s", m->ops->kind, pol.name);
                    if (dt_policy_same_bits_every_run(&pol)) same_trace(&r[0], &r[1], m, what);
                    for (int t = 0; t < STEPS; t++) CHECK_INT_EQ(r[1].st[t], DT_OK);
                    CHECK_CONTAINS(r[1].summary, "checked at step 2");
                    fprintf(stderr, "%s: graphs %s\n", what, r[1].summary);
                }
                dt_model_destroy(m);
                dt_backend_destroy(be);
            }
            run_free(&r[0]);
            run_free(&r[1]);
        }
}

DT_TEST_MAIN(DT_CASE(fake_same_trace), DT_CASE(fake_broken_capture_reruns),
             DT_CASE(fake_self_check_catches), DT_CASE(fake_fast_check_tolerance),
             DT_CASE(fake_refusals), DT_CASE(cuda_graphs_same_bits))
