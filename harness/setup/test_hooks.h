/* The test-only behaviours: the one seam through which tests reach inside a run. main.c
 * reads them from the environment once (the only reader of DETRAIN_TEST_*) and passes the
 * struct down explicitly (dt_run_options, dt_explain_options); production code paths hold no
 * getenv of them, and a zeroed struct -- or NULL -- means none is on.
 *
 *   DETRAIN_TEST_FAIL_ALLOC_ABOVE=N   every dt_x* allocation of more than N bytes fails as
 *                                     if memory had run out (core/status.h), once the run
 *                                     armed its out-of-memory manifest
 *   DETRAIN_TEST_KILL_AFTER_STEP=N    SIGKILL after this process's N-th training step
 *                                     (harness/run/train.h)
 *   DETRAIN_TEST_SIGNAL_AFTER_STEP=N[:SIG]   raise SIG (default 2, SIGINT) after this
 *                                     process's N-th training step, as a user's Ctrl-C then
 *                                     would: the signal tests stop a run at a known step,
 *                                     not wherever a polling loop happened to send it
 *   DETRAIN_TEST_POISON=STEP:TENSOR[:w|g[:VALUE]]   after step STEP, element 0 of the
 *                                     tensor's weight or gradient := VALUE (NaN)
 *   DETRAIN_TEST_POISON_RANK=R        poison rank R alone
 *   DETRAIN_TEST_EXPLAIN_FORCE=OP[:TENSOR]   explain forces that op's nondeterministic path
 *                                     (harness/analyze/explain.h)
 *   DETRAIN_TEST_EXPLAIN_REPLAY_MISS=N   explain spoils its first N replayed steps
 *   DETRAIN_TEST_FORCED_ORDER=SEED    `run` trains replica r with the forced combination order
 *                                     SEED + r on every op (dt_backend_set_forced_order): the
 *                                     unordered and float paths add in a drawn order that
 *                                     differs between replicas on every machine, the
 *                                     deterministic paths ignore it (harness/run/train.c)
 *   DETRAIN_TEST_SLOW_BASE_OP=OP[:MS]   `detrain bench` makes op OP take MS (default 2) ms
 *                                     longer in the baseline's (fast's) steps, so that its
 *                                     "fast is not the fastest" flag can be seen to fire */
#ifndef DT_TEST_HOOKS_H
#define DT_TEST_HOOKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct dt_test_hooks {
    bool fail_alloc;           /* fail_alloc_above is set */
    size_t fail_alloc_above;   /* bytes */
    int64_t kill_after_step;   /* 0: none */
    int kill_signal;           /* raised after kill_after_step; 0: SIGKILL */
    const char *poison;        /* NULL: none */
    int poison_rank;           /* -1: every rank */
    const char *explain_force; /* NULL: none */
    int explain_replay_miss;   /* 0: none */
    uint64_t forced_order;     /* run: replica r trains under forced order this + r; 0: none */
    int slow_base_op;          /* a DT_OP index; -1: none */
    double slow_base_seconds;
};

#endif
