/* Determinism levels and the controls they set; see policy.h and DESIGN.md. */
#include "policy.h"

#include <string.h>

static const char *const level_names[DT_LEVEL_COUNT] = {"fast", "run_to_run", "portable"};
static const char *const reduction_names[] = {"unordered", "fixed"};
static const char *const atomics_names[] = {"float", "fixed_point"};
static const char *const rng_names[] = {"stored", "lfsr", "philox"};
static const char *const conv_algo_names[] = {"autotune", "deterministic", "own"};
static const char *const math_names[] = {"fast", "strict", "portable"};
static const char *const threads_names[] = {"any", "fixed", "independent"};

const char *dt_level_name(enum dt_level level)
{
    DT_ASSERT(level >= 0 && level < DT_LEVEL_COUNT);
    return level_names[level];
}

void dt_policy_from_level(struct dt_policy *out, enum dt_level level)
{
    DT_ASSERT(level >= 0 && level < DT_LEVEL_COUNT);
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "%s", level_names[level]);
    out->base = level;
    switch (level) {
    case DT_LEVEL_FAST:
        out->reduction = DT_REDUCTION_UNORDERED;
        out->atomics = DT_ATOMICS_FLOAT;
        out->rng = DT_RNG_STORED;
        out->conv_algo = DT_CONV_ALGO_AUTOTUNE;
        out->math = DT_MATH_FAST;
        out->threads = DT_THREADS_ANY;
        break;
    case DT_LEVEL_RUN_TO_RUN:
        out->reduction = DT_REDUCTION_FIXED;
        out->atomics = DT_ATOMICS_FIXED_POINT;
        out->rng = DT_RNG_LFSR;
        out->conv_algo = DT_CONV_ALGO_DETERMINISTIC;
        out->math = DT_MATH_STRICT;
        out->threads = DT_THREADS_FIXED;
        break;
    case DT_LEVEL_PORTABLE:
    default:
        out->reduction = DT_REDUCTION_FIXED;
        out->atomics = DT_ATOMICS_FIXED_POINT;
        out->rng = DT_RNG_LFSR;
        out->conv_algo = DT_CONV_ALGO_OWN;
        out->math = DT_MATH_PORTABLE;
        out->threads = DT_THREADS_INDEPENDENT;
        break;
    }
}

enum dt_status dt_policy_from_level_name(struct dt_policy *out, const char *name,
                                         struct dt_error *err)
{
    for (int i = 0; i < DT_LEVEL_COUNT; i++) {
        if (strcmp(name, level_names[i]) == 0) {
            dt_policy_from_level(out, (enum dt_level)i);
            return DT_OK;
        }
    }
    return dt_error_set(err, DT_ERR_CONFIG,
                        "unknown determinism level '%s' (expected fast, run_to_run or portable)",
                        name);
}

void dt_policy_describe(char *buf, size_t size, const struct dt_policy *p)
{
    snprintf(buf, size, "reduction=%s atomics=%s rng=%s conv_algo=%s math=%s threads=%s",
             reduction_names[p->reduction], atomics_names[p->atomics], rng_names[p->rng],
             conv_algo_names[p->conv_algo], math_names[p->math], threads_names[p->threads]);
}

void dt_policy_print_table(FILE *f)
{
    struct dt_policy lv[DT_LEVEL_COUNT];
    for (int i = 0; i < DT_LEVEL_COUNT; i++) dt_policy_from_level(&lv[i], (enum dt_level)i);
    fprintf(f, "%-10s %-12s %-14s %-12s\n", "control", "fast", "run_to_run", "portable");
#define DT_ROW_(label, names, field)                                                       \
    fprintf(f, "%-10s %-12s %-14s %-12s\n", label, names[lv[0].field], names[lv[1].field], \
            names[lv[2].field])
    DT_ROW_("reduction", reduction_names, reduction);
    DT_ROW_("atomics", atomics_names, atomics);
    DT_ROW_("rng", rng_names, rng);
    DT_ROW_("conv_algo", conv_algo_names, conv_algo);
    DT_ROW_("math", math_names, math);
    DT_ROW_("threads", threads_names, threads);
#undef DT_ROW_
}
