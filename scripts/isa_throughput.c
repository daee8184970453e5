/* Instruction throughput on this CPU, one thread: the ceiling each kind of exact product can
 * reach (issue 51; results/cpu/exact-product/throughput.txt, scripts/results.sh
 * exact-product). Twelve independent chains per loop, so throughput, not latency, bounds
 * them. Multiply-accumulates per cycle-equivalent are reported per second:
 *   fp32 FMA       16 per zmm (8 per ymm): today's float products;
 *   vpmuldq + add  8 per zmm, 32 x 32 -> 64-bit: the exact product's wide path (one
 *                  28-bit level: 1 per MAC; two levels: 4);
 *   vpdpbusd       64 int8 x int8 per zmm: an int8 slice product (one level: 16 slice
 *                  pairs per MAC; two levels: 64).
 * With -DWITH_DNNL -ldnnl also oneDNN's sgemm against its s8s8s32 GEMM (one int8 slice
 * pair) at the MLP's first layer, 256 x 784 x 256, on the threads OMP_NUM_THREADS gives.
 * Not part of the build: results.sh compiles it with the system compiler. */
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#ifdef WITH_DNNL
#include <oneapi/dnnl/dnnl.h>
#endif

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

#define N_ITER 50000000L

__attribute__((target("avx512f"))) static double fma512(void)
{
    __m512 f[12], x = _mm512_set1_ps(0.999f);
    for (int i = 0; i < 12; i++) f[i] = _mm512_set1_ps((float)i);
    const double t = now();
    for (long i = 0; i < N_ITER; i++) {
#pragma GCC unroll 12
        for (int r = 0; r < 12; r++) f[r] = _mm512_fmadd_ps(x, f[r], x);
        __asm__ volatile("" ::"v"(f[0]));
    }
    const double s = now() - t;
    float sink = 0;
    for (int i = 0; i < 12; i++) sink += _mm512_reduce_add_ps(f[i]);
    __asm__ volatile("" ::"x"(sink));
    return (double)N_ITER * 12 * 16 / s;
}

__attribute__((target("avx2,fma"))) static double fma256(void)
{
    __m256 f[12], x = _mm256_set1_ps(0.999f);
    for (int i = 0; i < 12; i++) f[i] = _mm256_set1_ps((float)i);
    const double t = now();
    for (long i = 0; i < N_ITER; i++) {
#pragma GCC unroll 12
        for (int r = 0; r < 12; r++) f[r] = _mm256_fmadd_ps(x, f[r], x);
        __asm__ volatile("" ::"x"(f[0]));
    }
    const double s = now() - t;
    float out[8], sink = 0;
    for (int i = 0; i < 12; i++) {
        _mm256_storeu_ps(out, f[i]);
        sink += out[0];
    }
    __asm__ volatile("" ::"x"(sink));
    return (double)N_ITER * 12 * 8 / s;
}

__attribute__((target("avx512f"))) static double muldq512(void)
{
    __m512i c[12], a = _mm512_set1_epi64(3);
    for (int i = 0; i < 12; i++) c[i] = _mm512_set1_epi64(i);
    const double t = now();
    for (long i = 0; i < N_ITER; i++) {
#pragma GCC unroll 12
        for (int r = 0; r < 12; r++) c[r] = _mm512_add_epi64(c[r], _mm512_mul_epi32(a, c[r]));
        __asm__ volatile("" ::"v"(c[0]));
    }
    const double s = now() - t;
    long long sink = 0;
    for (int i = 0; i < 12; i++) sink += _mm512_reduce_add_epi64(c[i]);
    __asm__ volatile("" ::"r"(sink));
    return (double)N_ITER * 12 * 8 / s;
}

__attribute__((target("avx512f,avx512vnni"))) static double dpbusd512(void)
{
    __m512i d[12], u = _mm512_set1_epi8(3);
    for (int i = 0; i < 12; i++) d[i] = _mm512_set1_epi32(i);
    const double t = now();
    for (long i = 0; i < N_ITER; i++) {
#pragma GCC unroll 12
        for (int r = 0; r < 12; r++) d[r] = _mm512_dpbusd_epi32(d[r], u, d[r]);
        __asm__ volatile("" ::"v"(d[0]));
    }
    const double s = now() - t;
    long long sink = 0;
    for (int i = 0; i < 12; i++) sink += _mm512_reduce_add_epi32(d[i]);
    __asm__ volatile("" ::"r"(sink));
    return (double)N_ITER * 12 * 64 / s;
}

#ifdef WITH_DNNL
static void dnnl_gemms(void)
{
    enum { M = 256, K = 784, N = 256 };
    float *A = malloc(sizeof(float) * M * K), *B = malloc(sizeof(float) * K * N);
    float *C = malloc(sizeof(float) * M * N);
    int8_t *a = malloc(M * K), *b = malloc(K * N);
    int32_t *c = malloc(sizeof(int32_t) * M * N), co = 0;
    for (long i = 0; i < (long)M * K; i++)
        A[i] = (float)(i % 97) / 97.0f, a[i] = (int8_t)(i % 255 - 127);
    for (long i = 0; i < (long)K * N; i++)
        B[i] = (float)(i % 89) / 89.0f, b[i] = (int8_t)(i % 251 - 125);
    double bs = 1e9, bi = 1e9;
    for (int r = 0; r < 30; r++) { /* best of 30, alternated */
        double t = now();
        dnnl_sgemm('N', 'N', M, N, K, 1.0f, A, K, B, N, 0.0f, C, N);
        t = now() - t;
        bs = t < bs ? t : bs;
        t = now();
        dnnl_gemm_s8s8s32('N', 'N', 'F', M, N, K, 1.0f, a, K, 0, b, N, 0, 0.0f, c, N, &co);
        t = now() - t;
        bi = t < bi ? t : bi;
    }
    printf(
        "oneDNN %dx%dx%d (OMP_NUM_THREADS=%s): sgemm %.3f ms, gemm_s8s8s32 %.3f ms per int8 "
        "slice pair: one level (16 pairs) >= %.2f ms (%.1fx sgemm), two levels (64) >= %.2f ms\n",
        M, K, N, getenv("OMP_NUM_THREADS") ? getenv("OMP_NUM_THREADS") : "all", bs * 1e3, bi * 1e3,
        16 * bi * 1e3, 16 * bi / bs, 64 * bi * 1e3);
    free(A), free(B), free(C), free(a), free(b), free(c);
}
#endif

int main(void)
{
    __builtin_cpu_init();
#ifdef WITH_DNNL
    dnnl_gemms();
#endif
    printf("one thread, 12 independent chains, %ld iterations each; G = 1e9 per second\n", N_ITER);
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        printf("  fp32 FMA (ymm)            %7.1f G multiply-adds\n", fma256() / 1e9);
    if (!__builtin_cpu_supports("avx512f")) {
        printf("  no AVX-512: the exact product runs its portable C form here\n");
        return 0;
    }
    const double f = fma512(), m = muldq512();
    printf("  fp32 FMA (zmm)            %7.1f G multiply-adds\n", f / 1e9);
    printf("  vpmuldq + vpaddq (zmm)    %7.1f G 32x32->64 products: one level %.1f G MACs "
           "(%.2fx fp32), two levels %.1f G (%.2fx)\n",
           m / 1e9, m / 1e9, m / f, m / 4e9, m / 4 / f);
    if (__builtin_cpu_supports("avx512vnni")) {
        const double d = dpbusd512();
        printf("  vpdpbusd (zmm)            %7.1f G int8 products: one level (16 slice pairs) "
               "%.1f G MACs (%.2fx fp32), two levels (64) %.1f G (%.2fx)\n",
               d / 1e9, d / 16e9, d / 16 / f, d / 64e9, d / 64 / f);
    } else {
        printf("  no AVX-512 VNNI\n");
    }
    return 0;
}
