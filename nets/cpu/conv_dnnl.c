/* The `fast` and `run_to_run` convolutions on the CPU through oneDNN (issue 38): what a CPU
 * user of PyTorch gets, picked by measurement (docs/performance.md). Under `conv_algo:
 * autotune` or `deterministic` and `math: fast`, op by op where no control that acts on it
 * asks for an order (library_allowed): the forward always, backward-data with `atomics:
 * float` (detrain's own backward-data is where the scatter-adds are), the weight gradient
 * with `reduction: unordered` or `pinned` (its sum over the batch); no forced order. The library's
 * summation order is its own; every other case runs conv.c's kernels, where each control acts.
 *
 * Activations stay in detrain's NHWC (oneDNN's `nhwc`), so nothing large is reordered;
 * the weights (HWIO, oneDNN's `hwio`) are reordered into the layout the primitive chose
 * (`any`: the blocked layouts its AVX-512/AVX2 kernels read), a few KB. The batch is split
 * over detrain's pool, one oneDNN call per slice on one OpenMP thread each: an OpenMP team
 * of its own spun between calls and took the cores from the pool (docs/performance.md).
 * Primitives are made once per (slice) shape and kept (LeNet has two). The bias gradient
 * stays dt_bias_backward (its own op, under `atomics`). */
#include "nets/cpu/conv_dnnl.h"

#ifdef DT_HAVE_ONEDNN

#include <oneapi/dnnl/dnnl.h>
#include <omp.h>
#include <string.h>

#define DNNL_SHAPES 16

/* The primitives of one shape -- the batch of one pool slice -- and the weights in their
 * layouts (shared by the slices: reordered by the caller before the pool runs). */
struct dnnl_shape {
    struct dt_conv2d_shape s;
    bool bad; /* oneDNN refused this shape: conv.c runs it */
    dnnl_primitive_t fwd, bwd_data, bwd_w;
    dnnl_primitive_t to_fwd_w, to_bwd_w, from_diff_w; /* weight reorders (NULL: same layout) */
    dnnl_memory_desc_t x_md, y_md, w_user_md, b_md, dw_md;
    /* scratchpads, given per call from the worker's buffer (user mode: oneDNN's own shared
     * one is not safe for calls running at once in this build): fwd, bwd_data, bwd_w,
     * from_diff_w */
    dnnl_memory_desc_t scratch_md[4];
    dnnl_memory_t w_user, w_fwd, w_bwd; /* w_user's handle set per call; the others owned */
};

struct dt_cpu_dnnl {
    dnnl_engine_t engine;
    dnnl_stream_t streams[DT_CPU_MAX_THREADS]; /* one per pool worker, made by that worker */
    int n;
    struct dnnl_shape shapes[DNNL_SHAPES];
};

static bool same_shape(const struct dt_conv2d_shape *a, const struct dt_conv2d_shape *b)
{
    return a->B == b->B && a->H == b->H && a->W == b->W && a->C == b->C && a->K_out == b->K_out &&
           a->KH == b->KH && a->KW == b->KW && a->stride == b->stride && a->pad == b->pad;
}

/* A memory for `md` over `p` (NULL: oneDNN allocates it). */
static dnnl_memory_t new_mem(dnnl_engine_t engine, const dnnl_memory_desc_t *md, void *p)
{
    dnnl_memory_t m = NULL;
    if (dnnl_memory_create(&m, md, engine, p ? p : DNNL_MEMORY_ALLOCATE) != dnnl_success)
        return NULL;
    return m;
}

/* A reorder from src to dst, or NULL when the two layouts are equal. */
static bool make_reorder(struct dt_cpu_dnnl *d, dnnl_primitive_t *out,
                         const dnnl_memory_desc_t *src, const dnnl_memory_desc_t *dst,
                         const_dnnl_primitive_attr_t attr, dnnl_memory_desc_t *scratch)
{
    *out = NULL;
    memset(scratch, 0, sizeof *scratch);
    if (dnnl_memory_desc_equal(src, dst)) return true;
    dnnl_primitive_desc_t pd;
    if (dnnl_reorder_primitive_desc_create(&pd, src, d->engine, dst, d->engine, attr) !=
        dnnl_success)
        return false;
    *scratch = *dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    bool ok = dnnl_primitive_create(out, pd) == dnnl_success;
    dnnl_primitive_desc_destroy(pd);
    return ok;
}

static const dnnl_memory_desc_t *query(const_dnnl_primitive_desc_t pd, dnnl_query_t what)
{
    return dnnl_primitive_desc_query_md(pd, what, 0);
}

/* The memory descriptors of a shape: activations NHWC, weights HWIO as detrain holds
 * them, and `any` weights for the primitives to pick their layout. */
static bool shape_descs(struct dnnl_shape *e, dnnl_memory_desc_t *w_any)
{
    const struct dt_conv2d_shape *s = &e->s;
    dnnl_dims_t xd = {s->B, s->C, s->H, s->W}, wd = {s->K_out, s->C, s->KH, s->KW};
    dnnl_dims_t bd = {s->K_out}, yd = {s->B, s->K_out, s->OH, s->OW};
    return dnnl_memory_desc_init_by_tag(&e->x_md, 4, xd, dnnl_f32, dnnl_nhwc) == dnnl_success &&
           dnnl_memory_desc_init_by_tag(&e->w_user_md, 4, wd, dnnl_f32, dnnl_hwio) ==
               dnnl_success &&
           dnnl_memory_desc_init_by_tag(w_any, 4, wd, dnnl_f32, dnnl_format_tag_any) ==
               dnnl_success &&
           dnnl_memory_desc_init_by_tag(&e->b_md, 1, bd, dnnl_f32, dnnl_x) == dnnl_success &&
           dnnl_memory_desc_init_by_tag(&e->y_md, 4, yd, dnnl_f32, dnnl_nhwc) == dnnl_success;
}

/* The three primitives, the weight reorders and the shared weight memories of one shape;
 * false when oneDNN has no implementation for it. */
static bool build_shape(struct dt_cpu_dnnl *d, struct dnnl_shape *e)
{
    const struct dt_conv2d_shape *s = &e->s;
    dnnl_dims_t strides = {s->stride, s->stride}, pad = {s->pad, s->pad};
    dnnl_memory_desc_t w_any, unused;
    if (!shape_descs(e, &w_any)) return false;
    dnnl_primitive_attr_t attr = NULL;
    if (dnnl_primitive_attr_create(&attr) != dnnl_success) return false;
    dnnl_convolution_desc_t fd, bdd, bwd;
    dnnl_primitive_desc_t fpd = NULL, bpd = NULL, wpd = NULL;
    bool ok =
        dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user) == dnnl_success &&
        dnnl_convolution_forward_desc_init(&fd, dnnl_forward_training, dnnl_convolution_direct,
                                           &e->x_md, &w_any, &e->b_md, &e->y_md, strides, pad,
                                           pad) == dnnl_success &&
        dnnl_primitive_desc_create(&fpd, &fd, attr, d->engine, NULL) == dnnl_success &&
        dnnl_convolution_backward_data_desc_init(&bdd, dnnl_convolution_direct, &e->x_md, &w_any,
                                                 &e->y_md, strides, pad, pad) == dnnl_success &&
        dnnl_primitive_desc_create(&bpd, &bdd, attr, d->engine, fpd) == dnnl_success &&
        dnnl_convolution_backward_weights_desc_init(&bwd, dnnl_convolution_direct, &e->x_md, &w_any,
                                                    NULL, &e->y_md, strides, pad,
                                                    pad) == dnnl_success &&
        dnnl_primitive_desc_create(&wpd, &bwd, attr, d->engine, fpd) == dnnl_success &&
        dnnl_primitive_create(&e->fwd, fpd) == dnnl_success &&
        dnnl_primitive_create(&e->bwd_data, bpd) == dnnl_success &&
        dnnl_primitive_create(&e->bwd_w, wpd) == dnnl_success;
    if (ok) {
        const dnnl_memory_desc_t *wf = query(fpd, dnnl_query_weights_md);
        const dnnl_memory_desc_t *wb = query(bpd, dnnl_query_weights_md);
        e->dw_md = *query(wpd, dnnl_query_diff_weights_md);
        e->scratch_md[0] = *query(fpd, dnnl_query_scratchpad_md);
        e->scratch_md[1] = *query(bpd, dnnl_query_scratchpad_md);
        e->scratch_md[2] = *query(wpd, dnnl_query_scratchpad_md);
        /* the weight reorders run on the caller alone, before the pool: their own scratchpad */
        ok = make_reorder(d, &e->to_fwd_w, &e->w_user_md, wf, NULL, &unused) &&
             make_reorder(d, &e->to_bwd_w, &e->w_user_md, wb, NULL, &unused) &&
             make_reorder(d, &e->from_diff_w, &e->dw_md, &e->w_user_md, attr, &e->scratch_md[3]) &&
             (e->w_user = new_mem(d->engine, &e->w_user_md, NULL)) &&
             (e->w_fwd = e->to_fwd_w ? new_mem(d->engine, wf, NULL) : e->w_user) &&
             (e->w_bwd = e->to_bwd_w ? new_mem(d->engine, wb, NULL) : e->w_user);
    }
    if (fpd) dnnl_primitive_desc_destroy(fpd);
    if (bpd) dnnl_primitive_desc_destroy(bpd);
    if (wpd) dnnl_primitive_desc_destroy(wpd);
    dnnl_primitive_attr_destroy(attr);
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
    if (e->w_user) dnnl_memory_destroy(e->w_user);
    memset(e, 0, sizeof *e);
}

bool dt_cpu_dnnl_built(void) { return true; }

void dt_cpu_dnnl_free(struct dt_cpu_dnnl *d)
{
    if (!d) return;
    for (int i = 0; i < d->n; i++) free_shape(&d->shapes[i]);
    for (int t = 0; t < DT_CPU_MAX_THREADS; t++)
        if (d->streams[t]) dnnl_stream_destroy(d->streams[t]);
    if (d->engine) dnnl_engine_destroy(d->engine);
    free(d);
}

struct dt_cpu_dnnl *dt_cpu_dnnl_new(void)
{
    struct dt_cpu_dnnl *d = dt_xcalloc(1, sizeof *d);
    omp_set_num_threads(1); /* before oneDNN's first parallel region, primitive making included */
    if (dnnl_engine_create(&d->engine, dnnl_cpu, 0) != dnnl_success) {
        dt_cpu_dnnl_free(d);
        return NULL;
    }
    return d;
}

/* The primitives for shape s with batch B, made on first use; NULL when oneDNN refuses it
 * or the cache is full (then conv.c runs the op). */
static struct dnnl_shape *shape_for(struct dt_cpu_dnnl *d, const struct dt_conv2d_shape *s,
                                    int64_t B)
{
    struct dt_conv2d_shape want = *s;
    want.B = B;
    for (int i = 0; i < d->n; i++)
        if (same_shape(&d->shapes[i].s, &want)) return d->shapes[i].bad ? NULL : &d->shapes[i];
    if (d->n == DNNL_SHAPES) return NULL;
    struct dnnl_shape *e = &d->shapes[d->n++];
    e->s = want;
    if (!build_shape(d, e)) {
        free_shape(e);
        e->s = want;
        e->bad = true;
        return NULL;
    }
    return e;
}

/* One call split over the pool: the batch in the pool's slices (threadpool.h), each slice
 * one oneDNN call on its worker's stream, one OpenMP thread each. At most two slice sizes
 * (they differ by at most one image): their shapes are made, and the weights reordered, by
 * the caller before the pool runs. */
enum dnnl_op { DNNL_FWD, DNNL_BWD_DATA, DNNL_BWD_W };

/* The library path applies to op: oneDNN here, `conv_algo: autotune` or `deterministic`
 * (on the CPU the two are one: oneDNN picks its kernel by ISA and shape, never by timing,
 * and each call runs on one OpenMP thread over a fixed slice of the batch, so no atomics
 * inside -- the same bits at every run on one machine and thread count) and `math: fast`,
 * and no control that acts on this op's sums asks for something the library does not
 * promise: the weight gradient sums over the batch (`reduction` unordered, or pinned: the
 * slices' gradients added in worker order, fixed for a thread count -- what pinned asks of
 * OpenBLAS too), backward-data is where detrain's own kernels scatter-add (col2im:
 * `atomics` must be float); the forward has neither. So a single-control ablation of `fast` prices
 * that control on the op it governs, not a switch of library on every convolution (LeNet's
 * `fast+atomics=fixed_point` was 1.64x in the overhead matrix at git 225be5d, its forward and
 * weight gradient off oneDNN too). */
static bool library_allowed(const struct dt_cpu_ctx *c, const struct dt_policy *pol,
                            enum dnnl_op op)
{
    if (!c->dnnl || c->forced_order || !dt_conv_algo_library(pol) || !dt_math_fast(pol))
        return false;
    switch (op) {
    case DNNL_FWD: return true;
    case DNNL_BWD_DATA: return !dt_atomics_exact(pol);
    case DNNL_BWD_W: return dt_reduction_library(pol, c->forced_order);
    }
    return false;
}
struct dnnl_job {
    struct dt_backend *be;
    enum dnnl_op op;
    const struct dt_conv2d_shape *s;
    int parts;                      /* the pool's slices of the batch */
    struct dnnl_shape *big, *small; /* slices of B/parts + 1 and B/parts images */
    float *out;                     /* y or dx (slices of it); backward-weight: none */
    const float *in, *w, *bias;     /* x or dy; w; bias (forward) */
    const float *dy;                /* backward-weight */
    bool failed[DT_CPU_MAX_THREADS];
};

static bool exec(dnnl_stream_t st, dnnl_primitive_t p, int n, const dnnl_exec_arg_t *args)
{
    return dnnl_primitive_execute(p, st, n, args) == dnnl_success &&
           dnnl_stream_wait(st) == dnnl_success;
}

/* Worker `worker`'s slice [b0, b1): its op on its stream; backward-weight leaves the
 * slice's HWIO gradient in the worker's buffer. */
static size_t floats_of(const dnnl_memory_desc_t *md)
{
    return (dnnl_memory_desc_get_size(md) + sizeof(float) - 1) / sizeof(float) + 16;
}

/* A scratchpad memory for `md` at p (none when oneDNN asks for none). */
static dnnl_memory_t scratch_mem(dnnl_engine_t eng, const dnnl_memory_desc_t *md, float *p)
{
    return dnnl_memory_desc_get_size(md) ? new_mem(eng, md, p) : NULL;
}

static bool slice_run(struct dnnl_job *j, dnnl_stream_t st, int64_t b0, int64_t b1, int worker)
{
    struct dnnl_shape *e = b1 - b0 == j->big->s.B ? j->big : j->small;
    dnnl_engine_t eng = dt_cpu(j->be)->dnnl->engine;
    const struct dt_conv2d_shape *s = j->s;
    const int64_t img = s->H * s->W * s->C, oimg = s->OH * s->OW * s->K_out;
    const int64_t nw = s->KH * s->KW * s->C * s->K_out;
    const size_t prim_floats = floats_of(&e->dw_md),
                 pad_floats = floats_of(&e->scratch_md[0]) + floats_of(&e->scratch_md[1]) +
                              floats_of(&e->scratch_md[2]) + floats_of(&e->scratch_md[3]);
    /* the worker's buffer: [HWIO gradient | the primitive's gradient | scratchpad] */
    float *buf = dt_cpu_worker_buffer(j->be, worker, (size_t)nw + prim_floats + pad_floats);
    float *pad = buf + nw + prim_floats;
    dnnl_memory_t m[6] = {0};
    bool ok = false;
    if (j->op == DNNL_FWD) {
        m[0] = new_mem(eng, &e->x_md, (void *)(j->in + b0 * img));
        m[1] = new_mem(eng, &e->y_md, j->out + b0 * oimg);
        m[2] = new_mem(eng, &e->b_md, (void *)j->bias);
        m[4] = scratch_mem(eng, &e->scratch_md[0], pad);
        const dnnl_exec_arg_t a[] = {{DNNL_ARG_SRC, m[0]},
                                     {DNNL_ARG_WEIGHTS, e->w_fwd},
                                     {DNNL_ARG_BIAS, m[2]},
                                     {DNNL_ARG_DST, m[1]},
                                     {DNNL_ARG_SCRATCHPAD, m[4]}};
        ok = m[0] && m[1] && m[2] && exec(st, e->fwd, m[4] ? 5 : 4, a);
    } else if (j->op == DNNL_BWD_DATA) {
        m[0] = new_mem(eng, &e->x_md, j->out + b0 * img);
        m[1] = new_mem(eng, &e->y_md, (void *)(j->in + b0 * oimg));
        m[4] = scratch_mem(eng, &e->scratch_md[1], pad);
        const dnnl_exec_arg_t a[] = {{DNNL_ARG_DIFF_SRC, m[0]},
                                     {DNNL_ARG_WEIGHTS, e->w_bwd},
                                     {DNNL_ARG_DIFF_DST, m[1]},
                                     {DNNL_ARG_SCRATCHPAD, m[4]}};
        ok = m[0] && m[1] && exec(st, e->bwd_data, m[4] ? 4 : 3, a);
    } else {
        m[0] = new_mem(eng, &e->x_md, (void *)(j->in + b0 * img));
        m[1] = new_mem(eng, &e->y_md, (void *)(j->dy + b0 * oimg));
        m[2] = new_mem(eng, &e->w_user_md, buf);
        m[3] = e->from_diff_w ? new_mem(eng, &e->dw_md, buf + nw) : NULL;
        m[4] = scratch_mem(eng, &e->scratch_md[2], pad);
        m[5] = scratch_mem(eng, &e->scratch_md[3], pad);
        dnnl_memory_t dwp = m[3] ? m[3] : m[2];
        const dnnl_exec_arg_t a[] = {{DNNL_ARG_SRC, m[0]},
                                     {DNNL_ARG_DIFF_WEIGHTS, dwp},
                                     {DNNL_ARG_DIFF_DST, m[1]},
                                     {DNNL_ARG_SCRATCHPAD, m[4]}};
        const dnnl_exec_arg_t r[] = {
            {DNNL_ARG_FROM, dwp}, {DNNL_ARG_TO, m[2]}, {DNNL_ARG_SCRATCHPAD, m[5]}};
        ok = m[0] && m[1] && m[2] && (m[3] || !e->from_diff_w) &&
             exec(st, e->bwd_w, m[4] ? 4 : 3, a) &&
             (!e->from_diff_w || exec(st, e->from_diff_w, m[5] ? 3 : 2, r));
    }
    for (int i = 0; i < 6; i++)
        if (m[i]) dnnl_memory_destroy(m[i]);
    return ok;
}

static void dnnl_part(void *ctx, int64_t begin, int64_t end, int worker)
{
    struct dnnl_job *j = ctx;
    struct dt_cpu_dnnl *d = dt_cpu(j->be)->dnnl;
    omp_set_num_threads(1); /* this thread's own OpenMP setting */
    if (!d->streams[worker] && dnnl_stream_create(&d->streams[worker], d->engine,
                                                  dnnl_stream_default_flags) != dnnl_success) {
        d->streams[worker] = NULL;
        j->failed[worker] = true;
        return;
    }
    j->failed[worker] = !slice_run(j, d->streams[worker], begin, end, worker);
}

/* Make the slices' shapes and reorder the weights for them, then run the job over the
 * pool. DT_ERR_UNSUPPORTED (nothing written) when oneDNN does not take the op: a policy
 * that asks for an order, or a shape it refuses. */
static enum dt_status run_job(struct dnnl_job *j, const struct dt_policy *pol, const char *what)
{
    struct dt_cpu_ctx *c = dt_cpu(j->be);
    struct dt_cpu_dnnl *d = c->dnnl;
    if (!library_allowed(c, pol, j->op)) return DT_ERR_UNSUPPORTED;
    const int T = dt_pool_threads(c->pool);
    j->parts = j->s->B < T ? (int)j->s->B : T; /* as dt_pool_run slices B with grain 1 */
    const int64_t base = j->s->B / j->parts, rem = j->s->B % j->parts;
    omp_set_num_threads(1);
    j->small = shape_for(d, j->s, base);
    j->big = rem ? shape_for(d, j->s, base + 1) : j->small;
    if (!j->small || !j->big) return DT_ERR_UNSUPPORTED;
    if (!d->streams[0] &&
        dnnl_stream_create(&d->streams[0], d->engine, dnnl_stream_default_flags) != dnnl_success)
        return DT_ERR_UNSUPPORTED;
    struct dnnl_shape *es[2] = {j->small, j->big};
    for (int k = 0; j->op != DNNL_BWD_W && k < (j->big == j->small ? 1 : 2); k++) {
        struct dnnl_shape *e = es[k];
        dnnl_primitive_t to = j->op == DNNL_FWD ? e->to_fwd_w : e->to_bwd_w;
        dnnl_memory_t dst = j->op == DNNL_FWD ? e->w_fwd : e->w_bwd;
        dnnl_memory_set_data_handle(e->w_user, (void *)j->w); /* dst itself when no reorder */
        const dnnl_exec_arg_t r[] = {{DNNL_ARG_FROM, e->w_user}, {DNNL_ARG_TO, dst}};
        if (to && !exec(d->streams[0], to, 2, r))
            return dt_backend_op_error(j->be, DT_ERR_INTERNAL, "oneDNN %s: weight reorder failed",
                                       what);
    }
    dt_pool_run(c->pool, j->s->B, 1, dnnl_part, j);
    for (int t = 0; t < j->parts; t++)
        if (j->failed[t])
            return dt_backend_op_error(j->be, DT_ERR_INTERNAL, "oneDNN %s failed", what);
    return DT_OK;
}

enum dt_status dt_cpu_dnnl_conv_forward(struct dt_backend *be, float *y, const float *x,
                                        const float *w, const float *bias,
                                        const struct dt_conv2d_shape *s,
                                        const struct dt_policy *pol)
{
    struct dnnl_job j = {.be = be, .op = DNNL_FWD, .s = s, .out = y, .in = x, .w = w, .bias = bias};
    return run_job(&j, pol, "convolution forward");
}

enum dt_status dt_cpu_dnnl_conv_backward_data(struct dt_backend *be, float *dx, const float *dy,
                                              const float *w, const struct dt_conv2d_shape *s,
                                              const struct dt_policy *pol)
{
    struct dnnl_job j = {.be = be, .op = DNNL_BWD_DATA, .s = s, .out = dx, .in = dy, .w = w};
    return run_job(&j, pol, "convolution backward-data");
}

/* The slices' weight gradients, each in its worker's buffer, added into dw in worker order
 * (a float sum over slices: `fast` promises no order; this one follows the thread count,
 * as every split does, and is the same at every run for one -- `pinned`'s promise). */
enum dt_status dt_cpu_dnnl_conv_backward_weight(struct dt_backend *be, float *dw, const float *x,
                                                const float *dy, const struct dt_conv2d_shape *s,
                                                const struct dt_policy *pol)
{
    struct dnnl_job j = {.be = be, .op = DNNL_BWD_W, .s = s, .in = x, .dy = dy};
    DT_FORWARD_IF_ERROR(run_job(&j, pol, "convolution backward-weight"));
    struct dt_cpu_ctx *c = dt_cpu(be);
    const int64_t nw = s->KH * s->KW * s->C * s->K_out;
    memcpy(dw, c->worker_buf[0], (size_t)nw * sizeof *dw);
    for (int t = 1; t < j.parts; t++) {
        const float *p = c->worker_buf[t];
        for (int64_t i = 0; i < nw; i++) dw[i] += p[i];
    }
    return DT_OK;
}

#else /* no oneDNN: conv.c runs every policy */

bool dt_cpu_dnnl_built(void) { return false; }

struct dt_cpu_dnnl *dt_cpu_dnnl_new(void) { return NULL; }
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
