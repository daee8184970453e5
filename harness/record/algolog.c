/* Run-length record of library algorithm notes per call site (harness/record/algolog.h). */
#include "harness/record/algolog.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "harness/record/outdir.h"

void dt_algolog_init(struct dt_algolog *log)
{
    memset(log, 0, sizeof *log);
    for (int i = 0; i < DT_ALGOLOG_MAX_CALLS; i++) log->open[i] = -1;
}

void dt_algolog_free(struct dt_algolog *log)
{
    free(log->runs);
    dt_algolog_init(log);
}

static bool same_note(const struct dt_algo_note *a, const struct dt_algo_note *b)
{
    return strcmp(a->op, b->op) == 0 && strcmp(a->shape, b->shape) == 0 && a->algo == b->algo &&
           strcmp(a->name, b->name) == 0 && a->deterministic == b->deterministic &&
           strcmp(a->math, b->math) == 0 && strcmp(a->how, b->how) == 0;
}

void dt_algolog_step(struct dt_algolog *log, int64_t step, const struct dt_algo_note *notes, int n,
                     int max_kept)
{
    const int kept = n < max_kept ? n : max_kept;
    if (kept > 0) log->steps_noted++;
    for (int i = 0; i < kept && i < DT_ALGOLOG_MAX_CALLS; i++) {
        const int64_t o = log->open[i];
        if (o >= 0 && log->runs[o].last_step == step - 1 &&
            same_note(&log->runs[o].note, &notes[i])) {
            log->runs[o].last_step = step; /* the same choice as the step before */
            continue;
        }
        if (log->n_runs >= DT_ALGOLOG_MAX_RUNS) {
            /* not kept, only counted -- and followed in a slot of its own past the kept
             * rows, so that an unchanged choice is not counted again at every step */
            log->dropped++;
            if (log->cap < DT_ALGOLOG_MAX_RUNS + DT_ALGOLOG_MAX_CALLS) {
                log->cap = DT_ALGOLOG_MAX_RUNS + DT_ALGOLOG_MAX_CALLS;
                log->runs = dt_xrealloc(log->runs, (size_t)log->cap * sizeof *log->runs);
            }
            log->runs[DT_ALGOLOG_MAX_RUNS + i] = (struct dt_algo_run){
                .first_step = step, .last_step = step, .call = i, .note = notes[i]};
            log->open[i] = DT_ALGOLOG_MAX_RUNS + i;
            continue;
        }
        if (log->n_runs == log->cap) {
            log->cap = log->cap ? 2 * log->cap : 16;
            log->runs = dt_xrealloc(log->runs, (size_t)log->cap * sizeof *log->runs);
        }
        log->runs[log->n_runs] = (struct dt_algo_run){
            .first_step = step, .last_step = step, .call = i, .note = notes[i]};
        log->open[i] = log->n_runs++;
    }
}

int64_t dt_algolog_changes(const struct dt_algolog *log)
{
    bool seen[DT_ALGOLOG_MAX_CALLS] = {false};
    int64_t changes = log->dropped;
    for (int64_t r = 0; r < log->n_runs; r++) {
        const int call = log->runs[r].call;
        if (seen[call]) changes++;
        seen[call] = true;
    }
    return changes;
}

/* A CSV field: the notes' texts are identifiers and shapes (no commas or quotes), but a
 * comma would break the row, so quote defensively. */
static void csv_field(FILE *f, const char *s)
{
    if (strpbrk(s, ",\"\n") == NULL) {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"') fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

enum dt_status dt_algolog_write_csv(const struct dt_algolog *log, const char *path,
                                    struct dt_error *err)
{
    if (log->steps_noted == 0) return DT_OK;
    FILE *f = dt_out_fopen(path, false, err);
    if (!f) return DT_ERR_IO;
    fputs("first_step,last_step,call,op,shape,algo,name,deterministic,math,how\n", f);
    for (int64_t r = 0; r < log->n_runs; r++) {
        const struct dt_algo_run *a = &log->runs[r];
        fprintf(f, "%" PRId64 ",%" PRId64 ",%d,", a->first_step, a->last_step, a->call);
        csv_field(f, a->note.op);
        fputc(',', f);
        csv_field(f, a->note.shape);
        fprintf(f, ",%d,", a->note.algo);
        csv_field(f, a->note.name);
        fprintf(f, ",%s,", a->note.deterministic ? "true" : "false");
        csv_field(f, a->note.math);
        fputc(',', f);
        csv_field(f, a->note.how);
        fputc('\n', f);
    }
    bool ok = !ferror(f);
    ok = fclose(f) == 0 && ok;
    if (!ok) return dt_error_set(err, DT_ERR_IO, "%s: write failed: %s", path, strerror(errno));
    return DT_OK;
}

void dt_algolog_json(const struct dt_algolog *log, struct dt_strbuf *sb)
{
    dt_strbuf_printf(sb,
                     "\"algorithms\": {\"steps_noted\": %" PRId64 ", \"rows\": %" PRId64
                     ", \"changes\": %" PRId64 ", \"first_rows\": [",
                     log->steps_noted, log->n_runs + log->dropped, dt_algolog_changes(log));
    for (int64_t r = 0; r < log->n_runs && r < 64; r++) {
        const struct dt_algo_run *a = &log->runs[r];
        dt_strbuf_printf(sb,
                         "%s{\"first_step\": %" PRId64 ", \"last_step\": %" PRId64
                         ", \"call\": %d, \"op\": ",
                         r ? ", " : "", a->first_step, a->last_step, a->call);
        dt_strbuf_json_string(sb, a->note.op);
        dt_strbuf_printf(sb, ", \"shape\": ");
        dt_strbuf_json_string(sb, a->note.shape);
        dt_strbuf_printf(sb, ", \"algo\": %d, \"name\": ", a->note.algo);
        dt_strbuf_json_string(sb, a->note.name);
        dt_strbuf_printf(
            sb, ", \"deterministic\": %s, \"math\": ", a->note.deterministic ? "true" : "false");
        dt_strbuf_json_string(sb, a->note.math);
        dt_strbuf_printf(sb, ", \"how\": ");
        dt_strbuf_json_string(sb, a->note.how);
        dt_strbuf_printf(sb, "}");
    }
    dt_strbuf_printf(sb, "]}");
}
