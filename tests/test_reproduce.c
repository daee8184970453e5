/* `detrain reproduce` (harness/analyze/reproduce.h): the committed references of other
 * machines are reproduced here, on the wide kernels and on the narrow (AVX2) path; a
 * changed digest is found at its step (the negative control); a result that lacks what it
 * needs is refused before anything is trained; nothing is written into the result read. */
#include "tests/check.h"
#include "tests/run_helper.h"

#define EXE DT_DETRAIN_EXE
#define TMP DT_TEST_TMP_DIR "/reproduce."
#define REF_CPU DT_SOURCE_DIR "/results/cpu/crossdev-t2/mlp"
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
    for (int narrow = 0; narrow < 2; narrow++) {
        int rc =
            dt_run_capture(out, sizeof out,
                           "rm -rf '%s' && mkdir -p '%s' && %sTMPDIR='%s' '%s' reproduce "
                           "'%s' '%s' --quiet",
                           tmpdir, tmpdir, narrow ? NARROW : "", tmpdir, EXE, REF_CPU, REF_GPU);
        fprintf(stderr, "%s path:\n%s\n", narrow ? "narrow" : "widest", out);
        CHECK_INT_EQ(rc, 0);
        /* (the date the reference was recorded follows, in brackets: it moves when the
         * reference is remade) */
        CHECK_CONTAINS(out, "portable/replica-0     identical at all 101 hashed steps to "
                            "cpu: AMD EPYC, 2 threads (20");
        CHECK_CONTAINS(out, "identical at all 101 hashed steps to cuda: NVIDIA H100 80GB HBM3");
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
    int rc =
        dt_run_capture(out, sizeof out,
                       "rm -rf '%s' '%s' && cp -r '%s' '%s' && "
                       "awk -F, 'BEGIN{OFS=\",\"} NR>1 && $1>=17 {$3=\"0\" substr($3,2)} "
                       "{print}' '%s' > '%s/t' && mv '%s/t' '%s'",
                       dir, keep, REF_CPU, dir,
                       DT_SOURCE_DIR "/results/cpu/crossdev-t2/mlp/portable/replica-0/trace.csv",
                       dir, dir, TMP "changed/portable/replica-0/trace.csv");
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

DT_TEST_MAIN(DT_CASE(committed_references), DT_CASE(changed_digest_found), DT_CASE(refusals),
             DT_CASE(fast_cell_explained))
