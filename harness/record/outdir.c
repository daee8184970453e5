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
#include "harness/record/layout.h"
#include "harness/setup/config.h"

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

/* The experiment folder `path` lies in: itself, or up to three levels above (a replica
 * folder of a vary cell is <exp>/<vary>/<policy>/replica-<k>); "" when none. */
static void enclosing_result(char *out, size_t size, const char *path)
{
    snprintf(out, size, "%s", path);
    for (int up = 0; up <= 3; up++) {
        char cfg[4300];
        struct stat st;
        snprintf(cfg, sizeof cfg, "%s/config.json", out);
        if (lstat(out, &st) == 0 && S_ISDIR(st.st_mode) && lstat(cfg, &st) == 0 &&
            S_ISREG(st.st_mode))
            return;
        char *slash = strrchr(out, '/');
        while (slash && slash > out && slash[1] == '\0') { /* "dir/" */
            *slash = '\0';
            slash = strrchr(out, '/');
        }
        if (!slash) {
            if (strcmp(out, ".") == 0 || out[0] == '\0') break;
            snprintf(out, size, ".");
        } else if (slash == out) {
            out[1] = '\0';
        } else {
            *slash = '\0';
        }
    }
    out[0] = '\0';
}

enum dt_status dt_folder_read_lock_take(struct dt_folder_lock *l, const char *path,
                                        struct dt_error *err)
{
    l->fd = -1;
    l->path[0] = '\0';
    char dir[4096];
    enclosing_result(dir, sizeof dir, path);
    if (!dir[0]) return DT_OK; /* not in a result: a bare trace file, say */
    snprintf(l->path, sizeof l->path, "%s/%s", dir, DT_LOCK_NAME);
    int fd = open(l->path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return DT_OK; /* no run holds it (a writer makes the file before locking) */
    if (flock(fd, LOCK_SH | LOCK_NB) != 0) {
        const int e = errno;
        char holder[600] = "";
        ssize_t n = pread(fd, holder, sizeof holder - 1, 0);
        close(fd);
        if (e != EWOULDBLOCK) return DT_OK; /* a lock that cannot be taken guards nothing */
        holder[n > 0 ? n : 0] = '\0';
        holder[strcspn(holder, "\n")] = '\0';
        for (char *p = holder; *p; p++)
            if ((unsigned char)*p < 0x20 || (unsigned char)*p >= 0x7f) *p = '?';
        return dt_error_set(err, DT_ERR_USAGE,
                            "%s: a detrain run is writing into this result (%s): what it "
                            "holds now is a part that changes; read it once the run has ended",
                            dir, holder[0] ? holder : "its pid is not recorded yet");
    }
    l->fd = fd;
    return DT_OK;
}

void dt_folder_read_lock_release(struct dt_folder_lock *l)
{
    if (l->fd >= 0) close(l->fd); /* the file stays: another reader may hold it */
    l->fd = -1;
}

/* ---- what a folder holds -------------------------------------------------------------- */

static bool regular_file_starting(const char *dir, const char *name, const char *head);

/* dir/run.json is detrain's manifest of a run still "running" that trained no replica. */
static bool unstarted_manifest(const char *dir)
{
    if (!regular_file_starting(dir, "run.json", "{\"tool\": \"detrain\"")) return false;
    char path[4200], *text = NULL;
    size_t len = 0;
    snprintf(path, sizeof path, "%s/run.json", dir);
    if (dt_read_regular_file(&text, &len, path, "run.json", 1 << 20, NULL) != DT_OK) return false;
    const bool unstarted =
        strstr(text, "\"status\": \"running\"") != NULL && strstr(text, "\"replicas\": []") != NULL;
    free(text);
    return unstarted;
}

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
    bool any = false, only_manifest = true;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") || !strcmp(e->d_name, DT_LOCK_NAME))
            continue;
        any = true;
        only_manifest &= strcmp(e->d_name, "run.json") == 0;
    }
    closedir(d);
    *state = dt_folder_is_result(dir) ? DT_FOLDER_RESULT : any ? DT_FOLDER_OTHER : DT_FOLDER_EMPTY;
    /* a start that never began: detrain's run.json alone, "running", no config.json (what a
     * full disk at the very first write left before that start cleaned up after itself) --
     * nothing of a result in it, so the folder counts as empty and the next run takes it */
    if (*state == DT_FOLDER_OTHER && only_manifest && unstarted_manifest(dir))
        *state = DT_FOLDER_EMPTY;
    return DT_OK;
}

/* A regular file (not a link) at dir/name whose first bytes are `head`. */
static bool regular_file_starting(const char *dir, const char *name, const char *head)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return false;
    struct stat st;
    char buf[64] = "";
    const size_t want = strlen(head);
    bool ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && want < sizeof buf &&
              read(fd, buf, want) == (ssize_t)want && memcmp(buf, head, want) == 0;
    close(fd);
    return ok;
}

bool dt_folder_is_result(const char *dir)
{
    return regular_file_starting(dir, "run.json", "{\"tool\": \"detrain\"") &&
           regular_file_starting(dir, "config.json", "{");
}

/* ---- where a result may go ------------------------------------------------------------- */

enum dt_status dt_out_location_check(const char *dir, size_t longest, struct dt_error *err)
{
    char shown[200];
    dt_escape_str(shown, sizeof shown, dir);
    if (strlen(dir) + longest >= DT_PATH_MAX)
        return dt_error_set(err, DT_ERR_USAGE,
                            "%s: this output folder's path is %zu characters long, and the "
                            "longest path this run writes below it adds %zu: more than the %d "
                            "detrain allows; choose a shorter --out (nothing was written)",
                            shown, strlen(dir), longest, DT_PATH_MAX - 1);
    char where[4096], cwd[4096], home[4096];
    if (!dt_resolve_path(dir, where, sizeof where))
        return dt_error_set(err, DT_ERR_USAGE, "%s: cannot tell where this folder is", shown);
    char where_shown[200];
    dt_escape_str(where_shown, sizeof where_shown, where);
    const char *what = NULL;
    if (strcmp(where, "/") == 0) {
        what = "the root folder";
    } else if (getenv("HOME") && dt_resolve_path(getenv("HOME"), home, sizeof home) &&
               strcmp(where, home) == 0) {
        what = "your home folder";
    } else if (getcwd(cwd, sizeof cwd) && dt_resolve_path(cwd, cwd, sizeof cwd)) {
        const size_t n = strlen(where);
        if (strcmp(where, cwd) == 0) what = "the current folder";
        else if (strncmp(cwd, where, n) == 0 && cwd[n] == '/')
            what = "a folder above the current one";
    }
    if (what)
        return dt_error_set(err, DT_ERR_USAGE,
                            "%s: is %s (%s); an experiment goes into a folder of its own, "
                            "below it: choose another --out or config name (nothing was "
                            "written)",
                            shown, what, where_shown);
    return DT_OK;
}

/* ---- output files of the analysis commands --------------------------------------------- */

/* Is `in` (resolved) the same as `out` or a folder holding it? */
static bool covers(const char *in, const char *out)
{
    const size_t n = strlen(in);
    return strcmp(in, out) == 0 || (strncmp(out, in, n) == 0 && (out[n] == '/' || n == 1));
}

enum dt_status dt_out_file_check(const char *path, const char *const *reads, int n_reads,
                                 const char *header, const char *what, struct dt_error *err)
{
    char shown[200], where[4096];
    dt_escape_str(shown, sizeof shown, path);
    if (!dt_resolve_path(path, where, sizeof where))
        return dt_error_set(err, DT_ERR_USAGE, "%s: cannot tell where this file would be", shown);
    for (int i = 0; i < n_reads; i++) {
        char in[4096];
        if (!dt_resolve_path(reads[i], in, sizeof in)) continue;
        /* the input, then the folders above it up to the detrain result it belongs to */
        char up[4096];
        snprintf(up, sizeof up, "%s", in);
        for (int depth = 0; depth < 4; depth++) {
            const bool result = dt_folder_is_result(up);
            if (depth == 0 || result) {
                if (covers(up, where)) {
                    char in_shown[200];
                    dt_escape_str(in_shown, sizeof in_shown, up);
                    return dt_error_set(err, DT_ERR_USAGE,
                                        "%s: is %s%s, which this command reads; write the %s "
                                        "elsewhere (nothing was written)",
                                        shown, strcmp(up, where) == 0 ? "" : "inside ", in_shown,
                                        what);
                }
            }
            if (result) break;
            char *slash = strrchr(up, '/');
            if (!slash || slash == up) break;
            *slash = '\0';
        }
    }
    struct stat st;
    if (lstat(path, &st) != 0) return DT_OK; /* a new file */
    if (!S_ISREG(st.st_mode))
        return dt_error_set(err, DT_ERR_USAGE,
                            "%s: is %s, and detrain writes its %s only as a regular file it "
                            "creates or an earlier one of its own (links are not followed)",
                            shown, dt_file_kind(st.st_mode), what);
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    char first[256] = "";
    ssize_t got = fd < 0 ? -1 : read(fd, first, sizeof first - 1);
    if (fd >= 0) close(fd);
    if (got >= 0) first[got] = '\0';
    first[strcspn(first, "\n")] = '\0';
    if (got < 0 || strncmp(first, header, strlen(header)) != 0) {
        char first_shown[160];
        dt_escape_str(first_shown, sizeof first_shown, first);
        return dt_error_set(err, DT_ERR_USAGE,
                            "%s: exists and is not an earlier %s of detrain's (its first line "
                            "is '%s', not '%s...'); detrain replaces or extends only its own "
                            "outputs: remove it or choose another file (nothing was written)",
                            shown, what, first_shown, header);
    }
    return DT_OK;
}

/* ---- a result's own entries (dt_result_foreign, dt_result_clear) ------------------------ */

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The names in the folder open as dfd, sorted (the first foreign entry is the same on every
 * run), "." and ".." left out; *n gets their count. NULL with err set when unlistable. */
static char **sorted_names(int dfd, const char *dir, int *n, struct dt_error *err)
{
    int fd = dup(dfd);
    DIR *d = fd < 0 ? NULL : fdopendir(fd);
    if (!d) {
        if (fd >= 0) close(fd);
        dt_error_set(err, DT_ERR_IO, "%s: cannot list: %s", dir, strerror(errno));
        return NULL;
    }
    int cap = 16, k = 0;
    char **names = dt_xcalloc((size_t)cap, sizeof *names);
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        if (k == cap) {
            cap *= 2;
            names = dt_xrealloc(names, (size_t)cap * sizeof *names);
        }
        const size_t len = strlen(e->d_name) + 1;
        names[k] = dt_xmalloc(len);
        memcpy(names[k++], e->d_name, len);
    }
    closedir(d);
    qsort(names, (size_t)k, sizeof *names, cmp_names);
    *n = k;
    return names;
}

static void free_names(char **names, int n)
{
    for (int i = 0; i < n; i++) free(names[i]);
    free(names);
}

/* Walk the folder open as dfd (rel: its path below the result, "" at the top), depth first.
 * Without `remove`: the first entry that is not the result's own (dt_layout_is_own; a link
 * or a special file never is) goes to foreign (relative path) and the walk stops. With it:
 * every own file is removed, and every own folder once emptied; a foreign entry is left
 * where it is (and named in foreign), so that nothing detrain did not write is touched. */
static enum dt_status walk_result(int dfd, const char *dir, const char *rel,
                                  const struct dt_experiment *exp, bool remove, char *foreign,
                                  size_t size, struct dt_error *err)
{
    int n = 0;
    char **names = sorted_names(dfd, dir, &n, err);
    if (!names) return DT_ERR_IO;
    enum dt_status st = DT_OK;
    for (int i = 0; i < n && st == DT_OK; i++) {
        const char *name = names[i];
        char sub_rel[2200];
        snprintf(sub_rel, sizeof sub_rel, "%s%s%s", rel, rel[0] ? "/" : "", name);
        struct stat sb;
        if (fstatat(dfd, name, &sb, AT_SYMLINK_NOFOLLOW) != 0) {
            if (errno == ENOENT) continue; /* gone meanwhile */
            st = dt_error_set(err, DT_ERR_IO, "%s/%s: %s", dir, name, strerror(errno));
            break;
        }
        const bool is_dir = S_ISDIR(sb.st_mode);
        const bool own = (is_dir || S_ISREG(sb.st_mode)) && dt_layout_is_own(exp, sub_rel, is_dir);
        if (!own) {
            if (!foreign[0]) snprintf(foreign, size, "%s", sub_rel);
            if (!remove) break;
            continue;
        }
        if (is_dir) {
            char sub[4400];
            snprintf(sub, sizeof sub, "%s/%s", dir, name);
            int cfd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (cfd < 0) {
                st = dt_error_set(err, DT_ERR_IO, "%s: cannot open: %s", sub, strerror(errno));
                break;
            }
            st = walk_result(cfd, sub, sub_rel, exp, remove, foreign, size, err);
            close(cfd);
            if (st != DT_OK || (!remove && foreign[0])) break;
            if (remove && unlinkat(dfd, name, AT_REMOVEDIR) != 0 && errno != ENOTEMPTY &&
                errno != EEXIST)
                st = dt_error_set(err, DT_ERR_IO, "%s: cannot remove: %s", sub, strerror(errno));
        } else if (remove && strcmp(sub_rel, DT_LOCK_NAME) != 0 && unlinkat(dfd, name, 0) != 0 &&
                   errno != ENOENT) {
            st = dt_error_set(err, DT_ERR_IO, "%s/%s: cannot remove: %s", dir, name,
                              strerror(errno));
        }
    }
    free_names(names, n);
    return st;
}

/* The experiment a result folder holds, from its config.json. */
static enum dt_status stored_experiment(struct dt_experiment *exp, const char *dir,
                                        struct dt_error *err)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/config.json", dir);
    struct dt_error e2 = {0};
    if (dt_config_load(exp, path, NULL, 0, &e2) != DT_OK)
        return dt_error_set(err, DT_ERR_USAGE,
                            "%s: its config.json is not a detrain config (%s), so what the "
                            "result holds cannot be told from what else is there: nothing is "
                            "removed; move the folder away or choose another --out",
                            dir, e2.msg);
    return DT_OK;
}

/* The result in dir walked against the experiment its config.json describes (walk_result:
 * `remove` or only look). */
static enum dt_status walk_stored_result(const char *dir, bool remove, char *foreign, size_t size,
                                         struct dt_error *err)
{
    foreign[0] = '\0';
    struct dt_experiment *exp = dt_xcalloc(1, sizeof *exp);
    enum dt_status st = stored_experiment(exp, dir, err);
    if (st == DT_OK) {
        int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dfd < 0) {
            st = dt_error_set(err, DT_ERR_IO, "%s: cannot open: %s", dir, strerror(errno));
        } else {
            st = walk_result(dfd, dir, "", exp, remove, foreign, size, err);
            close(dfd);
        }
    }
    free(exp);
    return st;
}

enum dt_status dt_result_foreign(const char *dir, char *foreign, size_t size, struct dt_error *err)
{
    return walk_stored_result(dir, false, foreign, size, err);
}

enum dt_status dt_result_clear(const char *dir, struct dt_error *err)
{
    char foreign[2200];
    enum dt_status st = walk_stored_result(dir, true, foreign, sizeof foreign, err);
    if (st == DT_OK && foreign[0]) /* appeared since the check: left where it is */
        return dt_error_set(err, DT_ERR_USAGE,
                            "%s: %s appeared while the earlier result was being removed; it was "
                            "left as it is (and whatever of the result lies beside it)",
                            dir, foreign);
    return st;
}

/* ---- no links in a result -------------------------------------------------------------- */

static enum dt_status link_refused(const char *link, struct dt_error *err)
{
    char shown[300];
    dt_escape_str(shown, sizeof shown, link);
    return dt_error_set(err, DT_ERR_USAGE,
                        "%s: is a symbolic link inside a detrain result, and detrain follows no "
                        "link in a result folder (it could lead writes or reads outside the "
                        "result): put what it points to in its place, or remove it",
                        shown);
}

/* Every entry below the folder open as dfd: the first link refused. */
static enum dt_status no_links_at(int dfd, const char *dir, int depth, struct dt_error *err)
{
    if (depth > 16) return DT_OK; /* deeper than any result: nothing of detrain's there */
    int n = 0;
    char **names = sorted_names(dfd, dir, &n, err);
    if (!names) return DT_ERR_IO;
    enum dt_status st = DT_OK;
    for (int i = 0; i < n && st == DT_OK; i++) {
        char sub[4400];
        snprintf(sub, sizeof sub, "%s/%s", dir, names[i]);
        struct stat sb;
        if (fstatat(dfd, names[i], &sb, AT_SYMLINK_NOFOLLOW) != 0) continue;
        if (S_ISLNK(sb.st_mode)) {
            st = link_refused(sub, err);
        } else if (S_ISDIR(sb.st_mode)) {
            int cfd = openat(dfd, names[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (cfd >= 0) {
                st = no_links_at(cfd, sub, depth + 1, err);
                close(cfd);
            }
        }
    }
    free_names(names, n);
    return st;
}

enum dt_status dt_result_check_links(const char *path, struct dt_error *err)
{
    /* the folders between the result around path (up to three levels above) and path */
    char up[4200];
    snprintf(up, sizeof up, "%s", path);
    size_t len = strlen(up);
    while (len > 1 && up[len - 1] == '/') up[--len] = '\0';
    char chain[4][4200];
    int n_chain = 0;
    for (int level = 0; level < 4; level++) {
        if (dt_folder_is_result(up)) break;
        snprintf(chain[n_chain++], sizeof chain[0], "%s", up);
        char *slash = strrchr(up, '/');
        if (!slash || slash == up || level == 3) {
            n_chain = 0; /* no result around it: only what lies below path is checked */
            break;
        }
        *slash = '\0';
    }
    for (int i = 0; i < n_chain; i++) {
        struct stat sb;
        if (lstat(chain[i], &sb) == 0 && S_ISLNK(sb.st_mode)) return link_refused(chain[i], err);
    }
    struct stat sb;
    if (stat(path, &sb) != 0 || !S_ISDIR(sb.st_mode)) return DT_OK;
    int dfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) return DT_OK; /* the caller's own open says why */
    enum dt_status st = no_links_at(dfd, path, 0, err);
    close(dfd);
    return st;
}
