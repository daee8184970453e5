/* CPU ops: every backward against central finite differences of a double-precision
 * reference forward; forwards against the double reference; SGD against its formula;
 * the dense kernels' bits independent of the thread count. */
#include <math.h>
#include <stdint.h>

#include "determinism/fixed_point.h"
#include "nets/backend.h"
#include "nets/cpu/cpu.h" /* white-box: the two backward-weight forms */
#include "determinism/reduce.h"
#include "nets/model.h"
#include "nets/step.h"
#include "tests/check.h"
#include "tests/op_helpers.h"

static struct dt_policy policy(void)
{
    struct dt_policy p;
    dt_policy_from_level(&p, DT_LEVEL_PORTABLE);
    return p;
}

/* ---- dense ---------------------------------------------------------------------------- */

enum { DB = 9, DIN = 7, DOUT = 5 };
static float dx_[DB * DIN], dw_[DIN * DOUT], dbias_[DOUT], dr_[DB * DOUT];

/* L = sum r .* (x w + bias), all in double, from double copies of the inputs. */
static double dense_loss_ref(const double *x, const double *w, const double *bias)
{
    double L = 0;
    for (int b = 0; b < DB; b++)
        for (int o = 0; o < DOUT; o++) {
            double y = bias[o];
            for (int k = 0; k < DIN; k++) y += x[b * DIN + k] * w[k * DOUT + o];
            L += (double)dr_[b * DOUT + o] * y;
        }
    return L;
}

/* Central differences of dense_loss_ref w.r.t. every element of one input array. */
static void dense_fd(double *grad, int which, int64_t n)
{
    double x[DB * DIN], w[DIN * DOUT], bias[DOUT];
    for (int i = 0; i < DB * DIN; i++) x[i] = dx_[i];
    for (int i = 0; i < DIN * DOUT; i++) w[i] = dw_[i];
    for (int i = 0; i < DOUT; i++) bias[i] = dbias_[i];
    double *v = which == 0 ? x : which == 1 ? w : bias;
    const double h = 1e-4;
    for (int64_t i = 0; i < n; i++) {
        double keep = v[i];
        v[i] = keep + h;
        double lp = dense_loss_ref(x, w, bias);
        v[i] = keep - h;
        double lm = dense_loss_ref(x, w, bias);
        v[i] = keep;
        grad[i] = (lp - lm) / (2 * h);
    }
}

DT_TEST(dense_forward_matches_double)
{
    fill(dx_, DB * DIN, 1.0);
    fill(dw_, DIN * DOUT, 0.5);
    fill(dbias_, DOUT, 0.1);
    struct dt_backend *be = cpu(2);
    struct dt_policy pol = policy();
    float y[DB * DOUT];
    double ref[DB * DOUT];
    CHECK(dt_dense_forward(be, y, dx_, dw_, dbias_, DB, DIN, DOUT, &pol) == DT_OK);
    for (int b = 0; b < DB; b++)
        for (int o = 0; o < DOUT; o++) {
            double s = dbias_[o];
            for (int k = 0; k < DIN; k++) s += (double)dx_[b * DIN + k] * dw_[k * DOUT + o];
            ref[b * DOUT + o] = s;
        }
    check_close("dense forward", y, ref, DB * DOUT, 1e-6, 1e-5);
    dt_backend_destroy(be);
}

/* Every level's kernels: own fixed-order ones, the chunk tree, the unordered chunks,
 * OpenBLAS (math fast), float CAS and fixed-point bias sums. B = 9 < one reduction chunk,
 * so B = 70 (three chunks, the last short) is checked too; and portable with math: exact. */
static void dense_gradcheck_level(enum dt_level level, int threads, bool exact_math)
{
    fill(dx_, DB * DIN, 1.0);
    fill(dw_, DIN * DOUT, 0.5);
    fill(dbias_, DOUT, 0.1);
    fill(dr_, DB * DOUT, 1.0);
    struct dt_backend *be = cpu(threads);
    struct dt_policy pol;
    dt_policy_from_level(&pol, level);
    if (exact_math) pol.math = DT_MATH_EXACT; /* the products exact in integers */
    float gx[DB * DIN], gw[DIN * DOUT], gb[DOUT];
    CHECK(dt_dense_backward_data(be, gx, dr_, dw_, DB, DIN, DOUT, &pol) == DT_OK);
    CHECK(dt_dense_backward_weight(be, gw, dx_, dr_, DB, DIN, DOUT, &pol) == DT_OK);
    CHECK(dt_bias_backward(be, gb, dr_, DB, DOUT, &pol) == DT_OK);
    double fx[DB * DIN], fw[DIN * DOUT], fb[DOUT];
    dense_fd(fx, 0, DB * DIN);
    dense_fd(fw, 1, DIN * DOUT);
    dense_fd(fb, 2, DOUT);
    fprintf(stderr, "level %s%s, %d threads\n", dt_level_name(level),
            exact_math ? " + math: exact" : "", threads);
    check_close("dL/dx", gx, fx, DB * DIN, 1e-5, 1e-4);
    check_close("dL/dw", gw, fw, DIN * DOUT, 1e-5, 1e-4);
    check_close("dL/dbias", gb, fb, DOUT, 1e-5, 1e-4);
    dt_backend_destroy(be);
}

DT_TEST(dense_backward_gradcheck)
{
    for (int l = 0; l < DT_LEVEL_COUNT; l++) {
        dense_gradcheck_level((enum dt_level)l, 1, false);
        dense_gradcheck_level((enum dt_level)l, 3, false);
    }
    dense_gradcheck_level(DT_LEVEL_PORTABLE, 1, true);
    dense_gradcheck_level(DT_LEVEL_PORTABLE, 3, true);
}

/* Sums over a batch of several reduction chunks: weight and bias gradients against a
 * double-precision reference, for every level. */
DT_TEST(batch_sums_every_level)
{
    enum { NB = 70, NI = 5, NO = 6 };
    static float x[NB * NI], r[NB * NO];
    fill(x, NB * NI, 1.0);
    fill(r, NB * NO, 1.0);
    double rw[NI * NO] = {0}, rb[NO] = {0};
    for (int b = 0; b < NB; b++)
        for (int o = 0; o < NO; o++) {
            rb[o] += r[b * NO + o];
            for (int k = 0; k < NI; k++) rw[k * NO + o] += (double)x[b * NI + k] * r[b * NO + o];
        }
    for (int l = 0; l < DT_LEVEL_COUNT; l++) {
        struct dt_backend *be = cpu(2);
        struct dt_policy pol;
        dt_policy_from_level(&pol, (enum dt_level)l);
        float gw[NI * NO], gb[NO];
        CHECK(dt_dense_backward_weight(be, gw, x, r, NB, NI, NO, &pol) == DT_OK);
        CHECK(dt_bias_backward(be, gb, r, NB, NO, &pol) == DT_OK);
        fprintf(stderr, "level %s\n", dt_level_name((enum dt_level)l));
        check_close("sum_b x*dy", gw, rw, NI * NO, 1e-5, 1e-5);
        check_close("sum_b dy", gb, rb, NO, 1e-5, 1e-5);
        dt_backend_destroy(be);
    }
}

/* `fast`'s float bias gradient (dense.c's column_sums: the flat blocks of lcm(out, 16) floats
 * with their remainder rows, the interleaved partials, the plain loop; one worker or the
 * pool's slices) against a double sum, for column counts on each side of those paths and
 * row counts from one to several pool slices. */
DT_TEST(bias_fast_column_sums_match_double)
{
    enum { MB = 5003, MO = 40 };
    static float dy[MB * MO], got[MO];
    static double want[MO];
    fill(dy, MB * MO, 1.0);
    const int outs[] = {1, 3, 6, 7, 10, 16, 17, 31, 32, 40}, rows[] = {1, 7, 100, 999, 5003};
    struct dt_policy pol;
    dt_policy_from_level(&pol, DT_LEVEL_FAST);
    int checked = 0;
    for (int threads = 1; threads <= 3; threads++) {
        struct dt_backend *be = cpu(threads);
        for (size_t oi = 0; oi < sizeof outs / sizeof outs[0]; oi++)
            for (size_t ri = 0; ri < sizeof rows / sizeof rows[0]; ri++) {
                const int out = outs[oi], B = rows[ri];
                for (int o = 0; o < out; o++) {
                    want[o] = 0;
                    for (int b = 0; b < B; b++) want[o] += dy[b * out + o];
                }
                CHECK(dt_bias_backward(be, got, dy, B, out, &pol) == DT_OK);
                check_close("fast bias gradient", got, want, out, 1e-6 * B, 1e-4);
                checked++;
            }
        dt_backend_destroy(be);
    }
    CHECK_INT_EQ(checked, 150);
}

/* ---- relu ----------------------------------------------------------------------------- */

DT_TEST(relu_gradcheck)
{
    enum { N = 64 };
    float x[N], r[N], y[N], g[N];
    fill(x, N, 1.0);
    fill(r, N, 1.0);
    for (int i = 0; i < N; i++)
        if (fabsf(x[i]) < 0.01f) x[i] = 0.5f; /* keep away from the kink */
    struct dt_backend *be = cpu(2);
    struct dt_policy pol = policy();
    CHECK(dt_relu_forward(be, y, x, N, &pol) == DT_OK);
    CHECK(dt_relu_backward(be, g, r, y, N, &pol) == DT_OK);
    double fd[N], yref[N];
    const double h = 1e-4;
    for (int i = 0; i < N; i++) {
        double xp = (double)x[i] + h, xm = (double)x[i] - h;
        fd[i] = (double)r[i] * ((xp > 0 ? xp : 0) - (xm > 0 ? xm : 0)) / (2 * h);
        yref[i] = x[i] > 0 ? x[i] : 0;
    }
    check_close("relu forward", y, yref, N, 0, 0);
    check_close("relu dL/dx", g, fd, N, 1e-6, 1e-6);
    dt_backend_destroy(be);
}

/* ---- softmax cross-entropy ------------------------------------------------------------ */

enum { SB = 6, SC = 10 };

static double xent_ref(const double *z, const int32_t *lab)
{
    double total = 0;
    for (int b = 0; b < SB; b++) {
        double m = z[b * SC];
        for (int c = 1; c < SC; c++) m = z[b * SC + c] > m ? z[b * SC + c] : m;
        double s = 0;
        for (int c = 0; c < SC; c++) s += exp(z[b * SC + c] - m);
        total += log(s) - (z[b * SC + lab[b]] - m);
    }
    return total / SB;
}

static void softmax_gradcheck_level(enum dt_level level)
{
    float z[SB * SC], probs[SB * SC], g[SB * SC];
    int32_t lab[SB] = {0, 3, 9, 9, 4, 1};
    fill(z, SB * SC, 3.0);
    struct dt_backend *be = cpu(2);
    struct dt_policy pol;
    dt_policy_from_level(&pol, level);
    fprintf(stderr, "level %s\n", dt_level_name(level));
    float loss;
    int64_t correct;
    CHECK(dt_softmax_xent_forward(be, probs, &loss, &correct, z, lab, SB, SC, &pol) == DT_OK);
    CHECK(dt_softmax_xent_backward(be, g, probs, lab, SB, SC, SB, &pol) == DT_OK);
    double zd[SB * SC], fd[SB * SC];
    for (int i = 0; i < SB * SC; i++) zd[i] = z[i];
    double lref = xent_ref(zd, lab);
    CHECK_NEAR(loss, lref, 1e-5 * (1 + fabs(lref)));
    const double h = 1e-5;
    for (int i = 0; i < SB * SC; i++) {
        double keep = zd[i];
        zd[i] = keep + h;
        double lp = xent_ref(zd, lab);
        zd[i] = keep - h;
        double lm = xent_ref(zd, lab);
        zd[i] = keep;
        fd[i] = (lp - lm) / (2 * h);
    }
    check_close("softmax_xent dL/dz", g, fd, SB * SC, 1e-6, 1e-4);
    /* argmax accuracy count against a direct computation */
    int64_t want = 0;
    for (int b = 0; b < SB; b++) {
        int arg = 0;
        for (int c = 1; c < SC; c++) arg = z[b * SC + c] > z[b * SC + arg] ? c : arg;
        want += arg == lab[b];
    }
    CHECK_INT_EQ(correct, want);
    dt_backend_destroy(be);
}

DT_TEST(softmax_xent_gradcheck)
{
    for (int l = 0; l < DT_LEVEL_COUNT; l++) softmax_gradcheck_level((enum dt_level)l);
}

/* ---- SGD ------------------------------------------------------------------------------ */

DT_TEST(sgd_matches_formula)
{
    enum { N = 1000 };
    float w[N], v[N], g[N], w0[N], v0[N];
    fill(w, N, 1.0);
    fill(v, N, 0.1);
    fill(g, N, 0.5);
    memcpy(w0, w, sizeof w);
    memcpy(v0, v, sizeof v);
    struct dt_backend *be = cpu(2);
    struct dt_policy pol = policy();
    const float lr = 0.1f, mom = 0.9f, wd = 0.01f;
    CHECK(dt_sgd_update(be, w, v, g, N, lr, mom, wd, &pol) == DT_OK);
    for (int i = 0; i < N; i++) {
        /* The documented float sequence, one rounding per operation. */
        volatile float gi = g[i] + wd * w0[i];
        volatile float vi = mom * v0[i] + gi;
        volatile float wi = w0[i] - lr * vi;
        if (v[i] != vi || w[i] != wi) {
            fprintf(stderr, "sgd[%d]: got w=%a v=%a, want w=%a v=%a\n", i, w[i], v[i], wi, vi);
            dt_check_failures_++;
            break;
        }
    }
    dt_backend_destroy(be);
}

/* ---- whole MLP: composition of the ops ------------------------------------------------ */

enum { MB = 4, MIN = 6, MH = 5, MC = 3 };

/* Mean cross-entropy of a 6-5-3 ReLU MLP in double; params in the model's layout. */
static double mlp_loss_ref(double *const p[4], const float *x, const int32_t *lab)
{
    double z[MB * MC];
    for (int b = 0; b < MB; b++) {
        double h[MH];
        for (int j = 0; j < MH; j++) {
            double s = p[1][j];
            for (int k = 0; k < MIN; k++) s += (double)x[b * MIN + k] * p[0][k * MH + j];
            h[j] = s > 0 ? s : 0;
        }
        for (int c = 0; c < MC; c++) {
            double s = p[3][c];
            for (int j = 0; j < MH; j++) s += h[j] * p[2][j * MC + c];
            z[b * MC + c] = s;
        }
    }
    double total = 0;
    for (int b = 0; b < MB; b++) {
        double m = z[b * MC];
        for (int c = 1; c < MC; c++) m = z[b * MC + c] > m ? z[b * MC + c] : m;
        double s = 0;
        for (int c = 0; c < MC; c++) s += exp(z[b * MC + c] - m);
        total += log(s) - (z[b * MC + lab[b]] - m);
    }
    return total / MB;
}

DT_TEST(mlp_backward_gradcheck)
{
    struct dt_backend *be = cpu(2);
    struct dt_policy pol = policy();
    struct dt_model *m = NULL;
    int64_t hidden[1] = {MH};
    CHECK(dt_mlp_create(&m, be, MIN, hidden, 1, MC, MB, NULL) == DT_OK);
    CHECK_INT_EQ(m->n_params, 4);
    dt_model_init(m, 7, 0);
    float x[MB * MIN];
    int32_t lab[MB] = {0, 2, 1, 2};
    fill(x, MB * MIN, 1.0);
    dt_backend_upload(be, m->x, x, sizeof x);
    dt_backend_upload(be, m->labels, lab, sizeof lab);
    float loss;
    struct dt_pass pass;
    CHECK(dt_model_forward(m, MB, &pol, &pass) == DT_OK);
    CHECK(dt_softmax_xent_forward(be, m->probs, &loss, NULL, m->logits, m->labels, MB, MC, &pol) ==
          DT_OK);
    CHECK(dt_softmax_xent_backward(be, m->dlogits, m->probs, m->labels, MB, MC, MB, &pol) == DT_OK);
    CHECK(m->ops->backward(m, MB, &pass, &pol) == DT_OK);
    double *p[4];
    for (int i = 0; i < 4; i++) {
        p[i] = malloc((size_t)m->params[i].n * sizeof(double));
        for (int64_t k = 0; k < m->params[i].n; k++) p[i][k] = m->params[i].w[k];
    }
    CHECK_NEAR(loss, mlp_loss_ref(p, x, lab), 1e-5);
    const double h = 1e-6;
    for (int i = 0; i < 4; i++) {
        double *fd = malloc((size_t)m->params[i].n * sizeof(double));
        for (int64_t k = 0; k < m->params[i].n; k++) {
            double keep = p[i][k];
            p[i][k] = keep + h;
            double lp = mlp_loss_ref(p, x, lab);
            p[i][k] = keep - h;
            double lm = mlp_loss_ref(p, x, lab);
            p[i][k] = keep;
            fd[k] = (lp - lm) / (2 * h);
        }
        check_close(m->params[i].name, m->params[i].g, fd, m->params[i].n, 1e-5, 1e-3);
        free(fd);
    }
    for (int i = 0; i < 4; i++) free(p[i]);
    dt_model_destroy(m);
    dt_backend_destroy(be);
}

/* ---- thread-count independence -------------------------------------------------------- */

/* Sizes cross the kernels' row blocks (4) and column tiles (512). */
enum { TB = 37, TIN = 53, TOUT = 600 };

static void dense_all(int threads, float *y, float *gx, float *gw, float *gb, const float *x,
                      const float *w, const float *bias, const float *r)
{
    struct dt_backend *be = cpu(threads);
    struct dt_policy pol = policy();
    DT_ASSERT(dt_dense_forward(be, y, x, w, bias, TB, TIN, TOUT, &pol) == DT_OK);
    DT_ASSERT(dt_dense_backward_data(be, gx, r, w, TB, TIN, TOUT, &pol) == DT_OK);
    DT_ASSERT(dt_dense_backward_weight(be, gw, x, r, TB, TIN, TOUT, &pol) == DT_OK);
    DT_ASSERT(dt_bias_backward(be, gb, r, TB, TOUT, &pol) == DT_OK);
    dt_backend_destroy(be);
}

/* Whether the dense ops (forward, input and weight gradients, bias gradient) give the
 * same bits at `threads` as at 1, on fixed inputs; each backend opened under the current
 * environment. */
static bool dense_matches_one_thread(int threads)
{
    static float x[TB * TIN], w[TIN * TOUT], bias[TOUT], r[TB * TOUT];
    fill(x, TB * TIN, 1.0);
    fill(w, TIN * TOUT, 0.3);
    fill(bias, TOUT, 0.1);
    fill(r, TB * TOUT, 1.0);
    static float y1[TB * TOUT], gx1[TB * TIN], gw1[TIN * TOUT], gb1[TOUT];
    static float yn[TB * TOUT], gxn[TB * TIN], gwn[TIN * TOUT], gbn[TOUT];
    dense_all(1, y1, gx1, gw1, gb1, x, w, bias, r);
    dense_all(threads, yn, gxn, gwn, gbn, x, w, bias, r);
    return !memcmp(y1, yn, sizeof y1) && !memcmp(gx1, gxn, sizeof gx1) &&
           !memcmp(gw1, gwn, sizeof gw1) && !memcmp(gb1, gbn, sizeof gb1);
}

DT_TEST(dense_thread_count_independent)
{
    const int counts[] = {2, 3, 4, 8};
    for (int t = 0; t < 4; t++) {
        if (dense_matches_one_thread(counts[t])) continue;
        fprintf(stderr, "dense ops with %d threads differ from 1 thread\n", counts[t]);
        dt_check_failures_++;
    }
}

/* DETRAIN_POOL_SPIN_US (nets/cpu/threadpool.c): how long a waiting thread spins before it
 * sleeps. Out of range or not a number: the CPU backend refuses to open, naming the
 * variable. 0 (sleep at once: every hand-off a wake-up), the default, the longest spin and
 * an empty value all give the one-thread bits at 3 threads. */
DT_TEST(pool_spin_setting)
{
    const char *bad[] = {"abc", "-1", "100001", "12x"};
    for (int i = 0; i < 4; i++) {
        setenv("DETRAIN_POOL_SPIN_US", bad[i], 1);
        struct dt_backend *be = NULL;
        struct dt_backend_options bo = {DT_BACKEND_CPU, 2, 0};
        struct dt_error err;
        CHECK_INT_EQ(dt_backend_create(&be, &bo, &err), DT_ERR_USAGE);
        CHECK_CONTAINS(err.msg, "DETRAIN_POOL_SPIN_US");
        CHECK(be == NULL);
    }
    const char *good[] = {"0", "50", "100000", ""};
    for (int i = 0; i < 4; i++) {
        setenv("DETRAIN_POOL_SPIN_US", good[i], 1);
        if (dense_matches_one_thread(3)) continue;
        fprintf(stderr, "DETRAIN_POOL_SPIN_US=%s: 3 threads differ from 1\n", good[i]);
        dt_check_failures_++;
    }
    unsetenv("DETRAIN_POOL_SPIN_US");
}

/* A convolution's bias gradient sums B*OH*OW rows: from 4096 elements the fixed-point
 * sum is split across workers. Its bits must be dt_fixed_sum_rows's (the serial
 * definition) for every thread count, with 6 columns (one by one) and 45 (the AVX-512
 * path's groups of 32 and 8, then 5 one by one) on both kernel paths, and a NaN or a
 * column beyond the float range must still be reported. Below 4096 elements the calling
 * thread sums in lanes (61 x 10: two 4-lane groups, then 2 one by one); with shards set,
 * each shard's slot is the serial sum of its rows. */
static void bias_split_case(int64_t RB, int64_t RO)
{
    float *dy = dt_xmalloc((size_t)(RB * RO) * sizeof(float));
    float *saved = dt_xmalloc((size_t)(RB * RO) * sizeof(float));
    float want[64], got[64];
    int64_t scratch[64];
    fill(dy, RB * RO, 1.0);
    for (int64_t i = 0; i < RB * RO; i += 7) dy[i] *= 1e-3f; /* spread the magnitudes */
    /* column 2 far below the largest value: each term's rounding to the fixed-point step
     * shows in its sum (nearest-even against truncation is thousands of ulps there) */
    for (int64_t r = 0; r < RB; r++) dy[r * RO + 2] *= 1e-9f;
    int shift;
    CHECK(dt_fixed_sum_rows(want, dy, RB, RO, scratch, &shift, NULL) == DT_OK);
    struct dt_policy pol = policy();
    const int counts[] = {1, 2, 3, 4};
    for (int t = 0; t < 4; t++) {
        struct dt_backend *be = cpu(counts[t]);
        CHECK(dt_bias_backward(be, got, dy, RB, RO, &pol) == DT_OK);
        if (memcmp(got, want, (size_t)RO * sizeof(float)) != 0) {
            fprintf(stderr,
                    "%d threads, %lld columns: split fixed-point bias sum differs from the serial "
                    "one\n",
                    counts[t], (long long)RO);
            dt_check_failures_++;
        }
        const float keep = dy[RB * RO - 3];
        dy[RB * RO - 3] = NAN;
        CHECK_INT_EQ(dt_bias_backward(be, got, dy, RB, RO, &pol), DT_ERR_NUMERIC);
        dy[RB * RO - 3] = keep;
        /* a column whose exact sum lies beyond the float range is an error here too, as on
         * the small path and the GPU (not a silent infinity) */
        memcpy(saved, dy, (size_t)(RB * RO) * sizeof(float));
        for (int64_t r = 0; r < RB; r++) dy[r * RO + 4] = 3e38f;
        CHECK_INT_EQ(dt_bias_backward(be, got, dy, RB, RO, &pol), DT_ERR_NUMERIC);
        memcpy(dy, saved, (size_t)(RB * RO) * sizeof(float));
        /* with 3 shards set (reduction: exact), slot k is the serial sum of shard k's rows */
        int64_t row[4];
        for (int64_t k = 0; k <= 3; k++) row[k] = dt_shard_row(RB, 3, k);
        const struct dt_shards sh = {.count = 3, .row = row};
        float *slots = dt_xmalloc((size_t)(3 * RO) * sizeof(float));
        dt_backend_set_shards(be, &sh);
        CHECK(dt_bias_backward(be, slots, dy, RB, RO, &pol) == DT_OK);
        dt_backend_set_shards(be, NULL);
        for (int64_t k = 0; k < 3; k++) {
            CHECK(dt_fixed_sum_rows(want, dy + row[k] * RO, row[k + 1] - row[k], RO, scratch, NULL,
                                    NULL) == DT_OK);
            if (memcmp(slots + k * RO, want, (size_t)RO * sizeof(float)) != 0) {
                fprintf(stderr, "%d threads, %lld columns: shard %lld's bias sum differs\n",
                        counts[t], (long long)RO, (long long)k);
                dt_check_failures_++;
            }
        }
        free(slots);
        CHECK(dt_fixed_sum_rows(want, dy, RB, RO, scratch, NULL, NULL) == DT_OK);
        dt_backend_destroy(be);
    }
    free(dy), free(saved);
}

DT_TEST(bias_fixed_point_split_matches_serial)
{
    const bool wide = dt_cpu_set_wide(true);
    for (int path = 0; path < (wide ? 2 : 1); path++) {
        dt_cpu_set_wide(path == 0);
        bias_split_case(20011, 6);
        bias_split_case(3001, 45);
        bias_split_case(61, 10); /* the small path: one thread, no pool */
    }
    dt_cpu_set_wide(true);
}

/* The two backward-weight forms (nets/cpu/cpu.h) give the same bits under `reduction:
 * fixed`: the transposed form is picked by shape only, so the choice must not show. */
DT_TEST(wgrad_forms_same_bits)
{
    enum { WB = 1003, WIN = 37, WOUT = 6 };
    static float x[WB * WIN], xt[WIN * WB], dy[WB * WOUT], a[WIN * WOUT], b[WIN * WOUT];
    fill(x, WB * WIN, 1.0);
    fill(dy, WB * WOUT, 1.0);
    for (int r = 0; r < WB; r++)
        for (int k = 0; k < WIN; k++) xt[k * WB + r] = x[r * WIN + k];
    CHECK(dt_cpu_wgrad_prefers_rows(WB, WIN, WOUT));
    struct dt_policy pol = policy();
    for (int threads = 1; threads <= 3; threads += 2) {
        struct dt_backend *be = cpu(threads);
        CHECK(dt_cpu_wgrad_rows(be, a, x, dy, WB, WIN, WOUT, &pol) == DT_OK);
        CHECK(dt_cpu_wgrad_transposed(be, b, xt, dy, WB, WIN, WOUT, &pol) == DT_OK);
        CHECK(memcmp(a, b, sizeof a) == 0);
        dt_backend_destroy(be);
    }
}

/* The fixed tree kept as a stack (reduce.h, dt_reduce_stack_merges: the CPU weight
 * gradient's tiles) gives the level-by-level tree's bits for every count up to 600; the
 * negative control, the stack's tail added from the bottom up, differs for some count, so
 * the comparison can tell two shapes apart. */
DT_TEST(tree_as_stack)
{
    float a[600], stack[DT_REDUCE_STACK_MAX], wrong[DT_REDUCE_STACK_MAX];
    int parted = 0;
    for (int64_t m = 1; m <= 600; m++) {
        for (int64_t j = 0; j < m; j++) a[j] = (float)(urand() * ldexp(1.0, (int)(j % 23) - 11));
        int depth = 0;
        for (int64_t j = 0; j < m; j++) {
            stack[depth++] = a[j];
            for (int k = dt_reduce_stack_merges(j + 1); k > 0; k--, depth--)
                stack[depth - 2] = stack[depth - 2] + stack[depth - 1];
        }
        memcpy(wrong, stack, sizeof stack);
        for (int d = 1; d < depth; d++) wrong[0] = wrong[0] + wrong[d];
        for (; depth > 1; depth--) stack[depth - 2] = stack[depth - 2] + stack[depth - 1];
        dt_reduce_tree_vectors(a, m, 1, 1);
        if (memcmp(&a[0], &stack[0], sizeof a[0]) != 0) {
            fprintf(stderr, "%lld partials: stack %.9g, tree %.9g\n", (long long)m,
                    (double)stack[0], (double)a[0]);
            dt_check_failures_++;
            break;
        }
        parted += memcmp(&a[0], &wrong[0], sizeof a[0]) != 0;
    }
    CHECK(parted > 0);
}

/* The weight gradient under a fixed reduction against its definition, written out
 * serially: per element, each canonical chunk summed in row order from +0, the chunks by
 * the fixed tree -- with shards set, the same per shard into its slot. Shapes with full
 * and short tiles, one chunk and many (odd carries), 1 and 3 threads, on every kernel path
 * this CPU has; at portable (a multiply and an add, two roundings) and at `fast` +
 * `reduction: exact`, whose chunk products on the AVX-512 path are fused multiply-adds
 * (fmaf: one rounding; dense.c's wgrad_fuses) and two roundings on the other. On the
 * AVX-512 path the fused definition must differ from the two-rounding one in some
 * elements here (negative control: the op's bits are told apart from portable's). */
DT_TEST(wgrad_fixed_matches_definition)
{
    enum { GB = 1000, GIN = 37, GOUT = 40 };
    static float x[GB * GIN], dy[GB * GOUT], got[3 * GIN * GOUT], want[3 * GIN * GOUT];
    static float part[GB / DT_REDUCE_CHUNK + 1], part2[GB / DT_REDUCE_CHUNK + 1];
    fill(x, GB * GIN, 1.0);
    fill(dy, GB * GOUT, 1.0);
    const int64_t bs[] = {1, 31, 33, 96, 1000}, ins[] = {1, 7, 37}, outs[] = {16, 21, 40};
    const bool wide = dt_cpu_set_wide(true);
    int cases = 0, fused_differs = 0;
    for (int pi = 0; pi < 4; pi++) {
        const int path = pi % 2 == 0 && wide ? 0 : 1;
        if (pi % 2 == 0 && !wide) continue;
        dt_cpu_set_wide(path == 0);
        struct dt_policy pol = policy();
        if (pi >= 2) {
            dt_policy_from_level(&pol, DT_LEVEL_FAST);
            pol.reduction = DT_REDUCTION_EXACT;
        }
        const bool fma = pi >= 2 && path == 0;
        for (int threads = 1; threads <= 3; threads += 2) {
            struct dt_backend *be = cpu(threads);
            for (int a = 0; a < 5; a++)
                for (int b = 0; b < 3; b++)
                    for (int c = 0; c < 3; c++)
                        for (int64_t S = 1; S <= 3; S += 2) {
                            const int64_t B = bs[a], in = ins[b], out = outs[c];
                            if (S > B) continue;
                            int64_t row[4];
                            for (int64_t k = 0; k <= S; k++) row[k] = dt_shard_row(B, S, k);
                            for (int64_t k = 0; k < S; k++)
                                for (int64_t i = 0; i < in; i++)
                                    for (int64_t o = 0; o < out; o++) {
                                        const int64_t n = row[k + 1] - row[k];
                                        const int64_t m = dt_reduce_chunks(n);
                                        for (int64_t ch = 0; ch < m; ch++) {
                                            float t = 0.0f, t2 = 0.0f;
                                            for (int64_t r = ch * DT_REDUCE_CHUNK;
                                                 r < n && r < (ch + 1) * DT_REDUCE_CHUNK; r++) {
                                                const int64_t bb = row[k] + r;
                                                const float p = x[bb * in + i] * dy[bb * out + o];
                                                t = fma ? fmaf(x[bb * in + i], dy[bb * out + o], t)
                                                        : t + x[bb * in + i] * dy[bb * out + o];
                                                t2 = t2 + p;
                                            }
                                            part[ch] = t, part2[ch] = t2;
                                        }
                                        dt_reduce_tree_vectors(part, m, 1, 1);
                                        dt_reduce_tree_vectors(part2, m, 1, 1);
                                        want[k * in * out + i * out + o] = part[0];
                                        fused_differs += fma && part[0] != part2[0];
                                    }
                            const struct dt_shards sh = {.count = S, .row = row};
                            if (S > 1) dt_backend_set_shards(be, &sh);
                            CHECK(dt_dense_backward_weight(be, got, x, dy, B, in, out, &pol) ==
                                  DT_OK);
                            dt_backend_set_shards(be, NULL);
                            if (memcmp(got, want, (size_t)(S * in * out) * sizeof(float))) {
                                fprintf(stderr,
                                        "%s, %s path, %d threads, B %lld in %lld out %lld, "
                                        "%lld shards: differs\n",
                                        pi >= 2 ? "fast+reduction=exact" : "portable",
                                        path == 0 ? "wide" : "narrow", threads, (long long)B,
                                        (long long)in, (long long)out, (long long)S);
                                dt_check_failures_++;
                            }
                            cases++;
                        }
            dt_backend_destroy(be);
        }
    }
    dt_cpu_set_wide(true);
    CHECK(cases > 100);
    if (wide) CHECK(fused_differs > 0);
}

/* The own fixed-order product against its definition, a scalar loop summing k in
 * ascending order (mul and add two roundings, as the build compiles everything): every
 * shape class (full tiles, leftover rows and columns, sums longer than the padded-tile
 * limit), both layouts of A, fresh and accumulating, on the AVX-512 path (where the CPU
 * has it) and on the AVX2/baseline one. A tile that summed in another order, or a path
 * that dropped the accumulator, would differ in the low bits at these sizes. */
DT_TEST(matmul_paths_match_scalar)
{
    enum { MM = 19, MK = 601, MN = 70 };
    static float A[MM * MK], At[MK * MM], Bm[MK * MN], C0[MM * MN], C[MM * MN], R[MM * MN];
    fill(A, MM * MK, 1.0);
    fill(Bm, MK * MN, 1.0);
    fill(C0, MM * MN, 3.0);
    for (int i = 0; i < MM; i++)
        for (int k = 0; k < MK; k++) At[k * MM + i] = A[i * MK + k];
    const int ms[] = {1, 3, 8, 11, 19}, ks[] = {1, 32, 33, 600, 601}, ns[] = {1, 15, 16, 17, 70};
    /* Without the AVX-512 path (no AVX-512F+DQ, DETRAIN_CPU_ISA=avx2, or a build without the
     * wide kernels) the narrow path alone is checked: running it twice would prove nothing. */
    const bool wide = dt_cpu_set_wide(true);
    fprintf(stderr, "AVX-512 path %s\n",
            wide ? "available: both paths checked" : "absent: the AVX2/baseline path only");
    int cases = 0;
    for (int path = wide ? 0 : 1; path < 2; path++) {
        dt_cpu_set_wide(path == 0);
        for (int a = 0; a < 5; a++)
            for (int b = 0; b < 5; b++)
                for (int c = 0; c < 5; c++)
                    for (int layout = 0; layout < 2; layout++)
                        for (int acc = 0; acc < 2; acc++) {
                            const int M = ms[a], K = ks[b], N = ns[c];
                            for (int i = 0; i < M; i++)
                                for (int j = 0; j < N; j++) {
                                    float s = acc ? C0[i * MN + j] : 0.0f;
                                    for (int k = 0; k < K; k++)
                                        s = s + A[i * MK + k] * Bm[k * MN + j];
                                    R[i * MN + j] = s;
                                }
                            memcpy(C, C0, sizeof C);
                            /* rows [1, M) only when M > 1: a nonzero first row */
                            const int i0 = M > 1 ? 1 : 0;
                            if (layout == 0)
                                dt_cpu_matmul_ordered(C, MN, A, MK, 1, Bm, MN, K, N, i0, M, acc);
                            else dt_cpu_matmul_ordered(C, MN, At, 1, MM, Bm, MN, K, N, i0, M, acc);
                            for (int i = i0; i < M; i++)
                                if (memcmp(C + i * MN, R + i * MN, (size_t)N * sizeof(float))) {
                                    fprintf(stderr,
                                            "%s path, M %d K %d N %d, layout %d, acc %d: row %d "
                                            "differs\n",
                                            path == 0 ? "wide" : "narrow", M, K, N, layout, acc, i);
                                    dt_check_failures_++;
                                    break;
                                }
                            cases++;
                        }
    }
    dt_cpu_set_wide(true);
    CHECK_INT_EQ(cases, (wide ? 2 : 1) * 5 * 5 * 5 * 2 * 2);
}

/* The dense ops' bits do not depend on the kernel path (AVX-512 or AVX2/baseline): every
 * level's forward, backward-data, weight gradient (x read in place or transposed, the
 * wide or the shared fixed tree: 900 rows = 29 chunks, odd carries at two levels) and bias
 * gradient, on a shape with full and leftover tiles. */
DT_TEST(dense_paths_same_bits)
{
    enum { PB = 900, PIN = 37, POUT = 21 };
    static float x[PB * PIN], w[PIN * POUT], bias[POUT], dy[PB * POUT];
    static float out[2][PB * POUT + PB * PIN + PIN * POUT + POUT];
    fill(x, PB * PIN, 1.0);
    fill(w, PIN * POUT, 0.3);
    fill(bias, POUT, 0.1);
    fill(dy, PB * POUT, 1.0);
    if (!dt_cpu_set_wide(true)) {
        const char *isa = getenv("DETRAIN_CPU_ISA");
        if (isa && strcmp(isa, "avx2") == 0)
            DT_SKIP("DETRAIN_CPU_ISA=avx2: AVX-512 kernels off, only one kernel path");
        DT_SKIP("no AVX-512F+DQ on this CPU: only one kernel path");
    }
    /* fast's paths differ by design (fused AVX-512 tiles or OpenBLAS): dense_fast_matches_double;
     * so do run_to_run's library products (math: fast), whose promise is one machine's, which
     * each path stands for: its own kernels (math: strict) are held here */
    for (int level = DT_LEVEL_RUN_TO_RUN; level < 3; level++) {
        struct dt_policy pol;
        dt_policy_from_level(&pol, (enum dt_level)level);
        if (dt_math_fast(&pol)) pol.math = DT_MATH_STRICT;
        for (int path = 0; path < 2; path++) {
            dt_cpu_set_wide(path == 0);
            struct dt_backend *be = cpu(2);
            float *o = out[path];
            CHECK(dt_dense_forward(be, o, x, w, bias, PB, PIN, POUT, &pol) == DT_OK);
            o += PB * POUT;
            CHECK(dt_dense_backward_data(be, o, dy, w, PB, PIN, POUT, &pol) == DT_OK);
            o += PB * PIN;
            CHECK(dt_dense_backward_weight(be, o, x, dy, PB, PIN, POUT, &pol) == DT_OK);
            o += PIN * POUT;
            if (pol.atomics == DT_ATOMICS_FIXED_POINT) /* float atomics: arrival order */
                CHECK(dt_bias_backward(be, o, dy, PB, POUT, &pol) == DT_OK);
            else memset(o, 0, POUT * sizeof(float));
            dt_backend_destroy(be);
        }
        if (memcmp(out[0], out[1], sizeof out[0]) != 0) {
            fprintf(stderr, "level %s (math %s): the AVX-512 and AVX2 paths give different bits\n",
                    dt_level_name((enum dt_level)level),
                    dt_policy_control_value(&pol, dt_policy_find_control("math")));
            dt_check_failures_++;
        }
    }
    dt_cpu_set_wide(true);
}

/* math: fast's products on both kernel paths -- the fused AVX-512 tiles (full 16-column
 * tiles, 8/4/2/1-row tiles, leftover columns) and OpenBLAS -- against a double-precision
 * product: forward and backward-data within float rounding of the sum. */
DT_TEST(dense_fast_matches_double)
{
    enum { PB = 75, PIN = 37, POUT = 21 };
    static float x[PB * PIN], w[PIN * POUT], bias[POUT], dy[PB * POUT], y[PB * POUT], dx[PB * PIN];
    static double ry[PB * POUT], rdx[PB * PIN];
    fill(x, PB * PIN, 1.0);
    fill(w, PIN * POUT, 0.3);
    fill(bias, POUT, 0.1);
    fill(dy, PB * POUT, 1.0);
    for (int b = 0; b < PB; b++) {
        for (int o = 0; o < POUT; o++) {
            double s = bias[o];
            for (int k = 0; k < PIN; k++) s += (double)x[b * PIN + k] * w[k * POUT + o];
            ry[b * POUT + o] = s;
        }
        for (int k = 0; k < PIN; k++) {
            double s = 0;
            for (int o = 0; o < POUT; o++) s += (double)dy[b * POUT + o] * w[k * POUT + o];
            rdx[b * PIN + k] = s;
        }
    }
    struct dt_policy pol;
    dt_policy_from_level(&pol, DT_LEVEL_FAST);
    const bool wide = dt_cpu_set_wide(true);
    for (int path = 0; path < (wide ? 2 : 1); path++) {
        dt_cpu_set_wide(path == 0);
        fprintf(stderr, "fast, %s path\n", path == 0 && wide ? "AVX-512 fused" : "OpenBLAS");
        struct dt_backend *be = cpu(2);
        CHECK(dt_dense_forward(be, y, x, w, bias, PB, PIN, POUT, &pol) == DT_OK);
        CHECK(dt_dense_backward_data(be, dx, dy, w, PB, PIN, POUT, &pol) == DT_OK);
        check_close("fast dense forward", y, ry, PB * POUT, 1e-6, 1e-5);
        check_close("fast dense backward-data", dx, rdx, PB * PIN, 1e-6, 1e-5);
        dt_backend_destroy(be);
    }
    dt_cpu_set_wide(true);
}

DT_TEST_MAIN(DT_CASE(dense_forward_matches_double), DT_CASE(dense_backward_gradcheck),
             DT_CASE(batch_sums_every_level), DT_CASE(relu_gradcheck),
             DT_CASE(softmax_xent_gradcheck), DT_CASE(sgd_matches_formula),
             DT_CASE(mlp_backward_gradcheck), DT_CASE(dense_thread_count_independent),
             DT_CASE(pool_spin_setting), DT_CASE(bias_fixed_point_split_matches_serial),
             DT_CASE(wgrad_forms_same_bits), DT_CASE(matmul_paths_match_scalar),
             DT_CASE(dense_paths_same_bits), DT_CASE(dense_fast_matches_double),
             DT_CASE(tree_as_stack), DT_CASE(wgrad_fixed_matches_definition),
             DT_CASE(bias_fast_column_sums_match_double))
