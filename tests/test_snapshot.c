/* Weight snapshots (harness/record/snapshot.c) and `detrain compare` over replica and experiment
 * folders (harness/analyze/compare.c): round trip, digest against harness/hash, every read error
 * with its message, distances against hand-computed values, listing, atomic writes, and
 * compare on fabricated folders (identical, diverged, corrupted, experiment folders). */
#include <dirent.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "check.h"
#include "core/util.h"
#include "harness/analyze/compare.h"
#include "harness/setup/config.h"
#include "harness/record/hash.h"
#include "harness/record/layout.h"
#include "harness/record/snapshot.h"
#include "harness/record/trace.h"
#include "run_helper.h"

#define TMP DT_TEST_TMP_DIR "/snapshot."

/* An empty folder of this name under the test tmp folder. */
static void fresh_dir(char *buf, size_t size, const char *name)
{
    snprintf(buf, size, TMP "%s", name);
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", buf);
    CHECK_INT_EQ(system(cmd), 0);
    CHECK_INT_EQ(dt_mkdir_p(buf, NULL), DT_OK);
}

static void write_bytes(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (!f) return;
    CHECK_INT_EQ(fwrite(data, 1, n, f), n);
    fclose(f);
}

/* A three-tensor model with values a float reader could lose: -0.0, a NaN with a payload,
 * infinity, a subnormal. */
static const char *const NAMES[3] = {"fc0.weight", "fc0.bias",
                                     "a_name_of_exactly_63_bytes_"
                                     "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"};
static const int64_t COUNTS[3] = {6, 2, 3};
static float T0[6], T1[2], T2[3];
static const float *const DATA[3] = {T0, T1, T2};
#define SNAP_BYTES (24 + 3 * 72 + 4 * 11)

static void fill_model(void)
{
    uint32_t nan_bits = 0x7fc01234u;
    float nan;
    memcpy(&nan, &nan_bits, 4);
    const float t0[6] = {1.5f, -0.0f, nan, INFINITY, 0x1p-140f, -3.25f};
    const float t1[2] = {0.1f, -0.2f};
    const float t2[3] = {1e30f, -1e-30f, 7.0f};
    memcpy(T0, t0, sizeof t0);
    memcpy(T1, t1, sizeof t1);
    memcpy(T2, t2, sizeof t2);
}

/* A good snapshot file of the model above at step 123; returns its path. */
static const char *good_snapshot(char *dir, size_t size, const char *name)
{
    static char path[2048];
    fill_model();
    fresh_dir(dir, size, name);
    snprintf(path, sizeof path, "%s/good.bin", dir);
    struct dt_error err = {0};
    CHECK_INT_EQ(dt_snapshot_write(path, 123, 3, NAMES, COUNTS, DATA, &err), DT_OK);
    return path;
}

DT_TEST(round_trip)
{
    CHECK_INT_EQ(strlen(NAMES[2]), 63); /* the longest name the format holds */
    char dir[1024];
    const char *path = good_snapshot(dir, sizeof dir, "round_trip");
    size_t len = 0;
    unsigned char *raw = (unsigned char *)dt_read_file(path, &len);
    CHECK_INT_EQ(len, SNAP_BYTES);
    /* The layout snapshot.h documents, byte by byte where it is fixed. */
    CHECK(raw && memcmp(raw, "DTSNAP01", 8) == 0);
    int64_t step;
    int32_t n, reserved;
    int64_t count1;
    memcpy(&step, raw + 8, 8);
    memcpy(&n, raw + 16, 4);
    memcpy(&reserved, raw + 20, 4);
    memcpy(&count1, raw + 24 + 72 + 64, 8);
    CHECK_INT_EQ(step, 123);
    CHECK_INT_EQ(n, 3);
    CHECK_INT_EQ(reserved, 0);
    CHECK_STR_EQ((const char *)raw + 24 + 72, "fc0.bias");
    CHECK_INT_EQ(count1, 2);
    CHECK(memcmp(raw + 24 + 3 * 72, T0, sizeof T0) == 0);
    free(raw);

    struct dt_snapshot s;
    struct dt_error err = {0};
    CHECK_INT_EQ(dt_snapshot_read(&s, path, &err), DT_OK);
    CHECK_INT_EQ(s.step, 123);
    CHECK_INT_EQ(s.n_tensors, 3);
    CHECK_INT_EQ(s.total, 11);
    for (int i = 0; i < 3 && s.n_tensors == 3; i++) {
        CHECK_STR_EQ(s.names[i], NAMES[i]);
        CHECK_INT_EQ(s.counts[i], COUNTS[i]);
        /* bit for bit: -0.0 and the NaN payload survive */
        CHECK(memcmp(s.data + s.offsets[i], DATA[i], (size_t)COUNTS[i] * 4) == 0);
    }
    CHECK(s.n_tensors == 3 && s.offsets[0] == 0 && s.offsets[1] == 6 && s.offsets[2] == 8);
    dt_snapshot_free(&s);
    CHECK(s.data == NULL && s.names == NULL && s.n_tensors == 0);

    /* Step 0 and one tensor of one value: the smallest snapshot. */
    char p2[2048];
    snprintf(p2, sizeof p2, "%s/small.bin", dir);
    const char *one_name[1] = {"w"};
    const int64_t one_count[1] = {1};
    const float one_value[1] = {42.0f};
    const float *const one_data[1] = {one_value};
    CHECK_INT_EQ(dt_snapshot_write(p2, 0, 1, one_name, one_count, one_data, &err), DT_OK);
    CHECK_INT_EQ(dt_snapshot_read(&s, p2, &err), DT_OK);
    CHECK(s.step == 0 && s.n_tensors == 1 && s.total == 1 && s.data && s.data[0] == 42.0f);
    dt_snapshot_free(&s);
}

/* The writer refuses what the format cannot hold. */
DT_TEST(write_rejects_bad_input)
{
    char dir[1024], path[2048];
    fill_model();
    fresh_dir(dir, sizeof dir, "write_rejects");
    snprintf(path, sizeof path, "%s/x.bin", dir);
    struct dt_error err = {0};
    const char *long_name[1] = {"a_name_of_64_bytes_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"};
    CHECK_INT_EQ(strlen(long_name[0]), 64);
    const int64_t one[1] = {1}, zero[1] = {0};
    CHECK_INT_EQ(dt_snapshot_write(path, 1, 1, long_name, one, DATA, &err), DT_ERR_DATA);
    CHECK_CONTAINS(err.msg, "1..63 bytes");
    CHECK_INT_EQ(dt_snapshot_write(path, 1, 1, NAMES, zero, DATA, &err), DT_ERR_DATA);
    CHECK_CONTAINS(err.msg, "tensor 0 (fc0.weight): count 0 out of range");
    CHECK_INT_EQ(dt_snapshot_write(path, 1, 0, NAMES, COUNTS, DATA, &err), DT_ERR_DATA);
    CHECK_INT_EQ(dt_snapshot_write(path, 1, 257, NAMES, COUNTS, DATA, &err), DT_ERR_DATA);
    CHECK_CONTAINS(err.msg, "257 tensors");
    CHECK_INT_EQ(dt_snapshot_write(path, -1, 3, NAMES, COUNTS, DATA, &err), DT_ERR_DATA);
    CHECK(!dt_path_exists(path));
    char missing[2048];
    snprintf(missing, sizeof missing, "%s/no/such/folder/x.bin", dir);
    CHECK_INT_EQ(dt_snapshot_write(missing, 1, 3, NAMES, COUNTS, DATA, &err), DT_ERR_IO);
    CHECK_CONTAINS(err.msg, "cannot create");
}

DT_TEST(digest_matches_hash)
{
    char dir[1024];
    const char *path = good_snapshot(dir, sizeof dir, "digest");
    /* Independently: per-tensor SHA-256 of the arrays, then the model digest. */
    uint8_t td[3][DT_DIGEST_BYTES], md[DT_DIGEST_BYTES];
    for (int i = 0; i < 3; i++) dt_sha256_f32(td[i], DATA[i], COUNTS[i]);
    dt_model_digest(md, NAMES, (const uint8_t(*)[DT_DIGEST_BYTES])td, 3);
    char want[DT_DIGEST_HEX], got[DT_DIGEST_HEX];
    dt_digest_hex(want, md);
    struct dt_snapshot s;
    struct dt_error err = {0};
    CHECK_INT_EQ(dt_snapshot_read(&s, path, &err), DT_OK);
    dt_snapshot_model_digest(got, &s, false);
    CHECK_STR_EQ(got, want);
    /* One bit of one value changes it; so does a tensor name. */
    uint32_t bits;
    memcpy(&bits, &s.data[9], 4);
    bits ^= 1u;
    memcpy(&s.data[9], &bits, 4);
    dt_snapshot_model_digest(got, &s, false);
    CHECK(strcmp(got, want) != 0);
    memcpy(&bits, &s.data[9], 4);
    bits ^= 1u;
    memcpy(&s.data[9], &bits, 4);
    s.names[1][0] = 'F';
    dt_snapshot_model_digest(got, &s, false);
    CHECK(strcmp(got, want) != 0);
    dt_snapshot_free(&s);
}

/* Read `bytes` written to dir/name and expect DT_ERR_DATA with a message naming the file
 * and containing `want`. */
static void expect_read_error(const char *dir, const char *name, const void *bytes, size_t n,
                              const char *want)
{
    char path[2048];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    write_bytes(path, bytes, n);
    struct dt_snapshot s;
    struct dt_error err = {0};
    CHECK_INT_EQ(dt_snapshot_read(&s, path, &err), DT_ERR_DATA);
    CHECK_CONTAINS(err.msg, path);
    CHECK_CONTAINS(err.msg, want);
    CHECK(s.data == NULL && s.names == NULL && s.counts == NULL && s.n_tensors == 0);
}

DT_TEST(read_errors)
{
    char dir[1024];
    const char *path = good_snapshot(dir, sizeof dir, "read_errors");
    size_t len = 0;
    unsigned char *good = (unsigned char *)dt_read_file(path, &len);
    CHECK(good && len == SNAP_BYTES);
    if (!good || len != SNAP_BYTES) return;
    unsigned char *buf = malloc(SNAP_BYTES + 64);
    char want[256];

    /* Truncated at every kind of place: in the magic, the header, the table, the data. */
    const size_t cuts[] = {0,
                           5,
                           8,
                           23,
                           24,
                           24 + 40,
                           24 + 3 * 72 - 1,
                           24 + 3 * 72,
                           24 + 3 * 72 + 1,
                           SNAP_BYTES - 4,
                           SNAP_BYTES - 1};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        size_t c = cuts[i];
        if (c < 24)
            snprintf(want, sizeof want, "truncated snapshot: expected at least 24 bytes, found %zu",
                     c);
        else if (c < 24 + 3 * 72)
            snprintf(want, sizeof want,
                     "truncated snapshot: expected at least %d bytes (header and 3-tensor "
                     "table), found %zu",
                     24 + 3 * 72, c);
        else
            snprintf(want, sizeof want, "truncated snapshot: expected %d bytes, found %zu",
                     SNAP_BYTES, c);
        expect_read_error(dir, "cut.bin", good, c, want);
    }

    memcpy(buf, good, SNAP_BYTES);
    buf[3] = 'X';
    expect_read_error(dir, "magic.bin", buf, SNAP_BYTES, "not a detrain snapshot (bad magic)");
    expect_read_error(dir, "magic_short.bin", "DTSNX", 5, "(bad magic)");

    memcpy(buf, good, SNAP_BYTES);
    memset(buf + SNAP_BYTES, 0, 12);
    expect_read_error(dir, "trailing.bin", buf, SNAP_BYTES + 12,
                      ": 12 trailing bytes after the last tensor");

    int64_t v64 = 0;
    memcpy(buf, good, SNAP_BYTES);
    memcpy(buf + 24 + 72 + 64, &v64, 8);
    expect_read_error(dir, "zero_count.bin", buf, SNAP_BYTES, ": tensor 1: count 0 out of range");
    v64 = -5;
    memcpy(buf + 24 + 72 + 64, &v64, 8);
    expect_read_error(dir, "neg_count.bin", buf, SNAP_BYTES, ": tensor 1: count -5 out of range");
    v64 = (int64_t)1 << 62; /* would overflow the size: refused, nothing allocated */
    memcpy(buf + 24 + 72 + 64, &v64, 8);
    expect_read_error(dir, "huge_count.bin", buf, SNAP_BYTES,
                      ": tensor 1: count 4611686018427387904 out of range");
    v64 = (int64_t)1 << 40; /* in range, but the file is far too small: checked before allocating */
    memcpy(buf + 24 + 72 + 64, &v64, 8);
    snprintf(want, sizeof want, "truncated snapshot: expected %lld bytes, found %d",
             24LL + 3 * 72 + 4 * (6LL + (1LL << 40) + 3), SNAP_BYTES);
    expect_read_error(dir, "big_count.bin", buf, SNAP_BYTES, want);

    int32_t v32 = 257;
    memcpy(buf, good, SNAP_BYTES);
    memcpy(buf + 16, &v32, 4);
    expect_read_error(dir, "many.bin", buf, SNAP_BYTES, ": tensor count 257 out of range (1..256)");
    v32 = 0;
    memcpy(buf + 16, &v32, 4);
    expect_read_error(dir, "none.bin", buf, SNAP_BYTES, ": tensor count 0 out of range");
    v32 = 7;
    memcpy(buf, good, SNAP_BYTES);
    memcpy(buf + 20, &v32, 4);
    expect_read_error(dir, "reserved.bin", buf, SNAP_BYTES, ": reserved header field is 7");
    v64 = -1;
    memcpy(buf, good, SNAP_BYTES);
    memcpy(buf + 8, &v64, 8);
    expect_read_error(dir, "neg_step.bin", buf, SNAP_BYTES, ": step -1 out of range");

    memcpy(buf, good, SNAP_BYTES);
    memset(buf + 24 + 2 * 72, 'a', 64); /* tensor 2's name fills all 64 bytes */
    expect_read_error(dir, "no_nul.bin", buf, SNAP_BYTES,
                      ": tensor 2: name without NUL terminator");
    memcpy(buf, good, SNAP_BYTES);
    buf[24] = '\0';
    expect_read_error(dir, "empty_name.bin", buf, SNAP_BYTES, ": tensor 0: empty name");
    memcpy(buf, good, SNAP_BYTES);
    buf[24 + 72 + 40] = 'z'; /* after "fc0.bias" and its NUL */
    expect_read_error(dir, "padding.bin", buf, SNAP_BYTES,
                      ": tensor 1: bytes after the name's NUL");

    /* Cannot open: DT_ERR_IO naming the file. */
    struct dt_snapshot s;
    struct dt_error err = {0};
    char missing[2048];
    snprintf(missing, sizeof missing, "%s/missing.bin", dir);
    CHECK_INT_EQ(dt_snapshot_read(&s, missing, &err), DT_ERR_IO);
    CHECK_CONTAINS(err.msg, missing);
    CHECK_CONTAINS(err.msg, "cannot open");
    CHECK_INT_EQ(dt_snapshot_read(&s, dir, &err), DT_ERR_IO); /* a folder */
    CHECK(s.data == NULL);
    free(buf);
    free(good);
}

/* A two-tensor snapshot {w[count_w], b[1]} in memory. */
static void write_wb(const char *path, int64_t step, const float *w, int64_t count_w, float b,
                     const char *bname)
{
    const char *names[2] = {"w", bname};
    const int64_t counts[2] = {count_w, 1};
    const float bb[1] = {b};
    const float *const data[2] = {w, bb};
    struct dt_error err = {0};
    CHECK_INT_EQ(dt_snapshot_write(path, step, 2, names, counts, data, &err), DT_OK);
}

static void read_ok(struct dt_snapshot *s, const char *path)
{
    struct dt_error err = {0};
    CHECK_INT_EQ(dt_snapshot_read(s, path, &err), DT_OK);
}

DT_TEST(distance_known_values)
{
    char dir[1024], pa[2048], pb[2048], pc[2048], pd[2048], pe[2048];
    fresh_dir(dir, sizeof dir, "distance");
    snprintf(pa, sizeof pa, "%s/a.bin", dir);
    snprintf(pb, sizeof pb, "%s/b.bin", dir);
    snprintf(pc, sizeof pc, "%s/c.bin", dir);
    snprintf(pd, sizeof pd, "%s/d.bin", dir);
    snprintf(pe, sizeof pe, "%s/e.bin", dir);
    /* a = (3, 0 | 0), b = (0, 0 | 4): the distance spans both tensors, 3-4-5. */
    const float wa[2] = {3.0f, 0.0f}, wb[2] = {0.0f, 0.0f}, w3[3] = {0.0f, 0.0f, 0.0f};
    write_wb(pa, 1, wa, 2, 0.0f, "b");
    write_wb(pb, 1, wb, 2, 4.0f, "b");
    write_wb(pc, 1, wb, 2, 4.0f, "bias"); /* other name */
    write_wb(pd, 1, w3, 3, 4.0f, "b");    /* other size */
    const char *one_name[1] = {"w"};
    const int64_t one_count[1] = {3};
    const float *const one_data[1] = {w3};
    struct dt_error err = {0};
    CHECK_INT_EQ(dt_snapshot_write(pe, 1, 1, one_name, one_count, one_data, &err), DT_OK);

    struct dt_snapshot a, b, c, d, e;
    read_ok(&a, pa);
    read_ok(&b, pb);
    read_ok(&c, pc);
    read_ok(&d, pd);
    read_ok(&e, pe);
    double l2 = -1, na = -1, nb = -1;
    CHECK_INT_EQ(dt_snapshot_distance(&a, &b, &l2, &na, &nb, &err), DT_OK);
    CHECK(l2 == 5.0);
    CHECK(na == 3.0);
    CHECK(nb == 4.0);
    CHECK_INT_EQ(dt_snapshot_distance(&a, &a, &l2, &na, &nb, &err), DT_OK);
    CHECK(l2 == 0.0 && na == 3.0 && nb == 3.0);
    CHECK_INT_EQ(dt_snapshot_distance(&a, &c, &l2, &na, &nb, &err), DT_ERR_DATA);
    CHECK_CONTAINS(err.msg, "tensor 1: named 'b' vs 'bias'");
    CHECK_INT_EQ(dt_snapshot_distance(&a, &d, &l2, &na, &nb, &err), DT_ERR_DATA);
    CHECK_CONTAINS(err.msg, "tensor 0 (w): 2 vs 3 values");
    CHECK_INT_EQ(dt_snapshot_distance(&a, &e, &l2, &na, &nb, &err), DT_ERR_DATA);
    CHECK_CONTAINS(err.msg, "tensor count (2 vs 1)");
    dt_snapshot_free(&a);
    dt_snapshot_free(&b);
    dt_snapshot_free(&c);
    dt_snapshot_free(&d);
    dt_snapshot_free(&e);
}

DT_TEST(list_ascending)
{
    char dir[1024], sdir[2048], path[2200];
    fresh_dir(dir, sizeof dir, "list");
    int64_t *steps = (int64_t *)&steps; /* must be reset */
    int n = -1;
    struct dt_error err = {0};
    /* No snapshots folder: OK, nothing. */
    CHECK_INT_EQ(dt_snapshot_list(dir, &steps, &n, &err), DT_OK);
    CHECK(n == 0 && steps == NULL);
    dt_snapshot_dir(sdir, sizeof sdir, dir);
    CHECK_INT_EQ(dt_mkdir_p(sdir, NULL), DT_OK);
    CHECK_INT_EQ(dt_snapshot_list(dir, &steps, &n, &err), DT_OK);
    CHECK(n == 0 && steps == NULL);
    const char *files[] = {"step-00000010.bin",  "step-00000002.bin",  "step-1000.bin",
                           "step-00000000.bin",  "notes.txt",          "step-.bin",
                           "step-x1.bin",        "step-00000003.binx", "step-00000004.bin.tmp-77",
                           "xstep-00000005.bin", "step-00000006.BIN",  "step--7.bin"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", sdir, files[i]);
        write_bytes(path, "x", 1);
    }
    CHECK_INT_EQ(dt_snapshot_list(dir, &steps, &n, &err), DT_OK);
    CHECK_INT_EQ(n, 4);
    if (n == 4) {
        CHECK_INT_EQ(steps[0], 0);
        CHECK_INT_EQ(steps[1], 2);
        CHECK_INT_EQ(steps[2], 10);
        CHECK_INT_EQ(steps[3], 1000);
    }
    free(steps);
}

DT_TEST(write_leaves_no_temp)
{
    char dir[1024], path[2048];
    fill_model();
    fresh_dir(dir, sizeof dir, "atomic");
    dt_snapshot_path(path, sizeof path, dir, 7);
    char sdir[2048];
    dt_snapshot_dir(sdir, sizeof sdir, dir);
    CHECK_INT_EQ(dt_mkdir_p(sdir, NULL), DT_OK);
    struct dt_error err = {0};
    CHECK_INT_EQ(dt_snapshot_write(path, 7, 3, NAMES, COUNTS, DATA, &err), DT_OK);
    /* Overwriting replaces the file whole. */
    T1[0] = 9.0f;
    CHECK_INT_EQ(dt_snapshot_write(path, 7, 3, NAMES, COUNTS, DATA, &err), DT_OK);
    DIR *d = opendir(sdir);
    CHECK(d != NULL);
    int files = 0;
    struct dirent *de;
    while (d && (de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0) continue;
        files++;
        CHECK_STR_EQ(de->d_name, "step-00000007.bin");
    }
    if (d) closedir(d);
    CHECK_INT_EQ(files, 1);
    struct dt_snapshot s;
    read_ok(&s, path);
    CHECK(s.data && s.data[6] == 9.0f);
    dt_snapshot_free(&s);
}

/* ---- compare on fabricated folders ---------------------------------------------------- */

/* A replica's weights at a step: w (2 values) and b (1 value). */
struct weights {
    float w[2], b;
};

/* The reference run: w = (1, 2), b = 2 at every step (norm 3). */
static struct weights ref_weights(int64_t step)
{
    (void)step;
    return (struct weights){{1.0f, 2.0f}, 2.0f};
}

/* The divergent run: b += 3 from step 3, w[1] += 4 from step 4. At step 4 the distance to
 * the reference is sqrt(4^2 + 3^2) = 5 and the norm sqrt(1 + 36 + 25) = sqrt(62). */
static struct weights other_weights(int64_t step)
{
    struct weights x = ref_weights(step);
    if (step >= 3) x.b += 3.0f;
    if (step >= 4) x.w[1] += 4.0f;
    return x;
}

static void weights_digests(char model_hex[DT_DIGEST_HEX], char w_hex[DT_DIGEST_HEX],
                            char b_hex[DT_DIGEST_HEX], const struct weights *x)
{
    const char *names[2] = {"w", "b"};
    uint8_t td[2][DT_DIGEST_BYTES], md[DT_DIGEST_BYTES];
    dt_sha256_f32(td[0], x->w, 2);
    dt_sha256_f32(td[1], &x->b, 1);
    dt_model_digest(md, names, (const uint8_t(*)[DT_DIGEST_BYTES])td, 2);
    dt_digest_hex(model_hex, md);
    dt_digest_hex(w_hex, td[0]);
    dt_digest_hex(b_hex, td[1]);
}

/* A replica folder as `detrain run` writes it: trace.csv and tensors.csv for steps
 * 0..n_steps-1, snapshots at the given steps. */
static void make_replica(const char *dir, struct weights (*fn)(int64_t), int64_t n_steps,
                         const int64_t *snap_steps, int n_snaps)
{
    struct dt_error err = {0};
    CHECK_INT_EQ(dt_mkdir_p(dir, &err), DT_OK);
    struct dt_trace_writer tw;
    CHECK_INT_EQ(dt_trace_open(&tw, dir, true, DT_HASH_DIGEST_SHA256, &err), DT_OK);
    for (int64_t s = 0; s < n_steps; s++) {
        struct weights x = fn(s);
        char m[DT_DIGEST_HEX], w[DT_DIGEST_HEX], b[DT_DIGEST_HEX];
        weights_digests(m, w, b, &x);
        CHECK_INT_EQ(dt_trace_write_tensor(&tw, s, "w", w, &err), DT_OK);
        CHECK_INT_EQ(dt_trace_write_tensor(&tw, s, "b", b, &err), DT_OK);
        CHECK_INT_EQ(dt_trace_flush(&tw, &err), DT_OK);
        CHECK_INT_EQ(dt_trace_write_row(&tw, s, s == 0 ? NAN : 1.0f, m, &err), DT_OK);
    }
    CHECK_INT_EQ(dt_trace_close(&tw, &err), DT_OK);
    char sdir[2048], path[2200];
    dt_snapshot_dir(sdir, sizeof sdir, dir);
    CHECK_INT_EQ(dt_mkdir_p(sdir, &err), DT_OK);
    for (int i = 0; i < n_snaps; i++) {
        struct weights x = fn(snap_steps[i]);
        dt_snapshot_path(path, sizeof path, dir, snap_steps[i]);
        write_wb(path, snap_steps[i], x.w, 2, x.b, "b");
    }
}

/* dt_compare_paths into a string. */
static enum dt_status compare_to_text(char *text, size_t size, const char *a, const char *b,
                                      bool *diverged, struct dt_error *err)
{
    FILE *f = fmemopen(text, size, "w");
    CHECK(f != NULL);
    if (!f) return DT_ERR_IO;
    enum dt_status st = dt_compare_paths(a, b, f, diverged, err);
    fclose(f);
    return st;
}

static char text[65536];

DT_TEST(compare_identical_replicas)
{
    char dir[1024], ra[2048], rb[2048];
    fresh_dir(dir, sizeof dir, "cmp_identical");
    snprintf(ra, sizeof ra, "%s/a", dir);
    snprintf(rb, sizeof rb, "%s/b", dir);
    const int64_t snaps[] = {0, 2, 4};
    make_replica(ra, ref_weights, 5, snaps, 3);
    make_replica(rb, ref_weights, 5, snaps, 3);
    bool diverged = true;
    struct dt_error err = {0};
    CHECK_INT_EQ(compare_to_text(text, sizeof text, ra, rb, &diverged, &err), DT_OK);
    CHECK(!diverged);
    CHECK_CONTAINS(text, "identical: 5 hashed steps, every model digest equal\n");
    CHECK_CONTAINS(text, "snapshots: 3 steps kept by both");
    CHECK_CONTAINS(text, "           4               0               0  identical\n");

    struct dt_snapshot_diff *rows = NULL;
    int n = 0;
    CHECK_INT_EQ(dt_compare_snapshots(&rows, &n, ra, rb, &err), DT_OK);
    CHECK_INT_EQ(n, 3);
    for (int i = 0; i < n; i++) {
        CHECK(rows[i].identical && rows[i].l2 == 0.0 && rows[i].rel_l2 == 0.0);
        CHECK(rows[i].norm_a == 3.0 && rows[i].norm_b == 3.0);
    }
    free(rows);

    /* Traces alone (files, not folders): no snapshot table. */
    char ta[2200], tb[2200];
    snprintf(ta, sizeof ta, "%s/trace.csv", ra);
    snprintf(tb, sizeof tb, "%s/trace.csv", rb);
    CHECK_INT_EQ(compare_to_text(text, sizeof text, ta, tb, &diverged, &err), DT_OK);
    CHECK(!diverged);
    CHECK(strstr(text, "snapshots") == NULL);
}

DT_TEST(compare_diverged_replicas)
{
    char dir[1024], ra[2048], rb[2048];
    fresh_dir(dir, sizeof dir, "cmp_diverged");
    snprintf(ra, sizeof ra, "%s/a", dir);
    snprintf(rb, sizeof rb, "%s/b", dir);
    const int64_t snaps_a[] = {0, 2, 3, 4}, snaps_b[] = {0, 2, 4, 5};
    make_replica(ra, ref_weights, 6, snaps_a, 4);
    make_replica(rb, other_weights, 6, snaps_b, 4);
    bool diverged = false;
    struct dt_error err = {0};
    CHECK_INT_EQ(compare_to_text(text, sizeof text, ra, rb, &diverged, &err), DT_OK);
    CHECK(diverged);
    CHECK_CONTAINS(text, "diverged at step 3 (after 3 equal hashed steps)\n");
    CHECK_CONTAINS(text, "  first divergent tensor: b\n");
    CHECK_CONTAINS(text, "snapshots: 3 steps kept by both"); /* 0, 2, 4: not 3 nor 5 */
    /* Step 4: L2 5, relative 5 / ((3 + sqrt(62)) / 2) = 0.919624... */
    double rel = 5.0 / ((3.0 + sqrt(62.0)) / 2.0);
    CHECK_NEAR(rel, 0.9196241, 1e-7);
    CHECK_CONTAINS(text, "           4               5        0.919624\n");
    CHECK_CONTAINS(text, "           2               0               0  identical\n");

    struct dt_snapshot_diff *rows = NULL;
    int n = 0;
    CHECK_INT_EQ(dt_compare_snapshots(&rows, &n, ra, rb, &err), DT_OK);
    CHECK_INT_EQ(n, 3);
    if (n == 3) {
        CHECK(rows[0].step == 0 && rows[1].step == 2 && rows[2].step == 4);
        CHECK(rows[0].identical && rows[1].identical && !rows[2].identical);
        CHECK(rows[2].l2 == 5.0);
        CHECK(rows[2].norm_a == 3.0);
        CHECK(rows[2].norm_b == sqrt(62.0));
        CHECK(rows[2].rel_l2 == rel);
    }
    free(rows);
}

/* A snapshot whose bytes changed (same size, still a valid file) no longer matches its
 * trace: DT_ERR_DATA naming the file, before any distance is reported. */
DT_TEST(compare_corrupted_snapshot)
{
    char dir[1024], ra[2048], rb[2048], path[2200];
    fresh_dir(dir, sizeof dir, "cmp_corrupt");
    snprintf(ra, sizeof ra, "%s/a", dir);
    snprintf(rb, sizeof rb, "%s/b", dir);
    const int64_t snaps[] = {0, 2, 4};
    make_replica(ra, ref_weights, 5, snaps, 3);
    make_replica(rb, ref_weights, 5, snaps, 3);
    dt_snapshot_path(path, sizeof path, rb, 2);
    size_t len = 0;
    unsigned char *raw = (unsigned char *)dt_read_file(path, &len);
    CHECK(raw && len == 24 + 2 * 72 + 12);
    if (!raw) return;
    raw[len - 1] ^= 0x01; /* one bit of b */
    write_bytes(path, raw, len);
    free(raw);
    bool diverged = false;
    struct dt_error err = {0};
    CHECK_INT_EQ(compare_to_text(text, sizeof text, ra, rb, &diverged, &err), DT_ERR_DATA);
    CHECK_CONTAINS(err.msg, path);
    CHECK_CONTAINS(err.msg,
                   "does not match trace.csv at step 2: snapshot corrupted or from another run");

    /* A snapshot of another step filed under this one's name is caught too. */
    struct weights x = ref_weights(2);
    write_wb(path, 3, x.w, 2, x.b, "b");
    CHECK_INT_EQ(compare_to_text(text, sizeof text, ra, rb, &diverged, &err), DT_ERR_DATA);
    CHECK_CONTAINS(err.msg, "holds step 3, not 2");

    /* A truncated one: the reader's message comes through. */
    write_bytes(path, "DTSNAP01", 8);
    CHECK_INT_EQ(compare_to_text(text, sizeof text, ra, rb, &diverged, &err), DT_ERR_DATA);
    CHECK_CONTAINS(err.msg, "truncated snapshot");
}

/* Two experiment folders of tests/data/tiny.yaml (portable, 2 replicas): replica 0 equal,
 * replica 1 diverged; then replica 1 missing in B. */
DT_TEST(compare_experiment_folders)
{
    char dir[1024], ea[2048], eb[2048], path[4096];
    fresh_dir(dir, sizeof dir, "cmp_experiment");
    snprintf(ea, sizeof ea, "%s/cpu", dir);
    snprintf(eb, sizeof eb, "%s/gpu", dir);
    struct dt_experiment *exp = calloc(1, sizeof *exp);
    struct dt_error err = {0};
    CHECK_INT_EQ(dt_config_load(exp, DT_TEST_DATA_DIR "/tiny.yaml", NULL, 0, &err), DT_OK);
    CHECK_INT_EQ(dt_cell_count(exp), 1);
    CHECK_INT_EQ(exp->replicas, 2);
    const int64_t snaps[] = {0, 2, 4};
    const char *sides[2] = {ea, eb};
    for (int side = 0; side < 2; side++) {
        CHECK_INT_EQ(dt_mkdir_p(sides[side], &err), DT_OK);
        snprintf(path, sizeof path, "%s/config.json", sides[side]);
        FILE *f = fopen(path, "w");
        CHECK(f != NULL);
        if (!f) return;
        dt_config_write_json(f, exp);
        fclose(f);
        for (int r = 0; r < 2; r++) {
            char rdir[4096];
            dt_replica_dir(rdir, sizeof rdir, sides[side], exp, 0, r);
            make_replica(rdir, side == 1 && r == 1 ? other_weights : ref_weights, 5, snaps, 3);
        }
    }
    /* The JSON reads back as the same experiment (what compare relies on). */
    struct dt_experiment *back = calloc(1, sizeof *back);
    snprintf(path, sizeof path, "%s/config.json", ea);
    enum dt_status st = dt_config_load(back, path, NULL, 0, &err);
    if (st != DT_OK) fprintf(stderr, "config.json does not load back: %s\n", err.msg);
    CHECK_INT_EQ(st, DT_OK);
    free(back);

    bool diverged = false;
    st = compare_to_text(text, sizeof text, ea, eb, &diverged, &err);
    if (st != DT_OK) fprintf(stderr, "compare: %s\n", err.msg);
    CHECK_INT_EQ(st, DT_OK);
    CHECK(diverged);
    CHECK_CONTAINS(text, "portable/replica-0: identical (5 steps)\n");
    CHECK_CONTAINS(text, "portable/replica-1: diverged at step 3, tensor b, final L2 5 "
                         "(relative 0.92, step 4)\n");
    CHECK_CONTAINS(text, "total: 2 replicas: 1 identical, 1 diverged, 0 missing\n");

    /* Same folder against itself: identical. */
    CHECK_INT_EQ(compare_to_text(text, sizeof text, ea, ea, &diverged, &err), DT_OK);
    CHECK(!diverged);
    CHECK_CONTAINS(text, "total: 2 replicas: 2 identical, 0 diverged, 0 missing\n");

    /* Replica 1 gone from B (its trace, as when it never started). */
    char rdir[2048];
    dt_replica_dir(rdir, sizeof rdir, eb, exp, 0, 1);
    snprintf(path, sizeof path, "%s/trace.csv", rdir);
    CHECK_INT_EQ(remove(path), 0);
    CHECK_INT_EQ(compare_to_text(text, sizeof text, ea, eb, &diverged, &err), DT_OK);
    CHECK(diverged);
    CHECK_CONTAINS(text, "portable/replica-1: missing in B\n");
    CHECK_CONTAINS(text, "total: 2 replicas: 1 identical, 0 diverged, 1 missing\n");

    /* An experiment folder against a replica folder is a usage error. */
    dt_replica_dir(rdir, sizeof rdir, eb, exp, 0, 0);
    CHECK_INT_EQ(compare_to_text(text, sizeof text, ea, rdir, &diverged, &err), DT_ERR_USAGE);
    CHECK_CONTAINS(err.msg, "is an experiment folder");
    free(exp);
}

/* The binary: 0 identical, 1 diverged, 2 for a corrupted snapshot. */
DT_TEST(compare_cli_exit_codes)
{
    char dir[1024], ra[2048], rb[2048], rc_[2048], path[2200];
    fresh_dir(dir, sizeof dir, "cmp_cli");
    snprintf(ra, sizeof ra, "%s/a", dir);
    snprintf(rb, sizeof rb, "%s/b", dir);
    snprintf(rc_, sizeof rc_, "%s/c", dir);
    const int64_t snaps[] = {0, 4};
    make_replica(ra, ref_weights, 5, snaps, 2);
    make_replica(rb, ref_weights, 5, snaps, 2);
    make_replica(rc_, other_weights, 5, snaps, 2);
    CHECK_INT_EQ(
        dt_run_capture(text, sizeof text, "'%s' compare '%s' '%s'", DT_DETRAIN_EXE, ra, rb), 0);
    CHECK_CONTAINS(text, "identical: 5 hashed steps");
    CHECK_INT_EQ(
        dt_run_capture(text, sizeof text, "'%s' compare '%s' '%s'", DT_DETRAIN_EXE, ra, rc_), 1);
    CHECK_CONTAINS(text, "first divergent tensor: b");
    CHECK_CONTAINS(text, "           4               5        0.919624\n");
    dt_snapshot_path(path, sizeof path, rb, 4);
    write_bytes(path, "DTSNAP01", 8);
    CHECK_INT_EQ(
        dt_run_capture(text, sizeof text, "'%s' compare '%s' '%s'", DT_DETRAIN_EXE, ra, rb), 2);
    CHECK_CONTAINS(text, "truncated snapshot");
}

DT_TEST_MAIN(DT_CASE(round_trip), DT_CASE(write_rejects_bad_input), DT_CASE(digest_matches_hash),
             DT_CASE(read_errors), DT_CASE(distance_known_values), DT_CASE(list_ascending),
             DT_CASE(write_leaves_no_temp), DT_CASE(compare_identical_replicas),
             DT_CASE(compare_diverged_replicas), DT_CASE(compare_corrupted_snapshot),
             DT_CASE(compare_experiment_folders), DT_CASE(compare_cli_exit_codes))
