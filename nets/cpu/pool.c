/* Max pooling on the CPU backend, NHWC (docs/DESIGN.md, "Determinism levels and controls").
 *
 *   forward   each output scans its window in (kh, kw) order and keeps the first maximum
 *             (a later equal value does not replace it; a NaN wins and ends the scan);
 *             argmax records ih * W + iw. No arithmetic, so no control acts here.
 *   backward  dx[b, argmax, c] += dy: a scatter-add when windows overlap (K > stride),
 *             where a cell can be the maximum of up to ceil(K/stride)^2 windows.
 *             Under `atomics`:
 *             fixed_point -> terms quantised at one per-tensor scale (max |dy|,
 *                            ceil(K/stride)^2 terms per cell), exact int64 sums, one
 *                            rounding; workers own whole images (order cannot matter).
 *             float       -> workers take output rows as they come and add with a float
 *                            compare-and-swap, in arrival order.
 *             Without overlap every cell receives at most one term: each image is
 *             written directly, and every control gives the same (exact) bits. */
#include <math.h>
#include <stdatomic.h>
#include <string.h>

#include "determinism/fixed_point.h"
#include "determinism/streams.h"
#include "nets/conv_elem.h"
#include "nets/cpu/cpu.h"
#include "nets/cpu/fixed_lanes.h"

struct pool_job {
    struct dt_backend *be;
    const struct dt_pool2d_shape *s;
    float *out;            /* y (forward) or dx (backward) */
    int32_t *argmax_out;   /* forward */
    const float *in;       /* x (forward) or dy (backward) */
    const int32_t *argmax; /* backward */
    int shift;
    atomic_llong next;
};

/* The scan for POOL_CHANNELS channels at once, in vector registers: dt_maxpool_take lane by
 * lane -- its rule's expressions (DT_MAXPOOL_TAKES, DT_MAXPOOL_ENDS) on vectors, their 0/1
 * flags the vectors' 0/-1 masks, its selects done with the masks.
 * tests/test_conv.c's maxpool_forward_matches_reference and maxpool_ties (ties, signed
 * zeros, NaNs, padding) hold it to dt_maxpool_window's scan at every level and ISA. */
#define POOL_CHANNELS 8
typedef float pool_vf __attribute__((vector_size(POOL_CHANNELS * 4)));
typedef int32_t pool_vi __attribute__((vector_size(POOL_CHANNELS * 4)));

static inline __attribute__((always_inline)) void
maxpool_take_vec(pool_vf *best, pool_vi *cell_of, pool_vi *done, pool_vf v, int32_t cell)
{
    const pool_vi take = DT_MAXPOOL_TAKES(*best, *done, v);
    *best = (pool_vf)((take & (pool_vi)v) | (~take & (pool_vi)*best));
    *cell_of = (take & cell) | (~take & *cell_of);
    *done = *done | DT_MAXPOOL_ENDS(v);
}

/* A cell's POOL_CHANNELS floats from c0 on: in place, or (a short block at the input's
 * end) its n floats and zeros. */
static inline __attribute__((always_inline)) void maxpool_cell(pool_vf *v, const float *row,
                                                               const float *end_x, int n)
{
    if (row + POOL_CHANNELS <= end_x) {
        memcpy(v, row, sizeof *v);
        return;
    }
    float t[POOL_CHANNELS] = {0};
    for (int c = 0; c < n; c++) t[c] = row[c];
    memcpy(v, t, sizeof *v);
}

/* Output rows (b, oh) [begin, end): each output element the first maximum of its window --
 * dt_maxpool_window's scan (the function the CUDA kernel calls), cell after cell, for a
 * block of POOL_CHANNELS channels at once, so each cell's channels are read as one contiguous
 * row. A short last block (all of C where C < 8: LeNet's first pool has 6) reads the next cells'
 * floats in its extra lanes, whose results are discarded (a lane's scan reads only its own
 * lane); near the input's end its run is copied into a padded row. One channel at a time,
 * the scan's compares were branches that the data mispredicted: 13% of LeNet's step; in
 * arrays of 16 the scan's state went through memory at every cell (LeNet's pool forward
 * ~40 ns a window, 1.06 ms of a 4.4 ms step at 1 thread): in registers now, 8 lanes (one
 * AVX2 vector; GCC's AVX-512 copy split 16-lane generic vectors lane by lane, 4x slower),
 * 0.38 ms (results/cpu/portable-cost/spec-tree-zen5/). */
DT_VECTOR_PART(maxpool_forward_part)
{
    (void)worker;
    const struct pool_job *j = ctx;
    const struct dt_pool2d_shape *s = j->s;
    const int64_t C = s->C;
    const float *const end_x = j->in + s->B * s->H * s->W * C;
    for (int64_t r = begin; r < end; r++) {
        const int64_t b = r / s->OH, oh = r % s->OH;
        const float *img = j->in + b * s->H * s->W * C;
        for (int64_t ow = 0; ow < s->OW; ow++) {
            const int64_t o = (r * s->OW + ow) * C, ih0 = oh * s->stride - s->pad,
                          iw0 = ow * s->stride - s->pad;
            int64_t kh0, kh1, kw0, kw1;
            dt_maxpool_bounds(s, ih0, iw0, &kh0, &kh1, &kw0, &kw1);
            const int32_t first = (int32_t)((ih0 + kh0) * s->W + iw0 + kw0);
            for (int64_t c0 = 0; c0 < C; c0 += POOL_CHANNELS) {
                const int n = C - c0 < POOL_CHANNELS ? (int)(C - c0) : POOL_CHANNELS;
                pool_vf best, v;
                maxpool_cell(&best, img + first * C + c0, end_x, n);
                pool_vi cell_of = {0}, done = {0};
                cell_of += first;
                for (int64_t kh = kh0; kh < kh1; kh++)
                    for (int64_t kw = kw0; kw < kw1; kw++) {
                        const int32_t cell = (int32_t)((ih0 + kh) * s->W + iw0 + kw);
                        maxpool_cell(&v, img + cell * C + c0, end_x, n);
                        maxpool_take_vec(&best, &cell_of, &done, v, cell);
                    }
                if (n == POOL_CHANNELS) {
                    memcpy(j->out + o + c0, &best, sizeof best);
                    memcpy(j->argmax_out + o + c0, &cell_of, sizeof cell_of);
                } else {
                    memcpy(j->out + o + c0, &best, (size_t)n * sizeof(float));
                    memcpy(j->argmax_out + o + c0, &cell_of, (size_t)n * sizeof(int32_t));
                }
            }
        }
    }
}

enum dt_status dt_cpu_maxpool2d_forward(struct dt_backend *be, float *y, int32_t *argmax,
                                        const float *x, const struct dt_pool2d_shape *s,
                                        const struct dt_policy *pol)
{
    struct pool_job job = {.be = be, .s = s, .out = y, .argmax_out = argmax, .in = x};
    dt_pool_run(dt_cpu(be)->pool, s->B * s->OH, 4, maxpool_forward_part, &job);
    return DT_OK;
}

/* No overlap: images [begin, end), zeroed then written directly (one term per cell). */
static void maxpool_backward_direct_part(void *ctx, int64_t begin, int64_t end, int worker)
{
    const struct pool_job *j = ctx;
    const struct dt_pool2d_shape *s = j->s;
    const int64_t n_img = s->H * s->W * s->C, n_out = s->OH * s->OW * s->C, C = s->C;
    for (int64_t b = begin; b < end; b++) {
        float *dx = j->out + b * n_img;
        memset(dx, 0, (size_t)n_img * sizeof *dx);
        for (int64_t i = 0; i < n_out; i++)
            dx[(int64_t)j->argmax[b * n_out + i] * C + i % C] = j->in[b * n_out + i];
    }
}

/* fixed_point: images [begin, end), exact int64 sums in the worker's buffer. */
DT_VECTOR_PART(maxpool_backward_fixed_part)
{
    const struct pool_job *j = ctx;
    const struct dt_pool2d_shape *s = j->s;
    const int64_t n_img = s->H * s->W * s->C, n_out = s->OH * s->OW * s->C, C = s->C;
    int64_t *acc = (int64_t *)dt_cpu_worker_buffer(j->be, worker, (size_t)(2 * n_img));
    const double scale = dt_fixed_scale(j->shift), dn = dt_fixed_scale(-j->shift);
    const v4d down = {dn, dn, dn, dn};
    for (int64_t b = begin; b < end; b++) {
        memset(acc, 0, (size_t)n_img * sizeof *acc);
        for (int64_t i = 0; i < n_out; i++) /* finite, within the max the shift was chosen for */
            acc[(int64_t)j->argmax[b * n_out + i] * C + i % C] +=
                dt_fixed_from_float_bounded(j->in[b * n_out + i], scale);
        round_fixed_run(j->out + b * n_img, acc, n_img, &down);
    }
}

/* Output position p = (b, oh, ow): every channel's term added to its argmax cell. */
static void scatter_position(const struct pool_job *j, int64_t p, bool atomic)
{
    const struct dt_pool2d_shape *s = j->s;
    const int64_t C = s->C, b = p / (s->OH * s->OW);
    float *dx = j->out + b * s->H * s->W * C;
    for (int64_t c = 0; c < C; c++) {
        float *cell = dx + (int64_t)j->argmax[p * C + c] * C + c;
        if (atomic) dt_cpu_atomic_add_float(cell, j->in[p * C + c]);
        else *cell += j->in[p * C + c];
    }
}

/* float: output rows (b, oh) taken as workers come for them; float CAS per term. */
static void maxpool_backward_float_part(void *ctx, int64_t begin, int64_t end, int worker)
{
    struct pool_job *j = ctx;
    const struct dt_pool2d_shape *s = j->s;
    for (;;) {
        int64_t r = atomic_fetch_add(&j->next, 1);
        if (r >= s->B * s->OH) break;
        for (int64_t ow = 0; ow < s->OW; ow++) scatter_position(j, r * s->OW + ow, true);
    }
}

/* x and y (the forward's) are not needed: argmax names each window's winner. */
enum dt_status dt_cpu_maxpool2d_backward(struct dt_backend *be, float *dx, const float *dy,
                                         const float *x, const float *y, const int32_t *argmax,
                                         const struct dt_pool2d_shape *s,
                                         const struct dt_policy *pol)
{
    (void)x;
    (void)y;
    struct pool_job job = {.be = be, .s = s, .out = dx, .in = dy, .argmax = argmax};
    atomic_init(&job.next, 0);
    struct dt_cpu_ctx *c = dt_cpu(be);
    if (s->K <= s->stride) {
        dt_pool_run(c->pool, s->B, 1, maxpool_backward_direct_part, &job);
        return DT_OK;
    }
    if (dt_atomics_exact(pol)) {
        float max_abs;
        int64_t bad;
        if (!dt_cpu_max_abs(be, dy, s->B * s->OH * s->OW * s->C, &max_abs, &bad)) {
            return dt_backend_op_error(be, DT_ERR_NUMERIC,
                                       "maxpool2d backward: non-finite gradient at element %lld",
                                       (long long)bad);
        }
        const int64_t per_axis = (s->K + s->stride - 1) / s->stride;
        job.shift = dt_fixed_shift_for(max_abs, per_axis * per_axis);
        dt_pool_run(c->pool, s->B, 1, maxpool_backward_fixed_part, &job);
        return DT_OK;
    }
    memset(dx, 0, (size_t)(s->B * s->H * s->W * s->C) * sizeof(float));
    const int64_t positions = s->B * s->OH * s->OW;
    if (c->forced_order) {
        int64_t *perm = dt_xmalloc((size_t)positions * sizeof *perm);
        dt_forced_permutation(perm, positions, c->forced_order, DT_FORCED_POSITIONS);
        for (int64_t t = 0; t < positions; t++) scatter_position(&job, perm[t], false);
        free(perm);
        return DT_OK;
    }
    dt_pool_run(c->pool, dt_pool_threads(c->pool), 1, maxpool_backward_float_part, &job);
    return DT_OK;
}

/* ---- global average pooling: each output its channel's mean, dt_gap_elem (no control acts) */

struct gap_job {
    float *out;
    const float *in;
    int64_t HW, C;
};

/* Images [begin, end): every channel's mean. */
static void gap_forward_part(void *ctx, int64_t begin, int64_t end, int worker)
{
    const struct gap_job *j = ctx;
    for (int64_t b = begin; b < end; b++)
        for (int64_t c = 0; c < j->C; c++)
            j->out[b * j->C + c] = dt_gap_elem(j->in + b * j->HW * j->C, j->HW, j->C, c);
}

enum dt_status dt_cpu_global_avgpool_forward(struct dt_backend *be, float *y, const float *x,
                                             int64_t B, int64_t HW, int64_t C,
                                             const struct dt_policy *pol)
{
    struct gap_job job = {.out = y, .in = x, .HW = HW, .C = C};
    dt_pool_run(dt_cpu(be)->pool, B, 1, gap_forward_part, &job);
    return DT_OK;
}

/* Images [begin, end): every pixel its channel's share of dy. */
static void gap_backward_part(void *ctx, int64_t begin, int64_t end, int worker)
{
    const struct gap_job *j = ctx;
    for (int64_t b = begin; b < end; b++)
        for (int64_t p = 0; p < j->HW; p++)
            for (int64_t c = 0; c < j->C; c++)
                j->out[(b * j->HW + p) * j->C + c] = dt_gap_grad_elem(j->in[b * j->C + c], j->HW);
}

enum dt_status dt_cpu_global_avgpool_backward(struct dt_backend *be, float *dx, const float *dy,
                                              int64_t B, int64_t HW, int64_t C,
                                              const struct dt_policy *pol)
{
    struct gap_job job = {.out = dx, .in = dy, .HW = HW, .C = C};
    dt_pool_run(dt_cpu(be)->pool, B, 1, gap_backward_part, &job);
    return DT_OK;
}

/* ---- average pooling: each output its window's mean, each input cell its windows' share (a
 * gather: dt_avgpool_out, dt_avgpool_cell -- no control acts) */

struct avg_job {
    const struct dt_pool2d_shape *s;
    float *out;
    const float *in;
    int64_t per_row; /* elements a row of the outer loop */
};

static void avgpool_forward_part(void *ctx, int64_t begin, int64_t end, int worker)
{
    const struct avg_job *j = ctx;
    for (int64_t o = begin * j->per_row; o < end * j->per_row; o++)
        j->out[o] = dt_avgpool_out(j->in, j->s, o);
}

enum dt_status dt_cpu_avgpool2d_forward(struct dt_backend *be, float *y, const float *x,
                                        const struct dt_pool2d_shape *s,
                                        const struct dt_policy *pol)
{
    struct avg_job job = {.s = s, .out = y, .in = x, .per_row = s->OW * s->C};
    dt_pool_run(dt_cpu(be)->pool, s->B * s->OH, 4, avgpool_forward_part, &job);
    return DT_OK;
}

static void avgpool_backward_part(void *ctx, int64_t begin, int64_t end, int worker)
{
    const struct avg_job *j = ctx;
    for (int64_t i = begin * j->per_row; i < end * j->per_row; i++)
        j->out[i] = dt_avgpool_cell(j->in, j->s, i);
}

enum dt_status dt_cpu_avgpool2d_backward(struct dt_backend *be, float *dx, const float *dy,
                                         const struct dt_pool2d_shape *s,
                                         const struct dt_policy *pol)
{
    struct avg_job job = {.s = s, .out = dx, .in = dy, .per_row = s->W * s->C};
    dt_pool_run(dt_cpu(be)->pool, s->B * s->H, 4, avgpool_backward_part, &job);
    return DT_OK;
}
