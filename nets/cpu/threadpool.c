/* Static-split thread pool for the CPU backend (see threadpool.h). Workers spin briefly on
 * a generation counter before sleeping on a condition variable, so the many short parallel
 * regions of a training step do not each pay a wake-up. */
#include "nets/cpu/threadpool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "core/status.h"

struct dt_pool {
    int threads;
    pthread_t *tids;
    pthread_mutex_t mu;
    pthread_cond_t wake;
    pthread_cond_t done;
    atomic_uint_fast64_t generation;
    atomic_int pending;
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
        uint_fast64_t gen;
        int spins = 0;
        while ((gen = atomic_load_explicit(&pool->generation, memory_order_acquire)) == seen &&
               spins < 20000)
            spins++;
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

struct dt_pool *dt_pool_create(int threads)
{
    DT_ASSERT(threads >= 1);
    struct dt_pool *pool = dt_xcalloc(1, sizeof *pool);
    pool->threads = threads;
    pthread_mutex_init(&pool->mu, NULL);
    pthread_cond_init(&pool->wake, NULL);
    pthread_cond_init(&pool->done, NULL);
    atomic_init(&pool->generation, 0);
    atomic_init(&pool->pending, 0);
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
    if (atomic_load_explicit(&pool->pending, memory_order_acquire) != 0) {
        int spins = 0;
        while (atomic_load_explicit(&pool->pending, memory_order_acquire) != 0 && spins < 20000)
            spins++;
        pthread_mutex_lock(&pool->mu);
        while (atomic_load(&pool->pending) != 0) pthread_cond_wait(&pool->done, &pool->mu);
        pthread_mutex_unlock(&pool->mu);
    }
}
