/* Portable math (determinism/portable_math.h): error in ulps against x87 long double
 * expl/logl/log1pl over strided sweeps of the float bit patterns (every float with
 * DT_ULP_FULL=1), the special cases, and bit-identity across call orders, volatile inputs
 * and an -O0 build of the same header (tests/portable_math_o0.c). */
#include <float.h>
#include <stdint.h>

#include "determinism/portable_math.h"
#include "tests/check.h"

/* From tests/portable_math_o0.c (built at -O0): fn 0 exp, 1 log, 2 log1p, 3 softplus. */
void dt_pm_o0_eval(float *out, const float *in, int64_t n, int fn);

/* FN_COUNT: the functions with a pinned digest and an -O0 twin; tanh is swept only. */
enum { FN_EXP, FN_LOG, FN_LOG1P, FN_SOFTPLUS, FN_TANH, FN_ALL, FN_COUNT = FN_TANH };
static const char *const fn_names[FN_ALL] = {"exp", "log", "log1p", "softplus", "tanh"};

static float eval_fn(int fn, float x)
{
    switch (fn) {
    case FN_EXP: return dt_exp_portable(x);
    case FN_LOG: return dt_log_portable(x);
    case FN_LOG1P: return dt_log1p_portable(x);
    case FN_TANH: return dt_tanh_portable(x);
    default: return dt_softplus_portable(x);
    }
}

static long double ref_fn(int fn, float x)
{
    long double lx = x;
    switch (fn) {
    case FN_EXP: return expl(lx);
    case FN_LOG: return logl(lx);
    case FN_LOG1P: return log1pl(lx);
    case FN_TANH: return tanhl(lx);
    default: return x > 0 ? lx + log1pl(expl(-lx)) : log1pl(expl(lx));
    }
}

static uint32_t bits_of(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static float float_of(uint32_t u)
{
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* Floats in value order as integers: ... -2^-149 -> -1, +-0 -> 0, 2^-149 -> 1 ... */
static int64_t key_of(float x)
{
    uint32_t u = bits_of(x);
    return (u & 0x80000000u) ? -(int64_t)(u & 0x7fffffffu) : (int64_t)u;
}

static float float_of_key(int64_t k)
{
    return k >= 0 ? float_of((uint32_t)k) : float_of(0x80000000u | (uint32_t)(-k));
}

/* Error of `got` in ulps of the reference: |got - ref| / spacing of floats at |ref|
 * (2^(ilogb|ref| - 23), at least 2^-149 -- the subnormal spacing). A non-finite result for
 * a finite reference counts as an infinite error. */
static long double ulp_err(float got, long double ref)
{
    if (!isfinite(got)) return (isinf(got) && (long double)got == ref) ? 0.0L : INFINITY;
    long double a = fabsl(ref);
    int q = a == 0.0L ? -149 : ilogbl(a) - 23;
    if (q < -149) q = -149;
    return fabsl((long double)got - ref) / ldexpl(1.0L, q);
}

static int full_sweep(void)
{
    const char *e = getenv("DT_ULP_FULL");
    return e && strcmp(e, "1") == 0;
}

/* The stride of a sweep: every pattern with DT_ULP_FULL=1; in the suite the given one; under
 * the sanitizers 13 times sparser (the same code, whose bits the main and narrow suites
 * check at the suite's stride: there the sanitizers look for undefined behaviour, which
 * needs the paths, not every input). */
static int64_t sweep_stride(int64_t stride)
{
    if (full_sweep()) return 1;
    return DT_SANITIZED ? stride * 13 : stride;
}

struct sweep_max {
    long double ulps;
    float x, got;
    long double ref;
    int64_t count;
};

/* Max ulp error of `fn` over the floats in [lo, hi] in value order, visiting every
 * `stride`-th one (stride 1 under DT_ULP_FULL=1) and always both ends. */
static struct sweep_max sweep(int fn, float lo, float hi, int64_t stride)
{
    struct sweep_max m = {-1.0L, 0, 0, 0, 0};
    stride = sweep_stride(stride);
    int64_t k0 = key_of(lo), k1 = key_of(hi);
    for (int64_t k = k0;; k += stride) {
        if (k > k1) k = k1;
        float x = float_of_key(k);
        float got = eval_fn(fn, x);
        long double ref = ref_fn(fn, x);
        long double err = ulp_err(got, ref);
        if (err > m.ulps) {
            m.ulps = err;
            m.x = x;
            m.got = got;
            m.ref = ref;
        }
        m.count++;
        if (k == k1) break;
    }
    printf("%-8s [%a, %a] stride %" PRId64 ": %" PRId64 " floats, max %.4Lf ulp at x = %a "
           "(%.9g, 0x%08x): got %a, ref %.12La\n",
           fn_names[fn], lo, hi, stride, m.count, m.ulps, m.x, m.x, bits_of(m.x), m.got, m.ref);
    fflush(stdout);
    return m;
}

#define CHECK_SWEEP(m, bound)                                                                      \
    do {                                                                                           \
        if (!((m).ulps <= (long double)(bound))) {                                                 \
            fprintf(stderr, "%s:%d: max error %.4Lf ulp at x = %a exceeds %s = %g\n", __FILE__,    \
                    __LINE__, (m).ulps, (m).x, #bound, (double)(bound));                           \
            dt_check_failures_++;                                                                  \
        }                                                                                          \
    } while (0)

/* Strides are odd primes, so every low-bit pattern of the mantissa gets visited. */
DT_TEST(exp_ulp_sweep)
{
    struct sweep_max m = sweep(FN_EXP, DT_PM_EXP_UNDERFLOW, DT_PM_EXP_OVERFLOW, 97);
    CHECK_SWEEP(m, DT_PM_ULP_EXP);
    /* The subnormal results on their own (x below log(2^-126) ~ -87.34): gradual underflow. */
    m = sweep(FN_EXP, DT_PM_EXP_UNDERFLOW, -87.3f, 7);
    CHECK_SWEEP(m, DT_PM_ULP_EXP);
}

DT_TEST(log_ulp_sweep)
{
    struct sweep_max m = sweep(FN_LOG, 0x1p-149f, FLT_MAX, 97);
    CHECK_SWEEP(m, DT_PM_ULP_LOG);
    m = sweep(FN_LOG, 0x1p-149f, 0x1p-126f, 997); /* subnormal inputs */
    CHECK_SWEEP(m, DT_PM_ULP_LOG);
    m = sweep(FN_LOG, 0.5f, 2.0f, 13); /* around 1, where the result is small */
    CHECK_SWEEP(m, DT_PM_ULP_LOG);
}

DT_TEST(log1p_softplus_ulp)
{
    struct sweep_max m = sweep(FN_LOG1P, -0x1.fffffep-1f, FLT_MAX, 127);
    CHECK_SWEEP(m, DT_PM_ULP_LOG1P);
    m = sweep(FN_LOG1P, -0.5f, 1.0f, 401); /* the kernel's edges and 1+x rounding */
    CHECK_SWEEP(m, DT_PM_ULP_LOG1P);
    m = sweep(FN_SOFTPLUS, -30.0f, 30.0f, 307);
    CHECK_SWEEP(m, DT_PM_ULP_SOFTPLUS);
    m = sweep(FN_SOFTPLUS, -FLT_MAX, -30.0f, 1021);
    CHECK_SWEEP(m, DT_PM_ULP_SOFTPLUS);
    m = sweep(FN_SOFTPLUS, 30.0f, FLT_MAX, 1021);
    CHECK_SWEEP(m, DT_PM_ULP_SOFTPLUS);
}

/* dt_tanh_portable as first written (branches and early returns): the branch-free form
 * that replaced it must give its bits for every input, so no committed trace moved. */
static float tanh_branchy(float x)
{
    if (x != x) return float_of(0x7fc00000u);
    const float a = x < 0.0f ? -x : x;
    float r;
    if (a < 0x1p-12f) {
        r = a;
    } else if (a < 0.55f) {
        const float z = a * a;
        float q = 0x1.355824p-11f;
        q = q * z - 0x1.7da364p-10f;
        q = q * z + 0x1.d6d3d0p-9f;
        q = q * z - 0x1.226e36p-7f;
        q = q * z + 0x1.664f48p-6f;
        q = q * z - 0x1.ba1ba2p-5f;
        q = q * z + 0x1.111112p-3f;
        q = q * z - 0x1.555556p-2f;
        r = a + (a * z) * q;
    } else if (a < 9.1f) {
        const float e = dt_exp_portable(2.0f * a);
        r = 1.0f - 2.0f / (e + 1.0f);
    } else {
        r = 1.0f;
    }
    return x < 0.0f ? -r : r;
}

DT_TEST(tanh_branch_free_same_bits)
{
    const int64_t stride = sweep_stride(7);
    int64_t diffs = 0, n = 0;
    for (uint64_t u = 0; u <= 0xffffffffu; u += (uint64_t)stride, n++) {
        const float x = float_of((uint32_t)u);
        if (bits_of(dt_tanh_portable(x)) != bits_of(tanh_branchy(x)) && diffs++ < 5)
            fprintf(stderr, "tanh(%a): 0x%08x, first form 0x%08x\n", (double)x,
                    bits_of(dt_tanh_portable(x)), bits_of(tanh_branchy(x)));
    }
    printf("tanh: %lld inputs, every %lld-th bit pattern, %lld differ\n", (long long)n,
           (long long)stride, (long long)diffs);
    CHECK_INT_EQ(diffs, 0);
}

/* dt_exp_portable and dt_softplus_portable as first written (early returns, the scaling's
 * branches, dt_log1p_portable): the branch-free forms that replaced them must give their
 * bits on every input, so no committed trace moved. */
static float scale_branchy(float y, int k)
{
    if (k > 127) return (y * 0x1p127f) * dt_pm__pow2(k - 127);
    if (k < -125) return (y * dt_pm__pow2(k + 100)) * 0x1p-100f;
    return y * dt_pm__pow2(k);
}

static float exp_branchy(float x)
{
    if (x != x) return float_of(0x7fc00000u);
    if (x > DT_PM_EXP_OVERFLOW) return float_of(0x7f800000u);
    if (x < DT_PM_EXP_UNDERFLOW) return 0.0f;
    int k;
    const float y = dt_pm__exp_kernel(x, &k);
    return scale_branchy(y, k);
}

static float softplus_branchy(float x)
{
    if (x != x) return float_of(0x7fc00000u);
    if (x > 20.0f) return x;
    if (x < -20.0f) return exp_branchy(x);
    if (x > 0.0f) return x + dt_log1p_portable(exp_branchy(-x));
    return dt_log1p_portable(exp_branchy(x));
}

DT_TEST(exp_softplus_branch_free_same_bits)
{
    /* every 97th pattern in the suite (seconds; four functions an input), all of them with
     * DT_ULP_FULL=1 (about six minutes) */
    const int64_t stride = sweep_stride(97);
    int64_t diffs = 0, n = 0;
    for (uint64_t u = 0; u <= 0xffffffffu; u += (uint64_t)stride, n++) {
        const float x = float_of((uint32_t)u);
        const uint32_t e = bits_of(dt_exp_portable(x)), eb = bits_of(exp_branchy(x));
        const uint32_t sp = bits_of(dt_softplus_portable(x)), sb = bits_of(softplus_branchy(x));
        if ((e != eb || sp != sb) && diffs++ < 5)
            fprintf(stderr, "x %a: exp 0x%08x (first form 0x%08x), softplus 0x%08x (0x%08x)\n",
                    (double)x, e, eb, sp, sb);
    }
    /* the inputs where a form changes, whatever the stride */
    static const float edges[] = {DT_PM_EXP_OVERFLOW,
                                  DT_PM_EXP_UNDERFLOW,
                                  20.0f,
                                  -20.0f,
                                  0x1p-24f,
                                  -0x1p-24f,
                                  0x1.8p-25f,
                                  0x1.a8279ap-2f,
                                  0.0f,
                                  -0.0f,
                                  -87.5f,
                                  -103.0f,
                                  88.7f,
                                  INFINITY,
                                  -INFINITY};
    for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++)
        for (int d = -2; d <= 2; d++) {
            const float x = float_of(bits_of(edges[i]) + (uint32_t)d);
            if (bits_of(dt_exp_portable(x)) != bits_of(exp_branchy(x)) ||
                bits_of(dt_softplus_portable(x)) != bits_of(softplus_branchy(x))) {
                fprintf(stderr, "edge %a differs\n", (double)x);
                diffs++;
            }
        }
    printf("exp, softplus: %lld inputs, every %lld-th bit pattern, %lld differ\n", (long long)n,
           (long long)stride, (long long)diffs);
    CHECK_INT_EQ(diffs, 0);
}

DT_TEST(tanh_ulp)
{
    struct sweep_max m = sweep(FN_TANH, -12.0f, 12.0f, 101);
    CHECK_SWEEP(m, DT_PM_ULP_TANH);
    m = sweep(FN_TANH, -1.0f, 1.0f, 31); /* the polynomial, the switch at 0.55 */
    CHECK_SWEEP(m, DT_PM_ULP_TANH);
    m = sweep(FN_TANH, 0x1p-30f, 0x1p-10f, 97); /* tiny: tanh(x) = x */
    CHECK_SWEEP(m, DT_PM_ULP_TANH);
    CHECK(dt_float_bits(dt_tanh_portable(0.0f)) == 0u);
    CHECK(dt_float_bits(dt_tanh_portable(-0.0f)) == 0x80000000u);
    CHECK(dt_tanh_portable(1e30f) == 1.0f && dt_tanh_portable(-1e30f) == -1.0f);
    CHECK(dt_tanh_portable(-INFINITY) == -1.0f &&
          dt_float_bits(dt_tanh_portable(NAN)) == 0x7fc00000u);
}

/* ---- specials --------------------------------------------------------------------------- */

#define CHECK_BITS(got, want_bits)                                                                 \
    do {                                                                                           \
        float g_ = (got);                                                                          \
        uint32_t w_ = (want_bits);                                                                 \
        if (bits_of(g_) != w_) {                                                                   \
            fprintf(stderr, "%s:%d: CHECK_BITS failed: %s = %a (0x%08x), want %a (0x%08x)\n",      \
                    __FILE__, __LINE__, #got, g_, bits_of(g_), float_of(w_), w_);                  \
            dt_check_failures_++;                                                                  \
        }                                                                                          \
    } while (0)

/* Within `bound` ulps of the long double reference. */
#define CHECK_ULP(fn, x, bound)                                                                    \
    do {                                                                                           \
        float x_ = (x);                                                                            \
        float g_ = eval_fn(fn, x_);                                                                \
        long double e_ = ulp_err(g_, ref_fn(fn, x_));                                              \
        if (!(e_ <= (long double)(bound))) {                                                       \
            fprintf(stderr, "%s:%d: %s(%a) = %a is %.3Lf ulp off (bound %g)\n", __FILE__,          \
                    __LINE__, fn_names[fn], x_, g_, e_, (double)(bound));                          \
            dt_check_failures_++;                                                                  \
        }                                                                                          \
    } while (0)

#define QNAN_BITS 0x7fc00000u
#define PINF_BITS 0x7f800000u
#define NINF_BITS 0xff800000u

DT_TEST(specials)
{
    const float nans[] = {float_of(0x7fc00000u), float_of(0xffc00000u), float_of(0x7f800001u),
                          float_of(0xffbfffffu), float_of(0x7fc12345u)};
    for (size_t i = 0; i < sizeof nans / sizeof nans[0]; i++) {
        CHECK_BITS(dt_exp_portable(nans[i]), QNAN_BITS);
        CHECK_BITS(dt_log_portable(nans[i]), QNAN_BITS);
        CHECK_BITS(dt_log1p_portable(nans[i]), QNAN_BITS);
        CHECK_BITS(dt_softplus_portable(nans[i]), QNAN_BITS);
    }
    const float inf = float_of(PINF_BITS);

    /* exp */
    CHECK_BITS(dt_exp_portable(inf), PINF_BITS);
    CHECK_BITS(dt_exp_portable(-inf), 0u);
    CHECK_BITS(dt_exp_portable(0.0f), 0x3f800000u);
    CHECK_BITS(dt_exp_portable(-0.0f), 0x3f800000u);
    CHECK_BITS(dt_exp_portable(0x1p-149f), 0x3f800000u);
    CHECK_BITS(dt_exp_portable(-0x1p-149f), 0x3f800000u);
    CHECK_BITS(dt_exp_portable(0x1p-25f), 0x3f800000u);
    CHECK_BITS(dt_exp_portable(1.0f), 0x402df854u); /* e, correctly rounded */
    /* Overflow exactly where binary32 exp overflows: 0x42b17217 is finite, the next is not. */
    CHECK_BITS(dt_exp_portable(float_of(0x42b17217u)), 0x7f7fff84u);
    CHECK_ULP(FN_EXP, float_of(0x42b17217u), DT_PM_ULP_EXP);
    CHECK_BITS(dt_exp_portable(float_of(0x42b17218u)), PINF_BITS);
    CHECK_BITS(dt_exp_portable(100.0f), PINF_BITS);
    CHECK_BITS(dt_exp_portable(FLT_MAX), PINF_BITS);
    /* Underflow: exp(x) > 2^-150 rounds up to the smallest subnormal, below it to +0. */
    CHECK_BITS(dt_exp_portable(DT_PM_EXP_UNDERFLOW), 0x00000001u);
    CHECK_BITS(dt_exp_portable(float_of(bits_of(DT_PM_EXP_UNDERFLOW) + 1)), 0u);
    CHECK_BITS(dt_exp_portable(-104.0f), 0u);
    CHECK_BITS(dt_exp_portable(-FLT_MAX), 0u);
    /* Gradual underflow: subnormal results, each within the bound of the reference. */
    const float subs[] = {-87.34f, -87.5f, -90.0f, -95.5f, -100.0f, -102.0f, -103.0f, -103.9f};
    for (size_t i = 0; i < sizeof subs / sizeof subs[0]; i++) {
        float y = dt_exp_portable(subs[i]);
        CHECK(y > 0.0f && y < FLT_MIN);
        CHECK_ULP(FN_EXP, subs[i], DT_PM_ULP_EXP);
    }
    CHECK_BITS(dt_exp_portable(-100.0f), bits_of((float)expl(-100.0L)));
    CHECK(dt_exp_portable(-87.33f) >= FLT_MIN); /* normal just above log(2^-126) */
    CHECK_ULP(FN_EXP, -87.33f, DT_PM_ULP_EXP);

    /* log */
    CHECK_BITS(dt_log_portable(inf), PINF_BITS);
    CHECK_BITS(dt_log_portable(-inf), QNAN_BITS);
    CHECK_BITS(dt_log_portable(-1.0f), QNAN_BITS);
    CHECK_BITS(dt_log_portable(-0x1p-149f), QNAN_BITS);
    CHECK_BITS(dt_log_portable(0.0f), NINF_BITS);
    CHECK_BITS(dt_log_portable(-0.0f), NINF_BITS);
    CHECK_BITS(dt_log_portable(1.0f), 0u);
    CHECK_BITS(dt_log_portable(2.0f), 0x3f317218u); /* ln 2, correctly rounded */
    const float logs[] = {0x1p-149f,      0x1.8p-148f,    0x1.234p-140f,  0x1.fffffcp-127f,
                          FLT_MIN,        FLT_MAX,        0x1.fffffep-1f, 0x1.000002p0f,
                          0x1.6a09e6p-1f, 0x1.6a09e8p-1f, 0x1.6a09e6p0f,  0x1.6a09e8p0f,
                          10.0f};
    for (size_t i = 0; i < sizeof logs / sizeof logs[0]; i++)
        CHECK_ULP(FN_LOG, logs[i], DT_PM_ULP_LOG);
    CHECK_BITS(dt_log_portable(0x1p-149f), bits_of((float)logl(0x1p-149L)));

    /* log1p */
    CHECK_BITS(dt_log1p_portable(-1.0f), NINF_BITS);
    CHECK_BITS(dt_log1p_portable(-1.5f), QNAN_BITS);
    CHECK_BITS(dt_log1p_portable(-inf), QNAN_BITS);
    CHECK_BITS(dt_log1p_portable(inf), PINF_BITS);
    CHECK_BITS(dt_log1p_portable(0.0f), 0u);
    CHECK_BITS(dt_log1p_portable(-0.0f), 0x80000000u);
    CHECK_BITS(dt_log1p_portable(0x1p-149f), 0x00000001u);
    CHECK_BITS(dt_log1p_portable(-0x1p-149f), 0x80000001u);
    CHECK_BITS(dt_log1p_portable(1e-30f), bits_of(1e-30f));
    CHECK_BITS(dt_log1p_portable(1.0f), 0x3f317218u);
    const float l1ps[] = {-0x1.fffffep-1f, -0.5f,          -0x1.2bec34p-2f, -0x1.2bec32p-2f,
                          0x1.a8279ap-2f,  0x1.a82798p-2f, 0x1p24f,         0x1.000002p24f,
                          3e37f,           FLT_MAX};
    for (size_t i = 0; i < sizeof l1ps / sizeof l1ps[0]; i++)
        CHECK_ULP(FN_LOG1P, l1ps[i], DT_PM_ULP_LOG1P);

    /* softplus */
    CHECK_BITS(dt_softplus_portable(inf), PINF_BITS);
    CHECK_BITS(dt_softplus_portable(-inf), 0u);
    CHECK_BITS(dt_softplus_portable(0.0f), 0x3f317218u); /* ln 2 */
    CHECK_BITS(dt_softplus_portable(100.0f), bits_of(100.0f));
    CHECK_BITS(dt_softplus_portable(FLT_MAX), bits_of(FLT_MAX));
    CHECK_BITS(dt_softplus_portable(-200.0f), 0u);
    CHECK_BITS(dt_softplus_portable(-100.0f), bits_of(dt_exp_portable(-100.0f)));
    const float sps[] = {-20.0f, -0x1.4p4f, 20.0f, 0x1.400002p4f, 1e-8f, -1e-8f, 5.0f, -5.0f};
    for (size_t i = 0; i < sizeof sps / sizeof sps[0]; i++)
        CHECK_ULP(FN_SOFTPLUS, sps[i], DT_PM_ULP_SOFTPLUS);
}

/* ---- bits_pinned ------------------------------------------------------------------------ */

/* FNV-1a over the result bits. */
static uint64_t fnv1a_floats(const float *v, int64_t n)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (int64_t i = 0; i < n; i++) {
        uint32_t u = bits_of(v[i]);
        for (int b = 0; b < 4; b++) {
            h ^= (u >> (8 * b)) & 0xffu;
            h *= 0x100000001b3ULL;
        }
    }
    return h;
}

/* Digests of every function over all 2^32 bit patterns with stride 65521, starting at 7
 * (65552 inputs, NaNs and infinities included). They pin the bits: a change to the
 * algorithm, coefficients or compilation that moves any of these results fails here.
 * After an intended change, update them from this case's output. */
static const uint64_t pinned_digest[FN_COUNT] = {
    0x274c7f78ead99b8cULL, /* exp */
    0xde3296ec69979912ULL, /* log */
    0xd57387316b07e486ULL, /* log1p */
    0xd3ca7fb3f80b7743ULL, /* softplus */
};

DT_TEST(bits_pinned)
{
    enum { STRIDE = 65521, START = 7 };
    int64_t n = ((int64_t)UINT32_MAX - START) / STRIDE + 1;
    float *in = malloc((size_t)n * sizeof *in);
    float *o2 = malloc((size_t)n * sizeof *o2);
    float *o0 = malloc((size_t)n * sizeof *o0);
    CHECK(in && o2 && o0);
    if (!in || !o2 || !o0) goto out;
    for (int64_t i = 0; i < n; i++) in[i] = float_of((uint32_t)(START + i * STRIDE));

    for (int fn = 0; fn < FN_COUNT; fn++) {
        /* -O2 (this file) against -O0 (portable_math_o0.c), every result bit for bit. */
        for (int64_t i = 0; i < n; i++) o2[i] = eval_fn(fn, in[i]);
        dt_pm_o0_eval(o0, in, n, fn);
        int64_t diffs = 0;
        for (int64_t i = 0; i < n; i++) {
            if (bits_of(o2[i]) != bits_of(o0[i])) {
                if (diffs < 5)
                    fprintf(stderr, "%s(%a): -O2 gives 0x%08x, -O0 gives 0x%08x\n", fn_names[fn],
                            in[i], bits_of(o2[i]), bits_of(o0[i]));
                diffs++;
            }
        }
        CHECK_INT_EQ(diffs, 0);

        /* A few hundred inputs through volatile, forwards then backwards: pure functions of
         * the input bits, no hidden state, no dependence on what was computed before. */
        enum { FEW = 400 };
        float fwd[FEW], bwd[FEW];
        for (int i = 0; i < FEW; i++) {
            volatile float vx = in[(int64_t)i * (n / FEW)];
            fwd[i] = eval_fn(fn, vx);
        }
        for (int i = FEW - 1; i >= 0; i--) {
            volatile float vx = in[(int64_t)i * (n / FEW)];
            bwd[i] = eval_fn(fn, vx);
        }
        int64_t order_diffs = 0;
        for (int i = 0; i < FEW; i++) {
            order_diffs += bits_of(fwd[i]) != bits_of(bwd[i]);
            order_diffs += bits_of(fwd[i]) != bits_of(o2[(int64_t)i * (n / FEW)]);
        }
        CHECK_INT_EQ(order_diffs, 0);

        uint64_t h = fnv1a_floats(o2, n);
        printf("%-8s %" PRId64 " inputs, digest 0x%016" PRIx64 "\n", fn_names[fn], n, h);
        if (h != pinned_digest[fn]) {
            fprintf(stderr, "%s: digest 0x%016" PRIx64 " != pinned 0x%016" PRIx64 "\n",
                    fn_names[fn], h, pinned_digest[fn]);
            dt_check_failures_++;
        }
    }
out:
    free(in);
    free(o2);
    free(o0);
}

DT_TEST_MAIN(DT_CASE(exp_ulp_sweep), DT_CASE(log_ulp_sweep), DT_CASE(log1p_softplus_ulp),
             DT_CASE(tanh_ulp), DT_CASE(tanh_branch_free_same_bits),
             DT_CASE(exp_softplus_branch_free_same_bits), DT_CASE(specials), DT_CASE(bits_pinned))
