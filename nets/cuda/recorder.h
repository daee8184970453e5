/* A recording CUDA backend: the CUDA backend's host code run without a device, every launch
 * adding the work it describes (nets/cuda/work.h) to a record instead of running -- the cost
 * model of nets/cost_cuda.c, which therefore cannot drift from the code (issue 66, item 1).
 * Implemented in nets/cuda/backend_cuda.c; in a build without the CUDA toolkit the stub's
 * dt_cuda_recorder_create returns NULL. */
#ifndef DT_CUDA_RECORDER_H
#define DT_CUDA_RECORDER_H

#include <stdbool.h>

#include "nets/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

struct dt_op_cost;

/* A backend with the CUDA backend's ops that launches nothing and needs no device, or NULL
 * (no CUDA toolkit in this build). Free it with dt_backend_destroy. */
struct dt_backend *dt_cuda_recorder_create(void);
/* The next calls on rec add their work to *c, in the state of backend `like` at the call
 * (its shards, whether its checks and the step's loss are deferred) and with one_pass (the
 * DETRAIN_CUDA_ONE_PASS the count follows); until dt_cuda_recorder_end. */
void dt_cuda_recorder_begin(struct dt_backend *rec, struct dt_op_cost *c,
                            const struct dt_backend *like, bool one_pass);
void dt_cuda_recorder_end(struct dt_backend *rec);
/* DETRAIN_CUDA_ONE_PASS as the CUDA backend reads it (false: the per-shard and per-tensor
 * forms the first light ran). */
bool dt_cuda_one_pass_env(void);

#ifdef __cplusplus
}
#endif

#endif
