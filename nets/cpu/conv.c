/* 2-D convolution on the CPU backend, NHWC images and HWIO weights, as im2col plus the
 * dense kernels, so every control acts exactly where it acts for a dense layer
 * (docs/DESIGN.md, "Determinism levels and controls"). A patch row is the (kh, kw, c) window
 * of one output position (b, oh, ow), out-of-image cells zero; rows = B*OH*OW,
 * Kp = KH*KW*C.
 *
 *   forward          patches (rows, Kp) . w (Kp, K_out) + bias through dt_cpu_dense_forward:
 *                    `math: fast` -> OpenBLAS, otherwise the ordered kernel that sums the
 *                    patch in (kh, kw, c) order for every output. With stride 1, where it
 *                    pays (direct_takes), the same sums without patches: tiles of 16 output
 *                    positions x 6 channels read a padded channel-planar copy of the image
 *                    (direct_tile), the same roundings in the same order (same bits:
 *                    conv.conv2d_forward_ordered_bits) -- at every math but exact, so also
 *                    where oneDNN declines under `fast` or `run_to_run`. With 16 or more
 *                    outputs, a multiple of 8 (with AVX-512: 16), under the ordered sums
 *                    (math strict), tiles of 6 positions x 16 outputs read the padded NHWC
 *                    copy where each window is (win_forward, same bits). The patches, where
 *                    written, come from a padded NHWC copy (im2col: no bounds per element).
 *   backward-weight  patches^T . dy, a sum over batch AND positions, under `reduction`
 *                    (fixed -> canonical 32-row chunks + the fixed tree of reduce.h;
 *                    unordered -> the library's product, or with detrain's own sums the
 *                    fixed order's kernels, the faster (dt_cpu_wgrad_in_order), and under
 *                    the forced-order hook chunks added in a drawn order), by whichever
 *                    of the two same-bits forms of dense.c suits the shape; the patches are
 *                    built in the layout that form reads (rows, or already transposed from
 *                    the planar copy). Under an ordered reduction (fixed, exact, pinned;
 *                    math strict or fast) no patch and no partial is written where outputs
 *                    are few, 16, or a multiple of 8 without AVX-512 (pinned: few or 16):
 *                    chunk tiles (chunks_take) read the padded NHWC copy and keep the tree
 *                    as a stack (wgrad_chunks; same bits: conv.conv2d_backward_weight_fixed_bits),
 *                    under `exact` every shard's in one pool run
 *                    (dt_cpu_conv2d_backward_weight_shards).
 *   backward-data    dpatches = dy . w^T (dt_cpu_dense_backward_data, `math` as above),
 *                    then col2im: every patch row scattered back onto the image cells it
 *                    came from -- a cell receives up to KH*KW terms -- under `atomics`:
 *                    fixed_point -> each term quantised at ONE per-tensor scale (max
 *                                   |dpatch|, KH*KW terms per cell; fixed_point.h), int64
 *                                   sums, one rounding per cell. Exact sums do not depend
 *                                   on order, so each worker owns whole images and needs
 *                                   no atomic instruction (4 lanes at a time: a row's run
 *                                   per kh lands on consecutive cells); a GPU adding the
 *                                   same int64 terms with atomicAdd gets the same bits.
 *                    float       -> the fastest form: each worker owns whole images and
 *                                   adds their patch rows in row order with plain adds (no
 *                                   atomic instruction). Deterministic for any thread
 *                                   count, though the control allows any order: on the CPU
 *                                   `fast` has nothing to gain from arrival order here
 *                                   (measured: docs/performance.md); the forced-order hook
 *                                   (a drawn row order) still shows the control matters.
 * Under `math: exact` all three products are the dense ops' exact products (the weight
 * gradient over the patch rows at two levels), as on the GPU.
 * The bias gradient is dt_bias_backward over dy seen as a (rows, K_out) matrix.
 * Under `fast` (no control asking for an order) the three ops go to oneDNN first where
 * detrain is built with it (conv_dnnl.c: measured faster, docs/performance.md). */
#include <stdatomic.h>
#include <string.h>

#include "determinism/fixed_point.h"
#include "determinism/reduce.h"
#include "determinism/streams.h"
#include "nets/cpu/conv_dnnl.h"
#include "nets/cpu/cpu.h"
#include "nets/cpu/chunk_stack.h"
#include "nets/cpu/fixed_lanes.h"

/* v8f (chunk_stack.h), 8 floats: one AVX2 register (two SSE ones in the baseline copies of
 * cpu.h's loops). Mul and add stay two roundings (no contraction). */
#define DIRECT_O 6 /* output channels per tile: 6 x 2 accumulators, the AVX2 registers */

struct conv_job { /* col2im */
    struct dt_backend *be;
    const struct dt_conv2d_shape *s;
    float *dx; /* col2im output */
    const float *dcols;
    int shift; /* col2im fixed_point scale */
    atomic_llong next;
};

static inline int64_t conv_rows(const struct dt_conv2d_shape *s) { return s->B * s->OH * s->OW; }
static inline int64_t conv_patch(const struct dt_conv2d_shape *s) { return s->KH * s->KW * s->C; }

/* n floats copied or zeroed inline: a patch row's runs are a few floats (KW * C), too short
 * for a call to memcpy to pay. */
static inline void copy_floats(float *restrict d, const float *restrict s, int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) memcpy(d + i, s + i, 8 * sizeof(float));
    if (i + 4 <= n) memcpy(d + i, s + i, 4 * sizeof(float)), i += 4;
    switch (n - i) {
    case 3: d[i + 2] = s[i + 2]; /* fall through */
    case 2: d[i + 1] = s[i + 1]; /* fall through */
    case 1: d[i] = s[i];
    }
}

/* ---- the padded NHWC copy of x: im2col, and the weight gradient's chunk tiles -------- */
struct padded_job {
    const struct dt_conv2d_shape *s;
    const float *x;
    float *xn;   /* x padded, NHWC (Hp, Wp, C per image) */
    float *cols; /* im2col: the patch rows (rows, Kp) */
};

/* Floats of the padded NHWC copy (Hp, Wp, C per image), plus 8 read past the last run by
 * the chunk tiles (zeros, dropped). */
static size_t padded_floats(const struct dt_conv2d_shape *s)
{
    return (size_t)(s->B * (s->H + 2 * s->pad) * (s->W + 2 * s->pad) * s->C) + 8;
}

/* Images [begin, end) of x into the padded NHWC copy, zeros around (and after). */
static void pad_nhwc_part(void *ctx, int64_t begin, int64_t end, int worker)
{
    const struct padded_job *j = ctx;
    const struct dt_conv2d_shape *s = j->s;
    const int64_t Wp = s->W + 2 * s->pad, Hp = s->H + 2 * s->pad, C = s->C;
    for (int64_t b = begin; b < end; b++) {
        float *dst = j->xn + b * Hp * Wp * C;
        memset(dst, 0, (size_t)(Hp * Wp * C) * sizeof(float));
        for (int64_t ih = 0; ih < s->H; ih++)
            memcpy(dst + ((ih + s->pad) * Wp + s->pad) * C, j->x + (b * s->H + ih) * s->W * C,
                   (size_t)(s->W * C) * sizeof(float));
        if (b == s->B - 1) memset(dst + Hp * Wp * C, 0, 8 * sizeof(float));
    }
}

/* Patch rows [begin, end) into cols (rows, Kp), each kh's run of KW * C elements copied
 * from the padded NHWC copy (j->xn): no bounds to test, no division per row. */
static void im2col_part(void *ctx, int64_t begin, int64_t end, int worker)
{
    const struct padded_job *j = ctx;
    const struct dt_conv2d_shape *s = j->s;
    const int64_t Kp = conv_patch(s), C = s->C, run = s->KW * C;
    const int64_t Wp = s->W + 2 * s->pad, Hp = s->H + 2 * s->pad;
    int64_t b = begin / (s->OH * s->OW), oh = begin / s->OW % s->OH, ow = begin % s->OW;
    for (int64_t r = begin; r < end; r++) {
        const float *win = j->xn + ((b * Hp + oh * s->stride) * Wp + ow * s->stride) * C;
        for (int64_t kh = 0; kh < s->KH; kh++)
            copy_floats(j->cols + r * Kp + kh * run, win + kh * Wp * C, run);
        if (++ow == s->OW && (ow = 0, ++oh == s->OH)) oh = 0, b++;
    }
}

/* Every patch row of x into the backend's cols buffer (which it returns). */
static float *im2col(struct dt_backend *be, const float *x, const struct dt_conv2d_shape *s)
{
    struct padded_job job = {.s = s, .x = x};
    job.xn = dt_cpu_scratch(be, padded_floats(s));
    job.cols = dt_cpu_cols(be, (size_t)(conv_rows(s) * conv_patch(s)));
    struct dt_pool *pool = dt_cpu(be)->pool;
    dt_pool_run(pool, s->B, 1, pad_nhwc_part, &job);
    dt_pool_run(pool, conv_rows(s), 64, im2col_part, &job);
    return job.cols;
}

/* ---- backward-weight with few outputs, reduction fixed: no patches, no partials ------ *
 * dense.c's rows form's values (each canonical chunk's partial from +0 over the chunk's
 * rows in order, then the fixed tree over the chunks) with no patch written out and no
 * partial stored: the padded NHWC copy of x holds every patch row's kh-th run of KW * C
 * elements contiguously, and a tile of 8 elements of one run x DIRECT_O outputs reads it
 * there while a chunk's rows go by; two tiles at once share dy's broadcasts. Each tile
 * keeps its chunk partials' tree as a stack (reduce.h: dt_reduce_stack_merges, the pairs of
 * dt_reduce_tree_vectors) and writes its sum once into dw (Kp, K_out). Over the batch, or
 * per shard into the shard's slot (reduction exact): the shard's images alone, as the op
 * on them. The same products, summed over the same rows in the same order from +0, the
 * same tree: the same bits (conv.conv2d_backward_weight_fixed_bits, exact.ops_per_shard).
 * With 16 outputs or more the lanes run over the outputs instead (out_tiles, below); where
 * their count is not a multiple of 8, or above 16 with AVX-512, the transposed patches and
 * dense.c's tiles. */
struct chunks_job {
    const struct dt_conv2d_shape *s;
    const float *xn, *dy;    /* xn: x padded, NHWC */
    float *dw;               /* slot k at dw + k * Kp * K_out */
    const int64_t *row;      /* slot k: images [row[k], row[k + 1]) */
    int64_t pairs, groups;   /* per slot: pairs of tiles x groups of DIRECT_O outputs */
    int64_t etiles, oblocks; /* lanes over outputs: OUT_MR elements x 16 outputs a tile */
    /* one slot whose tiles are too few for the pool (wgrad_chunks_split): each tile's chunks
     * in `blocks` aligned blocks of `block` chunks (a power of two), each block's tree left
     * in parts (TILE_FLOATS floats an item), the tree of the block results after */
    int64_t blocks, block;
    float *parts;
};

/* What both chunk-tile kernels below share: the tile's chunk partials as a stack
 * (chunk_stack.h: STACK_V vectors, DIRECT_O x 2 or OUT_MR x 2). A row's window in the padded
 * NHWC copy moves by one of three steps: along ow, to the next oh, to the next image. */
struct win_walk {
    const float *win; /* the current row's window (plus the caller's offset) */
    int64_t oh, ow;   /* the current row's output position */
    int64_t w, h, b;  /* the steps */
};

/* Slot k's first row (image row[k], position (0, 0)), the window at `off`. */
static inline struct win_walk win_walk_at(const struct chunks_job *j, int64_t k, int64_t off)
{
    const struct dt_conv2d_shape *s = j->s;
    const int64_t C = s->C, Wp = s->W + 2 * s->pad, Hp = s->H + 2 * s->pad, st = s->stride;
    struct win_walk r = {.win = j->xn + j->row[k] * Hp * Wp * C + off, .w = st * C};
    r.h = st * Wp * C - (s->OW - 1) * r.w;
    r.b = Hp * Wp * C - (s->OH - 1) * st * Wp * C - (s->OW - 1) * r.w;
    return r;
}

static inline __attribute__((always_inline)) void win_next(struct win_walk *r,
                                                           const struct dt_conv2d_shape *s)
{
    if (++r->ow < s->OW) r->win += r->w;
    else if (r->ow = 0, ++r->oh < s->OH) r->win += r->h;
    else r->oh = 0, r->win += r->b;
}

/* Tile q's first patch element: run kh = q / nv, elements v .. v + 7 of it. */
static inline int64_t tile_k0(const struct dt_conv2d_shape *s, int64_t q)
{
    const int64_t run = s->KW * s->C, nv = (run + 7) / 8;
    return q / nv * run + q % nv * 8;
}

#define TILE_FLOATS (2 * DIRECT_O * 8) /* a pair of chunk tiles: a[2][DIRECT_O] */

/* Slot k's row r0 (a chunk's first): win_walk_at's walk moved on to it. */
static inline struct win_walk win_walk_row(const struct chunks_job *j, int64_t k, int64_t off,
                                           int64_t r0)
{
    const struct dt_conv2d_shape *s = j->s;
    const int64_t C = s->C, Wp = s->W + 2 * s->pad, Hp = s->H + 2 * s->pad, st = s->stride;
    const int64_t pos = r0 % (s->OH * s->OW);
    struct win_walk r = win_walk_at(j, k, off);
    r.oh = pos / s->OW, r.ow = pos % s->OW;
    r.win += r0 / (s->OH * s->OW) * Hp * Wp * C + r.oh * st * Wp * C + r.ow * st * C;
    return r;
}

/* A pair of tiles' sums into slot k of dw: tile h's patch elements k0[h] .. of one run. */
static void store_tiles(const struct chunks_job *j, int64_t k, int64_t q0, bool two, int64_t o0,
                        int no, const float *a)
{
    const struct dt_conv2d_shape *s = j->s;
    const int64_t K = s->K_out, run = s->KW * s->C;
    float *dw = j->dw + k * conv_patch(s) * K;
    for (int h = 0; h < (two ? 2 : 1); h++) {
        const int64_t k0 = tile_k0(s, q0 + h), nk = run - k0 % run < 8 ? run - k0 % run : 8;
        for (int g = 0; g < no; g++)
            for (int64_t l = 0; l < nk; l++)
                dw[(k0 + l) * K + o0 + g] = a[(h * DIRECT_O + g) * 8 + l];
    }
}

/* Tiles q0 and (two) q0 + 1 of slot k for outputs [o0, o0 + no), over the slot's chunks
 * [c0, c1): all of them (out NULL: the sums stored into dw), or one aligned block of them,
 * whose tree is the fixed tree's node over its leaves (reduce.h), left in out. */
static inline __attribute__((always_inline)) void chunk_tiles(const struct chunks_job *j, int64_t k,
                                                              int64_t q0, bool two, int64_t o0,
                                                              int no, int64_t c0, int64_t c1,
                                                              float *out)
{
    const struct dt_conv2d_shape *s = j->s;
    const int64_t K = s->K_out, C = s->C, run = s->KW * C;
    const int64_t Wp = s->W + 2 * s->pad, P = s->OH * s->OW;
    const int64_t rows = (j->row[k + 1] - j->row[k]) * P;
    const int64_t k0[2] = {tile_k0(s, q0), two ? tile_k0(s, q0 + 1) : 0};
    const int64_t off0 = k0[0] / run * Wp * C + k0[0] % run; /* in a window */
    const int64_t off1 = two ? k0[1] / run * Wp * C + k0[1] % run - off0 : 0;
    v8f stack[DT_REDUCE_STACK_MAX][STACK_V];
    int depth = 0;
    struct win_walk r = win_walk_row(j, k, off0, c0 * DT_REDUCE_CHUNK);
    const float *d = j->dy + (j->row[k] * P + c0 * DT_REDUCE_CHUNK) * K + o0;
    v8f a[2][DIRECT_O];
#pragma GCC unroll 6
    for (int g = 0; g < DIRECT_O; g++) a[0][g] = a[1][g] = (v8f){0}; /* from +0 (chunk_stack.h) */
    for (int64_t c = c0; c < c1; c++) {
        const int64_t len = rows - c * DT_REDUCE_CHUNK < DT_REDUCE_CHUNK
                                ? rows - c * DT_REDUCE_CHUNK
                                : DT_REDUCE_CHUNK;
        for (int64_t i = 0; i < len; i++, d += K, win_next(&r, s)) {
            v8f x0, x1;
            memcpy(&x0, r.win, sizeof x0);
            if (two) memcpy(&x1, r.win + off1, sizeof x1);
#pragma GCC unroll 6
            for (int g = 0; g < no; g++) {
                a[0][g] = a[0][g] + x0 * d[g];
                if (two) a[1][g] = a[1][g] + x1 * d[g];
            }
        }
        stack_take(stack, &depth, a[0], c - c0, c == c1 - 1); /* the block's own tree */
    }
    if (out) memcpy(out, a, sizeof a);
    else store_tiles(j, k, q0, two, o0, no, (const float *)a);
}

/* Items [begin, end): (slot, output group, pair of tiles), or with blocks (one slot)
 * (block of chunks, output group, pair of tiles): a block's rows read by its tiles in turn
 * while they are in cache. */
DT_VECTOR_PART(wgrad_chunks_part)
{
    const struct chunks_job *j = ctx;
    const struct dt_conv2d_shape *s = j->s;
    const int64_t tiles = s->KH * ((s->KW * s->C + 7) / 8);
    for (int64_t t = begin; t < end; t++) {
        const int64_t items = j->groups * j->pairs, outer = t / items, u = t % items;
        const int64_t k = j->blocks == 1 ? outer : 0, b = j->blocks == 1 ? 0 : outer;
        const int64_t o0 = u / j->pairs % j->groups * DIRECT_O;
        const int64_t q0 = u % j->pairs * 2;
        const int64_t n_chunks = dt_reduce_chunks((j->row[k + 1] - j->row[k]) * s->OH * s->OW);
        const int64_t c0 = b * j->block;
        const int64_t c1 = j->blocks == 1 || c0 + j->block > n_chunks ? n_chunks : c0 + j->block;
        float *out = j->blocks == 1 ? NULL : j->parts + t * TILE_FLOATS;
        const bool two = q0 + 1 < tiles, full = o0 + DIRECT_O <= s->K_out;
        const int no = full ? DIRECT_O : (int)(s->K_out - o0);
        if (two && full) chunk_tiles(j, k, q0, true, o0, DIRECT_O, c0, c1, out);
        else if (full) chunk_tiles(j, k, q0, false, o0, DIRECT_O, c0, c1, out);
        else if (two) chunk_tiles(j, k, q0, true, o0, no, c0, c1, out);
        else chunk_tiles(j, k, q0, false, o0, no, c0, c1, out);
    }
}

/* Lanes over outputs (K_out a multiple of 8, 16 or more): a tile of ne <= OUT_MR patch
 * elements e0 .. x 8 outputs o0 .. (two: 16), each row's patch elements broadcast from the
 * window and dy's row read in place; the chunk partials' tree as a stack, as above. */
#define OUT_MR 6 /* patch elements a tile: 6 x 2 accumulators, the AVX2 registers */

static inline __attribute__((always_inline)) void out_tiles(const struct chunks_job *j, int64_t k,
                                                            int64_t e0, int ne, int64_t o0,
                                                            bool two, bool in_run)
{
    const struct dt_conv2d_shape *s = j->s;
    const int64_t K = s->K_out, C = s->C, run = s->KW * C, Kp = conv_patch(s);
    const int64_t Wp = s->W + 2 * s->pad, P = s->OH * s->OW;
    const int64_t rows = (j->row[k + 1] - j->row[k]) * P, n_chunks = dt_reduce_chunks(rows);
    int64_t off[OUT_MR]; /* element e0 + e in a window */
    for (int e = 0; e < OUT_MR; e++) {
        const int64_t q = e0 + (e < ne ? e : 0);
        off[e] = q / run * Wp * C + q % run;
    }
    v8f stack[DT_REDUCE_STACK_MAX][STACK_V];
    int depth = 0;
    struct win_walk r = win_walk_at(j, k, off[0]); /* at element e0 */
    const float *d = j->dy + j->row[k] * P * K + o0;
    v8f a[OUT_MR][2];
#pragma GCC unroll 6
    for (int e = 0; e < OUT_MR; e++) a[e][0] = a[e][1] = (v8f){0}; /* from +0 (chunk_stack.h) */
    for (int64_t c = 0; c < n_chunks; c++) {
        const int64_t len = rows - c * DT_REDUCE_CHUNK < DT_REDUCE_CHUNK
                                ? rows - c * DT_REDUCE_CHUNK
                                : DT_REDUCE_CHUNK;
        for (int64_t i = 0; i < len; i++, d += K, win_next(&r, s)) {
            v8f d0, d1 = {0};
            memcpy(&d0, d, sizeof d0);
            if (two) memcpy(&d1, d + 8, sizeof d1);
#pragma GCC unroll 6
            for (int e = 0; e < ne; e++) {
                const float xv = in_run ? r.win[e] : r.win[off[e] - off[0]];
                a[e][0] = a[e][0] + xv * d0;
                if (two) a[e][1] = a[e][1] + xv * d1;
            }
        }
        stack_take(stack, &depth, a[0], c, c == n_chunks - 1);
    }
    float *dw = j->dw + k * Kp * K;
    for (int e = 0; e < ne; e++)
        memcpy(dw + (e0 + e) * K + o0, &a[e][0], (two ? 16 : 8) * sizeof(float));
}

/* The other tiles (short, 8 outputs, or across two runs): one copy for them all. */
DT_VECTOR_FN(out_tiles_any,
             (const struct chunks_job *j, int64_t k, int64_t e0, int ne, int64_t o0, bool two,
              bool in_run),
             (j, k, e0, ne, o0, two, in_run))
{
    out_tiles(j, k, e0, ne, o0, two, in_run);
}

/* Items [begin, end): (slot, tile of elements, block of 16 outputs). */
DT_VECTOR_PART(wgrad_outs_part)
{
    const struct chunks_job *j = ctx;
    const struct dt_conv2d_shape *s = j->s;
    const int64_t Kp = conv_patch(s), run = s->KW * s->C;
    for (int64_t t = begin; t < end; t++) {
        const int64_t k = t / (j->etiles * j->oblocks);
        const int64_t e0 = t / j->oblocks % j->etiles * OUT_MR, o0 = t % j->oblocks * 16;
        const int ne = e0 + OUT_MR <= Kp ? OUT_MR : (int)(Kp - e0);
        const bool two = o0 + 16 <= s->K_out, in_run = e0 % run + ne <= run;
        if (ne == OUT_MR && two && in_run) out_tiles(j, k, e0, OUT_MR, o0, true, true);
        else out_tiles_any(j, k, e0, ne, o0, two, in_run);
    }
}

/* One slot whose pairs of tiles x output groups are fewer than the pool can share out
 * evenly (LeNet's first convolution under an ordered reduction on one rank: 3 items on 2
 * threads; `exact`'s 4 shards give it 12): each tile's chunks in aligned blocks of a power
 * of two, about 16 items a thread, each block's tree in registers, then the tree of the
 * block results (wgrad_chunks_join) -- the fixed tree's pairs all the same
 * (dt_reduce_tree_blocked: the tree of m leaves is the tree of its aligned blocks' trees),
 * so the same bits (conv.conv2d_backward_weight_fixed_bits). */
int64_t dt_cpu_chunk_block(int64_t n_chunks, int64_t items, int threads)
{
    if (threads < 2 || items >= 4 * threads) return 0;
    const int64_t want = (16 * threads + items - 1) / items; /* blocks a tile */
    int64_t block = 1;
    while (2 * block * want <= n_chunks) block *= 2;
    return block < 16 ? 0 : block; /* too few chunks to pay for the join: 0 */
}

static void wgrad_chunks_split(struct dt_backend *be, struct chunks_job *j)
{
    const int64_t items = j->groups * j->pairs;
    const int64_t n_chunks = dt_reduce_chunks((j->row[1] - j->row[0]) * j->s->OH * j->s->OW);
    const int64_t block = dt_cpu_chunk_block(n_chunks, items, dt_pool_threads(dt_cpu(be)->pool));
    if (!block) return;
    j->block = block;
    j->blocks = (n_chunks + block - 1) / block;
    j->parts = dt_cpu_partials(be, (size_t)(j->blocks * items * TILE_FLOATS));
}

/* The tree of each tile's block results, in block order, then the tile's sums into dw. */
static void wgrad_chunks_join(const struct chunks_job *j)
{
    const int64_t tiles = j->s->KH * ((j->s->KW * j->s->C + 7) / 8);
    const int64_t items = j->groups * j->pairs;
    for (int64_t u = 0; u < items; u++) {
        float *p = j->parts + u * TILE_FLOATS; /* block b's at + b * items * TILE_FLOATS */
        dt_reduce_tree_vectors(p, j->blocks, TILE_FLOATS, items * TILE_FLOATS);
        const int64_t o0 = u / j->pairs * DIRECT_O, q0 = u % j->pairs * 2;
        const int no = o0 + DIRECT_O <= j->s->K_out ? DIRECT_O : (int)(j->s->K_out - o0);
        store_tiles(j, 0, q0, q0 + 1 < tiles, o0, no, p);
    }
}

/* dw's slots for images [row[k], row[k + 1]), k < count: the chunk tiles over a padded
 * copy of the whole batch, one pool run over every slot's tiles. */
static void wgrad_chunks(struct dt_backend *be, float *dw, const float *x, const float *dy,
                         const struct dt_conv2d_shape *s, const int64_t *row, int64_t count)
{
    struct padded_job pad = {.s = s, .x = x};
    pad.xn = dt_cpu_scratch(be, padded_floats(s));
    struct dt_pool *pool = dt_cpu(be)->pool;
    dt_pool_run(pool, s->B, 1, pad_nhwc_part, &pad);
    const int64_t tiles = s->KH * ((s->KW * s->C + 7) / 8);
    struct chunks_job job = {.s = s,
                             .xn = pad.xn,
                             .dy = dy,
                             .dw = dw,
                             .row = row,
                             .pairs = (tiles + 1) / 2,
                             .groups = (s->K_out + DIRECT_O - 1) / DIRECT_O};
    if (s->K_out < 16) {
        job.blocks = 1;
        if (count == 1) wgrad_chunks_split(be, &job);
        dt_pool_run(pool, count * job.groups * job.pairs * job.blocks, 1, wgrad_chunks_part, &job);
        if (job.blocks > 1) wgrad_chunks_join(&job);
        return;
    }
    job.etiles = (conv_patch(s) + OUT_MR - 1) / OUT_MR;
    job.oblocks = (s->K_out + 15) / 16;
    dt_pool_run(pool, count * job.etiles * job.oblocks, 1, wgrad_outs_part, &job);
}

/* ---- forward with 16 or more outputs: the ordered sums read from the padded image ------ *
 * A tile of up to OUT_MR output positions of one image x 16 outputs (two vectors): for k =
 * (kh, kw, c) ascending, acc = acc + x * w with x the position's patch element broadcast
 * from its window in the padded NHWC copy and w's row k read where it is; y = acc + bias --
 * the ordered kernel's roundings (dense.c) one by one, with no patch written out (same bits:
 * conv.conv2d_forward_ordered_bits). */
struct win_job {
    const struct dt_conv2d_shape *s;
    const float *xn, *w, *bias;
    float *y;
    int64_t ptiles, oblocks; /* per image: tiles of positions x blocks of 16 outputs */
};

static inline __attribute__((always_inline)) void win_tile(const struct win_job *j, int64_t b,
                                                           int64_t p0, int np, int64_t o0, bool two)
{
    const struct dt_conv2d_shape *s = j->s;
    const int64_t K = s->K_out, C = s->C, run = s->KW * C;
    const int64_t Wp = s->W + 2 * s->pad, Hp = s->H + 2 * s->pad, st = s->stride;
    const float *win[OUT_MR]; /* position p0 + i's window */
    for (int i = 0; i < OUT_MR; i++) {
        const int64_t p = p0 + (i < np ? i : 0), oh = p / s->OW, ow = p % s->OW;
        win[i] = j->xn + ((b * Hp + oh * st) * Wp + ow * st) * C;
    }
    v8f a[OUT_MR][2];
#pragma GCC unroll 6
    for (int i = 0; i < OUT_MR; i++) a[i][0] = a[i][1] = (v8f){0};
    const float *wk = j->w + o0;
    for (int64_t kh = 0; kh < s->KH; kh++)
        for (int64_t e = kh * Wp * C; e < kh * Wp * C + run; e++, wk += K) {
            v8f w0, w1 = {0};
            memcpy(&w0, wk, sizeof w0);
            if (two) memcpy(&w1, wk + 8, sizeof w1);
#pragma GCC unroll 6
            for (int i = 0; i < np; i++) {
                const float xv = win[i][e];
                a[i][0] = a[i][0] + xv * w0;
                if (two) a[i][1] = a[i][1] + xv * w1;
            }
        }
    v8f b0, b1 = {0};
    memcpy(&b0, j->bias + o0, sizeof b0);
    if (two) memcpy(&b1, j->bias + o0 + 8, sizeof b1);
    float *y = j->y + (b * s->OH * s->OW + p0) * K + o0;
    for (int i = 0; i < np; i++, y += K) {
        const v8f y0 = a[i][0] + b0, y1 = a[i][1] + b1;
        memcpy(y, &y0, sizeof y0);
        if (two) memcpy(y + 8, &y1, sizeof y1);
    }
}

/* The other tiles (an image's last positions, 8 outputs): one copy for them all. */
DT_VECTOR_FN(win_tile_any,
             (const struct win_job *j, int64_t b, int64_t p0, int np, int64_t o0, bool two),
             (j, b, p0, np, o0, two))
{
    win_tile(j, b, p0, np, o0, two);
}

/* Items [begin, end): (image, tile of positions, block of 16 outputs). */
DT_VECTOR_PART(win_forward_part)
{
    const struct win_job *j = ctx;
    const struct dt_conv2d_shape *s = j->s;
    const int64_t P = s->OH * s->OW;
    for (int64_t t = begin; t < end; t++) {
        const int64_t b = t / (j->ptiles * j->oblocks);
        const int64_t p0 = t / j->oblocks % j->ptiles * OUT_MR, o0 = t % j->oblocks * 16;
        const int np = p0 + OUT_MR <= P ? OUT_MR : (int)(P - p0);
        const bool two = o0 + 16 <= s->K_out;
        if (np == OUT_MR && two) win_tile(j, b, p0, OUT_MR, o0, true);
        else win_tile_any(j, b, p0, np, o0, two);
    }
}

/* The outputs the lanes-over-outputs tiles (the window tiles forward, the chunk tiles'
 * out_tiles backward) take: 16 or more, a multiple of 8 -- with AVX-512 one strip of 16
 * alone. Against dense.c's 16-lane tiles over the patches on a Zen 5, LeNet's second layer
 * (16 outputs) went from 1.31x to 1.06x `fast` forward and 2.16x to 1.29x in the weight
 * gradient under portable (results/cpu/portable-cost/conv-tiles-zen5/summary.txt); the
 * ResNet's 32-128 outputs were slower on the tiles in a first try (not committed), so they
 * keep dense.c's. */
static bool out_strips_take(const struct dt_conv2d_shape *s)
{
    return s->K_out >= 16 && s->K_out % 8 == 0 && (s->K_out == 16 || !dt_cpu_wide());
}

/* Where the window tiles run: the ordered sums (math strict), out_strips_take's outputs. */
static bool win_forward_takes(const struct dt_conv2d_shape *s, const struct dt_policy *pol)
{
    return out_strips_take(s) && !dt_math_fast(pol) && !dt_math_exact(pol);
}

static void win_forward(struct dt_backend *be, float *y, const float *x, const float *w,
                        const float *bias, const struct dt_conv2d_shape *s)
{
    struct padded_job pad = {.s = s, .x = x};
    pad.xn = dt_cpu_scratch(be, padded_floats(s));
    struct dt_pool *pool = dt_cpu(be)->pool;
    dt_pool_run(pool, s->B, 1, pad_nhwc_part, &pad);
    struct win_job job = {.s = s,
                          .xn = pad.xn,
                          .w = w,
                          .bias = bias,
                          .y = y,
                          .ptiles = (s->OH * s->OW + OUT_MR - 1) / OUT_MR,
                          .oblocks = (s->K_out + 15) / 16};
    dt_pool_run(pool, s->B * job.ptiles * job.oblocks, 1, win_forward_part, &job);
}

/* ---- direct forward, stride 1: the ordered product without patches --------------------- */

/* The image padded and channel-planar: plane c of image b holds rows of Wp = W + 2 pad
 * floats, zeros around the image, then DIRECT_TAIL zeros after the last plane. With
 * stride 1 output (oh, ow) sits at q = oh * Wp + ow on the same grid, and its patch
 * element (kh, kw, c) at plane c, q + kh * Wp + kw: for consecutive q, consecutive floats.
 * A vector of q's reads one contiguous run per patch element; the grid's columns ow >= OW
 * are computed and dropped (they read the next row, or the tail). */
#define DIRECT_Q 16 /* output positions per tile: two 8-lane vectors */
#define DIRECT_TAIL (DIRECT_Q + 64)

struct direct_job {
    const struct dt_conv2d_shape *s;
    const float *x, *w, *bias;
    float *xp, *y;
    int64_t Wp, plane; /* floats a padded row, a padded plane (Hp * Wp) */
};

/* Where the tiles beat im2col and the ordered product (measured on LeNet's and the ResNet's
 * shapes, docs/performance.md): stride 1, and either few output channels (the product's
 * 16-column strips mostly padding) or a grid whose dropped columns cost under 15% of the
 * lanes. */
static bool direct_takes(const struct dt_conv2d_shape *s)
{
    if (s->stride != 1 || s->OW != s->W + 2 * s->pad - s->KW + 1) return false;
    const int64_t Wp = s->W + 2 * s->pad, nq = (s->OH - 1) * Wp + s->OW;
    const int64_t lanes = (nq + DIRECT_Q - 1) / DIRECT_Q * DIRECT_Q;
    return s->K_out < 16 || 100 * s->OH * s->OW >= 85 * lanes;
}

static void direct_pad_part(void *ctx, int64_t begin, int64_t end, int worker)
{
    const struct direct_job *j = ctx;
    const struct dt_conv2d_shape *s = j->s;
    for (int64_t b = begin; b < end; b++) {
        float *dst = j->xp + b * s->C * j->plane;
        const float *img = j->x + b * s->H * s->W * s->C;
        memset(dst, 0, (size_t)(s->C * j->plane) * sizeof(float));
        for (int64_t c = 0; c < s->C; c++)
            for (int64_t ih = 0; ih < s->H; ih++) {
                float *row = dst + c * j->plane + (ih + s->pad) * j->Wp + s->pad;
                const float *src = img + ih * s->W * s->C + c;
                for (int64_t iw = 0; iw < s->W; iw++) row[iw] = src[iw * s->C];
            }
    }
}

/* One tile: outputs q0 .. q0 + 15 of image b, channels o0 .. o0 + no - 1 (no <= DIRECT_O):
 * acc = +0, acc = acc + x * w for k = (kh, kw, c) ascending, y = acc + bias -- the ordered
 * kernel's roundings (dense.c), one by one. */
static inline __attribute__((always_inline)) void direct_tile(const struct direct_job *j, int64_t b,
                                                              int64_t q0, int64_t o0, int no)
{
    const struct dt_conv2d_shape *s = j->s;
    const int64_t C = s->C, K = s->K_out;
    const float *xb = j->xp + b * C * j->plane + q0;
    v8f a0[DIRECT_O], a1[DIRECT_O];
#pragma GCC unroll 6
    for (int o = 0; o < DIRECT_O; o++)
        a0[o] = a1[o] = (v8f){0}; /* all: no is a constant only in the first call */
    const float *wk = j->w + o0;
    for (int64_t kh = 0; kh < s->KH; kh++)
        for (int64_t kw = 0; kw < s->KW; kw++) {
            const float *xq = xb + kh * j->Wp + kw;
            for (int64_t c = 0; c < C; c++, wk += K, xq += j->plane) {
                v8f x0, x1;
                memcpy(&x0, xq, sizeof x0), memcpy(&x1, xq + 8, sizeof x1);
#pragma GCC unroll 6
                for (int o = 0; o < no; o++) {
                    const float wv = wk[o];
                    a0[o] = a0[o] + x0 * wv;
                    a1[o] = a1[o] + x1 * wv;
                }
            }
        }
    float out[DIRECT_O][DIRECT_Q];
    const float *bias = j->bias + o0;
#pragma GCC unroll 6
    for (int o = 0; o < no; o++) {
        const v8f t0 = a0[o] + bias[o], t1 = a1[o] + bias[o];
        memcpy(out[o], &t0, sizeof t0);
        memcpy(out[o] + 8, &t1, sizeof t1);
    }
    /* the tile's lanes in runs along one row of the grid; a run's first OW - ow lanes are
     * outputs, consecutive in y */
    float *const yb = j->y + b * s->OH * s->OW * K + o0;
    const int64_t Wp = j->Wp, OW = s->OW;
    for (int64_t l = 0, q = q0; l < DIRECT_Q && q / Wp < s->OH;) {
        const int64_t oh = q / Wp, ow = q % Wp;
        const int64_t run = DIRECT_Q - l < Wp - ow ? DIRECT_Q - l : Wp - ow;
        const int64_t valid = ow >= OW ? 0 : run < OW - ow ? run : OW - ow;
        float *yr = yb + (oh * OW + ow) * K;
        for (int64_t i = 0; i < valid; i++, yr += K)
#pragma GCC unroll 6
            for (int o = 0; o < no; o++) yr[o] = out[o][l + i];
        l += run, q += run;
    }
}

/* Images [begin, end). */
DT_VECTOR_PART(direct_forward_part)
{
    const struct direct_job *j = ctx;
    const struct dt_conv2d_shape *s = j->s;
    const int64_t nq = (s->OH - 1) * j->Wp + s->OW;
    for (int64_t b = begin; b < end; b++)
        for (int64_t q0 = 0; q0 < nq; q0 += DIRECT_Q) {
            int64_t o0 = 0;
            for (; o0 + DIRECT_O <= s->K_out; o0 += DIRECT_O) direct_tile(j, b, q0, o0, DIRECT_O);
            if (o0 < s->K_out) direct_tile(j, b, q0, o0, (int)(s->K_out - o0));
        }
}

/* j->xp from `buf` (at least planar_floats(s)): x padded and channel-planar. */
static size_t planar_floats(const struct dt_conv2d_shape *s)
{
    return (size_t)(s->B * s->C * (s->H + 2 * s->pad) * (s->W + 2 * s->pad) + DIRECT_TAIL);
}

static void make_planar(struct dt_backend *be, struct direct_job *j, float *buf)
{
    const struct dt_conv2d_shape *s = j->s;
    j->Wp = s->W + 2 * s->pad;
    j->plane = (s->H + 2 * s->pad) * j->Wp;
    j->xp = buf;
    memset(buf + planar_floats(s) - DIRECT_TAIL, 0, DIRECT_TAIL * sizeof(float));
    dt_pool_run(dt_cpu(be)->pool, s->B, 1, direct_pad_part, j);
}

static void direct_forward(struct dt_backend *be, float *y, const float *x, const float *w,
                           const float *bias, const struct dt_conv2d_shape *s)
{
    struct direct_job job = {.s = s, .x = x, .w = w, .bias = bias, .y = y};
    make_planar(be, &job, dt_cpu_cols(be, planar_floats(s)));
    dt_pool_run(dt_cpu(be)->pool, s->B, 1, direct_forward_part, &job);
}

/* Transposed patches, rows [begin, end) of (Kp, rows): row k = (kh, kw, c) holds that
 * patch element for every output position in (b, oh, ow) order, read from the padded
 * planar image (no bounds to test: the padding is there). */
struct cols_t_job {
    const struct direct_job *d;
    float *cols;
};

static void im2col_t_part(void *ctx, int64_t begin, int64_t end, int worker)
{
    const struct cols_t_job *j = ctx;
    const struct direct_job *d = j->d;
    const struct dt_conv2d_shape *s = d->s;
    const int64_t C = s->C, OW = s->OW, st = s->stride;
    for (int64_t k = begin; k < end; k++) {
        const int64_t kh = k / (s->KW * C), kw = k / C % s->KW, c = k % C;
        float *dst = j->cols + k * conv_rows(s);
        for (int64_t b = 0; b < s->B; b++) {
            const float *src = d->xp + (b * C + c) * d->plane + kh * d->Wp + kw;
            for (int64_t oh = 0; oh < s->OH; oh++, dst += OW, src += st * d->Wp) {
                if (st == 1) {
                    copy_floats(dst, src, OW);
                } else {
                    for (int64_t ow = 0; ow < OW; ow++) dst[ow] = src[ow * st];
                }
            }
        }
    }
}

enum dt_status dt_cpu_conv2d_forward(struct dt_backend *be, float *y, const float *x,
                                     const float *w, const float *bias,
                                     const struct dt_conv2d_shape *s, const struct dt_policy *pol)
{
    /* few outputs: the direct tiles beat oneDNN's blocked kernels, whose 8- or 16-lane
     * output blocks are mostly padding there (LeNet's first convolution: 0.70x on a Zen 3
     * without AVX-512, 0.67x on a Zen 5 with it; docs/performance.md), so `fast` takes
     * them too */
    if (!dt_math_exact(pol) && s->K_out < 8 && direct_takes(s)) {
        direct_forward(be, y, x, w, bias, s);
        return DT_OK;
    }
    enum dt_status st = dt_cpu_dnnl_conv_forward(be, y, x, w, bias, s, pol);
    if (st != DT_ERR_UNSUPPORTED) return st;
    /* the direct tiles are the ordered sums, so any level but math: exact may take them;
     * under math: fast they beat im2col + OpenBLAS where they pay at all (where oneDNN
     * declines: run_to_run, a forced order, a build without it) */
    if (!dt_math_exact(pol) && direct_takes(s)) {
        direct_forward(be, y, x, w, bias, s);
        return DT_OK;
    }
    if (win_forward_takes(s, pol)) {
        win_forward(be, y, x, w, bias, s);
        return DT_OK;
    }
    return dt_cpu_dense_forward(be, y, im2col(be, x, s), w, bias, conv_rows(s), conv_patch(s),
                                s->K_out, pol);
}

/* The chunk tiles, under an ordered reduction (fixed, exact, pinned) and math strict or
 * fast (the tiles' products are mul and add: the fixed order's bits whichever math allows
 * more), where the shape suits them: few outputs (dense.c's rows form would be picked) or
 * out_strips_take's. pinned (run_to_run) takes oneDNN's weight gradient first where built
 * with it (conv_dnnl.c); without it, it may take a library product over the batch instead
 * and keeps it beyond the shapes where OpenBLAS was measured slower -- few outputs over tens
 * of thousands of rows, one strip of 16 (LeNet's weight gradient at run_to_run 4.65x `fast`'s
 * op on OpenBLAS, 1.66x on the tiles: conv-tiles-zen5/summary.txt): the fixed order keeps
 * its promise. */
static bool chunks_take(struct dt_backend *be, const struct dt_conv2d_shape *s,
                        const struct dt_policy *pol)
{
    if (!dt_cpu_wgrad_in_order(be, pol) || dt_math_exact(pol)) return false;
    if (dt_cpu_wgrad_prefers_rows(conv_rows(s), conv_patch(s), s->K_out)) return true;
    if (dt_math_fast(pol) && dt_reduction_library(pol, dt_cpu(be)->forced_order))
        return s->K_out == 16;
    return out_strips_take(s);
}

enum dt_status dt_cpu_conv2d_backward_weight(struct dt_backend *be, float *dw, const float *x,
                                             const float *dy, const struct dt_conv2d_shape *s,
                                             const struct dt_policy *pol)
{
    enum dt_status st = dt_cpu_dnnl_conv_backward_weight(be, dw, x, dy, s, pol);
    if (st != DT_ERR_UNSUPPORTED) return st;
    const int64_t rows = conv_rows(s), Kp = conv_patch(s);
    if (dt_math_exact(pol)) /* the dense weight gradient's exact product over the patches */
        return dt_cpu_dense_backward_weight(be, dw, im2col(be, x, s), dy, rows, Kp, s->K_out, pol);
    if (chunks_take(be, s, pol)) {
        const int64_t batch[2] = {0, s->B};
        wgrad_chunks(be, dw, x, dy, s, batch, 1);
        return DT_OK;
    }
    if (dt_cpu_wgrad_prefers_rows(rows, Kp, s->K_out))
        return dt_cpu_wgrad_rows(be, dw, im2col(be, x, s), dy, rows, Kp, s->K_out, pol);
    struct direct_job planar = {.s = s, .x = x};
    make_planar(be, &planar, dt_cpu_scratch(be, planar_floats(s)));
    struct cols_t_job tjob = {.d = &planar, .cols = dt_cpu_cols(be, (size_t)(rows * Kp))};
    dt_pool_run(dt_cpu(be)->pool, Kp, 1, im2col_t_part, &tjob);
    return dt_cpu_wgrad_transposed(be, dw, tjob.cols, dy, rows, Kp, s->K_out, pol);
}

/* ---- col2im: the scatter-add of backward-data (atomics control) ----------------------- */

/* The image cells a patch row (b, oh, ow) came from: fn(cell, patch_element, C) per
 * in-image (kh, kw), with `cell` the first channel of image cell (ih, iw). */
#define FOR_EACH_PATCH_CELL(s, oh, ow, BODY)                                                       \
    for (int64_t kh_ = 0; kh_ < (s)->KH; kh_++) {                                                  \
        const int64_t ih_ = (oh) * (s)->stride - (s)->pad + kh_;                                   \
        if (ih_ < 0 || ih_ >= (s)->H) continue;                                                    \
        for (int64_t kw_ = 0; kw_ < (s)->KW; kw_++) {                                              \
            const int64_t iw_ = (ow) * (s)->stride - (s)->pad + kw_;                               \
            if (iw_ < 0 || iw_ >= (s)->W) continue;                                                \
            const int64_t cell_ = (ih_ * (s)->W + iw_) * (s)->C;                                   \
            const int64_t elem_ = (kh_ * (s)->KW + kw_) * (s)->C;                                  \
            BODY                                                                                   \
        }                                                                                          \
    }

/* fixed_point: images [begin, end), each summed exactly in the worker's int64 buffer. A
 * patch row's in-image window, one kh at a time, is one run of (hi - lo) * C consecutive
 * patch elements landing on as many consecutive image cells: converted and added 4 lanes
 * at a time (fixed_lanes.h: dt_fixed_from_float_bounded's values), the rest one by one;
 * the cells rounded 4 at a time the same way (dt_fixed_to_float's values). Integer sums:
 * any grouping gives the same values. */
DT_VECTOR_PART(col2im_fixed_part)
{
    const struct conv_job *j = ctx;
    const struct dt_conv2d_shape *s = j->s;
    const int64_t n_img = s->H * s->W * s->C, Kp = conv_patch(s), C = s->C;
    int64_t *acc = (int64_t *)dt_cpu_worker_buffer(j->be, worker, (size_t)(2 * n_img));
    const double scale = dt_fixed_scale(j->shift);
    const double dn = dt_fixed_scale(-j->shift);
    const v4d up = {scale, scale, scale, scale}, down = {dn, dn, dn, dn};
    for (int64_t b = begin; b < end; b++) {
        memset(acc, 0, (size_t)n_img * sizeof *acc);
        const float *row = j->dcols + b * s->OH * s->OW * Kp;
        for (int64_t oh = 0; oh < s->OH; oh++)
            for (int64_t ow = 0; ow < s->OW; ow++, row += Kp) {
                const int64_t iw0 = ow * s->stride - s->pad;
                const int64_t lo = iw0 < 0 ? -iw0 : 0;
                const int64_t hi = iw0 + s->KW > s->W ? s->W - iw0 : s->KW;
                const int64_t n = (hi - lo) * C;
                for (int64_t kh = 0; kh < s->KH && n > 0; kh++) {
                    const int64_t ih = oh * s->stride - s->pad + kh;
                    if (ih < 0 || ih >= s->H) continue;
                    /* finite, |term| <= the max the shift was chosen for, and KH*KW such
                     * terms stay below 2^63 (dt_fixed_shift_for) */
                    const float *src = row + (kh * s->KW + lo) * C;
                    add_fixed_run(acc + (ih * s->W + iw0 + lo) * C, src, n, &up);
                }
            }
        round_fixed_run(j->dx + b * n_img, acc, n_img, &down);
    }
}

/* Forced order (test hook): one patch row added into dx with plain adds. */
static void scatter_row_plain(const struct conv_job *j, int64_t r)
{
    const struct dt_conv2d_shape *s = j->s;
    const int64_t P = s->OH * s->OW, Kp = conv_patch(s), C = s->C;
    const int64_t b = r / P, oh = r % P / s->OW, ow = r % s->OW;
    const float *row = j->dcols + r * Kp;
    float *img = j->dx + b * s->H * s->W * C;
    FOR_EACH_PATCH_CELL(s, oh, ow, {
        for (int64_t c = 0; c < C; c++) img[cell_ + c] += row[elem_ + c];
    })
}

/* float, the fastest form: each worker owns whole images [begin, end)
 * and scatters their patch rows in row order with plain adds -- no atomic instruction, no
 * band; deterministic for any thread count, though the control allows any order. */
static void col2im_plain_part(void *ctx, int64_t begin, int64_t end, int worker)
{
    const struct conv_job *j = ctx;
    const struct dt_conv2d_shape *s = j->s;
    const int64_t P = s->OH * s->OW;
    memset(j->dx + begin * s->H * s->W * s->C, 0,
           (size_t)((end - begin) * s->H * s->W * s->C) * sizeof(float));
    for (int64_t r = begin * P; r < end * P; r++) scatter_row_plain(j, r);
}

enum dt_status dt_cpu_conv2d_backward_data(struct dt_backend *be, float *dx, const float *dy,
                                           const float *w, const struct dt_conv2d_shape *s,
                                           const struct dt_policy *pol)
{
    enum dt_status st = dt_cpu_dnnl_conv_backward_data(be, dx, dy, w, s, pol);
    if (st != DT_ERR_UNSUPPORTED) return st;
    const int64_t rows = conv_rows(s), Kp = conv_patch(s);
    float *dcols = dt_cpu_cols(be, (size_t)(rows * Kp));
    DT_FORWARD_IF_ERROR(dt_cpu_dense_backward_data(be, dcols, dy, w, rows, Kp, s->K_out, pol));
    struct conv_job job = {.be = be, .s = s, .dx = dx, .dcols = dcols};
    atomic_init(&job.next, 0);
    struct dt_cpu_ctx *c = dt_cpu(be);
    if (dt_atomics_exact(pol)) {
        float max_abs;
        int64_t bad;
        if (!dt_cpu_max_abs(be, dcols, rows * Kp, &max_abs, &bad)) {
            return dt_backend_op_error(be, DT_ERR_NUMERIC,
                                       "conv2d backward-data: non-finite gradient at patch row "
                                       "%lld, element %lld",
                                       (long long)(bad / Kp), (long long)(bad % Kp));
        }
        job.shift = dt_fixed_shift_for(max_abs, s->KH * s->KW);
        dt_pool_run(c->pool, s->B, 1, col2im_fixed_part, &job);
        return DT_OK;
    }
    if (c->forced_order) {
        memset(dx, 0, (size_t)(s->B * s->H * s->W * s->C) * sizeof(float));
        int64_t *perm = dt_xmalloc((size_t)rows * sizeof *perm);
        dt_forced_permutation(perm, rows, c->forced_order, DT_FORCED_SUMMANDS);
        for (int64_t t = 0; t < rows; t++) scatter_row_plain(&job, perm[t]);
        free(perm);
        return DT_OK;
    }
    dt_pool_run(c->pool, s->B, 1, col2im_plain_part, &job);
    return DT_OK;
}

/* reduction exact with shards set: shard k's partial in slot k, each the op on the shard's
 * images alone, from one padded copy and one pool run over every shard's chunk tiles
 * (DT_ERR_UNSUPPORTED elsewhere: a call per shard). */
enum dt_status dt_cpu_conv2d_backward_weight_shards(struct dt_backend *be, float *dw,
                                                    const float *x, const float *dy,
                                                    const struct dt_conv2d_shape *s,
                                                    const struct dt_policy *pol)
{
    const struct dt_shards *sh = &be->shards;
    DT_ASSERT(sh->count > 0 && sh->row[sh->count] == s->B);
    if (!chunks_take(be, s, pol)) return DT_ERR_UNSUPPORTED; /* an order asked: never oneDNN */
    wgrad_chunks(be, dw, x, dy, s, sh->row, sh->count);
    return DT_OK;
}
