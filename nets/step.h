/* One training step, the same for every caller (training, explain's re-execution, bench,
 * the overhead sampler, the tests), read top to bottom in dt_step_train: load the batch's
 * rows -> forward -> loss -> backward (each of the model's passes) -> combine across
 * shards and ranks -> the data-free term -> clip -> update. A model supplies only its
 * forward and backward (nets/model.h, struct dt_model_ops).
 *
 * Shards and ranks. The global batch of B rows is cut into S canonical shards by a fixed
 * rule -- shard s holds rows [floor(s*B/S), floor((s+1)*B/S)) -- and rank r of N takes
 * shards [floor(r*S/N), floor((r+1)*S/N)): contiguous rows, every rank at least one shard
 * (N <= S). A step's gradient is combined under the `reduction` control:
 *
 *   unordered  each rank's gradient over its rows, summed by the exchange in float (the
 *              library's order).
 *   fixed      each rank's gradient over its rows; every rank gathers all N and adds them
 *              in rank order 0, 1, ..., N-1: fixed for a given N, different across N.
 *   exact      forward, loss and backward once over the rank's rows, every batch reduction
 *              giving one partial per shard (each the fixed tree over the shard's rows, as a
 *              pass over the shard alone would: nets/backend.h, dt_shards); per tensor one
 *              power-of-two scale from max |partial| over every shard (a maximum across
 *              ranks, which has no order) and the shard count; each partial converted
 *              exactly to int64 and summed, the int64 sums summed across ranks; one rounding
 *              back to float -- all backend ops (dt_exact_*), on the device for CUDA.
 *              Integer addition is associative, so the bits are the same for any N -- and
 *              for a single process (no exchange), which takes the same path with N = 1.
 *
 * With one process and unordered or fixed there is nothing to combine. A kind's data-free
 * term (bnn_mlp's KL) is added once, after the combination (dt_model_finish_gradients),
 * then clipping and the update. The rank rules -- who writes, which rank
 * failed, the agreement after each step -- stay with the exchange's owner (harness/run/dist.h). */
#ifndef DT_STEP_H
#define DT_STEP_H

#include <stdbool.h>
#include <stdint.h>

#include "core/status.h"
#include "determinism/policy.h"
#include "nets/backend.h"
#include "nets/model.h"

/* The collectives a step needs across ranks. Each is called by every rank in the same order.
 * A single process passes no exchange (NULL) and never calls any of them. */
struct dt_exchange_ops {
    void (*max_u32)(void *ctx, uint32_t *v, int n);    /* elementwise maximum, in place */
    void (*sum_i64)(void *ctx, int64_t *v, int64_t n); /* elementwise sum, in place */
    void (*sum_f32)(void *ctx, float *v, int64_t n);   /* in the library's order */
    void (*sum_f64)(void *ctx, double *v, int n);      /* in the library's order */
    void (*gather)(void *ctx, const void *send, void *recv, int64_t bytes); /* rank order */
    /* the highest status (0 = DT_OK) and the lowest rank holding it (-1 when 0) */
    int (*max_status)(void *ctx, int status, int *rank_out);
    /* Optional (NULL: the step stages through host memory): sum n buffers of be's device
     * memory in place (count[i] elements, int64 or float), e.g. NCCL between GPUs. */
    enum dt_status (*sum_device)(void *ctx, struct dt_backend *be, void *const *buf,
                                 const int64_t *count, int n, bool is_int64, struct dt_error *err);
    /* Optional: the step that used sum_device on be is done with it. */
    void (*release_device)(void *ctx, struct dt_backend *be);
    /* Optional (NULL, or a NULL handle: none): `bytes` of memory per rank that every rank
     * reads and writes -- the ranks of one machine (MPI's shared-memory window). Collective,
     * every rank asking for the same bytes; base[q] = rank q's part, in this process. */
    void *(*shared_open)(void *ctx, int64_t bytes, void **base);
    /* Collective: every rank's writes to the shared memory before the call are seen by
     * every rank after it (a barrier, the memory synchronised on both sides). */
    void (*shared_sync)(void *ctx, void *h);
    void (*shared_close)(void *ctx, void *h); /* collective */
};
struct dt_exchange {
    const struct dt_exchange_ops *ops;
    void *ctx;
    int rank, size; /* this process's rank of size (size >= 1) */
};

/* The canonical cut: shard s's first row of B rows in S shards; rank r's first shard of S
 * over N ranks. */
int64_t dt_shard_row(int64_t B, int64_t S, int64_t s);
int64_t dt_rank_shard(int64_t S, int N, int r);

/* The step as one graph (dt_step_use_graphs; nets/backend.h, dt_backend_graph_begin):
 * where it stands. */
struct dt_step_graph {
    bool want;         /* asked for (backend.graphs) */
    bool off;          /* given up for the rest of the run: why says why */
    bool checked;      /* the self-check passed: steps are launched as graphs */
    bool checked_bits; /* ... bit for bit (else within fast's tolerance: nets/step.c) */
    bool warm;         /* the last step had this shape (key): its first-use work is done */
    struct {
        const void *m, *pol, *set, *x;
        int64_t B, shards;
    } key;
    int broken_in_a_row;
    int64_t launched, uncaptured, checked_at;
    struct dt_backend *be; /* whose executable graph `exec` is (dt_backend_graph_end) */
    void *exec;
    char why[320]; /* off: why; else the last step run uncaptured's reason */
};

/* The buffers of one model's steps under one kind of reduction (exact or not). */
struct dt_step {
    struct dt_model *m;
    const struct dt_exchange *x; /* NULL: one process */
    bool exact;                  /* set up for reduction: exact (dt_model_grad_slots on m) */
    bool device_sum;             /* x->ops->sum_device was used on m->be */
    int64_t total;               /* elements over every parameter */
    int64_t *offset;             /* per parameter, into the packed gradient (n_params + 1) */
    int64_t *n;                  /* per parameter, its elements */
    float *stage;                /* unordered, fixed: the rank's own packed gradient */
    float *gather;               /* fixed: N packed gradients */
    uint32_t *max_dev;           /* exact: per tensor, max |partial| bits (backend memory) */
    uint32_t *max_bits;          /* exact: the same on the host */
    uint32_t *summed;            /* exact, one rank: what the shard ops summed (dt_shards) */
    uint32_t *summed_before;     /* the same, the step before (their hints) */
    int64_t *acc_dev, *acc;      /* exact with several ranks: the int64 sums (backend, host) */
    /* exact, the ranks of one machine (the exchange's shared memory, host-memory backends):
     * rank q's part at shared_base[q] holds its maxima, its packed partials (rank_slots[q]
     * slots) and the rounded sums of its range of elements; NULL: staged through the
     * exchange's collectives (acc). */
    void *shared;
    void *shared_base[DT_EXACT_PACKS_MAX];
    int64_t rank_slots[DT_EXACT_PACKS_MAX];
    int64_t shared_partials, shared_results; /* byte offsets in each part */
    float *loss_slots;                       /* per shard (exact) or per rank */
    int64_t B, S;               /* the step's global batch and shards (the combination's) */
    struct dt_step_graph graph; /* kept by dt_step_train across set-ups; dt_step_use_graphs */
};

/* Whether a step under pol goes through the shard/rank combination: there are several
 * ranks or the reduction is exact. */
bool dt_step_needs_combine(const struct dt_policy *pol, const struct dt_exchange *x);
/* Set up for steps of m under pol's kind of reduction (exact: m's gradients get room for
 * the most shards this rank holds). x may be NULL (one process). */
void dt_step_init(struct dt_step *d, struct dt_model *m, int64_t shards,
                  const struct dt_policy *pol, const struct dt_exchange *x);
/* How d's steps combine across ranks, in words (for bench); NULL for one process or
 * before d's first step. */
const char *dt_step_exchange_path(const struct dt_step *d);
/* Everything of d freed, its graph included (before its model's backend is destroyed). */
void dt_step_free(struct dt_step *d);

/* The step every caller takes, on the global batch (B rows: host rows or resident indices,
 * nets/model.h), every rank passing the same batch: the rank's share of the rows, the
 * combination across shards and ranks under pol->reduction when dt_step_needs_combine (d
 * set up for m on first use; dt_step_free it before m is destroyed), then the update, then
 * the step's end (dt_model_step_end: a device backend's one wait, which also reads the
 * step's deferred checks and its losses), then the loss from what it read.
 * *loss = the global batch's mean loss, computed on the weights before the update (the
 * same value on every rank: exact combines the shards' means in shard order, fixed the
 * ranks' in rank order, unordered by the exchange's sum; a Bayesian model's is the mean
 * over its passes of the data term). A failure on any rank fails the step on every rank: a
 * numeric one with DT_ERR_NUMERIC and m->err naming the tensor (and the rank when it is
 * another's). x may be NULL (one process). */
enum dt_status dt_step_train(struct dt_step *d, struct dt_model *m, const struct dt_exchange *x,
                             const struct dt_batch *batch, int64_t B, int64_t shards,
                             const struct dt_sgd_options *opt, const struct dt_policy *pol,
                             float *loss);

/* From the next dt_step_train on d, capture each step and launch it as one graph (on a
 * backend that has graphs: CUDA). One process, a batch from a resident set, and a step
 * whose host code does not wait inside (checks deferred, no forced order, no observer): a
 * step that breaks the capture runs uncaptured (two in a row: graphs off for the run, with
 * the reason on stderr). The first captured step is checked: the model's state saved, the
 * step launched as a graph, its weights, optimiser moments and loss kept, the state loaded
 * back and the step run uncaptured -- the uncaptured result is the one kept, and unless the
 * two agree graphs are off for the run (stderr says what differed): bit for bit under a
 * policy that promises the same bits at every run (dt_policy_same_bits_every_run), else
 * within a tolerance (fast gives other bits at every run, graph or not). Call on a zeroed d
 * or after dt_step_init. */
void dt_step_use_graphs(struct dt_step *d, bool on);
/* One line on d's graphs: "off", "checked at step 2; 28 steps launched as one graph, 1 ran
 * uncaptured (a host wait at ...)" or "off from step 5: <why>". */
void dt_step_graph_summary(const struct dt_step *d, char *buf, size_t size);

/* dt_step_train in one process on a host batch x (B, in_dim), y (B), one shard, its own
 * step buffers: for tests and tools that train a model directly. On failure, m->err says
 * why when the model filled it (err.status != DT_OK). */
enum dt_status dt_model_train_step(struct dt_model *m, const float *x, const uint8_t *y, int64_t B,
                                   const struct dt_sgd_options *opt, const struct dt_policy *pol,
                                   float *loss);
/* The same on any batch (host or resident rows). */
enum dt_status dt_model_train_step_batch(struct dt_model *m, const struct dt_batch *b, int64_t B,
                                         const struct dt_sgd_options *opt,
                                         const struct dt_policy *pol, float *loss);

#endif
