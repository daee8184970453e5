/* README's config reference must be exactly what `detrain config-reference` prints, so
 * the documentation cannot drift from the key table that drives parsing. */
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

DT_TEST_MAIN(DT_CASE(config_reference_matches))
