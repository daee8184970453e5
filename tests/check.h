/* Minimal test harness: each tests/test_<module>.c defines cases with DT_TEST and a
 * DT_TEST_MAIN table; CTest runs one case per entry as `test_<module> <case>`.
 * Assertions print both sides. Exit 0 pass, 1 fail, 77 skipped. */
#ifndef DT_CHECK_H
#define DT_CHECK_H

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int dt_check_failures_;

#define DT_TEST(name) static void test_##name(void)

/* 1 in the ASan/UBSan build (tests/CMakeLists.txt): the learning tests run shortened there
 * -- the same code paths, memory-checked -- and leave their accuracy thresholds to the
 * normal build. */
#ifdef DT_SANITIZED_BUILD
#define DT_SANITIZED 1
#else
#define DT_SANITIZED 0
#endif

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);               \
            dt_check_failures_++;                                                                  \
        }                                                                                          \
    } while (0)

#define CHECK_INT_EQ(a, b)                                                                         \
    do {                                                                                           \
        long long a_ = (long long)(a), b_ = (long long)(b);                                        \
        if (a_ != b_) {                                                                            \
            fprintf(stderr, "%s:%d: CHECK_INT_EQ failed: %s == %s (%lld vs %lld)\n", __FILE__,     \
                    __LINE__, #a, #b, a_, b_);                                                     \
            dt_check_failures_++;                                                                  \
        }                                                                                          \
    } while (0)

#define CHECK_STR_EQ(a, b)                                                                         \
    do {                                                                                           \
        const char *a_ = (a), *b_ = (b);                                                           \
        if (strcmp(a_, b_) != 0) {                                                                 \
            fprintf(stderr,                                                                        \
                    "%s:%d: CHECK_STR_EQ failed: %s == %s\n  left:  \"%s\"\n  right: \"%s\"\n",    \
                    __FILE__, __LINE__, #a, #b, a_, b_);                                           \
            dt_check_failures_++;                                                                  \
        }                                                                                          \
    } while (0)

/* Substring check: the message must contain `needle`. */
#define CHECK_CONTAINS(hay, needle)                                                                \
    do {                                                                                           \
        const char *h_ = (hay), *n_ = (needle);                                                    \
        if (!strstr(h_, n_)) {                                                                     \
            fprintf(stderr, "%s:%d: CHECK_CONTAINS failed\n  text:   \"%s\"\n  wanted: \"%s\"\n",  \
                    __FILE__, __LINE__, h_, n_);                                                   \
            dt_check_failures_++;                                                                  \
        }                                                                                          \
    } while (0)

#define CHECK_NEAR(a, b, tol)                                                                      \
    do {                                                                                           \
        double a_ = (double)(a), b_ = (double)(b), t_ = (double)(tol);                             \
        if (!(fabs(a_ - b_) <= t_)) {                                                              \
            fprintf(stderr, "%s:%d: CHECK_NEAR failed: %s ~ %s (%.9g vs %.9g, tol %.3g)\n",        \
                    __FILE__, __LINE__, #a, #b, a_, b_, t_);                                       \
            dt_check_failures_++;                                                                  \
        }                                                                                          \
    } while (0)

#define DT_SKIP(why)                                                                               \
    do {                                                                                           \
        fprintf(stderr, "SKIPPED: %s\n", why);                                                     \
        exit(77);                                                                                  \
    } while (0)
/* A skip because no usable GPU is here (no device, a driver that fails, a build without
 * CUDA): said with this exact prefix, which scripts/gpu_session.sh's tests stage reads to tell
 * it from other skips (no MPI, no PyTorch): on the GPU machine this one is a failure. */
#define DT_SKIP_NO_GPU_PREFIX "SKIPPED (no usable GPU): "
#define DT_SKIP_NO_GPU(why)                                                                        \
    do {                                                                                           \
        fprintf(stderr, DT_SKIP_NO_GPU_PREFIX "%s\n", why);                                        \
        exit(77);                                                                                  \
    } while (0)

struct dt_test_case {
    const char *name;
    void (*fn)(void);
};

#define DT_CASE(name)                                                                              \
    {                                                                                              \
#name, test_##name                                                                         \
    }

/* Usage: DT_TEST_MAIN(DT_CASE(a), DT_CASE(b)) */
#define DT_TEST_MAIN(...)                                                                          \
    int main(int argc, char **argv)                                                                \
    {                                                                                              \
        static const struct dt_test_case cases[] = {__VA_ARGS__};                                  \
        int n = (int)(sizeof cases / sizeof cases[0]);                                             \
        if (argc != 2) {                                                                           \
            fprintf(stderr, "usage: %s CASE\ncases:", argv[0]);                                    \
            for (int i = 0; i < n; i++) fprintf(stderr, " %s", cases[i].name);                     \
            fprintf(stderr, "\n");                                                                 \
            return 2;                                                                              \
        }                                                                                          \
        for (int i = 0; i < n; i++) {                                                              \
            if (strcmp(argv[1], cases[i].name) == 0) {                                             \
                cases[i].fn();                                                                     \
                if (dt_check_failures_) {                                                          \
                    fprintf(stderr, "%d check(s) failed\n", dt_check_failures_);                   \
                    return 1;                                                                      \
                }                                                                                  \
                return 0;                                                                          \
            }                                                                                      \
        }                                                                                          \
        fprintf(stderr, "unknown case '%s'\n", argv[1]);                                           \
        return 2;                                                                                  \
    }

#endif
