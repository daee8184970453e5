/* The CUDA convolution and max pooling against the CPU backend (the reference).
 *
 * unit (host, run everywhere): the per-element work of detrain's own kernels
 * (nets/conv_elem.h: patch elements, the col2im and max-pool gathers, the forward's
 * first-maximum rule), run on the host in several emulated visiting orders, is compared
 * bit for bit with the CPU backend's real ops (nets/cpu/conv.c, nets/cpu/pool.c) at
 * `portable` (fixed point, with the shift chosen exactly as conv.cu chooses it) and under
 * the forced orders of `atomics: float`, over geometries with B = 1 and more, odd sizes,
 * C = 1 and C > 1, strides 1 to 3, every padding up to KH - 1, KH != KW, LeNet's layers,
 * 2x2/2, 3x3/2 pad 1 and 3x3/1 pooling; with zeros, negative zeros, NaNs, ties and values
 * spanning many binades.
 *
 * gpu (exit 77 without a device): every op on the device against the CPU under portable,
 * run_to_run, fast and single-control ablations -- bitwise where detrain's own kernels run
 * at `math: portable` with a deterministic scatter, else within a stated tolerance; ties
 * and NaNs; several launch geometries; the forced orders and their negative control;
 * non-finite gradients; and cuDNN's algorithm notes checked against cuDNN's own report.
 * Every device output is poisoned (NaN) before each run. */
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/util.h"
#include "tests/check.h"
#include "tests/op_helpers.h"
#include "determinism/fixed_point.h"
#include "determinism/streams.h"
#include "nets/conv_elem.h"
#ifdef DETRAIN_HAVE_CUDA_TOOLKIT
#include "nets/cuda/cuda.h"
#endif

#define COL2IM_SALT 3 /* the forced order's salt: nets/cpu/conv.c, nets/cuda/conv.cu */
#define POOL_SALT 4   /* nets/cpu/pool.c, nets/cuda/conv.cu */

/* ---- inputs ------------------------------------------------------------------------------ */

static float *xalloc(int64_t n) { return dt_xmalloc((size_t)(n > 0 ? n : 1) * sizeof(float)); }

/* NaN bits everywhere, so an element left unwritten is caught. */
static void poison(void *p, size_t bytes) { memset(p, 0xff, bytes); }

/* Uniform values times 2^[0, 8) (magnitudes that make a reordered sum round differently),
 * with exact zeros and negative zeros sprinkled in. */
static void fill_varied(float *v, int64_t n, double scale)
{
    for (int64_t i = 0; i < n; i++) {
        double u = urand();
        int e = (int)((urand() + 1.0) * 4.0);
        v[i] = (float)ldexp(scale * u, e);
        if (i % 17 == 5) v[i] = 0.0f;
        if (i % 23 == 7) v[i] = -0.0f;
    }
}

/* +-[1, 2) * 2^e with e in [-60, 60), a few subnormals, zeros and negative zeros: the
 * fixed-point scale then quantises the smallest terms away, and float sums of them round
 * differently in every order. */
static void fill_exponents(float *v, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        const double sign = urand() < 0 ? -1.0 : 1.0;
        const int e = (int)floor(urand() * 60.0);
        v[i] = (float)(sign * ldexp(1.5 + 0.5 * urand(), e));
        if (i % 31 == 3) v[i] = (float)(sign * 1e-41); /* subnormal */
        if (i % 17 == 5) v[i] = 0.0f;
        if (i % 23 == 7) v[i] = -0.0f;
    }
}

/* Distinct values, half of them negative (so a zero padding cell would win if padding
 * took part): a random permutation of 0..n-1, shifted and scaled. No ties. */
static void fill_distinct(float *x, int64_t n)
{
    int64_t *perm = dt_xmalloc((size_t)(n > 0 ? n : 1) * sizeof *perm);
    for (int64_t i = 0; i < n; i++) perm[i] = i;
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)((urand() + 1.0) * 0.5 * (double)(i + 1));
        if (j > i) j = i;
        int64_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    for (int64_t i = 0; i < n; i++) x[i] = (float)((double)(perm[i] - n / 2) / (double)n);
    free(perm);
}

/* 1 when a and b hold the same bits; prints the first difference. */
static int same_bits(const float *a, const float *b, int64_t n, const char *what)
{
    for (int64_t i = 0; i < n; i++)
        if (memcmp(&a[i], &b[i], sizeof(float)) != 0) {
            fprintf(stderr, "%s: element %lld: %a vs %a\n", what, (long long)i, (double)a[i],
                    (double)b[i]);
            return 0;
        }
    return 1;
}

static int same_ints(const int32_t *a, const int32_t *b, int64_t n, const char *what)
{
    for (int64_t i = 0; i < n; i++)
        if (a[i] != b[i]) {
            fprintf(stderr, "%s: argmax %lld: %d vs %d\n", what, (long long)i, (int)a[i],
                    (int)b[i]);
            return 0;
        }
    return 1;
}

static struct dt_policy policy_of(enum dt_level base, const char *control, const char *value)
{
    struct dt_policy p = level(base);
    if (control) {
        DT_ASSERT(dt_policy_set_control(&p, control, value, NULL) == DT_OK);
        DT_ASSERT(dt_policy_auto_name(&p));
    }
    return p;
}

/* rank[perm[t]] = t for the CPU's drawn permutation of n items (seed, salt): the place of
 * each patch row (or output position) in the CPU's serial scatter. */
static int64_t *forced_ranks(int64_t n, uint64_t seed, uint64_t salt)
{
    int64_t *perm = dt_xmalloc((size_t)n * sizeof *perm);
    int64_t *rank = dt_xmalloc((size_t)n * sizeof *rank);
    for (int64_t i = 0; i < n; i++) rank[i] = -1;
    dt_forced_permutation(perm, n, seed, salt);
    for (int64_t t = 0; t < n; t++) rank[perm[t]] = t;
    for (int64_t i = 0; i < n; i++) DT_ASSERT(rank[i] >= 0); /* a permutation */
    free(perm);
    return rank;
}

/* Emulated launch orders over n independent cells: ascending, descending, and by a stride
 * coprime with n (every cell once, neighbours far apart, as a grid-stride loop's blocks). */
enum { ORDER_ASCENDING, ORDER_DESCENDING, ORDER_STRIDED, N_ORDERS };
static const char *const order_names[N_ORDERS] = {"ascending", "descending", "strided"};

static int64_t gcd64(int64_t a, int64_t b)
{
    while (b) {
        int64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

static int64_t visit(int order, int64_t t, int64_t n)
{
    if (order == ORDER_ASCENDING) return t;
    if (order == ORDER_DESCENDING) return n - 1 - t;
    int64_t p = 7;
    while (gcd64(p, n) != 1) p += 2;
    return t * p % n;
}

/* ---- geometries ------------------------------------------------------------------------ */

static const struct conv_geom conv_geoms[] = {
    {1, 5, 5, 1, 2, 3, 3, 1, 0},    /* B = 1, C = 1, no padding */
    {2, 7, 6, 2, 3, 3, 3, 1, 1},    /* same padding, odd height */
    {1, 6, 7, 2, 2, 3, 3, 1, 2},    /* pad = KH - 1: border windows hold one image row */
    {3, 8, 7, 2, 3, 3, 3, 2, 0},    /* stride 2, last row/column unused */
    {2, 9, 8, 3, 4, 3, 3, 2, 1},    /* stride 2 with padding */
    {2, 6, 5, 3, 4, 3, 2, 1, 1},    /* KH != KW */
    {2, 9, 7, 2, 3, 2, 4, 2, 1},    /* KH < KW, stride 2 */
    {1, 10, 11, 2, 2, 3, 2, 3, 1},  /* stride 3: cells no window covers */
    {2, 5, 4, 3, 4, 1, 1, 1, 0},    /* 1x1 */
    {1, 2, 2, 2, 3, 3, 3, 1, 1},    /* kernel larger than the image */
    {2, 28, 28, 1, 6, 5, 5, 1, 2},  /* LeNet conv0, batch 2 */
    {2, 14, 14, 6, 16, 5, 5, 1, 0}, /* LeNet conv1, batch 2 */
};
enum { N_CONV_GEOMS = sizeof conv_geoms / sizeof conv_geoms[0] };

static int64_t conv_rows(const struct dt_conv2d_shape *s) { return s->B * s->OH * s->OW; }
static int64_t conv_kp(const struct dt_conv2d_shape *s) { return s->KH * s->KW * s->C; }

static void conv_text(char *buf, size_t size, const char *what, const struct dt_conv2d_shape *s)
{
    snprintf(buf, size, "%.200s conv B=%lld %lldx%lldx%lld>%lld k%lldx%lld s%lld p%lld", what,
             (long long)s->B, (long long)s->H, (long long)s->W, (long long)s->C,
             (long long)s->K_out, (long long)s->KH, (long long)s->KW, (long long)s->stride,
             (long long)s->pad);
}

static const struct pool_geom pool_geoms[] = {
    {1, 4, 4, 1, 2, 2, 0},    /* B = 1, C = 1 */
    {2, 8, 6, 3, 2, 2, 0},    /* 2x2/2, even sizes */
    {2, 7, 9, 3, 2, 2, 0},    /* 2x2/2, odd sizes: last row/column dropped */
    {2, 9, 9, 2, 2, 3, 0},    /* K < stride: cells no window covers */
    {2, 8, 8, 3, 3, 2, 1},    /* overlapping 3x3/2 pad 1 */
    {2, 7, 9, 2, 3, 2, 1},    /* the same, odd sizes */
    {2, 6, 7, 2, 3, 1, 0},    /* 3x3/1: a cell in up to nine windows */
    {1, 7, 8, 2, 3, 1, 1},    /* 3x3/1 pad 1 */
    {1, 5, 4, 2, 3, 1, 2},    /* pad 2: border windows hold one image row/column */
    {2, 28, 28, 6, 2, 2, 0},  /* LeNet pool0 */
    {2, 28, 28, 6, 3, 2, 1},  /* LeNet pool0, overlap_pool */
    {2, 10, 10, 16, 2, 2, 0}, /* LeNet pool1 */
    {2, 10, 10, 16, 3, 2, 1}, /* LeNet pool1, overlap_pool */
};
enum { N_POOL_GEOMS = sizeof pool_geoms / sizeof pool_geoms[0] };

static void pool_text(char *buf, size_t size, const char *what, const struct dt_pool2d_shape *s)
{
    snprintf(buf, size, "%.200s pool B=%lld %lldx%lldx%lld k%lld s%lld p%lld", what,
             (long long)s->B, (long long)s->H, (long long)s->W, (long long)s->C, (long long)s->K,
             (long long)s->stride, (long long)s->pad);
}

/* Max-pool inputs: distinct values; constants (every window's winner is its first
 * in-image cell); values in {-1, 0, 1}; equal maxima on every odd row and column (the
 * cells neighbouring stride-2 windows share); signed zeros; NaNs (positive and negative,
 * on a window's first cell, two in a row, before a larger value); bumps (a high cell on
 * every (1, 1) mod 4 position over small noise: the maximum of up to four windows at
 * stride 2 and nine at stride 1). */
enum {
    PAT_DISTINCT,
    PAT_CONSTANT,
    PAT_NEGATIVE,
    PAT_TERNARY,
    PAT_OVERLAP_TIES,
    PAT_SIGNED_ZEROS,
    PAT_NAN,
    PAT_BUMPS,
    N_PATTERNS
};
static const char *const pattern_names[N_PATTERNS] = {"distinct",
                                                      "constant",
                                                      "constant negative",
                                                      "{-1, 0, 1}",
                                                      "equal maxima on the overlaps",
                                                      "signed zeros",
                                                      "NaNs",
                                                      "bumps"};

static void fill_pattern(float *x, const struct dt_pool2d_shape *s, int pat)
{
    const int64_t n = pool_nx(s);
    if (pat == PAT_DISTINCT || pat == PAT_NAN) fill_distinct(x, n);
    for (int64_t i = 0; i < n; i++) {
        const int64_t c = i % s->C, w = i / s->C % s->W, h = i / (s->C * s->W) % s->H;
        switch (pat) {
        case PAT_CONSTANT: x[i] = 0.5f; break;
        case PAT_NEGATIVE: x[i] = -0.25f; break;
        case PAT_TERNARY: x[i] = (float)floor((urand() + 1.0) * 1.5) - 1.0f; break;
        case PAT_OVERLAP_TIES: x[i] = (h % 2 == 1 || w % 2 == 1) ? 2.0f : (float)urand(); break;
        case PAT_SIGNED_ZEROS: x[i] = urand() < 0 ? -0.0f : 0.0f; break;
        case PAT_NAN:
            if (i % 13 == 2) x[i] = NAN;
            if (i % 13 == 3 && c == 0) x[i] = -NAN;          /* right after a NaN, other bits */
            if (h == 0 && w == 0) x[i] = c % 2 ? NAN : -NAN; /* a window's first cell */
            if (i % 13 == 4) x[i] = 10.0f; /* larger than anything, after the NaN */
            break;
        case PAT_BUMPS:
            x[i] = (float)(0.5 * urand()) + (h % 4 == 1 && w % 4 == 1 ? 4.0f : 0.0f);
            break;
        default: break;
        }
    }
}

/* ---- unit: nets/conv_elem.h on the host against the CPU backend, bit for bit ------------------
 */

/* A reference im2col written as the plain loop nest, independently of nets/conv_elem.h. */
static void ref_im2col(float *cols, const float *x, const struct dt_conv2d_shape *s)
{
    float *p = cols;
    for (int64_t b = 0; b < s->B; b++)
        for (int64_t oh = 0; oh < s->OH; oh++)
            for (int64_t ow = 0; ow < s->OW; ow++)
                for (int64_t kh = 0; kh < s->KH; kh++)
                    for (int64_t kw = 0; kw < s->KW; kw++)
                        for (int64_t c = 0; c < s->C; c++) {
                            const int64_t ih = oh * s->stride - s->pad + kh;
                            const int64_t iw = ow * s->stride - s->pad + kw;
                            const bool in = ih >= 0 && ih < s->H && iw >= 0 && iw < s->W;
                            *p++ = in ? x[((b * s->H + ih) * s->W + iw) * s->C + c] : 0.0f;
                        }
}

/* dt_conv_patch_elem over every (r, k) is the CPU's patch matrix: through the CPU
 * backend's real convolution (Kp outputs, weights the identity: output k of row r is
 * patch element k, exactly, on nonzero inputs), and against the reference im2col with
 * signed zeros in the input. */
DT_TEST(patch_elem_matches_cpu)
{
    struct dt_backend *c = cpu(2);
    const struct dt_policy pol = level(DT_LEVEL_PORTABLE);
    for (int gi = 0; gi < N_CONV_GEOMS; gi++) {
        const struct dt_conv2d_shape s = conv_shape(&conv_geoms[gi]);
        const int64_t rows = conv_rows(&s), Kp = conv_kp(&s), nx = conv_nx(&s);
        float *x = xalloc(nx), *emu = xalloc(rows * Kp), *got = xalloc(rows * Kp);
        fill(x, nx, 1.0);
        for (int64_t i = 0; i < nx; i++)
            if (x[i] == 0.0f) x[i] = 0.5f; /* the selector turns -0 into +0 */
        for (int64_t r = 0; r < rows; r++)
            for (int64_t k = 0; k < Kp; k++) emu[r * Kp + k] = dt_conv_patch_elem(x, &s, r, k);
        struct dt_conv2d_shape sel = s;
        sel.K_out = Kp;
        DT_ASSERT(dt_conv2d_shape_init(&sel, NULL) == DT_OK);
        float *w = xalloc(Kp * Kp), *bias = xalloc(Kp);
        memset(w, 0, (size_t)(Kp * Kp) * sizeof *w);
        memset(bias, 0, (size_t)Kp * sizeof *bias);
        for (int64_t k = 0; k < Kp; k++) w[k * Kp + k] = 1.0f;
        poison(got, (size_t)(rows * Kp) * sizeof *got);
        CHECK_INT_EQ(dt_conv2d_forward(c, got, x, w, bias, &sel, &pol), DT_OK);
        char what[512];
        conv_text(what, sizeof what, "patch elements vs the cpu's convolution", &s);
        CHECK(same_bits(emu, got, rows * Kp, what));

        fill_varied(x, nx, 1.0); /* signed zeros: against the reference loop nest */
        for (int64_t r = 0; r < rows; r++)
            for (int64_t k = 0; k < Kp; k++) emu[r * Kp + k] = dt_conv_patch_elem(x, &s, r, k);
        ref_im2col(got, x, &s);
        conv_text(what, sizeof what, "patch elements vs the reference im2col", &s);
        CHECK(same_bits(emu, got, rows * Kp, what));
        free(x), free(emu), free(got), free(w), free(bias);
    }
    dt_backend_destroy(c);
}

/* col2im inputs: random dy and w; dy spanning many binades through a selector w (K_out =
 * Kp, w the identity, so the patch gradients ARE dy, exactly); all +0; all -0. */
enum { IN_RANDOM, IN_EXPONENTS, IN_ZERO, IN_NEG_ZERO, N_INPUTS };
static const char *const input_names[N_INPUTS] = {"random", "exponents", "all +0", "all -0"};

struct col2im_in {
    struct dt_conv2d_shape s;
    float *dy, *w, *dcols; /* dcols = dy . w^T by the CPU backend */
};

static void col2im_in_make(struct col2im_in *in, struct dt_backend *c, const struct conv_geom *g,
                           int kind, const struct dt_policy *pol)
{
    in->s = conv_shape(g);
    if (kind == IN_EXPONENTS) {
        in->s.K_out = conv_kp(&in->s);
        DT_ASSERT(dt_conv2d_shape_init(&in->s, NULL) == DT_OK);
    }
    const struct dt_conv2d_shape *s = &in->s;
    const int64_t ny = conv_ny(s), nw = conv_nw(s), Kp = conv_kp(s);
    in->dy = xalloc(ny), in->w = xalloc(nw), in->dcols = xalloc(conv_rows(s) * Kp);
    fill_varied(in->w, nw, 0.25);
    switch (kind) {
    case IN_RANDOM: fill_varied(in->dy, ny, 0.1); break;
    case IN_EXPONENTS:
        fill_exponents(in->dy, ny);
        memset(in->w, 0, (size_t)nw * sizeof(float));
        for (int64_t k = 0; k < Kp; k++) in->w[k * Kp + k] = 1.0f;
        break;
    case IN_ZERO:
        for (int64_t i = 0; i < ny; i++) in->dy[i] = 0.0f;
        break;
    default:
        for (int64_t i = 0; i < ny; i++) in->dy[i] = -0.0f;
        break;
    }
    DT_ASSERT(dt_dense_backward_data(c, in->dcols, in->dy, in->w, conv_rows(s), Kp, s->K_out,
                                     pol) == DT_OK);
    if (kind == IN_EXPONENTS) /* the selector passes dy through unchanged (-0 becomes +0) */
        for (int64_t i = 0; i < ny; i++) DT_ASSERT(in->dcols[i] == in->dy[i]);
}

static void col2im_in_free(struct col2im_in *in) { free(in->dy), free(in->w), free(in->dcols); }

/* The shift conv.cu's col2im kernel computes: max |dcols| over ALL of dcols (as bits,
 * monotone for finite floats) and KH*KW terms per cell. */
static int col2im_shift(const float *dcols, const struct dt_conv2d_shape *s)
{
    uint32_t max_bits = 0;
    for (int64_t i = 0; i < conv_rows(s) * conv_kp(s); i++) {
        const uint32_t bits = dt_float_bits(dcols[i]) & 0x7fffffffu;
        DT_ASSERT(bits < 0x7f800000u);
        if (bits > max_bits) max_bits = bits;
    }
    return dt_fixed_shift_for(dt_bits_float(max_bits), s->KH * s->KW);
}

/* col2im under `atomics: fixed_point`: the per-cell gather of exact int64 terms, cells
 * visited in three orders, is the CPU's conv2d backward-data at portable, bit for bit;
 * all +0 and all -0 gradients give +0 everywhere. */
DT_TEST(col2im_fixed_matches_cpu)
{
    struct dt_backend *c = cpu(3);
    const struct dt_policy pol = level(DT_LEVEL_PORTABLE);
    for (int gi = 0; gi < N_CONV_GEOMS; gi++)
        for (int kind = 0; kind < N_INPUTS; kind++) {
            struct col2im_in in;
            col2im_in_make(&in, c, &conv_geoms[gi], kind, &pol);
            const struct dt_conv2d_shape *s = &in.s;
            const int64_t nx = conv_nx(s);
            float *cdx = xalloc(nx), *edx = xalloc(nx);
            poison(cdx, (size_t)nx * sizeof *cdx);
            CHECK_INT_EQ(dt_conv2d_backward_data(c, cdx, in.dy, in.w, s, &pol), DT_OK);
            const int shift = col2im_shift(in.dcols, s);
            for (int o = 0; o < N_ORDERS; o++) {
                poison(edx, (size_t)nx * sizeof *edx);
                bool bad = false;
                for (int64_t t = 0; t < nx; t++) {
                    const int64_t i = visit(o, t, nx);
                    edx[i] = dt_col2im_cell_fixed(in.dcols, s, i, shift, &bad);
                }
                char what[512], base[128];
                snprintf(base, sizeof base, "col2im fixed, %s, %s", input_names[kind],
                         order_names[o]);
                conv_text(what, sizeof what, base, s);
                CHECK(!bad);
                CHECK(same_bits(edx, cdx, nx, what));
            }
            if (kind == IN_ZERO || kind == IN_NEG_ZERO)
                for (int64_t i = 0; i < nx; i++)
                    if (dt_float_bits(cdx[i]) != 0) {
                        fprintf(stderr, "%s gradient: dx[%lld] = %a, not +0\n", input_names[kind],
                                (long long)i, (double)cdx[i]);
                        dt_check_failures_++;
                        break;
                    }
            free(cdx), free(edx);
            col2im_in_free(&in);
        }
    dt_backend_destroy(c);
}

/* col2im in a forced order: +0 plus each cell's terms by increasing rank of their patch
 * row (rank = the inverse of the CPU's drawn permutation, salt 3) is the CPU's serial
 * scatter under `atomics: float` and dt_backend_set_forced_order, for seeds 1 and 2; and
 * the two seeds give different bits on the CPU for some geometry (negative control: the
 * order is observable, so matching it means something). */
DT_TEST(col2im_ranked_matches_cpu_forced)
{
    struct dt_backend *c = cpu(2);
    const struct dt_policy pol = policy_of(DT_LEVEL_PORTABLE, "atomics", "float");
    int64_t differing = 0, pairs = 0;
    for (int gi = 0; gi < N_CONV_GEOMS; gi++)
        for (int kind = IN_RANDOM; kind <= IN_EXPONENTS; kind++) {
            struct col2im_in in;
            col2im_in_make(&in, c, &conv_geoms[gi], kind, &pol);
            const struct dt_conv2d_shape *s = &in.s;
            const int64_t nx = conv_nx(s), rows = conv_rows(s);
            float *cdx = xalloc(nx), *edx = xalloc(nx), *prev = xalloc(nx);
            for (uint64_t seed = 1; seed <= 2; seed++) {
                CHECK_INT_EQ(dt_backend_set_forced_order(c, seed), DT_OK);
                poison(cdx, (size_t)nx * sizeof *cdx);
                CHECK_INT_EQ(dt_conv2d_backward_data(c, cdx, in.dy, in.w, s, &pol), DT_OK);
                int64_t *rank = forced_ranks(rows, seed, COL2IM_SALT);
                for (int o = 0; o < N_ORDERS; o++) {
                    poison(edx, (size_t)nx * sizeof *edx);
                    for (int64_t t = 0; t < nx; t++) {
                        const int64_t i = visit(o, t, nx);
                        edx[i] = dt_col2im_cell_ranked(in.dcols, s, i, rank);
                    }
                    char what[512], base[128];
                    snprintf(base, sizeof base, "col2im forced %llu, %s, %s",
                             (unsigned long long)seed, input_names[kind], order_names[o]);
                    conv_text(what, sizeof what, base, s);
                    CHECK(same_bits(edx, cdx, nx, what));
                }
                free(rank);
                if (seed == 2) {
                    pairs++;
                    differing += memcmp(cdx, prev, (size_t)nx * sizeof *cdx) != 0;
                }
                memcpy(prev, cdx, (size_t)nx * sizeof *cdx);
            }
            free(cdx), free(edx), free(prev);
            col2im_in_free(&in);
        }
    CHECK_INT_EQ(dt_backend_set_forced_order(c, 0), DT_OK);
    fprintf(stderr,
            "col2im on the cpu, forced orders 1 vs 2: different bits for %lld of %lld "
            "geometry/input pairs\n",
            (long long)differing, (long long)pairs);
    CHECK(differing > 0);
    dt_backend_destroy(c);
}

/* The window of output element o: its first in-image cell (ih * W + iw). */
static int32_t first_cell(const struct dt_pool2d_shape *s, int64_t o)
{
    const int64_t ow = o / s->C % s->OW, oh = o / (s->C * s->OW) % s->OH;
    const int64_t ih = oh * s->stride - s->pad, iw = ow * s->stride - s->pad;
    return (int32_t)((ih < 0 ? 0 : ih) * s->W + (iw < 0 ? 0 : iw));
}

/* dt_maxpool_out is the CPU's forward bit for bit -- values (NaN payloads included) and
 * argmax -- on every pattern; and where every value ties (constants, signed zeros) the
 * winner is the window's first in-image cell, whose bits (-0 or +0) are kept. */
DT_TEST(maxpool_out_matches_cpu)
{
    struct dt_backend *c = cpu(2);
    const struct dt_policy pol = level(DT_LEVEL_PORTABLE);
    for (int gi = 0; gi < N_POOL_GEOMS; gi++)
        for (int pat = 0; pat < N_PATTERNS; pat++) {
            const struct dt_pool2d_shape s = pool_shape(&pool_geoms[gi]);
            const int64_t nx = pool_nx(&s), ny = pool_ny(&s);
            float *x = xalloc(nx), *cy = xalloc(ny), *ey = xalloc(ny);
            int32_t *cam = dt_xmalloc((size_t)ny * sizeof *cam);
            int32_t *eam = dt_xmalloc((size_t)ny * sizeof *eam);
            fill_pattern(x, &s, pat);
            poison(cy, (size_t)ny * sizeof *cy);
            poison(cam, (size_t)ny * sizeof *cam);
            CHECK_INT_EQ(dt_maxpool2d_forward(c, cy, cam, x, &s, &pol), DT_OK);
            for (int64_t o = 0; o < ny; o++) ey[o] = dt_maxpool_out(x, &s, o, &eam[o]);
            char what[512];
            pool_text(what, sizeof what, pattern_names[pat], &s);
            CHECK(same_bits(ey, cy, ny, what));
            CHECK(same_ints(eam, cam, ny, what));
            if (pat == PAT_CONSTANT || pat == PAT_NEGATIVE || pat == PAT_SIGNED_ZEROS)
                for (int64_t o = 0; o < ny; o++) {
                    const int32_t want = first_cell(&s, o);
                    const float wx =
                        x[((o / (s.C * s.OW * s.OH)) * s.H * s.W + want) * s.C + o % s.C];
                    if (eam[o] != want || dt_float_bits(ey[o]) != dt_float_bits(wx)) {
                        fprintf(stderr,
                                "%s: output %lld: argmax %d, value %a; first cell %d "
                                "holds %a\n",
                                what, (long long)o, (int)eam[o], (double)ey[o], (int)want,
                                (double)wx);
                        dt_check_failures_++;
                        break;
                    }
                }
            free(x), free(cy), free(ey), free(cam), free(eam);
        }
    dt_backend_destroy(c);
}

/* dy kinds for max-pool backward: varied magnitudes with zeros and negative zeros; many
 * binades; all -0 (a cell's sum from +0 is +0; the direct copy keeps -0). */
enum { DY_VARIED, DY_EXPONENTS, DY_NEG_ZERO, N_DY };
static const char *const dy_names[N_DY] = {"varied dy", "dy over many binades", "dy all -0"};

static void fill_dy(float *dy, int64_t n, int kind)
{
    if (kind == DY_VARIED) fill_varied(dy, n, 1.0);
    if (kind == DY_EXPONENTS) fill_exponents(dy, n);
    if (kind == DY_NEG_ZERO)
        for (int64_t i = 0; i < n; i++) dy[i] = -0.0f;
}

/* Max-pool backward gathers against the CPU backend, bit for bit, cells visited in three
 * orders: without overlap (K <= stride) the direct copy under every control and forced
 * order; with overlap the fixed-point gather (shift from max |dy| over the tensor and
 * ceil(K/stride)^2 terms, as conv.cu) at portable, and the ranked gather (salt 4, ranks
 * of output positions) under `atomics: float` with forced orders 1 and 2, which differ on
 * the CPU for some geometry. */
DT_TEST(maxpool_backward_matches_cpu)
{
    struct dt_backend *c = cpu(2);
    const struct dt_policy port = level(DT_LEVEL_PORTABLE), fast = level(DT_LEVEL_FAST);
    const struct dt_policy afloat = policy_of(DT_LEVEL_PORTABLE, "atomics", "float");
    const int pats[] = {PAT_DISTINCT, PAT_BUMPS, PAT_TERNARY};
    int64_t differing = 0, pairs = 0;
    for (int gi = 0; gi < N_POOL_GEOMS; gi++)
        for (size_t pi = 0; pi < sizeof pats / sizeof pats[0]; pi++)
            for (int dk = 0; dk < N_DY; dk++) {
                const struct dt_pool2d_shape s = pool_shape(&pool_geoms[gi]);
                const int64_t nx = pool_nx(&s), ny = pool_ny(&s), P = s.B * s.OH * s.OW;
                float *x = xalloc(nx), *y = xalloc(ny), *dy = xalloc(ny);
                float *cdx = xalloc(nx), *edx = xalloc(nx), *prev = xalloc(nx);
                int32_t *am = dt_xmalloc((size_t)ny * sizeof *am);
                fill_pattern(x, &s, pats[pi]);
                fill_dy(dy, ny, dk);
                CHECK_INT_EQ(dt_maxpool2d_forward(c, y, am, x, &s, &port), DT_OK);
                char base[128], what[512];
                snprintf(base, sizeof base, "%s, %s", pattern_names[pats[pi]], dy_names[dk]);
                if (s.K <= s.stride) {
                    const struct dt_policy *pols[] = {&port, &fast, &afloat};
                    for (int p = 0; p < 3; p++)
                        for (uint64_t seed = 0; seed <= 1; seed++) {
                            CHECK_INT_EQ(dt_backend_set_forced_order(c, seed), DT_OK);
                            poison(cdx, (size_t)nx * sizeof *cdx);
                            CHECK_INT_EQ(dt_maxpool2d_backward(c, cdx, dy, x, y, am, &s, pols[p]),
                                         DT_OK);
                            for (int o = 0; o < N_ORDERS; o++) {
                                poison(edx, (size_t)nx * sizeof *edx);
                                for (int64_t t = 0; t < nx; t++) {
                                    const int64_t i = visit(o, t, nx);
                                    edx[i] = dt_maxpool_cell_direct(dy, am, &s, i);
                                }
                                char b2[200];
                                snprintf(b2, sizeof b2, "direct %.60s seed %llu %s, %.100s",
                                         pols[p]->name, (unsigned long long)seed, order_names[o],
                                         base);
                                pool_text(what, sizeof what, b2, &s);
                                CHECK(same_bits(edx, cdx, nx, what));
                            }
                        }
                    CHECK_INT_EQ(dt_backend_set_forced_order(c, 0), DT_OK);
                } else {
                    poison(cdx, (size_t)nx * sizeof *cdx);
                    CHECK_INT_EQ(dt_maxpool2d_backward(c, cdx, dy, x, y, am, &s, &port), DT_OK);
                    uint32_t max_bits = 0;
                    for (int64_t i = 0; i < ny; i++) {
                        const uint32_t bits = dt_float_bits(dy[i]) & 0x7fffffffu;
                        if (bits > max_bits) max_bits = bits;
                    }
                    const int64_t per_axis = (s.K + s.stride - 1) / s.stride;
                    const int shift =
                        dt_fixed_shift_for(dt_bits_float(max_bits), per_axis * per_axis);
                    for (int o = 0; o < N_ORDERS; o++) {
                        poison(edx, (size_t)nx * sizeof *edx);
                        bool bad = false;
                        for (int64_t t = 0; t < nx; t++) {
                            const int64_t i = visit(o, t, nx);
                            edx[i] = dt_maxpool_cell_fixed(dy, am, &s, i, shift, &bad);
                        }
                        char b2[200];
                        snprintf(b2, sizeof b2, "fixed %s, %.100s", order_names[o], base);
                        pool_text(what, sizeof what, b2, &s);
                        CHECK(!bad);
                        CHECK(same_bits(edx, cdx, nx, what));
                    }
                    for (uint64_t seed = 1; seed <= 2; seed++) {
                        CHECK_INT_EQ(dt_backend_set_forced_order(c, seed), DT_OK);
                        poison(cdx, (size_t)nx * sizeof *cdx);
                        CHECK_INT_EQ(dt_maxpool2d_backward(c, cdx, dy, x, y, am, &s, &afloat),
                                     DT_OK);
                        int64_t *rank = forced_ranks(P, seed, POOL_SALT);
                        for (int o = 0; o < N_ORDERS; o++) {
                            poison(edx, (size_t)nx * sizeof *edx);
                            for (int64_t t = 0; t < nx; t++) {
                                const int64_t i = visit(o, t, nx);
                                edx[i] = dt_maxpool_cell_ranked(dy, am, &s, i, rank);
                            }
                            char b2[200];
                            snprintf(b2, sizeof b2, "forced %llu %s, %.100s",
                                     (unsigned long long)seed, order_names[o], base);
                            pool_text(what, sizeof what, b2, &s);
                            CHECK(same_bits(edx, cdx, nx, what));
                        }
                        free(rank);
                        if (seed == 2) {
                            pairs++;
                            differing += memcmp(cdx, prev, (size_t)nx * sizeof *cdx) != 0;
                        }
                        memcpy(prev, cdx, (size_t)nx * sizeof *cdx);
                    }
                    CHECK_INT_EQ(dt_backend_set_forced_order(c, 0), DT_OK);
                }
                free(x), free(y), free(dy), free(cdx), free(edx), free(prev), free(am);
            }
    fprintf(stderr,
            "max-pool backward on the cpu, forced orders 1 vs 2: different bits for %lld "
            "of %lld overlapping geometry/input cases\n",
            (long long)differing, (long long)pairs);
    CHECK(differing > 0);
    dt_backend_destroy(c);
}

/* ---- gpu: the device against the CPU ----------------------------------------------------- */

#ifdef DETRAIN_HAVE_CUDA_TOOLKIT

/* n floats on the device, all NaN. */
static float *dev_poisoned(struct dt_backend *g, int64_t n)
{
    float *h = xalloc(n);
    poison(h, (size_t)n * sizeof *h);
    float *d = dev_from(g, h, (size_t)n * sizeof(float));
    free(h);
    return d;
}

/* Download n elements of `size` bytes into a new host array and free the device one. */
static void *take(struct dt_backend *g, void *d, int64_t n, size_t size)
{
    void *h = dt_xmalloc((size_t)(n > 0 ? n : 1) * size);
    dt_backend_download(g, h, d, (size_t)n * size);
    dt_backend_free(g, d);
    return h;
}

static bool on_device(struct dt_backend *be) { return strcmp(dt_backend_name(be), "cuda") == 0; }

static bool uses_cudnn(const struct dt_policy *p) { return p->conv_algo != DT_CONV_ALGO_OWN; }

/* Tolerances where the bits may differ from the CPU's, relative to the sum of the terms'
 * magnitudes (a cancelling sum has no meaningful relative error of its own):
 *   TF32 (conv_algo autotune, cuDNN's default math): inputs cut to 11 significant bits
 *   (< 2^-10 each, even if truncated), < 2^-9 per product, plus the FP32 sum;
 *   FP32 in another order (cuDNN's FMA math, float atomics): K terms, < K * 2^-24 with
 *   K <= 1568 here (LeNet conv0's weight gradient at batch 2; at most 400 elsewhere).
 * Plus 1e-2 of the largest magnitude in the tensor, times the same rtol: FFT and Winograd
 * algorithms, which cuDNN may pick, spread their rounding error over the outputs in
 * proportion to the tensor's scale rather than each output's own terms. A wrong index,
 * window or missing term is orders of magnitude above either bound. */
#define RTOL_TF32 4e-3
#define RTOL_FP32 1e-4
#define SCALE_FLOOR 1e-2

static void check_mag(const char *what, const float *got, const double *ref, const double *mag,
                      int64_t n, double rtol)
{
    double top = 0;
    for (int64_t i = 0; i < n; i++) top = mag[i] > top ? mag[i] : top;
    for (int64_t i = 0; i < n; i++) {
        const double d = fabs((double)got[i] - ref[i]),
                     allowed = rtol * (mag[i] + SCALE_FLOOR * top);
        if (!(d <= allowed)) {
            fprintf(stderr, "%s[%lld]: got %.9g, reference %.12g (diff %.3g, allowed %.3g)\n", what,
                    (long long)i, (double)got[i], ref[i], d, allowed);
            dt_check_failures_++;
            return;
        }
    }
}

/* The expected status of an op: DT_OK; in a build without cuDNN the cuDNN policies refuse
 * (DT_ERR_UNSUPPORTED); where cuDNN offers no algorithm the backend runs its own kernels
 * (noted "fallback"), so every geometry must run. Returns whether there is an output to
 * compare. */
static bool status_ok(enum dt_status st, const struct dt_policy *p, bool lenet, const char *what)
{
    (void)lenet; /* every geometry runs now (fallback), LeNet's or not */
    if (uses_cudnn(p) && dt_cudnn_version() == 0) {
        CHECK_INT_EQ(st, DT_ERR_UNSUPPORTED);
        return false;
    }
    if (st != DT_OK) fprintf(stderr, "%s: %s\n", what, dt_status_str(st));
    CHECK_INT_EQ(st, DT_OK);
    return st == DT_OK;
}

/* ---- convolution runs ----------------------------------------------------------------- */

struct conv_case {
    struct dt_conv2d_shape s;
    bool lenet; /* a geometry LeNet trains with */
    float *x, *w, *bias, *dy;
};
struct conv_result {
    float *y, *dx, *dw;
    enum dt_status st[3]; /* forward, backward-data, backward-weight */
};
static const char *const conv_op_names[3] = {"forward", "backward_data", "backward_weight"};

static void conv_case_fill(struct conv_case *k, const struct conv_geom *g, bool lenet)
{
    k->s = conv_shape(g);
    k->lenet = lenet;
    const struct dt_conv2d_shape *s = &k->s;
    k->x = xalloc(conv_nx(s)), k->w = xalloc(conv_nw(s));
    k->bias = xalloc(s->K_out), k->dy = xalloc(conv_ny(s));
    fill_varied(k->x, conv_nx(s), 1.0);
    fill_varied(k->w, conv_nw(s), 0.25);
    fill_varied(k->bias, s->K_out, 0.5);
    fill_varied(k->dy, conv_ny(s), 0.1);
}

static void conv_case_free(struct conv_case *k)
{
    free(k->x), free(k->w), free(k->bias), free(k->dy);
}

static void conv_result_free(struct conv_result *r) { free(r->y), free(r->dx), free(r->dw); }

/* The three convolution ops on `be` (device or CPU), outputs poisoned first, returned in
 * host memory with each op's status. */
static void conv_run(struct dt_backend *be, const struct conv_case *k, const struct dt_policy *pol,
                     struct conv_result *o)
{
    const struct dt_conv2d_shape *s = &k->s;
    const int64_t nx = conv_nx(s), nw = conv_nw(s), ny = conv_ny(s);
    if (on_device(be)) {
        float *x = dev_from(be, k->x, (size_t)nx * 4), *w = dev_from(be, k->w, (size_t)nw * 4);
        float *bias = dev_from(be, k->bias, (size_t)s->K_out * 4);
        float *dy = dev_from(be, k->dy, (size_t)ny * 4);
        float *y = dev_poisoned(be, ny), *dx = dev_poisoned(be, nx), *dw = dev_poisoned(be, nw);
        o->st[0] = dt_conv2d_forward(be, y, x, w, bias, s, pol);
        o->st[1] = dt_conv2d_backward_data(be, dx, dy, w, s, pol);
        o->st[2] = dt_conv2d_backward_weight(be, dw, x, dy, s, pol);
        o->y = take(be, y, ny, 4), o->dx = take(be, dx, nx, 4), o->dw = take(be, dw, nw, 4);
        dt_backend_free(be, x), dt_backend_free(be, w), dt_backend_free(be, bias);
        dt_backend_free(be, dy);
        return;
    }
    o->y = xalloc(ny), o->dx = xalloc(nx), o->dw = xalloc(nw);
    poison(o->y, (size_t)ny * 4), poison(o->dx, (size_t)nx * 4), poison(o->dw, (size_t)nw * 4);
    o->st[0] = dt_conv2d_forward(be, o->y, k->x, k->w, k->bias, s, pol);
    o->st[1] = dt_conv2d_backward_data(be, o->dx, k->dy, k->w, s, pol);
    o->st[2] = dt_conv2d_backward_weight(be, o->dw, k->x, k->dy, s, pol);
}

/* 1 when every output of a and b holds the same bits. */
static int conv_same(const struct conv_result *a, const struct conv_result *b,
                     const struct conv_case *k, const char *what)
{
    char w[224];
    int ok = 1;
    const float *oa[3] = {a->y, a->dx, a->dw}, *ob[3] = {b->y, b->dx, b->dw};
    const int64_t n[3] = {conv_ny(&k->s), conv_nx(&k->s), conv_nw(&k->s)};
    for (int op = 0; op < 3; op++) {
        snprintf(w, sizeof w, "%s %s", what, conv_op_names[op]);
        ok &= same_bits(oa[op], ob[op], n[op], w);
    }
    return ok;
}

/* Double references of the three ops and the magnitudes of their terms, in one pass over
 * every (output position, kernel cell, channel, output channel). */
struct conv_ref {
    double *y, *ymag, *dx, *dxmag, *dw, *dwmag;
};

static void conv_ref_make(struct conv_ref *r, const struct conv_case *k)
{
    const struct dt_conv2d_shape *s = &k->s;
    const int64_t K = s->K_out, C = s->C;
    r->y = dt_xcalloc((size_t)conv_ny(s), sizeof(double));
    r->ymag = dt_xcalloc((size_t)conv_ny(s), sizeof(double));
    r->dx = dt_xcalloc((size_t)conv_nx(s), sizeof(double));
    r->dxmag = dt_xcalloc((size_t)conv_nx(s), sizeof(double));
    r->dw = dt_xcalloc((size_t)conv_nw(s), sizeof(double));
    r->dwmag = dt_xcalloc((size_t)conv_nw(s), sizeof(double));
    for (int64_t row = 0; row < conv_rows(s); row++) {
        const int64_t b = row / (s->OH * s->OW), oh = row / s->OW % s->OH, ow = row % s->OW;
        for (int64_t o = 0; o < K; o++)
            r->y[row * K + o] = k->bias[o], r->ymag[row * K + o] = fabs(k->bias[o]);
        for (int64_t kh = 0; kh < s->KH; kh++)
            for (int64_t kw = 0; kw < s->KW; kw++) {
                const int64_t ih = oh * s->stride - s->pad + kh, iw = ow * s->stride - s->pad + kw;
                if (ih < 0 || ih >= s->H || iw < 0 || iw >= s->W) continue;
                for (int64_t c = 0; c < C; c++) {
                    const int64_t xi = ((b * s->H + ih) * s->W + iw) * C + c;
                    const int64_t wi = ((kh * s->KW + kw) * C + c) * K;
                    for (int64_t o = 0; o < K; o++) {
                        const double xv = k->x[xi], wv = k->w[wi + o], dyv = k->dy[row * K + o];
                        r->y[row * K + o] += xv * wv, r->ymag[row * K + o] += fabs(xv * wv);
                        r->dx[xi] += dyv * wv, r->dxmag[xi] += fabs(dyv * wv);
                        r->dw[wi + o] += xv * dyv, r->dwmag[wi + o] += fabs(xv * dyv);
                    }
                }
            }
    }
}

static void conv_ref_free(struct conv_ref *r)
{
    free(r->y), free(r->ymag), free(r->dx), free(r->dxmag), free(r->dw), free(r->dwmag);
}

/* ---- max-pooling runs ------------------------------------------------------------------ */

struct pool_case {
    struct dt_pool2d_shape s;
    float *x, *dy;
};
struct pool_result {
    float *y, *dx;
    int32_t *am;
    enum dt_status st[2]; /* forward, backward */
};

static void pool_case_fill(struct pool_case *k, const struct pool_geom *g, int pat)
{
    k->s = pool_shape(g);
    k->x = xalloc(pool_nx(&k->s)), k->dy = xalloc(pool_ny(&k->s));
    fill_pattern(k->x, &k->s, pat);
    fill_varied(k->dy, pool_ny(&k->s), 1.0);
}

static void pool_case_free(struct pool_case *k) { free(k->x), free(k->dy); }

static void pool_result_free(struct pool_result *r) { free(r->y), free(r->dx), free(r->am); }

/* Forward, then backward from the forward's outputs, on `be`; outputs poisoned first. */
static void pool_run(struct dt_backend *be, const struct pool_case *k, const struct dt_policy *pol,
                     struct pool_result *o)
{
    const struct dt_pool2d_shape *s = &k->s;
    const int64_t nx = pool_nx(s), ny = pool_ny(s);
    int32_t *am_poison = dt_xmalloc((size_t)ny * sizeof *am_poison);
    for (int64_t i = 0; i < ny; i++) am_poison[i] = -1;
    if (on_device(be)) {
        float *x = dev_from(be, k->x, (size_t)nx * 4), *dy = dev_from(be, k->dy, (size_t)ny * 4);
        float *y = dev_poisoned(be, ny), *dx = dev_poisoned(be, nx);
        int32_t *am = dev_from(be, am_poison, (size_t)ny * sizeof *am);
        o->st[0] = dt_maxpool2d_forward(be, y, am, x, s, pol);
        o->st[1] = dt_maxpool2d_backward(be, dx, dy, x, y, am, s, pol);
        o->y = take(be, y, ny, 4), o->dx = take(be, dx, nx, 4);
        o->am = take(be, am, ny, sizeof(int32_t));
        dt_backend_free(be, x), dt_backend_free(be, dy);
        free(am_poison);
        return;
    }
    o->y = xalloc(ny), o->dx = xalloc(nx), o->am = am_poison;
    poison(o->y, (size_t)ny * 4), poison(o->dx, (size_t)nx * 4);
    o->st[0] = dt_maxpool2d_forward(be, o->y, o->am, k->x, s, pol);
    o->st[1] = dt_maxpool2d_backward(be, o->dx, k->dy, k->x, o->y, o->am, s, pol);
}

static int pool_same(const struct pool_result *a, const struct pool_result *b,
                     const struct pool_case *k, const char *what)
{
    char w[224];
    int ok = 1;
    snprintf(w, sizeof w, "%s forward", what);
    ok &= same_bits(a->y, b->y, pool_ny(&k->s), w);
    ok &= same_ints(a->am, b->am, pool_ny(&k->s), w);
    snprintf(w, sizeof w, "%s backward", what);
    ok &= same_bits(a->dx, b->dx, pool_nx(&k->s), w);
    return ok;
}

/* The backward's double reference over the CPU's argmax (tie-free inputs: cuDNN, which
 * finds the winners again from x and y, finds the same), and the magnitudes. */
static void pool_ref_make(double *ref, double *mag, const struct pool_case *k, const int32_t *am)
{
    const struct dt_pool2d_shape *s = &k->s;
    const int64_t n_img = s->H * s->W * s->C, n_out = s->OH * s->OW * s->C;
    memset(ref, 0, (size_t)pool_nx(s) * sizeof *ref);
    memset(mag, 0, (size_t)pool_nx(s) * sizeof *mag);
    for (int64_t i = 0; i < pool_ny(s); i++) {
        const int64_t cell = i / n_out * n_img + (int64_t)am[i] * s->C + i % s->C;
        ref[cell] += k->dy[i], mag[cell] += fabs(k->dy[i]);
    }
}

/* ---- parity --------------------------------------------------------------------------- */

/* The three levels and the single-control ablations of the convolution. */
enum { N_PARITY_POLICIES = 6 };
static void parity_policies(struct dt_policy p[N_PARITY_POLICIES])
{
    p[0] = level(DT_LEVEL_PORTABLE);
    p[1] = level(DT_LEVEL_RUN_TO_RUN);
    p[2] = level(DT_LEVEL_FAST);
    p[3] = policy_of(DT_LEVEL_PORTABLE, "atomics", "float");
    p[4] = policy_of(DT_LEVEL_PORTABLE, "conv_algo", "deterministic");
    p[5] = policy_of(DT_LEVEL_PORTABLE, "conv_algo", "autotune");
}

/* Small geometries for the device tests; the last ones are LeNet's (batch 2 and 4). */
static const struct conv_geom gpu_conv_geoms[] = {
    {1, 5, 5, 1, 2, 3, 3, 1, 0},    {2, 9, 8, 3, 4, 3, 3, 2, 1}, {2, 6, 5, 3, 4, 3, 2, 1, 1},
    {2, 9, 7, 2, 3, 2, 4, 2, 1},    {1, 6, 7, 2, 2, 3, 3, 1, 2}, {2, 28, 28, 1, 6, 5, 5, 1, 2},
    {4, 14, 14, 6, 16, 5, 5, 1, 0},
};
enum { N_GPU_CONV = sizeof gpu_conv_geoms / sizeof gpu_conv_geoms[0], FIRST_LENET_CONV = 5 };
static const struct pool_geom gpu_pool_geoms[] = {
    {1, 4, 4, 1, 2, 2, 0},   {2, 7, 9, 3, 2, 2, 0},   {2, 9, 9, 2, 2, 3, 0},
    {2, 7, 9, 2, 3, 2, 1},   {2, 6, 7, 2, 3, 1, 0},   {1, 5, 4, 2, 3, 1, 2},
    {4, 28, 28, 6, 2, 2, 0}, {4, 28, 28, 6, 3, 2, 1}, {4, 10, 10, 16, 3, 2, 1},
};
enum { N_GPU_POOL = sizeof gpu_pool_geoms / sizeof gpu_pool_geoms[0] };

/* Every convolution op under every parity policy against the CPU: bitwise where the own
 * kernels run at math portable with a deterministic scatter (the forward always; backward
 * data under fixed_point; backward weight under reduction fixed); otherwise within the
 * tolerances above (TF32 under autotune, FP32 elsewhere). */
DT_TEST(conv_parity)
{
    struct dt_backend *g = gpu_or_skip(), *c = cpu(3);
    struct dt_policy pols[N_PARITY_POLICIES];
    parity_policies(pols);
    for (int gi = 0; gi < N_GPU_CONV; gi++) {
        struct conv_case k;
        struct conv_ref r;
        conv_case_fill(&k, &gpu_conv_geoms[gi], gi >= FIRST_LENET_CONV);
        conv_ref_make(&r, &k);
        const double *ref[3] = {r.y, r.dx, r.dw}, *mag[3] = {r.ymag, r.dxmag, r.dwmag};
        const int64_t n[3] = {conv_ny(&k.s), conv_nx(&k.s), conv_nw(&k.s)};
        for (int p = 0; p < N_PARITY_POLICIES; p++) {
            const struct dt_policy *pol = &pols[p];
            struct conv_result go, co;
            conv_run(g, &k, pol, &go);
            conv_run(c, &k, pol, &co);
            const bool own_portable =
                pol->conv_algo == DT_CONV_ALGO_OWN && pol->math == DT_MATH_PORTABLE;
            const bool exact[3] = {own_portable,
                                   own_portable && pol->atomics == DT_ATOMICS_FIXED_POINT,
                                   own_portable && dt_reduction_ordered(pol)};
            const double rtol =
                pol->conv_algo == DT_CONV_ALGO_AUTOTUNE ||
                        (pol->conv_algo == DT_CONV_ALGO_OWN && pol->math == DT_MATH_FAST)
                    ? RTOL_TF32
                    : RTOL_FP32;
            const float *gout[3] = {go.y, go.dx, go.dw}, *cout[3] = {co.y, co.dx, co.dw};
            for (int op = 0; op < 3; op++) {
                char what[512], base[128];
                snprintf(base, sizeof base, "%.60s %s", pol->name, conv_op_names[op]);
                conv_text(what, sizeof what, base, &k.s);
                CHECK_INT_EQ(co.st[op], DT_OK);
                if (!status_ok(go.st[op], pol, k.lenet, what)) continue;
                if (exact[op]) CHECK(same_bits(gout[op], cout[op], n[op], what));
                else check_mag(what, gout[op], ref[op], mag[op], n[op], rtol);
            }
            conv_result_free(&go), conv_result_free(&co);
        }
        conv_ref_free(&r);
        conv_case_free(&k);
    }
    dt_backend_destroy(g);
    dt_backend_destroy(c);
}

/* Max pooling under every parity policy, tie-free inputs: the forward (detrain's kernel at
 * every level) bitwise with the same argmax; the backward bitwise where the own kernels
 * run without a float scatter (no overlap, or fixed point), else within FP32 tolerance
 * (cuDNN's MAX and MAX_DETERMINISTIC, float atomics). */
DT_TEST(pool_parity)
{
    struct dt_backend *g = gpu_or_skip(), *c = cpu(3);
    struct dt_policy pols[N_PARITY_POLICIES];
    parity_policies(pols);
    for (int gi = 0; gi < N_GPU_POOL; gi++) {
        struct pool_case k;
        pool_case_fill(&k, &gpu_pool_geoms[gi], PAT_DISTINCT);
        const int64_t nx = pool_nx(&k.s);
        double *ref = dt_xmalloc((size_t)nx * sizeof *ref),
               *mag = dt_xmalloc((size_t)nx * sizeof *mag);
        for (int p = 0; p < N_PARITY_POLICIES; p++) {
            const struct dt_policy *pol = &pols[p];
            struct pool_result go, co;
            pool_run(g, &k, pol, &go);
            pool_run(c, &k, pol, &co);
            char what[512];
            pool_text(what, sizeof what, pol->name, &k.s);
            CHECK_INT_EQ(co.st[0], DT_OK);
            CHECK_INT_EQ(co.st[1], DT_OK);
            CHECK_INT_EQ(go.st[0], DT_OK);
            CHECK(same_bits(go.y, co.y, pool_ny(&k.s), what));
            CHECK(same_ints(go.am, co.am, pool_ny(&k.s), what));
            if (status_ok(go.st[1], pol, true, what)) {
                const bool exact = !uses_cudnn(pol) &&
                                   (k.s.K <= k.s.stride || pol->atomics == DT_ATOMICS_FIXED_POINT);
                if (exact) {
                    CHECK(same_bits(go.dx, co.dx, nx, what));
                } else {
                    pool_ref_make(ref, mag, &k, co.am);
                    check_mag(what, go.dx, ref, mag, nx, RTOL_FP32);
                }
            }
            pool_result_free(&go), pool_result_free(&co);
        }
        free(ref), free(mag);
        pool_case_free(&k);
    }
    dt_backend_destroy(g);
    dt_backend_destroy(c);
}

/* Ties, signed zeros and NaNs, overlapping and not: the forward bitwise with the CPU (and
 * the same argmax) under every parity policy; the backward bitwise at portable. */
DT_TEST(pool_ties_bitwise)
{
    struct dt_backend *g = gpu_or_skip(), *c = cpu(2);
    struct dt_policy pols[N_PARITY_POLICIES];
    parity_policies(pols);
    for (int gi = 0; gi < N_GPU_POOL; gi++)
        for (int pat = 0; pat < N_PATTERNS; pat++) {
            struct pool_case k;
            pool_case_fill(&k, &gpu_pool_geoms[gi], pat);
            for (int p = 0; p < N_PARITY_POLICIES; p++) {
                struct pool_result go, co;
                pool_run(g, &k, &pols[p], &go);
                pool_run(c, &k, &pols[p], &co);
                char what[512], base[128];
                snprintf(base, sizeof base, "%.60s, %s", pols[p].name, pattern_names[pat]);
                pool_text(what, sizeof what, base, &k.s);
                CHECK_INT_EQ(go.st[0], DT_OK);
                CHECK(same_bits(go.y, co.y, pool_ny(&k.s), what));
                CHECK(same_ints(go.am, co.am, pool_ny(&k.s), what));
                if (p == 0) {
                    CHECK_INT_EQ(go.st[1], DT_OK);
                    CHECK_INT_EQ(co.st[1], DT_OK);
                    CHECK(same_bits(go.dx, co.dx, pool_nx(&k.s), what));
                }
                pool_result_free(&go), pool_result_free(&co);
            }
            pool_case_free(&k);
        }
    dt_backend_destroy(g);
    dt_backend_destroy(c);
}

static const int launches[][2] = {{256, 0}, {32, 1}, {64, 3}, {1024, 0}, {96, 7}, {128, 2}};
enum { N_LAUNCHES = sizeof launches / sizeof launches[0] };

/* At portable every op gives the same bits for every launch geometry, and they are the
 * CPU's; at run_to_run (cuDNN's deterministic algorithms; the launch hook moves detrain's
 * own kernels around them: transposes, bias, pooling forward) the same bits too; and under
 * `atomics: float` in forced order 1 (the ranked gathers, the heaviest kernels: they must
 * launch with 1024 threads too) the CPU's forced bits. */
DT_TEST(grid_independence)
{
    struct dt_backend *g = gpu_or_skip(), *c = cpu(2);
    const struct dt_policy pols[] = {level(DT_LEVEL_PORTABLE), level(DT_LEVEL_RUN_TO_RUN),
                                     policy_of(DT_LEVEL_PORTABLE, "atomics", "float")};
    const int conv_idx[] = {1, 3, 6};
    const int pool_idx[] = {2, 3, 7};
    for (int pi = 0; pi < 3; pi++) {
        const struct dt_policy *pol = &pols[pi];
        if (uses_cudnn(pol) && dt_cudnn_version() == 0)
            continue; /* conv_parity checks the refusal */
        CHECK_INT_EQ(dt_backend_set_forced_order(g, pi == 2 ? 1 : 0), DT_OK);
        CHECK_INT_EQ(dt_backend_set_forced_order(c, pi == 2 ? 1 : 0), DT_OK);
        for (int ci = 0; ci < 3; ci++) {
            struct conv_case k;
            conv_case_fill(&k, &gpu_conv_geoms[conv_idx[ci]], conv_idx[ci] >= FIRST_LENET_CONV);
            struct conv_result first, co;
            conv_run(c, &k, pol, &co);
            bool ran = true;
            for (int a = 0; a < N_LAUNCHES; a++) {
                dt_cuda_set_launch(g, launches[a][0], launches[a][1]);
                struct conv_result o;
                conv_run(g, &k, pol, &o);
                char what[512], base[128];
                snprintf(base, sizeof base, "%.60s launch (%d,%d)", pol->name, launches[a][0],
                         launches[a][1]);
                conv_text(what, sizeof what, base, &k.s);
                for (int op = 0; op < 3; op++) ran &= status_ok(o.st[op], pol, k.lenet, what);
                if (a == 0) {
                    first = o;
                    if (ran && !uses_cudnn(pol)) CHECK(conv_same(&o, &co, &k, what));
                } else {
                    if (ran) CHECK(conv_same(&o, &first, &k, what));
                    conv_result_free(&o);
                }
            }
            dt_cuda_set_launch(g, 0, 0);
            conv_result_free(&first), conv_result_free(&co);
            conv_case_free(&k);
        }
        for (int qi = 0; qi < 3; qi++) {
            struct pool_case k;
            pool_case_fill(&k, &gpu_pool_geoms[pool_idx[qi]], PAT_DISTINCT);
            struct pool_result first, co;
            pool_run(c, &k, pol, &co);
            for (int a = 0; a < N_LAUNCHES; a++) {
                dt_cuda_set_launch(g, launches[a][0], launches[a][1]);
                struct pool_result o;
                pool_run(g, &k, pol, &o);
                char what[512], base[128];
                snprintf(base, sizeof base, "%.60s launch (%d,%d)", pol->name, launches[a][0],
                         launches[a][1]);
                pool_text(what, sizeof what, base, &k.s);
                CHECK_INT_EQ(o.st[0], DT_OK);
                CHECK_INT_EQ(o.st[1], DT_OK);
                if (a == 0) {
                    first = o;
                    if (!uses_cudnn(pol)) CHECK(pool_same(&o, &co, &k, what));
                } else {
                    CHECK(pool_same(&o, &first, &k, what));
                    pool_result_free(&o);
                }
            }
            dt_cuda_set_launch(g, 0, 0);
            pool_result_free(&first), pool_result_free(&co);
            pool_case_free(&k);
        }
    }
    dt_backend_destroy(g);
    dt_backend_destroy(c);
}

/* Forced orders (conv_algo own, math portable). Under `atomics: float` the col2im and the
 * overlapping max-pool scatter, under `reduction: unordered` the backward weight, run in
 * the order drawn from the seed: for seeds 1 and 2 the device gives exactly the CPU's
 * forced bits (every output: the other ops are deterministic under these policies), the
 * same seed twice the same bits, and seeds 1 and 2 different bits (negative control).
 * At portable the seed changes nothing. */
DT_TEST(forced_orders)
{
    struct dt_backend *g = gpu_or_skip(), *c = cpu(2);
    const struct dt_policy afloat = policy_of(DT_LEVEL_PORTABLE, "atomics", "float");
    const struct dt_policy unordered = policy_of(DT_LEVEL_PORTABLE, "reduction", "unordered");
    const struct dt_policy port = level(DT_LEVEL_PORTABLE);
    const int conv_idx[] = {1, 5, 6};
    for (int ci = 0; ci < 3; ci++) {
        struct conv_case k;
        conv_case_fill(&k, &gpu_conv_geoms[conv_idx[ci]], true);
        const struct dt_policy *pols[] = {&afloat, &unordered, &port};
        for (int p = 0; p < 3; p++) {
            struct conv_result gr[3], cr[2];
            for (int run = 0; run < 3; run++) { /* seeds 1, 2, then 1 again */
                const uint64_t seed = run == 1 ? 2 : 1;
                CHECK_INT_EQ(dt_backend_set_forced_order(g, seed), DT_OK);
                conv_run(g, &k, pols[p], &gr[run]);
                if (run < 2) {
                    CHECK_INT_EQ(dt_backend_set_forced_order(c, seed), DT_OK);
                    conv_run(c, &k, pols[p], &cr[run]);
                }
                for (int op = 0; op < 3; op++) CHECK_INT_EQ(gr[run].st[op], DT_OK);
            }
            char what[512], base[128];
            for (int run = 0; run < 2; run++) {
                snprintf(base, sizeof base, "%.60s forced %d: gpu vs cpu", pols[p]->name, run + 1);
                conv_text(what, sizeof what, base, &k.s);
                CHECK(conv_same(&gr[run], &cr[run], &k, what));
            }
            snprintf(base, sizeof base, "%.60s forced 1 twice", pols[p]->name);
            conv_text(what, sizeof what, base, &k.s);
            CHECK(conv_same(&gr[0], &gr[2], &k, what));
            const int64_t nx = conv_nx(&k.s), nw = conv_nw(&k.s);
            const bool dx_differ = memcmp(gr[0].dx, gr[1].dx, (size_t)nx * 4) != 0;
            const bool dw_differ = memcmp(gr[0].dw, gr[1].dw, (size_t)nw * 4) != 0;
            conv_text(what, sizeof what, pols[p]->name, &k.s);
            fprintf(stderr, "%s: forced orders 1 vs 2: backward_data %s, backward_weight %s\n",
                    what, dx_differ ? "differs" : "same", dw_differ ? "differs" : "same");
            CHECK(dx_differ == (pols[p] == &afloat));
            CHECK(dw_differ == (pols[p] == &unordered));
            for (int run = 0; run < 3; run++) conv_result_free(&gr[run]);
            conv_result_free(&cr[0]), conv_result_free(&cr[1]);
        }
        conv_case_free(&k);
    }
    /* max pooling: bumps make most winners win several overlapping windows */
    const int pool_idx[] = {3, 7, 6};
    for (int qi = 0; qi < 3; qi++) {
        struct pool_case k;
        pool_case_fill(&k, &gpu_pool_geoms[pool_idx[qi]], PAT_BUMPS);
        const bool overlap = k.s.K > k.s.stride;
        const struct dt_policy *pols[] = {&afloat, &port};
        for (int p = 0; p < 2; p++) {
            struct pool_result gr[3], cr[2];
            for (int run = 0; run < 3; run++) {
                const uint64_t seed = run == 1 ? 2 : 1;
                CHECK_INT_EQ(dt_backend_set_forced_order(g, seed), DT_OK);
                pool_run(g, &k, pols[p], &gr[run]);
                if (run < 2) {
                    CHECK_INT_EQ(dt_backend_set_forced_order(c, seed), DT_OK);
                    pool_run(c, &k, pols[p], &cr[run]);
                }
                CHECK_INT_EQ(gr[run].st[0], DT_OK);
                CHECK_INT_EQ(gr[run].st[1], DT_OK);
            }
            char what[512], base[128];
            for (int run = 0; run < 2; run++) {
                snprintf(base, sizeof base, "%.60s forced %d: gpu vs cpu", pols[p]->name, run + 1);
                pool_text(what, sizeof what, base, &k.s);
                CHECK(pool_same(&gr[run], &cr[run], &k, what));
            }
            snprintf(base, sizeof base, "%.60s forced 1 twice", pols[p]->name);
            pool_text(what, sizeof what, base, &k.s);
            CHECK(pool_same(&gr[0], &gr[2], &k, what));
            const bool differ = memcmp(gr[0].dx, gr[1].dx, (size_t)pool_nx(&k.s) * 4) != 0;
            pool_text(what, sizeof what, pols[p]->name, &k.s);
            fprintf(stderr, "%s: forced orders 1 vs 2: backward %s\n", what,
                    differ ? "differs" : "same");
            CHECK(differ == (overlap && pols[p] == &afloat));
            for (int run = 0; run < 3; run++) pool_result_free(&gr[run]);
            pool_result_free(&cr[0]), pool_result_free(&cr[1]);
        }
        pool_case_free(&k);
    }
    CHECK_INT_EQ(dt_backend_set_forced_order(g, 0), DT_OK);
    dt_backend_destroy(g);
    dt_backend_destroy(c);
}

struct bad_call {
    struct dt_backend *be;
    const struct conv_case *conv; /* the conv backward-data, or */
    const struct pool_case *pool; /* the max-pool forward and backward */
    struct conv_result cr;
    struct pool_result pr;
};

static void bad_call_run(void *arg)
{
    struct bad_call *b = arg;
    const struct dt_policy pol = level(DT_LEVEL_PORTABLE);
    if (b->conv) conv_run(b->be, b->conv, &pol, &b->cr);
    else pool_run(b->be, b->pool, &pol, &b->pr);
}

/* Non-finite gradients on the fixed-point paths (portable): DT_ERR_NUMERIC, with the CPU's
 * message naming the first bad patch row / element; without overlap the max-pool backward
 * copies (no sum, no scale) and the NaN passes through on both, bit for bit. */
DT_TEST(numeric_errors)
{
    struct dt_backend *g = gpu_or_skip(), *c = cpu(2);
    struct conv_case k;
    conv_case_fill(&k, &gpu_conv_geoms[6], true);
    const int64_t K = k.s.K_out;
    k.dy[37 * K + 5] = NAN; /* three bad rows; the first (12) is named, at element 0 */
    k.dy[12 * K + 15] = INFINITY;
    k.dy[300 * K + 0] = -INFINITY;
    struct bad_call gb = {.be = g, .conv = &k}, cb = {.be = c, .conv = &k};
    char *gmsg = op_error_of(gb.be, bad_call_run, &gb),
         *cmsg = op_error_of(cb.be, bad_call_run, &cb);
    CHECK_INT_EQ(gb.cr.st[1], DT_ERR_NUMERIC);
    CHECK_INT_EQ(cb.cr.st[1], DT_ERR_NUMERIC);
    CHECK_CONTAINS(gmsg, "conv2d backward-data: non-finite gradient at patch row 12, element 0");
    CHECK_STR_EQ(gmsg, cmsg);
    free(gmsg), free(cmsg);
    conv_result_free(&gb.cr), conv_result_free(&cb.cr);
    conv_case_free(&k);

    struct pool_case pk;
    pool_case_fill(&pk, &gpu_pool_geoms[7], PAT_DISTINCT); /* 3x3/2 pad 1 */
    pk.dy[1000] = NAN;
    pk.dy[77] = INFINITY;
    struct bad_call gp = {.be = g, .pool = &pk}, cp = {.be = c, .pool = &pk};
    gmsg = op_error_of(gp.be, bad_call_run, &gp), cmsg = op_error_of(cp.be, bad_call_run, &cp);
    CHECK_INT_EQ(gp.pr.st[1], DT_ERR_NUMERIC);
    CHECK_INT_EQ(cp.pr.st[1], DT_ERR_NUMERIC);
    CHECK_CONTAINS(gmsg, "maxpool2d backward: non-finite gradient at element 77");
    CHECK_STR_EQ(gmsg, cmsg);
    free(gmsg), free(cmsg);
    pool_result_free(&gp.pr), pool_result_free(&cp.pr);
    pool_case_free(&pk);

    pool_case_fill(&pk, &gpu_pool_geoms[6], PAT_DISTINCT); /* 2x2/2: a copy, no scale */
    pk.dy[1000] = NAN;
    pk.dy[77] = INFINITY;
    const struct dt_policy port = level(DT_LEVEL_PORTABLE);
    struct pool_result go, co;
    pool_run(g, &pk, &port, &go);
    pool_run(c, &pk, &port, &co);
    CHECK_INT_EQ(go.st[1], DT_OK);
    CHECK_INT_EQ(co.st[1], DT_OK);
    CHECK(pool_same(&go, &co, &pk, "2x2/2 backward with a NaN and an Inf"));
    pool_result_free(&go), pool_result_free(&co);
    pool_case_free(&pk);

    /* and the device goes on working after the errors */
    conv_case_fill(&k, &gpu_conv_geoms[1], false);
    struct conv_result a, b;
    conv_run(g, &k, &port, &a);
    conv_run(c, &k, &port, &b);
    for (int op = 0; op < 3; op++) CHECK_INT_EQ(a.st[op], DT_OK);
    CHECK(conv_same(&a, &b, &k, "after the errors"));
    conv_result_free(&a), conv_result_free(&b);
    conv_case_free(&k);
    dt_backend_destroy(g);
    dt_backend_destroy(c);
}

/* ---- cuDNN's algorithm notes ------------------------------------------------------------- */

/* The notes' shape texts (nets/cuda/cudnn_conv.c). */
static void note_conv_shape(char *buf, size_t size, const struct dt_conv2d_shape *s)
{
    snprintf(buf, size, "%lldx%lldx%lld>%lld k%lldx%lld s%lld p%lld b%lld", (long long)s->H,
             (long long)s->W, (long long)s->C, (long long)s->K_out, (long long)s->KH,
             (long long)s->KW, (long long)s->stride, (long long)s->pad, (long long)s->B);
}
static void note_pool_shape(char *buf, size_t size, const struct dt_pool2d_shape *s)
{
    snprintf(buf, size, "%lldx%lldx%lld k%lld s%lld p%lld b%lld", (long long)s->H, (long long)s->W,
             (long long)s->C, (long long)s->K, (long long)s->stride, (long long)s->pad,
             (long long)s->B);
}

static void print_note(const char *pol, const struct dt_algo_note *n)
{
    fprintf(stderr, "  %s: %s %s algo %d %s deterministic=%d math=%s how=%s\n", pol, n->op,
            n->shape, n->algo, n->name, (int)n->deterministic, n->math, n->how);
}

/* In a build without cuDNN both cuDNN modes refuse every convolution (and leave no note);
 * then the cuDNN cases have nothing more to test and skip. Returns true with cuDNN; false
 * (g destroyed) when the refusal check failed. */
static bool have_cudnn_or_skip(struct dt_backend *g)
{
    if (dt_cudnn_version() != 0) return true;
    struct dt_policy p = policy_of(DT_LEVEL_PORTABLE, "conv_algo", "deterministic");
    struct conv_case k;
    conv_case_fill(&k, &gpu_conv_geoms[0], false);
    struct conv_result r;
    conv_run(g, &k, &p, &r);
    for (int op = 0; op < 3; op++) CHECK_INT_EQ(r.st[op], DT_ERR_UNSUPPORTED);
    CHECK_INT_EQ(dt_backend_take_algo_notes(g, NULL, 0), 0);
    conv_result_free(&r);
    conv_case_free(&k);
    dt_backend_destroy(g);
    if (dt_check_failures_ == 0) DT_SKIP("built without cuDNN (the refusals checked)");
    return false;
}

/* One LeNet layer through cuDNN: the three convolution ops and the max-pool backward
 * after them, four notes in call order. */
struct layer {
    struct conv_case conv;
    struct pool_case pool;
};
struct layer_out {
    struct conv_result c;
    struct pool_result p;
};

static void layer_run(struct dt_backend *g, const struct layer *l, const struct dt_policy *pol,
                      struct layer_out *o)
{
    conv_run(g, &l->conv, pol, &o->c);
    pool_run(g, &l->pool, pol, &o->p);
    for (int op = 0; op < 3; op++) CHECK_INT_EQ(o->c.st[op], DT_OK);
    CHECK_INT_EQ(o->p.st[0], DT_OK);
    CHECK_INT_EQ(o->p.st[1], DT_OK);
}

static void layer_out_free(struct layer_out *o)
{
    conv_result_free(&o->c), pool_result_free(&o->p);
}

/* The notes of one layer_run: ops in call order and the call's geometry. */
static void check_layer_notes(const struct dt_algo_note *n, int count, const struct layer *l,
                              const char *pol)
{
    static const char *const ops[4] = {"conv_fwd", "conv_bwd_data", "conv_bwd_filter", "pool_bwd"};
    char cshape[64], pshape[64];
    note_conv_shape(cshape, sizeof cshape, &l->conv.s);
    note_pool_shape(pshape, sizeof pshape, &l->pool.s);
    CHECK_INT_EQ(count, 4);
    for (int i = 0; i < count && i < 4; i++) {
        print_note(pol, &n[i]);
        CHECK_STR_EQ(n[i].op, ops[i]);
        CHECK_STR_EQ(n[i].shape, i < 3 ? cshape : pshape);
        CHECK(strcmp(n[i].name, "UNKNOWN") != 0 && n[i].name[0] != '\0');
        /* a cuDNN algorithm, or detrain's own kernels where cuDNN has none (said so) */
        if (i < 3) CHECK(n[i].algo >= 0 || (n[i].algo == -1 && !strcmp(n[i].how, "fallback")));
    }
}

static void layer_make(struct layer *l, int conv_idx, int pool_idx)
{
    conv_case_fill(&l->conv, &gpu_conv_geoms[conv_idx], true);
    pool_case_fill(&l->pool, &gpu_pool_geoms[pool_idx], PAT_DISTINCT);
}

static void layer_free(struct layer *l) { conv_case_free(&l->conv), pool_case_free(&l->pool); }

/* conv_algo deterministic (run_to_run, and portable with that one control): every
 * convolution note is marked deterministic, FP32 (fma), chosen by heuristic -- and cuDNN's
 * own timing report (cudnnFind*, independent of how the choice was made) says that
 * algorithm is deterministic; the max-pool backward is MAX_DETERMINISTIC. Two runs give the
 * same bits and the same algorithms; a short take returns the count and the first notes;
 * after dt_backend_reset_algo_choices the next calls choose and note again, the same
 * algorithms (a heuristic does not change its mind). */
DT_TEST(deterministic_notes)
{
    struct dt_backend *g = gpu_or_skip();
    if (!have_cudnn_or_skip(g)) return;
    const struct dt_policy pols[] = {level(DT_LEVEL_RUN_TO_RUN),
                                     policy_of(DT_LEVEL_PORTABLE, "conv_algo", "deterministic")};
    const int layers[][2] = {{5, 7}, {6, 8}}; /* LeNet conv0 + pool0, conv1 + pool1 (overlap) */
    for (int p = 0; p < 2; p++) {
        const struct dt_policy *pol = &pols[p];
        dt_backend_reset_algo_choices(g);
        (void)dt_backend_take_algo_notes(g, NULL, 0);
        for (int li = 0; li < 2; li++) {
            struct layer l;
            layer_make(&l, layers[li][0], layers[li][1]);
            struct layer_out a, b, r;
            struct dt_algo_note n1[8], n2[8], n3[8];
            layer_run(g, &l, pol, &a);
            const int c1 = dt_backend_take_algo_notes(g, n1, 8);
            check_layer_notes(n1, c1, &l, pol->name);
            for (int i = 0; i < c1 && i < 4; i++) {
                CHECK(n1[i].deterministic);
                if (i < 3 && !strcmp(n1[i].how, "fallback")) { /* no cuDNN algorithm: own */
                    fprintf(stderr, "%s %s: no deterministic cuDNN algorithm; own kernels\n",
                            pol->name, n1[i].op);
                    continue;
                }
                CHECK_STR_EQ(n1[i].how, i < 3 ? "heuristic" : "fixed");
                if (i == 3) {
                    CHECK_STR_EQ(n1[i].name, "MAX_DETERMINISTIC");
                    continue;
                }
                CHECK_STR_EQ(n1[i].math, "fma");
                int det = -1;
                const enum dt_status st =
                    dt_cudnn_reported_determinism(g, n1[i].op, &l.conv.s, n1[i].algo, &det);
                if (st != DT_OK || det != 1)
                    fprintf(stderr,
                            "%s %s: cuDNN's report for algo %d: status %s, "
                            "deterministic %d\n",
                            pol->name, n1[i].op, n1[i].algo, dt_status_str(st), det);
                CHECK_INT_EQ(st, DT_OK);
                CHECK_INT_EQ(det, 1);
            }
            CHECK_INT_EQ(dt_backend_take_algo_notes(g, n2, 8), 0); /* the report notes nothing */

            layer_run(g, &l, pol, &b); /* again: the same bits, the same choices */
            const int c2 = dt_backend_take_algo_notes(g, n2, 8);
            check_layer_notes(n2, c2, &l, pol->name);
            for (int i = 0; i < c1 && i < c2 && i < 4; i++)
                CHECK(n2[i].algo == n1[i].algo && strcmp(n2[i].name, n1[i].name) == 0);
            CHECK(conv_same(&a.c, &b.c, &l.conv, "deterministic rerun"));
            CHECK(pool_same(&a.p, &b.p, &l.pool, "deterministic rerun"));

            struct conv_result extra; /* a short take: the count, and the first notes */
            conv_run(g, &l.conv, pol, &extra);
            CHECK_INT_EQ(dt_backend_take_algo_notes(g, n3, 2), 3);
            CHECK_STR_EQ(n3[0].op, "conv_fwd");
            CHECK_STR_EQ(n3[1].op, "conv_bwd_data");
            CHECK_INT_EQ(dt_backend_take_algo_notes(g, n3, 8), 0);
            conv_result_free(&extra);

            dt_backend_reset_algo_choices(g); /* choose afresh, as a new process */
            CHECK_INT_EQ(dt_backend_take_algo_notes(g, n3, 8), 0);
            layer_run(g, &l, pol, &r);
            const int c3 = dt_backend_take_algo_notes(g, n3, 8);
            check_layer_notes(n3, c3, &l, pol->name);
            for (int i = 0; i < c1 && i < c3 && i < 4; i++)
                CHECK(n3[i].algo == n1[i].algo && n3[i].deterministic);
            CHECK(conv_same(&a.c, &r.c, &l.conv, "deterministic after reset"));
            CHECK(pool_same(&a.p, &r.p, &l.pool, "deterministic after reset"));
            layer_out_free(&a), layer_out_free(&b), layer_out_free(&r);
            layer_free(&l);
        }
    }
    dt_backend_destroy(g);
}

/* cuDNN may refuse, at execution, an algorithm it offered (CUDNN_STATUS_NOT_SUPPORTED).
 * Forced through the seam for all four ops of a layer under portable with conv_algo:
 * deterministic: every op still succeeds, its note says "refused", and the
 * bits are those of detrain's own kernels under the same policy (conv_algo: own, i.e. plain
 * portable). The refused convolutions stay on the own kernels for that shape (their next
 * notes say so, without the seam); the max-pool backward, not cached, asks cuDNN again. */
DT_TEST(exec_refused_falls_back)
{
    struct dt_backend *g = gpu_or_skip();
    if (!have_cudnn_or_skip(g)) return;
    const struct dt_policy pol = policy_of(DT_LEVEL_PORTABLE, "conv_algo", "deterministic");
    const struct dt_policy own = level(DT_LEVEL_PORTABLE);
    struct layer l;
    layer_make(&l, 5, 7);
    struct layer_out want, got, again;
    layer_run(g, &l, &own, &want);
    (void)dt_backend_take_algo_notes(g, NULL, 0);
    dt_backend_reset_algo_choices(g);
    CHECK(dt_cudnn_test_refuse_exec(g, 4));
    layer_run(g, &l, &pol, &got);
    struct dt_algo_note n[8];
    int count = dt_backend_take_algo_notes(g, n, 8);
    CHECK_INT_EQ(count, 4);
    for (int i = 0; i < count && i < 4; i++) {
        print_note("refused", &n[i]);
        CHECK_INT_EQ(n[i].algo, -1);
        CHECK_STR_EQ(n[i].how, "refused");
        CHECK_STR_EQ(n[i].name, "own (cuDNN refused at execution)");
        CHECK(n[i].deterministic);
    }
    CHECK(conv_same(&want.c, &got.c, &l.conv, "refused at execution vs own"));
    CHECK(pool_same(&want.p, &got.p, &l.pool, "refused at execution vs own"));
    layer_run(g, &l, &pol, &again); /* no seam now */
    count = dt_backend_take_algo_notes(g, n, 8);
    CHECK_INT_EQ(count, 4);
    for (int i = 0; i < count && i < 3; i++) CHECK_STR_EQ(n[i].how, "refused");
    if (count == 4) CHECK(strcmp(n[3].how, "refused") != 0);
    layer_out_free(&want), layer_out_free(&got), layer_out_free(&again);
    layer_free(&l);
    dt_backend_destroy(g);
}

/* conv_algo autotune (fast, and portable with that one control): every convolution note
 * says it was timed and names a real algorithm and math mode; the max-pool backward is
 * cuDNN's MAX, which cuDNN does not promise to be deterministic. After a reset the next
 * calls note again. */
DT_TEST(autotune_notes)
{
    struct dt_backend *g = gpu_or_skip();
    if (!have_cudnn_or_skip(g)) return;
    const struct dt_policy pols[] = {level(DT_LEVEL_FAST),
                                     policy_of(DT_LEVEL_PORTABLE, "conv_algo", "autotune")};
    for (int p = 0; p < 2; p++) {
        const struct dt_policy *pol = &pols[p];
        dt_backend_reset_algo_choices(g);
        (void)dt_backend_take_algo_notes(g, NULL, 0);
        struct layer l;
        layer_make(&l, 6, 8);
        struct layer_out a, b;
        struct dt_algo_note n[8];
        layer_run(g, &l, pol, &a);
        int count = dt_backend_take_algo_notes(g, n, 8);
        check_layer_notes(n, count, &l, pol->name);
        for (int i = 0; i < count && i < 4; i++) {
            if (i == 3) {
                CHECK_STR_EQ(n[i].name, "MAX");
                CHECK(!n[i].deterministic);
                CHECK_STR_EQ(n[i].how, "fixed");
                continue;
            }
            CHECK_STR_EQ(n[i].how, "timed");
            CHECK(strcmp(n[i].math, "fma") == 0 || strcmp(n[i].math, "default(tf32)") == 0 ||
                  strcmp(n[i].math, "tensor_op") == 0);
        }
        dt_backend_reset_algo_choices(g);
        layer_run(g, &l, pol, &b);
        count = dt_backend_take_algo_notes(g, n, 8);
        check_layer_notes(n, count, &l, pol->name);
        for (int i = 0; i < count && i < 3; i++) CHECK_STR_EQ(n[i].how, "timed");
        layer_out_free(&a), layer_out_free(&b);
        layer_free(&l);
    }
    dt_backend_destroy(g);
}

/* reduction: exact's convolution weight gradient at portable: im2col of the batch and every
 * shard's partials in one launch (conv.c, dt_cuda_conv2d_backward_weight_shards) give the
 * CPU's per-shard bits for every GPU geometry at 1 to 3 shards, and the call per shard's
 * (DETRAIN_CUDA_ONE_PASS=0). */
DT_TEST(wgrad_shards_one_launch)
{
    setenv("DETRAIN_CUDA_ONE_PASS", "0", 1); /* read as a backend is made: the call per shard */
    struct dt_backend *g0 = gpu_or_skip();
    unsetenv("DETRAIN_CUDA_ONE_PASS");
    struct dt_backend *g = gpu_or_skip(), *c = cpu(2);
    struct dt_policy pol;
    dt_policy_from_level(&pol, DT_LEVEL_PORTABLE);
    for (int gi = 0; gi < N_GPU_CONV; gi++) {
        const struct dt_conv2d_shape s = conv_shape(&gpu_conv_geoms[gi]);
        for (int64_t S = 1; S <= 3 && S <= s.B; S++) {
            int64_t row[4];
            for (int64_t q = 0; q <= S; q++) row[q] = q * s.B / S;
            const struct dt_shards sh = {.count = S, .row = row};
            const int64_t nx = conv_nx(&s), ny = conv_ny(&s), nw = S * conv_nw(&s);
            float *x = dt_xmalloc((size_t)nx * 4), *dy = dt_xmalloc((size_t)ny * 4);
            float *cw = dt_xmalloc((size_t)nw * 4), *gw = dt_xmalloc((size_t)nw * 4);
            fill(x, nx, 1.0), fill(dy, ny, 0.1);
            dt_backend_set_shards(c, &sh);
            CHECK_INT_EQ(dt_conv2d_backward_weight(c, cw, x, dy, &s, &pol), DT_OK);
            dt_backend_set_shards(c, NULL);
            float *dx = dev_from(g, x, (size_t)nx * 4), *ddy = dev_from(g, dy, (size_t)ny * 4);
            for (int off = 0; off < 2; off++) {
                struct dt_backend *b = off ? g0 : g;
                float *dw = dt_backend_alloc(b, (size_t)nw * 4);
                dt_backend_set_shards(b, &sh);
                CHECK_INT_EQ(dt_conv2d_backward_weight(b, dw, dx, ddy, &s, &pol), DT_OK);
                dt_backend_set_shards(b, NULL);
                dt_backend_download(b, gw, dw, (size_t)nw * 4);
                char what[96];
                snprintf(what, sizeof what, "conv wgrad shards geometry %d, %lld shards%s", gi,
                         (long long)S, off ? ", one pass off" : "");
                CHECK(same_bits(cw, gw, nw, what));
                dt_backend_free(b, dw);
            }
            dt_backend_free(g, dx), dt_backend_free(g, ddy);
            free(x), free(dy), free(cw), free(gw);
        }
    }
    dt_backend_destroy(g0);
    dt_backend_destroy(g);
    dt_backend_destroy(c);
}

#else /* no CUDA in this build: the gpu cases skip */

static void no_cuda(void) { DT_SKIP_NO_GPU("built without CUDA"); }
DT_TEST(conv_parity) { no_cuda(); }
DT_TEST(pool_parity) { no_cuda(); }
DT_TEST(pool_ties_bitwise) { no_cuda(); }
DT_TEST(grid_independence) { no_cuda(); }
DT_TEST(forced_orders) { no_cuda(); }
DT_TEST(numeric_errors) { no_cuda(); }
DT_TEST(deterministic_notes) { no_cuda(); }
DT_TEST(autotune_notes) { no_cuda(); }
DT_TEST(exec_refused_falls_back) { no_cuda(); }
DT_TEST(wgrad_shards_one_launch) { no_cuda(); }

#endif

DT_TEST_MAIN(DT_CASE(patch_elem_matches_cpu), DT_CASE(col2im_fixed_matches_cpu),
             DT_CASE(col2im_ranked_matches_cpu_forced), DT_CASE(maxpool_out_matches_cpu),
             DT_CASE(maxpool_backward_matches_cpu), DT_CASE(conv_parity), DT_CASE(pool_parity),
             DT_CASE(pool_ties_bitwise), DT_CASE(grid_independence), DT_CASE(forced_orders),
             DT_CASE(numeric_errors), DT_CASE(deterministic_notes), DT_CASE(autotune_notes),
             DT_CASE(exec_refused_falls_back), DT_CASE(wgrad_shards_one_launch))
