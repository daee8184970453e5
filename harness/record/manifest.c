/* run.json: build and machine identity for every run (see manifest.h). */
#include "harness/record/manifest.h"

#include <openssl/crypto.h>
#include <stdio.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>
#include <yaml.h>
#include <zlib.h>

#include "build_info.h"

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
