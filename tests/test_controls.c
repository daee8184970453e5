/* Determinism controls on the CPU backend, trained in-process on synthetic data (the MLP,
 * then LeNet):
 * portable digests independent of the thread count and reruns; run_to_run identical over
 * reruns; and the negative controls: two forced combination orders give different bits
 * under `reduction: unordered` and `atomics: float`, the same bits under `fixed` /
 * `fixed_point`. The forced order (dt_backend_set_forced_order) replaces timing luck. */
#include <stdint.h>

#include "harness/record/hash.h"
#include "nets/backend.h"
#include "nets/model.h"
#include "nets/step.h"
#include "tests/check.h"

enum { IN = 50, HID = 40, CLS = 10, B = 100, STEPS = 6 }; /* B = 3 chunks of 32 + 4 */

static float xs[STEPS][B * IN];
static uint8_t ys[STEPS][B];

static void make_data(void)
{
    uint64_t s = 0x9e3779b97f4a7c15ULL;
    for (int t = 0; t < STEPS; t++)
        for (int i = 0; i < B * IN; i++) {
            s = s * 6364136223846793005ULL + 1442695040888963407ULL;
            xs[t][i] = (float)(s >> 40) * 0x1p-24f;
            if (i < B) ys[t][i] = (uint8_t)((s >> 33) % CLS);
        }
}

/* Train STEPS steps; digests[s] = model digest after s updates (s = 0..STEPS). */
static void train(uint8_t digests[STEPS + 1][DT_DIGEST_BYTES], const struct dt_policy *pol,
                  int threads, uint64_t forced)
{
    struct dt_backend *be = NULL;
    struct dt_backend_options opt = {DT_BACKEND_CPU, threads, 0};
    DT_ASSERT(dt_backend_create(&be, &opt, NULL) == DT_OK);
    DT_ASSERT(dt_backend_set_forced_order(be, forced) == DT_OK);
    struct dt_model *m = NULL;
    int64_t hidden[1] = {HID};
    DT_ASSERT(dt_mlp_create(&m, be, IN, hidden, 1, CLS, B, NULL) == DT_OK);
    dt_model_init(m, 11, 0);
    const struct dt_sgd_options sgd = {.lr = 0.1f, .momentum = 0.9f, .weight_decay = 1e-4f};
    uint8_t td[8][DT_DIGEST_BYTES];
    const char *names[8];
    for (int s = 0; s <= STEPS; s++) {
        if (s > 0) {
            float loss;
            DT_ASSERT(dt_model_train_step(m, xs[s - 1], ys[s - 1], B, &sgd, pol, &loss) == DT_OK);
        }
        for (int i = 0; i < m->n_params; i++) {
            dt_sha256_f32(td[i], m->params[i].w, m->params[i].n);
            names[i] = m->params[i].name;
        }
        dt_model_digest(digests[s], names, (const uint8_t(*)[DT_DIGEST_BYTES])td, m->n_params);
    }
    dt_model_destroy(m);
    dt_backend_destroy(be);
}

static int first_difference(uint8_t a[STEPS + 1][DT_DIGEST_BYTES],
                            uint8_t b[STEPS + 1][DT_DIGEST_BYTES])
{
    for (int s = 0; s <= STEPS; s++)
        if (memcmp(a[s], b[s], DT_DIGEST_BYTES) != 0) return s;
    return -1;
}

static struct dt_policy level(enum dt_level l)
{
    struct dt_policy p;
    dt_policy_from_level(&p, l);
    return p;
}

DT_TEST(portable_thread_count_independent)
{
    make_data();
    struct dt_policy pol = level(DT_LEVEL_PORTABLE);
    static uint8_t ref[STEPS + 1][DT_DIGEST_BYTES], got[STEPS + 1][DT_DIGEST_BYTES];
    train(ref, &pol, 1, 0);
    const int counts[] = {1, 2, 3, 4, 8};
    for (int i = 0; i < 5; i++) {
        train(got, &pol, counts[i], 0);
        int d = first_difference(ref, got);
        if (d != -1)
            fprintf(stderr, "portable: %d threads differ from 1 thread at step %d\n", counts[i], d);
        CHECK_INT_EQ(d, -1);
    }
}

DT_TEST(run_to_run_reruns_identical)
{
    make_data();
    struct dt_policy pol = level(DT_LEVEL_RUN_TO_RUN);
    static uint8_t ref[STEPS + 1][DT_DIGEST_BYTES], got[STEPS + 1][DT_DIGEST_BYTES];
    train(ref, &pol, 2, 0);
    for (int i = 0; i < 5; i++) {
        train(got, &pol, 2, 0);
        CHECK_INT_EQ(first_difference(ref, got), -1);
    }
}

/* Only the control under test is nondeterministic; everything else is fixed. */
static struct dt_policy only(int reduction_unordered, int atomics_float)
{
    struct dt_policy p = level(DT_LEVEL_PORTABLE);
    p.reduction = reduction_unordered ? DT_REDUCTION_UNORDERED : DT_REDUCTION_FIXED;
    p.atomics = atomics_float ? DT_ATOMICS_FLOAT : DT_ATOMICS_FIXED_POINT;
    return p;
}

DT_TEST(reduction_forced_orders)
{
    make_data();
    static uint8_t a[STEPS + 1][DT_DIGEST_BYTES], b[STEPS + 1][DT_DIGEST_BYTES];
    struct dt_policy unordered = only(1, 0), fixed = only(0, 0);
    train(a, &unordered, 2, 1);
    train(b, &unordered, 2, 2);
    int d = first_difference(a, b);
    fprintf(stderr, "reduction unordered, forced orders 1 vs 2: first difference at step %d\n", d);
    CHECK_INT_EQ(d, 1);         /* equal initial weights, different after the first update */
    train(b, &unordered, 2, 1); /* the same forced order reproduces */
    CHECK_INT_EQ(first_difference(a, b), -1);
    train(a, &fixed, 2, 1);
    train(b, &fixed, 3, 2);
    CHECK_INT_EQ(first_difference(a, b), -1);
}

/* reduction: pinned (run_to_run's) takes no drawn order: under `math: fast` its weight
 * gradient is OpenBLAS's product per fixed worker slice, its other sums the fixed tree. The
 * negative control, unordered with the same math and exact scatters, parts under the same
 * two forced orders; so does `fast`, while `run_to_run` does not, at any forced order. */
DT_TEST(pinned_forced_orders)
{
    make_data();
    static uint8_t a[STEPS + 1][DT_DIGEST_BYTES], b[STEPS + 1][DT_DIGEST_BYTES];
    struct dt_policy unordered = level(DT_LEVEL_FAST);
    unordered.atomics = DT_ATOMICS_FIXED_POINT;
    struct dt_policy pinned = unordered;
    pinned.reduction = DT_REDUCTION_PINNED;
    train(a, &unordered, 2, 1);
    train(b, &unordered, 2, 2);
    CHECK_INT_EQ(first_difference(a, b), 1); /* the negative control */
    train(a, &pinned, 2, 1);
    train(b, &pinned, 2, 2);
    CHECK_INT_EQ(first_difference(a, b), -1);
    train(b, &pinned, 2, 0); /* the hook changes nothing: the natural run's bits */
    CHECK_INT_EQ(first_difference(a, b), -1);
    struct dt_policy fast = level(DT_LEVEL_FAST), r2r = level(DT_LEVEL_RUN_TO_RUN);
    train(a, &fast, 2, 1);
    train(b, &fast, 2, 2);
    CHECK_INT_EQ(first_difference(a, b), 1);
    train(a, &r2r, 2, 1);
    train(b, &r2r, 2, 2);
    CHECK_INT_EQ(first_difference(a, b), -1);
    train(b, &r2r, 2, 0);
    CHECK_INT_EQ(first_difference(a, b), -1);
}

DT_TEST(atomics_forced_orders)
{
    make_data();
    static uint8_t a[STEPS + 1][DT_DIGEST_BYTES], b[STEPS + 1][DT_DIGEST_BYTES];
    struct dt_policy flt = only(0, 1), fx = only(0, 0);
    train(a, &flt, 2, 1);
    train(b, &flt, 2, 2);
    int d = first_difference(a, b);
    fprintf(stderr, "atomics float, forced orders 1 vs 2: first difference at step %d\n", d);
    CHECK_INT_EQ(d, 1);
    train(a, &fx, 2, 1);
    train(b, &fx, 4, 2);
    CHECK_INT_EQ(first_difference(a, b), -1);
}

/* The fixed reduction is not the serial sum: with B > DT_REDUCE_CHUNK the tree changes
 * bits relative to a plain left-to-right sum, so the control is really in effect. Here:
 * `fixed` and `unordered` under a forced order give different traces. */
DT_TEST(fixed_differs_from_unordered)
{
    make_data();
    static uint8_t a[STEPS + 1][DT_DIGEST_BYTES], b[STEPS + 1][DT_DIGEST_BYTES];
    struct dt_policy unordered = only(1, 0), fixed = only(0, 0);
    train(a, &unordered, 2, 7);
    train(b, &fixed, 2, 7);
    CHECK(first_difference(a, b) >= 1);
}

/* ---- LeNet: the same claims through convolution and pooling --------------------------- */

enum { LB = 40, LSTEPS = 4, LPIX = 28 * 28 }; /* rows per conv: 40*28*28, many 32-row chunks */
static float lxs[LSTEPS][LB * LPIX];
static uint8_t lys[LSTEPS][LB];

static void make_images(void)
{
    uint64_t s = 0x2545f4914f6cdd1dULL;
    for (int t = 0; t < LSTEPS; t++)
        for (int i = 0; i < LB * LPIX; i++) {
            s = s * 6364136223846793005ULL + 1442695040888963407ULL;
            lxs[t][i] = (float)(s >> 40) * 0x1p-24f;
            if (i < LB) lys[t][i] = (uint8_t)((s >> 33) % CLS);
        }
}

#define LENET_PARAMS 10
struct lenet_trace {
    uint8_t model[LSTEPS + 1][DT_DIGEST_BYTES];
    uint8_t tensor[LSTEPS + 1][LENET_PARAMS][DT_DIGEST_BYTES];
    char names[LENET_PARAMS][DT_PARAM_NAME];
};

static void train_lenet(struct lenet_trace *tr, const struct dt_policy *pol, int threads,
                        uint64_t forced, bool overlap)
{
    struct dt_backend *be = NULL;
    struct dt_backend_options opt = {DT_BACKEND_CPU, threads, 0};
    DT_ASSERT(dt_backend_create(&be, &opt, NULL) == DT_OK);
    DT_ASSERT(dt_backend_set_forced_order(be, forced) == DT_OK);
    struct dt_model *m = NULL;
    DT_ASSERT(dt_lenet_create(&m, be, 28, 28, overlap, CLS, LB, NULL) == DT_OK);
    DT_ASSERT(m->n_params == LENET_PARAMS);
    dt_model_init(m, 5, 0);
    const struct dt_sgd_options sgd = {.lr = 0.05f, .momentum = 0.9f, .weight_decay = 0.0f};
    const char *names[LENET_PARAMS];
    for (int s = 0; s <= LSTEPS; s++) {
        if (s > 0) {
            float loss;
            DT_ASSERT(dt_model_train_step(m, lxs[s - 1], lys[s - 1], LB, &sgd, pol, &loss) ==
                      DT_OK);
        }
        for (int i = 0; i < m->n_params; i++) {
            dt_sha256_f32(tr->tensor[s][i], m->params[i].w, m->params[i].n);
            snprintf(tr->names[i], DT_PARAM_NAME, "%s", m->params[i].name);
            names[i] = tr->names[i];
        }
        dt_model_digest(tr->model[s], names, (const uint8_t(*)[DT_DIGEST_BYTES])tr->tensor[s],
                        m->n_params);
    }
    dt_model_destroy(m);
    dt_backend_destroy(be);
}

static int lenet_first_difference(const struct lenet_trace *a, const struct lenet_trace *b)
{
    for (int s = 0; s <= LSTEPS; s++)
        if (memcmp(a->model[s], b->model[s], DT_DIGEST_BYTES) != 0) return s;
    return -1;
}

/* Does tensor `name` differ between a and b after `step` updates? */
static bool lenet_tensor_differs(const struct lenet_trace *a, const struct lenet_trace *b, int step,
                                 const char *name)
{
    for (int i = 0; i < LENET_PARAMS; i++)
        if (strcmp(a->names[i], name) == 0)
            return memcmp(a->tensor[step][i], b->tensor[step][i], DT_DIGEST_BYTES) != 0;
    DT_ASSERT_MSG(0, "no such tensor");
    return false;
}

static struct lenet_trace la, lb;

DT_TEST(lenet_portable_thread_count_independent)
{
    make_images();
    struct dt_policy pol = level(DT_LEVEL_PORTABLE);
    for (int overlap = 0; overlap <= 1; overlap++) {
        train_lenet(&la, &pol, 1, 0, overlap);
        const int counts[] = {1, 2, 3, 4};
        for (int i = 0; i < 4; i++) {
            train_lenet(&lb, &pol, counts[i], 0, overlap);
            int d = lenet_first_difference(&la, &lb);
            if (d != -1)
                fprintf(stderr,
                        "lenet portable (overlap %d): %d threads differ from 1 at step %d\n",
                        overlap, counts[i], d);
            CHECK_INT_EQ(d, -1);
        }
        CHECK(memcmp(la.model[0], la.model[LSTEPS], DT_DIGEST_BYTES) != 0); /* it trained */
    }
}

DT_TEST(lenet_run_to_run_reruns_identical)
{
    make_images();
    struct dt_policy pol = level(DT_LEVEL_RUN_TO_RUN);
    train_lenet(&la, &pol, 2, 0, true);
    for (int i = 0; i < 3; i++) {
        train_lenet(&lb, &pol, 2, 0, true);
        CHECK_INT_EQ(lenet_first_difference(&la, &lb), -1);
    }
}

/* reduction unordered, forced orders 1 vs 2: the conv weights differ after ONE update. At
 * step 1 a conv weight's update depends on its backward-weight sum and on gradients that
 * reached it through backward-data and pooling (fixed_point here, so order-free): the
 * difference can only come from the conv backward-weight reduction. */
DT_TEST(lenet_reduction_forced_orders)
{
    make_images();
    struct dt_policy unordered = only(1, 0), fixed = only(0, 0);
    train_lenet(&la, &unordered, 2, 1, true);
    train_lenet(&lb, &unordered, 2, 2, true);
    CHECK_INT_EQ(lenet_first_difference(&la, &lb), 1);
    CHECK(lenet_tensor_differs(&la, &lb, 1, "conv0.weight"));
    CHECK(lenet_tensor_differs(&la, &lb, 1, "conv1.weight"));
    CHECK(!lenet_tensor_differs(&la, &lb, 1, "conv0.bias")); /* bias: atomics, fixed_point */
    train_lenet(&lb, &unordered, 2, 1, true);
    CHECK_INT_EQ(lenet_first_difference(&la, &lb), -1);
    train_lenet(&la, &fixed, 2, 1, true);
    train_lenet(&lb, &fixed, 3, 2, true);
    CHECK_INT_EQ(lenet_first_difference(&la, &lb), -1);
}

/* atomics float, forced orders 1 vs 2, overlapping pooling: the scatter-adds (max-pool
 * backward, col2im, bias) take the order; conv0.weight differs after one update. Under
 * fixed_point every order and thread count gives the same bits. */
DT_TEST(lenet_atomics_forced_orders)
{
    make_images();
    struct dt_policy flt = only(0, 1), fx = only(0, 0);
    train_lenet(&la, &flt, 2, 1, true);
    train_lenet(&lb, &flt, 2, 2, true);
    CHECK_INT_EQ(lenet_first_difference(&la, &lb), 1);
    CHECK(lenet_tensor_differs(&la, &lb, 1, "conv0.weight"));
    train_lenet(&la, &fx, 2, 1, true);
    train_lenet(&lb, &fx, 4, 2, true);
    CHECK_INT_EQ(lenet_first_difference(&la, &lb), -1);
}

DT_TEST_MAIN(DT_CASE(portable_thread_count_independent), DT_CASE(run_to_run_reruns_identical),
             DT_CASE(pinned_forced_orders), DT_CASE(reduction_forced_orders),
             DT_CASE(atomics_forced_orders), DT_CASE(fixed_differs_from_unordered),
             DT_CASE(lenet_portable_thread_count_independent),
             DT_CASE(lenet_run_to_run_reruns_identical), DT_CASE(lenet_reduction_forced_orders),
             DT_CASE(lenet_atomics_forced_orders))
