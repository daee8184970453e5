/* Determinism policy: the set of controls every op receives (DESIGN.md, "Determinism
 * levels and controls"). Three named levels set every control at once; the controls
 * themselves are separate fields so an experiment can switch one and measure it.
 * Issue 2 parses level names into this struct; the controls' behaviour arrives with the
 * CPU determinism-controls work, and ops must not assume more than is implemented. */
#ifndef DT_POLICY_H
#define DT_POLICY_H

#include "core/status.h"

enum dt_level { DT_LEVEL_FAST, DT_LEVEL_RUN_TO_RUN, DT_LEVEL_PORTABLE, DT_LEVEL_COUNT };

/* reduction: sums across the batch (bias/weight gradients, loss). */
enum dt_reduction { DT_REDUCTION_UNORDERED, DT_REDUCTION_FIXED };
/* atomics: scatter-adds. */
enum dt_atomics { DT_ATOMICS_FLOAT, DT_ATOMICS_FIXED_POINT };
/* rng: where Bayesian epsilon / dropout masks come from in backward. */
enum dt_rng { DT_RNG_STORED, DT_RNG_LFSR, DT_RNG_PHILOX };
/* conv_algo: cuDNN algorithm choice (GPU only). */
enum dt_conv_algo { DT_CONV_ALGO_AUTOTUNE, DT_CONV_ALGO_DETERMINISTIC, DT_CONV_ALGO_OWN };
/* math: arithmetic mode. */
enum dt_math { DT_MATH_FAST, DT_MATH_STRICT, DT_MATH_PORTABLE };
/* threads (CPU): may the result depend on the thread count? */
enum dt_threads { DT_THREADS_ANY, DT_THREADS_FIXED, DT_THREADS_INDEPENDENT };

struct dt_policy {
    char name[64]; /* readable name used in traces, summaries and folder names */
    enum dt_level base;
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

/* Write "reduction=fixed atomics=fixed_point ..." into buf. */
void dt_policy_describe(char *buf, size_t size, const struct dt_policy *p);

/* Print the controls, their values and what each level sets (for `detrain policies`). */
void dt_policy_print_table(FILE *f);

#endif
