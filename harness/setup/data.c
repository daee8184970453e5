/* IDX reader and Fashion-MNIST loader. Files go through zlib's gzread, which reads gzip and
 * plain files alike (gzip is recognised by content, never by name). Data path (docs/DESIGN.md):
 * files on disk -> harness/data (checked dt_split arrays, pixels scaled to [0, 1]) -> batches
 * in harness/train. Every error names the file and the exact problem, and a failed load
 * leaves nothing allocated. */
#include "harness/setup/data.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "core/fileio.h"
#include "nets/gather_hd.h"

/* ---- IDX format -------------------------------------------------------------------------- */

#define IDX_TYPE_UBYTE 0x08                 /* the only element type we accept */
#define IDX_MAX_DIM 2147483647u             /* each dimension: 1..2^31-1 */
#define IDX_MAX_PAYLOAD ((uint64_t)1 << 32) /* prod(dims) bytes, at most 2^32 */
#define IDX_READ_CHUNK ((size_t)1 << 30)    /* gzread takes unsigned int lengths */
#define IDX_FIRST_ALLOC ((size_t)1 << 24)   /* grow the payload buffer from 16 MiB */
#define IDX_GZ_BUFFER (128u * 1024u)        /* zlib's input buffer (default 8 KiB) */

static uint32_t be32(const uint8_t b[4])
{
    return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | (uint32_t)b[3];
}

static const char *plural(uint64_t n) { return n == 1 ? "" : "s"; }

/* zlib prefixes its messages with "PATH: ", or "<fd:N>: " for a stream opened with
 * gzdopen; drop that so ours does not say it twice. */
static const char *gz_msg_without_path(const char *msg, const char *path)
{
    size_t n = strlen(path);
    if (msg && strncmp(msg, path, n) == 0 && strncmp(msg + n, ": ", 2) == 0) return msg + n + 2;
    const char *end = msg && strncmp(msg, "<fd:", 4) == 0 ? strstr(msg, ">: ") : NULL;
    if (end) return end + 3;
    return msg ? msg : "unknown zlib error";
}

/* Turn zlib's error state into a dt_error. DT_OK when there is none (a plain end of file).
 * Z_BUF_ERROR is how gzread reports a gzip stream that ends before its trailer. */
static enum dt_status gz_check(gzFile gz, const char *path, struct dt_error *err)
{
    int code = Z_OK;
    const char *msg = gz_msg_without_path(gzerror(gz, &code), path);
    switch (code) {
    case Z_OK: return DT_OK;
    case Z_ERRNO: return dt_error_set(err, DT_ERR_IO, "%s: read error: %s", path, msg);
    case Z_MEM_ERROR:
        return dt_error_set(err, DT_ERR_NOMEM, "%s: out of memory while decompressing", path);
    case Z_BUF_ERROR:
        return dt_error_set(err, DT_ERR_DATA, "%s: corrupt gzip stream (%s: the .gz is cut short)",
                            path, msg);
    default: return dt_error_set(err, DT_ERR_DATA, "%s: corrupt gzip stream (%s)", path, msg);
    }
}

/* Read up to `n` bytes; *got is how many arrived before the end of the file. Loops because
 * gzread takes an unsigned int length. Read and decompression errors are reported. */
static enum dt_status gz_read_full(uint8_t *buf, size_t *got, gzFile gz, const char *path, size_t n,
                                   struct dt_error *err)
{
    *got = 0;
    while (*got < n) {
        size_t want = n - *got < IDX_READ_CHUNK ? n - *got : IDX_READ_CHUNK;
        int r = gzread(gz, buf + *got, (unsigned)want);
        if (r < 0) {
            DT_FORWARD_IF_ERROR(gz_check(gz, path, err));
            return dt_error_set(err, DT_ERR_IO, "%s: read failed", path);
        }
        if (r == 0) break;
        *got += (size_t)r;
    }
    return gz_check(gz, path, err);
}

static const char *idx_kind(int ndim) { return ndim == 3 ? "images" : "labels"; }

/* Read and check the header: magic (0, 0, type, ndim) and ndim big-endian uint32 sizes.
 * Fills idx->ndim and idx->dims and returns the payload size in *payload. */
static enum dt_status idx_read_header(struct dt_idx *idx, uint64_t *payload, gzFile gz,
                                      const char *path, int expect_ndim, struct dt_error *err)
{
    uint8_t magic[4];
    size_t got = 0;
    DT_FORWARD_IF_ERROR(gz_read_full(magic, &got, gz, path, sizeof magic, err));
    if (got == 0) return dt_error_set(err, DT_ERR_DATA, "%s: empty file (no IDX header)", path);
    if (got < sizeof magic)
        return dt_error_set(err, DT_ERR_DATA,
                            "%s: truncated header: expected a 4-byte magic number, found %zu "
                            "byte%s",
                            path, got, plural(got));
    if (magic[0] != 0 || magic[1] != 0)
        return dt_error_set(err, DT_ERR_DATA, "%s: bad magic 0x%08x: not an IDX file", path,
                            (unsigned)be32(magic));
    if (magic[2] != IDX_TYPE_UBYTE)
        return dt_error_set(err, DT_ERR_DATA,
                            "%s: unsupported IDX element type 0x%02x (only 0x08, unsigned byte, "
                            "is supported)",
                            path, (unsigned)magic[2]);
    if (magic[3] != expect_ndim)
        return dt_error_set(err, DT_ERR_DATA,
                            "%s: expected an idx%d (%s) file but it has %d dimension%s", path,
                            expect_ndim, idx_kind(expect_ndim), magic[3], plural(magic[3]));

    uint8_t raw[3 * 4];
    size_t need = (size_t)expect_ndim * 4;
    DT_FORWARD_IF_ERROR(gz_read_full(raw, &got, gz, path, need, err));
    if (got < need)
        return dt_error_set(err, DT_ERR_DATA,
                            "%s: truncated header: expected %zu bytes of dimension sizes after "
                            "the magic number, found %zu",
                            path, need, got);

    uint64_t bytes = 1;
    int too_big = 0;
    for (int i = 0; i < expect_ndim; i++) {
        uint32_t d = be32(raw + 4 * i);
        if (d < 1 || d > IDX_MAX_DIM)
            return dt_error_set(err, DT_ERR_DATA, "%s: dimension %d is %u; each must be in 1..%u",
                                path, i, (unsigned)d, IDX_MAX_DIM);
        idx->dims[i] = d;
        /* bytes <= 2^32 and d < 2^31 before the multiply, so this never wraps. */
        if (!too_big) bytes *= d;
        if (bytes > IDX_MAX_PAYLOAD) too_big = 1;
    }
    idx->ndim = expect_ndim;
    if (too_big) {
        char shape[64];
        if (expect_ndim == 3)
            snprintf(shape, sizeof shape, "%lld x %lld x %lld", (long long)idx->dims[0],
                     (long long)idx->dims[1], (long long)idx->dims[2]);
        else snprintf(shape, sizeof shape, "%lld", (long long)idx->dims[0]);
        return dt_error_set(err, DT_ERR_DATA,
                            "%s: dimensions %s describe more than 2^32 bytes of data (the limit)",
                            path, shape);
    }
    *payload = bytes;
    return DT_OK;
}

/* Read exactly `payload` bytes into idx->data. The buffer grows as data arrives, so a header
 * that promises gigabytes in a tiny file fails as "truncated" without a huge allocation. */
static enum dt_status idx_read_payload(struct dt_idx *idx, gzFile gz, const char *path,
                                       uint64_t payload, struct dt_error *err)
{
    if (payload > SIZE_MAX)
        return dt_error_set(err, DT_ERR_NOMEM, "%s: %llu bytes of data do not fit in memory", path,
                            (unsigned long long)payload);
    size_t total = (size_t)payload;
    size_t cap = total < IDX_FIRST_ALLOC ? total : IDX_FIRST_ALLOC;
    size_t have = 0;
    for (;;) {
        uint8_t *grown = realloc(idx->data, cap);
        if (!grown)
            return dt_error_set(err, DT_ERR_NOMEM, "%s: out of memory for %zu bytes of data", path,
                                cap);
        idx->data = grown;
        size_t got = 0;
        DT_FORWARD_IF_ERROR(gz_read_full(idx->data + have, &got, gz, path, cap - have, err));
        have += got;
        if (have < cap || cap == total) break; /* end of file, or everything is here */
        cap = cap <= total / 2 ? cap * 2 : total;
    }
    if (have < total)
        return dt_error_set(err, DT_ERR_DATA,
                            "%s: truncated: expected %zu bytes of data after the header, found %zu",
                            path, total, have);
    return DT_OK;
}

/* After the payload the file must end: count whatever is left and report it. */
static enum dt_status idx_check_end(gzFile gz, const char *path, struct dt_error *err)
{
    uint8_t buf[16384];
    uint64_t extra = 0;
    size_t got = 0;
    do {
        DT_FORWARD_IF_ERROR(gz_read_full(buf, &got, gz, path, sizeof buf, err));
        extra += got;
    } while (got == sizeof buf);
    if (extra)
        return dt_error_set(err, DT_ERR_DATA, "%s: %llu unexpected trailing byte%s after the data",
                            path, (unsigned long long)extra, plural(extra));
    return DT_OK;
}

enum dt_status dt_idx_read(struct dt_idx *out, const char *path, int expect_ndim,
                           struct dt_error *err)
{
    DT_ASSERT(out != NULL && path != NULL);
    DT_ASSERT_MSG(expect_ndim == 1 || expect_ndim == 3, "dt_idx_read: expect_ndim is 1 or 3");
    memset(out, 0, sizeof *out);

    int fd; /* a regular file (a link to one is fine): a FIFO or a device is refused */
    DT_FORWARD_IF_ERROR(dt_open_regular(&fd, path, "a dataset file", NULL, err));
    gzFile gz = gzdopen(fd, "rb");
    if (!gz) {
        close(fd);
        return dt_error_set(err, DT_ERR_NOMEM, "%s: cannot open: out of memory", path);
    }
    gzbuffer(gz, IDX_GZ_BUFFER);

    struct dt_idx idx = {0};
    uint64_t payload = 0;
    enum dt_status st = idx_read_header(&idx, &payload, gz, path, expect_ndim, err);
    if (st == DT_OK) st = idx_read_payload(&idx, gz, path, payload, err);
    if (st == DT_OK) st = idx_check_end(gz, path, err);
    gzclose(gz); /* read-only: every read error has already been seen by gz_check */
    if (st != DT_OK) {
        dt_idx_free(&idx);
        return st;
    }
    *out = idx;
    return DT_OK;
}

void dt_idx_free(struct dt_idx *idx)
{
    if (!idx) return;
    free(idx->data);
    memset(idx, 0, sizeof *idx);
}

/* ---- Fashion-MNIST ----------------------------------------------------------------------- */

#define FMNIST_DEFAULT_DIR "/usr/share/datasets/fashion-mnist"
#define FMNIST_HINT                                                                                \
    "install it with: apt-get install dataset-fashion-mnist, or set dataset.path / $DETRAIN_DATA"
#define FMNIST_SIDE 28    /* images are 28 x 28 */
#define FMNIST_CLASSES 10 /* labels 0..9 */

enum {
    FMNIST_TRAIN_IMAGES,
    FMNIST_TRAIN_LABELS,
    FMNIST_TEST_IMAGES,
    FMNIST_TEST_LABELS,
    FMNIST_NFILES
};

static const char *const fmnist_names[FMNIST_NFILES] = {
    "train-images-idx3-ubyte",
    "train-labels-idx1-ubyte",
    "t10k-images-idx3-ubyte",
    "t10k-labels-idx1-ubyte",
};

/* dir + "/" + name + ".gz" always fits: dir is at most sizeof(dt_dataset.dir) - 1 chars. */
enum { FMNIST_PATH_MAX = 1024 + 64 };
_Static_assert(sizeof(((struct dt_dataset *)0)->dir) + 64 <= FMNIST_PATH_MAX,
               "FMNIST_PATH_MAX must hold the dataset folder and a file name");

/* The folder to use: `path`, else $DETRAIN_DATA, else the Debian package's folder. Only
 * the first applicable one is used; *why says which, for error messages. */
static const char *fmnist_pick_dir(const char *path, const char **why)
{
    if (path && path[0]) {
        *why = "folder set by dataset.path";
        return path;
    }
    const char *env = getenv("DETRAIN_DATA");
    if (env && env[0]) {
        *why = "folder set by $DETRAIN_DATA";
        return env;
    }
    *why = "the default folder, as neither dataset.path nor $DETRAIN_DATA is set";
    return FMNIST_DEFAULT_DIR;
}

/* Find `name` in `dir`, plain first, then with ".gz". Returns 0 when neither exists. */
static int fmnist_find(char out[FMNIST_PATH_MAX], const char *dir, const char *name)
{
    int n = snprintf(out, FMNIST_PATH_MAX, "%s/%s", dir, name);
    DT_ASSERT(n > 0 && (size_t)n + sizeof ".gz" <= FMNIST_PATH_MAX);
    if (access(out, F_OK) == 0) return 1;
    memcpy(out + n, ".gz", sizeof ".gz");
    return access(out, F_OK) == 0;
}

/* Locate all four files; when any is missing, one error lists every missing name. */
static enum dt_status fmnist_find_all(char paths[FMNIST_NFILES][FMNIST_PATH_MAX], const char *dir,
                                      const char *why, struct dt_error *err)
{
    char missing[512] = "";
    size_t len = 0;
    for (int i = 0; i < FMNIST_NFILES; i++) {
        if (fmnist_find(paths[i], dir, fmnist_names[i])) continue;
        int n =
            snprintf(missing + len, sizeof missing - len, "%s%s", len ? ", " : "", fmnist_names[i]);
        len += (size_t)n; /* four short names: always fits */
    }
    if (!len) return DT_OK;
    struct stat sb;
    const char *folder_note = stat(dir, &sb) != 0    ? "; the folder does not exist"
                              : !S_ISDIR(sb.st_mode) ? "; it is not a folder"
                                                     : "";
    return dt_error_set(err, DT_ERR_IO,
                        "%s: Fashion-MNIST not found in this folder: missing %s (each tried as "
                        "is and with .gz; %s%s); " FMNIST_HINT,
                        dir, missing, why, folder_note);
}

/* Images must be N x 28 x 28, labels N entries in 0..9. */
static enum dt_status fmnist_check_split(const struct dt_idx *img, const struct dt_idx *lbl,
                                         const char *img_path, const char *lbl_path,
                                         struct dt_error *err)
{
    if (img->dims[1] != FMNIST_SIDE || img->dims[2] != FMNIST_SIDE)
        return dt_error_set(err, DT_ERR_DATA,
                            "%s: images are %lld x %lld (rows x cols); Fashion-MNIST images must "
                            "have rows and cols both 28",
                            img_path, (long long)img->dims[1], (long long)img->dims[2]);
    if (lbl->dims[0] != img->dims[0])
        return dt_error_set(err, DT_ERR_DATA,
                            "%s: has %lld labels but %s has %lld images; the label count must "
                            "match the image count",
                            lbl_path, (long long)lbl->dims[0], img_path, (long long)img->dims[0]);
    for (int64_t i = 0; i < lbl->dims[0]; i++) {
        if (lbl->data[i] >= FMNIST_CLASSES)
            return dt_error_set(err, DT_ERR_DATA,
                                "%s: label at index %lld is %u; Fashion-MNIST labels are 0..9",
                                lbl_path, (long long)i, (unsigned)lbl->data[i]);
    }
    return DT_OK;
}

/* Keep the first min(limit, N) examples (all when limit <= 0): pixels become byte / 255
 * (dt_pixel_value, the rule a device gather follows too); bytes and labels move over from
 * the IDX buffers. */
static enum dt_status fmnist_fill_split(struct dt_split *out, struct dt_idx *img,
                                        struct dt_idx *lbl, int64_t limit, const char *img_path,
                                        struct dt_error *err)
{
    int64_t n = img->dims[0];
    if (limit > 0 && limit < n) n = limit;
    const int64_t dim = (int64_t)FMNIST_SIDE * FMNIST_SIDE;
    size_t count = (size_t)n * (size_t)dim;
    float *x = malloc(count * sizeof *x); /* x is (n, 784) */
    if (!x)
        return dt_error_set(err, DT_ERR_NOMEM, "%s: out of memory for %lld images as floats",
                            img_path, (long long)n);
    for (size_t i = 0; i < count; i++) x[i] = dt_pixel_value(img->data[i]);
    out->n = n;
    out->dim = dim;
    out->stride = dim;
    out->x = x;
    out->pixels = img->data; /* the first n * dim bytes are the kept examples */
    img->data = NULL;
    out->y = lbl->data; /* first n of its N labels are used */
    lbl->data = NULL;
    out->n_classes = FMNIST_CLASSES;
    return DT_OK;
}

/* Load one split from its image and label files, checked against each other. */
static enum dt_status fmnist_load_split(struct dt_split *out, const char *img_path,
                                        const char *lbl_path, int64_t limit, struct dt_error *err)
{
    struct dt_idx img = {0}, lbl = {0};
    enum dt_status st = dt_idx_read(&img, img_path, 3, err);
    if (st == DT_OK) st = dt_idx_read(&lbl, lbl_path, 1, err);
    if (st == DT_OK) st = fmnist_check_split(&img, &lbl, img_path, lbl_path, err);
    if (st == DT_OK) st = fmnist_fill_split(out, &img, &lbl, limit, img_path, err);
    dt_idx_free(&img);
    dt_idx_free(&lbl);
    return st;
}

enum dt_status dt_dataset_load_fashion_mnist(struct dt_dataset *out, const char *path,
                                             int64_t train_limit, int64_t test_limit,
                                             struct dt_error *err)
{
    DT_ASSERT(out != NULL);
    memset(out, 0, sizeof *out);
    const char *why = NULL;
    const char *dir = fmnist_pick_dir(path, &why);
    if (strlen(dir) >= sizeof out->dir)
        return dt_error_set(err, DT_ERR_IO,
                            "%.64s...: dataset folder path is longer than %zu "
                            "characters (%s)",
                            dir, sizeof out->dir - 1, why);
    snprintf(out->dir, sizeof out->dir, "%s", dir);

    char paths[FMNIST_NFILES][FMNIST_PATH_MAX];
    enum dt_status st = fmnist_find_all(paths, out->dir, why, err);
    if (st == DT_OK)
        st = fmnist_load_split(&out->train, paths[FMNIST_TRAIN_IMAGES], paths[FMNIST_TRAIN_LABELS],
                               train_limit, err);
    if (st == DT_OK)
        st = fmnist_load_split(&out->test, paths[FMNIST_TEST_IMAGES], paths[FMNIST_TEST_LABELS],
                               test_limit, err);
    if (st != DT_OK) dt_dataset_free(out);
    return st;
}

static void split_free(struct dt_split *s)
{
    free(s->x);
    free(s->pixels);
    free(s->y);
    memset(s, 0, sizeof *s);
}

void dt_dataset_free(struct dt_dataset *ds)
{
    if (!ds) return;
    split_free(&ds->train);
    split_free(&ds->test);
    ds->dir[0] = '\0';
}

/* ---- text ---------------------------------------------------------------------------------- */

#define TEXT_MAX_BYTES ((size_t)1 << 31) /* a corpus of at most 2 GiB */
#define TEXT_MAX_FILES 4096

static bool text_skipped_name(const char *name)
{
    const size_t n = strlen(name);
    if (name[0] == '.') return true;
    if (n >= 4 && strcmp(name + n - 4, ".dat") == 0) return true;
    return n >= 3 && strcmp(name + n - 3, ".u8") == 0;
}

static int text_name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Append the regular file `path` to buf (grown as needed). */
static enum dt_status text_append(uint8_t **buf, size_t *len, const char *path,
                                  struct dt_error *err)
{
    char *data = NULL;
    size_t n = 0;
    DT_FORWARD_IF_ERROR(
        dt_read_regular_file(&data, &n, path, "a text file", TEXT_MAX_BYTES - *len, err));
    *buf = dt_xrealloc(*buf, *len + n + 1);
    memcpy(*buf + *len, data, n);
    *len += n;
    free(data);
    return DT_OK;
}

int64_t dt_text_corpus_bytes(const char *path)
{
    const char *src = path && path[0] ? path : DT_TEXT_DEFAULT_DIR;
    struct stat sb;
    if (stat(src, &sb) != 0) return -1;
    if (!S_ISDIR(sb.st_mode)) return S_ISREG(sb.st_mode) ? (int64_t)sb.st_size : -1;
    DIR *d = opendir(src);
    if (!d) return -1;
    int64_t total = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (text_skipped_name(e->d_name)) continue;
        char p[FMNIST_PATH_MAX + 256];
        snprintf(p, sizeof p, "%s/%s", src, e->d_name);
        if (stat(p, &sb) == 0 && S_ISREG(sb.st_mode)) total += (int64_t)sb.st_size;
    }
    closedir(d);
    return total;
}

/* Every readable regular file of `dir` in name order (the skipped names left out). */
static enum dt_status text_read_dir(uint8_t **buf, size_t *len, int *files, const char *dir,
                                    struct dt_error *err)
{
    DIR *d = opendir(dir);
    if (!d)
        return dt_error_set(err, DT_ERR_IO, "%s: cannot open the text folder: %s", dir,
                            strerror(errno));
    char *names[TEXT_MAX_FILES];
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (text_skipped_name(e->d_name)) continue;
        if (n == TEXT_MAX_FILES) {
            closedir(d);
            for (int i = 0; i < n; i++) free(names[i]);
            return dt_error_set(err, DT_ERR_DATA, "%s: more than %d files in the text folder", dir,
                                TEXT_MAX_FILES);
        }
        {
            const size_t len_ = strlen(e->d_name) + 1;
            names[n] = dt_xmalloc(len_);
            memcpy(names[n++], e->d_name, len_);
        }
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof names[0], text_name_cmp);
    enum dt_status st = DT_OK;
    for (int i = 0; i < n && st == DT_OK; i++) {
        char path[FMNIST_PATH_MAX + 256];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        struct stat sb;
        if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode) || access(path, R_OK) != 0) continue;
        st = text_append(buf, len, path, err);
        if (st == DT_OK) (*files)++;
    }
    for (int i = 0; i < n; i++) free(names[i]);
    return st;
}

/* A split of windows of `dim` bytes: at every offset (stride 1) over `bytes` (train), or at
 * offsets 0, dim - 1, 2 (dim - 1), ... materialised (test). */
static void text_fill_split(struct dt_split *out, const uint8_t *bytes, int64_t len, int64_t dim,
                            bool every_offset, int64_t limit)
{
    int64_t n = every_offset ? len - dim + 1 : (len - 1) / (dim - 1);
    if (limit > 0 && limit < n) n = limit;
    out->n = n;
    out->dim = dim;
    out->stride = every_offset ? 1 : dim;
    out->n_classes = DT_TEXT_CLASSES;
    const int64_t count = (n - 1) * out->stride + dim;
    out->x = dt_xmalloc((size_t)count * sizeof *out->x);
    out->y = dt_xmalloc((size_t)n);
    for (int64_t i = 0; i < n; i++) {
        const uint8_t *w = bytes + (every_offset ? i : i * (dim - 1));
        if (!every_offset || i == 0)
            for (int64_t f = 0; f < dim; f++) out->x[i * out->stride + f] = (float)w[f];
        else out->x[i + dim - 1] = (float)w[dim - 1];
        out->y[i] = w[dim - 1];
    }
}

enum dt_status dt_dataset_load_text(struct dt_dataset *out, const char *path, int64_t context,
                                    int64_t train_limit, int64_t test_limit, struct dt_error *err)
{
    DT_ASSERT(out != NULL && context >= 1);
    memset(out, 0, sizeof *out);
    const char *src = path && path[0] ? path : DT_TEXT_DEFAULT_DIR;
    const char *hint = path && path[0] ? "dataset.path"
                                       : "the default corpus; install it with: apt-get install "
                                         "fortunes, or set dataset.path to a text file or folder";
    if (strlen(src) >= sizeof out->dir)
        return dt_error_set(err, DT_ERR_IO, "%.64s...: text path is longer than %zu characters",
                            src, sizeof out->dir - 1);
    snprintf(out->dir, sizeof out->dir, "%s", src);
    struct stat sb;
    if (stat(src, &sb) != 0)
        return dt_error_set(err, DT_ERR_IO, "%s: cannot read the text corpus: %s (%s)", src,
                            strerror(errno), hint);
    uint8_t *bytes = NULL;
    size_t len = 0;
    int files = 0;
    enum dt_status st = DT_OK;
    if (S_ISDIR(sb.st_mode)) {
        st = text_read_dir(&bytes, &len, &files, src, err);
        if (st == DT_OK && files == 0)
            st = dt_error_set(err, DT_ERR_IO,
                              "%s: the text folder has no readable file (names ending in .dat "
                              "or .u8 and hidden ones are left out)",
                              src);
    } else {
        st = text_append(&bytes, &len, src, err);
    }
    const int64_t dim = context + 1;
    const int64_t n_val = (int64_t)len / 10, n_train = (int64_t)len - n_val;
    if (st == DT_OK && len == 0)
        st = dt_error_set(err, DT_ERR_DATA, "%s: the text corpus is empty", src);
    else if (st == DT_OK && (n_train < dim || n_val < dim))
        st = dt_error_set(err, DT_ERR_DATA,
                          "%s: the text corpus has %zu bytes: too short for model.context %" PRId64
                          " (each split needs a window of context + 1 = %" PRId64
                          " bytes, and the validation split is the last 10%%: at least %" PRId64
                          " bytes in all)",
                          src, len, context, dim, 10 * dim);
    if (st == DT_OK) {
        text_fill_split(&out->train, bytes, n_train, dim, true, train_limit);
        text_fill_split(&out->test, bytes + n_train, n_val, dim, false, test_limit);
    }
    free(bytes);
    if (st != DT_OK) dt_dataset_free(out);
    return st;
}
