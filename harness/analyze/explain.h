/* `detrain explain A B`: from "the traces of A and B part at step k" to the op, the tensor and
 * the control that made them part (docs/cli.md, "explain"; docs/DESIGN.md, "Explaining a
 * divergence").
 *
 * A and B are replica folders (or cell folders: their replica-0) of one experiment or of two
 * (a CPU run and a GPU run of one config, two policies). explain
 *  1. compares their traces (dt_trace_compare): the first step k whose digests differ;
 *  2. restores each side's state after step k-1: from its checkpoint.bin when that is at or
 *     before k-1, then by replaying its own run (its config, policy, streams) up to k-1,
 *     each hashed step checked against the side's trace. A step whose digest misses (a
 *     `fast` step need not take the same bits twice) is re-executed from the last matching
 *     state, up to 32 times: the trace says which of its possible results the run took. A
 *     step that never matches, or a restored state that does not, stops explain
 *     (DT_ERR_DATA: "replay does not match", nothing explained);
 *  3. re-executes step k with op-level hashing (nets/backend.h, dt_backend_set_observer: every
 *     op's outputs downloaded and hashed, copies only, in execution order, the batch first):
 *     - replicas (A and B the same config, policy, device and streams): `executions` times
 *       from A's state; first as they run, and when no two executions differ, each with a
 *       combination order drawn for the unordered and float paths (the forced-order hook,
 *       dt_backend_set_forced_order; seed = execution number), so that an order-sensitive
 *       op shows without timing luck;
 *     - two sides (devices, policies, or replicas whose streams differ by `vary`): once
 *       each, from each side's own state;
 *  4. names the first op output whose hashes differ (op, layer, tensor, phase, elements
 *     differing, the largest difference in ulps) -- passing over, at the traces' first
 *     divergent step, a gradient, weights or momentum of a parameter whose digest the two
 *     traces agree on (tensors.csv): it differs in the re-executions (a drawn order) but did
 *     not in the run -- and attributes it: step k re-executed with
 *     each control that is not at the target value switched alone to it (replicas: the
 *     run_to_run value; two sides: the portable value, on both sides); the controls whose
 *     switch makes the named output agree are the cause. With sides whose streams differ,
 *     the cause is the `vary` source (init, data_order, epsilon).
 * Writes the explanation on `out` and the op table as CSV to opt->csv (atomically; NULL =
 * none). The observer is off outside step k's re-executions: training never pays for it.
 *
 * Test hooks (opt->hooks, harness/setup/test_hooks.h). The force hook "OP[:TENSOR]" (e.g.
 * "bias_backward:dense1.bias", "conv2d_backward_data:conv1", "eps_philox") makes, in every
 * re-execution, only the ops named OP (and, with TENSOR, only those whose output or parameter name
 * starts with TENSOR) run in a forced combination order drawn from the execution number; for the
 * epsilon ops, which have no combination order, it flips the low bit of one element of the
 * draw under `rng: stored` (a generator shared by threads, emulated). Every other op runs as
 * it does. The replay-miss hook N spoils the first N replayed steps (a low bit
 * of one weight flipped after the step), so that the replay's re-execution is tested. */
#ifndef DT_EXPLAIN_H
#define DT_EXPLAIN_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "core/status.h"

struct dt_test_hooks;

struct dt_explain_options {
    const char *a, *b; /* replica (or cell) folders */
    int executions;    /* re-executions of the step for replicas (default 5, 2..64) */
    const char *csv;   /* explain.csv path, or NULL */
    bool quiet;        /* no progress on stderr */
    int64_t step;      /* > 0: re-execute this step even where the traces agree */
    const struct dt_test_hooks *hooks; /* test-only (harness/setup/test_hooks.h); NULL: none */
};

/* What explain found. */
struct dt_explain_result {
    bool diverged;  /* the traces part */
    int64_t step;   /* at this step; -1 = never */
    bool explained; /* a first differing op output was named */
    char op[48], layer[48], tensor[96], phase[16];
    int64_t elements, differing;
    uint64_t max_ulp;
    char cause[160]; /* "atomics: float", "vary: init", "" = none found */
};

/* 0-style statuses: DT_OK with *res filled (res->explained false: no difference found at
 * the op level, said on `out` with what was tried); an error otherwise (err says what). */
enum dt_status dt_explain(const struct dt_explain_options *opt, FILE *out,
                          struct dt_explain_result *res, struct dt_error *err);

/* The first columns of explain's --csv table (hash_<e> columns follow, one per execution). */
#define DT_EXPLAIN_CSV_HEADER "index,op,layer,tensor,phase,elements,"

#endif
