/* A result folder's rules (docs/outputs.md). An experiment's folder is the user's record:
 *   - one experiment per folder: a run into a folder that holds a result is refused unless
 *     it resumes that result (--resume) or replaces it (--overwrite), which removes only
 *     what detrain wrote and refuses a folder holding anything else;
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

/* A reader's hold on the result that `path` lies in (the experiment folder itself, or the
 * one a cell or replica folder, or a file in one, belongs to): a shared lock on its lock
 * file, so that no run starts writing there while it is read, or a refusal at once
 * (DT_ERR_USAGE, "<dir>: a detrain run is writing into this result (pid ...)") while one
 * does. Nothing is written: with no lock file (no run has it) nothing is held (fd -1), and
 * a result on a read-only disk reads as well. Released by dt_folder_read_lock_release
 * (which, unlike the writer's release, leaves the file: other readers may hold it). */
enum dt_status dt_folder_read_lock_take(struct dt_folder_lock *l, const char *path,
                                        struct dt_error *err);
void dt_folder_read_lock_release(struct dt_folder_lock *l);

/* What a folder holds. */
enum dt_folder_state {
    DT_FOLDER_ABSENT, /* no such folder yet */
    DT_FOLDER_EMPTY,  /* exists; nothing in it but the lock file */
    DT_FOLDER_RESULT, /* holds a detrain result (dt_folder_is_result) */
    DT_FOLDER_OTHER,  /* holds other files */
};
enum dt_status dt_folder_state(enum dt_folder_state *state, const char *dir, struct dt_error *err);

/* A result is recognised by what detrain wrote, not by a name a user's file may have: a
 * run.json that is detrain's manifest ({"tool": "detrain", ...}) and a config.json, both
 * regular files (not links). */
bool dt_folder_is_result(const char *dir);

/* An output folder checked as a location, before anything is written: refused
 * (DT_ERR_USAGE, naming it and where it resolves) when it resolves to /, the home folder,
 * the current folder or a folder above it (a result there mixes with everything else, and
 * --overwrite would reach it), or when the path as given with `longest` -- the longest path
 * below it the run writes (layout.h, dt_layout_longest) -- passes DT_PATH_MAX. */
enum dt_status dt_out_location_check(const char *dir, size_t longest, struct dt_error *err);

/* An output file a command was asked for (--csv FILE), checked before the command runs:
 * refused (DT_ERR_USAGE, naming why) when it is, or lies inside, one of the `n_reads` paths
 * the command reads (a file, or a folder together with the detrain result around it: a
 * replica folder's experiment), when it is a link or not a regular file, or when it exists
 * and its first line does not start with `header` (it is not an earlier output of the same
 * kind, `what`): detrain replaces or extends only its own outputs, and writes them to a
 * temporary file renamed into place. */
enum dt_status dt_out_file_check(const char *path, const char *const *reads, int n_reads,
                                 const char *header, const char *what, struct dt_error *err);

/* No link followed at any depth of a result: `path` (an experiment, cell or replica folder,
 * or a file in one) is refused (DT_ERR_USAGE, naming the link) when a folder between the
 * result it lies in and it, or anything below it, is a symbolic link -- a link could lead
 * a resume's writes or a report's reads outside the result. `path` itself may be reached
 * through links above the result (a results folder that is a link is fine). */
enum dt_status dt_result_check_links(const char *path, struct dt_error *err);

/* The first entry (sorted by name, depth first) of the result in DIR that detrain did not
 * write for the experiment its config.json describes (harness/record/layout.h,
 * dt_layout_is_own: a user's file, a link, a special file, a folder of another name), as a
 * path relative to DIR into foreign; "" when every entry is the result's own. DT_ERR_USAGE
 * when config.json is not a detrain config (then nothing can be told apart). */
enum dt_status dt_result_foreign(const char *dir, char *foreign, size_t size, struct dt_error *err);

/* Remove the result in DIR: exactly its own files, and its own folders once empty; never a
 * file detrain did not write, never through a link, never the lock file (--overwrite, after
 * dt_result_foreign found nothing foreign and every other check passed). */
enum dt_status dt_result_clear(const char *dir, struct dt_error *err);

#endif
