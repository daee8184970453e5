/* Shared by the op tests (test_ops.c, test_conv.c, the BNN tests): a reproducible uniform
 * generator, a CPU backend of a given size, a level's policy (or portable's with an rng), the
 * tolerance check against a double-precision reference, and convolution and pooling geometries.
 * Include after tests/check.h.
 */
#ifndef DT_OP_HELPERS_H
#define DT_OP_HELPERS_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "nets/backend.h"

/* A copy of `bytes` bytes of host memory in backend memory (the GPU tests' inputs). */
static inline void *dev_from(struct dt_backend *g, const void *host, size_t bytes)
{
    void *d = dt_backend_alloc(g, bytes);
    dt_backend_upload(g, d, host, bytes);
    return d;
}

/* Run fn(arg) (ops on be); returns the op error record it left, "" when none (caller frees):
 * for tests of an op's error message (ops never print; nets/backend.h). */
static inline char *op_error_of(struct dt_backend *be, void (*fn)(void *), void *arg)
{
    (void)dt_backend_take_op_error(be, NULL);
    fn(arg);
    struct dt_error e;
    char *msg = dt_xcalloc(1, sizeof e.msg);
    if (dt_backend_take_op_error(be, &e)) memcpy(msg, e.msg, sizeof e.msg);
    return msg;
}

/* Convolution and pooling geometries as the op tests list them, and their shapes (filled
 * by dt_*_shape_init: a geometry it refuses is a bug of the test) and tensor sizes. */
struct conv_geom {
    int64_t B, H, W, C, K_out, KH, KW, stride, pad;
};
static inline struct dt_conv2d_shape conv_shape(const struct conv_geom *g)
{
    struct dt_conv2d_shape s = {.B = g->B,
                                .H = g->H,
                                .W = g->W,
                                .C = g->C,
                                .K_out = g->K_out,
                                .KH = g->KH,
                                .KW = g->KW,
                                .stride = g->stride,
                                .pad = g->pad};
    DT_ASSERT(dt_conv2d_shape_init(&s, NULL) == DT_OK);
    return s;
}
static inline int64_t conv_nx(const struct dt_conv2d_shape *s) { return s->B * s->H * s->W * s->C; }
static inline int64_t conv_nw(const struct dt_conv2d_shape *s)
{
    return s->KH * s->KW * s->C * s->K_out;
}
static inline int64_t conv_ny(const struct dt_conv2d_shape *s)
{
    return s->B * s->OH * s->OW * s->K_out;
}

struct pool_geom {
    int64_t B, H, W, C, K, stride, pad;
};
static inline struct dt_pool2d_shape pool_shape(const struct pool_geom *g)
{
    struct dt_pool2d_shape s = {
        .B = g->B, .H = g->H, .W = g->W, .C = g->C, .K = g->K, .stride = g->stride, .pad = g->pad};
    DT_ASSERT(dt_pool2d_shape_init(&s, NULL) == DT_OK);
    return s;
}
static inline int64_t pool_nx(const struct dt_pool2d_shape *s) { return s->B * s->H * s->W * s->C; }
static inline int64_t pool_ny(const struct dt_pool2d_shape *s)
{
    return s->B * s->OH * s->OW * s->C;
}

static uint64_t rng_state = 0x243f6a8885a308d3ULL;
static inline double urand(void) /* uniform in [-1, 1) */
{
    rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (double)(rng_state >> 11) * 0x1p-52 - 1.0;
}
static inline void fill(float *v, int64_t n, double scale)
{
    for (int64_t i = 0; i < n; i++) v[i] = (float)(scale * urand());
}

static inline struct dt_backend *cpu(int threads)
{
    struct dt_backend *be = NULL;
    struct dt_backend_options opt = {DT_BACKEND_CPU, threads, 0};
    struct dt_error err;
    DT_ASSERT(dt_backend_create(&be, &opt, &err) == DT_OK);
    return be;
}

/* The CUDA backend on device 0, or exit 77 (the test is skipped) when this build or this
 * machine has none: CPU-only machines and CI build and link the gpu-labelled tests, then
 * skip them. */
static inline struct dt_backend *gpu_or_skip(void)
{
    struct dt_backend *be = NULL;
    struct dt_backend_options opt = {DT_BACKEND_CUDA, 0, 0};
    struct dt_error err;
    if (dt_backend_create(&be, &opt, &err) != DT_OK) DT_SKIP_NO_GPU(err.msg);
    return be;
}

static inline struct dt_policy level(enum dt_level l)
{
    struct dt_policy p;
    dt_policy_from_level(&p, l);
    return p;
}

/* `portable` with its rng control set to rng ("lfsr", "philox", "stored", ...). */
static inline struct dt_policy rng_policy(const char *rng)
{
    struct dt_policy p = level(DT_LEVEL_PORTABLE);
    DT_ASSERT(dt_policy_set_control(&p, "rng", rng, NULL) == DT_OK);
    return p;
}

/* |a - b| <= atol + rtol * |b| for every element; prints the first violation. */
static inline void check_close(const char *what, const float *a, const double *b, int64_t n,
                               double atol, double rtol)
{
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (!(d <= atol + rtol * fabs(b[i]))) {
            fprintf(stderr, "%s[%lld]: got %.9g, reference %.12g (diff %.3g)\n", what, (long long)i,
                    (double)a[i], b[i], d);
            dt_check_failures_++;
            return;
        }
    }
}

#endif
