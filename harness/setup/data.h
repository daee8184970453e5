/* Datasets: IDX / IDX.gz reader and the Fashion-MNIST loader.
 * Data path (docs/DESIGN.md): harness/data -> batches for harness/train. The reader checks
 * magic, dimensions, sizes and truncation and names the file and the problem. */
#ifndef DT_DATA_H
#define DT_DATA_H

#include <stdint.h>

#include "core/status.h"

/* An IDX file's content: idx3 (N x rows x cols unsigned bytes) or idx1 (N bytes). */
struct dt_idx {
    int ndim;        /* 1 or 3 */
    int64_t dims[3]; /* dims[0] = N */
    uint8_t *data;   /* prod(dims) bytes, owned */
};

/* Read an IDX file, gzip-compressed or not (detected from the content, not the name).
 * `expect_ndim` is 1 or 3; anything else in the header is an error. Limits: each
 * dimension in 1..2^31-1 and the payload at most 2^32 bytes. Fails with DT_ERR_IO (cannot
 * open/read, naming the path and errno text) or DT_ERR_DATA (bad magic, wrong type byte,
 * wrong number of dimensions, zero/oversized dimension, truncated payload, trailing bytes,
 * corrupt gzip), always naming the file. */
enum dt_status dt_idx_read(struct dt_idx *out, const char *path, int expect_ndim,
                           struct dt_error *err);
void dt_idx_free(struct dt_idx *idx);

/* Fashion-MNIST's shape: SIDE x SIDE grey images of CLASSES classes. */
#define DT_FASHION_MNIST_SIDE 28
#define DT_FASHION_MNIST_CLASSES 10

/* One split of a dataset: images (pixels scaled to [0, 1], one label each) or text
 * windows (dataset.name: text: each example is context + 1 consecutive bytes, as their
 * values 0..255; the label is the window's last byte). Example i's features are
 * x[i * stride .. i * stride + dim): stride = dim for images and materialised windows,
 * 1 for the training windows of a text, which overlap (one at every byte offset). */
struct dt_split {
    int64_t n;       /* examples */
    int64_t dim;     /* features per example (rows * cols; context + 1 bytes) */
    int64_t stride;  /* floats from one example's first feature to the next's */
    float *x;        /* (n - 1) * stride + dim floats, owned: dt_pixel_value of each byte, or
                        a text's byte values */
    uint8_t *pixels; /* n x dim bytes as read (owned), or NULL */
    uint8_t *y;      /* n labels, owned */
    int n_classes;   /* 10; 256 for text (every byte value) */
};

struct dt_dataset {
    char dir[1024]; /* folder the files came from */
    struct dt_split train, test;
};

/* Find and load Fashion-MNIST. Search order: `path` if non-empty (a folder), else
 * $DETRAIN_DATA if set, else /usr/share/datasets/fashion-mnist (Debian package
 * dataset-fashion-mnist). In the folder, each of train-images-idx3-ubyte,
 * train-labels-idx1-ubyte, t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte is taken with
 * or without a ".gz" suffix. Checks that image and label counts agree and labels are
 * < 10. `train_limit`/`test_limit` > 0 keep only the first N examples. When nothing is
 * found the error says where it looked and how to install the package. */
enum dt_status dt_dataset_load_fashion_mnist(struct dt_dataset *out, const char *path,
                                             int64_t train_limit, int64_t test_limit,
                                             struct dt_error *err);
void dt_dataset_free(struct dt_dataset *ds);

/* A text corpus for language models (dataset.name: text). `path`: a file, or a folder
 * whose regular files are read in name order (byte order of the names), leaving out those
 * ending in .dat or .u8 (the fortune index files) and hidden ones; "" = the default corpus,
 * Debian's `fortunes` package (DT_TEXT_DEFAULT_DIR). The bytes are concatenated; the last
 * 10% (rounded down) are the validation split, the rest the training split.
 * train: one window of context + 1 bytes at every offset (n = bytes - context, stride 1;
 *   train_limit > 0 keeps the first N offsets).
 * test: the fixed validation windows, at offsets 0, context, 2 context, ... (every byte
 *   after the first predicted once; materialised, stride = dim; test_limit > 0: first N).
 * Refused before anything is written, naming the path (DT_ERR_IO: missing, unreadable, a
 * folder with no readable file; DT_ERR_DATA: empty, or a split shorter than context + 1
 * bytes). */
#define DT_TEXT_DEFAULT_DIR "/usr/share/games/fortunes"
#define DT_TEXT_CLASSES 256
enum dt_status dt_dataset_load_text(struct dt_dataset *out, const char *path, int64_t context,
                                    int64_t train_limit, int64_t test_limit, struct dt_error *err);
/* The bytes a text corpus holds (a file's size, or the sum over the files of a folder that
 * dt_dataset_load_text reads), from stat alone; -1 when it cannot be told. The memory check
 * counts them before anything is read. */
int64_t dt_text_corpus_bytes(const char *path);
/* The first floats of example i of a split. */
static inline const float *dt_split_row(const struct dt_split *s, int64_t i)
{
    return s->x + i * s->stride;
}

#endif
