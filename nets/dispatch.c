/* The backend interface's implementation (nets/backend.h): the registry and the public op
 * wrappers -- every argument check happens here once, then the call goes to the backend's
 * ops table (nets/backend_impl.h). Its own file, apart from backend.h, so that the layers
 * run one way: dispatch.c -> backend_impl.h -> backend.h (scripts/house.py layers). */
#include "nets/backend_impl.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core/util.h"
#include "determinism/exact_product.h"
#include "nets/cost.h"

/* An optional member the backend has (nets/backend_impl.h says what NULL means). */
#define HAS(be, member) ((be)->ops->member != NULL)

/* An op the backend does not have is refused by name: DT_ERR_UNSUPPORTED, the detail in
 * the backend's op error record. */
#define REQUIRE(be, member)                                                                        \
    do {                                                                                           \
        if (!(be)->ops->member)                                                                    \
            return dt_backend_op_error((be), DT_ERR_UNSUPPORTED, "backend '%s' has no op %s",      \
                                       (be)->ops->name, #member);                                  \
    } while (0)

enum dt_status dt_backend_op_error(struct dt_backend *be, enum dt_status st, const char *fmt, ...)
{
    if (be->op_error.status != DT_OK) return st; /* the first detail wins */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(be->op_error.msg, sizeof be->op_error.msg, fmt, ap);
    va_end(ap);
    be->op_error.status = st;
    return st;
}

bool dt_backend_take_op_error(struct dt_backend *be, struct dt_error *out)
{
    if (be->op_error.status == DT_OK) return false;
    if (out) *out = be->op_error;
    memset(&be->op_error, 0, sizeof be->op_error);
    return true;
}

void dt_backend_destroy(struct dt_backend *be)
{
    if (!be) return;
    if (be->copy_out && HAS(be, copy_out_release)) be->ops->copy_out_release(be);
    be->ops->destroy(be);
    free(be);
}

const char *dt_backend_name(const struct dt_backend *be) { return be->ops->name; }
/* The first op of nets/op_list.h the backend lacks (a NULL member), or NULL. */
const char *dt_backend_missing_op(const struct dt_backend *be)
{
#define DT_OP_MISSING_(ENUM, name, ...)                                                            \
    if (!be->ops->name) return #name;
    DT_OP_LIST(DT_OP_MISSING_)
#undef DT_OP_MISSING_
    return NULL;
}

int dt_backend_threads(const struct dt_backend *be) { return be->threads; }

int dt_backend_take_algo_notes(struct dt_backend *be, struct dt_algo_note *notes, int max)
{
    DT_ASSERT(max >= 0 && (notes || max == 0));
    if (!HAS(be, take_algo_notes)) return 0;
    return be->ops->take_algo_notes(be, notes, max);
}

void dt_backend_reset_algo_choices(struct dt_backend *be)
{
    if (HAS(be, reset_algo_choices)) be->ops->reset_algo_choices(be);
}

int64_t dt_backend_first_nonfinite(struct dt_backend *be, const float *p, int64_t n)
{
    DT_ASSERT(n >= 0 && (p || n == 0));
    if (n == 0) return -1;
    if (HAS(be, first_nonfinite)) return be->ops->first_nonfinite(be, p, n);
    const float *host = dt_backend_host_view(be, p);
    float *copy = NULL;
    if (!host) {
        copy = dt_xcalloc((size_t)n, sizeof(float)); /* zeros if a capture skips the copy */
        dt_backend_download(be, copy, p, (size_t)n * sizeof(float));
        host = copy;
    }
    int64_t bad = -1;
    for (int64_t i = 0; i < n && bad < 0; i++) {
        uint32_t bits;
        memcpy(&bits, &host[i], sizeof bits);
        if ((bits & 0x7fffffffu) >= 0x7f800000u) bad = i;
    }
    free(copy);
    return bad;
}

bool dt_backend_first_nonfinite_many(struct dt_backend *be, const float *const *p, const int64_t *n,
                                     int count, int *which, int64_t *index)
{
    DT_ASSERT(count >= 0 && which && index);
    if (HAS(be, first_nonfinite_many))
        return be->ops->first_nonfinite_many(be, p, n, count, which, index);
    for (int i = 0; i < count; i++) {
        const int64_t bad = dt_backend_first_nonfinite(be, p[i], n[i]);
        if (bad >= 0) {
            *which = i;
            *index = bad;
            return true;
        }
    }
    return false;
}

void dt_backend_describe(struct dt_backend *be, char *buf, size_t size)
{
    if (size) buf[0] = '\0';
    if (HAS(be, describe) && size) be->ops->describe(be, buf, size);
}

void *dt_backend_alloc(struct dt_backend *be, size_t bytes) { return be->ops->alloc(be, bytes); }
void dt_backend_free(struct dt_backend *be, void *p)
{
    if (p) be->ops->free(be, p);
}
void dt_backend_upload(struct dt_backend *be, void *dst, const void *src, size_t bytes)
{
    be->ops->upload(be, dst, src, bytes);
}
void dt_backend_download(struct dt_backend *be, void *dst, const void *src, size_t bytes)
{
    if (be->cost) { /* a blocking copy back: a wait on a device (the cost model) */
        be->cost->downloads += 1;
        be->cost->download_bytes += (double)bytes;
    }
    be->ops->download(be, dst, src, bytes);
}
const void *dt_backend_host_view(struct dt_backend *be, const void *p)
{
    return be->ops->host_view ? be->ops->host_view(be, p) : NULL;
}

void dt_backend_synchronize(struct dt_backend *be)
{
    if (HAS(be, synchronize)) be->ops->synchronize(be);
}

int64_t dt_backend_host_waits(const struct dt_backend *be) { return be->host_waits; }

struct dt_launch_counts dt_backend_launch_counts(const struct dt_backend *be)
{
    return be->launches;
}

/* ---- deferred checks ------------------------------------------------------------------ */

void dt_backend_defer_checks(struct dt_backend *be, bool on)
{
    be->checks_deferred = on;
    if (HAS(be, defer_checks)) be->ops->defer_checks(be, on);
}

void dt_backend_set_context(struct dt_backend *be, const char *tensor, bool input)
{
    dt_backend_set_context_role(be, tensor, input ? "input gradient" : "gradient");
}

void dt_backend_set_context_role(struct dt_backend *be, const char *tensor, const char *role)
{
    snprintf(be->context, sizeof be->context, "%s %s", tensor, role);
}

void dt_backend_set_layer(struct dt_backend *be, const char *layer)
{
    snprintf(be->layer, sizeof be->layer, "%s", layer ? layer : "");
}

const char *dt_backend_layer(const struct dt_backend *be) { return be->layer; }

void dt_backend_defer_loss(struct dt_backend *be, bool on) { be->loss_deferred = on; }

void dt_backend_read_deferred(struct dt_backend *be, void *host_dst, const void *src, size_t bytes)
{
    if (be->checks_deferred && HAS(be, read_deferred)) {
        be->ops->read_deferred(be, host_dst, src, bytes);
    } else if (be->checks_deferred && be->cost && !be->cost->model->read_deferred_waits(be->cost)) {
        be->cost->deferred_reads += 1; /* counted as CUDA reads it: with the step's end */
        be->ops->download(be, host_dst, src, bytes);
    } else {
        dt_backend_download(be, host_dst, src, bytes);
    }
}

enum dt_status dt_backend_step_end(struct dt_backend *be, struct dt_error *err)
{
    if (HAS(be, step_end)) return be->ops->step_end(be, err);
    dt_backend_synchronize(be);
    return DT_OK;
}

/* ---- the step as one graph -------------------------------------------------------------- */

enum dt_status dt_backend_graph_begin(struct dt_backend *be, struct dt_error *err)
{
    if (!HAS(be, graph_begin))
        return dt_error_set(err, DT_ERR_UNSUPPORTED,
                            "the %s backend has no graphs (its ops run as they are called)",
                            be->ops->name);
    return be->ops->graph_begin(be, err);
}

enum dt_status dt_backend_graph_end(struct dt_backend *be, void **graph, bool launch,
                                    struct dt_error *err)
{
    DT_ASSERT(HAS(be, graph_end));
    return be->ops->graph_end(be, graph, launch, err);
}

void dt_backend_graph_describe(struct dt_backend *be, const void *graph, char *buf, size_t size)
{
    if (size) buf[0] = '\0';
    if (graph && HAS(be, graph_describe)) be->ops->graph_describe(be, graph, buf, size);
}

void dt_backend_graph_free(struct dt_backend *be, void *graph)
{
    if (graph && HAS(be, graph_free)) be->ops->graph_free(be, graph);
}

/* ---- the resident training set ------------------------------------------------------- */

struct dt_resident *dt_backend_resident_create(struct dt_backend *be,
                                               const struct dt_resident_src *src)
{
    DT_ASSERT(src && src->n >= 1 && src->dim >= 1 && src->labels && (src->pixels || src->values));
    if (!HAS(be, resident_create)) return NULL;
    DT_ASSERT(be->ops->resident_free && be->ops->gather);
    return be->ops->resident_create(be, src);
}

void dt_backend_resident_free(struct dt_backend *be, struct dt_resident *set)
{
    if (set) be->ops->resident_free(be, set);
}

void dt_backend_gather(struct dt_backend *be, float *x, int32_t *labels,
                       const struct dt_resident *set, const int64_t *idx, int64_t B)
{
    DT_ASSERT(x && labels && set && idx && B >= 1);
    if (be->cost) be->cost->gathers += 1; /* a launch on a device, outside the ops */
    be->ops->gather(be, x, labels, set, idx, B);
}

void *dt_backend_host_alloc(struct dt_backend *be, size_t bytes)
{
    if (HAS(be, host_alloc)) return be->ops->host_alloc(be, bytes);
    return dt_xmalloc(bytes ? bytes : 1);
}

void dt_backend_host_free(struct dt_backend *be, void *p)
{
    if (!p) return;
    if (HAS(be, host_free)) be->ops->host_free(be, p);
    else free(p);
}

/* The begun/waited counts are the tickets: begins come from one thread and waits from one
 * (maybe another) thread, so each count has one writer; the release/acquire pairs order a
 * copy's begin before its wait and a wait before the begin that reuses its slot. */
void dt_backend_copy_out_begin(struct dt_backend *be, void *host_dst, const void *const *srcs,
                               const size_t *bytes, int n)
{
    DT_ASSERT(host_dst && srcs && bytes && n >= 0);
    const int64_t ticket = __atomic_load_n(&be->copy_out_begun, __ATOMIC_RELAXED);
    DT_ASSERT_MSG(ticket - __atomic_load_n(&be->copy_out_waited, __ATOMIC_ACQUIRE) <
                      DT_BACKEND_COPY_OUT_DEPTH,
                  "copy_out_begin: DT_BACKEND_COPY_OUT_DEPTH copies not yet waited for");
    for (int i = 0; i < n; i++) DT_ASSERT_MSG(srcs[i] != NULL, "copy_out_begin: a NULL source");
    if (HAS(be, copy_out_begin)) {
        be->ops->copy_out_begin(be, ticket, host_dst, srcs, bytes, n);
    } else { /* no asynchronous copy: download now, so the wait has nothing left to do */
        size_t off = 0;
        for (int i = 0; i < n; i++) {
            if (bytes[i]) dt_backend_download(be, (char *)host_dst + off, srcs[i], bytes[i]);
            off += bytes[i];
        }
    }
    __atomic_store_n(&be->copy_out_begun, ticket + 1, __ATOMIC_RELEASE);
}

enum dt_status dt_backend_digests_out_begin(struct dt_backend *be, uint8_t *host_dst,
                                            const float *const *srcs, const int64_t *counts, int n)
{
    DT_ASSERT(host_dst && srcs && counts && n >= 0);
    const int64_t ticket = __atomic_load_n(&be->copy_out_begun, __ATOMIC_RELAXED);
    DT_ASSERT_MSG(ticket - __atomic_load_n(&be->copy_out_waited, __ATOMIC_ACQUIRE) <
                      DT_BACKEND_COPY_OUT_DEPTH,
                  "digests_out_begin: DT_BACKEND_COPY_OUT_DEPTH copies not yet waited for");
    enum dt_status st;
    if (HAS(be, digests_out_begin)) {
        st = be->ops->digests_out_begin(be, ticket, host_dst, srcs, counts, n);
    } else { /* the op now, where the tensors are; the wait has nothing left to do */
        uint8_t *d = dt_backend_alloc(be, (size_t)n * 32 + 1);
        struct dt_policy pol; /* the op obeys no control */
        dt_policy_from_level(&pol, DT_LEVEL_PORTABLE);
        st = dt_tensor_digests(be, d, srcs, counts, n, &pol);
        if (st == DT_OK) dt_backend_download(be, host_dst, d, (size_t)n * 32);
        dt_backend_free(be, d);
    }
    if (st == DT_OK) __atomic_store_n(&be->copy_out_begun, ticket + 1, __ATOMIC_RELEASE);
    return st;
}

void dt_backend_copy_out_wait(struct dt_backend *be)
{
    const int64_t ticket = __atomic_load_n(&be->copy_out_waited, __ATOMIC_RELAXED);
    DT_ASSERT_MSG(ticket < __atomic_load_n(&be->copy_out_begun, __ATOMIC_ACQUIRE),
                  "copy_out_wait: no copy begun that was not waited for");
    if (HAS(be, copy_out_wait)) be->ops->copy_out_wait(be, ticket);
    __atomic_store_n(&be->copy_out_waited, ticket + 1, __ATOMIC_RELEASE);
}

enum dt_status dt_backend_set_forced_order(struct dt_backend *be, uint64_t seed)
{
    if (!HAS(be, set_forced_order)) return DT_ERR_UNSUPPORTED;
    be->ops->set_forced_order(be, seed);
    return DT_OK;
}

/* The rows' columns as tables (nets/op_list.h). */
#define DT_OP_NAME_(ENUM, name, ...) #name,
static const char *const op_names[] = {DT_OP_LIST(DT_OP_NAME_)};
#undef DT_OP_NAME_
#define DT_OP_PHASE_(ENUM, name, phase, ...) DT_PHASE_##phase,
static const enum dt_op_phase op_phases[] = {DT_OP_LIST(DT_OP_PHASE_)};
#undef DT_OP_PHASE_
#define DT_OP_OUTPUTS_(ENUM, name, phase, outputs, ...) outputs,
static const char *const op_outputs[] = {DT_OP_LIST(DT_OP_OUTPUTS_)};
#undef DT_OP_OUTPUTS_
#define DT_OP_CONTROLS_(ENUM, name, phase, outputs, controls, ...) controls,
static const char *const op_controls[] = {DT_OP_LIST(DT_OP_CONTROLS_)};
#undef DT_OP_CONTROLS_

const char *dt_op_name(enum dt_op op)
{
    DT_ASSERT(op >= 0 && op < DT_OP_COUNT);
    return op_names[op];
}

const char *dt_op_phase(enum dt_op op)
{
    DT_ASSERT(op >= 0 && op < DT_OP_COUNT);
    return op_phases[op] == DT_PHASE_BACKWARD ? "backward"
           : op_phases[op] == DT_PHASE_UPDATE ? "update"
                                              : "forward";
}

/* The k-th '|'-separated word of list (past the last: the last) into buf. */
static void list_item(char *buf, size_t size, const char *list, int k)
{
    for (int i = 0; i < k && strchr(list, '|'); i++) list = strchr(list, '|') + 1;
    snprintf(buf, size, "%.*s", (int)strcspn(list, "|"), list);
}

void dt_op_output_name(char *buf, size_t size, enum dt_op op, int k)
{
    DT_ASSERT(op >= 0 && op < DT_OP_COUNT);
    list_item(buf, size, op_outputs[op], k);
}

bool dt_op_obeys(enum dt_op op, const char *control)
{
    DT_ASSERT(op >= 0 && op < DT_OP_COUNT && control);
    const size_t len = strlen(control);
    for (const char *s = op_controls[op]; *s; s += strcspn(s, "|"), s += *s == '|')
        if (strcspn(s, "|") == len && strncmp(s, control, len) == 0) return true;
    return false;
}

/* observer, profiling or the slow-op hook on: the op's dispatch takes its instrumented
 * path; with none of them it calls the op and nothing else. */
static void instrument(struct dt_backend *be)
{
    be->instrumented =
        be->observer != NULL || be->profiling || be->slow_op != 0 || be->cost != NULL;
}

void dt_backend_cost_enable(struct dt_backend *be, struct dt_cost_tally *t)
{
    DT_ASSERT_MSG(!t || t->model, "a cost tally names its model (dt_cuda_cost_model)");
    if (be->cost && be->cost != t && be->cost->model->end) be->cost->model->end(be->cost);
    if (t && t->model->begin) t->model->begin(t);
    be->cost = t;
    instrument(be);
}

/* One call's cost into the tally (the instrumented path, before the op runs). */
static void cost_record(struct dt_backend *be, enum dt_op op, struct dt_op_cost *c)
{
    struct dt_cost_tally *t = be->cost;
    c->calls = 1;
    dt_cost_accumulate(&t->op[op], c);
    if (t->dev) {
        t->pred_s[op] += dt_cost_predict_s(c, t->dev, false);
        t->graph_s[op] += dt_cost_predict_s(c, t->dev, true);
    }
}

static struct dt_cost_ctx cost_ctx(const struct dt_backend *be)
{
    return (struct dt_cost_ctx){.like = be,
                                .recorder = be->cost->recorder,
                                .shards = be->shards.count,
                                .shard_batch =
                                    be->shards.count ? be->shards.row[be->shards.count] : 0,
                                .checks_deferred = be->checks_deferred,
                                .loss_deferred = be->loss_deferred,
                                .one_pass = be->cost->one_pass};
}

void dt_backend_profile_enable(struct dt_backend *be, bool on)
{
    be->profiling = on;
    instrument(be);
}

#define HAS_TIMERS(be) (HAS(be, op_mark) && HAS(be, op_times))

void dt_backend_profile_read(struct dt_backend *be, double seconds[DT_OP_COUNT])
{
    if (HAS_TIMERS(be)) be->ops->op_times(be, be->op_seconds);
    memcpy(seconds, be->op_seconds, sizeof be->op_seconds);
}

void dt_backend_profile_reset(struct dt_backend *be)
{
    if (HAS_TIMERS(be)) be->ops->op_times(be, be->op_seconds); /* forgets the pairs */
    memset(be->op_seconds, 0, sizeof be->op_seconds);
}

void dt_backend_set_observer(struct dt_backend *be, dt_op_observer_fn fn, void *ctx)
{
    be->observer = fn;
    be->observer_ctx = fn ? ctx : NULL;
    instrument(be);
}

/* An op's tensors for the observer (dt_backend_set_observer): n float32 / int32 written in
 * backend memory, n float32 written in host memory, a parameter read (for naming). */
#define OUT(p, n)                                                                                  \
    {                                                                                              \
        (p), (int64_t)(n)*4, DT_OP_OUT                                                             \
    }
#define OUT_INT(p, n)                                                                              \
    {                                                                                              \
        (p), (int64_t)(n)*4, DT_OP_OUT_INT                                                         \
    }
#define OUT_HOST(p, n)                                                                             \
    {                                                                                              \
        (p), (int64_t)(n)*4, DT_OP_OUT_HOST                                                        \
    }
#define PARAM(p)                                                                                   \
    {                                                                                              \
        (p), 0, DT_OP_IN_PARAM                                                                     \
    }

/* The test hook's delay (dt_backend_set_slow_op). Profiling times an op by the backend's
 * device timers around it, or else by the wall clock with the backend synchronised before
 * and after, so the time is the op's own, kernels included, and not the tail of earlier
 * ops. */
static void slow_hook(struct dt_backend *be, int op)
{
    if (be->slow_op != op + 1) return;
    const double until = dt_now_s() + be->slow_seconds;
    while (dt_now_s() < until) {
    }
}

void dt_backend_set_slow_op(struct dt_backend *be, int op, double seconds)
{
    be->slow_op = op >= 0 && op < DT_OP_COUNT ? op + 1 : 0;
    be->slow_seconds = seconds;
    instrument(be);
}

/* The call, after the test hook's delay when it names this op (inside any timing). */
#define SLOWED(be, op, call) ((be)->slow_op ? slow_hook((be), (op)) : (void)0, (call))

/* An op's tensors as its plan names them (at most OP_TENSORS_MAX). */
#define OP_TENSORS_MAX 8
struct op_tensors {
    struct dt_op_tensor t[OP_TENSORS_MAX];
    int n;
};
/* Name the op's tensors (OUT, PARAM...) for the observer -- only when t is not NULL, that
 * is when the call is instrumented: the hot path builds nothing. */
#define TENSORS(dst, ...)                                                                          \
    do {                                                                                           \
        if (dst) {                                                                                 \
            const struct dt_op_tensor a_[] = {__VA_ARGS__};                                        \
            _Static_assert(sizeof a_ / sizeof a_[0] <= OP_TENSORS_MAX, "too many op tensors");     \
            memcpy((dst)->t, a_, sizeof a_);                                                       \
            (dst)->n = (int)(sizeof a_ / sizeof a_[0]);                                            \
        }                                                                                          \
    } while (0)

/* The instrumented path of `call` (an expression yielding enum dt_status): the observer
 * gets the tensors `tens` (struct op_tensors *) before and after; profiling times it. */
#define INSTRUMENTED(be, op, tens, call)                                                           \
    do {                                                                                           \
        if ((be)->observer) {                                                                      \
            (be)->observer((be)->observer_ctx, (be), (op), false, (tens)->t, (tens)->n);           \
            enum dt_status st_ = SLOWED(be, op, call);                                             \
            if (st_ == DT_OK)                                                                      \
                (be)->observer((be)->observer_ctx, (be), (op), true, (tens)->t, (tens)->n);        \
            return st_;                                                                            \
        }                                                                                          \
        if (!(be)->profiling) return SLOWED(be, op, call);                                         \
        if (HAS_TIMERS(be)) {                                                                      \
            (be)->ops->op_mark((be), (op), true);                                                  \
            enum dt_status st_ = SLOWED(be, op, call);                                             \
            (be)->ops->op_mark((be), (op), false);                                                 \
            return st_;                                                                            \
        }                                                                                          \
        dt_backend_synchronize(be);                                                                \
        double t0_ = dt_now_s();                                                                   \
        enum dt_status st_ = SLOWED(be, op, call);                                                 \
        dt_backend_synchronize(be);                                                                \
        (be)->op_seconds[op] += dt_now_s() - t0_;                                                  \
        return st_;                                                                                \
    } while (0)

/* A hand-written wrapper's dispatch (exact_sum's stages): `call`, its tensors after it. */
#define DISPATCH(be, op, call, ...)                                                                \
    do {                                                                                           \
        if (!(be)->instrumented) return (call); /* the hot path: one test */                       \
        struct op_tensors t_, *tp_ = &t_;                                                          \
        TENSORS(tp_, __VA_ARGS__);                                                                 \
        INSTRUMENTED(be, op, tp_, call);                                                           \
    } while (0)

/* Shared checks: sizes positive, pointers present. A violation is a caller bug. */
#define CHECK_DIMS(...)                                                                            \
    do {                                                                                           \
        int64_t dims_[] = {__VA_ARGS__};                                                           \
        for (size_t i_ = 0; i_ < sizeof dims_ / sizeof dims_[0]; i_++)                             \
            DT_ASSERT_MSG(dims_[i_] > 0, "op called with a non-positive size");                    \
    } while (0)

/* ---- reduction: exact, one pass: the shard form of the batch reductions --------------- */

void dt_backend_set_shards(struct dt_backend *be, const struct dt_shards *sh)
{
    if (!sh) {
        memset(&be->shards, 0, sizeof be->shards);
        return;
    }
    DT_ASSERT(sh->count >= 1 && sh->row && sh->row[0] == 0);
    for (int64_t k = 0; k < sh->count; k++)
        DT_ASSERT_MSG(sh->row[k] < sh->row[k + 1], "dt_backend_set_shards: an empty shard");
    be->shards = *sh;
}

/* Does a batch reduction over `rows` rows give shard partials? rows must then be a
 * multiple of the shards' batch (a convolution's B*OH*OW). */
static bool sharded(const struct dt_backend *be, const struct dt_policy *pol, int64_t rows)
{
    if (be->shards.count == 0 || !dt_reduction_exact(pol)) return false;
    const int64_t batch = be->shards.row[be->shards.count];
    DT_ASSERT_MSG(rows % batch == 0,
                  "a batch reduction over rows that are not a multiple of the shards' batch");
    return true;
}

/* Under `math: fast` the per-row products come from libraries (OpenBLAS, cuBLAS, cuDNN)
 * whose bits for a row may depend on where it sits in the call (edge kernels, blocking
 * by shape). At reduction: exact they then run once per shard, so a row's bits are those
 * of a pass over its shard on any rank count. Own kernels (every other math) are per-row
 * exact and run once over the batch. */
static bool library_sharded(const struct dt_backend *be, const struct dt_policy *pol, int64_t rows)
{
    return dt_math_fast(pol) && sharded(be, pol, rows);
}

/* The plain op once per shard on the shard's rows: the bits of a pass per shard. Each
 * call sees the shards cleared, so it sums its rows as `fixed` does. */
#define FOR_EACH_SHARD(be, k, r0, rows, mult, body)                                                \
    do {                                                                                           \
        const struct dt_shards sh_ = (be)->shards;                                                 \
        (be)->shards.count = 0;                                                                    \
        enum dt_status st_ = DT_OK;                                                                \
        for (int64_t k = 0; k < sh_.count && st_ == DT_OK; k++) {                                  \
            const int64_t r0 = sh_.row[k] * (mult);                                                \
            const int64_t rows = (sh_.row[k + 1] - sh_.row[k]) * (mult);                           \
            st_ = (body);                                                                          \
        }                                                                                          \
        (be)->shards = sh_;                                                                        \
        return st_;                                                                                \
    } while (0)

/* Rows per example of a batch reduction over `rows` rows (the GPT's positions). */
static int64_t shard_mult(const struct dt_backend *be, int64_t rows)
{
    return rows / be->shards.row[be->shards.count];
}

static enum dt_status dense_forward_per_shard(struct dt_backend *be, float *y, const float *x,
                                              const float *w, const float *bias, int64_t B,
                                              int64_t in, int64_t out, const struct dt_policy *pol)
{
    const int64_t mult = shard_mult(be, B);
    FOR_EACH_SHARD(
        be, k, r0, rows, mult,
        be->ops->dense_forward(be, y + r0 * out, x + r0 * in, w, bias, rows, in, out, pol));
}

static enum dt_status dense_bwd_data_per_shard(struct dt_backend *be, float *dx, const float *dy,
                                               const float *w, int64_t B, int64_t in, int64_t out,
                                               const struct dt_policy *pol)
{
    const int64_t mult = shard_mult(be, B);
    FOR_EACH_SHARD(
        be, k, r0, rows, mult,
        be->ops->dense_backward_data(be, dx + r0 * in, dy + r0 * out, w, rows, in, out, pol));
}

static enum dt_status conv_forward_per_shard(struct dt_backend *be, float *y, const float *x,
                                             const float *w, const float *bias,
                                             const struct dt_conv2d_shape *s,
                                             const struct dt_policy *pol)
{
    struct dt_conv2d_shape part = *s;
    FOR_EACH_SHARD(
        be, k, r0, rows, 1,
        (part.B = rows, be->ops->conv2d_forward(be, y + r0 * s->OH * s->OW * s->K_out,
                                                x + r0 * s->H * s->W * s->C, w, bias, &part, pol)));
}

static enum dt_status conv_bwd_data_per_shard(struct dt_backend *be, float *dx, const float *dy,
                                              const float *w, const struct dt_conv2d_shape *s,
                                              const struct dt_policy *pol)
{
    struct dt_conv2d_shape part = *s;
    FOR_EACH_SHARD(be, k, r0, rows, 1,
                   (part.B = rows, be->ops->conv2d_backward_data(be, dx + r0 * s->H * s->W * s->C,
                                                                 dy + r0 * s->OH * s->OW * s->K_out,
                                                                 w, &part, pol)));
}

static enum dt_status dense_wgrad_per_shard(struct dt_backend *be, float *dw, const float *x,
                                            const float *dy, int64_t B, int64_t in, int64_t out,
                                            const struct dt_policy *pol)
{
    const int64_t mult = shard_mult(be, B);
    FOR_EACH_SHARD(be, k, r0, rows, mult,
                   be->ops->dense_backward_weight(be, dw + k * in * out, x + r0 * in, dy + r0 * out,
                                                  rows, in, out, pol));
}

static enum dt_status bias_per_shard(struct dt_backend *be, float *dbias, const float *dy,
                                     int64_t B, int64_t out, const struct dt_policy *pol)
{
    const int64_t mult = B / be->shards.row[be->shards.count];
    FOR_EACH_SHARD(be, k, r0, rows, mult,
                   be->ops->bias_backward(be, dbias + k * out, dy + r0 * out, rows, out, pol));
}

/* The backend's own shard op when it has one for this policy, else one call per shard. */
static enum dt_status bias_shards(struct dt_backend *be, float *dbias, const float *dy, int64_t B,
                                  int64_t out, const struct dt_policy *pol)
{
    if (HAS(be, bias_backward_shards)) {
        enum dt_status st = be->ops->bias_backward_shards(be, dbias, dy, B, out, pol);
        if (st != DT_ERR_UNSUPPORTED) return st;
    }
    return bias_per_shard(be, dbias, dy, B, out, pol);
}

static enum dt_status dense_wgrad_shards(struct dt_backend *be, float *dw, const float *x,
                                         const float *dy, int64_t B, int64_t in, int64_t out,
                                         const struct dt_policy *pol)
{
    if (HAS(be, dense_backward_weight_shards)) { /* DT_ERR_UNSUPPORTED: a call per shard */
        enum dt_status st = be->ops->dense_backward_weight_shards(be, dw, x, dy, B, in, out, pol);
        if (st != DT_ERR_UNSUPPORTED) return st;
    }
    return dense_wgrad_per_shard(be, dw, x, dy, B, in, out, pol);
}

/* One rank holding every shard (be->shards.summed): the tensor of the step's pack whose slot
 * 0 is dw, or -1. */
static int summed_tensor(const struct dt_backend *be, const float *dw)
{
    const struct dt_shards *sh = &be->shards;
    if (!sh->summed) return -1;
    const struct dt_exact_layout *L = sh->layout;
    for (int i = 0; i < L->tensors; i++)
        if (dw == sh->pack + L->slots * L->first[i]) return i;
    return -1;
}

/* The weight gradient summed by the backend's op itself: one rank, the products in floats
 * (math: exact's partials come from the per-shard calls). Not under an observer (explain's
 * op hashing): there each op's output must be what the op's row says when it returns --
 * every shard's partial in its slot, as on a backend without the hook -- while the summed
 * op leaves the sum in slot 0 and its risky rows for the exact sum (the H200 run of
 * 2026-12-04: explain.cpu_vs_gpu named the CPU's dense1.weight gradient). Same bits after
 * the exact sum either way. */
static bool wgrad_summed_here(const struct dt_backend *be, const struct dt_policy *pol,
                              const float *dw)
{
    return HAS(be, dense_backward_weight_summed) && !dt_math_exact(pol) && be->observer == NULL &&
           summed_tensor(be, dw) >= 0;
}

static enum dt_status dense_wgrad_summed(struct dt_backend *be, float *dw, const float *x,
                                         const float *dy, int64_t B, int64_t in, int64_t out,
                                         const struct dt_policy *pol)
{
    const int i = summed_tensor(be, dw);
    const uint32_t hint = be->shards.hint ? be->shards.hint[i] : DT_EXACT_UNSUMMED;
    return be->ops->dense_backward_weight_summed(be, dw, x, dy, B, in, out, pol, hint,
                                                 &be->shards.summed[i]);
}

static enum dt_status loss_per_shard(struct dt_backend *be, float *probs, float *loss_host,
                                     int64_t *correct_host, const float *logits,
                                     const int32_t *labels, int64_t B, int64_t C,
                                     const struct dt_policy *pol)
{
    const int64_t mult = shard_mult(be, B);
    const struct dt_shards sh = be->shards;
    be->shards.count = 0;
    enum dt_status st = DT_OK;
    if (correct_host) *correct_host = 0;
    for (int64_t k = 0; k < sh.count && st == DT_OK; k++) {
        const int64_t r0 = sh.row[k] * mult, rows = (sh.row[k + 1] - sh.row[k]) * mult;
        int64_t correct = 0;
        st = be->ops->softmax_xent_forward(be, probs + r0 * C, loss_host + k,
                                           correct_host ? &correct : NULL, logits + r0 * C,
                                           labels + r0, rows, C, pol);
        if (correct_host) *correct_host += correct;
    }
    be->shards = sh;
    return st;
}

/* The backend's own shard op for the losses where it takes the call, else a call per shard. */
static enum dt_status loss_shards(struct dt_backend *be, float *probs, float *loss_host,
                                  int64_t *correct_host, const float *logits, const int32_t *labels,
                                  int64_t B, int64_t C, const struct dt_policy *pol)
{
    if (HAS(be, softmax_xent_forward_shards)) {
        enum dt_status st = be->ops->softmax_xent_forward_shards(be, probs, loss_host, correct_host,
                                                                 logits, labels, B, C, pol);
        if (st != DT_ERR_UNSUPPORTED) return st;
    }
    return loss_per_shard(be, probs, loss_host, correct_host, logits, labels, B, C, pol);
}

static enum dt_status conv_wgrad_per_shard(struct dt_backend *be, float *dw, const float *x,
                                           const float *dy, const struct dt_conv2d_shape *s,
                                           const struct dt_policy *pol)
{
    const int64_t n = s->KH * s->KW * s->C * s->K_out;
    struct dt_conv2d_shape part = *s;
    FOR_EACH_SHARD(be, k, r0, rows, 1,
                   (part.B = rows, be->ops->conv2d_backward_weight(
                                       be, dw + k * n, x + r0 * s->H * s->W * s->C,
                                       dy + r0 * s->OH * s->OW * s->K_out, &part, pol)));
}

/* The backend's own shard op for the convolution's weight gradient where it takes the call,
 * else a call per shard. */
static enum dt_status conv_wgrad_shards(struct dt_backend *be, float *dw, const float *x,
                                        const float *dy, const struct dt_conv2d_shape *s,
                                        const struct dt_policy *pol)
{
    if (HAS(be, conv2d_backward_weight_shards)) {
        enum dt_status st = be->ops->conv2d_backward_weight_shards(be, dw, x, dy, s, pol);
        if (st != DT_ERR_UNSUPPORTED) return st;
    }
    return conv_wgrad_per_shard(be, dw, x, dy, s, pol);
}

/* ---- the exact sum of the partials ---------------------------------------------------- */

static void check_exact_layout(const struct dt_exact_layout *L)
{
    DT_ASSERT(L && L->tensors >= 1 && L->n && L->first && L->slots >= 1 && L->shards >= L->slots);
    for (int i = 0; i < L->tensors; i++)
        DT_ASSERT(L->n[i] >= 1 && L->first[i + 1] == L->first[i] + L->n[i]);
}

enum dt_status dt_exact_max(struct dt_backend *be, uint32_t *max_bits, const float *pack,
                            const struct dt_exact_layout *L)
{
    check_exact_layout(L);
    DT_ASSERT_MSG(!L->summed, "summed tensors: dt_exact_sum only");
    DT_ASSERT(max_bits && pack);
    REQUIRE(be, exact_max);
    DISPATCH(be, DT_OP_EXACT_SUM, be->ops->exact_max(be, max_bits, pack, L),
             OUT_INT(max_bits, L->tensors));
}

enum dt_status dt_exact_to_fixed(struct dt_backend *be, int64_t *acc, const float *pack,
                                 const uint32_t *max_bits, const struct dt_exact_layout *L)
{
    check_exact_layout(L);
    DT_ASSERT(acc && pack && max_bits);
    REQUIRE(be, exact_to_fixed);
    DISPATCH(be, DT_OP_EXACT_SUM, be->ops->exact_to_fixed(be, acc, pack, max_bits, L),
             OUT_INT(acc, 2 * L->first[L->tensors]));
}

enum dt_status dt_exact_round(struct dt_backend *be, float *pack, const int64_t *acc,
                              const uint32_t *max_bits, const struct dt_exact_layout *L)
{
    check_exact_layout(L);
    DT_ASSERT(acc && pack && max_bits);
    REQUIRE(be, exact_round);
    DISPATCH(be, DT_OP_EXACT_SUM, be->ops->exact_round(be, pack, acc, max_bits, L),
             OUT(pack, L->slots * L->first[L->tensors]));
}

enum dt_status dt_exact_sum_packs(struct dt_backend *be, float *out, const float *const *packs,
                                  const int64_t *slots, int n_packs, const uint32_t *max_bits,
                                  const struct dt_exact_layout *L, int64_t e0, int64_t e1)
{
    DT_ASSERT(L && L->tensors >= 1 && n_packs >= 1 && n_packs <= DT_EXACT_PACKS_MAX);
    DT_ASSERT(out && packs && slots && max_bits && 0 <= e0 && e0 <= e1 &&
              e1 <= L->first[L->tensors]);
    int64_t held = 0;
    for (int p = 0; p < n_packs; p++) {
        DT_ASSERT(packs[p] && slots[p] >= 1);
        held += slots[p];
    }
    DT_ASSERT(held <= L->shards);
    REQUIRE(be, exact_sum_packs);
    DISPATCH(be, DT_OP_EXACT_SUM,
             be->ops->exact_sum_packs(be, out, packs, slots, n_packs, max_bits, L, e0, e1),
             OUT(out, e1 - e0));
}

/* ---- plans: one per row of nets/op_list.h -------------------------------------------
 * plan_<name> checks the op's arguments (a violation is a caller bug), names the tensors it
 * writes for the observer (only when t is not NULL) and returns what to call with the op's
 * arguments: the backend's op, or a route over the shards with the same signature. The
 * wrapper dt_<name> is generated from the row (the end of this file). */

/* exact_sum with tensors the shard ops summed (L->summed): the runs of the others, each as a
 * layout of its own; the summed ones' maxima copied. */
static enum dt_status exact_sum_rest(struct dt_backend *be, float *pack, uint32_t *max_bits,
                                     const struct dt_exact_layout *L)
{
    int64_t *first = dt_xmalloc((size_t)(L->tensors + 1) * sizeof *first);
    enum dt_status st = DT_OK;
    for (int a = 0; a < L->tensors && st == DT_OK;) {
        if (L->summed[a] != DT_EXACT_UNSUMMED) {
            dt_backend_upload(be, max_bits + a, &L->summed[a], sizeof *max_bits);
            a++;
            continue;
        }
        int b = a;
        while (b < L->tensors && L->summed[b] == DT_EXACT_UNSUMMED) b++;
        for (int i = a; i <= b; i++) first[i - a] = L->first[i] - L->first[a];
        const struct dt_exact_layout run = {.tensors = b - a,
                                            .n = L->n + a,
                                            .first = first,
                                            .slots = L->slots,
                                            .shards = L->shards};
        st = be->ops->exact_sum(be, pack + L->slots * L->first[a], max_bits + a, &run);
        a = b;
    }
    free(first);
    return st;
}

static dt_exact_sum_fn *plan_exact_sum(struct dt_backend *be, struct op_tensors *t, float *pack,
                                       uint32_t *max_bits, const struct dt_exact_layout *L)
{
    check_exact_layout(L);
    DT_ASSERT(pack && max_bits);
    TENSORS(t, OUT(pack, L->slots * L->first[L->tensors]), OUT_INT(max_bits, L->tensors));
    /* only a backend whose ops sum can have summed (the cost model's CUDA recorder, replaying
     * the CPU's call, sums every tensor, as its own shard ops would have left them) */
    if (L->summed && HAS(be, dense_backward_weight_summed))
        for (int i = 0; i < L->tensors; i++)
            if (L->summed[i] != DT_EXACT_UNSUMMED) return exact_sum_rest;
    return be->ops->exact_sum;
}

static dt_dense_forward_fn *plan_dense_forward(struct dt_backend *be, struct op_tensors *t,
                                               float *y, const float *x, const float *w,
                                               const float *bias, int64_t B, int64_t in,
                                               int64_t out, const struct dt_policy *pol)
{
    CHECK_DIMS(B, in, out);
    DT_ASSERT(y && x && w && bias && pol);
    if (library_sharded(be, pol, B)) {
        TENSORS(t, OUT(y, B * out), PARAM(w));
        return dense_forward_per_shard;
    }
    TENSORS(t, OUT(y, B * out), PARAM(w));
    return be->ops->dense_forward;
}

static dt_dense_backward_data_fn *plan_dense_backward_data(struct dt_backend *be,
                                                           struct op_tensors *t, float *dx,
                                                           const float *dy, const float *w,
                                                           int64_t B, int64_t in, int64_t out,
                                                           const struct dt_policy *pol)
{
    CHECK_DIMS(B, in, out);
    DT_ASSERT(dx && dy && w && pol);
    if (library_sharded(be, pol, B)) {
        TENSORS(t, OUT(dx, B * in), PARAM(w));
        return dense_bwd_data_per_shard;
    }
    TENSORS(t, OUT(dx, B * in), PARAM(w));
    return be->ops->dense_backward_data;
}

static dt_dense_backward_weight_fn *plan_dense_backward_weight(struct dt_backend *be,
                                                               struct op_tensors *t, float *dw,
                                                               const float *x, const float *dy,
                                                               int64_t B, int64_t in, int64_t out,
                                                               const struct dt_policy *pol)
{
    CHECK_DIMS(B, in, out);
    DT_ASSERT(dw && x && dy && pol);
    if (sharded(be, pol, B) && wgrad_summed_here(be, pol, dw)) {
        TENSORS(t, OUT(dw, in * out));
        return dense_wgrad_summed;
    }
    if (sharded(be, pol, B)) {
        TENSORS(t, OUT(dw, be->shards.count * in * out));
        return dense_wgrad_shards;
    }
    TENSORS(t, OUT(dw, in * out));
    return be->ops->dense_backward_weight;
}

static dt_bias_backward_fn *plan_bias_backward(struct dt_backend *be, struct op_tensors *t,
                                               float *dbias, const float *dy, int64_t B,
                                               int64_t out, const struct dt_policy *pol)
{
    CHECK_DIMS(B, out);
    DT_ASSERT(dbias && dy && pol);
    if (sharded(be, pol, B)) {
        TENSORS(t, OUT(dbias, be->shards.count * out));
        return bias_shards;
    }
    TENSORS(t, OUT(dbias, out));
    return be->ops->bias_backward;
}

static dt_relu_forward_fn *plan_relu_forward(struct dt_backend *be, struct op_tensors *t, float *y,
                                             const float *x, int64_t n, const struct dt_policy *pol)
{
    CHECK_DIMS(n);
    DT_ASSERT(y && x && pol);
    TENSORS(t, OUT(y, n));
    return be->ops->relu_forward;
}

static dt_relu_backward_fn *plan_relu_backward(struct dt_backend *be, struct op_tensors *t,
                                               float *dx, const float *dy, const float *y,
                                               int64_t n, const struct dt_policy *pol)
{
    CHECK_DIMS(n);
    DT_ASSERT(dx && dy && y && pol);
    TENSORS(t, OUT(dx, n));
    return be->ops->relu_backward;
}

static dt_softmax_xent_forward_fn *
plan_softmax_xent_forward(struct dt_backend *be, struct op_tensors *t, float *probs,
                          float *loss_host, int64_t *correct_host, const float *logits,
                          const int32_t *labels, int64_t B, int64_t C, const struct dt_policy *pol)
{
    CHECK_DIMS(B, C);
    DT_ASSERT(probs && loss_host && logits && labels && pol);
    if (sharded(be, pol, B)) {
        TENSORS(t, OUT(probs, B * C), OUT_HOST(loss_host, be->shards.count));
        return loss_shards;
    }
    TENSORS(t, OUT(probs, B * C), OUT_HOST(loss_host, 1));
    return be->ops->softmax_xent_forward;
}

static dt_softmax_xent_backward_fn *
plan_softmax_xent_backward(struct dt_backend *be, struct op_tensors *t, float *dlogits,
                           const float *probs, const int32_t *labels, int64_t B, int64_t C,
                           int64_t denom, const struct dt_policy *pol)
{
    CHECK_DIMS(B, C);
    DT_ASSERT(dlogits && probs && labels && pol && denom >= B);
    TENSORS(t, OUT(dlogits, B * C));
    return be->ops->softmax_xent_backward;
}

static dt_sgd_update_fn *plan_sgd_update(struct dt_backend *be, struct op_tensors *t, float *w,
                                         float *v, const float *g, int64_t n, float lr,
                                         float momentum, float weight_decay,
                                         const struct dt_policy *pol)
{
    CHECK_DIMS(n);
    DT_ASSERT(w && v && g && pol);
    TENSORS(t, OUT(w, n), OUT(v, n), PARAM(w));
    return be->ops->sgd_update;
}

/* ---- convolution and pooling ---------------------------------------------------------- */

/* out = (in + 2 pad - k) / stride + 1 after checking that it is a positive size. */
static enum dt_status window_count(int64_t *out, const char *what, const char *axis, int64_t in,
                                   int64_t k, int64_t stride, int64_t pad, struct dt_error *err)
{
    if (in < 1 || k < 1 || stride < 1 || pad < 0)
        return dt_error_set(err, DT_ERR_CONFIG,
                            "%s: %s size %lld, kernel %lld, stride %lld, padding %lld: sizes "
                            "must be >= 1 and padding >= 0",
                            what, axis, (long long)in, (long long)k, (long long)stride,
                            (long long)pad);
    if (pad >= k)
        return dt_error_set(err, DT_ERR_CONFIG,
                            "%s: padding %lld must be smaller than the kernel (%lld), or a "
                            "window could lie wholly in the padding",
                            what, (long long)pad, (long long)k);
    if (in + 2 * pad < k)
        return dt_error_set(err, DT_ERR_CONFIG,
                            "%s: kernel %lld does not fit the %s (%lld, padded to %lld)", what,
                            (long long)k, axis, (long long)in, (long long)(in + 2 * pad));
    *out = (in + 2 * pad - k) / stride + 1;
    return DT_OK;
}

enum dt_status dt_conv2d_shape_init(struct dt_conv2d_shape *s, struct dt_error *err)
{
    if (s->B < 1 || s->C < 1 || s->K_out < 1)
        return dt_error_set(err, DT_ERR_CONFIG,
                            "conv2d: batch %lld, in channels %lld, out channels %lld: each "
                            "must be >= 1",
                            (long long)s->B, (long long)s->C, (long long)s->K_out);
    DT_FORWARD_IF_ERROR(
        window_count(&s->OH, "conv2d", "height", s->H, s->KH, s->stride, s->pad, err));
    return window_count(&s->OW, "conv2d", "width", s->W, s->KW, s->stride, s->pad, err);
}

enum dt_status dt_pool2d_shape_init(struct dt_pool2d_shape *s, struct dt_error *err)
{
    if (s->B < 1 || s->C < 1)
        return dt_error_set(err, DT_ERR_CONFIG,
                            "maxpool2d: batch %lld, channels %lld: each must be >= 1",
                            (long long)s->B, (long long)s->C);
    DT_FORWARD_IF_ERROR(
        window_count(&s->OH, "maxpool2d", "height", s->H, s->K, s->stride, s->pad, err));
    return window_count(&s->OW, "maxpool2d", "width", s->W, s->K, s->stride, s->pad, err);
}

/* A shape reaching an op must be one dt_*_shape_init accepted: a caller bug otherwise. */
static void check_conv_shape(const struct dt_conv2d_shape *s)
{
    struct dt_conv2d_shape t = *s;
    DT_ASSERT_MSG(dt_conv2d_shape_init(&t, NULL) == DT_OK && t.OH == s->OH && t.OW == s->OW,
                  "conv2d op called with a shape dt_conv2d_shape_init did not fill");
}

static void check_pool_shape(const struct dt_pool2d_shape *s)
{
    struct dt_pool2d_shape t = *s;
    DT_ASSERT_MSG(dt_pool2d_shape_init(&t, NULL) == DT_OK && t.OH == s->OH && t.OW == s->OW,
                  "maxpool2d op called with a shape dt_pool2d_shape_init did not fill");
}

static dt_conv2d_forward_fn *plan_conv2d_forward(struct dt_backend *be, struct op_tensors *t,
                                                 float *y, const float *x, const float *w,
                                                 const float *bias, const struct dt_conv2d_shape *s,
                                                 const struct dt_policy *pol)
{
    check_conv_shape(s);
    DT_ASSERT(y && x && w && bias && pol);
    if (library_sharded(be, pol, s->B)) {
        TENSORS(t, OUT(y, s->B * s->OH * s->OW * s->K_out), PARAM(w));
        return conv_forward_per_shard;
    }
    TENSORS(t, OUT(y, s->B * s->OH * s->OW * s->K_out), PARAM(w));
    return be->ops->conv2d_forward;
}

static dt_conv2d_backward_data_fn *plan_conv2d_backward_data(struct dt_backend *be,
                                                             struct op_tensors *t, float *dx,
                                                             const float *dy, const float *w,
                                                             const struct dt_conv2d_shape *s,
                                                             const struct dt_policy *pol)
{
    check_conv_shape(s);
    DT_ASSERT(dx && dy && w && pol);
    if (library_sharded(be, pol, s->B)) {
        TENSORS(t, OUT(dx, s->B * s->H * s->W * s->C), PARAM(w));
        return conv_bwd_data_per_shard;
    }
    TENSORS(t, OUT(dx, s->B * s->H * s->W * s->C), PARAM(w));
    return be->ops->conv2d_backward_data;
}

static dt_conv2d_backward_weight_fn *plan_conv2d_backward_weight(struct dt_backend *be,
                                                                 struct op_tensors *t, float *dw,
                                                                 const float *x, const float *dy,
                                                                 const struct dt_conv2d_shape *s,
                                                                 const struct dt_policy *pol)
{
    check_conv_shape(s);
    DT_ASSERT(dw && x && dy && pol);
    if (sharded(be, pol, s->B)) {
        TENSORS(t, OUT(dw, be->shards.count * s->KH * s->KW * s->C * s->K_out));
        return conv_wgrad_shards;
    }
    TENSORS(t, OUT(dw, s->KH * s->KW * s->C * s->K_out));
    return be->ops->conv2d_backward_weight;
}

static dt_maxpool2d_forward_fn *plan_maxpool2d_forward(struct dt_backend *be, struct op_tensors *t,
                                                       float *y, int32_t *argmax, const float *x,
                                                       const struct dt_pool2d_shape *s,
                                                       const struct dt_policy *pol)
{
    check_pool_shape(s);
    DT_ASSERT(y && argmax && x && pol);
    DT_ASSERT_MSG(s->H * s->W <= INT32_MAX, "maxpool2d: image plane too large for int32 argmax");
    TENSORS(t, OUT(y, s->B * s->OH * s->OW * s->C), OUT_INT(argmax, s->B * s->OH * s->OW * s->C));
    return be->ops->maxpool2d_forward;
}

static dt_maxpool2d_backward_fn *
plan_maxpool2d_backward(struct dt_backend *be, struct op_tensors *t, float *dx, const float *dy,
                        const float *x, const float *y, const int32_t *argmax,
                        const struct dt_pool2d_shape *s, const struct dt_policy *pol)
{
    check_pool_shape(s);
    DT_ASSERT(dx && dy && x && y && argmax && pol);
    TENSORS(t, OUT(dx, s->B * s->H * s->W * s->C));
    return be->ops->maxpool2d_backward;
}

static dt_avgpool2d_forward_fn *plan_avgpool2d_forward(struct dt_backend *be, struct op_tensors *t,
                                                       float *y, const float *x,
                                                       const struct dt_pool2d_shape *s,
                                                       const struct dt_policy *pol)
{
    check_pool_shape(s);
    DT_ASSERT(y && x && pol);
    TENSORS(t, OUT(y, s->B * s->OH * s->OW * s->C));
    return be->ops->avgpool2d_forward;
}

static dt_avgpool2d_backward_fn *
plan_avgpool2d_backward(struct dt_backend *be, struct op_tensors *t, float *dx, const float *dy,
                        const struct dt_pool2d_shape *s, const struct dt_policy *pol)
{
    check_pool_shape(s);
    DT_ASSERT(dx && dy && pol);
    TENSORS(t, OUT(dx, s->B * s->H * s->W * s->C));
    return be->ops->avgpool2d_backward;
}

static dt_global_avgpool_forward_fn *
plan_global_avgpool_forward(struct dt_backend *be, struct op_tensors *t, float *y, const float *x,
                            int64_t B, int64_t HW, int64_t C, const struct dt_policy *pol)
{
    CHECK_DIMS(B, HW, C);
    DT_ASSERT_MSG(HW < (1 << 24), "global_avgpool: more pixels than a float counts exactly");
    DT_ASSERT(y && x && pol);
    TENSORS(t, OUT(y, B * C));
    return be->ops->global_avgpool_forward;
}

static dt_global_avgpool_backward_fn *plan_global_avgpool_backward(struct dt_backend *be,
                                                                   struct op_tensors *t, float *dx,
                                                                   const float *dy, int64_t B,
                                                                   int64_t HW, int64_t C,
                                                                   const struct dt_policy *pol)
{
    CHECK_DIMS(B, HW, C);
    DT_ASSERT_MSG(HW < (1 << 24), "global_avgpool: more pixels than a float counts exactly");
    DT_ASSERT(dx && dy && pol);
    TENSORS(t, OUT(dx, B * HW * C));
    return be->ops->global_avgpool_backward;
}

/* ---- batch normalisation (nets/batchnorm_elem.h) --------------------------------------- */

static void check_bn(int64_t rows, float eps)
{
    DT_ASSERT_MSG(rows < (1 << 24), "batchnorm: more rows than a float counts exactly");
    DT_ASSERT_MSG(eps > 0.0f && isfinite(eps), "batchnorm: eps must be positive");
}

static dt_batchnorm_forward_fn *plan_batchnorm_forward(struct dt_backend *be, struct op_tensors *t,
                                                       float *y, float *mean, float *var,
                                                       const float *x, const float *gamma,
                                                       const float *beta, int64_t rows, int64_t C,
                                                       float eps, const struct dt_policy *pol)
{
    CHECK_DIMS(rows, C);
    check_bn(rows, eps);
    DT_ASSERT(y && mean && var && x && gamma && beta && pol);
    TENSORS(t, OUT(y, rows * C), OUT(mean, C), OUT(var, C), PARAM(gamma), PARAM(beta));
    return be->ops->batchnorm_forward;
}

static dt_batchnorm_backward_fn *
plan_batchnorm_backward(struct dt_backend *be, struct op_tensors *t, float *dx, float *gx,
                        const float *dy, const float *x, const float *mean, const float *var,
                        const float *gamma, int64_t rows, int64_t C, float eps,
                        const struct dt_policy *pol)
{
    CHECK_DIMS(rows, C);
    check_bn(rows, eps);
    DT_ASSERT(dx && gx && dy && x && mean && var && gamma && pol);
    TENSORS(t, OUT(dx, rows * C), OUT(gx, rows * C), PARAM(gamma));
    return be->ops->batchnorm_backward;
}

static dt_batchnorm_inference_fn *
plan_batchnorm_inference(struct dt_backend *be, struct op_tensors *t, float *y, const float *x,
                         const float *mean, const float *var, const float *gamma, const float *beta,
                         int64_t rows, int64_t C, float eps, const struct dt_policy *pol)
{
    CHECK_DIMS(rows, C);
    check_bn(1, eps);
    DT_ASSERT(y && x && mean && var && gamma && beta && pol);
    TENSORS(t, OUT(y, rows * C), PARAM(gamma), PARAM(beta));
    return be->ops->batchnorm_inference;
}

static dt_batchnorm_running_fn *plan_batchnorm_running(struct dt_backend *be, struct op_tensors *t,
                                                       float *rmean, float *rvar, const float *mean,
                                                       const float *var, int64_t groups,
                                                       int64_t stride, int64_t C, int64_t batch,
                                                       int64_t per_example, float momentum,
                                                       const struct dt_policy *pol)
{
    CHECK_DIMS(groups, stride, C, batch, per_example);
    DT_ASSERT_MSG(groups <= batch && batch < ((int64_t)1 << 31),
                  "batchnorm_running: more groups than examples, or too large a batch");
    DT_ASSERT_MSG(stride >= C, "batchnorm_running: groups overlap");
    DT_ASSERT_MSG(momentum >= 0.0f && momentum <= 1.0f, "batchnorm_running: momentum in [0, 1]");
    DT_ASSERT(rmean && rvar && mean && var && pol);
    TENSORS(t, OUT(rmean, C), OUT(rvar, C));
    return be->ops->batchnorm_running;
}

/* ---- Bayesian layers and epsilon ------------------------------------------------------ */

static dt_eps_philox_fn *plan_eps_philox(struct dt_backend *be, struct op_tensors *t, float *eps,
                                         int64_t n, const struct dt_philox_stream *s,
                                         const struct dt_policy *pol)
{
    CHECK_DIMS(n);
    DT_ASSERT(eps && s && pol);
    TENSORS(t, OUT(eps, n));
    return be->ops->eps_philox;
}

static dt_eps_lfsr_seed_fn *plan_eps_lfsr_seed(struct dt_backend *be, struct op_tensors *t,
                                               struct dt_xoro *lanes, int64_t P, uint64_t seed,
                                               uint32_t step, uint32_t member, uint32_t sample,
                                               const struct dt_policy *pol)
{
    CHECK_DIMS(P);
    DT_ASSERT(lanes && pol);
    DT_ASSERT_MSG(dt_philox_fields_ok(0, member, sample),
                  "eps_lfsr_seed: member or sample out of range");
    TENSORS(t, OUT_INT(lanes, P * (int64_t)(sizeof *lanes / 4)));
    return be->ops->eps_lfsr_seed;
}

static dt_eps_lfsr_fn *plan_eps_lfsr(struct dt_backend *be, struct op_tensors *t, float *eps,
                                     int64_t n, struct dt_xoro *lanes, int64_t P, bool backward,
                                     int64_t skip_lane, const struct dt_policy *pol)
{
    CHECK_DIMS(n, P);
    DT_ASSERT(eps && lanes && pol && skip_lane < P);
    TENSORS(t, OUT(eps, n), OUT_INT(lanes, P * (int64_t)(sizeof *lanes / 4)));
    return be->ops->eps_lfsr;
}

static dt_bnn_sigma_fn *plan_bnn_sigma(struct dt_backend *be, struct op_tensors *t, float *sigma,
                                       float *dsigma, const float *rho, int64_t n,
                                       const struct dt_policy *pol)
{
    CHECK_DIMS(n);
    DT_ASSERT(sigma && dsigma && rho && pol);
    TENSORS(t, OUT(sigma, n), OUT(dsigma, n), PARAM(rho));
    return be->ops->bnn_sigma;
}

static dt_bnn_sample_fn *plan_bnn_sample(struct dt_backend *be, struct op_tensors *t, float *w,
                                         const float *mu, const float *sigma, const float *eps,
                                         int64_t n, const struct dt_policy *pol)
{
    CHECK_DIMS(n);
    DT_ASSERT(w && mu && sigma && eps && pol);
    TENSORS(t, OUT(w, n), PARAM(mu));
    return be->ops->bnn_sample;
}

static dt_bnn_accumulate_fn *plan_bnn_accumulate(struct dt_backend *be, struct op_tensors *t,
                                                 float *gmu, float *grho, const float *g,
                                                 const float *eps, const float *dsigma, int64_t n,
                                                 bool first, const struct dt_policy *pol)
{
    CHECK_DIMS(n);
    DT_ASSERT(gmu && grho && g && eps && dsigma && pol);
    TENSORS(t, OUT(gmu, n), OUT(grho, n));
    return be->ops->bnn_accumulate;
}

static dt_bnn_finish_fn *plan_bnn_finish(struct dt_backend *be, struct op_tensors *t, float *gmu,
                                         float *grho, const float *mu, const float *sigma,
                                         const float *dsigma, int64_t n, float inv_samples,
                                         float kl_weight, float prior_var,
                                         const struct dt_policy *pol)
{
    CHECK_DIMS(n);
    DT_ASSERT(gmu && grho && mu && sigma && dsigma && pol && prior_var > 0.0f);
    TENSORS(t, OUT(gmu, n), OUT(grho, n), PARAM(mu));
    return be->ops->bnn_finish;
}

static dt_square_fn *plan_square(struct dt_backend *be, struct op_tensors *t, float *y,
                                 const float *x, int64_t n, const struct dt_policy *pol)
{
    CHECK_DIMS(n);
    DT_ASSERT(y && x && pol);
    TENSORS(t, OUT(y, n));
    return be->ops->square;
}

/* The noise's buffers by mode: lanes with lfsr, eps_in with stored (backward only). */
static void check_noise_site(const struct dt_noise_site *s, const struct dt_xoro *lanes,
                             const float *eps_in, bool backward)
{
    DT_ASSERT(s && s->row0 >= 0);
    DT_ASSERT_MSG((s->mode == DT_NOISE_LFSR) == (lanes != NULL),
                  "bnn_local: lanes go with the lfsr mode");
    DT_ASSERT_MSG((s->mode == DT_NOISE_STORED) == (eps_in != NULL) &&
                      (backward || s->mode != DT_NOISE_STORED),
                  "bnn_local: the stored mode reads eps_in, in backward only");
}

static dt_bnn_local_forward_fn *plan_bnn_local_forward(struct dt_backend *be, struct op_tensors *t,
                                                       float *y, float *sd, float *eps_out,
                                                       struct dt_xoro *lanes, const float *gamma,
                                                       const float *delta, int64_t rows,
                                                       int64_t width, const struct dt_noise_site *s,
                                                       const struct dt_policy *pol)
{
    CHECK_DIMS(rows, width);
    DT_ASSERT(y && sd && gamma && delta && pol);
    check_noise_site(s, lanes, NULL, false);
    const int64_t n = rows * width, ln = rows * (int64_t)(sizeof *lanes / 4);
    if (eps_out && lanes) TENSORS(t, OUT(y, n), OUT(sd, n), OUT(eps_out, n), OUT_INT(lanes, ln));
    else if (eps_out) TENSORS(t, OUT(y, n), OUT(sd, n), OUT(eps_out, n));
    else TENSORS(t, OUT(y, n), OUT(sd, n));
    return be->ops->bnn_local_forward;
}

static dt_bnn_local_backward_fn *
plan_bnn_local_backward(struct dt_backend *be, struct op_tensors *t, float *tv, float *eps_out,
                        struct dt_xoro *lanes, const float *eps_in, const float *dy,
                        const float *sd, int64_t rows, int64_t width, const struct dt_noise_site *s,
                        const struct dt_policy *pol)
{
    CHECK_DIMS(rows, width);
    DT_ASSERT(tv && dy && sd && pol);
    check_noise_site(s, lanes, eps_in, true);
    const int64_t n = rows * width, ln = rows * (int64_t)(sizeof *lanes / 4);
    if (eps_out && lanes) TENSORS(t, OUT(tv, n), OUT(eps_out, n), OUT_INT(lanes, ln));
    else if (eps_out) TENSORS(t, OUT(tv, n), OUT(eps_out, n));
    else TENSORS(t, OUT(tv, n));
    return be->ops->bnn_local_backward;
}

static dt_bnn_local_input_grad_fn *
plan_bnn_local_input_grad(struct dt_backend *be, struct op_tensors *t, float *dx, const float *dxm,
                          const float *x, const float *dxv, int64_t n, const struct dt_policy *pol)
{
    CHECK_DIMS(n);
    DT_ASSERT(dx && dxm && x && dxv && pol);
    TENSORS(t, OUT(dx, n));
    return be->ops->bnn_local_input_grad;
}

static dt_bnn_local_scale_fn *plan_bnn_local_scale(struct dt_backend *be, struct op_tensors *t,
                                                   float *grho, const float *sigma,
                                                   const float *dsigma, int64_t n,
                                                   const struct dt_policy *pol)
{
    CHECK_DIMS(n);
    DT_ASSERT(grho && sigma && dsigma && pol);
    TENSORS(t, OUT(grho, n));
    return be->ops->bnn_local_scale;
}

/* ---- the transformer's ops ------------------------------------------------------------- */

static dt_embedding_forward_fn *plan_embedding_forward(struct dt_backend *be, struct op_tensors *t,
                                                       float *h, int32_t *tokens, int32_t *targets,
                                                       const float *x, const float *wte,
                                                       const float *wpe, int64_t B, int64_t T,
                                                       int64_t D, const struct dt_policy *pol)
{
    CHECK_DIMS(B, T, D);
    DT_ASSERT(h && tokens && targets && x && wte && wpe && pol);
    TENSORS(t, OUT(h, B * T * D), OUT_INT(tokens, B * T), OUT_INT(targets, B * T), PARAM(wte),
            PARAM(wpe));
    return be->ops->embedding_forward;
}

/* reduction: exact with shards set: one partial per shard (slot k at dwte + k V D), each the
 * plain op over the shard's rows. */
static enum dt_status embedding_bwd_per_shard(struct dt_backend *be, float *dwte, const float *dh,
                                              const int32_t *tokens, int64_t rows_all, int64_t V,
                                              int64_t D, bool accumulate,
                                              const struct dt_policy *pol)
{
    const int64_t mult = shard_mult(be, rows_all);
    FOR_EACH_SHARD(be, k, r0, rows, mult,
                   be->ops->embedding_backward(be, dwte + k * V * D, dh + r0 * D, tokens + r0, rows,
                                               V, D, accumulate, pol));
}

static dt_embedding_backward_fn *
plan_embedding_backward(struct dt_backend *be, struct op_tensors *t, float *dwte, const float *dh,
                        const int32_t *tokens, int64_t rows, int64_t V, int64_t D, bool accumulate,
                        const struct dt_policy *pol)
{
    CHECK_DIMS(rows, V, D);
    DT_ASSERT(dwte && dh && tokens && pol);
    if (sharded(be, pol, rows)) {
        TENSORS(t, OUT(dwte, be->shards.count * V * D));
        return embedding_bwd_per_shard;
    }
    TENSORS(t, OUT(dwte, V * D));
    return be->ops->embedding_backward;
}

static dt_layernorm_forward_fn *plan_layernorm_forward(struct dt_backend *be, struct op_tensors *t,
                                                       float *y, float *mean, float *rstd,
                                                       const float *x, const float *gamma,
                                                       const float *beta, int64_t rows, int64_t D,
                                                       const struct dt_policy *pol)
{
    CHECK_DIMS(rows, D);
    DT_ASSERT(y && mean && rstd && x && gamma && beta && pol);
    TENSORS(t, OUT(y, rows * D), OUT(mean, rows), OUT(rstd, rows), PARAM(gamma), PARAM(beta));
    return be->ops->layernorm_forward;
}

static dt_layernorm_backward_fn *
plan_layernorm_backward(struct dt_backend *be, struct op_tensors *t, float *dx, float *gx,
                        const float *dy, const float *x, const float *mean, const float *rstd,
                        const float *gamma, int64_t rows, int64_t D, bool accumulate,
                        const struct dt_policy *pol)
{
    CHECK_DIMS(rows, D);
    DT_ASSERT(dx && gx && dy && x && mean && rstd && gamma && pol);
    TENSORS(t, OUT(dx, rows * D), OUT(gx, rows * D), PARAM(gamma));
    return be->ops->layernorm_backward;
}

static void check_heads(int64_t D, int64_t H)
{
    DT_ASSERT_MSG(D % H == 0, "attention: the width is not a multiple of the heads");
}

static dt_attention_forward_fn *plan_attention_forward(struct dt_backend *be, struct op_tensors *t,
                                                       float *out, float *att, const float *qkv,
                                                       int64_t B, int64_t T, int64_t H, int64_t D,
                                                       const struct dt_policy *pol)
{
    CHECK_DIMS(B, T, H, D);
    check_heads(D, H);
    DT_ASSERT(out && att && qkv && pol);
    TENSORS(t, OUT(out, B * T * D), OUT(att, B * H * T * T));
    return be->ops->attention_forward;
}

static dt_attention_backward_fn *
plan_attention_backward(struct dt_backend *be, struct op_tensors *t, float *dqkv, float *ds,
                        const float *dout, const float *att, const float *qkv, int64_t B, int64_t T,
                        int64_t H, int64_t D, const struct dt_policy *pol)
{
    CHECK_DIMS(B, T, H, D);
    check_heads(D, H);
    DT_ASSERT(dqkv && ds && dout && att && qkv && pol);
    TENSORS(t, OUT(dqkv, B * T * 3 * D), OUT(ds, B * H * T * T));
    return be->ops->attention_backward;
}

static dt_gelu_forward_fn *plan_gelu_forward(struct dt_backend *be, struct op_tensors *t, float *y,
                                             const float *x, int64_t n, const struct dt_policy *pol)
{
    CHECK_DIMS(n);
    DT_ASSERT(y && x && pol);
    TENSORS(t, OUT(y, n));
    return be->ops->gelu_forward;
}

static dt_gelu_backward_fn *plan_gelu_backward(struct dt_backend *be, struct op_tensors *t,
                                               float *dx, const float *dy, const float *x,
                                               int64_t n, const struct dt_policy *pol)
{
    CHECK_DIMS(n);
    DT_ASSERT(dx && dy && x && pol);
    TENSORS(t, OUT(dx, n));
    return be->ops->gelu_backward;
}

static dt_add_fn *plan_add(struct dt_backend *be, struct op_tensors *t, float *y, const float *x,
                           int64_t n, const struct dt_policy *pol)
{
    CHECK_DIMS(n);
    DT_ASSERT(y && x && pol);
    TENSORS(t, OUT(y, n));
    return be->ops->add;
}

static dt_adamw_update_fn *plan_adamw_update(struct dt_backend *be, struct op_tensors *t, float *w,
                                             float *m, float *v, const float *g, int64_t n,
                                             const struct dt_adamw_step *s,
                                             const struct dt_policy *pol)
{
    CHECK_DIMS(n);
    DT_ASSERT(w && m && v && g && s && pol);
    TENSORS(t, OUT(w, n), OUT(m, n), OUT(v, n), PARAM(w));
    return be->ops->adamw_update;
}

static dt_grad_norm_fn *plan_grad_norm(struct dt_backend *be, struct op_tensors *t, float *norm_sq,
                                       const float *const *g, const int64_t *n, int count,
                                       const struct dt_policy *pol)
{
    DT_ASSERT(norm_sq && g && n && count >= 1 && pol);
    for (int i = 0; i < count; i++) DT_ASSERT(g[i] && n[i] >= 1);
    TENSORS(t, OUT(norm_sq, 1));
    return be->ops->grad_norm;
}

static dt_clip_scale_fn *plan_clip_scale(struct dt_backend *be, struct op_tensors *t, float *g,
                                         int64_t n, const float *norm_sq, float max_norm,
                                         const struct dt_policy *pol)
{
    CHECK_DIMS(n);
    DT_ASSERT(g && norm_sq && max_norm > 0 && pol);
    TENSORS(t, OUT(g, n));
    return be->ops->clip_scale;
}

static dt_dropout_fn *plan_dropout(struct dt_backend *be, struct op_tensors *t, float *y,
                                   const float *x, uint8_t *keep, struct dt_xoro *lanes,
                                   int64_t rows, int64_t width, const struct dt_dropout_site *s,
                                   const struct dt_policy *pol)
{
    CHECK_DIMS(rows, width);
    DT_ASSERT(y && x && s && pol && s->row0 >= 0);
    const bool walk = s->mode == DT_DROPOUT_LFSR_FORWARD || s->mode == DT_DROPOUT_LFSR_BACKWARD ||
                      s->mode == DT_DROPOUT_KEEP;
    const bool bytes = s->mode == DT_DROPOUT_KEEP || s->mode == DT_DROPOUT_STORED;
    DT_ASSERT_MSG(walk == (lanes != NULL) && bytes == (keep != NULL),
                  "dropout: lanes go with the lfsr and keep modes, bytes with keep and stored");
    if (lanes) {
        TENSORS(t, OUT(y, rows * width), OUT_INT(lanes, rows * (int64_t)(sizeof *lanes / 4)));
        return be->ops->dropout;
    }
    TENSORS(t, OUT(y, rows * width));
    return be->ops->dropout;
}

static dt_dropout_seed_fn *plan_dropout_seed(struct dt_backend *be, struct op_tensors *t,
                                             struct dt_xoro *lanes, int64_t rows, int64_t row0,
                                             uint64_t seed, uint32_t step, uint32_t member,
                                             const struct dt_policy *pol)
{
    CHECK_DIMS(rows);
    DT_ASSERT(lanes && pol && row0 >= 0);
    DT_ASSERT_MSG(dt_philox_fields_ok(0, member, 0), "dropout_seed: member out of range");
    TENSORS(t, OUT_INT(lanes, rows * (int64_t)(sizeof *lanes / 4)));
    return be->ops->dropout_seed;
}

static dt_tensor_digests_fn *plan_tensor_digests(struct dt_backend *be, struct op_tensors *t,
                                                 uint8_t *digests, const float *const *tensors,
                                                 const int64_t *counts, int n,
                                                 const struct dt_policy *pol)
{
    DT_ASSERT(digests && tensors && counts && n >= 1 && pol);
    for (int i = 0; i < n; i++) DT_ASSERT_MSG(counts[i] >= 0, "tensor_digests: a negative count");
    TENSORS(t, OUT_INT(digests, (int64_t)n * 8));
    return be->ops->tensor_digests;
}

enum dt_status dt_backend_xp_wgrad_rows(struct dt_backend *be, int64_t rows)
{
    const int64_t most = DT_XP_K_OP_MAX;
    if (rows <= most) return DT_OK;
    return dt_backend_op_error(be, DT_ERR_UNSUPPORTED,
                               "math: exact sums a weight gradient over at most %lld rows per "
                               "shard, not %lld",
                               (long long)most, (long long)rows);
}

static dt_matmul_exact_fn *plan_matmul_exact(struct dt_backend *be, struct op_tensors *t, float *C,
                                             const float *A, const float *B, const float *bias,
                                             int64_t M, int64_t K, int64_t N, int trans, int levels,
                                             const struct dt_policy *pol)
{
    CHECK_DIMS(M, K, N);
    DT_ASSERT(C && A && B && pol);
    DT_ASSERT_MSG(levels >= 1 && levels <= DT_XP_LEVELS_MAX, "matmul_exact: levels 1 or 2");
    DT_ASSERT_MSG((trans & ~(DT_XP_TA | DT_XP_TB)) == 0, "matmul_exact: unknown trans bits");
    DT_ASSERT_MSG(K <= DT_XP_K_OP_MAX, "matmul_exact: K beyond its integers' bound");
    TENSORS(t, OUT(C, M * N));
    return be->ops->matmul_exact;
}

/* ---- the wrappers: dt_<name> for every row of nets/op_list.h --------------------------- */
#define DT_OP_PLAN_ARGS(...) (be, be->instrumented ? &t_ : NULL, __VA_ARGS__)
#define DT_COST_ARGS(...) (&c_, &cx_, __VA_ARGS__)
#define DT_OP_WRAPPER_(ENUM, name, phase, outputs, controls, params, args)                         \
    enum dt_status dt_##name DT_OP_PARAMS params                                                   \
    {                                                                                              \
        REQUIRE(be, name);                                                                         \
        struct op_tensors t_;                                                                      \
        dt_##name##_fn *fn_ = plan_##name DT_OP_PLAN_ARGS args;                                    \
        if (!be->instrumented) return fn_ DT_OP_ARGS args; /* the hot path: one test */            \
        if (be->cost) {                                                                            \
            struct dt_op_cost c_ = {0};                                                            \
            const struct dt_cost_ctx cx_ = cost_ctx(be);                                           \
            be->cost->model->name DT_COST_ARGS args;                                               \
            cost_record(be, DT_OP_##ENUM, &c_);                                                    \
        }                                                                                          \
        INSTRUMENTED(be, DT_OP_##ENUM, &t_, fn_ DT_OP_ARGS args);                                  \
    }
DT_OP_LIST(DT_OP_WRAPPER_)
#undef DT_OP_WRAPPER_
#undef DT_COST_ARGS
