/* Replays fuzz inputs without libFuzzer: every file named, and every file of every folder
 * named (in name order, dot files skipped), goes once through the target's
 * LLVMFuzzerTestOneInput. Built with the normal compiler in every build (ASan/UBSan
 * included) as fuzz_<target>_replay; the `fuzz.*` tests (tests/test_fuzz.cmake) run it over
 * fuzz/regressions/<target>/ (inputs that once crashed) and fuzz/corpus/<target>/ (the
 * seeds). A broken check aborts; an unreadable path exits 2; no input at all exits 1, so
 * a test pointed at the wrong folder cannot pass. */
#include "fuzz/fuzz_target.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Read the whole file at `path` into a malloc'd buffer; NULL (errno set) on failure. */
static uint8_t *read_all(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 4096, n = 0;
    uint8_t *buf = malloc(cap);
    while (buf) {
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap) break;
        uint8_t *bigger = realloc(buf, cap * 2);
        if (!bigger) free(buf);
        buf = bigger;
        cap *= 2;
    }
    int failed = !buf || ferror(f);
    fclose(f);
    if (failed) {
        free(buf);
        if (!errno) errno = EIO;
        return NULL;
    }
    *size = n;
    return buf;
}

static int replay_file(const char *path)
{
    size_t size = 0;
    uint8_t *data = read_all(path, &size);
    if (!data) {
        fprintf(stderr, "replay: %s: cannot read: %s\n", path, strerror(errno));
        return -1;
    }
    fprintf(stderr, "replay: %s (%zu bytes)\n", path, size);
    LLVMFuzzerTestOneInput(data, size);
    free(data);
    return 1;
}

static int skip_dot(const struct dirent *e) { return e->d_name[0] != '.'; }

/* Replay the folder's regular files in name order; returns how many, or -1. */
static int replay_dir(const char *dir)
{
    struct dirent **names;
    int n = scandir(dir, &names, skip_dot, alphasort);
    if (n < 0) {
        fprintf(stderr, "replay: %s: cannot list: %s\n", dir, strerror(errno));
        return -1;
    }
    int count = 0;
    for (int i = 0; i < n; i++) {
        char path[4096];
        struct stat sb;
        snprintf(path, sizeof path, "%s/%s", dir, names[i]->d_name);
        if (count >= 0 && stat(path, &sb) == 0 && S_ISREG(sb.st_mode)) {
            int r = replay_file(path);
            count = r < 0 ? -1 : count + r;
        }
        free(names[i]);
    }
    free(names);
    return count;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s FILE_OR_FOLDER...\n", argv[0]);
        return 2;
    }
    int total = 0;
    for (int i = 1; i < argc; i++) {
        struct stat sb;
        if (stat(argv[i], &sb) != 0) {
            fprintf(stderr, "replay: %s: %s\n", argv[i], strerror(errno));
            return 2;
        }
        int n = S_ISDIR(sb.st_mode) ? replay_dir(argv[i]) : replay_file(argv[i]);
        if (n < 0) return 2;
        total += n;
    }
    if (total == 0) {
        fprintf(stderr, "replay: no input found in the paths given\n");
        return 1;
    }
    printf("replay: %d input%s, every check passed\n", total, total == 1 ? "" : "s");
    return 0;
}
