/* Tests for the epsilon generators: determinism/philox.h (counter-based Philox4x32-10),
 * determinism/xoroshiro.h + xoroshiro_jump.c (reversible xoroshiro128** lanes),
 * determinism/gaussian.h (fixed-consumption Box-Muller) and determinism/eps.h (how tensors
 * are drawn). References are independent of the code under test: published known answers
 * (Random123 kat_vectors, Vigna's xoroshiro128** reference code and jump polynomial), the
 * cuRAND host library, double-precision libm, and exact normal-distribution formulas.
 *
 * Labels (tests/test_rng.cmake): `unit` cases are fast and also run under ASan/UBSan;
 * `stats` cases draw 10^7 normals per generator and run in the normal build only; `slow`
 * (make check-slow) pipes the raw words into dieharder (tests/rng_dieharder.sh), fed by the
 * dump_philox / dump_lfsr entries here, which are not CTest cases of their own. */
#include <dlfcn.h>
#include <signal.h>
#include <stdint.h>
#include <time.h>

#include "determinism/eps.h"
#include "determinism/gaussian.h"
#include "determinism/philox.h"
#include "determinism/xoroshiro.h"
#include "determinism/streams.h"
#include "tests/check.h"

/* ---- small helpers -------------------------------------------------------------------- */

/* Test states from dt_mix64 of a counter (a bijection, so distinct and, for non-zero
 * inputs, non-zero). */
static struct dt_xoro state_of(uint64_t i)
{
    struct dt_xoro s = {dt_mix64(2 * i + 1), dt_mix64(2 * i + 2)};
    return s;
}

static uint32_t f2u(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n);
    if (!p) {
        fprintf(stderr, "out of memory (%zu bytes)\n", n);
        exit(1);
    }
    return p;
}

#define CHECK_XORO_EQ(got, want, ...)                                                              \
    do {                                                                                           \
        struct dt_xoro g_ = (got), w_ = (want);                                                    \
        if (!dt_xoro_equal(g_, w_)) {                                                              \
            fprintf(stderr, "%s:%d: states differ (", __FILE__, __LINE__);                         \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fprintf(stderr,                                                                        \
                    "): got %016" PRIx64 " %016" PRIx64 " want %016" PRIx64 " %016" PRIx64 "\n",   \
                    g_.s0, g_.s1, w_.s0, w_.s1);                                                   \
            dt_check_failures_++;                                                                  \
        }                                                                                          \
    } while (0)

/* Vigna's xoroshiro128** step as published (xoroshiro128starstar.c, 2018): written out
 * here independently of determinism/xoroshiro.h. Returns the output, advances s. */
static uint64_t ref_rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
static uint64_t ref_xoro_next(uint64_t s[2])
{
    const uint64_t s0 = s[0];
    uint64_t s1 = s[1];
    const uint64_t result = ref_rotl(s0 * 5, 7) * 9;
    s1 ^= s0;
    s[0] = ref_rotl(s0, 24) ^ s1 ^ (s1 << 16);
    s[1] = ref_rotl(s1, 37);
    return result;
}

/* Vigna's jump(): equivalent to 2^64 calls of next(), by his published polynomial. */
static void ref_xoro_jump64(uint64_t s[2])
{
    static const uint64_t JUMP[] = {0xdf900294d8f554a5ULL, 0x170865df4b3201fcULL};
    uint64_t s0 = 0, s1 = 0;
    for (int i = 0; i < 2; i++)
        for (int b = 0; b < 64; b++) {
            if (JUMP[i] & UINT64_C(1) << b) {
                s0 ^= s[0];
                s1 ^= s[1];
            }
            ref_xoro_next(s);
        }
    s[0] = s0;
    s[1] = s1;
}

/* ---- xoroshiro128**: stepping, reversal, jumps, the zero state -------------------------- */

/* Bugs caught: a wrong inverse formula (rotation amounts, shift direction, the order of
 * un-xoring), a forward step that differs from xoroshiro128** (then prev would be checked
 * against the wrong function: the reference comparison pins next, round trips pin prev),
 * a wrong scrambler, and a backward walk that does not return the forward outputs in
 * reverse order (the draw protocol of determinism/eps.h). */
DT_TEST(xoro_round_trip)
{
    /* Published outputs of xoroshiro128** from s = {1, 2} (rust-random/rand,
     * rand_xoshiro/src/xoroshiro128starstar.rs, "produced with the reference
     * implementation"). */
    static const uint64_t kat[10] = {5760u,
                                     97769243520u,
                                     9706862127477703552u,
                                     9223447511460779954u,
                                     8358291023205304566u,
                                     15695619998649302768u,
                                     8517900938696309774u,
                                     16586480348202605369u,
                                     6959129367028440372u,
                                     16822147227405758281u};
    struct dt_xoro s = {1, 2};
    for (int i = 0; i < 10; i++) {
        uint64_t w = dt_xoro_out(s);
        dt_xoro_next(&s);
        if (w != kat[i]) {
            fprintf(stderr, "KAT output %d: got %" PRIu64 " want %" PRIu64 "\n", i, w, kat[i]);
            dt_check_failures_++;
        }
    }
    for (int i = 9; i >= 0; i--) { /* backward walk: the same outputs, last first */
        dt_xoro_prev(&s);
        CHECK(dt_xoro_out(s) == kat[i]);
    }
    CHECK(s.s0 == 1 && s.s1 == 2);

    int64_t bad_ref = 0, bad_np = 0, bad_pn = 0;
    for (uint64_t i = 0; i < 1000000; i++) {
        struct dt_xoro x = state_of(i);
        uint64_t r[2] = {x.s0, x.s1};
        uint64_t rout = ref_xoro_next(r);
        struct dt_xoro y = x;
        if (dt_xoro_out(y) != rout) bad_ref++;
        dt_xoro_next(&y);
        if (y.s0 != r[0] || y.s1 != r[1]) bad_ref++;
        dt_xoro_prev(&y);
        if (!dt_xoro_equal(y, x)) {
            if (bad_np++ == 0)
                fprintf(stderr, "prev(next(x)) != x at x = %016" PRIx64 " %016" PRIx64 "\n", x.s0,
                        x.s1);
        }
        struct dt_xoro z = x;
        dt_xoro_prev(&z);
        dt_xoro_next(&z);
        if (!dt_xoro_equal(z, x)) {
            if (bad_pn++ == 0)
                fprintf(stderr, "next(prev(x)) != x at x = %016" PRIx64 " %016" PRIx64 "\n", x.s0,
                        x.s1);
        }
    }
    CHECK_INT_EQ(bad_ref, 0);
    CHECK_INT_EQ(bad_np, 0);
    CHECK_INT_EQ(bad_pn, 0);
}

/* Bugs caught: wrong matrix columns or bit order (jump by small k disagrees with single
 * steps), a broken squaring chain or wrong table index (large k, checked through jump
 * composition and against Vigna's 2^64 jump polynomial, which exercises every table entry
 * up to 2^63), a backward table that is not the inverse, and k = 0 not being the identity. */
DT_TEST(xoro_jump_matches_steps)
{
    uint64_t ks[16] = {0, 1, 2, 3, 63, 64, 65, 127, 128, 1000, 4096};
    int nk = 11;
    for (int i = 0; i < 5; i++) ks[nk++] = 1 + dt_mix64(0xabc0 + (uint64_t)i) % 100000u;
    ks[nk - 1] = 100000;
    for (int i = 0; i < nk; i++) {
        uint64_t k = ks[i];
        struct dt_xoro x = state_of(1000 + (uint64_t)i);
        struct dt_xoro steps = x, jumped = x;
        for (uint64_t t = 0; t < k; t++) dt_xoro_next(&steps);
        dt_xoro_jump(&jumped, k);
        CHECK_XORO_EQ(jumped, steps, "jump(%" PRIu64 ") vs %" PRIu64 " next()", k, k);
        struct dt_xoro back_steps = x, back_jumped = x;
        for (uint64_t t = 0; t < k; t++) dt_xoro_prev(&back_steps);
        dt_xoro_jump_back(&back_jumped, k);
        CHECK_XORO_EQ(back_jumped, back_steps, "jump_back(%" PRIu64 ") vs %" PRIu64 " prev()", k,
                      k);
    }

    /* jump then jump_back (and the reverse) is the identity, for k of every size. */
    for (int i = 0; i < 64; i++) {
        uint64_t k = dt_mix64(0x5eed + (uint64_t)i) >> (i % 64);
        if (i == 0) k = UINT64_MAX;
        struct dt_xoro x = state_of(2000 + (uint64_t)i), y = x;
        dt_xoro_jump(&y, k);
        if (k != 0) CHECK(!dt_xoro_equal(y, x));
        dt_xoro_jump_back(&y, k);
        CHECK_XORO_EQ(y, x, "jump_back(jump(x, k), k), k = %" PRIx64, k);
        dt_xoro_jump_back(&y, k);
        dt_xoro_jump(&y, k);
        CHECK_XORO_EQ(y, x, "jump(jump_back(x, k), k), k = %" PRIx64, k);
    }

    /* Composition: jump(a) jump(b) == jump(a + b) for large a, b (high table entries);
     * jump(a) jump_back(b) == jump(a - b). */
    for (int i = 0; i < 32; i++) {
        uint64_t a = dt_mix64(0xa000 + (uint64_t)i) >> 1, b = dt_mix64(0xb000 + (uint64_t)i) >> 1;
        struct dt_xoro x = state_of(3000 + (uint64_t)i), y = x, z = x;
        dt_xoro_jump(&y, a);
        dt_xoro_jump(&y, b);
        dt_xoro_jump(&z, a + b);
        CHECK_XORO_EQ(y, z, "jump(a) jump(b) vs jump(a + b)");
        y = x;
        z = x;
        dt_xoro_jump(&y, a);
        dt_xoro_jump_back(&y, b);
        if (a >= b) dt_xoro_jump(&z, a - b);
        else dt_xoro_jump_back(&z, b - a);
        CHECK_XORO_EQ(y, z, "jump(a) jump_back(b) vs jump(a - b)");
    }

    /* Known answer: Vigna's published jump() (constants 0xdf900294d8f554a5,
     * 0x170865df4b3201fc, his loop) is 2^64 steps = two jumps of 2^63. They agree. */
    for (int i = 0; i < 8; i++) {
        struct dt_xoro x = i == 0 ? (struct dt_xoro){1, 2} : state_of(4000 + (uint64_t)i);
        uint64_t r[2] = {x.s0, x.s1};
        ref_xoro_jump64(r);
        struct dt_xoro y = x, want = {r[0], r[1]};
        dt_xoro_jump(&y, UINT64_C(1) << 63);
        dt_xoro_jump(&y, UINT64_C(1) << 63);
        CHECK_XORO_EQ(y, want, "2 x jump(2^63) vs Vigna's jump() from state %d", i);
        dt_xoro_jump_back(&y, UINT64_C(1) << 63);
        dt_xoro_jump_back(&y, UINT64_C(1) << 63);
        CHECK_XORO_EQ(y, x, "2 x jump_back(2^63) undoes Vigna's jump()");
    }
    /* Outputs after Vigna's jump from {1, 2}, as published by an independent port (the
     * agate-pris/intar C# library's Xoroshiro128StarStar JumpTest). */
    {
        static const uint64_t after_jump[3] = {2464231652016875657u, 11602794600843324846u,
                                               733764001042591551u};
        struct dt_xoro y = {1, 2};
        dt_xoro_jump(&y, UINT64_C(1) << 63);
        dt_xoro_jump(&y, UINT64_C(1) << 63);
        for (int i = 0; i < 3; i++) {
            CHECK(dt_xoro_out(y) == after_jump[i]);
            dt_xoro_next(&y);
        }
    }
}

/* splitmix64's finalizer inverted: each xorshift-right and each odd multiplication is a
 * bijection on 64-bit words. */
static uint64_t unxorshift_right(uint64_t y, int s)
{
    uint64_t x = y;
    for (int k = 0; k < 64 / s + 1; k++) x = y ^ (x >> s);
    return x;
}
static uint64_t inverse_odd(uint64_t a) /* a * inverse_odd(a) == 1 mod 2^64 (Newton) */
{
    uint64_t x = a; /* correct to 3 bits: a * a == 1 mod 8 for odd a */
    for (int i = 0; i < 6; i++) x *= 2 - a * x;
    return x;
}
static uint64_t unmix64(uint64_t z)
{
    z = unxorshift_right(z, 31);
    z *= inverse_odd(0x94d049bb133111ebULL);
    z = unxorshift_right(z, 27);
    z *= inverse_odd(0xbf58476d1ce4e5b9ULL);
    return unxorshift_right(z, 30);
}

static int cmp_xoro(const void *pa, const void *pb)
{
    const struct dt_xoro *a = pa, *b = pb;
    if (a->s0 != b->s0) return a->s0 < b->s0 ? -1 : 1;
    if (a->s1 != b->s1) return a->s1 < b->s1 ? -1 : 1;
    return 0;
}

/* Why the zero state matters: it is a fixed point of both next and prev, and its output is
 * 0. A lane seeded at zero would draw the word 0 forever -- its chunk's epsilons would be
 * dt_gauss_pair(0, 0) = (5.887, 1.1e-6) over and over -- and its backward walk would still
 * end at its seed state, so the end-state invariant of determinism/eps.h could not notice.
 * (The seed pair in question is a = 0, b = 0x6a09e667f3bcc908: dt_mix64(0) = 0.)
 * Bugs caught: a missing or wrong remap in dt_xoro_seed (the one seed pair that mixes to
 * zero is computed here by inverting dt_mix64), a remap that fires on one zero word only,
 * and lane seeds that are zero, not distinct across lanes, or not the documented Philox
 * block. */
DT_TEST(xoro_zero_state_unreachable)
{
    struct dt_xoro zero = {0, 0}, z = zero;
    dt_xoro_next(&z);
    CHECK_XORO_EQ(z, zero, "next(0)");
    dt_xoro_prev(&z);
    CHECK_XORO_EQ(z, zero, "prev(0)");
    CHECK(dt_xoro_out(zero) == 0);
    dt_xoro_jump(&z, 12345);
    CHECK_XORO_EQ(z, zero, "jump(0, k)");

    for (uint64_t i = 0; i < 10000; i++) {
        uint64_t x = dt_mix64(i) ^ (i << 17);
        if (unmix64(dt_mix64(x)) != x || dt_mix64(unmix64(x)) != x) {
            fprintf(stderr, "unmix64 is not the inverse at %016" PRIx64 "\n", x);
            dt_check_failures_++;
            break;
        }
    }

    /* The seed pair whose mixed words are both zero. */
    uint64_t a = unmix64(0), b = unmix64(0) ^ 0x6a09e667f3bcc908ULL;
    CHECK(dt_mix64(a) == 0 && dt_mix64(b ^ 0x6a09e667f3bcc908ULL) == 0);
    struct dt_xoro s = dt_xoro_seed(a, b);
    CHECK((s.s0 | s.s1) != 0);
    CHECK_XORO_EQ(s, ((struct dt_xoro){DT_XORO_ZERO_REMAP_S0, DT_XORO_ZERO_REMAP_S1}),
                  "dt_xoro_seed(%016" PRIx64 ", %016" PRIx64 ")", a, b);
    /* One zero word is a legal state and is left alone. */
    struct dt_xoro half = dt_xoro_seed(a, b ^ 1);
    CHECK(half.s0 == 0 && half.s1 == dt_mix64(b ^ 1 ^ 0x6a09e667f3bcc908ULL));
    half = dt_xoro_seed(a ^ 1, b);
    CHECK(half.s1 == 0 && half.s0 == dt_mix64(a ^ 1));

    /* Lane seeds: never zero, pairwise distinct within a (seed, step, member, sample), and
     * the documented Philox block (reserved tensor id, lane index as the block). */
    static const uint64_t seeds[] = {0, 1, 0x0123456789abcdefULL, UINT64_MAX};
    static const uint32_t steps[] = {0, 1, 0xffffffffu};
    enum { LANES = 4096 };
    struct dt_xoro *st = xmalloc(sizeof *st * LANES);
    int64_t zeros = 0, dups = 0;
    for (int is = 0; is < 4; is++)
        for (int it = 0; it < 3; it++)
            for (uint32_t member = 0; member <= DT_PHILOX_MAX_MEMBER;
                 member += DT_PHILOX_MAX_MEMBER)
                for (uint32_t sample = 0; sample <= DT_PHILOX_MAX_SAMPLE;
                     sample += DT_PHILOX_MAX_SAMPLE) {
                    for (uint64_t lane = 0; lane < LANES; lane++) {
                        st[lane] = dt_eps_lane_seed(seeds[is], steps[it], member, sample, lane);
                        if ((st[lane].s0 | st[lane].s1) == 0) zeros++;
                    }
                    qsort(st, LANES, sizeof *st, cmp_xoro);
                    for (int i = 0; i + 1 < LANES; i++) dups += dt_xoro_equal(st[i], st[i + 1]);
                }
    free(st);
    CHECK_INT_EQ(zeros, 0);
    CHECK_INT_EQ(dups, 0);
    {
        uint32_t key[2] = {0x89abcdefu, 0x01234567u}, w[4];
        uint32_t ctr[4] = {77, 0, 5, DT_PHILOX_TENSOR_LANES << 20 | 3u << 8 | 2u};
        dt_philox4x32_10(w, ctr, key);
        struct dt_xoro want =
            dt_xoro_seed((uint64_t)w[1] << 32 | w[0], (uint64_t)w[3] << 32 | w[2]);
        CHECK_XORO_EQ(dt_eps_lane_seed(0x0123456789abcdefULL, 5, 3, 2, 77), want, "lane seed");
    }
}

/* ---- Philox ---------------------------------------------------------------------------- */

/* Bugs caught: a wrong multiplier, key-schedule constant or bump order, swapped words in the
 * round, hi/lo halves of the products swapped, a wrong round count. The vectors are the
 * philox4x32 10 lines of Random123's kat_vectors file (as cut-and-pasted into
 * DEShawResearch/Random123-Boost libs/random/test/test_philox.cpp, commit 916db91a). Also
 * pins the stream packing of determinism/philox.h (key halves, counter words). */
DT_TEST(philox_random123_kat)
{
    static const struct {
        uint32_t ctr[4], key[2], out[4];
    } kat[] = {
        {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
        {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
         {0xffffffff, 0xffffffff},
         {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
        {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
         {0xa4093822, 0x299f31d0},
         {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
    };
    for (int i = 0; i < 3; i++) {
        uint32_t out[4];
        dt_philox4x32_10(out, kat[i].ctr, kat[i].key);
        for (int w = 0; w < 4; w++)
            if (out[w] != kat[i].out[w]) {
                fprintf(stderr, "KAT %d word %d: got %08x want %08x\n", i, w, out[w],
                        kat[i].out[w]);
                dt_check_failures_++;
            }
    }

    /* Stream packing: key = (seed lo, seed hi); ctr = (block lo, block hi, step,
     * tensor << 20 | member << 8 | sample). The pi-digits vector through the stream API. */
    struct dt_philox_stream s =
        dt_philox_stream_make(0x299f31d0a4093822ULL, 0x13198a2e, 0x037, 0x073, 0x44);
    CHECK(s.key[0] == 0xa4093822u && s.key[1] == 0x299f31d0u);
    CHECK(s.step == 0x13198a2eu && s.word3 == 0x03707344u);
    uint32_t out[4];
    dt_philox_block(out, &s, 0x85a308d3243f6a88ULL);
    CHECK(out[0] == 0xd16cfe09u && out[1] == 0x94fdccebu && out[2] == 0x5001e420u &&
          out[3] == 0x24126ea1u);
    /* The packing is a bijection: every (tensor, member, sample) in range is recovered
     * from word3 (so no two tuples share a counter). */
    static const uint32_t tensors[] = {0, 1, 2, 0x7ff, 0xffe, DT_PHILOX_TENSOR_LANES};
    int64_t unpack_bad = 0;
    for (int it = 0; it < 6; it++)
        for (uint32_t member = 0; member <= DT_PHILOX_MAX_MEMBER; member++)
            for (uint32_t sample = 0; sample <= DT_PHILOX_MAX_SAMPLE; sample++) {
                uint32_t w3 = dt_philox_stream_make(7, 0, tensors[it], member, sample).word3;
                unpack_bad += (w3 >> 20) != tensors[it] || ((w3 >> 8) & 0xfff) != member ||
                              (w3 & 0xff) != sample;
            }
    CHECK_INT_EQ(unpack_bad, 0);
    CHECK(dt_philox_fields_ok(DT_PHILOX_TENSOR_LANES, DT_PHILOX_MAX_MEMBER, DT_PHILOX_MAX_SAMPLE));
    CHECK(!dt_philox_fields_ok(0x1000, 0, 0));
    CHECK(!dt_philox_fields_ok(0, 0x1000, 0));
    CHECK(!dt_philox_fields_ok(0, 0, 0x100));
}

/* cuRAND's host API, loaded at run time (no CUDA needed at build time). Declarations and
 * enum values from CUDA 13.0 include/curand.h. */
typedef struct dt_curand_gen *dt_curand_gen_t;
typedef int (*dt_curand_create_fn)(dt_curand_gen_t *, int);
typedef int (*dt_curand_seed_fn)(dt_curand_gen_t, unsigned long long);
typedef int (*dt_curand_order_fn)(dt_curand_gen_t, int);
typedef int (*dt_curand_offset_fn)(dt_curand_gen_t, unsigned long long);
typedef int (*dt_curand_generate_fn)(dt_curand_gen_t, unsigned int *, size_t);
typedef int (*dt_curand_destroy_fn)(dt_curand_gen_t);
#define DT_CURAND_RNG_PSEUDO_PHILOX4_32_10 161
#define DT_CURAND_ORDERING_PSEUDO_LEGACY 103

struct dt_curand {
    void *lib;
    dt_curand_create_fn create;
    dt_curand_seed_fn seed;
    dt_curand_order_fn order;
    dt_curand_offset_fn offset;
    dt_curand_generate_fn generate;
    dt_curand_destroy_fn destroy;
};

static int dt_curand_load(struct dt_curand *c, char *why, size_t why_len)
{
    const char *names[] = {
#ifdef DT_CURAND_LIBRARY
        DT_CURAND_LIBRARY, /* found by CMake (tests/test_rng.cmake) */
#endif
        "libcurand.so",
        "libcurand.so.10",
        "/usr/local/cuda/lib64/libcurand.so",
        "/usr/local/cuda/lib64/libcurand.so.10",
        "/usr/local/cuda/targets/x86_64-linux/lib/libcurand.so",
        "/usr/local/cuda/targets/x86_64-linux/lib/libcurand.so.10",
    };
    size_t used = 0;
    why[0] = 0;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        void *lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (!lib) {
            const char *e = dlerror();
            int n =
                snprintf(why + used, why_len - used, "%s%s", used ? "; " : "", e ? e : names[i]);
            if (n > 0 && (size_t)n < why_len - used) used += (size_t)n;
            continue;
        }
        c->lib = lib;
        c->create = (dt_curand_create_fn)dlsym(lib, "curandCreateGeneratorHost");
        c->seed = (dt_curand_seed_fn)dlsym(lib, "curandSetPseudoRandomGeneratorSeed");
        c->order = (dt_curand_order_fn)dlsym(lib, "curandSetGeneratorOrdering");
        c->offset = (dt_curand_offset_fn)dlsym(lib, "curandSetGeneratorOffset");
        c->generate = (dt_curand_generate_fn)dlsym(lib, "curandGenerate");
        c->destroy = (dt_curand_destroy_fn)dlsym(lib, "curandDestroyGenerator");
        if (c->create && c->seed && c->order && c->offset && c->generate && c->destroy) return 1;
        snprintf(why, why_len, "%s lacks a curand host API symbol", names[i]);
        dlclose(lib);
        return 0;
    }
    return 0;
}

/* cuRAND's LEGACY host ordering for Philox4x32-10, found empirically (CUDA 13.0, cuRAND
 * 10) and checked exactly below: the generator runs 65536 interleaved subsequences. Output
 * j of the generator's stream (counting across curandGenerate calls, starting at
 * curandSetGeneratorOffset's value) is word j % 4 of Philox(key = seed, counter) with
 *     q = j / 4,  t = q % 65536 (thread = subsequence),  b = q / 65536 (block),
 *     counter = (b lo, b hi, t, 0),
 * i.e. the b-th curand4() of a device thread initialised with curand_init(seed, t, 0), or
 * curand_init(seed, subsequence = t, offset = 4 b). In our layout that is element 4 b +
 * j % 4 of the stream (seed, step = t, tensor 0, member 0, sample 0): the host API confirms
 * key = seed, offset/4 -> counter words 0-1 (block high half included, reached through
 * curandSetGeneratorOffset) and subsequence bits 0-15 -> counter word 2. It cannot reach
 * subsequence bits 32-63 (counter word 3, our tensor/member/sample word): that part of the
 * claim in philox.h rests on the device code, curand_kernel.h's curand_init ->
 * skipahead_sequence -> Philox_State_Incr_hi (curand_philox4x32_x.h), which adds the
 * subsequence's low half to counter word 2 and its high half to word 3; checking it needs a
 * GPU run of the device API.
 * Bugs caught: any Philox difference from NVIDIA's implementation, the key halves swapped,
 * the block counter in the wrong words (or its high half dropped), the step in the wrong
 * word. */
static uint32_t legacy_expected(uint64_t seed, uint64_t j)
{
    uint64_t q = j / 4;
    struct dt_philox_stream s = dt_philox_stream_make(seed, (uint32_t)(q % 65536), 0, 0, 0);
    uint32_t w[4];
    dt_philox_block(w, &s, q / 65536);
    return w[j % 4];
}

static int64_t curand_compare(const struct dt_curand *c, uint64_t seed, uint64_t offset,
                              const size_t *counts, int ncalls)
{
    dt_curand_gen_t g = NULL;
    int rc = c->create(&g, DT_CURAND_RNG_PSEUDO_PHILOX4_32_10);
    if (rc != 0) {
        fprintf(stderr, "curandCreateGeneratorHost: status %d\n", rc);
        return -1;
    }
    int64_t bad = 0;
    if ((rc = c->order(g, DT_CURAND_ORDERING_PSEUDO_LEGACY)) != 0 || (rc = c->seed(g, seed)) != 0 ||
        (offset && (rc = c->offset(g, offset)) != 0)) {
        fprintf(stderr, "curand set-up: status %d\n", rc);
        c->destroy(g);
        return -1;
    }
    uint64_t j = offset;
    for (int call = 0; call < ncalls; call++) {
        unsigned int *out = xmalloc(counts[call] * sizeof *out);
        rc = c->generate(g, out, counts[call]);
        if (rc != 0) {
            fprintf(stderr, "curandGenerate: status %d\n", rc);
            bad = -1;
        } else {
            for (size_t i = 0; i < counts[call]; i++, j++) {
                uint32_t want = legacy_expected(seed, j);
                if (out[i] != want && bad++ < 3)
                    fprintf(stderr,
                            "seed %016" PRIx64 " output %" PRIu64 ": curand %08x, ours %08x\n",
                            seed, j, out[i], want);
            }
        }
        free(out);
        if (bad < 0) break;
    }
    c->destroy(g);
    return bad;
}

DT_TEST(philox_matches_curand_host)
{
    struct dt_curand c;
    char why[2048];
    if (!dt_curand_load(&c, why, sizeof why)) {
        fprintf(stderr, "no usable libcurand: %s\n", why);
        DT_SKIP("cuRAND host library not found (needs the CUDA toolkit's libcurand.so)");
    }
    static const uint64_t seeds[] = {0, 1, 0x123456789abcdef0ULL, 0xfedcba9876543210ULL,
                                     UINT64_MAX};
    /* One call past two wraps of the 65536 subsequences ending mid-block, then a call that
     * continues from there. */
    const size_t counts[2] = {2 * 4 * 65536 + 4 * 37 + 3, 4099};
    for (int i = 0; i < 5; i++) CHECK_INT_EQ(curand_compare(&c, seeds[i], 0, counts, 2), 0);
    /* Far offsets: block 2^32 + 5 (counter word 1 = 1), starting mid-block. */
    const size_t far[1] = {4 * 65536 + 4103};
    uint64_t off = 4ull * 65536 * ((UINT64_C(1) << 32) + 5) + 4 * 7 + 1;
    CHECK_INT_EQ(curand_compare(&c, 0xfedcba9876543210ULL, off, far, 1), 0);
    CHECK_INT_EQ(curand_compare(&c, 42, 4ull * 65536 * 0xffffffffULL + 65535 * 4 + 2, far, 1), 0);
    /* No dlclose: libcurand's C++ runtime keeps a static allocation (72704 bytes, the
     * exception-handling pool) that LeakSanitizer reports once the library is unmapped. */
}

/* ---- Box-Muller kernels: accuracy ------------------------------------------------------ */

static double ulps_float(double got, double ref)
{
    double a = fabs(ref);
    int q = a == 0.0 ? -149 : ilogb(a) - 23;
    if (q < -149) q = -149;
    return fabs(got - ref) / ldexp(1.0, q);
}

/* Error bounds enforced (measured over every k in [0, 2^24) against double libm, x86-64,
 * gcc 12 -O2 and clang 14 -O2 alike):
 *   dt_gauss_log_u24    max 0.8222 ulp (k = 11734022, u = 0.699); bound 0.9 ulp
 *   dt_gauss_sincos_u24 max abs error 8.86e-8 for sin (k = 2087152) and for cos
 *                       (k = 14670064); bound 1.0e-7
 * Bugs caught: a wrong reduced argument in any of log's three ranges (an off-by-one in k,
 * the wrong exponent, f rounded instead of exact), a polynomial coefficient typo, a wrong
 * quadrant rotation or sin/cos swap, the reflection t -> 1 - t applied at the wrong point. */
#define DT_GAUSS_LOG_ULP_BOUND 0.9
#define DT_GAUSS_SINCOS_ABS_BOUND 1.0e-7
DT_TEST(gauss_log_sincos_accuracy)
{
    /* Every k: about 0.7 s in the normal build, 1.3 s under ASan/UBSan. */
    const uint32_t stride = 1;
    double t0 = now_s();
    double max_log = 0, max_sin = 0, max_cos = 0;
    uint32_t at_log = 0, at_sin = 0, at_cos = 0;
    int64_t nonfinite = 0;
    for (uint64_t kk = 0; kk < (1u << 24); kk += stride) {
        uint32_t k = (uint32_t)kk;
        double u = ((double)k + 0.5) * 0x1p-24;
        float l = dt_gauss_log_u24(k);
        if (!isfinite(l) || !(l < 0)) nonfinite++;
        double e = ulps_float(l, log(u));
        if (e > max_log) max_log = e, at_log = k;
        float sn, cs;
        dt_gauss_sincos_u24(k, &sn, &cs);
        double th = 2.0 * M_PI * u;
        double es = fabs(sn - sin(th)), ec = fabs(cs - cos(th));
        if (es > max_sin) max_sin = es, at_sin = k;
        if (ec > max_cos) max_cos = ec, at_cos = k;
    }
    /* The range edges and the log branch boundaries (already in a full sweep; kept for a
     * strided one). */
    static const uint32_t edges[] = {0,
                                     1,
                                     (1u << 23) - 1,
                                     1u << 23,
                                     DT_GAUSS_K_SQRT_HALF - 1,
                                     DT_GAUSS_K_SQRT_HALF,
                                     (1u << 24) - 1,
                                     1u << 22,
                                     (1u << 22) - 1,
                                     3u << 22,
                                     (3u << 22) - 1};
    for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++) {
        uint32_t k = edges[i];
        double u = ((double)k + 0.5) * 0x1p-24;
        double e = ulps_float(dt_gauss_log_u24(k), log(u));
        if (e > max_log) max_log = e, at_log = k;
        float sn, cs;
        dt_gauss_sincos_u24(k, &sn, &cs);
        double es = fabs(sn - sin(2.0 * M_PI * u)), ec = fabs(cs - cos(2.0 * M_PI * u));
        if (es > max_sin) max_sin = es, at_sin = k;
        if (ec > max_cos) max_cos = ec, at_cos = k;
    }
    fprintf(stderr,
            "stride %u: log max %.4f ulp (k = %u); sin max %.3g (k = %u), cos max %.3g "
            "(k = %u); %.2f s\n",
            stride, max_log, at_log, max_sin, at_sin, max_cos, at_cos, now_s() - t0);
    CHECK_INT_EQ(nonfinite, 0);
    CHECK(max_log <= DT_GAUSS_LOG_ULP_BOUND);
    CHECK(max_sin <= DT_GAUSS_SINCOS_ABS_BOUND);
    CHECK(max_cos <= DT_GAUSS_SINCOS_ABS_BOUND);
    /* The extreme radius: u1 = 2^-25 gives |z| <= sqrt(50 ln 2) = 5.887. */
    float z0, z1;
    dt_gauss_pair(0, 0, &z0, &z1);
    CHECK_NEAR(z0, sqrt(50 * log(2.0)) * cos(2 * M_PI * 0x1p-25), 2e-6);
}

/* ---- statistics ------------------------------------------------------------------------ */

/* Sort floats (no NaNs) ascending: LSD radix sort on order-preserving keys. */
static void sort_floats(float *x, int64_t n)
{
    uint32_t *a = xmalloc((size_t)n * sizeof *a), *b = xmalloc((size_t)n * sizeof *b);
    for (int64_t i = 0; i < n; i++) {
        uint32_t u = f2u(x[i]);
        a[i] = (u & 0x80000000u) ? ~u : u | 0x80000000u;
    }
    for (int pass = 0; pass < 3; pass++) {
        int shift = 11 * pass;
        int64_t cnt[2049] = {0};
        for (int64_t i = 0; i < n; i++) cnt[((a[i] >> shift) & 0x7ff) + 1]++;
        for (int d = 0; d < 2048; d++) cnt[d + 1] += cnt[d];
        for (int64_t i = 0; i < n; i++) b[cnt[(a[i] >> shift) & 0x7ff]++] = a[i];
        uint32_t *t = a;
        a = b;
        b = t;
    }
    for (int64_t i = 0; i < n; i++) {
        uint32_t u = (a[i] & 0x80000000u) ? a[i] & 0x7fffffffu : ~a[i];
        memcpy(&x[i], &u, sizeof u);
    }
    free(a);
    free(b);
}

static double normal_cdf(double x) { return 0.5 * erfc(-x / M_SQRT2); }

/* x with normal_cdf(x) = p, by bisection (monotone; to the last representable step). */
static double normal_quantile(double p)
{
    double lo = -40, hi = 40;
    for (int i = 0; i < 200; i++) {
        double mid = 0.5 * (lo + hi);
        if (mid == lo || mid == hi) break;
        if (normal_cdf(mid) < p) lo = mid;
        else hi = mid;
    }
    return 0.5 * (lo + hi);
}

struct nstats {
    double mean, var, skew, exkurt, ks, chi2;
    int64_t n, tail3, tail4;
};

/* Moments, tail counts, the KS distance to N(0, 1) and chi^2 over 1000 equiprobable bins.
 * Sorts z. */
static struct nstats normal_stats(float *z, int64_t n)
{
    struct nstats r;
    memset(&r, 0, sizeof r);
    r.n = n;
    double s = 0;
    for (int64_t i = 0; i < n; i++) {
        s += z[i];
        double a = fabs(z[i]);
        r.tail3 += a > 3;
        r.tail4 += a > 4;
    }
    r.mean = s / (double)n;
    double m2 = 0, m3 = 0, m4 = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = z[i] - r.mean, d2 = d * d;
        m2 += d2;
        m3 += d2 * d;
        m4 += d2 * d2;
    }
    r.var = m2 / (double)n;
    r.skew = m3 / (double)n / pow(r.var, 1.5);
    r.exkurt = m4 / (double)n / (r.var * r.var) - 3;

    sort_floats(z, n);
    /* KS: D = max over sorted x_(i) of i/n - F and F - (i-1)/n (ties handled: the extreme
     * terms of a tied run are the ECDF's values just before and at the tie). */
    double d = 0, f = 0;
    float prev = 0;
    for (int64_t i = 0; i < n; i++) {
        if (i == 0 || z[i] != prev) f = normal_cdf(z[i]), prev = z[i];
        double up = (double)(i + 1) / (double)n - f, down = f - (double)i / (double)n;
        if (up > d) d = up;
        if (down > d) d = down;
    }
    r.ks = d;
    /* chi^2: bin m = [q(m/1000), q((m+1)/1000)). */
    enum { BINS = 1000 };
    double edge[BINS + 1];
    for (int m = 1; m < BINS; m++) edge[m] = normal_quantile((double)m / BINS);
    edge[0] = -INFINITY;
    edge[BINS] = INFINITY;
    int64_t i = 0;
    double expect = (double)n / BINS, chi2 = 0;
    for (int m = 0; m < BINS; m++) {
        int64_t c = 0;
        while (i < n && z[i] < edge[m + 1]) i++, c++;
        chi2 += ((double)c - expect) * ((double)c - expect) / expect;
    }
    r.chi2 = chi2;
    return r;
}

/* Bounds of about 4 standard errors at N = 10^7 (../shared/research §7): KS at alpha = 0.01,
 * chi^2 at p = 0.001 for 999 degrees of freedom. */
static void check_normal(const char *what, float *z, int64_t n)
{
    double t0 = now_s();
    struct nstats r = normal_stats(z, n);
    double p3 = erfc(3 / M_SQRT2), p4 = erfc(4 / M_SQRT2);
    double e3 = (double)n * p3, e4 = (double)n * p4;
    double sd3 = sqrt(e3 * (1 - p3)), sd4 = sqrt(e4 * (1 - p4));
    fprintf(stderr,
            "%s: N %" PRId64 " mean %.3e var-1 %.3e skew %.3e exkurt %.3e KS %.3e chi2 %.1f "
            "tail3 %" PRId64 " (%.1f sd) tail4 %" PRId64 " (%.1f sd) [%.2f s]\n",
            what, n, r.mean, r.var - 1, r.skew, r.exkurt, r.ks, r.chi2, r.tail3,
            ((double)r.tail3 - e3) / sd3, r.tail4, ((double)r.tail4 - e4) / sd4, now_s() - t0);
    CHECK(fabs(r.mean) < 1.3e-3);
    CHECK(fabs(r.var - 1) < 1.8e-3);
    CHECK(fabs(r.skew) < 3.1e-3);
    CHECK(fabs(r.exkurt) < 6.2e-3);
    CHECK(r.ks < 5.2e-4);
    CHECK(r.chi2 < 1143);
    CHECK(fabs((double)r.tail3 - e3) <= 4 * sd3);
    CHECK(fabs((double)r.tail4 - e4) <= 4 * sd4);
}

enum { STATS_N = 10000000, STATS_LANES = 1024 };
static const uint64_t stats_seed = 0x5eed0fda7a5e7ULL;

/* Bugs caught (both generators): a biased or mis-scaled transform (mean, variance), a
 * wrong Box-Muller pairing or angle range (KS, chi^2, skew), a truncated or fattened tail
 * (the 3 and 4 sigma rates; e.g. a CLT sampler fails them), uniforms that include 0 or
 * lose bits (chi^2 over 1000 bins resolves 1e-3 of probability). */
DT_TEST(gauss_statistics_philox)
{
    float *z = xmalloc(sizeof *z * STATS_N);
    struct dt_philox_stream s = dt_philox_stream_make(stats_seed, 1, 0, 0, 0);
    dt_eps_philox_range(z, 0, STATS_N, &s);
    check_normal("philox", z, STATS_N);
    free(z);
}

DT_TEST(gauss_statistics_lfsr)
{
    float *z = xmalloc(sizeof *z * STATS_N);
    for (int64_t lane = 0; lane < STATS_LANES; lane++) {
        struct dt_xoro st = dt_eps_lane_seed(stats_seed, 1, 0, 0, (uint64_t)lane);
        dt_eps_lane_forward(z, STATS_N, STATS_LANES, lane, &st);
    }
    check_normal("lfsr", z, STATS_N);
    free(z);
}

/* Pearson correlation accumulated over several segments (of z, or of z^2: squares catch
 * streams that share the Box-Muller radius but not the angle, which leaves corr(z) ~ 0). */
struct cacc {
    double n, sa, sb, saa, sbb, sab;
};
static void cacc_add(struct cacc *c, const float *a, const float *b, int64_t n, int squares)
{
    for (int64_t i = 0; i < n; i++) {
        double x = a[i], y = b[i];
        if (squares) x *= x, y *= y;
        c->sa += x;
        c->sb += y;
        c->saa += x * x;
        c->sbb += y * y;
        c->sab += x * y;
    }
    c->n += (double)n;
}
static double cacc_corr(const struct cacc *c)
{
    double ma = c->sa / c->n, mb = c->sb / c->n;
    double va = c->saa / c->n - ma * ma, vb = c->sbb / c->n - mb * mb;
    return (c->sab / c->n - ma * mb) / sqrt(va * vb);
}

static double worst_scaled_corr; /* max |r| sqrt(N) seen, for the summary line */

/* |r| < 4 / sqrt(N), with N >= 10^6 pairs. */
static void check_corr(const char *what, int squares, const struct cacc *c)
{
    double r = cacc_corr(c), bound = 4 / sqrt(c->n);
    if (fabs(r) * sqrt(c->n) > worst_scaled_corr) worst_scaled_corr = fabs(r) * sqrt(c->n);
    if (!(fabs(r) < bound) || c->n < 1e6) {
        fprintf(stderr, "%s%s: corr %.3e over %.0f pairs, bound %.3e\n", what,
                squares ? " (squares)" : "", r, c->n, bound);
        dt_check_failures_++;
    }
}

static void check_uncorrelated(const char *what, const float *a, const float *b, int64_t n)
{
    for (int sq = 0; sq < 2; sq++) {
        struct cacc c = {0};
        cacc_add(&c, a, b, n, sq);
        check_corr(what, sq, &c);
    }
}

enum { CORR_N = 1 << 20, CORR_LANES = 1024 }; /* lanes of CORR_N / CORR_LANES = 1024 */

static float *philox_tensor(uint64_t seed, uint32_t step, uint32_t tensor, uint32_t member,
                            uint32_t sample)
{
    float *z = xmalloc(sizeof *z * CORR_N);
    struct dt_philox_stream s = dt_philox_stream_make(seed, step, tensor, member, sample);
    dt_eps_philox_range(z, 0, CORR_N, &s);
    return z;
}

/* Tensor `tensor` of a run of equal-size tensors drawn by the lanes of (seed, step, member,
 * sample). */
static float *lfsr_tensor(uint64_t seed, uint32_t step, uint32_t tensor, uint32_t member,
                          uint32_t sample)
{
    float *z = xmalloc(sizeof *z * CORR_N);
    for (int64_t lane = 0; lane < CORR_LANES; lane++) {
        struct dt_xoro st = dt_eps_lane_seed(seed, step, member, sample, (uint64_t)lane);
        for (uint32_t t = 0; t <= tensor; t++)
            dt_eps_lane_forward(z, CORR_N, CORR_LANES, lane, &st);
    }
    return z;
}

/* Bugs caught: counter fields that collide or are ignored (two samples, tensors, steps or
 * members drawing the same or shifted numbers), lanes seeded as lagged copies of one
 * another, a lane seed that ignores a field, a pair (z0, z1) built from shared words.
 * Every comparison has >= 10^6 pairs and the bound 4 / sqrt(N) (about 4 standard errors). */
DT_TEST(gauss_streams_uncorrelated)
{
    double t0 = now_s();
    char what[128];
    typedef float *(*gen_fn)(uint64_t, uint32_t, uint32_t, uint32_t, uint32_t);
    const gen_fn gens[2] = {philox_tensor, lfsr_tensor};
    const char *names[2] = {"philox", "lfsr"};
    const uint64_t seed = 0x0ddba11cafef00dULL;
    for (int g = 0; g < 2; g++) {
        float *base = gens[g](seed, 7, 3, 5, 2);
        struct {
            const char *field;
            uint64_t seed;
            uint32_t step, tensor, member, sample;
        } other[] = {
            {"sample", seed, 7, 3, 5, 3},   {"tensor", seed, 7, 4, 5, 2},
            {"step", seed, 8, 3, 5, 2},     {"member", seed, 7, 3, 6, 2},
            {"seed", seed + 1, 7, 3, 5, 2},
        };
        for (size_t o = 0; o < sizeof other / sizeof other[0]; o++) {
            float *b = gens[g](other[o].seed, other[o].step, other[o].tensor, other[o].member,
                               other[o].sample);
            snprintf(what, sizeof what, "%s: different %s", names[g], other[o].field);
            check_uncorrelated(what, base, b, CORR_N);
            free(b);
        }
        /* sample 0 vs sample 1 of the first tensor at step 1 */
        {
            float *s0 = gens[g](seed, 1, 0, 0, 0), *s1 = gens[g](seed, 1, 0, 0, 1);
            snprintf(what, sizeof what, "%s: sample 0 vs 1", names[g]);
            check_uncorrelated(what, s0, s1, CORR_N);
            free(s0);
            free(s1);
        }
        /* lags 1..16 within the stream (pooled over lanes for lfsr, whose lanes are
         * separate streams; for philox lag 4 is the adjacent counter block) */
        const int64_t c = CORR_N / CORR_LANES;
        for (int lag = 1; lag <= 16; lag++) {
            snprintf(what, sizeof what, "%s: lag %d", names[g], lag);
            if (g == 0) {
                check_uncorrelated(what, base, base + lag, CORR_N - lag);
            } else {
                for (int sq = 0; sq < 2; sq++) {
                    struct cacc acc = {0};
                    for (int64_t j = 0; j < CORR_LANES; j++)
                        cacc_add(&acc, base + j * c, base + j * c + lag, c - lag, sq);
                    check_corr(what, sq, &acc);
                }
            }
        }
        /* adjacent lanes: chunk j vs chunk j + 1 element-wise, at offsets -16..16 (a lane
         * that is a lagged copy of its neighbour shows up at its lag) */
        if (g == 1) {
            for (int off = -16; off <= 16; off++) {
                for (int sq = 0; sq < 2; sq++) {
                    struct cacc acc = {0};
                    int64_t lo = off < 0 ? -off : 0, len = c - (off < 0 ? -off : off);
                    for (int64_t j = 0; j + 1 < CORR_LANES; j++)
                        cacc_add(&acc, base + j * c + lo, base + (j + 1) * c + lo + off, len, sq);
                    snprintf(what, sizeof what, "lfsr: adjacent lanes, offset %d", off);
                    check_corr(what, sq, &acc);
                }
            }
        }
        free(base);
    }
    fprintf(stderr, "max |corr| sqrt(N) = %.2f (bound 4); %.2f s\n", worst_scaled_corr,
            now_s() - t0);
}

/* ---- exact regeneration ------------------------------------------------------------------ */

/* Bugs caught: a backward walk that rebuilds the wrong pair, takes a different number of
 * steps than the forward walk (for short, odd or empty chunks: n = 10 with 1024 lanes
 * leaves 1014 lanes empty, yet each must still step once), a chunk split that leaves
 * elements unwritten or writes past the tensor, and lanes whose draw count depends on their
 * chunk instead of only on (n, P). The lane layout itself is checked against an independent
 * recomputation (jump to the element's step, dt_gauss_pair of its word). */
DT_TEST(lfsr_backward_regenerates)
{
    static const int64_t sizes[] = {313600, 400, 160000, 400, 4000, 10, 1};
    const int nt = (int)(sizeof sizes / sizeof sizes[0]);
    static const int64_t lane_counts[] = {1, 7, 1024};
    const uint32_t nan_bits = 0x7fc0dead;
    for (int ip = 0; ip < 3; ip++) {
        int64_t P = lane_counts[ip];
        struct dt_xoro *seed = xmalloc(sizeof *seed * (size_t)P);
        struct dt_xoro *st = xmalloc(sizeof *st * (size_t)P);
        float *fwd[8], *bwd[8];
        uint64_t cum = 0;
        for (int64_t j = 0; j < P; j++)
            st[j] = seed[j] = dt_eps_lane_seed(99, 3, 1, 0, (uint64_t)j);
        for (int t = 0; t < nt; t++) {
            int64_t n = sizes[t];
            fwd[t] = xmalloc(sizeof(float) * (size_t)(n + 2));
            bwd[t] = xmalloc(sizeof(float) * (size_t)(n + 2));
            for (int64_t i = 0; i < n + 2; i++) {
                memcpy(&fwd[t][i], &nan_bits, 4);
                memcpy(&bwd[t][i], &nan_bits, 4);
            }
            /* guard elements at [0] and [n + 1] */
            for (int64_t j = 0; j < P; j++) dt_eps_lane_forward(fwd[t] + 1, n, P, j, &st[j]);
            /* draw count: d / 2 steps with c = ceil(n / P), d = c rounded up to even */
            int64_t c = (n + P - 1) / P, steps = (c + 1) / 2;
            CHECK_INT_EQ(dt_eps_lane_steps(n, P), steps);
            cum += (uint64_t)steps;
            int64_t bad_state = 0;
            for (int64_t j = 0; j < P; j++) {
                struct dt_xoro want = seed[j];
                dt_xoro_jump(&want, cum);
                bad_state += !dt_xoro_equal(st[j], want);
            }
            if (bad_state)
                fprintf(stderr,
                        "P %" PRId64 " tensor %d: %" PRId64 " lanes not at seed + %" PRIu64
                        " steps\n",
                        P, t, bad_state, cum);
            CHECK_INT_EQ(bad_state, 0);
            int64_t unwritten = 0;
            for (int64_t i = 1; i <= n; i++) unwritten += f2u(fwd[t][i]) == nan_bits;
            CHECK_INT_EQ(unwritten, 0);
            CHECK(f2u(fwd[t][0]) == nan_bits && f2u(fwd[t][n + 1]) == nan_bits);
            /* independent recomputation of up to 1000 elements */
            int64_t wrong = 0;
            for (int64_t q = 0; q < 1000 && q < n; q++) {
                int64_t e =
                    n <= 1000 ? q : (int64_t)(dt_mix64((uint64_t)(q + 31 * t)) % (uint64_t)n);
                int64_t j = e / c, k = (e - j * c) / 2;
                struct dt_xoro s = seed[j];
                dt_xoro_jump(&s, cum - (uint64_t)steps + (uint64_t)k);
                uint64_t w = dt_xoro_out(s);
                float z0, z1;
                dt_gauss_pair((uint32_t)(w >> 32), (uint32_t)w, &z0, &z1);
                float want = ((e - j * c) & 1) ? z1 : z0;
                wrong += f2u(fwd[t][1 + e]) != f2u(want);
            }
            CHECK_INT_EQ(wrong, 0);
        }
        for (int t = nt - 1; t >= 0; t--) {
            int64_t n = sizes[t];
            for (int64_t j = 0; j < P; j++) dt_eps_lane_backward(bwd[t] + 1, n, P, j, &st[j]);
            if (memcmp(fwd[t], bwd[t], sizeof(float) * (size_t)(n + 2)) != 0) {
                int64_t first = -1;
                for (int64_t i = 0; i < n + 2 && first < 0; i++)
                    if (f2u(fwd[t][i]) != f2u(bwd[t][i])) first = i - 1;
                fprintf(stderr,
                        "P %" PRId64 " tensor %d (n %" PRId64 "): backward epsilon differs "
                        "first at element %" PRId64 "\n",
                        P, t, n, first);
                dt_check_failures_++;
            }
        }
        int64_t not_home = 0;
        for (int64_t j = 0; j < P; j++) not_home += !dt_xoro_equal(st[j], seed[j]);
        CHECK_INT_EQ(not_home, 0);
        for (int t = 0; t < nt; t++) {
            free(fwd[t]);
            free(bwd[t]);
        }
        free(seed);
        free(st);
    }
}

/* Bugs caught: a range fill that depends on where it starts (a misaligned begin reading
 * the wrong word of the block, or restarting the Box-Muller pairing at `begin`), writes
 * outside [begin, end), or a block index truncated to 32 bits (the range across block
 * 2^32). Each element is also checked against the documented layout: element 4b + m is
 * from words (0, 1) for m < 2 and (2, 3) otherwise of counter (b lo, b hi, step, word3). */
DT_TEST(eps_philox_tiling_independent)
{
    enum { N = 10007 };
    struct dt_philox_stream s = dt_philox_stream_make(0xfeedfacecafebeefULL, 12, 34, 56, 78);
    float *whole = xmalloc(sizeof(float) * (N + 2)), *tiled = xmalloc(sizeof(float) * (N + 2));
    const uint32_t guard = 0x7fc0beef;
    memcpy(&whole[0], &guard, 4);
    memcpy(&whole[N + 1], &guard, 4);
    dt_eps_philox_range(whole + 1, 0, N, &s);
    CHECK(f2u(whole[0]) == guard && f2u(whole[N + 1]) == guard);

    int64_t wrong = 0;
    for (int64_t b = 0; 4 * b < N; b++) {
        uint32_t w[4];
        uint32_t ctr[4] = {(uint32_t)b, 0, s.step, s.word3};
        dt_philox4x32_10(w, ctr, s.key);
        float z[4];
        dt_gauss_pair(w[0], w[1], &z[0], &z[1]);
        dt_gauss_pair(w[2], w[3], &z[2], &z[3]);
        for (int m = 0; m < 4 && 4 * b + m < N; m++)
            wrong += f2u(whole[1 + 4 * b + m]) != f2u(z[m]);
    }
    CHECK_INT_EQ(wrong, 0);

    /* Each piece goes to a buffer of its own with a guard word on either side, so a write
     * outside [begin, end) shows even when it would store the right value. */
    uint64_t r = 1;
    int64_t mismatched_tilings = 0, guard_hits = 0;
    float *piece = xmalloc(sizeof(float) * (N + 2));
    for (int trial = 0; trial < 300; trial++) {
        for (int64_t i = 0; i < N + 2; i++) memcpy(&tiled[i], &guard, 4);
        int64_t begin = 0;
        while (begin < N) {
            /* first trials: every small piece size 1..8 (all alignments); then random */
            int64_t len = trial < 8 ? trial + 1 : 1 + (int64_t)(dt_mix64(r++) % 900);
            int64_t end = begin + len < N ? begin + len : N;
            memcpy(&piece[0], &guard, 4);
            memcpy(&piece[end - begin + 1], &guard, 4);
            dt_eps_philox_range(piece + 1, begin, end, &s);
            guard_hits += f2u(piece[0]) != guard || f2u(piece[end - begin + 1]) != guard;
            memcpy(tiled + 1 + begin, piece + 1, sizeof(float) * (size_t)(end - begin));
            begin = end;
        }
        if (memcmp(whole, tiled, sizeof(float) * (N + 2)) != 0) mismatched_tilings++;
    }
    free(piece);
    CHECK_INT_EQ(mismatched_tilings, 0);
    CHECK_INT_EQ(guard_hits, 0);

    /* Out-of-order pieces, including empty ranges. */
    for (int64_t i = 0; i < N + 2; i++) memcpy(&tiled[i], &guard, 4);
    for (int64_t begin = N - 3; begin > -3; begin -= 3) {
        int64_t lo = begin < 0 ? 0 : begin;
        dt_eps_philox_range(tiled + 1 + lo, lo, begin + 3, &s);
        dt_eps_philox_range(tiled + 1 + lo, lo, lo, &s);
    }
    CHECK(memcmp(whole, tiled, sizeof(float) * (N + 2)) == 0);

    /* Across block 2^32: element i = 2^34 - 7 .. 2^34 + 9. */
    {
        const int64_t lo = (INT64_C(1) << 34) - 7, hi = (INT64_C(1) << 34) + 9;
        float got[16 + 2], part[16];
        dt_eps_philox_range(got, lo, hi, &s);
        dt_eps_philox_range(part, lo, lo + 5, &s);
        dt_eps_philox_range(part + 5, lo + 5, hi, &s);
        CHECK(memcmp(got, part, sizeof part) == 0);
        int64_t bad = 0;
        for (int64_t i = lo; i < hi; i++) {
            uint64_t b = (uint64_t)i >> 2;
            uint32_t w[4], ctr[4] = {(uint32_t)b, (uint32_t)(b >> 32), s.step, s.word3};
            dt_philox4x32_10(w, ctr, s.key);
            float z[4];
            dt_gauss_pair(w[0], w[1], &z[0], &z[1]);
            dt_gauss_pair(w[2], w[3], &z[2], &z[3]);
            bad += f2u(got[i - lo]) != f2u(z[i & 3]);
        }
        CHECK_INT_EQ(bad, 0);
    }
    free(whole);
    free(tiled);
}

/* ---- pinned bits ----------------------------------------------------------------------- */

static uint64_t fold32(uint64_t h, uint32_t w) { return dt_mix64(h ^ w) + 0x9e3779b97f4a7c15ULL; }
static uint64_t fold_floats(uint64_t h, const float *z, int64_t n)
{
    for (int64_t i = 0; i < n; i++) h = fold32(h, f2u(z[i]));
    return h;
}

/* Digests of the exact bits: the Box-Muller kernels over every 7th k, Philox epsilon
 * streams (philox_layout 1) and reversible-lane epsilons. Every run's epsilons are a
 * function of these definitions, so any change to them -- even one that keeps the accuracy
 * and statistics tests passing, such as a polynomial coefficient moved by one ulp or a
 * reordered product -- changes results of recorded runs and must come with a new layout
 * version and new digests here. */
/* Identical under gcc 12 -O2 and -O0 and clang 14 -O2 (x86-64, -ffp-contract=off). */
#define DT_PIN_KERNELS 0xad337e97cc4f0cafULL
#define DT_PIN_PHILOX 0xcad0c88ce8429562ULL
#define DT_PIN_LFSR 0x74179239ee89ce69ULL
DT_TEST(eps_bits_pinned)
{
    uint64_t h = 0;
    for (uint32_t k = 0; k < (1u << 24); k += 7) {
        float sn, cs;
        dt_gauss_sincos_u24(k, &sn, &cs);
        h = fold32(fold32(fold32(h, f2u(dt_gauss_log_u24(k))), f2u(sn)), f2u(cs));
    }
    fprintf(stderr, "kernels %016" PRIx64 "\n", h);
    CHECK(h == DT_PIN_KERNELS);

    enum { N = 1 << 16 };
    float *z = xmalloc(sizeof *z * N);
    h = 0;
    static const uint32_t fields[3][4] = {
        {0, 0, 0, 0}, {1, 3, 5, 7}, {0xffffffffu, 0xffe, 0xfff, 0xff}};
    for (int f = 0; f < 3; f++) {
        struct dt_philox_stream s = dt_philox_stream_make(0x0123456789abcdefULL, fields[f][0],
                                                          fields[f][1], fields[f][2], fields[f][3]);
        dt_eps_philox_range(z, 0, N, &s);
        h = fold_floats(h, z, N);
    }
    fprintf(stderr, "philox %016" PRIx64 "\n", h);
    CHECK(h == DT_PIN_PHILOX);

    h = 0;
    static const int64_t sizes[3] = {N, 1001, 3};
    for (int64_t lane = 0; lane < 7; lane++) {
        struct dt_xoro st = dt_eps_lane_seed(0x0123456789abcdefULL, 2, 1, 3, (uint64_t)lane);
        h = fold32(fold32(h, (uint32_t)st.s0), (uint32_t)(st.s1 >> 32));
        for (int t = 0; t < 3; t++) dt_eps_lane_forward(z, sizes[t], 7, lane, &st);
    }
    for (int t = 0; t < 3; t++) {
        for (int64_t lane = 0; lane < 7; lane++) {
            struct dt_xoro st = dt_eps_lane_seed(0x0123456789abcdefULL, 2, 1, 3, (uint64_t)lane);
            for (int u = 0; u <= t; u++) dt_eps_lane_forward(z, sizes[u], 7, lane, &st);
        }
        h = fold_floats(h, z, sizes[t]);
    }
    fprintf(stderr, "lfsr %016" PRIx64 "\n", h);
    CHECK(h == DT_PIN_LFSR);
    free(z);
}

/* ---- raw streams for dieharder (tests/rng_dieharder.sh), not CTest cases ------------------ */

/* Write words to stdout until the reader goes away (EPIPE), or DT_RNG_DUMP_WORDS words. */
static int dump_words(const uint32_t *w, size_t n, uint64_t *left)
{
    if (*left < n) n = (size_t)*left;
    if (fwrite(w, sizeof *w, n, stdout) != n) return 0;
    *left -= n;
    return *left > 0;
}
static uint64_t dump_limit(void)
{
    signal(SIGPIPE, SIG_IGN);
    const char *e = getenv("DT_RNG_DUMP_WORDS");
    return e ? strtoull(e, NULL, 0) : UINT64_MAX;
}
/* The step field of the dumped streams (DT_RNG_DUMP_STEP, default 1), so that successive
 * dieharder tests can each read fresh words. */
static uint32_t dump_step(void)
{
    const char *e = getenv("DT_RNG_DUMP_STEP");
    return e ? (uint32_t)strtoul(e, NULL, 0) : 1u;
}

/* Philox words in element order of one stream (seed 0x1234567887654321, step from
 * DT_RNG_DUMP_STEP, tensor/member/sample 0): block 0 words 0-3, block 1, ... */
DT_TEST(dump_philox)
{
    uint64_t left = dump_limit();
    enum { B = 4096 };
    static uint32_t buf[4 * B];
    struct dt_philox_stream s = dt_philox_stream_make(0x1234567887654321ULL, dump_step(), 0, 0, 0);
    for (uint64_t block = 0;; block += B) {
        for (int i = 0; i < B; i++) dt_philox_block(buf + 4 * i, &s, block + (uint64_t)i);
        if (!dump_words(buf, 4 * B, &left)) break;
    }
}

/* Lane outputs as epsilon draws consume them (lanes of seed 0x1234567887654321, step from
 * DT_RNG_DUMP_STEP, member and sample 0): tensors of 2^20 elements with 1024 lanes,
 * lane 0's 512 steps, then lane 1's, ...; each step's 64-bit output as its high then its
 * low 32-bit half (the word order of dt_eps__put). */
DT_TEST(dump_lfsr)
{
    uint64_t left = dump_limit();
    enum { P = 1024, STEPS = 512 };
    static struct dt_xoro st[P];
    static uint32_t buf[2 * STEPS];
    const uint32_t step = dump_step();
    for (int j = 0; j < P; j++)
        st[j] = dt_eps_lane_seed(0x1234567887654321ULL, step, 0, 0, (uint64_t)j);
    for (;;) {
        for (int j = 0; j < P; j++) {
            for (int k = 0; k < STEPS; k++) {
                uint64_t w = dt_xoro_out(st[j]);
                dt_xoro_next(&st[j]);
                buf[2 * k] = (uint32_t)(w >> 32);
                buf[2 * k + 1] = (uint32_t)w;
            }
            if (!dump_words(buf, 2 * STEPS, &left)) return;
        }
    }
}

DT_TEST_MAIN(DT_CASE(xoro_round_trip), DT_CASE(xoro_jump_matches_steps),
             DT_CASE(xoro_zero_state_unreachable), DT_CASE(philox_random123_kat),
             DT_CASE(philox_matches_curand_host), DT_CASE(gauss_log_sincos_accuracy),
             DT_CASE(gauss_statistics_philox), DT_CASE(gauss_statistics_lfsr),
             DT_CASE(gauss_streams_uncorrelated), DT_CASE(lfsr_backward_regenerates),
             DT_CASE(eps_philox_tiling_independent), DT_CASE(eps_bits_pinned), DT_CASE(dump_philox),
             DT_CASE(dump_lfsr))
