/* The documentation -- README.md, the front page, and the reference pages docs/NAME.md --
 * stays true: the config reference (in docs/config.md) is exactly what `detrain
 * config-reference` prints, so it cannot drift from the key table that drives parsing;
 * every number quoted from results/ is in the file it cites; every relative link leads to a
 * file (and heading) that exists; scripts/results.sh (`make results`) has a part for every
 * results/cpu/ folder, each named in that folder's README; and docs/DESIGN.md names files
 * that exist and lists every harness file in its stage. */
#include <ctype.h>
#include <dirent.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/check.h"
#include "tests/run_helper.h"

/* ---- the documentation's files --------------------------------------------------------------
 * README.md, then every docs/NAME.md in name order, as paths relative to root. */
enum { DOC_MAX = 64, DOC_NAME = 256 };

static int name_cmp(const void *a, const void *b) { return strcmp(a, b); }

static int doc_files(const char *root, char names[DOC_MAX][DOC_NAME])
{
    int n = 0;
    snprintf(names[n++], DOC_NAME, "README.md");
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/docs", root);
    DIR *d = opendir(dir);
    int first = n;
    for (struct dirent *e; d && (e = readdir(d)) && n < DOC_MAX;) {
        size_t len = strlen(e->d_name);
        if (len > 3 && e->d_name[0] != '.' && strcmp(e->d_name + len - 3, ".md") == 0)
            snprintf(names[n++], DOC_NAME, "docs/%s", e->d_name);
    }
    if (d) closedir(d);
    qsort(names[first], (size_t)(n - first), DOC_NAME, name_cmp);
    return n;
}

static char *read_doc(const char *root, const char *name)
{
    char path[1400];
    snprintf(path, sizeof path, "%.1000s/%.255s", root, name);
    return dt_read_file(path, NULL);
}

/* The config reference between the markers of doc against ref: 1 equal, 0 different,
 * -1 no markers. */
static int config_reference_in(const char *doc, const char *ref)
{
    const char *begin = strstr(doc, "<!-- config-reference:begin -->\n");
    const char *end = strstr(doc, "<!-- config-reference:end -->");
    if (!begin || !end || end < begin) return -1;
    begin += strlen("<!-- config-reference:begin -->\n");
    size_t n = (size_t)(end - begin);
    return strlen(ref) == n && memcmp(begin, ref, n) == 0;
}

DT_TEST(config_reference_matches)
{
    static char ref[65536];
    CHECK_INT_EQ(dt_run_capture(ref, sizeof ref, "'%s' config-reference", DT_DETRAIN_EXE), 0);
    char names[DOC_MAX][DOC_NAME];
    int ndoc = doc_files(DT_SOURCE_DIR, names), holders = 0;
    for (int i = 0; i < ndoc; i++) {
        char *doc = read_doc(DT_SOURCE_DIR, names[i]);
        CHECK(doc != NULL);
        if (!doc) continue;
        int r = config_reference_in(doc, ref);
        if (r >= 0) holders++;
        if (r == 0) {
            fprintf(stderr,
                    "%s: the config reference differs from `detrain config-reference`;\n"
                    "regenerate it between the config-reference markers.\n",
                    names[i]);
            dt_check_failures_++;
        }
        free(doc);
    }
    if (holders != 1)
        fprintf(stderr,
                "%d files of README.md and docs/*.md hold the config reference; "
                "expected one\n",
                holders);
    CHECK_INT_EQ(holders, 1);
    /* the check can fail: one character changed, the markers missing */
    char *copy = malloc(strlen(ref) + 80);
    sprintf(copy, "<!-- config-reference:begin -->\n%s<!-- config-reference:end -->", ref);
    CHECK_INT_EQ(config_reference_in(copy, ref), 1);
    char *key = strstr(copy, "train.steps");
    CHECK(key != NULL);
    if (key) key[6] = 'z';
    CHECK_INT_EQ(config_reference_in(copy, ref), 0);
    CHECK_INT_EQ(config_reference_in(ref, ref), -1);
    free(copy);
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
        /* a minus sign, unless it joins two numbers (a date: 2026-11-26) */
        const bool sign = p > b && p[-1] == '-' && !(p - 1 > b && isalnum((unsigned char)p[-2]));
        const char *start = sign ? p - 1 : p;
        char *end;
        double v = strtod(start, &end);
        char buf[64];
        snprintf(buf, sizeof buf, strchr(q, 'e') ? "%.*e" : "%.*f", d, v); /* 2.39e-07 */
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
    /* scientific notation, 2.39e-07: the mantissa before the exponent */
    if (p - doc >= 3 && (p[-1] == '-' || p[-1] == '+') && p[-2] == 'e' &&
        isdigit((unsigned char)p[-3])) {
        p -= 2;
        while (p > doc && (isdigit((unsigned char)p[-1]) || p[-1] == '.')) p--;
    }
    if (p > doc && p[-1] == '-') p--;
    size_t n = (size_t)(end - p);
    if (n == 0 || n >= size) return false;
    memcpy(q, p, n);
    q[n] = '\0';
    const char *dot = strchr(q, '.');
    const char *exp = strchr(q, 'e');
    *d = dot ? (int)((exp ? (size_t)(exp - dot) : strlen(dot)) - 1) : 0;
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

/* check_citations over README.md and every docs/NAME.md under root: the numbers checked;
 * *bad the mismatches, *in_readme those of README.md. */
static int check_doc_tree(const char *root, int *bad, int *in_readme)
{
    char names[DOC_MAX][DOC_NAME];
    int ndoc = doc_files(root, names), total = 0;
    *bad = 0;
    *in_readme = 0;
    for (int i = 0; i < ndoc; i++) {
        char *doc = read_doc(root, names[i]);
        if (!doc) {
            fprintf(stderr, "cannot read %s\n", names[i]);
            (*bad)++;
            continue;
        }
        int b = 0, n = check_citations(doc, names[i], root, &b);
        fprintf(stderr, "%s: %d cited numbers checked\n", names[i], n);
        if (i == 0) *in_readme = n;
        total += n;
        *bad += b;
        free(doc);
    }
    return total;
}

DT_TEST(readme_numbers_match_results)
{
    int bad = 0, in_readme = 0;
    int n = check_doc_tree(DT_SOURCE_DIR, &bad, &in_readme);
    fprintf(stderr, "README.md and docs/*.md: %d cited numbers checked\n", n);
    CHECK(in_readme >= 5);      /* the front page's table of headline results */
    CHECK(n - in_readme >= 50); /* the reference pages: performance, config, ... */
    CHECK_INT_EQ(bad, 0);
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
    /* the whole tree: a wrong figure in a docs/ page fails as one in README does */
    char readme[300], docs[300], page[300];
    snprintf(readme, sizeof readme, "%s/README.md", root);
    snprintf(docs, sizeof docs, "%s/docs", root);
    snprintf(page, sizeof page, "%s/docs/a.md", root);
    CHECK(mkdir(docs, 0755) == 0);
    FILE *r = fopen(readme, "w"), *a = fopen(page, "w");
    CHECK(r && a);
    if (r) fputs("at 1.20x<!-- n: r.txt | portable -->\n", r), fclose(r);
    if (a) fputs("at 1.21x<!-- n: r.txt | portable -->\n", a), fclose(a);
    int in_readme;
    CHECK_INT_EQ(check_doc_tree(root, &bad, &in_readme), 2);
    CHECK_INT_EQ(in_readme, 1);
    CHECK_INT_EQ(bad, 1); /* docs/a.md's 1.21 */
    remove(page);
    rmdir(docs);
    remove(readme);
    remove(path);
    rmdir(root);
}

/* ---- links between the pages ---------------------------------------------------------------
 * A relative Markdown link `[text](path)` or `[text](path#anchor)` in a page must lead to a
 * file or folder of the tree (path relative to the page's folder), and an anchor to a
 * heading of the target page (GitHub's rule: lower case, punctuation but - and _ dropped,
 * spaces as -); `#anchor` alone is the page itself. Fenced blocks and code spans are skipped. */

static void heading_slug(const char *h, size_t n, char *out, size_t size)
{
    size_t k = 0;
    for (size_t i = 0; i < n && k + 1 < size; i++) {
        unsigned char c = (unsigned char)h[i];
        if (isalnum(c) || c == '_' || c == '-') out[k++] = (char)tolower(c);
        else if (c == ' ') out[k++] = '-';
        else if (c >= 0x80) out[k++] = (char)c; /* letters outside ASCII stay */
    }
    out[k] = '\0';
}

static bool page_has_anchor(const char *page, const char *anchor)
{
    bool fence = false;
    for (const char *b = page; *b;) {
        const char *e = strchr(b, '\n');
        if (!e) e = b + strlen(b);
        if (!strncmp(b, "```", 3)) fence = !fence;
        if (!fence && *b == '#') {
            const char *h = b;
            while (*h == '#') h++;
            while (*h == ' ') h++;
            char slug[512];
            heading_slug(h, (size_t)(e - h), slug, sizeof slug);
            if (!strcmp(slug, anchor)) return true;
        }
        b = *e ? e + 1 : e;
    }
    return false;
}

/* Checks the links of page `name` (relative to root); returns how many it checked. */
static int check_links(const char *doc, const char *name, const char *root, int *bad)
{
    int checked = 0;
    *bad = 0;
    char dir[512];
    snprintf(dir, sizeof dir, "%s", name);
    char *slash = strrchr(dir, '/');
    if (slash) slash[1] = '\0';
    else dir[0] = '\0';
    bool fence = false, code = false;
    for (const char *p = doc; *p; p++) {
        bool line_start = p == doc || p[-1] == '\n';
        if (line_start && !strncmp(p, "```", 3)) { /* a fence line: skip it whole */
            fence = !fence;
            code = false;
            while (p[1] && p[1] != '\n') p++;
            continue;
        }
        if (fence) continue;
        if (line_start && *p == '\n') code = false; /* a code span ends with its paragraph */
        if (*p == '`') code = !code;
        if (code || strncmp(p, "](", 2) != 0) continue;
        const char *s = p + 2, *e = s;
        while (*e && *e != ')' && *e != ' ' && *e != '\n') e++;
        if (*e != ')') continue;
        char target[512];
        snprintf(target, sizeof target, "%.*s", (int)(e - s), s);
        if (strstr(target, "://") || !strncmp(target, "mailto:", 7) || !target[0]) continue;
        checked++;
        char *hash = strchr(target, '#');
        char anchor[256] = "";
        if (hash) {
            snprintf(anchor, sizeof anchor, "%s", hash + 1);
            *hash = '\0';
        }
        char path[1400];
        snprintf(path, sizeof path, "%s/%s%s", root, target[0] ? dir : name, target);
        struct stat st;
        if (stat(path, &st) != 0) {
            fprintf(stderr, "%s links to %.*s, which is not in the tree\n", name, (int)(e - s), s);
            (*bad)++;
            continue;
        }
        if (anchor[0] && S_ISREG(st.st_mode)) {
            char *page = dt_read_file(path, NULL);
            if (!page || !page_has_anchor(page, anchor)) {
                fprintf(stderr, "%s links to %.*s: no such heading there\n", name, (int)(e - s), s);
                (*bad)++;
            }
            free(page);
        }
    }
    return checked;
}

DT_TEST(doc_links_resolve)
{
    char names[DOC_MAX][DOC_NAME];
    int ndoc = doc_files(DT_SOURCE_DIR, names), total = 0, bad_total = 0;
    for (int i = 0; i < ndoc; i++) {
        char *doc = read_doc(DT_SOURCE_DIR, names[i]);
        CHECK(doc != NULL);
        if (!doc) continue;
        int bad;
        total += check_links(doc, names[i], DT_SOURCE_DIR, &bad);
        bad_total += bad;
        free(doc);
    }
    fprintf(stderr, "README.md and docs/*.md: %d relative links checked\n", total);
    CHECK(total >= 10);
    CHECK_INT_EQ(bad_total, 0);
    /* the check can fail: a missing page, a missing heading; code is not a link */
    int bad;
    CHECK_INT_EQ(check_links("see [x](docs/no-such-page.md)", "README.md", DT_SOURCE_DIR, &bad), 1);
    CHECK_INT_EQ(bad, 1);
    CHECK_INT_EQ(
        check_links("see [x](performance.md#no-such-heading)", "docs/cli.md", DT_SOURCE_DIR, &bad),
        1);
    CHECK_INT_EQ(bad, 1);
    CHECK_INT_EQ(
        check_links("[x](../README.md#detrain) [y](#nope)", "docs/cli.md", DT_SOURCE_DIR, &bad), 2);
    CHECK_INT_EQ(bad, 1); /* #nope */
    CHECK_INT_EQ(
        check_links("`a[i](j)` and\n```\n[x](nowhere.md)\n```\n", "README.md", DT_SOURCE_DIR, &bad),
        0);
}

/* ---- make results ----------------------------------------------------------------------------
 * scripts/results.sh --list names a part for every results/cpu/<part>/ folder with a
 * README.md (crossdev: results/cpu/crossdev-README.md), and each such README says how to
 * regenerate it: `scripts/results.sh <part>`. Returns how many parts are documented. */
static int results_parts_documented(const char *list, const char *root, int *bad)
{
    int parts = 0;
    *bad = 0;
    for (const char *b = list; *b;) {
        const char *e = strchr(b, '\n');
        if (!e) e = b + strlen(b);
        size_t n = strcspn(b, " \n");
        if (n > 0 && n < 64) {
            char part[64], path[1200], want[128];
            snprintf(part, sizeof part, "%.*s", (int)n, b);
            if (!strcmp(part, "crossdev"))
                snprintf(path, sizeof path, "%s/results/cpu/crossdev-README.md", root);
            else snprintf(path, sizeof path, "%s/results/cpu/%s/README.md", root, part);
            snprintf(want, sizeof want, "scripts/results.sh %s`", part);
            char *readme = dt_read_file(path, NULL);
            parts++;
            if (!readme || !strstr(readme, want)) {
                fprintf(stderr, "%s: %s\n", path,
                        readme ? "does not say `scripts/results.sh PART`" : "missing");
                (*bad)++;
            }
            free(readme);
        }
        b = *e ? e + 1 : e;
    }
    /* every results/cpu/ folder with a README is a part */
    char dir[1100];
    snprintf(dir, sizeof dir, "%s/results/cpu", root);
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d));) {
        char path[1400];
        snprintf(path, sizeof path, "%s/%s/README.md", dir, e->d_name);
        if (e->d_name[0] == '.' || !dt_path_exists(path)) continue;
        char line[300];
        snprintf(line, sizeof line, "%s ", e->d_name);
        bool listed = !strncmp(list, line, strlen(line));
        for (const char *q = list; !listed && (q = strchr(q, '\n'));)
            listed = !strncmp(++q, line, strlen(line));
        if (!listed) {
            fprintf(stderr, "results/cpu/%s/ has a README but no part in scripts/results.sh\n",
                    e->d_name);
            (*bad)++;
        }
    }
    if (d) closedir(d);
    return parts;
}

DT_TEST(results_script_covers_results)
{
    static char list[8192];
    CHECK_INT_EQ(
        dt_run_capture(list, sizeof list, "bash -n '%s/scripts/results.sh'", DT_SOURCE_DIR), 0);
    CHECK_INT_EQ(
        dt_run_capture(list, sizeof list, "bash '%s/scripts/results.sh' --list", DT_SOURCE_DIR), 0);
    int bad;
    CHECK(results_parts_documented(list, DT_SOURCE_DIR, &bad) >= 7);
    CHECK_INT_EQ(bad, 0);
    /* the check can fail: a part without a folder, a folder without a part */
    CHECK_INT_EQ(results_parts_documented("no-such-part  results/cpu/x\n", DT_SOURCE_DIR, &bad), 1);
    CHECK(bad >= 2); /* the made-up part, and every real folder now unlisted */
    /* and the script refuses an unknown part, and a missing binary, with exit 2 */
    CHECK_INT_EQ(dt_run_capture(list, sizeof list, "bash '%s/scripts/results.sh' no-such-part",
                                DT_SOURCE_DIR),
                 2);
    CHECK_INT_EQ(
        dt_run_capture(list, sizeof list,
                       "DETRAIN=/nonexistent/detrain bash '%s/scripts/results.sh' controls",
                       DT_SOURCE_DIR),
        2);
    CHECK_CONTAINS(list, "no such executable");
}

/* --pack DIR: a GPU session's per-step CSVs (replica-N/trace.csv and the like) go into
 * DIR/per-step.tar.xz and leave the folder, other files stay; no binary needed; a missing
 * folder exits 2. */
DT_TEST(results_script_packs)
{
    static char out[4096];
    CHECK_INT_EQ(
        dt_run_capture(out, sizeof out,
                       "d=$(mktemp -d) && mkdir -p $d/r/fast/replica-0 && "
                       "echo 1 >$d/r/fast/replica-0/trace.csv && "
                       "echo 2 >$d/r/fast/replica-0/run.json && echo 3 >$d/r/summary.csv && "
                       "DETRAIN=/nonexistent bash '%s/scripts/results.sh' --pack $d/r && "
                       "ls $d/r $d/r/fast/replica-0 && tar -tJf $d/r/per-step.tar.xz; "
                       "rc=$?; rm -rf $d; exit $rc",
                       DT_SOURCE_DIR),
        0);
    CHECK_CONTAINS(out, "per-step.tar.xz");
    CHECK_CONTAINS(out, "./fast/replica-0/trace.csv");
    CHECK_CONTAINS(out, "run.json");
    CHECK_CONTAINS(out, "summary.csv");
    CHECK(strstr(out, "\ntrace.csv") == NULL); /* gone from the folder */
    CHECK_INT_EQ(dt_run_capture(out, sizeof out,
                                "bash '%s/scripts/results.sh' --pack /nonexistent/dir",
                                DT_SOURCE_DIR),
                 2);
    CHECK_CONTAINS(out, "no folder");
}

DT_TEST_MAIN(DT_CASE(config_reference_matches), DT_CASE(design_names_existing_files),
             DT_CASE(design_lists_harness_stages), DT_CASE(readme_numbers_match_results),
             DT_CASE(citation_check_can_fail), DT_CASE(doc_links_resolve),
             DT_CASE(results_script_covers_results), DT_CASE(results_script_packs))
