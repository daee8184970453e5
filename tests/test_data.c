/* Tests for harness/data: the IDX reader (plain and gzip, and every malformed-file error)
 * and the Fashion-MNIST loader on synthetic folders, plus the real data set when installed.
 * Fixtures are written at run time under DT_TEST_TMP_DIR/data.<case>, so cases can run in
 * parallel and no binaries live in the repository. */
#include "tests/check.h"

#include "harness/run/batches.h"
#include "harness/setup/data.h"
#include "nets/gather_hd.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#define FMNIST_DEFAULT_DIR "/usr/share/datasets/fashion-mnist"

/* ---- fixture helpers ------------------------------------------------------------------- */

static void fatal(const char *what, const char *path)
{
    fprintf(stderr, "test setup failed: %s %s: %s\n", what, path, strerror(errno));
    exit(1);
}

static void make_dir(const char *path)
{
    if (mkdir(path, 0777) != 0 && errno != EEXIST) fatal("mkdir", path);
}

/* A fresh per-case folder DT_TEST_TMP_DIR/data.<name> (the same folder on every run). */
static void case_dir(char *out, size_t cap, const char *name)
{
    make_dir(DT_TEST_TMP_DIR);
    snprintf(out, cap, "%s/data.%s", DT_TEST_TMP_DIR, name);
    make_dir(out);
}

static void join(char *out, size_t cap, const char *dir, const char *file)
{
    snprintf(out, cap, "%s/%s", dir, file);
}

/* Write `n` bytes to `path`, gzip-compressed when `gz` (whatever the file name says). */
static void write_file(const char *path, const void *buf, size_t n, int gz)
{
    unlink(path);
    if (gz) {
        gzFile f = gzopen(path, "wb");
        if (!f) fatal("gzopen", path);
        if (n && gzwrite(f, buf, (unsigned)n) != (int)n) fatal("gzwrite", path);
        if (gzclose(f) != Z_OK) fatal("gzclose", path);
        return;
    }
    FILE *f = fopen(path, "wb");
    if (!f) fatal("fopen", path);
    if (n && fwrite(buf, 1, n, f) != n) fatal("fwrite", path);
    if (fclose(f) != 0) fatal("fclose", path);
}

/* Read a whole (small) file into a malloc'd buffer. */
static uint8_t *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) fatal("fopen", path);
    uint8_t *buf = malloc(1 << 20);
    *n = fread(buf, 1, 1 << 20, f);
    fclose(f);
    return buf;
}

/* An IDX image in memory: magic (0, 0, type, ndim), big-endian dims, then `payload` bytes.
 * Returns a malloc'd buffer of *n bytes. */
static uint8_t *idx_bytes(size_t *n, uint8_t type, int ndim, const uint32_t *dims,
                          const uint8_t *payload, size_t payload_n)
{
    *n = 4 + 4 * (size_t)ndim + payload_n;
    uint8_t *b = malloc(*n);
    b[0] = 0;
    b[1] = 0;
    b[2] = type;
    b[3] = (uint8_t)ndim;
    for (int i = 0; i < ndim; i++) {
        b[4 + 4 * i + 0] = (uint8_t)(dims[i] >> 24);
        b[4 + 4 * i + 1] = (uint8_t)(dims[i] >> 16);
        b[4 + 4 * i + 2] = (uint8_t)(dims[i] >> 8);
        b[4 + 4 * i + 3] = (uint8_t)dims[i];
    }
    if (payload_n) memcpy(b + 4 + 4 * ndim, payload, payload_n);
    return b;
}

/* Write an unsigned-byte IDX file with `payload_n` data bytes (which may disagree with dims,
 * to make truncated or oversized files). Byte k of the payload is (k * 7 + 3) mod 256. */
static void write_idx(const char *path, int ndim, const uint32_t *dims, size_t payload_n, int gz)
{
    uint8_t *payload = malloc(payload_n ? payload_n : 1);
    for (size_t k = 0; k < payload_n; k++) payload[k] = (uint8_t)(k * 7 + 3);
    size_t n = 0;
    uint8_t *b = idx_bytes(&n, 0x08, ndim, dims, payload, payload_n);
    write_file(path, b, n, gz);
    free(b);
    free(payload);
}

static int starts_with(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* dt_idx_read must fail with `want`, leave `out` empty, and say "PATH: ... words ...". */
static void expect_read_fails(const char *path, int ndim, enum dt_status want, const char *words)
{
    int before = dt_check_failures_;
    struct dt_idx idx = {0};
    struct dt_error err = {0};
    enum dt_status st = dt_idx_read(&idx, path, ndim, &err);
    CHECK_INT_EQ(st, want);
    CHECK_INT_EQ(err.status, want);
    CHECK(idx.data == NULL);
    CHECK_INT_EQ(idx.ndim, 0);
    CHECK(starts_with(err.msg, path));
    CHECK_CONTAINS(err.msg, words);
    if (dt_check_failures_ != before)
        fprintf(stderr, "  ^ while reading %s (expecting \"%s\")\n", path, words);
    dt_idx_free(&idx);
}

/* ---- IDX reader: valid files ----------------------------------------------------------- */

/* Read a valid file written with write_idx and compare every field and byte. */
static void check_valid_idx(const char *path, int ndim, const uint32_t *dims)
{
    size_t bytes = 1;
    for (int i = 0; i < ndim; i++) bytes *= dims[i];
    struct dt_idx idx = {0};
    struct dt_error err = {0};
    CHECK_INT_EQ(dt_idx_read(&idx, path, ndim, &err), DT_OK);
    if (err.msg[0]) fprintf(stderr, "unexpected error: %s\n", err.msg);
    CHECK_INT_EQ(idx.ndim, ndim);
    for (int i = 0; i < ndim; i++) CHECK_INT_EQ(idx.dims[i], dims[i]);
    CHECK(idx.data != NULL);
    size_t bad = 0;
    for (size_t k = 0; idx.data && k < bytes; k++) bad += idx.data[k] != (uint8_t)(k * 7 + 3);
    CHECK_INT_EQ(bad, 0);
    dt_idx_free(&idx);
    CHECK(idx.data == NULL);
}

DT_TEST(idx3_plain)
{
    char dir[1024], path[1200];
    case_dir(dir, sizeof dir, "idx3_plain");
    const uint32_t dims[3] = {5, 28, 28};
    join(path, sizeof path, dir, "images-idx3-ubyte");
    write_idx(path, 3, dims, 5 * 28 * 28, 0);
    check_valid_idx(path, 3, dims);
    /* Non-square and a single item are fine for the reader (the loader checks 28 x 28). */
    const uint32_t odd[3] = {1, 3, 7};
    write_idx(path, 3, odd, 21, 0);
    check_valid_idx(path, 3, odd);
}

DT_TEST(idx3_gzip)
{
    char dir[1024], path[1200];
    case_dir(dir, sizeof dir, "idx3_gzip");
    const uint32_t dims[3] = {4, 28, 28};
    /* gzip is detected from the content: once without and once with a .gz name. */
    join(path, sizeof path, dir, "images-idx3-ubyte");
    write_idx(path, 3, dims, 4 * 28 * 28, 1);
    check_valid_idx(path, 3, dims);
    join(path, sizeof path, dir, "images-idx3-ubyte.gz");
    write_idx(path, 3, dims, 4 * 28 * 28, 1);
    check_valid_idx(path, 3, dims);
}

DT_TEST(idx1_plain)
{
    char dir[1024], path[1200];
    case_dir(dir, sizeof dir, "idx1_plain");
    const uint32_t dims[1] = {300};
    join(path, sizeof path, dir, "labels-idx1-ubyte");
    write_idx(path, 1, dims, 300, 0);
    check_valid_idx(path, 1, dims);
}

DT_TEST(idx1_gzip)
{
    char dir[1024], path[1200];
    case_dir(dir, sizeof dir, "idx1_gzip");
    const uint32_t dims[1] = {300};
    join(path, sizeof path, dir, "labels-idx1-ubyte.gz");
    write_idx(path, 1, dims, 300, 1);
    check_valid_idx(path, 1, dims);
}

/* ---- IDX reader: malformed files ------------------------------------------------------- */

DT_TEST(truncated_payload)
{
    char dir[1024], path[1200];
    case_dir(dir, sizeof dir, "truncated_payload");
    const uint32_t labels[1] = {10};
    join(path, sizeof path, dir, "short-idx1-ubyte");
    write_idx(path, 1, labels, 7, 0);
    expect_read_fails(path, 1, DT_ERR_DATA,
                      "truncated: expected 10 bytes of data after the header, found 7");
    /* A complete, valid gzip stream whose content is short. */
    const uint32_t images[3] = {3, 28, 28};
    join(path, sizeof path, dir, "short-idx3-ubyte.gz");
    write_idx(path, 3, images, 2 * 28 * 28 + 5, 1);
    expect_read_fails(path, 3, DT_ERR_DATA,
                      "truncated: expected 2352 bytes of data after the header, found 1573");
    /* Header only. */
    join(path, sizeof path, dir, "header-only-idx3-ubyte");
    write_idx(path, 3, images, 0, 0);
    expect_read_fails(path, 3, DT_ERR_DATA,
                      "expected 2352 bytes of data after the header, found 0");
}

DT_TEST(truncated_header)
{
    char dir[1024], path[1200];
    case_dir(dir, sizeof dir, "truncated_header");
    const uint8_t two[2] = {0, 0};
    join(path, sizeof path, dir, "two-bytes");
    write_file(path, two, sizeof two, 0);
    expect_read_fails(path, 3, DT_ERR_DATA,
                      "truncated header: expected a 4-byte magic number, "
                      "found 2 bytes");
    /* Magic of an idx3 file and 5 of its 12 dimension bytes. */
    const uint8_t part[9] = {0, 0, 0x08, 3, 0, 0, 0, 20, 0};
    join(path, sizeof path, dir, "part-dims");
    write_file(path, part, sizeof part, 0);
    expect_read_fails(path, 3, DT_ERR_DATA,
                      "truncated header: expected 12 bytes of dimension sizes after the magic "
                      "number, found 5");
    join(path, sizeof path, dir, "part-dims.gz");
    write_file(path, part, sizeof part, 1);
    expect_read_fails(path, 3, DT_ERR_DATA, "truncated header: expected 12 bytes");
}

DT_TEST(empty_file)
{
    char dir[1024], path[1200];
    case_dir(dir, sizeof dir, "empty_file");
    join(path, sizeof path, dir, "empty");
    write_file(path, "", 0, 0);
    expect_read_fails(path, 1, DT_ERR_DATA, "empty file (no IDX header)");
    /* A valid gzip stream of nothing is just as empty. */
    join(path, sizeof path, dir, "empty.gz");
    write_file(path, "", 0, 1);
    expect_read_fails(path, 3, DT_ERR_DATA, "empty file (no IDX header)");
}

DT_TEST(bad_magic)
{
    char dir[1024], path[1200];
    case_dir(dir, sizeof dir, "bad_magic");
    const uint8_t text[12] = {0x12, 0x34, 0x08, 0x03, 0, 0, 0, 1, 0, 0, 0, 1};
    join(path, sizeof path, dir, "not-idx");
    write_file(path, text, sizeof text, 0);
    expect_read_fails(path, 3, DT_ERR_DATA, "bad magic 0x12340803: not an IDX file");
    /* Only the second byte wrong. */
    const uint8_t second[8] = {0x00, 0x01, 0x08, 0x01, 0, 0, 0, 0};
    write_file(path, second, sizeof second, 0);
    expect_read_fails(path, 1, DT_ERR_DATA, "bad magic 0x00010801: not an IDX file");
}

DT_TEST(bad_type)
{
    char dir[1024], path[1200];
    case_dir(dir, sizeof dir, "bad_type");
    const uint32_t dims[1] = {4};
    const uint8_t payload[16] = {0};
    size_t n = 0;
    uint8_t *b = idx_bytes(&n, 0x0D, 1, dims, payload, sizeof payload); /* 0x0D = float */
    join(path, sizeof path, dir, "float-idx1");
    write_file(path, b, n, 0);
    free(b);
    expect_read_fails(path, 1, DT_ERR_DATA, "unsupported IDX element type 0x0d");
    expect_read_fails(path, 1, DT_ERR_DATA, "only 0x08, unsigned byte");
}

DT_TEST(wrong_ndim)
{
    char dir[1024], path[1200];
    case_dir(dir, sizeof dir, "wrong_ndim");
    const uint32_t labels[1] = {6};
    join(path, sizeof path, dir, "labels-idx1-ubyte");
    write_idx(path, 1, labels, 6, 0);
    expect_read_fails(path, 3, DT_ERR_DATA,
                      "expected an idx3 (images) file but it has 1 dimension");
    const uint32_t images[3] = {2, 28, 28};
    join(path, sizeof path, dir, "images-idx3-ubyte.gz");
    write_idx(path, 3, images, 2 * 28 * 28, 1);
    expect_read_fails(path, 1, DT_ERR_DATA,
                      "expected an idx1 (labels) file but it has 3 dimensions");
    const uint32_t matrix[2] = {2, 2};
    join(path, sizeof path, dir, "matrix-idx2");
    write_idx(path, 2, matrix, 4, 0);
    expect_read_fails(path, 3, DT_ERR_DATA, "but it has 2 dimensions");
}

DT_TEST(zero_dim)
{
    char dir[1024], path[1200];
    case_dir(dir, sizeof dir, "zero_dim");
    const uint32_t images[3] = {2, 0, 28};
    join(path, sizeof path, dir, "zero-idx3");
    write_idx(path, 3, images, 0, 0);
    expect_read_fails(path, 3, DT_ERR_DATA, "dimension 1 is 0; each must be in 1..2147483647");
    const uint32_t labels[1] = {0};
    join(path, sizeof path, dir, "zero-idx1.gz");
    write_idx(path, 1, labels, 0, 1);
    expect_read_fails(path, 1, DT_ERR_DATA, "dimension 0 is 0");
}

DT_TEST(oversized)
{
    char dir[1024], path[1200];
    case_dir(dir, sizeof dir, "oversized");
    /* A dimension of 2^31 is over the limit. */
    const uint32_t big_dim[3] = {1, 28, 0x80000000u};
    join(path, sizeof path, dir, "big-dim");
    write_idx(path, 3, big_dim, 16, 0);
    expect_read_fails(path, 3, DT_ERR_DATA, "dimension 2 is 2147483648; each must be in 1..");
    /* Each dimension fine, but 2^33 bytes in all. */
    const uint32_t big_total[3] = {2, 65536, 65536};
    join(path, sizeof path, dir, "big-total");
    write_idx(path, 3, big_total, 16, 0);
    expect_read_fails(path, 3, DT_ERR_DATA,
                      "dimensions 2 x 65536 x 65536 describe more than 2^32 bytes of data");
    /* Exactly 2^32 bytes is allowed: this one fails only because the data is missing. */
    const uint32_t at_limit[3] = {1, 65536, 65536};
    join(path, sizeof path, dir, "at-limit");
    write_idx(path, 3, at_limit, 5, 0);
    expect_read_fails(path, 3, DT_ERR_DATA,
                      "truncated: expected 4294967296 bytes of data after the header, found 5");
}

DT_TEST(trailing_bytes)
{
    char dir[1024], path[1200];
    case_dir(dir, sizeof dir, "trailing_bytes");
    const uint32_t labels[1] = {10};
    join(path, sizeof path, dir, "long-idx1");
    write_idx(path, 1, labels, 13, 0);
    expect_read_fails(path, 1, DT_ERR_DATA, "3 unexpected trailing bytes");
    write_idx(path, 1, labels, 11, 0);
    expect_read_fails(path, 1, DT_ERR_DATA, "1 unexpected trailing byte after");
    const uint32_t images[3] = {1, 28, 28};
    join(path, sizeof path, dir, "long-idx3.gz");
    write_idx(path, 3, images, 28 * 28 + 40000, 1);
    expect_read_fails(path, 3, DT_ERR_DATA, "40000 unexpected trailing bytes");
}

DT_TEST(corrupt_gzip)
{
    char dir[1024], path[1200];
    case_dir(dir, sizeof dir, "corrupt_gzip");
    /* A valid 10-byte gzip header, then garbage: 0xff starts a block of the reserved type. */
    uint8_t garbage[42] = {0x1f, 0x8b, 0x08, 0x00, 0, 0, 0, 0, 0x00, 0x03};
    memset(garbage + 10, 0xff, sizeof garbage - 10);
    join(path, sizeof path, dir, "garbage.gz");
    write_file(path, garbage, sizeof garbage, 0);
    expect_read_fails(path, 3, DT_ERR_DATA, "corrupt gzip stream");

    /* A good .gz of a valid file, then damaged three ways. */
    const uint32_t images[3] = {3, 28, 28};
    join(path, sizeof path, dir, "good.gz");
    write_idx(path, 3, images, 3 * 28 * 28, 1);
    check_valid_idx(path, 3, images);
    size_t n = 0;
    uint8_t *gz = slurp(path, &n);
    CHECK(n > 40);

    join(path, sizeof path, dir, "half.gz"); /* cut in the middle of the deflate data */
    write_file(path, gz, n / 2, 0);
    expect_read_fails(path, 3, DT_ERR_DATA, "corrupt gzip stream");
    expect_read_fails(path, 3, DT_ERR_DATA, "cut short");

    join(path, sizeof path, dir, "no-trailer.gz"); /* all data, no CRC/length trailer */
    write_file(path, gz, n - 8, 0);
    expect_read_fails(path, 3, DT_ERR_DATA, "corrupt gzip stream");

    gz[n - 8] ^= 0x55; /* wrong CRC-32 */
    join(path, sizeof path, dir, "bad-crc.gz");
    write_file(path, gz, n, 0);
    expect_read_fails(path, 3, DT_ERR_DATA, "corrupt gzip stream (incorrect data check)");
    free(gz);
}

DT_TEST(missing_file)
{
    char dir[1024], path[1200];
    case_dir(dir, sizeof dir, "missing_file");
    join(path, sizeof path, dir, "no-such-idx3-ubyte");
    unlink(path);
    expect_read_fails(path, 3, DT_ERR_IO, "cannot open: No such file or directory");
    /* A folder (any file that is not a regular one) is refused before a read. */
    expect_read_fails(dir, 1, DT_ERR_IO, "not a regular file but a folder");
    /* err may be NULL. */
    struct dt_idx idx = {0};
    CHECK_INT_EQ(dt_idx_read(&idx, path, 1, NULL), DT_ERR_IO);
    CHECK(idx.data == NULL);
}

DT_TEST(free_safe)
{
    struct dt_idx idx = {0};
    dt_idx_free(&idx);
    dt_idx_free(&idx);
    dt_idx_free(NULL);
    struct dt_dataset ds = {0};
    dt_dataset_free(&ds);
    dt_dataset_free(&ds);
    dt_dataset_free(NULL);

    char dir[1024], path[1200];
    case_dir(dir, sizeof dir, "free_safe");
    const uint32_t labels[1] = {5};
    join(path, sizeof path, dir, "labels-idx1-ubyte");
    write_idx(path, 1, labels, 5, 0);
    struct dt_error err = {0};
    CHECK_INT_EQ(dt_idx_read(&idx, path, 1, &err), DT_OK);
    CHECK(idx.data != NULL);
    dt_idx_free(&idx);
    CHECK(idx.data == NULL);
    CHECK_INT_EQ(idx.ndim, 0);
    CHECK_INT_EQ(idx.dims[0], 0);
    dt_idx_free(&idx);
}

/* ---- Fashion-MNIST loader on synthetic folders ----------------------------------------- */

enum { F_TRAIN_IMAGES, F_TRAIN_LABELS, F_TEST_IMAGES, F_TEST_LABELS, F_COUNT };
static const char *const fmnist_names[F_COUNT] = {
    "train-images-idx3-ubyte",
    "train-labels-idx1-ubyte",
    "t10k-images-idx3-ubyte",
    "t10k-labels-idx1-ubyte",
};

/* How to build a synthetic Fashion-MNIST folder; the defaults make a valid one. */
struct fake_fmnist {
    uint32_t n_train, n_test;
    unsigned gz_mask;      /* bit i: write file i gzip-compressed with a ".gz" name */
    int skip;              /* file index to leave out, -1 for none */
    int train_label_extra; /* labels written beyond (or, negative, short of) n_train */
    int bad_label_at;      /* train label index set to 10, -1 for none */
    uint32_t cols;         /* image columns (28) */
};

static struct fake_fmnist fake_default(void)
{
    struct fake_fmnist f = {
        .n_train = 20,
        .n_test = 10,
        .gz_mask = (1u << F_TRAIN_IMAGES) | (1u << F_TEST_LABELS), /* a mix of both */
        .skip = -1,
        .train_label_extra = 0,
        .bad_label_at = -1,
        .cols = 28,
    };
    return f;
}

static uint8_t fake_pixel(int64_t i, int64_t j) /* image i, pixel j */
{
    return (uint8_t)((i * 31 + j) % 256);
}

static uint8_t fake_label(int test, int64_t i)
{
    return (uint8_t)(test ? (i * 7 + 1) % 10 : (i * 3) % 10);
}

static void write_fake_images(const char *path, uint32_t n, uint32_t cols, int gz)
{
    size_t per_image = (size_t)28 * cols, bytes = n * per_image, len = 0;
    uint8_t *px = malloc(bytes);
    for (size_t k = 0; k < bytes; k++)
        px[k] = fake_pixel((int64_t)(k / per_image), (int64_t)(k % per_image));
    const uint32_t dims[3] = {n, 28, cols};
    uint8_t *b = idx_bytes(&len, 0x08, 3, dims, px, bytes);
    write_file(path, b, len, gz);
    free(b);
    free(px);
}

static void write_fake_labels(const char *path, int test, uint32_t n, int bad_at, int gz)
{
    size_t len = 0;
    uint8_t *y = malloc(n ? n : 1);
    for (uint32_t i = 0; i < n; i++) y[i] = fake_label(test, i);
    if (bad_at >= 0) y[bad_at] = 10;
    const uint32_t dims[1] = {n};
    uint8_t *b = idx_bytes(&len, 0x08, 1, dims, y, n);
    write_file(path, b, len, gz);
    free(b);
    free(y);
}

/* Fill `dir` with the four files described by `f` (removing stale plain/.gz copies). */
static void write_fake_fmnist(const char *dir, const struct fake_fmnist *f)
{
    char path[1200];
    for (int i = 0; i < F_COUNT; i++) {
        char name[64];
        join(path, sizeof path, dir, fmnist_names[i]);
        unlink(path);
        snprintf(name, sizeof name, "%s.gz", fmnist_names[i]);
        join(path, sizeof path, dir, name);
        unlink(path);
        if (i == f->skip) continue;
        int gz = (f->gz_mask >> i) & 1;
        snprintf(name, sizeof name, "%s%s", fmnist_names[i], gz ? ".gz" : "");
        join(path, sizeof path, dir, name);
        switch (i) {
        case F_TRAIN_IMAGES: write_fake_images(path, f->n_train, f->cols, gz); break;
        case F_TEST_IMAGES: write_fake_images(path, f->n_test, 28, gz); break;
        case F_TRAIN_LABELS:
            write_fake_labels(path, 0, (uint32_t)((int)f->n_train + f->train_label_extra),
                              f->bad_label_at, gz);
            break;
        default: write_fake_labels(path, 1, f->n_test, -1, gz); break;
        }
    }
}

/* Check a loaded split against the synthetic content: n examples, pixels exactly p/255.0f. */
static void check_fake_split(const struct dt_split *s, int test, int64_t n)
{
    CHECK_INT_EQ(s->n, n);
    CHECK_INT_EQ(s->dim, 784);
    CHECK_INT_EQ(s->n_classes, 10);
    CHECK(s->x != NULL && s->y != NULL);
    if (!s->x || !s->y || s->n != n) return;
    int64_t bad_x = 0, bad_y = 0;
    for (int64_t i = 0; i < n; i++) {
        for (int64_t j = 0; j < 784; j++)
            bad_x += s->x[i * 784 + j] != (float)fake_pixel(i, j) / 255.0f;
        bad_y += s->y[i] != fake_label(test, i);
    }
    CHECK_INT_EQ(bad_x, 0);
    CHECK_INT_EQ(bad_y, 0);
}

/* Load from `dir` (or the environment when dir is "") expecting failure; check the words. */
static void expect_load_fails(const char *dir, enum dt_status want, const char *words)
{
    int before = dt_check_failures_;
    struct dt_dataset ds;
    memset(&ds, 0x5a, sizeof ds); /* the loader must not rely on a zeroed struct */
    struct dt_error err = {0};
    CHECK_INT_EQ(dt_dataset_load_fashion_mnist(&ds, dir, 0, 0, &err), want);
    CHECK_INT_EQ(err.status, want);
    CHECK(ds.train.x == NULL && ds.train.y == NULL && ds.test.x == NULL && ds.test.y == NULL);
    CHECK_CONTAINS(err.msg, words);
    if (dt_check_failures_ != before)
        fprintf(stderr, "  ^ while loading %s (expecting \"%s\")\n", dir, words);
    dt_dataset_free(&ds);
}

DT_TEST(dataset_load)
{
    char dir[1024];
    case_dir(dir, sizeof dir, "dataset_load");
    struct fake_fmnist f = fake_default();
    write_fake_fmnist(dir, &f);
    struct dt_dataset ds = {0};
    struct dt_error err = {0};
    CHECK_INT_EQ(dt_dataset_load_fashion_mnist(&ds, dir, 0, 0, &err), DT_OK);
    if (err.msg[0]) fprintf(stderr, "unexpected error: %s\n", err.msg);
    CHECK_STR_EQ(ds.dir, dir);
    check_fake_split(&ds.train, 0, 20);
    check_fake_split(&ds.test, 1, 10);
    if (ds.train.x) {
        /* Image 0 holds pixel value j at position j for j < 256. */
        CHECK(ds.train.x[0] == 0.0f);
        CHECK(ds.train.x[255] == 1.0f);
        CHECK(ds.train.x[51] == 51 / 255.0f);
        CHECK_NEAR(ds.train.x[51], 0.2, 1e-7);
    }
    dt_dataset_free(&ds);
    CHECK(ds.train.x == NULL && ds.test.y == NULL);
    dt_dataset_free(&ds);

    /* Every file plain, then every file gzipped, loads the same. */
    f.gz_mask = 0;
    write_fake_fmnist(dir, &f);
    CHECK_INT_EQ(dt_dataset_load_fashion_mnist(&ds, dir, 0, 0, &err), DT_OK);
    check_fake_split(&ds.train, 0, 20);
    dt_dataset_free(&ds);
    f.gz_mask = 0xf;
    write_fake_fmnist(dir, &f);
    CHECK_INT_EQ(dt_dataset_load_fashion_mnist(&ds, dir, 0, 0, &err), DT_OK);
    check_fake_split(&ds.test, 1, 10);
    dt_dataset_free(&ds);
}

DT_TEST(dataset_limits)
{
    char dir[1024];
    case_dir(dir, sizeof dir, "dataset_limits");
    struct fake_fmnist f = fake_default();
    write_fake_fmnist(dir, &f);
    struct dt_dataset ds = {0};
    struct dt_error err = {0};
    /* First 7 of 20 train; a test limit above 10 keeps all 10. */
    CHECK_INT_EQ(dt_dataset_load_fashion_mnist(&ds, dir, 7, 1000, &err), DT_OK);
    check_fake_split(&ds.train, 0, 7);
    check_fake_split(&ds.test, 1, 10);
    dt_dataset_free(&ds);
    /* Exactly n, and 1. */
    CHECK_INT_EQ(dt_dataset_load_fashion_mnist(&ds, dir, 20, 1, &err), DT_OK);
    check_fake_split(&ds.train, 0, 20);
    check_fake_split(&ds.test, 1, 1);
    dt_dataset_free(&ds);
}

DT_TEST(dataset_count_mismatch)
{
    char dir[1024], img[1200], lbl[1200];
    case_dir(dir, sizeof dir, "dataset_count_mismatch");
    struct fake_fmnist f = fake_default();
    f.train_label_extra = -1;
    write_fake_fmnist(dir, &f);
    join(img, sizeof img, dir, "train-images-idx3-ubyte.gz");
    join(lbl, sizeof lbl, dir, "train-labels-idx1-ubyte");
    char want[3000];
    snprintf(want, sizeof want, "%s: has 19 labels but %s has 20 images", lbl, img);
    expect_load_fails(dir, DT_ERR_DATA, want);
    expect_load_fails(dir, DT_ERR_DATA, "the label count must match the image count");
}

DT_TEST(dataset_bad_label)
{
    char dir[1024], lbl[1200];
    case_dir(dir, sizeof dir, "dataset_bad_label");
    struct fake_fmnist f = fake_default();
    f.bad_label_at = 7;
    write_fake_fmnist(dir, &f);
    join(lbl, sizeof lbl, dir, "train-labels-idx1-ubyte");
    char want[2000];
    snprintf(want, sizeof want, "%s: label at index 7 is 10; Fashion-MNIST labels are 0..9", lbl);
    expect_load_fails(dir, DT_ERR_DATA, want);
}

DT_TEST(dataset_bad_shape)
{
    char dir[1024], img[1200];
    case_dir(dir, sizeof dir, "dataset_bad_shape");
    struct fake_fmnist f = fake_default();
    f.cols = 27;
    write_fake_fmnist(dir, &f);
    join(img, sizeof img, dir, "train-images-idx3-ubyte.gz");
    char want[2000];
    snprintf(want, sizeof want, "%s: images are 28 x 27 (rows x cols)", img);
    expect_load_fails(dir, DT_ERR_DATA, want);
    expect_load_fails(dir, DT_ERR_DATA, "rows and cols both 28");
    /* Labels where images belong are the reader's error, naming the file. */
    f.cols = 28;
    write_fake_fmnist(dir, &f);
    join(img, sizeof img, dir, "train-images-idx3-ubyte.gz");
    write_fake_labels(img, 0, 20, -1, 1);
    expect_load_fails(dir, DT_ERR_DATA, img);
    expect_load_fails(dir, DT_ERR_DATA, "expected an idx3 (images) file but it has 1 dimension");
}

DT_TEST(dataset_missing_file)
{
    char dir[1024];
    case_dir(dir, sizeof dir, "dataset_missing_file");
    struct fake_fmnist f = fake_default();
    f.skip = F_TEST_LABELS;
    write_fake_fmnist(dir, &f);
    unsetenv("DETRAIN_DATA");
    expect_load_fails(dir, DT_ERR_IO, dir);
    expect_load_fails(dir, DT_ERR_IO, "missing t10k-labels-idx1-ubyte (");
    expect_load_fails(dir, DT_ERR_IO, "dataset.path");
    expect_load_fails(dir, DT_ERR_IO,
                      "install it with: apt-get install dataset-fashion-mnist, or set "
                      "dataset.path / $DETRAIN_DATA");

    /* A folder that does not exist: all four names, and no fallback to $DETRAIN_DATA or the
     * default even when those hold the data. */
    char gone[1200];
    join(gone, sizeof gone, dir, "no-such-folder");
    rmdir(gone);
    char good[1024];
    case_dir(good, sizeof good, "dataset_missing_file_good");
    struct fake_fmnist ok = fake_default();
    write_fake_fmnist(good, &ok);
    setenv("DETRAIN_DATA", good, 1);
    expect_load_fails(gone, DT_ERR_IO,
                      "missing train-images-idx3-ubyte, train-labels-idx1-ubyte, "
                      "t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte");
    expect_load_fails(gone, DT_ERR_IO, "the folder does not exist");
    expect_load_fails(gone, DT_ERR_IO, "apt-get install dataset-fashion-mnist");
    unsetenv("DETRAIN_DATA");
}

DT_TEST(dataset_env)
{
    char dir[1024], empty[1024];
    case_dir(dir, sizeof dir, "dataset_env");
    struct fake_fmnist f = fake_default();
    write_fake_fmnist(dir, &f);
    case_dir(empty, sizeof empty, "dataset_env_empty");
    struct fake_fmnist none = fake_default();
    none.skip = F_TRAIN_IMAGES;
    write_fake_fmnist(empty, &none);

    /* path "" -> $DETRAIN_DATA */
    setenv("DETRAIN_DATA", dir, 1);
    struct dt_dataset ds = {0};
    struct dt_error err = {0};
    CHECK_INT_EQ(dt_dataset_load_fashion_mnist(&ds, "", 3, 2, &err), DT_OK);
    if (err.msg[0]) fprintf(stderr, "unexpected error: %s\n", err.msg);
    CHECK_STR_EQ(ds.dir, dir);
    check_fake_split(&ds.train, 0, 3);
    check_fake_split(&ds.test, 1, 2);
    dt_dataset_free(&ds);

    /* An explicit path wins over $DETRAIN_DATA. */
    setenv("DETRAIN_DATA", empty, 1);
    CHECK_INT_EQ(dt_dataset_load_fashion_mnist(&ds, dir, 0, 0, &err), DT_OK);
    CHECK_STR_EQ(ds.dir, dir);
    dt_dataset_free(&ds);

    /* $DETRAIN_DATA naming a folder without the files: an error that says so. */
    expect_load_fails("", DT_ERR_IO, empty);
    expect_load_fails("", DT_ERR_IO, "missing train-images-idx3-ubyte (");
    expect_load_fails("", DT_ERR_IO, "folder set by $DETRAIN_DATA");
    unsetenv("DETRAIN_DATA");
}

/* ---- the real data set ----------------------------------------------------------------- */

DT_TEST(dataset_real)
{
    struct stat sb;
    if (stat(FMNIST_DEFAULT_DIR, &sb) != 0) DT_SKIP(FMNIST_DEFAULT_DIR " is not installed");
    /* Path "" and an empty $DETRAIN_DATA fall through to the default folder. */
    setenv("DETRAIN_DATA", "", 1);
    struct dt_dataset ds = {0};
    struct dt_error err = {0};
    CHECK_INT_EQ(dt_dataset_load_fashion_mnist(&ds, "", 0, 0, &err), DT_OK);
    if (err.msg[0]) fprintf(stderr, "unexpected error: %s\n", err.msg);
    unsetenv("DETRAIN_DATA");
    CHECK_STR_EQ(ds.dir, FMNIST_DEFAULT_DIR);
    CHECK_INT_EQ(ds.train.n, 60000);
    CHECK_INT_EQ(ds.test.n, 10000);
    CHECK_INT_EQ(ds.train.dim, 784);
    CHECK_INT_EQ(ds.test.dim, 784);
    CHECK_INT_EQ(ds.train.n_classes, 10);
    if (ds.train.n != 60000 || ds.test.n != 10000) {
        dt_dataset_free(&ds);
        return;
    }
    /* Fashion-MNIST is balanced: 6000 / 1000 per class; its first examples are class 9. */
    int64_t train_count[10] = {0}, test_count[10] = {0}, bad = 0;
    for (int64_t i = 0; i < 60000; i++) {
        if (ds.train.y[i] < 10) train_count[ds.train.y[i]]++;
        else bad++;
    }
    for (int64_t i = 0; i < 10000; i++) {
        if (ds.test.y[i] < 10) test_count[ds.test.y[i]]++;
        else bad++;
    }
    CHECK_INT_EQ(bad, 0);
    for (int c = 0; c < 10; c++) {
        CHECK_INT_EQ(train_count[c], 6000);
        CHECK_INT_EQ(test_count[c], 1000);
    }
    CHECK_INT_EQ(ds.train.y[0], 9);
    CHECK_INT_EQ(ds.test.y[0], 9);
    float lo = 1.0f, hi = 0.0f;
    for (int64_t k = 0; k < 60000 * 784; k++) {
        if (ds.train.x[k] < lo) lo = ds.train.x[k];
        if (ds.train.x[k] > hi) hi = ds.train.x[k];
    }
    CHECK(lo == 0.0f);
    CHECK(hi == 1.0f);
    dt_dataset_free(&ds);

    /* Limits on the real files. */
    CHECK_INT_EQ(dt_dataset_load_fashion_mnist(&ds, FMNIST_DEFAULT_DIR, 100, 50, &err), DT_OK);
    CHECK_INT_EQ(ds.train.n, 100);
    CHECK_INT_EQ(ds.test.n, 50);
    dt_dataset_free(&ds);
}

/* ---- batches gathered from the resident set (harness/run/batches.h, nets/gather_hd.h) -------- */

/* Every byte's value is the correctly rounded quotient byte / 255 -- what IEEE division
 * gives on the host and on a CUDA device without fast-math -- checked exactly: f * 255 is
 * exact in double (24 + 8 bits), so |f * 255 - byte| compares f with its two neighbours.
 * Negative control: byte * (1 / 255), the "same" formula, differs for some byte. */
DT_TEST(pixel_value_quotient)
{
    int differ = 0;
    for (int b = 0; b < 256; b++) {
        const float f = dt_pixel_value((uint8_t)b);
        const double e = fabs((double)f * 255.0 - b);
        CHECK(e <= fabs((double)nextafterf(f, 2.0f) * 255.0 - b));
        CHECK(e <= fabs((double)nextafterf(f, -1.0f) * 255.0 - b));
        CHECK(f == ((float)b / 255.0f));
        differ += (float)b * (1.0f / 255.0f) != f;
    }
    CHECK(differ > 0);
}

/* Host emulation of the device gather (dt_gather_elem per element, from the pixel bytes
 * and from the float values) against the host batch rows, element by element, on batches
 * that cross an epoch; the labels too. */
DT_TEST(gather_emulation)
{
    char dir[1024];
    case_dir(dir, sizeof dir, "gather_emulation");
    struct fake_fmnist f = fake_default();
    write_fake_fmnist(dir, &f);
    struct dt_dataset ds = {0};
    struct dt_error err = {0};
    CHECK_INT_EQ(dt_dataset_load_fashion_mnist(&ds, dir, 0, 0, &err), DT_OK);
    const struct dt_split *sp = &ds.train;
    CHECK(sp->pixels != NULL);
    const int64_t B = 13, dim = sp->dim; /* 20 examples: step 1 crosses into epoch 1 */
    struct dt_batch_stream host;
    dt_batch_stream_init(&host, sp, NULL, B, 7, 3);
    int64_t idx[13], perm[20], epoch = -1;
    for (int64_t s = 0; s < 4; s++) {
        const struct dt_batch b = dt_batch_stream_at(&host, s);
        dt_batch_indices(idx, sp->n, s, B, 7, 3, perm, &epoch);
        int64_t bad = 0;
        for (int64_t e = 0; e < B * dim; e++) {
            const float from_bytes = dt_gather_elem(sp->pixels, NULL, idx, dim, dim, e);
            const float from_values = dt_gather_elem(NULL, sp->x, idx, dim, dim, e);
            bad += memcmp(&from_bytes, &b.x[e], sizeof(float)) != 0;
            bad += memcmp(&from_values, &b.x[e], sizeof(float)) != 0;
        }
        CHECK_INT_EQ(bad, 0);
        for (int64_t r = 0; r < B; r++) CHECK_INT_EQ(b.y[r], sp->y[idx[r]]);
    }
    dt_batch_stream_free(&host);
    dt_dataset_free(&ds);
}

/* The CPU backend's resident set gives the host batch's bits, from the values (borrowed)
 * or from the bytes alone (converted once); a dropped row or a wrong conversion fails. */
DT_TEST(resident_batches_cpu)
{
    char dir[1024];
    case_dir(dir, sizeof dir, "resident_batches_cpu");
    struct fake_fmnist f = fake_default();
    write_fake_fmnist(dir, &f);
    struct dt_dataset ds = {0};
    struct dt_error err = {0};
    CHECK_INT_EQ(dt_dataset_load_fashion_mnist(&ds, dir, 0, 0, &err), DT_OK);
    struct dt_backend *be = NULL;
    const struct dt_backend_options opt = {DT_BACKEND_CPU, 1, 0};
    CHECK_INT_EQ(dt_backend_create(&be, &opt, &err), DT_OK);
    const struct dt_split *sp = &ds.train;
    const int64_t B = 9, dim = sp->dim;
    const struct dt_resident_src from_bytes = {sp->n, dim, sp->pixels, NULL, sp->y, dim};
    struct dt_resident *sets[2] = {dt_batch_resident(be, sp),
                                   dt_backend_resident_create(be, &from_bytes)};
    float *x = dt_backend_alloc(be, (size_t)(B * dim) * sizeof(float));
    int32_t *lab = dt_backend_alloc(be, (size_t)B * sizeof(int32_t));
    for (int k = 0; k < 2; k++) {
        CHECK(sets[k] != NULL);
        struct dt_batch_stream host, res;
        dt_batch_stream_init(&host, sp, NULL, B, 11, 0);
        dt_batch_stream_init(&res, sp, sets[k], B, 11, 0);
        for (int64_t s = 0; s < 5; s++) {
            const struct dt_batch h = dt_batch_stream_at(&host, s);
            const struct dt_batch r = dt_batch_stream_at(&res, s);
            CHECK(r.set == sets[k] && r.x == NULL);
            for (int64_t e = 0; e < B * dim; e++) x[e] = NAN;
            dt_backend_gather(be, x, lab, r.set, r.idx, B);
            CHECK(memcmp(x, h.x, (size_t)(B * dim) * sizeof(float)) == 0);
            for (int64_t i = 0; i < B; i++) CHECK_INT_EQ(lab[i], h.y[i]);
        }
        dt_batch_stream_free(&host);
        dt_batch_stream_free(&res);
        dt_backend_resident_free(be, sets[k]);
    }
    dt_backend_free(be, x);
    dt_backend_free(be, lab);
    dt_backend_destroy(be);
    dt_dataset_free(&ds);
}

DT_TEST_MAIN(DT_CASE(idx3_plain), DT_CASE(idx3_gzip), DT_CASE(idx1_plain), DT_CASE(idx1_gzip),
             DT_CASE(truncated_payload), DT_CASE(truncated_header), DT_CASE(empty_file),
             DT_CASE(bad_magic), DT_CASE(bad_type), DT_CASE(wrong_ndim), DT_CASE(zero_dim),
             DT_CASE(oversized), DT_CASE(trailing_bytes), DT_CASE(corrupt_gzip),
             DT_CASE(missing_file), DT_CASE(free_safe), DT_CASE(dataset_load),
             DT_CASE(dataset_limits), DT_CASE(dataset_count_mismatch), DT_CASE(dataset_bad_label),
             DT_CASE(dataset_bad_shape), DT_CASE(dataset_missing_file), DT_CASE(dataset_env),
             DT_CASE(dataset_real), DT_CASE(pixel_value_quotient), DT_CASE(gather_emulation),
             DT_CASE(resident_batches_cpu))
