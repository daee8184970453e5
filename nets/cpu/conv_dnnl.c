/* The `fast` convolutions on the CPU through oneDNN (issue 38): what a CPU user of
 * PyTorch gets, picked by measurement (docs/performance.md). Only where no control asks
 * for an order -- `conv_algo: autotune`, `math: fast`, `reduction: unordered`,
 * `atomics: float`, no forced order -- since the library's summation order is its own;
 * every other policy runs conv.c's im2col kernels, where each control acts.
 *
 * Activations stay in detrain's NHWC (oneDNN's `nhwc`), so nothing large is reordered;
 * the weights (HWIO, oneDNN's `hwio`) are reordered into the layout the primitive chose
 * (`any`: the blocked layouts its AVX-512/AVX2 kernels read), a few KB. Primitives are
 * made once per shape and kept (LeNet has two). oneDNN runs on its own OpenMP threads,
 * as many as the backend's pool has. The bias gradient stays dt_bias_backward (its own
 * op, under `atomics`). */
#include "nets/cpu/conv_dnnl.h"

#ifdef DT_HAVE_ONEDNN

#include <oneapi/dnnl/dnnl.h>
#include <omp.h>
#include <string.h>

#define DNNL_SHAPES 8

struct dnnl_shape {
    struct dt_conv2d_shape s;
    bool bad; /* oneDNN refused this shape: conv.c runs it */
    dnnl_primitive_t fwd, bwd_data, bwd_w;
    dnnl_primitive_t to_fwd_w, to_bwd_w, from_diff_w; /* weight reorders (NULL: same layout) */
    dnnl_memory_t x, y, dx, dy, w_user, dw_user;      /* detrain's buffers (handles set per call) */
    dnnl_memory_t w_fwd, w_bwd, dw_prim, bias;        /* the primitives' weight layouts */
};

struct dt_cpu_dnnl {
    dnnl_engine_t engine;
    dnnl_stream_t stream;
    int threads;
    int n;
    struct dnnl_shape shapes[DNNL_SHAPES];
};

static bool same_shape(const struct dt_conv2d_shape *a, const struct dt_conv2d_shape *b)
{
    return a->B == b->B && a->H == b->H && a->W == b->W && a->C == b->C && a->K_out == b->K_out &&
           a->KH == b->KH && a->KW == b->KW && a->stride == b->stride && a->pad == b->pad;
}

/* A memory for `md`: our buffer set per call (NONE), or owned by oneDNN (ALLOCATE). */
static dnnl_memory_t new_mem(struct dt_cpu_dnnl *d, const dnnl_memory_desc_t *md, bool owned)
{
    dnnl_memory_t m = NULL;
    if (dnnl_memory_create(&m, md, d->engine, owned ? DNNL_MEMORY_ALLOCATE : DNNL_MEMORY_NONE) !=
        dnnl_success)
        return NULL;
    return m;
}

/* A reorder from src to dst, or NULL when the two layouts are equal. */
static bool make_reorder(struct dt_cpu_dnnl *d, dnnl_primitive_t *out,
                         const dnnl_memory_desc_t *src, const dnnl_memory_desc_t *dst)
{
    *out = NULL;
    if (dnnl_memory_desc_equal(src, dst)) return true;
    dnnl_primitive_desc_t pd;
    if (dnnl_reorder_primitive_desc_create(&pd, src, d->engine, dst, d->engine, NULL) !=
        dnnl_success)
        return false;
    bool ok = dnnl_primitive_create(out, pd) == dnnl_success;
    dnnl_primitive_desc_destroy(pd);
    return ok;
}

static const dnnl_memory_desc_t *query(const_dnnl_primitive_desc_t pd, dnnl_query_t what)
{
    return dnnl_primitive_desc_query_md(pd, what, 0);
}

/* The three primitives, the weight reorders and memories of one shape; false when oneDNN
 * has no implementation for it. */
static bool build_shape(struct dt_cpu_dnnl *d, struct dnnl_shape *e)
{
    const struct dt_conv2d_shape *s = &e->s;
    dnnl_dims_t xd = {s->B, s->C, s->H, s->W}, wd = {s->K_out, s->C, s->KH, s->KW};
    dnnl_dims_t bd = {s->K_out}, yd = {s->B, s->K_out, s->OH, s->OW};
    dnnl_dims_t strides = {s->stride, s->stride}, pad = {s->pad, s->pad};
    dnnl_memory_desc_t x_md, w_user_md, w_any, b_md, y_md;
    if (dnnl_memory_desc_init_by_tag(&x_md, 4, xd, dnnl_f32, dnnl_nhwc) != dnnl_success ||
        dnnl_memory_desc_init_by_tag(&w_user_md, 4, wd, dnnl_f32, dnnl_hwio) != dnnl_success ||
        dnnl_memory_desc_init_by_tag(&w_any, 4, wd, dnnl_f32, dnnl_format_tag_any) !=
            dnnl_success ||
        dnnl_memory_desc_init_by_tag(&b_md, 1, bd, dnnl_f32, dnnl_x) != dnnl_success ||
        dnnl_memory_desc_init_by_tag(&y_md, 4, yd, dnnl_f32, dnnl_nhwc) != dnnl_success)
        return false;
    dnnl_convolution_desc_t fd, bdd, bwd;
    dnnl_primitive_desc_t fpd = NULL, bpd = NULL, wpd = NULL;
    bool ok = dnnl_convolution_forward_desc_init(&fd, dnnl_forward_training,
                                                 dnnl_convolution_direct, &x_md, &w_any, &b_md,
                                                 &y_md, strides, pad, pad) == dnnl_success &&
              dnnl_primitive_desc_create(&fpd, &fd, NULL, d->engine, NULL) == dnnl_success &&
              dnnl_convolution_backward_data_desc_init(&bdd, dnnl_convolution_direct, &x_md, &w_any,
                                                       &y_md, strides, pad, pad) == dnnl_success &&
              dnnl_primitive_desc_create(&bpd, &bdd, NULL, d->engine, fpd) == dnnl_success &&
              dnnl_convolution_backward_weights_desc_init(&bwd, dnnl_convolution_direct, &x_md,
                                                          &w_any, NULL, &y_md, strides, pad,
                                                          pad) == dnnl_success &&
              dnnl_primitive_desc_create(&wpd, &bwd, NULL, d->engine, fpd) == dnnl_success &&
              dnnl_primitive_create(&e->fwd, fpd) == dnnl_success &&
              dnnl_primitive_create(&e->bwd_data, bpd) == dnnl_success &&
              dnnl_primitive_create(&e->bwd_w, wpd) == dnnl_success;
    if (ok) {
        const dnnl_memory_desc_t *wf = query(fpd, dnnl_query_weights_md);
        const dnnl_memory_desc_t *wb = query(bpd, dnnl_query_weights_md);
        const dnnl_memory_desc_t *dw = query(wpd, dnnl_query_diff_weights_md);
        ok = make_reorder(d, &e->to_fwd_w, &w_user_md, wf) &&
             make_reorder(d, &e->to_bwd_w, &w_user_md, wb) &&
             make_reorder(d, &e->from_diff_w, dw, &w_user_md) &&
             (e->x = new_mem(d, &x_md, false)) && (e->y = new_mem(d, &y_md, false)) &&
             (e->dx = new_mem(d, &x_md, false)) && (e->dy = new_mem(d, &y_md, false)) &&
             (e->w_user = new_mem(d, &w_user_md, false)) &&
             (e->dw_user = new_mem(d, &w_user_md, false)) && (e->bias = new_mem(d, &b_md, false)) &&
             (e->w_fwd = e->to_fwd_w ? new_mem(d, wf, true) : e->w_user) &&
             (e->w_bwd = e->to_bwd_w ? new_mem(d, wb, true) : e->w_user) &&
             (e->dw_prim = e->from_diff_w ? new_mem(d, dw, true) : e->dw_user);
    }
    if (fpd) dnnl_primitive_desc_destroy(fpd);
    if (bpd) dnnl_primitive_desc_destroy(bpd);
    if (wpd) dnnl_primitive_desc_destroy(wpd);
    return ok;
}

static void free_shape(struct dnnl_shape *e)
{
    dnnl_primitive_t prims[] = {e->fwd,      e->bwd_data, e->bwd_w,
                                e->to_fwd_w, e->to_bwd_w, e->from_diff_w};
    for (size_t i = 0; i < sizeof prims / sizeof prims[0]; i++)
        if (prims[i]) dnnl_primitive_destroy(prims[i]);
    if (e->w_fwd && e->w_fwd != e->w_user) dnnl_memory_destroy(e->w_fwd);
    if (e->w_bwd && e->w_bwd != e->w_user) dnnl_memory_destroy(e->w_bwd);
    if (e->dw_prim && e->dw_prim != e->dw_user) dnnl_memory_destroy(e->dw_prim);
    dnnl_memory_t mems[] = {e->x, e->y, e->dx, e->dy, e->w_user, e->dw_user, e->bias};
    for (size_t i = 0; i < sizeof mems / sizeof mems[0]; i++)
        if (mems[i]) dnnl_memory_destroy(mems[i]);
    memset(e, 0, sizeof *e);
}

bool dt_cpu_dnnl_built(void) { return true; }

void dt_cpu_dnnl_free(struct dt_cpu_dnnl *d)
{
    if (!d) return;
    for (int i = 0; i < d->n; i++) free_shape(&d->shapes[i]);
    if (d->stream) dnnl_stream_destroy(d->stream);
    if (d->engine) dnnl_engine_destroy(d->engine);
    free(d);
}

struct dt_cpu_dnnl *dt_cpu_dnnl_new(int threads)
{
    struct dt_cpu_dnnl *d = dt_xcalloc(1, sizeof *d);
    d->threads = threads;
    omp_set_num_threads(
        threads); /* before oneDNN's first parallel region, primitive making included */
    if (dnnl_engine_create(&d->engine, dnnl_cpu, 0) != dnnl_success ||
        dnnl_stream_create(&d->stream, d->engine, dnnl_stream_default_flags) != dnnl_success) {
        dt_cpu_dnnl_free(d);
        return NULL;
    }
    return d;
}

/* The library path applies: oneDNN here, and no control asks for an order. */
static bool library_allowed(const struct dt_cpu_ctx *c, const struct dt_policy *pol)
{
    return c->dnnl && !c->forced_order && pol->conv_algo == DT_CONV_ALGO_AUTOTUNE &&
           dt_math_fast(pol) && !dt_reduction_ordered(pol) && !dt_atomics_exact(pol);
}

/* The shape's primitives, made on first use; NULL when oneDNN refuses it or the cache is
 * full (then conv.c runs it). */
static struct dnnl_shape *shape_for(struct dt_cpu_dnnl *d, const struct dt_conv2d_shape *s)
{
    for (int i = 0; i < d->n; i++)
        if (same_shape(&d->shapes[i].s, s)) return d->shapes[i].bad ? NULL : &d->shapes[i];
    if (d->n == DNNL_SHAPES) return NULL;
    struct dnnl_shape *e = &d->shapes[d->n++];
    e->s = *s;
    if (!build_shape(d, e)) {
        free_shape(e);
        e->s = *s;
        e->bad = true;
        return NULL;
    }
    return e;
}

static bool run(struct dt_cpu_dnnl *d, dnnl_primitive_t p, int n, const dnnl_exec_arg_t *args)
{
    omp_set_num_threads(d->threads);
    return dnnl_primitive_execute(p, d->stream, n, args) == dnnl_success &&
           dnnl_stream_wait(d->stream) == dnnl_success;
}

static bool reorder(struct dt_cpu_dnnl *d, dnnl_primitive_t p, dnnl_memory_t from, dnnl_memory_t to)
{
    if (!p) return true;
    const dnnl_exec_arg_t args[] = {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}};
    return run(d, p, 2, args);
}

static void set(dnnl_memory_t m, const void *p) { dnnl_memory_set_data_handle(m, (void *)p); }

enum dt_status dt_cpu_dnnl_conv_forward(struct dt_backend *be, float *y, const float *x,
                                        const float *w, const float *bias,
                                        const struct dt_conv2d_shape *s,
                                        const struct dt_policy *pol)
{
    struct dt_cpu_ctx *c = dt_cpu(be);
    struct dnnl_shape *e;
    if (!library_allowed(c, pol) || !(e = shape_for(c->dnnl, s))) return DT_ERR_UNSUPPORTED;
    set(e->x, x), set(e->y, y), set(e->w_user, w), set(e->bias, bias);
    const dnnl_exec_arg_t args[] = {{DNNL_ARG_SRC, e->x},
                                    {DNNL_ARG_WEIGHTS, e->w_fwd},
                                    {DNNL_ARG_BIAS, e->bias},
                                    {DNNL_ARG_DST, e->y}};
    if (!reorder(c->dnnl, e->to_fwd_w, e->w_user, e->w_fwd) || !run(c->dnnl, e->fwd, 4, args))
        return dt_backend_op_error(be, DT_ERR_INTERNAL, "oneDNN convolution forward failed");
    return DT_OK;
}

enum dt_status dt_cpu_dnnl_conv_backward_data(struct dt_backend *be, float *dx, const float *dy,
                                              const float *w, const struct dt_conv2d_shape *s,
                                              const struct dt_policy *pol)
{
    struct dt_cpu_ctx *c = dt_cpu(be);
    struct dnnl_shape *e;
    if (!library_allowed(c, pol) || !(e = shape_for(c->dnnl, s))) return DT_ERR_UNSUPPORTED;
    set(e->dx, dx), set(e->dy, dy), set(e->w_user, w);
    const dnnl_exec_arg_t args[] = {
        {DNNL_ARG_DIFF_SRC, e->dx}, {DNNL_ARG_WEIGHTS, e->w_bwd}, {DNNL_ARG_DIFF_DST, e->dy}};
    if (!reorder(c->dnnl, e->to_bwd_w, e->w_user, e->w_bwd) || !run(c->dnnl, e->bwd_data, 3, args))
        return dt_backend_op_error(be, DT_ERR_INTERNAL, "oneDNN convolution backward-data failed");
    return DT_OK;
}

enum dt_status dt_cpu_dnnl_conv_backward_weight(struct dt_backend *be, float *dw, const float *x,
                                                const float *dy, const struct dt_conv2d_shape *s,
                                                const struct dt_policy *pol)
{
    struct dt_cpu_ctx *c = dt_cpu(be);
    struct dnnl_shape *e;
    if (!library_allowed(c, pol) || !(e = shape_for(c->dnnl, s))) return DT_ERR_UNSUPPORTED;
    set(e->x, x), set(e->dy, dy), set(e->dw_user, dw);
    const dnnl_exec_arg_t args[] = {
        {DNNL_ARG_SRC, e->x}, {DNNL_ARG_DIFF_WEIGHTS, e->dw_prim}, {DNNL_ARG_DIFF_DST, e->dy}};
    if (!run(c->dnnl, e->bwd_w, 3, args) ||
        !reorder(c->dnnl, e->from_diff_w, e->dw_prim, e->dw_user))
        return dt_backend_op_error(be, DT_ERR_INTERNAL,
                                   "oneDNN convolution backward-weight failed");
    return DT_OK;
}

#else /* no oneDNN: conv.c runs every policy */

bool dt_cpu_dnnl_built(void) { return false; }

struct dt_cpu_dnnl *dt_cpu_dnnl_new(int threads)
{
    (void)threads;
    return NULL;
}
void dt_cpu_dnnl_free(struct dt_cpu_dnnl *d) { (void)d; }
enum dt_status dt_cpu_dnnl_conv_forward(struct dt_backend *be, float *y, const float *x,
                                        const float *w, const float *bias,
                                        const struct dt_conv2d_shape *s,
                                        const struct dt_policy *pol)
{
    (void)be, (void)y, (void)x, (void)w, (void)bias, (void)s, (void)pol;
    return DT_ERR_UNSUPPORTED;
}
enum dt_status dt_cpu_dnnl_conv_backward_data(struct dt_backend *be, float *dx, const float *dy,
                                              const float *w, const struct dt_conv2d_shape *s,
                                              const struct dt_policy *pol)
{
    (void)be, (void)dx, (void)dy, (void)w, (void)s, (void)pol;
    return DT_ERR_UNSUPPORTED;
}
enum dt_status dt_cpu_dnnl_conv_backward_weight(struct dt_backend *be, float *dw, const float *x,
                                                const float *dy, const struct dt_conv2d_shape *s,
                                                const struct dt_policy *pol)
{
    (void)be, (void)dw, (void)x, (void)dy, (void)s, (void)pol;
    return DT_ERR_UNSUPPORTED;
}

#endif
