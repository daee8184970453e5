/* Reading inputs safely (fileio.h): regular files only, checked with fstat before the
 * first read and read with a bound; file bytes escaped before they reach a terminal. */
#include "core/fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *dt_file_kind(mode_t mode)
{
    if (S_ISREG(mode)) return "a regular file";
    if (S_ISDIR(mode)) return "a folder";
    if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    if (S_ISSOCK(mode)) return "a socket";
    if (S_ISLNK(mode)) return "a symbolic link";
    return "not a regular file";
}

enum dt_status dt_open_regular(int *fd, const char *path, const char *what, int64_t *size,
                               struct dt_error *err)
{
    *fd = -1;
    /* O_NONBLOCK: opening a FIFO without a writer would otherwise wait for one forever */
    int f = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (f < 0) {
        int e = errno; /* kept for callers that tell a missing file from other faults */
        dt_error_set(err, DT_ERR_IO, "%s: cannot open: %s", path, strerror(e));
        errno = e;
        return DT_ERR_IO;
    }
    struct stat st;
    if (fstat(f, &st) != 0) {
        int e = errno;
        close(f);
        return dt_error_set(err, DT_ERR_IO, "%s: cannot stat: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(f);
        return dt_error_set(err, DT_ERR_IO,
                            "%s: not a regular file but %s; detrain reads %s only from a "
                            "regular file (a link to one is fine): give the path of one",
                            path, dt_file_kind(st.st_mode), what);
    }
    int flags = fcntl(f, F_GETFL);
    if (flags < 0 || fcntl(f, F_SETFL, flags & ~O_NONBLOCK) != 0) {
        int e = errno;
        close(f);
        return dt_error_set(err, DT_ERR_IO, "%s: cannot set blocking reads: %s", path, strerror(e));
    }
    *fd = f;
    if (size) *size = (int64_t)st.st_size;
    return DT_OK;
}

enum dt_status dt_fopen_regular(FILE **f, const char *path, const char *what, struct dt_error *err)
{
    *f = NULL;
    int fd;
    DT_FORWARD_IF_ERROR(dt_open_regular(&fd, path, what, NULL, err));
    *f = fdopen(fd, "r");
    if (!*f) {
        int e = errno;
        close(fd);
        return dt_error_set(err, e == ENOMEM ? DT_ERR_NOMEM : DT_ERR_IO, "%s: cannot open: %s",
                            path, strerror(e));
    }
    return DT_OK;
}

enum dt_status dt_read_fd(int fd, void *buf, size_t n, size_t *got, const char *path,
                          struct dt_error *err)
{
    size_t done = 0;
    while (done < n) {
        ssize_t r = read(fd, (char *)buf + done, n - done);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            *got = done;
            return dt_error_set(err, DT_ERR_IO, "%s: read failed: %s", path, strerror(errno));
        }
        if (r == 0) break;
        done += (size_t)r;
    }
    *got = done;
    return DT_OK;
}

enum dt_status dt_read_regular_file(char **data, size_t *len, const char *path, const char *what,
                                    size_t max_bytes, struct dt_error *err)
{
    *data = NULL;
    if (len) *len = 0;
    int fd;
    int64_t size;
    DT_FORWARD_IF_ERROR(dt_open_regular(&fd, path, what, &size, err));
    if (size < 0 || (uint64_t)size > (uint64_t)max_bytes) {
        close(fd);
        return dt_error_set(err, DT_ERR_DATA,
                            "%s: %" PRId64 " bytes, more than the %zu bytes %s can hold; "
                            "check that this is the right file",
                            path, size, max_bytes, what);
    }
    char *buf = malloc((size_t)size + 1);
    if (!buf) {
        close(fd);
        return dt_error_set(err, DT_ERR_NOMEM, "%s: out of memory reading %" PRId64 " bytes", path,
                            size);
    }
    size_t got = 0;
    enum dt_status st = dt_read_fd(fd, buf, (size_t)size, &got, path, err);
    close(fd);
    if (st != DT_OK) {
        free(buf);
        return st;
    }
    buf[got] = '\0'; /* a file that shrank while it was read gives what was there */
    *data = buf;
    if (len) *len = got;
    return DT_OK;
}

/* ---- escaping ----------------------------------------------------------------------- */

/* Length of the well-formed UTF-8 sequence at p (n bytes left) that is printable text, or
 * 0: C1 controls, zero-width and line/paragraph separators, bidirectional embeddings,
 * overrides and isolates, and the byte-order mark are not (they change what a terminal
 * shows). */
static size_t utf8_text_len(const unsigned char *p, size_t n)
{
    unsigned char c = p[0];
    size_t k;
    uint32_t cp, min;
    if (c >= 0xC2 && c <= 0xDF) k = 2, cp = c & 0x1Fu, min = 0x80;
    else if (c >= 0xE0 && c <= 0xEF) k = 3, cp = c & 0x0Fu, min = 0x800;
    else if (c >= 0xF0 && c <= 0xF4) k = 4, cp = c & 0x07u, min = 0x10000;
    else return 0;
    if (n < k) return 0;
    for (size_t i = 1; i < k; i++) {
        if ((p[i] & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (p[i] & 0x3Fu);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    if (cp <= 0x9F || (cp >= 0x200B && cp <= 0x200F) || (cp >= 0x2028 && cp <= 0x202E) ||
        (cp >= 0x2066 && cp <= 0x2069) || cp == 0xFEFF)
        return 0;
    return k;
}

/* The shared escaper: `message` keeps newline, tab and backslash as they are. */
static const char *escape(char *out, size_t size, const unsigned char *p, size_t n, size_t max_in,
                          bool message)
{
    if (size == 0) return out;
    static const char ellipsis[] = "...";
    const size_t room = size > sizeof ellipsis ? size - sizeof ellipsis : 0;
    size_t o = 0, i = 0;
    bool cut = false;
    while (i < n) {
        char tok[8];
        size_t tn, used;
        const unsigned char c = p[i];
        size_t u;
        if (c == '\\' && !message) {
            memcpy(tok, "\\\\", 2), tn = 2, used = 1;
        } else if ((c >= 0x20 && c < 0x7F) || (message && (c == '\n' || c == '\t'))) {
            tok[0] = (char)c, tn = 1, used = 1;
        } else if (c >= 0x80 && (u = utf8_text_len(p + i, n - i)) > 0) {
            memcpy(tok, p + i, u), tn = u, used = u;
        } else {
            snprintf(tok, sizeof tok, "\\x%02x", c), tn = 4, used = 1;
        }
        if (i + used > max_in || o + tn > room) {
            cut = true;
            break;
        }
        memcpy(out + o, tok, tn);
        o += tn;
        i += used;
    }
    if (cut && o + sizeof ellipsis <= size) {
        memcpy(out + o, ellipsis, sizeof ellipsis - 1);
        o += sizeof ellipsis - 1;
    }
    out[o < size ? o : size - 1] = '\0';
    return out;
}

const char *dt_escape_bytes(char *out, size_t size, const void *data, size_t n, size_t max_in)
{
    return escape(out, size, data, n, max_in, false);
}

const char *dt_escape_str(char *out, size_t size, const char *s)
{
    return escape(out, size, (const unsigned char *)s, strlen(s), DT_ESCAPE_MAX_IN, false);
}

void dt_sanitize_message(char *out, size_t size, const char *msg)
{
    escape(out, size, (const unsigned char *)msg, strlen(msg), SIZE_MAX, true);
}

bool dt_path_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

bool dt_is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

bool dt_resolve_path(const char *path, char *out, size_t size)
{
    char head[PATH_MAX];
    if (!path[0] || strlen(path) >= sizeof head) return false;
    if (path[0] == '/') {
        snprintf(head, sizeof head, "%s", path);
    } else {
        char cwd[PATH_MAX];
        if (!getcwd(cwd, sizeof cwd)) return false;
        const size_t a = strlen(cwd), b = strlen(path);
        if (a + 1 + b >= sizeof head) return false;
        memcpy(head, cwd, a);
        head[a] = '/';
        memcpy(head + a + 1, path, b + 1);
    }
    /* the longest existing prefix (at a '/'), resolved */
    char base[PATH_MAX], tail[PATH_MAX] = "";
    size_t cut = strlen(head);
    for (;;) {
        char prefix[PATH_MAX];
        memcpy(prefix, head, cut);
        prefix[cut] = '\0';
        if (cut == 0) snprintf(prefix, sizeof prefix, "/");
        if (realpath(prefix, base)) {
            snprintf(tail, sizeof tail, "%s", head + cut);
            break;
        }
        if (cut == 0) return false;
        while (cut > 0 && head[cut - 1] != '/') cut--;
        if (cut > 0) cut--; /* before the '/' */
    }
    /* the rest, component by component */
    char res[PATH_MAX];
    snprintf(res, sizeof res, "%s", strcmp(base, "/") == 0 ? "" : base);
    for (char *save = NULL, *c = strtok_r(tail, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
        if (strcmp(c, ".") == 0) continue;
        if (strcmp(c, "..") == 0) {
            char *slash = strrchr(res, '/');
            if (slash) *slash = '\0';
            continue;
        }
        size_t len = strlen(res);
        if (len + 1 + strlen(c) >= sizeof res) return false;
        res[len] = '/';
        snprintf(res + len + 1, sizeof res - len - 1, "%s", c);
    }
    if (!res[0]) snprintf(res, sizeof res, "/");
    if (strlen(res) >= size) return false;
    snprintf(out, size, "%s", res);
    return true;
}

bool dt_same_path(const char *a, const char *b)
{
    char ra[PATH_MAX], rb[PATH_MAX];
    if (realpath(a, ra) && realpath(b, rb)) return strcmp(ra, rb) == 0;
    return strcmp(a, b) == 0;
}

const char *dt_escape_path(char *out, size_t size, const char *path)
{
    const size_t n = strlen(path);
    return dt_escape_bytes(out, size, path, n, n);
}
