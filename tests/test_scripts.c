/* The scripts that take detrain to a GPU machine (scripts/gpu_deps.sh, gpu_session.sh,
 * cross_device.sh, bench_torch.py), tested where no GPU and no network are needed: syntax;
 * gpu_deps.sh install on tiny fake .debs (tests/gpu_deps_fake.sh) -- .pc files moved into
 * the prefix, absolute symlinks re-pointed, env.sh, idempotence, every refusal;
 * gpu_session.sh's plan, its results folder, carrying on after failed steps, and its
 * crossdev and matrix steps in a scratch copy of the scripts with a stand-in detrain;
 * cross_device.sh on short real CPU runs; bench_torch.py (MLP and LeNet) on the CPU (skipped
 * without PyTorch). `slow`: the real fetch, a build from the prefix alone and a short run
 * (tests/gpu_deps_check.sh; skipped offline). */
#include <stdarg.h>

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
    static const char *scripts[] = {
        "scripts/gpu_deps.sh",    "scripts/gpu_session.sh", "scripts/cross_device.sh",
        "scripts/lib.sh",         "scripts/setup.sh",       "scripts/ranks.sh",
        "scripts/format.sh",      "scripts/results.sh",     "tests/gpu_deps_check.sh",
        "tests/gpu_deps_fake.sh", "scripts/vs_torch.sh",    "scripts/under_load.sh",
        "scripts/torch_python.sh"};
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
    static const char *const scripts[] = {"bench_torch.py", "torch_gpt.py",    "gpt_vs_torch.py",
                                          "torch_net.py",   "net_vs_torch.py", "detrain_replay.py"};
    for (size_t i = 0; i < sizeof scripts / sizeof scripts[0]; i++) {
        int rc = dt_run_capture(out, sizeof out, "%s '%s/scripts/%s'", parse, SRC, scripts[i]);
        if (rc != 0) fprintf(stderr, "%s\n", out);
        CHECK_INT_EQ(rc, 0);
    }
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
    snprintf(want, sizeof want, "export DETRAIN_DATA='%s/fashion-mnist-cut'", prefix);
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
             "%s/usr|%s/usr/include/x86_64-linux-gnu|%s/runtime-lib|%s/fashion-mnist-cut\n",
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
    CHECK_INT_EQ(dt_run_capture(out, sizeof out,
                                "cp -r '%s' '%s' && rm '%s'/fashion-mnist-cut/train-labels-*.gz",
                                debs, part, part),
                 0);
    CHECK_INT_EQ(install(part, prefix), 1);
    CHECK_CONTAINS(out, "missing: fashion-mnist-cut/train-labels-idx1-ubyte.gz");
    CHECK_CONTAINS(out, "does not match its MANIFEST");
    CHECK_INT_EQ(
        dt_run_capture(out, sizeof out,
                       "cp '%s'/fashion-mnist-cut/train-labels-*.gz '%s'/fashion-mnist-cut/ && "
                       "printf x >>'%s'/dt-fake-dev_1.0-1_amd64.deb",
                       debs, part, part),
        0);
    CHECK_INT_EQ(install(part, prefix), 1);
    CHECK_CONTAINS(out, "corrupt: dt-fake-dev_1.0-1_amd64.deb");
    /* Without MANIFEST and without the dataset: the missing files name their package. */
    CHECK_INT_EQ(dt_run_capture(out, sizeof out,
                                "rm -rf '%s'/MANIFEST '%s'/fashion-mnist-cut && "
                                "cp '%s'/dt-fake-dev_*.deb '%s'",
                                part, part, debs, part),
                 0);
    snprintf(path, sizeof path, "%s/prefix2", dir);
    CHECK_INT_EQ(install(part, path), 1);
    CHECK_CONTAINS(out, "warning: no");
    CHECK_CONTAINS(out, "fashion-mnist-cut/train-images-idx3-ubyte.gz (the cut of "
                        "dataset-fashion-mnist that fetch makes)");
    CHECK_CONTAINS(out, "lack files detrain needs");
}

/* ---- gpu_session.sh ----------------------------------------------------------------------- */

/* The first stage header of `stage` in a dry run's output ("## STAGE (cap N s)"). */
static const char *stage_at(const char *text, const char *stage)
{
    char h[64];
    snprintf(h, sizeof h, "## %s (cap ", stage);
    const char *p = strstr(text, h);
    if (!p) {
        fprintf(stderr, "no stage '%s' in the plan\n", stage);
        dt_check_failures_++;
    }
    return p;
}

/* The one-call plan, dry: every stage of the first light in order, each with its cap and at
 * least one command, the caps summing to at most 660 s; every config of a `detrain run` or
 * `bench` of the plan parses (`detrain run --dry-run`); the build builds detrain and exactly
 * the gpu-labelled test executables ctest knows; memcheck's cases are gpu test cases; no
 * CPU-only test and no CPU training in device time; the old four calls are refused. */
DT_TEST(session_plan)
{
    /* Fingerprint of results/ (names, sizes, times): a dry run must leave it as it was, the
     * committed first lights included. */
    char before[128], after[128];
    CHECK_INT_EQ(dt_run_capture(before, sizeof before,
                                "cd '%s' && find results -printf '%%p %%s %%T@\\n' | LC_ALL=C sort "
                                "| sha256sum",
                                SRC),
                 0);
    int rc = dt_run_capture(out, sizeof out,
                            "DT_GPU_NAME='NVIDIA H100 80GB HBM3' bash '%s/scripts/gpu_session.sh' "
                            "--dry-run --deps none --check-configs '%s' --time-limit 420 "
                            "--jobs 3 --out /tmp/o first-light 2>&1",
                            SRC, DT_DETRAIN_EXE);
    if (rc != 0) fprintf(stderr, "%s\n", out);
    CHECK_INT_EQ(rc, 0);
    static const char *const stages[] = {"info",  "build",    "matrix",   "smoke",
                                         "tests", "crossdev", "replicas", "bench",
                                         "torch", "gpt",      "memcheck"};
    const char *prev = out;
    for (size_t i = 0; i < sizeof stages / sizeof stages[0]; i++) {
        const char *at = stage_at(out, stages[i]);
        CHECK(at && at >= prev);
        if (at) prev = at;
        char cmd[64];
        snprintf(cmd, sizeof cmd, "\n[%s] ", stages[i]);
        CHECK_CONTAINS(out, cmd);
    }
    CHECK(strstr(out, "[racecheck] ") == NULL && strstr(out, "[gptgpu] ") == NULL);
    const char *sum = strstr(out, "; sum ");
    CHECK(sum != NULL);
    if (sum) {
        long total = strtol(sum + 6, NULL, 10);
        fprintf(stderr, "caps sum to %ld s\n", total);
        CHECK(total > 0 && total <= 660);
    }
    CHECK_CONTAINS(out, "configs: 0 failing");
    CHECK(strstr(out, "CONFIG FAILS") == NULL);
    CHECK_CONTAINS(out, "    config ok: quickstart: model mlp, cuda, 5 steps");
    CHECK_CONTAINS(out, "    config ok: lenet: model lenet, cuda, 30 steps, batch 128, policies "
                        "[fast, run_to_run]");
    CHECK_CONTAINS(out, "    config ok: bnn: model bnn_mlp, cuda, 900 steps, batch 128, policies "
                        "[portable+rng=stored");
    /* smoke: every model at every level, launches synchronous */
    CHECK_CONTAINS(out,
                   "[smoke] env CUDA_LAUNCH_BLOCKING=1 build-gpu/detrain run configs/lenet.yaml "
                   "--out results/nvidia-h100-80gb-hbm3/smoke/lenet-run_to_run "
                   "--set backend.device=cuda --set train.steps=5");
    CHECK_CONTAINS(out, "-DDETRAIN_CUDA=ON");
    CHECK_CONTAINS(out, "-DDETRAIN_REQUIRE_CUDNN=ON");
    /* every Fashion-MNIST run trains on the part of it a call carries (scripts/fmnist_cut.sh),
     * the part the committed CPU references trained on */
    CHECK_CONTAINS(out, "--set report.overhead_samples=0 --set dataset.train_limit=10000 "
                        "--set dataset.test_limit=2000 --quiet");
    CHECK_CONTAINS(
        out, "[bench] bash -c 'build-gpu/detrain bench configs/bnn.yaml --steps 30 --warmup 5 "
             "--baseline first --set backend.device=cuda --set dataset.train_limit=10000 "
             "--set dataset.test_limit=2000 --csv ");
    /* the CPU references first, every other GPU's committed crossdev (results/nvidia-h200
     * and any later one) between, this GPU's last */
    CHECK_CONTAINS(out, "[crossdev] env DETRAIN=build-gpu/detrain bash scripts/cross_device.sh "
                        "table results/cpu/crossdev-t2 results/cpu/crossdev-t1 ");
    CHECK_CONTAINS(out, " results/nvidia-h100-80gb-hbm3/crossdev --out "
                        "results/nvidia-h100-80gb-hbm3/cross_device.md\n");
    CHECK_CONTAINS(out, "[replicas] build-gpu/detrain compare "
                        "results/nvidia-h100-80gb-hbm3/replicas/bnn/run_to_run/replica-0 "
                        "results/nvidia-h100-80gb-hbm3/replicas/bnn/run_to_run/replica-2\n");
    CHECK_CONTAINS(out, "[torch] python3 scripts/bench_torch.py --model lenet --config "
                        "configs/lenet.yaml --device cuda --modes fp32,tf32,deterministic");
    /* the GPT's stage: its gpu tests apart (the tests stage leaves them out), the portable
     * run against its committed CPU reference, PyTorch's three modes */
    CHECK_CONTAINS(out, "[tests] bash scripts/gpu_session.sh __ctest_gpu build-gpu ");
    /* --jobs 3, not nproc: the plan is the same on every machine (ctest's -j is min(jobs, 6)) */
    CHECK(strstr(out, "__ctest_gpu build-gpu 3 45 gpt") || strstr(out, "'gpt|mpi'"));
    CHECK_CONTAINS(out, "[gpt] bash scripts/gpu_session.sh __ctest_gpu build-gpu 3 30 '' gpt\n");
    CHECK_CONTAINS(out, "[build] cmake --build build-gpu -j 3 --target detrain ");
    CHECK_CONTAINS(out, "[gpt] env DETRAIN=build-gpu/detrain bash scripts/cross_device.sh table "
                        "results/cpu/crossdev-gpt-t2 results/nvidia-h100-80gb-hbm3/crossdev-gpt "
                        "--models gpt");
    CHECK_CONTAINS(out, "--modes default,tf32,deterministic,sdpa");
    CHECK_CONTAINS(out, "    config ok: gpt: model gpt, cuda, 5 steps");
    /* The build: detrain and exactly the gpu test executables (ctest -N -L gpu here). */
    char targets[4096] = "";
    CHECK_INT_EQ(dt_run_capture(targets, sizeof targets,
                                "ctest --test-dir '%s/..' -N -L gpu | sed -nE 's/^ *Test +#[0-9]+: "
                                "([a-z0-9_]+)\\..*/test_\\1/p' | sort -u | tr '\\n' ' '",
                                DT_TEST_TMP_DIR),
                 0);
    CHECK(strlen(targets) > 20);
    char want[4200];
    snprintf(want, sizeof want, "--target detrain %s", targets);
    want[strlen(want) - 1] = '\n'; /* the last target ends the line */
    CHECK_CONTAINS(out, want);
    /* memcheck's cases are gpu test cases */
    char cases[8192] = "";
    CHECK_INT_EQ(dt_run_capture(cases, sizeof cases,
                                "ctest --test-dir '%s/..' -N -L gpu | sed -nE 's/^ *Test +#[0-9]+: "
                                "([a-z0-9_.]+)$/\\1/p'",
                                DT_TEST_TMP_DIR),
                 0);
    const char *mc = strstr(out, "[memcheck] ");
    if (mc) {
        char line[2048];
        snprintf(line, sizeof line, "%.*s", (int)strcspn(mc, "\n"), mc);
        char *save = NULL, *w = strtok_r(line, " ", &save);
        int n = 0;
        while (w) {
            if (strchr(w, '.') && !strchr(w, '/')) {
                char name[160];
                snprintf(name, sizeof name, "%s\n", w);
                if (!strstr(cases, name))
                    fprintf(stderr, "memcheck case %s: no such gpu test\n", w);
                CHECK(strstr(cases, name) != NULL);
                n++;
            }
            w = strtok_r(NULL, " ", &save);
        }
        CHECK(n >= 5);
    }
    /* No CPU-only test and no CPU training in device time. */
    CHECK(strstr(out, "-L unit") == NULL);
    CHECK(strstr(out, "run cpu ") == NULL);
    CHECK(strstr(out, "backend.device=cpu") == NULL);
    /* A dry run writes nothing. */
    CHECK_INT_EQ(dt_run_capture(after, sizeof after,
                                "cd '%s' && find results -printf '%%p %%s %%T@\\n' | LC_ALL=C sort "
                                "| sha256sum",
                                SRC),
                 0);
    CHECK_STR_EQ(after, before);
    CHECK(!dt_path_exists("/tmp/o/summary.txt") || 1); /* (another process may own /tmp/o) */

    /* Only the stages asked for, info always first, the plan's order whatever the order given. */
    CHECK_INT_EQ(dt_run_capture(out, sizeof out,
                                "bash '%s/scripts/gpu_session.sh' --dry-run --deps none "
                                "--results /tmp/x bench smoke",
                                SRC),
                 0);
    CHECK(strstr(out, "[info] ") && strstr(out, "[smoke] ") && strstr(out, "[bench] "));
    CHECK(strstr(out, "[build] ") == NULL);
    CHECK(strstr(out, "[info] ") < strstr(out, "[smoke] ") &&
          strstr(out, "[smoke] ") < strstr(out, "[bench] "));
    /* --cap changes one stage's cap */
    CHECK_INT_EQ(dt_run_capture(out, sizeof out,
                                "bash '%s/scripts/gpu_session.sh' --dry-run --deps none "
                                "--cap smoke=7 smoke",
                                SRC),
                 0);
    CHECK_CONTAINS(out, "## smoke (cap 7 s)");
    CHECK_CONTAINS(out, "caps: info 15, smoke 7; sum 22 s");

    /* Refusals. */
    CHECK_INT_EQ(dt_run_capture(out, sizeof out, "bash '%s/scripts/gpu_session.sh' biuld", SRC), 2);
    CHECK_CONTAINS(out, "unknown stage or option 'biuld'");
    CHECK_INT_EQ(dt_run_capture(out, sizeof out, "bash '%s/scripts/gpu_session.sh' call1", SRC), 2);
    CHECK_CONTAINS(out, "the plan is one call now");
    CHECK_INT_EQ(dt_run_capture(out, sizeof out,
                                "bash '%s/scripts/gpu_session.sh' --time-limit 9m smoke", SRC),
                 2);
    CHECK_CONTAINS(out, "--time-limit: seconds");
    CHECK_INT_EQ(dt_run_capture(out, sizeof out,
                                "bash '%s/scripts/gpu_session.sh' --cap smoek=3 smoke", SRC),
                 2);
    CHECK_CONTAINS(out, "--cap: STAGE=SECONDS with a known stage");
    CHECK_INT_EQ(dt_run_capture(out, sizeof out, "bash '%s/scripts/gpu_session.sh'", SRC), 2);
    CHECK_CONTAINS(out, "usage:");

    /* The docs describe the one call, paste-ready, and no longer the four. */
    char *gpu_md = read_text("%s/%s", SRC, "docs/gpu.md");
    char *readme = read_text("%s/%s", SRC, "README.md");
    if (gpu_md && readme) {
        CHECK_CONTAINS(gpu_md, "bash scripts/gpu_session.sh --time-limit 540 --out \\\"$OUT\\\" "
                               "first-light\"");
        CHECK_CONTAINS(gpu_md, "\"carry\": [\".gpu-deps\"]");
        CHECK_CONTAINS(gpu_md, "\"timeout_s\": 570");
        CHECK(strstr(gpu_md, "call1") == NULL && strstr(gpu_md, "call4") == NULL);
        CHECK(strstr(readme, "call1") == NULL && strstr(readme, "four calls") == NULL);
    }
    free(gpu_md), free(readme);
}

/* A scratch repo holding copies of the session scripts, the three configs, the test lists and
 * a stand-in detrain that logs its arguments (and answers `run --dry-run` for real configs by
 * calling the real one). */
static const char *fake_repo(const char *name)
{
    const char *dir = scratch(name);
    int rc =
        dt_run_capture(out, sizeof out,
                       "cd '%s' && mkdir -p scripts fakebuild configs tests && "
                       "cp '%s/scripts/gpu_session.sh' '%s/scripts/cross_device.sh' "
                       "'%s/scripts/lib.sh' '%s/scripts/gpu_deps.sh' '%s/scripts/fmnist_cut.sh' "
                       "scripts/ && "
                       "cp '%s'/configs/quickstart.yaml '%s'/configs/lenet.yaml "
                       "'%s'/configs/bnn.yaml configs/ && cp '%s'/tests/test_*.cmake tests/ && "
                       "cp '%s/scripts/overhead_table.py' scripts/ && "
                       "printf '#!/bin/sh\\necho \"$*\" >>\"$(dirname \"$0\")/calls.txt\"\\n"
                       "[ -n \"$FAKE_MATRIX\" ] && [ \"$2\" = configs/overhead_matrix.yaml ] && "
                       "cp -r \"$FAKE_MATRIX\" \"$4\"\\nexit 0\\n' "
                       ">fakebuild/detrain && chmod +x fakebuild/detrain",
                       dir, SRC, SRC, SRC, SRC, SRC, SRC, SRC, SRC, SRC, SRC);
    CHECK_INT_EQ(rc, 0);
    return dir;
}

/* Carrying on: no build, so `tests` and `replicas` fail at once; `info` runs; after every
 * stage --out gets summary.txt (one table) and the tarball of the results folder; out of
 * time, nothing starts and the summary says so. A failing build ends the call at once, its
 * error tail printed, the other stages "not run (build failed)". */
DT_TEST(session_continues_after_failures)
{
    const char *dir = scratch("session");
    int rc = dt_run_capture(
        out, sizeof out,
        "cd '%s' && DT_GPU_NAME='Test GPU' bash '%s/scripts/gpu_session.sh' --deps none "
        "--build nobuild --results res --out ret tests replicas",
        dir, SRC);
    CHECK_INT_EQ(rc, 1);
    CHECK_CONTAINS(out, "detrain GPU session ");
    CHECK_CONTAINS(out, "| stage | verdict | s / cap | key numbers | first failure |\n");
    CHECK_CONTAINS(out, "| tests | FAILED | ");
    CHECK_CONTAINS(out, "| replicas | FAILED | ");
    CHECK_CONTAINS(out, "nobuild/detrain (build first) |");
    CHECK_CONTAINS(out, "| info | ");
    char path[2048];
    snprintf(path, sizeof path, "%s/res/logs/info.log", dir);
    CHECK(dt_path_exists(path));
    snprintf(path, sizeof path, "%s/res/info/source.sha256", dir);
    CHECK(dt_path_exists(path));
    char *summary = read_text("%s/%s", dir, "ret/summary.txt");
    if (summary) {
        CHECK_CONTAINS(summary, "| replicas | FAILED | ");
        free(summary);
    }
    CHECK_INT_EQ(dt_run_capture(out, sizeof out, "cat '%s'/res/session-*.txt", dir), 0);
    CHECK_CONTAINS(out, "# command (in ");
    CHECK_CONTAINS(out, "bash scripts/gpu_session.sh __source ");
    CHECK_CONTAINS(out, "## stage replicas (cap 20 s");
    CHECK_INT_EQ(dt_run_capture(out, sizeof out, "tar -tzf '%s/ret/results-test-gpu.tar.gz'", dir),
                 0);
    CHECK_CONTAINS(out, "res/info/source.txt");
    CHECK_CONTAINS(out, "res/summary.txt");

    /* Out of time: nothing starts, each stage says so, the session still ends with a table. */
    rc = dt_run_capture(out, sizeof out,
                        "cd '%s' && bash '%s/scripts/gpu_session.sh' --deps none "
                        "--results res2 --time-limit 3 smoke 2>/dev/null",
                        dir, SRC);
    CHECK_INT_EQ(rc, 1);
    CHECK_CONTAINS(out, "| info | not run (time) |");
    CHECK_CONTAINS(out, "| smoke | not run (time) |");

    /* A build that cannot configure (a tree without CMakeLists.txt): at once, its error. */
    const char *repo = fake_repo("session-build");
    rc = dt_run_capture(out, sizeof out,
                        "cd '%s' && DT_GPU_NAME=Fake timeout 120 bash scripts/gpu_session.sh "
                        "--deps none --results res --out ret build smoke tests 2>&1",
                        repo);
    CHECK_INT_EQ(rc, 1);
    CHECK(strstr(out, "BUILD FAILED") != NULL || strstr(out, "no nvcc") != NULL);
    CHECK(strstr(out, "CMake Error") != NULL || strstr(out, "no nvcc") != NULL);
    CHECK_CONTAINS(out, "| smoke | not run (build failed) |");
    CHECK_CONTAINS(out, "| tests | not run (build failed) |");
    snprintf(path, sizeof path, "%s/ret/summary.txt", repo);
    CHECK(dt_path_exists(path));
}

/* The tests stage tells a skip for want of a usable GPU (a failure on the GPU machine) from
 * other skips, and names the first failing test with the line that says why: on a CTest
 * folder written by hand (CTestTestfile.cmake), no build needed. */
DT_TEST(session_tests_stage_skips)
{
    const char *dir = scratch("ctest");
    static const char *const lines[] = {
        "add_test(a.pass /bin/sh -c \"exit 0\")",
        "add_test(a.nompi /bin/sh -c \"echo 'SKIPPED: detrain was built without MPI' >&2; exit "
        "77\")",
        "add_test(b.nogpu /bin/sh -c \"echo 'SKIPPED (no usable GPU): no CUDA device' >&2; exit "
        "77\")",
        "add_test(c.fail /bin/sh -c \"echo 'tests/x.c:12: CHECK failed: 1 == 2' >&2; exit 1\")",
    };
    /* three folders: pass + a non-GPU skip; + a no-GPU skip; + a failure */
    for (int k = 0; k < 3; k++) {
        char f[2048], text[2048] = "";
        for (int i = 0; i <= k + 1; i++) {
            char l[400];
            const char *name = i == 0   ? "a.pass"
                               : i == 1 ? "a.nompi"
                               : i == 2 ? "b.nogpu"
                                        : "c.fail";
            snprintf(l, sizeof l,
                     "%s\nset_tests_properties(%s PROPERTIES LABELS gpu SKIP_RETURN_CODE 77)\n",
                     lines[i], name);
            strncat(text, l, sizeof text - strlen(text) - 1);
        }
        snprintf(f, sizeof f, "%s/t%d/CTestTestfile.cmake", dir, k);
        CHECK_INT_EQ(dt_run_capture(out, sizeof out, "mkdir -p '%s/t%d'", dir, k), 0);
        dt_write_text(f, text);
    }
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "bash '%s/scripts/gpu_session.sh' __ctest_gpu '%s/t0' 2 30", SRC,
             dir);
    CHECK_INT_EQ(dt_run_capture(out, sizeof out, "%s", cmd), 0);
    CHECK_CONTAINS(out,
                   "a.nompi skipped (not a GPU matter): SKIPPED: detrain was built without MPI");
    CHECK_CONTAINS(out, "tests: 2 run, 1 passed, 0 failed, 1 skipped (0 for want of a usable GPU, "
                        "1 for other reasons)");
    snprintf(cmd, sizeof cmd, "bash '%s/scripts/gpu_session.sh' __ctest_gpu '%s/t1' 2 30", SRC,
             dir);
    CHECK_INT_EQ(dt_run_capture(out, sizeof out, "%s", cmd), 1);
    CHECK_CONTAINS(out, "b.nogpu skipped for want of a usable GPU: SKIPPED (no usable GPU): no "
                        "CUDA device");
    snprintf(cmd, sizeof cmd, "bash '%s/scripts/gpu_session.sh' __ctest_gpu '%s/t2' 2 30", SRC,
             dir);
    CHECK_INT_EQ(dt_run_capture(out, sizeof out, "%s", cmd), 1);
    CHECK_CONTAINS(out, "first failing test: c.fail: tests/x.c:12: CHECK failed: 1 == 2");
    CHECK_CONTAINS(out, "1 failed");
}

/* What a GPU call carries fits its limit (40 MiB: the device's 64 less room for many windows'
 * results, issue 48 item 5), counted
 * from the fetched deps or, where they are absent (CI), from scripts/gpu_deps.manifest; a
 * limit it exceeds fails, naming the largest contributors. */
DT_TEST(payload_fits)
{
    int rc = dt_run_capture(out, sizeof out, "cd '%s' && bash scripts/gpu_session.sh payload", SRC);
    fprintf(stderr, "%s", out);
    CHECK_INT_EQ(rc, 0);
    CHECK_CONTAINS(out, " MiB of at most 40 MiB");
    CHECK_CONTAINS(out, "  deps (carry .gpu-deps): ");
    CHECK_CONTAINS(out, "largest contributors");
    CHECK_CONTAINS(out, " MiB  results/cpu/\n");
    /* the deps are counted: without them the tree alone would be far below */
    CHECK(strstr(out, "deps (carry .gpu-deps): 0.0 MiB") == NULL);
    rc = dt_run_capture(out, sizeof out,
                        "cd '%s' && bash scripts/gpu_session.sh payload --limit-mib 20", SRC);
    CHECK_INT_EQ(rc, 1);
    CHECK_CONTAINS(out, "OVER: ");
    CHECK_CONTAINS(out, ".gpu-deps/ (deps)");
    /* the manifest is what CI counts: the fetched folder's sizes, every package named */
    char *m = read_text("%s/%s", SRC, "scripts/gpu_deps.manifest");
    if (m) {
        /* of Fashion-MNIST only its cut (scripts/fmnist_cut.sh), not the 31 MB package */
        CHECK_CONTAINS(m, "\nfashion-mnist-cut fashion-mnist-cut/train-images-idx3-ubyte.gz ");
        CHECK_CONTAINS(m, "\nfashion-mnist-cut fashion-mnist-cut/t10k-labels-idx1-ubyte.gz ");
        CHECK(strstr(m, "\ndataset-fashion-mnist ") == NULL);
        CHECK_CONTAINS(m, "\nlibopenblas0-pthread ");
        free(m);
    }
}

/* The first line of `text` is `want` (stdout's answer; stderr's explanation follows). */
#define CHECK_FIRST_LINE(text, want)                                                               \
    do {                                                                                           \
        const size_t n_ = strlen(want);                                                            \
        if (strncmp((text), (want), n_) != 0 || (text)[n_] != '\n') {                              \
            fprintf(stderr, "%s:%d: first line of \"%s\" is not \"%s\"\n", __FILE__, __LINE__,     \
                    (text), (want));                                                               \
            dt_check_failures_++;                                                                  \
        }                                                                                          \
    } while (0)

/* The next lease's kind: the other one of the two once results/ holds one kind's first light. */
DT_TEST(session_kind)
{
    const char *repo = fake_repo("kind");
    CHECK_INT_EQ(
        dt_run_capture(out, sizeof out, "cd '%s' && bash scripts/gpu_session.sh kind", repo), 0);
    CHECK_FIRST_LINE(out, "nvidia-h100-x1");
    CHECK_CONTAINS(out, "no GPU first light in results/ yet");
    CHECK_INT_EQ(dt_run_capture(out, sizeof out,
                                "cd '%s' && mkdir -p results/nvidia-h100-80gb-hbm3/info && "
                                "printf 'name, driver_version\\nNVIDIA H100 80GB HBM3, 580\\n' "
                                ">results/nvidia-h100-80gb-hbm3/info/gpu.csv && "
                                "bash scripts/gpu_session.sh kind",
                                repo),
                 0);
    CHECK_FIRST_LINE(out, "nvidia-h200");
    CHECK_INT_EQ(
        dt_run_capture(out, sizeof out,
                       "cd '%s' && rm -r results/nvidia-h100-80gb-hbm3 && "
                       "mkdir -p results/nvidia-h200/info && "
                       "printf 'name\\nNVIDIA H200\\n' >results/nvidia-h200/info/gpu.csv && "
                       "bash scripts/gpu_session.sh kind",
                       repo),
        0);
    CHECK_FIRST_LINE(out, "nvidia-h100-x1");
    /* both ran: they alternate, the kind whose last session is the older one next */
    CHECK_INT_EQ(dt_run_capture(out, sizeof out,
                                "cd '%s' && mkdir -p results/nvidia-h100-80gb-hbm3/info && "
                                "printf 'name\\nNVIDIA H100 80GB HBM3\\n' "
                                ">results/nvidia-h100-80gb-hbm3/info/gpu.csv && "
                                "touch results/nvidia-h100-80gb-hbm3/session-20261126T174721Z.txt "
                                "results/nvidia-h200/session-20261128T041741Z.txt && "
                                "bash scripts/gpu_session.sh kind",
                                repo),
                 0);
    CHECK_FIRST_LINE(out, "nvidia-h100-x1");
    CHECK_CONTAINS(out, "older than the H200's");
    CHECK_INT_EQ(dt_run_capture(out, sizeof out,
                                "cd '%s' && touch "
                                "results/nvidia-h100-80gb-hbm3/session-20261201T000000Z.txt && "
                                "bash scripts/gpu_session.sh kind",
                                repo),
                 0);
    CHECK_FIRST_LINE(out, "nvidia-h200");
}

/* In a scratch repo with a stand-in detrain: the crossdev stage's reference (the committed CPU
 * runs; none: FAILED, nothing trained; every other GPU's committed crossdev a column), the
 * matrix stage (the cuda entries), and a config that does not parse failing the dry run. */
DT_TEST(session_crossdev_and_matrix)
{
    const char *dir = fake_repo("fakerepo");
    int rc = dt_run_capture(out, sizeof out,
                            "cd '%s' && DT_GPU_NAME=Fake bash scripts/gpu_session.sh "
                            "--deps none --build fakebuild --results res crossdev",
                            dir);
    CHECK_INT_EQ(rc, 1);
    CHECK_CONTAINS(out, "no results/cpu/crossdev-t2/mlp/config.json (the committed CPU reference");
    CHECK_CONTAINS(out, "| crossdev | FAILED |");
    char want[4096];
    snprintf(want, sizeof want, "%s/fakebuild/calls.txt", dir);
    CHECK(!dt_path_exists(want));
    /* With it, and another GPU's committed column: reference first, the other GPU, this one. */
    CHECK_INT_EQ(dt_run_capture(out, sizeof out,
                                "cd '%s' && mkdir -p results/cpu/crossdev-t2/mlp "
                                "results/nvidia-h200/crossdev && "
                                "echo '{}' >results/cpu/crossdev-t2/mlp/config.json && "
                                "touch results/nvidia-h200/crossdev/commands.txt",
                                dir),
                 0);
    rc = dt_run_capture(out, sizeof out,
                        "cd '%s' && DT_GPU_NAME='NVIDIA H100 80GB HBM3' bash "
                        "scripts/gpu_session.sh --dry-run --deps none crossdev",
                        dir);
    CHECK_INT_EQ(rc, 0);
    CHECK_CONTAINS(out, "bash scripts/cross_device.sh table results/cpu/crossdev-t2 "
                        "results/nvidia-h200/crossdev results/nvidia-h100-80gb-hbm3/crossdev "
                        "--out results/nvidia-h100-80gb-hbm3/cross_device.md\n");
    CHECK(strstr(out, "committed CPU reference") == NULL);
    CHECK(strstr(out, "run cpu") == NULL);

    /* matrix: the cuda entries of configs/overhead_matrix.yaml trained into BUILD; their
     * reports and the replicas' run.json (not the per-tensor digests) copied to
     * RESULTS/overhead_matrix; the table of scripts/overhead_table.py beside them, with the
     * hashing share and the host waits of each cell. */
    CHECK_INT_EQ(
        dt_run_capture(
            out, sizeof out,
            "cd '%s' && m=fakematrix/mlp-cuda && mkdir -p $m/none/portable/replica-0 && "
            "printf 'cell,vary,policy,replicas,completed,distinct_final_digests,"
            "first_divergent_step,first_divergent_tensor,test_acc_mean,test_acc_std,churn_mean,"
            "churn_max,l2_mean,l2_rel_mean,class_acc_std_mean,class_acc_std_max,step_ms_median,"
            "hash_ms_median,overhead_ratio,overhead_ci_lo,overhead_ci_hi,overhead_verdict\n"
            "none/portable,none,portable,3,3,1,-1,,0.8,0,0,0,,,0,0,3.0,1.0,1.5,1.4,1.6,"
            "conclusive\n' >$m/summary.csv && "
            "echo '{\"host_waits_per_step\": 2, \"host_waits_first_step\": 5, "
            "\"host_waits_steady\": 1}' >$m/none/portable/replica-0/run.json && "
            "echo x >$m/none/portable/replica-0/tensors.csv",
            dir),
        0);
    rc = dt_run_capture(out, sizeof out,
                        "cd '%s' && FAKE_MATRIX=$PWD/fakematrix DT_GPU_NAME=Fake bash "
                        "scripts/gpu_session.sh --deps none --build fakebuild --results res/fake "
                        "matrix; cat fakebuild/calls.txt res/fake/overhead_table.md; "
                        "ls res/fake/overhead_matrix/mlp-cuda/none/portable/replica-0",
                        dir);
    CHECK_CONTAINS(out, "| matrix | passed |");
    /* each stage's log begins with the session: an earlier window's committed log lends no
     * failure or count to this table (the tests stage, run here on the fake build) */
    CHECK_INT_EQ(dt_run_capture(out + strlen(out), sizeof out - strlen(out),
                                "cd '%s' && echo 'gpu_session: first failing test: stale.case: old'"
                                " >res/fake/logs/tests.log && DT_GPU_NAME=Fake bash "
                                "scripts/gpu_session.sh --deps none --build fakebuild --results "
                                "res/fake tests 2>&1 | grep '| tests |'",
                                dir),
                 0);
    CHECK(strstr(out, "stale.case") == NULL);
    CHECK_CONTAINS(out, "| fake | portable | 3.000 | 1.50x [1.40, 1.60] | 25.0 | 1.00 (5) | 1/3 |");
    CHECK_CONTAINS(out, "\nrun.json\n");
    /* a run.json from before the first step's waits were kept apart: the mean over all */
    CHECK_INT_EQ(dt_run_capture(out + strlen(out), sizeof out - strlen(out),
                                "cd '%s' && echo '{\"host_waits_per_step\": 2}' "
                                ">res/fake/overhead_matrix/mlp-cuda/none/portable/replica-0/"
                                "run.json && python3 scripts/overhead_table.py "
                                "res/fake/overhead_matrix | grep '| fake | portable |'",
                                dir),
                 0);
    CHECK_CONTAINS(out, "| fake | portable | 3.000 | 1.50x [1.40, 1.60] | 25.0 | 2.00 | 1/3 |");
    CHECK(strstr(out, "tensors.csv") == NULL);
    snprintf(want, sizeof want,
             "run configs/overhead_matrix.yaml --out %s/fakebuild/overhead_matrix --only "
             "mlp-cuda,lenet-cuda,lenet-conv-cuda,bnn-cuda,bnn-rng-cuda,gpt-cuda,mlp-noise-cuda,"
             "lenet-noise-cuda,gptgpu-cuda --set dataset.train_limit=10000 "
             "--set dataset.test_limit=2000 --quiet\n",
             dir);
    CHECK_CONTAINS(out, want);

    /* The GPT at GPU scale (a later call's stage): portable against its CPU reference,
     * PyTorch's five modes on the same shape, replicas and the learning run. */
    rc = dt_run_capture(out, sizeof out,
                        "cd '%s' && DT_GPU_NAME='NVIDIA H100 80GB HBM3' bash "
                        "scripts/gpu_session.sh --dry-run --deps none gptgpu",
                        dir);
    CHECK_INT_EQ(rc, 0);
    CHECK_CONTAINS(out, "## gptgpu (cap 300 s)");
    CHECK_CONTAINS(out, "bash scripts/cross_device.sh run cuda "
                        "results/nvidia-h100-80gb-hbm3/crossdev-gpt-gpu --models gpt-gpu\n");
    CHECK_CONTAINS(out, "bash scripts/cross_device.sh table results/cpu/crossdev-gpt-gpu-t2 "
                        "results/nvidia-h100-80gb-hbm3/crossdev-gpt-gpu --models gpt-gpu --out "
                        "results/nvidia-h100-80gb-hbm3/cross_device_gpt_gpu.md\n");
    CHECK_CONTAINS(out, "--modes default,tf32,deterministic,sdpa,compile --steps 30");
    CHECK_CONTAINS(out, "compare results/nvidia-h100-80gb-hbm3/gpt-gpu/replicas/run_to_run/"
                        "replica-0 results/nvidia-h100-80gb-hbm3/gpt-gpu/replicas/run_to_run/"
                        "replica-1\n");

    /* The ResNet (issue 68; a later call's stage): portable against its CPU reference,
     * replicas and PyTorch on the same network. */
    rc = dt_run_capture(out, sizeof out,
                        "cd '%s' && DT_GPU_NAME='NVIDIA H100 80GB HBM3' bash "
                        "scripts/gpu_session.sh --dry-run --deps none resnet",
                        dir);
    CHECK_INT_EQ(rc, 0);
    CHECK_CONTAINS(out, "## resnet (cap 150 s)");
    CHECK_CONTAINS(out, "bash scripts/cross_device.sh table results/cpu/crossdev-resnet-t2 "
                        "results/nvidia-h100-80gb-hbm3/crossdev-resnet --models resnet --out "
                        "results/nvidia-h100-80gb-hbm3/cross_device_resnet.md\n");
    CHECK_CONTAINS(out, "compare results/nvidia-h100-80gb-hbm3/resnet/replicas/run_to_run/"
                        "replica-0 results/nvidia-h100-80gb-hbm3/resnet/replicas/run_to_run/"
                        "replica-1\n");
    CHECK_CONTAINS(out, "--modes default,benchmark,deterministic --steps 60");

    /* A config of the plan that does not parse fails the dry run, naming file:line:column. */
    rc = dt_run_capture(out, sizeof out,
                        "cd '%s' && sed -i 's/^  steps: /  stepz: /' configs/lenet.yaml && "
                        "bash scripts/gpu_session.sh --dry-run --deps none --check-configs '%s' "
                        "smoke 2>&1",
                        dir, DT_DETRAIN_EXE);
    CHECK_INT_EQ(rc, 1);
    CHECK_CONTAINS(out, "    CONFIG FAILS: detrain: configs/lenet.yaml:");
    CHECK_CONTAINS(out, "configs: 3 failing");
    CHECK_CONTAINS(out, "    config ok: quickstart: ");
}

/* cuDNN for the GPU build (CMakeLists.txt): DETRAIN_CUDNN_ROOT is searched alone, and a root
 * without cuDNN is refused naming it; a header of one version paired with a library of
 * another is refused under DETRAIN_REQUIRE_CUDNN (the GPU session's build) and warned of
 * otherwise. Configures only, on fake roots (an empty library file named by its version);
 * skipped where there is no CUDA compiler. */
DT_TEST(cmake_cudnn_root)
{
    if (dt_run_capture(out, sizeof out, "command -v nvcc || test -x /usr/local/cuda/bin/nvcc") != 0)
        DT_SKIP("no CUDA compiler: the cuDNN search is not configured");
    const char *dir = scratch("cudnn");
    int rc = dt_run_capture(
        out, sizeof out,
        "cd '%s' && mkdir -p root/include root/lib && : >root/include/cudnn.h && "
        "printf '#define CUDNN_MAJOR 9\n#define CUDNN_MINOR 26\n#define CUDNN_PATCHLEVEL 0\n' "
        ">root/include/cudnn_version.h && : >root/lib/libcudnn.so.9.19.0 && "
        "ln -s libcudnn.so.9.19.0 root/lib/libcudnn.so",
        dir);
    CHECK_INT_EQ(rc, 0);
    /* CMake folds long messages over lines: the output with its whitespace runs as one space */
    static const char cfg[] = "cmake -S '%s' -B '%s/b%d' -DDETRAIN_CUDA=ON -DDETRAIN_MPI=OFF "
                              "-DCMAKE_CUDA_COMPILER=$(command -v nvcc || echo "
                              "/usr/local/cuda/bin/nvcc) -DCMAKE_CUDA_ARCHITECTURES=90 %s "
                              ">cfg.log 2>&1; rc=$?; tr -s ' \\n' '  ' <cfg.log; exit $rc";
    char extra[1200];
    snprintf(extra, sizeof extra, "-DDETRAIN_CUDNN_ROOT='%s/nonexistent'", dir);
    char cmd[2400];
    snprintf(cmd, sizeof cmd, "cd '%s' && %s", dir, cfg);
    rc = dt_run_capture(out, sizeof out, cmd, SRC, dir, 0, extra);
    CHECK(rc != 0);
    CHECK_CONTAINS(out, "nonexistent: no cuDNN there");
    snprintf(extra, sizeof extra, "-DDETRAIN_CUDNN_ROOT='%s/root' -DDETRAIN_REQUIRE_CUDNN=ON", dir);
    rc = dt_run_capture(out, sizeof out, cmd, SRC, dir, 1, extra);
    CHECK(rc != 0);
    CHECK_CONTAINS(out, "DETRAIN_REQUIRE_CUDNN: cuDNN header");
    CHECK_CONTAINS(out, "is 9.26 but");
    CHECK_CONTAINS(out, "is 9.19: two");
    /* the environment variable does the same as the option; without REQUIRE, a warning */
    snprintf(extra, sizeof extra, " ");
    snprintf(cmd, sizeof cmd, "cd '%s' && DETRAIN_CUDNN_ROOT='%s/root' %s", dir, dir, cfg);
    rc = dt_run_capture(out, sizeof out, cmd, SRC, dir, 2, extra);
    CHECK_INT_EQ(rc, 0);
    CHECK_CONTAINS(out, "(building with them anyway)");
}

/* The committed CPU references the GPU plan compares against (results/cpu/crossdev-t2) are
 * the current CPU bits: the three portable runs again here, identical at every step. */
/* The current CPU bits of `models` (cross_device.sh run cpu, 2 threads, into dir/sub)
 * against the committed reference `ref`: every model identical at every one of `steps`
 * hashed steps. */
static void check_reference(const char *dir, const char *ref, const char *sub, const char *models,
                            const char *summary, int steps)
{
    int rc = dt_run_capture(out, sizeof out,
                            "cd '%s' && DETRAIN='%s' bash scripts/cross_device.sh run cpu '%s/%s' "
                            "--threads 2 --models %s && DETRAIN='%s' bash scripts/cross_device.sh "
                            "table %s '%s/%s' --models %s --out '%s/%s.md'",
                            SRC, DT_DETRAIN_EXE, dir, sub, models, DT_DETRAIN_EXE, ref, dir, sub,
                            models, dir, sub);
    if (rc != 0)
        fprintf(stderr,
                "%s\n%s no longer holds the current CPU bits: remake it (scripts/results.sh "
                "crossdev) if the change is intended\n",
                out, ref);
    CHECK_INT_EQ(rc, 0);
    char *md = read_text("%s/%s.md", dir, sub);
    if (md) {
        char want[64];
        snprintf(want, sizeof want, "| identical (%d steps) |", steps);
        CHECK_CONTAINS(md, summary);
        CHECK_CONTAINS(md, want);
        free(md);
    }
}

DT_TEST(crossdev_references_current)
{
    const char *dir = scratch("xdref");
    check_reference(dir, "results/cpu/crossdev-t2", "cpu", "mlp,lenet,bnn",
                    "- mlp: identical\n- lenet: identical\n- bnn: identical\n", 101);
    /* the GPT's (the gpt stage's reference) */
    check_reference(dir, "results/cpu/crossdev-gpt-t2", "gpt", "gpt", "- gpt: identical\n", 101);
    /* the GPT at GPU scale's (the gptgpu stage's reference: 3 steps at batch 4; 30 s here,
     * many minutes under the sanitizers, where the other two already check the same code) */
    if (!DT_SANITIZED)
        check_reference(dir, "results/cpu/crossdev-gpt-gpu-t2", "gptgpu", "gpt-gpu",
                        "- gpt-gpu: identical\n", 4);
}

/* ---- scripts/fmnist_cut.sh ----------------------------------------------------------------- */

/* The cut of Fashion-MNIST a GPU call carries: the first N records with the header's count
 * set to N (a made-up label file: bytes checked), a cut longer than its file refused; and a
 * run on cut files gives the bits of the same run on the whole files with
 * dataset.train_limit / test_limit at the cut's counts -- the premise of comparing GPU runs
 * on the cut with CPU references made on the whole data set. */
/* Run `script` (printf-formatted) with bash in `dir` (the sourced scripts are bash's). */
static int run_bash(const char *dir, const char *fmt, ...)
{
    static char script[16384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(script, sizeof script, fmt, ap);
    va_end(ap);
    char path[1200];
    snprintf(path, sizeof path, "%s/script.sh", dir);
    dt_write_text(path, script);
    return dt_run_capture(out, sizeof out, "cd '%s' && bash script.sh 2>&1", dir);
}

DT_TEST(fmnist_cut)
{
    const char *dir = scratch("fmnist-cut");
    int rc = run_bash(dir,
                      "set -euo pipefail\n. '%s/scripts/fmnist_cut.sh'\n"
                      "printf '\\000\\000\\010\\001\\000\\000\\000\\005\\003\\001\\004\\001\\005' "
                      "| gzip -n >l.gz\nfmnist_cut_file l.gz c.gz 3\n"
                      "gzip -dc c.gz | od -An -tu1 | tr -s ' '\n"
                      "fmnist_cut_file l.gz d.gz 6 || echo refused $?\n"
                      "[ ! -e d.gz ] && [ ! -e d.gz.tmp ] && echo nothing left\n",
                      SRC);
    CHECK_INT_EQ(rc, 0);
    CHECK_CONTAINS(out, " 0 0 8 1 0 0 0 3 3 1 4\n");
    CHECK_CONTAINS(out, "l.gz holds 5 records, fewer than 6");
    CHECK_CONTAINS(out, "refused 1\nnothing left\n");

    const char *env = getenv("DETRAIN_DATA");
    char full[1024];
    snprintf(full, sizeof full, "%s", env && env[0] ? env : "/usr/share/datasets/fashion-mnist");
    char probe[1100];
    snprintf(probe, sizeof probe, "%s/train-images-idx3-ubyte.gz", full);
    if (!dt_path_exists(probe)) DT_SKIP("no Fashion-MNIST here ($DETRAIN_DATA, else Debian's)");
    rc = run_bash(
        dir,
        "set -euo pipefail\n. '%s/scripts/fmnist_cut.sh'\nfull='%s'\nmkdir -p cut\n"
        "for f in train-images-idx3-ubyte train-labels-idx1-ubyte; do\n"
        "  fmnist_cut_file \"$full/$f.gz\" cut/$f.gz 700\ndone\n"
        "for f in t10k-images-idx3-ubyte t10k-labels-idx1-ubyte; do\n"
        "  fmnist_cut_file \"$full/$f.gz\" cut/$f.gz 150\ndone\n"
        "run() { # OUT DATA [--set ...]\n"
        "  DETRAIN_GNUPLOT=none '%s' run '%s/configs/quickstart.yaml' --quiet --out \"$1\" \\\n"
        "    --set 'policies=[portable]' --set replicas=1 --set train.steps=4 \\\n"
        "    --set train.batch=64 --set report.overhead_samples=0 --set report.snapshots=0 \\\n"
        "    --set train.eval_every=2 --set \"dataset.path=$2\" --set dataset.train_limit=700 \\\n"
        "    --set dataset.test_limit=150 \"${@:3}\"\n}\n"
        "run on-cut \"$PWD/cut\"\nrun on-full \"$full\"\n"
        "run on-less \"$full\" --set dataset.train_limit=650\n"
        "'%s' compare on-cut/portable/replica-0 on-full/portable/replica-0\n"
        "'%s' compare on-cut/portable/replica-0 on-less/portable/replica-0 >/dev/null ||\n"
        "  echo 'negative control: 650 examples differ'\n",
        SRC, full, DT_DETRAIN_EXE, SRC, DT_DETRAIN_EXE, DT_DETRAIN_EXE);
    if (rc != 0) fprintf(stderr, "%s\n", out);
    CHECK_INT_EQ(rc, 0);
    CHECK_CONTAINS(out, "identical");
    CHECK_CONTAINS(out, "negative control: 650 examples differ");
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
                             "--set backend.threads=1 --set dataset.train_limit=10000 "
                             "--set dataset.test_limit=2000 --set dataset.train_limit=2000");
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

    /* A root trained on other examples (the first light's, on the whole data set, beside
     * references on the part a GPU call carries) is named, not compared, and fails nothing. */
    CHECK_INT_EQ(crossdev("run cpu scripts-crossdev/other --threads 2 --models mlp --steps 3 "
                          "--set dataset.train_limit=1000 --set dataset.test_limit=300"),
                 0);
    rc = crossdev("table scripts-crossdev/t2 scripts-crossdev/t1 scripts-crossdev/other "
                  "--models mlp");
    CHECK_INT_EQ(rc, 0);
    CHECK_CONTAINS(out, "- mlp: identical\n- mlp: " XD "/other not compared (other data: "
                        "fashion-mnist train_limit 1000 test_limit 300)\n");
    CHECK_CONTAINS(out, "- `" XD "/other/mlp`: not compared, trained on other data (fashion-mnist "
                        "train_limit 1000 test_limit 300; the reference: fashion-mnist "
                        "train_limit 2000 test_limit 300)");
    rc = crossdev("table scripts-crossdev/t2 scripts-crossdev/other --models mlp");
    CHECK_INT_EQ(rc, 0);
    CHECK_CONTAINS(out, "- mlp: not compared (every other root trained on other data)\n");

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

/* A Python that imports torch, as scripts/vs_torch.sh looks for one (Debian's python3-torch,
 * which make bench installs, is /usr/bin/python3's); NULL when none does. */
/* scripts/torch_python.sh's pick (make bench's venv first), or NULL. */
static const char *python_with_torch(void)
{
    static char py[1024];
    if (dt_run_capture(py, sizeof py, "bash '%s/scripts/torch_python.sh' 2>/dev/null", SRC) != 0)
        return NULL;
    py[strcspn(py, "\n")] = '\0';
    return py[0] ? py : NULL;
}

/* scripts/torch_gpt.py, the ready PyTorch module of docs/cli.md: a GPT exported by detrain
 * (untied head: lm_head too) is rebuilt from the file alone and gives the replica's validation
 * loss (1e-5 relative), accuracy and last-position predictions (all here; up to 5% allowed, for
 * near ties where another CPU's PyTorch kernels round otherwise); the negative control: the same
 * file with one weight changed (lm_head's last entry, the file's last four bytes) disagrees (exit
 * 1). */
DT_TEST(torch_gpt_rebuilds_export)
{
    const char *py = python_with_torch();
    if (!py) DT_SKIP("PyTorch is not installed");
    const char *dir = scratch("torch_gpt");
    char path[1200];
    snprintf(path, sizeof path, "%s/corpus.txt", dir);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (!f) return;
    for (int i = 0; i < 600; i++)
        fprintf(f, "line %d: the quick brown fox %s over the lazy dog.\n", i * 7919 % 1000,
                i % 3 ? "jumps" : "leaps");
    fclose(f);
    int rc = dt_run_capture(
        out, sizeof out,
        "cd '%s' && '%s' run '%s/configs/gpt-quickstart.yaml' --out run --quiet --set "
        "dataset.path=corpus.txt --set model.context=16 --set model.d_model=32 --set "
        "model.layers=2 --set model.heads=2 --set model.tie_embeddings=false --set "
        "train.steps=60 --set train.eval_every=0 --set backend.threads=1 && '%s' export "
        "run/portable/replica-0 --safetensors g.safetensors && %s '%s/scripts/torch_gpt.py' "
        "g.safetensors --replica run/portable/replica-0 --threads 1 --pred-tol 0.05 2>&1",
        dir, DT_DETRAIN_EXE, SRC, DT_DETRAIN_EXE, py, SRC);
    CHECK_INT_EQ(rc, 0);
    CHECK_CONTAINS(out, "validation windows of 17 bytes: loss ");
    CHECK_CONTAINS(out, "last-position predictions equal");
    CHECK_CONTAINS(out, "\nagree\n");
    snprintf(path, sizeof path, "%s/g.safetensors", dir);
    size_t n = 0;
    char *bytes = dt_read_file(path, &n);
    CHECK(bytes != NULL && n > 8);
    if (!bytes || n <= 8) return;
    const float changed = 3.0f;
    memcpy(bytes + n - 4, &changed, 4);
    f = fopen(path, "wb");
    CHECK(f != NULL && fwrite(bytes, 1, n, f) == n);
    if (f) fclose(f);
    free(bytes);
    rc = dt_run_capture(out, sizeof out,
                        "cd '%s' && %s '%s/scripts/torch_gpt.py' g.safetensors --replica "
                        "run/portable/replica-0 --threads 1 2>&1",
                        dir, py, SRC);
    CHECK_INT_EQ(rc, 1);
    CHECK_CONTAINS(out, "DISAGREE");
}

/* scripts/torch_python.sh: PYTHON when it has torch, a PYTHON without it refused (exit 77,
 * saying so) rather than passed over, else make bench's venv (DETRAIN_TORCH_VENV). The
 * "Pythons" are stand-ins that import anything (exit 0) or nothing (exit 1). */
DT_TEST(torch_python_pick)
{
    const char *dir = scratch("torch_python");
    CHECK_INT_EQ(
        dt_run_capture(out, sizeof out,
                       "mkdir -p '%s/venv/bin' && printf '#!/bin/sh\\nexit 0\\n' >'%s/yes' "
                       "&& printf '#!/bin/sh\\nexit 1\\n' >'%s/no' && chmod +x '%s/yes' "
                       "'%s/no' && cp '%s/yes' '%s/venv/bin/python'",
                       dir, dir, dir, dir, dir, dir, dir),
        0);
    CHECK_INT_EQ(dt_run_capture(out, sizeof out,
                                "PYTHON='%s/yes' bash '%s/scripts/torch_python.sh'", dir, SRC),
                 0);
    CHECK_CONTAINS(out, "/yes");
    CHECK_INT_EQ(dt_run_capture(out, sizeof out,
                                "PYTHON='%s/no' DETRAIN_TORCH_VENV='%s/venv' bash "
                                "'%s/scripts/torch_python.sh' 2>&1",
                                dir, dir, SRC),
                 77);
    CHECK_CONTAINS(out, "no Python with PyTorch (PYTHON=");
    CHECK_CONTAINS(out, "scripts/setup.sh --bench");
    CHECK_INT_EQ(dt_run_capture(out, sizeof out,
                                "unset PYTHON; DETRAIN_TORCH_VENV='%s/venv' bash "
                                "'%s/scripts/torch_python.sh'",
                                dir, SRC),
                 0);
    CHECK_CONTAINS(out, "/venv/bin/python");
}

DT_TEST(bench_torch_cpu)
{
    const char *py = python_with_torch();
    if (!py) DT_SKIP("PyTorch is not installed");
    const char *dir = scratch("torch");
    int rc = dt_run_capture(
        out, sizeof out,
        "cd '%s' && %s '%s/scripts/bench_torch.py' --config '%s/configs/quickstart.yaml' "
        "--device cpu --threads 1 --steps 5 --warmup 1 --modes default,deterministic "
        "--data random --batch 32 --csv t.csv 2>/dev/null",
        dir, py, SRC, SRC);
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
    CHECK_INT_EQ(dt_csv_col(field, sizeof field, csv, 1, "threads"), 0);
    CHECK_STR_EQ(field, "1");
    /* Both modes train the same model on the CPU from the same seed: the same weights. At one
     * thread (--threads 1 above), so that no parallel split or thread-count-dependent BLAS or
     * oneDNN kernel choice can show: whatever the machine's core count, the two processes run
     * the same single-threaded kernels in the same order. */
    char w0[128], w1[128];
    CHECK_INT_EQ(dt_csv_col(w0, sizeof w0, csv, 0, "weights_sha256"), 0);
    CHECK_INT_EQ(dt_csv_col(w1, sizeof w1, csv, 1, "weights_sha256"), 0);
    CHECK_INT_EQ((int)strlen(w0), 64);
    CHECK_STR_EQ(w0, w1);

    CHECK_INT_EQ(dt_run_capture(out, sizeof out,
                                "%s '%s/scripts/bench_torch.py' --device cpu --modes fastest", py,
                                SRC),
                 2);
    CHECK_CONTAINS(out, "--modes: unknown fastest");

    /* LeNet: the default modes (default, benchmark, deterministic), 2x2 then overlapping
     * pools into one CSV of its own header; on the CPU at one thread default and
     * deterministic give the same weights. */
    rc = dt_run_capture(
        out, sizeof out,
        "cd '%s' && %s '%s/scripts/bench_torch.py' --model lenet --device cpu --threads 1 "
        "--steps 3 --warmup 1 --data random --batch 16 --csv l.csv 2>/dev/null && "
        "%s '%s/scripts/bench_torch.py' --config '%s/configs/lenet.yaml' --device cpu "
        "--threads 1 --overlap-pool --steps 3 --warmup 1 --modes benchmark --data random "
        "--batch 16 --csv l.csv 2>/dev/null",
        dir, py, SRC, py, SRC, SRC);
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
                                "cd '%s' && %s '%s/scripts/bench_torch.py' --model lenet "
                                "--device cpu --steps 2 --data random --csv t.csv",
                                dir, py, SRC),
                 2);
    CHECK_CONTAINS(out, "t.csv: its header is not the lenet header");
    CHECK_INT_EQ(dt_run_capture(out, sizeof out,
                                "%s '%s/scripts/bench_torch.py' --model lenet "
                                "--config '%s/configs/quickstart.yaml' --device cpu",
                                py, SRC, SRC),
                 2);
    CHECK_CONTAINS(out, "--model lenet, but ");
    CHECK_INT_EQ(dt_run_capture(out, sizeof out,
                                "%s '%s/scripts/bench_torch.py' --overlap-pool "
                                "--device cpu",
                                py, SRC),
                 2);
    CHECK_CONTAINS(out, "--overlap-pool: only for --model lenet");
    /* The GPT (configs/gpt.yaml, scripts/torch_gpt.py): every mode trains the same model to
     * about the same loss. Not the same bits: tf32 sets float32_matmul_precision 'high',
     * which recent PyTorch honours on the CPU too (oneDNN's reduced-precision fp32 products on
     * AMX/AVX-512-BF16 Xeons), and sdpa is another attention kernel; so the final losses agree
     * within 1%. sdpa runs where PyTorch has it and is skipped, said, where not (1.13) --
     * either way the rows in the CSV are the modes that ran. */
    rc = dt_run_capture(out, sizeof out,
                        "cd '%s' && %s '%s/scripts/bench_torch.py' --config '%s/configs/gpt.yaml' "
                        "--device cpu --threads 1 --steps 3 --warmup 1 --data random --batch 4 "
                        "--csv g.csv 2>&1",
                        dir, py, SRC, SRC);
    if (rc != 0) fprintf(stderr, "%s\n", out);
    CHECK_INT_EQ(rc, 0);
    CHECK_CONTAINS(out, " default: cpu, gpt L2 d64 h4 T64 tied, batch 4, random data: median ");
    CHECK_CONTAINS(out, " deterministic: cpu, gpt L2 d64 h4 T64 tied, ");
    const bool sdpa = strstr(out, " sdpa: cpu, gpt ") != NULL;
    if (!sdpa) CHECK_CONTAINS(out, "mode sdpa: PyTorch ");
    snprintf(csv, sizeof csv, "%s/g.csv", dir);
    CHECK_INT_EQ(dt_csv_col(field, sizeof field, csv, 0, "model"), 0);
    CHECK_STR_EQ(field, "gpt L2 d64 h4 T64 tied");
    CHECK_INT_EQ(dt_csv_col(field, sizeof field, csv, 0, "tf32_matmul"), 0);
    CHECK_STR_EQ(field, "false");
    CHECK_INT_EQ(dt_csv_col(field, sizeof field, csv, 1, "mode"), 0);
    CHECK_STR_EQ(field, "tf32");
    CHECK_INT_EQ(dt_csv_col(field, sizeof field, csv, 1, "tf32_matmul"), 0);
    CHECK_STR_EQ(field, "true");
    CHECK_INT_EQ(dt_csv_col(field, sizeof field, csv, 2, "mode"), 0);
    CHECK_STR_EQ(field, "deterministic");
    CHECK_INT_EQ(dt_csv_col(field, sizeof field, csv, 0, "final_loss"), 0);
    const double loss0 = atof(field);
    CHECK(loss0 > 0);
    for (int i = 1; i < (sdpa ? 4 : 3); i++) {
        CHECK_INT_EQ(dt_csv_col(field, sizeof field, csv, i, "final_loss"), 0);
        CHECK_NEAR(atof(field), loss0, 0.01 * loss0);
    }
    CHECK_INT_EQ(dt_csv_col(field, sizeof field, csv, 3, "mode"), sdpa ? 0 : -1);
    /* sdpa is attention's mode: refused for the MLP */
    CHECK_INT_EQ(dt_run_capture(out, sizeof out,
                                "%s '%s/scripts/bench_torch.py' --device cpu --modes sdpa", py,
                                SRC),
                 2);
    CHECK_CONTAINS(out, "--modes sdpa: for --model gpt only");
    if (dt_run_capture(out, sizeof out,
                       "%s -c 'import torch, sys; sys.exit(torch.cuda.is_available())'", py) == 0) {
        CHECK_INT_EQ(dt_run_capture(out, sizeof out,
                                    "%s '%s/scripts/bench_torch.py' --device cuda "
                                    "--steps 2 --warmup 0 --modes default",
                                    py, SRC),
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
             DT_CASE(session_tests_stage_skips), DT_CASE(payload_fits), DT_CASE(session_kind),
             DT_CASE(session_crossdev_and_matrix), DT_CASE(cmake_cudnn_root),
             DT_CASE(crossdev_references_current), DT_CASE(cross_device_cpu), DT_CASE(fmnist_cut),
             DT_CASE(bench_torch_cpu), DT_CASE(deps_fetch_build), DT_CASE(torch_python_pick),
             DT_CASE(torch_gpt_rebuilds_export))
