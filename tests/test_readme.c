/* README's config reference must be exactly what `detrain config-reference` prints, so
 * the documentation cannot drift from the key table that drives parsing; and
 * docs/DESIGN.md must name files that exist and list every harness file in its stage. */
#include <ctype.h>
#include <dirent.h>
#include <stdbool.h>
#include <sys/stat.h>

#include "tests/check.h"
#include "tests/run_helper.h"

DT_TEST(config_reference_matches)
{
    static char ref[65536];
    CHECK_INT_EQ(dt_run_capture(ref, sizeof ref, "'%s' config-reference", DT_DETRAIN_EXE), 0);
    char *readme = dt_read_file(DT_SOURCE_DIR "/README.md", NULL);
    CHECK(readme != NULL);
    if (!readme) return;
    const char *begin = strstr(readme, "<!-- config-reference:begin -->\n");
    const char *end = strstr(readme, "<!-- config-reference:end -->");
    CHECK(begin && end && end > begin);
    if (begin && end && end > begin) {
        begin += strlen("<!-- config-reference:begin -->\n");
        size_t n = (size_t)(end - begin);
        char *section = malloc(n + 1);
        memcpy(section, begin, n);
        section[n] = '\0';
        if (strcmp(section, ref) != 0) {
            fprintf(stderr, "README's config reference differs from `detrain config-reference`;\n"
                            "regenerate it between the config-reference markers.\n");
            dt_check_failures_++;
        }
        free(section);
    }
    free(readme);
}

/* Every path with a folder and a source extension that docs/DESIGN.md names
 * ("nets/cuda/status.c") exists in the tree. Returns how many it checked. */
static int design_paths_exist(const char *design, const char *root, int *missing)
{
    int checked = 0;
    *missing = 0;
    for (const char *p = design; *p; p++) {
        if (!(isalpha((unsigned char)*p) &&
              (p == design || !(isalnum((unsigned char)p[-1]) || p[-1] == '/' || p[-1] == '.'))))
            continue;
        size_t n = 0;
        bool slash = false;
        while (isalnum((unsigned char)p[n]) || p[n] == '_' || p[n] == '/' || p[n] == '.') {
            slash |= p[n] == '/';
            n++;
        }
        while (n && p[n - 1] == '.') n--; /* a sentence's full stop */
        char tok[256];
        if (!slash || n >= sizeof tok) {
            p += n ? n - 1 : 0;
            continue;
        }
        memcpy(tok, p, n);
        tok[n] = '\0';
        const char *dot = strrchr(tok, '.');
        if (dot &&
            (!strcmp(dot, ".c") || !strcmp(dot, ".h") || !strcmp(dot, ".cu") ||
             !strcmp(dot, ".md")) &&
            strncmp(tok, "../", 3) != 0) {
            char path[512];
            struct stat st;
            snprintf(path, sizeof path, "%s/%s", root, tok);
            checked++;
            if (stat(path, &st) != 0) {
                fprintf(stderr, "docs/DESIGN.md names %s, which is not in the tree\n", tok);
                (*missing)++;
            }
        }
        p += n - 1;
    }
    return checked;
}

DT_TEST(design_names_existing_files)
{
    char *design = dt_read_file(DT_SOURCE_DIR "/docs/DESIGN.md", NULL);
    CHECK(design != NULL);
    if (!design) return;
    int missing = 0;
    CHECK(design_paths_exist(design, DT_SOURCE_DIR, &missing) >= 10);
    CHECK_INT_EQ(missing, 0);
    /* the check can fail: a made-up file is reported */
    CHECK_INT_EQ(design_paths_exist("see nets/cuda/no_such_file.c.", DT_SOURCE_DIR, &missing), 1);
    CHECK_INT_EQ(missing, 1);
    free(design);
}

/* docs/DESIGN.md's "Folders" lists every source file of each harness stage on that
 * stage's lines, so a file added or moved without the design is caught. */
DT_TEST(design_lists_harness_stages)
{
    char *design = dt_read_file(DT_SOURCE_DIR "/docs/DESIGN.md", NULL);
    CHECK(design != NULL);
    if (!design) return;
    static const char *const stages[] = {"setup", "run", "record", "analyze"};
    int files = 0;
    for (int i = 0; i < 4; i++) {
        char head[64], dir[512];
        snprintf(head, sizeof head, "\nharness/%s/ ", stages[i]);
        const char *at = strstr(design, head);
        CHECK(at != NULL);
        if (!at) continue;
        /* the stage's lines: its own and the indented ones after it */
        const char *end = at + 1;
        do end = strchr(end + 1, '\n');
        while (end && end[1] == ' ');
        size_t len = end ? (size_t)(end - at) : strlen(at);
        char *lines = strndup(at, len);
        snprintf(dir, sizeof dir, "%s/harness/%s", DT_SOURCE_DIR, stages[i]);
        DIR *d = opendir(dir);
        CHECK(d != NULL);
        for (struct dirent *e; d && (e = readdir(d));) {
            size_t n = strlen(e->d_name);
            if (n < 3 || strcmp(e->d_name + n - 2, ".c") != 0) continue;
            char name[256];
            snprintf(name, sizeof name, "%.*s", (int)(n - 2), e->d_name);
            files++;
            bool found = false;
            for (const char *q = lines; (q = strstr(q, name)); q++)
                if (!isalnum((unsigned char)q[-1]) && q[-1] != '_' &&
                    !isalnum((unsigned char)q[strlen(name)]) && q[strlen(name)] != '_')
                    found = true;
            if (!found) {
                fprintf(stderr, "docs/DESIGN.md \"Folders\" does not list harness/%s/%s\n",
                        stages[i], e->d_name);
                dt_check_failures_++;
            }
        }
        if (d) closedir(d);
        free(lines);
    }
    CHECK(files >= 20);
    free(design);
}

DT_TEST_MAIN(DT_CASE(config_reference_matches), DT_CASE(design_names_existing_files),
             DT_CASE(design_lists_harness_stages))
