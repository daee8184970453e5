/* NCCL between the ranks' GPUs: see dist_nccl.h. */
#include "harness/run/dist_nccl.h"

#include <stdio.h>
#include <stdlib.h>

#include <cuda_runtime_api.h>
#include <mpi.h>
#include <nccl.h>

#include "core/util.h"

struct dt_dist_nccl {
    ncclComm_t comm;
    cudaStream_t stream;
    struct dt_backend *be;
    int rank; /* this process's MPI rank, for messages */
};

const char *dt_dist_nccl_version(void)
{
    static char buf[48];
    int v = 0;
    if (ncclGetVersion(&v) != ncclSuccess) return "NCCL (version unknown)";
    snprintf(buf, sizeof buf, "NCCL %d.%d.%d", v / 10000, (v / 100) % 100, v % 100);
    return buf;
}

static enum dt_status nccl_fail(struct dt_error *err, int rank, const char *what, ncclResult_t r)
{
    return dt_error_set(err, DT_ERR_IO, "NCCL %s failed on rank %d: %s", what, rank,
                        ncclGetErrorString(r));
}

static enum dt_status cuda_fail(struct dt_error *err, int rank, const char *what, cudaError_t e)
{
    return dt_error_set(err, DT_ERR_IO, "%s failed on rank %d: %s", what, rank,
                        cudaGetErrorString(e));
}

enum dt_status dt_dist_nccl_open(struct dt_dist_nccl **out, struct dt_backend *be, int rank,
                                 int size, struct dt_error *err)
{
    ncclUniqueId id;
    if (rank == 0) {
        ncclResult_t r = ncclGetUniqueId(&id);
        if (r != ncclSuccess) return nccl_fail(err, rank, "ncclGetUniqueId", r);
    }
    if (MPI_Bcast(&id, (int)sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD) != MPI_SUCCESS)
        return dt_error_set(err, DT_ERR_IO, "MPI_Bcast of the NCCL id failed");
    struct dt_dist_nccl *n = dt_xcalloc(1, sizeof *n);
    n->be = be;
    n->rank = rank;
    cudaError_t e = cudaStreamCreateWithFlags(&n->stream, cudaStreamNonBlocking);
    if (e != cudaSuccess) {
        free(n);
        return cuda_fail(err, rank, "cudaStreamCreate", e);
    }
    ncclResult_t r = ncclCommInitRank(&n->comm, size, id, rank);
    if (r != ncclSuccess) {
        cudaStreamDestroy(n->stream);
        free(n);
        return nccl_fail(err, rank, "ncclCommInitRank", r);
    }
    *out = n;
    return DT_OK;
}

void dt_dist_nccl_close(struct dt_dist_nccl *n)
{
    if (!n) return;
    ncclCommDestroy(n->comm);
    cudaStreamDestroy(n->stream);
    free(n);
}

enum dt_status dt_dist_nccl_sum(struct dt_dist_nccl *n, void *const *buf, const int64_t *count,
                                int nbuf, bool is_int64, struct dt_error *err)
{
    dt_backend_synchronize(n->be); /* written on the backend's stream */
    ncclResult_t r = ncclGroupStart();
    for (int i = 0; r == ncclSuccess && i < nbuf; i++)
        r = ncclAllReduce(buf[i], buf[i], (size_t)count[i], is_int64 ? ncclInt64 : ncclFloat,
                          ncclSum, n->comm, n->stream);
    ncclResult_t r2 = ncclGroupEnd();
    if (r != ncclSuccess) return nccl_fail(err, n->rank, "ncclAllReduce", r);
    if (r2 != ncclSuccess) return nccl_fail(err, n->rank, "ncclGroupEnd", r2);
    cudaError_t e = cudaStreamSynchronize(n->stream);
    return e == cudaSuccess ? DT_OK : cuda_fail(err, n->rank, "cudaStreamSynchronize", e);
}

struct dt_backend *dt_dist_nccl_backend(const struct dt_dist_nccl *n) { return n->be; }
