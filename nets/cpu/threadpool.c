/* Static-split thread pool for the CPU backend (see threadpool.h). A waiting thread -- a
 * worker for the next job, the caller for the workers to finish -- first spins: a few
 * pauses, then sched_yield between reads, for at most the pool's spin time; only then does
 * it sleep on a condition variable. So the many short parallel regions of a training step
 * do not each pay a wake-up (a futex wake and a reschedule: tens of microseconds on a
 * virtual machine), and on a machine shared with other work the yields hand the core to
 * whoever is runnable -- the thread being waited for, or the other job -- instead of
 * burning it (results/cpu/under-load). The spin is bounded in time, not in reads, so it
 * lasts as long on every CPU. */
#include "nets/cpu/threadpool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>

#include "core/status.h"

#define PAUSES 64 /* reads with a pause between them before the spin starts yielding */

static inline void cpu_pause(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ volatile("yield");
#endif
}

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* Wait, at most spin_ns, until *v != seen (want_zero: until *v == 0); whether it came. */
static bool spin_wait(const atomic_uint_fast64_t *v, uint_fast64_t seen, bool want_zero,
                      uint64_t spin_ns)
{
    uint64_t until = 0;
    for (unsigned i = 0;; i++) {
        const uint_fast64_t x = atomic_load_explicit(v, memory_order_acquire);
        if (want_zero ? x == 0 : x != seen) return true;
        if (spin_ns == 0) return false;
        if (i < PAUSES) {
            cpu_pause();
            continue;
        }
        const uint64_t t = now_ns();
        if (until == 0) until = t + spin_ns;
        else if (t >= until) return false;
        sched_yield();
    }
}

struct dt_pool {
    int threads;
    pthread_t *tids;
    pthread_mutex_t mu;
    pthread_cond_t wake;
    pthread_cond_t done;
    atomic_uint_fast64_t generation;
    atomic_uint_fast64_t pending; /* workers still running the current job */
    uint64_t spin_ns;
    int stop;
    /* the current job */
    dt_pool_fn fn;
    void *ctx;
    int64_t n;
    int parts;
};

struct worker_arg {
    struct dt_pool *pool;
    int index;
};

/* Slice `part` of `parts` over [0, n): contiguous, sizes differ by at most one. */
static void slice(int64_t n, int parts, int part, int64_t *begin, int64_t *end)
{
    int64_t base = n / parts, rem = n % parts;
    *begin = part * base + (part < rem ? part : rem);
    *end = *begin + base + (part < rem ? 1 : 0);
}

static void run_part(struct dt_pool *pool, int part)
{
    if (part >= pool->parts) return;
    int64_t b, e;
    slice(pool->n, pool->parts, part, &b, &e);
    if (b < e) pool->fn(pool->ctx, b, e, part);
}

static void *worker_main(void *p)
{
    struct worker_arg *wa = p;
    struct dt_pool *pool = wa->pool;
    int index = wa->index;
    free(wa);
    uint_fast64_t seen = 0;
    for (;;) {
        spin_wait(&pool->generation, seen, false, pool->spin_ns);
        uint_fast64_t gen = atomic_load_explicit(&pool->generation, memory_order_acquire);
        if (gen == seen) {
            pthread_mutex_lock(&pool->mu);
            while ((gen = atomic_load(&pool->generation)) == seen && !pool->stop)
                pthread_cond_wait(&pool->wake, &pool->mu);
            int stop = pool->stop;
            pthread_mutex_unlock(&pool->mu);
            if (stop && gen == seen) return NULL;
        }
        seen = gen;
        run_part(pool, index);
        if (atomic_fetch_sub_explicit(&pool->pending, 1, memory_order_acq_rel) == 1) {
            pthread_mutex_lock(&pool->mu);
            pthread_cond_signal(&pool->done);
            pthread_mutex_unlock(&pool->mu);
        }
    }
}

struct dt_pool *dt_pool_create(int threads, int spin_us)
{
    DT_ASSERT(spin_us >= 0);
    DT_ASSERT(threads >= 1);
    struct dt_pool *pool = dt_xcalloc(1, sizeof *pool);
    pool->threads = threads;
    pthread_mutex_init(&pool->mu, NULL);
    pthread_cond_init(&pool->wake, NULL);
    pthread_cond_init(&pool->done, NULL);
    atomic_init(&pool->generation, 0);
    atomic_init(&pool->pending, 0);
    pool->spin_ns = (uint64_t)spin_us * 1000u;
    pool->tids = dt_xcalloc((size_t)threads, sizeof *pool->tids);
    for (int t = 1; t < threads; t++) {
        struct worker_arg *wa = dt_xmalloc(sizeof *wa);
        wa->pool = pool;
        wa->index = t;
        DT_ASSERT_MSG(pthread_create(&pool->tids[t], NULL, worker_main, wa) == 0,
                      "cannot start a worker thread");
    }
    return pool;
}

void dt_pool_destroy(struct dt_pool *pool)
{
    if (!pool) return;
    pthread_mutex_lock(&pool->mu);
    pool->stop = 1;
    pthread_cond_broadcast(&pool->wake);
    pthread_mutex_unlock(&pool->mu);
    for (int t = 1; t < pool->threads; t++) pthread_join(pool->tids[t], NULL);
    pthread_mutex_destroy(&pool->mu);
    pthread_cond_destroy(&pool->wake);
    pthread_cond_destroy(&pool->done);
    free(pool->tids);
    free(pool);
}

int dt_pool_threads(const struct dt_pool *pool) { return pool->threads; }

void dt_pool_run(struct dt_pool *pool, int64_t n, int64_t grain, dt_pool_fn fn, void *ctx)
{
    if (n <= 0) return;
    if (grain < 1) grain = 1;
    int64_t max_parts = (n + grain - 1) / grain;
    int parts = pool->threads < max_parts ? pool->threads : (int)max_parts;
    if (parts <= 1) {
        fn(ctx, 0, n, 0);
        return;
    }
    pool->fn = fn;
    pool->ctx = ctx;
    pool->n = n;
    pool->parts = parts;
    atomic_store(&pool->pending, pool->threads - 1);
    pthread_mutex_lock(&pool->mu);
    atomic_fetch_add_explicit(&pool->generation, 1, memory_order_release);
    pthread_cond_broadcast(&pool->wake);
    pthread_mutex_unlock(&pool->mu);
    run_part(pool, 0);
    if (!spin_wait(&pool->pending, 0, true, pool->spin_ns)) {
        pthread_mutex_lock(&pool->mu);
        while (atomic_load(&pool->pending) != 0) pthread_cond_wait(&pool->done, &pool->mu);
        pthread_mutex_unlock(&pool->mu);
    }
}
