/* CPU backend: the reference implementation every other backend is compared with.
 * Host memory, a pthread pool of a configurable size, and the ops in nets/cpu/. */
#include <cblas.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nets/cpu/conv_dnnl.h"
#include "nets/cpu/cpu.h"
#include "nets/gather_hd.h"
#include "determinism/streams.h"

/* OpenBLAS's thread control (declared in its cblas.h as openblas_set_num_threads). */

static int online_cpus(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 1) n = 1;
    if (n > 64) n = 64;
    return (int)n;
}

static enum dt_status cpu_init(struct dt_backend *be, const struct dt_backend_options *opt,
                               struct dt_error *err)
{
    int threads = opt->threads > 0 ? opt->threads : online_cpus();
    if (threads > 256)
        return dt_error_set(err, DT_ERR_USAGE, "backend 'cpu': %d threads is more than 256",
                            threads);
    const char *isa = getenv("DETRAIN_CPU_ISA");
    if (isa && *isa && strcmp(isa, "auto") != 0 && strcmp(isa, "avx2") != 0)
        return dt_error_set(err, DT_ERR_USAGE,
                            "DETRAIN_CPU_ISA='%s': give auto (the widest kernels this CPU has) or "
                            "avx2 (no AVX-512 kernels: the path an AVX2 machine takes)",
                            isa);
    int spin_us = DT_POOL_SPIN_US;
    const char *spin = getenv("DETRAIN_POOL_SPIN_US");
    if (spin && *spin) {
        char *end = NULL;
        const long v = strtol(spin, &end, 10);
        if (*end != '\0' || v < 0 || v > DT_POOL_SPIN_US_MAX)
            return dt_error_set(err, DT_ERR_USAGE,
                                "DETRAIN_POOL_SPIN_US='%s': give how long a waiting worker spins "
                                "before it sleeps, in microseconds, 0 to %d (default %d; 0 "
                                "sleeps at once)",
                                spin, DT_POOL_SPIN_US_MAX, DT_POOL_SPIN_US);
        spin_us = (int)v;
    }
    struct dt_cpu_ctx *c = dt_xcalloc(1, sizeof *c);
    (void)dt_cpu_wide(); /* the CPU check made here, before the pool's threads read it */
    c->pool = dt_pool_create(threads, spin_us);
    pthread_mutex_init(&c->combine_mu, NULL);
    c->blas_threads = threads;
    openblas_set_num_threads(1); /* parallel over our pool's row slices instead */
    c->dnnl = dt_cpu_dnnl_new();
    be->ctx = c;
    be->threads = threads;
    return DT_OK;
}

static void cpu_destroy(struct dt_backend *be)
{
    struct dt_cpu_ctx *c = dt_cpu(be);
    if (!c) return;
    dt_pool_destroy(c->pool);
    dt_cpu_dnnl_free(c->dnnl);
    pthread_mutex_destroy(&c->combine_mu);
    for (int w = 0; w < DT_CPU_MAX_THREADS; w++) free(c->worker_buf[w]);
    free(c->scratch);
    free(c->cols);
    free(c->partials);
    free(c->xp);
    free(c);
    be->ctx = NULL;
}

#ifdef DT_CPU_WIDE_KERNELS
static bool wide_off; /* dt_cpu_set_wide(false): tests run the AVX2/baseline kernels */

/* DETRAIN_CPU_ISA=avx2 forbids the wide kernels for the whole process (the narrow path an
 * AVX2 machine takes; make check runs part of the suite so, with OpenBLAS and oneDNN held
 * to AVX2 too). */
static bool isa_narrowed(void)
{
    const char *isa = getenv("DETRAIN_CPU_ISA");
    return isa && strcmp(isa, "avx2") == 0;
}

static bool have_wide(void)
{
    static int have = -1; /* set on the first call: cpu_init, before any worker exists */
    if (have < 0)
        have = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
                       __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
                       !isa_narrowed()
                   ? 1
                   : 0;
    return have;
}

bool dt_cpu_wide(void) { return !wide_off && have_wide(); }

bool dt_cpu_set_wide(bool on)
{
    wide_off = !on;
    return have_wide();
}
#else
bool dt_cpu_wide(void) { return false; }
bool dt_cpu_set_wide(bool on) { return false; }
#endif

int dt_cpu_loops(void)
{
    if (dt_cpu_wide()) return 2;
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(DT_NO_CLONES)
    if (__builtin_cpu_supports("avx2")) return 1;
#endif
    return 0;
}

const char *dt_cpu_kernels(void)
{
    static const char *const names[] = {"baseline", "avx2", "avx512"};
    return names[dt_cpu_loops()];
}

static void cpu_set_forced_order(struct dt_backend *be, uint64_t seed)
{
    dt_cpu(be)->forced_order = seed;
}

static void *cpu_alloc(struct dt_backend *be, size_t bytes)
{
    /* 64-byte alignment keeps vector loads on cache lines. */
    size_t rounded = (bytes + 63) / 64 * 64;
    void *p = aligned_alloc(64, rounded ? rounded : 64);
    if (!p) dt_out_of_memory(rounded, "a tensor of the CPU backend");
    memset(p, 0, rounded ? rounded : 64);
    return p;
}

static void cpu_free(struct dt_backend *be, void *p) { free(p); }

static void cpu_copy(struct dt_backend *be, void *dst, const void *src, size_t bytes)
{
    if (dst != src) memmove(dst, src, bytes);
}

static const void *cpu_host_view(struct dt_backend *be, const void *p) { return p; }

/* Host buffers for the hashing pipeline: nothing to pin, plain malloc. */
static void *cpu_host_alloc(struct dt_backend *be, size_t bytes)
{
    return dt_xmalloc(bytes ? bytes : 1);
}

static void cpu_host_free(struct dt_backend *be, void *p) { free(p); }

/* Ops return finished, so the snapshot is taken now and there is nothing to wait for
 * (copy_out_wait and synchronize stay NULL). */
static void cpu_copy_out_begin(struct dt_backend *be, int64_t ticket, void *host_dst,
                               const void *const *srcs, const size_t *bytes, int n)
{
    char *dst = host_dst;
    for (int i = 0; i < n; i++) {
        memcpy(dst, srcs[i], bytes[i]);
        dst += bytes[i];
    }
}

/* The resident set: the host's float values, borrowed (converted once when only bytes are
 * given); a gather copies rows, the bits of the host batch. */
struct dt_resident {
    int64_t n, dim, stride;
    const float *values;
    float *owned; /* values converted from pixels, or NULL */
    const uint8_t *labels;
};

static struct dt_resident *cpu_resident_create(struct dt_backend *be,
                                               const struct dt_resident_src *src)
{
    (void)be;
    struct dt_resident *r = dt_xcalloc(1, sizeof *r);
    r->n = src->n, r->dim = src->dim, r->labels = src->labels, r->values = src->values;
    r->stride = src->stride ? src->stride : src->dim;
    if (!r->values) {
        const int64_t count = (src->n - 1) * r->stride + src->dim;
        r->owned = dt_xmalloc((size_t)count * sizeof(float));
        for (int64_t i = 0; i < count; i++) r->owned[i] = dt_pixel_value(src->pixels[i]);
        r->values = r->owned;
    }
    return r;
}

static void cpu_resident_free(struct dt_backend *be, struct dt_resident *r)
{
    (void)be;
    free(r->owned);
    free(r);
}

static void cpu_gather(struct dt_backend *be, float *x, int32_t *labels,
                       const struct dt_resident *r, const int64_t *idx, int64_t B)
{
    (void)be;
    for (int64_t b = 0; b < B; b++) {
        DT_ASSERT(idx[b] >= 0 && idx[b] < r->n);
        memcpy(x + b * r->dim, r->values + idx[b] * r->stride, (size_t)r->dim * sizeof(float));
        labels[b] = r->labels[idx[b]];
    }
}

const struct dt_backend_ops dt_backend_cpu_ops = {
    .name = "cpu",
    .init = cpu_init,
    .destroy = cpu_destroy,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .upload = cpu_copy,
    .download = cpu_copy,
    .host_view = cpu_host_view,
#define DT_CPU_OP_ENTRY_(ENUM, name, ...) .name = dt_cpu_##name,
    DT_OP_LIST(DT_CPU_OP_ENTRY_) /* every op of nets/op_list.h */
#undef DT_CPU_OP_ENTRY_
        .set_forced_order = cpu_set_forced_order,
    .host_alloc = cpu_host_alloc,
    .host_free = cpu_host_free,
    .copy_out_begin = cpu_copy_out_begin,
    .first_nonfinite = dt_cpu_first_nonfinite,
    .exact_max = dt_cpu_exact_max,
    .exact_to_fixed = dt_cpu_exact_to_fixed,
    .exact_round = dt_cpu_exact_round,
    .exact_sum_packs = dt_cpu_exact_sum_packs,
    .bias_backward_shards = dt_cpu_bias_backward_shards,
    .dense_backward_weight_shards = dt_cpu_dense_backward_weight_shards,
    .dense_backward_weight_summed = dt_cpu_dense_backward_weight_summed,
    .conv2d_backward_weight_shards = dt_cpu_conv2d_backward_weight_shards,
    .resident_create = cpu_resident_create,
    .resident_free = cpu_resident_free,
    .gather = cpu_gather,
};
