/* The CPU backend's grown buffers (nets/cpu/cpu.h): scratch, im2col columns, partials and
 * each worker's own. Apart from backend_cpu.c, so that the ops that use them (conv_dnnl.c
 * among them) do not include the file that creates the backend. */
#include <stdlib.h>

#include "nets/cpu/cpu.h"

/* A buffer of at least n floats, reallocated (contents dropped) when too small. */
static float *grow(float **buf, size_t *cap, size_t n)
{
    if (*cap < n) {
        free(*buf);
        *buf = dt_xmalloc(n * sizeof(float));
        *cap = n;
    }
    return *buf;
}

float *dt_cpu_scratch(struct dt_backend *be, size_t n)
{
    return grow(&dt_cpu(be)->scratch, &dt_cpu(be)->scratch_floats, n);
}

float *dt_cpu_cols(struct dt_backend *be, size_t n)
{
    return grow(&dt_cpu(be)->cols, &dt_cpu(be)->cols_floats, n);
}

float *dt_cpu_partials(struct dt_backend *be, size_t n)
{
    return grow(&dt_cpu(be)->partials, &dt_cpu(be)->partials_floats, n);
}

float *dt_cpu_xp_buffer(struct dt_backend *be, size_t n)
{
    return grow(&dt_cpu(be)->xp, &dt_cpu(be)->xp_floats, n);
}

float *dt_cpu_worker_buffer(struct dt_backend *be, int w, size_t n)
{
    struct dt_cpu_ctx *c = dt_cpu(be);
    DT_ASSERT(w >= 0 && w < DT_CPU_MAX_THREADS);
    return grow(&c->worker_buf[w], &c->worker_floats[w], n);
}
