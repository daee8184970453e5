/* Tests for the GPT (nets/gpt.c), its ops (nets/cpu/embedding.c, norm.c, attention.c,
 * activation.c; arithmetic in nets/gpt_elem.h),
 * AdamW and the text dataset:
 *   ops_are_the_shared_functions   every CPU op, at 1 and 3 threads, equals a plain loop over
 *                                  the per-element functions of nets/gpt_elem.h bit for bit
 *                                  (the host emulation a CUDA kernel is checked against);
 *   attention_library_path         the CUDA backend's cuBLAS calls for attention
 *                                  (nets/gpt_attn_gemm.h) through a host BLAS, with the
 *                                  per-row softmax and dS: the CPU op within rounding; a
 *                                  wrongly transposed operand is far off; the CPU op at
 *                                  math: fast (the same calls through OpenBLAS) within
 *                                  rounding of the portable op, T 7 and 70;
 *   layernorm_warp                 LayerNorm's sums in a warp's lane order: the CUDA
 *                                  kernels' butterfly emulated, the CPU op's bits (D 1 to
 *                                  384); index order gives other means (negative control);
 *   attention_tiles                the forward's online softmax over key tiles of
 *                                  DT_GPT_ATTN_TILE on ragged shapes: the double reference
 *                                  within its bound, the CUDA shared-memory schedule emulated
 *                                  bit for bit (and the tiled backward's), the backward
 *                                  across tiles by central differences; one tile instead
 *                                  gives other bits;
 *   ops_match_double_reference     LayerNorm, attention and GELU forward and backward
 *                                  against double-precision references written here
 *                                  (backward by central differences of the double forward);
 *   gradients_match_double_reference  the whole model's loss and every parameter's
 *                                  gradient (a sample of elements per tensor, tied and untied
 *                                  head, every level; with dropout under stored, lfsr and
 *                                  philox) against a double-precision GPT written here, by
 *                                  central differences;
 *   embedding_scatter_controls     atomics: fixed_point is the exactly rounded sum,
 *                                  independent of threads and of a forced order; atomics:
 *                                  float under two forced orders gives different bits
 *                                  (the negative control, forced, not timing luck);
 *   adamw_and_schedule             dt_adamw_update against the double formula over steps;
 *                                  warm-up and cosine learning rates;
 *   text_dataset                   windows, split, name order, skipped files; refusals
 *                                  (missing, empty, too short, no readable file);
 *   levels_and_threads (e2e)       the binary on tests/data/gpt_corpus.txt: portable and
 *                                  run_to_run replicas identical and the same at 1 and 2
 *                                  threads; the evaluation in metrics.csv;
 *   resume_after_kill (e2e)        SIGKILL mid-run, --resume: the trace of the uninterrupted
 *                                  run, AdamW's second moment restored;
 *   ranks_independent (e2e)        portable under mpirun -np 1..4: the one-process trace;
 *   dropout_masks                  the dropout op = determinism/dropout.h's functions (1, 3
 *                                  threads, every rng mode), backward rebuilds forward's
 *                                  mask, keep rate 1 - p, a split batch keeps the whole
 *                                  batch's masks (negative control: local row keys);
 *   dropout_runs (e2e)             with dropout: replicas, 1/2 threads, stored == lfsr,
 *                                  philox != lfsr, a run without dropout differs, resume;
 *   dropout_ranks (e2e)            with dropout, mpirun -np 2..4 = one process (lfsr, philox);
 *   nonfinite_stops (e2e)          a NaN in a LayerNorm gradient at step 5 stops the replica,
 *                                  naming the tensor and the step;
 *   refusals (e2e)                 a bad corpus or a gpt on images: exit 2, nothing written;
 * on the GPU (labels gpu, gpt; skipped without one):
 *   gpu_gradients_equal_cpu_and_grid_free  one step's gradients: the CPU's bits at portable
 *                                  (with and without dropout, lfsr and philox), the same at
 *                                  three launch geometries; gpu_gradients_exact_math_equal_cpu
 *                                  the same at portable + math: exact,
 *                                  gpu_gradients_run_to_run_grid_free geometries alone;
 *   gpu_host_waits_per_step        1 wait a step after the first (the step's end; one step
 *                                  state kept across steps, as runs keep it);
 *   gpu_portable_trace_equals_cpu  50 steps: trace, per-tensor digests, metrics = the CPU's;
 *   gpu_run_to_run_replicas_identical, gpu_explain_names_scatter (the forced float scatter). */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness/record/layout.h"
#include "harness/run/dist.h"
#include "harness/record/snapshot.h"
#include "harness/setup/data.h"
#include "determinism/dropout.h"
#include "determinism/fixed_point.h"
#include "nets/backend.h"
#include "nets/gpt_attn_gemm.h"
#include "nets/gpt_elem.h"
#include "nets/model.h"
#include "nets/step.h"
#include "tests/check.h"
#include "tests/op_helpers.h"
#include "tests/run_helper.h"
#ifdef DETRAIN_HAVE_CUDA_TOOLKIT
#include "nets/cuda/cuda.h" /* dt_cuda_set_launch */
#endif

#define EXE DT_DETRAIN_EXE
#define TMP DT_TEST_TMP_DIR "/gpt."

static char out[65536];

static bool same_bits(const float *a, const float *b, int64_t n, const char *what)
{
    for (int64_t i = 0; i < n; i++)
        if (memcmp(&a[i], &b[i], 4) != 0) {
            fprintf(stderr, "%s[%lld]: %a vs %a\n", what, (long long)i, (double)a[i], (double)b[i]);
            return false;
        }
    return true;
}

/* |a - b| <= rel max |b| everywhere (a library's products: rounded in another order). */
static bool close_to(const float *a, const float *b, int64_t n, double rel, const char *what)
{
    double mx = 0, worst = 0;
    for (int64_t i = 0; i < n; i++) mx = fmax(mx, fabs(b[i]));
    for (int64_t i = 0; i < n; i++) worst = fmax(worst, fabs((double)a[i] - b[i]));
    if (worst <= rel * mx) return true;
    fprintf(stderr, "%s: off by %g of %g\n", what, worst, mx);
    return false;
}

static float *host_copy(struct dt_backend *be, const float *p, int64_t n)
{
    float *h = dt_xmalloc((size_t)n * sizeof *h);
    dt_backend_download(be, h, p, (size_t)n * sizeof *h);
    return h;
}

/* ---- 1. the ops are the shared functions ------------------------------------------------ */

enum { B_ = 3, T_ = 7, H_ = 2, D_ = 12, HD_ = D_ / H_, ROWS_ = B_ * T_ };

static void check_ops_shared(int threads, enum dt_level lv, bool exact_math)
{
    struct dt_backend *be = cpu(threads);
    struct dt_policy pol = level(lv);
    if (exact_math) pol.math = DT_MATH_EXACT;
    const bool portable = dt_math_portable(&pol), exact = dt_math_exact(&pol);
    float x[ROWS_ * D_], gamma[D_], beta[D_], qkv[ROWS_ * 3 * D_], dy[ROWS_ * D_];
    fill(x, ROWS_ * D_, 2.0);
    fill(gamma, D_, 1.5);
    fill(beta, D_, 0.5);
    fill(qkv, ROWS_ * 3 * D_, 1.5);
    fill(dy, ROWS_ * D_, 1.0);
    /* LayerNorm forward and backward */
    float y[ROWS_ * D_], mean[ROWS_], rstd[ROWS_], dx[ROWS_ * D_], gx[ROWS_ * D_];
    float ey[ROWS_ * D_], emean[ROWS_], erstd[ROWS_], edx[ROWS_ * D_], egx[ROWS_ * D_];
    CHECK_INT_EQ(dt_layernorm_forward(be, y, mean, rstd, x, gamma, beta, ROWS_, D_, &pol), DT_OK);
    for (int64_t r = 0; r < ROWS_; r++)
        dt_layernorm_row(ey + r * D_, &emean[r], &erstd[r], x + r * D_, gamma, beta, D_);
    CHECK(same_bits(y, ey, ROWS_ * D_, "layernorm y"));
    CHECK(same_bits(rstd, erstd, ROWS_, "layernorm rstd"));
    memcpy(dx, x, sizeof dx); /* accumulate onto something */
    memcpy(edx, x, sizeof edx);
    CHECK_INT_EQ(dt_layernorm_backward(be, dx, gx, dy, x, mean, rstd, gamma, ROWS_, D_, true, &pol),
                 DT_OK);
    for (int64_t r = 0; r < ROWS_; r++)
        dt_layernorm_row_grad(edx + r * D_, egx + r * D_, dy + r * D_, x + r * D_, emean[r],
                              erstd[r], gamma, D_, true);
    CHECK(same_bits(dx, edx, ROWS_ * D_, "layernorm dx"));
    CHECK(same_bits(gx, egx, ROWS_ * D_, "layernorm gx"));
    /* attention forward and backward */
    static float ao[ROWS_ * D_], att[B_ * H_ * T_ * T_], eao[ROWS_ * D_], eatt[B_ * H_ * T_ * T_];
    static float dqkv[ROWS_ * 3 * D_], ds[B_ * H_ * T_ * T_], edqkv[ROWS_ * 3 * D_],
        eds[B_ * H_ * T_ * T_];
    CHECK_INT_EQ(dt_attention_forward(be, ao, att, qkv, B_, T_, H_, D_, &pol), DT_OK);
    const float scale = dt_gpt_attn_scale(HD_);
    for (int64_t b = 0; b < B_; b++)
        for (int64_t h = 0; h < H_; h++)
            for (int64_t t = 0; t < T_; t++)
                dt_attn_row(eao + (b * T_ + t) * D_ + h * HD_, eatt + ((b * H_ + h) * T_ + t) * T_,
                            qkv, b, t, h, T_, D_, HD_, scale, portable, exact);
    /* math: fast is the library path (OpenBLAS's products, nets/cpu/attention.c): the shared
     * functions' values, not their bits */
    const bool lib = dt_math_fast(&pol);
    CHECK(lib ? close_to(ao, eao, ROWS_ * D_, 1e-5, "attention out (library path)")
              : same_bits(ao, eao, ROWS_ * D_, "attention out"));
    CHECK(lib ? close_to(att, eatt, B_ * H_ * T_ * T_, 1e-5, "attention weights (library path)")
              : same_bits(att, eatt, B_ * H_ * T_ * T_, "attention weights"));
    CHECK_INT_EQ(dt_attention_backward(be, dqkv, ds, dy, att, qkv, B_, T_, H_, D_, &pol), DT_OK);
    for (int64_t b = 0; b < B_; b++)
        for (int64_t h = 0; h < H_; h++)
            for (int64_t t = 0; t < T_; t++)
                dt_attn_row_dscores(eds + ((b * H_ + h) * T_ + t) * T_,
                                    eatt + ((b * H_ + h) * T_ + t) * T_, dy, qkv, b, t, h, T_, D_,
                                    HD_, scale, exact);
    for (int64_t b = 0; b < B_; b++)
        for (int64_t u = 0; u < T_; u++)
            for (int w = 0; w < 3; w++)
                for (int64_t e = 0; e < D_; e++)
                    edqkv[(b * T_ + u) * 3 * D_ + w * D_ + e] = dt_attn_grad_elem(
                        eds, eatt, dy, qkv, b, u, e / HD_, e % HD_, w, T_, D_, HD_, exact);
    CHECK(lib ? close_to(ds, eds, B_ * H_ * T_ * T_, 1e-5, "score gradients (library path)")
              : same_bits(ds, eds, B_ * H_ * T_ * T_, "score gradients"));
    CHECK(lib ? close_to(dqkv, edqkv, ROWS_ * 3 * D_, 1e-5, "qkv gradient (library path)")
              : same_bits(dqkv, edqkv, ROWS_ * 3 * D_, "qkv gradient"));
    /* GELU, add, embedding forward */
    float g[ROWS_ * D_], eg[ROWS_ * D_], gd[ROWS_ * D_], egd[ROWS_ * D_];
    CHECK_INT_EQ(dt_gelu_forward(be, g, x, ROWS_ * D_, &pol), DT_OK);
    CHECK_INT_EQ(dt_gelu_backward(be, gd, dy, x, ROWS_ * D_, &pol), DT_OK);
    for (int64_t i = 0; i < ROWS_ * D_; i++) {
        eg[i] = dt_gelu(x[i], dt_math_own_elementary(&pol));
        egd[i] = dt_gelu_grad(x[i], dy[i], dt_math_own_elementary(&pol));
    }
    CHECK(same_bits(g, eg, ROWS_ * D_, "gelu"));
    CHECK(same_bits(gd, egd, ROWS_ * D_, "gelu gradient"));
    float win[B_ * (T_ + 1)], wte[DT_GPT_VOCAB * D_], wpe[T_ * D_], h0[ROWS_ * D_];
    int32_t tok[ROWS_], tgt[ROWS_];
    for (int64_t i = 0; i < B_ * (T_ + 1); i++) win[i] = (float)((i * 37 + 11) % 256);
    fill(wte, DT_GPT_VOCAB * D_, 0.3);
    fill(wpe, T_ * D_, 0.3);
    CHECK_INT_EQ(dt_embedding_forward(be, h0, tok, tgt, win, wte, wpe, B_, T_, D_, &pol), DT_OK);
    for (int64_t b = 0; b < B_; b++)
        for (int64_t t = 0; t < T_; t++) {
            const int32_t v = dt_gpt_token(win[b * (T_ + 1) + t]);
            CHECK_INT_EQ(tok[b * T_ + t], v);
            CHECK_INT_EQ(tgt[b * T_ + t], dt_gpt_token(win[b * (T_ + 1) + t + 1]));
            for (int64_t i = 0; i < D_; i++) {
                const int64_t e = (b * T_ + t) * D_ + i;
                CHECK(h0[e] == dt_embed_elem(win, wte, wpe, T_, D_, e));
                CHECK(h0[e] == wte[v * D_ + i] + wpe[t * D_ + i]); /* what it means */
            }
        }
    /* AdamW (the CPU loop vectorised: each element dt_adamw_elem's bits), with and without
     * weight decay, a -0 weight among them */
    for (int decay = 0; decay < 2; decay++) {
        float w[97], m[97], v[97], gr[97], ew[97], em[97], ev[97];
        fill(w, 97, 1.0);
        fill(m, 97, 0.1);
        fill(gr, 97, 1.0);
        w[5] = -0.0f, gr[5] = 0.0f, m[5] = 0.0f;
        for (int i = 0; i < 97; i++) v[i] = 0.01f * (float)(i % 5);
        memcpy(ew, w, sizeof w), memcpy(em, m, sizeof m), memcpy(ev, v, sizeof v);
        const struct dt_adamw_step st = {.lr = 1e-3f,
                                         .beta1 = 0.9f,
                                         .beta2 = 0.999f,
                                         .eps = 1e-8f,
                                         .weight_decay = decay ? 0.01f : 0.0f,
                                         .bc1 = 0.271f,
                                         .bc2 = 0.003f};
        CHECK_INT_EQ(dt_adamw_update(be, w, m, v, gr, 97, &st, &pol), DT_OK);
        for (int i = 0; i < 97; i++) dt_adamw_elem(&ew[i], &em[i], &ev[i], gr[i], &st);
        CHECK(same_bits(w, ew, 97, "adamw w") && same_bits(m, em, 97, "adamw m") &&
              same_bits(v, ev, 97, "adamw v"));
    }
    dt_backend_destroy(be);
}

/* The BLAS definition (column-major, strided batch) on the host. */
static void host_gemm(const struct dt_gemm_call *g)
{
    for (int64_t z = 0; z < g->batch; z++) {
        const float *a = g->a + z * g->stride_a, *b = g->b + z * g->stride_b;
        float *c = g->c + z * g->stride_c;
        for (int64_t j = 0; j < g->n; j++)
            for (int64_t i = 0; i < g->m; i++) {
                double acc = 0;
                for (int64_t l = 0; l < g->k; l++)
                    acc += (double)(g->ta ? a[l + i * g->lda] : a[i + l * g->lda]) *
                           (double)(g->tb ? b[j + l * g->ldb] : b[l + j * g->ldb]);
                c[i + j * g->ldc] = (float)(g->alpha * acc);
            }
    }
}

/* The CUDA backend's library path for attention (nets/gpt_attn_gemm.h: the exact cuBLAS
 * calls it issues, each a strided batch over one example's heads or over every example for
 * one head -- both forms checked) run through the BLAS
 * definition here, with the per-row softmax and dS functions between: the CPU op's
 * outputs within float rounding. A GPU is not needed to check the calls' layouts. */
static void check_attention_library_path(void)
{
    enum { AB = 2, AT = 7, AH = 3, AD = 12, AR = AB * AT };
    struct dt_backend *be = cpu(1);
    const struct dt_policy pol = level(DT_LEVEL_PORTABLE);
    static float qkv[AR * 3 * AD], dout[AR * AD], aout[AR * AD], att[AB * AH * AT * AT];
    static float ds[AB * AH * AT * AT], dqkv[AR * 3 * AD];
    static float gout[AR * AD], gatt[AB * AH * AT * AT], gds[AB * AH * AT * AT], gdqkv[AR * 3 * AD];
    fill(qkv, AR * 3 * AD, 1.5);
    fill(dout, AR * AD, 1.0);
    CHECK_INT_EQ(dt_attention_forward(be, aout, att, qkv, AB, AT, AH, AD, &pol), DT_OK);
    CHECK_INT_EQ(dt_attention_backward(be, dqkv, ds, dout, att, qkv, AB, AT, AH, AD, &pol), DT_OK);
    const float scale = dt_gpt_attn_scale(AD / AH);
    for (int over_examples = 0; over_examples < 2; over_examples++) {
        struct dt_attn_shape s = dt_attn_shape_of(AB, AT, AH, AD);
        s.over_examples = over_examples; /* both forms: AB < AH picks the heads' */
        const int64_t calls = dt_attn_gemm_calls(&s);
        CHECK_INT_EQ(calls, over_examples ? AH : AB);
        memset(gout, 0, sizeof gout); /* nothing of the other form's left to pass for it */
        memset(gdqkv, 0, sizeof gdqkv);
        memset(gatt, 0, sizeof gatt);
        memset(gds, 0, sizeof gds);
        for (int64_t i = 0; i < calls; i++) {
            const struct dt_gemm_call g = dt_attn_gemm_scores(&s, gatt, qkv, i, scale);
            host_gemm(&g);
        }
        for (int64_t i = 0; i < AB * AH * AT; i++)
            dt_attn_softmax_row(gatt + i * AT, i % AT, AT, true);
        for (int64_t i = 0; i < calls; i++) {
            const struct dt_gemm_call g = dt_attn_gemm_out(&s, gout, gatt, qkv, i);
            host_gemm(&g);
            const struct dt_gemm_call p = dt_attn_gemm_dp(&s, gds, dout, qkv, i);
            host_gemm(&p);
        }
        for (int64_t i = 0; i < AB * AH * AT; i++)
            dt_attn_dscores_finish(gds + i * AT, gatt + i * AT, i % AT, AT, scale, false);
        for (int64_t i = 0; i < calls; i++)
            for (int which = 0; which < 3; which++) {
                const struct dt_gemm_call g =
                    dt_attn_gemm_grad(&s, gdqkv, gds, gatt, dout, qkv, i, which);
                host_gemm(&g);
            }
        const struct {
            const char *what;
            const float *got, *ref;
            int64_t n;
        } cmp[] = {{"library path: weights", gatt, att, AB * AH * AT * AT},
                   {"library path: out", gout, aout, AR * AD},
                   {"library path: dS", gds, ds, AB * AH * AT * AT},
                   {"library path: dqkv", gdqkv, dqkv, AR * 3 * AD}};
        for (size_t c = 0; c < sizeof cmp / sizeof cmp[0]; c++) {
            double mx = 0, worst = 0;
            for (int64_t i = 0; i < cmp[c].n; i++) mx = fmax(mx, fabs(cmp[c].ref[i]));
            for (int64_t i = 0; i < cmp[c].n; i++)
                worst = fmax(worst, fabs((double)cmp[c].got[i] - cmp[c].ref[i]));
            if (!(worst <= 1e-5 * mx))
                fprintf(stderr, "%s (over %s): off by %g of %g\n", cmp[c].what,
                        over_examples ? "examples" : "heads", worst, mx);
            CHECK(worst <= 1e-5 * mx);
        }
    }
    const struct dt_attn_shape s = dt_attn_shape_of(AB, AT, AH, AD);
    /* negative control: one operand transposed the wrong way is far off */
    struct dt_gemm_call bad = dt_attn_gemm_grad(&s, gdqkv, gds, gatt, dout, qkv, 0, 1);
    bad.tb = !bad.tb;
    host_gemm(&bad);
    double off = 0;
    for (int64_t i = 0; i < AR * 3 * AD; i++) off = fmax(off, fabs((double)gdqkv[i] - dqkv[i]));
    CHECK(off > 1e-3);
    /* the CPU op at math: fast makes these calls through OpenBLAS (nets/cpu/attention.c), on this
     * shape and a ragged longer one: the portable op's values within rounding */
    const struct dt_policy fast = level(DT_LEVEL_FAST);
    CHECK_INT_EQ(dt_attention_forward(be, gout, gatt, qkv, AB, AT, AH, AD, &fast), DT_OK);
    CHECK_INT_EQ(dt_attention_backward(be, gdqkv, gds, dout, gatt, qkv, AB, AT, AH, AD, &fast),
                 DT_OK);
    CHECK(close_to(gout, aout, AR * AD, 1e-5, "library path on the CPU: out"));
    CHECK(close_to(gatt, att, AB * AH * AT * AT, 1e-5, "library path on the CPU: weights"));
    CHECK(close_to(gds, ds, AB * AH * AT * AT, 1e-5, "library path on the CPU: dS"));
    CHECK(close_to(gdqkv, dqkv, AR * 3 * AD, 1e-5, "library path on the CPU: dqkv"));
    {
        enum { LB = 1, LT = 70, LH = 2, LD = 32, LR = LB * LT, LA = LB * LH * LT * LT };
        static float lq[LR * 3 * LD], ld[LR * LD], lo[2][LR * LD], la[2][LA], lds[2][LA],
            lg[2][LR * 3 * LD];
        fill(lq, LR * 3 * LD, 2.0);
        fill(ld, LR * LD, 1.0);
        for (int f = 0; f < 2; f++) {
            const struct dt_policy p = f ? fast : pol;
            CHECK_INT_EQ(dt_attention_forward(be, lo[f], la[f], lq, LB, LT, LH, LD, &p), DT_OK);
            CHECK_INT_EQ(
                dt_attention_backward(be, lg[f], lds[f], ld, la[f], lq, LB, LT, LH, LD, &p), DT_OK);
        }
        CHECK(close_to(lo[1], lo[0], LR * LD, 1e-5, "library path, T 70: out"));
        CHECK(close_to(la[1], la[0], LA, 1e-5, "library path, T 70: weights"));
        CHECK(close_to(lg[1], lg[0], LR * 3 * LD, 1e-5, "library path, T 70: dqkv"));
    }
    dt_backend_destroy(be);
}

DT_TEST(ops_are_the_shared_functions)
{
    for (int threads = 1; threads <= 3; threads += 2) {
        check_ops_shared(threads, DT_LEVEL_PORTABLE, false);
        check_ops_shared(threads, DT_LEVEL_PORTABLE, true); /* math: exact */
        check_ops_shared(threads, DT_LEVEL_RUN_TO_RUN, false);
        check_ops_shared(threads, DT_LEVEL_FAST, false);
    }
}

DT_TEST(attention_library_path) { check_attention_library_path(); }

/* ---- 2. the ops against double references ------------------------------------------------ */

static void ln_ref(double *y, const double *x, const float *gamma, const float *beta, int64_t D)
{
    double mean = 0, var = 0;
    for (int64_t i = 0; i < D; i++) mean += x[i];
    mean /= (double)D;
    for (int64_t i = 0; i < D; i++) var += (x[i] - mean) * (x[i] - mean);
    var /= (double)D;
    const double rstd = 1.0 / sqrt(var + (double)DT_GPT_LN_EPS);
    for (int64_t i = 0; i < D; i++) y[i] = (x[i] - mean) * rstd * gamma[i] + beta[i];
}

static double gelu_ref(double x)
{
    return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}

/* causal attention of one example, all heads: qkv (T, 3D) -> out (T, D) */
static void attn_ref(double *o, const double *qkv, int64_t T, int64_t D, int64_t H)
{
    const int64_t hd = D / H;
    for (int64_t h = 0; h < H; h++)
        for (int64_t t = 0; t < T; t++) {
            double a[128], mx = -INFINITY, z = 0;
            for (int64_t s = 0; s <= t; s++) {
                double dot = 0;
                for (int64_t j = 0; j < hd; j++)
                    dot += qkv[t * 3 * D + h * hd + j] * qkv[s * 3 * D + D + h * hd + j];
                a[s] = dot / sqrt((double)hd);
                if (a[s] > mx) mx = a[s];
            }
            for (int64_t s = 0; s <= t; s++) z += (a[s] = exp(a[s] - mx));
            for (int64_t j = 0; j < hd; j++) {
                double acc = 0;
                for (int64_t s = 0; s <= t; s++)
                    acc += a[s] / z * qkv[s * 3 * D + 2 * D + h * hd + j];
                o[t * D + h * hd + j] = acc;
            }
        }
}

/* The gradient of sum(dout * attention(qkv)) with respect to qkv, one example (T, 3D), by
 * central differences of attn_ref. */
static void attn_grad_ref(double *dref, const float *qkv, const float *dout, int64_t T, int64_t D,
                          int64_t H)
{
    const int64_t n = T * 3 * D;
    double *qd = dt_xmalloc((size_t)n * sizeof *qd), *op = dt_xmalloc((size_t)(T * D) * sizeof *op),
           *om = dt_xmalloc((size_t)(T * D) * sizeof *om);
    for (int64_t i = 0; i < n; i++) qd[i] = qkv[i];
    for (int64_t i = 0; i < n; i++) {
        const double h = 1e-6, keep = qd[i];
        double lp = 0, lm = 0;
        qd[i] = keep + h;
        attn_ref(op, qd, T, D, H);
        qd[i] = keep - h;
        attn_ref(om, qd, T, D, H);
        qd[i] = keep;
        for (int64_t k = 0; k < T * D; k++) {
            lp += dout[k] * op[k];
            lm += dout[k] * om[k];
        }
        dref[i] = (lp - lm) / (2 * h);
    }
    free(qd);
    free(op);
    free(om);
}

DT_TEST(ops_match_double_reference)
{
    struct dt_backend *be = cpu(2);
    for (int lv = 0; lv < 2; lv++) {
        const struct dt_policy pol = level(lv ? DT_LEVEL_PORTABLE : DT_LEVEL_FAST);
        /* LayerNorm: forward, and the input gradient of sum(dy * y) by central differences */
        enum { R = 4, D = 10 };
        float x[R * D], gamma[D], beta[D], dy[R * D], y[R * D], mean[R], rstd[R], dx[R * D],
            gx[R * D];
        fill(x, R * D, 3.0);
        fill(gamma, D, 1.0);
        fill(beta, D, 1.0);
        fill(dy, R * D, 1.0);
        CHECK_INT_EQ(dt_layernorm_forward(be, y, mean, rstd, x, gamma, beta, R, D, &pol), DT_OK);
        CHECK_INT_EQ(dt_layernorm_backward(be, dx, gx, dy, x, mean, rstd, gamma, R, D, false, &pol),
                     DT_OK);
        double yr[R * D], dxr[R * D], gxr[R * D];
        for (int64_t r = 0; r < R; r++) {
            double xd[D], yd[D];
            for (int64_t i = 0; i < D; i++) xd[i] = x[r * D + i];
            ln_ref(yd, xd, gamma, beta, D);
            for (int64_t i = 0; i < D; i++) {
                yr[r * D + i] = yd[i];
                gxr[r * D + i] = dy[r * D + i] * (yd[i] - beta[i]) / gamma[i];
            }
            for (int64_t i = 0; i < D; i++) {
                const double h = 1e-6;
                double lp = 0, lm = 0, yp[D], ym[D];
                xd[i] += h;
                ln_ref(yp, xd, gamma, beta, D);
                xd[i] -= 2 * h;
                ln_ref(ym, xd, gamma, beta, D);
                xd[i] += h;
                for (int64_t k = 0; k < D; k++) {
                    lp += dy[r * D + k] * yp[k];
                    lm += dy[r * D + k] * ym[k];
                }
                dxr[r * D + i] = (lp - lm) / (2 * h);
            }
        }
        check_close("layernorm y", y, yr, R * D, 1e-5, 1e-5);
        check_close("layernorm dx", dx, dxr, R * D, 1e-4, 1e-3);
        check_close("layernorm gx", gx, gxr, R * D, 1e-5, 1e-4);
        /* attention, one example */
        enum { T = 6, AD = 8, AH = 2 };
        float qkv[T * 3 * AD], o[T * AD], att[AH * T * T], dout[T * AD], dqkv[T * 3 * AD],
            ds[AH * T * T];
        fill(qkv, T * 3 * AD, 1.5);
        fill(dout, T * AD, 1.0);
        CHECK_INT_EQ(dt_attention_forward(be, o, att, qkv, 1, T, AH, AD, &pol), DT_OK);
        CHECK_INT_EQ(dt_attention_backward(be, dqkv, ds, dout, att, qkv, 1, T, AH, AD, &pol),
                     DT_OK);
        double qd[T * 3 * AD], od[T * AD], dref[T * 3 * AD];
        for (int64_t i = 0; i < T * 3 * AD; i++) qd[i] = qkv[i];
        attn_ref(od, qd, T, AD, AH);
        attn_grad_ref(dref, qkv, dout, T, AD, AH);
        check_close("attention out", o, od, T * AD, 1e-5, 1e-5);
        check_close("attention dqkv", dqkv, dref, T * 3 * AD, 1e-4, 1e-3);
        /* GELU */
        float gx2[64], gy[64], ggd[64], ones[64];
        double gyr[64], gdr[64];
        for (int i = 0; i < 64; i++) {
            gx2[i] = -6.0f + 0.19f * (float)i;
            ones[i] = 1.0f;
            gyr[i] = gelu_ref(gx2[i]);
            gdr[i] = (gelu_ref(gx2[i] + 1e-6) - gelu_ref(gx2[i] - 1e-6)) / 2e-6;
        }
        CHECK_INT_EQ(dt_gelu_forward(be, gy, gx2, 64, &pol), DT_OK);
        CHECK_INT_EQ(dt_gelu_backward(be, ggd, ones, gx2, 64, &pol), DT_OK);
        check_close("gelu", gy, gyr, 64, 1e-6, 1e-5);
        check_close("gelu gradient", ggd, gdr, 64, 1e-5, 1e-4);
    }
    dt_backend_destroy(be);
}

/* ---- 3. the whole model against a double-precision GPT ----------------------------------- */

struct ref_gpt {
    int64_t T, D, H, L, V;
    bool tie;
    double **p; /* every parameter as the model orders them */
    int n_params;
    double **mask; /* dropout: per site, each element's multiplier (0 or scale); or NULL */
};

/* x *= site k's multipliers (rows D), when the reference drops. */
static void ref_drop(const struct ref_gpt *g, double *x, int k, int64_t n)
{
    if (!g->mask) return;
    for (int64_t i = 0; i < n; i++) x[i] *= g->mask[k][i];
}

static void ref_layernorm(double *y, const double *x, const double *g, const double *b,
                          int64_t rows, int64_t D)
{
    for (int64_t r = 0; r < rows; r++) {
        double mean = 0, var = 0;
        for (int64_t i = 0; i < D; i++) mean += x[r * D + i];
        mean /= (double)D;
        for (int64_t i = 0; i < D; i++) var += (x[r * D + i] - mean) * (x[r * D + i] - mean);
        const double rstd = 1.0 / sqrt(var / (double)D + (double)DT_GPT_LN_EPS);
        for (int64_t i = 0; i < D; i++) y[r * D + i] = (x[r * D + i] - mean) * rstd * g[i] + b[i];
    }
}

static void ref_dense(double *y, const double *x, const double *w, const double *b, int64_t rows,
                      int64_t in, int64_t outd)
{
    for (int64_t r = 0; r < rows; r++)
        for (int64_t o = 0; o < outd; o++) {
            double acc = b ? b[o] : 0;
            for (int64_t i = 0; i < in; i++) acc += x[r * in + i] * w[i * outd + o];
            y[r * outd + o] = acc;
        }
}

/* Mean loss over every position of the B windows win (B, T + 1). */
static double ref_loss(const struct ref_gpt *g, const float *win, int64_t B)
{
    const int64_t T = g->T, D = g->D, V = g->V, rows = B * T, F = 4 * D;
    double *h = dt_xcalloc((size_t)(rows * D), sizeof *h), *ln = dt_xcalloc((size_t)(rows * D), 8);
    double *qkv = dt_xcalloc((size_t)(rows * 3 * D), 8), *ao = dt_xcalloc((size_t)(rows * D), 8);
    double *tmp = dt_xcalloc((size_t)(rows * F), 8), *fc = dt_xcalloc((size_t)(rows * F), 8);
    double *logits = dt_xcalloc((size_t)(rows * V), 8);
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < T; t++)
            for (int64_t i = 0; i < D; i++)
                h[(b * T + t) * D + i] =
                    g->p[0][(int64_t)win[b * (T + 1) + t] * D + i] + g->p[1][t * D + i];
    ref_drop(g, h, 0, rows * D);
    for (int64_t l = 0; l < g->L; l++) {
        double *const *P = g->p + 2 + l * 12;
        ref_layernorm(ln, h, P[0], P[1], rows, D);
        ref_dense(qkv, ln, P[2], P[3], rows, D, 3 * D);
        for (int64_t b = 0; b < B; b++) attn_ref(ao + b * T * D, qkv + b * T * 3 * D, T, D, g->H);
        ref_dense(tmp, ao, P[4], P[5], rows, D, D);
        ref_drop(g, tmp, (int)(1 + 2 * l), rows * D);
        for (int64_t i = 0; i < rows * D; i++) h[i] += tmp[i];
        ref_layernorm(ln, h, P[6], P[7], rows, D);
        ref_dense(fc, ln, P[8], P[9], rows, D, F);
        for (int64_t i = 0; i < rows * F; i++) fc[i] = gelu_ref(fc[i]);
        ref_dense(tmp, fc, P[10], P[11], rows, F, D);
        ref_drop(g, tmp, (int)(2 + 2 * l), rows * D);
        for (int64_t i = 0; i < rows * D; i++) h[i] += tmp[i];
    }
    double *const *Pf = g->p + 2 + g->L * 12;
    ref_layernorm(ln, h, Pf[0], Pf[1], rows, D);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t v = 0; v < V; v++) {
            double acc = 0;
            for (int64_t i = 0; i < D; i++)
                acc += ln[r * D + i] * (g->tie ? g->p[0][v * D + i] : Pf[2][i * V + v]);
            logits[r * V + v] = acc;
        }
    double loss = 0;
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < T; t++) {
            const double *z = logits + (b * T + t) * V;
            double mx = z[0], s = 0;
            for (int64_t v = 1; v < V; v++) mx = z[v] > mx ? z[v] : mx;
            for (int64_t v = 0; v < V; v++) s += exp(z[v] - mx);
            loss += log(s) + mx - z[(int64_t)win[b * (T + 1) + t + 1]];
        }
    free(h), free(ln), free(qkv), free(ao), free(tmp), free(fc), free(logits);
    return loss / (double)rows;
}

/* The multipliers of the 2 L + 1 dropout sites of a step over rows (global rows 0..), as
 * determinism/dropout.h defines them for the policy's rng, from ones. */
static double **ref_masks(const struct dt_policy *pol, int L, int64_t rows, int64_t D,
                          uint64_t seed, uint32_t step, uint32_t member, double p)
{
    const uint32_t thr = (uint32_t)nearbyint(p * 4294967296.0);
    const float scale = (float)(1.0 / (1.0 - p));
    double **mk = dt_xcalloc((size_t)(2 * L + 1), sizeof *mk);
    float *ones = dt_xmalloc((size_t)(rows * D) * sizeof *ones),
          *y = dt_xmalloc((size_t)(rows * D) * 4);
    for (int64_t i = 0; i < rows * D; i++) ones[i] = 1.0f;
    struct dt_xoro *lanes = dt_xmalloc((size_t)rows * sizeof *lanes);
    for (int64_t r = 0; r < rows; r++)
        lanes[r] = dt_dropout_lane_seed(seed, step, member, (uint64_t)r);
    for (int k = 0; k < 2 * L + 1; k++) {
        const struct dt_philox_stream st = dt_dropout_stream(seed, step, (uint32_t)k, member);
        for (int64_t r = 0; r < rows; r++)
            if (dt_rng_lfsr(pol) || dt_rng_stored(pol)) /* stored draws as lfsr */
                dt_dropout_lane_forward(y + r * D, ones + r * D, NULL, D, &lanes[r], thr, scale);
            else dt_dropout_philox_range(y + r * D, ones + r * D, r * D, D, &st, thr, scale);
        mk[k] = dt_xmalloc((size_t)(rows * D) * sizeof(double));
        for (int64_t i = 0; i < rows * D; i++) mk[k][i] = y[i];
    }
    free(ones), free(y), free(lanes);
    return mk;
}

/* rng >= 0: that rng value instead of the level's. */
static void check_model_gradients(bool tie, enum dt_level lv, int threads, double dropout, int rng,
                                  bool exact_math)
{
    const struct dt_gpt_options o = {.context = 5,
                                     .d_model = 8,
                                     .heads = 2,
                                     .layers = 2,
                                     .tie_embeddings = tie,
                                     .dropout = dropout,
                                     .lfsr_check_every = 1};
    enum { B = 3 };
    struct dt_backend *be = cpu(threads);
    struct dt_model *m = NULL;
    struct dt_error err;
    CHECK_INT_EQ(dt_gpt_create(&m, be, &o, B, &err), DT_OK);
    dt_model_init(m, 7, 0);
    /* LayerNorm gains and biases away from 1 and 0, so their gradients are exercised */
    for (int i = 0; i < m->n_params; i++)
        if (m->params[i].ndim == 1) {
            float *v = host_copy(be, m->params[i].w, m->params[i].n);
            for (int64_t k = 0; k < m->params[i].n; k++) v[k] += (float)(0.3 * urand());
            dt_backend_upload(be, m->params[i].w, v, (size_t)m->params[i].n * 4);
            free(v);
        }
    float win[B * 6];
    for (int i = 0; i < B * 6; i++) win[i] = (float)((i * 91 + 7) % 256);
    uint8_t y[B] = {0};
    const struct dt_batch batch = {.x = win, .y = y};
    struct dt_policy pol = level(lv);
    if (rng >= 0) pol.rng = (enum dt_rng)rng;
    if (exact_math) pol.math = DT_MATH_EXACT;
    float loss = 0;
    dt_model_begin_step(m);
    CHECK_INT_EQ(dt_model_gradients(m, &batch, B, B, &pol, &loss), DT_OK);
    struct ref_gpt g = {.T = 5, .D = 8, .H = 2, .L = 2, .V = DT_GPT_VOCAB, .tie = tie};
    if (dropout > 0)
        g.mask = ref_masks(&pol, 2, B * 5, 8, m->seed, (uint32_t)m->step, m->member, dropout);
    g.n_params = m->n_params;
    g.p = dt_xcalloc((size_t)g.n_params, sizeof *g.p);
    for (int i = 0; i < g.n_params; i++) {
        float *w = host_copy(be, m->params[i].w, m->params[i].n);
        g.p[i] = dt_xmalloc((size_t)m->params[i].n * sizeof(double));
        for (int64_t k = 0; k < m->params[i].n; k++) g.p[i][k] = w[k];
        free(w);
    }
    const double l0 = ref_loss(&g, win, B);
    CHECK_NEAR(loss, l0, 2e-5 * fabs(l0));
    for (int i = 0; i < g.n_params; i++) {
        const struct dt_param *p = &m->params[i];
        float *gr = host_copy(be, p->g, p->n);
        double gmax = 0;
        for (int64_t k = 0; k < p->n; k++) gmax = fmax(gmax, fabs(gr[k]));
        /* a sample of elements: spread over the tensor; wte's rows of tokens in the batch */
        for (int s = 0; s < 6; s++) {
            int64_t k = (int64_t)(s * 7919 + 3) % p->n;
            if (i == 0) k = (int64_t)win[s % (B * 6)] * 8 + s % 8;
            const double keep = g.p[i][k], h = 1e-5;
            g.p[i][k] = keep + h;
            const double lp = ref_loss(&g, win, B);
            g.p[i][k] = keep - h;
            const double lm = ref_loss(&g, win, B);
            g.p[i][k] = keep;
            const double fd = (lp - lm) / (2 * h);
            if (!(fabs(gr[k] - fd) <= 1e-6 + 2e-3 * fabs(fd) + 1e-4 * gmax)) {
                fprintf(stderr,
                        "%s (%s, %s, dropout %g): %s[%lld]: gradient %.9g, reference %.9g\n",
                        tie ? "tied" : "untied", dt_level_name(lv), threads == 1 ? "1t" : "2t",
                        dropout, p->name, (long long)k, (double)gr[k], fd);
                dt_check_failures_++;
            }
        }
        free(gr);
    }
    for (int i = 0; i < g.n_params; i++) free(g.p[i]);
    free(g.p);
    if (g.mask) {
        for (int k = 0; k < 5; k++) free(g.mask[k]);
        free(g.mask);
    }
    dt_model_destroy(m);
    dt_backend_destroy(be);
}

/* ---- 2a. LayerNorm's warp order --------------------------------------------------------- */

/* A warp's xor butterfly on the host: v[lane] = v[lane] + v[lane ^ off], off 16, 8, 4, 2, 1,
 * every lane at once (what __shfl_xor_sync gives each lane). */
static void butterfly(float *v)
{
    for (int off = DT_GPT_LN_LANES / 2; off >= 1; off /= 2) {
        float next[DT_GPT_LN_LANES];
        for (int i = 0; i < DT_GPT_LN_LANES; i++) next[i] = v[i] + v[i ^ off];
        memcpy(v, next, sizeof next);
    }
}

/* The warp's sum as each lane has it: all 32 equal, and equal to dt_lanes_combine's. */
static float warp_sum_checked(const float *part)
{
    float v[DT_GPT_LN_LANES], p[DT_GPT_LN_LANES];
    memcpy(v, part, sizeof v);
    memcpy(p, part, sizeof p);
    butterfly(v);
    const float tree = dt_lanes_combine(p);
    for (int i = 0; i < DT_GPT_LN_LANES; i++) CHECK(memcmp(&v[i], &tree, sizeof tree) == 0);
    return v[0];
}

/* LayerNorm's sums in a warp's order: the CUDA kernels (a warp per row; nets/cuda/norm.cu)
 * emulated on the host -- lane partials, the butterfly, every lane's elements -- equal the
 * CPU op bit for bit, forward and backward, for rows narrower than a warp, ragged and wide
 * (D 1, 10, 33, 64, 384); every lane of the butterfly holds dt_lanes_combine's value. Negative
 * control: the row's sums in plain index order give other statistics for some row of 384. */
DT_TEST(layernorm_warp)
{
    struct dt_backend *be = cpu(3);
    const struct dt_policy pol = level(DT_LEVEL_PORTABLE);
    static const int64_t widths[] = {1, 10, 33, 64, 384};
    for (size_t wi = 0; wi < sizeof widths / sizeof widths[0]; wi++) {
        const int64_t D = widths[wi], R = 9, n = R * D;
        float *x = dt_xmalloc((size_t)n * sizeof *x), *dy = dt_xmalloc((size_t)n * sizeof *dy);
        float *y = dt_xmalloc((size_t)n * sizeof *y), *ey = dt_xmalloc((size_t)n * sizeof *ey);
        float *dx = dt_xmalloc((size_t)n * sizeof *dx), *edx = dt_xmalloc((size_t)n * sizeof *edx);
        float *gx = dt_xmalloc((size_t)n * sizeof *gx), *egx = dt_xmalloc((size_t)n * sizeof *egx);
        float *gamma = dt_xmalloc((size_t)D * sizeof *gamma),
              *beta = dt_xmalloc((size_t)D * sizeof *beta);
        float mean[9], rstd[9];
        fill(x, n, 3.0);
        fill(dy, n, 1.0);
        fill(gamma, D, 1.0);
        fill(beta, D, 0.5);
        CHECK_INT_EQ(dt_layernorm_forward(be, y, mean, rstd, x, gamma, beta, R, D, &pol), DT_OK);
        for (int64_t i = 0; i < n; i++) dx[i] = edx[i] = x[i]; /* accumulate onto something */
        CHECK_INT_EQ(dt_layernorm_backward(be, dx, gx, dy, x, mean, rstd, gamma, R, D, true, &pol),
                     DT_OK);
        int plain_differs = 0;
        for (int64_t r = 0; r < R; r++) {
            const float *xr = x + r * D, *dyr = dy + r * D;
            float part[DT_GPT_LN_LANES], part2[DT_GPT_LN_LANES];
            for (int l = 0; l < DT_GPT_LN_LANES; l++) part[l] = dt_ln_lane_sum(xr, D, l);
            const float m = dt_ln_mean(warp_sum_checked(part), D);
            for (int l = 0; l < DT_GPT_LN_LANES; l++) part[l] = dt_ln_lane_sqdev(xr, m, D, l);
            const float rs = dt_ln_rstd(warp_sum_checked(part), D);
            for (int l = 0; l < DT_GPT_LN_LANES; l++)
                dt_ln_lane_out(ey + r * D, xr, gamma, beta, m, rs, D, l);
            CHECK(memcmp(&m, &mean[r], 4) == 0 && memcmp(&rs, &rstd[r], 4) == 0);
            for (int l = 0; l < DT_GPT_LN_LANES; l++)
                dt_ln_lane_grad_sums(&part[l], &part2[l], dyr, xr, m, rs, gamma, D, l);
            const float m1 = dt_rn_div(warp_sum_checked(part), (float)D);
            const float m2 = dt_rn_div(warp_sum_checked(part2), (float)D);
            for (int l = 0; l < DT_GPT_LN_LANES; l++)
                dt_ln_lane_grad_out(edx + r * D, egx + r * D, dyr, xr, m, rs, gamma, m1, m2, D, l,
                                    true);
            float plain = 0.0f; /* the negative control: the sum in index order */
            for (int64_t i = 0; i < D; i++) plain += xr[i];
            const float pm = dt_ln_mean(plain, D);
            plain_differs += memcmp(&pm, &m, 4) != 0;
        }
        CHECK(same_bits(y, ey, n, "layernorm y, warp emulation"));
        CHECK(same_bits(dx, edx, n, "layernorm dx, warp emulation"));
        CHECK(same_bits(gx, egx, n, "layernorm gx, warp emulation"));
        if (D == 384) {
            fprintf(stderr, "D 384: %d of %lld rows' means differ summed in index order\n",
                    plain_differs, (long long)R);
            CHECK(plain_differs > 0);
        }
        free(x);
        free(dy);
        free(y);
        free(ey);
        free(dx);
        free(edx);
        free(gx);
        free(egx);
        free(gamma);
        free(beta);
    }
    dt_backend_destroy(be);
}

/* ---- 2b. attention's key tiles ------------------------------------------------------------ */

/* The CUDA backend's shared-memory forward (attention_forward_tiled_kernel, nets/cuda/attention.cu)
 * on the host: per (b, h, query tile) a "block" whose "threads" are the tile's rows; for each
 * key tile up to the block's own, the tile's keys and values copied into ks and vs (as the
 * block loads shared memory), then each row that reaches the tile runs dt_attn_tile on the
 * copies; then dt_attn_row_finish. */
static void emulate_tiled_forward(float *y, float *att, const float *qkv, int64_t B, int64_t T,
                                  int64_t H, int64_t D, bool portable)
{
    /* the kernel's schedule with each row's query and sums in "shared memory": element j of
     * row x at [j][x], TL apart (dt_attn_tile_at, dt_attn_row_finish_at) */
    enum { TL = DT_GPT_ATTN_TILE };
    const int64_t hd = D / H, nq = (T + TL - 1) / TL;
    const float scale = dt_gpt_attn_scale(hd);
    float *ks = dt_xmalloc((size_t)(TL * hd) * sizeof *ks),
          *vs = dt_xmalloc((size_t)(TL * hd) * sizeof *vs),
          *qs = dt_xmalloc((size_t)(TL * hd) * sizeof *qs),
          *as = dt_xmalloc((size_t)(TL * hd) * sizeof *as);
    for (int64_t item = 0; item < B * H * nq; item++) {
        const int64_t qt = item % nq, bh = item / nq, h = bh % H, b = bh / H;
        const float *k0 = qkv + b * T * 3 * D + D + h * hd;
        float m[TL], l[TL];
        for (int x = 0; x < TL; x++) {
            m[x] = -INFINITY;
            l[x] = 0.0f;
            const int64_t t = qt * TL + x;
            if (t < T)
                for (int64_t j = 0; j < hd; j++) {
                    as[j * TL + x] = 0.0f;
                    qs[j * TL + x] = qkv[(b * T + t) * 3 * D + h * hd + j];
                }
        }
        for (int64_t s0 = 0; s0 <= qt * TL; s0 += TL) {
            const int64_t rows = T - s0 < TL ? T - s0 : TL;
            for (int64_t e = 0; e < rows * hd; e++) {
                const int64_t r = e / hd, j = e - r * hd;
                ks[e] = k0[(s0 + r) * 3 * D + j];
                vs[e] = k0[(s0 + r) * 3 * D + D + j];
            }
            for (int x = 0; x < TL; x++) {
                const int64_t t = qt * TL + x;
                if (t >= T || t < s0) continue;
                const int64_t n = t + 1 - s0 < TL ? t + 1 - s0 : TL;
                dt_attn_tile_at(as + x, TL, &m[x], &l[x], att + (bh * T + t) * T + s0, qs + x, TL,
                                ks, hd, vs, hd, n, hd, scale, portable);
            }
        }
        for (int x = 0; x < TL; x++) {
            const int64_t t = qt * TL + x;
            if (t < T)
                dt_attn_row_finish_at(y + (b * T + t) * D + h * hd, as + x, TL,
                                      att + (bh * T + t) * T, m[x], l[x], t, T, hd, portable);
        }
    }
    free(ks), free(vs), free(qs), free(as);
}

/* The CUDA backend's tiled backward (attention_dkdv_tiled_kernel and attention_dq_tiled_
 * kernel) on the host, from dS and the weights: per (b, h, key tile) each key row u adds the
 * terms t = u, u + 1, ... query tile by query tile from staged copies; per (b, h, query tile)
 * each query row u the terms s = 0 .. u key tile by key tile. */
static void emulate_tiled_backward(float *dqkv, const float *ds, const float *att,
                                   const float *dout, const float *qkv, int64_t B, int64_t T,
                                   int64_t H, int64_t D)
{
    /* the kernels' schedule with the rows' sums in "shared memory" (acc): element j of row x
     * at [j][x], TL apart (dt_attn_grad_term_at), copied to dqkv after the last tile */
    enum { TL = DT_GPT_ATTN_TILE };
    const int64_t hd = D / H, nt = (T + TL - 1) / TL;
    float *xs = dt_xmalloc((size_t)(TL * hd) * sizeof *xs),
          *os = dt_xmalloc((size_t)(TL * hd) * sizeof *os),
          *ak = dt_xmalloc((size_t)(TL * hd) * sizeof *ak),
          *av = dt_xmalloc((size_t)(TL * hd) * sizeof *av);
    for (int64_t item = 0; item < B * H * nt; item++) {
        const int64_t kt = item % nt, bh = item / nt, h = bh % H, b = bh / H;
        for (int64_t e = 0; e < TL * hd; e++) ak[e] = av[e] = 0.0f;
        for (int64_t t0 = kt * TL; t0 < T; t0 += TL) {
            const int64_t rows = T - t0 < TL ? T - t0 : TL;
            for (int64_t e = 0; e < rows * hd; e++) {
                const int64_t r = e / hd, j = e - r * hd;
                xs[e] = qkv[(b * T + t0 + r) * 3 * D + h * hd + j];
                os[e] = dout[(b * T + t0 + r) * D + h * hd + j];
            }
            for (int x = 0; x < TL && kt * TL + x < T; x++) {
                const int64_t u = kt * TL + x;
                for (int64_t r = 0; r < rows; r++) {
                    const int64_t t = t0 + r;
                    if (t < u) continue;
                    dt_attn_grad_term_at(ak + x, TL, ds[(bh * T + t) * T + u], xs + r * hd, hd);
                    dt_attn_grad_term_at(av + x, TL, att[(bh * T + t) * T + u], os + r * hd, hd);
                }
            }
        }
        for (int x = 0; x < TL && kt * TL + x < T; x++) {
            float *dk = dqkv + (b * T + kt * TL + x) * 3 * D + D + h * hd;
            for (int64_t j = 0; j < hd; j++) dk[j] = ak[j * TL + x], dk[j + D] = av[j * TL + x];
        }
        const int64_t qt = kt; /* the dQ kernel's items: the same (bh, tile) pairs */
        for (int64_t e = 0; e < TL * hd; e++) ak[e] = 0.0f;
        for (int64_t s0 = 0; s0 <= qt * TL; s0 += TL) {
            const int64_t rows = T - s0 < TL ? T - s0 : TL;
            for (int64_t e = 0; e < rows * hd; e++) {
                const int64_t r = e / hd, j = e - r * hd;
                xs[e] = qkv[(b * T + s0 + r) * 3 * D + D + h * hd + j];
            }
            for (int x = 0; x < TL && qt * TL + x < T; x++) {
                const int64_t u = qt * TL + x;
                for (int64_t r = 0; r < rows && s0 + r <= u; r++)
                    dt_attn_grad_term_at(ak + x, TL, ds[(bh * T + u) * T + s0 + r], xs + r * hd,
                                         hd);
            }
        }
        for (int x = 0; x < TL && qt * TL + x < T; x++)
            for (int64_t j = 0; j < hd; j++)
                dqkv[(b * T + qt * TL + x) * 3 * D + h * hd + j] = ak[j * TL + x];
    }
    free(xs), free(os), free(ak), free(av);
}

/* Attention's online softmax over key tiles of DT_GPT_ATTN_TILE (`portable`'s definition), on
 * ragged shapes -- context not a multiple of the tile (70: tiles of 32, 32, 6), exactly one
 * tile, one row, one head, head widths of 8, 32 and 6: the CPU op equals the double-precision
 * reference within its bound and the GPU's shared-memory schedule emulated on the host bit for bit
 * (output and weights), at strict and portable math (fast is the library path:
 * attention_library_path); the backward through the tiled forward against central differences of
 * the double forward across tile boundaries. Negative control: the same rows as one tile (the
 * rescaling never happens) give other bits -- the tile size is part of the definition, not a detail
 * of a kernel. */
DT_TEST(attention_tiles)
{
    struct dt_backend *be = cpu(2);
    static const int64_t shapes[][4] = {
        {2, 70, 3, 24}, {1, 32, 2, 16}, {1, 1, 1, 8},
        {3, 37, 1, 8},  {1, 40, 2, 64}, /* hd 32, the GPTs': four vectors a row in the CPU's
                                           registers */
        {1, 35, 1, 64}, {1, 50, 2, 48}, /* hd 64 and 24: eight and three vectors a row */
        {1, 9, 2, 12}};                 /* hd 6: not whole vectors, the CPU's other loop */
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        const int64_t B = shapes[si][0], T = shapes[si][1], H = shapes[si][2], D = shapes[si][3];
        const int64_t hd = D / H, n_qkv = B * T * 3 * D, n_att = B * H * T * T;
        float *qkv = dt_xmalloc((size_t)n_qkv * sizeof *qkv);
        float *o = dt_xmalloc((size_t)(B * T * D) * sizeof *o),
              *eo = dt_xmalloc((size_t)(B * T * D) * sizeof *eo);
        float *att = dt_xmalloc((size_t)n_att * sizeof *att),
              *eatt = dt_xmalloc((size_t)n_att * sizeof *eatt);
        fill(qkv, n_qkv, 2.5);
        for (int lv = 0; lv < 2; lv++) { /* libm's exp and the own one (fast: the library) */
            struct dt_policy pol = level(lv ? DT_LEVEL_PORTABLE : DT_LEVEL_RUN_TO_RUN);
            if (!lv) pol.math = DT_MATH_STRICT; /* run_to_run's own kernels with libm's exp */
            CHECK_INT_EQ(dt_attention_forward(be, o, att, qkv, B, T, H, D, &pol), DT_OK);
            emulate_tiled_forward(eo, eatt, qkv, B, T, H, D, dt_math_portable(&pol));
            CHECK(same_bits(o, eo, B * T * D, "tiled schedule's output"));
            CHECK(same_bits(att, eatt, n_att, "tiled schedule's weights"));
            /* the backward's tiled schedule: the CPU op's dqkv from its dS and weights */
            float *dout = dt_xmalloc((size_t)(B * T * D) * sizeof *dout);
            float *dq = dt_xmalloc((size_t)n_qkv * sizeof *dq),
                  *edq = dt_xmalloc((size_t)n_qkv * sizeof *edq);
            float *ds = dt_xmalloc((size_t)n_att * sizeof *ds);
            fill(dout, B * T * D, 1.0);
            CHECK_INT_EQ(dt_attention_backward(be, dq, ds, dout, att, qkv, B, T, H, D, &pol),
                         DT_OK);
            for (int64_t i = 0; i < n_qkv; i++) edq[i] = NAN; /* every element written */
            emulate_tiled_backward(edq, ds, att, dout, qkv, B, T, H, D);
            CHECK(same_bits(dq, edq, n_qkv, "tiled backward's dqkv"));
            /* ... and its dS the shared function's, row by row */
            float *eds = dt_xmalloc((size_t)n_att * sizeof *eds);
            for (int64_t b = 0; b < B; b++)
                for (int64_t h = 0; h < H; h++)
                    for (int64_t t = 0; t < T; t++) {
                        const int64_t r = ((b * H + h) * T + t) * T;
                        dt_attn_row_dscores(eds + r, att + r, dout, qkv, b, t, h, T, D, hd,
                                            dt_gpt_attn_scale(hd), false);
                    }
            CHECK(same_bits(ds, eds, n_att, "backward's dS"));
            free(eds);
            free(dout);
            free(dq);
            free(edq);
            free(ds);
            for (int64_t b = 0; b < B; b++) {
                double *qd = dt_xmalloc((size_t)(T * 3 * D) * sizeof *qd);
                double *od = dt_xmalloc((size_t)(T * D) * sizeof *od);
                for (int64_t i = 0; i < T * 3 * D; i++) qd[i] = qkv[b * T * 3 * D + i];
                attn_ref(od, qd, T, D, H);
                check_close("tiled attention out", o + b * T * D, od, T * D, 1e-5, 1e-5);
                free(qd);
                free(od);
            }
        }
        if (T > DT_GPT_ATTN_TILE) { /* negative control: row t as one tile of t + 1 keys */
            const float scale = dt_gpt_attn_scale(hd);
            int differ = 0;
            float *row = dt_xmalloc((size_t)hd * sizeof *row),
                  *sc = dt_xmalloc((size_t)T * sizeof *sc);
            for (int64_t t = DT_GPT_ATTN_TILE; t < T; t++) {
                /* dt_attn_tile's arithmetic over all t + 1 keys at once (it takes at most a
                 * tile): one maximum, no rescaling */
                const float *q = qkv + t * 3 * D, *k0 = qkv + D, *v0 = qkv + 2 * D;
                float m = -INFINITY, l = 0.0f;
                for (int64_t s_ = 0; s_ <= t; s_++) {
                    sc[s_] = dt_attn_score(q, k0 + s_ * 3 * D, hd, scale);
                    if (sc[s_] > m) m = sc[s_];
                }
                for (int64_t s_ = 0; s_ <= t; s_++) {
                    sc[s_] = dt_gpt_exp(sc[s_] - m, true);
                    l += sc[s_];
                }
                for (int64_t j = 0; j < hd; j++) {
                    float a = 0.0f;
                    for (int64_t s_ = 0; s_ <= t; s_++) a += dt_rn_mul(sc[s_], v0[s_ * 3 * D + j]);
                    row[j] = dt_rn_div(a, l);
                }
                differ += memcmp(row, eo + t * D, (size_t)hd * sizeof *row) != 0;
            }
            fprintf(stderr, "T %lld: %d of %lld rows beyond the first tile differ as one tile\n",
                    (long long)T, differ, (long long)(T - DT_GPT_ATTN_TILE));
            CHECK(differ > 0);
            free(row);
            free(sc);
        }
        free(qkv);
        free(o);
        free(eo);
        free(att);
        free(eatt);
    }
    /* the backward through the tiled forward, across tile boundaries (T 40: tiles 32, 8) */
    enum { T = 40, AD = 8, AH = 2 };
    static float qkv[T * 3 * AD], o[T * AD], att[AH * T * T], dout[T * AD], dqkv[T * 3 * AD],
        ds[AH * T * T];
    fill(qkv, T * 3 * AD, 1.5);
    fill(dout, T * AD, 1.0);
    const struct dt_policy pol = level(DT_LEVEL_PORTABLE);
    CHECK_INT_EQ(dt_attention_forward(be, o, att, qkv, 1, T, AH, AD, &pol), DT_OK);
    CHECK_INT_EQ(dt_attention_backward(be, dqkv, ds, dout, att, qkv, 1, T, AH, AD, &pol), DT_OK);
    static double dref[T * 3 * AD];
    attn_grad_ref(dref, qkv, dout, T, AD, AH);
    check_close("tiled attention dqkv", dqkv, dref, T * 3 * AD, 1e-4, 1e-3);
    dt_backend_destroy(be);
}

DT_TEST(gradients_match_double_reference)
{
    check_model_gradients(true, DT_LEVEL_PORTABLE, 2, 0, -1, false);
    check_model_gradients(false, DT_LEVEL_PORTABLE, 1, 0, -1, false);
    check_model_gradients(true, DT_LEVEL_FAST, 2, 0, -1, false);
    check_model_gradients(true, DT_LEVEL_RUN_TO_RUN, 2, 0, -1, false);
    /* dropout: the model's masks are the header's, in forward and (regenerated, kept or
     * walked back) in backward -- fast keeps lfsr's (stored), portable walks lanes back
     * (lfsr), portable with rng philox regenerates them */
    check_model_gradients(true, DT_LEVEL_FAST, 2, 0.3, -1, false);
    check_model_gradients(false, DT_LEVEL_PORTABLE, 2, 0.3, -1, false);
    check_model_gradients(true, DT_LEVEL_PORTABLE, 1, 0.3, DT_RNG_PHILOX, false);
    /* math: exact: every product and attention's sums exact in integers */
    check_model_gradients(true, DT_LEVEL_PORTABLE, 2, 0, -1, true);
}

/* ---- 4. the embedding's scatter-add under `atomics` --------------------------------------- */

DT_TEST(embedding_scatter_controls)
{
    enum { ROWS = 600, V = 256, D = 9 };
    float *dh = dt_xmalloc(ROWS * D * sizeof(float));
    int32_t tok[ROWS];
    fill(dh, ROWS * D, 1.0);
    for (int r = 0; r < ROWS; r++) tok[r] = (r * r + 3 * r) % 5 == 0 ? 32 : (r * 13) % 40;
    float *got[4];
    struct dt_policy fixed = level(DT_LEVEL_RUN_TO_RUN), fl = level(DT_LEVEL_FAST);
    for (int i = 0; i < 4; i++) got[i] = dt_xcalloc(V * D, sizeof(float));
    for (int c = 0; c < 3; c++) { /* fixed point: 1 thread, 3 threads, 2 threads forced */
        struct dt_backend *be = cpu(c == 1 ? 3 : c == 0 ? 1 : 2);
        if (c == 2) CHECK_INT_EQ(dt_backend_set_forced_order(be, 12345), DT_OK);
        CHECK_INT_EQ(dt_embedding_backward(be, got[c], dh, tok, ROWS, V, D, false, &fixed), DT_OK);
        dt_backend_destroy(be);
    }
    CHECK(same_bits(got[0], got[1], V * D, "fixed point, 1 vs 3 threads"));
    CHECK(same_bits(got[0], got[2], V * D, "fixed point, forced order"));
    /* the exact sum rounded once: within half an ulp plus the quantisation of ROWS terms */
    double *ref = dt_xcalloc(V * D, sizeof *ref);
    for (int r = 0; r < ROWS; r++)
        for (int i = 0; i < D; i++) ref[tok[r] * D + i] += dh[r * D + i];
    check_close("fixed-point scatter", got[0], ref, V * D, 1e-12, 1.2e-7);
    /* ... and its bits the definition's, written with fixed_point.h's scalar functions */
    {
        float max_abs = 0.0f;
        for (int i = 0; i < ROWS * D; i++) max_abs = fmaxf(max_abs, fabsf(dh[i]));
        const int shift = dt_fixed_shift_for(max_abs, ROWS);
        int64_t *acc = dt_xcalloc(V * D, sizeof *acc);
        for (int r = 0; r < ROWS; r++)
            for (int i = 0; i < D; i++) {
                int64_t q = 0;
                CHECK(dt_fixed_from_float(&q, dh[r * D + i], shift));
                acc[tok[r] * D + i] += q;
            }
        float *def = dt_xmalloc(V * D * sizeof *def);
        for (int e = 0; e < V * D; e++) def[e] = dt_fixed_to_float(acc[e], shift);
        CHECK(same_bits(got[0], def, V * D, "fixed point against the definition"));
        free(acc), free(def);
    }
    /* float, arrival order: two forced orders give different bits (token 32's rows) */
    float *f1 = dt_xcalloc(V * D, sizeof(float)), *f2 = dt_xcalloc(V * D, sizeof(float));
    struct dt_backend *be = cpu(2);
    CHECK_INT_EQ(dt_backend_set_forced_order(be, 1), DT_OK);
    CHECK_INT_EQ(dt_embedding_backward(be, f1, dh, tok, ROWS, V, D, false, &fl), DT_OK);
    CHECK_INT_EQ(dt_backend_set_forced_order(be, 2), DT_OK);
    CHECK_INT_EQ(dt_embedding_backward(be, f2, dh, tok, ROWS, V, D, false, &fl), DT_OK);
    CHECK(memcmp(f1, f2, V * D * sizeof(float)) != 0);
    check_close("float scatter", f1, ref, V * D, 1e-5, 1e-4);
    /* accumulate adds onto what is there */
    for (int i = 0; i < V * D; i++) f1[i] = 1.0f;
    CHECK_INT_EQ(dt_embedding_backward(be, f1, dh, tok, ROWS, V, D, true, &fixed), DT_OK);
    for (int i = 0; i < V * D; i++) CHECK(f1[i] == 1.0f + got[0][i]);
    /* a token outside the vocabulary is refused, naming the row */
    tok[5] = 300;
    CHECK_INT_EQ(dt_embedding_backward(be, f1, dh, tok, ROWS, V, D, false, &fixed), DT_ERR_DATA);
    struct dt_error e;
    CHECK(dt_backend_take_op_error(be, &e));
    CHECK_CONTAINS(e.msg, "token 300 at row 5");
    dt_backend_destroy(be);
    for (int i = 0; i < 4; i++) free(got[i]);
    free(f1), free(f2), free(ref), free(dh);
}

/* ---- 5. AdamW and the learning-rate schedule ---------------------------------------------- */

DT_TEST(adamw_and_schedule)
{
    struct dt_backend *be = cpu(2);
    enum { N = 50 };
    float w[N], m[N] = {0}, v[N] = {0}, g[N];
    double wd[N], md[N] = {0}, vd[N] = {0};
    fill(w, N, 1.0);
    for (int i = 0; i < N; i++) wd[i] = w[i];
    const struct dt_policy pol = level(DT_LEVEL_PORTABLE);
    const double lr = 0.01, b1 = 0.9, b2 = 0.99, eps = 1e-8, decay = 0.1;
    for (int t = 1; t <= 20; t++) {
        fill(g, N, 1.0);
        const struct dt_adamw_step s = {.lr = (float)lr,
                                        .beta1 = (float)b1,
                                        .beta2 = (float)b2,
                                        .eps = (float)eps,
                                        .weight_decay = (float)decay,
                                        .bc1 = (float)(1 - pow(b1, t)),
                                        .bc2 = (float)(1 - pow(b2, t))};
        CHECK_INT_EQ(dt_adamw_update(be, w, m, v, g, N, &s, &pol), DT_OK);
        for (int i = 0; i < N; i++) { /* torch.optim.AdamW, in double */
            wd[i] -= lr * decay * wd[i];
            md[i] = b1 * md[i] + (1 - b1) * g[i];
            vd[i] = b2 * vd[i] + (1 - b2) * g[i] * g[i];
            wd[i] -= lr * (md[i] / (1 - pow(b1, t))) / (sqrt(vd[i] / (1 - pow(b2, t))) + eps);
        }
    }
    check_close("adamw w", w, wd, N, 1e-6, 1e-5);
    dt_backend_destroy(be);
    struct dt_sgd_options o = {.lr = 0.1f, .warmup = 10, .total_steps = 110, .cosine = true};
    CHECK_NEAR(dt_model_lr(&o, 1), 0.01, 1e-8);
    CHECK_NEAR(dt_model_lr(&o, 10), 0.1, 1e-8);
    CHECK_NEAR(dt_model_lr(&o, 11), 0.1, 1e-8); /* the first after the warm-up: all of lr */
    CHECK_NEAR(dt_model_lr(&o, 61), 0.05, 1e-7);
    /* the last step still trains (probe round three: it had lr 0, so a 1-step cosine run
     * trained nothing): (1 + cos(pi 99/100)) / 2 of lr */
    CHECK_NEAR(dt_model_lr(&o, 110), 0.1 * 0.5 * (1.0 + cos(M_PI * 0.99)), 1e-9);
    CHECK(dt_model_lr(&o, 110) > 0.0f);
    const struct dt_sgd_options one = {.lr = 0.1f, .total_steps = 1, .cosine = true};
    CHECK_NEAR(dt_model_lr(&one, 1), 0.1, 1e-8);
    o.cosine = false;
    CHECK_NEAR(dt_model_lr(&o, 60), 0.1, 1e-8);
    o.warmup = 0;
    CHECK_NEAR(dt_model_lr(&o, 1), 0.1, 1e-8);
}

/* The global norm under each `reduction` against a double sum; fixed and exact the same
 * bits at 1 and 3 threads and under forced orders; unordered under two forced orders
 * differs (the negative control); clip_scale is dt_clip_coef's factor. */
DT_TEST(clip_norm_controls)
{
    enum { NT = 3 };
    const int64_t n[NT] = {70001, 33, 4099};
    float *g[NT];
    double ref = 0;
    for (int i = 0; i < NT; i++) {
        g[i] = dt_xmalloc((size_t)n[i] * sizeof(float));
        fill(g[i], n[i], i == 1 ? 3.0 : 1.0);
        for (int64_t k = 0; k < n[i]; k++) ref += (double)g[i][k] * g[i][k];
    }
    const enum dt_level lv[3] = {DT_LEVEL_FAST, DT_LEVEL_RUN_TO_RUN, DT_LEVEL_PORTABLE};
    for (int l = 0; l < 3; l++) {
        const struct dt_policy pol = level(lv[l]);
        float got[4];
        for (int c = 0; c < 4; c++) { /* 1 thread, 3 threads, 2 threads forced twice */
            struct dt_backend *be = cpu(c == 0 ? 1 : c == 1 ? 3 : 2);
            if (c >= 2) CHECK_INT_EQ(dt_backend_set_forced_order(be, (uint64_t)c), DT_OK);
            CHECK_INT_EQ(dt_grad_norm(be, &got[c], (const float *const *)g, n, NT, &pol), DT_OK);
            dt_backend_destroy(be);
        }
        CHECK_NEAR(got[0], ref, 1e-5 * ref);
        if (lv[l] == DT_LEVEL_FAST) {
            CHECK(got[2] != got[3]); /* the order matters, forced */
        } else {
            CHECK(got[0] == got[1] && got[0] == got[2] && got[0] == got[3]);
        }
        if (lv[l] == DT_LEVEL_PORTABLE) CHECK(got[0] == (float)ref); /* exact, rounded once */
    }
    struct dt_backend *be = cpu(2);
    const struct dt_policy pol = level(DT_LEVEL_PORTABLE);
    float v[5] = {1, -2, 3, 0, 4}, ns = 100.0f; /* norm 10: scaled by 5 / (10 + 1e-6) */
    CHECK_INT_EQ(dt_clip_scale(be, v, 5, &ns, 5.0f, &pol), DT_OK);
    const float f = dt_clip_coef(100.0f, 5.0f);
    CHECK(f < 0.5f && f > 0.4999f && v[1] == -2.0f * f && v[4] == 4.0f * f);
    ns = 1.0f; /* norm 1 below 5: unchanged */
    CHECK_INT_EQ(dt_clip_scale(be, v, 5, &ns, 5.0f, &pol), DT_OK);
    CHECK(v[1] == -2.0f * f);
    dt_backend_destroy(be);
    for (int i = 0; i < NT; i++) free(g[i]);
}

/* ---- 6. the text dataset ----------------------------------------------------------------- */

/* ---- dropout masks (determinism/dropout.h) -------------------------------------------------- */

enum { DR_ROWS = 48, DR_W = 37, DR_N = DR_ROWS * DR_W };

/* The op on rows [0, rows) of x whose first row is global row row0, in `mode` (lfsr: lanes
 * seeded here for those rows, then walked forwards; backward walks them back too, into
 * *back). */
static void drop_rows(struct dt_backend *be, float *y, const float *x, int64_t rows, int64_t row0,
                      enum dt_dropout_mode mode, uint32_t site, float *back)
{
    const struct dt_policy pol = level(DT_LEVEL_PORTABLE);
    struct dt_dropout_site s = {.mode = mode,
                                .stream = dt_dropout_stream(99, 4, site, 2),
                                .row0 = row0,
                                .threshold = 0x4ccccccdu, /* p = 0.3 */
                                .scale = (float)(1.0 / 0.7)};
    struct dt_xoro lanes[DR_ROWS];
    uint8_t keep[DR_N];
    const bool lfsr = mode == DT_DROPOUT_LFSR_FORWARD, stored = mode == DT_DROPOUT_KEEP;
    if (lfsr || stored) CHECK_INT_EQ(dt_dropout_seed(be, lanes, rows, row0, 99, 4, 2, &pol), DT_OK);
    CHECK_INT_EQ(dt_dropout(be, y, x, stored ? keep : NULL, lfsr || stored ? lanes : NULL, rows,
                            DR_W, &s, &pol),
                 DT_OK);
    if (!back) return;
    s.mode = lfsr ? DT_DROPOUT_LFSR_BACKWARD : stored ? DT_DROPOUT_STORED : mode;
    CHECK_INT_EQ(
        dt_dropout(be, back, x, stored ? keep : NULL, lfsr ? lanes : NULL, rows, DR_W, &s, &pol),
        DT_OK);
    if (lfsr) /* walked back: every lane at its seed state */
        for (int64_t r = 0; r < rows; r++)
            CHECK(dt_xoro_equal(lanes[r], dt_dropout_lane_seed(99, 4, 2, (uint64_t)(row0 + r))));
}

/* The CUDA kernel's philox schedule (nets/cuda/activation.cu, dropout_philox_kernel): a thread a
 * Philox block of the whole site, in any order, gives every element the word an element-wise
 * reference draws for it (block e / 4, word e % 4), for sites starting mid-block and widths
 * not a multiple of 4, in place too; the row-by-row range function agrees. */
DT_TEST(dropout_philox_blocks_any_order)
{
    const struct dt_philox_stream st = dt_dropout_stream(7, 3, 1, 0);
    const uint32_t thr = 0x4ccccccdu;
    const float scale = (float)(1.0 / 0.7);
    static const int64_t shapes[][3] = {{0, 5, 8}, {3, 7, 13}, {1, 1, 1}, {10, 4, 30}};
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        const int64_t row0 = shapes[k][0], rows = shapes[k][1], W = shapes[k][2], n = rows * W;
        const int64_t e0 = row0 * W;
        float *x = dt_xmalloc((size_t)n * 4), *ref = dt_xmalloc((size_t)n * 4),
              *y = dt_xmalloc((size_t)n * 4), *rows_y = dt_xmalloc((size_t)n * 4);
        fill(x, n, 3.0);
        for (int64_t i = 0; i < n; i++) { /* element-wise: its block's word */
            const uint64_t e = (uint64_t)(e0 + i);
            uint32_t w[4];
            dt_philox_block(w, &st, e >> 2);
            ref[i] = dt_dropout_apply(x[i], dt_dropout_keeps(w[e & 3], thr), scale);
        }
        uint64_t q0;
        const uint64_t blocks = dt_dropout_philox_blocks(e0, n, &q0);
        CHECK(blocks >= (uint64_t)(n + 3) / 4 && blocks <= (uint64_t)(n + 3) / 4 + 1);
        memcpy(y, x, (size_t)n * 4); /* in place, blocks last to first */
        for (uint64_t j = blocks; j-- > 0;)
            dt_dropout_philox_block(y, y, e0, n, q0 + j, &st, thr, scale);
        CHECK(memcmp(y, ref, (size_t)n * 4) == 0);
        for (int64_t r = 0; r < rows; r++)
            dt_dropout_philox_range(rows_y + r * W, x + r * W, (row0 + r) * W, W, &st, thr, scale);
        CHECK(memcmp(rows_y, ref, (size_t)n * 4) == 0);
        free(x), free(ref), free(y), free(rows_y);
    }
}

/* The CUDA kernel's lane schedule (nets/cuda/activation.cu, dropout_lane_tiled_kernel): a row's
 * lane walked over tiles of DT_DROPOUT_TILE_COLS columns -- forwards first to last,
 * backwards last to first -- gives the whole-row walk's outputs, keep bytes and final lane,
 * for widths below, at and past a tile, odd ones included, and backwards brings the lane
 * back to its seed. */
DT_TEST(dropout_lane_tiles_match_rows)
{
    enum { TC = DT_DROPOUT_TILE_COLS, MAXW = 400 };
    CHECK(TC % 2 == 0);
    const uint32_t thr = 0x4ccccccdu;
    const float scale = (float)(1.0 / 0.7);
    static const int64_t widths[] = {1, 5, 31, 32, 33, 64, 70, 384, 399};
    static float x[MAXW], yf[MAXW], yt[MAXW], bf[MAXW], bt[MAXW];
    static uint8_t kf[MAXW], kt[MAXW];
    for (size_t k = 0; k < sizeof widths / sizeof widths[0]; k++) {
        const int64_t W = widths[k];
        fill(x, W, 2.0);
        const struct dt_xoro seed = dt_dropout_lane_seed(5, 2, 1, (uint64_t)(17 + k));
        struct dt_xoro lf = seed, lt = seed;
        dt_dropout_lane_forward(yf, x, kf, W, &lf, thr, scale);
        for (int64_t c0 = 0; c0 < W; c0 += TC)
            dt_dropout_lane_forward(yt + c0, x + c0, kt + c0, W - c0 < TC ? W - c0 : TC, &lt, thr,
                                    scale);
        CHECK(memcmp(yf, yt, (size_t)W * 4) == 0);
        CHECK(memcmp(kf, kt, (size_t)W) == 0);
        CHECK(dt_xoro_equal(lf, lt));
        dt_dropout_lane_backward(bf, x, W, &lf, thr, scale);
        for (int64_t c0 = (W - 1) / TC * TC; c0 >= 0; c0 -= TC)
            dt_dropout_lane_backward(bt + c0, x + c0, W - c0 < TC ? W - c0 : TC, &lt, thr, scale);
        CHECK(memcmp(bf, bt, (size_t)W * 4) == 0);
        CHECK(memcmp(bf, yf, (size_t)W * 4) == 0); /* backwards regenerates forward's mask */
        CHECK(dt_xoro_equal(lt, seed));
    }
}

/* Masks are a function of the global row: the op equals the header's functions at 1 and 3
 * threads, backward regenerates forward's mask in every mode, stored keeps lfsr's, the
 * keep rate is 1 - p, and a batch cut in two (as ranks cut it) gets the whole batch's masks
 * -- with a negative control (the second part keyed by its local row) that differs. */
DT_TEST(dropout_masks)
{
    static float x[DR_N], y[DR_N], e[DR_N], back[DR_N], part[DR_N];
    fill(x, DR_N, 2.0);
    for (int threads = 1; threads <= 3; threads += 2) {
        struct dt_backend *be = cpu(threads);
        const struct dt_philox_stream st = dt_dropout_stream(99, 4, 5, 2);
        /* philox: the header's range function per row */
        drop_rows(be, y, x, DR_ROWS, 10, DT_DROPOUT_PHILOX, 5, back);
        for (int64_t r = 0; r < DR_ROWS; r++)
            dt_dropout_philox_range(e + r * DR_W, x + r * DR_W, (10 + r) * DR_W, DR_W, &st,
                                    0x4ccccccdu, (float)(1.0 / 0.7));
        CHECK(same_bits(y, e, DR_N, "philox mask"));
        CHECK(same_bits(back, e, DR_N, "philox mask regenerated"));
        /* lfsr: the lane walk per row; backward rebuilds it */
        drop_rows(be, y, x, DR_ROWS, 10, DT_DROPOUT_LFSR_FORWARD, 5, back);
        for (int64_t r = 0; r < DR_ROWS; r++) {
            struct dt_xoro lane = dt_dropout_lane_seed(99, 4, 2, (uint64_t)(10 + r));
            dt_dropout_lane_forward(e + r * DR_W, x + r * DR_W, NULL, DR_W, &lane, 0x4ccccccdu,
                                    (float)(1.0 / 0.7));
        }
        CHECK(same_bits(y, e, DR_N, "lfsr mask"));
        CHECK(same_bits(back, e, DR_N, "lfsr mask walked back"));
        /* stored: lfsr's mask, kept and replayed */
        drop_rows(be, y, x, DR_ROWS, 10, DT_DROPOUT_KEEP, 5, back);
        CHECK(same_bits(y, e, DR_N, "stored mask"));
        CHECK(same_bits(back, e, DR_N, "stored mask replayed"));
        dt_backend_destroy(be);
    }
    struct dt_backend *be = cpu(2);
    /* the keep rate, over many rows: 1 - p within 1% */
    enum { BIG = 4096 };
    float *ones = dt_xmalloc(BIG * DR_W * sizeof(float)), *yy = dt_xmalloc(BIG * DR_W * 4);
    for (int64_t i = 0; i < BIG * DR_W; i++) ones[i] = 1.0f;
    const struct dt_policy pol = level(DT_LEVEL_PORTABLE);
    for (int lf = 0; lf < 2; lf++) {
        struct dt_dropout_site s = {.mode = lf ? DT_DROPOUT_LFSR_FORWARD : DT_DROPOUT_PHILOX,
                                    .stream = dt_dropout_stream(1, 1, 0, 0),
                                    .threshold = 0x4ccccccdu,
                                    .scale = 1.0f};
        struct dt_xoro *lanes = dt_xmalloc(BIG * sizeof *lanes);
        CHECK_INT_EQ(dt_dropout_seed(be, lanes, BIG, 0, 1, 1, 0, &pol), DT_OK);
        CHECK_INT_EQ(dt_dropout(be, yy, ones, NULL, lf ? lanes : NULL, BIG, DR_W, &s, &pol), DT_OK);
        double kept = 0;
        for (int64_t i = 0; i < BIG * DR_W; i++) kept += yy[i];
        kept /= (double)(BIG * DR_W);
        if (fabs(kept - 0.7) > 0.01)
            fprintf(stderr, "%s keep rate %.4f\n", lf ? "lfsr" : "philox", kept);
        CHECK(fabs(kept - 0.7) <= 0.01);
        free(lanes);
    }
    free(ones), free(yy);
    /* a batch cut in two: rows [0, 20) at global 10, rows [20, 48) at global 30 */
    static const enum dt_dropout_mode modes[] = {DT_DROPOUT_PHILOX, DT_DROPOUT_LFSR_FORWARD};
    for (int k = 0; k < 2; k++) {
        drop_rows(be, y, x, DR_ROWS, 10, modes[k], 5, NULL);
        drop_rows(be, part, x, 20, 10, modes[k], 5, NULL);
        drop_rows(be, part + 20 * DR_W, x + 20 * DR_W, DR_ROWS - 20, 30, modes[k], 5, NULL);
        CHECK(same_bits(part, y, DR_N, "split batch mask"));
        /* negative control: the second part keyed by its local row numbers */
        drop_rows(be, part + 20 * DR_W, x + 20 * DR_W, DR_ROWS - 20, 10, modes[k], 5, NULL);
        CHECK(memcmp(part + 20 * DR_W, y + 20 * DR_W, (DR_ROWS - 20) * DR_W * 4) != 0);
        /* another site, another mask */
        drop_rows(be, part, x, DR_ROWS, 10, modes[k], 6, NULL);
        if (k == 0) CHECK(memcmp(part, y, sizeof y) != 0);
    }
    dt_backend_destroy(be);
}

static void write_bytes(const char *path, const char *text, size_t n)
{
    FILE *f = fopen(path, "wb");
    DT_ASSERT(f && fwrite(text, 1, n, f) == n && fclose(f) == 0);
}

DT_TEST(text_dataset)
{
    const char *dir = TMP "text";
    char cmd[512], path[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", dir, dir);
    CHECK_INT_EQ(system(cmd), 0);
    /* name order: a then b; c.dat, c.u8 and .hidden left out */
    char a[100], b[60];
    for (int i = 0; i < 100; i++) a[i] = (char)('a' + i % 26);
    for (int i = 0; i < 60; i++) b[i] = (char)('A' + i % 26);
    snprintf(path, sizeof path, "%s/b", dir), write_bytes(path, b, 60);
    snprintf(path, sizeof path, "%s/a", dir), write_bytes(path, a, 100);
    snprintf(path, sizeof path, "%s/c.dat", dir), write_bytes(path, "zzzz", 4);
    snprintf(path, sizeof path, "%s/c.u8", dir), write_bytes(path, "zzzz", 4);
    snprintf(path, sizeof path, "%s/.hidden", dir), write_bytes(path, "zzzz", 4);
    struct dt_dataset ds;
    struct dt_error err;
    CHECK_INT_EQ(dt_dataset_load_text(&ds, dir, 4, 0, 0, &err), DT_OK);
    /* 160 bytes: validation the last 16, training the first 144: 140 windows of 5 */
    CHECK_INT_EQ(ds.train.n, 140);
    CHECK_INT_EQ(ds.train.dim, 5);
    CHECK_INT_EQ(ds.train.stride, 1);
    CHECK_INT_EQ(ds.train.n_classes, 256);
    for (int64_t i = 0; i < ds.train.n; i++)
        for (int f = 0; f < 5; f++) {
            const int64_t at = i + f;
            const char want = at < 100 ? a[at] : b[at - 100];
            CHECK(dt_split_row(&ds.train, i)[f] == (float)(unsigned char)want);
        }
    CHECK(ds.train.y[0] == (uint8_t)a[4]);
    /* validation: 16 bytes, windows at 0, 4, 8: (16 - 1) / 4 = 3, materialised */
    CHECK_INT_EQ(ds.test.n, 3);
    CHECK_INT_EQ(ds.test.stride, 5);
    for (int64_t i = 0; i < 3; i++)
        for (int f = 0; f < 5; f++)
            CHECK(ds.test.x[i * 5 + f] == (float)(unsigned char)b[44 + i * 4 + f]);
    dt_dataset_free(&ds);
    CHECK_INT_EQ(dt_dataset_load_text(&ds, dir, 4, 10, 2, &err), DT_OK);
    CHECK_INT_EQ(ds.train.n, 10);
    CHECK_INT_EQ(ds.test.n, 2);
    dt_dataset_free(&ds);
    /* refusals name the path */
    CHECK_INT_EQ(dt_dataset_load_text(&ds, dir, 20, 0, 0, &err), DT_ERR_DATA);
    CHECK_CONTAINS(err.msg, "too short for model.context 20");
    CHECK_CONTAINS(err.msg, dir);
    snprintf(path, sizeof path, "%s/missing", dir);
    CHECK_INT_EQ(dt_dataset_load_text(&ds, path, 4, 0, 0, &err), DT_ERR_IO);
    CHECK_CONTAINS(err.msg, path);
    snprintf(path, sizeof path, "%s/empty", dir);
    write_bytes(path, "", 0);
    CHECK_INT_EQ(dt_dataset_load_text(&ds, path, 4, 0, 0, &err), DT_ERR_DATA);
    CHECK_CONTAINS(err.msg, "is empty");
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s' && touch '%s/x.dat'", dir, dir, dir);
    CHECK_INT_EQ(system(cmd), 0);
    CHECK_INT_EQ(dt_dataset_load_text(&ds, dir, 4, 0, 0, &err), DT_ERR_IO);
    CHECK_CONTAINS(err.msg, "no readable file");
}

/* ---- 7. end to end ---------------------------------------------------------------------- */

/* A corpus of made-up sentences (the same bytes scripts/cross_device.sh's GPT reads): the
 * words "the a cat sat on mat and dog ran far. why? so" drawn 6,000 times by a 64-bit LCG. */
#define CORPUS DT_TEST_DATA_DIR "/gpt_corpus.txt"
#define CONFIG DT_TEST_DATA_DIR "/gpt_tiny.yaml"

static int run_gpt(const char *dir, const char *extra)
{
    return dt_run_capture(out, sizeof out,
                          "rm -rf '%s' && DETRAIN_GNUPLOT=none '%s' run '%s' --out '%s' --quiet "
                          "--set dataset.path='%s' %s",
                          dir, EXE, CONFIG, dir, CORPUS, extra);
}

static char *last_digest(const char *dir, const char *rel)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s/trace.csv", dir, rel);
    char *t = dt_read_file(path, NULL);
    if (!t) return NULL;
    size_t n = strlen(t);
    while (n > 0 && t[n - 1] == '\n') t[--n] = '\0';
    char *line = strrchr(t, '\n');
    char *r = dt_xmalloc(80);
    snprintf(r, 80, "%s", line ? line + 1 : t);
    free(t);
    return r;
}

static bool files_same(const char *a_dir, const char *b_dir, const char *rel)
{
    char a[1024], b[1024];
    snprintf(a, sizeof a, "%s/%s/trace.csv", a_dir, rel);
    snprintf(b, sizeof b, "%s/%s/trace.csv", b_dir, rel);
    return dt_files_equal(a, b);
}

/* The n replicas of `cell` in dir have one trace. */
static void check_replicas_identical(const char *dir, const char *cell, int n)
{
    for (int r = 1; r < n; r++) {
        char pa[1024], pb[1024];
        snprintf(pa, sizeof pa, "%s/%s/replica-0/trace.csv", dir, cell);
        snprintf(pb, sizeof pb, "%s/%s/replica-%d/trace.csv", dir, cell, r);
        if (!dt_files_equal(pa, pb)) fprintf(stderr, "%s: replica %d differs\n", cell, r);
        CHECK(dt_files_equal(pa, pb));
    }
}

/* explain of step 1 between the two replicas of dir's cell run_to_run+atomics=float with
 * the embedding's scatter forced: it names that op and atomics: float. */
static void check_explain_forced_scatter(const char *dir)
{
    const int rc = dt_run_capture(out, sizeof out,
                                  "DETRAIN_TEST_EXPLAIN_FORCE=embedding_backward '%s' explain "
                                  "'%s/run_to_run+atomics=float/replica-0' "
                                  "'%s/run_to_run+atomics=float/replica-1' --quiet --step 1",
                                  EXE, dir, dir);
    if (rc != 1) fprintf(stderr, "explain exit %d:\n%s\n", rc, out);
    CHECK_INT_EQ(rc, 1);
    CHECK_CONTAINS(out, "embedding_backward, layer wte, tensor wte gradient, phase backward");
    CHECK_CONTAINS(out, "caused by atomics: float");
}

/* The traces of two cells of one result are the same file? */
static bool files_same_cells(const char *dir, const char *a, const char *b)
{
    char pa[1024], pb[1024];
    snprintf(pa, sizeof pa, "%s/%s/replica-0/trace.csv", dir, a);
    snprintf(pb, sizeof pb, "%s/%s/replica-0/trace.csv", dir, b);
    return dt_files_equal(pa, pb);
}

DT_TEST(levels_and_threads)
{
    const char *d2 = TMP "lv2", *d1 = TMP "lv1";
    int rc = run_gpt(d2, "");
    if (rc != 0) fprintf(stderr, "%s\n", out);
    CHECK_INT_EQ(rc, 0);
    rc = run_gpt(d1, "--set backend.threads=1");
    CHECK_INT_EQ(rc, 0);
    static const char *const cells[] = {"run_to_run", "portable"};
    for (int c = 0; c < 2; c++) {
        char r0[256];
        snprintf(r0, sizeof r0, "%s/replica-0", cells[c]);
        check_replicas_identical(d2, cells[c], 2);
        /* 1 thread == 2 threads: portable's promise; run_to_run's is one thread count (its
         * library products' slices follow the count) */
        if (c == 1) CHECK(files_same(d1, d2, r0));
    }
    /* portable and run_to_run: the same model at the end? Not promised; portable's digest
     * differs from fast's (different arithmetic) */
    char *a = last_digest(d2, "portable/replica-0"), *b = last_digest(d2, "fast/replica-0");
    CHECK(a && b && strcmp(a, b) != 0);
    free(a), free(b);
    /* the evaluation: nats per byte, below ln 256 after training */
    char path[1024];
    snprintf(path, sizeof path, "%s/portable/replica-0/metrics.csv", d2);
    char *m = dt_read_file(path, NULL);
    CHECK(m != NULL);
    if (m) {
        double loss = 0;
        const char *row = strstr(m, "\n");
        CHECK(row && sscanf(row + 1, "%*[^,],%lf", &loss) == 1);
        CHECK(loss > 0.5 && loss < log(256.0));
        free(m);
    }
}

/* A run of `extra` into dir killed after step 7, then --resume'd: both as meant? */
static bool kill_and_resume(const char *dir, const char *extra)
{
    int rc = dt_run_capture(out, sizeof out,
                            "rm -rf '%s' && DETRAIN_TEST_KILL_AFTER_STEP=7 DETRAIN_GNUPLOT=none "
                            "'%s' run '%s' --out '%s' --quiet --set dataset.path='%s' %s",
                            dir, EXE, CONFIG, dir, CORPUS, extra);
    if (rc == 0) return false; /* it was not killed */
    rc = dt_run_capture(out, sizeof out,
                        "DETRAIN_GNUPLOT=none '%s' run '%s' --resume '%s' --quiet "
                        "--set dataset.path='%s' %s",
                        EXE, CONFIG, dir, CORPUS, extra);
    if (rc != 0) fprintf(stderr, "%s\n", out);
    return rc == 0;
}

/* mpirun -np np0..4 of `set` gives the trace of the one-process run `one` in each of the
 * n cells (their replica 0). */
static void check_ranks(const char *one, const char *tag, const char *set, int np0,
                        const char *const *cells, int n)
{
    for (int np = np0; np <= 4; np++) {
        char dir[256];
        snprintf(dir, sizeof dir, TMP "%s_np%d", tag, np);
        int rc = dt_run_capture(out, sizeof out,
                                "rm -rf '%s' && DETRAIN_GNUPLOT=none " DT_MPIRUN
                                " -np %d '%s' run '%s' --out '%s' --quiet --set dataset.path='%s' "
                                "%s",
                                dir, np, EXE, CONFIG, dir, CORPUS, set);
        if (rc != 0) fprintf(stderr, "np %d:\n%s\n", np, out);
        CHECK_INT_EQ(rc, 0);
        for (int c = 0; c < n; c++) {
            char rel[256];
            snprintf(rel, sizeof rel, "%s/replica-0", cells[c]);
            CHECK(files_same(one, dir, rel));
        }
    }
}

DT_TEST(resume_after_kill)
{
    const char *ref = TMP "res_ref", *got = TMP "res_got";
    const char *set = "--set policies=[portable] --set replicas=1 --set train.checkpoint_every=3";
    CHECK_INT_EQ(run_gpt(ref, set), 0);
    CHECK(kill_and_resume(got, set));
    CHECK(files_same(ref, got, "portable/replica-0"));
}

DT_TEST(ranks_independent)
{
    if (!dt_dist_have_mpi()) DT_SKIP("detrain was built without MPI (DETRAIN_MPI)");
    const char *one = TMP "rk1";
    const char *set = "--set policies=[portable] --set replicas=1 --set train.shards=6";
    CHECK_INT_EQ(run_gpt(one, set), 0);
    static const char *const cells[] = {"portable"};
    check_ranks(one, "rk", set, 1, cells, 1);
}

/* model.dropout end to end: under every rng the replicas agree and (portable's) 1 thread
 * gives 2 threads' trace; stored keeps lfsr's masks (the same trace), philox draws others (a
 * different trace: rng acts); a dropping run differs from one without; --resume after
 * SIGKILL continues the same trace (the masks depend on the step, not on the process);
 * with MPI, np 1..4 give the one-process trace under lfsr (portable) and philox. */
DT_TEST(dropout_runs)
{
    const char *set =
        "--set model.dropout=0.2 --set replicas=2 --set train.shards=6 --set "
        "'policies=[portable, {base: portable, rng: philox}, {base: portable, rng: stored}, "
        "run_to_run]'";
    const char *d2 = TMP "dr2", *d1 = TMP "dr1", *nodrop = TMP "dr0";
    char extra[512];
    snprintf(extra, sizeof extra, "%s", set);
    int rc = run_gpt(d2, extra);
    if (rc != 0) fprintf(stderr, "%s\n", out);
    CHECK_INT_EQ(rc, 0);
    snprintf(extra, sizeof extra, "%s --set backend.threads=1", set);
    CHECK_INT_EQ(run_gpt(d1, extra), 0);
    static const char *const cells[] = {"portable", "portable+rng=philox", "portable+rng=stored",
                                        "run_to_run"};
    for (int c = 0; c < 4; c++) {
        char r0[256];
        snprintf(r0, sizeof r0, "%s/replica-0", cells[c]);
        check_replicas_identical(d2, cells[c], 2);
        if (c == 3) continue; /* run_to_run: one thread count's bits (levels_and_threads) */
        if (!files_same(d1, d2, r0)) fprintf(stderr, "%s: 1 and 2 threads differ\n", cells[c]);
        CHECK(files_same(d1, d2, r0));
    }
    CHECK(files_same_cells(d2, "portable", "portable+rng=stored"));
    CHECK(!files_same_cells(d2, "portable", "portable+rng=philox"));
    CHECK_INT_EQ(run_gpt(nodrop, "--set policies=[portable] --set replicas=1 --set train.shards=6"),
                 0);
    char *a = last_digest(d2, "portable/replica-0"), *b = last_digest(nodrop, "portable/replica-0");
    CHECK(a && b && strcmp(a, b) != 0);
    free(a), free(b);
    /* resume after a kill, lfsr (portable) */
    CHECK(kill_and_resume(TMP "dr_res", "--set model.dropout=0.2 --set policies=[portable] --set "
                                        "replicas=1 --set train.shards=6 --set "
                                        "train.checkpoint_every=3"));
    CHECK(files_same(d2, TMP "dr_res", "portable/replica-0"));
}

DT_TEST(dropout_ranks)
{
    if (!dt_dist_have_mpi()) DT_SKIP("detrain was built without MPI (DETRAIN_MPI)");
    const char *one = TMP "drk1";
    const char *set = "--set model.dropout=0.2 --set replicas=1 --set train.shards=6 "
                      "--set 'policies=[portable, {base: portable, rng: philox}]'";
    CHECK_INT_EQ(run_gpt(one, set), 0);
    static const char *const cells[] = {"portable", "portable+rng=philox"};
    check_ranks(one, "drk", set, 2, cells, 2);
}

/* explain on the GPT: with the forced-op hook making the embedding's scatter the one
 * order-dependent op (1 thread, run_to_run with atomics: float), it names that op, wte's
 * gradient and atomics: float. */
DT_TEST(explain_names_scatter)
{
    const char *dir = TMP "explain";
    CHECK_INT_EQ(run_gpt(dir, "--set 'policies=[{base: run_to_run, atomics: float}]' "
                              "--set backend.threads=1 --set train.steps=2"),
                 0);
    check_explain_forced_scatter(dir);
    /* without the hook: at one thread the step runs the same way every time (AdamW's second
     * moment, made at the first step, is restored to none: a stale one made this fail),
     * so explain draws combination orders for every op and finds an atomics-float op (the
     * first in backward: LayerNorm's gamma gradient, a bias-form sum) */
    int rc = dt_run_capture(out, sizeof out,
                            "'%s' explain '%s/run_to_run+atomics=float/replica-0' "
                            "'%s/run_to_run+atomics=float/replica-1' --quiet --step 1",
                            EXE, dir, dir);
    CHECK_INT_EQ(rc, 1);
    CHECK_CONTAINS(out, "caused by atomics: float");
    CHECK(strstr(out, "adamw_update") == NULL);
}

/* detrain export: the step-0 snapshot of a replica folder and a checkpoint as safetensors
 * (header: every tensor's dtype, shape and byte range; values: the snapshot's, byte for
 * byte); detrain batches: B rows per step, windows inside the training split. */
DT_TEST(export_and_batches)
{
    const char *dir = TMP "export";
    CHECK_INT_EQ(run_gpt(dir, "--set policies=[portable] --set replicas=1 "
                              "--set train.checkpoint_every=12"),
                 0);
    const char *st = TMP "step0.safetensors", *ck = TMP "ck.safetensors";
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "rm -f '%s' '%s'", st, ck);
    CHECK_INT_EQ(system(cmd), 0);
    int rc = dt_run_capture(out, sizeof out,
                            "'%s' export '%s/portable/replica-0' --step 0 --safetensors '%s'", EXE,
                            dir, st);
    if (rc != 0) fprintf(stderr, "%s\n", out);
    CHECK_INT_EQ(rc, 0);
    size_t len = 0;
    char *f = dt_read_file(st, &len);
    CHECK(f != NULL && len > 8);
    if (f) {
        uint64_t hl = 0;
        memcpy(&hl, f, 8);
        CHECK(hl % 8 == 0 && 8 + hl < len);
        char *h = dt_xcalloc(1, hl + 1);
        memcpy(h, f + 8, hl);
        CHECK_CONTAINS(h, "\"step\":\"0\"");
        CHECK_CONTAINS(h, "\"model.kind\":\"gpt\"");
        CHECK_CONTAINS(h,
                       "\"wte\":{\"dtype\":\"F32\",\"shape\":[256,16],\"data_offsets\":[0,16384]}");
        CHECK_CONTAINS(h, "\"h1.attn.qkv.weight\":{\"dtype\":\"F32\",\"shape\":[16,48],");
        /* self-describing: the resolved config (heads, context, tying) and the conventions a
         * reader rebuilds the model by, in the metadata (strings, as safetensors wants) */
        CHECK_CONTAINS(h, "\"config\":\"{\\\"name\\\":");
        CHECK_CONTAINS(h, "\\\"heads\\\":");
        CHECK_CONTAINS(h, "\\\"tie_embeddings\\\":");
        CHECK_CONTAINS(h, "\"gpt.conventions\":\"bytes in, 256 classes out;");
        CHECK_CONTAINS(h, "columns q | k | v");
        /* the data: the step-0 snapshot's values in model order */
        char snap[1024], rep[512];
        snprintf(rep, sizeof rep, "%s/portable/replica-0", dir);
        dt_snapshot_path(snap, sizeof snap, rep, 0);
        struct dt_snapshot s;
        struct dt_error err;
        CHECK_INT_EQ(dt_snapshot_read(&s, snap, &err), DT_OK);
        CHECK(len == 8 + hl + (size_t)s.total * 4);
        CHECK(memcmp(f + 8 + hl, s.data, (size_t)s.total * 4) == 0);
        dt_snapshot_free(&s);
        free(h);
        free(f);
    }
    rc = dt_run_capture(out, sizeof out,
                        "'%s' export '%s/portable/replica-0/checkpoint.bin' "
                        "--safetensors '%s'",
                        EXE, dir, ck);
    CHECK_INT_EQ(rc, 0);
    f = dt_read_file(ck, &len);
    CHECK(f && strstr(f + 8, "\"step\":\"12\"") != NULL);
    CHECK(f && strstr(f + 8, "\"config\":\"{") != NULL); /* a checkpoint's too */
    free(f);
    /* refusals: an existing file, a step without a snapshot */
    rc = dt_run_capture(out, sizeof out, "'%s' export '%s/portable/replica-0' --safetensors '%s'",
                        EXE, dir, ck);
    CHECK_INT_EQ(rc, 2);
    CHECK_CONTAINS(out, "exists");
    rc = dt_run_capture(out, sizeof out,
                        "'%s' export '%s/portable/replica-0' --step 5 --safetensors '%s.x'", EXE,
                        dir, ck);
    CHECK_INT_EQ(rc, 2);
    CHECK_CONTAINS(out, "no weight snapshot at step 5");
    rc = dt_run_capture(out, sizeof out,
                        "'%s' export '%s/portable/replica-0' --safetensors '%s/w.safetensors'", EXE,
                        dir, dir);
    CHECK_INT_EQ(rc, 2); /* inside the result it reads: refused, nothing written */
    snprintf(cmd, sizeof cmd, "%s/w.safetensors", dir);
    CHECK(!dt_path_exists(cmd));
    /* batches */
    rc = dt_run_capture(out, sizeof out,
                        "'%s' batches '%s' --steps 3 --set dataset.path='%s' 2>/dev/null", EXE,
                        CONFIG, CORPUS);
    CHECK_INT_EQ(rc, 0);
    CHECK(strncmp(out, "step,row,index\n1,0,", 19) == 0);
    int lines = 0;
    for (const char *p = out; *p; p++) lines += *p == '\n';
    CHECK_INT_EQ(lines, 1 + 3 * 6);
}

/* scripts/gpt_vs_torch.py on the tiny config: the same losses in PyTorch (skipped without
 * PyTorch, as in CI). */
DT_TEST(vs_torch)
{
    static const char *const pythons[] = {"python3", "/usr/bin/python3"};
    const char *py = NULL;
    for (int i = 0; i < 2 && !py; i++)
        if (dt_run_capture(out, sizeof out, "%s -c 'import torch' 2>/dev/null", pythons[i]) == 0)
            py = pythons[i];
    if (!py) DT_SKIP("PyTorch is not installed");
    const char *dir = TMP "vs_torch";
    int rc = dt_run_capture(out, sizeof out,
                            "rm -rf '%s' && %s '%s/scripts/gpt_vs_torch.py' --detrain '%s' "
                            "--config '%s' --steps 12 --out '%s' --set dataset.path='%s'",
                            dir, py, DT_SOURCE_DIR, EXE, CONFIG, dir, CORPUS);
    if (rc != 0) fprintf(stderr, "%s\n", out);
    CHECK_INT_EQ(rc, 0);
    CHECK_CONTAINS(out, "agree");
}

DT_TEST(nonfinite_stops)
{
    const char *dir = TMP "nan";
    int rc = dt_run_capture(out, sizeof out,
                            "rm -rf '%s' && DETRAIN_TEST_POISON=5:h1.ln2.weight:g "
                            "DETRAIN_GNUPLOT=none '%s' run '%s' --out '%s' --quiet "
                            "--set dataset.path='%s' --set policies=[portable] --set replicas=1",
                            dir, EXE, CONFIG, dir, CORPUS);
    CHECK_INT_EQ(rc, 1);
    char path[1024];
    snprintf(path, sizeof path, "%s/portable/replica-0/run.json", dir);
    char *j = dt_read_file(path, NULL);
    CHECK(j != NULL);
    if (j) CHECK_CONTAINS(j, "non-finite gradient in h1.ln2.weight (element 0) at step 5");
    free(j);
}

DT_TEST(refusals)
{
    const char *dir = TMP "refused";
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK_INT_EQ(system(cmd), 0);
    int rc = dt_run_capture(out, sizeof out,
                            "DETRAIN_GNUPLOT=none '%s' run '%s' --out '%s' --quiet "
                            "--set dataset.path=/nonexistent/corpus",
                            EXE, CONFIG, dir);
    CHECK_INT_EQ(rc, 2);
    CHECK_CONTAINS(out, "/nonexistent/corpus");
    struct stat sb;
    CHECK(stat(dir, &sb) != 0); /* nothing written */
    rc = dt_run_capture(out, sizeof out,
                        "'%s' run '%s' --out '%s' --quiet --set dataset.name=fashion-mnist", EXE,
                        CONFIG, dir);
    CHECK_INT_EQ(rc, 2);
    CHECK_CONTAINS(out, "model.kind gpt trains on text");
    CHECK(stat(dir, &sb) != 0);
    rc = dt_run_capture(out, sizeof out, "'%s' run '%s' --out '%s' --quiet --set model.heads=3",
                        EXE, CONFIG, dir);
    CHECK_INT_EQ(rc, 2);
    CHECK_CONTAINS(out, "not a multiple of model.heads");
    rc = dt_run_capture(out, sizeof out,
                        "'%s' run '%s' --out '%s' --quiet --set train.optimizer.momentum=0.5", EXE,
                        CONFIG, dir);
    CHECK_INT_EQ(rc, 2);
    CHECK_CONTAINS(out, "applies to train.optimizer.kind sgd only");
    rc = dt_run_capture(out, sizeof out, "'%s' run '%s' --out '%s' --quiet --set model.dropout=1",
                        EXE, CONFIG, dir);
    CHECK_INT_EQ(rc, 2);
    CHECK_CONTAINS(out, "key 'model.dropout': value 1 is out of range");
    rc = dt_run_capture(out, sizeof out, "'%s' run '%s' --out '%s' --quiet --set model.dropout=0.1",
                        EXE, DT_TEST_DATA_DIR "/config/minimal.yaml", dir);
    CHECK_INT_EQ(rc, 2);
    CHECK_CONTAINS(out, "key 'model.dropout' applies to model.kind gpt only");
    CHECK(stat(dir, &sb) != 0);
}

/* ---- on the GPU (labels gpu and gpt: built and skipped where there is no device; the
 * first-light plan runs them in its gpt stage, apart from the other models' tests) ------- */

/* Model gradients of one step on backend be at policy pol (tiny GPT, dropout p): every
 * parameter's gradient on the host, concatenated; *loss the step's loss. */
static float *gpt_grads(struct dt_backend *be, const struct dt_policy *pol, double p, float *loss,
                        int64_t *count)
{
    const struct dt_gpt_options o = {.context = 9,
                                     .d_model = 16,
                                     .heads = 2,
                                     .layers = 2,
                                     .tie_embeddings = true,
                                     .dropout = p,
                                     .lfsr_check_every = 1};
    enum { B = 5 };
    struct dt_model *m = NULL;
    struct dt_error err;
    DT_ASSERT(dt_gpt_create(&m, be, &o, B, &err) == DT_OK);
    dt_model_init(m, 3, 0);
    float win[B * 10];
    for (int i = 0; i < B * 10; i++) win[i] = (float)((i * 37 + 11) % 256);
    uint8_t y[B] = {0};
    const struct dt_batch batch = {.x = win, .y = y, .row0 = 7};
    dt_model_begin_step(m);
    CHECK_INT_EQ(dt_model_gradients(m, &batch, B, B, pol, loss), DT_OK);
    CHECK_INT_EQ(dt_model_step_end(m, DT_OK), DT_OK);
    int64_t n = 0;
    for (int i = 0; i < m->n_params; i++) n += m->params[i].n;
    float *all = dt_xmalloc((size_t)n * sizeof *all);
    int64_t at = 0;
    for (int i = 0; i < m->n_params; i++) {
        dt_backend_download(be, all + at, m->params[i].g, (size_t)m->params[i].n * sizeof *all);
        at += m->params[i].n;
    }
    *count = n;
    dt_model_destroy(m);
    return all;
}

/* Every GPT op through one step of the model: at portable, and at portable with math: exact
 * (the products and attention's sums exact in integers), the GPU's gradients and loss are
 * the CPU's bits (with dropout, lfsr and philox); at run_to_run and portable they do not
 * depend on the launch geometry (block size, grid cap) -- every reduction and scatter is
 * grid-independent there. */
/* One step's gradients on the GPU at level lv (DT_LEVEL_PORTABLE + 1: portable with math:
 * exact), with and without dropout, lfsr and philox: the same bits at three launch
 * geometries, and from portable on the CPU's. One case a level, so that a sanitizer's cap
 * (DT_SANITIZE_CASE_S) reaches each: under racecheck the three together ran past 150 s on
 * the H200 (2026-12-04). */
static void gpu_gradients_at(int lv)
{
    struct dt_backend *g = gpu_or_skip();
    struct dt_backend *c = cpu(2);
    static const double drops[] = {0.0, 0.2};
    for (int k = 0; k < 2; k++)
        for (int philox = 0; philox < 2; philox++) {
            const bool exact_math = lv > DT_LEVEL_PORTABLE;
            struct dt_policy pol = level(exact_math ? DT_LEVEL_PORTABLE : (enum dt_level)lv);
            if (exact_math) pol.math = DT_MATH_EXACT;
            if (philox) pol.rng = DT_RNG_PHILOX;
            float lc = 0, lg = 0;
            int64_t n = 0, n2 = 0;
            float *ref = gpt_grads(c, &pol, drops[k], &lc, &n);
            float *first = NULL;
#ifdef DETRAIN_HAVE_CUDA_TOOLKIT
            static const int geometry[][2] = {{256, 0}, {32, 3}, {1024, 1}};
            for (int gi = 0; gi < 3; gi++) {
                dt_cuda_set_launch(g, geometry[gi][0], geometry[gi][1]);
                float *got = gpt_grads(g, &pol, drops[k], &lg, &n2);
                CHECK_INT_EQ(n2, n);
                if (!first) first = got;
                else {
                    CHECK(same_bits(got, first, n, "gradients at another launch geometry"));
                    free(got);
                }
            }
            dt_cuda_set_launch(g, 256, 0);
#endif
            if (first && lv >= DT_LEVEL_PORTABLE) {
                CHECK(same_bits(first, ref, n, "GPU gradients vs CPU (portable, math: exact)"));
                CHECK(memcmp(&lc, &lg, sizeof lc) == 0);
            }
            free(first);
            free(ref);
        }
    dt_backend_destroy(c);
    dt_backend_destroy(g);
}

DT_TEST(gpu_gradients_equal_cpu_and_grid_free) { gpu_gradients_at(DT_LEVEL_PORTABLE); }
DT_TEST(gpu_gradients_exact_math_equal_cpu) { gpu_gradients_at(DT_LEVEL_PORTABLE + 1); }
DT_TEST(gpu_gradients_run_to_run_grid_free) { gpu_gradients_at(DT_LEVEL_RUN_TO_RUN); }

/* One wait per step (issue 52): a portable GPT step with clipping and AdamW, checks
 * deferred, waits for the device once -- its end, which also reads the losses (one per
 * shard) and the exact sum's maxima; the loss so read is finite. The windows come as a
 * run's do, gathered from a resident set on the device (a host batch's copy up waits for
 * itself), and step 0 is not counted: scratch grows at first use, and a growing buffer
 * waits for the work that may still read the old one (the H200 run, results/nvidia-h200: 33
 * waits at step 0, 4 after it, with host windows). A step that waits more names the call
 * sites of its waits. */
DT_TEST(gpu_host_waits_per_step)
{
    struct dt_backend *g = gpu_or_skip();
    const struct dt_gpt_options o = {
        .context = 9, .d_model = 16, .heads = 2, .layers = 2, .tie_embeddings = true};
    enum { B = 4, steps = 4 };
    struct dt_model *m = NULL;
    struct dt_error err;
    CHECK_INT_EQ(dt_gpt_create(&m, g, &o, B, &err), DT_OK);
    dt_model_init(m, 3, 0);
    float win[B * 10];
    for (int i = 0; i < B * 10; i++) win[i] = (float)((i * 53 + 5) % 256);
    uint8_t y[B] = {0};
    const struct dt_resident_src src = {B, 10, NULL, win, y, 10};
    struct dt_resident *set = dt_backend_resident_create(g, &src);
    CHECK(set != NULL);
    const int64_t idx[B] = {0, 1, 2, 3};
    const struct dt_batch batch = {.set = set, .idx = idx};
    const struct dt_sgd_options opt = {.lr = 1e-3f,
                                       .adamw = true,
                                       .beta1 = 0.9f,
                                       .beta2 = 0.999f,
                                       .eps = 1e-8f,
                                       .weight_decay = 0.01f,
                                       .clip_norm = 1.0f,
                                       .total_steps = 10};
    const struct dt_policy pol = level(DT_LEVEL_PORTABLE);
    dt_backend_defer_checks(g, true);
    /* one step state for every step, as runs keep it (nets/step.c): a step made and freed
     * each time (dt_model_train_step_batch) frees device memory, and cudaFree waits */
    struct dt_step d;
    memset(&d, 0, sizeof d);
    for (int s = 0; s < steps; s++) {
        float loss = 0;
        const int64_t w0 = dt_backend_host_waits(g);
        CHECK_INT_EQ(dt_step_train(&d, m, NULL, &batch, B, 1, &opt, &pol, &loss), DT_OK);
        const int64_t w = dt_backend_host_waits(g) - w0;
        if (s > 0 && w != 1) {
            char sites[2048] = "";
#ifdef DETRAIN_HAVE_CUDA_TOOLKIT
            dt_cuda_wait_sites(g, w0, sites, sizeof sites);
#endif
            fprintf(stderr, "step %d: %lld host waits: %s\n", s, (long long)w, sites);
            CHECK_INT_EQ(w, 1);
        }
        CHECK(isfinite(loss) && loss > 0.0f);
    }
    dt_step_free(&d);
    dt_backend_defer_checks(g, false);
    dt_backend_resident_free(g, set);
    dt_model_destroy(m);
    dt_backend_destroy(g);
}

/* End to end: 50 portable steps on the GPU give the CPU's trace, per-tensor digests and
 * metrics (without dropout; with dropout 0.1 under lfsr and philox). */
DT_TEST(gpu_portable_trace_equals_cpu)
{
    dt_backend_destroy(gpu_or_skip());
    static const char *const sets[] = {
        "--set policies=[portable]",
        "--set model.dropout=0.1 --set 'policies=[portable, {base: portable, rng: philox}]'"};
    static const char *const cells[][2] = {{"portable", NULL}, {"portable", "portable+rng=philox"}};
    for (int k = 0; k < 2; k++) {
        char extra[512], dc[256], dg[256];
        snprintf(dc, sizeof dc, TMP "gpu_cpu%d", k);
        snprintf(dg, sizeof dg, TMP "gpu_cuda%d", k);
        snprintf(extra, sizeof extra, "%s --set replicas=1 --set train.steps=50", sets[k]);
        CHECK_INT_EQ(run_gpt(dc, extra), 0);
        snprintf(extra, sizeof extra,
                 "%s --set replicas=1 --set train.steps=50 "
                 "--set backend.device=cuda",
                 sets[k]);
        const int rc = run_gpt(dg, extra);
        if (rc != 0) fprintf(stderr, "%s\n", out);
        CHECK_INT_EQ(rc, 0);
        for (int c = 0; c < 2 && cells[k][c]; c++) {
            static const char *const files[] = {"trace.csv", "tensors.csv", "metrics.csv"};
            for (int f = 0; f < 3; f++) {
                char pa[1024], pb[1024];
                snprintf(pa, sizeof pa, "%s/%s/replica-0/%s", dc, cells[k][c], files[f]);
                snprintf(pb, sizeof pb, "%s/%s/replica-0/%s", dg, cells[k][c], files[f]);
                if (!dt_files_equal(pa, pb)) fprintf(stderr, "differ: %s %s\n", pa, pb);
                CHECK(dt_files_equal(pa, pb));
            }
        }
    }
}

/* run_to_run on the GPU: three replicas with nothing varied give one trace (dropout on). */
DT_TEST(gpu_run_to_run_replicas_identical)
{
    dt_backend_destroy(gpu_or_skip());
    const char *dir = TMP "gpu_r2r";
    CHECK_INT_EQ(run_gpt(dir, "--set policies=[run_to_run] --set replicas=3 --set 'vary=[]' "
                              "--set train.steps=30 --set model.dropout=0.1 "
                              "--set backend.device=cuda"),
                 0);
    check_replicas_identical(dir, "run_to_run", 3);
}

/* explain on the GPU, the embedding's scatter forced (float atomicAdd's order drawn): it
 * names embedding_backward and atomics: float, as on the CPU. */
DT_TEST(gpu_explain_names_scatter)
{
    dt_backend_destroy(gpu_or_skip());
    const char *dir = TMP "gpu_explain";
    CHECK_INT_EQ(run_gpt(dir, "--set 'policies=[{base: run_to_run, atomics: float}]' "
                              "--set train.steps=2 --set backend.device=cuda"),
                 0);
    check_explain_forced_scatter(dir);
}

DT_TEST_MAIN(DT_CASE(ops_are_the_shared_functions), DT_CASE(attention_library_path),
             DT_CASE(attention_tiles), DT_CASE(layernorm_warp), DT_CASE(ops_match_double_reference),
             DT_CASE(dropout_masks), DT_CASE(dropout_philox_blocks_any_order),
             DT_CASE(dropout_lane_tiles_match_rows), DT_CASE(gradients_match_double_reference),
             DT_CASE(embedding_scatter_controls), DT_CASE(adamw_and_schedule),
             DT_CASE(clip_norm_controls), DT_CASE(text_dataset), DT_CASE(levels_and_threads),
             DT_CASE(resume_after_kill), DT_CASE(ranks_independent), DT_CASE(dropout_runs),
             DT_CASE(dropout_ranks), DT_CASE(explain_names_scatter), DT_CASE(export_and_batches),
             DT_CASE(vs_torch), DT_CASE(nonfinite_stops), DT_CASE(refusals),
             DT_CASE(gpu_gradients_equal_cpu_and_grid_free),
             DT_CASE(gpu_gradients_exact_math_equal_cpu),
             DT_CASE(gpu_gradients_run_to_run_grid_free), DT_CASE(gpu_host_waits_per_step),
             DT_CASE(gpu_portable_trace_equals_cpu), DT_CASE(gpu_run_to_run_replicas_identical),
             DT_CASE(gpu_explain_names_scatter))
