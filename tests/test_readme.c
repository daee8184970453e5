/* README's config reference must be exactly what `detrain config-reference` prints, so
 * the documentation cannot drift from the key table that drives parsing; and
 * docs/DESIGN.md must name files that exist and list every harness file in its stage. */
#include <ctype.h>
#include <dirent.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <unistd.h>

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

/* ---- numbers quoted from results/ ------------------------------------------------------
 * README cites its figures: a number followed by `<!-- n: FILE | KEY -->` (spaces free,
 * "| KEY" optional) must be, at the number of decimals it is quoted with, a number on a
 * line of FILE (under the source tree) that contains KEY; a fenced block followed by
 * `<!-- block: FILE -->` must have every number of its lines but the first in FILE. So a
 * regenerated result that changes a quoted figure fails here until README follows. */

/* Does the text of one line [b, e) hold a number that prints as q (d decimals)? */
static bool line_has_number(const char *b, const char *e, const char *q, int d)
{
    for (const char *p = b; p < e; p++) {
        if (!isdigit((unsigned char)*p)) continue;
        if (p > b && (isalnum((unsigned char)p[-1]) || p[-1] == '.' || p[-1] == '_')) {
            while (p + 1 < e && (isdigit((unsigned char)p[1]) || p[1] == '.')) p++;
            continue;
        }
        const char *start = p > b && p[-1] == '-' ? p - 1 : p;
        char *end;
        double v = strtod(start, &end);
        char buf[64];
        snprintf(buf, sizeof buf, "%.*f", d, v);
        if (strcmp(buf, q) == 0) return true;
        if (strcmp(buf, "-0") == 0 || strncmp(buf, "-0.", 3) == 0) { /* -0.00 prints as 0.00 */
            snprintf(buf, sizeof buf, "%.*f", d, -v);
            if (strcmp(buf, q) == 0) return true;
        }
        p = end > p ? end - 1 : p;
    }
    return false;
}

/* Is q (d decimals) on some line of `text` that contains key ("" = any line)? */
static bool file_has_number(const char *text, const char *key, const char *q, int d)
{
    const size_t klen = strlen(key);
    for (const char *b = text; *b;) {
        const char *e = strchr(b, '\n');
        if (!e) e = b + strlen(b);
        bool keyed = klen == 0;
        for (const char *k = b; !keyed && k + klen <= e; k++) keyed = !memcmp(k, key, klen);
        if (keyed && line_has_number(b, e, q, d)) return true;
        b = *e ? e + 1 : e;
    }
    return false;
}

/* The number that ends just before `at` (skipping markup such as "**", "×", "x", "%",
 * " ms"): its text into q, its decimals into *d; false if there is none. */
static bool number_before(const char *doc, const char *at, char *q, size_t size, int *d)
{
    const char *p = at;
    for (int skipped = 0; p > doc && skipped < 12 && !isdigit((unsigned char)p[-1]); skipped++) p--;
    if (p == doc || !isdigit((unsigned char)p[-1])) return false;
    const char *end = p;
    while (p > doc && (isdigit((unsigned char)p[-1]) || p[-1] == '.')) p--;
    if (p > doc && p[-1] == '-') p--;
    size_t n = (size_t)(end - p);
    if (n == 0 || n >= size) return false;
    memcpy(q, p, n);
    q[n] = '\0';
    const char *dot = strchr(q, '.');
    *d = dot ? (int)strlen(dot + 1) : 0;
    return true;
}

/* Checks every citation of doc; returns how many numbers it checked, *bad the mismatches. */
static int check_citations(const char *doc, const char *name, const char *root, int *bad)
{
    int checked = 0;
    *bad = 0;
    for (const char *m = doc; (m = strstr(m, "<!-- ")); m++) {
        if (m > doc && m[-1] == '`') continue; /* the syntax quoted as code, not a citation */
        bool block = strncmp(m, "<!-- block:", 11) == 0;
        if (!block && strncmp(m, "<!-- n:", 7) != 0) continue;
        const char *close = strstr(m, "-->");
        if (!close) break;
        char spec[512], file[512], key[256] = "", path[1100];
        snprintf(spec, sizeof spec, "%.*s", (int)(close - m - (block ? 11 : 7)),
                 m + (block ? 11 : 7));
        char *bar = strchr(spec, '|');
        if (bar) {
            *bar = '\0';
            const char *k = bar + 1;
            while (*k == ' ') k++;
            snprintf(key, sizeof key, "%s", k);
            for (size_t n = strlen(key); n && key[n - 1] == ' ';) key[--n] = '\0';
        }
        const char *f = spec;
        while (*f == ' ') f++;
        snprintf(file, sizeof file, "%s", f);
        for (size_t n = strlen(file); n && file[n - 1] == ' ';) file[--n] = '\0';
        snprintf(path, sizeof path, "%s/%s", root, file);
        char *text = dt_read_file(path, NULL);
        if (!text) {
            fprintf(stderr, "%s cites %s, which is not there\n", name, file);
            (*bad)++;
            continue;
        }
        char q[64];
        int d;
        if (!block) {
            checked++;
            if (!number_before(doc, m, q, sizeof q, &d)) {
                fprintf(stderr, "%s: a citation of %s follows no number\n", name, file);
                (*bad)++;
            } else if (!file_has_number(text, key, q, d)) {
                fprintf(stderr, "%s quotes %s from %s%s%s%s, which has no such number there\n",
                        name, q, file, *key ? " (lines with \"" : "", key, *key ? "\")" : "");
                (*bad)++;
            }
        } else { /* the fenced block just before: every number of its lines but the first */
            const char *fence_end = m;
            while (fence_end > doc && fence_end[-1] != '`') fence_end--;
            const char *b = fence_end - 3, *open = b;
            while (open > doc && strncmp(open - 3, "```", 3) != 0) open--;
            const char *first_nl = strchr(open, '\n');
            const char *body = first_nl ? strchr(first_nl + 1, '\n') : NULL; /* skip header */
            for (const char *p = body ? body + 1 : b; p < b; p++) {
                if (!isdigit((unsigned char)*p) ||
                    (p > doc && (isalnum((unsigned char)p[-1]) || p[-1] == '.' || p[-1] == '_')))
                    continue;
                const char *e = p;
                while (e < b && (isdigit((unsigned char)*e) || *e == '.')) e++;
                while (e > p && e[-1] == '.') e--;
                size_t n = (size_t)(e - p);
                if (n >= sizeof q || (e < b && isalpha((unsigned char)*e) && *e != 'x')) {
                    p = e;
                    continue;
                }
                memcpy(q, p, n);
                q[n] = '\0';
                const char *dot = strchr(q, '.');
                d = dot ? (int)strlen(dot + 1) : 0;
                checked++;
                if (!file_has_number(text, "", q, d)) {
                    fprintf(stderr,
                            "%s: the block before the citation of %s shows %s, which "
                            "is not in that file\n",
                            name, file, q);
                    (*bad)++;
                }
                p = e;
            }
        }
        free(text);
    }
    return checked;
}

DT_TEST(readme_numbers_match_results)
{
    char *readme = dt_read_file(DT_SOURCE_DIR "/README.md", NULL);
    CHECK(readme != NULL);
    if (!readme) return;
    int bad = 0;
    int n = check_citations(readme, "README.md", DT_SOURCE_DIR, &bad);
    fprintf(stderr, "README.md: %d cited numbers checked\n", n);
    CHECK(n >= 10);
    CHECK_INT_EQ(bad, 0);
    free(readme);
}

/* The checker itself fails on a wrong figure, a wrong key, a missing file and a block. */
DT_TEST(citation_check_can_fail)
{
    /* its own results file, so the check does not hang on a committed figure */
    char root[] = "/tmp/dt_cite_XXXXXX";
    CHECK(mkdtemp(root) != NULL);
    char path[256];
    snprintf(path, sizeof path, "%s/r.txt", root);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (!f) return;
    fputs("policy   ratio\nrun_to_run 1.07x [1.06, 1.08]\nportable 1.20x [1.19, 1.22]\n"
          "demo,0.844900,0.043700\n",
          f);
    fclose(f);
    int bad;
    CHECK_INT_EQ(check_citations("at **1.20×** <!-- n: r.txt | portable  -->", "t", root, &bad), 1);
    CHECK_INT_EQ(bad, 0);
    CHECK_INT_EQ(check_citations("at 1.2x<!-- n: r.txt | portable -->", "t", root, &bad), 1);
    CHECK_INT_EQ(bad, 0); /* quoted with one decimal: 1.20 rounds to it */
    CHECK_INT_EQ(check_citations("at 1.21x<!-- n: r.txt | portable -->", "t", root, &bad), 1);
    CHECK_INT_EQ(bad, 1);
    CHECK_INT_EQ(check_citations("1.07x<!-- n: r.txt | portable -->", "t", root, &bad), 1);
    CHECK_INT_EQ(bad, 1); /* 1.07 is run_to_run's, not on a portable line */
    CHECK_INT_EQ(check_citations("2.0<!-- n: none.csv -->", "t", root, &bad), 0);
    CHECK_INT_EQ(bad, 1);
    CHECK_INT_EQ(check_citations("`<!-- n: none.csv -->` (the syntax)", "t", root, &bad), 0);
    CHECK_INT_EQ(bad, 0);
    const char *blk = "```\nhead 1\nfast 0.8449 0.0437 9.99\n```\n<!-- block: r.txt -->";
    CHECK_INT_EQ(check_citations(blk, "t", root, &bad), 3);
    CHECK_INT_EQ(bad, 1); /* 9.99 */
    remove(path);
    rmdir(root);
}

DT_TEST_MAIN(DT_CASE(config_reference_matches), DT_CASE(design_names_existing_files),
             DT_CASE(design_lists_harness_stages), DT_CASE(readme_numbers_match_results),
             DT_CASE(citation_check_can_fail))
