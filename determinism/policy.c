/* Determinism levels and the controls they set; see policy.h and docs/DESIGN.md.
 * `controls` below is the one table of controls: each row names a control, its field in
 * struct dt_policy and its values (index = enum value) with what each means. Parsing,
 * describe, auto names, equality and `detrain policies` all walk that table, so a new
 * control or value is a new row or entry there (plus its enum in policy.h). */
#include "policy.h"

#include <string.h>

static const char *const level_names[DT_LEVEL_COUNT] = {"fast", "run_to_run", "portable"};

#define MAX_VALUES_ 5

struct control_value {
    const char *name;
    const char *doc; /* what choosing this value means, one line */
};

struct control_row {
    const char *name;
    size_t offset;   /* offsetof(struct dt_policy, field); every control field is an enum */
    const char *doc; /* what the control governs */
    struct control_value values[MAX_VALUES_ + 1]; /* index = enum value; ends at name NULL */
};

#define FIELD_(f) .name = #f, .offset = offsetof(struct dt_policy, f)

static const struct control_row controls[] = {
    {FIELD_(reduction),
     .doc = "sums across the batch (bias/weight gradients, loss), within a process and across "
            "MPI ranks",
     .values = {{"unordered", "partial sums from worker threads combined in completion order "
                              "(depends on scheduling); across ranks MPI_Allreduce/NCCL in "
                              "float"},
                {"fixed", "canonical fixed-size chunks summed in index order, then a fixed "
                          "binary tree: same bits for any thread count; across ranks the "
                          "ranks' gradients added in rank order (depends on the rank count)"},
                {"exact", "as fixed within a shard; the batch is cut into train.shards "
                          "canonical shards whose gradients are added exactly (int64 fixed "
                          "point, one rounding): same bits for any number of ranks"},
                {"pinned", "a product's sum over the batch is one library call where the "
                           "library promises the same bits at every run (cuBLAS: workspace "
                           "pinned, no atomics; OpenBLAS per fixed worker slice), every other "
                           "sum as fixed: same bits at every run on one device model, thread "
                           "and rank count, driver and library -- not across them"}}},
    {FIELD_(atomics), .doc = "scatter-adds",
     .values = {{"float", "scatter-adds in float, in arrival order"},
                {"fixed_point", "exact int64 fixed-point accumulation, one rounding at the end"}}},
    {FIELD_(rng),
     .doc = "where random draws (Bayesian epsilon, dropout masks) come from in backward",
     .values = {{"stored", "drawn in forward and kept in memory for backward (S x |W| x 4 "
                           "bytes; drawn by model.stored_generator)"},
                {"lfsr", "regenerated in backward by stepping reversible xoroshiro128** lanes "
                         "back; nothing kept"},
                {"philox", "regenerated in backward from its Philox4x32-10 counter; nothing "
                           "kept"}}},
    {FIELD_(conv_algo), .doc = "convolution algorithm",
     .values = {{"autotune", "cuDNN picks by timing, in math's precision (GPU); oneDNN under "
                             "math fast (CPU)"},
                {"deterministic", "an algorithm cuDNN marks deterministic, by heuristic, in "
                                  "math's precision (GPU); oneDNN under math fast, which picks "
                                  "by ISA and shape, never by timing (CPU)"},
                {"own", "detrain's own kernels, the other controls acting in them"}}},
    {FIELD_(math), .doc = "arithmetic mode",
     .values = {{"fast", "libm exp/log, library products in FP32 (OpenBLAS sgemm, FMA where "
                         "the CPU has it; cuBLAS and cuDNN FP32 on the GPU)"},
                {"strict", "libm exp/log, no contraction, own fixed-order matrix kernels"},
                {"portable", "detrain's own exp/log from IEEE basic operations, no contraction"},
                {"exact", "as portable, with the dense layers' products exact in integers "
                          "(fixed point, one rounding): the same bits in any order, kernel "
                          "or device"},
                {"tf32", "as fast, the GPU's library products (cuBLAS, cuDNN) allowed TF32 "
                         "tensor cores (inputs rounded to 10 bits); GPU only, not at "
                         "portable"}}},
    {FIELD_(threads), .doc = "CPU: may the result depend on the thread count?",
     .values = {{"any", "result may depend on the thread count"},
                {"fixed", "thread count fixed per run"},
                {"independent", "result independent of the thread count"}}},
};

#define N_CONTROLS_ ((int)(sizeof controls / sizeof controls[0]))

/* The table's value index is the enum value, and fields are read as unsigned. */
_Static_assert(DT_REDUCTION_UNORDERED == 0 && DT_REDUCTION_FIXED == 1 && DT_REDUCTION_EXACT == 2 &&
                   DT_REDUCTION_PINNED == 3,
               "reduction values");
_Static_assert(DT_ATOMICS_FLOAT == 0 && DT_ATOMICS_FIXED_POINT == 1, "atomics values");
_Static_assert(DT_RNG_STORED == 0 && DT_RNG_LFSR == 1 && DT_RNG_PHILOX == 2, "rng values");
_Static_assert(DT_CONV_ALGO_AUTOTUNE == 0 && DT_CONV_ALGO_DETERMINISTIC == 1 &&
                   DT_CONV_ALGO_OWN == 2,
               "conv_algo values");
_Static_assert(DT_MATH_FAST == 0 && DT_MATH_STRICT == 1 && DT_MATH_PORTABLE == 2 &&
                   DT_MATH_EXACT == 3 && DT_MATH_TF32 == 4,
               "math values");
_Static_assert(DT_THREADS_ANY == 0 && DT_THREADS_FIXED == 1 && DT_THREADS_INDEPENDENT == 2,
               "threads values");
_Static_assert(sizeof(enum dt_reduction) == sizeof(unsigned) &&
                   sizeof(enum dt_atomics) == sizeof(unsigned) &&
                   sizeof(enum dt_rng) == sizeof(unsigned) &&
                   sizeof(enum dt_conv_algo) == sizeof(unsigned) &&
                   sizeof(enum dt_math) == sizeof(unsigned) &&
                   sizeof(enum dt_threads) == sizeof(unsigned),
               "control fields are accessed as unsigned");

static int count_values(const struct control_row *row)
{
    int n = 0;
    while (n < MAX_VALUES_ && row->values[n].name) n++;
    return n;
}

static unsigned get_field(const struct dt_policy *p, const struct control_row *row)
{
    unsigned u;
    memcpy(&u, (const char *)p + row->offset, sizeof u);
    DT_ASSERT(u < (unsigned)count_values(row));
    return u;
}

static void set_field(struct dt_policy *p, const struct control_row *row, unsigned u)
{
    DT_ASSERT(u < (unsigned)count_values(row));
    memcpy((char *)p + row->offset, &u, sizeof u);
}

static const struct control_row *control_row(int control)
{
    DT_ASSERT(control >= 0 && control < N_CONTROLS_);
    return &controls[control];
}

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
    case DT_LEVEL_RUN_TO_RUN: /* what the libraries promise run to run, nothing more */
        out->reduction = DT_REDUCTION_PINNED;
        out->atomics = DT_ATOMICS_FIXED_POINT;
        out->rng = DT_RNG_LFSR;
        out->conv_algo = DT_CONV_ALGO_DETERMINISTIC;
        out->math = DT_MATH_FAST;
        out->threads = DT_THREADS_FIXED;
        break;
    case DT_LEVEL_PORTABLE:
    default:
        out->reduction = DT_REDUCTION_EXACT;
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

int dt_policy_control_count(void) { return N_CONTROLS_; }

const char *dt_policy_control_name(int control) { return control_row(control)->name; }

const char *dt_policy_control_value(const struct dt_policy *p, int control)
{
    const struct control_row *row = control_row(control);
    return row->values[get_field(p, row)].name;
}

int dt_policy_find_control(const char *name)
{
    for (int i = 0; i < N_CONTROLS_; i++)
        if (strcmp(controls[i].name, name) == 0) return i;
    return -1;
}

enum dt_status dt_policy_set_control(struct dt_policy *p, const char *control, const char *value,
                                     struct dt_error *err)
{
    char choices[256];
    size_t used = 0;
    int c = dt_policy_find_control(control);
    if (c < 0) {
        for (int i = 0; i < N_CONTROLS_ && used < sizeof choices; i++)
            used += (size_t)snprintf(choices + used, sizeof choices - used, "%s%s", i ? ", " : "",
                                     controls[i].name);
        return dt_error_set(err, DT_ERR_CONFIG, "unknown control '%.64s' (expected one of %s)",
                            control, choices);
    }
    const struct control_row *row = &controls[c];
    int n = count_values(row);
    for (int v = 0; v < n; v++) {
        if (strcmp(row->values[v].name, value) != 0) continue;
        if (row->offset == offsetof(struct dt_policy, math) && v == DT_MATH_TF32 &&
            p->base == DT_LEVEL_PORTABLE)
            return dt_error_set(err, DT_ERR_CONFIG,
                                "control 'math': 'tf32' is not allowed at base portable: TF32 "
                                "tensor cores round a product's inputs to 10 bits on NVIDIA "
                                "GPUs only, so no other device gives the same bits (tf32 is "
                                "for base fast or run_to_run, on the GPU)");
        set_field(p, row, (unsigned)v);
        return DT_OK;
    }
    for (int v = 0; v < n && used < sizeof choices; v++)
        used += (size_t)snprintf(choices + used, sizeof choices - used, "%s%s",
                                 v == 0 ? "" : (v == n - 1 ? " or " : ", "), row->values[v].name);
    return dt_error_set(err, DT_ERR_CONFIG, "control '%s': unknown value '%.64s' (expected %s)",
                        row->name, value, choices);
}

bool dt_policy_auto_name(struct dt_policy *p)
{
    struct dt_policy ref;
    dt_policy_from_level(&ref, p->base);
    char name[sizeof p->name];
    size_t used = (size_t)snprintf(name, sizeof name, "%s", level_names[p->base]);
    for (int i = 0; i < N_CONTROLS_ && used < sizeof name; i++) {
        const struct control_row *row = &controls[i];
        unsigned v = get_field(p, row);
        if (v == get_field(&ref, row)) continue;
        used += (size_t)snprintf(name + used, sizeof name - used, "+%s=%s", row->name,
                                 row->values[v].name);
    }
    memcpy(p->name, name, sizeof name);
    return used < sizeof name;
}

bool dt_policy_equal_controls(const struct dt_policy *a, const struct dt_policy *b)
{
    for (int i = 0; i < N_CONTROLS_; i++)
        if (get_field(a, &controls[i]) != get_field(b, &controls[i])) return false;
    return true;
}

void dt_policy_describe(char *buf, size_t size, const struct dt_policy *p)
{
    size_t used = 0;
    if (size) buf[0] = '\0';
    for (int i = 0; i < N_CONTROLS_ && used < size; i++) {
        int w = snprintf(buf + used, size - used, "%s%s=%s", i ? " " : "", controls[i].name,
                         controls[i].values[get_field(p, &controls[i])].name);
        if (w < 0) break;
        used += (size_t)w;
    }
}

void dt_policy_print_table(FILE *f)
{
    struct dt_policy lv[DT_LEVEL_COUNT];
    for (int i = 0; i < DT_LEVEL_COUNT; i++) dt_policy_from_level(&lv[i], (enum dt_level)i);
    fprintf(f, "%-10s %-12s %-14s %-12s\n", "control", level_names[0], level_names[1],
            level_names[2]);
    for (int c = 0; c < N_CONTROLS_; c++) {
        const struct control_row *row = &controls[c];
        fprintf(f, "%-10s %-12s %-14s %-12s\n", row->name, row->values[get_field(&lv[0], row)].name,
                row->values[get_field(&lv[1], row)].name, row->values[get_field(&lv[2], row)].name);
    }
    for (int c = 0; c < N_CONTROLS_; c++) {
        const struct control_row *row = &controls[c];
        fprintf(f, "\n%s: %s\n", row->name, row->doc);
        for (int v = 0; v < count_values(row); v++)
            fprintf(f, "  %-14s %s\n", row->values[v].name, row->values[v].doc);
    }
    fprintf(f, "\nIn a config, each item of `policies` is a level name or a mapping that starts\n"
               "from a level and overrides single controls, e.g. {base: fast, reduction: fixed};\n"
               "such a policy is named fast+reduction=fixed unless it has a `name`.\n");
}
