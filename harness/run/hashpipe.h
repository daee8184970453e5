/* The hashing pipeline: the digests of every hashed step (harness/record/hash.h) and their trace
 * rows (harness/record/trace.h), computed either inline or overlapped with the next steps.
 * Overlapped (hash.async): the weights are snapshot-copied into one of two host slots
 * (dt_backend_copy_out_begin: on CUDA a device staging buffer, then pinned memory on a side
 * stream), a worker thread waits for the copy and hashes it while the caller goes on
 * training, and the caller writes the rows in step order. Both ways hash the same bytes in
 * the same order, so the trace is the same file.
 * Data path (docs/DESIGN.md): harness/train -> harness/hashpipe -> harness/hash -> harness/trace.
 */
#ifndef DT_HASHPIPE_H
#define DT_HASHPIPE_H

#include <stdbool.h>
#include <stdint.h>

#include "core/status.h"
#include "harness/record/hash.h"
#include "harness/record/trace.h"
#include "nets/model.h"

struct dt_hashpipe;

/* A pipeline for model m (its parameters, in digest order) writing to tw (NULL: digests
 * only, for the benchmark), with tensors.csv rows when per_tensor. async false hashes and
 * writes inside dt_hashpipe_submit, as the synchronous loop always did; true starts the
 * worker thread (DT_ERR_INTERNAL when it cannot be started). */
enum dt_status dt_hashpipe_create(struct dt_hashpipe **out, struct dt_model *m,
                                  struct dt_trace_writer *tw, bool per_tensor, bool async,
                                  struct dt_error *err);

/* Hash the weights as they are after every op queued so far, as step `step` with its
 * training loss (NaN: none, step 0). Synchronous: hashed and written on return. Async: the
 * copy is begun and the call returns, having first written the rows of earlier steps that
 * are ready (and waited for the oldest when both slots are busy). A write error is sticky:
 * later steps are not written and every later call returns it. */
enum dt_status dt_hashpipe_submit(struct dt_hashpipe *p, int64_t step, float loss,
                                  struct dt_error *err);

/* Wait for every submitted step and write its rows: afterwards the trace holds every step
 * submitted so far. Call before anything that must find the trace complete (snapshots, the
 * end of a replica, a failure, an interruption). */
enum dt_status dt_hashpipe_drain(struct dt_hashpipe *p, struct dt_error *err);

/* Hex model digest of the last step whose rows were written; "" before the first. */
const char *dt_hashpipe_last_digest(const struct dt_hashpipe *p);

/* Test hook: an asynchronous pipeline of a tree-digest model computes the digests with the
 * op tensor_digests on the training thread's stream and copies back only them -- what it
 * does by itself when the weights are in device memory -- on any backend. Before the first
 * submit. */
void dt_hashpipe_set_device_digests(struct dt_hashpipe *p, bool on);

/* Whether the pipeline hashes on its worker thread. */
bool dt_hashpipe_is_async(const struct dt_hashpipe *p);

/* Stop the worker (after it finished what was submitted; rows not yet written are
 * dropped: drain first to keep them) and free everything. NULL is a no-op. */
void dt_hashpipe_destroy(struct dt_hashpipe *p);

#endif
