/* The scripts that take detrain to a GPU machine (scripts/gpu_deps.sh, gpu_session.sh,
 * cross_device.sh, bench_torch.py), tested where no GPU and no network are needed: syntax;
 * gpu_deps.sh install on tiny fake .debs (tests/gpu_deps_fake.sh) -- .pc files moved into
 * the prefix, absolute symlinks re-pointed, env.sh, idempotence, every refusal;
 * gpu_session.sh's plan, its results folder, carrying on after failed steps, and its
 * crossdev and matrix steps in a scratch copy of the scripts with a stand-in detrain;
 * cross_device.sh on short real CPU runs; bench_torch.py (MLP and LeNet) on the CPU (skipped
 * without PyTorch). `slow`: the real fetch, a build from the prefix alone and a short run
 * (tests/gpu_deps_check.sh; skipped offline). */
#include "tests/check.h"
#include "tests/run_helper.h"

#define SRC DT_SOURCE_DIR
#define OUT_SIZE 65536

static char out[OUT_SIZE];

/* A fresh scratch folder for one case, under the build's test tmp folder. */
static const char *scratch(const char *name)
{
    static char path[1024];
    snprintf(path, sizeof path, "%s/scripts-%s", DT_TEST_TMP_DIR, name);
    char cmd[2200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", path, path);
    CHECK_INT_EQ(dt_run_capture(out, sizeof out, "%s", cmd), 0);
    return path;
}

static char *read_text(const char *fmt, const char *a, const char *b)
{
    char path[2048];
    snprintf(path, sizeof path, fmt, a, b);
    char *text = dt_read_file(path, NULL);
    if (!text) {
        fprintf(stderr, "cannot read %s\n", path);
        dt_check_failures_++;
    }
    return text;
}

DT_TEST(bash_syntax)
{
    static const char *scripts[] = {"scripts/gpu_deps.sh",     "scripts/gpu_session.sh",
                                    "scripts/cross_device.sh", "scripts/lib.sh",
                                    "scripts/setup.sh",        "scripts/ranks.sh",
                                    "scripts/format.sh",       "scripts/results.sh",
                                    "tests/gpu_deps_check.sh", "tests/gpu_deps_fake.sh"};
    for (size_t i = 0; i < sizeof scripts / sizeof scripts[0]; i++) {
        int rc = dt_run_capture(out, sizeof out, "bash -n '%s/%s'", SRC, scripts[i]);
        if (rc != 0) fprintf(stderr, "%s:\n%s\n", scripts[i], out);
        CHECK_INT_EQ(rc, 0);
    }
    /* The check itself can fail. */
    const char *dir = scratch("syntax");
    CHECK_INT_EQ(dt_run_capture(out, sizeof out,
                                "printf 'if true; then\\n' >'%s/bad.sh' && "
                                "bash -n '%s/bad.sh'",
                                dir, dir),
                 2);
}

DT_TEST(python_syntax)
{
    if (dt_run_capture(out, sizeof out, "python3 --version") != 0) DT_SKIP("no python3");
    /* ast.parse rather than py_compile: no __pycache__ in the source tree. */
    static const char parse[] =
        "python3 -c 'import ast, sys; ast.parse(open(sys.argv[1]).read(), sys.argv[1])'";
    int rc = dt_run_capture(out, sizeof out, "%s '%s/scripts/bench_torch.py'", parse, SRC);
    if (rc != 0) fprintf(stderr, "%s\n", out);
    CHECK_INT_EQ(rc, 0);
    const char *dir = scratch("pysyntax");
    CHECK(dt_run_capture(out, sizeof out, "printf 'def f(:\\n' >'%s/bad.py' && %s '%s/bad.py'", dir,
                         parse, dir) != 0);
    /* --help works without PyTorch (it only parses arguments). */
    CHECK_INT_EQ(dt_run_capture(out, sizeof out, "python3 '%s/scripts/bench_torch.py' --help", SRC),
                 0);
    CHECK_CONTAINS(out, "--device");
}

/* ---- gpu_deps.sh install on fake .debs ------------------------------------------------------ */

static int install(const char *debs, const char *prefix)
{
    return dt_run_capture(out, sizeof out, "bash '%s/scripts/gpu_deps.sh' install '%s' '%s'", SRC,
                          debs, prefix);
}

DT_TEST(deps_install_fake)
{
    if (dt_run_capture(out, sizeof out, "command -v dpkg-deb") != 0) DT_SKIP("no dpkg-deb");
    const char *dir = scratch("deps");
    char debs[1100], prefix[1100];
    snprintf(debs, sizeof debs, "%s/debs", dir);
    snprintf(prefix, sizeof prefix, "%s/prefix", dir);
    int rc = dt_run_capture(out, sizeof out, "bash '%s/tests/gpu_deps_fake.sh' '%s'", SRC, debs);
    CHECK_INT_EQ(rc, 0);
    if (rc != 0) {
        fprintf(stderr, "%s\n", out);
        return;
    }

    rc = install(debs, prefix);
    if (rc != 0) fprintf(stderr, "%s\n", out);
    CHECK_INT_EQ(rc, 0);
    char want[8192];
    snprintf(want, sizeof want, "export DETRAIN_DATA='%s/usr/share/datasets/fashion-mnist'",
             prefix);
    CHECK_CONTAINS(out, want);
    CHECK_CONTAINS(out, "versions (yaml-0.1 openblas libcrypto zlib): 0.2.5 0.3.21 3.0.22 1.2.13");

    /* .pc files: ${prefix}-based ones get a new prefix; absolute paths and flags move. */
    char *pc = read_text("%s/usr/lib/x86_64-linux-gnu/pkgconfig/%s", prefix, "yaml-0.1.pc");
    if (pc) {
        snprintf(want, sizeof want, "prefix=%s/usr\nexec_prefix=${prefix}\nlibdir=${prefix}/lib/",
                 prefix);
        CHECK_CONTAINS(pc, want);
        free(pc);
    }
    char *blas = read_text("%s/usr/lib/x86_64-linux-gnu/openblas-pthread/pkgconfig/%s", prefix,
                           "openblas.pc");
    if (blas) {
        snprintf(want, sizeof want, "libdir=%s/usr/lib/x86_64-linux-gnu/openblas-pthread/\n",
                 prefix);
        CHECK_CONTAINS(blas, want);
        snprintf(want, sizeof want,
                 "includedir=%s/usr/include/x86_64-linux-gnu/openblas-pthread/\n", prefix);
        CHECK_CONTAINS(blas, want);
        snprintf(want, sizeof want, "Libs.private: -L%s/usr/lib/extra ${extralib}\n", prefix);
        CHECK_CONTAINS(blas, want);
        snprintf(want, sizeof want, "Cflags: -I${includedir} -I%s/usr/include/extra\n", prefix);
        CHECK_CONTAINS(blas, want);
        CHECK_CONTAINS(blas, "Libs: -L${libdir} -lopenblas\n");
        free(blas);
    }
    /* zlib's absolute libz.so link now points into the prefix. */
    CHECK_INT_EQ(
        dt_run_capture(out, sizeof out, "readlink '%s/usr/lib/x86_64-linux-gnu/libz.so'", prefix),
        0);
    snprintf(want, sizeof want, "%s/lib/x86_64-linux-gnu/libz.so.1\n", prefix);
    CHECK_STR_EQ(out, want);
    /* runtime-lib: what the host lacks, not what it has (every host here has libz.so.1). */
    char path[2048];
    snprintf(path, sizeof path, "%s/runtime-lib/libdtfakeonly.so.7", prefix);
    CHECK(dt_path_exists(path));
    snprintf(path, sizeof path, "%s/runtime-lib/libz.so.1", prefix);
    CHECK(!dt_path_exists(path));

    /* env.sh, sourced twice in a clean environment: each folder once. */
    rc = dt_run_capture(
        out, sizeof out,
        "env -i PATH=/usr/bin:/bin bash -c '. \"%s/env.sh\"; . \"%s/env.sh\"; "
        "echo \"$PKG_CONFIG_PATH|$CMAKE_PREFIX_PATH|$CPATH|$LD_LIBRARY_PATH|$DETRAIN_DATA\"; "
        "if type dt_deps_prepend >/dev/null 2>&1; then echo leaked; fi'",
        prefix, prefix);
    CHECK_INT_EQ(rc, 0);
    snprintf(want, sizeof want,
             "%s/usr/lib/x86_64-linux-gnu/openblas-pthread/pkgconfig:%s/usr/lib/x86_64-linux-gnu/"
             "pkgconfig|"
             "%s/usr|%s/usr/include/x86_64-linux-gnu|%s/runtime-lib|%s/usr/share/datasets/"
             "fashion-mnist\n",
             prefix, prefix, prefix, prefix, prefix, prefix);
    CHECK_STR_EQ(out, want);
    /* The prefix's pkg-config finds the moved .pc files. */
    rc = dt_run_capture(out, sizeof out,
                        "bash -c '. \"%s/env.sh\"; PKG_CONFIG_LIBDIR=$PKG_CONFIG_PATH "
                        "\"%s/bin/pkg-config\" --modversion openblas zlib'",
                        prefix, prefix);
    CHECK_INT_EQ(rc, 0);
    CHECK_STR_EQ(out, "0.3.21\n1.2.13\n");

    /* Idempotent: a second install leaves the same files (env.sh but its time stamp). */
    CHECK_INT_EQ(dt_run_capture(out, sizeof out,
                                "cd '%s' && find . -name '*.pc' -exec cat {} + >'%s/pc1' && "
                                "grep -v '^# Written' env.sh >'%s/env1'",
                                prefix, dir, dir),
                 0);
    CHECK_INT_EQ(install(debs, prefix), 0);
    CHECK_INT_EQ(dt_run_capture(out, sizeof out,
                                "cd '%s' && find . -name '*.pc' -exec cat {} + >'%s/pc2' && "
                                "grep -v '^# Written' env.sh >'%s/env2'",
                                prefix, dir, dir),
                 0);
    char a[1200], b[1200];
    snprintf(a, sizeof a, "%s/pc1", dir);
    snprintf(b, sizeof b, "%s/pc2", dir);
    CHECK(dt_files_equal(a, b));
    snprintf(a, sizeof a, "%s/env1", dir);
    snprintf(b, sizeof b, "%s/env2", dir);
    CHECK(dt_files_equal(a, b));

    /* Refusals, each with its message. */
    CHECK_INT_EQ(install(debs, "/"), 1);
    CHECK_CONTAINS(out, "refusing to unpack into /");
    CHECK_INT_EQ(install(debs, "/usr"), 1);
    CHECK_CONTAINS(out, "refusing to unpack into /usr");
    snprintf(path, sizeof path, "%s/has space", dir);
    CHECK_INT_EQ(install(debs, path), 1);
    CHECK_CONTAINS(out, "has characters other than");
    snprintf(path, sizeof path, "%s/nowhere", dir);
    CHECK_INT_EQ(install(path, prefix), 1);
    CHECK_CONTAINS(out, "no such folder");
    snprintf(path, sizeof path, "%s/empty", dir);
    CHECK_INT_EQ(dt_run_capture(out, sizeof out, "mkdir -p '%s'", path), 0);
    CHECK_INT_EQ(install(path, prefix), 1);
    CHECK_CONTAINS(out, "no .deb files");
    CHECK_INT_EQ(dt_run_capture(out, sizeof out, "bash '%s/scripts/gpu_deps.sh' unpack", SRC), 2);
    CHECK_CONTAINS(out, "unknown mode 'unpack'");
    CHECK_INT_EQ(
        dt_run_capture(out, sizeof out, "bash '%s/scripts/gpu_deps.sh' install '%s'", SRC, debs),
        2);
    CHECK_CONTAINS(out, "usage:");
    /* A cut-short copy: MANIFEST names a file that is not there / one that changed. */
    char part[1100];
    snprintf(part, sizeof part, "%s/partial", dir);
    CHECK_INT_EQ(dt_run_capture(out, sizeof out, "cp -r '%s' '%s' && rm '%s'/dt-fake-data_*.deb",
                                debs, part, part),
                 0);
    CHECK_INT_EQ(install(part, prefix), 1);
    CHECK_CONTAINS(out, "missing: dt-fake-data_1.0-1_amd64.deb");
    CHECK_CONTAINS(out, "does not match its MANIFEST");
    CHECK_INT_EQ(dt_run_capture(out, sizeof out,
                                "cp '%s'/dt-fake-data_*.deb '%s' && "
                                "printf x >>'%s'/dt-fake-dev_1.0-1_amd64.deb",
                                debs, part, part),
                 0);
    CHECK_INT_EQ(install(part, prefix), 1);
    CHECK_CONTAINS(out, "corrupt: dt-fake-dev_1.0-1_amd64.deb");
    /* Without MANIFEST and without the dataset: the missing files name their package. */
    CHECK_INT_EQ(dt_run_capture(out, sizeof out,
                                "rm -f '%s'/MANIFEST '%s'/dt-fake-data_*.deb && "
                                "cp '%s'/dt-fake-dev_*.deb '%s'",
                                part, part, debs, part),
                 0);
    snprintf(path, sizeof path, "%s/prefix2", dir);
    CHECK_INT_EQ(install(part, path), 1);
    CHECK_CONTAINS(out, "warning: no");
    CHECK_CONTAINS(out, "train-images-idx3-ubyte.gz (package dataset-fashion-mnist)");
    CHECK_CONTAINS(out, "lack files detrain needs");
}

/* ---- gpu_session.sh ----------------------------------------------------------------------- */

DT_TEST(session_plan)
{
    int rc = dt_run_capture(out, sizeof out,
                            "DT_GPU_NAME='NVIDIA H100 80GB HBM3' bash '%s/scripts/gpu_session.sh' "
                            "--dry-run --deps none all",
                            SRC);
    CHECK_INT_EQ(rc, 0);
    static const char *want[] = {
        "[info] bash scripts/gpu_session.sh __versions "
        "results/nvidia-h100-80gb-hbm3/info/versions.txt",
        "-DDETRAIN_CUDA=ON",
        "[tests] bash scripts/gpu_session.sh __ctest_gpu build-gpu ",
        /* smoke: every model at every level, launches synchronous */
        "[smoke] env CUDA_LAUNCH_BLOCKING=1 build-gpu/detrain run configs/lenet.yaml --out "
        "results/nvidia-h100-80gb-hbm3/smoke/lenet-run_to_run --set backend.device=cuda "
        "--set train.steps=5 --set replicas=1 --set 'policies=[run_to_run]'",
        "[smoke] env CUDA_LAUNCH_BLOCKING=1 build-gpu/detrain run configs/bnn.yaml --out "
        "results/nvidia-h100-80gb-hbm3/smoke/bnn-portable ",
        /* sanitizers: every gpu test case under each tool, a log each */
        "[memcheck] bash scripts/gpu_session.sh __sanitize build-gpu memcheck "
        "results/nvidia-h100-80gb-hbm3/logs/sanitize-memcheck.log\n",
        "[racecheck] bash scripts/gpu_session.sh __sanitize build-gpu racecheck "
        "results/nvidia-h100-80gb-hbm3/logs/sanitize-racecheck.log\n",
        "  memcheck planned",
        /* runs: on the GPU only, replicas against replica 0, portable against the CPU reference */
        "[runs] build-gpu/detrain run configs/quickstart.yaml --out "
        "results/nvidia-h100-80gb-hbm3/runs/quickstart-cuda --set backend.device=cuda "
        "--set 'policies=[fast, run_to_run, portable]' --set replicas=5 --set train.steps=100",
        "[runs] build-gpu/detrain compare "
        "results/nvidia-h100-80gb-hbm3/runs/lenet-cuda/run_to_run/replica-0 "
        "results/nvidia-h100-80gb-hbm3/runs/lenet-cuda/run_to_run/replica-4\n",
        "[runs] build-gpu/detrain compare "
        "results/nvidia-h100-80gb-hbm3/runs/bnn-cuda/fast/replica-0 "
        "results/nvidia-h100-80gb-hbm3/runs/bnn-cuda/fast/replica-1\n",
        "[runs] build-gpu/detrain compare results/cpu/crossdev-t2/mlp/portable/replica-0 "
        "results/nvidia-h100-80gb-hbm3/runs/quickstart-cuda/portable/replica-0\n",
        "--set backend.device=cuda --set 'policies=[fast, run_to_run, portable]'",
        "[bench] build-gpu/detrain bench configs/bnn.yaml --steps 40 --warmup 4 --baseline first",
        "[torch] python3 scripts/bench_torch.py --config configs/quickstart.yaml --device cuda",
        "  torch    planned",
        /* LeNet in bench, with and without overlapping pools */
        "[bench] build-gpu/detrain bench configs/lenet.yaml --steps 100 --warmup 10 --set "
        "backend.device=cuda "
        "--set 'policies=[fast, run_to_run, portable]' --csv "
        "results/nvidia-h100-80gb-hbm3/bench/detrain-cuda-lenet.csv",
        "[bench] build-gpu/detrain bench configs/lenet.yaml --steps 100 --warmup 10 --set "
        "backend.device=cuda "
        "--set model.overlap_pool=true --set 'policies=[fast, run_to_run, portable]' "
        "--csv results/nvidia-h100-80gb-hbm3/bench/detrain-cuda-lenet-overlap.csv",
        "[torch] python3 scripts/bench_torch.py --model lenet --config configs/lenet.yaml --device "
        "cuda "
        "--steps 500 --warmup 50 --csv results/nvidia-h100-80gb-hbm3/bench/torch-lenet.csv",
        "[torch] python3 scripts/bench_torch.py --model lenet --config configs/lenet.yaml --device "
        "cuda "
        "--overlap-pool --steps 500 --warmup 50 --csv "
        "results/nvidia-h100-80gb-hbm3/bench/torch-lenet.csv",
        /* crossdev and matrix */
        "[crossdev] env DETRAIN=build-gpu/detrain bash scripts/cross_device.sh run cuda "
        "results/nvidia-h100-80gb-hbm3/crossdev\n",
        " bash scripts/cross_device.sh table results/cpu/crossdev-t2 results/cpu/crossdev-t1 "
        "results/nvidia-h100-80gb-hbm3/crossdev --out "
        "results/nvidia-h100-80gb-hbm3/cross_device.md\n",
        "[matrix] build-gpu/detrain run configs/overhead_matrix.yaml --out "
        "results/nvidia-h100-80gb-hbm3/overhead_matrix\n",
        "  crossdev planned",
        "  matrix   planned",
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) CHECK_CONTAINS(out, want[i]);
    /* No CPU-only test and no CPU training in device time (the CPU references are made
     * beforehand; bench's one CPU line is for scale). */
    CHECK(strstr(out, "-L unit") == NULL);
    CHECK(strstr(out, "run cpu ") == NULL);
    CHECK(strstr(out, "--set backend.device=cpu --set report") == NULL);
    /* The plan's calls: call1 is build, smoke, tests and memcheck, in that order. */
    CHECK_INT_EQ(dt_run_capture(out, sizeof out,
                                "DT_GPU_NAME=X bash '%s/scripts/gpu_session.sh' "
                                "--dry-run --deps none call1",
                                SRC),
                 0);
    CHECK(strstr(out, "[build] ") && strstr(out, "[smoke] ") && strstr(out, "[tests] ") &&
          strstr(out, "[memcheck] ") && !strstr(out, "[runs] ") && !strstr(out, "[racecheck] "));
    CHECK(strstr(out, "[build] ") < strstr(out, "[smoke] ") &&
          strstr(out, "[smoke] ") < strstr(out, "[tests] ") &&
          strstr(out, "[tests] ") < strstr(out, "[memcheck] "));
    /* A dry run writes nothing. */
    CHECK(!dt_path_exists(SRC "/results/nvidia-h100-80gb-hbm3"));

    /* Only the steps asked for, info always first. */
    CHECK_INT_EQ(dt_run_capture(out, sizeof out,
                                "bash '%s/scripts/gpu_session.sh' --dry-run --deps none "
                                "--results /tmp/x bench",
                                SRC),
                 0);
    CHECK_CONTAINS(out, "[info] ");
    CHECK_CONTAINS(out, "[bench] ");
    CHECK(strstr(out, "[build] ") == NULL);
    CHECK(strstr(out, "[info] ") < strstr(out, "[bench] "));

    CHECK_INT_EQ(dt_run_capture(out, sizeof out, "bash '%s/scripts/gpu_session.sh' biuld", SRC), 2);
    CHECK_CONTAINS(out, "unknown step or option 'biuld'");
    CHECK_INT_EQ(dt_run_capture(out, sizeof out,
                                "bash '%s/scripts/gpu_session.sh' --time-limit 9m runs", SRC),
                 2);
    CHECK_CONTAINS(out, "--time-limit: seconds");
    CHECK_INT_EQ(dt_run_capture(out, sizeof out, "bash '%s/scripts/gpu_session.sh'", SRC), 2);
    CHECK_CONTAINS(out, "usage:");
}

DT_TEST(session_continues_after_failures)
{
    const char *dir = scratch("session");
    /* No build: `tests` and `runs` fail at once, `info` runs, the summary names each, the
     * session file holds the commands, and --tar packs the folder. */
    int rc = dt_run_capture(
        out, sizeof out,
        "cd '%s' && DT_GPU_NAME='Test GPU' bash '%s/scripts/gpu_session.sh' --deps none "
        "--build nobuild --results res --tar res.tar.gz tests runs",
        dir, SRC);
    CHECK_INT_EQ(rc, 1);
    CHECK_CONTAINS(out, "summary (Test GPU, ");
    CHECK_CONTAINS(out, "  deps     passed");
    CHECK_CONTAINS(out, "  tests    FAILED");
    CHECK_CONTAINS(out, "  runs     FAILED");
    CHECK_CONTAINS(out, "  info     ");
    CHECK_CONTAINS(out, "tests: no ");
    CHECK_CONTAINS(out, "nobuild/detrain: put the build step first");
    CHECK_CONTAINS(out, "/res.tar.gz (");
    char path[2048];
    snprintf(path, sizeof path, "%s/res/logs/info.log", dir);
    CHECK(dt_path_exists(path));
    snprintf(path, sizeof path, "%s/res/info/source.sha256", dir);
    CHECK(dt_path_exists(path));
    CHECK_INT_EQ(dt_run_capture(out, sizeof out, "cat '%s'/res/session-*.txt", dir), 0);
    CHECK_CONTAINS(out, "# command (in ");
    CHECK_CONTAINS(out, "bash scripts/gpu_session.sh __source ");
    CHECK_CONTAINS(out, "#   runs     FAILED");
    CHECK_INT_EQ(dt_run_capture(out, sizeof out, "tar -tzf '%s/res.tar.gz'", dir), 0);
    CHECK_CONTAINS(out, "res/info/source.txt");
    CHECK_CONTAINS(out, "res/session-");

    /* Out of time: nothing starts, each step says so, the session still ends with a summary. */
    rc = dt_run_capture(out, sizeof out,
                        "cd '%s' && bash '%s/scripts/gpu_session.sh' --deps none "
                        "--results res2 --time-limit 3 runs 2>/dev/null",
                        dir, SRC);
    CHECK_INT_EQ(rc, 1);
    CHECK_CONTAINS(out, "  info     not run (time)");
    CHECK_CONTAINS(out, "  runs     not run (time)");
}

/* A scratch repo holding a copy of the session scripts and a stand-in detrain that logs its
 * arguments: the crossdev step's reference (the committed CPU runs when present, else this
 * machine's CPU) and the matrix step, which fails loudly without its config. */
DT_TEST(session_crossdev_and_matrix)
{
    const char *dir = scratch("fakerepo");
    int rc = dt_run_capture(out, sizeof out,
                            "cd '%s' && mkdir -p scripts fakebuild configs && "
                            "cp '%s/scripts/gpu_session.sh' '%s/scripts/cross_device.sh' "
                            "'%s/scripts/lib.sh' scripts/ && "
                            "printf '#!/bin/sh\\necho \"$*\" >>\"$(dirname \"$0\")/calls.txt\"\\n' "
                            ">fakebuild/detrain && chmod +x fakebuild/detrain",
                            dir, SRC, SRC, SRC);
    CHECK_INT_EQ(rc, 0);
    /* Without the committed reference: the step fails, saying how to make it beforehand
     * (no CPU training in device time); nothing is trained. */
    rc = dt_run_capture(out, sizeof out,
                        "cd '%s' && DT_GPU_NAME=Fake bash scripts/gpu_session.sh "
                        "--deps none --build fakebuild --results res crossdev",
                        dir);
    CHECK_INT_EQ(rc, 1);
    CHECK_CONTAINS(out, "no results/cpu/crossdev-t2/mlp/config.json (the committed CPU reference");
    CHECK_CONTAINS(out, "  crossdev FAILED");
    char want[4096];
    snprintf(want, sizeof want, "%s/fakebuild/calls.txt", dir);
    CHECK(!dt_path_exists(want));
    /* With it: the committed reference first, then this GPU's runs. */
    CHECK_INT_EQ(dt_run_capture(out, sizeof out,
                                "cd '%s' && mkdir -p results/cpu/crossdev-t2/mlp && "
                                "echo '{}' >results/cpu/crossdev-t2/mlp/config.json",
                                dir),
                 0);
    rc = dt_run_capture(out, sizeof out,
                        "cd '%s' && bash scripts/gpu_session.sh --dry-run --deps none "
                        "--results res crossdev",
                        dir);
    CHECK_INT_EQ(rc, 0);
    snprintf(want, sizeof want,
             "bash scripts/cross_device.sh table results/cpu/crossdev-t2 "
             "%s/res/crossdev --out %s/res/cross_device.md\n",
             dir, dir);
    CHECK_CONTAINS(out, want);
    CHECK(strstr(out, "committed CPU reference") == NULL);
    CHECK(strstr(out, "run cpu") == NULL);

    /* matrix without configs/overhead_matrix.yaml: FAILED, saying why; detrain not called. */
    rc = dt_run_capture(out, sizeof out,
                        "cd '%s' && DT_GPU_NAME=Fake bash scripts/gpu_session.sh "
                        "--deps none --build fakebuild --results res matrix",
                        dir);
    CHECK_INT_EQ(rc, 1);
    CHECK_CONTAINS(out, "matrix: configs/overhead_matrix.yaml does not exist in this tree");
    CHECK_CONTAINS(out, "  matrix   FAILED");
    snprintf(want, sizeof want, "%s/fakebuild/calls.txt", dir);
    CHECK(!dt_path_exists(want));
    /* With it: detrain run CONFIG --out RESULTS/overhead_matrix, and the step passes. */
    rc =
        dt_run_capture(out, sizeof out,
                       "cd '%s' && touch configs/overhead_matrix.yaml && "
                       "DT_GPU_NAME=Fake bash scripts/gpu_session.sh --deps none --build fakebuild "
                       "--results res matrix; cat fakebuild/calls.txt",
                       dir);
    CHECK_CONTAINS(out, "  matrix   passed");
    snprintf(want, sizeof want, "run configs/overhead_matrix.yaml --out %s/res/overhead_matrix\n",
             dir);
    CHECK_CONTAINS(out, want);
}

/* ---- cross_device.sh ----------------------------------------------------------------------- */

#define XD DT_TEST_TMP_DIR "/scripts-crossdev"

static int crossdev(const char *args)
{
    return dt_run_capture(out, sizeof out,
                          "cd '%s' && DETRAIN='%s' bash '%s/scripts/cross_device.sh' %s",
                          DT_TEST_TMP_DIR, DT_DETRAIN_EXE, SRC, args);
}

/* Short real runs of the three models on 2 and 1 CPU threads: equal tables; then a root
 * whose LeNet trace was altered, one without its BNN run, one that cannot be compared; and
 * a run on a device this machine lacks fails loudly. */
DT_TEST(cross_device_cpu)
{
    const char *dir = scratch("crossdev");
    (void)dir;
    static const char small[] =
        "--steps 3 --set dataset.train_limit=2000 --set dataset.test_limit=300";
    char args[1024];
    snprintf(args, sizeof args, "run cpu scripts-crossdev/t2 --threads 2 %s", small);
    int rc = crossdev(args);
    if (rc != 0) fprintf(stderr, "%s\n", out);
    CHECK_INT_EQ(rc, 0);
    CHECK_CONTAINS(out, "cross_device: lenet on cpu: done in ");
    snprintf(args, sizeof args, "run cpu scripts-crossdev/t1 --threads 1 %s", small);
    CHECK_INT_EQ(crossdev(args), 0);
    char *cmds = read_text("%s/%s", DT_TEST_TMP_DIR, "scripts-crossdev/t1/commands.txt");
    if (cmds) {
        /* paths as seen from the repo root, where the script runs: absolute here */
        CHECK_CONTAINS(cmds, "# scripts/cross_device.sh run cpu " XD "/t1 --threads 1 --steps 3 ");
        CHECK_CONTAINS(cmds, " run configs/lenet.yaml --out " XD "/t1/lenet --quiet "
                             "--set 'policies=[portable]' --set replicas=1 --set train.steps=3 "
                             "--set hash.per_tensor=true --set report.snapshots=0 "
                             "--set report.overhead_samples=0 --set backend.device=cpu "
                             "--set backend.threads=1 --set dataset.train_limit=2000");
        CHECK_CONTAINS(cmds, "# exit 0 after ");
        CHECK_CONTAINS(cmds, "# detrain 0.1.0 (git ");
        free(cmds);
    }
    char snap[1200];
    snprintf(snap, sizeof snap, "%s/scripts-crossdev/t1/mlp/portable/replica-0/snapshots",
             DT_TEST_TMP_DIR);
    CHECK(!dt_path_exists(snap));

    CHECK_INT_EQ(
        crossdev("table scripts-crossdev/t2 scripts-crossdev/t1 --out scripts-crossdev/t.md"), 0);
    char *md = read_text("%s/%s", DT_TEST_TMP_DIR, "scripts-crossdev/t.md");
    if (md) {
        CHECK_CONTAINS(md, "# Cross-device digest table\n");
        CHECK_CONTAINS(md, "- mlp: identical\n- lenet: identical\n- bnn: identical\n");
        CHECK_CONTAINS(md, "- made by: `scripts/cross_device.sh table scripts-crossdev/t2 "
                           "scripts-crossdev/t1 --out scripts-crossdev/t.md`");
        CHECK_CONTAINS(md, "## lenet (configs/lenet.yaml)\n");
        CHECK_CONTAINS(md, " compare --table " XD "/t2/bnn " XD "/t1/bnn` (exit 0)");
        CHECK_CONTAINS(md, "| portable/replica-0 | identical (4 steps) |");
        CHECK_CONTAINS(md, "# scripts/cross_device.sh run cpu " XD "/t2 --threads 2");
        free(md);
    }

    /* LeNet altered at step 2 in a third root, its BNN run gone. */
    CHECK_INT_EQ(
        dt_run_capture(out, sizeof out,
                       "cd '%s/scripts-crossdev' && cp -r t1 bad && rm -r bad/bnn && "
                       "f=bad/lenet/portable/replica-0/trace.csv && awk -F, -v OFS=, 'NR == 4 "
                       "{ c = substr($3, 1, 1); $3 = (c == \"a\" ? \"b\" : \"a\") substr($3, 2) } "
                       "{ print }' $f >t.new && ! cmp -s t.new $f && mv t.new $f && "
                       "awk -F, 'NR == 4 { print $1 }' bad/lenet/portable/replica-0/trace.csv",
                       DT_TEST_TMP_DIR),
        0);
    CHECK_STR_EQ(out, "2\n");
    rc = crossdev("table scripts-crossdev/t2 scripts-crossdev/t1 scripts-crossdev/bad "
                  "--label ref --label one --label bad");
    CHECK_INT_EQ(rc, 1);
    CHECK_CONTAINS(out, "- mlp: identical\n");
    CHECK_CONTAINS(out, "- lenet: DIFFERS (see its table)\n");
    CHECK_CONTAINS(out, "- bnn: identical; MISSING: no run in " XD "/bad\n");
    CHECK_CONTAINS(out, "| replica | one | bad |\n");
    CHECK_CONTAINS(out, "- `" XD "/bad/bnn`: no experiment (no config.json)");

    /* Refusals, loudly. */
    CHECK_INT_EQ(crossdev("table scripts-crossdev/t2 scripts-crossdev/nonexistent"), 2);
    CHECK_CONTAINS(out, "scripts-crossdev/nonexistent: no such folder");
    CHECK_INT_EQ(crossdev("table scripts-crossdev/t2"), 2);
    CHECK_CONTAINS(out, "needs a reference root and at least one more");
    CHECK_INT_EQ(crossdev("run gpu scripts-crossdev/x"), 2);
    CHECK_CONTAINS(out, "DEVICE is cpu or cuda, not 'gpu'");
    CHECK_INT_EQ(crossdev("run cpu scripts-crossdev/x --threads two"), 2);
    CHECK_CONTAINS(out, "--threads: a number");
    CHECK_INT_EQ(crossdev("frobnicate"), 2);
    CHECK_CONTAINS(out, "unknown mode 'frobnicate'");
    CHECK_CONTAINS(out, "usage:");
    CHECK_INT_EQ(dt_run_capture(out, sizeof out,
                                "DETRAIN=/nonexistent/detrain bash '%s/scripts/cross_device.sh' "
                                "run cpu '%s/scripts-crossdev/x'",
                                SRC, DT_TEST_TMP_DIR),
                 2);
    CHECK_CONTAINS(out, "DETRAIN=/nonexistent/detrain: no such executable");
    /* No GPU here (or a build without CUDA): every model fails, each says why, exit 1. */
    if (dt_run_capture(out, sizeof out, "nvidia-smi -L 2>/dev/null | grep -q GPU") != 0) {
        CHECK_INT_EQ(crossdev("run cuda scripts-crossdev/gpu --steps 2"), 1);
        CHECK_CONTAINS(out, "cross_device: FAILED: mlp on cuda (exit 2");
        CHECK_CONTAINS(out, "cross_device: FAILED: bnn on cuda (exit 2");
        CHECK_CONTAINS(out, "  detrain: ");
        char *c = read_text("%s/%s", DT_TEST_TMP_DIR, "scripts-crossdev/gpu/commands.txt");
        if (c) CHECK_CONTAINS(c, "# exit 2 after ");
        free(c);
    }
}

/* ---- bench_torch.py ------------------------------------------------------------------------ */

DT_TEST(bench_torch_cpu)
{
    if (dt_run_capture(out, sizeof out, "python3 -c 'import torch'") != 0)
        DT_SKIP("PyTorch is not installed");
    const char *dir = scratch("torch");
    int rc = dt_run_capture(
        out, sizeof out,
        "cd '%s' && python3 '%s/scripts/bench_torch.py' --config '%s/configs/quickstart.yaml' "
        "--device cpu --steps 5 --warmup 1 --modes default,deterministic --data random "
        "--batch 32 --csv t.csv 2>/dev/null",
        dir, SRC, SRC);
    CHECK_INT_EQ(rc, 0);
    CHECK_CONTAINS(out, " default: cpu, MLP 784-256-128-10, batch 32, random data: median ");
    CHECK_CONTAINS(out, " deterministic: cpu, ");
    CHECK_CONTAINS(out, "deterministic on");
    CHECK_CONTAINS(out, "torch deterministic vs default: ");
    char csv[1200], field[256];
    snprintf(csv, sizeof csv, "%s/t.csv", dir);
    char *text = dt_read_file(csv, NULL);
    CHECK(text != NULL);
    if (text) {
        static const char head[] = "mode,steps,median_ms,p10_ms,p90_ms,device,torch,tf32_matmul,";
        CHECK(strncmp(text, head, strlen(head)) == 0);
        free(text);
    }
    CHECK_INT_EQ(dt_csv_col(field, sizeof field, csv, 0, "mode"), 0);
    CHECK_STR_EQ(field, "default");
    CHECK_INT_EQ(dt_csv_col(field, sizeof field, csv, 1, "mode"), 0);
    CHECK_STR_EQ(field, "deterministic");
    CHECK_INT_EQ(dt_csv_col(field, sizeof field, csv, 1, "deterministic"), 0);
    CHECK_STR_EQ(field, "true");
    CHECK_INT_EQ(dt_csv_col(field, sizeof field, csv, 0, "deterministic"), 0);
    CHECK_STR_EQ(field, "false");
    CHECK_INT_EQ(dt_csv_col(field, sizeof field, csv, 0, "steps"), 0);
    CHECK_STR_EQ(field, "5");
    CHECK_INT_EQ(dt_csv_col(field, sizeof field, csv, 0, "batch"), 0);
    CHECK_STR_EQ(field, "32");
    CHECK_INT_EQ(dt_csv_col(field, sizeof field, csv, 0, "median_ms"), 0);
    CHECK(atof(field) > 0);
    /* Both modes train the same model on the CPU from the same seed: the same weights. */
    char w0[128], w1[128];
    CHECK_INT_EQ(dt_csv_col(w0, sizeof w0, csv, 0, "weights_sha256"), 0);
    CHECK_INT_EQ(dt_csv_col(w1, sizeof w1, csv, 1, "weights_sha256"), 0);
    CHECK_INT_EQ((int)strlen(w0), 64);
    CHECK_STR_EQ(w0, w1);

    CHECK_INT_EQ(dt_run_capture(out, sizeof out,
                                "python3 '%s/scripts/bench_torch.py' --device cpu --modes fastest",
                                SRC),
                 2);
    CHECK_CONTAINS(out, "--modes: unknown fastest");

    /* LeNet: the default modes (default, benchmark, deterministic), 2x2 then overlapping
     * pools into one CSV of its own header; on the CPU every mode gives the same weights. */
    rc = dt_run_capture(
        out, sizeof out,
        "cd '%s' && python3 '%s/scripts/bench_torch.py' --model lenet --device cpu "
        "--steps 3 --warmup 1 --data random --batch 16 --csv l.csv 2>/dev/null && "
        "python3 '%s/scripts/bench_torch.py' --config '%s/configs/lenet.yaml' --device cpu "
        "--overlap-pool --steps 3 --warmup 1 --modes benchmark --data random --batch 16 "
        "--csv l.csv 2>/dev/null",
        dir, SRC, SRC, SRC);
    CHECK_INT_EQ(rc, 0);
    CHECK_CONTAINS(
        out, " default: cpu, LeNet 6-16-120-84-10, pool 2x2s2, batch 16, random data: median ");
    CHECK_CONTAINS(out, " benchmark: cpu, LeNet 6-16-120-84-10, pool 2x2s2, ");
    CHECK_CONTAINS(out, "cuDNN benchmark on");
    CHECK_CONTAINS(out, " deterministic: cpu, LeNet ");
    CHECK_CONTAINS(out, " benchmark: cpu, LeNet 6-16-120-84-10, pool 3x3s2p1, batch 16");
    snprintf(csv, sizeof csv, "%s/l.csv", dir);
    text = dt_read_file(csv, NULL);
    CHECK(text != NULL);
    if (text) {
        static const char lhead[] = "mode,steps,median_ms,p10_ms,p90_ms,device,torch,tf32_matmul,"
                                    "tf32_cudnn,cudnn_benchmark,deterministic,batch,model,pool,";
        CHECK(strncmp(text, lhead, strlen(lhead)) == 0);
        free(text);
    }
    static const char *lmodes[] = {"default", "benchmark", "deterministic", "benchmark"};
    for (int i = 0; i < 4; i++) {
        CHECK_INT_EQ(dt_csv_col(field, sizeof field, csv, i, "mode"), 0);
        CHECK_STR_EQ(field, lmodes[i]);
        CHECK_INT_EQ(dt_csv_col(field, sizeof field, csv, i, "model"), 0);
        CHECK_STR_EQ(field, "lenet");
    }
    CHECK_INT_EQ(dt_csv_col(field, sizeof field, csv, 1, "cudnn_benchmark"), 0);
    CHECK_STR_EQ(field, "true");
    CHECK_INT_EQ(dt_csv_col(field, sizeof field, csv, 2, "cudnn_benchmark"), 0);
    CHECK_STR_EQ(field, "false");
    CHECK_INT_EQ(dt_csv_col(field, sizeof field, csv, 3, "pool"), 0);
    CHECK_STR_EQ(field, "3x3s2p1");
    CHECK_INT_EQ(dt_csv_col(w0, sizeof w0, csv, 0, "weights_sha256"), 0);
    CHECK_INT_EQ(dt_csv_col(w1, sizeof w1, csv, 2, "weights_sha256"), 0);
    CHECK_INT_EQ((int)strlen(w0), 64);
    CHECK_STR_EQ(w0, w1);
    CHECK_INT_EQ(dt_csv_col(w1, sizeof w1, csv, 3, "weights_sha256"), 0);
    CHECK(strcmp(w0, w1) != 0); /* the other pooling trains another network */
    /* One CSV per model: appending LeNet rows to the MLP's file is refused before training. */
    CHECK_INT_EQ(dt_run_capture(out, sizeof out,
                                "cd '%s' && python3 '%s/scripts/bench_torch.py' --model lenet "
                                "--device cpu --steps 2 --data random --csv t.csv",
                                dir, SRC),
                 2);
    CHECK_CONTAINS(out, "t.csv: its header is not the lenet header");
    CHECK_INT_EQ(dt_run_capture(out, sizeof out,
                                "python3 '%s/scripts/bench_torch.py' --model lenet "
                                "--config '%s/configs/quickstart.yaml' --device cpu",
                                SRC, SRC),
                 2);
    CHECK_CONTAINS(out, "--model lenet, but ");
    CHECK_INT_EQ(dt_run_capture(out, sizeof out,
                                "python3 '%s/scripts/bench_torch.py' --overlap-pool "
                                "--device cpu",
                                SRC),
                 2);
    CHECK_CONTAINS(out, "--overlap-pool: only for --model lenet");
    if (dt_run_capture(out, sizeof out,
                       "python3 -c 'import torch, sys; sys.exit(torch.cuda.is_available())'") ==
        0) {
        CHECK_INT_EQ(dt_run_capture(out, sizeof out,
                                    "python3 '%s/scripts/bench_torch.py' --device cuda "
                                    "--steps 2 --warmup 0 --modes default",
                                    SRC),
                     2);
        CHECK_CONTAINS(out, "torch.cuda.is_available() is False");
    }
}

/* ---- slow: the real archive -------------------------------------------------------------- */

DT_TEST(deps_fetch_build)
{
    char work[1100];
    snprintf(work, sizeof work, "%s/scripts-deps-real", DT_TEST_TMP_DIR);
    int rc = dt_run_capture(out, sizeof out, "bash '%s/tests/gpu_deps_check.sh' '%s' '%s'", SRC,
                            SRC, work);
    if (rc == 77) DT_SKIP("apt-get cannot download");
    if (rc != 0) fprintf(stderr, "%s\n", out);
    CHECK_INT_EQ(rc, 0);
    CHECK_CONTAINS(out, "gpu_deps_check: PASS");
}

DT_TEST_MAIN(DT_CASE(bash_syntax), DT_CASE(python_syntax), DT_CASE(deps_install_fake),
             DT_CASE(session_plan), DT_CASE(session_continues_after_failures),
             DT_CASE(session_crossdev_and_matrix), DT_CASE(cross_device_cpu),
             DT_CASE(bench_torch_cpu), DT_CASE(deps_fetch_build))
