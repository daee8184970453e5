/* CUDA backend placeholder: links in every build so no call site needs #ifdef; its init
 * says why it cannot run. The real backend (kernels in .cu files) replaces this file
 * when the CUDA backend lands (docs/DESIGN.md, "Backends"). */
#include "nets/backend_impl.h"
#include "nets/cuda/recorder.h"

static enum dt_status cuda_stub_init(struct dt_backend *be, const struct dt_backend_options *opt,
                                     struct dt_error *err)
{
#ifdef DETRAIN_HAVE_CUDA_TOOLKIT
    return dt_error_set(err, DT_ERR_UNSUPPORTED,
                        "backend 'cuda': the CUDA toolkit was found at build time, but this "
                        "version of detrain has no CUDA kernels yet; use backend.device: cpu");
#else
    return dt_error_set(err, DT_ERR_UNSUPPORTED,
                        "backend 'cuda': detrain was built without CUDA (configure with "
                        "-DDETRAIN_CUDA=ON on a machine with the CUDA toolkit); use "
                        "backend.device: cpu");
#endif
}

static void cuda_stub_destroy(struct dt_backend *be) {}

const struct dt_backend_ops dt_backend_cuda_ops = {
    .name = "cuda",
    .init = cuda_stub_init,
    .destroy = cuda_stub_destroy,
};

/* No CUDA toolkit: no recording backend either (the cost model says so). */
struct dt_backend *dt_cuda_recorder_create(void) { return NULL; }
void dt_cuda_recorder_begin(struct dt_backend *rec, struct dt_op_cost *c,
                            const struct dt_backend *like, bool one_pass)
{
}
void dt_cuda_recorder_end(struct dt_backend *rec) {}
bool dt_cuda_one_pass_env(void) { return true; }
