/* Inputs, signals and messages (issue 20, items 4 (inputs), 6 and 7): files detrain reads
 * back must be regular files and are refused at once otherwise (a FIFO cannot hang it,
 * /dev/zero cannot exhaust memory), leaving an earlier result byte-for-byte unchanged;
 * SIGINT and SIGHUP during the overhead measurement stop the run within a step and the
 * report then says the overhead was not measured; an empty or cut-short overhead.csv is
 * accepted; bytes from files are escaped in messages; compare says why it cannot name the
 * first divergent tensor. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/dynlib.h"
#include "core/fileio.h"
#include "harness/record/checkpoint.h"
#include "harness/setup/config.h"
#include "tests/check.h"
#include "tests/run_helper.h"

#define EXE DT_DETRAIN_EXE
#define TINY DT_TEST_DATA_DIR "/tiny.yaml"
#define TMP DT_TEST_TMP_DIR "/safety."

static char out[65536];

/* A test that could hang (a blocking open of a FIFO) fails instead after 60 s. */
static void on_alarm(int sig)
{
    (void)sig;
    static const char msg[] = "test timed out: a read blocked\n";
    ssize_t w = write(2, msg, sizeof msg - 1);
    (void)w;
    _exit(1);
}

static void arm_timeout(void)
{
    signal(SIGALRM, on_alarm);
    alarm(60);
}

/* Every file under dir as "sha256  path" lines, plus the kind of every non-regular entry:
 * equal before and after means the folder is byte-for-byte unchanged. */
static char *folder_hashes(const char *dir)
{
    static char buf[1 << 18];
    int rc = dt_run_capture(buf, sizeof buf,
                            "cd '%s' && { find . -type f -exec sha256sum {} + ; "
                            "find . ! -type f -printf '%%p %%y %%l\\n'; } | LC_ALL=C sort",
                            dir);
    CHECK_INT_EQ(rc, 0);
    return strdup(buf);
}

static void check_unchanged(const char *before, const char *dir)
{
    char *after = folder_hashes(dir);
    if (strcmp(before, after) != 0) {
        fprintf(stderr, "%s changed:\nbefore:\n%s\nafter:\n%s\n", dir, before, after);
        dt_check_failures_++;
    }
    free(after);
}

/* A finished run of the tiny config (2 steps per checkpoint) into dir. */
static void finished_run(const char *dir, const char *sets)
{
    int rc = dt_run_capture(out, sizeof out,
                            "rm -rf '%s' && '%s' run '%s' --out '%s' --set train.steps=8 "
                            "--set train.checkpoint_every=4 --set replicas=1 %s",
                            dir, EXE, TINY, dir, sets);
    if (rc != 0) fprintf(stderr, "%s\n", out);
    CHECK_INT_EQ(rc, 0);
}

static void write_text(const char *path, const char *text, size_t n)
{
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (!f) return;
    CHECK(fwrite(text, 1, n, f) == n);
    fclose(f);
}

/* ---- unit: escaping ------------------------------------------------------------------ */

DT_TEST(escape_bytes)
{
    char buf[64];
    CHECK_STR_EQ(dt_escape_bytes(buf, sizeof buf, "\x1b[31mred", 8, 100), "\\x1b[31mred");
    CHECK_STR_EQ(dt_escape_str(buf, sizeof buf, "a\\b\tc\nd\x7f"), "a\\\\b\\x09c\\x0ad\\x7f");
    /* UTF-8 text stays; broken UTF-8, C1 controls and a bidi override are escaped */
    CHECK_STR_EQ(dt_escape_str(buf, sizeof buf, "caf\xc3\xa9"), "caf\xc3\xa9");
    CHECK_STR_EQ(dt_escape_str(buf, sizeof buf, "\xc3("), "\\xc3(");
    CHECK_STR_EQ(dt_escape_str(buf, sizeof buf, "\xc2\x9b"), "\\xc2\\x9b");
    CHECK_STR_EQ(dt_escape_str(buf, sizeof buf, "x\xe2\x80\xaey"), "x\\xe2\\x80\\xaey");
    CHECK_STR_EQ(dt_escape_str(buf, sizeof buf, "\xed\xa0\x80"), "\\xed\\xa0\\x80"); /* surrogate */
    /* NUL bytes inside counted data */
    CHECK_STR_EQ(dt_escape_bytes(buf, sizeof buf, "a\0b", 3, 100), "a\\x00b");
    /* capped: by the input bound and by the room, "..." marking the cut */
    CHECK_STR_EQ(dt_escape_bytes(buf, sizeof buf, "abcdefgh", 8, 4), "abcd...");
    char small[12];
    CHECK_STR_EQ(dt_escape_str(small, sizeof small, "\x1b\x1b\x1b\x1b"), "\\x1b\\x1b...");
    char big[4096];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    CHECK_INT_EQ(strlen(dt_escape_str(buf, sizeof buf, big)), sizeof buf - 1);
    CHECK_INT_EQ(strlen(dt_escape_str(big, sizeof big, big + 3000)), DT_ESCAPE_MAX_IN + 3);
    /* messages: newline, tab and backslashes kept, control bytes escaped */
    dt_sanitize_message(buf, sizeof buf, "a\\x1b\n\tb\x1b[0m\r");
    CHECK_STR_EQ(buf, "a\\x1b\n\tb\\x1b[0m\\x0d");
}

/* ---- unit: regular files only -------------------------------------------------------- */

static void expect_refused(enum dt_status st, const struct dt_error *err, const char *path,
                           const char *kind)
{
    CHECK_INT_EQ(st, DT_ERR_IO);
    CHECK_CONTAINS(err->msg, path);
    CHECK_CONTAINS(err->msg, "not a regular file");
    CHECK_CONTAINS(err->msg, kind);
}

DT_TEST(regular_files_only)
{
    arm_timeout();
    const char *fifo = TMP "unit.fifo";
    unlink(fifo);
    CHECK_INT_EQ(mkfifo(fifo, 0600), 0);
    struct dt_error err = {0};
    char *data = NULL;
    size_t len = 0;
    expect_refused(dt_read_regular_file(&data, &len, "/dev/zero", "a test file", 1 << 20, &err),
                   &err, "/dev/zero", "character device");
    expect_refused(dt_read_regular_file(&data, &len, fifo, "a test file", 1 << 20, &err), &err,
                   fifo, "FIFO");
    expect_refused(
        dt_read_regular_file(&data, &len, DT_TEST_DATA_DIR, "a test file", 1 << 20, &err), &err,
        DT_TEST_DATA_DIR, "folder");
    CHECK(data == NULL);
    FILE *f = NULL;
    expect_refused(dt_fopen_regular(&f, fifo, "a trace", &err), &err, fifo, "FIFO");
    CHECK(f == NULL);
    /* a link to a special file is refused too; a link to a regular file is fine */
    const char *zlink = TMP "unit.zero-link", *tlink = TMP "unit.tiny-link";
    unlink(zlink);
    unlink(tlink);
    CHECK_INT_EQ(symlink("/dev/zero", zlink), 0);
    CHECK_INT_EQ(symlink(TINY, tlink), 0);
    expect_refused(dt_read_regular_file(&data, &len, zlink, "a test file", 1 << 20, &err), &err,
                   zlink, "character device");
    CHECK_INT_EQ(dt_read_regular_file(&data, &len, tlink, "a test file", 1 << 20, &err), DT_OK);
    CHECK(data != NULL && len > 100 && strlen(data) == len);
    free(data);
    /* the bound: a file larger than the format allows is refused before it is read */
    CHECK_INT_EQ(dt_read_regular_file(&data, &len, TINY, "a test file", 16, &err), DT_ERR_DATA);
    CHECK_CONTAINS(err.msg, TINY);
    CHECK_CONTAINS(err.msg, "more than the 16 bytes");
    /* the readers: checkpoint and config */
    struct dt_checkpoint ck;
    expect_refused(dt_checkpoint_read(&ck, "/dev/zero", &err), &err, "/dev/zero",
                   "character device");
    expect_refused(dt_checkpoint_read(&ck, fifo, &err), &err, fifo, "FIFO");
    static struct dt_experiment exp;
    expect_refused(dt_config_load(&exp, fifo, NULL, 0, &err), &err, fifo, "FIFO");
    expect_refused(dt_config_load(&exp, zlink, NULL, 0, &err), &err, zlink, "character device");
    unlink(fifo);
    unlink(zlink);
    unlink(tlink);
}

/* ---- e2e: special files as config and checkpoint ------------------------------------- */

/* /dev/zero (directly and through a link) and a FIFO as the config of a run into a
 * finished result's folder: exit 2 at once, the file named, the folder unchanged. */
DT_TEST(special_config_refused)
{
    const char *dir = TMP "cfg";
    finished_run(dir, "");
    char *before = folder_hashes(dir);
    const char *fifo = TMP "cfg.fifo.yaml", *zlink = TMP "cfg.zero.yaml";
    unlink(fifo);
    unlink(zlink);
    CHECK_INT_EQ(mkfifo(fifo, 0600), 0);
    CHECK_INT_EQ(symlink("/dev/zero", zlink), 0);
    const char *configs[] = {fifo, zlink, "/dev/zero", "/dev/urandom"};
    const char *kinds[] = {"FIFO", "character device", "character device", "character device"};
    for (int i = 0; i < 4; i++) {
        for (int resume = 0; resume < 2; resume++) {
            int rc = dt_run_capture(out, sizeof out, "timeout 20 '%s' run '%s' %s '%s'", EXE,
                                    configs[i], resume ? "--resume" : "--out", dir);
            CHECK_INT_EQ(rc, 2); /* 124 = it hung (no wall-clock bound beside it: a slow
                                    machine is not a hang) */
            CHECK_CONTAINS(out, configs[i]);
            CHECK_CONTAINS(out, "not a regular file");
            CHECK_CONTAINS(out, kinds[i]);
        }
    }
    check_unchanged(before, dir);
    free(before);
    unlink(fifo);
    unlink(zlink);
}

/* checkpoint.bin as a link to /dev/zero and as a FIFO in a folder --resume goes on with:
 * exit 2 at once naming the checkpoint, the folder unchanged. */
DT_TEST(special_checkpoint_refused)
{
    const char *dir = TMP "ck";
    finished_run(dir, "");
    char ck[512];
    snprintf(ck, sizeof ck, "%s/portable/replica-0/checkpoint.bin", dir);
    CHECK(dt_path_exists(ck));
    for (int k = 0; k < 2; k++) {
        unlink(ck);
        if (k == 0) CHECK_INT_EQ(symlink("/dev/zero", ck), 0);
        else CHECK_INT_EQ(mkfifo(ck, 0600), 0);
        char *before = folder_hashes(dir);
        /* train.steps may grow on --resume: the replica goes on from its checkpoint */
        int rc = dt_run_capture(out, sizeof out,
                                "timeout 20 '%s' run '%s' --resume '%s' --set train.steps=12 "
                                "--set train.checkpoint_every=4 --set replicas=1",
                                EXE, TINY, dir);
        CHECK_INT_EQ(rc, 2); /* 124 = it hung */
        CHECK_CONTAINS(out, ck);
        /* a link is refused as a link inside a result (no link is followed there), a FIFO
         * as not a regular file */
        CHECK_CONTAINS(out, k == 0 ? "is a symbolic link inside a detrain result" : "regular file");
        check_unchanged(before, dir);
        free(before);
    }
}

/* ---- e2e: signals in the overhead phase ---------------------------------------------- */

static pid_t spawn_run(const char *dir, const char *err_path)
{
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int null = open("/dev/null", O_WRONLY);
        if (fd < 0 || null < 0) _exit(99);
        dup2(fd, 2);
        dup2(null, 1);
        setenv("DETRAIN_GNUPLOT", "none",
               1); /* the interrupted run's report: no plots to wait for */
        /* a million pairs: an hour when a signal waits for the end of the measurement */
        execl(EXE, EXE, "run", TINY, "--out", dir, "--set", "train.steps=4", "--set", "replicas=1",
              "--set", "policies=[fast, portable]", "--set", "report.overhead_samples=1000000",
              (char *)NULL);
        _exit(98);
    }
    return pid;
}

static bool file_contains(const char *path, const char *needle)
{
    char *text = dt_read_file(path, NULL);
    bool yes = text && strstr(text, needle);
    free(text);
    return yes;
}

/* Exit status of pid within `seconds`, else kill it and return -1. */
static int wait_within(pid_t pid, double seconds)
{
    struct timespec nap = {0, 20 * 1000 * 1000};
    for (double t = 0; t < seconds; t += 0.02) {
        int st;
        if (waitpid(pid, &st, WNOHANG) == pid) return WIFEXITED(st) ? WEXITSTATUS(st) : -2;
        nanosleep(&nap, NULL);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    return -1;
}

static void signal_in_overhead(const char *name, int sig)
{
    char dir[512], err_path[600], path[700];
    snprintf(dir, sizeof dir, TMP "%s", name);
    snprintf(err_path, sizeof err_path, "%s.stderr", dir);
    /* no stale stderr from an earlier run may be read as this one's */
    dt_run_capture(out, sizeof out, "rm -rf '%s' '%s'", dir, err_path);
    pid_t pid = spawn_run(dir, err_path);
    CHECK(pid > 0);
    bool seen = false;
    struct timespec nap = {0, 50 * 1000 * 1000};
    for (int i = 0; i < 2400 && !seen; i++) { /* up to 2 minutes on a loaded machine */
        seen = file_contains(err_path, "detrain: overhead:");
        if (!seen) nanosleep(&nap, NULL);
    }
    CHECK(seen);
    nanosleep(&(struct timespec){0, 300 * 1000 * 1000}, NULL); /* into the pairs */
    kill(pid, sig);
    /* the generous bound catches only a signal that did not stop the measurement (a million
     * pairs: an hour); ending takes a second or two */
    int rc = wait_within(pid, 120);
    CHECK_INT_EQ(rc, 130); /* -1: still measuring after 120 s */
    char *err_text = dt_read_file(err_path, NULL);
    if (err_text) {
        char want[64];
        snprintf(want, sizeof want, "interrupted by signal %d", sig);
        CHECK_CONTAINS(err_text, want);
    }
    free(err_text);
    snprintf(path, sizeof path, "%s/run.json", dir);
    CHECK(file_contains(path, "\"status\": \"interrupted\""));
    snprintf(path, sizeof path, "%s/overhead.csv", dir);
    CHECK(file_contains(path, "policy,pair,order,fast_ms,policy_ms"));
    CHECK_INT_EQ(dt_run_capture(out, sizeof out, "'%s' report '%s' --no-plots", EXE, dir), 0);
    CHECK_CONTAINS(out, "overhead: not measured for portable");
    snprintf(path, sizeof path, "%s/report.md", dir);
    CHECK(file_contains(path, "Overhead not measured for portable"));
}

DT_TEST(sigint_in_overhead) { signal_in_overhead("sigint", SIGINT); }

DT_TEST(sighup_in_overhead) { signal_in_overhead("sighup", SIGHUP); }

/* ---- e2e: overhead.csv left empty or cut short --------------------------------------- */

DT_TEST(empty_overhead_csv)
{
    const char *dir = TMP "ovh";
    finished_run(dir, "--set 'policies=[fast, portable]' --set report.overhead_samples=20");
    char path[512];
    snprintf(path, sizeof path, "%s/overhead.csv", dir);
    CHECK_INT_EQ(dt_run_capture(out, sizeof out, "'%s' report '%s' --no-plots", EXE, dir), 0);
    CHECK(strstr(out, "not measured") == NULL);
    /* zero bytes (killed before the header reached the disk) */
    write_text(path, "", 0);
    CHECK_INT_EQ(dt_run_capture(out, sizeof out, "'%s' report '%s' --no-plots", EXE, dir), 0);
    CHECK_CONTAINS(out, "overhead: not measured for portable");
    CHECK_CONTAINS(out, "overhead.csv is empty");
    /* the header cut short */
    write_text(path, "policy,pai", 10);
    CHECK_INT_EQ(dt_run_capture(out, sizeof out, "'%s' report '%s' --no-plots", EXE, dir), 0);
    CHECK_CONTAINS(out, "overhead: not measured for portable");
    /* header only */
    write_text(path, "policy,pair,order,fast_ms,policy_ms\n", 36);
    CHECK_INT_EQ(dt_run_capture(out, sizeof out, "'%s' report '%s' --no-plots", EXE, dir), 0);
    CHECK_CONTAINS(out, "overhead: not measured for portable");
    /* some rows, the last one cut short: measured over the complete rows, labelled */
    const char partial[] = "policy,pair,order,fast_ms,policy_ms\n"
                           "portable,0,fast_first,1.000000,1.500000\n"
                           "portable,1,policy_first,1.000000,1.500000\n"
                           "portable,2,fast_fi";
    write_text(path, partial, sizeof partial - 1);
    CHECK_INT_EQ(dt_run_capture(out, sizeof out, "'%s' report '%s' --no-plots", EXE, dir), 0);
    CHECK_CONTAINS(out, "1.50x");
    CHECK_CONTAINS(out, "(partial: 2 pairs)");
    CHECK_CONTAINS(out, "portable (2 of 20 pairs)");
    /* a malformed row that is not the cut-short last line is still an error */
    const char bad[] = "policy,pair,order,fast_ms,policy_ms\n"
                       "portable,0,fast_first,1.000000,oops\n"
                       "portable,1,policy_first,1.000000,1.500000\n";
    write_text(path, bad, sizeof bad - 1);
    CHECK_INT_EQ(dt_run_capture(out, sizeof out, "'%s' report '%s' --no-plots", EXE, dir), 2);
    CHECK_CONTAINS(out, "overhead.csv:2: bad policy_ms 'oops'");
}

/* ---- e2e: messages ------------------------------------------------------------------- */

/* A terminal escape sequence in a trace header reaches stderr escaped, never raw. */
DT_TEST(escape_in_trace_header)
{
    const char *dir = TMP "esc";
    finished_run(dir, "--set replicas=2");
    char path[512];
    snprintf(path, sizeof path, "%s/portable/replica-1/trace.csv", dir);
    char *text = dt_read_file(path, NULL);
    CHECK(text != NULL);
    if (!text) return;
    char *body = strchr(text, '\n');
    size_t n = strlen(body);
    char *bad = malloc(n + 64);
    int k = snprintf(bad, 64, "\x1b[31mstep,loss,model_digest\x07");
    memcpy(bad + k, body, n);
    write_text(path, bad, (size_t)k + n);
    free(bad);
    free(text);
    int rc = dt_run_capture(out, sizeof out,
                            "'%s' compare '%s/portable/replica-0' "
                            "'%s/portable/replica-1'",
                            EXE, dir, dir);
    CHECK_INT_EQ(rc, 2);
    CHECK_CONTAINS(out, "trace.csv:1: not a detrain trace");
    CHECK_CONTAINS(out, "\\x1b[31mstep,loss,model_digest\\x07");
    CHECK(strchr(out, 0x1b) == NULL && strchr(out, 0x07) == NULL);
    rc = dt_run_capture(out, sizeof out, "'%s' report '%s' --no-plots", EXE, dir);
    CHECK_INT_EQ(rc, 2);
    CHECK_CONTAINS(out, "\\x1b[31m");
    CHECK(strchr(out, 0x1b) == NULL && strchr(out, 0x07) == NULL);
    /* a CSV field and a config value are escaped the same way */
    snprintf(path, sizeof path, "%s/overhead.csv", dir);
    const char ovh[] = "policy,pair,order,fast_ms,policy_ms\nportable,0,\x1b]0;x\x07,1,1\n";
    write_text(path, ovh, sizeof ovh - 1);
    snprintf(path, sizeof path, "%s/portable/replica-1/trace.csv", dir);
    rc = dt_run_capture(out, sizeof out,
                        "cp '%s/portable/replica-0/trace.csv' '%s' && "
                        "'%s' report '%s' --no-plots",
                        dir, path, EXE, dir);
    CHECK_INT_EQ(rc, 2);
    CHECK_CONTAINS(out, "bad order '\\x1b]0;x\\x07'");
    CHECK(strchr(out, 0x1b) == NULL && strchr(out, 0x07) == NULL);
    const char *cfg = TMP "esc.yaml";
    const char yaml[] = "name: \"\\e[2J\"\n";
    write_text(cfg, yaml, sizeof yaml - 1);
    rc = dt_run_capture(out, sizeof out, "'%s' run '%s' --out '%s.cfg'", EXE, cfg, dir);
    CHECK_INT_EQ(rc, 2);
    CHECK_CONTAINS(out, "\\x1b[2J");
    CHECK(strchr(out, 0x1b) == NULL);
}

/* compare says why it cannot name the first divergent tensor. */
DT_TEST(compare_names_missing_tensors)
{
    const char *dir = TMP "tens";
    finished_run(dir, "--set 'policies=[fast, portable]'");
    char a[512], b[512];
    snprintf(a, sizeof a, "%s/fast/replica-0", dir);
    snprintf(b, sizeof b, "%s/portable/replica-0", dir);
    CHECK_INT_EQ(dt_run_capture(out, sizeof out, "'%s' compare '%s' '%s'", EXE, a, b), 1);
    CHECK_CONTAINS(out, "first divergent tensor: dense0.");
    CHECK_INT_EQ(dt_run_capture(out, sizeof out, "rm '%s/tensors.csv'", b), 0);
    CHECK_INT_EQ(dt_run_capture(out, sizeof out, "'%s' compare '%s' '%s'", EXE, a, b), 1);
    char want[700];
    snprintf(want, sizeof want,
             "first divergent tensor: unknown: %s/tensors.csv: cannot open: No such file or "
             "directory",
             b);
    CHECK_CONTAINS(out, want);
    /* traces given as files: the same */
    CHECK_INT_EQ(
        dt_run_capture(out, sizeof out, "'%s' compare '%s/trace.csv' '%s/trace.csv'", EXE, a, b),
        1);
    CHECK_CONTAINS(out, want);
    /* a tensors.csv without the step */
    CHECK_INT_EQ(dt_run_capture(out, sizeof out,
                                "echo step,tensor,sha256 > '%s/tensors.csv' && "
                                "'%s' compare '%s' '%s'",
                                b, EXE, a, b),
                 1);
    CHECK_CONTAINS(out, "first divergent tensor: unknown: ");
    CHECK_CONTAINS(out, "tensors.csv: no rows for step 1");
}

/* The probe behind cuDNN's "could not start" message (nets/cuda/cudnn_conv.c): a library
 * that loads is not listed, one that does not is named with the loader's reason; a folder
 * holding one that is not on the search path makes it load. */
DT_TEST(dynlib_probe_names_missing)
{
    char dir[2048], missing[1024];
    dt_dynlib_folder_of((const void *)printf, dir, sizeof dir); /* libc's folder */
    CHECK(dir[0] == '/');
    const char *const names[] = {"libc.so.6", "libdetrain-no-such-library.so.1", "libm.so.6"};
    CHECK_INT_EQ(dt_dynlib_probe(names, 3, NULL, missing, sizeof missing), 1);
    CHECK_CONTAINS(missing, "libdetrain-no-such-library.so.1 (");
    CHECK(strstr(missing, "libc.so.6") == NULL && strstr(missing, "libm.so.6") == NULL);
    /* a copy of a real library in a folder of our own, found only through `dir` */
    CHECK_INT_EQ(dt_run_capture(out, sizeof out,
                                "mkdir -p " DT_TEST_TMP_DIR
                                "/dynlib && cp '%s/libm.so.6' " DT_TEST_TMP_DIR
                                "/dynlib/libdetrain-probe-copy.so.1",
                                dir),
                 0);
    const char *const copy[] = {"libdetrain-probe-copy.so.1"};
    CHECK_INT_EQ(dt_dynlib_probe(copy, 1, NULL, missing, sizeof missing), 1);
    CHECK_INT_EQ(dt_dynlib_probe(copy, 1, DT_TEST_TMP_DIR "/dynlib", missing, sizeof missing), 0);
}

DT_TEST_MAIN(DT_CASE(escape_bytes), DT_CASE(regular_files_only),
             DT_CASE(dynlib_probe_names_missing), DT_CASE(special_config_refused),
             DT_CASE(special_checkpoint_refused), DT_CASE(sigint_in_overhead),
             DT_CASE(sighup_in_overhead), DT_CASE(empty_overhead_csv),
             DT_CASE(escape_in_trace_header), DT_CASE(compare_names_missing_tensors))
