/* NCCL between the ranks' GPUs (harness/run/dist.h): one communicator over MPI_COMM_WORLD, its
 * unique id sent from rank 0 with MPI_Bcast, one GPU per rank. Built when the CUDA
 * backend, MPI and nccl.h/libnccl are all found (DETRAIN_HAVE_NCCL); otherwise the calls
 * below answer DT_ERR_UNSUPPORTED and harness/run/dist.c stays on MPI. */
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
/* In place on the device, the sum over ranks of `count` int64 (is_int64) or float values
 * in backend memory, after the backend's queued work: the exact path's integer
 * all-reduce, no bytes through the host. */
enum dt_status dt_dist_nccl_allreduce_dev(struct dt_dist_nccl *n, void *dev, int64_t count,
                                          bool is_int64, struct dt_error *err);
/* In place on the device, the float sum over ranks of every parameter's gradient (one
 * grouped call): the unordered path. */
enum dt_status dt_dist_nccl_allreduce_params(struct dt_dist_nccl *n, struct dt_model *m,
                                             struct dt_error *err);
#else
static inline enum dt_status dt_dist_nccl_open(struct dt_dist_nccl **out, struct dt_backend *be,
                                               int rank, int size, struct dt_error *err)
{
    (void)be, (void)rank, (void)size;
    *out = NULL;
    return dt_error_set(err, DT_ERR_UNSUPPORTED, "NCCL is not built in");
}
static inline void dt_dist_nccl_close(struct dt_dist_nccl *n) { (void)n; }
static inline enum dt_status dt_dist_nccl_allreduce_dev(struct dt_dist_nccl *n, void *dev,
                                                        int64_t count, bool is_int64,
                                                        struct dt_error *err)
{
    (void)n, (void)dev, (void)count, (void)is_int64;
    return dt_error_set(err, DT_ERR_UNSUPPORTED, "NCCL is not built in");
}
static inline enum dt_status dt_dist_nccl_allreduce_params(struct dt_dist_nccl *n,
                                                           struct dt_model *m, struct dt_error *err)
{
    (void)n, (void)m;
    return dt_error_set(err, DT_ERR_UNSUPPORTED, "NCCL is not built in");
}
#endif

#endif
