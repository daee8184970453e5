/* The backend registry: which ops table a backend kind names, and a backend made from it.
 * Its own room above nets/cpu/ and nets/cuda/, whose tables it names, while they sit above
 * nets/dispatch.c, whose wrappers and error record they use: so the layers run one way
 * (scripts/house.py layers). */
#include <stdlib.h>

#include "core/status.h"
#include "nets/backend_impl.h"

static const struct dt_backend_ops *backend_ops_for(enum dt_backend_kind kind)
{
    switch (kind) {
    case DT_BACKEND_CPU: return &dt_backend_cpu_ops;
    case DT_BACKEND_CUDA: return &dt_backend_cuda_ops;
    }
    return NULL;
}

enum dt_status dt_backend_create(struct dt_backend **out, const struct dt_backend_options *opt,
                                 struct dt_error *err)
{
    *out = NULL;
    const struct dt_backend_ops *ops = backend_ops_for(opt->kind);
    if (!ops) return dt_error_set(err, DT_ERR_USAGE, "unknown backend kind %d", (int)opt->kind);
    DT_ASSERT_MSG((ops->host_alloc == NULL) == (ops->host_free == NULL),
                  "a backend's host_alloc and host_free come as a pair");
    struct dt_backend *be = dt_xcalloc(1, sizeof *be);
    be->ops = ops;
    be->threads = 1;
    enum dt_status st = ops->init(be, opt, err);
    if (st != DT_OK) {
        free(be);
        return st;
    }
    *out = be;
    return DT_OK;
}
