/* NCCL between the ranks' GPUs (harness/run/dist.h): one communicator over MPI_COMM_WORLD, its
 * unique id sent from rank 0 with MPI_Bcast, one GPU per rank. Built when the CUDA
 * backend, MPI and nccl.h/libnccl are all found (DETRAIN_HAVE_NCCL); otherwise the calls
 * below answer DT_ERR_UNSUPPORTED and the step stages through the host (nets/step.h). */
#ifndef DT_DIST_NCCL_H
#define DT_DIST_NCCL_H

#include <stdbool.h>
#include <stdint.h>

#include "core/status.h"
#include "nets/backend.h"
#include "nets/model.h"

struct dt_dist_nccl;

#ifdef DETRAIN_HAVE_NCCL
/* "NCCL 2.27.3" */
const char *dt_dist_nccl_version(void);
/* The communicator on the device the backend uses (collective over every rank): this
 * process is `rank` of `size` in MPI_COMM_WORLD. */
enum dt_status dt_dist_nccl_open(struct dt_dist_nccl **out, struct dt_backend *be, int rank,
                                 int size, struct dt_error *err);
void dt_dist_nccl_close(struct dt_dist_nccl *n);
/* In place on the device, after the backend's queued work, the sum over ranks of nbuf
 * buffers of backend memory (buf[i] holds count[i] int64 (is_int64) or float values), in
 * one grouped call: the exact path's integer sum, the unordered path's gradients; no bytes
 * through the host. */
enum dt_status dt_dist_nccl_sum(struct dt_dist_nccl *n, void *const *buf, const int64_t *count,
                                int nbuf, bool is_int64, struct dt_error *err);
/* The backend n was opened on. */
struct dt_backend *dt_dist_nccl_backend(const struct dt_dist_nccl *n);
#else
static inline enum dt_status dt_dist_nccl_open(struct dt_dist_nccl **out, struct dt_backend *be,
                                               int rank, int size, struct dt_error *err)
{
    (void)be, (void)rank, (void)size;
    *out = NULL;
    return dt_error_set(err, DT_ERR_UNSUPPORTED, "NCCL is not built in");
}
static inline void dt_dist_nccl_close(struct dt_dist_nccl *n) { (void)n; }
static inline enum dt_status dt_dist_nccl_sum(struct dt_dist_nccl *n, void *const *buf,
                                              const int64_t *count, int nbuf, bool is_int64,
                                              struct dt_error *err)
{
    (void)n, (void)buf, (void)count, (void)nbuf, (void)is_int64;
    return dt_error_set(err, DT_ERR_UNSUPPORTED, "NCCL is not built in");
}
static inline struct dt_backend *dt_dist_nccl_backend(const struct dt_dist_nccl *n)
{
    (void)n;
    return NULL;
}
#endif

#endif
