/* run.json: build and machine identity for every run (see manifest.h). */
#include "harness/record/manifest.h"

#include <openssl/crypto.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>
#include <yaml.h>
#include <zlib.h>

#include "build_info.h"
#include "nets/backend.h"

static void cpu_model(char *buf, size_t size)
{
    snprintf(buf, size, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) == 0) {
            char *colon = strchr(line, ':');
            if (colon) {
                colon++;
                while (*colon == ' ' || *colon == '\t') colon++;
                snprintf(buf, size, "%s", colon);
                size_t n = strlen(buf);
                if (n && buf[n - 1] == '\n') buf[n - 1] = '\0';
            }
            break;
        }
    }
    fclose(f);
}

void dt_manifest_environment_json(struct dt_strbuf *sb)
{
    dt_strbuf_printf(sb, "\"build\": {\"version\": ");
    dt_strbuf_json_string(sb, DT_VERSION);
    dt_strbuf_printf(sb, ", \"git_revision\": ");
    dt_strbuf_json_string(sb, DT_GIT_REV);
    dt_strbuf_printf(sb, ", \"build_type\": ");
    dt_strbuf_json_string(sb, DT_BUILD_TYPE);
    dt_strbuf_printf(sb, ", \"compiler\": ");
    dt_strbuf_json_string(sb, DT_C_COMPILER);
    dt_strbuf_printf(sb, ", \"c_flags\": ");
    dt_strbuf_json_string(sb, DT_C_FLAGS);
    dt_strbuf_printf(sb, ", \"cuda_flags\": ");
    dt_strbuf_json_string(sb, DT_CUDA_FLAGS);
    dt_strbuf_printf(sb, ", \"cuda_toolkit_at_build\": ");
    dt_strbuf_json_string(sb, DT_CUDA_TOOLKIT);
    dt_strbuf_printf(sb, ", \"libyaml\": ");
    dt_strbuf_json_string(sb, yaml_get_version_string());
    dt_strbuf_printf(sb, ", \"openssl\": ");
    dt_strbuf_json_string(sb, OpenSSL_version(OPENSSL_VERSION));
    dt_strbuf_printf(sb, ", \"zlib\": ");
    dt_strbuf_json_string(sb, zlibVersion());
    dt_strbuf_printf(sb, "}, \"system\": {\"cpu_model\": ");
    char buf[256];
    cpu_model(buf, sizeof buf);
    dt_strbuf_json_string(sb, buf);
    dt_strbuf_printf(sb, ", \"online_cpus\": %ld", sysconf(_SC_NPROCESSORS_ONLN));
    dt_strbuf_printf(sb, ", \"cpu_kernels\": ");
    dt_strbuf_json_string(sb, dt_cpu_kernels());
    struct utsname u;
    if (uname(&u) == 0) {
        dt_strbuf_printf(sb, ", \"host\": ");
        dt_strbuf_json_string(sb, u.nodename);
        dt_strbuf_printf(sb, ", \"kernel\": ");
        snprintf(buf, sizeof buf, "%s %s %s", u.sysname, u.release, u.machine);
        dt_strbuf_json_string(sb, buf);
    }
    dt_strbuf_printf(sb, "}");
}

enum dt_status dt_manifest_write(const char *path, const struct dt_strbuf *sb, struct dt_error *err)
{
    struct dt_strbuf copy = {0};
    dt_strbuf_printf(&copy, "%s\n", sb->data ? sb->data : "{}");
    enum dt_status st = dt_write_file_atomic(path, copy.data, copy.len, err);
    dt_strbuf_free(&copy);
    return st;
}

/* The raw JSON value after the first `"key": ` in json (a string with its quotes, null, a
 * number), into out; false when there is none. */
static bool raw_value(const char *json, const char *key, char *out, size_t size)
{
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\": ", key);
    const char *p = json ? strstr(json, pat) : NULL;
    if (!p) return false;
    p += strlen(pat);
    const char *e = p;
    if (*e == '"') {
        for (e++; *e && *e != '"'; e++)
            if (*e == '\\' && e[1]) e++;
        if (*e != '"') return false;
        e++;
    } else {
        while (*e && *e != ',' && *e != '}' && *e != ']') e++;
    }
    if ((size_t)(e - p) >= size) return false;
    memcpy(out, p, (size_t)(e - p));
    out[e - p] = '\0';
    return true;
}

/* The text inside the brackets of json's "segments": [...] (strings skipped over), into sb. */
static bool earlier_segments(struct dt_strbuf *sb, const char *json)
{
    const char *p = json ? strstr(json, "\"segments\": [") : NULL;
    if (!p) return false;
    p += strlen("\"segments\": [");
    int depth = 0;
    const char *e = p;
    for (; *e; e++) {
        if (*e == '"') {
            for (e++; *e && *e != '"'; e++)
                if (*e == '\\' && e[1]) e++;
            if (!*e) return false;
        } else if (*e == '[' || *e == '{') {
            depth++;
        } else if (*e == ']' || *e == '}') {
            if (depth == 0) break;
            depth--;
        }
    }
    if (*e != ']') return false;
    /* a segment still "running" when the next one starts was killed: no end was recorded
     * (a run that ends any other way writes its status) */
    const char *run = NULL;
    for (const char *q = p; (q = strstr(q, "\"status\": \"running\"")) != NULL && q < e; q++)
        run = q;
    if (run) {
        dt_strbuf_printf(sb, "%.*s\"status\": \"killed\"%.*s", (int)(run - p), p,
                         (int)(e - (run + strlen("\"status\": \"running\""))),
                         run + strlen("\"status\": \"running\""));
    } else {
        dt_strbuf_printf(sb, "%.*s", (int)(e - p), p);
    }
    return e > p;
}

void dt_manifest_segments_json(struct dt_strbuf *sb, const char *earlier, const char *start,
                               const char *end, const char *status, const char *command,
                               char *first_start, size_t first_size)
{
    snprintf(first_start, first_size, "%s", start);
    bool any = false;
    if (earlier) {
        const size_t at = sb->len;
        any = earlier_segments(sb, earlier);
        if (!any) { /* a manifest from before segments: its top level is its one segment */
            char v[2][64], cmd[4200], ver[64], rev[96], st[48];
            if (raw_value(earlier, "start_time", v[0], sizeof v[0])) {
                if (!raw_value(earlier, "end_time", v[1], sizeof v[1])) snprintf(v[1], 64, "null");
                if (!raw_value(earlier, "status", st, sizeof st) || !strcmp(st, "\"running\""))
                    snprintf(st, sizeof st, "\"killed\""); /* no end recorded (above) */
                if (!raw_value(earlier, "command", cmd, sizeof cmd))
                    snprintf(cmd, sizeof cmd, "null");
                if (!raw_value(earlier, "version", ver, sizeof ver))
                    snprintf(ver, sizeof ver, "null");
                if (!raw_value(earlier, "git_revision", rev, sizeof rev))
                    snprintf(rev, sizeof rev, "null");
                dt_strbuf_printf(sb,
                                 "{\"start_time\": %s, \"end_time\": %s, \"status\": %s, "
                                 "\"command\": %s, \"version\": %s, \"git_revision\": %s}",
                                 v[0], v[1], st, cmd, ver, rev);
                any = true;
            }
        }
        if (any) { /* the first one's start time is the run's */
            char first[64];
            if (raw_value(sb->data + at, "start_time", first, sizeof first) && first[0] == '"') {
                first[strlen(first) - 1] = '\0';
                snprintf(first_start, first_size, "%s", first + 1);
            }
        }
    }
    dt_strbuf_printf(sb, "%s{\"start_time\": \"%s\", \"end_time\": ", any ? ", " : "", start);
    if (end) dt_strbuf_printf(sb, "\"%s\"", end);
    else dt_strbuf_printf(sb, "null");
    dt_strbuf_printf(sb, ", \"status\": \"%s\", \"command\": ", status);
    dt_strbuf_json_string(sb, command ? command : "");
    dt_strbuf_printf(sb, ", \"version\": ");
    dt_strbuf_json_string(sb, DT_VERSION);
    dt_strbuf_printf(sb, ", \"git_revision\": ");
    dt_strbuf_json_string(sb, DT_GIT_REV);
    dt_strbuf_printf(sb, "}");
}
