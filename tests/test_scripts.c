/* The scripts that take detrain to a GPU machine (scripts/gpu_deps.sh, gpu_session.sh,
 * bench_torch.py), tested where no GPU and no network are needed: syntax; gpu_deps.sh
 * install on tiny fake .debs (tests/gpu_deps_fake.sh) -- .pc files moved into the prefix,
 * absolute symlinks re-pointed, env.sh, idempotence, every refusal; gpu_session.sh's plan,
 * its results folder and carrying on after failed steps; bench_torch.py on the CPU (skipped
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
    static const char *scripts[] = {"scripts/gpu_deps.sh", "scripts/gpu_session.sh",
                                    "scripts/setup.sh", "tests/gpu_deps_check.sh",
                                    "tests/gpu_deps_fake.sh"};
    for (size_t i = 0; i < sizeof scripts / sizeof scripts[0]; i++) {
        int rc = dt_run_capture(out, sizeof out, "bash -n '%s/%s'", SRC, scripts[i]);
        if (rc != 0) fprintf(stderr, "%s:\n%s\n", scripts[i], out);
        CHECK_INT_EQ(rc, 0);
    }
    /* The check itself can fail. */
    const char *dir = scratch("syntax");
    CHECK_INT_EQ(dt_run_capture(out, sizeof out, "printf 'if true; then\\n' >'%s/bad.sh' && "
                                "bash -n '%s/bad.sh'", dir, dir), 2);
}

DT_TEST(python_syntax)
{
    if (dt_run_capture(out, sizeof out, "python3 --version") != 0) DT_SKIP("no python3");
    /* ast.parse rather than py_compile: no __pycache__ in the source tree. */
    static const char parse[] = "python3 -c 'import ast, sys; ast.parse(open(sys.argv[1]).read(), sys.argv[1])'";
    int rc = dt_run_capture(out, sizeof out, "%s '%s/scripts/bench_torch.py'", parse, SRC);
    if (rc != 0) fprintf(stderr, "%s\n", out);
    CHECK_INT_EQ(rc, 0);
    const char *dir = scratch("pysyntax");
    CHECK(dt_run_capture(out, sizeof out, "printf 'def f(:\\n' >'%s/bad.py' && %s '%s/bad.py'", dir,
                         parse, dir) != 0);
    /* --help works without PyTorch (it only parses arguments). */
    CHECK_INT_EQ(dt_run_capture(out, sizeof out, "python3 '%s/scripts/bench_torch.py' --help", SRC), 0);
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
    snprintf(want, sizeof want, "export DETRAIN_DATA='%s/usr/share/datasets/fashion-mnist'", prefix);
    CHECK_CONTAINS(out, want);
    CHECK_CONTAINS(out, "versions (yaml-0.1 openblas libcrypto zlib): 0.2.5 0.3.21 3.0.22 1.2.13");

    /* .pc files: ${prefix}-based ones get a new prefix; absolute paths and flags move. */
    char *pc = read_text("%s/usr/lib/x86_64-linux-gnu/pkgconfig/%s", prefix, "yaml-0.1.pc");
    if (pc) {
        snprintf(want, sizeof want, "prefix=%s/usr\nexec_prefix=${prefix}\nlibdir=${prefix}/lib/", prefix);
        CHECK_CONTAINS(pc, want);
        free(pc);
    }
    char *blas = read_text("%s/usr/lib/x86_64-linux-gnu/openblas-pthread/pkgconfig/%s", prefix,
                           "openblas.pc");
    if (blas) {
        snprintf(want, sizeof want, "libdir=%s/usr/lib/x86_64-linux-gnu/openblas-pthread/\n", prefix);
        CHECK_CONTAINS(blas, want);
        snprintf(want, sizeof want, "includedir=%s/usr/include/x86_64-linux-gnu/openblas-pthread/\n", prefix);
        CHECK_CONTAINS(blas, want);
        snprintf(want, sizeof want, "Libs.private: -L%s/usr/lib/extra ${extralib}\n", prefix);
        CHECK_CONTAINS(blas, want);
        snprintf(want, sizeof want, "Cflags: -I${includedir} -I%s/usr/include/extra\n", prefix);
        CHECK_CONTAINS(blas, want);
        CHECK_CONTAINS(blas, "Libs: -L${libdir} -lopenblas\n");
        free(blas);
    }
    /* zlib's absolute libz.so link now points into the prefix. */
    CHECK_INT_EQ(dt_run_capture(out, sizeof out, "readlink '%s/usr/lib/x86_64-linux-gnu/libz.so'", prefix), 0);
    snprintf(want, sizeof want, "%s/lib/x86_64-linux-gnu/libz.so.1\n", prefix);
    CHECK_STR_EQ(out, want);
    /* runtime-lib: what the host lacks, not what it has (every host here has libz.so.1). */
    char path[2048];
    snprintf(path, sizeof path, "%s/runtime-lib/libdtfakeonly.so.7", prefix);
    CHECK(dt_path_exists(path));
    snprintf(path, sizeof path, "%s/runtime-lib/libz.so.1", prefix);
    CHECK(!dt_path_exists(path));

    /* env.sh, sourced twice in a clean environment: each folder once. */
    rc = dt_run_capture(out, sizeof out,
                        "env -i PATH=/usr/bin:/bin bash -c '. \"%s/env.sh\"; . \"%s/env.sh\"; "
                        "echo \"$PKG_CONFIG_PATH|$CMAKE_PREFIX_PATH|$CPATH|$LD_LIBRARY_PATH|$DETRAIN_DATA\"; "
                        "if type dt_deps_prepend >/dev/null 2>&1; then echo leaked; fi'",
                        prefix, prefix);
    CHECK_INT_EQ(rc, 0);
    snprintf(want, sizeof want,
             "%s/usr/lib/x86_64-linux-gnu/openblas-pthread/pkgconfig:%s/usr/lib/x86_64-linux-gnu/pkgconfig|"
             "%s/usr|%s/usr/include/x86_64-linux-gnu|%s/runtime-lib|%s/usr/share/datasets/fashion-mnist\n",
             prefix, prefix, prefix, prefix, prefix, prefix);
    CHECK_STR_EQ(out, want);
    /* The prefix's pkg-config finds the moved .pc files. */
    rc = dt_run_capture(out, sizeof out, "bash -c '. \"%s/env.sh\"; PKG_CONFIG_LIBDIR=$PKG_CONFIG_PATH "
                        "\"%s/bin/pkg-config\" --modversion openblas zlib'", prefix, prefix);
    CHECK_INT_EQ(rc, 0);
    CHECK_STR_EQ(out, "0.3.21\n1.2.13\n");

    /* Idempotent: a second install leaves the same files (env.sh but its time stamp). */
    CHECK_INT_EQ(dt_run_capture(out, sizeof out, "cd '%s' && find . -name '*.pc' -exec cat {} + >'%s/pc1' && "
                                "grep -v '^# Written' env.sh >'%s/env1'", prefix, dir, dir), 0);
    CHECK_INT_EQ(install(debs, prefix), 0);
    CHECK_INT_EQ(dt_run_capture(out, sizeof out, "cd '%s' && find . -name '*.pc' -exec cat {} + >'%s/pc2' && "
                                "grep -v '^# Written' env.sh >'%s/env2'", prefix, dir, dir), 0);
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
    CHECK_INT_EQ(dt_run_capture(out, sizeof out, "bash '%s/scripts/gpu_deps.sh' install '%s'", SRC, debs), 2);
    CHECK_CONTAINS(out, "usage:");
    /* A cut-short copy: MANIFEST names a file that is not there / one that changed. */
    char part[1100];
    snprintf(part, sizeof part, "%s/partial", dir);
    CHECK_INT_EQ(dt_run_capture(out, sizeof out, "cp -r '%s' '%s' && rm '%s'/dt-fake-data_*.deb", debs,
                                part, part), 0);
    CHECK_INT_EQ(install(part, prefix), 1);
    CHECK_CONTAINS(out, "missing: dt-fake-data_1.0-1_amd64.deb");
    CHECK_CONTAINS(out, "does not match its MANIFEST");
    CHECK_INT_EQ(dt_run_capture(out, sizeof out, "cp '%s'/dt-fake-data_*.deb '%s' && "
                                "printf x >>'%s'/dt-fake-dev_1.0-1_amd64.deb", debs, part, part), 0);
    CHECK_INT_EQ(install(part, prefix), 1);
    CHECK_CONTAINS(out, "corrupt: dt-fake-dev_1.0-1_amd64.deb");
    /* Without MANIFEST and without the dataset: the missing files name their package. */
    CHECK_INT_EQ(dt_run_capture(out, sizeof out, "rm -f '%s'/MANIFEST '%s'/dt-fake-data_*.deb && "
                                "cp '%s'/dt-fake-dev_*.deb '%s'", part, part, debs, part), 0);
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
                            "--dry-run --deps none all", SRC);
    CHECK_INT_EQ(rc, 0);
    static const char *want[] = {
        "[info] bash scripts/gpu_session.sh __versions results/nvidia-h100-80gb-hbm3/info/versions.txt",
        "-DDETRAIN_CUDA=ON",
        "[tests] bash scripts/gpu_session.sh __ctest_gpu build-gpu ",
        "[tests] ctest --test-dir build-gpu -L unit",
        "[runs] build-gpu/detrain run configs/quickstart.yaml --out "
        "results/nvidia-h100-80gb-hbm3/runs/quickstart-cuda --set backend.device=cuda "
        "--set report.snapshots=0",
        "[runs] build-gpu/detrain run configs/bnn.yaml --out results/nvidia-h100-80gb-hbm3/runs/bnn-cpu "
        "--set backend.device=cpu --set report.snapshots=0",
        "[runs] build-gpu/detrain compare results/nvidia-h100-80gb-hbm3/runs/quickstart-cpu "
        "results/nvidia-h100-80gb-hbm3/runs/quickstart-cuda",
        "--set backend.device=cuda --set 'policies=[fast, run_to_run, portable]'",
        "[bench] build-gpu/detrain bench configs/bnn.yaml --steps 40 --warmup 4 --baseline first",
        "[torch] python3 scripts/bench_torch.py --config configs/quickstart.yaml --device cuda",
        "  torch  planned",
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) CHECK_CONTAINS(out, want[i]);
    /* A dry run writes nothing. */
    CHECK(!dt_path_exists(SRC "/results/nvidia-h100-80gb-hbm3"));

    /* Only the steps asked for, info always first. */
    CHECK_INT_EQ(dt_run_capture(out, sizeof out, "bash '%s/scripts/gpu_session.sh' --dry-run --deps none "
                                "--results /tmp/x bench", SRC), 0);
    CHECK_CONTAINS(out, "[info] ");
    CHECK_CONTAINS(out, "[bench] ");
    CHECK(strstr(out, "[build] ") == NULL);
    CHECK(strstr(out, "[info] ") < strstr(out, "[bench] "));

    CHECK_INT_EQ(dt_run_capture(out, sizeof out, "bash '%s/scripts/gpu_session.sh' biuld", SRC), 2);
    CHECK_CONTAINS(out, "unknown step or option 'biuld'");
    CHECK_INT_EQ(dt_run_capture(out, sizeof out, "bash '%s/scripts/gpu_session.sh' --time-limit 9m runs", SRC), 2);
    CHECK_CONTAINS(out, "--time-limit: seconds");
    CHECK_INT_EQ(dt_run_capture(out, sizeof out, "bash '%s/scripts/gpu_session.sh'", SRC), 2);
    CHECK_CONTAINS(out, "usage:");
}

DT_TEST(session_continues_after_failures)
{
    const char *dir = scratch("session");
    /* No build: `tests` and `runs` fail at once, `info` runs, the summary names each, the
     * session file holds the commands, and --tar packs the folder. */
    int rc = dt_run_capture(out, sizeof out,
                            "cd '%s' && DT_GPU_NAME='Test GPU' bash '%s/scripts/gpu_session.sh' --deps none "
                            "--build nobuild --results res --tar res.tar.gz tests runs", dir, SRC);
    CHECK_INT_EQ(rc, 1);
    CHECK_CONTAINS(out, "summary (Test GPU, ");
    CHECK_CONTAINS(out, "  deps   passed");
    CHECK_CONTAINS(out, "  tests  FAILED");
    CHECK_CONTAINS(out, "  runs   FAILED");
    CHECK_CONTAINS(out, "  info   ");
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
    CHECK_CONTAINS(out, "#   runs   FAILED");
    CHECK_INT_EQ(dt_run_capture(out, sizeof out, "tar -tzf '%s/res.tar.gz'", dir), 0);
    CHECK_CONTAINS(out, "res/info/source.txt");
    CHECK_CONTAINS(out, "res/session-");

    /* Out of time: nothing starts, each step says so, the session still ends with a summary. */
    rc = dt_run_capture(out, sizeof out, "cd '%s' && bash '%s/scripts/gpu_session.sh' --deps none "
                        "--results res2 --time-limit 3 runs 2>/dev/null", dir, SRC);
    CHECK_INT_EQ(rc, 1);
    CHECK_CONTAINS(out, "  info   not run (time)");
    CHECK_CONTAINS(out, "  runs   not run (time)");
}

/* ---- bench_torch.py ------------------------------------------------------------------------ */

DT_TEST(bench_torch_cpu)
{
    if (dt_run_capture(out, sizeof out, "python3 -c 'import torch'") != 0)
        DT_SKIP("PyTorch is not installed");
    const char *dir = scratch("torch");
    int rc = dt_run_capture(out, sizeof out,
                            "cd '%s' && python3 '%s/scripts/bench_torch.py' --config '%s/configs/quickstart.yaml' "
                            "--device cpu --steps 5 --warmup 1 --modes default,deterministic --data random "
                            "--batch 32 --csv t.csv 2>/dev/null", dir, SRC, SRC);
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

    CHECK_INT_EQ(dt_run_capture(out, sizeof out, "python3 '%s/scripts/bench_torch.py' --device cpu --modes fastest",
                                SRC), 2);
    CHECK_CONTAINS(out, "--modes: unknown fastest");
    if (dt_run_capture(out, sizeof out, "python3 -c 'import torch, sys; sys.exit(torch.cuda.is_available())'") == 0) {
        CHECK_INT_EQ(dt_run_capture(out, sizeof out, "python3 '%s/scripts/bench_torch.py' --device cuda "
                                    "--steps 2 --warmup 0 --modes default", SRC), 2);
        CHECK_CONTAINS(out, "torch.cuda.is_available() is False");
    }
}

/* ---- slow: the real archive -------------------------------------------------------------- */

DT_TEST(deps_fetch_build)
{
    char work[1100];
    snprintf(work, sizeof work, "%s/scripts-deps-real", DT_TEST_TMP_DIR);
    int rc = dt_run_capture(out, sizeof out, "bash '%s/tests/gpu_deps_check.sh' '%s' '%s'", SRC, SRC, work);
    if (rc == 77) DT_SKIP("apt-get cannot download");
    if (rc != 0) fprintf(stderr, "%s\n", out);
    CHECK_INT_EQ(rc, 0);
    CHECK_CONTAINS(out, "gpu_deps_check: PASS");
}

DT_TEST_MAIN(DT_CASE(bash_syntax), DT_CASE(python_syntax), DT_CASE(deps_install_fake),
             DT_CASE(session_plan), DT_CASE(session_continues_after_failures),
             DT_CASE(bench_torch_cpu), DT_CASE(deps_fetch_build))
