/* Networks described as layer lists (nets/net.c; model.kind: net): the MLP and LeNet written
 * as layer lists are the built-in kinds, bit for bit -- the same parameters (names, shapes,
 * initial values) and, step after step under every level, the same losses, weights and
 * optimiser state; shapes that do not fit are refused naming the layer. Batch normalisation
 * by canonical shard: the same bits at any thread count, its statistics grouped as promised
 * (a negative control), its running statistics moved and read by evaluation. */
#include <math.h>
#include <string.h>

#include "check.h"
#include "core/util.h"
#include "harness/setup/config.h"
#include "run_helper.h"
#include "nets/model.h"
#include "nets/step.h"
#include "op_helpers.h"

enum { B = 8, N = 40, STEPS = 4, SIDE = 28 };

/* N images of SIDE x SIDE in [0, 1), labels in [0, 10). */
static void images(float *x, uint8_t *y)
{
    uint64_t s = 68;
    for (int i = 0; i < N * SIDE * SIDE; i++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        x[i] = (float)(s >> 40) * 0x1p-24f;
    }
    for (int i = 0; i < N; i++) y[i] = (uint8_t)((i * 3 + 1) % 10);
}

/* a and b, made the same way, train STEPS steps alike: every loss and, after every step,
 * every parameter's weights, velocity or first moment and second moment, bit for bit. */
static void same_training(struct dt_model *a, struct dt_model *b, const struct dt_policy *pol,
                          bool adamw, const char *what)
{
    CHECK_INT_EQ(a->n_tensors, b->n_tensors);
    if (a->n_tensors != b->n_tensors) return;
    for (int i = 0; i < a->n_tensors; i++) {
        CHECK_STR_EQ(a->params[i].name, b->params[i].name);
        CHECK_INT_EQ(a->params[i].n, b->params[i].n);
    }
    float *x = dt_xmalloc((size_t)N * SIDE * SIDE * sizeof *x);
    uint8_t y[N];
    images(x, y);
    const struct dt_sgd_options opt =
        adamw ? (struct dt_sgd_options){.lr = 1e-3f,
                                        .adamw = true,
                                        .beta1 = 0.9f,
                                        .beta2 = 0.999f,
                                        .eps = 1e-8f,
                                        .weight_decay = 0.01f,
                                        .clip_norm = 1.0f}
              : (struct dt_sgd_options){.lr = 0.05f, .momentum = 0.9f, .weight_decay = 1e-4f};
    struct dt_model *m[2] = {a, b};
    struct dt_step d[2];
    struct dt_model_state st[2] = {{0}, {0}};
    memset(d, 0, sizeof d);
    for (int k = 0; k < 2; k++) {
        dt_model_init(m[k], 5, 0);
        dt_backend_defer_checks(m[k]->be, true);
    }
    const int before = dt_check_failures_;
    for (int s = 0; s < STEPS && dt_check_failures_ == before; s++) {
        float xb[B * SIDE * SIDE];
        uint8_t yb[B];
        for (int r = 0; r < B; r++) {
            const int e = (s * 7 + r * 3) % N;
            memcpy(xb + r * SIDE * SIDE, x + e * SIDE * SIDE, SIDE * SIDE * sizeof(float));
            yb[r] = y[e];
        }
        const struct dt_batch batch = {.x = xb, .y = yb};
        float loss[2];
        for (int k = 0; k < 2; k++) {
            CHECK_INT_EQ(dt_step_train(&d[k], m[k], NULL, &batch, B, 2, &opt, pol, &loss[k]),
                         DT_OK);
            dt_model_state_save(&st[k], m[k]);
        }
        CHECK(memcmp(&loss[0], &loss[1], sizeof(float)) == 0);
        for (int i = 0; i < a->n_tensors; i++) { /* buffers (running statistics) too */
            const size_t bytes = (size_t)a->params[i].n * sizeof(float);
            CHECK(memcmp(st[0].w[i], st[1].w[i], bytes) == 0);
            CHECK(memcmp(st[0].v[i], st[1].v[i], bytes) == 0);
            if (st[0].s[i] && st[1].s[i]) CHECK(memcmp(st[0].s[i], st[1].s[i], bytes) == 0);
        }
        if (dt_check_failures_ != before)
            fprintf(stderr, "  %s at %s: parts at step %d\n", what, pol->name, s + 1);
    }
    for (int k = 0; k < 2; k++) {
        dt_step_free(&d[k]);
        dt_model_state_free(&st[k]);
        dt_backend_defer_checks(m[k]->be, false);
    }
    free(x);
}

static const enum dt_level levels[] = {DT_LEVEL_FAST, DT_LEVEL_RUN_TO_RUN, DT_LEVEL_PORTABLE};
/* Threads for comparing two runs at a level: `fast` adds some partials in the order its
 * workers finish, which two runs need not share, so it is compared at one thread (where the
 * order is the one thread's); the others promise their bits at any fixed count. */
static int threads_at(enum dt_level l) { return l == DT_LEVEL_FAST ? 1 : 2; }

/* The MLP (784 -> 64 -> 32 -> 10) as flatten, dense, relu, dense, relu, dense. */
DT_TEST(mlp_as_layers)
{
    const int64_t hidden[2] = {64, 32};
    const struct dt_layer layers[] = {
        {.kind = DT_LAYER_FLATTEN}, {.kind = DT_LAYER_DENSE, .units = 64},
        {.kind = DT_LAYER_RELU},    {.kind = DT_LAYER_DENSE, .units = 32},
        {.kind = DT_LAYER_RELU},    {.kind = DT_LAYER_DENSE, .units = 10}};
    for (int l = 0; l < 3; l++) {
        const struct dt_policy pol = level(levels[l]);
        struct dt_backend *be = cpu(threads_at(levels[l]));
        struct dt_model *a = NULL, *b = NULL;
        CHECK_INT_EQ(dt_mlp_create(&a, be, SIDE * SIDE, hidden, 2, 10, B, NULL), DT_OK);
        CHECK_INT_EQ(dt_net_create(&b, be, SIDE, SIDE, 1, layers, 6, 10, B, NULL), DT_OK);
        if (a && b) same_training(a, b, &pol, l == 1, "mlp");
        dt_model_destroy(a);
        dt_model_destroy(b);
        dt_backend_destroy(be);
    }
}

/* LeNet (and with overlapping 3x3 pooling) as conv, relu, maxpool, conv, relu, maxpool,
 * flatten, dense, relu, dense, relu, dense. */
DT_TEST(lenet_as_layers)
{
    for (int overlap = 0; overlap < 2; overlap++) {
        const int64_t pk = overlap ? 3 : 2, pp = overlap ? 1 : 0;
        const struct dt_layer layers[] = {
            {.kind = DT_LAYER_CONV, .units = 6, .kernel = 5, .stride = 1, .pad = 2},
            {.kind = DT_LAYER_RELU},
            {.kind = DT_LAYER_MAXPOOL, .kernel = pk, .stride = 2, .pad = pp},
            {.kind = DT_LAYER_CONV, .units = 16, .kernel = 5, .stride = 1},
            {.kind = DT_LAYER_RELU},
            {.kind = DT_LAYER_MAXPOOL, .kernel = pk, .stride = 2, .pad = pp},
            {.kind = DT_LAYER_FLATTEN},
            {.kind = DT_LAYER_DENSE, .units = 120},
            {.kind = DT_LAYER_RELU},
            {.kind = DT_LAYER_DENSE, .units = 84},
            {.kind = DT_LAYER_RELU},
            {.kind = DT_LAYER_DENSE, .units = 10}};
        for (int l = 0; l < 3; l++) {
            if (overlap && l != 2) continue; /* overlapping windows: once, at portable */
            const struct dt_policy pol = level(levels[l]);
            struct dt_backend *be = cpu(threads_at(levels[l]));
            struct dt_model *a = NULL, *b = NULL;
            CHECK_INT_EQ(dt_lenet_create(&a, be, SIDE, SIDE, overlap, 10, B, NULL), DT_OK);
            CHECK_INT_EQ(dt_net_create(&b, be, SIDE, SIDE, 1, layers, 12, 10, B, NULL), DT_OK);
            if (a && b) same_training(a, b, &pol, l == 1, overlap ? "lenet (overlap)" : "lenet");
            dt_model_destroy(a);
            dt_model_destroy(b);
            dt_backend_destroy(be);
        }
    }
}

/* What does not fit is refused, naming the layer (its 1-based place in the list). */
DT_TEST(shape_errors)
{
    struct dt_backend *be = cpu(1);
    struct dt_model *m = NULL;
    struct dt_error err;
    const struct dt_layer no_flatten[] = {
        {.kind = DT_LAYER_CONV, .units = 4, .kernel = 3, .stride = 1},
        {.kind = DT_LAYER_DENSE, .units = 10}};
    CHECK_INT_EQ(dt_net_create(&m, be, SIDE, SIDE, 1, no_flatten, 2, 10, B, &err), DT_ERR_CONFIG);
    CHECK_CONTAINS(err.msg, "layer 2 (dense): its input is a 26x26x4 image; put a flatten "
                            "layer before it");
    const struct dt_layer big[] = {{.kind = DT_LAYER_MAXPOOL, .kernel = 2, .stride = 2},
                                   {.kind = DT_LAYER_CONV, .units = 4, .kernel = 15, .stride = 1},
                                   {.kind = DT_LAYER_FLATTEN},
                                   {.kind = DT_LAYER_DENSE, .units = 10}};
    CHECK_INT_EQ(dt_net_create(&m, be, SIDE, SIDE, 1, big, 4, 10, B, &err), DT_ERR_CONFIG);
    CHECK_CONTAINS(err.msg, "layer 2 (conv) on a 14x14x1 input: ");
    const struct dt_layer last[] = {
        {.kind = DT_LAYER_FLATTEN}, {.kind = DT_LAYER_DENSE, .units = 12}, {.kind = DT_LAYER_RELU}};
    CHECK_INT_EQ(dt_net_create(&m, be, SIDE, SIDE, 1, last, 3, 10, B, &err), DT_ERR_CONFIG);
    CHECK_CONTAINS(err.msg, "layer 3 (relu): the last layer must be a dense layer of 10 units");
    const struct dt_layer wrong[] = {{.kind = DT_LAYER_FLATTEN},
                                     {.kind = DT_LAYER_DENSE, .units = 9}};
    CHECK_INT_EQ(dt_net_create(&m, be, SIDE, SIDE, 1, wrong, 2, 10, B, &err), DT_ERR_CONFIG);
    CHECK_CONTAINS(err.msg, "layer 2 (dense): the last layer must be a dense layer of 10 units");
    CHECK(m == NULL);
    dt_backend_destroy(be);
}

/* The layers no built-in kind has (gelu, global_avgpool) train, and at portable the same
 * bits at 1 and 3 threads: conv, gelu, global average pooling, dense. */
DT_TEST(new_layers_thread_free)
{
    const struct dt_layer layers[] = {
        {.kind = DT_LAYER_CONV, .units = 6, .kernel = 3, .stride = 2, .pad = 1},
        {.kind = DT_LAYER_GELU},
        {.kind = DT_LAYER_CONV, .units = 8, .kernel = 3, .stride = 1, .pad = 1},
        {.kind = DT_LAYER_RELU},
        {.kind = DT_LAYER_GLOBAL_AVGPOOL},
        {.kind = DT_LAYER_DENSE, .units = 10}};
    const struct dt_policy pol = level(DT_LEVEL_PORTABLE);
    struct dt_backend *b1 = cpu(1), *b3 = cpu(3);
    struct dt_model *a = NULL, *b = NULL;
    CHECK_INT_EQ(dt_net_create(&a, b1, SIDE, SIDE, 1, layers, 6, 10, B, NULL), DT_OK);
    CHECK_INT_EQ(dt_net_create(&b, b3, SIDE, SIDE, 1, layers, 6, 10, B, NULL), DT_OK);
    if (a && b) {
        CHECK_INT_EQ(a->n_params, 6);
        CHECK_STR_EQ(a->params[4].name, "dense0.weight");
        CHECK_INT_EQ(a->params[4].n, 8 * 10);
        same_training(a, b, &pol, true, "conv-gelu-gap net, 1 and 3 threads");
    }
    dt_model_destroy(a);
    dt_model_destroy(b);
    dt_backend_destroy(b1);
    dt_backend_destroy(b3);
}

/* The loss of m on one fixed batch, and its gradients (in m's params' g). */
static float loss_and_grads(struct dt_model *m, const struct dt_batch *b,
                            const struct dt_policy *pol)
{
    float loss = NAN;
    m->step = 0; /* always step 1: the same dropout masks */
    dt_model_begin_step(m);
    CHECK_INT_EQ(dt_model_gradients(m, b, B, B, pol, &loss), DT_OK);
    CHECK_INT_EQ(dt_model_step_end(m, DT_OK), DT_OK);
    dt_model_finish_loss(m, 1, &loss);
    return loss;
}

/* Residual blocks against central differences of the loss: an identity block, a projection
 * block that halves the image (its branch with a layer normalisation over the channels), one
 * nested in another (with a batch normalisation, as is the stem: each over two shards of the
 * batch, its statistics' gradient terms included), after a dropout (its masks fixed: every
 * evaluation is step 1, rng lfsr, the lanes checked after every backward); every parameter tensor's
 * largest gradients (the stem's flows through every shortcut) -- a missing or doubled shortcut
 * gradient is off by its whole size. In float, h = 1e-2: agreement to a few parts in 1e3 of the
 * tensor's largest gradient. */
DT_TEST(residual_gradcheck)
{
    enum { S = 8 };
    const struct dt_layer layers[] = {
        {.kind = DT_LAYER_CONV, .units = 4, .kernel = 3, .stride = 1, .pad = 1},
        {.kind = DT_LAYER_BATCHNORM},
        {.kind = DT_LAYER_GELU},
        {.kind = DT_LAYER_DROPOUT, .rate = 0.25},
        {.kind = DT_LAYER_RESIDUAL, .block = 6},
        {.kind = DT_LAYER_CONV, .units = 4, .kernel = 3, .stride = 1, .pad = 1},
        {.kind = DT_LAYER_GELU},
        {.kind = DT_LAYER_RESIDUAL, .block = 2}, /* nested: ends with its parent */
        {.kind = DT_LAYER_GELU},
        {.kind = DT_LAYER_CONV, .units = 4, .kernel = 1, .stride = 1},
        {.kind = DT_LAYER_BATCHNORM},
        {.kind = DT_LAYER_RESIDUAL, .block = 2, .projection = true},
        {.kind = DT_LAYER_CONV, .units = 6, .kernel = 3, .stride = 2, .pad = 1},
        {.kind = DT_LAYER_LAYERNORM},
        {.kind = DT_LAYER_GELU},
        {.kind = DT_LAYER_AVGPOOL, .kernel = 3, .stride = 1, .pad = 1}, /* overlapping */
        {.kind = DT_LAYER_GLOBAL_AVGPOOL},
        {.kind = DT_LAYER_DENSE, .units = 10}};
    enum { NL = sizeof layers / sizeof layers[0] };
    struct dt_backend *be = cpu(1);
    struct dt_model *m = NULL;
    struct dt_error err;
    CHECK_INT_EQ(dt_net_create(&m, be, S, S, 1, layers, NL, 10, B, &err), DT_OK);
    if (!m) {
        fprintf(stderr, "%s\n", err.msg);
        dt_backend_destroy(be);
        return;
    }
    CHECK_INT_EQ(m->n_params, 18);
    CHECK_INT_EQ(m->n_tensors, 22);
    CHECK_STR_EQ(m->params[12].name, "layernorm0.weight");
    CHECK_STR_EQ(m->params[14].name, "proj0.weight"); /* after its branch */
    CHECK_STR_EQ(m->params[20].name, "batchnorm1.running_mean");
    dt_model_init(m, 9, 0);
    dt_model_set_shards(m, B, 2, 0, 2); /* batch normalisation over two shards of 4 */
    float x[B * S * S];
    uint8_t y[B];
    for (int i = 0; i < B * S * S; i++) x[i] = (float)((i * 37) % 101) / 101.0f - 0.3f;
    for (int b = 0; b < B; b++) y[b] = (uint8_t)(b % 10);
    const struct dt_batch batch = {.x = x, .y = y};
    const struct dt_policy pol = level(DT_LEVEL_PORTABLE);
    loss_and_grads(m, &batch, &pol);
    for (int i = 0; i < m->n_params; i++) {
        struct dt_param *p = &m->params[i];
        float *w = dt_xmalloc((size_t)p->n * sizeof *w), *g = dt_xmalloc((size_t)p->n * sizeof *g);
        memcpy(w, p->w, (size_t)p->n * sizeof *w); /* CPU: host memory */
        memcpy(g, p->g, (size_t)p->n * sizeof *g);
        float gmax = 0;
        int64_t top[3] = {0, 0, 0}; /* its three largest gradients */
        for (int64_t k = 0; k < p->n; k++) {
            if (fabsf(g[k]) > gmax) gmax = fabsf(g[k]);
            if (fabsf(g[k]) > fabsf(g[top[2]])) {
                top[2] = k;
                for (int t = 2; t > 0 && fabsf(g[top[t]]) > fabsf(g[top[t - 1]]); t--) {
                    const int64_t tmp = top[t];
                    top[t] = top[t - 1], top[t - 1] = tmp;
                }
            }
        }
        for (int t = 0; t < 3 && t < p->n; t++) {
            const int64_t k = top[t];
            const float h = 1e-2f;
            p->w[k] = w[k] + h;
            const double lp = loss_and_grads(m, &batch, &pol);
            p->w[k] = w[k] - h;
            const double lm = loss_and_grads(m, &batch, &pol);
            p->w[k] = w[k];
            const double fd = (lp - lm) / (2.0 * h);
            if (!(fabs(fd - g[k]) <= 5e-3 * gmax + 1e-5)) {
                fprintf(stderr, "  %s[%lld]: gradient %.6g, central difference %.6g\n", p->name,
                        (long long)k, (double)g[k], fd);
                CHECK(0);
            }
        }
        loss_and_grads(m, &batch, &pol); /* g back for the next tensor */
        free(w);
        free(g);
    }
    dt_model_destroy(m);
    dt_backend_destroy(be);
}

/* Dropout under each rng (lfsr, stored, philox) at portable: the same bits at 1 and 3
 * threads (a lane per example, a mask per site and step), the lfsr lanes back at their seeds
 * after every backward (the step would fail); negative control: the masks matter -- the same
 * network without dropout takes another first step. */
DT_TEST(dropout_thread_free)
{
    const struct dt_layer layers[] = {{.kind = DT_LAYER_FLATTEN},
                                      {.kind = DT_LAYER_DROPOUT, .rate = 0.2},
                                      {.kind = DT_LAYER_DENSE, .units = 32},
                                      {.kind = DT_LAYER_RELU},
                                      {.kind = DT_LAYER_DROPOUT, .rate = 0.5},
                                      {.kind = DT_LAYER_DENSE, .units = 10}};
    const char *rngs[] = {"lfsr", "stored", "philox"};
    for (int r = 0; r < 3; r++) {
        struct dt_policy pol = level(DT_LEVEL_PORTABLE);
        struct dt_error err;
        CHECK_INT_EQ(dt_policy_set_control(&pol, "rng", rngs[r], &err), DT_OK);
        DT_ASSERT(dt_policy_auto_name(&pol));
        struct dt_backend *b1 = cpu(1), *b3 = cpu(3);
        struct dt_model *a = NULL, *b = NULL;
        CHECK_INT_EQ(dt_net_create(&a, b1, SIDE, SIDE, 1, layers, 6, 10, B, NULL), DT_OK);
        CHECK_INT_EQ(dt_net_create(&b, b3, SIDE, SIDE, 1, layers, 6, 10, B, NULL), DT_OK);
        if (a && b) same_training(a, b, &pol, false, "dropout net, 1 and 3 threads");
        dt_model_destroy(a);
        dt_model_destroy(b);
        dt_backend_destroy(b1);
        dt_backend_destroy(b3);
    }
    /* the negative control: rate 0 (every element kept) against the rates above */
    struct dt_layer none[6];
    memcpy(none, layers, sizeof none);
    none[1].rate = none[4].rate = 0.0;
    struct dt_backend *be = cpu(1);
    struct dt_model *a = NULL, *b = NULL;
    CHECK_INT_EQ(dt_net_create(&a, be, SIDE, SIDE, 1, layers, 6, 10, B, NULL), DT_OK);
    CHECK_INT_EQ(dt_net_create(&b, be, SIDE, SIDE, 1, none, 6, 10, B, NULL), DT_OK);
    static float x[B * SIDE * SIDE];
    uint8_t y[B];
    for (int i = 0; i < B * SIDE * SIDE; i++) x[i] = (float)(i % 17) / 17.0f;
    for (int i = 0; i < B; i++) y[i] = (uint8_t)(i % 10);
    const struct dt_batch batch = {.x = x, .y = y};
    const struct dt_policy pol = level(DT_LEVEL_PORTABLE);
    dt_model_init(a, 3, 0);
    dt_model_init(b, 3, 0);
    const float la = loss_and_grads(a, &batch, &pol), lb = loss_and_grads(b, &batch, &pol);
    CHECK(la != lb);
    dt_model_destroy(a);
    dt_model_destroy(b);
    dt_backend_destroy(be);
}

/* A small residual network with batch normalisation, on B images. */
static const struct dt_layer bn_layers[] = {
    {.kind = DT_LAYER_CONV, .units = 4, .kernel = 3, .stride = 2, .pad = 1},
    {.kind = DT_LAYER_BATCHNORM},
    {.kind = DT_LAYER_RELU},
    {.kind = DT_LAYER_RESIDUAL, .block = 2},
    {.kind = DT_LAYER_CONV, .units = 4, .kernel = 3, .stride = 1, .pad = 1},
    {.kind = DT_LAYER_BATCHNORM},
    {.kind = DT_LAYER_RELU},
    {.kind = DT_LAYER_GLOBAL_AVGPOOL},
    {.kind = DT_LAYER_DENSE, .units = 10}};
enum { BN_NL = sizeof bn_layers / sizeof bn_layers[0] };

/* The trained weights after one step of a fresh model of the n layers on `shards` shards
 * under pol, into w (host). */
static void one_step(float *w, const struct dt_layer *layers, int n, int64_t shards,
                     const struct dt_policy *pol)
{
    struct dt_backend *be = cpu(1);
    struct dt_model *m = NULL;
    CHECK_INT_EQ(dt_net_create(&m, be, SIDE, SIDE, 1, layers, n, 10, B, NULL), DT_OK);
    static float x[B * SIDE * SIDE];
    uint8_t y[B];
    for (int i = 0; i < B * SIDE * SIDE; i++) x[i] = (float)((i * 13) % 29) / 29.0f;
    for (int i = 0; i < B; i++) y[i] = (uint8_t)(i % 10);
    const struct dt_batch batch = {.x = x, .y = y};
    const struct dt_sgd_options opt = {.lr = 0.1f, .momentum = 0.9f};
    struct dt_step d = {0};
    float loss;
    dt_model_init(m, 4, 0);
    CHECK_INT_EQ(dt_step_train(&d, m, NULL, &batch, B, shards, &opt, pol, &loss), DT_OK);
    for (int i = 0; i < m->n_params; i++, w += m->params[i - 1].n)
        memcpy(w, m->params[i].w, (size_t)m->params[i].n * sizeof *w); /* CPU: host memory */
    dt_step_free(&d);
    dt_model_destroy(m);
    dt_backend_destroy(be);
}

/* Batch normalisation by canonical shard: at portable the same bits at 1 and 3 threads
 * (weights, moments, running statistics; dt_step_train on 2 shards), the running statistics
 * moved from their start and read by evaluation. Negative control: the statistics are the
 * shards' -- under reduction: fixed in one process nothing else sees the shards (the same
 * network without batch normalisation takes the same step on 1 and 4 shards), yet with it the
 * step on 4 shards is another. */
DT_TEST(batchnorm_shards)
{
    const struct dt_policy pol = level(DT_LEVEL_PORTABLE);
    struct dt_backend *b1 = cpu(1), *b3 = cpu(3);
    struct dt_model *a = NULL, *b = NULL;
    CHECK_INT_EQ(dt_net_create(&a, b1, SIDE, SIDE, 1, bn_layers, BN_NL, 10, B, NULL), DT_OK);
    CHECK_INT_EQ(dt_net_create(&b, b3, SIDE, SIDE, 1, bn_layers, BN_NL, 10, B, NULL), DT_OK);
    if (a && b) {
        CHECK_INT_EQ(a->n_params, 10);
        CHECK_INT_EQ(a->n_tensors, 14);
        CHECK_STR_EQ(a->params[10].name, "batchnorm0.running_mean");
        CHECK_STR_EQ(a->params[13].name, "batchnorm1.running_var");
        same_training(a, b, &pol, false, "batchnorm net, 1 and 3 threads");
        const struct dt_param *rm = &a->params[10], *rv = &a->params[11];
        bool moved = false;
        for (int64_t c = 0; c < rm->n; c++) moved |= rm->w[c] != 0.0f && rv->w[c] != 1.0f;
        CHECK(moved);
        static float x[N * SIDE * SIDE];
        uint8_t y[N];
        images(x, y);
        double l0, l1, acc;
        CHECK_INT_EQ(dt_model_evaluate(a, x, y, N, &pol, &l0, &acc), DT_OK);
        rv->w[0] *= 4.0f; /* evaluation normalises by the running statistics */
        CHECK_INT_EQ(dt_model_evaluate(a, x, y, N, &pol, &l1, &acc), DT_OK);
        CHECK(l0 != l1);
    }
    dt_model_destroy(a);
    dt_model_destroy(b);
    dt_backend_destroy(b1);
    dt_backend_destroy(b3);

    struct dt_policy fixed = pol;
    fixed.reduction = DT_REDUCTION_FIXED;
    DT_ASSERT(dt_policy_auto_name(&fixed));
    struct dt_layer plain[BN_NL];
    int np = 0;
    for (int i = 0; i < BN_NL; i++) /* without its batchnorm layers: the block one shorter */
        if (bn_layers[i].kind != DT_LAYER_BATCHNORM) {
            plain[np] = bn_layers[i];
            if (plain[np].kind == DT_LAYER_RESIDUAL) plain[np].block = 1;
            np++;
        }
    enum { MAXW = 4096 };
    static float w1[MAXW], w4[MAXW];
    one_step(w1, plain, np, 1, &fixed);
    one_step(w4, plain, np, 4, &fixed);
    CHECK(memcmp(w1, w4, sizeof w1) == 0);
    one_step(w1, bn_layers, BN_NL, 1, &fixed);
    one_step(w4, bn_layers, BN_NL, 4, &fixed);
    CHECK(memcmp(w1, w4, sizeof w1) != 0);
}

/* On a GPU: a network of every layer kind (conv, gelu, dropout, residual blocks with
 * identity and projection shortcuts, batchnorm, layernorm, relu, max and average pooling,
 * global average pooling, dense) at portable gives the CPU's bits, step after step (the
 * running statistics included) -- and the CUDA kernels of the new ops (average and global
 * average pooling, batch normalisation) run there for the first time. */
DT_TEST(cuda_equals_cpu)
{
    struct dt_backend *g = gpu_or_skip();
    const struct dt_layer layers[] = {
        {.kind = DT_LAYER_CONV, .units = 8, .kernel = 3, .stride = 1, .pad = 1},
        {.kind = DT_LAYER_GELU},
        {.kind = DT_LAYER_DROPOUT, .rate = 0.1},
        {.kind = DT_LAYER_RESIDUAL, .block = 4},
        {.kind = DT_LAYER_CONV, .units = 8, .kernel = 3, .stride = 1, .pad = 1},
        {.kind = DT_LAYER_BATCHNORM},
        {.kind = DT_LAYER_RELU},
        {.kind = DT_LAYER_CONV, .units = 8, .kernel = 3, .stride = 1, .pad = 1},
        {.kind = DT_LAYER_MAXPOOL, .kernel = 2, .stride = 2},
        {.kind = DT_LAYER_AVGPOOL, .kernel = 3, .stride = 1, .pad = 1},
        {.kind = DT_LAYER_RESIDUAL, .block = 2, .projection = true},
        {.kind = DT_LAYER_CONV, .units = 16, .kernel = 3, .stride = 2, .pad = 1},
        {.kind = DT_LAYER_LAYERNORM},
        {.kind = DT_LAYER_RELU},
        {.kind = DT_LAYER_GLOBAL_AVGPOOL},
        {.kind = DT_LAYER_DENSE, .units = 10}};
    enum { NL = sizeof layers / sizeof layers[0] };
    const struct dt_policy pol = level(DT_LEVEL_PORTABLE);
    struct dt_backend *c = cpu(2);
    struct dt_model *a = NULL, *b = NULL;
    CHECK_INT_EQ(dt_net_create(&a, c, SIDE, SIDE, 1, layers, NL, 10, B, NULL), DT_OK);
    CHECK_INT_EQ(dt_net_create(&b, g, SIDE, SIDE, 1, layers, NL, 10, B, NULL), DT_OK);
    if (a && b) same_training(a, b, &pol, true, "every layer kind, CPU and CUDA");
    dt_model_destroy(a);
    dt_model_destroy(b);
    dt_backend_destroy(c);
    dt_backend_destroy(g);
}

/* Residual shapes that do not fit, named: an identity shortcut across a change of shape, a
 * branch ending in place, a branch longer than the list. */
DT_TEST(residual_errors)
{
    struct dt_backend *be = cpu(1);
    struct dt_model *m = NULL;
    struct dt_error err;
    const struct dt_layer reshape[] = {
        {.kind = DT_LAYER_RESIDUAL, .block = 1},
        {.kind = DT_LAYER_CONV, .units = 4, .kernel = 3, .stride = 2, .pad = 1},
        {.kind = DT_LAYER_FLATTEN},
        {.kind = DT_LAYER_DENSE, .units = 10}};
    CHECK_INT_EQ(dt_net_create(&m, be, SIDE, SIDE, 1, reshape, 4, 10, B, &err), DT_ERR_CONFIG);
    CHECK_CONTAINS(err.msg, "layer 1 (residual): its branch turns 28x28x1 into 14x14x4; an "
                            "identity shortcut needs the same shape (shortcut: projection)");
    const struct dt_layer in_place[] = {
        {.kind = DT_LAYER_CONV, .units = 4, .kernel = 3, .stride = 1, .pad = 1},
        {.kind = DT_LAYER_RESIDUAL, .block = 2},
        {.kind = DT_LAYER_CONV, .units = 4, .kernel = 3, .stride = 1, .pad = 1},
        {.kind = DT_LAYER_RELU},
        {.kind = DT_LAYER_FLATTEN},
        {.kind = DT_LAYER_DENSE, .units = 10}};
    CHECK_INT_EQ(dt_net_create(&m, be, SIDE, SIDE, 1, in_place, 6, 10, B, &err), DT_ERR_CONFIG);
    CHECK_CONTAINS(err.msg, "layer 2 (residual): its branch ends with relu, which works in place");
    const struct dt_layer too_long[] = {{.kind = DT_LAYER_FLATTEN},
                                        {.kind = DT_LAYER_RESIDUAL, .block = 3},
                                        {.kind = DT_LAYER_DENSE, .units = 10}};
    CHECK_INT_EQ(dt_net_create(&m, be, SIDE, SIDE, 1, too_long, 3, 10, B, &err), DT_ERR_CONFIG);
    CHECK_CONTAINS(err.msg, "layer 2 (residual): a branch of 3 layers does not fit in the list");
    CHECK(m == NULL);
    dt_backend_destroy(be);
}

/* model.network in YAML: configs/net-resnet-tiny.yaml's nested blocks flattened (a block
 * and then its branch), written to JSON and read back the same; errors name the item, a
 * branch's items included. */
DT_TEST(config_layers)
{
    struct dt_experiment e, back;
    struct dt_error err;
    CHECK_INT_EQ(dt_config_load(&e, DT_SOURCE_DIR "/configs/net-resnet-tiny.yaml", NULL, 0, &err),
                 DT_OK);
    CHECK_INT_EQ(e.model.n_network, 14);
    CHECK_INT_EQ(e.model.network[2].kind, DT_LAYER_RESIDUAL);
    CHECK_INT_EQ(e.model.network[2].block, 3);
    CHECK(!e.model.network[2].projection);
    CHECK_INT_EQ(e.model.network[7].kind, DT_LAYER_RESIDUAL);
    CHECK(e.model.network[7].projection);
    CHECK_INT_EQ(e.model.network[8].stride, 2);
    char *json = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&json, &len);
    dt_config_write_json(f, &e);
    fclose(f);
    CHECK_INT_EQ(dt_config_load_text(&back, "config.json", json, len, -1, NULL, 0, &err), DT_OK);
    CHECK_INT_EQ(back.model.n_network, e.model.n_network);
    for (int i = 0; i < e.model.n_network && i < back.model.n_network; i++) {
        const struct dt_layer *a = &e.model.network[i], *b = &back.model.network[i];
        CHECK(a->kind == b->kind && a->units == b->units && a->kernel == b->kernel &&
              a->stride == b->stride && a->pad == b->pad && a->block == b->block &&
              a->projection == b->projection);
    }
    free(json);
    const struct {
        const char *set, *want;
    } bad[] = {
        {"model.network=[{residual: relu}, {dense: 10}]",
         "key 'model.network', item 1: 'residual': expected a list of its layers"},
        {"model.network=[{residual: [{conv: 1, kernel: 3, pad: 1}], shortcut: diagonal}, flatten, "
         "{dense: 10}]",
         "key 'model.network', item 1: 'shortcut': unknown value 'diagonal' (expected identity or "
         "projection)"},
        {"model.network=[flatten, {residual: [{dense: 784}, relu, {dnese: 3}]}, {dense: 10}]",
         "key 'model.network', item 2, branch item 3: unknown layer 'dnese'"},
        {"model.network=[{avgpool: 2, kernel: 3}, flatten, {dense: 10}]",
         "key 'model.network', item 1: 'avgpool' takes its window as its value, not as 'kernel' "
         "({avgpool: K, stride: S, pad: P})"},
        {"model.network=[residual, {dense: 10}]",
         "key 'model.network', item 1: a residual layer needs its branch: {residual: [LAYERS], "
         "shortcut: identity|projection}"},
        {"model.network=[{residual: [{conv: 4, kernel: 3, stride: 2, pad: 1}]}, flatten, "
         "{dense: 10}]",
         "key 'model.network' (on 28x28x1 images): item 1 (residual): its branch turns 28x28x1 "
         "into 14x14x4"},
        {"model.network=[{residual: [{conv: 1, kernel: 3, pad: 1}, {dense: 5}]}, flatten, "
         "{dense: 10}]",
         "key 'model.network' (on 28x28x1 images): item 1, branch item 2 (dense): its input is a "
         "28x28x1 image; put a flatten layer before it"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *sets[] = {bad[i].set};
        CHECK_INT_EQ(
            dt_config_load(&e, DT_SOURCE_DIR "/configs/net-resnet-tiny.yaml", sets, 1, &err),
            DT_ERR_CONFIG);
        CHECK_CONTAINS(err.msg, bad[i].want);
        CHECK(strncmp(err.msg, "--set:1:", 8) == 0);
    }
}

/* Through `detrain run`: configs/lenet.yaml and configs/net-lenet.yaml (the same network as
 * a layer list) write the same per-tensor digests at every step, at run_to_run and portable
 * (fast promises no bits from one run to the next, so two of its runs are not compared). */
DT_TEST(configs_same_digests)
{
    static char out[16384];
    const char *tmp = DT_TEST_TMP_DIR "/net.configs";
    const int steps = DT_SANITIZED ? 2 : 6;
    const int rc = dt_run_capture(
        out, sizeof out,
        "rm -rf '%s' && for c in lenet net-lenet; do '%s' run '%s/configs/'$c.yaml --out '%s/'$c "
        "--quiet --set train.steps=%d --set replicas=1 --set dataset.test_limit=500 "
        "--set 'policies=[run_to_run, portable]' --set report.overhead_samples=0 || exit 1; done",
        tmp, DT_DETRAIN_EXE, DT_SOURCE_DIR, tmp, steps);
    CHECK_INT_EQ(rc, 0);
    if (rc != 0) fprintf(stderr, "%s\n", out);
    const char *pols[] = {"run_to_run", "portable"};
    for (int p = 0; p < 2; p++) {
        char a[1024], b[1024];
        snprintf(a, sizeof a, "%s/lenet/%s/replica-0/tensors.csv", tmp, pols[p]);
        snprintf(b, sizeof b, "%s/net-lenet/%s/replica-0/tensors.csv", tmp, pols[p]);
        CHECK(dt_files_equal(a, b));
    }
}

DT_TEST_MAIN(DT_CASE(mlp_as_layers), DT_CASE(lenet_as_layers), DT_CASE(shape_errors),
             DT_CASE(new_layers_thread_free), DT_CASE(residual_gradcheck), DT_CASE(residual_errors),
             DT_CASE(config_layers), DT_CASE(dropout_thread_free), DT_CASE(cuda_equals_cpu),
             DT_CASE(batchnorm_shards), DT_CASE(configs_same_digests))
