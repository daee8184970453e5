/* Determinism policy: the set of controls every op receives (docs/DESIGN.md, "Determinism
 * levels and controls"). Three named levels set every control at once; the controls
 * themselves are separate fields so an experiment can switch one and measure it: a policy
 * is a base level plus any single-control overrides ("fast+reduction=fixed").
 * One table in policy.c (control name, field, value names, what each value means) drives
 * parsing, describing, naming and `detrain policies`; ops must not assume more than is
 * implemented. */
#ifndef DT_POLICY_H
#define DT_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "core/status.h"

enum dt_level { DT_LEVEL_FAST, DT_LEVEL_RUN_TO_RUN, DT_LEVEL_PORTABLE, DT_LEVEL_COUNT };

/* reduction: sums across the batch (bias/weight gradients, loss). EXACT sums as FIXED does
 * (dt_reduction_ordered) within each canonical shard: with shards set on the backend
 * (dt_backend_set_shards) its batch reductions give one partial per shard, which the
 * step then adds exactly (dt_exact_*, nets/step.c); without them it is FIXED. PINNED
 * (run_to_run's) sums a product over the batch by one library call where the library's own
 * run-to-run guarantee holds (dt_reduction_library: cuBLAS with its workspace pinned and no
 * atomics, OpenBLAS per fixed worker slice) and every other sum as FIXED: the same bits at
 * every run on one machine, thread and rank count, driver and library -- not across them.
 * (Values are appended: the enum value is the table's index.) */
enum dt_reduction {
    DT_REDUCTION_UNORDERED,
    DT_REDUCTION_FIXED,
    DT_REDUCTION_EXACT,
    DT_REDUCTION_PINNED
};
/* atomics: scatter-adds. */
enum dt_atomics { DT_ATOMICS_FLOAT, DT_ATOMICS_FIXED_POINT };
/* rng: where Bayesian epsilon / dropout masks come from in backward. */
enum dt_rng { DT_RNG_STORED, DT_RNG_LFSR, DT_RNG_PHILOX };
/* conv_algo: cuDNN algorithm choice (GPU only). */
enum dt_conv_algo { DT_CONV_ALGO_AUTOTUNE, DT_CONV_ALGO_DETERMINISTIC, DT_CONV_ALGO_OWN };
/* math: arithmetic mode. TF32 is `fast` with the GPU's TF32 tensor cores allowed in the
 * library products (cuBLAS, cuDNN); a GPU mode, refused at portable and on the CPU
 * (dt_policy_set_control, harness/setup/config.c). */
enum dt_math { DT_MATH_FAST, DT_MATH_STRICT, DT_MATH_PORTABLE, DT_MATH_EXACT, DT_MATH_TF32 };
/* threads (CPU): may the result depend on the thread count? */
enum dt_threads { DT_THREADS_ANY, DT_THREADS_FIXED, DT_THREADS_INDEPENDENT };

#define DT_POLICY_NAME_MAX 64 /* capacity of dt_policy.name, NUL included */

struct dt_policy {
    /* readable name used in traces, summaries and folder names: [A-Za-z0-9_.+=-]+ */
    char name[DT_POLICY_NAME_MAX];
    enum dt_level base; /* the level the controls start from */
    enum dt_reduction reduction;
    enum dt_atomics atomics;
    enum dt_rng rng;
    enum dt_conv_algo conv_algo;
    enum dt_math math;
    enum dt_threads threads;
};

const char *dt_level_name(enum dt_level level);

/* Fill `out` with every control as the named level sets it. Returns DT_ERR_CONFIG with
 * a message listing the valid names when `name` is not a level. */
enum dt_status dt_policy_from_level_name(struct dt_policy *out, const char *name,
                                         struct dt_error *err);
void dt_policy_from_level(struct dt_policy *out, enum dt_level level);

/* The controls in table order: the order of describe, auto names, run.json and
 * `detrain policies`. `control` is an index in [0, dt_policy_control_count()). */
int dt_policy_control_count(void);
const char *dt_policy_control_name(int control);
/* The name of the value `p` has for `control` ("fixed"). */
const char *dt_policy_control_value(const struct dt_policy *p, int control);
/* Index of the control called `name`, or -1. */
int dt_policy_find_control(const char *name);

/* Set one control by name: ("reduction", "fixed"). Leaves p->name alone (see
 * dt_policy_auto_name). Returns DT_ERR_CONFIG with "unknown control 'x' (expected one of
 * reduction, atomics, ...)" or "control 'reduction': unknown value 'x' (expected unordered
 * or fixed)"; `p` is unchanged on error. */
enum dt_status dt_policy_set_control(struct dt_policy *p, const char *control, const char *value,
                                     struct dt_error *err);

/* Name `p` after its base level and each control that differs from that level, in table
 * order: "fast", "fast+reduction=fixed", "portable+math=fast+threads=any". The result
 * uses only [A-Za-z0-9_+=] and is usable as a folder name. Returns false when it does
 * not fit in p->name (then p->name holds a truncated prefix that must not be used). */
bool dt_policy_auto_name(struct dt_policy *p);

/* Do `a` and `b` set every control alike (names and bases aside)? */
bool dt_policy_equal_controls(const struct dt_policy *a, const struct dt_policy *b);

/* Write "reduction=fixed atomics=fixed_point ..." (every control, table order) into buf. */
void dt_policy_describe(char *buf, size_t size, const struct dt_policy *p);

/* Print what each level sets, then every control with one line per value saying what it
 * means (for `detrain policies`). */
void dt_policy_print_table(FILE *f);

/* ---- what each control value means to an op ---------------------------------------------
 * Ops ask these questions instead of comparing with one enum constant, and each answers by
 * a `switch` over every value with no default: a new value added to an enum is a compile
 * error here (-Werror=switch) until it is given a meaning, instead of silently falling into
 * some op's `else`. docs/DESIGN.md, "Controls". */

/* reduction: do detrain's own sums run in the fixed order (fixed, exact, and pinned's sums
 * that are not one library product)? */
static inline bool dt_reduction_ordered(const struct dt_policy *pol)
{
    switch (pol->reduction) {
    case DT_REDUCTION_UNORDERED: return false;
    case DT_REDUCTION_FIXED:
    case DT_REDUCTION_EXACT:
    case DT_REDUCTION_PINNED: return true;
    }
    return true;
}

/* reduction: may a sum over the batch take an order the library or the machine picks -- a
 * product's sum as one library call (BLAS, cuBLAS), the GPU's clipping norm in block
 * slots -- rather than detrain's fixed chunks and tree? pinned: yes, its order is the same
 * at every run on one machine, and it takes no drawn order; unordered: yes unless the
 * forced-order hook is on (`forced`: dt_backend_set_forced_order), which runs the own
 * chunks in the order a test draws. */
static inline bool dt_reduction_library(const struct dt_policy *pol, bool forced)
{
    switch (pol->reduction) {
    case DT_REDUCTION_UNORDERED: return !forced;
    case DT_REDUCTION_PINNED: return true;
    case DT_REDUCTION_FIXED:
    case DT_REDUCTION_EXACT: return false;
    }
    return false;
}

/* reduction: exact: batch reductions in shard partials, added exactly (nets/step.c)? */
static inline bool dt_reduction_exact(const struct dt_policy *pol)
{
    switch (pol->reduction) {
    case DT_REDUCTION_UNORDERED:
    case DT_REDUCTION_FIXED:
    case DT_REDUCTION_PINNED: return false;
    case DT_REDUCTION_EXACT: return true;
    }
    return false;
}

/* atomics: scatter-adds in exact fixed point (fixed_point) rather than float arrival order? */
static inline bool dt_atomics_exact(const struct dt_policy *pol)
{
    switch (pol->atomics) {
    case DT_ATOMICS_FLOAT: return false;
    case DT_ATOMICS_FIXED_POINT: return true;
    }
    return true;
}

/* math: library products (BLAS, cuBLAS, cuDNN; in FP32, or TF32 where tf32) allowed? */
static inline bool dt_math_fast(const struct dt_policy *pol)
{
    switch (pol->math) {
    case DT_MATH_FAST:
    case DT_MATH_TF32: return true;
    case DT_MATH_STRICT:
    case DT_MATH_PORTABLE:
    case DT_MATH_EXACT: return false;
    }
    return false;
}

/* math: detrain's own kernels and portable exp/log, the CPU's bits on every device? (exact
 * is portable's arithmetic with the dense products in integers.) */
static inline bool dt_math_portable(const struct dt_policy *pol)
{
    switch (pol->math) {
    case DT_MATH_FAST:
    case DT_MATH_STRICT:
    case DT_MATH_TF32: return false;
    case DT_MATH_PORTABLE:
    case DT_MATH_EXACT: return true;
    }
    return true;
}

/* math: the dense layers' matrix products exact in integers (dt_matmul_exact: fixed point,
 * one rounding), their bits independent of order, kernel and device? */
static inline bool dt_math_exact(const struct dt_policy *pol)
{
    switch (pol->math) {
    case DT_MATH_FAST:
    case DT_MATH_STRICT:
    case DT_MATH_PORTABLE:
    case DT_MATH_TF32: return false;
    case DT_MATH_EXACT: return true;
    }
    return false;
}

/* math: the library products may round their inputs to TF32 on the GPU's tensor cores
 * (cuBLAS CUBLAS_TF32_TENSOR_OP_MATH, cuDNN CUDNN_DEFAULT_MATH)? Only `tf32`: `fast` is the
 * libraries' FP32, as PyTorch's default matrix products are. */
static inline bool dt_math_tf32(const struct dt_policy *pol)
{
    switch (pol->math) {
    case DT_MATH_TF32: return true;
    case DT_MATH_FAST:
    case DT_MATH_STRICT:
    case DT_MATH_PORTABLE:
    case DT_MATH_EXACT: return false;
    }
    return false;
}

/* math: the own elementary functions of determinism/portable_math.h -- GELU's tanh
 * (nets/gpt_elem.h), the BNN's softplus and exp for sigma (nets/bnn_elem.h) -- rather than
 * the math library's? At `portable` for their bits, at `fast` because they are the faster
 * (branch-free, their loops vectorise: GELU about 12x the C library's scalar tanhf on the
 * development CPU, results/cpu/gpt/bench.txt; the BNN's sigma, results/cpu/bnn-rng/); `strict`
 * keeps the library's. */
static inline bool dt_math_own_elementary(const struct dt_policy *pol)
{
    switch (pol->math) {
    case DT_MATH_FAST:
    case DT_MATH_TF32:
    case DT_MATH_PORTABLE:
    case DT_MATH_EXACT: return true;
    case DT_MATH_STRICT: return false;
    }
    return true;
}

/* rng: epsilon kept from forward to backward (stored)? */
static inline bool dt_rng_stored(const struct dt_policy *pol)
{
    switch (pol->rng) {
    case DT_RNG_STORED: return true;
    case DT_RNG_LFSR:
    case DT_RNG_PHILOX: return false;
    }
    return true;
}

/* rng: epsilon regenerated backward by reversing the LFSR lanes? */
static inline bool dt_rng_lfsr(const struct dt_policy *pol)
{
    switch (pol->rng) {
    case DT_RNG_LFSR: return true;
    case DT_RNG_STORED:
    case DT_RNG_PHILOX: return false;
    }
    return false;
}

/* Does the policy promise the same bits at every run on the same device, thread count and
 * libraries -- every sum in an order (reduction ordered), no float atomics, no algorithm
 * chosen by timing (conv_algo: autotune)? run_to_run and portable do; fast does not. */
static inline bool dt_policy_same_bits_every_run(const struct dt_policy *pol)
{
    return dt_reduction_ordered(pol) && dt_atomics_exact(pol) &&
           pol->conv_algo != DT_CONV_ALGO_AUTOTUNE;
}

/* conv_algo: a library (cuDNN) picks the convolution algorithm (autotune, deterministic),
 * rather than detrain's own kernels? */
static inline bool dt_conv_algo_library(const struct dt_policy *pol)
{
    switch (pol->conv_algo) {
    case DT_CONV_ALGO_AUTOTUNE:
    case DT_CONV_ALGO_DETERMINISTIC: return true;
    case DT_CONV_ALGO_OWN: return false;
    }
    return false;
}

#endif
