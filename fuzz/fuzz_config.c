/* Fuzz target: the YAML config loader (harness/setup/config.c) on hostile bytes.
 * The input is a config file, loaded from memory as "<fuzz>" (dt_config_load_text); its
 * first line, less a leading '#' and blanks, is also tried as a --set override, so a seed
 * can carry one in a YAML comment. Beyond crashes (ASan, UBSan, DT_ASSERT) it checks what
 * the loader promises: a config error names "<fuzz>" or "--set" with line:column; a matrix
 * config's entries (the first four) each resolve or fail that way, and the one past the
 * last is refused naming the config; a loaded experiment's JSON (run.json's `config`)
 * loads back to the same JSON. libFuzzer drives it (fuzz/CMakeLists.txt); so does
 * fuzz/replay_main.c in every build, over fuzz/corpus/config and fuzz/regressions/config. */
#include "fuzz/fuzz_target.h"
#include "harness/setup/config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FUZZ_NAME "<fuzz>"
#define FUZZ_MAX_ENTRIES 4 /* matrix entries resolved per input (each is a full load) */

static struct dt_experiment exp_a, exp_b; /* several KiB each: not on the stack */

/* Stop the run on a broken promise, with the input's story on stderr. */
static void fuzz_fail(const char *what, const char *detail_a, const char *detail_b)
{
    fprintf(stderr, "fuzz_config: %s\n", what);
    if (detail_a) fprintf(stderr, "  %s\n", detail_a);
    if (detail_b) fprintf(stderr, "  %s\n", detail_b);
    abort();
}

/* A failed load reports where: a config error carries "<fuzz>" or "--set" (or "<json>"
 * when reloading JSON) and a 1-based line and column; a usage error names the input. */
static void check_error(enum dt_status st, const struct dt_error *err, const char *name)
{
    if (st == DT_ERR_NOMEM) return;
    if (err->status != st || err->msg[0] == '\0')
        fuzz_fail("a failed load left no message (or another status)", err->msg, NULL);
    if (st == DT_ERR_USAGE) {
        if (strncmp(err->msg, name, strlen(name)) != 0)
            fuzz_fail("a usage error does not name the config", err->msg, NULL);
        return;
    }
    if (st != DT_ERR_CONFIG) fuzz_fail("unexpected status for an in-memory config", err->msg, NULL);
    if ((strcmp(err->file, name) != 0 && strcmp(err->file, "--set") != 0) || err->line < 1 ||
        err->column < 1)
        fuzz_fail("a config error without file:line:column", err->msg, NULL);
}

/* The resolved JSON of `exp` in a malloc'd string. */
static char *json_of(const struct dt_experiment *exp)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) abort();
    dt_config_write_json(f, exp);
    if (fclose(f) != 0) abort();
    return text;
}

/* What run.json records must load back unchanged (config.h: dt_config_write_json). */
static void check_round_trip(const struct dt_experiment *exp)
{
    char *a = json_of(exp);
    struct dt_error err = {0};
    enum dt_status st = dt_config_load_text(&exp_b, "<json>", a, strlen(a), -1, NULL, 0, &err);
    if (st == DT_ERR_NOMEM) {
        free(a);
        return;
    }
    if (st != DT_OK) fuzz_fail("the resolved JSON does not load back", a, err.msg);
    if (exp_b.n_matrix != 0) fuzz_fail("the resolved JSON loads back as a matrix", a, NULL);
    char *b = json_of(&exp_b);
    if (strcmp(a, b) != 0) fuzz_fail("the resolved JSON loads back different", a, b);
    free(a);
    free(b);
}

/* Load `data` with the given overrides; check the outcome, then each matrix entry's. */
static void load_and_check(const char *data, size_t size, const char *const *sets, int n_sets)
{
    struct dt_error err = {0};
    enum dt_status st = dt_config_load_text(&exp_a, FUZZ_NAME, data, size, -1, sets, n_sets, &err);
    if (st != DT_OK) {
        check_error(st, &err, FUZZ_NAME);
        return;
    }
    if (strcmp(exp_a.source, FUZZ_NAME) != 0) fuzz_fail("source is not the name given", NULL, NULL);
    if (exp_a.n_matrix == 0) {
        check_round_trip(&exp_a);
        return;
    }
    const int n_matrix = exp_a.n_matrix; /* exp_a is reused below */
    const int n = n_matrix < FUZZ_MAX_ENTRIES ? n_matrix : FUZZ_MAX_ENTRIES;
    for (int k = 0; k < n; k++) {
        err = (struct dt_error){0};
        st = dt_config_load_text(&exp_a, FUZZ_NAME, data, size, k, sets, n_sets, &err);
        if (st == DT_OK) check_round_trip(&exp_a);
        else check_error(st, &err, FUZZ_NAME);
    }
    /* One past the last entry is a usage error naming the config. */
    err = (struct dt_error){0};
    st = dt_config_load_text(&exp_a, FUZZ_NAME, data, size, n_matrix, sets, n_sets, &err);
    if (st != DT_ERR_USAGE) fuzz_fail("the entry past the last was not refused", err.msg, NULL);
    check_error(st, &err, FUZZ_NAME);
}

/* The first line (up to '\n' or a NUL byte, at most 1023 bytes), less a leading '#' and
 * blanks, as a --set assignment. */
static void first_line(char *out, size_t cap, const uint8_t *data, size_t size)
{
    size_t i = 0, n = 0;
    if (i < size && data[i] == '#') i++;
    while (i < size && (data[i] == ' ' || data[i] == '\t')) i++;
    while (i < size && data[i] != '\n' && data[i] != '\0' && n + 1 < cap)
        out[n++] = (char)data[i++];
    out[n] = '\0';
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *text = (const char *)data;
    load_and_check(text, size, NULL, 0);
    char set[1024];
    first_line(set, sizeof set, data, size);
    const char *sets[] = {set};
    load_and_check(text, size, sets, 1);
    return 0;
}
