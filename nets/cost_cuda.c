/* The CUDA backend's cost model (nets/cost.h): every op call counted is made again on a
 * recording CUDA backend (nets/cuda/recorder.h) -- the backend's own host code, run without
 * a device, in the counting backend's state (its shards, whether its checks and the step's
 * loss are deferred) and through the op's own wrapper (nets/dispatch.c: the same routing) --
 * and every launch it makes adds the work it describes where it is made (nets/cuda/work.h:
 * DT_LAUNCH, the memsets, DT_CUBLAS_CALL, cuDNN's calls, the waits). There is no second copy
 * of the backend to keep in step with it: a changed launch changes its count (issue 66,
 * item 1). The steady state is what is counted: scratch already grown, cuDNN's choice for a
 * shape cached and an algorithm found, the forced-order test hook off, at most
 * DT_CUDA_STATUS_SLOTS deferred records in a step. On a GPU, `detrain cost` also counts what
 * the step really launched (dt_backend_launch_counts) and says whether the two agree. */
#include <stdbool.h>
#include <stdint.h>

#include "nets/cost.h"
#include "nets/cuda/recorder.h"

/* The hashing pipeline's snapshot (nets/cuda/backend_cuda.c, snapshot): n tensors copied into
 * the staging buffer, read and written -- one gather kernel (the table kept on the device), or
 * a device copy per tensor with DETRAIN_CUDA_ONE_PASS=0. */
void dt_cost_snapshot(struct dt_op_cost *c, const struct dt_cost_tally *t, const int64_t *counts,
                      int n)
{
    double bytes = 0.0;
    for (int i = 0; i < n; i++) bytes += 8.0 * (double)counts[i];
    if (n >= 2 && t->one_pass) {
        c->launches += 1;
        c->bytes += bytes;
        return;
    }
    c->launches += (double)n;
    c->bytes += bytes;
}

/* nets/cuda/status.c, dt_cuda_read_deferred: no wait of its own with checks deferred (read
 * with the step's end), a download's wait with DETRAIN_CUDA_ONE_PASS=0. */
bool dt_cost_read_deferred_waits(const struct dt_cost_tally *t) { return !t->one_pass; }

/* The switch the counts follow, read once as counting starts; the recorder, made once. */
static void cuda_cost_begin(struct dt_cost_tally *t)
{
    t->one_pass = dt_cuda_one_pass_env();
    if (!t->recorder) t->recorder = dt_cuda_recorder_create();
}

static void cuda_cost_end(struct dt_cost_tally *t)
{
    if (t->recorder) dt_backend_destroy(t->recorder);
    t->recorder = NULL;
}

/* dt_<name> on the tally's recorder, its launches into *c. */
#define DT_COST_REC_ARGS(...) (r_, __VA_ARGS__)
#define DT_COST_RECORD_(ENUM, name, phase, outputs, controls, params, args)                        \
    static void record_##name DT_COST_PARAMS params                                                \
    {                                                                                              \
        struct dt_backend *r_ = cx->recorder;                                                      \
        if (!r_) return; /* no CUDA toolkit: nothing to count with (cost_report says so) */        \
        dt_cuda_recorder_begin(r_, c, cx->like, cx->one_pass);                                     \
        (void)dt_##name DT_COST_REC_ARGS args;                                                     \
        dt_cuda_recorder_end(r_);                                                                  \
    }
DT_OP_LIST(DT_COST_RECORD_)
#undef DT_COST_RECORD_
#undef DT_COST_REC_ARGS

const struct dt_cost_model dt_cuda_cost_model = {
#define DT_COST_MODEL_ROW_(ENUM, name, phase, outputs, controls, params, args)                     \
    .name = record_##name,
    DT_OP_LIST(DT_COST_MODEL_ROW_)
#undef DT_COST_MODEL_ROW_
        .begin = cuda_cost_begin,
    .end = cuda_cost_end,
    .read_deferred_waits = dt_cost_read_deferred_waits,
};
