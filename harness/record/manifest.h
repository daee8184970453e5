/* run.json manifests: what ran (resolved config, build, libraries, machine), when, and
 * how it ended. Written atomically (temporary file, fsync, rename). */
#ifndef DT_MANIFEST_H
#define DT_MANIFEST_H

#include "core/util.h"

/* Append `"build": {...}, "system": {...}` (no surrounding braces) to sb: detrain version,
 * git revision, compiler and flags, build type, libyaml/OpenSSL/zlib versions, CPU model,
 * online CPUs, host name and kernel. */
void dt_manifest_environment_json(struct dt_strbuf *sb);

/* The run's segments (run.json "segments": each start of `detrain run`, then each
 * --resume): append to sb the earlier ones, taken from the run.json text `earlier` (its own
 * "segments", or for a manifest from before segments one made of its top-level start_time,
 * end_time, status, command and build), then this one, {"start_time", "end_time",
 * "status", "command", "version", "git_revision"} of this build; without brackets. The
 * first segment's start time goes to first_start (this one's when there is none before).
 * An earlier segment still "running" (no end recorded: killed) is given status "killed". */
void dt_manifest_segments_json(struct dt_strbuf *sb, const char *earlier, const char *start,
                               const char *end, const char *status, const char *command,
                               char *first_start, size_t first_size);

/* Write sb's JSON text (plus a newline) to path atomically. */
enum dt_status dt_manifest_write(const char *path, const struct dt_strbuf *sb,
                                 struct dt_error *err);

#endif
