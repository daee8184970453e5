/* `detrain reproduce` (harness/analyze/reproduce.h): the committed references of other
 * machines are reproduced here, on the wide kernels and on the narrow (AVX2) path; a
 * changed digest is found at its step (the negative control); a result that lacks what it
 * needs is refused before anything is trained; nothing is written into the result read. */
#include "tests/check.h"
#include "tests/run_helper.h"

#define EXE DT_DETRAIN_EXE
#define TMP DT_TEST_TMP_DIR "/reproduce."
#define REF_CPU DT_SOURCE_DIR "/results/cpu/epyc/crossdev-t2/mlp"
#define REF_GPU DT_SOURCE_DIR "/results/nvidia-h100-80gb-hbm3/crossdev/mlp"
/* the narrow path an AVX2 machine takes: detrain's, OpenBLAS's and oneDNN's kernels */
#define NARROW "DETRAIN_CPU_ISA=avx2 OPENBLAS_CORETYPE=Haswell ONEDNN_MAX_CPU_ISA=AVX2 "

static char out[65536];

/* A digest of every file under dir (names and bytes), to show that nothing changed. */
static void tree_digest(char *buf, size_t size, const char *dir)
{
    int rc = dt_run_capture(buf, size,
                            "cd '%s' && find . -type f | LC_ALL=C sort | xargs sha256sum | "
                            "sha256sum | cut -c1-64",
                            dir);
    CHECK_INT_EQ(rc, 0);
}

/* The AMD EPYC's and the H100's references, reproduced on this CPU: identical at every
 * hashed step, on the widest kernels here and on the narrow path; the result folders
 * unchanged; the temporary rerun removed. */
DT_TEST(committed_references)
{
    char before[2][128], after[128];
    tree_digest(before[0], sizeof before[0], REF_CPU);
    tree_digest(before[1], sizeof before[1], REF_GPU);
    const char *tmpdir = TMP "committed_tmp";
    /* the widest kernels, then the AVX2 path; in make check-narrow (DETRAIN_CPU_ISA=avx2
     * already) the first pass would be the second again: the AVX2 path once */
    const char *isa = getenv("DETRAIN_CPU_ISA");
    const int first = isa && strcmp(isa, "avx2") == 0 ? 1 : 0;
    for (int narrow = first; narrow < 2; narrow++) {
        int rc =
            dt_run_capture(out, sizeof out,
                           "rm -rf '%s' && mkdir -p '%s' && %sTMPDIR='%s' '%s' reproduce "
                           "'%s' '%s' --quiet",
                           tmpdir, tmpdir, narrow ? NARROW : "", tmpdir, EXE, REF_CPU, REF_GPU);
        fprintf(stderr, "%s path:\n%s\n", narrow ? "narrow" : "widest", out);
        CHECK_INT_EQ(rc, 0);
        /* (the date the reference was recorded follows, in brackets: it moves when the
         * reference is remade) */
        CHECK_CONTAINS(out, "portable/replica-0     identical at all 101 hashed steps (");
        CHECK_CONTAINS(out, " recorded values) to cpu: AMD EPYC, 2 threads (20");
        CHECK_CONTAINS(out, " recorded values) to cuda: NVIDIA H100 80GB HBM3");
        CHECK_CONTAINS(out, "| result | cell | recorded on | verdict |");
        if (narrow) CHECK_CONTAINS(out, "avx2 kernels");
        rc = dt_run_capture(out, sizeof out, "ls -A '%s' | wc -l", tmpdir);
        CHECK_STR_EQ(out, "0\n"); /* the rerun's temporary folder is gone */
    }
    tree_digest(after, sizeof after, REF_CPU);
    CHECK_STR_EQ(after, before[0]);
    tree_digest(after, sizeof after, REF_GPU);
    CHECK_STR_EQ(after, before[1]);
}

/* A copy of the reference whose digests change from step 17 on: reproduce says where
 * (exit 1); --out keeps the rerun, which the copy's own compare then confirms. */
DT_TEST(changed_digest_found)
{
    const char *dir = TMP "changed", *keep = TMP "changed_keep";
    int rc = dt_run_capture(out, sizeof out,
                            "rm -rf '%s' '%s' && cp -r '%s' '%s' && "
                            "awk -F, 'BEGIN{OFS=\",\"} NR>1 && $1>=17 {$3=\"0\" substr($3,2)} "
                            "{print}' '%s' > '%s/t' && mv '%s/t' '%s'",
                            dir, keep, REF_CPU, dir, REF_CPU "/portable/replica-0/trace.csv", dir,
                            dir, TMP "changed/portable/replica-0/trace.csv");
    CHECK_INT_EQ(rc, 0);
    rc = dt_run_capture(out, sizeof out, "'%s' reproduce '%s' --out '%s' --quiet", EXE, dir, keep);
    fprintf(stderr, "%s\n", out);
    CHECK_INT_EQ(rc, 1);
    CHECK_CONTAINS(out, "portable/replica-0     parts from cpu: AMD EPYC, 2 threads (20");
    CHECK_CONTAINS(out, "Z) at step 17");
    CHECK_CONTAINS(out, "a portable cell must not part");
    rc = dt_run_capture(out, sizeof out, "'%s' compare '%s/portable/replica-0' '%s'", EXE, keep,
                        REF_CPU "/portable/replica-0");
    CHECK_INT_EQ(rc, 0); /* the kept rerun is the unchanged reference */
}

/* Refusals, each before anything is trained and with the result left as it was: no trace,
 * a key this build does not know, a missing dataset, an unknown cell, no portable cell,
 * --out inside the result, a folder that is no result. */
DT_TEST(refusals)
{
    const char *dir = TMP "refuse";
    char before[128], after[128];
    int rc = dt_run_capture(out, sizeof out, "rm -rf '%s' && cp -r '%s' '%s'", dir, REF_CPU, dir);
    CHECK_INT_EQ(rc, 0);
    tree_digest(before, sizeof before, dir);
    rc = dt_run_capture(out, sizeof out, "'%s' reproduce '%s' --cells fast", EXE, dir);
    CHECK_INT_EQ(rc, 2);
    CHECK_CONTAINS(out, "has no cell 'fast' (its cells: portable)");
    rc = dt_run_capture(out, sizeof out, "'%s' reproduce '%s' --set dataset.path=/nonexistent", EXE,
                        dir);
    CHECK_INT_EQ(rc, 2);
    CHECK_CONTAINS(out, "/nonexistent");
    rc = dt_run_capture(out, sizeof out, "'%s' reproduce '%s' --out '%s/keep'", EXE, dir, dir);
    CHECK_INT_EQ(rc, 2);
    CHECK_CONTAINS(out, "lies inside the result");
    rc = dt_run_capture(out, sizeof out, "'%s' reproduce '%s/portable'", EXE, dir);
    CHECK_INT_EQ(rc, 2);
    CHECK_CONTAINS(out, "holds no result");
    tree_digest(after, sizeof after, dir);
    CHECK_STR_EQ(after, before);

    rc = dt_run_capture(out, sizeof out,
                        "sed -i 's/\"portable\",\"reduction\"/\"fast\",\"reduction\"/; "
                        "s/\"name\":\"portable\",\"base\"/\"name\":\"portable\",\"base\"/' "
                        "'%s/config.json' && sed -i 's/\"reduction\":\"exact\"/"
                        "\"reduction\":\"unordered\"/' '%s/config.json' && '%s' reproduce '%s'",
                        dir, dir, EXE, dir);
    CHECK_INT_EQ(rc, 2);
    CHECK_CONTAINS(out, "has no portable cell (its cells: portable); name the ones to rerun "
                        "with --cells");
    rc = dt_run_capture(out, sizeof out,
                        "cp '%s/config.json' '%s/config.json' && sed -i "
                        "'s/\"replicas\":1/\"replicas\":1,\"future_key\":3/' '%s/config.json' && "
                        "'%s' reproduce '%s'",
                        REF_CPU, dir, dir, EXE, dir);
    CHECK_INT_EQ(rc, 2);
    CHECK_CONTAINS(out, "future_key");
    rc = dt_run_capture(out, sizeof out,
                        "cp '%s/config.json' '%s/config.json' && rm '%s/portable/replica-0/"
                        "trace.csv' && '%s' reproduce '%s'",
                        REF_CPU, dir, dir, EXE, dir);
    CHECK_INT_EQ(rc, 2);
    CHECK_CONTAINS(out, "has no trace.csv: the result keeps no per-step digests");
}

/* A cell that is not portable: a fast result recorded under the forced-order hook (its two
 * replicas added in drawn orders), rerun here as fast runs. Replica 0's verdict is either
 * identical or a divergence that explain attributes, or says it could not; the command
 * does not fail on it. */
DT_TEST(fast_cell_explained)
{
    const char *dir = TMP "fast";
    int rc = dt_run_capture(out, sizeof out,
                            "rm -rf '%s' && DETRAIN_TEST_FORCED_ORDER=7 '%s' run '%s' --out '%s' "
                            "--quiet --set train.steps=3 --set replicas=1 --set policies=[fast] "
                            "--set dataset.test_limit=500 --set report.overhead_samples=0 "
                            "--set report.snapshots=0 --set hash.per_tensor=true",
                            dir, EXE, DT_SOURCE_DIR "/configs/quickstart.yaml", dir);
    CHECK_INT_EQ(rc, 0);
    rc = dt_run_capture(out, sizeof out, "'%s' reproduce '%s' --quiet", EXE, dir);
    CHECK_INT_EQ(rc, 2);
    CHECK_CONTAINS(out, "has no portable cell (its cells: fast)");
    rc = dt_run_capture(out, sizeof out, "'%s' reproduce '%s' --cells fast --quiet", EXE, dir);
    fprintf(stderr, "%s\n", out);
    CHECK(rc == 0 || rc == 1);
    if (rc == 1) {
        CHECK_CONTAINS(out, "fast/replica-0         parts from ");
        CHECK_CONTAINS(out, " at step 1, tensor ");
        CHECK(strstr(out, "; explain") != NULL);
    }
}

/* A result edited in one recorded value each time, every digest left as it was: a loss in
 * trace.csv, a test metric in metrics.csv, a row of tensors.csv, run.json's test accuracy.
 * Each is found (exit 1, naming the value and its step) -- reproduce compares every value
 * the result records, not only the digests. The unedited result is identical (the negative
 * control: exit 0). A 20-step run of the tiny config, made here: the committed references
 * are reproduced by committed_references, and five 100-step reruns cost half a minute. */
DT_TEST(edited_values_found)
{
    const char *made = TMP "edited_ref", *dir = TMP "edited";
    const char *rep = TMP "edited/portable/replica-0";
    static const struct {
        const char *edit, *found;
    } cases[] = {
        {"sed -i '19s/^17,[0-9.]*,/17,0.5,/' '%s/trace.csv'", "loss at step 17: 0.5 recorded, "},
        {"sed -i '2s/^20,[0-9.]*,/20,0.25,/' '%s/metrics.csv'",
         "test_loss at step 20: 0.25 recorded, "},
        {"sed -i '10s/,[0-9a-f]*$/,00000000000000000000000000000000000000000000000000000000000000"
         "00/' '%s/tensors.csv'",
         "tensors.csv row 10 (step 2, tensor dense0.weight): "},
        {"sed -i 's/\"test_accuracy\": [0-9.]*/\"test_accuracy\": 0.5/' '%s/run.json'",
         "run.json's test_accuracy: 0.5 recorded, "},
    };
    int rc = dt_run_capture(out, sizeof out,
                            "rm -rf '%s' && DETRAIN_GNUPLOT=none '%s' run '%s' --out '%s' --quiet "
                            "--set replicas=1 --set train.steps=20 --set report.snapshots=0 "
                            "--set report.overhead_samples=0 && '%s' reproduce '%s' --quiet",
                            made, EXE, DT_TEST_DATA_DIR "/tiny.yaml", made, EXE, made);
    CHECK_INT_EQ(rc, 0);
    CHECK_CONTAINS(out, "identical at all 21 hashed steps");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char edit[600];
        snprintf(edit, sizeof edit, cases[i].edit, rep);
        rc = dt_run_capture(out, sizeof out,
                            "rm -rf '%s' && cp -r '%s' '%s' && %s && '%s' reproduce '%s' --quiet",
                            dir, made, dir, edit, EXE, dir);
        fprintf(stderr, "%s\n", out);
        CHECK_INT_EQ(rc, 1);
        CHECK_CONTAINS(out, cases[i].found);
        CHECK_CONTAINS(out, "in a recorded value, every digest equal");
        CHECK_CONTAINS(out, "the recorded value was edited, or this build computes it otherwise");
    }
}

/* A trace that its config could not have written is refused before anything is trained
 * (exit 2, "cannot be compared"): rows padded past train.steps (a million-step rerun
 * otherwise), a step off the config's hash schedule. */
DT_TEST(trace_against_config)
{
    const char *dir = TMP "padded";
    const char *trace = TMP "padded/portable/replica-0/trace.csv";
    int rc = dt_run_capture(out, sizeof out,
                            "rm -rf '%s' && cp -r '%s' '%s' && last=$(tail -1 '%s') && for s in "
                            "101 102 1000000; do echo \"$last\" | sed \"s/^100,/$s,/\" >> '%s'; "
                            "done && '%s' reproduce '%s'",
                            dir, REF_CPU, dir, trace, trace, EXE, dir);
    CHECK_INT_EQ(rc, 2);
    CHECK_CONTAINS(out, "cannot be compared: ");
    CHECK_CONTAINS(out, "has step 101 (row 103), past the 100 steps of its config.json");
    CHECK(strstr(out, "rerunning") == NULL);
    rc = dt_run_capture(out, sizeof out,
                        "rm -rf '%s' && cp -r '%s' '%s' && sed -i 's/\"every\":1,/\"every\":2,/' "
                        "'%s/config.json' && '%s' reproduce '%s'",
                        dir, REF_CPU, dir, dir, EXE, dir);
    CHECK_INT_EQ(rc, 2);
    CHECK_CONTAINS(out, "has step 1 (row 3), which its config.json does not hash (hash.every: 2)");
}

/* What the user or the data changed is named, exit 2, nothing trained -- never "a portable
 * cell must not part": a --set of a training key (names the key and both values), and
 * other data (a copy of Fashion-MNIST with one training label changed: the recorded data
 * digest). Where the rerun runs may change: --set backend.threads=1 reproduces (exit 0). */
DT_TEST(changed_by_user_or_data)
{
    const char *data = TMP "data";
    int rc = dt_run_capture(out, sizeof out, "'%s' reproduce '%s' --set train.optimizer.lr=0.2",
                            EXE, REF_CPU);
    CHECK_INT_EQ(rc, 2);
    CHECK_CONTAINS(out, "cannot be compared: --set train.optimizer.lr=0.2 changes what the result "
                        "recorded: train.optimizer.lr (recorded: ");
    CHECK(strstr(out, "please report") == NULL);
    rc = dt_run_capture(out, sizeof out, "'%s' reproduce '%s' --set dataset.train_limit=9000", EXE,
                        REF_CPU);
    CHECK_INT_EQ(rc, 2);
    CHECK_CONTAINS(out, "dataset.train_limit (recorded: 10000, --set: 9000)");
    rc =
        dt_run_capture(out, sizeof out,
                       "rm -rf '%s' && cp -r /usr/share/datasets/fashion-mnist '%s' 2>/dev/null && "
                       "cd '%s' && gunzip train-labels-idx1-ubyte.gz && printf '\\011' | dd "
                       "of=train-labels-idx1-ubyte bs=1 seek=9 conv=notrunc 2>/dev/null && "
                       "gzip train-labels-idx1-ubyte",
                       data, data, data);
    if (rc != 0) DT_SKIP("no Fashion-MNIST at /usr/share/datasets/fashion-mnist to copy");
    rc = dt_run_capture(out, sizeof out, "'%s' reproduce '%s' --set dataset.path='%s'", EXE,
                        REF_CPU, data);
    CHECK_INT_EQ(rc, 2);
    CHECK_CONTAINS(out, "cannot be compared: the data here is not the data ");
    CHECK_CONTAINS(out, "(fashion-mnist in ");
    CHECK(strstr(out, "please report") == NULL);
    rc = dt_run_capture(out, sizeof out, "'%s' reproduce '%s' --quiet --set backend.threads=1", EXE,
                        REF_CPU);
    CHECK_INT_EQ(rc, 0);
    CHECK_CONTAINS(out, "identical at all 101 hashed steps");
}

/* A result that a run is still writing (its lock held: flock(1) stands in for the run) is
 * refused at once by reproduce, compare and export (exit 2), not read half-written; once
 * the lock is free it reads as before. Nothing is written into the result. */
DT_TEST(result_being_written)
{
    const char *dir = TMP "locked";
    int rc = dt_run_capture(out, sizeof out, "rm -rf '%s' && cp -r '%s' '%s'", dir, REF_CPU, dir);
    CHECK_INT_EQ(rc, 0);
    static const char *const cmds[] = {"reproduce '%s' --quiet", "compare '%s' '%s'",
                                       "export '%s/portable/replica-0' --safetensors '%s.st'"};
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        char cmd[2000];
        snprintf(cmd, sizeof cmd, cmds[i], dir, dir);
        rc = dt_run_capture(out, sizeof out,
                            "touch '%s/.detrain.lock' && flock '%s/.detrain.lock' '%s' %s", dir,
                            dir, EXE, cmd);
        CHECK_INT_EQ(rc, 2);
        CHECK_CONTAINS(out, "locked: a detrain run is writing into this result");
    }
    rc = dt_run_capture(out, sizeof out, "rm '%s/.detrain.lock' && '%s' reproduce '%s' --quiet",
                        dir, EXE, dir);
    CHECK_INT_EQ(rc, 0);
}

/* A rerun on a device this machine lacks is refused as reproduce's own message (exit 2,
 * before anything is trained), not as a dry run's. (Where a GPU is present it reruns.) */
DT_TEST(missing_device)
{
    int rc = dt_run_capture(out, sizeof out,
                            "'%s' reproduce '%s' --quiet --set backend.device=cuda", EXE, REF_CPU);
    if (rc == 0) DT_SKIP("a CUDA device is here: the rerun ran on it");
    CHECK_INT_EQ(rc, 2);
    CHECK_CONTAINS(out, "reproduce: ");
    CHECK_CONTAINS(out, "cannot be rerun here: ");
    CHECK(strstr(out, "dry run") == NULL);
    CHECK(strstr(out, "mlp, 100 steps") == NULL); /* nothing started */
}

/* A result cut short (a killed run: its trace ends at step 6 of 12) under the cosine
 * schedule, which decays to train.steps: the rerun keeps train.steps and stops at step 6,
 * identical on every recorded value. Rerun as a 6-step run it would part at step 1 (the
 * negative control: the learning rates differ). */
DT_TEST(cut_trace_cosine)
{
    const char *dir = TMP "cut";
    int rc = dt_run_capture(out, sizeof out,
                            "rm -rf '%s' && DETRAIN_GNUPLOT=none '%s' run '%s' --out '%s' --quiet "
                            "--set replicas=1 --set train.steps=12 --set "
                            "train.optimizer.schedule=cosine --set report.overhead_samples=0 "
                            "--set report.snapshots=0 && cd '%s/portable/replica-0' && "
                            "head -8 trace.csv > t && mv t trace.csv && "
                            "awk -F, 'NR == 1 || $1 <= 6' tensors.csv > t && mv t tensors.csv",
                            dir, EXE, DT_TEST_DATA_DIR "/tiny.yaml", dir, dir);
    CHECK_INT_EQ(rc, 0);
    rc = dt_run_capture(out, sizeof out, "'%s' reproduce '%s' --quiet", EXE, dir);
    fprintf(stderr, "%s\n", out);
    CHECK_INT_EQ(rc, 0);
    CHECK_CONTAINS(out, "reproduce.cut: mlp, 6 steps");
    CHECK_CONTAINS(out, "identical at all 7 hashed steps");
    rc = dt_run_capture(out, sizeof out,
                        "sed -i 's/\"steps\":12,/\"steps\":6,/' '%s/config.json' && '%s' "
                        "reproduce '%s' --quiet",
                        dir, EXE, dir);
    CHECK_INT_EQ(rc, 1);
    CHECK_CONTAINS(out, "at step 2");
}

DT_TEST_MAIN(DT_CASE(committed_references), DT_CASE(changed_digest_found), DT_CASE(refusals),
             DT_CASE(fast_cell_explained), DT_CASE(edited_values_found),
             DT_CASE(trace_against_config), DT_CASE(changed_by_user_or_data),
             DT_CASE(result_being_written), DT_CASE(missing_device), DT_CASE(cut_trace_cosine))
