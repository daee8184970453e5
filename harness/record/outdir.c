/* A result folder's rules: see outdir.h. */
#include "harness/record/outdir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/fileio.h"
#include "core/util.h"

int dt_out_open(const char *path, int flags, struct dt_error *err)
{
    /* O_NONBLOCK: opening a FIFO with no reader must not hang (ENXIO instead) */
    const int access_mode = (flags & O_RDWR) ? O_RDWR : O_WRONLY;
    int fd = open(path,
                  access_mode | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK |
                      (flags & ~(O_TRUNC | O_RDWR)),
                  0666);
    if (fd < 0) {
        const int e = errno;
        struct stat st;
        if ((e == ELOOP || e == ENXIO || e == EISDIR) && lstat(path, &st) == 0)
            dt_error_set(err, DT_ERR_IO,
                         "%s: is %s, and detrain writes only regular files it creates (links "
                         "are not followed); remove it or choose another --out",
                         path, dt_file_kind(st.st_mode));
        else
            dt_error_set(err, DT_ERR_IO, "%s: cannot %s: %s", path,
                         flags & O_APPEND ? "open" : "create", strerror(e));
        errno = e;
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        const int e = errno;
        close(fd);
        dt_error_set(err, DT_ERR_IO,
                     "%s: is %s, and detrain writes only regular files; remove it or choose "
                     "another --out",
                     path, dt_file_kind(st.st_mode));
        errno = e ? e : EINVAL;
        return -1;
    }
    if ((flags & O_TRUNC) && ftruncate(fd, 0) != 0) {
        const int e = errno;
        close(fd);
        dt_error_set(err, DT_ERR_IO, "%s: cannot truncate: %s", path, strerror(e));
        errno = e;
        return -1;
    }
    (void)fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    return fd;
}

FILE *dt_out_fopen(const char *path, bool append, struct dt_error *err)
{
    int fd = dt_out_open(path, append ? O_APPEND : O_TRUNC, err);
    if (fd < 0) return NULL;
    FILE *f = fdopen(fd, append ? "a" : "w");
    if (!f) {
        const int e = errno;
        close(fd);
        dt_error_set(err, DT_ERR_IO, "%s: cannot open: %s", path, strerror(e));
        errno = e;
    }
    return f;
}

/* ---- the writer's lock --------------------------------------------------------------- */

enum dt_status dt_folder_lock_take(struct dt_folder_lock *l, const char *dir, const char *command,
                                   struct dt_error *err)
{
    l->fd = -1;
    snprintf(l->path, sizeof l->path, "%s/%s", dir, DT_LOCK_NAME);
    for (int attempt = 0;; attempt++) {
        int fd = dt_out_open(l->path, O_RDWR, err);
        if (fd < 0) return DT_ERR_IO;
        if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
            const int e = errno;
            char holder[600] = "";
            ssize_t n = pread(fd, holder, sizeof holder - 1, 0);
            close(fd);
            if (e != EWOULDBLOCK)
                return dt_error_set(err, DT_ERR_IO, "%s: cannot lock: %s", l->path, strerror(e));
            holder[n > 0 ? n : 0] = '\0';
            holder[strcspn(holder, "\n")] = '\0';
            for (char *p = holder; *p; p++) /* the file's bytes reach a terminal */
                if ((unsigned char)*p < 0x20 || (unsigned char)*p >= 0x7f) *p = '?';
            return dt_error_set(err, DT_ERR_USAGE,
                                "%s: another detrain is writing into this folder (%s); wait "
                                "for it to end, or choose another --out",
                                dir, holder[0] ? holder : "its pid is not recorded yet");
        }
        /* the holder before us may have removed the file between our open and our lock:
         * the lock counts only on the file the path names now */
        struct stat a, b;
        if (fstat(fd, &a) == 0 && stat(l->path, &b) == 0 && a.st_dev == b.st_dev &&
            a.st_ino == b.st_ino) {
            l->fd = fd;
            break;
        }
        close(fd);
        if (attempt == 100)
            return dt_error_set(err, DT_ERR_IO, "%s: the lock file keeps changing", l->path);
    }
    /* who holds it, for the message of the next one */
    char who[600], when[32];
    dt_utc_iso8601(when, sizeof when);
    int len = snprintf(who, sizeof who, "pid %ld since %s: %.400s\n", (long)getpid(), when,
                       command ? command : "detrain");
    if (len >= (int)sizeof who) len = (int)sizeof who - 1;
    if (ftruncate(l->fd, 0) != 0 || pwrite(l->fd, who, (size_t)len, 0) != len) {
        /* the lock holds all the same; only the next refusal's message is poorer */
    }
    return DT_OK;
}

void dt_folder_lock_release(struct dt_folder_lock *l)
{
    if (l->fd < 0) return;
    unlink(l->path); /* while still held: see dt_folder_lock_take */
    close(l->fd);    /* the kernel drops the flock with the last descriptor */
    l->fd = -1;
}

/* ---- what a folder holds -------------------------------------------------------------- */

enum dt_status dt_folder_state(enum dt_folder_state *state, const char *dir, struct dt_error *err)
{
    *state = DT_FOLDER_ABSENT;
    struct stat st;
    if (stat(dir, &st) != 0) {
        if (errno == ENOENT) return DT_OK;
        if (errno == ENOTDIR) { /* name the part of the path that is a file */
            char part[4200];
            snprintf(part, sizeof part, "%s", dir);
            for (char *slash; (slash = strrchr(part, '/')) != NULL && slash != part;) {
                *slash = '\0';
                if (stat(part, &st) == 0 && !S_ISDIR(st.st_mode))
                    return dt_error_set(err, DT_ERR_IO, "%s: exists and is not a folder", part);
            }
        }
        return dt_error_set(err, DT_ERR_IO, "%s: %s", dir, strerror(errno));
    }
    if (!S_ISDIR(st.st_mode))
        return dt_error_set(err, DT_ERR_IO, "%s: exists and is not a folder", dir);
    DIR *d = opendir(dir);
    if (!d) return dt_error_set(err, DT_ERR_IO, "%s: cannot list: %s", dir, strerror(errno));
    bool any = false, result = false;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") || !strcmp(e->d_name, DT_LOCK_NAME))
            continue;
        any = true;
        result |= !strcmp(e->d_name, "config.json") || !strcmp(e->d_name, "run.json");
    }
    closedir(d);
    *state = result ? DT_FOLDER_RESULT : any ? DT_FOLDER_OTHER : DT_FOLDER_EMPTY;
    return DT_OK;
}

/* Everything in the folder open as dfd, depth first; links are entries like any other. */
static enum dt_status clear_at(int dfd, const char *dir, bool keep_lock, struct dt_error *err)
{
    DIR *d = fdopendir(dfd);
    if (!d) {
        close(dfd);
        return dt_error_set(err, DT_ERR_IO, "%s: cannot list: %s", dir, strerror(errno));
    }
    enum dt_status st = DT_OK;
    for (struct dirent *e; st == DT_OK && (e = readdir(d)) != NULL;) {
        const char *n = e->d_name;
        if (!strcmp(n, ".") || !strcmp(n, "..") || (keep_lock && !strcmp(n, DT_LOCK_NAME)))
            continue;
        struct stat sb;
        if (fstatat(dirfd(d), n, &sb, AT_SYMLINK_NOFOLLOW) != 0) {
            st = dt_error_set(err, DT_ERR_IO, "%s/%s: %s", dir, n, strerror(errno));
            break;
        }
        if (S_ISDIR(sb.st_mode)) {
            char sub[4200];
            snprintf(sub, sizeof sub, "%s/%s", dir, n);
            int cfd = openat(dirfd(d), n, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            st = cfd < 0 ? dt_error_set(err, DT_ERR_IO, "%s: cannot open: %s", sub, strerror(errno))
                         : clear_at(cfd, sub, false, err);
            if (st == DT_OK && unlinkat(dirfd(d), n, AT_REMOVEDIR) != 0)
                st = dt_error_set(err, DT_ERR_IO, "%s: cannot remove: %s", sub, strerror(errno));
        } else if (unlinkat(dirfd(d), n, 0) != 0) {
            st = dt_error_set(err, DT_ERR_IO, "%s/%s: cannot remove: %s", dir, n, strerror(errno));
        }
    }
    closedir(d);
    return st;
}

enum dt_status dt_folder_clear(const char *dir, struct dt_error *err)
{
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) return dt_error_set(err, DT_ERR_IO, "%s: cannot open: %s", dir, strerror(errno));
    return clear_at(dfd, dir, true, err);
}
