/* Backend registry and the public op wrappers: every argument check happens here once,
 * then the call goes to the backend's ops table (nets/backend_impl.h). */
#include "nets/backend_impl.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core/util.h"

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

static const struct dt_backend_ops *backend_ops_for(enum dt_backend_kind kind)
{
    switch (kind) {
    case DT_BACKEND_CPU: return &dt_backend_cpu_ops;
    case DT_BACKEND_CUDA: return &dt_backend_cuda_ops;
    }
    return NULL;
}

enum dt_status dt_backend_create(struct dt_backend **out, const struct dt_backend_options *opt,
                                 struct dt_error *err)
{
    *out = NULL;
    const struct dt_backend_ops *ops = backend_ops_for(opt->kind);
    if (!ops) return dt_error_set(err, DT_ERR_USAGE, "unknown backend kind %d", (int)opt->kind);
    DT_ASSERT_MSG((ops->host_alloc == NULL) == (ops->host_free == NULL),
                  "a backend's host_alloc and host_free come as a pair");
    struct dt_backend *be = dt_xcalloc(1, sizeof *be);
    be->ops = ops;
    be->threads = 1;
    enum dt_status st = ops->init(be, opt, err);
    if (st != DT_OK) {
        free(be);
        return st;
    }
    *out = be;
    return DT_OK;
}

void dt_backend_destroy(struct dt_backend *be)
{
    if (!be) return;
    if (be->copy_out && HAS(be, copy_out_release)) be->ops->copy_out_release(be);
    be->ops->destroy(be);
    free(be);
}

const char *dt_backend_name(const struct dt_backend *be) { return be->ops->name; }
/* The first op of `need` (present: whether the backend has it) the backend lacks, or NULL. */
struct op_need {
    bool present;
    enum dt_op op;
};
static const char *first_missing(const struct op_need *need, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!need[i].present) return dt_op_name(need[i].op);
    return NULL;
}

const char *dt_backend_missing_op(const struct dt_backend *be)
{
    const struct dt_backend_ops *o = be->ops;
    const struct op_need need[] = {
        {o->dense_forward != NULL, DT_OP_DENSE_FORWARD},
        {o->dense_backward_data != NULL, DT_OP_DENSE_BACKWARD_DATA},
        {o->dense_backward_weight != NULL, DT_OP_DENSE_BACKWARD_WEIGHT},
        {o->bias_backward != NULL, DT_OP_BIAS_BACKWARD},
        {o->relu_forward != NULL, DT_OP_RELU_FORWARD},
        {o->relu_backward != NULL, DT_OP_RELU_BACKWARD},
        {o->softmax_xent_forward != NULL, DT_OP_SOFTMAX_XENT_FORWARD},
        {o->softmax_xent_backward != NULL, DT_OP_SOFTMAX_XENT_BACKWARD},
        {o->sgd_update != NULL, DT_OP_SGD_UPDATE},
    };
    return first_missing(need, sizeof need / sizeof need[0]);
}

const char *dt_backend_missing_transformer_op(const struct dt_backend *be)
{
    const struct dt_backend_ops *o = be->ops;
    const struct op_need need[] = {
        {o->embedding_forward != NULL, DT_OP_EMBEDDING_FORWARD},
        {o->embedding_backward != NULL, DT_OP_EMBEDDING_BACKWARD},
        {o->layernorm_forward != NULL, DT_OP_LAYERNORM_FORWARD},
        {o->layernorm_backward != NULL, DT_OP_LAYERNORM_BACKWARD},
        {o->attention_forward != NULL, DT_OP_ATTENTION_FORWARD},
        {o->attention_backward != NULL, DT_OP_ATTENTION_BACKWARD},
        {o->gelu_forward != NULL, DT_OP_GELU_FORWARD},
        {o->gelu_backward != NULL, DT_OP_GELU_BACKWARD},
        {o->add != NULL, DT_OP_ADD},
        {o->adamw_update != NULL, DT_OP_ADAMW_UPDATE},
        {o->grad_norm != NULL, DT_OP_GRAD_NORM},
        {o->clip_scale != NULL, DT_OP_CLIP_SCALE},
        {o->dropout != NULL, DT_OP_DROPOUT},
        {o->dropout_seed != NULL, DT_OP_DROPOUT_SEED},
    };
    return first_missing(need, sizeof need / sizeof need[0]);
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
        copy = dt_xmalloc((size_t)n * sizeof(float));
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

/* ---- deferred checks ------------------------------------------------------------------ */

void dt_backend_defer_checks(struct dt_backend *be, bool on)
{
    if (HAS(be, defer_checks)) be->ops->defer_checks(be, on);
}

void dt_backend_set_context(struct dt_backend *be, const char *tensor, bool input)
{
    snprintf(be->context, sizeof be->context, "%s %sgradient", tensor, input ? "input " : "");
}

enum dt_status dt_backend_step_end(struct dt_backend *be, struct dt_error *err)
{
    if (HAS(be, step_end)) return be->ops->step_end(be, err);
    dt_backend_synchronize(be);
    return DT_OK;
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

const char *dt_op_name(enum dt_op op)
{
    static const char *const names[] = {
#define DT_OP_STR_(name, str, phase, outputs) str,
        DT_OP_LIST(DT_OP_STR_)
#undef DT_OP_STR_
    };
    DT_ASSERT(op >= 0 && op < DT_OP_COUNT);
    return names[op];
}

const char *dt_op_phase(enum dt_op op)
{
    static const enum dt_op_phase phases[] = {
#define DT_OP_PHASE_(name, str, phase, outputs) phase,
        DT_OP_LIST(DT_OP_PHASE_)
#undef DT_OP_PHASE_
    };
    DT_ASSERT(op >= 0 && op < DT_OP_COUNT);
    return phases[op] == DT_PHASE_BACKWARD ? "backward"
           : phases[op] == DT_PHASE_UPDATE ? "update"
                                           : "forward";
}

void dt_op_output_name(char *buf, size_t size, enum dt_op op, int k)
{
    static const char *const outputs[] = {
#define DT_OP_OUTPUTS_(name, str, phase, outputs) outputs,
        DT_OP_LIST(DT_OP_OUTPUTS_)
#undef DT_OP_OUTPUTS_
    };
    DT_ASSERT(op >= 0 && op < DT_OP_COUNT);
    const char *s = outputs[op];
    for (int i = 0; i < k && strchr(s, '|'); i++) s = strchr(s, '|') + 1;
    snprintf(buf, size, "%.*s", (int)strcspn(s, "|"), s);
}

/* observer, profiling or the slow-op hook on: the op's dispatch takes its instrumented
 * path; with none of them it calls the op and nothing else. */
static void instrument(struct dt_backend *be)
{
    be->instrumented = be->observer != NULL || be->profiling || be->slow_op != 0;
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

/* Dispatch `call` (an expression yielding enum dt_status), timing it when profiling: by
 * the backend's device timers around it, or else by the wall clock with the backend
 * synchronised before and after, so the time is the op's own, kernels included, and not
 * the tail of earlier ops. The arguments after `call` are the op's tensors (OUT, PARAM...)
 * for the observer, which gets them before and after the call. */
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

#define DISPATCH(be, op, call, ...)                                                                \
    do {                                                                                           \
        if (!(be)->instrumented) return (call); /* the hot path: one test */                       \
        if ((be)->observer) {                                                                      \
            const struct dt_op_tensor t_[] = {__VA_ARGS__};                                        \
            const int n_ = (int)(sizeof t_ / sizeof t_[0]);                                        \
            (be)->observer((be)->observer_ctx, (be), (op), false, t_, n_);                         \
            enum dt_status st_ = SLOWED(be, op, call);                                             \
            if (st_ == DT_OK) (be)->observer((be)->observer_ctx, (be), (op), true, t_, n_);        \
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
    if (HAS(be, dense_backward_weight_shards) && shard_mult(be, B) == 1) {
        enum dt_status st = be->ops->dense_backward_weight_shards(be, dw, x, dy, B, in, out, pol);
        if (st != DT_ERR_UNSUPPORTED) return st;
    }
    return dense_wgrad_per_shard(be, dw, x, dy, B, in, out, pol);
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

enum dt_status dt_exact_sum(struct dt_backend *be, float *pack, const uint32_t *max_bits,
                            const struct dt_exact_layout *L)
{
    check_exact_layout(L);
    DT_ASSERT(pack && max_bits);
    REQUIRE(be, exact_sum);
    DISPATCH(be, DT_OP_EXACT_SUM, be->ops->exact_sum(be, pack, max_bits, L),
             OUT(pack, L->slots * L->first[L->tensors]));
}

enum dt_status dt_dense_forward(struct dt_backend *be, float *y, const float *x, const float *w,
                                const float *bias, int64_t B, int64_t in, int64_t out,
                                const struct dt_policy *pol)
{
    CHECK_DIMS(B, in, out);
    DT_ASSERT(y && x && w && bias && pol);
    REQUIRE(be, dense_forward);
    if (library_sharded(be, pol, B))
        DISPATCH(be, DT_OP_DENSE_FORWARD,
                 dense_forward_per_shard(be, y, x, w, bias, B, in, out, pol), OUT(y, B * out),
                 PARAM(w));
    DISPATCH(be, DT_OP_DENSE_FORWARD, be->ops->dense_forward(be, y, x, w, bias, B, in, out, pol),
             OUT(y, B * out), PARAM(w));
}

enum dt_status dt_dense_backward_data(struct dt_backend *be, float *dx, const float *dy,
                                      const float *w, int64_t B, int64_t in, int64_t out,
                                      const struct dt_policy *pol)
{
    CHECK_DIMS(B, in, out);
    DT_ASSERT(dx && dy && w && pol);
    REQUIRE(be, dense_backward_data);
    if (library_sharded(be, pol, B))
        DISPATCH(be, DT_OP_DENSE_BACKWARD_DATA,
                 dense_bwd_data_per_shard(be, dx, dy, w, B, in, out, pol), OUT(dx, B * in),
                 PARAM(w));
    DISPATCH(be, DT_OP_DENSE_BACKWARD_DATA,
             be->ops->dense_backward_data(be, dx, dy, w, B, in, out, pol), OUT(dx, B * in),
             PARAM(w));
}

enum dt_status dt_dense_backward_weight(struct dt_backend *be, float *dw, const float *x,
                                        const float *dy, int64_t B, int64_t in, int64_t out,
                                        const struct dt_policy *pol)
{
    CHECK_DIMS(B, in, out);
    DT_ASSERT(dw && x && dy && pol);
    REQUIRE(be, dense_backward_weight);
    if (sharded(be, pol, B))
        DISPATCH(be, DT_OP_DENSE_BACKWARD_WEIGHT,
                 dense_wgrad_shards(be, dw, x, dy, B, in, out, pol),
                 OUT(dw, be->shards.count * in * out));
    DISPATCH(be, DT_OP_DENSE_BACKWARD_WEIGHT,
             be->ops->dense_backward_weight(be, dw, x, dy, B, in, out, pol), OUT(dw, in * out));
}

enum dt_status dt_bias_backward(struct dt_backend *be, float *dbias, const float *dy, int64_t B,
                                int64_t out, const struct dt_policy *pol)
{
    CHECK_DIMS(B, out);
    DT_ASSERT(dbias && dy && pol);
    REQUIRE(be, bias_backward);
    if (sharded(be, pol, B))
        DISPATCH(be, DT_OP_BIAS_BACKWARD, bias_shards(be, dbias, dy, B, out, pol),
                 OUT(dbias, be->shards.count * out));
    DISPATCH(be, DT_OP_BIAS_BACKWARD, be->ops->bias_backward(be, dbias, dy, B, out, pol),
             OUT(dbias, out));
}

enum dt_status dt_relu_forward(struct dt_backend *be, float *y, const float *x, int64_t n,
                               const struct dt_policy *pol)
{
    CHECK_DIMS(n);
    DT_ASSERT(y && x && pol);
    REQUIRE(be, relu_forward);
    DISPATCH(be, DT_OP_RELU_FORWARD, be->ops->relu_forward(be, y, x, n, pol), OUT(y, n));
}

enum dt_status dt_relu_backward(struct dt_backend *be, float *dx, const float *dy, const float *y,
                                int64_t n, const struct dt_policy *pol)
{
    CHECK_DIMS(n);
    DT_ASSERT(dx && dy && y && pol);
    REQUIRE(be, relu_backward);
    DISPATCH(be, DT_OP_RELU_BACKWARD, be->ops->relu_backward(be, dx, dy, y, n, pol), OUT(dx, n));
}

enum dt_status dt_softmax_xent_forward(struct dt_backend *be, float *probs, float *loss_host,
                                       int64_t *correct_host, const float *logits,
                                       const int32_t *labels, int64_t B, int64_t C,
                                       const struct dt_policy *pol)
{
    CHECK_DIMS(B, C);
    DT_ASSERT(probs && loss_host && logits && labels && pol);
    REQUIRE(be, softmax_xent_forward);
    if (sharded(be, pol, B))
        DISPATCH(be, DT_OP_SOFTMAX_XENT_FORWARD,
                 loss_per_shard(be, probs, loss_host, correct_host, logits, labels, B, C, pol),
                 OUT(probs, B * C), OUT_HOST(loss_host, be->shards.count));
    DISPATCH(be, DT_OP_SOFTMAX_XENT_FORWARD,
             be->ops->softmax_xent_forward(be, probs, loss_host, correct_host, logits, labels, B, C,
                                           pol),
             OUT(probs, B * C), OUT_HOST(loss_host, 1));
}

enum dt_status dt_softmax_xent_backward(struct dt_backend *be, float *dlogits, const float *probs,
                                        const int32_t *labels, int64_t B, int64_t C, int64_t denom,
                                        const struct dt_policy *pol)
{
    CHECK_DIMS(B, C);
    DT_ASSERT(dlogits && probs && labels && pol && denom >= B);
    REQUIRE(be, softmax_xent_backward);
    DISPATCH(be, DT_OP_SOFTMAX_XENT_BACKWARD,
             be->ops->softmax_xent_backward(be, dlogits, probs, labels, B, C, denom, pol),
             OUT(dlogits, B * C));
}

enum dt_status dt_sgd_update(struct dt_backend *be, float *w, float *v, const float *g, int64_t n,
                             float lr, float momentum, float weight_decay,
                             const struct dt_policy *pol)
{
    CHECK_DIMS(n);
    DT_ASSERT(w && v && g && pol);
    REQUIRE(be, sgd_update);
    DISPATCH(be, DT_OP_SGD_UPDATE,
             be->ops->sgd_update(be, w, v, g, n, lr, momentum, weight_decay, pol), OUT(w, n),
             OUT(v, n), PARAM(w));
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

enum dt_status dt_conv2d_forward(struct dt_backend *be, float *y, const float *x, const float *w,
                                 const float *bias, const struct dt_conv2d_shape *s,
                                 const struct dt_policy *pol)
{
    check_conv_shape(s);
    DT_ASSERT(y && x && w && bias && pol);
    REQUIRE(be, conv2d_forward);
    if (library_sharded(be, pol, s->B))
        DISPATCH(be, DT_OP_CONV2D_FORWARD, conv_forward_per_shard(be, y, x, w, bias, s, pol),
                 OUT(y, s->B * s->OH * s->OW * s->K_out), PARAM(w));
    DISPATCH(be, DT_OP_CONV2D_FORWARD, be->ops->conv2d_forward(be, y, x, w, bias, s, pol),
             OUT(y, s->B * s->OH * s->OW * s->K_out), PARAM(w));
}

enum dt_status dt_conv2d_backward_data(struct dt_backend *be, float *dx, const float *dy,
                                       const float *w, const struct dt_conv2d_shape *s,
                                       const struct dt_policy *pol)
{
    check_conv_shape(s);
    DT_ASSERT(dx && dy && w && pol);
    REQUIRE(be, conv2d_backward_data);
    if (library_sharded(be, pol, s->B))
        DISPATCH(be, DT_OP_CONV2D_BACKWARD_DATA, conv_bwd_data_per_shard(be, dx, dy, w, s, pol),
                 OUT(dx, s->B * s->H * s->W * s->C), PARAM(w));
    DISPATCH(be, DT_OP_CONV2D_BACKWARD_DATA, be->ops->conv2d_backward_data(be, dx, dy, w, s, pol),
             OUT(dx, s->B * s->H * s->W * s->C), PARAM(w));
}

enum dt_status dt_conv2d_backward_weight(struct dt_backend *be, float *dw, const float *x,
                                         const float *dy, const struct dt_conv2d_shape *s,
                                         const struct dt_policy *pol)
{
    check_conv_shape(s);
    DT_ASSERT(dw && x && dy && pol);
    REQUIRE(be, conv2d_backward_weight);
    if (sharded(be, pol, s->B))
        DISPATCH(be, DT_OP_CONV2D_BACKWARD_WEIGHT, conv_wgrad_per_shard(be, dw, x, dy, s, pol),
                 OUT(dw, be->shards.count * s->KH * s->KW * s->C * s->K_out));
    DISPATCH(be, DT_OP_CONV2D_BACKWARD_WEIGHT,
             be->ops->conv2d_backward_weight(be, dw, x, dy, s, pol),
             OUT(dw, s->KH * s->KW * s->C * s->K_out));
}

enum dt_status dt_maxpool2d_forward(struct dt_backend *be, float *y, int32_t *argmax,
                                    const float *x, const struct dt_pool2d_shape *s,
                                    const struct dt_policy *pol)
{
    check_pool_shape(s);
    DT_ASSERT(y && argmax && x && pol);
    DT_ASSERT_MSG(s->H * s->W <= INT32_MAX, "maxpool2d: image plane too large for int32 argmax");
    REQUIRE(be, maxpool2d_forward);
    DISPATCH(be, DT_OP_MAXPOOL2D_FORWARD, be->ops->maxpool2d_forward(be, y, argmax, x, s, pol),
             OUT(y, s->B * s->OH * s->OW * s->C), OUT_INT(argmax, s->B * s->OH * s->OW * s->C));
}

enum dt_status dt_maxpool2d_backward(struct dt_backend *be, float *dx, const float *dy,
                                     const float *x, const float *y, const int32_t *argmax,
                                     const struct dt_pool2d_shape *s, const struct dt_policy *pol)
{
    check_pool_shape(s);
    DT_ASSERT(dx && dy && x && y && argmax && pol);
    REQUIRE(be, maxpool2d_backward);
    DISPATCH(be, DT_OP_MAXPOOL2D_BACKWARD,
             be->ops->maxpool2d_backward(be, dx, dy, x, y, argmax, s, pol),
             OUT(dx, s->B * s->H * s->W * s->C));
}

/* ---- Bayesian layers and epsilon ------------------------------------------------------ */

enum dt_status dt_eps_philox(struct dt_backend *be, float *eps, int64_t n,
                             const struct dt_philox_stream *s, const struct dt_policy *pol)
{
    CHECK_DIMS(n);
    DT_ASSERT(eps && s && pol);
    REQUIRE(be, eps_philox);
    DISPATCH(be, DT_OP_EPS_PHILOX, be->ops->eps_philox(be, eps, n, s, pol), OUT(eps, n));
}

enum dt_status dt_eps_lfsr_seed(struct dt_backend *be, struct dt_xoro *lanes, int64_t P,
                                uint64_t seed, uint32_t step, uint32_t member, uint32_t sample,
                                const struct dt_policy *pol)
{
    CHECK_DIMS(P);
    DT_ASSERT(lanes && pol);
    DT_ASSERT_MSG(dt_philox_fields_ok(0, member, sample),
                  "eps_lfsr_seed: member or sample out of range");
    REQUIRE(be, eps_lfsr_seed);
    DISPATCH(be, DT_OP_EPS_LFSR_SEED,
             be->ops->eps_lfsr_seed(be, lanes, P, seed, step, member, sample, pol),
             OUT_INT(lanes, P * (int64_t)(sizeof *lanes / 4)));
}

enum dt_status dt_eps_lfsr(struct dt_backend *be, float *eps, int64_t n, struct dt_xoro *lanes,
                           int64_t P, bool backward, int64_t skip_lane, const struct dt_policy *pol)
{
    CHECK_DIMS(n, P);
    DT_ASSERT(eps && lanes && pol && skip_lane < P);
    REQUIRE(be, eps_lfsr);
    DISPATCH(be, DT_OP_EPS_LFSR, be->ops->eps_lfsr(be, eps, n, lanes, P, backward, skip_lane, pol),
             OUT(eps, n), OUT_INT(lanes, P * (int64_t)(sizeof *lanes / 4)));
}

enum dt_status dt_bnn_sigma(struct dt_backend *be, float *sigma, float *dsigma, const float *rho,
                            int64_t n, const struct dt_policy *pol)
{
    CHECK_DIMS(n);
    DT_ASSERT(sigma && dsigma && rho && pol);
    REQUIRE(be, bnn_sigma);
    DISPATCH(be, DT_OP_BNN_SIGMA, be->ops->bnn_sigma(be, sigma, dsigma, rho, n, pol), OUT(sigma, n),
             OUT(dsigma, n), PARAM(rho));
}

enum dt_status dt_bnn_sample(struct dt_backend *be, float *w, const float *mu, const float *sigma,
                             const float *eps, int64_t n, const struct dt_policy *pol)
{
    CHECK_DIMS(n);
    DT_ASSERT(w && mu && sigma && eps && pol);
    REQUIRE(be, bnn_sample);
    DISPATCH(be, DT_OP_BNN_SAMPLE, be->ops->bnn_sample(be, w, mu, sigma, eps, n, pol), OUT(w, n),
             PARAM(mu));
}

enum dt_status dt_bnn_accumulate(struct dt_backend *be, float *gmu, float *grho, const float *g,
                                 const float *eps, const float *dsigma, int64_t n, bool first,
                                 const struct dt_policy *pol)
{
    CHECK_DIMS(n);
    DT_ASSERT(gmu && grho && g && eps && dsigma && pol);
    REQUIRE(be, bnn_accumulate);
    DISPATCH(be, DT_OP_BNN_ACCUMULATE,
             be->ops->bnn_accumulate(be, gmu, grho, g, eps, dsigma, n, first, pol), OUT(gmu, n),
             OUT(grho, n));
}

enum dt_status dt_bnn_finish(struct dt_backend *be, float *gmu, float *grho, const float *mu,
                             const float *sigma, const float *dsigma, int64_t n, float inv_samples,
                             float kl_weight, float prior_var, const struct dt_policy *pol)
{
    CHECK_DIMS(n);
    DT_ASSERT(gmu && grho && mu && sigma && dsigma && pol && prior_var > 0.0f);
    REQUIRE(be, bnn_finish);
    DISPATCH(be, DT_OP_BNN_FINISH,
             be->ops->bnn_finish(be, gmu, grho, mu, sigma, dsigma, n, inv_samples, kl_weight,
                                 prior_var, pol),
             OUT(gmu, n), OUT(grho, n), PARAM(mu));
}

/* ---- the transformer's ops ------------------------------------------------------------- */

enum dt_status dt_embedding_forward(struct dt_backend *be, float *h, int32_t *tokens,
                                    int32_t *targets, const float *x, const float *wte,
                                    const float *wpe, int64_t B, int64_t T, int64_t D,
                                    const struct dt_policy *pol)
{
    CHECK_DIMS(B, T, D);
    DT_ASSERT(h && tokens && targets && x && wte && wpe && pol);
    REQUIRE(be, embedding_forward);
    DISPATCH(be, DT_OP_EMBEDDING_FORWARD,
             be->ops->embedding_forward(be, h, tokens, targets, x, wte, wpe, B, T, D, pol),
             OUT(h, B * T * D), OUT_INT(tokens, B * T), OUT_INT(targets, B * T), PARAM(wte),
             PARAM(wpe));
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

enum dt_status dt_embedding_backward(struct dt_backend *be, float *dwte, const float *dh,
                                     const int32_t *tokens, int64_t rows, int64_t V, int64_t D,
                                     bool accumulate, const struct dt_policy *pol)
{
    CHECK_DIMS(rows, V, D);
    DT_ASSERT(dwte && dh && tokens && pol);
    REQUIRE(be, embedding_backward);
    if (sharded(be, pol, rows))
        DISPATCH(be, DT_OP_EMBEDDING_BACKWARD,
                 embedding_bwd_per_shard(be, dwte, dh, tokens, rows, V, D, accumulate, pol),
                 OUT(dwte, be->shards.count * V * D));
    DISPATCH(be, DT_OP_EMBEDDING_BACKWARD,
             be->ops->embedding_backward(be, dwte, dh, tokens, rows, V, D, accumulate, pol),
             OUT(dwte, V * D));
}

enum dt_status dt_layernorm_forward(struct dt_backend *be, float *y, float *mean, float *rstd,
                                    const float *x, const float *gamma, const float *beta,
                                    int64_t rows, int64_t D, const struct dt_policy *pol)
{
    CHECK_DIMS(rows, D);
    DT_ASSERT(y && mean && rstd && x && gamma && beta && pol);
    REQUIRE(be, layernorm_forward);
    DISPATCH(be, DT_OP_LAYERNORM_FORWARD,
             be->ops->layernorm_forward(be, y, mean, rstd, x, gamma, beta, rows, D, pol),
             OUT(y, rows * D), OUT(mean, rows), OUT(rstd, rows), PARAM(gamma), PARAM(beta));
}

enum dt_status dt_layernorm_backward(struct dt_backend *be, float *dx, float *gx, const float *dy,
                                     const float *x, const float *mean, const float *rstd,
                                     const float *gamma, int64_t rows, int64_t D, bool accumulate,
                                     const struct dt_policy *pol)
{
    CHECK_DIMS(rows, D);
    DT_ASSERT(dx && gx && dy && x && mean && rstd && gamma && pol);
    REQUIRE(be, layernorm_backward);
    DISPATCH(
        be, DT_OP_LAYERNORM_BACKWARD,
        be->ops->layernorm_backward(be, dx, gx, dy, x, mean, rstd, gamma, rows, D, accumulate, pol),
        OUT(dx, rows * D), OUT(gx, rows * D), PARAM(gamma));
}

static void check_heads(int64_t D, int64_t H)
{
    DT_ASSERT_MSG(D % H == 0, "attention: the width is not a multiple of the heads");
}

enum dt_status dt_attention_forward(struct dt_backend *be, float *out, float *att, const float *qkv,
                                    int64_t B, int64_t T, int64_t H, int64_t D,
                                    const struct dt_policy *pol)
{
    CHECK_DIMS(B, T, H, D);
    check_heads(D, H);
    DT_ASSERT(out && att && qkv && pol);
    REQUIRE(be, attention_forward);
    DISPATCH(be, DT_OP_ATTENTION_FORWARD,
             be->ops->attention_forward(be, out, att, qkv, B, T, H, D, pol), OUT(out, B * T * D),
             OUT(att, B * H * T * T));
}

enum dt_status dt_attention_backward(struct dt_backend *be, float *dqkv, float *ds,
                                     const float *dout, const float *att, const float *qkv,
                                     int64_t B, int64_t T, int64_t H, int64_t D,
                                     const struct dt_policy *pol)
{
    CHECK_DIMS(B, T, H, D);
    check_heads(D, H);
    DT_ASSERT(dqkv && ds && dout && att && qkv && pol);
    REQUIRE(be, attention_backward);
    DISPATCH(be, DT_OP_ATTENTION_BACKWARD,
             be->ops->attention_backward(be, dqkv, ds, dout, att, qkv, B, T, H, D, pol),
             OUT(dqkv, B * T * 3 * D), OUT(ds, B * H * T * T));
}

enum dt_status dt_gelu_forward(struct dt_backend *be, float *y, const float *x, int64_t n,
                               const struct dt_policy *pol)
{
    CHECK_DIMS(n);
    DT_ASSERT(y && x && pol);
    REQUIRE(be, gelu_forward);
    DISPATCH(be, DT_OP_GELU_FORWARD, be->ops->gelu_forward(be, y, x, n, pol), OUT(y, n));
}

enum dt_status dt_gelu_backward(struct dt_backend *be, float *dx, const float *dy, const float *x,
                                int64_t n, const struct dt_policy *pol)
{
    CHECK_DIMS(n);
    DT_ASSERT(dx && dy && x && pol);
    REQUIRE(be, gelu_backward);
    DISPATCH(be, DT_OP_GELU_BACKWARD, be->ops->gelu_backward(be, dx, dy, x, n, pol), OUT(dx, n));
}

enum dt_status dt_add(struct dt_backend *be, float *y, const float *x, int64_t n,
                      const struct dt_policy *pol)
{
    CHECK_DIMS(n);
    DT_ASSERT(y && x && pol);
    REQUIRE(be, add);
    DISPATCH(be, DT_OP_ADD, be->ops->add(be, y, x, n, pol), OUT(y, n));
}

enum dt_status dt_adamw_update(struct dt_backend *be, float *w, float *m, float *v, const float *g,
                               int64_t n, const struct dt_adamw_step *s,
                               const struct dt_policy *pol)
{
    CHECK_DIMS(n);
    DT_ASSERT(w && m && v && g && s && pol);
    REQUIRE(be, adamw_update);
    DISPATCH(be, DT_OP_ADAMW_UPDATE, be->ops->adamw_update(be, w, m, v, g, n, s, pol), OUT(w, n),
             OUT(m, n), OUT(v, n), PARAM(w));
}

enum dt_status dt_grad_norm(struct dt_backend *be, float *norm_sq, const float *const *g,
                            const int64_t *n, int count, const struct dt_policy *pol)
{
    DT_ASSERT(norm_sq && g && n && count >= 1 && pol);
    for (int i = 0; i < count; i++) DT_ASSERT(g[i] && n[i] >= 1);
    REQUIRE(be, grad_norm);
    DISPATCH(be, DT_OP_GRAD_NORM, be->ops->grad_norm(be, norm_sq, g, n, count, pol),
             OUT(norm_sq, 1));
}

enum dt_status dt_clip_scale(struct dt_backend *be, float *g, int64_t n, const float *norm_sq,
                             float max_norm, const struct dt_policy *pol)
{
    CHECK_DIMS(n);
    DT_ASSERT(g && norm_sq && max_norm > 0 && pol);
    REQUIRE(be, clip_scale);
    DISPATCH(be, DT_OP_CLIP_SCALE, be->ops->clip_scale(be, g, n, norm_sq, max_norm, pol),
             OUT(g, n));
}

enum dt_status dt_dropout(struct dt_backend *be, float *y, const float *x, uint8_t *keep,
                          struct dt_xoro *lanes, int64_t rows, int64_t width,
                          const struct dt_dropout_site *s, const struct dt_policy *pol)
{
    CHECK_DIMS(rows, width);
    DT_ASSERT(y && x && s && pol && s->row0 >= 0);
    const bool walk = s->mode == DT_DROPOUT_LFSR_FORWARD || s->mode == DT_DROPOUT_LFSR_BACKWARD ||
                      s->mode == DT_DROPOUT_KEEP;
    const bool bytes = s->mode == DT_DROPOUT_KEEP || s->mode == DT_DROPOUT_STORED;
    DT_ASSERT_MSG(walk == (lanes != NULL) && bytes == (keep != NULL),
                  "dropout: lanes go with the lfsr and keep modes, bytes with keep and stored");
    REQUIRE(be, dropout);
    if (lanes)
        DISPATCH(be, DT_OP_DROPOUT, be->ops->dropout(be, y, x, keep, lanes, rows, width, s, pol),
                 OUT(y, rows * width), OUT_INT(lanes, rows * (int64_t)(sizeof *lanes / 4)));
    DISPATCH(be, DT_OP_DROPOUT, be->ops->dropout(be, y, x, keep, lanes, rows, width, s, pol),
             OUT(y, rows * width));
}

enum dt_status dt_dropout_seed(struct dt_backend *be, struct dt_xoro *lanes, int64_t rows,
                               int64_t row0, uint64_t seed, uint32_t step, uint32_t member,
                               const struct dt_policy *pol)
{
    CHECK_DIMS(rows);
    DT_ASSERT(lanes && pol && row0 >= 0);
    DT_ASSERT_MSG(dt_philox_fields_ok(0, member, 0), "dropout_seed: member out of range");
    REQUIRE(be, dropout_seed);
    DISPATCH(be, DT_OP_DROPOUT_SEED,
             be->ops->dropout_seed(be, lanes, rows, row0, seed, step, member, pol),
             OUT_INT(lanes, rows * (int64_t)(sizeof *lanes / 4)));
}
