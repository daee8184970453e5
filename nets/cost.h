/* The CUDA backend's cost model (docs/DESIGN.md, "The cost model"): what each op call costs
 * on the device -- kernel launches and library calls, bytes moved in device memory, flops,
 * host waits -- counted from its shapes and the policy, without a GPU. Any backend can count
 * (dt_backend_cost_enable): a model's step run on the CPU records what the CUDA backend
 * would launch for the same calls, and dt_cost_predict_s turns the counts into a time on a
 * device from its launch cost, bandwidth and throughput (struct dt_cost_device, calibrated
 * on a GPU run: results/cpu/cost-model). Design choices -- a graph, a fused reduction, one
 * pass instead of four -- can then be argued from the counts before a GPU runs them.
 *
 * The counts are the CUDA backend's own code run without a device: each op call is made
 * again on a recording CUDA backend (nets/cuda/recorder.h) in the counting backend's state,
 * and every launch there adds the work it describes where it is made (nets/cuda/work.h).
 * The model is nets/cost_cuda.c, a row of the op list each, generated. */
#ifndef DT_COST_H
#define DT_COST_H

#include <stdbool.h>
#include <stdint.h>

#include "nets/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

struct dt_cost_tally; /* below */

/* One op call's cost on the device. bytes counts what its kernels read and write in
 * device memory (each tensor once per kernel that streams it); flops are float operations
 * in detrain's own kernels (CUDA cores), lib_flops those of library products (cuBLAS,
 * cuDNN: tensor cores at TF32 under math: fast, FP32 otherwise -- lib_tf32 says which),
 * int_ops the int8 tensor-core multiply-adds of math: exact's products (two per MAC). */
struct dt_op_cost {
    double launches;  /* kernels and library calls (a cuBLAS call counts one) */
    double lib_calls; /* the library calls among them (cuBLAS, cuDNN: dearer to launch) */
    double bytes;
    double flops;
    double ordered_flops; /* the ordered product's (portable's own GEMM kernel) */
    double serial_ops;    /* the longest dependent chain one thread runs (nets/cuda/work.h) */
    double lib_flops;
    bool lib_tf32;
    double int_ops;
    double waits; /* host waits (a synchronisation or a blocking copy) */
    double calls; /* op calls counted (1 per call; set by the tally) */
};

/* What an op's cost depends on beyond its arguments: the backend's state at the call. */
struct dt_cost_ctx {
    const struct dt_backend *like; /* the counting backend: its state is the call's */
    struct dt_backend *recorder;   /* the tally's recording backend (dt_cost_tally) */
    int64_t shards;                /* reduction: exact's shards of the next ops (0 = none) */
    int64_t shard_batch;           /* the shards' batch (rows of a batch reduction per shard set) */
    bool checks_deferred; /* dt_backend_defer_checks: check records read at the step's end */
    bool loss_deferred;   /* dt_backend_defer_loss: the training step's loss, likewise */
    bool one_pass;        /* the tally's switch (DETRAIN_CUDA_ONE_PASS, read as counting began) */
};

/* A model's per-op member (cost, ctx, the row's parameters): adds the call's cost to *c. */
#define DT_COST_PARAMS(...) (struct dt_op_cost * c, const struct dt_cost_ctx *cx, __VA_ARGS__)

void dt_cost_accumulate(struct dt_op_cost *to, const struct dt_op_cost *c);

/* The hashing pipeline's snapshot on the training stream (hash.async: on; nets/cuda/
 * backend_cuda.c, snapshot): n float tensors of counts[i] elements copied into the staging
 * buffer -- one launch, or a copy per tensor with DETRAIN_CUDA_ONE_PASS=0. */
void dt_cost_snapshot(struct dt_op_cost *c, const struct dt_cost_tally *t, const int64_t *counts,
                      int n);
/* Whether a deferred read (dt_backend_read_deferred, checks deferred) waits on its own. */
bool dt_cost_read_deferred_waits(const struct dt_cost_tally *t);

/* A cost model: the per-op counts above, one member a row of the op list, and how its
 * deferred reads wait. The CUDA backend's is dt_cuda_cost_model (nets/cost_cuda.c). The
 * wrappers (nets/dispatch.c) reach it only through the tally that counting was enabled
 * with (dt_cost_tally.model), never by name: a model of a backend sits above the backends'
 * shared wrappers, as the backends themselves do (scripts/house.py layers). */
struct dt_cost_model {
#define DT_COST_MEMBER_(ENUM, name, phase, outputs, controls, params, args)                        \
    void(*name) DT_COST_PARAMS params;
    DT_OP_LIST(DT_COST_MEMBER_)
#undef DT_COST_MEMBER_
    void (*begin)(struct dt_cost_tally *t); /* counting starts: the switches read, once */
    void (*end)(struct dt_cost_tally *t);   /* counting stops: what begin made, freed */
    bool (*read_deferred_waits)(const struct dt_cost_tally *t);
};
extern const struct dt_cost_model dt_cuda_cost_model;

/* A device's constants for dt_cost_predict_s. */
struct dt_cost_device {
    const char *name;
    double launch_s;            /* per launch, streamed back to back (the op-timing floor) */
    double lib_launch_s;        /* per library call (cuBLAS, cuDNN: their host-side set-up) */
    double graph_launch_s;      /* per kernel node when a captured graph replays the step */
    double wait_s;              /* per host wait (synchronise, read back, resume the stream) */
    double bytes_per_s;         /* achievable device-memory bandwidth */
    double flops_per_s;         /* FP32 on CUDA cores, as detrain's own kernels reach it */
    double ordered_flops_per_s; /* the ordered product's rate (a tenth of the above) */
    double serial_ops_per_s;    /* one thread's dependent operations (issue rate x latency) */
    double lib_fp32_per_s;      /* library FP32 products */
    double lib_tf32_per_s;      /* library TF32 products (tensor cores) */
    double int8_per_s;          /* int8 tensor-core ops */
};
/* The H100 SXM (80 GB HBM3) as the first light measured it (constants and their sources:
 * nets/cost.c). */
extern const struct dt_cost_device dt_cost_h100;
/* The H200 (141 GB HBM3e) as its first window measured it (results/cpu/cost-model/
 * h200-check.txt; constants and sources: nets/cost.c). */
extern const struct dt_cost_device dt_cost_h200;
/* The calibrated device a name gives ("h200", "h100"), or NULL. */
const struct dt_cost_device *dt_cost_device_named(const char *name);

/* Predicted seconds of one call's cost c on d: the larger of its launches' cost, its memory
 * and arithmetic time and its longest serial chain, plus its host waits. graph: the step replayed
 * from a captured graph (graph_launch_s per node, waits inside the step gone but one). */
double dt_cost_predict_s(const struct dt_op_cost *c, const struct dt_cost_device *d, bool graph);

/* The counts of a run of op calls, per op, and each op's predicted seconds on `dev`
 * (dt_cost_predict_s call by call, streamed and as graph nodes). */
struct dt_cost_tally {
    const struct dt_cost_model *model; /* whose counts (required: &dt_cuda_cost_model) */
    const struct dt_cost_device *dev;
    struct dt_op_cost op[DT_OP_COUNT];
    double pred_s[DT_OP_COUNT], graph_s[DT_OP_COUNT];
    /* blocking copies back outside the ops (dt_backend_download: a step's checks, a loss,
     * hashing's digests): each a host wait on a device */
    double downloads, download_bytes;
    double deferred_reads; /* dt_backend_read_deferred: read with the step's end */
    /* resident batch gathers (dt_backend_gather: a kernel launch each, outside the ops; the
     * launch the H200 counted beside the model's ops on every model and level, 2026-12-04) */
    double gathers;
    bool one_pass; /* the model's switch, set by model->begin (dt_backend_cost_enable) */
    struct dt_backend *recorder; /* the CUDA model's recording backend, made by begin; NULL:
                                    no CUDA toolkit in this build, nothing can be counted */
};

/* Count every op call of be into *t (NULL stops counting, and ends the tally it counted
 * into) by t->model; ctx fields are read from the backend at each call. Counting does not
 * change what the ops compute. */
void dt_backend_cost_enable(struct dt_backend *be, struct dt_cost_tally *t);

#ifdef __cplusplus
}
#endif

#endif
