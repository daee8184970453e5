/* run.json manifests: what ran (resolved config, build, libraries, machine), when, and
 * how it ended. Written atomically (temporary file, fsync, rename). */
#ifndef DT_MANIFEST_H
#define DT_MANIFEST_H

#include "core/util.h"

/* Append `"build": {...}, "system": {...}` (no surrounding braces) to sb: detrain version,
 * git revision, compiler and flags, build type, libyaml/OpenSSL/zlib versions, CPU model,
 * online CPUs, host name and kernel. */
void dt_manifest_environment_json(struct dt_strbuf *sb);

/* Write sb's JSON text (plus a newline) to path atomically. */
enum dt_status dt_manifest_write(const char *path, const struct dt_strbuf *sb,
                                 struct dt_error *err);

#endif
