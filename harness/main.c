/* detrain's command line: run | report | compare | explain | bench | cost | export | batches |
 * reproduce | policies | config-reference.
 * The only place a status becomes an exit code: 0 success; 2 usage, config or input
 * error; compare: 0 identical, 1 diverged (like cmp); 130 interrupted; 1 other faults. */
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "build_info.h"
#include "core/fileio.h"
#include "core/status.h"
#include "harness/run/bench.h"
#include "harness/run/cost_report.h"
#include "harness/analyze/compare.h"
#include "harness/analyze/explain.h"
#include "harness/setup/config.h"
#include "harness/run/dist.h"
#include "harness/matrix.h"
#include "harness/record/outdir.h"
#include "harness/analyze/ranks_report.h"
#include "harness/record/export.h"
#include "harness/run/batches.h"
#include "harness/setup/model.h"
#include "harness/analyze/report.h"
#include "harness/analyze/reproduce.h"
#include "harness/run/train.h"
#include "harness/setup/test_hooks.h"

#define MAX_SETS 128

/* What every command is given: this process's place among the ranks and the test hooks. */
struct app {
    struct dt_dist *dist;
    struct dt_test_hooks hooks;
};

/* The report of a finished (or interrupted) run, built here (dt_run_options.report). */
static enum dt_status run_report(const char *dir, bool quiet, struct dt_error *err)
{
    const struct dt_report_options ropt = {.print_summary = true, .gnuplot = NULL, .quiet = quiet};
    return dt_report_build(dir, &ropt, err);
}

static const char usage_text[] =
    "usage: detrain <command> [options]\n"
    "\n"
    "detrain trains small networks under switchable determinism controls, SHA-256-hashes\n"
    "the weights at every step, and tells you where and why replicas diverge.\n"
    "\n"
    "commands:\n"
    "  run CONFIG [--out DIR] [--only NAME,...] [--set KEY=VALUE]... [--quiet] [--dry-run]\n"
    "        [--resume DIR | --overwrite]\n"
    "        Train every cell (vary setting x policy) x replica of the experiment in\n"
    "        CONFIG (YAML), measure each policy's step time against fast (alternated),\n"
    "        then write the report (as `detrain report DIR`). Per replica:\n"
    "        DIR/<cell>/replica-<k>/{trace.csv,tensors.csv,metrics.csv,times.csv,\n"
    "        predictions.csv,snapshots/,run.json}; <cell> is the policy's name, or\n"
    "        <vary>/<policy> when `vary` lists several settings. DIR defaults to\n"
    "        results/<name>. --set overrides a config key, e.g. --set train.steps=200\n"
    "        --set 'model.hidden=[512, 256]' --set policies=[fast] --set 'vary=[[], [init]]'\n"
    "        A terminal shows a progress line (cell, replica, step, steps/s, ETA).\n"
    "        A matrix config (key `matrix`) runs each entry (--only: the named ones) as\n"
    "        an experiment into DIR/<entry>/, skips entries whose backend cannot be\n"
    "        opened here, and writes DIR/matrix.json, report.md and matrix.csv (per\n"
    "        device: digests, first divergent step, step time vs fast per policy).\n"
    "        --resume DIR goes on with an interrupted run of CONFIG in DIR: finished\n"
    "        replicas are kept, the others go on from their checkpoint.bin (written\n"
    "        every train.checkpoint_every steps and on SIGINT/SIGTERM/SIGHUP) or start\n"
    "        again; the traces end up identical to an uninterrupted run's. DIR must\n"
    "        hold this config (train.steps, train.checkpoint_every, hash.async and\n"
    "        report.* may change); --out, if given, must be DIR. Not for matrix configs.\n"
    "        DIR is one experiment's record: run writes only into a new or empty folder\n"
    "        and refuses one that holds a result (naming the keys that differ) unless\n"
    "        --resume goes on with it or --overwrite removes it whole first; a second\n"
    "        run into a folder being written refuses at once (DIR/.detrain.lock). Every\n"
    "        check comes before the first write: a refused run changes nothing.\n"
    "        --dry-run loads CONFIG with its --set overrides (every matrix entry\n"
    "        resolved) and makes every check the run makes before its first write (memory,\n"
    "        backend, the data read, the model, the output folder; with --resume the\n"
    "        folder's config, data and checkpoints), prints what would be trained, and\n"
    "        writes nothing: exit 0 exactly when the run would start (a GPU config on a\n"
    "        machine without one: said, and the rest checked with the CPU backend).\n"
    "  report DIR [--no-plots] [--quiet] [--tables-only]\n"
    "        Rebuild DIR/report.md, summary.csv (one row per cell), cells.csv (one row\n"
    "        per cell and replica pair), drift.csv and DIR/plots/*.svg|png (gnuplot;\n"
    "        tables only without it) from the traces, predictions and snapshots on\n"
    "        disk: distinct digests, first divergent step and tensor, accuracy spread,\n"
    "        churn, weight distance and drift per cell; overhead vs fast with a 95%\n"
    "        bootstrap interval per policy. The same folder gives the same files.\n"
    "        A matrix folder (matrix.json): every entry's report, then report.md and\n"
    "        matrix.csv side by side per device: digests, step time vs fast, the\n"
    "        hash's share of a step, and each cell's noise (accuracy spread, churn,\n"
    "        per-class spread). --tables-only: those two files alone, from the entries'\n"
    "        summary.csv as they stand (a committed folder whose per-step files are\n"
    "        packed or trimmed); no entry is rebuilt.\n"
    "        A ranks folder (plain/ and np<N>/ runs of one config, scripts/ranks.sh):\n"
    "        every run's report, then report.md and ranks.csv: per policy, digest\n"
    "        equality across rank counts and step time vs reduction: unordered.\n"
    "  compare TRACE_A TRACE_B | REPLICA_A REPLICA_B | EXPERIMENT_A EXPERIMENT_B\n"
    "        Compare two trace.csv files (or replica folders) step by step: the first\n"
    "        divergent step and, with tensors.csv, the first divergent tensor; for two\n"
    "        replica folders with snapshots/, the L2 and relative L2 distance of the\n"
    "        weights at every snapshot step both kept (each snapshot checked against its\n"
    "        trace first). For two experiment folders (config.json), one line per cell\n"
    "        and replica (e.g. a CPU run against a GPU run of one config), then a total.\n"
    "        Exit 0 when identical, 1 when anything differs, 2 on bad input.\n"
    "  compare --table EXPERIMENT EXPERIMENT... [--label NAME]... [--csv FILE]\n"
    "        Cross-device table (Markdown on stdout): the first experiment folder is the\n"
    "        reference; one row per cell and replica it has, one column per other\n"
    "        experiment: identical (N steps), step S, tensor T (the first divergent\n"
    "        step and tensor), or missing. Runs of different lengths are compared over\n"
    "        their common steps, and the cell says so. Columns are named by the device\n"
    "        in each run.json; --label NAME (repeatable) names the experiments in order,\n"
    "        the reference first. --csv FILE writes the same table as CSV. Exit 0 when\n"
    "        every cell is identical, 1 when any differs or is missing, 2 on bad input.\n"
    "  explain A B [--executions N] [--step K] [--csv FILE] [--quiet]\n"
    "        Why two replica folders (or cells: their replica-0) part: finds the first\n"
    "        step k where their traces differ, restores the state after k-1 (checkpoint,\n"
    "        then a replay checked against the trace), re-executes step k with every\n"
    "        op's outputs hashed, names the first op output that differs (op, layer,\n"
    "        tensor, phase, elements, ulps), then switches each control alone to its\n"
    "        run_to_run value (replicas; portable for two devices or policies) and\n"
    "        names the control whose switch removes the difference. Replicas of one run\n"
    "        re-execute N times (default 5), first as they run, then, if none differ,\n"
    "        under drawn combination orders. --csv FILE: the op table (op, layer,\n"
    "        tensor, phase, hash per execution, elements differing, max ulp). Exit 0\n"
    "        when no difference is found (and what was tried), 1 explained, 2 error\n"
    "        (a replay that does not match its trace included). --step K re-executes\n"
    "        step K even where the traces agree (is that step order-sensitive?).\n"
    "  reproduce DIR... [--cells CELL,...] [--set KEY=VALUE]... [--out KEEP] [--quiet]\n"
    "        Rerun a recorded result on this machine and compare it step by step with\n"
    "        its traces: DIR is an experiment folder (config.json, run.json and the\n"
    "        replicas' trace.csv, as `run` writes it, committed or downloaded) or a folder\n"
    "        of them (results/cpu/crossdev-t2). By default its portable cells are rerun\n"
    "        (every control at portable: the cells that promise the same bits on any\n"
    "        machine); --cells names others. The config's keys are kept but where the\n"
    "        rerun runs (--set backend.device, backend.threads, backend.gpu, dataset.path;\n"
    "        a --set of any other key that changes the result's config is refused), and\n"
    "        the run is as long as the recorded trace. Before anything is trained: each\n"
    "        trace checked against its config, the data against the recorded data digest,\n"
    "        the result's lock (one that a run is still writing is refused). Every value\n"
    "        a replica records is compared: digests and losses (trace.csv), tensors.csv,\n"
    "        metrics.csv, run.json's final values, predictions.csv, sample.txt.\n"
    "        Verdicts: \"identical at all N hashed steps\" (exit 0); \"parts ... at step S\"\n"
    "        naming the tensor or value -- for a cell that is not portable, then what\n"
    "        `explain` finds (exit 1); \"cannot be compared\", naming what the user, the\n"
    "        data or the result changed, or what this machine lacks (exit 2). Nothing is\n"
    "        written into DIR: the rerun goes to a temporary folder, removed after,\n"
    "        unless --out KEEP (new or empty) keeps it. See docs/cli.md, reproduce.\n"
    "        e.g. detrain reproduce results/cpu/crossdev-t2 "
    "results/nvidia-h100-80gb-hbm3/crossdev\n"
    "  export CHECKPOINT|REPLICA_DIR [--step K] --safetensors FILE\n"
    "        A model's weights as a safetensors file (PyTorch, safetensors and most\n"
    "        frameworks read it): from a checkpoint (checkpoint.bin, divergence.bin), or\n"
    "        from a replica folder's weight snapshot at step K (default: its last; step 0\n"
    "        is the initial weights). Tensors keep detrain's names and shapes (dense\n"
    "        weights [in, out]: torch.nn.Linear's transposed); the header's metadata\n"
    "        says the step, the model kind and the layout. FILE must not exist.\n"
    "  batches CONFIG [--steps N] [--cell C] [--replica R] [--set KEY=VALUE]...\n"
    "        The training examples of the first N steps (default train.steps) of\n"
    "        replica R (default 0) of cell C (default 0) as CSV on stdout: step,row,index\n"
    "        (index: the example of the training split; for dataset.name: text the\n"
    "        window's byte offset in the training bytes). What a run draws from its\n"
    "        data-order stream, for replaying its batches elsewhere\n"
    "        (scripts/gpt_vs_torch.py).\n"
    "  bench CONFIG [--steps N] [--warmup N] [--set KEY=VALUE]... [--csv FILE]\n"
    "        [--baseline fast|first]\n"
    "        Median step time of CONFIG's model and the share spent hashing every step,\n"
    "        then each policy's step time against the baseline (default: the fast level;\n"
    "        first = CONFIG's first policy, e.g. rng: stored for configs/bnn.yaml),\n"
    "        alternating the two step by step, and the epsilon memory each one holds.\n"
    "        --csv FILE writes rows config,policy,what,base_ms,policy_ms,ratio under a\n"
    "        header, after the rows of an earlier bench CSV there: what is `step` (then\n"
    "        also the 95% interval and whether it is conclusive) or an op (an op only the\n"
    "        policy runs, e.g. exact_sum, has base_ms 0 and no ratio).\n"
    "  cost CONFIG [--set KEY=VALUE]... [--device h200|h100] [--measured BENCH.csv] [--csv FILE]\n"
    "        The cost model of CONFIG's training step on the CUDA backend, without a GPU:\n"
    "        for fast and each policy, per op the calls, kernel launches, host waits, MB\n"
    "        moved and flops the CUDA backend's kernels take for these shapes, and the\n"
    "        time they predict on --device (h200, the default: its constants fitted to the\n"
    "        H200's per-op times; h100: the first light's) -- launched one by one (pred_ms)\n"
    "        and replayed from a CUDA graph (graph_ms) -- then the step and its hashing\n"
    "        (hash.digest: tree hashes on the device; sha256 on the host). --measured\n"
    "        BENCH.csv puts a GPU run's `detrain bench --csv` times beside the prediction.\n"
    "        The step runs on the configured backend while counting (the CPU: no GPU\n"
    "        needed); on a GPU each step's counted launches and waits print beside the\n"
    "        model's, which must agree.\n"
    "  Every --csv FILE (compare, explain, bench, cost) is refused before anything runs when\n"
    "  it is or lies inside what the command reads, is a link, or exists and is not an\n"
    "  earlier output of the same kind; it is written to a temporary file and renamed.\n"
    "  policies\n"
    "        List the determinism controls and what each level sets.\n"
    "  config-reference\n"
    "        Print every config key (type, default, range, meaning) as a Markdown table.\n"
    "\n"
    "options:\n"
    "  --help, -h     this text        --version      version and build\n"
    "\n"
    "exit status: 0 success; 1 compare found a divergence, explain explained one,\n"
    "             reproduce found a replica that parts, or a replica (or a matrix entry)\n"
    "             failed; a skipped matrix entry is not a failure; 2 usage, config or\n"
    "             input error, or reproduce could not compare (what changed is named);\n"
    "             130 interrupted (traces are kept).\n"
    "\n"
    "example:\n"
    "  detrain run configs/quickstart.yaml --out /tmp/q\n"
    "  detrain compare /tmp/q/portable/replica-0 /tmp/q/portable/replica-1\n";

/* `detrain CMD --help`: CMD's own entries of the usage text (its line at two spaces and the
 * lines at eight below it; compare has two), then the options and exit status; the whole
 * text for a command it does not name. */
static void command_help(const char *cmd)
{
    const size_t n = strlen(cmd);
    bool found = false, in = false;
    for (const char *line = usage_text; *line;) {
        const char *end = strchr(line, '\n');
        const size_t len = end ? (size_t)(end - line) + 1 : strlen(line);
        if (strncmp(line, "  ", 2) == 0 && line[2] != ' ')
            in = strncmp(line + 2, cmd, n) == 0 && (line[2 + n] == ' ' || line[2 + n] == '\n');
        else if (strncmp(line, "        ", 8) != 0) in = false;
        if (in) {
            if (!found) printf("usage: detrain %s\n\n", cmd);
            found = true;
            fwrite(line, 1, len, stdout);
        }
        line += len;
    }
    if (!found) {
        fputs(usage_text, stdout);
        return;
    }
    const char *tail = strstr(usage_text, "\noptions:\n");
    const char *example = strstr(usage_text, "\nexample:\n");
    if (tail && example) fwrite(tail, 1, (size_t)(example - tail) + 1, stdout);
    printf("(detrain --help: every command)\n");
}

static int usage_error(const char *fmt, const char *arg)
{
    fprintf(stderr, "detrain: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\nrun 'detrain --help' for usage\n");
    return 2;
}

static int report(const struct app *app, enum dt_status st, const struct dt_error *err)
{
    /* messages may quote files: control bytes escaped before they reach a terminal */
    char msg[4 * sizeof err->msg];
    dt_sanitize_message(msg, sizeof msg, err->msg[0] ? err->msg : dt_status_str(st));
    if (st != DT_OK && dt_dist_rank(app->dist) == 0) fprintf(stderr, "detrain: %s\n", msg);
    else if (st != DT_OK && st != DT_ERR_CONFIG && st != DT_ERR_USAGE) /* rank 0 says those */
        fprintf(stderr, "detrain: rank %d: %s\n", dt_dist_rank(app->dist), msg);
    if (st == DT_ERR_NOMEM) {
        /* out of memory: leave without the libraries' exit handlers (OpenBLAS joins a
         * worker thread that keeps retrying its own allocation: a hang, seen under ulimit -v) */
        fflush(NULL);
        _exit(dt_status_exit_code(st));
    }
    return dt_status_exit_code(st);
}

/* Join argv into one string for run.json. */
static void join_command(char *buf, size_t size, int argc, char **argv)
{
    size_t n = 0;
    buf[0] = '\0';
    for (int i = 0; i < argc && n + 1 < size; i++) {
        int w = snprintf(buf + n, size - n, "%s%s", i ? " " : "", argv[i]);
        if (w < 0) break;
        n += (size_t)w;
    }
}

/* Shared parsing for commands taking CONFIG and --set. Returns -1 when an option is not
 * one of these (the caller handles it), else the number of argv entries consumed. */
static int take_set(int argc, char **argv, int i, const char **sets, int *n_sets)
{
    if (strcmp(argv[i], "--set") == 0) {
        if (i + 1 >= argc) return usage_error("--set needs KEY=VALUE", ""), -2;
        if (*n_sets >= MAX_SETS) return usage_error("too many --set options", ""), -2;
        sets[(*n_sets)++] = argv[i + 1];
        return 2;
    }
    if (strncmp(argv[i], "--set=", 6) == 0) {
        if (*n_sets >= MAX_SETS) return usage_error("too many --set options", ""), -2;
        sets[(*n_sets)++] = argv[i] + 6;
        return 1;
    }
    return -1;
}

static int parse_count(const char *s, long long *out)
{
    char *end;
    long long v = strtoll(s, &end, 10);
    if (*s == '\0' || *end || v < 0) return -1;
    *out = v;
    return 0;
}

/* One line for a resolved experiment: what `run` would train (run --dry-run). */
static void dry_line(const struct dt_experiment *e, const char *out)
{
    char pols[512] = "";
    size_t len = 0;
    for (int p = 0; p < e->n_policies && len + 2 < sizeof pols; p++)
        len += (size_t)snprintf(pols + len, sizeof pols - len, "%s%s", p ? ", " : "",
                                e->policies[p].name);
    char what[200];
    const double mib = dt_run_memory_bytes(e, what, sizeof what) / (1024.0 * 1024.0);
    printf("  %s: model %s, %s, %lld steps, batch %lld, policies [%s], %d vary setting(s) x %d "
           "replica(s), about %.0f MiB of memory -> %s\n",
           e->name, dt_model_kind_names[e->model.kind],
           e->backend.device == DT_DEVICE_CUDA ? "cuda" : "cpu", (long long)e->train.steps,
           (long long)e->train.batch, pols, e->n_vary, e->replicas, mib, out);
}

/* run --dry-run: the config and its --set overrides loaded and checked as `run` would
 * (every entry of a matrix resolved), then every check the run makes before its first write
 * (dt_run_options.dry_run: memory, backend, data, model, folder; with --resume the folder's
 * config, data and checkpoints), one line per experiment; nothing is trained or written.
 * Exit 0, or the run's refusal (2 with the loader's file:line:column message, say). */
static int run_dry(const struct app *app, const struct dt_experiment *exp, const char *config,
                   const char *const *sets, int n_sets, const char *out, bool overwrite,
                   bool resume)
{
    struct dt_run_options opt = {.command = "detrain run --dry-run",
                                 .quiet = true,
                                 .overwrite = overwrite,
                                 .dist = app->dist,
                                 .hooks = &app->hooks,
                                 .dry_run = true};
    struct dt_error err = {0};
    /* every check first: a refused config prints nothing on stdout (no "parses") */
    const int n = exp->n_matrix ? exp->n_matrix : 1;
    struct dt_experiment *e = dt_xcalloc((size_t)n, sizeof *e);
    char(*dirs)[1400] = dt_xcalloc((size_t)n, sizeof *dirs);
    enum dt_status st = DT_OK;
    for (int k = 0; k < n && st == DT_OK; k++) {
        if (exp->n_matrix == 0) {
            e[k] = *exp;
            snprintf(dirs[k], sizeof dirs[k], "%s", out);
        } else {
            st = dt_config_load_entry(&e[k], config, k, sets, n_sets, &err);
            snprintf(dirs[k], sizeof dirs[k], "%s/%s", out, exp->matrix[k]);
        }
        opt.out_dir = dirs[k];
        if (st == DT_OK)
            st = resume && exp->n_matrix == 0 ? dt_train_resume(&e[k], &opt, &err)
                                              : dt_train_experiment(&e[k], &opt, &err);
    }
    if (st == DT_OK) {
        printf("dry run: %s parses%s (nothing trained or written)\n", config,
               exp->n_matrix ? " as a matrix" : "");
        for (int k = 0; k < n; k++) dry_line(&e[k], dirs[k]);
        printf("every check of the run passed\n");
    }
    free(e);
    free(dirs);
    return st == DT_OK ? 0 : report(app, st, &err);
}

static int cmd_run(const struct app *app, int argc, char **argv)
{
    const char *config = NULL, *out = NULL, *only = NULL, *resume = NULL;
    const char *sets[MAX_SETS];
    int n_sets = 0;
    bool quiet = false, overwrite = false, dry = false;
    for (int i = 2; i < argc;) {
        int used = take_set(argc, argv, i, sets, &n_sets);
        if (used == -2) return 2;
        if (used > 0) {
            i += used;
        } else if (strcmp(argv[i], "--only") == 0) {
            if (i + 1 >= argc) return usage_error("--only needs NAME,... (matrix entries)", "");
            only = argv[i + 1];
            i += 2;
        } else if (strncmp(argv[i], "--only=", 7) == 0) {
            only = argv[i++] + 7;
        } else if (strcmp(argv[i], "--out") == 0) {
            if (i + 1 >= argc) return usage_error("--out needs a folder", "");
            out = argv[i + 1];
            i += 2;
        } else if (strncmp(argv[i], "--out=", 6) == 0) {
            out = argv[i++] + 6;
        } else if (strcmp(argv[i], "--resume") == 0) {
            if (i + 1 >= argc) return usage_error("--resume needs the folder of the run", "");
            resume = argv[i + 1];
            i += 2;
        } else if (strncmp(argv[i], "--resume=", 9) == 0) {
            resume = argv[i++] + 9;
        } else if (strcmp(argv[i], "--quiet") == 0) {
            quiet = true;
            i++;
        } else if (strcmp(argv[i], "--overwrite") == 0) {
            overwrite = true;
            i++;
        } else if (strcmp(argv[i], "--dry-run") == 0) {
            dry = true;
            i++;
        } else if (argv[i][0] == '-' && argv[i][1] != '\0') {
            return usage_error("run: unknown option '%s'", argv[i]);
        } else if (!config) {
            config = argv[i++];
        } else {
            return usage_error("run: unexpected argument '%s' (one CONFIG only)", argv[i]);
        }
    }
    if (!config)
        return usage_error("run: missing CONFIG (a YAML file, e.g. configs/quickstart.yaml)", "");
    if (resume && out && !dt_same_path(resume, out))
        return usage_error("run: --out must be the --resume folder '%s' (a resumed run goes on "
                           "in the folder of the run it resumes)",
                           resume);
    if (resume && overwrite)
        return usage_error("run: --resume goes on with the result in '%s' and --overwrite "
                           "removes it: give one of them",
                           resume);
    if (resume) out = resume;
    struct dt_experiment *exp = dt_xcalloc(1, sizeof *exp);
    struct dt_error err = {0};
    enum dt_status st = dt_config_load_matrix(exp, config, sets, n_sets, &err);
    if (st != DT_OK) {
        free(exp);
        return report(app, st, &err);
    }
    if (resume && exp->n_matrix > 0) {
        free(exp);
        return usage_error("run: --resume takes a single experiment and '%s' is a matrix "
                           "config; resume an entry as one: detrain run DIR/<entry>/config.json "
                           "--resume DIR/<entry>",
                           config);
    }
    if (only && exp->n_matrix == 0) {
        free(exp);
        return usage_error("run: --only picks matrix entries, and '%s' has no key 'matrix'",
                           config);
    }
    char out_buf[1200];
    if (!out) {
        snprintf(out_buf, sizeof out_buf, "results/%s", exp->name);
        out = out_buf;
    }
    char command[4096];
    join_command(command, sizeof command, argc, argv);
    if (dry) {
        int rc = run_dry(app, exp, config, sets, n_sets, out, overwrite, resume != NULL);
        free(exp);
        return rc;
    }
    if (exp->n_matrix > 0 && dt_dist_size(app->dist) > 1) {
        free(exp);
        return usage_error("run: a matrix config runs on one process; run its entries one by "
                           "one under mpirun (detrain run DIR/<entry>/config.json)",
                           "");
    }
    if (dt_dist_rank(app->dist) > 0) quiet = true; /* rank 0 speaks for every rank */
    if (exp->n_matrix > 0) {
        const struct dt_matrix_options mopt = {.config = config,
                                               .sets = sets,
                                               .n_sets = n_sets,
                                               .only = only,
                                               .out_dir = out,
                                               .command = command,
                                               .quiet = quiet,
                                               .overwrite = overwrite,
                                               .dist = app->dist,
                                               .hooks = &app->hooks};
        st = dt_matrix_run(exp, &mopt, &err);
    } else {
        const struct dt_run_options opt = {.out_dir = out,
                                           .command = command,
                                           .quiet = quiet,
                                           .overwrite = overwrite,
                                           .dist = app->dist,
                                           .hooks = &app->hooks,
                                           .report = run_report};
        st = resume ? dt_train_resume(exp, &opt, &err) : dt_train_experiment(exp, &opt, &err);
    }
    free(exp);
    return report(app, st, &err);
}

static int cmd_report(const struct app *app, int argc, char **argv)
{
    const char *dir = NULL;
    struct dt_report_options opt = {.print_summary = true, .gnuplot = NULL, .quiet = false};
    bool tables_only = false;
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "--no-plots") == 0) opt.gnuplot = "none";
        else if (strcmp(argv[i], "--tables-only") == 0) tables_only = true;
        else if (strcmp(argv[i], "--quiet") == 0) opt.quiet = true;
        else if (argv[i][0] == '-' && argv[i][1] != '\0')
            return usage_error("report: unknown option '%s'", argv[i]);
        else if (!dir) dir = argv[i];
        else return usage_error("report: unexpected argument '%s' (one DIR only)", argv[i]);
    }
    if (!dir) return usage_error("report: missing DIR (the folder `detrain run` wrote)", "");
    if (tables_only && !dt_matrix_is_folder(dir))
        return usage_error("report: --tables-only takes a matrix folder (one with matrix.json); "
                           "'%s' is not one",
                           dir);
    struct dt_error err = {0};
    /* report.md and plots/ are written into the folder: not while a run writes there */
    struct dt_folder_lock lock = {.fd = -1};
    enum dt_status st = DT_OK;
    struct stat dir_st;
    if (lstat(dir, &dir_st) == 0 && S_ISDIR(dir_st.st_mode))
        st = dt_folder_lock_take(&lock, dir, "detrain report", &err);
    if (st == DT_OK) {
        if (dt_matrix_is_folder(dir)) st = dt_matrix_report(dir, &opt, !tables_only, &err);
        else if (dt_ranks_is_folder(dir)) st = dt_ranks_report(dir, opt.quiet, &err);
        else st = dt_report_build(dir, &opt, &err);
        dt_folder_lock_release(&lock);
    }
    return report(app, st, &err);
}

/* The results a command reads, held for reading while it runs (outdir.h): one that a run
 * is still writing is refused at once, not read half-written. */
static enum dt_status hold_for_reading(struct dt_folder_lock *locks, const char *const *paths,
                                       int n, struct dt_error *err)
{
    for (int i = 0; i < n; i++) {
        enum dt_status st = dt_folder_read_lock_take(&locks[i], paths[i], err);
        if (st != DT_OK) {
            while (i-- > 0) dt_folder_read_lock_release(&locks[i]);
            return st;
        }
    }
    return DT_OK;
}

static void release_reading(struct dt_folder_lock *locks, int n)
{
    for (int i = 0; i < n; i++) dt_folder_read_lock_release(&locks[i]);
}

/* compare --table EXPERIMENT EXPERIMENT... [--label NAME]... [--csv FILE] */
static int cmd_compare_table(const struct app *app, int argc, char **argv)
{
    enum { MAX_TABLE = 64 };
    const char *dirs[MAX_TABLE], *labels[MAX_TABLE];
    struct dt_table_options opt = {
        .experiments = dirs, .n_experiments = 0, .labels = labels, .n_labels = 0, .csv_path = NULL};
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "--table") == 0) continue;
        if (strcmp(argv[i], "--label") == 0 || strcmp(argv[i], "--csv") == 0) {
            if (i + 1 >= argc) return usage_error("compare: %s needs a value", argv[i]);
            if (argv[i][2] == 'c') opt.csv_path = argv[++i];
            else if (opt.n_labels == MAX_TABLE)
                return usage_error("compare: too many %s options", "--label");
            else labels[opt.n_labels++] = argv[++i];
        } else if (argv[i][0] == '-' && argv[i][1] != '\0') {
            return usage_error("compare: unknown option '%s'", argv[i]);
        } else if (opt.n_experiments == MAX_TABLE) {
            return usage_error("compare --table: more than 64 experiments at '%s'", argv[i]);
        } else {
            dirs[opt.n_experiments++] = argv[i];
        }
    }
    if (opt.n_experiments < 2)
        return usage_error("compare --table: expected a reference experiment folder and at "
                           "least one more: detrain compare --table REF OTHER...%s",
                           "");
    if (opt.n_labels > opt.n_experiments)
        return usage_error("compare --table: more --label options than experiments%s", "");
    bool identical = false;
    struct dt_error err = {0};
    if (opt.csv_path && dt_out_file_check(opt.csv_path, dirs, opt.n_experiments, "replica,",
                                          "comparison table", &err) != DT_OK)
        return report(app, DT_ERR_USAGE, &err);
    struct dt_folder_lock locks[MAX_TABLE];
    enum dt_status st = hold_for_reading(locks, dirs, opt.n_experiments, &err);
    if (st != DT_OK) return report(app, st, &err);
    st = dt_compare_table(&opt, stdout, &identical, &err);
    release_reading(locks, opt.n_experiments);
    if (st != DT_OK) return report(app, st, &err);
    return identical ? 0 : 1;
}

static int cmd_compare(const struct app *app, int argc, char **argv)
{
    for (int i = 2; i < argc; i++)
        if (strcmp(argv[i], "--table") == 0) return cmd_compare_table(app, argc, argv);
    if (argc != 4)
        return usage_error("compare: expected two traces, replica folders or experiment "
                           "folders: detrain compare A B",
                           "");
    bool diverged = false;
    struct dt_error err = {0};
    struct dt_folder_lock locks[2];
    const char *reads[2] = {argv[2], argv[3]};
    enum dt_status st = hold_for_reading(locks, reads, 2, &err);
    if (st != DT_OK) return report(app, st, &err);
    st = dt_compare_paths(argv[2], argv[3], stdout, &diverged, &err);
    release_reading(locks, 2);
    if (st != DT_OK) return report(app, st, &err);
    return diverged ? 1 : 0;
}

/* explain A B [--executions N] [--csv FILE] [--quiet] */
static int cmd_explain(const struct app *app, int argc, char **argv)
{
    struct dt_explain_options opt = {.executions = 5, .hooks = &app->hooks};
    for (int i = 2; i < argc; i++) {
        long long v;
        if (strcmp(argv[i], "--executions") == 0 && i + 1 < argc) {
            if (parse_count(argv[i + 1], &v) != 0 || v < 2 || v > 64)
                return usage_error("explain: --executions takes 2 to 64, not '%s'", argv[i + 1]);
            opt.executions = (int)v;
            i++;
        } else if (strcmp(argv[i], "--csv") == 0 && i + 1 < argc) {
            opt.csv = argv[++i];
        } else if (strcmp(argv[i], "--step") == 0 && i + 1 < argc) {
            if (parse_count(argv[i + 1], &v) != 0 || v < 1)
                return usage_error("explain: --step takes a step >= 1, not '%s'", argv[i + 1]);
            opt.step = v;
            i++;
        } else if (strcmp(argv[i], "--quiet") == 0) {
            opt.quiet = true;
        } else if (argv[i][0] == '-') {
            return usage_error("explain: unknown or incomplete option '%s'", argv[i]);
        } else if (!opt.a) {
            opt.a = argv[i];
        } else if (!opt.b) {
            opt.b = argv[i];
        } else {
            return usage_error("explain: unexpected argument '%s'", argv[i]);
        }
    }
    if (!opt.b)
        return usage_error("explain: expected two replica folders: detrain explain A B%s", "");
    struct dt_explain_result res;
    struct dt_error err = {0};
    const char *reads[2] = {opt.a, opt.b};
    if (opt.csv &&
        dt_out_file_check(opt.csv, reads, 2, DT_EXPLAIN_CSV_HEADER, "op table", &err) != DT_OK)
        return report(app, DT_ERR_USAGE, &err);
    struct dt_folder_lock locks[2];
    enum dt_status st = hold_for_reading(locks, reads, 2, &err);
    if (st == DT_OK) {
        st = dt_explain(&opt, stdout, &res, &err);
        release_reading(locks, 2);
    }
    if (st != DT_OK) {
        (void)report(app, st, &err);
        return 2;
    }
    return res.explained ? 1 : 0;
}

static int cmd_bench(const struct app *app, int argc, char **argv)
{
    const char *config = NULL;
    const char *sets[MAX_SETS];
    int n_sets = 0;
    struct dt_bench_options opt = {.steps = 100,
                                   .warmup = 10,
                                   .csv_path = NULL,
                                   .baseline_first = false,
                                   .dist = app->dist,
                                   .hooks = &app->hooks};
    for (int i = 2; i < argc;) {
        int used = take_set(argc, argv, i, sets, &n_sets);
        if (used == -2) return 2;
        long long v;
        if (used > 0) {
            i += used;
        } else if ((strcmp(argv[i], "--steps") == 0 || strcmp(argv[i], "--warmup") == 0) &&
                   i + 1 < argc) {
            if (parse_count(argv[i + 1], &v) != 0 || (v < 1 && argv[i][2] == 's'))
                return usage_error("bench: bad count '%s'", argv[i + 1]);
            if (argv[i][2] == 's') opt.steps = v;
            else opt.warmup = v;
            i += 2;
        } else if (strcmp(argv[i], "--csv") == 0 && i + 1 < argc) {
            opt.csv_path = argv[i + 1];
            i += 2;
        } else if (strcmp(argv[i], "--baseline") == 0 && i + 1 < argc) {
            if (strcmp(argv[i + 1], "first") == 0) opt.baseline_first = true;
            else if (strcmp(argv[i + 1], "fast") != 0)
                return usage_error("bench: --baseline takes fast or first, not '%s'", argv[i + 1]);
            i += 2;
        } else if (argv[i][0] == '-') {
            return usage_error("bench: unknown or incomplete option '%s'", argv[i]);
        } else if (!config) {
            config = argv[i++];
        } else {
            return usage_error("bench: unexpected argument '%s'", argv[i]);
        }
    }
    if (!config) return usage_error("bench: missing CONFIG", "");
    struct dt_error err = {0};
    if (opt.csv_path && dt_out_file_check(opt.csv_path, &config, 1, DT_BENCH_CSV_HEADER,
                                          "bench CSV", &err) != DT_OK)
        return report(app, DT_ERR_USAGE, &err);
    if (dt_dist_rank(app->dist) > 0) { /* rank 0 speaks for every rank (each measures alike) */
        opt.csv_path = NULL;
        if (!freopen("/dev/null", "w", stdout))
            return report(app,
                          dt_error_set(&err, DT_ERR_IO, "bench: cannot quiet rank %d's output",
                                       dt_dist_rank(app->dist)),
                          &err);
    }
    struct dt_experiment *exp = dt_xcalloc(1, sizeof *exp);
    enum dt_status st = dt_config_load(exp, config, sets, n_sets, &err);
    if (st == DT_OK) st = dt_bench_run(exp, &opt, &err);
    free(exp);
    return report(app, st, &err);
}

/* cost CONFIG [--device h200|h100] [--measured BENCH.csv] [--csv FILE] [--set KEY=VALUE]... */
static int cmd_cost(const struct app *app, int argc, char **argv)
{
    const char *config = NULL;
    const char *sets[MAX_SETS];
    int n_sets = 0;
    struct dt_cost_options opt = {0};
    for (int i = 2; i < argc;) {
        int used = take_set(argc, argv, i, sets, &n_sets);
        if (used == -2) return 2;
        if (used > 0) {
            i += used;
        } else if (strcmp(argv[i], "--measured") == 0 && i + 1 < argc) {
            opt.measured_csv = argv[i + 1];
            i += 2;
        } else if (strcmp(argv[i], "--device") == 0 && i + 1 < argc) {
            opt.device = dt_cost_device_named(argv[i + 1]);
            if (!opt.device)
                return usage_error("cost: --device '%s': h200 or h100 (the calibrated devices)",
                                   argv[i + 1]);
            i += 2;
        } else if (strcmp(argv[i], "--csv") == 0 && i + 1 < argc) {
            opt.csv_path = argv[i + 1];
            i += 2;
        } else if (argv[i][0] == '-') {
            return usage_error("cost: unknown or incomplete option '%s'", argv[i]);
        } else if (!config) {
            config = argv[i++];
        } else {
            return usage_error("cost: unexpected argument '%s'", argv[i]);
        }
    }
    if (!config) return usage_error("cost: missing CONFIG", "");
    struct dt_error err = {0};
    const char *reads[2] = {config, opt.measured_csv};
    if (opt.csv_path && dt_out_file_check(opt.csv_path, reads, opt.measured_csv ? 2 : 1,
                                          DT_COST_CSV_HEADER, "cost CSV", &err) != DT_OK)
        return report(app, DT_ERR_USAGE, &err);
    struct dt_experiment *exp = dt_xcalloc(1, sizeof *exp);
    enum dt_status st = dt_config_load_modelled(exp, config, sets, n_sets, &err); /* tf32 too */
    if (st == DT_OK) st = dt_cost_report(exp, &opt, &err);
    free(exp);
    return report(app, st, &err);
}

/* export CHECKPOINT|REPLICA_DIR [--step K] --safetensors FILE */
static int cmd_export(const struct app *app, int argc, char **argv)
{
    const char *src = NULL, *out = NULL;
    long long step = -1;
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "--safetensors") == 0 && i + 1 < argc) {
            if (out) return usage_error("export: --safetensors given twice (one FILE%s)", "");
            out = argv[++i];
        } else if (strcmp(argv[i], "--step") == 0 && i + 1 < argc) {
            if (step >= 0) return usage_error("export: --step given twice (one step%s)", "");
            if (parse_count(argv[i + 1], &step) != 0)
                return usage_error("export: --step takes a step number, not '%s'", argv[i + 1]);
            if (step == LLONG_MAX) /* strtoll's value for any larger number: not clamped */
                return usage_error("export: --step %s is out of range", argv[i + 1]);
            i++;
        } else if (argv[i][0] == '-' && argv[i][1] != '\0') {
            return usage_error("export: unknown or incomplete option '%s'", argv[i]);
        } else if (!src) {
            src = argv[i];
        } else {
            return usage_error("export: unexpected argument '%s'", argv[i]);
        }
    }
    if (!src || !out)
        return usage_error("export: expected CHECKPOINT|REPLICA_DIR --safetensors FILE%s", "");
    struct dt_error err = {0};
    struct dt_folder_lock lock;
    enum dt_status st = hold_for_reading(&lock, &src, 1, &err);
    if (st == DT_OK) {
        st = dt_export_safetensors(src, step, out, &err);
        release_reading(&lock, 1);
    }
    if (st == DT_OK) fprintf(stderr, "detrain: wrote %s\n", out);
    return report(app, st, &err);
}

/* batches CONFIG [--steps N] [--cell C] [--replica R] [--set KEY=VALUE]... */
static int cmd_batches(const struct app *app, int argc, char **argv)
{
    const char *config = NULL;
    const char *sets[MAX_SETS];
    int n_sets = 0;
    long long steps = -1, cell = 0, replica = 0;
    for (int i = 2; i < argc;) {
        int used = take_set(argc, argv, i, sets, &n_sets);
        if (used == -2) return 2;
        if (used > 0) {
            i += used;
        } else if ((strcmp(argv[i], "--steps") == 0 || strcmp(argv[i], "--cell") == 0 ||
                    strcmp(argv[i], "--replica") == 0) &&
                   i + 1 < argc) {
            long long v;
            if (parse_count(argv[i + 1], &v) != 0)
                return usage_error("batches: bad count '%s'", argv[i + 1]);
            if (argv[i][2] == 's') steps = v;
            else if (argv[i][2] == 'c') cell = v;
            else replica = v;
            i += 2;
        } else if (argv[i][0] == '-') {
            return usage_error("batches: unknown or incomplete option '%s'", argv[i]);
        } else if (!config) {
            config = argv[i++];
        } else {
            return usage_error("batches: unexpected argument '%s'", argv[i]);
        }
    }
    if (!config) return usage_error("batches: missing CONFIG", "");
    struct dt_error err = {0};
    struct dt_experiment *exp = dt_xcalloc(1, sizeof *exp);
    enum dt_status st = dt_config_load(exp, config, sets, n_sets, &err);
    const int cells = exp->n_vary * exp->n_policies;
    if (st == DT_OK && (cell >= cells || replica >= exp->replicas))
        st = dt_error_set(&err, DT_ERR_USAGE,
                          "batches: %s has %d cell(s) and %d replica(s) each; --cell %lld "
                          "--replica %lld is not one",
                          config, cells, exp->replicas, cell, replica);
    struct dt_dataset ds;
    memset(&ds, 0, sizeof ds);
    if (st == DT_OK) st = dt_experiment_load_dataset(&ds, exp, &err);
    if (st == DT_OK) {
        uint32_t member = 0;
        const struct dt_checkpoint_info info =
            dt_replica_streams(exp, (int)cell, (int)replica, &member);
        const int64_t n = steps >= 0 ? steps : exp->train.steps, B = exp->train.batch;
        int64_t *idx = dt_xmalloc((size_t)B * sizeof *idx);
        int64_t *perm = dt_xmalloc((size_t)ds.train.n * sizeof *perm), epoch = -1;
        printf("step,row,index\n");
        for (int64_t s = 0; s < n; s++) {
            dt_batch_indices(idx, ds.train.n, s, B, exp->train.seed, info.order_stream, perm,
                             &epoch);
            for (int64_t b = 0; b < B; b++)
                printf("%lld,%lld,%lld\n", (long long)(s + 1), (long long)b, (long long)idx[b]);
        }
        free(idx);
        free(perm);
    }
    dt_dataset_free(&ds);
    free(exp);
    return report(app, st, &err);
}

static int run_command(const struct app *app, int argc, char **argv);

/* detrain reproduce DIR... (harness/analyze/reproduce.h). */
static int cmd_reproduce(const struct app *app, int argc, char **argv)
{
    const char *dirs[16], *sets[MAX_SETS];
    struct dt_reproduce_options o = {.dirs = dirs, .sets = sets};
    for (int i = 2; i < argc;) {
        int used = take_set(argc, argv, i, sets, &o.n_sets);
        if (used == -2) return 2;
        if (used > 0) {
            i += used;
        } else if (strcmp(argv[i], "--cells") == 0 || strcmp(argv[i], "--out") == 0) {
            if (i + 1 >= argc) return usage_error("reproduce: %s needs a value", argv[i]);
            if (strcmp(argv[i], "--cells") == 0) o.cells = argv[i + 1];
            else o.out = argv[i + 1];
            i += 2;
        } else if (strcmp(argv[i], "--quiet") == 0) {
            o.quiet = true;
            i++;
        } else if (argv[i][0] == '-' && argv[i][1] != '\0') {
            return usage_error("reproduce: unknown option '%s'", argv[i]);
        } else if (o.n_dirs >= 16) {
            return usage_error("reproduce: at most 16 results at once ('%s')", argv[i]);
        } else {
            dirs[o.n_dirs++] = argv[i++];
        }
    }
    if (o.n_dirs == 0)
        return usage_error("reproduce: missing DIR (a result folder, e.g. "
                           "results/cpu/crossdev-t2)",
                           "");
    struct dt_error err = {0};
    int verdict = 0;
    enum dt_status st = dt_reproduce(&o, stdout, &verdict, &err);
    if (st != DT_OK) return report(app, st, &err);
    return verdict;
}

/* The test-only behaviours (harness/setup/test_hooks.h): the one place that reads them. */
static void test_hooks_from_env(struct dt_test_hooks *h)
{
    memset(h, 0, sizeof *h);
    h->poison_rank = -1;
    const char *v = getenv("DETRAIN_TEST_FAIL_ALLOC_ABOVE");
    if (v && *v) {
        h->fail_alloc = true;
        h->fail_alloc_above = (size_t)strtoull(v, NULL, 10);
    }
    v = getenv("DETRAIN_TEST_KILL_AFTER_STEP");
    if (v && *v) h->kill_after_step = strtoll(v, NULL, 10);
    v = getenv("DETRAIN_TEST_SIGNAL_AFTER_STEP");
    if (v && *v) {
        char *end;
        h->kill_after_step = strtoll(v, &end, 10);
        h->kill_signal = *end == ':' ? atoi(end + 1) : SIGINT;
    }
    h->poison = getenv("DETRAIN_TEST_POISON");
    v = getenv("DETRAIN_TEST_POISON_RANK");
    if (v && *v) h->poison_rank = atoi(v);
    h->explain_force = getenv("DETRAIN_TEST_EXPLAIN_FORCE");
    v = getenv("DETRAIN_TEST_EXPLAIN_REPLAY_MISS");
    if (v && *v) h->explain_replay_miss = atoi(v);
    v = getenv("DETRAIN_TEST_FORCED_ORDER");
    if (v && *v) h->forced_order = strtoull(v, NULL, 10);
    h->slow_base_op = -1;
    v = getenv("DETRAIN_TEST_SLOW_BASE_OP");
    for (int op = 0; v && op < DT_OP_COUNT; op++) {
        const size_t len = strlen(dt_op_name((enum dt_op)op));
        if (strncmp(v, dt_op_name((enum dt_op)op), len) == 0 && (!v[len] || v[len] == ':')) {
            h->slow_base_op = op;
            h->slow_base_seconds = 1e-3 * (v[len] == ':' ? atof(v + len + 1) : 2.0);
        }
    }
}

/* The process ends here, without the libraries' exit handlers: everything of detrain's is
 * written and closed by now (MPI finalized), and stdio is flushed. OpenBLAS starts a worker
 * thread per core when it loads, which allocates a buffer of some 128 MiB; under an
 * address-space limit (ulimit -v, about 1.1 GB here) that allocation fails and the worker
 * retries it forever, and OpenBLAS's exit handler joins it: even `detrain --version` never
 * exited. (Its threads cannot be kept from starting: they start in its initialiser, before
 * main, and glibc resets the environment after the executable's own pre-initialisers.)
 * Under the sanitizers the leak check, an exit handler itself, runs first. */
#if defined(__SANITIZE_ADDRESS__)
void __lsan_do_leak_check(void);
#endif
static _Noreturn void leave(int rc)
{
#if defined(__SANITIZE_ADDRESS__)
    __lsan_do_leak_check();
#endif
    fflush(NULL);
    _exit(rc);
}

/* Under an MPI launcher every process runs this; harness/run/dist.h. */
int main(int argc, char **argv)
{
    struct dt_error err = {0};
    struct app app;
    /* A write past a file-size limit (ulimit -f) fails with EFBIG, as a full disk fails
     * with ENOSPC, and is said and cleaned up as one; by default the kernel would kill the
     * process there (SIGXFSZ: no message, a temporary file left). */
    signal(SIGXFSZ, SIG_IGN);
    test_hooks_from_env(&app.hooks);
    enum dt_status st = dt_dist_init(&argc, &argv, &app.dist, &err);
    if (st != DT_OK) {
        fprintf(stderr, "detrain: %s\n", err.msg);
        dt_dist_finalize(app.dist);
        return dt_status_exit_code(st);
    }
    int rc = run_command(&app, argc, argv);
    dt_dist_finalize(app.dist);
    leave(rc);
}

static int run_command(const struct app *app, int argc, char **argv)
{
    if (argc < 2) {
        fputs(usage_text, stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
        fputs(usage_text, stdout);
        return 0;
    }
    if (strcmp(cmd, "--version") == 0) {
        printf("detrain %s (git %s, %s, %s)\n", DT_VERSION, DT_GIT_REV, DT_BUILD_TYPE,
               DT_C_COMPILER);
        return 0;
    }
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            command_help(cmd);
            return 0;
        }
    }
    for (int i = 2; i < argc; i++) /* an unset shell variable, say: named, not guessed at */
        if (argv[i][0] == '\0') {
            char msg[600], shown[300];
            snprintf(msg, sizeof msg,
                     "%.40s: argument %d is empty (after '%s'): give a file, folder or value "
                     "there",
                     cmd, i - 1, dt_escape_str(shown, sizeof shown, argv[i - 1]));
            return usage_error("%s", msg);
        }
    if (strcmp(cmd, "run") == 0) return cmd_run(app, argc, argv);
    if (strcmp(cmd, "report") == 0) return cmd_report(app, argc, argv);
    if (strcmp(cmd, "compare") == 0) return cmd_compare(app, argc, argv);
    if (strcmp(cmd, "explain") == 0) return cmd_explain(app, argc, argv);
    if (strcmp(cmd, "bench") == 0) return cmd_bench(app, argc, argv);
    if (strcmp(cmd, "cost") == 0) return cmd_cost(app, argc, argv);
    if (strcmp(cmd, "export") == 0) return cmd_export(app, argc, argv);
    if (strcmp(cmd, "reproduce") == 0) return cmd_reproduce(app, argc, argv);
    if (strcmp(cmd, "batches") == 0) return cmd_batches(app, argc, argv);
    if (strcmp(cmd, "policies") == 0) {
        dt_policy_print_table(stdout);
        printf("\nreduction, atomics and math act on the ops of both backends; reduction also\n"
               "decides how ranks combine gradients under mpirun (exact: the same bits for any\n"
               "rank count); rng acts on the Bayesian model (model.kind: bnn_mlp); conv_algo\n"
               "picks the convolutions: cuDNN on the GPU, oneDNN on the CPU (autotune and\n"
               "deterministic, math fast, op by op where no other control orders the op),\n"
               "or detrain's own kernels (own).\n");
        return 0;
    }
    if (strcmp(cmd, "config-reference") == 0) {
        dt_config_write_reference(stdout);
        return 0;
    }
    return usage_error("unknown command '%s'", cmd);
}
