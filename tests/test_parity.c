/* The parity table, in the style of ggml's test-backend-ops: every op x every level x every
 * backend against one reference -- the CPU backend on one thread at `portable`, whose ops
 * test_ops.c, test_conv.c and test_bnn.c check against double-precision references -- with
 * what each level promises:
 *   portable    the reference's bits on every backend and thread count (docs/DESIGN.md:
 *               "Is it the same everywhere?");
 *   run_to_run  the same bits when run again on the same backend, and the reference within
 *               the row's tolerance;
 *   fast        the reference within the row's tolerance.
 * A new op is a row of `ops` (its inputs, its outputs and the call); a new backend a row of
 * `backends`; a new level is taken from DT_LEVEL_COUNT. Tolerances are relative to the
 * largest |value| of the reference output. The `gpu` case runs the same table with the
 * CUDA backend added (skipped where no GPU is usable). */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "determinism/dropout.h"
#include "determinism/exact_product.h"
#include "determinism/noise.h"
#include "determinism/philox.h"
#include "nets/backend.h"
#include "nets/cpu/cpu.h" /* white-box: the kernel paths */
#include "tests/check.h"
#include "tests/op_helpers.h"

enum { MAX_T = 5 };

/* One op's tensors: inputs filled on the host, outputs read back; 4-byte elements (float,
 * or int32 when marked), every tensor in backend memory. */
struct io {
    int n_in, n_out;
    int64_t in_n[MAX_T], out_n[MAX_T];
    bool out_int[MAX_T]; /* compared as integers (argmax, lane states) */
    float *in[MAX_T];    /* host inputs (int32 inputs stored in the same 4 bytes) */
};

struct op_row {
    const char *name;
    void (*make)(struct io *io);
    /* the call on backend memory: in[i] and out[i] as io describes */
    enum dt_status (*run)(struct dt_backend *be, void *const *in, void *const *out,
                          const struct dt_policy *pol);
    double tol; /* where bits are not promised: |got - ref| <= tol * max |ref| */
};

static float *host(int64_t n) { return dt_xcalloc((size_t)n, sizeof(float)); }

static void add_in(struct io *io, int64_t n, double scale)
{
    io->in_n[io->n_in] = n;
    io->in[io->n_in] = host(n);
    fill(io->in[io->n_in++], n, scale);
}

static void add_labels(struct io *io, int64_t n, int32_t classes)
{
    io->in_n[io->n_in] = n;
    float *v = host(n);
    for (int64_t i = 0; i < n; i++) {
        const int32_t c = (int32_t)((i * 7 + 3) % classes);
        memcpy(&v[i], &c, sizeof c);
    }
    io->in[io->n_in++] = v;
}

static void add_out(struct io *io, int64_t n, bool is_int)
{
    io->out_n[io->n_out] = n;
    io->out_int[io->n_out++] = is_int;
}

/* n non-negative floats (second moments, 1 / std) */
static void add_positive(struct io *io, int64_t n, double scale)
{
    add_in(io, n, scale);
    for (int64_t i = 0; i < n; i++) io->in[io->n_in - 1][i] = fabsf(io->in[io->n_in - 1][i]);
}

/* ---- the rows ------------------------------------------------------------------------- */

enum { B = 33, IN = 40, OUT = 17, C = 10, N = 1000 };
static const struct conv_geom conv_geom = {3, 9, 9, 2, 4, 3, 3, 1, 1};
static const struct pool_geom pool_geom = {3, 9, 9, 4, 3, 2, 1}; /* overlapping: a scatter */

static void make_dense_forward(struct io *io)
{
    add_in(io, B * IN, 1.0), add_in(io, IN * OUT, 0.3), add_in(io, OUT, 0.1);
    add_out(io, B * OUT, false);
}
static enum dt_status run_dense_forward(struct dt_backend *be, void *const *in, void *const *out,
                                        const struct dt_policy *pol)
{
    return dt_dense_forward(be, out[0], in[0], in[1], in[2], B, IN, OUT, pol);
}
static const double tol_dense_forward = 2e-3;

static void make_dense_backward_data(struct io *io)
{
    add_in(io, B * OUT, 1.0), add_in(io, IN * OUT, 0.3);
    add_out(io, B * IN, false);
}
static enum dt_status run_dense_backward_data(struct dt_backend *be, void *const *in,
                                              void *const *out, const struct dt_policy *pol)
{
    return dt_dense_backward_data(be, out[0], in[0], in[1], B, IN, OUT, pol);
}
static const double tol_dense_backward_data = 2e-3;

static void make_dense_backward_weight(struct io *io)
{
    add_in(io, B * IN, 1.0), add_in(io, B * OUT, 1.0);
    add_out(io, IN * OUT, false);
}
static enum dt_status run_dense_backward_weight(struct dt_backend *be, void *const *in,
                                                void *const *out, const struct dt_policy *pol)
{
    return dt_dense_backward_weight(be, out[0], in[0], in[1], B, IN, OUT, pol);
}
static const double tol_dense_backward_weight = 2e-3;

static void make_bias_backward(struct io *io)
{
    add_in(io, B * OUT, 1.0);
    add_out(io, OUT, false);
}
static enum dt_status run_bias_backward(struct dt_backend *be, void *const *in, void *const *out,
                                        const struct dt_policy *pol)
{
    return dt_bias_backward(be, out[0], in[0], B, OUT, pol);
}
static const double tol_bias_backward = 1e-5;

static void make_relu_forward(struct io *io)
{
    add_in(io, N, 1.0);
    add_out(io, N, false);
}
static enum dt_status run_relu_forward(struct dt_backend *be, void *const *in, void *const *out,
                                       const struct dt_policy *pol)
{
    return dt_relu_forward(be, out[0], in[0], N, pol);
}
static const double tol_relu_forward = 0;

static void make_relu_backward(struct io *io)
{
    add_in(io, N, 1.0), add_in(io, N, 1.0);
    add_out(io, N, false);
}
static enum dt_status run_relu_backward(struct dt_backend *be, void *const *in, void *const *out,
                                        const struct dt_policy *pol)
{
    return dt_relu_backward(be, out[0], in[0], in[1], N, pol);
}
static const double tol_relu_backward = 0;

static void make_softmax_xent_forward(struct io *io)
{
    add_in(io, B * C, 3.0), add_labels(io, B, C);
    add_out(io, B * C, false), add_out(io, 1, false);
}
static enum dt_status run_softmax_xent_forward(struct dt_backend *be, void *const *in,
                                               void *const *out, const struct dt_policy *pol)
{
    float loss = NAN;
    enum dt_status st = dt_softmax_xent_forward(be, out[0], &loss, NULL, in[0], in[1], B, C, pol);
    dt_backend_upload(be, out[1], &loss, sizeof loss); /* the host scalar, compared too */
    return st;
}
static const double tol_softmax_xent_forward = 1e-5;

static void make_softmax_xent_backward(struct io *io)
{
    add_in(io, B * C, 1.0), add_labels(io, B, C);
    add_out(io, B * C, false);
}
static enum dt_status run_softmax_xent_backward(struct dt_backend *be, void *const *in,
                                                void *const *out, const struct dt_policy *pol)
{
    return dt_softmax_xent_backward(be, out[0], in[0], in[1], B, C, 3 * B, pol);
}
static const double tol_softmax_xent_backward = 0;

/* In-place ops: the outputs start as copies of the inputs they update. */
static void copy_into(struct dt_backend *be, void *dst, const void *src, int64_t n)
{
    float *h = host(n);
    dt_backend_download(be, h, src, (size_t)n * 4);
    dt_backend_upload(be, dst, h, (size_t)n * 4);
    free(h);
}

static void make_sgd_update(struct io *io)
{
    add_in(io, N, 1.0), add_in(io, N, 0.1), add_in(io, N, 1.0);
    add_out(io, N, false), add_out(io, N, false);
}
static enum dt_status run_sgd_update(struct dt_backend *be, void *const *in, void *const *out,
                                     const struct dt_policy *pol)
{
    copy_into(be, out[0], in[0], N), copy_into(be, out[1], in[1], N);
    return dt_sgd_update(be, out[0], out[1], in[2], N, 0.05f, 0.9f, 1e-4f, pol);
}
static const double tol_sgd_update = 0;

static void make_conv2d_forward(struct io *io)
{
    const struct dt_conv2d_shape s = conv_shape(&conv_geom);
    add_in(io, conv_nx(&s), 1.0), add_in(io, conv_nw(&s), 0.3), add_in(io, conv_geom.K_out, 0.1);
    add_out(io, conv_ny(&s), false);
}
static enum dt_status run_conv2d_forward(struct dt_backend *be, void *const *in, void *const *out,
                                         const struct dt_policy *pol)
{
    const struct dt_conv2d_shape s = conv_shape(&conv_geom);
    return dt_conv2d_forward(be, out[0], in[0], in[1], in[2], &s, pol);
}
static const double tol_conv2d_forward = 2e-3;

static void make_conv2d_backward_data(struct io *io)
{
    const struct dt_conv2d_shape s = conv_shape(&conv_geom);
    add_in(io, conv_ny(&s), 1.0), add_in(io, conv_nw(&s), 0.3);
    add_out(io, conv_nx(&s), false);
}
static enum dt_status run_conv2d_backward_data(struct dt_backend *be, void *const *in,
                                               void *const *out, const struct dt_policy *pol)
{
    const struct dt_conv2d_shape s = conv_shape(&conv_geom);
    return dt_conv2d_backward_data(be, out[0], in[0], in[1], &s, pol);
}
static const double tol_conv2d_backward_data = 2e-3;

static void make_conv2d_backward_weight(struct io *io)
{
    const struct dt_conv2d_shape s = conv_shape(&conv_geom);
    add_in(io, conv_nx(&s), 1.0), add_in(io, conv_ny(&s), 1.0);
    add_out(io, conv_nw(&s), false);
}
static enum dt_status run_conv2d_backward_weight(struct dt_backend *be, void *const *in,
                                                 void *const *out, const struct dt_policy *pol)
{
    const struct dt_conv2d_shape s = conv_shape(&conv_geom);
    return dt_conv2d_backward_weight(be, out[0], in[0], in[1], &s, pol);
}
static const double tol_conv2d_backward_weight = 2e-3;

static void make_maxpool2d_forward(struct io *io)
{
    const struct dt_pool2d_shape s = pool_shape(&pool_geom);
    add_in(io, pool_nx(&s), 1.0);
    add_out(io, pool_ny(&s), false), add_out(io, pool_ny(&s), true);
}
static enum dt_status run_maxpool2d_forward(struct dt_backend *be, void *const *in,
                                            void *const *out, const struct dt_policy *pol)
{
    const struct dt_pool2d_shape s = pool_shape(&pool_geom);
    return dt_maxpool2d_forward(be, out[0], out[1], in[0], &s, pol);
}
static const double tol_maxpool2d_forward = 0;

/* The backward needs the forward's y and argmax: both made here, the gradient compared. */
static void make_maxpool2d_backward(struct io *io)
{
    const struct dt_pool2d_shape s = pool_shape(&pool_geom);
    add_in(io, pool_nx(&s), 1.0), add_in(io, pool_ny(&s), 1.0);
    add_out(io, pool_nx(&s), false), add_out(io, pool_ny(&s), false),
        add_out(io, pool_ny(&s), true);
}
static enum dt_status run_maxpool2d_backward(struct dt_backend *be, void *const *in,
                                             void *const *out, const struct dt_policy *pol)
{
    const struct dt_pool2d_shape s = pool_shape(&pool_geom);
    DT_FORWARD_IF_ERROR(dt_maxpool2d_forward(be, out[1], out[2], in[0], &s, pol));
    return dt_maxpool2d_backward(be, out[0], in[1], in[0], out[1], out[2], &s, pol);
}
static const double tol_maxpool2d_backward = 1e-6;

/* Average pooling on the pooling geometry (overlapping windows: the backward is a gather). */
static void make_avgpool2d_forward(struct io *io)
{
    const struct dt_pool2d_shape s = pool_shape(&pool_geom);
    add_in(io, pool_nx(&s), 1.0);
    add_out(io, pool_ny(&s), false);
}
static enum dt_status run_avgpool2d_forward(struct dt_backend *be, void *const *in,
                                            void *const *out, const struct dt_policy *pol)
{
    const struct dt_pool2d_shape s = pool_shape(&pool_geom);
    return dt_avgpool2d_forward(be, out[0], in[0], &s, pol);
}
static const double tol_avgpool2d_forward = 0;

static void make_avgpool2d_backward(struct io *io)
{
    const struct dt_pool2d_shape s = pool_shape(&pool_geom);
    add_in(io, pool_ny(&s), 1.0);
    add_out(io, pool_nx(&s), false);
}
static enum dt_status run_avgpool2d_backward(struct dt_backend *be, void *const *in,
                                             void *const *out, const struct dt_policy *pol)
{
    const struct dt_pool2d_shape s = pool_shape(&pool_geom);
    return dt_avgpool2d_backward(be, out[0], in[0], &s, pol);
}
static const double tol_avgpool2d_backward = 0;

/* Global average pooling: B images of GAP_HW pixels and C channels. */
enum { GAP_HW = 12 };
static void make_global_avgpool_forward(struct io *io)
{
    add_in(io, (int64_t)B * GAP_HW * C, 1.0);
    add_out(io, (int64_t)B * C, false);
}
static enum dt_status run_global_avgpool_forward(struct dt_backend *be, void *const *in,
                                                 void *const *out, const struct dt_policy *pol)
{
    return dt_global_avgpool_forward(be, out[0], in[0], B, GAP_HW, C, pol);
}
static const double tol_global_avgpool_forward = 0;

static void make_global_avgpool_backward(struct io *io)
{
    add_in(io, (int64_t)B * C, 1.0);
    add_out(io, (int64_t)B * GAP_HW * C, false);
}
static enum dt_status run_global_avgpool_backward(struct dt_backend *be, void *const *in,
                                                  void *const *out, const struct dt_policy *pol)
{
    return dt_global_avgpool_backward(be, out[0], in[0], B, GAP_HW, C, pol);
}
static const double tol_global_avgpool_backward = 0;

/* Batch normalisation: BN_ROWS rows (several chunks, a short last one) of C channels; for
 * the running statistics BN_GROUPS groups of B examples BN_PER rows each, 2C apart. */
enum { BN_ROWS = 12 * B + 5, BN_GROUPS = 4, BN_PER = 6 };
static void make_batchnorm_forward(struct io *io)
{
    add_in(io, (int64_t)BN_ROWS * C, 2.0), add_in(io, C, 1.0), add_in(io, C, 1.0);
    add_out(io, (int64_t)BN_ROWS * C, false), add_out(io, C, false), add_out(io, C, false);
}
static enum dt_status run_batchnorm_forward(struct dt_backend *be, void *const *in,
                                            void *const *out, const struct dt_policy *pol)
{
    return dt_batchnorm_forward(be, out[0], out[1], out[2], in[0], in[1], in[2], BN_ROWS, C, 1e-5f,
                                pol);
}
static const double tol_batchnorm_forward = 0;

static void make_batchnorm_backward(struct io *io)
{
    add_in(io, (int64_t)BN_ROWS * C, 1.0), add_in(io, (int64_t)BN_ROWS * C, 2.0);
    add_in(io, C, 0.5), add_positive(io, C, 2.0), add_in(io, C, 1.0);
    add_out(io, (int64_t)BN_ROWS * C, false), add_out(io, (int64_t)BN_ROWS * C, false);
}
static enum dt_status run_batchnorm_backward(struct dt_backend *be, void *const *in,
                                             void *const *out, const struct dt_policy *pol)
{
    return dt_batchnorm_backward(be, out[0], out[1], in[0], in[1], in[2], in[3], in[4], BN_ROWS, C,
                                 1e-5f, pol);
}
static const double tol_batchnorm_backward = 0;

static void make_batchnorm_inference(struct io *io)
{
    add_in(io, (int64_t)BN_ROWS * C, 2.0), add_in(io, C, 0.5), add_positive(io, C, 2.0);
    add_in(io, C, 1.0), add_in(io, C, 1.0);
    add_out(io, (int64_t)BN_ROWS * C, false);
}
static enum dt_status run_batchnorm_inference(struct dt_backend *be, void *const *in,
                                              void *const *out, const struct dt_policy *pol)
{
    return dt_batchnorm_inference(be, out[0], in[0], in[1], in[2], in[3], in[4], BN_ROWS, C, 1e-5f,
                                  pol);
}
static const double tol_batchnorm_inference = 0;

static void make_batchnorm_running(struct io *io)
{
    add_in(io, C, 0.5), add_positive(io, C, 2.0);
    add_in(io, (int64_t)BN_GROUPS * 2 * C, 1.0), add_positive(io, (int64_t)BN_GROUPS * 2 * C, 2.0);
    add_out(io, C, false), add_out(io, C, false);
}
static enum dt_status run_batchnorm_running(struct dt_backend *be, void *const *in,
                                            void *const *out, const struct dt_policy *pol)
{
    copy_into(be, out[0], in[0], C), copy_into(be, out[1], in[1], C);
    const float *mean = in[2], *var = (const float *)in[3] + C;
    return dt_batchnorm_running(be, out[0], out[1], mean, var, BN_GROUPS, 2 * C, C, B, BN_PER, 0.1f,
                                pol);
}
static const double tol_batchnorm_running = 0;

static void make_eps_philox(struct io *io) { add_out(io, N, false); }
static enum dt_status run_eps_philox(struct dt_backend *be, void *const *in, void *const *out,
                                     const struct dt_policy *pol)
{
    const struct dt_philox_stream s = dt_philox_stream_make(0x5eed, 7, 3, 2, 1);
    return dt_eps_philox(be, out[0], N, &s, pol);
}
static const double tol_eps_philox = 1e-6;

/* The lanes seeded: every lane's state; then one forward walk: the draws and the states. */
enum { LANES = 8 };
static void make_eps_lfsr_seed(struct io *io)
{
    add_out(io, LANES * (int64_t)(sizeof(struct dt_xoro) / 4), true);
}
static enum dt_status run_eps_lfsr_seed(struct dt_backend *be, void *const *in, void *const *out,
                                        const struct dt_policy *pol)
{
    return dt_eps_lfsr_seed(be, out[0], LANES, 0x5eed, 7, 2, 1, pol);
}
static const double tol_eps_lfsr_seed = 0;
static void make_eps_lfsr(struct io *io)
{
    add_out(io, N, false);
    add_out(io, LANES * (int64_t)(sizeof(struct dt_xoro) / 4), true);
}
static enum dt_status run_eps_lfsr(struct dt_backend *be, void *const *in, void *const *out,
                                   const struct dt_policy *pol)
{
    struct dt_xoro *lanes = out[1];
    DT_FORWARD_IF_ERROR(dt_eps_lfsr_seed(be, lanes, LANES, 0x5eed, 7, 2, 1, pol));
    return dt_eps_lfsr(be, out[0], N, lanes, LANES, false, -1, pol);
}
static const double tol_eps_lfsr = 1e-6;

static void make_bnn_sigma(struct io *io)
{
    add_in(io, N, 4.0);
    add_out(io, N, false), add_out(io, N, false);
}
static enum dt_status run_bnn_sigma(struct dt_backend *be, void *const *in, void *const *out,
                                    const struct dt_policy *pol)
{
    return dt_bnn_sigma(be, out[0], out[1], in[0], N, pol);
}
static const double tol_bnn_sigma = 1e-6;

static void make_bnn_sample(struct io *io)
{
    add_in(io, N, 1.0), add_in(io, N, 0.1), add_in(io, N, 2.0);
    add_out(io, N, false);
}
static enum dt_status run_bnn_sample(struct dt_backend *be, void *const *in, void *const *out,
                                     const struct dt_policy *pol)
{
    return dt_bnn_sample(be, out[0], in[0], in[1], in[2], N, pol);
}
static const double tol_bnn_sample = 0;

static void make_bnn_accumulate(struct io *io)
{
    add_in(io, N, 1.0), add_in(io, N, 2.0), add_in(io, N, 0.5);
    add_out(io, N, false), add_out(io, N, false);
}
static enum dt_status run_bnn_accumulate(struct dt_backend *be, void *const *in, void *const *out,
                                         const struct dt_policy *pol)
{
    DT_FORWARD_IF_ERROR(
        dt_bnn_accumulate(be, out[0], out[1], in[0], in[1], in[2], N, true, pol)); /* first */
    return dt_bnn_accumulate(be, out[0], out[1], in[1], in[0], in[2], N, false, pol);
}
static const double tol_bnn_accumulate = 1e-6;

static void make_square(struct io *io)
{
    add_in(io, N, 3.0);
    add_out(io, N, false);
}
static enum dt_status run_square(struct dt_backend *be, void *const *in, void *const *out,
                                 const struct dt_policy *pol)
{
    return dt_square(be, out[0], in[0], N, pol);
}
static const double tol_square = 0;

/* The local estimator's layers: (LOCAL_ROWS, N / LOCAL_ROWS) from global row 5, and one row
 * of N columns (two of the CPU's noise tiles). */
enum { LOCAL_ROWS = 40 }; /* 25 columns: odd, so a lane's last pair is half used */
static struct dt_noise_site local_site(enum dt_noise_mode mode)
{
    return (struct dt_noise_site){
        .mode = mode, .stream = dt_noise_stream(0x5eed, 7, 2, 1, 3), .row0 = 5};
}

/* philox over (40, 25) into out[0], out[1]; lfsr over one row of N into out[2] (y; sd again
 * into out[1]) and out[3] (the noise). */
static void make_bnn_local_forward(struct io *io)
{
    add_in(io, N, 1.0), add_positive(io, N, 2.0);
    add_out(io, N, false), add_out(io, N, false), add_out(io, N, false), add_out(io, N, false);
}
static enum dt_status run_bnn_local_forward(struct dt_backend *be, void *const *in,
                                            void *const *out, const struct dt_policy *pol)
{
    struct dt_noise_site s = local_site(DT_NOISE_PHILOX);
    DT_FORWARD_IF_ERROR(dt_bnn_local_forward(be, out[0], out[1], NULL, NULL, in[0], in[1],
                                             LOCAL_ROWS, N / LOCAL_ROWS, &s, pol));
    struct dt_xoro *lane = dt_backend_alloc(be, sizeof *lane);
    s.mode = DT_NOISE_LFSR;
    enum dt_status st =
        dt_dropout_seed(be, lane, 1, (int64_t)dt_noise_lane_row(3, 5), 0x5eed, 7, 1, pol);
    if (st == DT_OK)
        st = dt_bnn_local_forward(be, out[2], out[1], out[3], lane, in[0], in[1], 1, N, &s, pol);
    dt_backend_free(be, lane);
    return st;
}
static const double tol_bnn_local_forward = 0;

/* philox into out[0], stored (eps_in) into out[1]; lfsr over (40, 25): the lanes seeded and
 * walked forwards by the forward op, then back here into out[2] (t), out[3] (the noise) and
 * out[4] (the lanes, back at their seeds). sd has zeros. */
static void make_bnn_local_backward(struct io *io)
{
    add_in(io, N, 1.0), add_positive(io, N, 2.0), add_in(io, N, 1.0), add_in(io, N, 1.0);
    for (int64_t i = 0; i < N; i += 37) io->in[1][i] = 0.0f;
    add_out(io, N, false), add_out(io, N, false), add_out(io, N, false), add_out(io, N, false);
    add_out(io, LOCAL_ROWS * (int64_t)(sizeof(struct dt_xoro) / 4), true);
}
static enum dt_status run_bnn_local_backward(struct dt_backend *be, void *const *in,
                                             void *const *out, const struct dt_policy *pol)
{
    const int64_t W = N / LOCAL_ROWS;
    struct dt_noise_site s = local_site(DT_NOISE_PHILOX);
    DT_FORWARD_IF_ERROR(
        dt_bnn_local_backward(be, out[0], NULL, NULL, NULL, in[0], in[1], LOCAL_ROWS, W, &s, pol));
    s.mode = DT_NOISE_STORED;
    DT_FORWARD_IF_ERROR(
        dt_bnn_local_backward(be, out[1], NULL, NULL, in[2], in[0], in[1], LOCAL_ROWS, W, &s, pol));
    struct dt_xoro *lanes = out[4];
    s.mode = DT_NOISE_LFSR;
    DT_FORWARD_IF_ERROR(dt_dropout_seed(be, lanes, LOCAL_ROWS, (int64_t)dt_noise_lane_row(3, 5),
                                        0x5eed, 7, 1, pol));
    float *y = dt_backend_alloc(be, N * sizeof(float)),
          *sd = dt_backend_alloc(be, N * sizeof(float));
    enum dt_status st =
        dt_bnn_local_forward(be, y, sd, NULL, lanes, in[3], in[1], LOCAL_ROWS, W, &s, pol);
    dt_backend_free(be, y);
    dt_backend_free(be, sd);
    DT_FORWARD_IF_ERROR(st);
    return dt_bnn_local_backward(be, out[2], out[3], lanes, NULL, in[0], in[1], LOCAL_ROWS, W, &s,
                                 pol);
}
static const double tol_bnn_local_backward = 0;

static void make_bnn_local_input_grad(struct io *io)
{
    add_in(io, N, 1.0), add_in(io, N, 2.0), add_in(io, N, 0.5);
    add_out(io, N, false);
}
static enum dt_status run_bnn_local_input_grad(struct dt_backend *be, void *const *in,
                                               void *const *out, const struct dt_policy *pol)
{
    return dt_bnn_local_input_grad(be, out[0], in[0], in[1], in[2], N, pol);
}
static const double tol_bnn_local_input_grad = 0;

static void make_bnn_local_scale(struct io *io)
{
    add_in(io, N, 1.0), add_positive(io, N, 0.1), add_in(io, N, 0.5);
    add_out(io, N, false);
}
static enum dt_status run_bnn_local_scale(struct dt_backend *be, void *const *in, void *const *out,
                                          const struct dt_policy *pol)
{
    copy_into(be, out[0], in[0], N);
    return dt_bnn_local_scale(be, out[0], in[1], in[2], N, pol);
}
static const double tol_bnn_local_scale = 0;

static void make_bnn_finish(struct io *io)
{
    add_in(io, N, 1.0), add_in(io, N, 1.0), add_in(io, N, 1.0), add_in(io, N, 0.1);
    add_in(io, N, 0.5);
    add_out(io, N, false), add_out(io, N, false);
}
static enum dt_status run_bnn_finish(struct dt_backend *be, void *const *in, void *const *out,
                                     const struct dt_policy *pol)
{
    copy_into(be, out[0], in[0], N), copy_into(be, out[1], in[1], N);
    return dt_bnn_finish(be, out[0], out[1], in[2], in[3], in[4], N, 0.5f, 1e-3f, 1.0f, pol);
}
static const double tol_bnn_finish = 1e-6;

/* reduction: exact: the exact sum of S shard partials of two tensors (sums in place). */
enum { XS = 4, XN0 = 300, XN1 = 37 };
static const int64_t xn[2] = {XN0, XN1}, xfirst[3] = {0, XN0, XN0 + XN1};
static void make_exact_sum(struct io *io)
{
    add_in(io, XS * (XN0 + XN1), 1.0);
    add_out(io, XS * (XN0 + XN1), false);
}
static enum dt_status run_exact_sum(struct dt_backend *be, void *const *in, void *const *out,
                                    const struct dt_policy *pol)
{
    const struct dt_exact_layout L = {
        .tensors = 2, .n = xn, .first = xfirst, .slots = XS, .shards = XS};
    copy_into(be, out[0], in[0], XS * (XN0 + XN1));
    uint32_t *mb = dt_backend_alloc(be, 2 * sizeof *mb);
    enum dt_status st = dt_exact_sum(be, out[0], mb, &L);
    dt_backend_free(be, mb);
    return st;
}
static const double tol_exact_sum = 1e-6;

/* ---- the transformer's ops (nets/gpt_elem.h) ---- */
enum { GB = 3, GT = 6, GH = 2, GD = 8, GR = GB * GT, GV = 256 };

/* n int32 values in [0, classes) in the 4 bytes of floats (tokens) */
static void add_ints(struct io *io, int64_t n, int32_t classes) { add_labels(io, n, classes); }

static void make_embedding_forward(struct io *io)
{
    add_in(io, GB * (GT + 1), 1.0);
    for (int64_t i = 0; i < GB * (GT + 1); i++) io->in[0][i] = (float)((i * 53 + 7) % GV);
    add_in(io, GV * GD, 0.3), add_in(io, GT * GD, 0.3);
    add_out(io, GR * GD, false), add_out(io, GR, true), add_out(io, GR, true);
}
static enum dt_status run_embedding_forward(struct dt_backend *be, void *const *in,
                                            void *const *out, const struct dt_policy *pol)
{
    return dt_embedding_forward(be, out[0], out[1], out[2], in[0], in[1], in[2], GB, GT, GD, pol);
}
static const double tol_embedding_forward = 0;

static void make_embedding_backward(struct io *io)
{
    add_in(io, 40 * GR * GD, 1.0), add_ints(io, 40 * GR, 17); /* 17 tokens: many rows each */
    add_out(io, GV * GD, false);
}
static enum dt_status run_embedding_backward(struct dt_backend *be, void *const *in,
                                             void *const *out, const struct dt_policy *pol)
{
    return dt_embedding_backward(be, out[0], in[0], in[1], 40 * GR, GV, GD, false, pol);
}
static const double tol_embedding_backward = 1e-5;

static void make_layernorm_forward(struct io *io)
{
    add_in(io, GR * GD, 2.0), add_in(io, GD, 1.0), add_in(io, GD, 1.0);
    add_out(io, GR * GD, false), add_out(io, GR, false), add_out(io, GR, false);
}
static enum dt_status run_layernorm_forward(struct dt_backend *be, void *const *in,
                                            void *const *out, const struct dt_policy *pol)
{
    return dt_layernorm_forward(be, out[0], out[1], out[2], in[0], in[1], in[2], GR, GD, pol);
}
static const double tol_layernorm_forward = 0;

static void make_layernorm_backward(struct io *io)
{
    add_in(io, GR * GD, 1.0), add_in(io, GR * GD, 2.0), add_in(io, GR, 0.5);
    add_positive(io, GR, 2.0), add_in(io, GD, 1.0);
    add_out(io, GR * GD, false), add_out(io, GR * GD, false);
}
static enum dt_status run_layernorm_backward(struct dt_backend *be, void *const *in,
                                             void *const *out, const struct dt_policy *pol)
{
    return dt_layernorm_backward(be, out[0], out[1], in[0], in[1], in[2], in[3], in[4], GR, GD,
                                 false, pol);
}
static const double tol_layernorm_backward = 0;

static void make_attention_forward(struct io *io)
{
    add_in(io, GR * 3 * GD, 1.5);
    add_out(io, GR * GD, false), add_out(io, GB * GH * GT * GT, false);
}
static enum dt_status run_attention_forward(struct dt_backend *be, void *const *in,
                                            void *const *out, const struct dt_policy *pol)
{
    return dt_attention_forward(be, out[0], out[1], in[0], GB, GT, GH, GD, pol);
}
static const double tol_attention_forward =
    2e-3; /* cuBLAS (TF32 at fast) outside portable, as dense */

/* The weights as the forward leaves them: causal, zeros beyond each row's query (a library
 * path's dV = P^T dout reads the whole block). */
static void make_attention_backward(struct io *io)
{
    add_in(io, GR * GD, 1.0), add_positive(io, GB * GH * GT * GT, 0.5),
        add_in(io, GR * 3 * GD, 1.5);
    for (int64_t i = 0; i < GB * GH * GT * GT; i++)
        if (i % GT > (i / GT) % GT) io->in[1][i] = 0.0f;
    add_out(io, GR * 3 * GD, false), add_out(io, GB * GH * GT * GT, false);
}
static enum dt_status run_attention_backward(struct dt_backend *be, void *const *in,
                                             void *const *out, const struct dt_policy *pol)
{
    return dt_attention_backward(be, out[0], out[1], in[0], in[1], in[2], GB, GT, GH, GD, pol);
}
static const double tol_attention_backward = 2e-3;

static void make_gelu_forward(struct io *io)
{
    add_in(io, N, 5.0);
    add_out(io, N, false);
}
static enum dt_status run_gelu_forward(struct dt_backend *be, void *const *in, void *const *out,
                                       const struct dt_policy *pol)
{
    return dt_gelu_forward(be, out[0], in[0], N, pol);
}
static const double tol_gelu_forward = 1e-6;

static void make_gelu_backward(struct io *io)
{
    add_in(io, N, 1.0), add_in(io, N, 5.0);
    add_out(io, N, false);
}
static enum dt_status run_gelu_backward(struct dt_backend *be, void *const *in, void *const *out,
                                        const struct dt_policy *pol)
{
    return dt_gelu_backward(be, out[0], in[0], in[1], N, pol);
}
static const double tol_gelu_backward = 1e-6;

static void make_add(struct io *io)
{
    add_in(io, N, 1.0), add_in(io, N, 1.0);
    add_out(io, N, false);
}
static enum dt_status run_add(struct dt_backend *be, void *const *in, void *const *out,
                              const struct dt_policy *pol)
{
    copy_into(be, out[0], in[0], N);
    return dt_add(be, out[0], in[1], N, pol);
}
static const double tol_add = 0;

static void make_adamw_update(struct io *io)
{
    add_in(io, N, 1.0), add_in(io, N, 0.1), add_positive(io, N, 0.01), add_in(io, N, 1.0);
    add_out(io, N, false), add_out(io, N, false), add_out(io, N, false);
}
static enum dt_status run_adamw_update(struct dt_backend *be, void *const *in, void *const *out,
                                       const struct dt_policy *pol)
{
    const struct dt_adamw_step s = {.lr = 1e-3f,
                                    .beta1 = 0.9f,
                                    .beta2 = 0.999f,
                                    .eps = 1e-8f,
                                    .weight_decay = 0.01f,
                                    .bc1 = 0.19f,
                                    .bc2 = 0.002f};
    copy_into(be, out[0], in[0], N), copy_into(be, out[1], in[1], N);
    copy_into(be, out[2], in[2], N);
    return dt_adamw_update(be, out[0], out[1], out[2], in[3], N, &s, pol);
}
static const double tol_adamw_update = 0;

static void make_grad_norm(struct io *io)
{
    add_in(io, N, 1.0), add_in(io, 37, 3.0);
    add_out(io, 1, false);
}
static enum dt_status run_grad_norm(struct dt_backend *be, void *const *in, void *const *out,
                                    const struct dt_policy *pol)
{
    const float *g[2] = {in[0], in[1]};
    const int64_t n[2] = {N, 37};
    return dt_grad_norm(be, out[0], g, n, 2, pol);
}
static const double tol_grad_norm = 1e-5;

static void make_clip_scale(struct io *io)
{
    add_in(io, N, 1.0), add_positive(io, 1, 3e4);
    add_out(io, N, false);
}
static enum dt_status run_clip_scale(struct dt_backend *be, void *const *in, void *const *out,
                                     const struct dt_policy *pol)
{
    copy_into(be, out[0], in[0], N);
    return dt_clip_scale(be, out[0], N, in[1], 1.5f, pol);
}
static const double tol_clip_scale = 0;

/* Dropout over (DROP_ROWS, N / DROP_ROWS), rows from global row 5: philox into out[0],
 * keep bytes (rng: stored, the lanes' forward walk) then their replay into out[1], an lfsr
 * forward walk into out[2] and the walk back over out[2] into out[3] (the same mask twice)
 * with its lanes. */
enum { DROP_ROWS = 40 }; /* 25 columns: odd, so the lanes' last pair is half used */
static void make_dropout(struct io *io)
{
    add_in(io, N, 1.0);
    add_out(io, N, false), add_out(io, N, false), add_out(io, N, false), add_out(io, N, false);
    add_out(io, DROP_ROWS * (int64_t)(sizeof(struct dt_xoro) / 4), true);
}
static enum dt_status run_dropout(struct dt_backend *be, void *const *in, void *const *out,
                                  const struct dt_policy *pol)
{
    const int64_t W = N / DROP_ROWS;
    struct dt_dropout_site s = {.mode = DT_DROPOUT_PHILOX,
                                .stream = dt_dropout_stream(0x5eed, 7, 3, 1),
                                .row0 = 5,
                                .threshold = 0x40000000u,
                                .scale = 4.0f / 3.0f};
    DT_FORWARD_IF_ERROR(dt_dropout(be, out[0], in[0], NULL, NULL, DROP_ROWS, W, &s, pol));
    struct dt_xoro *lanes = out[4];
    DT_FORWARD_IF_ERROR(dt_dropout_seed(be, lanes, DROP_ROWS, 5, 0x5eed, 7, 1, pol));
    uint8_t *keep = dt_backend_alloc(be, (size_t)N);
    s.mode = DT_DROPOUT_KEEP;
    enum dt_status st = dt_dropout(be, out[1], in[0], keep, lanes, DROP_ROWS, W, &s, pol);
    s.mode = DT_DROPOUT_STORED;
    if (st == DT_OK) st = dt_dropout(be, out[1], out[1], keep, NULL, DROP_ROWS, W, &s, pol);
    dt_backend_free(be, keep);
    DT_FORWARD_IF_ERROR(st);
    DT_FORWARD_IF_ERROR(dt_dropout_seed(be, lanes, DROP_ROWS, 5, 0x5eed, 7, 1, pol));
    s.mode = DT_DROPOUT_LFSR_FORWARD;
    DT_FORWARD_IF_ERROR(dt_dropout(be, out[2], in[0], NULL, lanes, DROP_ROWS, W, &s, pol));
    s.mode = DT_DROPOUT_LFSR_BACKWARD;
    return dt_dropout(be, out[3], out[2], NULL, lanes, DROP_ROWS, W, &s, pol);
}
static const double tol_dropout = 0;

static void make_dropout_seed(struct io *io)
{
    add_out(io, DROP_ROWS * (int64_t)(sizeof(struct dt_xoro) / 4), true);
}
static enum dt_status run_dropout_seed(struct dt_backend *be, void *const *in, void *const *out,
                                       const struct dt_policy *pol)
{
    return dt_dropout_seed(be, out[0], DROP_ROWS, 3, 0x5eed, 7, 2, pol);
}
static const double tol_dropout_seed = 0;

/* The tree digests of three tensors: one value, one partial leaf short of a thousand values,
 * three leaves (tolerance 0: the bytes). */
static void make_tensor_digests(struct io *io)
{
    add_in(io, 1, 1.0), add_in(io, N, 1.0), add_in(io, 3000, 1.0);
    add_out(io, 3 * 8, true);
}
static enum dt_status run_tensor_digests(struct dt_backend *be, void *const *in, void *const *out,
                                         const struct dt_policy *pol)
{
    const float *ts[3] = {in[0], in[1], in[2]};
    const int64_t counts[3] = {1, N, 3000};
    return dt_tensor_digests(be, out[0], ts, counts, 3, pol);
}
static const double tol_tensor_digests = 0;

/* The exact product in its weight-gradient form (A stored transposed, two levels, a bias):
 * no level changes its bits (tolerance 0: bitwise at every level); tests/test_xp checks
 * every form against the integer reference. */
static void make_matmul_exact(struct io *io)
{
    add_in(io, B * IN, 1.0), add_in(io, B * OUT, 0.3), add_in(io, OUT, 0.1);
    add_out(io, IN * OUT, false);
}
static enum dt_status run_matmul_exact(struct dt_backend *be, void *const *in, void *const *out,
                                       const struct dt_policy *pol)
{
    return dt_matmul_exact(be, out[0], in[0], in[1], in[2], IN, B, OUT, DT_XP_TA, 2, pol);
}
static const double tol_matmul_exact = 0;

/* One row per op of nets/op_list.h, generated: an op without its make_, run_ and tol_ here
 * does not compile. */
#define ROW(ENUM, name, ...) {#name, make_##name, run_##name, tol_##name},
static const struct op_row ops[] = {DT_OP_LIST(ROW)};
#undef ROW
#define N_OPS ((int)(sizeof ops / sizeof ops[0]))

/* ---- the backends and the comparison -------------------------------------------------- */

struct backend_row {
    const char *name;
    enum dt_backend_kind kind;
    int threads;
};
static const struct backend_row cpu_backends[] = {
    {"cpu x1", DT_BACKEND_CPU, 1}, {"cpu x2", DT_BACKEND_CPU, 2}, {"cpu x3", DT_BACKEND_CPU, 3}};
static const struct backend_row cuda_backend = {"cuda", DT_BACKEND_CUDA, 1};

/* One op on one backend under one policy: its outputs on the host (*outs[i], caller frees). */
static enum dt_status run_on(struct dt_backend *be, const struct op_row *op, const struct io *io,
                             const struct dt_policy *pol, float **outs)
{
    void *in[MAX_T], *out[MAX_T];
    for (int i = 0; i < io->n_in; i++) in[i] = dev_from(be, io->in[i], (size_t)io->in_n[i] * 4);
    for (int i = 0; i < io->n_out; i++) out[i] = dt_backend_alloc(be, (size_t)io->out_n[i] * 4);
    const enum dt_status st = op->run(be, in, out, pol);
    dt_backend_synchronize(be);
    for (int i = 0; i < io->n_out; i++) {
        outs[i] = host(io->out_n[i]);
        dt_backend_download(be, outs[i], out[i], (size_t)io->out_n[i] * 4);
        dt_backend_free(be, out[i]);
    }
    for (int i = 0; i < io->n_in; i++) dt_backend_free(be, in[i]);
    return st;
}

/* Bitwise equal? Else, with tol >= 0, within tol of the reference's largest |value|
 * (integers: equal). Returns false and says where when not. */
static bool agree(const char *what, const float *got, const float *ref, int64_t n, bool is_int,
                  double tol)
{
    if (memcmp(got, ref, (size_t)n * 4) == 0) return true;
    if (tol < 0 || is_int) {
        for (int64_t i = 0; i < n; i++)
            if (memcmp(&got[i], &ref[i], 4) != 0) {
                fprintf(stderr, "%s: element %lld differs in its bits (%.9g vs %.9g)\n", what,
                        (long long)i, (double)got[i], (double)ref[i]);
                break;
            }
        return false;
    }
    double scale = 0;
    for (int64_t i = 0; i < n; i++) scale = fmax(scale, fabs((double)ref[i]));
    for (int64_t i = 0; i < n; i++) {
        const double d = fabs((double)got[i] - (double)ref[i]);
        if (!(d <= tol * scale)) {
            fprintf(stderr, "%s: element %lld: %.9g vs %.9g, beyond %.1g of %.3g\n", what,
                    (long long)i, (double)got[i], (double)ref[i], tol, scale);
            return false;
        }
    }
    return true;
}

/* The op's inputs (io) and its reference outputs: the CPU on one thread at portable. */
static void reference(const struct op_row *op, struct io *io, float **ref)
{
    struct dt_policy portable;
    dt_policy_from_level(&portable, DT_LEVEL_PORTABLE);
    memset(io, 0, sizeof *io);
    op->make(io);
    struct dt_backend *be = cpu(1);
    CHECK_INT_EQ(run_on(be, op, io, &portable, ref), DT_OK);
    dt_backend_destroy(be);
}

/* The table over `backends` (the first is the reference's kind, one thread). Returns the
 * number of (op, level, backend) cells checked. */
static int check_table(const struct backend_row *const *backends, int n_backends)
{
    int cells = 0;
    for (int o = 0; o < N_OPS; o++) {
        const struct op_row *op = &ops[o];
        struct io io;
        float *ref[MAX_T];
        reference(op, &io, ref);
        for (int b = 0; b < n_backends; b++) {
            struct dt_backend *be = NULL;
            struct dt_backend_options bo = {backends[b]->kind, backends[b]->threads, 0};
            struct dt_error err;
            DT_ASSERT(dt_backend_create(&be, &bo, &err) == DT_OK);
            for (int lv = 0; lv < DT_LEVEL_COUNT; lv++) {
                struct dt_policy pol;
                dt_policy_from_level(&pol, (enum dt_level)lv);
                float *got[MAX_T], *again[MAX_T];
                CHECK_INT_EQ(run_on(be, op, &io, &pol, got), DT_OK);
                CHECK_INT_EQ(run_on(be, op, &io, &pol, again), DT_OK);
                const bool same_everywhere = lv == DT_LEVEL_PORTABLE;
                const bool same_again = lv != DT_LEVEL_FAST;
                for (int i = 0; i < io.n_out; i++) {
                    char what[160];
                    snprintf(what, sizeof what, "%s output %d, %s, %s", op->name, i,
                             backends[b]->name, pol.name);
                    CHECK(agree(what, got[i], ref[i], io.out_n[i], io.out_int[i],
                                same_everywhere ? -1.0 : op->tol));
                    if (same_again) {
                        snprintf(what, sizeof what, "%s output %d, %s, %s, run again", op->name, i,
                                 backends[b]->name, pol.name);
                        CHECK(agree(what, again[i], got[i], io.out_n[i], io.out_int[i], -1.0));
                    }
                    free(got[i]), free(again[i]);
                }
                cells++;
            }
            dt_backend_destroy(be);
        }
        for (int i = 0; i < io.n_out; i++) free(ref[i]);
        for (int i = 0; i < io.n_in; i++) free(io.in[i]);
    }
    return cells;
}

/* A row's controls are the only ones that may change its bits (nets/op_list.h): every
 * other control, at each of its values, gives portable's bits on the CPU at 2 threads --
 * with the forced-order hook set, so an unordered sum or a float scatter would show a
 * different order here on any machine. An op that obeys a control its row does not list
 * fails (shown by the negative control: bias_backward under `atomics: float`). */
static const char *const controls[][5] = {{"reduction", "unordered", "fixed", "exact", "pinned"},
                                          {"atomics", "float", "fixed_point", NULL, NULL},
                                          {"math", "fast", "strict", "portable", NULL},
                                          {"conv_algo", "autotune", "deterministic", "own", NULL}};

/* Does `op` under portable with control c set to value v give portable's bits? */
static bool same_as_portable(const struct op_row *op, const struct io *io, float *const *ref,
                             const char *control, const char *value)
{
    struct dt_policy pol;
    dt_policy_from_level(&pol, DT_LEVEL_PORTABLE);
    DT_ASSERT(dt_policy_set_control(&pol, control, value, NULL) == DT_OK);
    struct dt_backend *be = cpu(2);
    DT_ASSERT(dt_backend_set_forced_order(be, 0x5eed) == DT_OK);
    float *got[MAX_T];
    CHECK_INT_EQ(run_on(be, op, io, &pol, got), DT_OK);
    bool same = true;
    for (int i = 0; i < io->n_out; i++) {
        same &= memcmp(got[i], ref[i], (size_t)io->out_n[i] * 4) == 0;
        free(got[i]);
    }
    dt_backend_destroy(be);
    return same;
}

DT_TEST(controls_not_listed_change_nothing)
{
    for (int o = 0; o < N_OPS; o++) {
        const struct op_row *op = &ops[o];
        struct io io;
        float *ref[MAX_T];
        reference(op, &io, ref);
        for (size_t c = 0; c < sizeof controls / sizeof controls[0]; c++) {
            const bool listed = dt_op_obeys((enum dt_op)o, controls[c][0]);
            for (int v = 1; v < 5 && controls[c][v]; v++) {
                const bool same = same_as_portable(op, &io, ref, controls[c][0], controls[c][v]);
                if (!same && !listed)
                    fprintf(stderr, "%s: %s=%s changes its bits, but its row does not list %s\n",
                            op->name, controls[c][0], controls[c][v], controls[c][0]);
                CHECK(same || listed);
                if (o == DT_OP_BIAS_BACKWARD && !strcmp(controls[c][v], "float"))
                    CHECK(!same); /* the negative control: the test sees an order change */
            }
        }
        for (int i = 0; i < io.n_out; i++) free(ref[i]);
        for (int i = 0; i < io.n_in; i++) free(io.in[i]);
    }
}

/* The CPU at 1, 2 and 3 threads. */
DT_TEST(cpu_table)
{
    const struct backend_row *b[] = {&cpu_backends[0], &cpu_backends[1], &cpu_backends[2]};
    CHECK_INT_EQ(check_table(b, 3), N_OPS * 3 * DT_LEVEL_COUNT);
}

/* The CPU's kernel paths (nets/cpu/cpu.h): every op on the AVX-512 path (the hand-written
 * wide kernels and the loops' AVX-512 copies) and on the AVX2 path (what DETRAIN_CPU_ISA=avx2
 * and an AVX2 machine run) gives the same bits at every level but those whose products are
 * the libraries' (math: fast: fast and run_to_run), which take different kernels by design
 * (within the row's tolerance). The switch is real: the
 * loops' instruction set follows it (dt_cpu_loops). Skipped where the CPU has one path. */
DT_TEST(cpu_kernel_paths_table)
{
    if (!dt_cpu_set_wide(true)) DT_SKIP("no AVX-512 path here (or DETRAIN_CPU_ISA=avx2): one path");
    CHECK_INT_EQ(dt_cpu_loops(), 2);
    CHECK_STR_EQ(dt_cpu_kernels(), "avx512");
    dt_cpu_set_wide(false);
    CHECK_INT_EQ(dt_cpu_loops(), 1);
    CHECK_STR_EQ(dt_cpu_kernels(), "avx2");
    int cells = 0;
    for (int o = 0; o < N_OPS; o++) {
        const struct op_row *op = &ops[o];
        struct io io;
        float *ref[MAX_T];
        dt_cpu_set_wide(true);
        reference(op, &io, ref);
        for (int lv = 0; lv < DT_LEVEL_COUNT; lv++) {
            struct dt_policy pol;
            dt_policy_from_level(&pol, (enum dt_level)lv);
            float *wide[MAX_T], *narrow[MAX_T];
            dt_cpu_set_wide(true);
            struct dt_backend *be = cpu(2);
            CHECK_INT_EQ(run_on(be, op, &io, &pol, wide), DT_OK);
            dt_backend_destroy(be);
            dt_cpu_set_wide(false);
            be = cpu(2);
            CHECK_INT_EQ(run_on(be, op, &io, &pol, narrow), DT_OK);
            dt_backend_destroy(be);
            for (int i = 0; i < io.n_out; i++) {
                char what[160];
                snprintf(what, sizeof what, "%s output %d, %s, AVX2 path against AVX-512", op->name,
                         i, pol.name);
                CHECK(agree(what, narrow[i], wide[i], io.out_n[i], io.out_int[i],
                            dt_math_fast(&pol) ? op->tol : -1.0));
                free(wide[i]), free(narrow[i]);
            }
            cells++;
        }
        for (int i = 0; i < io.n_out; i++) free(ref[i]);
        for (int i = 0; i < io.n_in; i++) free(io.in[i]);
    }
    dt_cpu_set_wide(true);
    CHECK_INT_EQ(cells, N_OPS * DT_LEVEL_COUNT);
}

/* The comparison can fail: one ulp in one element breaks the bitwise promise, and a
 * difference beyond the tolerance breaks the tolerance. */
DT_TEST(comparison_can_fail)
{
    float ref[4] = {1.0f, -2.0f, 3.0f, 0.5f}, got[4];
    memcpy(got, ref, sizeof got);
    CHECK(agree("same", got, ref, 4, false, -1.0));
    got[2] = nextafterf(got[2], 4.0f);
    CHECK(!agree("one ulp (expected to differ)", got, ref, 4, false, -1.0));
    CHECK(agree("one ulp within 1e-6", got, ref, 4, false, 1e-6));
    got[2] = 3.01f;
    CHECK(!agree("beyond 1e-3 (expected to differ)", got, ref, 4, false, 1e-3));
}

/* The GPU: the CUDA backend against the CPU reference, the CPU rows beside it. */
DT_TEST(gpu_table)
{
    struct dt_backend *g = NULL;
    struct dt_backend_options bo = {DT_BACKEND_CUDA, 1, 0};
    struct dt_error err;
    if (dt_backend_create(&g, &bo, &err) != DT_OK) DT_SKIP_NO_GPU(err.msg);
    const char *missing = dt_backend_missing_op(g);
    dt_backend_destroy(g);
    CHECK(missing == NULL);
    const struct backend_row *b[] = {&cpu_backends[0], &cuda_backend};
    CHECK_INT_EQ(check_table(b, 2), N_OPS * 2 * DT_LEVEL_COUNT);
}

/* The op row carries what explain says of an op (nets/op_list.h): its phase and
 * its outputs' names, k past the last taking the last -- the same words explain's own
 * switches gave before they became the row. */
DT_TEST(op_rows_carry_explain_metadata)
{
    for (int op = 0; op < DT_OP_COUNT; op++) {
        const char *ph = dt_op_phase((enum dt_op)op);
        CHECK(!strcmp(ph, "forward") || !strcmp(ph, "backward") || !strcmp(ph, "update"));
        char name[64];
        dt_op_output_name(name, sizeof name, (enum dt_op)op, 0);
        CHECK(name[0] != '\0' && strchr(name, '|') == NULL);
    }
    CHECK_STR_EQ(dt_op_phase(DT_OP_SGD_UPDATE), "update");
    CHECK_STR_EQ(dt_op_phase(DT_OP_EXACT_SUM), "backward");
    CHECK_STR_EQ(dt_op_phase(DT_OP_DROPOUT), "forward");
    char name[64];
    dt_op_output_name(name, sizeof name, DT_OP_LAYERNORM_FORWARD, 2);
    CHECK_STR_EQ(name, "rstd");
    dt_op_output_name(name, sizeof name, DT_OP_MAXPOOL2D_FORWARD, 5);
    CHECK_STR_EQ(name, "pool argmax");
    dt_op_output_name(name, sizeof name, DT_OP_EMBEDDING_FORWARD, 1);
    CHECK_STR_EQ(name, "tokens");
    dt_op_output_name(name, sizeof name, DT_OP_DENSE_BACKWARD_DATA, 3);
    CHECK_STR_EQ(name, "input gradient");
}

DT_TEST_MAIN(DT_CASE(controls_not_listed_change_nothing), DT_CASE(op_rows_carry_explain_metadata),
             DT_CASE(cpu_table), DT_CASE(cpu_kernel_paths_table), DT_CASE(comparison_can_fail),
             DT_CASE(gpu_table))
