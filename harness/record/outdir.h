/* A result folder's rules (docs/outputs.md). An experiment's folder is the user's record:
 *   - one experiment per folder: a run into a folder that holds a result is refused unless
 *     it resumes that result (--resume) or replaces it whole (--overwrite);
 *   - one writer per folder: a lock (flock on DIR/.detrain.lock, held for the run's life and
 *     released by the kernel on any death) makes a second run into it refuse at once;
 *   - no followed links, no special files: every output is opened with O_NOFOLLOW and must
 *     be a regular file.
 * The run checks everything first (harness/run/train.c), then claims the folder, then writes. */
#ifndef DT_OUTDIR_H
#define DT_OUTDIR_H

#include <stdbool.h>
#include <stdio.h>

#include "core/status.h"

#define DT_LOCK_NAME ".detrain.lock"

/* Open `path` for writing: created (0666 & umask) or, without `append`, truncated. Refused
 * (NULL, err set, nothing changed) when the last component is a symbolic link or names
 * anything but a regular file (a FIFO, a device, a folder). */
FILE *dt_out_fopen(const char *path, bool append, struct dt_error *err);

/* The same for a file descriptor (O_WRONLY, or O_RDWR when in `flags`; `flags` adds
 * O_APPEND, O_TRUNC, O_EXCL...). */
int dt_out_open(const char *path, int flags, struct dt_error *err);

/* The writer's lock of a folder: fd -1 when not held. */
struct dt_folder_lock {
    int fd;
    char path[4200];
};

/* Take DIR's lock (the folder must exist), or refuse at once (DT_ERR_USAGE) naming the
 * process that holds it. The lock file says who holds it (pid, command, since when); it is
 * removed on release, so a run that was refused, or ended, leaves no file behind (a run
 * killed with the lock held leaves it, unlocked: the next run takes it over). */
enum dt_status dt_folder_lock_take(struct dt_folder_lock *l, const char *dir, const char *command,
                                   struct dt_error *err);
void dt_folder_lock_release(struct dt_folder_lock *l);

/* What a folder holds. */
enum dt_folder_state {
    DT_FOLDER_ABSENT, /* no such folder yet */
    DT_FOLDER_EMPTY,  /* exists; nothing in it but the lock file */
    DT_FOLDER_RESULT, /* holds a detrain result: config.json or run.json */
    DT_FOLDER_OTHER,  /* holds other files */
};
enum dt_status dt_folder_state(enum dt_folder_state *state, const char *dir, struct dt_error *err);

/* Remove everything in DIR but its lock file (--overwrite, after every check passed). Links
 * are removed, never followed. */
enum dt_status dt_folder_clear(const char *dir, struct dt_error *err);

#endif
