/* A result folder is the user's record (docs/outputs.md; harness/record/outdir.h): a run refused
 * for any reason changes nothing on disk, one folder holds one experiment, one writer at a
 * time, and no output is written through a link. Every case fingerprints the folder (each
 * entry's name, type, size, link target, and every file's SHA-256) before and after, and
 * asserts exit 2 with a message naming the cause. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "harness/run/dist.h"
#include "run_helper.h"

#define EXE DT_DETRAIN_EXE
#define TINY DT_TEST_DATA_DIR "/tiny.yaml"
#define TMP DT_TEST_TMP_DIR "/folders."
#define RUN "DETRAIN_GNUPLOT=none '" EXE "' run '" TINY "' --quiet"
#define RUN_NP(np) "DETRAIN_GNUPLOT=none " MPIRUN " -np " np " '" EXE "' run '" TINY "' --quiet"
#define MPIRUN DT_MPIRUN

static char out[1 << 16];

static bool have_data(void) { return dt_path_exists("/usr/share/datasets/fashion-mnist"); }

/* Every entry under dir: name, type, size, link target; then every regular file's digest.
 * The lock file is left out: a run killed while it held the lock leaves it behind (unlocked),
 * and the next run, refused or not, takes it over and removes it. */
static char *fingerprint(const char *dir)
{
    static char buf[1 << 16];
    int rc =
        dt_run_capture(buf, sizeof buf,
                       "cd '%s' && find . ! -name .detrain.lock -printf '%%P %%y %%s %%l\\n' | "
                       "LC_ALL=C sort && find . -type f ! -name .detrain.lock -print0 | "
                       "LC_ALL=C sort -z | xargs -0 -r sha256sum",
                       dir);
    DT_ASSERT(rc == 0);
    return strdup(buf);
}

static bool unchanged(const char *dir, const char *before)
{
    char *now = fingerprint(dir);
    bool same = strcmp(now, before) == 0;
    if (!same) fprintf(stderr, "folder %s changed:\n--- before\n%s--- after\n%s", dir, before, now);
    free(now);
    return same;
}

/* The command (printf-style) is refused -- exit 2 -- and leaves dir byte for byte as
 * `before` says; its output stays in `out` for the message checks. */
#define CHECK_REFUSED(dir, before, ...)                                                            \
    do {                                                                                           \
        CHECK_INT_EQ(dt_run_capture(out, sizeof out, __VA_ARGS__), 2);                             \
        CHECK(unchanged((dir), (before)));                                                         \
    } while (0)

/* A finished result of the tiny config in dir (any earlier content removed). */
static void finished_result(const char *dir, const char *extra)
{
    CHECK_INT_EQ(dt_run_capture(out, sizeof out, "rm -rf '%s'", dir), 0);
    int rc = dt_run_capture(out, sizeof out, RUN " --out '%s' %s", dir, extra);
    if (rc != 0) fprintf(stderr, "%s\n", out);
    DT_ASSERT(rc == 0);
}

/* An interrupted result: killed (SIGKILL) after 40 training steps, replica-0 finished (30
 * steps), replica-1 with its checkpoint at step 10. */
static void interrupted_result(const char *dir)
{
    CHECK_INT_EQ(dt_run_capture(out, sizeof out, "rm -rf '%s'", dir), 0);
    dt_run_capture(out, sizeof out,
                   "DETRAIN_TEST_KILL_AFTER_STEP=40 " RUN " --out '%s' "
                   "--set train.checkpoint_every=5",
                   dir);
    char path[1200];
    snprintf(path, sizeof path, "%s/portable/replica-1/checkpoint.bin", dir);
    DT_ASSERT(dt_path_exists(path));
}

#define RESUME RUN " --set train.checkpoint_every=5 --resume"

/* A value refused by the rules of the run (not of the config syntax), into a finished
 * folder: refused before anything is opened for writing; the result is still resumable. */
DT_TEST(refused_value_keeps_result)
{
    if (!have_data()) DT_SKIP("no Fashion-MNIST installed");
    const char *dir = TMP "value";
    finished_result(dir, "");
    char *before = fingerprint(dir);
    CHECK_REFUSED(dir, before, RUN " --out '%s' --set train.shards=200", dir);
    CHECK_CONTAINS(out, "train.shards is 200");
    CHECK_INT_EQ(dt_run_capture(out, sizeof out, RUN " --resume '%s'", dir), 0);
    free(before);
}

/* The same under mpirun: more ranks than shards, refused by every rank before rank 0
 * writes anything. */
DT_TEST(refused_ranks_keep_result)
{
    if (!dt_dist_have_mpi()) DT_SKIP("detrain was built without MPI");
    if (!have_data()) DT_SKIP("no Fashion-MNIST installed");
    const char *dir = TMP "ranks";
    finished_result(dir, "");
    char *before = fingerprint(dir);
    CHECK_REFUSED(dir, before, RUN_NP("5") " --out '%s'", dir);
    CHECK_CONTAINS(out, "5 ranks but train.shards is 4");
    free(before);
}

/* Another config into a result's folder: refused naming the differing key. */
DT_TEST(other_config_refused)
{
    if (!have_data()) DT_SKIP("no Fashion-MNIST installed");
    const char *dir = TMP "other";
    finished_result(dir, "");
    char *before = fingerprint(dir);
    CHECK_REFUSED(dir, before, RUN " --out '%s' --set train.seed=6", dir);
    CHECK_CONTAINS(out, "holds another experiment");
    CHECK_CONTAINS(out, "train.seed");
    CHECK_CONTAINS(out, "--overwrite");
    free(before);
}

/* The same config again: explicit (--resume or --overwrite). --overwrite replaces the whole
 * result: no replica of the old experiment is left beside the new ones. */
DT_TEST(rerun_is_explicit)
{
    if (!have_data()) DT_SKIP("no Fashion-MNIST installed");
    const char *dir = TMP "rerun";
    finished_result(dir, "");
    char *before = fingerprint(dir);
    CHECK_REFUSED(dir, before, RUN " --out '%s'", dir);
    CHECK_CONTAINS(out, "holds a run of this config");
    CHECK_CONTAINS(out, "--resume");
    CHECK_REFUSED(dir, before, RUN " --out '%s' --overwrite --resume '%s'", dir, dir);
    CHECK_INT_EQ(
        dt_run_capture(out, sizeof out, RUN " --out '%s' --overwrite --set replicas=1", dir), 0);
    char path[1200];
    snprintf(path, sizeof path, "%s/portable/replica-1", dir);
    CHECK(!dt_path_exists(path));
    snprintf(path, sizeof path, "%s/portable/replica-0/trace.csv", dir);
    CHECK(dt_path_exists(path));
    snprintf(path, sizeof path,
             "%s/"
             ".detrain.lock",
             dir);
    CHECK(!dt_path_exists(path)); /* released and removed at the end */
    free(before);
}

/* A folder of other files is never written into, not even with --overwrite. */
DT_TEST(foreign_folder_refused)
{
    if (!have_data()) DT_SKIP("no Fashion-MNIST installed");
    const char *dir = TMP "foreign";
    CHECK_INT_EQ(dt_run_capture(out, sizeof out,
                                "rm -rf '%s' && mkdir -p '%s' && echo notes > "
                                "'%s/notes.txt'",
                                dir, dir, dir),
                 0);
    char *before = fingerprint(dir);
    CHECK_REFUSED(dir, before, RUN " --out '%s' --overwrite", dir);
    CHECK_CONTAINS(out, "not a detrain result");
    free(before);
}

/* --overwrite removes only what detrain wrote: a user's file beside a result (at the top,
 * deep in a replica folder), a link in place of a result's folder, and a folder whose
 * config.json and run.json are a user's files, are each refused (exit 2, naming the entry)
 * with everything kept, the link's target included; without --overwrite the refusal says
 * --overwrite would refuse too. A clean result is replaced, and a killed run's leftovers
 * (checkpoint.bin, an atomic write's .tmp) are its own. */
DT_TEST(overwrite_removes_only_results)
{
    if (!have_data()) DT_SKIP("no Fashion-MNIST installed");
    const char *dir = TMP "ow";
    finished_result(dir, "");
    CHECK_INT_EQ(dt_run_capture(out, sizeof out, "echo mine > '%s/notes.txt'", dir), 0);
    char *before = fingerprint(dir);
    CHECK_REFUSED(dir, before, RUN " --out '%s' --overwrite", dir);
    CHECK_CONTAINS(out, "holds an earlier result and notes.txt, which detrain did not write");
    CHECK_CONTAINS(out, "nothing was removed");
    CHECK_REFUSED(dir, before, RUN " --out '%s'", dir);
    CHECK_CONTAINS(out, "it also holds notes.txt, which detrain did not write");
    free(before);
    /* deep: a file of the user's inside a replica folder */
    CHECK_INT_EQ(dt_run_capture(out, sizeof out,
                                "mv '%s/notes.txt' '%s/portable/replica-1/mine.csv'", dir, dir),
                 0);
    before = fingerprint(dir);
    CHECK_REFUSED(dir, before, RUN " --out '%s' --overwrite", dir);
    CHECK_CONTAINS(out, "portable/replica-1/mine.csv, which detrain did not write");
    free(before);
    /* a link where the result has a folder: the link is not the result's, nor its target */
    const char *elsewhere = TMP "ow-elsewhere";
    CHECK_INT_EQ(dt_run_capture(out, sizeof out,
                                "rm -f '%s/portable/replica-1/mine.csv' && rm -rf '%s' && "
                                "mkdir -p '%s' && echo precious > '%s/data.txt' && "
                                "rm -rf '%s/plots' && ln -s '%s' '%s/plots'",
                                dir, elsewhere, elsewhere, elsewhere, dir, elsewhere, dir),
                 0);
    before = fingerprint(dir);
    char *target_before = fingerprint(elsewhere);
    CHECK_REFUSED(dir, before, RUN " --out '%s' --overwrite", dir);
    CHECK_CONTAINS(out, "plots, which detrain did not write");
    CHECK(unchanged(elsewhere, target_before));
    free(before), free(target_before);
    /* a killed run's leftovers are the result's own: replaced whole, link gone first */
    CHECK_INT_EQ(dt_run_capture(out, sizeof out,
                                "rm '%s/plots' && echo x > '%s/portable/replica-0/run.json.tmp-77' "
                                "&& echo x > '%s/portable/replica-1/checkpoint.bin.tmp'",
                                dir, dir, dir),
                 0);
    CHECK_INT_EQ(dt_run_capture(out, sizeof out, RUN " --out '%s' --overwrite", dir), 0);
    char path[1200];
    snprintf(path, sizeof path, "%s/portable/replica-0/run.json.tmp-77", dir);
    CHECK(!dt_path_exists(path));
    snprintf(path, sizeof path, "%s/portable/replica-1/trace.csv", dir);
    CHECK(dt_path_exists(path));
    /* a user's config.json and run.json do not make a result */
    const char *fake = TMP "ow-fake";
    CHECK_INT_EQ(dt_run_capture(out, sizeof out,
                                "rm -rf '%s' && mkdir -p '%s' && echo '{\"mine\": 1}' > "
                                "'%s/config.json' && echo '{\"mine\": 2}' > '%s/run.json' && "
                                "echo keep > '%s/thesis.tex'",
                                fake, fake, fake, fake, fake),
                 0);
    before = fingerprint(fake);
    CHECK_REFUSED(fake, before, RUN " --out '%s' --overwrite", fake);
    CHECK_CONTAINS(out, "not a detrain result");
    free(before);
}

/* Output folders are checked as locations before anything is written: the current folder,
 * a folder above it (an --out ending in ..), / and the home folder are refused, and so is
 * an --out whose longest path below it would pass the limit -- not after training. */
DT_TEST(output_locations_checked)
{
    if (!have_data()) DT_SKIP("no Fashion-MNIST installed");
    const char *dir = TMP "loc";
    CHECK_INT_EQ(dt_run_capture(out, sizeof out, "rm -rf '%s' && mkdir -p '%s/a'", dir, dir), 0);
    finished_result(TMP "loc/a/r", "");
    char *before = fingerprint(dir);
    CHECK_REFUSED(dir, before, "cd '%s/a' && " RUN " --out . --overwrite", dir);
    CHECK_CONTAINS(out, ".: is the current folder");
    CHECK_REFUSED(dir, before, "cd '%s/a' && " RUN " --out r/../.. --overwrite", dir);
    CHECK_CONTAINS(out, "r/../..: is a folder above the current one");
    CHECK_REFUSED(dir, before, "cd '%s/a/r' && " RUN " --out .. --overwrite", dir);
    CHECK_CONTAINS(out, "..: is a folder above the current one");
    CHECK_REFUSED(dir, before, "cd '%s/a' && " RUN " --set name=.. --overwrite", dir);
    CHECK_CONTAINS(out, "key 'name': '..' cannot name a folder");
    CHECK_REFUSED(dir, before, "cd '%s/a' && " RUN " --out / --overwrite", dir);
    CHECK_CONTAINS(out, "/: is the root folder");
    CHECK_REFUSED(dir, before, "cd '%s/a' && HOME='%s/a/r' " RUN " --out r --overwrite", dir, dir);
    CHECK_CONTAINS(out, "r: is your home folder");
    /* a path that the run's longest file below it would push past the limit */
    char longdir[1100];
    int n = snprintf(longdir, sizeof longdir, "%s/a/", dir);
    for (; n < 1000; n++) longdir[n] = n % 100 == 0 ? '/' : 'x';
    longdir[n] = '\0';
    CHECK_REFUSED(dir, before, RUN " --out '%s'", longdir);
    CHECK_CONTAINS(out, "choose a shorter --out (nothing was written)");
    free(before);
}

/* No command writes onto its inputs: compare --table, explain and bench refuse a --csv that
 * is, or lies inside, what they read (a result's config.json, a new file in a replica
 * folder, the bench config itself), a link, or an existing file that is not an earlier
 * output of theirs -- exit 2, everything kept; an earlier output of their own is replaced
 * (compare, explain) or extended (bench: its rows after the old ones, one header). */
DT_TEST(outputs_never_onto_inputs)
{
    if (!have_data()) DT_SKIP("no Fashion-MNIST installed");
    const char *dir = TMP "io";
    CHECK_INT_EQ(dt_run_capture(out, sizeof out, "rm -rf '%s' && mkdir -p '%s'", dir, dir), 0);
    finished_result(TMP "io/r", "");
    CHECK_INT_EQ(dt_run_capture(out, sizeof out,
                                "cd '%s' && cp '%s' t.yaml && echo 'my,own' > mine.csv && "
                                "ln -s mine.csv link.csv",
                                dir, TINY),
                 0);
    char *before = fingerprint(dir);
    CHECK_REFUSED(dir, before, "cd '%s' && '%s' compare --table r r --csv r/config.json", dir, EXE);
    CHECK_CONTAINS(out, "r/config.json: is inside ");
    CHECK_CONTAINS(out, "which this command reads");
    CHECK_REFUSED(dir, before, "cd '%s' && '%s' compare --table r r --csv r/portable/t.csv", dir,
                  EXE);
    CHECK_REFUSED(dir, before,
                  "cd '%s' && '%s' explain r/portable/replica-0 r/portable/replica-1 --csv "
                  "r/portable/replica-0/trace.csv",
                  dir, EXE);
    CHECK_CONTAINS(out, "write the op table elsewhere");
    CHECK_REFUSED(dir, before, "cd '%s' && '%s' bench t.yaml --steps 2 --csv t.yaml", dir, EXE);
    CHECK_CONTAINS(out, "t.yaml: is ");
    CHECK_REFUSED(dir, before, "cd '%s' && '%s' bench t.yaml --steps 2 --csv mine.csv", dir, EXE);
    CHECK_CONTAINS(out, "mine.csv: exists and is not an earlier bench CSV of detrain's (its first "
                        "line is 'my,own'");
    CHECK_REFUSED(dir, before, "cd '%s' && '%s' compare --table r r --csv link.csv", dir, EXE);
    CHECK_CONTAINS(out, "link.csv: is a symbolic link");
    free(before);
    /* their own earlier outputs: replaced, or extended */
    CHECK_INT_EQ(dt_run_capture(out, sizeof out,
                                "cd '%s' && '%s' compare --table r r --csv tab.csv >/dev/null && "
                                "'%s' compare --table r r --csv tab.csv >/dev/null && wc -l < "
                                "tab.csv",
                                dir, EXE, EXE),
                 0);
    CHECK_STR_EQ(out, "3\n"); /* header, two replicas: not doubled */
    CHECK_INT_EQ(dt_run_capture(out, sizeof out,
                                "cd '%s' && for i in 1 2; do '%s' bench t.yaml --steps 2 "
                                "--warmup 1 --set 'policies=[fast, portable]' --csv b.csv "
                                ">/dev/null || exit 1; done; grep -c '^config,' b.csv; grep -c "
                                "',portable,step,' b.csv",
                                dir, EXE),
                 0);
    CHECK_STR_EQ(out, "1\n2\n");
}

/* Peak resident memory (MiB) of `detrain run CFG --out DIR SETS` run to its end, from wait4;
 * *estimate gets what `run --dry-run` says the run needs. */
static double peak_rss_mib(const char *cfg, const char *dir, const char *sets, double *estimate)
{
    CHECK_INT_EQ(dt_run_capture(out, sizeof out,
                                "rm -rf '%s' && '%s' run '%s' --out '%s' --dry-run %s", dir, EXE,
                                cfg, dir, sets),
                 0);
    const char *about = strstr(out, "about ");
    *estimate = about ? atof(about + 6) : -1;
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "exec '%s' run '%s' --out '%s' --quiet %s >/dev/null 2>&1", EXE, cfg,
             dir, sets);
    pid_t pid = fork();
    if (pid == 0) {
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    int status = 0;
    struct rusage ru;
    memset(&ru, 0, sizeof ru);
    CHECK(wait4(pid, &status, 0, &ru) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    return (double)ru.ru_maxrss / 1024.0;
}

/* The memory check's estimate is the run's measured peak within 15% -- for each model at
 * three sizes (the MLP's width, LeNet's batch, the Bayesian MLP's width under its three rng
 * policies, the GPT's batch and context), the process's own baseline included -- so that a model a
 * little past what fits is refused before anything is allocated, not stopped by an allocation that
 * fails (which ends with exit 1 and run.json failed, tested by allocation_fails_midrun). Normal
 * builds only: a sanitizer's shadow memory is not the run's. */
DT_TEST(memory_estimate_matches_peak)
{
    if (!have_data()) DT_SKIP("no Fashion-MNIST installed");
#ifdef DT_SANITIZED_BUILD
    DT_SKIP("a sanitized build: its memory is not the run's");
#endif
    /* one step: every buffer is allocated by the end of the first (the peak of 3 steps was
     * the same: the Bayesian MLP at width 3072, 1414772 KB at 3 steps, 1414963 at 1) */
    static const char base[] =
        "--set train.steps=1 --set replicas=1 --set dataset.train_limit=2000 "
        "--set dataset.test_limit=100 --set report.overhead_samples=0 "
        "--set report.snapshots=0";
    static const struct {
        const char *cfg, *sets;
    } cases[] = {
        {"configs/quickstart.yaml", "--set 'model.hidden=[1024, 1024]'"},
        {"configs/quickstart.yaml", "--set 'model.hidden=[2048, 2048]'"},
        {"configs/quickstart.yaml", "--set 'model.hidden=[4096, 4096]' --set report.snapshots=8"},
        {"configs/lenet.yaml", "--set train.batch=128"},
        {"configs/lenet.yaml", "--set train.batch=1024"},
        {"configs/lenet.yaml", "--set train.batch=4096 --set dataset.train_limit=4096"},
        {"configs/bnn.yaml", ""},
        {"configs/bnn.yaml", "--set 'model.hidden=[2048, 2048]'"},
        {"configs/bnn.yaml", "--set 'model.hidden=[3072, 3072]'"},
        {"configs/bnn-local.yaml", "--set 'model.hidden=[3072, 3072]'"},
        /* the GPT (its estimate counted 20 D a block where it keeps 16: the GPU-scale GPT
         * 23% above its peak); sizes where the activations, not the libraries, dominate */
        {"configs/gpt.yaml", "--set train.batch=256"},
        {"configs/gpt.yaml", "--set train.batch=512"},
        {"configs/gpt.yaml", "--set train.batch=256 --set model.context=128"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char cfg[1024], sets[512];
        snprintf(cfg, sizeof cfg, "%s/%s", DT_SOURCE_DIR, cases[i].cfg);
        snprintf(sets, sizeof sets, "%s %s", base, cases[i].sets);
        double est = 0;
        const double peak = peak_rss_mib(cfg, TMP "mem", sets, &est);
        const double ratio = est > 0 ? peak / est : 0;
        fprintf(stderr, "%s %s: estimate %.0f MiB, peak %.1f MiB, peak/estimate %.3f\n",
                cases[i].cfg, cases[i].sets, est, peak, ratio);
        CHECK(ratio > 1 / 1.15 && ratio < 1.15);
    }
    CHECK_INT_EQ(dt_run_capture(out, sizeof out, "rm -rf '%s'", TMP "mem"), 0);
}

/* One writer: with the folder's lock held (here by this test, as a running detrain holds
 * it), a run refuses at once naming the holder, and changes nothing. */
DT_TEST(lock_held_refuses)
{
    if (!have_data()) DT_SKIP("no Fashion-MNIST installed");
    const char *dir = TMP "locked";
    finished_result(dir, "");
    char lock[1200];
    snprintf(lock, sizeof lock, "%s/.detrain.lock", dir);
    int fd = open(lock, O_RDWR | O_CREAT, 0666);
    DT_ASSERT(fd >= 0);
    DT_ASSERT(flock(fd, LOCK_EX | LOCK_NB) == 0);
    DT_ASSERT(write(fd, "pid 4242 since now: detrain run x\n", 34) == 34);
    char *before = fingerprint(dir);
    CHECK_REFUSED(dir, before, RUN " --resume '%s'", dir);
    CHECK_CONTAINS(out, "another detrain is writing into this folder (pid 4242");
    CHECK_REFUSED(dir, before, RUN " --out '%s' --overwrite", dir);
    CHECK_CONTAINS(out, "another detrain is writing");
    /* detrain report writes report.md and plots/ there too: not while a run writes */
    CHECK_REFUSED(dir, before, "DETRAIN_GNUPLOT=none '" EXE "' report '%s'", dir);
    CHECK_CONTAINS(out, "another detrain is writing into this folder (pid 4242");
    close(fd); /* released: the next run goes on */
    CHECK_INT_EQ(dt_run_capture(out, sizeof out, RUN " --resume '%s'", dir), 0);
    free(before);
}

/* Two runs started into one new folder at once: exactly one runs (exit 0), the other
 * refuses (exit 2), and the folder holds the result a run alone gives. */
DT_TEST(concurrent_runs)
{
    if (!have_data()) DT_SKIP("no Fashion-MNIST installed");
    const char *dir = TMP "race", *solo = TMP "solo";
    finished_result(solo, "");
    CHECK_INT_EQ(dt_run_capture(out, sizeof out, "rm -rf '%s'", dir), 0);
    CHECK_INT_EQ(dt_run_capture(out, sizeof out,
                                "( " RUN " --out '%s' > '%s.a.log' 2>&1; echo $? > '%s.a.rc' ) & "
                                "( " RUN " --out '%s' > '%s.b.log' 2>&1; echo $? > '%s.b.rc' ) & "
                                "wait; cat '%s.a.rc' '%s.b.rc' '%s.a.log' '%s.b.log'",
                                dir, dir, dir, dir, dir, dir, dir, dir, dir, dir),
                 0);
    CHECK(strncmp(out, "0\n2\n", 4) == 0 || strncmp(out, "2\n0\n", 4) == 0);
    CHECK(strstr(out, "another detrain is writing") || strstr(out, "holds a run of this config") ||
          strstr(out, "another run wrote into this new folder first"));
    for (int r = 0; r < 2; r++) {
        char a[1200], b[1200];
        snprintf(a, sizeof a, "%s/portable/replica-%d/trace.csv", dir, r);
        snprintf(b, sizeof b, "%s/portable/replica-%d/trace.csv", solo, r);
        CHECK(dt_files_equal(a, b));
        snprintf(a, sizeof a, "%s/portable/replica-%d/tensors.csv", dir, r);
        snprintf(b, sizeof b, "%s/portable/replica-%d/tensors.csv", solo, r);
        CHECK(dt_files_equal(a, b));
    }
}

/* A link planted where detrain writes: refused, and its target untouched -- in a new
 * folder (not a result) and in a result that is resumed. */
DT_TEST(planted_symlink)
{
    if (!have_data()) DT_SKIP("no Fashion-MNIST installed");
    const char *dir = TMP "link", *target = TMP "link-target.txt";
    CHECK_INT_EQ(dt_run_capture(out, sizeof out,
                                "rm -rf '%s' && mkdir -p '%s/portable/replica-0' && echo keep > "
                                "'%s' && ln -s '%s' '%s/portable/replica-0/trace.csv'",
                                dir, dir, target, target, dir),
                 0);
    char *before = fingerprint(dir);
    CHECK_REFUSED(dir, before, RUN " --out '%s'", dir);
    CHECK_CONTAINS(out, "not a detrain result");
    free(before);
    interrupted_result(dir);
    CHECK_INT_EQ(dt_run_capture(out, sizeof out,
                                "cp '%s/portable/replica-1/tensors.csv' '%s' && rm "
                                "'%s/portable/replica-1/tensors.csv' && ln -s '%s' "
                                "'%s/portable/replica-1/tensors.csv'",
                                dir, target, dir, target, dir),
                 0);
    char *target_before = dt_read_file(target, NULL);
    before = fingerprint(dir);
    CHECK_REFUSED(dir, before, RESUME " '%s'", dir);
    CHECK_CONTAINS(out, "replica-1/tensors.csv: is a symbolic link");
    char *target_after = dt_read_file(target, NULL);
    CHECK(target_before && target_after && strcmp(target_before, target_after) == 0);
    free(target_before);
    free(target_after);
    free(before);
}

/* No link is followed at any depth of a result: a cell folder replaced by a link to a
 * folder outside (the old resume wrote a replica there) is refused on --resume, report,
 * compare and explain, naming the link, with the folder and the link's target unchanged;
 * a link deep in a replica's snapshots too. */
DT_TEST(links_never_followed)
{
    if (!have_data()) DT_SKIP("no Fashion-MNIST installed");
    const char *dir = TMP "celllink", *outside = TMP "celllink-outside";
    interrupted_result(dir);
    CHECK_INT_EQ(dt_run_capture(out, sizeof out,
                                "rm -rf '%s' && mv '%s/portable' '%s' && ln -s '%s' '%s/portable'",
                                outside, dir, outside, outside, dir),
                 0);
    char *before = fingerprint(dir), *outside_before = fingerprint(outside);
    CHECK_REFUSED(dir, before, RESUME " '%s'", dir);
    CHECK_CONTAINS(out, "celllink/portable: is a symbolic link inside a detrain result");
    CHECK(unchanged(outside, outside_before));
    CHECK_REFUSED(dir, before, "'%s' report '%s'", EXE, dir);
    CHECK_CONTAINS(out, "portable: is a symbolic link");
    CHECK_REFUSED(dir, before, "'%s' compare '%s/portable/replica-0' '%s/portable/replica-1'", EXE,
                  dir, dir);
    CHECK_CONTAINS(out, "portable: is a symbolic link");
    CHECK_REFUSED(dir, before, "'%s' explain '%s/portable/replica-0' '%s/portable/replica-1'", EXE,
                  dir, dir);
    CHECK_CONTAINS(out, "portable: is a symbolic link");
    CHECK(unchanged(outside, outside_before));
    free(before), free(outside_before);
    /* put back; then a link deep inside (a snapshot): refused on resume as well */
    CHECK_INT_EQ(
        dt_run_capture(out, sizeof out,
                       "rm '%s/portable' && mv '%s' '%s/portable' && "
                       "ln -s /dev/null '%s/portable/replica-0/snapshots/step-99999999.bin'",
                       dir, outside, dir, dir),
        0);
    before = fingerprint(dir);
    CHECK_REFUSED(dir, before, RESUME " '%s'", dir);
    CHECK_CONTAINS(out, "snapshots/step-99999999.bin: is a symbolic link");
    free(before);
    /* without it the resume goes on */
    CHECK_INT_EQ(dt_run_capture(out, sizeof out,
                                "rm '%s/portable/replica-0/snapshots/step-99999999.bin' && " RESUME
                                " '%s'",
                                dir, dir),
                 0);
}

/* A trace row cut short by the kill: --resume says so and goes on -- the checkpoint's row
 * written whole from the digest the checkpoint records -- ending byte-identical to an
 * uninterrupted run; a row cut inside its loss cannot be completed: refused, saying the line
 * was cut (not "another run"), with the folder unchanged. */
DT_TEST(resume_completes_cut_trace_row)
{
    if (!have_data()) DT_SKIP("no Fashion-MNIST installed");
    const char *dir = TMP "cutrow", *whole = TMP "cutrow-whole";
    finished_result(whole, "--set train.checkpoint_every=5");
    for (int cut = 0; cut < 2; cut++) {
        interrupted_result(dir);
        /* the kill leaves replica-1's trace ending at its checkpoint's step (10): cut its
         * last row inside the digest (30 bytes off) or inside the loss (70 bytes off) */
        CHECK_INT_EQ(dt_run_capture(out, sizeof out,
                                    "f='%s/portable/replica-1/trace.csv' && tail -n 1 \"$f\" | "
                                    "cut -d, -f1 && truncate -s $(( $(stat -c %%s \"$f\") - %d )) "
                                    "\"$f\"",
                                    dir, cut ? 70 : 30),
                     0);
        CHECK_STR_EQ(out, "10\n");
        if (cut == 0) {
            CHECK_INT_EQ(dt_run_capture(out, sizeof out, RESUME " '%s'", dir), 0);
            CHECK_CONTAINS(out, "its row of step 10 was cut short when the run was stopped; "
                                "written whole from the checkpoint");
            char a[1200], b[1200];
            snprintf(a, sizeof a, "%s/portable/replica-1/trace.csv", dir);
            snprintf(b, sizeof b, "%s/portable/replica-1/trace.csv", whole);
            CHECK(dt_files_equal(a, b));
            /* run.json: the first start time kept, each segment with its command and build */
            char mpath[1200];
            snprintf(mpath, sizeof mpath, "%s/run.json", dir);
            char *m = dt_read_file(mpath, NULL);
            CHECK(m != NULL);
            if (m) {
                CHECK_CONTAINS(m, "\"segments\": [{\"start_time\": \"");
                CHECK_CONTAINS(m, "\"status\": \"killed\", \"command\": ");
                CHECK_CONTAINS(m, "\"status\": \"completed\", \"command\": ");
                CHECK_CONTAINS(m, "--resume");
                const char *top = strstr(m, "\"start_time\": \""), *seg = strstr(m, "\"segments\"");
                const char *first = seg ? strstr(seg, "\"start_time\": \"") : NULL;
                CHECK(top && first && strncmp(top, first, 36) == 0); /* the first segment's */
                free(m);
            }
        } else {
            char *before = fingerprint(dir);
            CHECK_REFUSED(dir, before, RESUME " '%s'", dir);
            CHECK_CONTAINS(out, "was cut short when the run was stopped");
            CHECK(strstr(out, "another run") == NULL);
            free(before);
        }
    }
}

/* Every path printed to a terminal is escaped: an --out holding an ESC sequence comes out as
 * \x1b in the closing lines (report:, writing to, --overwrite), never as the raw byte. */
DT_TEST(terminal_paths_escaped)
{
    if (!have_data()) DT_SKIP("no Fashion-MNIST installed");
    const char *dir = TMP "esc\033[31mred";
    for (int k = 0; k < 2; k++) {
        int rc = dt_run_capture(out, sizeof out,
                                "DETRAIN_GNUPLOT=none '" EXE "' run '" TINY "' --out '%s' "
                                "--set train.steps=2 --set replicas=1 %s",
                                dir, k ? "--overwrite" : "");
        CHECK_INT_EQ(rc, 0);
        CHECK(strchr(out, '\033') == NULL);
        CHECK_CONTAINS(out, "esc\\x1b[31mred/report.md");
        CHECK_CONTAINS(out, "detrain: writing to ");
    }
    CHECK_CONTAINS(out, "removed the earlier result in ");
    CHECK_INT_EQ(dt_run_capture(out, sizeof out, "rm -rf '%s'", dir), 0);
}

/* --resume with a file the cut-back needs missing, or malformed in the middle: refused
 * before any file is cut; put back, the resume goes on. */
DT_TEST(resume_inputs_checked_first)
{
    if (!have_data()) DT_SKIP("no Fashion-MNIST installed");
    const char *dir = TMP "inputs";
    interrupted_result(dir);
    CHECK_INT_EQ(
        dt_run_capture(out, sizeof out, "mv '%s/portable/replica-1/tensors.csv' '%s.t'", dir, dir),
        0);
    char *before = fingerprint(dir);
    CHECK_REFUSED(dir, before, RESUME " '%s'", dir);
    CHECK_CONTAINS(out, "replica-1/tensors.csv: cannot read");
    free(before);
    CHECK_INT_EQ(dt_run_capture(out, sizeof out,
                                "mv '%s.t' '%s/portable/replica-1/tensors.csv' && cp "
                                "'%s/portable/replica-1/trace.csv' '%s.trace' && sed -i "
                                "'3s/.*/garbage/' '%s/portable/replica-1/trace.csv'",
                                dir, dir, dir, dir, dir),
                 0);
    before = fingerprint(dir);
    CHECK_REFUSED(dir, before, RESUME " '%s'", dir);
    CHECK_CONTAINS(out, "replica-1/trace.csv:3: malformed row");
    free(before);
    CHECK_INT_EQ(dt_run_capture(out, sizeof out, "cp '%s.trace' '%s/portable/replica-1/trace.csv'",
                                dir, dir),
                 0);
    CHECK_INT_EQ(dt_run_capture(out, sizeof out, RESUME " '%s'", dir), 0);
}

/* A replica folder the resume would write into holds a folder where run.json goes: refused
 * before any replica trains. */
DT_TEST(unwritable_replica_folder)
{
    if (!have_data()) DT_SKIP("no Fashion-MNIST installed");
    const char *dir = TMP "replica";
    interrupted_result(dir);
    CHECK_INT_EQ(dt_run_capture(out, sizeof out,
                                "rm -f '%s/portable/replica-1/run.json' && mkdir -p "
                                "'%s/portable/replica-1/run.json/x'",
                                dir, dir),
                 0);
    char *before = fingerprint(dir);
    CHECK_REFUSED(dir, before, RESUME " '%s'", dir);
    CHECK_CONTAINS(out, "replica-1/run.json: is a folder where detrain writes a regular file");
    free(before);
}

/* A model that cannot fit in memory: refused before anything is allocated or written,
 * naming the keys. */
DT_TEST(oversized_model_refused)
{
    if (!have_data()) DT_SKIP("no Fashion-MNIST installed");
    const char *dir = TMP "oversized";
    finished_result(dir, "");
    char *before = fingerprint(dir);
    CHECK_REFUSED(dir, before, RUN " --out '%s' --set 'model.hidden=[65536, 65536, 65536]'", dir);
    CHECK_CONTAINS(out, "GiB of memory (model.kind mlp, train.batch ");
    CHECK_CONTAINS(out, ", model.hidden)");
    free(before);
}

/* An allocation that fails mid-run (forced: every allocation above 20 kB fails once the
 * run has started) ends the run with exit 1 -- not an abort -- and run.json says failed,
 * out of memory; the folder is then resumable to the result of a run that never failed. */
DT_TEST(allocation_fails_midrun)
{
    if (!have_data()) DT_SKIP("no Fashion-MNIST installed");
    const char *dir = TMP "oom", *solo = TMP "oom-solo";
    finished_result(solo, "");
    CHECK_INT_EQ(dt_run_capture(out, sizeof out, "rm -rf '%s'", dir), 0);
    CHECK_INT_EQ(dt_run_capture(out, sizeof out,
                                "DETRAIN_TEST_FAIL_ALLOC_ABOVE=20000 " RUN " --out '%s'", dir),
                 1);
    CHECK_CONTAINS(out, "out of memory allocating");
    CHECK_CONTAINS(out, "run.json says failed");
    char path[1200];
    snprintf(path, sizeof path, "%s/run.json", dir);
    char *manifest = dt_read_file(path, NULL);
    CHECK(manifest && strstr(manifest, "\"status\": \"failed\"") &&
          strstr(manifest, "out of memory"));
    free(manifest);
    CHECK_INT_EQ(dt_run_capture(out, sizeof out, RUN " --resume '%s'", dir), 0);
    for (int r = 0; r < 2; r++) {
        char a[1200], b[1200];
        snprintf(a, sizeof a, "%s/portable/replica-%d/trace.csv", dir, r);
        snprintf(b, sizeof b, "%s/portable/replica-%d/trace.csv", solo, r);
        CHECK(dt_files_equal(a, b));
    }
}

/* export of a special file named as its checkpoint (a FIFO with no writer, a character
 * device): refused at once, exit 2, naming what it is -- never a blocked open (the command
 * runs under timeout(1), so a hang fails with 124 instead of blocking the suite). */
DT_TEST(export_refuses_special_files)
{
    const char *fifo = TMP "export.fifo", *st = TMP "export-fifo.safetensors";
    CHECK_INT_EQ(dt_run_capture(out, sizeof out, "rm -f '%s' '%s' && mkfifo '%s'", fifo, st, fifo),
                 0);
    CHECK_INT_EQ(dt_run_capture(out, sizeof out, "timeout 10 '%s' export '%s' --safetensors '%s'",
                                EXE, fifo, st),
                 2);
    CHECK_CONTAINS(out, "export.fifo: not a regular file but a FIFO (named pipe)");
    CHECK(!dt_path_exists(st));
    CHECK_INT_EQ(dt_run_capture(out, sizeof out,
                                "timeout 10 '%s' export /dev/zero --safetensors '%s'", EXE, st),
                 2);
    CHECK_CONTAINS(out, "/dev/zero: not a regular file but a character device");
    CHECK(!dt_path_exists(st));
}

/* export verifies what it writes: a snapshot with flipped bytes no longer matches its
 * trace's digest at that step, a checkpoint with a flipped byte fails its checksum; both
 * refused, exit 2, naming the file, and nothing written. */
DT_TEST(export_verifies_weights)
{
    if (!have_data()) DT_SKIP("no Fashion-MNIST installed");
    const char *dir = TMP "export-verify", *st = TMP "export-verify.safetensors";
    finished_result(dir, "--set train.steps=5 --set train.checkpoint_every=5");
    CHECK_INT_EQ(dt_run_capture(out, sizeof out, "rm -f '%s'", st), 0);
    /* flip 4 bytes of weight values (the end of the file) of the step-5 snapshot */
    CHECK_INT_EQ(dt_run_capture(out, sizeof out,
                                "f='%s/portable/replica-0/snapshots/step-00000005.bin' && "
                                "printf '\\377\\377\\377\\177' | dd of=\"$f\" bs=1 "
                                "seek=$(( $(stat -c %%s \"$f\") - 40 )) conv=notrunc 2>/dev/null",
                                dir),
                 0);
    CHECK_INT_EQ(dt_run_capture(out, sizeof out,
                                "'%s' export '%s/portable/replica-0' --safetensors '%s'", EXE, dir,
                                st),
                 2);
    CHECK_CONTAINS(out, "snapshots/step-00000005.bin: does not match trace.csv at step 5");
    CHECK(!dt_path_exists(st));
    CHECK_INT_EQ(dt_run_capture(out, sizeof out,
                                "'%s' export '%s/portable/replica-0' --step 5 --safetensors '%s'",
                                EXE, dir, st),
                 2);
    CHECK(!dt_path_exists(st));
    /* an intact step of the same folder is still written */
    CHECK_INT_EQ(dt_run_capture(out, sizeof out,
                                "'%s' export '%s/portable/replica-0' --step 4 --safetensors '%s'",
                                EXE, dir, st),
                 0);
    CHECK_INT_EQ(dt_run_capture(out, sizeof out, "rm -f '%s'", st), 0);
    /* a checkpoint with one byte flipped in its weights */
    CHECK_INT_EQ(dt_run_capture(out, sizeof out,
                                "f='%s/portable/replica-1/checkpoint.bin' && "
                                "printf '\\177' | dd of=\"$f\" bs=1 "
                                "seek=$(( $(stat -c %%s \"$f\") - 100 )) conv=notrunc 2>/dev/null",
                                dir),
                 0);
    CHECK_INT_EQ(dt_run_capture(out, sizeof out,
                                "'%s' export '%s/portable/replica-1/checkpoint.bin' "
                                "--safetensors '%s'",
                                EXE, dir, st),
                 2);
    CHECK_CONTAINS(out, "replica-1/checkpoint.bin: checksum mismatch");
    CHECK(!dt_path_exists(st));
}

/* export's refusals say what to give: an experiment or cell folder names a replica folder
 * in it; a --step past the trace or without a snapshot, or too large to read, is refused
 * (exit 2), not clamped; a missing output folder is named as the user wrote it; a repeated
 * --safetensors is a usage error. Nothing is written by any of them. */
DT_TEST(export_messages)
{
    if (!have_data()) DT_SKIP("no Fashion-MNIST installed");
    const char *dir = TMP "export-msg", *st = TMP "export-msg.safetensors";
    finished_result(dir, "--set train.steps=5");
    CHECK_INT_EQ(dt_run_capture(out, sizeof out, "rm -f '%s' '%s.b'", st, st), 0);
    char rep[1200];
    snprintf(rep, sizeof rep, "%s/portable/replica-0", dir);
    CHECK_INT_EQ(
        dt_run_capture(out, sizeof out, "'%s' export '%s' --safetensors '%s'", EXE, dir, st), 2);
    CHECK_CONTAINS(out, "an experiment folder");
    CHECK_CONTAINS(out, "give a replica folder");
    CHECK_CONTAINS(out, rep);
    CHECK_INT_EQ(dt_run_capture(out, sizeof out, "'%s' export '%s/portable' --safetensors '%s'",
                                EXE, dir, st),
                 2);
    CHECK_CONTAINS(out, "give a replica folder");
    CHECK_CONTAINS(out, rep);
    CHECK_INT_EQ(dt_run_capture(out, sizeof out, "'%s' export '%s' --step 6 --safetensors '%s'",
                                EXE, rep, st),
                 2);
    CHECK_CONTAINS(out, "past the end of its trace");
    CHECK_INT_EQ(dt_run_capture(out, sizeof out,
                                "'%s' export '%s' --step 99999999999999999999 --safetensors '%s'",
                                EXE, rep, st),
                 2);
    CHECK(strstr(out, "9223372036854775807") == NULL); /* not clamped to the largest step */
    CHECK_CONTAINS(out, "out of range");
    /* the last snapshot beyond a trace cut short: refused, not written unchecked */
    CHECK_INT_EQ(dt_run_capture(out, sizeof out, "sed -i '$d' '%s/trace.csv'", rep), 0);
    CHECK_INT_EQ(
        dt_run_capture(out, sizeof out, "'%s' export '%s' --safetensors '%s'", EXE, rep, st), 2);
    CHECK_CONTAINS(out, "past the end of its trace");
    CHECK_INT_EQ(dt_run_capture(out, sizeof out,
                                "'%s' export '%s' --safetensors /no/such/dir/x.safetensors", EXE,
                                rep),
                 2);
    CHECK_CONTAINS(out, "/no/such/dir/x.safetensors: ");
    CHECK(strstr(out, ".tmp-") == NULL);
    CHECK_INT_EQ(dt_run_capture(out, sizeof out,
                                "'%s' export '%s' --step 4 --safetensors '%s' --safetensors '%s.b'",
                                EXE, rep, st, st),
                 2);
    CHECK_CONTAINS(out, "--safetensors given twice");
    CHECK(!dt_path_exists(st));
    snprintf(rep, sizeof rep, "%s.b", st);
    CHECK(!dt_path_exists(rep));
}

/* Memory near an address-space limit (probe round three): a GPT whose run needs about 1.55
 * GiB of address space (0.6 GiB resident on the development VM; the libraries' mappings,
 * stacks and malloc arenas count under RLIMIT_AS) passed the check under 1.4 GiB, wrote its
 * folder and failed at an allocation (exit 1). Under limits around what it needs, a run now
 * either completes or is refused with exit 2 before anything is written -- never exit 1
 * after writing (which of the two depends on the machine's libraries, so either is
 * accepted). And a text corpus far larger than the limit is refused by its size on disk,
 * before a byte of it is read. Normal builds only (a sanitizer reserves address space). */
DT_TEST(memory_limit_counts_address_space_and_corpus)
{
#ifdef DT_SANITIZED_BUILD
    DT_SKIP("a sanitized build: its address space is not the run's");
#endif
    const char *dir = TMP "as_limit", *big = TMP "as_limit.corpus.txt";
    static const char gpt_sets[] =
        "--set train.steps=1 --set replicas=1 --set policies=[portable] "
        "--set report.overhead_samples=0 --set report.snapshots=0 --set dataset.test_limit=20 "
        "--set model.d_model=512 --set model.layers=4 --set model.heads=8 --set train.batch=4";
    for (long long mib = 1200; mib <= 1600; mib += 200) {
        int rc =
            dt_run_capture(out, sizeof out,
                           "rm -rf '%s' && prlimit --as=%lld '%s' run '%s/configs/gpt.yaml' "
                           "--out '%s' --quiet --set dataset.path='%s/gpt_corpus.txt' %s",
                           dir, mib << 20, EXE, DT_SOURCE_DIR, dir, DT_TEST_DATA_DIR, gpt_sets);
        fprintf(stderr, "under %lld MiB of address space: exit %d\n", mib, rc);
        if (rc != 0 && rc != 2) fprintf(stderr, "%s\n", out);
        CHECK(rc == 0 || rc == 2);
        if (rc == 2) {
            CHECK_CONTAINS(out, "GiB of memory");
            CHECK_CONTAINS(out, "address space");
            CHECK(!dt_path_exists(dir));
        }
    }
    /* 1.5 GB of text (a sparse file: nothing is read) under 1.4 GiB */
    int rc = dt_run_capture(out, sizeof out,
                            "(rm -f '%s' && truncate -s 1500M '%s' && prlimit --as=%lld '%s' run "
                            "'%s/configs/gpt.yaml' --out '%s' --quiet --set dataset.path='%s' %s "
                            "2>&1; e=$?; rm -f '%s'; exit $e)",
                            big, big, 1400LL << 20, EXE, DT_SOURCE_DIR, dir, big, gpt_sets, big);
    if (rc != 2) fprintf(stderr, "%s\n", out);
    CHECK_INT_EQ(rc, 2);
    CHECK_CONTAINS(out, "GiB of memory");
    /* the corpus is what does not fit: named, with its key -- not "a smaller model" */
    CHECK_CONTAINS(out, "and the data set is ");
    CHECK_CONTAINS(out, "as_limit.corpus.txt): give a smaller corpus (dataset.path)");
    CHECK(strstr(out, "make the model or the batch smaller") == NULL);
    CHECK(!dt_path_exists(dir));
}

DT_TEST_MAIN(DT_CASE(refused_value_keeps_result), DT_CASE(refused_ranks_keep_result),
             DT_CASE(other_config_refused), DT_CASE(rerun_is_explicit),
             DT_CASE(foreign_folder_refused), DT_CASE(overwrite_removes_only_results),
             DT_CASE(output_locations_checked), DT_CASE(outputs_never_onto_inputs),
             DT_CASE(memory_estimate_matches_peak), DT_CASE(lock_held_refuses),
             DT_CASE(concurrent_runs), DT_CASE(planted_symlink), DT_CASE(links_never_followed),
             DT_CASE(resume_completes_cut_trace_row), DT_CASE(terminal_paths_escaped),
             DT_CASE(resume_inputs_checked_first), DT_CASE(unwritable_replica_folder),
             DT_CASE(oversized_model_refused), DT_CASE(allocation_fails_midrun),
             DT_CASE(export_refuses_special_files), DT_CASE(export_verifies_weights),
             DT_CASE(export_messages), DT_CASE(memory_limit_counts_address_space_and_corpus))
