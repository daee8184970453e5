/* A fixed pool of pthreads for the CPU backend. Work is split statically: worker t of T
 * gets the t-th contiguous slice of [0, n). The caller's thread is worker 0. Ops keep
 * their results independent of the split (each output is owned by one worker and
 * computed in a fixed order), so the thread count changes speed, not bits. */
#ifndef DT_THREADPOOL_H
#define DT_THREADPOOL_H

#include <stdint.h>

struct dt_pool;

/* fn(ctx, begin, end, worker): process items [begin, end). */
typedef void (*dt_pool_fn)(void *ctx, int64_t begin, int64_t end, int worker);

/* Default spin of a waiting thread before it sleeps, in microseconds (threadpool.c):
 * DETRAIN_POOL_SPIN_US overrides it (cpu backend), 0 sleeps at once. */
#define DT_POOL_SPIN_US 50
#define DT_POOL_SPIN_US_MAX 100000

struct dt_pool *dt_pool_create(int threads, int spin_us);
void dt_pool_destroy(struct dt_pool *pool);
int dt_pool_threads(const struct dt_pool *pool);

/* Run fn over [0, n) split into at most `threads` slices of at least `grain` items;
 * returns when every slice is done. */
void dt_pool_run(struct dt_pool *pool, int64_t n, int64_t grain, dt_pool_fn fn, void *ctx);

#endif
