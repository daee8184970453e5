/* reduction: exact in one pass (nets/backend.h: dt_shards, dt_exact_*; nets/step.h):
 * the forward and backward run once over the batch and every batch reduction leaves one
 * partial per canonical shard; the partials are summed exactly in int64. Checked here:
 *   - each sharded op's slot k equals the plain op on shard k's rows alone, bit for bit;
 *   - the exact sum equals a serial reference (dt_fixed_sum_rows_at_shift) bit for bit and
 *     the true sum within the fixed-point bound, at 1-4 threads, and its device form (the
 *     kernel body of nets/cuda/exact.cu, run on the host) gives the same bits;
 *   - a model's one-pass gradients equal the former pass-per-shard path (a forward and
 *     backward per shard, then the exact sum: the reference below) for the MLP and LeNet,
 *     at 1-4 threads and 1-4 simulated ranks, with batches that shards do not divide;
 *   - negative control: combining the same partials in float, grouped by rank, changes
 *     bits with the rank count; the exact sum does not. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "determinism/fixed_point.h"
#include "nets/backend.h"
#include "nets/cpu/cpu.h" /* white-box: the wide (AVX-512) kernels on and off */
#include "nets/model.h"
#include "op_helpers.h"

static bool same_bits(const char *what, const float *a, const float *b, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        if (dt_float_bits(a[i]) != dt_float_bits(b[i])) {
            fprintf(stderr, "%s[%lld]: %.9g (0x%08x) vs %.9g (0x%08x)\n", what, (long long)i,
                    (double)a[i], dt_float_bits(a[i]), (double)b[i], dt_float_bits(b[i]));
            dt_check_failures_++;
            return false;
        }
    }
    return true;
}

/* S shards of B rows by the canonical rule (nets/step.h). */
static void shard_rows(int64_t *row, int64_t B, int64_t S)
{
    for (int64_t s = 0; s <= S; s++) row[s] = s * B / S;
}

static float *dev_copy(struct dt_backend *be, const float *h, int64_t n)
{
    float *d = dt_backend_alloc(be, (size_t)n * sizeof(float));
    dt_backend_upload(be, d, h, (size_t)n * sizeof(float));
    return d;
}

static float *host_of(struct dt_backend *be, const float *d, int64_t n)
{
    float *h = dt_xmalloc((size_t)n * sizeof(float));
    dt_backend_download(be, h, d, (size_t)n * sizeof(float));
    return h;
}

/* ---- each sharded op's slots are the plain op on each shard ---------------------------- */

/* A CPU test body on the AVX-512 kernels (where the CPU has them) and on the AVX2/baseline
 * ones: the same expected bits for both. */
static void on_both_paths(void (*body)(void))
{
    const bool wide = dt_cpu_set_wide(true);
    fprintf(stderr, "AVX-512 kernels %s\n", wide ? "present: run with and without" : "absent");
    body();
    if (!wide) return;
    dt_cpu_set_wide(false);
    body();
    dt_cpu_set_wide(true);
}

static void ops_per_shard_body(void)
{
    const int64_t B = 70, S = 3, in = 37, C = 10;
    int64_t row[4];
    shard_rows(row, B, S);
    const struct dt_shards sh = {.count = S, .row = row};
    /* out = 6 takes the dense weight gradient's transposed (rows) form */
    CHECK(!dt_cpu_wgrad_prefers_rows(B, in, 21) && dt_cpu_wgrad_prefers_rows(B, in, 6));
    for (int run = 0; run < 4; run++) {
        const int threads = run % 2 + 1;
        const int64_t out = run < 2 ? 21 : 6;
        struct dt_backend *be = cpu(threads);
        const enum dt_level levels[] = {DT_LEVEL_RUN_TO_RUN, DT_LEVEL_PORTABLE};
        for (int li = 0; li < 2; li++) {
            struct dt_policy pol = level(levels[li]);
            pol.reduction = DT_REDUCTION_EXACT;
            float *x = dt_xmalloc((size_t)(B * in) * sizeof(float));
            float *dy = dt_xmalloc((size_t)(B * 4 * out) * sizeof(float));
            fill(x, B * in, 1.0);
            fill(dy, B * 4 * out, 0.3);
            float *dx = dev_copy(be, x, B * in), *ddy = dev_copy(be, dy, B * 4 * out);
            float *slots = dt_backend_alloc(be, (size_t)(S * in * out) * sizeof(float));
            float *one = dt_backend_alloc(be, (size_t)(in * out) * sizeof(float));
            /* dense weight gradient */
            dt_backend_set_shards(be, &sh);
            CHECK(dt_dense_backward_weight(be, slots, dx, ddy, B, in, out, &pol) == DT_OK);
            dt_backend_set_shards(be, NULL);
            for (int64_t k = 0; k < S; k++) {
                const int64_t r = row[k + 1] - row[k];
                CHECK(dt_dense_backward_weight(be, one, dx + row[k] * in, ddy + row[k] * out, r, in,
                                               out, &pol) == DT_OK);
                same_bits("dense_backward_weight slot", slots + k * in * out, one, in * out);
            }
            /* bias gradient over 4 rows per example (a convolution's B*OH*OW) */
            dt_backend_set_shards(be, &sh);
            CHECK(dt_bias_backward(be, slots, ddy, B * 4, out, &pol) == DT_OK);
            dt_backend_set_shards(be, NULL);
            for (int64_t k = 0; k < S; k++) {
                const int64_t r = (row[k + 1] - row[k]) * 4;
                CHECK(dt_bias_backward(be, one, ddy + row[k] * 4 * out, r, out, &pol) == DT_OK);
                same_bits("bias_backward slot", slots + k * out, one, out);
            }
            /* the loss: one mean per shard */
            int32_t *labels = dt_xmalloc((size_t)B * sizeof *labels);
            for (int64_t b = 0; b < B; b++) labels[b] = (int32_t)((b * 7) % C);
            int32_t *dl = dt_backend_alloc(be, (size_t)B * sizeof *dl);
            dt_backend_upload(be, dl, labels, (size_t)B * sizeof *dl);
            float *probs = dt_backend_alloc(be, (size_t)(B * C) * sizeof(float));
            float loss[3], l1;
            int64_t correct = 0, c1, c_sum = 0;
            dt_backend_set_shards(be, &sh);
            CHECK(dt_softmax_xent_forward(be, probs, loss, &correct, dx, dl, B, C, &pol) == DT_OK);
            dt_backend_set_shards(be, NULL);
            for (int64_t k = 0; k < S; k++) {
                const int64_t r = row[k + 1] - row[k];
                CHECK(dt_softmax_xent_forward(be, probs, &l1, &c1, dx + row[k] * C, dl + row[k], r,
                                              C, &pol) == DT_OK);
                same_bits("loss slot", &loss[k], &l1, 1);
                c_sum += c1;
            }
            CHECK_INT_EQ(correct, c_sum);
            /* a convolution's weight gradient: 6x6x2 images, 3x3 kernel, 4 outputs (lanes
             * over the patch) and 24 (lanes over the outputs: 16 + 8) */
            for (int64_t kout = 4; kout <= 24; kout += 20) {
                struct dt_conv2d_shape cs = {.B = B,
                                             .H = 6,
                                             .W = 6,
                                             .C = 2,
                                             .K_out = kout,
                                             .KH = 3,
                                             .KW = 3,
                                             .stride = 1,
                                             .pad = 1};
                CHECK(dt_conv2d_shape_init(&cs, NULL) == DT_OK);
                const int64_t nx = B * 6 * 6 * 2, ny = B * cs.OH * cs.OW * kout,
                              nw = 3 * 3 * 2 * kout;
                float *cx = dt_xmalloc((size_t)nx * sizeof(float)),
                      *cdy = dt_xmalloc((size_t)ny * sizeof(float));
                fill(cx, nx, 1.0);
                fill(cdy, ny, 0.2);
                float *dcx = dev_copy(be, cx, nx), *dcdy = dev_copy(be, cdy, ny);
                float *cslots = dt_backend_alloc(be, (size_t)(S * nw) * sizeof(float));
                float *cone = dt_backend_alloc(be, (size_t)nw * sizeof(float));
                dt_backend_set_shards(be, &sh);
                CHECK(dt_conv2d_backward_weight(be, cslots, dcx, dcdy, &cs, &pol) == DT_OK);
                dt_backend_set_shards(be, NULL);
                for (int64_t k = 0; k < S; k++) {
                    struct dt_conv2d_shape part = cs;
                    part.B = row[k + 1] - row[k];
                    CHECK(dt_conv2d_backward_weight(be, cone, dcx + row[k] * 72,
                                                    dcdy + row[k] * cs.OH * cs.OW * kout, &part,
                                                    &pol) == DT_OK);
                    same_bits("conv2d_backward_weight slot", cslots + k * nw, cone, nw);
                }
                free(cx), free(cdy);
                dt_backend_free(be, dcx), dt_backend_free(be, dcdy);
                dt_backend_free(be, cslots), dt_backend_free(be, cone);
            }
            /* without shards, exact sums over the batch as fixed does */
            struct dt_policy fixed = pol;
            fixed.reduction = DT_REDUCTION_FIXED;
            float *two = dt_backend_alloc(be, (size_t)(in * out) * sizeof(float));
            CHECK(dt_dense_backward_weight(be, one, dx, ddy, B, in, out, &pol) == DT_OK);
            CHECK(dt_dense_backward_weight(be, two, dx, ddy, B, in, out, &fixed) == DT_OK);
            same_bits("exact without shards = fixed", one, two, in * out);
            free(x), free(dy), free(labels);
            dt_backend_free(be, dx), dt_backend_free(be, ddy), dt_backend_free(be, slots);
            dt_backend_free(be, one), dt_backend_free(be, two), dt_backend_free(be, dl);
            dt_backend_free(be, probs);
        }
        dt_backend_destroy(be);
    }
}

/* ---- the exact sum of partials -------------------------------------------------------- */

#define T3 3
static const int64_t tn[T3] = {1, 37, 1000};

/* Partials with a wide range of magnitudes and signs (cancellation included). */
static float *make_pack(int64_t slots, int64_t *first)
{
    first[0] = 0;
    for (int i = 0; i < T3; i++) first[i + 1] = first[i] + tn[i];
    float *p = dt_xmalloc((size_t)(slots * first[T3]) * sizeof(float));
    for (int64_t i = 0; i < slots * first[T3]; i++) {
        double e = ldexp(1.0, (int)(urand() * 30.0)); /* 2^-30 .. 2^30 */
        p[i] = (float)(urand() * e);
    }
    p[slots * 1 + 4] = -p[slots * 1 + 37 + 4]; /* slots 0 and 1 of tensor 1's element 4 cancel */
    return p;
}

static float max_abs(const float *p, int64_t n)
{
    float mx = 0.0f;
    for (int64_t k = 0; k < n; k++) mx = fabsf(p[k]) > mx ? fabsf(p[k]) : mx;
    return mx;
}

/* out (n) = the exact sum over the `slots` rows of p (slots, n) at the shift for their
 * max |p| and S terms, by the bit-level serial form (dt_fixed_sum_rows_at_shift). */
static void serial_exact_sum(float *out, const float *p, int64_t slots, int64_t n, int64_t S)
{
    int64_t *scratch = dt_xmalloc((size_t)n * sizeof *scratch);
    struct dt_error err;
    CHECK(dt_fixed_sum_rows_at_shift(out, p, slots, n, dt_fixed_shift_for(max_abs(p, slots * n), S),
                                     scratch, &err) == DT_OK);
    free(scratch);
}

/* The serial reference: per tensor one shift from max |partial| and S, then each column's
 * exact sum rounded once. */
static void reference_sum(float *out, const float *pack, const int64_t *first, int64_t slots,
                          int64_t S)
{
    for (int i = 0; i < T3; i++)
        serial_exact_sum(out + first[i], pack + slots * first[i], slots, tn[i], S);
}

/* make's partials (S slots) and their serial reference sums, into *ref. */
static float *pack_and_reference(float *(*make)(int64_t, int64_t *), int64_t S, int64_t *first,
                                 float **ref)
{
    float *pack = make(S, first);
    *ref = dt_xmalloc((size_t)first[T3] * sizeof(float));
    reference_sum(*ref, pack, first, S, S);
    return pack;
}

/* dt_exact_sum over a copy of pack (S slots, T3 tensors) on `threads` threads gives ref's
 * bits in slot 0, the other slots untouched, and dt_exact_max's maxima (its output, written
 * over a pattern) into hm. */
static void one_pass_sum(int threads, const float *pack, const int64_t *first, int64_t S,
                         const float *ref, const char *what, uint32_t *hm)
{
    const struct dt_exact_layout L = {
        .tensors = T3, .n = tn, .first = first, .slots = S, .shards = S};
    struct dt_backend *be = cpu(threads);
    float *d = dev_copy(be, pack, S * first[T3]);
    uint32_t *mb = dt_backend_alloc(be, T3 * sizeof *mb), want[T3], junk[T3];
    CHECK(dt_exact_max(be, mb, d, &L) == DT_OK);
    dt_backend_download(be, want, mb, sizeof want);
    memset(junk, 0x5a, sizeof junk);
    dt_backend_upload(be, mb, junk, sizeof junk);
    CHECK(dt_exact_sum(be, d, mb, &L) == DT_OK);
    float *h = host_of(be, d, S * first[T3]);
    for (int i = 0; i < T3; i++) {
        same_bits(what, h + S * first[i], ref + first[i], tn[i]);
        same_bits("exact_sum's other slots", h + S * first[i] + tn[i], pack + S * first[i] + tn[i],
                  (S - 1) * tn[i]);
    }
    dt_backend_download(be, hm, mb, T3 * sizeof *hm);
    for (int i = 0; i < T3; i++) CHECK_INT_EQ(hm[i], want[i]);
    free(h);
    dt_backend_free(be, d), dt_backend_free(be, mb);
    dt_backend_destroy(be);
}

/* 5 slots, and 17: more than the AVX2 one-pass sum takes (the maxima, then the sums). */
static void exact_sum_reference_slots(int64_t S);
static void exact_sum_reference_body(void)
{
    exact_sum_reference_slots(5);
    exact_sum_reference_slots(17);
}

static void exact_sum_reference_slots(int64_t S)
{
    int64_t first[T3 + 1];
    float *ref;
    float *pack = pack_and_reference(make_pack, S, first, &ref);
    /* the true sums, and the bound of fixed_point.h: S * 2^-(shift+1) + ulp/2 */
    for (int i = 0; i < T3; i++) {
        const float mx = max_abs(pack + S * first[i], S * tn[i]);
        const int shift = dt_fixed_shift_for(mx, S);
        for (int64_t e = 0; e < tn[i]; e++) {
            /* long double: the reference sum to 64 bits, its own error far below the bound */
            long double tl = 0.0L, mag = 0.0L;
            for (int64_t k = 0; k < S; k++) {
                tl += (long double)pack[S * first[i] + k * tn[i] + e];
                mag += fabsl((long double)pack[S * first[i] + k * tn[i] + e]);
            }
            const double t = (double)tl;
            const float r = ref[first[i] + e];
            const double ulp = ldexp(1.0, ilogb(r == 0.0f ? 1e-38f : r) - 23);
            const double bound =
                (double)S * ldexp(1.0, -(shift + 1)) + ulp / 2 + (double)mag * 1e-17;
            if (!(fabs((double)r - t) <= bound)) {
                fprintf(stderr, "tensor %d element %lld: %.9g vs true %.12g (bound %.3g)\n", i,
                        (long long)e, (double)r, t, bound);
                dt_check_failures_++;
                break;
            }
        }
    }
    for (int threads = 1; threads <= 4; threads++) {
        uint32_t hm[T3];
        one_pass_sum(threads, pack, first, S, ref, "exact_sum vs serial reference", hm);
        /* the device form: the kernel body of nets/cuda/exact.cu on the host */
        for (int i = 0; i < T3; i++) {
            const int shift = dt_fixed_shift_for(dt_bits_float(hm[i]), S);
            for (int64_t e = 0; e < tn[i]; e++) {
                const float g = dt_fixed_to_float(
                    dt_fixed_sum_strided(pack + S * first[i] + e, tn[i], S, shift), shift);
                if (!same_bits("device form vs exact_sum", &g, &ref[first[i] + e], 1)) break;
            }
        }
    }
    free(pack), free(ref);
}

/* The same partials spread over N ranks: the exact path (to_fixed per rank, integer sum,
 * round) gives the one-rank bits for N = 1..4; a float combination grouped by rank (each
 * rank's partials added in order, then the ranks in order) changes with N. */
static void rank_grouping_body(void)
{
    const int64_t S = 4;
    int64_t first[T3 + 1];
    float *ref;
    float *pack = pack_and_reference(make_pack, S, first, &ref);
    const int64_t total = first[T3];
    struct dt_backend *be = cpu(2);
    float *float_n1 = NULL;
    int float_differs = 0;
    for (int N = 1; N <= 4; N++) {
        int64_t *acc = dt_xcalloc((size_t)total, sizeof *acc);
        uint32_t gmax[T3] = {0, 0, 0};
        float *fsum = dt_xcalloc((size_t)total, sizeof(float));
        for (int pass = 0; pass < 2; pass++) {
            for (int r = 0; r < N; r++) {
                const int64_t s0 = r * S / N, s1 = (r + 1) * S / N, held = s1 - s0;
                /* the rank's own pack: its slots of each tensor */
                float *mine = dt_xmalloc((size_t)(held * total) * sizeof(float));
                for (int i = 0; i < T3; i++)
                    memcpy(mine + held * first[i], pack + S * first[i] + s0 * tn[i],
                           (size_t)(held * tn[i]) * sizeof(float));
                const struct dt_exact_layout L = {
                    .tensors = T3, .n = tn, .first = first, .slots = held, .shards = S};
                float *d = dev_copy(be, mine, held * total);
                uint32_t *mb = dt_backend_alloc(be, T3 * sizeof *mb);
                if (pass == 0) { /* the maxima, all-reduced */
                    uint32_t m[T3];
                    CHECK(dt_exact_max(be, mb, d, &L) == DT_OK);
                    dt_backend_download(be, m, mb, sizeof m);
                    for (int i = 0; i < T3; i++) gmax[i] = m[i] > gmax[i] ? m[i] : gmax[i];
                    for (int i = 0; i < T3; i++)
                        for (int64_t e = 0; e < tn[i]; e++) {
                            float s = 0.0f;
                            for (int64_t k = 0; k < held; k++)
                                s += mine[held * first[i] + k * tn[i] + e];
                            fsum[first[i] + e] += s;
                        }
                } else { /* the int64 sums, all-reduced */
                    int64_t *a = dt_backend_alloc(be, (size_t)total * sizeof *a);
                    int64_t *ha = dt_xmalloc((size_t)total * sizeof *ha);
                    dt_backend_upload(be, mb, gmax, sizeof gmax);
                    CHECK(dt_exact_to_fixed(be, a, d, mb, &L) == DT_OK);
                    dt_backend_download(be, ha, a, (size_t)total * sizeof *ha);
                    for (int64_t e = 0; e < total; e++) acc[e] += ha[e];
                    dt_backend_free(be, a);
                    free(ha);
                }
                dt_backend_free(be, d), dt_backend_free(be, mb);
                free(mine);
            }
        }
        /* round on a pack with one slot per tensor */
        const struct dt_exact_layout L1 = {
            .tensors = T3, .n = tn, .first = first, .slots = 1, .shards = S};
        float *out = dt_backend_alloc(be, (size_t)total * sizeof(float));
        int64_t *a = dt_backend_alloc(be, (size_t)total * sizeof *a);
        uint32_t *mb = dt_backend_alloc(be, T3 * sizeof *mb);
        dt_backend_upload(be, a, acc, (size_t)total * sizeof *a);
        dt_backend_upload(be, mb, gmax, sizeof gmax);
        CHECK(dt_exact_round(be, out, a, mb, &L1) == DT_OK);
        float *h = host_of(be, out, total);
        char what[64];
        snprintf(what, sizeof what, "exact over %d ranks vs one", N);
        same_bits(what, h, ref, total);
        if (N == 1) {
            float_n1 = fsum;
            fsum = NULL;
        } else {
            for (int64_t e = 0; e < total; e++)
                if (dt_float_bits(fsum[e]) != dt_float_bits(float_n1[e])) {
                    float_differs++;
                    break;
                }
        }
        free(h), free(acc), free(fsum);
        dt_backend_free(be, out), dt_backend_free(be, a), dt_backend_free(be, mb);
    }
    /* the control: float grouping by rank moves bits for at least one N */
    CHECK(float_differs >= 1);
    dt_backend_destroy(be);
    free(pack), free(ref), free(float_n1);
}

/* ---- models: one pass equals a pass per shard ------------------------------------------ */

static struct dt_model *make_model(struct dt_backend *be, bool lenet, int64_t max_batch)
{
    struct dt_model *m = NULL;
    struct dt_error err;
    if (lenet) {
        CHECK(dt_lenet_create(&m, be, 28, 28, false, 10, max_batch, &err) == DT_OK);
    } else {
        const int64_t hidden[2] = {40, 24};
        CHECK(dt_mlp_create(&m, be, 60, hidden, 2, 10, max_batch, &err) == DT_OK);
    }
    dt_model_init(m, 20261124, 0);
    return m;
}

static void download_grads(struct dt_model *m, float *dst)
{
    for (int i = 0, at = 0; i < m->n_params; at += (int)m->params[i].n, i++)
        dt_backend_download(m->be, dst + at, m->params[i].g,
                            (size_t)m->params[i].n * sizeof(float));
}

static int64_t total_params(const struct dt_model *m)
{
    int64_t t = 0;
    for (int i = 0; i < m->n_params; i++) t += m->params[i].n;
    return t;
}

/* The former exact path: forward, loss and backward on each shard alone, its gradient
 * staged on the host, then the exact sum of the S gradients at one shift per tensor. */
static void pass_per_shard(struct dt_model *m, const float *x, const uint8_t *y, int64_t B,
                           int64_t S, const struct dt_policy *pol, float *grad, float *loss)
{
    const int64_t total = total_params(m);
    float *stage = dt_xmalloc((size_t)(S * total) * sizeof(float));
    double lsum = 0.0;
    for (int64_t s = 0; s < S; s++) {
        const int64_t b0 = s * B / S, b1 = (s + 1) * B / S;
        float l;
        const struct dt_batch rows = {.x = x + b0 * m->in_dim, .y = y + b0};
        CHECK(dt_model_gradients(m, &rows, b1 - b0, B, pol, &l) == DT_OK);
        download_grads(m, stage + s * total);
        lsum += (double)l * (double)(b1 - b0);
    }
    *loss = (float)(lsum / (double)B);
    for (int i = 0, at = 0; i < m->n_params; at += (int)m->params[i].n, i++) {
        const int64_t n = m->params[i].n;
        float *rows = dt_xmalloc((size_t)(S * n) * sizeof(float));
        for (int64_t s = 0; s < S; s++)
            memcpy(rows + s * n, stage + s * total + at, (size_t)n * sizeof(float));
        serial_exact_sum(grad + at, rows, S, n, S);
        free(rows);
    }
    free(stage);
}

/* The one pass on N simulated ranks (one model, each rank's shards in turn): per rank its
 * gradient partials, the maxima and int64 sums combined on the host as the all-reduces
 * would, then the rounding. */
static void one_pass_ranks(struct dt_model *m, const float *x, const uint8_t *y, int64_t B,
                           int64_t S, int N, const struct dt_policy *pol, float *grad, float *loss)
{
    const int64_t total = total_params(m);
    const int P = m->n_params;
    int64_t *acc = dt_xcalloc((size_t)total, sizeof *acc);
    uint32_t *gmax = dt_xcalloc((size_t)P, sizeof *gmax), *hm = dt_xcalloc((size_t)P, sizeof *hm);
    float **packs = dt_xcalloc((size_t)N, sizeof *packs);
    float *loss_slots = dt_xcalloc((size_t)S, sizeof(float));
    uint32_t *mb = dt_backend_alloc(m->be, (size_t)P * sizeof *mb);
    int64_t *dacc = dt_backend_alloc(m->be, (size_t)total * sizeof *dacc);
    for (int pass = 0; pass < 2; pass++) {
        for (int r = 0; r < N; r++) {
            const int64_t s0 = r * S / N, s1 = (r + 1) * S / N, held = s1 - s0;
            const int64_t b0 = s0 * B / S;
            int64_t row[8];
            for (int64_t s = s0; s <= s1; s++) row[s - s0] = s * B / S - b0;
            const struct dt_shards sh = {.count = held, .row = row};
            dt_model_grad_slots(m, held);
            int64_t n[64];
            for (int i = 0; i < P; i++) n[i] = m->params[i].n;
            const struct dt_exact_layout Ln = {
                .tensors = P, .n = n, .first = m->grad_first, .slots = held, .shards = S};
            if (pass == 0) {
                const struct dt_batch rows = {.x = x + b0 * m->in_dim, .y = y + b0};
                CHECK(dt_model_gradients_sharded(m, &rows, row[held], B, &sh, pol,
                                                 loss_slots + s0) == DT_OK);
                packs[r] = host_of(m->be, m->grad_pack, held * total);
                CHECK(dt_exact_max(m->be, mb, m->grad_pack, &Ln) == DT_OK);
                dt_backend_download(m->be, hm, mb, (size_t)P * sizeof *hm);
                for (int i = 0; i < P; i++) gmax[i] = hm[i] > gmax[i] ? hm[i] : gmax[i];
            } else {
                dt_backend_upload(m->be, m->grad_pack, packs[r],
                                  (size_t)(held * total) * sizeof(float));
                dt_backend_upload(m->be, mb, gmax, (size_t)P * sizeof *mb);
                if (N == 1) { /* one process: the fused sum */
                    CHECK(dt_exact_sum(m->be, m->grad_pack, mb, &Ln) == DT_OK);
                    download_grads(m, grad);
                    continue;
                }
                int64_t *ha = dt_xmalloc((size_t)total * sizeof *ha);
                CHECK(dt_exact_to_fixed(m->be, dacc, m->grad_pack, mb, &Ln) == DT_OK);
                dt_backend_download(m->be, ha, dacc, (size_t)total * sizeof *ha);
                for (int64_t e = 0; e < total; e++) acc[e] += ha[e];
                free(ha);
                if (r == N - 1) {
                    dt_backend_upload(m->be, dacc, acc, (size_t)total * sizeof *acc);
                    CHECK(dt_exact_round(m->be, m->grad_pack, dacc, mb, &Ln) == DT_OK);
                    download_grads(m, grad);
                }
            }
        }
    }
    double lsum = 0.0;
    for (int64_t s = 0; s < S; s++)
        lsum += (double)loss_slots[s] * (double)((s + 1) * B / S - s * B / S);
    *loss = (float)(lsum / (double)B);
    for (int r = 0; r < N; r++) free(packs[r]);
    free(packs), free(acc), free(gmax), free(hm), free(loss_slots);
    dt_backend_free(m->be, mb), dt_backend_free(m->be, dacc);
}

static void model_one_pass_equals_passes(bool lenet)
{
    const int64_t B = lenet ? 26 : 50;
    const int64_t in_dim = lenet ? 28 * 28 : 60;
    float *x = dt_xmalloc((size_t)(B * in_dim) * sizeof(float));
    uint8_t *y = dt_xmalloc((size_t)B);
    for (int64_t i = 0; i < B * in_dim; i++) x[i] = (float)(0.5 + 0.5 * urand());
    for (int64_t b = 0; b < B; b++) y[b] = (uint8_t)((b * 3 + 1) % 10);
    struct dt_policy pols[2];
    pols[0] = level(DT_LEVEL_PORTABLE);
    pols[1] = level(DT_LEVEL_RUN_TO_RUN); /* its own kernels (math: strict), exact shards */
    pols[1].reduction = DT_REDUCTION_EXACT;
    pols[1].math = DT_MATH_STRICT;
    const int64_t shard_counts[2] = {4, 3}; /* 50 = 12+13+12+13, 26 = 6+7+6+7; 16+17+17 */
    for (int pi = 0; pi < 2; pi++) {
        for (int si = 0; si < 2; si++) {
            const int64_t S = shard_counts[si];
            struct dt_backend *be1 = cpu(1);
            struct dt_model *ref_m = make_model(be1, lenet, B);
            const int64_t total = total_params(ref_m);
            float *ref = dt_xmalloc((size_t)total * sizeof(float)), ref_loss;
            pass_per_shard(ref_m, x, y, B, S, &pols[pi], ref, &ref_loss);
            dt_model_destroy(ref_m);
            dt_backend_destroy(be1);
            for (int threads = 1; threads <= 4; threads++) {
                for (int N = 1; N <= S && N <= 4; N++) {
                    if (threads > 1 && N > 1 && N != S) continue; /* keep the run short */
                    struct dt_backend *be = cpu(threads);
                    struct dt_model *m = make_model(be, lenet, B);
                    float *g = dt_xmalloc((size_t)total * sizeof(float)), loss;
                    one_pass_ranks(m, x, y, B, S, N, &pols[pi], g, &loss);
                    char what[160];
                    snprintf(what, sizeof what, "%s %.40s S=%lld threads=%d ranks=%d gradient",
                             lenet ? "lenet" : "mlp", pols[pi].name, (long long)S, threads, N);
                    same_bits(what, g, ref, total);
                    same_bits("loss", &loss, &ref_loss, 1);
                    free(g);
                    dt_model_destroy(m);
                    dt_backend_destroy(be);
                }
            }
            free(ref);
        }
    }
    free(x), free(y);
}

/* The one rounding of an int64 sum to float at its ties: sums of every bit length from 25
 * to 63 whose top 25 bits end in 1 (exactly halfway between two floats when nothing below
 * is set), with nothing, the lowest bit, or every bit below set (the sticky part decides
 * the direction), both signs, both mantissa parities. exact_round must give
 * dt_fixed_to_float's bits on every kernel path; a path that dropped the low bits without
 * keeping them sticky, or converted to double with a second rounding, fails here (random
 * sums almost never land on a tie). */
static void round_ties_body(void)
{
    enum { MAXN = 39 * 3 * 2 * 2 };
    static int64_t acc[MAXN];
    int64_t n = 0;
    for (int len = 25; len <= 62; len++)
        for (int low = 0; low < 3; low++)
            for (int odd = 0; odd < 2; odd++)
                for (int sign = 0; sign < 2; sign++) {
                    const int drop = len - 25; /* bits below the halfway bit */
                    uint64_t u = ((UINT64_C(1) << 24) | (uint64_t)(odd ? 3 : 1)) << drop;
                    if (drop > 0 && low == 1) u |= 1;
                    if (drop > 0 && low == 2) u |= (UINT64_C(1) << drop) - 1;
                    acc[n++] = sign ? -(int64_t)u : (int64_t)u;
                }
    const int64_t S = 4, first[2] = {0, n};
    const int64_t tens[1] = {n};
    const uint32_t max1 = dt_float_bits(1.0f); /* the shift for max 1.0 and 4 terms */
    const int shift = dt_fixed_shift_for(1.0f, S);
    const struct dt_exact_layout L = {
        .tensors = 1, .n = tens, .first = first, .slots = 1, .shards = S};
    struct dt_backend *be = cpu(2);
    int64_t *a = dt_backend_alloc(be, (size_t)n * sizeof *a);
    float *out = dt_backend_alloc(be, (size_t)n * sizeof(float));
    uint32_t *mb = dt_backend_alloc(be, sizeof *mb);
    dt_backend_upload(be, a, acc, (size_t)n * sizeof *a);
    dt_backend_upload(be, mb, &max1, sizeof max1);
    CHECK(dt_exact_round(be, out, a, mb, &L) == DT_OK);
    float *h = host_of(be, out, n);
    int64_t bad = 0;
    for (int64_t e = 0; e < n; e++) {
        const float want = dt_fixed_to_float(acc[e], shift);
        if (dt_float_bits(h[e]) != dt_float_bits(want) && bad++ < 5)
            fprintf(stderr, "sum %lld at shift %d: %a, want %a\n", (long long)acc[e], shift,
                    (double)h[e], (double)want);
    }
    if (bad) dt_check_failures_++;
    free(h);
    dt_backend_free(be, a), dt_backend_free(be, out), dt_backend_free(be, mb);
    dt_backend_destroy(be);
}

/* The exact sum's double shortcut (nets/cpu/exact.c, sum8_double): where an element's terms
 * are whole multiples of 2^-shift and span few binades, their double sum rounded once is
 * taken instead of the int64 sum. Partials made for it: most elements' terms within a few
 * binades (the shortcut), some reaching below the tensor's fixed-point unit or spanning
 * more binades than a double holds (the integer path), ties in the final rounding, terms
 * that cancel, all -0 terms (+0 on the integer path), a tensor of subnormals, a sum just
 * above a tie whose last term a double would lose; 5 terms (the widest span allowed is then
 * 26 binades: elements at 26 and 27). The sums in one pass (1 and 2 threads) and over 2
 * ranks' packs give the serial reference's bits. */
static float *make_narrow_pack(int64_t slots, int64_t *first)
{
    first[0] = 0;
    for (int i = 0; i < T3; i++) first[i + 1] = first[i] + tn[i];
    float *p = dt_xmalloc((size_t)(slots * first[T3]) * sizeof(float));
    for (int i = 0; i < T3; i++)
        for (int64_t e = 0; e < tn[i]; e++) {
            /* the element's binade: -20 .. 20; tensor 1's below 2 (its max is 4) */
            const int base = i == 1 ? (int)(urand() * 10.0) - 15 : (int)(urand() * 20.0);
            for (int64_t k = 0; k < slots; k++) {
                float v = (float)(urand() * ldexp(1.0, base + (int)(k * 3 % 7)));
                if (i == 0) v = (float)(urand() * 1e-40); /* subnormal */
                if (e % 7 == 3) v = -0.0f;
                if (e % 11 == 5) v = k == 0 ? 0.75f : k == 1 ? -0.75f : 0.0f;
                if (e % 13 == 6)
                    v = k == 0 ? 1.0f + 0x1p-23f * (float)(e % 2) : k == 1 ? 0x1p-24f : 0.0f;
                if (e % 17 == 8) v = k == 0 ? 1.0f : k == 1 ? 0x1p-26f : k == 2 ? 0x1p-27f : 0.0f;
                p[slots * first[i] + k * tn[i] + e] = v;
            }
        }
    p[slots * first[2] + 999] = 0x1p20f; /* tensor 2's max: its unit is 2^-36 */
    /* tensor 1: max 4, unit 2^-57; element 10 = 4 + 2^-22 + (2^-34 + 2^-57) - 2^-34 =
     * 4 + 2^-22 + 2^-57, just above the tie between 4 and its next float: every term a whole
     * number of units, but 36 binades apart -- a double's running sum loses the 2^-57 and
     * rounds the tie to even */
    const float e10[5] = {4.0f, 0x1p-22f, 0x1.000002p-34f, -0x1p-34f, 0.0f};
    for (int64_t k = 0; k < slots; k++) p[slots * first[1] + k * tn[1] + 10] = e10[k % 5];
    return p;
}

static void shortcut_body(void)
{
    const int64_t S = 5;
    int64_t first[T3 + 1];
    float *ref;
    float *pack = pack_and_reference(make_narrow_pack, S, first, &ref);
    const int64_t total = first[T3];
    /* both kinds of element are there: the shortcut's test per element, counted */
    int64_t shortcut = 0;
    for (int i = 0; i < T3; i++) {
        const int shift = dt_fixed_shift_for(max_abs(pack + S * first[i], S * tn[i]), S);
        for (int64_t e = 0; e < tn[i]; e++) {
            int emax = 0, emin = 255;
            for (int64_t k = 0; k < S; k++) {
                const uint32_t b = dt_float_bits(pack[S * first[i] + k * tn[i] + e]) & 0x7fffffffu;
                const int ex = (int)(b >> 23);
                emax = ex > emax ? ex : emax;
                if (b) emin = (ex > 1 ? ex : 1) < emin ? (ex > 1 ? ex : 1) : emin;
            }
            shortcut += emax - emin <= 26 && emin >= 150 - shift;
        }
    }
    CHECK(shortcut > total / 3 && shortcut < total * 9 / 10);
    for (int threads = 1; threads <= 2; threads++) {
        uint32_t hm[T3];
        one_pass_sum(threads, pack, first, S, ref, "exact_sum (shortcut) vs serial reference", hm);
        struct dt_backend *be = cpu(threads);
        uint32_t *mb = dt_backend_alloc(be, sizeof hm);
        dt_backend_upload(be, mb, hm, sizeof hm);
        /* two ranks' packs: slots 0-1 and 2-4 */
        float *packs[2];
        const int64_t slots[2] = {2, 3};
        for (int r = 0; r < 2; r++) {
            packs[r] = dt_xmalloc((size_t)(slots[r] * total) * sizeof(float));
            for (int i = 0; i < T3; i++)
                memcpy(packs[r] + slots[r] * first[i], pack + S * first[i] + 2 * r * tn[i],
                       (size_t)(slots[r] * tn[i]) * sizeof(float));
        }
        const struct dt_exact_layout L1 = {
            .tensors = T3, .n = tn, .first = first, .slots = 1, .shards = S};
        float *out = dt_xcalloc((size_t)total, sizeof(float));
        CHECK(dt_exact_sum_packs(be, out, (const float *const *)packs, slots, 2, mb, &L1, 0,
                                 total) == DT_OK);
        same_bits("exact_sum_packs (shortcut) vs serial reference", out, ref, total);
        free(out), free(packs[0]), free(packs[1]);
        dt_backend_free(be, mb);
        dt_backend_destroy(be);
    }
    free(ref), free(pack);
}

/* The ranks of one machine: the same partials spread over N = 1..5 ranks' packs, each
 * rank's range of elements summed over every pack by dt_exact_sum_packs (ranges that cut
 * tensors, a short one, an empty one) give the serial reference's bits (the one-rank sum). */
static void sum_packs_body(void)
{
    const int64_t S = 5;
    int64_t first[T3 + 1];
    float *ref;
    float *pack = pack_and_reference(make_pack, S, first, &ref);
    const int64_t total = first[T3];
    uint32_t gmax[T3];
    for (int i = 0; i < T3; i++) gmax[i] = dt_float_bits(max_abs(pack + S * first[i], S * tn[i]));
    struct dt_backend *be = cpu(2);
    uint32_t *mb = dt_backend_alloc(be, sizeof gmax);
    dt_backend_upload(be, mb, gmax, sizeof gmax);
    for (int N = 1; N <= (int)S; N++) {
        float *packs[5];
        int64_t slots[5];
        for (int r = 0; r < N; r++) { /* rank r's own pack: its slots of each tensor */
            const int64_t s0 = r * S / N, s1 = (r + 1) * S / N;
            slots[r] = s1 - s0;
            packs[r] = dt_xmalloc((size_t)(slots[r] * total) * sizeof(float));
            for (int i = 0; i < T3; i++)
                memcpy(packs[r] + slots[r] * first[i], pack + S * first[i] + s0 * tn[i],
                       (size_t)(slots[r] * tn[i]) * sizeof(float));
        }
        const struct dt_exact_layout L = {
            .tensors = T3, .n = tn, .first = first, .slots = 1, .shards = S};
        /* element ranges: N even ones, then uneven ones cutting tensors (and an empty one) */
        const int64_t cuts[2][6] = {{0, 0, 0, 0, 0, 0}, {0, 1, 1, 20, 39, total}};
        for (int c = 0; c < 2; c++) {
            float *out = dt_xcalloc((size_t)total, sizeof(float));
            const int pieces = c == 0 ? N : 5;
            for (int q = 0; q < pieces; q++) {
                const int64_t e0 = c == 0 ? q * total / N : cuts[1][q];
                const int64_t e1 = c == 0 ? (q + 1) * total / N : cuts[1][q + 1];
                if (e1 > e0)
                    CHECK(dt_exact_sum_packs(be, out + e0, (const float *const *)packs, slots, N,
                                             mb, &L, e0, e1) == DT_OK);
            }
            char what[80];
            snprintf(what, sizeof what, "sum over %d packs (%s ranges) vs one", N,
                     c == 0 ? "even" : "uneven");
            same_bits(what, out, ref, total);
            free(out);
        }
        for (int r = 0; r < N; r++) free(packs[r]);
    }
    dt_backend_free(be, mb);
    dt_backend_destroy(be);
    free(pack), free(ref);
}

/* The one-pass sum's pass 2 skips 32 groups of 8 at once where every group passed both of
 * sum8_double's tests. Partials for it: every term within 4 binades of 1 (each group passes)
 * but, in tensor 2, the elements of groups 5, 40 and 77 whose only nonzero term has its unit
 * one binade below the tensor's 2^-shift -- (1 + 2^-23) * 2^(22 - shift), which the integer
 * path rounds to 2^(22 - shift) and a double sum keeps -- and of group 100 one whose unit is
 * 2^-shift itself (both paths keep it). The sums (1 and 2 threads) give the serial
 * reference's bits. */
static float *make_edge_pack(int64_t slots, int64_t *first)
{
    first[0] = 0;
    for (int i = 0; i < T3; i++) first[i + 1] = first[i] + tn[i];
    float *p = dt_xmalloc((size_t)(slots * first[T3]) * sizeof(float));
    for (int64_t x = 0; x < slots * first[T3]; x++)
        p[x] = (float)((1.0 + urand()) * ldexp(urand() < 0.5 ? -1.0 : 1.0, (int)(x % 4)));
    float *t2 = p + slots * first[2];
    const int shift = dt_fixed_shift_for(max_abs(t2, slots * tn[2]), slots);
    const int64_t at[4] = {8 * 5 + 3, 8 * 40, 8 * 77 + 7, 8 * 100 + 2};
    for (int a = 0; a < 4; a++) {
        for (int64_t k = 0; k < slots; k++) t2[k * tn[2] + at[a]] = 0.0f;
        t2[(a % 2) * tn[2] + at[a]] = (float)ldexp(1.0 + 0x1p-23, (a == 3 ? 23 : 22) - shift);
    }
    return p;
}

static void skip_body(void)
{
    const int64_t S = 4;
    int64_t first[T3 + 1];
    float *ref;
    float *pack = pack_and_reference(make_edge_pack, S, first, &ref);
    const int shift = dt_fixed_shift_for(max_abs(pack + S * first[2], S * tn[2]), S);
    CHECK(dt_float_bits(ref[first[2] + 8 * 5 + 3]) ==
          dt_float_bits((float)ldexp(1.0, 22 - shift))); /* the integer path's rounding */
    for (int threads = 1; threads <= 2; threads++) {
        uint32_t hm[T3];
        one_pass_sum(threads, pack, first, S, ref, "exact_sum (groups skipped) vs serial", hm);
    }
    free(pack), free(ref);
}

/* A tensor with a NaN or an infinity among its partials: exact_sum reports its maximum
 * (at least 0x7f800000) and leaves every slot of it as it was, whatever the path (the AVX2
 * one-pass sum writes slot 0 before it knows the maximum and must put it back); the other
 * tensors get the serial reference's bits. The infinity sits in tensor 1's short last
 * group, the NaN in a later slot of tensor 2, whose other groups the shortcut takes. */
static void nonfinite_body(void)
{
    const int64_t S = 5;
    int64_t first[T3 + 1];
    float *ref;
    float *pack = pack_and_reference(make_narrow_pack, S, first, &ref);
    pack[S * first[1] + 36] = INFINITY;
    pack[S * first[2] + 3 * tn[2] + 500] = NAN;
    for (int threads = 1; threads <= 2; threads++) {
        const struct dt_exact_layout L = {
            .tensors = T3, .n = tn, .first = first, .slots = S, .shards = S};
        struct dt_backend *be = cpu(threads);
        float *d = dev_copy(be, pack, S * first[T3]);
        uint32_t *mb = dt_backend_alloc(be, T3 * sizeof *mb), hm[T3];
        CHECK(dt_exact_sum(be, d, mb, &L) == DT_OK);
        dt_backend_download(be, hm, mb, sizeof hm);
        CHECK(hm[0] < 0x7f800000u);
        CHECK_INT_EQ(hm[1], 0x7f800000u);
        CHECK(hm[2] > 0x7f800000u);
        float *h = host_of(be, d, S * first[T3]);
        same_bits("finite tensor's sum", h, ref, tn[0]);
        for (int i = 1; i < T3; i++)
            same_bits("non-finite tensor left as it was", h + S * first[i], pack + S * first[i],
                      S * tn[i]);
        free(h);
        dt_backend_free(be, d), dt_backend_free(be, mb);
        dt_backend_destroy(be);
    }
    free(pack), free(ref);
}

/* Tensors of several pool slices (the one-pass sum's groups split over 1-4 workers, a
 * tensor starting mid-slice, maxima merged across workers), 4 slots: a tensor of 5,605
 * elements (700 groups of 8 and a short one) whose terms lie near 2^30 with its maximum
 * 2^40 at element 4000, so its unit is 2^-19 and e_floor = 131 -- above 127, where a byte
 * compared as signed would misorder -- and in group 300 terms at the unit (16, 24, 40) but
 * for one, (1 + 2^-23) * 8, a binade finer (the integer path rounds it to 8); in group 312
 * a term 2.0 beside terms near 2^30, too wide a span (meta 0: the byte a signed compare
 * would rank above 131); then a tensor of 3. Slot 0 gets the serial reference's bits and the maxima
 * dt_exact_max's, at 1-4 threads. */
static void slices_body(void)
{
    enum { NA = 5605, NB = 3, S = 4 };
    const int64_t n[2] = {NA, NB}, first[3] = {0, NA, NA + NB};
    float *pack = dt_xmalloc((size_t)(S * (NA + NB)) * sizeof(float));
    for (int64_t x = 0; x < S * (NA + NB); x++)
        pack[x] =
            (float)((1.5 + 0.5 * urand()) * ldexp(urand() < 0.0 ? -1.0 : 1.0, 30 + (int)(x % 3)));
    pack[2 * NA + 4000] = 0x1p40f;
    for (int64_t e = 2400; e < 2408; e++)
        for (int64_t k = 0; k < S; k++)
            pack[k * NA + e] = (float)(16 + 8 * ((e + k) % 4 == 0) + 24 * (k == 3));
    for (int64_t k = 0; k < S; k++) pack[k * NA + 2403] = 0.0f;
    pack[2403] = (float)ldexp(1.0 + 0x1p-23, 3);
    pack[NA + 2500] = 2.0f; /* group 312 spans 29 binades: meta 0, below every unit */
    CHECK_INT_EQ(dt_fixed_shift_for(0x1p40f, S), 19);
    float ref[NA + NB];
    serial_exact_sum(ref, pack, S, NA, S);
    serial_exact_sum(ref + NA, pack + S * NA, S, NB, S);
    CHECK(ref[2403] == 8.0f); /* the integer path's rounding */
    const struct dt_exact_layout L = {
        .tensors = 2, .n = n, .first = first, .slots = S, .shards = S};
    for (int threads = 1; threads <= 4; threads++) {
        struct dt_backend *be = cpu(threads);
        float *d = dev_copy(be, pack, S * (NA + NB));
        uint32_t *mb = dt_backend_alloc(be, 2 * sizeof *mb), want[2], got[2];
        CHECK(dt_exact_max(be, mb, d, &L) == DT_OK);
        dt_backend_download(be, want, mb, sizeof want);
        CHECK(dt_exact_sum(be, d, mb, &L) == DT_OK);
        dt_backend_download(be, got, mb, sizeof got);
        CHECK_INT_EQ(got[0], want[0]);
        CHECK_INT_EQ(got[1], want[1]);
        float *h = host_of(be, d, S * (NA + NB));
        same_bits("exact_sum over several slices", h, ref, NA);
        same_bits("exact_sum over several slices (second tensor)", h + S * NA, ref + NA, NB);
        free(h);
        dt_backend_free(be, d), dt_backend_free(be, mb);
        dt_backend_destroy(be);
    }
    free(pack);
}

/* ---- the max |bits| scan (exact_max, the fixed-point scatters, check_finite) ----------- */

/* dt_cpu_max_bits against the scalar definition at every length to 100 (the 32-lane
 * blocks, the 8-lane ones and the tail), the largest at every position, signs mixed,
 * a starting maximum above and below, and a NaN or infinity anywhere: at least 0x7f800000. */
static void max_bits_body(void)
{
    float v[100];
    uint64_t r = 0x9e3779b97f4a7c15u;
    for (int n = 0; n <= 100; n++)
        for (int at = 0; at < (n > 0 ? n : 1); at++) {
            uint32_t want = 0;
            for (int i = 0; i < n; i++) {
                r = r * 6364136223846793005u + 1442695040888963407u;
                const float f = ldexpf((float)(r >> 40) / 16777216.0f, (int)(r >> 33 & 31) - 20);
                v[i] = (r >> 32 & 1) ? -f : f;
                if (i == at) v[i] = (r >> 31 & 1) ? -3.5e9f : 3.5e9f; /* the largest */
                const uint32_t b = dt_float_bits(v[i]) & 0x7fffffffu;
                want = b > want ? b : want;
            }
            CHECK(dt_cpu_max_bits(v, n, 0) == want);
            CHECK(dt_cpu_max_bits(v, n, 0x7f000000u) == 0x7f000000u); /* above every |bits| */
            CHECK(dt_cpu_max_bits(v, n, 1) == (want > 1 ? want : 1));
            if (n == 0) continue;
            const float keep = v[at];
            v[at] = (at & 1) ? -INFINITY : NAN;
            CHECK(dt_cpu_max_bits(v, n, 0) >= 0x7f800000u);
            v[at] = keep;
        }
}

DT_TEST(ops_per_shard) { on_both_paths(ops_per_shard_body); }
DT_TEST(max_bits_scan) { on_both_paths(max_bits_body); }
DT_TEST(exact_sum_reference) { on_both_paths(exact_sum_reference_body); }
DT_TEST(rank_grouping_negative_control) { on_both_paths(rank_grouping_body); }
DT_TEST(exact_round_ties) { on_both_paths(round_ties_body); }
DT_TEST(sum_packs_equals_one_rank) { on_both_paths(sum_packs_body); }
DT_TEST(exact_sum_double_shortcut) { on_both_paths(shortcut_body); }
DT_TEST(exact_sum_nonfinite_left) { on_both_paths(nonfinite_body); }
DT_TEST(exact_sum_unit_edge) { on_both_paths(skip_body); }
DT_TEST(exact_sum_slices) { on_both_paths(slices_body); }

DT_TEST(mlp_one_pass_equals_passes) { model_one_pass_equals_passes(false); }
DT_TEST(lenet_one_pass_equals_passes) { model_one_pass_equals_passes(true); }

/* ---- the device -------------------------------------------------------------------------- */

DT_TEST(cuda_exact_sum_equals_cpu)
{
    struct dt_backend *g = gpu_or_skip();
    const int64_t S = 5;
    int64_t first[T3 + 1];
    float *ref;
    float *pack = pack_and_reference(make_pack, S, first, &ref);
    const int64_t total = first[T3];
    const struct dt_exact_layout L = {
        .tensors = T3, .n = tn, .first = first, .slots = S, .shards = S};
    float *d = dev_copy(g, pack, S * total);
    uint32_t *mb = dt_backend_alloc(g, T3 * sizeof *mb);
    /* the exact reduction runs on the device without the host waiting (issue 19): max,
     * sum, and in the several-rank form to_fixed and round, add no host wait */
    const int64_t waits0 = dt_backend_host_waits(g);
    CHECK(dt_exact_max(g, mb, d, &L) == DT_OK);
    CHECK(dt_exact_sum(g, d, mb, &L) == DT_OK);
    CHECK_INT_EQ(dt_backend_host_waits(g) - waits0, 0);
    float *h = host_of(g, d, S * total);
    CHECK(dt_backend_host_waits(g) > waits0); /* the download waited: the counter counts */
    for (int i = 0; i < T3; i++)
        same_bits("cuda exact_sum vs serial reference", h + S * first[i], ref + first[i], tn[i]);
    /* to_fixed + round (the several-rank form) */
    dt_backend_upload(g, d, pack, (size_t)(S * total) * sizeof(float));
    int64_t *a = dt_backend_alloc(g, (size_t)total * sizeof *a);
    const int64_t waits1 = dt_backend_host_waits(g);
    CHECK(dt_exact_to_fixed(g, a, d, mb, &L) == DT_OK);
    CHECK(dt_exact_round(g, d, a, mb, &L) == DT_OK);
    CHECK_INT_EQ(dt_backend_host_waits(g) - waits1, 0);
    free(h);
    h = host_of(g, d, S * total);
    for (int i = 0; i < T3; i++)
        same_bits("cuda to_fixed+round vs serial reference", h + S * first[i], ref + first[i],
                  tn[i]);
    free(h), free(pack), free(ref);
    dt_backend_free(g, d), dt_backend_free(g, mb), dt_backend_free(g, a);
    dt_backend_destroy(g);
}

/* ---- the weight gradient summed where it is made (one rank: dt_shards.summed) ------------
 * The backend sums a tensor's shard partials itself (nets/cpu/dense.c: the double sum in
 * cache where it is exact, kept or remade terms through the integer path where not): slot 0
 * must hold the serial exact sum of what the shard op alone puts in the slots, its maximum
 * theirs; dt_exact_sum then leaves the tensor as it is. */
static void count_calls(void *ctx, struct dt_backend *be, enum dt_op op, bool after,
                        const struct dt_op_tensor *t, int n)
{
    (void)be, (void)op, (void)after, (void)t, (void)n;
    ++*(int *)ctx;
}

static void summed_case(int threads, int64_t S, int64_t per, int64_t mult, int64_t in, int64_t out,
                        const float *x, const float *dy, const char *what)
{
    const int64_t B = S * per * mult, n = in * out; /* mult rows an example (the GPT's) */
    int64_t row[DT_CPU_SPEC_TERMS_MAX + 2];
    shard_rows(row, S * per, S);
    struct dt_backend *be = cpu(threads);
    struct dt_policy pol = level(DT_LEVEL_PORTABLE);
    float *dx = dev_copy(be, x, B * in), *ddy = dev_copy(be, dy, B * out);
    /* the shard op's slots, and their serial exact sum */
    float *slots = dt_backend_alloc(be, (size_t)(S * n) * sizeof(float));
    const struct dt_shards plain = {.count = S, .row = row};
    dt_backend_set_shards(be, &plain);
    CHECK(dt_dense_backward_weight(be, slots, dx, ddy, B, in, out, &pol) == DT_OK);
    dt_backend_set_shards(be, NULL);
    float *hs = host_of(be, slots, S * n), *ref = dt_xmalloc((size_t)n * sizeof(float));
    uint32_t want = 0;
    for (int64_t e = 0; e < S * n; e++) {
        const uint32_t b = dt_float_bits(hs[e]) & 0x7fffffffu;
        want = b > want ? b : want;
    }
    if (want < 0x7f800000u) serial_exact_sum(ref, hs, S, n, S);
    /* summed by the op: one tensor (its other slots are the op's scratch), with no hint of
     * its maximum, the true one, one 8 binades below (the maximum rose: rows made again)
     * and one 8 above (more groups through the integer path): the same bits each time */
    float *pattern = dt_xmalloc((size_t)(S * n) * sizeof(float));
    for (int64_t e = 0; e < S * n; e++) pattern[e] = (float)(e % 97) - 48.5f;
    float *pack = dev_copy(be, pattern, S * n);
    const int64_t first[2] = {0, n};
    const struct dt_exact_layout L = {
        .tensors = 1, .n = &n, .first = first, .slots = S, .shards = S};
    uint32_t summed[1] = {DT_EXACT_UNSUMMED};
    const uint32_t eight = 8u << 23, finite = want < 0x7f800000u;
    const uint32_t hints[4] = {DT_EXACT_UNSUMMED, want, finite && want > eight ? want - eight : 0,
                               finite && want < 0x7f000000u - eight ? want + eight : want};
    float *h = NULL;
    for (int v = 0; v < 4; v++) {
        dt_backend_upload(be, pack, pattern, (size_t)(S * n) * sizeof(float));
        summed[0] = DT_EXACT_UNSUMMED;
        const struct dt_shards sh = {.count = S,
                                     .row = row,
                                     .pack = pack,
                                     .layout = &L,
                                     .summed = summed,
                                     .hint = &hints[v]};
        dt_backend_set_shards(be, &sh);
        CHECK(dt_dense_backward_weight(be, pack, dx, ddy, B, in, out, &pol) == DT_OK);
        dt_backend_set_shards(be, NULL);
        if (summed[0] != want)
            fprintf(stderr, "%s: maximum 0x%08x, the slots' 0x%08x\n", what, summed[0], want);
        CHECK_INT_EQ(summed[0], want);
        free(h);
        h = host_of(be, pack, S * n);
        if (want < 0x7f800000u && !same_bits(what, h, ref, n))
            fprintf(stderr, "  (hint 0x%08x)\n", hints[v]);
    }
    /* dt_exact_sum then leaves it as it is and copies its maximum */
    uint32_t *mb = dt_backend_alloc(be, sizeof *mb);
    const struct dt_exact_layout rest = {
        .tensors = 1, .n = &n, .first = first, .slots = S, .shards = S, .summed = summed};
    CHECK(dt_exact_sum(be, pack, mb, &rest) == DT_OK);
    float *h2 = host_of(be, pack, S * n);
    same_bits("exact_sum over a summed tensor", h2, h, S * n);
    uint32_t got;
    dt_backend_download(be, &got, mb, sizeof got);
    CHECK_INT_EQ(got, want);
    /* under an observer (explain's op hashing) the op's output is every shard's partial in
     * its slot, as without the hook: nothing summed, the per-shard op's bits (the negative
     * control is the loop above, whose pack holds the sum) */
    {
        int calls = 0;
        dt_backend_upload(be, pack, pattern, (size_t)(S * n) * sizeof(float));
        summed[0] = DT_EXACT_UNSUMMED;
        const struct dt_shards sh = {
            .count = S, .row = row, .pack = pack, .layout = &L, .summed = summed, .hint = &want};
        dt_backend_set_shards(be, &sh);
        dt_backend_set_observer(be, count_calls, &calls);
        CHECK(dt_dense_backward_weight(be, pack, dx, ddy, B, in, out, &pol) == DT_OK);
        dt_backend_set_observer(be, NULL, NULL);
        dt_backend_set_shards(be, NULL);
        CHECK(calls >= 2);
        CHECK_INT_EQ(summed[0], DT_EXACT_UNSUMMED);
        float *ho = host_of(be, pack, S * n);
        same_bits("the op observed: its slots", ho, hs, S * n);
        free(ho);
    }
    free(h), free(h2), free(hs), free(ref), free(pattern);
    dt_backend_free(be, dx), dt_backend_free(be, ddy), dt_backend_free(be, slots);
    dt_backend_free(be, pack), dt_backend_free(be, mb);
    dt_backend_destroy(be);
}

/* Partials laid out at will: one row per shard, dy a power of two per column, so shard k's
 * partial of dw[i][j] is x[k][i] * dy[k][j] exactly: exponents drawn over 70 binades (groups
 * too wide for a double), rows of tiny terms (finer than the maximum's unit), rows a few
 * binades about that unit (where a hint 8 binades low lets groups stand that must be made
 * again), zeros, subnormals, powers of two, signs. */
static void crafted(float *x, float *dy, int64_t S, int64_t in, int64_t out, uint64_t seed)
{
    uint64_t r = seed;
    for (int64_t k = 0; k < S; k++)
        for (int64_t i = 0; i < in; i++) {
            r = r * 6364136223846793005ull + 1442695040888963407ull;
            const uint32_t u = (uint32_t)(r >> 32);
            float v = ldexpf(1.0f + (float)(u & 0xffff) / 65536.0f, -(int)((u >> 16) % 70));
            if (i % 7 == 3) v = ldexpf(1.0f + (float)(u & 0xff) / 256.0f, -55); /* tiny rows */
            if (i % 7 == 5) /* rows a few binades about the maximum's unit (2^-58 here) */
                v = ldexpf(1.0f + (float)(2 * (u & 0x3fffff) + 1) / 8388608.0f, -37); /* odd */
            if ((u >> 24) % 11 == 0) v = 0.0f;
            if ((u >> 24) % 13 == 1) v = 1e-40f; /* subnormal */
            if ((u >> 24) % 17 == 2) v = 0.25f;  /* a power of two */
            x[k * in + i] = (u >> 28) & 1 ? -v : v;
        }
    for (int64_t k = 0; k < S; k++)
        for (int64_t j = 0; j < out; j++) /* the first group 1: its terms x's own binades */
            dy[k * out + j] = j < 16 ? 1.0f : ldexpf(1.0f, -(int)((j * 5 + k) % 9));
}

static void wgrad_summed_body(void)
{
    struct shape {
        int64_t S, per, mult, in, out;
    } const shapes[] = {
        {4, 16, 1, 37, 53},  /* one chunk a shard, a short last group */
        {3, 40, 1, 20, 32},  /* two chunks a shard: the fixed rows */
        {5, 8, 1, 70, 8},    /* few outputs: the transposed shard op, then the sum */
        {17, 2, 1, 19, 24},  /* more shards than the in-cache sum takes */
        {4, 5, 3, 33, 48},   /* 3 rows an example */
        {3, 4, 2, 40, 8},    /* and few outputs: the plain op per shard, then the sum */
        {4, 16, 1, 300, 64}, /* more elements than a worker's kept run (KEPT_FLOATS / S):
                              * with no hint every group is risky, the last ones in slots */
    };
    for (size_t c = 0; c < sizeof shapes / sizeof shapes[0]; c++) {
        const struct shape q = shapes[c];
        const int64_t B = q.S * q.per * q.mult;
        float *x = dt_xmalloc((size_t)(B * q.in) * sizeof(float));
        float *dy = dt_xmalloc((size_t)(B * q.out) * sizeof(float));
        fill(x, B * q.in, 1.0);
        fill(dy, B * q.out, 0.3);
        for (int threads = 1; threads <= 2; threads++)
            summed_case(threads, q.S, q.per, q.mult, q.in, q.out, x, dy, "summed (random)");
        x[B * q.in / 2] = NAN; /* a NaN: the maximum says so, as the slots' does */
        summed_case(2, q.S, q.per, q.mult, q.in, q.out, x, dy, "summed (a NaN)");
        free(x), free(dy);
    }
    const int64_t S = 4, in = 300, out = 40;
    float *x = dt_xmalloc((size_t)(S * in) * sizeof(float));
    float *dy = dt_xmalloc((size_t)(S * out) * sizeof(float));
    for (uint64_t seed = 1; seed <= 3; seed++) {
        crafted(x, dy, S, in, out, seed);
        for (int threads = 1; threads <= 2; threads++)
            summed_case(threads, S, 1, 1, in, out, x, dy, "summed (crafted)");
    }
    free(dy);
    /* no group risky at all under a hint 8 binades low, yet rows below the true floor: one
     * row of 1.5 (the maximum), the others 2^-37 with odd mantissas, dy 1; 40 outputs (rows
     * tested one at a time) and 48 (whole groups: a block of rows in one test, its unit
     * bound each row's) */
    const int64_t outs[] = {40, 48};
    for (int o = 0; o < 2; o++) {
        dy = dt_xmalloc((size_t)(S * outs[o]) * sizeof(float));
        for (int64_t k = 0; k < S; k++) {
            for (int64_t i = 0; i < in; i++)
                x[k * in + i] =
                    i == 0 ? 1.5f
                           : ldexpf(1.0f + (float)(2 * ((uint32_t)(i * 4 + k) * 2654435761u >> 9 &
                                                        0x3fffff) +
                                                   1) /
                                               8388608.0f,
                                    -37);
            for (int64_t j = 0; j < outs[o]; j++) dy[k * outs[o] + j] = 1.0f;
        }
        summed_case(2, S, 1, 1, in, outs[o], x, dy, "summed (near the floor)");
        free(dy);
    }
    free(x);
}

DT_TEST(wgrad_summed_equals_exact_sum) { on_both_paths(wgrad_summed_body); }

DT_TEST_MAIN(DT_CASE(ops_per_shard), DT_CASE(exact_sum_reference),
             DT_CASE(rank_grouping_negative_control), DT_CASE(mlp_one_pass_equals_passes),
             DT_CASE(lenet_one_pass_equals_passes), DT_CASE(cuda_exact_sum_equals_cpu),
             DT_CASE(exact_round_ties), DT_CASE(sum_packs_equals_one_rank),
             DT_CASE(exact_sum_double_shortcut), DT_CASE(max_bits_scan),
             DT_CASE(exact_sum_nonfinite_left), DT_CASE(exact_sum_unit_edge),
             DT_CASE(exact_sum_slices), DT_CASE(wgrad_summed_equals_exact_sum))
