/* cuDNN convolutions and max-pool backward for `conv_algo: autotune | deterministic` on
 * the CUDA backend (nets/cuda/conv.cu dispatches here). Data path (docs/DESIGN.md):
 * nets/backend -> nets/cuda/conv.cu -> here -> cuDNN's legacy convolution API, NHWC tensors.
 *
 *   autotune       what a framework does by default with benchmarking on: cudnnFind* times
 *                  every algorithm for the shape and the fastest that ran is used, whatever
 *                  its determinism, with the math mode it was timed in. Timing decides, so
 *                  two runs may choose differently. Max-pool backward: CUDNN_POOLING_MAX.
 *   deterministic  cudnnGet*_v7's heuristic list (no timing), the first algorithm with
 *                  status SUCCESS that cuDNN reports CUDNN_DETERMINISTIC, in the math
 *                  asked for, and whose workspace size query succeeds. Max-pool
 *                  backward: CUDNN_POOLING_MAX_DETERMINISTIC.
 * The math is the `math` control's: FP32 (CUDNN_FMA_MATH) unless `math: tf32`, which allows
 * TF32 tensor ops (CUDNN_DEFAULT_MATH; never a conversion to FP16).
 * No algorithm for a shape (none deterministic in FP32, or none that ran): detrain's own
 * kernels for that op and shape (conv_algo: own under the same policy), said once on
 * stderr and in every call's note (algo -1, name "own (...)", how "fallback") -- a run is
 * not refused (PyTorch's rule is to raise; research/anchors-reductions section 3). cuDNN
 * may also refuse an algorithm it offered when it runs (CUDNN_STATUS_NOT_SUPPORTED at
 * execution, max-pool backward included): the same fallback then, for that call and, for a
 * convolution, that shape from then on (name "own (cuDNN refused at execution)", how
 * "refused"). Not yet:
 * trying cuDNN's NCHW/KCRS descriptors first (issue 21, item 6).
 * A choice is kept per (op, shape) -- as frameworks cache theirs -- until
 * dt_cudnn_reset_choices (every replica starts with one), and every call leaves a note
 * (dt_algo_note) that the harness writes to the replica's algos.csv.
 * Weights are HWIO in detrain and KRSC (NHWC filter layout) in cuDNN: exact transposes
 * on the way in and out. The bias add is detrain's own kernel. */
#include <stdio.h>
#include <string.h>

#include "core/dynlib.h"
#include "nets/cuda/cuda.h"
#include "nets/cuda/work.h" /* a recording backend: what cuDNN's calls would do */
#include "nets/cuda/dense_loss.h"

#ifndef DETRAIN_HAVE_CUDNN

static enum dt_status no_cudnn(struct dt_backend *be, const char *op)
{
    return dt_backend_op_error(be, DT_ERR_UNSUPPORTED,
                               "%s: conv_algo autotune and deterministic need cuDNN, and this "
                               "build has none (configure with -DDETRAIN_CUDNN_ROOT=<folder with "
                               "include/cudnn.h and lib/libcudnn.so>); conv_algo: own runs "
                               "without it",
                               op);
}
enum dt_status dt_cudnn_conv2d_forward(struct dt_backend *be, float *y, const float *x,
                                       const float *w, const float *bias,
                                       const struct dt_conv2d_shape *s, const struct dt_policy *pol)
{
    return no_cudnn(be, "conv2d_forward");
}
enum dt_status dt_cudnn_conv2d_backward_data(struct dt_backend *be, float *dx, const float *dy,
                                             const float *w, const struct dt_conv2d_shape *s,
                                             const struct dt_policy *pol)
{
    return no_cudnn(be, "conv2d_backward_data");
}
enum dt_status dt_cudnn_conv2d_backward_weight(struct dt_backend *be, float *dw, const float *x,
                                               const float *dy, const struct dt_conv2d_shape *s,
                                               const struct dt_policy *pol)
{
    return no_cudnn(be, "conv2d_backward_weight");
}
enum dt_status dt_cudnn_maxpool2d_backward(struct dt_backend *be, float *dx, const float *dy,
                                           const float *x, const float *y, const int32_t *argmax,
                                           const struct dt_pool2d_shape *s,
                                           const struct dt_policy *pol)
{
    return no_cudnn(be, "maxpool2d_backward");
}
int dt_cudnn_take_notes(struct dt_backend *be, struct dt_algo_note *notes, int max) { return 0; }
void dt_cudnn_reset_choices(struct dt_backend *be) {}
void dt_cudnn_destroy(struct dt_backend *be) {}
size_t dt_cudnn_version(void) { return 0; }
bool dt_cudnn_test_refuse_exec(struct dt_backend *be, int n) { return false; }
enum dt_status dt_cudnn_reported_determinism(struct dt_backend *be, const char *op,
                                             const struct dt_conv2d_shape *s, int algo,
                                             int *deterministic)
{
    return no_cudnn(be, op);
}

#else /* DETRAIN_HAVE_CUDNN */

/* A recording backend (nets/cuda/recorder.h) makes no cuDNN call: what each of these ops
 * launches, described as it would run with cuDNN's algorithm chosen (the steady state: the
 * first shape under autotune waits once for cudnnFind, which the record leaves out). One
 * convolution call reads x, w and y once and does 2 multiply-adds a patch element of every
 * output; TF32 under math: tf32 (CUDNN_DEFAULT_MATH), FP32 FMA math otherwise. */
static struct dt_op_cost cudnn_conv_work(const struct dt_conv2d_shape *s,
                                         const struct dt_policy *pol)
{
    const double rows = (double)s->B * (double)s->OH * (double)s->OW;
    const double patch = (double)s->KH * (double)s->KW * (double)s->C;
    const double cells = (double)s->B * (double)s->H * (double)s->W * (double)s->C;
    const double y = rows * (double)s->K_out, wn = patch * (double)s->K_out;
    struct dt_op_cost w = dt_work(4.0 * (cells + wn + y), 0.0);
    w.lib_calls = 1;
    w.lib_flops = 2.0 * y * patch;
    w.lib_tf32 = dt_math_tf32(pol);
    return w;
}

/* op 0: the weights to KRSC, the convolution, the bias; 1: the weights, the data gradient;
 * 2: the filter gradient, then back from KRSC. */
static enum dt_status record_conv(struct dt_backend *be, int op, float *y, const float *bias,
                                  const struct dt_conv2d_shape *s, const struct dt_policy *pol)
{
    const struct dt_cuda_launch *L = &dt_cuda(be)->launch;
    const int64_t Kp = s->KH * s->KW * s->C;
    float *wk = dt_cuda_scratch(be, DT_CUDA_SLOT_CONV_WEIGHTS, 0);
    if (op != 2) dt_cuda_transpose(wk, wk, Kp, s->K_out, L);
    dt_cuda_count_lib(be);
    dt_cuda_note(L, cudnn_conv_work(s, pol));
    if (op == 2) dt_cuda_transpose(wk, wk, s->K_out, Kp, L);
    if (op == 0) dt_cuda_bias_add(y, bias, s->B * s->OH * s->OW, s->K_out, L);
    return DT_OK;
}

/* cudnnPoolingBackward: y, dy and x read, dx written; no product. */
static enum dt_status record_pool(struct dt_backend *be, const struct dt_pool2d_shape *s)
{
    const double outs = (double)s->B * (double)s->OH * (double)s->OW * (double)s->C;
    const double cells = (double)s->B * (double)s->H * (double)s->W * (double)s->C;
    struct dt_op_cost w = dt_work(4.0 * (2.0 * outs + 2.0 * cells), 0.0);
    w.lib_calls = 1;
    dt_cuda_count_lib(be);
    dt_cuda_note(&dt_cuda(be)->launch, w);
    return DT_OK;
}

#include <cublas_api.h> /* CUBLAS_VER_MAJOR: the cuBLASLt cuDNN's engines load */
#include <cuda_runtime_api.h>
#include <cudnn.h>

#define DT_STR_(x) #x
#define DT_STR(x) DT_STR_(x)

enum conv_op { OP_FWD, OP_BWD_DATA, OP_BWD_FILTER, N_CONV_OPS };
static const char *const op_names[N_CONV_OPS] = {"conv_fwd", "conv_bwd_data", "conv_bwd_filter"};
static const char *const fwd_names[] = {
    "IMPLICIT_GEMM", "IMPLICIT_PRECOMP_GEMM", "GEMM", "DIRECT", "FFT", "FFT_TILING",
    "WINOGRAD",      "WINOGRAD_NONFUSED"};
static const char *const bwd_data_names[] = {"ALGO_0",     "ALGO_1",   "FFT",
                                             "FFT_TILING", "WINOGRAD", "WINOGRAD_NONFUSED"};
static const char *const bwd_filter_names[] = {
    "ALGO_0", "ALGO_1", "FFT", "ALGO_3", "WINOGRAD", "WINOGRAD_NONFUSED", "FFT_TILING"};

#define MAX_CHOICES 64
#define MAX_NOTES 256
#define MAX_PERF 16
#define ALGO_OWN (-2) /* a choice of detrain's own kernels: cuDNN had no algorithm */

/* One algorithm of cuDNN's list, whichever op it is for. */
struct perf {
    int algo;
    cudnnStatus_t status;
    size_t memory;
    cudnnDeterminism_t determinism;
    cudnnMathType_t math;
};

struct choice {
    enum conv_op op;
    enum dt_conv_algo mode;
    bool tf32; /* math: tf32 asked for (CUDNN_DEFAULT_MATH), else FP32 (CUDNN_FMA_MATH) */
    struct dt_conv2d_shape s;
    int algo;
    cudnnMathType_t math;
    size_t workspace;
    bool deterministic;
    bool refused; /* ALGO_OWN since cuDNN refused the chosen algorithm at execution */
};

struct dt_cudnn {
    struct dt_backend *be; /* whose op error record takes cuDNN's failures */
    cudnnHandle_t h;
    cudnnTensorDescriptor_t xd, yd;
    cudnnFilterDescriptor_t wd;
    cudnnConvolutionDescriptor_t cd;
    cudnnPoolingDescriptor_t pd;
    void *ws;
    size_t ws_bytes;
    struct choice choices[MAX_CHOICES];
    int n_choices;
    struct dt_algo_note notes[MAX_NOTES];
    int n_notes;     /* notes made since the last take (beyond MAX_NOTES: counted, not kept) */
    int refuse_exec; /* test seam (dt_cudnn_test_refuse_exec): executions still to refuse */
};

size_t dt_cudnn_version(void) { return cudnnGetVersion(); }

static enum dt_status cudnn_failed(struct dt_backend *be, cudnnStatus_t st, const char *call,
                                   const char *what)
{
    return dt_backend_op_error(
        be, st == CUDNN_STATUS_NOT_SUPPORTED ? DT_ERR_UNSUPPORTED : DT_ERR_INTERNAL,
        "%s: %s failed: %s", what, call, cudnnGetErrorString(st));
}
#define CUDNN_TRY(call, what)                                                                      \
    do {                                                                                           \
        cudnnStatus_t st_ = (call);                                                                \
        if (st_ != CUDNN_STATUS_SUCCESS) return cudnn_failed(d->be, st_, #call, what);             \
    } while (0)

/* The backend's cuDNN state, made on first use and bound to its stream; NULL after
 * recording why (the op error record) when cuDNN cannot start (e.g. the library does not match the
 * driver). */
static struct dt_cudnn *state(struct dt_backend *be)
{
    struct dt_cuda_ctx *c = dt_cuda(be);
    if (c->cudnn) return c->cudnn;
    struct dt_cudnn *d = dt_xcalloc(1, sizeof *d);
    cudnnStatus_t st = cudnnCreate(&d->h);
    if (st == CUDNN_STATUS_SUCCESS) st = cudnnSetStream(d->h, (cudaStream_t)c->stream);
    if (st == CUDNN_STATUS_SUCCESS) st = cudnnCreateTensorDescriptor(&d->xd);
    if (st == CUDNN_STATUS_SUCCESS) st = cudnnCreateTensorDescriptor(&d->yd);
    if (st == CUDNN_STATUS_SUCCESS) st = cudnnCreateFilterDescriptor(&d->wd);
    if (st == CUDNN_STATUS_SUCCESS) st = cudnnCreateConvolutionDescriptor(&d->cd);
    if (st == CUDNN_STATUS_SUCCESS) st = cudnnCreatePoolingDescriptor(&d->pd);
    d->be = be;
    c->cudnn = d; /* dt_cudnn_destroy frees what was made */
    if (st != CUDNN_STATUS_SUCCESS) {
        /* the usual cause: a library cuDNN loads at run time is not found beside it */
        static const char *const sub[] = {"libcudnn_graph.so.9",
                                          "libcudnn_engines_precompiled.so.9",
                                          "libcudnn_engines_runtime_compiled.so.9",
                                          "libcudnn_ops.so.9",
                                          "libcudnn_cnn.so.9",
                                          "libcublasLt.so." DT_STR(CUBLAS_VER_MAJOR)};
        char dir[2048], missing[2048];
        dt_dynlib_folder_of((const void *)cudnnCreate, dir, sizeof dir);
        const int n =
            dt_dynlib_probe(sub, (int)(sizeof sub / sizeof sub[0]), dir, missing, sizeof missing);
        dt_backend_op_error(
            be, DT_ERR_UNSUPPORTED, "cuDNN %zu (%s) could not start: %s%s%s%s", cudnnGetVersion(),
            dir[0] ? dir : "folder unknown", cudnnGetErrorString(st),
            n ? "; these libraries it loads cannot be loaded: " : "", n ? missing : "",
            n ? " (put their folder on LD_LIBRARY_PATH, or use conv_algo: own)" : "");
        dt_cudnn_destroy(be);
        return NULL;
    }
    return d;
}

void dt_cudnn_destroy(struct dt_backend *be)
{
    struct dt_cuda_ctx *c = dt_cuda(be);
    struct dt_cudnn *d = c->cudnn;
    if (!d) return;
    if (d->ws) cudaFree(d->ws);
    if (d->pd) cudnnDestroyPoolingDescriptor(d->pd);
    if (d->cd) cudnnDestroyConvolutionDescriptor(d->cd);
    if (d->wd) cudnnDestroyFilterDescriptor(d->wd);
    if (d->yd) cudnnDestroyTensorDescriptor(d->yd);
    if (d->xd) cudnnDestroyTensorDescriptor(d->xd);
    if (d->h) cudnnDestroy(d->h);
    free(d);
    c->cudnn = NULL;
}

void dt_cudnn_reset_choices(struct dt_backend *be)
{
    struct dt_cudnn *d = dt_cuda(be)->cudnn;
    if (d) d->n_choices = 0;
}

int dt_cudnn_take_notes(struct dt_backend *be, struct dt_algo_note *notes, int max)
{
    struct dt_cudnn *d = dt_cuda(be)->cudnn;
    if (!d) return 0;
    const int n = d->n_notes, kept = n < MAX_NOTES ? n : MAX_NOTES;
    if (kept > 0 && max > 0)
        memcpy(notes, d->notes, (size_t)(kept < max ? kept : max) * sizeof *notes);
    d->n_notes = 0;
    return n;
}

static void conv_shape_text(char *buf, size_t size, const struct dt_conv2d_shape *s)
{
    snprintf(buf, size, "%lldx%lldx%lld>%lld k%lldx%lld s%lld p%lld b%lld", (long long)s->H,
             (long long)s->W, (long long)s->C, (long long)s->K_out, (long long)s->KH,
             (long long)s->KW, (long long)s->stride, (long long)s->pad, (long long)s->B);
}

static const char *math_text(cudnnMathType_t m)
{
    return m == CUDNN_FMA_MATH ? "fma" : m == CUDNN_DEFAULT_MATH ? "default(tf32)" : "tensor_op";
}

static void add_note(struct dt_cudnn *d, const char *op, const char *shape, int algo,
                     const char *name, bool deterministic, const char *math, const char *how)
{
    if (d->n_notes < MAX_NOTES) {
        struct dt_algo_note *n = &d->notes[d->n_notes];
        memset(n, 0, sizeof *n);
        snprintf(n->op, sizeof n->op, "%s", op);
        snprintf(n->shape, sizeof n->shape, "%s", shape);
        n->algo = algo;
        snprintf(n->name, sizeof n->name, "%s", name);
        n->deterministic = deterministic;
        snprintf(n->math, sizeof n->math, "%s", math);
        snprintf(n->how, sizeof n->how, "%s", how);
    }
    d->n_notes++;
}

static const char *algo_name(enum conv_op op, int algo)
{
    const char *const *t = op == OP_FWD        ? fwd_names
                           : op == OP_BWD_DATA ? bwd_data_names
                                               : bwd_filter_names;
    const int n = op == OP_FWD ? 8 : op == OP_BWD_DATA ? 6 : 7;
    return algo >= 0 && algo < n ? t[algo] : "UNKNOWN";
}

/* Describe a convolution of shape s to cuDNN: NHWC x and y, KRSC filter, cross-correlation
 * (detrain's convolution does not flip the kernel), FP32, math mode m. */
static enum dt_status set_conv(struct dt_cudnn *d, const struct dt_conv2d_shape *s,
                               cudnnMathType_t m)
{
    const char *what = "cuDNN convolution descriptors";
    CUDNN_TRY(cudnnSetTensor4dDescriptor(d->xd, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, (int)s->B,
                                         (int)s->C, (int)s->H, (int)s->W),
              what);
    CUDNN_TRY(cudnnSetTensor4dDescriptor(d->yd, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, (int)s->B,
                                         (int)s->K_out, (int)s->OH, (int)s->OW),
              what);
    CUDNN_TRY(cudnnSetFilter4dDescriptor(d->wd, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NHWC, (int)s->K_out,
                                         (int)s->C, (int)s->KH, (int)s->KW),
              what);
    CUDNN_TRY(cudnnSetConvolution2dDescriptor(d->cd, (int)s->pad, (int)s->pad, (int)s->stride,
                                              (int)s->stride, 1, 1, CUDNN_CROSS_CORRELATION,
                                              CUDNN_DATA_FLOAT),
              what);
    CUDNN_TRY(cudnnSetConvolutionMathType(d->cd, m), what);
    int n, c, h, w;
    CUDNN_TRY(cudnnGetConvolution2dForwardOutputDim(d->cd, d->xd, d->wd, &n, &c, &h, &w), what);
    if (h != s->OH || w != s->OW || c != s->K_out) {
        return dt_backend_op_error(d->be, DT_ERR_INTERNAL,
                                   "cuDNN computes a %dx%dx%d output where detrain has "
                                   "%lldx%lldx%lld",
                                   h, w, c, (long long)s->OH, (long long)s->OW,
                                   (long long)s->K_out);
    }
    return DT_OK;
}

/* cuDNN's list of algorithms for op (descriptors set): timed (cudnnFind*, fastest first)
 * or by heuristic (cudnnGet*_v7). */
static enum dt_status list_algos(struct dt_cudnn *d, enum conv_op op, bool timed, struct perf *out,
                                 int *n_out)
{
    int n = 0;
    const char *what = timed ? "cuDNN algorithm search (cudnnFind)" : "cuDNN heuristics";
    if (op == OP_FWD) {
        cudnnConvolutionFwdAlgoPerf_t p[MAX_PERF];
        if (timed)
            CUDNN_TRY(cudnnFindConvolutionForwardAlgorithm(d->h, d->xd, d->wd, d->cd, d->yd,
                                                           MAX_PERF, &n, p),
                      what);
        else
            CUDNN_TRY(cudnnGetConvolutionForwardAlgorithm_v7(d->h, d->xd, d->wd, d->cd, d->yd,
                                                             MAX_PERF, &n, p),
                      what);
        for (int i = 0; i < n; i++)
            out[i] = (struct perf){.algo = (int)p[i].algo,
                                   .status = p[i].status,
                                   .memory = p[i].memory,
                                   .determinism = p[i].determinism,
                                   .math = p[i].mathType};
    } else if (op == OP_BWD_DATA) {
        cudnnConvolutionBwdDataAlgoPerf_t p[MAX_PERF];
        if (timed)
            CUDNN_TRY(cudnnFindConvolutionBackwardDataAlgorithm(d->h, d->wd, d->yd, d->cd, d->xd,
                                                                MAX_PERF, &n, p),
                      what);
        else
            CUDNN_TRY(cudnnGetConvolutionBackwardDataAlgorithm_v7(d->h, d->wd, d->yd, d->cd, d->xd,
                                                                  MAX_PERF, &n, p),
                      what);
        for (int i = 0; i < n; i++)
            out[i] = (struct perf){.algo = (int)p[i].algo,
                                   .status = p[i].status,
                                   .memory = p[i].memory,
                                   .determinism = p[i].determinism,
                                   .math = p[i].mathType};
    } else {
        cudnnConvolutionBwdFilterAlgoPerf_t p[MAX_PERF];
        if (timed)
            CUDNN_TRY(cudnnFindConvolutionBackwardFilterAlgorithm(d->h, d->xd, d->yd, d->cd, d->wd,
                                                                  MAX_PERF, &n, p),
                      what);
        else
            CUDNN_TRY(cudnnGetConvolutionBackwardFilterAlgorithm_v7(d->h, d->xd, d->yd, d->cd,
                                                                    d->wd, MAX_PERF, &n, p),
                      what);
        for (int i = 0; i < n; i++)
            out[i] = (struct perf){.algo = (int)p[i].algo,
                                   .status = p[i].status,
                                   .memory = p[i].memory,
                                   .determinism = p[i].determinism,
                                   .math = p[i].mathType};
    }
    *n_out = n;
    return DT_OK;
}

/* The workspace algo needs for op (descriptors set); false when cuDNN refuses the pair. */
static bool workspace_for(struct dt_cudnn *d, enum conv_op op, int algo, size_t *bytes)
{
    cudnnStatus_t st;
    if (op == OP_FWD)
        st = cudnnGetConvolutionForwardWorkspaceSize(d->h, d->xd, d->wd, d->cd, d->yd,
                                                     (cudnnConvolutionFwdAlgo_t)algo, bytes);
    else if (op == OP_BWD_DATA)
        st = cudnnGetConvolutionBackwardDataWorkspaceSize(
            d->h, d->wd, d->yd, d->cd, d->xd, (cudnnConvolutionBwdDataAlgo_t)algo, bytes);
    else
        st = cudnnGetConvolutionBackwardFilterWorkspaceSize(
            d->h, d->xd, d->yd, d->cd, d->wd, (cudnnConvolutionBwdFilterAlgo_t)algo, bytes);
    return st == CUDNN_STATUS_SUCCESS;
}

/* The choice for (op, mode, shape): cached, or made now (file comment); descriptors are
 * left set for the call with the choice's math mode. */
static enum dt_status choose(struct dt_backend *be, struct dt_cudnn *d, enum conv_op op,
                             enum dt_conv_algo mode, bool tf32, const struct dt_conv2d_shape *s,
                             const struct choice **out)
{
    for (int i = 0; i < d->n_choices; i++) {
        const struct choice *ch = &d->choices[i];
        if (ch->op == op && ch->mode == mode && ch->tf32 == tf32 &&
            memcmp(&ch->s, s, sizeof *s) == 0) {
            *out = ch;
            return ch->algo == ALGO_OWN ? DT_OK : set_conv(d, s, ch->math);
        }
    }
    /* a new shape inside a capture: cuDNN's search allocates and waits -- the capture breaks
     * and the uncaptured rerun chooses (the capture's choice would not be the run's) */
    if (dt_cuda_capture_breaks(be, "cuDNN's algorithm search for a new shape inside the step"))
        return DT_ERR_UNSUPPORTED;
    const bool timed = mode == DT_CONV_ALGO_AUTOTUNE;
    DT_FORWARD_IF_ERROR(set_conv(d, s, tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH));
    struct perf p[MAX_PERF];
    int n = 0;
    if (timed) dt_cuda_sync(be); /* time cuDNN's kernels, not the queue before them */
    DT_FORWARD_IF_ERROR(list_algos(d, op, timed, p, &n));
    struct choice ch = {.op = op, .mode = mode, .tf32 = tf32, .s = *s, .algo = -1};
    for (int i = 0; i < n && ch.algo < 0; i++) {
        if (p[i].status != CUDNN_STATUS_SUCCESS) continue;
        if (timed) { /* the fastest that ran, as timed */
            ch = (struct choice){.op = op,
                                 .mode = mode,
                                 .tf32 = tf32,
                                 .s = *s,
                                 .algo = p[i].algo,
                                 .math = p[i].math,
                                 .workspace = p[i].memory,
                                 .deterministic = p[i].determinism == CUDNN_DETERMINISTIC,
                                 .refused = false};
            continue;
        }
        size_t ws = 0;
        /* FP32: FMA math only; tf32: TF32 tensor ops too, never a conversion to FP16 */
        if (p[i].determinism != CUDNN_DETERMINISTIC ||
            (!tf32 && p[i].math == CUDNN_TENSOR_OP_MATH) ||
            p[i].math == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION ||
            !workspace_for(d, op, p[i].algo, &ws))
            continue;
        ch = (struct choice){.op = op,
                             .mode = mode,
                             .tf32 = tf32,
                             .s = *s,
                             .algo = p[i].algo,
                             .math = tf32 ? p[i].math : CUDNN_FMA_MATH,
                             .workspace = ws,
                             .deterministic = true,
                             .refused = false};
    }
    if (ch.algo < 0) { /* detrain's own kernels for this op and shape (file comment) */
        char shape[64];
        conv_shape_text(shape, sizeof shape, s);
        fprintf(stderr,
                "detrain: cuDNN %zu offers no %s algorithm for %s (%s) that %s; detrain's own "
                "kernels run it (algos.csv says so)\n",
                cudnnGetVersion(), timed ? "working" : "deterministic FP32", op_names[op], shape,
                timed ? "ran" : "it marks CUDNN_DETERMINISTIC");
        ch.algo = ALGO_OWN;
    }
    if (d->n_choices == MAX_CHOICES) d->n_choices = 0; /* many shapes: start over */
    d->choices[d->n_choices] = ch;
    *out = &d->choices[d->n_choices++];
    return ch.algo == ALGO_OWN ? DT_OK : set_conv(d, s, ch.math);
}

static void *workspace(struct dt_backend *be, struct dt_cudnn *d, size_t bytes)
{
    if (bytes <= d->ws_bytes) return d->ws;
    /* capturing: nothing runs, nothing is freed or made (the rerun grows it) */
    if (dt_cuda_capture_breaks(be, "the cuDNN workspace grew inside the step")) return d->ws;
    dt_cuda_sync(be); /* queued work may still use the old one */
    if (d->ws) DT_CUDA_CHECK(cudaFree(d->ws));
    DT_CUDA_CHECK(cudaMalloc(&d->ws, bytes));
    d->ws_bytes = bytes;
    return d->ws;
}

static void note_conv(struct dt_cudnn *d, const struct choice *ch, const struct dt_policy *pol)
{
    char shape[64];
    conv_shape_text(shape, sizeof shape, &ch->s);
    if (ch->algo == ALGO_OWN) { /* deterministic when the policy's sums and scatters are */
        add_note(d, op_names[ch->op], shape, -1,
                 ch->refused ? "own (cuDNN refused at execution)" : "own (no cuDNN algorithm)",
                 dt_reduction_ordered(pol) && dt_atomics_exact(pol),
                 dt_math_tf32(pol) ? "default(tf32)" : "fma", ch->refused ? "refused" : "fallback");
        return;
    }
    add_note(d, op_names[ch->op], shape, ch->algo, algo_name(ch->op, ch->algo), ch->deterministic,
             math_text(ch->math), ch->mode == DT_CONV_ALGO_AUTOTUNE ? "timed" : "heuristic");
}

/* The policy with conv_algo: own, for a shape cuDNN has no algorithm for. */
static struct dt_policy own_policy(const struct dt_policy *pol)
{
    struct dt_policy own = *pol;
    own.conv_algo = DT_CONV_ALGO_OWN;
    return own;
}

/* An execution's status, through the test seam: the next `refuse_exec` executions read as
 * CUDNN_STATUS_NOT_SUPPORTED before cuDNN is called (nothing launched, as cuDNN does when it
 * refuses). */
static bool refused_by_seam(struct dt_cudnn *d)
{
    if (d->refuse_exec <= 0) return false;
    d->refuse_exec--;
    return true;
}

/* A refusal while the step is captured (nets/cuda/graph.c) may be the capture's doing, not the
 * algorithm's: it breaks the capture (the step reruns uncaptured and asks again) instead of
 * moving the shape to detrain's kernels for good. */
static bool refused_in_capture(struct dt_backend *be, const char *call)
{
    return dt_cuda_capture_breaks(be, "%s refused inside the capture", call);
}

/* cuDNN refused an algorithm it had offered, at execution (CUDNN_STATUS_NOT_SUPPORTED: it
 * can say so only then, for a shape, layout or workspace its heuristics passed): the choice
 * becomes detrain's own kernels for this op and shape from now on, said once on stderr, and
 * the call's note, already made, is rewritten as a fallback ("how" = "fallback at
 * execution"). The caller then runs its op with own_policy. */
static void fall_back_at_execution(struct dt_cudnn *d, const struct choice *ch,
                                   const struct dt_policy *pol)
{
    char shape[64];
    conv_shape_text(shape, sizeof shape, &ch->s);
    fprintf(stderr,
            "detrain: cuDNN %zu refused %s algorithm %d (%s) for %s when it ran "
            "(CUDNN_STATUS_NOT_SUPPORTED); detrain's own kernels run it (algos.csv says so)\n",
            cudnnGetVersion(), op_names[ch->op], ch->algo, algo_name(ch->op, ch->algo), shape);
    for (int i = 0; i < d->n_choices; i++)
        if (&d->choices[i] == ch) d->choices[i].algo = ALGO_OWN, d->choices[i].refused = true;
    if (d->n_notes > 0 && d->n_notes <= MAX_NOTES) { /* this call's note, made before it ran */
        d->n_notes--;
        note_conv(d, ch, pol);
    }
}

/* Set up (state, choice, workspace) for one convolution call. */
static enum dt_status conv_call(struct dt_backend *be, enum conv_op op,
                                const struct dt_conv2d_shape *s, const struct dt_policy *pol,
                                struct dt_cudnn **d_out, const struct choice **ch, void **ws)
{
    struct dt_cudnn *d = state(be);
    if (!d) return DT_ERR_UNSUPPORTED;
    DT_FORWARD_IF_ERROR(choose(be, d, op, pol->conv_algo, dt_math_tf32(pol), s, ch));
    *ws = (*ch)->algo == ALGO_OWN ? NULL : workspace(be, d, (*ch)->workspace);
    note_conv(d, *ch, pol);
    *d_out = d;
    return DT_OK;
}

enum dt_status dt_cudnn_conv2d_forward(struct dt_backend *be, float *y, const float *x,
                                       const float *w, const float *bias,
                                       const struct dt_conv2d_shape *s, const struct dt_policy *pol)
{
    struct dt_cudnn *d;
    const struct choice *ch;
    void *ws;
    if (dt_cuda_recording(be)) return record_conv(be, 0, y, bias, s, pol);
    DT_FORWARD_IF_ERROR(conv_call(be, OP_FWD, s, pol, &d, &ch, &ws));
    if (ch->algo == ALGO_OWN) {
        const struct dt_policy own = own_policy(pol);
        return dt_cuda_own_conv2d_forward(be, y, x, w, bias, s, &own);
    }
    const int64_t Kp = s->KH * s->KW * s->C;
    float *wk =
        dt_cuda_scratch(be, DT_CUDA_SLOT_CONV_WEIGHTS, (size_t)(Kp * s->K_out) * sizeof(float));
    DT_FORWARD_IF_ERROR(
        dt_cuda_launched(be, dt_cuda_transpose(wk, w, Kp, s->K_out, &dt_cuda(be)->launch),
                         "conv2d_forward weights to KRSC"));
    const float one = 1.0f, zero = 0.0f;
    const bool refused = refused_by_seam(d); /* once a call: the seam counts calls */
    if (!refused) dt_cuda_count_lib(be);     /* the library call below */
    cudnnStatus_t cst = refused ? CUDNN_STATUS_NOT_SUPPORTED
                                : cudnnConvolutionForward(d->h, &one, d->xd, x, d->wd, wk, d->cd,
                                                          (cudnnConvolutionFwdAlgo_t)ch->algo, ws,
                                                          ch->workspace, &zero, d->yd, y);
    if (cst == CUDNN_STATUS_NOT_SUPPORTED && !refused_in_capture(be, "cudnnConvolutionForward")) {
        fall_back_at_execution(d, ch, pol);
        const struct dt_policy own = own_policy(pol);
        return dt_cuda_own_conv2d_forward(be, y, x, w, bias, s, &own);
    }
    if (cst != CUDNN_STATUS_SUCCESS)
        return cudnn_failed(be, cst, "cudnnConvolutionForward", "conv2d_forward");
    return dt_cuda_launched(
        be, dt_cuda_bias_add(y, bias, s->B * s->OH * s->OW, s->K_out, &dt_cuda(be)->launch),
        "conv2d_forward bias");
}

enum dt_status dt_cudnn_conv2d_backward_data(struct dt_backend *be, float *dx, const float *dy,
                                             const float *w, const struct dt_conv2d_shape *s,
                                             const struct dt_policy *pol)
{
    struct dt_cudnn *d;
    const struct choice *ch;
    void *ws;
    if (dt_cuda_recording(be)) return record_conv(be, 1, NULL, NULL, s, pol);
    DT_FORWARD_IF_ERROR(conv_call(be, OP_BWD_DATA, s, pol, &d, &ch, &ws));
    if (ch->algo == ALGO_OWN) {
        const struct dt_policy own = own_policy(pol);
        return dt_cuda_own_conv2d_backward_data(be, dx, dy, w, s, &own);
    }
    const int64_t Kp = s->KH * s->KW * s->C;
    float *wk =
        dt_cuda_scratch(be, DT_CUDA_SLOT_CONV_WEIGHTS, (size_t)(Kp * s->K_out) * sizeof(float));
    DT_FORWARD_IF_ERROR(
        dt_cuda_launched(be, dt_cuda_transpose(wk, w, Kp, s->K_out, &dt_cuda(be)->launch),
                         "conv2d_backward_data weights to KRSC"));
    const float one = 1.0f, zero = 0.0f;
    const bool refused = refused_by_seam(d); /* once a call: the seam counts calls */
    if (!refused) dt_cuda_count_lib(be);     /* the library call below */
    cudnnStatus_t st = refused
                           ? CUDNN_STATUS_NOT_SUPPORTED
                           : cudnnConvolutionBackwardData(d->h, &one, d->wd, wk, d->yd, dy, d->cd,
                                                          (cudnnConvolutionBwdDataAlgo_t)ch->algo,
                                                          ws, ch->workspace, &zero, d->xd, dx);
    if (st == CUDNN_STATUS_NOT_SUPPORTED &&
        !refused_in_capture(be, "cudnnConvolutionBackwardData")) {
        fall_back_at_execution(d, ch, pol);
        const struct dt_policy own = own_policy(pol);
        return dt_cuda_own_conv2d_backward_data(be, dx, dy, w, s, &own);
    }
    if (st != CUDNN_STATUS_SUCCESS)
        return cudnn_failed(be, st, "cudnnConvolutionBackwardData", "conv2d_backward_data");
    return DT_OK;
}

enum dt_status dt_cudnn_conv2d_backward_weight(struct dt_backend *be, float *dw, const float *x,
                                               const float *dy, const struct dt_conv2d_shape *s,
                                               const struct dt_policy *pol)
{
    struct dt_cudnn *d;
    const struct choice *ch;
    void *ws;
    if (dt_cuda_recording(be)) return record_conv(be, 2, NULL, NULL, s, pol);
    DT_FORWARD_IF_ERROR(conv_call(be, OP_BWD_FILTER, s, pol, &d, &ch, &ws));
    if (ch->algo == ALGO_OWN) {
        const struct dt_policy own = own_policy(pol);
        return dt_cuda_own_conv2d_backward_weight(be, dw, x, dy, s, &own);
    }
    const int64_t Kp = s->KH * s->KW * s->C;
    float *dwk =
        dt_cuda_scratch(be, DT_CUDA_SLOT_CONV_WEIGHTS, (size_t)(Kp * s->K_out) * sizeof(float));
    const float one = 1.0f, zero = 0.0f;
    const bool refused = refused_by_seam(d); /* once a call: the seam counts calls */
    if (!refused) dt_cuda_count_lib(be);     /* the library call below */
    cudnnStatus_t st =
        refused ? CUDNN_STATUS_NOT_SUPPORTED
                : cudnnConvolutionBackwardFilter(d->h, &one, d->xd, x, d->yd, dy, d->cd,
                                                 (cudnnConvolutionBwdFilterAlgo_t)ch->algo, ws,
                                                 ch->workspace, &zero, d->wd, dwk);
    if (st == CUDNN_STATUS_NOT_SUPPORTED &&
        !refused_in_capture(be, "cudnnConvolutionBackwardFilter")) {
        fall_back_at_execution(d, ch, pol);
        const struct dt_policy own = own_policy(pol);
        return dt_cuda_own_conv2d_backward_weight(be, dw, x, dy, s, &own);
    }
    if (st != CUDNN_STATUS_SUCCESS)
        return cudnn_failed(be, st, "cudnnConvolutionBackwardFilter", "conv2d_backward_weight");
    return dt_cuda_launched(be, dt_cuda_transpose(dw, dwk, s->K_out, Kp, &dt_cuda(be)->launch),
                            "conv2d_backward_weight weights from KRSC");
}

enum dt_status dt_cudnn_maxpool2d_backward(struct dt_backend *be, float *dx, const float *dy,
                                           const float *x, const float *y, const int32_t *argmax,
                                           const struct dt_pool2d_shape *s,
                                           const struct dt_policy *pol)
{
    if (dt_cuda_recording(be)) return record_pool(be, s);
    struct dt_cudnn *d = state(be);
    if (!d) return DT_ERR_UNSUPPORTED;
    const bool det = pol->conv_algo == DT_CONV_ALGO_DETERMINISTIC;
    const char *what = "maxpool2d_backward";
    const cudnnPoolingMode_t mode = det ? CUDNN_POOLING_MAX_DETERMINISTIC : CUDNN_POOLING_MAX;
    CUDNN_TRY(cudnnSetPooling2dDescriptor(d->pd, mode, CUDNN_PROPAGATE_NAN, (int)s->K, (int)s->K,
                                          (int)s->pad, (int)s->pad, (int)s->stride, (int)s->stride),
              what);
    CUDNN_TRY(cudnnSetTensor4dDescriptor(d->xd, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, (int)s->B,
                                         (int)s->C, (int)s->H, (int)s->W),
              what);
    CUDNN_TRY(cudnnSetTensor4dDescriptor(d->yd, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, (int)s->B,
                                         (int)s->C, (int)s->OH, (int)s->OW),
              what);
    const float one = 1.0f, zero = 0.0f;
    char shape[64];
    snprintf(shape, sizeof shape, "%lldx%lldx%lld k%lld s%lld p%lld b%lld", (long long)s->H,
             (long long)s->W, (long long)s->C, (long long)s->K, (long long)s->stride,
             (long long)s->pad, (long long)s->B);
    const bool refused = refused_by_seam(d); /* once a call: the seam counts calls */
    if (!refused) dt_cuda_count_lib(be);     /* the library call below */
    cudnnStatus_t st = refused ? CUDNN_STATUS_NOT_SUPPORTED
                               : cudnnPoolingBackward(d->h, d->pd, &one, d->yd, y, d->yd, dy, d->xd,
                                                      x, &zero, d->xd, dx);
    if (st == CUDNN_STATUS_NOT_SUPPORTED && /* refused at execution: detrain's own kernel */
        !refused_in_capture(be, "cudnnPoolingBackward")) {
        fprintf(stderr,
                "detrain: cuDNN %zu refused max-pool backward (%s) for %s when it ran "
                "(CUDNN_STATUS_NOT_SUPPORTED); detrain's own kernel runs it (algos.csv says "
                "so)\n",
                cudnnGetVersion(), det ? "MAX_DETERMINISTIC" : "MAX", shape);
        add_note(d, "pool_bwd", shape, -1, "own (cuDNN refused at execution)",
                 dt_atomics_exact(pol), "fp32", "refused");
        const struct dt_policy own = own_policy(pol);
        return dt_cuda_own_maxpool2d_backward(be, dx, dy, x, y, argmax, s, &own);
    }
    if (st != CUDNN_STATUS_SUCCESS) return cudnn_failed(be, st, "cudnnPoolingBackward", what);
    /* cuDNN documents MAX_DETERMINISTIC as deterministic and promises nothing for MAX */
    add_note(d, "pool_bwd", shape, -1, det ? "MAX_DETERMINISTIC" : "MAX", det, "fp32", "fixed");
    return DT_OK;
}

bool dt_cudnn_test_refuse_exec(struct dt_backend *be, int n)
{
    struct dt_cudnn *d = state(be);
    if (!d) return false;
    d->refuse_exec = n;
    return true;
}

enum dt_status dt_cudnn_reported_determinism(struct dt_backend *be, const char *op,
                                             const struct dt_conv2d_shape *s, int algo,
                                             int *deterministic)
{
    struct dt_cudnn *d = state(be);
    if (!d) return DT_ERR_UNSUPPORTED;
    int o = 0;
    while (o < N_CONV_OPS && strcmp(op_names[o], op) != 0) o++;
    DT_ASSERT_MSG(o < N_CONV_OPS, "dt_cudnn_reported_determinism: unknown op");
    DT_FORWARD_IF_ERROR(set_conv(d, s, CUDNN_FMA_MATH));
    struct perf p[MAX_PERF];
    int n = 0;
    dt_cuda_sync(be);
    DT_FORWARD_IF_ERROR(list_algos(d, (enum conv_op)o, true, p, &n));
    for (int i = 0; i < n; i++)
        if (p[i].algo == algo && p[i].status == CUDNN_STATUS_SUCCESS) {
            *deterministic = p[i].determinism == CUDNN_DETERMINISTIC;
            return DT_OK;
        }
    return DT_ERR_UNSUPPORTED;
}

#endif /* DETRAIN_HAVE_CUDNN */
